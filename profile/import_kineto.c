/* import_kineto — PyTorch profiler (Kineto) Chrome-trace JSON (reference/profiling.md §5).
 *
 * GPU work: complete events ("ph": "X") of cat kernel, gpu_memcpy, gpu_memset; ts/dur in us
 * (relative to baseTimeNanoseconds when present). Collectives: NCCL kernel names, overridden
 * by the "Collective name" arg Kineto copies from record_param_comms, which also gives the
 * message size ("In/Out msg nelems" x dtype) and "Group size". Steps: GPU-side
 * ProfilerStep#N annotations (gpu_user_annotation) when present, else the CPU ones projected
 * onto the GPU through the launches' correlation ids. */
#include "prof_int.h"

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

enum tw_result prof_import_kineto(const char *path, int64_t rank, struct trace *t,
				  struct tw_err *err)
{
	char *text;
	size_t len;
	TW_CHECK(json_read_file(path, KINETO_MAX_FILE_BYTES, &text, &len, err));
	int64_t ts_base_us, exact_base_ns;
	bool have_exact_base;
	exact_times(text, len, &ts_base_us, &exact_base_ns, &have_exact_base);
	cJSON *root;
	enum tw_result rc = json_parse(path, text, len, &root, err);
	free(text);
	TW_CHECK(rc);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return tw_errf(err, TW_ERR_INVALID, "%s: not a PyTorch profiler trace (the top level "
			       "is not an object)", path);
	}
	const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
	if (!cJSON_IsArray(evs)) {
		cJSON_Delete(root);
		return tw_errf(err, TW_ERR_INVALID, "%s: traceEvents: %s (not a PyTorch profiler "
			       "trace)", path, evs ? "must be an array" : "missing");
	}
	const cJSON *di = cJSON_GetObjectItemCaseSensitive(root, "distributedInfo");
	const cJSON *r = cJSON_IsObject(di) ? cJSON_GetObjectItemCaseSensitive(di, "rank") : NULL;
	if (r) {
		if (!cJSON_IsNumber(r) || r->valuedouble < 0 || r->valuedouble >= PROF_MAX_RANKS ||
		    r->valuedouble != floor(r->valuedouble)) {
			cJSON_Delete(root);
			return tw_errf(err, TW_ERR_INVALID,
				       "%s: distributedInfo.rank: must be an integer >= 0 (at most %d)",
				       path, PROF_MAX_RANKS - 1);
		}
		rank = (int64_t)r->valuedouble;
	}
	const cJSON *ws = cJSON_IsObject(di) ? cJSON_GetObjectItemCaseSensitive(di, "world_size") : NULL;
	if (ws && !(cJSON_IsNumber(ws) && ws->valuedouble >= 1 && ws->valuedouble <= PROF_MAX_RANKS &&
		    ws->valuedouble == floor(ws->valuedouble))) {
		cJSON_Delete(root);
		return tw_errf(err, TW_ERR_INVALID,
			       "%s: distributedInfo.world_size: must be an integer in [1, %d]", path,
			       PROF_MAX_RANKS);
	}
	int64_t base = 0;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "baseTimeNanoseconds");
	if (b) {
		/* int64 ns clock: base (<= 4e18) + ts (|ts| <= 4e15 us) cannot overflow; the sums
		 * are checked against PROF_MAX_TIME_NS below */
		if (!cJSON_IsNumber(b) || !isfinite(b->valuedouble) || b->valuedouble < 0 ||
		    b->valuedouble > 4e18 || (have_exact_base && exact_base_ns > PROF_MAX_TIME_NS)) {
			cJSON_Delete(root);
			return tw_errf(err, TW_ERR_INVALID,
				       "%s: baseTimeNanoseconds: must be a number in [0, 4e18]", path);
		}
		base = have_exact_base ? exact_base_ns : (int64_t)b->valuedouble;
	}
	size_t first = t->nev;
	struct launch *launches = NULL;
	size_t nl = 0, lcap = 0;
	struct prof_host_step *steps = NULL;
	size_t ns = 0, scap = 0;
	int64_t *corr = NULL; /* per imported event: its correlation id, -1: none */
	size_t ccap = 0;
	size_t i = 0;
	int64_t max_rank = rank + 1; /* ranks seen + 1 */
	size_t gpu_steps = 0;         /* GPU-side ProfilerStep annotations */
	int64_t *peaks = NULL;        /* twin's exports: per rank peak memory, bytes (0: none) */
	size_t npeaks = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, evs)
	{
		if (!cJSON_IsObject(e)) {
			rc = tw_errf(err, TW_ERR_INVALID, "%s: traceEvents[%zu]: must be an object", path, i);
			break;
		}
		const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
		if (ph && !cJSON_IsString(ph)) {
			rc = bad(err, path, i, "ph", "must be a string");
			break;
		}
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
				if (pr >= npeaks) {
					peaks = tw_realloc_array(peaks, pr + 1, sizeof(*peaks));
					memset(peaks + npeaks, 0, (pr + 1 - npeaks) * sizeof(*peaks));
					npeaks = pr + 1;
				}
				peaks[pr] = (int64_t)v;
				if ((int64_t)pr + 1 > max_rank)
					max_rank = (int64_t)pr + 1;
			}
		}
		if (!ph || strcmp(ph->valuestring, "X") != 0) {
			i++;
			continue; /* metadata, instants, counters, flows */
		}
		const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
		const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
		if (!cJSON_IsString(name)) {
			rc = bad(err, path, i, "name", name ? "must be a string" : "missing");
			break;
		}
		if (cat && !cJSON_IsString(cat)) {
			rc = bad(err, path, i, "cat", "must be a string");
			break;
		}
		int64_t tsn = 0;
		if (!cJSON_IsNumber(ts) || !ts_ns(ts->valuedouble, ts_base_us, &tsn)) {
			rc = bad(err, path, i, "ts",
				 !ts ? "missing" : !cJSON_IsNumber(ts) ? "must be a number (us)"
				 : isfinite(ts->valuedouble) ? "must be at most 4e15 (us)"
							     : "must be a finite number (us)");
			break;
		}
		if (!cJSON_IsNumber(dur) || !isfinite(dur->valuedouble) || dur->valuedouble < 0 ||
		    dur->valuedouble > 4e15) {
			rc = bad(err, path, i, "dur", dur ? "must be a number >= 0 (us)" : "missing");
			break;
		}
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
		if (args && !cJSON_IsObject(args)) {
			rc = bad(err, path, i, "args", "must be an object");
			break;
		}
		const char *c = cat ? cat->valuestring : "";
		/* twin's own exports carry each event's rank (one file may hold several) */
		double rv;
		int32_t erank = (int32_t)rank;
		if (cJSON_IsNumber(arg(args, "rank"))) {
			if (!arg_num(args, "rank", &rv) || rv < 0 || rv >= PROF_MAX_RANKS ||
			    rv != floor(rv)) {
				char rule[64];
				snprintf(rule, sizeof(rule), "must be an integer in [0, %d]",
					 PROF_MAX_RANKS - 1);
				rc = bad(err, path, i, "args.rank", rule);
				break;
			}
			erank = (int32_t)rv;
		}
		if (erank + 1 > max_rank)
			max_rank = erank + 1;
		/* times are ns in [0, PROF_MAX_TIME_NS]: nothing downstream overflows, and an
		 * export (which writes them relative to a base >= 0) imports back */
		int64_t start = base + tsn, end;
		if (start < 0) {
			rc = bad(err, path, i, "ts", b ? "starts before time 0 (ts + baseTimeNanoseconds "
						       "< 0); times must be >= 0"
						     : "must be >= 0 (us)");
			break;
		}
		if (start > PROF_MAX_TIME_NS) {
			rc = bad(err, path, i, "ts", b ? "ts + baseTimeNanoseconds is beyond 4e18 ns"
						     : "beyond 4e18 ns");
			break;
		}
		end = start + llround(dur->valuedouble * 1000.0);
		if (end > PROF_MAX_TIME_NS) {
			rc = bad(err, path, i, "dur", "ts + dur is beyond 4e18 ns (an int64 ns clock)");
			break;
		}
		double cv;
		if (!strcmp(c, "cuda_runtime") || !strcmp(c, "cuda_driver")) {
			if (arg_num(args, "correlation", &cv)) {
				TW_GROW(launches, lcap, nl + 1);
				launches[nl++] = (struct launch){(int64_t)cv, start};
			}
		} else if (!strcmp(c, "gpu_user_annotation") &&
			   !strncmp(name->valuestring, "ProfilerStep#", 13)) {
			/* the step's span on the GPU itself: a marker as it is (Kineto writes one
			 * per stream the step ran kernels on; the step's window is their union) */
			struct trace_event m = prof_blank_event(erank);
			const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
			m.cat = TRACE_MARKER;
			m.stream = cJSON_IsNumber(tid) ? to_i32(tid->valuedouble) : 0;
			m.start_ns = start;
			m.end_ns = end;
			m.name = trace_intern(t, name->valuestring);
			trace_add(t, &m);
			TW_GROW(corr, ccap, t->nev - first);
			corr[t->nev - first - 1] = -1;
			gpu_steps++;
		} else if ((!strcmp(c, "user_annotation") || !strcmp(c, "cpu_op")) &&
			   !strncmp(name->valuestring, "ProfilerStep#", 13)) {
			int64_t s;
			if (prof_step_marker(name->valuestring, &s)) {
				TW_GROW(steps, scap, ns + 1);
				steps[ns++] = (struct prof_host_step){s, start, end, erank, -1};
			}
		} else if (!strcmp(c, "kernel") || !strcmp(c, "gpu_memcpy") ||
			   !strcmp(c, "gpu_memset") ||
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
			for (int k = 0; cJSON_IsString(phase) && k < 4; k++)
				if (!strcmp(phase->valuestring, plan_phase_name((enum plan_phase)k)))
					ev.phase = k;
			if (cJSON_IsTrue(arg(args, "recompute")))
				ev.flags |= TRACE_F_RECOMPUTE;
			const cJSON *cn = arg(args, "Collective name");
			enum trace_cat cc;
			if (cJSON_IsString(cn) && coll_from_name(cn->valuestring, &cc))
				ev.cat = cc;
			/* twin's own exports say the category and the step outright */
			const cJSON *tc = arg(args, "twin category");
			if (cJSON_IsString(tc) && trace_cat_parse(tc->valuestring, &cc) &&
			    cc != TRACE_MARKER)
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
				    !(arg_num(args, "Group size", &gs) && gs >= 0 &&
				      gs <= PROF_MAX_RANKS && gs == floor(gs))) {
					char rule[64];
					snprintf(rule, sizeof(rule), "must be an integer in [0, %d]",
						 PROF_MAX_RANKS);
					rc = bad(err, path, i, "args.Group size", rule);
					break;
				}
				if (cJSON_IsNumber(gsv))
					ev.group_size = to_i32(gs);
				/* twin's own exports name the NCCL algorithm and protocol */
				const cJSON *al = arg(args, "NCCL algorithm"), *pr = arg(args, "NCCL protocol");
				if (cJSON_IsString(al) && cJSON_IsString(pr)) {
					enum trace_algo ta = TRACE_ALGO_UNKNOWN;
					enum trace_proto tq = TRACE_PROTO_UNKNOWN;
					for (int k = 1; k < TRACE_NUM_ALGOS; k++)
						if (!strcmp(al->valuestring, trace_algo_name((enum trace_algo)k)))
							ta = (enum trace_algo)k;
					for (int k = 1; k < TRACE_NUM_PROTOS; k++)
						if (!strcmp(pr->valuestring, trace_proto_name((enum trace_proto)k)))
							tq = (enum trace_proto)k;
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
			TW_GROW(corr, ccap, t->nev - first);
			corr[t->nev - first - 1] = arg_num(args, "correlation", &cv) ? (int64_t)cv : -1;
		}
		i++;
	}
	if (rc == TW_OK && gpu_steps > 0) {
		/* the GPU-side steps are taken as they are: check them */
		struct prof_host_step *g = TW_NEW_ARRAY(struct prof_host_step, gpu_steps);
		size_t ng = 0;
		for (size_t k = first; k < t->nev; k++) {
			int64_t sn;
			const struct trace_event *m = &t->ev[k];
			if (m->cat == TRACE_MARKER && prof_step_marker(trace_name(t, m), &sn))
				g[ng++] = (struct prof_host_step){sn, m->start_ns, m->end_ns, m->rank,
								  m->stream};
		}
		rc = prof_check_steps(g, ng, true, path, err);
		free(g);
	} else if (rc == TW_OK && ns > 0) {
		rc = prof_check_steps(steps, ns, false, path, err);
	}
	if (rc == TW_OK && ns > 0 && gpu_steps == 0) {
		/* launch time of each GPU event, through its correlation id */
		size_t n = t->nev - first;
		int64_t *launch = TW_NEW_ARRAY(int64_t, n + 1);
		if (nl > 1)
			qsort(launches, nl, sizeof(*launches), launch_cmp);
		for (size_t k = 0; k < n; k++) {
			launch[k] = -1;
			struct launch key = {corr[k], 0};
			const struct launch *l =
				corr[k] >= 0 && nl ? bsearch(&key, launches, nl, sizeof(*launches), launch_cmp)
						   : NULL;
			if (l)
				launch[k] = l->t_ns;
		}
		/* per rank that has steps */
		for (size_t k = 0; k < ns; k++) {
			bool done = false;
			for (size_t q = 0; q < k && !done; q++)
				done = steps[q].rank == steps[k].rank;
			if (!done)
				prof_steps_to_gpu(t, steps[k].rank, first, n, launch, steps, ns);
		}
		free(launch);
	}
	if (rc == TW_OK) {
		int64_t nr = max_rank;
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
		if (npeaks > 0 && !t->peak_mem)
			t->peak_mem = TW_NEW_ARRAY(int64_t, (size_t)t->nranks);
		for (size_t k = 0; k < npeaks && (int64_t)k < t->nranks; k++)
			if (peaks[k] > 0)
				t->peak_mem[k] = peaks[k];
	} else {
		t->nev = first; /* leave t as it was (names interned stay, harmless) */
	}
	free(corr);
	free(launches);
	free(steps);
	free(peaks);
	cJSON_Delete(root);
	return rc;
}
