/* exec — the executor: walks this rank's plan on real hardware through a backend (exec/backend.h:
 * "cuda" or "host") and gives a trace. Owner of this header: the exec module. */
#ifndef TW_EXEC_H
#define TW_EXEC_H

#include "../core/core.h"

struct exec_options {
	const char *backend;    /* "cuda" | "host" */
	int steps;              /* timed steps */
	int warmup;             /* untimed steps before them */
	double timeout_s;       /* abort a stalled step after this long, 0: no limit */
	bool verify;            /* check collective results */
};

/* Run the job on this process's rank (from MPI, or rank 0 of 1 without a launcher).
 * Each rank fills its own part of out (trace events of its rank). */
enum tw_result exec_run(const struct job *j, const struct exec_options *opt, struct trace *out,
			int64_t *my_rank, struct tw_err *err);

/* Which backends this build has, comma-separated. */
const char *exec_features(void);

#endif
