/* import_kineto — PyTorch profiler (Kineto) Chrome-trace JSON (reference/profiling.md §5).
 *
 * GPU work: complete events ("ph": "X") of cat kernel, gpu_memcpy, gpu_memset; ts/dur in us
 * (relative to baseTimeNanoseconds when present). Collectives: NCCL kernel names, overridden
 * by the "Collective name" arg Kineto copies from record_param_comms, which also gives the
 * message size ("In/Out msg nelems" x dtype) and "Group size". Steps: GPU-side
 * ProfilerStep#N annotations (gpu_user_annotation) when present, else the CPU ones projected
 * onto the GPU through the launches' correlation ids. */
#include "prof_int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KINETO_MAX_FILE_BYTES (2LL * TW_GIB)

static const cJSON *arg(const cJSON *args, const char *key)
{
	return args ? cJSON_GetObjectItemCaseSensitive(args, key) : NULL;
}

static bool arg_num(const cJSON *args, const char *key, double *out)
{
	const cJSON *v = arg(args, key);
	/* ids, sizes and counts beyond 4e15 are not real and would overflow int64 casts */
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 4e15)
		return false;
	*out = v->valuedouble;
	return true;
}

/* An id from the file as int32; out of range or not finite: -1 (unknown). */
static int32_t to_i32(double v)
{
	return isfinite(v) && v >= INT32_MIN && v <= INT32_MAX ? (int32_t)v : -1;
}

/* c10 dtype names as record_param_comms writes them */
static int dtype_bytes(const char *s)
{
	static const struct {
		const char *name;
		int bytes;
	} t[] = {{"Float", 4}, {"BFloat16", 2}, {"Half", 2}, {"Double", 8}, {"Int", 4},
		 {"Long", 8},  {"Short", 2},    {"Byte", 1}, {"Char", 1},   {"Bool", 1},
		 {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}};
	for (size_t i = 0; s && i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(s, t[i].name))
			return t[i].bytes;
	return 0;
}

/* "Collective name" -> category; false for unknown names (barrier, ...) */
static bool coll_from_name(const char *s, enum trace_cat *out)
{
	if (strstr(s, "reduce_scatter"))
		*out = TRACE_REDUCE_SCATTER;
	else if (strstr(s, "allgather") || strstr(s, "all_gather"))
		*out = TRACE_ALL_GATHER;
	else if (strstr(s, "allreduce") || strstr(s, "all_reduce"))
		*out = TRACE_ALL_REDUCE;
	else if (strstr(s, "all_to_all") || strstr(s, "alltoall"))
		*out = TRACE_ALL_TO_ALL;
	else if (strstr(s, "broadcast") || !strcmp(s, "reduce"))
		*out = TRACE_BROADCAST;
	else if (strstr(s, "send") || strstr(s, "recv"))
		*out = TRACE_P2P;
	else
		return false;
	return true;
}

struct launch {
	int64_t corr, t_ns;
};

static int launch_cmp(const void *pa, const void *pb)
{
	const struct launch *a = pa, *b = pb;
	return (a->corr > b->corr) - (a->corr < b->corr);
}

static enum tw_result bad(struct tw_err *err, const char *path, size_t i, const char *field,
			  const char *rule)
{
	return tw_errf(err, TW_ERR_INVALID, "%s: traceEvents[%zu].%s: %s", path, i, field, rule);
}

/* ---- exact times --------------------------------------------------------------------------
 * A double resolves Unix-epoch microseconds (~1.7e15) only to 0.25 us, and cJSON keeps no
 * number text. So before parsing, every non-negative "ts" of traceEvents written as a plain
 * decimal is rewritten in place, relative to the smallest one's integer part (the base), with
 * its digits kept and spaces after it: "1696118400000000.300" -> "0.300" + spaces. The
 * importer adds base x 1000 back to every non-negative ts, so ts is exact to the ns. When
 * some non-negative ts cannot be rewritten (an exponent, more than 18 digits, an escaped key)
 * nothing is. baseTimeNanoseconds written as an integer is read exactly too. */

struct times_pass {
	bool rewrite;          /* pass 2: rewrite (else only scan) */
	bool ok;               /* every non-negative ts is plain */
	int64_t base_us;       /* smallest integer part of a non-negative ts, INT64_MAX: none */
	bool have_base_ns;     /* baseTimeNanoseconds was an integer literal */
	int64_t base_ns;
};

static size_t skip_ws(const char *s, size_t i, size_t n)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

/* A number token at [i, *end): its integer part when it is a plain non-negative decimal of at
 * most 18 integer digits (*plain), its sign. */
static void number_token(const char *s, size_t i, size_t n, size_t *end, bool *neg, bool *plain,
			 int64_t *ipart, size_t *dot)
{
	size_t k = i;
	*neg = k < n && s[k] == '-';
	if (*neg)
		k++;
	size_t d0 = k;
	int64_t v = 0;
	while (k < n && s[k] >= '0' && s[k] <= '9') {
		if (k - d0 < 18)
			v = v * 10 + (s[k] - '0');
		k++;
	}
	size_t ndig = k - d0;
	*dot = k;
	if (k < n && s[k] == '.') {
		k++;
		while (k < n && s[k] >= '0' && s[k] <= '9')
			k++;
	}
	bool expo = k < n && (s[k] == 'e' || s[k] == 'E');
	while (k < n && ((s[k] >= '0' && s[k] <= '9') || s[k] == '.' || s[k] == 'e' || s[k] == 'E' ||
			 s[k] == '+' || s[k] == '-'))
		k++;
	*end = k;
	*plain = ndig > 0 && ndig <= 18 && !expo && (ndig == 1 || s[d0] != '0');
	*ipart = v;
}

static void times_scan(char *s, size_t n, struct times_pass *p)
{
	int depth = 0;
	bool events_at2 = false; /* the array at depth 2 is the top-level traceEvents */
	int key = 0;             /* the key just read at the current depth: 1 ts, 2 traceEvents,
				  * 3 baseTimeNanoseconds */
	size_t i = 0;
	while (i < n) {
		char c = s[i];
		if (c == '"') {
			size_t a = ++i;
			bool esc = false;
			while (i < n && s[i] != '"') {
				if (s[i] == '\\') {
					esc = true;
					i++;
				}
				i++;
			}
			size_t b = i < n ? i : n;
			i = i < n ? i + 1 : n;
			size_t j = skip_ws(s, i, n);
			if (j >= n || s[j] != ':') {
				key = 0;
				continue;
			}
			/* a key */
			size_t len = b - a;
			key = 0;
			if (depth == 3 && events_at2) {
				if (esc)
					p->ok = false; /* it might spell "ts" */
				else if (len == 2 && !memcmp(s + a, "ts", 2))
					key = 1;
			} else if (depth == 1 && !esc && len == 11 && !memcmp(s + a, "traceEvents", 11)) {
				key = 2;
			} else if (depth == 1 && !esc && len == 19 &&
				   !memcmp(s + a, "baseTimeNanoseconds", 19)) {
				key = 3;
			}
			i = skip_ws(s, j + 1, n);
			if (i < n && (s[i] == '-' || (s[i] >= '0' && s[i] <= '9'))) {
				size_t end, dot;
				bool neg, plain;
				int64_t ip;
				number_token(s, i, n, &end, &neg, &plain, &ip, &dot);
				if (key == 1 && !neg) {
					if (!plain)
						p->ok = false;
					else if (!p->rewrite && ip < p->base_us)
						p->base_us = ip;
					else if (p->rewrite) {
						/* ip - base, then the original fraction, then spaces */
						char buf[24];
						int w = snprintf(buf, sizeof(buf), "%" PRId64, ip - p->base_us);
						size_t k = i;
						memcpy(s + k, buf, (size_t)w);
						k += (size_t)w;
						for (size_t q = dot; q < end; q++)
							s[k++] = s[q];
						while (k < end)
							s[k++] = ' ';
					}
				} else if (key == 3 && !p->rewrite && !p->have_base_ns && !neg &&
					   dot == end && end - i <= 19) {
					/* an integer of up to 19 digits: exact as int64 when it fits */
					char num[24];
					memcpy(num, s + i, end - i);
					num[end - i] = '\0';
					char *stop;
					errno = 0;
					long long v = strtoll(num, &stop, 10);
					if (errno == 0 && *stop == '\0') {
						p->have_base_ns = true;
						p->base_ns = v;
					}
				}
				i = end;
				key = 0;
			}
			continue;
		}
		if (c == '{' || c == '[') {
			depth++;
			if (depth == 2)
				events_at2 = c == '[' && key == 2;
			key = 0;
		} else if (c == '}' || c == ']') {
			depth--;
			key = 0;
		} else if (c == ',') {
			key = 0;
		}
		i++;
	}
}

/* Rewrite text's non-negative ts relative to their smallest integer part; *base_us gets it
 * (0: nothing rewritten). base_ns / have_base_ns: baseTimeNanoseconds read exactly. */
static void exact_times(char *text, size_t len, int64_t *base_us, int64_t *base_ns,
			bool *have_base_ns)
{
	struct times_pass p = {.ok = true, .base_us = INT64_MAX};
	times_scan(text, len, &p);
	*have_base_ns = p.have_base_ns;
	*base_ns = p.base_ns;
	*base_us = 0;
	if (!p.ok || p.base_us == INT64_MAX || p.base_us == 0)
		return;
	p.rewrite = true;
	times_scan(text, len, &p);
	*base_us = p.base_us;
}

/* A ts (us, rebased by exact_times when >= 0) as ns; false when beyond 4e15 us. */
static bool ts_ns(double v, int64_t base_us, int64_t *out)
{
	if (!isfinite(v) || fabs(v) > 4e15)
		return false;
	int64_t ns = llround(v * 1000.0);
	if (v >= 0 && base_us > 0) {
		if (base_us > 4000000000000000LL - ns / 1000)
			return false;
		ns += base_us * 1000;
	}
	*out = ns;
	return true;
}

/* ---- reading the file without a tree of all of it -----------------------------------------
 * cJSON allocates a node per value, ~7x the text of a trace, so the file is never parsed
 * whole. The top level is parsed from a copy with the traceEvents array's contents cut out,
 * and the array's elements are found one after the other by a scanner that knows only
 * strings and brackets, each parsed by cJSON, imported and freed. The scanner only finds
 * boundaries: cJSON still reads every byte, at the nesting depth it has in the file, so the
 * file is accepted exactly when a whole-file parse accepts it. Malformed JSON is reported
 * before any field's error and, of several, the first in the text, as a whole-file parse
 * would, at its line and column in the file. A second top-level traceEvents (cJSON would take
 * the first and drop the other silently) is refused before anything is parsed. The text must
 * be NUL-terminated with no NUL inside (checked first). */

#define SCAN_OPEN SIZE_MAX /* a string or bracket left open at the end of the text */

/* cJSON's whitespace: every byte up to the space */
static size_t skip_json_ws(const char *s, size_t i, size_t n)
{
	while (i < n && (unsigned char)s[i] <= ' ')
		i++;
	return i;
}

/* Just past the closing quote of the string opening at s[i]; a backslash escapes the next
 * byte, as cJSON reads it. */
static size_t string_end(const char *s, size_t i, size_t n)
{
	for (i++; i < n;) {
		i += strcspn(s + i, "\"\\"); /* stops at the NUL at n */
		if (i >= n)
			break;
		if (s[i] == '"')
			return i + 1;
		i += 2;
	}
	return SCAN_OPEN;
}

/* The end of the value starting at s[i] (not a space): past its closing quote or bracket, or,
 * for a number or literal, at the first byte that cannot be part of one. Brackets are only
 * counted (cJSON checks that they match). *deep: the first bracket that cJSON, whose
 * containers nest at most CJSON_NESTING_LIMIT deep, refuses when the value sits inside
 * `depth` containers (SIZE_MAX: none). */
static size_t value_end(const char *s, size_t i, size_t n, size_t depth, size_t *deep)
{
	*deep = SIZE_MAX;
	if (s[i] == '"')
		return string_end(s, i, n);
	if (s[i] != '{' && s[i] != '[') {
		while (i < n && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
				 (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '+' || s[i] == '-' ||
				 s[i] == '.'))
			i++;
		return i;
	}
	size_t level = 0; /* open brackets of this value */
	while (i < n) {
		char c = s[i];
		if (c == '"') {
			i = string_end(s, i, n);
			if (i == SCAN_OPEN)
				return SCAN_OPEN;
		} else {
			if (c == '{' || c == '[') {
				if (depth + level >= CJSON_NESTING_LIMIT && *deep == SIZE_MAX)
					*deep = i;
				level++;
			} else if (c == '}' || c == ']') {
				if (--level == 0)
					return i + 1;
			}
			i++;
		}
		i += strcspn(s + i, "\"{}[]");
	}
	return SCAN_OPEN;
}

/* Whether the key s[0, len) (quotes included) reads "traceEvents" as cJSON decodes keys (an
 * escaped spelling is the same key to it). */
static bool key_is_events(const char *s, size_t len)
{
	if (!memchr(s, '\\', len))
		return len == 13 && !memcmp(s + 1, "traceEvents", 11);
	cJSON *k = cJSON_ParseWithLength(s, len);
	bool yes = cJSON_IsString(k) && !strcmp(k->valuestring, "traceEvents");
	cJSON_Delete(k);
	return yes;
}

/* Where the events are: the first top-level "traceEvents" key's array, or the top level
 * itself when it is an array (refused, but read like one to tell malformed from valid). Found
 * by a walk over the top level that stops where it cannot go on (cJSON reports why). */
struct kineto_layout {
	size_t open;  /* the array's '[' (SIZE_MAX: no array) */
	size_t close; /* its ']' (n: not closed) */
	size_t depth; /* containers around its elements: 2 (1: the top level is the array) */
	bool twice;   /* a second top-level traceEvents key */
};

static void locate_events(const char *s, size_t n, struct kineto_layout *L)
{
	*L = (struct kineto_layout){.open = SIZE_MAX};
	size_t deep, e;
	/* cJSON skips a UTF-8 byte order mark */
	size_t i = skip_json_ws(s, n > 4 && !memcmp(s, "\xEF\xBB\xBF", 3) ? 3 : 0, n);
	if (i < n && s[i] == '[') {
		e = value_end(s, i, n, 0, &deep);
		*L = (struct kineto_layout){i, e == SCAN_OPEN ? n : e - 1, 1, false};
		return;
	}
	if (i >= n || s[i] != '{')
		return;
	bool seen = false;
	for (i = skip_json_ws(s, i + 1, n); i < n && s[i] == '"';) {
		size_t k = string_end(s, i, n);
		if (k == SCAN_OPEN)
			return;
		size_t v = skip_json_ws(s, k, n);
		if (v >= n || s[v] != ':')
			return;
		v = skip_json_ws(s, v + 1, n);
		if (v >= n)
			return;
		e = value_end(s, v, n, 1, &deep);
		if (key_is_events(s + i, k - i)) {
			if (seen) {
				L->twice = true;
				return;
			}
			seen = true;
			if (s[v] == '[')
				*L = (struct kineto_layout){v, e == SCAN_OPEN ? n : e - 1, 2, false};
		}
		if (e == SCAN_OPEN)
			return;
		i = skip_json_ws(s, e, n);
		if (i >= n || s[i] != ',')
			return;
		i = skip_json_ws(s, i + 1, n);
	}
}

/* "path:line:col: malformed JSON" at byte off of the text (cJSON's error position), naming
 * the element it is in (index SIZE_MAX: none). */
static enum tw_result malformed(struct tw_err *err, const char *path, const char *s, size_t n,
				size_t off, size_t index)
{
	char where[48] = "";
	if (index != SIZE_MAX)
		snprintf(where, sizeof(where), " (in traceEvents[%zu])", index);
	return json_malformed(path, s, n, off, where, err);
}

/* The elements of the array, one at a time. */
struct event_reader {
	const char *path;
	const char *s; /* the whole text, NUL-terminated at n */
	size_t n;
	size_t pos;    /* next byte to read */
	struct kineto_layout L;
	size_t index;  /* elements read */
	bool done;
};

/* The next element as its own tree (the caller deletes it), or *out = NULL after the last.
 * Errors are malformed JSON, at the position a whole-file parse gives. */
static enum tw_result next_event(struct event_reader *r, cJSON **out, struct tw_err *err)
{
	const char *s = r->s;
	size_t n = r->n, i = skip_json_ws(s, r->pos, n), deep;
	/* the index is named only when the array is traceEvents */
	size_t idx = r->L.depth == 2 ? r->index : SIZE_MAX;
	*out = NULL;
	if (r->done)
		return TW_OK;
	if (r->index == 0 && i < n && s[i] == ']' && i == r->L.close) {
		r->done = true;
		return TW_OK;
	}
	/* cJSON reports an error at the end of the text on its last byte */
	if (i >= n || !strchr("{[\"-0123456789tfn", s[i]))
		return malformed(err, r->path, s, n, i < n ? i : n - 1, idx);
	size_t e = value_end(s, i, n, r->L.depth, &deep);
	if (deep != SIZE_MAX)
		return malformed(err, r->path, s, n, deep, idx);
	/* cJSON reads one value and stops; given the rest of the text, it fails where a
	 * whole-file parse fails (an error at the value's end lands past it, not on it) */
	const char *pend = NULL;
	cJSON *v = cJSON_ParseWithLengthOpts(s + i, n - i, &pend, 0);
	if (!v || e == SCAN_OPEN || pend != s + e) {
		cJSON_Delete(v);
		size_t at = pend ? (size_t)(pend - s) : i;
		return malformed(err, r->path, s, n, at < n ? at : n - 1, idx);
	}
	size_t j = skip_json_ws(s, e, n);
	if (j < n && s[j] == ',') {
		r->pos = j + 1;
	} else if (j < n && s[j] == ']' && j == r->L.close) {
		r->pos = j + 1;
		r->done = true;
	} else {
		cJSON_Delete(v);
		return malformed(err, r->path, s, n, j < n ? j : n - 1, idx);
	}
	r->index++;
	*out = v;
	return TW_OK;
}

/* rc, a field's error, unless the rest of the array is malformed: a whole-file parse reports
 * that first. */
static enum tw_result syntax_first(struct event_reader *r, enum tw_result rc, struct tw_err *err)
{
	struct tw_err e2 = {0};
	enum tw_result r2;
	cJSON *v;
	while ((r2 = next_event(r, &v, &e2)) == TW_OK && v)
		cJSON_Delete(v);
	if (r2 != TW_OK) {
		*err = e2;
		return r2;
	}
	return rc;
}

/* The top level without the array's contents (cJSON's tree of it is small) into *root; a
 * syntax error, in the array first when it comes first in the text. */
static enum tw_result parse_top(struct event_reader *r, cJSON **root, struct tw_err *err)
{
	const char *s = r->s, *end = NULL;
	size_t n = r->n, open = r->L.open, cut = 0, hn = n;
	char *copy = NULL;
	if (open != SIZE_MAX) {
		cut = r->L.close - (open + 1);
		hn = n - cut;
		copy = tw_malloc(hn + 1);
		memcpy(copy, s, open + 1);
		memcpy(copy + open + 1, s + r->L.close, n - r->L.close);
		copy[hn] = '\0';
	}
	const char *h = copy ? copy : s;
	*root = cJSON_ParseWithLengthOpts(h, hn, &end, 0);
	size_t at = end ? (size_t)(end - h) : 0;
	if (*root) { /* nothing but whitespace after the value, as json_parse */
		while (at < hn && strchr(" \t\r\n", h[at]))
			at++;
		if (at < hn) {
			cJSON_Delete(*root);
			*root = NULL;
		}
	}
	free(copy);
	if (*root)
		return TW_OK;
	if (open == SIZE_MAX || at < open)
		return malformed(err, r->path, s, n, at, SIZE_MAX);
	/* at or after the cut: the array's contents come first in the text */
	enum tw_result rc = malformed(err, r->path, s, n, at > open ? at + cut : at, SIZE_MAX);
	return syntax_first(r, rc, err);
}

/* ---- events -------------------------------------------------------------------------------- */

/* One file's import, as the events go by. */
struct kineto_import {
	const char *path;
	struct trace *t;
	int64_t rank;       /* the file's rank */
	int64_t base;       /* baseTimeNanoseconds (0: none) */
	bool have_base;     /* baseTimeNanoseconds was given */
	int64_t ts_base_us; /* exact_times's base */
	size_t first;       /* t->ev[first ..]: this file's events */
	struct launch *launches;
	size_t nl, lcap;
	struct prof_host_step *steps;
	size_t ns, scap;
	int64_t *corr; /* per imported event: its correlation id, -1: none */
	size_t ccap;
	int64_t max_rank;  /* ranks seen + 1 */
	size_t gpu_steps;  /* GPU-side ProfilerStep annotations */
	int64_t *peaks;    /* twin's exports: per rank peak memory, bytes (0: none) */
	size_t npeaks;
	const cJSON *ws;   /* distributedInfo.world_size (in the top level's tree) */
};

/* traceEvents[i] */
static enum tw_result import_event(struct kineto_import *k, const cJSON *e, size_t i,
				   struct tw_err *err)
{
	const char *path = k->path;
	struct trace *t = k->t;
	if (!cJSON_IsObject(e))
		return tw_errf(err, TW_ERR_INVALID, "%s: traceEvents[%zu]: must be an object", path, i);
	const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
	if (ph && !cJSON_IsString(ph))
		return bad(err, path, i, "ph", "must be a string");
	if (ph && !strcmp(ph->valuestring, "M")) {
		/* twin's exports keep each rank's recorded peak memory as metadata */
		const cJSON *mn = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
		const cJSON *margs = cJSON_GetObjectItemCaseSensitive(e, "args");
		double v;
		if (cJSON_IsString(mn) && !strcmp(mn->valuestring, "twin peak memory") &&
		    cJSON_IsNumber(pid) && pid->valuedouble >= 0 && pid->valuedouble < PROF_MAX_RANKS &&
		    arg_num(margs, "bytes", &v) && v > 0 && v < 9e18) {
			size_t pr = (size_t)pid->valuedouble;
			if (pr >= k->npeaks) {
				k->peaks = tw_realloc_array(k->peaks, pr + 1, sizeof(*k->peaks));
				memset(k->peaks + k->npeaks, 0, (pr + 1 - k->npeaks) * sizeof(*k->peaks));
				k->npeaks = pr + 1;
			}
			k->peaks[pr] = (int64_t)v;
			if ((int64_t)pr + 1 > k->max_rank)
				k->max_rank = (int64_t)pr + 1;
		}
	}
	if (!ph || strcmp(ph->valuestring, "X") != 0)
		return TW_OK; /* metadata, instants, counters, flows */
	const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
	const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
	if (!cJSON_IsString(name))
		return bad(err, path, i, "name", name ? "must be a string" : "missing");
	if (cat && !cJSON_IsString(cat))
		return bad(err, path, i, "cat", "must be a string");
	int64_t tsn = 0;
	if (!cJSON_IsNumber(ts) || !ts_ns(ts->valuedouble, k->ts_base_us, &tsn))
		return bad(err, path, i, "ts",
			   !ts ? "missing" : !cJSON_IsNumber(ts) ? "must be a number (us)"
			   : isfinite(ts->valuedouble) ? "must be at most 4e15 (us)"
						       : "must be a finite number (us)");
	if (!cJSON_IsNumber(dur) || !isfinite(dur->valuedouble) || dur->valuedouble < 0 ||
	    dur->valuedouble > 4e15)
		return bad(err, path, i, "dur", dur ? "must be a number >= 0 (us)" : "missing");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
	if (args && !cJSON_IsObject(args))
		return bad(err, path, i, "args", "must be an object");
	const char *c = cat ? cat->valuestring : "";
	/* twin's own exports carry each event's rank (one file may hold several) */
	double rv;
	int32_t erank = (int32_t)k->rank;
	if (cJSON_IsNumber(arg(args, "rank"))) {
		if (!arg_num(args, "rank", &rv) || rv < 0 || rv >= PROF_MAX_RANKS || rv != floor(rv)) {
			char rule[64];
			snprintf(rule, sizeof(rule), "must be an integer in [0, %d]", PROF_MAX_RANKS - 1);
			return bad(err, path, i, "args.rank", rule);
		}
		erank = (int32_t)rv;
	}
	if (erank + 1 > k->max_rank)
		k->max_rank = erank + 1;
	/* times are ns in [0, PROF_MAX_TIME_NS]: nothing downstream overflows, and an export
	 * (which writes them relative to a base >= 0) imports back */
	int64_t start = k->base + tsn, end;
	if (start < 0)
		return bad(err, path, i, "ts", k->have_base ? "starts before time 0 (ts + "
							      "baseTimeNanoseconds < 0); times must be >= 0"
							    : "must be >= 0 (us)");
	if (start > PROF_MAX_TIME_NS)
		return bad(err, path, i, "ts", k->have_base ? "ts + baseTimeNanoseconds is beyond 4e18 ns"
							    : "beyond 4e18 ns");
	end = start + llround(dur->valuedouble * 1000.0);
	if (end > PROF_MAX_TIME_NS)
		return bad(err, path, i, "dur", "ts + dur is beyond 4e18 ns (an int64 ns clock)");
	double cv;
	if (!strcmp(c, "cuda_runtime") || !strcmp(c, "cuda_driver")) {
		if (arg_num(args, "correlation", &cv)) {
			TW_GROW(k->launches, k->lcap, k->nl + 1);
			k->launches[k->nl++] = (struct launch){(int64_t)cv, start};
		}
	} else if (!strcmp(c, "gpu_user_annotation") &&
		   !strncmp(name->valuestring, "ProfilerStep#", 13)) {
		/* the step's span on the GPU itself: a marker as it is (Kineto writes one per
		 * stream the step ran kernels on; the step's window is their union) */
		struct trace_event m = prof_blank_event(erank);
		const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
		m.cat = TRACE_MARKER;
		m.stream = cJSON_IsNumber(tid) ? to_i32(tid->valuedouble) : 0;
		/* Kineto's GPU rows: pid is the device */
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
		m.device = cJSON_IsNumber(pid) ? to_i32(pid->valuedouble) : 0;
		m.start_ns = start;
		m.end_ns = end;
		m.name = trace_intern(t, name->valuestring);
		trace_add(t, &m);
		TW_GROW(k->corr, k->ccap, t->nev - k->first);
		k->corr[t->nev - k->first - 1] = -1;
		k->gpu_steps++;
	} else if ((!strcmp(c, "user_annotation") || !strcmp(c, "cpu_op")) &&
		   !strncmp(name->valuestring, "ProfilerStep#", 13)) {
		int64_t s;
		if (prof_step_marker(name->valuestring, &s)) {
			TW_GROW(k->steps, k->scap, k->ns + 1);
			k->steps[k->ns++] = (struct prof_host_step){s, start, end, erank, -1, -1};
		}
	} else if (!strcmp(c, "kernel") || !strcmp(c, "gpu_memcpy") || !strcmp(c, "gpu_memset") ||
		   (!strcmp(c, "cpu_op") && cJSON_IsString(arg(args, "twin category")))) {
		/* (twin's exports write host-side work, the CPU optimizer's and the host
		 * executor's, as cpu_op with its category: it comes back as it went) */
		struct trace_event ev = prof_blank_event(erank);
		double v;
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
		const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
		if (arg_num(args, "device", &v) || (cJSON_IsNumber(pid) && (v = pid->valuedouble, 1)))
			ev.device = to_i32(v);
		if (arg_num(args, "stream", &v) || (cJSON_IsNumber(tid) && (v = tid->valuedouble, 1)))
			ev.stream = to_i32(v);
		ev.start_ns = start;
		ev.end_ns = end;
		ev.cat = !strcmp(c, "gpu_memset") ? TRACE_COMPUTE_OTHER
						  : prof_classify_kernel(name->valuestring);
		if (arg_num(args, "bytes", &v) && v > 0)
			ev.bytes = (int64_t)v;
		/* FLOPs and where the op sits in the step, as twin's exports say them */
		if (arg_num(args, "flops", &v) && v > 0)
			ev.flops = v;
		if (arg_num(args, "layer", &v) && v >= 0)
			ev.layer = to_i32(v);
		if (arg_num(args, "micro-batch", &v) && v >= 0)
			ev.micro = to_i32(v);
		if (arg_num(args, "stage", &v) && v >= 0)
			ev.stage = to_i32(v);
		const cJSON *phase = arg(args, "phase");
		for (int q = 0; cJSON_IsString(phase) && q < 4; q++)
			if (!strcmp(phase->valuestring, plan_phase_name((enum plan_phase)q)))
				ev.phase = q;
		if (cJSON_IsTrue(arg(args, "recompute")))
			ev.flags |= TRACE_F_RECOMPUTE;
		const cJSON *cn = arg(args, "Collective name");
		enum trace_cat cc;
		if (cJSON_IsString(cn) && coll_from_name(cn->valuestring, &cc))
			ev.cat = cc;
		/* twin's own exports say the category and the step outright */
		const cJSON *tc = arg(args, "twin category");
		if (cJSON_IsString(tc) && trace_cat_parse(tc->valuestring, &cc) && cc != TRACE_MARKER)
			ev.cat = cc;
		if (cJSON_IsString(tc) && arg_num(args, "step", &v) && v >= 0 && v < 1e9)
			ev.step = to_i32(v);
		/* NCCL's rooted Reduce shares the broadcast category; the flag keeps its name */
		if (ev.cat == TRACE_BROADCAST &&
		    (prof_nccl_is_reduce(name->valuestring) ||
		     (cJSON_IsString(cn) && !strcmp(cn->valuestring, "reduce"))))
			ev.flags |= TRACE_F_REDUCE;
		if (trace_cat_is_comm(ev.cat)) {
			const cJSON *dt = arg(args, "dtype");
			int es = cJSON_IsString(dt) ? dtype_bytes(dt->valuestring) : 0;
			double in = 0, out = 0, gs = 0;
			arg_num(args, "In msg nelems", &in);
			arg_num(args, "Out msg nelems", &out);
			/* the NCCL count argument: per-rank output for reduce-scatter */
			double nel = ev.cat == TRACE_REDUCE_SCATTER ? out : in;
			if (es > 0 && nel > 0)
				ev.bytes = (int64_t)(nel * es);
			/* a number out of range would be stored as a wrong size (0: unknown) */
			const cJSON *gsv = arg(args, "Group size");
			if (cJSON_IsNumber(gsv) &&
			    !(arg_num(args, "Group size", &gs) && gs >= 0 && gs <= PROF_MAX_RANKS &&
			      gs == floor(gs))) {
				char rule[64];
				snprintf(rule, sizeof(rule), "must be an integer in [0, %d]", PROF_MAX_RANKS);
				return bad(err, path, i, "args.Group size", rule);
			}
			if (cJSON_IsNumber(gsv))
				ev.group_size = to_i32(gs);
			/* twin's own exports name the NCCL algorithm and protocol */
			const cJSON *al = arg(args, "NCCL algorithm"), *pr = arg(args, "NCCL protocol");
			if (cJSON_IsString(al) && cJSON_IsString(pr)) {
				enum trace_algo ta = TRACE_ALGO_UNKNOWN;
				enum trace_proto tq = TRACE_PROTO_UNKNOWN;
				for (int q = 1; q < TRACE_NUM_ALGOS; q++)
					if (!strcmp(al->valuestring, trace_algo_name((enum trace_algo)q)))
						ta = (enum trace_algo)q;
				for (int q = 1; q < TRACE_NUM_PROTOS; q++)
					if (!strcmp(pr->valuestring, trace_proto_name((enum trace_proto)q)))
						tq = (enum trace_proto)q;
				if (ta != TRACE_ALGO_UNKNOWN && tq != TRACE_PROTO_UNKNOWN)
					ev.flags |= trace_algo_flags(ta, tq);
			}
			/* the process group names the communicator on every member */
			const cJSON *pg = arg(args, "Process Group Name");
			if (cJSON_IsString(pg)) {
				uint64_t h = 1469598103934665603ULL;
				for (const char *q = pg->valuestring; *q; q++)
					h = (h ^ (unsigned char)*q) * 1099511628211ULL;
				ev.comm = (int64_t)(h >> 1) | 1; /* > 0 */
			}
		}
		ev.name = trace_intern(t, name->valuestring);
		trace_add(t, &ev);
		TW_GROW(k->corr, k->ccap, t->nev - k->first);
		k->corr[t->nev - k->first - 1] = arg_num(args, "correlation", &cv) ? (int64_t)cv : -1;
	}
	return TW_OK;
}

/* After the last event: check the steps, project host-side ones onto the GPU, set the ranks
 * and peak memory. */
static enum tw_result finish_import(struct kineto_import *k, struct tw_err *err)
{
	const cJSON *ws = k->ws;
	struct trace *t = k->t;
	enum tw_result rc = TW_OK;
	if (k->gpu_steps > 0) {
		/* the GPU-side steps are taken as they are: check them */
		struct prof_host_step *g = TW_NEW_ARRAY(struct prof_host_step, k->gpu_steps);
		size_t ng = 0;
		for (size_t q = k->first; q < t->nev; q++) {
			int64_t sn;
			const struct trace_event *m = &t->ev[q];
			if (m->cat == TRACE_MARKER && prof_step_marker(trace_name(t, m), &sn))
				g[ng++] = (struct prof_host_step){sn, m->start_ns, m->end_ns, m->rank,
								  m->device, m->stream};
		}
		rc = prof_check_steps(g, ng, true, k->path, err);
		free(g);
	} else if (k->ns > 0) {
		rc = prof_check_steps(k->steps, k->ns, false, k->path, err);
	}
	if (rc != TW_OK)
		return rc;
	if (k->ns > 0 && k->gpu_steps == 0) {
		/* launch time of each GPU event, through its correlation id */
		size_t n = t->nev - k->first;
		int64_t *launch = TW_NEW_ARRAY(int64_t, n + 1);
		if (k->nl > 1)
			qsort(k->launches, k->nl, sizeof(*k->launches), launch_cmp);
		for (size_t q = 0; q < n; q++) {
			launch[q] = -1;
			struct launch key = {k->corr[q], 0};
			const struct launch *l =
				k->corr[q] >= 0 && k->nl ? bsearch(&key, k->launches, k->nl,
								   sizeof(*k->launches), launch_cmp)
							 : NULL;
			if (l)
				launch[q] = l->t_ns;
		}
		/* per rank that has steps */
		for (size_t q = 0; q < k->ns; q++) {
			bool done = false;
			for (size_t p = 0; p < q && !done; p++)
				done = k->steps[p].rank == k->steps[q].rank;
			if (!done)
				prof_steps_to_gpu(t, k->steps[q].rank, k->first, n, launch, k->steps, k->ns);
		}
		free(launch);
	}
	int64_t nr = k->max_rank;
	if (cJSON_IsNumber(ws) && ws->valuedouble > nr && ws->valuedouble <= PROF_MAX_RANKS)
		nr = (int64_t)ws->valuedouble;
	if (nr > t->nranks) {
		if (t->peak_mem) { /* an earlier file's peaks: grow to the new rank count */
			int64_t *pm = TW_NEW_ARRAY(int64_t, (size_t)nr);
			memcpy(pm, t->peak_mem, (size_t)t->nranks * sizeof(*pm));
			free(t->peak_mem);
			t->peak_mem = pm;
		}
		t->nranks = nr;
	}
	if (k->npeaks > 0 && !t->peak_mem)
		t->peak_mem = TW_NEW_ARRAY(int64_t, (size_t)t->nranks);
	for (size_t q = 0; q < k->npeaks && (int64_t)q < t->nranks; q++)
		if (k->peaks[q] > 0)
			t->peak_mem[q] = k->peaks[q];
	return TW_OK;
}

/* The top level's fields: distributedInfo (rank, world_size), baseTimeNanoseconds. */
static enum tw_result read_top(struct kineto_import *k, const cJSON *root, int64_t exact_base_ns,
			       bool have_exact_base, struct tw_err *err)
{
	const char *path = k->path;
	const cJSON *di = cJSON_GetObjectItemCaseSensitive(root, "distributedInfo");
	const cJSON *r = cJSON_IsObject(di) ? cJSON_GetObjectItemCaseSensitive(di, "rank") : NULL;
	if (r) {
		if (!cJSON_IsNumber(r) || r->valuedouble < 0 || r->valuedouble >= PROF_MAX_RANKS ||
		    r->valuedouble != floor(r->valuedouble))
			return tw_errf(err, TW_ERR_INVALID,
				       "%s: distributedInfo.rank: must be an integer >= 0 (at most %d)",
				       path, PROF_MAX_RANKS - 1);
		k->rank = (int64_t)r->valuedouble;
	}
	const cJSON *ws = cJSON_IsObject(di) ? cJSON_GetObjectItemCaseSensitive(di, "world_size") : NULL;
	if (ws && !(cJSON_IsNumber(ws) && ws->valuedouble >= 1 && ws->valuedouble <= PROF_MAX_RANKS &&
		    ws->valuedouble == floor(ws->valuedouble)))
		return tw_errf(err, TW_ERR_INVALID,
			       "%s: distributedInfo.world_size: must be an integer in [1, %d]", path,
			       PROF_MAX_RANKS);
	k->ws = ws;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "baseTimeNanoseconds");
	if (b) {
		/* int64 ns clock: base (<= 4e18) + ts (|ts| <= 4e15 us) cannot overflow; the sums
		 * are checked against PROF_MAX_TIME_NS */
		if (!cJSON_IsNumber(b) || !isfinite(b->valuedouble) || b->valuedouble < 0 ||
		    b->valuedouble > 4e18 || (have_exact_base && exact_base_ns > PROF_MAX_TIME_NS))
			return tw_errf(err, TW_ERR_INVALID,
				       "%s: baseTimeNanoseconds: must be a number in [0, 4e18]", path);
		k->base = have_exact_base ? exact_base_ns : (int64_t)b->valuedouble;
		k->have_base = true;
	}
	k->max_rank = k->rank + 1;
	return TW_OK;
}

enum tw_result prof_import_kineto(const char *path, int64_t rank, struct trace *t,
				  struct tw_err *err)
{
	char *text;
	size_t len;
	TW_CHECK(json_read_file(path, KINETO_MAX_FILE_BYTES, &text, &len, err));
	enum tw_result ck = json_check_text(path, text, len, err);
	if (ck != TW_OK) {
		free(text);
		return ck;
	}
	int64_t exact_base_ns;
	bool have_exact_base;
	struct kineto_import k = {.path = path, .t = t, .rank = rank, .first = t->nev};
	exact_times(text, len, &k.ts_base_us, &exact_base_ns, &have_exact_base);
	struct event_reader rd = {.path = path, .s = text, .n = len};
	locate_events(text, len, &rd.L);
	rd.pos = rd.L.open == SIZE_MAX ? len : rd.L.open + 1;
	if (rd.L.twice) {
		free(text);
		return tw_errf(err, TW_ERR_INVALID, "%s: traceEvents: appears twice at the top level",
			       path);
	}
	cJSON *root = NULL;
	enum tw_result rc = parse_top(&rd, &root, err);
	if (rc != TW_OK) {
		free(text);
		return rc;
	}
	const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
	if (!cJSON_IsObject(root))
		rc = tw_errf(err, TW_ERR_INVALID, "%s: not a PyTorch profiler trace (the top level "
			     "is not an object)", path);
	else if (!cJSON_IsArray(evs))
		rc = tw_errf(err, TW_ERR_INVALID, "%s: traceEvents: %s (not a PyTorch profiler "
			     "trace)", path, evs ? "must be an array" : "missing");
	else
		rc = read_top(&k, root, exact_base_ns, have_exact_base, err);
	/* the one traceEvents key is the array cut out of the top level */
	assert(!cJSON_IsArray(evs) || (rd.L.open != SIZE_MAX && !evs->child));
	if (rc != TW_OK && rd.L.open != SIZE_MAX)
		rc = syntax_first(&rd, rc, err);
	while (rc == TW_OK) {
		cJSON *e;
		rc = next_event(&rd, &e, err);
		if (rc != TW_OK || !e)
			break;
		rc = import_event(&k, e, rd.index - 1, err);
		cJSON_Delete(e);
		if (rc != TW_OK)
			rc = syntax_first(&rd, rc, err);
	}
	free(text);
	if (rc == TW_OK)
		rc = finish_import(&k, err);
	if (rc != TW_OK)
		t->nev = k.first; /* leave t as it was (names interned stay, harmless) */
	free(k.corr);
	free(k.launches);
	free(k.steps);
	free(k.peaks);
	cJSON_Delete(root);
	return rc;
}
