/* store — runs and their traces in one SQLite database (schema: profile/SCHEMA.md).
 *
 * WAL mode so readers never block the writer; a busy timeout so several processes (ranks) can
 * write one file; every write transaction is BEGIN IMMEDIATE so two writers never deadlock on
 * a read-to-write upgrade. Readers open the file read-only and write nothing (no WAL switch,
 * no migration: older layouts are read as they are). A file that is not a twin store is
 * refused before anything in it changes. Every statement is finalized on every path. */
#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct prof_db {
	sqlite3 *h;
	char *path;
	bool created;         /* this open created the file (removed again if left without runs) */
	bool has_v2_runs;     /* runs.dropped / runs.source exist (schema version 2) */
	bool has_v2_events;   /* events.flags / events.comm exist */
};

#define BUSY_TIMEOUT_MS 30000

static const char *const kind_names[] = {"sim", "exec", "import"};

const char *prof_kind_name(enum trace_kind k)
{
	return (int)k >= 0 && k <= TRACE_KIND_IMPORT ? kind_names[k] : "unknown";
}

static enum tw_result sql_fail(struct prof_db *db, struct tw_err *err, const char *what)
{
	int rc = sqlite3_errcode(db->h);
	if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
		return tw_errf(err, TW_ERR_INVALID, "%s: not a valid twin database (%s)", db->path,
			       sqlite3_errmsg(db->h));
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		return tw_errf(err, TW_ERR_SQLITE, "%s: database busy for %d s while %s", db->path,
			       BUSY_TIMEOUT_MS / 1000, what);
	if (rc == SQLITE_READONLY || rc == SQLITE_PERM || rc == SQLITE_CANTOPEN ||
	    rc == SQLITE_AUTH)
		return tw_errf(err, TW_ERR_INVALID,
			       "%s: cannot write the database (read-only file or directory: %s)",
			       db->path, sqlite3_errmsg(db->h));
	return tw_errf(err, TW_ERR_SQLITE, "%s: %s: %s", db->path, what, sqlite3_errmsg(db->h));
}

static enum tw_result exec_sql(struct prof_db *db, const char *sql, struct tw_err *err)
{
	/* SQLite returns SQLITE_BUSY at once, without its busy handler, when waiting could
	 * deadlock (e.g. two new connections switching a fresh file to WAL); these statements
	 * hold no transaction of ours yet, so retry them for up to the busy timeout */
	int64_t deadline = tw_now_ns() + (int64_t)BUSY_TIMEOUT_MS * 1000000;
	int rc;
	while ((rc = sqlite3_exec(db->h, sql, NULL, NULL, NULL)) == SQLITE_BUSY &&
	       tw_now_ns() < deadline)
		sqlite3_sleep(10);
	if (rc != SQLITE_OK)
		return sql_fail(db, err, "executing SQL");
	return TW_OK;
}

static enum tw_result prepare(struct prof_db *db, const char *sql, sqlite3_stmt **st,
			      struct tw_err *err)
{
	if (sqlite3_prepare_v2(db->h, sql, -1, st, NULL) != SQLITE_OK) {
		*st = NULL;
		return sql_fail(db, err, "preparing a statement");
	}
	return TW_OK;
}

static enum tw_result has_column(struct prof_db *db, const char *table, const char *column,
				 bool *out, struct tw_err *err)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "PRAGMA table_info(%s)", table);
	sqlite3_stmt *st;
	TW_CHECK(prepare(db, sql, &st, err));
	*out = false;
	int s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *c = sqlite3_column_text(st, 1);
		if (c && strcmp((const char *)c, column) == 0)
			*out = true;
	}
	sqlite3_finalize(st);
	return s == SQLITE_DONE ? TW_OK : sql_fail(db, err, "reading the schema");
}

/* ---- schema ------------------------------------------------------------------------------ */

/* Version 1 (the first layout) lacked runs.dropped / runs.source and events.flags / comm;
 * version 2 adds them and the derived step tables. */
static const char schema_v2[] =
	"CREATE TABLE schema_version(version INTEGER NOT NULL);"
	"CREATE TABLE runs(id INTEGER PRIMARY KEY,"
	" kind TEXT NOT NULL CHECK(kind IN ('sim','exec','import')),"
	" name TEXT, backend TEXT, job_json TEXT, tool_version TEXT, host TEXT,"
	" created_utc TEXT NOT NULL, nranks INTEGER NOT NULL DEFAULT 0,"
	" complete INTEGER NOT NULL DEFAULT 0, nevents INTEGER NOT NULL DEFAULT 0,"
	" dropped INTEGER NOT NULL DEFAULT 0, source TEXT);"
	"CREATE TABLE categories(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"CREATE TABLE names(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
	"CREATE TABLE events(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, device INTEGER NOT NULL, stream INTEGER NOT NULL,"
	" category INTEGER NOT NULL REFERENCES categories(id), step INTEGER NOT NULL,"
	" op_id INTEGER NOT NULL, layer INTEGER NOT NULL, micro INTEGER NOT NULL,"
	" stage INTEGER NOT NULL, phase INTEGER NOT NULL,"
	" start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, bytes INTEGER NOT NULL,"
	" flops REAL NOT NULL, group_size INTEGER NOT NULL,"
	" name_id INTEGER NOT NULL REFERENCES names(id), flags INTEGER NOT NULL DEFAULT 0,"
	" comm INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX events_by_run ON events(run_id, rank, start_ns);"
	"CREATE TABLE mem_samples(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, device INTEGER NOT NULL, category INTEGER NOT NULL,"
	" t_ns INTEGER NOT NULL, bytes INTEGER NOT NULL);"
	"CREATE INDEX mem_by_run ON mem_samples(run_id);"
	"CREATE TABLE peak_mem(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, bytes INTEGER NOT NULL, PRIMARY KEY(run_id, rank));"
	"CREATE TABLE steps(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
	" end_ns INTEGER NOT NULL, compute_ns INTEGER NOT NULL, comm_ns INTEGER NOT NULL,"
	" exposed_comm_ns INTEGER NOT NULL, copy_ns INTEGER NOT NULL, idle_ns INTEGER NOT NULL,"
	" stall_comm_ns INTEGER NOT NULL, stall_copy_ns INTEGER NOT NULL,"
	" stall_host_ns INTEGER NOT NULL, PRIMARY KEY(run_id, rank, step));"
	"CREATE TABLE step_categories(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, step INTEGER NOT NULL, category INTEGER NOT NULL,"
	" busy_ns INTEGER NOT NULL, PRIMARY KEY(run_id, rank, step, category));";

/* Columns added since version 1: a migration adds those missing (so it also repairs a file
 * written by a development build between versions). */
static const struct {
	const char *table, *column, *decl;
} added_columns[] = {
	{"runs", "dropped", "INTEGER NOT NULL DEFAULT 0"},
	{"runs", "source", "TEXT"},
	{"events", "flags", "INTEGER NOT NULL DEFAULT 0"},
	{"events", "comm", "INTEGER NOT NULL DEFAULT 0"},
};

/* tables added since version 1 */
static const char added_tables[] =
	"CREATE TABLE IF NOT EXISTS steps(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
	" end_ns INTEGER NOT NULL, compute_ns INTEGER NOT NULL, comm_ns INTEGER NOT NULL,"
	" exposed_comm_ns INTEGER NOT NULL, copy_ns INTEGER NOT NULL, idle_ns INTEGER NOT NULL,"
	" stall_comm_ns INTEGER NOT NULL, stall_copy_ns INTEGER NOT NULL,"
	" stall_host_ns INTEGER NOT NULL, PRIMARY KEY(run_id, rank, step));"
	"CREATE TABLE IF NOT EXISTS step_categories(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	" rank INTEGER NOT NULL, step INTEGER NOT NULL, category INTEGER NOT NULL,"
	" busy_ns INTEGER NOT NULL, PRIMARY KEY(run_id, rank, step, category));";

static enum tw_result has_column(struct prof_db *db, const char *table, const char *column,
				 bool *out, struct tw_err *err);

/* Bring an older layout to the current one; inside the caller's transaction. */
static enum tw_result migrate(struct prof_db *db, struct tw_err *err)
{
	for (size_t i = 0; i < sizeof(added_columns) / sizeof(added_columns[0]); i++) {
		bool have;
		TW_CHECK(has_column(db, added_columns[i].table, added_columns[i].column, &have, err));
		if (have)
			continue;
		char sql[256];
		snprintf(sql, sizeof(sql), "ALTER TABLE %s ADD COLUMN %s %s", added_columns[i].table,
			 added_columns[i].column, added_columns[i].decl);
		TW_CHECK(exec_sql(db, sql, err));
	}
	TW_CHECK(exec_sql(db, added_tables, err));
	char sql[96];
	snprintf(sql, sizeof(sql), "UPDATE schema_version SET version = %d", PROF_SCHEMA_VERSION);
	return exec_sql(db, sql, err);
}

static enum tw_result fill_categories(struct prof_db *db, struct tw_err *err)
{
	sqlite3_stmt *st;
	TW_CHECK(prepare(db, "INSERT OR IGNORE INTO categories(id, name) VALUES (?, ?)", &st, err));
	enum tw_result rc = TW_OK;
	for (int c = 0; c < TRACE_NUM_CATS && rc == TW_OK; c++) {
		sqlite3_bind_int(st, 1, c);
		sqlite3_bind_text(st, 2, trace_cat_name(c), -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			rc = sql_fail(db, err, "filling categories");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return rc;
}

/* What a file holds, read without writing anything. */
struct schema_info {
	int ntables;
	bool has_version;
	int64_t version; /* -1: no readable row */
};

static enum tw_result read_schema(struct prof_db *db, struct schema_info *si, struct tw_err *err)
{
	memset(si, 0, sizeof(*si));
	si->version = -1;
	sqlite3_stmt *st;
	TW_CHECK(prepare(db, "SELECT name FROM sqlite_master WHERE type = 'table'", &st, err));
	int s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *name = sqlite3_column_text(st, 0);
		si->ntables++;
		if (name && strcmp((const char *)name, "schema_version") == 0)
			si->has_version = true;
	}
	sqlite3_finalize(st);
	if (s != SQLITE_DONE)
		return sql_fail(db, err, "reading the schema");
	if (!si->has_version)
		return TW_OK;
	TW_CHECK(prepare(db, "SELECT version FROM schema_version", &st, err));
	s = sqlite3_step(st);
	if (s == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER)
		si->version = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (s != SQLITE_ROW && s != SQLITE_DONE)
		return sql_fail(db, err, "reading the schema version");
	return TW_OK;
}

/* The refusals that need no write: a foreign file, a newer or a broken schema version. An
 * empty file (no tables) is a store only for writers, which initialise it. */
static enum tw_result check_schema(struct prof_db *db, const struct schema_info *si, bool writer,
				   struct tw_err *err)
{
	if (si->ntables == 0)
		return writer ? TW_OK
			      : tw_errf(err, TW_ERR_INVALID,
					"%s: not a twin store (an SQLite file with no tables; runs are "
					"stored with --db by twin simulate, twin run and twin profile "
					"import)",
					db->path);
	if (!si->has_version)
		return tw_errf(err, TW_ERR_INVALID,
			       "%s: not a twin database (no schema_version table; an nsys export is "
			       "read with 'twin profile import --nsys')",
			       db->path);
	if (si->version > PROF_SCHEMA_VERSION)
		return tw_errf(err, TW_ERR_INVALID,
			       "%s: database schema version %" PRId64
			       " is newer than this twin supports (%d); use a newer twin",
			       db->path, si->version, PROF_SCHEMA_VERSION);
	if (si->version < 1)
		return tw_errf(err, TW_ERR_INVALID, "%s: bad schema_version table", db->path);
	return TW_OK;
}

/* Which of the columns added since version 1 the file has: readers of an older layout read
 * what is there (defaults for the rest) instead of migrating it. */
static enum tw_result read_columns(struct prof_db *db, struct tw_err *err)
{
	bool have[sizeof(added_columns) / sizeof(added_columns[0])];
	for (size_t i = 0; i < sizeof(have) / sizeof(have[0]); i++)
		TW_CHECK(has_column(db, added_columns[i].table, added_columns[i].column, &have[i], err));
	db->has_v2_runs = have[0] && have[1];
	db->has_v2_events = have[2] && have[3];
	return TW_OK;
}

/* Create, check or migrate the schema inside one write transaction, so two processes opening
 * a new file at once agree on it. */
static enum tw_result setup_schema(struct prof_db *db, struct tw_err *err)
{
	TW_CHECK(exec_sql(db, "BEGIN IMMEDIATE", err));
	enum tw_result rc = TW_OK;
	struct schema_info si;
	TW_CHECK_GOTO(read_schema(db, &si, err), rc, fail);
	if (si.ntables == 0) {
		TW_CHECK_GOTO(exec_sql(db, schema_v2, err), rc, fail);
		char sql[96];
		snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES (%d)",
			 PROF_SCHEMA_VERSION);
		TW_CHECK_GOTO(exec_sql(db, sql, err), rc, fail);
		TW_CHECK_GOTO(fill_categories(db, err), rc, fail);
	} else {
		TW_CHECK_GOTO(check_schema(db, &si, true, err), rc, fail);
		/* silently: the data are unchanged, only columns and tables are added */
		bool need = si.version < PROF_SCHEMA_VERSION;
		for (size_t i = 0; !need && i < sizeof(added_columns) / sizeof(added_columns[0]); i++) {
			bool have;
			TW_CHECK_GOTO(has_column(db, added_columns[i].table, added_columns[i].column,
						 &have, err), rc, fail);
			need = !have;
		}
		if (need)
			TW_CHECK_GOTO(migrate(db, err), rc, fail);
	}
	return exec_sql(db, "COMMIT", err);
fail:
	sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* Whether the store holds a run (false when it cannot tell: no runs table yet). */
static bool holds_runs(struct prof_db *db)
{
	sqlite3_stmt *st;
	if (!db->h || sqlite3_prepare_v2(db->h, "SELECT 1 FROM runs LIMIT 1", -1, &st, NULL) != SQLITE_OK)
		return false;
	bool any = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return any;
}

static void remove_db_files(const char *path)
{
	static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
	size_t n = strlen(path) + 16;
	char *p = tw_malloc(n);
	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(p, n, "%s%s", path, suffix[i]);
		unlink(p);
	}
	free(p);
}

/* The checks both kinds of open make before SQLite sees the path: a directory, a FIFO or a
 * device is not a store (SQLite would fail late, or block on a FIFO). *exists says whether
 * there is a file. */
static enum tw_result check_path(const char *path, bool writer, bool *exists, struct stat *sb,
				 struct tw_err *err)
{
	*exists = stat(path, sb) == 0;
	if (!*exists) {
		if (errno != ENOENT)
			return tw_errf(err, TW_ERR_INVALID, "%s: cannot open the database: %s", path,
				       strerror(errno));
		if (!writer)
			return tw_errf(err, TW_ERR_INVALID,
				       "%s: no such database (runs are stored with --db by twin simulate, "
				       "twin run and twin profile import)",
				       path);
		/* a new file: its directory must exist */
		const char *slash = strrchr(path, '/');
		if (slash && slash != path) {
			char *dir = tw_strdup(path);
			dir[slash - path] = '\0';
			struct stat ds;
			bool ok = stat(dir, &ds) == 0 && S_ISDIR(ds.st_mode);
			enum tw_result rc = ok ? TW_OK
					       : tw_errf(err, TW_ERR_INVALID,
							 "%s: cannot create the database: no such directory '%s'",
							 path, dir);
			free(dir);
			TW_CHECK(rc);
		}
		return TW_OK;
	}
	if (S_ISDIR(sb->st_mode))
		return tw_errf(err, TW_ERR_INVALID, "%s: is a directory, not a database file", path);
	if (!S_ISREG(sb->st_mode))
		return tw_errf(err, TW_ERR_INVALID,
			       "%s: not a regular file (a twin store is an SQLite file)", path);
	if (access(path, writer ? R_OK | W_OK : R_OK) != 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: cannot %s the database: %s", path,
			       writer ? "write" : "read", strerror(errno));
	return TW_OK;
}

enum tw_result prof_db_open(const char *path, struct prof_db **out, struct tw_err *err)
{
	*out = NULL;
	bool exists;
	struct stat sb;
	TW_CHECK(check_path(path, true, &exists, &sb, err));
	struct prof_db *db = TW_NEW(struct prof_db);
	db->path = tw_strdup(path);
	db->created = !exists;
	enum tw_result rc = TW_OK;
	if (sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
	    SQLITE_OK) {
		rc = tw_errf(err, TW_ERR_INVALID, "%s: cannot open the database: %s", path,
			     db->h ? sqlite3_errmsg(db->h) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(db->h, BUSY_TIMEOUT_MS);
	sqlite3_extended_result_codes(db->h, 0);
	if (sqlite3_db_readonly(db->h, "main") == 1) {
		rc = tw_errf(err, TW_ERR_INVALID, "%s: cannot write the database (read-only)", path);
		goto fail;
	}
	/* a foreign or newer file is refused before anything in it changes (the WAL switch
	 * below rewrites its header) */
	struct schema_info si;
	TW_CHECK_GOTO(read_schema(db, &si, err), rc, fail);
	TW_CHECK_GOTO(check_schema(db, &si, true, err), rc, fail);
	/* WAL: readers never block the writer; NORMAL sync is safe in WAL (a crash loses at most
	 * the last transactions, never consistency) */
	TW_CHECK_GOTO(exec_sql(db, "PRAGMA journal_mode=WAL", err), rc, fail);
	TW_CHECK_GOTO(exec_sql(db, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", err), rc,
		      fail);
	TW_CHECK_GOTO(setup_schema(db, err), rc, fail);
	TW_CHECK_GOTO(read_columns(db, err), rc, fail);
	*out = db;
	return TW_OK;
fail:
	prof_db_discard(db);
	return rc;
}

/* "file:PATH?immutable=1" for a canonical absolute path (URI-escaped) */
static char *immutable_uri(const char *path)
{
	char *real = realpath(path, NULL);
	if (!real)
		return NULL;
	size_t n = strlen(real);
	char *uri = tw_malloc(3 * n + 32);
	size_t k = (size_t)snprintf(uri, 8, "file:");
	for (const char *p = real; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '%' || c == '?' || c == '#' || c <= ' ' || c >= 0x7f)
			k += (size_t)snprintf(uri + k, 4, "%%%02X", c);
		else
			uri[k++] = (char)c;
	}
	snprintf(uri + k, 16, "?immutable=1");
	free(real);
	return uri;
}

enum tw_result prof_db_open_existing(const char *path, struct prof_db **out, struct tw_err *err)
{
	*out = NULL;
	bool exists;
	struct stat sb;
	TW_CHECK(check_path(path, false, &exists, &sb, err));
	if (sb.st_size == 0)
		return tw_errf(err, TW_ERR_INVALID,
			       "%s: empty file, not a twin store (runs are stored with --db by twin "
			       "simulate, twin run and twin profile import)",
			       path);
	struct prof_db *db = TW_NEW(struct prof_db);
	db->path = tw_strdup(path);
	enum tw_result rc = TW_OK;
	struct schema_info si;
	if (sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		rc = tw_errf(err, TW_ERR_INVALID, "%s: cannot open the database: %s", path,
			     db->h ? sqlite3_errmsg(db->h) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(db->h, BUSY_TIMEOUT_MS);
	sqlite3_extended_result_codes(db->h, 0);
	if (read_schema(db, &si, err) != TW_OK) {
		int code = sqlite3_errcode(db->h);
		if (code != SQLITE_READONLY && code != SQLITE_CANTOPEN) {
			rc = err->code;
			goto fail;
		}
		/* A WAL store in a directory this user cannot write: SQLite cannot create the
		 * shared-memory file. With no write-ahead log pending, the main file is the whole
		 * store and is read as it is. */
		bool pending = false;
		char *side = tw_malloc(strlen(path) + 16);
		for (int k = 0; k < 2; k++) { /* a log or a hot journal holds changes */
			snprintf(side, strlen(path) + 16, "%s%s", path, k ? "-journal" : "-wal");
			struct stat ws;
			pending |= stat(side, &ws) == 0 && ws.st_size > 0;
		}
		free(side);
		char *uri = pending ? NULL : immutable_uri(path);
		int uri_errno = errno;
		tw_err_clear(err);
		sqlite3_close(db->h);
		db->h = NULL;
		if (!uri) {
			rc = pending ? tw_errf(err, TW_ERR_INVALID,
					       "%s: cannot read the database: its write-ahead log or "
					       "journal holds changes and its directory is not writable",
					       path)
				     : tw_errf(err, TW_ERR_INVALID, "%s: cannot read the database: %s",
					       path, strerror(uri_errno));
			goto fail;
		}
		int o = sqlite3_open_v2(uri, &db->h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
		free(uri);
		if (o != SQLITE_OK) {
			rc = tw_errf(err, TW_ERR_INVALID, "%s: cannot open the database: %s", path,
				     db->h ? sqlite3_errmsg(db->h) : "out of memory");
			goto fail;
		}
		sqlite3_extended_result_codes(db->h, 0);
		TW_CHECK_GOTO(read_schema(db, &si, err), rc, fail);
	}
	TW_CHECK_GOTO(check_schema(db, &si, false, err), rc, fail);
	TW_CHECK_GOTO(read_columns(db, err), rc, fail);
	*out = db;
	return TW_OK;
fail:
	prof_db_close(db);
	return rc;
}

struct sqlite3 *prof_db_handle(struct prof_db *db)
{
	return db->h;
}

void prof_db_close(struct prof_db *db)
{
	if (!db)
		return;
	sqlite3_close(db->h); /* all statements are finalized, so this closes */
	free(db->path);
	free(db);
}

void prof_db_discard(struct prof_db *db)
{
	if (!db)
		return;
	bool remove = db->created && !holds_runs(db);
	char *path = remove ? tw_strdup(db->path) : NULL;
	prof_db_close(db);
	if (remove)
		remove_db_files(path);
	free(path);
}

/* ---- writing ----------------------------------------------------------------------------- */

void prof_name_display(char *dst, size_t len, const char *src)
{
	size_t i = 0;
	for (; src && *src && i + 1 < len; src++) {
		unsigned char c = (unsigned char)*src;
		dst[i++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	if (len)
		dst[i] = '\0';
}

enum tw_result prof_run_name_check(const char *name, const char *what, struct tw_err *err)
{
	char shown[160];
	prof_name_display(shown, sizeof(shown), name);
	if (!name[0])
		return tw_errf(err, TW_ERR_INVALID, "%s: a run name may not be empty", what);
	for (const unsigned char *p = (const unsigned char *)name; *p;) {
		if (*p < 0x20 || *p == 0x7f)
			return tw_errf(err, TW_ERR_INVALID,
				       "%s '%s': a run name may not contain control characters "
				       "(newline, tab, escape...)", what, shown);
		size_t n = tw_utf8_len((const char *)p);
		if (!n)
			return tw_errf(err, TW_ERR_INVALID, "%s '%s': a run name must be UTF-8 text",
				       what, shown);
		p += n;
	}
	/* RUN arguments are ids when they are digits: a name that reads as a number could
	 * never be named (and " 1", "+1" would look like id 1 to a reader) */
	const char *p = name + strspn(name, " ");
	if (*p == '+' || *p == '-')
		p++;
	if (*p && strspn(p, "0123456789") == strlen(p))
		return tw_errf(err, TW_ERR_INVALID,
			       "%s '%s': a run name may not be a number (RUN arguments that are "
			       "numbers are run ids)", what, shown);
	return TW_OK;
}

enum tw_result prof_run_begin(struct prof_db *db, const struct prof_run_meta *meta,
			      int64_t *run_id, struct tw_err *err)
{
	if (meta->name)
		TW_CHECK(prof_run_name_check(meta->name, "run name", err));
	char host[128] = "";
	gethostname(host, sizeof(host) - 1);
	char when[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	sqlite3_stmt *st;
	TW_CHECK(prepare(db,
			 "INSERT INTO runs(kind, name, backend, job_json, tool_version, host,"
			 " created_utc, nranks, complete, source) VALUES (?,?,?,?,?,?,?,?,0,?)",
			 &st, err));
	sqlite3_bind_text(st, 1, prof_kind_name(meta->kind), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, meta->name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, meta->backend, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, meta->job_json, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, TW_VERSION, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, host, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 7, when, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 8, meta->nranks);
	sqlite3_bind_text(st, 9, meta->source, -1, SQLITE_TRANSIENT);
	enum tw_result rc = TW_OK;
	if (sqlite3_step(st) != SQLITE_DONE)
		rc = sql_fail(db, err, "inserting a run");
	else
		*run_id = sqlite3_last_insert_rowid(db->h);
	sqlite3_finalize(st);
	return rc;
}

/* name offsets of t -> names.id; both sorted by offset (the strings are in offset order) */
struct name_map {
	uint32_t *off;
	int64_t *id;
	size_t n;
};

static enum tw_result map_names(struct prof_db *db, const struct trace *t, struct name_map *m,
				struct tw_err *err)
{
	memset(m, 0, sizeof(*m));
	size_t count = 0;
	for (size_t off = 0; off < t->strings_len; off += strlen(t->strings + off) + 1)
		count++;
	m->off = TW_NEW_ARRAY(uint32_t, count + 1);
	m->id = TW_NEW_ARRAY(int64_t, count + 1);
	sqlite3_stmt *ins, *sel;
	TW_CHECK(prepare(db, "INSERT OR IGNORE INTO names(name) VALUES (?)", &ins, err));
	if (prepare(db, "SELECT id FROM names WHERE name = ?", &sel, err) != TW_OK) {
		sqlite3_finalize(ins);
		return err->code;
	}
	enum tw_result rc = TW_OK;
	for (size_t off = 0; off < t->strings_len && rc == TW_OK;) {
		const char *s = t->strings + off;
		sqlite3_bind_text(ins, 1, s, -1, SQLITE_STATIC);
		sqlite3_bind_text(sel, 1, s, -1, SQLITE_STATIC);
		if (sqlite3_step(ins) != SQLITE_DONE || sqlite3_step(sel) != SQLITE_ROW) {
			rc = sql_fail(db, err, "storing names");
		} else {
			m->off[m->n] = (uint32_t)off;
			m->id[m->n++] = sqlite3_column_int64(sel, 0);
		}
		sqlite3_reset(ins);
		sqlite3_reset(sel);
		off += strlen(s) + 1;
	}
	sqlite3_finalize(ins);
	sqlite3_finalize(sel);
	return rc;
}

static int64_t name_id(const struct name_map *m, uint32_t off)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->off[mid] < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->n && m->off[lo] == off ? m->id[lo] : (m->n ? m->id[0] : 0);
}

static enum tw_result insert_events(struct prof_db *db, int64_t run_id, const struct trace *t,
				    struct tw_err *err)
{
	struct name_map m;
	if (t->strings_len == 0 && t->nev > 0) {
		/* events without any interned name: give them "" */
		struct trace tmp;
		trace_init(&tmp, t->kind, t->nranks);
		trace_intern(&tmp, "");
		enum tw_result r = map_names(db, &tmp, &m, err);
		trace_release(&tmp);
		TW_CHECK(r);
	} else {
		TW_CHECK(map_names(db, t, &m, err));
	}
	sqlite3_stmt *st = NULL;
	enum tw_result rc = prepare(db,
				    "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
				    &st, err);
	for (size_t i = 0; rc == TW_OK && i < t->nev; i++) {
		const struct trace_event *e = &t->ev[i];
		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_int(st, 2, e->rank);
		sqlite3_bind_int(st, 3, e->device);
		sqlite3_bind_int(st, 4, e->stream);
		sqlite3_bind_int(st, 5, e->cat);
		sqlite3_bind_int(st, 6, e->step);
		sqlite3_bind_int(st, 7, e->op_id);
		sqlite3_bind_int(st, 8, e->layer);
		sqlite3_bind_int(st, 9, e->micro);
		sqlite3_bind_int(st, 10, e->stage);
		sqlite3_bind_int(st, 11, e->phase);
		sqlite3_bind_int64(st, 12, e->start_ns);
		sqlite3_bind_int64(st, 13, e->end_ns);
		sqlite3_bind_int64(st, 14, e->bytes);
		sqlite3_bind_double(st, 15, e->flops);
		sqlite3_bind_int(st, 16, e->group_size);
		sqlite3_bind_int64(st, 17, name_id(&m, e->name));
		sqlite3_bind_int64(st, 18, e->flags);
		sqlite3_bind_int64(st, 19, e->comm);
		if (sqlite3_step(st) != SQLITE_DONE)
			rc = sql_fail(db, err, "inserting events");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	st = NULL;
	free(m.off);
	free(m.id);
	if (rc == TW_OK)
		rc = prepare(db, "INSERT INTO mem_samples VALUES (?,?,?,?,?,?)", &st, err);
	for (size_t i = 0; rc == TW_OK && i < t->nmem; i++) {
		const struct trace_mem_sample *s = &t->mem[i];
		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_int(st, 2, s->rank);
		sqlite3_bind_int(st, 3, s->device);
		sqlite3_bind_int(st, 4, s->cat);
		sqlite3_bind_int64(st, 5, s->t_ns);
		sqlite3_bind_int64(st, 6, s->bytes);
		if (sqlite3_step(st) != SQLITE_DONE)
			rc = sql_fail(db, err, "inserting memory samples");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == TW_OK && t->peak_mem) {
		rc = prepare(db, "INSERT OR REPLACE INTO peak_mem VALUES (?,?,?)", &st, err);
		for (int64_t r = 0; rc == TW_OK && r < t->nranks; r++) {
			sqlite3_bind_int64(st, 1, run_id);
			sqlite3_bind_int64(st, 2, r);
			sqlite3_bind_int64(st, 3, t->peak_mem[r]);
			if (sqlite3_step(st) != SQLITE_DONE)
				rc = sql_fail(db, err, "inserting peak memory");
			sqlite3_reset(st);
		}
		sqlite3_finalize(st);
		st = NULL;
	}
	if (rc == TW_OK && (rc = prepare(db, "UPDATE runs SET nevents = nevents + ? WHERE id = ?",
					 &st, err)) == TW_OK) {
		sqlite3_bind_int64(st, 1, (int64_t)t->nev);
		sqlite3_bind_int64(st, 2, run_id);
		if (sqlite3_step(st) != SQLITE_DONE)
			rc = sql_fail(db, err, "counting events");
		sqlite3_finalize(st);
	}
	return rc;
}

/* The derived per-rank, per-step rows (a cache for SQL users; twin recomputes them). */
static enum tw_result insert_steps(struct prof_db *db, int64_t run_id, const struct trace *t,
				   struct tw_err *err)
{
	struct prof_step *rows;
	size_t n;
	struct tw_err aerr = {0};
	if (prof_analyze_steps(t, &rows, &n, &aerr) != TW_OK)
		return TW_OK; /* nothing to derive (e.g. no events): the trace is still stored */
	sqlite3_stmt *st = NULL, *sc = NULL;
	enum tw_result rc = prepare(db, "INSERT OR REPLACE INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
				    &st, err);
	if (rc == TW_OK)
		rc = prepare(db, "INSERT OR REPLACE INTO step_categories VALUES (?,?,?,?,?)", &sc, err);
	for (size_t i = 0; rc == TW_OK && i < n; i++) {
		const struct prof_analysis *a = &rows[i].a;
		const int64_t v[] = {run_id,     rows[i].rank,       rows[i].step,
				     rows[i].start_ns, rows[i].end_ns,   a->compute_ns,
				     a->comm_ns, a->exposed_comm_ns, a->copy_ns,
				     a->idle_ns, a->stall_comm_ns,   a->stall_copy_ns,
				     a->stall_host_ns};
		for (int k = 0; k < 13; k++)
			sqlite3_bind_int64(st, k + 1, v[k]);
		if (sqlite3_step(st) != SQLITE_DONE)
			rc = sql_fail(db, err, "inserting steps");
		sqlite3_reset(st);
		for (int c = 0; rc == TW_OK && c < TRACE_MARKER; c++) {
			if (!a->cat_ns[c])
				continue;
			sqlite3_bind_int64(sc, 1, run_id);
			sqlite3_bind_int64(sc, 2, rows[i].rank);
			sqlite3_bind_int64(sc, 3, rows[i].step);
			sqlite3_bind_int(sc, 4, c);
			sqlite3_bind_int64(sc, 5, a->cat_ns[c]);
			if (sqlite3_step(sc) != SQLITE_DONE)
				rc = sql_fail(db, err, "inserting step categories");
			sqlite3_reset(sc);
		}
	}
	sqlite3_finalize(st);
	sqlite3_finalize(sc);
	free(rows);
	return rc;
}

static enum tw_result mark_complete(struct prof_db *db, int64_t run_id, int64_t dropped,
				    struct tw_err *err)
{
	sqlite3_stmt *st;
	TW_CHECK(prepare(db, "UPDATE runs SET complete = 1, dropped = dropped + ? WHERE id = ?",
			 &st, err));
	sqlite3_bind_int64(st, 1, dropped);
	sqlite3_bind_int64(st, 2, run_id);
	enum tw_result rc = TW_OK;
	if (sqlite3_step(st) != SQLITE_DONE)
		rc = sql_fail(db, err, "completing a run");
	sqlite3_finalize(st);
	return rc;
}

enum tw_result prof_run_append(struct prof_db *db, int64_t run_id, const struct trace *t,
			       struct tw_err *err)
{
	TW_CHECK(exec_sql(db, "BEGIN IMMEDIATE", err));
	enum tw_result rc = insert_events(db, run_id, t, err);
	if (rc == TW_OK)
		return exec_sql(db, "COMMIT", err);
	sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

enum tw_result prof_run_finish(struct prof_db *db, int64_t run_id, int64_t dropped,
			       struct tw_err *err)
{
	return mark_complete(db, run_id, dropped, err);
}

enum tw_result prof_store_trace(struct prof_db *db, const struct prof_run_meta *meta,
				const struct trace *t, int64_t *run_id, struct tw_err *err)
{
	/* one transaction from the run's row to its completion: a failed store leaves no run */
	TW_CHECK(exec_sql(db, "BEGIN IMMEDIATE", err));
	enum tw_result rc = prof_run_begin(db, meta, run_id, err);
	if (rc == TW_OK)
		rc = insert_events(db, *run_id, t, err);
	if (rc == TW_OK)
		rc = insert_steps(db, *run_id, t, err);
	if (rc == TW_OK)
		rc = mark_complete(db, *run_id, 0, err);
	if (rc == TW_OK)
		return exec_sql(db, "COMMIT", err);
	sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* ---- reading ----------------------------------------------------------------------------- */

/* RUN: a positive id (digits only: " 1" and "+1" are names), or a name (its newest run). A
 * number that is no run's id may still be the name of a run stored before names that look
 * like ids were refused. */
static enum tw_result resolve_run(struct prof_db *db, const char *run, int64_t *id,
				  struct tw_err *err)
{
	size_t len = strlen(run);
	bool numeric = len > 0 && len <= 18 && strspn(run, "0123456789") == len;
	sqlite3_stmt *st;
	int s = SQLITE_DONE;
	for (int pass = numeric ? 0 : 1; pass < 2 && s == SQLITE_DONE; pass++) {
		TW_CHECK(prepare(db,
				 pass == 0 ? "SELECT id FROM runs WHERE id = ?"
					   : "SELECT id FROM runs WHERE name = ? ORDER BY id DESC LIMIT 1",
				 &st, err));
		if (pass == 0)
			sqlite3_bind_int64(st, 1, strtoll(run, NULL, 10));
		else
			sqlite3_bind_text(st, 1, run, -1, SQLITE_STATIC);
		s = sqlite3_step(st);
		if (s == SQLITE_ROW)
			*id = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (s == SQLITE_ROW)
		return TW_OK;
	if (s != SQLITE_DONE)
		return sql_fail(db, err, "finding a run");
	char shown[160];
	prof_name_display(shown, sizeof(shown), run);
	return tw_errf(err, TW_ERR_INVALID, "%s: no run '%s' (see 'twin runs --db %s')", db->path,
		       shown, db->path);
}

static void copy_col(char *dst, size_t len, sqlite3_stmt *st, int col)
{
	const unsigned char *s = sqlite3_column_text(st, col);
	snprintf(dst, len, "%s", s ? (const char *)s : "");
}

/* The run columns read_run takes; a version-1 store has no dropped column (reads as 0). */
static void run_cols(const struct prof_db *db, char *sql, size_t len, const char *tail)
{
	snprintf(sql, len,
		 "SELECT id, kind, name, backend, host, created_utc, tool_version, nranks, nevents,"
		 " %s, complete,"
		 /* ranks with events: a skip scan of the (run_id, rank) index, one probe per rank */
		 " (WITH RECURSIVE r(x) AS (SELECT MIN(rank) FROM events WHERE run_id = runs.id"
		 "  UNION ALL SELECT (SELECT MIN(rank) FROM events WHERE run_id = runs.id AND rank > x)"
		 "  FROM r WHERE x IS NOT NULL) SELECT COUNT(x) FROM r)"
		 " FROM runs %s",
		 db->has_v2_runs ? "dropped" : "0", tail);
}

static void read_run(sqlite3_stmt *st, struct prof_run_info *r)
{
	memset(r, 0, sizeof(*r));
	r->id = sqlite3_column_int64(st, 0);
	const unsigned char *k = sqlite3_column_text(st, 1);
	r->kind = TRACE_KIND_IMPORT;
	for (int i = 0; i <= TRACE_KIND_IMPORT; i++)
		if (k && strcmp((const char *)k, kind_names[i]) == 0)
			r->kind = (enum trace_kind)i;
	copy_col(r->name, sizeof(r->name), st, 2);
	copy_col(r->backend, sizeof(r->backend), st, 3);
	copy_col(r->host, sizeof(r->host), st, 4);
	copy_col(r->created, sizeof(r->created), st, 5);
	copy_col(r->tool_version, sizeof(r->tool_version), st, 6);
	r->nranks = sqlite3_column_int64(st, 7);
	r->nevents = sqlite3_column_int64(st, 8);
	r->dropped = sqlite3_column_int64(st, 9);
	r->complete = sqlite3_column_int64(st, 10) != 0;
	r->traced = sqlite3_column_int64(st, 11);
}

enum tw_result prof_list_runs(struct prof_db *db, struct prof_run_info **runs, size_t *n,
			      struct tw_err *err)
{
	*runs = NULL;
	*n = 0;
	char sql[640];
	run_cols(db, sql, sizeof(sql), "ORDER BY id");
	sqlite3_stmt *st;
	TW_CHECK(prepare(db, sql, &st, err));
	size_t cap = 0;
	int s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		TW_GROW(*runs, cap, *n + 1);
		read_run(st, &(*runs)[(*n)++]);
	}
	enum tw_result rc = s == SQLITE_DONE ? TW_OK : sql_fail(db, err, "listing runs");
	sqlite3_finalize(st);
	return rc;
}

enum tw_result prof_run_info(struct prof_db *db, const char *run, struct prof_run_info *out,
			     struct tw_err *err)
{
	int64_t id = 0;
	TW_CHECK(resolve_run(db, run, &id, err));
	char sql[640];
	run_cols(db, sql, sizeof(sql), "WHERE id = ?");
	sqlite3_stmt *st;
	TW_CHECK(prepare(db, sql, &st, err));
	sqlite3_bind_int64(st, 1, id);
	enum tw_result rc = TW_OK;
	if (sqlite3_step(st) == SQLITE_ROW)
		read_run(st, out);
	else
		rc = sql_fail(db, err, "reading a run");
	sqlite3_finalize(st);
	return rc;
}

enum tw_result prof_load_trace(struct prof_db *db, const char *run, struct trace *out,
			       int64_t *run_id, struct tw_err *err)
{
	struct prof_run_info info;
	TW_CHECK(prof_run_info(db, run, &info, err));
	if (run_id)
		*run_id = info.id;
	/* every rank a reader allocates per-rank state for must be one the run has: a crafted
	 * or damaged row must not make an analysis allocate for two billion ranks */
	int64_t max_ranks = info.nranks > 0 ? info.nranks : PROF_MAX_RANKS; /* 0: not recorded */
	if (info.nranks < 0 || info.nranks > PROF_MAX_RANKS)
		return tw_errf(err, TW_ERR_INVALID, "%s: run %" PRId64 ": %" PRId64
			       " ranks, out of range [0, %d]", db->path, info.id, info.nranks,
			       PROF_MAX_RANKS);
	trace_init(out, info.kind, info.nranks);
	sqlite3_stmt *st = NULL;
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "SELECT e.rank, e.device, e.stream, e.category, e.step, e.op_id,"
		 " e.layer, e.micro, e.stage, e.phase, e.start_ns, e.end_ns,"
		 " e.bytes, e.flops, e.group_size, n.name, %s"
		 " FROM events e JOIN names n ON n.id = e.name_id"
		 " WHERE e.run_id = ? ORDER BY e.rank, e.start_ns, e.rowid",
		 db->has_v2_events ? "e.flags, e.comm" : "0, 0");
	enum tw_result rc = prepare(db, sql, &st, err);
	int s = SQLITE_DONE;
	if (rc == TW_OK) {
		sqlite3_bind_int64(st, 1, info.id);
		while ((s = sqlite3_step(st)) == SQLITE_ROW) {
			struct trace_event e = {
				.rank = sqlite3_column_int(st, 0),
				.device = sqlite3_column_int(st, 1),
				.stream = sqlite3_column_int(st, 2),
				.cat = sqlite3_column_int(st, 3),
				.step = sqlite3_column_int(st, 4),
				.op_id = sqlite3_column_int(st, 5),
				.layer = sqlite3_column_int(st, 6),
				.micro = sqlite3_column_int(st, 7),
				.stage = sqlite3_column_int(st, 8),
				.phase = sqlite3_column_int(st, 9),
				.start_ns = sqlite3_column_int64(st, 10),
				.end_ns = sqlite3_column_int64(st, 11),
				.bytes = sqlite3_column_int64(st, 12),
				.flops = sqlite3_column_double(st, 13),
				.group_size = sqlite3_column_int(st, 14),
				.flags = (uint32_t)sqlite3_column_int64(st, 16),
				.comm = sqlite3_column_int64(st, 17),
			};
			if (e.cat < 0 || e.cat >= TRACE_NUM_CATS) {
				rc = tw_errf(err, TW_ERR_INVALID, "%s: run %" PRId64
					     ": event with unknown category %d", db->path, info.id, e.cat);
				break;
			}
			int64_t erank = sqlite3_column_int64(st, 0);
			if (erank < 0 || erank >= max_ranks) {
				rc = tw_errf(err, TW_ERR_INVALID, "%s: run %" PRId64 ": an event of rank %"
					     PRId64 ", out of the run's ranks [0, %" PRId64 ")", db->path,
					     info.id, erank, max_ranks);
				break;
			}
			e.name = trace_intern(out, (const char *)sqlite3_column_text(st, 15));
			trace_add(out, &e);
			if (e.rank >= out->nranks)
				out->nranks = e.rank + 1;
		}
		if (rc == TW_OK && s != SQLITE_DONE)
			rc = sql_fail(db, err, "reading events");
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == TW_OK &&
	    (rc = prepare(db, "SELECT rank, device, category, t_ns, bytes FROM mem_samples"
			      " WHERE run_id = ? ORDER BY rowid", &st, err)) == TW_OK) {
		sqlite3_bind_int64(st, 1, info.id);
		while ((s = sqlite3_step(st)) == SQLITE_ROW) {
			struct trace_mem_sample m = {sqlite3_column_int(st, 0),
						     sqlite3_column_int(st, 1),
						     sqlite3_column_int(st, 2),
						     sqlite3_column_int64(st, 3),
						     sqlite3_column_int64(st, 4)};
			if (sqlite3_column_int64(st, 0) < 0 || sqlite3_column_int64(st, 0) >= max_ranks) {
				rc = tw_errf(err, TW_ERR_INVALID, "%s: run %" PRId64 ": a memory sample of "
					     "rank %" PRId64 ", out of the run's ranks [0, %" PRId64 ")",
					     db->path, info.id, (int64_t)sqlite3_column_int64(st, 0), max_ranks);
				break;
			}
			trace_add_mem(out, &m);
		}
		if (rc == TW_OK && s != SQLITE_DONE)
			rc = sql_fail(db, err, "reading memory samples");
		sqlite3_finalize(st);
		st = NULL;
	}
	if (rc == TW_OK &&
	    (rc = prepare(db, "SELECT rank, bytes FROM peak_mem WHERE run_id = ?", &st, err)) ==
		    TW_OK) {
		sqlite3_bind_int64(st, 1, info.id);
		while ((s = sqlite3_step(st)) == SQLITE_ROW) {
			int64_t r = sqlite3_column_int64(st, 0);
			if (r < 0 || r >= out->nranks || r > (1 << 24))
				continue;
			if (!out->peak_mem)
				out->peak_mem = TW_NEW_ARRAY(int64_t, out->nranks);
			out->peak_mem[r] = sqlite3_column_int64(st, 1);
		}
		if (s != SQLITE_DONE)
			rc = sql_fail(db, err, "reading peak memory");
		sqlite3_finalize(st);
	}
	if (rc != TW_OK)
		trace_release(out);
	return rc;
}
