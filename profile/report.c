/* report — an analysis as a table or JSON, and two analyses side by side (compare). */
#include "profile.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* The scalar rows shared by the table, the JSON and compare. */
struct row {
	const char *key;   /* JSON key */
	const char *label; /* table label */
	size_t off;        /* offset of an int64_t in struct prof_analysis */
};
#define R(k, l, f) {k, l, offsetof(struct prof_analysis, f)}
static const struct row rows[] = {
	R("step_ns", "step", step_ns),
	R("compute_ns", "compute (union)", compute_ns),
	R("comm_ns", "communication (union)", comm_ns),
	R("exposed_comm_ns", "  exposed", exposed_comm_ns),
	R("overlapped_comm_ns", "  overlapped with compute", overlapped_comm_ns),
	R("copy_ns", "copies (union)", copy_ns),
	R("exposed_copy_ns", "  exposed", exposed_copy_ns),
	R("idle_ns", "compute idle", idle_ns),
	R("stall_comm_ns", "  waiting on communication", stall_comm_ns),
	R("stall_copy_ns", "  waiting on copies", stall_copy_ns),
	R("stall_host_ns", "  host-side gaps", stall_host_ns),
	R("bubble_ns", "pipeline bubble (in idle)", bubble_ns),
	R("optimizer_ns", "optimizer", optimizer_ns),
	R("busy_ns", "GPU busy (union)", busy_ns),
};
#undef R
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static int64_t row_val(const struct prof_analysis *a, const struct row *r)
{
	return *(const int64_t *)((const char *)a + r->off);
}

static double ms(int64_t ns)
{
	return (double)ns / 1e6;
}

cJSON *prof_analysis_to_json(const struct prof_analysis *a)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "nranks", (double)a->nranks);
	cJSON_AddNumberToObject(o, "nsteps", (double)a->nsteps);
	for (size_t i = 0; i < NROWS; i++)
		cJSON_AddNumberToObject(o, rows[i].key, (double)row_val(a, &rows[i]));
	cJSON *cats = cJSON_AddObjectToObject(o, "categories_ns");
	for (int c = 0; c < TRACE_MARKER; c++)
		cJSON_AddNumberToObject(cats, trace_cat_name(c), (double)a->cat_ns[c]);
	cJSON *colls = cJSON_AddObjectToObject(o, "collectives");
	for (int c = 0; c < TRACE_NUM_CATS; c++) {
		if (!trace_cat_is_comm(c))
			continue;
		const struct prof_coll_stats *s = &a->coll[c];
		cJSON *x = cJSON_AddObjectToObject(colls, trace_cat_name(c));
		cJSON_AddNumberToObject(x, "count", s->mean_count);
		cJSON_AddNumberToObject(x, "bytes", (double)s->bytes);
		cJSON_AddNumberToObject(x, "time_ns", (double)s->time_ns);
		cJSON_AddNumberToObject(x, "exposed_ns", (double)s->exposed_ns);
		if (s->bw_time_ns > 0) {
			cJSON_AddNumberToObject(x, "algbw_GBps", s->algbw_GBps);
			cJSON_AddNumberToObject(x, "busbw_GBps", s->busbw_GBps);
		} else {
			cJSON_AddNullToObject(x, "algbw_GBps");
			cJSON_AddNullToObject(x, "busbw_GBps");
		}
		enum trace_algo ta;
		enum trace_proto tp;
		double share;
		if (prof_coll_algo(s, &ta, &tp, &share)) {
			cJSON_AddStringToObject(x, "nccl_algo", trace_algo_name(ta));
			cJSON_AddStringToObject(x, "nccl_proto", trace_proto_name(tp));
			cJSON_AddNumberToObject(x, "nccl_algo_share", share);
		} else {
			cJSON_AddNullToObject(x, "nccl_algo");
			cJSON_AddNullToObject(x, "nccl_proto");
			cJSON_AddNullToObject(x, "nccl_algo_share");
		}
	}
	cJSON_AddNumberToObject(o, "model_flops", a->model_flops);
	cJSON_AddNumberToObject(o, "hw_flops", a->hw_flops);
	cJSON_AddNumberToObject(o, "peak_mem_bytes", (double)a->peak_mem_bytes);
	cJSON *s = cJSON_AddObjectToObject(o, "straggler");
	cJSON_AddNumberToObject(s, "rank", (double)a->straggler_rank);
	cJSON_AddNumberToObject(s, "late_ns", (double)a->straggler_ns);
	cJSON_AddNumberToObject(s, "collectives", (double)a->straggler_colls);
	return o;
}

static double pct(int64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0;
}

/* The (algorithm, protocol) that took most of a collective type's time, with its share when
 * others ran too; false and "-" when the run does not say (measured runs) */
static bool coll_how(const struct prof_coll_stats *s, char *how, size_t n)
{
	enum trace_algo ta;
	enum trace_proto tp;
	double share;
	if (!prof_coll_algo(s, &ta, &tp, &share)) {
		snprintf(how, n, "-");
		return false;
	}
	snprintf(how, n, share < 0.995 ? "%s/%s %.0f%%" : "%s/%s", trace_algo_name(ta),
		 trace_proto_name(tp), 100.0 * share);
	return true;
}

void prof_analysis_print(FILE *f, const struct prof_analysis *a)
{
	fprintf(f, "%" PRId64 " rank%s, %" PRId64 " step%s (means per rank per step)\n\n",
		a->nranks, a->nranks == 1 ? "" : "s", a->nsteps, a->nsteps == 1 ? "" : "s");
	fprintf(f, "%-28s %12s %8s\n", "time", "ms", "% step");
	for (size_t i = 0; i < NROWS; i++)
		fprintf(f, "%-28s %12.3f %8.1f\n", rows[i].label, ms(row_val(a, &rows[i])),
			pct(row_val(a, &rows[i]), a->step_ns));
	fprintf(f, "\n%-28s %12s %8s\n", "category (busy, union)", "ms", "% step");
	for (int c = 0; c < TRACE_MARKER; c++)
		if (a->cat_ns[c])
			fprintf(f, "%-28s %12.3f %8.1f\n", trace_cat_name(c), ms(a->cat_ns[c]),
				pct(a->cat_ns[c], a->step_ns));
	bool any = false;
	for (int c = 0; c < TRACE_NUM_CATS; c++)
		any |= trace_cat_is_comm(c) && a->coll[c].count > 0;
	if (any) {
		fprintf(f, "\n%-16s %7s %14s %11s %12s %12s %12s  %s\n", "collective", "count",
			"bytes", "time ms", "exposed ms", "algbw GB/s", "busbw GB/s", "NCCL algorithm");
		for (int c = 0; c < TRACE_NUM_CATS; c++) {
			const struct prof_coll_stats *s = &a->coll[c];
			if (!trace_cat_is_comm(c) || s->count == 0)
				continue;
			char alg[32] = "-", bus[32] = "-";
			if (s->bw_time_ns > 0) {
				snprintf(alg, sizeof(alg), "%.2f", s->algbw_GBps);
				snprintf(bus, sizeof(bus), "%.2f", s->busbw_GBps);
			}
			char how[48];
			coll_how(s, how, sizeof(how));
			fprintf(f, "%-16s %7.2f %14" PRId64 " %11.3f %12.3f %12s %12s  %s\n",
				trace_cat_name(c), s->mean_count, s->bytes, ms(s->time_ns),
				ms(s->exposed_ns), alg, bus, how);
		}
		if (a->coll[TRACE_P2P].count > 0) /* NCCL's send/recv kernels wait for the peer */
			fprintf(f, "(p2p time runs from a send's or receive's post to its end, "
				   "waiting for the peer included, as its kernel does)\n");
	}
	fprintf(f, "\n");
	if (a->hw_flops > 0)
		fprintf(f, "FLOPs per rank per step: %.4g (model %.4g)\n", a->hw_flops,
			a->model_flops);
	if (a->peak_mem_bytes > 0)
		fprintf(f, "peak GPU memory: %.3f GiB\n", (double)a->peak_mem_bytes / TW_GIB);
	if (a->straggler_rank >= 0)
		fprintf(f, "straggler: rank %" PRId64 ", %.3f ms late on average (%" PRId64
			   " collectives matched across ranks)\n",
			a->straggler_rank, ms(a->straggler_ns), a->straggler_colls);
	else if (a->straggler_colls > 0)
		fprintf(f, "straggler: none (%" PRId64 " collectives matched across ranks)\n",
			a->straggler_colls);
}

/* ---- compare ------------------------------------------------------------------------------ */

/* relative error of b against the reference a; NaN when a is 0 */
static double rel(double a, double b)
{
	return a != 0 ? (b - a) / fabs(a) : (b == 0 ? 0 : NAN);
}

static void cmp_json(cJSON *parent, const char *key, double a, double b)
{
	cJSON *x = cJSON_AddObjectToObject(parent, key);
	cJSON_AddNumberToObject(x, "a", a);
	cJSON_AddNumberToObject(x, "b", b);
	cJSON_AddNumberToObject(x, "diff", b - a);
	double r = rel(a, b);
	if (isnan(r))
		cJSON_AddNullToObject(x, "rel_err");
	else
		cJSON_AddNumberToObject(x, "rel_err", r);
}

cJSON *prof_compare_json(const struct prof_analysis *a, const struct prof_analysis *b,
			 const char *name_a, const char *name_b)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "a", name_a);
	cJSON_AddStringToObject(o, "b", name_b);
	cJSON *t = cJSON_AddObjectToObject(o, "times_ns");
	for (size_t i = 0; i < NROWS; i++)
		cmp_json(t, rows[i].key, (double)row_val(a, &rows[i]), (double)row_val(b, &rows[i]));
	cJSON *c = cJSON_AddObjectToObject(o, "categories_ns");
	for (int k = 0; k < TRACE_MARKER; k++)
		cmp_json(c, trace_cat_name(k), (double)a->cat_ns[k], (double)b->cat_ns[k]);
	cJSON *cl = cJSON_AddObjectToObject(o, "collectives");
	for (int k = 0; k < TRACE_NUM_CATS; k++) {
		if (!trace_cat_is_comm(k))
			continue;
		const struct prof_coll_stats *x = &a->coll[k], *y = &b->coll[k];
		cJSON *e = cJSON_AddObjectToObject(cl, trace_cat_name(k));
		cmp_json(e, "count", x->mean_count, y->mean_count);
		cmp_json(e, "bytes", (double)x->bytes, (double)y->bytes);
		cmp_json(e, "time_ns", (double)x->time_ns, (double)y->time_ns);
		cmp_json(e, "exposed_ns", (double)x->exposed_ns, (double)y->exposed_ns);
		if (x->bw_time_ns > 0 && y->bw_time_ns > 0) {
			cmp_json(e, "busbw_GBps", x->busbw_GBps, y->busbw_GBps);
		} else { /* unknown on at least one side */
			cJSON *bw = cJSON_AddObjectToObject(e, "busbw_GBps");
			if (x->bw_time_ns > 0)
				cJSON_AddNumberToObject(bw, "a", x->busbw_GBps);
			else
				cJSON_AddNullToObject(bw, "a");
			if (y->bw_time_ns > 0)
				cJSON_AddNumberToObject(bw, "b", y->busbw_GBps);
			else
				cJSON_AddNullToObject(bw, "b");
			cJSON_AddNullToObject(bw, "diff");
			cJSON_AddNullToObject(bw, "rel_err");
		}
		/* what NCCL ran ("ring/Simple", with the share when others ran too), null where
		 * the run does not say */
		cJSON *al = cJSON_AddObjectToObject(e, "nccl_algo");
		const struct prof_coll_stats *side[2] = { x, y };
		for (int i = 0; i < 2; i++) {
			char how[48];
			if (coll_how(side[i], how, sizeof(how)))
				cJSON_AddStringToObject(al, i ? "b" : "a", how);
			else
				cJSON_AddNullToObject(al, i ? "b" : "a");
		}
	}
	cmp_json(o, "peak_mem_bytes", (double)a->peak_mem_bytes, (double)b->peak_mem_bytes);
	return o;
}

static void cmp_line(FILE *f, const char *label, double a, double b, const char *unit_fmt)
{
	char ra[16] = "-";
	double r = rel(a, b);
	if (!isnan(r))
		snprintf(ra, sizeof(ra), "%+.1f%%", 100 * r);
	fprintf(f, "%-28s ", label);
	fprintf(f, unit_fmt, a);
	fprintf(f, " ");
	fprintf(f, unit_fmt, b);
	fprintf(f, " ");
	fprintf(f, unit_fmt, b - a);
	fprintf(f, " %9s\n", ra);
}

void prof_compare_print(FILE *f, const struct prof_analysis *a, const struct prof_analysis *b,
			const char *name_a, const char *name_b)
{
	fprintf(f, "A = %s, B = %s; relative error = (B - A) / A\n\n", name_a, name_b);
	fprintf(f, "%-28s %12s %12s %12s %9s\n", "time per step (ms)", "A", "B", "B - A",
		"rel.err");
	for (size_t i = 0; i < NROWS; i++)
		cmp_line(f, rows[i].label, ms(row_val(a, &rows[i])), ms(row_val(b, &rows[i])),
			 "%12.3f");
	fprintf(f, "\n%-28s %12s %12s %12s %9s\n", "category (ms)", "A", "B", "B - A", "rel.err");
	for (int k = 0; k < TRACE_MARKER; k++)
		if (a->cat_ns[k] || b->cat_ns[k])
			cmp_line(f, trace_cat_name(k), ms(a->cat_ns[k]), ms(b->cat_ns[k]),
				 "%12.3f");
	bool head = false;
	for (int k = 0; k < TRACE_NUM_CATS; k++) {
		const struct prof_coll_stats *x = &a->coll[k], *y = &b->coll[k];
		if (!trace_cat_is_comm(k) || (x->count == 0 && y->count == 0))
			continue;
		if (!head) {
			fprintf(f, "\n%-28s %12s %12s %12s %9s\n", "collective", "A", "B", "B - A",
				"rel.err");
			head = true;
		}
		char l[64];
		snprintf(l, sizeof(l), "%s count", trace_cat_name(k));
		cmp_line(f, l, x->mean_count, y->mean_count, "%12.2f");
		snprintf(l, sizeof(l), "%s time ms", trace_cat_name(k));
		cmp_line(f, l, ms(x->time_ns), ms(y->time_ns), "%12.3f");
		snprintf(l, sizeof(l), "%s exposed ms", trace_cat_name(k));
		cmp_line(f, l, ms(x->exposed_ns), ms(y->exposed_ns), "%12.3f");
		if (x->bw_time_ns > 0 && y->bw_time_ns > 0) {
			snprintf(l, sizeof(l), "%s busbw GB/s", trace_cat_name(k));
			cmp_line(f, l, x->busbw_GBps, y->busbw_GBps, "%12.2f");
		} else if (x->bw_time_ns > 0 || y->bw_time_ns > 0) {
			/* one side's message sizes are unknown: no difference to show */
			char va[16] = "-", vb[16] = "-";
			if (x->bw_time_ns > 0)
				snprintf(va, sizeof(va), "%.2f", x->busbw_GBps);
			if (y->bw_time_ns > 0)
				snprintf(vb, sizeof(vb), "%.2f", y->busbw_GBps);
			snprintf(l, sizeof(l), "%s busbw GB/s", trace_cat_name(k));
			fprintf(f, "%-28s %12s %12s %12s %9s\n", l, va, vb, "-", "-");
		}
		/* what NCCL ran, when either run says: a changed algorithm explains a changed time */
		char ha[48], hb[48];
		bool ka = coll_how(x, ha, sizeof(ha)), kb = coll_how(y, hb, sizeof(hb));
		if (ka || kb) {
			/* names longer than a number's column: A and B as text after the label */
			snprintf(l, sizeof(l), "%s algorithm", trace_cat_name(k));
			fprintf(f, "%-28s A %s, B %s\n", l, ha, hb);
		}
	}
	if (a->peak_mem_bytes || b->peak_mem_bytes) {
		fprintf(f, "\n");
		cmp_line(f, "peak GPU memory (GiB)", (double)a->peak_mem_bytes / TW_GIB,
			 (double)b->peak_mem_bytes / TW_GIB, "%12.3f");
	}
}
