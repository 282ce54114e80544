/* sim — the discrete-event simulator: takes a job (and builds plans with core/plan), gives a
 * trace. No I/O of its own. Owner of this header: the sim module. Model: docs/simulator.md. */
#ifndef TW_SIM_H
#define TW_SIM_H

#include "../core/core.h"

struct sim_options {
	bool full;              /* every rank, not one representative per role */
	int64_t max_events;     /* stop with TW_ERR_LIMIT beyond this many events (0: default) */
	bool trace_all;         /* full mode: record every rank's events (default: the
				   representatives and straggler GPUs, to bound memory) */
};

struct sim_stats {
	int64_t events;         /* events processed */
	int64_t ranks_simulated;
	int64_t wall_ns;        /* host time spent simulating */
	int64_t step_ns;        /* predicted step time */
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

/* One collective on its own, as nccl-tests runs it: `op` all_reduce | all_gather |
 * reduce_scatter | all_to_all | broadcast | sendrecv, S the nccl-tests size in bytes, over
 * `ranks` GPUs of the cluster filling whole nodes (or fewer on one node); algo NULL: chosen as
 * NCCL's tuner does, else "ring" | "tree" | "nvls". */
struct sim_coll_result {
	double time_us, algbw_GBps, busbw_GBps;
	char algo[16], proto[16];
};
enum tw_result sim_collective(const struct cluster *c, const char *op, double S, int64_t ranks,
			      const char *algo, struct sim_coll_result *out, struct tw_err *err);

#endif
