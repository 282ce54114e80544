/* Analysis on synthetic traces whose answers are worked out by hand (docs/profiler.md). */
#include <stdlib.h>
#include <string.h>

#include "../../profile/profile.h"
#include "test.h"

#define US 1000LL /* ns */

static struct trace_event *ev(struct trace *t, int rank, int stream, enum trace_cat c,
			      int64_t a_us, int64_t b_us, const char *name)
{
	struct trace_event e = {.rank = rank, .device = 0, .stream = stream, .cat = c, .step = -1,
				.op_id = -1, .layer = -1, .micro = -1, .stage = -1, .phase = -1,
				.start_ns = a_us * US, .end_ns = b_us * US};
	e.name = trace_intern(t, name);
	return trace_add(t, &e);
}

/* One rank, one step [0, 110) us. Hand-worked:
 *   compute C = gemm [10,40) [50,80) ∪ attention [30,45) = [10,45) [50,80) = 65
 *   comm M = all_gather [0,20) ∪ all_reduce [70,95) = 45; exposed = M \ C = [0,10) [80,95) = 25
 *   copies P = h2d [85,100) = 15, all exposed
 *   idle I = W \ C = [0,10) [45,50) [80,110) = 45:
 *     on comm I ∩ M = 25; on copies (I \ M) ∩ P = [95,100) = 5; host = 15
 *   bubble = 0: the rank has no pipeline neighbour (no p2p), so [45,50) is a host-side gap
 *   busy = C ∪ M ∪ P = [0,45) [50,100) = 95
 *   all_gather 1 MB per rank over 4 ranks in 20 us: algbw = 4 MB / 20 us = 200 GB/s,
 *     busbw = 200 x 3/4 = 150; all_reduce 2 MB over 4 in 25 us: 80 GB/s, busbw 80 x 1.5 = 120 */
static void test_overlap_stall(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 1);
	ev(&t, 0, 0, TRACE_MARKER, 0, 110, "step 0");
	ev(&t, 0, 0, TRACE_GEMM, 10, 40, "gemm");
	ev(&t, 0, 0, TRACE_GEMM, 50, 80, "gemm");
	ev(&t, 0, 3, TRACE_ATTN, 30, 45, "flash");
	struct trace_event *ag = ev(&t, 0, 1, TRACE_ALL_GATHER, 0, 20, "ag");
	ag->bytes = 1000000;
	ag->group_size = 4;
	struct trace_event *ar = ev(&t, 0, 1, TRACE_ALL_REDUCE, 70, 95, "ar");
	ar->bytes = 2000000;
	ar->group_size = 4;
	ev(&t, 0, 4, TRACE_H2D, 85, 100, "copy");
	struct prof_analysis a;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.nranks, 1);
	CHECK_EQ_INT(T, a.nsteps, 1);
	CHECK_EQ_INT(T, a.step_ns, 110 * US);
	CHECK_EQ_INT(T, a.compute_ns, 65 * US);
	CHECK_EQ_INT(T, a.cat_ns[TRACE_GEMM], 60 * US);
	CHECK_EQ_INT(T, a.cat_ns[TRACE_ATTN], 15 * US);
	CHECK_EQ_INT(T, a.comm_ns, 45 * US);
	CHECK_EQ_INT(T, a.exposed_comm_ns, 25 * US);
	CHECK_EQ_INT(T, a.overlapped_comm_ns, 20 * US);
	CHECK_EQ_INT(T, a.copy_ns, 15 * US);
	CHECK_EQ_INT(T, a.exposed_copy_ns, 15 * US);
	CHECK_EQ_INT(T, a.idle_ns, 45 * US);
	CHECK_EQ_INT(T, a.stall_comm_ns, 25 * US);
	CHECK_EQ_INT(T, a.stall_copy_ns, 5 * US);
	CHECK_EQ_INT(T, a.stall_host_ns, 15 * US);
	CHECK_EQ_INT(T, a.bubble_ns, 0);
	CHECK_EQ_INT(T, a.busy_ns, 95 * US);
	CHECK_EQ_INT(T, a.coll[TRACE_ALL_GATHER].count, 1);
	CHECK_EQ_INT(T, a.coll[TRACE_ALL_GATHER].exposed_ns, 10 * US);
	CHECK_EQ_INT(T, a.coll[TRACE_ALL_REDUCE].exposed_ns, 15 * US);
	CHECK_NEAR(T, a.coll[TRACE_ALL_GATHER].algbw_GBps, 200.0, 1e-12);
	CHECK_NEAR(T, a.coll[TRACE_ALL_GATHER].busbw_GBps, 150.0, 1e-12);
	CHECK_NEAR(T, a.coll[TRACE_ALL_REDUCE].algbw_GBps, 80.0, 1e-12);
	CHECK_NEAR(T, a.coll[TRACE_ALL_REDUCE].busbw_GBps, 120.0, 1e-12);
	CHECK_EQ_INT(T, a.straggler_rank, -1);
	trace_release(&t);
}

/* No communication; kernels on two streams overlap; steps from the events' step field.
 *   step 0: gemm [0,50) s0, gemm [20,70) s1, other [80,100) -> window [0,100), compute 90,
 *           idle [70,80) = 10 (host)
 *   step 1: gemm [200,260) -> window 60, compute 60, idle 0
 *   means: step 80, compute 75, idle 5; FLOPs: 3 + 1 = 4 GF per 2 steps = 2 GF hw, the
 *   recomputed 1 GF not model FLOPs -> 1.5 GF model */
static void test_no_comm_streams(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_EXEC, 1);
	struct trace_event *e;
	e = ev(&t, 0, 0, TRACE_GEMM, 0, 50, "gemm");
	e->step = 0, e->flops = 1e9;
	e = ev(&t, 0, 1, TRACE_GEMM, 20, 70, "gemm");
	e->step = 0, e->flops = 1e9, e->flags = TRACE_F_RECOMPUTE;
	e = ev(&t, 0, 0, TRACE_COMPUTE_OTHER, 80, 100, "elementwise");
	e->step = 0, e->flops = 1e9;
	e = ev(&t, 0, 0, TRACE_GEMM, 200, 260, "gemm");
	e->step = 1, e->flops = 1e9;
	struct prof_step *rows;
	size_t n;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze_steps(&t, &rows, &n, &err), TW_OK);
	CHECK_EQ_INT(T, n, 2);
	if (n == 2) {
		CHECK_EQ_INT(T, rows[0].step, 0);
		CHECK_EQ_INT(T, rows[0].a.compute_ns, 90 * US);
		CHECK_EQ_INT(T, rows[0].a.idle_ns, 10 * US);
		CHECK_EQ_INT(T, rows[0].a.stall_host_ns, 10 * US);
		CHECK_EQ_INT(T, rows[1].step, 1);
		CHECK_EQ_INT(T, rows[1].a.step_ns, 60 * US);
		CHECK_EQ_INT(T, rows[1].a.idle_ns, 0);
	}
	free(rows);
	struct prof_analysis a;
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.nsteps, 2);
	CHECK_EQ_INT(T, a.step_ns, 80 * US);
	CHECK_EQ_INT(T, a.compute_ns, 75 * US);
	CHECK_EQ_INT(T, a.cat_ns[TRACE_GEMM], 65 * US);
	CHECK_EQ_INT(T, a.comm_ns, 0);
	CHECK_EQ_INT(T, a.exposed_comm_ns, 0);
	CHECK_EQ_INT(T, a.idle_ns, 5 * US);
	CHECK_EQ_INT(T, a.stall_comm_ns, 0);
	CHECK_NEAR(T, a.hw_flops, 2e9, 1e-12);
	CHECK_NEAR(T, a.model_flops, 1.5e9, 1e-12);
	trace_release(&t);
}

/* Three ranks; rank 2's clock is 1 s ahead. Two all-reduces per step; durations
 *   #0: r0 30, r1 25, r2 30 us -> lateness 0, 5, 0
 *   #1: r0 20, r1 12, r2 18 us -> lateness 0, 8, 2
 * rank 1 arrives last: mean lateness (5 + 8) / 2 = 6.5 us. The offset changes nothing. */
static void test_straggler_clock_offset(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 3);
	const int64_t d0[3] = {30, 25, 30}, d1[3] = {20, 12, 18};
	for (int r = 0; r < 3; r++) {
		int64_t off = r == 2 ? 1000000 : 0; /* us */
		ev(&t, r, 0, TRACE_MARKER, off, off + 100, "ProfilerStep#7");
		ev(&t, r, 0, TRACE_GEMM, off, off + 40, "gemm");
		ev(&t, r, 1, TRACE_ALL_REDUCE, off + 50 - d0[r], off + 50, "ar");
		ev(&t, r, 1, TRACE_ALL_REDUCE, off + 90 - d1[r], off + 90, "ar");
	}
	struct prof_analysis a;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.nranks, 3);
	CHECK_EQ_INT(T, a.step_ns, 100 * US);
	CHECK_EQ_INT(T, a.straggler_rank, 1);
	CHECK_EQ_INT(T, a.straggler_ns, 6500);
	CHECK_EQ_INT(T, a.straggler_colls, 2);
	/* exposed all-reduce = the part after the gemm [0,40): r0 10 + 20, r1 10 + 12,
	 * r2 10 + 18 -> 80 us / 3 ranks = 26.667 us */
	CHECK_EQ_INT(T, a.exposed_comm_ns, 26667);
	CHECK_EQ_INT(T, a.coll[TRACE_ALL_REDUCE].count, 2);
	trace_release(&t);
}

/* Two TP groups: {0,1} on communicator 1 (rank 1 arrives 10 us late: 30 vs 20 us) and
 * {2,3} on communicator 2 (both 50 us). Matched per communicator, rank 1 is 10 us late; pooled
 * across groups (comm unknown) the 50 us kernels of the other group would make it 30. */
static void test_straggler_per_communicator(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 4);
	const int64_t dur[4] = {30, 20, 50, 50};
	for (int r = 0; r < 4; r++) {
		struct trace_event *e = ev(&t, r, 1, TRACE_ALL_REDUCE, 100 - dur[r], 100, "ar");
		e->comm = r < 2 ? 1 : 2;
		e->step = 0;
	}
	struct prof_analysis a;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.straggler_rank, 1);
	CHECK_EQ_INT(T, a.straggler_ns, 10000);
	CHECK_EQ_INT(T, a.straggler_colls, 2);
	for (int r = 0; r < 4; r++)
		t.ev[r].comm = 0;
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.straggler_ns, 30000); /* what pooling would claim */
	trace_release(&t);
}

/* Untagged events are clipped to the marker windows of their rank. */
static void test_marker_clipping(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 1);
	ev(&t, 0, 0, TRACE_MARKER, 0, 100, "ProfilerStep#1");
	ev(&t, 0, 0, TRACE_MARKER, 100, 150, "ProfilerStep#2");
	ev(&t, 0, 0, TRACE_MARKER, 20, 30, "nccl:all_reduce"); /* not a step marker */
	ev(&t, 0, 0, TRACE_GEMM, 80, 120, "gemm");              /* 20 in each step */
	struct prof_step *rows;
	size_t n;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze_steps(&t, &rows, &n, &err), TW_OK);
	CHECK_EQ_INT(T, n, 2);
	if (n == 2) {
		CHECK_EQ_INT(T, rows[0].step, 1);
		CHECK_EQ_INT(T, rows[0].a.compute_ns, 20 * US);
		CHECK_EQ_INT(T, rows[0].a.idle_ns, 80 * US);
		CHECK_EQ_INT(T, rows[1].step, 2);
		CHECK_EQ_INT(T, rows[1].a.step_ns, 50 * US);
		CHECK_EQ_INT(T, rows[1].a.compute_ns, 20 * US);
	}
	free(rows);
	trace_release(&t);
}

static void test_step_marker_names(struct test_ctx *T)
{
	int64_t s = -1;
	CHECK(T, prof_step_marker("step 3", &s) && s == 3);
	CHECK(T, prof_step_marker("ProfilerStep#12", &s) && s == 12);
	CHECK(T, !prof_step_marker("step x", &s));
	CHECK(T, !prof_step_marker("stepper", &s));
	CHECK(T, !prof_step_marker("ProfilerStep#3a", &s));
	CHECK(T, !prof_step_marker("step -1", &s));
}

static void test_classify(struct test_ctx *T)
{
	static const struct {
		const char *name;
		enum trace_cat cat;
	} cases[] = {
		{"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", TRACE_ALL_GATHER},
		{"_Z42ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE",
		 TRACE_REDUCE_SCATTER},
		{"ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
		 TRACE_ALL_REDUCE},
		{"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", TRACE_P2P},
		{"ncclDevKernel_Broadcast_RING_LL(x)", TRACE_BROADCAST},
		{"ncclDevKernel_AllGatherV_RING_LL(x)", TRACE_ALL_GATHER},
		{"ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", TRACE_ALL_REDUCE},
		{"ncclKernel_ReduceScatter_RING_LL_Sum_half(x)", TRACE_REDUCE_SCATTER},
		{"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)", TRACE_P2P},
		{"ncclSymkDevKernel_AllGather_LLMC(x)", TRACE_ALL_GATHER},
		{"ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_bf16(x)", TRACE_ALL_REDUCE},
		{"ncclSymkDevKernel_ReduceScatter_LD_sum_f32(x)", TRACE_REDUCE_SCATTER},
		{"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", TRACE_GEMM},
		{"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", TRACE_GEMM},
		{"void flash_fwd_kernel<Flash_fwd_kernel_traits<128>>(Flash_fwd_params)", TRACE_ATTN},
		{"Memcpy HtoD (Pinned -> Device)", TRACE_H2D},
		{"Memcpy DtoH (Device -> Pinned)", TRACE_D2H},
		{"void at::native::vectorized_elementwise_kernel<4>(int)", TRACE_COMPUTE_OTHER},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum trace_cat c = prof_classify_kernel(cases[i].name);
		if (c != cases[i].cat)
			printf("#   %s -> %s, expected %s\n", cases[i].name, trace_cat_name(c),
			       trace_cat_name(cases[i].cat));
		CHECK_EQ_INT(T, c, cases[i].cat);
	}
	enum trace_cat c;
	CHECK(T, !prof_classify_nccl("ampere_sgemm_128x64_nn", &c));
}

/* nccl-tests factors: all-reduce 2(n-1)/n, all-gather / reduce-scatter (n-1)/n, bcast 1. */
static void test_busbw_factors(struct test_ctx *T)
{
	CHECK_NEAR(T, prof_busbw_factor(TRACE_ALL_REDUCE, 8), 1.75, 1e-15);
	CHECK_NEAR(T, prof_busbw_factor(TRACE_ALL_GATHER, 8), 0.875, 1e-15);
	CHECK_NEAR(T, prof_busbw_factor(TRACE_REDUCE_SCATTER, 2), 0.5, 1e-15);
	CHECK_NEAR(T, prof_busbw_factor(TRACE_BROADCAST, 8), 1.0, 1e-15);
	CHECK_NEAR(T, prof_alg_bytes(TRACE_ALL_GATHER, 100, 8), 800.0, 1e-15);
	CHECK_NEAR(T, prof_alg_bytes(TRACE_ALL_REDUCE, 100, 8), 100.0, 1e-15);
	CHECK(T, prof_alg_bytes(TRACE_ALL_GATHER, 100, 0) < 0);
}

/* Peak memory from per-category samples: params 100, +activations 50 (150), activations 0
 * (100), grads 70 (170) -> 170; rank 1 reports a total sample of 160. */
static void test_peak_memory(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 2);
	ev(&t, 0, 0, TRACE_GEMM, 0, 10, "gemm");
	const struct trace_mem_sample s[] = {
		{0, PLAN_DEV_GPU, PLAN_MEM_PARAMS, 0, 100}, {0, PLAN_DEV_GPU, PLAN_MEM_ACTIV, 1, 50},
		{0, PLAN_DEV_GPU, PLAN_MEM_ACTIV, 2, 0},    {0, PLAN_DEV_GPU, PLAN_MEM_GRADS, 3, 70},
		{0, PLAN_DEV_HOST, PLAN_MEM_OPTIM, 3, 1000}, {1, PLAN_DEV_GPU, -1, 5, 160},
	};
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		trace_add_mem(&t, &s[i]);
	struct prof_analysis a;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.peak_mem_bytes, 170);
	trace_release(&t);
}

/* Ranks added interleaved and out of time order, 40 events each (more than one sorted run):
 * per rank the union of [10k, 10k+5) and [10k+3, 10k+8) us is 8 us a k, 320 us in all; and
 * memory samples out of time order, whose peak needs them in time order (cat 0 at 1 us: 100,
 * at 2 us: 0; cat 1 at 3 us: 100 -> peak 100; taken as added it would be 200). With ranks
 * far apart (stride) the events are ordered by merging alone, otherwise by rank first. */
static void check_interleaved(struct test_ctx *T, int32_t stride)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 3);
	for (int r = 0; r < 3; r++)
		ev(&t, r * stride, 0, TRACE_MARKER, 0, 400, "step 0");
	uint32_t x = 7;
	for (int n = 0; n < 240; n++) {
		/* a permutation of (rank, k, half) by a stride coprime to 240 */
		int m = (n * 77) % 240, r = m % 3, k = (m / 3) % 40, half = m / 120;
		x = x * 1103515245u + 12345u;
		ev(&t, r * stride, (int)(x >> 30), TRACE_GEMM, 10 * k + 3 * half, 10 * k + 5 + 3 * half, "gemm");
	}
	for (int r = 2; r >= 0; r--) {
		const struct trace_mem_sample s[] = {
			{r * stride, PLAN_DEV_GPU, 1, 3, 100},
			{r * stride, PLAN_DEV_GPU, 0, 2, 0},
			{r * stride, PLAN_DEV_GPU, 0, 1, 100},
		};
		for (size_t i = 0; i < 3; i++)
			trace_add_mem(&t, &s[i]);
	}
	struct prof_step *rows = NULL;
	size_t n = 0;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze_steps(&t, &rows, &n, &err), TW_OK);
	CHECK_EQ_INT(T, (int64_t)n, 3);
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ_INT(T, rows[i].rank, (int64_t)i * stride);
		CHECK_EQ_INT(T, rows[i].a.compute_ns, 320 * US);
		CHECK_EQ_INT(T, rows[i].a.idle_ns, 80 * US);
	}
	free(rows);
	struct prof_analysis a;
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.peak_mem_bytes, 100);
	CHECK_EQ_INT(T, a.compute_ns, 320 * US);
	trace_release(&t);
}

static void test_order_interleaved(struct test_ctx *T)
{
	check_interleaved(T, 1);
	check_interleaved(T, 40000000);
}

static void test_bad_traces(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 1);
	struct prof_analysis a;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "no events");
	ev(&t, 0, 0, TRACE_GEMM, 10, 5, "backwards");
	tw_err_clear(&err);
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "ends before it starts");
	trace_release(&t);
}

static void test_trace_basics(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 2);
	uint32_t a = trace_intern(&t, "alpha"), b = trace_intern(&t, "beta");
	char buf[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(buf, sizeof(buf), "n%d", i);
		trace_intern(&t, buf);
	}
	CHECK_EQ_INT(T, trace_intern(&t, "alpha"), a);
	CHECK_EQ_INT(T, trace_intern(&t, "beta"), b);
	CHECK_EQ_INT(T, trace_intern(&t, "n4999"), trace_intern(&t, "n4999"));
	CHECK(T, a != b);
	ev(&t, 1, 0, TRACE_GEMM, 5, 6, "beta");
	ev(&t, 0, 0, TRACE_GEMM, 9, 10, "alpha");
	ev(&t, 0, 0, TRACE_GEMM, 1, 2, "gamma");
	trace_sort(&t);
	CHECK_EQ_INT(T, t.ev[0].rank, 0);
	CHECK_EQ_INT(T, t.ev[0].start_ns, 1 * US);
	CHECK_EQ_INT(T, t.ev[2].rank, 1);
	CHECK(T, strcmp(trace_name(&t, &t.ev[2]), "beta") == 0);
	enum trace_cat c;
	CHECK(T, trace_cat_parse("reduce_scatter", &c) && c == TRACE_REDUCE_SCATTER);
	CHECK(T, !trace_cat_parse("bogus", &c));
	CHECK(T, trace_cat_is_comm(TRACE_P2P) && !trace_cat_is_comm(TRACE_H2D));
	CHECK(T, trace_cat_is_copy(TRACE_NVME) && trace_cat_is_compute(TRACE_ATTN));
	trace_release(&t);
}

/* The NCCL algorithm a run's collectives carry (trace flags): the (algorithm, protocol) with
 * most of a type's time and its share of the time whose algorithm is known. One rank, one step:
 * all-reduce ring/LL128 30 us + tree/Simple 10 us + an unknown one 20 us -> ring/LL128, 0.75;
 * all-gather without algorithm -> unknown. */
static void test_nccl_algo_share(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 1);
	ev(&t, 0, 0, TRACE_MARKER, 0, 100, "step 0");
	ev(&t, 0, 1, TRACE_ALL_REDUCE, 0, 30, "ar")->flags = trace_algo_flags(TRACE_ALGO_RING, TRACE_PROTO_LL128);
	ev(&t, 0, 1, TRACE_ALL_REDUCE, 30, 40, "ar")->flags = trace_algo_flags(TRACE_ALGO_TREE, TRACE_PROTO_SIMPLE) | TRACE_F_RECOMPUTE;
	ev(&t, 0, 1, TRACE_ALL_REDUCE, 40, 60, "ar");
	ev(&t, 0, 1, TRACE_ALL_GATHER, 60, 70, "ag");
	struct prof_analysis a;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	enum trace_algo algo = TRACE_ALGO_UNKNOWN;
	enum trace_proto proto = TRACE_PROTO_UNKNOWN;
	double share = 0;
	CHECK(T, prof_coll_algo(&a.coll[TRACE_ALL_REDUCE], &algo, &proto, &share));
	CHECK_EQ_INT(T, algo, TRACE_ALGO_RING);
	CHECK_EQ_INT(T, proto, TRACE_PROTO_LL128);
	CHECK_NEAR(T, share, 0.75, 1e-12);
	CHECK(T, !prof_coll_algo(&a.coll[TRACE_ALL_GATHER], &algo, &proto, &share));
	CHECK(T, !strcmp(trace_algo_name(TRACE_ALGO_NVLS), "nvls"));
	CHECK(T, !strcmp(trace_proto_name(TRACE_PROTO_SIMPLE), "Simple"));
	CHECK(T, !strcmp(trace_algo_name((enum trace_algo)9), "?"));
	trace_release(&t);
}

/* The bubble is a pipeline stage's idle: compute [0,10) [20,30) in a step [0,30), idle
 * [10,20) before the last compute end.
 *   with a p2p receive [12,20): bubble = idle not under a collective other than p2p = 10;
 *   with a two-rank broadcast [12,20) (DeepSpeed's pipeline sends): piped, but the broadcast
 *     is a collective, so bubble = [10,12) = 2;
 *   with an all-reduce [12,20) over 4 ranks: no pipeline neighbour, bubble 0, host gap 2. */
static void test_bubble_needs_pipeline(struct test_ctx *T)
{
	const enum trace_cat cats[] = { TRACE_P2P, TRACE_BROADCAST, TRACE_ALL_REDUCE };
	const int group[] = { 2, 2, 4 };
	const int64_t bubble_us[] = { 10, 2, 0 }, host_us[] = { 2, 2, 2 };
	for (int k = 0; k < 3; k++) {
		struct trace t;
		trace_init(&t, TRACE_KIND_SIM, 1);
		ev(&t, 0, 0, TRACE_MARKER, 0, 30, "step 0");
		ev(&t, 0, 0, TRACE_GEMM, 0, 10, "gemm");
		ev(&t, 0, 0, TRACE_GEMM, 20, 30, "gemm");
		struct trace_event *c = ev(&t, 0, 1, cats[k], 12, 20, "comm");
		c->group_size = group[k];
		c->bytes = 1000;
		struct prof_analysis a;
		struct tw_err err = {0};
		CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
		CHECK_EQ_INT(T, a.idle_ns, 10 * US);
		CHECK_EQ_INT(T, a.stall_host_ns, host_us[k] * US);
		CHECK_EQ_INT(T, a.bubble_ns, bubble_us[k] * US);
		trace_release(&t);
	}
}

/* A 4 MB all-reduce [90,110) over steps [0,100) and [100,200) counts half in each: 0.5 calls and
 * 2 MB a step, one call and 4 MB over the run (its time too: 10 us in each) */
static void test_collective_across_steps(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 1);
	ev(&t, 0, 0, TRACE_MARKER, 0, 100, "step 0");
	ev(&t, 0, 0, TRACE_MARKER, 100, 200, "step 1");
	ev(&t, 0, 0, TRACE_GEMM, 0, 80, "gemm");
	ev(&t, 0, 0, TRACE_GEMM, 120, 190, "gemm");
	struct trace_event *ar = ev(&t, 0, 1, TRACE_ALL_REDUCE, 90, 110, "ar");
	ar->bytes = 4000000;
	ar->group_size = 4;
	struct prof_step *rows = NULL;
	size_t n = 0;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze_steps(&t, &rows, &n, &err), TW_OK);
	CHECK_EQ_INT(T, n, 2);
	for (size_t i = 0; i < n && n == 2; i++) {
		const struct prof_coll_stats *c = &rows[i].a.coll[TRACE_ALL_REDUCE];
		CHECK_NEAR(T, c->mean_count, 0.5, 1e-12);
		CHECK_EQ_INT(T, c->bytes, 2000000);
		CHECK_EQ_INT(T, c->time_ns, 10 * US);
		CHECK_NEAR(T, c->algbw_GBps, 4000000.0 / 20000.0, 1e-9); /* the whole call's rate */
	}
	free(rows);
	struct prof_analysis a;
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_NEAR(T, a.coll[TRACE_ALL_REDUCE].mean_count, 0.5, 1e-12); /* a mean per step */
	trace_release(&t);
}

/* A collective between pipeline stages (the tied embedding's all-reduce of the first and the last
 * stage) is late by the schedule, not by a straggler: members with different stage tags are
 * not matched. The same collective within one stage names the rank that came last. */
static void test_straggler_not_across_stages(struct test_ctx *T)
{
	for (int same = 0; same < 2; same++) {
		struct trace t;
		trace_init(&t, TRACE_KIND_SIM, 2);
		for (int r = 0; r < 2; r++) {
			ev(&t, r, 0, TRACE_MARKER, 0, 100, "step 0");
			ev(&t, r, 0, TRACE_GEMM, 0, 50, "gemm");
			/* rank 1 arrives 30 us late: its kernel is 30 us shorter */
			struct trace_event *e = ev(&t, r, 1, TRACE_ALL_REDUCE, r ? 80 : 50, 90, "ar");
			e->bytes = 1000, e->group_size = 2, e->comm = 7;
			e->stage = same ? 0 : r;
		}
		struct prof_analysis a;
		struct tw_err err = {0};
		CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
		CHECK_EQ_INT(T, a.straggler_colls, same ? 1 : 0);
		CHECK_EQ_INT(T, a.straggler_rank, same ? 1 : -1);
		trace_release(&t);
	}
}

/* Step windows are found in O(n log n): 200,000 steps with a kernel each (a 200,000-step
 * trace took 45 s to import when each marker searched the steps so far). */
static void test_many_steps(struct test_ctx *T)
{
	enum { N = 200000 };
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 1);
	char name[32];
	for (int k = N - 1; k >= 0; k--) { /* out of order: the windows are sorted by step */
		snprintf(name, sizeof(name), "ProfilerStep#%d", k);
		ev(&t, 0, 0, TRACE_MARKER, 10LL * k, 10LL * k + 10, name);
		ev(&t, 0, 7, TRACE_GEMM, 10LL * k + 2, 10LL * k + 8, "gemm");
	}
	trace_sort(&t);
	int64_t t0 = tw_now_ns();
	struct prof_step *rows = NULL;
	size_t n = 0;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_analyze_steps(&t, &rows, &n, &err), TW_OK);
	double s = (double)(tw_now_ns() - t0) / 1e9;
	CHECK_EQ_INT(T, n, N);
	if (n == N) {
		CHECK_EQ_INT(T, rows[0].step, 0);
		CHECK_EQ_INT(T, rows[N - 1].step, N - 1);
		CHECK_EQ_INT(T, rows[N - 1].a.compute_ns, 6 * US);
		CHECK_EQ_INT(T, rows[N - 1].a.idle_ns, 4 * US);
	}
	CHECK(T, s < 3.0);
	free(rows);
	trace_release(&t);
}

int main(void)
{
	struct test_ctx T = {0};
	TEST_RUN(&T, test_overlap_stall);
	TEST_RUN(&T, test_bubble_needs_pipeline);
	TEST_RUN(&T, test_collective_across_steps);
	TEST_RUN(&T, test_straggler_not_across_stages);
	TEST_RUN(&T, test_no_comm_streams);
	TEST_RUN(&T, test_straggler_clock_offset);
	TEST_RUN(&T, test_straggler_per_communicator);
	TEST_RUN(&T, test_marker_clipping);
	TEST_RUN(&T, test_step_marker_names);
	TEST_RUN(&T, test_classify);
	TEST_RUN(&T, test_busbw_factors);
	TEST_RUN(&T, test_peak_memory);
	TEST_RUN(&T, test_order_interleaved);
	TEST_RUN(&T, test_bad_traces);
	TEST_RUN(&T, test_trace_basics);
	TEST_RUN(&T, test_nccl_algo_share);
	TEST_RUN(&T, test_many_steps);
	return test_done(&T);
}
