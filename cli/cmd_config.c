/* twin config show — the resolved strategy of a job, every value with where it came from
 * (file, default, derived, --set, option), and the derived degrees. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: twin config show -m MODEL -c CLUSTER [--gpus N] [--ds-config F] [-s STRATEGY]\n"
		   "                        [--set PATH=VALUE]... [--json]\n"
		   "\n"
		   "Resolve the strategy as DeepSpeed (or Megatron, FSDP) would and show every value\n"
		   "with its source: file, default, derived, set (--set) or option (--gpus).\n"
		   "Strategy --set paths: our strategy keys (tp=4, pp=2, recompute=full,\n"
		   "micro_batch=2, ...) or ds_config keys (zero_optimization.stage=3,\n"
		   "train_micro_batch_size_per_gpu=2, bf16.enabled=true, ...); see docs/strategy.md.\n"
		   "\n%s",
		cli_job_opts_help);
}

static void print_text(const struct job *j, const struct cli_job_opts *o)
{
	const struct strategy *s = &j->strat;
	char tok[32];
	printf("model %s, cluster %s, %" PRId64 " GPUs on %d node%s\n", j->model.name,
	       j->cluster.name, j->gpus, j->nodes, j->nodes == 1 ? "" : "s");
	printf("strategy: %s", s->framework == STRAT_DEEPSPEED ? "deepspeed"
			       : s->framework == STRAT_MEGATRON ? "megatron"
								 : "fsdp");
	if (o->in.ds_config)
		printf(", ds_config %s", o->in.ds_config);
	if (o->in.strategy)
		printf(", strategy %s", o->in.strategy);
	printf("\n\n");
	printf("degrees: dp %" PRId64 " = %" PRId64 " GPUs / (tp %" PRId64 " x pp %" PRId64
	       " x cp %" PRId64 "), ep %" PRId64 ", vp %" PRId64 "\n",
	       s->dp, s->gpus, s->tp, s->pp, s->cp, s->ep, s->vp);
	printf("batch:   %" PRId64 " samples per step = micro %" PRId64 " x grad_accum %" PRId64
	       " x dp %" PRId64 "; micro-batches per step: %" PRId64 "\n",
	       s->global_batch, s->micro_batch, s->grad_accum, s->dp, s->grad_accum);
	printf("tokens:  %s per step (seq_len %" PRId64 ")\n\n",
	       tw_fmt_thousands(j->tokens_per_step, tok, sizeof(tok)), j->seq);

	int w = 4;
	for (int i = 0; i < s->nprov; i++)
		if ((int)strlen(s->prov[i].path) > w)
			w = (int)strlen(s->prov[i].path);
	int vw = 5;
	for (int i = 0; i < s->nprov; i++)
		if ((int)strlen(s->prov[i].value) > vw)
			vw = (int)strlen(s->prov[i].value);
	printf("%-*s  %-*s  %-8s %s\n", w, "PATH", vw, "VALUE", "SOURCE", "WHY");
	for (int i = 0; i < s->nprov; i++)
		printf("%-*s  %-*s  %-8s %s\n", w, s->prov[i].path, vw, s->prov[i].value,
		       strat_src_name(s->prov[i].src), s->prov[i].why);
}

int cmd_config(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		if (argc < 2) {
			usage(stderr);
			return 2;
		}
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "show"))
		return cli_usage_error("config", "unknown action '%s' (expected: show)", argv[1]);
	if (cli_wants_help(argc - 1, argv + 1)) {
		usage(stdout);
		return 0;
	}
	struct cli_job_opts o;
	struct tw_err err = {0};
	cli_job_opts_init(&o, ctx);
	for (int i = 2; i < argc; i++) {
		int k = cli_job_opt(&o, argc, argv, &i, &err);
		if (k < 0)
			return cli_fail(&err);
		if (k == 0)
			return cli_usage_error("config show", "unknown option '%s' (see twin config --help)", argv[i]);
	}
	struct job *j = TW_NEW(struct job);
	enum tw_result rc = cli_job_load(&o, "config show", j, &err);
	if (rc != TW_OK) {
		free(j);
		return cli_fail(&err);
	}
	if (o.json) {
		cJSON *out = cJSON_CreateObject();
		cJSON_AddStringToObject(out, "model", j->model.name);
		cJSON_AddStringToObject(out, "cluster", j->cluster.name);
		cJSON_AddNumberToObject(out, "gpus", (double)j->gpus);
		cJSON_AddNumberToObject(out, "nodes", j->nodes);
		cJSON *d = cJSON_AddObjectToObject(out, "derived");
		cJSON_AddNumberToObject(d, "dp", (double)j->strat.dp);
		cJSON_AddNumberToObject(d, "micro_batches_per_step", (double)j->strat.grad_accum);
		cJSON_AddNumberToObject(d, "global_batch", (double)j->strat.global_batch);
		cJSON_AddNumberToObject(d, "seq_len", (double)j->seq);
		cJSON_AddNumberToObject(d, "tokens_per_step", (double)j->tokens_per_step);
		cJSON_AddItemToObject(out, "strategy", strategy_to_json(&j->strat));
		cli_print_json(out);
	} else {
		print_text(j, &o);
	}
	free(j);
	return 0;
}
