/* plan_build — plan_rank(): the ops one rank runs in one optimizer step, following what
 * DeepSpeed, Megatron-LM and FSDP do (docs/plan.md; reference/deepspeed.md §2-§5).
 *
 * The builder walks the pipeline schedule of the rank's stage (a list of forward/backward
 * items, one per micro-batch and model chunk) and emits, per transformer layer, the kernels
 * with their shapes, the TP/SP/CP/EP collectives, the ZeRO/FSDP gathers and gradient
 * reductions, the ALLOC/FREE of every buffer, and at the end the optimizer step. Ops on one
 * stream run in plan order; deps record the waits across streams. */
#include "plan.h"
#include "plan_int.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VP 64
#define DS_STAGE0_BUCKET 500000000LL /* MEMORY_OPT_ALLREDUCE_SIZE, elements (§2.1) */

enum shard_mode {
	SH_NONE = 0, /* replicated states (DDP, DeepSpeed stage 0, Megatron) */
	SH_OPT,      /* optimizer states partitioned (ZeRO-1, Megatron distributed optimizer) */
	SH_GRAD,     /* + gradients (ZeRO-2) */
	SH_PARAM     /* + parameters (ZeRO-3, FSDP FULL/SHARD_GRAD_OP/HYBRID) */
};

struct buf_info {
	int64_t bytes;
	uint8_t cat, dev;
};

struct p2p_ctr {
	int64_t peer;
	int64_t sent[PLAN_P2P_KINDS], recvd[PLAN_P2P_KINDS];
};

/* one gradient-reduction stream of buckets: dense params over dp, experts over edp */
struct red {
	enum job_group group;
	int64_t total;          /* elements one reduction pass covers (ZeRO-1/2's flat group) */
	int64_t done;           /* of which reduced so far in this pass */
	int64_t pending;        /* elements waiting for a bucket */
	int64_t tensors;        /* parameter tensors they belong to (ZeRO-3) */
	int64_t n;              /* group size */
};

struct pb {
	const struct job *j;
	const struct model *m;
	const struct strategy *s;
	struct plan *p;
	struct tw_err *err;
	int64_t rank;
	struct job_coord c;

	/* degrees and sizes */
	int64_t tp, pp, dp, cp, ep, vp, nmicro, mb, seq, T; /* T: tokens per micro-batch here */
	int64_t etp; /* the experts' tensor-parallel degree (strategy expert_tp) */
	/* DeepEP (moe_dispatcher deepep, the expert group over several nodes): a routed token's
	 * expected nodes (its own included) and expert ranks, what its two stages send per token;
	 * 0: one all-to-all over the expert group */
	double ep_nodes, ep_ranks;
	int64_t h, heads, kvh, hd, qd, kvd, f, V, E, topk, fe, fs, El;
	int64_t vd, kvdv;       /* a value head's width and all of them (MLA: v_head_dim; else hd) */
	bool swiglu, sp, ulysses, flash, rope, lora, ds, megatron, fsdp;
	bool eager;             /* eager PyTorch memory-bound ops (strategy kernels) */
	bool eager_norm;        /* eager and RMSNorm: the composite norm with fp32 passes */
	int ab;                 /* activation bytes per element (16-bit: 2) */
	int pbytes;             /* parameter bytes per element */
	int gbytes;             /* gradient accumulation bytes per element */
	int obytes;             /* optimizer-state bytes per trainable parameter */
	bool mixed;             /* 16-bit params with fp32 master weights */
	enum tw_dtype pdt, gemm_dt, comm_dt;
	enum tw_dtype mm_dt;    /* what matmuls run in: pdt, or TF32 for fp32 with tf32 */
	enum shard_mode shard;
	int64_t nz;             /* partition count of sharded states */
	enum job_group zgroup;  /* the group ZeRO/FSDP shards over */
	enum job_group dgroup;  /* dense gradient reduction group */

	/* layers of each model chunk on this stage */
	int64_t first[MAX_VP], nl[MAX_VP];
	int64_t nlayers;        /* layers on this stage (all chunks) */

	/* tags of the next op */
	uint8_t phase, flags;
	int32_t layer, micro, stage;

	/* last op per stream the next compute op must wait for */
	uint32_t wait[PLAN_NUM_STREAMS];
	uint32_t last_compute;

	int64_t coll_seq[JOB_NUM_GROUPS];
	struct p2p_ctr peers[8];
	int npeers;

	struct buf_info *bufs;
	size_t bufs_cap;

	/* ZeRO-3 / FSDP: modules are 0 = embedding, 1..L = layers, L+1 = head */
	int32_t *gbuf;          /* gathered buffer of a module, -1: not gathered */
	uint32_t *gop;          /* its all-gather */
	bool *gcopied;          /* FSDP2: its gathered parameters copied out since the gather */
	bool *keep_fwd;         /* kept gathered from forward to its next use (reuse distance) */
	bool *keep_rc;          /* kept gathered from a full recompute to backward (likewise) */
	bool keep_tied[2];      /* ZeRO-3, tied embeddings: the embedding kept after the head's
				 * forward, backward (the head's GEMM uses its weight) */
	int32_t *sbuf;          /* DeepSpeed hpZ: a module's secondary partition, -1: none yet */
	int64_t upl;            /* gathering units per layer: 4 DeepSpeed (leaf modules), 1 FSDP */
	int64_t head_uid, nunits;
	int64_t u_lo, u_hi;     /* units of the chunk being run */
	int32_t ugrad;          /* full grads of the unit in backward */
	int64_t live_gathered;  /* elements */
	int64_t persist_elems;  /* parameters kept whole (persistence threshold) */

	/* saved activations per (micro, layer of stage) */
	int32_t *act, *ckpt;

	/* gradient reduction */
	struct red dense, expert;
	int32_t bucket_buf;     /* IPG buffers of the current backward */
	int32_t grads_full;     /* ZeRO-1: full 16-bit grads during the accumulation */
	int32_t grads_part;     /* ZeRO-2: grads_in_partition of the current backward */
	/* buffers that live from a layer's first piece to its last (enum lpiece): the
	 * forward's activations of a recomputed layer; the backward's workspace and recomputed
	 * outputs */
	int32_t fwd_tmp, bwd_ws, bwd_rc;
	uint32_t moe_probs;     /* the router's probabilities of the MoE layer in forward */
	bool graph_on;          /* the ops emitted now are a captured CUDA graph's members */
	uint32_t moe_dgrad;     /* delay_wgrad: the experts' last input-grad GEMM in backward */
	int32_t pend_bufs[64];  /* ZeRO-3/FSDP: full grads waiting for their reduce-scatter */
	int npend;
	uint32_t last_red;      /* last gradient collective or copy */
	int64_t psi, psit;      /* parameters on this rank: all, trainable (elements) */
	int64_t psie, psite;    /* of which routed experts when ep > 1 (else 0): their states
				 * shard over the expert data-parallel group, ne ranks */
	int64_t ne;
	int64_t psi_layers;     /* of which in transformer layers */
	uint32_t last_d2h;
	uint32_t tpo_ag;        /* tp_comm_overlap: an SP all-gather the next GEMM overlaps */
	/* DeepSpeed's pipeline: the send an item's result waits for, issued at the next step */
	struct { bool on, grad; int64_t peer, step; } held;
	/* Megatron's overlap_p2p_comm: the receive posted ahead for the next forward (0) and
	 * backward (1) item, PLAN_NONE: none */
	uint32_t ahead[2];
	uint32_t before_gemm;   /* the compute op before the latest GEMM */
	uint32_t *pg_op;        /* Megatron overlap_param_gather: the all-gather of each layer of
				 * this stage (by act_index layer slot), PLAN_NONE once waited on */
};

/* ---- op emission ------------------------------------------------------------------------ */

static uint32_t emit(struct pb *b, enum plan_kind k, enum plan_stream st, const char *name,
		     const uint32_t *deps, int nd, bool consume_waits)
{
	uint32_t d[PLAN_NUM_STREAMS + 8];
	int n = 0;
	for (int i = 0; i < nd && n < 8; i++)
		d[n++] = deps[i];
	if (consume_waits && st == PLAN_STREAM_COMPUTE) {
		for (int i = 0; i < PLAN_NUM_STREAMS; i++) {
			if (b->wait[i] != PLAN_NONE)
				d[n++] = b->wait[i];
			b->wait[i] = PLAN_NONE;
		}
	}
	struct plan_op *op = plan_push(b->p, k, st, name, d, n);
	op->phase = b->phase;
	op->flags = b->flags;
	op->layer = b->layer;
	op->micro = b->micro;
	op->stage = b->stage;
	if (b->graph_on)
		op->graph = PLAN_GRAPH_MEMBER;
	if (st == PLAN_STREAM_COMPUTE && k == PLAN_COMPUTE)
		b->last_compute = op->id;
	return op->id;
}

static void wait_on(struct pb *b, uint32_t id)
{
	if (id != PLAN_NONE)
		b->wait[b->p->ops[id].stream] = id;
}

static uint32_t compute_d(struct pb *b, enum plan_kernel kern, const char *name, double flops,
			  double bytes, enum plan_stream st, uint32_t dep)
{
	/* tp_comm_overlap: a GEMM runs alongside the all-gather of its input (userbuffers
	 * pipeline the chunks), what follows it waits for both; any other kernel waits first */
	uint32_t ag = st == PLAN_STREAM_COMPUTE ? b->tpo_ag : PLAN_NONE;
	if (ag != PLAN_NONE) {
		b->tpo_ag = PLAN_NONE;
		if (kern != PLAN_K_GEMM)
			wait_on(b, ag);
	}
	if (st == PLAN_STREAM_COMPUTE && kern == PLAN_K_GEMM)
		b->before_gemm = b->last_compute;
	uint32_t id = emit(b, PLAN_COMPUTE, st, name, &dep, dep == PLAN_NONE ? 0 : 1, true);
	if (ag != PLAN_NONE && kern == PLAN_K_GEMM)
		wait_on(b, ag);
	struct plan_op *op = &b->p->ops[id];
	op->u.compute.kernel = (uint8_t)kern;
	op->u.compute.dtype = (uint8_t)(kern == PLAN_K_OPTIM  ? TW_FP32
					: kern == PLAN_K_ATTN ? b->mm_dt
							       : b->pdt);
	op->u.compute.flops = flops;
	op->u.compute.bytes = bytes;
	b->p->hw_flops += flops;
	return id;
}

static uint32_t compute(struct pb *b, enum plan_kernel kern, const char *name, double flops,
			double bytes, enum plan_stream st)
{
	return compute_d(b, kern, name, flops, bytes, st, PLAN_NONE);
}

static uint32_t elem(struct pb *b, enum plan_kernel kern, const char *name, double bytes)
{
	return compute(b, kern, name, 0, bytes, PLAN_STREAM_COMPUTE);
}

/* A memory-bound op of `extra` + 1 kernels (eager PyTorch ops). */
static uint32_t elem_k(struct pb *b, enum plan_kernel kern, const char *name, double bytes, int extra)
{
	uint32_t id = elem(b, kern, name, bytes);
	b->p->ops[id].u.compute.extra_kernels = (uint8_t)extra;
	return id;
}

/* ---- eager ops (docs/plan.md, "Eager ops"): bytes per element and kernels, counted from HF
 * transformers' Llama modules (torchtitan's are alike), ab = activation bytes, 4 = fp32.
 * RMSNorm: x.to(fp32) (ab + 4), pow (8), mean (4), x * rsqrt(var + eps) (8), .to(dtype)
 * (4 + ab), weight * (2 ab): 8 kernels; no casts in fp32 training. Backward, autograd's
 * nodes: the weight mul (its input grad 2 ab; the weight grad's product and token sum 4 ab),
 * the cast (ab + 4), the rsqrt mul (input grad 8; the rsqrt grad's product and sum 16), mean's
 * expanded grad (4), pow's (2 x self, times the grad: 20), the two grads of the fp32 input
 * summed (12), the cast back (4 + ab): 12 kernels. The fused kernel reads x and writes y
 * (2 ab), backward 3 ab. LayerNorm is one native kernel either way. */
static double norm_elem_bytes(const struct pb *b, bool bwd)
{
	double ab = b->ab, casts = b->ab == 4 ? 0 : 2.0 * (ab + 4.0);
	if (!b->eager_norm)
		return bwd ? 3.0 * ab : 2.0 * ab;
	return bwd ? 6.0 * ab + 60.0 + casts : casts + 20.0 + 2.0 * ab;
}

static int norm_extra_kernels(const struct pb *b, bool bwd)
{
	if (!b->eager_norm)
		return 0;
	return (bwd ? 11 : 7) - (b->ab == 4 ? 2 : 0);
}

/* A norm over n elements; bwd adds `more` bytes (the residual grads it sums, bias grads). */
static uint32_t norm_op(struct pb *b, const char *name, double n, bool bwd, double more)
{
	return elem_k(b, PLAN_K_NORM, name, n * norm_elem_bytes(b, bwd) + more,
		      norm_extra_kernels(b, bwd));
}

/* GEMM batch x (m x k)(k x n). flops_elems: when > 0, the exact m*batch (MoE loads). In the
 * forward pass a model GEMM adds 3x its FLOPs to the model FLOPs (forward + backward). */
static uint32_t gemm(struct pb *b, const char *name, int64_t m, int64_t n, int64_t k,
		     int64_t batch, double exact_mb, bool model)
{
	double mb = exact_mb > 0 ? exact_mb : (double)m * (double)batch;
	double flops = 2.0 * mb * (double)n * (double)k;
	enum tw_dtype dt = model && !(b->flags & PLAN_F_LORA) ? b->gemm_dt : b->mm_dt;
	double bytes = (mb * (double)k + (double)k * (double)n * (double)batch + mb * (double)n) *
		       tw_dtype_bytes(dt);
	uint32_t id = compute(b, PLAN_K_GEMM, name, flops, bytes, PLAN_STREAM_COMPUTE);
	struct plan_op *op = &b->p->ops[id];
	op->u.compute.dtype = (uint8_t)dt;
	op->u.compute.m = m;
	op->u.compute.n = n;
	op->u.compute.k = k;
	op->u.compute.batch = (int32_t)batch;
	if (model && b->phase == PLAN_PHASE_FWD && !(b->flags & (PLAN_F_RECOMPUTE | PLAN_F_LORA)))
		b->p->model_flops += 3.0 * flops;
	return id;
}

/* kernels the fp32 softmax fallback adds to the fused one (float, scale, masked_fill_, half);
 * HF's eager attention adds the scale, the mask add and the cast back (backward: the scale's
 * and the cast's) */
#define TORCH_SOFTMAX_KERNELS 4
#define HF_EAGER_ATTN_KERNELS 3
#define HF_EAGER_ATTN_KERNELS_BWD 2

/* Megatron's unfused attention softmax (FusedScaleMaskSoftmax.is_kernel_available, Megatron-LM
 * 2021-24) runs its CUDA kernel only for 16-bit scores with 16 < s_kv <= 4096, both lengths
 * multiples of 4 and micro-batch x heads per rank a multiple of the kernel's batches per block
 * (4; 8 when s_kv <= 128). Otherwise forward_torch_softmax runs PyTorch ops in fp32: e.g. 16
 * heads at TP 8 with micro-batch 1, or sequences beyond 4096 without flash attention. That is
 * the fused model code's (Megatron's, Megatron-DeepSpeed's); the eager one runs HF's eager
 * attention instead. Returns a PLAN_SOFTMAX_* kind. */
static int torch_softmax(const struct pb *b, int64_t heads, int64_t sq, int64_t skv)
{
	if (b->flash)
		return PLAN_SOFTMAX_FUSED;
	if (b->eager) /* HF's eager attention (the model code without flash attention) */
		return PLAN_SOFTMAX_HF_EAGER;
	if (!b->mixed)
		return PLAN_SOFTMAX_FUSED;
	int64_t batches = b->mb * heads, per_block = skv <= 128 ? 8 : 4;
	return skv > 16 && skv <= 4096 && sq % 4 == 0 && skv % 4 == 0 && batches % per_block == 0
		       ? PLAN_SOFTMAX_FUSED
		       : PLAN_SOFTMAX_FALLBACK;
}

/* Keys per tile of the flash attention kernels (FlashAttention-2 and -3 and cuDNN's fused
 * attention at head dims up to 128: 128-wide K/V blocks) */
#define ATTN_KEY_BLOCK 128

/* Fused attention. Forward: 2*b*heads*s_q*s_kv*(d_qk + d_v) FLOPs (QK^T and AV; MLA's value
 * heads are narrower than its query-key heads), halved when causal. Backward: 2x forward,
 * and 2.5x with flash attention (it recomputes QK^T). A sliding window keeps its share of the
 * sequence's pairs (model_attn_frac; with context parallelism only Ulysses, which keeps whole
 * sequences, runs windows: core/strategy.c): flash kernels skip the blocks outside it,
 * unfused attention computes the whole score matrix and masks it (sim/compute.c). */
static uint32_t attn(struct pb *b, const char *name, int64_t heads, int64_t sq, int64_t skv,
		     bool bwd)
{
	double all = 2.0 * (double)b->mb * (double)heads * (double)sq * (double)skv *
		     (double)(b->hd + b->vd);
	double fwd = all * model_attn_frac(b->m, b->layer, b->seq);
	double run = b->flash ? fwd : all * 0.5;
	/* a flash kernel computes whole tiles: a block of ATTN_KEY_BLOCK queries spans its window
	 * and one key block more (128 GPT-OSS tokens cost 256); the causal diagonal's half-used
	 * tiles, ATTN_KEY_BLOCK / 2s of the s x s pairs, are left out */
	const struct model *m = b->m;
	if (b->flash && m->sliding_window > 0 && model_layer_local(m, b->layer))
		run = all * model_window_frac(b->seq, m->sliding_window + ATTN_KEY_BLOCK);
	double flops = bwd ? run * (b->flash ? 2.5 : 2.0) : run;
	double bytes = (double)b->mb * (double)heads * (double)(b->hd + b->vd) *
		       ((double)sq + (double)skv) * b->ab * (bwd ? 2.0 : 1.0);
	uint32_t id = compute(b, PLAN_K_ATTN, name, flops, bytes, PLAN_STREAM_COMPUTE);
	struct plan_op *op = &b->p->ops[id];
	op->u.compute.b = b->mb;
	op->u.compute.heads = heads;
	op->u.compute.s_q = sq;
	op->u.compute.s_kv = skv;
	op->u.compute.head_dim = b->hd;
	op->u.compute.head_dim_v = b->vd;
	op->u.compute.causal = 1;
	op->u.compute.torch_softmax = (uint8_t)torch_softmax(b, heads, sq, skv);
	if (op->u.compute.torch_softmax == PLAN_SOFTMAX_FALLBACK)
		op->u.compute.extra_kernels = TORCH_SOFTMAX_KERNELS;
	else if (op->u.compute.torch_softmax == PLAN_SOFTMAX_HF_EAGER)
		op->u.compute.extra_kernels = bwd ? HF_EAGER_ATTN_KERNELS_BWD : HF_EAGER_ATTN_KERNELS;
	if (!bwd && b->phase == PLAN_PHASE_FWD && !(b->flags & PLAN_F_RECOMPUTE))
		b->p->model_flops += 3.0 * fwd;
	return id;
}

static uint32_t coll(struct pb *b, enum plan_coll c, enum job_group g, enum plan_stream st,
		     const char *name, int64_t count, enum tw_dtype dt, uint32_t dep)
{
	if (count <= 0 || job_group_size(b->j, g) <= 1)
		return PLAN_NONE;
	uint32_t id = emit(b, PLAN_COLL, st, name, &dep, dep == PLAN_NONE ? 0 : 1,
			   st == PLAN_STREAM_COMPUTE);
	struct plan_op *op = &b->p->ops[id];
	op->u.coll.coll = (uint8_t)c;
	op->u.coll.group = (uint8_t)g;
	op->u.coll.dtype = (uint8_t)dt;
	op->u.coll.root = 0;
	op->u.coll.count = count;
	op->u.coll.bytes = count * tw_dtype_bytes(dt);
	op->u.coll.seq = b->coll_seq[g]++;
	return id;
}

/* A collective on the critical path through NCCL: after the last kernel, before the next. */
static void coll_wait(struct pb *b, enum plan_coll c, enum job_group g, const char *name,
		      int64_t count)
{
	wait_on(b, coll(b, c, g, PLAN_STREAM_COMM_TP, name, count, b->pdt, b->last_compute));
}

/* A TP/SP/CP/EP collective on the critical path: after the last kernel, before the next. */
static void coll_tp(struct pb *b, enum plan_coll c, enum job_group g, const char *name,
		    int64_t count)
{
	bool tpo = b->megatron && b->sp && b->s->tp_comm_overlap && g == JOB_GROUP_TP;
	if (tpo && c == PLAN_ALL_GATHER) {
		/* Megatron-Core --tp-comm-overlap: the next GEMM consumes the gathered chunks as
		 * they arrive */
		wait_on(b, b->tpo_ag); /* a gather nothing overlapped yet */
		b->tpo_ag = coll(b, c, g, PLAN_STREAM_COMM_TP, name, count, b->pdt, b->last_compute);
		if (b->tpo_ag != PLAN_NONE) /* through userbuffers, not NCCL */
			b->p->ops[b->tpo_ag].flags |= PLAN_F_USERBUF;
		return;
	}
	if (!tpo) {
		coll_wait(b, c, g, name, count);
		return;
	}
	uint32_t dep = b->last_compute;
	if (c == PLAN_REDUCE_SCATTER && dep != PLAN_NONE &&
	    b->p->ops[dep].u.compute.kernel == PLAN_K_GEMM)
		dep = b->before_gemm; /* reduce-scatters the GEMM's chunks as they are produced */
	uint32_t id = coll(b, c, g, PLAN_STREAM_COMM_TP, name, count, b->pdt, dep);
	if (c == PLAN_REDUCE_SCATTER && id != PLAN_NONE)
		b->p->ops[id].flags |= PLAN_F_USERBUF;
	wait_on(b, id);
}

static struct p2p_ctr *peer_ctr(struct pb *b, int64_t peer)
{
	for (int i = 0; i < b->npeers; i++)
		if (b->peers[i].peer == peer)
			return &b->peers[i];
	struct p2p_ctr *c = &b->peers[b->npeers < 7 ? b->npeers++ : 7];
	memset(c, 0, sizeof(*c));
	c->peer = peer;
	return c;
}

/* A send or receive on the P2P stream. A receive holds the stream until its transfer is done,
 * unless it is posted ahead (Megatron's overlap_p2p_comm: a separate irecv); so does a
 * DeepSpeed send. */
static uint32_t p2p_op(struct pb *b, bool send, int64_t peer, int kind, int64_t bytes,
		       const char *name, bool ahead)
{
	/* DeepSpeed's pipeline engine calls blocking p2p.send / recv, which start when the
	 * compute stream gets there (PyTorch makes the NCCL stream wait for it); Megatron posts
	 * its receives ahead, and ring attention's KV exchange is batched isend/irecv */
	bool blocking = b->ds && kind != PLAN_P2P_KV;
	uint32_t dep = send || blocking ? b->last_compute : PLAN_NONE;
	uint32_t id = emit(b, PLAN_P2P, PLAN_STREAM_P2P, name, &dep, dep == PLAN_NONE ? 0 : 1,
			   false);
	struct p2p_ctr *c = peer_ctr(b, peer);
	int64_t idx = send ? c->sent[kind]++ : c->recvd[kind]++;
	struct plan_op *op = &b->p->ops[id];
	op->flags |= send ? PLAN_F_SEND | (blocking ? PLAN_F_BLOCKING : 0)
			  : ahead ? 0 : PLAN_F_BLOCKING;
	op->u.p2p.peer = peer;
	op->u.p2p.bytes = bytes;
	op->u.p2p.seq = idx * PLAN_P2P_KINDS + kind;
	return id;
}

static uint32_t p2p(struct pb *b, bool send, int64_t peer, int kind, int64_t bytes,
		    const char *name)
{
	uint32_t id = p2p_op(b, send, peer, kind, bytes, name, false);
	/* a receive gates the compute that uses it; DeepSpeed's pipeline engine also blocks on
	 * its sends (p2p.send with async_op=False: the compute stream waits for the transfer,
	 * hence for the peer's matching recv; reference/deepspeed.md §5) */
	if (!send || b->ds)
		wait_on(b, id);
	return id;
}

/* A copy on stream st (copy() picks the copy stream of its direction) */
static uint32_t copy_on(struct pb *b, enum plan_copy dir, enum plan_stream st, const char *name,
			int64_t bytes, uint32_t dep)
{
	if (bytes <= 0)
		return PLAN_NONE;
	if (dep == PLAN_NONE) /* issued where the compute stream has got to, not ahead of it */
		dep = b->last_compute;
	uint32_t id = emit(b, PLAN_COPY, st, name, &dep, dep == PLAN_NONE ? 0 : 1, false);
	b->p->ops[id].u.copy.dir = (uint8_t)dir;
	b->p->ops[id].u.copy.bytes = bytes;
	return id;
}

static uint32_t copy(struct pb *b, enum plan_copy dir, const char *name, int64_t bytes,
		     uint32_t dep)
{
	return copy_on(b, dir,
		       dir == PLAN_H2D || dir == PLAN_NVME_READ ? PLAN_STREAM_COPY_IN
								  : PLAN_STREAM_COPY_OUT,
		       name, bytes, dep);
}

static int32_t mem_alloc(struct pb *b, enum plan_mem_cat cat, enum plan_device dev, int64_t bytes,
			 const char *name, enum plan_stream st)
{
	if (bytes <= 0)
		return -1;
	/* a side stream allocates when the compute stream reaches this point (ZeRO-3 fetches
	 * are driven by the module hooks), so a walk in time order cannot run ahead */
	uint32_t dep = st == PLAN_STREAM_COMPUTE ? PLAN_NONE : b->last_compute;
	uint32_t id = emit(b, PLAN_ALLOC, st, name, &dep, dep == PLAN_NONE ? 0 : 1, false);
	int32_t buf = b->p->nbufs++;
	TW_GROW(b->bufs, b->bufs_cap, (size_t)buf + 1);
	b->bufs[buf] = (struct buf_info){bytes, (uint8_t)cat, (uint8_t)dev};
	struct plan_op *op = &b->p->ops[id];
	op->u.mem.cat = (uint8_t)cat;
	op->u.mem.dev = (uint8_t)dev;
	op->u.mem.buf = buf;
	op->u.mem.bytes = bytes;
	return buf;
}

static void mem_free(struct pb *b, int32_t buf, const char *name, enum plan_stream st)
{
	if (buf < 0)
		return;
	uint32_t id = emit(b, PLAN_FREE, st, name, NULL, 0, false);
	struct plan_op *op = &b->p->ops[id];
	op->u.mem.cat = b->bufs[buf].cat;
	op->u.mem.dev = b->bufs[buf].dev;
	op->u.mem.buf = buf;
	op->u.mem.bytes = b->bufs[buf].bytes;
}

/* ---- model shapes (elements on this rank, after TP/EP division) --------------------------- */

static int64_t mlp_w(const struct pb *b, int64_t f)
{
	const struct model *m = b->m;
	int64_t w = b->h * f * (b->swiglu ? 3 : 2);
	if (m->mlp_bias)
		w += f * (b->swiglu ? 2 : 1) + b->h;
	return w;
}

/* Width of the attention output that out_proj reads: heads x head_dim, MLA's heads x v_head_dim */
static int64_t attn_out_w(const struct pb *b)
{
	return b->heads * b->vd;
}

/* MLA's down projections to the q and kv latents and the latents' norms: duplicated on every
 * TP rank (Megatron-Core's MLASelfAttention), not split */
static int64_t mla_down_w(const struct pb *b)
{
	const struct model *m = b->m;
	if (m->kv_lora_rank <= 0)
		return 0;
	int64_t q = m->q_lora_rank > 0 ? (b->h + 1) * m->q_lora_rank : 0;
	return q + b->h * (m->kv_lora_rank + m->qk_rope_head_dim) + m->kv_lora_rank;
}

static int64_t attn_w(const struct pb *b)
{
	const struct model *m = b->m;
	int64_t w;
	if (m->kv_lora_rank > 0) { /* MLA */
		int64_t qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
		int64_t v = m->v_head_dim > 0 ? m->v_head_dim : qk;
		w = m->q_lora_rank > 0 ? b->h * m->q_lora_rank + m->q_lora_rank * b->heads * qk
				       : b->h * b->heads * qk;
		w += b->h * (m->kv_lora_rank + m->qk_rope_head_dim) +
		     m->kv_lora_rank * b->heads * (m->qk_nope_head_dim + v) + b->heads * v * b->h;
		w += (m->q_lora_rank > 0 ? m->q_lora_rank : 0) + m->kv_lora_rank; /* latent norms */
	} else {
		w = b->h * b->qd + 2 * b->h * b->kvd + b->qd * b->h;
	}
	if (m->qkv_bias)
		w += b->qd + 2 * b->kvd;
	if (m->out_bias)
		w += b->h;
	return w;
}

/* Attention weights on one TP rank: split by TP but for MLA's duplicated down projections */
static int64_t attn_w_rank(const struct pb *b)
{
	int64_t d = mla_down_w(b);
	return d + (attn_w(b) - d) / b->tp;
}

/* the model's rule, which its parameter count uses too */
static bool layer_moe(const struct pb *b, int64_t l)
{
	return model_layer_is_moe(b->m, l);
}

static int64_t norm_w(const struct pb *b) { return b->h * (b->m->norm_bias ? 2 : 1); }

/* Weights of layer l on this rank: dense part (reduced over dp) and experts (over edp). */
static void layer_params(const struct pb *b, int64_t l, int64_t *dense, int64_t *expert)
{
	const struct model *m = b->m;
	int64_t npl = m->norms_per_layer > 0 ? m->norms_per_layer : 2;
	int64_t d = attn_w_rank(b) + npl * norm_w(b), e = 0;
	if (layer_moe(b, l)) {
		d += b->E * b->h; /* router, replicated */
		if (b->fs > 0)
			d += mlp_w(b, b->fs) / b->tp + (m->shared_expert_gate ? b->h : 0);
		e = b->El * mlp_w(b, b->fe) / b->etp;
	} else {
		d += mlp_w(b, b->f) / b->tp;
	}
	*dense = d;
	*expert = e;
}

/* LoRA adapter parameters of one layer: r x (in + out) per target module. */
static int64_t lora_params(const struct pb *b, int64_t l)
{
	unsigned t = b->s->lora_targets;
	int64_t r = b->s->lora_rank, h = b->h, n = 0;
	if (t & STRAT_LORA_Q)
		n += r * (h + b->qd);
	if (t & STRAT_LORA_K)
		n += r * (h + b->kvd);
	if (t & STRAT_LORA_V)
		n += r * (h + b->kvd);
	if (t & STRAT_LORA_O)
		n += r * (b->qd + h);
	int64_t f = layer_moe(b, l) ? b->fs : b->f;
	if (t & STRAT_LORA_GATE && b->swiglu)
		n += r * (h + f);
	if (t & STRAT_LORA_UP)
		n += r * (h + f);
	if (t & STRAT_LORA_DOWN)
		n += r * (f + h);
	return n;
}

/* Width of the token embedding and the logits' input: OPT-350m embeds in word_embed_proj_dim
 * and projects in (project_in, after the lookup) and out (project_out, before the head) */
static int64_t emb_w(const struct pb *b)
{
	return b->m->proj_dim > 0 ? b->m->proj_dim : b->h;
}

static int64_t embed_params(const struct pb *b)
{
	const struct model *m = b->m;
	int64_t n = b->V * emb_w(b) / b->tp;
	if (m->pos == MODEL_POS_LEARNED)
		n += m->max_pos * b->h;
	if (m->proj_dim > 0)
		n += m->proj_dim * b->h; /* project_in, no bias */
	if (m->embed_norm)
		n += norm_w(b);
	return n;
}

static int64_t head_params(const struct pb *b)
{
	const struct model *m = b->m;
	int64_t n = m->tied_embeddings && b->pp == 1 ? 0 : b->V * emb_w(b) / b->tp;
	if (m->proj_dim > 0)
		n += m->proj_dim * b->h; /* project_out */
	return n + (m->no_final_norm ? 0 : norm_w(b));
}

/* Gathering units (ZeRO-3 fetches leaf modules, FSDP wrapped blocks): uid 0 is the
 * embedding, 1 + l * upl + u is unit u of layer l, head_uid the final norm and lm_head.
 * DeepSpeed's units per layer: 0 norm1 + qkv, 1 out-proj + norm2, 2 fc1 (MoE: router,
 * experts, shared experts), 3 fc2. */
static int64_t npl_of(const struct pb *b)
{
	return b->m->norms_per_layer > 0 ? b->m->norms_per_layer : 2;
}

static void unit_split(const struct pb *b, int64_t uid, int64_t *dense, int64_t *expert)
{
	*expert = 0;
	if (uid == 0) {
		*dense = embed_params(b);
		return;
	}
	if (uid == b->head_uid) {
		*dense = head_params(b);
		return;
	}
	int64_t l = (uid - 1) / b->upl, u = (uid - 1) % b->upl, d, e;
	layer_params(b, l, &d, &e);
	if (b->upl == 1) {
		*dense = d, *expert = e;
		return;
	}
	int64_t ow = attn_out_w(b) * b->h / b->tp;
	int64_t o = ow + (npl_of(b) >= 2 ? norm_w(b) : 0);
	int64_t qkv = attn_w_rank(b) - ow + norm_w(b);
	int64_t fc2 = layer_moe(b, l) ? 0 : b->f * b->h / b->tp;
	switch (u) {
	case 0:
		*dense = qkv;
		break;
	case 1:
		*dense = o;
		break;
	case 2:
		*dense = d - qkv - o - fc2, *expert = e;
		break;
	default:
		*dense = fc2;
	}
}

static int64_t unit_params(const struct pb *b, int64_t uid)
{
	int64_t d, e;
	unit_split(b, uid, &d, &e);
	return d + e;
}

static int64_t unit_trainable(const struct pb *b, int64_t uid)
{
	if (!b->lora)
		return unit_params(b, uid);
	if (uid == 0 || uid == b->head_uid)
		return 0;
	int64_t l = (uid - 1) / b->upl, u = (uid - 1) % b->upl;
	if (b->upl == 1)
		return lora_params(b, l);
	static const unsigned mask[4] = {STRAT_LORA_Q | STRAT_LORA_K | STRAT_LORA_V, STRAT_LORA_O,
					 STRAT_LORA_GATE | STRAT_LORA_UP, STRAT_LORA_DOWN};
	struct pb c = *b;
	struct strategy s = *b->s;
	s.lora_targets &= mask[u];
	c.s = &s;
	return lora_params(&c, l);
}

/* Whether the model code keeps q, k, v and gate, up as separate Linears: HF's Llama-family
 * modules (RMSNorm and RoPE: Llama, Mistral, Qwen2, Gemma; torchtitan's too) do; Megatron's
 * code and HF's GPT-2, Falcon and GPT-NeoX fuse them; MLA has its own projections. */
static bool sep_proj(const struct pb *b)
{
	return b->eager && b->m->norm == MODEL_NORM_RMSNORM && b->m->pos == MODEL_POS_ROPE &&
	       b->m->kv_lora_rank == 0;
}

/* Trainable parameter tensors of a unit: what DeepSpeed's per-tensor Python loops walk over.
 * The model code decides the split: HF modules keep q, k, v and gate, up as separate Linears,
 * Megatron fuses them (one QKV, one fc1); a bias or a LayerNorm bias is a tensor of its own;
 * a routed expert is its own MLP. LoRA: the A and B matrices of each targeted module. */
static int64_t unit_tensors(const struct pb *b, int64_t uid, bool gathered)
{
	const struct model *m = b->m;
	int64_t nw = m->norm_bias ? 2 : 1, npl = npl_of(b);
	/* gathered: without the tensors ZeRO-3 keeps whole (numel <= the persistence
	 * threshold): norms and biases of hidden size, in real models */
	int64_t thr = gathered ? b->s->param_persistence_threshold : -1;
	int64_t bias = b->h > thr ? 2 : 1;
	if (b->h <= thr)
		nw = 0;
	if (b->lora) {
		if (uid == 0 || uid == b->head_uid)
			return 0;
		static const unsigned mask[4] = {STRAT_LORA_Q | STRAT_LORA_K | STRAT_LORA_V,
						 STRAT_LORA_O, STRAT_LORA_GATE | STRAT_LORA_UP,
						 STRAT_LORA_DOWN};
		unsigned t = b->s->lora_targets & (b->upl == 1 ? ~0u : mask[(uid - 1) % b->upl]);
		int64_t n = 0;
		for (; t; t &= t - 1)
			n += 2;
		return n;
	}
	int64_t proj = m->proj_dim > 0; /* project_in / project_out, one weight each */
	if (uid == 0)
		return 1 + (m->pos == MODEL_POS_LEARNED) + (m->embed_norm ? nw : 0) + proj;
	if (uid == b->head_uid)
		return (m->no_final_norm ? 0 : nw) + (m->tied_embeddings && b->pp == 1 ? 0 : 1) + proj;
	int64_t l = (uid - 1) / b->upl, u = b->upl == 1 ? -1 : (uid - 1) % b->upl;
	int64_t wb_mlp = m->mlp_bias ? bias : 1;
	int64_t qkv = m->kv_lora_rank > 0 ? (m->q_lora_rank > 0 ? 3 : 1) + 3 /* MLA */
		      : (sep_proj(b) ? 3 : 1) * (m->qkv_bias ? bias : 1);
	int64_t attn_in = nw + qkv, attn_out = (m->out_bias ? bias : 1) + (npl >= 2 ? nw : 0);
	int64_t fc1 = (b->swiglu && sep_proj(b) ? 2 : 1) * wb_mlp, fc2 = wb_mlp, mlp;
	if (layer_moe(b, l)) {
		/* router + each local expert's MLP + the shared experts' */
		mlp = 1 + b->El * (fc1 + fc2) + (b->fs > 0 ? fc1 + fc2 : 0);
		fc2 = 0;
	} else {
		mlp = fc1;
	}
	switch (u) {
	case 0: return attn_in;
	case 1: return attn_out;
	case 2: return mlp;
	case 3: return fc2;
	default: return attn_in + attn_out + mlp + fc2;
	}
}

/* Parameters of a unit that stay whole (ZeRO-3 persistence threshold: the norms). */
static int64_t unit_persistent(const struct pb *b, int64_t uid)
{
	/* DeepSpeed keeps whole every parameter tensor of at most
	 * stage3_param_persistence_threshold elements (ds_numel <= threshold): in real models the
	 * norms' weights and biases and the linear layers' biases (per rank with TP) */
	if (b->s->framework != STRAT_DEEPSPEED || uid == 0)
		return 0;
	const struct model *m = b->m;
	int64_t thr = b->s->param_persistence_threshold, h = b->h, tp = b->tp;
	int64_t norm = h <= thr ? norm_w(b) : 0;
	if (uid == b->head_uid)
		return m->no_final_norm ? 0 : norm;
	int64_t l = (uid - 1) / b->upl, u = b->upl == 1 ? -1 : (uid - 1) % b->upl;
	/* biases: q, k, v apart in HF's Llama-family modules, else one fused QKV */
	int64_t qkv_b = 0, out_b = m->out_bias && h <= thr ? h : 0, fc1_b = 0, fc2_b = 0;
	if (m->qkv_bias && m->kv_lora_rank == 0) {
		int64_t q = b->qd / tp, kv = b->kvd / tp;
		if (sep_proj(b))
			qkv_b = (q <= thr ? q : 0) + 2 * (kv <= thr ? kv : 0);
		else
			qkv_b = q + 2 * kv <= thr ? q + 2 * kv : 0;
	}
	if (m->mlp_bias && !layer_moe(b, l)) {
		int64_t f = b->f / tp, wide = b->swiglu ? 2 : 1;
		fc1_b = b->swiglu && sep_proj(b) ? (f <= thr ? 2 * f : 0)
						 : (wide * f <= thr ? wide * f : 0);
		fc2_b = h <= thr ? h : 0;
	}
	int64_t n1 = norm + qkv_b, n2 = out_b + (npl_of(b) >= 2 ? norm : 0);
	switch (u) {
	case 0: return n1;
	case 1: return n2;
	case 2: return fc1_b;
	case 3: return fc2_b;
	default: return n1 + n2 + fc1_b + fc2_b;
	}
}

/* ---- activations (Korthikanti et al. 2022, generalised; docs/memory.md) ------------------- */

/* torchtitan's selective op AC (recompute "op"; dense layers, tp 1): the checkpointed layer
 * keeps the outputs of every other matmul in forward order (the 1st, 3rd, ...) and of flash
 * attention, and recomputes the rest. The matmuls follow the model code: HF / torchtitan
 * modules call q, k, v, o, gate, up, down (w1, w3, w2) or fc1, fc2 one by one; Megatron's
 * code fuses QKV and gate+up. Output widths per token. */
static int op_sac_mms(const struct pb *b, int64_t w[8], const char *names[8])
{
	int n = 0;
	int64_t wide = b->swiglu ? 2 : 1;
#define MM(name_, width_) (names[n] = (name_), w[n++] = (width_))
	if (sep_proj(b)) {
		MM("q_proj", b->qd), MM("k_proj", b->kvd), MM("v_proj", b->kvd), MM("out_proj", b->h);
		if (b->swiglu)
			MM("gate_proj", b->f), MM("up_proj", b->f);
		else
			MM("fc1", b->f);
	} else {
		MM("qkv", b->qd + 2 * b->kvd), MM("out_proj", b->h), MM("fc1", wide * b->f);
	}
	MM("fc2", b->h);
#undef MM
	return n;
}

/* Bytes the op policy keeps per layer: its input (the checkpoint's), the saved matmul outputs
 * and, with flash attention, the attention output and its fp32 log-sum-exp. */
static int64_t op_sac_saved(const struct pb *b)
{
	int64_t w[8], T = b->T, ab = b->ab, kept = b->h;
	const char *names[8];
	int n = op_sac_mms(b, w, names);
	for (int i = 0; i < n; i += 2)
		kept += w[i];
	int64_t s = T * kept * ab;
	if (b->flash)
		s += T * attn_out_w(b) * ab + T * b->heads * 4;
	return s;
}

/* Megatron-Core's MoE layer on sequence-parallel tokens (its rule: SP whenever TP and EP meet):
 * the token dispatcher gathers and reduce-scatters over TP itself, so the block has no SP
 * gather / reduce-scatter of its own around the routed experts. */
static bool moe_dispatch_sp(const struct pb *b)
{
	return b->megatron && b->sp && b->tp > 1;
}

/* DeepSpeed's MoE layer (deepspeed/moe/sharded_moe.py, Megatron-DeepSpeed's MoE; HF's eager
 * blocks have their own): the gate builds fp32 combine weights over (token, expert, capacity
 * slot) and the layer moves tokens with dense einsums over them, "sec,sm->ecm" to dispatch and
 * "sec,ecm->sm" to combine, GEMMs of 2 S x EC x h FLOPs (S tokens, EC = E experts x their
 * capacity, ds_capacity) instead of permutations. */
static bool ds_einsum(const struct pb *b)
{
	return b->ds && !b->eager;
}

/* DeepSpeed's MoE layer's capacity of each expert, in tokens (sharded_moe.py, _capacity and the
 * gates' drop_tokens branch): ceil(S k x / E) of the S tokens a rank routes with x the capacity
 * factor (1 by default), at least min_capacity; without dropping, the busiest expert's count
 * (moe_load_imbalance times the mean), at most S */
static double ds_capacity(const struct pb *b)
{
	double share = (double)b->T * (double)b->topk / (double)b->E;
	double imb = b->s->moe_load_imbalance > 1 ? b->s->moe_load_imbalance : 1.0;
	double cf = b->s->moe_capacity_factor > 0 ? b->s->moe_capacity_factor : 1.0;
	if (b->s->moe_dropless)
		return fmin(ceil(share * imb), (double)b->T);
	return fmax(ceil(share * cf), (double)b->s->moe_min_capacity);
}

/* The busiest expert rank's received tokens over the mean (strategy moe_load_imbalance), at
 * most the experts' capacity when Megatron drops tokens, and the capacity itself when it pads
 * them to it; every rank is costed as that one */
static double moe_imb(const struct pb *b)
{
	double imb = b->s->moe_load_imbalance > 1 ? b->s->moe_load_imbalance : 1.0;
	double cf = b->s->moe_capacity_factor;
	/* DeepSpeed's MoE layer pads every expert to its capacity */
	if (ds_einsum(b))
		return ds_capacity(b) * (double)b->E / ((double)b->T * (double)b->topk);
	if (cf <= 0)
		return imb;
	return b->s->moe_pad_to_capacity ? cf : fmin(imb, cf);
}

/* The copies this rank permutes over the tokens it routes times top-k: Megatron's padding to
 * capacity pads them too (its sends are capacity x experts) */
static double moe_pad(const struct pb *b)
{
	if (ds_einsum(b)) /* its dispatched tensor is experts x capacity slots */
		return moe_imb(b);
	/* below 1 the factor drops tokens even from balanced routing: the copies kept */
	double cf = b->s->moe_capacity_factor;
	if (cf <= 0)
		return 1.0;
	return b->s->moe_pad_to_capacity ? cf : fmin(cf, 1.0);
}

/* DeepSpeed's MoE layer's slots: every expert's capacity */
static int64_t ds_slots(const struct pb *b)
{
	return b->E * (int64_t)ds_capacity(b);
}

/* Megatron's drop-and-pad path: tokens padded to the experts' capacity */
static bool moe_pad_cap(const struct pb *b)
{
	return b->s->moe_capacity_factor > 0 && b->s->moe_pad_to_capacity;
}

/* Megatron-Core's delay_wgrad_compute (with the combined 1F1B): the experts' weight grads
 * apart from their input grads, and computed while the dispatch's backward runs */
static bool delay_wgrad(const struct pb *b)
{
	return b->s->delay_wgrad && !b->lora;
}

/* Megatron-Core's moe_shared_expert_overlap with shared experts to overlap (beside_a2a) */
static bool shared_overlap(const struct pb *b)
{
	return b->s->moe_shared_overlap && b->fs > 0 && b->megatron;
}

struct act_sizes {
	int64_t saved;  /* bytes kept for backward without recompute */
	int64_t input;  /* layer input (full-recompute checkpoint) */
	int64_t work;   /* largest transient tensor of the backward */
	int64_t rc;     /* of saved: what recompute_modules discards in forward and makes again
			 * before the layer's backward (Megatron-Core's selective recompute) */
};

/* Megatron-Core's selective recompute of module m (recompute_modules; core_attn by default) */
static bool rc_mod(const struct pb *b, unsigned m)
{
	unsigned mods = b->s->recompute_modules ? b->s->recompute_modules : STRAT_RC_CORE_ATTN;
	return b->s->recompute == STRAT_RECOMPUTE_SELECTIVE && (mods & m);
}

/* ---- Megatron-Core's per-layer CUDA graphs (cuda_graph_impl, cuda_graph_modules): a captured
 * module's forward, and its backward, is one graph replay. The host copies the module's input
 * (or output grad) into the graph's static buffer and replays the graph (graph_replay: 3
 * framework calls, the Function, copy_ and replay; docs/simulator.md); the module's ops are the
 * graph's members, which the host does not issue. A region ends with each plan piece and
 * resumes with the next, so that another micro-batch's pieces (the combined 1F1B) stay out. */
static bool cg_on(const struct pb *b)
{
	return b->megatron && b->s->cuda_graph_impl != STRAT_CG_NONE;
}

static bool cg_whole(const struct pb *b)
{
	return cg_on(b) && b->s->cuda_graph_modules == 0;
}

/* Whether module m (STRAT_CG_*) is captured: listed, or the whole layer */
static bool cg_module(const struct pb *b, unsigned m)
{
	return cg_on(b) && (b->s->cuda_graph_modules == 0 || (b->s->cuda_graph_modules & m));
}

/* The MLP side of a layer in one graph with the pre-MLP norm: a dense layer's MLP, a MoE block */
static bool cg_mlp(const struct pb *b, bool moe)
{
	return cg_module(b, moe ? STRAT_CG_MOE : STRAT_CG_MLP);
}

/* The router's own graph (moe_router without moe): the pre-MLP norm and the router, and with
 * moe_preprocess the permutation */
static bool cg_router(const struct pb *b, bool moe)
{
	return moe && cg_on(b) && (b->s->cuda_graph_modules & STRAT_CG_MOE_ROUTER);
}

static void graph_begin(struct pb *b, bool bwd)
{
	double x = (double)(b->sp ? b->T / b->tp : b->T) * (double)b->h * b->ab;
	uint32_t id = elem(b, PLAN_K_ELEMWISE, bwd ? "graph_replay_bwd" : "graph_replay", 2 * x);
	b->p->ops[id].graph = PLAN_GRAPH_REPLAY; /* not a member: the op the host issues */
	b->graph_on = true;
}

/* Norms of layer l that are modules of their own, so that selective recompute of "layernorm"
 * applies (Megatron-Core skips the IdentityOp ones): Transformer Engine fuses a dense layer's
 * two norms into the QKV and fc1 linears; an MoE layer's pre-MLP norm stays (the router reads
 * it); eager model code has both. */
static int separate_norms(const struct pb *b, int64_t l)
{
	return b->eager ? 2 : layer_moe(b, l) ? 1 : 0;
}

static struct act_sizes layer_act(const struct pb *b, int64_t l)
{
	struct act_sizes a;
	int64_t T = b->T, h = b->h, ab = b->ab, tp = b->tp;
	/* replicated across TP ranks without SP: two norm inputs, QKV and fc1 inputs, and with
	 * hidden dropout its two masks (1 byte each) = 10 sbh for 16-bit activations */
	/* what a GEMM keeps of its input for the weight grad: Transformer Engine's fp8 GEMMs keep
	 * the fp8 copy they cast (1 byte; linear.py / layernorm_linear.py save the quantized
	 * input, or its transpose, not the 16-bit one) */
	int64_t gb = b->s->fp8_gemm ? 1 : ab;
	int64_t rep = T * h * (2 * ab + 2 * gb + (b->s->hidden_dropout > 0 ? 2 : 0));
	/* split by TP: q, k, v, out-proj input (8 sbh for MHA); q_norm and k_norm keep their
	 * inputs too */
	int64_t split = T * (ab * (b->qd + b->kvd + b->kvdv) + gb * attn_out_w(b));
	if (b->m->qk_norm)
		split += T * ab * (b->qd + b->kvd);
	int64_t mlpw = b->swiglu ? 3 : 2; /* gelu: act in + fc2 in; swiglu: gate, up, fc2 in */
	/* eager ops keep more: an RMSNorm its fp32 copy of the input (pow's and the rsqrt mul's
	 * saved tensor) in place of the input itself, SwiGLU the silu output for the product */
	if (b->eager_norm && ab < 4)
		rep += npl_of(b) * T * h * (4 - ab);
	if (b->eager && b->swiglu)
		mlpw += 1;
	int64_t mlpb = (mlpw - 1) * ab + gb; /* bytes per element of the MLP's width, fc2's input last */
	int64_t work, whole = 0; /* kept whole on every TP rank, with or without SP */
	/* MLA: the latents' norms keep their inputs and the up projections theirs, all tokens'
	 * (gathered under SP) on every TP rank */
	if (b->m->kv_lora_rank > 0)
		whole += T * ab * 2 * (b->m->q_lora_rank + b->m->kv_lora_rank);
	/* what recompute_modules drops: the norms' outputs (replicated like rep), the MLP's,
	 * the experts' activation outputs and the shared experts' (split by TP) */
	int64_t rc_rep = 0, rc_split = 0, rc_whole = 0;
	if (rc_mod(b, STRAT_RC_LAYERNORM))
		rc_rep += separate_norms(b, l) * T * h * ab;
	/* MLA's up projections with RoPE (mla_up_proj): their q, k and v, attention's inputs,
	 * are dropped once attention has run and made again for its backward */
	if (rc_mod(b, STRAT_RC_MLA_UP) && b->m->kv_lora_rank > 0)
		rc_split += T * ab * (b->qd + b->kvd + b->kvdv);
	if (layer_moe(b, l)) {
		/* the token copies the busiest expert rank receives (moe_imb) */
		int64_t Tk = (int64_t)llround((double)(T * b->topk) * moe_imb(b));
		rep += T * b->E * 4;
		/* DeepSpeed's einsums keep their 16-bit mask and combine weights over every
		 * (token, expert, slot): 4 bytes an entry */
		if (ds_einsum(b))
			rep += T * ds_slots(b) * 4;
		/* the experts' input: the permuted token copies; Megatron-Core's dispatcher
		 * all-gathers them over TP, so each TP rank keeps all T x top-k (folded experts:
		 * the T / tp of each of the expert_tp ranks) */
		int64_t xin = Tk * h * gb;
		if (b->etp != tp)
			xin = xin / tp * b->etp;
		if (moe_dispatch_sp(b) || b->etp != tp)
			whole += xin;
		else
			rep += xin;
		split += Tk * mlpb * b->fe + T * mlpb * b->fs;
		work = Tk * (b->swiglu ? 2 : 1) * b->fe * ab;
		if (rc_mod(b, STRAT_RC_MOE)) { /* all of the block but its input */
			bool w = moe_dispatch_sp(b) || b->etp != tp;
			rc_rep += T * b->E * 4 + (w ? 0 : xin);
			rc_whole += w ? xin : 0;
			rc_split += Tk * mlpb * b->fe + T * mlpb * b->fs;
		} else {
			if (rc_mod(b, STRAT_RC_MOE_ACT)) /* the activation's output, fc2's input */
				rc_split += Tk * b->fe * gb;
			if (rc_mod(b, STRAT_RC_SHARED))
				rc_split += T * mlpb * b->fs;
		}
	} else {
		split += T * mlpb * b->f;
		work = T * (b->swiglu ? 2 : 1) * b->f * ab;
		if (rc_mod(b, STRAT_RC_MLP)) /* the MLP keeps its input (the norm's output) */
			rc_split += T * mlpb * b->f;
	}
	/* attention scores: softmax out, dropout mask and output = 5 a s^2 b (2 without attention
	 * dropout: the probabilities are the matmul's input); gone with flash attention and with
	 * selective recompute. PyTorch's fp32 softmax keeps its fp32 output for backward (7 a s^2 b,
	 * 6 without dropout: its 16-bit cast then feeds the matmul) and holds a scaled fp32 copy of
	 * the scores while it runs. */
	int64_t scores = 0, sxs = b->heads * T * (b->ulysses ? b->seq / b->cp * b->cp : b->seq);
	int64_t s_blk = b->ulysses || b->cp == 1 ? b->seq : b->seq / b->cp;
	int sk = torch_softmax(b, b->heads / tp / (b->ulysses ? b->cp : 1), s_blk, s_blk);
	/* HF's eager attention keeps softmax's fp32 output and the 16-bit probabilities (6 a s^2 b;
	 * with dropout the mask and its output instead of the probabilities, 7) and holds the
	 * masked 16-bit scores while the softmax runs */
	int drop = b->s->attention_dropout > 0;
	if (!b->flash && !rc_mod(b, STRAT_RC_CORE_ATTN))
		scores = (sk == PLAN_SOFTMAX_FALLBACK ? 6 + drop
			  : sk == PLAN_SOFTMAX_HF_EAGER ? 6 + drop
							: 2 + 3 * drop) * sxs;
	if (sk == PLAN_SOFTMAX_FALLBACK)
		work += 4 * sxs;
	else if (sk == PLAN_SOFTMAX_HF_EAGER)
		work += ab * sxs;
	/* cp_kind allgather holds the whole sequence's K and V while the core runs, and backward
	 * their grads as well (Transformer Engine's full-length dk, dv before the reduce-scatter) */
	if (b->cp > 1 && b->s->cp_kind == STRAT_CP_ALLGATHER)
		work += 2 * T * b->cp * (b->kvd + b->kvdv) * ab;
	a.rc = (b->sp ? rc_rep / tp : rc_rep) + rc_split / tp + rc_whole;
	if (b->sp)
		a.saved = (rep + split + scores) / tp + whole;
	else
		a.saved = rep + (split + scores) / tp + whole;
	a.saved -= a.rc;
	a.input = T * h * ab;
	if (b->sp || (b->ds && b->s->partition_activations))
		a.input /= tp;
	a.work = work / tp + T * h * ab;
	if (b->s->recompute == STRAT_RECOMPUTE_OP) /* tp 1, dense: the policy's saved tensors */
		a.saved = op_sac_saved(b);
	return a;
}

/* ---- ZeRO-3 / FSDP parameter gathering ------------------------------------------------------ */

/* FSDP2 (fully_shard): per-parameter shards, copied in and out around its collectives */
static bool fsdp2(const struct pb *b)
{
	return b->fsdp && b->s->fsdp_version == 2;
}

/* DeepSpeed before 0.5.5: parameter by parameter, through per-rank list copies */
static bool ds_old_fetch(const struct pb *b)
{
	return b->ds && b->s->ds_fetch_per_param;
}

/* DeepSpeed before 0.6.0: the device synchronized around each fetch and prefetch */
static bool ds_sync_fetch(const struct pb *b)
{
	return b->ds && b->s->ds_fetch_sync;
}

/* DeepSpeed fetches leaf modules, one all-gather each: a unit of separate Linears (q, k, v;
 * gate, up) is several gathers, split as their weights are. Shares of the unit in w. */
static int unit_parts(const struct pb *b, int64_t uid, double w[3])
{
	w[0] = 1;
	if (!b->ds || b->upl == 1 || uid == 0 || uid == b->head_uid || !sep_proj(b))
		return 1;
	int64_t l = (uid - 1) / b->upl, u = (uid - 1) % b->upl;
	if (u == 0) {
		double all = (double)(b->qd + 2 * b->kvd);
		w[0] = (double)b->qd / all, w[1] = w[2] = (double)b->kvd / all;
		return 3;
	}
	if (u == 2 && b->swiglu && !layer_moe(b, l)) {
		w[0] = w[1] = 0.5;
		return 2;
	}
	return 1;
}

/* DeepSpeed zero_quantized_nontrainable_weights with LoRA: the gathered (base) weights are
 * frozen, so their partitions (and hpZ secondaries) are kept as int8 with fp32 scales and
 * gathered as such, quantized once when partitioned */
static bool frozen_int8(const struct pb *b)
{
	return b->ds && b->s->zero_qfrozen && b->lora;
}

/* bytes per element of a parameter partition this rank keeps */
static int part_bytes(const struct pb *b)
{
	return frozen_int8(b) ? 1 : b->pbytes;
}

/* DeepSpeed hpZ: a module released once this step keeps a secondary partition over its hpZ
 * group, and every later gather of it reads that instead (all_gather_coalesced's
 * use_secondary_tensor): all but the first micro-batch's forward */
static bool hpz_gather(const struct pb *b, int64_t mid)
{
	return b->ds && b->s->zero_hpz > 1 && b->sbuf[mid] >= 0;
}

/* coalesced: DeepSpeed gathers several parameters in one call (a prefetch, a module of more than
 * one): its AllGatherCoalescedHandle.wait then slices each parameter out of every rank's chunk
 * in Python (a view per rank and parameter) and torch.cat's them into the parameter (a copy of
 * the module beside the gathered buffer, on the gather's stream) */
static void gather(struct pb *b, int64_t mid, bool coalesced)
{
	if (b->shard != SH_PARAM || b->gbuf[mid] >= 0)
		return;
	int64_t n = unit_params(b, mid) - unit_persistent(b, mid);
	if (n <= 0)
		return;
	b->gbuf[mid] = mem_alloc(b, PLAN_MEM_GATHERED, PLAN_DEV_GPU, n * b->pbytes, "gathered",
				 PLAN_STREAM_COMM);
	bool sec = hpz_gather(b, mid);
	enum job_group g = sec ? JOB_GROUP_HPZ : b->zgroup;
	int64_t nz = sec ? job_group_size(b->j, g) : b->nz;
	/* FSDP with ep > 1: the routed experts' shards come over their data-parallel group */
	int64_t d = 0, ex = 0;
	if (b->ep > 1)
		unit_split(b, mid, &d, &ex);
	int64_t part = (n - ex + nz - 1) / nz, epart = ex > 0 ? (ex + b->ne - 1) / b->ne : 0;
	uint32_t dep = PLAN_NONE;
	if (b->s->offload_param != STRAT_OFFLOAD_NONE) /* partition lives on the host */
		dep = copy(b, PLAN_H2D, "param_h2d", part * part_bytes(b), PLAN_NONE);
	if (fsdp2(b)) /* foreach copy of the shards (cast from the fp32 master) into the input */
		dep = compute_d(b, PLAN_K_ELEMWISE, "ag_copy_in", 0,
				(double)(part + epart) * (double)((b->mixed ? 4 : b->pbytes) + b->pbytes),
				PLAN_STREAM_COMM, dep);
	/* qwZ (CUDAQuantizer): the partitions concatenated, cast to fp16 (bf16 params), and
	 * quantized to int8 with an fp32 scale per group of <= 8,000; one all-gather moves the
	 * int8 values, a second the scales */
	bool qw = b->ds && (b->s->zero_qweights || frozen_int8(b));
	enum tw_dtype dt = b->pdt;
	double cast = b->pdt == TW_BF16 ? b->pbytes + 2.0 : 0; /* to fp16 and back, per element */
	if (qw && frozen_int8(b)) {
		dt = TW_INT8; /* already int8: nothing to quantize */
	} else if (qw) {
		dep = compute_d(b, PLAN_K_ELEMWISE, "quantize_params", 0,
				(double)part * (2.0 * b->pbytes + cast + 3.0), PLAN_STREAM_COMM, dep);
		dt = TW_INT8;
	}
	b->gcopied[mid] = false;
	/* MiCS's handle needs no slicing: its gathers write the parameters in place */
	bool mics = b->ds && b->s->mics_shard > 0;
	coalesced = coalesced && !mics;
	/* MiCS's hierarchical gather: across the shard group's nodes into this rank's slots,
	 * the result placed (a clone and a copy), then within the node */
	bool hier = mics && b->s->mics_hier && !sec;
	int64_t k = hier ? job_group_size(b->j, JOB_GROUP_SHARD_XNODE) : 1;
	/* DeepSpeed < 0.5.5 (_allgather_param; docs/strategy.md, "Old releases"): per parameter,
	 * torch.cuda.synchronize(), a world-size loop of narrow() views in Python and all_gather
	 * into that list, whose C++ side copies every rank's chunk out of a flat buffer;
	 * fetch_sub_module then synchronizes again. A gather stands for a module's parameters;
	 * the GPU zeroes the buffer and copies the chunks (3 passes). */
	bool old = ds_old_fetch(b);
	double w[3];
	int np = unit_parts(b, mid, w);
	int64_t views = old ? 2 * b->nz * (unit_tensors(b, mid, true) / np) : 0, done = 0;
	b->gop[mid] = PLAN_NONE;
	for (int i = 0; i < np; i++) {
		int64_t c = i == np - 1 ? part - done : (int64_t)((double)part * w[i]);
		done += c;
		uint32_t pre = dep;
		if (hier) {
			pre = coll(b, PLAN_ALL_GATHER, JOB_GROUP_SHARD_XNODE, PLAN_STREAM_COMM,
				   "ag_params_xnode", c, dt, dep);
			pre = compute_d(b, PLAN_K_ELEMWISE, "ag_place", 0,
					4.0 * (double)c * (double)k * b->pbytes, PLAN_STREAM_COMM,
					pre != PLAN_NONE ? pre : dep);
		}
		uint32_t id = coll(b, PLAN_ALL_GATHER, hier ? JOB_GROUP_NODE : g, PLAN_STREAM_COMM,
				   "ag_params", c * k, dt, pre);
		if (id == PLAN_NONE)
			continue;
		if (qw) { /* one fp32 scale per 8,000 values */
			uint32_t sc = coll(b, PLAN_ALL_GATHER, g, PLAN_STREAM_COMM, "ag_scales",
					   (c + 7999) / 8000, TW_FP32, dep);
			id = sc != PLAN_NONE ? sc : id;
		}
		b->gop[mid] = id; /* the stream runs them in order: waiting on the last is enough */
		if (ds_sync_fetch(b))
			b->p->ops[id].flags |= PLAN_F_DEVSYNC;
		if (old) {
			b->p->ops[id].host_views = (uint32_t)(views < UINT32_MAX ? views : UINT32_MAX);
		} else if (b->ds && coalesced) {
			int64_t v = nz * (unit_tensors(b, mid, true) / np);
			b->p->ops[id].host_views = (uint32_t)(v < UINT32_MAX ? v : UINT32_MAX);
		}
	}
	if (epart > 0) {
		uint32_t id = coll(b, PLAN_ALL_GATHER, JOB_GROUP_EDP, PLAN_STREAM_COMM, "ag_experts",
				   epart, dt, dep);
		if (id != PLAN_NONE)
			b->gop[mid] = id;
	}
	b->live_gathered += n;
	if (old && b->gop[mid] != PLAN_NONE)
		b->gop[mid] = compute_d(b, PLAN_K_ELEMWISE, "ag_copy_out", 0,
					3.0 * (double)n * (double)b->pbytes, PLAN_STREAM_COMM, b->gop[mid]);
	if (b->ds && b->s->ds_fetch_norm && b->gop[mid] != PLAN_NONE) {
		/* 0.3.15 - 0.5.x: fetch_sub_module builds print_rank_0(f"... norm {param.norm()}")
		 * for every parameter of the module, printed or not: a norm kernel reading it and
		 * the .item() of formatting a CUDA scalar, so the host waits each time */
		int64_t tensors = unit_tensors(b, mid, true);
		uint32_t nm = compute_d(b, PLAN_K_ELEMWISE, "param_norm", 0, (double)n * (double)b->pbytes,
					PLAN_STREAM_COMM, b->gop[mid]);
		b->p->ops[nm].u.compute.extra_kernels = (uint8_t)(tensors > 256 ? 255 : tensors > 1 ? tensors - 1 : 0);
		b->p->ops[nm].flags |= PLAN_F_HOSTWAIT;
		b->gop[mid] = nm;
	}
	if (qw && b->gop[mid] != PLAN_NONE) /* the handle's wait: int8 to fp16 (to bf16) */
		b->gop[mid] = compute_d(b, PLAN_K_ELEMWISE, "dequantize_params", 0,
					(double)n * (3.0 + cast), PLAN_STREAM_COMM, b->gop[mid]);
	if (!old && b->ds && coalesced && b->gop[mid] != PLAN_NONE) {
		int32_t cat = mem_alloc(b, PLAN_MEM_GATHERED, PLAN_DEV_GPU, n * b->pbytes, "ag_cat",
					PLAN_STREAM_COMM);
		b->gop[mid] = compute_d(b, PLAN_K_ELEMWISE, "ag_cat", 0,
					2.0 * (double)n * (double)b->pbytes, PLAN_STREAM_COMM, b->gop[mid]);
		mem_free(b, cat, "ag_cat", PLAN_STREAM_COMM);
	}
}

static void release(struct pb *b, int64_t mid)
{
	if (b->shard != SH_PARAM || b->gbuf[mid] < 0)
		return;
	int64_t n = unit_params(b, mid) - unit_persistent(b, mid);
	if (b->ds && b->s->zero_hpz > 1 && b->sbuf[mid] < 0) {
		/* hpZ (_partition_param_sec): the first release of the step keeps this rank's
		 * slice of the hpZ group, zeroed and copied from the gathered parameters, then
		 * synchronizes the stream (the host waits); under parameter offload the slice
		 * lives in host memory (remote_device), copied there */
		int64_t sec = (n + b->s->zero_hpz - 1) / b->s->zero_hpz;
		enum plan_device dev = b->s->offload_param != STRAT_OFFLOAD_NONE ? PLAN_DEV_HOST
										 : PLAN_DEV_GPU;
		int sb = part_bytes(b);
		b->sbuf[mid] = mem_alloc(b, PLAN_MEM_PARAMS, dev, sec * sb, "hpz_secondary",
					 PLAN_STREAM_COMPUTE);
		uint32_t id = dev == PLAN_DEV_GPU
				      ? elem(b, PLAN_K_ELEMWISE, "hpz_copy", 3.0 * (double)sec * sb)
				      : copy(b, PLAN_D2H, "hpz_copy", sec * sb, b->last_compute);
		if (id != PLAN_NONE)
			b->p->ops[id].flags |= PLAN_F_HOSTWAIT;
	}
	mem_free(b, b->gbuf[mid], "gathered", PLAN_STREAM_COMPUTE);
	b->gbuf[mid] = -1;
	b->live_gathered -= n;
}

/* Fetch a module before its compute, then prefetch the units that follow in execution order
 * (direction next - mid, within units lo..hi; next < 0: none) the way DeepSpeed's coordinator
 * pops its trace queue: while the elements already prefetched are below
 * min(stage3_max_live_parameters - live, stage3_prefetch_bucket_size), so the first unit
 * goes whatever its size. FSDP: one unit ahead. */
static void fetch(struct pb *b, int64_t mid, int64_t next, int64_t lo, int64_t hi)
{
	if (b->shard != SH_PARAM)
		return;
	/* a module's own fetch is coalesced when one of its leaf modules has several tensors */
	double w[3];
	gather(b, mid, unit_tensors(b, mid, true) > unit_parts(b, mid, w));
	/* old DeepSpeed's prefetch synchronized like its fetch: nothing to overlap */
	if (next >= 0 && next < b->nunits && !ds_sync_fetch(b)) {
		int64_t dir = next > mid ? 1 : -1, pref = 0, tensors = 0, last = next - dir;
		int64_t budget = b->fsdp ? 1 : b->s->max_live_parameters - b->live_gathered;
		if (!b->fsdp && b->s->prefetch_bucket_size < budget)
			budget = b->s->prefetch_bucket_size;
		/* the units the coordinator pops, then one coalesced call for all of them
		 * (unless it is one tensor) */
		for (int64_t u = next; u >= lo && u <= hi && pref < budget; u += dir) {
			last = u;
			if (b->gbuf[u] >= 0)
				continue; /* available: popped from the queue, nothing to fetch */
			pref += b->fsdp ? 1 : unit_params(b, u) - unit_persistent(b, u);
			tensors += unit_tensors(b, u, true);
		}
		for (int64_t u = next; u != last + dir; u += dir)
			gather(b, u, tensors > 1);
	}
	if (fsdp2(b) && b->gop[mid] != PLAN_NONE && !b->gcopied[mid]) {
		/* FSDP2's wait_for_unshard splits the gathered buffer into the parameters on the
		 * default stream (split_with_sizes_copy: a read and a write) */
		int64_t n = unit_params(b, mid) - unit_persistent(b, mid);
		/* the all-gather's output and the parameters it fills live side by side */
		int32_t out = mem_alloc(b, PLAN_MEM_GATHERED, PLAN_DEV_GPU, n * b->pbytes,
					"ag_output", PLAN_STREAM_COMPUTE);
		b->gop[mid] = compute_d(b, PLAN_K_ELEMWISE, "ag_copy_out", 0,
					2.0 * (double)n * (double)b->pbytes, PLAN_STREAM_COMPUTE,
					b->gop[mid]);
		mem_free(b, out, "ag_output", PLAN_STREAM_COMPUTE);
		b->gcopied[mid] = true;
	}
	wait_on(b, b->gop[mid]);
}

/* ---- gradient reduction ---------------------------------------------------------------------- */

/* Elements of a state sharded n ways that this rank holds: with expert parallelism the routed
 * experts shard over their own data-parallel group (ne ranks: DeepSpeed's MoE parameter groups
 * partition over the expert-data-parallel group, Megatron-Core keeps experts in buffers of
 * their own), the rest over the n ranks. `expert` is the experts' share of `all`. */
static int64_t shard_elems(const struct pb *b, int64_t all, int64_t expert, int64_t n)
{
	if (n <= 1)
		return all;
	return (all - expert) / n + (expert > 0 ? expert / b->ne : 0);
}

/* All-gather a sharded set of parameters: `dense` elements over group g of n ranks and the
 * routed experts' `expert` elements over the expert data-parallel group; returns the last op
 * (the stream runs them in order). */
static uint32_t gather_shards(struct pb *b, const char *name, enum job_group g, int64_t n,
			      int64_t dense, int64_t expert, enum plan_stream st, uint32_t dep)
{
	uint32_t id = coll(b, PLAN_ALL_GATHER, g, st, name, (dense + n - 1) / n, b->pdt, dep);
	if (expert > 0) {
		uint32_t e = coll(b, PLAN_ALL_GATHER, JOB_GROUP_EDP, st, "ag_experts",
				  (expert + b->ne - 1) / b->ne, b->pdt, dep);
		id = e != PLAN_NONE ? e : id;
	}
	return id;
}

static bool reduces_now(const struct pb *b)
{
	return b->shard >= SH_GRAD || b->micro == b->nmicro - 1;
}

/* Gradient reduction passes a step makes: every micro-batch, or the last (reduces_now) */
static int64_t reduction_passes(const struct pb *b)
{
	return b->shard >= SH_GRAD ? b->nmicro : 1;
}

/* The gradient reduction runs on a stream of its own only with overlap_comm: DeepSpeed's
 * reduction_stream (stages 1/2) and reduce_and_partition_stream (stage 3) are the default
 * stream without it (reference/deepspeed.md §2.6), so the reduction blocks the compute;
 * Megatron's overlap_grad_reduce sets it; FSDP always reduces on its own stream. */
static enum plan_stream red_stream(const struct pb *b)
{
	return b->s->overlap_comm || b->fsdp ? PLAN_STREAM_COMM : PLAN_STREAM_COMPUTE;
}

static int64_t bucket_elems(const struct pb *b)
{
	/* Megatron-Core DDP: buckets of max(40M, 1M x dp) elements when it overlaps the grad
	 * reduce (distributed_data_parallel.py), else one bucket for all grads */
	if (b->megatron)
		return b->s->overlap_grad_reduce ? (40000000 > 1000000 * b->dp ? 40000000 : 1000000 * b->dp)
						 : INT64_MAX / 4;
	if (b->ds && b->s->zero_stage == 0)
		return DS_STAGE0_BUCKET;
	return b->s->reduce_bucket_size > 0 ? b->s->reduce_bucket_size : DS_STAGE0_BUCKET;
}

/* One bucket of dense-path gradients (stages 0-2, Megatron, FSDP NO_SHARD). */
static bool bf16_optimizer(const struct pb *b);

/* Whether DeepSpeed ZeRO-1/2 reduces a gradient bucket slice by slice, one per partition it
 * spans (stage_1_and_2.average_tensor without use_multi_rank_bucket_allreduce); the
 * BF16_Optimizer, reduce_scatter: false and contiguous_gradients: false (reduce_ipg_grads'
 * buffered_reduce_fallback, rank None) all-reduce the whole bucket. */
static bool ds_slices(const struct pb *b)
{
	return b->ds && (b->shard == SH_OPT || b->shard == SH_GRAD) && b->s->reduce_scatter &&
	       b->s->contiguous_gradients && !b->s->use_multi_rank_bucket_allreduce &&
	       !bf16_optimizer(b);
}

static void reduce_bucket(struct pb *b, struct red *r, int64_t n)
{
	bool rs = b->megatron && b->s->distributed_optimizer;
	/* DeepSpeed ZeRO-1/2 (reference/deepspeed.md §2.2): with contiguous_gradients each grad
	 * is copied into the IPG bucket, and with reduce_scatter allreduce_and_scatter flattens
	 * the bucket's partition slices again before its all-reduce: a read and a write each.
	 * Without contiguous_gradients, allreduce_and_copy flattens the bucket's grads and
	 * copies the reduced values back into them: two. */
	if (b->ds && (b->shard == SH_OPT || b->shard == SH_GRAD)) {
		double per = !b->s->contiguous_gradients ? 4.0 * b->pbytes
			     : 2.0 * b->pbytes + (b->s->reduce_scatter ? 2.0 * tw_dtype_bytes(b->comm_dt)
								       : 0);
		if (per > 0)
			elem(b, PLAN_K_ELEMWISE, "ipg_copy", (double)n * per);
	}
	uint32_t dep = b->last_compute;
	uint32_t id = PLAN_NONE;
	if (ds_slices(b) && r->done + n <= r->total) { /* (else, defensively, the whole bucket) */
		/* without use_multi_rank_bucket_allreduce (before 0.12.4 the only path) the
		 * bucket goes out cut at the partitions of the flat group it spans (it fills from
		 * the end, as backward runs), each slice to its owner: dist.reduce before 0.12.4
		 * (average_tensor) and from 0.13.0, an all-reduce of the slice in 0.12.4 - 0.12.x
		 * (allreduce_bucket reset its rank to None) */
		int64_t S = (r->total + r->n - 1) / r->n, hi = r->total - r->done;
		int64_t lo = hi - n > 0 ? hi - n : 0;
		if (S < 1)
			S = 1;
		for (int64_t p = lo / S; p * S < hi; p++) {
			int64_t a = lo > p * S ? lo : p * S, z = hi < (p + 1) * S ? hi : (p + 1) * S;
			uint32_t c = coll(b, b->s->ds_reduce_rooted ? PLAN_REDUCE : PLAN_ALL_REDUCE,
					  r->group, red_stream(b), "ar_grads", z - a, b->comm_dt, dep);
			if (c != PLAN_NONE)
				b->p->ops[c].u.coll.root = (int32_t)p;
			id = c != PLAN_NONE ? c : id;
		}
		r->done += n;
	} else {
		id = rs ? coll(b, PLAN_REDUCE_SCATTER, r->group, red_stream(b), "rs_grads",
			       (n + r->n - 1) / r->n, b->comm_dt, dep)
			: coll(b, PLAN_ALL_REDUCE, r->group, red_stream(b), "ar_grads", n, b->comm_dt,
			       dep);
	}
	if (id != PLAN_NONE)
		b->last_red = id;
	/* ZeRO-1/2 + offload: the partition's slice goes D2H as fp32 (§3.2) */
	if (b->ds && b->shard >= SH_OPT && b->s->offload_optimizer != STRAT_OFFLOAD_NONE) {
		uint32_t c = copy(b, PLAN_D2H, "grad_d2h", n / r->n * 4, b->last_red);
		if (c != PLAN_NONE)
			b->last_d2h = c;
	}
}

static void flush_dense(struct pb *b, struct red *r, bool all)
{
	int64_t B = bucket_elems(b);
	while (r->pending >= B || (all && r->pending > 0)) {
		int64_t n = r->pending < B ? r->pending : B;
		reduce_bucket(b, r, n);
		r->pending -= n;
	}
}

/* DeepSpeed qgZ (all_to_all_quant_reduce, reference/deepspeed.md §2.4): per gradient, an int4
 * quantization swizzled by destination, an all-to-all among the node's ranks, a kernel that
 * dequantizes, adds the node's L chunks and quantizes the sum, an all-to-all across nodes, and
 * the dequantization with the sum of the nodes' chunks: the rank's partition. The fp32 scales
 * (one per group of a row or column: < 1% of the bytes) are not counted. Every tensor goes
 * through a Python loop of about 12 calls plus one add per node (host views, 4 to a call).
 * Returns the last op. */
static uint32_t quant_reduce(struct pb *b, const struct red *r, uint32_t dep)
{
	int64_t P = r->pending, L = job_group_size(b->j, JOB_GROUP_NODE);
	int64_t nodes = job_group_size(b->j, JOB_GROUP_XNODE), pb = tw_dtype_bytes(b->comm_dt);
	double P4 = (double)P / 2, local = P4 / (double)L; /* int4 bytes before and after the node */
	enum plan_stream st = red_stream(b);
	dep = compute_d(b, PLAN_K_ELEMWISE, "quantize_grads", 0, (double)P * pb + P4,
			st, dep);
	uint32_t id = coll(b, PLAN_ALL_TO_ALL, JOB_GROUP_NODE, st, "a2a_grads_node",
			   (int64_t)ceil(P4), TW_INT8, dep);
	id = compute_d(b, PLAN_K_ELEMWISE, "quant_reduce_grads", 0, P4 + local, st,
		       id != PLAN_NONE ? id : dep);
	uint32_t x = coll(b, PLAN_ALL_TO_ALL, JOB_GROUP_XNODE, st, "a2a_grads_xnode",
			  (int64_t)ceil(local), TW_INT8, id);
	id = compute_d(b, PLAN_K_ELEMWISE, "dequantize_grads", 0,
		       local + 3.0 * (double)P / (double)L * pb, st,
		       x != PLAN_NONE ? x : id);
	int64_t views = 4 * (12 + nodes) * r->tensors;
	if (x != PLAN_NONE)
		b->p->ops[x].host_views = (uint32_t)(views < UINT32_MAX ? views : UINT32_MAX);
	return id;
}

/* ZeRO-3 / FSDP: reduce-scatter the waiting full gradients into the partition buffer. */
static void reduce_scatter_pending(struct pb *b, struct red *r)
{
	if (r->pending <= 0)
		return;
	/* DeepSpeed's reduce_scatter_coalesced interleaves the grads' per-rank chunks into one
	 * flat buffer first (torch.cat: a read and a write; reference/deepspeed.md §2.4) */
	if (b->ds && b->s->reduce_scatter && !b->s->zero_qgrads)
		elem(b, PLAN_K_ELEMWISE, "rs_interleave",
		     (double)r->pending * 2.0 * tw_dtype_bytes(b->comm_dt));
	uint32_t dep = b->last_compute;
	/* FSDP: grads cast to reduce_dtype (FSDP1's flat grad) or, FSDP2, chunk-concatenated
	 * into the reduce-scatter input with the cast (foreach_reduce), on its stream */
	if (b->fsdp && (fsdp2(b) || b->comm_dt != b->pdt))
		dep = compute_d(b, PLAN_K_ELEMWISE, "rs_copy_in", 0,
				(double)r->pending * (double)(b->pbytes + tw_dtype_bytes(b->comm_dt)),
				PLAN_STREAM_COMM, dep);
	uint32_t id = b->ds && b->s->zero_qgrads
			      ? quant_reduce(b, r, dep)
			      : coll(b, PLAN_REDUCE_SCATTER, r->group, red_stream(b), "rs_grads",
				     (r->pending + r->n - 1) / r->n, b->comm_dt, dep);
	if (id != PLAN_NONE) {
		b->last_red = id;
		/* reduce_scatter_coalesced slices every tensor into one view per rank in Python
		 * before it issues the reduce-scatter (reference/deepspeed.md §2.4); before 0.6.0
		 * each gradient went alone: per rank a view(-1), a narrow() and the C++ copy of
		 * the reduce_scatter list into a flat buffer */
		int64_t views = (b->s->ds_rs_per_param ? 3 : 1) * r->tensors * r->n;
		if (b->ds && !b->s->zero_qgrads)
			b->p->ops[id].host_views = (uint32_t)(views < UINT32_MAX ? views : UINT32_MAX);
	}
	/* the partitions of the replicas add up: HYBRID_SHARD after every reduce-scatter, MiCS
	 * at the accumulation boundary (allreduce_mics_shard_grads, in the grad buffer's dtype) */
	bool hsdp = b->fsdp && b->s->fsdp_sharding == STRAT_FSDP_HYBRID_SHARD;
	bool mics = b->ds && b->s->mics_shard > 0 && b->micro == b->nmicro - 1;
	if (hsdp || mics) {
		id = coll(b, PLAN_ALL_REDUCE, JOB_GROUP_REPLICA, red_stream(b), "ar_grads",
			  (r->pending + r->n - 1) / r->n, hsdp ? b->comm_dt : b->s->grad_accum_dtype,
			  b->last_red);
		if (id != PLAN_NONE)
			b->last_red = id;
	}
	if (b->ds && b->s->offload_optimizer != STRAT_OFFLOAD_NONE) {
		int64_t part = r->pending / r->n * b->gbytes;
		uint32_t d = b->last_red;
		/* partition_grads runs on reduce_and_partition_stream: the compute stream without
		 * overlap_comm, else a stream of its own, in order with the reduction and not
		 * behind the parameter fetches' H2D (they are on the all-gather stream) */
		enum plan_stream gs = red_stream(b) == PLAN_STREAM_COMPUTE ? PLAN_STREAM_COMPUTE
									   : PLAN_STREAM_COPY_OUT;
		if (b->micro > 0) /* accumulate on the GPU: H2D, add, D2H (§3.3) */
			d = copy_on(b, PLAN_H2D, gs, "grad_h2d", part, d);
		uint32_t c = copy_on(b, PLAN_D2H, gs, "grad_d2h", part, d);
		if (c != PLAN_NONE)
			b->last_d2h = c;
	}
	r->pending = 0;
	r->tensors = 0;
	if (r == &b->expert)
		return; /* the dense reduce-scatter that follows reads the same grads */
	for (int i = 0; i < b->npend; i++)
		mem_free(b, b->pend_bufs[i], "grads_full", red_stream(b));
	b->npend = 0;
}

/* ZeRO-3 / FSDP: the module's full gradients appear during its backward. */
static int32_t grads_begin(struct pb *b, int64_t mid)
{
	if (b->shard != SH_PARAM)
		return -1;
	return mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, unit_trainable(b, mid) * b->pbytes,
			 "grads_full", PLAN_STREAM_COMPUTE);
}

/* Whether DeepSpeed builds its BF16_Optimizer: bf16 with fp32 grad accumulation at stage 1,
 * or stage 0 in a pipeline, without optimizer offload (reference/deepspeed.md §1.10). */
static bool bf16_optimizer(const struct pb *b)
{
	const struct strategy *s = b->s;
	return b->ds && b->pdt == TW_BF16 && s->offload_optimizer == STRAT_OFFLOAD_NONE &&
	       ((s->zero_stage == 1 && b->gbytes == 4) || (s->zero_stage == 0 && b->pp > 1));
}

/* DeepSpeed ZeRO 0/1: a micro-batch's grads join the accumulated ones. The BF16_Optimizer
 * adds every micro-batch's into its fp32 buffer, hp_grad.add_(lp.grad.to(fp32)): read 2, write
 * and read the fp32 copy, read and write the buffer (18 bytes per element). Otherwise
 * PyTorch's AccumulateGrad adds them into param.grad in place from the second micro-batch on:
 * read both, write one. */
static void grad_accumulate(struct pb *b, int64_t n)
{
	bool bf16_opt = bf16_optimizer(b);
	if (n <= 0 || (!bf16_opt && b->micro == 0))
		return;
	elem(b, PLAN_K_ELEMWISE, "grad_acc", (double)n * (bf16_opt ? 18.0 : 3.0 * b->pbytes));
}

/* Gradients of a module became ready in this backward (g: from grads_begin). */
static void grads_ready(struct pb *b, int64_t mid, int32_t g)
{
	int64_t n = unit_trainable(b, mid), e = 0, d = n;
	if (!b->lora) {
		unit_split(b, mid, &d, &e);
		n = d + e;
	}
	if (b->shard == SH_PARAM) {
		/* DeepSpeed copies each grad into the persistent IPG bucket at once
		 * (contiguous_gradients); FSDP and the non-contiguous path hold it until the
		 * reduce-scatter */
		if (b->ds && b->dense.pending > 0 && b->dense.pending + n > bucket_elems(b))
			reduce_scatter_pending(b, &b->dense); /* the bucket would overflow */
		if (b->ds && b->s->contiguous_gradients) { /* copied into the bucket (§2.4) */
			elem(b, PLAN_K_ELEMWISE, "ipg_copy", (double)n * 2.0 * b->pbytes);
			mem_free(b, g, "grads_full", PLAN_STREAM_COMPUTE);
		}
		else if (g >= 0 && b->npend < 64)
			b->pend_bufs[b->npend++] = g;
		/* with ep > 1 the routed experts reduce-scatter over their data-parallel group */
		b->dense.pending += b->ep > 1 ? d : n;
		if (b->ep > 1)
			b->expert.pending += e;
		b->dense.tensors += unit_tensors(b, mid, false);
		if (b->fsdp || b->npend == 64) {
			reduce_scatter_pending(b, &b->expert); /* the dense one frees the grads */
			reduce_scatter_pending(b, &b->dense);
		}
		return;
	}
	if (b->ds && b->shard <= SH_OPT)
		grad_accumulate(b, n);
	if (n <= 0 || !reduces_now(b))
		return;
	b->dense.pending += d;
	b->expert.pending += e;
	if (b->s->overlap_comm) {
		flush_dense(b, &b->dense, false);
		flush_dense(b, &b->expert, false);
	}
}

/* Enter and leave a gathering unit: fetch (and prefetch the next unit in execution order);
 * on leaving, release it unless its reuse distance keeps it (forward, recompute) and, in
 * backward, hand its grads on. A full recompute's trace goes on into the same layer's
 * backward, so its prefetch stays in the layer and turns back at the layer's last unit. */
static void unit_in(struct pb *b, int64_t uid)
{
	bool rc = b->flags & PLAN_F_RECOMPUTE;
	bool bwd = b->phase == PLAN_PHASE_BWD && !rc;
	int64_t next = uid + (bwd ? -1 : 1), lo = b->u_lo, hi = b->u_hi;
	if (rc && b->upl > 1) {
		lo = uid - (uid - 1) % b->upl;
		hi = lo + b->upl - 1;
		if (uid == hi)
			next = uid - 1;
	}
	fetch(b, uid, next >= lo && next <= hi ? next : -1, lo, hi);
	if (bwd)
		b->ugrad = grads_begin(b, uid);
}

static void unit_out(struct pb *b, int64_t uid)
{
	if (b->flags & PLAN_F_RECOMPUTE) {
		if (b->shard == SH_PARAM && !b->keep_rc[uid])
			release(b, uid);
	} else if (b->phase == PLAN_PHASE_BWD) {
		release(b, uid);
		grads_ready(b, uid, b->ugrad);
		b->ugrad = -1;
	} else if (b->shard == SH_PARAM && !b->keep_fwd[uid]) {
		release(b, uid);
	}
}

/* units inside a layer (DeepSpeed's leaf modules); FSDP handles the block in layer_fwd/bwd */
static void sub_in(struct pb *b, int64_t l, int64_t u)
{
	if (b->upl > 1)
		unit_in(b, 1 + l * b->upl + u);
}
static void sub_out(struct pb *b, int64_t l, int64_t u)
{
	if (b->upl > 1)
		unit_out(b, 1 + l * b->upl + u);
}

/* ---- layers ------------------------------------------------------------------------------------ */

static int64_t cp_peer(const struct pb *b, int64_t d)
{
	struct job_coord c = b->c;
	c.cp = (c.cp + d + b->cp) % b->cp;
	return job_rank_of(b->j, &c);
}

/* One hop of a context-parallel ring: send `bytes` to the next CP rank, receive as much from
 * the previous one, posted ahead; returns the receive, which the op that uses it waits on. */
static uint32_t cp_hop(struct pb *b, int64_t bytes, const char *send, const char *recv)
{
	p2p(b, true, cp_peer(b, 1), PLAN_P2P_KV, bytes, send);
	return p2p_op(b, false, cp_peer(b, -1), PLAN_P2P_KV, bytes, recv, true);
}

/* Attention core (op `name`) with the context-parallel exchange around it.
 * - ulysses: all-to-all of q, k, v to heads before, of the output back after.
 * - ring (Transformer Engine's p2p; PyTorch's all-to-all rotation): cp rounds of a KV block;
 *   the block of the next round is sent while this one computes, and backward passes the
 *   blocks' partial dK, dV on the same way, added in after the next round's grads, the last
 *   hop home exposed.
 * - allgather, Megatron (Transformer Engine's KV all-gather, "exposed" by its own account):
 *   the whole sequence's K, V gathered before the kernels and, backward, gathered again and
 *   their grads reduce-scattered after; the rank's two chunks against the keys before them.
 * - allgather, PyTorch (its default rotation): the ring's rounds, the gather issued before the
 *   first (the rank's own block) and waited on after it; backward gathers again and passes
 *   the dK, dV on as the ring does, in fp32 (convert_to_f32). */
static void attention(struct pb *b, const char *name, bool bwd)
{
	int64_t hl = b->heads / b->tp, cp = b->cp, sl = b->seq / cp;
	int64_t kvw = b->T * (b->kvd + b->kvdv) / b->tp; /* this rank's K, V elements */
	if (cp <= 1) {
		attn(b, name, hl, b->seq, b->seq, bwd);
		return;
	}
	if (b->ulysses) {
		int64_t in = b->T * (b->qd + b->kvd + b->kvdv) / b->tp;
		int64_t out = b->T * attn_out_w(b) / b->tp;
		coll_tp(b, PLAN_ALL_TO_ALL, JOB_GROUP_CP, "a2a_cp", bwd ? out : in);
		attn(b, name, hl / cp, b->seq, b->seq, bwd);
		coll_tp(b, PLAN_ALL_TO_ALL, JOB_GROUP_CP, "a2a_cp", bwd ? in : out);
		return;
	}
	bool ag = b->s->cp_kind == STRAT_CP_ALLGATHER;
	if (ag && b->megatron) {
		coll_tp(b, PLAN_ALL_GATHER, JOB_GROUP_CP, "ag_cp_kv", kvw);
		attn(b, name, hl, sl, b->seq, bwd);
		if (bwd)
			coll_tp(b, PLAN_REDUCE_SCATTER, JOB_GROUP_CP, "rs_cp_dkv", kvw);
		return;
	}
	int64_t kv = kvw * b->ab, dkv = kvw * (b->megatron ? b->ab : 4);
	uint32_t next = PLAN_NONE, dnext = PLAN_NONE;
	if (ag)
		next = coll(b, PLAN_ALL_GATHER, JOB_GROUP_CP, PLAN_STREAM_COMM_TP, "ag_cp_kv", kvw,
			    b->pdt, b->last_compute);
	for (int64_t r = 0; r < cp; r++) {
		if (r > 0 || !ag) {
			wait_on(b, next);
			next = PLAN_NONE;
		}
		if (!ag && r + 1 < cp)
			next = cp_hop(b, kv, "kv_send", "kv_recv");
		attn(b, name, hl, sl, sl, bwd);
		if (!bwd)
			continue;
		if (r > 0) { /* the block's partial grads from the ranks before, added in */
			wait_on(b, dnext);
			elem(b, PLAN_K_ELEMWISE, "dkv_add", 3.0 * (double)dkv);
		}
		dnext = cp_hop(b, dkv, "dkv_send", "dkv_recv");
	}
	wait_on(b, dnext); /* a rank's own dK, dV come home with the last hop */
}

static void lora_gemm(struct pb *b, int64_t l, bool attn_part, bool bwd)
{
	if (!b->lora)
		return;
	unsigned t = b->s->lora_targets;
	int64_t r = b->s->lora_rank, n = 0, f = layer_moe(b, l) ? b->fs : b->f;
	if (attn_part) {
		n += t & STRAT_LORA_Q ? b->h + b->qd : 0;
		n += t & STRAT_LORA_K ? b->h + b->kvd : 0;
		n += t & STRAT_LORA_V ? b->h + b->kvd : 0;
		n += t & STRAT_LORA_O ? b->qd + b->h : 0;
	} else {
		n += t & STRAT_LORA_GATE && b->swiglu ? b->h + f : 0;
		n += t & STRAT_LORA_UP ? b->h + f : 0;
		n += t & STRAT_LORA_DOWN ? b->h + f : 0;
	}
	if (n == 0)
		return;
	uint8_t fl = b->flags;
	b->flags |= PLAN_F_LORA;
	gemm(b, bwd ? "lora_bwd" : "lora", b->T, n, r, bwd ? 2 : 1, 0, false);
	b->flags = fl;
}

/* Activation bytes per element of the f-wide MLP, in units of ab. Fused (Megatron's bias-GeLU,
 * bias-SwiGLU): 1.5 per input element forward, 2.5 backward. Eager SwiGLU (silu(gate) * up):
 * silu reads and writes, the product reads two and writes one: 5; backward the product's two
 * grads (3 + 3) and silu's (3): 9. Eager GeLU: 2, backward 3. */
static double act_factor(const struct pb *b, bool bwd)
{
	double wide = b->swiglu ? 2 : 1;
	if (!b->eager)
		return wide * (bwd ? 2.5 : 1.5);
	if (b->swiglu)
		return bwd ? 9.0 : 5.0;
	return bwd ? 3.0 : 2.0;
}

/* The MLP activation over n elements of its f-wide output (eager SwiGLU: 2 kernels, backward
 * 3); bwd adds `more` bytes (fc1's bias grad, a sum over tokens). */
static void act_op(struct pb *b, const char *name, double n, bool bwd, double more)
{
	elem_k(b, PLAN_K_ELEMWISE, name, n * b->ab * act_factor(b, bwd) + more,
	       b->eager && b->swiglu ? (bwd ? 2 : 1) : 0);
}

static void tp_enter(struct pb *b, bool bwd);
static void tp_exit(struct pb *b, bool bwd);
static void col_bwd(struct pb *b, const char *const name[3], int64_t m, int64_t n, int64_t k,
		    int64_t g);
static const char *const fc1_bwd_names[3] = { "fc1_bwd", "fc1_dgrad", "fc1_wgrad" };
static const char *const qkv_bwd_names[3] = { "qkv_bwd", "qkv_dgrad", "qkv_wgrad" };
static const char *const logits_bwd_names[3] = { "logits_bwd", "logits_dgrad", "logits_wgrad" };
static const char *const shared_fc1_bwd_names[3] = { "shared_fc1_bwd", "shared_fc1_dgrad",
						     "shared_fc1_wgrad" };

/* The shared experts' forward beside the routed ones: a dense MLP of width fs, which gathers
 * and reduce-scatters the sequence itself under Megatron-Core's dispatcher. In two halves:
 * the gather, fc1 and the activation; fc2 and the reduce-scatter. */
static void shared_fc1(struct pb *b)
{
	int64_t T = b->T, tp = b->tp, wide = b->swiglu ? 2 : 1;
	if (moe_dispatch_sp(b))
		tp_enter(b, false);
	gemm(b, "shared_fc1", T, wide * b->fs / tp, b->h, 1, 0, true);
	act_op(b, "shared_act", (double)T * b->fs / tp, false, 0);
}

static void shared_fc2(struct pb *b)
{
	gemm(b, "shared_fc2", b->T, b->h, b->fs / b->tp, 1, 0, true);
	if (moe_dispatch_sp(b))
		tp_exit(b, false);
}

static void shared_fwd(struct pb *b)
{
	shared_fc1(b);
	shared_fc2(b);
}

/* The shared experts' backward in the same halves, fc2's first (with the output grad's
 * gather under Megatron-Core's dispatcher), then fc1's */
static void shared_bwd_fc2(struct pb *b)
{
	int64_t g = b->lora ? 1 : 2;
	if (moe_dispatch_sp(b))
		tp_enter(b, true); /* the output grad */
	gemm(b, "shared_fc2_bwd", b->T, b->h, b->fs / b->tp, g, 0, false);
	act_op(b, "shared_act_bwd", (double)b->T * b->fs / b->tp, true, 0);
}

static void shared_bwd_fc1(struct pb *b)
{
	int64_t T = b->T, tp = b->tp, wide = b->swiglu ? 2 : 1, g = b->lora ? 1 : 2;
	if (moe_dispatch_sp(b)) /* a column-parallel linear of its own, as a dense fc1 */
		col_bwd(b, shared_fc1_bwd_names, T, wide * b->fs / tp, b->h, g);
	else
		gemm(b, "shared_fc1_bwd", T, wide * b->fs / tp, b->h, g, 0, false);
}

/* Megatron-Core's moe_shared_expert_overlap: the shared experts run on a stream of their own,
 * fc1 issued right after the dispatch all-to-all and fc2 after the combine (backward: fc2's
 * after the combine's, fc1's after the dispatch's), so each runs while its all-to-all is in
 * flight. Here on the compute stream, emitted between the all-to-all and the first kernel
 * that waits for it: run(b) emits the shared half, which waits for none of the all-to-all
 * (the kernels after it still do). */
static void beside_a2a(struct pb *b, void (*run)(struct pb *))
{
	uint32_t a2a[PLAN_NUM_STREAMS];
	memcpy(a2a, b->wait, sizeof(a2a));
	for (int s = 0; s < PLAN_NUM_STREAMS; s++)
		b->wait[s] = PLAN_NONE;
	run(b);
	for (int s = 0; s < PLAN_NUM_STREAMS; s++) /* a later op of a stream implies the earlier */
		if (b->wait[s] == PLAN_NONE)
			b->wait[s] = a2a[s];
}


/* C(a, k) / C(b, k): the odds that k draws without replacement from b all fall in a given a */
static double choose_ratio(int64_t a, int64_t b, int64_t k)
{
	double r = 1;
	for (int64_t i = 0; i < k && r > 0; i++)
		r = a - i <= 0 ? 0 : r * (double)(a - i) / (double)(b - i);
	return r;
}

static double lchoose(int64_t n, int64_t k)
{
	return lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1);
}

/* Expected units (nodes, or ranks) a token's top-k experts span, among n units of E/n experts
 * each: the k fall uniformly on the experts its router may choose, all of them, or those of
 * its best m of g equal groups when groups and units nest (a unit holds g/n groups, or a group
 * spans n/g units); otherwise the limit is left out */
static double experts_reach(int64_t E, int64_t k, int64_t n, int64_t g, int64_t m)
{
	int64_t per = E / n;
	if (g <= 1 || m >= g || (g % n && n % g))
		return (double)n * (1 - choose_ratio(E - per, E, k));
	int64_t sz = E / g, pool = m * sz; /* the chosen groups' experts */
	if (g % n) /* a group spans n/g units: a unit is reachable when its group is chosen */
		return (double)n * ((double)m / (double)g) * (1 - choose_ratio(pool - per, pool, k));
	int64_t K = g / n; /* groups per unit, c of them among the chosen (hypergeometric odds) */
	double p = 0;
	for (int64_t c = 1; c <= K && c <= m; c++)
		if (m - c <= g - K)
			p += exp(lchoose(K, c) + lchoose(g - K, m - c) - lchoose(g, m)) *
			     (1 - choose_ratio(pool - c * sz, pool, k));
	return (double)n * p;
}

/* The expert group's all-to-all of count elements (Tr routed tokens of this rank), after the
 * kernel dep: one collective (on a stream of its own under the combined 1F1B), or DeepEP's two
 * stages side by side, each token once to every node it reaches (the rank at its place there,
 * on COMM_TP) and the copies on to their expert ranks over NVLink (COMM_EP); what follows waits
 * for both */
static void ep_a2a(struct pb *b, const char *net, const char *nvl, int64_t count, int64_t Tr,
		   uint32_t dep)
{
	if (b->ep_nodes <= 0) {
		enum plan_stream st = b->s->moe_a2a_overlap ? PLAN_STREAM_COMM_EP : PLAN_STREAM_COMM_TP;
		wait_on(b, coll(b, PLAN_ALL_TO_ALL, JOB_GROUP_EP, st, net, count, b->pdt, dep));
		return;
	}
	double tok = (double)Tr * (double)b->h * moe_imb(b);
	uint32_t x = coll(b, PLAN_ALL_TO_ALL, JOB_GROUP_EP_XNODE, PLAN_STREAM_COMM_TP, net,
			  (int64_t)llround(tok * b->ep_nodes), b->pdt, dep);
	uint32_t y = coll(b, PLAN_ALL_TO_ALL, JOB_GROUP_EP_NODE, PLAN_STREAM_COMM_EP, nvl,
			  (int64_t)llround(tok * b->ep_ranks), b->pdt, dep);
	wait_on(b, x);
	wait_on(b, y);
}

/* The pieces of a layer that Megatron-Core's combined 1F1B schedule interleaves with another
 * micro-batch's (model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run): the
 * attention block with what precedes the dispatch (router, permutation), the dispatch
 * all-to-all, the MLP (the experts), and the combine all-to-all with what follows it up to
 * the residual. Forward runs them in this order, backward in reverse; a dense layer's MLP is
 * its LP_MLP and its dispatch and combine are empty. */
enum lpiece { LP_ATTN = 0, LP_DISPATCH, LP_MLP, LP_COMBINE, LP_NUM };

static void dense_mlp(struct pb *b, int64_t l, bool bwd)
{
	int64_t T = b->T, tp = b->tp, g = bwd ? (b->lora ? 1 : 2) : 1;
	int64_t wide = b->swiglu ? 2 : 1;
	if (!bwd) {
		sub_in(b, l, 2);
		gemm(b, "fc1", T, wide * b->f / tp, b->h, 1, 0, true);
		act_op(b, "act", (double)T * b->f / tp, false, 0);
		sub_out(b, l, 2);
		sub_in(b, l, 3);
		gemm(b, "fc2", T, b->h, b->f / tp, 1, 0, true);
		lora_gemm(b, l, false, bwd);
		sub_out(b, l, 3);
	} else {
		sub_in(b, l, 3);
		lora_gemm(b, l, false, bwd);
		gemm(b, "fc2_bwd", T, b->h, b->f / tp, g, 0, false);
		sub_out(b, l, 3);
		sub_in(b, l, 2);
		/* the activation's backward, and fc1's bias grad (a sum over tokens) */
		act_op(b, "act_bwd", (double)T * b->f / tp, true,
		       b->m->mlp_bias ? (double)T * wide * b->f / tp * b->ab : 0);
		col_bwd(b, fc1_bwd_names, T, wide * b->f / tp, b->h, g);
		sub_out(b, l, 2);
	}
}

/* MoE: router, permutation, dispatch all-to-all, grouped expert GEMMs with the top-k load,
 * combine all-to-all, unpermutation; the shared experts run beside. Megatron-Core with
 * sequence parallelism (its rule with TP and EP) routes the rank's own T/tp tokens:
 * permute -> all-to-all (EP) -> all-gather (TP) -> experts -> reduce-scatter (TP) ->
 * all-to-all (EP) -> unpermute (MoEAlltoAllTokenDispatcher), and only the shared experts
 * gather and reduce-scatter the sequence; otherwise every TP rank routes all T tokens
 * between the block's own gather and reduce-scatter. */
struct moe_dims {
	bool disp;          /* Megatron-Core's dispatcher routes the rank's own tokens (SP) */
	bool gath;          /* tokens gathered over eg after the dispatch */
	bool fold;          /* folded experts (expert_tp != tp): the rank routes its own T / tp
			     * tokens and the experts' tensor-parallel group takes TP's place */
	int64_t Tr;         /* tokens this rank routes */
	int64_t et;         /* the experts' TP degree */
	enum job_group eg;
	double load;        /* token copies the local experts process: every rank of eg brings
			     * its own; the busiest rank's (moe_imb) */
	double rload;       /* token copies this rank routes */
	int64_t per, a2a;   /* tokens per local expert; elements of one all-to-all */
};

static struct moe_dims moe_dims(const struct pb *b)
{
	struct moe_dims d;
	d.disp = moe_dispatch_sp(b);
	d.fold = b->etp != b->tp;
	d.Tr = d.disp || d.fold ? b->T / b->tp : b->T;
	d.et = d.fold ? b->etp : b->tp;
	d.eg = d.fold ? JOB_GROUP_ETP : JOB_GROUP_TP;
	d.gath = d.fold ? d.et > 1 : d.disp;
	d.load = (double)(d.fold ? d.Tr * d.et : b->T) * (double)b->topk * moe_imb(b);
	d.rload = (double)d.Tr * (double)b->topk * moe_pad(b);
	d.per = (int64_t)ceil(d.load / (double)b->El);
	/* what the busiest rank receives (the combine sends it back) */
	d.a2a = (int64_t)llround((double)(d.Tr * b->topk * b->h) * moe_imb(b));
	return d;
}

/* ---- Megatron-Core's token rearrangement (moe_utils.py permute / unpermute /
 * sort_chunks_by_idxs). P: this rank's permuted token copies (rload rows), Q: its routed tokens
 * (Tr rows), in bytes; E x Tr the routing map. The dispatchers hand the probs to the experts,
 * whose activation applies them, so the unpermutation only merges the copies. With
 * moe_permute_fusion Transformer Engine's kernels move each row once: permute reads a token per
 * copy and writes the copy (2P), unpermute reads the copies and writes the merged tokens
 * (P + Q), and backward the reverse (2P; P + Q). Unfused, PyTorch ops:
 *  - permute: the map transposed (2 B an entry), an arange and a stable radix argsort of it
 *    (int64 indices: 8 written, then key and index read and written over two passes, 35 B an
 *    entry), the indices modulo the tokens and the probs transposed and gathered (32 B a copy),
 *    the index_select (2P): 8 kernels; backward index_select's zeros and index_add_ (Q + 3P);
 *  - unpermute: a zeroed output (Q) and scatter_add_ of the copies into it (P read, their rows
 *    read and written, 2P): 2 kernels; backward scatter_add's gather (2P).
 * Other frameworks' MoE blocks keep one pass of the copies each way (2P). */
static bool moe_fused(const struct pb *b)
{
	return !b->megatron || b->s->moe_permute_fusion;
}

static void permute_fwd(struct pb *b, const struct moe_dims *d)
{
	double P = d->rload * (double)b->h * b->ab, map = (double)b->E * (double)d->Tr;
	if (moe_fused(b))
		elem(b, PLAN_K_PERMUTE, "permute", 2 * P);
	else
		elem_k(b, PLAN_K_PERMUTE, "permute", 2 * P + 37 * map + 32 * d->rload, 7);
}

static void unpermute_fwd(struct pb *b, const struct moe_dims *d)
{
	double P = d->rload * (double)b->h * b->ab, Q = (double)d->Tr * (double)b->h * b->ab;
	if (!b->megatron)
		elem(b, PLAN_K_PERMUTE, "unpermute", 2 * P);
	else if (moe_fused(b))
		elem(b, PLAN_K_PERMUTE, "unpermute", P + Q);
	else
		elem_k(b, PLAN_K_PERMUTE, "unpermute", 3 * P + Q, 1);
}

static void unpermute_bwd(struct pb *b, const struct moe_dims *d)
{
	elem(b, PLAN_K_PERMUTE, "unpermute_bwd", 2 * d->rload * (double)b->h * b->ab);
}

static void permute_bwd(struct pb *b, const struct moe_dims *d)
{
	double P = d->rload * (double)b->h * b->ab, Q = (double)d->Tr * (double)b->h * b->ab;
	if (!b->megatron)
		elem(b, PLAN_K_PERMUTE, "permute_bwd", 2 * P);
	else
		elem_k(b, PLAN_K_PERMUTE, "permute_bwd", moe_fused(b) ? P + Q : 3 * P + Q,
		       moe_fused(b) ? 0 : 1);
}

/* Megatron-Core's all-to-all dispatcher with several local experts receives each source
 * rank's tokens grouped by expert and regroups them by expert before the GEMMs, and back
 * before the combine ("permutation 2", sort_chunks_by_idxs; padded to capacity a transpose
 * made contiguous): a pass over the received copies (R) each way, and one each in backward,
 * the probs (4 B a copy) along with the first. Unfused it is torch.split into one view per
 * (source rank, expert) chunk and torch.cat of them in the new order. */
static void sort_chunks(struct pb *b, const struct moe_dims *d, const char *name, bool probs)
{
	if (!b->megatron || b->s->moe_dispatcher != STRAT_DISPATCH_ALLTOALL || b->El < 2)
		return;
	double R = d->load * ((double)b->h * b->ab + (probs ? 4.0 : 0.0));
	bool split = !b->s->moe_permute_fusion && !moe_pad_cap(b);
	uint32_t id = elem_k(b, PLAN_K_PERMUTE, name, 2 * R, split && probs ? 1 : 0);
	if (split) {
		double chunks = (double)b->ep * (double)d->et * (double)b->El * (probs ? 2.0 : 1.0);
		b->p->ops[id].host_views = (uint32_t)fmin(chunks, (double)UINT32_MAX);
	}
}

/* Local experts that run one after another, an MLP each: Megatron-Core's SequentialMLP
 * (without moe_grouped_gemm), DeepSpeed's Experts and HF's sparse MoE blocks loop over them;
 * Megatron's TEGroupedMLP and torchtitan's grouped_mm run them in one call. */
static int64_t expert_repeat(const struct pb *b)
{
	if (b->El < 2)
		return 1;
	if (b->megatron)
		return b->s->moe_grouped_gemm ? 1 : b->El;
	return b->ds || b->eager ? b->El : 1;
}

static void set_repeat(struct pb *b, uint32_t id)
{
	int64_t r = expert_repeat(b);
	b->p->ops[id].u.compute.repeat = (uint16_t)(r < UINT16_MAX ? r : UINT16_MAX);
}

/* SequentialMLP and DeepSpeed's Experts split the received copies into one view per expert
 * and torch.cat the experts' outputs (a pass over them); backward, the input grads are
 * concatenated again. HF's blocks add each expert's output into place instead (unpermute). */
static void expert_cat(struct pb *b, const struct moe_dims *d, const char *name)
{
	if (expert_repeat(b) < 2 || b->eager)
		return;
	uint32_t id = elem(b, PLAN_K_PERMUTE, name, 2 * d->load * (double)b->h * b->ab);
	b->p->ops[id].host_views = (uint32_t)b->El;
}


/* Bytes a gate moves per (token, expert, slot) entry, forward: top-2 builds each choice's fp32
 * weights (4 + 4), sums them (12), makes the bool mask (5) and the 16-bit copies the einsums
 * take (3 + 6); top-1 one choice (4 + 5 + 9); top-k a one-hot of the slots and its product
 * (4 + 8 + 5 + 9). Backward: the copies' and products' grads, about 14. */
static double ds_gate_bytes(const struct pb *b, bool bwd)
{
	if (bwd)
		return 14.0;
	return b->topk == 1 ? 18.0 : b->topk == 2 ? 34.0 : 26.0;
}

/* An expert GEMM of the busiest rank (moe_imb) runs more than the mean rank's share: its
 * hardware FLOPs are the busiest rank's, its model FLOPs (the useful work) the mean's. Grouped
 * (one call for the local experts), their tiles share the SMs' waves; looped, a kernel each. */
static void expert_gemm(struct pb *b, const char *name, int64_t m, int64_t n, int64_t k,
			int64_t batch, double rows, bool model, enum plan_grads grads)
{
	uint32_t id = gemm(b, name, m, n, k, batch, rows, model);
	set_repeat(b, id);
	struct plan_op *op = &b->p->ops[id];
	if (expert_repeat(b) == 1 && b->El > 1)
		op->u.compute.group = (int16_t)(b->El < INT16_MAX ? b->El : INT16_MAX);
	op->u.compute.grads = (uint8_t)grads;
	double extra = op->u.compute.flops * (1.0 - 1.0 / moe_imb(b));
	if (model && b->phase == PLAN_PHASE_FWD && !(b->flags & (PLAN_F_RECOMPUTE | PLAN_F_LORA)))
		b->p->model_flops -= 3.0 * extra;
}

/* Megatron-Core's all-to-all dispatcher: the tokens this rank sends each expert, all-gathered
 * over the expert group (E int64 counts), are copied to the host for the all-to-all's split
 * sizes, and the host waits for that copy before it issues the all-to-all
 * (token_dispatcher.py, its d2h event synchronized "before_ep_alltoall"); the permute is already
 * issued, and in the combined 1F1B so is the other micro-batch's MLP backward. Padded to
 * capacity the sizes are fixed and none of this happens. DeepEP's dispatch (and HybridEP's,
 * without a token budget) starts with a notify: the ranks exchange how many tokens each sends
 * each expert (E int32 a rank), and the host polls for the count it will receive before it
 * allocates the output ("the CPU will wait for GPU's signal to arrive", fused_a2a.py). The
 * backward's dispatch reuses the forward's handle and does not wait. */
static void token_counts(struct pb *b)
{
	if (!b->megatron)
		return;
	uint32_t n = b->s->moe_dispatcher == STRAT_DISPATCH_ALLTOALL
			     ? coll(b, PLAN_ALL_GATHER, JOB_GROUP_EP, PLAN_STREAM_COMM_TP,
				    "ag_tokens_per_expert", 2 * b->E, TW_FP32, b->moe_probs)
			     : coll(b, PLAN_ALL_TO_ALL, JOB_GROUP_EP, PLAN_STREAM_COMM_TP,
				    "deepep_notify", b->E, TW_FP32, b->moe_probs);
	if (n != PLAN_NONE)
		b->p->ops[n].flags |= PLAN_F_HOSTWAIT;
}

static bool recomputed(const struct pb *b, int64_t l);

/* Whether autograd records layer l's router now: not in the no-grad forward of a checkpointed
 * layer or MoE block (the recompute and the backward do) */
static bool router_grad(const struct pb *b, int64_t l)
{
	if (b->phase == PLAN_PHASE_BWD || (b->flags & PLAN_F_RECOMPUTE))
		return true;
	return !recomputed(b, l) && !rc_mod(b, STRAT_RC_MOE);
}

static bool router_aux(const struct pb *b, int64_t l)
{
	return b->megatron && b->s->moe_aux_loss_coeff > 0 && router_grad(b, l);
}

/* The router z-loss (moe_z_loss_coeff, z_loss_func, on the logits before routing, while
 * autograd records): logsumexp over the experts (amax, the infinities' fill, subtract, exp,
 * sum, log, add), squared, averaged and scaled, and the tracker's division and sum: 12
 * kernels, N 6 lb bytes; backward the mean's and square's grads, logsumexp's (subtract, exp,
 * multiply), the add into the logits' grad and the scaler's ones and scale: 8, N 9 lb. */
static void router_z_loss(struct pb *b, const struct moe_dims *d, int64_t l)
{
	if (!b->megatron || b->s->moe_z_loss_coeff <= 0 || !router_grad(b, l))
		return;
	double N = (double)d->Tr * (double)b->E, lb = b->ab;
	bool bwd = b->phase == PLAN_PHASE_BWD && !(b->flags & PLAN_F_RECOMPUTE);
	if (bwd)
		elem_k(b, PLAN_K_SOFTMAX, "router_z_loss_bwd", N * 9 * lb, 7);
	else
		elem_k(b, PLAN_K_SOFTMAX, "router_z_loss", N * 6 * lb, 11);
}

/* Megatron-Core's token dropping in the router (apply_router_token_dropping, with a capacity
 * factor, fused router or not): each expert keeps its top C tokens by prob, C = ceil(Tr k x /
 * E): a top-k over the tokens of each expert, a zero-filled scatter of the kept into a mask
 * and its bool cast, the mask and-ed with the routing map (not when padding: the mask is the
 * map) and the probs multiplied by it: 7 kernels, N (8 lb + 5) + E C (2 lb + 16) bytes; a
 * capacity above the tokens keeps them all (a ones mask). Backward the multiply's grad. */
static void router_drop(struct pb *b, const struct moe_dims *d, bool bwd)
{
	double N = (double)d->Tr * (double)b->E, lb = b->ab, cf = b->s->moe_capacity_factor;
	if (!b->megatron || cf <= 0)
		return;
	if (bwd) {
		elem(b, PLAN_K_ELEMWISE, "router_drop_bwd", N * (2 * lb + 1));
		return;
	}
	bool pad = b->s->moe_pad_to_capacity;
	double C = ceil((double)d->Tr * (double)b->topk * cf / (double)b->E);
	double and_bytes = pad ? 0 : 3 * N, mul = N * (3 * lb + 1);
	if (C > (double)d->Tr)
		elem_k(b, PLAN_K_ELEMWISE, "router_drop", N + and_bytes + mul, pad ? 1 : 2);
	else
		elem_k(b, PLAN_K_ELEMWISE, "router_drop",
		       N * (5 * lb + 1) + (double)b->E * C * (2 * lb + 16) + and_bytes + mul,
		       pad ? 5 : 6);
}

/* ---- Megatron-Core's router after its gating GEMM (router.py; moe_utils.py
 * topk_routing_with_score_function, compute_routing_scores_for_aux_loss,
 * switch_load_balancing_loss_func), over N = Tr x E logits of lb bytes, n = Tr x k copies,
 * scores in fp32:
 *  - routing, unfused: top-k of the logits, softmax of the k (fp32) and the cast back, then two
 *    zero-filled out-of-place scatters into dense [Tr, E] tensors: the probs (zeros, clone,
 *    scatter) and the bool map (zeros, int cast, clone, scatter, bool cast): 11 kernels,
 *    N (6 lb + 17) + n (4 lb + 32) bytes; backward the probs' gather, the cast's and the
 *    softmax's grads, top-k's zeros and scatter: 5 kernels, N lb + n (4 lb + 32);
 *  - routing, fused (moe_router_fusion, Transformer Engine's fused_topk_with_score_function):
 *    one kernel reads the logits and writes the dense probs and map, N (2 lb + 1); backward
 *    one, N (2 lb + 4);
 *  - the load-balancing loss (moe_aux_loss_coeff > 0), only while autograd records: not in the
 *    no-grad forward of a checkpointed layer or MoE block, whose recompute computes it.
 *    Unfused: the scores softmaxed over every expert, their top-k and map as above (7
 *    kernels), the map's per-expert sum, all-reduced over TP x CP
 *    (get_tokens_per_expert_and_token_count), the probs' per-expert sum and the loss's
 *    products (4), the metrics tracker's division and sum (2): 14 kernels, N (3 lb + 30) +
 *    24 n; backward the scaler's ones and scale, the loss's products, the expanded grad and
 *    softmax's backward, the cast and the add into the logits' grad: 8 kernels,
 *    N (4 lb + 20). Fused (fused_compute_score_for_moe_aux_loss, fused_moe_aux_loss): 5
 *    kernels, N (lb + 10); backward 5, N (4 lb + 12). */
static uint32_t router_fwd(struct pb *b, const struct moe_dims *d, int64_t l)
{
	double N = (double)d->Tr * (double)b->E, n = (double)d->Tr * (double)b->topk, lb = b->ab;
	bool fused = b->s->moe_router_fusion;
	if (!b->megatron) /* the frameworks' softmax over the experts and their top-k */
		return compute(b, PLAN_K_SOFTMAX, "router_softmax", 0, N * 8, PLAN_STREAM_COMPUTE);
	router_z_loss(b, d, l);
	uint32_t probs = fused ? elem(b, PLAN_K_SOFTMAX, "router_topk", N * (2 * lb + 1))
			       : elem_k(b, PLAN_K_SOFTMAX, "router_topk",
					N * (6 * lb + 17) + n * (4 * lb + 32), 10);
	router_drop(b, d, false);
	if (!router_aux(b, l))
		return probs;
	if (fused)
		elem_k(b, PLAN_K_SOFTMAX, "router_aux_scores", N * (lb + 6), 1);
	else
		elem_k(b, PLAN_K_SOFTMAX, "router_aux_scores", N * (3 * lb + 26) + 24 * n, 7);
	/* the tokens per expert (E int64) summed over TP x CP before the loss reads them */
	wait_on(b, coll(b, PLAN_ALL_REDUCE, JOB_GROUP_TP_CP, PLAN_STREAM_COMM_TP,
			"router_aux_tokens", 2 * b->E, TW_FP32, b->last_compute));
	elem_k(b, PLAN_K_ELEMWISE, "router_aux_loss", N * 4, fused ? 2 : 5);
	return probs;
}

static void router_bwd(struct pb *b, const struct moe_dims *d, int64_t l)
{
	double N = (double)d->Tr * (double)b->E, n = (double)d->Tr * (double)b->topk, lb = b->ab;
	bool fused = b->s->moe_router_fusion;
	if (!b->megatron)
		return;
	router_drop(b, d, true);
	if (router_aux(b, l))
		elem_k(b, PLAN_K_SOFTMAX, "router_aux_bwd", N * (fused ? 4 * lb + 12 : 4 * lb + 20),
		       fused ? 4 : 7);
	if (fused)
		elem(b, PLAN_K_SOFTMAX, "router_topk_bwd", N * (2 * lb + 4));
	else
		elem_k(b, PLAN_K_SOFTMAX, "router_topk_bwd", N * lb + n * (4 * lb + 32), 4);
	router_z_loss(b, d, l);
}

static void moe_fwd(struct pb *b, int64_t l, enum lpiece pc)
{
	struct moe_dims d = moe_dims(b);
	int64_t wide = b->swiglu ? 2 : 1;
	switch (pc) {
	case LP_ATTN: {
		sub_in(b, l, 2);
		uint32_t r = gemm(b, "router", d.Tr, b->E, b->h, 1, 0, false);
		/* without the dispatcher every TP rank runs the whole router: count a 1/tp share
		 * as model FLOPs */
		if (!(b->flags & PLAN_F_RECOMPUTE) && !d.disp && !d.fold)
			b->p->model_flops += 3.0 * b->p->ops[r].u.compute.flops / (double)b->tp;
		else if (!(b->flags & PLAN_F_RECOMPUTE))
			b->p->model_flops += 3.0 * b->p->ops[r].u.compute.flops;
		uint32_t probs = router_fwd(b, &d, l);
		/* the router's own graph ends here, or with the permutation (moe_preprocess) */
		bool pre = b->s->cuda_graph_modules & STRAT_CG_MOE_PREPROCESS;
		if (cg_router(b, true) && !pre)
			b->graph_on = false;
		if (b->eager)
			/* HF's sparse MoE block (Mixtral, Qwen-MoE) loops over its experts and finds
			 * each one's tokens with torch.where on the one-hot mask: a nonzero, whose
			 * result size the host must read, so it waits for the GPU once per expert */
			for (int64_t e = 0; e < b->El; e++) {
				/* reads the expert's row of the int64 one-hot mask */
				uint32_t w = elem(b, PLAN_K_ELEMWISE, "expert_where", d.rload * 8.0);
				b->p->ops[w].flags |= PLAN_F_HOSTWAIT;
			}
		b->moe_probs = probs;
		/* with dropping but no padding the output size is dynamic: Megatron-Core's
		 * dispatcher synchronizes "before_permutation_1", so the host waits for the
		 * counts before it issues the permute */
		if (b->s->moe_capacity_factor > 0 && !b->s->moe_pad_to_capacity &&
		    b->s->moe_dispatcher == STRAT_DISPATCH_ALLTOALL)
			token_counts(b);
		if (ds_einsum(b)) {
			int64_t ec = ds_slots(b);
			if (b->s->moe_dropless) {
				/* without dropping, the busiest expert's count is all-reduced (MAX) over
				 * the expert group and becomes the one-hot's class count, a host int */
				uint32_t n = coll(b, PLAN_ALL_REDUCE, JOB_GROUP_EP, PLAN_STREAM_COMM_TP,
						  "moe_capacity_max", 2, TW_FP32, b->moe_probs);
				if (n != PLAN_NONE)
					b->p->ops[n].flags |= PLAN_F_HOSTWAIT;
			}
			elem_k(b, PLAN_K_ELEMWISE, "moe_gate",
			       (double)d.Tr * (double)ec * ds_gate_bytes(b, false), 20);
			gemm(b, "moe_dispatch_einsum", ec, b->h, d.Tr, 1, 0, false);
		} else {
			permute_fwd(b, &d);
		}
		if (cg_router(b, true))
			b->graph_on = false;
		break;
	}
	case LP_DISPATCH:
		/* DeepEP's notify opens its dispatch whether or not the router dropped tokens */
		if (b->s->moe_capacity_factor <= 0 || b->s->moe_dispatcher != STRAT_DISPATCH_ALLTOALL)
			token_counts(b);
		ep_a2a(b, "a2a_dispatch", "a2a_dispatch_nvl", d.a2a, d.Tr, b->last_compute);
		if (shared_overlap(b))
			beside_a2a(b, shared_fc1);
		if (d.gath)
			coll_wait(b, PLAN_ALL_GATHER, d.eg, "ag_dispatch", d.a2a);
		break;
	case LP_MLP:
		sort_chunks(b, &d, "sort_chunks", true);
		expert_gemm(b, "expert_fc1", d.per, wide * b->fe / d.et, b->h, b->El, d.load, true,
			    PLAN_GRADS_BOTH);
		act_op(b, "expert_act", d.load * b->fe / d.et, false, 0);
		set_repeat(b, b->last_compute);
		expert_gemm(b, "expert_fc2", d.per, b->h, b->fe / d.et, b->El, d.load, true,
			    PLAN_GRADS_BOTH);
		expert_cat(b, &d, "expert_cat");
		sort_chunks(b, &d, "unsort_chunks", false);
		if (d.gath)
			coll_wait(b, PLAN_REDUCE_SCATTER, d.eg, "rs_combine", d.a2a);
		break;
	default:
		ep_a2a(b, "a2a_combine", "a2a_combine_nvl", d.a2a, d.Tr, b->last_compute);
		if (shared_overlap(b))
			beside_a2a(b, shared_fc2);
		if (ds_einsum(b))
			gemm(b, "moe_combine_einsum", d.Tr, b->h, ds_slots(b), 1, 0, false);
		else
			unpermute_fwd(b, &d);
		if (b->fs > 0 && !shared_overlap(b))
			shared_fwd(b);
		lora_gemm(b, l, false, false);
		sub_out(b, l, 2);
	}
}

static void moe_bwd(struct pb *b, int64_t l, enum lpiece pc)
{
	struct moe_dims d = moe_dims(b);
	int64_t g = b->lora ? 1 : 2, wide = b->swiglu ? 2 : 1;
	switch (pc) {
	case LP_COMBINE:
		sub_in(b, l, 2);
		if (b->fs > 0 && !shared_overlap(b)) {
			shared_bwd_fc2(b);
			shared_bwd_fc1(b);
		}
		if (ds_einsum(b)) {
			/* the grads of the combine weights (S x EC) and of the experts' output
			 * (EC x h), then through the gate's products to its softmax */
			int64_t ec = ds_slots(b);
			gemm(b, "moe_combine_einsum_bwd", d.Tr, b->h, ec, 2, 0, false);
			elem_k(b, PLAN_K_ELEMWISE, "moe_gate_bwd",
			       (double)d.Tr * (double)ec * ds_gate_bytes(b, true), 10);
		} else {
			unpermute_bwd(b, &d);
		}
		ep_a2a(b, "a2a_combine_bwd", "a2a_combine_bwd_nvl", d.a2a, d.Tr, b->last_compute);
		if (shared_overlap(b))
			beside_a2a(b, shared_bwd_fc2);
		if (d.gath) /* the reduce-scatter's backward */
			coll_wait(b, PLAN_ALL_GATHER, d.eg, "ag_combine_bwd", d.a2a);
		break;
	case LP_MLP: {
		/* with delayed weight grads the input grads alone now, the weight grads at the
		 * dispatch */
		bool dw = delay_wgrad(b);
		int64_t gm = dw ? 1 : g;
		sort_chunks(b, &d, "unsort_chunks_bwd", false);
		enum plan_grads gr = dw ? PLAN_GRADS_DATA : PLAN_GRADS_BOTH;
		expert_gemm(b, dw ? "expert_fc2_dgrad" : "expert_fc2_bwd", d.per, b->h, b->fe / d.et,
			    b->El * gm, d.load * (double)gm, false, gr);
		act_op(b, "expert_act_bwd", d.load * b->fe / d.et, true, 0);
		set_repeat(b, b->last_compute);
		expert_gemm(b, dw ? "expert_fc1_dgrad" : "expert_fc1_bwd", d.per, wide * b->fe / d.et,
			    b->h, b->El * gm, d.load * (double)gm, false, gr);
		expert_cat(b, &d, "expert_cat_bwd");
		sort_chunks(b, &d, "sort_chunks_bwd", false);
		b->moe_dgrad = b->last_compute;
		if (d.gath) /* the all-gather's backward */
			coll_wait(b, PLAN_REDUCE_SCATTER, d.eg, "rs_dispatch_bwd", d.a2a);
		break;
	}
	case LP_DISPATCH:
		if (delay_wgrad(b)) {
			/* Megatron-Core's delay_wgrad_compute: mlp.backward_dw() runs before the
			 * dispatch's backward is issued, which waits only for the input grads (its
			 * ScheduleNode's event), so the weight grads run beside it */
			expert_gemm(b, "expert_fc2_wgrad", d.per, b->h, b->fe / d.et, b->El, d.load,
				    false, PLAN_GRADS_WEIGHT);
			expert_gemm(b, "expert_fc1_wgrad", d.per, wide * b->fe / d.et, b->h, b->El,
				    d.load, false, PLAN_GRADS_WEIGHT);
		}
		/* after the experts' input grads */
		ep_a2a(b, "a2a_dispatch_bwd", "a2a_dispatch_bwd_nvl", d.a2a, d.Tr, b->moe_dgrad);
		if (shared_overlap(b))
			beside_a2a(b, shared_bwd_fc1);
		break;
	default: {
		/* the router's own backward graph: the permutation's with moe_preprocess */
		bool rg = cg_router(b, true), pre = b->s->cuda_graph_modules & STRAT_CG_MOE_PREPROCESS;
		if (rg && pre)
			graph_begin(b, true);
		if (ds_einsum(b)) /* the tokens' grad: the mask times the dispatched grads */
			gemm(b, "moe_dispatch_einsum_bwd", d.Tr, b->h, ds_slots(b), 1, 0, false);
		else
			permute_bwd(b, &d);
		if (rg && !pre)
			graph_begin(b, true);
		router_bwd(b, &d, l);
		gemm(b, "router_bwd", d.Tr, b->E, b->h, g, 0, false);
		lora_gemm(b, l, false, true);
		sub_out(b, l, 2);
	}
	}
}

/* Piece pc of layer l's MoE block (moe: layer_moe), or at LP_MLP a dense layer's MLP */
static void mlp_piece(struct pb *b, int64_t l, enum lpiece pc, bool bwd, bool moe)
{
	if (moe) {
		if (bwd)
			moe_bwd(b, l, pc);
		else
			moe_fwd(b, l, pc);
	} else if (pc == LP_MLP) {
		dense_mlp(b, l, bwd);
	}
}

/* MLP or MoE block between the second norm and the residual. */
static void mlp_block(struct pb *b, int64_t l, bool bwd)
{
	bool moe = layer_moe(b, l);
	for (int i = 0; i < LP_NUM; i++)
		mlp_piece(b, l, (enum lpiece)(bwd ? LP_NUM - 1 - i : i), bwd, moe);
}

/* TP entry/exit of a block (Megatron f/g): SP all-gathers the sequence-sharded input and
 * reduce-scatters the output; plain TP all-reduces the output (forward) or input grad. */
static void tp_enter(struct pb *b, bool bwd)
{
	if (b->sp)
		coll_tp(b, PLAN_ALL_GATHER, JOB_GROUP_TP, bwd ? "ag_sp_bwd" : "ag_sp",
			b->T / b->tp * b->h);
}
static void tp_exit(struct pb *b, bool bwd)
{
	if (b->tp <= 1)
		return;
	if (b->sp)
		coll_tp(b, PLAN_REDUCE_SCATTER, JOB_GROUP_TP, bwd ? "rs_sp_bwd" : "rs_sp",
			b->T / b->tp * b->h);
	else
		coll_tp(b, PLAN_ALL_REDUCE, JOB_GROUP_TP, bwd ? "ar_tp_bwd" : "ar_tp", b->T * b->h);
}

/* The backward of a column-parallel linear (qkv, fc1, the logits, the shared experts' fc1 under
 * Megatron-Core's dispatcher) that computes its weight grad: Megatron's
 * LinearWithGradAccumulationAndAsyncCommunication starts the gather of the
 * saved input again (SP) beside the input-grad GEMM, then the reduce-scatter (SP) or the
 * all-reduce (async_tensor_model_parallel_allreduce) of the input grad beside the weight-grad
 * GEMM, and waits for it after. Each GEMM keeps the (m, n, k) of the pair, so only the
 * overlap changes. Otherwise the GEMMs, the gather and the reduction run in turn. The names:
 * both GEMMs as one, the input grad's, the weight grad's. */
static void col_bwd(struct pb *b, const char *const name[3], int64_t m, int64_t n, int64_t k,
		    int64_t g)
{
	bool async = b->megatron && b->tp > 1 && g == 2 && (b->sp || b->s->async_tp_allreduce);
	if (!async) {
		gemm(b, name[0], m, n, k, g, 0, false);
		if (g == 2) /* SP: gather the saved input again for the weight grads (a frozen
			     * weight, LoRA's, needs none) */
			tp_enter(b, true);
		tp_exit(b, true);
		return;
	}
	int64_t count = b->sp ? b->T / b->tp * b->h : b->T * b->h;
	uint32_t ag = PLAN_NONE;
	if (b->sp)
		ag = coll(b, PLAN_ALL_GATHER, JOB_GROUP_TP, PLAN_STREAM_COMM_TP, "ag_sp_bwd", count,
			  b->pdt, b->last_compute);
	gemm(b, name[1], m, n, k, 1, 0, false);
	wait_on(b, ag);
	uint32_t red = coll(b, b->sp ? PLAN_REDUCE_SCATTER : PLAN_ALL_REDUCE, JOB_GROUP_TP,
			    PLAN_STREAM_COMM_TP, b->sp ? "rs_sp_bwd" : "ar_tp_bwd", count, b->pdt,
			    b->last_compute);
	if (b->s->tp_comm_overlap) { /* Transformer Engine's bulk overlaps, through userbuffers */
		if (ag != PLAN_NONE)
			b->p->ops[ag].flags |= PLAN_F_USERBUF;
		if (red != PLAN_NONE)
			b->p->ops[red].flags |= PLAN_F_USERBUF;
	}
	gemm(b, name[2], m, n, k, 1, 0, false);
	wait_on(b, red);
}

/* RoPE on q and k. Fused (Megatron, TE, compiled): read and write them (2 ab per element).
 * Eager (HF's q * cos + rotate_half(q) * sin, per q and k: neg, cat, two muls, add): 10 ab
 * in 10 kernels; backward alike. */
/* Qwen3's and Gemma 3's q_norm and k_norm: an RMSNorm over each head of the local queries and
 * keys, between the QKV projection and RoPE */
static void qk_norm_ops(struct pb *b, bool bwd)
{
	if (!b->m->qk_norm)
		return;
	double t = (double)b->T / (double)b->tp;
	norm_op(b, bwd ? "q_norm_bwd" : "q_norm", t * (double)b->qd, bwd, 0);
	norm_op(b, bwd ? "k_norm_bwd" : "k_norm", t * (double)b->kvd, bwd, 0);
}

static void rope_op(struct pb *b, const char *name)
{
	const struct model *m = b->m;
	/* MLA rotates only the rope part of its query heads and the one key part all heads
	 * share, which every TP rank computes */
	double n = m->kv_lora_rank > 0
			   ? (double)b->T * ((double)(b->heads / b->tp * m->qk_rope_head_dim) +
					     (double)m->qk_rope_head_dim)
			   : (double)b->T * (double)(b->qd + b->kvd) / (double)b->tp;
	elem_k(b, PLAN_K_ELEMWISE, name, n * b->ab * (b->eager ? 10.0 : 2.0), b->eager ? 9 : 0);
}

/* The residual add after attention or the MLP, over tne elements of the residual stream.
 * Megatron fuses bias, dropout and add in one kernel (bias_dropout_add): read the branch and
 * the residual, write the sum (3 ab per element); hidden dropout also writes its 1-byte mask,
 * and the backward, which passes the grad on (2 ab, and 1 ab more for the bias grad's sum),
 * reads it. Eager model code runs nn.Dropout as its own kernel before the add: read, write
 * the output and the mask (2 ab + 1), and its backward alike. PyTorch skips dropout at p = 0. */
static void residual_op(struct pb *b, const char *name, double tne, bool bwd, bool bias)
{
	double ab = b->ab, bytes = bwd ? (2.0 + (bias ? 1.0 : 0.0)) * ab : 3.0 * ab;
	int extra = 0;
	if (b->s->hidden_dropout > 0) {
		bytes += 1.0;
		if (b->eager) {
			bytes += 2.0 * ab;
			extra = 1;
		}
	}
	elem_k(b, PLAN_K_ELEMWISE, name, tne * bytes, extra);
}

/* MLA's projections in front of attention (DeepSeek-V2/V3; Megatron-Core's MLASelfAttention):
 * the down projections to the q and kv latents (q_lora_rank; kv_lora_rank plus the shared RoPE
 * key) are duplicated on every TP rank and, under SP, run on the rank's own tokens; the
 * latents are gathered (SP) and the up projections split the heads. Without q_lora_rank the
 * query is one column-parallel projection of the (gathered) hidden state. The latents' norms
 * are small elementwise ops. Backward: the up projections' input grads are partial sums over
 * TP, reduced latent-wide (reduce-scatter under SP, else all-reduce); the down projections'
 * need nothing more. Their TP collectives are not overlapped with the GEMMs. */
struct mla_dims {
	int64_t ql, kl, nope, rope, qk, v, H, lat; /* lat: the latents' width gathered */
};

static struct mla_dims mla_dims(const struct pb *b)
{
	const struct model *m = b->m;
	struct mla_dims d;
	d.ql = m->q_lora_rank, d.kl = m->kv_lora_rank;
	d.nope = m->qk_nope_head_dim, d.rope = m->qk_rope_head_dim;
	d.qk = d.nope + d.rope;
	d.v = m->v_head_dim > 0 ? m->v_head_dim : d.qk;
	d.H = b->heads / b->tp;
	d.lat = d.ql + d.kl + d.rope;
	return d;
}

static void mla_fwd(struct pb *b)
{
	struct mla_dims d = mla_dims(b);
	int64_t T = b->T, tp = b->tp, h = b->h, Tl = b->sp ? T / tp : T;
	/* without SP every TP rank runs the same down projections: each counts 1/tp of their
	 * model FLOPs */
	double mf = b->p->model_flops;
	if (d.ql > 0) {
		gemm(b, "q_down", Tl, d.ql, h, 1, 0, true);
		elem(b, PLAN_K_ELEMWISE, "q_latent_norm", (double)Tl * d.ql * b->ab * 2.0);
	}
	gemm(b, "kv_down", Tl, d.kl + d.rope, h, 1, 0, true);
	if (!b->sp && tp > 1)
		b->p->model_flops = mf + (b->p->model_flops - mf) / (double)tp;
	elem(b, PLAN_K_ELEMWISE, "kv_latent_norm", (double)Tl * d.kl * b->ab * 2.0);
	if (b->sp)
		coll_tp(b, PLAN_ALL_GATHER, JOB_GROUP_TP, "ag_sp_latents", Tl * d.lat);
	if (d.ql > 0) {
		gemm(b, "q_up", T, d.H * d.qk, d.ql, 1, 0, true);
	} else {
		tp_enter(b, false); /* SP: the hidden state for the query's projection */
		gemm(b, "q_proj", T, d.H * d.qk, h, 1, 0, true);
	}
	gemm(b, "kv_up", T, d.H * (d.nope + d.v), d.kl, 1, 0, true);
}

static void mla_bwd(struct pb *b, int64_t g)
{
	struct mla_dims d = mla_dims(b);
	int64_t T = b->T, tp = b->tp, h = b->h, Tl = b->sp ? T / tp : T;
	gemm(b, "kv_up_bwd", T, d.H * (d.nope + d.v), d.kl, g, 0, false);
	if (d.ql > 0) {
		gemm(b, "q_up_bwd", T, d.H * d.qk, d.ql, g, 0, false);
	} else {
		gemm(b, "q_proj_bwd", T, d.H * d.qk, h, g, 0, false);
		if (g == 2)
			tp_enter(b, true); /* SP: the hidden state again for the weight grads */
		tp_exit(b, true);
	}
	if (b->sp && g == 2) /* the latents again for the up projections' weight grads */
		coll_tp(b, PLAN_ALL_GATHER, JOB_GROUP_TP, "ag_sp_latents_bwd", Tl * d.lat);
	if (tp > 1)
		coll_tp(b, b->sp ? PLAN_REDUCE_SCATTER : PLAN_ALL_REDUCE, JOB_GROUP_TP,
			b->sp ? "rs_sp_latents_bwd" : "ar_tp_latents_bwd",
			(b->sp ? Tl : T) * d.lat);
	elem(b, PLAN_K_ELEMWISE, "kv_latent_norm_bwd", (double)Tl * d.kl * b->ab * 3.0);
	gemm(b, "kv_down_bwd", Tl, d.kl + d.rope, h, g, 0, false);
	if (d.ql > 0) {
		elem(b, PLAN_K_ELEMWISE, "q_latent_norm_bwd", (double)Tl * d.ql * b->ab * 3.0);
		gemm(b, "q_down_bwd", Tl, d.ql, h, g, 0, false);
	}
}

/* Piece pc of layer l's forward ops (enum lpiece) */
static void layer_fwd_ops(struct pb *b, int64_t l, enum lpiece pc)
{
	int64_t T = b->T, tp = b->tp, h = b->h;
	double tne = (double)(b->sp ? T / tp : T) * h;
	bool moe = layer_moe(b, l);
	bool own = moe && moe_dispatch_sp(b); /* the block gathers for itself */
	if (pc == LP_DISPATCH || pc == LP_MLP) {
		b->graph_on = cg_mlp(b, moe);
		mlp_piece(b, l, pc, false, moe);
		b->graph_on = false;
		return;
	}
	if (pc == LP_COMBINE) {
		b->graph_on = cg_mlp(b, moe);
		mlp_piece(b, l, pc, false, moe);
		if (!own)
			tp_exit(b, false);
		residual_op(b, "residual2", tne, false, false);
		b->graph_on = false;
		return;
	}
	if (cg_module(b, STRAT_CG_ATTN))
		graph_begin(b, false);
	sub_in(b, l, 0);
	norm_op(b, "norm1", tne, false, 0);
	if (b->m->kv_lora_rank > 0) {
		mla_fwd(b);
	} else {
		tp_enter(b, false);
		gemm(b, "qkv", T, (b->qd + 2 * b->kvd) / tp, h, 1, 0, true);
		qk_norm_ops(b, false);
	}
	lora_gemm(b, l, true, false);
	sub_out(b, l, 0);
	if (b->rope)
		rope_op(b, "rope");
	attention(b, "attn", false);
	sub_in(b, l, 1);
	int64_t ow = attn_out_w(b);
	if (b->eager) /* the output's transpose(1, 2).contiguous() before o_proj */
		elem(b, PLAN_K_ELEMWISE, "attn_out_copy", (double)T * ow / tp * b->ab * 2);
	gemm(b, "out_proj", T, h, ow / tp, 1, 0, true);
	tp_exit(b, false);
	residual_op(b, "residual1", tne, false, false);
	/* the MLP's or the router's graph begins with the pre-MLP norm (the whole layer's goes on) */
	b->graph_on = cg_whole(b);
	if (!cg_whole(b) && (cg_mlp(b, moe) || cg_router(b, moe)))
		graph_begin(b, false);
	norm_op(b, "norm2", tne, false, 0);
	sub_out(b, l, 1);
	if (!own)
		tp_enter(b, false);
	mlp_piece(b, l, pc, false, moe);
	b->graph_on = false;
}

static void layer_fwd_all(struct pb *b, int64_t l)
{
	for (int pc = 0; pc < LP_NUM; pc++)
		layer_fwd_ops(b, l, (enum lpiece)pc);
}

/* Backward memory passes per layer beyond the kernels' own, in units of the residual stream
 * (tn bytes): autograd sums the two grads of each norm's input (the norm's and the residual
 * path's: read 2, write 1), folded into the norm backward; a bias grad is a sum over tokens
 * of the output grad (read 1), folded into the op before it. */
static void layer_bwd_ops(struct pb *b, int64_t l, enum lpiece pc)
{
	int64_t T = b->T, tp = b->tp, h = b->h, g = b->lora ? 1 : 2;
	double tne = (double)(b->sp ? T / tp : T) * h, tn = tne * b->ab;
	const struct model *m = b->m;
	bool moe = layer_moe(b, l);
	bool own = moe && moe_dispatch_sp(b); /* the block gathers for itself */
	if (pc == LP_COMBINE) {
		b->graph_on = false;
		if (cg_mlp(b, moe)) /* the MLP's backward graph, or the whole layer's */
			graph_begin(b, true);
		residual_op(b, "residual2_bwd", tne, true, m->mlp_bias);
		if (!own)
			tp_enter(b, true); /* SP: gather the output grad */
		mlp_piece(b, l, pc, true, moe);
		b->graph_on = false;
		return;
	}
	if (pc == LP_MLP || pc == LP_DISPATCH) { /* a dense fc1 gathers and reduces in col_bwd */
		b->graph_on = cg_mlp(b, moe);
		mlp_piece(b, l, pc, true, moe);
		b->graph_on = false;
		return;
	}
	b->graph_on = cg_mlp(b, moe); /* the router's graph begins in its backward (moe_bwd) */
	mlp_piece(b, l, pc, true, moe);
	if (moe && !own) {
		tp_enter(b, true); /* SP: gather the saved norm output again for the weight grads */
		tp_exit(b, true);
	}
	sub_in(b, l, 1);
	norm_op(b, "norm2_bwd", tne, true, tn * 3);
	b->graph_on = cg_whole(b);
	if (!cg_whole(b) && cg_module(b, STRAT_CG_ATTN))
		graph_begin(b, true);
	residual_op(b, "residual1_bwd", tne, true, m->out_bias);
	tp_enter(b, true);
	int64_t ow = attn_out_w(b);
	gemm(b, "out_proj_bwd", T, h, ow / tp, g, 0, false);
	if (b->eager) /* the attention kernel's backward wants a contiguous output grad */
		elem(b, PLAN_K_ELEMWISE, "attn_out_copy_bwd", (double)T * ow / tp * b->ab * 2);
	sub_out(b, l, 1);
	attention(b, "attn_bwd", true);
	if (b->rope)
		rope_op(b, "rope_bwd");
	sub_in(b, l, 0);
	lora_gemm(b, l, true, true);
	if (m->kv_lora_rank > 0) {
		mla_bwd(b, g);
	} else {
		qk_norm_ops(b, true);
		col_bwd(b, qkv_bwd_names, T, (b->qd + 2 * b->kvd) / tp, h, g);
	}
	norm_op(b, "norm1_bwd", tne, true,
		tn * 3 + (m->qkv_bias ? (double)T * (b->qd + 2 * b->kvd) / tp * b->ab : 0));
	sub_out(b, l, 0);
	b->graph_on = false;
}

static int64_t act_index(const struct pb *b, int64_t l)
{
	/* layer l of this stage -> its slot among the stage's layers */
	int64_t k = 0;
	for (int64_t c = 0; c < b->vp; c++) {
		if (l >= b->first[c] && l < b->first[c] + b->nl[c])
			return (int64_t)b->micro * b->nlayers + k + (l - b->first[c]);
		k += b->nl[c];
	}
	return 0;
}

/* Whether layer l keeps only its input and is recomputed in backward: every layer with full
 * recompute, or with recompute_num_layers N (Megatron's block method) the first N layers of
 * each model chunk of the stage; the others keep their activations. */
static bool recomputed(const struct pb *b, int64_t l)
{
	if (b->s->recompute != STRAT_RECOMPUTE_FULL)
		return false;
	if (b->s->recompute_num_layers <= 0)
		return true;
	for (int64_t c = 0; c < b->vp; c++)
		if (l >= b->first[c] && l < b->first[c] + b->nl[c])
			return l - b->first[c] < b->s->recompute_num_layers;
	return true;
}

/* DeepSpeed ZeRO-3's reuse distance (PartitionedParameterCoordinator.__params_to_release; the
 * same rule in 0.3's _keep_for_later): a module released after a use stays gathered when the
 * modules used between this use and its next one hold fewer than stage3_max_reuse_distance
 * elements. The trace is one micro-batch's: forward in order, the head's forward and backward,
 * then backward in reverse, where a fully recomputed layer runs its modules forward again
 * just before their backward. So a unit is kept from its recompute to its backward when twice
 * the layer's units after it are below the distance (GPT-3's fc1: 2 x 604M, released and
 * gathered again), and from forward when its next use is near (the last units without
 * recompute). Each use's distance is a difference of prefix sums over the trace. */
enum { USE_FWD, USE_RC, USE_BWD, USE_TIED_FWD, USE_TIED_BWD };

/* Whether the head's GEMM uses the embedding's weight on this rank (tied, one stage) */
static bool tied_head(const struct pb *b)
{
	return b->m->tied_embeddings && b->pp == 1 && !b->lora;
}

static void reuse_distances(struct pb *b, bool first, bool last)
{
	size_t cap = 3 * (size_t)b->nunits + 2, n = 0; /* forward, recompute, backward, tied */
	/* prefix sums of elements in doubles: exact below 2^53, and a stage of absurd size
	 * cannot overflow them */
	int64_t *unit = TW_NEW_ARRAY(int64_t, cap);
	double *sum = TW_NEW_ARRAY(double, cap + 1);
	int64_t *next = TW_NEW_ARRAY(int64_t, (size_t)b->nunits);
	uint8_t *use = TW_NEW_ARRAY(uint8_t, cap);
#define PUSH(u, k) (unit[n] = (u), use[n++] = (uint8_t)(k))
	if (first)
		PUSH(0, USE_FWD);
	for (int64_t c = 0; c < b->vp; c++)
		for (int64_t u = 1 + b->first[c] * b->upl; u < 1 + (b->first[c] + b->nl[c]) * b->upl; u++)
			PUSH(u, USE_FWD);
	if (last) { /* a tied head is a use of the embedding's weight too */
		PUSH(b->head_uid, USE_FWD);
		if (tied_head(b)) {
			PUSH(0, USE_TIED_FWD);
			PUSH(0, USE_TIED_BWD);
		}
		PUSH(b->head_uid, USE_BWD);
	}
	for (int64_t c = b->vp - 1; c >= 0; c--)
		for (int64_t l = b->first[c] + b->nl[c] - 1; l >= b->first[c]; l--) {
			int64_t lo = 1 + l * b->upl, hi = lo + b->upl - 1;
			for (int64_t u = lo; recomputed(b, l) && u <= hi; u++)
				PUSH(u, USE_RC);
			for (int64_t u = hi; u >= lo; u--)
				PUSH(u, USE_BWD);
		}
	if (first)
		PUSH(0, USE_BWD);
#undef PUSH
	sum[0] = 0;
	for (size_t i = 0; i < n; i++)
		sum[i + 1] = sum[i] + (double)unit_params(b, unit[i]);
	for (int64_t u = 0; u < b->nunits; u++)
		next[u] = -1;
	for (size_t i = n; i-- > 0;) {
		int64_t u = unit[i], nx = next[u];
		next[u] = (int64_t)i;
		bool keep = nx >= 0 && sum[nx] - sum[i + 1] < (double)b->s->max_reuse_distance;
		if (use[i] == USE_FWD)
			b->keep_fwd[u] = keep;
		else if (use[i] == USE_RC)
			b->keep_rc[u] = keep;
		else if (use[i] != USE_BWD)
			b->keep_tied[use[i] == USE_TIED_BWD] = keep;
	}
	free(unit);
	free(sum);
	free(next);
	free(use);
}

/* Piece pc of layer l's forward: LP_ATTN begins the layer (its parameters, its saved
 * activations), LP_COMBINE ends it */
static void layer_fwd_piece(struct pb *b, int64_t l, enum lpiece pc)
{
	b->layer = (int32_t)l;
	if (pc == LP_ATTN) {
		struct act_sizes a = layer_act(b, l);
		int64_t ai = act_index(b, l);
		if (b->pg_op && b->pg_op[ai % b->nlayers] != PLAN_NONE) {
			/* its parameters, updated by the last step, are gathered by now */
			wait_on(b, b->pg_op[ai % b->nlayers]);
			b->pg_op[ai % b->nlayers] = PLAN_NONE;
		}
		if (b->upl == 1)
			unit_in(b, 1 + l);
		if (recomputed(b, l)) {
			bool host = b->ds && b->s->cpu_checkpointing;
			b->ckpt[ai] = mem_alloc(b, PLAN_MEM_CKPT, host ? PLAN_DEV_HOST : PLAN_DEV_GPU,
						a.input, "ckpt", PLAN_STREAM_COMPUTE);
			b->fwd_tmp = mem_alloc(b, PLAN_MEM_ACTIV, PLAN_DEV_GPU, a.saved,
					       "activations", PLAN_STREAM_COMPUTE);
			if (host)
				copy(b, PLAN_D2H, "ckpt_d2h", a.input, b->last_compute);
		} else {
			b->act[ai] = mem_alloc(b, PLAN_MEM_ACTIV, PLAN_DEV_GPU, a.saved,
					       "activations", PLAN_STREAM_COMPUTE);
		}
	}
	layer_fwd_ops(b, l, pc);
	if (pc != LP_COMBINE)
		return;
	if (b->fwd_tmp >= 0) {
		mem_free(b, b->fwd_tmp, "activations", PLAN_STREAM_COMPUTE);
		b->fwd_tmp = -1;
	}
	if (b->upl == 1)
		unit_out(b, 1 + l);
}

static void layer_fwd(struct pb *b, int64_t l)
{
	for (int pc = 0; pc < LP_NUM; pc++)
		layer_fwd_piece(b, l, (enum lpiece)pc);
}

/* The op policy's recompute before a layer's backward: what the backward needs and the
 * policy did not keep: the norms, the even-numbered matmuls (never the last: nothing in
 * backward reads its output), RoPE, the attention output's copy, the residual and the
 * activation; the attention core too without flash attention (its matmuls are bmm, not in the
 * policy's list). */
static void layer_op_recompute(struct pb *b)
{
	int64_t T = b->T, h = b->h, w[8];
	const char *names[8];
	int n = op_sac_mms(b, w, names);
	double tne = (double)T * h;
	b->flags |= PLAN_F_RECOMPUTE;
	norm_op(b, "norm1", tne, false, 0);
	int i = 0;
	/* the projections in front of attention: q, k, v or the fused QKV */
	for (; i < n && strcmp(names[i], "out_proj"); i++)
		if (i % 2)
			gemm(b, names[i], T, w[i], h, 1, 0, true);
	qk_norm_ops(b, false);
	if (b->rope)
		rope_op(b, "rope");
	if (!b->flash)
		attention(b, "attn", false);
	if (b->eager)
		elem(b, PLAN_K_ELEMWISE, "attn_out_copy", (double)T * b->qd * b->ab * 2);
	if (i % 2) /* o */
		gemm(b, names[i], T, h, b->qd, 1, 0, true);
	residual_op(b, "residual1", tne, false, false);
	norm_op(b, "norm2", tne, false, 0);
	for (i++; i < n - 1; i++) /* the MLP's input projections; not the last matmul */
		if (i % 2)
			gemm(b, names[i], T, w[i], h, 1, 0, true);
	act_op(b, "act", (double)T * b->f, false, 0);
	b->flags &= (uint8_t)~PLAN_F_RECOMPUTE;
}

/* Megatron-Core's recompute_modules before layer l's backward (CheckpointWithoutOutput and
 * tensor_parallel.checkpoint): the separate norms, a dense MLP with its TP collectives, an MoE
 * block whole (its all-to-alls too) or the experts' activation function and the shared
 * experts */
static void modules_recompute(struct pb *b, int64_t l)
{
	int64_t T = b->T, tp = b->tp;
	bool moe = layer_moe(b, l);
	double tne = (double)(b->sp ? T / tp : T) * b->h;
	if (rc_mod(b, STRAT_RC_MLA_UP) && b->m->kv_lora_rank > 0) { /* q, k, v again */
		struct mla_dims d = mla_dims(b);
		gemm(b, d.ql > 0 ? "q_up_recompute" : "q_proj_recompute", T, d.H * d.qk,
		     d.ql > 0 ? d.ql : b->h, 1, 0, true);
		gemm(b, "kv_up_recompute", T, d.H * (d.nope + d.v), d.kl, 1, 0, true);
		if (b->rope)
			rope_op(b, "rope_recompute");
	}
	int norms = rc_mod(b, STRAT_RC_LAYERNORM) ? separate_norms(b, l) : 0;
	if (norms == 2)
		norm_op(b, "norm1_recompute", tne, false, 0);
	if (norms >= 1)
		norm_op(b, "norm2_recompute", tne, false, 0);
	if (!moe && rc_mod(b, STRAT_RC_MLP)) {
		tp_enter(b, false);
		mlp_block(b, l, false);
		tp_exit(b, false);
	}
	if (moe && rc_mod(b, STRAT_RC_MOE)) { /* the block again: router, all-to-alls, experts */
		bool own = moe_dispatch_sp(b);
		if (!own)
			tp_enter(b, false);
		mlp_block(b, l, false);
		if (!own)
			tp_exit(b, false);
		return;
	}
	if (moe && rc_mod(b, STRAT_RC_MOE_ACT)) {
		act_op(b, "expert_act_recompute", (double)T * (double)b->topk * moe_imb(b) * b->fe / tp,
		       false, 0);
		set_repeat(b, b->last_compute);
	}
	if (moe && b->fs > 0 && rc_mod(b, STRAT_RC_SHARED))
		shared_fwd(b);
}

/* The start of a layer's backward: its parameters, its recompute, its workspace */
static void layer_bwd_begin(struct pb *b, int64_t l, const struct act_sizes *a, int64_t ai)
{
	/* FSDP gathers the block when its backward starts, before a checkpoint recomputes it */
	if (b->upl == 1)
		unit_in(b, 1 + l);
	if (recomputed(b, l)) {
		uint32_t in = PLAN_NONE;
		if (b->ds && b->s->cpu_checkpointing)
			wait_on(b, in = copy(b, PLAN_H2D, "ckpt_h2d", a->input, PLAN_NONE));
		/* DeepSpeed's partition_activations kept 1/tp of the layer input; get_full_inputs
		 * all-gathers it over the TP group before the recompute */
		if (b->ds && b->s->partition_activations && b->tp > 1)
			wait_on(b, coll(b, PLAN_ALL_GATHER, JOB_GROUP_TP, PLAN_STREAM_COMM_TP, "ag_ckpt",
					b->T * b->h / b->tp, b->pdt, in != PLAN_NONE ? in : b->last_compute));
		b->act[ai] = mem_alloc(b, PLAN_MEM_ACTIV, PLAN_DEV_GPU, a->saved, "activations",
				       PLAN_STREAM_COMPUTE);
		b->flags |= PLAN_F_RECOMPUTE;
		layer_fwd_all(b, l);
		b->flags &= (uint8_t)~PLAN_F_RECOMPUTE;
	} else if (b->s->recompute == STRAT_RECOMPUTE_OP) {
		b->flags |= PLAN_F_RECOMPUTE; /* ZeRO-3 fetches the units it recomputes, no more */
		for (int64_t u = 0; b->upl > 1 && u < 3; u++)
			sub_in(b, l, u);
		layer_op_recompute(b);
	} else if (b->s->recompute == STRAT_RECOMPUTE_SELECTIVE) {
		b->flags |= PLAN_F_RECOMPUTE;
		uint8_t ph = b->phase;
		b->phase = PLAN_PHASE_BWD;
		/* Megatron-Core checkpoints core attention whatever its kernel (TE's fused flash
		 * included: attention.py, checkpoint_core_attention); elsewhere flash attention
		 * saves no scores, so there is nothing to recompute */
		/* a captured module recomputes inside its backward graph: no host calls of its own */
		b->graph_on = cg_module(b, STRAT_CG_ATTN);
		if (rc_mod(b, STRAT_RC_CORE_ATTN) && (!b->flash || b->megatron))
			attention(b, "attn_recompute", false); /* the CP exchange again with it */
		b->graph_on = cg_mlp(b, layer_moe(b, l));
		if (a->rc > 0) { /* the modules' outputs are made again for the backward */
			b->bwd_rc = mem_alloc(b, PLAN_MEM_ACTIV, PLAN_DEV_GPU, a->rc, "recomputed",
				       PLAN_STREAM_COMPUTE);
			modules_recompute(b, l);
		}
		b->graph_on = false;
		b->phase = ph;
		b->flags &= (uint8_t)~PLAN_F_RECOMPUTE;
	}
	b->bwd_ws = mem_alloc(b, PLAN_MEM_WORKSPACE, PLAN_DEV_GPU, a->work, "workspace",
			      PLAN_STREAM_COMPUTE);
}

/* Piece pc of layer l's backward: LP_COMBINE begins the layer (its parameters, what it
 * recomputes, its workspace), LP_ATTN ends it */
static void layer_bwd_piece(struct pb *b, int64_t l, enum lpiece pc)
{
	b->layer = (int32_t)l;
	if (pc == LP_COMBINE) {
		struct act_sizes a = layer_act(b, l);
		layer_bwd_begin(b, l, &a, act_index(b, l));
	}
	layer_bwd_ops(b, l, pc);
	if (pc != LP_ATTN)
		return;
	int64_t ai = act_index(b, l);
	mem_free(b, b->bwd_ws, "workspace", PLAN_STREAM_COMPUTE);
	b->bwd_ws = -1;
	if (b->bwd_rc >= 0)
		mem_free(b, b->bwd_rc, "recomputed", PLAN_STREAM_COMPUTE);
	b->bwd_rc = -1;
	mem_free(b, b->act[ai], "activations", PLAN_STREAM_COMPUTE);
	b->act[ai] = -1;
	if (b->ckpt[ai] >= 0) {
		mem_free(b, b->ckpt[ai], "ckpt", PLAN_STREAM_COMPUTE);
		b->ckpt[ai] = -1;
	}
	if (b->upl == 1)
		unit_out(b, 1 + l);
}

static void layer_bwd(struct pb *b, int64_t l)
{
	for (int pc = LP_NUM - 1; pc >= 0; pc--)
		layer_bwd_piece(b, l, (enum lpiece)pc);
}

/* ---- embedding and head ------------------------------------------------------------------------- */

static void embed(struct pb *b, bool bwd)
{
	b->layer = -1;
	unit_in(b, 0);
	int64_t e = emb_w(b), pj = b->m->proj_dim;
	double bytes = (double)b->T * e * b->ab * 2;
	if (!bwd) {
		compute(b, PLAN_K_EMBED, "embed", 0, bytes, PLAN_STREAM_COMPUTE);
		if (b->tp > 1) /* vocab-parallel embedding: partial rows summed over TP */
			tp_exit(b, false);
		if (pj > 0)
			gemm(b, "project_in", b->T, b->h, pj, 1, 0, true);
	} else if (!b->lora) {
		if (pj > 0) /* the input grad for the lookup's backward, and the weight grad */
			gemm(b, "project_in_bwd", b->T, b->h, pj, 2, 0, false);
		/* the lookup's backward (embedding_dense_backward) builds a dense grad of this
		 * rank's vocabulary rows: zeroed (ab per element), then added to the accumulated
		 * grad: Megatron's fp32 main_grad (read 4 + ab, write 4), elsewhere param.grad in
		 * its own dtype (read 2 ab, write ab) */
		double rows = (double)(b->V / b->tp) * (double)e;
		double dense = rows * (b->megatron ? 2.0 * b->ab + 8.0 : 4.0 * b->ab);
		compute(b, PLAN_K_EMBED, "embed_bwd", 0, bytes * 2 + dense, PLAN_STREAM_COMPUTE);
	}
	unit_out(b, 0);
}

/* Bytes per logit element the cross-entropy moves, counted from the frameworks' code. The
 * fp32 cast of 16-bit logits reads ab and writes 4 (none in fp32 training).
 * Megatron's vocab-parallel CE (unfused, 2020-2024): cast, max (4), subtract (8), exp in place
 * (8), sum (4), divide into the softmax kept for backward (8); backward scales the softmax by
 * the grad in place (8) and casts back (4 + ab).
 * HF's causal-LM loss (eager model code): cast, log_softmax (reads twice, writes: 12);
 * backward: the nll grad (4), log_softmax backward (12) and the cast back.
 * A fused cross-entropy (Transformer Engine's, Liger's, flash-attn's) reads the 16-bit logits
 * twice (max and sum of exp, online) and writes the gradient over them in the same kernel;
 * backward scales that gradient in place by the loss's. */
static double ce_bytes(const struct pb *b, bool bwd)
{
	if (b->s->cross_entropy == STRAT_CE_FUSED)
		return bwd ? 2.0 * b->ab : 3.0 * b->ab;
	double cast = b->ab == 4 ? 0 : (double)(b->ab + 4);
	if (!b->eager) /* Megatron's code (also Megatron-DeepSpeed's) */
		return bwd ? 8 + cast : cast + 4 + 8 + 8 + 4 + 8;
	return bwd ? 4 + 12 + cast : cast + 12;
}

/* ZeRO-3 with a tied head: its GEMM uses the embedding's weight, which DeepSpeed gathers again
 * for it if it was released (HF's lm_head shares the Parameter; Megatron-DeepSpeed registers
 * it as an external parameter) and releases after unless its next use is near (keep_tied).
 * FSDP keeps it: the embedding is in the root unit. */
static bool tied_zero3(const struct pb *b)
{
	return b->ds && b->shard == SH_PARAM && tied_head(b);
}

static int32_t head_fwd(struct pb *b)
{
	int64_t mid = b->head_uid, vl = b->V / b->tp;
	b->layer = -1;
	unit_in(b, mid);
	/* Megatron's cross-entropy: the logits in 16 bits and the fp32 copy it works on in place,
	 * kept for backward. Eager (HF, torchtitan): logits.float() and log_softmax's fp32 output
	 * beside the 16-bit logits while the loss runs; only that output is kept. Fused: the
	 * logits, which then hold their gradient. */
	bool fused = b->s->cross_entropy == STRAT_CE_FUSED, eager = b->eager && !fused;
	int64_t kept = fused ? b->ab : b->eager ? 4 : b->ab + 4;
	int32_t buf = mem_alloc(b, PLAN_MEM_LOGITS, PLAN_DEV_GPU, b->T * vl * kept, "logits",
				PLAN_STREAM_COMPUTE);
	int32_t tmp = eager ? mem_alloc(b, PLAN_MEM_LOGITS, PLAN_DEV_GPU, b->T * vl * (b->ab + 4),
					"logits_tmp", PLAN_STREAM_COMPUTE)
			    : -1;
	if (!b->m->no_final_norm) /* OPT-350m's post-norm blocks have none */
		norm_op(b, "final_norm", (double)(b->sp ? b->T / b->tp : b->T) * b->h, false, 0);
	if (tied_zero3(b))
		fetch(b, 0, -1, 0, 0);
	tp_enter(b, false);
	if (b->m->proj_dim > 0)
		gemm(b, "project_out", b->T, b->m->proj_dim, b->h, 1, 0, true);
	gemm(b, "logits", b->T, vl, emb_w(b), 1, 0, true);
	if (tied_zero3(b) && !b->keep_tied[0])
		release(b, 0);
	compute(b, PLAN_K_LOSS, "loss", 0, (double)b->T * vl * ce_bytes(b, false), PLAN_STREAM_COMPUTE);
	if (tmp >= 0)
		mem_free(b, tmp, "logits_tmp", PLAN_STREAM_COMPUTE);
	if (b->tp > 1) /* vocab-parallel cross-entropy: max, sum of exp, target logit */
		coll_tp(b, PLAN_ALL_REDUCE, JOB_GROUP_TP, "ar_loss", 3 * b->T);
	unit_out(b, mid);
	return buf;
}

static void head_bwd(struct pb *b, int32_t logits)
{
	int64_t mid = b->head_uid, vl = b->V / b->tp;
	b->layer = -1;
	unit_in(b, mid);
	/* eager: log_softmax's fp32 grad and its 16-bit cast for the logits GEMM's backward (a
	 * fused loss left the grad in the logits' buffer) */
	int32_t g = b->eager && b->s->cross_entropy != STRAT_CE_FUSED
			    ? mem_alloc(b, PLAN_MEM_LOGITS, PLAN_DEV_GPU, b->T * vl * (b->ab + 4),
					"logits_grad", PLAN_STREAM_COMPUTE)
			    : -1;
	compute(b, PLAN_K_LOSS, "loss_bwd", 0, (double)b->T * vl * ce_bytes(b, true),
		PLAN_STREAM_COMPUTE);
	if (tied_zero3(b))
		fetch(b, 0, -1, 0, 0);
	col_bwd(b, logits_bwd_names, b->T, vl, emb_w(b), b->lora ? 1 : 2);
	if (tied_zero3(b) && !b->keep_tied[1])
		release(b, 0);
	if (b->m->proj_dim > 0) /* the grad on to the layers; the weight grad unless frozen */
		gemm(b, "project_out_bwd", b->T, b->m->proj_dim, b->h, b->lora ? 1 : 2, 0, false);
	mem_free(b, logits, "logits", PLAN_STREAM_COMPUTE);
	if (g >= 0)
		mem_free(b, g, "logits_grad", PLAN_STREAM_COMPUTE);
	if (!b->m->no_final_norm)
		norm_op(b, "final_norm_bwd", (double)(b->sp ? b->T / b->tp : b->T) * b->h, true, 0);
	unit_out(b, mid);
}

/* ---- pipeline schedule --------------------------------------------------------------------------- */

struct item {
	bool fwd;
	int32_t micro, chunk;
	bool pair; /* a forward that runs combined with the backward after it (run_pair) */
};

/* The order of forward/backward items on this stage (reference/deepspeed.md §5; Megatron's
 * schedules.py for 1F1B and interleaved). */
static size_t schedule(const struct pb *b, struct item *it)
{
	int64_t m = b->nmicro, s = b->c.pp, P = b->pp, n = 0;
	enum strat_schedule kind = b->pp > 1 ? b->s->schedule : STRAT_SCHED_GPIPE;
	bool moeo = b->s->moe_a2a_overlap; /* Megatron-Core's combined 1F1B (run_pair) */
	if (b->pp == 1 && moeo) {
		/* combined_1f1b_schedule_for_no_pipelining: the first forward alone, then each
		 * forward with the previous micro-batch's backward, the last backward alone */
		it[n++] = (struct item){true, 0, 0, false};
		for (int64_t i = 1; i < m; i++) {
			it[n++] = (struct item){true, (int32_t)i, 0, true};
			it[n++] = (struct item){false, (int32_t)(i - 1), 0, false};
		}
		it[n++] = (struct item){false, (int32_t)(m - 1), 0, false};
		return (size_t)n;
	}
	if (b->pp == 1) { /* no pipeline: forward then backward of each micro-batch */
		for (int64_t i = 0; i < m; i++) {
			it[n++] = (struct item){true, (int32_t)i, 0};
			it[n++] = (struct item){false, (int32_t)i, 0};
		}
		return (size_t)n;
	}
	if (kind == STRAT_SCHED_GPIPE) {
		for (int64_t i = 0; i < m; i++)
			it[n++] = (struct item){true, (int32_t)i, 0};
		for (int64_t i = 0; i < m; i++)
			it[n++] = (struct item){false, (int32_t)i, 0};
		return (size_t)n;
	}
	if (kind == STRAT_SCHED_INTERLEAVED && b->vp > 1) {
		int64_t V = b->vp, total = m * V;
		int64_t warm = (P - s - 1) * 2 + (V - 1) * P;
		/* the combined 1F1B runs one forward more first, so that each pair's forward and
		 * backward are independent (schedules.py) */
		if (moeo)
			warm++;
		if (warm > total)
			warm = total;
		int64_t fk = 0, bk = 0;
#define F_ITEM(k) (struct item){true, (int32_t)(((k) / (P * V)) * P + (k) % P), (int32_t)(((k) / P) % V)}
#define B_ITEM(k) (struct item){false, (int32_t)(((k) / (P * V)) * P + (k) % P), (int32_t)(V - 1 - ((k) / P) % V)}
		for (; fk < warm; fk++)
			it[n++] = F_ITEM(fk);
		while (fk < total) {
			it[n] = F_ITEM(fk);
			it[n++].pair = moeo;
			fk++;
			it[n++] = B_ITEM(bk);
			bk++;
		}
		for (; bk < total; bk++)
			it[n++] = B_ITEM(bk);
#undef F_ITEM
#undef B_ITEM
		return (size_t)n;
	}
	/* 1F1B: DeepSpeed's TrainSchedule warms up with stages - s forwards and then runs
	 * B before F; Megatron warms up with pp - s - 1 and runs F before B. Both keep
	 * min(pp - s, m) micro-batches in flight. */
	bool ds = kind == STRAT_SCHED_DS_1F1B;
	int64_t warm = ds ? P - s : P - s - 1;
	if (warm > m)
		warm = m;
	int64_t fi = 0, bi = 0;
	for (; fi < warm; fi++)
		it[n++] = (struct item){true, (int32_t)fi, 0};
	while (bi < m) {
		if (ds) {
			it[n++] = (struct item){false, (int32_t)bi++, 0};
			if (fi < m)
				it[n++] = (struct item){true, (int32_t)fi++, 0};
		} else {
			if (fi < m)
				it[n++] = (struct item){true, (int32_t)fi++, 0};
			it[n++] = (struct item){false, (int32_t)bi++, 0};
		}
	}
	return (size_t)n;
}

static int64_t stage_rank(const struct pb *b, int64_t stage)
{
	struct job_coord c = b->c;
	c.pp = (stage + b->pp) % b->pp;
	return job_rank_of(b->j, &c);
}

/* DeepSpeed's pipeline engine with TP > 1 sends a stage boundary's activation (grad) split
 * over the TP group, and the receiver all-gathers it (PartitionedTensor: pipe_partitioned /
 * grad_partitioned, default true; reference/deepspeed.md §5). */
static bool ds_split(const struct pb *b, bool grad)
{
	return b->ds && b->tp > 1 && !b->sp &&
	       (grad ? b->s->grad_partitioned : b->s->pipe_partitioned);
}

/* Megatron-LM's scatter-gather optimization (2021-02 to 2023-01): the same split without
 * sequence parallelism, both directions; the receiver's gather_split_1d_tensor all-gathers
 * the parts into a new tensor */
static bool mg_split(const struct pb *b)
{
	return b->megatron && b->tp > 1 && !b->sp && b->s->scatter_gather_p2p;
}

static bool p2p_split(const struct pb *b, bool grad)
{
	return ds_split(b, grad) || mg_split(b);
}

/* Bytes one rank sends across a stage boundary: the activation (or its grad), 1/tp of it
 * with sequence parallelism (each rank holds its shard) or a split (DeepSpeed's, Megatron's
 * scatter-gather). */
static int64_t p2p_bytes(const struct pb *b, bool grad)
{
	int64_t full = b->T * b->h * b->ab;
	return b->sp || p2p_split(b, grad) ? full / b->tp : full;
}

/* Megatron's gather_split_1d_tensor of a received part (an empty buffer and an all-gather over
 * TP) before the compute that uses it */
static void mg_gather(struct pb *b, const char *name, uint32_t recv)
{
	if (mg_split(b))
		wait_on(b, coll(b, PLAN_ALL_GATHER, JOB_GROUP_TP, PLAN_STREAM_COMM_TP, name,
				b->T * b->h / b->tp, b->pdt, recv));
}

/* Receive the activation (dir 0) from peer or the grad (dir 1), or wait for the receive posted
 * ahead (Megatron's overlap_p2p_comm); Megatron's split one is gathered */
static void p2p_recv(struct pb *b, int dir, int64_t peer)
{
	bool grad = dir == 1;
	uint32_t id = b->ahead[dir];
	if (id != PLAN_NONE) {
		wait_on(b, id);
		b->ahead[dir] = PLAN_NONE;
	} else {
		id = p2p(b, false, peer, grad ? PLAN_P2P_GRAD : PLAN_P2P_ACT, p2p_bytes(b, grad),
			 grad ? "recv_grad" : "recv_act");
	}
	mg_gather(b, grad ? "ag_pipe_grad" : "ag_pipe_act", id);
}

/* A D2H read the host waits for, issued where the compute stream has got to (what it waits
 * for included): a .tolist() or .item() of a GPU tensor */
static void host_read(struct pb *b, const char *name, int64_t bytes)
{
	uint32_t d[8];
	int n = 0;
	if (b->last_compute != PLAN_NONE)
		d[n++] = b->last_compute;
	for (int i = 0; i < PLAN_NUM_STREAMS && n < 8; i++)
		if (b->wait[i] != PLAN_NONE)
			d[n++] = b->wait[i];
	uint32_t id = emit(b, PLAN_COPY, PLAN_STREAM_COPY_OUT, name, d, n, false);
	struct plan_op *op = &b->p->ops[id];
	op->u.copy.dir = PLAN_D2H;
	op->u.copy.bytes = bytes;
	op->flags |= PLAN_F_HOSTWAIT;
}

/* DeepSpeed's PartitionedTensor on the receiving side of a split stage-boundary tensor
 * (runtime/utils.py, reference/deepspeed.md §5). from_meta reads the meta back (.tolist(): a
 * host sync) before 0.12.6; full() zeroes a flat buffer of the whole tensor, all-gathers the
 * parts into it over the TP group and returns a clone. Before 0.12.4 it gathers into a list
 * of views of the buffer: it copies its own part in, and PyTorch's list all-gather gathers
 * into a flattened temporary and copies each part out on the NCCL stream. */
static void pipe_full(struct pb *b, const char *name)
{
	int64_t whole = b->T * b->h * b->ab;
	double full = (double)whole, part = full / (double)b->tp;
	bool list = b->s->ds_pipe_list_gather;
	if (b->s->ds_pipe_meta_sync) /* the meta: ndims, 3 sizes, parts, rank, tp + 1 offsets */
		host_read(b, "pipe_meta_read", 8 * (7 + b->tp));
	int32_t buf = mem_alloc(b, PLAN_MEM_WORKSPACE, PLAN_DEV_GPU, (list ? 2 : 1) * whole,
				"pipe_full", PLAN_STREAM_COMPUTE);
	uint32_t z = elem_k(b, PLAN_K_ELEMWISE, "pipe_zero", list ? full + 2.0 * part : full,
			    list ? 1 : 0);
	if (list) /* flat_tensor.narrow() per part */
		b->p->ops[z].host_views = (uint32_t)b->tp;
	uint32_t id = coll(b, PLAN_ALL_GATHER, JOB_GROUP_TP, PLAN_STREAM_COMM_TP, name,
			   b->T * b->h / b->tp, b->pdt, z);
	if (list && id != PLAN_NONE) {
		id = compute_d(b, PLAN_K_ELEMWISE, "ag_copy_out", 0, 2.0 * full, PLAN_STREAM_COMM_TP,
			       id);
		b->p->ops[id].u.compute.extra_kernels = (uint8_t)(b->tp > 256 ? 255 : b->tp - 1);
	}
	wait_on(b, id);
	elem(b, PLAN_K_ELEMWISE, "pipe_clone", 2.0 * full);
	mem_free(b, buf, "pipe_full", PLAN_STREAM_COMPUTE);
}

/* _exec_recv_activations clones each tensor it received and _exec_forward_pass clones its
 * inputs again: two copies of the activation, or of the meta and the part when split */
static void pipe_in_clones(struct pb *b)
{
	elem_k(b, PLAN_K_ELEMWISE, "pipe_in_clone", 4.0 * (double)p2p_bytes(b, false),
	       ds_split(b, false) ? 3 : 1);
}

/* The micro-batch's inputs (token ids and labels, int64) come to the GPU on the stages that
 * use them, the first and the last. The frameworks copy them with a blocking .to() / .cuda()
 * (Megatron's broadcast_data also reads the sizes back with .cpu()), so the host waits for the
 * GPU there (sim/engine.c) and the first kernels wait for the data. */
static void batch_in(struct pb *b)
{
	uint8_t fl = b->flags;
	int32_t layer = b->layer;
	b->flags |= PLAN_F_BATCH;
	b->layer = -1;
	wait_on(b, copy(b, PLAN_H2D, "get_batch", b->T * 8, PLAN_NONE));
	b->flags = fl;
	b->layer = layer;
}

/* DeepSpeed's TrainSchedule sends a step's result at the start of the stage's next step,
 * where the two neighbours meet: a forward step sends the previous backward's grad and then
 * receives its activation; a backward step receives its grad and then sends the previous
 * forward's activation. Sends block (p2p.send), so a pair of neighbours starts such a step
 * together (reference/deepspeed.md §5; docs/plan.md). */
static void hold_send(struct pb *b, bool grad, int64_t peer, int64_t step)
{
	b->held.on = true, b->held.grad = grad, b->held.peer = peer, b->held.step = step;
}

/* The TrainSchedule step of an item: forward of micro-batch i at 2i + s, backward at
 * 2i + 2P - s - 1 (stage s of P); the steps between a stage's items are idle. */
static int64_t ds_step(const struct pb *b, const struct item *it)
{
	int64_t s = b->c.pp;
	return it->fwd ? 2 * it->micro + s : 2 * it->micro + 2 * b->pp - s - 1;
}

/* A split send's PartitionedTensor.to_meta(): a LongTensor of the sizes made on the CPU and
 * copied to the GPU with a blocking .to(), so the host waits for the GPU's work before it
 * (the forward or backward that made the tensor). 8 longs: its shape, parts, rank, offsets. */
static void pipe_meta(struct pb *b, bool grad)
{
	if (!ds_split(b, grad))
		return;
	/* PartitionedTensor(tensor): .contiguous().view(-1).narrow(part).clone() */
	elem(b, PLAN_K_ELEMWISE, "pipe_part", 2.0 * (double)p2p_bytes(b, grad));
	uint32_t id = copy(b, PLAN_H2D, "pipe_meta", 8 * (4 + b->tp), PLAN_NONE);
	if (id != PLAN_NONE)
		b->p->ops[id].flags |= PLAN_F_HOSTWAIT;
}

static void flush_send(struct pb *b)
{
	if (!b->held.on)
		return;
	b->held.on = false;
	bool g = b->held.grad;
	if (g) /* _exec_send_grads partitions the grad when it sends it */
		pipe_meta(b, true);
	p2p(b, true, b->held.peer, g ? PLAN_P2P_GRAD : PLAN_P2P_ACT, p2p_bytes(b, g),
	    g ? "send_grad" : "send_act");
}

/* Megatron's interleaved schedule with overlap_p2p_comm posts the receive of the next
 * forward's input with this forward's send, and of the next backward's grad with this
 * backward's send (the first backward's after the last warm-up forward), as separate irecvs
 * that only the item using them waits for (schedules.py: pp_post_forward, pp_post_backward):
 * the transfer runs under the compute between. Called after item i. */
static void recv_ahead(struct pb *b, const struct item *it, size_t n, size_t i)
{
	for (int dir = 0; dir < 2; dir++) {
		bool fwd = dir == 0;
		size_t j = i + 1;
		while (j < n && it[j].fwd != fwd)
			j++;
		if (b->ahead[dir] != PLAN_NONE || j == n)
			continue;
		/* after a forward for forwards, a backward for backwards; the first backward's
		 * after the last warm-up forward (the steady state starts with F, B) */
		bool first_bwd = !fwd && it[i].fwd && j == i + 2 && it[i + 1].fwd;
		for (size_t k = 0; first_bwd && k < i; k++)
			first_bwd = it[k].fwd;
		if (it[i].fwd != fwd && !first_bwd)
			continue;
		int64_t vs = (int64_t)it[j].chunk * b->pp + b->c.pp;
		if (fwd ? vs == 0 : vs == b->pp * b->vp - 1)
			continue; /* the first virtual stage receives no input, the last no grad */
		int32_t micro = b->micro, stage = b->stage, layer = b->layer;
		enum plan_phase ph = b->phase;
		b->micro = it[j].micro, b->stage = (int32_t)vs, b->layer = -1;
		b->phase = fwd ? PLAN_PHASE_FWD : PLAN_PHASE_BWD;
		int64_t peer = stage_rank(b, b->c.pp + (fwd ? -1 : 1));
		b->ahead[dir] = p2p_op(b, false, peer, fwd ? PLAN_P2P_ACT : PLAN_P2P_GRAD,
				       p2p_bytes(b, !fwd), fwd ? "recv_act" : "recv_grad", true);
		b->micro = micro, b->stage = stage, b->layer = layer, b->phase = ph;
	}
}

/* Whether this backward ends with the bucketed gradient reduction (not ZeRO-3's per-unit one),
 * and whether DeepSpeed holds its IPG buckets for it meanwhile */
static bool bucket_reduces(const struct pb *b)
{
	return reduces_now(b) && b->shard != SH_PARAM;
}

static bool ipg_buckets(const struct pb *b)
{
	return bucket_reduces(b) && b->ds && b->shard >= SH_OPT && b->s->contiguous_gradients &&
	       b->s->offload_optimizer == STRAT_OFFLOAD_NONE;
}

/* An item's work before its layers: its receive, inputs and held send; the embedding
 * (forward) or the head's backward */
static void item_begin(struct pb *b, const struct item *it, int32_t *logits)
{
	int64_t vs = (int64_t)it->chunk * b->pp + b->c.pp, nvs = b->pp * b->vp;
	bool first = vs == 0, last = vs == nvs - 1;
	int64_t lo = b->first[it->chunk], n = b->nl[it->chunk];
	int64_t prev = stage_rank(b, b->c.pp - 1), next = stage_rank(b, b->c.pp + 1);
	b->micro = it->micro;
	b->stage = (int32_t)vs;
	b->layer = -1; /* the item's receive, inputs and held send belong to no layer */
	b->u_lo = first ? 0 : 1 + lo * b->upl;
	b->u_hi = last ? b->head_uid : (lo + n) * b->upl;
	if (it->fwd) {
		b->phase = PLAN_PHASE_FWD;
		/* a held activation (warm-up: the backward step between was idle) or grad */
		flush_send(b);
		if (!first) {
			p2p_recv(b, 0, prev);
			if (b->ds)
				pipe_in_clones(b);
			if (ds_split(b, false))
				pipe_full(b, "ag_pipe_act");
		}
		if (first || last)
			batch_in(b);
		if (first)
			embed(b, false);
		return;
	}
	b->phase = PLAN_PHASE_BWD;
	if (ipg_buckets(b)) /* IPG bucket(s), two when overlap_comm (§2.3) */
		b->bucket_buf = mem_alloc(b, PLAN_MEM_BUCKETS, PLAN_DEV_GPU,
					  bucket_elems(b) * tw_dtype_bytes(b->comm_dt) *
						  (b->s->overlap_comm ? 2 : 1),
					  "ipg_bucket", PLAN_STREAM_COMPUTE);
	if (b->ds && b->shard == SH_GRAD && b->s->offload_optimizer == STRAT_OFFLOAD_NONE)
		b->grads_part = mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU,
					  shard_elems(b, b->psit, b->psite, b->nz) * b->pbytes,
					  "grads_in_partition",
					  PLAN_STREAM_COMPUTE);
	if (b->ds && b->shard == SH_OPT && b->grads_full < 0) /* param.grad, whole, 16-bit */
		b->grads_full = mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, b->psit * b->pbytes,
					  "grads", PLAN_STREAM_COMPUTE);
	if (b->held.on && b->held.step + 1 < ds_step(b, it))
		flush_send(b); /* sent at an idle step before this one */
	/* DeepSpeed's backward first restores the stage's split output for autograd: in
	 * _exec_recv_grads before the receive when the grad comes whole, else in
	 * _exec_backward_pass, where the split grad is gathered next */
	bool out_split = !last && ds_split(b, false), grad_split = !last && ds_split(b, true);
	if (out_split && !grad_split)
		pipe_full(b, "ag_pipe_out");
	if (!last)
		p2p_recv(b, 1, next);
	flush_send(b);
	if (out_split && grad_split)
		pipe_full(b, "ag_pipe_out");
	if (grad_split)
		pipe_full(b, "ag_pipe_grad");
	if (last)
		head_bwd(b, logits[it->micro]);
}

/* An item's work after its layers: the head (forward) or the embedding's backward, the
 * send, and after a backward the gradient reductions it starts */
static void item_end(struct pb *b, const struct item *it, int32_t *logits)
{
	int64_t vs = (int64_t)it->chunk * b->pp + b->c.pp, nvs = b->pp * b->vp;
	bool first = vs == 0, last = vs == nvs - 1;
	int64_t prev = stage_rank(b, b->c.pp - 1), next = stage_rank(b, b->c.pp + 1);
	bool ds_pipe = b->ds && b->pp > 1;
	if (it->fwd) {
		if (last) {
			logits[it->micro] = head_fwd(b);
		} else if (ds_pipe) {
			pipe_meta(b, false); /* _exec_forward_pass partitions the output */
			hold_send(b, false, next, ds_step(b, it));
		} else {
			p2p(b, true, next, PLAN_P2P_ACT, p2p_bytes(b, false), "send_act");
		}
		return;
	}
	bool red = bucket_reduces(b), ipg = ipg_buckets(b);
	if (first)
		embed(b, true);
	else if (ds_pipe)
		hold_send(b, true, prev, ds_step(b, it));
	else
		p2p(b, true, prev, PLAN_P2P_GRAD, p2p_bytes(b, true), "send_grad");
	b->layer = -1;
	/* DeepSpeed's pipeline reduces the grads at its last step (ReduceGrads), after the
	 * last backward's grad went to the previous stage */
	if (ds_pipe && red)
		flush_send(b);
	if (b->shard == SH_PARAM) {
		reduce_scatter_pending(b, &b->expert);
		reduce_scatter_pending(b, &b->dense);
	} else if (red) {
		flush_dense(b, &b->dense, true);
		flush_dense(b, &b->expert, true);
		b->dense.done = b->expert.done = 0; /* the next pass starts at the end again */
	}
	if (ipg) {
		mem_free(b, b->bucket_buf, "ipg_bucket", PLAN_STREAM_COMPUTE);
		b->bucket_buf = -1;
	}
	if (b->grads_part >= 0) {
		mem_free(b, b->grads_part, "grads_in_partition", PLAN_STREAM_COMPUTE);
		b->grads_part = -1;
	}
}

static void run_item(struct pb *b, const struct item *it, int32_t *logits)
{
	int64_t lo = b->first[it->chunk], n = b->nl[it->chunk];
	item_begin(b, it, logits);
	if (it->fwd)
		for (int64_t l = lo; l < lo + n; l++)
			layer_fwd(b, l);
	else
		for (int64_t l = lo + n - 1; l >= lo; l--)
			layer_bwd(b, l);
	item_end(b, it, logits);
}

/* One micro-batch's place in the plan while another's ops are emitted between its own:
 * what its next ops wait for and carry */
struct chain {
	uint32_t wait[PLAN_NUM_STREAMS];
	uint32_t last_compute, tpo_ag, before_gemm;
	uint8_t phase, flags;
	int32_t layer, micro, stage, ugrad;
	int64_t u_lo, u_hi;
};

static void chain_get(const struct pb *b, struct chain *c)
{
	memcpy(c->wait, b->wait, sizeof(c->wait));
	c->last_compute = b->last_compute, c->tpo_ag = b->tpo_ag, c->before_gemm = b->before_gemm;
	c->phase = b->phase, c->flags = b->flags;
	c->layer = b->layer, c->micro = b->micro, c->stage = b->stage, c->ugrad = b->ugrad;
	c->u_lo = b->u_lo, c->u_hi = b->u_hi;
}

static void chain_set(struct pb *b, const struct chain *c)
{
	memcpy(b->wait, c->wait, sizeof(b->wait));
	b->last_compute = c->last_compute, b->tpo_ag = c->tpo_ag, b->before_gemm = c->before_gemm;
	b->phase = c->phase, b->flags = c->flags;
	b->layer = c->layer, b->micro = c->micro, b->stage = c->stage, b->ugrad = c->ugrad;
	b->u_lo = c->u_lo, b->u_hi = c->u_hi;
}

/* Megatron-Core's combined 1F1B step (overlap_moe_expert_parallel_comm; combined_1f1b.py,
 * TransformerModelChunkSchedulePlan.run): forward item f and backward item k run together,
 * the forward's layer i beside the backward's layer n - 1 - i, in the order of
 * TransformerLayerSchedulePlan.run:
 *     comm stream:     combine_bwd | dispatch_fwd, dispatch_bwd | combine_fwd
 *     compute stream:  attn_fwd    | mlp_bwd, mlp_fwd           | attn_bwd
 * so each all-to-all runs under the other micro-batch's compute. Each item keeps its own
 * dependencies (struct chain); the layers one item has more than the other run alone after. */
static void run_pair(struct pb *b, const struct item *f, const struct item *k, int32_t *logits)
{
	static const struct {
		bool fwd;
		enum lpiece pc;
	} order[] = { { false, LP_COMBINE }, { true, LP_ATTN },	     { false, LP_MLP },
		      { true, LP_DISPATCH }, { false, LP_DISPATCH }, { true, LP_MLP },
		      { true, LP_COMBINE },  { false, LP_ATTN } };
	struct chain cf, ck;
	int64_t flo = b->first[f->chunk], fn = b->nl[f->chunk];
	int64_t klo = b->first[k->chunk], kn = b->nl[k->chunk], both = fn < kn ? fn : kn;
	item_begin(b, f, logits);
	chain_get(b, &cf);
	for (int s = 0; s < PLAN_NUM_STREAMS; s++) /* the backward waits for none of it */
		b->wait[s] = PLAN_NONE;
	b->tpo_ag = PLAN_NONE;
	item_begin(b, k, logits);
	chain_get(b, &ck);
	for (int64_t i = 0; i < both; i++)
		for (size_t j = 0; j < sizeof(order) / sizeof(order[0]); j++) {
			struct chain *c = order[j].fwd ? &cf : &ck;
			chain_set(b, c);
			if (order[j].fwd)
				layer_fwd_piece(b, flo + i, order[j].pc);
			else
				layer_bwd_piece(b, klo + kn - 1 - i, order[j].pc);
			chain_get(b, c);
		}
	chain_set(b, &ck);
	for (int64_t i = both; i < kn; i++)
		layer_bwd(b, klo + kn - 1 - i);
	chain_get(b, &ck);
	chain_set(b, &cf);
	for (int64_t i = both; i < fn; i++)
		layer_fwd(b, flo + i);
	/* Megatron posts both sends after the whole pair is on the compute stream (run's phase
	 * 5: PyTorch makes the NCCL stream wait for the current stream), so each waits for the
	 * other item's last kernel too */
	uint32_t fk = b->last_compute, kk = ck.last_compute;
	uint32_t pair_end = fk == PLAN_NONE ? kk : kk == PLAN_NONE || fk > kk ? fk : kk;
	b->last_compute = ck.last_compute = pair_end;
	item_end(b, f, logits);
	chain_get(b, &cf);
	chain_set(b, &ck);
	/* what the forward left for a next op that never came, the backward's next op waits for */
	for (int s = 0; s < PLAN_NUM_STREAMS; s++)
		if (b->wait[s] == PLAN_NONE)
			b->wait[s] = cf.wait[s];
	item_end(b, k, logits);
}

/* ---- model states and the optimizer step ------------------------------------------------------ */

static int opt_state_bytes(enum strat_optimizer o)
{
	switch (o) {
	case STRAT_OPT_ADAM:
	case STRAT_OPT_ADAMW:
		return 8; /* exp_avg, exp_avg_sq in fp32 */
	default:
		return 4; /* one fp32 state: momentum (SGD), Lion, Adagrad */
	}
}

static enum plan_device off_dev(enum strat_offload o)
{
	return o == STRAT_OFFLOAD_NVME ? PLAN_DEV_NVME : o == STRAT_OFFLOAD_CPU ? PLAN_DEV_HOST
										  : PLAN_DEV_GPU;
}

/* Elements of an optimizer sub-group: ZeRO-3 steps its partition sub_group_size elements at a
 * time (DeepSpeed's _create_fp16_sub_groups), the others all at once. */
static int64_t sub_group_elems(const struct pb *b, int64_t part)
{
	int64_t sg = b->shard == SH_PARAM && b->s->sub_group_size > 0 ? b->s->sub_group_size : part;
	return sg > 0 ? sg : 1;
}

/* Elements of this rank's optimizer partition: its trainable parameters, sharded when the
 * optimizer states are */
static int64_t opt_part(const struct pb *b)
{
	return shard_elems(b, b->psit, b->psite, b->shard >= SH_OPT ? b->nz : 1);
}

/* The sub-groups (by index, of nsub) that live and step on the host: [*first, *first + *count).
 * ZeRO-3's partial offload (offload_optimizer.ratio < 1) splits the partition's sub-groups by
 * index, as Python's int() of a double: from DeepSpeed 0.18.0 the first int((1 - ratio) x nsub)
 * stay on the GPU and the rest go to DeepSpeedCPUAdam; before, the first int(ratio x nsub)
 * went to the host (Twin-Flow) and the rest stayed. The GPU keeps fp32 master, states and
 * grads, stepped by torch's AdamW. NVMe offload takes every sub-group (strategy warns that
 * its ratio is not modelled). */
static void host_subgroups(const struct pb *b, int64_t nsub, int64_t *first, int64_t *count)
{
	const struct strategy *s = b->s;
	*first = 0, *count = nsub;
	if (!b->ds || s->offload_optimizer == STRAT_OFFLOAD_NONE) {
		*count = 0;
		return;
	}
	if (s->offload_optimizer != STRAT_OFFLOAD_CPU || b->shard != SH_PARAM ||
	    s->offload_ratio >= 1.0)
		return;
	if (s->ds_ratio_last) {
		int64_t gpu = (int64_t)((1.0 - s->offload_ratio) * (double)nsub);
		*first = gpu < nsub ? gpu : nsub;
		*count = nsub - *first;
	} else {
		int64_t host = (int64_t)(s->offload_ratio * (double)nsub);
		*count = host < nsub ? host : nsub;
	}
}

/* Elements of a `part`-element optimizer partition that live and step on the host (the short
 * sub-group is the last) */
static int64_t host_opt_elems(const struct pb *b, int64_t part)
{
	int64_t sg = sub_group_elems(b, part), nsub = (part + sg - 1) / sg, first, count;
	host_subgroups(b, nsub, &first, &count);
	int64_t lo = first * sg, hi = (first + count) * sg;
	if (lo > part)
		lo = part;
	if (hi > part)
		hi = part;
	return hi - lo;
}

/* The persistent model states (reference/deepspeed.md §2.3, §2.5; docs/memory.md). */
static void alloc_states(struct pb *b)
{
	const struct strategy *s = b->s;
	int64_t P = b->psi, Pt = b->psit, N = b->nz, pb = b->pbytes;
	/* this rank's shards: parameters (all) and trainable ones, N ways */
	int64_t PN = shard_elems(b, P, b->psie, N), PtN = shard_elems(b, Pt, b->psite, N);
	int64_t master = b->mixed ? 4 : 0, os = b->obytes;
	enum plan_stream st = PLAN_STREAM_COMPUTE;
	enum plan_device od = b->ds ? off_dev(s->offload_optimizer) : PLAN_DEV_GPU;
	enum plan_device pd = b->ds && b->shard == SH_PARAM ? off_dev(s->offload_param)
							    : PLAN_DEV_GPU;
	bool offo = od != PLAN_DEV_GPU;
	if (b->fsdp && b->shard == SH_PARAM) {
		/* FSDP keeps the fp32 flat parameter sharded; 16-bit copies only when gathered */
		mem_alloc(b, b->mixed ? PLAN_MEM_MASTER : PLAN_MEM_PARAMS, PLAN_DEV_GPU,
			  PN * 4, "flat_param_shard", st);
		mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, PtN * 4, "grad_shard", st);
		mem_alloc(b, PLAN_MEM_OPTIM, PLAN_DEV_GPU, PtN * os, "optimizer", st);
		return;
	}
	int64_t pn = b->shard == SH_PARAM ? N : 1;      /* parameter partitions */
	int64_t Pton = opt_part(b);
	mem_alloc(b, PLAN_MEM_PARAMS, pd,
		  shard_elems(b, P, b->psie, pn) * (b->shard == SH_PARAM ? part_bytes(b) : pb),
		  "params", st);
	if (b->shard == SH_PARAM && b->persist_elems > 0)
		mem_alloc(b, PLAN_MEM_PARAMS, PLAN_DEV_GPU, b->persist_elems * pb,
			  "persistent_params", st);
	if (s->fp8_gemm) /* Transformer Engine keeps fp8 copies of the GEMM weights */
		mem_alloc(b, PLAN_MEM_PARAMS, PLAN_DEV_GPU, b->psi_layers / pn, "fp8_weights", st);
	if (od == PLAN_DEV_NVME) {
		/* master and states on NVMe, swapped through pinned buffers per sub-group */
		int64_t sg = s->sub_group_size > 0 && s->sub_group_size < Pton ? s->sub_group_size
										   : Pton;
		mem_alloc(b, PLAN_MEM_MASTER, PLAN_DEV_NVME, Pton * master, "master", st);
		mem_alloc(b, PLAN_MEM_OPTIM, PLAN_DEV_NVME, Pton * os, "optimizer", st);
		mem_alloc(b, PLAN_MEM_BUCKETS, PLAN_DEV_HOST, 4 * sg * 4, "nvme_swap_buffers", st);
	} else {
		/* on od, except the GPU's sub-groups under partial offload */
		int64_t h = offo ? host_opt_elems(b, Pton) : Pton;
		mem_alloc(b, PLAN_MEM_MASTER, od, h * master, "master", st);
		mem_alloc(b, PLAN_MEM_OPTIM, od, h * os, "optimizer", st);
		mem_alloc(b, PLAN_MEM_MASTER, PLAN_DEV_GPU, (Pton - h) * master, "master_gpu", st);
		mem_alloc(b, PLAN_MEM_OPTIM, PLAN_DEV_GPU, (Pton - h) * os, "optimizer_gpu", st);
	}
	if (pd == PLAN_DEV_NVME) { /* param swap buffers: buffer_count x buffer_size elements */
		double sw = (double)b->s->offload_param_buffers *
			    (double)b->s->offload_param_buffer_elems * (double)pb;
		mem_alloc(b, PLAN_MEM_BUCKETS, PLAN_DEV_HOST, sw < 4e18 ? (int64_t)sw : (int64_t)4e18,
			  "param_swap_buffers", st);
	}
	/* gradients */
	if (!b->ds || b->shard == SH_NONE) {
		mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, Pt * b->gbytes, "grads", st);
	} else if (b->shard == SH_OPT && bf16_optimizer(b)) {
		/* the BF16_Optimizer's full fp32 gradient buffer, beside the bf16 param.grad
		 * (reference/deepspeed.md §1.10) */
		mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, Pt * 4, "fp32_grads", st);
	} else if (b->shard == SH_GRAD && !offo) {
		mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, PtN * pb, "grads_accumulated", st);
	} else if (b->shard == SH_PARAM) {
		mem_alloc(b, PLAN_MEM_GRADS, offo ? PLAN_DEV_HOST : PLAN_DEV_GPU, PtN * b->gbytes,
			  "grad_partitions", st);
	}
	if (offo) { /* pinned fp32 gradient partition for the CPU optimizer (partial offload:
		     * the GPU's sub-groups keep theirs on the GPU) */
		int64_t h = host_opt_elems(b, PtN);
		mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_HOST, h * 4, "grads_fp32", st);
		mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, (PtN - h) * 4, "grads_fp32_gpu", st);
		if (b->shard <= SH_GRAD && b->nmicro > 1)
			mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_HOST, PtN * pb,
				  "accumulated_grads_in_cpu", st);
	}
	if (b->ds && b->shard == SH_PARAM && s->contiguous_gradients)
		mem_alloc(b, PLAN_MEM_BUCKETS, PLAN_DEV_GPU,
			  2 * bucket_elems(b) * tw_dtype_bytes(b->comm_dt), "ipg_bucket", st);
}

/* Whether unit u runs on this rank's stage: the embedding on the first, the head on the last,
 * the layers of the stage's chunks */
static bool on_stage(const struct pb *b, int64_t u)
{
	if (u == 0 || u == b->head_uid)
		return b->c.pp == (u == 0 ? 0 : b->pp - 1);
	for (int64_t c = 0; c < b->vp; c++)
		if (u >= 1 + b->first[c] * b->upl && u < 1 + (b->first[c] + b->nl[c]) * b->upl)
			return true;
	return false;
}

/* Whether DeepSpeed's step passes over the GPU grad partition itself for the inf/nan check
 * and the norm (ZeRO-1/2 and 3 without optimizer offload; the BF16_Optimizer has its own) */
static bool ds_grad_passes(const struct pb *b)
{
	return b->ds && b->s->offload_optimizer == STRAT_OFFLOAD_NONE && b->shard >= SH_OPT &&
	       !bf16_optimizer(b);
}

/* Grad tensors DeepSpeed's step walks one by one on this rank: ZeRO-3 a partition of every
 * parameter, ZeRO-1/2 the parameters in (or straddling into) the rank's partition */
static int64_t step_tensors(const struct pb *b, int64_t n)
{
	int64_t nt = 0;
	for (int64_t u = 0; u < b->nunits; u++)
		nt += on_stage(b, u) ? unit_tensors(b, u, false) : 0;
	return b->shard == SH_PARAM ? nt : nt / n + 1;
}

/* Megatron's _allreduce_layernorm_grads (finalize_model_grads): under SP every TP rank holds
 * whole copies of some weights but runs them on its own tokens, so their grads are partial sums
 * and are added over TP, coalesced into one all-reduce before the step. Those are the params
 * marked sequence_parallel: the norms, the row-parallel linears' biases, MoE routers (and the
 * shared experts' gate) and MLA's duplicated down projections with their latent norms.
 * Returns the elements on this rank. */
static int64_t sp_partial_grads(const struct pb *b)
{
	const struct model *m = b->m;
	if (!b->megatron || !b->sp || b->tp <= 1 || b->lora)
		return 0;
	int64_t npl = npl_of(b), n = 0;
	for (int64_t c = 0; c < b->vp; c++)
		for (int64_t l = b->first[c]; l < b->first[c] + b->nl[c]; l++) {
			n += npl * norm_w(b) + mla_down_w(b) + (m->out_bias ? b->h : 0);
			if (layer_moe(b, l))
				n += b->E * b->h + (b->fs > 0 && m->shared_expert_gate ? b->h : 0);
			else if (m->mlp_bias)
				n += b->h;
		}
	if (b->c.pp == b->pp - 1 && !m->no_final_norm)
		n += norm_w(b);
	return n;
}

static uint32_t optim_op(struct pb *b, int64_t n, enum plan_stream st, uint32_t dep)
{
	/* Adam: read and write master and states, read the fp32 grad (28 B/param). On the GPU
	 * the mixed-precision step makes more passes over memory (Megatron's
	 * MixedPrecisionOptimizer.step, DeepSpeed's fp16/ZeRO optimizers): unscale and check
	 * the fp32 grads for inf under loss scaling (read + write, 8 B), their norm (read, 4 B;
	 * DeepSpeed's own pass, grad_norm_pass, when it makes one), and the 16-bit copy of the
	 * updated master (read 4, write pbytes). The host step (DeepSpeedCPUAdam) fuses them;
	 * its cast is a separate op. */
	int64_t bpp = 2 * (4 + b->obytes) + 4;
	bool norm = (b->s->gradient_clipping > 0 || b->ds) && !ds_grad_passes(b);
	if (st != PLAN_STREAM_HOST)
		bpp += (b->s->loss_scaling ? 8 : 0) + (norm ? 4 : 0) + 4 + b->pbytes;
	uint32_t id = compute_d(b, PLAN_K_OPTIM, "optimizer", 0, (double)n * (double)bpp, st, dep);
	struct plan_op *op = &b->p->ops[id];
	op->u.compute.m = n;
	op->u.compute.k = bpp;
	op->u.compute.flops = 12.0 * (double)n; /* FMA-counted Adam arithmetic, for reference */
	return id;
}

static void optimizer_step(struct pb *b)
{
	const struct strategy *s = b->s;
	int64_t Pt = b->psit, N = b->nz;
	b->phase = PLAN_PHASE_OPT;
	b->layer = b->micro = -1;
	b->stage = (int32_t)b->c.pp; /* this rank's pipeline stage (its collectives with other
				       * stages, the tied embedding's, are told apart by it) */
	wait_on(b, b->last_red);
	wait_on(b, b->last_d2h);
	int64_t on = b->shard >= SH_OPT ? N : 1;
	int64_t part = opt_part(b);
	bool offo = b->ds && s->offload_optimizer != STRAT_OFFLOAD_NONE && b->shard >= SH_OPT;
	int32_t zero1_part = -1;
	if (b->ds && b->shard == SH_OPT) { /* the accumulated partition replaces full grads */
		if (!offo && !bf16_optimizer(b)) /* (the BF16_Optimizer steps on its fp32 grads) */
			zero1_part = mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, part * b->pbytes,
					       "grads_partition", PLAN_STREAM_COMPUTE);
		mem_free(b, b->grads_full, "grads", PLAN_STREAM_COMPUTE);
		b->grads_full = -1;
	}
	wait_on(b, coll(b, PLAN_ALL_REDUCE, JOB_GROUP_TP, PLAN_STREAM_COMM, "ar_sp_grads",
			sp_partial_grads(b), s->grad_accum_dtype, b->last_compute));
	/* tied embeddings on two stages: the first and the last stage add their word-embedding
	 * grads before the step (Megatron's _allreduce_word_embedding_grads over main_grad,
	 * DeepSpeed's ReduceTiedGrads) */
	if (b->pp > 1 && b->m->tied_embeddings && !b->lora && (b->c.pp == 0 || b->c.pp == b->pp - 1))
		wait_on(b, coll(b, PLAN_ALL_REDUCE, JOB_GROUP_EMB, PLAN_STREAM_COMM, "ar_embed",
				b->V / b->tp * emb_w(b), s->grad_accum_dtype, b->last_compute));
	enum job_group g = b->dgroup;
	/* the inf/nan check before the step: under loss scaling, and in DeepSpeed's bf16 with
	 * bf16.check_grad_overflow (its default from 0.19.3) */
	bool ovf = s->loss_scaling || (b->ds && s->check_grad_overflow && b->pdt == TW_BF16);
	bool passes = ds_grad_passes(b), ds_scan = ovf && passes;
	int64_t nt = passes ? step_tensors(b, on) : 0;
	if (ds_scan && b->shard == SH_PARAM) {
		/* ZeRO-3's has_overflow: isinf(buf).any() and isnan(buf).any() over the flat
		 * grad partitions (read the grad, write and read a bool: twice) */
		elem_k(b, PLAN_K_ELEMWISE, "inf_nan_check",
		       (double)part * 2.0 * (double)(b->gbytes + 2), 3);
	} else if (ds_scan) {
		/* ZeRO-1/2's _has_inf_or_nan on each grad of the partition: x.float(), isnan,
		 * isinf, logical_or, .float(), max (the 16-bit grad read, 26 B of temporaries),
		 * six PyTorch calls a tensor */
		int64_t k = 6 * nt - 1;
		elem_k(b, PLAN_K_ELEMWISE, "inf_nan_check", (double)part * (double)(b->pbytes + 26),
		       (int)(k < 255 ? k : 255));
	}
	if (ovf) {
		uint32_t id = coll(b, PLAN_ALL_REDUCE, g, PLAN_STREAM_COMPUTE, "overflow_check", 1,
				   TW_FP32, PLAN_NONE);
		if (id != PLAN_NONE && b->ds) /* overflow_gpu[0].item(): the host waits for it */
			b->p->ops[id].flags |= PLAN_F_HOSTWAIT;
	}
	if (passes) {
		/* get_grad_norm_direct: each grad of the partition .double().norm(2) (read it, write
		 * and read 8 B), two PyTorch calls a tensor */
		int gb = b->shard == SH_PARAM ? b->gbytes : b->pbytes;
		int64_t k = 2 * nt - 1;
		elem_k(b, PLAN_K_ELEMWISE, "grad_norm_pass", (double)part * (double)(gb + 16),
		       (int)(k < 255 ? k : 255));
	}
	if (s->gradient_clipping > 0 || b->ds)
		coll(b, PLAN_ALL_REDUCE, g, PLAN_STREAM_COMPUTE, "grad_norm", 1, TW_FP32, PLAN_NONE);
	int64_t sg = sub_group_elems(b, part);
	if (offo) {
		/* CPU optimizer per sub-group (NVMe: swap in, step, swap out), then the 16-bit
		 * partition goes back H2D (reference/deepspeed.md §3). DeepSpeed's step walks the
		 * sub-groups in index order: under partial offload a GPU sub-group that comes
		 * after host ones is launched once the host has stepped them, the ones before
		 * (DeepSpeed >= 0.18.0 keeps the first on the GPU) at once. */
		uint32_t last = PLAN_NONE;
		bool nvme = s->offload_optimizer == STRAT_OFFLOAD_NVME;
		int64_t nsub = (part + sg - 1) / sg, first, count;
		host_subgroups(b, nsub, &first, &count);
		for (int64_t i = 0; i < nsub; i++) {
			int64_t done = i * sg, n = part - done < sg ? part - done : sg;
			if (i < first || i >= first + count) {
				optim_op(b, n, PLAN_STREAM_COMPUTE, last);
				continue;
			}
			uint32_t dep = b->last_d2h;
			if (nvme)
				dep = copy(b, PLAN_NVME_READ, "swap_in", n * (8 + b->obytes), dep);
			optim_op(b, n, PLAN_STREAM_HOST, dep);
			uint32_t after = compute(b, PLAN_K_ELEMWISE, "cast_16bit", 0,
						 (double)n * (4 + b->pbytes), PLAN_STREAM_HOST);
			if (nvme)
				copy(b, PLAN_NVME_WRITE, "swap_out", n * (4 + b->obytes), after);
			last = copy(b, PLAN_H2D, "param_h2d", n * b->pbytes, after);
		}
		wait_on(b, last);
	} else {
		bool temp = b->shard >= SH_OPT && !bf16_optimizer(b) &&
			    (b->ds ? b->gbytes != 4 || b->shard < SH_PARAM : false);
		for (int64_t done = 0; done < part; done += sg) {
			int64_t n = part - done < sg ? part - done : sg;
			int32_t t = temp ? mem_alloc(b, PLAN_MEM_GRADS, PLAN_DEV_GPU, n * 4,
						     "grads_fp32", PLAN_STREAM_COMPUTE)
					 : -1;
			optim_op(b, n, PLAN_STREAM_COMPUTE, PLAN_NONE);
			mem_free(b, t, "grads_fp32", PLAN_STREAM_COMPUTE);
		}
	}
	mem_free(b, zero1_part, "grads_partition", PLAN_STREAM_COMPUTE);
	/* updated parameters back to every replica */
	if ((b->ds && (b->shard == SH_OPT || b->shard == SH_GRAD)) ||
	    (b->megatron && s->distributed_optimizer && !s->overlap_param_gather))
		gather_shards(b, "ag_params", b->zgroup, N, Pt - b->psite, b->psite,
			      PLAN_STREAM_COMPUTE, PLAN_NONE);
	else if (b->ds && b->shard == SH_PARAM && b->persist_elems > 0)
		coll(b, PLAN_ALL_GATHER, b->zgroup, PLAN_STREAM_COMPUTE, "ag_persistent",
		     (b->persist_elems + N - 1) / N, b->pdt, PLAN_NONE);
	for (int64_t i = 0; i < b->nunits; i++) /* _post_step drops hpZ's secondary partitions */
		if (b->sbuf[i] >= 0) {
			mem_free(b, b->sbuf[i], "hpz_secondary", PLAN_STREAM_COMPUTE);
			b->sbuf[i] = -1;
		}
	if (b->ds && b->pp > 1) /* _aggregate_total_loss: the last stage broadcasts the loss */
		coll(b, PLAN_BROADCAST, JOB_GROUP_PP, PLAN_STREAM_COMPUTE, "loss_broadcast", 1,
		     TW_FP32, PLAN_NONE);
}

/* ---- plan_rank ------------------------------------------------------------------------------------- */

/* A plan holds about PLAN_OPS_PER_LAYER ops per layer, micro-batch and pass on its stage */
static double est_rank_ops(const struct job *j)
{
	const struct strategy *s = &j->strat;
	int64_t lps = j->model.layers / (s->pp > 0 ? s->pp : 1);
	return (double)s->grad_accum * (double)(lps + 2) * 3.0 * PLAN_OPS_PER_LAYER;
}

static enum tw_result check_job(const struct job *j, struct tw_err *err)
{
	const struct strategy *s = &j->strat;
	const struct model *m = &j->model;
	if (s->tp < 1 || s->pp < 1 || s->dp < 1 || s->cp < 1 || s->micro_batch < 1 ||
	    s->grad_accum < 1)
		return tw_errf(err, TW_ERR_INVALID,
			       "strategy: tp=%lld pp=%lld dp=%lld cp=%lld micro_batch=%lld "
			       "grad_accum=%lld must all be >= 1",
			       (long long)s->tp, (long long)s->pp, (long long)s->dp, (long long)s->cp,
			       (long long)s->micro_batch, (long long)s->grad_accum);
	if (s->tp * s->pp * s->dp * s->cp != j->gpus)
		return tw_errf(err, TW_ERR_INVALID,
			       "strategy: tp x pp x dp x cp = %lld is not the job's %lld GPUs",
			       (long long)(s->tp * s->pp * s->dp * s->cp), (long long)j->gpus);
	if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->vocab < 1)
		return tw_errf(err, TW_ERR_INVALID, "model %s: layers, hidden, heads and vocab "
			       "must be >= 1", m->name);
	struct model_params mp;
	model_count(m, &mp);
	if ((double)mp.total > PLAN_MAX_PARAMS)
		return tw_errf(err, TW_ERR_LIMIT,
			       "model %s: %.3g parameters, over the plan's limit of %.0e (its "
			       "training states would overflow byte counts)",
			       m->name, (double)mp.total, PLAN_MAX_PARAMS);
	if (m->layers < s->pp)
		return tw_errf(err, TW_ERR_INVALID,
			       "strategy.pp=%lld exceeds model.layers=%lld: a stage needs a layer",
			       (long long)s->pp, (long long)m->layers);
	if ((double)m->layers * (double)s->pp > (double)PLAN_MAX_LAYER_STAGES)
		return tw_errf(err, TW_ERR_LIMIT,
			       "model.layers=%lld x strategy.pp=%lld exceeds the plan's limit of %d "
			       "layers times pipeline stages",
			       (long long)m->layers, (long long)s->pp, PLAN_MAX_LAYER_STAGES);
	/* refuse a step that could not be held in memory, or built in reasonable time, before
	 * building it (docs/limits.md): one rank's plan, and the plans of every stage, which
	 * the simulator keeps and the memory report builds */
	double est = est_rank_ops(j);
	if (est > (double)PLAN_MAX_OPS)
		return tw_errf(err, TW_ERR_LIMIT,
			       "plan: %lld micro-batches of %lld layers per stage would need ~%.3g ops "
			       "per rank, over the limit of %d (lower grad_accum or raise pp)",
			       (long long)s->grad_accum, (long long)(m->layers / s->pp), est,
			       PLAN_MAX_OPS);
	if (est * (double)s->pp > (double)PLAN_MAX_JOB_OPS)
		return tw_errf(err, TW_ERR_LIMIT,
			       "plan: %lld pipeline stages of %lld micro-batches of %lld layers would "
			       "need ~%.3g ops in all, over the limit of %d (lower grad_accum, "
			       "gradient_accumulation_steps in a ds_config, model.layers or pp)",
			       (long long)s->pp, (long long)s->grad_accum,
			       (long long)(m->layers / s->pp), est * (double)s->pp, PLAN_MAX_JOB_OPS);
	int64_t vp = s->schedule == STRAT_SCHED_INTERLEAVED && s->vp > 1 ? s->vp : 1;
	if (vp > MAX_VP)
		return tw_errf(err, TW_ERR_LIMIT, "strategy.vp=%lld exceeds the plan's limit of %d",
			       (long long)vp, MAX_VP);
	bool split_given = s->first_stage_layers > 0 || s->last_stage_layers > 0 ||
			   s->embed_in_split || s->loss_in_split;
	if (vp > 1 && !split_given && m->layers % (s->pp * vp))
		return tw_errf(err, TW_ERR_INVALID,
			       "strategy.vp=%lld does not divide the layers per pipeline stage "
			       "(model.layers=%lld / pp=%lld)",
			       (long long)vp, (long long)m->layers, (long long)s->pp);
	if (vp > 1 && s->grad_accum % s->pp)
		return tw_errf(err, TW_ERR_INVALID,
			       "interleaved schedule: micro-batches per step (grad_accum=%lld) must "
			       "be a multiple of pp=%lld",
			       (long long)s->grad_accum, (long long)s->pp);
	if (m->heads % s->tp)
		return tw_errf(err, TW_ERR_INVALID, "strategy.tp=%lld does not divide model.heads=%lld",
			       (long long)s->tp, (long long)m->heads);
	int64_t seq = j->seq > 0 ? j->seq : m->seq_len;
	if (seq < 1 || seq % s->cp)
		return tw_errf(err, TW_ERR_INVALID,
			       "strategy.cp=%lld does not divide the sequence length %lld",
			       (long long)s->cp, (long long)seq);
	/* a micro-batch's largest tensors, in doubles so nothing overflows: activations up to 64
	 * bytes per token and width (the widest of hidden, the MLP, the routed experts' top-k
	 * load, the vocabulary), attention scores with their fp32 copies 16 per element */
	double tok = (double)s->micro_batch * (double)seq;
	double wide = fmax(fmax((double)m->hidden, 2.0 * (double)m->ffn_hidden),
			   fmax((double)m->vocab, 2.0 * (double)(m->top_k > 0 ? m->top_k : 1) *
							  (double)m->expert_ffn_hidden));
	wide = fmax(wide, 2.0 * (double)m->shared_ffn_hidden);
	double big = fmax(tok * wide * 64.0, (double)m->heads * tok * (double)seq * 16.0);
	if (!(big <= PLAN_MAX_TENSOR_BYTES))
		return tw_errf(err, TW_ERR_LIMIT,
			       "strategy: a micro-batch of %lld x %lld tokens would need tensors of "
			       "%.3g bytes, over the plan's limit of 1 PiB (lower micro_batch or seq_len)",
			       (long long)s->micro_batch, (long long)seq, big);
	if (s->sequence_parallel && (s->micro_batch * seq / s->cp) % s->tp)
		return tw_errf(err, TW_ERR_INVALID,
			       "sequence parallel: tokens per micro-batch (%lld) not divisible by tp=%lld",
			       (long long)(s->micro_batch * seq / s->cp), (long long)s->tp);
	if (s->cp > 1 && s->cp_kind == STRAT_CP_ULYSSES && m->heads % (s->tp * s->cp))
		return tw_errf(err, TW_ERR_INVALID,
			       "Ulysses: tp x cp = %lld does not divide model.heads=%lld",
			       (long long)(s->tp * s->cp), (long long)m->heads);
	if (m->experts > 0 && s->ep > 1 && m->experts % s->ep)
		return tw_errf(err, TW_ERR_INVALID,
			       "strategy.ep=%lld does not divide model.experts=%lld", (long long)s->ep,
			       (long long)m->experts);
	/* the ranks expert groups are carved out of, expert_tp of them at a time */
	int64_t ep_span = strat_ep_span(s) / strat_expert_tp(s);
	if (s->ep > 1 && (strat_ep_span(s) % strat_expert_tp(s) || ep_span % s->ep))
		return tw_errf(err, TW_ERR_INVALID,
			       "strategy.ep=%lld x expert_tp=%lld does not divide the %lld ranks of "
			       "a stage the expert groups are carved out of",
			       (long long)s->ep, (long long)strat_expert_tp(s),
			       (long long)strat_ep_span(s));
	if (s->framework == STRAT_DEEPSPEED && s->pp > 1 && s->zero_stage >= 2)
		return tw_errf(err, TW_ERR_INVALID,
			       "strategy: zero_optimization.stage=%d with pp=%lld: ZeRO-2 and ZeRO-3 "
			       "are incompatible with pipeline parallelism (DeepSpeed)",
			       s->zero_stage, (long long)s->pp);
	if (s->lora_rank > 0 && s->lora_targets == 0)
		return tw_errf(err, TW_ERR_INVALID, "strategy: lora rank %lld with no target modules",
			       (long long)s->lora_rank);
	return TW_OK;
}

/* The model's widths the ops are shaped by (whole, before TP splits them) */
static void pb_widths(struct pb *b)
{
	const struct model *m = b->m;
	b->h = m->hidden, b->heads = m->heads;
	b->kvh = m->kv_heads > 0 ? m->kv_heads : m->heads;
	b->hd = m->head_dim > 0 ? m->head_dim : m->hidden / m->heads;
	if (m->kv_lora_rank > 0)
		b->hd = m->qk_nope_head_dim + m->qk_rope_head_dim;
	b->vd = m->kv_lora_rank > 0 && m->v_head_dim > 0 ? m->v_head_dim : b->hd;
	b->qd = b->heads * b->hd;
	b->kvd = b->kvh * b->hd;
	b->kvdv = b->kvh * b->vd;
	b->f = m->ffn_hidden, b->fs = m->shared_ffn_hidden;
	b->swiglu = m->act == MODEL_ACT_SWIGLU;
}

double plan_model_flops_per_token(const struct job *j)
{
	const struct model *m = &j->model;
	int64_t seq = j->seq > 0 ? j->seq : m->seq_len;
	if (j->strat.lora_rank <= 0 || m->heads < 1)
		return model_flops_per_token(m, seq);
	struct model_flops f;
	model_flops_fwd(m, seq, &f);
	struct pb b;
	memset(&b, 0, sizeof(b));
	b.j = j, b.m = m, b.s = &j->strat;
	pb_widths(&b);
	double adapters = 0;
	for (int64_t l = 0; l < m->layers; l++)
		adapters += (double)lora_params(&b, l);
	return 2.0 * (f.total - f.attn_core) + 3.0 * f.attn_core + 6.0 * adapters;
}

static void setup(struct pb *b)
{
	const struct job *j = b->j;
	const struct model *m = b->m;
	const struct strategy *s = b->s;
	job_coord_of(j, b->rank, &b->c);
	b->tp = s->tp, b->pp = s->pp, b->dp = s->dp, b->cp = s->cp;
	b->ep = s->ep > 1 ? s->ep : 1;
	b->etp = strat_expert_tp(s);
	b->ep_nodes = b->ep_ranks = 0;
	/* the expert group's layout over nodes is only looked up for DeepEP */
	int64_t xn = s->moe_dispatcher == STRAT_DISPATCH_DEEPEP && m->experts > 0
			     ? job_group_size(j, JOB_GROUP_EP_XNODE) : 1;
	if (xn > 1) {
		int64_t k = m->top_k > 0 ? m->top_k : 1;
		b->ep_nodes = experts_reach(m->experts, k, xn, m->router_groups, m->router_group_topk);
		b->ep_ranks = experts_reach(m->experts, k, b->ep, m->router_groups, m->router_group_topk);
	}
	b->vp = s->schedule == STRAT_SCHED_INTERLEAVED && s->vp > 1 && s->pp > 1 ? s->vp : 1;
	b->nmicro = s->grad_accum;
	b->mb = s->micro_batch;
	b->seq = j->seq > 0 ? j->seq : m->seq_len;
	b->T = b->mb * b->seq / b->cp;
	pb_widths(b);
	b->V = m->vocab;
	b->E = m->experts > 0 ? m->experts : 0;
	b->topk = m->top_k > 0 ? m->top_k : 1;
	b->fe = m->expert_ffn_hidden;
	b->El = b->E > 0 ? b->E / b->ep : 0;
	b->sp = s->sequence_parallel && s->tp > 1;
	b->ulysses = s->cp > 1 && s->cp_kind == STRAT_CP_ULYSSES;
	b->flash = s->flash_attention;
	b->rope = m->pos == MODEL_POS_ROPE;
	b->eager = s->kernels == STRAT_KERNELS_EAGER;
	b->eager_norm = b->eager && m->norm == MODEL_NORM_RMSNORM;
	b->lora = s->lora_rank > 0;
	b->ds = s->framework == STRAT_DEEPSPEED;
	b->megatron = s->framework == STRAT_MEGATRON;
	b->fsdp = s->framework == STRAT_FSDP;
	b->pdt = s->param_dtype;
	b->pbytes = tw_dtype_bytes(b->pdt);
	b->ab = b->pbytes;
	b->mixed = b->pdt != TW_FP32;
	b->mm_dt = b->pdt == TW_FP32 && s->tf32 ? TW_TF32 : b->pdt;
	b->gemm_dt = s->fp8_gemm ? TW_FP8 : b->mm_dt;
	b->comm_dt = s->comm_dtype;
	b->gbytes = tw_dtype_bytes(s->grad_accum_dtype);
	b->obytes = opt_state_bytes(s->optimizer);

	b->dgroup = b->cp > 1 ? JOB_GROUP_DP_CP : JOB_GROUP_DP;
	b->zgroup = b->dgroup;
	b->shard = SH_NONE;
	if (b->ds)
		b->shard = s->zero_stage >= 3 ? SH_PARAM : (enum shard_mode)s->zero_stage;
	else if (b->megatron)
		b->shard = s->distributed_optimizer ? SH_OPT : SH_NONE;
	else if (b->fsdp && s->fsdp_sharding != STRAT_FSDP_NO_SHARD)
		b->shard = SH_PARAM;
	if ((b->fsdp && s->fsdp_sharding == STRAT_FSDP_HYBRID_SHARD) ||
	    (b->ds && b->shard == SH_PARAM && s->mics_shard > 0))
		b->zgroup = JOB_GROUP_SHARD;
	b->nz = job_group_size(j, b->zgroup);
	if (b->nz < 1)
		b->nz = 1;
	/* sharded gradients are reduce-scattered over the parameters' shard group */
	b->dense = b->shard == SH_PARAM ? (struct red){.group = b->zgroup, .n = b->nz}
					: (struct red){.group = b->dgroup,
						       .n = job_group_size(j, b->dgroup)};
	b->expert = (struct red){.group = b->ep > 1 ? JOB_GROUP_EDP : b->dgroup,
				 .n = job_group_size(j, b->ep > 1 ? JOB_GROUP_EDP : b->dgroup)};

	/* layers of each chunk: virtual stage v = chunk * pp + stage (Megatron's layout) */
	int64_t L = m->layers, P = b->pp, sidx = b->c.pp;
	b->nlayers = 0;
	for (int64_t c = 0; c < b->vp; c++) {
		strategy_chunk_layers(s, L, sidx, c, &b->first[c], &b->nl[c]);
		b->nlayers += b->nl[c];
	}
	for (int64_t i = 0; i < PLAN_NUM_STREAMS; i++)
		b->wait[i] = PLAN_NONE;
	b->last_compute = b->last_red = b->last_d2h = PLAN_NONE;
	b->tpo_ag = b->before_gemm = PLAN_NONE;
	b->ahead[0] = b->ahead[1] = PLAN_NONE;
	b->bucket_buf = b->grads_full = b->grads_part = -1;
	b->fwd_tmp = b->bwd_ws = b->bwd_rc = -1;
	b->moe_probs = b->moe_dgrad = PLAN_NONE;
	b->layer = b->micro = b->stage = -1;
	b->phase = PLAN_PHASE_OTHER;

	/* gathering units: DeepSpeed's leaf modules, FSDP's wrapped blocks */
	b->upl = b->fsdp ? 1 : 4;
	b->head_uid = 1 + L * b->upl;
	b->nunits = b->head_uid + 1;
	b->ugrad = -1;

	/* parameters of this rank */
	bool first = sidx == 0, last = sidx == P - 1;
	b->psi = b->psit = b->psi_layers = 0;
	for (int64_t c = 0; c < b->vp; c++)
		for (int64_t u = 1 + b->first[c] * b->upl; u < 1 + (b->first[c] + b->nl[c]) * b->upl;
		     u++) {
			int64_t n = unit_params(b, u), d, e;
			b->psi += n;
			b->psi_layers += n;
			b->psit += unit_trainable(b, u);
			unit_split(b, u, &d, &e);
			if (b->ep > 1)
				b->psie += e;
			if (b->shard == SH_PARAM)
				b->persist_elems += unit_persistent(b, u);
		}
	if (first) {
		b->psi += embed_params(b);
		b->psit += unit_trainable(b, 0);
	}
	if (last) {
		b->psi += head_params(b);
		b->psit += unit_trainable(b, b->head_uid);
		if (b->shard == SH_PARAM)
			b->persist_elems += unit_persistent(b, b->head_uid);
	}

	b->psite = b->lora ? 0 : b->psie; /* LoRA trains adapters only: the experts are frozen */
	b->ne = b->ep > 1 ? job_group_size(j, JOB_GROUP_EDP) : b->nz;

	/* ZeRO-3: modules kept gathered from one use to the next (reuse distance) */
	int64_t nm = b->nunits;
	b->gbuf = TW_NEW_ARRAY(int32_t, (size_t)nm);
	b->gop = TW_NEW_ARRAY(uint32_t, (size_t)nm);
	b->gcopied = TW_NEW_ARRAY(bool, (size_t)nm);
	b->keep_fwd = TW_NEW_ARRAY(bool, (size_t)nm);
	b->keep_rc = TW_NEW_ARRAY(bool, (size_t)nm);
	b->sbuf = TW_NEW_ARRAY(int32_t, (size_t)nm);
	for (int64_t i = 0; i < nm; i++) {
		b->gbuf[i] = b->sbuf[i] = -1;
		b->gop[i] = PLAN_NONE;
	}
	if (b->shard == SH_PARAM && b->fsdp) {
		bool keep = s->fsdp_sharding == STRAT_FSDP_SHARD_GRAD_OP;
		for (int64_t i = 0; i < nm; i++)
			b->keep_fwd[i] = keep;
		/* the root unit (the embedding, the final norm and the head: HF's auto-wrap and
		 * torchtitan wrap only the blocks) is not resharded after forward (FSDP1's
		 * _post_forward_reshard skips the root, FSDP2 sets it off for the root) */
		b->keep_fwd[0] = b->keep_fwd[b->head_uid] = true;
	} else if (b->shard == SH_PARAM) {
		reuse_distances(b, first, last);
	}
	/* what one gradient reduction pass carries: the stage's units' grads as grads_ready
	 * hands them on (LoRA: the adapters, as dense) */
	for (int64_t u = 0; u < nm; u++) {
		int64_t d, e;
		if (!on_stage(b, u))
			continue;
		if (b->lora) {
			b->dense.total += unit_trainable(b, u);
		} else {
			unit_split(b, u, &d, &e);
			b->dense.total += d;
			b->expert.total += e;
		}
	}
	size_t na = (size_t)(b->nmicro * (b->nlayers > 0 ? b->nlayers : 1));
	b->act = tw_malloc(na * sizeof(int32_t));
	b->ckpt = tw_malloc(na * sizeof(int32_t));
	for (size_t i = 0; i < na; i++)
		b->act[i] = b->ckpt[i] = -1;
}

/* Megatron-Core --overlap-param-gather: the all-gather of the parameters the last optimizer
 * step updated runs bucket by bucket on the DP stream, and each layer's first forward waits
 * only for its own bucket (the steady state of consecutive steps: the gathers issued after
 * step k's optimizer overlap step k+1's forward). Buckets follow forward order over the
 * stage's layers, max(40M, 1M x dp) elements each as the gradient buckets. */
static void param_gather_start(struct pb *b)
{
	int64_t nl = b->nlayers > 0 ? b->nlayers : 1, B = bucket_elems(b), N = b->nz, acc = 0;
	int64_t acc_e = 0; /* of which experts (ep > 1): gathered over their own group */
	b->pg_op = TW_NEW_ARRAY(uint32_t, (size_t)nl);
	uint8_t ph = b->phase;
	b->phase = PLAN_PHASE_FWD;
	b->micro = 0;
	int64_t slot0 = 0, k = 0;
	for (int64_t c = 0; c < b->vp; c++)
		for (int64_t l = b->first[c]; l < b->first[c] + b->nl[c]; l++, k++) {
			int64_t n = 0;
			for (int64_t u = 1 + l * b->upl; u < 1 + (l + 1) * b->upl; u++) {
				int64_t d, e;
				n += unit_trainable(b, u);
				unit_split(b, u, &d, &e);
				if (b->ep > 1 && !b->lora)
					acc_e += e;
			}
			if (k == 0 && b->c.pp == 0)
				n += unit_trainable(b, 0); /* the embedding goes with the first bucket */
			if (k == nl - 1 && b->c.pp == b->pp - 1)
				n += unit_trainable(b, b->head_uid); /* the head with the last */
			acc += n;
			bool close = acc >= B || k == nl - 1;
			b->pg_op[k] = PLAN_NONE;
			if (!close)
				continue;
			b->layer = (int32_t)l;
			uint32_t id = gather_shards(b, "ag_params", b->zgroup, N, acc - acc_e, acc_e,
						    PLAN_STREAM_COMM, PLAN_NONE);
			for (int64_t i = slot0; i <= k; i++)
				b->pg_op[i] = id;
			slot0 = k + 1;
			acc = acc_e = 0;
		}
	b->phase = ph;
	b->layer = b->micro = -1;
}

/* Collectives one slice-by-slice reduction pass of group g issues: one per partition a bucket
 * spans (at most the group's size or its elements), plus a bucket boundary each */
static double slice_ops(const struct pb *b, const struct red *g)
{
	if (g->total <= 0)
		return 0;
	return fmin((double)g->n, (double)g->total) + (double)g->total / (double)bucket_elems(b) +
	       1.0;
}

/* Whether gradient buckets (a few ops each, every reduction pass) and ZeRO-3's optimizer
 * sub-groups (up to six each under offload) would outgrow the plan beside its est_ops: tiny
 * reduce_bucket_size or sub_group_size values (err filled) */
static bool pieces_over_limit(const struct pb *b, double est_ops, struct tw_err *err)
{
	int64_t part = opt_part(b), sg = sub_group_elems(b, part);
	double nsub = (double)((part + sg - 1) / sg);
	double buckets = ceil((double)b->psit / (double)bucket_elems(b));
	double red = 4.0 * buckets * (double)reduction_passes(b), opt = 6.0 * nsub;
	double est = est_ops + red + opt;
	if (est <= (double)PLAN_MAX_OPS)
		return false;
	bool sub = opt > red;
	tw_errf(err, TW_ERR_LIMIT,
		"plan: %s=%lld cuts this rank's %s into ~%.3g pieces, ~%.3g ops per rank, over the "
		"limit of %d (raise it)",
		sub ? "zero_optimization.sub_group_size" : "zero_optimization.reduce_bucket_size",
		(long long)(sub ? sg : bucket_elems(b)), sub ? "optimizer partition" : "gradients",
		sub ? nsub : buckets, est, PLAN_MAX_OPS);
	return true;
}

/* The builder's own buffers (the plan keeps nothing of them) */
static void pb_release(struct pb *b)
{
	free(b->bufs);
	free(b->gbuf);
	free(b->gop);
	free(b->gcopied);
	free(b->keep_fwd);
	free(b->keep_rc);
	free(b->sbuf);
	free(b->act);
	free(b->ckpt);
	free(b->pg_op);
}

/* Build into out, whose counts are zero and whose buffers may hold an earlier plan's memory. */
static enum tw_result build_rank(const struct job *j, int64_t rank, struct plan *out,
				 struct tw_err *err)
{
	if (rank < 0 || rank >= j->gpus)
		return tw_errf(err, TW_ERR_INVALID, "plan: rank %lld outside 0..%lld", (long long)rank,
			       (long long)j->gpus - 1);
	TW_CHECK(check_job(j, err));
	struct pb b;
	memset(&b, 0, sizeof(b));
	b.j = j, b.m = &j->model, b.s = &j->strat, b.p = out, b.err = err, b.rank = rank;
	out->rank = rank;
	double est_ops = est_rank_ops(j);
	setup(&b);
	if (ds_slices(&b)) {
		/* a collective per partition a bucket spans, every reduction pass: dp in the
		 * hundreds of thousands would outgrow the plan */
		double per = slice_ops(&b, &b.dense) + slice_ops(&b, &b.expert);
		double est = est_ops + (double)reduction_passes(&b) * per;
		if (est > (double)PLAN_MAX_OPS) {
			pb_release(&b);
			return tw_errf(err, TW_ERR_LIMIT,
				       "plan: zero_optimization.use_multi_rank_bucket_allreduce=false "
				       "reduces gradients slice by slice: %lld reduction passes over %lld "
				       "partitions would need ~%.3g ops per rank, over the limit of %d "
				       "(set use_multi_rank_bucket_allreduce, or lower "
				       "gradient_accumulation_steps)",
				       (long long)reduction_passes(&b), (long long)b.dense.n, est,
				       PLAN_MAX_OPS);
		}
	}
	if (pieces_over_limit(&b, est_ops, err)) {
		pb_release(&b);
		return TW_ERR_LIMIT;
	}
	alloc_states(&b);
	/* DeepSpeed's pipeline buffers: max(2, min(stages - s, m)) received inputs (§5) */
	if (b.ds && b.pp > 1) {
		int64_t nb = b.pp - b.c.pp < b.nmicro ? b.pp - b.c.pp : b.nmicro;
		mem_alloc(&b, PLAN_MEM_BUCKETS, PLAN_DEV_GPU, (nb > 2 ? nb : 2) * b.T * b.h * b.ab,
			  "pipe_buffers", PLAN_STREAM_COMPUTE);
	}
	size_t nitems = (size_t)(2 * b.nmicro * b.vp);
	struct item *items = TW_NEW_ARRAY(struct item, nitems);
	int32_t *logits = TW_NEW_ARRAY(int32_t, (size_t)b.nmicro);
	size_t n = schedule(&b, items);
	if (b.megatron && b.s->overlap_param_gather && b.s->distributed_optimizer)
		param_gather_start(&b);
	size_t ops0 = out->nops, deps0 = out->ndeps;
	for (size_t i = 0; i < n; i++) {
		bool pair = items[i].pair && i + 1 < n;
		if (pair)
			run_pair(&b, &items[i], &items[i + 1], logits);
		else
			run_item(&b, &items[i], logits);
		for (size_t k = i; k <= i + pair; k++)
			if (b.megatron && b.s->overlap_p2p_comm && b.pp > 1)
				recv_ahead(&b, items, n, k);
		i += pair;
		if (i == 0 && n > 1) {
			/* reserve the rest from the first item (a backward has about twice a
			 * forward's ops): one move instead of a chain of doublings; pages never
			 * touched cost nothing */
			size_t more = 2 * (n - 1) + 1, ops = out->nops + (out->nops - ops0) * more + 64;
			if (ops <= ((size_t)1 << 24)) { /* larger plans grow as they go */
				TW_GROW(out->ops, out->cap, ops);
				TW_GROW(out->deps, out->deps_cap, out->ndeps + (out->ndeps - deps0) * more + 64);
			}
		}
	}
	flush_send(&b); /* the last step's result */
	optimizer_step(&b);
	free(items);
	free(logits);
	pb_release(&b);
	return TW_OK;
}

enum tw_result plan_rank(const struct job *j, int64_t rank, struct plan *out, struct tw_err *err)
{
	memset(out, 0, sizeof(*out));
	return build_rank(j, rank, out, err);
}

enum tw_result plan_rebuild(const struct job *j, int64_t rank, struct plan *p, struct tw_err *err)
{
	struct plan keep = *p;
	memset(p, 0, sizeof(*p));
	p->ops = keep.ops, p->cap = keep.cap;
	p->deps = keep.deps, p->deps_cap = keep.deps_cap;
	p->names = keep.names, p->names_cap = keep.names_cap;
	return build_rank(j, rank, p, err);
}

/* Roles: with a symmetric layout every rank of a pipeline stage runs the same ops up to
 * renaming of peers and groups, so there is one role per stage (rank with tp = cp = dp = 0). */
int64_t plan_roles(const struct job *j, int64_t *reps, int64_t *weights, int64_t n)
{
	int64_t P = j->strat.pp > 0 ? j->strat.pp : 1, k = 0;
	for (int64_t s = 0; s < P && k < n; s++) {
		struct job_coord c = {0, 0, 0, s};
		reps[k] = job_rank_of(j, &c);
		weights[k] = j->gpus / P;
		k++;
	}
	return k;
}
