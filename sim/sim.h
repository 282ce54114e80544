/* sim — the discrete-event simulator: takes a job (and builds plans with core/plan), gives a
 * trace. No I/O of its own. Owner of this header: the sim module. Model: docs/simulator.md. */
#ifndef TW_SIM_H
#define TW_SIM_H

#include "../core/core.h"

/* Full mode keeps per-rank state (streams, dependency counts, event-queue entries): jobs
 * beyond this many ranks are refused in full mode (docs/limits.md). */
#define SIM_MAX_FULL_RANKS 65536

struct sim_options {
	bool full;              /* every rank, not one representative per role (stragglers in
				   the cluster imply it) */
	int64_t max_events;     /* stop with TW_ERR_LIMIT beyond this many events (0: default) */
	bool trace_all;         /* full mode: record every rank's events (default: the
				   representatives and straggler GPUs, to bound memory) */
};

struct sim_stats {
	int64_t events;         /* events processed */
	int64_t ranks_simulated;
	bool full;              /* ran in full mode (asked, or stragglers given) */
	int64_t wall_ns;        /* host time spent simulating */
	int64_t step_ns;        /* predicted step time */
	bool nccl_unrunnable;   /* failed: NCCL_ALGO / NCCL_PROTO left a collective nothing */
	double hw_flops;        /* FLOPs a GPU executes per step, recompute included, the job's
				 * mean (each role's plan weighted by its ranks); 0: not known */
};

/* Simulate one optimizer step; out is initialised by sim_run (release with trace_release).
 * In symmetric mode the trace holds the representative ranks, with their real rank ids.
 * Events are grouped by rank in completion order (trace_sort gives (rank, start, end)); each
 * recorded rank has a "step 0" marker over the whole step; peak_mem has every rank. */
enum tw_result sim_run(const struct job *j, const struct sim_options *opt, struct trace *out,
		       struct sim_stats *stats, struct tw_err *err);

/* Where plans come from: sim_run uses plan_rank / plan_roles; tests hand-build plans. */
struct sim_plan_source {
	void *ctx;
	enum tw_result (*build)(void *ctx, const struct job *j, int64_t rank, struct plan *out,
				struct tw_err *err);
	int64_t (*roles)(void *ctx, const struct job *j, int64_t *reps, int64_t *weights, int64_t n);
};
enum tw_result sim_run_plans(const struct job *j, const struct sim_options *opt,
			     const struct sim_plan_source *src, struct trace *out,
			     struct sim_stats *stats, struct tw_err *err);

/* One collective on its own, as a benchmark times it: `op` all_reduce | all_gather |
 * reduce_scatter | all_to_all | broadcast | sendrecv, S the nccl-tests size in bytes, over
 * `ranks` GPUs of the cluster filling whole nodes (or fewer on one node); algo NULL: chosen as
 * NCCL's tuner does, else "ring" | "tree" | "nvls" | "pat" | "nvlstree". host_us (>= 0) is host time inside the
 * timed window: 0 for nccl-tests, whose back-to-back launches hide it; a benchmark that times
 * one blocking call on an idle GPU (all_reduce_bench.py: barrier, event, call, event) also
 * measures the call's host dispatch. time_us includes it and the bandwidths follow. env may
 * be NULL. */
struct sim_coll_result {
	double time_us, algbw_GBps, busbw_GBps;
	double nccl_us; /* the collective's own time, without host_us */
	char algo[16], proto[16];
};
/* NCCL_ALGO / NCCL_PROTO as the benchmark's environment set them, strat_nccl_list's bits (all
 * 0: NCCL's defaults). A collective they leave nothing for is refused, as NCCL refuses it;
 * send/recv and all-to-all do not read them. */
struct sim_nccl_env {
	unsigned no_algos, named_algos, no_protos, named_protos;
};
enum tw_result sim_collective(const struct cluster *c, const char *op, double S, int64_t ranks,
			      const char *algo, double host_us, const struct sim_nccl_env *env,
			      struct sim_coll_result *out, struct tw_err *err);

/* ==== search (twin plan) — appended by the search module; implementation sim/search.c,
 * model and limits in docs/search.md. ==================================================== */

/* What to search: the job's model and cluster come from `base` (its strategy is ignored);
 * candidates vary tp, pp, micro-batch, ZeRO stage (or Megatron distributed optimizer / FSDP
 * sharding), Megatron's interleaved schedule (vp) and context parallelism (cp, long sequences),
 * expert parallelism (ep, MoE models), recompute (Megatron: also full recompute of half of each
 * model chunk's layers), and optimizer offload when nothing fits without it. A pin >= 0 fixes that dimension. `sets` are the user's strategy --set PATH=VALUE, applied after the
 * candidate's own (cluster paths in it are skipped: they are in base). */
struct search_space {
	enum strat_framework framework;
	int64_t global_batch;        /* samples per optimizer step */
	int64_t seq;                 /* tokens per sample; 0: the model's */
	const char *const *sets;
	int nsets;
	const char *strategies_dir;  /* for strategy_resolve (presets); may be NULL */
	int64_t pin_tp, pin_pp, pin_micro, pin_zero, pin_recompute, pin_vp, pin_ep, pin_cp;
	                             /* -1: search */
	int64_t pin_recompute_layers; /* recompute_num_layers=N pins full recompute of N layers */
	int64_t pin_etp;             /* expert_tp=K (megatron MoE); -1: tp, and 1 as well
					(MoE parallel folding) where tp > 1 */
	int top;                     /* candidates kept, best first (default 5) */
	bool exhaustive;             /* simulate every fitting candidate (no bound pruning) */
	int threads;                 /* worker threads, 0: one per online CPU (at most
					SEARCH_MAX_THREADS); the result does not depend on it */
};
#define SEARCH_MAX_THREADS 64
void search_space_init(struct search_space *s);

/* the most --set assignments a candidate needs: a Megatron MoE candidate names tp, framework,
 * pp, the batch (2), the distributed optimizer, SP, vp and the schedule, the pipeline split
 * (2), the precision, the experts' kernels (2), ep, expert_tp, cp, cp_kind, recompute and its
 * modules or layers, the all-to-all overlap, the model code and seq_len: 23 */
#define SEARCH_MAX_SETS 28
/* the selective recompute_modules the search tries on Megatron MoE models: the cheap ones, the
 * experts' activation function and the separate norms (elementwise work again) */
#define SEARCH_RC_MOE_MODULES (STRAT_RC_CORE_ATTN | STRAT_RC_MOE_ACT | STRAT_RC_LAYERNORM)
#define SEARCH_MAX_VP 8        /* model chunks per stage tried by the interleaved schedule */
#define SEARCH_CP_MIN_SEQ 8192 /* tokens per sample from which context parallelism is tried */
#define SEARCH_MAX_CP 8        /* largest context-parallel degree tried (unless pinned) */
struct search_cand {
	int64_t tp, pp, dp, micro, grad_accum;
	int64_t vp;                  /* model chunks per stage: 1 plain 1F1B, > 1 interleaved */
	int64_t ep;                  /* expert parallel degree (within dp), 1 for dense models */
	int64_t etp;                 /* megatron MoE: expert_tp when not tp (the expert groups
					folded over tp x dp x cp); 0: tp */
	int64_t cp;                  /* context parallel degree (Megatron ring attention) */
	int zero;                    /* deepspeed: ZeRO stage; megatron: 1 with the distributed
					optimizer; fsdp: 3 FULL_SHARD, 2 SHARD_GRAD_OP, 0 NO_SHARD */
	bool zeropp;                 /* deepspeed ZeRO-3 with ZeRO++: hpZ over a node's ranks,
					int8 weight gathers, int4 gradient all-to-alls */
	bool mics;                   /* deepspeed ZeRO-3 as MiCS, sharded within a node */
	bool split_el;               /* megatron: the embedding and the loss count as a layer
					each of the pipeline split (pp divides layers + 2, not
					layers: Llama 3.1 405B's 126 on pp 16) */
	enum strat_recompute recompute;
	int64_t recompute_layers;    /* full recompute of the first N layers of each model chunk
					(Megatron's block method); 0: every layer */
	unsigned rc_modules;         /* megatron MoE, selective: SEARCH_RC_MOE_MODULES (shown
					sel:moe), 0: the attention core alone */
	enum strat_offload offload;  /* optimizer offload */
	bool moe_overlap;            /* megatron MoE: overlap_moe_expert_parallel_comm (the
					combined 1F1B) */
	bool sequence_parallel;
	int64_t peak_bytes;          /* worst role: plan_memory gpu_total */
	int64_t capacity_bytes;      /* gpu.memory_gib */
	int64_t bound_ns;            /* lower bound: busiest role's compute-stream time */
	int64_t step_ns;             /* simulated step time, 0: not simulated */
	int64_t seq;                 /* enumeration order among the fitting: breaks ties */
	double tokens_s, tokens_s_gpu, mfu;
	int64_t short_bytes;         /* memory missing on the worst role: GPU bytes beyond
					capacity, or when the GPU fits, host bytes beyond the
					node's share per GPU (offload); <= 0: fits */
	int64_t host_short_bytes;    /* host memory missing on the worst role for it (<= 0:
					none), even where the GPU is short too */
	char verdict[160];           /* scratch: the last role's verdict */
	char worst_verdict[160];     /* plan_mem_fits verdict of the worst role (or host's) */
	/* the strategy --set list that reproduces it (strategy_resolve input) */
	int nsets;
	char sets[SEARCH_MAX_SETS][64];
};

struct search_result {
	struct search_cand *top;     /* best first, ntop <= space.top */
	int ntop;
	int64_t candidates;          /* enumerated */
	int64_t rejected;            /* refused by the strategy resolver */
	char first_reject[200];      /* its reason for the first one (in task order) */
	int64_t skipped;             /* not built: a smaller micro-batch already did not fit */
	int64_t duplicates;          /* selective recompute identical to none (nothing to redo) */
	int64_t fit, simulated, pruned; /* pruned: bound above the top-K simulated times */
	int64_t over;                /* fit by plan_memory's op-order walk, but the simulated
				      * timeline (prefetches in flight) peaks over capacity */
	int64_t unrunnable;          /* NCCL_ALGO / NCCL_PROTO leave one of its collectives nothing */
	char first_unrunnable[400];  /* why, for the first one */
	double wall_s, configs_per_s; /* search time; candidates / wall */
	double filter_s, sim_s;      /* of which: enumeration and memory filter; simulation */
	int threads;                 /* worker threads used */
	bool offload_tried;          /* nothing fit on GPU, so optimizer offload was searched */
	/* when nothing fits: the candidate with the smallest shortfall */
	bool any_fit;
	struct search_cand closest;
	int64_t closest_short_bytes;
};

/* Enumerate, filter by memory (plan_memory + plan_mem_fits on every role), simulate the fitting
 * ones (symmetric sim_run) and rank by step time. Nothing fitting is not an error here
 * (res->any_fit false, res->closest filled); bad inputs are (global batch not divisible, ...). */
enum tw_result search_run(const struct job *base, const struct search_space *sp,
			  struct search_result *res, struct tw_err *err);
/* The resolved job of a candidate (same code path as the search). */
enum tw_result search_job(const struct job *base, const struct search_space *sp,
			  const struct search_cand *c, struct job *out, struct tw_err *err);
void search_result_release(struct search_result *res);
/* "zero 3", "distopt", "FULL_SHARD", ... for printing */
const char *search_shard_name(enum strat_framework f, int zero);
/* The candidate's sharding as printed: search_shard_name, "zero 3++" with ZeRO++, "mics"
 * for MiCS. */
const char *search_cand_shard(enum strat_framework f, const struct search_cand *c);

#endif
