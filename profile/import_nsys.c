/* import_nsys — an `nsys export --type sqlite` file (reference/profiling.md §4).
 *
 * Reads CUPTI_ACTIVITY_KIND_KERNEL (names through StringIds), _MEMCPY, _MEMSET, and step
 * ranges from NVTX_EVENTS ("ProfilerStep#N" / "step N"), projected onto the GPU through
 * CUPTI_ACTIVITY_KIND_RUNTIME's correlation ids. Tables are created lazily by nsys, so any of
 * them may be missing; columns are checked by name before use and values by type. Times are
 * ns on the session clock. */
#include "prof_int.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct nsys {
	sqlite3 *h;
	const char *path;
	struct tw_err *err;
};

static enum tw_result nsys_fail(struct nsys *n, const char *what)
{
	int rc = sqlite3_errcode(n->h);
	if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
		return tw_errf(n->err, TW_ERR_INVALID,
			       "%s: not an nsys SQLite export (%s); make one with 'nsys export "
			       "--type sqlite REPORT.nsys-rep'",
			       n->path, sqlite3_errmsg(n->h));
	return tw_errf(n->err, TW_ERR_SQLITE, "%s: %s: %s", n->path, what, sqlite3_errmsg(n->h));
}

static bool has_table(struct nsys *n, const char *table, enum tw_result *rc)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(n->h, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
			       -1, &st, NULL) != SQLITE_OK) {
		*rc = nsys_fail(n, "reading the schema");
		return false;
	}
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	int s = sqlite3_step(st);
	if (s != SQLITE_ROW && s != SQLITE_DONE)
		*rc = nsys_fail(n, "reading the schema");
	sqlite3_finalize(st);
	return s == SQLITE_ROW;
}

/* A report of a whole launcher (nsys profile torchrun ...) holds every rank's kernels: one
 * file is one rank here, so several processes (globalPid, where the export has it) are
 * refused rather than merged into one rank. */
static enum tw_result one_process(struct nsys *n)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(n->h, "SELECT COUNT(DISTINCT globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL"
				     " WHERE globalPid IS NOT NULL",
			       -1, &st, NULL) != SQLITE_OK)
		return TW_OK; /* an export without the column */
	int64_t np = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_finalize(st);
	if (np > 1)
		return tw_errf(n->err, TW_ERR_INVALID,
			       "%s: kernels of %lld processes (globalPid) in one report: twin reads "
			       "one rank per file; profile each rank into its own report (e.g. nsys "
			       "profile -o rank%%q{RANK} inside the launcher) and import them together",
			       n->path, (long long)np);
	return TW_OK;
}

/* every name in cols (NULL-terminated) must be a column of table */
static enum tw_result need_columns(struct nsys *n, const char *table, const char *const *cols)
{
	char sql[160];
	snprintf(sql, sizeof(sql), "PRAGMA table_info(%s)", table);
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(n->h, sql, -1, &st, NULL) != SQLITE_OK)
		return nsys_fail(n, "reading a table's columns");
	unsigned found = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *c = (const char *)sqlite3_column_text(st, 1);
		for (int k = 0; cols[k]; k++)
			if (c && !strcmp(c, cols[k]))
				found |= 1u << k;
	}
	sqlite3_finalize(st);
	for (int k = 0; cols[k]; k++)
		if (!(found & (1u << k)))
			return tw_errf(n->err, TW_ERR_INVALID,
				       "%s: table %s has no column '%s' (not the nsys export schema)",
				       n->path, table, cols[k]);
	return TW_OK;
}

/* integer column value, or an error naming table, row and column */
static enum tw_result col_int(struct nsys *n, sqlite3_stmt *st, int col, const char *table,
			      int64_t row /* rowid */, bool nullable, int64_t *out)
{
	int type = sqlite3_column_type(st, col);
	if (type == SQLITE_INTEGER) {
		*out = sqlite3_column_int64(st, col);
		return TW_OK;
	}
	if (type == SQLITE_NULL && nullable) {
		*out = -1;
		return TW_OK;
	}
	static const char *const names[] = {"?", "integer", "real", "text", "blob", "null"};
	return tw_errf(n->err, TW_ERR_INVALID, "%s: %s row %lld: %s is %s, expected an integer",
		       n->path, table, (long long)row, sqlite3_column_name(st, col),
		       names[type >= 1 && type <= 5 ? type : 0]);
}

/* a time column: an integer in [0, PROF_MAX_TIME_NS] ns (nsys's session clock starts at 0) */
static enum tw_result col_time(struct nsys *n, sqlite3_stmt *st, int col, const char *table,
			       int64_t row, int64_t *out)
{
	TW_CHECK(col_int(n, st, col, table, row, false, out));
	if (*out < 0 || *out > PROF_MAX_TIME_NS)
		return tw_errf(n->err, TW_ERR_INVALID,
			       "%s: %s row %lld: %s is %lld, out of range [0, 4e18] ns", n->path,
			       table, (long long)row, sqlite3_column_name(st, col), (long long)*out);
	return TW_OK;
}

struct corr_ev {
	int64_t corr;
	size_t ev; /* index in t->ev */
};

struct ctx {
	struct nsys *n;
	struct trace *t;
	int32_t rank;
	struct corr_ev *ce;
	size_t nce, cecap;
};

/* One activity table: SQL gives start, end, deviceId, streamId, correlationId, name, bytes,
 * kind (copyKind for memcpy), rowid. */
static enum tw_result read_activity(struct ctx *c, const char *table, const char *sql,
				    int which /* 0 kernel, 1 memcpy, 2 memset */)
{
	struct nsys *n = c->n;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(n->h, sql, -1, &st, NULL) != SQLITE_OK)
		return nsys_fail(n, table);
	enum tw_result rc = TW_OK;
	int s;
	while (rc == TW_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t row = sqlite3_column_int64(st, 8); /* rowid, for messages */
		int64_t start, end, dev, stream, corr, bytes = 0, kind = 0;
		if ((rc = col_time(n, st, 0, table, row, &start)) ||
		    (rc = col_time(n, st, 1, table, row, &end)) ||
		    (rc = col_int(n, st, 2, table, row, true, &dev)) ||
		    (rc = col_int(n, st, 3, table, row, true, &stream)) ||
		    (rc = col_int(n, st, 4, table, row, true, &corr)))
			break;
		if (which != 0 && ((rc = col_int(n, st, 6, table, row, true, &bytes)) ||
				   (rc = col_int(n, st, 7, table, row, true, &kind))))
			break;
		if (end < start) {
			rc = tw_errf(n->err, TW_ERR_INVALID, "%s: %s row %lld: end %lld < start %lld",
				     n->path, table, (long long)row, (long long)end, (long long)start);
			break;
		}
		/* ids are int32 in a trace: a bigger one would be stored as another stream */
		if (dev < -1 || dev > INT32_MAX || stream < -1 || stream > INT32_MAX) {
			bool d = dev < -1 || dev > INT32_MAX;
			rc = tw_errf(n->err, TW_ERR_INVALID, "%s: %s row %lld: %s is %lld, out of range "
				     "[0, %d]", n->path, table, (long long)row, d ? "deviceId" : "streamId",
				     (long long)(d ? dev : stream), INT32_MAX);
			break;
		}
		struct trace_event e = prof_blank_event(c->rank);
		e.device = (int32_t)dev;
		e.stream = (int32_t)stream;
		e.start_ns = start;
		e.end_ns = end;
		e.bytes = bytes > 0 ? bytes : 0;
		const char *name = (const char *)sqlite3_column_text(st, 5);
		char buf[64];
		if (which == 0 && !name) {
			/* a name id StringIds does not hold: a damaged export, not an unnamed kernel */
			int64_t d = -1, sh = -1;
			col_int(n, st, 9, table, row, true, &d);
			col_int(n, st, 10, table, row, true, &sh);
			rc = tw_errf(n->err, TW_ERR_INVALID,
				     "%s: %s row %lld: demangledName %lld / shortName %lld: no such id in "
				     "StringIds", n->path, table, (long long)row, (long long)d, (long long)sh);
			break;
		}
		if (which == 0) {
			e.cat = prof_classify_kernel(name ? name : "");
			if (e.cat == TRACE_BROADCAST && name && prof_nccl_is_reduce(name))
				e.flags |= TRACE_F_REDUCE;
		} else if (which == 1) {
			/* ENUM_CUDA_MEMCPY_OPER: 1 HTOD, 2 DTOH, 10 PTOP, 11 UVM_HTOD, 12 UVM_DTOH */
			e.cat = kind == 1 || kind == 11 ? TRACE_H2D
			      : kind == 2 || kind == 12 ? TRACE_D2H
			      : kind == 10	       ? TRACE_P2P
						       : TRACE_COMPUTE_OTHER;
			static const char *const k[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH",
							"AtoA",    "AtoD", "DtoA", "DtoD", "HtoH",
							"PtoP",    "HtoD", "DtoH", "DtoD"};
			snprintf(buf, sizeof(buf), "Memcpy %s", kind >= 0 && kind <= 13 ? k[kind] : "?");
			name = buf;
		} else {
			e.cat = TRACE_COMPUTE_OTHER;
			name = "Memset";
		}
		e.name = trace_intern(c->t, name ? name : "");
		trace_add(c->t, &e);
		if (corr >= 0) {
			TW_GROW(c->ce, c->cecap, c->nce + 1);
			c->ce[c->nce++] = (struct corr_ev){corr, c->t->nev - 1};
		}
	}
	if (rc == TW_OK && s != SQLITE_DONE)
		rc = nsys_fail(n, table);
	sqlite3_finalize(st);
	return rc;
}

static int ce_cmp(const void *pa, const void *pb)
{
	const struct corr_ev *a = pa, *b = pb;
	return (a->corr > b->corr) - (a->corr < b->corr);
}

/* NVTX step ranges and the launch time of each GPU event (through the runtime API table). */
static enum tw_result read_steps(struct ctx *c, size_t first)
{
	struct nsys *n = c->n;
	enum tw_result rc = TW_OK;
	if (!has_table(n, "NVTX_EVENTS", &rc))
		return rc;
	static const char *const cols[] = {"start", "end", "text", "textId", NULL};
	TW_CHECK(need_columns(n, "NVTX_EVENTS", cols));
	bool have_strings = has_table(n, "StringIds", &rc);
	TW_CHECK(rc);
	sqlite3_stmt *st;
	const char *sql = have_strings
		? "SELECT e.start, e.end, COALESCE(e.text, s.value), e.rowid FROM NVTX_EVENTS e"
		  " LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL"
		: "SELECT start, end, text, rowid FROM NVTX_EVENTS WHERE end IS NOT NULL";
	if (sqlite3_prepare_v2(n->h, sql, -1, &st, NULL) != SQLITE_OK)
		return nsys_fail(n, "NVTX_EVENTS");
	struct prof_host_step *steps = NULL;
	size_t ns = 0, cap = 0;
	int s;
	int64_t row = 0;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		row = sqlite3_column_int64(st, 3); /* rowid, for messages */
		const char *name = (const char *)sqlite3_column_text(st, 2);
		int64_t step, a, b;
		if (!name || !prof_step_marker(name, &step))
			continue;
		if ((rc = col_time(n, st, 0, "NVTX_EVENTS", row, &a)) ||
		    (rc = col_time(n, st, 1, "NVTX_EVENTS", row, &b)))
			break;
		if (b < a) {
			rc = tw_errf(n->err, TW_ERR_INVALID,
				     "%s: NVTX_EVENTS row %lld: end %lld < start %lld", n->path,
				     (long long)row, (long long)b, (long long)a);
			break;
		}
		TW_GROW(steps, cap, ns + 1);
		steps[ns++] = (struct prof_host_step){step, a, b, c->rank, -1, -1};
	}
	if (rc == TW_OK && s != SQLITE_DONE)
		rc = nsys_fail(n, "NVTX_EVENTS");
	sqlite3_finalize(st);
	if (rc == TW_OK)
		rc = prof_check_steps(steps, ns, false, n->path, n->err);
	if (rc != TW_OK || ns == 0) {
		free(steps);
		return rc;
	}
	size_t nev = c->t->nev - first;
	int64_t *launch = TW_NEW_ARRAY(int64_t, nev + 1);
	for (size_t k = 0; k < nev; k++)
		launch[k] = -1;
	if (has_table(n, "CUPTI_ACTIVITY_KIND_RUNTIME", &rc) && c->nce) {
		qsort(c->ce, c->nce, sizeof(*c->ce), ce_cmp);
		if (sqlite3_prepare_v2(n->h, "SELECT correlationId, start, rowid FROM"
				       " CUPTI_ACTIVITY_KIND_RUNTIME", -1, &st, NULL) != SQLITE_OK) {
			rc = nsys_fail(n, "CUPTI_ACTIVITY_KIND_RUNTIME");
		} else {
			while (rc == TW_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
				int64_t corr, a;
				row = sqlite3_column_int64(st, 2); /* rowid, for messages */
				if ((rc = col_int(n, st, 0, "CUPTI_ACTIVITY_KIND_RUNTIME", row, true, &corr)) ||
				    (rc = col_time(n, st, 1, "CUPTI_ACTIVITY_KIND_RUNTIME", row, &a)))
					break;
				struct corr_ev key = {corr, 0};
				struct corr_ev *hit = bsearch(&key, c->ce, c->nce, sizeof(*c->ce), ce_cmp);
				/* several events may share one id: walk to all of them */
				while (hit && hit > c->ce && hit[-1].corr == corr)
					hit--;
				for (; hit && hit < c->ce + c->nce && hit->corr == corr; hit++)
					launch[hit->ev - first] = a;
			}
			sqlite3_finalize(st);
		}
	}
	if (rc == TW_OK)
		prof_steps_to_gpu(c->t, c->rank, first, nev, launch, steps, ns);
	free(launch);
	free(steps);
	return rc;
}

enum tw_result prof_import_nsys(const char *path, int64_t rank, struct trace *t,
				struct tw_err *err)
{
	struct stat sb;
	if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
		return tw_errf(err, TW_ERR_INVALID, "%s: no such file", path);
	struct nsys n = {NULL, path, err};
	if (sqlite3_open_v2(path, &n.h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		enum tw_result r = tw_errf(err, TW_ERR_INVALID, "%s: cannot open: %s", path,
					   n.h ? sqlite3_errmsg(n.h) : "out of memory");
		sqlite3_close(n.h);
		return r;
	}
	struct ctx c = {&n, t, (int32_t)rank, NULL, 0, 0};
	size_t first = t->nev;
	enum tw_result rc = TW_OK;
	bool kern = has_table(&n, "CUPTI_ACTIVITY_KIND_KERNEL", &rc);
	bool mcpy = rc == TW_OK && has_table(&n, "CUPTI_ACTIVITY_KIND_MEMCPY", &rc);
	bool mset = rc == TW_OK && has_table(&n, "CUPTI_ACTIVITY_KIND_MEMSET", &rc);
	if (rc == TW_OK && !kern && !mcpy)
		rc = tw_errf(err, TW_ERR_INVALID,
			     "%s: no CUPTI_ACTIVITY_KIND_KERNEL or _MEMCPY table (not an nsys "
			     "export, or the report has no CUDA trace: profile with --trace=cuda)",
			     path);
	if (rc == TW_OK && kern) {
		static const char *const cols[] = {"start", "end", "deviceId", "streamId",
						   "correlationId", "demangledName", "shortName", NULL};
		static const char *const strings[] = {"id", "value", NULL};
		if (!has_table(&n, "StringIds", &rc) && rc == TW_OK)
			rc = tw_errf(err, TW_ERR_INVALID, "%s: no StringIds table (kernel names)", path);
		if (rc == TW_OK)
			rc = need_columns(&n, "StringIds", strings);
		if (rc == TW_OK)
			rc = need_columns(&n, "CUPTI_ACTIVITY_KIND_KERNEL", cols);
		if (rc == TW_OK)
			rc = one_process(&n);
		if (rc == TW_OK)
			rc = read_activity(&c, "CUPTI_ACTIVITY_KIND_KERNEL",
					   "SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId,"
					   " COALESCE(d.value, s.value), NULL, NULL, k.rowid,"
					   " k.demangledName, k.shortName"
					   " FROM CUPTI_ACTIVITY_KIND_KERNEL k"
					   " LEFT JOIN StringIds d ON d.id = k.demangledName"
					   " LEFT JOIN StringIds s ON s.id = k.shortName",
					   0);
	}
	if (rc == TW_OK && mcpy) {
		static const char *const cols[] = {"start", "end", "deviceId", "streamId",
						   "correlationId", "bytes", "copyKind", NULL};
		rc = need_columns(&n, "CUPTI_ACTIVITY_KIND_MEMCPY", cols);
		if (rc == TW_OK)
			rc = read_activity(&c, "CUPTI_ACTIVITY_KIND_MEMCPY",
					   "SELECT start, end, deviceId, streamId, correlationId, NULL,"
					   " bytes, copyKind, rowid FROM CUPTI_ACTIVITY_KIND_MEMCPY",
					   1);
	}
	if (rc == TW_OK && mset) {
		static const char *const cols[] = {"start", "end", "deviceId", "streamId",
						   "correlationId", "bytes", NULL};
		rc = need_columns(&n, "CUPTI_ACTIVITY_KIND_MEMSET", cols);
		if (rc == TW_OK)
			rc = read_activity(&c, "CUPTI_ACTIVITY_KIND_MEMSET",
					   "SELECT start, end, deviceId, streamId, correlationId, NULL,"
					   " bytes, 0, rowid FROM CUPTI_ACTIVITY_KIND_MEMSET",
					   2);
	}
	if (rc == TW_OK)
		rc = read_steps(&c, first);
	if (rc == TW_OK) {
		if (rank + 1 > t->nranks)
			t->nranks = rank + 1;
	} else {
		t->nev = first;
	}
	free(c.ce);
	sqlite3_close(n.h);
	return rc;
}
