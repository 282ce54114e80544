/* twin plan — the what-if search (sim/search.c, docs/search.md): which tp / pp / dp /
 * micro-batch / ZeRO / recompute / offload fits, and how fast is it. --emit-ds-config writes
 * the best as a ds_config.json plus a strategy JSON for the knobs ds_config cannot hold. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/sim.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: twin plan -m MODEL -c CLUSTER --gpus N --global-batch B [--seq S]\n"
		"                 [--framework deepspeed|megatron|fsdp] [--top K] [--exhaustive]\n"
		"                 [--emit-ds-config F] [--threads N] [--set PATH=VALUE]... [--json]\n"
		"\n"
		"Search the strategies of a job: tp (divides heads and kv_heads, within a node), pp\n"
		"(divides layers; megatron: or layers + 2 with the embedding and the loss\n"
		"counted, shown pp*), dp = N / (tp x pp x cp), micro-batches with B divisible by\n"
		"micro x dp,\n"
		"ZeRO stage 0-3 (megatron: distributed optimizer; fsdp: sharding; deepspeed on\n"
		"more than one node with tp 1 also ZeRO-3 with ZeRO++, shown zero 3++, and MiCS\n"
		"sharded within a node, shown mics), recompute\n"
		"none/selective/full (megatron also full of half of each model chunk's layers,\n"
		"shown full:N, and on MoE models selective of the experts' activation and the\n"
		"norms, shown sel:moe; fsdp with tp 1 on a dense model also op, torchtitan's selective\n"
		"op AC), megatron's interleaved schedule (vp = 2..8 model chunks of\n"
		"whole layers per stage, micro-batches a multiple of pp) and context parallelism\n"
		"from 8192 tokens (cp = 2, 4, 8; megatron and fsdp; megatron's all-to-all for\n"
		"models with sliding windows, which fsdp does not split),\n"
		"expert parallelism for MoE models (ep divides dp, megatron dp x cp, and the\n"
		"experts; megatron at tp > 1 also with expert_tp 1, the expert groups folded over\n"
		"tp x dp x cp, and with ep > 1 each choice again with Megatron-Core's combined 1F1B,\n"
		"overlap_moe_expert_parallel_comm, shown ep^, where Megatron allows it: no full\n"
		"recompute, with pp > 1 interleaved only), and optimizer offload to CPU when\n"
		"nothing fits on the GPUs.\n"
		"What does not fit in GPU memory is dropped; the rest is simulated and ranked by\n"
		"step time. Candidates NCCL could not run with the strategy's nccl_algo /\n"
		"nccl_proto (NCCL_ALGO / NCCL_PROTO) are dropped and counted.\n"
		"\n"
		"      --global-batch B    samples per optimizer step (required)\n"
		"      --seq S             tokens per sample (default: the model's)\n"
		"      --framework F       deepspeed (default), megatron or fsdp\n"
		"      --top K             candidates printed (default 5)\n"
		"      --exhaustive        simulate every fitting candidate (default: stop once the\n"
		"                          compute lower bound exceeds the K-th best step time)\n"
		"      --threads N         worker threads (default 0: one per CPU); same answer\n"
		"      --emit-ds-config F  write the best as a DeepSpeed config F and the rest of the\n"
		"                          strategy (tp, pp, recompute, seq_len) as F.strategy.json;\n"
		"                          use both: --ds-config F -s F.strategy.json (deepspeed only)\n"
		"      --set PATH=VALUE    cluster or strategy override; tp=, pp=, vp=, cp=, ep=,\n"
		"                          expert_tp=, micro_batch=, zero_optimization.stage=, recompute=,\n"
		"                          recompute_num_layers= pin that dimension (a strategy. or\n"
		"                          ds_config. prefix too); the batch, framework and\n"
		"                          zero_optimization object are refused; e.g.\n"
		"                          --set recompute_num_layers=4 --set gpu.memory_gib=40\n"
		"\n"
		"  -m, --model MODEL       model preset (examples/models) or path\n"
		"  -c, --cluster CLUSTER   cluster preset (topologies/) or path\n"
		"      --gpus N            GPUs of the job\n"
		"      --json              machine-readable output\n");
}


/* "full:N" for full recompute of N layers of each model chunk (Megatron's block method) */
static const char *recompute_label(const struct search_cand *c, char *buf, size_t len)
{
	if (c->rc_modules)
		return "sel:moe"; /* selective with the experts' activation and the norms */
	if (c->recompute != STRAT_RECOMPUTE_FULL || c->recompute_layers <= 0)
		return strat_recompute_name(c->recompute);
	snprintf(buf, len, "full:%lld", (long long)c->recompute_layers);
	return buf;
}

static const char *framework_name(enum strat_framework f)
{
	return f == STRAT_MEGATRON ? "megatron" : f == STRAT_FSDP ? "fsdp" : "deepspeed";
}

static double gib(int64_t b)
{
	return (double)b / (double)TW_GIB;
}

static void cand_desc(enum strat_framework f, const struct search_cand *c, char *buf, size_t len)
{
	char rl[32];
	char et[32] = "";
	if (c->etp > 0)
		snprintf(et, sizeof(et), " expert_tp %lld", (long long)c->etp);
	snprintf(buf, len, "tp %lld pp %lld%s vp %lld cp %lld dp %lld ep %lld%s%s micro %lld %s recompute %s%s",
		 (long long)c->tp, (long long)c->pp, c->split_el ? " (embedding and loss counted)" : "",
		 (long long)c->vp, (long long)c->cp, (long long)c->dp,
		 (long long)c->ep, et, c->moe_overlap ? " moe a2a overlap" : "",
		 (long long)c->micro,
		 search_cand_shard(f, c), recompute_label(c, rl, sizeof(rl)),
		 c->offload == STRAT_OFFLOAD_CPU ? " offload cpu" : "");
}

static void print_text(const struct job *base, const struct search_space *sp,
		       const struct search_result *r, int64_t seq)
{
	printf("twin plan: %s on %lld x %s (%s), global batch %lld x %lld tokens\n\n",
	       base->model.name, (long long)base->gpus, base->cluster.name,
	       framework_name(sp->framework), (long long)sp->global_batch, (long long)seq);
	printf("%-4s %3s %3s %2s %2s %4s %4s %5s %4s  %-13s %-9s %-7s %10s %12s %6s  %s\n", "#",
	       "tp", "pp", "vp", "cp", "dp", "ep", "micro", "gas", "zero/shard", "recompute", "offload", "step (s)", "tok/s/GPU",
	       "MFU", "peak/capacity GiB");
	bool any_el = false, any_et = false, any_ov = false;
	for (int i = 0; i < r->ntop; i++) {
		const struct search_cand *c = &r->top[i];
		char rl[32], pp[24], ep[24];
		snprintf(pp, sizeof(pp), "%lld%s", (long long)c->pp, c->split_el ? "*" : "");
		snprintf(ep, sizeof(ep), "%lld%s%s", (long long)c->ep, c->etp > 0 ? "+" : "",
			 c->moe_overlap ? "^" : "");
		any_el |= c->split_el;
		any_et |= c->etp > 0;
		any_ov |= c->moe_overlap;
		printf("%-4d %3lld %3s %2lld %2lld %4lld %4s %5lld %4lld  %-13s %-9s %-7s %10.4f %12.1f %5.1f%%  %.1f/%.1f\n",
		       i + 1, (long long)c->tp, pp, (long long)c->vp, (long long)c->cp,
		       (long long)c->dp, ep,
		       (long long)c->micro, (long long)c->grad_accum,
		       search_cand_shard(sp->framework, c), recompute_label(c, rl, sizeof(rl)),
		       c->offload == STRAT_OFFLOAD_CPU ? "cpu" : "-", (double)c->step_ns * 1e-9,
		       c->tokens_s_gpu, 100 * c->mfu, gib(c->peak_bytes), gib(c->capacity_bytes));
	}
	if (any_el)
		printf("* pp splits the layers with the embedding and the loss counted as a layer each "
		       "(account_for_embedding/loss_in_pipeline_split)\n");
	if (any_et)
		printf("+ the experts' own tensor parallelism (expert_tp, MoE parallel folding): expert "
		       "groups over tp x dp x cp\n");
	if (any_ov)
		printf("^ overlap_moe_expert_parallel_comm: the combined 1F1B runs one micro-batch's "
		       "all-to-alls under another's compute\n");
	printf("\ncandidates %lld (rejected by the resolver %lld, skipped %lld, duplicates %lld), fit %lld, "
	       "simulated %lld (pruned by bound %lld, over capacity in the timeline %lld)%s\n",
	       (long long)r->candidates, (long long)r->rejected, (long long)r->skipped,
	       (long long)r->duplicates, (long long)r->fit, (long long)r->simulated, (long long)r->pruned,
	       (long long)r->over,
	       r->offload_tried ? ", optimizer offload searched (nothing fit on the GPUs)" : "");
	if (r->unrunnable)
		printf("dropped %lld that NCCL could not run with the strategy's nccl_algo / nccl_proto, "
		       "e.g. %s\n", (long long)r->unrunnable, r->first_unrunnable);
	printf("search time %.2f s (%.0f configs/s, %d thread%s): memory filter %.2f s, simulation %.2f s\n",
	       r->wall_s, r->configs_per_s, r->threads, r->threads == 1 ? "" : "s", r->filter_s, r->sim_s);
}

static cJSON *cand_json(enum strat_framework f, const struct search_cand *c)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "tp", (double)c->tp);
	cJSON_AddNumberToObject(o, "pp", (double)c->pp);
	cJSON_AddNumberToObject(o, "vp", (double)c->vp);
	cJSON_AddBoolToObject(o, "embedding_loss_in_split", c->split_el);
	cJSON_AddNumberToObject(o, "cp", (double)c->cp);
	cJSON_AddNumberToObject(o, "dp", (double)c->dp);
	cJSON_AddNumberToObject(o, "ep", (double)c->ep);
	cJSON_AddNumberToObject(o, "expert_tp", (double)(c->etp > 0 ? c->etp : c->tp));
	cJSON_AddBoolToObject(o, "overlap_moe_expert_parallel_comm", c->moe_overlap);
	cJSON_AddNumberToObject(o, "micro_batch", (double)c->micro);
	cJSON_AddNumberToObject(o, "grad_accum", (double)c->grad_accum);
	cJSON_AddNumberToObject(o, "zero_stage", c->zero);
	cJSON_AddStringToObject(o, "shard", search_cand_shard(f, c));
	cJSON_AddBoolToObject(o, "zeropp", c->zeropp);
	cJSON_AddBoolToObject(o, "mics", c->mics);
	cJSON_AddStringToObject(o, "recompute", strat_recompute_name(c->recompute));
	cJSON_AddNumberToObject(o, "recompute_num_layers", (double)c->recompute_layers);
	cJSON *rm = cJSON_AddArrayToObject(o, "recompute_modules");
	unsigned mods = c->rc_modules ? c->rc_modules : STRAT_RC_CORE_ATTN;
	for (int i = 0; c->recompute == STRAT_RECOMPUTE_SELECTIVE && strat_rc_module_name(i); i++)
		if (mods & (1u << i))
			cJSON_AddItemToArray(rm, cJSON_CreateString(strat_rc_module_name(i)));
	cJSON_AddStringToObject(o, "offload_optimizer", c->offload == STRAT_OFFLOAD_CPU ? "cpu" : "none");
	cJSON_AddBoolToObject(o, "sequence_parallel", c->sequence_parallel);
	cJSON_AddNumberToObject(o, "step_time_s", (double)c->step_ns * 1e-9);
	cJSON_AddNumberToObject(o, "bound_s", (double)c->bound_ns * 1e-9);
	cJSON_AddNumberToObject(o, "tokens_per_s", c->tokens_s);
	cJSON_AddNumberToObject(o, "tokens_per_s_per_gpu", c->tokens_s_gpu);
	cJSON_AddNumberToObject(o, "mfu", c->mfu);
	cJSON_AddNumberToObject(o, "peak_bytes", (double)c->peak_bytes);
	cJSON_AddNumberToObject(o, "capacity_bytes", (double)c->capacity_bytes);
	cJSON *sets = cJSON_AddArrayToObject(o, "sets");
	for (int i = 0; i < c->nsets; i++)
		cJSON_AddItemToArray(sets, cJSON_CreateString(c->sets[i]));
	return o;
}

static void print_json(const struct job *base, const struct search_space *sp,
		       const struct search_result *r, int64_t seq, const char *emitted)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "model", base->model.name);
	cJSON_AddStringToObject(o, "cluster", base->cluster.name);
	cJSON_AddNumberToObject(o, "gpus", (double)base->gpus);
	cJSON_AddStringToObject(o, "framework", framework_name(sp->framework));
	cJSON_AddNumberToObject(o, "global_batch", (double)sp->global_batch);
	cJSON_AddNumberToObject(o, "seq_len", (double)seq);
	cJSON_AddNumberToObject(o, "candidates", (double)r->candidates);
	cJSON_AddNumberToObject(o, "rejected", (double)r->rejected);
	cJSON_AddNumberToObject(o, "skipped", (double)r->skipped);
	cJSON_AddNumberToObject(o, "duplicates", (double)r->duplicates);
	cJSON_AddNumberToObject(o, "fit", (double)r->fit);
	cJSON_AddNumberToObject(o, "simulated", (double)r->simulated);
	cJSON_AddNumberToObject(o, "pruned", (double)r->pruned);
	cJSON_AddNumberToObject(o, "over_in_timeline", (double)r->over);
	cJSON_AddNumberToObject(o, "nccl_unrunnable", (double)r->unrunnable);
	cJSON_AddBoolToObject(o, "offload_searched", r->offload_tried);
	cJSON_AddNumberToObject(o, "search_s", r->wall_s);
	cJSON_AddNumberToObject(o, "configs_per_s", r->configs_per_s);
	cJSON_AddNumberToObject(o, "filter_s", r->filter_s);
	cJSON_AddNumberToObject(o, "sim_s", r->sim_s);
	cJSON_AddNumberToObject(o, "threads", r->threads);
	cJSON *top = cJSON_AddArrayToObject(o, "top");
	for (int i = 0; i < r->ntop; i++)
		cJSON_AddItemToArray(top, cand_json(sp->framework, &r->top[i]));
	if (emitted)
		cJSON_AddStringToObject(o, "emitted_ds_config", emitted);
	cli_print_json(o);
}

/* Whether a --set PATH=VALUE goes to the cluster (else it pins or sets the strategy) */
static bool cluster_set(const char *set)
{
	char p[128];
	size_t n = strcspn(set, "=");
	snprintf(p, sizeof(p), "%.*s", (int)(n < sizeof(p) - 1 ? n : sizeof(p) - 1), set);
	return cluster_owns_path(p);
}

/* ds_config top-level keys a user --set may carry into the emitted ds_config (everything
 * else that is not a cluster path goes to the strategy JSON). */
static bool ds_path(const char *set)
{
	static const char *const keys[] = {
		"train_", "gradient_", "zero_", "bf16", "fp16", "bfloat16", "optimizer", "scheduler",
		"data_types", "communication_data_type", "activation_checkpointing", "steps_per_print",
		"wall_clock_breakdown", "prescale_gradients", "tensor_parallel",
		"sequence_parallel_size", "amp", "ds_config.",
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strncmp(set, keys[i], strlen(keys[i])))
			return true;
	return false;
}

static enum tw_result write_file(const char *path, const char *text, struct tw_err *err)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return tw_errf(err, tw_out_errcode(errno), "%s: cannot write: %s", path,
			       strerror(errno));
	bool ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
	ok = (fclose(f) == 0) && ok;
	if (!ok) {
		unlink(path);
		return tw_errf(err, TW_ERR_SYSTEM, "%s: write failed", path);
	}
	return TW_OK;
}

/* Both files go to temporaries first, are loaded back through job_load and checked to give
 * the candidate's degrees, and only then are renamed into place. */
static enum tw_result emit(const struct cli_job_opts *o, const struct job *base,
			   const struct search_space *sp, const struct search_cand *c,
			   const char *path, struct tw_err *err)
{
	cJSON *ds = cJSON_CreateObject(), *st = cJSON_CreateObject();
	enum tw_result rc = TW_OK;
	char *dtext = NULL, *stext = NULL;
	char spath[1024], dtmp[1100], stmp[1100];
	snprintf(spath, sizeof(spath), "%s.strategy.json", path);
	/* the temporary names end in .json: the loader reads a bare name without it as a preset */
	snprintf(dtmp, sizeof(dtmp), "%s.tmp.%ld.json", path, (long)getpid());
	snprintf(stmp, sizeof(stmp), "%s.tmp.%ld.json", spath, (long)getpid());

	char desc[160];
	cand_desc(sp->framework, c, desc, sizeof(desc));
	char note[512];
	snprintf(note, sizeof(note), "twin plan: %s on %lld x %s, best of the search: %s",
		 base->model.name, (long long)base->gpus, base->cluster.name, desc);
	cJSON_AddStringToObject(st, "name", "twin plan");
	cJSON_AddStringToObject(st, "description", note);
	cJSON_AddStringToObject(st, "note", "use with --ds-config of the ds_config written beside it");
	for (int i = 0; i < c->nsets && rc == TW_OK; i++)
		rc = json_set_path(ds_path(c->sets[i]) ? ds : st, c->sets[i], false, "twin plan", err);
	if (rc == TW_OK) {
		char buf[64];
		snprintf(buf, sizeof(buf), "gradient_accumulation_steps=%lld", (long long)c->grad_accum);
		rc = json_set_path(ds, buf, false, "twin plan", err);
	}
	/* the user's strategy --set values travel with the files */
	for (int i = 0; i < sp->nsets && rc == TW_OK; i++) {
		const char *s = sp->sets[i];
		char p[128];
		size_t n = strcspn(s, "=");
		snprintf(p, sizeof(p), "%.*s", (int)(n < sizeof(p) - 1 ? n : sizeof(p) - 1), s);
		if (cluster_owns_path(p) || !strcmp(p, "tp") || !strcmp(p, "pp") ||
		    !strcmp(p, "recompute") || !strcmp(p, "recompute_num_layers") ||
		    !strcmp(p, "micro_batch") ||
		    !strcmp(p, "zero_optimization.stage") || !strcmp(p, "train_micro_batch_size_per_gpu"))
			continue;
		const char *v = !strncmp(s, "ds_config.", 10) ? s + 10 : !strncmp(s, "strategy.", 9) ? s + 9 : s;
		rc = json_set_path(ds_path(s) && strncmp(s, "strategy.", 9) ? ds : st, v, false, "--set", err);
	}
	if (rc == TW_OK) {
		dtext = cJSON_Print(ds);
		stext = cJSON_Print(st);
		if (!dtext || !stext)
			rc = tw_errf(err, TW_ERR_INTERNAL, "cannot print the emitted configuration");
	}
	if (rc == TW_OK)
		rc = tw_out_target(path, err);
	if (rc == TW_OK)
		rc = tw_out_target(spath, err);
	if (rc == TW_OK)
		rc = write_file(dtmp, dtext, err);
	if (rc == TW_OK) {
		rc = write_file(stmp, stext, err);
		if (rc != TW_OK)
			unlink(dtmp);
	}
	if (rc == TW_OK) {
		/* load back as a user would and check the degrees */
		struct job *j = TW_NEW(struct job);
		const char *csets[CLI_MAX_SETS];
		int nc = 0;
		for (int i = 0; i < o->in.nsets; i++)
			if (cluster_set(o->in.sets[i]))
				csets[nc++] = o->in.sets[i];
		struct job_inputs in = o->in;
		in.ds_config = dtmp;
		in.strategy = stmp;
		in.sets = csets;
		in.nsets = nc;
		struct tw_err e = { 0 };
		if (job_load(&in, j, &e) != TW_OK)
			rc = tw_errf(err, TW_ERR_INTERNAL, "emitted configuration does not load back: %s", e.msg);
		else if (j->strat.tp != c->tp || j->strat.pp != c->pp || j->strat.vp != c->vp ||
			 j->strat.ep != c->ep || j->strat.cp != c->cp ||
			 j->strat.dp != c->dp ||
			 j->strat.micro_batch != c->micro || j->strat.zero_stage != c->zero ||
			 j->strat.recompute != c->recompute)
			rc = tw_errf(err, TW_ERR_INTERNAL,
				     "emitted configuration loads back as a different strategy (tp %lld pp %lld "
				     "dp %lld micro %lld zero %d)", (long long)j->strat.tp, (long long)j->strat.pp,
				     (long long)j->strat.dp, (long long)j->strat.micro_batch, j->strat.zero_stage);
		free(j);
		if (rc == TW_OK && rename(stmp, spath) != 0)
			rc = tw_errf(err, TW_ERR_SYSTEM, "%s: cannot rename into place: %s", spath, strerror(errno));
		if (rc == TW_OK && rename(dtmp, path) != 0) {
			rc = tw_errf(err, TW_ERR_SYSTEM, "%s: cannot rename into place: %s", path, strerror(errno));
			unlink(spath);
		}
		unlink(dtmp);
		unlink(stmp);
	}
	free(dtext);
	free(stext);
	cJSON_Delete(ds);
	cJSON_Delete(st);
	return rc;
}

int cmd_plan(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	struct cli_job_opts o;
	cli_job_opts_init(&o, ctx);
	struct search_space sp;
	search_space_init(&sp);
	struct tw_err err = { 0 };
	const char *emit_path = NULL;
	int64_t seq = 0, top = 5;
	bool have_batch = false;
	for (int i = 1; i < argc; i++) {
		int r = cli_job_opt(&o, argc, argv, &i, &err);
		if (r < 0)
			return cli_fail(&err);
		if (r > 0)
			continue;
		const char *a = argv[i], *v;
		if (cli_is_opt(a, "--global-batch")) {
			if (!(v = cli_value(argc, argv, &i, "--global-batch", &err)) ||
			    cli_parse_int("--global-batch", v, 1, 1LL << 40, &sp.global_batch, &err) != TW_OK)
				return cli_fail(&err);
			have_batch = true;
		} else if (cli_is_opt(a, "--seq")) {
			if (!(v = cli_value(argc, argv, &i, "--seq", &err)) ||
			    cli_parse_int("--seq", v, 1, 1LL << 30, &seq, &err) != TW_OK)
				return cli_fail(&err);
		} else if (cli_is_opt(a, "--top")) {
			if (!(v = cli_value(argc, argv, &i, "--top", &err)) ||
			    cli_parse_int("--top", v, 1, 1000, &top, &err) != TW_OK)
				return cli_fail(&err);
		} else if (cli_is_opt(a, "--framework")) {
			if (!(v = cli_value(argc, argv, &i, "--framework", &err)))
				return cli_fail(&err);
			if (!strcmp(v, "deepspeed"))
				sp.framework = STRAT_DEEPSPEED;
			else if (!strcmp(v, "megatron"))
				sp.framework = STRAT_MEGATRON;
			else if (!strcmp(v, "fsdp"))
				sp.framework = STRAT_FSDP;
			else
				return cli_usage_error("plan", "--framework %s: must be one of: deepspeed, megatron, fsdp", v);
		} else if (cli_is_opt(a, "--emit-ds-config")) {
			if (!(emit_path = cli_value(argc, argv, &i, "--emit-ds-config", &err)))
				return cli_fail(&err);
		} else if (cli_is_opt(a, "--threads")) {
			int64_t th = 0;
			if (!(v = cli_value(argc, argv, &i, "--threads", &err)) ||
			    cli_parse_int("--threads", v, 0, SEARCH_MAX_THREADS, &th, &err) != TW_OK)
				return cli_fail(&err);
			sp.threads = (int)th;
		} else if (!strcmp(a, "--exhaustive")) {
			sp.exhaustive = true;
		} else {
			return cli_usage_error("plan", "unknown option %s (see twin plan --help)", a);
		}
	}
	if (o.in.ds_config || o.in.strategy)
		return cli_usage_error("plan", "--ds-config and -s are not taken: plan searches the "
					       "strategy (pin a dimension with --set tp=N, ...)");
	if (!o.in.model)
		return cli_usage_error("plan", "-m MODEL is required");
	if (!o.in.cluster)
		return cli_usage_error("plan", "-c CLUSTER is required");
	if (!o.in.gpus)
		return cli_usage_error("plan", "--gpus N is required");
	if (!have_batch)
		return cli_usage_error("plan", "--global-batch B is required");
	if (emit_path && sp.framework != STRAT_DEEPSPEED)
		return cli_usage_error("plan", "--emit-ds-config needs --framework deepspeed");
	if (emit_path) { /* before the search: the files could not be written */
		char spath[1024];
		snprintf(spath, sizeof(spath), "%s.strategy.json", emit_path);
		if (tw_out_target(emit_path, &err) != TW_OK || tw_out_target(spath, &err) != TW_OK)
			return cli_fail(&err);
	}
	/* the search's own inputs come by its options: a --set of them would be simulated but not
	 * reported (nor put in the candidates' sets) */
	static const struct { const char *path, *opt; } own[] = { { "seq_len", "--seq" } };
	for (int i = 0; i < o.in.nsets; i++)
		for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
			const char *p = o.sets[i];
			if (!strncmp(p, "strategy.", 9) || !strncmp(p, "ds_config.", 10))
				p = strchr(p, '.') + 1;
			size_t n = strlen(own[k].path);
			if (!strncmp(p, own[k].path, n) && p[n] == '=')
				return cli_usage_error("plan", "--set %s: give it with %s", o.sets[i],
						       own[k].opt);
		}
	sp.seq = seq;
	sp.top = (int)top;
	sp.sets = o.sets;
	sp.nsets = o.in.nsets;

	/* the base job: model and cluster (with the cluster --set values) under the default
	 * strategy; the search replaces the strategy */
	char sdir[1024];
	snprintf(sdir, sizeof(sdir), "%s/examples/strategies", ctx->data_dir);
	sp.strategies_dir = sdir;
	const char *csets[CLI_MAX_SETS];
	int nc = 0;
	for (int i = 0; i < o.in.nsets; i++)
		if (cluster_set(o.sets[i]))
			csets[nc++] = o.sets[i];
	struct job_inputs bin = o.in;
	bin.sets = csets;
	bin.nsets = nc;
	struct job *base = TW_NEW(struct job);
	struct search_result res;
	memset(&res, 0, sizeof(res));
	int status = 0;
	if (job_load(&bin, base, &err) != TW_OK || search_run(base, &sp, &res, &err) != TW_OK) {
		status = cli_fail(&err);
		goto out;
	}
	cli_set_notes(&o);
	int64_t seq_used = seq ? seq : base->model.seq_len;
	if (!res.any_fit) {
		char desc[160];
		if (res.unrunnable > 0) {
			/* candidates that fit were there, and NCCL_ALGO / NCCL_PROTO took them all */
			tw_errf(&err, TW_ERR_INVALID,
				"nothing runs: %lld candidate%s for %s on %lld x %s fit but NCCL could not "
				"run them with the strategy's nccl_algo / nccl_proto; the first: %s",
				(long long)res.unrunnable, res.unrunnable == 1 ? "" : "s", base->model.name,
				(long long)base->gpus, base->cluster.name, res.first_unrunnable);
		} else if (res.closest_short_bytes == INT64_MAX) {
			/* no valid strategy at all: an input error more than a memory verdict; name
			 * the strategy pins, which are what usually rules everything out */
			char pins[256] = "";
			for (int i = 0; i < o.in.nsets; i++) {
				size_t w = strlen(pins);
				if (!cluster_set(o.sets[i]) && w < sizeof(pins))
					snprintf(pins + w, sizeof(pins) - w, "%s--set %s", w ? " " : "", o.sets[i]);
			}
			if (res.candidates == 0)
				tw_errf(&err, TW_ERR_INVALID,
					"no valid strategy: the framework's rules leave no candidate for %s "
					"on %lld x %s%s%s", base->model.name, (long long)base->gpus,
					base->cluster.name, pins[0] ? " with " : "", pins);
			else
				tw_errf(&err, TW_ERR_INVALID,
					"no valid strategy: none of the %lld candidates for %s on %lld x %s is "
					"valid%s%s%s%s",
					(long long)res.candidates, base->model.name, (long long)base->gpus,
					base->cluster.name, pins[0] ? " with " : "", pins,
					res.first_reject[0] ? "; the first: " : "", res.first_reject);
		} else {
			cand_desc(sp.framework, &res.closest, desc, sizeof(desc));
			/* a GPU shortfall's verdict says nothing of the host: say it when short too */
			char host[96] = "";
			if (res.closest.host_short_bytes > 0 &&
			    res.closest.host_short_bytes != res.closest_short_bytes)
				snprintf(host, sizeof(host), "; host memory short by %.1f GiB too",
					 gib(res.closest.host_short_bytes));
			tw_errf(&err, TW_ERR_INVALID,
				"nothing fits: %s on %lld x %s (%.1f GiB each): smallest shortfall %.1f GiB "
				"with %s (%.1f GiB needed; %s)%s%s",
				base->model.name, (long long)base->gpus, base->cluster.name,
				gib(res.closest.capacity_bytes), gib(res.closest_short_bytes), desc,
				gib(res.closest.peak_bytes), res.closest.worst_verdict, host,
				res.offload_tried ? "; optimizer offload included" : "");
		}
		status = cli_fail(&err);
		goto out;
	}
	if (emit_path && emit(&o, base, &sp, &res.top[0], emit_path, &err) != TW_OK) {
		status = cli_fail(&err);
		goto out;
	}
	if (o.json)
		print_json(base, &sp, &res, seq_used, emit_path);
	else {
		print_text(base, &sp, &res, seq_used);
		if (emit_path)
			printf("wrote %s and %s.strategy.json (use: --ds-config %s -s %s.strategy.json)\n",
			       emit_path, emit_path, emit_path, emit_path);
	}
out:
	search_result_release(&res);
	free(base);
	return status;
}
