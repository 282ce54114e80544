/* export — a trace as Chrome / Perfetto trace JSON with Kineto's fields (reference/profiling.md
 * §5), so chrome://tracing, ui.perfetto.dev and HTA read it. Streamed: no tree in memory. */
#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A JSON string; bytes that are not UTF-8 (names from traces are not checked) become U+FFFD,
 * so the file stays valid JSON. */
static void put_str(FILE *f, const char *s)
{
	fputc('"', f);
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		unsigned char c = *p;
		size_t n = tw_utf8_len((const char *)p);
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else if (n == 0)
			fputs("\\ufffd", f);
		else
			fwrite(p, 1, n, f);
		p += n ? n : 1;
	}
	fputc('"', f);
}

/* ns as Kineto writes it: microseconds with three decimals */
static void put_us(FILE *f, int64_t ns)
{
	if (ns < 0) {
		fputc('-', f);
		ns = -ns;
	}
	fprintf(f, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

/* NCCL kernel word for a comm category, so HTA's "^nccl" classifier sees communication */
static const char *nccl_word(const struct trace_event *e)
{
	if (e->cat == TRACE_BROADCAST && (e->flags & TRACE_F_REDUCE))
		return "Reduce";
	switch (e->cat) {
	case TRACE_ALL_GATHER: return "AllGather";
	case TRACE_REDUCE_SCATTER: return "ReduceScatter";
	case TRACE_ALL_REDUCE: return "AllReduce";
	case TRACE_BROADCAST: return "Broadcast";
	default: return "SendRecv"; /* p2p, all-to-all */
	}
}

/* PyTorch's "Collective name" values */
static const char *coll_name(const struct trace_event *e)
{
	if (e->cat == TRACE_BROADCAST && (e->flags & TRACE_F_REDUCE))
		return "reduce";
	switch (e->cat) {
	case TRACE_ALL_GATHER: return "_allgather_base";
	case TRACE_REDUCE_SCATTER: return "_reduce_scatter_base";
	case TRACE_ALL_REDUCE: return "allreduce";
	case TRACE_BROADCAST: return "broadcast";
	case TRACE_ALL_TO_ALL: return "all_to_all";
	default: return "send";
	}
}

/* A thread name for every (rank, stream) the trace uses, so Perfetto labels the rows: the
 * plan's stream names for simulated and executed runs ("compute", "comm", ...), "stream N"
 * for imported ones, "steps" for the step markers (stream -1). Ranks use few streams, so each
 * keeps a short list. Returns whether nothing has been written yet. */
static bool thread_names(const struct trace *t, int32_t max_rank, FILE *f, bool first)
{
	struct streams {
		int32_t *id;
		int n, cap;
	} *rs = TW_NEW_ARRAY(struct streams, (size_t)max_rank + 1);
	for (size_t i = 0; i < t->nev; i++) {
		const struct trace_event *e = &t->ev[i];
		if (e->rank < 0 || e->rank > max_rank)
			continue;
		struct streams *x = &rs[e->rank];
		int k = 0;
		while (k < x->n && x->id[k] != e->stream)
			k++;
		if (k < x->n)
			continue;
		if (x->n == x->cap) {
			x->cap = x->cap ? 2 * x->cap : 8;
			x->id = tw_realloc_array(x->id, (size_t)x->cap, sizeof(*x->id));
		}
		x->id[x->n++] = e->stream;
	}
	for (int32_t r = 0; r <= max_rank; r++) {
		for (int k = 0; k < rs[r].n; k++) {
			int32_t sid = rs[r].id[k];
			char name[32];
			if (sid < 0)
				snprintf(name, sizeof(name), "steps");
			else if (t->kind != TRACE_KIND_IMPORT && sid < PLAN_NUM_STREAMS)
				snprintf(name, sizeof(name), "%s", plan_stream_name((enum plan_stream)sid));
			else
				snprintf(name, sizeof(name), "stream %d", sid);
			fprintf(f, "%s  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, "
				   "\"tid\": %d, \"args\": {\"name\": \"%s\"}}",
				first ? "" : ",\n", r, sid, name);
			first = false;
		}
		free(rs[r].id);
	}
	free(rs);
	return first;
}

/* One step's markers on one rank (Kineto writes one per stream): exported as one range, their
 * union — the step's window as the analysis takes it —, so the file re-imports as one host
 * range per step. */
struct step_span {
	int32_t rank;
	int64_t step, a, b;
	size_t first; /* index of its first marker */
};

static int span_cmp(const void *pa, const void *pb)
{
	const struct step_span *x = pa, *y = pb;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return (x->first > y->first) - (x->first < y->first);
}

/* (rank, step) only, for bsearch on the folded spans */
static int span_cmp_key(const void *pa, const void *pb)
{
	const struct step_span *x = pa, *y = pb;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return (x->step > y->step) - (x->step < y->step);
}

static struct step_span *step_spans(const struct trace *t, size_t *n)
{
	struct step_span *s = NULL;
	size_t ns = 0, cap = 0;
	for (size_t i = 0; i < t->nev; i++) {
		int64_t step;
		const struct trace_event *e = &t->ev[i];
		if (e->cat != TRACE_MARKER || !prof_step_marker(trace_name(t, e), &step))
			continue;
		TW_GROW(s, cap, ns + 1);
		s[ns++] = (struct step_span){e->rank, step, e->start_ns, e->end_ns, i};
	}
	if (ns > 1)
		qsort(s, ns, sizeof(*s), span_cmp);
	size_t m = 0;
	for (size_t i = 0; i < ns; i++) {
		if (m > 0 && s[m - 1].rank == s[i].rank && s[m - 1].step == s[i].step) {
			if (s[i].a < s[m - 1].a)
				s[m - 1].a = s[i].a;
			if (s[i].b > s[m - 1].b)
				s[m - 1].b = s[i].b;
		} else {
			s[m++] = s[i];
		}
	}
	*n = m;
	return s;
}

enum tw_result prof_export_chrome(const struct trace *t, FILE *f, struct tw_err *err)
{
	int64_t base = INT64_MAX;
	int32_t max_rank = -1, min_rank = INT32_MAX;
	for (size_t i = 0; i < t->nev; i++) {
		/* the importer takes times >= 0 only (a base < 0 would not read back) */
		if (t->ev[i].start_ns < 0 || t->ev[i].end_ns < t->ev[i].start_ns)
			return tw_errf(err, TW_ERR_INVALID,
				       "event %zu (%s, rank %d) has times [%" PRId64 ", %" PRId64
				       ") ns; Kineto JSON needs 0 <= start <= end",
				       i, trace_name(t, &t->ev[i]), t->ev[i].rank, t->ev[i].start_ns,
				       t->ev[i].end_ns);
		if (t->ev[i].rank < min_rank)
			min_rank = t->ev[i].rank;
		if (t->ev[i].start_ns < base)
			base = t->ev[i].start_ns;
		if (t->ev[i].rank > max_rank)
			max_rank = t->ev[i].rank;
	}
	if (base == INT64_MAX)
		base = 0;
	if (min_rank == INT32_MAX)
		min_rank = 0;
	base -= base % 1000; /* whole microseconds, so ts keeps ns precision */
	fprintf(f, "{\"schemaVersion\": 1, \"displayTimeUnit\": \"ms\", \"baseTimeNanoseconds\": %" PRId64
		   ",\n \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %d, \"world_size\": %" PRId64
		   "},\n \"deviceProperties\": [],\n \"traceEvents\": [\n",
		base, min_rank, t->nranks > max_rank ? t->nranks : (int64_t)max_rank + 1);
	/* HTA reads one file per rank and takes distributedInfo.rank; a file of several ranks
	 * names the lowest, and every event carries its own args.rank */
	bool first = true;
	/* process and thread names: one process per rank, one thread per stream */
	bool *seen = TW_NEW_ARRAY(bool, (size_t)max_rank + 2);
	for (size_t i = 0; i < t->nev; i++)
		if (t->ev[i].rank >= 0)
			seen[t->ev[i].rank] = true;
	for (int32_t r = 0; r <= max_rank; r++) {
		if (!seen[r])
			continue;
		fprintf(f, "%s  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, "
			   "\"args\": {\"name\": \"rank %d\"}}",
			first ? "" : ",\n", r, r);
		first = false;
		/* the run's recorded peak memory (simulated or measured), read back on import */
		if (t->peak_mem && r < t->nranks && t->peak_mem[r] > 0)
			fprintf(f, ",\n  {\"ph\": \"M\", \"name\": \"twin peak memory\", \"pid\": %d, "
				   "\"tid\": 0, \"args\": {\"bytes\": %" PRId64 "}}",
				r, t->peak_mem[r]);
	}
	free(seen);
	first = thread_names(t, max_rank, f, first);
	size_t nspans;
	struct step_span *spans = step_spans(t, &nspans);
	for (size_t i = 0; i < t->nev; i++) {
		struct trace_event ev = t->ev[i];
		const struct trace_event *e = &ev;
		const char *name = trace_name(t, e);
		const char *cat = "kernel";
		char buf[320];
		enum trace_cat have;
		if (e->cat == TRACE_MARKER) {
			int64_t step;
			cat = "user_annotation";
			if (prof_step_marker(name, &step)) {
				struct step_span key = {e->rank, step, 0, 0, 0};
				const struct step_span *sp = bsearch(&key, spans, nspans, sizeof(*spans),
								    span_cmp_key);
				if (!sp || sp->first != i)
					continue; /* written with the step's first marker */
				ev.start_ns = sp->a;
				ev.end_ns = sp->b;
				snprintf(buf, sizeof(buf), "ProfilerStep#%" PRId64, step);
				name = buf;
			}
		} else if (e->cat == TRACE_HOST || e->cat == TRACE_NVME || e->device < 0) {
			cat = "cpu_op";
		} else if (e->cat == TRACE_H2D || e->cat == TRACE_D2H) {
			cat = "gpu_memcpy";
			if ((int)prof_classify_kernel(name) != e->cat) {
				snprintf(buf, sizeof(buf), "Memcpy %s (%s)",
					 e->cat == TRACE_H2D ? "HtoD" : "DtoH", name);
				name = buf;
			}
		} else if (trace_cat_is_comm(e->cat) &&
			   !(prof_classify_nccl(name, &have) && (int)have == e->cat)) {
			snprintf(buf, sizeof(buf), "ncclDevKernel_%s (%s)", nccl_word(e), name);
			name = buf;
		}
		fprintf(f, "%s  {\"ph\": \"X\", \"cat\": \"%s\", \"name\": ", first ? "" : ",\n", cat);
		first = false;
		put_str(f, name);
		fprintf(f, ", \"pid\": %d, \"tid\": %d, \"ts\": ", e->rank, e->stream);
		put_us(f, e->start_ns - base);
		fprintf(f, ", \"dur\": ");
		put_us(f, e->end_ns - e->start_ns);
		fprintf(f, ", \"args\": {\"device\": %d, \"stream\": %d, \"correlation\": %zu, "
			   "\"rank\": %d, \"twin category\": \"%s\", \"step\": %d, \"op\": %d",
			e->device, e->stream, i + 1, e->rank, trace_cat_name(e->cat), e->step,
			e->op_id);
		/* where in the step the op belongs (plan tags; absent when unknown) */
		if (e->layer >= 0)
			fprintf(f, ", \"layer\": %d", e->layer);
		if (e->micro >= 0)
			fprintf(f, ", \"micro-batch\": %d", e->micro);
		if (e->stage >= 0)
			fprintf(f, ", \"stage\": %d", e->stage);
		if (e->phase >= 0 && e->phase < 4)
			fprintf(f, ", \"phase\": \"%s\"", plan_phase_name((enum plan_phase)e->phase));
		if (e->flags & TRACE_F_RECOMPUTE)
			fprintf(f, ", \"recompute\": true");
		if (e->bytes)
			fprintf(f, ", \"bytes\": %" PRId64, e->bytes);
		if (e->flops > 0)
			fprintf(f, ", \"flops\": %.17g", e->flops);
		if (trace_cat_is_comm(e->cat)) {
			fprintf(f, ", \"Collective name\": \"%s\"", coll_name(e));
			if (e->group_size)
				fprintf(f, ", \"Group size\": %d", e->group_size);
			if (e->comm)
				fprintf(f, ", \"Process Group Name\": \"twin-%" PRId64 "\"", e->comm);
			if (trace_algo_of(e->flags) != TRACE_ALGO_UNKNOWN)
				fprintf(f, ", \"NCCL algorithm\": \"%s\", \"NCCL protocol\": \"%s\"",
					trace_algo_name(trace_algo_of(e->flags)),
					trace_proto_name(trace_proto_of(e->flags)));
		}
		if (e->cat == TRACE_H2D || e->cat == TRACE_D2H) {
			int64_t d = e->end_ns - e->start_ns;
			if (e->bytes && d > 0)
				fprintf(f, ", \"memory bandwidth (GB/s)\": %.6g",
					(double)e->bytes / (double)d);
		}
		fprintf(f, "}}");
	}
	free(spans);
	fprintf(f, "\n]}\n");
	if (ferror(f))
		return tw_errf(err, TW_ERR_SYSTEM, "writing the Chrome trace: %s", strerror(errno));
	return TW_OK;
}

enum tw_result prof_export_chrome_file(const struct trace *t, const char *path,
				       struct tw_err *err)
{
	struct tw_out o;
	TW_CHECK(prof_export_chrome_begin(t, path, &o, err));
	return tw_out_close(&o, path, true, err);
}

enum tw_result prof_export_chrome_begin(const struct trace *t, const char *path,
					struct tw_out *o, struct tw_err *err)
{
	/* tw_out_open refuses a target the rename would replace wrongly (tw_out_target) */
	TW_CHECK(tw_out_open(o, path, err));
	enum tw_result rc = prof_export_chrome(t, o->f, err);
	if (rc != TW_OK) {
		tw_err_prefix(err, path);
		tw_out_close(o, path, false, err);
	}
	return rc;
}
