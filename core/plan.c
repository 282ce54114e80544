/* plan — names of the plan's enums, the storage of a plan (ops, deps, names), and what the
 * executors read from an op. */
#include "plan.h"
#include "plan_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NAME_OF(table, v, n) ((int)(v) >= 0 && (int)(v) < (n) ? (table)[v] : "?")

static const char *const kind_names[PLAN_NUM_KINDS] = {"compute", "coll", "p2p", "copy", "alloc",
						      "free"};
static const char *const stream_names[PLAN_NUM_STREAMS] = {"compute", "comm", "comm_tp", "p2p",
							  "copy_in", "copy_out", "host", "comm_ep"};
static const char *const kernel_names[PLAN_NUM_KERNELS] = {
	"gemm", "attn", "elemwise", "norm", "softmax", "embed", "loss", "optim", "permute"};
static const char *const coll_names[PLAN_NUM_COLLS] = {"all_gather", "reduce_scatter",
						      "all_reduce", "broadcast", "all_to_all",
						      "reduce"};
static const char *const copy_names[PLAN_NUM_COPIES] = {"h2d", "d2h", "nvme_read", "nvme_write"};
static const char *const cat_names[PLAN_NUM_MEM_CATS] = {
	"params", "master", "grads", "optimizer", "activations", "checkpoints", "gathered",
	"buckets", "logits", "workspace"};
static const char *const dev_names[PLAN_NUM_DEVICES] = {"gpu", "host", "nvme"};
static const char *const phase_names[] = {"fwd", "bwd", "opt", "other"};

const char *plan_kind_name(enum plan_kind k) { return NAME_OF(kind_names, k, PLAN_NUM_KINDS); }
const char *plan_stream_name(enum plan_stream s)
{
	return NAME_OF(stream_names, s, PLAN_NUM_STREAMS);
}
const char *plan_kernel_name(enum plan_kernel k)
{
	return NAME_OF(kernel_names, k, PLAN_NUM_KERNELS);
}
const char *plan_coll_name(enum plan_coll c) { return NAME_OF(coll_names, c, PLAN_NUM_COLLS); }
const char *plan_copy_name(enum plan_copy c) { return NAME_OF(copy_names, c, PLAN_NUM_COPIES); }
const char *plan_mem_cat_name(enum plan_mem_cat c)
{
	return NAME_OF(cat_names, c, PLAN_NUM_MEM_CATS);
}
const char *plan_device_name(enum plan_device d) { return NAME_OF(dev_names, d, PLAN_NUM_DEVICES); }
const char *plan_phase_name(enum plan_phase p) { return NAME_OF(phase_names, p, 4); }

double plan_torch_softmax_bytes(const struct plan_op *op)
{
	if (op->kind != PLAN_COMPUTE || op->u.compute.kernel != PLAN_K_ATTN ||
	    op->u.compute.torch_softmax == PLAN_SOFTMAX_FUSED)
		return 0;
	double scores = (double)op->u.compute.b * (double)op->u.compute.heads * (double)op->u.compute.s_q *
			(double)op->u.compute.s_kv;
	bool bwd = op->phase == PLAN_PHASE_BWD && !(op->flags & PLAN_F_RECOMPUTE);
	if (op->u.compute.torch_softmax == PLAN_SOFTMAX_HF_EAGER)
		return bwd ? 0 : scores * 11.0;
	return scores * (bwd ? 35.0 : 33.0);
}

int64_t plan_attn_band(const struct job *j, const struct plan_op *op, double *share)
{
	int64_t skv = op->u.compute.s_kv, seq = j->seq > 0 ? j->seq : j->model.seq_len;
	*share = !op->u.compute.causal ? 1.0
		 : !j->strat.flash_attention || op->layer < 0 ? 0.5
							    : model_attn_frac(&j->model, op->layer, seq);
	if (*share >= 0.5)
		return skv;
	int64_t band = llround(2.0 * *share * (double)skv);
	return band > 1 ? band : 1;
}

void plan_release(struct plan *p)
{
	if (!p)
		return;
	free(p->ops);
	free(p->deps);
	free(p->names);
	memset(p, 0, sizeof(*p));
}

/* Appends an op with its deps (ids of earlier ops; UINT32_MAX entries are skipped). */
struct plan_op *plan_push(struct plan *p, enum plan_kind kind, enum plan_stream stream,
			  const char *name, const uint32_t *deps, int ndeps)
{
	TW_GROW(p->ops, p->cap, p->nops + 1);
	struct plan_op *op = &p->ops[p->nops];
	/* cleared by a copy of a zero op (padding included: the simulator compares shapes
	 * bytewise); GCC turns a zeroing store of 136 bytes into rep stos, whose start-up cost
	 * was most of this function, and a copy into plain vector moves */
	static const struct plan_op zero_op;
	memcpy(op, &zero_op, sizeof(*op));
	op->id = (uint32_t)p->nops++;
	op->kind = (uint8_t)kind;
	op->stream = (uint8_t)stream;
	op->name = name;
	op->layer = op->micro = op->stage = -1;
	op->dep_off = (uint32_t)p->ndeps;
	TW_GROW(p->deps, p->deps_cap, p->ndeps + (size_t)ndeps);
	for (int i = 0; i < ndeps; i++) {
		if (deps[i] == PLAN_NONE) /* a dep >= id is a builder bug the tests catch */
			continue;
		/* skip duplicates: deps lists are short */
		bool dup = false;
		for (uint32_t k = 0; k < op->ndeps; k++)
			dup |= p->deps[op->dep_off + k] == deps[i];
		if (!dup) {
			p->deps[p->ndeps++] = deps[i];
			op->ndeps++;
		}
	}
	return op;
}

enum trace_cat plan_op_trace_cat(const struct plan_op *op)
{
	switch (op->kind) {
	case PLAN_COMPUTE:
		if (op->stream == PLAN_STREAM_HOST)
			return TRACE_HOST;
		return op->u.compute.kernel == PLAN_K_GEMM   ? TRACE_GEMM
		       : op->u.compute.kernel == PLAN_K_ATTN ? TRACE_ATTN
							     : TRACE_COMPUTE_OTHER;
	case PLAN_COLL:
		switch (op->u.coll.coll) {
		case PLAN_ALL_GATHER: return TRACE_ALL_GATHER;
		case PLAN_REDUCE_SCATTER: return TRACE_REDUCE_SCATTER;
		case PLAN_ALL_REDUCE: return TRACE_ALL_REDUCE;
		case PLAN_BROADCAST:
		case PLAN_REDUCE: return TRACE_BROADCAST; /* rooted, as the profiler files NCCL's */
		default: return TRACE_ALL_TO_ALL;
		}
	case PLAN_P2P:
		return TRACE_P2P;
	case PLAN_COPY:
		return op->u.copy.dir == PLAN_H2D   ? TRACE_H2D
		       : op->u.copy.dir == PLAN_D2H ? TRACE_D2H
						    : TRACE_NVME;
	default:
		return TRACE_MARKER;
	}
}
