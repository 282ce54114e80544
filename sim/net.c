/* The flow network: links of relative capacity, flows with a load on each of their links,
 * rates by max-min fairness (progressive filling, reference/cost-models.md §5.1). Only the
 * connected component of flows that share links with the one that started or ended is
 * re-solved; a flow alone on its links takes the closed-form rate min(1, cap/load). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

void net_init(struct net *n, int32_t nlinks)
{
	memset(n, 0, sizeof(*n));
	n->nlinks = nlinks;
	n->cap = TW_NEW_ARRAY(double, nlinks > 0 ? nlinks : 1);
	n->head = TW_NEW_ARRAY(int32_t, nlinks > 0 ? nlinks : 1);
	n->resid = TW_NEW_ARRAY(double, nlinks > 0 ? nlinks : 1);
	n->weight = TW_NEW_ARRAY(double, nlinks > 0 ? nlinks : 1);
	n->link_mark = TW_NEW_ARRAY(bool, nlinks > 0 ? nlinks : 1);
	n->comp_links = TW_NEW_ARRAY(int32_t, nlinks > 0 ? nlinks : 1);
	for (int32_t i = 0; i < nlinks; i++) {
		n->cap[i] = 1.0;
		n->head[i] = -1;
	}
}

void net_free(struct net *n)
{
	free(n->cap);
	free(n->head);
	free(n->flows);
	free(n->free_flows);
	free(n->uses);
	free(n->comp_flows);
	free(n->comp_links);
	free(n->stack);
	free(n->resid);
	free(n->weight);
	free(n->link_mark);
	memset(n, 0, sizeof(*n));
}

/* bring remaining work up to now at the old rate, then take the new rate */
static void set_rate(struct net *n, int32_t f, int64_t now, double rate, net_changed_fn changed,
		     void *ctx)
{
	struct net_flow *fl = &n->flows[f];
	if (fl->rate > 0 && now > fl->last_ns) {
		fl->remaining_ns -= (double)(now - fl->last_ns) * fl->rate;
		if (fl->remaining_ns < 0)
			fl->remaining_ns = 0;
	}
	fl->last_ns = now;
	if (rate == fl->rate && fl->ver != 0)
		return; /* unchanged: its completion event stays valid */
	fl->rate = rate;
	fl->ver++;
	changed(ctx, f);
}

/* closed form for a flow alone on its links */
static double alone_rate(const struct net *n, int32_t f)
{
	const struct net_flow *fl = &n->flows[f];
	double r = 1.0;
	for (int32_t u = fl->first; u < fl->first + fl->nuses; u++) {
		const struct net_use *us = &n->uses[u];
		if (us->load > 0)
			r = fmin(r, n->cap[us->link] / us->load);
	}
	return r;
}

static bool shares_links(const struct net *n, int32_t f)
{
	const struct net_flow *fl = &n->flows[f];
	for (int32_t u = fl->first; u < fl->first + fl->nuses; u++) {
		int32_t l = n->uses[u].link;
		if (n->head[l] != u || n->uses[u].next_on_link != -1)
			return true;
	}
	return false;
}

/* Collect the component reachable from the links of `seed` (flow id, its uses may already
 * be unlinked) and solve it by progressive filling. */
static void solve_component(struct net *n, int32_t seed, int64_t now, net_changed_fn changed,
			    void *ctx)
{
	n->solves++;
	size_t nf = 0, nl = 0, ns = 0;
	TW_GROW(n->stack, n->comp_cap, n->nflows + 1);
	if (n->link_scratch_cap < n->nflows + 1) {
		n->comp_flows = tw_realloc_array(n->comp_flows, n->nflows + 1, sizeof(int32_t));
		n->link_scratch_cap = n->nflows + 1;
	}
	/* seed links */
	const struct net_flow *sf = &n->flows[seed];
	for (int32_t u = sf->first; u < sf->first + sf->nuses; u++) {
		int32_t l = n->uses[u].link;
		if (!n->link_mark[l]) {
			n->link_mark[l] = true;
			n->comp_links[nl++] = l;
		}
	}
	/* BFS over links -> flows -> links */
	for (size_t li = 0; li < nl; li++) {
		for (int32_t u = n->head[n->comp_links[li]]; u != -1; u = n->uses[u].next_on_link) {
			int32_t f = n->uses[u].flow;
			if (n->flows[f].mark)
				continue;
			n->flows[f].mark = true;
			n->comp_flows[nf++] = f;
			const struct net_flow *fl = &n->flows[f];
			for (int32_t v = fl->first; v < fl->first + fl->nuses; v++) {
				int32_t l = n->uses[v].link;
				if (!n->link_mark[l]) {
					n->link_mark[l] = true;
					n->comp_links[nl++] = l;
				}
			}
		}
	}
	(void)ns;
	/* progressive filling: all unfixed flows share one level */
	for (size_t i = 0; i < nl; i++)
		n->resid[n->comp_links[i]] = n->cap[n->comp_links[i]];
	double level = 0;
	size_t unfixed = nf;
	/* mark == true: unfixed; fixed flows get mark = false */
	while (unfixed > 0) {
		for (size_t i = 0; i < nl; i++)
			n->weight[n->comp_links[i]] = 0;
		for (size_t i = 0; i < nf; i++) {
			const struct net_flow *fl = &n->flows[n->comp_flows[i]];
			if (!fl->mark)
				continue;
			for (int32_t v = fl->first; v < fl->first + fl->nuses; v++)
				n->weight[n->uses[v].link] += n->uses[v].load;
		}
		double d = 1.0 - level;
		for (size_t i = 0; i < nl; i++) {
			int32_t l = n->comp_links[i];
			if (n->weight[l] > 0)
				d = fmin(d, n->resid[l] / n->weight[l]);
		}
		if (d < 0)
			d = 0;
		level += d;
		for (size_t i = 0; i < nl; i++) {
			int32_t l = n->comp_links[i];
			n->resid[l] -= d * n->weight[l];
		}
		/* fix flows at 1 or on a saturated link */
		size_t fixed_now = 0;
		for (size_t i = 0; i < nf; i++) {
			int32_t f = n->comp_flows[i];
			struct net_flow *fl = &n->flows[f];
			if (!fl->mark)
				continue;
			bool fix = level >= 1.0 - 1e-12;
			for (int32_t v = fl->first; v < fl->first + fl->nuses && !fix; v++) {
				int32_t l = n->uses[v].link;
				if (n->uses[v].load > 0 && n->resid[l] <= 1e-12 * n->cap[l])
					fix = true;
			}
			if (fix) {
				fl->mark = false;
				set_rate(n, f, now, level > 1.0 ? 1.0 : level, changed, ctx);
				fixed_now++;
			}
		}
		unfixed -= fixed_now;
		if (fixed_now == 0) { /* numerical safety: fix everything at the level */
			for (size_t i = 0; i < nf; i++) {
				int32_t f = n->comp_flows[i];
				if (n->flows[f].mark) {
					n->flows[f].mark = false;
					set_rate(n, f, now, level, changed, ctx);
				}
			}
			unfixed = 0;
		}
	}
	for (size_t i = 0; i < nl; i++)
		n->link_mark[n->comp_links[i]] = false;
}

int32_t net_add(struct net *n, int64_t now, double work_ns, const int32_t *links,
		const double *loads, int nlinks, int32_t owner, net_changed_fn changed, void *ctx)
{
	int32_t f;
	if (n->nfree > 0) {
		f = n->free_flows[--n->nfree];
	} else {
		TW_GROW(n->flows, n->flows_cap, n->nflows + 1);
		f = (int32_t)n->nflows++;
		n->flows[f].ver = 0;
	}
	struct net_flow *fl = &n->flows[f];
	uint32_t ver = fl->ver;
	memset(fl, 0, sizeof(*fl));
	fl->ver = ver;
	fl->remaining_ns = work_ns;
	fl->last_ns = now;
	fl->owner = owner;
	fl->active = true;
	n->nactive++;
	/* uses are appended; slots of removed flows are not reused (the engine compacts nothing:
	 * uses grow with the number of flows ever started, 40 bytes each) */
	TW_GROW(n->uses, n->uses_cap, n->nuses + (size_t)nlinks);
	fl->first = (int32_t)n->nuses;
	for (int i = 0; i < nlinks; i++) {
		struct net_use *u = &n->uses[n->nuses];
		u->link = links[i];
		u->load = loads[i];
		u->flow = f;
		u->prev_on_link = -1;
		u->next_on_link = n->head[links[i]];
		if (u->next_on_link != -1)
			n->uses[u->next_on_link].prev_on_link = (int32_t)n->nuses;
		n->head[links[i]] = (int32_t)n->nuses;
		n->nuses++;
	}
	fl->nuses = nlinks;
	if (!shares_links(n, f)) {
		fl->rate = 0;
		set_rate(n, f, now, alone_rate(n, f), changed, ctx);
	} else {
		fl->rate = 0;
		fl->ver++; /* make sure the solve reports it even if the level equals 0 */
		solve_component(n, f, now, changed, ctx);
	}
	return f;
}

void net_remove(struct net *n, int64_t now, int32_t f, net_changed_fn changed, void *ctx)
{
	struct net_flow *fl = &n->flows[f];
	bool shared = shares_links(n, f);
	for (int32_t u = fl->first; u < fl->first + fl->nuses; u++) {
		struct net_use *us = &n->uses[u];
		if (us->prev_on_link != -1)
			n->uses[us->prev_on_link].next_on_link = us->next_on_link;
		else
			n->head[us->link] = us->next_on_link;
		if (us->next_on_link != -1)
			n->uses[us->next_on_link].prev_on_link = us->prev_on_link;
	}
	fl->active = false;
	fl->ver++;
	if (shared)
		solve_component(n, f, now, changed, ctx); /* seeds from its (now unlinked) links */
	TW_GROW(n->free_flows, n->free_cap, n->nfree + 1);
	n->free_flows[n->nfree++] = f;
	/* compact the use pool when nothing is active (between phases of a step) */
	if (--n->nactive == 0)
		n->nuses = 0;
}

int64_t net_eta(const struct net *n, int32_t f, int64_t now)
{
	const struct net_flow *fl = &n->flows[f];
	if (fl->rate <= 0)
		return INT64_MAX / 4;
	double rem = fl->remaining_ns - (double)(now - fl->last_ns) * fl->rate;
	if (rem <= 0)
		return 0;
	return sim_ns_ceil(rem / fl->rate);
}
