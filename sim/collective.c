/* One collective on its own (twin validate's collective cases): nccl-tests' set-up, or one
 * blocking call whose host dispatch the benchmark's timing window holds. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim_int.h"

/* the result of a collective of S bytes over ranks GPUs that took nccl_us, timed with host_us
 * of host dispatch inside the window */
static void coll_result(struct sim_coll_result *out, double S, double factor, double nccl_us,
			double host_us)
{
	out->nccl_us = nccl_us;
	out->time_us = nccl_us + host_us;
	out->algbw_GBps = S / (out->time_us * 1e3);
	out->busbw_GBps = out->algbw_GBps * factor;
}

enum tw_result sim_collective(const struct cluster *c, const char *op, double S, int64_t ranks,
			      const char *algo, double host_us, const struct sim_nccl_env *env,
			      struct sim_coll_result *out, struct tw_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!(host_us >= 0) || !isfinite(host_us))
		return tw_errf(err, TW_ERR_INVALID, "collective: host_us=%g: must be a finite number >= 0", host_us);
	if (ranks < 2)
		return tw_errf(err, TW_ERR_INVALID, "collective: ranks=%lld: needs at least 2", (long long)ranks);
	if (!(S > 0) || !isfinite(S))
		return tw_errf(err, TW_ERR_INVALID, "collective: bytes: must be a finite number > 0");
	int gpn = c->node.gpus > 0 ? c->node.gpus : 1;
	int64_t nodes = (ranks + gpn - 1) / gpn;
	if (ranks > gpn && ranks % gpn != 0)
		return tw_errf(err, TW_ERR_INVALID, "collective: ranks=%lld: not whole nodes of %d GPUs",
			       (long long)ranks, gpn);
	if (c->net.max_nodes > 0 && nodes > c->net.max_nodes)
		return tw_errf(err, TW_ERR_INVALID, "collective: ranks=%lld: a group larger than the cluster (%d nodes of %d GPUs)",
			       (long long)ranks, c->net.max_nodes, gpn);
	struct nccl_comm cm;
	nccl_comm_from_cluster(c, ranks, nodes, &cm);
	if (env)
		nccl_comm_env(&cm, env);
	if (cm.intra_GBps <= 0 || (nodes > 1 && cm.inter_GBps <= 0))
		return tw_errf(err, TW_ERR_INVALID, "%s: a link of zero bandwidth on the collective's path", c->name);
	struct nccl_result r;
	int coll = -1;
	for (int i = 0; i < PLAN_NUM_COLLS; i++)
		if (strcmp(op, plan_coll_name((enum plan_coll)i)) == 0)
			coll = i;
	if (strcmp(op, "sendrecv") == 0) {
		/* nccl-tests sendrecv: each rank sends S to the next and receives from the previous */
		nccl_p2p(&cm, S, nodes == 1, &r);
		coll_result(out, S, 1.0, r.time_us, host_us);
		snprintf(out->algo, sizeof(out->algo), "p2p");
		snprintf(out->proto, sizeof(out->proto), "Simple");
		return TW_OK;
	}
	if (coll < 0)
		return tw_errf(err, TW_ERR_INVALID, "collective: op=%s: not one of all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, sendrecv", op);
	if (coll == PLAN_ALL_TO_ALL) {
		nccl_alltoall(&cm, S, &r);
	} else {
		int a = -1;
		if (algo && !nccl_algo_parse(algo, &a))
			return tw_errf(err, TW_ERR_INVALID, "collective: algo=%s: not ring, tree, nvls, pat or nvlstree", algo);
		/* a case's algorithm that cannot run here falls back to the tuner's choice: it is a
		 * reading of what ran, not NCCL_ALGO (which would make NCCL refuse the call; the
		 * strategy's nccl_algo does that) */
		if (!nccl_predict(&cm, (enum plan_coll)coll, S, a, &r) &&
		    !nccl_predict(&cm, (enum plan_coll)coll, S, -1, &r))
			return tw_errf(err, TW_ERR_INVALID, "collective: %s over %lld ranks: %s", op,
				       (long long)ranks,
				       cm.no_algos || cm.no_protos
					       ? "NCCL has no algorithm and protocol among those NCCL_ALGO and NCCL_PROTO leave (\"No algorithm/protocol available\")"
					       : "no algorithm applies");
	}
	coll_result(out, S, nccl_busbw_factor((enum plan_coll)coll, ranks), r.time_us, host_us);
	snprintf(out->algo, sizeof(out->algo), "%s", nccl_algo_name(r.algo));
	snprintf(out->proto, sizeof(out->proto), "%s", nccl_proto_name(r.proto));
	return TW_OK;
}
