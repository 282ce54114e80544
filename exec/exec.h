/* exec — the executor: walks this rank's plan on real hardware through a backend (exec/backend.h:
 * "cuda" or "host") and gives a trace. One process per rank, launched by mpirun/srun, or a
 * single process without a launcher. Owner of this header: the exec module.
 *
 * The executor never includes profile/: the caller stores the trace. So that a failed run still
 * leaves what it traced in the store, the caller passes hooks (struct exec_hooks): `begin` runs
 * on rank 0 before the first step and returns a run id that every rank learns; `partial` runs on
 * a rank that fails (error or --timeout) with the events that rank traced so far, before the
 * process exits non-zero. */
#ifndef TW_EXEC_H
#define TW_EXEC_H

#include "../core/core.h"

struct exec_hooks {
	void *ctx;
	/* rank 0, once, after the plan was checked and before the first step: the run id, or -1
	 * with err filled (every rank then stops before the first step) */
	int64_t (*begin)(void *ctx, int64_t nranks, struct tw_err *err);
	/* a failing rank (may run on the watchdog thread): store t (this rank's events so far)
	 * under run_id, leaving the run marked incomplete */
	void (*partial)(void *ctx, int64_t run_id, const struct trace *t);
};

/* Fault injection for the failure-path tests: rank `rank` does `kind` when it reaches op `op`
 * of the last step (so that earlier timed steps are in the partial trace). */
enum exec_fault_kind { EXEC_FAULT_NONE = 0, EXEC_FAULT_EXIT /* _exit(1) */,
		       EXEC_FAULT_STALL /* sleep forever */, EXEC_FAULT_ERROR /* backend error */,
		       EXEC_FAULT_CORRUPT /* alter the op's received data before it is checked */ };
struct exec_fault {
	enum exec_fault_kind kind;
	int64_t rank;
	int64_t op;
};

struct exec_options {
	const char *backend;    /* "cuda" | "host" */
	int steps;              /* timed steps */
	int warmup;             /* untimed steps before them */
	double timeout_s;       /* abort a step stalled longer than this, 0: no limit */
	bool verify;            /* check collective results (always on for host) */
	struct exec_hooks hooks;
	struct exec_fault fault;
	enum tw_log_level log_level;
};

/* What this rank measured, next to what the memory model predicted for its plan. On rank 0,
 * rank_peak/rank_pred hold every rank's GPU-device peak (gathered), nranks entries. */
struct exec_result {
	int64_t rank, nranks;
	int64_t run_id;                 /* from hooks.begin, -1: none */
	bool report;                    /* this rank prints the result / the error */
	struct plan_mem pred;           /* plan_memory of this rank's plan */
	/* measured from the ALLOC/FREE the backend actually performed */
	int64_t peak[PLAN_NUM_DEVICES];
	int64_t at_peak[PLAN_NUM_DEVICES][PLAN_NUM_MEM_CATS];
	int64_t max_cat[PLAN_NUM_DEVICES][PLAN_NUM_MEM_CATS];
	int64_t device_used_bytes;      /* cuda: device memory in use at the peak (driver's view) */
	int64_t scratch_bytes;          /* operand/staging buffers outside the plan (docs/executor.md) */
	int64_t colls_verified;         /* collectives and p2p whose results were checked */
	int64_t step_ns_mean;           /* timed steps, this rank */
	int64_t *rank_peak, *rank_pred; /* rank 0: GPU-device peak per rank (measured, predicted) */
	bool mem_match;                 /* rank 0: every rank's measured peaks == prediction */
};
void exec_result_release(struct exec_result *r);

/* Run the job on this process's rank. On rank 0, out receives every rank's events (gathered);
 * on other ranks, its own. MPI is initialised and finalised inside. On failure err names the
 * rank, the op and the call; res->report says whether this rank should print it. */
enum tw_result exec_run(const struct job *j, const struct exec_options *opt, struct trace *out,
			struct exec_result *res, struct tw_err *err);

/* Which backends this build has, comma-separated ("host", "host,cuda"). */
const char *exec_features(void);


/* ==== calibration (twin calibrate) — appended by the calibration module; implementation
 * exec/calib.c (host) and exec/cuda/calib_cuda.c (cuda, in libtwin_cuda.so); what is measured and
 * which cluster fields it replaces: docs/calibrate.md. ======================================= */
#define CALIB_MAX_POINTS 8
struct calib_point {
	int64_t n;                   /* square GEMM n x n x n */
	double flops;                /* 2 n^3 */
	double tflops;               /* best measured rate */
};
struct calib_result {
	char backend[8], host[64], date[32]; /* date: UTC, ISO 8601 to the minute */
	int ranks;                   /* host: MPI ranks measuring together; cuda: GPUs */
	bool report;                 /* this process writes the file (rank 0) */
	double peak_tflops[TW_NUM_DTYPES]; /* best GEMM rate per dtype, 0: not measured */
	enum tw_dtype gemm_dtype;    /* the sweep below (host: fp32; cuda: bf16) */
	int npoints;
	struct calib_point gemm[CALIB_MAX_POINTS];
	double cpu_tflops;           /* host: sgemm on all cores */
	double mem_GBps;             /* host: one core's streaming copy (mean over ranks);
					cuda: device-to-device copy; read + written bytes / s */
	double host_mem_GBps;        /* all cores' streaming copy, read + written bytes / s */
	int host_threads;
	double h2d_GBps, d2h_GBps;   /* cuda: pinned copies */
	double allreduce_busbw_GBps; /* 0: not measured (one rank / one GPU) */
	double allreduce_bytes;
};
struct calib_options {
	const char *backend;         /* "host" | "cuda" */
	bool quick;                  /* a few seconds: smaller sizes, fewer repetitions */
};
/* Measure this machine. Under mpirun every rank measures at once (so per-rank figures are a
 * rank's share) and rank 0 gets the result with report set. */
enum tw_result calib_measure(const struct calib_options *o, struct calib_result *r,
			     struct tw_err *err);
/* Replace the measured fields of a cluster file tree (the file's schema, notes kept) and note
 * each one "measured by twin calibrate on HOST at DATE". base is the loaded BASE. */
enum tw_result calib_apply(const struct calib_result *r, const struct cluster *base,
			   struct cJSON *root, struct tw_err *err);
#ifdef TWIN_HAVE_CUDA
/* in libtwin_cuda.so; twin reaches it through exec_cuda_load (exec/backend.h) */
enum tw_result calib_cuda_measure(const struct calib_options *o, struct calib_result *r,
				  struct tw_err *err);
#endif

#endif
