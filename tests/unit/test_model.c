/* Unit tests for core/model: exact parameter counts (presets and Hugging Face configs), FLOPs
 * per token against independent closed forms, schema validation and loading. Run from the
 * repository root (tests/run.sh does; TWIN_HOME overrides). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "test.h"

struct paths {
	char presets[1024];
	char hf[1024];
};

static struct paths paths(void)
{
	const char *home = getenv("TWIN_HOME");
	struct paths p;
	snprintf(p.presets, sizeof(p.presets), "%s/examples/models", home && *home ? home : ".");
	snprintf(p.hf, sizeof(p.hf), "%s/tests/fixtures/hf", home && *home ? home : ".");
	return p;
}

/* Load a preset or an HF fixture (by file stem); a failure is a failed check, m is zeroed. */
static bool load(struct test_ctx *t, const char *name, bool hf, struct model *m)
{
	struct paths p = paths();
	struct tw_err err = {0};
	char path[2048];
	memset(m, 0, sizeof(*m));
	if (hf)
		snprintf(path, sizeof(path), "%s/%s.json", p.hf, name);
	enum tw_result rc = model_load(hf ? path : name, p.presets, m, &err);
	if (rc != TW_OK)
		printf("#   load %s: %s\n", name, err.msg);
	CHECK(t, rc == TW_OK);
	return rc == TW_OK;
}

static int64_t total(struct test_ctx *t, const char *name, bool hf)
{
	struct model m;
	struct model_params p = {0};
	if (load(t, name, hf, &m))
		model_count(&m, &p);
	return p.total;
}

static int64_t active(struct test_ctx *t, const char *name, bool hf)
{
	struct model m;
	struct model_params p = {0};
	if (load(t, name, hf, &m))
		model_count(&m, &p);
	return p.active;
}

/* Parse our schema from a string; returns the result and leaves the message in err. */
static enum tw_result parse(const char *text, struct model *m, struct tw_err *err)
{
	cJSON *o = cJSON_Parse(text);
	if (!o)
		return TW_ERR_INTERNAL;
	tw_err_clear(err);
	enum tw_result rc = model_from_json(o, "m.json", m, err);
	cJSON_Delete(o);
	return rc;
}

/* ---- counts -------------------------------------------------------------------------------- */

static void test_llama_exact(struct test_ctx *t)
{
	/* deepspeed.md §6.2: the Llama formula, checked against the published totals */
	CHECK_EQ_INT(t, total(t, "llama2-7b", false), 6738415616LL);
	CHECK_EQ_INT(t, total(t, "llama3-8b", false), 8030261248LL);
	CHECK_EQ_INT(t, total(t, "llama2-13b", false), 13015864320LL);
	CHECK_EQ_INT(t, total(t, "llama2-70b", false), 68976648192LL);
	CHECK_EQ_INT(t, total(t, "llama2-7b", true), 6738415616LL);
	CHECK_EQ_INT(t, total(t, "llama3-8b", true), 8030261248LL);
	CHECK_EQ_INT(t, active(t, "llama2-7b", false), 6738415616LL);
}

static void test_llama2_7b_breakdown(struct test_ctx *t)
{
	struct model m;
	struct model_params p = {0};
	if (load(t, "llama2-7b", false, &m))
		model_count(&m, &p);
	CHECK_EQ_INT(t, p.embedding, 32000LL * 4096);
	CHECK_EQ_INT(t, p.head, 32000LL * 4096);
	CHECK_EQ_INT(t, p.attn_per_layer, 4LL * 4096 * 4096);
	CHECK_EQ_INT(t, p.mlp_per_dense_layer, 3LL * 4096 * 11008);
	CHECK_EQ_INT(t, p.norms, 32LL * 2 * 4096 + 4096);
	CHECK_EQ_INT(t, p.experts, 0);
	CHECK_EQ_INT(t, p.embedding + p.attention + p.mlp + p.experts + p.norms + p.head, p.total);
}

static void test_hf_families_exact(struct test_ctx *t)
{
	/* totals from deepspeed.md §6.2, each checked there against the well-known figure */
	CHECK_EQ_INT(t, total(t, "gpt2", true), 124439808LL);
	CHECK_EQ_INT(t, total(t, "gpt-neox-20b", true), 20554567680LL);
	CHECK_EQ_INT(t, total(t, "bloom-176b", true), 176247271424LL);
	CHECK_EQ_INT(t, total(t, "opt-6.7b", true), 6658473984LL);
	CHECK_EQ_INT(t, total(t, "falcon-7b", true), 6921720704LL);
	CHECK_EQ_INT(t, total(t, "qwen2-7b", true), 7615616512LL);
	CHECK_EQ_INT(t, total(t, "mixtral-8x7b", true), 46702792704LL);
	CHECK_EQ_INT(t, active(t, "mixtral-8x7b", true), 12879925248LL);
	CHECK_EQ_INT(t, total(t, "deepseek-v3", true), 671026419200LL);
	CHECK_EQ_INT(t, total(t, "deepseek-v2", true), 235741434880LL);
	CHECK_EQ_INT(t, total(t, "mistral-7b", true), 7241732096LL); /* "7.24B" */
}

static void test_pythia(struct test_ctx *t)
{
	/* deepspeed.md §6.2: Pythia-6.9B is the NeoX formula with h 4096, I 16384, L 32 */
	struct model m;
	if (!load(t, "gpt-neox-20b", true, &m))
		return;
	m.hidden = 4096;
	m.ffn_hidden = 16384;
	m.layers = 32;
	m.heads = m.kv_heads = 32;
	m.head_dim = 128;
	struct tw_err err = {0};
	CHECK(t, model_validate(&m, "pythia", &err) == TW_OK);
	struct model_params p;
	model_count(&m, &p);
	CHECK_EQ_INT(t, p.total, 6857302016LL);
}

static void test_published_within_half_percent(struct test_ctx *t)
{
	/* headline figures from the model cards and papers */
	CHECK_NEAR(t, total(t, "gpt2", true), 124e6, 0.005);
	CHECK_NEAR(t, total(t, "bloom-176b", true), 176e9, 0.005);
	CHECK_NEAR(t, total(t, "qwen2-7b", true), 7.6e9, 0.005);
	CHECK_NEAR(t, total(t, "mixtral-8x7b", true), 46.7e9, 0.005);
	CHECK_NEAR(t, active(t, "mixtral-8x7b", true), 12.9e9, 0.005);
	CHECK_NEAR(t, total(t, "deepseek-v3", true), 671e9, 0.005);
	CHECK_NEAR(t, active(t, "deepseek-v3", true), 37.6e9, 0.005);
	CHECK_NEAR(t, total(t, "deepseek-v2", true), 236e9, 0.005);
	CHECK_NEAR(t, active(t, "deepseek-v2", true), 21.4e9, 0.005);
	CHECK_NEAR(t, total(t, "qwen2-moe", true), 14.3e9, 0.005); /* Qwen1.5-MoE-A2.7B */
	CHECK_NEAR(t, active(t, "qwen2-moe", true), 2.7e9, 0.005);
	CHECK_NEAR(t, total(t, "gpt3-175b", false), 175e9, 0.005);
	CHECK_NEAR(t, total(t, "llama3.1-405b", false), 405e9, 0.005);
	CHECK_NEAR(t, total(t, "megatron-1t", false), 1008e9, 0.005); /* Megatron-LM Table 1 */
	CHECK_NEAR(t, total(t, "llama-65b", false), 65.2e9, 0.005);
	CHECK_NEAR(t, total(t, "llama3-70b", false), 70.6e9, 0.005);
	CHECK_NEAR(t, total(t, "qwen3-32b", false), 32.8e9, 0.005);
	CHECK_NEAR(t, total(t, "qwen3-235b-a22b", false), 235e9, 0.005);
	CHECK_NEAR(t, total(t, "gpt-oss-20b", false), 20.91e9, 0.0005); /* model card */
	CHECK_NEAR(t, total(t, "llama4-maverick", false), 400e9, 0.005);
	CHECK_NEAR(t, active(t, "llama4-maverick", false), 17e9, 0.02);
}

static void test_presets_match_hf(struct test_ctx *t)
{
	/* the same model through our schema and through its HF config counts the same */
	CHECK_EQ_INT(t, total(t, "mixtral-8x7b", false), total(t, "mixtral-8x7b", true));
	CHECK_EQ_INT(t, active(t, "mixtral-8x7b", false), active(t, "mixtral-8x7b", true));
	CHECK_EQ_INT(t, total(t, "deepseek-v3", false), total(t, "deepseek-v3", true));
	CHECK_EQ_INT(t, active(t, "deepseek-v3", false), active(t, "deepseek-v3", true));
	static const char *const pairs[][2] = {
		{"qwen3-8b", "qwen3-8b"}, {"qwen3-30b-a3b", "qwen3-30b-a3b"},
		{"gpt-oss-120b", "gpt-oss-120b"}, {"gemma3-27b", "gemma3-27b-text"},
		{"mistral-7b", "mistral-7b"}, {"llama4-scout", "llama4-scout-text"},
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		CHECK_EQ_INT(t, total(t, pairs[i][0], false), total(t, pairs[i][1], true));
		CHECK_EQ_INT(t, active(t, pairs[i][0], false), active(t, pairs[i][1], true));
		struct model a, b;
		struct model_flops fa = {0}, fb = {0};
		if (load(t, pairs[i][0], false, &a) && load(t, pairs[i][1], true, &b)) {
			model_flops_fwd(&a, 8192, &fa);
			model_flops_fwd(&b, 8192, &fb);
		}
		CHECK_NEAR(t, fa.total, fb.total, 1e-12); /* the same windows */
	}
	CHECK_EQ_INT(t, total(t, "bloom-176b", false), total(t, "bloom-176b", true));
	CHECK_EQ_INT(t, total(t, "gpt2-124m", false), total(t, "gpt2", true));
}

static void test_gpt2_closed_form(struct test_ctx *t)
{
	/* 12h^2 + 13h per layer; + V h + P h + 2h (ln_f); tied head */
	int64_t h = 768, L = 12, V = 50257, P = 1024;
	CHECK_EQ_INT(t, total(t, "gpt2", true), L * (12 * h * h + 13 * h) + V * h + P * h + 2 * h);
}

static void test_opt_offset_and_proj(struct test_ctx *t)
{
	struct model m;
	if (!load(t, "opt-6.7b", true, &m))
		return;
	CHECK_EQ_INT(t, m.max_pos, 2050); /* learned positions keep an offset of 2 */
	CHECK_EQ_INT(t, m.proj_dim, 0);
	struct model_params p;
	model_count(&m, &p);
	int64_t before = p.total;
	/* OPT-350m style: embed in 512, project in and out (two h x 512, no bias) */
	m.proj_dim = 512;
	model_count(&m, &p);
	CHECK_EQ_INT(t, p.total, before - 50272LL * 4096 + 50272LL * 512 + 2LL * 4096 * 512);
	m.proj_dim = 0;
	m.no_final_norm = true;
	model_count(&m, &p);
	CHECK_EQ_INT(t, p.total, before - 2 * 4096);
}

/* Group-limited routing: DeepSeek-V3's config (n_group 8, topk_group 4) and our preset agree;
 * V2's 8 / 3 is read too; the groups must divide the experts and hold top_k */
static void test_router_groups(struct test_ctx *t)
{
	struct model m;
	for (int hf = 0; hf < 2; hf++)
		if (load(t, "deepseek-v3", hf, &m)) {
			CHECK_EQ_INT(t, m.router_groups, 8);
			CHECK_EQ_INT(t, m.router_group_topk, 4);
		}
	if (load(t, "deepseek-v2", true, &m)) {
		CHECK_EQ_INT(t, m.router_groups, 8);
		CHECK_EQ_INT(t, m.router_group_topk, 3);
	}
	if (!load(t, "deepseek-v3", false, &m))
		return;
	struct tw_err err = {0};
	m.router_groups = 7;
	CHECK(t, model_validate(&m, "x", &err) != TW_OK);
	CHECK_STR_CONTAINS(t, err.msg, "router_groups: 7 does not divide experts (256)");
	tw_err_clear(&err);
	m.router_groups = 64, m.router_group_topk = 1; /* 4 experts cannot hold a top-8 */
	CHECK(t, model_validate(&m, "x", &err) != TW_OK);
	CHECK_STR_CONTAINS(t, err.msg, "hold fewer than top_k (8)");
	tw_err_clear(&err);
	m.router_groups = 0;
	CHECK(t, model_validate(&m, "x", &err) != TW_OK);
	CHECK_STR_CONTAINS(t, err.msg, "router_group_topk: needs router_groups");
	m.router_group_topk = 0;
	CHECK_EQ_INT(t, model_validate(&m, "x", &err), TW_OK);
}

static void test_moe_layers(struct test_ctx *t)
{
	struct model m;
	if (!load(t, "deepseek-v3", false, &m))
		return;
	CHECK(t, model_is_moe(&m));
	CHECK(t, !model_layer_is_moe(&m, 0));
	CHECK(t, !model_layer_is_moe(&m, 2));
	CHECK(t, model_layer_is_moe(&m, 3));
	CHECK(t, model_layer_is_moe(&m, 60));
	CHECK(t, !model_layer_is_moe(&m, 61));
	struct model_params p;
	model_count(&m, &p);
	CHECK_EQ_INT(t, p.mlp, 3 * p.mlp_per_dense_layer);
	CHECK_EQ_INT(t, p.experts, 58 * p.moe_per_layer);
	CHECK_EQ_INT(t, p.expert_params, 3LL * 7168 * 2048);
	/* routed + shared + router weights and bias */
	CHECK_EQ_INT(t, p.moe_per_layer, 257LL * 3 * 7168 * 2048 + 256LL * 7168 + 256);
	CHECK_EQ_INT(t, p.total - p.active, 58LL * (256 - 8) * p.expert_params);
	/* every second layer (Qwen2-MoE decoder_sparse_step = 2): layers 1, 3, 5, ... */
	m.dense_layers = 0;
	m.moe_layer_freq = 2;
	CHECK(t, !model_layer_is_moe(&m, 0));
	CHECK(t, model_layer_is_moe(&m, 1));
	CHECK(t, !model_layer_is_moe(&m, 2));
	/* the MoE layer count (closed form) agrees with the per-layer rule over mixed shapes */
	const int64_t shapes[][3] = {{7, 0, 1}, {7, 0, 2}, {7, 3, 2}, {9, 4, 3}, {10, 9, 1}, {12, 5, 4}};
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		m.layers = shapes[i][0];
		m.dense_layers = shapes[i][1];
		m.moe_layer_freq = shapes[i][2];
		int64_t n = 0;
		for (int64_t l = 0; l < m.layers; l++)
			n += model_layer_is_moe(&m, l);
		model_count(&m, &p);
		CHECK_EQ_INT(t, p.experts, n * p.moe_per_layer);
	}
	/* 2^31 - 1 layers validate without walking them (the fuzzer's timeout) */
	m.layers = 2147483647LL;
	m.dense_layers = 1;
	m.moe_layer_freq = 1000000;
	struct tw_err err = {0};
	CHECK_EQ_INT(t, model_validate(&m, "big", &err), TW_OK);
	model_count(&m, &p);
	CHECK_EQ_INT(t, p.experts, 2147LL * p.moe_per_layer);
	struct model d;
	if (load(t, "llama2-7b", false, &d))
		CHECK(t, !model_is_moe(&d) && !model_layer_is_moe(&d, 0));
}

static void test_qwen2_moe_shared_gate(struct test_ctx *t)
{
	struct model m;
	if (!load(t, "qwen2-moe", true, &m))
		return;
	CHECK(t, m.qkv_bias && !m.out_bias);
	CHECK(t, m.shared_expert_gate);
	CHECK_EQ_INT(t, m.shared_experts, 1);
	struct model_params p;
	model_count(&m, &p);
	int64_t h = 2048;
	CHECK_EQ_INT(t, p.moe_per_layer, 60 * 3 * h * 1408 + 3 * h * 5632 + h * 60 + h);
	CHECK_EQ_INT(t, p.attn_per_layer, 4 * h * h + 3 * h);
}

static void test_falcon_mqa(struct test_ctx *t)
{
	struct model m;
	if (!load(t, "falcon-7b", true, &m))
		return;
	CHECK_EQ_INT(t, m.kv_heads, 1);
	CHECK_EQ_INT(t, m.head_dim, 64);
	CHECK_EQ_INT(t, m.norms_per_layer, 1);
	CHECK(t, m.parallel_attn && m.tied_embeddings);
}

/* ---- FLOPs --------------------------------------------------------------------------------- */

static void test_flops_megatron_relation(struct test_ctx *t)
{
	/* Narayanan et al. 2021: F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) per iteration for full
	 * s x s attention. We count causal attention as half of s x s, which turns s/(6h) into
	 * s/(12h). Per token (divide by B s): */
	const char *names[] = {"gpt3-175b", "megatron-1t", "gpt2-124m"};
	for (int i = 0; i < 3; i++) {
		struct model m;
		if (!load(t, names[i], false, &m))
			continue;
		double l = (double)m.layers, h = (double)m.hidden, V = (double)m.vocab;
		double s = (double)m.seq_len;
		double want = 72.0 * l * h * h * (1.0 + s / (12.0 * h) + V / (12.0 * l * h));
		CHECK_NEAR(t, model_flops_per_token(&m, m.seq_len), want, 1e-12);
		/* and the forward parts are the per-layer 24 h^2 + 2 s h and the logits 2 h V */
		struct model_flops f;
		model_flops_fwd(&m, m.seq_len, &f);
		CHECK_NEAR(t, f.attn_linear + f.mlp, l * 24.0 * h * h, 1e-12);
		CHECK_NEAR(t, f.attn_core, l * 2.0 * s * h, 1e-12);
		CHECK_NEAR(t, f.logits, 2.0 * h * V, 1e-12);
	}
}

static void test_flops_palm_relation(struct test_ctx *t)
{
	/* PaLM App. B: 6N + 12 L H Q T per token with N the matmul parameters; causal halves the
	 * attention term to 6 L H Q T. Holds for GQA (Llama-2-70B, Llama-3-8B) and, with the active
	 * parameters, for MoE (Mixtral: top-2 of 8 experts plus the router). */
	const char *names[] = {"llama2-7b", "llama2-70b", "llama3-8b", "mixtral-8x7b", "tiny-moe"};
	for (int i = 0; i < 5; i++) {
		struct model m;
		if (!load(t, names[i], false, &m))
			continue;
		struct model_params p;
		model_count(&m, &p);
		double n_matmul = (double)(p.active - p.embedding - p.norms);
		double q = (double)(m.heads * m.head_dim), s = (double)m.seq_len;
		double want = 6.0 * n_matmul + 6.0 * (double)m.layers * q * s;
		CHECK_NEAR(t, model_flops_per_token(&m, m.seq_len), want, 1e-12);
	}
}

static void test_flops_seq_and_gqa(struct test_ctx *t)
{
	struct model m;
	if (!load(t, "llama2-70b", false, &m))
		return;
	double q = 64.0 * 128, L = 80;
	/* attention core grows linearly in seq per token: 6 L q per extra token of context */
	double d = model_flops_per_token(&m, 8192) - model_flops_per_token(&m, 4096);
	CHECK_NEAR(t, d, 6.0 * L * q * 4096, 1e-12);
	struct model_flops f;
	model_flops_fwd(&m, 4096, &f);
	double h = 8192, kv = 8.0 * 128;
	CHECK_NEAR(t, f.attn_linear, L * 2.0 * (h * (q + 2 * kv) + q * h), 1e-12);
	CHECK_NEAR(t, f.mlp, L * 2.0 * 3.0 * h * 28672, 1e-12);
	CHECK_NEAR(t, f.total, f.attn_linear + f.attn_core + f.mlp + f.moe + f.logits, 1e-12);
}

static void test_flops_mla(struct test_ctx *t)
{
	struct model m;
	if (!load(t, "deepseek-v3", false, &m))
		return;
	struct model_flops f;
	model_flops_fwd(&m, 4096, &f);
	/* per head: Q K^T over 128 + 64 dims, A V over 128; causal halves s x s */
	CHECK_NEAR(t, f.attn_core, 61.0 * 128 * 4096 * (192 + 128), 1e-12);
	/* MoE layers: 8 routed + 1 shared expert + router, 58 of them */
	double h = 7168;
	CHECK_NEAR(t, f.moe, 58.0 * 2 * (9.0 * 3 * h * 2048 + h * 256), 1e-12);
	CHECK_NEAR(t, f.mlp, 3.0 * 2 * 3 * h * 18432, 1e-12);
	/* about 6 x 37.6B active + attention: the published ~250 GFLOP/token class */
	CHECK(t, model_flops_per_token(&m, 4096) > 6.0 * 37e9);
}

/* ---- schema and loading -------------------------------------------------------------------- */

static void test_schema_defaults(struct test_ctx *t)
{
	struct model m;
	struct tw_err err = {0};
	CHECK(t, parse("{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":128,\"vocab\":100,"
		       "\"seq_len\":16}",
		       &m, &err) == TW_OK);
	CHECK_EQ_INT(t, m.kv_heads, 4);
	CHECK_EQ_INT(t, m.head_dim, 16);
	CHECK(t, m.act == MODEL_ACT_SWIGLU && m.norm == MODEL_NORM_RMSNORM && m.pos == MODEL_POS_ROPE);
	CHECK(t, !m.tied_embeddings && !m.qkv_bias && !m.norm_bias);
	CHECK_EQ_INT(t, m.norms_per_layer, 2);
	CHECK(t, !strcmp(m.name, "m")); /* from the file name */
	CHECK(t, parse("{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":128,\"vocab\":100,"
		       "\"seq_len\":16,\"position\":\"learned\",\"norm\":\"layernorm\",\"biases\":true}",
		       &m, &err) == TW_OK);
	CHECK_EQ_INT(t, m.max_pos, 16);
	CHECK(t, m.norm_bias && m.qkv_bias && m.out_bias && m.mlp_bias);
}

static void test_schema_errors(struct test_ctx *t)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"seq_len\":16}",
		 "m.json: ffn_hidden: required"},
		{"{\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16}",
		 "m.json: layers: required field is missing"},
		{"{\"layers\":0,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16}",
		 "m.json: layers: must be in [1, 2147483647], got 0"},
		{"{\"layers\":\"2\",\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16}",
		 "m.json: layers: must be an integer, got a string"},
		{"{\"layers\":2.5,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16}",
		 "m.json: layers: must be an integer"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"hiden\":3}",
		 "m.json: hiden: unknown key"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":6,\"kv_heads\":4,\"ffn_hidden\":8,\"vocab\":100,"
		 "\"seq_len\":16}",
		 "m.json: kv_heads: heads (6) must be a multiple of kv_heads (4)"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":8,\"ffn_hidden\":8,\"vocab\":100,"
		 "\"seq_len\":16}",
		 "m.json: kv_heads: must be <= heads"},
		{"{\"layers\":2,\"hidden\":66,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16}",
		 "m.json: hidden: hidden (66) must be a multiple of heads (4)"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"activation\":\"tanh\"}",
		 "m.json: activation: must be one of: gelu, swiglu, squared_relu, relu"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"top_k\":2}",
		 "m.json: top_k: MoE fields need experts > 0"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"seq_len\":16,\"experts\":4,"
		 "\"top_k\":5,\"expert_ffn_hidden\":8}",
		 "m.json: top_k: must be in [1, 4], got 5"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"seq_len\":16,\"experts\":4,"
		 "\"top_k\":2}",
		 "m.json: expert_ffn_hidden: required with experts"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"qk_rope_head_dim\":64}",
		 "m.json: qk_rope_head_dim: MLA dimensions need kv_lora_rank > 0"},
		{"{\"layers\":2147483647,\"hidden\":2147483647,\"heads\":1,\"ffn_hidden\":2147483647,"
		 "\"vocab\":100,\"seq_len\":16}",
		 "m.json: (model): the parameter count overflows 64 bits"},
		{"{\"layers\":1e30,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16}",
		 "m.json: layers: 1e+30 overflows a 64-bit integer"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"max_position\":32}",
		 "m.json: max_position: only allowed with"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"full_attention_every\":2}",
		 "m.json: full_attention_every: needs sliding_window or attention_chunk"},
		{"{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"sliding_window\":8,\"full_attention_first\":1}",
		 "m.json: full_attention_first: needs full_attention_every"},
		{"{\"layers\":4,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"sliding_window\":8,\"full_attention_every\":2,\"full_attention_first\":2}",
		 "m.json: full_attention_first: must be in [0, 1], got 2"},
		{"{\"layers\":4,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"sliding_window\":8,\"full_attention_every\":1}",
		 "m.json: full_attention_every: must be in [2,"},
		{"{\"layers\":4,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,\"seq_len\":16,"
		 "\"sliding_window\":0}",
		 "m.json: sliding_window: must be in [1,"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct model m;
		struct tw_err err = {0};
		enum tw_result rc = parse(cases[i].json, &m, &err);
		CHECK(t, rc == TW_ERR_INVALID);
		CHECK_STR_CONTAINS(t, err.msg, cases[i].msg);
		CHECK(t, !strchr(err.msg, '\n'));
	}
}

static void test_round_trip(struct test_ctx *t)
{
	const char *names[] = {"llama2-7b", "gpt3-175b", "deepseek-v3", "bloom-176b", "tiny-moe"};
	for (int i = 0; i < 5; i++) {
		struct model a, b;
		if (!load(t, names[i], false, &a))
			continue;
		cJSON *o = model_to_json(&a);
		struct tw_err err = {0};
		CHECK(t, model_from_json(o, "rt.json", &b, &err) == TW_OK);
		cJSON_Delete(o);
		CHECK(t, !memcmp(&a, &b, sizeof(a)));
	}
	/* HF imports round-trip too, so a stored job can be reloaded */
	const char *hf[] = {"opt-6.7b", "falcon-7b", "qwen2-moe", "deepseek-v2", "gpt-neox-20b", "gpt2"};
	for (int i = 0; i < 6; i++) {
		struct model a, b;
		if (!load(t, hf[i], true, &a))
			continue;
		cJSON *o = model_to_json(&a);
		struct tw_err err = {0};
		CHECK(t, model_from_json(o, "rt.json", &b, &err) == TW_OK);
		cJSON_Delete(o);
		struct model_params pa, pb;
		model_count(&a, &pa);
		model_count(&b, &pb);
		CHECK_EQ_INT(t, pa.total, pb.total);
		CHECK_EQ_INT(t, pa.active, pb.active);
		CHECK(t, !memcmp(&a, &b, sizeof(a)));
	}
}

static void test_load_errors(struct test_ctx *t)
{
	struct paths p = paths();
	struct model m;
	struct tw_err err = {0};
	CHECK(t, model_load("llama9-1b", p.presets, &m, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "unknown model 'llama9-1b'");
	CHECK_STR_CONTAINS(t, err.msg, "llama2-7b, llama3-70b");
	CHECK_STR_CONTAINS(t, err.msg, "tiny");
	tw_err_clear(&err);
	CHECK(t, model_load("/nonexistent/m.json", p.presets, &m, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "/nonexistent/m.json: cannot open");
	tw_err_clear(&err);
	CHECK(t, model_load(p.presets, p.presets, &m, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "not a regular file");
}

/* The dropout an HF config sets, with its configuration class's defaults (GPT2Config 0.1 and
 * 0.1, OPTConfig 0.1 and 0, the Llama family attention only); our format takes it too and
 * round-trips it */
static void test_dropout(struct test_ctx *t)
{
	static const struct {
		const char *name;
		double hidden, attn;
	} hf[] = {{"gpt2", 0.1, 0.1}, {"opt-6.7b", 0.1, 0}, {"llama3-8b", 0, 0},
		  {"falcon-7b", 0, 0}};
	for (size_t i = 0; i < sizeof(hf) / sizeof(hf[0]); i++) {
		struct model m;
		if (!load(t, hf[i].name, true, &m))
			continue;
		CHECK(t, m.dropout_given);
		CHECK_NEAR(t, m.hidden_dropout, hf[i].hidden, 1e-12);
		CHECK_NEAR(t, m.attention_dropout, hf[i].attn, 1e-12);
	}
	struct model m;
	if (load(t, "llama2-7b", false, &m))
		CHECK(t, !m.dropout_given); /* a preset without it: the strategy decides */
	struct tw_err err = {0};
	CHECK(t, parse("{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":256,"
		       "\"vocab\":100,\"seq_len\":32,\"hidden_dropout\":0.2}", &m, &err) == TW_OK);
	CHECK(t, m.dropout_given);
	CHECK_NEAR(t, m.hidden_dropout, 0.2, 1e-12);
	CHECK_NEAR(t, m.attention_dropout, 0, 0);
	cJSON *o = model_to_json(&m);
	CHECK_NEAR(t, cJSON_GetNumberValue(cJSON_GetObjectItem(o, "hidden_dropout")), 0.2, 1e-12);
	cJSON_Delete(o);
}


/* Qwen3, Qwen3-MoE, GPT-OSS, Gemma 2/3 and Phi-3 configs: the per-layer attention by hand, totals
 * against the model cards */
static void test_hf_newer_families(struct test_ctx *t)
{
	struct model m;
	struct model_params p = {0};
	if (load(t, "qwen3-8b", true, &m)) {
		model_count(&m, &p);
		/* q 32 x 128, k and v 8 x 128 on h 4096, o back; q_norm and k_norm over head_dim */
		CHECK_EQ_INT(t, p.attn_per_layer, 4096LL * (4096 + 2 * 1024) + 4096LL * 4096 + 2 * 128);
		CHECK(t, m.qk_norm && !m.qkv_bias && m.sliding_window == 0);
	}
	if (load(t, "gpt-oss-120b", true, &m)) {
		model_count(&m, &p);
		/* h 2880, q 64 x 64, k and v 8 x 64, biases on all four, a sink per head */
		CHECK_EQ_INT(t, p.attn_per_layer,
			     2880LL * (4096 + 1024) + 4096LL * 2880 + (4096 + 1024) + 2880 + 64);
		/* per expert gate, up, down and their biases; the router with its bias */
		CHECK_EQ_INT(t, p.expert_params, 3LL * 2880 * 2880 + 2 * 2880 + 2880);
		CHECK_EQ_INT(t, p.moe_per_layer, 128 * p.expert_params + 2880LL * 128 + 128);
		CHECK_EQ_INT(t, m.seq_len, 4096); /* YaRN's original context */
		CHECK_EQ_INT(t, m.sliding_window, 128);
		CHECK_EQ_INT(t, m.full_every, 2);
		CHECK_EQ_INT(t, m.full_first, 1);
	}
	CHECK_NEAR(t, total(t, "gpt-oss-120b", true), 116.83e9, 0.0005);
	CHECK_NEAR(t, total(t, "qwen3-8b", true), 8.2e9, 0.005);
	CHECK_NEAR(t, total(t, "qwen3-30b-a3b", true), 30.5e9, 0.005);
	CHECK_NEAR(t, active(t, "qwen3-30b-a3b", true), 3.3e9, 0.02);
	CHECK_NEAR(t, total(t, "gemma2-27b", true), 27.2e9, 0.005);
	/* Phi-3-mini: V 32064 in and out, 4 h^2 attention and 3 h f MLP a layer, 65 norms */
	CHECK_EQ_INT(t, total(t, "phi3-mini-4k", true),
		     2LL * 32064 * 3072 + 32LL * (4LL * 3072 * 3072 + 3LL * 3072 * 8192) + 65LL * 3072);
	/* Llama 4 Scout's language model: 48 MoE layers of 16 experts and a shared one, all
	 * 8192 wide; chunks of 8192 on the RoPE layers, the NoPE ones (every 4th) global */
	if (load(t, "llama4-scout-text", true, &m)) {
		model_count(&m, &p);
		CHECK_EQ_INT(t, p.moe_per_layer, 17LL * 3 * 5120 * 8192 + 5120LL * 16);
		CHECK_EQ_INT(t, p.total, 2LL * 202048 * 5120 + 48 * (p.attn_per_layer + p.moe_per_layer) +
						 97LL * 5120);
		CHECK(t, m.attn_chunk == 8192 && m.full_every == 4 && m.full_first == 3 &&
			     m.sliding_window == 0 && m.seq_len == 8192);
		/* our schema carries the chunks: the round trip counts the same FLOPs at 128k */
		cJSON *o = model_to_json(&m);
		struct model b;
		struct tw_err err = {0};
		CHECK(t, model_from_json(o, "rt.json", &b, &err) == TW_OK);
		cJSON_Delete(o);
		struct model_flops fa, fb = {0};
		model_flops_fwd(&m, 131072, &fa);
		model_flops_fwd(&b, 131072, &fb);
		CHECK_NEAR(t, fa.attn_core, fb.attn_core, 1e-12);
		/* 12 global layers at s^2 / 2, 36 chunked at 16 chunks of 8192^2 / 2 */
		CHECK_NEAR(t, fa.attn_core, (12 * 0.5 + 36 * 8192.0 / (2 * 131072)) * 40 * 2 * 131072.0 * 256,
			   1e-12);
	}
	CHECK_NEAR(t, active(t, "llama4-scout-text", true), 17e9, 0.02); /* "17B active" */
	if (load(t, "phi3-mini-4k", true, &m))
		CHECK(t, m.sliding_window == 2047 && m.full_every == 0 && model_local_layers(&m) == 32);
	if (load(t, "gemma2-27b", true, &m)) {
		CHECK(t, m.tied_embeddings && m.norms_per_layer == 4 && !m.qk_norm);
		CHECK(t, m.sliding_window == 4096 && m.full_every == 2 && m.full_first == 1);
	}
	if (load(t, "gemma3-27b-text", true, &m)) {
		CHECK(t, m.qk_norm && m.sliding_window == 1024 && m.full_every == 6 && m.full_first == 5);
		CHECK_EQ_INT(t, model_local_layers(&m), 62 - 10); /* layers 5, 11, ..., 59 global */
	}
}

/* A sliding window's FLOPs: query i sees min(i, w) keys, w s - w^2/2 pairs in all */
static void test_sliding_window_flops(struct test_ctx *t)
{
	struct model m, full;
	struct tw_err err = {0};
	const char *base = "{\"layers\":12,\"hidden\":1024,\"heads\":16,\"ffn_hidden\":4096,"
			   "\"vocab\":1000,\"seq_len\":8192";
	char text[512];
	snprintf(text, sizeof(text), "%s}", base);
	CHECK(t, parse(text, &full, &err) == TW_OK);
	snprintf(text, sizeof(text), "%s,\"sliding_window\":1024,\"full_attention_every\":6}", base);
	CHECK(t, parse(text, &m, &err) == TW_OK);
	CHECK_EQ_INT(t, m.full_first, 5);
	CHECK_EQ_INT(t, model_local_layers(&m), 10);
	CHECK(t, model_layer_local(&m, 0) && !model_layer_local(&m, 5) &&
		     !model_layer_local(&m, 11) && model_layer_local(&m, 6));
	struct model_flops f, g;
	model_flops_fwd(&m, 8192, &f);
	model_flops_fwd(&full, 8192, &g);
	/* per token and layer: 16 heads x 2 x 64 x 2 (QK^T and AV) x the keys a query sees */
	double per_key = 16.0 * 2 * 64 * 2, s = 8192, w = 1024;
	CHECK_NEAR(t, g.attn_core, 12 * per_key * s / 2, 1e-12);
	CHECK_NEAR(t, f.attn_core, 2 * per_key * s / 2 + 10 * per_key * (w - w * w / (2 * s)), 1e-12);
	CHECK_NEAR(t, f.total - f.attn_core, g.total - g.attn_core, 1e-12);
	/* a window as long as the sequence is plain causal attention */
	model_flops_fwd(&m, 1024, &f);
	model_flops_fwd(&full, 1024, &g);
	CHECK_NEAR(t, f.attn_core, g.attn_core, 1e-12);
	CHECK_NEAR(t, model_attn_frac(&m, 0, 8192), (1.0 / 8) * (1 - 1.0 / 16), 1e-12);
	CHECK_NEAR(t, model_attn_frac(&m, 5, 8192), 0.5, 1e-12);
	/* every layer windowed; the phase past the last layer leaves all of them windowed */
	snprintf(text, sizeof(text), "%s,\"sliding_window\":1024}", base);
	CHECK(t, parse(text, &m, &err) == TW_OK);
	CHECK_EQ_INT(t, model_local_layers(&m), 12);
	m.full_every = 16, m.full_first = 13;
	CHECK_EQ_INT(t, model_local_layers(&m), 12);
	/* chunks of 3000 over 8192 tokens: two whole chunks and one of 2192, c^2 / 2 pairs each */
	snprintf(text, sizeof(text), "%s,\"attention_chunk\":3000,\"full_attention_every\":4}", base);
	CHECK(t, parse(text, &m, &err) == TW_OK);
	CHECK_NEAR(t, model_attn_frac(&m, 0, 8192),
		   (2.0 * 3000 * 3000 + 2192.0 * 2192) / (2.0 * 8192 * 8192), 1e-12);
	CHECK_NEAR(t, model_attn_frac(&m, 3, 8192), 0.5, 1e-12);
	CHECK_NEAR(t, model_attn_frac(&m, 0, 3000), 0.5, 1e-12); /* one chunk: causal */
	snprintf(text, sizeof(text), "%s,\"attention_chunk\":64,\"sliding_window\":64}", base);
	CHECK(t, parse(text, &m, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "attention_chunk: a layer is local by a window or by chunks");
}

/* Load an HF config given as text, through a temporary file as a user's would be. */
static enum tw_result load_hf_text(const char *text, struct model *m, struct tw_err *err)
{
	char path[] = "/tmp/twin_hf_XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return TW_ERR_SYSTEM;
	FILE *f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	enum tw_result rc = model_load(path, NULL, m, err);
	unlink(path);
	return rc;
}

/* A case of local layers: refused with msg, or loaded with this window or chunk (local), period
 * and phase */
static void check_local(struct test_ctx *t, const char *text, const char *msg, int64_t local,
			int64_t every, int64_t first)
{
	struct model m;
	struct tw_err err = {0};
	enum tw_result rc = load_hf_text(text, &m, &err);
	if (msg) {
		CHECK(t, rc == TW_ERR_INVALID);
		CHECK_STR_CONTAINS(t, err.msg, msg);
		CHECK(t, !strchr(err.msg, '\n'));
		return;
	}
	CHECK(t, rc == TW_OK);
	if (rc != TW_OK) {
		printf("#   %s\n", err.msg);
		return;
	}
	CHECK_EQ_INT(t, m.sliding_window > 0 ? m.sliding_window : m.attn_chunk, local);
	CHECK_EQ_INT(t, m.full_every, every);
	CHECK_EQ_INT(t, m.full_first, first);
}

/* HF's layer_types and the Qwen gate, into a window and its period */
static void test_hf_layer_types(struct test_ctx *t)
{
	static const struct {
		const char *extra;
		int64_t window, every, first;
		const char *msg; /* NULL: loads */
	} cases[] = {
		{",\"use_sliding_window\":true,\"sliding_window\":64,\"layer_types\":[\"full_attention\",\"sliding_attention\","
		 "\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"sliding_attention\"]",
		 64, 3, 0, NULL},
		{",\"use_sliding_window\":true,\"sliding_window\":64,\"layer_types\":[\"full_attention\",\"full_attention\","
		 "\"full_attention\",\"full_attention\",\"full_attention\",\"full_attention\"]",
		 0, 0, 0, NULL},
		{",\"use_sliding_window\":true,\"sliding_window\":64,\"layer_types\":[\"sliding_attention\",\"sliding_attention\","
		 "\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\"]",
		 64, 0, 0, NULL},
		{",\"use_sliding_window\":true,\"sliding_window\":64,\"layer_types\":[\"sliding_attention\",\"full_attention\","
		 "\"full_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\"]",
		 0, 0, 0, "layer_types: full attention must recur every p-th layer"},
		{",\"use_sliding_window\":true,\"sliding_window\":64,\"layer_types\":[\"sliding_attention\"]", 0, 0, 0,
		 "layer_types: must be a list of num_hidden_layers (6) items"},
		{",\"use_sliding_window\":true,\"sliding_window\":64,\"layer_types\":[\"sliding_attention\",\"chunked_attention\","
		 "\"full_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\"]",
		 0, 0, 0, "layer_types: item 1: must be"},
		{",\"sliding_window\":64,\"use_sliding_window\":false", 0, 0, 0, NULL},
		/* one global layer: the shortest period that puts no other layer on it */
		{",\"sliding_window\":64,\"layer_types\":[\"sliding_attention\",\"sliding_attention\","
		 "\"full_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\"]",
		 64, 4, 2, NULL},
		/* a saved list decides even with use_sliding_window false, as transformers reads it */
		{",\"use_sliding_window\":false,\"sliding_window\":64,\"layer_types\":["
		 "\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"full_attention\","
		 "\"sliding_attention\",\"full_attention\"]",
		 64, 2, 1, NULL},
		{",\"sliding_window\":null,\"layer_types\":[\"sliding_attention\",\"full_attention\","
		 "\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"full_attention\"]",
		 0, 0, 0, NULL},
		{",\"sliding_window\":64,\"use_sliding_window\":true,\"max_window_layers\":0", 64, 0, 0,
		 NULL},
		{",\"sliding_window\":64,\"use_sliding_window\":true,\"max_window_layers\":6", 0, 0, 0,
		 NULL},
		{",\"sliding_window\":64,\"use_sliding_window\":true,\"max_window_layers\":2", 0, 0, 0,
		 "max_window_layers: windows on the layers from 2 on only"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[1024];
		snprintf(text, sizeof(text),
			 "{\"model_type\":\"qwen3\",\"hidden_size\":64,\"intermediate_size\":128,"
			 "\"num_hidden_layers\":6,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
			 "\"head_dim\":16,\"vocab_size\":100%s}",
			 cases[i].extra);
		check_local(t, text, cases[i].msg, cases[i].window, cases[i].every, cases[i].first);
	}
}

/* Llama 4's no_rope_layers: 0 marks the global NoPE layers */
static void test_hf_llama4_layers(struct test_ctx *t)
{
	static const struct {
		const char *list;
		int64_t chunk, every, first;
		const char *msg;
	} cases[] = {
		{"[1,1,0,1,1,0]", 64, 3, 2, NULL},
		{"[]", 64, 4, 3, NULL}, /* no_rope_layer_interval's default */
		{"[0,0,0,0,0,0]", 0, 0, 0, NULL},
		{"[1,0,0,1,1,1]", 0, 0, 0, "no_rope_layers: full attention must recur every p-th layer"},
		{"[1,2,1,1,1,1]", 0, 0, 0, "no_rope_layers: item 1: must be 0 or 1"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text),
			 "{\"model_type\":\"llama4_text\",\"hidden_size\":64,\"intermediate_size\":32,"
			 "\"intermediate_size_mlp\":128,\"num_hidden_layers\":6,\"num_attention_heads\":4,"
			 "\"num_key_value_heads\":2,\"head_dim\":16,\"vocab_size\":100,"
			 "\"num_local_experts\":4,\"attention_chunk_size\":64,\"no_rope_layers\":%s}",
			 cases[i].list);
		check_local(t, text, cases[i].msg, cases[i].chunk, cases[i].every, cases[i].first);
	}
}

/* A model file's repeated key is refused wherever it sits, ours and HF's (cJSON would read
 * the first copy silently) */
static void test_duplicate_keys(struct test_ctx *t)
{
	struct model m;
	struct tw_err err = {0};
	CHECK(t, parse("{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,"
		       "\"seq_len\":16,\"layers\":4}", &m, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "m.json: layers: duplicate key");
	static const struct {
		const char *extra, *msg;
	} hf[] = {
		{",\"num_hidden_layers\":2", ": num_hidden_layers: duplicate key"},
		{",\"rope_scaling\":{\"factor\":8,\"original_max_position_embeddings\":64,\"factor\":4}",
		 ": rope_scaling.factor: duplicate key"},
		{",\"task\":[1,{\"a\":{\"b\":1,\"b\":2}}]", ": task[1].a.b: duplicate key"},
	};
	for (size_t i = 0; i < sizeof(hf) / sizeof(hf[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text), "{\"model_type\":\"llama\",\"num_hidden_layers\":4,"
			 "\"hidden_size\":64,\"num_attention_heads\":4%s}", hf[i].extra);
		tw_err_clear(&err);
		CHECK(t, load_hf_text(text, &m, &err) == TW_ERR_INVALID);
		CHECK_STR_CONTAINS(t, err.msg, hf[i].msg);
	}
	/* many distinct keys twin ignores: sorted, not compared pairwise */
	size_t cap = 64 + 20000 * 16;
	char *big = malloc(cap);
	size_t n = (size_t)snprintf(big, cap, "{\"model_type\":\"llama\",\"hidden_size\":64,"
				    "\"num_attention_heads\":4,\"num_hidden_layers\":2");
	for (int i = 0; i < 20000; i++)
		n += (size_t)snprintf(big + n, cap - n, ",\"k%d\":%d", i, i);
	snprintf(big + n, cap - n, "}");
	tw_err_clear(&err);
	CHECK_EQ_INT(t, load_hf_text(big, &m, &err), TW_OK);
	free(big);
}

/* _name_or_path is informational: a short name out of any path, never refused for its length */
static void test_hf_name(struct test_ctx *t)
{
	static const struct {
		const char *path, *name;
	} cases[] = {
		{"meta-llama/Llama-2-7b-hf", "Llama-2-7b-hf"},
		{"meta-llama/Meta-Llama-3-8B/", "Meta-Llama-3-8B"},
		{"gpt2", "gpt2"},
		{"/home/u/.cache/huggingface/hub/models--meta-llama--Meta-Llama-3-8B-Instruct/snapshots/"
		 "5f0b02c75b57c5855da9ae460ce51323ea669d8a/", "Meta-Llama-3-8B-Instruct"},
		{"/cache/models--gpt2/snapshots/abc", "gpt2"},
		{"/data/ckpt/my\\u001b[31mmodel", "my?[31mmodel"},
		/* 70 bytes: cut at 63 */
		{"org/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		/* 2-byte characters: cut before a character that would not fit whole (62 bytes) */
		{"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
		 "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
		 "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9",
		 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		 "\xc3\xa9"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[1024];
		snprintf(text, sizeof(text), "{\"model_type\":\"llama\",\"num_hidden_layers\":2,"
			 "\"hidden_size\":64,\"num_attention_heads\":4,\"_name_or_path\":\"%s\"}",
			 cases[i].path);
		struct model m;
		struct tw_err err = {0};
		CHECK_EQ_INT(t, load_hf_text(text, &m, &err), TW_OK);
		CHECK_STR(t, m.name, cases[i].name);
	}
	/* nothing left of the path: the file's name */
	struct model m;
	struct tw_err err = {0};
	CHECK_EQ_INT(t, load_hf_text("{\"model_type\":\"llama\",\"num_hidden_layers\":2,"
				     "\"hidden_size\":64,\"num_attention_heads\":4,"
				     "\"_name_or_path\":\"///\"}", &m, &err), TW_OK);
	CHECK_STR_CONTAINS(t, m.name, "twin_hf_");
}

/* Group-limited routing, MLA's biases and an all-dense DeepSeek: errors name the HF keys */
static void test_hf_deepseek_keys(struct test_ctx *t)
{
	static const struct {
		const char *extra, *msg; /* msg NULL: loads */
		int64_t groups, experts;
	} cases[] = {
		{",\"n_group\":8,\"topk_group\":9", "topk_group: must be <= n_group (8), got 9", 0, 0},
		{",\"n_group\":7,\"topk_group\":4", "n_group: 7 does not divide n_routed_experts (256)", 0,
		 0},
		{",\"n_group\":512,\"topk_group\":4", "n_group: 512 does not divide n_routed_experts", 0,
		 0},
		{",\"n_group\":64,\"topk_group\":1",
		 "topk_group: 1 groups of 4 experts hold fewer than num_experts_per_tok (8)", 0, 0},
		{",\"attention_bias\":true", "attention_bias: true is not supported", 0, 0},
		{",\"n_group\":8,\"topk_group\":8", NULL, 0, 256},   /* every group: no limit */
		{",\"n_group\":8,\"topk_group\":4", NULL, 8, 256},
		{",\"first_k_dense_replace\":61", NULL, 0, 0}, /* legal in transformers: all dense */
		{",\"first_k_dense_replace\":61,\"n_group\":8,\"topk_group\":9", NULL, 0, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text), "{\"model_type\":\"deepseek_v3\"%s}", cases[i].extra);
		struct model m;
		struct tw_err err = {0};
		enum tw_result rc = load_hf_text(text, &m, &err);
		if (cases[i].msg) {
			CHECK_EQ_INT(t, rc, TW_ERR_INVALID);
			CHECK_STR_CONTAINS(t, err.msg, cases[i].msg);
			continue;
		}
		CHECK_EQ_INT(t, rc, TW_OK);
		CHECK_EQ_INT(t, m.router_groups, cases[i].groups);
		CHECK_EQ_INT(t, m.experts, cases[i].experts);
	}
	/* all dense: 61 MLPs of intermediate_size, no router */
	struct model m;
	struct tw_err err = {0};
	if (load_hf_text("{\"model_type\":\"deepseek_v3\",\"first_k_dense_replace\":80}", &m, &err) ==
	    TW_OK) {
		struct model_params p;
		model_count(&m, &p);
		CHECK(t, !model_is_moe(&m) && !m.router_bias && m.ffn_hidden == 18432);
		CHECK_EQ_INT(t, p.mlp, 61LL * 3 * 7168 * 18432);
		CHECK_EQ_INT(t, p.experts, 0);
	} else {
		CHECK(t, false);
	}
}

/* MLA derives kv_heads and head_dim: our schema refuses them, --json leaves them out */
static void test_mla_schema(struct test_ctx *t)
{
	const char *base = "{\"layers\":8,\"hidden\":2048,\"heads\":16,\"ffn_hidden\":8192,"
			   "\"vocab\":32000,\"seq_len\":4096,\"kv_lora_rank\":512,\"q_lora_rank\":0,"
			   "\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128";
	char text[512];
	struct model m;
	struct tw_err err = {0};
	snprintf(text, sizeof(text), "%s,\"kv_heads\":1}", base);
	CHECK(t, parse(text, &m, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "m.json: kv_heads: not allowed with MLA");
	snprintf(text, sizeof(text), "%s,\"head_dim\":16}", base);
	CHECK(t, parse(text, &m, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "m.json: head_dim: not allowed with MLA");
	snprintf(text, sizeof(text), "%s,\"kv_heads\":null}", base); /* null: not given */
	CHECK_EQ_INT(t, parse(text, &m, &err), TW_OK);
	snprintf(text, sizeof(text), "%s}", base);
	if (parse(text, &m, &err) != TW_OK) {
		CHECK(t, false);
		return;
	}
	CHECK(t, m.kv_heads == 16 && m.head_dim == 192);
	cJSON *o = model_to_json(&m);
	CHECK(t, !cJSON_GetObjectItem(o, "kv_heads") && !cJSON_GetObjectItem(o, "head_dim"));
	struct model b;
	CHECK(t, model_from_json(o, "rt.json", &b, &err) == TW_OK);
	CHECK(t, !memcmp(&m, &b, sizeof(m)));
	cJSON_Delete(o);
	/* a model built in code is held to the same */
	m.kv_heads = 1;
	CHECK(t, model_validate(&m, "x", &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "x: kv_heads: must equal heads (16) with MLA, got 1");
	tw_err_clear(&err);
	m.kv_heads = 16, m.head_dim = 16;
	CHECK(t, model_validate(&m, "x", &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "x: head_dim: must be qk_nope_head_dim + qk_rope_head_dim");
}

/* tie_word_embeddings as transformers reads it: true by default for GPT-2, Falcon, BLOOM, OPT */
static void test_hf_tie(struct test_ctx *t)
{
	static const struct {
		const char *config;
		int64_t head; /* the untied lm_head: vocab x the embedding width */
	} cases[] = {
		{"\"model_type\":\"gpt2\",\"n_embd\":64,\"n_layer\":2,\"n_head\":4,\"vocab_size\":100",
		 100 * 64},
		{"\"model_type\":\"falcon\",\"hidden_size\":64,\"num_hidden_layers\":2,"
		 "\"num_attention_heads\":4,\"vocab_size\":100", 100 * 64},
		{"\"model_type\":\"bloom\",\"hidden_size\":64,\"n_layer\":2,\"n_head\":4,"
		 "\"vocab_size\":100", 100 * 64},
		{"\"model_type\":\"opt\",\"hidden_size\":64,\"num_hidden_layers\":2,"
		 "\"num_attention_heads\":4,\"vocab_size\":100,\"word_embed_proj_dim\":32", 100 * 32},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int tie = -1; tie <= 1; tie++) { /* absent, false, true */
			char text[512];
			snprintf(text, sizeof(text), "{%s%s}", cases[i].config,
				 tie < 0 ? "" : tie ? ",\"tie_word_embeddings\":true"
						    : ",\"tie_word_embeddings\":false");
			struct model m;
			struct tw_err err = {0};
			if (load_hf_text(text, &m, &err) != TW_OK) {
				printf("#   %s\n", err.msg);
				CHECK(t, false);
				continue;
			}
			struct model_params p;
			model_count(&m, &p);
			CHECK_EQ_INT(t, m.tied_embeddings, tie != 0);
			CHECK_EQ_INT(t, p.head, tie != 0 ? 0 : cases[i].head);
		}
	}
}

/* A MoE step or a window pattern past the last layer is legal in transformers: every layer
 * dense, or every layer local; each error names the HF key */
static void test_hf_steps_and_patterns(struct test_ctx *t)
{
	static const struct {
		const char *config;
		int64_t moe_layers, local_layers;
		const char *msg;
	} cases[] = {
		/* Qwen2-MoE: layer l sparse when (l + 1) % decoder_sparse_step == 0 */
		{"\"model_type\":\"qwen2_moe\",\"num_hidden_layers\":6,\"decoder_sparse_step\":7", 0, 0,
		 NULL},
		{"\"model_type\":\"qwen2_moe\",\"num_hidden_layers\":6,\"decoder_sparse_step\":6", 1, 0,
		 NULL},
		{"\"model_type\":\"qwen2_moe\",\"num_hidden_layers\":6,\"decoder_sparse_step\":2", 3, 0,
		 NULL},
		{"\"model_type\":\"qwen2_moe\",\"num_hidden_layers\":6,\"decoder_sparse_step\":0", 0, 0,
		 "decoder_sparse_step: must be in [1,"},
		{"\"model_type\":\"qwen3_moe\",\"num_hidden_layers\":6,\"decoder_sparse_step\":9", 0, 0,
		 NULL},
		/* Llama 4: moe_layers = range(step - 1, layers, step); NoPE (global) layers every
		 * interval-th */
		{"\"model_type\":\"llama4_text\",\"num_hidden_layers\":6,\"interleave_moe_layer_step\":7,"
		 "\"no_rope_layer_interval\":7", 0, 6, NULL},
		{"\"model_type\":\"llama4_text\",\"num_hidden_layers\":6,\"interleave_moe_layer_step\":6,"
		 "\"no_rope_layer_interval\":6", 1, 5, NULL},
		{"\"model_type\":\"llama4_text\",\"num_hidden_layers\":6,\"no_rope_layer_interval\":1", 6,
		 0, NULL},
		{"\"model_type\":\"llama4_text\",\"num_hidden_layers\":6,\"interleave_moe_layer_step\":0",
		 0, 0, "interleave_moe_layer_step: must be in [1,"},
		/* Gemma 3: layer l sliding unless (l + 1) % sliding_window_pattern == 0 */
		{"\"model_type\":\"gemma3_text\",\"num_hidden_layers\":6,\"sliding_window_pattern\":100", 0,
		 6, NULL},
		{"\"model_type\":\"gemma3_text\",\"num_hidden_layers\":6,\"sliding_window_pattern\":6", 0,
		 5, NULL},
		{"\"model_type\":\"gemma3_text\",\"num_hidden_layers\":6,\"sliding_window_pattern\":1", 0,
		 0, NULL},
		{"\"model_type\":\"gemma3_text\",\"num_hidden_layers\":6,\"sliding_window_pattern\":0", 0,
		 0, "sliding_window_pattern: must be in [1,"},
		/* only Gemma 3 has the key: Gemma 2 and GPT-OSS alternate, Mistral windows all */
		{"\"model_type\":\"gemma2\",\"num_hidden_layers\":6,\"sliding_window_pattern\":50", 0, 3,
		 NULL},
		{"\"model_type\":\"gemma2\",\"num_hidden_layers\":1", 0, 1, NULL},
		{"\"model_type\":\"gpt_oss\",\"num_hidden_layers\":6,\"sliding_window_pattern\":3", 6, 3,
		 NULL},
		{"\"model_type\":\"mistral\",\"num_hidden_layers\":6,\"sliding_window_pattern\":2", 0, 6,
		 NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text), "{%s,\"hidden_size\":64,\"intermediate_size\":128,"
			 "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
			 "\"vocab_size\":100,\"num_experts\":4,\"num_local_experts\":4,"
			 "\"num_experts_per_tok\":2,\"moe_intermediate_size\":32,"
			 "\"shared_expert_intermediate_size\":32,\"intermediate_size_mlp\":96,"
			 "\"sliding_window\":8,\"attention_chunk_size\":8}",
			 cases[i].config);
		struct model m;
		struct tw_err err = {0};
		enum tw_result rc = load_hf_text(text, &m, &err);
		if (cases[i].msg) {
			CHECK_EQ_INT(t, rc, TW_ERR_INVALID);
			CHECK_STR_CONTAINS(t, err.msg, cases[i].msg);
			continue;
		}
		if (rc != TW_OK) {
			printf("#   case %zu: %s\n", i, err.msg);
			CHECK(t, false);
			continue;
		}
		int64_t moe = 0;
		for (int64_t l = 0; l < m.layers; l++)
			moe += model_layer_is_moe(&m, l);
		CHECK_EQ_INT(t, moe, cases[i].moe_layers);
		CHECK_EQ_INT(t, model_local_layers(&m), cases[i].local_layers);
		if (moe == 0) /* the dense layers' width: intermediate_size (_mlp for Llama 4) */
			CHECK_EQ_INT(t, m.ffn_hidden, strstr(cases[i].config, "llama4") ? 96 : 128);
		struct model_params p;
		model_count(&m, &p);
		if (moe == 0)
			CHECK_EQ_INT(t, p.experts, 0);
	}
}

/* Smaller rules of our schema and of HF configs */
static void test_schema_rules(struct test_ctx *t)
{
	static const struct {
		const char *extra, *msg;
	} cases[] = {
		{",\"router_group_topk\":2", "m.json: router_group_topk: MoE fields need experts > 0"},
		{",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":32,\"shared_expert_gate\":true",
		 "m.json: shared_expert_gate: needs shared_experts > 0"},
		{",\"experts\":8,\"expert_ffn_hidden\":32", "m.json: top_k: required with experts"},
		{",\"experts\":8,\"top_k\":2", "m.json: expert_ffn_hidden: required with experts"},
		{",\"name\":\"\"", "m.json: name: must not be empty"},
		{",\"name\":\"a\\nb\"", "m.json: name: control characters are not allowed (byte 1)"},
		{",\"name\":\"ab\\u001b[31m\"", "m.json: name: control characters are not allowed (byte 2)"},
		{",\"name\":\"a\\u009bb\"", "m.json: name: control characters are not allowed (byte 1)"},
		{",\"family\":\"x\\ty\"", "m.json: family: control characters are not allowed"},
		{",\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
		 "m.json: name: string longer than 63 bytes (got 64)"},
		/* 32 two-byte characters: 64 bytes */
		{",\"name\":\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
		 "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
		 "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"",
		 "m.json: name: string longer than 63 bytes (got 64)"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[1024];
		snprintf(text, sizeof(text), "{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,"
			 "\"vocab\":100,\"seq_len\":16%s}", cases[i].extra);
		struct model m;
		struct tw_err err = {0};
		CHECK_EQ_INT(t, parse(text, &m, &err), TW_ERR_INVALID);
		CHECK_STR_CONTAINS(t, err.msg, cases[i].msg);
	}
	/* UTF-8 names within the limit stay */
	struct model m;
	struct tw_err err = {0};
	CHECK_EQ_INT(t, parse("{\"layers\":2,\"hidden\":64,\"heads\":4,\"ffn_hidden\":8,\"vocab\":100,"
			      "\"seq_len\":16,\"name\":\"mod\\u00e8le\"}", &m, &err), TW_OK);
	CHECK_STR(t, m.name, "mod\xc3\xa8le");
	/* rope_scaling and rope_parameters: an object or null */
	static const char *const rope[] = {"\"rope_scaling\":\"yes\"", "\"rope_scaling\":1",
					   "\"rope_parameters\":[1]"};
	for (size_t i = 0; i < sizeof(rope) / sizeof(rope[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text), "{\"model_type\":\"llama\",\"num_hidden_layers\":2,"
			 "\"hidden_size\":64,\"num_attention_heads\":4,%s}", rope[i]);
		tw_err_clear(&err);
		CHECK_EQ_INT(t, load_hf_text(text, &m, &err), TW_ERR_INVALID);
		CHECK_STR_CONTAINS(t, err.msg, i < 2 ? ": rope_scaling: must be an object or null"
						     : ": rope_parameters: must be an object or null");
	}
	tw_err_clear(&err);
	CHECK_EQ_INT(t, load_hf_text("{\"model_type\":\"llama\",\"num_hidden_layers\":2,"
				     "\"hidden_size\":64,\"num_attention_heads\":4,"
				     "\"rope_scaling\":null}", &m, &err), TW_OK);
}

static void test_hf_unknown_type(struct test_ctx *t)
{
	cJSON *o = cJSON_Parse("{\"model_type\":\"t5\",\"d_model\":512}");
	struct model m;
	struct tw_err err = {0};
	/* model_from_json is our schema: model_type is an unknown key there */
	CHECK(t, model_from_json(o, "c.json", &m, &err) == TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, err.msg, "c.json: model_type: unknown key");
	cJSON_Delete(o);
}

static void test_list_presets(struct test_ctx *t)
{
	struct paths p = paths();
	char buf[4096];
	model_list_presets(p.presets, buf, sizeof(buf));
	const char *want[] = {"gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama-65b",
			      "llama3-8b", "llama3-70b", "llama3.1-405b", "mixtral-8x7b",
			      "deepseek-v3", "bloom-176b", "megatron-1t", "gpt2-124m", "tiny",
			      "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
			      "gpt-oss-20b", "gpt-oss-120b", "mistral-7b", "gemma3-27b",
			      "llama4-scout", "llama4-maverick"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_STR_CONTAINS(t, buf, want[i]);
		struct model m;
		load(t, want[i], false, &m);
	}
	CHECK(t, strstr(buf, "bloom-176b") < strstr(buf, "tiny")); /* sorted */
	char small[8];
	model_list_presets(p.presets, small, sizeof(small));
	CHECK(t, strlen(small) < sizeof(small));
	model_list_presets("/nonexistent", buf, sizeof(buf));
	CHECK(t, buf[0] == '\0');
}

int main(void)
{
	struct test_ctx t = {0};
	TEST_RUN(&t, test_llama_exact);
	TEST_RUN(&t, test_llama2_7b_breakdown);
	TEST_RUN(&t, test_hf_families_exact);
	TEST_RUN(&t, test_pythia);
	TEST_RUN(&t, test_published_within_half_percent);
	TEST_RUN(&t, test_presets_match_hf);
	TEST_RUN(&t, test_gpt2_closed_form);
	TEST_RUN(&t, test_opt_offset_and_proj);
	TEST_RUN(&t, test_moe_layers);
	TEST_RUN(&t, test_router_groups);
	TEST_RUN(&t, test_qwen2_moe_shared_gate);
	TEST_RUN(&t, test_falcon_mqa);
	TEST_RUN(&t, test_flops_megatron_relation);
	TEST_RUN(&t, test_flops_palm_relation);
	TEST_RUN(&t, test_flops_seq_and_gqa);
	TEST_RUN(&t, test_flops_mla);
	TEST_RUN(&t, test_schema_defaults);
	TEST_RUN(&t, test_schema_errors);
	TEST_RUN(&t, test_round_trip);
	TEST_RUN(&t, test_load_errors);
	TEST_RUN(&t, test_hf_newer_families);
	TEST_RUN(&t, test_sliding_window_flops);
	TEST_RUN(&t, test_hf_layer_types);
	TEST_RUN(&t, test_hf_llama4_layers);
	TEST_RUN(&t, test_hf_unknown_type);
	TEST_RUN(&t, test_dropout);
	TEST_RUN(&t, test_list_presets);
	TEST_RUN(&t, test_duplicate_keys);
	TEST_RUN(&t, test_hf_name);
	TEST_RUN(&t, test_hf_deepseek_keys);
	TEST_RUN(&t, test_mla_schema);
	TEST_RUN(&t, test_hf_tie);
	TEST_RUN(&t, test_hf_steps_and_patterns);
	TEST_RUN(&t, test_schema_rules);
	return test_done(&t);
}
