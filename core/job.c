/* job — loading the three inputs together, and the rank layout shared by both engines. */
#include "job.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum tw_result job_load(const struct job_inputs *in, struct job *out, struct tw_err *err)
{
	memset(out, 0, sizeof(*out));
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/examples/models", in->data_dir);
	TW_CHECK(model_load(in->model, dir, &out->model, err));

	/* --set paths go to the cluster or to the strategy by their first component */
	const char *csets[64], *ssets[64];
	int nc = 0, ns = 0;
	for (int i = 0; i < in->nsets && i < 64; i++) {
		const char *eq = strchr(in->sets[i], '=');
		char path[128];
		size_t n = eq ? (size_t)(eq - in->sets[i]) : strlen(in->sets[i]);
		if (n >= sizeof(path))
			n = sizeof(path) - 1;
		memcpy(path, in->sets[i], n);
		path[n] = '\0';
		if (cluster_owns_path(path))
			csets[nc++] = in->sets[i];
		else
			ssets[ns++] = in->sets[i];
	}
	snprintf(dir, sizeof(dir), "%s/topologies", in->data_dir);
	TW_CHECK(cluster_load(in->cluster, dir, csets, nc, &out->cluster, err));

	int64_t gpus = in->gpus ? in->gpus : out->cluster.node.gpus;
	TW_CHECK(cluster_check_gpus(&out->cluster, gpus, &out->nodes, err));
	out->gpus = gpus;
	out->pace = cluster_job_pace(&out->cluster, gpus);

	char sdir[1024];
	snprintf(sdir, sizeof(sdir), "%s/examples/strategies", in->data_dir);
	struct strat_inputs si = {
		.ds_config_path = in->ds_config,
		.strategy_path = in->strategy,
		.strategies_dir = sdir,
		.sets = ssets,
		.nsets = ns,
		.gpus = gpus,
		.quiet = in->quiet,
	};
	TW_CHECK(strategy_resolve(&si, &out->model, &out->cluster, &out->strat, err));
	out->seq = out->strat.seq_len ? out->strat.seq_len : out->model.seq_len;
	if (!tw_mul64(out->strat.global_batch, out->seq, &out->tokens_per_step))
		return tw_errf(err, TW_ERR_INVALID, "global_batch x seq_len overflows 64 bits");
	return TW_OK;
}

static const char *const group_names[JOB_NUM_GROUPS] = {
	"world", "tp", "cp", "dp", "dp_cp", "pp", "ep", "edp", "shard", "replica", "embedding",
	"hpz", "node", "xnode", "shard_xnode", "etp", "ep_node", "ep_xnode", "tp_cp",
};

const char *job_group_name(enum job_group g)
{
	return (int)g >= 0 && g < JOB_NUM_GROUPS ? group_names[g] : "?";
}

void job_coord_of(const struct job *j, int64_t rank, struct job_coord *out)
{
	const struct strategy *s = &j->strat;
	out->tp = rank % s->tp;
	rank /= s->tp;
	out->cp = rank % s->cp;
	rank /= s->cp;
	out->dp = rank % s->dp;
	out->pp = rank / s->dp;
}

int64_t job_rank_of(const struct job *j, const struct job_coord *c)
{
	const struct strategy *s = &j->strat;
	return c->tp + s->tp * (c->cp + s->cp * (c->dp + s->dp * c->pp));
}

/* A block of g consecutive dp ranks, g dividing dp (dp otherwise). */
static int64_t dp_block(const struct job *j, int64_t g)
{
	return g < 1 || g > j->strat.dp || j->strat.dp % g ? j->strat.dp : g;
}

/* Expert groups are carved out of a stage's tp x dp x strat_ep_cp ranks (strat_ep_span), in
 * rank order (tp fastest, then the folded cp, then dp), as Megatron-Core's expert rank
 * generator orders them: expert_tp fastest, then ep, then the expert data-parallel replicas.
 * With expert_tp = tp an expert group keeps its tp index. Index of coordinate c: */
static int64_t ep_index(const struct job *j, const struct job_coord *c)
{
	int64_t fold = strat_ep_cp(&j->strat);
	return c->tp + j->strat.tp * (c->cp % fold + fold * c->dp);
}

/* Set coordinate m to index q of those ranks. */
static void ep_place(const struct job *j, struct job_coord *m, int64_t q)
{
	int64_t fold = strat_ep_cp(&j->strat);
	m->tp = q % j->strat.tp;
	q /= j->strat.tp;
	if (fold > 1)
		m->cp = q % fold;
	m->dp = q / fold;
}

/* HYBRID_SHARD / MiCS shard group size: ranks that shard one replica (within dp). */
static int64_t shard_size(const struct job *j)
{
	return dp_block(j, j->strat.shard_group);
}

/* The dp ranks of one node: ranks fill nodes in order, tp and cp vary fastest. */
static int64_t node_dp(const struct job *j)
{
	int64_t inner = j->strat.tp * j->strat.cp, per = j->cluster.node.gpus;
	return dp_block(j, per >= inner && inner > 0 ? per / inner : 1);
}

static int64_t block_of(const struct job *j, enum job_group g)
{
	return g == JOB_GROUP_HPZ ? dp_block(j, j->strat.zero_hpz > 1 ? j->strat.zero_hpz : 1)
	       : g == JOB_GROUP_NODE || g == JOB_GROUP_XNODE ? node_dp(j)
							       : shard_size(j);
}

/* The expert group's members per node, L, where every node it spans holds L of them in a run
 * (members ascend with the rank); else the group's size. Expert groups are laid out alike, so
 * rank 0's says it for all. */
static int64_t ep_per_node(const struct job *j)
{
	int64_t ep = j->strat.ep > 1 ? j->strat.ep : 1, stackbuf[64];
	int64_t *m = ep <= 64 ? stackbuf : tw_malloc((size_t)ep * sizeof(int64_t));
	job_group_members(j, JOB_GROUP_EP, 0, m, NULL);
	int64_t L = 1;
	while (L < ep && job_node_of(j, m[L]) == job_node_of(j, m[0]))
		L++;
	bool even = ep % L == 0;
	for (int64_t i = 0; even && i < ep; i++)
		even = job_node_of(j, m[i]) == job_node_of(j, m[i - i % L]) &&
		       (i % L || i == 0 || job_node_of(j, m[i]) != job_node_of(j, m[i - 1]));
	if (m != stackbuf)
		free(m);
	return even ? L : ep;
}

int64_t job_group_size(const struct job *j, enum job_group g)
{
	const struct strategy *s = &j->strat;
	switch (g) {
	case JOB_GROUP_WORLD:
		return j->gpus;
	case JOB_GROUP_TP:
		return s->tp;
	case JOB_GROUP_CP:
		return s->cp;
	case JOB_GROUP_DP:
		return s->dp;
	case JOB_GROUP_DP_CP:
		return s->dp * s->cp;
	case JOB_GROUP_TP_CP:
		return s->tp * s->cp;
	case JOB_GROUP_PP:
		return s->pp;
	case JOB_GROUP_EP:
		return s->ep;
	case JOB_GROUP_EDP:
		return strat_ep_span(s) / ((s->ep > 0 ? s->ep : 1) * strat_expert_tp(s));
	case JOB_GROUP_ETP:
		return strat_expert_tp(s);
	case JOB_GROUP_EP_NODE:
		return s->ep > 1 ? ep_per_node(j) : 1;
	case JOB_GROUP_EP_XNODE:
		return s->ep > 1 ? s->ep / ep_per_node(j) : 1;
	case JOB_GROUP_SHARD:
	case JOB_GROUP_HPZ:
	case JOB_GROUP_NODE:
		return block_of(j, g);
	case JOB_GROUP_REPLICA:
	case JOB_GROUP_XNODE:
		return s->dp / block_of(j, g);
	case JOB_GROUP_SHARD_XNODE:
		return shard_size(j) / node_dp(j) > 1 ? shard_size(j) / node_dp(j) : 1;
	case JOB_GROUP_EMB:
		return s->pp > 1 ? 2 : 1;
	default:
		return 1;
	}
}

/* Members in ascending rank order: enumerate the coordinate that varies within the group. */
int64_t job_group_members(const struct job *j, enum job_group g, int64_t rank, int64_t *out,
			  int64_t *index)
{
	const struct strategy *s = &j->strat;
	struct job_coord c, m;
	job_coord_of(j, rank, &c);
	int64_t n = job_group_size(j, g), k = 0, self = 0;
	if (g == JOB_GROUP_EMB && c.pp != 0 && c.pp != s->pp - 1)
		n = 1; /* a middle stage holds no embedding: its own group */
	int64_t ep = s->ep > 0 ? s->ep : 1, sh = block_of(j, g), et = strat_expert_tp(s);
	int64_t q = ep_index(j, &c), qt = q % et, qe = q / et % ep, qd = q / (et * ep);
	int64_t run = g == JOB_GROUP_EP_NODE || g == JOB_GROUP_EP_XNODE ? ep_per_node(j) : 1;
	for (int64_t i = 0; i < n; i++) {
		m = c;
		switch (g) {
		case JOB_GROUP_WORLD:
			job_coord_of(j, i, &m);
			break;
		case JOB_GROUP_TP:
			m.tp = i;
			break;
		case JOB_GROUP_CP:
			m.cp = i;
			break;
		case JOB_GROUP_DP:
			m.dp = i;
			break;
		case JOB_GROUP_DP_CP: /* cp varies faster than dp in rank order */
			m.cp = i % s->cp;
			m.dp = i / s->cp;
			break;
		case JOB_GROUP_TP_CP: /* tp varies fastest, then cp: one block of ranks */
			m.tp = i % s->tp;
			m.cp = i / s->tp;
			break;
		case JOB_GROUP_PP:
			m.pp = i;
			break;
		case JOB_GROUP_EP:
			ep_place(j, &m, qt + et * (i + ep * qd));
			break;
		case JOB_GROUP_EDP:
			ep_place(j, &m, qt + et * (qe + ep * i));
			break;
		case JOB_GROUP_ETP:
			ep_place(j, &m, i + et * (qe + ep * qd));
			break;
		case JOB_GROUP_EP_NODE: /* the run of expert ranks the rank's node holds */
			ep_place(j, &m, qt + et * (qe / run * run + i + ep * qd));
			break;
		case JOB_GROUP_EP_XNODE: /* the same place in every node's run */
			ep_place(j, &m, qt + et * (qe % run + i * run + ep * qd));
			break;
		case JOB_GROUP_SHARD:
		case JOB_GROUP_HPZ:
		case JOB_GROUP_NODE:
			m.dp = (c.dp / sh) * sh + i;
			break;
		case JOB_GROUP_REPLICA:
		case JOB_GROUP_XNODE:
			m.dp = (c.dp % sh) + i * sh;
			break;
		case JOB_GROUP_SHARD_XNODE: { /* within the shard group, a node apart */
			int64_t shard = shard_size(j), L = node_dp(j);
			m.dp = (c.dp / shard) * shard + c.dp % L + i * L;
			break;
		}
		case JOB_GROUP_EMB:
			if (n > 1)
				m.pp = i == 0 ? 0 : s->pp - 1;
			break;
		default:
			break;
		}
		int64_t r = job_rank_of(j, &m);
		if (r == rank)
			self = k;
		if (out)
			out[k] = r;
		k++;
	}
	if (index)
		*index = self;
	return n;
}

int64_t job_group_color(const struct job *j, enum job_group g, int64_t rank)
{
	int64_t first;
	int64_t n = job_group_size(j, g);
	if (n <= 0)
		return rank;
	/* the smallest member identifies the group instance */
	int64_t stackbuf[64];
	int64_t *buf = n <= 64 ? stackbuf : tw_malloc((size_t)n * sizeof(int64_t));
	n = job_group_members(j, g, rank, buf, NULL); /* a middle stage's embedding group: 1 */
	first = buf[0];
	for (int64_t i = 1; i < n; i++)
		if (buf[i] < first)
			first = buf[i];
	if (buf != stackbuf)
		free(buf);
	return first;
}

int job_node_of(const struct job *j, int64_t rank)
{
	int per = j->cluster.node.gpus > 0 ? j->cluster.node.gpus : 1;
	return (int)(rank / per);
}

int64_t job_node_ranks(const struct job *j)
{
	int64_t per = j->cluster.node.gpus > 0 ? j->cluster.node.gpus : 1;
	return j->gpus > 0 && j->gpus < per ? j->gpus : per;
}

struct cJSON *job_to_json(const struct job *j)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "model", model_to_json(&j->model));
	cJSON_AddItemToObject(o, "cluster", cluster_to_json(&j->cluster));
	cJSON_AddItemToObject(o, "strategy", strategy_to_json(&j->strat));
	cJSON_AddNumberToObject(o, "gpus", (double)j->gpus);
	cJSON_AddNumberToObject(o, "nodes", j->nodes);
	return o;
}

double job_peak_tflops(const struct job *j)
{
	return cluster_gemm_peak(j->cluster.gpu.peak_tflops, j->strat.param_dtype, j->strat.fp8_gemm,
				 j->strat.tf32);
}
