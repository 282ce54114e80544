/* calibration (exec/calib.c): calib_apply on the host-cpu preset with known measurements writes
 * the eff.gemm table (thresholds 2n^3, first 0, eff = rate / best), the peaks and bandwidths,
 * each with a "measured by twin calibrate on HOST at DATE" note, and the result loads back with
 * cluster_load with exactly those values; a base without the fields is refused; a quick host
 * measurement gives positive figures. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../exec/exec.h"
#include "test.h"

#define TOPO TWIN_SOURCE_DIR "/topologies"

static struct calib_result known(void)
{
	struct calib_result r;
	memset(&r, 0, sizeof(r));
	snprintf(r.backend, sizeof(r.backend), "host");
	snprintf(r.host, sizeof(r.host), "testhost");
	snprintf(r.date, sizeof(r.date), "2026-01-02T03:04Z");
	r.ranks = 2;
	r.report = true;
	r.gemm_dtype = TW_FP32;
	r.npoints = 3;
	const double n[3] = { 64, 256, 1024 }, rate[3] = { 0.02, 0.05, 0.08 };
	for (int i = 0; i < 3; i++) {
		r.gemm[i].n = (int64_t)n[i];
		r.gemm[i].flops = 2 * n[i] * n[i] * n[i];
		r.gemm[i].tflops = rate[i];
	}
	r.peak_tflops[TW_FP32] = 0.08;
	r.mem_GBps = 12.5;
	r.allreduce_busbw_GBps = 3.25;
	r.allreduce_bytes = 16.0 * TW_MIB;
	return r;
}

static void test_apply_loads_back(struct test_ctx *T)
{
	struct tw_err err = { 0 };
	struct cluster base;
	CHECK_EQ_INT(T, cluster_load("host-cpu", TOPO, NULL, 0, &base, &err), TW_OK);
	cJSON *root = NULL;
	CHECK_EQ_INT(T, json_load_object(TOPO "/host-cpu.json", &root, &err), TW_OK);
	if (!root)
		return;
	struct calib_result r = known();
	CHECK_EQ_INT(T, calib_apply(&r, &base, root, &err), TW_OK);
	const cJSON *gpu = cJSON_GetObjectItem(root, "gpu");
	const cJSON *note = cJSON_GetObjectItem(gpu, "hbm_GBps_note");
	CHECK_STR_CONTAINS(T, cJSON_GetStringValue(note), "measured by twin calibrate on testhost at 2026-01-02T03:04Z");
	const cJSON *pk = cJSON_GetObjectItem(gpu, "peak_tflops");
	CHECK_STR_CONTAINS(T, cJSON_GetStringValue(cJSON_GetObjectItem(pk, "note")), "measured by twin calibrate");
	/* a field not measured keeps the base's note */
	CHECK(T, !strstr(cJSON_GetStringValue(cJSON_GetObjectItem(gpu, "launch_us_note")), "measured by"));

	char path[] = "/tmp/test_calib_XXXXXX.json";
	int fd = mkstemps(path, 5);
	CHECK(T, fd >= 0);
	char *text = cJSON_Print(root);
	if (fd >= 0 && text) {
		CHECK(T, write(fd, text, strlen(text)) == (ssize_t)strlen(text));
		close(fd);
		struct cluster c;
		CHECK_EQ_INT(T, cluster_load(path, TOPO, NULL, 0, &c, &err), TW_OK);
		CHECK_NEAR(T, c.gpu.peak_tflops[TW_FP32], 0.08, 1e-12);
		/* host ranks run bf16/fp16 as sgemm: same peak */
		CHECK_NEAR(T, c.gpu.peak_tflops[TW_BF16], 0.08, 1e-12);
		CHECK_NEAR(T, c.gpu.hbm_GBps, 12.5, 1e-12);
		CHECK_NEAR(T, c.node.pcie_GBps, 3.25, 1e-12);
		CHECK_EQ_INT(T, c.eff.gemm.n, 3);
		CHECK_NEAR(T, c.eff.gemm.min[0], 0, 0);
		CHECK_NEAR(T, c.eff.gemm.min[1], 2.0 * 256 * 256 * 256, 1e-12);
		CHECK_NEAR(T, c.eff.gemm.min[2], 2.0 * 1024 * 1024 * 1024, 1e-12);
		CHECK_NEAR(T, c.eff.gemm.eff[0], 0.25, 1e-12);
		CHECK_NEAR(T, c.eff.gemm.eff[1], 0.625, 1e-12);
		CHECK_NEAR(T, c.eff.gemm.eff[2], 1.0, 1e-12);
		/* the simulator's lookup then gives the measured fraction at each size */
		CHECK_NEAR(T, cluster_eff_lookup(&c.eff.gemm, 2.0 * 300 * 300 * 300), 0.625, 1e-12);
		/* untouched fields are the base's */
		CHECK_NEAR(T, c.gpu.launch_us, base.gpu.launch_us, 0);
		CHECK_NEAR(T, c.node.cpu_mem_GBps, base.node.cpu_mem_GBps, 0);
	}
	unlink(path);
	free(text);
	cJSON_Delete(root);
}

static void test_apply_refuses(struct test_ctx *T)
{
	struct tw_err err = { 0 };
	struct cluster base;
	CHECK_EQ_INT(T, cluster_load("host-cpu", TOPO, NULL, 0, &base, &err), TW_OK);
	cJSON *root = cJSON_Parse("{\"name\": \"x\", \"node\": {}, \"eff\": {}}");
	struct calib_result r = known();
	CHECK_EQ_INT(T, calib_apply(&r, &base, root, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(T, err.msg, "lacks gpu");
	cJSON_Delete(root);

	struct calib_options o = { .backend = "rocm", .quick = true };
	memset(&err, 0, sizeof(err));
	CHECK_EQ_INT(T, calib_measure(&o, &r, &err), TW_ERR_USAGE);
	CHECK_STR_CONTAINS(T, err.msg, "host or cuda");
}

static void test_measure_host_quick(struct test_ctx *T)
{
	struct calib_options o = { .backend = "host", .quick = true };
	struct calib_result r;
	struct tw_err err = { 0 };
	enum tw_result rc = calib_measure(&o, &r, &err);
	if (rc == TW_ERR_UNSUPPORTED) { /* a build without OpenBLAS says so */
		CHECK_STR_CONTAINS(T, err.msg, "OpenBLAS");
		return;
	}
	CHECK_EQ_INT(T, rc, TW_OK);
	CHECK(T, r.report);
	CHECK_EQ_INT(T, r.npoints, 5);
	for (int i = 0; i < r.npoints; i++)
		CHECK(T, r.gemm[i].tflops > 0 && r.gemm[i].tflops <= r.peak_tflops[TW_FP32]);
	CHECK(T, r.mem_GBps > 0 && r.host_mem_GBps > 0 && r.cpu_tflops > 0);
	CHECK(T, strlen(r.host) > 0 && strlen(r.date) == 17);
}

int main(void)
{
	struct test_ctx T = { 0 };
	TEST_RUN(&T, test_apply_loads_back);
	TEST_RUN(&T, test_apply_refuses);
	TEST_RUN(&T, test_measure_host_quick);
	return test_done(&T);
}
