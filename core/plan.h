/* plan — the op graph of one optimizer step (all micro-batches) for one rank, built by the
 * one builder that the simulator and the executor both follow (DESIGN.md, "The plan").
 *
 * Ops are stored in a valid execution order (a topological order of the dependencies); each
 * op runs on one stream and may depend on earlier ops of the same rank. Ops on one stream run
 * in plan order; deps are the waits across streams. Cross-rank matching: a COLL is identified
 * by (group, group color, seq) and a P2P by (src, dst, seq), so every member of a group issues
 * the same collectives in the same order. docs/plan.md describes what the builder emits. */
#ifndef TW_PLAN_H
#define TW_PLAN_H

#include "job.h"
#include "trace.h"

enum plan_kind { PLAN_COMPUTE = 0, PLAN_COLL, PLAN_P2P, PLAN_COPY, PLAN_ALLOC, PLAN_FREE,
		 PLAN_NUM_KINDS };

enum plan_stream {
	PLAN_STREAM_COMPUTE = 0,
	PLAN_STREAM_COMM,      /* data-parallel collectives (ZeRO, grads) */
	PLAN_STREAM_COMM_TP,   /* TP/SP/CP/EP collectives on the critical path */
	PLAN_STREAM_P2P,       /* pipeline send/recv */
	PLAN_STREAM_COPY_IN,   /* H2D, NVMe->host */
	PLAN_STREAM_COPY_OUT,  /* D2H, host->NVMe */
	PLAN_STREAM_HOST,      /* host CPU work: CPU optimizer */
	PLAN_STREAM_COMM_EP,   /* DeepEP's NVLink stage, beside its network stage on COMM_TP */
	PLAN_NUM_STREAMS
};

enum plan_kernel {
	PLAN_K_GEMM = 0,   /* m x n x k, batch */
	PLAN_K_ATTN,       /* fused attention (flash): b, heads, s_q, s_kv, head_dim, causal */
	PLAN_K_ELEMWISE,   /* bias, activation, dropout, residual, rope: bytes */
	PLAN_K_NORM,       /* layernorm / rmsnorm: bytes */
	PLAN_K_SOFTMAX,    /* unfused attention softmax, router softmax */
	PLAN_K_EMBED,      /* embedding gather / scatter-add */
	PLAN_K_LOSS,       /* cross-entropy over the logits */
	PLAN_K_OPTIM,      /* optimizer update: params, bytes per param */
	PLAN_K_PERMUTE,    /* MoE token permutation */
	PLAN_NUM_KERNELS
};

/* PLAN_BROADCAST and PLAN_REDUCE are rooted: u.coll.root names the root's index in the group */
enum plan_coll { PLAN_ALL_GATHER = 0, PLAN_REDUCE_SCATTER, PLAN_ALL_REDUCE, PLAN_BROADCAST,
		 PLAN_ALL_TO_ALL, PLAN_REDUCE, PLAN_NUM_COLLS };

enum plan_copy { PLAN_H2D = 0, PLAN_D2H, PLAN_NVME_READ /* NVMe -> host */,
		 PLAN_NVME_WRITE /* host -> NVMe */, PLAN_NUM_COPIES };

enum plan_mem_cat {
	PLAN_MEM_PARAMS = 0,    /* 16-bit (or compute-dtype) parameters, own shard or whole */
	PLAN_MEM_MASTER,        /* fp32 master weights */
	PLAN_MEM_GRADS,         /* gradients (16-bit or fp32 accumulation buffers) */
	PLAN_MEM_OPTIM,         /* optimizer states (Adam m, v) */
	PLAN_MEM_ACTIV,         /* saved activations */
	PLAN_MEM_CKPT,          /* recompute checkpoints (layer inputs) */
	PLAN_MEM_GATHERED,      /* ZeRO-3 / FSDP gathered parameters */
	PLAN_MEM_BUCKETS,       /* communication buckets (IPG, reduce, all-gather staging) */
	PLAN_MEM_LOGITS,        /* logits and loss */
	PLAN_MEM_WORKSPACE,     /* GEMM / attention workspace, transient outputs */
	PLAN_NUM_MEM_CATS
};

enum plan_device { PLAN_DEV_GPU = 0, PLAN_DEV_HOST, PLAN_DEV_NVME, PLAN_NUM_DEVICES };

enum plan_phase { PLAN_PHASE_FWD = 0, PLAN_PHASE_BWD, PLAN_PHASE_OPT, PLAN_PHASE_OTHER };

/* op flags */
/* An op in a CUDA graph (Megatron-Core's cuda_graph_modules): the graph's replay (its input
 * copy, the op the host issues) and the ops it replays, which the host does not issue */
enum { PLAN_GRAPH_NONE = 0, PLAN_GRAPH_REPLAY, PLAN_GRAPH_MEMBER };

/* A backward GEMM op's gradients: the data grads dY W^T and, with an even batch, as many
 * weight grads X^T dY (half each); or only the one kind (Megatron's delayed weight grads) */
enum plan_grads { PLAN_GRADS_BOTH = 0, PLAN_GRADS_DATA, PLAN_GRADS_WEIGHT };

enum { PLAN_F_RECOMPUTE = 1 /* forward work redone in backward */, PLAN_F_SEND = 2 /* P2P */,
       PLAN_F_LORA = 4 /* LoRA adapter work (not model FLOPs) */,
       PLAN_F_BATCH = 8 /* a micro-batch's input copy: the host waits for it (sim) */,
       PLAN_F_BLOCKING = 16 /* a P2P op that holds its stream until its transfer is done:
			     * every receive but one posted ahead (Megatron's overlap_p2p_comm),
			     * DeepSpeed's blocking sends */,
       PLAN_F_DEVSYNC = 32 /* the host synchronizes the device before issuing it and waits
			    * for it to finish (sim) */,
       PLAN_F_USERBUF = 64 /* a TP all-gather / reduce-scatter of Transformer Engine's
			    * userbuffers: P2P copies over NVLink, not NCCL (sim) */,
       PLAN_F_HOSTWAIT = 128 /* the host synchronizes the op's stream after issuing it:
			      * it waits for the op and what ran before it there (sim) */ };

/* P2P seq = PLAN_P2P_KINDS x (index among src->dst sends of the same kind) + kind, so that
 * activations, gradients and context-parallel KV blocks between one pair never cross. */
enum { PLAN_P2P_ACT = 0, PLAN_P2P_GRAD, PLAN_P2P_KV, PLAN_P2P_KINDS };

struct plan_op {
	uint32_t id;          /* index in plan->ops */
	uint8_t kind;         /* enum plan_kind */
	uint8_t stream;       /* enum plan_stream */
	uint8_t phase : 4;    /* enum plan_phase */
	uint8_t graph : 2;    /* PLAN_GRAPH_*: inside a captured CUDA graph */
	uint8_t flags;
	int32_t layer;        /* global layer index, -1: none (embedding, head, optimizer) */
	int32_t micro;        /* micro-batch, -1: none */
	int32_t stage;        /* pipeline stage (virtual chunk for interleaved), -1: none */
	uint32_t dep_off;     /* deps are plan->deps[dep_off .. dep_off + ndeps) (op ids) */
	uint32_t ndeps;
	uint32_t host_views;  /* Python tensor views / slices the issuing thread makes before it
			       * issues this op (DeepSpeed's per-rank partition lists), each a
			       * trivial CPU op: a quarter of a framework op (sim_host_ns) */
	const char *name;     /* static or from plan->names; e.g. "qkv", "fc1", "ag_params" */
	union {
		struct {
			uint8_t kernel;   /* enum plan_kernel */
			uint8_t dtype;    /* enum tw_dtype */
			uint8_t causal;
			uint8_t torch_softmax; /* unfused attention's softmax in PyTorch fp32 ops:
						* PLAN_SOFTMAX_* (0: the fused kernel) */
			uint8_t extra_kernels; /* kernels beyond one it launches (eager PyTorch ops) */
			uint16_t repeat;  /* issued this many times in a row, one per local expert
					   * (a loop over experts, not a grouped GEMM): its kernels
					   * and host calls each time; 0 or 1: once */
			int64_t m, n, k;  /* GEMM: batch x (m x k)(k x n) */
			int32_t batch;
			/* GEMM: its batch runs as grouped calls of `group` GEMMs whose tiles share
			 * the SMs' waves (a grouped GEMM); 0 or 1: a kernel each */
			int16_t group;
			uint8_t grads;    /* a backward GEMM's gradients: PLAN_GRADS_* */
			int64_t b, heads, s_q, s_kv, head_dim; /* attention (head_dim: q and k) */
			int64_t head_dim_v; /* attention: v and the output (0: head_dim) */
			double flops;     /* derived from the shape */
			double bytes;     /* HBM (or host DRAM) bytes read + written */
		} compute;
		struct {
			uint8_t coll;     /* enum plan_coll */
			uint8_t group;    /* enum job_group */
			uint8_t dtype;
			int32_t root;     /* broadcast, reduce: the root's index in the group */
			int64_t count;    /* the nccl "count" argument: all-reduce elements, all-gather
					   * send count, reduce-scatter receive count; all-to-all:
					   * elements each rank sends in total */
			int64_t bytes;    /* count * dtype bytes (size as nccl-tests reports it) */
			int64_t seq;      /* index among this group's collectives in the step */
		} coll;
		struct {
			int64_t peer;     /* rank */
			int64_t bytes;
			int64_t seq;      /* PLAN_P2P_KINDS x (index among src->dst sends of this
					   * kind) + kind; the same on the send and the recv */
		} p2p;
		struct {
			uint8_t dir;      /* enum plan_copy */
			int64_t bytes;
		} copy;
		struct {
			uint8_t cat;      /* enum plan_mem_cat */
			uint8_t dev;      /* enum plan_device */
			int32_t buf;      /* buffer id: FREE names the ALLOC's buffer */
			int64_t bytes;
		} mem;
	} u;
};

struct plan {
	int64_t rank;
	struct plan_op *ops;
	size_t nops, cap;
	uint32_t *deps;
	size_t ndeps, deps_cap;
	int32_t nbufs;
	/* summaries filled by the builder */
	double model_flops;   /* this rank's share of model FLOPs (no recompute) */
	double hw_flops;      /* FLOPs executed including recompute */
	/* storage for names built at run time */
	char *names;
	size_t names_len, names_cap;
};

/* Size limit of one rank's plan (ops): a step beyond it is refused with TW_ERR_LIMIT before it
 * is built. About 24 ops are emitted per layer, micro-batch and pass (forward, backward,
 * recompute); 8 Mi ops are ~1 GiB. GPT-3 175B with TP 8 · PP 8 and 64 micro-batches needs
 * ~35 k per rank. */
#define PLAN_OPS_PER_LAYER 24
#define PLAN_MAX_OPS (8 * 1024 * 1024)
/* Size limit of all the stages' plans of a job together (estimated ops, ~10 GiB at ~75 B an
 * estimated op): the simulator keeps one plan per pipeline stage, and building them costs time
 * in proportion. Megatron's 1T on 512 GPUs (pp 64, 3,072 micro-batches) needs 5.7e7. */
#define PLAN_MAX_JOB_OPS (128 * 1024 * 1024)
/* Layers times pipeline stages a job may have (2^24): every stage's plan indexes the whole
 * model's gathering units, so building a job's pp plans costs about this many unit visits;
 * the deepest real models (~100 layers on up to ~100 stages) are 10^4. */
#define PLAN_MAX_LAYER_STAGES (16 * 1024 * 1024)
/* Largest tensor a plan may size, bytes (2^50 = 1 PiB): byte counts are int64, and a
 * micro-batch whose activations, logits or attention scores would exceed this is refused
 * before any size is multiplied out. */
#define PLAN_MAX_TENSOR_BYTES 1125899906842624.0
/* Most parameters a plan may hold (1e17): its training states, ~20 bytes each unsharded
 * (reference/deepspeed.md §3), then stay under 2^61 bytes of int64 */
#define PLAN_MAX_PARAMS 1e17

/* The model FLOPs per token of MFU: model_flops_per_token (3 x forward), or under LoRA what the
 * step must compute: the frozen weights' GEMMs forward and input grad (2 x forward, no weight
 * grads), the attention core 3 x, each adapter parameter 6 FLOPs. */
double plan_model_flops_per_token(const struct job *j);

/* Build rank r's plan for one step. The plan is owned by the caller: plan_release(). */
enum tw_result plan_rank(const struct job *j, int64_t rank, struct plan *out, struct tw_err *err);
/* plan_rank into p, a plan from plan_rank or plan_rebuild (or zeroed) whose buffers are kept
 * and reused: a caller that builds many plans (the search) avoids the page faults of fresh
 * memory. The result is the same as plan_rank's; plan_release() frees it. */
enum tw_result plan_rebuild(const struct job *j, int64_t rank, struct plan *p, struct tw_err *err);
void plan_release(struct plan *p);

/* Distinct roles: ranks whose plans are identical up to peer and group renaming (for the
 * simulator's symmetric mode). Fills reps (room for n entries) with one rank per role and
 * weights with how many ranks share it; returns the count. */
int64_t plan_roles(const struct job *j, int64_t *reps, int64_t *weights, int64_t n);

/* The memory walk: apply ALLOC/FREE in op order. Peaks per device with the breakdown by
 * category at the moment of the peak. Context and fragmentation are added for the GPU. */
struct plan_mem {
	int64_t peak[PLAN_NUM_DEVICES];                       /* bytes, live buffers only */
	int64_t at_peak[PLAN_NUM_DEVICES][PLAN_NUM_MEM_CATS]; /* breakdown at the peak */
	int64_t max_cat[PLAN_NUM_DEVICES][PLAN_NUM_MEM_CATS]; /* each category's own max */
	/* peak of the model states alone (params, master, grads, optimizer, gathered): the
	 * quantity DeepSpeed's estimators predict (docs/memory.md) */
	int64_t states_peak[PLAN_NUM_DEVICES];
	uint32_t peak_op[PLAN_NUM_DEVICES];                   /* op id at which the peak occurs */
	int64_t context_bytes;      /* CUDA context etc. (cluster gpu.context_gib) */
	int64_t fragmentation_bytes;/* (eff.alloc_fragmentation - 1) x peak */
	int64_t gpu_total;          /* peak + context + fragmentation */
	int64_t gpu_capacity;       /* cluster gpu.memory_gib */
	int64_t host_capacity;      /* node host memory / GPUs per node */
	int64_t nvme_bytes;         /* NVMe peak (same as peak[PLAN_DEV_NVME]) */
};
enum tw_result plan_memory(const struct job *j, const struct plan *p, struct plan_mem *out,
			   struct tw_err *err);

/* Whether the GPU total fits the capacity, and a one-line verdict ("fits, 12.3 GiB free" or
 * "does not fit: needs 4.1 GiB more — largest items: ..."). */
bool plan_mem_fits(const struct plan_mem *m, char *verdict, size_t len);

/* Bytes beyond capacity (<= 0: fits) of one role: its GPU's, or when the GPU fits, its
 * host share's (offloaded states live in the node's memory), with the one-line verdict. */
int64_t plan_mem_shortfall(const struct plan_mem *m, char *verdict, size_t len);

/* Whether a whole job fits: every role's plan through plan_memory, the worst one kept (the
 * largest shortfall; when all fit, the least free GPU memory). */
struct plan_fit {
	bool fits;
	int64_t short_bytes;  /* the worst role's plan_mem_shortfall, bytes */
	int64_t rank;         /* its representative rank */
	int64_t gpu_total;    /* its GPU bytes (peak + context + fragmentation) */
	int64_t gpu_capacity; /* bytes per GPU */
	bool host_short;      /* its shortfall is host memory (the GPU fits) */
	int64_t host_bytes;   /* its host memory per GPU, bytes */
	int64_t host_capacity; /* host memory per GPU, bytes (0: not limited) */
	char verdict[256];    /* its verdict */
};
enum tw_result plan_job_fit(const struct job *j, struct plan_fit *out, struct tw_err *err);
/* The same verdict folded role by role from walks made elsewhere (twin simulate walks the plans
 * the simulator builds): init, then add each role's walk; the worst shortfall stands. */
void plan_fit_init(struct plan_fit *f);
void plan_fit_add(struct plan_fit *f, const struct plan_mem *m, int64_t rank);

/* The trace category an op is recorded under (the simulator and the executor both use it). */
enum trace_cat plan_op_trace_cat(const struct plan_op *op);
/* The trace flags an op's event carries from the plan (TRACE_F_RECOMPUTE, TRACE_F_REDUCE),
 * from its kind, collective (enum plan_coll; any value for other kinds) and plan flags.
 * Inline: the simulator calls it for every event it records. */
static inline uint32_t plan_trace_flags(enum plan_kind kind, int coll, unsigned flags)
{
	return ((flags & PLAN_F_RECOMPUTE) ? TRACE_F_RECOMPUTE : 0) |
	       (kind == PLAN_COLL && coll == PLAN_REDUCE ? TRACE_F_REDUCE : 0);
}

/* How unfused attention runs its softmax (compute.torch_softmax) */
enum {
	PLAN_SOFTMAX_FUSED = 0,  /* Megatron's fused scale-mask-softmax kernel */
	PLAN_SOFTMAX_FALLBACK,   /* its fp32 PyTorch fallback (float, scale, masked_fill_, half) */
	PLAN_SOFTMAX_HF_EAGER    /* HF's eager attention: scale, mask add, fp32 softmax, cast back */
};

/* Extra HBM bytes of an unfused attention op over Megatron's fused softmax (13 bytes per score
 * element forward, 26 backward): Megatron's fp32 fallback moves 37 bytes per score where its
 * kernel moves 4, backward 41 for 6 (33 and 35 more); HF's eager attention writes the scores,
 * scales them, adds the mask, softmaxes into fp32 and casts back before P·V reads them: 24
 * (11 more), backward 26 (none more); 0 for any other op. */
double plan_torch_softmax_bytes(const struct plan_op *op);
/* A GEMM op's GEMMs by shape: batch x (m x k)(k x n) forward and in a recompute; a backward
 * op's data grads dY W^T (batch x (m x n)(n x k)) and, with an even batch and grads BOTH, half
 * of them weight grads X^T dY ((k x m)(m x n)); or all of the one kind its grads name. The
 * simulator times each part by its own shape, the executors run them. Returns the parts (1 or
 * 2) written to out. */
struct plan_gemm_part {
	int64_t m, n, k, batch;
};
static inline int plan_gemm_parts(const struct plan_op *op, struct plan_gemm_part out[2])
{
	int64_t m = op->u.compute.m, n = op->u.compute.n, k = op->u.compute.k;
	int64_t batch = op->u.compute.batch > 0 ? op->u.compute.batch : 1;
	bool bwd = op->phase == PLAN_PHASE_BWD && !(op->flags & PLAN_F_RECOMPUTE);
	if (!bwd) {
		out[0] = (struct plan_gemm_part){ m, n, k, batch };
		return 1;
	}
	if (op->u.compute.grads == PLAN_GRADS_WEIGHT) {
		out[0] = (struct plan_gemm_part){ k, n, m, batch };
		return 1;
	}
	if (op->u.compute.grads == PLAN_GRADS_DATA || batch % 2 != 0) {
		out[0] = (struct plan_gemm_part){ m, k, n, batch };
		return 1;
	}
	out[0] = (struct plan_gemm_part){ m, k, n, batch / 2 };
	out[1] = (struct plan_gemm_part){ k, n, m, batch / 2 };
	return 2;
}

/* How many times a compute op is issued in a row (its repeat, at least 1). */
static inline int64_t plan_op_repeat(const struct plan_op *op)
{
	return op->kind == PLAN_COMPUTE && op->u.compute.repeat > 1 ? op->u.compute.repeat : 1;
}
/* The share of an attention op's s_q x s_kv query-key pairs its kernel computes (1/2 causal,
 * less for a flash kernel over a sliding window: model_attn_frac of the op's layer; 1 without
 * a mask) into *share, and the keys the executors' GEMMs span for it: s_kv, or a band as wide
 * against the window's share as the causal square against its half. */
int64_t plan_attn_band(const struct job *j, const struct plan_op *op, double *share);

const char *plan_kind_name(enum plan_kind k);
const char *plan_stream_name(enum plan_stream s);
const char *plan_kernel_name(enum plan_kernel k);
const char *plan_coll_name(enum plan_coll c);     /* "all_gather", ... */
const char *plan_copy_name(enum plan_copy c);
const char *plan_mem_cat_name(enum plan_mem_cat c);
const char *plan_device_name(enum plan_device d);
const char *plan_phase_name(enum plan_phase p);
/* The op's dependencies (op->ndeps of them; NULL when none: a plan may have no deps array). */
static inline const uint32_t *plan_op_deps(const struct plan *p, const struct plan_op *op)
{
	return op->ndeps ? p->deps + op->dep_off : NULL;
}

#endif
