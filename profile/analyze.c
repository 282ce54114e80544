/* analyze — the one analysis of every trace (simulated, executed, imported): per rank and
 * step, busy time by category, exposed communication, stall split, bus bandwidth; across
 * ranks, stragglers. Definitions and sources: docs/profiler.md. */
#include "profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- interval lists ------------------------------------------------------------------------ */

struct ivl {
	int64_t a, b; /* [a, b) ns */
};
struct ivls {
	struct ivl *v;
	size_t n, cap;
};

static void ivls_push(struct ivls *l, int64_t a, int64_t b)
{
	if (b <= a)
		return;
	TW_GROW(l->v, l->cap, l->n + 1);
	l->v[l->n++] = (struct ivl){a, b};
}

static int ivl_cmp(const void *pa, const void *pb)
{
	const struct ivl *x = pa, *y = pb;
	if (x->a != y->a)
		return x->a < y->a ? -1 : 1;
	return (x->b > y->b) - (x->b < y->b);
}

/* Union the intervals of a list sorted by start in place: overlapping or touching ones join. */
static void ivls_coalesce(struct ivls *l)
{
	if (l->n < 2)
		return;
	size_t k = 0;
	for (size_t i = 1; i < l->n; i++) {
		if (l->v[i].a <= l->v[k].b) {
			if (l->v[i].b > l->v[k].b)
				l->v[k].b = l->v[i].b;
		} else {
			l->v[++k] = l->v[i];
		}
	}
	l->n = k + 1;
}

/* Sort and union overlapping intervals in place (HTA's merge_kernel_intervals). Lists are
 * mostly pushed in start order already (events are visited by start): then no sort. */
static void ivls_merge(struct ivls *l)
{
	for (size_t i = 1; i < l->n; i++)
		if (l->v[i].a < l->v[i - 1].a) {
			qsort(l->v, l->n, sizeof(*l->v), ivl_cmp);
			break;
		}
	ivls_coalesce(l);
}

static int64_t ivls_len(const struct ivls *l)
{
	int64_t s = 0;
	for (size_t i = 0; i < l->n; i++)
		s += l->v[i].b - l->v[i].a;
	return s;
}

/* out = x ∪ y (inputs merged; out must be empty and distinct from them): the two sorted lists
 * interleaved by start, then joined. */
static void ivls_or(const struct ivls *x, const struct ivls *y, struct ivls *out)
{
	out->n = 0;
	TW_GROW(out->v, out->cap, x->n + y->n);
	size_t i = 0, j = 0;
	while (i < x->n || j < y->n)
		out->v[out->n++] = j == y->n || (i < x->n && x->v[i].a <= y->v[j].a) ? x->v[i++] : y->v[j++];
	ivls_coalesce(out);
}

/* out = x ∩ y, both merged. */
static void ivls_and(const struct ivls *x, const struct ivls *y, struct ivls *out)
{
	out->n = 0;
	size_t i = 0, j = 0;
	while (i < x->n && j < y->n) {
		int64_t a = x->v[i].a > y->v[j].a ? x->v[i].a : y->v[j].a;
		int64_t b = x->v[i].b < y->v[j].b ? x->v[i].b : y->v[j].b;
		ivls_push(out, a, b);
		if (x->v[i].b < y->v[j].b)
			i++;
		else
			j++;
	}
}

/* out = x \ y, both merged. */
static void ivls_sub(const struct ivls *x, const struct ivls *y, struct ivls *out)
{
	out->n = 0;
	size_t j = 0;
	for (size_t i = 0; i < x->n; i++) {
		int64_t a = x->v[i].a, b = x->v[i].b;
		while (j < y->n && y->v[j].b <= a)
			j++;
		size_t k = j;
		while (a < b && k < y->n && y->v[k].a < b) {
			ivls_push(out, a, y->v[k].a);
			if (y->v[k].b > a)
				a = y->v[k].b;
			k++;
		}
		ivls_push(out, a, b);
	}
}

/* ---- bandwidth (nccl-tests: doc/PERFORMANCE.md, the GetBw function of each test) -------- */

bool prof_coll_algo(const struct prof_coll_stats *s, enum trace_algo *algo,
		    enum trace_proto *proto, double *share)
{
	int64_t best = 0, known = 0;
	for (int a = 0; a < TRACE_NUM_ALGOS; a++)
		for (int p = 0; p < TRACE_NUM_PROTOS; p++) {
			int64_t t = s->algo_ns[a][p];
			if (a == TRACE_ALGO_UNKNOWN || t <= 0)
				continue;
			known += t;
			if (t > best) {
				best = t;
				*algo = (enum trace_algo)a;
				*proto = (enum trace_proto)p;
			}
		}
	if (known <= 0)
		return false;
	*share = (double)best / (double)known;
	return true;
}

double prof_busbw_factor(enum trace_cat coll, int64_t n)
{
	switch (coll) {
	case TRACE_ALL_REDUCE:
		return n > 0 ? 2.0 * (double)(n - 1) / (double)n : 0;
	case TRACE_ALL_GATHER:
	case TRACE_REDUCE_SCATTER:
	case TRACE_ALL_TO_ALL:
		return n > 0 ? (double)(n - 1) / (double)n : 0;
	case TRACE_BROADCAST:
	case TRACE_P2P:
		return 1.0;
	default:
		return 0;
	}
}

double prof_alg_bytes(enum trace_cat coll, int64_t bytes, int64_t n)
{
	switch (coll) {
	case TRACE_ALL_GATHER:
	case TRACE_REDUCE_SCATTER: /* bytes = per-rank count x type size; S = n x that */
		return n > 0 ? (double)bytes * (double)n : -1;
	case TRACE_ALL_REDUCE:
	case TRACE_ALL_TO_ALL: /* bytes = the whole per-rank buffer */
		return n > 0 ? (double)bytes : -1;
	case TRACE_BROADCAST:
	case TRACE_P2P:
		return (double)bytes;
	default:
		return -1;
	}
}

/* ---- steps ------------------------------------------------------------------------------- */

bool prof_step_marker(const char *name, int64_t *step)
{
	const char *p = NULL;
	if (strncmp(name, "ProfilerStep#", 13) == 0)
		p = name + 13;
	else if (strncmp(name, "step ", 5) == 0)
		p = name + 5;
	if (!p || *p < '0' || *p > '9')
		return false;
	char *end;
	long long v = strtoll(p, &end, 10);
	if (*end != '\0' || v < 0 || v > 1000000000LL)
		return false;
	*step = v;
	return true;
}

struct window {
	int64_t step, a, b;     /* span of the step on this rank */
	int64_t ma, mb;         /* span of its markers (ma >= mb: none) */
};

/* one event's contribution to its step's window */
struct step_piece {
	int64_t step, a, b;
	bool marker;
};

static int piece_cmp(const void *pa, const void *pb)
{
	const struct step_piece *x = pa, *y = pb;
	return (x->step > y->step) - (x->step < y->step);
}

/* Per rank: the step windows, from step markers and from events' step fields, ordered by
 * step. The pieces are sorted by step, then folded: O(n log n) in the events, whatever the
 * number of steps. */
static size_t rank_windows(const struct trace *t, const size_t *idx, size_t n, struct window **out)
{
	struct window *w = NULL;
	size_t nw = 0, cap = 0;
	struct step_piece *p = NULL;
	size_t np = 0, pcap = 0;
	for (size_t i = 0; i < n; i++) {
		const struct trace_event *e = &t->ev[idx[i]];
		int64_t step = -1;
		bool marker = false;
		if (e->cat == TRACE_MARKER) {
			if (!prof_step_marker(trace_name(t, e), &step))
				continue;
			marker = true;
		} else {
			step = e->step;
		}
		if (step < 0)
			continue;
		TW_GROW(p, pcap, np + 1);
		p[np++] = (struct step_piece){step, e->start_ns, e->end_ns, marker};
	}
	if (np > 1)
		qsort(p, np, sizeof(*p), piece_cmp);
	for (size_t i = 0; i < np; i++) {
		if (nw == 0 || w[nw - 1].step != p[i].step) {
			TW_GROW(w, cap, nw + 1);
			w[nw++] = (struct window){p[i].step, p[i].a, p[i].b, INT64_MAX, INT64_MIN};
		}
		struct window *x = &w[nw - 1];
		if (p[i].a < x->a)
			x->a = p[i].a;
		if (p[i].b > x->b)
			x->b = p[i].b;
		if (p[i].marker) {
			if (p[i].a < x->ma)
				x->ma = p[i].a;
			if (p[i].b > x->mb)
				x->mb = p[i].b;
		}
	}
	free(p);
	/* steps run one after the other: a step's window that reaches into the next one's (an
	 * asynchronous collective or a prefetch copy still running on another stream, Kineto's
	 * 1 ns widening) ends where the next begins, so no work counts twice */
	for (size_t k = 0; k + 1 < nw; k++) {
		struct window *x = &w[k], *y = &w[k + 1];
		if (y->ma <= y->mb && x->ma <= x->mb && y->ma > x->ma && y->ma < x->mb)
			x->mb = y->ma;
		if (y->a > x->a && y->a < x->b)
			x->b = y->a;
	}
	if (nw == 0) { /* no step information: the whole trace of the rank is one step */
		int64_t a = INT64_MAX, b = INT64_MIN;
		for (size_t i = 0; i < n; i++) {
			const struct trace_event *e = &t->ev[idx[i]];
			if (e->cat == TRACE_MARKER)
				continue;
			if (e->start_ns < a)
				a = e->start_ns;
			if (e->end_ns > b)
				b = e->end_ns;
		}
		if (a <= b) {
			TW_GROW(w, cap, 1);
			w[nw++] = (struct window){0, a, b, a, b};
		}
	}
	*out = w;
	return nw;
}

/* Which part of event e counts in window w: [*a, *b); false if none. Events tagged with a step
 * belong to that step whole; untagged ones are clipped to the step's marker span. */
static bool in_window(const struct trace_event *e, const struct window *w, int64_t *a, int64_t *b)
{
	if (e->step >= 0) {
		if (e->step != w->step)
			return false;
		*a = e->start_ns;
		*b = e->end_ns;
		return true;
	}
	if (w->ma > w->mb)
		return false;
	*a = e->start_ns > w->ma ? e->start_ns : w->ma;
	*b = e->end_ns < w->mb ? e->end_ns : w->mb;
	/* zero-length events count once, in the window where they start */
	if (*a > *b || (*a == *b && !(e->start_ns >= w->ma && e->start_ns < w->mb)))
		return false;
	return true;
}

/* Analyse one window of one rank. scratch: TRACE_NUM_CATS + 8 lists. */
static void analyze_window(const struct trace *t, const size_t *idx, size_t n,
			   const struct window *w, int64_t max_dur, bool tagged, struct ivls *L,
			   struct prof_analysis *r)
{
	enum { C = TRACE_NUM_CATS, M, P, I, T1, T2, OPT, MCOLL, NL };
	for (int k = 0; k < NL; k++)
		L[k].n = 0;
	memset(r, 0, sizeof(*r));
	r->nranks = r->nsteps = 1;
	r->straggler_rank = -1;
	int64_t fb_end = INT64_MIN; /* end of the last forward/backward compute */
	/* a pipeline stage exchanges activations with a neighbour: point-to-point, or the
	 * two-rank broadcasts DeepSpeed's pipeline engine sends them with */
	bool piped = false;
	/* Without step tags only events overlapping the marker span count: they start in
	 * [ma - longest event, mb], a range of the start-ordered events. */
	size_t i0 = 0;
	if (!tagged && w->ma <= w->mb) {
		size_t lo = 0, hi = n;
		int64_t from = w->ma - max_dur;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (t->ev[idx[mid]].start_ns < from)
				lo = mid + 1;
			else
				hi = mid;
		}
		i0 = lo;
	}
	for (size_t i = i0; i < n; i++) {
		const struct trace_event *e = &t->ev[idx[i]];
		int64_t a, b;
		if (!tagged && e->start_ns > w->mb)
			break;
		if (e->cat == TRACE_MARKER || e->cat < 0 || e->cat >= TRACE_NUM_CATS)
			continue;
		if (!in_window(e, w, &a, &b))
			continue;
		enum trace_cat c = (enum trace_cat)e->cat;
		ivls_push(&L[c], a, b);
		if (c == TRACE_P2P || (c == TRACE_BROADCAST && e->group_size == 2))
			piped = true;
		if (e->phase == PLAN_PHASE_OPT)
			ivls_push(&L[OPT], a, b);
		if (trace_cat_is_compute(c)) {
			r->hw_flops += e->flops;
			if (!(e->flags & TRACE_F_RECOMPUTE))
				r->model_flops += e->flops;
			if ((e->phase < 0 || e->phase == PLAN_PHASE_FWD || e->phase == PLAN_PHASE_BWD) &&
			    b > fb_end)
				fb_end = b;
		}
		if (trace_cat_is_comm(c)) {
			struct prof_coll_stats *s = &r->coll[c];
			/* a collective across a window's edge counts in each window by the share of
			 * its time there (so the steps' counts and bytes add up to the run's) */
			int64_t dur = e->end_ns - e->start_ns;
			double frac = dur > 0 ? (double)(b - a) / (double)dur : 1.0;
			s->mean_count += frac;
			s->bytes += (int64_t)llround(frac * (double)e->bytes);
			s->time_ns += b - a;
			double alg = prof_alg_bytes(c, e->bytes, e->group_size);
			if (e->bytes > 0 && dur > 0 && alg > 0) {
				s->alg_bytes += frac * alg;
				s->bus_bytes += frac * alg * prof_busbw_factor(c, e->group_size);
				s->bw_time_ns += (int64_t)llround(frac * (double)dur);
			}
			s->algo_ns[trace_algo_of(e->flags)][trace_proto_of(e->flags)] += b - a;
		}
	}
	for (int c = 0; c < TRACE_NUM_CATS; c++) {
		ivls_merge(&L[c]);
		r->cat_ns[c] = ivls_len(&L[c]);
		r->coll[c].count = (int64_t)llround(r->coll[c].mean_count);
	}
	ivls_merge(&L[OPT]);
	r->optimizer_ns = ivls_len(&L[OPT]);
	/* unions of the classes */
	struct ivls *acc = &L[T1], *tmp = &L[T2];
	for (int pass = 0; pass < 3; pass++) {
		struct ivls *dst = pass == 0 ? &L[C] : pass == 1 ? &L[M] : &L[P];
		acc->n = 0;
		for (int c = 0; c < TRACE_NUM_CATS; c++) {
			bool take = pass == 0 ? trace_cat_is_compute(c)
				  : pass == 1 ? trace_cat_is_comm(c) : trace_cat_is_copy(c);
			if (!take)
				continue;
			ivls_or(acc, &L[c], tmp);
			struct ivls x = *acc;
			*acc = *tmp;
			*tmp = x;
		}
		struct ivls x = *dst;
		*dst = *acc;
		*acc = x;
	}
	acc->n = 0;
	for (int c = 0; c < TRACE_NUM_CATS; c++) {
		if (!trace_cat_is_comm(c) || c == TRACE_P2P)
			continue;
		ivls_or(acc, &L[c], tmp);
		struct ivls x = *acc;
		*acc = *tmp;
		*tmp = x;
	}
	{
		struct ivls x = L[MCOLL];
		L[MCOLL] = *acc;
		*acc = x;
	}
	r->compute_ns = ivls_len(&L[C]);
	r->comm_ns = ivls_len(&L[M]);
	r->copy_ns = ivls_len(&L[P]);
	ivls_sub(&L[M], &L[C], &L[T1]);
	r->exposed_comm_ns = ivls_len(&L[T1]);
	r->overlapped_comm_ns = r->comm_ns - r->exposed_comm_ns;
	ivls_sub(&L[P], &L[C], &L[T1]);
	r->exposed_copy_ns = ivls_len(&L[T1]);
	for (int c = 0; c < TRACE_NUM_CATS; c++) {
		if (!trace_cat_is_comm(c))
			continue;
		ivls_sub(&L[c], &L[C], &L[T1]);
		r->coll[c].exposed_ns = ivls_len(&L[T1]);
	}
	/* busy = compute ∪ comm ∪ copies */
	ivls_or(&L[C], &L[M], &L[T1]);
	ivls_or(&L[T1], &L[P], &L[T2]);
	r->busy_ns = ivls_len(&L[T2]);
	/* idle = the window minus compute, split by what else runs on the GPU meanwhile */
	struct ivls win = {0};
	ivls_push(&win, w->a, w->b);
	ivls_sub(&win, &L[C], &L[I]);
	r->step_ns = w->b - w->a;
	r->idle_ns = ivls_len(&L[I]);
	ivls_and(&L[I], &L[M], &L[T1]);
	r->stall_comm_ns = ivls_len(&L[T1]);
	ivls_sub(&L[I], &L[M], &L[T1]);
	ivls_and(&L[T1], &L[P], &L[T2]);
	r->stall_copy_ns = ivls_len(&L[T2]);
	r->stall_host_ns = r->idle_ns - r->stall_comm_ns - r->stall_copy_ns;
	/* bubble: idle before the end of the last fwd/bwd compute with no collective or copy
	 * running — the compute stream waits on a pipeline neighbour or on nothing. A rank with
	 * no pipeline neighbour has no bubble: its idle is host-side gaps. */
	if (piped && fb_end > w->a) {
		win.n = 0;
		ivls_push(&win, w->a, fb_end);
		ivls_and(&L[I], &win, &L[T1]);
		ivls_or(&L[MCOLL], &L[P], &L[T2]);
		struct ivls x = {0};
		ivls_sub(&L[T1], &L[T2], &x);
		r->bubble_ns = ivls_len(&x);
		free(x.v);
	}
	free(win.v);
	for (int c = 0; c < TRACE_NUM_CATS; c++) {
		struct prof_coll_stats *s = &r->coll[c];
		if (s->bw_time_ns > 0) {
			s->algbw_GBps = s->alg_bytes / (double)s->bw_time_ns; /* B/ns = GB/s */
			s->busbw_GBps = s->bus_bytes / (double)s->bw_time_ns;
		}
	}
}

/* ---- per rank and step ------------------------------------------------------------------- */

struct sort_ctx_item {
	int32_t rank;
	int64_t start;
	size_t i;
};

static inline bool item_less(const struct sort_ctx_item *a, const struct sort_ctx_item *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->start < b->start);
}

/* Stable merge sort on (rank, start), so equal keys keep trace order: runs of 16 by insertion,
 * then bottom-up merges, skipped where the two halves are in order already. A trace is nearly
 * sorted by start within a rank, and qsort's callbacks and copies were most of `twin simulate`. */
static void sort_items(struct sort_ctx_item *v, size_t n)
{
	enum { RUN = 16 };
	for (size_t lo = 0; lo < n; lo += RUN) {
		size_t hi = lo + RUN < n ? lo + RUN : n;
		for (size_t i = lo + 1; i < hi; i++) {
			struct sort_ctx_item x = v[i];
			size_t k = i;
			for (; k > lo && item_less(&x, &v[k - 1]); k--)
				v[k] = v[k - 1];
			v[k] = x;
		}
	}
	if (n <= RUN)
		return;
	struct sort_ctx_item *tmp = tw_malloc(n * sizeof(*tmp));
	for (size_t w = RUN; w < n; w *= 2) {
		for (size_t lo = 0; lo + w < n; lo += 2 * w) {
			size_t mid = lo + w, hi = lo + 2 * w < n ? lo + 2 * w : n;
			if (!item_less(&v[mid], &v[mid - 1]))
				continue;
			memcpy(tmp + lo, v + lo, (hi - lo) * sizeof(*v));
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				v[k++] = item_less(&tmp[j], &tmp[i]) ? tmp[j++] : tmp[i++];
			while (i < mid)
				v[k++] = tmp[i++];
			while (j < hi)
				v[k++] = tmp[j++];
		}
	}
	free(tmp);
}

/* Indices of items ordered by (rank, start), ties in the order given; frees the items.
 * Traces interleave their ranks: a counting sort by rank first (when the ranks span no more
 * than a few times the items), then each rank's items, nearly in start order, by merging. */
static size_t *order_items(struct sort_ctx_item *it, size_t n)
{
	int32_t lo = INT32_MAX, hi = INT32_MIN;
	for (size_t i = 0; i < n; i++) {
		lo = it[i].rank < lo ? it[i].rank : lo;
		hi = it[i].rank > hi ? it[i].rank : hi;
	}
	uint64_t span = n ? (uint64_t)((int64_t)hi - lo) + 1 : 0;
	if (n > 0 && span <= 4 * (uint64_t)n + 64) {
		size_t *first = TW_NEW_ARRAY(size_t, span + 1); /* zeroed */
		for (size_t i = 0; i < n; i++)
			first[(int64_t)it[i].rank - lo + 1]++;
		for (uint64_t r = 0; r < span; r++)
			first[r + 1] += first[r];
		struct sort_ctx_item *by = tw_malloc(n * sizeof(*by)); /* written in full */
		for (size_t i = 0; i < n; i++)
			by[first[(int64_t)it[i].rank - lo]++] = it[i];
		free(it);
		it = by;
		/* first[r] is now where rank lo + r ends */
		size_t a = 0;
		for (uint64_t r = 0; r < span; r++) {
			sort_items(it + a, first[r] - a);
			a = first[r];
		}
		free(first);
	} else {
		sort_items(it, n);
	}
	size_t *idx = tw_malloc((n ? n : 1) * sizeof(*idx));
	for (size_t i = 0; i < n; i++)
		idx[i] = it[i].i;
	free(it);
	return idx;
}

/* Event indices ordered by (rank, start), ties in trace order; the trace itself is const. */
static size_t *order_events(const struct trace *t)
{
	struct sort_ctx_item *it = tw_malloc((t->nev ? t->nev : 1) * sizeof(*it));
	for (size_t i = 0; i < t->nev; i++)
		it[i] = (struct sort_ctx_item){t->ev[i].rank, t->ev[i].start_ns, i};
	return order_items(it, t->nev);
}

static enum tw_result check_events(const struct trace *t, struct tw_err *err)
{
	if (t->nev == 0)
		return tw_errf(err, TW_ERR_INVALID, "trace: no events to analyse");
	for (size_t i = 0; i < t->nev; i++) {
		const struct trace_event *e = &t->ev[i];
		if (e->end_ns < e->start_ns)
			return tw_errf(err, TW_ERR_INVALID,
				       "trace: event %zu (%s, rank %d) ends before it starts", i,
				       trace_name(t, e), e->rank);
		if (e->cat < 0 || e->cat >= TRACE_NUM_CATS)
			return tw_errf(err, TW_ERR_INVALID, "trace: event %zu has category %d", i,
				       e->cat);
	}
	return TW_OK;
}

/* The rows of prof_analyze_steps from the events in (rank, start) order (order_events). */
static void steps_in_order(const struct trace *t, const size_t *idx, struct prof_step **rows,
			   size_t *nrows)
{
	struct ivls L[TRACE_NUM_CATS + 8];
	memset(L, 0, sizeof(L));
	struct prof_step *out = NULL;
	size_t nout = 0, cap = 0;
	for (size_t lo = 0; lo < t->nev;) {
		size_t hi = lo;
		while (hi < t->nev && t->ev[idx[hi]].rank == t->ev[idx[lo]].rank)
			hi++;
		struct window *w = NULL;
		size_t nw = rank_windows(t, idx + lo, hi - lo, &w);
		int64_t max_dur = 0;
		bool tagged = false;
		for (size_t i = lo; i < hi; i++) {
			const struct trace_event *e = &t->ev[idx[i]];
			/* markers are not counted in a window: a long one (an NVTX range around
			 * the whole run) must not widen every window's scan */
			if (e->cat != TRACE_MARKER && e->end_ns - e->start_ns > max_dur)
				max_dur = e->end_ns - e->start_ns;
			tagged |= e->step >= 0 && e->cat != TRACE_MARKER;
		}
		for (size_t k = 0; k < nw; k++) {
			TW_GROW(out, cap, nout + 1);
			struct prof_step *s = &out[nout++];
			s->rank = t->ev[idx[lo]].rank;
			s->step = w[k].step;
			s->start_ns = w[k].a;
			s->end_ns = w[k].b;
			analyze_window(t, idx + lo, hi - lo, &w[k], max_dur, tagged, L, &s->a);
		}
		free(w);
		lo = hi;
	}
	for (size_t k = 0; k < TRACE_NUM_CATS + 8; k++)
		free(L[k].v);
	*rows = out;
	*nrows = nout;
}

enum tw_result prof_analyze_steps(const struct trace *t, struct prof_step **rows, size_t *nrows,
				  struct tw_err *err)
{
	*rows = NULL;
	*nrows = 0;
	TW_CHECK(check_events(t, err));
	size_t *idx = order_events(t);
	steps_in_order(t, idx, rows, nrows);
	free(idx);
	return TW_OK;
}

/* ---- across ranks: stragglers ------------------------------------------------------------ */

struct coll_inst {
	int64_t step;
	int64_t comm;
	int32_t cat;
	int64_t seq;  /* k-th collective of this type in the step on its rank */
	int32_t rank;
	int32_t stage; /* pipeline stage tag, -1: unknown */
	int64_t dur;
};

static int inst_cmp(const void *pa, const void *pb)
{
	const struct coll_inst *a = pa, *b = pb;
	if (a->step != b->step)
		return a->step < b->step ? -1 : 1;
	if (a->comm != b->comm)
		return a->comm < b->comm ? -1 : 1;
	if (a->cat != b->cat)
		return a->cat < b->cat ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Collective instances are matched across ranks as the k-th collective of one type on one
 * communicator (events' comm; 0 = unknown pools all ranks) in one step.
 * The rank that arrives last at a collective waits for nobody, so its kernel is the shortest;
 * every rank's kernel ends at about the same time (HTA's straggler rationale). Lateness of a
 * rank at one collective = longest duration among the ranks - its own. Durations are on one
 * clock each, so clock offsets between ranks do not matter. */
/* The step of rank's window holding t: rows are sorted by (rank, step) and a rank's windows
 * usually by time too, so binary search first, then look around. */
static int64_t step_at(const struct prof_step *rows, size_t nrows, int64_t rank, int64_t t)
{
	size_t lo = 0, hi = nrows;
	while (lo < hi) { /* first row of the rank */
		size_t mid = (lo + hi) / 2;
		if (rows[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t first = lo, last = lo;
	while (last < nrows && rows[last].rank == rank)
		last++;
	lo = first;
	hi = last;
	while (lo < hi) { /* first window starting after t */
		size_t mid = (lo + hi) / 2;
		if (rows[mid].start_ns <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > first && t < rows[lo - 1].end_ns && t >= rows[lo - 1].start_ns)
		return rows[lo - 1].step;
	for (size_t r = first; r < last; r++)
		if (t >= rows[r].start_ns && t < rows[r].end_ns)
			return rows[r].step;
	return 0;
}

static void find_straggler(const struct trace *t, const size_t *idx, const struct prof_step *rows,
			   size_t nrows, struct prof_analysis *a)
{
	a->straggler_rank = -1;
	a->straggler_ns = 0;
	a->straggler_colls = 0;
	struct coll_inst *v = NULL;
	size_t nv = 0, cap = 0;
	struct seq_key {
		int64_t comm;
		int32_t cat;
		int64_t n;
	} *seq = NULL;
	size_t nseq = 0, seq_cap = 0;
	int32_t cur_rank = INT32_MIN;
	int64_t cur_step = INT64_MIN;
	for (size_t i = 0; i < t->nev; i++) {
		const struct trace_event *e = &t->ev[idx[i]];
		if (!trace_cat_is_comm(e->cat) || e->cat == TRACE_P2P)
			continue;
		int64_t step = e->step;
		if (step < 0) /* the step whose window holds its start */
			step = step_at(rows, nrows, e->rank, e->start_ns);
		if (e->rank != cur_rank || step != cur_step) {
			nseq = 0;
			cur_rank = e->rank;
			cur_step = step;
		}
		size_t q = 0;
		while (q < nseq && !(seq[q].comm == e->comm && seq[q].cat == e->cat))
			q++;
		if (q == nseq) {
			TW_GROW(seq, seq_cap, nseq + 1);
			seq[nseq++] = (struct seq_key){e->comm, e->cat, 0};
		}
		TW_GROW(v, cap, nv + 1);
		v[nv++] = (struct coll_inst){step, e->comm, e->cat, seq[q].n++, e->rank, e->stage,
					     e->end_ns - e->start_ns};
	}
	free(seq);
	if (nv > 1)
		qsort(v, nv, sizeof(*v), inst_cmp);
	/* per-rank sums, over the ranks present */
	int32_t *ranks = NULL;
	size_t nr = 0, rcap = 0;
	for (size_t r = 0; r < nrows; r++)
		if (nr == 0 || ranks[nr - 1] != rows[r].rank) {
			TW_GROW(ranks, rcap, nr + 1);
			ranks[nr++] = (int32_t)rows[r].rank;
		}
	double *late = TW_NEW_ARRAY(double, nr + 1);
	int64_t *cnt = TW_NEW_ARRAY(int64_t, nr + 1);
	for (size_t lo = 0; lo < nv;) {
		size_t hi = lo;
		int64_t maxd = 0;
		bool cross = false;
		while (hi < nv && v[hi].step == v[lo].step && v[hi].comm == v[lo].comm &&
		       v[hi].cat == v[lo].cat && v[hi].seq == v[lo].seq) {
			if (v[hi].dur > maxd)
				maxd = v[hi].dur;
			cross |= v[hi].stage >= 0 && v[lo].stage >= 0 && v[hi].stage != v[lo].stage;
			hi++;
		}
		/* a collective between pipeline stages (the tied embedding's all-reduce of the
		 * first and the last) waits on the schedule, not on a straggler */
		if (hi - lo >= 2 && !cross) {
			a->straggler_colls++;
			for (size_t k = lo; k < hi; k++) {
				size_t r = 0;
				while (r < nr && ranks[r] != v[k].rank)
					r++;
				late[r] += (double)(maxd - v[k].dur);
				cnt[r]++;
			}
		}
		lo = hi;
	}
	double best = 0;
	for (size_t r = 0; r < nr; r++) {
		if (cnt[r] == 0)
			continue;
		double m = late[r] / (double)cnt[r];
		if (m > best) {
			best = m;
			a->straggler_rank = ranks[r];
			a->straggler_ns = llround(m);
		}
	}
	free(late);
	free(cnt);
	free(ranks);
	free(v);
}

/* ---- the run ------------------------------------------------------------------------------ */

static int64_t mean_i(double sum, size_t n)
{
	return n ? llround(sum / (double)n) : 0;
}

/* Peak GPU bytes over ranks: the recorded peaks, else the memory samples (a total when given,
 * else the sum of the categories' latest values). */
static int64_t peak_memory(const struct trace *t)
{
	int64_t peak = trace_peak_mem(t, NULL);
	if (peak < 0)
		peak = 0;
	if (t->nmem == 0)
		return peak;
	/* the GPU's samples by (rank, time), ties in trace order */
	struct sort_ctx_item *it = tw_malloc(t->nmem * sizeof(*it));
	size_t n = 0;
	for (size_t i = 0; i < t->nmem; i++)
		if (t->mem[i].device == PLAN_DEV_GPU)
			it[n++] = (struct sort_ctx_item){t->mem[i].rank, t->mem[i].t_ns, i};
	size_t *idx = order_items(it, n);
	const struct trace_mem_sample *m = t->mem;
	int64_t cur[64];
	for (size_t lo = 0; lo < n;) {
		memset(cur, 0, sizeof(cur));
		int64_t sum = 0;
		size_t hi = lo;
		while (hi < n && m[idx[hi]].rank == m[idx[lo]].rank) {
			const struct trace_mem_sample *s = &m[idx[hi++]];
			if (s->cat < 0) {
				if (s->bytes > peak)
					peak = s->bytes;
				continue;
			}
			int c = s->cat < 64 ? s->cat : 63;
			sum += s->bytes - cur[c];
			cur[c] = s->bytes;
			if (sum > peak)
				peak = sum;
		}
		lo = hi;
	}
	free(idx);
	return peak;
}

enum tw_result prof_analyze(const struct trace *t, struct prof_analysis *out, struct tw_err *err)
{
	memset(out, 0, sizeof(*out));
	out->straggler_rank = -1;
	TW_CHECK(check_events(t, err));
	size_t *idx = order_events(t); /* for the steps and the stragglers */
	struct prof_step *rows;
	size_t n;
	steps_in_order(t, idx, &rows, &n);
	if (n == 0) {
		free(rows);
		free(idx);
		return tw_errf(err, TW_ERR_INVALID, "trace: only markers, no timed work");
	}
	/* sums, then means over (rank, step) rows */
	double s_step = 0, s_cat[TRACE_NUM_CATS] = {0}, s[16] = {0};
	double c_count[TRACE_NUM_CATS] = {0}, c_bytes[TRACE_NUM_CATS] = {0},
	       c_time[TRACE_NUM_CATS] = {0}, c_exp[TRACE_NUM_CATS] = {0};
	int64_t prev_rank = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		const struct prof_analysis *r = &rows[i].a;
		if (rows[i].rank != prev_rank) {
			out->nranks++;
			prev_rank = rows[i].rank;
		}
		s_step += (double)r->step_ns;
		for (int c = 0; c < TRACE_NUM_CATS; c++) {
			s_cat[c] += (double)r->cat_ns[c];
			const struct prof_coll_stats *cs = &r->coll[c];
			c_count[c] += cs->mean_count;
			c_bytes[c] += (double)cs->bytes;
			c_time[c] += (double)cs->time_ns;
			c_exp[c] += (double)cs->exposed_ns;
			out->coll[c].alg_bytes += cs->alg_bytes;
			out->coll[c].bus_bytes += cs->bus_bytes;
			out->coll[c].bw_time_ns += cs->bw_time_ns;
			for (int a = 0; a < TRACE_NUM_ALGOS; a++)
				for (int p = 0; p < TRACE_NUM_PROTOS; p++)
					out->coll[c].algo_ns[a][p] += cs->algo_ns[a][p];
		}
		const int64_t v[] = {r->compute_ns,    r->comm_ns,       r->exposed_comm_ns,
				     r->overlapped_comm_ns, r->copy_ns,   r->exposed_copy_ns,
				     r->idle_ns,       r->stall_comm_ns, r->stall_copy_ns,
				     r->stall_host_ns, r->bubble_ns,     r->optimizer_ns,
				     r->busy_ns};
		for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
			s[k] += (double)v[k];
		out->model_flops += r->model_flops;
		out->hw_flops += r->hw_flops;
	}
	/* steps per rank: the most any rank has */
	for (size_t i = 0, cnt = 0; i < n; i++) {
		cnt = (i > 0 && rows[i].rank == rows[i - 1].rank) ? cnt + 1 : 1;
		if ((int64_t)cnt > out->nsteps)
			out->nsteps = (int64_t)cnt;
	}
	out->step_ns = mean_i(s_step, n);
	for (int c = 0; c < TRACE_NUM_CATS; c++) {
		out->cat_ns[c] = mean_i(s_cat[c], n);
		struct prof_coll_stats *cs = &out->coll[c];
		cs->count = mean_i(c_count[c], n);
		cs->mean_count = c_count[c] / (double)n;
		cs->bytes = mean_i(c_bytes[c], n);
		cs->time_ns = mean_i(c_time[c], n);
		cs->exposed_ns = mean_i(c_exp[c], n);
		if (cs->bw_time_ns > 0) {
			cs->algbw_GBps = cs->alg_bytes / (double)cs->bw_time_ns;
			cs->busbw_GBps = cs->bus_bytes / (double)cs->bw_time_ns;
		}
	}
	int64_t *dst[] = {&out->compute_ns,    &out->comm_ns,       &out->exposed_comm_ns,
			  &out->overlapped_comm_ns, &out->copy_ns,   &out->exposed_copy_ns,
			  &out->idle_ns,       &out->stall_comm_ns, &out->stall_copy_ns,
			  &out->stall_host_ns, &out->bubble_ns,     &out->optimizer_ns,
			  &out->busy_ns};
	for (size_t k = 0; k < sizeof(dst) / sizeof(dst[0]); k++)
		*dst[k] = mean_i(s[k], n);
	out->model_flops /= (double)n;
	out->hw_flops /= (double)n;
	out->peak_mem_bytes = peak_memory(t);
	find_straggler(t, idx, rows, n, out);
	free(rows);
	free(idx);
	return TW_OK;
}
