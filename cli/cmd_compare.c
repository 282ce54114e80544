/* twin compare — two runs side by side, per category and per collective type. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../profile/profile.h"
#include "cli.h"

static const char compare_help[] =
	"usage: twin compare RUN_A RUN_B [--db FILE] [--json]\n\n"
	"Analyses both runs with the same code (twin profile analyze) and prints them side by\n"
	"side: time per step by category, exposed communication, stall split, and per collective\n"
	"type count, time, exposed time and busbw, with the difference B - A and the relative\n"
	"error (B - A) / A, and the NCCL algorithm/protocol each ran where the run records it\n"
	"(simulated runs; --json \"nccl_algo\", null otherwise). Put the reference first:\n"
	"'twin compare MEASURED PREDICTED' reads as the prediction's error. Works for any pair:\n"
	"simulated, executed or imported.\n\n"
	"  --db FILE   the database (default twin.db)\n"
	"  --json      machine-readable output\n";

static int analyze_run(struct prof_db *db, const char *run, struct prof_analysis *a, char *label,
		       size_t len, struct tw_err *err)
{
	struct prof_run_info info;
	struct trace t;
	if (prof_run_info(db, run, &info, err) != TW_OK ||
	    prof_load_trace(db, run, &t, NULL, err) != TW_OK)
		return 1;
	enum tw_result rc = prof_analyze(&t, a, err);
	trace_release(&t);
	if (rc != TW_OK) {
		char m[512];
		snprintf(m, sizeof(m), "%s", err->msg);
		tw_err_clear(err);
		tw_errf(err, rc, "run %" PRId64 ": cannot analyse: %s", info.id, m);
		return 1;
	}
	char name[sizeof(info.name)]; /* no control characters to the terminal */
	prof_name_display(name, sizeof(name), info.name);
	snprintf(label, len, "run %" PRId64 " (%s/%s%s%s)%s", info.id, prof_kind_name(info.kind),
		 info.backend, name[0] ? " " : "", name,
		 info.complete ? "" : " INCOMPLETE");
	return 0;
}

int cmd_compare(const struct cli_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	if (cli_wants_help(argc, argv)) {
		fputs(compare_help, stdout);
		return 0;
	}
	const char *path = "twin.db", *runs[2] = {NULL, NULL};
	int nruns = 0;
	bool json = false;
	struct tw_err err = {0};
	for (int i = 1; i < argc; i++) {
		if (cli_is_opt(argv[i], "--db")) {
			if (!(path = cli_value(argc, argv, &i, "--db", &err)))
				return cli_fail(&err);
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return cli_usage_error("compare", "unknown option '%s' (see twin compare --help)",
					       argv[i]);
		} else if (nruns < 2) {
			runs[nruns++] = argv[i];
		} else {
			return cli_usage_error("compare", "give exactly two runs (got '%s' as a third)",
					       argv[i]);
		}
	}
	if (nruns != 2)
		return cli_usage_error("compare", "give two runs: twin compare RUN_A RUN_B");
	struct prof_db *db;
	if (prof_db_open_existing(path, &db, &err) != TW_OK)
		return cli_fail(&err);
	struct prof_analysis a, b;
	char la[256], lb[256];
	int bad = analyze_run(db, runs[0], &a, la, sizeof(la), &err) ||
		  analyze_run(db, runs[1], &b, lb, sizeof(lb), &err);
	prof_db_close(db);
	if (bad)
		return cli_fail(&err);
	if (json)
		cli_print_json(prof_compare_json(&a, &b, la, lb));
	else
		prof_compare_print(stdout, &a, &b, la, lb);
	return 0;
}
