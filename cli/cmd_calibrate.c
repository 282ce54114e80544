/* twin calibrate — measure this machine (exec/calib.c) and write a cluster file derived from
 * BASE with the measured values in place of the modelled ones (docs/calibrate.md). The file is
 * written to a temporary, loaded back with cluster_load, and only then renamed into place. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../exec/exec.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: twin calibrate --backend host|cuda -c BASE -o OUT.json [--quick] [--json]\n"
		"\n"
		"Measure this machine and write a cluster file: BASE (a preset or a path) with the\n"
		"measured values replacing the modelled ones, each noted \"measured by twin\n"
		"calibrate on HOST at DATE\". Use it as -c OUT.json with any subcommand.\n"
		"  host: OpenBLAS sgemm sweep on one core (gpu.peak_tflops, eff.gemm), memcpy on\n"
		"        one core and on all (gpu.hbm_GBps, node.cpu_mem_GBps), sgemm on all cores\n"
		"        (node.cpu_tflops); under mpirun with >= 2 ranks every rank measures at\n"
		"        once and MPI_Allreduce bus bandwidth gives node.pcie_GBps. BASE must\n"
		"        describe CPU ranks (gpu.arch_sm 0), e.g. host-cpu.\n"
		"  cuda: cuBLAS GEMM sweep per dtype, device copy (gpu.hbm_GBps), pinned H2D/D2H\n"
		"        (node.pcie_GBps), NCCL all-reduce over the local GPUs (node.nvlink_GBps\n"
		"        or nvls_GBps). BASE must describe GPUs.\n"
		"\n"
		"  -c, --cluster BASE      cluster preset (topologies/) or path\n"
		"  -o, --output OUT.json   where to write (replaced atomically)\n"
		"      --quick             a few seconds: smaller sizes, fewer repetitions\n"
		"      --json              print the measurements as JSON\n");
}

static bool is_path(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".json"));
}

static void print_text(const struct calib_result *r, const char *out)
{
	printf("calibrated %s (%s backend, %d rank%s) at %s\n", r->host, r->backend, r->ranks,
	       r->ranks == 1 ? "" : "s", r->date);
	printf("GEMM (%s):", tw_dtype_name(r->gemm_dtype));
	for (int i = 0; i < r->npoints; i++)
		printf(" %lld^3 %.4g", (long long)r->gemm[i].n, r->gemm[i].tflops);
	printf(" TFLOP/s\n");
	for (int d = 0; d < TW_NUM_DTYPES; d++)
		if (r->peak_tflops[d] > 0)
			printf("peak %-5s          %.4g TFLOP/s\n", tw_dtype_name((enum tw_dtype)d), r->peak_tflops[d]);
	if (r->cpu_tflops > 0)
		printf("cpu (%d threads)    %.4g TFLOP/s\n", r->host_threads, r->cpu_tflops);
	if (r->mem_GBps > 0)
		printf("%-18s %.1f GB/s (read + written)\n",
		       strcmp(r->backend, "host") ? "device memory"
		       : r->ranks > 1 ? "memory, per rank" : "memory, one core", r->mem_GBps);
	if (r->host_mem_GBps > 0)
		printf("memory, %d threads  %.1f GB/s (read + written)\n", r->host_threads, r->host_mem_GBps);
	if (r->h2d_GBps > 0)
		printf("H2D / D2H pinned   %.1f / %.1f GB/s\n", r->h2d_GBps, r->d2h_GBps);
	if (r->allreduce_busbw_GBps > 0)
		printf("all-reduce busbw   %.1f GB/s (%d ranks)\n", r->allreduce_busbw_GBps, r->ranks);
	printf("wrote %s\n", out);
}

static void print_json(const struct calib_result *r, const char *out)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "host", r->host);
	cJSON_AddStringToObject(o, "backend", r->backend);
	cJSON_AddStringToObject(o, "date", r->date);
	cJSON_AddNumberToObject(o, "ranks", r->ranks);
	cJSON *g = cJSON_AddArrayToObject(o, "gemm");
	for (int i = 0; i < r->npoints; i++) {
		cJSON *p = cJSON_CreateObject();
		cJSON_AddNumberToObject(p, "n", (double)r->gemm[i].n);
		cJSON_AddNumberToObject(p, "flops", r->gemm[i].flops);
		cJSON_AddNumberToObject(p, "tflops", r->gemm[i].tflops);
		cJSON_AddItemToArray(g, p);
	}
	cJSON *pk = cJSON_AddObjectToObject(o, "peak_tflops");
	for (int d = 0; d < TW_NUM_DTYPES; d++)
		if (r->peak_tflops[d] > 0)
			cJSON_AddNumberToObject(pk, tw_dtype_name((enum tw_dtype)d), r->peak_tflops[d]);
	cJSON_AddNumberToObject(o, "cpu_tflops", r->cpu_tflops);
	cJSON_AddNumberToObject(o, "mem_GBps", r->mem_GBps);
	cJSON_AddNumberToObject(o, "host_mem_GBps", r->host_mem_GBps);
	cJSON_AddNumberToObject(o, "h2d_GBps", r->h2d_GBps);
	cJSON_AddNumberToObject(o, "d2h_GBps", r->d2h_GBps);
	cJSON_AddNumberToObject(o, "allreduce_busbw_GBps", r->allreduce_busbw_GBps);
	cJSON_AddStringToObject(o, "output", out);
	cli_print_json(o);
}

int cmd_calibrate(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	struct tw_err err = { 0 };
	struct calib_options co = { 0 };
	const char *base_name = NULL, *out = NULL;
	bool json = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (cli_is_opt(a, "--backend")) {
			if (!(co.backend = cli_value(argc, argv, &i, "--backend", &err)))
				return cli_fail(&err);
		} else if (!strcmp(a, "-c") || cli_is_opt(a, "--cluster")) {
			if (!(base_name = cli_value(argc, argv, &i, a[1] == '-' ? "--cluster" : "-c", &err)))
				return cli_fail(&err);
		} else if (!strcmp(a, "-o") || cli_is_opt(a, "--output")) {
			if (!(out = cli_value(argc, argv, &i, a[1] == '-' ? "--output" : "-o", &err)))
				return cli_fail(&err);
		} else if (!strcmp(a, "--quick")) {
			co.quick = true;
		} else if (!strcmp(a, "--json")) {
			json = true;
		} else {
			return cli_usage_error("calibrate", "unknown option %s (see twin calibrate --help)", a);
		}
	}
	if (!co.backend)
		return cli_usage_error("calibrate", "--backend host|cuda is required");
	if (strcmp(co.backend, "host") && strcmp(co.backend, "cuda"))
		return cli_usage_error("calibrate", "--backend %s: must be host or cuda", co.backend);
	if (!base_name)
		return cli_usage_error("calibrate", "-c BASE is required (a cluster preset or file)");
	if (!out)
		return cli_usage_error("calibrate", "-o OUT.json is required");

	/* the base must load, and describe what the backend measures */
	char tdir[1024], bpath[1100];
	snprintf(tdir, sizeof(tdir), "%s/topologies", ctx->data_dir);
	struct cluster *base = TW_NEW(struct cluster);
	int status = 0;
	cJSON *root = NULL;
	char *text = NULL;
	char tmp[1100] = "";
	struct calib_result r;
	memset(&r, 0, sizeof(r));
	if (cluster_load(base_name, tdir, NULL, 0, base, &err) != TW_OK)
		goto fail;
	if (!strcmp(co.backend, "host") && base->gpu.arch_sm != 0) {
		tw_errf(&err, TW_ERR_INVALID,
			"calibrate --backend host measures CPU ranks, but %s describes GPUs "
			"(gpu.arch_sm=%d); use a CPU-rank base such as host-cpu",
			base_name, base->gpu.arch_sm);
		goto fail;
	}
	if (!strcmp(co.backend, "cuda") && base->gpu.arch_sm == 0) {
		tw_errf(&err, TW_ERR_INVALID,
			"calibrate --backend cuda measures GPUs, but %s describes CPU ranks (gpu.arch_sm=0)",
			base_name);
		goto fail;
	}
	if (is_path(base_name))
		snprintf(bpath, sizeof(bpath), "%s", base_name);
	else
		snprintf(bpath, sizeof(bpath), "%s/%s.json", tdir, base_name);
	if (json_load_object(bpath, &root, &err) != TW_OK)
		goto fail;
	/* an output that cannot be replaced is refused before the measurement */
	if (tw_out_target(out, &err) != TW_OK)
		goto fail;

	if (calib_measure(&co, &r, &err) != TW_OK)
		goto fail;
	if (!r.report)
		goto done; /* MPI ranks other than 0 only took part in the measurement */
	if (calib_apply(&r, base, root, &err) != TW_OK)
		goto fail;
	{
		/* the written file names itself after OUT, and says where it came from */
		const char *slash = strrchr(out, '/');
		char name[64];
		snprintf(name, sizeof(name), "%s", slash ? slash + 1 : out);
		size_t n = strlen(name);
		if (n > 5 && !strcmp(name + n - 5, ".json"))
			name[n - 5] = '\0';
		if (!name[0])
			snprintf(name, sizeof(name), "calibrated");
		cJSON_ReplaceItemInObjectCaseSensitive(root, "name", cJSON_CreateString(name));
		char nt[512];
		snprintf(nt, sizeof(nt),
			 "%s, calibrated by twin calibrate --backend %s on %s at %s (fields with a "
			 "\"measured by\" note were measured; the rest are from the base file)",
			 base->name, r.backend, r.host, r.date);
		cJSON_DeleteItemFromObjectCaseSensitive(root, "note");
		cJSON_AddStringToObject(root, "note", nt);
	}
	text = cJSON_Print(root);
	if (!text) {
		tw_errf(&err, TW_ERR_INTERNAL, "calibrate: cannot print the cluster file");
		goto fail;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.json", out, (long)getpid());
	{
		FILE *f = fopen(tmp, "w");
		if (!f) {
			tw_errf(&err, tw_out_errcode(errno), "%s: cannot write: %s", out,
				strerror(errno));
			tmp[0] = '\0';
			goto fail;
		}
		bool ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
		ok = fclose(f) == 0 && ok;
		if (!ok) {
			tw_errf(&err, TW_ERR_SYSTEM, "%s: write failed", out);
			goto fail;
		}
	}
	/* what we wrote must load as a cluster before it replaces anything */
	{
		struct cluster *back = TW_NEW(struct cluster);
		enum tw_result rc = cluster_load(tmp, tdir, NULL, 0, back, &err);
		free(back);
		if (rc != TW_OK) {
			char msg[sizeof(err.msg)];
			snprintf(msg, sizeof(msg), "%s", err.msg);
			err.code = TW_OK;
			tw_errf(&err, TW_ERR_INTERNAL, "calibrate: the measured cluster does not load: %s", msg);
			goto fail;
		}
	}
	if (rename(tmp, out) != 0) {
		tw_errf(&err, TW_ERR_SYSTEM, "%s: cannot rename into place: %s", out, strerror(errno));
		goto fail;
	}
	tmp[0] = '\0';
	if (json)
		print_json(&r, out);
	else
		print_text(&r, out);
	goto done;
fail:
	status = cli_fail(&err);
	if (tmp[0])
		unlink(tmp);
done:
	free(text);
	cJSON_Delete(root);
	free(base);
	return status;
}
