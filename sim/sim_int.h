/* sim internals: the event queue, the NCCL collective model, the flow network and the compute
 * cost model. Only the sim sources and the sim unit tests include this header. */
#ifndef TW_SIM_INT_H
#define TW_SIM_INT_H

#include <math.h>

#include "sim.h"

/* ---- event queue: ordered by (time, insertion counter) ---------------------------------- */

struct sim_ev {
	int64_t t;      /* ns */
	uint64_t seq;   /* insertion counter << 8 | type (0 .. 255): equal times pop in
			 * insertion order; 32 bytes an event */
	int64_t b;
	int32_t a;
	uint32_t ver;   /* for lazily cancelled events (flows whose rate changed) */
};
static inline int32_t sim_ev_type(const struct sim_ev *e) { return (int32_t)(e->seq & 0xff); }

/* Simulated time is int64 ns. A duration is clamped to SIM_NS_CAP (2^62 ns, 146 years), so that
 * now + duration cannot overflow while now is within the horizon; the engine stops with an
 * error once an event falls past SIM_HORIZON_NS (10^18 ns, 31.7 years): rates that small
 * (a --set of 1e-9 GB/s) are a mistake, not a job. */
#define SIM_NS_CAP 4611686018427387904.0
#define SIM_HORIZON_NS 1000000000000000000LL
static inline int64_t sim_ns_ceil(double ns)
{
	if (!(ns < SIM_NS_CAP)) /* NaN too */
		return (int64_t)SIM_NS_CAP;
	return ns > 0 ? (int64_t)ceil(ns) : 0;
}
/* llround, inline (the libm call was 3% of a run): x - trunc(x) is exact for |x| < 2^63 */
static inline int64_t sim_ns_round(double x)
{
	if (!(x > -SIM_NS_CAP && x < SIM_NS_CAP)) /* (NaN too) */
		return x < 0 ? -(int64_t)SIM_NS_CAP : (int64_t)SIM_NS_CAP;
	int64_t i = (int64_t)x;
	double f = x - (double)i;
	return i + (f >= 0.5) - (f <= -0.5);
}

/* A radix heap on time: simulated time never runs backwards, so every event pushed is due at
 * or after the last one popped, and it is kept in the bucket of the highest bit where its time
 * differs from that one's (0: the same time; 1-64: bit 0-63). Each bucket's times are below
 * every higher bucket's; a pop takes bucket 0's first event or splits the lowest non-empty
 * bucket into lower ones. Every bucket is in push order (a push appends; a split hands each
 * lower bucket, empty until then, a subsequence), so bucket 0 is a queue of simultaneous
 * events in the order they were scheduled: all ranks of a full-mode run meet at the same
 * nanoseconds, and a binary heap's sift-down was a third of such a run. */
#define SIM_HEAP_BUCKETS 65
struct sim_heap {
	struct sim_ev *b[SIM_HEAP_BUCKETS];
	size_t n[SIM_HEAP_BUCKETS], cap[SIM_HEAP_BUCKETS];
	size_t head;            /* bucket 0's next event */
	uint64_t full[2];       /* bit i % 64 of word i / 64: bucket i is not empty */
	int64_t last_t;         /* time of the last event popped, ns */
	size_t size;            /* events queued */
	uint64_t next_seq;
};

void sim_heap_init(struct sim_heap *h);
void sim_heap_free(struct sim_heap *h);
/* an event due before the last one popped (time would run backwards) is taken as due then */
void sim_heap_push(struct sim_heap *h, int64_t t, int32_t type, int32_t a, int64_t b, uint32_t ver);
bool sim_heap_pop(struct sim_heap *h, struct sim_ev *out);

/* ---- NCCL's tuner model (reference/cost-models.md §1) ----------------------------------- */

/* NVLS_TREE last, after the four twin modelled first, so that the strategy's bit masks and
 * the trace's indices of the others stay as they were */
enum nccl_algo { NCCL_TREE = 0, NCCL_RING, NCCL_NVLS, NCCL_PAT, NCCL_NVLS_TREE, NCCL_NUM_ALGOS };
enum nccl_proto { NCCL_LL = 0, NCCL_LL128, NCCL_SIMPLE, NCCL_NUM_PROTOS };
const char *nccl_algo_name(int a);
const char *nccl_proto_name(int p);
bool nccl_algo_parse(const char *s, int *out);

/* What the model needs to know about a communicator on a cluster. */
struct nccl_comm {
	int cc;              /* compute capability x10: 70, 80, 90, 100 */
	int64_t nranks, nnodes, ppn;
	int nch;             /* channels */
	double intra_GBps;   /* per GPU, all channels: NVLink (or PCIe) as NCCL achieves it */
	double inter_GBps;   /* per GPU, all channels: this GPU's share of the node's NICs */
	bool nvlink;         /* intra-node path is NVLink (LL128 allowed) */
	bool nvls;           /* NVLink SHARP present */
	bool amd_cpu;        /* NCCL's LL caps and net overhead differ on AMD hosts */
	bool x86_cpu;        /* NCCL corrects NVLSTree's medium sizes on Blackwell x86 hosts */
	double net_lat_us;   /* added to NCCL's per-step network latency (0: NCCL's tables) */
	double plugin_lat_us; /* the net plugin's latencyInter, µs: NCCL adds it per inter step */
	double intra_lat_us; /* added to NCCL's per-step NVLink / PCI latency (0: its tables) */
	int64_t leaf_nodes;  /* nodes under one leaf switch (per rail); 0: one switch for all */
	double oversub;      /* leaf down:up capacity ratio, >= 1 */
	double nvls_GBps;    /* NVLS all-reduce busbw on NVLS_REF_GPUS GPUs; 0: NCCL's model */
	double gpu_net_GBps; /* the NIC bandwidth one GPU owns (rail share), for p2p/all-to-all */
	double nic_line_GBps; /* one NIC's line rate (NCCL's SM100 NVLSTree tuning reads it) */
	int net_peer_ch;     /* p2p channels NCCL gives a network peer (ncclTopoGetNchannels):
			      * one per NIC local to the GPU, or what their bandwidth needs at
			      * NCCL_P2P_PER_CHANNEL_NET_BW; 0 without NICs */
	bool nvswitch;       /* every GPU pair of a node meets through NVSwitch (p2p channels) */
	unsigned no_algos, no_protos; /* what NCCL_ALGO / NCCL_PROTO take from the tuner, bit per
				       * index; 0: nothing (NCCL's default) */
	unsigned forced_protos;      /* named in NCCL_PROTO: enabled past NCCL's hardware checks */
	unsigned named_algos;        /* named in NCCL_ALGO: NVLSTree is taken only then */
};

struct nccl_result {
	int algo, proto;
	double lat_us;       /* latency term */
	double algbw_GBps;   /* algorithm bandwidth of the bandwidth term */
	double fill_us;      /* pipeline fill: the first chunk crossing every step */
	double time_us;      /* lat + S / algbw + fill */
	double busbw_GBps;   /* nccl-tests bus bandwidth this time implies */
	double nvl_bytes;    /* bytes each GPU sends over NVLink (or PCIe) */
	double net_bytes;    /* bytes each GPU sends over its NIC */
	double up_bytes;     /* of those, the share that leaves its leaf switch (0 within a leaf) */
};

/* nccl-tests size S for a collective whose per-rank nccl count is `bytes`: AG/RS move n x. */
double nccl_size(enum plan_coll c, double bytes, int64_t n);
/* nccl-tests bus bandwidth factor. */
double nccl_busbw_factor(enum plan_coll c, int64_t n);
/* Fill the communicator description from the cluster (ranks spread over nnodes nodes). */
void nccl_comm_from_cluster(const struct cluster *c, int64_t nranks, int64_t nnodes,
			    struct nccl_comm *out);
/* NCCL_ALGO / NCCL_PROTO on a communicator (the strategy's for a job's collectives, a
 * benchmark's for sim_collective) */
void nccl_comm_env(struct nccl_comm *cm, const struct sim_nccl_env *env);
/* Time of one collective of nccl-tests size S bytes; algo < 0: chosen as NCCL's tuner does
 * (argmin of time over the enabled algorithm/protocol pairs), else forced. False when the
 * forced algorithm cannot run this collective. */
bool nccl_predict(const struct nccl_comm *cm, enum plan_coll c, double S, int algo,
		  struct nccl_result *out);
/* All-to-all of a per-rank buffer of S bytes and one send/recv of S bytes (not in NCCL's
 * tuner: the bytes over NVLink and over the NIC at the link speeds, plus one step latency). */
void nccl_alltoall(const struct nccl_comm *cm, double S, struct nccl_result *out);
void nccl_p2p(const struct nccl_comm *cm, double S, bool same_node, struct nccl_result *out);
/* An all-gather or reduce-scatter of Transformer Engine's userbuffers (Megatron-Core
 * --tp-comm-overlap): a ring of n - 1 peer-to-peer copies over NVLink, not NCCL's kernels.
 * False when the group leaves the node (then NCCL's model applies). */
bool nccl_userbuffers(const struct nccl_comm *cm, enum plan_coll c, double S,
		      struct nccl_result *out);
/* One (algo, proto) pair, exactly the tuner's table entry (for tests); false if disabled. */
bool nccl_eval(const struct nccl_comm *cm, enum plan_coll c, double S, int algo, int proto,
	       struct nccl_result *out);

/* ---- flow network: links with capacity, flows with max-min fair rates -------------------- */

/* Each flow makes progress at rate x in [0, 1] (1 = as fast as alone on an idle network) and
 * puts load[l] * x of link l's capacity on each of its links. Max-min fair: raise every
 * unfixed flow's rate together until a link is full or the flow reaches 1 (progressive
 * filling, reference/cost-models.md §5). */
struct net_flow {
	double remaining_ns; /* work left, in ns at rate 1 */
	double rate;
	int64_t last_ns;     /* when remaining was last brought up to date */
	uint32_t ver;        /* bumps when the rate changes (stale completion events are skipped) */
	int32_t first;       /* first of its (link, load) entries in net->uses */
	int32_t nuses;
	int32_t owner;       /* the engine's id of what completes when this flow does */
	bool active;
	bool mark;
};

struct net_use {
	int32_t link;
	double load;         /* fraction of the link's capacity used at rate 1 */
	int32_t next_on_link;/* next active use on the same link (intrusive list), -1: end */
	int32_t prev_on_link;
	int32_t flow;
};

struct net {
	int32_t nlinks;
	double *cap;         /* relative capacity of each link (1 = nominal; < 1 slow link) */
	int32_t *head;       /* first active use on each link, -1: none */
	struct net_flow *flows;
	size_t nflows, flows_cap;
	int32_t *free_flows; /* recycled flow slots */
	size_t nfree, free_cap;
	struct net_use *uses;
	size_t nuses, uses_cap;
	/* scratch for the component solve */
	int32_t *comp_flows, *comp_links, *stack;
	size_t comp_cap, link_scratch_cap;
	double *resid, *weight;
	bool *link_mark;
	int64_t solves;      /* full component solves (statistics) */
	int64_t nactive;     /* flows in the network now */
};

void net_init(struct net *n, int32_t nlinks);
void net_free(struct net *n);
/* Add a flow of `work_ns` at rate 1 over the given links; returns its id. Rates of the flows
 * it shares links with are recomputed; changed(flow) is called for each flow whose rate was
 * (re)set, including the new one. */
typedef void (*net_changed_fn)(void *ctx, int32_t flow);
int32_t net_add(struct net *n, int64_t now, double work_ns, const int32_t *links,
		const double *loads, int nlinks, int32_t owner, net_changed_fn changed, void *ctx);
/* Remove a finished flow and re-balance its neighbours. */
void net_remove(struct net *n, int64_t now, int32_t flow, net_changed_fn changed, void *ctx);
/* Time (ns from now) at which a flow ends at its current rate. */
int64_t net_eta(const struct net *n, int32_t flow, int64_t now);

/* ---- compute cost ------------------------------------------------------------------------ */

/* Duration of a COMPUTE op on an idle GPU (or the host CPU for host-stream ops), ns. It may
 * read only the op's kind, stream, phase, flags and u.compute: the engine memoises it on them. */
int64_t sim_compute_ns(const struct job *j, const struct plan_op *op);
/* Host time the rank's issuing thread spends to issue an op (framework dispatch), ns. For a
 * COMPUTE op it may read only what sim_compute_ns may: the engine memoises both together. */
int64_t sim_host_ns(const struct job *j, const struct plan_op *op);
/* Duration of a COPY op at full PCIe / NVMe speed, ns; bw_GBps gets the speed used. */
int64_t sim_copy_ns(const struct job *j, const struct plan_op *op, double *bw_GBps);
/* Efficiency table lookup (cluster_eff_lookup semantics). */
double sim_eff(const struct cluster_eff_table *t, double x);
/* Compute capability x10 from the GPU name ("A100" -> 80). */
int sim_gpu_cc(const struct cluster *c);

/* Fraction of peak a GEMM of m x n (output) and depth k reaches: the cluster's asymptotic
 * GEMM efficiency x wave quantisation x a per-tile pipeline ramp in k (sim/compute.c). */
double sim_gemm_eff(const struct cluster *c, int64_t m, int64_t n, int64_t k);
double sim_gemm_eff_grouped(const struct cluster *c, int64_t m, int64_t n, int64_t k,
			    int64_t groups);

#endif
