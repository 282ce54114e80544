/* trace — what happened (or is predicted to happen) in a run: timed events per rank and
 * stream, and memory samples. The simulator, the executor and the importers all produce a
 * struct trace; profile/ stores and analyses it (DESIGN.md rule 2). */
#ifndef TW_TRACE_H
#define TW_TRACE_H

#include "tw.h"

/* Categories of time (the breakdown's rows). */
enum trace_cat {
	TRACE_GEMM = 0, TRACE_ATTN, TRACE_COMPUTE_OTHER,      /* compute */
	TRACE_ALL_GATHER, TRACE_REDUCE_SCATTER, TRACE_ALL_REDUCE, /* comm */
	TRACE_ALL_TO_ALL, TRACE_P2P, TRACE_BROADCAST,
	TRACE_H2D, TRACE_D2H, TRACE_NVME,                      /* copies */
	TRACE_HOST,                                            /* host CPU work (CPU optimizer) */
	TRACE_MARKER,                                          /* step / NVTX ranges, zero cost */
	TRACE_NUM_CATS
};
const char *trace_cat_name(enum trace_cat c);   /* "gemm", "all_gather", ... */
bool trace_cat_parse(const char *s, enum trace_cat *out);
bool trace_cat_is_compute(enum trace_cat c);
bool trace_cat_is_comm(enum trace_cat c);
bool trace_cat_is_copy(enum trace_cat c);

struct trace_event {
	int32_t rank;
	int32_t device;       /* GPU index on its node, -1: host */
	int32_t stream;       /* stream id (the plan's enum plan_stream for sim/exec runs) */
	int32_t cat;          /* enum trace_cat */
	int32_t step;         /* optimizer step index, -1: unknown */
	int32_t op_id;        /* plan op id, -1: not from a plan */
	int32_t layer, micro, stage, phase; /* tags, -1: unknown */
	int64_t start_ns, end_ns;
	int64_t bytes;        /* message / copy size, 0: unknown */
	double flops;         /* 0: unknown */
	int32_t group_size;   /* ranks in the collective, 0: unknown */
	uint32_t name;        /* offset in trace->strings */
	uint32_t flags;       /* TRACE_F_* */
	int64_t comm;         /* communicator id, equal on every member of one group instance;
			       * 0: unknown. For plan collectives: 1 + (group << 32) +
			       * job_group_color(job, group, rank). Stragglers are found by matching
			       * the k-th collective of each communicator across ranks. */
};

/* event flags: bit 0 marks recomputed forward work (not model FLOPs); bit 1 a rooted reduce
 * (NCCL's Reduce, filed with broadcast under TRACE_BROADCAST: both move each byte once);
 * bits 8-11 and 12-13 hold the NCCL algorithm and protocol a collective ran with, when the run
 * knows them (the simulator's choice; 0: unknown) */
enum { TRACE_F_RECOMPUTE = 1, TRACE_F_REDUCE = 2, TRACE_F_ALGO_SHIFT = 8, TRACE_F_PROTO_SHIFT = 12 };
enum trace_algo { TRACE_ALGO_UNKNOWN = 0, TRACE_ALGO_TREE, TRACE_ALGO_RING, TRACE_ALGO_NVLS,
		  TRACE_ALGO_PAT, TRACE_ALGO_NVLS_TREE, TRACE_NUM_ALGOS };
enum trace_proto { TRACE_PROTO_UNKNOWN = 0, TRACE_PROTO_LL, TRACE_PROTO_LL128,
		   TRACE_PROTO_SIMPLE, TRACE_NUM_PROTOS };
static inline uint32_t trace_algo_flags(enum trace_algo a, enum trace_proto p)
{
	return (uint32_t)a << TRACE_F_ALGO_SHIFT | (uint32_t)p << TRACE_F_PROTO_SHIFT;
}
static inline enum trace_algo trace_algo_of(uint32_t flags)
{
	unsigned a = (flags >> TRACE_F_ALGO_SHIFT) & 0xf;
	return a < TRACE_NUM_ALGOS ? (enum trace_algo)a : TRACE_ALGO_UNKNOWN;
}
static inline enum trace_proto trace_proto_of(uint32_t flags)
{
	return (enum trace_proto)((flags >> TRACE_F_PROTO_SHIFT) & 0x3);
}
const char *trace_algo_name(enum trace_algo a);   /* "ring", "tree", "nvls", "pat"; "?" */
const char *trace_proto_name(enum trace_proto p); /* "LL", "LL128", "Simple"; "?" */

struct trace_mem_sample {
	int32_t rank;
	int32_t device;       /* enum plan_device */
	int32_t cat;          /* enum plan_mem_cat, -1: total */
	int64_t t_ns;
	int64_t bytes;        /* live bytes after this instant */
};

enum trace_kind { TRACE_KIND_SIM = 0, TRACE_KIND_EXEC, TRACE_KIND_IMPORT };

struct trace {
	enum trace_kind kind;
	int64_t nranks;
	struct trace_event *ev;
	size_t nev, ev_cap;
	struct trace_mem_sample *mem;
	size_t nmem, mem_cap;
	int64_t *peak_mem;    /* per rank measured/predicted GPU peak bytes, nranks entries or NULL */
	char *strings;        /* interned names, NUL-separated */
	size_t strings_len, strings_cap;
	uint32_t *name_slots; /* open-addressing index of strings (offset + 1, 0: empty) */
	size_t name_slots_cap, nnames;
};

void trace_init(struct trace *t, enum trace_kind kind, int64_t nranks);
void trace_release(struct trace *t);
/* Intern a name (returns its offset; equal names may share one). */
uint32_t trace_intern(struct trace *t, const char *name);
const char *trace_name(const struct trace *t, const struct trace_event *e);
/* Append (copies); returns the new event so callers can fill the rest. */
struct trace_event *trace_add(struct trace *t, const struct trace_event *e);
void trace_add_mem(struct trace *t, const struct trace_mem_sample *s);
/* Sort events by (rank, start, end) — analysis expects it. */
void trace_sort(struct trace *t);
/* The largest recorded per-rank peak (peak_mem), bytes, and its rank in *rank (may be NULL);
 * -1 when the trace records none. */
int64_t trace_peak_mem(const struct trace *t, int64_t *rank);
/* Take over src's contents (src is left empty, ready for release). */
void trace_move(struct trace *dst, struct trace *src);

#endif
