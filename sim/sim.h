/* sim — the discrete-event simulator: takes a job (and builds plans with core/plan), gives a
 * trace. No I/O of its own. Owner of this header: the sim module. */
#ifndef TW_SIM_H
#define TW_SIM_H

#include "../core/core.h"

struct sim_options {
	bool full;              /* every rank, not one representative per role */
	int64_t max_events;     /* stop with TW_ERR_LIMIT beyond this many events (0: default) */
};

struct sim_stats {
	int64_t events;         /* events processed */
	int64_t ranks_simulated;
	int64_t wall_ns;        /* host time spent simulating */
	int64_t step_ns;        /* predicted step time */
};

/* Simulate one optimizer step; out is initialised by sim_run (release with trace_release).
 * In symmetric mode the trace holds the representative ranks, with their real rank ids. */
enum tw_result sim_run(const struct job *j, const struct sim_options *opt, struct trace *out,
		       struct sim_stats *stats, struct tw_err *err);

#endif
