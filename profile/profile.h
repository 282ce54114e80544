/* profile — the store (SQLite, schema in profile/SCHEMA.md), the one analysis that reads
 * every trace (simulated, executed, imported), importers, exporters and compare.
 *
 * Owner of this header: the profile module. Other modules use only what is declared here. */
#ifndef TW_PROFILE_H
#define TW_PROFILE_H

#include <stdio.h>

#include "../core/core.h"

/* ---- analysis ---------------------------------------------------------------------------- */

/* Per-collective-type statistics. */
struct prof_coll_stats {
	int64_t count;          /* rounded mean; mean_count keeps the fraction */
	double mean_count;
	int64_t bytes;          /* sum of message sizes (the NCCL count argument x type size) */
	int64_t time_ns;        /* sum of durations */
	int64_t exposed_ns;     /* part with no compute kernel running on that GPU */
	double busbw_GBps;      /* achieved bus bandwidth (nccl-tests definition), 0: unknown */
	double algbw_GBps;
	/* the sums bandwidths come from: events whose size (and group size) are known */
	double alg_bytes, bus_bytes;
	int64_t bw_time_ns;
	/* time by the NCCL algorithm and protocol the events carry (trace flags; [0][0]:
	 * unknown), summed over ranks and steps */
	int64_t algo_ns[TRACE_NUM_ALGOS][TRACE_NUM_PROTOS];
};

/* The (algorithm, protocol) that took most of a collective type's time and its share of the
 * time whose algorithm is known; false when no event says. */
bool prof_coll_algo(const struct prof_coll_stats *s, enum trace_algo *algo,
		    enum trace_proto *proto, double *share);

/* Averages over ranks and steps of one run: what a step looks like. All times are ns per rank
 * per step; "on that GPU" means on that rank. Definitions: docs/profiler.md. */
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
	int64_t busy_ns;                       /* union of all GPU work (compute, comm, copies) */
	int64_t straggler_colls;               /* collectives matched across ranks */
};

/* One rank's step: the rows prof_analyze averages. */
struct prof_step {
	int64_t rank, step;
	int64_t start_ns, end_ns;              /* the step window on that rank's clock */
	struct prof_analysis a;                /* nranks = nsteps = 1 */
};

enum tw_result prof_analyze(const struct trace *t, struct prof_analysis *out, struct tw_err *err);
/* Per rank and step (sorted by rank, step); caller frees *rows. */
enum tw_result prof_analyze_steps(const struct trace *t, struct prof_step **rows, size_t *nrows,
				  struct tw_err *err);
struct cJSON *prof_analysis_to_json(const struct prof_analysis *a);

/* nccl-tests bus bandwidth factor for a collective over n ranks. */
double prof_busbw_factor(enum trace_cat coll, int64_t n);
/* nccl-tests algorithm bytes of one collective of message size `bytes` over n ranks
 * (all-gather and reduce-scatter move n x the per-rank count); -1 when n is needed but 0. */
double prof_alg_bytes(enum trace_cat coll, int64_t bytes, int64_t n);

/* Kernel and activity names to categories (NCCL names of every version, memcpy names of
 * Kineto and nsys, GEMM and attention kernels). Returns false when name is not an NCCL
 * kernel / not a known copy. */
bool prof_classify_nccl(const char *name, enum trace_cat *out);
/* An NCCL rooted Reduce kernel (not ReduceScatter): TRACE_BROADCAST with TRACE_F_REDUCE. */
bool prof_nccl_is_reduce(const char *name);
enum trace_cat prof_classify_kernel(const char *name);
/* Step number from a marker name: "step 3", "ProfilerStep#3" -> 3; false otherwise. */
bool prof_step_marker(const char *name, int64_t *step);

/* ---- compare ------------------------------------------------------------------------------ */

/* A beside B per category and per collective type, as a table (text) or JSON. */
struct cJSON *prof_compare_json(const struct prof_analysis *a, const struct prof_analysis *b,
				const char *name_a, const char *name_b);
void prof_compare_print(FILE *f, const struct prof_analysis *a, const struct prof_analysis *b,
			const char *name_a, const char *name_b);
void prof_analysis_print(FILE *f, const struct prof_analysis *a);

/* ---- store -------------------------------------------------------------------------------- */

struct prof_db;

/* Current schema version (profile/SCHEMA.md). Older databases are migrated when a writer
 * opens them (readers read them as they are), newer ones refused. */
#define PROF_SCHEMA_VERSION 2

/* Ranks a run may have: importers refuse more, readers refuse stored events beyond the run's
 * ranks (per-rank state is allocated for every rank). */
#define PROF_MAX_RANKS (1 << 20)
/* Event times (ns) are in [0, PROF_MAX_TIME_NS]: importers refuse the rest, so that sums and
 * differences of times never overflow int64 (about the year 2096 as Unix-epoch ns). */
#define PROF_MAX_TIME_NS 4000000000000000000LL

struct prof_run_meta {
	enum trace_kind kind;
	const char *name;       /* user label, may be NULL */
	const char *job_json;   /* the job, may be NULL for imports */
	const char *backend;    /* "sim", "host", "cuda", "nsys", "kineto" */
	int64_t nranks;
	const char *source;     /* imported file(s) / command line, may be NULL */
};

/* Open a store for writing, creating it if absent (or initialising an empty file): WAL mode,
 * busy timeout, schema checked / created / migrated. A file that is not a twin database (or
 * has a newer schema) is refused before anything in it changes; so are a directory, a FIFO
 * or a device, and a file this user cannot write (TW_ERR_INVALID). */
enum tw_result prof_db_open(const char *path, struct prof_db **out, struct tw_err *err);
/* Open a store for reading: read-only, nothing in the file changes (no WAL switch, no
 * migration; older layouts are read as they are), no write lock is taken, so a reader never
 * waits on a writer. A missing or empty file, or one that is not a twin store, is an error. */
enum tw_result prof_db_open_existing(const char *path, struct prof_db **out, struct tw_err *err);
void prof_db_close(struct prof_db *db);
/* The store's SQLite handle, for read-only queries of other modules (reports' stored sweeps);
 * the store keeps ownership. */
struct sqlite3;
struct sqlite3 *prof_db_handle(struct prof_db *db);
/* Close a store after the caller's writes failed: a file this prof_db_open created is removed
 * again unless it holds a run (so a failed command leaves no empty store behind). */
void prof_db_discard(struct prof_db *db);
/* A run name's rules (err names `what`, e.g. "--name"): not empty, UTF-8, no control
 * characters (names go into reports, gnuplot scripts and terminals), not a number (RUN
 * arguments that are numbers are run ids). prof_run_begin applies them to meta->name. */
enum tw_result prof_run_name_check(const char *name, const char *what, struct tw_err *err);
/* A stored name made safe to print: control characters become '?' (names stored before the
 * rules above). */
void prof_name_display(char *dst, size_t len, const char *src);
/* Store a whole trace as one run: the run row is committed first, marked incomplete; the
 * events, memory samples and derived step rows follow in one transaction that marks the run
 * complete at commit. A writer killed in between leaves a valid database with an incomplete,
 * empty run. */
enum tw_result prof_store_trace(struct prof_db *db, const struct prof_run_meta *meta,
				const struct trace *t, int64_t *run_id, struct tw_err *err);
/* The same in pieces, for writers that flush as they go (the injection library): begin
 * (commits an incomplete run), append (one transaction per call), finish (marks complete and
 * records the dropped-record count). */
enum tw_result prof_run_begin(struct prof_db *db, const struct prof_run_meta *meta,
			      int64_t *run_id, struct tw_err *err);
enum tw_result prof_run_append(struct prof_db *db, int64_t run_id, const struct trace *t,
			       struct tw_err *err);
enum tw_result prof_run_finish(struct prof_db *db, int64_t run_id, int64_t dropped,
			       struct tw_err *err);
/* Load a run's trace (RUN: id or name; a name means its newest run). */
enum tw_result prof_load_trace(struct prof_db *db, const char *run, struct trace *out,
			       int64_t *run_id, struct tw_err *err);

struct prof_run_info {
	int64_t id;
	enum trace_kind kind;
	char name[128], backend[32], host[128], created[32], tool_version[32];
	int64_t nranks;  /* ranks of the job */
	int64_t traced;  /* ranks with events stored (a symmetric simulation keeps one per role) */
	int64_t nevents, dropped;
	bool complete;
};
/* All runs, oldest first; caller frees *runs. */
enum tw_result prof_list_runs(struct prof_db *db, struct prof_run_info **runs, size_t *n,
			      struct tw_err *err);
enum tw_result prof_run_info(struct prof_db *db, const char *run, struct prof_run_info *out,
			     struct tw_err *err);
const char *prof_kind_name(enum trace_kind k); /* "sim", "exec", "import" */

/* ---- import / export ------------------------------------------------------------------------ */

/* An `nsys export --type sqlite` file into t (appends; rank given by the caller, or -1 to
 * take it from the file order). */
enum tw_result prof_import_nsys(const char *path, int64_t rank, struct trace *t,
				struct tw_err *err);
/* A PyTorch profiler (Kineto) JSON trace into t (appends; rank from distributedInfo.rank,
 * else `rank`). */
enum tw_result prof_import_kineto(const char *path, int64_t rank, struct trace *t,
				  struct tw_err *err);
/* Chrome / Perfetto trace JSON with Kineto's fields (HTA reads it). */
enum tw_result prof_export_chrome(const struct trace *t, FILE *f, struct tw_err *err);
enum tw_result prof_export_chrome_file(const struct trace *t, const char *path,
				       struct tw_err *err);
/* The same written to a temporary file beside path, left open in o for the caller to rename
 * into place once its other outputs are done (tw_out_close(o, path, ok, err)); on failure
 * nothing is left and err names path. */
enum tw_result prof_export_chrome_begin(const struct trace *t, const char *path,
					struct tw_out *o, struct tw_err *err);

#endif
