/* twin memory — peak memory per rank role from the plan's memory walk (core/plan_mem.c):
 * the breakdown by category at the peak, the GPU's capacity and a verdict; host memory
 * (pinned buffers, offloaded states) and NVMe likewise. docs/memory.md has the model. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char memory_help[] =
	"usage: twin memory -m MODEL -c CLUSTER [--gpus N] [--ds-config F] [-s STRATEGY]\n"
	"                   [--set PATH=VALUE]... [--json]\n\n"
	"Will this configuration fit? Builds the plan of one optimizer step for each distinct\n"
	"rank role (one per pipeline stage), walks its allocations in order and prints the peak\n"
	"GPU memory with its breakdown by category (parameters, master weights, gradients,\n"
	"optimizer states, activations, checkpoints, gathered ZeRO-3 parameters, buckets,\n"
	"logits, workspace, CUDA context, allocator fragmentation), the GPU's capacity and\n"
	"\"fits, X GiB free\" or \"does not fit: needs X GiB more\" with the largest items; then\n"
	"host memory per GPU (offloaded states, pinned buffers) and NVMe.\n\n"
	"Options:\n"
	"%s"
	"  -h, --help          this help\n";

static const double GIB = (double)TW_GIB;

static const char *framework_desc(const struct strategy *s, char *buf, size_t len)
{
	switch (s->framework) {
	case STRAT_MEGATRON:
		snprintf(buf, len, "Megatron%s", s->distributed_optimizer ? ", distributed optimizer" : "");
		break;
	case STRAT_FSDP: {
		static const char *const sh[] = {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD",
						 "NO_SHARD"};
		snprintf(buf, len, "FSDP %s", sh[s->fsdp_sharding]);
		break;
	}
	default:
		snprintf(buf, len, "DeepSpeed ZeRO-%d%s%s", s->zero_stage,
			 s->offload_optimizer == STRAT_OFFLOAD_CPU    ? ", optimizer offload cpu"
			 : s->offload_optimizer == STRAT_OFFLOAD_NVME ? ", optimizer offload nvme"
								      : "",
			 s->offload_param == STRAT_OFFLOAD_CPU	  ? ", param offload cpu"
			 : s->offload_param == STRAT_OFFLOAD_NVME ? ", param offload nvme"
								  : "");
	}
	return buf;
}

static void header(const struct job *j)
{
	const struct strategy *s = &j->strat;
	char fw[128];
	printf("memory       %s on %lld x %s (%s)\n", j->model.name, (long long)j->gpus,
	       j->cluster.gpu.name, j->cluster.name);
	printf("strategy     %s; tp %lld pp %lld dp %lld cp %lld ep %lld%s\n",
	       framework_desc(s, fw, sizeof(fw)), (long long)s->tp, (long long)s->pp,
	       (long long)s->dp, (long long)s->cp, (long long)(s->ep > 0 ? s->ep : 1),
	       s->sequence_parallel ? " +SP" : "");
	/* what decides the activations and logits beyond the batch: dropout masks, the loss */
	char drop[64] = "";
	if (s->hidden_dropout > 0 || s->attention_dropout > 0)
		snprintf(drop, sizeof(drop), ", dropout %g/%g", s->hidden_dropout, s->attention_dropout);
	printf("batch        micro %lld x %lld micro-batches, seq %lld, %s, recompute %s%s%s%s%s\n",
	       (long long)s->micro_batch, (long long)s->grad_accum, (long long)j->seq,
	       tw_dtype_name(s->param_dtype), strat_recompute_name(s->recompute),
	       s->flash_attention ? ", flash attention" : "", drop,
	       s->cross_entropy == STRAT_CE_FUSED ? ", fused loss" : "",
	       s->lora_rank > 0 ? ", LoRA" : "");
}

static void device_text(const struct plan_mem *m, enum plan_device d)
{
	for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
		if (m->at_peak[d][c] > 0)
			printf("    %-16s %9.2f GiB\n", plan_mem_cat_name((enum plan_mem_cat)c),
			       (double)m->at_peak[d][c] / GIB);
}

static void host_verdict(const struct plan_mem *m, char *buf, size_t len)
{
	int64_t h = m->peak[PLAN_DEV_HOST];
	if (m->host_capacity <= 0)
		snprintf(buf, len, "host capacity unknown");
	else if (h <= m->host_capacity)
		snprintf(buf, len, "fits, %.2f GiB free", (double)(m->host_capacity - h) / GIB);
	else
		snprintf(buf, len, "does not fit: needs %.2f GiB more", (double)(h - m->host_capacity) / GIB);
}

static cJSON *device_json(const struct plan_mem *m, enum plan_device d)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "peak_bytes", (double)m->peak[d]);
	cJSON *br = cJSON_AddObjectToObject(o, "breakdown_bytes");
	for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
		cJSON_AddNumberToObject(br, plan_mem_cat_name((enum plan_mem_cat)c), (double)m->at_peak[d][c]);
	cJSON_AddNumberToObject(o, "model_states_peak_bytes", (double)m->states_peak[d]);
	return o;
}

static void role_name(const struct job *j, int64_t rep, char *buf, size_t len)
{
	struct job_coord c;
	job_coord_of(j, rep, &c);
	snprintf(buf, len, "pipeline stage %lld", (long long)c.pp);
}

int cli_memory_report(const struct job *j, bool json, struct cJSON **take, struct tw_err *err)
{
	int64_t n = j->strat.pp > 0 ? j->strat.pp : 1;
	int64_t *reps = TW_NEW_ARRAY(int64_t, (size_t)n), *w = TW_NEW_ARRAY(int64_t, (size_t)n);
	n = plan_roles(j, reps, w, n);
	/* every role's memory first, so that a refused plan prints nothing */
	struct plan_mem *mems = TW_NEW_ARRAY(struct plan_mem, (size_t)(n > 0 ? n : 1));
	enum tw_result rc = TW_OK;
	for (int64_t i = 0; i < n && rc == TW_OK; i++) {
		struct plan p;
		rc = plan_rank(j, reps[i], &p, err);
		if (rc == TW_OK)
			rc = plan_memory(j, &p, &mems[i], err);
		plan_release(&p);
	}
	if (rc != TW_OK) {
		free(mems);
		free(reps);
		free(w);
		return rc;
	}
	cJSON *root = json ? cJSON_CreateObject() : NULL, *roles = NULL;
	if (json) {
		cJSON_AddStringToObject(root, "model", j->model.name);
		cJSON_AddStringToObject(root, "cluster", j->cluster.name);
		cJSON_AddNumberToObject(root, "gpus", (double)j->gpus);
		cJSON_AddStringToObject(root, "gpu", j->cluster.gpu.name);
		/* what the text's strategy and batch lines say: degrees, batch, precision, ... */
		cJSON_AddItemToObject(root, "strategy", strategy_to_json(&j->strat));
		roles = cJSON_AddArrayToObject(root, "roles");
	} else {
		header(j);
	}
	bool all_fit = true;
	for (int64_t i = 0; i < n; i++) {
		const struct plan_mem m = mems[i];
		char v[512], hv[128], role[64];
		bool fits = plan_mem_fits(&m, v, sizeof(v));
		all_fit &= fits && m.peak[PLAN_DEV_HOST] <= m.host_capacity;
		host_verdict(&m, hv, sizeof(hv));
		role_name(j, reps[i], role, sizeof(role));
		if (json) {
			cJSON *r = cJSON_CreateObject();
			cJSON_AddStringToObject(r, "role", role);
			cJSON_AddNumberToObject(r, "rank", (double)reps[i]);
			cJSON_AddNumberToObject(r, "ranks", (double)w[i]);
			cJSON *g = device_json(&m, PLAN_DEV_GPU);
			cJSON_AddNumberToObject(g, "context_bytes", (double)m.context_bytes);
			cJSON_AddNumberToObject(g, "fragmentation_bytes", (double)m.fragmentation_bytes);
			cJSON_AddNumberToObject(g, "total_bytes", (double)m.gpu_total);
			cJSON_AddNumberToObject(g, "capacity_bytes", (double)m.gpu_capacity);
			cJSON_AddBoolToObject(g, "fits", fits);
			cJSON_AddStringToObject(g, "verdict", v);
			cJSON_AddItemToObject(r, "gpu", g);
			cJSON *h = device_json(&m, PLAN_DEV_HOST);
			cJSON_AddNumberToObject(h, "capacity_bytes", (double)m.host_capacity);
			cJSON_AddBoolToObject(h, "fits", m.peak[PLAN_DEV_HOST] <= m.host_capacity);
			cJSON_AddStringToObject(h, "verdict", hv);
			cJSON_AddItemToObject(r, "host", h);
			cJSON_AddItemToObject(r, "nvme", device_json(&m, PLAN_DEV_NVME));
			cJSON_AddItemToArray(roles, r);
			continue;
		}
		printf("\n%s (rank %lld, %lld rank%s like it)\n", role, (long long)reps[i],
		       (long long)w[i], w[i] == 1 ? "" : "s");
		printf("  GPU          %.2f GiB of %.2f GiB: %s\n", (double)m.gpu_total / GIB,
		       (double)m.gpu_capacity / GIB, v);
		device_text(&m, PLAN_DEV_GPU);
		printf("    %-16s %9.2f GiB\n", "cuda context", (double)m.context_bytes / GIB);
		printf("    %-16s %9.2f GiB\n", "fragmentation", (double)m.fragmentation_bytes / GIB);
		printf("    %-16s %9.2f GiB  (params, master, grads, optimizer, gathered)\n",
		       "model states", (double)m.states_peak[PLAN_DEV_GPU] / GIB);
		printf("  host         %.2f GiB of %.2f GiB per GPU: %s\n",
		       (double)m.peak[PLAN_DEV_HOST] / GIB, (double)m.host_capacity / GIB, hv);
		device_text(&m, PLAN_DEV_HOST);
		if (m.peak[PLAN_DEV_NVME] > 0) {
			printf("  nvme         %.2f GiB per GPU\n", (double)m.peak[PLAN_DEV_NVME] / GIB);
			device_text(&m, PLAN_DEV_NVME);
		}
	}
	if (rc == TW_OK) {
		if (json) {
			cJSON_AddBoolToObject(root, "fits", all_fit);
			if (take)
				*take = root;
			else
				cli_print_json(root);
			root = NULL;
		} else {
			printf("\n%s\n", all_fit ? "verdict      every rank fits (GPU and host)"
					       : "verdict      does not fit (see above)");
		}
	}
	cJSON_Delete(root);
	free(mems);
	free(reps);
	free(w);
	return rc == TW_OK ? 0 : (int)rc;
}

int cmd_memory(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		printf(memory_help, cli_job_opts_help);
		return 0;
	}
	struct cli_job_opts o;
	struct tw_err err = {0};
	cli_job_opts_init(&o, ctx);
	for (int i = 1; i < argc; i++) {
		int r = cli_job_opt(&o, argc, argv, &i, &err);
		if (r < 0)
			return cli_fail(&err);
		if (r == 0)
			return cli_usage_error("memory", "unknown option %s (see twin memory --help)",
					       argv[i]);
	}
	struct job *j = TW_NEW(struct job);
	int status = 0;
	if (cli_job_load(&o, "memory", j, &err) != TW_OK || cli_memory_report(j, o.json, NULL, &err))
		status = cli_fail(&err);
	free(j);
	return status;
}
