/* twin simulate — predict one training step: run the plan through the discrete-event
 * simulator (sim/), then summarise the predicted trace with the same analysis that reads
 * measured runs (profile/, DESIGN.md rule 2). Optionally export it (Chrome trace) and store
 * it (SQLite). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../profile/profile.h"
#include "../sim/sim.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: twin simulate -m MODEL -c CLUSTER [--ds-config F] [-s STRATEGY] [--gpus N]\n"
		   "                     [--set PATH=VALUE]... [--memory] [--full] [--trace OUT.json]\n"
		   "                     [--db FILE] [--max-events N] [--json]\n"
		   "\n"
		   "Predict one optimizer step with the discrete-event simulator: step time,\n"
		   "throughput, TFLOP/s per GPU, MFU/HFU, pipeline bubble, and the breakdown\n"
		   "(compute; each collective type's count, bytes, time, bus bandwidth and exposed\n"
		   "part; offload copies; optimizer), and whether the fullest GPU fits in memory\n"
		   "(the twin memory model; a job that does not fit is still simulated and says so).\n"
		   "The header names the model code assumed (strategy kernels: fused or eager).\n"
		   "GPU compute runs at the pace of the job's slowest GPU (the cluster's\n"
		   "gpu.speed_variation; the GPU pace line, gpu_pace in --json; 0: identical GPUs).\n"
		   "The summary comes from the same analysis that reads measured runs (twin\n"
		   "profile analyze).\n"
		   "\n"
		   "      --full              simulate every rank (default: one per role); stragglers\n"
		   "                          imply it: --set 'stragglers=[{\"gpu\":3,\"compute_scale\":0.8}]'\n"
		   "                          (GPU 3 at 80%%), [{\"node\":1,\"link\":\"nic\",\"link_scale\":0.5}]\n"
		   "                          (node 1's NICs at half speed)\n"
		   "      --memory            also print the memory report (twin memory; with --json\n"
		   "                          as its memory_report object)\n"
		   "      --trace OUT.json    write the predicted timeline as Chrome trace JSON (Perfetto:\n"
		   "                          one process per rank, one named thread per stream)\n"
		   "      --db FILE           store the run and its trace in the SQLite store; both\n"
		   "                          outputs are written whole or not at all, to two files\n"
		   "      --max-events N      stop (exit 2) when the simulation needs more events\n"
		   "\n%s",
		cli_job_opts_help);
}

struct summary {
	double step_s, tokens_s, samples_s;
	double model_tflops, hw_tflops, mfu, hfu, peak_tflops;
};

static void summarise(const struct job *j, const struct sim_stats *st, const struct prof_analysis *a,
		      struct summary *s)
{
	memset(s, 0, sizeof(*s));
	s->step_s = (double)a->step_ns * 1e-9;
	if (s->step_s <= 0)
		return;
	s->tokens_s = (double)j->tokens_per_step / s->step_s;
	s->samples_s = (double)j->strat.global_batch / s->step_s;
	/* model FLOPs: the model's training FLOPs per token (no recompute), spread over the GPUs */
	double mf = plan_model_flops_per_token(j) * (double)j->tokens_per_step;
	s->model_tflops = mf / (double)j->gpus / s->step_s * 1e-12;
	/* hardware FLOPs: what the GPUs execute, recompute included: the job's mean over its GPUs
	 * from the plans (the trace's ranks are a sample: one per role, plus stragglers in full
	 * mode), else the recorded ranks' */
	double hw = st->hw_flops > 0 ? st->hw_flops : a->hw_flops;
	s->hw_tflops = hw > 0 ? hw / s->step_s * 1e-12 : s->model_tflops;
	s->peak_tflops = job_peak_tflops(j);
	if (s->peak_tflops > 0) {
		s->mfu = s->model_tflops / s->peak_tflops;
		s->hfu = s->hw_tflops / s->peak_tflops;
	}
}

/* The simulated timeline runs streams concurrently, so a prefetch may hold its buffer while the
 * compute stream has not yet freed the one before: its peak can exceed twin memory's op-order
 * walk. The verdict takes the larger, so that it never contradicts the peak printed below it.
 * Returns whether the timeline's peak was the larger. */
static bool timeline_fit(const struct trace *t, struct plan_fit *f)
{
	int64_t rank;
	int64_t peak = trace_peak_mem(t, &rank);
	if (peak <= f->gpu_total)
		return false;
	const double gib = (double)TW_GIB;
	double walk = (double)f->gpu_total / gib;
	/* "once its streams overlap" only where the op-order walk alone fits */
	bool walk_fits = f->gpu_total <= f->gpu_capacity;
	f->gpu_total = peak, f->rank = rank;
	if (peak > f->gpu_capacity) {
		f->fits = false;
		f->short_bytes = peak - f->gpu_capacity;
		snprintf(f->verdict, sizeof(f->verdict),
			 "does not fit%s: needs %.2f GiB more (the simulated timeline peaks at %.2f "
			 "GiB of %.2f GiB; twin memory's op-order walk %.2f)",
			 walk_fits ? " once its streams overlap" : "", (double)f->short_bytes / gib,
			 (double)peak / gib, (double)f->gpu_capacity / gib, walk);
	}
	return true;
}

/* The memory line: the fullest GPU of the job, from the same model as twin memory (or the
 * simulated timeline, when it peaks higher). A job that does not fit still gets its step time,
 * with this line saying it would not run. */
static void print_fit(const struct plan_fit *f, bool timeline)
{
	const double gib = (double)TW_GIB;
	const char *src = timeline ? "simulated timeline" : "twin memory";
	if (f->fits)
		printf("memory               fits: %.2f GiB of %.2f GiB on the fullest GPU (rank %" PRId64
		       "; %s)\n",
		       (double)f->gpu_total / gib, (double)f->gpu_capacity / gib, f->rank, src);
	else
		printf("memory               rank %" PRId64 " %s; a real run would stop out of "
		       "memory (%s)\n",
		       f->rank, f->verdict, src);
}

static void print_text(const struct job *j, const struct sim_options *o, const struct sim_stats *st,
		       const struct prof_analysis *a, const struct summary *s, const struct plan_fit *f,
		       bool timeline)
{
	const struct strategy *g = &j->strat;
	printf("%s on %" PRId64 " GPUs of %s (%d node%s): tp %" PRId64 ", pp %" PRId64 ", dp %" PRId64
	       ", cp %" PRId64 ", ep %" PRId64 "; %" PRId64 " micro-batches of %" PRId64 " x %" PRId64
	       " tokens; %s model code\n",
	       j->model.name, j->gpus, j->cluster.name, j->nodes, j->nodes == 1 ? "" : "s", g->tp, g->pp,
	       g->dp, g->cp, g->ep, g->grad_accum, g->micro_batch, j->seq,
	       strat_kernels_name(g->kernels));
	printf("simulated %s: %" PRId64 " rank%s, %" PRId64 " events in %.3f s (%.3g events/s)\n\n",
	       !st->full ? "one rank per role" : o->full ? "every rank" : "every rank (stragglers given)",
	       st->ranks_simulated,
	       st->ranks_simulated == 1 ? "" : "s", st->events, (double)st->wall_ns * 1e-9,
	       st->wall_ns > 0 ? (double)st->events / ((double)st->wall_ns * 1e-9) : 0.0);
	for (int i = 0; i < j->cluster.n_stragglers; i++) { /* the what-if this step is under */
		char w[96];
		cli_straggler_str(&j->cluster.stragglers[i], w, sizeof(w));
		printf("%s%s", i ? "; " : "straggler what-if    ", w);
	}
	if (j->cluster.n_stragglers > 0)
		printf("\n\n");
	printf("step time            %.4f s\n", s->step_s);
	printf("throughput           %.1f tokens/s, %.3f samples/s\n", s->tokens_s, s->samples_s);
	/* one decimal, more where the peak is small (a host CPU's is a fraction of a TFLOP/s) */
	int dec = s->peak_tflops >= 100 ? 1 : s->peak_tflops >= 1 ? 2 : 4;
	printf("TFLOP/s per GPU      %.*f model (MFU %.1f%%), %.*f hardware (HFU %.1f%%) of %.*f peak\n",
	       dec, s->model_tflops, 100 * s->mfu, dec, s->hw_tflops, 100 * s->hfu, dec, s->peak_tflops);
	printf("pipeline bubble      %.4f s (%.1f%% of the step)\n", (double)a->bubble_ns * 1e-9,
	       a->step_ns > 0 ? 100.0 * (double)a->bubble_ns / (double)a->step_ns : 0.0);
	printf("offload copies       %.4f s (%.4f s exposed, stall on copies %.4f s)\n",
	       (double)a->copy_ns * 1e-9, (double)a->exposed_copy_ns * 1e-9, (double)a->stall_copy_ns * 1e-9);
	printf("optimizer step       %.4f s\n", (double)a->optimizer_ns * 1e-9);
	if (j->pace > 1.0)
		printf("GPU pace             x%.4f on compute: the slowest of %" PRId64 " GPUs "
		       "(gpu.speed_variation %g)\n",
		       j->pace, j->gpus, j->cluster.gpu.speed_variation);
	print_fit(f, timeline);
	printf("\n");
	prof_analysis_print(stdout, a);
}

static cJSON *to_json(const struct job *j, const struct sim_options *o, const struct sim_stats *st,
		      const struct prof_analysis *a, const struct summary *s, const struct plan_fit *f)
{
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "model", j->model.name);
	cJSON_AddStringToObject(out, "cluster", j->cluster.name);
	cJSON_AddNumberToObject(out, "gpus", (double)j->gpus);
	cJSON_AddNumberToObject(out, "nodes", j->nodes);
	cJSON_AddStringToObject(out, "mode", st->full ? "full" : "symmetric");
	cJSON_AddStringToObject(out, "model_code", strat_kernels_name(j->strat.kernels));
	cJSON_AddItemToObject(out, "strategy", strategy_to_json(&j->strat)); /* degrees, batch, ... */
	cJSON_AddNumberToObject(out, "step_time_s", s->step_s);
	cJSON_AddNumberToObject(out, "tokens_per_s", s->tokens_s);
	cJSON_AddNumberToObject(out, "samples_per_s", s->samples_s);
	cJSON_AddNumberToObject(out, "tflops_per_gpu_model", s->model_tflops);
	cJSON_AddNumberToObject(out, "tflops_per_gpu_hardware", s->hw_tflops);
	cJSON_AddNumberToObject(out, "peak_tflops", s->peak_tflops);
	cJSON_AddNumberToObject(out, "mfu", s->mfu);
	cJSON_AddNumberToObject(out, "hfu", s->hfu);
	cJSON_AddNumberToObject(out, "bubble_s", (double)a->bubble_ns * 1e-9);
	/* GPU compute's time multiplier: the pace of the job's slowest GPU */
	cJSON_AddNumberToObject(out, "gpu_pace", j->pace > 0 ? j->pace : 1.0);
	cJSON_AddNumberToObject(out, "peak_mem_bytes", (double)a->peak_mem_bytes);
	cJSON *mem = cJSON_AddObjectToObject(out, "memory");
	cJSON_AddBoolToObject(mem, "fits", f->fits);
	cJSON_AddNumberToObject(mem, "rank", (double)f->rank);
	cJSON_AddNumberToObject(mem, "gpu_bytes", (double)f->gpu_total);
	cJSON_AddNumberToObject(mem, "capacity_bytes", (double)f->gpu_capacity);
	cJSON_AddNumberToObject(mem, "short_bytes", (double)(f->short_bytes > 0 ? f->short_bytes : 0));
	/* which memory short_bytes is short of */
	if (f->short_bytes > 0)
		cJSON_AddStringToObject(mem, "short_of", f->host_short ? "host" : "gpu");
	else
		cJSON_AddNullToObject(mem, "short_of");
	cJSON_AddNumberToObject(mem, "host_bytes", (double)f->host_bytes);
	cJSON_AddNumberToObject(mem, "host_capacity_bytes", (double)f->host_capacity);
	cJSON_AddStringToObject(mem, "verdict", f->verdict);
	cJSON *sim = cJSON_AddObjectToObject(out, "sim");
	cJSON_AddNumberToObject(sim, "events", (double)st->events);
	cJSON_AddNumberToObject(sim, "ranks_simulated", (double)st->ranks_simulated);
	cJSON_AddNumberToObject(sim, "wall_s", (double)st->wall_ns * 1e-9);
	cJSON_AddNumberToObject(sim, "step_ns", (double)st->step_ns);
	cJSON_AddItemToObject(out, "analysis", prof_analysis_to_json(a));
	return out;
}

/* The simulator's plans, each walked for memory as it is built: the job's fit without building
 * every role's plan a second time (plan_job_fit's verdict, role by role) */
static enum tw_result build_and_walk(void *ctx, const struct job *j, int64_t rank, struct plan *out,
				     struct tw_err *err)
{
	struct plan_mem m;
	TW_CHECK(plan_rank(j, rank, out, err));
	TW_CHECK(plan_memory(j, out, &m, err));
	plan_fit_add(ctx, &m, rank);
	return TW_OK;
}

static int64_t roles_of(void *ctx, const struct job *j, int64_t *reps, int64_t *weights, int64_t n)
{
	(void)ctx;
	return plan_roles(j, reps, weights, n);
}

int cmd_simulate(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	struct cli_job_opts o;
	struct tw_err err = { 0 };
	cli_job_opts_init(&o, ctx);
	struct sim_options so = { 0 };
	bool memory = false;
	const char *trace_path = NULL, *db_path = NULL;
	for (int i = 1; i < argc; i++) {
		int k = cli_job_opt(&o, argc, argv, &i, &err);
		if (k < 0)
			return cli_fail(&err);
		if (k > 0)
			continue;
		if (!strcmp(argv[i], "--full")) {
			so.full = true;
		} else if (!strcmp(argv[i], "--memory")) {
			memory = true;
		} else if (cli_is_opt(argv[i], "--trace")) {
			if (!(trace_path = cli_value(argc, argv, &i, "--trace", &err)))
				return cli_fail(&err);
		} else if (cli_is_opt(argv[i], "--db")) {
			if (!(db_path = cli_value(argc, argv, &i, "--db", &err)))
				return cli_fail(&err);
		} else if (cli_is_opt(argv[i], "--max-events")) {
			const char *v = cli_value(argc, argv, &i, "--max-events", &err);
			if (!v || cli_parse_int("--max-events", v, 1, INT64_MAX, &so.max_events, &err) != TW_OK)
				return cli_fail(&err);
		} else {
			return cli_usage_error("simulate", "unknown option '%s' (see twin simulate --help)", argv[i]);
		}
	}
	if (trace_path && db_path && cli_same_file(trace_path, db_path))
		return cli_usage_error("simulate", "--trace %s and --db %s name the same file",
				       trace_path, db_path);
	struct job *j = TW_NEW(struct job);
	struct trace t;
	memset(&t, 0, sizeof(t));
	struct sim_stats st = { 0 };
	int status = 0;
	struct plan_fit fit;
	plan_fit_init(&fit);
	struct sim_plan_source src = { .ctx = &fit, .build = build_and_walk, .roles = roles_of };
	enum tw_result rc = cli_job_load(&o, "simulate", j, &err);
	if (rc == TW_OK)
		rc = sim_run_plans(j, &so, &src, &t, &st, &err);
	if (rc != TW_OK) {
		status = cli_fail(&err);
		goto out;
	}
	struct prof_analysis a;
	if ((rc = prof_analyze(&t, &a, &err)) != TW_OK) {
		status = cli_fail(&err);
		goto out;
	}
	struct summary s;
	summarise(j, &st, &a, &s);
	bool timeline = timeline_fit(&t, &fit);
	if (trace_path || db_path)
		trace_sort(&t); /* (rank, start, end) order for the exporter and the store */
	/* the outputs whole or not at all: the database opened first, the trace written beside
	 * its path and renamed into place once the run is stored */
	int64_t run_id = -1;
	struct prof_db *db = NULL;
	struct tw_out tr = { 0 };
	if (db_path)
		rc = prof_db_open(db_path, &db, &err);
	if (rc == TW_OK && trace_path)
		rc = prof_export_chrome_begin(&t, trace_path, &tr, &err);
	if (rc == TW_OK && db) {
		cJSON *jj = job_to_json(j);
		char *job_json = cJSON_PrintUnformatted(jj);
		cJSON_Delete(jj);
		struct prof_run_meta meta = { .kind = TRACE_KIND_SIM, .name = NULL, .job_json = job_json,
					      .backend = "sim", .nranks = j->gpus };
		rc = prof_store_trace(db, &meta, &t, &run_id, &err);
		free(job_json);
	}
	if (tr.f) {
		enum tw_result rc2 = tw_out_close(&tr, trace_path, rc == TW_OK, &err);
		rc = rc != TW_OK ? rc : rc2;
	}
	if (db && rc == TW_OK)
		prof_db_close(db);
	else if (db)
		prof_db_discard(db); /* a store this command created is not left empty */
	if (rc != TW_OK) {
		status = cli_fail(&err);
		goto out;
	}
	if (o.json) {
		cJSON *report = NULL;
		if (memory && cli_memory_report(j, true, &report, &err) != 0) {
			status = cli_fail(&err);
			goto out;
		}
		cJSON *out = to_json(j, &so, &st, &a, &s, &fit);
		if (report)
			cJSON_AddItemToObject(out, "memory_report", report);
		if (trace_path)
			cJSON_AddStringToObject(out, "trace", trace_path);
		if (run_id >= 0)
			cJSON_AddNumberToObject(out, "run_id", (double)run_id);
		cli_print_json(out);
	} else {
		print_text(j, &so, &st, &a, &s, &fit, timeline);
		if (memory) {
			printf("\n");
			fflush(stdout);
			if (cli_memory_report(j, false, NULL, &err) != 0) {
				status = cli_fail(&err);
				goto out;
			}
		}
		if (trace_path)
			printf("trace: %s (Chrome trace JSON; open in https://ui.perfetto.dev)\n", trace_path);
		if (run_id >= 0)
			printf("stored as run %" PRId64 " in %s\n", run_id, db_path);
	}
out:
	trace_release(&t);
	free(j);
	return status;
}
