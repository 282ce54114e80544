/* Fuzz target: the Nsight Systems SQLite importer. The input is an SQL script (the seed is the
 * fixture that follows nsys's schema), so both the schema and the values are fuzzed; it is
 * executed into a fresh database file with bounded time, which is then imported and analysed. */
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile/profile.h"
#include "fuzz_util.h"

/* stop runaway SQL (recursive CTEs, huge blobs) after ~1e6 VM steps */
static int progress(void *arg)
{
	int *steps = arg;
	return ++*steps > 1000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[128];
	snprintf(path, sizeof(path), "/tmp/twin-fuzz-%d-nsys.sqlite", (int)getpid());
	unlink(path);
	sqlite3 *db = NULL;
	if (sqlite3_open(path, &db) != SQLITE_OK) {
		sqlite3_close(db);
		return 0;
	}
	sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1 << 20);
	int steps = 0;
	sqlite3_progress_handler(db, 1000, progress, &steps);
	char *sql = malloc(size + 1);
	memcpy(sql, data, size);
	sql[size] = '\0';
	sqlite3_exec(db, sql, NULL, NULL, NULL); /* partial scripts are fine: import what exists */
	free(sql);
	sqlite3_close(db);

	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 1);
	struct tw_err err = {0};
	if (prof_import_nsys(path, 0, &t, &err) == TW_OK) {
		trace_sort(&t);
		struct prof_analysis a;
		tw_err_clear(&err);
		prof_analyze(&t, &a, &err);
	}
	trace_release(&t);
	unlink(path);
	return 0;
}
