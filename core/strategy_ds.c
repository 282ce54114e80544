/* strategy_ds — DeepSpeed's ds_config.json read the way DeepSpeed reads it
 * (/work/shared/reference/deepspeed.md §1): plain top-level keys (unknown ones ignored, with a
 * warning), strict pydantic sections (zero_optimization, offload_*, fp16, bf16,
 * tensor_parallel: an unknown key is an error), "auto" dropped to the default inside the strict
 * sections and filled as the HF Trainer fills it elsewhere, the deprecated keys DeepSpeed still
 * maps, version-dependent defaults, and the batch rule with DeepSpeed's own messages. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "strategy_int.h"

/* A section being read: its object, its path prefix, and whether it is a strict (pydantic)
 * section, where "auto" means "drop the key, take the default". */
struct sec {
	struct strat_rd *r;
	const cJSON *obj;
	const char *prefix; /* "zero_optimization", ... or NULL for the top level */
	bool strict;
};

/* The label of the first of keys a --set gave (its "--set k=v"), else dflt: a rule between
 * several keys names the one the command line changed */
static const char *ds_label_of(const struct strat_rd *r, const char *const *keys, const char *dflt)
{
	for (int i = 0; keys[i]; i++)
		if (strat_find_set(r, STRAT_TREE_DS, keys[i]))
			return strat_label(r, STRAT_TREE_DS, keys[i]);
	return dflt;
}

static const char *const batch_keys[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
					 "gradient_accumulation_steps", NULL};

static void full_path(const struct sec *x, const char *key, char *out, size_t len)
{
	if (x->prefix)
		snprintf(out, len, "%s.%s", x->prefix, key);
	else
		snprintf(out, len, "%s", key);
}

static const cJSON *item(const cJSON *obj, const char *key)
{
	const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	return v && !cJSON_IsNull(v) ? v : NULL;
}

static void dprov(struct strat_rd *r, const char *path, enum strat_src src, const char *why,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void dprov(struct strat_rd *r, const char *path, enum strat_src src, const char *why,
		  const char *fmt, ...)
{
	if (!r->ds_prov)
		return;
	char v[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	strat_prov(r->s, path, src, why, "%s", v);
}

static enum tw_result fail(const struct sec *x, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static enum tw_result fail(const struct sec *x, const char *key, const char *fmt, ...)
{
	char path[128], rule[384];
	full_path(x, key, path, sizeof(path));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	return tw_errf(x->r->err, TW_ERR_INVALID, "%s: %s: %s",
		       strat_label(x->r, STRAT_TREE_DS, path), path, rule);
}

/* The key (or its alias) that is present; both present is an error. */
static enum tw_result pick(const struct sec *x, const char *key, const char *alias,
			   const char **which)
{
	*which = key;
	if (!alias)
		return TW_OK;
	bool a = item(x->obj, key) != NULL, b = item(x->obj, alias) != NULL;
	if (a && b)
		return fail(x, alias, "given together with %s, which it is an alias of", key);
	if (b)
		*which = alias;
	return TW_OK;
}

/* Source and why of a present key (alias noted). */
static enum strat_src src_of(const struct sec *x, const char *key, const char *canon, char *why,
			     size_t len)
{
	char path[128];
	full_path(x, key, path, sizeof(path));
	enum strat_src src = strat_src_of(x->r, STRAT_TREE_DS, path, why, len);
	if (strcmp(key, canon)) {
		size_t n = strlen(why);
		snprintf(why + n, len - n, " (as %s)", key);
	}
	return src;
}

/* "auto" at key: in a strict section DeepSpeed drops it; elsewhere only the HF Trainer can
 * fill it, and callers that know how pass allow_auto. */
static enum tw_result auto_check(const struct sec *x, const char *key, bool allow_auto,
				 bool *is_auto)
{
	const cJSON *v = item(x->obj, key);
	*is_auto = v && strat_is_auto(v);
	if (*is_auto && !x->strict && !allow_auto)
		return fail(x, key, "\"auto\" is filled only by the HF Trainer, which does not fill "
				    "this key; give a value");
	return TW_OK;
}

static const char *auto_why(bool strict)
{
	return strict ? "\"auto\": DeepSpeed drops it, default" : "\"auto\"";
}

/* Integer key with default and provenance. */
static enum tw_result kint(const struct sec *x, const char *key, const char *alias, int64_t min,
			   int64_t max, int64_t def, const char *defwhy, int64_t *out)
{
	const char *which;
	char path[128], why[96];
	bool present = false, is_auto;
	TW_CHECK(pick(x, key, alias, &which));
	full_path(x, key, path, sizeof(path));
	TW_CHECK(auto_check(x, which, false, &is_auto));
	if (!is_auto) {
		char wpath[128];
		full_path(x, which, wpath, sizeof(wpath));
		struct json_ctx c = {strat_label(x->r, STRAT_TREE_DS, wpath), x->prefix, x->r->err};
		int64_t v = def;
		TW_CHECK(json_get_int(&c, x->obj, which, min, max, &v, &present));
		if (present) {
			enum strat_src src = src_of(x, which, key, why, sizeof(why));
			*out = v;
			dprov(x->r, path, src, why, "%" PRId64, v);
			return TW_OK;
		}
	}
	*out = def;
	dprov(x->r, path, STRAT_SRC_DEFAULT, is_auto ? auto_why(x->strict) : defwhy, "%" PRId64, def);
	return TW_OK;
}

static enum tw_result kbool(const struct sec *x, const char *key, const char *alias, bool def,
			    const char *defwhy, bool *out)
{
	const char *which;
	char path[128], why[96];
	bool present = false, is_auto;
	TW_CHECK(pick(x, key, alias, &which));
	full_path(x, key, path, sizeof(path));
	TW_CHECK(auto_check(x, which, false, &is_auto));
	if (!is_auto) {
		char wpath[128];
		full_path(x, which, wpath, sizeof(wpath));
		struct json_ctx c = {strat_label(x->r, STRAT_TREE_DS, wpath), x->prefix, x->r->err};
		bool v = def;
		TW_CHECK(json_get_bool(&c, x->obj, which, &v, &present));
		if (present) {
			enum strat_src src = src_of(x, which, key, why, sizeof(why));
			*out = v;
			dprov(x->r, path, src, why, "%s", v ? "true" : "false");
			return TW_OK;
		}
	}
	*out = def;
	dprov(x->r, path, STRAT_SRC_DEFAULT, is_auto ? auto_why(x->strict) : defwhy, "%s",
	      def ? "true" : "false");
	return TW_OK;
}

/* The reading context of key in section x: labelled with the --set that gave it, else the
 * file (buf holds the key's full path) */
static struct json_ctx kctx(const struct sec *x, const char *key, char *buf, size_t len)
{
	full_path(x, key, buf, len);
	return (struct json_ctx){strat_label(x->r, STRAT_TREE_DS, buf), x->prefix, x->r->err};
}

/* Keys read for their types only (what DeepSpeed's config model would refuse), their effect
 * not modelled: each present key of bools must be a boolean, of ints an integer, of objs an
 * object; "auto" as auto_check says (dropped in a strict section, else refused). */
static enum tw_result ktypes(const struct sec *x, const char *const *bools,
			     const char *const *ints, const char *const *objs)
{
	const char *const *lists[3] = {bools, ints, objs};
	for (int t = 0; t < 3; t++)
		for (int k = 0; lists[t] && lists[t][k]; k++) {
			const char *key = lists[t][k];
			bool is_auto, b;
			int64_t v;
			char p[128];
			TW_CHECK(auto_check(x, key, false, &is_auto));
			struct json_ctx c = kctx(x, key, p, sizeof(p));
			if (is_auto)
				continue;
			if (t == 0)
				TW_CHECK(json_get_bool(&c, x->obj, key, &b, NULL));
			else if (t == 1)
				TW_CHECK(json_get_int(&c, x->obj, key, INT64_MIN, INT64_MAX, &v, NULL));
			else if (item(x->obj, key) && !cJSON_IsObject(item(x->obj, key)))
				return fail(x, key, "must be an object");
		}
	return TW_OK;
}

static enum tw_result knum(const struct sec *x, const char *key, double min, double max,
			   double def, const char *defwhy, double *out, bool record)
{
	char path[128], why[96];
	bool present = false, is_auto;
	full_path(x, key, path, sizeof(path));
	TW_CHECK(auto_check(x, key, false, &is_auto));
	if (!is_auto) {
		struct json_ctx c = {strat_label(x->r, STRAT_TREE_DS, path), x->prefix, x->r->err};
		double v = def;
		TW_CHECK(json_get_num(&c, x->obj, key, min, max, &v, &present));
		if (present) {
			enum strat_src src = src_of(x, key, key, why, sizeof(why));
			*out = v;
			if (record)
				dprov(x->r, path, src, why, "%g", v);
			return TW_OK;
		}
	}
	*out = def;
	if (record)
		dprov(x->r, path, STRAT_SRC_DEFAULT, is_auto ? auto_why(x->strict) : defwhy, "%g", def);
	return TW_OK;
}

/* Enumerated string key; *out is the index in choices, def when absent. */
static enum tw_result kenum(const struct sec *x, const char *key, const char *const *choices,
			    int def, const char *defwhy, int *out, bool *present_out)
{
	char path[128], why[96];
	bool present = false, is_auto;
	full_path(x, key, path, sizeof(path));
	TW_CHECK(auto_check(x, key, false, &is_auto));
	if (present_out)
		*present_out = false;
	if (!is_auto) {
		struct json_ctx c = {strat_label(x->r, STRAT_TREE_DS, path), x->prefix, x->r->err};
		int v = def;
		TW_CHECK(json_get_enum(&c, x->obj, key, choices, &v, &present));
		if (present) {
			enum strat_src src = src_of(x, key, key, why, sizeof(why));
			*out = v;
			if (present_out)
				*present_out = true;
			dprov(x->r, path, src, why, "%s", choices[v]);
			return TW_OK;
		}
	}
	*out = def;
	dprov(x->r, path, STRAT_SRC_DEFAULT, is_auto ? auto_why(x->strict) : defwhy, "%s",
	      choices[def]);
	return TW_OK;
}

/* A sub-object (strict sections may be null or absent). */
static enum tw_result ksec(const struct sec *x, const char *key, bool strict, struct sec *out)
{
	char path[128];
	full_path(x, key, path, sizeof(path));
	const cJSON *v = item(x->obj, key);
	*out = (struct sec){x->r, NULL, NULL, strict};
	if (!v)
		return TW_OK;
	if (strat_is_auto(v) && x->strict)
		return TW_OK;
	if (!cJSON_IsObject(v))
		return fail(x, key, "must be an object");
	out->obj = v;
	/* the prefix must outlive this call: point into the JSON key strings is not possible for
	 * nested paths, so callers pass static prefixes via ksec_named */
	return TW_OK;
}

static enum tw_result check_keys(const struct sec *x, const char *const *allowed)
{
	if (!x->obj)
		return TW_OK;
	const cJSON *it;
	cJSON_ArrayForEach(it, x->obj)
	{
		bool ok = false;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = !strcmp(it->string, allowed[i]);
		if (!ok)
			return fail(x, it->string,
				    "unknown key (DeepSpeed's config model forbids extra keys here)");
	}
	return TW_OK;
}

/* ---- the sections ------------------------------------------------------------------------- */

static const char *const ds_top_keys[] = {
	"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
	"gradient_clipping", "fp16", "bf16", "bfloat16", "zero_optimization", "allgather_size",
	"optimizer", "scheduler", "communication_data_type", "seq_parallel_communication_data_type",
	"prescale_gradients", "gradient_predivide_factor", "gradient_allreduce_op",
	"sparse_gradients", "steps_per_print", "wall_clock_breakdown", "memory_breakdown",
	"dump_state", "activation_checkpointing", "flops_profiler", "comms_logger", "aio",
	"pipeline", "tensor_parallel", "sequence_parallel_size", "data_parallel_size",
	"zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "data_types", "amp",
	"torch_autocast", "elasticity", "checkpoint", "dataloader_drop_last",
	"managed_gradient_accumulation", "compile", "wandb", "tensorboard", "csv_monitor", "comet",
	"sparse_attention", "curriculum_learning", "data_efficiency", "autotuning",
	"compression_training", "quantize_training", "eigenvalue", "progressive_layer_drop",
	"hybrid_engine", "nebula", "weight_quantization", "use_data_before_expert_parallelism",
	"timers", "graph_harvesting", "expert_parallel", "monitor_config", "gradient_checkpointing",
	"zenflow", "use_node_local_storage", "load_universal_checkpoint", "disable_allgather",
	"mesh_param", NULL};

bool strat_ds_top_key(const char *key)
{
	for (int i = 0; ds_top_keys[i]; i++)
		if (!strcmp(key, ds_top_keys[i]))
			return true;
	return false;
}

static const char *const zero_keys[] = {
	"stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size",
	"use_multi_rank_bucket_allreduce", "allgather_partitions", "allgather_bucket_size",
	"overlap_comm", "load_from_fp32_weights", "elastic_checkpoint", "offload_param",
	"offload_optimizer", "zenflow", "sub_group_size", "stage3_prefetch_bucket_size",
	"prefetch_bucket_size", "stage3_param_persistence_threshold", "param_persistence_threshold",
	"stage3_model_persistence_threshold", "model_persistence_threshold",
	"stage3_max_live_parameters", "max_live_parameters", "stage3_max_reuse_distance",
	"max_reuse_distance", "stage3_gather_16bit_weights_on_model_save",
	"gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
	"stage3_module_granularity_threshold", "module_granularity_threshold",
	"stage3_use_all_reduce_for_fetch_params", "use_all_reduce_for_fetch_params",
	"stage3_allgather_sequential", "allgather_sequential", "ignore_unused_parameters",
	"legacy_stage1", "round_robin_gradients", "zero_hpz_partition_size",
	"zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients",
	"zeropp_loco_param", "mics_shard_size", "mics_hierarchical_params_gather",
	"memory_efficient_linear", "pipeline_loading_checkpoint", "override_module_apply",
	"log_trace_cache_warnings", "enable_sanity_checks", "save_muon_momentum_buffer_in_memory",
	"leaf_module", "cpu_offload", "cpu_offload_param", "cpu_offload_use_pin_memory", NULL};
static const char *const offopt_keys[] = {
	"device", "nvme_path", "buffer_count", "pin_memory", "pipeline", "pipeline_read",
	"pipeline_write", "fast_init", "ratio", "super_offload", "cpuadam_cores_perc", NULL};
static const char *const offparam_keys[] = {"device",	   "nvme_path",	 "buffer_count",
					    "buffer_size", "max_in_cpu", "pin_memory", NULL};
static const char *const fp16_keys[] = {
	"enabled", "auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window",
	"hysteresis", "consecutive_hysteresis", "min_loss_scale", "fp16_master_weights_and_grads",
	NULL};
static const char *const bf16_keys[] = {"enabled", "immediate_grad_update", "check_grad_overflow",
					"bf16_master_weights_and_grads", "bf16_optimizer_states",
					NULL};
static const char *const tp_keys[] = {"autotp_size", "tp_overlap_comm", "preset_model",
				      "partition_config", "tp", "dtype", "keep_module_on_host",
				      "kernel_inject", "injection_policy_tuple", NULL};

static const char *const offload_devices[] = {"none", "cpu", "nvme", NULL};
static const char *const dtype3[] = {"fp32", "fp16", "bf16", NULL};
static const enum tw_dtype dtype3_t[] = {TW_FP32, TW_FP16, TW_BF16};

static void warn_unmodelled(struct strat_rd *r, const char *what)
{
	/* named by where its key (what's first word) came from: a --set that gave it, or the file */
	char path[96];
	snprintf(path, sizeof(path), "%.*s", (int)strcspn(what, " "), what);
	strat_warn(r, "%s: %s is read but not modelled; the prediction ignores it",
	       strat_label(r, STRAT_TREE_DS, path), what);
}

/* "enabled" of fp16/bf16, with "auto" filled as the HF Trainer does. */
static enum tw_result precision_section(struct strat_rd *r, const struct sec *top,
					const char *name, bool *enabled, bool *is_auto)
{
	struct sec x;
	TW_CHECK(ksec(top, name, true, &x));
	x.prefix = !strcmp(name, "fp16") ? "fp16" : !strcmp(name, "bf16") ? "bf16" : "bfloat16";
	TW_CHECK(check_keys(&x, !strcmp(name, "fp16") ? fp16_keys : bf16_keys));
	static const char *const fp16_bools[] = {"auto_cast", "consecutive_hysteresis",
						 "fp16_master_weights_and_grads", NULL};
	static const char *const fp16_ints[] = {"hysteresis", NULL};
	static const char *const bf16_bools[] = {"immediate_grad_update",
						 "bf16_master_weights_and_grads",
						 "bf16_optimizer_states", NULL};
	if (!strcmp(name, "fp16"))
		TW_CHECK(ktypes(&x, fp16_bools, fp16_ints, NULL));
	else
		TW_CHECK(ktypes(&x, bf16_bools, NULL, NULL));
	*is_auto = x.obj && strat_is_auto(item(x.obj, "enabled"));
	if (*is_auto)
		return TW_OK;
	bool present = false;
	char path[64];
	snprintf(path, sizeof(path), "%s.enabled", x.prefix);
	struct json_ctx c = {strat_label(r, STRAT_TREE_DS, path), x.prefix, r->err};
	*enabled = false;
	return json_get_bool(&c, x.obj, "enabled", enabled, &present);
}

static enum tw_result parse_batch_key(struct strat_rd *r, const struct sec *top, const char *key,
				      struct strat_bval *b)
{
	const cJSON *v = item(top->obj, key);
	memset(b, 0, sizeof(*b));
	if (!v)
		return TW_OK;
	b->from_set = strat_find_set(r, STRAT_TREE_DS, key) != NULL;
	strat_src_of(r, STRAT_TREE_DS, key, b->why, sizeof(b->why));
	if (strat_is_auto(v)) {
		b->is_auto = true;
		return TW_OK;
	}
	struct json_ctx c = {strat_label(r, STRAT_TREE_DS, key), NULL, r->err};
	/* DeepSpeed checks the sign after the derivation, with its own words (§1.2) */
	return json_get_int(&c, top->obj, key, -INT64_MAX, INT64_MAX, &b->v, &b->given);
}

static enum tw_result parse_offload(struct strat_rd *r, const struct sec *zero, int stage)
{
	struct strategy *s = r->s;
	bool pin_default = r->version >= STRAT_VERSION(0, 19, 5);
	const char *pin_why = pin_default ? "DeepSpeed default (>= 0.19.5)"
					  : "DeepSpeed default (< 0.19.5)";
	struct sec oo, op;
	TW_CHECK(ksec(zero, "offload_optimizer", true, &oo));
	oo.prefix = "zero_optimization.offload_optimizer";
	TW_CHECK(check_keys(&oo, offopt_keys));
	TW_CHECK(ksec(zero, "offload_param", true, &op));
	op.prefix = "zero_optimization.offload_param";
	TW_CHECK(check_keys(&op, offparam_keys));

	/* deprecated booleans DeepSpeed still maps (§1.1) */
	bool cpu_off = false, cpu_off_param = false, unused;
	struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "zero_optimization.cpu_offload"),
			     "zero_optimization", r->err};
	TW_CHECK(json_get_bool(&c, zero->obj, "cpu_offload", &cpu_off, NULL));
	c.file = strat_label(r, STRAT_TREE_DS, "zero_optimization.cpu_offload_param");
	TW_CHECK(json_get_bool(&c, zero->obj, "cpu_offload_param", &cpu_off_param, NULL));
	c.file = strat_label(r, STRAT_TREE_DS, "zero_optimization.cpu_offload_use_pin_memory");
	TW_CHECK(json_get_bool(&c, zero->obj, "cpu_offload_use_pin_memory", &unused, NULL));
	if (item(zero->obj, "cpu_offload") && oo.obj)
		return fail(zero, "cpu_offload",
			    "Cannot provide deprecated parameter 'cpu_offload' and replacing "
			    "parameter 'offload_optimizer' together");
	if (item(zero->obj, "cpu_offload_param") && op.obj)
		return fail(zero, "cpu_offload_param",
			    "Cannot provide deprecated parameter 'cpu_offload_param' and replacing "
			    "parameter 'offload_param' together");

	int dev = 0;
	char why[96];
	if (cpu_off) {
		strat_src_of(r, STRAT_TREE_DS, "zero_optimization.cpu_offload", why, sizeof(why));
		strncat(why, " (deprecated cpu_offload)", sizeof(why) - strlen(why) - 1);
		dev = STRAT_OFFLOAD_CPU;
		dprov(r, "zero_optimization.offload_optimizer.device",
		      strat_src_of(r, STRAT_TREE_DS, "zero_optimization.cpu_offload", NULL, 0), why,
		      "cpu");
	} else {
		TW_CHECK(kenum(&oo, "device", offload_devices, 0, "DeepSpeed default", &dev, NULL));
	}
	s->offload_optimizer = (enum strat_offload)dev;
	if (s->offload_optimizer != STRAT_OFFLOAD_NONE) {
		TW_CHECK(kbool(&oo, "pin_memory", NULL, pin_default, pin_why, &s->offload_pin_memory));
		TW_CHECK(knum(&oo, "ratio", 0.0, 1.0, 1.0, "DeepSpeed default", &s->offload_ratio,
			      true));
		if (s->offload_ratio < 1.0 && s->offload_optimizer == STRAT_OFFLOAD_NVME)
			warn_unmodelled(r, "zero_optimization.offload_optimizer.ratio with device "
					   "nvme (every sub-group is offloaded)");
		bool super = false;
		TW_CHECK(kbool(&oo, "super_offload", NULL, false, "DeepSpeed default", &super));
		if (super)
			warn_unmodelled(r, "zero_optimization.offload_optimizer.super_offload");
		/* read for their types and ranges; their effect is not modelled */
		char kp[128], path[1024];
		int64_t bc;
		struct json_ctx kc = kctx(&oo, "buffer_count", kp, sizeof(kp));
		TW_CHECK(json_get_int(&kc, oo.obj, "buffer_count", 0, INT64_MAX, &bc, NULL));
		static const char *const bkeys[] = {"pipeline", "pipeline_read", "pipeline_write",
						    "fast_init", NULL};
		TW_CHECK(ktypes(&oo, bkeys, NULL, NULL));
		double perc;
		kc = kctx(&oo, "cpuadam_cores_perc", kp, sizeof(kp));
		TW_CHECK(json_get_num(&kc, oo.obj, "cpuadam_cores_perc", 0, 1, &perc, NULL));
		kc = kctx(&oo, "nvme_path", kp, sizeof(kp));
		bool given = false;
		TW_CHECK(json_get_str(&kc, oo.obj, "nvme_path", path, sizeof(path), &given));
		/* ZeRO-3's optimizer swapper joins its swap folder onto the path (ZeRO-1/2 keep the
		 * states in DRAM, below) */
		if (s->offload_optimizer == STRAT_OFFLOAD_NVME && stage == 3 && !given)
			return fail(&oo, "nvme_path", "required with device nvme (DeepSpeed's "
						      "swapper keeps the optimizer states there)");
	} else {
		s->offload_pin_memory = pin_default;
		s->offload_ratio = 1.0;
		/* a ratio under a disabled offload is still validated by DeepSpeed */
		TW_CHECK(knum(&oo, "ratio", 0.0, 1.0, 1.0, "DeepSpeed default", &s->offload_ratio,
			      false));
	}
	if (s->offload_ratio < 1.0 && stage != 3)
		return fail(&oo, "ratio", "Partial offloading only supported for ZeRO Stage 3.");
	if (s->offload_optimizer != STRAT_OFFLOAD_NONE && stage == 0)
		return fail(&oo, "device",
			    "offloading the optimizer needs ZeRO stage 1, 2 or 3 (stage is 0)");
	if (s->offload_optimizer == STRAT_OFFLOAD_NVME && stage < 3) {
		/* only ZeRO-3 has the NVMe swapper; ZeRO-1/2 run the CPU optimizer from DRAM */
		s->offload_optimizer = STRAT_OFFLOAD_CPU;
		dprov(r, "zero_optimization.offload_optimizer.device", STRAT_SRC_DERIVED,
		      "nvme under ZeRO-1/2 works as cpu", "cpu");
	}

	if (cpu_off_param) {
		strat_src_of(r, STRAT_TREE_DS, "zero_optimization.cpu_offload_param", why,
			     sizeof(why));
		strncat(why, " (deprecated cpu_offload_param)", sizeof(why) - strlen(why) - 1);
		dev = STRAT_OFFLOAD_CPU;
		dprov(r, "zero_optimization.offload_param.device",
		      strat_src_of(r, STRAT_TREE_DS, "zero_optimization.cpu_offload_param", NULL, 0),
		      why, "cpu");
	} else {
		TW_CHECK(kenum(&op, "device", offload_devices, 0, "DeepSpeed default", &dev, NULL));
	}
	s->offload_param = (enum strat_offload)dev;
	if (s->offload_param != STRAT_OFFLOAD_NONE) {
		TW_CHECK(kbool(&op, "pin_memory", NULL, pin_default, pin_why,
			       &s->offload_param_pin_memory));
		int64_t v;
		TW_CHECK(kint(&op, "buffer_count", NULL, 0, INT64_MAX, 5, "DeepSpeed default",
			      &s->offload_param_buffers));
		TW_CHECK(kint(&op, "buffer_size", NULL, 0, INT64_MAX, 100000000, "DeepSpeed default",
			      &s->offload_param_buffer_elems));
		TW_CHECK(kint(&op, "max_in_cpu", NULL, 0, INT64_MAX, 1000000000,
			      "DeepSpeed default", &v));
		char kp[128], path[1024];
		struct json_ctx kc = kctx(&op, "nvme_path", kp, sizeof(kp));
		bool given = false;
		TW_CHECK(json_get_str(&kc, op.obj, "nvme_path", path, sizeof(path), &given));
		if (s->offload_param == STRAT_OFFLOAD_NVME && !given)
			return fail(&op, "nvme_path", "required with device nvme (DeepSpeed's "
						      "swapper keeps the parameters there)");
		if (stage != 3)
			return fail(&op, "device",
				    "parameter offload is valid only with ZeRO stage 3 (stage is %d)",
				    stage);
	} else {
		s->offload_param_pin_memory = pin_default;
	}
	return TW_OK;
}

/* ZeRO++ (hpZ, qwZ, qgZ) and MiCS, which DeepSpeed builds only into its stage-3 optimizer
 * (reference/deepspeed.md §2.4); below stage 3 they are read for their types. The checks that
 * need the degrees are in strategy.c. */
static enum tw_result parse_zeropp(struct strat_rd *r, const struct sec *z, int stage)
{
	struct strategy *s = r->s;
	const char *dd = "DeepSpeed default";
	int64_t hpz = 1, mics = -1;
	bool qw = false, qg = false, hier = false;
	s->zero_hpz = 1, s->zero_qweights = s->zero_qgrads = s->zero_qfrozen = false;
	s->mics_shard = 0, s->mics_hier = false;
	if (stage != 3) {
		const char *const ints[] = {"zero_hpz_partition_size", "mics_shard_size", NULL};
		const char *const bools[] = {"zero_quantized_weights", "zero_quantized_gradients",
					     "zero_quantized_nontrainable_weights",
					     "mics_hierarchical_params_gather", NULL};
		bool set = false;
		for (int i = 0; ints[i]; i++) {
			char p[96];
			snprintf(p, sizeof(p), "zero_optimization.%s", ints[i]);
			struct json_ctx c = {strat_label(r, STRAT_TREE_DS, p), "zero_optimization", r->err};
			int64_t v = i == 0 ? 1 : -1;
			TW_CHECK(json_get_int(&c, z->obj, ints[i], -1, INT64_MAX, &v, NULL));
			set = set || (i == 0 ? v > 1 : v > 0);
		}
		for (int i = 0; bools[i]; i++) {
			char p[96];
			snprintf(p, sizeof(p), "zero_optimization.%s", bools[i]);
			struct json_ctx c = {strat_label(r, STRAT_TREE_DS, p), "zero_optimization", r->err};
			bool v = false;
			TW_CHECK(json_get_bool(&c, z->obj, bools[i], &v, NULL));
			set = set || v;
		}
		if (set)
			strat_warn(r,
				   "%s: ZeRO++ and MiCS settings work only with ZeRO stage 3; DeepSpeed "
				   "ignores them at stage %d",
				   r->ds_file, stage);
		return TW_OK;
	}
	/* the releases before them refuse the keys (their pydantic config forbids extras) */
	const char *const zpp[] = {"zero_hpz_partition_size", "zero_quantized_weights",
				   "zero_quantized_gradients", NULL};
	for (int i = 0; zpp[i]; i++)
		if (item(z->obj, zpp[i]) && r->version < STRAT_VERSION(0, 10, 0))
			return fail(z, zpp[i], "ZeRO++ arrived in DeepSpeed 0.10.0 (deepspeed_version "
					       "is %s; its config refuses the key)", s->deepspeed_version);
	if (item(z->obj, "zero_quantized_nontrainable_weights") &&
	    r->version < STRAT_VERSION(0, 10, 2))
		return fail(z, "zero_quantized_nontrainable_weights",
			    "it arrived in DeepSpeed 0.10.2 (deepspeed_version is %s; its config "
			    "refuses the key)", s->deepspeed_version);
	if (item(z->obj, "mics_shard_size") && r->version < STRAT_VERSION(0, 9, 2))
		return fail(z, "mics_shard_size", "MiCS arrived in DeepSpeed 0.9.2 (deepspeed_version "
						  "is %s; its config refuses the key)", s->deepspeed_version);
	TW_CHECK(kint(z, "zero_hpz_partition_size", NULL, 0, INT64_MAX, 1, dd, &hpz));
	TW_CHECK(kbool(z, "zero_quantized_weights", NULL, false, dd, &qw));
	TW_CHECK(kbool(z, "zero_quantized_gradients", NULL, false, dd, &qg));
	TW_CHECK(kbool(z, "zero_quantized_nontrainable_weights", NULL, false, dd,
		       &s->zero_qfrozen));
	TW_CHECK(kint(z, "mics_shard_size", NULL, -1, INT64_MAX, -1, "DeepSpeed default (off)",
		      &mics));
	TW_CHECK(kbool(z, "mics_hierarchical_params_gather", NULL, false, dd, &hier));
	s->zero_hpz = hpz > 1 ? hpz : 1;
	s->zero_qweights = qw, s->zero_qgrads = qg;
	s->mics_shard = mics > 0 ? mics : 0;
	if (s->mics_shard > 0 && s->zero_hpz > 1)
		return fail(z, "mics_shard_size",
			    "MiCS together with hpZ (zero_hpz_partition_size > 1) is not modelled");
	if (s->mics_shard > 0 && qg)
		return fail(z, "zero_quantized_gradients",
			    "qgZ reduces over the whole world and MiCS over its shard group: the "
			    "two together are not modelled");
	if (s->mics_shard > 0 && (s->offload_optimizer != STRAT_OFFLOAD_NONE ||
				  s->offload_param != STRAT_OFFLOAD_NONE))
		return fail(z, "mics_shard_size",
			    "MiCS does not offload (DeepSpeed: Local sharding has no support for "
			    "CPU offloading)");
	s->mics_hier = s->mics_shard > 0 && hier;
	if (s->mics_shard > 0 && qw) { /* MiCS's own gathers take no quantize flag */
		s->zero_qweights = false;
		dprov(r, "zero_optimization.zero_quantized_weights", STRAT_SRC_DERIVED,
		      "MiCS gathers unquantized (its all_gather_coalesced)", "false");
	}
	if (s->mics_shard > 0 && s->zero_qfrozen) {
		s->zero_qfrozen = false;
		dprov(r, "zero_optimization.zero_quantized_nontrainable_weights", STRAT_SRC_DERIVED,
		      "MiCS gathers unquantized (its all_gather_coalesced)", "false");
	}
	if (item(z->obj, "zeropp_loco_param") && qg)
		warn_unmodelled(r, "zero_optimization.zeropp_loco_param");
	return TW_OK;
}

static enum tw_result parse_zero(struct strat_rd *r, const struct sec *top)
{
	struct strategy *s = r->s;
	const cJSON *zv = item(top->obj, "zero_optimization");
	struct sec z = {r, NULL, "zero_optimization", true};
	int64_t stage = 0;

	if (zv && cJSON_IsBool(zv)) {
		/* legacy "zero_optimization": true = stage 1 with allgather_size */
		char why[96];
		strat_src_of(r, STRAT_TREE_DS, "zero_optimization", why, sizeof(why));
		strncat(why, " (legacy boolean)", sizeof(why) - strlen(why) - 1);
		stage = cJSON_IsTrue(zv) ? 1 : 0;
		dprov(r, "zero_optimization.stage",
		      strat_src_of(r, STRAT_TREE_DS, "zero_optimization", NULL, 0), why, "%d",
		      (int)stage);
		zv = NULL;
	} else if (zv && !cJSON_IsObject(zv)) {
		return fail(top, "zero_optimization",
			    strat_is_auto(zv) ? "must be an object (the HF Trainer's \"auto\" fills "
						"values, not sections)"
					      : "must be an object (or the legacy true/false)");
	} else {
		z.obj = zv && cJSON_IsObject(zv) ? zv : NULL;
		TW_CHECK(check_keys(&z, zero_keys));
		TW_CHECK(kint(&z, "stage", NULL, 0, INT64_MAX, 0, "DeepSpeed default", &stage));
		if (stage > 3)
			return fail(&z, "stage",
				    "%" PRId64 " is not a ZeRO stage (DeepSpeed: Maximum supported "
				    "ZeRO stage is 3)",
				    stage);
		bool legacy = false;
		struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "zero_optimization.legacy_stage1"),
				     "zero_optimization", r->err};
		TW_CHECK(json_get_bool(&c, z.obj, "legacy_stage1", &legacy, NULL));
		if (legacy)
			return fail(&z, "legacy_stage1",
				    "legacy_stage1 was removed in DeepSpeed 0.5.9 and raises an error");
	}
	s->zero_stage = (int)stage;
	const char *dd = "DeepSpeed default";
	if (stage == 3 && s->ds_rs_per_param) /* docs/strategy.md, "Old releases" */
		dprov(r, "zero3_code_path", STRAT_SRC_DERIVED,
		      s->ds_fetch_per_param ? "deepspeed_version < 0.5.5" : "deepspeed_version < 0.6.0",
		      "%s", s->ds_fetch_per_param ? "per-parameter fetch and reduce-scatter, device syncs"
						  : "device syncs at each fetch, per-parameter reduce-scatter");

	bool oc_default = stage == 3;
	TW_CHECK(kbool(&z, "overlap_comm", NULL, oc_default,
		       stage == 3 ? "DeepSpeed default (true for stage 3)"
				  : "DeepSpeed default (false below stage 3)",
		       &s->overlap_comm));
	TW_CHECK(kbool(&z, "contiguous_gradients", NULL, true, dd, &s->contiguous_gradients));
	TW_CHECK(kbool(&z, "reduce_scatter", NULL, true, dd, &s->reduce_scatter));
	/* one all-reduce per bucket arrived in 0.12.4 (#4695); before, every release reduced
	 * a bucket partition by partition, and its config refuses the key */
	bool multi = r->version >= STRAT_VERSION(0, 12, 4);
	if (!multi && z.obj && item(z.obj, "use_multi_rank_bucket_allreduce"))
		return fail(&z, "use_multi_rank_bucket_allreduce",
			    "it arrived in DeepSpeed 0.12.4 (deepspeed_version is %s; its config "
			    "refuses the key)", s->deepspeed_version);
	TW_CHECK(kbool(&z, "use_multi_rank_bucket_allreduce", NULL, multi,
		       multi ? dd : "deepspeed_version < 0.12.4 (a bucket goes out partition by "
				    "partition)",
		       &s->use_multi_rank_bucket_allreduce));
	r->rbs_auto = z.obj && strat_is_auto(item(z.obj, "reduce_bucket_size"));
	TW_CHECK(kint(&z, "reduce_bucket_size", NULL, 0, INT64_MAX, 500000000, dd,
		      &s->reduce_bucket_size));
	int64_t legacy_ag = 500000000;
	if (!z.obj && item(top->obj, "allgather_size")) {
		struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "allgather_size"), NULL, r->err};
		TW_CHECK(json_get_int(&c, top->obj, "allgather_size", 0, INT64_MAX, &legacy_ag, NULL));
	}
	TW_CHECK(kint(&z, "allgather_bucket_size", NULL, 0, INT64_MAX, legacy_ag, dd,
		      &s->allgather_bucket_size));
	if ((stage == 1 || stage == 2) && s->allgather_bucket_size % 2)
		return fail(&z, "allgather_bucket_size", "must be a multiple of 2 for ZeRO-1/2, got %" PRId64,
			    s->allgather_bucket_size);
	TW_CHECK(kint(&z, "sub_group_size", NULL, 0, INT64_MAX, 1000000000, dd, &s->sub_group_size));
	/* DeepSpeed closes a bucket (a sub-group) before the tensor that would overflow it, so 0
	 * makes one per tensor: the plan cuts by elements, not by tensors */
	if (stage >= 1 && z.obj && !r->rbs_auto && item(z.obj, "reduce_bucket_size") &&
	    s->reduce_bucket_size == 0)
		return fail(&z, "reduce_bucket_size",
			    "0 reduces every gradient tensor on its own, which is not modelled; "
			    "give a bucket size in elements");
	if (stage == 3 && s->sub_group_size == 0)
		return fail(&z, "sub_group_size",
			    "0 makes every parameter its own optimizer sub-group, which is not "
			    "modelled; give a size in elements");
	r->prefetch_auto = z.obj && (strat_is_auto(item(z.obj, "stage3_prefetch_bucket_size")) ||
				     strat_is_auto(item(z.obj, "prefetch_bucket_size")));
	TW_CHECK(kint(&z, "stage3_prefetch_bucket_size", "prefetch_bucket_size", 0, INT64_MAX,
		      50000000, dd, &s->prefetch_bucket_size));
	r->persist_auto = z.obj && (strat_is_auto(item(z.obj, "stage3_param_persistence_threshold")) ||
				    strat_is_auto(item(z.obj, "param_persistence_threshold")));
	TW_CHECK(kint(&z, "stage3_param_persistence_threshold", "param_persistence_threshold", 0,
		      INT64_MAX, 100000, dd, &s->param_persistence_threshold));
	TW_CHECK(kint(&z, "stage3_max_live_parameters", "max_live_parameters", 0, INT64_MAX,
		      1000000000, dd, &s->max_live_parameters));
	TW_CHECK(kint(&z, "stage3_max_reuse_distance", "max_reuse_distance", 0, INT64_MAX,
		      1000000000, dd, &s->max_reuse_distance));

	/* keys read for their types; their effect is not modelled */
	static const char *const zbools[] = {
		"allgather_partitions", "load_from_fp32_weights", "elastic_checkpoint",
		"ignore_unused_parameters", "round_robin_gradients", "memory_efficient_linear",
		"stage3_use_all_reduce_for_fetch_params", "use_all_reduce_for_fetch_params",
		"stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save",
		"stage3_gather_fp16_weights_on_model_save", "log_trace_cache_warnings",
		"enable_sanity_checks", "pipeline_loading_checkpoint", "override_module_apply",
		"save_muon_momentum_buffer_in_memory", NULL};
	static const char *const zints[] = {
		"stage3_module_granularity_threshold", "module_granularity_threshold",
		"stage3_model_persistence_threshold", "model_persistence_threshold", NULL};
	static const char *const zobjs[] = {"zeropp_loco_param", "leaf_module", NULL};
	TW_CHECK(ktypes(&z, zbools, zints, zobjs));
	const char *gather16;
	TW_CHECK(pick(&z, "stage3_gather_16bit_weights_on_model_save",
		      "gather_16bit_weights_on_model_save", &gather16));
	if (item(z.obj, "stage3_gather_fp16_weights_on_model_save") &&
	    item(z.obj, "stage3_gather_16bit_weights_on_model_save"))
		return fail(&z, "stage3_gather_fp16_weights_on_model_save",
			    "Cannot provide deprecated parameter "
			    "'stage3_gather_fp16_weights_on_model_save' and replacing parameter "
			    "'stage3_gather_16bit_weights_on_model_save' together");
	bool seq = false;
	const char *seqk;
	TW_CHECK(pick(&z, "stage3_allgather_sequential", "allgather_sequential", &seqk));
	{
		char p[96];
		snprintf(p, sizeof(p), "zero_optimization.%s", seqk);
		struct json_ctx c = {strat_label(r, STRAT_TREE_DS, p), "zero_optimization", r->err};
		TW_CHECK(json_get_bool(&c, z.obj, seqk, &seq, NULL));
	}
	if (seq && stage == 3) {
		s->prefetch_bucket_size = 1;
		dprov(r, "zero_optimization.stage3_prefetch_bucket_size", STRAT_SRC_DERIVED,
		      "stage3_allgather_sequential sets it to 1", "1");
	}
	if (item(z.obj, "zenflow"))
		warn_unmodelled(r, "zero_optimization.zenflow");

	TW_CHECK(parse_offload(r, &z, (int)stage));
	TW_CHECK(parse_zeropp(r, &z, (int)stage));

	/* ZeRO-1/2 force contiguous gradients under CPU offload (§1.4) */
	if ((stage == 1 || stage == 2) && s->offload_optimizer != STRAT_OFFLOAD_NONE &&
	    !s->contiguous_gradients) {
		s->contiguous_gradients = true;
		dprov(r, "zero_optimization.contiguous_gradients", STRAT_SRC_DERIVED,
		      "ZeRO-1/2 force it on under CPU offload", "true");
	}
	return TW_OK;
}

static enum tw_result parse_optimizer(struct strat_rd *r, const struct sec *top)
{
	struct strategy *s = r->s;
	struct sec o;
	TW_CHECK(ksec(top, "optimizer", false, &o));
	o.prefix = "optimizer";
	if (!o.obj) {
		if (!r->optimizer_given) {
			s->optimizer = STRAT_OPT_ADAMW;
			dprov(r, "optimizer.type", STRAT_SRC_DEFAULT,
			      "no optimizer section: the client's, HF Trainer default AdamW", "adamw");
		}
		return TW_OK;
	}
	char type[32] = "";
	bool present = false;
	struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "optimizer.type"), "optimizer", r->err};
	TW_CHECK(json_get_str(&c, o.obj, "type", type, sizeof(type), &present));
	if (!present)
		return fail(&o, "type", "missing: an optimizer section needs a type");
	struct sec p;
	TW_CHECK(ksec(&o, "params", false, &p));
	p.prefix = "optimizer.params";
	if (item(p.obj, "max_grad_norm"))
		return fail(&p, "max_grad_norm",
			    "not supported as an optimizer parameter, use the top-level "
			    "gradient_clipping (DeepSpeed refuses it)");
	bool adam_w_mode = true;
	c = (struct json_ctx){strat_label(r, STRAT_TREE_DS, "optimizer.params.adam_w_mode"),
			      "optimizer.params", r->err};
	TW_CHECK(json_get_bool(&c, p.obj, "adam_w_mode", &adam_w_mode, NULL));

	static const struct {
		const char *name;
		enum strat_optimizer opt;
	} map[] = {
		/* DeepSpeed's names, case-insensitive; Lamb and the 1-bit/0-1 variants keep two
		 * fp32 states per parameter like Adam */
		{"adam", STRAT_OPT_ADAM},	   {"adamw", STRAT_OPT_ADAMW},
		{"fusedadam", STRAT_OPT_ADAM},	   {"lamb", STRAT_OPT_ADAM},
		{"onebitadam", STRAT_OPT_ADAM},	   {"zerooneadam", STRAT_OPT_ADAM},
		{"onebitlamb", STRAT_OPT_ADAM},	   {"lion", STRAT_OPT_LION},
		{"adagrad", STRAT_OPT_ADAGRAD},	   {"sgd", STRAT_OPT_SGD},
	};
	int found = -1;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcasecmp(type, map[i].name))
			found = (int)i;
	if (found < 0)
		return fail(&o, "type",
			    "'%s' is not modelled (known: adam, adamw, lamb, onebitadam, zerooneadam, "
			    "onebitlamb, lion, adagrad, sgd)",
			    type);
	/* DeepSpeed builds FusedLamb, the 1-bit / 0/1 optimizers and torch SGD for these names,
	 * which are not in its ZERO_SUPPORTED_OPTIMIZERS: with ZeRO it asserts unless allowed */
	static const char *const untested[] = {"lamb", "onebitadam", "zerooneadam", "onebitlamb",
					       "sgd", NULL};
	bool allow = false;
	c = (struct json_ctx){strat_label(r, STRAT_TREE_DS, "zero_allow_untested_optimizer"), NULL,
			      r->err};
	TW_CHECK(json_get_bool(&c, top->obj, "zero_allow_untested_optimizer", &allow, NULL));
	for (size_t i = 0; untested[i] && s->zero_stage > 0 && !allow; i++)
		if (!strcasecmp(type, untested[i]))
			return fail(&o, "type",
				    "'%s' with ZeRO stage %d: You are using an untested ZeRO "
				    "Optimizer. Please add <\"zero_allow_untested_optimizer\": true> in "
				    "the configuration file to use it.",
				    type, s->zero_stage);
	enum strat_optimizer opt = map[found].opt;
	if (opt == STRAT_OPT_ADAM && adam_w_mode && !strcasecmp(type, "adam"))
		opt = STRAT_OPT_ADAMW; /* DeepSpeed's "adam" runs AdamW unless adam_w_mode:false */
	if (r->optimizer_given && opt != s->optimizer &&
	    !((opt == STRAT_OPT_ADAM || opt == STRAT_OPT_ADAMW) &&
	      (s->optimizer == STRAT_OPT_ADAM || s->optimizer == STRAT_OPT_ADAMW)))
		return fail(&o, "type", "'%s' disagrees with the strategy's optimizer", type);
	s->optimizer = opt;
	r->ds_optimizer_given = true;
	char why[96];
	enum strat_src src = strat_src_of(r, STRAT_TREE_DS, "optimizer.type", why, sizeof(why));
	dprov(r, "optimizer.type", src, why, "%s%s", type,
	      opt == STRAT_OPT_ADAMW && !strcasecmp(type, "adam") ? " (AdamW: adam_w_mode)" : "");
	return TW_OK;
}

enum tw_result strat_ds_parse(struct strat_rd *r, const cJSON *ds)
{
	struct strategy *s = r->s;
	struct sec top = {r, ds, NULL, false};
	const char *dd = "DeepSpeed default";

	/* unknown top-level keys: DeepSpeed ignores them, we say so */
	const cJSON *it;
	cJSON_ArrayForEach(it, ds)
	{
		if (!strat_ds_top_key(it->string))
			strat_warn(r, "%s: %s: unknown top-level key, ignored (as DeepSpeed does)",
				   strat_label(r, STRAT_TREE_DS, it->string), it->string);
	}
	/* the HF Trainer fills "auto" in these top-level keys only (the sections' keys are
	 * checked where they are read) */
	static const char *const hf_filled[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
						"gradient_accumulation_steps", "gradient_clipping",
						NULL};
	cJSON_ArrayForEach(it, ds)
	{
		bool filled = false;
		for (int i = 0; hf_filled[i]; i++)
			filled = filled || !strcmp(it->string, hf_filled[i]);
		bool is_auto;
		if (!filled && strat_ds_top_key(it->string) && !cJSON_IsObject(it) &&
		    strcmp(it->string, "zero_optimization"))
			TW_CHECK(auto_check(&top, it->string, false, &is_auto));
	}

	TW_CHECK(parse_batch_key(r, &top, "train_batch_size", &r->ds_tb));
	TW_CHECK(parse_batch_key(r, &top, "train_micro_batch_size_per_gpu", &r->ds_mb));
	TW_CHECK(parse_batch_key(r, &top, "gradient_accumulation_steps", &r->ds_gas));

	/* elasticity computes the batch itself: not modelled */
	struct sec el;
	TW_CHECK(ksec(&top, "elasticity", false, &el));
	el.prefix = "elasticity";
	bool el_on = false;
	if (el.obj) {
		struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "elasticity.enabled"), "elasticity",
				     r->err};
		TW_CHECK(json_get_bool(&c, el.obj, "enabled", &el_on, NULL));
		if (el_on)
			return tw_errf(r->err, TW_ERR_UNSUPPORTED,
				       "%s: elasticity.enabled: elastic training computes the batch "
				       "itself and is not modelled; give the batch keys instead",
				       strat_label(r, STRAT_TREE_DS, "elasticity.enabled"));
	}

	/* precision */
	bool fp16 = false, bf16 = false;
	TW_CHECK(precision_section(r, &top, "fp16", &fp16, &r->fp16_auto));
	const char *bfname = item(ds, "bf16") ? "bf16" : "bfloat16";
	TW_CHECK(precision_section(r, &top, bfname, &bf16, &r->bf16_auto));
	char why[96];
	/* HF Trainer: fp16.enabled = args.fp16, bf16.enabled = args.bf16 */
	if (r->fp16_auto) {
		fp16 = r->hf_fp16 || (r->precision_given && r->precision == TW_FP16);
		dprov(r, "fp16.enabled", STRAT_SRC_DERIVED,
		      "\"auto\": HF Trainer fills it from --fp16 (strategy precision)", "%s",
		      fp16 ? "true" : "false");
	} else if (item(item(ds, "fp16"), "enabled")) {
		enum strat_src src = strat_src_of(r, STRAT_TREE_DS, "fp16.enabled", why, sizeof(why));
		dprov(r, "fp16.enabled", src, why, "%s", fp16 ? "true" : "false");
	} else {
		dprov(r, "fp16.enabled", STRAT_SRC_DEFAULT, dd, "false");
	}
	char bfpath[32];
	snprintf(bfpath, sizeof(bfpath), "%s.enabled", bfname);
	if (r->bf16_auto) {
		bf16 = r->hf_bf16 || (r->precision_given && r->precision == TW_BF16);
		dprov(r, "bf16.enabled", STRAT_SRC_DERIVED,
		      "\"auto\": HF Trainer fills it from --bf16 (strategy precision)", "%s",
		      bf16 ? "true" : "false");
	} else if (item(item(ds, bfname), "enabled")) {
		enum strat_src src = strat_src_of(r, STRAT_TREE_DS, bfpath, why, sizeof(why));
		dprov(r, "bf16.enabled", src, why, "%s", bf16 ? "true" : "false");
	} else {
		dprov(r, "bf16.enabled", STRAT_SRC_DEFAULT, dd, "false");
	}
	static const char *const half_keys[] = {"fp16.enabled", "bf16.enabled", NULL};
	if (fp16 && bf16)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: fp16.enabled, bf16.enabled: bfloat16 and fp16 modes cannot be "
			       "simultaneously enabled",
			       ds_label_of(r, half_keys, r->ds_file));
	r->ds_fp16 = fp16;
	r->ds_bf16 = bf16;
	s->param_dtype = fp16 ? TW_FP16 : bf16 ? TW_BF16 : TW_FP32;

	if (fp16) {
		struct sec f = {r, item(ds, "fp16"), "fp16", true};
		double ls = 0;
		int64_t v;
		TW_CHECK(knum(&f, "loss_scale", 0, 1e300, 0, "DeepSpeed default (0 = dynamic)", &ls,
			      true));
		TW_CHECK(kint(&f, "initial_scale_power", NULL, 0, 1023, 16, dd, &v));
		TW_CHECK(kint(&f, "loss_scale_window", NULL, INT64_MIN + 1, INT64_MAX, 1000, dd, &v));
		if (ls == 0 && v <= 0)
			return fail(&f, "loss_scale_window", "must be > 0 with dynamic loss scaling");
		TW_CHECK(kint(&f, "min_loss_scale", NULL, INT64_MIN + 1, INT64_MAX, 1, dd, &v));
		if (ls == 0 && v <= 0)
			return fail(&f, "min_loss_scale", "must be > 0 with dynamic loss scaling");
		s->loss_scaling = ls == 0;
	} else {
		s->loss_scaling = false;
	}
	{
		struct sec bsec = {r, item(ds, bfname), bfname, true};
		bool def = r->version >= STRAT_VERSION(0, 19, 3);
		bool save = r->ds_prov;
		r->ds_prov = save && bf16;
		TW_CHECK(kbool(&bsec, "check_grad_overflow", NULL, def,
			       def ? "DeepSpeed default (>= 0.19.3)" : "DeepSpeed default (< 0.19.3)",
			       &s->check_grad_overflow));
		r->ds_prov = save;
	}

	/* data types */
	struct sec dt;
	TW_CHECK(ksec(&top, "data_types", false, &dt));
	dt.prefix = "data_types";
	int ga = -1;
	bool ga_given = false;
	if (dt.obj) {
		bool save = r->ds_prov;
		r->ds_prov = false;
		TW_CHECK(kenum(&dt, "grad_accum_dtype", dtype3, 0, dd, &ga, &ga_given));
		r->ds_prov = save;
	}
	s->grad_accum_dtype = ga_given ? dtype3_t[ga] : s->param_dtype;
	if (ga_given) {
		enum strat_src src = strat_src_of(r, STRAT_TREE_DS, "data_types.grad_accum_dtype", why,
						  sizeof(why));
		dprov(r, "data_types.grad_accum_dtype", src, why, "%s", tw_dtype_name(s->grad_accum_dtype));
	} else {
		dprov(r, "data_types.grad_accum_dtype", STRAT_SRC_DEFAULT,
		      "DeepSpeed default: the model dtype", "%s", tw_dtype_name(s->grad_accum_dtype));
	}
	if ((s->param_dtype == TW_FP16 && s->grad_accum_dtype == TW_BF16) ||
	    (s->param_dtype == TW_BF16 && s->grad_accum_dtype == TW_FP16))
		return fail(&dt, "grad_accum_dtype",
			    "unsupported mix: model dtype %s with gradient accumulation in %s",
			    tw_dtype_name(s->param_dtype), tw_dtype_name(s->grad_accum_dtype));

	{
		const cJSON *v = item(ds, "communication_data_type");
		if (v && (!cJSON_IsString(v) ||
			  (strcmp(v->valuestring, "fp16") && strcmp(v->valuestring, "bf16") &&
			   strcmp(v->valuestring, "fp32"))))
			return fail(&top, "communication_data_type",
				    "Invalid communication_data_type. Supported data types: ['fp16', "
				    "'bf16', 'fp32']");
		if (v) {
			tw_dtype_parse(v->valuestring, &s->comm_dtype);
			enum strat_src src = strat_src_of(r, STRAT_TREE_DS, "communication_data_type",
							  why, sizeof(why));
			dprov(r, "communication_data_type", src, why, "%s", v->valuestring);
		} else {
			s->comm_dtype = s->param_dtype;
			dprov(r, "communication_data_type", STRAT_SRC_DEFAULT,
			      "DeepSpeed default: the model dtype", "%s", tw_dtype_name(s->comm_dtype));
		}
	}

	/* amp with ZeRO is an error in DeepSpeed; amp alone is not modelled */
	struct sec amp;
	TW_CHECK(ksec(&top, "amp", false, &amp));
	amp.prefix = "amp";
	bool amp_on = false;
	if (amp.obj) {
		struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "amp.enabled"), "amp", r->err};
		TW_CHECK(json_get_bool(&c, amp.obj, "enabled", &amp_on, NULL));
	}

	TW_CHECK(parse_zero(r, &top));
	if (amp_on && s->zero_stage > 0)
		return fail(&amp, "enabled",
			    "Amp and ZeRO are not currently compatible, please use (legacy) fp16 mode");
	if (amp_on)
		return tw_errf(r->err, TW_ERR_UNSUPPORTED,
			       "%s: amp.enabled: Apex AMP is not modelled; use fp16 or bf16",
			       r->ds_file);

	/* clipping and gradient scaling */
	bool clip_default_on = r->version >= STRAT_VERSION(0, 19, 3);
	const cJSON *gc = item(ds, "gradient_clipping");
	if (gc && strat_is_auto(gc)) {
		s->gradient_clipping = r->hf_max_grad_norm;
		dprov(r, "gradient_clipping", STRAT_SRC_DERIVED,
		      "\"auto\": HF Trainer max_grad_norm", "%g", s->gradient_clipping);
	} else {
		TW_CHECK(knum(&top, "gradient_clipping", 0, 1e300, clip_default_on ? 1.0 : 0.0,
			      clip_default_on ? "DeepSpeed default (>= 0.19.3)"
					      : "DeepSpeed default (< 0.19.3)",
			      &s->gradient_clipping, true));
	}
	bool prescale = false;
	double predivide = 1.0;
	{
		struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "prescale_gradients"), NULL, r->err};
		TW_CHECK(json_get_bool(&c, ds, "prescale_gradients", &prescale, NULL));
		c.file = strat_label(r, STRAT_TREE_DS, "gradient_predivide_factor");
		TW_CHECK(json_get_num(&c, ds, "gradient_predivide_factor", 1e-300, 1e300, &predivide,
				      NULL));
	}
	if (s->reduce_scatter && (s->zero_stage == 2 || s->zero_stage == 3)) {
		if (predivide != 1.0)
			return fail(&top, "gradient_predivide_factor",
				    "must be 1.0 with ZeRO-%d and reduce_scatter", s->zero_stage);
		if (prescale)
			return fail(&top, "prescale_gradients",
				    "must be false with ZeRO-%d and reduce_scatter", s->zero_stage);
	}
	{
		const cJSON *op = item(ds, "gradient_allreduce_op");
		if (op && (!cJSON_IsString(op) ||
			   (strcmp(op->valuestring, "mean") && strcmp(op->valuestring, "sum"))))
			return fail(&top, "gradient_allreduce_op", "must be \"mean\" or \"sum\"");
		if (op && !strcmp(op->valuestring, "sum") && s->zero_stage == 3)
			return fail(&top, "gradient_allreduce_op",
				    "\"sum\" is not supported with ZeRO stage 3");
	}

	TW_CHECK(parse_optimizer(r, &top));

	/* activation checkpointing (DeepSpeed's own checkpoint API) */
	struct sec ac;
	TW_CHECK(ksec(&top, "activation_checkpointing", false, &ac));
	ac.prefix = "activation_checkpointing";
	TW_CHECK(kbool(&ac, "partition_activations", NULL, false, dd, &s->partition_activations));
	TW_CHECK(kbool(&ac, "cpu_checkpointing", NULL, false, dd, &s->cpu_checkpointing));

	/* degree hints: AutoTP and Ulysses */
	struct sec tps;
	TW_CHECK(ksec(&top, "tensor_parallel", true, &tps));
	tps.prefix = "tensor_parallel";
	TW_CHECK(check_keys(&tps, tp_keys));
	static const char *const tp_bools[] = {"tp_overlap_comm", "keep_module_on_host", NULL};
	TW_CHECK(ktypes(&tps, tp_bools, NULL, NULL));
	r->ds_autotp = 0;
	if (tps.obj) {
		struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "tensor_parallel.autotp_size"),
				     "tensor_parallel", r->err};
		TW_CHECK(json_get_int(&c, tps.obj, "autotp_size", 0, 1 << 20, &r->ds_autotp, NULL));
	}
	r->ds_sp = 0;
	{
		struct json_ctx c = {strat_label(r, STRAT_TREE_DS, "sequence_parallel_size"), NULL,
				     r->err};
		TW_CHECK(json_get_int(&c, ds, "sequence_parallel_size", 1, 1 << 20, &r->ds_sp, NULL));
	}
	/* the pipeline engine's transport (reference/deepspeed.md §1.8, §5): only these two of
	 * the section's keys are read */
	struct sec pl;
	TW_CHECK(ksec(&top, "pipeline", false, &pl));
	pl.prefix = "pipeline";
	TW_CHECK(kbool(&pl, "pipe_partitioned", NULL, true, dd, &s->pipe_partitioned));
	TW_CHECK(kbool(&pl, "grad_partitioned", NULL, true, dd, &s->grad_partitioned));
	return TW_OK;
}

/* HF Trainer fills of ZeRO keys that need the model's hidden size (§1.11). */
void strat_ds_auto_model(struct strat_rd *r)
{
	struct strategy *s = r->s;
	int64_t h = r->m ? r->m->hidden : 0;
	if (h <= 0)
		return;
	if (r->rbs_auto) {
		s->reduce_bucket_size = h * h;
		dprov(r, "zero_optimization.reduce_bucket_size", STRAT_SRC_DERIVED,
		      "\"auto\": HF Trainer, hidden*hidden", "%" PRId64, s->reduce_bucket_size);
	}
	if (s->zero_stage == 3 && r->prefetch_auto) {
		s->prefetch_bucket_size = (int64_t)(0.9 * (double)h * (double)h);
		dprov(r, "zero_optimization.stage3_prefetch_bucket_size", STRAT_SRC_DERIVED,
		      "\"auto\": HF Trainer, int(0.9*hidden*hidden)", "%" PRId64,
		      s->prefetch_bucket_size);
	}
	if (s->zero_stage == 3 && r->persist_auto) {
		s->param_persistence_threshold = 10 * h;
		dprov(r, "zero_optimization.stage3_param_persistence_threshold", STRAT_SRC_DERIVED,
		      "\"auto\": HF Trainer, 10*hidden", "%" PRId64, s->param_persistence_threshold);
	}
}

/* Batch: one quantity from the ds_config key and our key, "auto" filled by the HF Trainer
 * rule. Returns whether it is known; *v and the provenance are set. */
static enum tw_result batch_one(struct strat_rd *r, struct strat_bval *ds, struct strat_bval *ours,
				const char *dskey, const char *ourkey, int64_t *v, bool *known,
				enum strat_src *src, char *why, size_t len)
{
	*known = false;
	if (ds->given && ours->given && ds->v != ours->v) {
		if (ours->from_set && !ds->from_set) {
			*ds = *ours;
		} else if (!(ds->from_set && !ours->from_set)) {
			/* both from files, or both from --set: name where each came from */
			return tw_errf(r->err, TW_ERR_INVALID,
				       "%s: %s=%" PRId64 " disagrees with %s: %s=%" PRId64,
				       strat_label(r, STRAT_TREE_OURS, ourkey), ourkey, ours->v,
				       strat_label(r, STRAT_TREE_DS, dskey), dskey, ds->v);
		}
	}
	const struct strat_bval *b = ds->given ? ds : ours->given ? ours : NULL;
	if (b) {
		*v = b->v;
		*known = true;
		*src = b->from_set ? STRAT_SRC_SET : STRAT_SRC_FILE;
		snprintf(why, len, "%s", b->why);
	}
	return TW_OK;
}

enum tw_result strat_ds_batch(struct strat_rd *r)
{
	struct strategy *s = r->s;
	int64_t dp = s->dp, tb = 0, mb = 0, gas = 0;
	bool ktb, kmb, kgas;
	enum strat_src stb = STRAT_SRC_FILE, smb = STRAT_SRC_FILE, sgas = STRAT_SRC_FILE;
	char wtb[96], wmb[96], wgas[96];
	TW_CHECK(batch_one(r, &r->ds_tb, &r->our_gb, "train_batch_size", "global_batch", &tb, &ktb,
			   &stb, wtb, sizeof(wtb)));
	TW_CHECK(batch_one(r, &r->ds_mb, &r->our_mb, "train_micro_batch_size_per_gpu",
			   "micro_batch", &mb, &kmb, &smb, wmb, sizeof(wmb)));
	TW_CHECK(batch_one(r, &r->ds_gas, &r->our_ga, "gradient_accumulation_steps", "grad_accum",
			   &gas, &kgas, &sgas, wgas, sizeof(wgas)));

	/* "auto": the HF Trainer fills micro and gas from TrainingArguments, then the total */
	if (r->ds_mb.is_auto && !kmb) {
		mb = r->hf_micro_given ? r->hf_micro : 8;
		kmb = true;
		smb = STRAT_SRC_DERIVED;
		snprintf(wmb, sizeof(wmb), "\"auto\": HF per_device_train_batch_size%s",
			 r->hf_micro_given ? "" : " (default 8)");
	}
	if (r->ds_gas.is_auto && !kgas) {
		gas = r->hf_gas_given ? r->hf_gas : 1;
		kgas = true;
		sgas = STRAT_SRC_DERIVED;
		snprintf(wgas, sizeof(wgas), "\"auto\": HF gradient_accumulation_steps%s",
			 r->hf_gas_given ? "" : " (default 1)");
	}
	if (r->ds_tb.is_auto && !ktb) {
		if (!kmb) {
			mb = r->hf_micro_given ? r->hf_micro : 8;
			kmb = true;
			smb = STRAT_SRC_DERIVED;
			snprintf(wmb, sizeof(wmb), "HF per_device_train_batch_size%s",
				 r->hf_micro_given ? "" : " (default 8)");
		}
		if (!kgas) {
			gas = r->hf_gas_given ? r->hf_gas : 1;
			kgas = true;
			sgas = STRAT_SRC_DERIVED;
			snprintf(wgas, sizeof(wgas), "HF gradient_accumulation_steps%s",
				 r->hf_gas_given ? "" : " (default 1)");
		}
	}
	/* the HF Trainer checks explicit values against TrainingArguments */
	if (r->hf_micro_given && kmb && smb != STRAT_SRC_DERIVED && mb != r->hf_micro)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: train_micro_batch_size_per_gpu: Please correct the following "
			       "DeepSpeed config values that mismatch TrainingArguments values: "
			       "%" PRId64 " vs per_device_train_batch_size=%" PRId64,
			       r->ds_file ? r->ds_file : "strategy", mb, r->hf_micro);

	if (!r->ds_file && !ktb && !kmb) {
		/* no ds_config at all: one sample per GPU, no accumulation */
		mb = 1;
		kmb = true;
		smb = STRAT_SRC_DEFAULT;
		snprintf(wmb, sizeof(wmb), "twin default (no batch given)");
	}

	/* DeepSpeed's derivation table (§1.2): floor division, then exact checks */
	const char *dtb = wtb, *dmb = wmb, *dgas = wgas;
	char derived[96];
	if (ktb && kmb && kgas) {
		/* nothing derived */
	} else if (ktb && kmb) {
		gas = mb != 0 && dp != 0 ? tb / mb / dp : 0;
		sgas = STRAT_SRC_DERIVED;
		dgas = "train_batch_size // micro // dp";
	} else if (ktb && kgas) {
		mb = gas != 0 && dp != 0 ? tb / dp / gas : 0;
		smb = STRAT_SRC_DERIVED;
		dmb = "train_batch_size // dp // gradient_accumulation_steps";
	} else if (kmb && kgas) {
		if (!tw_mul64(mb, gas, &tb) || !tw_mul64(tb, dp, &tb))
			return tw_errf(r->err, TW_ERR_INVALID,
				       "%s: micro x gradient_accumulation_steps x dp overflows 64 bits",
				       r->ds_file ? r->ds_file : "strategy");
		stb = STRAT_SRC_DERIVED;
		dtb = "micro * gradient_accumulation_steps * dp";
	} else if (ktb) {
		gas = 1;
		sgas = STRAT_SRC_DEFAULT;
		dgas = "DeepSpeed: 1 when only train_batch_size is given";
		mb = dp != 0 ? tb / dp : 0;
		smb = STRAT_SRC_DERIVED;
		dmb = "train_batch_size // dp";
	} else if (kmb) {
		gas = 1;
		sgas = STRAT_SRC_DEFAULT;
		dgas = "DeepSpeed: 1 when only the micro batch is given";
		if (!tw_mul64(mb, dp, &tb))
			return tw_errf(r->err, TW_ERR_INVALID, "%s: micro x dp overflows 64 bits",
				       r->ds_file ? r->ds_file : "strategy");
		stb = STRAT_SRC_DERIVED;
		dtb = "micro * dp";
	} else {
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: train_batch_size: Either train_batch_size or "
			       "train_micro_batch_size_per_gpu needs to be provided (DeepSpeed's rule "
			       "for a ds_config; the strategy's micro_batch or global_batch give them too)",
			       r->ds_file ? r->ds_file : "strategy");
	}
	const char *f = r->ds_file ? r->ds_file : "strategy";
	if (tb <= 0)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: train_batch_size: Train batch size: %" PRId64
			       " has to be greater than 0",
			       f, tb);
	if (mb <= 0)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: train_micro_batch_size_per_gpu: Micro batch size per gpu: %" PRId64
			       " has to be greater than 0",
			       f, mb);
	if (gas <= 0)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: gradient_accumulation_steps: Gradient accumulation steps: %" PRId64
			       " has to be greater than 0",
			       f, gas);
	int64_t prod;
	if (!tw_mul64(mb, gas, &prod) || !tw_mul64(prod, dp, &prod) || prod != tb)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: train_batch_size: Check batch related parameters. "
			       "train_batch_size is not equal to micro_batch_per_gpu * "
			       "gradient_acc_step * world_size %" PRId64 " != %" PRId64 " * %" PRId64
			       " * %" PRId64,
			       ds_label_of(r, batch_keys, f), tb, mb, gas, dp);
	s->global_batch = tb;
	s->micro_batch = mb;
	s->grad_accum = gas;
	snprintf(derived, sizeof(derived), "%s", dtb);
	strat_prov(s, "train_batch_size", stb, derived, "%" PRId64, tb);
	strat_prov(s, "train_micro_batch_size_per_gpu", smb, dmb, "%" PRId64, mb);
	strat_prov(s, "gradient_accumulation_steps", sgas, dgas, "%" PRId64, gas);
	return TW_OK;
}
