/* reports — sweeps' result tables and the pages of `twin report`: a directory with a markdown
 * and an HTML page, data files (.dat/.csv), gnuplot scripts (.gp) and the charts gnuplot draws
 * from them. Uses core/ and profile/ only: the simulator is wired in by cli/ (cmd_sweep.c,
 * cmd_report.c), which fills the sweep's points. Formats and formulas: docs/reports.md.
 *
 * Owner of this header: the reports module. */
#ifndef TW_REPORTS_H
#define TW_REPORTS_H

#include <stdio.h>

#include "../core/core.h"
#include "../profile/profile.h"

/* ---- sweeps --------------------------------------------------------------------------------- */

#define RPT_MAX_VARY 4        /* --vary options in one sweep */
#define RPT_MAX_VALUES 64     /* values of one --vary */
#define RPT_MAX_POINTS 256    /* points of the cross product */

/* One --vary PATH=V1,V2,...: PATH is "gpus" (the --gpus count) or a --set path. */
struct rpt_vary {
	char path[128];
	char *values[RPT_MAX_VALUES]; /* point into buf */
	int nvalues;
	char *buf;
};

/* One point of a sweep: the values of each --vary, and what the simulator predicted (or
 * why the point is invalid). Times in s, memory in bytes, rates per s. */
struct rpt_point {
	const char *value[RPT_MAX_VARY]; /* one per --vary, into the sweep's varies */
	bool ok;
	char reason[512];                /* !ok: the one-line error of that point */
	int64_t gpus;
	double step_s, tokens_s, tokens_s_gpu;
	double tflops_gpu;               /* model TFLOP/s per GPU (no recompute) */
	double mfu;                      /* tflops_gpu / the GPU's dense peak */
	double exposed_comm_s;
	double peak_mem_bytes, capacity_bytes;
	bool fits;                       /* peak (with context, fragmentation) <= capacity */
	struct prof_analysis a;          /* the predicted step's analysis */
	int64_t run_id;                  /* stored run, -1: not stored */
};

struct rpt_sweep {
	struct rpt_vary vary[RPT_MAX_VARY];
	int nvary;
	struct rpt_point *pts;
	size_t npts;
};

/* Parse "PATH=V1,V2,..." (values non-empty, distinct; gpus values positive integers) and
 * add it to s. Errors name the option and the rule. */
enum tw_result rpt_sweep_add_vary(struct rpt_sweep *s, const char *arg, struct tw_err *err);
/* Lay out the cross product (first --vary slowest) in s->pts, every point !ok until filled. */
enum tw_result rpt_sweep_expand(struct rpt_sweep *s, struct tw_err *err);
/* "PATH=V" of point p for vary k into buf; the label "P1=V1,P2=V2" of a point. */
void rpt_point_label(const struct rpt_sweep *s, const struct rpt_point *p, char *buf, size_t len);
/* Fill the derived fields of a point from its analysis and job facts. */
void rpt_point_fill(struct rpt_point *p, const struct prof_analysis *a, int64_t gpus,
		    int64_t tokens_per_step, double model_flops_per_step, double peak_tflops,
		    double capacity_bytes);
/* A sweep from stored runs (twin sweep --db, twin report scaling|whatif --db): the complete
 * simulated runs named LABEL/P1=V1[,P2=V2...], the newest run per point; label NULL: the
 * label of the newest stored sweep run. Each point is analysed from its trace; tokens, GPUs,
 * FLOPs, peak and capacity come from the run's stored job (profile/SCHEMA.md, runs.job_json).
 * label_out (may be NULL) gets the label used. */
enum tw_result rpt_sweep_from_store(const char *db_path, const char *label, struct rpt_sweep *s,
				    char *label_out, size_t label_len, struct tw_err *err);
void rpt_sweep_print(FILE *f, const struct rpt_sweep *s);
struct cJSON *rpt_sweep_json(const struct rpt_sweep *s);
void rpt_sweep_release(struct rpt_sweep *s);

/* ---- report pages ---------------------------------------------------------------------------- */

struct rpt_page;

/* Start a report: a fresh temporary directory next to dir. dir must not exist, be empty, or
 * (force) is replaced at rpt_page_commit. Charts are rendered when gnuplot is on PATH. */
enum tw_result rpt_page_begin(const char *dir, bool force, const char *title,
			      struct rpt_page **out, struct tw_err *err);
/* Render the charts (when gnuplot is found), write index.md and index.html, and move the
 * directory into place. On failure nothing is left behind. pg stays valid for
 * rpt_page_result; release it with rpt_page_free. */
enum tw_result rpt_page_commit(struct rpt_page *pg, struct tw_err *err);
/* Drop a report that failed: remove the temporary directory. */
void rpt_page_abort(struct rpt_page *pg);
void rpt_page_free(struct rpt_page *pg);

/* Content, in order. Text is plain (escaped for HTML). */
void rpt_heading(struct rpt_page *pg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rpt_para(struct rpt_page *pg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A table: header cells separated by '|', then rows likewise. */
void rpt_table_begin(struct rpt_page *pg, const char *header);
/* s made safe as one cell of a '|'-separated header or row (a '|' in it stays in the cell);
 * written into buf (n bytes), which is returned */
const char *rpt_cell(char *buf, size_t n, const char *s);
void rpt_table_row(struct rpt_page *pg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Open a data file in the report directory (name without directory, e.g. "scaling.dat"). */
FILE *rpt_data_open(struct rpt_page *pg, const char *name, struct tw_err *err);
/* A chart: the gnuplot commands after the terminal/output lines (which rpt_chart writes so
 * the script picks pngcairo, png or svg by what the gnuplot running it has), rendered to
 * NAME.png / NAME.svg from the data file `data`. caption is shown under it. */
enum tw_result rpt_chart(struct rpt_page *pg, const char *name, const char *data,
			 const char *caption, const char *gp_body, struct tw_err *err);

/* Charts rendered (after rpt_page_commit): 0 when gnuplot was not found. */
struct rpt_result {
	int charts, rendered;
	bool gnuplot;
};
void rpt_page_result(const struct rpt_page *pg, struct rpt_result *out);

/* ---- the report kinds (reports/kinds.c) -------------------------------------------------------- */

/* Scaling: tokens/s per GPU vs GPUs with the ideal line, efficiency, step breakdown. The sweep
 * has one --vary, gpus. */
enum tw_result rpt_scaling(struct rpt_page *pg, const struct rpt_sweep *s, const char *what,
			   struct tw_err *err);
/* What-if: throughput, step breakdown and memory per point of any sweep. */
enum tw_result rpt_whatif(struct rpt_page *pg, const struct rpt_sweep *s, const char *what,
			  struct tw_err *err);
/* Step breakdown stacked bars of n analysed runs. */
enum tw_result rpt_breakdown(struct rpt_page *pg, const struct prof_analysis *a,
			     const char *const *names, size_t n, struct tw_err *err);
/* Memory of a run: peak per rank, by category when the samples carry categories, and over
 * time. */
enum tw_result rpt_memory_run(struct rpt_page *pg, const struct trace *t, const char *name,
			      struct tw_err *err);
/* Memory of a plan by category, one bar per rank role (from core/plan's memory walk). */
struct rpt_mem_role {
	char role[64];
	int64_t rank, ranks;
	struct plan_mem m;
};
enum tw_result rpt_memory_plan(struct rpt_page *pg, const struct rpt_mem_role *roles, size_t n,
			       const char *what, struct tw_err *err);
/* Predicted vs. measured (or any A vs. B). */
enum tw_result rpt_compare(struct rpt_page *pg, const struct prof_analysis *a,
			   const struct prof_analysis *b, const char *name_a, const char *name_b,
			   struct tw_err *err);
/* Per-rank timeline of one step (step < 0: the first), at most max_ranks ranks. */
enum tw_result rpt_timeline(struct rpt_page *pg, const struct trace *t, const char *name,
			    int64_t step, int64_t max_ranks, struct tw_err *err);

/* The breakdown of a step into parts that add up to it (docs/reports.md): compute, each
 * collective's share of the exposed communication, exposed copies, pipeline bubble, other
 * idle. ns per rank per step. */
#define RPT_NUM_PARTS (4 + 6)
struct rpt_parts {
	int64_t ns[RPT_NUM_PARTS];
};
const char *rpt_part_name(int i);
void rpt_parts_of(const struct prof_analysis *a, struct rpt_parts *out);

#endif
