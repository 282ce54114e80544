/* The store: round trip, schema versions (newer refused, older migrated), corrupt files, a
 * writer killed mid-write, concurrent writers. */
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../profile/profile.h"
#include "test.h"

static void tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "/tmp/twin_test_store_%d_%s", (int)getpid(), name);
	char x[600];
	unlink(buf);
	snprintf(x, sizeof(x), "%s-wal", buf);
	unlink(x);
	snprintf(x, sizeof(x), "%s-shm", buf);
	unlink(x);
}

static void rm_db(const char *p)
{
	char x[600];
	unlink(p);
	snprintf(x, sizeof(x), "%s-wal", p);
	unlink(x);
	snprintf(x, sizeof(x), "%s-shm", p);
	unlink(x);
}

static void make_trace(struct trace *t, int rank, size_t n)
{
	trace_init(t, TRACE_KIND_EXEC, rank + 1);
	const char *names[] = {"gemm_fwd", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "flash"};
	const enum trace_cat cats[] = {TRACE_GEMM, TRACE_ALL_REDUCE, TRACE_ATTN};
	for (size_t i = 0; i < n; i++) {
		struct trace_event e = {.rank = rank, .device = 0, .stream = (int)(i % 3),
					.cat = cats[i % 3], .step = (int)(i / 100), .op_id = (int)i,
					.layer = 2, .micro = 1, .stage = 0, .phase = 1,
					.start_ns = (int64_t)i * 1000, .end_ns = (int64_t)i * 1000 + 900,
					.bytes = (int64_t)i, .flops = 1.5 * (double)i, .group_size = 8,
					.flags = i % 7 == 0 ? TRACE_F_RECOMPUTE : 0,
					.comm = (int64_t)(i % 5)};
		e.name = trace_intern(t, names[i % 3]);
		trace_add(t, &e);
	}
}

static int64_t sql_int(const char *path, const char *sql)
{
	sqlite3 *h;
	int64_t v = -1;
	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
		sqlite3_busy_timeout(h, 5000);
		sqlite3_stmt *st;
		if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
			if (sqlite3_step(st) == SQLITE_ROW)
				v = sqlite3_column_int64(st, 0);
			sqlite3_finalize(st);
		}
	}
	sqlite3_close(h);
	return v;
}

static int sql_exec(const char *path, const char *sql)
{
	sqlite3 *h;
	int rc = sqlite3_open(path, &h);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
	sqlite3_close(h);
	return rc;
}

static void test_roundtrip(struct test_ctx *T)
{
	char path[512];
	tmp_path(path, sizeof(path), "rt.db");
	struct prof_db *db;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	if (!db)
		return;
	struct trace t;
	make_trace(&t, 1, 300);
	struct trace_mem_sample m = {1, PLAN_DEV_GPU, PLAN_MEM_PARAMS, 5, 1234};
	trace_add_mem(&t, &m);
	t.peak_mem = TW_NEW_ARRAY(int64_t, 2);
	t.peak_mem[1] = 4321;
	struct prof_run_meta meta = {.kind = TRACE_KIND_EXEC, .name = "rt", .backend = "host",
				     .job_json = "{\"x\":1}", .nranks = 2};
	int64_t id = 0;
	CHECK_EQ_INT(T, prof_store_trace(db, &meta, &t, &id, &err), TW_OK);
	CHECK(T, id > 0);
	struct trace u;
	int64_t id2 = 0;
	CHECK_EQ_INT(T, prof_load_trace(db, "rt", &u, &id2, &err), TW_OK);
	CHECK_EQ_INT(T, id2, id);
	CHECK_EQ_INT(T, u.nev, t.nev);
	CHECK_EQ_INT(T, u.kind, TRACE_KIND_EXEC);
	bool same = u.nev == t.nev;
	for (size_t i = 0; same && i < t.nev; i++) {
		const struct trace_event *a = &t.ev[i], *b = &u.ev[i];
		same = a->rank == b->rank && a->stream == b->stream && a->cat == b->cat &&
		       a->step == b->step && a->op_id == b->op_id && a->start_ns == b->start_ns &&
		       a->end_ns == b->end_ns && a->bytes == b->bytes && a->flops == b->flops &&
		       a->group_size == b->group_size && a->flags == b->flags && a->comm == b->comm &&
		       a->layer == b->layer && a->phase == b->phase &&
		       strcmp(trace_name(&t, a), trace_name(&u, b)) == 0;
		if (!same)
			printf("#   event %zu differs\n", i);
	}
	CHECK(T, same);
	CHECK_EQ_INT(T, u.nmem, 1);
	CHECK(T, u.peak_mem && u.peak_mem[1] == 4321);
	trace_release(&u);
	struct prof_run_info *runs;
	size_t n;
	CHECK_EQ_INT(T, prof_list_runs(db, &runs, &n, &err), TW_OK);
	CHECK_EQ_INT(T, n, 1);
	if (n == 1) {
		CHECK(T, runs[0].complete);
		CHECK_EQ_INT(T, runs[0].nevents, 300);
		CHECK(T, strcmp(runs[0].backend, "host") == 0);
	}
	free(runs);
	/* the derived step rows: 3 steps of rank 1 */
	CHECK_EQ_INT(T, sql_int(path, "SELECT count(*) FROM steps"), 3);
	CHECK_EQ_INT(T, sql_int(path, "SELECT count(*) FROM names"), 3);
	/* unknown runs */
	CHECK_EQ_INT(T, prof_load_trace(db, "nope", &u, NULL, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "no run 'nope'");
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_load_trace(db, "99", &u, NULL, &err), TW_ERR_INVALID);
	trace_release(&t);
	prof_db_close(db);
	CHECK_EQ_INT(T, sql_int(path, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'"), 1);
	rm_db(path);
}

static void test_newer_schema(struct test_ctx *T)
{
	char path[512];
	tmp_path(path, sizeof(path), "new.db");
	struct prof_db *db;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	prof_db_close(db);
	CHECK_EQ_INT(T, sql_exec(path, "UPDATE schema_version SET version = 99"), SQLITE_OK);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_ERR_INVALID);
	CHECK(T, db == NULL);
	CHECK_STR_CONTAINS(T, err.msg, "schema version 99 is newer");
	rm_db(path);
}

/* A store of schema version 1 (no runs.dropped / runs.source / events.flags / steps): one run
 * of one gemm event. */
static const char v1_store[] =
	"CREATE TABLE schema_version(version INTEGER NOT NULL);"
	"INSERT INTO schema_version VALUES (1);"
	"CREATE TABLE runs(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT,"
	" backend TEXT, job_json TEXT, tool_version TEXT, host TEXT, created_utc TEXT NOT NULL,"
	" nranks INTEGER NOT NULL DEFAULT 0, complete INTEGER NOT NULL DEFAULT 0,"
	" nevents INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE categories(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"CREATE TABLE names(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"CREATE TABLE events(run_id INTEGER NOT NULL, rank INTEGER NOT NULL,"
	" device INTEGER NOT NULL, stream INTEGER NOT NULL, category INTEGER NOT NULL,"
	" step INTEGER NOT NULL, op_id INTEGER NOT NULL, layer INTEGER NOT NULL,"
	" micro INTEGER NOT NULL, stage INTEGER NOT NULL, phase INTEGER NOT NULL,"
	" start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, bytes INTEGER NOT NULL,"
	" flops REAL NOT NULL, group_size INTEGER NOT NULL, name_id INTEGER NOT NULL);"
	"CREATE TABLE mem_samples(run_id INTEGER NOT NULL, rank INTEGER NOT NULL,"
	" device INTEGER NOT NULL, category INTEGER NOT NULL, t_ns INTEGER NOT NULL,"
	" bytes INTEGER NOT NULL);"
	"CREATE TABLE peak_mem(run_id INTEGER NOT NULL, rank INTEGER NOT NULL,"
	" bytes INTEGER NOT NULL, PRIMARY KEY(run_id, rank));"
	"INSERT INTO runs VALUES (1, 'sim', 'old', 'sim', NULL, '0.0.1', 'h', '2026-01-01', 1, 1, 1);"
	"INSERT INTO names VALUES (1, 'gemm');"
	"INSERT INTO events VALUES (1, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, 100, 200, 0, 0, 0, 1);";

/* A version-1 database (no runs.dropped / runs.source / events.flags / steps) is migrated. */
static void test_migrate_v1(struct test_ctx *T)
{
	char path[512];
	tmp_path(path, sizeof(path), "v1.db");
	CHECK_EQ_INT(T, sql_exec(path, v1_store), SQLITE_OK);
	struct prof_db *db;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	if (!db)
		return;
	CHECK_EQ_INT(T, sql_int(path, "SELECT version FROM schema_version"), 2);
	struct trace u;
	CHECK_EQ_INT(T, prof_load_trace(db, "old", &u, NULL, &err), TW_OK);
	CHECK_EQ_INT(T, u.nev, 1);
	if (u.nev == 1)
		CHECK_EQ_INT(T, u.ev[0].end_ns, 200);
	trace_release(&u);
	struct trace t;
	make_trace(&t, 0, 10);
	struct prof_run_meta meta = {.kind = TRACE_KIND_SIM, .backend = "sim", .nranks = 1};
	int64_t id;
	CHECK_EQ_INT(T, prof_store_trace(db, &meta, &t, &id, &err), TW_OK);
	trace_release(&t);
	prof_db_close(db);
	rm_db(path);
}

static void test_corrupt_files(struct test_ctx *T)
{
	char path[512];
	tmp_path(path, sizeof(path), "junk.db");
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 300; i++)
		fputs("this is not a database; ", f);
	fclose(f);
	struct prof_db *db;
	struct tw_err err = {0};
	CHECK(T, prof_db_open(path, &db, &err) != TW_OK);
	CHECK_STR_CONTAINS(T, err.msg, "not a valid twin database");
	rm_db(path);
	/* a real database with its first page damaged after the header */
	tmp_path(path, sizeof(path), "dmg.db");
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	prof_db_close(db);
	sql_exec(path, "PRAGMA journal_mode=DELETE");
	f = fopen(path, "r+b");
	fseek(f, 100, SEEK_SET);
	for (int i = 0; i < 3000; i++)
		fputc(0xA5, f);
	fclose(f);
	tw_err_clear(&err);
	CHECK(T, prof_db_open(path, &db, &err) != TW_OK);
	CHECK(T, strlen(err.msg) > 0 && strchr(err.msg, '\n') == NULL);
	CHECK_STR_CONTAINS(T, err.msg, path);
	rm_db(path);
	/* an SQLite file that is not ours */
	tmp_path(path, sizeof(path), "other.db");
	sql_exec(path, "CREATE TABLE StringIds(id INTEGER, value TEXT)");
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "not a twin database");
	rm_db(path);
	/* a directory that does not exist */
	tw_err_clear(&err);
	CHECK(T, prof_db_open("/nonexistent-dir/x.db", &db, &err) != TW_OK);
	CHECK_STR_CONTAINS(T, err.msg, "/nonexistent-dir/x.db");
}

/* A child stores a big trace (one transaction, from the run's row to its completion); it is
 * killed with SIGKILL once its inserts have spilled into the write-ahead log. The database
 * must open, pass integrity_check, hold no run and no event of it (nothing half-written), and
 * take new runs. */
static void test_killed_writer(struct test_ctx *T)
{
	char path[512], wal[520];
	tmp_path(path, sizeof(path), "kill.db");
	snprintf(wal, sizeof(wal), "%s-wal", path);
	struct prof_db *db;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	prof_db_close(db);
	struct stat st0;
	off_t wal0 = stat(wal, &st0) == 0 ? st0.st_size : 0;
	struct trace t;
	make_trace(&t, 0, 1500000);
	pid_t pid = fork();
	if (pid == 0) {
		struct prof_db *cdb;
		struct tw_err cerr = {0};
		if (prof_db_open(path, &cdb, &cerr) != TW_OK)
			_exit(3);
		struct prof_run_meta meta = {.kind = TRACE_KIND_EXEC, .name = "killed",
					     .backend = "host", .nranks = 1};
		int64_t id;
		prof_store_trace(cdb, &meta, &t, &id, &cerr);
		_exit(0);
	}
	/* wait until the uncommitted inserts reach the log (4 MiB past where it was) */
	int waited = 0;
	struct stat st;
	while (!(stat(wal, &st) == 0 && st.st_size > wal0 + 4 * TW_MIB) && waited < 4000) {
		usleep(5000);
		waited++;
	}
	CHECK(T, waited < 4000);
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	CHECK(T, WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	trace_release(&t);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	if (!db)
		return;
	CHECK_EQ_INT(T, sql_int(path, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
	struct prof_run_info *runs;
	size_t n;
	CHECK_EQ_INT(T, prof_list_runs(db, &runs, &n, &err), TW_OK);
	CHECK_EQ_INT(T, n, 0);
	free(runs);
	CHECK_EQ_INT(T, sql_int(path, "SELECT count(*) FROM events"), 0);
	struct trace s;
	make_trace(&s, 0, 50);
	struct prof_run_meta meta = {.kind = TRACE_KIND_SIM, .backend = "sim", .nranks = 1};
	int64_t id;
	CHECK_EQ_INT(T, prof_store_trace(db, &meta, &s, &id, &err), TW_OK);
	trace_release(&s);
	prof_db_close(db);
	rm_db(path);
}

/* Four processes (ranks) write three runs each into one file at once. */
static void test_concurrent_writers(struct test_ctx *T)
{
	char path[512];
	tmp_path(path, sizeof(path), "conc.db");
	enum { NPROC = 4, NRUNS = 3, NEV = 20000 };
	pid_t pids[NPROC];
	for (int p = 0; p < NPROC; p++) {
		pids[p] = fork();
		if (pids[p] == 0) {
			struct prof_db *cdb;
			struct tw_err cerr = {0};
			if (prof_db_open(path, &cdb, &cerr) != TW_OK) {
				fprintf(stderr, "child %d: %s\n", p, cerr.msg);
				_exit(3);
			}
			struct trace t;
			make_trace(&t, p, NEV);
			for (int r = 0; r < NRUNS; r++) {
				struct prof_run_meta meta = {.kind = TRACE_KIND_EXEC, .backend = "host",
							     .nranks = NPROC};
				int64_t id;
				if (prof_store_trace(cdb, &meta, &t, &id, &cerr) != TW_OK) {
					fprintf(stderr, "child %d: %s\n", p, cerr.msg);
					_exit(4);
				}
			}
			trace_release(&t);
			prof_db_close(cdb);
			_exit(0);
		}
	}
	int ok = 0;
	for (int p = 0; p < NPROC; p++) {
		int status;
		waitpid(pids[p], &status, 0);
		ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	CHECK_EQ_INT(T, ok, NPROC);
	CHECK_EQ_INT(T, sql_int(path, "SELECT count(*) FROM runs WHERE complete = 1"), NPROC * NRUNS);
	CHECK_EQ_INT(T, sql_int(path, "SELECT count(*) FROM events"), (int64_t)NPROC * NRUNS * NEV);
	CHECK_EQ_INT(T, sql_int(path, "SELECT count(*) FROM names"), 3);
	rm_db(path);
}

/* The pieces the injection library uses: begin, two appends, finish with dropped records. */
static void test_incremental(struct test_ctx *T)
{
	char path[512];
	tmp_path(path, sizeof(path), "inc.db");
	struct prof_db *db;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	if (!db)
		return;
	struct prof_run_meta meta = {.kind = TRACE_KIND_EXEC, .backend = "cupti", .nranks = 1};
	int64_t id;
	CHECK_EQ_INT(T, prof_run_begin(db, &meta, &id, &err), TW_OK);
	struct trace a, b;
	make_trace(&a, 0, 10);
	make_trace(&b, 0, 5);
	b.ev[0].name = trace_intern(&b, "another name");
	CHECK_EQ_INT(T, prof_run_append(db, id, &a, &err), TW_OK);
	struct prof_run_info info;
	char ids[32];
	snprintf(ids, sizeof(ids), "%lld", (long long)id);
	CHECK_EQ_INT(T, prof_run_info(db, ids, &info, &err), TW_OK);
	CHECK(T, !info.complete);
	CHECK_EQ_INT(T, prof_run_append(db, id, &b, &err), TW_OK);
	CHECK_EQ_INT(T, prof_run_finish(db, id, 17, &err), TW_OK);
	CHECK_EQ_INT(T, prof_run_info(db, ids, &info, &err), TW_OK);
	CHECK(T, info.complete);
	CHECK_EQ_INT(T, info.dropped, 17);
	CHECK_EQ_INT(T, info.nevents, 15);
	struct trace u;
	CHECK_EQ_INT(T, prof_load_trace(db, ids, &u, NULL, &err), TW_OK);
	CHECK_EQ_INT(T, u.nev, 15);
	int found = 0;
	for (size_t i = 0; i < u.nev; i++)
		found += strcmp(trace_name(&u, &u.ev[i]), "another name") == 0;
	CHECK_EQ_INT(T, found, 1);
	trace_release(&u);
	trace_release(&a);
	trace_release(&b);
	prof_db_close(db);
	rm_db(path);
}

/* Readers change nothing: a foreign SQLite file and an empty file stay as they were (no WAL
 * switch), both are refused; a version-1 store is read as it is, not migrated. */
static void test_readers_change_nothing(struct test_ctx *T)
{
	char path[512];
	struct prof_db *db;
	struct tw_err err = {0};
	tmp_path(path, sizeof(path), "foreign.db");
	CHECK_EQ_INT(T, sql_exec(path, "CREATE TABLE StringIds(id INTEGER, value TEXT)"), SQLITE_OK);
	CHECK_EQ_INT(T, prof_db_open_existing(path, &db, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "not a twin database");
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_ERR_INVALID); /* a writer neither */
	CHECK_EQ_INT(T, sql_int(path, "SELECT COUNT(*) FROM pragma_journal_mode WHERE journal_mode = 'delete'"), 1);
	rm_db(path);
	tmp_path(path, sizeof(path), "empty.db");
	FILE *f = fopen(path, "w");
	fclose(f);
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open_existing(path, &db, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "empty file, not a twin store");
	struct stat st;
	CHECK(T, stat(path, &st) == 0 && st.st_size == 0);
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK); /* a writer initialises it */
	prof_db_close(db);
	rm_db(path);
	/* version 1, read by a reader: columns added later read as defaults, the file stays v1 */
	tmp_path(path, sizeof(path), "v1r.db");
	CHECK_EQ_INT(T, sql_exec(path, v1_store), SQLITE_OK);
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open_existing(path, &db, &err), TW_OK);
	if (db) {
		struct trace u;
		CHECK_EQ_INT(T, prof_load_trace(db, "old", &u, NULL, &err), TW_OK);
		CHECK_EQ_INT(T, u.nev, 1);
		trace_release(&u);
		struct prof_run_info *runs = NULL;
		size_t n = 0;
		CHECK_EQ_INT(T, prof_list_runs(db, &runs, &n, &err), TW_OK);
		CHECK_EQ_INT(T, n, 1);
		free(runs);
		prof_db_close(db);
	}
	CHECK_EQ_INT(T, sql_int(path, "SELECT version FROM schema_version"), 1);
	rm_db(path);
}

/* Run names: no control characters, UTF-8, not a number; ids are digits only; a run's events
 * outside its ranks are refused on load. */
static void test_names_and_ranks(struct test_ctx *T)
{
	struct tw_err err = {0};
	const char *bad[] = {"x\n!touch /tmp/p", "a\tb", "\x1b[31m", "42", " 1", "+1", "-3", "\xff\xfe", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tw_err_clear(&err);
		CHECK_EQ_INT(T, prof_run_name_check(bad[i], "--name", &err), TW_ERR_INVALID);
		CHECK(T, strchr(err.msg, '\n') == NULL); /* one line, even for a newline name */
	}
	const char *good[] = {"sweep/gpus=8", "1e5", "run 1", "\xc3\xa9t\xc3\xa9", "v1.2"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		tw_err_clear(&err);
		CHECK_EQ_INT(T, prof_run_name_check(good[i], "--name", &err), TW_OK);
	}
	char path[512];
	tmp_path(path, sizeof(path), "names.db");
	struct prof_db *db;
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	if (!db)
		return;
	struct trace t;
	make_trace(&t, 0, 10);
	int64_t id = 0;
	struct prof_run_meta meta = {.kind = TRACE_KIND_SIM, .name = "a\nb", .backend = "sim", .nranks = 1};
	CHECK_EQ_INT(T, prof_store_trace(db, &meta, &t, &id, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "control characters");
	meta.name = "ok";
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_store_trace(db, &meta, &t, &id, &err), TW_OK);
	trace_release(&t);
	struct prof_run_info info;
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_run_info(db, "+1", &info, &err), TW_ERR_INVALID);
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_run_info(db, "1", &info, &err), TW_OK);
	prof_db_close(db);
	/* a crafted rank far beyond the run's: refused, not allocated for */
	CHECK_EQ_INT(T, sql_exec(path, "UPDATE events SET rank = 2000000000 WHERE rowid = 3"), SQLITE_OK);
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open_existing(path, &db, &err), TW_OK);
	if (db) {
		struct trace u;
		CHECK_EQ_INT(T, prof_load_trace(db, "ok", &u, NULL, &err), TW_ERR_INVALID);
		CHECK_STR_CONTAINS(T, err.msg, "out of the run's ranks");
		prof_db_close(db);
	}
	rm_db(path);
}

/* prof_db_discard removes a store its open created and nothing was stored in; never one
 * that holds a run or existed before. */
static void test_discard(struct test_ctx *T)
{
	char path[512];
	tmp_path(path, sizeof(path), "discard.db");
	struct prof_db *db;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	prof_db_discard(db);
	CHECK(T, access(path, F_OK) != 0);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	struct trace t;
	make_trace(&t, 0, 5);
	int64_t id;
	struct prof_run_meta meta = {.kind = TRACE_KIND_SIM, .backend = "sim", .nranks = 1};
	CHECK_EQ_INT(T, prof_store_trace(db, &meta, &t, &id, &err), TW_OK);
	prof_db_discard(db); /* holds a run: kept */
	CHECK(T, access(path, F_OK) == 0);
	CHECK_EQ_INT(T, prof_db_open(path, &db, &err), TW_OK);
	prof_db_discard(db); /* existed before this open: kept */
	CHECK(T, access(path, F_OK) == 0);
	trace_release(&t);
	rm_db(path);
	/* a directory and a missing parent are the user's errors */
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open("/tmp", &db, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "is a directory");
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_db_open("/nonexistent-dir/x.db", &db, &err), TW_ERR_INVALID);
}

int main(void)
{
	struct test_ctx T = {0};
	TEST_RUN(&T, test_roundtrip);
	TEST_RUN(&T, test_newer_schema);
	TEST_RUN(&T, test_migrate_v1);
	TEST_RUN(&T, test_corrupt_files);
	TEST_RUN(&T, test_killed_writer);
	TEST_RUN(&T, test_concurrent_writers);
	TEST_RUN(&T, test_incremental);
	TEST_RUN(&T, test_readers_change_nothing);
	TEST_RUN(&T, test_names_and_ranks);
	TEST_RUN(&T, test_discard);
	return test_done(&T);
}
