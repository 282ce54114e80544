/* sim: event queue, NCCL model against hand-computed values (reference/cost-models.md §1.9),
 * max-min fair sharing by hand, and the engine on hand-built plans (symmetric == full). */
#include <stdlib.h>
#include <string.h>

#include "../../profile/profile.h"
#include "../../sim/sim_int.h"
#include "test.h"

/* ---- event queue ---- */

static void test_heap_tie_break(struct test_ctx *T)
{
	struct sim_heap h;
	sim_heap_init(&h);
	/* equal times pop in insertion order, whatever else is in the heap */
	for (int i = 0; i < 50; i++)
		sim_heap_push(&h, 100, 0, i, 0, 0);
	sim_heap_push(&h, 50, 0, 1000, 0, 0);
	for (int i = 50; i < 100; i++)
		sim_heap_push(&h, 100, 0, i, 0, 0);
	struct sim_ev e;
	CHECK(T, sim_heap_pop(&h, &e));
	CHECK_EQ_INT(T, e.a, 1000);
	for (int i = 0; i < 100; i++) {
		CHECK(T, sim_heap_pop(&h, &e));
		CHECK_EQ_INT(T, e.a, i);
		CHECK_EQ_INT(T, e.t, 100);
	}
	CHECK(T, !sim_heap_pop(&h, &e));
	sim_heap_free(&h);
}

static void test_heap_order_reproducible(struct test_ctx *T)
{
	/* two heaps fed the same pseudo-random times give identical pop sequences, sorted */
	struct sim_heap a, b;
	sim_heap_init(&a);
	sim_heap_init(&b);
	uint64_t x = 12345;
	for (int i = 0; i < 2000; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		int64_t t = (int64_t)((x >> 33) % 97);
		sim_heap_push(&a, t, 0, i, 0, 0);
		sim_heap_push(&b, t, 0, i, 0, 0);
	}
	struct sim_ev ea, eb;
	int64_t last_t = -1, last_seq = -1;
	int bad = 0;
	while (sim_heap_pop(&a, &ea)) {
		CHECK(T, sim_heap_pop(&b, &eb));
		if (ea.a != eb.a || ea.t < last_t || (ea.t == last_t && (int64_t)ea.seq < last_seq))
			bad++;
		last_t = ea.t;
		last_seq = (int64_t)ea.seq;
	}
	CHECK_EQ_INT(T, bad, 0);
	sim_heap_free(&a);
	sim_heap_free(&b);
}

static void test_heap_interleaved(struct test_ctx *T)
{
	/* pushes between pops, each at or after the last time popped (as the engine's are), at
	 * gaps from 0 ns to 2^60 ns: the queue pops what a linear scan for the least (time,
	 * push order) finds */
	struct sim_heap h;
	sim_heap_init(&h);
	enum { N = 4000 };
	int64_t *rt = calloc(N, sizeof(*rt));
	int32_t *rid = calloc(N, sizeof(*rid));
	CHECK(T, rt && rid);
	if (!rt || !rid) {
		free(rt);
		free(rid);
		return;
	}
	size_t nref = 0;
	int32_t pushed = 0, bad = 0, popped = 0;
	int64_t now = 0;
	uint64_t x = 99;
	while (pushed < N || nref > 0) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		int r = (int)(x >> 60); /* 0 .. 15 */
		if (pushed < N && (r < 9 || nref == 0)) {
			int q = r % 9; /* r >= 9 when the queue is empty */
			int64_t gap = q < 3 ? 0 : q < 6 ? (int64_t)(x >> 54) : (int64_t)((x >> 4) & ((1LL << (12 * (q - 3))) - 1));
			if (now > (1LL << 61))
				gap &= 0xffff; /* no overflow */
			sim_heap_push(&h, now + gap, 0, pushed, 0, 0);
			rt[nref] = now + gap;
			rid[nref++] = pushed++;
			continue;
		}
		size_t m = 0;
		for (size_t i = 1; i < nref; i++)
			if (rt[i] < rt[m] || (rt[i] == rt[m] && rid[i] < rid[m]))
				m = i;
		struct sim_ev e;
		CHECK(T, sim_heap_pop(&h, &e));
		if (e.a != rid[m] || e.t != rt[m])
			bad++;
		now = rt[m];
		rt[m] = rt[nref - 1];
		rid[m] = rid[--nref];
		popped++;
	}
	struct sim_ev e;
	CHECK(T, !sim_heap_pop(&h, &e));
	CHECK_EQ_INT(T, popped, N);
	CHECK_EQ_INT(T, bad, 0);
	free(rt);
	free(rid);
	sim_heap_free(&h);
}

static void test_heap_past_event(struct test_ctx *T)
{
	/* time does not run backwards: an event pushed before the last time popped is due at it,
	 * after the events already due then */
	struct sim_heap h;
	sim_heap_init(&h);
	sim_heap_push(&h, 100, 0, 1, 0, 0);
	sim_heap_push(&h, 100, 0, 2, 0, 0);
	sim_heap_push(&h, 300, 0, 3, 0, 0);
	struct sim_ev e;
	CHECK(T, sim_heap_pop(&h, &e));
	CHECK_EQ_INT(T, e.a, 1);
	sim_heap_push(&h, 40, 0, 4, 0, 0);
	int want[] = { 2, 4, 3 };
	int64_t want_t[] = { 100, 100, 300 };
	for (int i = 0; i < 3; i++) {
		CHECK(T, sim_heap_pop(&h, &e));
		CHECK_EQ_INT(T, e.a, want[i]);
		CHECK_EQ_INT(T, e.t, want_t[i]);
	}
	CHECK(T, !sim_heap_pop(&h, &e));
	sim_heap_free(&h);
}

/* ---- NCCL model ---- */

static struct nccl_comm h100_comm(int64_t nodes, int64_t ppn)
{
	struct nccl_comm c;
	memset(&c, 0, sizeof(c));
	c.cc = 90;
	c.nnodes = nodes;
	c.ppn = ppn;
	c.nranks = nodes * ppn;
	c.nch = 16;
	c.intra_GBps = 370.8;
	c.inter_GBps = 8 * 50.0 * 0.94;
	c.nvlink = true;
	c.nvls = true;
	return c;
}

static void test_nccl_latency_table(struct test_ctx *T)
{
	/* §1.9: Hopper AllReduce latency terms, µs (Intel host, latencyInter 0) */
	struct nccl_comm c = h100_comm(1, 8);
	struct nccl_result r;
	double S = 1 << 20; /* small enough that no plateau factor applies on one node */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_RING, NCCL_LL, &r));
	CHECK_NEAR(T, r.lat_us, 15.0, 1e-9);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_RING, NCCL_LL128, &r));
	CHECK_NEAR(T, r.lat_us, 40.6, 1e-9);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_RING, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.lat_us, 56.0, 1e-9);
	CHECK(T, !nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_TREE, NCCL_SIMPLE, &r)); /* one node */
	/* 16 nodes x 8: Tree LL 55.2, Tree Simple 176.4, Ring LL 311.6 */
	c = h100_comm(16, 8);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 4096, NCCL_TREE, NCCL_LL, &r));
	CHECK_NEAR(T, r.lat_us, 55.2, 1e-9);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 4096, NCCL_TREE, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.lat_us, 176.4, 1e-9);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 4096, NCCL_RING, NCCL_LL, &r));
	CHECK_NEAR(T, r.lat_us, 311.6, 1e-9);
	/* Ring Simple multi-node: 1190 x 1.4 once nBytes/(nCh n) >= 64 */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_RING, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.lat_us, 1190.0 * 1.4, 1e-9);
}

/* PAT (NCCL >= 2.23): all-gather / reduce-scatter with one GPU per node, Simple only; latency
 * 8 + log2(nodes) x 14/3.5 + n x 2.8 µs, 3/4 of the ring's bus bandwidth; the tuner picks it
 * where its latency wins and the ring for large messages. */
static void test_nccl_pat(struct test_ctx *T)
{
	struct nccl_comm c = h100_comm(48, 1);
	c.inter_GBps = 50.0 * 0.94;
	struct nccl_result r, ring;
	CHECK(T, nccl_eval(&c, PLAN_ALL_GATHER, 48.0 * 65536, NCCL_PAT, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.lat_us, 8.0 + 5 * (14.0 / 3.5) + 48 * 2.8, 1e-9);
	CHECK(T, !nccl_eval(&c, PLAN_ALL_GATHER, 48.0 * 65536, NCCL_PAT, NCCL_LL, &r));
	CHECK(T, !nccl_eval(&c, PLAN_ALL_REDUCE, 48.0 * 65536, NCCL_PAT, NCCL_SIMPLE, &r));
	CHECK(T, nccl_predict(&c, PLAN_REDUCE_SCATTER, 48.0 * 65536, -1, &r));
	CHECK_EQ_INT(T, r.algo, NCCL_PAT);
	CHECK(T, nccl_predict(&c, PLAN_REDUCE_SCATTER, 48.0 * (1 << 30), -1, &r));
	CHECK(T, nccl_eval(&c, PLAN_REDUCE_SCATTER, 48.0 * (1 << 30), NCCL_RING, NCCL_SIMPLE, &ring));
	CHECK_EQ_INT(T, r.algo, NCCL_RING); /* 1 GiB per rank: the ring's full bandwidth wins */
	CHECK_NEAR(T, r.time_us, ring.time_us, 1e-9);
	c = h100_comm(6, 8); /* 8 GPUs a node: never PAT */
	CHECK(T, !nccl_eval(&c, PLAN_ALL_GATHER, 48.0 * 65536, NCCL_PAT, NCCL_SIMPLE, &r));
}

/* NVLSTree (NCCL >= 2.18): all-reduce across nodes with NVLS inside each, Simple only; latency
 * 25 + 2 log2(nodes) x 20.9 µs (§1.9); bandwidth the least of NVLS on the node's GPUs, the
 * NICs carrying S per node across two nodes, 2S beyond, at the tree's 0.92, and NCCL's
 * per-channel cap times the NVLS graph's channels, one per head (8 here). */
static void test_nccl_nvls_tree(struct test_ctx *T)
{
	struct nccl_comm c = h100_comm(2, 8);
	struct nccl_result r, ring;
	const double S = 1 << 30;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.lat_us, 66.8, 1e-9);
	double nvls8 = 370.8 * 0.85 * 8.0 / 9.0, nics = 8 * 50.0 * 0.94;
	/* 2 nodes: the NICs carry S; NCCL's cap, 8 heads x 57.7 GB/s of bus bandwidth (Hopper,
	 * 2 nodes), binds before NVLS does */
	CHECK(T, 8 * 57.7 * 16.0 / 30.0 < nvls8);
	CHECK_NEAR(T, r.algbw_GBps, 8 * 57.7 * 16.0 / 30.0, 1e-9);
	CHECK_NEAR(T, r.nvl_bytes, S * 9.0 / 8.0, 1e-6);
	CHECK_NEAR(T, r.net_bytes, S / 8.0, 1e-6);
	/* taken when named (NCCL_ALGO=NVLSTree,...), or forced; not by the default tuner */
	struct nccl_result dflt;
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, S, -1, &dflt));
	CHECK(T, dflt.algo != NCCL_NVLS_TREE);
	c.named_algos = (1u << NCCL_NVLS_TREE) | (1u << NCCL_RING);
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, S, -1, &r));
	CHECK_EQ_INT(T, r.algo, NCCL_NVLS_TREE);
	CHECK(T, r.time_us < dflt.time_us);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_RING, NCCL_SIMPLE, &ring));
	CHECK(T, r.busbw_GBps > 1.3 * ring.busbw_GBps);
	c.no_algos = 1u << NCCL_NVLS_TREE; /* excluded wins over named */
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, S, -1, &ring));
	CHECK(T, ring.algo != NCCL_NVLS_TREE);
	c.no_algos = c.named_algos = 0;
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, S, NCCL_NVLS_TREE, &r)); /* forced */
	CHECK_EQ_INT(T, r.algo, NCCL_NVLS_TREE);
	/* its fill: iterations of one chunk per head through 3 + 2 log2(nodes) stages (scatter,
	 * reduce up the tree level by level, back down, gather); 1 GiB on two nodes runs NCCL's
	 * 128 KiB chunks, 32 MiB 64 KiB (below 4 per channel and head), 4 MiB 32 KiB (below 1) */
	struct {
		double S, chunk;
	} nt[] = { { 1.0 * (1 << 30), 131072 }, { 32.0 * (1 << 20), 65536 }, { 4.0 * (1 << 20), 32768 } };
	for (int i = 0; i < 3; i++) {
		CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, nt[i].S, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
		double it = fmin(8.0 * nt[i].chunk, nt[i].S / 16.0);
		CHECK_NEAR(T, r.fill_us, 4.0 * it * 16.0 / (1000.0 * r.algbw_GBps), 1e-9);
	}
	/* from 4 nodes NCCL caps the chunk at 64 KiB, and the tree is a level deeper: 6 stages
	 * to fill; a call smaller than one iteration fills with what it has */
	struct nccl_comm c4 = h100_comm(4, 8);
	CHECK(T, nccl_eval(&c4, PLAN_ALL_REDUCE, 1 << 30, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.fill_us, 6.0 * 8.0 * 65536.0 * 16.0 / (1000.0 * r.algbw_GBps), 1e-9);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.fill_us, 4.0 * (1 << 20) / (1000.0 * r.algbw_GBps), 1e-9);
	/* Blackwell across nodes: NCCL's SM100 table. 400 Gb/s NICs on 2 nodes: 32 channels and
	 * 64 KiB chunks; on 4 nodes 24 channels; 800 Gb/s on 4 nodes: 24 channels, 256 KiB */
	struct {
		int64_t nodes;
		double nic, ch, chunk;
	} bt[] = { { 2, 50, 32, 65536 }, { 4, 50, 24, 65536 }, { 4, 100, 24, 262144 }, { 2, 25, 32, 131072 } };
	for (int i = 0; i < 4; i++) {
		struct nccl_comm b = h100_comm(bt[i].nodes, 8);
		b.cc = 100;
		b.nic_line_GBps = bt[i].nic;
		double big = 64.0 * (1 << 30), stages = 2.0 + 2.0 * log2((double)bt[i].nodes);
		CHECK(T, nccl_eval(&b, PLAN_ALL_REDUCE, big, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
		CHECK_NEAR(T, r.fill_us, stages * 8.0 * bt[i].chunk * bt[i].ch / (1000.0 * r.algbw_GBps), 1e-9);
	}
	c = h100_comm(4, 8); /* beyond two nodes each NIC carries 2S/ppn: the network binds */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.algbw_GBps, 0.92 * nics * 0.5, 1e-9);
	CHECK_NEAR(T, r.net_bytes, 2.0 * S / 8.0, 1e-6);
	c = h100_comm(16, 8);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 4096, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.lat_us, 192.2, 1e-9);
	c = h100_comm(128, 8);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 4096, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.lat_us, 317.6, 1e-9);
	/* only Simple, only all-reduce, only across nodes with NVLS and >= 2 GPUs a node */
	c = h100_comm(2, 8);
	CHECK(T, !nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_NVLS_TREE, NCCL_LL128, &r));
	CHECK(T, !nccl_eval(&c, PLAN_ALL_GATHER, S, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	c = h100_comm(1, 8);
	CHECK(T, !nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	c = h100_comm(16, 1);
	CHECK(T, !nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	c = h100_comm(2, 8);
	c.nvls = false;
	CHECK(T, !nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	/* Blackwell on x86 hosts: NCCL's tree correction on medium sizes (32 MiB: Simple 0.7) */
	c = h100_comm(4, 8);
	c.cc = 100;
	struct nccl_result x86;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 25, NCCL_NVLS_TREE, NCCL_SIMPLE, &r));
	c.x86_cpu = true;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 25, NCCL_NVLS_TREE, NCCL_SIMPLE, &x86));
	CHECK_NEAR(T, x86.algbw_GBps, 0.7 * r.algbw_GBps, 1e-9);
}

/* Reduce is rooted like broadcast in NCCL's tuner (ring only, nsteps = n, busbw = algbw): the
 * same time for the same bytes, half an all-reduce's bandwidth term (the data crosses each link
 * once), and it puts S, not 2(n-1)/n S, on the links. */
static void test_nccl_reduce(struct test_ctx *T)
{
	struct nccl_comm c = h100_comm(4, 8);
	double S = 256.0 * (1 << 20);
	struct nccl_result red, bc, ar;
	CHECK(T, nccl_predict(&c, PLAN_REDUCE, S, -1, &red));
	CHECK(T, nccl_predict(&c, PLAN_BROADCAST, S, -1, &bc));
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, S, NCCL_RING, &ar));
	CHECK_EQ_INT(T, red.algo, NCCL_RING);
	CHECK(T, !nccl_eval(&c, PLAN_REDUCE, S, NCCL_TREE, NCCL_SIMPLE, &bc));
	CHECK(T, nccl_predict(&c, PLAN_BROADCAST, S, -1, &bc));
	CHECK_NEAR(T, red.time_us, bc.time_us, 1e-12);
	CHECK_NEAR(T, red.busbw_GBps, S / (red.time_us * 1e3), 1e-12);
	CHECK(T, red.time_us < ar.time_us);
	CHECK_NEAR(T, red.net_bytes, S / 8, 1e-9);
}

static void test_nccl_bandwidth(struct test_ctx *T)
{
	/* §1.9 example: one H100 node, nCh*bwIntra = 370.8: Ring LL busBw = min(141, 185.4) */
	struct nccl_comm c = h100_comm(1, 8);
	struct nccl_result r;
	double S = 1e9;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_RING, NCCL_LL, &r));
	CHECK_NEAR(T, r.algbw_GBps, 141.0 * 8.0 / 14.0, 1e-9);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_RING, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.algbw_GBps, 370.8 * 8.0 / 14.0, 1e-9);
	/* time = lat + S / (1000 algbw) + fill; fill = 14 steps x 512 KiB / (1000 x 370.8/16) */
	double fill = 14.0 * 524288.0 / (1000.0 * 370.8 / 16.0);
	CHECK_NEAR(T, r.time_us, 56.0 + S / (1000.0 * 370.8 * 8.0 / 14.0) + fill, 1e-9);
	/* LL128: min(0.92 busBw, nCh x 36.7) */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_RING, NCCL_LL128, &r));
	CHECK_NEAR(T, r.algbw_GBps, 0.92 * 370.8 * 8.0 / 14.0, 1e-9);
	/* NVLS: switch moves S (1 + 1/n) per GPU per direction at 0.85 efficiency */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_NVLS, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.algbw_GBps, 370.8 * 0.85 * 8.0 / 9.0, 1e-9);
	/* its fill: two iterations of the kernel's scatter / reduce / gather pipeline, each one
	 * chunk per head (8) on each of the 16 NVLS channels, at the algorithm bandwidth; NCCL's
	 * chunk is 128 KiB from 1 GiB (64 chunks per channel and head), 64 KiB below, 32 KiB
	 * below 64 MiB, 16 KiB below 8 MiB */
	double nv_alg = 370.8 * 0.85 * 8.0 / 9.0;
	struct {
		double S, chunk;
	} nv[] = { { 2.0 * (1 << 30), 131072 }, { 256.0 * (1 << 20), 65536 },
		   { 32.0 * (1 << 20), 32768 }, { 4.0 * (1 << 20), 16384 } };
	for (int i = 0; i < 4; i++) {
		CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, nv[i].S, NCCL_NVLS, NCCL_SIMPLE, &r));
		CHECK_NEAR(T, r.fill_us, 2.0 * 8.0 * nv[i].chunk * 16.0 / (1000.0 * nv_alg), 1e-9);
		CHECK_NEAR(T, r.time_us, r.lat_us + nv[i].S / (1000.0 * nv_alg) + r.fill_us, 1e-9);
	}
	/* a call smaller than one iteration fills with what it has: twice its transfer */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_NVLS, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.fill_us, 2.0 * (1 << 20) / (1000.0 * nv_alg), 1e-9);
	/* the fill shrinks with NCCL's chunk: 32 MiB fills in less time than 256 MiB by more
	 * than the size alone would give (a quarter of the chunk) */
	struct nccl_result r32, r256;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 32.0 * (1 << 20), NCCL_NVLS, NCCL_SIMPLE, &r32));
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 256.0 * (1 << 20), NCCL_NVLS, NCCL_SIMPLE, &r256));
	CHECK_NEAR(T, r256.fill_us, 2.0 * r32.fill_us, 1e-9);
	/* one Blackwell node runs 24 NVLS channels: 1.25 GiB is below 64 x 24 x 8 x 128 KiB */
	struct nccl_comm bw = c;
	bw.cc = 100;
	CHECK(T, nccl_eval(&bw, PLAN_ALL_REDUCE, 1.25 * (1 << 30), NCCL_NVLS, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.fill_us, 2.0 * 8.0 * 65536.0 * 24.0 / (1000.0 * r.algbw_GBps), 1e-9);
	CHECK(T, nccl_eval(&bw, PLAN_ALL_REDUCE, 2.0 * (1 << 30), NCCL_NVLS, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.fill_us, 2.0 * 8.0 * 131072.0 * 24.0 / (1000.0 * r.algbw_GBps), 1e-9);
	/* an NVL72 domain: 72 GPUs, but NCCL's NVLS runs at most 32 heads (16 GiB: 128 KiB chunks
	 * above 64 x 24 x 32 x 128 KiB = 6 GiB) */
	struct nccl_comm nvl = h100_comm(1, 72);
	nvl.cc = 100;
	CHECK(T, nccl_eval(&nvl, PLAN_ALL_REDUCE, 16.0 * (1 << 30), NCCL_NVLS, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.fill_us, 2.0 * 32.0 * 131072.0 * 24.0 / (1000.0 * r.algbw_GBps), 1e-9);
	/* the tuner's choice for a large all-reduce on one H100 node is NVLS, for small LL */
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, 8e9, -1, &r));
	CHECK_EQ_INT(T, r.algo, NCCL_NVLS);
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, 4096, -1, &r));
	CHECK_EQ_INT(T, r.proto, NCCL_LL);
	/* bus bandwidth of a huge ring all-gather approaches the link (nccl-tests' 370) */
	CHECK(T, nccl_predict(&c, PLAN_ALL_GATHER, 16e9, NCCL_RING, &r));
	CHECK_NEAR(T, r.busbw_GBps, 370.8, 0.01);
	/* multi-node ring: limited by the NICs (8 x 47 GB/s) */
	c = h100_comm(4, 8);
	c.intra_GBps = 500;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, S, NCCL_RING, NCCL_SIMPLE, &r));
	CHECK_NEAR(T, r.algbw_GBps, 376.0 * 32.0 / 62.0, 1e-9);
	CHECK(T, nccl_busbw_factor(PLAN_ALL_REDUCE, 8) == 14.0 / 8.0);
	CHECK(T, nccl_size(PLAN_ALL_GATHER, 100, 8) == 800);
	/* a tree pipelines each channel's whole share (a ring steps through 1/n slices): its
	 * first chunk, min(512 KiB, S / channels), crosses 2 (log2 nodes + ppn) steps, the same
	 * whatever the rank count, so more nodes never fill it faster */
	struct nccl_result t4, t16;
	c = h100_comm(4, 8);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 64.0 * (1 << 20), NCCL_TREE, NCCL_SIMPLE, &t4));
	double ch = fmin(524288.0, 64.0 * (1 << 20) / (double)c.nch);
	double bw_ch = fmin(c.intra_GBps, c.inter_GBps) / (double)c.nch; /* 64 MiB: all channels */
	CHECK_NEAR(T, t4.fill_us, 2.0 * (2.0 + 8.0) * ch / (1000.0 * bw_ch), 1e-9);
	c = h100_comm(16, 8);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 64.0 * (1 << 20), NCCL_TREE, NCCL_SIMPLE, &t16));
	CHECK(T, t16.fill_us >= t4.fill_us && t16.time_us >= t4.time_us);
}

/* ---- max-min fair sharing ---- */

struct chg {
	int n;
	int32_t who[16];
};
static void note_change(void *ctx, int32_t f)
{
	struct chg *c = ctx;
	if (c->n < 16)
		c->who[c->n++] = f;
}

static void test_maxmin_by_hand(struct test_ctx *T)
{
	/* links A=0, B=1 (capacity 1). f1 on A (load 1); f2 on A and B (load 1 each); f3 on B
	 * (load 0.5). Filling: A carries weight 2, B 1.5 -> level 1/2 fills A: f1 = f2 = 0.5.
	 * B keeps 1 - 0.75 = 0.25 for f3 (weight 0.5): it reaches its own cap, 1. */
	struct net n;
	net_init(&n, 2);
	struct chg c = { 0 };
	int32_t A = 0, B = 1, AB[2] = { 0, 1 };
	double one = 1.0, ones[2] = { 1.0, 1.0 }, half = 0.5;
	int32_t f1 = net_add(&n, 0, 1000, &A, &one, 1, 1, note_change, &c);
	CHECK_NEAR(T, n.flows[f1].rate, 1.0, 1e-12); /* alone */
	int32_t f2 = net_add(&n, 0, 1000, AB, ones, 2, 2, note_change, &c);
	int32_t f3 = net_add(&n, 0, 1000, &B, &half, 1, 3, note_change, &c);
	CHECK_NEAR(T, n.flows[f1].rate, 0.5, 1e-12);
	CHECK_NEAR(T, n.flows[f2].rate, 0.5, 1e-12);
	CHECK_NEAR(T, n.flows[f3].rate, 1.0, 1e-12);
	/* f1 ran 400 ns at 0.5: 800 ns of work left at rate 0.5 -> ends 1600 ns later */
	CHECK_EQ_INT(T, net_eta(&n, f1, 400), 1600);
	/* f1 leaves at t=400: f2 alone on A, shares B with f3: weights B 1.5 -> level 2/3 */
	net_remove(&n, 400, f1, note_change, &c);
	CHECK_NEAR(T, n.flows[f2].rate, 1.0 / 1.5, 1e-12);
	CHECK_NEAR(T, n.flows[f3].rate, 1.0 / 1.5, 1e-12);
	/* f2 did 200 ns of work by t=400, the remaining 800 at 2/3 take 1200 ns */
	CHECK_EQ_INT(T, net_eta(&n, f2, 400), 1200);
	/* a slow link: capacity 0.25 caps a lone flow of load 1 at 0.25 */
	net_remove(&n, 400, f2, note_change, &c);
	net_remove(&n, 400, f3, note_change, &c);
	n.cap[A] = 0.25;
	int32_t f4 = net_add(&n, 400, 100, &A, &one, 1, 4, note_change, &c);
	CHECK_NEAR(T, n.flows[f4].rate, 0.25, 1e-12);
	CHECK_EQ_INT(T, net_eta(&n, f4, 400), 400);
	net_free(&n);
}

/* ---- the engine on hand-built plans ---- */

static void make_job(struct job *j, int64_t tp, int64_t pp, int64_t dp, int gpus_per_node)
{
	memset(j, 0, sizeof(*j));
	struct cluster *c = &j->cluster;
	snprintf(c->name, sizeof(c->name), "test");
	snprintf(c->gpu.name, sizeof(c->gpu.name), "A100");
	c->gpu.peak_tflops[TW_BF16] = 312;
	c->gpu.peak_tflops[TW_FP16] = 312;
	c->gpu.hbm_GBps = 2000;
	c->gpu.launch_us = 0;
	c->node.gpus = gpus_per_node;
	c->node.intra = CLUSTER_INTRA_NVSWITCH;
	c->node.nvlink_GBps = 240;
	c->node.pcie_GBps = 24;
	/* the latencies NCCL's tables assume: no shift (test_nccl_latency_delta) */
	c->node.nvlink_latency_us = 1.0;
	c->node.pcie_latency_us = 1.5;
	c->net.latency_us = 5.0;
	c->net.plugin_latency_us = 0.0;
	c->net.nics_per_node = gpus_per_node;
	c->net.nic_gbps = 200;
	c->net.nic_eff = 0.96;
	c->eff.gemm.n = 1;
	c->eff.gemm.eff[0] = 0.5;
	c->eff.attn = c->eff.gemm;
	c->eff.mem.n = 1;
	c->eff.mem.eff[0] = 1.0;
	c->eff.comm_overlap_slowdown = 1.0;
	c->eff.alloc_fragmentation = 1.0;
	j->strat.tp = tp;
	j->strat.pp = pp;
	j->strat.dp = dp;
	j->strat.cp = 1;
	j->strat.ep = 1;
	j->gpus = tp * pp * dp;
	j->nodes = (int)((j->gpus + gpus_per_node - 1) / gpus_per_node);
}

static uint32_t push(struct plan *p, int kind, int stream, const char *name, const uint32_t *deps,
		     int nd)
{
	TW_GROW(p->ops, p->cap, p->nops + 1);
	TW_GROW(p->deps, p->deps_cap, p->ndeps + (size_t)nd);
	struct plan_op *op = &p->ops[p->nops];
	memset(op, 0, sizeof(*op));
	op->id = (uint32_t)p->nops++;
	op->kind = (uint8_t)kind;
	op->stream = (uint8_t)stream;
	op->name = name;
	op->layer = op->micro = op->stage = -1;
	op->dep_off = (uint32_t)p->ndeps;
	op->ndeps = (uint32_t)nd;
	for (int i = 0; i < nd; i++)
		p->deps[p->ndeps++] = deps[i];
	return op->id;
}

/* a miniature pipeline: per micro-batch GEMM -> TP all-reduce -> send to the next stage (or
 * recv from the previous first); then a DP all-reduce of the gradients overlapping a GEMM */
struct mini {
	int micro;
	bool unmatched;   /* stage 0 sends one message stage 1 never receives */
	double gemm_flops;
	int batch_in;     /* each micro-batch starts with an input copy: 1 plain, 2 PLAN_F_BATCH,
			   * 3 PLAN_F_HOSTWAIT (a stream sync after it, e.g. a .tolist()) */
};

static enum tw_result mini_build(void *ctx, const struct job *j, int64_t rank, struct plan *p,
				 struct tw_err *err)
{
	const struct mini *m = ctx;
	memset(p, 0, sizeof(*p));
	p->rank = rank;
	struct job_coord c;
	job_coord_of(j, rank, &c);
	uint32_t last = UINT32_MAX;
	int64_t stride = j->strat.tp * j->strat.dp;
	uint32_t a = push(p, PLAN_ALLOC, PLAN_STREAM_COMPUTE, "act", NULL, 0);
	p->ops[a].u.mem.bytes = 1 << 30;
	last = a;
	for (int mb = 0; mb < m->micro; mb++) {
		if (c.pp > 0) {
			uint32_t r = push(p, PLAN_P2P, PLAN_STREAM_P2P, "recv", &last, 1);
			p->ops[r].flags = PLAN_F_BLOCKING;
			p->ops[r].u.p2p.peer = rank - stride;
			p->ops[r].u.p2p.bytes = 64 << 20;
			p->ops[r].u.p2p.seq = mb;
			last = r;
		}
		if (m->batch_in) {
			uint32_t in = push(p, PLAN_COPY, PLAN_STREAM_COPY_IN, "get_batch", &last, 1);
			p->ops[in].u.copy.dir = PLAN_H2D;
			p->ops[in].u.copy.bytes = 8192;
			if (m->batch_in == 2)
				p->ops[in].flags = PLAN_F_BATCH;
			if (m->batch_in == 3)
				p->ops[in].flags = PLAN_F_HOSTWAIT;
			last = in;
		}
		uint32_t g = push(p, PLAN_COMPUTE, PLAN_STREAM_COMPUTE, "fc1", &last, 1);
		p->ops[g].u.compute.kernel = PLAN_K_GEMM;
		p->ops[g].u.compute.dtype = TW_BF16;
		p->ops[g].u.compute.flops = m->gemm_flops;
		p->ops[g].micro = mb;
		last = g;
		if (j->strat.tp > 1) {
			uint32_t ar = push(p, PLAN_COLL, PLAN_STREAM_COMM_TP, "tp_ar", &last, 1);
			p->ops[ar].u.coll.coll = PLAN_ALL_REDUCE;
			p->ops[ar].u.coll.group = JOB_GROUP_TP;
			p->ops[ar].u.coll.bytes = 32 << 20;
			p->ops[ar].u.coll.seq = mb;
			last = ar;
		}
		if (c.pp + 1 < j->strat.pp) {
			uint32_t s = push(p, PLAN_P2P, PLAN_STREAM_P2P, "send", &last, 1);
			p->ops[s].flags = PLAN_F_SEND;
			p->ops[s].u.p2p.peer = rank + stride;
			p->ops[s].u.p2p.bytes = 64 << 20;
			p->ops[s].u.p2p.seq = mb;
			last = s;
		}
	}
	if (m->unmatched && c.pp == 0 && j->strat.pp > 1) {
		uint32_t s = push(p, PLAN_P2P, PLAN_STREAM_P2P, "orphan", &last, 1);
		p->ops[s].flags = PLAN_F_SEND;
		p->ops[s].u.p2p.peer = rank + stride;
		p->ops[s].u.p2p.bytes = 1024;
		p->ops[s].u.p2p.seq = 999;
	}
	uint32_t dar = push(p, PLAN_COLL, PLAN_STREAM_COMM, "dp_ar", &last, 1);
	p->ops[dar].u.coll.coll = PLAN_ALL_REDUCE;
	p->ops[dar].u.coll.group = JOB_GROUP_DP;
	p->ops[dar].u.coll.bytes = 256 << 20;
	uint32_t g2 = push(p, PLAN_COMPUTE, PLAN_STREAM_COMPUTE, "other", &last, 1);
	p->ops[g2].u.compute.kernel = PLAN_K_GEMM;
	p->ops[g2].u.compute.dtype = TW_BF16;
	p->ops[g2].u.compute.flops = m->gemm_flops;
	uint32_t both[2] = { dar, g2 };
	uint32_t f = push(p, PLAN_FREE, PLAN_STREAM_COMPUTE, "act", both, 2);
	p->ops[f].u.mem.bytes = 1 << 30;
	(void)err;
	return TW_OK;
}

static int64_t mini_roles(void *ctx, const struct job *j, int64_t *reps, int64_t *w, int64_t n)
{
	(void)ctx;
	for (int64_t s = 0; s < j->strat.pp && s < n; s++) {
		reps[s] = s * j->strat.tp * j->strat.dp;
		w[s] = j->strat.tp * j->strat.dp;
	}
	return j->strat.pp;
}

static void test_engine_single_gemm(struct test_ctx *T)
{
	/* one GPU, one micro-batch: alloc, GEMM, (no TP, no PP), DP of 1 all-reduce is a no-op
	 * of zero time, second GEMM; 312e12 x 0.5 FLOP/s: 1.56e12 FLOPs take 10 ms each */
	struct job j;
	make_job(&j, 1, 1, 1, 8);
	struct mini m = { .micro = 1, .gemm_flops = 1.56e12 };
	struct sim_plan_source src = { &m, mini_build, mini_roles };
	struct sim_options o = { 0 };
	struct trace t;
	struct sim_stats st;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, sim_run_plans(&j, &o, &src, &t, &st, &err), TW_OK);
	CHECK_EQ_INT(T, st.step_ns, 20000000);
	CHECK(T, t.nev >= 3);
	CHECK_EQ_INT(T, t.peak_mem[0], 1 << 30);
	trace_release(&t);
}

static void test_engine_symmetric_equals_full(struct test_ctx *T)
{
	struct job j;
	make_job(&j, 2, 2, 4, 4); /* 16 GPUs on 4 nodes: TP in-node, DP across nodes */
	struct mini m = { .micro = 4, .gemm_flops = 2e11 };
	struct sim_plan_source src = { &m, mini_build, mini_roles };
	struct sim_options sym = { 0 }, full = { .full = true };
	struct trace t1, t2;
	struct sim_stats s1, s2;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, sim_run_plans(&j, &sym, &src, &t1, &s1, &err), TW_OK);
	CHECK_EQ_INT(T, sim_run_plans(&j, &full, &src, &t2, &s2, &err), TW_OK);
	CHECK(T, s1.step_ns > 0);
	CHECK_EQ_INT(T, s1.step_ns, s2.step_ns);
	CHECK_EQ_INT(T, s1.ranks_simulated, 2);
	CHECK_EQ_INT(T, s2.ranks_simulated, 16);
	CHECK(T, s2.events > s1.events);
	/* the step includes the pipeline: stage 1 waits for stage 0's first send */
	CHECK(T, s1.step_ns > 5 * 1282051);
	/* same trace events for the representatives: compare rank 0's event times */
	size_t k = 0, bad = 0;
	for (size_t i = 0; i < t1.nev; i++) {
		if (t1.ev[i].rank != 0)
			continue;
		while (k < t2.nev && t2.ev[k].rank != 0)
			k++;
		if (k >= t2.nev || t2.ev[k].start_ns != t1.ev[i].start_ns || t2.ev[k].end_ns != t1.ev[i].end_ns)
			bad++;
		k++;
	}
	CHECK_EQ_INT(T, bad, 0);
	/* reproducible to the bit */
	struct trace t3;
	struct sim_stats s3;
	CHECK_EQ_INT(T, sim_run_plans(&j, &sym, &src, &t3, &s3, &err), TW_OK);
	CHECK_EQ_INT(T, s3.step_ns, s1.step_ns);
	CHECK_EQ_INT(T, s3.events, s1.events);
	trace_release(&t1);
	trace_release(&t2);
	trace_release(&t3);
}

/* Collective events carry their communicator (group and color), so the analysis matches one
 * group instance's members only: TP 2 · PP 2 · DP 4, ranks 0 and 1 share a TP group (the same
 * communicator for their first collective), rank 2 is in the next one */
static int64_t first_comm(const struct trace *t, int32_t rank)
{
	for (size_t i = 0; i < t->nev; i++)
		if (t->ev[i].rank == rank && trace_cat_is_comm((enum trace_cat)t->ev[i].cat) &&
		    t->ev[i].cat != TRACE_P2P)
			return t->ev[i].comm;
	return -1;
}

static void test_engine_communicators(struct test_ctx *T)
{
	struct job j;
	make_job(&j, 2, 2, 4, 4);
	struct mini m = { .micro = 4, .gemm_flops = 2e11 };
	struct sim_plan_source src = { &m, mini_build, mini_roles };
	struct sim_options full = { .full = true, .trace_all = true };
	struct trace t;
	struct sim_stats st;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, sim_run_plans(&j, &full, &src, &t, &st, &err), TW_OK);
	size_t unknown = 0;
	for (size_t i = 0; i < t.nev; i++)
		unknown += trace_cat_is_comm((enum trace_cat)t.ev[i].cat) &&
			   t.ev[i].cat != TRACE_P2P && t.ev[i].comm == 0;
	CHECK_EQ_INT(T, unknown, 0);
	int64_t c0 = first_comm(&t, 0), c1 = first_comm(&t, 1), c2 = first_comm(&t, 2);
	CHECK(T, c0 > 0);
	CHECK_EQ_INT(T, c0, c1);
	CHECK(T, c2 > 0 && c2 != c0);
	trace_release(&t);
}

static void test_engine_straggler(struct test_ctx *T)
{
	/* full mode: GPU 5 at half compute speed delays the whole step via TP and DP */
	struct job j;
	make_job(&j, 2, 2, 4, 4);
	struct mini m = { .micro = 4, .gemm_flops = 2e11 };
	struct sim_plan_source src = { &m, mini_build, mini_roles };
	struct sim_options full = { .full = true };
	struct trace t1, t2;
	struct sim_stats s1, s2;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, sim_run_plans(&j, &full, &src, &t1, &s1, &err), TW_OK);
	j.cluster.n_stragglers = 1;
	j.cluster.stragglers[0].index = 5;
	j.cluster.stragglers[0].compute_scale = 0.5;
	j.cluster.stragglers[0].link_scale = 1.0;
	CHECK_EQ_INT(T, sim_run_plans(&j, &full, &src, &t2, &s2, &err), TW_OK);
	CHECK(T, s2.step_ns > s1.step_ns + 4 * 600000);
	/* the trace keeps GPU 5's group peers beside it, so the analysis names it (it arrives
	 * last at its collectives); without a straggler, none is named */
	struct prof_analysis a;
	CHECK_EQ_INT(T, prof_analyze(&t2, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.straggler_rank, 5);
	CHECK(T, a.straggler_colls > 0);
	CHECK_EQ_INT(T, prof_analyze(&t1, &a, &err), TW_OK);
	CHECK(T, a.straggler_rank == -1 || a.straggler_ns < 1000);
	trace_release(&t1);
	trace_release(&t2);
}

static int64_t mini_step(struct job *j, struct mini *m, bool full, struct tw_err *err)
{
	struct sim_plan_source src = { m, mini_build, mini_roles };
	struct sim_options o = { .full = full };
	struct trace t;
	struct sim_stats st = { 0 };
	if (sim_run_plans(j, &o, &src, &t, &st, err) != TW_OK)
		return -1;
	trace_release(&t);
	return st.step_ns;
}

static void set_straggler(struct job *j, int i, bool by_node, int which, double compute,
			  double link, enum cluster_links links)
{
	struct cluster_straggler *g = &j->cluster.stragglers[i];
	g->by_node = by_node;
	g->index = which;
	g->compute_scale = compute;
	g->link_scale = link;
	g->links = links;
	if (j->cluster.n_stragglers < i + 1)
		j->cluster.n_stragglers = i + 1;
}

static int64_t mini_run(struct job *j, struct mini *m, bool full, bool *ran_full)
{
	struct sim_plan_source src = { m, mini_build, mini_roles };
	struct sim_options o = { .full = full };
	struct trace t;
	struct sim_stats st = { 0 };
	struct tw_err err = { 0 };
	if (sim_run_plans(j, &o, &src, &t, &st, &err) != TW_OK)
		return -1;
	trace_release(&t);
	*ran_full = st.full;
	return st.step_ns;
}

static void test_engine_straggler_node_links(struct test_ctx *T)
{
	/* TP 2 in-node, DP 8 over 4 nodes of 4 GPUs: the 256 MiB DP all-reduce crosses the NICs */
	struct job j;
	struct mini m = { .micro = 2, .gemm_flops = 2e11 };
	bool full = false;
	make_job(&j, 2, 1, 8, 4);
	int64_t base = mini_run(&j, &m, false, &full);
	CHECK(T, base > 0 && !full);

	/* a straggler without --full runs in full mode (no representative stands for it) */
	set_straggler(&j, 0, true, 1, 1.0, 0.25, CLUSTER_LINKS_NIC);
	int64_t nic = mini_run(&j, &m, false, &full);
	CHECK(T, full);
	/* node 1's NICs at 1/4: the ring through it runs at 1/4 (the all-reduce ≈ 10 ms → 40 ms) */
	CHECK(T, nic > base + 20000000);

	/* a node's compute straggler is the same as each of its GPUs listed */
	make_job(&j, 2, 1, 8, 4);
	set_straggler(&j, 0, true, 1, 0.5, 1.0, CLUSTER_LINKS_ALL);
	int64_t by_node = mini_run(&j, &m, false, &full);
	make_job(&j, 2, 1, 8, 4);
	for (int g = 4; g < 8; g++)
		set_straggler(&j, g - 4, false, g, 0.5, 1.0, CLUSTER_LINKS_ALL);
	int64_t by_gpu = mini_run(&j, &m, false, &full);
	CHECK(T, by_node > base);
	CHECK_EQ_INT(T, by_node, by_gpu);
	/* overlapping entries multiply: node 1 at 0.5 and GPU 5 at 0.5 is GPU 5 at 0.25 */
	make_job(&j, 2, 1, 8, 4);
	set_straggler(&j, 0, true, 1, 0.5, 1.0, CLUSTER_LINKS_ALL);
	set_straggler(&j, 1, false, 5, 0.5, 1.0, CLUSTER_LINKS_ALL);
	int64_t both = mini_run(&j, &m, false, &full);
	make_job(&j, 2, 1, 8, 4);
	set_straggler(&j, 0, false, 4, 0.5, 1.0, CLUSTER_LINKS_ALL);
	set_straggler(&j, 1, false, 5, 0.25, 1.0, CLUSTER_LINKS_ALL);
	set_straggler(&j, 2, false, 6, 0.5, 1.0, CLUSTER_LINKS_ALL);
	set_straggler(&j, 3, false, 7, 0.5, 1.0, CLUSTER_LINKS_ALL);
	CHECK_EQ_INT(T, both, mini_run(&j, &m, false, &full));
	CHECK(T, both > by_node);

	/* one node (TP 2 x DP 2): no traffic crosses a NIC, so a slow NIC changes nothing, a slow
	 * NVLink port slows the TP and DP all-reduces */
	make_job(&j, 2, 1, 2, 4);
	int64_t one = mini_run(&j, &m, true, &full);
	set_straggler(&j, 0, false, 1, 1.0, 0.1, CLUSTER_LINKS_NIC);
	CHECK_EQ_INT(T, mini_run(&j, &m, false, &full), one);
	j.cluster.stragglers[0].links = CLUSTER_LINKS_NVLINK;
	CHECK(T, mini_run(&j, &m, false, &full) > one);
	j.cluster.stragglers[0].links = CLUSTER_LINKS_PCIE;
	CHECK_EQ_INT(T, mini_run(&j, &m, false, &full), one);

	/* a node outside the job */
	make_job(&j, 2, 1, 8, 4);
	set_straggler(&j, 0, true, 4, 0.5, 1.0, CLUSTER_LINKS_ALL);
	CHECK_EQ_INT(T, mini_run(&j, &m, false, &full), -1);
}

static void test_engine_host_dispatch(struct test_ctx *T)
{
	/* one GPU, tiny kernels: the host thread issues fc1 (a GEMM: 3 framework ops), dp_ar (a
	 * collective: 2) and other (3) at 100 us per framework op, so "other" cannot start
	 * before 800 us although the GPU work takes nanoseconds */
	struct job j;
	struct tw_err err = { 0 };
	make_job(&j, 1, 1, 1, 8);
	struct mini m = { .micro = 1, .gemm_flops = 1e6 };
	int64_t fast = mini_step(&j, &m, false, &err);
	CHECK(T, fast > 0 && fast < 1000);
	j.strat.host_op_us = 100;
	int64_t bound = mini_step(&j, &m, false, &err);
	CHECK(T, bound >= 800000 && bound < 801000);
	/* large kernels: the host runs ahead; only the first GEMM waits for its issue */
	m.gemm_flops = 1.56e12;
	CHECK_EQ_INT(T, mini_step(&j, &m, false, &err), 300000 + 20000000);
	/* Megatron's sync after each p2p batch: the host waits there and cannot run ahead of
	 * the pipeline, so the step grows; symmetric and full mode still agree to the nanosecond */
	make_job(&j, 2, 2, 4, 4);
	m = (struct mini){ .micro = 4, .gemm_flops = 2e9 };
	j.strat.host_op_us = 20;
	j.strat.framework = STRAT_DEEPSPEED;
	int64_t nosync = mini_step(&j, &m, false, &err);
	j.strat.framework = STRAT_MEGATRON;
	j.strat.schedule = STRAT_SCHED_1F1B;
	j.strat.vp = 1;
	int64_t sync = mini_step(&j, &m, false, &err), sync_full = mini_step(&j, &m, true, &err);
	CHECK(T, nosync > 0 && sync > nosync);
	CHECK_EQ_INT(T, sync, sync_full);
	/* a micro-batch's blocking input copy: the host waits until the GPU has run everything
	 * before it, so the next GEMM (3 framework ops, 300 us) is issued only then and the GPU
	 * idles for that long; a plain copy lets the host run ahead. The input copy also costs
	 * 4 framework ops (the .to() calls) instead of 1: 300 us more before the first GEMM. */
	make_job(&j, 1, 1, 1, 8);
	j.strat.framework = STRAT_DEEPSPEED;
	j.strat.host_op_us = 100;
	m = (struct mini){ .micro = 2, .gemm_flops = 1.56e12, .batch_in = 1 };
	int64_t ahead = mini_step(&j, &m, false, &err);
	m.batch_in = 2;
	int64_t held = mini_step(&j, &m, false, &err), held_full = mini_step(&j, &m, true, &err);
	printf("#   2 micro-batches of 10 ms: %lld ns with plain input copies, %lld with blocking ones\n",
	       (long long)ahead, (long long)held);
	CHECK(T, ahead > 30000000 && held >= ahead + 600000 && held < ahead + 610000);
	CHECK_EQ_INT(T, held, held_full);
	/* a copy whose stream the host synchronizes (one framework op): the host waits for it,
	 * so the second micro-batch's GEMM is issued 300 us after the first GEMM ends */
	m.batch_in = 3;
	int64_t synced = mini_step(&j, &m, false, &err);
	CHECK(T, synced >= ahead + 300000 && synced < ahead + 310000);
	CHECK_EQ_INT(T, synced, mini_step(&j, &m, true, &err));
}

static void test_engine_errors(struct test_ctx *T)
{
	struct job j;
	make_job(&j, 2, 2, 4, 4);
	struct mini m = { .micro = 4, .gemm_flops = 2e11 };
	struct sim_plan_source src = { &m, mini_build, mini_roles };
	struct sim_options o = { .max_events = 10 };
	struct trace t;
	struct sim_stats s;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, sim_run_plans(&j, &o, &src, &t, &s, &err), TW_ERR_LIMIT);
	CHECK_STR_CONTAINS(T, err.msg, "--max-events 10");
	trace_release(&t);
	/* a send nobody receives: a clear deadlock message, not a hang */
	m.unmatched = true;
	o.max_events = 0;
	tw_err_clear(&err);
	CHECK_EQ_INT(T, sim_run_plans(&j, &o, &src, &t, &s, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "deadlocked");
	trace_release(&t);
	/* a link of zero bandwidth */
	m.unmatched = false;
	j.cluster.node.nvlink_GBps = 0;
	tw_err_clear(&err);
	CHECK_EQ_INT(T, sim_run_plans(&j, &o, &src, &t, &s, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "zero bandwidth");
	trace_release(&t);
}

/* Two stages that swap messages in crossed order: stage 0 sends A then receives C, stage 1
 * computes, sends C, then receives A. A send that releases its stream (Megatron's batched
 * isend) lets stage 0 post the receive of C at once; a blocking one (DeepSpeed's p2p.send,
 * PLAN_F_BLOCKING) holds the stream until A is received, which stage 1 posts only after C:
 * the engine reports the deadlock that DeepSpeed would hit. */
static enum tw_result crossed_build(void *ctx, const struct job *j, int64_t rank, struct plan *p,
				    struct tw_err *err)
{
	const bool *blocking = ctx;
	(void)j, (void)err;
	memset(p, 0, sizeof(*p));
	p->rank = rank;
	int64_t peer = 1 - rank;
	uint32_t last = UINT32_MAX;
	if (rank == 1) {
		last = push(p, PLAN_COMPUTE, PLAN_STREAM_COMPUTE, "work", NULL, 0);
		p->ops[last].u.compute.kernel = PLAN_K_GEMM;
		p->ops[last].u.compute.dtype = TW_BF16;
		p->ops[last].u.compute.flops = 1.56e12; /* 10 ms */
	}
	for (int k = 0; k < 2; k++) {
		bool send = k == 0;
		uint32_t o = push(p, PLAN_P2P, PLAN_STREAM_P2P, send ? "send" : "recv", &last,
				  last == UINT32_MAX ? 0 : 1);
		p->ops[o].flags = send ? PLAN_F_SEND | (*blocking ? PLAN_F_BLOCKING : 0) : PLAN_F_BLOCKING;
		p->ops[o].u.p2p.peer = peer;
		p->ops[o].u.p2p.bytes = 1 << 20;
		p->ops[o].u.p2p.seq = send == (rank == 0) ? 0 : 1; /* A: seq 0, C: seq 1 */
		if (rank == 1)
			last = o;
	}
	uint32_t g = push(p, PLAN_COMPUTE, PLAN_STREAM_COMPUTE, "after", &p->ops[p->nops - 1].id, 1);
	p->ops[g].u.compute.kernel = PLAN_K_GEMM;
	p->ops[g].u.compute.dtype = TW_BF16;
	p->ops[g].u.compute.flops = 1.56e11;
	return TW_OK;
}

static int64_t two_roles(void *ctx, const struct job *j, int64_t *reps, int64_t *w, int64_t n)
{
	(void)ctx, (void)j;
	for (int64_t s = 0; s < 2 && s < n; s++)
		reps[s] = s, w[s] = 1;
	return 2;
}

static void test_engine_blocking_send(struct test_ctx *T)
{
	struct job j;
	make_job(&j, 1, 2, 1, 8);
	bool blocking = false;
	struct sim_plan_source src = { &blocking, crossed_build, two_roles };
	struct sim_options o = { 0 };
	struct trace t;
	struct sim_stats s;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, sim_run_plans(&j, &o, &src, &t, &s, &err), TW_OK);
	CHECK(T, s.step_ns > 10000000); /* stage 0 waited for C behind stage 1's 10 ms */
	trace_release(&t);
	blocking = true;
	tw_err_clear(&err);
	CHECK_EQ_INT(T, sim_run_plans(&j, &o, &src, &t, &s, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "deadlocked");
	trace_release(&t);
}

/* The PCIe link of a GPU, one link each way: an H2D and a D2H copy at once do not slow each
 * other; a D2H copy and the DP all-reduce that leaves through the NIC (across the same PCIe
 * switch) do. Two GPUs on two nodes; each rank runs the ops `what` names from t = 0. */
enum { PC_H2D = 1, PC_D2H = 2, PC_AR = 4 };
static enum tw_result pcie_build(void *ctx, const struct job *j, int64_t rank, struct plan *p,
				 struct tw_err *err)
{
	const int *what = ctx;
	(void)j, (void)err;
	memset(p, 0, sizeof(*p));
	p->rank = rank;
	if (*what & PC_H2D) {
		uint32_t c = push(p, PLAN_COPY, PLAN_STREAM_COPY_IN, "h2d", NULL, 0);
		p->ops[c].u.copy.dir = PLAN_H2D;
		p->ops[c].u.copy.bytes = 240 << 20;
	}
	if (*what & PC_D2H) {
		uint32_t c = push(p, PLAN_COPY, PLAN_STREAM_COPY_OUT, "d2h", NULL, 0);
		p->ops[c].u.copy.dir = PLAN_D2H;
		p->ops[c].u.copy.bytes = 240 << 20;
	}
	if (*what & PC_AR) {
		uint32_t a = push(p, PLAN_COLL, PLAN_STREAM_COMM, "dp_ar", NULL, 0);
		p->ops[a].u.coll.coll = PLAN_ALL_REDUCE;
		p->ops[a].u.coll.group = JOB_GROUP_DP;
		p->ops[a].u.coll.bytes = 240 << 20;
	}
	return TW_OK;
}

/* The step time of the plans src builds (full: every rank). */
static int64_t src_step(struct test_ctx *T, struct job *j, struct sim_plan_source src, bool full)
{
	struct sim_options o = { .full = full };
	struct trace t;
	struct sim_stats s;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, sim_run_plans(j, &o, &src, &t, &s, &err), TW_OK);
	trace_release(&t);
	return s.step_ns;
}

static int64_t pcie_step(struct test_ctx *T, struct job *j, int what)
{
	return src_step(T, j, (struct sim_plan_source){ &what, pcie_build, two_roles }, true);
}

static void test_engine_pcie_duplex(struct test_ctx *T)
{
	struct job j;
	make_job(&j, 1, 1, 2, 1); /* DP 2 over two nodes: the all-reduce crosses the NICs */
	int64_t h2d = pcie_step(T, &j, PC_H2D), d2h = pcie_step(T, &j, PC_D2H);
	int64_t ar = pcie_step(T, &j, PC_AR);
	int64_t both = pcie_step(T, &j, PC_H2D | PC_D2H), with_ar = pcie_step(T, &j, PC_D2H | PC_AR);
	printf("#   240 MiB: H2D %lld ns, D2H %lld, both %lld; all-reduce %lld, with the D2H %lld\n",
	       (long long)h2d, (long long)d2h, (long long)both, (long long)ar, (long long)with_ar);
	CHECK_EQ_INT(T, h2d, d2h);
	CHECK_EQ_INT(T, both, h2d); /* full duplex: neither waits for the other */
	/* sharing the up direction: the pair takes longer than either alone, and no longer than
	 * the two one after the other */
	CHECK(T, with_ar > (ar > d2h ? ar : d2h) + (ar < d2h ? ar : d2h) / 4);
	CHECK(T, with_ar <= ar + d2h);
}

/* Leaf uplinks are links too: each GPU's share of its leaf's uplinks (its NIC share over the
 * oversubscription) carries what its collectives send out of the leaf. A ring over 4 nodes,
 * one per leaf, at 2:1 takes twice its non-blocking time alone (the analytic slowdown), and
 * two such rings at once on each GPU share the uplink: together twice as long again, though
 * the NICs alone would carry both at that rate. Within one leaf the oversubscription does
 * nothing. Every rank runs both all-reduces from t = 0 on two streams. */
static enum tw_result uplink_build(void *ctx, const struct job *j, int64_t rank, struct plan *p,
				   struct tw_err *err)
{
	const int *n = ctx;
	(void)j, (void)err;
	memset(p, 0, sizeof(*p));
	p->rank = rank;
	for (int i = 0; i < *n; i++) {
		uint32_t a = push(p, PLAN_COLL, i ? PLAN_STREAM_COMM_TP : PLAN_STREAM_COMM, "dp_ar",
				  NULL, 0);
		p->ops[a].u.coll.coll = PLAN_ALL_REDUCE;
		p->ops[a].u.coll.group = JOB_GROUP_DP;
		p->ops[a].u.coll.bytes = 1 << 30;
		p->ops[a].u.coll.seq = i;
	}
	return TW_OK;
}

static int64_t one_role(void *ctx, const struct job *j, int64_t *reps, int64_t *w, int64_t n)
{
	(void)ctx, (void)j;
	if (n > 0)
		reps[0] = 0, w[0] = j->gpus;
	return 1;
}

static int64_t uplink_step(struct test_ctx *T, struct job *j, int n, double oversub, int radix,
			   bool full)
{
	j->cluster.net.oversubscription = oversub;
	j->cluster.net.leaf_radix = radix;
	return src_step(T, j, (struct sim_plan_source){ &n, uplink_build, one_role }, full);
}

/* Stage 0 sends 1 GiB to stage 1 (a node each). */
static enum tw_result p2p_build(void *ctx, const struct job *j, int64_t rank, struct plan *p,
				struct tw_err *err)
{
	(void)ctx, (void)j, (void)err;
	memset(p, 0, sizeof(*p));
	p->rank = rank;
	uint32_t o = push(p, PLAN_P2P, PLAN_STREAM_P2P, rank ? "recv" : "send", NULL, 0);
	p->ops[o].flags = rank ? PLAN_F_BLOCKING : PLAN_F_SEND;
	p->ops[o].u.p2p.peer = 1 - rank;
	p->ops[o].u.p2p.bytes = 1 << 30;
	return TW_OK;
}

static int64_t p2p_step(struct test_ctx *T, struct job *j, double oversub, int radix)
{
	j->cluster.net.oversubscription = oversub;
	j->cluster.net.leaf_radix = radix;
	return src_step(T, j, (struct sim_plan_source){ NULL, p2p_build, two_roles }, true);
}

static void test_engine_leaf_uplinks(struct test_ctx *T)
{
	struct job j;
	make_job(&j, 1, 1, 4, 1); /* DP 4, one GPU per node */
	j.cluster.net.topology = CLUSTER_TOPO_RAIL_FAT_TREE;
	int64_t flat1 = uplink_step(T, &j, 1, 1.0, 1, true), flat2 = uplink_step(T, &j, 2, 1.0, 1, true);
	int64_t over1 = uplink_step(T, &j, 1, 2.0, 1, true), over2 = uplink_step(T, &j, 2, 2.0, 1, true);
	int64_t leaf2 = uplink_step(T, &j, 2, 2.0, 4, true);
	printf("#   1 GiB all-reduce over 4 nodes, 1 per leaf: %lld ns non-blocking (two at once %lld), "
	       "%lld at 2:1 (two at once %lld); 4 per leaf at 2:1, two at once %lld\n",
	       (long long)flat1, (long long)flat2, (long long)over1, (long long)over2, (long long)leaf2);
	CHECK(T, over1 > 1.8 * (double)flat1);
	CHECK(T, flat2 < 1.2 * (double)over1);           /* the NICs carry both at once */
	CHECK(T, over2 > 1.8 * (double)over1);           /* the uplink carries one at a time */
	CHECK_EQ_INT(T, leaf2, flat2);                   /* no uplink inside a leaf */
	CHECK_EQ_INT(T, uplink_step(T, &j, 2, 2.0, 1, false), over2); /* symmetric == full */
	/* a pipeline send to the next node: with a node per leaf it leaves the leaf and runs at
	 * the uplink share; with 8 nodes per leaf, 1 in 8 such sends leaves (the same share for
	 * every rank, as for a ring's edges), which fits the uplink at 2:1 */
	struct job k;
	make_job(&k, 1, 2, 1, 1);
	k.cluster.net.topology = CLUSTER_TOPO_RAIL_FAT_TREE;
	int64_t p_flat = p2p_step(T, &k, 1.0, 1), p_over = p2p_step(T, &k, 2.0, 1);
	int64_t p_leaf = p2p_step(T, &k, 2.0, 8);
	printf("#   1 GiB send to the next node: %lld ns, %lld at 2:1 across leaves, %lld with 8 "
	       "nodes per leaf\n", (long long)p_flat, (long long)p_over, (long long)p_leaf);
	CHECK(T, p_over > 1.8 * (double)p_flat);
	CHECK_EQ_INT(T, p_leaf, p_flat);
}

/* One collective's time (µs) with a cluster field at value x, then at y: a --set what-if. */
static void what_if_us(struct test_ctx *T, struct cluster *c, double *field, double x, double y,
		       const char *op, double bytes, int64_t ranks, double *tx, double *ty)
{
	struct sim_coll_result r;
	struct tw_err err = { 0 };
	*field = x;
	CHECK_EQ_INT(T, sim_collective(c, op, bytes, ranks, NULL, 0, NULL, &r, &err), TW_OK);
	*tx = r.time_us;
	*field = y;
	CHECK_EQ_INT(T, sim_collective(c, op, bytes, ranks, NULL, 0, NULL, &r, &err), TW_OK);
	*ty = r.time_us;
}

/* The cluster's link latencies move every step over those links by their difference from
 * what NCCL's tables assume (net.latency_us 5, nvlink_latency_us 1), never below zero. */
static void test_nccl_latency_delta(struct test_ctx *T)
{
	struct nccl_comm c = h100_comm(16, 8);
	struct nccl_result r;
	c.net_lat_us = 10.0; /* e.g. a 15 µs fabric: 30 of the 254 ring steps cross nodes */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 4096, NCCL_RING, NCCL_LL, &r));
	CHECK_NEAR(T, r.lat_us, 311.6 + 30 * 10.0, 1e-9);
	c = h100_comm(1, 8);
	c.intra_lat_us = 0.5; /* 14 NVLink steps */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_RING, NCCL_LL, &r));
	CHECK_NEAR(T, r.lat_us, 15.0 + 14 * 0.5, 1e-9);
	c.intra_lat_us = -5.0; /* faster than the table: the step costs nothing, not less */
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_RING, NCCL_LL, &r));
	CHECK_NEAR(T, r.lat_us, 6.6, 1e-9);
	/* through the cluster file: --set net.latency_us slows a 4-node small all-reduce */
	struct job j;
	make_job(&j, 1, 1, 32, 8);
	double a, b;
	what_if_us(T, &j.cluster, &j.cluster.net.latency_us, 5.0, 25.0, "all_reduce", 65536.0, 32,
		   &a, &b);
	printf("#   64 KiB all-reduce on 4 nodes: %.1f µs at 5 µs network latency, %.1f at 25\n", a, b);
	CHECK(T, b > a + 20.0);
}

/* The latency a net plugin reports (AWS's EFA plugin: 35 or 75 µs) enters NCCL's model as
 * graph.latencyInter: once per inter-node step, twice with Simple; the ring's plateau factor
 * scales it with the rest. 16 nodes of 8: a ring all-reduce has 30 inter-node steps, a tree
 * 2 log2(16) = 8 levels. */
static void test_nccl_plugin_latency(struct test_ctx *T)
{
	struct nccl_comm c = h100_comm(16, 8);
	struct nccl_result r0, r1;
	const double L = 35.0;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 4096, NCCL_RING, NCCL_LL, &r0));
	c.plugin_lat_us = L;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 4096, NCCL_RING, NCCL_LL, &r1));
	CHECK_NEAR(T, r1.lat_us - r0.lat_us, 30 * L, 1e-9);
	c.plugin_lat_us = 0;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 26, NCCL_RING, NCCL_SIMPLE, &r0));
	c.plugin_lat_us = L;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 26, NCCL_RING, NCCL_SIMPLE, &r1));
	CHECK_NEAR(T, r1.lat_us - r0.lat_us, 30 * 2 * L * 1.4, 1e-9);
	c.plugin_lat_us = 0;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_TREE, NCCL_LL128, &r0));
	c.plugin_lat_us = L;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_TREE, NCCL_LL128, &r1));
	CHECK_NEAR(T, r1.lat_us - r0.lat_us, 8 * L, 1e-9);
	/* send/recv across nodes: one Simple step, so twice; within a node nothing */
	c.plugin_lat_us = 0;
	nccl_p2p(&c, 1 << 20, false, &r0);
	c.plugin_lat_us = L;
	nccl_p2p(&c, 1 << 20, false, &r1);
	CHECK_NEAR(T, r1.lat_us - r0.lat_us, 2 * L, 1e-9);
	nccl_alltoall(&c, 1 << 20, &r1);
	c.plugin_lat_us = 0;
	nccl_alltoall(&c, 1 << 20, &r0);
	CHECK_NEAR(T, r1.lat_us - r0.lat_us, 2 * L, 1e-9);
	nccl_p2p(&c, 1 << 20, true, &r0);
	c.plugin_lat_us = L;
	nccl_p2p(&c, 1 << 20, true, &r1);
	CHECK_NEAR(T, r1.lat_us, r0.lat_us, 1e-12);
	/* one node: no inter-node step, nothing changes */
	c = h100_comm(1, 8);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_RING, NCCL_SIMPLE, &r0));
	c.plugin_lat_us = L;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1 << 20, NCCL_RING, NCCL_SIMPLE, &r1));
	CHECK_NEAR(T, r1.lat_us, r0.lat_us, 1e-12);
	/* through the cluster file: --set net.plugin_latency_us=35 on a 4-node 16 MiB all-reduce */
	struct job j;
	make_job(&j, 1, 1, 32, 8);
	double a, b;
	what_if_us(T, &j.cluster, &j.cluster.net.plugin_latency_us, 0.0, L, "all_reduce", 16777216.0,
		   32, &a, &b);
	printf("#   16 MiB all-reduce on 4 nodes: %.1f µs with IB's plugin latency 0, %.1f at 35\n", a, b);
	CHECK(T, b >= a + 4 * L - 1e-6); /* at least a tree's 2 log2(4) levels, each 35 µs more */
}

/* NCCL_ALGO / NCCL_PROTO: the tuner's argmin over what they leave; Tree on one node (the
 * chain) only when the ring is taken away; nothing left is no prediction (NCCL fails) */
static void test_nccl_algo_mask(struct test_ctx *T)
{
	struct nccl_comm c = h100_comm(1, 8);
	struct nccl_result all, r;
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, 1 << 20, -1, &all));
	CHECK(T, all.algo != NCCL_TREE);
	c.no_protos = 7 & ~(1u << NCCL_SIMPLE);
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, 1 << 20, -1, &r));
	CHECK_EQ_INT(T, r.proto, NCCL_SIMPLE);
	CHECK(T, r.time_us >= all.time_us);
	c.no_protos = 0;
	c.no_algos = 15 & ~(1u << NCCL_TREE);
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, 1 << 20, -1, &r));
	CHECK_EQ_INT(T, r.algo, NCCL_TREE);
	CHECK(T, r.time_us > all.time_us);
	CHECK(T, !nccl_predict(&c, PLAN_ALL_GATHER, 1 << 20, -1, &r)); /* Tree is all-reduce only */
	struct nccl_result ring;
	c.no_algos = 15 & ~(1u << NCCL_RING);
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, 1 << 20, -1, &ring));
	CHECK_EQ_INT(T, ring.algo, NCCL_RING);
	c.no_algos = 15 & ~((1u << NCCL_TREE) | (1u << NCCL_RING)); /* the ring there: no chain */
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, 1 << 20, -1, &r));
	CHECK_EQ_INT(T, r.algo, NCCL_RING);
	CHECK_NEAR(T, r.time_us, ring.time_us, 1e-9);
	c.no_algos = 15 & ~(1u << NCCL_NVLS);
	c.no_protos = 7 & ~(1u << NCCL_LL); /* NVLS is Simple only */
	CHECK(T, !nccl_predict(&c, PLAN_ALL_REDUCE, 1 << 20, -1, &r));
	/* LL128 over PCIe: off, unless NCCL_PROTO names it */
	c = h100_comm(1, 8);
	c.nvlink = false;
	c.nvls = false;
	c.no_protos = 7 & ~(1u << NCCL_LL128);
	CHECK(T, !nccl_predict(&c, PLAN_ALL_REDUCE, 1 << 20, -1, &r));
	c.forced_protos = 1u << NCCL_LL128;
	CHECK(T, nccl_predict(&c, PLAN_ALL_REDUCE, 1 << 20, -1, &r));
	CHECK_EQ_INT(T, r.proto, NCCL_LL128);
}

/* Transformer Engine's userbuffers (tp_comm_overlap): n - 1 ring copies over NVLink at the
 * GPU's NVLink rate, one hop latency each; only all-gather / reduce-scatter inside a node.
 * A 58.7 MB SP all-gather on 8 H100s: 7/8 of it at 370.8 GB/s + 7 µs, about half of what
 * NCCL's ring (with its protocol and fill) takes for the same size. */
static void test_nccl_userbuffers(struct test_ctx *T)
{
	struct nccl_comm c = h100_comm(1, 8);
	struct nccl_result ub, nccl;
	double S = 4096.0 * 7168 * 2;
	CHECK(T, nccl_userbuffers(&c, PLAN_ALL_GATHER, S, &ub));
	CHECK_NEAR(T, ub.time_us, 7.0 + 7.0 / 8.0 * S / 370.8e3, 1e-9);
	CHECK_NEAR(T, ub.nvl_bytes, 7.0 / 8.0 * S, 1e-6);
	CHECK(T, nccl_predict(&c, PLAN_ALL_GATHER, S, -1, &nccl));
	printf("#   58.7 MB all-gather on 8 H100: userbuffers %.0f µs, NCCL %.0f µs\n", ub.time_us,
	       nccl.time_us);
	CHECK(T, ub.time_us < nccl.time_us);
	CHECK(T, nccl_userbuffers(&c, PLAN_REDUCE_SCATTER, S, &ub));
	CHECK(T, !nccl_userbuffers(&c, PLAN_ALL_REDUCE, S, &ub));
	c = h100_comm(2, 8); /* a TP group across nodes: NCCL's model */
	CHECK(T, !nccl_userbuffers(&c, PLAN_ALL_GATHER, S, &ub));
}

/* Leaf uplinks with oversubscription o: all-to-all sends (N - r)/N of a node's bytes up, so it
 * slows by o (N - r)/N; a ring sends one edge in r up and slows only when o > r. */
static void test_nccl_oversubscription(struct test_ctx *T)
{
	struct nccl_comm c = h100_comm(64, 8);
	c.gpu_net_GBps = 50.0 * 0.94;
	struct nccl_result flat, over;
	nccl_alltoall(&c, 1e9, &flat);
	c.leaf_nodes = 32, c.oversub = 4.0;
	nccl_alltoall(&c, 1e9, &over);
	double d_flat = flat.time_us - flat.lat_us, d_over = over.time_us - over.lat_us;
	CHECK_NEAR(T, d_over / d_flat, 4.0 * 32.0 / 64.0, 1e-9);
	/* the ring: 4/32 of the uplink, no change; with 2 nodes per leaf, 2x the network time */
	c = h100_comm(64, 8);
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1e10, NCCL_RING, NCCL_SIMPLE, &flat));
	c.leaf_nodes = 32, c.oversub = 4.0;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1e10, NCCL_RING, NCCL_SIMPLE, &over));
	CHECK_NEAR(T, over.time_us, flat.time_us, 1e-9);
	c.leaf_nodes = 2;
	CHECK(T, nccl_eval(&c, PLAN_ALL_REDUCE, 1e10, NCCL_RING, NCCL_SIMPLE, &over));
	/* the ring's bus bandwidth was min(NVLink, NICs) = NVLink; now half the NICs */
	CHECK_NEAR(T, over.algbw_GBps, flat.algbw_GBps * (c.inter_GBps / 2.0) / c.intra_GBps, 1e-9);
	/* through the cluster file: --set net.oversubscription on a 16-node all-to-all */
	struct job j;
	make_job(&j, 1, 1, 128, 8);
	j.cluster.net.topology = CLUSTER_TOPO_RAIL_FAT_TREE;
	j.cluster.net.leaf_radix = 4;
	double a, b;
	what_if_us(T, &j.cluster, &j.cluster.net.oversubscription, 1.0, 2.0, "all_to_all", 1e9, 128,
		   &a, &b);
	printf("#   1 GB all-to-all on 16 nodes, 4 per leaf: %.0f µs non-blocking, %.0f at 2:1\n", a, b);
	CHECK(T, b > 1.4 * a);
}

/* Across nodes the channels follow the NICs the communicator uses (NCCL's search, one per NIC,
 * doubled when the NIC carries >= 25 GB/s): a ring with one GPU per node on 400 Gb/s NICs runs
 * on 2 channels, 8 GPUs per node on 8 such NICs on 16; 200 Gb/s NICs get one channel each.
 * Fewer channels stream a large message in bigger chunks: the same bandwidth, less fill. */
/* make_job's node as a DGX H100's: Hopper, Gen5 x16 (the NIC's path carries a 400 Gb/s
 * NIC's 50 GB/s) */
static void make_h100_job(struct job *j)
{
	make_job(j, 1, 1, 8, 8);
	j->cluster.gpu.arch_sm = 90;
	j->cluster.node.pcie_GBps = 53.0;
	j->cluster.net.nic_gbps = 400;
}

static void test_nccl_channels_from_nics(struct test_ctx *T)
{
	struct job j;
	make_h100_job(&j);
	struct nccl_comm one, full, node;
	nccl_comm_from_cluster(&j.cluster, 48, 48, &one);  /* DP of TP 8: one GPU per node */
	nccl_comm_from_cluster(&j.cluster, 64, 8, &full);
	nccl_comm_from_cluster(&j.cluster, 8, 1, &node);
	CHECK_EQ_INT(T, one.nch, 2);
	CHECK_EQ_INT(T, full.nch, 16);
	CHECK_EQ_INT(T, node.nch, 16); /* one node: NVLink channels, no NIC */
	j.cluster.net.nic_gbps = 200;
	nccl_comm_from_cluster(&j.cluster, 64, 8, &full);
	CHECK_EQ_INT(T, full.nch, 8);
	/* 160 MB reduce-scatter over 48 nodes: the bandwidth term is the NIC's either way, the
	 * fill (47 steps of one chunk per channel) shrinks with the bigger per-channel rate */
	struct nccl_result r2, r16;
	struct nccl_comm many = one;
	many.nch = 16;
	CHECK(T, nccl_eval(&one, PLAN_REDUCE_SCATTER, 160e6, NCCL_RING, NCCL_SIMPLE, &r2));
	CHECK(T, nccl_eval(&many, PLAN_REDUCE_SCATTER, 160e6, NCCL_RING, NCCL_SIMPLE, &r16));
	CHECK_NEAR(T, r2.algbw_GBps, r16.algbw_GBps, 1e-9);
	CHECK(T, r2.fill_us < 0.5 * r16.fill_us);
}

/* GPUDirect RDMA crosses the GPU's PCIe link: NICs faster than it give the tuner no more
 * bandwidth than the link carries, so a faster NIC never makes the choice worse than the flows
 * then run it (an 800 Gb/s NIC behind Gen5 x16 runs at ~53 GB/s, as a 400 Gb/s one nearly) */
static void test_nccl_nic_behind_pcie(struct test_ctx *T)
{
	struct job j;
	make_h100_job(&j);
	j.cluster.net.nic_eff = 1.0;
	struct nccl_comm c400, c800;
	j.cluster.net.nic_gbps = 400;
	nccl_comm_from_cluster(&j.cluster, 16, 2, &c400);
	j.cluster.net.nic_gbps = 800;
	nccl_comm_from_cluster(&j.cluster, 16, 2, &c800);
	CHECK_NEAR(T, c400.inter_GBps, 8 * 50.0, 1e-9);
	CHECK_NEAR(T, c800.inter_GBps, 8 * 53.0, 1e-9);
	CHECK_EQ_INT(T, c800.nch, c400.nch); /* NCCL's speed array at the path's rate */
}

/* NCCL's p2p plan (sim/nccl.c, "send/recv and all-to-all"): a transfer's channels grow with
 * its size, each moving one ring channel's share of NVLink; across nodes a peer gets its NICs'
 * channels at NCCL's 14 GB/s each, halved as the ranks outgrow the channels */
static void test_nccl_p2p_channels(struct test_ctx *T)
{
	struct job j;
	make_h100_job(&j);
	j.cluster.node.nvlink_GBps = 370.8;
	j.cluster.net.nic_eff = 0.94;
	const double ch = 370.8 / 16; /* GB/s a channel moves over NVLink */
	struct nccl_comm node8, pair, cross2, dp8n, dp16n;
	nccl_comm_from_cluster(&j.cluster, 8, 1, &node8);
	nccl_comm_from_cluster(&j.cluster, 2, 1, &pair);
	struct nccl_result r;
	/* nccl-tests sendrecv on one node (8 ranks): 4 channels up to 64 MiB (parts up to 16 MiB),
	 * then 8, 16, 32 channels: the staircase of the measured B200 sweeps */
	const double sizes[] = { 16 * TW_MIB, 64 * TW_MIB, 128 * TW_MIB, 512 * TW_MIB };
	const double rate[] = { 4 * ch, 4 * ch, 8 * ch, 370.8 }; /* 32 x 23.2 > 370.8: NVLink */
	for (int i = 0; i < 4; i++) {
		nccl_p2p(&node8, sizes[i], true, &r);
		CHECK_NEAR(T, r.algbw_GBps, rate[i], 1e-9);
		CHECK(T, r.fill_us > 0 && r.time_us > sizes[i] / (1000.0 * r.algbw_GBps));
	}
	/* a pipeline's two-rank communicator on one node: 16 channels at once, all of NVLink */
	nccl_p2p(&pair, 64 * TW_MIB, true, &r);
	CHECK_NEAR(T, r.algbw_GBps, 370.8, 1e-9);
	/* across two nodes, one GPU each: 4 channels for a 400 Gb/s NIC (ceil(50/14)), so the
	 * NIC binds as before */
	nccl_comm_from_cluster(&j.cluster, 2, 2, &cross2);
	CHECK_EQ_INT(T, cross2.net_peer_ch, 4);
	nccl_p2p(&cross2, 64 * TW_MIB, false, &r);
	CHECK_NEAR(T, r.algbw_GBps, cross2.gpu_net_GBps, 1e-9);
	/* a 200 Gb/s NIC needs 2 channels; 8 nodes of 8 keep them, 16 nodes halve them to one:
	 * 14 GB/s, below the NIC */
	j.cluster.net.nic_gbps = 200;
	nccl_comm_from_cluster(&j.cluster, 64, 8, &dp8n);
	nccl_comm_from_cluster(&j.cluster, 128, 16, &dp16n);
	CHECK_EQ_INT(T, dp8n.net_peer_ch, 2);
	nccl_p2p(&dp8n, 64 * TW_MIB, false, &r);
	CHECK_NEAR(T, r.algbw_GBps, dp8n.gpu_net_GBps, 1e-9);
	nccl_p2p(&dp16n, 64 * TW_MIB, false, &r);
	CHECK_NEAR(T, r.algbw_GBps, 14.0, 1e-9);
	/* all-to-all on one node: 8 MiB a peer runs on 4 channels each, 28 at once (NVLink binds);
	 * 128 KiB a peer on 2 each, 14 at once (the channels bind) */
	struct nccl_result a;
	nccl_alltoall(&node8, 64 * TW_MIB, &a);
	CHECK_NEAR(T, 64 * TW_MIB * 7 / 8 / (1000.0 * (a.time_us - a.lat_us - a.fill_us)), 370.8, 1e-6);
	nccl_alltoall(&node8, 1 * TW_MIB, &a);
	CHECK_NEAR(T, 1 * TW_MIB * 7 / 8 / (1000.0 * (a.time_us - a.lat_us - a.fill_us)), 14 * ch, 1e-6);
	/* 4-GPU nodes: an all-to-all's rounds share a block per 4 (gcd(8, 4)), so 8 ranks on 2
	 * nodes run 2 blocks of 4 channels, 8 x 4/7 of them toward the other node at 14 GB/s
	 * (64 GB/s): the NIC binds, not the channels */
	j.cluster.node.gpus = 4;
	j.cluster.net.nics_per_node = 4;
	j.cluster.net.nic_gbps = 400;
	struct nccl_comm two4;
	nccl_comm_from_cluster(&j.cluster, 8, 2, &two4);
	nccl_alltoall(&two4, 256 * TW_MIB, &a);
	CHECK_NEAR(T, 256 * TW_MIB * 4 / 8 / (1000.0 * (a.time_us - a.lat_us - a.fill_us)),
		   two4.gpu_net_GBps, 1e-6);
	/* Blackwell: a channel is 1/32 of NVLink, so a two-rank send on 16 gets half of it */
	j.cluster.node.gpus = 8;
	j.cluster.net.nics_per_node = 8;
	j.cluster.gpu.arch_sm = 100;
	j.cluster.node.nvlink_GBps = 721.8;
	nccl_comm_from_cluster(&j.cluster, 2, 1, &pair);
	nccl_p2p(&pair, 64 * TW_MIB, true, &r);
	CHECK_NEAR(T, r.algbw_GBps, 721.8 / 2, 1e-9);
	nccl_comm_from_cluster(&j.cluster, 8, 1, &node8);
	nccl_p2p(&node8, 512 * TW_MIB, true, &r);
	CHECK_NEAR(T, r.algbw_GBps, 721.8, 1e-9);
	/* NVLink mesh and PCIe nodes keep the link-rate model */
	j.cluster.gpu.arch_sm = 90;
	j.cluster.node.nvlink_GBps = 370.8;
	j.cluster.node.intra = CLUSTER_INTRA_NVLINK_MESH;
	nccl_comm_from_cluster(&j.cluster, 8, 1, &node8);
	nccl_p2p(&node8, 16 * TW_MIB, true, &r);
	CHECK_NEAR(T, r.algbw_GBps, 370.8, 1e-9);
	CHECK_NEAR(T, r.fill_us, 0, 0);
}

static void test_collective_cases(struct test_ctx *T)
{
	struct job j;
	make_job(&j, 1, 1, 8, 8);
	struct sim_coll_result r;
	struct tw_err err = { 0 };
	/* 8 x A100 ring all-reduce of 16 GiB: close to the 240 GB/s NVLink figure */
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 17179869184.0, 8, "ring", 0, NULL, &r, &err), TW_OK);
	CHECK(T, r.busbw_GBps > 230 && r.busbw_GBps < 240);
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 1e6, 12, NULL, 0, NULL, &r, &err), TW_ERR_INVALID);
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "gather", 1e6, 8, NULL, 0, NULL, &r, &err), TW_ERR_INVALID);
	/* a rooted reduce (nccl-tests reduce_perf) runs NCCL's rooted ring, as broadcast does:
	 * busbw = algbw, and at 1 GiB near the NVLink figure */
	struct sim_coll_result b;
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "reduce", 1073741824.0, 8, NULL, 0, NULL, &r, &err), TW_OK);
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "broadcast", 1073741824.0, 8, NULL, 0, NULL, &b, &err), TW_OK);
	CHECK_NEAR(T, r.busbw_GBps, r.algbw_GBps, 1e-9);
	CHECK_NEAR(T, r.time_us, b.time_us, 1e-9);
	CHECK(T, r.busbw_GBps > 150 && r.busbw_GBps < 240);
	/* a blocking call timed alone: its host dispatch adds to the time, the bandwidths follow */
	struct sim_coll_result h;
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 8388608.0, 8, NULL, 0, NULL, &r, &err), TW_OK);
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 8388608.0, 8, NULL, 20, NULL, &h, &err), TW_OK);
	CHECK_NEAR(T, h.nccl_us, r.time_us, 1e-9);
	CHECK_NEAR(T, h.time_us, r.time_us + 20, 1e-9);
	CHECK_NEAR(T, h.busbw_GBps * h.time_us, r.busbw_GBps * r.time_us, 1e-6);
	CHECK_NEAR(T, h.algbw_GBps, 8388608.0 / (h.time_us * 1e3), 1e-9);
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 8388608.0, 8, NULL, -1, NULL, &h, &err), TW_ERR_INVALID);
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", INFINITY, 8, NULL, 0, NULL, &h, &err), TW_ERR_INVALID);
	/* a size no message has still ends (log2 of it is not a halving loop) */
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 1e300, 16, NULL, 0, NULL, &h, &err), TW_OK);
	CHECK(T, h.time_us > 0 && isfinite(h.time_us));
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "sendrecv", 8388608.0, 8, NULL, 20, NULL, &h, &err), TW_OK);
	CHECK_NEAR(T, h.busbw_GBps, 8388608.0 / (h.time_us * 1e3), 1e-9);
}

/* the benchmark's NCCL_ALGO / NCCL_PROTO: the tuner picks among what they leave, and a call
 * they leave nothing for is refused, as NCCL refuses it */
static void test_collective_nccl_env(struct test_ctx *T)
{
	struct job j;
	make_job(&j, 1, 1, 8, 8);
	struct sim_coll_result def, r;
	struct tw_err err = { 0 };
	struct sim_nccl_env env = { 0 };
	char why[192];
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 8388608.0, 8, NULL, 0, &env, &def, &err), TW_OK);
	CHECK_STR(T, def.proto, "LL128"); /* the tuner's choice on one A100 node at 8 MiB */
	CHECK(T, strat_nccl_list("Simple", true, &env.no_protos, &env.named_protos, why, sizeof(why)));
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 8388608.0, 8, NULL, 0, &env, &r, &err), TW_OK);
	CHECK_STR(T, r.proto, "Simple");
	CHECK_STR(T, r.algo, "ring");
	CHECK(T, r.time_us > def.time_us); /* the tuner took the faster one */
	/* Tree alone on one node: NCCL's chain */
	CHECK(T, strat_nccl_list("Tree", false, &env.no_algos, &env.named_algos, why, sizeof(why)));
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 8388608.0, 8, NULL, 0, &env, &r, &err), TW_OK);
	CHECK_STR(T, r.algo, "tree");
	/* a case's own algorithm reading gives way to the environment's */
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_reduce", 8388608.0, 8, "ring", 0, &env, &r, &err), TW_OK);
	CHECK_STR(T, r.algo, "tree");
	/* an all-gather has no tree: NCCL fails the call */
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "all_gather", 8388608.0, 8, NULL, 0, &env, &r, &err), TW_ERR_INVALID);
	CHECK(T, strstr(err.msg, "No algorithm/protocol available") != NULL);
	/* send/recv does not read them */
	struct sim_coll_result p0, p1;
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "sendrecv", 8388608.0, 8, NULL, 0, NULL, &p0, &err), TW_OK);
	CHECK_EQ_INT(T, sim_collective(&j.cluster, "sendrecv", 8388608.0, 8, NULL, 0, &env, &p1, &err), TW_OK);
	CHECK_NEAR(T, p0.time_us, p1.time_us, 0);
	/* NCCL's syntax: '^' excludes, an empty name or an unknown one is refused */
	CHECK(T, strat_nccl_list("^LL,LL128", true, &env.no_protos, &env.named_protos, why, sizeof(why)));
	CHECK_EQ_INT(T, (int)env.named_protos, 0);
	CHECK(T, !strat_nccl_list("ring,", false, &env.no_algos, &env.named_algos, why, sizeof(why)));
	CHECK(T, !strat_nccl_list("Fast", true, &env.no_protos, &env.named_protos, why, sizeof(why)));
	CHECK(T, strstr(why, "Fast") != NULL);
}

int main(void)
{
	struct test_ctx T = { 0 };
	TEST_RUN(&T, test_heap_tie_break);
	TEST_RUN(&T, test_heap_order_reproducible);
	TEST_RUN(&T, test_heap_interleaved);
	TEST_RUN(&T, test_heap_past_event);
	TEST_RUN(&T, test_nccl_latency_table);
	TEST_RUN(&T, test_nccl_latency_delta);
	TEST_RUN(&T, test_nccl_plugin_latency);
	TEST_RUN(&T, test_nccl_nvls_tree);
	TEST_RUN(&T, test_nccl_algo_mask);
	TEST_RUN(&T, test_nccl_bandwidth);
	TEST_RUN(&T, test_nccl_pat);
	TEST_RUN(&T, test_nccl_reduce);
	TEST_RUN(&T, test_maxmin_by_hand);
	TEST_RUN(&T, test_engine_single_gemm);
	TEST_RUN(&T, test_engine_symmetric_equals_full);
	TEST_RUN(&T, test_engine_straggler);
	TEST_RUN(&T, test_engine_communicators);
	TEST_RUN(&T, test_engine_straggler_node_links);
	TEST_RUN(&T, test_engine_host_dispatch);
	TEST_RUN(&T, test_engine_errors);
	TEST_RUN(&T, test_engine_blocking_send);
	TEST_RUN(&T, test_engine_pcie_duplex);
	TEST_RUN(&T, test_nccl_oversubscription);
	TEST_RUN(&T, test_engine_leaf_uplinks);
	TEST_RUN(&T, test_nccl_channels_from_nics);
	TEST_RUN(&T, test_nccl_nic_behind_pcie);
	TEST_RUN(&T, test_nccl_userbuffers);
	TEST_RUN(&T, test_nccl_p2p_channels);
	TEST_RUN(&T, test_collective_cases);
	TEST_RUN(&T, test_collective_nccl_env);
	return test_done(&T);
}
