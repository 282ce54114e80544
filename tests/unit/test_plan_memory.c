/* The memory walk: DeepSpeed's estimators side by side with ours, each strategy knob moving
 * its category by the formula's amount, Korthikanti et al.'s activation figures, pipeline
 * in-flight micro-batches, and the verdict line. */
#include "test.h"
#include "test_plan_fixture.h"

#define PSI_7B 6738415616LL   /* Llama-2-7B parameters (reference/deepspeed.md §6.2) */
#define LARGEST_7B 131072000LL /* 32000 x 4096: the embedding / lm_head */

static double gib(int64_t b) { return (double)b / (double)TW_GIB; }

/* reference/deepspeed.md §4.3, Example A and B: 1 node x 8 GPUs */
static void test_deepspeed_estimators(struct test_ctx *t)
{
	struct plan_mem m;
	struct job *j = fx_job(8);
	int64_t N = 8;
	/* ZeRO-2, no offload: 2 psi + int(18 psi / N) */
	j->strat.zero_stage = 2;
	int64_t ds = 2 * PSI_7B + 18 * PSI_7B / N;
	if (fx_mem(j, 0, &m)) {
		printf("#   ZeRO-2          ours %7.2f GB   DeepSpeed %7.2f GB\n",
		       gib(m.states_peak[GPU]), gib(ds));
		CHECK_EQ_INT(t, m.states_peak[GPU], ds);
	}
	/* ZeRO-3 (their assumptions: fp32 gradient partitions, nothing prefetched or kept):
	 * 4 x largest layer + int(18 psi / N) */
	j->strat.zero_stage = 3;
	j->strat.grad_accum_dtype = TW_FP32;
	j->strat.prefetch_bucket_size = 0, j->strat.max_reuse_distance = 0;
	j->strat.param_persistence_threshold = 0;
	ds = 4 * LARGEST_7B + 18 * PSI_7B / N;
	if (fx_mem(j, 0, &m)) {
		printf("#   ZeRO-3          ours %7.2f GB   DeepSpeed %7.2f GB\n",
		       gib(m.states_peak[GPU]), gib(ds));
		/* the head module carries the final norm: 4 x 4096 elements over theirs */
		CHECK_NEAR(t, m.states_peak[GPU], ds, 1e-5);
	}
	/* ZeRO-3 + optimizer offload: 4 x largest + int(2 psi / N) */
	j->strat.offload_optimizer = STRAT_OFFLOAD_CPU;
	ds = 4 * LARGEST_7B + 2 * PSI_7B / N;
	if (fx_mem(j, 0, &m)) {
		printf("#   ZeRO-3+offload  ours %7.2f GB   DeepSpeed %7.2f GB   (host %.2f GB)\n",
		       gib(m.states_peak[GPU]), gib(ds), gib(m.states_peak[HOST]));
		CHECK_NEAR(t, m.states_peak[GPU], ds, 1e-4);
		/* host: fp32 master, Adam states, fp32 grads, grad partitions (16 B / param / N
		 * plus the 4-byte partition buffer) */
		CHECK_EQ_INT(t, m.states_peak[HOST], (4 + 8 + 4 + 4) * (PSI_7B / N));
	}
	free(j);
}

static void test_zero_divides(struct test_ctx *t)
{
	struct plan_mem a, b;
	struct job *j = fx_job(8);
	j->strat.param_persistence_threshold = 0;
	/* ZeRO-1 divides the optimizer states (and master weights) by dp */
	j->strat.zero_stage = 0;
	bool ok = fx_mem(j, 0, &a);
	j->strat.zero_stage = 1;
	ok &= fx_mem(j, 0, &b);
	if (ok) {
		CHECK_EQ_INT(t, a.max_cat[GPU][PLAN_MEM_OPTIM], 8 * PSI_7B);
		CHECK_EQ_INT(t, b.max_cat[GPU][PLAN_MEM_OPTIM], 8 * PSI_7B / 8);
		CHECK_EQ_INT(t, b.max_cat[GPU][PLAN_MEM_MASTER], 4 * PSI_7B / 8);
		/* ZeRO-1 still holds the whole 16-bit gradients during accumulation */
		CHECK(t, b.max_cat[GPU][PLAN_MEM_GRADS] >= 2 * PSI_7B);
	}
	/* ZeRO-2 keeps only partitions of the gradients */
	j->strat.zero_stage = 2;
	if (fx_mem(j, 0, &a))
		CHECK(t, a.max_cat[GPU][PLAN_MEM_GRADS] <= 6 * PSI_7B / 8 + 2);
	/* ZeRO-3 divides the parameters */
	j->strat.zero_stage = 3;
	if (fx_mem(j, 0, &b)) {
		CHECK_EQ_INT(t, a.max_cat[GPU][PLAN_MEM_PARAMS], 2 * PSI_7B);
		CHECK_EQ_INT(t, b.max_cat[GPU][PLAN_MEM_PARAMS], 2 * PSI_7B / 8);
		CHECK(t, b.max_cat[GPU][PLAN_MEM_GATHERED] > 0);
	}
	/* FSDP FULL_SHARD: fp32 shards of everything */
	j->strat.framework = STRAT_FSDP;
	j->strat.fsdp_sharding = STRAT_FSDP_FULL_SHARD;
	if (fx_mem(j, 0, &a)) {
		CHECK_EQ_INT(t, a.max_cat[GPU][PLAN_MEM_MASTER], 4 * PSI_7B / 8);
		CHECK_EQ_INT(t, a.max_cat[GPU][PLAN_MEM_OPTIM], 8 * PSI_7B / 8);
	}
	/* HYBRID_SHARD over 4-rank shard groups: shards are twice as large */
	j->strat.fsdp_sharding = STRAT_FSDP_HYBRID_SHARD;
	j->strat.shard_group = 4;
	if (fx_mem(j, 0, &b))
		CHECK_EQ_INT(t, b.max_cat[GPU][PLAN_MEM_OPTIM], 8 * PSI_7B / 4);
	/* Megatron distributed optimizer: 6 + 12/d bytes per parameter of states */
	fx_megatron(j);
	j->strat.distributed_optimizer = true;
	if (fx_mem(j, 0, &a)) {
		int64_t st = a.max_cat[GPU][PLAN_MEM_PARAMS] + a.max_cat[GPU][PLAN_MEM_GRADS] +
			     a.max_cat[GPU][PLAN_MEM_MASTER] + a.max_cat[GPU][PLAN_MEM_OPTIM];
		CHECK_EQ_INT(t, st, 6 * PSI_7B + 12 * (PSI_7B / 8));
	}
	free(j);
}

/* GPT-style per-rank weights under TP: (12 h^2 + 13 h)/tp per layer except 4h of norms */
static void test_tp_divides_weights(struct test_ctx *t)
{
	struct plan_mem m;
	int64_t tps[] = {1, 4};
	for (int i = 0; i < 2; i++) {
		int64_t tp = tps[i];
		struct job *j = fx_job(8);
		fx_gpt(&j->model, 8, 1024, 16);
		j->seq = 2048;
		fx_megatron(j);
		fx_degrees(j, tp, 1, 1, 1, 1);
		int64_t h = 1024, L = 8, V = 51200;
		int64_t layer = (4 * h * h + 4 * h + 8 * h * h + 5 * h) / tp + 4 * h;
		int64_t want = L * layer + V * h / tp + 2048 * h + 2 * h;
		if (fx_mem(j, 0, &m))
			CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_PARAMS], 2 * want);
		free(j);
	}
}

/* Korthikanti et al. 2022, per layer (bytes): sbh (10 + 24/t + 5as/(ht)) with TP,
 * sbh/t (34 + 5as/h) with TP + SP; selective drops the 5as/h term; full keeps 2sbh. */
static double korthikanti(double s, double b, double h, double a, double t, bool sp, bool sel)
{
	double sc = sel ? 0 : 5 * a * s / h;
	return sp ? s * b * h / t * (34 + sc) : s * b * h * (10 + 24 / t + sc / t);
}

static void gpt_korthikanti(struct job *j, int64_t tp, int64_t pp, int64_t micro,
			    int64_t accum)
{
	fx_gpt(&j->model, 8, 1024, 16);
	j->seq = 2048;
	fx_megatron(j);
	j->strat.param_dtype = TW_FP16;
	j->strat.flash_attention = false;
	fx_degrees(j, tp, pp, 1, micro, accum);
}

static void test_activations_korthikanti(struct test_ctx *t)
{
	struct plan_mem m;
	struct {
		int64_t tp;
		bool sp;
		enum strat_recompute rc;
	} cases[] = {
		{1, false, STRAT_RECOMPUTE_NONE}, {4, false, STRAT_RECOMPUTE_NONE},
		{4, true, STRAT_RECOMPUTE_NONE},  {4, false, STRAT_RECOMPUTE_SELECTIVE},
		{4, true, STRAT_RECOMPUTE_SELECTIVE},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct job *j = fx_job(8);
		gpt_korthikanti(j, cases[i].tp, 1, 2, 1);
		j->strat.sequence_parallel = cases[i].sp;
		j->strat.recompute = cases[i].rc;
		double want = 8 * korthikanti(2048, 2, 1024, 16, (double)cases[i].tp, cases[i].sp,
					      cases[i].rc == STRAT_RECOMPUTE_SELECTIVE);
		if (fx_mem(j, 0, &m))
			CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], want, 1e-12);
		/* flash attention removes the 5as/h term as selective recompute does */
		j->strat.flash_attention = true;
		j->strat.recompute = STRAT_RECOMPUTE_NONE;
		want = 8 * korthikanti(2048, 2, 1024, 16, (double)cases[i].tp, cases[i].sp, true);
		if (fx_mem(j, 0, &m))
			CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], want, 1e-12);
		free(j);
	}
	/* full recompute keeps the 2sbh layer inputs (divided by t under SP or DeepSpeed's
	 * partition_activations); one layer's activations live at a time */
	struct job *j = fx_job(8);
	gpt_korthikanti(j, 4, 1, 2, 1);
	j->strat.recompute = STRAT_RECOMPUTE_FULL;
	if (fx_mem(j, 0, &m)) {
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_CKPT], 8 * 2 * 2048 * 2 * 1024);
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV],
			   korthikanti(2048, 2, 1024, 16, 4, false, false), 1e-12);
	}
	j->strat.framework = STRAT_DEEPSPEED;
	j->strat.partition_activations = true;
	if (fx_mem(j, 0, &m))
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_CKPT], 8 * 2 * 2048 * 2 * 1024 / 4);
	j->strat.cpu_checkpointing = true; /* checkpoints move to host memory */
	if (fx_mem(j, 0, &m)) {
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_CKPT], 0);
		CHECK_EQ_INT(t, m.max_cat[HOST][PLAN_MEM_CKPT], 8 * 2 * 2048 * 2 * 1024 / 4);
	}
	free(j);
}

/* fp8 GEMMs (Transformer Engine) keep the fp8 copy of each GEMM's input for the weight grad:
 * QKV's, out-proj's and fc1's inputs 1 sbh each instead of 2, fc2's 4 sbh instead of 8, so
 * Korthikanti's 34 sbh become 27 (10 + 24/t: 8 + 19/t without SP); the rest stays 16-bit */
static void test_activations_fp8(struct test_ctx *t)
{
	struct plan_mem m;
	for (int sp = 0; sp < 2; sp++) {
		struct job *j = fx_job(8);
		gpt_korthikanti(j, 4, 1, 2, 1);
		j->strat.param_dtype = TW_BF16;
		j->strat.sequence_parallel = sp;
		j->strat.fp8_gemm = true;
		double s = 2048, b = 2, h = 1024, tt = 4, sc = 5 * 16 * s / h;
		double want = 8 * (sp ? s * b * h / tt * (27 + sc) : s * b * h * (8 + 19 / tt + sc / tt));
		if (fx_mem(j, 0, &m))
			CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], want, 1e-12);
		j->strat.fp8_gemm = false;
		if (fx_mem(j, 0, &m))
			CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV],
				   8 * korthikanti(s, b, h, 16, tt, sp, false), 1e-12);
		free(j);
	}
}

/* the fp32 softmax of Megatron's fallback path (16 heads at TP 8 with micro-batch 1: 2 score
 * batches, not a multiple of the fused kernel's 4): 7as/h instead of 5as/h kept for backward,
 * and the attention ops say which path they take */
static int count_attn(const struct job *j, int want_torch)
{
	struct plan p;
	struct tw_err e = {0};
	if (plan_rank(j, 0, &p, &e) != TW_OK)
		return -1;
	int n = 0;
	for (size_t i = 0; i < p.nops; i++) {
		const struct plan_op *op = &p.ops[i];
		if (op->kind == PLAN_COMPUTE && op->u.compute.kernel == PLAN_K_ATTN &&
		    op->u.compute.torch_softmax == want_torch)
			n++;
	}
	plan_release(&p);
	return n;
}

static void test_activations_torch_softmax(struct test_ctx *t)
{
	struct plan_mem m;
	struct job *j = fx_job(8);
	gpt_korthikanti(j, 8, 1, 1, 1);
	double sbh = 2048.0 * 1 * 1024, as_h = 16.0 * 2048 / 1024;
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * sbh * (10 + 24.0 / 8 + 7 * as_h / 8), 1e-12);
	/* 8 layers x (forward + backward) attention ops, all on the fallback */
	CHECK_EQ_INT(t, count_attn(j, 1), 16);
	CHECK_EQ_INT(t, count_attn(j, 0), 0);
	/* micro-batch 2 gives 4 score batches: the fused kernel, 5as/h */
	gpt_korthikanti(j, 8, 1, 2, 1);
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * 2 * sbh * (10 + 24.0 / 8 + 5 * as_h / 8), 1e-12);
	CHECK_EQ_INT(t, count_attn(j, 1), 0);
	/* beyond 4096 tokens the kernel does not apply at any batch; flash attention never uses it;
	 * Megatron-DeepSpeed's code (DeepSpeed, fused kernels) is Megatron's; the eager model code
	 * runs HF's eager attention instead (6 a s^2 b kept: fp32 softmax output, 16-bit P) */
	j->seq = 8192;
	CHECK_EQ_INT(t, count_attn(j, 0), 0);
	j->strat.flash_attention = true;
	CHECK_EQ_INT(t, count_attn(j, 1), 0);
	j->strat.flash_attention = false;
	j->strat.framework = STRAT_DEEPSPEED;
	CHECK_EQ_INT(t, count_attn(j, 1), 16);
	j->strat.kernels = STRAT_KERNELS_EAGER;
	CHECK_EQ_INT(t, count_attn(j, 1), 0);
	CHECK_EQ_INT(t, count_attn(j, PLAN_SOFTMAX_HF_EAGER), 16);
	j->seq = 2048;
	gpt_korthikanti(j, 8, 1, 2, 1);
	j->strat.framework = STRAT_DEEPSPEED, j->strat.kernels = STRAT_KERNELS_EAGER;
	j->strat.attention_dropout = 0; /* HF's configs */
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * 2 * sbh * (10 + 24.0 / 8 + 6 * as_h / 8), 1e-12);
	free(j);
}

/* kernels eager: each layer also keeps its two RMSNorms' fp32 input copies (4 bytes for the
 * input's 2) and SwiGLU's silu output for the product's backward; HF's loss holds more */
static void test_activations_eager(struct test_ctx *t)
{
	struct plan_mem fused, eager;
	struct job *j = fx_job(8);
	j->strat.recompute = STRAT_RECOMPUTE_NONE;
	const double T = 4096, h = 4096, f = 11008, L = 32;
	j->strat.kernels = STRAT_KERNELS_FUSED;
	bool ok = fx_mem(j, 0, &fused);
	j->strat.kernels = STRAT_KERNELS_EAGER;
	if (ok && fx_mem(j, 0, &eager)) {
		CHECK_NEAR(t, eager.max_cat[GPU][PLAN_MEM_ACTIV] - fused.max_cat[GPU][PLAN_MEM_ACTIV],
			   L * (2 * T * h * (4 - 2) + T * f * 2), 1e-12);
		/* the loss: Megatron's keeps 16-bit logits and its fp32 copy (6 bytes per logit);
		 * HF's has the 16-bit logits, their fp32 cast and log_softmax's fp32 output live
		 * at once (10) and keeps only the last */
		CHECK_NEAR(t, fused.max_cat[GPU][PLAN_MEM_LOGITS], T * 32000 * 6, 1e-12);
		CHECK_NEAR(t, eager.max_cat[GPU][PLAN_MEM_LOGITS], T * 32000 * 10, 1e-12);
	} else {
		CHECK(t, false);
	}
	free(j);
}

/* no dropout (HF / torchtitan configs, the eager code's default): no masks after attention and
 * MLP (2 sbh less), and without flash attention Megatron's fused softmax path keeps only the
 * probabilities (2 a s^2 b instead of 5), its fp32 fallback 6 instead of 7, HF's eager
 * attention 6 (7 with dropout: the mask and the dropout output in place of the probabilities) */
static void test_activations_dropout(struct test_ctx *t)
{
	struct plan_mem m;
	struct job *j = fx_job(8);
	double sbh = 2048.0 * 2 * 1024, as_h = 16.0 * 2048 / 1024;
	gpt_korthikanti(j, 1, 1, 2, 1);
	j->strat.flash_attention = true;
	j->strat.hidden_dropout = 0;
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * sbh * 32, 1e-12);
	j->strat.hidden_dropout = 0.1;
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * sbh * 34, 1e-12);
	/* attention dropout matters only where the s x s probabilities are kept */
	j->strat.attention_dropout = 0;
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * sbh * 34, 1e-12);
	j->strat.flash_attention = false;
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * sbh * (34 + 2 * as_h), 1e-12);
	j->strat.attention_dropout = 0.1;
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * sbh * (34 + 5 * as_h), 1e-12);
	/* the fp32 fallback (TP 8, micro-batch 1: 2 score batches) */
	gpt_korthikanti(j, 8, 1, 1, 1);
	double sbh1 = sbh / 2;
	j->strat.attention_dropout = 0;
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * sbh1 * (10 + 24.0 / 8 + 6 * as_h / 8), 1e-12);
	/* HF's eager attention */
	gpt_korthikanti(j, 1, 1, 2, 1);
	j->strat.framework = STRAT_DEEPSPEED, j->strat.kernels = STRAT_KERNELS_EAGER;
	j->strat.hidden_dropout = 0;
	for (int d = 0; d <= 1; d++) {
		j->strat.attention_dropout = d ? 0.1 : 0;
		if (fx_mem(j, 0, &m))
			CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 8 * sbh * (32 + (6 + d) * as_h), 1e-12);
	}
	free(j);
}

/* cross_entropy fused: the 16-bit logits alone are kept (the kernel writes their gradient over
 * them), for Megatron's code and the eager one alike; the loss moves 3 bytes per logit element
 * forward and 2 backward at 16 bits (Megatron's unfused: 38 and 14) */
static void test_cross_entropy_fused(struct test_ctx *t)
{
	struct plan_mem m;
	struct job *j = fx_job(8);
	const double T = 4096, V = 32000;
	for (int k = 0; k < 2; k++) {
		j->strat.kernels = k ? STRAT_KERNELS_EAGER : STRAT_KERNELS_FUSED;
		j->strat.cross_entropy = STRAT_CE_FUSED;
		if (fx_mem(j, 0, &m))
			CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_LOGITS], T * V * 2, 1e-12);
		double fwd = -1, bwd = -1;
		struct plan p;
		struct tw_err e = {0};
		for (int fused = 0; fused < 2; fused++) {
			j->strat.cross_entropy = fused ? STRAT_CE_FUSED : STRAT_CE_UNFUSED;
			if (plan_rank(j, 0, &p, &e) != TW_OK) {
				CHECK(t, false);
				continue;
			}
			for (size_t i = 0; i < p.nops; i++) {
				const struct plan_op *op = &p.ops[i];
				if (op->kind == PLAN_COMPUTE && op->u.compute.kernel == PLAN_K_LOSS) {
					if (op->phase == PLAN_PHASE_FWD)
						fwd = op->u.compute.bytes;
					else
						bwd = op->u.compute.bytes;
				}
			}
			plan_release(&p);
			double wf = fused ? 6 : k ? 18 : 38, wb = fused ? 4 : k ? 22 : 14;
			CHECK_NEAR(t, fwd, T * V * wf, 1e-12);
			CHECK_NEAR(t, bwd, T * V * wb, 1e-12);
		}
	}
	free(j);
}

/* DeepSpeed's BF16_Optimizer (bf16, fp32 grad accumulation, ZeRO-1) keeps a full fp32 grad
 * buffer beside the bf16 param.grad and steps on it: 4 bytes per parameter more than the
 * ZeRO-1 optimizer's peak of the bf16 grads and its 16-bit partition copy */
static void test_bf16_optimizer_grads(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 2);
	j->strat.zero_stage = 1;
	double psi = fx_params(j);
	struct plan_mem a, b;
	if (fx_mem(j, 0, &a)) {
		j->strat.grad_accum_dtype = TW_FP32;
		if (fx_mem(j, 0, &b))
			CHECK_NEAR(t, (double)b.max_cat[GPU][PLAN_MEM_GRADS] -
					      (double)a.max_cat[GPU][PLAN_MEM_GRADS],
				   4 * psi - 2 * psi / 8, 1e-6);
	}
	free(j);
}

/* in-flight micro-batches per stage: 1F1B min(pp - s, m), GPipe m, interleaved more */
static void test_pipeline_inflight(struct test_ctx *t)
{
	struct plan_mem m;
	double per_layer = korthikanti(2048, 1, 1024, 16, 1, false, false);
	enum strat_schedule sc[] = {STRAT_SCHED_DS_1F1B, STRAT_SCHED_1F1B, STRAT_SCHED_GPIPE};
	for (int k = 0; k < 3; k++) {
		for (int64_t s = 0; s < 4; s++) {
			struct job *j = fx_job(4);
			gpt_korthikanti(j, 1, 4, 1, 8);
			j->strat.schedule = sc[k];
			int64_t inflight = sc[k] == STRAT_SCHED_GPIPE ? 8 : 4 - s;
			if (fx_mem(j, s, &m))
				CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], inflight * 2 * per_layer,
					   1e-12);
			free(j);
		}
	}
	/* interleaved, vp = 2: the first stage holds L (1 + (p - 1)/(p v)) layer-micro-batches
	 * of activations: 8 x (1 + 3/8) = 11 */
	struct job *j = fx_job(4);
	gpt_korthikanti(j, 1, 4, 1, 8);
	j->strat.schedule = STRAT_SCHED_INTERLEAVED;
	j->strat.vp = 2;
	if (fx_mem(j, 0, &m))
		CHECK_NEAR(t, m.max_cat[GPU][PLAN_MEM_ACTIV], 11 * per_layer, 1e-12);
	free(j);
}

static void test_offload_moves_states(struct test_ctx *t)
{
	struct plan_mem m;
	struct job *j = fx_job(8);
	j->strat.zero_stage = 2;
	j->strat.offload_optimizer = STRAT_OFFLOAD_CPU;
	if (fx_mem(j, 0, &m)) {
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_OPTIM], 0);
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_MASTER], 0);
		CHECK_EQ_INT(t, m.max_cat[HOST][PLAN_MEM_OPTIM], 8 * PSI_7B / 8);
		CHECK_EQ_INT(t, m.max_cat[HOST][PLAN_MEM_MASTER], 4 * PSI_7B / 8);
		/* DeepSpeed's ZeRO-2 offload estimate: the 16-bit parameters only */
		CHECK_EQ_INT(t, m.states_peak[GPU], 2 * PSI_7B);
	}
	j->strat.zero_stage = 3;
	j->strat.offload_optimizer = STRAT_OFFLOAD_NVME;
	j->strat.offload_param = STRAT_OFFLOAD_CPU;
	if (fx_mem(j, 0, &m)) {
		CHECK_EQ_INT(t, m.max_cat[PLAN_DEV_NVME][PLAN_MEM_OPTIM], 8 * PSI_7B / 8);
		CHECK_EQ_INT(t, m.max_cat[HOST][PLAN_MEM_PARAMS], 2 * PSI_7B / 8);
		CHECK(t, m.max_cat[HOST][PLAN_MEM_BUCKETS] > 0); /* pinned swap buffers */
		CHECK(t, m.max_cat[GPU][PLAN_MEM_PARAMS] < 2 * PSI_7B / 8);
	}
	free(j);
}

/* ZeRO-3 partial offload (offload_optimizer.ratio): of a rank's nsub optimizer sub-groups,
 * from DeepSpeed 0.18.0 the first int((1 - ratio) x nsub) stay on the GPU and the rest live
 * and step on the host; before, the first int(ratio x nsub) went to the host. Llama-2-7B on 8
 * ranks: 842,301,952 elements a rank, 9 sub-groups of 1e8 (the last 42.3M); at 0.5 the GPU
 * keeps int(4.5) = 4 (before: the host took 4). With the default sub_group_size (1e9: one
 * sub-group) int(0.5) = 0: everything is offloaded (before: nothing). */
static void partial_offload_case(struct test_ctx *t, struct job *j, int64_t host, int64_t steps_host)
{
	struct plan_mem m;
	const int64_t part = PSI_7B / 8, gpu = part - host;
	if (fx_mem(j, 0, &m)) {
		CHECK_EQ_INT(t, m.max_cat[HOST][PLAN_MEM_MASTER], 4 * host);
		CHECK_EQ_INT(t, m.max_cat[HOST][PLAN_MEM_OPTIM], 8 * host);
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_MASTER], 4 * gpu);
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_OPTIM], 8 * gpu);
	}
	struct plan p;
	struct tw_err e = {0};
	if (plan_rank(j, 0, &p, &e) == TW_OK) {
		int64_t on_host = 0, on_gpu = 0, h2d = 0, nsub = (part + j->strat.sub_group_size - 1) /
								  j->strat.sub_group_size;
		int64_t host_elems = 0, gpu_elems = 0;
		/* sub-groups step in index order: the GPU's come first from 0.18.0, last before */
		bool order = true, seen_host = false, seen_gpu = false;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *op = &p.ops[i];
			if (op->kind == PLAN_COMPUTE && op->u.compute.kernel == PLAN_K_OPTIM) {
				bool h = op->stream == PLAN_STREAM_HOST;
				*(h ? &on_host : &on_gpu) += 1;
				*(h ? &host_elems : &gpu_elems) += op->u.compute.m;
				if (j->strat.ds_ratio_last ? !h && seen_host : h && seen_gpu)
					order = false;
				*(h ? &seen_host : &seen_gpu) = true;
			}
			h2d += op->kind == PLAN_COPY && op->phase == PLAN_PHASE_OPT &&
			       op->u.copy.dir == PLAN_H2D;
		}
		CHECK_EQ_INT(t, on_host, steps_host);
		CHECK_EQ_INT(t, on_gpu, nsub - steps_host);
		CHECK_EQ_INT(t, host_elems, host);
		CHECK_EQ_INT(t, gpu_elems, gpu);
		CHECK(t, order);
		CHECK_EQ_INT(t, h2d, steps_host); /* only the host's sub-groups send their 16-bit copy */
		plan_release(&p);
	}
}

static void test_partial_offload(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	const int64_t part = PSI_7B / 8;
	j->strat.zero_stage = 3;
	j->strat.offload_optimizer = STRAT_OFFLOAD_CPU;
	j->strat.offload_ratio = 0.5;
	j->strat.sub_group_size = 100000000;
	partial_offload_case(t, j, part - 400000000, 5);
	j->strat.sub_group_size = 1000000000;
	partial_offload_case(t, j, part, 1);
	j->strat.ds_ratio_last = false; /* DeepSpeed before 0.18.0 */
	partial_offload_case(t, j, 0, 0);
	j->strat.sub_group_size = 100000000;
	partial_offload_case(t, j, 400000000, 4);
	j->strat.offload_ratio = 1.0;
	partial_offload_case(t, j, part, 9);
	free(j);
}

/* The plan holds the parameters model.c counts, OPT-350m's narrower embedding (proj_dim: V x
 * 512 rows, project_in and project_out) too */
static void test_params_proj_dim(struct test_ctx *t)
{
	struct plan_mem m;
	struct job *j = fx_job(8);
	j->model.proj_dim = 512;
	struct model_params mp;
	model_count(&j->model, &mp);
	CHECK_EQ_INT(t, mp.total, PSI_7B - 2 * 32000LL * 4096 + 2 * 32000LL * 512 + 2 * 4096LL * 512);
	if (fx_mem(j, 0, &m))
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_PARAMS], 2 * mp.total);
	free(j);
}

/* The plan's MoE layers are the model's: with dense_layers 1 and moe_layer_freq 2, layers 1,
 * 3 and 5 of 6 (the rule model_count uses, (l + 1) % freq == 0) */
static void test_params_moe_layers(struct test_ctx *t)
{
	struct plan_mem m;
	struct job *j = fx_job(8);
	j->strat.zero_stage = 0;
	j->model.layers = 6;
	j->model.experts = 4, j->model.top_k = 2, j->model.expert_ffn_hidden = 2048;
	j->model.dense_layers = 1, j->model.moe_layer_freq = 2;
	struct model_params mp;
	model_count(&j->model, &mp);
	CHECK_EQ_INT(t, mp.experts, 3 * mp.moe_per_layer);
	if (fx_mem(j, 0, &m))
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_PARAMS], 2 * mp.total);
	free(j);
}

static void test_lora(struct test_ctx *t)
{
	struct plan_mem m;
	struct job *j = fx_job(8);
	j->strat.lora_rank = 8;
	j->strat.lora_targets = STRAT_LORA_Q | STRAT_LORA_V;
	int64_t lp = 32 * 2 * 8 * (4096 + 4096); /* 4,194,304 adapter parameters */
	if (fx_mem(j, 0, &m)) {
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_PARAMS], 2 * PSI_7B); /* frozen base stays */
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_GRADS], 2 * lp);
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_OPTIM], 8 * lp);
		CHECK_EQ_INT(t, m.max_cat[GPU][PLAN_MEM_MASTER], 4 * lp);
	}
	free(j);
}

static void test_verdict(struct test_ctx *t)
{
	struct plan_mem m;
	char v[256];
	struct job *j = fx_job(8);
	j->cluster.gpu.context_gib = 1.0;
	j->cluster.eff.alloc_fragmentation = 1.1;
	j->strat.zero_stage = 0;
	if (fx_mem(j, 0, &m)) {
		CHECK_EQ_INT(t, m.context_bytes, TW_GIB);
		CHECK_NEAR(t, m.fragmentation_bytes, 0.1 * m.peak[GPU], 1e-9);
		CHECK_EQ_INT(t, m.gpu_total, m.peak[GPU] + m.context_bytes + m.fragmentation_bytes);
		CHECK(t, !plan_mem_fits(&m, v, sizeof(v)));
		CHECK_STR_CONTAINS(t, v, "does not fit: needs");
		CHECK_STR_CONTAINS(t, v, "largest items: optimizer");
	}
	j->strat.zero_stage = 3;
	if (fx_mem(j, 0, &m)) {
		CHECK(t, plan_mem_fits(&m, v, sizeof(v)));
		CHECK_STR_CONTAINS(t, v, "GiB free");
		/* the shortfall: the GPU's (negative: free bytes) until the host share overflows */
		CHECK_EQ_INT(t, plan_mem_shortfall(&m, v, sizeof(v)), m.gpu_total - m.gpu_capacity);
		m.peak[PLAN_DEV_HOST] = 10 * TW_GIB, m.host_capacity = 7 * TW_GIB;
		CHECK_EQ_INT(t, plan_mem_shortfall(&m, v, sizeof(v)), 3 * TW_GIB);
		CHECK_STR_CONTAINS(t, v, "host memory does not fit: needs 3.00 GiB more");
	}
	free(j);
}

/* plan_job_fit: the worst role of a pipeline, the same bytes plan_memory gives that role */
static void test_job_fit(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 2, 1, 1, 4);
	j->strat.zero_stage = 1;
	int64_t reps[2], w8[2];
	struct plan_mem m0, m1;
	struct plan_fit f;
	struct tw_err err = {0};
	if (plan_roles(j, reps, w8, 2) == 2 && fx_mem(j, reps[0], &m0) && fx_mem(j, reps[1], &m1) &&
	    plan_job_fit(j, &f, &err) == TW_OK) {
		const struct plan_mem *w = m0.gpu_total >= m1.gpu_total ? &m0 : &m1;
		CHECK(t, m0.gpu_total != m1.gpu_total); /* the stages differ */
		CHECK_EQ_INT(t, f.gpu_total, w->gpu_total);
		CHECK_EQ_INT(t, f.rank, w == &m0 ? reps[0] : reps[1]);
		CHECK_EQ_INT(t, f.short_bytes, w->gpu_total - w->gpu_capacity);
		CHECK(t, f.fits == (f.short_bytes <= 0));
		/* shrink the GPU below the fullest stage: the verdict turns, naming the shortfall */
		j->cluster.gpu.memory_gib = (double)(w->gpu_total - TW_GIB) / (double)TW_GIB;
		CHECK(t, plan_job_fit(j, &f, &err) == TW_OK);
		CHECK(t, !f.fits);
		CHECK_NEAR(t, f.short_bytes, TW_GIB, 1e-6);
		CHECK_STR_CONTAINS(t, f.verdict, "does not fit: needs 1.00 GiB more");
	} else {
		CHECK(t, false);
	}
	free(j);
}

/* /work/shared/validation/public.json kind=memory: first pipeline stage, fp16 Megatron,
 * no flash attention (2022), vocab 51200 */
static void test_korthikanti_cases(struct test_ctx *t)
{
	struct {
		const char *id;
		int64_t L, h, a, tp, pp, vp, gpus, micro, accum;
		double act_sel, act_base, states;
	} c[] = {
		{"22B", 48, 6144, 64, 8, 1, 1, 8, 4, 1, 9.5625, 59.25, 45.5625},
		{"175B", 96, 12288, 96, 8, 8, 3, 64, 1, 64, 12.3515625, 66.84375, 45.5625},
		{"1T", 128, 25600, 160, 8, 64, 1, 512, 1, 512, 26.5625, 131.25, 32.958984375},
	};
	for (size_t i = 0; i < 3; i++) {
		struct plan_mem sel, base;
		struct job *j = fx_job(c[i].gpus);
		fx_gpt(&j->model, c[i].L, c[i].h, c[i].a);
		j->seq = 2048;
		fx_megatron(j);
		j->strat.param_dtype = TW_FP16;
		j->strat.flash_attention = false;
		j->strat.schedule = c[i].vp > 1 ? STRAT_SCHED_INTERLEAVED : STRAT_SCHED_1F1B;
		j->strat.vp = c[i].vp;
		fx_degrees(j, c[i].tp, c[i].pp, 1, c[i].micro, c[i].accum);
		j->strat.sequence_parallel = true;
		j->strat.recompute = STRAT_RECOMPUTE_SELECTIVE;
		bool ok = fx_mem(j, 0, &sel);
		j->strat.sequence_parallel = false;
		j->strat.recompute = STRAT_RECOMPUTE_NONE;
		ok &= fx_mem(j, 0, &base);
		if (ok) {
			double as = gib(sel.max_cat[GPU][PLAN_MEM_ACTIV]);
			double ab = gib(base.max_cat[GPU][PLAN_MEM_ACTIV]);
			double st = gib(sel.at_peak[GPU][PLAN_MEM_PARAMS] + sel.at_peak[GPU][PLAN_MEM_GRADS] +
					sel.at_peak[GPU][PLAN_MEM_MASTER] + sel.at_peak[GPU][PLAN_MEM_OPTIM]);
			/* the paper's bar leaves out the first stage's embedding tables (18 B each) */
			double emb = gib(18 * (51200 * c[i].h / c[i].tp + 2048 * c[i].h));
			printf("#   %-5s SP+selective activations %6.2f GiB (paper %6.2f), TP-only %6.2f "
			       "(paper %6.2f), params+optimizer %6.2f of which embedding %4.2f (paper "
			       "%6.2f without it), peak %6.2f (paper %6.2f)\n",
			       c[i].id, as, c[i].act_sel, ab, c[i].act_base, st, emb, c[i].states,
			       gib(sel.peak[GPU]), c[i].act_sel + c[i].states);
			CHECK_NEAR(t, as, c[i].act_sel, 0.005);
			CHECK_NEAR(t, ab, c[i].act_base, 0.005);
			CHECK_NEAR(t, st - emb, c[i].states, 0.005);
		}
		free(j);
	}
}

/* Figure 7 (22B, tp 8): activation memory relative to the TP baseline */
static void test_korthikanti_fig7(struct test_ctx *t)
{
	struct {
		const char *name;
		bool sp;
		enum strat_recompute rc;
		double paper;
	} v[] = {{"sequence parallel", true, STRAT_RECOMPUTE_NONE, 66.84},
		 {"selective", false, STRAT_RECOMPUTE_SELECTIVE, 49.42},
		 {"SP + selective", true, STRAT_RECOMPUTE_SELECTIVE, 16.18},
		 {"full recompute", false, STRAT_RECOMPUTE_FULL, 7.64}};
	struct plan_mem m;
	struct job *j = fx_job(8);
	fx_gpt(&j->model, 48, 6144, 64);
	j->seq = 2048;
	fx_megatron(j);
	j->strat.param_dtype = TW_FP16;
	j->strat.flash_attention = false;
	fx_degrees(j, 8, 1, 1, 4, 1);
	if (!fx_mem(j, 0, &m)) {
		free(j);
		t->failed_checks++;
		return;
	}
	double base = (double)m.max_cat[GPU][PLAN_MEM_ACTIV];
	for (int i = 0; i < 4; i++) {
		j->strat.sequence_parallel = v[i].sp;
		j->strat.recompute = v[i].rc;
		if (!fx_mem(j, 0, &m))
			continue;
		double a = (double)(v[i].rc == STRAT_RECOMPUTE_FULL ? m.max_cat[GPU][PLAN_MEM_CKPT]
								    : m.max_cat[GPU][PLAN_MEM_ACTIV]);
		printf("#   22B %-17s %5.2f %% of the TP baseline (paper %5.2f %%)\n", v[i].name,
		       100 * a / base, v[i].paper);
		CHECK(t, fabs(100 * a / base - v[i].paper) < 0.2);
	}
	free(j);
}

/* fp8 GEMMs, loss scaling, context and expert parallelism, gradient accumulation */
static void test_more_knobs(struct test_ctx *t)
{
	struct plan_mem a, b;
	struct job *j = fx_job(8);
	bool ok = fx_mem(j, 0, &a);
	j->strat.fp8_gemm = true; /* + 1 B per layer parameter of fp8 weight copies */
	ok &= fx_mem(j, 0, &b);
	if (ok)
		CHECK_EQ_INT(t, b.max_cat[GPU][PLAN_MEM_PARAMS] - a.max_cat[GPU][PLAN_MEM_PARAMS],
			     32 * 202383360LL);
	free(j);

	/* context parallel divides activations by cp (ring and Ulysses alike) */
	j = fx_job(8);
	fx_megatron(j);
	fx_degrees(j, 1, 1, 1, 1, 1);
	ok = fx_mem(j, 0, &a);
	fx_degrees(j, 1, 1, 4, 1, 1);
	ok &= fx_mem(j, 0, &b);
	if (ok)
		CHECK_EQ_INT(t, b.max_cat[GPU][PLAN_MEM_ACTIV] * 4, a.max_cat[GPU][PLAN_MEM_ACTIV]);
	j->strat.cp_kind = STRAT_CP_ULYSSES;
	if (fx_mem(j, 0, &b))
		CHECK_EQ_INT(t, b.max_cat[GPU][PLAN_MEM_ACTIV] * 4, a.max_cat[GPU][PLAN_MEM_ACTIV]);
	free(j);

	/* expert parallelism divides the expert weights: 8 experts x 3 x h x f_e over ep */
	j = fx_job(8);
	struct model *m = &j->model;
	m->layers = 2, m->experts = 8, m->top_k = 2, m->expert_ffn_hidden = 1024;
	m->moe_layer_freq = 1;
	fx_megatron(j);
	j->strat.ep = 1;
	ok = fx_mem(j, 0, &a);
	j->strat.ep = 4;
	ok &= fx_mem(j, 0, &b);
	if (ok)
		CHECK_EQ_INT(t, a.max_cat[GPU][PLAN_MEM_PARAMS] - b.max_cat[GPU][PLAN_MEM_PARAMS],
			     2 * 2 * 6 * (3 * 4096LL * 1024)); /* 2 B x 2 layers x 6 experts gone */
	free(j);

	/* gradient accumulation: more micro-steps, the same model states */
	j = fx_job(8);
	j->strat.zero_stage = 2;
	ok = fx_mem(j, 0, &a);
	fx_degrees(j, 1, 1, 1, 1, 4);
	ok &= fx_mem(j, 0, &b);
	if (ok)
		CHECK_EQ_INT(t, a.states_peak[GPU], b.states_peak[GPU]);
	/* fp16 loss scaling: one overflow all-reduce before the step */
	struct plan p;
	struct tw_err e = {0};
	j->strat.param_dtype = TW_FP16, j->strat.loss_scaling = true;
	if (plan_rank(j, 0, &p, &e) == TW_OK) {
		int n = 0;
		for (size_t i = 0; i < p.nops; i++)
			n += p.ops[i].kind == PLAN_COLL && !strcmp(p.ops[i].name, "overflow_check");
		CHECK_EQ_INT(t, n, 1);
		plan_release(&p);
	}
	free(j);
}

int main(void)
{
	struct test_ctx t = {0};
	TEST_RUN(&t, test_deepspeed_estimators);
	TEST_RUN(&t, test_zero_divides);
	TEST_RUN(&t, test_tp_divides_weights);
	TEST_RUN(&t, test_activations_korthikanti);
	TEST_RUN(&t, test_activations_fp8);
	TEST_RUN(&t, test_activations_torch_softmax);
	TEST_RUN(&t, test_activations_eager);
	TEST_RUN(&t, test_activations_dropout);
	TEST_RUN(&t, test_cross_entropy_fused);
	TEST_RUN(&t, test_bf16_optimizer_grads);
	TEST_RUN(&t, test_pipeline_inflight);
	TEST_RUN(&t, test_offload_moves_states);
	TEST_RUN(&t, test_partial_offload);
	TEST_RUN(&t, test_params_proj_dim);
	TEST_RUN(&t, test_params_moe_layers);
	TEST_RUN(&t, test_lora);
	TEST_RUN(&t, test_verdict);
	TEST_RUN(&t, test_job_fit);
	TEST_RUN(&t, test_korthikanti_cases);
	TEST_RUN(&t, test_korthikanti_fig7);
	TEST_RUN(&t, test_more_knobs);
	return test_done(&t);
}
