/* job — model x cluster x strategy, loaded and validated together, and the rank layout that
 * both engines share: which ranks form each communicator group.
 *
 * Rank order is Megatron's: tp fastest, then cp, then dp, then pp:
 *   rank = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i)).
 * Expert parallel groups are carved out of the dp x cp ranks of one stage (ep consecutive
 * dp ranks), as Megatron and DeepSpeed-MoE do. */
#ifndef TW_JOB_H
#define TW_JOB_H

#include "cluster.h"
#include "model.h"
#include "strategy.h"

struct job {
	struct model model;
	struct cluster cluster;
	struct strategy strat;
	int64_t gpus;
	int nodes;
	int64_t seq;          /* tokens per sample actually trained */
	int64_t tokens_per_step; /* global_batch * seq */
	double pace;          /* time multiplier of GPU compute: the pace of the job's slowest
			       * GPU (cluster_job_pace); 0 in a job built by hand: 1 */
};

/* Where the inputs come from (the CLI fills this from its options). */
struct job_inputs {
	const char *model;        /* preset or path */
	const char *cluster;      /* preset or path */
	const char *ds_config;    /* path or NULL */
	const char *strategy;     /* preset or path or NULL */
	const char *const *sets;  /* --set PATH=VALUE, cluster or strategy paths */
	int nsets;
	int64_t gpus;             /* --gpus, 0: all GPUs of one node */
	const char *data_dir;     /* repository root: examples/, topologies/ */
	bool quiet;               /* no warnings about the inputs (strat_inputs.quiet) */
};

enum tw_result job_load(const struct job_inputs *in, struct job *out, struct tw_err *err);

/* Communicator groups. */
enum job_group {
	JOB_GROUP_WORLD = 0,
	JOB_GROUP_TP,
	JOB_GROUP_CP,
	JOB_GROUP_DP,       /* data-parallel replicas of the same shard (same tp, cp, pp index) */
	JOB_GROUP_DP_CP,    /* dp x cp: gradient reduction when cp > 1 */
	JOB_GROUP_PP,
	JOB_GROUP_EP,       /* expert-parallel: all-to-all */
	JOB_GROUP_EDP,      /* expert data-parallel: replicas of the same experts */
	JOB_GROUP_SHARD,    /* FSDP HYBRID_SHARD / DeepSpeed MiCS shard group (strategy
			     * shard_group consecutive dp ranks) */
	JOB_GROUP_REPLICA,  /* their replica group: the same place in every shard group */
	JOB_GROUP_EMB,      /* the first and the last pipeline stage (same tp, cp, dp): tied
			     * embedding grads; a middle stage's rank is alone in its own */
	JOB_GROUP_HPZ,      /* DeepSpeed hpZ: zero_hpz consecutive dp ranks */
	JOB_GROUP_NODE,     /* the dp ranks of one node (DeepSpeed qgZ's intra-node all-to-all) */
	JOB_GROUP_XNODE,    /* the same place in every node's dp ranks (its inter-node one) */
	JOB_GROUP_SHARD_XNODE, /* the same place in every node of a MiCS shard group (its
				* hierarchical gather's inter-node step; the intra-node one is
				* JOB_GROUP_NODE) */
	JOB_GROUP_ETP,      /* the experts' tensor-parallel group (expert_tp; the tp group's
			     * ranks unless the expert groups are folded) */
	JOB_GROUP_EP_NODE,  /* the members of the expert group on the rank's node */
	JOB_GROUP_EP_XNODE, /* those at the rank's place among its node's, one per node (DeepEP's
			     * network stage); where the nodes hold unequal shares of the group,
			     * EP_NODE is the whole group and EP_XNODE the rank alone */
	JOB_GROUP_TP_CP,    /* tp x cp: Megatron-Core's MoE router sums its token counts there */
	JOB_NUM_GROUPS
};
const char *job_group_name(enum job_group g);

/* Coordinates of a rank. */
struct job_coord {
	int64_t tp, cp, dp, pp;
};
void job_coord_of(const struct job *j, int64_t rank, struct job_coord *out);
int64_t job_rank_of(const struct job *j, const struct job_coord *c);

/* Size of group g and the members of the group that contains rank (ascending order, out has
 * room for job_group_size entries; may be NULL). Returns the number of members (the size; 1
 * for a middle pipeline stage's rank in JOB_GROUP_EMB); *index is rank's index. */
int64_t job_group_size(const struct job *j, enum job_group g);
int64_t job_group_members(const struct job *j, enum job_group g, int64_t rank, int64_t *out,
			  int64_t *index);
/* A number that is equal for all ranks of the same group instance (MPI_Comm_split color). */
int64_t job_group_color(const struct job *j, enum job_group g, int64_t rank);

/* Node of a rank (ranks fill nodes in order). */
int job_node_of(const struct job *j, int64_t rank);
/* The job's ranks on one node, which share its host memory, CPU and drives: the node's GPUs,
 * or the job's when it is smaller than a node. */
int64_t job_node_ranks(const struct job *j);

/* Full description as JSON (stored with runs); caller frees. */
struct cJSON *job_to_json(const struct job *j);

/* cluster_gemm_peak of the job's GPU and strategy: the denominator of MFU and HFU. */
double job_peak_tflops(const struct job *j);

#endif
