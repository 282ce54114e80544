/* The discrete-event engine: runs the plans of the simulated ranks over streams, a host CPU
 * and the flow network, and writes the trace (DESIGN.md, "The simulator"; docs/simulator.md).
 *
 * An op starts when its dependencies are done and its stream is free (streams are in order,
 * like CUDA streams). COMPUTE and host ops take their roofline time; COPY ops and the data
 * phase of COLL and P2P ops are flows in the network, so traffic that meets on a link slows
 * down. A COLL starts when every simulated member of its (group, color, seq) has issued it; a
 * P2P when both (src, dst, seq) sides have. Symmetric mode simulates one rank per role and maps
 * a peer to the representative of its pipeline stage; full mode simulates every rank, sharing
 * each role's op graph (ranks of a role have the same plan up to renaming). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim_int.h"

/* group peers of a straggler whose events full mode records beside it (ranks) */
#define SIM_MAX_PEERS_RECORDED 256

enum { EV_OP_END = 0, EV_COMM_DATA, EV_FLOW_END, EV_HOST };
/* A GPU's links: its NVLink (or PCIe peer) port, its share of the node's NICs, its PCIe x16
 * link to the switch it shares with its NIC, one direction each (full duplex): up carries D2H
 * copies and what the NIC sends (GPUDirect RDMA reads GPU memory), down carries H2D copies and
 * what the NIC receives; and its share of its leaf switch's uplinks (its NIC share over the
 * oversubscription), which what its collectives and sends take out of the leaf at once share. */
enum { LINK_NVL = 0, LINK_NIC, LINK_PCIE_UP, LINK_PCIE_DOWN, LINK_LEAF_UP, LINKS_PER_GPU };
/* a dependent carries its stream (no trip to its op record), a work item its srank and
 * stream: plans are under 2^29 ops (role_prepare checks), simulated ranks under 2^24 */
enum { SUCC_SHIFT = 3, SUCC_STREAM = 7, WORK_SHIFT = 3 };
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p) /* a hint: GCC and Clang */
#else
#define PREFETCH(p) ((void)(p))
#endif
_Static_assert(PLAN_NUM_STREAMS <= 8, "a stream fits in 3 bits");
#define DEFAULT_MAX_EVENTS 2000000000LL

/* What the engine needs of one plan op, in one compact record of 48 bytes: the plan itself is
 * released once its role is prepared (the next role's plan reuses that memory), and the event
 * loop touches one or two cache lines per op instead of a 136-byte plan op and four side
 * arrays. The ops of all roles are well beyond the caches, so every byte counts. */
struct eop {
	/* first what starting an op reads, last what only its trace event needs (half of the
	 * records straddle two cache lines: the start then mostly needs only one) */
	uint8_t kind, stream, phase, flags;
	uint8_t sub;            /* COLL: enum plan_coll; COPY: enum plan_copy; ALLOC / FREE:
				 * enum plan_device */
	uint8_t group;          /* COLL: enum job_group */
	uint8_t cat;            /* enum trace_cat */
	uint8_t named;          /* the plan op had a name (for messages) */
	int64_t issue;          /* host time at which the rank's thread has issued the op, ns,
				 * before sync shifts (it issues the plan in order, each op
				 * costing sim_host_ns) */
	union {
		int64_t dur;    /* COMPUTE / COPY: base duration, ns */
		struct {
			int32_t seq;  /* COLL, P2P (checked to fit when prepared) */
			int32_t peer; /* P2P: the peer rank (< 2^24 GPUs) */
		};
	};
	union {
		double flops;   /* COMPUTE */
		int64_t bytes;  /* COLL, P2P, COPY, ALLOC, FREE */
	};
	int32_t layer, micro, stage;
	uint32_t name;          /* interned in the trace */
};
_Static_assert(sizeof(struct eop) == 48, "struct eop: 48 bytes (memory touched per op)");

struct role {
	int64_t rep;            /* its representative rank */
	struct plan plan;       /* released once prepared */
	struct eop *ops;
	size_t nops;
	uint32_t *ndeps;        /* each op's dependency count (initial srank->left) */
	/* full mode: the dependencies left of every op of every rank of the role, op-major
	 * (op i of the role's k-th rank at i * lanes + k): the ranks of a role run the same op at
	 * the same instant, so they share its cache lines instead of each missing its own */
	uint32_t *left;
	int64_t lanes;          /* the role's simulated ranks */
	uint32_t *doff;         /* each op's dep_off while preparing */
	uint8_t *stm;           /* each op's stream while preparing */
	size_t nevents;         /* ops that make a trace event (all but ALLOC / FREE) */
	uint32_t *sync_op;      /* ops after which the host synchronizes with the GPU, in order */
	uint32_t *sync_from;    /* first op of each sync's batch of p2p ops */
	uint8_t *sync_all;      /* the sync waits for every op of its range (a device sync) */
	uint32_t nsync;
	size_t sync_cap;
	uint32_t *succ_off, *succ; /* dependents (CSR), each op << SUCC_SHIFT | its stream */
	uint32_t *sops[PLAN_NUM_STREAMS];
	uint32_t nsops[PLAN_NUM_STREAMS];
	/* symmetric mode: where the role's ranks send the p2p ops whose peer (as the
	 * representative sees it) is reach[i].peer: all to their own node, or the farthest */
	struct p2p_reach {
		int64_t peer;
		bool same;
		int64_t dist;
	} *reach;
	int nreach;
};

struct srank {
	int64_t rank;
	int32_t role;
	int32_t node;
	uint32_t *left;         /* dependencies left of op i: left[i * lanes] (its role's array,
				 * from its lane) */
	int64_t lanes;          /* its role's lanes (while setting up: its own lane) */
	uint32_t head[PLAN_NUM_STREAMS];
	bool busy[PLAN_NUM_STREAMS];
	bool wake[PLAN_NUM_STREAMS]; /* a wake-up at the head op's issue time is queued */
	uint32_t sync_k;        /* the host waits at role sync_op[sync_k] (nsync: no more) */
	uint32_t sync_left;     /* p2p ops of that batch not finished yet */
	int64_t host_shift;     /* how long syncs have held the host back, ns */
	int64_t start[PLAN_NUM_STREAMS];
	int32_t ncomm;          /* comm operations in progress that involve this GPU */
	bool straggler;         /* a straggler what-if covers this GPU (full mode) */
	uint32_t cver;          /* version of the running GPU compute op's end event (0: none) */
	bool cslow;             /* that op runs slowed by an overlapping collective */
	double compute_scale;   /* straggler: < 1 slower */
	int64_t end_ns;
	int64_t ndone;
	int64_t live[PLAN_NUM_DEVICES], peak[PLAN_NUM_DEVICES];
	int32_t device;         /* GPU index on its node (trace events) */
	bool record;
};

/* a collective or p2p instance: who has arrived, and its flow */
struct inst {
	int64_t k1, k2, k3;     /* key */
	int32_t expected, arrived;
	int32_t first;          /* waiters list in eng.waiters */
	int64_t t_arrive;       /* last arrival */
	int32_t flow;
	uint8_t kind;           /* PLAN_COLL / PLAN_P2P / PLAN_COPY */
	uint32_t tflags;        /* a collective's NCCL algorithm and protocol, trace flags */
	double nvl_bytes, net_bytes; /* what each GPU sends on its NVLink / NIC */
	double up_bytes;             /* of net_bytes, what leaves its leaf switch */
};

/* the model's answer for one collective or p2p shape, memoised: a step repeats few shapes */
struct memo {
	int64_t key[3];
	bool used;
	struct nccl_result r;
};
#define MEMO_SLOTS 256

/* what is memoised of a COMPUTE op (sim_int.h: its cost may read only these fields) */
struct dur_memo {
	bool used;
	uint8_t stream, phase, flags;
	uint8_t cat;            /* enum trace_cat */
	int64_t ns;             /* sim_compute_ns */
	int64_t host_ns;        /* sim_host_ns */
	uint64_t shape[(sizeof(((struct plan_op *)0)->u.compute) + 7) / 8];
};
#define DUR_SLOTS 512

struct waiter {
	int32_t sr;
	uint32_t op;
	int32_t next;
	bool released;          /* its stream was freed when it was posted (p2p sends) */
	int64_t t0;             /* when it was posted */
};

/* the strategy's nccl_algo / nccl_proto are the sim's algorithm and protocol bits */
_Static_assert(NCCL_TREE == 0 && NCCL_RING == 1 && NCCL_NVLS == 2 && NCCL_PAT == 3 && NCCL_NVLS_TREE == 4 &&
		       NCCL_NUM_ALGOS == STRAT_NCCL_ALGOS && NCCL_LL == 0 && NCCL_LL128 == 1 &&
		       NCCL_SIMPLE == 2 && NCCL_NUM_PROTOS == STRAT_NCCL_PROTOS,
	       "strat_nccl_*_names follow the simulator's enums");

struct eng {
	const struct job *j;
	const struct sim_options *opt;
	struct trace *tr;
	struct tw_err *err;
	struct role *roles;
	int64_t nroles;
	struct srank *sr;
	int64_t nsr;
	int32_t *sr_of;         /* rank -> srank index, -1: not simulated */
	int32_t *canon_role;    /* rank -> role (by pipeline stage) */
	struct sim_heap heap;
	struct net net;
	/* instances: open-addressing hash on the key */
	struct inst *inst;
	size_t ninst, inst_cap;
	int32_t *slots;
	size_t nslots;
	struct waiter *waiters;
	size_t nwaiters, waiters_cap;
	int32_t *free_inst;     /* recycled instance slots */
	size_t nfree_inst, free_inst_cap;
	int32_t free_waiter;    /* recycled waiter list, -1: none */
	/* worklist of (srank, stream) to try */
	uint32_t *work;         /* srank << WORK_SHIFT | stream */
	size_t nwork, work_cap;
	int64_t *members;       /* scratch, gpus entries */
	struct memo memo[MEMO_SLOTS];
	double link_GBps[LINKS_PER_GPU]; /* nominal capacity of each GPU link */
	int64_t leaf_nodes;              /* nodes under one leaf switch (0: one switch for all) */
	int32_t *gnodes;        /* srank x JOB_NUM_GROUPS: nodes its group spans, 0: not yet */
	struct {                /* the first collective NCCL_ALGO / NCCL_PROTO left no way to run */
		bool set;
		int coll, group;
		int64_t ranks, nodes;
	} no_algo;
	/* durations of COMPUTE shapes already costed: a step repeats a few shapes per layer and
	 * micro-batch thousands of times (open addressing, DUR_SLOTS entries) */
	struct dur_memo *dur;
	size_t ndur;
	int32_t *expect;        /* srank x JOB_NUM_GROUPS: simulated members of its group, -1: not
				 * counted yet (symmetric mode) */
	int64_t *color;         /* srank x JOB_NUM_GROUPS: job_group_color, INT64_MIN: not yet */
	int32_t group_size[JOB_NUM_GROUPS]; /* job_group_size of each group (trace events) */
	int64_t now;
	int64_t events;
	uint32_t name_cat_cache;
	enum tw_result rc;
};

/* ---- instances ---------------------------------------------------------------------------- */

static uint64_t key_hash(int64_t a, int64_t b, int64_t c)
{
	uint64_t h = (uint64_t)a * 0x9E3779B97F4A7C15ULL;
	h ^= (uint64_t)b + 0x7F4A7C159E3779B9ULL + (h << 6) + (h >> 2);
	h ^= (uint64_t)c * 0xC2B2AE3D27D4EB4FULL + (h << 6) + (h >> 2);
	return h ^ (h >> 29);
}

static void slots_rebuild(struct eng *e, size_t nslots)
{
	free(e->slots);
	e->slots = TW_NEW_ARRAY(int32_t, nslots);
	e->nslots = nslots;
	for (size_t i = 0; i < nslots; i++)
		e->slots[i] = -1;
	for (size_t i = 0; i < e->ninst; i++) {
		if (e->inst[i].k1 == INT64_MIN)
			continue; /* recycled */
		size_t s = key_hash(e->inst[i].k1, e->inst[i].k2, e->inst[i].k3) & (nslots - 1);
		while (e->slots[s] != -1)
			s = (s + 1) & (nslots - 1);
		e->slots[s] = (int32_t)i;
	}
}

static int32_t inst_get(struct eng *e, int64_t k1, int64_t k2, int64_t k3, bool *created)
{
	if ((e->ninst - e->nfree_inst + 1) * 2 > e->nslots)
		slots_rebuild(e, e->nslots ? e->nslots * 2 : 1024);
	size_t s = key_hash(k1, k2, k3) & (e->nslots - 1);
	while (e->slots[s] != -1) {
		struct inst *in = &e->inst[e->slots[s]];
		if (in->k1 == k1 && in->k2 == k2 && in->k3 == k3) {
			*created = false;
			return e->slots[s];
		}
		s = (s + 1) & (e->nslots - 1);
	}
	int32_t id;
	if (e->nfree_inst > 0) {
		id = e->free_inst[--e->nfree_inst];
	} else {
		TW_GROW(e->inst, e->inst_cap, e->ninst + 1);
		id = (int32_t)e->ninst++;
	}
	memset(&e->inst[id], 0, sizeof(e->inst[id]));
	e->inst[id].k1 = k1;
	e->inst[id].k2 = k2;
	e->inst[id].k3 = k3;
	e->inst[id].first = -1;
	e->inst[id].flow = -1;
	e->slots[s] = id;
	*created = true;
	return id;
}

/* Remove a finished instance from the table (backward-shift deletion keeps linear probing
 * correct) and recycle it and its waiters. */
static void inst_remove(struct eng *e, int32_t id)
{
	struct inst *in = &e->inst[id];
	size_t mask = e->nslots - 1, i = key_hash(in->k1, in->k2, in->k3) & mask;
	while (e->slots[i] != id)
		i = (i + 1) & mask;
	for (size_t j = (i + 1) & mask; e->slots[j] != -1; j = (j + 1) & mask) {
		const struct inst *o = &e->inst[e->slots[j]];
		size_t home = key_hash(o->k1, o->k2, o->k3) & mask;
		/* move j back to i unless its home lies cyclically in (i, j] */
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!stays) {
			e->slots[i] = e->slots[j];
			i = j;
		}
	}
	e->slots[i] = -1;
	int32_t w = in->first;
	while (w != -1) {
		int32_t next = e->waiters[w].next;
		e->waiters[w].next = e->free_waiter;
		e->free_waiter = w;
		w = next;
	}
	in->k1 = INT64_MIN;
	in->first = -1;
	TW_GROW(e->free_inst, e->free_inst_cap, e->nfree_inst + 1);
	e->free_inst[e->nfree_inst++] = id;
}

static void add_waiter(struct eng *e, int32_t id, int32_t sr, uint32_t op)
{
	int32_t wi;
	if (e->free_waiter != -1) {
		wi = e->free_waiter;
		e->free_waiter = e->waiters[wi].next;
	} else {
		TW_GROW(e->waiters, e->waiters_cap, e->nwaiters + 1);
		wi = (int32_t)e->nwaiters++;
	}
	struct waiter *w = &e->waiters[wi];
	w->sr = sr;
	w->op = op;
	w->released = false;
	w->t0 = e->now;
	w->next = e->inst[id].first;
	e->inst[id].first = wi;
	e->inst[id].arrived++;
}

/* ---- trace -------------------------------------------------------------------------------- */

static void record(struct eng *e, int32_t sri, uint32_t opi, const struct eop *op, int64_t t0,
		   int64_t t1, uint32_t tflags)
{
	const struct srank *s = &e->sr[sri];
	if (!s->record)
		return;
	/* the trace was reserved for every op of the recorded ranks: write in place, every
	 * field */
	TW_GROW(e->tr->ev, e->tr->ev_cap, e->tr->nev + 1);
	struct trace_event *ev = &e->tr->ev[e->tr->nev++];
	ev->rank = (int32_t)s->rank;
	ev->device = op->stream == PLAN_STREAM_HOST ? -1 : s->device;
	ev->stream = op->stream;
	ev->cat = op->cat;
	ev->step = 0;
	ev->op_id = (int32_t)opi;
	ev->layer = op->layer;
	ev->micro = op->micro;
	ev->stage = op->stage;
	ev->phase = op->phase;
	ev->start_ns = t0;
	ev->end_ns = t1;
	ev->bytes = op->kind == PLAN_COLL || op->kind == PLAN_P2P || op->kind == PLAN_COPY ? op->bytes : 0;
	ev->flops = op->kind == PLAN_COMPUTE ? op->flops : 0;
	ev->group_size = op->kind == PLAN_COLL ? e->group_size[op->group] : op->kind == PLAN_P2P ? 2 : 0;
	ev->name = op->name;
	ev->flags = plan_trace_flags((enum plan_kind)op->kind, op->sub, op->flags) | tflags;
	/* the communicator (trace.h): group and color, so that the analysis matches the k-th
	 * collective of one group instance across its members only (issue set the color) */
	ev->comm = op->kind == PLAN_COLL
			   ? 1 + ((int64_t)op->group << 32) +
				     e->color[(int64_t)sri * JOB_NUM_GROUPS + op->group]
			   : 0;
}

/* ---- op life cycle ------------------------------------------------------------------------- */

/* the dependencies left of op i on simulated rank s (op-major across its role's ranks) */
static inline uint32_t *left_of(const struct srank *s, uint32_t i)
{
	return &s->left[(size_t)i * (size_t)s->lanes];
}

static void push_work(struct eng *e, int32_t sr, int stream)
{
	TW_GROW(e->work, e->work_cap, e->nwork + 1);
	e->work[e->nwork++] = (uint32_t)sr << WORK_SHIFT | (uint32_t)stream;
}

/* the ops of its range sync k waits for: Megatron's p2p batches, a micro-batch's input copy,
 * an op whose stream the host synchronizes; a device sync every op that runs on a stream */
static bool syncs_on(const struct role *ro, uint32_t k, const struct eop *o)
{
	if (ro->sync_all[k])
		return o->kind != PLAN_ALLOC && o->kind != PLAN_FREE;
	return o->kind == PLAN_P2P || (o->flags & (PLAN_F_BATCH | PLAN_F_HOSTWAIT));
}

static uint32_t batch_size(const struct role *ro, uint32_t k)
{
	uint32_t n = 0;
	for (uint32_t i = ro->sync_from[k]; i <= ro->sync_op[k]; i++)
		n += syncs_on(ro, k, &ro->ops[i]);
	return n;
}

/* The host waits after issuing op `to` until the ops of [from, to] that the sync counts are
 * done. A range with nothing to wait for is no sync (the host would wait forever). */
static void add_sync(struct role *ro, uint32_t from, uint32_t to, bool all)
{
	size_t cap = ro->sync_cap;
	TW_GROW(ro->sync_from, ro->sync_cap, ro->nsync + 1);
	if (ro->sync_cap != cap) { /* the other two arrays follow sync_from's capacity */
		ro->sync_all = tw_realloc_array(ro->sync_all, ro->sync_cap, sizeof(*ro->sync_all));
		ro->sync_op = tw_realloc_array(ro->sync_op, ro->sync_cap, sizeof(*ro->sync_op));
	}
	ro->sync_from[ro->nsync] = from;
	ro->sync_op[ro->nsync] = to;
	ro->sync_all[ro->nsync] = all;
	if (batch_size(ro, ro->nsync) > 0)
		ro->nsync++;
}

/* The batch the host waited for is done (torch.cuda.synchronize returned): the host goes on
 * issuing from max(its own time, now). */
static void host_resume(struct eng *e, int32_t sri, int64_t t)
{
	struct srank *s = &e->sr[sri];
	const struct role *ro = &e->roles[s->role];
	int64_t held = t - ro->ops[ro->sync_op[s->sync_k]].issue;
	if (held > s->host_shift)
		s->host_shift = held;
	s->sync_k++;
	s->sync_left = s->sync_k < ro->nsync ? batch_size(ro, s->sync_k) : 0;
	for (int st = 0; st < PLAN_NUM_STREAMS; st++)
		push_work(e, sri, st);
}

/* tflags: trace flags the op's event gets (the NCCL algorithm of a collective) */
static void complete_op_at(struct eng *e, int32_t sri, uint32_t opi, int64_t t0, int64_t t,
			   bool stream_released, uint32_t tflags)
{
	struct srank *s = &e->sr[sri];
	struct role *ro = &e->roles[s->role];
	const struct eop *op = &ro->ops[opi];
	record(e, sri, opi, op, t0, t, tflags);
	if (!stream_released) {
		s->busy[op->stream] = false;
		s->head[op->stream]++;
	}
	s->ndone++;
	if (t > s->end_ns)
		s->end_ns = t;
	if (s->sync_k < ro->nsync && syncs_on(ro, s->sync_k, op) && opi >= ro->sync_from[s->sync_k] &&
	    opi <= ro->sync_op[s->sync_k] && --s->sync_left == 0)
		host_resume(e, sri, t);
	for (uint32_t k = ro->succ_off[opi]; k < ro->succ_off[opi + 1]; k++) {
		if (--*left_of(s, ro->succ[k] >> SUCC_SHIFT) == 0)
			push_work(e, sri, (int)(ro->succ[k] & SUCC_STREAM));
	}
	push_work(e, sri, op->stream);
}

static void complete_op(struct eng *e, int32_t sri, uint32_t opi, int64_t t)
{
	struct srank *s = &e->sr[sri];
	complete_op_at(e, sri, opi, s->start[e->roles[s->role].ops[opi].stream], t, false, 0);
}

static void on_flow_changed(void *ctx, int32_t f)
{
	struct eng *e = ctx;
	int64_t eta = net_eta(&e->net, f, e->now);
	sim_heap_push(&e->heap, e->now + eta, EV_FLOW_END, f, 0, e->net.flows[f].ver);
}

/* Nodes the instance of group g that holds rank spans; e->members is left holding its *n
 * members */
static int32_t span_of(struct eng *e, int g, int64_t rank, int64_t *n_out)
{
	int64_t idx, n = job_group_members(e->j, (enum job_group)g, rank, e->members, &idx);
	*n_out = n;
	int64_t nodes = 0, last = -1;
	for (int64_t i = 0; i < n; i++) {
		int64_t nd = job_node_of(e->j, e->members[i]);
		if (nd != last) /* members ascend, so nodes ascend */
			nodes++;
		last = nd;
	}
	return (int32_t)(nodes > 0 ? nodes : 1);
}

/* Nodes the group g of simulated rank sri spans (part of the collective's memo key). Instances
 * of one group type need not span alike: on 3, 5 or 6 nodes, on nodes of 6 GPUs under TP 4, or
 * with expert groups of 16 on 72-GPU NVLink domains, some lie on one node and some across two.
 * Full mode takes the rank's own. In symmetric mode one representative stands for every rank of
 * its role, and the step waits for the slowest of them (each step ends in a collective over the
 * whole job), so it takes the widest instance that holds a rank of the role: every instance
 * once, O(ranks) per group type. */
static int64_t group_nodes(struct eng *e, int32_t sri, int g)
{
	int32_t *c = &e->gnodes[(int64_t)sri * JOB_NUM_GROUPS + g];
	if (*c == 0 && e->opt->full) {
		int64_t n;
		*c = span_of(e, g, e->sr[sri].rank, &n);
	} else if (*c == 0) {
		uint8_t *seen = TW_NEW_ARRAY(uint8_t, e->j->gpus);
		for (int64_t r = 0; r < e->j->gpus; r++) {
			if (seen[r])
				continue;
			int64_t n;
			int32_t span = span_of(e, g, r, &n);
			for (int64_t i = 0; i < n; i++) {
				int64_t m = e->members[i];
				int32_t *w = &e->gnodes[(int64_t)e->canon_role[m] * JOB_NUM_GROUPS + g];
				seen[m] = 1;
				if (span > *w)
					*w = span;
			}
		}
		free(seen);
	}
	return *c;
}

/* bytes of a GPU link per second at rate 1 -> load on the link */
static double link_load(double bytes, double work_ns, double cap_GBps)
{
	if (bytes <= 0 || work_ns <= 0 || cap_GBps <= 0)
		return 0;
	return bytes / work_ns / cap_GBps; /* bytes/ns = GB/s */
}

static int64_t wrap(int64_t x, int64_t n)
{
	return n > 0 ? ((x % n) + n) % n : 0;
}

/* A p2p peer of rank, given its role representative's peer: the same move in every parallel
 * dimension, modulo its size (a context-parallel ring wraps, so a plain shift by
 * rank - representative would leave the ring; so does the interleaved schedule's last stage). */
static int64_t peer_of(const struct eng *e, int64_t rank, int64_t rep, int64_t rep_peer)
{
	if (rank == rep)
		return rep_peer;
	const struct strategy *st = &e->j->strat;
	struct job_coord r, p, me, out;
	job_coord_of(e->j, rep, &r);
	job_coord_of(e->j, rep_peer, &p);
	job_coord_of(e->j, rank, &me);
	out.tp = wrap(me.tp + p.tp - r.tp, st->tp);
	out.cp = wrap(me.cp + p.cp - r.cp, st->cp);
	out.dp = wrap(me.dp + p.dp - r.dp, st->dp);
	out.pp = wrap(me.pp + p.pp - r.pp, st->pp);
	return job_rank_of(e->j, &out);
}

/* ranks between two ranks (a p2p's distance, which sets the share of its sends that leave a
 * leaf switch) */
static int64_t rank_dist(int64_t a, int64_t b)
{
	return a > b ? a - b : b - a;
}

/* Symmetric mode: where the ranks of role ro send a p2p whose peer is rep_peer for the
 * representative. As with groups (group_nodes), the slowest rank sets the pace: when a pipeline
 * or context-parallel boundary crosses a node for some ranks of the role and not for others,
 * the send is taken off the node, over the farthest such distance. Once per (role, peer). */
static const struct p2p_reach *p2p_reach_of(struct eng *e, struct role *ro, int64_t rep_peer)
{
	for (int i = 0; i < ro->nreach; i++)
		if (ro->reach[i].peer == rep_peer)
			return &ro->reach[i];
	int32_t roi = (int32_t)(ro - e->roles);
	struct p2p_reach r = { .peer = rep_peer, .same = true, .dist = 0 };
	if (job_node_of(e->j, rep_peer) != job_node_of(e->j, ro->rep)) {
		/* the representative's own send leaves its node: as before, its distance */
		r.same = false;
		r.dist = rank_dist(rep_peer, ro->rep);
	} else {
		for (int64_t k = 0; k < e->j->gpus; k++) {
			if (e->canon_role[k] != roi)
				continue;
			int64_t peer = peer_of(e, k, ro->rep, rep_peer);
			if (job_node_of(e->j, peer) == job_node_of(e->j, k))
				continue;
			int64_t d = rank_dist(peer, k);
			r.same = false;
			r.dist = d > r.dist ? d : r.dist;
		}
	}
	ro->reach = tw_realloc(ro->reach, (size_t)(ro->nreach + 1) * sizeof(*ro->reach));
	ro->reach[ro->nreach] = r;
	return &ro->reach[ro->nreach++];
}

/* all have arrived: latency now, data as a flow when it is over */
static void comm_model(struct eng *e, const struct srank *s0, const struct eop *op,
		       struct nccl_result *r)
{
	int64_t k0 = 0, k1 = 0, k2 = op->bytes;
	bool same = true;
	int64_t dist = 0; /* p2p: ranks between the two */
	bool ub = op->kind == PLAN_COLL && (op->flags & PLAN_F_USERBUF);
	int64_t nodes = 0;
	if (op->kind == PLAN_COLL) {
		nodes = group_nodes(e, (int32_t)(s0 - e->sr), op->group);
		k0 = op->group + (nodes << 16); /* above the p2p keys' JOB_NUM_GROUPS + 2 */
		k1 = op->sub + (ub ? PLAN_NUM_COLLS : 0);
	} else if (e->opt->full) {
		int64_t peer = peer_of(e, s0->rank, e->roles[s0->role].rep, op->peer);
		same = job_node_of(e->j, peer) == s0->node;
		/* sends to a node d nodes away leave the leaf from min(1, d / leaf) of the nodes
		 * (the share of a ring's edges, alike: every rank of a role then sees the same) */
		dist = rank_dist(peer, s0->rank);
	} else {
		const struct p2p_reach *pr = p2p_reach_of(e, &e->roles[s0->role], op->peer);
		same = pr->same;
		dist = pr->dist;
	}
	if (op->kind != PLAN_COLL) {
		k0 = JOB_NUM_GROUPS + (same ? 1 : 2);
		k1 = same ? -1 : dist;
	}
	struct memo *m = &e->memo[key_hash(k0, k1, k2) & (MEMO_SLOTS - 1)];
	if (m->used && m->key[0] == k0 && m->key[1] == k1 && m->key[2] == k2) {
		*r = m->r;
		return;
	}
	if (op->kind == PLAN_COLL) {
		struct nccl_comm comm;
		nccl_comm_from_cluster(&e->j->cluster, job_group_size(e->j, (enum job_group)op->group),
				       nodes, &comm);
		const struct strategy *st = &e->j->strat;
		nccl_comm_env(&comm, &(struct sim_nccl_env){ st->nccl_no_algos, st->nccl_named_algos,
							     st->nccl_no_protos, st->nccl_named_protos });
		const struct nccl_comm *cm = &comm;
		double S = nccl_size((enum plan_coll)op->sub, (double)op->bytes, cm->nranks);
		if (op->sub == PLAN_ALL_TO_ALL)
			nccl_alltoall(cm, S, r);
		else if (ub && nccl_userbuffers(cm, (enum plan_coll)op->sub, S, r))
			;
		else if (!nccl_predict(cm, (enum plan_coll)op->sub, S, -1, r)) {
			/* NCCL_ALGO / NCCL_PROTO left nothing NCCL can run: it fails the call */
			memset(r, 0, sizeof(*r));
			if (!e->no_algo.set) {
				e->no_algo.set = true;
				e->no_algo.coll = op->sub;
				e->no_algo.group = op->group;
				e->no_algo.ranks = cm->nranks;
				e->no_algo.nodes = cm->nnodes;
			}
		}
	} else {
		struct nccl_comm cm;
		nccl_comm_from_cluster(&e->j->cluster, 2, same ? 1 : 2, &cm);
		nccl_p2p(&cm, (double)op->bytes, same, r);
		int gpn = e->j->cluster.node.gpus > 0 ? e->j->cluster.node.gpus : 1;
		double d = (double)dist / (double)gpn, ln = (double)e->leaf_nodes;
		r->up_bytes = !same && ln > 0 ? r->net_bytes * fmin(1.0, d / ln) : 0;
	}
	m->used = true;
	m->key[0] = k0;
	m->key[1] = k1;
	m->key[2] = k2;
	m->r = *r;
}

/* NCCL_ALGO / NCCL_PROTO left a collective of the plan nothing to run with */
static enum tw_result no_algo_error(const struct eng *e)
{
	const struct strategy *st = &e->j->strat;
	return tw_errf(e->err, TW_ERR_INVALID,
		       "strategy nccl_algo=%s, nccl_proto=%s: NCCL has no algorithm and protocol among "
		       "them for %s over the %s group (%lld ranks on %lld node%s) and fails such a "
		       "call (\"No algorithm/protocol available\")",
		       st->nccl_algo[0] ? st->nccl_algo : "(all)", st->nccl_proto[0] ? st->nccl_proto : "(all)",
		       plan_coll_name((enum plan_coll)e->no_algo.coll),
		       job_group_name((enum job_group)e->no_algo.group), (long long)e->no_algo.ranks,
		       (long long)e->no_algo.nodes, e->no_algo.nodes == 1 ? "" : "s");
}

/* A GPU compute op's duration on rank s: slowed while a collective holds SMs, scaled for a
 * straggler GPU. */
static int64_t compute_dur(const struct eng *e, const struct srank *s, const struct eop *op,
			   bool slow)
{
	bool scale = s->compute_scale > 0 && s->compute_scale != 1.0;
	if (!slow && !scale)
		return op->dur;
	double d = (double)op->dur;
	if (slow)
		d *= e->j->cluster.eff.comm_overlap_slowdown;
	if (scale)
		d /= s->compute_scale;
	return sim_ns_round(d);
}

/* A collective that starts or ends at the instant a compute op starts on one of its GPUs
 * overlaps it or not whatever order the two events are taken in: the op's slowdown follows
 * the GPU's collectives as they are after both (rank order would otherwise decide it, and
 * full mode would differ from symmetric mode). The op's end moves; the old event goes stale. */
static void retime_compute(struct eng *e, int32_t sri)
{
	struct srank *s = &e->sr[sri];
	const struct role *ro = &e->roles[s->role];
	int st = PLAN_STREAM_COMPUTE;
	bool slow = s->ncomm > 0 && e->j->cluster.eff.comm_overlap_slowdown > 1.0;
	if (!s->busy[st] || s->cver == 0 || s->start[st] != e->now || s->cslow == slow)
		return;
	uint32_t opi = ro->sops[st][s->head[st]];
	const struct eop *op = &ro->ops[opi];
	if (op->kind != PLAN_COMPUTE)
		return;
	s->cslow = slow;
	s->cver = s->cver + 1 ? s->cver + 1 : 1;
	sim_heap_push(&e->heap, e->now + compute_dur(e, s, op, slow), EV_OP_END, sri, opi, s->cver);
}

/* all have arrived: latency now, data as a flow when it is over */
static void comm_start(struct eng *e, int32_t id)
{
	struct inst *in = &e->inst[id];
	struct waiter *w0 = &e->waiters[in->first];
	struct srank *s0 = &e->sr[w0->sr];
	const struct eop *op = &e->roles[s0->role].ops[w0->op];
	struct nccl_result r;
	comm_model(e, s0, op, &r);
	for (int32_t w = in->first; w != -1; w = e->waiters[w].next) {
		e->sr[e->waiters[w].sr].ncomm++;
		retime_compute(e, e->waiters[w].sr);
	}
	int64_t lat = sim_ns_round((r.lat_us + r.fill_us) * 1e3);
	/* b carries the data time at rate 1, ns */
	double data_ns = r.time_us * 1e3 - (double)lat;
	in->flow = -1;
	/* all-to-all and p2p are flows, not one of NCCL's collective algorithms */
	in->tflags = op->kind == PLAN_COLL && op->sub != PLAN_ALL_TO_ALL
			     ? trace_algo_flags((enum trace_algo)(r.algo + 1), (enum trace_proto)(r.proto + 1))
			     : 0;
	in->nvl_bytes = r.nvl_bytes;
	in->net_bytes = r.net_bytes;
	in->up_bytes = r.up_bytes;
	sim_heap_push(&e->heap, e->now + lat, EV_COMM_DATA, id, sim_ns_round(data_ns), 0);
}

static void comm_data(struct eng *e, int32_t id, int64_t data_ns)
{
	struct inst *in = &e->inst[id];
	/* link loads at rate 1 from the bytes each GPU moves (the NIC link is this GPU's share) */
	double nvl_GBps = e->link_GBps[LINK_NVL], nic_GBps = e->link_GBps[LINK_NIC];
	int32_t links[LINKS_PER_GPU * 32];
	double loads[LINKS_PER_GPU * 32];
	int nl = 0;
	double lnvl = link_load(in->nvl_bytes, (double)data_ns, nvl_GBps);
	double lnet = link_load(in->net_bytes, (double)data_ns, nic_GBps);
	/* what crosses the NIC crosses the GPU's PCIe link too, each way as much as it sends */
	double lpcie = link_load(in->net_bytes, (double)data_ns, e->link_GBps[LINK_PCIE_UP]);
	double lup = link_load(in->up_bytes, (double)data_ns, e->link_GBps[LINK_LEAF_UP]);
	/* every simulated member's links (a p2p: the sender's, and the receiver's PCIe in) */
	int32_t *lk = links;
	double *ld = loads;
	int32_t *heap_links = NULL;
	double *heap_loads = NULL;
	int cap = (int)(sizeof(links) / sizeof(links[0]));
	int need = LINKS_PER_GPU * in->arrived;
	if (need > cap) {
		heap_links = TW_NEW_ARRAY(int32_t, need);
		heap_loads = TW_NEW_ARRAY(double, need);
		lk = heap_links;
		ld = heap_loads;
	}
	for (int32_t w = in->first; w != -1; w = e->waiters[w].next) {
		const struct waiter *wt = &e->waiters[w];
		const struct eop *o = &e->roles[e->sr[wt->sr].role].ops[wt->op];
		int32_t base = wt->sr * LINKS_PER_GPU;
		bool p2p = o->kind == PLAN_P2P, recv = p2p && !(o->flags & PLAN_F_SEND);
		if (lpcie > 0 && (recv || !p2p)) {
			lk[nl] = base + LINK_PCIE_DOWN;
			ld[nl++] = lpcie;
		}
		if (recv)
			continue;
		if (lnvl > 0) {
			lk[nl] = base + LINK_NVL;
			ld[nl++] = lnvl;
		}
		if (lnet > 0) {
			lk[nl] = base + LINK_NIC;
			ld[nl++] = lnet;
		}
		if (lpcie > 0) {
			lk[nl] = base + LINK_PCIE_UP;
			ld[nl++] = lpcie;
		}
		if (lup > 0) {
			lk[nl] = base + LINK_LEAF_UP;
			ld[nl++] = lup;
		}
	}
	e->inst[id].flow = net_add(&e->net, e->now, (double)data_ns, lk, ld, nl, id,
				   on_flow_changed, e);
	free(heap_links);
	free(heap_loads);
}

static void comm_end(struct eng *e, int32_t id)
{
	struct inst *in = &e->inst[id];
	for (int32_t w = in->first; w != -1; w = e->waiters[w].next) {
		struct waiter *wt = &e->waiters[w];
		if (in->kind != PLAN_COPY) {
			e->sr[wt->sr].ncomm--;
			retime_compute(e, wt->sr);
		}
		complete_op_at(e, wt->sr, wt->op, wt->t0, e->now, wt->released, in->tflags);
	}
	inst_remove(e, id);
}

static int64_t expected_members(struct eng *e, const struct eop *op, int64_t rank)
{
	if (e->opt->full)
		return job_group_size(e->j, op->group);
	int32_t *memo = &e->expect[(int64_t)e->sr_of[rank] * JOB_NUM_GROUPS + op->group];
	if (*memo >= 0)
		return *memo;
	int64_t idx, n = job_group_members(e->j, op->group, rank, e->members, &idx);
	int64_t k = 0;
	for (int64_t i = 0; i < n; i++)
		if (e->sr_of[e->members[i]] >= 0)
			k++;
	*memo = (int32_t)k;
	return k;
}

/* canonical rank: the simulated rank that stands for `rank` */
static int64_t canon(struct eng *e, int64_t rank)
{
	if (e->opt->full)
		return rank;
	return e->roles[e->canon_role[rank]].rep;
}

static void start_op(struct eng *e, int32_t sri, uint32_t opi)
{
	struct srank *s = &e->sr[sri];
	struct role *ro = &e->roles[s->role];
	const struct eop *op = &ro->ops[opi];
	s->busy[op->stream] = true;
	s->start[op->stream] = e->now;
	if (s->head[op->stream] + 1 < ro->nsops[op->stream]) {
		/* the stream's next op is looked at when this one ends: load it meanwhile (the
		 * op records of all roles are well beyond the caches) */
		uint32_t nx = ro->sops[op->stream][s->head[op->stream] + 1];
		PREFETCH(&ro->ops[nx]);
		PREFETCH(left_of(s, nx));
	}
	switch (op->kind) {
	case PLAN_ALLOC:
	case PLAN_FREE: {
		int dev = op->sub;
		s->live[dev] += op->kind == PLAN_ALLOC ? op->bytes : -op->bytes;
		if (s->live[dev] > s->peak[dev])
			s->peak[dev] = s->live[dev];
		if (s->record) {
			struct trace_mem_sample m = { .rank = (int32_t)s->rank, .device = dev, .cat = -1,
						      .t_ns = e->now, .bytes = s->live[dev] };
			trace_add_mem(e->tr, &m);
		}
		s->busy[op->stream] = false;
		s->head[op->stream]++;
		s->ndone++;
		for (uint32_t k = ro->succ_off[opi]; k < ro->succ_off[opi + 1]; k++) {
			if (--*left_of(s, ro->succ[k] >> SUCC_SHIFT) == 0)
				push_work(e, sri, (int)(ro->succ[k] & SUCC_STREAM));
		}
		push_work(e, sri, op->stream);
		return;
	}
	case PLAN_COMPUTE: {
		int64_t dur = op->dur;
		uint32_t ver = 0;
		if (op->stream == PLAN_STREAM_COMPUTE) {
			s->cslow = s->ncomm > 0 && e->j->cluster.eff.comm_overlap_slowdown > 1.0;
			dur = compute_dur(e, s, op, s->cslow);
			ver = s->cver = s->cver + 1 ? s->cver + 1 : 1;
		} else if (op->stream != PLAN_STREAM_HOST) {
			/* a kernel on a communication stream (FSDP2's and old DeepSpeed's copies):
			 * a straggler's, not retimed by collectives (the version belongs to the
			 * compute stream's op) */
			dur = compute_dur(e, s, op, false);
		}
		sim_heap_push(&e->heap, e->now + dur, EV_OP_END, sri, opi, ver);
		return;
	}
	case PLAN_COPY: {
		/* a flow on this GPU's PCIe link, in its direction (NVMe is the host side: its
		 * own speed) */
		bool created;
		int32_t id = inst_get(e, -1 - (int64_t)PLAN_COPY, (int64_t)sri, (int64_t)opi, &created);
		e->inst[id].kind = PLAN_COPY;
		add_waiter(e, id, sri, opi);
		bool in = op->sub == PLAN_H2D || op->sub == PLAN_NVME_READ;
		int32_t link = sri * LINKS_PER_GPU + (in ? LINK_PCIE_DOWN : LINK_PCIE_UP);
		double load = (op->sub == PLAN_H2D || op->sub == PLAN_D2H) ? 1.0 : 0.0;
		double work = (double)op->dur;
		e->inst[id].flow = net_add(&e->net, e->now, work, &link, &load, 1, id, on_flow_changed, e);
		return;
	}
	case PLAN_COLL: {
		bool created;
		int64_t *cm = &e->color[(int64_t)sri * JOB_NUM_GROUPS + op->group];
		if (*cm == INT64_MIN)
			*cm = job_group_color(e->j, op->group, s->rank);
		int64_t color = *cm;
		int32_t id = inst_get(e, op->group, color, op->seq, &created);
		if (created) {
			e->inst[id].kind = PLAN_COLL;
			e->inst[id].expected = (int32_t)expected_members(e, op, s->rank);
		}
		add_waiter(e, id, sri, opi);
		if (e->inst[id].arrived >= e->inst[id].expected)
			comm_start(e, id);
		return;
	}
	case PLAN_P2P: {
		int64_t peer = peer_of(e, s->rank, ro->rep, op->peer);
		bool send = op->flags & PLAN_F_SEND;
		int64_t src = canon(e, send ? s->rank : peer), dst = canon(e, send ? peer : s->rank);
		bool created;
		int32_t id = inst_get(e, (int64_t)JOB_NUM_GROUPS + 1 + src, dst, op->seq, &created);
		if (created) {
			e->inst[id].kind = PLAN_P2P;
			e->inst[id].expected = 2;
		}
		add_waiter(e, id, sri, opi);
		if (!(op->flags & PLAN_F_BLOCKING)) {
			/* a send (or a receive posted ahead) does not hold its stream: Megatron
			 * posts sends and receives together (batched isend/irecv), so the next
			 * p2p op can be posted; the op's dependents still wait for the transfer.
			 * Receives and DeepSpeed's blocking sends hold it until it is done. */
			e->waiters[e->inst[id].first].released = true;
			s->busy[op->stream] = false;
			s->head[op->stream]++;
			push_work(e, sri, op->stream);
		}
		if (e->inst[id].arrived >= e->inst[id].expected)
			comm_start(e, id);
		return;
	}
	default:
		complete_op(e, sri, opi, e->now);
		return;
	}
}

static void drain(struct eng *e)
{
	while (e->nwork > 0) {
		uint32_t w = e->work[--e->nwork];
		int32_t sri = (int32_t)(w >> WORK_SHIFT);
		int st = (int)(w & ((1u << WORK_SHIFT) - 1));
		struct srank *s = &e->sr[sri];
		struct role *ro = &e->roles[s->role];
		if (s->busy[st] || s->head[st] >= ro->nsops[st])
			continue;
		uint32_t opi = ro->sops[st][s->head[st]];
		if (*left_of(s, opi) != 0)
			continue;
		if (s->sync_k < ro->nsync && opi > ro->sync_op[s->sync_k])
			continue; /* the host waits at a sync and has not issued it yet */
		if (ro->ops[opi].issue + s->host_shift > e->now) {
			/* ready on the GPU, not yet issued by the host: wait for the host thread */
			if (!s->wake[st]) {
				s->wake[st] = true;
				sim_heap_push(&e->heap, ro->ops[opi].issue + s->host_shift, EV_HOST, sri, st, 0);
			}
			continue;
		}
		start_op(e, sri, opi);
	}
}

/* ---- set-up ------------------------------------------------------------------------------ */

/* Memory for a large array that is written in full soon after: whole 2 MiB pages, backed by
 * transparent huge pages where the kernel allows (MADV_HUGEPAGE, a hint). Fresh pages were a
 * third of a symmetric run: one fault per 2 MiB instead of one per 4 KiB, and each huge page
 * is zeroed by the kernel just before it is written, while it is still in the cache (mapping
 * them all up front, MADV_POPULATE_WRITE, zeroed them into memory to be read back). */
static void *alloc_big(size_t bytes)
{
	const size_t huge = (size_t)2 << 20;
	if (bytes < huge / 2)
		return tw_malloc(bytes ? bytes : 1);
	size_t len = (bytes + huge - 1) & ~(huge - 1);
	void *p = aligned_alloc(huge, len);
	if (!p)
		return tw_malloc(bytes);
#ifdef MADV_HUGEPAGE
	(void)madvise(p, len, MADV_HUGEPAGE);
#endif
	return p;
}

static void costs_fill(struct eng *e, const struct plan_op *op, struct dur_memo *m)
{
	m->used = true;
	m->stream = op->stream;
	m->phase = op->phase;
	m->flags = op->flags;
	memcpy(m->shape, &op->u.compute, sizeof(op->u.compute));
	m->cat = (uint8_t)plan_op_trace_cat(op);
	m->ns = sim_compute_ns(e->j, op);
	m->host_ns = sim_host_ns(e->j, op);
}

/* A COMPUTE op's duration, host time and trace category, memoised on what they depend on
 * (sim_int.h): the stream, phase, flags and the shape. The builder zeroes each op, so the
 * shape's padding compares equal. */
static const struct dur_memo *compute_costs(struct eng *e, const struct plan_op *op)
{
	/* hash what tells shapes apart (kernel, m, n, k, FLOPs, bytes); the compare below
	 * checks the whole shape */
	const struct plan_op *o = op;
	uint64_t fl, by;
	memcpy(&fl, &o->u.compute.flops, 8);
	memcpy(&by, &o->u.compute.bytes, 8);
	uint64_t h = ((uint64_t)o->stream << 24 | (uint64_t)o->phase << 16 | (uint64_t)o->flags << 8 |
		      o->u.compute.kernel) * 0x9E3779B97F4A7C15ULL;
	h += (uint64_t)o->u.compute.m * 0xC2B2AE3D27D4EB4FULL + (uint64_t)o->u.compute.n * 0x165667B19E3779F9ULL +
	     (uint64_t)o->u.compute.k * 0x27D4EB2F165667C5ULL + fl * 0x94D049BB133111EBULL +
	     by * 0xBF58476D1CE4E5B9ULL;
	h ^= h >> 29;
	h *= 0xBF58476D1CE4E5B9ULL;
	h ^= h >> 32;
	if (!e->dur)
		e->dur = TW_NEW_ARRAY(struct dur_memo, DUR_SLOTS + 1); /* the last: no memo */
	size_t i = h & (DUR_SLOTS - 1);
	for (size_t probe = 0; probe < 16; probe++, i = (i + 1) & (DUR_SLOTS - 1)) {
		struct dur_memo *m = &e->dur[i];
		if (!m->used) {
			if (e->ndur * 2 > DUR_SLOTS)
				break; /* full enough: stop memoising */
			costs_fill(e, op, m);
			e->ndur++;
			return m;
		}
		if (m->stream == op->stream && m->phase == op->phase && m->flags == op->flags) {
			/* the whole shape, word by word (a memcmp call cost more than the rest) */
			uint64_t diff = 0;
			for (size_t k = 0; k < sizeof(m->shape) / 8; k++) {
				uint64_t w;
				memcpy(&w, (const char *)&op->u.compute + 8 * k, 8);
				diff |= w ^ m->shape[k];
			}
			if (!diff)
				return m;
		}
	}
	costs_fill(e, op, &e->dur[DUR_SLOTS]);
	return &e->dur[DUR_SLOTS];
}

static enum tw_result role_prepare(struct eng *e, struct role *ro)
{
	const struct plan *p = &ro->plan;
	size_t n = p->nops;
	ro->nops = n;
	if (n >= ((size_t)1 << (32 - SUCC_SHIFT)))
		return tw_errf(e->err, TW_ERR_LIMIT, "plan of rank %lld: %zu ops, over the simulator's limit of %zu",
			       (long long)p->rank, n, ((size_t)1 << (32 - SUCC_SHIFT)) - 1);
	/* arrays written in full below: malloc, not calloc (zeroing reused memory costs) */
	ro->ops = alloc_big(n * sizeof(*ro->ops));
	ro->ndeps = tw_malloc((n ? n : 1) * sizeof(*ro->ndeps));
	int64_t host_t = 0;
	ro->succ_off = TW_NEW_ARRAY(uint32_t, n + 1);
	ro->succ = tw_malloc((p->ndeps ? p->ndeps : 1) * sizeof(*ro->succ));
	uint32_t *doff = ro->doff = tw_malloc((n ? n : 1) * sizeof(*doff));
	/* each op's stream, for the per-stream lists at the end (a small array to read back) */
	uint8_t *stm = ro->stm = tw_malloc(n ? n : 1);
	/* names: a pointer seen before in this plan is the same string (most are static), so
	 * only new pointers are hashed */
	struct { const char *p; uint32_t off; } seen[256];
	memset(seen, 0, sizeof(seen));
	/* Megatron synchronizes the device after each batch of p2p isend/irecv
	 * (p2p_communication.py; Megatron-Core's batch_p2p_sync, default on): the host waits
	 * there until the batch is done. A batch: consecutive p2p ops (allocations between them
	 * do not count). Not for the interleaved schedule: its plan orders the p2p ops of the
	 * model chunks differently from Megatron's batches, and waiting there would deadlock.
	 * Context parallelism's KV exchange is not such a batch: Transformer Engine waits on its
	 * requests on the stream. */
	ro->nsync = 0;
	bool serial = e->j->strat.host_op_us > 0 &&
		      e->j->strat.schedule != STRAT_SCHED_INTERLEAVED && e->j->strat.vp <= 1;
	bool batches = serial && e->j->strat.framework == STRAT_MEGATRON;
	bool batch_open = false;
	uint32_t batch_first = 0, batch_last = 0;
	/* one pass over the plan (its ops are large: every pass is a trip to memory) */
	for (size_t i = 0; i < n; i++) {
		const struct plan_op *op = &p->ops[i];
		if (batches) {
			if (op->kind == PLAN_P2P && op->u.p2p.seq % PLAN_P2P_KINDS != PLAN_P2P_KV) {
				if (!batch_open)
					batch_first = (uint32_t)i;
				batch_open = true;
				batch_last = (uint32_t)i;
			} else if (op->kind != PLAN_ALLOC && op->kind != PLAN_FREE && op->kind != PLAN_P2P &&
				   batch_open) {
				add_sync(ro, batch_first, batch_last, false);
				batch_open = false;
			}
		}
		/* torch.cuda.synchronize() before the op is issued: the host waits for every op
		 * issued since its last sync (old DeepSpeed's ZeRO-3 fetch) */
		if (serial && (op->flags & PLAN_F_DEVSYNC) && i > 0) {
			uint32_t from = ro->nsync > 0 ? ro->sync_op[ro->nsync - 1] + 1 : 0;
			if (from < i)
				add_sync(ro, from, (uint32_t)(i - 1), true);
		}
		if (op->id != i)
			return tw_errf(e->err, TW_ERR_INTERNAL, "plan of rank %lld: op %zu has id %u",
				       (long long)p->rank, i, op->id);
		if (op->stream >= PLAN_NUM_STREAMS)
			return tw_errf(e->err, TW_ERR_INTERNAL, "plan of rank %lld: op %zu: stream %d",
				       (long long)p->rank, i, op->stream);
		const uint32_t *d = plan_op_deps(p, op);
		for (uint32_t k = 0; k < op->ndeps; k++) {
			if (d[k] >= i)
				return tw_errf(e->err, TW_ERR_INTERNAL,
					       "plan of rank %lld: op %zu depends on later op %u",
					       (long long)p->rank, i, d[k]);
			ro->succ_off[d[k] + 1]++;
		}
		ro->nsops[op->stream]++;
		ro->nevents += op->kind != PLAN_ALLOC && op->kind != PLAN_FREE;
		ro->ndeps[i] = op->ndeps;
		doff[i] = op->dep_off;
		stm[i] = op->stream;
		struct eop *eo = &ro->ops[i];
		*eo = (struct eop){ 0 };
		const char *nm = op->name ? op->name : plan_kind_name(op->kind);
		size_t h = (size_t)(((uintptr_t)nm >> 3) * 0x9E3779B97F4A7C15ULL >> 56);
		if (seen[h].p != nm) {
			seen[h].p = nm;
			seen[h].off = trace_intern(e->tr, nm);
		}
		eo->name = seen[h].off;
		if (op->kind == PLAN_COMPUTE) {
			const struct dur_memo *c = compute_costs(e, op);
			eo->dur = c->ns;
			eo->flops = op->u.compute.flops;
			eo->cat = c->cat;
			host_t += c->host_ns;
		} else {
			eo->cat = (uint8_t)plan_op_trace_cat(op);
			host_t += sim_host_ns(e->j, op);
		}
		eo->issue = host_t;
		eo->kind = op->kind;
		eo->stream = op->stream;
		eo->phase = op->phase;
		eo->flags = op->flags;
		eo->layer = op->layer;
		eo->micro = op->micro;
		eo->stage = op->stage;
		eo->named = op->name != NULL;
		switch (op->kind) {
		case PLAN_COPY:
			eo->dur = sim_copy_ns(e->j, op, NULL);
			eo->sub = op->u.copy.dir;
			eo->bytes = op->u.copy.bytes;
			break;
		case PLAN_COLL:
			eo->sub = op->u.coll.coll;
			eo->group = op->u.coll.group;
			eo->bytes = op->u.coll.bytes;
			eo->seq = (int32_t)op->u.coll.seq;
			break;
		case PLAN_P2P:
			eo->peer = (int32_t)op->u.p2p.peer;
			eo->bytes = op->u.p2p.bytes;
			eo->seq = (int32_t)op->u.p2p.seq;
			break;
		case PLAN_ALLOC:
		case PLAN_FREE:
			eo->sub = op->u.mem.dev < PLAN_NUM_DEVICES ? op->u.mem.dev : 0;
			eo->bytes = op->u.mem.bytes;
			break;
		default:
			break;
		}
		if (op->kind == PLAN_COLL) {
			int64_t g = job_group_size(e->j, op->u.coll.group);
			if (g > e->j->gpus || g < 1 || op->u.coll.group >= JOB_NUM_GROUPS)
				return tw_errf(e->err, TW_ERR_INVALID,
					       "op %s: collective group %s of %lld ranks does not fit the job's %lld GPUs",
					       op->name ? op->name : "?", job_group_name(op->u.coll.group),
					       (long long)g, (long long)e->j->gpus);
			e->group_size[op->u.coll.group] = (int32_t)g;
		}
		if (op->kind == PLAN_COLL || op->kind == PLAN_P2P) {
			int64_t seq = op->kind == PLAN_COLL ? op->u.coll.seq : op->u.p2p.seq;
			if (seq != (int64_t)eo->seq)
				return tw_errf(e->err, TW_ERR_LIMIT, "op %s: sequence number %lld beyond the simulator's 32-bit range",
					       op->name ? op->name : "?", (long long)seq);
		}
		if (op->kind == PLAN_P2P) {
			int64_t peer = op->u.p2p.peer;
			if (peer < 0 || peer >= e->j->gpus)
				return tw_errf(e->err, TW_ERR_INVALID, "op %s: p2p peer %lld outside the job's %lld GPUs",
					       op->name ? op->name : "?", (long long)peer, (long long)e->j->gpus);
		}
		/* a micro-batch's inputs come to the GPU with a blocking copy (PyTorch's .to() /
		 * .cuda() of pageable memory synchronizes the stream; Megatron's broadcast_data
		 * reads the sizes back with .cpu()): the host waits for the GPU there. Not for the
		 * interleaved schedule, for the reason above. A device-synced op: the host waits
		 * for it too (the module's fetch is complete before its forward is issued), and
		 * for an op whose stream it synchronizes (hpZ's secondary copy). */
		if (serial && (((op->flags & PLAN_F_BATCH) && op->kind == PLAN_COPY) ||
			       (op->flags & (PLAN_F_DEVSYNC | PLAN_F_HOSTWAIT))))
			add_sync(ro, (uint32_t)i, (uint32_t)i, (op->flags & PLAN_F_DEVSYNC) != 0);
	}
	/* the last batch of p2p ops */
	if (batch_open)
		add_sync(ro, batch_first, batch_last, false);
	for (size_t i = 0; i < n; i++)
		ro->succ_off[i + 1] += ro->succ_off[i];
	/* fill each op's list in op order with succ_off[d] as its cursor: it ends at the next
	 * op's start, so the offsets shift by one place after */
	for (size_t i = 0; i < n; i++) {
		const uint32_t *d = p->deps + doff[i];
		for (uint32_t k = 0; k < ro->ndeps[i]; k++)
			ro->succ[ro->succ_off[d[k]]++] = (uint32_t)i << SUCC_SHIFT | stm[i];
	}
	memmove(ro->succ_off + 1, ro->succ_off, n * sizeof(*ro->succ_off));
	ro->succ_off[0] = 0;
	free(doff);
	ro->doff = NULL;
	for (int s = 0; s < PLAN_NUM_STREAMS; s++) {
		ro->sops[s] = tw_malloc((ro->nsops[s] ? ro->nsops[s] : 1) * sizeof(uint32_t));
		ro->nsops[s] = 0;
	}
	for (size_t i = 0; i < n; i++)
		ro->sops[stm[i]][ro->nsops[stm[i]]++] = (uint32_t)i;
	free(stm);
	ro->stm = NULL;
	/* everything the run needs is in ro->ops now */
	plan_release(&ro->plan);
	return TW_OK;
}

static enum tw_result check_cluster(const struct job *j, struct tw_err *err)
{
	const struct cluster *c = &j->cluster;
	if (c->gpu.hbm_GBps <= 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: gpu.hbm_GBps: must be > 0", c->name);
	if (c->gpu.peak_tflops[TW_BF16] <= 0 && c->gpu.peak_tflops[TW_FP16] <= 0 &&
	    c->gpu.peak_tflops[TW_FP32] <= 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: gpu.peak_tflops: no dtype has a peak > 0", c->name);
	bool nvl = c->node.intra == CLUSTER_INTRA_NVSWITCH || c->node.intra == CLUSTER_INTRA_NVLINK_MESH;
	if (j->gpus > 1 && nvl && c->node.nvlink_GBps <= 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: node.nvlink_GBps: a link of zero bandwidth cannot carry the job's traffic", c->name);
	if (c->node.pcie_GBps <= 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: node.pcie_GBps: a link of zero bandwidth cannot carry the job's traffic", c->name);
	if (j->nodes > 1 && (c->net.nics_per_node <= 0 || c->net.nic_gbps <= 0))
		return tw_errf(err, TW_ERR_INVALID, "%s: net.nic_gbps: a link of zero bandwidth cannot carry traffic between the job's %d nodes",
			       c->name, j->nodes);
	if (j->nodes > 1 && c->net.nic_eff <= 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: net.nic_eff: must be > 0", c->name);
	for (int i = 0; i < c->n_stragglers; i++)
		if (c->stragglers[i].compute_scale <= 0 || c->stragglers[i].link_scale <= 0)
			return tw_errf(err, TW_ERR_INVALID, "%s: stragglers[%d]: compute_scale and link_scale must be > 0", c->name, i);
	return TW_OK;
}

static void eng_free(struct eng *e)
{
	for (int64_t i = 0; i < e->nroles; i++) {
		struct role *ro = &e->roles[i];
		plan_release(&ro->plan);
		free(ro->ops);
		free(ro->ndeps);
		free(ro->left);
		free(ro->doff);
		free(ro->stm);
		free(ro->sync_op);
		free(ro->sync_from);
		free(ro->sync_all);
		free(ro->succ_off);
		free(ro->succ);
		free(ro->reach);
		for (int s = 0; s < PLAN_NUM_STREAMS; s++)
			free(ro->sops[s]);
	}
	free(e->roles);
	free(e->sr);
	free(e->sr_of);
	free(e->canon_role);
	sim_heap_free(&e->heap);
	net_free(&e->net);
	free(e->inst);
	free(e->slots);
	free(e->waiters);
	free(e->free_inst);
	free(e->work);
	free(e->members);
	free(e->dur);
	free(e->expect);
	free(e->gnodes);
	free(e->color);
}

enum tw_result sim_run_plans(const struct job *j, const struct sim_options *opt,
			     const struct sim_plan_source *src, struct trace *out,
			     struct sim_stats *stats, struct tw_err *err)
{
	int64_t t_wall = tw_now_ns();
	bool unrunnable = false; /* NCCL_ALGO / NCCL_PROTO left a collective nothing */
	struct eng E, *e = &E;
	memset(e, 0, sizeof(E));
	e->j = j;
	/* a straggler is one GPU or node, which no representative stands for: full mode */
	struct sim_options o = *opt;
	bool asked_full = opt->full;
	o.full = opt->full || j->cluster.n_stragglers > 0;
	opt = &o;
	e->opt = opt;
	e->err = err;
	trace_init(out, TRACE_KIND_SIM, j->gpus);
	e->tr = out;
	enum tw_result rc = check_cluster(j, err);
	if (rc != TW_OK)
		return rc;
	if (j->gpus < 1 || j->gpus > (1LL << 24))
		return tw_errf(err, TW_ERR_INVALID, "job: %lld GPUs: the simulator takes 1 .. 16,777,216", (long long)j->gpus);
	if (opt->full && j->gpus > SIM_MAX_FULL_RANKS)
		return tw_errf(err, TW_ERR_LIMIT,
			       "%s: %lld ranks, over the full-mode limit of %d (symmetric mode has none)",
			       asked_full ? "--full" : "stragglers need full mode",
			       (long long)j->gpus, SIM_MAX_FULL_RANKS);

	/* roles: one per pipeline stage is what plan_roles gives for the Megatron layout */
	int64_t *reps = TW_NEW_ARRAY(int64_t, j->gpus), *weights = TW_NEW_ARRAY(int64_t, j->gpus);
	int64_t nroles = src->roles(src->ctx, j, reps, weights, j->gpus);
	if (nroles < 1) {
		free(reps);
		free(weights);
		return tw_errf(err, TW_ERR_INTERNAL, "plan: no roles for a job of %lld GPUs", (long long)j->gpus);
	}
	double hw_flops = 0; /* the job's, per step */
	e->roles = TW_NEW_ARRAY(struct role, nroles);
	e->nroles = nroles;
	e->canon_role = TW_NEW_ARRAY(int32_t, j->gpus);
	e->sr_of = TW_NEW_ARRAY(int32_t, j->gpus);
	e->members = TW_NEW_ARRAY(int64_t, j->gpus);
	for (int64_t r = 0; r < j->gpus; r++) {
		e->canon_role[r] = -1;
		e->sr_of[r] = -1;
	}
	for (int64_t i = 0; i < nroles; i++) {
		e->roles[i].rep = reps[i];
		rc = src->build(src->ctx, j, reps[i], &e->roles[i].plan, err);
		if (rc != TW_OK)
			goto done;
		hw_flops += e->roles[i].plan.hw_flops * (double)weights[i];
		rc = role_prepare(e, &e->roles[i]);
		if (rc != TW_OK)
			goto done;
	}
	/* rank -> role: the role whose representative is on the same pipeline stage */
	int64_t *rep_pp = TW_NEW_ARRAY(int64_t, nroles);
	for (int64_t i = 0; i < nroles; i++) {
		struct job_coord rc2;
		job_coord_of(j, reps[i], &rc2);
		rep_pp[i] = rc2.pp;
	}
	for (int64_t r = 0; r < j->gpus; r++) {
		struct job_coord c;
		job_coord_of(j, r, &c);
		for (int64_t i = 0; i < nroles; i++) {
			if (rep_pp[i] == c.pp) {
				e->canon_role[r] = (int32_t)i;
				break;
			}
		}
		if (e->canon_role[r] < 0) {
			free(rep_pp);
			rc = tw_errf(err, TW_ERR_INTERNAL, "plan: rank %lld has no role", (long long)r);
			goto done;
		}
	}
	free(rep_pp);
	/* simulated ranks */
	e->nsr = opt->full ? j->gpus : nroles;
	e->sr = TW_NEW_ARRAY(struct srank, e->nsr);
	for (int64_t i = 0; i < e->nsr; i++) {
		struct srank *s = &e->sr[i];
		s->rank = opt->full ? i : reps[i];
		s->role = opt->full ? e->canon_role[i] : (int32_t)i;
		s->node = job_node_of(j, s->rank);
		s->device = j->cluster.node.gpus > 0 ? (int32_t)(s->rank % j->cluster.node.gpus) : 0;
		s->compute_scale = 1.0;
		e->sr_of[s->rank] = (int32_t)i;
		s->lanes = e->roles[s->role].lanes++; /* its lane, until the counts are laid out */
		s->record = !opt->full || opt->trace_all || s->rank == e->roles[s->role].rep;
		if (e->roles[s->role].nsync > 0)
			s->sync_left = batch_size(&e->roles[s->role], 0);
	}
	for (int64_t r = 0; r < e->nroles; r++) {
		struct role *ro = &e->roles[r];
		if (ro->lanes == 1) {
			/* one simulated rank: it takes the counts over */
			ro->left = ro->ndeps;
			ro->ndeps = NULL;
		} else if (ro->lanes > 1) {
			ro->left = alloc_big(ro->nops * (size_t)ro->lanes * sizeof(*ro->left));
			for (size_t i = 0; i < ro->nops; i++)
				for (int64_t k = 0; k < ro->lanes; k++)
					ro->left[i * (size_t)ro->lanes + (size_t)k] = ro->ndeps[i];
		}
	}
	for (int64_t i = 0; i < e->nsr; i++) {
		struct srank *s = &e->sr[i];
		const struct role *ro = &e->roles[s->role];
		s->left = ro->left + s->lanes;
		s->lanes = ro->lanes;
	}
	e->expect = TW_NEW_ARRAY(int32_t, e->nsr * JOB_NUM_GROUPS);
	e->gnodes = TW_NEW_ARRAY(int32_t, e->nsr * JOB_NUM_GROUPS); /* zeroed: not yet */
	e->color = tw_malloc((size_t)(e->nsr * JOB_NUM_GROUPS) * sizeof(*e->color));
	for (int64_t i = 0; i < e->nsr * JOB_NUM_GROUPS; i++) {
		e->expect[i] = -1;
		e->color[i] = INT64_MIN;
	}
	net_init(&e->net, (int32_t)(e->nsr * LINKS_PER_GPU));
	{
		struct nccl_comm cm1;
		nccl_comm_from_cluster(&j->cluster, 2, 2, &cm1);
		e->link_GBps[LINK_NVL] = cm1.intra_GBps;
		e->link_GBps[LINK_NIC] = cm1.gpu_net_GBps;
		e->link_GBps[LINK_PCIE_UP] = e->link_GBps[LINK_PCIE_DOWN] = j->cluster.node.pcie_GBps;
		e->link_GBps[LINK_LEAF_UP] = cm1.gpu_net_GBps / cm1.oversub;
		e->leaf_nodes = cm1.leaf_nodes;
	}
	/* the trace holds one event per op (but ALLOC / FREE) of every recorded rank and its
	 * step marker: reserve it once */
	{
		size_t need = 0, mem = 0;
		for (int64_t i = 0; i < e->nsr; i++)
			if (e->sr[i].record) {
				need += e->roles[e->sr[i].role].nevents + 1;
				mem += e->roles[e->sr[i].role].nops - e->roles[e->sr[i].role].nevents;
			}
		free(out->ev);
		out->ev = alloc_big(need * sizeof(*out->ev));
		out->ev_cap = need;
		free(out->mem);
		out->mem = alloc_big(mem * sizeof(*out->mem)); /* a sample per ALLOC / FREE */
		out->mem_cap = mem;
	}
	/* stragglers (full mode): each entry multiplies the compute rate and the capacity of the
	 * chosen links of every GPU it covers */
	for (int i = 0; i < j->cluster.n_stragglers; i++) {
		const struct cluster_straggler *g = &j->cluster.stragglers[i];
		int64_t lim = g->by_node ? j->nodes : j->gpus;
		if (g->index < 0 || g->index >= lim) {
			rc = tw_errf(err, TW_ERR_INVALID, "%s: stragglers[%d].%s=%d: the job has %s 0 .. %lld",
				     j->cluster.name, i, g->by_node ? "node" : "gpu", g->index,
				     g->by_node ? "nodes" : "GPUs", (long long)lim - 1);
			goto done;
		}
		for (int64_t k = 0; k < e->nsr; k++) {
			struct srank *s = &e->sr[k];
			if (!cluster_straggler_covers(&j->cluster, g, s->rank))
				continue;
			s->compute_scale *= g->compute_scale;
			s->record = s->straggler = true;
			double *cap = &e->net.cap[k * LINKS_PER_GPU];
			if (g->links == CLUSTER_LINKS_ALL || g->links == CLUSTER_LINKS_NVLINK)
				cap[LINK_NVL] *= g->link_scale;
			if (g->links == CLUSTER_LINKS_ALL || g->links == CLUSTER_LINKS_NIC)
				cap[LINK_NIC] *= g->link_scale;
			if (g->links == CLUSTER_LINKS_ALL || g->links == CLUSTER_LINKS_PCIE) {
				cap[LINK_PCIE_UP] *= g->link_scale;
				cap[LINK_PCIE_DOWN] *= g->link_scale;
			}
		}
	}
	/* a straggler is told by its group peers' collectives: record those of its TP, CP, DP
	 * and expert groups too (at most SIM_MAX_PEERS_RECORDED more ranks) */
	if (j->cluster.n_stragglers > 0) {
		static const enum job_group pg[] = { JOB_GROUP_TP, JOB_GROUP_CP, JOB_GROUP_DP,
						     JOB_GROUP_DP_CP, JOB_GROUP_EP, JOB_GROUP_EDP,
						     JOB_GROUP_ETP };
		int64_t added = 0;
		for (int64_t k = 0; k < e->nsr && added < SIM_MAX_PEERS_RECORDED; k++) {
			const struct srank *st = &e->sr[k];
			if (!st->straggler)
				continue;
			for (size_t q = 0; q < sizeof(pg) / sizeof(pg[0]); q++) {
				if (job_group_size(j, pg[q]) < 2)
					continue;
				int64_t col = job_group_color(j, pg[q], st->rank);
				for (int64_t r = 0; r < e->nsr && added < SIM_MAX_PEERS_RECORDED; r++)
					if (!e->sr[r].record &&
					    job_group_color(j, pg[q], e->sr[r].rank) == col) {
						e->sr[r].record = true;
						added++;
					}
			}
		}
	}

	sim_heap_init(&e->heap);
	e->free_waiter = -1;
	for (int64_t i = 0; i < e->nsr; i++)
		for (int s = 0; s < PLAN_NUM_STREAMS; s++)
			push_work(e, (int32_t)i, s);
	drain(e);
	int64_t max_ev = opt->max_events > 0 ? opt->max_events : DEFAULT_MAX_EVENTS;
	struct sim_ev ev;
	while (sim_heap_pop(&e->heap, &ev)) {
		if (sim_ev_type(&ev) == EV_FLOW_END &&
		    (!e->net.flows[ev.a].active || e->net.flows[ev.a].ver != ev.ver))
			continue; /* superseded by a rate change */
		if (sim_ev_type(&ev) == EV_OP_END && ev.ver != 0 && ev.ver != e->sr[ev.a].cver)
			continue; /* a compute op's end moved by retime_compute */
		if (++e->events > max_ev) {
			rc = tw_errf(err, TW_ERR_LIMIT,
				     "simulation stopped after %lld events (--max-events %lld) at t=%.6f s: raise --max-events or simulate fewer ranks",
				     (long long)max_ev, (long long)max_ev, (double)ev.t * 1e-9);
			goto done;
		}
		if (ev.t > SIM_HORIZON_NS) {
			rc = tw_errf(err, TW_ERR_LIMIT,
				     "simulated time passed 10^18 ns (31.7 years) after %lld events: a "
				     "rate of the cluster or the strategy is too small to simulate "
				     "(check the cluster file and the --set values)",
				     (long long)e->events);
			goto done;
		}
		if (e->no_algo.set) {
			rc = no_algo_error(e);
			goto done;
		}
		e->now = ev.t;
		switch (sim_ev_type(&ev)) {
		case EV_OP_END:
			complete_op(e, ev.a, (uint32_t)ev.b, ev.t);
			break;
		case EV_COMM_DATA:
			comm_data(e, ev.a, ev.b);
			break;
		case EV_HOST:
			e->sr[ev.a].wake[ev.b] = false;
			push_work(e, ev.a, (int)ev.b);
			break;
		case EV_FLOW_END: {
			int32_t owner = e->net.flows[ev.a].owner;
			net_remove(&e->net, e->now, ev.a, on_flow_changed, e);
			comm_end(e, owner);
			break;
		}
		}
		drain(e);
	}
	if (e->no_algo.set) {
		rc = no_algo_error(e);
		goto done;
	}
	/* everything done? */
	int64_t step = 0;
	for (int64_t i = 0; i < e->nsr; i++) {
		struct srank *s = &e->sr[i];
		const struct role *ro = &e->roles[s->role];
		if ((size_t)s->ndone != ro->nops) {
			const struct eop *stuck = NULL;
			uint32_t stuck_id = 0;
			for (int st = 0; st < PLAN_NUM_STREAMS && !stuck; st++)
				if (s->head[st] < ro->nsops[st]) {
					stuck_id = ro->sops[st][s->head[st]];
					stuck = &ro->ops[stuck_id];
				}
			rc = tw_errf(err, TW_ERR_INVALID,
				     "simulation deadlocked: rank %lld finished %lld of %zu ops; op %u (%s %s) waits for a peer that never issues it",
				     (long long)s->rank, (long long)s->ndone, ro->nops, stuck_id,
				     stuck ? plan_kind_name((enum plan_kind)stuck->kind) : "?",
				     stuck && stuck->named ? e->tr->strings + stuck->name : "");
			goto done;
		}
		if (s->end_ns > step)
			step = s->end_ns;
	}
	/* one step marker per recorded rank: the step is a barrier for every rank (the optimizer
	 * step closes it), so the analysis measures every rank over the same window */
	for (int64_t i = 0; i < e->nsr; i++) {
		if (!e->sr[i].record)
			continue;
		struct trace_event m;
		memset(&m, 0, sizeof(m));
		m.rank = (int32_t)e->sr[i].rank;
		m.device = -1;
		m.stream = -1;
		m.cat = TRACE_MARKER;
		m.step = 0;
		m.op_id = m.layer = m.micro = m.stage = m.phase = -1;
		m.start_ns = 0;
		m.end_ns = step;
		struct trace_event *te = trace_add(out, &m);
		te->name = trace_intern(out, "step 0");
	}
	/* peak memory per rank (the simulated timeline's peak + context + fragmentation) */
	out->peak_mem = TW_NEW_ARRAY(int64_t, j->gpus);
	double frag = j->cluster.eff.alloc_fragmentation >= 1.0 ? j->cluster.eff.alloc_fragmentation : 1.0;
	int64_t ctx = (int64_t)(j->cluster.gpu.context_gib * (double)TW_GIB);
	for (int64_t r = 0; r < j->gpus; r++) {
		int32_t si = e->sr_of[r] >= 0 ? e->sr_of[r] : e->sr_of[canon(e, r)];
		if (si >= 0)
			out->peak_mem[r] = (int64_t)((double)e->sr[si].peak[PLAN_DEV_GPU] * frag) + ctx;
	}
	if (stats) {
		stats->events = e->events;
		stats->ranks_simulated = e->nsr;
		stats->full = opt->full;
		stats->step_ns = step;
		stats->hw_flops = hw_flops / (double)j->gpus;
	}
	rc = TW_OK;
done:
	unrunnable = e->no_algo.set;
	free(reps);
	free(weights);
	eng_free(e);
	if (stats) {
		stats->wall_ns = tw_now_ns() - t_wall;
		stats->nccl_unrunnable = rc != TW_OK && unrunnable;
	}
	if (rc != TW_OK) {
		trace_release(out);
		trace_init(out, TRACE_KIND_SIM, j->gpus);
	}
	return rc;
}

