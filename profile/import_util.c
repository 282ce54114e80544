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

static int step_then_start(const void *pa, const void *pb)
{
	const struct prof_host_step *a = pa, *b = pb;
	if (a->step != b->step)
		return a->step < b->step ? -1 : 1;
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
	/* a step's ranges on several threads (an NVTX "step N" inside the loop's own) are one
	 * span: the launch search below takes the last range starting before a launch */
	qsort(s, mine, sizeof(*s), step_then_start);
	nsteps = 0;
	for (size_t i = 0; i < mine; i++) {
		if (nsteps > 0 && s[nsteps - 1].step == s[i].step) {
			if (s[i].end_ns > s[nsteps - 1].end_ns)
				s[nsteps - 1].end_ns = s[i].end_ns;
			continue;
		}
		s[nsteps++] = s[i];
	}
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

/* by rank, then step, then GPU and stream, then start */
static int check_cmp(const void *pa, const void *pb)
{
	const struct prof_host_step *a = pa, *b = pb;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->step != b->step)
		return a->step < b->step ? -1 : 1;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
}

enum tw_result prof_check_steps(struct prof_host_step *s, size_t n, bool per_stream,
				const char *path, struct tw_err *err)
{
	if (n == 0)
		return TW_OK;
	qsort(s, n, sizeof(*s), check_cmp);
	/* per (rank, step): the span so far; per (rank, step, GPU, stream): one range */
	enum tw_result rc = TW_OK;
	int64_t end = 0;
	for (size_t i = 0; i < n && rc == TW_OK; i++) {
		const struct prof_host_step *x = &s[i], *p = i > 0 ? &s[i - 1] : NULL;
		bool same = p && p->rank == x->rank && p->step == x->step;
		if (!same) {
			end = x->end_ns;
			continue;
		}
		/* a stream that was not a number (old Kineto's "stream 7") cannot be told apart */
		bool twice = per_stream ? x->stream > 0 && x->stream == p->stream &&
						  x->device == p->device
					: x->start_ns > end;
		if (twice)
			rc = per_stream
				? tw_errf(err, TW_ERR_INVALID,
					  "%s: step %" PRId64 " appears twice on stream %d of GPU %d of rank "
					  "%d; a step has one range per stream",
					  path, x->step, x->stream, x->device, x->rank)
				: tw_errf(err, TW_ERR_INVALID,
					  "%s: step %" PRId64 " appears twice on rank %d (%.3f ms apart); a "
					  "step has one range",
					  path, x->step, x->rank, (double)(x->start_ns - end) / 1e6);
		if (x->end_ns > end)
			end = x->end_ns;
	}
	return rc;
}
