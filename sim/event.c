/* The event queue: a radix heap on time whose buckets keep push order (sim_int.h). Events due
 * at the same nanosecond pop in the order they were scheduled, so a run is reproducible to
 * the bit. */
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

void sim_heap_init(struct sim_heap *h)
{
	memset(h, 0, sizeof(*h));
}

void sim_heap_free(struct sim_heap *h)
{
	for (int i = 0; i < SIM_HEAP_BUCKETS; i++)
		free(h->b[i]);
	sim_heap_init(h);
}

/* index of the highest set bit of x != 0 */
static inline int top_bit(uint64_t x)
{
#if defined(__GNUC__)
	return 63 - __builtin_clzll(x);
#else
	int i = 0;
	while (x >>= 1)
		i++;
	return i;
#endif
}

/* index of the lowest set bit of x != 0 */
static inline int low_bit(uint64_t x)
{
#if defined(__GNUC__)
	return __builtin_ctzll(x);
#else
	int i = 0;
	while (!(x & 1)) {
		x >>= 1;
		i++;
	}
	return i;
#endif
}

static inline void put(struct sim_heap *h, const struct sim_ev *e)
{
	uint64_t d = (uint64_t)e->t ^ (uint64_t)h->last_t;
	int k = d ? 1 + top_bit(d) : 0;
	TW_GROW(h->b[k], h->cap[k], h->n[k] + 1);
	h->b[k][h->n[k]++] = *e;
	h->full[k >> 6] |= 1ULL << (k & 63);
}

void sim_heap_push(struct sim_heap *h, int64_t t, int32_t type, int32_t a, int64_t b, uint32_t ver)
{
	struct sim_ev e = { .t = t < h->last_t ? h->last_t : t,
			    .seq = h->next_seq++ << 8 | ((uint64_t)type & 0xff), .a = a, .b = b, .ver = ver };
	put(h, &e);
	h->size++;
}

bool sim_heap_pop(struct sim_heap *h, struct sim_ev *out)
{
	if (h->size == 0)
		return false;
	if (h->n[0] == 0) {
		/* split the lowest non-empty bucket: its earliest time is the next one, and its
		 * events now differ from that time below the bucket's bit */
		int k = h->full[0] ? low_bit(h->full[0]) : 64 + low_bit(h->full[1]);
		struct sim_ev *v = h->b[k];
		size_t n = h->n[k];
		int64_t tmin = v[0].t;
		for (size_t i = 1; i < n; i++)
			tmin = v[i].t < tmin ? v[i].t : tmin;
		h->last_t = tmin;
		h->n[k] = 0;
		h->full[k >> 6] &= ~(1ULL << (k & 63));
		for (size_t i = 0; i < n; i++)
			put(h, &v[i]);
	}
	*out = h->b[0][h->head++];
	h->size--;
	if (h->head == h->n[0]) {
		h->n[0] = h->head = 0;
		h->full[0] &= ~1ULL;
	}
	return true;
}
