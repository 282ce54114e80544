/* NCCL's collective cost model as its tuner computes it (src/graph/tuning.cc, NCCL 2.30;
 * constants and formulas transcribed in reference/cost-models.md §1), with three changes
 * where the tuner's numbers are known not to be what the kernels achieve (docs/simulator.md):
 *  - the graph (channels, per-channel bandwidth) comes from the cluster file, not NCCL's search;
 *  - NVLS and Tree bandwidths come from the bytes each GPU moves (NVLS: S + S/n per direction
 *    through the switch; Tree: S per node across two nodes, 2S beyond), not the tuner's ratios;
 *  - a pipeline-fill term: the first chunk has to cross every step before the ring streams
 *    (NVLS: two iterations of its kernel's scatter / reduce / gather pipeline);
 *  - NVLSTree is taken when NCCL_ALGO names it, not by the default argmin.
 * Times in µs, bandwidths in GB/s (1e9 B/s), sizes in bytes. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "sim_int.h"

/* §1.2 constant tables: [algo][proto] with algo TREE, RING, NVLS, PAT, NVLS_TREE and proto LL,
 * LL128, SIMPLE */
static const double base_lat[NCCL_NUM_ALGOS][NCCL_NUM_PROTOS] = {
	{ 6.8, 14.0, 8.4 }, { 6.6, 14.0, 8.4 }, { 0, 0, 0 }, { 8.0, 8.0, 8.0 }, { 0, 0, 0 } };
enum { HW_NVLINK = 0, HW_PCI, HW_NET };
static const double hw_lat[3][NCCL_NUM_ALGOS][NCCL_NUM_PROTOS] = {
	{ { 0.6, 1.25, 4.0 }, { 0.6, 1.9, 3.4 }, { 0, 0, 25 }, { 0, 0, 4.0 }, { 0, 0, 25 } },
	{ { 1.0, 1.9, 4.0 }, { 1.0, 2.5, 5.7 }, { 0, 0, 0 }, { 0, 0, 4.0 }, { 0, 0, 0 } },
	{ { 5.0, 8.5, 14 }, { 2.7, 4.0, 14.0 }, { 0, 0, 18 }, { 0, 0, 14 }, { 0, 0, 20.9 } } };
/* [cc index][min(nNodes,3)-1]; cc index 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell */
static const double ll_max_bw[4][3] = {
	{ 39.0, 39.0, 20.4 }, { 87.7, 22.5, 19.0 }, { 141.0, 45.0, 35.0 }, { 282.0, 90.0, 70.0 } };
static const double per_ch_ring_ll128[4] = { 20, 20, 36.7, 40 };
static const double per_ch_tree_ll128[4][3] = {
	{ 20, 20, 20 }, { 20, 20, 20 }, { 36.7, 36.7, 29.0 }, { 55.6, 31.67, 20.0 } };
static const double per_ch_tree[4][3] = {
	{ 26.5, 18.5, 10.0 }, { 24.0, 23.6, 17.8 }, { 38.7, 41.4, 36.0 }, { 70.0, 42.8, 24.0 } };
static const double per_ch_nvls_tree[4][3] = {
	{ 26.5, 18.5, 10.0 }, { 24.0, 23.6, 17.8 }, { 0, 57.7, 45.5 }, { 0, 96.0, 80.0 } };
static const double nvls_eff[4] = { 0, 0, 0.85, 0.74 };
/* treeCorrectionFactor[proto][log2(nBytes/64)], 64 B .. 512 MiB (Tree reads 23 of them,
 * NVLSTree on Blackwell x86 hosts 24) */
static const double tree_corr[NCCL_NUM_PROTOS][24] = {
	{ 1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0 },
	{ 1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0 },
	{ .9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9 } };
/* Bytes one step of a channel moves (§1.8): LL 64 KiB of payload per step slot, LL128 the
 * 4.9 MB buffer over 8 steps and 2 slices, Simple 512 KiB; NVLS chunks are 128 KiB. */
static const double step_bytes[NCCL_NUM_PROTOS] = { 65536.0, 4915200.0 / 16.0, 524288.0 };
#define NVLS_CHUNK 131072.0
/* The links NCCL's latency tables were measured on, as the cluster files state latency
 * (end-to-end per message, µs): InfiniBand 5, NVLink 1, PCIe 1.5 (topologies/dgx-*.json). A
 * cluster whose links are slower or faster adds the difference to every step over them. */
#define REF_NET_US 5.0
#define REF_NVLINK_US 1.0
#define REF_PCIE_US 1.5
/* node.nvls_GBps is the busbw of an NVLS all-reduce on this many GPUs (nccl-tests -g 8) */
#define NVLS_REF_GPUS 8.0
/* send/recv and all-to-all (NCCL 2.30's p2p defaults; below, "send/recv and all-to-all") */
#define P2P_NVL_CHUNK 524288.0 /* NCCL_P2P_NVL_CHUNKSIZE: a communicator within one node */
#define P2P_NET_CHUNK 131072.0 /* NCCL_P2P_NET_CHUNKSIZE: every peer once it spans nodes */
#define P2P_NET_CH_GBPS 14.0   /* NCCL_P2P_PER_CHANNEL_NET_BW: what NCCL counts a channel
				* carries over the network when it sizes a peer's channels */
#define P2P_NODE_CHANNELS 32   /* p2pnChannels on an NVSwitch node: the power of two above its
				* collective channels (the search's 16, doubled by ncclTopoPostset);
				* B200's measured send/recv staircase (4 channels for 8 ranks up to
				* 64 MiB) says 32 there too */
#define P2P_MAX_CHANNELS 64    /* MAXCHANNELS */
#define P2P_ROUND_GROUP 8      /* NCCL_MAX_DEV_WORK_P2P_PER_BATCH: across nodes the peers of 8
				* consecutive rounds share one block of channels */

const char *nccl_algo_name(int a)
{
	static const char *const n[] = { "tree", "ring", "nvls", "pat", "nvlstree" };
	return a >= 0 && a < NCCL_NUM_ALGOS ? n[a] : "?";
}

const char *nccl_proto_name(int p)
{
	static const char *const n[] = { "LL", "LL128", "Simple" };
	return p >= 0 && p < NCCL_NUM_PROTOS ? n[p] : "?";
}

bool nccl_algo_parse(const char *s, int *out)
{
	for (int a = 0; a < NCCL_NUM_ALGOS; a++)
		if (strcasecmp(s, nccl_algo_name(a)) == 0) {
			*out = a;
			return true;
		}
	return false;
}

static int cc_index(int cc)
{
	return cc >= 100 ? 3 : cc >= 90 ? 2 : cc >= 80 ? 1 : 0;
}

/* floor(log2 x) for x >= 1, 0 below; a non-finite x (a size no message has) gives 1024 rather
 * than halving forever */
static int log2i(double x)
{
	if (!(x >= 2.0))
		return 0;
	if (!isfinite(x))
		return 1024;
	int e;
	frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
	return e - 1;
}

/* NCCL's NVLS settings for a communicator (transport/nvls.cc, ncclNvlsTuning): channels 16
 * on Hopper; on Blackwell 24 on one node, 32 across nodes; NVLS chunk 128 KiB; NVLSTree's
 * largest chunk 128 KiB, 64 KiB from 4 nodes. Blackwell across nodes then follows NCCL's SM100
 * table by NIC speed and GPUs per node (the GPU-NIC path taken as a PCIe switch, as on DGX
 * nodes). */
struct nvls_tuning {
	double channels, chunk, tree_max_chunk; /* bytes for the chunks */
};

static struct nvls_tuning nvls_tuning(int cc, int64_t nodes, int64_t ppn, double nic_GBps)
{
	struct nvls_tuning t = { cc < 100 ? 16.0 : nodes > 1 ? 32.0 : 24.0, NVLS_CHUNK, 0 };
	if (cc >= 100 && nodes > 1) {
		if (nodes == 2 && nic_GBps >= 48.0) {
			t.channels = 32, t.tree_max_chunk = 131072.0;
			if (ppn <= 4)
				t.chunk = t.tree_max_chunk = 262144.0;
			else if (ppn >= 16 || (ppn <= 8 && nic_GBps < 96.0))
				t.tree_max_chunk = 65536.0;
		} else if (nic_GBps >= 96.0) {
			if (ppn <= 8)
				t.channels = 24, t.chunk = t.tree_max_chunk = 262144.0;
			else
				t.channels = 32, t.tree_max_chunk = ppn < 32 ? 131072.0 : 65536.0;
		} else if (nic_GBps >= 48.0) {
			t.channels = 24, t.tree_max_chunk = 65536.0; /* 128 KiB off a PCIe switch */
		}
	}
	if (t.tree_max_chunk == 0)
		t.tree_max_chunk = nodes >= 4 ? 65536.0 : t.chunk;
	return t;
}

/* NVLS heads on a node: each GPU heads one, up to NCCL's NCCL_MAX_NVLS_ARITY (32; an NVL72
 * domain has more GPUs than heads) */
static double nvls_heads(int ppn)
{
	return fmin((double)ppn, 32.0);
}

/* NCCL's chunk ladders (enqueue.cc, NCCL 2.30): in order, each rung takes the chunk down to
 * its size while the call has fewer than its count of chunks per channel and head, so
 * mid-size calls run smaller chunks and a shorter pipeline fill. conc: channels x heads. */
struct chunk_rung {
	double count, bytes;
};
static double chunk_ladder(double S, double conc, double chunk, const struct chunk_rung *r, int n)
{
	for (int i = 0; i < n; i++)
		if (S < r[i].count * conc * chunk && chunk > r[i].bytes)
			chunk = r[i].bytes;
	return chunk;
}

/* single-node NVLS all-reduce: the NVLS chunk, 64 KiB below 64, 32 KiB below 8, 16 KiB below 2 */
static double nvls_chunk(double S, const struct nvls_tuning *t, double heads)
{
	static const struct chunk_rung r[] = { { 64, 65536 }, { 8, 32768 }, { 2, 16384 } };
	return chunk_ladder(S, t->channels * heads, t->chunk, r, 3);
}

/* NVLSTree: the lesser of the NVLS chunk and its own largest, then 256 KiB below 32, 128 KiB
 * below 16, 64 KiB below 4, 32 KiB below 1 */
static double nvls_tree_chunk(double S, const struct nvls_tuning *t, double heads)
{
	static const struct chunk_rung r[] = { { 32, 262144 }, { 16, 131072 }, { 4, 65536 }, { 1, 32768 } };
	return chunk_ladder(S, t->channels * heads, fmin(t->chunk, t->tree_max_chunk), r, 4);
}

double nccl_size(enum plan_coll c, double bytes, int64_t n)
{
	return (c == PLAN_ALL_GATHER || c == PLAN_REDUCE_SCATTER) ? bytes * (double)n : bytes;
}

double nccl_busbw_factor(enum plan_coll c, int64_t n)
{
	if (n <= 1)
		return 0;
	switch (c) {
	case PLAN_ALL_REDUCE:
		return 2.0 * (double)(n - 1) / (double)n;
	case PLAN_ALL_GATHER:
	case PLAN_REDUCE_SCATTER:
	case PLAN_ALL_TO_ALL:
		return (double)(n - 1) / (double)n;
	default:
		return 1.0;
	}
}

/* The per-channel speed NCCL's search settles on for a NIC of line rate nic_GBps: the highest
 * entry of its inter-node speed array (search.cc) that the NIC carries. */
static double nccl_inter_speed(int cc, double nic_GBps)
{
	static const double pre90[] = { 48, 30, 28, 24, 20, 18, 15, 12 };
	static const double sm90[] = { 48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12 };
	static const double sm100[] = { 96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3 };
	const double *a = cc >= 100 ? sm100 : cc >= 90 ? sm90 : pre90;
	size_t n = cc >= 100 ? sizeof(sm100) / sizeof(*sm100) : cc >= 90 ? sizeof(sm90) / sizeof(*sm90)
									 : sizeof(pre90) / sizeof(*pre90);
	for (size_t i = 0; i < n; i++)
		if (a[i] <= nic_GBps)
			return a[i];
	return a[n - 1];
}

/* A node's ring channels: NCCL runs about two per NVLink-class GPU port group; Blackwell
 * doubles it */
static int node_ring_channels(int cc)
{
	return cc >= 100 ? 32 : 16;
}

void nccl_comm_env(struct nccl_comm *cm, const struct sim_nccl_env *env)
{
	cm->no_algos = env->no_algos;
	cm->named_algos = env->named_algos;
	cm->no_protos = env->no_protos;
	cm->forced_protos = env->named_protos;
}

void nccl_comm_from_cluster(const struct cluster *c, int64_t nranks, int64_t nnodes,
			    struct nccl_comm *out)
{
	memset(out, 0, sizeof(*out));
	out->cc = sim_gpu_cc(c);
	out->nranks = nranks;
	out->nnodes = nnodes < 1 ? 1 : nnodes;
	out->ppn = (nranks + out->nnodes - 1) / out->nnodes;
	out->nvlink = c->node.intra == CLUSTER_INTRA_NVSWITCH || c->node.intra == CLUSTER_INTRA_NVLINK_MESH;
	out->intra_GBps = out->nvlink ? c->node.nvlink_GBps : c->node.pcie_GBps;
	out->nvls = c->node.nvls && out->cc >= 90;
	out->nvls_GBps = out->nvls ? c->node.nvls_GBps : 0;
	out->amd_cpu = c->node.cpu_vendor == CLUSTER_CPU_AMD;
	out->x86_cpu = c->node.cpu_vendor != CLUSTER_CPU_ARM;
	out->nch = node_ring_channels(out->cc);
	/* rail-aligned: ppn GPUs of this communicator on a node reach ppn/gpus of its NICs */
	int gpn = c->node.gpus > 0 ? c->node.gpus : 1;
	double nics = (double)c->net.nics_per_node * (double)out->ppn / (double)gpn;
	if (nics < 1.0)
		nics = c->net.nics_per_node > 0 ? 1.0 : 0.0;
	double line = c->net.nic_gbps / 8.0, pcie = c->node.pcie_GBps;
	double nic = line * (c->net.nic_eff > 0 ? c->net.nic_eff : 1.0);
	/* GPUDirect RDMA crosses the GPU's PCIe link and the NIC's own x16 slot: NCCL's search
	 * takes the GPU-NIC path's bandwidth, the slowest of the three (the flows load the GPU's
	 * link too); path: one NIC's line rate as the GPU reaches it */
	double path = pcie > 0 && pcie < line ? pcie : line;
	out->inter_GBps = nics * (pcie > 0 && pcie < nic ? pcie : nic);
	if (pcie > 0 && out->inter_GBps > pcie * (double)out->ppn)
		out->inter_GBps = pcie * (double)out->ppn;
	/* across nodes NCCL's search puts one channel on each NIC the communicator uses at the
	 * fastest speed of its array the NIC carries (§1.7), then doubles them when that speed is
	 * >= 25 GB/s (ncclTopoDupChannels): a ring with one GPU per node runs on 1-2 channels */
	if (out->nnodes > 1 && nics >= 1.0) {
		double sp = nccl_inter_speed(out->cc, path);
		int nch = (int)nics * (sp >= 25.0 ? 2 : 1);
		if (nch < out->nch)
			out->nch = nch;
	}
	out->gpu_net_GBps = nic * (double)c->net.nics_per_node / (double)gpn;
	out->nic_line_GBps = line;
	/* the NICs local to a GPU and their bandwidth as the GPU reaches them (PCIe-capped) */
	int gpu_nics = c->net.nics_per_node >= gpn ? c->net.nics_per_node / gpn : c->net.nics_per_node > 0;
	double local_bw = (double)gpu_nics * path;
	if (pcie > 0 && local_bw > pcie)
		local_bw = pcie;
	int need = (int)ceil(local_bw / P2P_NET_CH_GBPS);
	out->net_peer_ch = gpu_nics > need ? gpu_nics : need;
	out->nvswitch = c->node.intra == CLUSTER_INTRA_NVSWITCH;
	/* a rail-optimized leaf takes one port of leaf_radix nodes (one leaf per rail); a plain
	 * fat-tree leaf takes every NIC of a node */
	out->oversub = c->net.oversubscription > 1.0 ? c->net.oversubscription : 1.0;
	if (c->net.topology == CLUSTER_TOPO_SINGLE_SWITCH || c->net.leaf_radix <= 0)
		out->leaf_nodes = 0;
	else if (c->net.topology == CLUSTER_TOPO_RAIL_FAT_TREE || c->net.nics_per_node <= 1)
		out->leaf_nodes = c->net.leaf_radix;
	else
		out->leaf_nodes = c->net.leaf_radix / c->net.nics_per_node > 1
					  ? c->net.leaf_radix / c->net.nics_per_node : 1;
	out->net_lat_us = c->net.latency_us - REF_NET_US;
	out->plugin_lat_us = c->net.plugin_latency_us;
	out->intra_lat_us = cluster_intra_latency_us(c) - (out->nvlink ? REF_NVLINK_US : REF_PCIE_US);
}

/* How much slower the network runs for a communicator whose nodes span several leaves, when
 * a fraction f of each node's inter-node bytes leaves its leaf: the leaf's uplinks carry
 * leaf_nodes x f x B against leaf_nodes x B / oversub (reference/cost-models.md §3.5). Rings
 * and NCCL's trees connect neighbouring nodes: one edge in leaf_nodes leaves the leaf. */
static double uplink_frac(const struct nccl_comm *cm, bool all_to_all)
{
	int64_t N = cm->nnodes, r = cm->leaf_nodes;
	if (r <= 0 || N <= r)
		return 0.0;
	return all_to_all ? (double)(N - r) / (double)N : 1.0 / (double)r;
}

static double uplink_slowdown(const struct nccl_comm *cm, bool all_to_all)
{
	return fmax(1.0, cm->oversub * uplink_frac(cm, all_to_all));
}

/* a per-step latency of NCCL's tables moved by the cluster's difference, never below 0 */
static double step_lat(double table_us, double delta_us)
{
	return fmax(0.0, table_us + delta_us);
}

/* The net plugin's latency on one inter-node step (NCCL's graph.latencyInter): once, and a
 * second time with Simple ("flush extra latency"). Send/recv and all-to-all, which NCCL's tuner
 * does not model, pay it as the Simple steps they are. */
static double plugin_lat(const struct nccl_comm *cm, int proto)
{
	return cm->plugin_lat_us * (proto == NCCL_SIMPLE ? 2.0 : 1.0);
}

/* ---- send/recv and all-to-all: NCCL's p2p plan (NCCL 2.30: graph/paths.cc
 * ncclTopoGetNchannels and ncclTopoComputeP2pChannels, enqueue.cc scheduleP2pTasksToPlan and
 * addP2pToPlan, init.cc ncclP2pSchedule). NCCL cuts one transfer into parts over a number of
 * channels that grows with its size, and a channel is one thread block: what one block moves
 * is the limit until the link is. ---- */
struct p2p_plan {
	int per_peer;   /* p2pnChannelsPerPeer: a transfer's most channels */
	int min_ch;     /* a transfer's least (so that every peer of a round finds channels) */
	int total;      /* p2pnChannels */
	double chunk;   /* p2pChunkSize, bytes */
	double nvl_ch;  /* GB/s one channel moves over NVLink: a ring channel's share */
	double net_ch;  /* GB/s one channel moves to a NIC */
};

static int pow2_up(int x)
{
	int p = 1;
	while (p < x && p < P2P_MAX_CHANNELS)
		p <<= 1;
	return p;
}

/* NCCL's plan for this communicator; false where twin keeps the link-rate model (NVLink mesh
 * and PCIe nodes, whose per-peer paths differ pair by pair, and hosts without GPUs) */
static bool p2p_plan(const struct nccl_comm *cm, struct p2p_plan *p)
{
	if (!cm->nvswitch || cm->intra_GBps <= 0)
		return false;
	/* a node's ring channels fill its NVLink, so one moves the NVLink bandwidth over their
	 * count */
	p->nvl_ch = cm->intra_GBps / (double)node_ring_channels(cm->cc);
	p->net_ch = fmin(P2P_NET_CH_GBPS, p->nvl_ch);
	if (cm->nnodes <= 1) {
		/* an NVSwitch peer gets 2 channels per NVLink, more than the 32 there are */
		p->chunk = P2P_NVL_CHUNK;
		p->total = p->per_peer = P2P_NODE_CHANNELS;
	} else {
		/* computeBuffSizes: twice the chunk on Grace (ARM) hosts of Blackwell GPUs */
		p->chunk = !cm->x86_cpu && cm->cc >= 100 ? 2.0 * P2P_NET_CHUNK : P2P_NET_CHUNK;
		/* in all, the collective channels doubled by ncclTopoPostset, to a power of two;
		 * per peer the least over all peers, a network peer's (nccl_comm_from_cluster) */
		p->total = pow2_up(2 * cm->nch);
		p->per_peer = pow2_up(cm->net_peer_ch > 0 ? cm->net_peer_ch : 1);
		/* so that the peers of a round group fit the channels at once */
		int64_t groups = (cm->nranks + P2P_ROUND_GROUP - 1) / P2P_ROUND_GROUP;
		while (p->per_peer > 1 && (int64_t)p->per_peer * groups > p->total)
			p->per_peer /= 2;
	}
	if (p->per_peer > p->total)
		p->per_peer = p->total;
	p->min_ch = p->per_peer;
	while (p->min_ch > 1 && (int64_t)p->min_ch * cm->nranks > p->total)
		p->min_ch /= 2;
	return true;
}

/* channels one transfer of B bytes is cut over (addP2pToPlan): as few as its parts allow, at
 * least min_ch, doubled while a part is larger than the most a channel takes in one go */
static int p2p_channels(const struct p2p_plan *p, bool multi_node, double B)
{
	double min_part = multi_node ? p->chunk / 2.0 : p->chunk / 8.0;
	double max_part = multi_node ? p->chunk : p->chunk * 32.0;
	int k = (int)fmin((double)p->min_ch, fmax(1.0, ceil(B / min_part)));
	while (fmax(min_part, B / k) > max_part && k <= p->per_peer / 2)
		k *= 2;
	return k;
}

void nccl_alltoall(const struct nccl_comm *cm, double S, struct nccl_result *out)
{
	int64_t n = cm->nranks, ppn = cm->ppn;
	memset(out, 0, sizeof(*out));
	out->algo = NCCL_RING;
	out->proto = NCCL_SIMPLE;
	if (n <= 1 || S <= 0)
		return;
	double intra = S * (double)(ppn - 1) / (double)n, inter = S * (double)(n - ppn) / (double)n;
	double nvl_bw = cm->intra_GBps, net_bw = cm->gpu_net_GBps, fill = 0;
	struct p2p_plan p;
	if (p2p_plan(cm, &p)) {
		/* every peer's transfer gets its channels: on one node each round its own block,
		 * so all n - 1 run at once on up to p2pnChannels; across nodes a round group of
		 * 8 peers shares one block, the local ranks' group and one per other node */
		double B = S / (double)n;
		int k = p2p_channels(&p, cm->nnodes > 1, B);
		if (cm->nnodes <= 1) {
			double active = fmin((double)p.total, (double)(n - 1) * k);
			nvl_bw = fmin(nvl_bw, active * p.nvl_ch);
			/* the last step: the sender's copy into the FIFO, then the receiver's out */
			fill = fmin(B / k, p.chunk) / (1000.0 * p.nvl_ch);
		} else {
			/* the blocks in use, shared by the rounds: local peers' and remote ones'. A
			 * block serves a group of 8 rounds, fewer when a node's ranks are not a
			 * multiple of 8 (ncclP2pSchedule: gcd(8, ranks per node)) */
			int64_t gs = P2P_ROUND_GROUP, r = ppn;
			while (r > 0) { /* Euclid */
				int64_t t = gs % r;
				gs = r, r = t;
			}
			double groups = (double)(n / gs);
			double active = fmin((double)p.total, groups * k);
			nvl_bw = fmin(nvl_bw, active * (double)(ppn - 1) / (double)(n - 1) * p.nvl_ch);
			net_bw = fmin(net_bw, active * (double)(n - ppn) / (double)(n - 1) * p.net_ch);
		}
	}
	double t = 0;
	if (intra > 0 && nvl_bw > 0)
		t = intra / (1000.0 * nvl_bw);
	if (inter > 0 && net_bw > 0)
		t = fmax(t, inter * uplink_slowdown(cm, true) / (1000.0 * net_bw));
	int hw = cm->nnodes > 1 ? HW_NET : cm->nvlink ? HW_NVLINK : HW_PCI;
	out->lat_us = base_lat[NCCL_RING][NCCL_SIMPLE] +
		      step_lat(hw_lat[hw][NCCL_RING][NCCL_SIMPLE], hw == HW_NET ? cm->net_lat_us : cm->intra_lat_us) +
		      (hw == HW_NET ? plugin_lat(cm, NCCL_SIMPLE) : 0.0);
	out->fill_us = fill;
	out->algbw_GBps = t > 0 ? S / (1000.0 * t) : 0;
	out->time_us = out->lat_us + t + fill;
	out->busbw_GBps = S / (out->time_us * 1e3) * nccl_busbw_factor(PLAN_ALL_TO_ALL, n);
	out->nvl_bytes = intra;
	out->net_bytes = inter;
	out->up_bytes = inter * uplink_frac(cm, true);
}

void nccl_p2p(const struct nccl_comm *cm, double S, bool same_node, struct nccl_result *out)
{
	memset(out, 0, sizeof(*out));
	out->algo = NCCL_RING;
	out->proto = NCCL_SIMPLE;
	double bw = same_node ? cm->intra_GBps : cm->gpu_net_GBps, fill = 0;
	struct p2p_plan p;
	if (S > 0 && p2p_plan(cm, &p)) {
		int k = p2p_channels(&p, cm->nnodes > 1, S);
		bw = fmin(bw, (double)k * (same_node ? p.nvl_ch : p.net_ch));
		if (same_node && cm->nnodes <= 1)
			fill = fmin(S / k, p.chunk) / (1000.0 * p.nvl_ch);
	}
	int hw = !same_node ? HW_NET : cm->nvlink ? HW_NVLINK : HW_PCI;
	out->lat_us = base_lat[NCCL_RING][NCCL_SIMPLE] +
		      step_lat(hw_lat[hw][NCCL_RING][NCCL_SIMPLE], same_node ? cm->intra_lat_us : cm->net_lat_us) +
		      (same_node ? 0.0 : plugin_lat(cm, NCCL_SIMPLE));
	out->algbw_GBps = bw;
	out->fill_us = fill;
	out->time_us = out->lat_us + (bw > 0 ? S / (1000.0 * bw) : 0) + fill;
	out->busbw_GBps = S / (out->time_us * 1e3);
	if (same_node)
		out->nvl_bytes = S;
	else
		out->net_bytes = S;
}

bool nccl_userbuffers(const struct nccl_comm *cm, enum plan_coll c, double S,
		      struct nccl_result *out)
{
	memset(out, 0, sizeof(*out));
	out->algo = NCCL_RING;
	out->proto = NCCL_SIMPLE;
	int64_t n = cm->nranks;
	if (cm->nnodes > 1 || !cm->nvlink || cm->intra_GBps <= 0 ||
	    (c != PLAN_ALL_GATHER && c != PLAN_REDUCE_SCATTER))
		return false;
	if (n <= 1 || S <= 0)
		return true;
	/* each of the n - 1 steps sends one rank's chunk to the ring neighbour: the chunks stream
	 * at the GPU's NVLink rate, one hop latency per step (no protocol, no pipeline fill) */
	double f = (double)(n - 1) / (double)n;
	out->lat_us = (double)(n - 1) * step_lat(REF_NVLINK_US, cm->intra_lat_us);
	out->algbw_GBps = cm->intra_GBps / f;
	out->time_us = out->lat_us + f * S / (1000.0 * cm->intra_GBps);
	out->busbw_GBps = S / (out->time_us * 1e3) * f;
	out->nvl_bytes = f * S;
	return true;
}

/* NVLS all-reduce's algorithm bandwidth on g GPUs of a node: each GPU sends S into the switch
 * and gets S/g... in both phases, S (1 + 1/g) per direction, so algbw ∝ g/(g+1). Its scale is
 * the cluster's measured busbw on NVLS_REF_GPUS GPUs, else NVLink at the switch's efficiency;
 * never faster than the GPU's NVLink port carries those bytes (the engine's link model holds
 * the flow to it: a what-if on nvls_GBps alone must not pick NVLS for a speed the flow cannot
 * have). */
static double nvls_algbw(const struct nccl_comm *cm, int64_t g)
{
	double r = NVLS_REF_GPUS, alg;
	if (cm->nvls_GBps > 0)
		alg = cm->nvls_GBps * (r + 1.0) / (2.0 * (r - 1.0)) * (double)g / (double)(g + 1);
	else
		alg = cm->intra_GBps * nvls_eff[cc_index(cm->cc)] * (double)g / (double)(g + 1);
	if (cm->intra_GBps > 0)
		alg = fmin(alg, cm->intra_GBps * (double)g / (double)(g + 1));
	return alg;
}

bool nccl_eval(const struct nccl_comm *cm, enum plan_coll c, double S, int a, int p,
	       struct nccl_result *out)
{
	int64_t n = cm->nranks, N = cm->nnodes, ppn = cm->ppn;
	int ci = cc_index(cm->cc), i2 = (int)(N < 3 ? N : 3) - 1;
	bool ar = c == PLAN_ALL_REDUCE, agrs = c == PLAN_ALL_GATHER || c == PLAN_REDUCE_SCATTER;
	if (n <= 1 || S <= 0) {
		memset(out, 0, sizeof(*out));
		out->algo = a;
		out->proto = p;
		return a == NCCL_RING && p == NCCL_SIMPLE;
	}
	/* §1.6 filters */
	/* Tree is AllReduce only. On one node it is left out unless NCCL_ALGO takes the ring away:
	 * a deliberate departure from NCCL's tuner, which keeps the chain and may pick it in a
	 * narrow band (Tree/LL128 at a few MB on A100); the kernel-level terms here (fewer
	 * channels for a small ring, its fill) would pick it for small messages, where NCCL,
	 * whose table has neither, picks the ring. */
	if (a == NCCL_TREE && (!ar || (N == 1 && !(cm->no_algos & (1u << NCCL_RING)))))
		return false;
	if (a == NCCL_NVLS && (!cm->nvls || N > 1 || p != NCCL_SIMPLE || !(ar || agrs)))
		return false; /* multi-node NVLS needs CollNet/SHARP, which we do not model */
	if (a == NCCL_NVLS_TREE && (!cm->nvls || !ar || N == 1 || ppn < 2 || p != NCCL_SIMPLE))
		return false; /* NVLSTree: all-reduce across nodes, NVLS among a node's GPUs */
	if (a == NCCL_NVLS && agrs)
		return false; /* (AG/RS over NVLS: the tuner rarely picks it; keep the ring) */
	if (a == NCCL_PAT && (!agrs || p != NCCL_SIMPLE || N == 1 || ppn != 1 || cm->cc < 60))
		return false; /* PAT (NCCL >= 2.23): AG/RS, Simple, one GPU per node */
	/* LL128 only over NVLink, unless NCCL_PROTO names it (NCCL's protoEnable 1 skips the
	 * check) */
	if (p == NCCL_LL128 && !cm->nvlink && !(cm->forced_protos & (1u << NCCL_LL128)))
		return false;
	bool rooted = c == PLAN_BROADCAST || c == PLAN_REDUCE; /* ring only, nsteps = n (§1.6) */
	if ((rooted || c == PLAN_ALL_TO_ALL) && a != NCCL_RING)
		return false;
	if (cm->intra_GBps <= 0 || (N > 1 && cm->inter_GBps <= 0))
		return false;

	double nsteps = ar ? 2.0 * (double)(n - 1) : agrs ? (double)(n - 1) : (double)n;
	double inter = cm->inter_GBps / uplink_slowdown(cm, false);
	double total = N == 1 ? cm->intra_GBps : fmin(cm->intra_GBps, inter);
	double bw_ch = total / cm->nch;
	/* §1.6 step 5: small messages run on fewer channels (the kernel, not the tuner's table):
	 * drop channels while nBytes < nc x threads x threadThreshold */
	int nc = cm->nch;
	bool nvls = a == NCCL_NVLS || a == NCCL_NVLS_TREE;
	if (!nvls) {
		double nt = p == NCCL_LL128 ? 640 : 512;
		double thr = p == NCCL_SIMPLE ? 64 : 8;
		if (p == NCCL_LL && a == NCCL_RING)
			thr *= (double)n;
		while (nc >= 2 && S < nc * nt * thr)
			nc--;
	}
	double bus = nc * bw_ch, alg;
	if (a == NCCL_RING) {
		if (p == NCCL_LL)
			bus = fmin(ll_max_bw[N > 1 ? (cm->amd_cpu ? 1 : 0) : ci][i2] * nc / cm->nch, 0.5 * bus);
		else if (p == NCCL_LL128)
			bus = fmin(0.92 * bus, nc * per_ch_ring_ll128[ci]);
		alg = bus * (double)n / nsteps;
	} else if (a == NCCL_TREE) {
		/* across two nodes each node sends S once; beyond, 2S (double binary tree); one
		 * node: the NVLink chain */
		bus = (N == 1 ? cm->intra_GBps : fmin(cm->intra_GBps, inter * (N == 2 ? 2.0 : 1.0))) *
		      nc / cm->nch;
		bus = fmin(0.92 * bus, nc * per_ch_tree[ci][i2]);
		if (p == NCCL_LL)
			bus = fmin(bus / 3.8, ll_max_bw[N > 1 ? (cm->amd_cpu ? 1 : 0) : ci][i2] * nc / cm->nch);
		else if (p == NCCL_LL128)
			bus = fmin(bus * (N == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nc * per_ch_tree_ll128[ci][i2]);
		alg = bus * 0.5;
	} else if (a == NCCL_PAT) {
		/* the tuner charges PAT 3/4 of the ring's bus bandwidth and does not convert it
		 * to an algorithm bandwidth (§1.3) */
		alg = 0.75 * bus;
	} else if (a == NCCL_NVLS_TREE) {
		/* NVLS reduces and broadcasts within each node (the bytes of NVLS on ppn GPUs);
		 * between nodes each GPU carries 1/ppn of the data up and down a tree over its
		 * NICs: S per node across two nodes, 2S beyond, at the tree's 0.92 (as Tree
		 * above). NCCL's per-channel cap times the NVLS graph's channels, which are its heads
		 * (one per GPU, at most 32; tuning.cc), not the kernel's nvlsChannels. */
		double tree = 0.92 * inter * (N == 2 ? 1.0 : 0.5);
		double cap = nvls_heads(ppn) * per_ch_nvls_tree[ci][i2] * (double)n / nsteps;
		alg = fmin(fmin(nvls_algbw(cm, ppn), tree), cap);
	} else {
		alg = nvls_algbw(cm, n); /* NVLS AllReduce within one node */
	}
	if (alg <= 0)
		return false;

	/* §1.4 latency */
	int intra_hw = cm->nvlink ? HW_NVLINK : HW_PCI;
	double lat = base_lat[a][p];
	double intra_lat = step_lat(hw_lat[intra_hw][a][p], cm->intra_lat_us);
	double inter_lat = step_lat(ppn == 1 ? hw_lat[HW_NET][NCCL_TREE][p] : hw_lat[HW_NET][a][p], cm->net_lat_us);
	inter_lat += plugin_lat(cm, p);
	if (a == NCCL_RING) {
		if (rooted) {
			int hwa = N == 1 ? intra_hw : HW_NET;
			lat += nsteps * step_lat(hw_lat[hwa][p == NCCL_SIMPLE ? NCCL_TREE : NCCL_RING][p],
						 N == 1 ? cm->intra_lat_us : cm->net_lat_us);
		} else {
			double net_over = N > 1 ? (cm->amd_cpu ? 2.0 : 1.0) * (p == NCCL_SIMPLE ? 3 : 1) : 0;
			double il = fmax(intra_lat, net_over);
			double ninter = N == 1 ? 0 : ar ? 2.0 * (double)(N - 1) : (double)(N - 1);
			lat += (nsteps - ninter) * il + ninter * inter_lat;
		}
	} else if (a == NCCL_TREE) {
		lat += 2.0 * ((double)(ppn - 1) * intra_lat + log2i((double)N) * inter_lat);
	} else if (a == NCCL_PAT) {
		lat += log2i((double)N) * (inter_lat / 3.5) + (double)n * 2.8;
	} else if (a == NCCL_NVLS_TREE) {
		lat += intra_lat + 2.0 * log2i((double)N) * inter_lat;
	} else {
		lat = intra_lat;
	}
	/* §1.5 corrections */
	double bwe = alg;
	int ls = log2i(S / 64.0);
	if (a == NCCL_TREE && ar && S >= 64 && ls < 23)
		bwe *= tree_corr[p][ls];
	if (a == NCCL_NVLS_TREE && S >= 64 && ls < 24 && cm->cc >= 100 && cm->x86_cpu)
		bwe *= tree_corr[p][ls];
	if (a == NCCL_RING && p == NCCL_SIMPLE && N > 1 && ar && S / (cm->nch * (double)n) >= 64)
		lat *= cm->cc < 80 ? 1.9 : 1.4;

	/* pipeline fill */
	double fill;
	if (a == NCCL_NVLS) {
		/* NCCL's NVLS kernel (device/all_reduce.h) runs three warp groups at once on each
		 * channel, over iterations of one chunk per head: scatter (this GPU's chunks into the
		 * heads' buffers), reduce (its head's chunk: a multimem load-reduce and store through
		 * the switch), gather (the reduced chunks back out). A three-stage pipeline of
		 * iterations fills in two of them, each one chunk per head at the channel's share of
		 * the algorithm bandwidth. */
		struct nvls_tuning t = nvls_tuning(cm->cc, 1, ppn, cm->nic_line_GBps);
		double nch = t.channels, heads = nvls_heads(ppn);
		double it = fmin(heads * nvls_chunk(S, &t, heads), S / nch);
		fill = 2.0 * it * nch / (1000.0 * alg);
	} else if (a == NCCL_NVLS_TREE) {
		/* the same iterations through more stages: scatter, the leaf's reduce (sending up),
		 * one reduce per tree level above it up to the root, which reduces and sends down,
		 * one broadcast per level back down, gather: 3 + 2 log2(nodes) stages, filled in
		 * all but one */
		struct nvls_tuning t = nvls_tuning(cm->cc, N, ppn, cm->nic_line_GBps);
		double nch = t.channels, heads = nvls_heads(ppn);
		double it = fmin(heads * nvls_tree_chunk(S, &t, heads), S / nch);
		fill = (2.0 + 2.0 * log2i((double)N)) * it * nch / (1000.0 * alg);
	} else {
		/* the first chunk of a channel crosses every step before data streams */
		/* a ring slice is S / (channels x ranks); a tree pipelines its channel's whole share */
		double chunk = fmin(step_bytes[p], S / (nc * (a == NCCL_TREE ? 1.0 : (double)n)));
		double fill_steps = a == NCCL_TREE ? 2.0 * (log2i((double)N) + (double)ppn)
				    : a == NCCL_PAT  ? (double)log2i((double)N) /* aggregated tree levels */
						     : nsteps;
		fill = fill_steps * chunk / (1000.0 * bw_ch * (p == NCCL_LL ? 0.5 : 1.0));
	}

	out->algo = a;
	out->proto = p;
	out->lat_us = lat;
	out->algbw_GBps = bwe;
	out->fill_us = fill;
	out->time_us = lat + S / (1000.0 * bwe) + fill;
	out->busbw_GBps = S / (out->time_us * 1e3) * nccl_busbw_factor(c, n);
	/* bytes each GPU puts on its links */
	double f = nccl_busbw_factor(c, n) * S;
	if (rooted)
		f = S;
	if (nvls)
		f = S * (1.0 + 1.0 / (double)ppn);
	bool tree = a == NCCL_TREE || a == NCCL_NVLS_TREE;
	out->nvl_bytes = ppn > 1 ? f : 0;
	out->net_bytes = N > 1 ? (tree ? S * (N == 2 ? 1.0 : 2.0) : f) / (double)ppn : 0;
	out->up_bytes = out->net_bytes * uplink_frac(cm, false);
	return true;
}

bool nccl_predict(const struct nccl_comm *cm, enum plan_coll c, double S, int algo,
		  struct nccl_result *out)
{
	bool found = false;
	struct nccl_result r;
	for (int a = 0; a < NCCL_NUM_ALGOS; a++) {
		if ((algo >= 0 && a != algo) || (cm->no_algos & (1u << a)))
			continue;
		/* NVLSTree runs when asked for by name (a forced algo, NCCL_ALGO naming it), not by
		 * default: its NVLS half carries the NVLS model's optimism at medium sizes, which
		 * made the default tuner's choice worse than Tree's (docs/simulator.md) */
		if (a == NCCL_NVLS_TREE && algo != a && !(cm->named_algos & (1u << a)))
			continue;
		for (int p = 0; p < NCCL_NUM_PROTOS; p++) {
			if ((cm->no_protos & (1u << p)) || !nccl_eval(cm, c, S, a, p, &r))
				continue;
			if (!found || r.time_us < out->time_us) {
				*out = r;
				found = true;
			}
		}
	}
	return found;
}
