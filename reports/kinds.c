/* The report kinds: what each page shows, its data files and its gnuplot scripts.
 * Units: time in ms on charts (s in the scaling tables), memory in GiB (2^30 bytes),
 * throughput in tokens/s. Definitions: docs/reports.md. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "reports.h"

static const double GIB = (double)TW_GIB;

/* One colour per step part, the same on every chart. */
static const char *const part_color[RPT_NUM_PARTS] = {
	"#4c72b0", "#dd8452", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
	"#55a868", "#ccb974", "#bbbbbb"
};
static const char *const mem_color[PLAN_NUM_MEM_CATS + 2] = {
	"#4c72b0", "#64b5cd", "#dd8452", "#c44e52", "#55a868", "#8172b3", "#937860",
	"#da8bc3", "#ccb974", "#8c8c8c", "#bbbbbb", "#e5e5e5"
};

static double ms(int64_t ns)
{
	return (double)ns * 1e-6;
}

/* A growing string for gnuplot bodies. */
struct sb {
	char *s;
	size_t len, cap;
};

static void sbf(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sbf(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	TW_GROW(b->s, b->cap, b->len + (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static enum tw_result chart(struct rpt_page *pg, const char *name, const char *data,
			    const char *caption, struct sb *body, struct tw_err *err)
{
	enum tw_result rc = rpt_chart(pg, name, data, caption, body->s ? body->s : "", err);
	free(body->s);
	memset(body, 0, sizeof(*body));
	return rc;
}

static enum tw_result close_data(FILE *f, const char *name, struct tw_err *err)
{
	bool bad = ferror(f) != 0;
	if (fclose(f) != 0 || bad)
		return tw_errf(err, TW_ERR_SYSTEM, "writing %s failed", name);
	return TW_OK;
}

/* gnuplot strings go in single quotes: drop the quote characters of labels */
static void gp_label(char *dst, size_t len, const char *src)
{
	size_t i = 0;
	for (; *src && i + 1 < len; src++)
		if (*src != '\'' && *src != '"' && *src != '\\' && (unsigned char)*src >= 0x20 &&
		    *src != 0x7f) /* no quote ends the string, no newline starts a command */
			dst[i++] = *src;
	dst[i] = '\0';
}

/* ---- step breakdown (stacked bars) ---------------------------------------------------------- */

static enum tw_result breakdown_chart(struct rpt_page *pg, const char *name, const char *title,
				      const char *const *labels, const struct prof_analysis *a,
				      size_t n, struct tw_err *err)
{
	char file[128];
	snprintf(file, sizeof(file), "%s.dat", name);
	FILE *f = rpt_data_open(pg, file, err);
	if (!f)
		return TW_ERR_SYSTEM;
	bool used[RPT_NUM_PARTS] = { false };
	fprintf(f, "# step breakdown, ms per rank per step (parts add up to the step)\n\"point\"");
	for (int k = 0; k < RPT_NUM_PARTS; k++)
		fprintf(f, "\t\"%s\"", rpt_part_name(k));
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		struct rpt_parts p;
		rpt_parts_of(&a[i], &p);
		char l[256];
		gp_label(l, sizeof(l), labels[i]);
		fprintf(f, "\"%s\"", l);
		for (int k = 0; k < RPT_NUM_PARTS; k++) {
			fprintf(f, "\t%.6f", ms(p.ns[k]));
			used[k] |= p.ns[k] > 0;
		}
		fputc('\n', f);
	}
	TW_CHECK(close_data(f, file, err));
	struct sb b = { 0 };
	char t[256];
	gp_label(t, sizeof(t), title);
	sbf(&b, "set title '%s'\n"
		"set ylabel 'time per step (ms)'\n"
		"set style data histograms\n"
		"set style histogram rowstacked\n"
		"set style fill solid 0.9 border rgb '#555555'\n"
		"set boxwidth 0.6\n"
		"set yrange [0:*]\n"
		"set xtics rotate by -30\n",
	    t);
	if (n > 6)
		sbf(&b, "set xtics font ',9'\n");
	sbf(&b, "plot ");
	bool first = true;
	for (int k = 0; k < RPT_NUM_PARTS; k++) {
		if (!used[k])
			continue;
		sbf(&b, "%s'%s' using %d:xtic(1) title columnheader(%d) lc rgb '%s'", first ? "" : ", \\\n     ",
		    file, k + 2, k + 2, part_color[k]);
		first = false;
	}
	if (first) /* nothing at all: an empty frame */
		sbf(&b, "'%s' using 2:xtic(1) notitle", file);
	sbf(&b, "\n");
	char cap[256];
	snprintf(cap, sizeof(cap), "%s: compute, exposed communication per collective, copies, bubble, idle (ms)",
		 title);
	return chart(pg, name, file, cap, &b, err);
}

static void breakdown_table(struct rpt_page *pg, const char *first, const char *const *labels,
			    const struct prof_analysis *a, size_t n)
{
	/* columns: compute always, the other parts where some row has them */
	bool used[RPT_NUM_PARTS] = { true };
	struct rpt_parts *p = TW_NEW_ARRAY(struct rpt_parts, n ? n : 1);
	for (size_t i = 0; i < n; i++) {
		rpt_parts_of(&a[i], &p[i]);
		for (int k = 0; k < RPT_NUM_PARTS; k++)
			used[k] |= p[i].ns[k] > 0;
	}
	char head[1024];
	size_t u = (size_t)snprintf(head, sizeof(head), "%s|step ms", first);
	for (int k = 0; k < RPT_NUM_PARTS && u < sizeof(head); k++)
		if (used[k])
			u += (size_t)snprintf(head + u, sizeof(head) - u, "|%s ms", rpt_part_name(k));
	rpt_table_begin(pg, head);
	for (size_t i = 0; i < n; i++) {
		char row[1024];
		char lc[512];
		u = (size_t)snprintf(row, sizeof(row), "%s|%.3f", rpt_cell(lc, sizeof(lc), labels[i]),
				     ms(a[i].step_ns));
		for (int k = 0; k < RPT_NUM_PARTS && u < sizeof(row); k++)
			if (used[k])
				u += (size_t)snprintf(row + u, sizeof(row) - u, "|%.3f", ms(p[i].ns[k]));
		rpt_table_row(pg, "%s", row);
	}
	free(p);
}

static const char parts_note[] =
	"The parts add up to the step: compute is the union of compute kernels; the compute "
	"stream's idle time is split into waiting on communication (shared among the collective "
	"types in proportion to each one's own exposed time), waiting on copies, the pipeline "
	"bubble, and other idle time (host-side gaps). Means per rank per step.";

enum tw_result rpt_breakdown(struct rpt_page *pg, const struct prof_analysis *a,
			     const char *const *names, size_t n, struct tw_err *err)
{
	rpt_heading(pg, "Step breakdown");
	rpt_para(pg, "%s", parts_note);
	breakdown_table(pg, "run", names, a, n);
	TW_CHECK(breakdown_chart(pg, "breakdown", "Step breakdown", names, a, n, err));
	rpt_heading(pg, "Communication");
	rpt_table_begin(pg, "run|collective|count|MB per step|time ms|exposed ms|busbw GB/s");
	for (size_t i = 0; i < n; i++)
		for (int c = 0; c < TRACE_NUM_CATS; c++) {
			const struct prof_coll_stats *s = &a[i].coll[c];
			if (!trace_cat_is_comm((enum trace_cat)c) || s->time_ns <= 0)
				continue;
			char bw[32] = "-";
			if (s->busbw_GBps > 0)
				snprintf(bw, sizeof(bw), "%.1f", s->busbw_GBps);
			char nc[512];
			rpt_table_row(pg, "%s|%s|%.1f|%.1f|%.3f|%.3f|%s", rpt_cell(nc, sizeof(nc), names[i]),
				      trace_cat_name((enum trace_cat)c), s->mean_count,
				      (double)s->bytes * 1e-6, ms(s->time_ns), ms(s->exposed_ns), bw);
		}
	return TW_OK;
}

/* ---- sweeps: scaling and what-if ------------------------------------------------------------- */

static void sweep_table(struct rpt_page *pg, const struct rpt_sweep *s, const double *eff)
{
	rpt_table_begin(pg, eff ? "point|GPUs|step s|tokens/s|tokens/s per GPU|efficiency|TFLOP/s per GPU|MFU|exposed comm s|peak GiB|fit"
				: "point|GPUs|step s|tokens/s|tokens/s per GPU|TFLOP/s per GPU|MFU|exposed comm s|peak GiB|fit");
	for (size_t i = 0; i < s->npts; i++) {
		const struct rpt_point *p = &s->pts[i];
		char raw[512], label[512], why[512], e[32] = "";
		rpt_point_label(s, p, raw, sizeof(raw));
		rpt_cell(label, sizeof(label), raw);
		if (!p->ok) {
			rpt_table_row(pg, "%s|invalid: %s%s", label, rpt_cell(why, sizeof(why), p->reason),
				      eff ? "|||||||||" : "||||||||");
			continue;
		}
		if (eff)
			snprintf(e, sizeof(e), "%.1f%%|", 100 * eff[i]);
		rpt_table_row(pg, "%s|%" PRId64 "|%.4f|%.1f|%.1f|%s%.1f|%.1f%%|%.4f|%.2f|%s", label, p->gpus,
			      p->step_s, p->tokens_s, p->tokens_s_gpu, e, p->tflops_gpu, 100 * p->mfu,
			      p->exposed_comm_s, p->peak_mem_bytes / GIB,
			      p->fits ? "fits" : "does not fit");
	}
}

/* the analyses and labels of the valid points, in sweep order */
static size_t valid_points(const struct rpt_sweep *s, struct prof_analysis *a, char (*labels)[256],
			   const char **lp)
{
	size_t n = 0;
	for (size_t i = 0; i < s->npts; i++) {
		if (!s->pts[i].ok)
			continue;
		a[n] = s->pts[i].a;
		rpt_point_label(s, &s->pts[i], labels[n], 256);
		lp[n] = labels[n];
		n++;
	}
	return n;
}

static enum tw_result sweep_breakdown(struct rpt_page *pg, const struct rpt_sweep *s,
				      struct tw_err *err)
{
	struct prof_analysis *a = TW_NEW_ARRAY(struct prof_analysis, s->npts);
	char(*labels)[256] = tw_calloc(s->npts, 256);
	const char **lp = TW_NEW_ARRAY(const char *, s->npts);
	size_t n = valid_points(s, a, labels, lp);
	rpt_heading(pg, "Step breakdown");
	rpt_para(pg, "%s", parts_note);
	breakdown_table(pg, "point", lp, a, n);
	enum tw_result rc = breakdown_chart(pg, "breakdown", "Step breakdown per point", lp, a, n, err);
	free(a);
	free(labels);
	free(lp);
	return rc;
}

static int cmp_gpus(const void *x, const void *y)
{
	const struct rpt_point *a = *(const struct rpt_point *const *)x, *b = *(const struct rpt_point *const *)y;
	return (a->gpus > b->gpus) - (a->gpus < b->gpus);
}

enum tw_result rpt_scaling(struct rpt_page *pg, const struct rpt_sweep *s, const char *what,
			   struct tw_err *err)
{
	if (s->nvary != 1 || strcmp(s->vary[0].path, "gpus"))
		return tw_errf(err, TW_ERR_USAGE,
			       "report scaling: needs exactly one --vary, over gpus (e.g. --vary gpus=8,16,32); "
			       "use 'report whatif' for other paths");
	const struct rpt_point **ok = TW_NEW_ARRAY(const struct rpt_point *, s->npts);
	size_t n = 0;
	for (size_t i = 0; i < s->npts; i++)
		if (s->pts[i].ok && s->pts[i].tokens_s_gpu > 0)
			ok[n++] = &s->pts[i];
	if (n == 0) {
		free(ok);
		return tw_errf(err, TW_ERR_INVALID, "report scaling: no valid point (first: %s)",
			       s->npts ? s->pts[0].reason : "none");
	}
	qsort(ok, n, sizeof(*ok), cmp_gpus);
	/* efficiency: throughput per GPU relative to the smallest GPU count (ideal = constant) */
	const struct rpt_point *base = ok[0];
	double *eff = TW_NEW_ARRAY(double, s->npts);
	for (size_t i = 0; i < s->npts; i++)
		eff[i] = s->pts[i].ok ? s->pts[i].tokens_s_gpu / base->tokens_s_gpu : 0;
	rpt_para(pg, "%s", what);
	rpt_para(pg, "Scaling efficiency = (tokens/s per GPU at N GPUs) / (tokens/s per GPU at %" PRId64
		     " GPUs, the smallest count). Ideal scaling keeps the throughput per GPU constant.",
		 base->gpus);
	rpt_heading(pg, "Results");
	sweep_table(pg, s, eff);

	enum tw_result rc = TW_OK;
	FILE *f = rpt_data_open(pg, "scaling.dat", err);
	if (!f) {
		rc = TW_ERR_SYSTEM;
		goto out;
	}
	fprintf(f, "# gpus\ttokens/s\ttokens/s per GPU\tideal tokens/s per GPU\tefficiency %%\t"
		   "step s\tMFU %%\tpeak GiB\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%" PRId64 "\t%.3f\t%.3f\t%.3f\t%.2f\t%.6f\t%.2f\t%.3f\n", ok[i]->gpus,
			ok[i]->tokens_s, ok[i]->tokens_s_gpu, base->tokens_s_gpu,
			100 * ok[i]->tokens_s_gpu / base->tokens_s_gpu, ok[i]->step_s, 100 * ok[i]->mfu,
			ok[i]->peak_mem_bytes / GIB);
	TW_CHECK_GOTO(close_data(f, "scaling.dat", err), rc, out);
	f = rpt_data_open(pg, "scaling.csv", err);
	if (!f) {
		rc = TW_ERR_SYSTEM;
		goto out;
	}
	fprintf(f, "gpus,step_s,tokens_per_s,tokens_per_s_per_gpu,efficiency,tflops_per_gpu,mfu,"
		   "exposed_comm_s,peak_mem_bytes,fits\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%" PRId64 ",%.6f,%.3f,%.3f,%.4f,%.3f,%.4f,%.6f,%.0f,%d\n", ok[i]->gpus,
			ok[i]->step_s, ok[i]->tokens_s, ok[i]->tokens_s_gpu,
			ok[i]->tokens_s_gpu / base->tokens_s_gpu, ok[i]->tflops_gpu, ok[i]->mfu,
			ok[i]->exposed_comm_s, ok[i]->peak_mem_bytes, ok[i]->fits);
	TW_CHECK_GOTO(close_data(f, "scaling.csv", err), rc, out);

	struct sb b = { 0 };
	bool logx = n > 1 && ok[n - 1]->gpus >= 4 * ok[0]->gpus;
	sbf(&b, "set title 'Scaling efficiency: throughput per GPU vs. GPUs (labels: efficiency)'\n"
		"set xlabel 'GPUs'\n"
		"set ylabel 'tokens/s per GPU'\n"
		"set yrange [0:*]\n"
		"set key inside right bottom box opaque\n"
		"set offsets graph 0.05, graph 0.05, graph 0.15, 0\n");
	if (logx)
		sbf(&b, "set logscale x 2\n");
	sbf(&b, "set xtics (");
	for (size_t i = 0; i < n; i++)
		sbf(&b, "%s'%" PRId64 "' %" PRId64, i ? ", " : "", ok[i]->gpus, ok[i]->gpus);
	sbf(&b, ")\n"
		"plot 'scaling.dat' using 1:3 with linespoints lw 2 pt 7 ps 1.3 lc rgb '#4c72b0' title 'tokens/s per GPU', \\\n"
		"     'scaling.dat' using 1:4 with lines dt 2 lw 2 lc rgb '#55a868' title 'ideal (constant per GPU)', \\\n"
		"     'scaling.dat' using 1:3:(sprintf('%%.1f%%%%', $5)) with labels offset 0,1.2 notitle\n");
	TW_CHECK_GOTO(chart(pg, "scaling", "scaling.dat", "Throughput per GPU vs. GPUs, with the ideal line", &b, err), rc, out);

	sbf(&b, "set title 'Throughput vs. GPUs'\n"
		"set xlabel 'GPUs'\n"
		"set ylabel 'tokens/s (whole job)'\n"
		"set yrange [0:*]\n"
		"set key inside left top box opaque\n"
		"set offsets graph 0.05, graph 0.05, 0, 0\n");
	if (logx)
		sbf(&b, "set logscale x 2\n");
	sbf(&b, "plot 'scaling.dat' using 1:2 with linespoints lw 2 pt 7 ps 1.3 lc rgb '#4c72b0' title 'predicted tokens/s', \\\n"
		"     'scaling.dat' using 1:($1 * $4) with lines dt 2 lw 2 lc rgb '#55a868' title 'ideal (linear)'\n");
	TW_CHECK_GOTO(chart(pg, "throughput", "scaling.dat", "Total throughput vs. GPUs, with linear scaling", &b, err), rc, out);
	rc = sweep_breakdown(pg, s, err);
out:
	free(ok);
	free(eff);
	return rc;
}

enum tw_result rpt_whatif(struct rpt_page *pg, const struct rpt_sweep *s, const char *what,
			  struct tw_err *err)
{
	size_t n = 0;
	for (size_t i = 0; i < s->npts; i++)
		n += s->pts[i].ok;
	if (n == 0)
		return tw_errf(err, TW_ERR_INVALID, "report whatif: no valid point (first: %s)",
			       s->npts ? s->pts[0].reason : "none");
	rpt_para(pg, "%s", what);
	rpt_heading(pg, "Results");
	sweep_table(pg, s, NULL);
	FILE *f = rpt_data_open(pg, "whatif.dat", err);
	if (!f)
		return TW_ERR_SYSTEM;
	fprintf(f, "# point\ttokens/s\tstep s\tpeak GiB\tcapacity GiB\tMFU %%\n");
	for (size_t i = 0; i < s->npts; i++) {
		const struct rpt_point *p = &s->pts[i];
		if (!p->ok)
			continue;
		char label[512], l[512];
		rpt_point_label(s, p, label, sizeof(label));
		gp_label(l, sizeof(l), label);
		fprintf(f, "\"%s\"\t%.3f\t%.6f\t%.3f\t%.3f\t%.2f\n", l, p->tokens_s, p->step_s,
			p->peak_mem_bytes / GIB, p->capacity_bytes / GIB, 100 * p->mfu);
	}
	TW_CHECK(close_data(f, "whatif.dat", err));
	f = rpt_data_open(pg, "whatif.csv", err);
	if (!f)
		return TW_ERR_SYSTEM;
	fputs("point,ok,reason,gpus,step_s,tokens_per_s,tokens_per_s_per_gpu,tflops_per_gpu,mfu,"
	      "exposed_comm_s,peak_mem_bytes,capacity_bytes,fits\n", f);
	for (size_t i = 0; i < s->npts; i++) {
		const struct rpt_point *p = &s->pts[i];
		char label[512];
		rpt_point_label(s, p, label, sizeof(label));
		if (!p->ok) {
			char r[512];
			gp_label(r, sizeof(r), p->reason);
			fprintf(f, "\"%s\",0,\"%s\",,,,,,,,,,\n", label, r);
			continue;
		}
		fprintf(f, "\"%s\",1,,%" PRId64 ",%.6f,%.3f,%.3f,%.3f,%.4f,%.6f,%.0f,%.0f,%d\n", label,
			p->gpus, p->step_s, p->tokens_s, p->tokens_s_gpu, p->tflops_gpu, p->mfu,
			p->exposed_comm_s, p->peak_mem_bytes, p->capacity_bytes, p->fits);
	}
	TW_CHECK(close_data(f, "whatif.csv", err));

	double ymax = 1;
	for (size_t i = 0; i < s->npts; i++)
		if (s->pts[i].ok) {
			if (s->pts[i].peak_mem_bytes / GIB > ymax)
				ymax = s->pts[i].peak_mem_bytes / GIB;
			if (s->pts[i].capacity_bytes / GIB > ymax)
				ymax = s->pts[i].capacity_bytes / GIB;
		}
	struct sb b = { 0 };
	sbf(&b, "set title 'Predicted throughput per point'\n"
		"set ylabel 'tokens/s (whole job)'\n"
		"set style fill solid 0.9 border rgb '#555555'\n"
		"set boxwidth 0.6\n"
		"set yrange [0:*]\n"
		"set offsets 0.6, 0.6, graph 0.1, 0\n"
		"set xtics rotate by -30\n"
		"set key off\n"
		"plot 'whatif.dat' using 0:2:xtic(1) with boxes lc rgb '#4c72b0', \\\n"
		"     '' using 0:2:(sprintf('%%.0f', $2)) with labels offset 0,0.8 notitle\n");
	TW_CHECK(chart(pg, "whatif", "whatif.dat", "Throughput (tokens/s) per point", &b, err));
	sbf(&b, "set title 'Peak GPU memory per point'\n"
		"set ylabel 'peak memory per GPU (GiB)'\n"
		"set style fill solid 0.9 border rgb '#555555'\n"
		"set boxwidth 0.6\n"
		"set yrange [0:%f]\n"
		"set offsets 0.6, 0.6, 0, 0\n"
		"set xtics rotate by -30\n"
		"set key inside right top box opaque\n"
		"plot 'whatif.dat' using 0:4:xtic(1) with boxes lc rgb '#8172b3' title 'peak (with context, fragmentation)', \\\n"
		"     '' using 0:5:(0.4) with xerrorbars pt 0 lw 3 lc rgb '#c44e52' title 'GPU capacity'\n", ymax * 1.25);
	TW_CHECK(chart(pg, "memory", "whatif.dat", "Peak GPU memory per point against the GPU's capacity", &b, err));
	return sweep_breakdown(pg, s, err);
}

/* ---- compare ------------------------------------------------------------------------------- */

enum tw_result rpt_compare(struct rpt_page *pg, const struct prof_analysis *a,
			   const struct prof_analysis *b, const char *name_a, const char *name_b,
			   struct tw_err *err)
{
	struct row {
		char name[64];
		int64_t a, b;
	} rows[32];
	int n = 0;
#define ROW(label, field)                                                                          \
	do {                                                                                       \
		snprintf(rows[n].name, sizeof(rows[n].name), "%s", label);                         \
		rows[n].a = a->field;                                                              \
		rows[n].b = b->field;                                                              \
		n++;                                                                               \
	} while (0)
	ROW("step", step_ns);
	ROW("compute", compute_ns);
	ROW("communication", comm_ns);
	ROW("exposed comm", exposed_comm_ns);
	for (int c = 0; c < TRACE_NUM_CATS; c++)
		if (trace_cat_is_comm((enum trace_cat)c) && (a->coll[c].time_ns > 0 || b->coll[c].time_ns > 0)) {
			snprintf(rows[n].name, sizeof(rows[n].name), "%s", trace_cat_name((enum trace_cat)c));
			rows[n].a = a->coll[c].time_ns;
			rows[n].b = b->coll[c].time_ns;
			n++;
		}
	ROW("copies", copy_ns);
	ROW("idle", idle_ns);
	ROW("bubble", bubble_ns);
	ROW("optimizer", optimizer_ns);
#undef ROW
	rpt_heading(pg, "%s vs. %s", name_a, name_b);
	rpt_para(pg, "Means per rank per step. Difference = B - A; relative = (B - A) / A. "
		     "A = %s, B = %s.", name_a, name_b);
	char head[1200], ca[512], cb[512];
	snprintf(head, sizeof(head), "quantity|A: %s ms|B: %s ms|B - A ms|relative",
		 rpt_cell(ca, sizeof(ca), name_a), rpt_cell(cb, sizeof(cb), name_b));
	rpt_table_begin(pg, head);
	for (int i = 0; i < n; i++) {
		char rel[32] = "-";
		if (rows[i].a > 0)
			snprintf(rel, sizeof(rel), "%+.1f%%",
				 100.0 * (double)(rows[i].b - rows[i].a) / (double)rows[i].a);
		rpt_table_row(pg, "%s|%.3f|%.3f|%+.3f|%s", rows[i].name, ms(rows[i].a), ms(rows[i].b),
			      ms(rows[i].b - rows[i].a), rel);
	}
	if (a->peak_mem_bytes > 0 || b->peak_mem_bytes > 0)
		rpt_para(pg, "Peak GPU memory: A %.2f GiB, B %.2f GiB.", (double)a->peak_mem_bytes / GIB,
			 (double)b->peak_mem_bytes / GIB);
	FILE *f = rpt_data_open(pg, "compare.dat", err);
	if (!f)
		return TW_ERR_SYSTEM;
	char la[128], lb[128];
	gp_label(la, sizeof(la), name_a);
	gp_label(lb, sizeof(lb), name_b);
	fprintf(f, "# ms per rank per step\n# quantity\t%s\t%s\n", la, lb);
	for (int i = 0; i < n; i++)
		fprintf(f, "\"%s\"\t%.6f\t%.6f\n", rows[i].name, ms(rows[i].a), ms(rows[i].b));
	TW_CHECK(close_data(f, "compare.dat", err));
	struct sb sbd = { 0 };
	sbf(&sbd, "set title 'A: %s vs. B: %s'\n"
		  "set ylabel 'time per step (ms)'\n"
		  "set style data histograms\n"
		  "set style histogram clustered gap 1\n"
		  "set style fill solid 0.9 border rgb '#555555'\n"
		  "set yrange [0:*]\n"
		  "set xtics rotate by -30\n"
		  "set key inside right top box opaque\n"
		  "plot 'compare.dat' using 2:xtic(1) title 'A: %s' lc rgb '#4c72b0', \\\n"
		  "     '' using 3 title 'B: %s' lc rgb '#dd8452'\n",
	    la, lb, la, lb);
	TW_CHECK(chart(pg, "compare", "compare.dat", "A beside B per quantity (predicted vs. measured)", &sbd, err));
	struct prof_analysis two[2] = { *a, *b };
	const char *names[2] = { name_a, name_b };
	rpt_heading(pg, "Step breakdown");
	rpt_para(pg, "%s", parts_note);
	breakdown_table(pg, "run", names, two, 2);
	return breakdown_chart(pg, "breakdown", "Step breakdown, A and B", names, two, 2, err);
}

/* ---- memory --------------------------------------------------------------------------------- */

enum tw_result rpt_memory_plan(struct rpt_page *pg, const struct rpt_mem_role *roles, size_t n,
			       const char *what, struct tw_err *err)
{
	rpt_para(pg, "%s", what);
	rpt_para(pg, "Peak GPU memory per rank role from the plan's memory walk (docs/memory.md): "
		     "the breakdown by category at the moment of the peak, plus the CUDA context and "
		     "allocator fragmentation. GiB = 2^30 bytes.");
	char head[1024];
	size_t used = (size_t)snprintf(head, sizeof(head), "role|ranks");
	for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
		used += (size_t)snprintf(head + used, sizeof(head) - used, "|%s GiB",
					 plan_mem_cat_name((enum plan_mem_cat)c));
	snprintf(head + used, sizeof(head) - used, "|context GiB|fragmentation GiB|total GiB|capacity GiB|verdict");
	rpt_table_begin(pg, head);
	FILE *f = rpt_data_open(pg, "memory.dat", err);
	if (!f)
		return TW_ERR_SYSTEM;
	fprintf(f, "# GiB per GPU at the peak\n\"role\"");
	for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
		fprintf(f, "\t\"%s\"", plan_mem_cat_name((enum plan_mem_cat)c));
	fprintf(f, "\t\"context\"\t\"fragmentation\"\t\"capacity\"\n");
	bool used_cat[PLAN_NUM_MEM_CATS + 2] = { false };
	for (size_t i = 0; i < n; i++) {
		const struct plan_mem *m = &roles[i].m;
		char row[2048], verdict[512];
		size_t u = (size_t)snprintf(row, sizeof(row), "%s|%" PRId64, roles[i].role, roles[i].ranks);
		fprintf(f, "\"%s\"", roles[i].role);
		for (int c = 0; c < PLAN_NUM_MEM_CATS; c++) {
			double g = (double)m->at_peak[PLAN_DEV_GPU][c] / GIB;
			u += (size_t)snprintf(row + u, sizeof(row) - u, "|%.2f", g);
			fprintf(f, "\t%.4f", g);
			used_cat[c] |= m->at_peak[PLAN_DEV_GPU][c] > 0;
		}
		used_cat[PLAN_NUM_MEM_CATS] |= m->context_bytes > 0;
		used_cat[PLAN_NUM_MEM_CATS + 1] |= m->fragmentation_bytes > 0;
		plan_mem_fits(m, verdict, sizeof(verdict));
		snprintf(row + u, sizeof(row) - u, "|%.2f|%.2f|%.2f|%.2f|%s",
			 (double)m->context_bytes / GIB, (double)m->fragmentation_bytes / GIB,
			 (double)m->gpu_total / GIB, (double)m->gpu_capacity / GIB, verdict);
		rpt_table_row(pg, "%s", row);
		fprintf(f, "\t%.4f\t%.4f\t%.4f\n", (double)m->context_bytes / GIB,
			(double)m->fragmentation_bytes / GIB, (double)m->gpu_capacity / GIB);
	}
	TW_CHECK(close_data(f, "memory.dat", err));
	struct sb b = { 0 };
	double ymax = 1;
	for (size_t i = 0; i < n; i++) {
		double tot = (double)roles[i].m.gpu_total / GIB, cap = (double)roles[i].m.gpu_capacity / GIB;
		ymax = tot > ymax ? tot : ymax;
		ymax = cap > ymax ? cap : ymax;
	}
	sbf(&b, "set title 'Peak GPU memory by category'\n"
		"set ylabel 'memory per GPU (GiB)'\n"
		"set style data histograms\n"
		"set style histogram rowstacked\n"
		"set style fill solid 0.9 border rgb '#555555'\n"
		"set boxwidth 0.5\n"
		"set yrange [0:%f]\n", ymax * 1.15);
	for (size_t i = 0; i < n; i++)
		sbf(&b, "set arrow from %f, first %f to %f, first %f nohead lw 3 lc rgb '#c44e52' front\n",
		    (double)i - 0.35, (double)roles[i].m.gpu_capacity / GIB, (double)i + 0.35,
		    (double)roles[i].m.gpu_capacity / GIB);
	sbf(&b, "plot ");
	bool first = true;
	for (int c = 0; c < PLAN_NUM_MEM_CATS + 2; c++) {
		if (!used_cat[c])
			continue;
		sbf(&b, "%s'memory.dat' using %d:xtic(1) title columnheader(%d) lc rgb '%s'",
		    first ? "" : ", \\\n     ", c + 2, c + 2, mem_color[c]);
		first = false;
	}
	/* capacity: a mark over each bar (the histogram puts bar i at x = i) */
	sbf(&b, "%sNaN with lines lw 3 lc rgb '#c44e52' title 'GPU capacity'\n", first ? "" : ", \\\n     ");
	return chart(pg, "memory", "memory.dat", "Peak GPU memory per rank role, by category, against the capacity", &b, err);
}

static int cmp_mem(const void *x, const void *y)
{
	const struct trace_mem_sample *a = x, *b = y;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return (a->t_ns > b->t_ns) - (a->t_ns < b->t_ns);
}

enum tw_result rpt_memory_run(struct rpt_page *pg, const struct trace *t, const char *name,
			      struct tw_err *err)
{
	/* GPU samples by rank and time */
	size_t n = 0;
	struct trace_mem_sample *s = TW_NEW_ARRAY(struct trace_mem_sample, t->nmem + 1);
	bool have_cat = false, have_total = false;
	for (size_t i = 0; i < t->nmem; i++)
		if (t->mem[i].device == PLAN_DEV_GPU && t->mem[i].rank >= 0 && t->mem[i].cat < PLAN_NUM_MEM_CATS) {
			s[n++] = t->mem[i];
			have_cat |= t->mem[i].cat >= 0;
			have_total |= t->mem[i].cat < 0;
		}
	qsort(s, n, sizeof(*s), cmp_mem);
	int64_t nranks = t->nranks > 0 ? t->nranks : 1;
	for (size_t i = 0; i < n; i++)
		if (s[i].rank >= nranks)
			nranks = s[i].rank + 1;
	/* per rank: the peak (recorded, else from the samples) and the categories at the
	 * samples' peak */
	int64_t *peak = TW_NEW_ARRAY(int64_t, (size_t)nranks), *speak = TW_NEW_ARRAY(int64_t, (size_t)nranks);
	int64_t(*at)[PLAN_NUM_MEM_CATS] = tw_calloc((size_t)nranks, sizeof(*at));
	bool *seen = TW_NEW_ARRAY(bool, (size_t)nranks);
	int64_t cur[PLAN_NUM_MEM_CATS];
	for (size_t i = 0; i < n;) {
		int32_t r = s[i].rank;
		memset(cur, 0, sizeof(cur));
		int64_t total = 0;
		for (; i < n && s[i].rank == r; i++) {
			seen[r] = true;
			if (s[i].cat >= 0) {
				cur[s[i].cat] = s[i].bytes;
				if (have_total)
					continue;
				total = 0;
				for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
					total += cur[c];
			} else {
				total = s[i].bytes;
			}
			if (total > speak[r]) {
				speak[r] = total;
				memcpy(at[r], cur, sizeof(cur));
			}
		}
	}
	for (int64_t r = 0; r < nranks; r++) {
		peak[r] = t->peak_mem && r < t->nranks ? t->peak_mem[r] : 0;
		if (peak[r] > 0)
			seen[r] = true;
		if (peak[r] <= 0)
			peak[r] = speak[r];
	}
	enum tw_result rc = TW_OK;
	size_t shown = 0;
	for (int64_t r = 0; r < nranks; r++)
		shown += seen[r];
	rpt_heading(pg, "Memory of %s", name);
	if (shown == 0) {
		rpt_para(pg, "This run recorded no GPU memory (no peak, no samples).");
		goto out;
	}
	rpt_para(pg, "Peak GPU memory per rank (the recorded peak: for simulated runs the predicted peak "
		     "with CUDA context and allocator fragmentation). %s GiB = 2^30 bytes.",
		 have_cat ? "The bars split the largest sampled total into the live bytes per category at that moment."
			  : "The samples of this run carry no categories; twin report memory with simulate "
			    "inputs (-m, -c ...) gives the split by category from the plan.");
	rpt_table_begin(pg, have_cat ? "rank|peak GiB|sampled peak GiB|largest category" : "rank|peak GiB|sampled peak GiB");
	FILE *f = rpt_data_open(pg, "memory.dat", err);
	if (!f) {
		rc = TW_ERR_SYSTEM;
		goto out;
	}
	fprintf(f, "# GiB per GPU\n\"rank\"\t\"peak\"");
	for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
		fprintf(f, "\t\"%s\"", plan_mem_cat_name((enum plan_mem_cat)c));
	fputc('\n', f);
	bool used_cat[PLAN_NUM_MEM_CATS] = { false };
	for (int64_t r = 0; r < nranks; r++) {
		if (!seen[r])
			continue;
		fprintf(f, "\"%" PRId64 "\"\t%.4f", r, (double)peak[r] / GIB);
		int big = 0;
		for (int c = 0; c < PLAN_NUM_MEM_CATS; c++) {
			fprintf(f, "\t%.4f", (double)at[r][c] / GIB);
			used_cat[c] |= at[r][c] > 0;
			if (at[r][c] > at[r][big])
				big = c;
		}
		fputc('\n', f);
		/* a rank without samples has no sampled peak (not a peak of 0) */
		char sp[32] = "-";
		if (speak[r] > 0)
			snprintf(sp, sizeof(sp), "%.2f", (double)speak[r] / GIB);
		if (have_cat)
			rpt_table_row(pg, "%" PRId64 "|%.2f|%s|%s", r, (double)peak[r] / GIB, sp,
				      speak[r] > 0 ? plan_mem_cat_name((enum plan_mem_cat)big) : "-");
		else
			rpt_table_row(pg, "%" PRId64 "|%.2f|%s", r, (double)peak[r] / GIB, sp);
	}
	TW_CHECK_GOTO(close_data(f, "memory.dat", err), rc, out);
	struct sb b = { 0 };
	sbf(&b, "set title 'Peak GPU memory per rank'\n"
		"set xlabel 'rank'\n"
		"set ylabel 'memory per GPU (GiB)'\n"
		"set style data histograms\n"
		"set style histogram rowstacked\n"
		"set style fill solid 0.9 border rgb '#555555'\n"
		"set boxwidth 0.6\n"
		"set yrange [0:*]\n");
	if (have_cat) {
		sbf(&b, "plot ");
		bool first = true;
		for (int c = 0; c < PLAN_NUM_MEM_CATS; c++) {
			if (!used_cat[c])
				continue;
			sbf(&b, "%s'memory.dat' using %d:xtic(1) title columnheader(%d) lc rgb '%s'",
			    first ? "" : ", \\\n     ", c + 3, c + 3, mem_color[c]);
			first = false;
		}
		sbf(&b, "%s'memory.dat' using 0:2 with points pt 9 ps 1.5 lc rgb '#c44e52' title 'recorded peak'\n",
		    first ? "" : ", \\\n     ");
	} else {
		sbf(&b, "plot 'memory.dat' using 2:xtic(1) lc rgb '#8172b3' title 'peak'\n");
	}
	TW_CHECK_GOTO(chart(pg, "memory", "memory.dat", have_cat ? "Peak GPU memory per rank, by category"
						   : "Peak GPU memory per rank", &b, err), rc, out);

	/* over time: the GPU total of up to 8 ranks */
	f = rpt_data_open(pg, "memory_time.dat", err);
	if (!f) {
		rc = TW_ERR_SYSTEM;
		goto out;
	}
	fprintf(f, "# time ms (from the rank's first sample), GPU memory GiB; one block per rank\n");
	int blocks = 0;
	int32_t ranks_in[8];
	for (size_t i = 0; i < n && blocks < 8;) {
		int32_t r = s[i].rank;
		int64_t t0 = s[i].t_ns, total = 0;
		memset(cur, 0, sizeof(cur));
		fprintf(f, "%s# rank %d\n", blocks ? "\n\n" : "", r);
		for (; i < n && s[i].rank == r; i++) {
			if (s[i].cat >= 0) {
				cur[s[i].cat] = s[i].bytes;
				if (have_total)
					continue;
				total = 0;
				for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
					total += cur[c];
			} else {
				total = s[i].bytes;
			}
			fprintf(f, "%.6f\t%.6f\n", ms(s[i].t_ns - t0), (double)total / GIB);
		}
		ranks_in[blocks++] = r;
	}
	TW_CHECK_GOTO(close_data(f, "memory_time.dat", err), rc, out);
	if (blocks > 0) {
		sbf(&b, "set title 'GPU memory over the step'\n"
			"set xlabel 'time since the rank''s first sample (ms)'\n"
			"set ylabel 'live GPU memory (GiB)'\n"
			"set yrange [0:*]\n"
			"plot ");
		for (int k = 0; k < blocks; k++)
			sbf(&b, "%s'memory_time.dat' index %d using 1:2 with steps lw 2 title 'rank %d'",
			    k ? ", \\\n     " : "", k, ranks_in[k]);
		sbf(&b, "\n");
		TW_CHECK_GOTO(chart(pg, "memory_time", "memory_time.dat", "Live GPU memory over time (allocations of the plan; "
							"no context or fragmentation)", &b, err), rc, out);
	}
out:
	free(s);
	free(peak);
	free(speak);
	free(at);
	free(seen);
	return rc;
}

/* ---- timeline ------------------------------------------------------------------------------- */

#define TL_MAX_EVENTS 200000

struct lane {
	int32_t rank, stream;
};

static int cmp_lane(const void *x, const void *y)
{
	const struct lane *a = x, *b = y;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return (a->stream > b->stream) - (a->stream < b->stream);
}

enum tw_result rpt_timeline(struct rpt_page *pg, const struct trace *t, const char *name,
			    int64_t step, int64_t max_ranks, struct tw_err *err)
{
	/* step windows per rank come from the analysis (markers and events' step tags, as
	 * prof_analyze sees them); the given step, else the first one */
	struct prof_step *rows = NULL;
	size_t nrows = 0;
	TW_CHECK(prof_analyze_steps(t, &rows, &nrows, err));
	int64_t want = step;
	if (want < 0) {
		for (size_t i = 0; i < nrows; i++)
			if (rows[i].step >= 0 && (want < 0 || rows[i].step < want))
				want = rows[i].step;
	} else {
		bool found = false;
		for (size_t i = 0; i < nrows && !found; i++)
			found = rows[i].step == want;
		if (!found) {
			free(rows);
			return tw_errf(err, TW_ERR_INVALID, "report timeline: %s has no step %" PRId64,
				       name, step);
		}
	}
	int64_t nr = t->nranks > 0 ? t->nranks : 1;
	for (size_t i = 0; i < t->nev; i++)
		if (t->ev[i].rank >= nr)
			nr = t->ev[i].rank + 1;
	/* per rank: the window [t0, t1) drawn; ranks shown: the first max_ranks with one */
	int64_t *t0 = TW_NEW_ARRAY(int64_t, (size_t)nr), *t1 = TW_NEW_ARRAY(int64_t, (size_t)nr);
	bool *shown = TW_NEW_ARRAY(bool, (size_t)nr);
	int64_t nshown = 0;
	if (want >= 0) {
		for (size_t i = 0; i < nrows; i++)
			if (rows[i].step == want && rows[i].rank >= 0 && rows[i].rank < nr &&
			    !shown[rows[i].rank] && nshown < max_ranks) {
				shown[rows[i].rank] = true;
				t0[rows[i].rank] = rows[i].start_ns;
				t1[rows[i].rank] = rows[i].end_ns;
				nshown++;
			}
	} else { /* no steps at all: each rank's whole trace */
		for (size_t i = 0; i < t->nev; i++) {
			const struct trace_event *e = &t->ev[i];
			if (e->rank < 0 || e->cat == TRACE_MARKER)
				continue;
			if (!shown[e->rank] && nshown < max_ranks) {
				shown[e->rank] = true;
				t0[e->rank] = e->start_ns;
				t1[e->rank] = e->end_ns;
				nshown++;
			}
			if (shown[e->rank]) {
				t0[e->rank] = e->start_ns < t0[e->rank] ? e->start_ns : t0[e->rank];
				t1[e->rank] = e->end_ns > t1[e->rank] ? e->end_ns : t1[e->rank];
			}
		}
	}
	free(rows);
	enum tw_result rc = TW_OK;
	struct lane *lanes = NULL;
	size_t nl = 0, lcap = 0;
	double tmax = 0; /* the longest window, ms */
	if (nshown == 0) {
		rc = tw_errf(err, TW_ERR_INVALID, "report timeline: %s has no events", name);
		goto out;
	}
	for (int64_t r = 0; r < nr; r++)
		if (shown[r] && ms(t1[r] - t0[r]) > tmax)
			tmax = ms(t1[r] - t0[r]);
#define IN_WINDOW(e)                                                                               \
	((e)->rank >= 0 && shown[(e)->rank] && (e)->cat != TRACE_MARKER &&                          \
	 (e)->end_ns > t0[(e)->rank] && (e)->start_ns < t1[(e)->rank])
	for (size_t i = 0; i < t->nev; i++) {
		const struct trace_event *e = &t->ev[i];
		if (!IN_WINDOW(e))
			continue;
		bool have = false;
		for (size_t k = 0; k < nl && !have; k++)
			have = lanes[k].rank == e->rank && lanes[k].stream == e->stream;
		if (!have) {
			TW_GROW(lanes, lcap, nl + 1);
			lanes[nl++] = (struct lane){ e->rank, e->stream };
		}
	}
	qsort(lanes, nl, sizeof(*lanes), cmp_lane);
	/* one data block per category, so each gets its colour and legend entry */
	FILE *f = rpt_data_open(pg, "timeline.dat", err);
	if (!f) {
		rc = TW_ERR_SYSTEM;
		goto out;
	}
	fprintf(f, "# start ms, end ms (from the start of the rank's step window, clipped to it), lane; "
		   "one block per category\n");
	size_t written = 0;
	int blocks = 0;
	int block_cat[TRACE_NUM_CATS];
	for (int c = 0; c < TRACE_NUM_CATS; c++) {
		if (c == TRACE_MARKER)
			continue;
		bool any = false;
		for (size_t i = 0; i < t->nev && written < TL_MAX_EVENTS; i++) {
			const struct trace_event *e = &t->ev[i];
			if (e->cat != c || !IN_WINDOW(e))
				continue;
			size_t lane = 0;
			while (lane < nl && !(lanes[lane].rank == e->rank && lanes[lane].stream == e->stream))
				lane++;
			if (!any)
				fprintf(f, "%s# %s\n", blocks ? "\n\n" : "", trace_cat_name((enum trace_cat)c));
			any = true;
			int64_t a0 = e->start_ns > t0[e->rank] ? e->start_ns : t0[e->rank];
			int64_t z0 = e->end_ns < t1[e->rank] ? e->end_ns : t1[e->rank];
			double a = ms(a0 - t0[e->rank]), z = ms(z0 - t0[e->rank]);
			if (z > tmax)
				tmax = z;
			fprintf(f, "%.6f\t%.6f\t%zu\n", a, z, lane);
			written++;
		}
		if (any)
			block_cat[blocks++] = c;
	}
#undef IN_WINDOW
	TW_CHECK_GOTO(close_data(f, "timeline.dat", err), rc, out);
	rpt_heading(pg, "Timeline of %s", name);
	rpt_para(pg, "%s, %" PRId64 " rank%s shown (of %" PRId64 "), one lane per rank and stream; "
		     "each rank's times start at the start of its step window (ranks' clocks differ), "
		     "events are clipped to the window. %zu events%s.",
		 want >= 0 ? "One step" : "The whole trace (no step information)", nshown,
		 nshown == 1 ? "" : "s", t->nranks, written,
		 written >= TL_MAX_EVENTS ? " (the first ones only: the chart is capped)" : "");
	if (want >= 0)
		rpt_para(pg, "Step %" PRId64 ".", want);
	static const char *const cat_color[TRACE_NUM_CATS] = {
		"#4c72b0", "#64b5cd", "#8da0cb", "#dd8452", "#c44e52", "#8172b3", "#937860",
		"#da8bc3", "#8c8c8c", "#55a868", "#2ca02c", "#98df8a", "#ccb974", "#000000"
	};
	struct sb b = { 0 };
	char tn[160], ts[32] = "";
	gp_label(tn, sizeof(tn), name);
	if (want >= 0)
		snprintf(ts, sizeof(ts), ", step %" PRId64, want);
	sbf(&b, "set title 'Per-rank timeline: %s%s'\n", tn, ts);
	sbf(&b, "set xlabel 'time since the start of the rank''s step (ms)'\n"
		"set ylabel 'rank / stream'\n"
		"set yrange [%f:-0.6]\n"
		"set xrange [0:%f]\n"
		"set style fill solid 1.0 noborder\n"
		"set grid xtics noytics\n"
		"set key outside right top\n"
		"set ytics font ',9' (",
	    (double)nl - 0.4, tmax * 1.01 > 0 ? tmax * 1.01 : 1.0);
	for (size_t k = 0; k < nl; k++) {
		const char *sn = t->kind == TRACE_KIND_IMPORT || lanes[k].stream < 0 || lanes[k].stream >= PLAN_NUM_STREAMS
					 ? NULL
					 : plan_stream_name((enum plan_stream)lanes[k].stream);
		if (sn)
			sbf(&b, "%s'r%d %s' %zu", k ? ", " : "", lanes[k].rank, sn, k);
		else
			sbf(&b, "%s'r%d s%d' %zu", k ? ", " : "", lanes[k].rank, lanes[k].stream, k);
	}
	sbf(&b, ")\nplot ");
	for (int k = 0; k < blocks; k++)
		sbf(&b, "%s'timeline.dat' index %d using (($1+$2)/2):3:1:2:($3-0.4):($3+0.4) with boxxyerror lc rgb '%s' title '%s'",
		    k ? ", \\\n     " : "", k, cat_color[block_cat[k]], trace_cat_name((enum trace_cat)block_cat[k]));
	if (blocks == 0)
		sbf(&b, "NaN notitle");
	sbf(&b, "\n");
	rc = chart(pg, "timeline", "timeline.dat", "Per-rank timeline: one lane per rank and stream, coloured by category", &b, err);
out:
	free(t0);
	free(t1);
	free(shown);
	free(lanes);
	return rc;
}
