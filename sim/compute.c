/* Compute cost: roofline with the cluster's efficiency tables (DESIGN.md, "The simulator"):
 * time = max(FLOPs / (peak x eff_gemm|attn(FLOPs)), bytes / (HBM x eff_mem(bytes))) + launch,
 * where a GEMM with a shape (m, n, k, batch) on a GPU takes its efficiency from the tile
 * model instead (sim_gemm_eff: asymptotic efficiency x wave quantisation x K ramp).
 * Host-stream work (the CPU optimizer of ZeRO-Offload) is bound by the node's DRAM bandwidth
 * shared by its GPUs' processes. */
#include <math.h>
#include <string.h>

#include "sim_int.h"

double sim_eff(const struct cluster_eff_table *t, double x)
{
	double e = 1.0;
	if (!t || t->n <= 0)
		return e;
	for (int i = 0; i < t->n && i < CLUSTER_MAX_EFF; i++)
		if (t->min[i] <= x)
			e = t->eff[i];
	return e > 0 ? e : 1.0;
}

int sim_gpu_cc(const struct cluster *c)
{
	const char *n = c->gpu.name;
	if (c->gpu.arch_sm > 0)
		return c->gpu.arch_sm;
	if (strstr(n, "B200") || strstr(n, "B100") || strstr(n, "GB2") || strstr(n, "B300"))
		return 100;
	if (strstr(n, "H100") || strstr(n, "H200") || strstr(n, "H800") || strstr(n, "GH"))
		return 90;
	if (strstr(n, "A100") || strstr(n, "A800") || strstr(n, "A10") || strstr(n, "A30"))
		return 80;
	if (strstr(n, "V100"))
		return 70;
	return 80;
}

/* GEMM tile of the large cuBLAS/CUTLASS tensor-core kernels that layer-sized GEMMs run
 * (docs/simulator.md, "GEMM time"): 256x128 output tiles with 32-deep K steps on Volta/Ampere
 * (cuBLAS "volta_h884gemm_256x128_ldg8" and "ampere_fp16_s16816gemm_fp16_256x128_ldg8_..._
 * stages_64x3" kernels, the ones A100 Megatron profiles show), 128x256x64 warp-group tiles
 * on Hopper ("sm90_xmma_gemm_..._tilesize128x256x64"); Blackwell's 2-SM 256x256 tiles are the
 * same 128x256 per SM. One CTA per SM (their shared-memory footprint allows one). */
static void gemm_tile(int cc, double *tm, double *tn, double *tk)
{
	*tm = 128, *tn = 256, *tk = cc >= 90 ? 64 : 32;
	if (cc < 90)
		*tm = 256, *tn = 128;
}

/* Framework calls of a CUDA graph's replay: the Function, the input copy, the launch */
#define SIM_GRAPH_REPLAY_CALLS 3.0

/* Fixed per-tile cost in K steps: filling the multi-stage shared-memory pipeline (3-4 stages)
 * and the epilogue that converts and writes the output tile (about as long as the fill). */
#define GEMM_TILE_OVERHEAD_STEPS 8.0

double sim_gemm_eff(const struct cluster *c, int64_t m, int64_t n, int64_t k)
{
	return sim_gemm_eff_grouped(c, m, n, k, 1);
}

/* `groups` GEMMs of one shape in one grouped call: their tiles fill the waves together */
double sim_gemm_eff_grouped(const struct cluster *c, int64_t m, int64_t n, int64_t k,
			    int64_t groups)
{
	double g = groups > 1 ? (double)groups : 1.0;
	/* asymptotic efficiency: the top step of the cluster's GEMM table, the best large-GEMM
	 * throughput measured (MAMF, reference/cost-models.md s6.6) */
	double top = sim_eff(&c->eff.gemm, INFINITY);
	double tm, tn, tk;
	gemm_tile(sim_gpu_cc(c), &tm, &tn, &tk);
	int sms = c->gpu.sms > 0 ? c->gpu.sms : 1;
	/* wave quantisation (NVIDIA, "Matrix Multiplication Background", s3.2): the last wave
	 * of tiles leaves SMs idle; cuBLAS picks the tile orientation that wastes less */
	double best = 0;
	for (int o = 0; o < 2; o++) {
		double a = o ? tn : tm, b = o ? tm : tn;
		double tiles = g * ceil((double)m / a) * ceil((double)n / b);
		double waves = ceil(tiles / sms);
		/* partial tiles at the edges do full-tile work */
		double useful = g * (double)m * (double)n / (a * b);
		double q = useful / (waves * sms);
		if (q > best)
			best = q;
	}
	/* K ramp: each tile's main loop of k/tk steps pays a fixed pipeline fill and epilogue */
	double steps = ceil((double)k / tk);
	double kr = steps / (steps + GEMM_TILE_OVERHEAD_STEPS);
	/* the MAMF shapes are large in K too: their own ramp is already in `top` */
	double kr_ref = 8192.0 / tk / (8192.0 / tk + GEMM_TILE_OVERHEAD_STEPS);
	double e = top * best * kr / kr_ref;
	return e > 0 ? fmin(e, top) : top;
}

/* FLOP-bound time (s) of a shaped GEMM op: its GEMMs by shape (plan_gemm_parts: a backward
 * op's data and weight grads have their own tiles and waves), one kernel each or grouped
 * `group` to a call (their tiles share the waves); each GEMM's FLOPs are the op's over its
 * batch (MoE: the exact token load). */
static double gemm_flop_time(const struct cluster *c, const struct plan_op *op, double flops,
			     double peak)
{
	int64_t g = op->u.compute.group > 1 ? op->u.compute.group : 1;
	double per = flops / (op->u.compute.batch > 0 ? (double)op->u.compute.batch : 1.0);
	struct plan_gemm_part part[2];
	int np = plan_gemm_parts(op, part);
	double t = 0;
	for (int i = 0; i < np; i++)
		t += (double)part[i].batch * per /
		     (peak * sim_gemm_eff_grouped(c, part[i].m, part[i].n, part[i].k, g));
	return t;
}

static double peak_flops(const struct cluster *c, int dtype)
{
	double p = dtype >= 0 && dtype < TW_NUM_DTYPES ? c->gpu.peak_tflops[dtype] : 0;
	if (p <= 0)
		p = c->gpu.peak_tflops[TW_BF16] > 0 ? c->gpu.peak_tflops[TW_BF16] : c->gpu.peak_tflops[TW_FP16];
	if (p <= 0)
		p = c->gpu.peak_tflops[TW_FP32];
	return p * 1e12;
}

int64_t sim_compute_ns(const struct job *j, const struct plan_op *op)
{
	const struct cluster *c = &j->cluster;
	double flops = op->u.compute.flops, bytes = op->u.compute.bytes, t;
	/* eager ops launch several; a loop over local experts, each time */
	double launches = (1.0 + op->u.compute.extra_kernels) * plan_op_repeat(op);
	if (op->stream == PLAN_STREAM_HOST) {
		/* the host's memory and cores are shared by the job's processes on the node
		 * (DeepSpeedCPUAdam's OpenMP threads take every core a process is given) */
		double per = (double)job_node_ranks(j);
		double bw = c->node.cpu_mem_GBps * 1e9 / per;
		double fl = c->node.cpu_tflops * 1e12 / per;
		t = 0;
		if (bw > 0)
			t = bytes / bw;
		if (fl > 0)
			t = fmax(t, flops / fl);
		return sim_ns_ceil(t * 1e9);
	}
	double peak = peak_flops(c, op->u.compute.dtype);
	double hbm = c->gpu.hbm_GBps * 1e9;
	const struct cluster_eff_table *et = op->u.compute.kernel == PLAN_K_GEMM   ? &c->eff.gemm
					     : op->u.compute.kernel == PLAN_K_ATTN ? &c->eff.attn
										   : NULL;
	/* a named flash attention kernel has its own table (the strategy checked it exists) */
	if (op->u.compute.kernel == PLAN_K_ATTN && j->strat.flash_attention &&
	    j->strat.attention_kernel[0]) {
		const struct cluster_eff_table *kt =
			cluster_attn_kernel(c, j->strat.attention_kernel, NULL, 0);
		if (kt)
			et = kt;
	}
	if (op->u.compute.kernel == PLAN_K_ATTN && !j->strat.flash_attention && op->u.compute.s_q > 0) {
		/* unfused attention (Megatron's fused scale-mask-softmax, no FlashAttention): the
		 * full s_q x s_kv score matrix is computed (no causal saving) and goes through HBM:
		 * forward writes the scores, softmax reads and writes them, dropout reads them and
		 * writes probabilities and a 1-byte mask, AV reads them: 6.5 passes of 2 bytes
		 * (4 without attention dropout: PyTorch skips a dropout of p = 0); backward about
		 * twice that */
		double sxs = (double)op->u.compute.b * (double)op->u.compute.heads *
			     (double)op->u.compute.s_q * (double)op->u.compute.s_kv;
		bool bwd = op->phase == PLAN_PHASE_BWD && !(op->flags & PLAN_F_RECOMPUTE);
		if (op->u.compute.causal)
			flops *= 2.0;
		double passes = j->strat.attention_dropout > 0 ? 6.5 : 4.0;
		bytes += sxs * 2.0 * passes * (bwd ? 2.0 : 1.0);
		/* PyTorch's fp32 softmax instead of the fused kernel (core/plan_build.c
		 * torch_softmax): its bytes (its kernels are the op's extra_kernels) */
		bytes += plan_torch_softmax_bytes(op);
	}
	double tf = 0, tm = 0;
	/* the tile model is for GPUs with tensor-core tiles (compute capability 7.0 and later);
	 * CPU ranks (arch_sm 0) keep the cluster's table */
	if (op->u.compute.kernel == PLAN_K_GEMM && c->gpu.arch_sm >= 70 && op->u.compute.m > 0 &&
	    op->u.compute.n > 0 && op->u.compute.k > 0 && flops > 0 && peak > 0)
		tf = gemm_flop_time(c, op, flops, peak);
	else if (flops > 0 && peak > 0)
		tf = flops / (peak * (et ? sim_eff(et, flops) : sim_eff(&c->eff.gemm, 0)));
	if (bytes > 0 && hbm > 0)
		tm = bytes / (hbm * sim_eff(&c->eff.mem, bytes));
	t = fmax(tf, tm) + launches * c->gpu.launch_us * 1e-6;
	/* at the pace of the job's slowest GPU (cluster_job_pace) */
	if (j->pace > 0)
		t *= j->pace;
	return sim_ns_ceil(t * 1e9);
}

int64_t sim_copy_ns(const struct job *j, const struct plan_op *op, double *bw_GBps)
{
	const struct cluster *c = &j->cluster;
	double bw = c->node.pcie_GBps;
	if (op->u.copy.dir == PLAN_NVME_READ || op->u.copy.dir == PLAN_NVME_WRITE)
		bw = c->node.nvme_GBps / (double)job_node_ranks(j); /* the node's drives, shared */
	if (bw_GBps)
		*bw_GBps = bw;
	if (bw <= 0)
		return 0;
	return sim_ns_ceil((double)op->u.copy.bytes / bw + c->node.pcie_latency_us * 1e3);
}

/* Framework ops one plan op stands for: the Python-level calls the rank's thread makes to
 * issue it (docs/simulator.md, "Host dispatch"), counted from Megatron-LM's GPT layer in eager
 * PyTorch (2021-23 code, which Megatron-DeepSpeed shares):
 *  - a linear: the tensor-parallel region autograd Function, the matmul, the bias add or view
 *    (3); backward: dgrad, wgrad and the bias-grad sum (3);
 *  - unfused attention (CoreAttention): q/k/v views and transposes, the score buffer from the
 *    global memory buffer, baddbmm, the fused scale-mask-softmax with its reshapes, dropout
 *    inside the CUDA RNG tracker's fork (two get/set RNG-state pairs), bmm, permute,
 *    contiguous and views: about 25; backward about 14 autograd nodes (two per bmm, softmax,
 *    dropout, the view/permute nodes). Flash attention: the call and its reshapes (6, 3);
 *  - layer norm: the module and its Function (2, 2); bias-gelu and bias-dropout-add: the
 *    grad-mode context, expand and the scripted function (3; backward 2);
 *  - a collective: the autograd region Function and the c10d call (2); p2p, copies: 1;
 *  - embedding (word + position + add + dropout: 6, 3); vocab-parallel cross entropy (max,
 *    its all-reduce, subtract, exp, sums, gather of the target logit, masks: 15; backward 5).
 * An op that stands for several eager kernels (extra_kernels: an eager RMSNorm, RoPE, SwiGLU,
 * the fp32 softmax fallback) makes one call more per kernel. */
static double compute_calls(const struct job *j, const struct plan_op *op, bool bwd)
{
	switch (op->u.compute.kernel) {
	case PLAN_K_GEMM: return 3;
	case PLAN_K_ATTN:
		if (!j->strat.flash_attention)
			return bwd ? 14 : 25;
		return bwd ? 3 : 6;
	case PLAN_K_NORM: return 2;
	case PLAN_K_ELEMWISE: return bwd ? 2 : 3;
	case PLAN_K_EMBED: return bwd ? 3 : 6;
	case PLAN_K_LOSS:
		/* + Megatron's loss_func (cast, masked mean, the loss averaged over DP: 14)
		 * and the schedule's loss scaling and backward call (2) */
		if (j->strat.framework == STRAT_MEGATRON)
			return bwd ? 7 : 29;
		return bwd ? 5 : 15;
	default: return 1;
	}
}

static double framework_ops(const struct job *j, const struct plan_op *op)
{
	bool bwd = op->phase == PLAN_PHASE_BWD && !(op->flags & PLAN_F_RECOMPUTE);
	switch (op->kind) {
	case PLAN_COMPUTE:
		return (compute_calls(j, op, bwd) + op->u.compute.extra_kernels) * plan_op_repeat(op);
	case PLAN_COLL:
		return 2;
	case PLAN_P2P:
		return 1;
	case PLAN_COPY:
		if (!(op->flags & PLAN_F_BATCH))
			return 1;
		/* a micro-batch's input: Megatron's get_batch (broadcast_data: the sizes to the GPU,
		 * broadcast, back with .cpu(), the tokens concatenated, copied and broadcast, views:
		 * 13; tokens and labels sliced and made contiguous: 5; attention mask, loss mask and
		 * position ids: 9); elsewhere the .to() of input ids, labels and mask and the dict */
		return j->strat.framework == STRAT_MEGATRON ? 27 : 4;
	case PLAN_ALLOC:
	case PLAN_FREE:
		/* a full-recompute checkpoint: its autograd Function (Megatron's CheckpointFunction,
		 * like torch.utils.checkpoint's) saves the CPU, CUDA and tracker RNG states, enters
		 * no_grad and saves its input (6); in backward it checks, reads its input, saves and
		 * sets the three RNG states, detaches the input, enters enable_grad, restores the
		 * states, calls torch.autograd.backward on the recomputed outputs and collects the
		 * input grads (17). The ops of the recomputed forward are counted as forward ops. */
		if (op->u.mem.cat == PLAN_MEM_CKPT)
			return op->kind == PLAN_ALLOC ? 6 : 17;
		return 0; /* other allocations: the caching allocator, well under a framework op */
	default:
		return 0;
	}
}

int64_t sim_host_ns(const struct job *j, const struct plan_op *op)
{
	if (op->stream == PLAN_STREAM_HOST || j->strat.host_op_us <= 0)
		return 0; /* host-stream work is timed as host work itself */
	/* a CUDA graph's members are replayed, not issued; its replay is an autograd Function, the
	 * input's copy into the static buffer and the graph launch (Transformer Engine's
	 * make_graphed_callables; Megatron-Core's CudaGraphManager alike) */
	if (op->graph == PLAN_GRAPH_MEMBER)
		return 0;
	if (op->graph == PLAN_GRAPH_REPLAY)
		return sim_ns_round(SIM_GRAPH_REPLAY_CALLS * j->strat.host_op_us * 1e3);
	/* a Python tensor view or slice (DeepSpeed's per-rank lists) is a trivial CPU op: 4.5 us
	 * without autograd or a launch (docs/simulator.md, "Host dispatch") of the 20 us a
	 * framework op costs, a quarter */
	double ops = framework_ops(j, op) + 0.25 * (double)op->host_views;
	return sim_ns_round(ops * j->strat.host_op_us * 1e3);
}
