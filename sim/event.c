/* The event queue: a binary min-heap on (time, insertion counter). The counter makes the
 * order of simultaneous events the order they were scheduled in, so a run is reproducible to
 * the bit whatever the heap's internal layout. */
#include <stdlib.h>

#include "sim_int.h"

void sim_heap_init(struct sim_heap *h)
{
	h->v = NULL;
	h->n = h->cap = 0;
	h->next_seq = 0;
}

void sim_heap_free(struct sim_heap *h)
{
	free(h->v);
	sim_heap_init(h);
}

static inline bool ev_less(const struct sim_ev *a, const struct sim_ev *b)
{
	/* bitwise, not short-circuit: the pop's comparisons are unpredictable, and flags
	 * combined without branches cost less than a mispredicted jump */
	return (a->t < b->t) | ((a->t == b->t) & (a->seq < b->seq));
}

void sim_heap_push(struct sim_heap *h, int64_t t, int32_t type, int32_t a, int64_t b, uint32_t ver)
{
	TW_GROW(h->v, h->cap, h->n + 1);
	struct sim_ev e = { .t = t, .seq = h->next_seq++ << 8 | ((uint64_t)type & 0xff), .a = a, .b = b,
			    .ver = ver };
	size_t i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!ev_less(&e, &h->v[p]))
			break;
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = e;
}

bool sim_heap_pop(struct sim_heap *h, struct sim_ev *out)
{
	if (h->n == 0)
		return false;
	*out = h->v[0];
	struct sim_ev last = h->v[--h->n];
	size_t i = 0, n = h->n;
	for (;;) {
		size_t l = 2 * i + 1;
		if (l >= n)
			break;
		size_t m = (l + 1 < n && ev_less(&h->v[l + 1], &h->v[l])) ? l + 1 : l;
		if (!ev_less(&h->v[m], &last))
			break;
		h->v[i] = h->v[m];
		i = m;
	}
	if (n > 0)
		h->v[i] = last;
	return true;
}
