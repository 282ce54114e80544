/* sim_run: the simulator over the plans of core/plan (plan_rank, plan_roles). */
#include "sim_int.h"

static enum tw_result build_plan(void *ctx, const struct job *j, int64_t rank, struct plan *out,
				 struct tw_err *err)
{
	(void)ctx;
	return plan_rank(j, rank, out, err);
}

static int64_t plan_roles_src(void *ctx, const struct job *j, int64_t *reps, int64_t *weights,
			      int64_t n)
{
	(void)ctx;
	return plan_roles(j, reps, weights, n);
}

enum tw_result sim_run(const struct job *j, const struct sim_options *opt, struct trace *out,
		       struct sim_stats *stats, struct tw_err *err)
{
	struct sim_plan_source src = { .ctx = NULL, .build = build_plan, .roles = plan_roles_src };
	return sim_run_plans(j, opt, &src, out, stats, err);
}
