/* twin model — show a model (shape, parameters by component, FLOPs per token) and list the
 * presets. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char model_help[] =
	"usage: twin model show MODEL [--seq N] [--json]\n"
	"       twin model list [--json]\n\n"
	"Show a transformer: its shape, the dropout its config sets (when it does), parameters by\n"
	"component (embeddings, attention, MLP, experts, norms, head), total and active (MoE)\n"
	"parameters, and training FLOPs per token.\n\n"
	"MODEL is a preset name (twin model list), a path to a model JSON (docs/model.md), or a\n"
	"path to a Hugging Face config.json. Examples:\n"
	"  twin model show llama2-7b --seq 4096\n"
	"  twin model show gpt2-124m            # GPT-2's dropout 0.1, applied by eager model code\n"
	"  twin model show gpt-oss-120b         # windows of 128 on alternate layers: fewer attention FLOPs\n"
	"  twin model show path/to/config.json  # a Hugging Face config (qwen3, gpt_oss, gemma3_text, ...)\n\n"
	"Options:\n"
	"  --seq N     sequence length for the attention FLOPs (default: the model's seq_len)\n"
	"  --json      machine-readable output\n"
	"  -h, --help  this help\n";

static const char *const act_str[] = {"gelu", "swiglu", "squared_relu", "relu"};
static const char *const norm_str[] = {"layernorm", "rmsnorm"};
static const char *const pos_str[] = {"rope", "learned", "alibi"};

static void presets_dir(const struct cli_ctx *ctx, char *buf, size_t len)
{
	snprintf(buf, len, "%s/examples/models", ctx->data_dir);
}

/* "6.74 B" style short form of a count */
static const char *short_count(double v, char *buf, size_t len)
{
	if (v >= 1e12)
		snprintf(buf, len, "%.2f T", v / 1e12);
	else if (v >= 1e9)
		snprintf(buf, len, "%.2f B", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, len, "%.2f M", v / 1e6);
	else
		snprintf(buf, len, "%.0f", v);
	return buf;
}

static void row(const char *label, int64_t v, int64_t total)
{
	char b[32];
	printf("  %-12s %21s  %5.1f%%\n", label, tw_fmt_thousands(v, b, sizeof(b)),
	       total ? 100.0 * (double)v / (double)total : 0.0);
}

static void print_text(const struct model *m, const struct model_params *p,
		       const struct model_flops *f, int64_t seq)
{
	char b[32], s[32];
	printf("model        %s (%s)\n", m->name, m->family);
	printf("shape        %lld layers, hidden %lld, heads %lld (kv %lld, head_dim %lld), vocab %lld, seq_len %lld\n",
	       (long long)m->layers, (long long)m->hidden, (long long)m->heads,
	       (long long)m->kv_heads, (long long)m->head_dim, (long long)m->vocab,
	       (long long)m->seq_len);
	printf("blocks       %s", act_str[m->act]);
	if (p->mlp_per_dense_layer) /* some layers are dense */
		printf(" MLP %lld", (long long)m->ffn_hidden);
	printf(", %s, %s, %s embeddings, %s%s\n", norm_str[m->norm], pos_str[m->pos],
	       m->tied_embeddings ? "tied" : "untied",
	       m->qkv_bias || m->out_bias || m->mlp_bias ? "biases" : "no biases",
	       m->parallel_attn ? ", parallel attention+MLP" : "");
	if (model_is_moe(m)) {
		printf("moe          %lld experts x %lld wide, top-%lld", (long long)m->experts,
		       (long long)m->expert_ffn_hidden, (long long)m->top_k);
		if (m->router_groups)
			printf(" from the best %lld of %lld groups", (long long)m->router_group_topk,
			       (long long)m->router_groups);
		if (m->shared_experts)
			printf(", %lld shared (%lld wide)", (long long)m->shared_experts,
			       (long long)m->shared_ffn_hidden);
		if (m->dense_layers)
			printf(", first %lld layers dense", (long long)m->dense_layers);
		if (m->moe_layer_freq > 1)
			printf(", every %lld-th layer MoE", (long long)m->moe_layer_freq);
		printf("\n");
	}
	if (m->kv_lora_rank)
		printf("mla          q_lora_rank %lld, kv_lora_rank %lld, qk_nope %lld, qk_rope %lld, v %lld\n",
		       (long long)m->q_lora_rank, (long long)m->kv_lora_rank,
		       (long long)m->qk_nope_head_dim, (long long)m->qk_rope_head_dim,
		       (long long)m->v_head_dim);
	if (m->sliding_window > 0 || m->attn_chunk > 0 || m->qk_norm || m->attn_sinks) {
		printf("attention   ");
		const char *sep = " ";
		if (m->sliding_window > 0 || m->attn_chunk > 0) {
			printf(" %s %lld tokens on %lld of %lld layers",
			       m->attn_chunk > 0 ? "chunks of" : "sliding window",
			       (long long)(m->attn_chunk > 0 ? m->attn_chunk : m->sliding_window),
			       (long long)model_local_layers(m), (long long)m->layers);
			if (m->full_every > 0)
				printf(" (full attention where layer %% %lld == %lld)",
				       (long long)m->full_every, (long long)m->full_first);
			sep = ", ";
		}
		if (m->qk_norm) {
			printf("%sq/k norms", sep);
			sep = ", ";
		}
		if (m->attn_sinks)
			printf("%ssinks", sep);
		printf("\n");
	}
	if (m->dropout_given) /* what eager HF modules apply unless the strategy says otherwise */
		printf("dropout      hidden %g, attention %g (the config's; eager model code)\n",
		       m->hidden_dropout, m->attention_dropout);
	printf("\nparameters\n");
	row("embeddings", p->embedding, p->total);
	row("attention", p->attention, p->total);
	row("mlp", p->mlp, p->total);
	if (model_is_moe(m))
		row("experts", p->experts, p->total);
	row("norms", p->norms, p->total);
	if (m->tied_embeddings)
		printf("  %-12s %21s  (tied to the embedding)\n", "head", "0");
	else
		row("head", p->head, p->total);
	printf("  %-12s %21s  (%s)\n", "total", tw_fmt_thousands(p->total, b, sizeof(b)),
	       short_count((double)p->total, s, sizeof(s)));
	printf("  %-12s %21s  (%s per token)\n", "active", tw_fmt_thousands(p->active, b, sizeof(b)),
	       short_count((double)p->active, s, sizeof(s)));
	printf("\nFLOPs per token, forward (seq %lld, causal attention = half of s x s%s)\n",
	       (long long)seq, m->sliding_window > 0 || m->attn_chunk > 0 ? ", less when local" : "");
	printf("  %-16s %12.4g\n", "attention linear", f->attn_linear);
	printf("  %-16s %12.4g\n", "attention core", f->attn_core);
	printf("  %-16s %12.4g\n", model_is_moe(m) ? "mlp (dense)" : "mlp", f->mlp);
	if (model_is_moe(m))
		printf("  %-16s %12.4g\n", "moe (top-k)", f->moe);
	printf("  %-16s %12.4g\n", "logits", f->logits);
	printf("  %-16s %12.4g\n", "forward", f->total);
	printf("  %-16s %12.4g  (3 x forward; %.2f x 6N with N = active parameters)\n",
	       "training", 3.0 * f->total, 3.0 * f->total / (6.0 * (double)p->active));
}

static cJSON *show_json(const struct model *m, const struct model_params *p,
			const struct model_flops *f, int64_t seq)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "model", model_to_json(m));
	cJSON *pp = cJSON_AddObjectToObject(o, "params");
	cJSON_AddNumberToObject(pp, "embedding", (double)p->embedding);
	cJSON_AddNumberToObject(pp, "attention", (double)p->attention);
	cJSON_AddNumberToObject(pp, "mlp", (double)p->mlp);
	cJSON_AddNumberToObject(pp, "experts", (double)p->experts);
	cJSON_AddNumberToObject(pp, "norms", (double)p->norms);
	cJSON_AddNumberToObject(pp, "head", (double)p->head);
	cJSON_AddNumberToObject(pp, "total", (double)p->total);
	cJSON_AddNumberToObject(pp, "active", (double)p->active);
	cJSON_AddNumberToObject(pp, "attn_per_layer", (double)p->attn_per_layer);
	cJSON_AddNumberToObject(pp, "mlp_per_dense_layer", (double)p->mlp_per_dense_layer);
	cJSON_AddNumberToObject(pp, "moe_per_layer", (double)p->moe_per_layer);
	cJSON_AddNumberToObject(pp, "expert_params", (double)p->expert_params);
	cJSON_AddNumberToObject(pp, "norms_per_layer", (double)p->norms_per_layer);
	cJSON *fo = cJSON_AddObjectToObject(o, "flops_per_token");
	cJSON_AddNumberToObject(fo, "seq", (double)seq);
	cJSON_AddNumberToObject(fo, "attn_linear_fwd", f->attn_linear);
	cJSON_AddNumberToObject(fo, "attn_core_fwd", f->attn_core);
	cJSON_AddNumberToObject(fo, "mlp_fwd", f->mlp);
	cJSON_AddNumberToObject(fo, "moe_fwd", f->moe);
	cJSON_AddNumberToObject(fo, "logits_fwd", f->logits);
	cJSON_AddNumberToObject(fo, "forward", f->total);
	cJSON_AddNumberToObject(fo, "training", 3.0 * f->total);
	return o;
}

static int model_show(const struct cli_ctx *ctx, int argc, char **argv)
{
	const char *name = NULL;
	bool json = false;
	int64_t seq = 0;
	struct tw_err err = {0};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json")) {
			json = true;
		} else if (cli_is_opt(a, "--seq")) {
			const char *v = cli_value(argc, argv, &i, "--seq", &err);
			if (!v || cli_parse_int("--seq", v, 1, 2147483647LL, &seq, &err) != TW_OK)
				return cli_fail(&err);
		} else if (a[0] == '-' && a[1]) {
			return cli_usage_error("model show", "unknown option '%s' (see twin model --help)", a);
		} else if (name) {
			return cli_usage_error("model show", "one MODEL only, got '%s' and '%s'", name, a);
		} else {
			name = a;
		}
	}
	if (!name)
		return cli_usage_error("model show", "MODEL is required (see twin model --help)");
	char dir[4096];
	presets_dir(ctx, dir, sizeof(dir));
	struct model m;
	if (model_load(name, dir, &m, &err) != TW_OK)
		return cli_fail(&err);
	if (!seq)
		seq = m.seq_len;
	struct model_params p;
	struct model_flops f;
	model_count(&m, &p);
	model_flops_fwd(&m, seq, &f);
	if (json)
		cli_print_json(show_json(&m, &p, &f, seq));
	else
		print_text(&m, &p, &f, seq);
	return 0;
}

static int model_list(const struct cli_ctx *ctx, int argc, char **argv)
{
	bool json = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else
			return cli_usage_error("model list", "unknown argument '%s' (see twin model --help)",
					       argv[i]);
	}
	char dir[4096], names[4096];
	presets_dir(ctx, dir, sizeof(dir));
	model_list_presets(dir, names, sizeof(names));
	/* load every preset before printing anything: a broken one is one error line, no table */
	struct model *ms = NULL;
	size_t n = 0, cap = 0;
	char *save = NULL;
	for (char *name = strtok_r(names, ", ", &save); name; name = strtok_r(NULL, ", ", &save)) {
		struct tw_err err = {0};
		TW_GROW(ms, cap, n + 1);
		if (model_load(name, dir, &ms[n], &err) != TW_OK) {
			free(ms);
			return cli_fail(&err);
		}
		snprintf(ms[n].name, sizeof(ms[n].name), "%s", name); /* the name to type */
		n++;
	}
	cJSON *arr = json ? cJSON_CreateArray() : NULL;
	if (!json)
		printf("%-16s %-12s %7s %6s %5s %18s %18s\n", "preset", "family", "layers", "hidden",
		       "heads", "total params", "active params");
	for (size_t i = 0; i < n; i++) {
		const struct model *m = &ms[i];
		struct model_params p;
		model_count(m, &p);
		if (json) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "preset", m->name);
			cJSON_AddStringToObject(o, "family", m->family);
			cJSON_AddNumberToObject(o, "total", (double)p.total);
			cJSON_AddNumberToObject(o, "active", (double)p.active);
			cJSON_AddItemToArray(arr, o);
		} else {
			char t[32], a[32];
			printf("%-16s %-12s %7lld %6lld %5lld %18s %18s\n", m->name, m->family,
			       (long long)m->layers, (long long)m->hidden, (long long)m->heads,
			       tw_fmt_thousands(p.total, t, sizeof(t)),
			       tw_fmt_thousands(p.active, a, sizeof(a)));
		}
	}
	free(ms);
	if (json)
		cli_print_json(arr);
	return 0;
}

int cmd_model(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("model", "expected 'show MODEL' or 'list' (see twin model --help)");
	if (cli_wants_help(argc, argv)) {
		fputs(model_help, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "show"))
		return model_show(ctx, argc - 1, argv + 1);
	if (!strcmp(argv[1], "list"))
		return model_list(ctx, argc - 1, argv + 1);
	if (argv[1][0] == '-')
		return cli_usage_error("model", "unknown option '%s' (see twin model --help)", argv[1]);
	return cli_usage_error("model", "unknown subcommand '%s' (expected show or list)", argv[1]);
}
