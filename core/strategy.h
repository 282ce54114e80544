/* strategy — how the job is parallelised and run: DeepSpeed's ds_config.json read with
 * DeepSpeed's own semantics (defaults, batch rule, strict sections, "auto", deprecated keys),
 * plus what ds_config does not hold (tp, pp, cp, ep, vp, schedule, recompute, framework,
 * LoRA, ...) in our strategy JSON (docs/strategy.md), which may embed a ds_config under
 * "ds_config". Every resolved value records where it came from (struct strat_prov). */
#ifndef TW_STRATEGY_H
#define TW_STRATEGY_H

#include "tw.h"

enum strat_framework { STRAT_DEEPSPEED = 0, STRAT_MEGATRON, STRAT_FSDP };
/* none; Megatron's selective (the attention core); full (the layer from its input); op:
 * torchtitan's selective op AC (every second matmul and the memory-bound ops recomputed) */
enum strat_recompute { STRAT_RECOMPUTE_NONE = 0, STRAT_RECOMPUTE_SELECTIVE, STRAT_RECOMPUTE_FULL,
		       STRAT_RECOMPUTE_OP };
enum strat_schedule {
	STRAT_SCHED_DS_1F1B = 0,   /* DeepSpeed TrainSchedule (synchronous 1F1B) */
	STRAT_SCHED_1F1B,          /* Megatron 1F1B (non-interleaved) */
	STRAT_SCHED_INTERLEAVED,   /* Megatron interleaved, vp model chunks per stage */
	STRAT_SCHED_GPIPE          /* all forwards, then all backwards */
};
enum strat_offload { STRAT_OFFLOAD_NONE = 0, STRAT_OFFLOAD_CPU, STRAT_OFFLOAD_NVME };
enum strat_fsdp { STRAT_FSDP_FULL_SHARD = 0, STRAT_FSDP_SHARD_GRAD_OP, STRAT_FSDP_HYBRID_SHARD,
		  STRAT_FSDP_NO_SHARD };
/* How context parallelism exchanges keys and values: ring (Transformer Engine's p2p ring,
 * PyTorch's all-to-all rotation), ulysses (all-to-all of heads), allgather (Transformer
 * Engine's KV all-gather; PyTorch's ring attention with its default all-gather rotation) */
enum strat_cp_kind { STRAT_CP_RING = 0, STRAT_CP_ULYSSES, STRAT_CP_ALLGATHER };
/* The model code's memory-bound ops: fused kernels (Megatron, Transformer Engine,
 * torch.compile) or eager PyTorch modules (HF transformers, torchtitan): RMSNorm, SwiGLU and
 * RoPE as several kernels each, with fp32 intermediates (docs/plan.md, "Eager ops"). */
enum strat_kernels { STRAT_KERNELS_FUSED = 0, STRAT_KERNELS_EAGER };
enum strat_ce { STRAT_CE_UNFUSED = 0, STRAT_CE_FUSED };
/* how routed tokens reach the experts: one all-to-all over the expert group, or DeepEP's
 * (Megatron-Core's flex dispatcher): once to each node a token reaches, over the network to the
 * rank in the same place there, and on over NVLink, the two stages pipelined */
enum strat_dispatcher { STRAT_DISPATCH_ALLTOALL = 0, STRAT_DISPATCH_DEEPEP };
enum strat_optimizer { STRAT_OPT_ADAMW = 0, STRAT_OPT_ADAM, STRAT_OPT_SGD, STRAT_OPT_LION,
		       STRAT_OPT_ADAGRAD };

/* LoRA target modules, bit set */
enum { STRAT_LORA_Q = 1, STRAT_LORA_K = 2, STRAT_LORA_V = 4, STRAT_LORA_O = 8,
       STRAT_LORA_GATE = 16, STRAT_LORA_UP = 32, STRAT_LORA_DOWN = 64 };

/* Megatron-Core's --recompute-modules under selective recompute, bit set: the attention core
 * (the default), a dense layer's MLP, the MoE experts' activation function, the shared experts,
 * the norms that are modules of their own, an MoE layer whole */
/* Megatron-Core's CUDA graphs (cuda_graph_impl) and what they capture (cuda_graph_modules;
 * none of the bits: the whole layer) */
enum strat_cg_impl { STRAT_CG_NONE = 0, STRAT_CG_TE, STRAT_CG_LOCAL };
enum { STRAT_CG_ATTN = 1, STRAT_CG_MLP = 2, STRAT_CG_MOE = 4, STRAT_CG_MOE_ROUTER = 8,
       STRAT_CG_MOE_PREPROCESS = 16 };
enum { STRAT_RC_CORE_ATTN = 1, STRAT_RC_MLP = 2, STRAT_RC_MOE_ACT = 4, STRAT_RC_SHARED = 8,
       STRAT_RC_LAYERNORM = 16, STRAT_RC_MOE = 32, STRAT_RC_MLA_UP = 64 };

enum strat_src { STRAT_SRC_DEFAULT = 0, STRAT_SRC_FILE, STRAT_SRC_DERIVED, STRAT_SRC_SET,
		 STRAT_SRC_OPTION };
struct strat_prov {
	char path[64];   /* "zero_optimization.reduce_bucket_size", "tp", ... */
	char value[64];  /* as printed */
	enum strat_src src;
	char why[96];    /* "DeepSpeed default (>= 0.19.5)", "train_batch_size / (micro*dp)", file */
};

#define STRAT_MAX_PROV 128
/* Default host time per framework op in eager PyTorch (Megatron, DeepSpeed, FSDP), us: the
 * CUDA launch alone takes 5-20 us of host time per kernel (HTA docs, reference/profiling.md
 * s1.6) and an eager op adds Python, the dispatcher and autograd recording on top; docs/simulator.md. */
#define STRAT_HOST_OP_US 20.0
struct strategy {
	enum strat_framework framework;
	char deepspeed_version[16];  /* selects defaults that changed between versions */
	/* ZeRO-3 code paths of old DeepSpeed releases (docs/strategy.md): before 0.5.5 every
	 * parameter is gathered on its own, through per-rank Python and C++ copy loops; before
	 * 0.6.0 the fetch and the prefetch synchronize the device (torch.cuda.synchronize())
	 * and every gradient is reduce-scattered on its own through the same kind of per-rank
	 * lists; from 0.3.15 to 0.6.0 the fetch also formats each parameter's norm into a debug
	 * string nobody prints (a norm kernel and a host wait per parameter) */
	bool ds_fetch_per_param, ds_fetch_sync, ds_fetch_norm, ds_rs_per_param;
	/* ZeRO-1/2 without use_multi_rank_bucket_allreduce: each partition's slice of a bucket
	 * is reduced to its owner (dist.reduce: before 0.12.4 and from 0.13.0) or all-reduced
	 * (0.12.4 to 0.12.x: allreduce_bucket reset its rank to None) */
	bool ds_reduce_rooted;
	/* ZeRO-3 partial offload (offload_optimizer.ratio) puts the last n - int((1 - ratio) n)
	 * sub-groups on the host from 0.18.0 (SuperOffload, #7559), the first int(ratio n) before */
	bool ds_ratio_last;
	/* The pipeline engine's PartitionedTensor.full() all-gathers into a list of views of its
	 * flat buffer before 0.12.4 (#4705): PyTorch gathers into a temporary and copies each part
	 * out; before 0.12.6 (#4360) from_meta reads the meta back with .tolist() every time, a
	 * host sync, where later releases cache it on the CPU */
	bool ds_pipe_list_gather, ds_pipe_meta_sync;

	/* degrees; dp is derived: gpus / (tp * pp * cp) */
	int64_t gpus, tp, pp, dp, cp, ep, vp;
	/* Megatron-Core's --expert-tensor-parallel-size: the experts' TP degree (tp by default).
	 * Another value folds the expert groups over the tp x cp x dp ranks of a stage (MoE
	 * parallel folding): etp fastest, then ep, then the expert data-parallel replicas */
	int64_t expert_tp;
	enum strat_cp_kind cp_kind;
	bool sequence_parallel;     /* Megatron SP (with tp) */
	enum strat_schedule schedule;
	/* Megatron-Core --decoder-first/last-pipeline-num-layers: the first and the last stage
	 * hold this many layers and the middle ones share the rest equally; 0: an equal share */
	int64_t first_stage_layers, last_stage_layers;
	/* Megatron-Core's account_for_embedding/loss_in_pipeline_split: the embedding (the loss)
	 * counts as a layer of the split. With vp 1 they only derive first/last_stage_layers;
	 * with vp > 1 the first (last) virtual stage holds one layer fewer */
	bool embed_in_split, loss_in_split;

	/* batch: DeepSpeed's rule train_batch = micro * grad_accum * dp */
	int64_t micro_batch, grad_accum, global_batch;
	int64_t seq_len;            /* 0: the model's */

	/* precision */
	enum tw_dtype param_dtype;  /* bf16, fp16 or fp32 */
	enum tw_dtype grad_accum_dtype;
	enum tw_dtype comm_dtype;
	bool fp8_gemm;              /* GEMMs in fp8 (Transformer Engine) */
	bool tf32;                  /* fp32 matmuls on TF32 tensor cores (torch allow_tf32) */
	enum strat_kernels kernels; /* fused or eager memory-bound ops */
	bool loss_scaling;          /* fp16 dynamic loss scaling */
	bool check_grad_overflow;   /* bf16.check_grad_overflow (DeepSpeed >= 0.19.3: true) */
	enum strat_optimizer optimizer;

	/* ZeRO (DeepSpeed) */
	int zero_stage;
	bool overlap_comm, contiguous_gradients, reduce_scatter;
	bool use_multi_rank_bucket_allreduce; /* ZeRO-1/2: one all-reduce per bucket (§2.2) */
	int64_t reduce_bucket_size, allgather_bucket_size;          /* elements */
	int64_t prefetch_bucket_size, param_persistence_threshold;  /* elements */
	int64_t max_live_parameters, max_reuse_distance, sub_group_size; /* elements */
	enum strat_offload offload_optimizer, offload_param;
	bool offload_pin_memory;        /* offload_optimizer.pin_memory */
	bool offload_param_pin_memory;  /* offload_param.pin_memory */
	int64_t offload_param_buffers, offload_param_buffer_elems; /* NVMe: buffer_count, _size */
	double offload_ratio;       /* ZeRO-3 partial optimizer offload, (0, 1] */
	double gradient_clipping;
	/* ZeRO++ and MiCS (ZeRO-3 only; reference/deepspeed.md §2.4): hpZ keeps a secondary
	 * parameter partition over zero_hpz consecutive ranks, which every gather after the
	 * step's first forward uses (1: off); qwZ gathers parameters as int8 with fp32 block
	 * scales; qgZ reduces gradients with int4 all-to-alls, within then across nodes (only on
	 * more than one node); MiCS shards the states within shard_group ranks and all-reduces
	 * the grad partitions across the replicas at the accumulation boundary (0: off) */
	int64_t zero_hpz;
	bool zero_qweights, zero_qgrads;
	bool zero_qfrozen;          /* zero_quantized_nontrainable_weights: frozen parameters
				     * (LoRA's base weights) kept and gathered as int8 */
	int64_t mics_shard;
	bool mics_hier;             /* mics_hierarchical_params_gather: across nodes, then within */

	/* Megatron / FSDP */
	bool distributed_optimizer;
	/* Megatron-Core DDP: reduce(-scatter) gradient buckets during the last backward
	 * (--overlap-grad-reduce) and all-gather updated parameters bucket by bucket before
	 * their forward (--overlap-param-gather, needs the distributed optimizer); both off by
	 * default, as in Megatron */
	bool overlap_grad_reduce, overlap_param_gather;
	/* Megatron-Core --tp-comm-overlap (Transformer Engine userbuffers, needs sequence
	 * parallelism): each SP all-gather / reduce-scatter is split into chunks pipelined with
	 * the GEMM next to it; off by default */
	bool tp_comm_overlap;
	/* Megatron-LM's interleaved schedule with overlap_p2p_comm (default since 2023-10;
	 * --no-overlap-p2p-communication): each receive is posted with the previous send of its
	 * direction as a separate irecv, so it runs under the compute between; only the
	 * interleaved schedule has it */
	bool overlap_p2p_comm;
	/* Megatron-LM's scatter-gather optimization (--no-scatter-gather-tensors-in-pipeline; on
	 * by default from 2021-02 until the p2p code moved into Megatron-Core in 2023-01, and in
	 * Megatron-DeepSpeed): without sequence parallelism each rank of a TP group sends its
	 * 1/tp share of a stage-boundary tensor and the receiver all-gathers it over TP */
	bool scatter_gather_p2p;
	/* Megatron's async_tensor_model_parallel_allreduce (since 2021-09; legacy flag
	 * --no-async-tensor-model-parallel-allreduce): a column-parallel linear's backward starts
	 * the all-reduce of its input grad and computes the weight grad while it runs; on by
	 * default. With sequence parallelism the backward's gather and reduce-scatter always
	 * overlap that way, whatever this says. */
	bool async_tp_allreduce;
	enum strat_fsdp fsdp_sharding;
	int64_t shard_group;        /* ranks that shard one replica: FSDP HYBRID_SHARD (default the
				     * data-parallel ranks of a node) or DeepSpeed MiCS; dp otherwise */
	int fsdp_version;           /* 1: FSDP's flat parameters; 2: fully_shard (FSDP2), which
				     * copies the shards in and the gathered parameters out around
				     * each all-gather and the grads in before each reduce-scatter */

	/* activations */
	enum strat_recompute recompute;
	int64_t recompute_num_layers; /* full recompute of only the first N layers of each stage's
				       * model chunk (Megatron's block method); 0: every layer */
	unsigned recompute_modules;   /* STRAT_RC_* with recompute selective (core_attn alone
				       * unless given; 0 reads as core_attn) */
	bool partition_activations, cpu_checkpointing;
	bool flash_attention;       /* default true: no s*s scores saved */
	/* dropout probabilities (Megatron's --hidden-dropout, --attention-dropout; HF configs'
	 * hidden/attention dropout): a hidden dropout > 0 keeps a 1-byte mask after the attention
	 * and the MLP, an attention dropout > 0 one over the s x s probabilities and its output
	 * (without flash attention). Default 0.1 for Megatron's model code (its defaults), 0 for
	 * eager HF / torchtitan modules (Llama-style configs) */
	double hidden_dropout, attention_dropout;
	/* Megatron-Core's --cuda-graph-impl (transformer_engine or local: per-layer graphs) and
	 * --cuda-graph-modules (STRAT_CG_*; 0 with an impl: the whole layer): a captured module's
	 * forward and backward are each one graph replay, which the host issues in place of the
	 * module's framework calls */
	enum strat_cg_impl cuda_graph_impl;
	unsigned cuda_graph_modules;
	/* the flash attention kernel whose table in the cluster's eff.attn_kernels times attention
	 * ("fa2", "fa3", "cudnn", ...); "": the cluster's eff.attn */
	char attention_kernel[16];
	/* cross-entropy: unfused (the model code's own, docs/plan.md) or fused (one kernel that
	 * writes the logits' gradient in place of the 16-bit logits: Transformer Engine's and
	 * Liger's, flash-attn's with inplace_backward) */
	enum strat_ce cross_entropy;
	enum strat_dispatcher moe_dispatcher;
	/* Megatron-Core's overlap_moe_expert_parallel_comm (--overlap-moe-expert-parallel-comm):
	 * the combined 1F1B schedule runs one micro-batch's forward beside another's backward,
	 * layer by layer, so each one's dispatch and combine all-to-alls run under the other's
	 * compute; off by default */
	bool moe_a2a_overlap;
	/* tokens the busiest expert rank receives over the mean (>= 1; 1: balanced, as
	 * benchmarks force it): a what-if of dropless routing's imbalance. Every rank is costed
	 * as the busiest (its experts' GEMMs, all-to-alls and activations), since the others wait
	 * for it at the next all-to-all */
	double moe_load_imbalance;
	/* Megatron-Core's moe_shared_expert_overlap (--moe-shared-expert-overlap): the shared
	 * experts' fc1 runs beside the dispatch all-to-all and fc2 beside the combine, both ways;
	 * off by default (Megatron-Bridge's DeepSeek providers turn it on) */
	bool moe_shared_overlap;
	/* Megatron-Core's delay_wgrad_compute (needs overlap_moe_expert_parallel_comm): the
	 * experts' weight grads are computed apart from their input grads, while the dispatch's
	 * backward all-to-all runs; off by default */
	bool delay_wgrad;
	/* Megatron-Core's --moe-expert-capacity-factor (0: dropless, its default) and
	 * --moe-pad-expert-input-to-capacity: an expert takes at most factor x its mean share of
	 * tokens and drops the rest; padded, every expert runs its whole capacity, the
	 * all-to-alls have fixed sizes and the host does not wait for the token counts */
	double moe_capacity_factor;
	bool moe_pad_to_capacity;
	/* Megatron-Core's --moe-permute-fusion: Transformer Engine's fused kernels rearrange the
	 * tokens around the all-to-alls; off (its default), PyTorch ops do: an argsort, index
	 * select, scatter-add, split and cat */
	bool moe_permute_fusion;
	/* Megatron-Core's --moe-grouped-gemm: a rank's local experts run as grouped GEMMs
	 * (TEGroupedMLP); off (its default), SequentialMLP loops over them, an MLP each, and
	 * concatenates their outputs */
	bool moe_grouped_gemm;
	/* DeepSpeed's MoE layer without drop_tokens (key moe_drop_tokens false; Megatron-DeepSpeed's
	 * --disable-moe-token-dropping): the capacity is the busiest expert's count
	 * (moe_load_imbalance), every expert padded to it. Off, DeepSpeed's default, it pads every
	 * expert to moe_expert_capacity_factor (its capacity_factor, default 1) times its mean
	 * share and drops the rest */
	bool moe_dropless;
	/* DeepSpeed's MoE layer's min_capacity (Megatron-DeepSpeed's --moe-min-capacity, default
	 * 4): no expert's capacity below it, in tokens */
	int64_t moe_min_capacity;
	/* Megatron-Core's --moe-router-fusion: Transformer Engine's fused kernels for the top-k
	 * routing and the load-balancing loss's scores; off (its default), PyTorch ops (top-k,
	 * softmax, casts, zero-filled scatters into dense maps) */
	bool moe_router_fusion;
	/* Megatron-Core's --moe-aux-loss-coeff (0, its default: no load-balancing loss); > 0 adds
	 * the loss's ops and its tokens-per-expert all-reduce over TP x CP to each MoE layer */
	double moe_aux_loss_coeff;
	/* Megatron-Core's --moe-z-loss-coeff (0: none, its default); > 0 adds the router z-loss's
	 * ops (logsumexp of the logits, squared, averaged) to each MoE layer */
	double moe_z_loss_coeff;
	/* NCCL_ALGO / NCCL_PROTO as the job's environment sets them: the algorithms and protocols
	 * they take away from NCCL's tuner, bit i = strat_nccl_algo_names[i] /
	 * strat_nccl_proto_names[i] (0: NCCL's default, all of them); the text as given */
	unsigned nccl_no_algos, nccl_no_protos;
	unsigned nccl_named_protos; /* named in a NCCL_PROTO list (not '^'): NCCL then enables LL128
				     * whatever its hardware checks say */
	unsigned nccl_named_algos;  /* named in a NCCL_ALGO list (not '^'): the simulator's tuner
				     * takes NVLSTree only then (docs/simulator.md) */
	char nccl_algo[64], nccl_proto[64];
	/* DeepSpeed's pipeline engine (ds_config "pipeline", default true): with TP > 1 the
	 * activations / grads sent between stages are split over the TP group and all-gathered
	 * by the receiver (PartitionedTensor); false elsewhere */
	bool pipe_partitioned, grad_partitioned;

	/* host dispatch: the CPU time one framework op costs the rank's issuing thread (Python,
	 * dispatcher, autograd, CUDA launch), us; 0: the host never delays the GPU (sim) */
	double host_op_us;

	/* LoRA (rank 0: off) */
	int64_t lora_rank;
	unsigned lora_targets;

	/* provenance of every value above, in print order */
	int nprov;
	struct strat_prov prov[STRAT_MAX_PROV];
};

struct model;
struct cluster;

/* What the user gave: a DeepSpeed config and/or our strategy file (either may be NULL),
 * --set overrides (strategy paths), and options given on the command line. */
struct strat_inputs {
	const char *ds_config_path;
	const char *strategy_path;  /* preset name in strategies_dir or a path */
	const char *strategies_dir;
	const char *const *sets;
	int nsets;
	int64_t gpus;               /* --gpus */
	bool quiet;                 /* no warnings (MPI ranks other than 0 repeat rank 0's) */
};

/* Resolve the strategy for a model on a cluster: read files, apply sets, defaults, derive
 * dp and the batch triple, and check every rule the frameworks check. */
enum tw_result strategy_resolve(const struct strat_inputs *in, const struct model *m,
				const struct cluster *c, struct strategy *out, struct tw_err *err);

void strategy_list_presets(const char *strategies_dir, char *buf, size_t len);
const char *strat_src_name(enum strat_src s);
const char *strat_kernels_name(enum strat_kernels k); /* "fused", "eager" */
/* NCCL's collective algorithms and protocols the simulator models, in the simulator's order */
#define STRAT_NCCL_ALGOS 5
#define STRAT_NCCL_PROTOS 3
extern const char *const strat_nccl_algo_names[STRAT_NCCL_ALGOS];   /* tree ring nvls pat nvlstree */
extern const char *const strat_nccl_proto_names[STRAT_NCCL_PROTOS]; /* LL LL128 Simple */
/* NCCL_ALGO (protos false) or NCCL_PROTO text in NCCL's syntax (strategy fields nccl_algo,
 * nccl_proto): the bits it takes from the tuner (*no) and those it names (*named; 0 for a '^'
 * list). False, with why, when NCCL would refuse the text or it leaves nothing modelled. */
bool strat_nccl_list(const char *text, bool protos, unsigned *no, unsigned *named, char *why,
		     size_t why_len);
const char *strat_recompute_name(enum strat_recompute r); /* "none", "selective", "full", "op" */
/* Megatron-Core's name of recompute module bit i (STRAT_RC_* = 1 << i), NULL past the last */
const char *strat_rc_module_name(int i);
struct cJSON *strategy_to_json(const struct strategy *s);
/* The layers model chunk `chunk` of pipeline stage `stage` holds: its first global layer and
 * count (0 for a virtual stage that holds only the embedding or the loss). One chunk a stage
 * unless the schedule is interleaved (vp chunks; virtual stage chunk x pp + stage, Megatron's
 * layout). Megatron and FSDP: equal shares, or first/last_stage_layers (with vp, each chunk
 * holds 1/vp of its stage's count), or the embedding / loss counted in the split; DeepSpeed:
 * the first layers % pp stages take one more (its uniform partition). */
void strategy_chunk_layers(const struct strategy *s, int64_t layers, int64_t stage,
			   int64_t chunk, int64_t *first, int64_t *count);
/* The context-parallel ranks expert groups fold in: Megatron-Core forms them over dp x cp (cp
 * varying faster), so cp; DeepSpeed and FSDP from data-parallel ranks alone, so 1. Expert
 * groups are carved from dp x strat_ep_cp ranks. */
int64_t strat_ep_cp(const struct strategy *s);
/* The ranks of one pipeline stage expert groups are carved out of: tp x dp x strat_ep_cp;
 * expert_tp x ep divides it and the rest are the expert data-parallel replicas. */
int64_t strat_ep_span(const struct strategy *s);
/* expert_tp, or tp where a strategy built by hand left it 0 */
int64_t strat_expert_tp(const struct strategy *s);

#endif
