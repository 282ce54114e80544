/* search — the what-if search behind `twin plan` (docs/search.md): enumerate strategies, build
 * each through the strategy resolver (the same code path as --set on the command line), keep
 * those whose every role fits in GPU memory (plan_memory), then simulate in order of a compute
 * lower bound and rank by simulated step time. */
#include "sim.h"
#include "sim_int.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>

#define MAX_ROLES 4096
#define MAX_DIVS 256

void search_space_init(struct search_space *s)
{
	memset(s, 0, sizeof(*s));
	s->framework = STRAT_DEEPSPEED;
	s->pin_tp = s->pin_pp = s->pin_micro = s->pin_zero = s->pin_recompute = s->pin_vp = s->pin_ep =
		s->pin_cp = s->pin_recompute_layers = s->pin_etp = -1;
	s->top = 5;
}

const char *search_shard_name(enum strat_framework f, int zero)
{
	static const char *const ds[] = { "zero 0", "zero 1", "zero 2", "zero 3" };
	if (f == STRAT_MEGATRON)
		return zero ? "distopt" : "no-distopt";
	if (f == STRAT_FSDP)
		return zero == 3 ? "FULL_SHARD" : zero == 2 ? "SHARD_GRAD_OP" : "NO_SHARD";
	return zero >= 0 && zero <= 3 ? ds[zero] : "?";
}

const char *search_cand_shard(enum strat_framework f, const struct search_cand *c)
{
	return c->zeropp ? "zero 3++" : c->mics ? "mics" : search_shard_name(f, c->zero);
}


static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The smallest divisors of n (at most max), ascending, in O(sqrt n) steps (a batch of 2^40
 * samples is 2^20 steps, not 2^40): those up to sqrt(n), then their partners n / d, which
 * exceed them all and ascend as d descends */
static int divisors(int64_t n, int64_t *out, int max)
{
	int k = 0;
	for (int64_t d = 1; d <= n / d && k < max; d++)
		if (n % d == 0)
			out[k++] = d;
	for (int i = k - 1; i >= 0 && k < max; i--)
		if (n / out[i] != out[i])
			out[k++] = n / out[i];
	return k;
}

static void add_set(struct search_cand *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_set(struct search_cand *c, const char *fmt, ...)
{
	if (c->nsets >= SEARCH_MAX_SETS) {
		c->nsets = SEARCH_MAX_SETS + 1; /* search_job refuses it rather than drop a set */
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->sets[c->nsets++], sizeof(c->sets[0]), fmt, ap);
	va_end(ap);
}

static bool user_sets_any(const struct search_space *sp, const char *const *keys, size_t n);

/* The value the user's --set gives path (the last one), or NULL */
static const char *user_set_value(const struct search_space *sp, const char *path);

/* Whether the user's --set gives the precision itself (then the candidates leave it alone) */
static bool user_sets_precision(const struct search_space *sp)
{
	static const char *const keys[] = { "precision", "fp16", "bf16", "fp16.enabled",
					    "bf16.enabled", "bfloat16", "bfloat16.enabled" };
	return user_sets_any(sp, keys, sizeof(keys) / sizeof(*keys));
}

/* The candidate as strategy --set paths, in the framework's own vocabulary. */
static void cand_sets(const struct job *base, const struct search_space *sp, struct search_cand *c)
{
	bool bf16 = base->cluster.gpu.peak_tflops[TW_BF16] > 0, own = !user_sets_precision(sp);
	c->nsets = 0;
	add_set(c, "tp=%lld", (long long)c->tp); /* a strategy path in every vocabulary */
	switch (sp->framework) {
	case STRAT_DEEPSPEED:
		add_set(c, "pp=%lld", (long long)c->pp);
		add_set(c, "train_batch_size=%lld", (long long)sp->global_batch);
		add_set(c, "train_micro_batch_size_per_gpu=%lld", (long long)c->micro);
		add_set(c, "zero_optimization.stage=%d", c->zero);
		if (own) {
			add_set(c, bf16 ? "bf16.enabled=true" : "fp16.enabled=true");
		} else { /* our precision key becomes the ds_config's section (fp32: neither) */
			const char *pr = user_set_value(sp, "precision");
			if (pr && (!strcmp(pr, "fp16") || !strcmp(pr, "bf16")))
				add_set(c, "%s.enabled=true", pr);
		}
		if (c->offload == STRAT_OFFLOAD_CPU)
			add_set(c, "zero_optimization.offload_optimizer.device=cpu");
		int64_t per = base->cluster.node.gpus > 0 ? base->cluster.node.gpus : 1;
		if (c->zeropp) { /* DeepSpeed's ZeRO++ tutorial: hpZ over a node */
			add_set(c, "zero_optimization.zero_hpz_partition_size=%lld",
				(long long)(per < c->dp ? per : c->dp));
			add_set(c, "zero_optimization.zero_quantized_weights=true");
			add_set(c, "zero_optimization.zero_quantized_gradients=true");
		}
		if (c->mics) /* states sharded within a node, replicated across */
			add_set(c, "zero_optimization.mics_shard_size=%lld",
				(long long)(per < c->dp ? per : c->dp));
		break;
	case STRAT_MEGATRON:
		add_set(c, "framework=megatron");
		add_set(c, "pp=%lld", (long long)c->pp);
		add_set(c, "global_batch=%lld", (long long)sp->global_batch);
		add_set(c, "micro_batch=%lld", (long long)c->micro);
		add_set(c, "distributed_optimizer=%s", c->zero ? "true" : "false");
		if (c->sequence_parallel)
			add_set(c, "sequence_parallel=true");
		if (c->vp > 1) {
			add_set(c, "vp=%lld", (long long)c->vp);
			add_set(c, "schedule=interleaved");
		}
		if (c->split_el) {
			add_set(c, "account_for_embedding_in_pipeline_split=true");
			add_set(c, "account_for_loss_in_pipeline_split=true");
		}
		if (!bf16 && own)
			add_set(c, "precision=fp16");
		/* MoE: the experts' grouped GEMMs, the fused permutation and router, as Megatron's
		 * scripts and recipes run them (a user's --set comes after and wins) */
		if (base->model.experts > 0) {
			add_set(c, "moe_grouped_gemm=true");
			add_set(c, "moe_permute_fusion=true");
			add_set(c, "moe_router_fusion=true");
		}
		break;
	case STRAT_FSDP:
		add_set(c, "framework=fsdp");
		add_set(c, "global_batch=%lld", (long long)sp->global_batch);
		add_set(c, "micro_batch=%lld", (long long)c->micro);
		add_set(c, "fsdp.sharding_strategy=%s", search_shard_name(STRAT_FSDP, c->zero));
		if (!bf16 && own)
			add_set(c, "precision=fp16");
		break;
	}
	/* expert and context parallelism are strategy paths in every vocabulary (1: not set) */
	if (c->ep > 1)
		add_set(c, "ep=%lld", (long long)c->ep);
	if (c->etp > 0)
		add_set(c, "expert_tp=%lld", (long long)c->etp);
	if (c->cp > 1)
		add_set(c, "cp=%lld", (long long)c->cp);
	/* ring attention (PyTorch's default all-gather rotation too) runs no sliding window
	 * (core/strategy.c): a windowed model's candidates split their sequence with the
	 * all-to-all */
	int64_t seq = sp->seq > 0 ? sp->seq : base->model.seq_len;
	const struct model *m = &base->model;
	if (c->cp > 1 && m->sliding_window > 0 && model_local_layers(m) > 0 && m->sliding_window < seq)
		add_set(c, "cp_kind=ulysses");
	add_set(c, "recompute=%s", strat_recompute_name(c->recompute));
	if (c->rc_modules) { /* recompute_modules=["core_attn",...] from the bits */
		char v[64] = "";
		for (int i = 0; strat_rc_module_name(i); i++)
			if (c->rc_modules & (1u << i)) {
				size_t n = strlen(v);
				snprintf(v + n, sizeof(v) - n, "%s\"%s\"", n ? "," : "",
					 strat_rc_module_name(i));
			}
		add_set(c, "recompute_modules=[%s]", v);
	}
	if (c->recompute_layers > 0)
		add_set(c, "recompute_num_layers=%lld", (long long)c->recompute_layers);
	if (c->moe_overlap)
		add_set(c, "overlap_moe_expert_parallel_comm=true");
	/* the model code is the user's whatever the degrees (its default follows tp and pp): the
	 * base strategy's when it is of the searched framework, else that framework's own code
	 * (Megatron's fused kernels; HF modules for DeepSpeed and FSDP); a user --set wins */
	enum strat_kernels k = base->strat.framework == sp->framework ? base->strat.kernels
			       : sp->framework == STRAT_MEGATRON ? STRAT_KERNELS_FUSED
								 : STRAT_KERNELS_EAGER;
	add_set(c, "kernels=%s", strat_kernels_name(k));
	if (sp->seq > 0)
		add_set(c, "seq_len=%lld", (long long)sp->seq);
}

/* A --set's path without the "strategy." or "ds_config." prefix that says which tree it is
 * (docs/strategy.md), so that a pin is one whatever its spelling; *len is the path's length. */
static const char *set_path(const char *s, size_t *len)
{
	const char *eq = strchr(s, '=');
	size_t n = eq ? (size_t)(eq - s) : strlen(s);
	if (n > 10 && !strncmp(s, "ds_config.", 10))
		s += 10, n -= 10;
	else if (n > 9 && !strncmp(s, "strategy.", 9))
		s += 9, n -= 9;
	*len = n;
	return s;
}

static bool path_is(const char *p, size_t len, const char *name)
{
	return strlen(name) == len && !strncmp(p, name, len);
}

/* The integer pins: a --set of one of these paths restricts a searched dimension (recompute=,
 * a name, is read apart) */
static const struct {
	const char *path;
	size_t off; /* of the pin in struct search_space */
} int_pins[] = {
	{"tp", offsetof(struct search_space, pin_tp)},
	{"pp", offsetof(struct search_space, pin_pp)},
	{"vp", offsetof(struct search_space, pin_vp)},
	{"ep", offsetof(struct search_space, pin_ep)},
	{"expert_tp", offsetof(struct search_space, pin_etp)},
	{"cp", offsetof(struct search_space, pin_cp)},
	{"micro_batch", offsetof(struct search_space, pin_micro)},
	{"train_micro_batch_size_per_gpu", offsetof(struct search_space, pin_micro)},
	{"zero_optimization.stage", offsetof(struct search_space, pin_zero)},
	{"recompute_num_layers", offsetof(struct search_space, pin_recompute_layers)},
};
#define N_INT_PINS (sizeof(int_pins) / sizeof(*int_pins))

/* The pin of search_space that the --set path p (len long) sets, or NULL */
static int64_t *int_pin(struct search_space *sp, const char *p, size_t len)
{
	for (size_t k = 0; k < N_INT_PINS; k++)
		if (path_is(p, len, int_pins[k].path))
			return (int64_t *)((char *)sp + int_pins[k].off);
	return NULL;
}

/* Whether the --set path p is a pin, which search_run consumed */
static bool is_pin(const char *p, size_t len)
{
	for (size_t k = 0; k < N_INT_PINS; k++)
		if (path_is(p, len, int_pins[k].path))
			return true;
	return path_is(p, len, "recompute");
}

/* The user's sets that do not pin a searched dimension and are not cluster paths. */
struct user_sets {
	const char *v[64];
	int n;
};

enum tw_result search_job(const struct job *base, const struct search_space *sp,
			  const struct search_cand *c, struct job *out, struct tw_err *err)
{
	const char *sets[SEARCH_MAX_SETS + 64];
	int n = 0;
	if (c->nsets > SEARCH_MAX_SETS)
		return tw_errf(err, TW_ERR_LIMIT, "twin plan: a candidate needs more than %d strategy "
			       "settings (SEARCH_MAX_SETS in sim/sim.h)", SEARCH_MAX_SETS);
	for (int i = 0; i < c->nsets; i++)
		sets[n++] = c->sets[i];
	for (int i = 0; i < sp->nsets && n < (int)(sizeof(sets) / sizeof(sets[0])); i++) {
		char path[128];
		size_t len;
		const char *p = set_path(sp->sets[i], &len);
		if (len >= sizeof(path))
			len = sizeof(path) - 1;
		memcpy(path, p, len);
		path[len] = '\0';
		/* pins were consumed by search_run; cluster paths are already in base */
		if (cluster_owns_path(path) || is_pin(p, len))
			continue;
		sets[n++] = sp->sets[i];
	}
	out->model = base->model;
	out->cluster = base->cluster;
	out->gpus = base->gpus;
	out->nodes = base->nodes;
	out->pace = base->pace;
	struct strat_inputs si = { .strategies_dir = sp->strategies_dir, .sets = sets, .nsets = n,
				   .gpus = base->gpus };
	TW_CHECK(strategy_resolve(&si, &out->model, &out->cluster, &out->strat, err));
	out->seq = out->strat.seq_len ? out->strat.seq_len : out->model.seq_len;
	if (!tw_mul64(out->strat.global_batch, out->seq, &out->tokens_per_step))
		return tw_errf(err, TW_ERR_INVALID, "global_batch x seq_len overflows 64 bits");
	return TW_OK;
}

/* Memory and compute bound of every role of j. Returns false when a plan cannot be built
 * (err filled). */
static bool measure(const struct job *j, struct search_cand *c, int64_t *reps, int64_t *w,
		    struct plan *p, struct tw_err *err)
{
	int64_t nr = plan_roles(j, reps, w, MAX_ROLES);
	c->peak_bytes = 0;
	c->bound_ns = 0;
	c->capacity_bytes = 0;
	int64_t worst_short = INT64_MIN;
	c->host_short_bytes = 0;
	for (int64_t r = 0; r < nr; r++) {
		/* the task's plan buffers are reused: fresh memory for every candidate's plans
		 * was most of the filter's time (page faults) */
		if (plan_rebuild(j, reps[r], p, err) != TW_OK)
			return false;
		struct plan_mem m;
		if (plan_memory(j, p, &m, err) != TW_OK)
			return false;
		/* the busiest compute stream bounds the step from below: the simulator runs these
		 * ops one after another at no less than their own cost */
		int64_t busy = 0;
		for (size_t i = 0; i < p->nops; i++) {
			const struct plan_op *op = &p->ops[i];
			if (op->kind == PLAN_COMPUTE && op->stream == PLAN_STREAM_COMPUTE)
				busy += sim_compute_ns(j, op);
		}
		if (busy > c->bound_ns)
			c->bound_ns = busy;
		if (m.host_capacity > 0 && m.peak[PLAN_DEV_HOST] - m.host_capacity > c->host_short_bytes)
			c->host_short_bytes = m.peak[PLAN_DEV_HOST] - m.host_capacity;
		int64_t s = plan_mem_shortfall(&m, c->verdict, sizeof(c->verdict));
		if (s > worst_short) {
			worst_short = s;
			c->peak_bytes = m.gpu_total;
			c->capacity_bytes = m.gpu_capacity;
			snprintf(c->worst_verdict, sizeof(c->worst_verdict), "%s", c->verdict);
		}
	}
	c->short_bytes = worst_short;
	return true;
}

/* Paths the search sets itself for every candidate (cand_sets): a user --set of one would
 * overwrite every candidate's choice while the table names the candidates' own. (Megatron's
 * distributed_optimizer, sequence_parallel and recompute_modules given by the user narrow the
 * search instead, as they did.) */
static const char *const searched_paths[] = {
	"train_batch_size", "global_batch", "gradient_accumulation_steps", "framework",
	"zero_optimization", "zero_optimization.offload_optimizer",
	"zero_optimization.offload_optimizer.device", "zero_optimization.zero_hpz_partition_size",
	"zero_optimization.mics_shard_size", "fsdp", NULL};

/* Apply the user's pins (int_pins, and recompute=NAME); refuse the searched paths. */
static enum tw_result read_pins(const struct search_space *in, struct search_space *sp,
				struct tw_err *err)
{
	*sp = *in;
	for (int i = 0; i < in->nsets; i++) {
		const char *s = in->sets[i], *eq = strchr(s, '=');
		if (!eq)
			continue;
		size_t len;
		s = set_path(s, &len);
		for (int k = 0; searched_paths[k]; k++)
			if (path_is(s, len, searched_paths[k]))
				return tw_errf(err, TW_ERR_INVALID,
					       "--set %s: twin plan searches it for each candidate "
					       "(pin tp, pp, vp, ep, cp, micro_batch, "
					       "zero_optimization.stage, recompute or "
					       "recompute_num_layers; the batch is --global-batch, the "
					       "framework --framework)",
					       in->sets[i]);
		const char *v = eq + 1;
		int64_t *pin = int_pin(sp, s, len);
		if (path_is(s, len, "recompute")) {
			if (!strcmp(v, "none"))
				sp->pin_recompute = STRAT_RECOMPUTE_NONE;
			else if (!strcmp(v, "selective"))
				sp->pin_recompute = STRAT_RECOMPUTE_SELECTIVE;
			else if (!strcmp(v, "full"))
				sp->pin_recompute = STRAT_RECOMPUTE_FULL;
			else if (!strcmp(v, "op"))
				sp->pin_recompute = STRAT_RECOMPUTE_OP;
			else
				return tw_errf(err, TW_ERR_INVALID, "--set %s: recompute must be one "
					       "of: none, selective, full, op", in->sets[i]);
			continue;
		}
		if (!pin)
			continue;
		char *end;
		long long x = strtoll(v, &end, 10);
		if (*v == '\0' || *end != '\0' || x < 0 || x > (1LL << 40))
			return tw_errf(err, TW_ERR_INVALID, "--set %s: must be a non-negative integer",
				       in->sets[i]);
		/* a degree, a batch or a layer count of 0 names nothing; ZeRO has stages 0-3 */
		if (pin == &sp->pin_zero ? x > 3 : x < 1)
			return tw_errf(err, TW_ERR_INVALID, "--set %s: must be %s", in->sets[i],
				       pin == &sp->pin_zero ? "a ZeRO stage, 0 to 3" : ">= 1");
		*pin = x;
	}
	if (sp->pin_recompute_layers >= 0) {
		if (sp->pin_recompute_layers == 0 ||
		    (sp->pin_recompute >= 0 && sp->pin_recompute != STRAT_RECOMPUTE_FULL))
			return tw_errf(err, TW_ERR_INVALID,
				       "--set recompute_num_layers=%lld: needs recompute full and N >= 1",
				       (long long)sp->pin_recompute_layers);
		sp->pin_recompute = STRAT_RECOMPUTE_FULL;
	}
	if (sp->pin_recompute == STRAT_RECOMPUTE_OP && sp->framework != STRAT_FSDP)
		return tw_errf(err, TW_ERR_INVALID, "--set recompute=op: torchtitan's selective op AC is "
			       "searched with --framework fsdp only");
	return TW_OK;
}

/* Candidate order for the top K: step time, then enumeration order (so ties, and therefore
 * the result, do not depend on which thread finished first). */
static bool before(const struct search_cand *x, const struct search_cand *y)
{
	return x->step_ns != y->step_ns ? x->step_ns < y->step_ns : x->seq < y->seq;
}

static void keep_top(struct search_result *res, int top, const struct search_cand *c)
{
	int n = res->ntop;
	if (n == top && !before(c, &res->top[n - 1]))
		return;
	int i = n < top ? n : top - 1;
	while (i > 0 && before(c, &res->top[i - 1])) {
		res->top[i] = res->top[i - 1];
		i--;
	}
	res->top[i] = *c;
	if (n < top)
		res->ntop++;
}

/* One task of the memory filter: every recompute and micro-batch choice of one (tp, pp, zero,
 * offload). Tasks run on worker threads; their results are merged in task order. */
struct task {
	int64_t tp, pp, dp, ep, cp, etp;
	bool split_el; /* pp splits layers + the embedding and the loss (Megatron) */
	int zero;
	bool zeropp, use_mics;
	enum strat_offload offload;
	const int64_t *mics;
	int nm;
	/* out */
	struct search_cand *fit;
	size_t nfit, cap;
	int64_t candidates, rejected, skipped, duplicates;
	char first_reject[200]; /* the resolver's reason for the first candidate it refused */
	struct search_cand closest;
	int64_t closest_short;
};

struct shared {
	const struct job *base;
	const struct search_space *sp;
	bool moe_rc; /* Megatron MoE, no user recompute_modules: also try sel:moe */
	bool moe_ovl; /* Megatron MoE, no user overlap_moe_expert_parallel_comm: also try it */
	struct task *tasks;
	size_t ntasks, next_task;
	/* simulation */
	struct search_cand *fit;
	size_t nfit, next_fit;
	struct search_result *res;
	enum tw_result rc;
	struct tw_err err;
	pthread_mutex_t mu;
	/* libcjson writes a global error position on every parse (cJSON_GetErrorPtr, unused
	 * here); resolving one candidate at a time keeps that write free of data races */
	pthread_mutex_t resolve_mu;
};

static enum tw_result resolve_locked(struct shared *sh, const struct search_cand *c,
				     struct job *out, struct tw_err *err)
{
	pthread_mutex_lock(&sh->resolve_mu);
	enum tw_result rc = search_job(sh->base, sh->sp, c, out, err);
	pthread_mutex_unlock(&sh->resolve_mu);
	return rc;
}

/* Expert-parallel degrees (MoE models): the divisors of the ranks expert groups are carved
 * from (dp; dp x cp for Megatron-Core) that divide the expert count; 1 for dense models; a
 * pinned ep keeps only itself. */
static int ep_choices(const struct search_space *sp, const struct model *m, int64_t dp,
		      int64_t *out)
{
	int n = 0;
	if (m->experts <= 0) {
		if (sp->pin_ep <= 1)
			out[n++] = 1;
		return n;
	}
	int64_t d[MAX_DIVS];
	int nd = divisors(dp, d, MAX_DIVS);
	for (int i = 0; i < nd; i++)
		if (m->experts % d[i] == 0 && (sp->pin_ep < 0 || sp->pin_ep == d[i]))
			out[n++] = d[i];
	return n;
}

/* Whether the user's --set gives one of keys[0 .. n) itself. */
static bool user_sets_any(const struct search_space *sp, const char *const *keys, size_t n)
{
	for (int i = 0; i < sp->nsets; i++) {
		size_t len;
		const char *p = set_path(sp->sets[i], &len);
		for (size_t k = 0; k < n; k++)
			if (path_is(p, len, keys[k]))
				return true;
	}
	return false;
}

static const char *user_set_value(const struct search_space *sp, const char *path)
{
	const char *v = NULL;
	for (int i = 0; i < sp->nsets; i++) {
		size_t len;
		const char *p = set_path(sp->sets[i], &len);
		if (path_is(p, len, path) && p[len] == '=')
			v = p + len + 1;
	}
	return v;
}

/* Whether the user's --set gives the pipeline split itself (Megatron's uneven stages). */
static bool user_sets_split(const struct search_space *sp)
{
	static const char *const keys[] = { "first_stage_layers", "last_stage_layers",
					    "account_for_embedding_in_pipeline_split",
					    "account_for_loss_in_pipeline_split" };
	return user_sets_any(sp, keys, sizeof(keys) / sizeof(*keys));
}

/* The layers (counted ones included) a pipeline stage splits over its model chunks. */
static int64_t stage_layers(const struct job *base, int64_t pp, bool split_el)
{
	return (base->model.layers + (split_el ? 2 : 0)) / pp;
}

/* Interleaving degrees worth a candidate (Megatron, pp > 1): 1, and every v <= SEARCH_MAX_VP
 * that splits a stage's layers into whole model chunks; a pinned vp keeps only itself. */
static int vp_choices(const struct search_space *sp, const struct job *base, int64_t pp,
		      bool split_el, int64_t *out)
{
	int n = 0;
	if (sp->pin_vp <= 1)
		out[n++] = 1;
	if (sp->framework != STRAT_MEGATRON || pp <= 1 || sp->pin_vp == 1)
		return n;
	int64_t per = stage_layers(base, pp, split_el);
	for (int64_t v = 2; v <= per && v <= SEARCH_MAX_VP; v++)
		if (per % v == 0 && (sp->pin_vp < 0 || sp->pin_vp == v))
			out[n++] = v;
	return n;
}

static void run_task(struct shared *sh, struct task *t)
{
	const struct job *base = sh->base;
	const struct search_space *sp = sh->sp;
	struct job *j = TW_NEW(struct job);
	int64_t *reps = TW_NEW_ARRAY(int64_t, MAX_ROLES), *w = TW_NEW_ARRAY(int64_t, MAX_ROLES);
	struct plan plan;
	memset(&plan, 0, sizeof(plan));
	t->closest_short = INT64_MAX;
	int64_t vps[SEARCH_MAX_VP];
	int nv = vp_choices(sp, base, t->pp, t->split_el, vps);
	/* recompute none's peak and bound per micro-batch size and vp: a selective candidate
	 * with the same figures recomputes nothing (flash attention saves no scores), a
	 * duplicate */
	int64_t none_peak[MAX_DIVS][SEARCH_MAX_VP], none_bound[MAX_DIVS][SEARCH_MAX_VP];
	/* Megatron MoE with expert parallelism: each choice again with the combined 1F1B
	 * (overlap_moe_expert_parallel_comm), where Megatron allows it */
	/* the combined 1F1B keeps at least the activations of the plain schedule: a choice that
	 * did not fit (or was refused) without it is not tried with it */
	bool fit0[6][MAX_DIVS][SEARCH_MAX_VP];
	memset(fit0, 0, sizeof(fit0));
	for (int ov = 0; ov < (sh->moe_ovl && t->ep > 1 ? 2 : 1); ov++) {
		for (int k = 0; k < t->nm; k++)
			for (int v = 0; v < nv; v++)
				none_peak[k][v] = none_bound[k][v] = -1;
		/* recompute choices: none, selective, full of half of each model chunk's layers
		 * (Megatron's block method; the activations of the rest are kept), full, for FSDP
		 * without TP on a dense model torchtitan's selective op AC, and for Megatron MoE models
		 * selective with the experts' activation and the separate norms (recompute_modules)
		 * unless the user gives the modules */
		for (int o = 0; o < 6; o++) {
			int r = o < 2 ? o : o < 4 ? STRAT_RECOMPUTE_FULL
				: o == 4   ? STRAT_RECOMPUTE_OP
					   : STRAT_RECOMPUTE_SELECTIVE;
			bool block = o == 2;
			if (sp->pin_recompute >= 0 && sp->pin_recompute != r)
				continue;
			if (o == 5 && !sh->moe_rc)
				continue;
			if (ov && r == STRAT_RECOMPUTE_FULL)
				continue; /* Megatron refuses full recompute with the overlap */
			if (r == STRAT_RECOMPUTE_OP && (sp->framework != STRAT_FSDP || t->tp > 1 ||
							base->model.experts > 0 || base->strat.lora_rank > 0))
				continue;
			if (block != (sp->pin_recompute_layers > 0) &&
			    (sp->pin_recompute_layers > 0 || sp->pin_recompute == STRAT_RECOMPUTE_FULL ||
			     sp->framework != STRAT_MEGATRON))
				continue; /* a pinned N, or a pinned full, or no block method outside Megatron */
			bool too_big = false; /* a smaller micro-batch did not fit: no larger one will */
			for (int k = 0; k < t->nm && !too_big; k++) {
				for (int v = 0; v < nv; v++) {
					struct search_cand c;
					memset(&c, 0, sizeof(c));
					c.tp = t->tp;
					c.pp = t->pp;
					c.split_el = t->split_el;
					c.dp = t->dp;
					c.ep = t->ep;
					c.etp = t->etp;
					c.cp = t->cp;
					c.vp = vps[v];
					c.moe_overlap = ov;
					if (ov && c.pp > 1 && c.vp == 1)
						continue; /* with a pipeline: the interleaved schedule only */
					if (ov && !fit0[o][k][v]) {
						t->candidates++, t->skipped++;
						continue;
					}
					c.micro = t->mics[k];
					c.grad_accum = sp->global_batch / (t->dp * c.micro);
					/* Megatron's interleaved schedule runs micro-batches in groups of pp */
					if (c.vp > 1 && c.grad_accum % t->pp != 0)
						continue;
					c.zero = t->zero;
					c.zeropp = t->zeropp;
					c.mics = t->use_mics;
					c.recompute = (enum strat_recompute)r;
					c.rc_modules = o == 5 ? SEARCH_RC_MOE_MODULES : 0;
					if (block) {
						/* half of a model chunk's layers, or the pinned N */
						int64_t lpc = stage_layers(base, t->pp, t->split_el) / c.vp;
						c.recompute_layers = sp->pin_recompute_layers > 0 ? sp->pin_recompute_layers
												    : lpc / 2;
						if (c.recompute_layers < 1 ||
						    (sp->pin_recompute_layers <= 0 && c.recompute_layers >= lpc))
							continue; /* the same as full or none */
					}
					c.offload = t->offload;
					c.sequence_parallel = sp->framework == STRAT_MEGATRON && t->tp > 1;
					cand_sets(base, sp, &c);
					t->candidates++;
					struct tw_err e = { 0 };
					memset(j, 0, sizeof(*j));
					if (resolve_locked(sh, &c, j, &e) != TW_OK ||
					    !measure(j, &c, reps, w, &plan, &e)) {
						if (t->rejected++ == 0)
							snprintf(t->first_reject, sizeof(t->first_reject),
								 "%.199s", e.msg);
						continue;
					}
					c.sequence_parallel = j->strat.sequence_parallel;
					if (r == STRAT_RECOMPUTE_NONE) {
						none_peak[k][v] = c.peak_bytes;
						none_bound[k][v] = c.bound_ns;
					} else if (r == STRAT_RECOMPUTE_SELECTIVE && none_peak[k][v] == c.peak_bytes &&
						   none_bound[k][v] == c.bound_ns) {
						t->duplicates++;
						continue;
					}
					int64_t shortfall = c.short_bytes;
					if (shortfall > 0) {
						if (shortfall < t->closest_short) {
							t->closest_short = shortfall;
							t->closest = c;
						}
						/* activations grow with the micro-batch; the interleaved
						 * schedule keeps more in flight than plain 1F1B (vps[0]) for any
						 * vp, though not monotonically in vp */
						if (v == 0) {
							t->skipped += (t->nm - k - 1) * nv + nv - 1;
							t->candidates += (t->nm - k - 1) * nv + nv - 1;
							too_big = true;
							break;
						}
						continue;
					}
					fit0[o][k][v] = !ov;
					TW_GROW(t->fit, t->cap, t->nfit + 1);
					t->fit[t->nfit++] = c;
				}
			}
		}
	}
	plan_release(&plan);
	free(j);
	free(reps);
	free(w);
}

static void *filter_worker(void *p)
{
	struct shared *sh = p;
	for (;;) {
		pthread_mutex_lock(&sh->mu);
		size_t i = sh->next_task++;
		pthread_mutex_unlock(&sh->mu);
		if (i >= sh->ntasks)
			return NULL;
		run_task(sh, &sh->tasks[i]);
	}
}

/* Simulate candidates in order of their lower bound; once the bound of the next one puts it
 * after the K-th best simulated, no later one (higher bound) can enter the top K. */
static void *sim_worker(void *p)
{
	struct shared *sh = p;
	struct job *j = TW_NEW(struct job);
	for (;;) {
		pthread_mutex_lock(&sh->mu);
		struct search_result *res = sh->res;
		int top = sh->sp->top;
		size_t i = sh->next_fit;
		if (sh->rc != TW_OK || i >= sh->nfit) {
			pthread_mutex_unlock(&sh->mu);
			break;
		}
		struct search_cand *c = &sh->fit[i];
		if (!sh->sp->exhaustive && res->ntop == top) {
			const struct search_cand *kth = &res->top[top - 1];
			if (c->bound_ns > kth->step_ns || (c->bound_ns == kth->step_ns && c->seq > kth->seq)) {
				sh->next_fit = sh->nfit;
				pthread_mutex_unlock(&sh->mu);
				break;
			}
		}
		sh->next_fit++;
		pthread_mutex_unlock(&sh->mu);

		struct tw_err e = { 0 };
		memset(j, 0, sizeof(*j));
		enum tw_result rc = resolve_locked(sh, c, j, &e);
		struct sim_stats st;
		memset(&st, 0, sizeof(st));
		if (rc == TW_OK) {
			struct sim_options o = { .full = false };
			struct trace t;
			rc = sim_run(j, &o, &t, &st, &e);
			/* the timeline's peak (streams overlap: a prefetch may hold its buffer
			 * before the compute stream frees the last) may exceed the walk's */
			if (rc == TW_OK) {
				int64_t pk = trace_peak_mem(&t, NULL);
				if (pk > c->peak_bytes)
					c->peak_bytes = pk;
				trace_release(&t);
			}
		}
		bool over = rc == TW_OK && c->peak_bytes > c->capacity_bytes;
		if (over) {
			c->short_bytes = c->peak_bytes - c->capacity_bytes;
			snprintf(c->worst_verdict, sizeof(c->worst_verdict),
				 "does not fit once its streams overlap: the simulated timeline peaks "
				 "%.2f GiB over", (double)c->short_bytes / (double)TW_GIB);
		}
		if (rc == TW_OK) {
			c->step_ns = st.step_ns > 0 ? st.step_ns : 1;
			double step_s = (double)c->step_ns * 1e-9;
			int64_t gpus = sh->base->gpus;
			c->tokens_s = (double)j->tokens_per_step / step_s;
			c->tokens_s_gpu = c->tokens_s / (double)gpus;
			double mf = plan_model_flops_per_token(j) * (double)j->tokens_per_step;
			double pk = job_peak_tflops(j);
			c->mfu = pk > 0 ? mf / (double)gpus / step_s * 1e-12 / pk : 0;
		}
		pthread_mutex_lock(&sh->mu);
		if (rc != TW_OK && st.nccl_unrunnable) {
			/* NCCL would fail this candidate's collectives: not a configuration to run */
			if (res->unrunnable++ == 0)
				snprintf(res->first_unrunnable, sizeof(res->first_unrunnable), "%.*s",
					 (int)sizeof(res->first_unrunnable) - 1, e.msg);
		} else if (rc != TW_OK) {
			if (sh->rc == TW_OK) {
				sh->rc = rc;
				tw_errf(&sh->err, rc,
					"simulating tp %lld pp %lld vp %lld cp %lld dp %lld ep %lld "
					"micro %lld %s recompute %s (layers %lld): %s",
					(long long)c->tp, (long long)c->pp, (long long)c->vp, (long long)c->cp,
					(long long)c->dp, (long long)c->ep, (long long)c->micro,
					search_cand_shard(sh->sp->framework, c), strat_recompute_name(c->recompute),
					(long long)c->recompute_layers, e.msg);
			}
		} else if (over) {
			res->simulated++;
			res->over++;
			if (c->short_bytes < res->closest_short_bytes) {
				res->closest_short_bytes = c->short_bytes;
				res->closest = *c;
			}
		} else {
			res->simulated++;
			keep_top(res, top, c);
		}
		pthread_mutex_unlock(&sh->mu);
	}
	free(j);
	return NULL;
}

/* Run fn on n threads (the caller is one of them). */
static void run_workers(void *(*fn)(void *), struct shared *sh, int n)
{
	pthread_t th[SEARCH_MAX_THREADS];
	int started = 0;
	for (int i = 1; i < n && i < SEARCH_MAX_THREADS; i++) {
		if (pthread_create(&th[started], NULL, fn, sh) != 0)
			break; /* fewer threads: the work queue still drains */
		started++;
	}
	fn(sh);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

static int by_bound_seq(const void *a, const void *b)
{
	const struct search_cand *x = a, *y = b;
	if (x->bound_ns != y->bound_ns)
		return x->bound_ns < y->bound_ns ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

enum tw_result search_run(const struct job *base, const struct search_space *space,
			  struct search_result *res, struct tw_err *err)
{
	memset(res, 0, sizeof(*res));
	double t0 = now_s();
	struct search_space sp;
	TW_CHECK(read_pins(space, &sp, err));
	if (sp.top <= 0)
		sp.top = 5;
	if (sp.global_batch <= 0)
		return tw_errf(err, TW_ERR_INVALID, "global batch must be > 0 (got %lld)",
			       (long long)sp.global_batch);
	int threads = sp.threads;
	if (threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n < 1 ? 1 : n > SEARCH_MAX_THREADS ? SEARCH_MAX_THREADS : (int)n;
	}
	if (threads > SEARCH_MAX_THREADS)
		threads = SEARCH_MAX_THREADS;
	res->threads = threads;
	const struct model *m = &base->model;
	const struct cluster *cl = &base->cluster;
	const int64_t gpus = base->gpus;

	int64_t tps[MAX_DIVS], pps[MAX_DIVS];
	bool pp_el[MAX_DIVS]; /* that pp splits layers + the embedding and the loss */
	int ntp = 0, npp = 0;
	{
		int64_t d[MAX_DIVS];
		int nd = divisors(cl->node.gpus < gpus ? cl->node.gpus : gpus, d, MAX_DIVS);
		for (int i = 0; i < nd; i++)
			if (gpus % d[i] == 0 && m->heads % d[i] == 0 && m->kv_heads % d[i] == 0 &&
			    (sp.pin_tp < 0 || sp.pin_tp == d[i]))
				tps[ntp++] = d[i];
		/* pp divides the layers; for Megatron also a pp that divides them only with the
		 * embedding and the loss counted as a layer each (Megatron-Core's
		 * account_for_embedding/loss_in_pipeline_split) */
		bool user_split = user_sets_split(&sp);
		/* pp divides the GPUs too, so the walk stops there (a model may have 2^31 layers) */
		for (int64_t p = 1; p <= m->layers && p <= gpus && npp < MAX_DIVS; p++) {
			bool el = m->layers % p != 0;
			/* the user's own split (first/last_stage_layers, ...) holds for a pinned pp */
			if (el && user_split && sp.pin_pp == p)
				el = false;
			else if (el && (user_split || sp.framework != STRAT_MEGATRON ||
					(m->layers + 2) % p))
				continue;
			if (gpus % p || (sp.pin_pp >= 0 && sp.pin_pp != p) ||
			    (sp.framework == STRAT_FSDP && p != 1))
				continue;
			pp_el[npp] = el;
			pps[npp++] = p;
		}
	}
	if (ntp == 0)
		return tw_errf(err, TW_ERR_INVALID,
			       "no tensor-parallel degree fits: tp must divide model.heads=%lld, "
			       "model.kv_heads=%lld, --gpus %lld and node.gpus=%d%s",
			       (long long)m->heads, (long long)m->kv_heads, (long long)gpus, cl->node.gpus,
			       sp.pin_tp >= 0 ? " (and the pinned --set tp)" : "");
	if (sp.pin_vp > 1 && sp.framework != STRAT_MEGATRON)
		return tw_errf(err, TW_ERR_INVALID,
			       "--set vp=%lld: the interleaved schedule is Megatron's (--framework megatron)",
			       (long long)sp.pin_vp);
	if (sp.pin_vp > 1) {
		bool any = false;
		for (int b = 0; b < npp; b++)
			any |= pps[b] > 1 && stage_layers(base, pps[b], pp_el[b]) % sp.pin_vp == 0;
		if (!any)
			return tw_errf(err, TW_ERR_INVALID,
				       "--set vp=%lld: no pipeline degree pp > 1 leaves model.layers=%lld / pp "
				       "divisible by vp", (long long)sp.pin_vp, (long long)m->layers);
	}
	if (sp.pin_ep > 1 && (m->experts <= 0 || m->experts % sp.pin_ep != 0))
		return tw_errf(err, TW_ERR_INVALID,
			       "--set ep=%lld: expert parallelism needs an MoE model whose expert count "
			       "it divides (model.experts=%lld)",
			       (long long)sp.pin_ep, (long long)m->experts);
	if (sp.pin_etp > 0 && (sp.framework != STRAT_MEGATRON || m->experts <= 0))
		return tw_errf(err, TW_ERR_INVALID,
			       "--set expert_tp=%lld: the experts' own tensor-parallel degree needs "
			       "--framework megatron and an MoE model", (long long)sp.pin_etp);
	if (sp.framework == STRAT_FSDP && sp.pin_pp > 1)
		return tw_errf(err, TW_ERR_INVALID,
			       "--set pp=%lld: FSDP runs without a pipeline (pp 1); --framework megatron "
			       "or deepspeed searches pipelines", (long long)sp.pin_pp);
	if (sp.pin_recompute_layers > m->layers)
		return tw_errf(err, TW_ERR_INVALID,
			       "--set recompute_num_layers=%lld: more than the model's %lld layers",
			       (long long)sp.pin_recompute_layers, (long long)m->layers);
	if (npp == 0)
		return tw_errf(err, TW_ERR_INVALID,
			       "no pipeline degree fits: pp must divide model.layers=%lld%s and --gpus "
			       "%lld%s",
			       (long long)m->layers,
			       sp.framework == STRAT_MEGATRON ? " (or it + 2: the embedding and the "
								"loss counted)" : "",
			       (long long)gpus,
			       sp.pin_pp >= 0 ? " (and the pinned --set pp)" : "");

	/* context-parallel degrees (Megatron's ring attention; torchtitan's, PyTorch's
	 * context_parallel, under FSDP): 1, and from SEARCH_CP_MIN_SEQ tokens per sample the
	 * powers of two up to SEARCH_MAX_CP that cut a sample into 2 cp chunks (the
	 * load-balanced split); a pin keeps only itself. PyTorch's rotation runs no sliding
	 * window (core/strategy.c), so FSDP splits no windowed model's sequence */
	int64_t cps[8];
	int ncp = 0;
	int64_t seq = sp.seq > 0 ? sp.seq : m->seq_len;
	bool windowed = m->sliding_window > 0 && model_local_layers(m) > 0 && m->sliding_window < seq;
	bool cp_ok = sp.framework == STRAT_MEGATRON || (sp.framework == STRAT_FSDP && !windowed);
	if (sp.pin_cp <= 1)
		cps[ncp++] = 1;
	if (sp.pin_cp > 1) {
		if (!cp_ok || seq % (2 * sp.pin_cp) != 0)
			return tw_errf(err, TW_ERR_INVALID,
				       "--set cp=%lld: context parallelism is searched for --framework "
				       "megatron, and fsdp on models without sliding windows, with a "
				       "sequence (%lld tokens) divisible by 2 x cp",
				       (long long)sp.pin_cp, (long long)seq);
		cps[ncp++] = sp.pin_cp;
	} else if (sp.pin_cp < 0 && cp_ok && seq >= SEARCH_CP_MIN_SEQ) {
		for (int64_t c = 2; c <= SEARCH_MAX_CP; c *= 2)
			if (seq % (2 * c) == 0)
				cps[ncp++] = c;
	}

	/* micro-batch sizes per (tp, pp, cp): divisors of global_batch / dp */
	typedef int64_t mic_row[MAX_DIVS];
	mic_row *mics = TW_NEW_ARRAY(mic_row, (size_t)(ntp * npp * ncp));
	int *nmics = TW_NEW_ARRAY(int, (size_t)(ntp * npp * ncp));
	int64_t dps[MAX_DIVS];
	int ndps = 0;
	bool any_batch = false;
	for (int a = 0; a < ntp; a++)
		for (int b = 0; b < npp; b++)
		for (int q = 0; q < ncp; q++) {
			int64_t tp = tps[a], pp = pps[b], slot = (a * npp + b) * ncp + q;
			if (gpus % (tp * pp * cps[q]))
				continue;
			int64_t dp = gpus / (tp * pp * cps[q]);
			int i = 0;
			while (i < ndps && dps[i] != dp)
				i++;
			if (i == ndps && ndps < MAX_DIVS)
				dps[ndps++] = dp;
			if (sp.global_batch % dp)
				continue;
			int64_t d[MAX_DIVS];
			int nd = divisors(sp.global_batch / dp, d, MAX_DIVS);
			for (int k = 0; k < nd; k++)
				if (sp.pin_micro < 0 || sp.pin_micro == d[k])
					mics[slot][nmics[slot]++] = d[k];
			if (nmics[slot] > 0)
				any_batch = true;
		}
	if (!any_batch) {
		free(mics);
		free(nmics);
		char list[160] = "";
		size_t len = 0;
		for (int i = 0; i < ndps && len + 24 < sizeof(list); i++)
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%lld", i ? ", " : "",
						(long long)dps[i]);
		return tw_errf(err, TW_ERR_INVALID,
			       "--global-batch %lld is not divisible by the data-parallel size of any "
			       "candidate (dp in {%s})%s",
			       (long long)sp.global_batch, list,
			       sp.pin_micro >= 0 ? " times the pinned micro-batch" : "");
	}

	struct shared sh;
	memset(&sh, 0, sizeof(sh));
	sh.base = base;
	sh.sp = &sp;
	static const char *const rc_key[] = { "recompute_modules" };
	static const char *const ovl_key[] = { "overlap_moe_expert_parallel_comm" };
	sh.moe_rc = sp.framework == STRAT_MEGATRON && m->experts > 0 &&
		    !user_sets_any(&sp, rc_key, 1);
	/* Megatron refuses the combined 1F1B beside moe_shared_expert_overlap */
	const char *mso = user_set_value(&sp, "moe_shared_expert_overlap");
	sh.moe_ovl = sp.framework == STRAT_MEGATRON && m->experts > 0 &&
		     !user_sets_any(&sp, ovl_key, 1) && !(mso && !strcmp(mso, "true"));
	sh.res = res;
	pthread_mutex_init(&sh.mu, NULL);
	pthread_mutex_init(&sh.resolve_mu, NULL);
	struct search_cand *fit = NULL;
	size_t nfit = 0, fit_cap = 0;
	res->closest_short_bytes = INT64_MAX;

	/* pass 0: everything on the GPU; pass 1 (only if nothing fit): optimizer offload to CPU */
	enum tw_result rc = TW_OK;
	size_t sim_from = 0; /* fit[sim_from ..] are this pass's, not yet simulated */
	for (int pass = 0; pass < 2 && rc == TW_OK; pass++) {
		/* offload only when nothing fit: by the memory walk, or once simulated (every
		 * simulated timeline peaked over capacity) */
		if (pass == 1) {
			if (res->ntop > 0 || sp.framework != STRAT_DEEPSPEED)
				break;
			res->offload_tried = true;
		}
		double t_pass = now_s();
		size_t ntasks = 0, cap = 0;
		struct task *tasks = NULL;
		for (int a = 0; a < ntp; a++)
			for (int b = 0; b < npp; b++)
			for (int q = 0; q < ncp; q++) {
				int slot = (a * npp + b) * ncp + q;
				if (nmics[slot] == 0)
					continue;
				int64_t tp = tps[a], pp = pps[b], cp = cps[q];
				int zlo = pass == 1 ? 1 : 0, zhi = 3; /* offload needs ZeRO >= 1 */
				if (sp.framework == STRAT_MEGATRON)
					zhi = 1;
				else if (sp.framework == STRAT_DEEPSPEED && pp > 1)
					zhi = 1; /* ZeRO-2/3 are incompatible with DeepSpeed's pipeline */
				int64_t dp = gpus / (tp * pp * cp), eps[2 * MAX_DIVS], etps[2 * MAX_DIVS];
				int nep = ep_choices(&sp, m,
						     sp.framework == STRAT_MEGATRON ? dp * cp : dp, eps);
				for (int e = 0; e < nep; e++)
					etps[e] = 0;
				/* Megatron-Core MoE at tp > 1: the experts' TP at 1 too, their groups
				 * folded over tp x dp x cp (ep > 1); a pinned expert_tp alone */
				int64_t fet = sp.pin_etp > 0 ? sp.pin_etp : 1;
				bool fold = sp.framework == STRAT_MEGATRON && m->experts > 0 && fet != tp &&
					    (sp.pin_etp > 0 || tp > 1) && (tp * dp * cp) % fet == 0;
				if (sp.pin_etp > 0 && sp.pin_etp != tp)
					nep = 0;
				if (fold) {
					int64_t fe[MAX_DIVS];
					int nf = ep_choices(&sp, m, tp * dp * cp / fet, fe);
					for (int e = 0; e < nf; e++)
						if (fe[e] > 1)
							eps[nep] = fe[e], etps[nep++] = fet;
				}
				for (int e = 0; e < nep; e++) {
					for (int z = zlo; z <= zhi; z++)
					for (int var = 0; var < 3; var++) {
						if ((sp.pin_zero >= 0 && sp.pin_zero != z) ||
						    (sp.framework == STRAT_FSDP && z == 1))
							continue; /* FSDP shardings map to 0, 2, 3 */
						if (sp.framework == STRAT_DEEPSPEED && z == 3 && eps[e] > 1)
							continue; /* "MoE not supported with Stage 3" */
						/* ZeRO++ (1) and MiCS within a node (2) for DeepSpeed ZeRO-3
						 * across nodes, where DeepSpeed forms their groups (tp = cp =
						 * 1), without offload */
						if (var && (sp.framework != STRAT_DEEPSPEED || z != 3 || tp * cp > 1 ||
							    pass || gpus <= base->cluster.node.gpus))
							continue;
						TW_GROW(tasks, cap, ntasks + 1);
						struct task *t = &tasks[ntasks++];
						memset(t, 0, sizeof(*t));
						t->tp = tp;
						t->pp = pp;
						t->split_el = pp_el[b];
						t->dp = dp;
						t->ep = eps[e];
						t->etp = etps[e];
						t->cp = cp;
						t->zero = z;
						t->zeropp = var == 1;
						t->use_mics = var == 2;
						t->offload = pass ? STRAT_OFFLOAD_CPU : STRAT_OFFLOAD_NONE;
						t->mics = mics[slot];
						t->nm = nmics[slot];
					}
				}
			}
		sh.tasks = tasks;
		sh.ntasks = ntasks;
		sh.next_task = 0;
		run_workers(filter_worker, &sh, threads);
		for (size_t i = 0; i < ntasks; i++) {
			struct task *t = &tasks[i];
			res->candidates += t->candidates;
			res->rejected += t->rejected;
			if (!res->first_reject[0] && t->first_reject[0])
				memcpy(res->first_reject, t->first_reject,
				       sizeof(res->first_reject));
			res->skipped += t->skipped;
			res->duplicates += t->duplicates;
			if (t->closest_short < res->closest_short_bytes) {
				res->closest_short_bytes = t->closest_short;
				res->closest = t->closest;
			}
			for (size_t k = 0; k < t->nfit; k++) {
				TW_GROW(fit, fit_cap, nfit + 1);
				fit[nfit] = t->fit[k];
				fit[nfit].seq = (int64_t)nfit;
				nfit++;
			}
			free(t->fit);
		}
		free(tasks);
		res->filter_s += now_s() - t_pass;
		if (nfit > sim_from) { /* simulate this pass's fitting candidates in bound order */
			qsort(fit + sim_from, nfit - sim_from, sizeof(*fit), by_bound_seq);
			if (!res->top)
				res->top = TW_NEW_ARRAY(struct search_cand, (size_t)sp.top);
			int64_t before = res->simulated;
			sh.fit = fit + sim_from;
			sh.nfit = nfit - sim_from;
			sh.next_fit = 0;
			run_workers(sim_worker, &sh, threads);
			res->pruned += (int64_t)(nfit - sim_from) - (res->simulated - before);
			sim_from = nfit;
			rc = sh.rc;
			if (rc != TW_OK)
				tw_errf(err, rc, "%s", sh.err.msg);
		}
	}
	free(mics);
	free(nmics);
	res->fit = (int64_t)nfit;
	/* nothing fits: by the walk, or every one simulated peaked over capacity */
	res->any_fit = res->ntop > 0;
	pthread_mutex_destroy(&sh.mu);
	pthread_mutex_destroy(&sh.resolve_mu);
	res->wall_s = now_s() - t0;
	res->sim_s = res->wall_s - res->filter_s;
	res->configs_per_s = res->wall_s > 0 ? (double)res->candidates / res->wall_s : 0;
	free(fit);
	if (rc != TW_OK)
		search_result_release(res);
	return rc;
}

void search_result_release(struct search_result *res)
{
	free(res->top);
	res->top = NULL;
	res->ntop = 0;
}

