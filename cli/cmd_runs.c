/* twin runs — list the runs in the store. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../profile/profile.h"
#include "cli.h"

static const char runs_help[] =
	"usage: twin runs [--db FILE] [--json]\n\n"
	"Lists the runs in the store (default twin.db): id, kind (sim, exec, import), backend,\n"
	"ranks of the job and how many of them are traced (a symmetric simulation keeps one\n"
	"rank per role), events, whether the run was completely written, and when.\n\n"
	"  --db FILE   the database (default twin.db)\n"
	"  --json      machine-readable output\n";

int cmd_runs(const struct cli_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	if (cli_wants_help(argc, argv)) {
		fputs(runs_help, stdout);
		return 0;
	}
	const char *path = "twin.db";
	bool json = false;
	struct tw_err err = {0};
	for (int i = 1; i < argc; i++) {
		if (cli_is_opt(argv[i], "--db")) {
			if (!(path = cli_value(argc, argv, &i, "--db", &err)))
				return cli_fail(&err);
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else {
			return cli_usage_error("runs", "unexpected argument '%s' (see twin runs --help)",
					       argv[i]);
		}
	}
	struct prof_db *db;
	if (prof_db_open_existing(path, &db, &err) != TW_OK)
		return cli_fail(&err);
	struct prof_run_info *runs;
	size_t n;
	enum tw_result rc = prof_list_runs(db, &runs, &n, &err);
	prof_db_close(db);
	if (rc != TW_OK)
		return cli_fail(&err);
	if (json) {
		cJSON *arr = cJSON_CreateArray();
		for (size_t i = 0; i < n; i++) {
			const struct prof_run_info *r = &runs[i];
			cJSON *o = cJSON_CreateObject();
			cJSON_AddNumberToObject(o, "id", (double)r->id);
			cJSON_AddStringToObject(o, "kind", prof_kind_name(r->kind));
			cJSON_AddStringToObject(o, "name", r->name);
			cJSON_AddStringToObject(o, "backend", r->backend);
			cJSON_AddNumberToObject(o, "nranks", (double)r->nranks);
			cJSON_AddNumberToObject(o, "traced_ranks", (double)r->traced);
			cJSON_AddNumberToObject(o, "nevents", (double)r->nevents);
			cJSON_AddNumberToObject(o, "dropped", (double)r->dropped);
			cJSON_AddBoolToObject(o, "complete", r->complete);
			cJSON_AddStringToObject(o, "created_utc", r->created);
			cJSON_AddStringToObject(o, "host", r->host);
			cJSON_AddStringToObject(o, "tool_version", r->tool_version);
			cJSON_AddItemToArray(arr, o);
		}
		cli_print_json(arr);
	} else if (n == 0) {
		printf("no runs in %s\n", path);
	} else {
		printf("%5s  %-6s  %-8s  %6s  %6s  %10s  %-10s  %-20s  %s\n", "id", "kind",
		       "backend", "ranks", "traced", "events", "status", "created (UTC)", "name");
		for (size_t i = 0; i < n; i++) {
			const struct prof_run_info *r = &runs[i];
			char status[32];
			if (!r->complete)
				snprintf(status, sizeof(status), "incomplete");
			else if (r->dropped)
				snprintf(status, sizeof(status), "dropped %" PRId64, r->dropped);
			else
				snprintf(status, sizeof(status), "complete");
			char name[sizeof(r->name)]; /* no control characters to the terminal */
			prof_name_display(name, sizeof(name), r->name);
			printf("%5" PRId64 "  %-6s  %-8s  %6" PRId64 "  %6" PRId64 "  %10" PRId64
			       "  %-10s  %-20s  %s\n",
			       r->id, prof_kind_name(r->kind), r->backend, r->nranks, r->traced,
			       r->nevents,
			       status, r->created, name);
		}
	}
	free(runs);
	return 0;
}
