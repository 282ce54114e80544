/* twin run — execute the job's plan on this machine (cuda: GPUs with NCCL and cuBLAS; host: CPU
 * ranks under MPI), trace it, store the trace, print predicted vs measured memory and the
 * measured step. One process per rank: `mpirun -np N twin run ...`; one rank needs no launcher.
 *
 * Storage: rank 0 opens a run in the store before the first step (marked incomplete); a rank
 * that fails appends what it traced to that run; after a good run rank 0 appends every rank's
 * events and marks the run complete. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../exec/exec.h"
#include "../profile/profile.h"
#include "cli.h"

static const char help[] =
	"usage: twin run -m MODEL -c CLUSTER [--gpus N] (--ds-config F | -s STRATEGY) [--set PATH=V]...\n"
	"                --backend cuda|host [--steps N] [--warmup N] [--timeout S] [--verify]\n"
	"                [--db F] [--name NAME] [--json]\n"
	"\n"
	"Executes the plan twin simulates, on real hardware, and stores its trace.\n"
	"  --backend B     cuda: GPUs (cuBLAS, NCCL, CUPTI); host: CPU ranks (MPI, OpenBLAS)\n"
	"  --steps N       timed steps (default 3)\n"
	"  --warmup N      untimed steps before them (default 1)\n"
	"  --timeout S     abort a step that stalls longer than S seconds, naming the op each\n"
	"                  rank waits on (default 0: no limit)\n"
	"  --verify        check every collective's result (always on for host)\n"
	"  --db F          store (default twin.db)\n"
	"  --name NAME     label of the run in the store\n"
	"Launch one process per rank: mpirun -np N twin run ... (as root add --allow-run-as-root;\n"
	"with fewer cores than ranks add --oversubscribe).\n";

/* Test-only: --fault KIND:RANK:OP with KIND exit|stall|error|corrupt. */
static bool parse_fault(const char *s, struct exec_fault *f)
{
	char kind[16];
	long long rank, op;
	if (sscanf(s, "%15[a-z]:%lld:%lld", kind, &rank, &op) != 3)
		return false;
	if (!strcmp(kind, "exit"))
		f->kind = EXEC_FAULT_EXIT;
	else if (!strcmp(kind, "stall"))
		f->kind = EXEC_FAULT_STALL;
	else if (!strcmp(kind, "error"))
		f->kind = EXEC_FAULT_ERROR;
	else if (!strcmp(kind, "corrupt"))
		f->kind = EXEC_FAULT_CORRUPT;
	else
		return false;
	f->rank = rank;
	f->op = op;
	return true;
}

/* The rank the launcher gave this process, before MPI is up (-1: none): so that an input error
 * is printed once, not once per rank. */
static long launcher_rank(void)
{
	const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && *v)
			return strtol(v, NULL, 10);
	}
	return -1;
}

/* Ranks other than 0 load the same inputs as rank 0: their input warnings and --set notes
 * would repeat rank 0's once per rank (job_inputs.quiet); the run's own per-rank messages
 * still print. */
static enum tw_result job_load_quiet(struct cli_job_opts *jo, bool quiet, struct job *job,
				     struct tw_err *err)
{
	jo->in.quiet = quiet; /* rank 0 alone warns about the inputs */
	return cli_job_load(jo, "run", job, err);
}

struct store_ctx {
	const char *db_path, *name, *backend;
	char *job_json;
	struct prof_db *db;     /* rank 0, from begin to the end */
	struct tw_err err;      /* a store problem on rank 0 after the run */
};

static int64_t store_begin(void *ctx, int64_t nranks, struct tw_err *err)
{
	struct store_ctx *s = ctx;
	/* the store refuses a path that cannot hold one (a directory, a device, a missing
	 * folder) as bad input */
	if (prof_db_open(s->db_path, &s->db, err) != TW_OK)
		return -1;
	struct prof_run_meta meta = {.kind = TRACE_KIND_EXEC, .name = s->name,
				     .job_json = s->job_json, .backend = s->backend,
				     .nranks = nranks, .source = "twin run"};
	int64_t id = -1;
	if (prof_run_begin(s->db, &meta, &id, err) != TW_OK)
		return -1;
	return id;
}

/* A failing rank: its events so far go into the run, which stays incomplete. Its own connection,
 * since this may run on the watchdog thread or on a rank that never opened the store. */
static void store_partial(void *ctx, int64_t run_id, const struct trace *t)
{
	struct store_ctx *s = ctx;
	struct prof_db *db = NULL;
	struct tw_err err = {0};
	if (prof_db_open(s->db_path, &db, &err) == TW_OK &&
	    prof_run_append(db, run_id, t, &err) == TW_OK)
		fprintf(stderr, "twin: %zu events traced before the failure are in %s, run %lld (incomplete)\n",
			t->nev, s->db_path, (long long)run_id);
	if (db)
		prof_db_close(db);
}

static double gib(int64_t b)
{
	return (double)b / TW_GIB;
}

static void print_text(const struct exec_options *opt, const struct exec_result *res,
		       const struct prof_analysis *a, const struct store_ctx *s)
{
	printf("twin run: %s backend, %lld rank%s, %d timed step%s after %d warm-up, run %lld in %s\n",
	       opt->backend, (long long)res->nranks, res->nranks == 1 ? "" : "s", opt->steps,
	       opt->steps == 1 ? "" : "s", opt->warmup, (long long)res->run_id, s->db_path);
	if (a)
		prof_analysis_print(stdout, a);
	printf("collectives and p2p verified: %lld (all correct)\n", (long long)res->colls_verified);
	printf("memory, plan ALLOCs on the device (predicted = memory model, measured = allocated):\n");
	printf("  %-6s %14s %14s\n", "rank", "predicted MiB", "measured MiB");
	for (int64_t r = 0; r < res->nranks; r++)
		printf("  %-6lld %14.3f %14.3f\n", (long long)r, (double)res->rank_pred[r] / TW_MIB,
		       (double)res->rank_peak[r] / TW_MIB);
	printf("  rank 0 by category at the peak (MiB):");
	for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
		if (res->at_peak[PLAN_DEV_GPU][c] || res->pred.at_peak[PLAN_DEV_GPU][c])
			printf(" %s %.3f/%.3f", plan_mem_cat_name((enum plan_mem_cat)c),
			       (double)res->pred.at_peak[PLAN_DEV_GPU][c] / TW_MIB,
			       (double)res->at_peak[PLAN_DEV_GPU][c] / TW_MIB);
	printf("\n");
	if (res->peak[PLAN_DEV_HOST] || res->pred.peak[PLAN_DEV_HOST])
		printf("  rank 0 host (offload): predicted %.3f GiB, measured %.3f GiB\n",
		       gib(res->pred.peak[PLAN_DEV_HOST]), gib(res->peak[PLAN_DEV_HOST]));
	if (res->device_used_bytes > 0)
		printf("  rank 0 device in use at the peak (driver, with context): %.3f GiB; predicted total %.3f GiB\n",
		       gib(res->device_used_bytes), gib(res->pred.gpu_total));
	printf("  scratch outside the plan (operands, staging), rank 0: %.3f MiB\n",
	       (double)res->scratch_bytes / TW_MIB);
	printf("memory model check: measured %s predicted on every rank, device and category\n",
	       res->mem_match ? "==" : "!=");
}

static cJSON *result_json(const struct exec_options *opt, const struct exec_result *res,
			  const struct prof_analysis *a, const struct store_ctx *s)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "backend", opt->backend);
	cJSON_AddNumberToObject(o, "ranks", (double)res->nranks);
	cJSON_AddNumberToObject(o, "steps", opt->steps);
	cJSON_AddNumberToObject(o, "warmup", opt->warmup);
	cJSON_AddNumberToObject(o, "run_id", (double)res->run_id);
	cJSON_AddStringToObject(o, "db", s->db_path);
	cJSON_AddNumberToObject(o, "verified", (double)res->colls_verified);
	cJSON_AddBoolToObject(o, "memory_match", res->mem_match);
	cJSON_AddNumberToObject(o, "scratch_bytes", (double)res->scratch_bytes);
	cJSON *ranks = cJSON_AddArrayToObject(o, "memory");
	for (int64_t r = 0; r < res->nranks; r++) {
		cJSON *x = cJSON_CreateObject();
		cJSON_AddNumberToObject(x, "rank", (double)r);
		cJSON_AddNumberToObject(x, "predicted_peak_bytes", (double)res->rank_pred[r]);
		cJSON_AddNumberToObject(x, "measured_peak_bytes", (double)res->rank_peak[r]);
		cJSON_AddItemToArray(ranks, x);
	}
	cJSON *cats = cJSON_AddObjectToObject(o, "rank0_at_peak");
	for (int c = 0; c < PLAN_NUM_MEM_CATS; c++) {
		cJSON *x = cJSON_CreateObject();
		cJSON_AddNumberToObject(x, "predicted", (double)res->pred.at_peak[PLAN_DEV_GPU][c]);
		cJSON_AddNumberToObject(x, "measured", (double)res->at_peak[PLAN_DEV_GPU][c]);
		cJSON_AddItemToObject(cats, plan_mem_cat_name((enum plan_mem_cat)c), x);
	}
	cJSON_AddNumberToObject(o, "rank0_host_peak_predicted", (double)res->pred.peak[PLAN_DEV_HOST]);
	cJSON_AddNumberToObject(o, "rank0_host_peak_measured", (double)res->peak[PLAN_DEV_HOST]);
	cJSON_AddNumberToObject(o, "rank0_device_used_bytes", (double)res->device_used_bytes);
	cJSON_AddNumberToObject(o, "rank0_predicted_gpu_total", (double)res->pred.gpu_total);
	if (a)
		cJSON_AddItemToObject(o, "analysis", prof_analysis_to_json(a));
	return o;
}

int cmd_run(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		printf("%s\nJob options:\n%s", help, cli_job_opts_help);
		return 0;
	}
	struct tw_err err = {0};
	struct cli_job_opts jo;
	cli_job_opts_init(&jo, ctx);
	struct exec_options opt = {.backend = NULL, .steps = 3, .warmup = 1, .log_level = ctx->log_level};
	struct store_ctx s = {.db_path = "twin.db"};
	bool quiet = launcher_rank() > 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		int64_t n;
		int k = cli_job_opt(&jo, argc, argv, &i, &err);
		if (k < 0)
			return quiet ? 2 : cli_fail(&err);
		if (k > 0)
			continue;
		if (cli_is_opt(a, "--backend")) {
			if (!(v = cli_value(argc, argv, &i, "--backend", &err)))
				return quiet ? 2 : cli_fail(&err);
			if (strcmp(v, "cuda") && strcmp(v, "host"))
				return quiet ? 2 : cli_usage_error("run", "--backend %s: expected cuda or host", v);
			opt.backend = v;
		} else if (cli_is_opt(a, "--steps") || cli_is_opt(a, "--warmup")) {
			const char *name = cli_is_opt(a, "--steps") ? "--steps" : "--warmup";
			if (!(v = cli_value(argc, argv, &i, name, &err)) ||
			    cli_parse_int(name, v, name[2] == 's' ? 1 : 0, 100000, &n, &err) != TW_OK)
				return quiet ? 2 : cli_fail(&err);
			*(name[2] == 's' ? &opt.steps : &opt.warmup) = (int)n;
		} else if (cli_is_opt(a, "--timeout")) {
			char *end = NULL;
			if (!(v = cli_value(argc, argv, &i, "--timeout", &err)))
				return quiet ? 2 : cli_fail(&err);
			opt.timeout_s = strtod(v, &end);
			if (!*v || *end || !(opt.timeout_s >= 0) || opt.timeout_s > 1e6)
				return quiet ? 2 : cli_usage_error("run", "--timeout %s: expected seconds in [0, 1e6]", v);
		} else if (cli_is_opt(a, "--db")) {
			if (!(s.db_path = cli_value(argc, argv, &i, "--db", &err)))
				return quiet ? 2 : cli_fail(&err);
		} else if (cli_is_opt(a, "--name")) {
			if (!(s.name = cli_value(argc, argv, &i, "--name", &err)))
				return quiet ? 2 : cli_fail(&err);
		} else if (!strcmp(a, "--verify")) {
			opt.verify = true;
		} else if (cli_is_opt(a, "--fault")) {
			if (!(v = cli_value(argc, argv, &i, "--fault", &err)))
				return quiet ? 2 : cli_fail(&err);
			if (!parse_fault(v, &opt.fault))
				return quiet ? 2 : cli_usage_error("run", "--fault %s: expected exit|stall|error|corrupt:RANK:OP", v);
		} else {
			return quiet ? 2 : cli_usage_error("run", "unknown option '%s' (see twin run --help)", a);
		}
	}
	if (!opt.backend)
		return quiet ? 2 : cli_usage_error("run", "--backend cuda|host is required");
	struct job job;
	if (job_load_quiet(&jo, quiet, &job, &err) != TW_OK)
		return quiet ? tw_exit_status(err.code) : cli_fail(&err);
	s.backend = opt.backend;
	cJSON *jj = job_to_json(&job);
	s.job_json = jj ? cJSON_PrintUnformatted(jj) : NULL;
	cJSON_Delete(jj);
	opt.hooks = (struct exec_hooks){.ctx = &s, .begin = store_begin, .partial = store_partial};

	struct trace t;
	struct exec_result res;
	enum tw_result rc = exec_run(&job, &opt, &t, &res, &err);
	int status = 0;
	if (rc != TW_OK) {
		status = res.report ? cli_fail(&err) : tw_exit_status(rc);
		goto done;
	}
	if (res.rank != 0)
		goto done;
	if (s.db && res.run_id >= 0) {
		if (prof_run_append(s.db, res.run_id, &t, &s.err) == TW_OK)
			prof_run_finish(s.db, res.run_id, 0, &s.err);
	}
	if (s.err.code != TW_OK) {
		status = cli_fail(&s.err);
		goto done;
	}
	struct prof_analysis a;
	struct tw_err aerr = {0};
	bool have_a = prof_analyze(&t, &a, &aerr) == TW_OK;
	if (jo.json)
		cli_print_json(result_json(&opt, &res, have_a ? &a : NULL, &s));
	else
		print_text(&opt, &res, have_a ? &a : NULL, &s);
done:
	if (s.db)
		prof_db_close(s.db);
	free(s.job_json);
	trace_release(&t);
	exec_result_release(&res);
	return status;
}
