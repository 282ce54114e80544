/* strategy_resolve: DeepSpeed's batch rule (every row of deepspeed.md §1.2), defaults by
 * version, "auto", aliases and deprecated keys, strict sections, provenance sources, --set,
 * our strategy JSON, and every refusal. Model and cluster are filled by hand. */
#include <stdlib.h>
#include <unistd.h>

#include "../../core/core.h"
#include "test.h"

struct fx {
	char dir[64];
	int n;
	struct model m;
	struct cluster c;
	struct strategy s;
	struct tw_err err;
};

static void fx_model_llama70b(struct model *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "llama2-70b");
	m->layers = 80;
	m->hidden = 8192;
	m->heads = 64;
	m->kv_heads = 8;
	m->ffn_hidden = 28672;
	m->vocab = 32000;
	m->seq_len = 4096;
}

static void fx_init(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/twin_test_strategy_XXXXXX");
	if (!mkdtemp(f->dir))
		abort();
	fx_model_llama70b(&f->m);
	snprintf(f->c.name, sizeof(f->c.name), "test-h100");
	snprintf(f->c.gpu.name, sizeof(f->c.gpu.name), "H100");
	f->c.gpu.peak_tflops[TW_FP8] = 1979;
	f->c.gpu.peak_tflops[TW_BF16] = f->c.gpu.peak_tflops[TW_FP16] = 989.4;
	f->c.node.gpus = 8;
	f->c.node.nvme_GBps = 25;
}

static void fx_done(struct fx *f)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", f->dir);
}

static const char *fx_file(struct fx *f, const char *text)
{
	static char path[128]; /* test-only scratch; each call's result is used at once */
	snprintf(path, sizeof(path), "%s/f%d.json", f->dir, f->n++);
	FILE *o = fopen(path, "w");
	fputs(text, o);
	fclose(o);
	return path;
}

/* Resolve with a ds_config text and/or a strategy text (either may be NULL). */
static enum tw_result run(struct fx *f, const char *ds, const char *strat, int64_t gpus,
			  const char *const *sets, int nsets)
{
	char dsp[128] = "", stp[128] = "";
	if (ds)
		snprintf(dsp, sizeof(dsp), "%s", fx_file(f, ds));
	if (strat)
		snprintf(stp, sizeof(stp), "%s", fx_file(f, strat));
	struct strat_inputs in = {
		.ds_config_path = ds ? dsp : NULL,
		.strategy_path = strat ? stp : NULL,
		.strategies_dir = TWIN_SOURCE_DIR "/examples/strategies",
		.sets = sets,
		.nsets = nsets,
		.gpus = gpus,
	};
	tw_err_clear(&f->err);
	return strategy_resolve(&in, &f->m, &f->c, &f->s, &f->err);
}

static const struct strat_prov *prov(const struct strategy *s, const char *path)
{
	for (int i = 0; i < s->nprov; i++)
		if (!strcmp(s->prov[i].path, path))
			return &s->prov[i];
	return NULL;
}

#define CHECK_OK(T, f, call)                                                                       \
	do {                                                                                       \
		enum tw_result rc_ = (call);                                                       \
		if (rc_ != TW_OK)                                                                  \
			printf("#   unexpected error: %s\n", (f)->err.msg);                        \
		CHECK(T, rc_ == TW_OK);                                                            \
	} while (0)
#define CHECK_FAILS(T, f, call, needle)                                                            \
	do {                                                                                       \
		enum tw_result rc_ = (call);                                                       \
		CHECK(T, rc_ != TW_OK);                                                            \
		CHECK_STR_CONTAINS(T, (f)->err.msg, needle);                                      \
	} while (0)
#define CHECK_SRC(T, s, path, want)                                                                \
	do {                                                                                       \
		const struct strat_prov *p_ = prov(s, path);                                       \
		CHECK(T, p_ != NULL);                                                              \
		if (p_)                                                                            \
			CHECK_STR_CONTAINS(T, strat_src_name(p_->src), want);                      \
	} while (0)

/* ---- the batch rule: every row of the derivation table ---------------------------------------- */

static void test_batch_all_three(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_batch_size\":32,\"train_micro_batch_size_per_gpu\":2,"
				"\"gradient_accumulation_steps\":2}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.global_batch, 32);
	CHECK_EQ_INT(T, f.s.micro_batch, 2);
	CHECK_EQ_INT(T, f.s.grad_accum, 2);
	CHECK_SRC(T, &f.s, "train_batch_size", "file");
	CHECK_SRC(T, &f.s, "gradient_accumulation_steps", "file");
	/* inconsistent: DeepSpeed's words */
	CHECK_FAILS(T, &f, run(&f, "{\"train_batch_size\":32,\"train_micro_batch_size_per_gpu\":2,"
				   "\"gradient_accumulation_steps\":1}", NULL, 8, NULL, 0),
		    "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
		    "world_size 32 != 2 * 1 * 8");
	fx_done(&f);
}

static void test_batch_tb_micro(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_batch_size\":32,\"train_micro_batch_size_per_gpu\":2}",
			    NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.grad_accum, 2);
	CHECK_SRC(T, &f.s, "gradient_accumulation_steps", "derived");
	/* the doc's example: 10 // 1 // 4 = 2, then 10 != 1 * 2 * 4 */
	CHECK_FAILS(T, &f, run(&f, "{\"train_batch_size\":10,\"train_micro_batch_size_per_gpu\":1}",
			       NULL, 4, NULL, 0),
		    "10 != 1 * 2 * 4");
	fx_done(&f);
}

static void test_batch_tb_gas(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_batch_size\":64,\"gradient_accumulation_steps\":4}", NULL,
			    8, NULL, 0));
	CHECK_EQ_INT(T, f.s.micro_batch, 2);
	CHECK_SRC(T, &f.s, "train_micro_batch_size_per_gpu", "derived");
	fx_done(&f);
}

static void test_batch_micro_gas(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":2,"
				"\"gradient_accumulation_steps\":3}", NULL, 16, NULL, 0));
	CHECK_EQ_INT(T, f.s.global_batch, 96);
	CHECK_SRC(T, &f.s, "train_batch_size", "derived");
	fx_done(&f);
}

static void test_batch_only_tb(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_batch_size\":16}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.grad_accum, 1);
	CHECK_EQ_INT(T, f.s.micro_batch, 2);
	/* 4 samples over 8 ranks: micro = 0 */
	CHECK_FAILS(T, &f, run(&f, "{\"train_batch_size\":4}", NULL, 8, NULL, 0),
		    "Micro batch size per gpu: 0 has to be greater than 0");
	fx_done(&f);
}

static void test_batch_only_micro(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":4}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.grad_accum, 1);
	CHECK_EQ_INT(T, f.s.global_batch, 32);
	fx_done(&f);
}

static void test_batch_none(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_FAILS(T, &f, run(&f, "{}", NULL, 8, NULL, 0),
		    "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
	CHECK_FAILS(T, &f, run(&f, "{\"gradient_accumulation_steps\":4}", NULL, 8, NULL, 0),
		    "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
	/* sign checks in DeepSpeed's words */
	CHECK_FAILS(T, &f, run(&f, "{\"train_batch_size\":0,\"train_micro_batch_size_per_gpu\":1}",
			       NULL, 8, NULL, 0),
		    "Train batch size: 0 has to be greater than 0");
	CHECK_FAILS(T, &f, run(&f, "{\"train_batch_size\":4,\"train_micro_batch_size_per_gpu\":1}",
			       NULL, 8, NULL, 0),
		    "Gradient accumulation steps: 0 has to be greater than 0");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":-2}", NULL, 8, NULL, 0),
		    "has to be greater than 0");
	/* no ds_config at all: one sample per GPU */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"deepspeed\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.micro_batch, 1);
	CHECK_EQ_INT(T, f.s.global_batch, 8);
	fx_done(&f);
}

/* the data-parallel world excludes tp, pp and cp */
static void test_batch_world_is_dp(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_batch_size\":64,\"train_micro_batch_size_per_gpu\":1}",
			    "{\"framework\":\"deepspeed\",\"pp\":2,\"tp\":2}", 16, NULL, 0));
	CHECK_EQ_INT(T, f.s.dp, 4);
	CHECK_EQ_INT(T, f.s.grad_accum, 16);
	fx_done(&f);
}

/* ---- defaults ---------------------------------------------------------------------------------- */

static void test_defaults(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,"
				"\"zero_optimization\":{\"stage\":2}}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.zero_stage, 2);
	CHECK_EQ_INT(T, f.s.reduce_bucket_size, 500000000);
	CHECK_EQ_INT(T, f.s.allgather_bucket_size, 500000000);
	CHECK_EQ_INT(T, f.s.prefetch_bucket_size, 50000000);
	CHECK_EQ_INT(T, f.s.param_persistence_threshold, 100000);
	CHECK_EQ_INT(T, f.s.max_live_parameters, 1000000000);
	CHECK_EQ_INT(T, f.s.max_reuse_distance, 1000000000);
	CHECK_EQ_INT(T, f.s.sub_group_size, 1000000000);
	CHECK(T, !f.s.overlap_comm); /* only stage 3 turns it on */
	CHECK(T, f.s.contiguous_gradients);
	CHECK(T, f.s.reduce_scatter);
	CHECK(T, f.s.use_multi_rank_bucket_allreduce);
	CHECK_EQ_INT(T, f.s.param_dtype, TW_FP32);
	CHECK_EQ_INT(T, f.s.optimizer, STRAT_OPT_ADAMW);
	CHECK_SRC(T, &f.s, "zero_optimization.reduce_bucket_size", "default");
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,"
				"\"zero_optimization\":{\"stage\":3}}", NULL, 8, NULL, 0));
	CHECK(T, f.s.overlap_comm);
	fx_done(&f);
}

static void test_defaults_by_version(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	const char *ds = "{\"train_micro_batch_size_per_gpu\":1,\"bf16\":{\"enabled\":true},"
			 "\"zero_optimization\":{\"stage\":3,\"offload_optimizer\":{\"device\":"
			 "\"cpu\"},\"offload_param\":{\"device\":\"cpu\"}}}";
	CHECK_OK(T, &f, run(&f, ds, NULL, 8, NULL, 0)); /* default version 0.19.6 */
	CHECK_NEAR(T, f.s.gradient_clipping, 1.0, 0);
	CHECK(T, f.s.offload_pin_memory);
	CHECK(T, f.s.offload_param_pin_memory);
	CHECK(T, f.s.check_grad_overflow);
	CHECK_STR_CONTAINS(T, prov(&f.s, "gradient_clipping")->why, ">= 0.19.3");

	const char *const v4[] = {"deepspeed_version=0.19.4"};
	CHECK_OK(T, &f, run(&f, ds, NULL, 8, v4, 1));
	CHECK_NEAR(T, f.s.gradient_clipping, 1.0, 0);
	CHECK(T, !f.s.offload_pin_memory);
	CHECK(T, !f.s.offload_param_pin_memory);
	CHECK_SRC(T, &f.s, "deepspeed_version", "set");

	const char *const v14[] = {"deepspeed_version=0.14.0"};
	CHECK_OK(T, &f, run(&f, ds, NULL, 8, v14, 1));
	CHECK_NEAR(T, f.s.gradient_clipping, 0.0, 0);
	CHECK(T, !f.s.check_grad_overflow);
	CHECK(T, !f.s.offload_pin_memory);

	/* ZeRO-3's synchronized fetch until 0.6.0; its unprinted norm strings from 0.3.15 */
	const char *z3 = "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{\"stage\":3}}";
	const char *const v0314[] = {"deepspeed_version=0.3.14"}, *const v0315[] = {"deepspeed_version=0.3.15"};
	const char *const v0510[] = {"deepspeed_version=0.5.10"}, *const v060[] = {"deepspeed_version=0.6.0"};
	CHECK_OK(T, &f, run(&f, z3, NULL, 8, v0314, 1));
	CHECK(T, f.s.ds_fetch_sync && !f.s.ds_fetch_norm && f.s.ds_fetch_per_param);
	CHECK_OK(T, &f, run(&f, z3, NULL, 8, v0315, 1));
	CHECK(T, f.s.ds_fetch_sync && f.s.ds_fetch_norm);
	CHECK_OK(T, &f, run(&f, z3, NULL, 8, v0510, 1));
	CHECK(T, f.s.ds_fetch_sync && f.s.ds_fetch_norm && !f.s.ds_fetch_per_param);
	CHECK_OK(T, &f, run(&f, z3, NULL, 8, v060, 1));
	CHECK(T, !f.s.ds_fetch_sync && !f.s.ds_fetch_norm && !f.s.ds_rs_per_param);

	const char *const bad[] = {"deepspeed_version=latest"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 8, bad, 1), "is not a version like 0.19.6");

	/* ZeRO-1/2's bucket reduction: one all-reduce a bucket from 0.12.4 (the key's default);
	 * without it, partition by partition: reduced to the owner before 0.12.4 (average_tensor's
	 * dist.reduce) and from 0.13.0, all-reduced in 0.12.4 - 0.12.x; the releases before
	 * 0.12.4 refuse the key */
	const char *z2 = "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{\"stage\":2}}";
	CHECK_OK(T, &f, run(&f, z2, NULL, 8, NULL, 0));
	CHECK(T, f.s.use_multi_rank_bucket_allreduce);
	CHECK(T, f.s.ds_reduce_rooted);
	const char *const v123[] = {"deepspeed_version=0.12.3"};
	CHECK_OK(T, &f, run(&f, z2, NULL, 8, v123, 1));
	CHECK(T, !f.s.use_multi_rank_bucket_allreduce);
	CHECK(T, f.s.ds_reduce_rooted);
	CHECK_STR_CONTAINS(T, prov(&f.s, "zero_optimization.use_multi_rank_bucket_allreduce")->why,
			   "< 0.12.4");
	const char *z2m = "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{\"stage\":2,"
			  "\"use_multi_rank_bucket_allreduce\":false}}";
	CHECK_FAILS(T, &f, run(&f, z2m, NULL, 8, v123, 1), "arrived in DeepSpeed 0.12.4");
	const char *const v125[] = {"deepspeed_version=0.12.5"};
	CHECK_OK(T, &f, run(&f, z2m, NULL, 8, v125, 1));
	CHECK(T, !f.s.use_multi_rank_bucket_allreduce);
	CHECK(T, !f.s.ds_reduce_rooted);
	fx_done(&f);
}

/* ---- "auto" ------------------------------------------------------------------------------------ */

static void test_auto_hf(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	const char *ds = "{\"train_batch_size\":\"auto\",\"train_micro_batch_size_per_gpu\":\"auto\","
			 "\"gradient_accumulation_steps\":\"auto\",\"gradient_clipping\":\"auto\","
			 "\"bf16\":{\"enabled\":\"auto\"},\"fp16\":{\"enabled\":\"auto\"},"
			 "\"zero_optimization\":{\"stage\":3,\"reduce_bucket_size\":\"auto\","
			 "\"stage3_prefetch_bucket_size\":\"auto\","
			 "\"stage3_param_persistence_threshold\":\"auto\",\"sub_group_size\":\"auto\"}}";
	/* no TrainingArguments: HF defaults (per_device 8, gas 1, max_grad_norm 1, fp32) */
	CHECK_OK(T, &f, run(&f, ds, NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.micro_batch, 8);
	CHECK_EQ_INT(T, f.s.grad_accum, 1);
	CHECK_EQ_INT(T, f.s.global_batch, 64);
	CHECK_EQ_INT(T, f.s.param_dtype, TW_FP32);
	CHECK_EQ_INT(T, f.s.reduce_bucket_size, 8192LL * 8192);
	CHECK_EQ_INT(T, f.s.prefetch_bucket_size, 60397977); /* int(0.9 * 8192^2) */
	CHECK_EQ_INT(T, f.s.param_persistence_threshold, 81920);
	CHECK_EQ_INT(T, f.s.sub_group_size, 1000000000); /* DeepSpeed drops "auto" */
	CHECK_STR_CONTAINS(T, prov(&f.s, "zero_optimization.reduce_bucket_size")->why, "auto");
	CHECK_STR_CONTAINS(T, prov(&f.s, "train_micro_batch_size_per_gpu")->why, "auto");
	CHECK_SRC(T, &f.s, "zero_optimization.sub_group_size", "default");
	/* with TrainingArguments */
	char strat[512];
	snprintf(strat, sizeof(strat),
		 "{\"framework\":\"deepspeed\",\"ds_config\":%s,\"hf_trainer\":{"
		 "\"per_device_train_batch_size\":2,\"gradient_accumulation_steps\":4,"
		 "\"max_grad_norm\":0.5,\"bf16\":true}}",
		 ds);
	CHECK_OK(T, &f, run(&f, NULL, strat, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.micro_batch, 2);
	CHECK_EQ_INT(T, f.s.grad_accum, 4);
	CHECK_EQ_INT(T, f.s.global_batch, 64);
	CHECK_EQ_INT(T, f.s.param_dtype, TW_BF16);
	CHECK_NEAR(T, f.s.gradient_clipping, 0.5, 0);
	/* stage 2: the ZeRO-3 fills do not apply, the defaults stay */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				"\"stage\":2,\"stage3_prefetch_bucket_size\":\"auto\"}}", NULL, 8,
			    NULL, 0));
	CHECK_EQ_INT(T, f.s.prefetch_bucket_size, 50000000);
	/* "auto" where nobody fills it */
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,"
				   "\"activation_checkpointing\":{\"partition_activations\":\"auto\"}}",
			       NULL, 8, NULL, 0),
		    "\"auto\" is filled only by the HF Trainer");
	/* explicit value against TrainingArguments: HF's mismatch error */
	CHECK_FAILS(T, &f, run(&f, NULL,
			       "{\"ds_config\":{\"train_micro_batch_size_per_gpu\":4},"
			       "\"hf_trainer\":{\"per_device_train_batch_size\":8}}", 8, NULL, 0),
		    "mismatch TrainingArguments");
	fx_done(&f);
}

/* ---- aliases and deprecated keys ------------------------------------------------------------ */

static void test_aliases(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				"\"stage\":3,\"prefetch_bucket_size\":12345,"
				"\"param_persistence_threshold\":777,\"max_live_parameters\":5,"
				"\"max_reuse_distance\":6}}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.prefetch_bucket_size, 12345);
	CHECK_EQ_INT(T, f.s.param_persistence_threshold, 777);
	CHECK_EQ_INT(T, f.s.max_live_parameters, 5);
	CHECK_EQ_INT(T, f.s.max_reuse_distance, 6);
	CHECK_STR_CONTAINS(T, prov(&f.s, "zero_optimization.stage3_prefetch_bucket_size")->why,
			   "as prefetch_bucket_size");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":3,\"prefetch_bucket_size\":1,"
				   "\"stage3_prefetch_bucket_size\":2}}", NULL, 8, NULL, 0),
		    "alias");
	/* cpu_offload: true is offload_optimizer {device: cpu} */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				"\"stage\":2,\"cpu_offload\":true}}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.offload_optimizer, STRAT_OFFLOAD_CPU);
	CHECK_STR_CONTAINS(T, prov(&f.s, "zero_optimization.offload_optimizer.device")->why,
			   "deprecated cpu_offload");
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				"\"stage\":3,\"cpu_offload_param\":true,"
				"\"cpu_offload_use_pin_memory\":true}}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.offload_param, STRAT_OFFLOAD_CPU);
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":2,\"cpu_offload\":true,\"offload_optimizer\":{"
				   "\"device\":\"cpu\"}}}", NULL, 8, NULL, 0),
		    "Cannot provide deprecated parameter 'cpu_offload'");
	/* legacy boolean section */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":true,"
				"\"allgather_size\":2000}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.zero_stage, 1);
	CHECK_EQ_INT(T, f.s.allgather_bucket_size, 2000);
	/* old bfloat16 key */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"bfloat16\":{"
				"\"enabled\":true}}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.param_dtype, TW_BF16);
	/* nvme under ZeRO-2 works as cpu */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				"\"stage\":2,\"offload_optimizer\":{\"device\":\"nvme\"}}}", NULL, 8,
			    NULL, 0));
	CHECK_EQ_INT(T, f.s.offload_optimizer, STRAT_OFFLOAD_CPU);
	CHECK_SRC(T, &f.s, "zero_optimization.offload_optimizer.device", "derived");
	/* "adam" runs AdamW unless adam_w_mode is false */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"optimizer\":{\"type\":"
				"\"Adam\"}}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.optimizer, STRAT_OPT_ADAMW);
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"optimizer\":{\"type\":"
				"\"Adam\",\"params\":{\"adam_w_mode\":false}}}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.optimizer, STRAT_OPT_ADAM);
	fx_done(&f);
}

/* ---- strict sections --------------------------------------------------------------------------- */

static void test_strict_sections(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":2,\"reduce_bucket\":5}}", NULL, 8, NULL, 0),
		    "zero_optimization.reduce_bucket: unknown key");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":3,\"offload_param\":{\"device\":\"cpu\",\"pin\":1}}}",
			       NULL, 8, NULL, 0),
		    "zero_optimization.offload_param.pin: unknown key");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":3,\"offload_optimizer\":{\"device\":\"cpu\","
				   "\"ratioo\":1}}}", NULL, 8, NULL, 0),
		    "offload_optimizer.ratioo: unknown key");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"fp16\":{\"enabled\":true,"
				   "\"scale\":1}}", NULL, 8, NULL, 0),
		    "fp16.scale: unknown key");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"bf16\":{\"enabled\":true,"
				   "\"master\":1}}", NULL, 8, NULL, 0),
		    "bf16.master: unknown key");
	/* unknown top-level key: a warning, not an error */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"my_custom_key\":3}", NULL, 8,
			    NULL, 0));
	/* types */
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":\"3\"}}", NULL, 8, NULL, 0),
		    "zero_optimization.stage: must be an integer");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1.5}", NULL, 8, NULL, 0),
		    "must be an integer");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1e30}", NULL, 8, NULL, 0),
		    "overflows a 64-bit integer");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"overlap_comm\":1}}", NULL, 8, NULL, 0),
		    "overlap_comm: must be true or false");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"reduce_bucket_size\":-5}}", NULL, 8, NULL, 0),
		    "reduce_bucket_size: must be >= 0");
	fx_done(&f);
}

/* ---- refusals ------------------------------------------------------------------------------------ */

static void test_ds_refusals(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"fp16\":{\"enabled\":true},"
				   "\"bf16\":{\"enabled\":true}}", NULL, 8, NULL, 0),
		    "bfloat16 and fp16 modes cannot be simultaneously enabled");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":4}}", NULL, 8, NULL, 0),
		    "Maximum supported ZeRO stage is 3");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":2,\"offload_optimizer\":{\"device\":\"cpu\","
				   "\"ratio\":0.5}}}", NULL, 8, NULL, 0),
		    "Partial offloading only supported for ZeRO Stage 3.");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":2,\"offload_param\":{\"device\":\"cpu\"}}}", NULL, 8,
			       NULL, 0),
		    "valid only with ZeRO stage 3");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":0,\"offload_optimizer\":{\"device\":\"cpu\"}}}", NULL,
			       8, NULL, 0),
		    "needs ZeRO stage 1, 2 or 3");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":2}}", "{\"pp\":2}", 8, NULL, 0),
		    "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"optimizer\":{\"type\":"
				   "\"adamw\",\"params\":{\"max_grad_norm\":1}}}", NULL, 8, NULL, 0),
		    "gradient_clipping");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"amp\":{\"enabled\":true},"
				   "\"zero_optimization\":{\"stage\":1}}", NULL, 8, NULL, 0),
		    "Amp and ZeRO are not currently compatible");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,"
				   "\"communication_data_type\":\"int8\"}", NULL, 8, NULL, 0),
		    "Invalid communication_data_type");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":2},\"gradient_predivide_factor\":2}", NULL, 8, NULL, 0),
		    "gradient_predivide_factor: must be 1.0");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"optimizer\":{\"type\":"
				   "\"muon\"}}", NULL, 8, NULL, 0),
		    "'muon' is not modelled");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"legacy_stage1\":true}}", NULL, 8, NULL, 0),
		    "legacy_stage1");
	/* DeepSpeed asserts on an optimizer outside ZERO_SUPPORTED_OPTIMIZERS unless allowed */
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":1},\"optimizer\":{\"type\":\"Lamb\"}}", NULL, 8, NULL, 0),
		    "untested ZeRO Optimizer");
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				"\"stage\":1},\"zero_allow_untested_optimizer\":true,\"optimizer\":{"
				"\"type\":\"sgd\"}}", NULL, 8, NULL, 0));
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"optimizer\":{"
				"\"type\":\"sgd\"}}", NULL, 8, NULL, 0));
	/* NVMe offload: the swapper needs its path, and the nodes need NVMe */
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":3,\"offload_param\":{\"device\":\"nvme\"}}}", NULL, 8,
			       NULL, 0),
		    "offload_param.nvme_path: required with device nvme");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":3,\"offload_optimizer\":{\"device\":\"nvme\"}}}",
			       NULL, 8, NULL, 0),
		    "offload_optimizer.nvme_path: required with device nvme");
	f.c.node.nvme_GBps = 0;
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":3,\"offload_optimizer\":{\"device\":\"nvme\","
				   "\"nvme_path\":\"/nvme\"}}}", NULL, 8, NULL, 0),
		    "nvme on nodes without NVMe");
	f.c.node.nvme_GBps = 25;
	/* fp16 on a GPU without fp16 tensor cores */
	f.c.gpu.peak_tflops[TW_FP16] = 0;
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"fp16\":{\"enabled\":"
				   "true}}", NULL, 8, NULL, 0),
		    "fp16.enabled: GPU H100 has no fp16 tensor cores");
	f.c.gpu.peak_tflops[TW_FP16] = 989.4;
	/* a bucket or sub-group of 0 is one per tensor in DeepSpeed: not modelled */
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":2,\"reduce_bucket_size\":0}}", NULL, 8, NULL, 0),
		    "reduce_bucket_size: 0 reduces every gradient tensor on its own");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				   "\"stage\":3,\"sub_group_size\":0}}", NULL, 8, NULL, 0),
		    "sub_group_size: 0 makes every parameter its own optimizer sub-group");
	/* "auto" where the HF Trainer fills nothing */
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":"
				   "\"auto\"}", NULL, 8, NULL, 0),
		    "zero_optimization: must be an object (the HF Trainer's \"auto\"");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"steps_per_print\":"
				   "\"auto\"}", NULL, 8, NULL, 0),
		    "steps_per_print: \"auto\" is filled only by the HF Trainer");
	/* ZeRO-1 with a pipeline is allowed, overlap_comm goes off */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				"\"stage\":1,\"overlap_comm\":true}}", "{\"pp\":2}", 8, NULL, 0));
	CHECK(T, !f.s.overlap_comm);
	CHECK_SRC(T, &f.s, "zero_optimization.overlap_comm", "derived");
	fx_done(&f);
}

/* ZeRO++ and MiCS: read at stage 3 with DeepSpeed's defaults, ignored below it; the groups
 * DeepSpeed forms from consecutive ranks must be data-parallel ones that divide dp; qgZ on one
 * node is DeepSpeed's reduce-scatter. */
static void test_zeropp_mics(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
#define Z3(x) "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{\"stage\":3" x "}}"
	CHECK_OK(T, &f, run(&f, Z3(""), NULL, 32, NULL, 0));
	CHECK_EQ_INT(T, f.s.zero_hpz, 1);
	CHECK(T, !f.s.zero_qweights && !f.s.zero_qgrads);
	CHECK_EQ_INT(T, f.s.mics_shard, 0);
	CHECK_SRC(T, &f.s, "zero_optimization.zero_hpz_partition_size", "default");
	CHECK_OK(T, &f, run(&f, Z3(",\"zero_hpz_partition_size\":8,\"zero_quantized_weights\":true,"
				   "\"zero_quantized_gradients\":true"), NULL, 32, NULL, 0));
	CHECK_EQ_INT(T, f.s.zero_hpz, 8);
	CHECK(T, f.s.zero_qweights && f.s.zero_qgrads);
	CHECK_SRC(T, &f.s, "zero_optimization.zero_hpz_partition_size", "file");
	/* one node: qgZ is off, as DeepSpeed falls back to its reduce-scatter */
	CHECK_OK(T, &f, run(&f, Z3(",\"zero_quantized_gradients\":true"), NULL, 8, NULL, 0));
	CHECK(T, !f.s.zero_qgrads);
	CHECK_SRC(T, &f.s, "zero_optimization.zero_quantized_gradients", "derived");
	CHECK_OK(T, &f, run(&f, Z3(",\"mics_shard_size\":16"), NULL, 32, NULL, 0));
	CHECK_EQ_INT(T, f.s.mics_shard, 16);
	CHECK_EQ_INT(T, f.s.shard_group, 16);
	/* MiCS's hierarchical gather needs whole nodes; MiCS gathers without qwZ */
	CHECK_OK(T, &f, run(&f, Z3(",\"mics_shard_size\":16,\"mics_hierarchical_params_gather\":true,"
				   "\"zero_quantized_weights\":true"), NULL, 32, NULL, 0));
	CHECK(T, f.s.mics_hier);
	CHECK(T, !f.s.zero_qweights);
	CHECK_SRC(T, &f.s, "zero_optimization.zero_quantized_weights", "derived");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"mics_shard_size\":8,\"mics_hierarchical_params_gather\":true"),
			       NULL, 32, NULL, 0),
		    "no need for hierarchy allgather");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"mics_shard_size\":4,\"mics_hierarchical_params_gather\":true"),
			       NULL, 32, NULL, 0),
		    "no need for hierarchy allgather");
	/* below stage 3 DeepSpeed ignores them (a warning says so) */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{"
				"\"stage\":2,\"zero_hpz_partition_size\":8,\"mics_shard_size\":8}}",
			    NULL, 32, NULL, 0));
	CHECK_EQ_INT(T, f.s.zero_hpz, 1);
	CHECK_EQ_INT(T, f.s.mics_shard, 0);
	/* refusals */
	CHECK_FAILS(T, &f, run(&f, Z3(",\"zero_hpz_partition_size\":3"), NULL, 32, NULL, 0),
		    "zero_hpz_partition_size=3 does not divide the data-parallel size 32");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"mics_shard_size\":64"), NULL, 32, NULL, 0),
		    "mics_shard_size=64 does not divide");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"zero_hpz_partition_size\":8"), "{\"tp\":2}", 32, NULL, 0),
		    "modelled with tp = cp = 1 only");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"mics_shard_size\":8,\"zero_hpz_partition_size\":8"), NULL,
			       32, NULL, 0),
		    "MiCS together with hpZ");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"mics_shard_size\":8,\"zero_quantized_gradients\":true"),
			       NULL, 32, NULL, 0),
		    "qgZ reduces over the whole world");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"mics_shard_size\":8,\"offload_optimizer\":{\"device\":"
				      "\"cpu\"}"), NULL, 32, NULL, 0),
		    "Local sharding has no support for CPU offloading");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"zero_quantized_weights\":1"), NULL, 32, NULL, 0),
		    "zero_quantized_weights");
	/* frozen weights as int8 (with LoRA); since 0.10.2; MiCS gathers them unquantized */
	CHECK_OK(T, &f, run(&f, Z3(",\"zero_quantized_nontrainable_weights\":true"), NULL, 32, NULL, 0));
	CHECK(T, f.s.zero_qfrozen);
	CHECK_FAILS(T, &f, run(&f, Z3(",\"zero_quantized_nontrainable_weights\":true"),
			       "{\"deepspeed_version\":\"0.10.1\"}", 32, NULL, 0),
		    "it arrived in DeepSpeed 0.10.2");
	CHECK_OK(T, &f, run(&f, Z3(",\"zero_quantized_nontrainable_weights\":true,\"mics_shard_size\":8"),
			    NULL, 32, NULL, 0));
	CHECK(T, !f.s.zero_qfrozen);
	/* releases before them refuse the keys */
	CHECK_FAILS(T, &f, run(&f, Z3(",\"zero_hpz_partition_size\":8"),
			       "{\"deepspeed_version\":\"0.9.5\"}", 32, NULL, 0),
		    "ZeRO++ arrived in DeepSpeed 0.10.0");
	CHECK_FAILS(T, &f, run(&f, Z3(",\"mics_shard_size\":8"), "{\"deepspeed_version\":\"0.9.1\"}",
			       32, NULL, 0),
		    "MiCS arrived in DeepSpeed 0.9.2");
	CHECK_OK(T, &f, run(&f, Z3(",\"mics_shard_size\":8"), "{\"deepspeed_version\":\"0.9.2\"}", 32,
			    NULL, 0));
#undef Z3
	fx_done(&f);
}

static void test_model_refusals(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	const char *ds = "{\"train_micro_batch_size_per_gpu\":1}";
	const char *const tp3[] = {"tp=3"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 24, tp3, 1), "strategy.tp=3 does not divide model.heads=64");
	const char *const tp16[] = {"tp=16"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 16, tp16, 1),
		    "strategy.tp=16 does not divide model.kv_heads=8");
	const char *const pp160[] = {"pp=160"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 160, pp160, 1),
		    "strategy.pp=160 is larger than model.layers=80");
	const char *const gp[] = {"tp=8", "pp=2"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 24, gp, 2),
		    "--gpus 24 is not divisible by tp x pp x cp = 8 x 2 x 1 = 16");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":3}", 24, NULL, 0),
		    "strategy.pp=3 does not divide model.layers=80");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":4,\"vp\":3}", 32, NULL, 0),
		    "strategy.vp=3 does not divide the 20 layers per stage");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"ep\":2}", 8, NULL, 0),
		    "has no experts");
	f.m.experts = 8;
	f.m.top_k = 2;
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"ep\":3}", 24, NULL, 0),
		    "strategy.ep=3 does not divide model.experts=8");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"ep\":4,\"tp\":4}", 8,
			       NULL, 0),
		    "strategy.ep=4 does not divide dp x cp=2");
	/* Megatron-Core folds cp into its expert groups: dp 2 x cp 2 hold ep 4 */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"ep\":4,\"tp\":2,\"cp\":2,"
				 "\"sequence_parallel\":true}", 8, NULL, 0));
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"ep\":4,\"cp\":4}", 8, NULL, 0),
		    "strategy.ep=4 does not divide dp=2");
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"ep\":4}", 16, NULL, 0));
	f.m.experts = 0;
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"cp\":2,\"seq_len\":4098}", 8,
			       NULL, 0),
		    "must be divisible by 2 x cp");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"cp\":3,\"cp_kind\":\"ulysses\","
				   "\"seq_len\":4098}", 3, NULL, 0),
		    "Ulysses");
	/* each framework's own context parallelism: Megatron's p2p ring, PyTorch's all-gather
	 * rotation; DeepSpeed has no all-gather kind; the all-gather splits into 2 x cp chunks */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"cp\":2}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.cp_kind, STRAT_CP_RING);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"cp\":2}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.cp_kind, STRAT_CP_ALLGATHER);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"cp\":2,\"cp_kind\":"
				"\"allgather\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.cp_kind, STRAT_CP_ALLGATHER);
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"deepspeed\",\"cp\":2,\"cp_kind\":"
				   "\"allgather\"}", 8, NULL, 0),
		    "DeepSpeed's is Ulysses");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"cp\":2,\"seq_len\":4098}", 8,
			       NULL, 0),
		    "cp_kind allgather splits the sequence into 2 x cp chunks");
	/* a sliding window: Transformer Engine's all-gather runs it, PyTorch's ring attention
	 * does not */
	f.m.sliding_window = 1024, f.m.full_every = 2, f.m.full_first = 1;
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"cp\":2,\"cp_kind\":"
				"\"allgather\"}", 8, NULL, 0));
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"cp\":2}", 8, NULL, 0),
		    "cp_kind=allgather: PyTorch's ring attention does not run");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"cp\":2}", 8, NULL, 0),
		    "or allgather (its KV all-gather)");
	f.m.sliding_window = 0, f.m.full_every = 0, f.m.full_first = 0;
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"global_batch\":100,"
				   "\"micro_batch\":2}", 8, NULL, 0),
		    "global batch size (100) is not divisible by micro batch size (2) times data "
		    "parallel size (8)");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":4,\"vp\":2,"
				   "\"global_batch\":6}", 8, NULL, 0),
		    "when using interleaved schedule");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":2,\"vp\":2,"
				   "\"schedule\":\"1f1b\"}", 8, NULL, 0),
		    "needs schedule interleaved");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"deepspeed\",\"pp\":2,\"vp\":2}", 8, NULL, 0),
		    "DeepSpeed's pipeline has no interleaved schedule");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"deepspeed\",\"pp\":2,\"schedule\":"
				   "\"interleaved\",\"vp\":2}", 8, NULL, 0),
		    "TrainSchedule");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"schedule\":\"ds-1f1b\"}", 8,
			       NULL, 0),
		    "ds-1f1b is DeepSpeed's");
	CHECK_FAILS(T, &f, run(&f, "{\"train_batch_size\":8}", "{\"framework\":\"megatron\"}", 8, NULL,
			       0),
		    "read only with framework deepspeed");
	f.c.gpu.peak_tflops[TW_FP8] = 0;
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"fp8\":true}", 8, NULL, 0),
		    "no fp8");
	/* a GPU without bf16 (V100): Megatron's default is fp16 there; bf16 asked for is refused */
	f.c.gpu.peak_tflops[TW_BF16] = 0;
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.param_dtype, TW_FP16);
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"precision\":\"bf16\"}", 8,
			       NULL, 0),
		    "no bf16 tensor cores");
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"bf16\":{\"enabled\":"
				   "true}}", NULL, 8, NULL, 0),
		    "bf16.enabled: GPU H100 has no bf16");
	fx_done(&f);
}

/* ---- --set -------------------------------------------------------------------------------------- */

static void test_set(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	const char *ds = "{\"train_micro_batch_size_per_gpu\":1,\"zero_optimization\":{\"stage\":2}}";
	const char *const s1[] = {"zero_optimization.stage=3", "tp=2",
				  "train_micro_batch_size_per_gpu=2", "recompute=full",
				  "zero_optimization.stage3_max_live_parameters=123"};
	CHECK_OK(T, &f, run(&f, ds, NULL, 16, s1, 5));
	CHECK_EQ_INT(T, f.s.zero_stage, 3);
	CHECK_EQ_INT(T, f.s.tp, 2);
	CHECK_EQ_INT(T, f.s.dp, 8);
	CHECK_EQ_INT(T, f.s.micro_batch, 2);
	CHECK_EQ_INT(T, f.s.recompute, STRAT_RECOMPUTE_FULL);
	CHECK_EQ_INT(T, f.s.max_live_parameters, 123);
	CHECK_SRC(T, &f.s, "zero_optimization.stage", "set");
	CHECK_SRC(T, &f.s, "tp", "set");
	CHECK_SRC(T, &f.s, "recompute", "set");
	CHECK_SRC(T, &f.s, "zero_optimization.stage3_max_live_parameters", "set");
	CHECK_SRC(T, &f.s, "gpus", "option");
	CHECK_SRC(T, &f.s, "dp", "derived");
	CHECK_SRC(T, &f.s, "zero_optimization.reduce_bucket_size", "default");
	CHECK_STR_CONTAINS(T, prov(&f.s, "zero_optimization.stage")->why,
			   "--set zero_optimization.stage=3");
	/* our micro_batch overrides the file's when set */
	const char *const s2[] = {"micro_batch=4"};
	CHECK_OK(T, &f, run(&f, ds, NULL, 8, s2, 1));
	CHECK_EQ_INT(T, f.s.micro_batch, 4);
	/* wrong types and unknown fields name the --set */
	const char *const bad1[] = {"zero_optimization.stage=three"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 8, bad1, 1),
		    "--set zero_optimization.stage=three: zero_optimization.stage: must be an integer");
	const char *const bad2[] = {"tp=two"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 8, bad2, 1), "--set tp=two: tp: must be an integer");
	const char *const bad3[] = {"zero_optimization.bogus=1"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 8, bad3, 1), "zero_optimization.bogus: unknown key");
	const char *const bad4[] = {"nonsense=1"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 8, bad4, 1), "unknown strategy field 'nonsense'");
	const char *const bad5[] = {"recompute=sometimes"};
	CHECK_FAILS(T, &f, run(&f, ds, NULL, 8, bad5, 1), "must be one of: none, selective, full");
	/* sets without any file */
	const char *const s3[] = {"framework=megatron", "tp=4", "pp=2", "global_batch=64"};
	CHECK_OK(T, &f, run(&f, NULL, NULL, 16, s3, 4));
	CHECK_EQ_INT(T, f.s.framework, STRAT_MEGATRON);
	CHECK_EQ_INT(T, f.s.grad_accum, 32);
	fx_done(&f);
}

/* ---- our strategy JSON ------------------------------------------------------------------------ */

/* kernels: Megatron's code (Megatron, and DeepSpeed with TP or PP: Megatron-DeepSpeed) is
 * fused; DeepSpeed without them and FSDP run HF modules eagerly; the key overrides; tf32 and
 * hf_trainer.tf32 */
static void test_kernels_tf32(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.kernels, STRAT_KERNELS_FUSED);
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1}", NULL, 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.kernels, STRAT_KERNELS_EAGER);
	CHECK_SRC(T, &f.s, "kernels", "default");
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1}", "{\"tp\":2}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.kernels, STRAT_KERNELS_FUSED);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.kernels, STRAT_KERNELS_EAGER);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"kernels\":\"fused\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.kernels, STRAT_KERNELS_FUSED);
	CHECK_SRC(T, &f.s, "kernels", "file");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"kernels\":\"compiled\"}", 8, NULL, 0),
		    "must be one of: fused, eager");
	/* tf32: off unless asked; the HF Trainer's flag stands for it; the two must agree */
	CHECK(T, !f.s.tf32);
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"tf32\":true}", 8, NULL, 0), "has no TF32 tensor cores");
	f.c.gpu.peak_tflops[TW_TF32] = 494.5;
	CHECK_OK(T, &f, run(&f, NULL, "{\"hf_trainer\":{\"tf32\":true}}", 8, NULL, 0));
	CHECK(T, f.s.tf32);
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"tf32\":false,\"hf_trainer\":{\"tf32\":true}}", 8, NULL, 0),
		    "disagrees with hf_trainer.tf32");
	fx_done(&f);
}

/* attention_kernel unnamed: the kernel the code path runs where the cluster has its table
 * (Megatron-Core's Transformer Engine: cuDNN, else FlashAttention-2; PyTorch / HF code:
 * FlashAttention-2), else the cluster's eff.attn; a named one stays; none without flash */
static void test_attention_kernel_default(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"flash_attention\":true}", 8, NULL, 0));
	CHECK_STR(T, f.s.attention_kernel, ""); /* the cluster has no named tables */
	struct cluster_attn_kernel *k = f.c.eff.attn_kernels;
	snprintf(k[0].name, CLUSTER_KERNEL_NAME, "fa2");
	snprintf(k[1].name, CLUSTER_KERNEL_NAME, "cudnn");
	k[0].t.n = k[1].t.n = 1, k[0].t.eff[0] = 0.33, k[1].t.eff[0] = 0.53;
	f.c.eff.n_attn_kernels = 2;
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"flash_attention\":true}", 8, NULL, 0));
	CHECK_STR(T, f.s.attention_kernel, "fa2");
	CHECK_SRC(T, &f.s, "attention_kernel", "default");
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1}", "{\"tp\":2,\"flash_attention\":true}",
			    8, NULL, 0));
	CHECK_STR(T, f.s.attention_kernel, "fa2"); /* Megatron-DeepSpeed: flash-attn */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"flash_attention\":true}", 8, NULL, 0));
	CHECK_STR(T, f.s.attention_kernel, "cudnn");
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"flash_attention\":false}", 8, NULL, 0));
	CHECK_STR(T, f.s.attention_kernel, "");
	const char *set[] = {"attention_kernel=fa2"};
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"flash_attention\":true}", 8, set, 1));
	CHECK_STR(T, f.s.attention_kernel, "fa2");
	CHECK_SRC(T, &f.s, "attention_kernel", "set");
	f.c.eff.n_attn_kernels = 1; /* an A100-like cluster: FlashAttention-2 only */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"flash_attention\":true}", 8, NULL, 0));
	CHECK_STR(T, f.s.attention_kernel, "fa2");
	fx_done(&f);
}

/* expert_tp (Megatron-Core's --expert-tensor-parallel-size): tp unless given; another value
 * is Megatron's only, needs sequence parallelism with tp > 1, must leave expert_tp x ep
 * dividing a stage's tp x dp x cp ranks and divide the experts' width */
static void test_expert_tp(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	f.m.experts = 8, f.m.top_k = 2, f.m.expert_ffn_hidden = 512, f.m.moe_layer_freq = 1;
	const char *mg = "{\"framework\":\"megatron\",\"tp\":2,\"sequence_parallel\":true,\"ep\":8}";
	CHECK_OK(T, &f, run(&f, NULL, mg, 64, NULL, 0));
	CHECK_EQ_INT(T, f.s.expert_tp, 2);
	CHECK_SRC(T, &f.s, "expert_tp", "default");
	const char *one[] = {"expert_tp=1"};
	CHECK_OK(T, &f, run(&f, NULL, mg, 64, one, 1));
	CHECK_EQ_INT(T, f.s.expert_tp, 1);
	CHECK_EQ_INT(T, strat_ep_span(&f.s), 64);
	/* ep 8 over dp 4 is refused unless the groups fold over tp as well */
	CHECK_FAILS(T, &f, run(&f, NULL, mg, 8, NULL, 0), "does not divide dp x cp=4");
	CHECK_OK(T, &f, run(&f, NULL, mg, 16, one, 1));
	const char *two[] = {"expert_tp=2"};
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"tp\":1,\"ep\":8}", 8, two, 1),
		    "expert_tp x ep = 2 x 8 does not divide tp x dp x cp = 8");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"tp\":2}", 8, one, 1),
		    "expert_tp=1 with tp=2 needs sequence_parallel true");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\"}", 8, two, 1),
		    "a separate expert tensor-parallel degree is Megatron-Core's");
	const char *three[] = {"expert_tp=3"};
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\"}", 6, three, 1),
		    "strategy.expert_tp=3 does not divide model.expert_ffn_hidden=512");
	/* moe_dispatcher: alltoall unless given; deepep needs expert parallelism */
	CHECK_OK(T, &f, run(&f, NULL, mg, 64, NULL, 0));
	CHECK_EQ_INT(T, f.s.moe_dispatcher, STRAT_DISPATCH_ALLTOALL);
	const char *dee[] = {"moe_dispatcher=deepep"};
	CHECK_OK(T, &f, run(&f, NULL, mg, 64, dee, 1));
	CHECK_EQ_INT(T, f.s.moe_dispatcher, STRAT_DISPATCH_DEEPEP);
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\"}", 8, dee, 1),
		    "it needs ep > 1 (ep=1)");
	fx_done(&f);
}

/* nccl_algo / nccl_proto read as NCCL reads NCCL_ALGO / NCCL_PROTO: names in any case,
 * separated by commas, a leading '^' excludes; NCCL's algorithms the simulator lacks change
 * nothing; a set with nothing left, an unknown name or a stray comma is refused */
static void test_nccl_algo_proto(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	const unsigned ring = 1u << 1, tree = 1u << 0, nvls = 1u << 2, pat = 1u << 3, nvlstree = 1u << 4;
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.nccl_no_algos, 0);
	CHECK_EQ_INT(T, f.s.nccl_no_protos, 0);
	CHECK_SRC(T, &f.s, "nccl_algo", "default");
	CHECK_OK(T, &f, run(&f, NULL, "{\"nccl_algo\":\"Ring,TREE\",\"nccl_proto\":\"simple\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.nccl_no_algos, 31u & ~(ring | tree));
	CHECK_EQ_INT(T, f.s.nccl_no_protos, 7u & ~(1u << 2));
	CHECK_SRC(T, &f.s, "nccl_algo", "file");
	CHECK_OK(T, &f, run(&f, NULL, "{\"nccl_algo\":\"^nvls,NVLSTree\",\"nccl_proto\":\"^LL\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.nccl_no_algos, 31u & ~(tree | ring | pat));
	CHECK_EQ_INT(T, f.s.nccl_named_algos, 0); /* '^' names none */
	CHECK_EQ_INT(T, f.s.nccl_no_protos, 7u & ~((1u << 1) | (1u << 2)));
	CHECK_OK(T, &f, run(&f, NULL, "{\"nccl_algo\":\"Ring,CollNetDirect\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.nccl_no_algos, 31u & ~(ring));
	static const char *const sets[] = {"nccl_algo=^ring"};
	CHECK_OK(T, &f, run(&f, NULL, "{}", 8, sets, 1));
	CHECK_EQ_INT(T, f.s.nccl_no_algos, 31u & ~(tree | nvls | pat | nvlstree));
	CHECK_SRC(T, &f.s, "nccl_algo", "set");
	/* NVLSTree is modelled: its own bit */
	CHECK_OK(T, &f, run(&f, NULL, "{\"nccl_algo\":\"NVLSTree\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.nccl_no_algos, 31u & ~nvlstree);
	CHECK_EQ_INT(T, f.s.nccl_named_algos, nvlstree); /* named: the tuner may take it */
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"nccl_algo\":\"CollNetChain\"}", 8, NULL, 0),
		    "leaves none of the algorithms");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"nccl_algo\":\"^ring,tree,nvls,pat,nvlstree\"}", 8, NULL, 0),
		    "leaves none");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"nccl_algo\":\"ring,bogus\"}", 8, NULL, 0),
		    "'bogus' is not one of tree, ring, nvls, pat, nvlstree");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"nccl_proto\":\"LL,\"}", 8, NULL, 0), "a comma with no name");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"nccl_proto\":\",LL\"}", 8, NULL, 0), "names separated by commas");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"nccl_algo\":3}", 8, NULL, 0), "nccl_algo");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"nccl_algo\":\"collnet\"}", 8, NULL, 0), "'collnet' is not one of");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"nccl_algo\":\"ringringringringringringringringring\"}", 8, NULL, 0),
		    "is not one of");
	CHECK_OK(T, &f, run(&f, NULL, "{\"nccl_algo\":\"^\"}", 8, NULL, 0)); /* excludes nothing */
	CHECK_EQ_INT(T, f.s.nccl_no_algos, 0);
	/* a NCCL_PROTO list names LL128 (forced past NCCL's hardware checks); '^' names none */
	CHECK_OK(T, &f, run(&f, NULL, "{\"nccl_proto\":\"LL128,Simple\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.nccl_named_protos, (1u << 1) | (1u << 2));
	CHECK_OK(T, &f, run(&f, NULL, "{\"nccl_proto\":\"^LL\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.nccl_named_protos, 0);
	fx_done(&f);
}

/* dropout follows the model code: Megatron's (Megatron, DeepSpeed with TP or PP) defaults to
 * 0.1, HF / torchtitan modules to 0; a given value wins and must be a probability; the loss is
 * the code's own unless cross_entropy says fused */
static void test_dropout_cross_entropy(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\"}", 8, NULL, 0));
	CHECK_NEAR(T, f.s.hidden_dropout, 0.1, 1e-12);
	CHECK_NEAR(T, f.s.attention_dropout, 0.1, 1e-12);
	CHECK_SRC(T, &f.s, "hidden_dropout", "default");
	CHECK_EQ_INT(T, f.s.cross_entropy, STRAT_CE_UNFUSED);
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1}", "{\"tp\":2}", 8, NULL, 0));
	CHECK_NEAR(T, f.s.hidden_dropout, 0.1, 1e-12);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\"}", 8, NULL, 0));
	CHECK_NEAR(T, f.s.hidden_dropout, 0, 0);
	CHECK_NEAR(T, f.s.attention_dropout, 0, 0);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"hidden_dropout\":0,"
				      "\"cross_entropy\":\"fused\"}", 8, NULL, 0));
	CHECK_NEAR(T, f.s.hidden_dropout, 0, 0);
	CHECK_NEAR(T, f.s.attention_dropout, 0.1, 1e-12);
	CHECK_SRC(T, &f.s, "hidden_dropout", "file");
	CHECK_EQ_INT(T, f.s.cross_entropy, STRAT_CE_FUSED);
	static const char *const sets[] = {"attention_dropout=0.25"};
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\"}", 8, sets, 1));
	CHECK_NEAR(T, f.s.attention_dropout, 0.25, 1e-12);
	/* eager HF modules apply the model config's dropout; Megatron's flags do not read it */
	f.m.dropout_given = true;
	f.m.hidden_dropout = 0.1;
	f.m.attention_dropout = 0.05;
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\"}", 8, NULL, 0));
	CHECK_NEAR(T, f.s.hidden_dropout, 0.1, 1e-12);
	CHECK_NEAR(T, f.s.attention_dropout, 0.05, 1e-12);
	CHECK_SRC(T, &f.s, "hidden_dropout", "default");
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"attention_dropout\":0}", 8, NULL, 0));
	CHECK_NEAR(T, f.s.attention_dropout, 0, 0);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\"}", 8, NULL, 0));
	CHECK_NEAR(T, f.s.attention_dropout, 0.1, 1e-12);
	f.m.dropout_given = false;
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"hidden_dropout\":1.5}", 8, NULL, 0), "hidden_dropout");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"attention_dropout\":-0.1}", 8, NULL, 0),
		    "attention_dropout");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"cross_entropy\":\"liger\"}", 8, NULL, 0),
		    "must be one of: unfused, fused");
	fx_done(&f);
}

/* Whatever pipeline split the resolver accepts (equal stages, Megatron-Core's uneven first and
 * last stages, the embedding and the loss counted; with and without interleaving), the model
 * chunks in virtual-stage order (chunk x pp + stage) hold every layer exactly once and in
 * order, the first and the last stage hold what was given, and only a virtual stage beside the
 * embedding or the loss may hold none. Every combination over small ranges. */
static void test_pipeline_split_layouts(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	static const int64_t given[] = {0, 1, 2, 3, 4, 6};
	const int ng = (int)(sizeof(given) / sizeof(*given));
	int accepted = 0, refused = 0, bad = 0;
	for (int64_t L = 4; L <= 14; L++)
	for (int64_t P = 2; P <= 4; P++)
	for (int64_t V = 1; V <= 3; V++)
	for (int k = 0; k < ng * ng + 3; k++) {
		int64_t fl = k < ng * ng ? given[k / ng] : 0, ll = k < ng * ng ? given[k % ng] : 0;
		int el = k < ng * ng ? 0 : k - ng * ng + 1; /* 1 embedding, 2 loss, 3 both */
		char js[512];
		int n = snprintf(js, sizeof(js), "{\"framework\":\"megatron\",\"pp\":%lld,\"vp\":%lld,"
				 "\"schedule\":\"%s\",\"global_batch\":%lld", (long long)P,
				 (long long)V, V > 1 ? "interleaved" : "1f1b", (long long)(2 * P));
		if (fl)
			n += snprintf(js + n, sizeof(js) - (size_t)n, ",\"first_stage_layers\":%lld",
				      (long long)fl);
		if (ll)
			n += snprintf(js + n, sizeof(js) - (size_t)n, ",\"last_stage_layers\":%lld",
				      (long long)ll);
		if (el & 1)
			n += snprintf(js + n, sizeof(js) - (size_t)n,
				      ",\"account_for_embedding_in_pipeline_split\":true");
		if (el & 2)
			n += snprintf(js + n, sizeof(js) - (size_t)n,
				      ",\"account_for_loss_in_pipeline_split\":true");
		snprintf(js + n, sizeof(js) - (size_t)n, "}");
		f.m.layers = L;
		if (run(&f, NULL, js, P, NULL, 0) != TW_OK) {
			refused++;
			bad += f.err.msg[0] == '\0'; /* a refusal says why */
			continue;
		}
		accepted++;
		int64_t next = 0, stage_sum[4] = {0};
		for (int64_t vs = 0; vs < P * V; vs++) {
			int64_t first = -1, count = -1, c = vs / P, st = vs % P;
			strategy_chunk_layers(&f.s, L, st, c, &first, &count);
			bool end = (vs == 0 && (el & 1)) || (vs == P * V - 1 && (el & 2));
			if (first != next || count < (end && V > 1 ? 0 : 1)) {
				printf("#   L %lld pp %lld vp %lld %s: virtual stage %lld holds %lld from %lld, "
				       "expected from %lld\n", (long long)L, (long long)P, (long long)V, js,
				       (long long)vs, (long long)count, (long long)first, (long long)next);
				bad++;
				break;
			}
			next += count;
			stage_sum[st] += count;
		}
		bad += next != L || (fl && stage_sum[0] != fl) || (ll && stage_sum[P - 1] != ll);
	}
	printf("#   pipeline splits: %d accepted, %d refused\n", accepted, refused);
	CHECK(T, accepted > 100 && refused > 100);
	CHECK_EQ_INT(T, bad, 0);
	fx_done(&f);
}

static void test_ours(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"tp\":8,\"pp\":4,\"vp\":5,"
				      "\"sequence_parallel\":true,\"micro_batch\":1,"
				      "\"global_batch\":512,\"distributed_optimizer\":true}",
			    64, NULL, 0));
	CHECK_EQ_INT(T, f.s.schedule, STRAT_SCHED_INTERLEAVED);
	CHECK_EQ_INT(T, f.s.dp, 2);
	CHECK_EQ_INT(T, f.s.grad_accum, 256);
	CHECK_EQ_INT(T, f.s.zero_stage, 1);
	CHECK_EQ_INT(T, f.s.param_dtype, TW_BF16);
	CHECK_EQ_INT(T, f.s.grad_accum_dtype, TW_FP32);
	CHECK(T, f.s.sequence_parallel);
	CHECK(T, f.s.flash_attention);
	CHECK_EQ_INT(T, f.s.seq_len, 4096);
	CHECK_SRC(T, &f.s, "schedule", "default");
	CHECK_SRC(T, &f.s, "grad_accum", "derived");
	/* sequence parallel with tp = 1 is turned off, as Megatron does */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"sequence_parallel\":true}", 8,
			    NULL, 0));
	CHECK(T, !f.s.sequence_parallel);
	CHECK_SRC(T, &f.s, "sequence_parallel", "derived");
	/* FSDP */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"fsdp\":{\"sharding_strategy\":"
				      "\"HYBRID_SHARD\"}}", 32, NULL, 0));
	CHECK_EQ_INT(T, f.s.fsdp_sharding, STRAT_FSDP_HYBRID_SHARD);
	CHECK_EQ_INT(T, f.s.shard_group, 8);
	CHECK_EQ_INT(T, f.s.zero_stage, 3);
	CHECK_EQ_INT(T, f.s.schedule, STRAT_SCHED_1F1B);
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"fsdp\",\"fsdp\":{\"sharding_strategy\":"
					 "\"HYBRID_SHARD\",\"shard_group_size\":3}}", 32, NULL, 0),
		    "shard_group_size=3 does not divide dp=32");
	/* Megatron-Core's uneven first / last stages (llama2-70b: 80 layers) */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":3,\"first_stage_layers\":"
				      "26,\"last_stage_layers\":26}", 24, NULL, 0));
	CHECK_EQ_INT(T, f.s.first_stage_layers, 26);
	CHECK_SRC(T, &f.s, "last_stage_layers", "file");
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":3,\"last_stage_layers\":"
				      "20}", 24, NULL, 0)); /* 60 left: 30 each for the other two */
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":4,\"first_stage_layers\":"
					 "25,\"last_stage_layers\":26}", 32, NULL, 0),
		    "leave 29 of model.layers=80 (llama2-70b) for the other 2 stages");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":3}", 24, NULL, 0),
		    "or first_stage_layers / last_stage_layers");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"pp\":2,\"first_stage_layers\":40}", 16, NULL, 0),
		    "first_stage_layers is Megatron's");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"first_stage_layers\":40}",
			       16, NULL, 0),
		    "needs pp >= 2");
	/* ... or derived by counting the embedding and the loss as a layer each (Megatron-Core):
	 * 80 + 2 over pp 2 is 41 a stage, 40 transformer layers each */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":2,"
				      "\"account_for_embedding_in_pipeline_split\":true,"
				      "\"account_for_loss_in_pipeline_split\":true}", 16, NULL, 0));
	CHECK_EQ_INT(T, f.s.first_stage_layers, 40);
	CHECK_EQ_INT(T, f.s.last_stage_layers, 40);
	CHECK_SRC(T, &f.s, "first_stage_layers", "derived");
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":3,"
				      "\"account_for_embedding_in_pipeline_split\":true}", 24, NULL, 0));
	CHECK_EQ_INT(T, f.s.first_stage_layers, 26); /* 81 / 3 = 27 a stage */
	CHECK_EQ_INT(T, f.s.last_stage_layers, 0);  /* an equal share: 27 */
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":4,"
					 "\"account_for_loss_in_pipeline_split\":true}", 32, NULL, 0),
		    "plus the loss counted as a layer (81) must be divisible by pp=4");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":2,\"first_stage_layers\":"
					 "40,\"account_for_loss_in_pipeline_split\":true}", 16, NULL, 0),
		    "Megatron refuses both");
	/* under interleaving (Megatron-Core): every stage's count splits over the vp chunks, and
	 * the counted embedding / loss split over the pp x vp virtual stages */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":4,\"vp\":2,\"schedule\":"
				      "\"interleaved\",\"global_batch\":32,\"first_stage_layers\":18,"
				      "\"last_stage_layers\":18}", 32, NULL, 0)); /* 18, 22, 22, 18 */
	CHECK_EQ_INT(T, f.s.first_stage_layers, 18);
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":4,\"vp\":2,\"schedule\":"
					 "\"interleaved\",\"global_batch\":32,\"first_stage_layers\":20,"
					 "\"last_stage_layers\":18}", 32, NULL, 0),
		    "a stage of 21 layers does not split over vp=2 model chunks");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":4,\"vp\":2,\"schedule\":"
					 "\"interleaved\",\"global_batch\":32,\"first_stage_layers\":19,"
					 "\"last_stage_layers\":19}", 32, NULL, 0),
		    "a stage of 19 layers does not split");
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":3,\"vp\":3,\"schedule\":"
				      "\"interleaved\",\"global_batch\":24,"
				      "\"account_for_embedding_in_pipeline_split\":true}", 24, NULL, 0));
	CHECK(T, f.s.embed_in_split && !f.s.loss_in_split);
	CHECK_EQ_INT(T, f.s.first_stage_layers, 0); /* 81 / 9 = 9 a virtual stage, the first 8 */
	CHECK_SRC(T, &f.s, "layers_per_virtual_stage", "derived");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"pp\":2,\"vp\":2,\"schedule\":"
					 "\"interleaved\",\"global_batch\":16,"
					 "\"account_for_embedding_in_pipeline_split\":true,"
					 "\"account_for_loss_in_pipeline_split\":true}", 16, NULL, 0),
		    "plus the embedding and the loss counted as a layer (82) must be divisible by "
		    "pp x vp=4");
	/* Megatron-Core's recompute_modules: core_attn unless given; needs recompute selective */
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"recompute\":\"selective\"}", 8,
			    NULL, 0));
	CHECK_EQ_INT(T, f.s.recompute_modules, STRAT_RC_CORE_ATTN);
	CHECK_OK(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"recompute\":\"selective\","
				      "\"recompute_modules\":[\"mlp\",\"moe_act\",\"layernorm\"]}", 8,
			    NULL, 0));
	CHECK_EQ_INT(T, f.s.recompute_modules, STRAT_RC_MLP | STRAT_RC_MOE_ACT | STRAT_RC_LAYERNORM);
	CHECK_SRC(T, &f.s, "recompute_modules", "file");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"megatron\",\"recompute\":\"full\","
					 "\"recompute_modules\":[\"mlp\"]}", 8, NULL, 0),
		    "needs framework megatron and recompute selective");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"recompute\":\"selective\",\"recompute_modules\":"
					 "[\"mlp\"]}", 8, NULL, 0),
		    "needs framework megatron");
	static const char *const bad_modules[][2] = {
		{"[\"qkv\"]", "qkv is not a module Megatron-Core recomputes"},
		{"[\"attention\"]", "attention is not a module Megatron-Core recomputes"},
		{"[]", "must be a non-empty array"}};
	for (size_t i = 0; i < sizeof(bad_modules) / sizeof(*bad_modules); i++) {
		char js[160];
		snprintf(js, sizeof(js), "{\"framework\":\"megatron\",\"recompute\":\"selective\","
			 "\"recompute_modules\":%s}", bad_modules[i][0]);
		CHECK_FAILS(T, &f, run(&f, NULL, js, 8, NULL, 0), bad_modules[i][1]);
	}
	/* LoRA */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1}",
			    "{\"lora\":{\"rank\":16,\"targets\":[\"q_proj\",\"v\",\"down_proj\"]}}", 8,
			    NULL, 0));
	CHECK_EQ_INT(T, f.s.lora_rank, 16);
	CHECK_EQ_INT(T, f.s.lora_targets, STRAT_LORA_Q | STRAT_LORA_V | STRAT_LORA_DOWN);
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"lora\":{\"rank\":16,\"targets\":[\"qq\"]}}", 8, NULL, 0),
		    "lora.targets: unknown module qq");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"lora\":{\"targets\":[\"q\"]}}", 8, NULL, 0),
		    "lora.rank: missing");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"tensor_parallel\":2}", 8, NULL, 0),
		    "tensor_parallel: unknown key");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"tp\":0}", 8, NULL, 0), "tp: must be in [1,");
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"framework\":\"jax\"}", 8, NULL, 0),
		    "framework: must be one of: deepspeed, megatron, fsdp");
	/* precision must agree with the ds_config */
	CHECK_FAILS(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1}",
			       "{\"precision\":\"bf16\"}", 8, NULL, 0),
		    "precision=bf16 disagrees");
	/* without a ds_config our precision stands for its fp16/bf16 sections */
	CHECK_OK(T, &f, run(&f, NULL, "{\"precision\":\"fp16\"}", 8, NULL, 0));
	CHECK_EQ_INT(T, f.s.param_dtype, TW_FP16);
	CHECK(T, f.s.loss_scaling);
	const char *const dsset[] = {"ds_config=x.json"};
	CHECK_FAILS(T, &f, run(&f, NULL, NULL, 8, dsset, 1), "--ds-config FILE");
	/* our batch key and the ds_config's disagree */
	CHECK_FAILS(T, &f, run(&f, NULL, "{\"micro_batch\":2,\"ds_config\":{"
				   "\"train_micro_batch_size_per_gpu\":1}}", 8, NULL, 0),
		    "disagrees with");
	/* AutoTP and Ulysses from the ds_config */
	CHECK_OK(T, &f, run(&f, "{\"train_micro_batch_size_per_gpu\":1,\"tensor_parallel\":{"
				"\"autotp_size\":4},\"sequence_parallel_size\":2}", NULL, 16, NULL, 0));
	CHECK_EQ_INT(T, f.s.tp, 4);
	CHECK_EQ_INT(T, f.s.cp, 2);
	CHECK_EQ_INT(T, f.s.cp_kind, STRAT_CP_ULYSSES);
	CHECK_EQ_INT(T, f.s.dp, 2);
	fx_done(&f);
}

static void test_presets(struct test_ctx *T)
{
	struct fx f;
	fx_init(&f);
	struct strat_inputs in = {.strategy_path = "megatron-175b",
				  .strategies_dir = TWIN_SOURCE_DIR "/examples/strategies",
				  .gpus = 1024};
	struct model m = {.layers = 96, .hidden = 12288, .heads = 96, .kv_heads = 96,
			  .ffn_hidden = 49152, .vocab = 51200, .seq_len = 2048};
	CHECK_OK(T, &f, strategy_resolve(&in, &m, &f.c, &f.s, &f.err));
	CHECK_EQ_INT(T, f.s.dp, 16);
	CHECK_EQ_INT(T, f.s.grad_accum, 96);
	CHECK_EQ_INT(T, f.s.recompute, STRAT_RECOMPUTE_FULL);
	in.strategy_path = "megatron-175b-interleaved";
	CHECK_OK(T, &f, strategy_resolve(&in, &m, &f.c, &f.s, &f.err));
	CHECK_EQ_INT(T, f.s.vp, 3);
	in.strategy_path = "ds-zero3"; /* embeds ../ds_configs/zero3.json */
	in.gpus = 8;
	CHECK_OK(T, &f, strategy_resolve(&in, &f.m, &f.c, &f.s, &f.err));
	CHECK_EQ_INT(T, f.s.zero_stage, 3);
	CHECK_STR_CONTAINS(T, prov(&f.s, "zero_optimization.stage")->why, "zero3.json");
	in.strategy_path = "hf-trainer-zero3";
	CHECK_OK(T, &f, strategy_resolve(&in, &f.m, &f.c, &f.s, &f.err));
	CHECK_EQ_INT(T, f.s.micro_batch, 2);
	CHECK_EQ_INT(T, f.s.global_batch, 64);
	CHECK_EQ_INT(T, f.s.param_dtype, TW_BF16);
	const char *presets[] = {"llama-70b-fsdp", "lora-zero2", "lora-zero3", NULL};
	for (int i = 0; presets[i]; i++) {
		in.strategy_path = presets[i];
		CHECK_OK(T, &f, strategy_resolve(&in, &f.m, &f.c, &f.s, &f.err));
	}
	in.strategy_path = "tiny-host";
	in.gpus = 4;
	CHECK_OK(T, &f, strategy_resolve(&in, &f.m, &f.c, &f.s, &f.err));
	CHECK_EQ_INT(T, f.s.dp, 1);
	in.strategy_path = "no-such-preset";
	CHECK_FAILS(T, &f, strategy_resolve(&in, &f.m, &f.c, &f.s, &f.err),
		    "unknown strategy preset 'no-such-preset' (known: ds-zero3");
	/* every ds_config example resolves */
	const char *dss[] = {"zero0", "zero1", "zero2", "zero3", "zero2-offload", "zero3-offload",
			     "zero3-nvme", "hf-zero3-auto", NULL};
	for (int i = 0; dss[i]; i++) {
		char p[256];
		snprintf(p, sizeof(p), TWIN_SOURCE_DIR "/examples/ds_configs/%s.json", dss[i]);
		struct strat_inputs di = {.ds_config_path = p, .gpus = 16};
		CHECK_OK(T, &f, strategy_resolve(&di, &f.m, &f.c, &f.s, &f.err));
	}
	/* every value has a source, and the JSON carries them */
	cJSON *j = strategy_to_json(&f.s);
	cJSON *pv = cJSON_GetObjectItem(j, "provenance");
	CHECK_EQ_INT(T, cJSON_GetArraySize(pv), f.s.nprov);
	CHECK(T, f.s.nprov > 20);
	cJSON_Delete(j);
	fx_done(&f);
}

int main(void)
{
	struct test_ctx t = {0};
	TEST_RUN(&t, test_batch_all_three);
	TEST_RUN(&t, test_batch_tb_micro);
	TEST_RUN(&t, test_batch_tb_gas);
	TEST_RUN(&t, test_batch_micro_gas);
	TEST_RUN(&t, test_batch_only_tb);
	TEST_RUN(&t, test_batch_only_micro);
	TEST_RUN(&t, test_batch_none);
	TEST_RUN(&t, test_batch_world_is_dp);
	TEST_RUN(&t, test_defaults);
	TEST_RUN(&t, test_defaults_by_version);
	TEST_RUN(&t, test_auto_hf);
	TEST_RUN(&t, test_aliases);
	TEST_RUN(&t, test_strict_sections);
	TEST_RUN(&t, test_ds_refusals);
	TEST_RUN(&t, test_zeropp_mics);
	TEST_RUN(&t, test_model_refusals);
	TEST_RUN(&t, test_set);
	TEST_RUN(&t, test_ours);
	TEST_RUN(&t, test_pipeline_split_layouts);
	TEST_RUN(&t, test_kernels_tf32);
	TEST_RUN(&t, test_attention_kernel_default);
	TEST_RUN(&t, test_expert_tp);
	TEST_RUN(&t, test_dropout_cross_entropy);
	TEST_RUN(&t, test_nccl_algo_proto);
	TEST_RUN(&t, test_presets);
	return test_done(&t);
}
