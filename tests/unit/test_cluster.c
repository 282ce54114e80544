/* Unit tests for core/cluster: presets, --set overrides, validation rules, efficiency lookup,
 * GPU-count rules, JSON round trip. Runs from the repository root (tests/run.sh). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "test.h"

static const char *topo_dir(void)
{
	return "topologies";
}

/* Load a preset with optional sets; returns the result code and fills err. */
static enum tw_result load(const char *name, const char *const *sets, int n, struct cluster *c,
			   struct tw_err *err)
{
	tw_err_clear(err);
	return cluster_load(name, topo_dir(), sets, n, c, err);
}

static const char *const presets[] = {
	"dgx1-v100-32g", "dgx2-v100-32g", "dgx-a100-40g", "dgx-a100-80g", "dgx-h100", "dgx-h200",
	"dgx-b200",      "gb200-nvl72",   "pcie-8gpu",    "cloud-eth",    "host-cpu", NULL,
};

static void test_every_preset_loads(struct test_ctx *t)
{
	for (int i = 0; presets[i]; i++) {
		struct cluster c;
		struct tw_err err = {0};
		enum tw_result rc = load(presets[i], NULL, 0, &c, &err);
		if (rc != TW_OK)
			printf("#   %s: %s\n", presets[i], err.msg);
		CHECK_EQ_INT(t, rc, TW_OK);
		CHECK(t, !strcmp(c.name, presets[i]));
		CHECK_EQ_INT(t, cluster_validate(&c, presets[i], &err), TW_OK);
		CHECK(t, c.gpu.peak_tflops[TW_FP32] > 0);
		CHECK(t, c.node.gpus >= 1);
		CHECK(t, cluster_intra_GBps(&c) > 0);
	}
	/* the list names each of them, and only files that are presets */
	char buf[2048];
	cluster_list_presets(topo_dir(), buf, sizeof(buf));
	for (int i = 0; presets[i]; i++)
		CHECK_STR_CONTAINS(t, buf, presets[i]);
}

/* Every number (and array of numbers) in a preset has a note: "K_note" beside it, or a "note"
 * in the object that holds it. */
static int missing_notes(const cJSON *obj, const char *path)
{
	int bad = 0;
	bool has_note = cJSON_GetObjectItemCaseSensitive(obj, "note") != NULL;
	const cJSON *it;
	cJSON_ArrayForEach(it, obj)
	{
		char sub[256];
		snprintf(sub, sizeof(sub), "%s.%s", path, it->string ? it->string : "?");
		if (cJSON_IsObject(it)) {
			bad += missing_notes(it, sub);
		} else if (cJSON_IsNumber(it) || (cJSON_IsArray(it) && it->child &&
						  cJSON_IsNumber(it->child))) {
			char key[128];
			snprintf(key, sizeof(key), "%s_note", it->string);
			const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
			if (!has_note && !(cJSON_IsString(n) && n->valuestring[0])) {
				printf("#   %s has no note\n", sub);
				bad++;
			}
		}
	}
	return bad;
}

static void test_presets_have_notes(struct test_ctx *t)
{
	for (int i = 0; presets[i]; i++) {
		char path[256];
		snprintf(path, sizeof(path), "%s/%s.json", topo_dir(), presets[i]);
		cJSON *root = NULL;
		struct tw_err err = {0};
		CHECK_EQ_INT(t, json_load_object(path, &root, &err), TW_OK);
		if (!root)
			continue;
		CHECK_EQ_INT(t, missing_notes(root, presets[i]), 0);
		CHECK(t, cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "note")));
		cJSON_Delete(root);
	}
}

static void test_known_values(struct test_ctx *t)
{
	struct cluster c;
	struct tw_err err = {0};
	CHECK_EQ_INT(t, load("dgx-h100", NULL, 0, &c, &err), TW_OK);
	CHECK_NEAR(t, c.gpu.peak_tflops[TW_BF16], 989.4, 1e-9);
	CHECK_NEAR(t, c.node.nvlink_GBps, 370.8, 1e-9);
	CHECK(t, c.node.nvls);
	CHECK_EQ_INT(t, c.net.nics_per_node, 8);
	CHECK_NEAR(t, c.net.nic_gbps, 400, 1e-9);
	CHECK_NEAR(t, cluster_nic_GBps(&c), 47.0, 1e-9);
	CHECK_EQ_INT(t, c.net.fabric, CLUSTER_FABRIC_INFINIBAND);
	CHECK_EQ_INT(t, c.net.topology, CLUSTER_TOPO_RAIL_FAT_TREE);
	CHECK_EQ_INT(t, c.gpu.arch_sm, 90);

	CHECK_EQ_INT(t, load("dgx-a100-80g", NULL, 0, &c, &err), TW_OK);
	CHECK(t, !c.node.nvls);
	CHECK_NEAR(t, c.node.nvlink_GBps, 240, 1e-9);
	CHECK_EQ_INT(t, c.node.cpu_vendor, CLUSTER_CPU_AMD);
	CHECK(t, c.gpu.peak_tflops[TW_FP8] == 0);

	CHECK_EQ_INT(t, load("pcie-8gpu", NULL, 0, &c, &err), TW_OK);
	CHECK_EQ_INT(t, c.node.intra, CLUSTER_INTRA_PCIE);
	CHECK_NEAR(t, cluster_intra_GBps(&c), c.node.pcie_GBps, 1e-12);

	CHECK_EQ_INT(t, load("host-cpu", NULL, 0, &c, &err), TW_OK);
	CHECK_EQ_INT(t, c.node.intra, CLUSTER_INTRA_HOST);
	CHECK_EQ_INT(t, c.net.fabric, CLUSTER_FABRIC_NONE);
	CHECK_EQ_INT(t, c.net.max_nodes, 1);

	CHECK_EQ_INT(t, load("gb200-nvl72", NULL, 0, &c, &err), TW_OK);
	CHECK_EQ_INT(t, c.node.nvlink_domain_gpus, 72);
}

static void test_set_overrides(struct test_ctx *t)
{
	struct cluster c;
	struct tw_err err = {0};
	const char *sets[] = {"net.nic_gbps=100", "gpu.memory_gib=96", "gpu.peak_tflops.bf16=500",
			      "node.nvls=false", "node.nvls_GBps=0", "net.fabric=roce",
			      "gpu.name=H100 NVL"};
	CHECK_EQ_INT(t, load("dgx-h100", sets, 7, &c, &err), TW_OK);
	CHECK_NEAR(t, c.net.nic_gbps, 100, 1e-12);
	CHECK_NEAR(t, c.gpu.memory_gib, 96, 1e-12);
	CHECK_NEAR(t, c.gpu.peak_tflops[TW_BF16], 500, 1e-12);
	CHECK(t, !c.node.nvls);
	CHECK_EQ_INT(t, c.net.fabric, CLUSTER_FABRIC_ROCE);
	CHECK(t, !strcmp(c.gpu.name, "H100 NVL"));

	/* stragglers replace the whole array */
	const char *st[] = {"stragglers=[{\"gpu\":3,\"compute_scale\":0.8,\"link_scale\":1}]"};
	CHECK_EQ_INT(t, load("dgx-h100", st, 1, &c, &err), TW_OK);
	CHECK_EQ_INT(t, c.n_stragglers, 1);
	CHECK_EQ_INT(t, c.stragglers[0].index, 3);
	CHECK(t, !c.stragglers[0].by_node);
	CHECK_NEAR(t, c.stragglers[0].compute_scale, 0.8, 1e-12);
	CHECK_EQ_INT(t, c.stragglers[0].links, CLUSTER_LINKS_ALL);
	/* a node's NICs, a GPU's NVLink and the same GPU's compute: scales default to 1, entries
	 * may overlap (their scales multiply), and the file form round-trips */
	const char *st2[] = {"stragglers=[{\"node\":1,\"link\":\"nic\",\"link_scale\":0.5},"
			     "{\"gpu\":9,\"link\":\"nvlink\",\"link_scale\":0.25},{\"gpu\":9,\"compute_scale\":0.9}]"};
	CHECK_EQ_INT(t, load("dgx-h100", st2, 1, &c, &err), TW_OK);
	CHECK_EQ_INT(t, c.n_stragglers, 3);
	CHECK(t, c.stragglers[0].by_node && c.stragglers[0].index == 1);
	CHECK_EQ_INT(t, c.stragglers[0].links, CLUSTER_LINKS_NIC);
	CHECK_NEAR(t, c.stragglers[0].compute_scale, 1.0, 1e-12);
	CHECK_NEAR(t, c.stragglers[0].link_scale, 0.5, 1e-12);
	CHECK_EQ_INT(t, c.stragglers[1].links, CLUSTER_LINKS_NVLINK);
	CHECK_NEAR(t, c.stragglers[2].link_scale, 1.0, 1e-12);
	CHECK(t, cluster_straggler_covers(&c, &c.stragglers[0], 8));
	CHECK(t, cluster_straggler_covers(&c, &c.stragglers[0], 15));
	CHECK(t, !cluster_straggler_covers(&c, &c.stragglers[0], 7));
	CHECK(t, !cluster_straggler_covers(&c, &c.stragglers[0], 16));
	CHECK(t, cluster_straggler_covers(&c, &c.stragglers[1], 9));
	CHECK(t, !cluster_straggler_covers(&c, &c.stragglers[1], 8));
	int nodes = 0;
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 16, &nodes, &err), TW_OK);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 8, &nodes, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "stragglers[0].node: node 1 is outside the job of 1 node");
	{
		cJSON *o = cluster_to_json(&c);
		cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "stragglers");
		CHECK_EQ_INT(t, cJSON_GetArraySize(a), 3);
		cJSON *e0 = cJSON_GetArrayItem(a, 0);
		CHECK(t, cJSON_GetObjectItemCaseSensitive(e0, "node") != NULL);
		CHECK(t, cJSON_GetObjectItemCaseSensitive(e0, "gpu") == NULL);
		CHECK(t, !strcmp(cJSON_GetObjectItemCaseSensitive(e0, "link")->valuestring, "nic"));
		cJSON_Delete(o);
	}

	/* a path that is not there */
	const char *bad1[] = {"net.nic_gbpz=100"};
	CHECK_EQ_INT(t, load("dgx-h100", bad1, 1, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "no field net.nic_gbpz");
	/* wrong type: a string for a number, a number for a bool */
	const char *bad2[] = {"net.nic_gbps=fast"};
	CHECK_EQ_INT(t, load("dgx-h100", bad2, 1, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "net.nic_gbps must be a number");
	const char *bad3[] = {"node.nvls=1"};
	CHECK_EQ_INT(t, load("dgx-h100", bad3, 1, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "node.nvls must be a boolean");
	/* the right type but an invalid value: caught by validation, naming the field */
	const char *bad4[] = {"net.nic_gbps=0"};
	CHECK_EQ_INT(t, load("dgx-h100", bad4, 1, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "net.nic_gbps: must be > 0");
	const char *bad5[] = {"node.intra=pcie"};
	CHECK_EQ_INT(t, load("dgx-h100", bad5, 1, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "node.nvlink_GBps: must be 0 with node.intra = pcie");
	const char *bad6[] = {"net.fabric=myrinet"};
	CHECK_EQ_INT(t, load("dgx-h100", bad6, 1, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "net.fabric: must be one of");
	const char *bad7[] = {"gpu.memory_gib=-1"};
	CHECK_EQ_INT(t, load("dgx-h100", bad7, 1, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "gpu.memory_gib: must be > 0, got -1");
	/* the file itself is untouched by a failed or successful override */
	CHECK_EQ_INT(t, load("dgx-h100", NULL, 0, &c, &err), TW_OK);
	CHECK_NEAR(t, c.net.nic_gbps, 400, 1e-12);
}

static void test_owns_path(struct test_ctx *t)
{
	CHECK(t, cluster_owns_path("net.nic_gbps"));
	CHECK(t, cluster_owns_path("gpu.peak_tflops.bf16"));
	CHECK(t, cluster_owns_path("node.gpus"));
	CHECK(t, cluster_owns_path("eff.gemm"));
	CHECK(t, cluster_owns_path("stragglers"));
	CHECK(t, cluster_owns_path("name"));
	CHECK(t, !cluster_owns_path("zero_optimization.stage"));
	CHECK(t, !cluster_owns_path("network.x"));
	CHECK(t, !cluster_owns_path("tp"));
	CHECK(t, !cluster_owns_path("gpus"));
}

static void test_eff_lookup(struct test_ctx *t)
{
	struct cluster_eff_table tab = {.n = 3, .min = {0, 1e9, 1e10}, .eff = {0.1, 0.5, 0.9}};
	CHECK_NEAR(t, cluster_eff_lookup(&tab, 0), 0.1, 1e-12);
	CHECK_NEAR(t, cluster_eff_lookup(&tab, 5e8), 0.1, 1e-12);
	CHECK_NEAR(t, cluster_eff_lookup(&tab, 1e9), 0.5, 1e-12); /* threshold is inclusive */
	CHECK_NEAR(t, cluster_eff_lookup(&tab, 9.99e9), 0.5, 1e-12);
	CHECK_NEAR(t, cluster_eff_lookup(&tab, 1e12), 0.9, 1e-12);
	struct cluster c;
	struct tw_err err = {0};
	CHECK_EQ_INT(t, load("dgx-h100", NULL, 0, &c, &err), TW_OK);
	/* bigger kernels are never less efficient, and the top is below 1 */
	double prev = 0;
	for (double f = 1e6; f < 1e13; f *= 3) {
		double e = cluster_eff_lookup(&c.eff.gemm, f);
		CHECK(t, e >= prev && e <= 1);
		prev = e;
	}
	CHECK(t, prev < 1);
}

static void test_check_gpus(struct test_ctx *t)
{
	struct cluster c;
	struct tw_err err = {0};
	int nodes = -1;
	CHECK_EQ_INT(t, load("dgx-h100", NULL, 0, &c, &err), TW_OK);
	for (int g = 1; g <= 8; g++) {
		CHECK_EQ_INT(t, cluster_check_gpus(&c, g, &nodes, &err), TW_OK);
		CHECK_EQ_INT(t, nodes, 1);
	}
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 16, &nodes, &err), TW_OK);
	CHECK_EQ_INT(t, nodes, 2);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 16384, &nodes, &err), TW_OK);
	CHECK_EQ_INT(t, nodes, 2048);
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 12, &nodes, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "multiple of node.gpus = 8");
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 0, &nodes, &err), TW_ERR_INVALID);
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 8LL * 65537, &nodes, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "net.max_nodes = 65536");

	/* one machine: CPU ranks cannot span nodes */
	CHECK_EQ_INT(t, load("host-cpu", NULL, 0, &c, &err), TW_OK);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 4, &nodes, &err), TW_OK);
	CHECK_EQ_INT(t, nodes, 1);
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 16, &nodes, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "at most net.max_nodes = 1");

	/* a straggler must be inside the job */
	const char *st[] = {"stragglers=[{\"gpu\":9,\"compute_scale\":0.5,\"link_scale\":1}]"};
	CHECK_EQ_INT(t, load("dgx-h100", st, 1, &c, &err), TW_OK);
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 8, &nodes, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "stragglers[0].gpu");
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 16, &nodes, &err), TW_OK);

	/* NVL72: the rack is the node */
	CHECK_EQ_INT(t, load("gb200-nvl72", NULL, 0, &c, &err), TW_OK);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 64, &nodes, &err), TW_OK);
	CHECK_EQ_INT(t, nodes, 1);
	CHECK_EQ_INT(t, cluster_check_gpus(&c, 144, &nodes, &err), TW_OK);
	CHECK_EQ_INT(t, nodes, 2);
}

static void test_validate_rules(struct test_ctx *t)
{
	struct cluster base, c;
	struct tw_err err = {0};
	CHECK_EQ_INT(t, load("dgx-h100", NULL, 0, &base, &err), TW_OK);
	/* cross-field rules, one edit at a time on a valid struct */
	c = base; c.node.nvls = false; /* nvls_GBps still 475 */
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "x.json: node.nvls_GBps: must be 0 when node.nvls is false");
	c = base; c.gpu.context_gib = 100;
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "gpu.context_gib");
	c = base; c.eff.gemm.min[1] = 0;
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "eff.gemm.min_flops: thresholds must be strictly ascending");
	c = base; c.eff.mem.eff[0] = 1.5;
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "eff.mem.eff: entry 0 must be in (0, 1]");
	c = base; c.net.oversubscription = 0.5;
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "net.oversubscription: must be >= 1");
	c = base; c.node.nvlink_domain_gpus = 3;
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "node.nvlink_domain_gpus");
	c = base; c.gpu.hbm_GBps = NAN;
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "gpu.hbm_GBps: must be a finite number");
	c = base; c.net.fabric = CLUSTER_FABRIC_NONE;
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "with net.fabric = none");
	c = base;
	tw_err_clear(&err);
	CHECK_EQ_INT(t, cluster_validate(&c, "x.json", &err), TW_OK);
}

/* cluster_to_json is the file's schema: writing it out and loading it gives the same cluster. */
static void test_json_round_trip(struct test_ctx *t)
{
	char tmpl[] = "/tmp/twin_cluster_XXXXXX";
	int fd = mkstemp(tmpl);
	CHECK(t, fd >= 0);
	if (fd < 0)
		return;
	close(fd);
	char path[64];
	snprintf(path, sizeof(path), "%s.json", tmpl);
	for (int i = 0; presets[i]; i++) {
		struct cluster a, b;
		struct tw_err err = {0};
		const char *st[] = {"stragglers=[{\"gpu\":1,\"compute_scale\":0.75,\"link_scale\":0.5}]"};
		CHECK_EQ_INT(t, load(presets[i], st, 1, &a, &err), TW_OK);
		cJSON *j = cluster_to_json(&a);
		char *s = cJSON_Print(j);
		FILE *f = fopen(path, "w");
		CHECK(t, f != NULL);
		if (!f) {
			free(s);
			cJSON_Delete(j);
			break;
		}
		fputs(s, f);
		fclose(f);
		enum tw_result rc = load(path, NULL, 0, &b, &err);
		if (rc != TW_OK)
			printf("#   %s: %s\n", presets[i], err.msg);
		CHECK_EQ_INT(t, rc, TW_OK);
		cJSON *j2 = cluster_to_json(&b);
		char *s2 = cJSON_Print(j2);
		CHECK(t, !strcmp(s, s2));
		free(s);
		free(s2);
		cJSON_Delete(j);
		cJSON_Delete(j2);
	}
	unlink(path);
	unlink(tmpl);
}

/* A synchronous job runs at its slowest GPU's pace: sigma = speed_variation / (2 x 2.698)
 * (Tukey's fences of a normal), the multiplier 1 + sigma E[max of n standard normals]. E[max]
 * from tables of normal order statistics: 1/sqrt(pi) for 2, 1.423600 for 8, 2.507594 for 100,
 * 3.241436 for 1,000. GPU presets carry 8% (Sinha et al., SC'22); a file without the field
 * (older than it) and CPU ranks have none. */
static void test_job_pace(struct test_ctx *t)
{
	struct cluster c;
	struct tw_err err = {0};
	CHECK_EQ_INT(t, load("dgx-a100-80g", NULL, 0, &c, &err), TW_OK);
	CHECK_NEAR(t, c.gpu.speed_variation, 0.08, 1e-12);
	double sigma = 0.08 / (2 * 2.698);
	CHECK_NEAR(t, cluster_job_pace(&c, 1), 1.0, 0);
	CHECK_NEAR(t, cluster_job_pace(&c, 2), 1 + sigma / sqrt(M_PI), 1e-9);
	CHECK_NEAR(t, cluster_job_pace(&c, 8), 1 + sigma * 1.423600, 1e-8);
	CHECK_NEAR(t, cluster_job_pace(&c, 100), 1 + sigma * 2.507594, 1e-8);
	CHECK_NEAR(t, cluster_job_pace(&c, 1000), 1 + sigma * 3.241436, 1e-8);
	for (int64_t n = 1; n < (int64_t)1 << 40; n *= 4)
		CHECK(t, cluster_job_pace(&c, 4 * n) > cluster_job_pace(&c, n));
	CHECK(t, cluster_job_pace(&c, (int64_t)1 << 40) < 1.11); /* E[max] of 2^40: 7.0 */
	c.gpu.speed_variation = 0;
	CHECK_NEAR(t, cluster_job_pace(&c, 4096), 1.0, 0);
	CHECK_EQ_INT(t, load("host-cpu", NULL, 0, &c, &err), TW_OK);
	CHECK_NEAR(t, cluster_job_pace(&c, 8), 1.0, 0);
	/* the field is optional: a file without it loads with 0 */
	CHECK_EQ_INT(t, load("dgx-h100", NULL, 0, &c, &err), TW_OK);
	cJSON *o = cluster_to_json(&c);
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "gpu"), "speed_variation");
	char *txt = cJSON_Print(o);
	cJSON_Delete(o);
	const char *p = "test_cluster_no_spread.json";
	FILE *f = fopen(p, "w");
	CHECK(t, f != NULL);
	if (f) {
		fputs(txt, f);
		fclose(f);
	}
	free(txt);
	CHECK_EQ_INT(t, load(p, NULL, 0, &c, &err), TW_OK);
	CHECK_NEAR(t, c.gpu.speed_variation, 0, 0);
	unlink(p);
	/* and a spread of half the median speed or more is refused */
	CHECK_EQ_INT(t, load("dgx-h100", (const char *const[]){"gpu.speed_variation=0.5"}, 1, &c, &err),
		     TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "gpu.speed_variation");
}

static void test_unknown_preset(struct test_ctx *t)
{
	struct cluster c;
	struct tw_err err = {0};
	CHECK_EQ_INT(t, load("dgx-h900", NULL, 0, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "unknown cluster 'dgx-h900'");
	CHECK_STR_CONTAINS(t, err.msg, "dgx-h100");
	CHECK_STR_CONTAINS(t, err.msg, "host-cpu");
	CHECK_EQ_INT(t, load("no/such/file.json", NULL, 0, &c, &err), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "no/such/file.json: cannot open");
}

int main(void)
{
	struct test_ctx t = {0};
	TEST_RUN(&t, test_every_preset_loads);
	TEST_RUN(&t, test_presets_have_notes);
	TEST_RUN(&t, test_known_values);
	TEST_RUN(&t, test_set_overrides);
	TEST_RUN(&t, test_owns_path);
	TEST_RUN(&t, test_eff_lookup);
	TEST_RUN(&t, test_check_gpus);
	TEST_RUN(&t, test_validate_rules);
	TEST_RUN(&t, test_json_round_trip);
	TEST_RUN(&t, test_job_pace);
	TEST_RUN(&t, test_unknown_preset);
	return test_done(&t);
}
