/* twin report — write a report directory (index.md, index.html, data files, gnuplot scripts,
 * charts) for one of: a scaling sweep, a what-if sweep (both simulated here from the simulate
 * inputs and --vary, as twin sweep does), or stored runs (breakdown, memory, compare,
 * timeline). The pages themselves are laid out by reports/. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../profile/profile.h"
#include "../reports/reports.h"
#include "cli.h"

#define MAX_RUNS 16

static void usage(FILE *f)
{
	fprintf(f, "usage: twin report KIND ... -o DIR [--force] [--db FILE] [--json]\n"
		   "\n"
		   "  twin report scaling   (simulate inputs) --vary gpus=N1,N2,... -o DIR [--name L]\n"
		   "  twin report whatif    (simulate inputs) --vary PATH=V1,V2,... [--vary ...] -o DIR\n"
		   "  twin report scaling|whatif [LABEL] -o DIR   # a stored sweep (twin sweep --db),\n"
		   "                                             # default: the newest one\n"
		   "  twin report breakdown RUN [RUN...] -o DIR\n"
		   "  twin report memory    RUN -o DIR   |   twin report memory (simulate inputs) -o DIR\n"
		   "  twin report compare   RUN_A RUN_B -o DIR          # e.g. predicted vs. measured\n"
		   "  twin report timeline  RUN [--step N] [--ranks N] -o DIR\n"
		   "\n"
		   "Writes DIR/index.md and DIR/index.html with tables and charts, the charts' data\n"
		   "(.dat, .csv) and gnuplot scripts (.gp), and renders the charts (PNG, or SVG when\n"
		   "gnuplot has no PNG terminal) when gnuplot is on PATH; without it the page says how\n"
		   "to render them. scaling and whatif simulate their points here (as twin sweep; with\n"
		   "--db they are stored too), or read a sweep stored by twin sweep --db [--name LABEL];\n"
		   "the other kinds read runs (id or name) from the store.\n"
		   "The report is written beside DIR and moved into place at the end; an existing\n"
		   "non-empty DIR is refused unless --force.\n"
		   "\n"
		   "  -o DIR            the report directory\n"
		   "      --force       replace DIR if it exists and is not empty\n"
		   "      --db FILE     the store (default twin.db)\n"
		   "      --step N      timeline: the step to draw (default: the first)\n"
		   "      --ranks N     timeline: at most N ranks (default 8)\n"
		   "\nSimulate inputs:\n%s",
		cli_job_opts_help);
}

static const char *const kinds[] = { "scaling", "whatif", "breakdown", "memory", "compare",
				     "timeline" };
enum { K_SCALING, K_WHATIF, K_BREAKDOWN, K_MEMORY, K_COMPARE, K_TIMELINE, K_NUM };

struct run_in {
	struct trace t;
	struct prof_analysis a;
	char label[160];
};

static enum tw_result load_run(struct prof_db *db, const char *run, struct run_in *r,
			       struct tw_err *err)
{
	struct prof_run_info info;
	int64_t id = -1;
	TW_CHECK(prof_run_info(db, run, &info, err));
	TW_CHECK(prof_load_trace(db, run, &r->t, &id, err));
	/* names go into gnuplot scripts, data files and pages: no control characters (a
	 * newline would end a gnuplot string and start a command), even from old stores */
	if (info.name[0])
		prof_name_display(r->label, sizeof(r->label), info.name);
	else
		snprintf(r->label, sizeof(r->label), "run %" PRId64, info.id);
	return prof_analyze(&r->t, &r->a, err);
}

/* A path made canonical: realpath of the path, or of its directory + its last name when it
 * does not exist (yet). false when not even its directory exists. */
static bool canonical(const char *path, char *out)
{
	if (realpath(path, out))
		return true;
	if (errno != ENOENT)
		return false;
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	char real[PATH_MAX];
	if (!realpath(dir, real))
		return false;
	return snprintf(out, PATH_MAX, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base) < PATH_MAX;
}

/* Whether canonical path in is outer or lies inside it. */
static bool within(const char *outer, const char *in)
{
	size_t n = strlen(outer);
	return !strncmp(outer, in, n) && (in[n] == '\0' || in[n] == '/' || !strcmp(outer, "/"));
}

/* The report replaces DIR whole (with --force it deletes the old one): DIR may not be or hold
 * an input (the store inputs[0], its -wal/-shm, a job file) or the current directory, nor be
 * a symbolic link (the rename would replace the link, not the directory it names). */
static int check_out_dir(const char *dir, const char *const *inputs, size_t ninputs)
{
	struct stat st;
	if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
		return cli_usage_error("report", "-o %s: is a symbolic link; give the directory itself",
				       dir);
	char out[PATH_MAX], in[PATH_MAX], cwd[PATH_MAX];
	if (!canonical(dir, out))
		return cli_usage_error("report", "-o %s: its parent directory does not exist", dir);
	if (realpath(".", cwd) && within(out, cwd))
		return cli_usage_error("report", "-o %s: holds the current directory; give a new "
				       "directory for the report", dir);
	static const char *const side[] = {"", "-wal", "-shm", "-journal"};
	for (size_t i = 0; i < ninputs; i++) {
		/* the store (inputs[0]) even before it exists (a sweep creates it); job inputs
		 * only when they name a file (else they are presets) */
		if (!inputs[i] || (i > 0 && access(inputs[i], F_OK) != 0) || !canonical(inputs[i], in))
			continue;
		for (size_t k = 0; k < sizeof(side) / sizeof(side[0]); k++) {
			char f[PATH_MAX + 16];
			snprintf(f, sizeof(f), "%s%s", in, side[k]);
			if (within(out, f))
				return cli_usage_error("report", "-o %s: %s the input %s%s; write the "
						       "report elsewhere", dir,
						       strcmp(out, f) ? "holds" : "is", inputs[i], side[k]);
		}
	}
	return -1;
}

static void describe_job(const struct cli_job_opts *o, bool sim, char *buf, size_t len)
{
	size_t u = (size_t)snprintf(buf, len, "%s: model %s on cluster %s", sim ? "Simulated" : "Job",
				    o->in.model, o->in.cluster);
	if (o->in.gpus > 0 && u < len)
		u += (size_t)snprintf(buf + u, len - u, ", %" PRId64 " GPUs", o->in.gpus);
	if (o->in.ds_config && u < len)
		u += (size_t)snprintf(buf + u, len - u, ", ds_config %s", o->in.ds_config);
	if (o->in.strategy && u < len)
		u += (size_t)snprintf(buf + u, len - u, ", strategy %s", o->in.strategy);
	for (int i = 0; i < o->in.nsets && u < len; i++)
		u += (size_t)snprintf(buf + u, len - u, "%s%s", i ? ", " : "; --set ", o->sets[i]);
	if (u < len)
		snprintf(buf + u, len - u, "%s", sim ? ". One optimizer step per point, symmetric mode (twin simulate)." : ".");
}

/* the memory of a job's plan, one entry per rank role */
static enum tw_result plan_roles_memory(struct cli_job_opts *o, struct rpt_mem_role **out,
					size_t *nout, struct tw_err *err)
{
	struct job *j = TW_NEW(struct job);
	enum tw_result rc = cli_job_load(o, "report memory", j, err);
	int64_t n = j->strat.pp > 0 ? j->strat.pp : 1;
	int64_t *reps = NULL, *w = NULL;
	struct rpt_mem_role *roles = NULL;
	if (rc != TW_OK)
		goto out;
	reps = TW_NEW_ARRAY(int64_t, (size_t)n);
	w = TW_NEW_ARRAY(int64_t, (size_t)n);
	n = plan_roles(j, reps, w, n);
	roles = TW_NEW_ARRAY(struct rpt_mem_role, (size_t)n);
	for (int64_t i = 0; i < n && rc == TW_OK; i++) {
		struct plan p;
		struct job_coord c;
		if ((rc = plan_rank(j, reps[i], &p, err)) != TW_OK)
			break;
		rc = plan_memory(j, &p, &roles[i].m, err);
		plan_release(&p);
		job_coord_of(j, reps[i], &c);
		snprintf(roles[i].role, sizeof(roles[i].role), "stage %" PRId64, c.pp);
		roles[i].rank = reps[i];
		roles[i].ranks = w[i];
	}
out:
	free(reps);
	free(w);
	free(j);
	if (rc != TW_OK) {
		free(roles);
		return rc;
	}
	*out = roles;
	*nout = (size_t)n;
	return TW_OK;
}

int cmd_report(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	struct tw_err err = { 0 };
	if (argc < 2 || argv[1][0] == '-')
		return cli_usage_error("report", "KIND is required: scaling, whatif, breakdown, memory, "
						 "compare or timeline (see twin report --help)");
	int kind = -1;
	for (int k = 0; k < K_NUM; k++)
		if (!strcmp(argv[1], kinds[k]))
			kind = k;
	if (kind < 0)
		return cli_usage_error("report", "unknown report '%s' (scaling, whatif, breakdown, memory, "
						 "compare, timeline)", argv[1]);
	struct cli_job_opts o;
	cli_job_opts_init(&o, ctx);
	struct rpt_sweep s;
	memset(&s, 0, sizeof(s));
	const char *dir = NULL, *db_path = NULL, *name = NULL, *runs[MAX_RUNS];
	int nruns = 0;
	bool force = false, job_opts = false, step_given = false, ranks_given = false;
	int64_t step = -1, max_ranks = 8;
	int status = 0;
	struct rpt_page *pg = NULL;
	struct run_in *in = NULL;
	struct prof_db *db = NULL;
	for (int i = 2; i < argc; i++) {
		int k = cli_job_opt(&o, argc, argv, &i, &err);
		if (k < 0)
			goto fail;
		if (k > 0) {
			job_opts |= strcmp(argv[i], "--json") != 0;
			continue;
		}
		const char *v;
		if (!strcmp(argv[i], "-o") || cli_is_opt(argv[i], "--output")) {
			if (!(dir = cli_value(argc, argv, &i, argv[i][1] == '-' ? "--output" : "-o", &err)))
				goto fail;
			if (!*dir) {
				status = cli_usage_error("report", "-o: empty directory name");
				goto out;
			}
		} else if (!strcmp(argv[i], "--force")) {
			force = true;
		} else if (cli_is_opt(argv[i], "--db")) {
			if (!(db_path = cli_value(argc, argv, &i, "--db", &err)))
				goto fail;
		} else if (cli_is_opt(argv[i], "--name")) {
			if (!(name = cli_value(argc, argv, &i, "--name", &err)))
				goto fail;
		} else if (cli_is_opt(argv[i], "--vary")) {
			if (!(v = cli_value(argc, argv, &i, "--vary", &err)) ||
			    rpt_sweep_add_vary(&s, v, &err) != TW_OK)
				goto fail;
		} else if (cli_is_opt(argv[i], "--step")) {
			if (!(v = cli_value(argc, argv, &i, "--step", &err)) ||
			    cli_parse_int("--step", v, 0, INT32_MAX, &step, &err) != TW_OK)
				goto fail;
			step_given = true;
		} else if (cli_is_opt(argv[i], "--ranks")) {
			if (!(v = cli_value(argc, argv, &i, "--ranks", &err)) ||
			    cli_parse_int("--ranks", v, 1, 256, &max_ranks, &err) != TW_OK)
				goto fail;
			ranks_given = true;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			status = cli_usage_error("report", "unknown option '%s' (see twin report --help)", argv[i]);
			goto out;
		} else {
			if (nruns >= MAX_RUNS) {
				status = cli_usage_error("report", "at most %d runs", MAX_RUNS);
				goto out;
			}
			runs[nruns++] = argv[i];
		}
	}
	/* what each kind takes */
	bool sweep = kind == K_SCALING || kind == K_WHATIF;
	bool plan_mem = kind == K_MEMORY && nruns == 0 && job_opts;
	if (!dir) {
		status = cli_usage_error("report", "-o DIR is required");
		goto out;
	}
	char dirbuf[4096];
	size_t dl = strlen(dir);
	while (dl > 1 && dir[dl - 1] == '/') /* "report/" is the directory "report" */
		dl--;
	if (dl >= sizeof(dirbuf)) {
		status = cli_usage_error("report", "-o: path longer than %zu characters", sizeof(dirbuf) - 1);
		goto out;
	}
	memcpy(dirbuf, dir, dl);
	dirbuf[dl] = '\0';
	dir = dirbuf;
	/* scaling / whatif: simulate (inputs and --vary) or read a stored sweep (LABEL or none) */
	bool stored = sweep && s.nvary == 0 && !job_opts;
	if (sweep && !stored && nruns > 0) {
		status = cli_usage_error("report", "%s: takes simulate inputs and --vary, or a stored sweep's "
						   "LABEL without them, not both ('%s')", kinds[kind], runs[0]);
		goto out;
	}
	if (stored && nruns > 1) {
		status = cli_usage_error("report", "%s: one stored sweep LABEL at most", kinds[kind]);
		goto out;
	}
	if (sweep && !stored && s.nvary == 0) {
		status = cli_usage_error("report", "%s: --vary %s is required", kinds[kind],
					 kind == K_SCALING ? "gpus=N1,N2,..." : "PATH=V1,V2,...");
		goto out;
	}
	if (!sweep && s.nvary > 0) {
		status = cli_usage_error("report", "%s: --vary is for scaling and whatif", kinds[kind]);
		goto out;
	}
	if (!sweep && !plan_mem && job_opts) {
		status = cli_usage_error("report", "%s: reads stored runs; simulate inputs (-m, -c, ...) "
						   "are for scaling, whatif and memory", kinds[kind]);
		goto out;
	}
	int need = kind == K_COMPARE ? 2 : 1;
	if (!sweep && !plan_mem && (nruns < need || (kind != K_BREAKDOWN && nruns > need))) {
		status = cli_usage_error("report", "%s: needs %s", kinds[kind],
					 kind == K_COMPARE ? "two runs: RUN_A RUN_B"
					 : kind == K_BREAKDOWN ? "one or more runs"
					 : kind == K_MEMORY ? "one run, or simulate inputs (-m -c ...)"
							     : "one run");
		goto out;
	}
	/* options a kind does not take are refused, not ignored */
	const char *stray = step_given && kind != K_TIMELINE    ? "--step"
			  : ranks_given && kind != K_TIMELINE ? "--ranks"
			  : name && !(sweep && !stored)       ? "--name"
			  : db_path && plan_mem               ? "--db"
							      : NULL;
	if (stray) {
		status = cli_usage_error("report", "%s%s does not take %s (see twin report --help)",
					 kinds[kind],
					 plan_mem ? " (simulate inputs)" : stored ? " (stored sweep)" : "",
					 stray);
		goto out;
	}
	if (kind == K_SCALING && !stored && (s.nvary != 1 || strcmp(s.vary[0].path, "gpus"))) {
		status = cli_usage_error("report", "scaling: needs exactly one --vary, over gpus "
						   "(e.g. --vary gpus=8,16,32); use 'report whatif' for other paths");
		goto out;
	}

	/* the report directory must not swallow its inputs */
	const char *uses_db = plan_mem || (sweep && !stored && !db_path) ? NULL
			    : db_path ? db_path : "twin.db";
	const char *inputs[] = {uses_db, o.in.model, o.in.cluster, o.in.strategy, o.in.ds_config};
	if ((status = check_out_dir(dir, inputs, sizeof(inputs) / sizeof(inputs[0]))) >= 0)
		goto out;
	status = 0;

	/* inputs first: a bad run or job fails before anything is written */
	char title[512], what[2048];
	if (stored) {
		char label[200];
		if (rpt_sweep_from_store(db_path ? db_path : "twin.db", nruns ? runs[0] : NULL, &s, label,
					 sizeof(label), &err) != TW_OK)
			goto fail;
		/* stored names go into scripts and pages: no control characters (old stores) */
		prof_name_display(label, sizeof(label), label);
		for (int k = 0; k < s.nvary; k++) {
			prof_name_display(s.vary[k].path, sizeof(s.vary[k].path), s.vary[k].path);
			for (int v = 0; v < s.vary[k].nvalues; v++)
				prof_name_display(s.vary[k].values[v], strlen(s.vary[k].values[v]) + 1,
						  s.vary[k].values[v]);
		}
		if (kind == K_SCALING && (s.nvary != 1 || strcmp(s.vary[0].path, "gpus"))) {
			tw_errf(&err, TW_ERR_INVALID, "report scaling: stored sweep '%s' does not vary gpus alone "
						       "(use 'report whatif %s')", label, label);
			goto fail;
		}
		snprintf(what, sizeof(what), "Stored sweep '%s' in %s: %zu simulated runs (twin sweep --db), "
					     "analysed from their traces.", label, db_path ? db_path : "twin.db", s.npts);
		snprintf(title, sizeof(title), "%s: sweep %s", kind == K_SCALING ? "Scaling" : "What-if", label);
	} else if (sweep) {
		if (cli_sweep_run(&o, kind == K_SCALING ? "report scaling" : "report whatif", &s, db_path,
				  name ? name : kinds[kind], &err) != TW_OK)
			goto fail;
		describe_job(&o, true, what, sizeof(what));
		snprintf(title, sizeof(title), "%s: %s on %s", kind == K_SCALING ? "Scaling" : "What-if",
			 o.in.model, o.in.cluster);
	} else if (!plan_mem) {
		if (prof_db_open_existing(db_path ? db_path : "twin.db", &db, &err) != TW_OK)
			goto fail;
		in = TW_NEW_ARRAY(struct run_in, (size_t)nruns);
		for (int r = 0; r < nruns; r++)
			if (load_run(db, runs[r], &in[r], &err) != TW_OK)
				goto fail;
		snprintf(title, sizeof(title), "%c%s: %s%s%s", kinds[kind][0] - 32, kinds[kind] + 1,
			 in[0].label, nruns > 1 ? " vs. " : "", nruns > 1 ? in[1].label : "");
		if (nruns > 2)
			snprintf(title, sizeof(title), "Breakdown of %d runs", nruns);
	}
	struct rpt_mem_role *roles = NULL;
	size_t nroles = 0;
	if (plan_mem) {
		if (plan_roles_memory(&o, &roles, &nroles, &err) != TW_OK)
			goto fail;
		describe_job(&o, false, what, sizeof(what));
		snprintf(title, sizeof(title), "Memory: %s on %s", o.in.model, o.in.cluster);
	}
	if (rpt_page_begin(dir, force, title, &pg, &err) != TW_OK) {
		free(roles);
		goto fail;
	}
	enum tw_result rc = TW_OK;
	switch (kind) {
	case K_SCALING:
		rc = rpt_scaling(pg, &s, what, &err);
		break;
	case K_WHATIF:
		rc = rpt_whatif(pg, &s, what, &err);
		break;
	case K_BREAKDOWN: {
		struct prof_analysis *a = TW_NEW_ARRAY(struct prof_analysis, (size_t)nruns);
		const char **names = TW_NEW_ARRAY(const char *, (size_t)nruns);
		for (int r = 0; r < nruns; r++) {
			a[r] = in[r].a;
			names[r] = in[r].label;
		}
		rc = rpt_breakdown(pg, a, names, (size_t)nruns, &err);
		free(a);
		free(names);
		break;
	}
	case K_MEMORY:
		rc = plan_mem ? rpt_memory_plan(pg, roles, nroles, what, &err)
			      : rpt_memory_run(pg, &in[0].t, in[0].label, &err);
		break;
	case K_COMPARE:
		rc = rpt_compare(pg, &in[0].a, &in[1].a, in[0].label, in[1].label, &err);
		break;
	case K_TIMELINE:
		rc = rpt_timeline(pg, &in[0].t, in[0].label, step, max_ranks, &err);
		break;
	}
	free(roles);
	if (rc == TW_OK)
		rc = rpt_page_commit(pg, &err);
	else
		rpt_page_abort(pg), pg = NULL;
	if (rc != TW_OK)
		goto fail;
	struct rpt_result res;
	rpt_page_result(pg, &res);
	if (o.json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "report", kinds[kind]);
		cJSON_AddStringToObject(j, "dir", dir);
		cJSON_AddNumberToObject(j, "charts", res.charts);
		cJSON_AddNumberToObject(j, "rendered", res.rendered);
		cJSON_AddBoolToObject(j, "gnuplot", res.gnuplot);
		if (sweep)
			cJSON_AddItemToObject(j, "sweep", rpt_sweep_json(&s));
		cli_print_json(j);
	} else {
		if (sweep)
			rpt_sweep_print(stdout, &s);
		printf("wrote %s/index.md and %s/index.html: %d chart%s, ", dir, dir, res.charts,
		       res.charts == 1 ? "" : "s");
		if (res.charts == 0)
			printf("nothing to draw\n");
		else if (res.rendered == res.charts)
			printf("all rendered\n");
		else if (!res.gnuplot)
			printf("not rendered (gnuplot not on PATH: run gnuplot on the .gp files in %s)\n", dir);
		else
			printf("%d rendered (see %s/gnuplot.log)\n", res.rendered, dir);
	}
	goto out;
fail:
	status = cli_fail(&err);
out:
	rpt_page_free(pg);
	if (in) {
		for (int r = 0; r < nruns; r++)
			trace_release(&in[r].t);
		free(in);
	}
	if (db)
		prof_db_close(db);
	rpt_sweep_release(&s);
	return status;
}
