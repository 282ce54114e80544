/* twin topo — show a cluster (topologies/NAME.json or a path) as a table or JSON, and list the
 * presets. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char topo_help[] =
	"usage: twin topo show CLUSTER [--set PATH=VALUE]... [--json]\n"
	"       twin topo list [--json]\n"
	"\n"
	"Show a cluster: the GPU (memory, peak TFLOP/s per dtype, HBM), the node (NVLink/NVSwitch,\n"
	"NVLS, PCIe, host memory, CPU cores, NVMe), the network (NICs, fabric, topology,\n"
	"oversubscription, latency), the links per tier with bandwidth and latency, and the\n"
	"efficiency tables. CLUSTER is a preset name (twin topo list) or a path to a .json file\n"
	"(schema in docs/cluster.md).\n"
	"\n"
	"  --set PATH=VALUE    override a field by dotted path, type-checked (repeatable), e.g.\n"
	"                      net.nic_gbps=100, gpu.memory_gib=96, node.nvls=false\n"
	"  --json              print the cluster (and its link tiers) as JSON\n";

/* One tier of links: what it joins, bandwidth per direction and its scope, latency. */
struct tier {
	const char *name;
	double GBps;
	const char *per;
	double latency_us; /* < 0: not applicable */
};

static int tiers(const struct cluster *c, struct tier *t)
{
	int n = 0;
	bool nvlink = c->node.intra == CLUSTER_INTRA_NVSWITCH ||
		      c->node.intra == CLUSTER_INTRA_NVLINK_MESH;
	if (c->node.intra == CLUSTER_INTRA_HOST)
		t[n++] = (struct tier){"DRAM share", c->gpu.hbm_GBps, "per rank", -1};
	else
		t[n++] = (struct tier){"HBM", c->gpu.hbm_GBps, "per GPU", -1};
	if (nvlink)
		t[n++] = (struct tier){c->node.intra == CLUSTER_INTRA_NVSWITCH ? "NVLink (NVSwitch)"
									: "NVLink (mesh)",
				       c->node.nvlink_GBps, "per GPU", c->node.nvlink_latency_us};
	if (c->node.nvls)
		t[n++] = (struct tier){"NVLS all-reduce", c->node.nvls_GBps, "busbw",
				       c->node.nvlink_latency_us};
	if (c->node.intra == CLUSTER_INTRA_HOST)
		t[n++] = (struct tier){"shared memory", c->node.pcie_GBps, "per rank",
				       c->node.pcie_latency_us};
	else
		t[n++] = (struct tier){c->node.intra == CLUSTER_INTRA_PCIE ? "PCIe (GPU-GPU, host)"
									   : "PCIe (host)",
				       c->node.pcie_GBps, "per GPU", c->node.pcie_latency_us};
	if (c->net.fabric != CLUSTER_FABRIC_NONE) {
		double nic = cluster_nic_GBps(c);
		t[n++] = (struct tier){"NIC", nic, "per NIC", c->net.latency_us};
		t[n++] = (struct tier){"network", nic * c->net.nics_per_node, "per node",
				       c->net.latency_us};
		if (c->net.oversubscription > 1)
			t[n++] = (struct tier){"across leaves", nic * c->net.nics_per_node /
									 c->net.oversubscription,
					       "per node", c->net.latency_us};
	}
	t[n++] = (struct tier){"host DRAM", c->node.cpu_mem_GBps, "per node", -1};
	if (c->node.nvme_GBps > 0)
		t[n++] = (struct tier){"NVMe", c->node.nvme_GBps, "per node", -1};
	return n;
}

static void print_eff(const char *label, const struct cluster_eff_table *t, const char *unit,
		      double scale)
{
	printf("  %-13s", label);
	for (int i = 0; i < t->n; i++)
		printf("%s>=%g %s: %.2f", i ? ", " : "", t->min[i] / scale, unit, t->eff[i]);
	printf("\n");
}

static void print_cluster(const struct cluster *c)
{
	printf("cluster %s\n\n", c->name);

	bool cpu = c->node.intra == CLUSTER_INTRA_HOST;
	printf("GPU            %s", c->gpu.name);
	if (!cpu)
		printf(" (sm_%d, %d SMs)\n", c->gpu.arch_sm, c->gpu.sms);
	else
		printf(" (a CPU rank of %d core%s)\n", c->gpu.sms, c->gpu.sms == 1 ? "" : "s");
	printf("  memory       %.2f GiB (context %.2f GiB, allocator overhead x%.2f)\n",
	       c->gpu.memory_gib, c->gpu.context_gib, c->eff.alloc_fragmentation);
	printf("  %-13s%.0f GB/s\n", cpu ? "DRAM share" : "HBM", c->gpu.hbm_GBps);
	printf("  peak TFLOP/s");
	for (int d = 0; d < TW_NUM_DTYPES; d++) {
		double p = c->gpu.peak_tflops[d];
		if (p > 0)
			printf("  %s %g", tw_dtype_name((enum tw_dtype)d), p);
		else
			printf("  %s -", tw_dtype_name((enum tw_dtype)d));
	}
	printf("  (dense)\n");
	printf("  launch       %.1f us per kernel\n", c->gpu.launch_us);
	if (c->gpu.speed_variation > 0)
		printf("  spread       %.0f%% between the fastest and slowest GPU: a job runs at its "
		       "slowest's pace, x%.3f on 8 GPUs, x%.3f on 1,024\n",
		       100.0 * c->gpu.speed_variation, cluster_job_pace(c, 8), cluster_job_pace(c, 1024));
	printf("\n");

	printf("Node           %d %s\n", c->node.gpus,
	       c->node.intra == CLUSTER_INTRA_HOST ? "CPU ranks" : "GPUs");
	switch (c->node.intra) {
	case CLUSTER_INTRA_NVSWITCH:
	case CLUSTER_INTRA_NVLINK_MESH:
		printf("  NVLink       %s, %.1f GB/s per GPU per direction, domain of %d GPUs\n",
		       c->node.intra == CLUSTER_INTRA_NVSWITCH ? "NVSwitch" : "mesh",
		       c->node.nvlink_GBps, c->node.nvlink_domain_gpus);
		if (c->node.nvls)
			printf("  NVLS         yes, all-reduce busbw %.0f GB/s\n", c->node.nvls_GBps);
		else
			printf("  NVLS         no\n");
		break;
	case CLUSTER_INTRA_PCIE:
		printf("  NVLink       none: GPUs talk over PCIe\n");
		break;
	case CLUSTER_INTRA_HOST:
		printf("  ranks        share host memory, %.1f GB/s per rank\n", c->node.pcie_GBps);
		break;
	}
	if (c->node.pcie_gen)
		printf("  PCIe         Gen%d, %.1f GB/s per GPU per direction\n", c->node.pcie_gen,
		       c->node.pcie_GBps);
	printf("  host         %.0f GiB memory at %.0f GB/s, %d cores (%s), %.2f TFLOP/s fp32\n",
	       c->node.host_memory_gib, c->node.cpu_mem_GBps, c->node.cpu_cores,
	       cluster_cpu_name(c->node.cpu_vendor), c->node.cpu_tflops);
	printf("  NVMe         %.1f GB/s\n\n", c->node.nvme_GBps);

	if (c->net.fabric == CLUSTER_FABRIC_NONE) {
		printf("Network        none (one machine)\n\n");
	} else {
		printf("Network        %d NICs x %g Gb/s per node (%g Gb/s), %.0f%% achievable = "
		       "%.1f GB/s per NIC\n",
		       c->net.nics_per_node, c->net.nic_gbps, c->net.nics_per_node * c->net.nic_gbps,
		       c->net.nic_eff * 100, cluster_nic_GBps(c));
		printf("  fabric       %s, %s, leaf radix %d, oversubscription %g:1\n",
		       cluster_fabric_name(c->net.fabric), cluster_topo_name(c->net.topology),
		       c->net.leaf_radix, c->net.oversubscription);
		printf("  latency      %.1f us per message", c->net.latency_us);
		if (c->net.plugin_latency_us > 0) /* NCCL adds it to each inter-node step */
			printf(", net plugin reports %.1f us", c->net.plugin_latency_us);
		printf("; at most %d nodes (%lld GPUs)\n\n", c->net.max_nodes,
		       (long long)c->net.max_nodes * c->node.gpus);
	}

	struct tier t[12];
	int n = tiers(c, t);
	printf("%-24s%14s %-12s %s\n", "Links", "per direction", "", "latency");
	for (int i = 0; i < n; i++) {
		char lat[32] = "-";
		if (t[i].latency_us >= 0)
			snprintf(lat, sizeof(lat), "%.1f us", t[i].latency_us);
		printf("  %-21s %9.1f GB/s %-12s %s\n", t[i].name, t[i].GBps, t[i].per, lat);
	}
	printf("\nEfficiency     (fraction of peak by kernel size)\n");
	print_eff("GEMM", &c->eff.gemm, "GFLOP", 1e9);
	print_eff("attention", &c->eff.attn, "GFLOP", 1e9);
	for (int i = 0; i < c->eff.n_attn_kernels; i++) { /* strategy attention_kernel */
		char label[32];
		snprintf(label, sizeof(label), "  %s", c->eff.attn_kernels[i].name);
		print_eff(label, &c->eff.attn_kernels[i].t, "GFLOP", 1e9);
	}
	print_eff("memory-bound", &c->eff.mem, "MB", 1e6);
	printf("  comm overlap compute x%.2f slower while a communication kernel runs\n",
	       c->eff.comm_overlap_slowdown);

	if (c->n_stragglers == 0) {
		printf("\nStragglers     none\n");
	} else {
		printf("\nStragglers\n");
		for (int i = 0; i < c->n_stragglers; i++) {
			char s[96];
			cli_straggler_str(&c->stragglers[i], s, sizeof(s));
			printf("  %s\n", s);
		}
	}
}

static cJSON *cluster_json_with_links(const struct cluster *c)
{
	cJSON *o = cluster_to_json(c);
	struct tier t[12];
	int n = tiers(c, t);
	cJSON *links = cJSON_AddArrayToObject(o, "links");
	for (int i = 0; i < n; i++) {
		cJSON *l = cJSON_CreateObject();
		cJSON_AddStringToObject(l, "tier", t[i].name);
		cJSON_AddNumberToObject(l, "GBps", t[i].GBps);
		cJSON_AddStringToObject(l, "per", t[i].per);
		if (t[i].latency_us >= 0)
			cJSON_AddNumberToObject(l, "latency_us", t[i].latency_us);
		else
			cJSON_AddNullToObject(l, "latency_us");
		cJSON_AddItemToArray(links, l);
	}
	return o;
}

static int topo_show(const struct cli_ctx *ctx, int argc, char **argv)
{
	const char *sets[CLI_MAX_SETS];
	int nsets = 0;
	bool json = false;
	const char *name = NULL;
	struct tw_err err = {0};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (cli_is_opt(a, "--set")) {
			const char *v = cli_value(argc, argv, &i, "--set", &err);
			if (!v)
				return cli_fail(&err);
			if (nsets >= CLI_MAX_SETS)
				return cli_usage_error("topo", "--set: at most %d overrides", CLI_MAX_SETS);
			if (!strchr(v, '='))
				return cli_usage_error("topo", "--set %s: expected PATH=VALUE", v);
			sets[nsets++] = v;
		} else if (!strcmp(a, "--json")) {
			json = true;
		} else if (a[0] == '-' && a[1]) {
			return cli_usage_error("topo", "unknown option '%s' (see twin topo --help)", a);
		} else if (!name) {
			name = a;
		} else {
			return cli_usage_error("topo", "show takes one CLUSTER, got '%s' and '%s'", name, a);
		}
	}
	if (!name)
		return cli_usage_error("topo", "show needs a CLUSTER (see twin topo list)");
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/topologies", ctx->data_dir);
	for (int i = 0; i < nsets; i++) {
		char path[128];
		size_t n = strcspn(sets[i], "=");
		snprintf(path, sizeof(path), "%.*s", (int)(n < sizeof(path) ? n : sizeof(path) - 1),
			 sets[i]);
		if (!cluster_owns_path(path))
			return cli_usage_error("topo", "--set %s: %s is not a cluster field (gpu., node., "
					       "net., eff., stragglers, name)", sets[i], path);
	}
	struct cluster c;
	if (cluster_load(name, dir, sets, nsets, &c, &err) != TW_OK)
		return cli_fail(&err);
	if (json)
		cli_print_json(cluster_json_with_links(&c));
	else
		print_cluster(&c);
	return 0;
}

static int topo_list(const struct cli_ctx *ctx, int argc, char **argv)
{
	bool json = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else
			return cli_usage_error("topo", "list: unexpected argument '%s'", argv[i]);
	}
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/topologies", ctx->data_dir);
	char names[4096];
	cluster_list_presets(dir, names, sizeof(names));
	if (!names[0]) {
		struct tw_err err = {0};
		tw_errf(&err, TW_ERR_INVALID, "%s: no cluster presets found", dir);
		return cli_fail(&err);
	}
	/* split the sorted "a, b, c" */
	char *list[256], *save = NULL;
	int n = 0;
	for (char *s = strtok_r(names, ", ", &save); s && n < 256; s = strtok_r(NULL, ", ", &save))
		list[n++] = s;
	/* load them all first, so that a broken preset leaves no partial output */
	struct cluster *cs = TW_NEW_ARRAY(struct cluster, (size_t)n);
	for (int i = 0; i < n; i++) {
		struct tw_err err = {0};
		if (cluster_load(list[i], dir, NULL, 0, &cs[i], &err) != TW_OK) {
			free(cs);
			return cli_fail(&err);
		}
	}
	cJSON *arr = json ? cJSON_CreateArray() : NULL;
	for (int i = 0; i < n; i++) {
		const struct cluster c = cs[i];
		char net[96] = "no network";
		if (c.net.fabric != CLUSTER_FABRIC_NONE)
			snprintf(net, sizeof(net), "%d x %g Gb/s %s", c.net.nics_per_node, c.net.nic_gbps,
				 cluster_fabric_name(c.net.fabric));
		if (json) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "name", c.name);
			cJSON_AddStringToObject(o, "gpu", c.gpu.name);
			cJSON_AddNumberToObject(o, "gpus_per_node", c.node.gpus);
			cJSON_AddStringToObject(o, "intra", cluster_intra_name(c.node.intra));
			cJSON_AddStringToObject(o, "fabric", cluster_fabric_name(c.net.fabric));
			cJSON_AddNumberToObject(o, "nic_gbps", c.net.nic_gbps);
			cJSON_AddNumberToObject(o, "nics_per_node", c.net.nics_per_node);
			cJSON_AddItemToArray(arr, o);
		} else {
			printf("%-15s %3d x %-26s %-12s %s\n", c.name, c.node.gpus, c.gpu.name,
			       cluster_intra_name(c.node.intra), net);
		}
	}
	free(cs);
	if (json)
		cli_print_json(arr);
	return 0;
}

int cmd_topo(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("topo", "missing action: show CLUSTER or list (see twin topo --help)");
	if (!strcmp(argv[1], "help")) {
		fputs(topo_help, stdout);
		return 0;
	}
	if (cli_wants_help(argc, argv)) {
		fputs(topo_help, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "show"))
		return topo_show(ctx, argc - 1, argv + 1);
	if (!strcmp(argv[1], "list"))
		return topo_list(ctx, argc - 1, argv + 1);
	return cli_usage_error("topo", "unknown action '%s' (show, list)", argv[1]);
}
