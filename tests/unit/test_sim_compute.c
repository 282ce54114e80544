/* sim/compute.c: the shaped GEMM model (asymptotic efficiency x wave quantisation x K ramp,
 * docs/simulator.md "GEMM time") against values worked by hand, and host dispatch counts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../sim/sim_int.h"
#include "test.h"

/* An A100-like GPU: cc 8.0, 108 SMs (256x128x32 tiles), 312 TFLOP/s fp16, GEMM table top 0.869
 * (MAMF 271.2/312). Lower table steps must not matter for shaped GEMMs. */
static void a100(struct cluster *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->gpu.name, sizeof(c->gpu.name), "A100");
	c->gpu.arch_sm = 80;
	c->gpu.sms = 108;
	c->gpu.peak_tflops[TW_FP16] = 312;
	c->gpu.peak_tflops[TW_BF16] = 312;
	c->gpu.hbm_GBps = 2039;
	c->eff.gemm.n = 2;
	c->eff.gemm.min[0] = 0, c->eff.gemm.eff[0] = 0.1;
	c->eff.gemm.min[1] = 1e11, c->eff.gemm.eff[1] = 0.869;
	c->eff.mem.n = 1, c->eff.mem.eff[0] = 1.0;
}

static void test_gemm_eff_by_hand(struct test_ctx *T)
{
	struct cluster c;
	a100(&c);
	/* GPT-3 qkv with TP 8: 2048 x 4608 output, k 12288. Tiles 8 x 36 = 288 (either
	 * orientation), 3 waves of 108: q = 288/324 = 8/9; K: 384 steps, ramp 384/392 against the
	 * reference 256/264 (k = 8192): 0.869 x 8/9 x 1.010204 = 0.780327 */
	CHECK_NEAR(T, sim_gemm_eff(&c, 2048, 4608, 12288), 0.7803265, 1e-6);
	/* h = 1024, TP 8 qkv: 2048 x 384, k 1024: 24 tiles, one wave of 108: q = 24/108; 32 K
	 * steps: 0.8 / 0.969697 = 0.825; 0.869 x 0.2222 x 0.825 = 0.159317 */
	CHECK_NEAR(T, sim_gemm_eff(&c, 2048, 384, 1024), 0.1593167, 1e-6);
	/* edge tiles do full-tile work: 300 x 128 is 1.171875 tiles of useful work in one wave */
	CHECK_NEAR(T, sim_gemm_eff(&c, 300, 128, 8192), 0.869 * (300.0 * 128 / 32768) / 108, 1e-9);
	/* orientation: 128 x 27648 is 216 tiles of 256x128 (2 waves, q 0.5) but 108 tiles of
	 * 128x256 (one full wave): cuBLAS takes the latter, q = 1 */
	CHECK_NEAR(T, sim_gemm_eff(&c, 128, 27648, 8192), 0.869, 1e-9);
	/* a full wave with a deeper K than the reference is capped at the measured maximum */
	CHECK_NEAR(T, sim_gemm_eff(&c, 27648, 128, 65536), 0.869, 1e-9);
	/* one more tile than a full wave nearly halves the efficiency (2 waves, 109/216) */
	CHECK_NEAR(T, sim_gemm_eff(&c, 27648 + 256, 128, 8192), 0.869 * 109.0 / 216.0, 1e-9);

	/* Hopper: 132 SMs, 128x256x64 tiles. 4096 x 6144, k 2048: 768 tiles in 6 waves
	 * (q = 768/792), 32 K steps: 0.8 / (128/136) = 0.85; 0.803 x 0.969697 x 0.85 = 0.661867 */
	c.gpu.arch_sm = 90, c.gpu.sms = 132, c.eff.gemm.eff[1] = 0.803;
	CHECK_NEAR(T, sim_gemm_eff(&c, 4096, 6144, 2048), 0.6618667, 1e-6);

	/* a grouped call of 9 of the 24-tile GEMMs above (Ampere): 216 tiles, two full waves of
	 * 108 instead of 9 waves a quarter full: q 1 against 24/108, 4.5 times the efficiency */
	a100(&c);
	CHECK_NEAR(T, sim_gemm_eff_grouped(&c, 2048, 384, 1024, 9),
		   4.5 * sim_gemm_eff(&c, 2048, 384, 1024), 1e-9);
	CHECK_NEAR(T, sim_gemm_eff_grouped(&c, 2048, 384, 1024, 1), sim_gemm_eff(&c, 2048, 384, 1024),
		   0);
}

/* a forward fp16 GEMM op of batch x (2048 x 1024)(1024 x 384) */
static void gemm_op(struct plan_op *op, int64_t batch)
{
	memset(op, 0, sizeof(*op));
	op->kind = PLAN_COMPUTE;
	op->stream = PLAN_STREAM_COMPUTE;
	op->u.compute.kernel = PLAN_K_GEMM;
	op->u.compute.dtype = TW_FP16;
	op->u.compute.m = 2048, op->u.compute.n = 384, op->u.compute.k = 1024;
	op->u.compute.batch = batch;
	op->u.compute.flops = (double)batch * 2.0 * 2048 * 384 * 1024;
}

/* host work of `bytes` (the CPU optimizer's passes over its states) */
static void host_op(struct plan_op *op, double bytes)
{
	memset(op, 0, sizeof(*op));
	op->kind = PLAN_COMPUTE;
	op->stream = PLAN_STREAM_HOST;
	op->u.compute.bytes = bytes;
}

/* a GEMM op's shapes: forward as given; backward the data grads and, batch even, as many weight
 * grads; one kind as its grads say; a recompute runs the forward shape */
static void test_gemm_parts(struct test_ctx *T)
{
	struct plan_op op;
	struct plan_gemm_part pt[2];
	gemm_op(&op, 4);
	CHECK(T, plan_gemm_parts(&op, pt) == 1 && pt[0].m == 2048 && pt[0].n == 384 &&
		     pt[0].k == 1024 && pt[0].batch == 4);
	op.phase = PLAN_PHASE_BWD;
	CHECK(T, plan_gemm_parts(&op, pt) == 2 && pt[0].m == 2048 && pt[0].n == 1024 &&
		     pt[0].k == 384 && pt[0].batch == 2 && pt[1].m == 1024 && pt[1].n == 384 &&
		     pt[1].k == 2048 && pt[1].batch == 2);
	op.u.compute.grads = PLAN_GRADS_WEIGHT;
	CHECK(T, plan_gemm_parts(&op, pt) == 1 && pt[0].m == 1024 && pt[0].k == 2048 &&
		     pt[0].batch == 4);
	op.u.compute.grads = PLAN_GRADS_DATA;
	CHECK(T, plan_gemm_parts(&op, pt) == 1 && pt[0].n == 1024 && pt[0].k == 384 &&
		     pt[0].batch == 4);
	op.u.compute.grads = PLAN_GRADS_BOTH;
	op.u.compute.batch = 3; /* odd: data grads only (LoRA's frozen weights) */
	CHECK(T, plan_gemm_parts(&op, pt) == 1 && pt[0].n == 1024 && pt[0].batch == 3);
	op.flags = PLAN_F_RECOMPUTE;
	CHECK(T, plan_gemm_parts(&op, pt) == 1 && pt[0].n == 384 && pt[0].k == 1024);
}

static void test_gemm_time_fwd_bwd(struct test_ctx *T)
{
	struct job *j = calloc(1, sizeof(*j));
	a100(&j->cluster);
	struct plan_op op;
	gemm_op(&op, 1);
	/* forward: FLOPs / (peak x 0.159317), no bytes, no launch: 1.61e9 / 49.71e12 = 32.40 us */
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 2.0 * 2048 * 384 * 1024 / (312e12 * 0.1593167) * 1e9, 1e-4); /* ns, rounded up */
	/* backward (batch 2): dgrad 2048 x 1024 output, depth 384: 64 tiles (q 64/108), 12 K steps
	 * (0.6/0.969697): eff 0.318633; wgrad 1024 x 384 output, depth 2048: 12 tiles (q 12/108),
	 * 64 K steps (0.888889/0.969697): eff 0.088509. 1.61e9 FLOPs each: 5.04 + 18.94 ... =
	 * 5.16217 us x (1/0.318633 + 1/0.088509) = 74.525 us */
	op.phase = PLAN_PHASE_BWD;
	op.u.compute.batch = 2;
	op.u.compute.flops = 2.0 * 2.0 * 2048 * 384 * 1024;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 74525.2, 1e-4);
	/* the same FLOPs as data grads only, or weight grads only (Megatron's delayed wgrad):
	 * 2 x 5.16217 us / 0.318633 = 32.402 us; / 0.088509 = 116.648 us */
	op.u.compute.grads = PLAN_GRADS_DATA;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 32402.1, 1e-4);
	op.u.compute.grads = PLAN_GRADS_WEIGHT;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 116648.6, 1e-4);
	/* two experts' GEMMs grouped (batch 4, group 2): the two dgrads' 128 tiles in 2 waves (q
	 * 128/216 for 64/108), the two wgrads' 24 tiles in one (q twice 12/108) */
	op.u.compute.grads = PLAN_GRADS_BOTH;
	op.u.compute.group = 2;
	op.u.compute.batch = 4;
	op.u.compute.flops *= 2;
	double dg = 0.318633 * (128.0 / 216) / (64.0 / 108), wg = 0.088509 * 2;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 2 * 5162.17 * (1 / dg + 1 / wg), 1e-4);
	op.u.compute.group = 0;
	/* the recompute forward in the backward phase runs the forward shape */
	op.flags = PLAN_F_RECOMPUTE;
	op.u.compute.batch = 1;
	op.u.compute.flops = 2.0 * 2048 * 384 * 1024;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 2.0 * 2048 * 384 * 1024 / (312e12 * 0.1593167) * 1e9, 1e-4); /* ns, rounded up */
	/* memory roofline still applies: 1 GB of bytes at 2039 GB/s dominates */
	op.u.compute.bytes = 1e9;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 1e9 / 2039e9 * 1e9, 1e-4); /* ns, rounded up */
	/* an unshaped GEMM (no m/n/k) keeps the cluster's step table: 1e12 FLOPs at 0.869 */
	op.u.compute.bytes = 0;
	op.u.compute.m = 0;
	op.u.compute.flops = 1e12;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 1e12 / (312e12 * 0.869) * 1e9, 1e-4); /* ns, rounded up */
	/* a CPU rank (arch_sm 0) has no tensor-core tiles: a shaped GEMM keeps the table too */
	op.u.compute.m = 2048;
	j->cluster.gpu.arch_sm = 0;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 1e12 / (312e12 * 0.869) * 1e9, 1e-4);
	j->cluster.gpu.arch_sm = 80;
	CHECK(T, (double)sim_compute_ns(j, &op) > 1e12 / (312e12 * 0.5) * 1e9);
	free(j);
}

/* A loop over local experts (repeat): the same FLOPs through the same per-expert GEMMs, one
 * launch and one linear's host calls (3) per expert */
static void test_repeat(struct test_ctx *T)
{
	struct job *j = calloc(1, sizeof(*j));
	a100(&j->cluster);
	j->cluster.gpu.launch_us = 4;
	j->strat.host_op_us = 20;
	struct plan_op op;
	gemm_op(&op, 8);
	int64_t t1 = sim_compute_ns(j, &op), h1 = sim_host_ns(j, &op);
	op.u.compute.repeat = 8;
	CHECK_NEAR(T, (double)(sim_compute_ns(j, &op) - t1), 7 * 4000.0, 1.0 / 28000);
	CHECK_EQ_INT(T, (int)h1, 3 * 20000);
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 8 * 3 * 20000);
	/* in a CUDA graph the host issues none of it; the graph's replay is 3 calls */
	op.graph = PLAN_GRAPH_MEMBER;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 0);
	CHECK_NEAR(T, (double)(sim_compute_ns(j, &op) - t1), 7 * 4000.0, 1.0 / 28000);
	op.graph = PLAN_GRAPH_REPLAY;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 3 * 20000);
	free(j);
}

/* A job's GPU compute runs at the pace of its slowest GPU (cluster_job_pace): every GPU op's
 * time, launch overhead included, times j->pace; the host's work is not slowed; a job built
 * by hand (pace 0) runs at 1. */
static void test_job_pace(struct test_ctx *T)
{
	struct job *j = calloc(1, sizeof(*j));
	a100(&j->cluster);
	j->cluster.gpu.launch_us = 4;
	j->cluster.node.cpu_mem_GBps = 100;
	j->cluster.node.cpu_tflops = 1;
	j->gpus = 8;
	struct plan_op op, host;
	gemm_op(&op, 8);
	host_op(&host, 1e9);
	int64_t t0 = sim_compute_ns(j, &op), h0 = sim_compute_ns(j, &host);
	j->pace = 1.0;
	CHECK_EQ_INT(T, (int)sim_compute_ns(j, &op), (int)t0);
	j->pace = 1.05;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), 1.05 * (double)t0, 1.0);
	CHECK_EQ_INT(T, (int)sim_compute_ns(j, &host), (int)h0);
	/* as the job gets it from the cluster: 8% spread, 8 GPUs */
	j->cluster.gpu.speed_variation = 0.08;
	j->pace = cluster_job_pace(&j->cluster, j->gpus);
	CHECK_NEAR(T, j->pace, 1.0 + 0.08 / (2 * 2.698) * 1.4236003, 1e-7);
	CHECK(T, sim_compute_ns(j, &op) > t0);
	free(j);
}

/* Host dispatch of a full-recompute checkpoint (docs/simulator.md, "Host dispatch"): its
 * autograd Function's RNG-state and autograd bookkeeping is 6 framework calls in forward (on
 * the checkpoint's allocation) and 17 in backward (on its release); other allocations cost
 * no framework call. */
static void test_host_checkpoint(struct test_ctx *T)
{
	struct job *j = calloc(1, sizeof(*j));
	a100(&j->cluster);
	j->strat.host_op_us = 20;
	struct plan_op op;
	memset(&op, 0, sizeof(op));
	op.kind = PLAN_ALLOC;
	op.stream = PLAN_STREAM_COMPUTE;
	op.u.mem.cat = PLAN_MEM_CKPT;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 6 * 20000);
	op.kind = PLAN_FREE;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 17 * 20000);
	op.u.mem.cat = PLAN_MEM_ACTIV;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 0);
	op.kind = PLAN_ALLOC;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 0);
	/* a collective is 2 framework calls; each Python view made before it a quarter */
	op.kind = PLAN_COLL;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 2 * 20000);
	op.host_views = 4096;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), (2 + 1024) * 20000);
	op.host_views = 0;
	op.kind = PLAN_ALLOC;
	/* host_op_us 0 switches the host model off */
	op.u.mem.cat = PLAN_MEM_CKPT;
	j->strat.host_op_us = 0;
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 0);
	free(j);
}

/* The CPU optimizer's host work: the node's DRAM bandwidth and CPU shared by the job's ranks
 * on it, all of it for a job on one GPU of an 8-GPU node; NVMe likewise */
static void test_host_share(struct test_ctx *T)
{
	struct job *j = calloc(1, sizeof(*j));
	a100(&j->cluster);
	j->cluster.node.gpus = 8;
	j->cluster.node.cpu_mem_GBps = 200;
	j->cluster.node.cpu_tflops = 4;
	j->cluster.node.nvme_GBps = 16;
	struct plan_op op;
	host_op(&op, 100e9);
	j->gpus = 16; /* two nodes: 8 ranks share each host */
	CHECK_EQ_INT(T, (int)(sim_compute_ns(j, &op) / 1000000), 4000);
	j->gpus = 1;
	CHECK_EQ_INT(T, (int)(sim_compute_ns(j, &op) / 1000000), 500);
	CHECK_EQ_INT(T, (int)job_node_ranks(j), 1);
	j->gpus = 4;
	CHECK_EQ_INT(T, (int)job_node_ranks(j), 4);
	struct plan_op cp;
	memset(&cp, 0, sizeof(cp));
	cp.kind = PLAN_COPY;
	cp.u.copy.dir = PLAN_NVME_READ;
	cp.u.copy.bytes = 4000000000LL;
	double bw;
	sim_copy_ns(j, &cp, &bw);
	CHECK_NEAR(T, bw, 4.0, 1e-12);
	free(j);
}

/* A forward attention op on the compute stream (the tests fill in its shape or FLOPs). */
static void attn_op(struct plan_op *op)
{
	memset(op, 0, sizeof(*op));
	op->kind = PLAN_COMPUTE;
	op->stream = PLAN_STREAM_COMPUTE;
	op->phase = PLAN_PHASE_FWD;
	op->u.compute.kernel = PLAN_K_ATTN;
}

/* Unfused attention: 6.5 passes of 2 bytes over the s x s scores in forward (13 backward), 4
 * (8) without attention dropout;
 * Megatron's fp32 softmax fallback adds 33 bytes per score (35 backward), four kernels and
 * four framework calls each way. Memory-bound here: no FLOPs, HBM at full efficiency. */
static void test_attention_torch_softmax(struct test_ctx *T)
{
	struct job *j = calloc(1, sizeof(*j));
	a100(&j->cluster);
	j->cluster.gpu.launch_us = 5;
	j->strat.host_op_us = 20;
	j->strat.attention_dropout = 0.1;
	struct plan_op op;
	attn_op(&op);
	op.u.compute.b = 1, op.u.compute.heads = 2, op.u.compute.s_q = op.u.compute.s_kv = 1024;
	double sxs = 2.0 * 1024 * 1024, hbm = 2039e9;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 13 / hbm + 5e-6) * 1e9), 1e-4);
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 25 * 20000);
	CHECK_NEAR(T, plan_torch_softmax_bytes(&op), 0, 1e-12);
	op.u.compute.torch_softmax = 1, op.u.compute.extra_kernels = 4; /* as the plan marks it */
	CHECK_NEAR(T, plan_torch_softmax_bytes(&op), sxs * 33, 1e-12); /* what the executors stream */
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 46 / hbm + 25e-6) * 1e9), 1e-4);
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 29 * 20000);
	op.phase = PLAN_PHASE_BWD;
	CHECK_NEAR(T, plan_torch_softmax_bytes(&op), sxs * 35, 1e-12);
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 61 / hbm + 25e-6) * 1e9), 1e-4);
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 18 * 20000);
	op.u.compute.torch_softmax = 0, op.u.compute.extra_kernels = 0;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 26 / hbm + 5e-6) * 1e9), 1e-4);
	/* HF's eager attention: 26 bytes per score backward as the fused path, 2 more kernels;
	 * forward 24 bytes (11 more) and 3 more kernels */
	op.u.compute.torch_softmax = PLAN_SOFTMAX_HF_EAGER, op.u.compute.extra_kernels = 2;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 26 / hbm + 15e-6) * 1e9), 1e-4);
	op.phase = PLAN_PHASE_FWD, op.u.compute.extra_kernels = 3;
	CHECK_NEAR(T, plan_torch_softmax_bytes(&op), sxs * 11, 1e-12);
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 24 / hbm + 20e-6) * 1e9), 1e-4);
	CHECK_EQ_INT(T, (int)sim_host_ns(j, &op), 28 * 20000);
	/* no attention dropout: no dropout pass (2.5 passes of 2 bytes less each way) */
	j->strat.attention_dropout = 0;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 19 / hbm + 20e-6) * 1e9), 1e-4);
	op.u.compute.torch_softmax = 0, op.u.compute.extra_kernels = 0;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 8 / hbm + 5e-6) * 1e9), 1e-4);
	op.phase = PLAN_PHASE_BWD;
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil((sxs * 16 / hbm + 5e-6) * 1e9), 1e-4);
	free(j);
}

/* A named flash attention kernel (strategy attention_kernel) takes its own table from the
 * cluster's eff.attn_kernels; without one, or without flash attention, eff.attn. */
static void test_attention_kernel_table(struct test_ctx *T)
{
	struct job *j = calloc(1, sizeof(*j));
	a100(&j->cluster);
	j->cluster.eff.attn.n = 1, j->cluster.eff.attn.eff[0] = 0.6;
	j->cluster.eff.n_attn_kernels = 1;
	snprintf(j->cluster.eff.attn_kernels[0].name, CLUSTER_KERNEL_NAME, "slow");
	j->cluster.eff.attn_kernels[0].t.n = 1, j->cluster.eff.attn_kernels[0].t.eff[0] = 0.3;
	j->strat.flash_attention = true;
	struct plan_op op;
	attn_op(&op);
	op.u.compute.flops = 312e12 * 1e-3; /* 1 ms of the A100's peak */
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil(1e-3 / 0.6 * 1e9), 1e-6);
	snprintf(j->strat.attention_kernel, sizeof(j->strat.attention_kernel), "slow");
	CHECK_NEAR(T, (double)sim_compute_ns(j, &op), ceil(1e-3 / 0.3 * 1e9), 1e-6);
	char have[32];
	CHECK(T, cluster_attn_kernel(&j->cluster, "fast", have, sizeof(have)) == NULL);
	CHECK_STR_CONTAINS(T, have, "slow");
	free(j);
}

int main(void)
{
	struct test_ctx T = { 0 };
	TEST_RUN(&T, test_gemm_eff_by_hand);
	TEST_RUN(&T, test_gemm_parts);
	TEST_RUN(&T, test_gemm_time_fwd_bwd);
	TEST_RUN(&T, test_repeat);
	TEST_RUN(&T, test_job_pace);
	TEST_RUN(&T, test_host_checkpoint);
	TEST_RUN(&T, test_host_share);
	TEST_RUN(&T, test_attention_torch_softmax);
	TEST_RUN(&T, test_attention_kernel_table);
	return test_done(&T);
}
