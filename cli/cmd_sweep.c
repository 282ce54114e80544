/* twin sweep — simulate one job over a range of values (--vary PATH=V1,V2,...; several --vary
 * give their cross product) and print a table: step time, throughput, TFLOP/s and MFU per GPU,
 * exposed communication, peak memory and whether it fits. Each point goes through the same
 * path as `twin simulate` (job_load with the point's --set, sim_run in symmetric mode,
 * prof_analyze); reports/ lays out the points and prints them. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../profile/profile.h"
#include "../reports/reports.h"
#include "../sim/sim.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: twin sweep -m MODEL -c CLUSTER [--ds-config F] [-s STRATEGY] [--gpus N]\n"
		   "                  [--set PATH=VALUE]... --vary PATH=V1,V2,... [--vary ...]\n"
		   "                  [--db FILE] [--name LABEL] [--json]\n"
		   "\n"
		   "Simulate the job once per value (the cross product of several --vary, first one\n"
		   "slowest, at most %d points) and print one row per point: step time, tokens/s,\n"
		   "tokens/s per GPU, model TFLOP/s per GPU, MFU, exposed communication, peak GPU\n"
		   "memory and whether it fits. A point whose job is invalid (e.g. tp not dividing\n"
		   "the heads) is a row with the reason. Examples:\n"
		   "  twin sweep -m llama2-7b -c dgx-a100-80g --ds-config examples/ds_configs/zero2.json \\\n"
		   "             --vary gpus=8,16,32,64                  # scaling\n"
		   "  twin sweep ... --gpus 16 --vary net.nic_gbps=100,200,400   # network what-if\n"
		   "  twin sweep ... --vary zero_optimization.stage=1,2,3 --vary tp=1,2\n"
		   "  twin sweep ... --vary 'stragglers=[],[{\"node\":1,\"compute_scale\":0.5}]'  # a slow node\n"
		   "\n"
		   "      --vary PATH=V,...   PATH is gpus (the --gpus count) or any --set path;\n"
		   "                          values are separated by commas (at most %d; commas\n"
		   "                          inside a JSON array, object or string are the value's)\n"
		   "      --db FILE           store every valid point as a run named LABEL/PATH=V\n"
		   "      --name LABEL        label of the stored runs (default: sweep)\n"
		   "\n%s",
		RPT_MAX_POINTS, RPT_MAX_VALUES, cli_job_opts_help);
}

/* One point: job, simulation, analysis; a failure is the point's reason, not the sweep's. */
static enum tw_result run_point(const struct cli_job_opts *base, const char *cmd,
				const struct rpt_sweep *s, struct rpt_point *p, struct prof_db *db,
				const char *name, struct tw_err *err)
{
	struct cli_job_opts o = *base;
	o.in.sets = o.sets; /* the copy's own array */
	char sets[RPT_MAX_VARY][512];
	for (int k = 0; k < s->nvary; k++) {
		if (!strcmp(s->vary[k].path, "gpus")) {
			o.in.gpus = strtoll(p->value[k], NULL, 10); /* checked by rpt_sweep_add_vary */
			continue;
		}
		if (o.in.nsets >= CLI_MAX_SETS)
			return tw_errf(err, TW_ERR_USAGE, "%s: at most %d --set and --vary paths together", cmd,
				       CLI_MAX_SETS);
		snprintf(sets[k], sizeof(sets[k]), "%s=%s", s->vary[k].path, p->value[k]);
		o.sets[o.in.nsets++] = sets[k];
	}
	struct job *j = TW_NEW(struct job);
	struct trace t;
	memset(&t, 0, sizeof(t));
	struct tw_err perr = { 0 };
	struct sim_options so = { 0 };
	struct sim_stats st = { 0 };
	struct prof_analysis a;
	enum tw_result rc = cli_job_load(&o, cmd, j, &perr);
	if (rc == TW_OK)
		rc = sim_run(j, &so, &t, &st, &perr);
	if (rc == TW_OK)
		rc = prof_analyze(&t, &a, &perr);
	if (rc != TW_OK) {
		p->ok = false;
		snprintf(p->reason, sizeof(p->reason), "%s", perr.msg[0] ? perr.msg : tw_strresult(rc));
		rc = TW_OK;
		goto out;
	}
	double mf = plan_model_flops_per_token(j) * (double)j->tokens_per_step;
	rpt_point_fill(p, &a, j->gpus, j->tokens_per_step, mf,
		       job_peak_tflops(j),
		       j->cluster.gpu.memory_gib * (double)TW_GIB);
	if (db) {
		char label[600], run_name[700];
		rpt_point_label(s, p, label, sizeof(label));
		snprintf(run_name, sizeof(run_name), "%s/%s", name, label);
		cJSON *jj = job_to_json(j);
		char *job_json = cJSON_PrintUnformatted(jj);
		cJSON_Delete(jj);
		struct prof_run_meta meta = { .kind = TRACE_KIND_SIM, .name = run_name,
					      .job_json = job_json, .backend = "sim",
					      .nranks = j->gpus, .source = "twin sweep" };
		trace_sort(&t); /* the store keeps (rank, start, end) order */
		rc = prof_store_trace(db, &meta, &t, &p->run_id, err);
		free(job_json);
	}
out:
	trace_release(&t);
	free(j);
	return rc;
}

enum tw_result cli_sweep_run(const struct cli_job_opts *base, const char *cmd, struct rpt_sweep *s,
			     const char *db_path, const char *name, struct tw_err *err)
{
	if (!base->in.model)
		return tw_errf(err, TW_ERR_USAGE, "%s: -m MODEL is required", cmd);
	if (!base->in.cluster)
		return tw_errf(err, TW_ERR_USAGE, "%s: -c CLUSTER is required", cmd);
	TW_CHECK(rpt_sweep_expand(s, err));
	if (name)
		TW_CHECK(prof_run_name_check(name, "--name", err));
	struct prof_db *db = NULL;
	if (db_path)
		TW_CHECK(prof_db_open(db_path, &db, err));
	enum tw_result rc = TW_OK;
	size_t nok = 0;
	for (size_t i = 0; i < s->npts && rc == TW_OK; i++) {
		rc = run_point(base, cmd, s, &s->pts[i], db, name ? name : "sweep", err);
		nok += s->pts[i].ok;
	}
	if (db && rc == TW_OK && nok > 0)
		prof_db_close(db);
	else if (db)
		prof_db_discard(db); /* a store this command created is not left empty */
	if (rc == TW_OK && nok == 0) {
		char label[512];
		rpt_point_label(s, &s->pts[0], label, sizeof(label));
		rc = tw_errf(err, TW_ERR_INVALID, "%s: no valid point (%s: %s)", cmd, label, s->pts[0].reason);
	}
	return rc;
}

int cmd_sweep(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	struct cli_job_opts o;
	struct tw_err err = { 0 };
	cli_job_opts_init(&o, ctx);
	struct rpt_sweep s;
	memset(&s, 0, sizeof(s));
	const char *db_path = NULL, *name = NULL;
	int status = 0;
	for (int i = 1; i < argc; i++) {
		int k = cli_job_opt(&o, argc, argv, &i, &err);
		if (k < 0) {
			status = cli_fail(&err);
			goto out;
		}
		if (k > 0)
			continue;
		const char *v;
		if (cli_is_opt(argv[i], "--vary")) {
			if (!(v = cli_value(argc, argv, &i, "--vary", &err)) ||
			    rpt_sweep_add_vary(&s, v, &err) != TW_OK) {
				status = cli_fail(&err);
				goto out;
			}
		} else if (cli_is_opt(argv[i], "--db")) {
			if (!(db_path = cli_value(argc, argv, &i, "--db", &err))) {
				status = cli_fail(&err);
				goto out;
			}
		} else if (cli_is_opt(argv[i], "--name")) {
			if (!(name = cli_value(argc, argv, &i, "--name", &err))) {
				status = cli_fail(&err);
				goto out;
			}
			if (!*name || strlen(name) > 100) {
				status = cli_usage_error("sweep", "--name: 1 to 100 characters");
				goto out;
			}
		} else {
			status = cli_usage_error("sweep", "unknown option '%s' (see twin sweep --help)", argv[i]);
			goto out;
		}
	}
	if (s.nvary == 0) {
		status = cli_usage_error("sweep", "--vary PATH=V1,V2,... is required (see twin sweep --help)");
		goto out;
	}
	if (cli_sweep_run(&o, "sweep", &s, db_path, name, &err) != TW_OK) {
		status = cli_fail(&err);
		goto out;
	}
	if (o.json) {
		cli_print_json(rpt_sweep_json(&s));
	} else {
		rpt_sweep_print(stdout, &s);
		if (db_path)
			printf("stored %s/... runs in %s (twin runs --db %s)\n", name ? name : "sweep",
			       db_path, db_path);
	}
out:
	rpt_sweep_release(&s);
	return status;
}
