/* import_util — what the nsys and Kineto importers share. */
#include "prof_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct trace_event prof_blank_event(int32_t rank)
{
	return (struct trace_event){.rank = rank, .device = 0, .stream = 0, .step = -1,
				    .op_id = -1, .layer = -1, .micro = -1, .stage = -1,
				    .phase = -1};
}

static int step_cmp(const void *pa, const void *pb)
{
	const struct prof_host_step *a = pa, *b = pb;
	return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
}

void prof_steps_to_gpu(struct trace *t, int32_t rank, size_t first, size_t count,
		       const int64_t *launch_ns, const struct prof_host_step *steps, size_t nsteps)
{
	struct prof_host_step *s = TW_NEW_ARRAY(struct prof_host_step, nsteps);
	size_t mine = 0;
	for (size_t i = 0; i < nsteps; i++)
		if (steps[i].rank == rank)
			s[mine++] = steps[i];
	nsteps = mine;
	qsort(s, nsteps, sizeof(*s), step_cmp);
	int64_t *lo = TW_NEW_ARRAY(int64_t, nsteps), *hi = TW_NEW_ARRAY(int64_t, nsteps);
	for (size_t k = 0; k < nsteps; k++) {
		lo[k] = INT64_MAX;
		hi[k] = INT64_MIN;
	}
	size_t nev = first + count;
	bool any = false;
	for (size_t i = first; launch_ns && i < nev; i++) {
		int64_t l = launch_ns[i - first];
		if (l < 0 || t->ev[i].cat == TRACE_MARKER || t->ev[i].rank != rank)
			continue;
		/* the last range starting at or before the launch */
		size_t a = 0, b = nsteps;
		while (a < b) {
			size_t m = (a + b) / 2;
			if (s[m].start_ns <= l)
				a = m + 1;
			else
				b = m;
		}
		if (a == 0 || l >= s[a - 1].end_ns)
			continue;
		size_t k = a - 1;
		if (t->ev[i].start_ns < lo[k])
			lo[k] = t->ev[i].start_ns;
		if (t->ev[i].end_ns > hi[k])
			hi[k] = t->ev[i].end_ns;
		any = true;
	}
	char name[48];
	for (size_t k = 0; k < nsteps; k++) {
		struct trace_event m = prof_blank_event(rank);
		m.cat = TRACE_MARKER;
		if (any) {
			if (lo[k] == INT64_MAX)
				continue;
			size_t n = k + 1;
			while (n < nsteps && lo[n] == INT64_MAX)
				n++;
			m.start_ns = lo[k];
			m.end_ns = n < nsteps && lo[n] > lo[k] ? lo[n] : hi[k];
		} else {
			m.start_ns = s[k].start_ns;
			m.end_ns = s[k].end_ns;
		}
		snprintf(name, sizeof(name), "ProfilerStep#%lld", (long long)s[k].step);
		m.name = trace_intern(t, name);
		trace_add(t, &m);
	}
	free(lo);
	free(hi);
	free(s);
}

/* by rank, then step, then stream, then start */
static int check_cmp(const void *pa, const void *pb)
{
	const struct prof_host_step *a = pa, *b = pb;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->step != b->step)
		return a->step < b->step ? -1 : 1;
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
}

/* by rank, then start */
static int span_cmp(const void *pa, const void *pb)
{
	const struct prof_host_step *a = pa, *b = pb;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
}

enum tw_result prof_check_steps(struct prof_host_step *s, size_t n, bool per_stream,
				const char *path, struct tw_err *err)
{
	if (n == 0)
		return TW_OK;
	qsort(s, n, sizeof(*s), check_cmp);
	/* one span per (rank, step) */
	struct prof_host_step *span = TW_NEW_ARRAY(struct prof_host_step, n);
	size_t m = 0;
	enum tw_result rc = TW_OK;
	for (size_t i = 0; i < n && rc == TW_OK; i++) {
		const struct prof_host_step *x = &s[i];
		bool same = m > 0 && span[m - 1].rank == x->rank && span[m - 1].step == x->step;
		if (same && (per_stream ? i > 0 && s[i - 1].stream == x->stream
					: x->start_ns > span[m - 1].end_ns))
			rc = per_stream
				? tw_errf(err, TW_ERR_INVALID,
					  "%s: step %" PRId64 " appears twice on stream %d of rank %d (at %"
					  PRId64 " and %" PRId64 " ns); a step has one range per stream",
					  path, x->step, x->stream, x->rank, s[i - 1].start_ns, x->start_ns)
				: tw_errf(err, TW_ERR_INVALID,
					  "%s: step %" PRId64 " appears twice on rank %d (at %" PRId64
					  " and %" PRId64 " ns); a step has one range",
					  path, x->step, x->rank, span[m - 1].start_ns, x->start_ns);
		else if (same) {
			if (x->start_ns < span[m - 1].start_ns)
				span[m - 1].start_ns = x->start_ns;
			if (x->end_ns > span[m - 1].end_ns)
				span[m - 1].end_ns = x->end_ns;
		} else {
			span[m++] = *x;
		}
	}
	if (rc == TW_OK && m > 1)
		qsort(span, m, sizeof(*span), span_cmp);
	for (size_t i = 1; rc == TW_OK && i < m; i++) {
		const struct prof_host_step *a = &span[i - 1], *b = &span[i];
		if (a->rank == b->rank && b->start_ns < a->end_ns)
			rc = tw_errf(err, TW_ERR_INVALID,
				     "%s: steps %" PRId64 " and %" PRId64 " overlap on rank %d ([%" PRId64
				     ", %" PRId64 ") and [%" PRId64 ", %" PRId64
				     ") ns); a rank runs one step at a time",
				     path, a->step, b->step, a->rank, a->start_ns, a->end_ns, b->start_ns,
				     b->end_ns);
	}
	free(span);
	return rc;
}
