/* reports/: --vary parsing and the cross product, derived point metrics, the step parts
 * (they add up to the step), and the page writer (temporary directory, refusal, --force,
 * escaping, abort leaves nothing). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../reports/reports.h"
#include "test.h"

static void test_vary_parse(struct test_ctx *T)
{
	struct rpt_sweep s;
	memset(&s, 0, sizeof(s));
	struct tw_err err = { 0 };
	CHECK(T, rpt_sweep_add_vary(&s, "gpus=8,16,32", &err) == TW_OK);
	CHECK_EQ_INT(T, s.vary[0].nvalues, 3);
	CHECK(T, !strcmp(s.vary[0].path, "gpus") && !strcmp(s.vary[0].values[2], "32"));
	CHECK(T, rpt_sweep_add_vary(&s, "net.nic_gbps=100,400", &err) == TW_OK);
	CHECK_EQ_INT(T, s.nvary, 2);
	/* commas inside JSON values (arrays, objects, strings) belong to the value */
	CHECK(T, rpt_sweep_add_vary(&s, "stragglers=[],[{\"node\":1,\"compute_scale\":0.5}],"
					"[{\"gpu\":2,\"link\":\"a,]\\\"b\",\"link_scale\":1}]", &err) == TW_OK);
	CHECK_EQ_INT(T, s.vary[2].nvalues, 3);
	CHECK(T, !strcmp(s.vary[2].values[0], "[]"));
	CHECK(T, !strcmp(s.vary[2].values[1], "[{\"node\":1,\"compute_scale\":0.5}]"));
	CHECK(T, !strcmp(s.vary[2].values[2], "[{\"gpu\":2,\"link\":\"a,]\\\"b\",\"link_scale\":1}]"));
	/* errors: each names the rule; the sweep is unchanged */
	static const char *const bad[][2] = {
		{ "gpus", "expected PATH=V1,V2" }, { "=1,2", "expected PATH=V1,V2" },
		{ "tp=1,,2", "empty value" }, { "tp=", "empty value" }, { "tp=1,", "empty value" },
		{ "tp=2,2", "given twice" }, { "gpus=3", "already varied" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tw_err e = { 0 };
		CHECK(T, rpt_sweep_add_vary(&s, bad[i][0], &e) == TW_ERR_USAGE);
		CHECK_STR_CONTAINS(T, e.msg, bad[i][1]);
	}
	CHECK_EQ_INT(T, s.nvary, 3);
	rpt_sweep_release(&s);

	memset(&s, 0, sizeof(s));
	struct tw_err e = { 0 };
	CHECK(T, rpt_sweep_add_vary(&s, "gpus=8,x", &e) == TW_ERR_USAGE);
	CHECK_STR_CONTAINS(T, e.msg, "gpus value 'x' must be an integer");
	tw_err_clear(&e);
	CHECK(T, rpt_sweep_add_vary(&s, "gpus=0", &e) == TW_ERR_USAGE);
	/* values of other paths are whatever --set takes: checked per point, not here */
	CHECK(T, rpt_sweep_add_vary(&s, "zero_optimization.stage=x,1", &e) == TW_OK);
	char many[400] = "tp=";
	for (int i = 0; i <= RPT_MAX_VALUES; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d", i ? "," : "", i);
	tw_err_clear(&e);
	CHECK(T, rpt_sweep_add_vary(&s, many, &e) == TW_ERR_USAGE);
	CHECK_STR_CONTAINS(T, e.msg, "at most 64 values");
	rpt_sweep_release(&s);
}

static void test_expand(struct test_ctx *T)
{
	struct rpt_sweep s;
	memset(&s, 0, sizeof(s));
	struct tw_err err = { 0 };
	CHECK(T, rpt_sweep_expand(&s, &err) == TW_ERR_USAGE); /* no --vary */
	CHECK(T, rpt_sweep_add_vary(&s, "tp=1,2", &err) == TW_OK);
	CHECK(T, rpt_sweep_add_vary(&s, "pp=1,2,4", &err) == TW_OK);
	CHECK(T, rpt_sweep_expand(&s, &err) == TW_OK);
	CHECK_EQ_INT(T, s.npts, 6);
	/* first --vary slowest */
	static const char *const want[] = { "tp=1,pp=1", "tp=1,pp=2", "tp=1,pp=4",
					    "tp=2,pp=1", "tp=2,pp=2", "tp=2,pp=4" };
	for (size_t i = 0; i < 6 && i < s.npts; i++) {
		char label[64];
		rpt_point_label(&s, &s.pts[i], label, sizeof(label));
		CHECK(T, !strcmp(label, want[i]));
		CHECK(T, !s.pts[i].ok && s.pts[i].run_id == -1);
	}
	rpt_sweep_release(&s);
	/* 4 x 64 values = 256 points is the limit; one more --vary of 2 is refused */
	memset(&s, 0, sizeof(s));
	char v[400];
	for (int k = 0; k < 3; k++) {
		int n = snprintf(v, sizeof(v), "p%d=", k);
		for (int i = 0; i < (k == 0 ? 64 : k == 1 ? 4 : 2); i++)
			n += snprintf(v + n, sizeof(v) - (size_t)n, "%s%d", i ? "," : "", i);
		CHECK(T, rpt_sweep_add_vary(&s, v, &err) == TW_OK);
	}
	tw_err_clear(&err);
	CHECK(T, rpt_sweep_expand(&s, &err) == TW_ERR_LIMIT);
	CHECK_STR_CONTAINS(T, err.msg, "more than 256 points");
	rpt_sweep_release(&s);
}

static void test_point_fill(struct test_ctx *T)
{
	struct prof_analysis a;
	memset(&a, 0, sizeof(a));
	a.step_ns = 500000000; /* 0.5 s */
	a.exposed_comm_ns = 20000000;
	a.peak_mem_bytes = 40 * TW_GIB;
	struct rpt_point p;
	memset(&p, 0, sizeof(p));
	/* 16 GPUs, 65536 tokens per step, 4e15 model FLOPs per step, 312 TFLOP/s peak, 80 GiB:
	 * tokens/s = 65536 / 0.5 = 131072; per GPU 8192; TFLOP/s per GPU = 4e15 / 16 / 0.5 / 1e12
	 * = 500 -> MFU 500 / 312 */
	rpt_point_fill(&p, &a, 16, 65536, 4e15, 312, 80.0 * (double)TW_GIB);
	CHECK(T, p.ok);
	CHECK_NEAR(T, p.step_s, 0.5, 1e-12);
	CHECK_NEAR(T, p.tokens_s, 131072, 1e-12);
	CHECK_NEAR(T, p.tokens_s_gpu, 8192, 1e-12);
	CHECK_NEAR(T, p.tflops_gpu, 500, 1e-12);
	CHECK_NEAR(T, p.mfu, 500.0 / 312.0, 1e-12);
	CHECK_NEAR(T, p.exposed_comm_s, 0.02, 1e-12);
	CHECK(T, p.fits);
	rpt_point_fill(&p, &a, 16, 65536, 4e15, 312, 39.5 * (double)TW_GIB);
	CHECK(T, !p.fits);
}

static void test_peak(struct test_ctx *T)
{
	double pk[TW_NUM_DTYPES] = { 0 };
	pk[TW_FP32] = 19.5;
	pk[TW_TF32] = 156;
	pk[TW_BF16] = 312;
	pk[TW_FP16] = 312;
	CHECK_NEAR(T, cluster_gemm_peak(pk, TW_BF16, false, false), 312, 1e-12);
	CHECK_NEAR(T, cluster_gemm_peak(pk, TW_FP32, false, false), 19.5, 1e-12); /* PyTorch default */
	CHECK_NEAR(T, cluster_gemm_peak(pk, TW_FP32, false, true), 156, 1e-12);   /* allow_tf32 */
	CHECK_NEAR(T, cluster_gemm_peak(pk, TW_BF16, false, true), 312, 1e-12);   /* tf32: fp32 only */
	CHECK_NEAR(T, cluster_gemm_peak(pk, TW_BF16, true, false), 312, 1e-12);   /* no fp8 here */
	pk[TW_FP8] = 989;
	CHECK_NEAR(T, cluster_gemm_peak(pk, TW_BF16, true, false), 989, 1e-12);
}

static void test_parts(struct test_ctx *T)
{
	/* step 100: compute 60, idle 40 = comm stall 20 + copy stall 5 + host 15 (of which bubble
	 * 10). all-gather exposed 15 and reduce-scatter exposed 10 overlap each other: their
	 * shares of the 20 are 12 and 8. */
	struct prof_analysis a;
	memset(&a, 0, sizeof(a));
	a.step_ns = 100;
	a.compute_ns = 60;
	a.idle_ns = 40;
	a.stall_comm_ns = 20;
	a.stall_copy_ns = 5;
	a.stall_host_ns = 15;
	a.bubble_ns = 10;
	a.coll[TRACE_ALL_GATHER].exposed_ns = 15;
	a.coll[TRACE_REDUCE_SCATTER].exposed_ns = 10;
	struct rpt_parts p;
	rpt_parts_of(&a, &p);
	CHECK_EQ_INT(T, p.ns[0], 60);
	CHECK_EQ_INT(T, p.ns[1], 12);
	CHECK_EQ_INT(T, p.ns[2], 8);
	CHECK_EQ_INT(T, p.ns[7], 5);
	CHECK_EQ_INT(T, p.ns[8], 10);
	CHECK_EQ_INT(T, p.ns[9], 5);
	int64_t sum = 0;
	for (int k = 0; k < RPT_NUM_PARTS; k++)
		sum += p.ns[k];
	CHECK_EQ_INT(T, sum, a.step_ns);
	CHECK(T, !strcmp(rpt_part_name(1), "exposed all-gather"));
	/* rounding: three equal shares of 10 still add up to 10 */
	memset(&a, 0, sizeof(a));
	a.stall_comm_ns = 10;
	a.coll[TRACE_ALL_GATHER].exposed_ns = 7;
	a.coll[TRACE_ALL_REDUCE].exposed_ns = 7;
	a.coll[TRACE_P2P].exposed_ns = 7;
	rpt_parts_of(&a, &p);
	CHECK_EQ_INT(T, p.ns[1] + p.ns[3] + p.ns[5], 10);
	/* a bubble longer than the host gaps is capped by them */
	memset(&a, 0, sizeof(a));
	a.stall_host_ns = 4;
	a.bubble_ns = 9;
	rpt_parts_of(&a, &p);
	CHECK_EQ_INT(T, p.ns[8], 4);
	CHECK_EQ_INT(T, p.ns[9], 0);
}

static int count_entries(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = calloc(1, 1 << 16);
	size_t n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void test_page(struct test_ctx *T)
{
	char root[] = "/tmp/twin-test-report-XXXXXX";
	if (!mkdtemp(root)) {
		CHECK(T, false);
		return;
	}
	setenv("PATH", "/nonexistent", 1); /* no gnuplot: charts are described, not drawn */
	char dir[256], path[512];
	snprintf(dir, sizeof(dir), "%s/rep", root);
	struct tw_err err = { 0 };
	struct rpt_page *pg = NULL;
	CHECK(T, rpt_page_begin(dir, false, "A <b> & c", &pg, &err) == TW_OK);
	CHECK_EQ_INT(T, count_entries(root, "rep.tmp-"), 1);
	rpt_heading(pg, "Part %d", 1);
	rpt_para(pg, "x < y & z_1");
	rpt_table_begin(pg, "name|value");
	rpt_table_row(pg, "a|b|c");
	rpt_table_row(pg, "%s|%d", "n", 2);
	FILE *f = rpt_data_open(pg, "c.dat", &err);
	CHECK(T, f != NULL);
	if (f) {
		fputs("1 2\n", f);
		fclose(f);
	}
	CHECK(T, rpt_chart(pg, "c", "c.dat", "a chart", "plot 'c.dat' using 1:2\n", &err) == TW_OK);
	CHECK(T, rpt_page_commit(pg, &err) == TW_OK);
	struct rpt_result r;
	rpt_page_result(pg, &r);
	CHECK(T, r.charts == 1 && r.rendered == 0 && !r.gnuplot);
	rpt_page_free(pg);
	CHECK_EQ_INT(T, count_entries(root, "rep.tmp-"), 0);
	snprintf(path, sizeof(path), "%s/index.md", dir);
	char *md = slurp(path);
	CHECK_STR_CONTAINS(T, md, "# A \\<b> & c\n");
	CHECK_STR_CONTAINS(T, md, "## Part 1");
	CHECK_STR_CONTAINS(T, md, "x \\< y & z\\_1");
	CHECK_STR_CONTAINS(T, md, "| name | value |\n|---|---|\n| a | b | c |\n| n | 2 |\n");
	CHECK_STR_CONTAINS(T, md, "`gnuplot c.gp`");
	free(md);
	snprintf(path, sizeof(path), "%s/index.html", dir);
	char *html = slurp(path);
	CHECK_STR_CONTAINS(T, html, "<title>A &lt;b&gt; &amp; c</title>");
	CHECK_STR_CONTAINS(T, html, "<tr><th>name</th><th>value</th></tr>");
	CHECK_STR_CONTAINS(T, html, "<tr><td>n</td><td>2</td></tr>\n</table>");
	CHECK_STR_CONTAINS(T, html, "gnuplot was not found on PATH");
	free(html);
	snprintf(path, sizeof(path), "%s/c.gp", dir);
	char *gp = slurp(path);
	CHECK_STR_CONTAINS(T, gp, "set output 'c.png'");
	CHECK_STR_CONTAINS(T, gp, "set output 'c.svg'"); /* the fallback */
	CHECK_STR_CONTAINS(T, gp, "plot 'c.dat' using 1:2\n");
	free(gp);

	/* non-empty: refused without --force, nothing created */
	pg = NULL;
	tw_err_clear(&err);
	CHECK(T, rpt_page_begin(dir, false, "again", &pg, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "not empty (use --force");
	CHECK(T, pg == NULL);
	CHECK_EQ_INT(T, count_entries(root, "rep.tmp-"), 0);
	/* --force: replaced, the old copy removed */
	CHECK(T, rpt_page_begin(dir, true, "second", &pg, &err) == TW_OK);
	rpt_para(pg, "new");
	CHECK(T, rpt_page_commit(pg, &err) == TW_OK);
	rpt_page_free(pg);
	snprintf(path, sizeof(path), "%s/c.dat", dir);
	CHECK(T, access(path, F_OK) != 0);
	snprintf(path, sizeof(path), "%s/index.md", dir);
	md = slurp(path);
	CHECK_STR_CONTAINS(T, md, "# second");
	free(md);
	CHECK_EQ_INT(T, count_entries(root, "rep"), 1);
	/* abort: nothing written */
	char dir2[300];
	snprintf(dir2, sizeof(dir2), "%s/other", root);
	CHECK(T, rpt_page_begin(dir2, false, "x", &pg, &err) == TW_OK);
	rpt_para(pg, "x");
	rpt_page_abort(pg);
	CHECK_EQ_INT(T, count_entries(root, "other"), 0);
	/* a file in the way */
	snprintf(path, sizeof(path), "%s/file", root);
	f = fopen(path, "w");
	if (f)
		fclose(f);
	tw_err_clear(&err);
	CHECK(T, rpt_page_begin(path, true, "x", &pg, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "is not a directory");
	remove(path);
	/* clean up: index.md and index.html of the forced report */
	snprintf(path, sizeof(path), "%s/index.md", dir);
	remove(path);
	snprintf(path, sizeof(path), "%s/index.html", dir);
	remove(path);
	rmdir(dir);
	CHECK(T, rmdir(root) == 0);
}

int main(void)
{
	struct test_ctx t = { 0 };
	TEST_RUN(&t, test_vary_parse);
	TEST_RUN(&t, test_expand);
	TEST_RUN(&t, test_point_fill);
	TEST_RUN(&t, test_peak);
	TEST_RUN(&t, test_parts);
	TEST_RUN(&t, test_page);
	return test_done(&t);
}
