/* plan_mem — the memory walk: apply a plan's ALLOC/FREE in op order and keep, per device, the
 * peak of live bytes with the breakdown by category at that moment (docs/memory.md). */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_state(int cat)
{
	return cat == PLAN_MEM_PARAMS || cat == PLAN_MEM_MASTER || cat == PLAN_MEM_GRADS ||
	       cat == PLAN_MEM_OPTIM || cat == PLAN_MEM_GATHERED;
}

enum tw_result plan_memory(const struct job *j, const struct plan *p, struct plan_mem *out,
			   struct tw_err *err)
{
	memset(out, 0, sizeof(*out));
	int64_t live[PLAN_NUM_DEVICES][PLAN_NUM_MEM_CATS] = {{0}};
	int64_t total[PLAN_NUM_DEVICES] = {0}, states[PLAN_NUM_DEVICES] = {0};
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *op = &p->ops[i];
		if (op->kind != PLAN_ALLOC && op->kind != PLAN_FREE)
			continue;
		int d = op->u.mem.dev, c = op->u.mem.cat;
		if (d >= PLAN_NUM_DEVICES || c >= PLAN_NUM_MEM_CATS)
			return tw_errf(err, TW_ERR_INTERNAL, "plan op %zu: bad device or category", i);
		int64_t delta = op->kind == PLAN_ALLOC ? op->u.mem.bytes : -op->u.mem.bytes;
		live[d][c] += delta;
		total[d] += delta;
		if (is_state(c))
			states[d] += delta;
		if (live[d][c] < 0)
			return tw_errf(err, TW_ERR_INTERNAL,
				       "plan op %zu frees more %s than was allocated", i,
				       plan_mem_cat_name((enum plan_mem_cat)c));
		if (live[d][c] > out->max_cat[d][c])
			out->max_cat[d][c] = live[d][c];
		if (states[d] > out->states_peak[d])
			out->states_peak[d] = states[d];
		if (total[d] > out->peak[d]) {
			out->peak[d] = total[d];
			out->peak_op[d] = op->id;
			memcpy(out->at_peak[d], live[d], sizeof(live[d]));
		}
	}
	const struct cluster *cl = &j->cluster;
	out->context_bytes = (int64_t)(cl->gpu.context_gib * (double)TW_GIB);
	double frag = cl->eff.alloc_fragmentation > 1.0 ? cl->eff.alloc_fragmentation : 1.0;
	out->fragmentation_bytes = (int64_t)((frag - 1.0) * (double)out->peak[PLAN_DEV_GPU]);
	out->gpu_total = out->peak[PLAN_DEV_GPU] + out->context_bytes + out->fragmentation_bytes;
	out->gpu_capacity = (int64_t)(cl->gpu.memory_gib * (double)TW_GIB);
	out->host_capacity = (int64_t)(cl->node.host_memory_gib * (double)TW_GIB / (double)job_node_ranks(j));
	out->nvme_bytes = out->peak[PLAN_DEV_NVME];
	return TW_OK;
}

struct item {
	const char *name;
	int64_t bytes;
};

bool plan_mem_fits(const struct plan_mem *m, char *verdict, size_t len)
{
	const double gib = (double)TW_GIB;
	if (m->gpu_total <= m->gpu_capacity) {
		snprintf(verdict, len, "fits, %.2f GiB free",
			 (double)(m->gpu_capacity - m->gpu_total) / gib);
		return true;
	}
	/* the three largest items at the peak, context and fragmentation included */
	struct item it[PLAN_NUM_MEM_CATS + 2];
	int n = 0;
	for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
		if (m->at_peak[PLAN_DEV_GPU][c] > 0)
			it[n++] = (struct item){plan_mem_cat_name((enum plan_mem_cat)c),
						   m->at_peak[PLAN_DEV_GPU][c]};
	if (m->context_bytes > 0)
		it[n++] = (struct item){"cuda context", m->context_bytes};
	if (m->fragmentation_bytes > 0)
		it[n++] = (struct item){"fragmentation", m->fragmentation_bytes};
	for (int a = 0; a < n; a++)
		for (int k = a + 1; k < n; k++)
			if (it[k].bytes > it[a].bytes) {
				struct item t = it[a];
				it[a] = it[k];
				it[k] = t;
			}
	int w = snprintf(verdict, len, "does not fit: needs %.2f GiB more — largest items:",
			 (double)(m->gpu_total - m->gpu_capacity) / gib);
	for (int a = 0; a < n && a < 3 && w > 0 && (size_t)w < len; a++)
		w += snprintf(verdict + w, len - (size_t)w, "%s %s %.2f GiB", a ? "," : "",
			      it[a].name, (double)it[a].bytes / gib);
	return false;
}

int64_t plan_mem_shortfall(const struct plan_mem *m, char *verdict, size_t len)
{
	int64_t s = m->gpu_total - m->gpu_capacity;
	if (!plan_mem_fits(m, verdict, len))
		return s;
	int64_t hs = m->host_capacity > 0 ? m->peak[PLAN_DEV_HOST] - m->host_capacity : INT64_MIN;
	if (hs <= 0)
		return s;
	snprintf(verdict, len, "host memory does not fit: needs %.2f GiB more of %.2f GiB per GPU",
		 (double)hs / (double)TW_GIB, (double)m->host_capacity / (double)TW_GIB);
	return hs;
}

void plan_fit_init(struct plan_fit *f)
{
	memset(f, 0, sizeof(*f));
	f->short_bytes = INT64_MIN;
	f->fits = true;
}

void plan_fit_add(struct plan_fit *f, const struct plan_mem *m, int64_t rank)
{
	char v[sizeof(f->verdict)];
	int64_t s = plan_mem_shortfall(m, v, sizeof(v));
	if (s > f->short_bytes) {
		f->short_bytes = s;
		f->rank = rank;
		f->gpu_total = m->gpu_total;
		f->gpu_capacity = m->gpu_capacity;
		f->host_short = s > 0 && m->gpu_total <= m->gpu_capacity;
		f->host_bytes = m->peak[PLAN_DEV_HOST];
		f->host_capacity = m->host_capacity;
		snprintf(f->verdict, sizeof(f->verdict), "%s", v);
	}
	f->fits = f->short_bytes <= 0;
}

enum tw_result plan_job_fit(const struct job *j, struct plan_fit *out, struct tw_err *err)
{
	plan_fit_init(out);
	int64_t n = j->strat.pp > 0 ? j->strat.pp : 1;
	int64_t *reps = TW_NEW_ARRAY(int64_t, (size_t)n), *w = TW_NEW_ARRAY(int64_t, (size_t)n);
	n = plan_roles(j, reps, w, n);
	enum tw_result rc = TW_OK;
	struct plan p;
	memset(&p, 0, sizeof(p));
	for (int64_t i = 0; i < n && rc == TW_OK; i++) {
		struct plan_mem m;
		rc = plan_rebuild(j, reps[i], &p, err); /* one set of buffers for every role */
		if (rc == TW_OK)
			rc = plan_memory(j, &p, &m, err);
		if (rc == TW_OK)
			plan_fit_add(out, &m, reps[i]);
	}
	plan_release(&p);
	out->fits = rc == TW_OK && out->short_bytes <= 0;
	free(reps);
	free(w);
	return rc;
}
