/* profile — the store (SQLite, schema in profile/SCHEMA.md), the one analysis that reads
 * every trace (simulated, executed, imported), importers, exporters and compare.
 *
 * Owner of this header: the profile module. Other modules use only what is declared here. */
#ifndef TW_PROFILE_H
#define TW_PROFILE_H

#include "../core/core.h"

/* ---- analysis ---------------------------------------------------------------------------- */

/* Per-collective-type statistics. */
struct prof_coll_stats {
	int64_t count;
	int64_t bytes;          /* sum of message sizes (nccl-tests "size") */
	int64_t time_ns;        /* sum of durations */
	int64_t exposed_ns;     /* part with no compute kernel running on that GPU */
	double busbw_GBps;      /* achieved bus bandwidth (nccl-tests definition), 0: unknown */
	double algbw_GBps;
};

/* Averages over ranks and steps of one run: what a step looks like. */
struct prof_analysis {
	int64_t nranks, nsteps;
	int64_t step_ns;                       /* mean step wall time */
	int64_t cat_ns[TRACE_NUM_CATS];        /* busy time per category per step (union per rank) */
	struct prof_coll_stats coll[TRACE_NUM_CATS]; /* filled for comm categories */
	int64_t compute_ns;                    /* union of compute kernels */
	int64_t comm_ns;                       /* union of comm kernels */
	int64_t exposed_comm_ns;               /* comm while no compute runs */
	int64_t overlapped_comm_ns;
	int64_t copy_ns, exposed_copy_ns;
	int64_t idle_ns;                       /* compute stream idle within the step */
	int64_t stall_comm_ns, stall_copy_ns, stall_host_ns; /* idle split (HTA) */
	int64_t bubble_ns;                     /* pipeline bubble (idle before first / after last fwd-bwd) */
	int64_t optimizer_ns;
	double model_flops, hw_flops;          /* per rank per step, when known */
	int64_t peak_mem_bytes;                /* max over ranks, when known */
	int64_t straggler_rank;                /* rank arriving last at collectives, -1: none */
	int64_t straggler_ns;                  /* its mean lateness */
};

enum tw_result prof_analyze(const struct trace *t, struct prof_analysis *out, struct tw_err *err);
struct cJSON *prof_analysis_to_json(const struct prof_analysis *a);

/* nccl-tests bus bandwidth factor for a collective over n ranks. */
double prof_busbw_factor(enum trace_cat coll, int64_t n);

/* ---- store -------------------------------------------------------------------------------- */

struct prof_db;

struct prof_run_meta {
	enum trace_kind kind;
	const char *name;       /* user label, may be NULL */
	const char *job_json;   /* the job, may be NULL for imports */
	const char *backend;    /* "sim", "host", "cuda", "nsys", "kineto" */
	int64_t nranks;
};

enum tw_result prof_db_open(const char *path, struct prof_db **out, struct tw_err *err);
void prof_db_close(struct prof_db *db);
/* Store a whole trace as one run, in one transaction (complete = 1). */
enum tw_result prof_store_trace(struct prof_db *db, const struct prof_run_meta *meta,
				const struct trace *t, int64_t *run_id, struct tw_err *err);
/* Load a run's trace (RUN: id or name). */
enum tw_result prof_load_trace(struct prof_db *db, const char *run, struct trace *out,
			       int64_t *run_id, struct tw_err *err);

#endif
