/* cli — main() and one file per subcommand. Subcommands parse options, load the job through
 * core/, call an engine, store through profile/, print. */
#ifndef TW_CLI_H
#define TW_CLI_H

#include "../core/core.h"

struct cli_ctx {
	const char *data_dir;         /* repository root: examples/, topologies/ */
	enum tw_log_level log_level;
};

/* A subcommand: argv[0] is the subcommand name. Returns the process exit status. */
typedef int (*cli_fn)(const struct cli_ctx *ctx, int argc, char **argv);

int cmd_model(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_topo(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_config(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_simulate(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_validate(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_plan(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_sweep(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_run(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_profile(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_runs(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_compare(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_report(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_calibrate(const struct cli_ctx *ctx, int argc, char **argv);
int cmd_memory(const struct cli_ctx *ctx, int argc, char **argv);

/* The memory report of a job (per rank role: peak, breakdown, capacity, verdict), as text or
 * JSON on stdout; shared by "twin memory" and "twin simulate --memory" (cli/cmd_memory.c). */
/* twin memory's report: printed, or with json and take, its JSON handed to the caller */
int cli_memory_report(const struct job *j, bool json, struct cJSON **take, struct tw_err *err);

/* Print "twin: MSG" (one line) on stderr and return the exit status for err->code. */
int cli_fail(const struct tw_err *err);
/* One straggler as the summaries print it: "node 1: compute x1.00, nic links x0.50". */
void cli_straggler_str(const struct cluster_straggler *g, char *buf, size_t len);
/* Usage error: "twin CMD: MSG" and exit status 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Options every job-taking subcommand shares:
 *   -m/--model M  -c/--cluster C  --gpus N  --ds-config F  -s/--strategy S  --set PATH=V  --json
 * cli_job_opt() consumes argv[*i] (and its value) when it is one of them and returns 1,
 * returns 0 when it is not, and -1 (with err filled) on a bad value. */
#define CLI_MAX_SETS 64
struct cli_job_opts {
	struct job_inputs in;
	const char *sets[CLI_MAX_SETS];
	bool json;
};
void cli_job_opts_init(struct cli_job_opts *o, const struct cli_ctx *ctx);
int cli_job_opt(struct cli_job_opts *o, int argc, char **argv, int *i, struct tw_err *err);
/* The notes on --set paths no prediction reads (or reads only in part), one stderr line each;
 * cli_job_load prints them once the job has loaded (none when o->in.quiet) */
void cli_set_notes(const struct cli_job_opts *o);
/* Checks -m and -c were given, then job_load. */
enum tw_result cli_job_load(struct cli_job_opts *o, const char *cmd, struct job *out,
			    struct tw_err *err);
/* Help text for the shared options (for each subcommand's --help). */
extern const char cli_job_opts_help[];

/* Option value helpers: "--gpus 8" or "--gpus=8". value_of returns NULL (err filled) if the
 * option lacks its value. */
const char *cli_value(int argc, char **argv, int *i, const char *opt, struct tw_err *err);
bool cli_is_opt(const char *arg, const char *name); /* "--x" or "--x=..." */
/* Whether two paths name one file (the same text, or both exist with one inode): an output
 * that would overwrite an input or another output is refused */
bool cli_same_file(const char *a, const char *b);
enum tw_result cli_parse_int(const char *opt, const char *s, int64_t min, int64_t max,
			     int64_t *out, struct tw_err *err);
bool cli_wants_help(int argc, char **argv);

/* Print a cJSON object to stdout (and free it). */
void cli_print_json(struct cJSON *obj);

/* Simulate every point of a sweep (twin sweep, twin report scaling|whatif; cli/cmd_sweep.c):
 * base's job with each point's --vary values, symmetric mode; a point whose job is invalid
 * keeps its one-line reason. With db, each point is stored as run "NAME/PATH=V". */
struct rpt_sweep;
enum tw_result cli_sweep_run(const struct cli_job_opts *base, const char *cmd, struct rpt_sweep *s,
			     const char *db, const char *name, struct tw_err *err);

#endif
