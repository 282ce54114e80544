/* exec_run — the executor's entry point: this rank's plan from the one plan builder
 * (plan_rank), checked against the memory model (plan_memory, plan_mem_shortfall: GPU, then
 * host) before anything is allocated, then walked (exec/exec.c). Kept apart from the walker so
 * that unit tests can walk hand-built plans. */
#include "backend.h"

#include <stdio.h>

static enum tw_result plan_and_check(void *ctx, const struct job *j, int64_t rank, struct plan *p,
				     struct plan_mem *pred, struct tw_err *err)
{
	(void)ctx;
	TW_CHECK(plan_rank(j, rank, p, err));
	TW_CHECK(plan_memory(j, p, pred, err));
	/* the verdict twin memory and twin simulate give: the GPU, then the host's share (states
	 * offloaded to CPU memory live there) */
	char verdict[400];
	int64_t short_bytes = plan_mem_shortfall(pred, verdict, sizeof(verdict));
	if (short_bytes <= 0)
		return TW_OK;
	bool host = pred->gpu_total <= pred->gpu_capacity;
	int dev = host ? PLAN_DEV_HOST : PLAN_DEV_GPU;
	char br[256] = "";
	size_t o = 0;
	for (int c = 0; c < PLAN_NUM_MEM_CATS && o < sizeof(br) - 48; c++)
		if (pred->at_peak[dev][c] > 0)
			o += (size_t)snprintf(br + o, sizeof(br) - o, "%s%s %.3f GiB", o ? ", " : "",
					      plan_mem_cat_name((enum plan_mem_cat)c),
					      (double)pred->at_peak[dev][c] / TW_GIB);
	if (host)
		return tw_errf(err, TW_ERR_LIMIT,
			       "rank %lld: the plan does not fit in host memory, nothing was allocated: predicted %.3f GiB of %.3f GiB per rank (%s): needs %.3f GiB more",
			       (long long)rank, (double)pred->peak[PLAN_DEV_HOST] / TW_GIB,
			       (double)pred->host_capacity / TW_GIB, br, (double)short_bytes / TW_GIB);
	return tw_errf(err, TW_ERR_LIMIT,
		       "rank %lld: the plan does not fit, nothing was allocated: predicted %.3f GiB of %.3f GiB (%s; context %.3f GiB, fragmentation %.3f GiB): %s",
		       (long long)rank, (double)pred->gpu_total / TW_GIB,
		       (double)pred->gpu_capacity / TW_GIB, br, (double)pred->context_bytes / TW_GIB,
		       (double)pred->fragmentation_bytes / TW_GIB, verdict);
}

enum tw_result exec_run(const struct job *j, const struct exec_options *opt, struct trace *out,
			struct exec_result *res, struct tw_err *err)
{
	return exec_run_plan(j, opt, plan_and_check, NULL, out, res, err);
}

