/* trace — events and memory samples of a run, with interned names. */
#include "trace.h"

#include <stdlib.h>
#include <string.h>

static const char *const cat_names[TRACE_NUM_CATS] = {
	[TRACE_GEMM] = "gemm",
	[TRACE_ATTN] = "attention",
	[TRACE_COMPUTE_OTHER] = "compute_other",
	[TRACE_ALL_GATHER] = "all_gather",
	[TRACE_REDUCE_SCATTER] = "reduce_scatter",
	[TRACE_ALL_REDUCE] = "all_reduce",
	[TRACE_ALL_TO_ALL] = "all_to_all",
	[TRACE_P2P] = "p2p",
	[TRACE_BROADCAST] = "broadcast",
	[TRACE_H2D] = "h2d",
	[TRACE_D2H] = "d2h",
	[TRACE_NVME] = "nvme",
	[TRACE_HOST] = "host",
	[TRACE_MARKER] = "marker",
};

const char *trace_algo_name(enum trace_algo a)
{
	static const char *const n[TRACE_NUM_ALGOS] = { "?", "tree", "ring", "nvls", "pat", "nvlstree" };
	return (int)a > 0 && a < TRACE_NUM_ALGOS ? n[a] : "?";
}

const char *trace_proto_name(enum trace_proto p)
{
	static const char *const n[TRACE_NUM_PROTOS] = { "?", "LL", "LL128", "Simple" };
	return (int)p > 0 && p < TRACE_NUM_PROTOS ? n[p] : "?";
}

const char *trace_cat_name(enum trace_cat c)
{
	if ((int)c < 0 || c >= TRACE_NUM_CATS)
		return "unknown";
	return cat_names[c];
}

bool trace_cat_parse(const char *s, enum trace_cat *out)
{
	for (int c = 0; c < TRACE_NUM_CATS; c++)
		if (s && strcmp(s, cat_names[c]) == 0) {
			*out = (enum trace_cat)c;
			return true;
		}
	return false;
}

bool trace_cat_is_compute(enum trace_cat c)
{
	return c == TRACE_GEMM || c == TRACE_ATTN || c == TRACE_COMPUTE_OTHER;
}

bool trace_cat_is_comm(enum trace_cat c)
{
	return c >= TRACE_ALL_GATHER && c <= TRACE_BROADCAST;
}

bool trace_cat_is_copy(enum trace_cat c)
{
	return c == TRACE_H2D || c == TRACE_D2H || c == TRACE_NVME;
}

void trace_init(struct trace *t, enum trace_kind kind, int64_t nranks)
{
	memset(t, 0, sizeof(*t));
	t->kind = kind;
	t->nranks = nranks;
}

void trace_release(struct trace *t)
{
	if (!t)
		return;
	free(t->ev);
	free(t->mem);
	free(t->peak_mem);
	free(t->strings);
	free(t->name_slots);
	memset(t, 0, sizeof(*t));
}

void trace_move(struct trace *dst, struct trace *src)
{
	*dst = *src;
	memset(src, 0, sizeof(*src));
}

/* FNV-1a: names are short, and this keeps interning O(1) for million-event traces. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void slots_insert(uint32_t *slots, size_t cap, const char *strings, uint32_t off)
{
	size_t i = name_hash(strings + off) & (cap - 1);
	while (slots[i])
		i = (i + 1) & (cap - 1);
	slots[i] = off + 1;
}

uint32_t trace_intern(struct trace *t, const char *name)
{
	if (!name)
		name = "";
	/* keep the load factor under 1/2 */
	if ((t->nnames + 1) * 2 > t->name_slots_cap) {
		size_t cap = t->name_slots_cap ? t->name_slots_cap * 2 : 64;
		uint32_t *slots = TW_NEW_ARRAY(uint32_t, cap);
		for (size_t i = 0; i < t->name_slots_cap; i++)
			if (t->name_slots[i])
				slots_insert(slots, cap, t->strings, t->name_slots[i] - 1);
		free(t->name_slots);
		t->name_slots = slots;
		t->name_slots_cap = cap;
	}
	size_t i = name_hash(name) & (t->name_slots_cap - 1);
	while (t->name_slots[i]) {
		uint32_t off = t->name_slots[i] - 1;
		if (strcmp(t->strings + off, name) == 0)
			return off;
		i = (i + 1) & (t->name_slots_cap - 1);
	}
	size_t len = strlen(name) + 1;
	TW_GROW(t->strings, t->strings_cap, t->strings_len + len);
	uint32_t off = (uint32_t)t->strings_len;
	memcpy(t->strings + off, name, len);
	t->strings_len += len;
	t->name_slots[i] = off + 1;
	t->nnames++;
	return off;
}

const char *trace_name(const struct trace *t, const struct trace_event *e)
{
	if (!t->strings || e->name >= t->strings_len)
		return "";
	return t->strings + e->name;
}

struct trace_event *trace_add(struct trace *t, const struct trace_event *e)
{
	TW_GROW(t->ev, t->ev_cap, t->nev + 1);
	struct trace_event *n = &t->ev[t->nev++];
	*n = *e;
	return n;
}

void trace_add_mem(struct trace *t, const struct trace_mem_sample *s)
{
	TW_GROW(t->mem, t->mem_cap, t->nmem + 1);
	t->mem[t->nmem++] = *s;
}

#define CMP(a, b)                                                                                  \
	do {                                                                                       \
		if ((a) != (b))                                                                    \
			return (a) < (b) ? -1 : 1;                                                 \
	} while (0)

/* A total order, so sorting is deterministic whatever order events were added in. */
static int ev_cmp(const void *pa, const void *pb)
{
	const struct trace_event *a = pa, *b = pb;
	CMP(a->rank, b->rank);
	CMP(a->start_ns, b->start_ns);
	CMP(a->end_ns, b->end_ns);
	CMP(a->stream, b->stream);
	CMP(a->cat, b->cat);
	CMP(a->op_id, b->op_id);
	CMP(a->name, b->name);
	return 0;
}

void trace_sort(struct trace *t)
{
	if (t->nev > 1)
		qsort(t->ev, t->nev, sizeof(*t->ev), ev_cmp);
}

int64_t trace_peak_mem(const struct trace *t, int64_t *rank)
{
	int64_t peak = -1, at = -1;
	for (int64_t r = 0; t->peak_mem && r < t->nranks; r++)
		if (t->peak_mem[r] > peak)
			peak = t->peak_mem[r], at = r;
	if (rank)
		*rank = at;
	return peak;
}
