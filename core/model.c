/* model — our JSON schema, presets by name, Hugging Face config.json import, parameter
 * counts and FLOPs per token. Schema and formulas: docs/model.md. */
#include "model.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"

/* Every size in a model is at most this (documented): keeps products of two sizes in 64 bits
 * for the code downstream; the totals are checked separately. */
#define MODEL_MAX_DIM 2147483647LL

static const char *const act_names[] = {"gelu", "swiglu", "squared_relu", "relu", NULL};
static const char *const norm_names[] = {"layernorm", "rmsnorm", NULL};
static const char *const pos_names[] = {"rope", "learned", "alibi", NULL};

/* ---- counting ------------------------------------------------------------------------------ */

/* Checked arithmetic: one overflow anywhere poisons the whole count. */
struct acc {
	bool ovf;
};

static int64_t mul(struct acc *a, int64_t x, int64_t y)
{
	int64_t r;
	if (!tw_mul64(x, y, &r)) {
		a->ovf = true;
		return 0;
	}
	return r;
}

static int64_t mul3(struct acc *a, int64_t x, int64_t y, int64_t z)
{
	return mul(a, mul(a, x, y), z);
}

static int64_t add(struct acc *a, int64_t x, int64_t y)
{
	int64_t r;
	if (!tw_add64(x, y, &r)) {
		a->ovf = true;
		return 0;
	}
	return r;
}

static bool is_mla(const struct model *m)
{
	return m->kv_lora_rank > 0;
}

static bool is_gated(const struct model *m)
{
	return m->act == MODEL_ACT_SWIGLU;
}

/* Width the token embedding lives in (OPT can embed in a narrower space and project). */
static int64_t embed_dim(const struct model *m)
{
	return m->proj_dim > 0 ? m->proj_dim : m->hidden;
}

static int64_t norm_size(const struct model *m)
{
	return m->norm_bias ? 2 * m->hidden : m->hidden;
}

/* Attention weight matrices of one layer (elements), no biases: these are the GEMMs. */
static int64_t attn_matrices(const struct model *m, struct acc *a)
{
	int64_t h = m->hidden, H = m->heads;
	if (is_mla(m)) {
		int64_t qk = add(a, m->qk_nope_head_dim, m->qk_rope_head_dim);
		int64_t q = m->q_lora_rank > 0
				    ? add(a, mul(a, h, m->q_lora_rank), mul3(a, m->q_lora_rank, H, qk))
				    : mul3(a, h, H, qk);
		int64_t kv = add(a, mul(a, h, add(a, m->kv_lora_rank, m->qk_rope_head_dim)),
				 mul3(a, m->kv_lora_rank, H, add(a, m->qk_nope_head_dim, m->v_head_dim)));
		int64_t o = mul3(a, H, m->v_head_dim, h);
		return add(a, add(a, q, kv), o);
	}
	int64_t q = mul(a, H, m->head_dim), kv = mul(a, m->kv_heads, m->head_dim);
	/* q, k, v projections (h x (q + 2 kv)) and the output projection (q x h) */
	return add(a, mul(a, h, add(a, q, mul(a, 2, kv))), mul(a, q, h));
}

/* Attention parameters of one layer that are not GEMM weights: biases and MLA's norms. */
static int64_t attn_extra(const struct model *m, struct acc *a)
{
	int64_t n = 0;
	if (is_mla(m)) {
		/* q_a_layernorm and kv_a_layernorm are RMSNorms over the compressed widths */
		return add(a, m->q_lora_rank, m->kv_lora_rank);
	}
	if (m->qkv_bias)
		n = add(a, mul(a, m->heads, m->head_dim), mul3(a, 2, m->kv_heads, m->head_dim));
	if (m->out_bias)
		n = add(a, n, m->hidden);
	if (m->qk_norm) /* one RMSNorm weight over head_dim for the queries, one for the keys */
		n = add(a, n, mul(a, 2, m->head_dim));
	if (m->attn_sinks)
		n = add(a, n, m->heads);
	return n;
}

/* One MLP of width f: matrices (2 or 3 of h x f) and, with biases, f per input linear + h. */
static int64_t mlp_matrices(const struct model *m, int64_t f, struct acc *a)
{
	return mul3(a, is_gated(m) ? 3 : 2, m->hidden, f);
}

static int64_t mlp_params(const struct model *m, int64_t f, struct acc *a)
{
	int64_t n = mlp_matrices(m, f, a);
	if (m->mlp_bias && f > 0)
		n = add(a, n, add(a, mul(a, is_gated(m) ? 2 : 1, f), m->hidden));
	return n;
}

bool model_is_moe(const struct model *m)
{
	return m->experts > 0;
}

bool model_layer_is_moe(const struct model *m, int64_t layer)
{
	if (!model_is_moe(m) || layer < m->dense_layers || layer < 0 || layer >= m->layers)
		return false;
	int64_t freq = m->moe_layer_freq > 0 ? m->moe_layer_freq : 1;
	return (layer + 1) % freq == 0; /* HF Qwen2-MoE's decoder_sparse_step rule */
}

/* Layers l in [dense_layers, layers) with (l + 1) % freq == 0, counted in closed form: a model
 * may declare up to 2^31 layers and validation must not walk them. */
static int64_t moe_layer_count(const struct model *m)
{
	if (!model_is_moe(m) || m->layers <= 0)
		return 0;
	int64_t freq = m->moe_layer_freq > 0 ? m->moe_layer_freq : 1;
	int64_t lo = m->dense_layers > 0 ? m->dense_layers : 0;
	if (lo >= m->layers)
		return 0;
	return m->layers / freq - lo / freq;
}

static void count(const struct model *m, struct model_params *p, struct acc *a)
{
	memset(p, 0, sizeof(*p));
	int64_t h = m->hidden, L = m->layers, e = embed_dim(m);
	int64_t n_moe = moe_layer_count(m), n_dense = L - n_moe;

	p->attn_per_layer = add(a, attn_matrices(m, a), attn_extra(m, a));
	p->mlp_per_dense_layer = n_dense > 0 ? mlp_params(m, m->ffn_hidden, a) : 0;
	p->norms_per_layer = mul(a, m->norms_per_layer, norm_size(m));
	int64_t shared = 0, router = 0;
	if (model_is_moe(m)) {
		p->expert_params = mlp_params(m, m->expert_ffn_hidden, a);
		if (m->shared_experts > 0)
			shared = mlp_params(m, m->shared_ffn_hidden, a);
		if (m->shared_expert_gate)
			shared = add(a, shared, h);
		router = add(a, mul(a, h, m->experts), m->router_bias ? m->experts : 0);
		p->moe_per_layer = add(a, add(a, mul(a, m->experts, p->expert_params), shared), router);
	}

	p->embedding = mul(a, m->vocab, e);
	if (m->pos == MODEL_POS_LEARNED)
		p->embedding = add(a, p->embedding, mul(a, m->max_pos, h));
	if (m->proj_dim > 0) /* project_in and project_out, no bias */
		p->embedding = add(a, p->embedding, mul3(a, 2, h, m->proj_dim));
	if (m->embed_norm)
		p->embedding = add(a, p->embedding, norm_size(m));
	p->attention = mul(a, L, p->attn_per_layer);
	p->mlp = mul(a, n_dense, p->mlp_per_dense_layer);
	p->experts = mul(a, n_moe, p->moe_per_layer);
	p->norms = add(a, mul(a, L, p->norms_per_layer), m->no_final_norm ? 0 : norm_size(m));
	p->head = m->tied_embeddings ? 0 : mul(a, m->vocab, e);
	int64_t t = 0;
	t = add(a, t, p->embedding);
	t = add(a, t, p->attention);
	t = add(a, t, p->mlp);
	t = add(a, t, p->experts);
	t = add(a, t, p->norms);
	t = add(a, t, p->head);
	p->total = t;
	/* a token passes through top_k of the routed experts of each MoE layer */
	int64_t idle = model_is_moe(m) ? mul3(a, n_moe, m->experts - m->top_k, p->expert_params) : 0;
	p->active = t - idle;
}

void model_count(const struct model *m, struct model_params *out)
{
	struct acc a = {false};
	count(m, out, &a);
}

/* ---- sliding windows ------------------------------------------------------------------------ */

static bool has_local(const struct model *m)
{
	return m->sliding_window > 0 || m->attn_chunk > 0;
}

bool model_layer_local(const struct model *m, int64_t layer)
{
	if (!has_local(m))
		return false;
	return !(m->full_every > 0 && layer % m->full_every == m->full_first);
}

/* closed form, as moe_layer_count: layers l < L with l % p == r number (L - 1 - r) / p + 1 */
int64_t model_local_layers(const struct model *m)
{
	if (!has_local(m) || m->layers <= 0)
		return 0;
	int64_t p = m->full_every, r = m->full_first;
	if (p <= 0)
		return m->layers;
	return m->layers - (r < m->layers ? (m->layers - 1 - r) / p + 1 : 0);
}

/* Query i (1-based) sees min(i, w) keys; summed over s queries that is w s - w(w - 1)/2, taken
 * as its continuous form w s - w^2/2 so that a window of s tokens is plain causal, s^2 / 2. */
static double window_frac(double s, double w)
{
	if (w <= 0 || w >= s)
		return 0.5;
	return w / s * (1.0 - w / (2.0 * s));
}

double model_window_frac(int64_t seq, int64_t window)
{
	return window_frac((double)seq, (double)window);
}

/* Chunks of c: each holds c^2 / 2 pairs (the same continuous form), a last partial chunk of
 * r tokens r^2 / 2. */
static double chunk_frac(double s, double c)
{
	if (c <= 0 || c >= s)
		return 0.5;
	double q = floor(s / c), r = s - q * c;
	return (q * c * c + r * r) / (2.0 * s * s);
}

/* the share of a local layer */
static double local_frac(const struct model *m, double s)
{
	return m->attn_chunk > 0 ? chunk_frac(s, (double)m->attn_chunk)
				 : window_frac(s, (double)m->sliding_window);
}

double model_attn_frac(const struct model *m, int64_t layer, int64_t seq)
{
	return model_layer_local(m, layer) ? local_frac(m, (double)seq) : 0.5;
}

/* ---- FLOPs --------------------------------------------------------------------------------- */

void model_flops_fwd(const struct model *m, int64_t seq, struct model_flops *out)
{
	memset(out, 0, sizeof(*out));
	struct acc a = {false};
	double L = (double)m->layers, h = (double)m->hidden, s = (double)seq;
	double n_moe = (double)moe_layer_count(m), n_dense = L - n_moe;
	/* a GEMM with a k x n weight costs 2 k n FLOPs per token (multiply + add) */
	out->attn_linear = L * 2.0 * (double)attn_matrices(m, &a);
	/* Q K^T and A V: 2 s d each per head per token for the full s x s; causal halves it, a
	 * local layer keeps its share (a window's, a chunk's) */
	double dqk, dv;
	if (is_mla(m)) {
		dqk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim);
		dv = (double)m->v_head_dim;
	} else {
		dqk = dv = (double)m->head_dim;
	}
	double nloc = (double)model_local_layers(m);
	double pairs = (L - nloc) * 0.5 + nloc * local_frac(m, s);
	out->attn_core = pairs * (double)m->heads * (2.0 * s * dqk + 2.0 * s * dv);
	out->mlp = n_dense * 2.0 * (double)mlp_matrices(m, m->ffn_hidden, &a);
	if (model_is_moe(m)) {
		double per = (double)m->top_k * (double)mlp_matrices(m, m->expert_ffn_hidden, &a);
		if (m->shared_experts > 0)
			per += (double)mlp_matrices(m, m->shared_ffn_hidden, &a);
		per += h * (double)m->experts; /* router */
		out->moe = n_moe * 2.0 * per;
	}
	double e = (double)embed_dim(m);
	out->logits = 2.0 * e * (double)m->vocab;
	if (m->proj_dim > 0)
		out->logits += 2.0 * 2.0 * h * e; /* project_in after the lookup, project_out before */
	out->total = out->attn_linear + out->attn_core + out->mlp + out->moe + out->logits;
}

double model_flops_per_token(const struct model *m, int64_t seq)
{
	struct model_flops f;
	model_flops_fwd(m, seq, &f);
	return 3.0 * f.total; /* backward = 2 x forward (input and weight gradients) */
}

/* ---- validation ---------------------------------------------------------------------------- */

static enum tw_result bad(struct tw_err *err, const char *file, const char *field, const char *fmt,
			  ...) __attribute__((format(printf, 4, 5)));
static enum tw_result bad(struct tw_err *err, const char *file, const char *field, const char *fmt,
			  ...)
{
	char rule[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	return tw_errf(err, TW_ERR_INVALID, "%s: %s: %s", file, field, rule);
}

static enum tw_result in_range(struct tw_err *err, const char *file, const char *field, int64_t v,
			       int64_t lo, int64_t hi)
{
	if (v < lo || v > hi)
		return bad(err, file, field, "must be in [%lld, %lld], got %lld", (long long)lo,
			   (long long)hi, (long long)v);
	return TW_OK;
}

enum tw_result model_validate(const struct model *m, const char *file, struct tw_err *err)
{
	const int64_t D = MODEL_MAX_DIM;
	if (!file)
		file = m->name[0] ? m->name : "model";
	TW_CHECK(in_range(err, file, "layers", m->layers, 1, D));
	TW_CHECK(in_range(err, file, "hidden", m->hidden, 1, D));
	TW_CHECK(in_range(err, file, "heads", m->heads, 1, D));
	TW_CHECK(in_range(err, file, "vocab", m->vocab, 1, D));
	TW_CHECK(in_range(err, file, "seq_len", m->seq_len, 1, D));
	if ((unsigned)m->act > MODEL_ACT_RELU)
		return bad(err, file, "activation", "must be one of: gelu, swiglu, squared_relu, relu");
	if ((unsigned)m->norm > MODEL_NORM_RMSNORM)
		return bad(err, file, "norm", "must be one of: layernorm, rmsnorm");
	if ((unsigned)m->pos > MODEL_POS_ALIBI)
		return bad(err, file, "position", "must be one of: rope, learned, alibi");
	if (is_mla(m)) {
		TW_CHECK(in_range(err, file, "kv_lora_rank", m->kv_lora_rank, 1, D));
		TW_CHECK(in_range(err, file, "q_lora_rank", m->q_lora_rank, 0, D));
		TW_CHECK(in_range(err, file, "qk_nope_head_dim", m->qk_nope_head_dim, 1, D));
		TW_CHECK(in_range(err, file, "qk_rope_head_dim", m->qk_rope_head_dim, 1, D));
		TW_CHECK(in_range(err, file, "v_head_dim", m->v_head_dim, 1, D));
		if (m->qkv_bias || m->out_bias)
			return bad(err, file, "biases", "attention biases are not supported with MLA (kv_lora_rank > 0)");
		/* K and V come from the latent, one each per query head, of widths nope + rope */
		if (m->kv_heads != m->heads)
			return bad(err, file, "kv_heads",
				   "must equal heads (%lld) with MLA, got %lld",
				   (long long)m->heads, (long long)m->kv_heads);
		if (m->head_dim != m->qk_nope_head_dim + m->qk_rope_head_dim)
			return bad(err, file, "head_dim", "must be qk_nope_head_dim + "
				   "qk_rope_head_dim (%lld) with MLA, got %lld",
				   (long long)(m->qk_nope_head_dim + m->qk_rope_head_dim),
				   (long long)m->head_dim);
	} else {
		if (m->q_lora_rank || m->qk_nope_head_dim || m->qk_rope_head_dim || m->v_head_dim)
			return bad(err, file,
				   m->q_lora_rank	 ? "q_lora_rank"
				   : m->qk_nope_head_dim ? "qk_nope_head_dim"
				   : m->qk_rope_head_dim ? "qk_rope_head_dim"
							 : "v_head_dim",
				   "MLA dimensions need kv_lora_rank > 0");
	}
	TW_CHECK(in_range(err, file, "kv_heads", m->kv_heads, 1, m->heads));
	if (m->heads % m->kv_heads != 0)
		return bad(err, file, "kv_heads", "heads (%lld) must be a multiple of kv_heads (%lld)",
			   (long long)m->heads, (long long)m->kv_heads);
	TW_CHECK(in_range(err, file, "head_dim", m->head_dim, 1, D));
	if (m->pos == MODEL_POS_LEARNED)
		TW_CHECK(in_range(err, file, "max_position", m->max_pos, 1, D));
	else if (m->max_pos != 0)
		return bad(err, file, "max_position", "only a learned position table has rows");
	TW_CHECK(in_range(err, file, "norms_per_layer", m->norms_per_layer, 0, 4));
	TW_CHECK(in_range(err, file, "sliding_window", m->sliding_window, 0, D));
	TW_CHECK(in_range(err, file, "attention_chunk", m->attn_chunk, 0, D));
	if (m->sliding_window > 0 && m->attn_chunk > 0)
		return bad(err, file, "attention_chunk", "a layer is local by a window or by chunks, not both");
	TW_CHECK(in_range(err, file, "full_attention_every", m->full_every, 0, m->layers));
	if ((m->full_every > 0 || m->full_first > 0) && !has_local(m))
		return bad(err, file, "full_attention_every", "needs sliding_window or attention_chunk");
	if (m->full_every == 1)
		return bad(err, file, "full_attention_every",
			   "1 makes every layer full attention; leave the local attention out instead");
	if (m->full_every > 0)
		TW_CHECK(in_range(err, file, "full_attention_first", m->full_first, 0, m->full_every - 1));
	else if (m->full_first != 0)
		return bad(err, file, "full_attention_first", "needs full_attention_every");
	TW_CHECK(in_range(err, file, "proj_dim", m->proj_dim, 0, D));
	if (model_is_moe(m)) {
		TW_CHECK(in_range(err, file, "experts", m->experts, 1, D));
		/* 0 is what an absent key leaves */
		if (m->top_k == 0)
			return bad(err, file, "top_k", "required with experts");
		TW_CHECK(in_range(err, file, "top_k", m->top_k, 1, m->experts));
		if (m->expert_ffn_hidden == 0)
			return bad(err, file, "expert_ffn_hidden", "required with experts");
		TW_CHECK(in_range(err, file, "expert_ffn_hidden", m->expert_ffn_hidden, 1, D));
		TW_CHECK(in_range(err, file, "shared_experts", m->shared_experts, 0, D));
		if (m->shared_experts > 0)
			TW_CHECK(in_range(err, file, "shared_ffn_hidden", m->shared_ffn_hidden, 1, D));
		else if (m->shared_ffn_hidden != 0)
			return bad(err, file, "shared_ffn_hidden", "needs shared_experts > 0");
		else if (m->shared_expert_gate) /* it gates the shared expert's output */
			return bad(err, file, "shared_expert_gate", "needs shared_experts > 0");
		TW_CHECK(in_range(err, file, "dense_layers", m->dense_layers, 0, m->layers - 1));
		/* 0 reads as 1, for models built in code */
		TW_CHECK(in_range(err, file, "moe_layer_freq", m->moe_layer_freq, 0, m->layers));
		if (moe_layer_count(m) == 0)
			return bad(err, file, "moe_layer_freq", "no layer is an MoE layer");
		if (m->router_groups > 0) {
			TW_CHECK(in_range(err, file, "router_groups", m->router_groups, 1, m->experts));
			if (m->experts % m->router_groups)
				return bad(err, file, "router_groups",
					   "%lld does not divide experts (%lld)",
					   (long long)m->router_groups, (long long)m->experts);
			TW_CHECK(in_range(err, file, "router_group_topk", m->router_group_topk, 1,
					  m->router_groups));
			if (m->top_k > m->router_group_topk * (m->experts / m->router_groups))
				return bad(err, file, "router_group_topk",
					   "%lld groups of %lld experts hold fewer than top_k (%lld)",
					   (long long)m->router_group_topk,
					   (long long)(m->experts / m->router_groups), (long long)m->top_k);
		} else if (m->router_group_topk != 0) {
			return bad(err, file, "router_group_topk", "needs router_groups");
		}
	} else {
		const char *f = m->experts < 0		 ? "experts"
				: m->top_k		 ? "top_k"
				: m->expert_ffn_hidden	 ? "expert_ffn_hidden"
				: m->shared_experts	 ? "shared_experts"
				: m->shared_ffn_hidden	 ? "shared_ffn_hidden"
				: m->dense_layers	 ? "dense_layers"
				: m->router_bias	 ? "router_bias"
				: m->router_groups	 ? "router_groups"
				: m->router_group_topk	 ? "router_group_topk"
				: m->shared_expert_gate ? "shared_expert_gate"
							 : NULL;
		if (f)
			return bad(err, file, f, "MoE fields need experts > 0");
	}
	if (moe_layer_count(m) < m->layers)
		TW_CHECK(in_range(err, file, "ffn_hidden", m->ffn_hidden, 1, D));
	else
		TW_CHECK(in_range(err, file, "ffn_hidden", m->ffn_hidden, 0, D));
	struct model_params p;
	struct acc a = {false};
	count(m, &p, &a);
	if (a.ovf)
		return bad(err, file, "(model)", "the parameter count overflows 64 bits");
	return TW_OK;
}

/* ---- reading model files: shared checks ------------------------------------------------------ */

/* Length of the control character (C0, DEL, or C1 in UTF-8) at s, else 0: a name is printed on
 * the terminal, where these move the cursor or recolour the screen. */
static size_t control_at(const char *s)
{
	unsigned char b = (unsigned char)s[0];
	if (b < 0x20 || b == 0x7f)
		return 1;
	if (b == 0xc2 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f)
		return 2;
	return 0;
}

/* n bytes of src into out (len bytes with the NUL): cut at a UTF-8 character boundary, control
 * characters shown as '?'. For names twin derives (from a path), which are not refused. */
static void copy_name(char *out, size_t len, const char *src, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n && src[i];) {
		size_t cl = control_at(src + i);
		if (cl > n - i)
			cl = n - i;
		size_t w = cl ? cl : 1;
		if (!cl) /* the whole of a multibyte character, or none of it */
			while (i + w < n && ((unsigned char)src[i + w] & 0xc0) == 0x80)
				w++;
		size_t put = cl ? 1 : w;
		if (o + put >= len)
			break;
		if (cl)
			out[o] = '?';
		else
			memcpy(out + o, src + i, w);
		o += put;
		i += w;
	}
	out[o] = '\0';
}

/* What a string field of our schema may hold: anything (source), no control characters
 * (printed: family), and not empty either (name). */
enum text_rule { TEXT_ANY, TEXT_PRINTED, TEXT_NAME };

/* A string field of our schema into out (len bytes with the NUL); null is absent. */
static enum tw_result get_text(const struct json_ctx *c, const cJSON *obj, const char *key,
			       char *out, size_t len, enum text_rule rule, bool *present)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (present)
		*present = false;
	if (!v || cJSON_IsNull(v))
		return TW_OK;
	if (!cJSON_IsString(v))
		return json_fail(c, key, "must be a string");
	const char *s = v->valuestring;
	size_t n = strlen(s);
	if (n >= len) /* the buffer's limit: bytes, which is fewer characters outside ASCII */
		return json_fail(c, key, "string longer than %zu bytes (got %zu)", len - 1, n);
	if (rule == TEXT_NAME && n == 0)
		return json_fail(c, key, "must not be empty");
	for (size_t i = 0; rule != TEXT_ANY && i < n; i++)
		if (control_at(s + i))
			return json_fail(c, key, "control characters are not allowed (byte %zu)",
					 i);
	memcpy(out, s, n + 1);
	if (present)
		*present = true;
	return TW_OK;
}

/* ---- our schema ---------------------------------------------------------------------------- */

static const char *const schema_keys[] = {
	"name", "family", "source", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden",
	"vocab", "seq_len", "max_position", "activation", "norm", "position", "tied_embeddings",
	"biases", "qkv_bias", "out_bias", "mlp_bias", "norm_bias", "parallel_attn",
	"norms_per_layer", "embed_norm", "proj_dim", "final_norm", "experts", "top_k",
	"expert_ffn_hidden", "shared_experts", "shared_ffn_hidden", "dense_layers",
	"moe_layer_freq", "router_bias", "router_groups", "router_group_topk", "shared_expert_gate",
	"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
	"hidden_dropout", "attention_dropout", "sliding_window", "full_attention_every",
	"full_attention_first", "attention_chunk", "qk_norm", "attention_sinks", NULL};

/* present and not null (null reads as not given) */
static bool field_given(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return v && !cJSON_IsNull(v);
}

static enum tw_result need(const struct json_ctx *c, const cJSON *obj, const char *key,
			   int64_t *out)
{
	bool present = false;
	TW_CHECK(json_get_int(c, obj, key, 1, MODEL_MAX_DIM, out, &present));
	if (!present)
		return json_fail(c, key, "required field is missing");
	return TW_OK;
}

static enum tw_result opt_int(const struct json_ctx *c, const cJSON *obj, const char *key,
			      int64_t min, int64_t *out)
{
	return json_get_int(c, obj, key, min, MODEL_MAX_DIM, out, NULL);
}

/* "x.json" or "dir/x.json" -> "x"; a HF "dir/config.json" -> "dir". */
static void name_from_path(const char *path, char *out, size_t len)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strlen(base);
	if (!strcmp(base, "config.json") && base != path) {
		const char *end = base - 1, *start = end;
		while (start > path && start[-1] != '/')
			start--;
		n = (size_t)(end - start);
		base = start;
	} else if (n > 5 && !strcmp(base + n - 5, ".json")) {
		n -= 5;
	}
	copy_name(out, len, base, n);
}

enum tw_result model_from_json(const struct cJSON *obj, const char *file, struct model *out,
			       struct tw_err *err)
{
	struct json_ctx c = {.file = file ? file : "model", .err = err};
	struct model m;
	memset(&m, 0, sizeof(m));
	if (!cJSON_IsObject(obj))
		return json_fail(&c, NULL, "must be a JSON object");
	TW_CHECK(json_check_dups(&c, obj));
	TW_CHECK(json_check_keys(&c, obj, schema_keys));
	bool present;
	TW_CHECK(get_text(&c, obj, "name", m.name, sizeof(m.name), TEXT_NAME, &present));
	if (!present && file)
		name_from_path(file, m.name, sizeof(m.name));
	TW_CHECK(get_text(&c, obj, "family", m.family, sizeof(m.family), TEXT_PRINTED, &present));
	if (!present)
		snprintf(m.family, sizeof(m.family), "custom");
	char source[512];
	TW_CHECK(get_text(&c, obj, "source", source, sizeof(source), TEXT_ANY, NULL));

	TW_CHECK(need(&c, obj, "layers", &m.layers));
	TW_CHECK(need(&c, obj, "hidden", &m.hidden));
	TW_CHECK(need(&c, obj, "heads", &m.heads));
	TW_CHECK(need(&c, obj, "vocab", &m.vocab));
	TW_CHECK(need(&c, obj, "seq_len", &m.seq_len));

	TW_CHECK(opt_int(&c, obj, "q_lora_rank", 0, &m.q_lora_rank));
	TW_CHECK(opt_int(&c, obj, "kv_lora_rank", 1, &m.kv_lora_rank));
	TW_CHECK(opt_int(&c, obj, "qk_nope_head_dim", 1, &m.qk_nope_head_dim));
	TW_CHECK(opt_int(&c, obj, "qk_rope_head_dim", 1, &m.qk_rope_head_dim));
	TW_CHECK(opt_int(&c, obj, "v_head_dim", 1, &m.v_head_dim));
	/* MLA derives both: a K and a V per query head from the latent, of the nope + rope and
	 * v widths; another value would count attention that is not there */
	if (is_mla(&m)) {
		if (field_given(obj, "kv_heads"))
			return json_fail(&c, "kv_heads", "not allowed with MLA (kv_lora_rank > 0): "
					 "every query head has its own K and V");
		if (field_given(obj, "head_dim"))
			return json_fail(&c, "head_dim", "not allowed with MLA (kv_lora_rank > 0): "
					 "the widths are qk_nope_head_dim + qk_rope_head_dim "
					 "and v_head_dim");
	}
	m.kv_heads = m.heads;
	TW_CHECK(opt_int(&c, obj, "kv_heads", 1, &m.kv_heads));
	if (m.kv_heads > m.heads)
		return json_fail(&c, "kv_heads", "must be <= heads (%lld), got %lld", (long long)m.heads,
				 (long long)m.kv_heads);
	if (m.heads % m.kv_heads != 0)
		return json_fail(&c, "kv_heads", "heads (%lld) must be a multiple of kv_heads (%lld)",
				 (long long)m.heads, (long long)m.kv_heads);
	TW_CHECK(opt_int(&c, obj, "head_dim", 1, &m.head_dim));
	TW_CHECK(opt_int(&c, obj, "ffn_hidden", 1, &m.ffn_hidden));

	int v = MODEL_ACT_SWIGLU;
	TW_CHECK(json_get_enum(&c, obj, "activation", act_names, &v, NULL));
	m.act = (enum model_act)v;
	v = MODEL_NORM_RMSNORM;
	TW_CHECK(json_get_enum(&c, obj, "norm", norm_names, &v, NULL));
	m.norm = (enum model_norm)v;
	v = MODEL_POS_ROPE;
	TW_CHECK(json_get_enum(&c, obj, "position", pos_names, &v, NULL));
	m.pos = (enum model_pos)v;
	if (m.pos == MODEL_POS_LEARNED) {
		m.max_pos = m.seq_len;
		TW_CHECK(opt_int(&c, obj, "max_position", 1, &m.max_pos));
	} else if (cJSON_GetObjectItemCaseSensitive(obj, "max_position")) {
		return json_fail(&c, "max_position", "only allowed with \"position\": \"learned\"");
	}

	TW_CHECK(json_get_bool(&c, obj, "tied_embeddings", &m.tied_embeddings, NULL));
	bool biases = false;
	TW_CHECK(json_get_bool(&c, obj, "biases", &biases, NULL));
	m.qkv_bias = m.out_bias = m.mlp_bias = biases;
	TW_CHECK(json_get_bool(&c, obj, "qkv_bias", &m.qkv_bias, NULL));
	TW_CHECK(json_get_bool(&c, obj, "out_bias", &m.out_bias, NULL));
	TW_CHECK(json_get_bool(&c, obj, "mlp_bias", &m.mlp_bias, NULL));
	m.norm_bias = m.norm == MODEL_NORM_LAYERNORM;
	TW_CHECK(json_get_bool(&c, obj, "norm_bias", &m.norm_bias, NULL));
	TW_CHECK(json_get_bool(&c, obj, "parallel_attn", &m.parallel_attn, NULL));
	int64_t npl = 2;
	TW_CHECK(json_get_int(&c, obj, "norms_per_layer", 0, 4, &npl, NULL));
	m.norms_per_layer = (int)npl;
	TW_CHECK(json_get_bool(&c, obj, "embed_norm", &m.embed_norm, NULL));
	TW_CHECK(opt_int(&c, obj, "proj_dim", 1, &m.proj_dim));
	if (m.proj_dim == m.hidden)
		m.proj_dim = 0;
	bool final_norm = true;
	TW_CHECK(json_get_bool(&c, obj, "final_norm", &final_norm, NULL));
	m.no_final_norm = !final_norm;
	bool hd = false, ad = false;
	TW_CHECK(json_get_num(&c, obj, "hidden_dropout", 0, 1, &m.hidden_dropout, &hd));
	TW_CHECK(json_get_num(&c, obj, "attention_dropout", 0, 1, &m.attention_dropout, &ad));
	m.dropout_given = hd || ad;

	TW_CHECK(opt_int(&c, obj, "sliding_window", 1, &m.sliding_window));
	TW_CHECK(opt_int(&c, obj, "attention_chunk", 1, &m.attn_chunk));
	TW_CHECK(opt_int(&c, obj, "full_attention_every", 2, &m.full_every));
	/* the last layer of each run by default (Gemma 3, GPT-OSS) */
	m.full_first = m.full_every > 0 ? m.full_every - 1 : 0;
	TW_CHECK(json_get_int(&c, obj, "full_attention_first", 0, MODEL_MAX_DIM, &m.full_first, &present));
	if (present && m.full_every == 0)
		return json_fail(&c, "full_attention_first", "needs full_attention_every");
	TW_CHECK(json_get_bool(&c, obj, "qk_norm", &m.qk_norm, NULL));
	TW_CHECK(json_get_bool(&c, obj, "attention_sinks", &m.attn_sinks, NULL));

	TW_CHECK(opt_int(&c, obj, "experts", 1, &m.experts));
	TW_CHECK(opt_int(&c, obj, "top_k", 1, &m.top_k));
	TW_CHECK(opt_int(&c, obj, "expert_ffn_hidden", 1, &m.expert_ffn_hidden));
	TW_CHECK(opt_int(&c, obj, "shared_experts", 0, &m.shared_experts));
	TW_CHECK(opt_int(&c, obj, "shared_ffn_hidden", 1, &m.shared_ffn_hidden));
	TW_CHECK(opt_int(&c, obj, "dense_layers", 0, &m.dense_layers));
	m.moe_layer_freq = 1;
	TW_CHECK(json_get_int(&c, obj, "moe_layer_freq", 1, MODEL_MAX_DIM, &m.moe_layer_freq,
			      &present));
	if (present && m.experts == 0)
		return json_fail(&c, "moe_layer_freq", "MoE fields need experts > 0");
	TW_CHECK(json_get_bool(&c, obj, "router_bias", &m.router_bias, NULL));
	TW_CHECK(opt_int(&c, obj, "router_groups", 1, &m.router_groups));
	TW_CHECK(opt_int(&c, obj, "router_group_topk", 1, &m.router_group_topk));
	TW_CHECK(json_get_bool(&c, obj, "shared_expert_gate", &m.shared_expert_gate, NULL));
	if (m.experts > 0 && m.shared_experts > 0 && m.shared_ffn_hidden == 0)
		m.shared_ffn_hidden = m.shared_experts * m.expert_ffn_hidden; /* DeepSeek's rule */
	if (m.experts == 0)
		m.moe_layer_freq = 0;

	if (m.head_dim == 0) {
		if (is_mla(&m)) {
			m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
		} else if (m.hidden % m.heads != 0) {
			return json_fail(&c, "hidden",
					 "hidden (%lld) must be a multiple of heads (%lld) when head_dim is not given",
					 (long long)m.hidden, (long long)m.heads);
		} else {
			m.head_dim = m.hidden / m.heads;
		}
	}
	bool all_moe = m.experts > 0 && m.dense_layers == 0 && m.moe_layer_freq == 1;
	if (!all_moe && m.ffn_hidden == 0)
		return json_fail(&c, "ffn_hidden", "required field is missing%s",
				 m.experts > 0 ? " (some layers are dense)" : "");
	TW_CHECK(model_validate(&m, c.file, err));
	memcpy(out, &m, sizeof(m)); /* padding too: stored models compare bytewise */
	return TW_OK;
}

struct cJSON *model_to_json(const struct model *m)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", m->name);
	cJSON_AddStringToObject(o, "family", m->family);
#define NUM(key, v) cJSON_AddNumberToObject(o, key, (double)(v))
#define BOOL(key, v) cJSON_AddBoolToObject(o, key, (v) ? 1 : 0)
	NUM("layers", m->layers);
	NUM("hidden", m->hidden);
	NUM("heads", m->heads);
	if (!is_mla(m)) { /* MLA derives them, and a model file may not give them */
		NUM("kv_heads", m->kv_heads);
		NUM("head_dim", m->head_dim);
	}
	if (m->ffn_hidden)
		NUM("ffn_hidden", m->ffn_hidden);
	NUM("vocab", m->vocab);
	NUM("seq_len", m->seq_len);
	if ((unsigned)m->act <= MODEL_ACT_RELU)
		cJSON_AddStringToObject(o, "activation", act_names[m->act]);
	if ((unsigned)m->norm <= MODEL_NORM_RMSNORM)
		cJSON_AddStringToObject(o, "norm", norm_names[m->norm]);
	if ((unsigned)m->pos <= MODEL_POS_ALIBI)
		cJSON_AddStringToObject(o, "position", pos_names[m->pos]);
	if (m->pos == MODEL_POS_LEARNED)
		NUM("max_position", m->max_pos);
	BOOL("tied_embeddings", m->tied_embeddings);
	BOOL("qkv_bias", m->qkv_bias);
	BOOL("out_bias", m->out_bias);
	BOOL("mlp_bias", m->mlp_bias);
	BOOL("norm_bias", m->norm_bias);
	BOOL("parallel_attn", m->parallel_attn);
	NUM("norms_per_layer", m->norms_per_layer);
	BOOL("embed_norm", m->embed_norm);
	if (m->proj_dim)
		NUM("proj_dim", m->proj_dim);
	BOOL("final_norm", !m->no_final_norm);
	if (m->sliding_window > 0 || m->attn_chunk > 0) {
		if (m->sliding_window > 0)
			NUM("sliding_window", m->sliding_window);
		else
			NUM("attention_chunk", m->attn_chunk);
		if (m->full_every > 0) {
			NUM("full_attention_every", m->full_every);
			NUM("full_attention_first", m->full_first);
		}
	}
	if (m->qk_norm)
		BOOL("qk_norm", true);
	if (m->attn_sinks)
		BOOL("attention_sinks", true);
	if (m->dropout_given) {
		NUM("hidden_dropout", m->hidden_dropout);
		NUM("attention_dropout", m->attention_dropout);
	}
	if (model_is_moe(m)) {
		NUM("experts", m->experts);
		NUM("top_k", m->top_k);
		NUM("expert_ffn_hidden", m->expert_ffn_hidden);
		NUM("shared_experts", m->shared_experts);
		if (m->shared_ffn_hidden)
			NUM("shared_ffn_hidden", m->shared_ffn_hidden);
		NUM("dense_layers", m->dense_layers);
		NUM("moe_layer_freq", m->moe_layer_freq);
		BOOL("router_bias", m->router_bias);
		if (m->router_groups > 0) {
			NUM("router_groups", m->router_groups);
			NUM("router_group_topk", m->router_group_topk);
		}
		BOOL("shared_expert_gate", m->shared_expert_gate);
	}
	if (is_mla(m)) {
		NUM("q_lora_rank", m->q_lora_rank);
		NUM("kv_lora_rank", m->kv_lora_rank);
		NUM("qk_nope_head_dim", m->qk_nope_head_dim);
		NUM("qk_rope_head_dim", m->qk_rope_head_dim);
		NUM("v_head_dim", m->v_head_dim);
	}
#undef NUM
#undef BOOL
	return o;
}

/* ---- Hugging Face config.json -------------------------------------------------------------- */

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The first of names that is present (null counts as absent); else dflt; dflt < 0 = required. */
static enum tw_result hf_int(const struct json_ctx *c, const cJSON *o, const char *const *names,
			     int64_t dflt, int64_t min, int64_t *out)
{
	for (int i = 0; names[i]; i++) {
		bool present = false;
		TW_CHECK(json_get_int(c, o, names[i], min, MODEL_MAX_DIM, out, &present));
		if (present)
			return TW_OK;
	}
	if (dflt < 0)
		return json_fail(c, names[0], "required field is missing");
	*out = dflt;
	return TW_OK;
}

static enum tw_result hf_bool(const struct json_ctx *c, const cJSON *o, const char *key, bool dflt,
			      bool *out)
{
	*out = dflt;
	return json_get_bool(c, o, key, out, NULL);
}

/* A probability: the first of names that is present (none: no names), else dflt. */
static enum tw_result hf_prob(const struct json_ctx *c, const cJSON *o, const char *const *names,
			      double dflt, double *out)
{
	*out = dflt;
	bool present = false;
	for (int i = 0; names && names[i] && !present; i++)
		TW_CHECK(json_get_num(c, o, names[i], 0, 1, out, &present));
	return TW_OK;
}

/* The dropout an HF config sets, with its configuration class's defaults. */
static enum tw_result hf_dropout(const struct json_ctx *c, const cJSON *o,
				 const char *const *hidden, double hdflt, const char *const *attn,
				 double adflt, struct model *m)
{
	TW_CHECK(hf_prob(c, o, hidden, hdflt, &m->hidden_dropout));
	TW_CHECK(hf_prob(c, o, attn, adflt, &m->attention_dropout));
	m->dropout_given = true;
	return TW_OK;
}

/* Defaults of the Llama-style families (transformers configuration classes). */
struct hf_llama_defaults {
	int64_t vocab, hidden, inter, layers, heads, kv, max_pos;
	bool qkv_bias;
	int64_t head_dim; /* the class's own default; 0: hidden / heads */
};

static enum tw_result hf_llama_like(const struct json_ctx *c, const cJSON *o,
				    const struct hf_llama_defaults *d, struct model *m)
{
	TW_CHECK(hf_int(c, o, NAMES("vocab_size"), d->vocab, 1, &m->vocab));
	TW_CHECK(hf_int(c, o, NAMES("hidden_size"), d->hidden, 1, &m->hidden));
	TW_CHECK(hf_int(c, o, NAMES("intermediate_size"), d->inter, 1, &m->ffn_hidden));
	TW_CHECK(hf_int(c, o, NAMES("num_hidden_layers"), d->layers, 1, &m->layers));
	TW_CHECK(hf_int(c, o, NAMES("num_attention_heads"), d->heads, 1, &m->heads));
	TW_CHECK(hf_int(c, o, NAMES("num_key_value_heads"), d->kv ? d->kv : m->heads, 1,
			&m->kv_heads));
	TW_CHECK(hf_int(c, o, NAMES("head_dim"), d->head_dim, 1, &m->head_dim));
	TW_CHECK(hf_int(c, o, NAMES("max_position_embeddings"), d->max_pos, 1, &m->seq_len));
	/* a context stretched by RoPE scaling (YaRN, Llama 3.1) was trained at the original length */
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
	const cJSON *rp = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");
	/* transformers reads keys out of either: another type is a broken config */
	if (field_given(o, "rope_scaling") && !cJSON_IsObject(rs))
		return json_fail(c, "rope_scaling", "must be an object or null");
	if (field_given(o, "rope_parameters") && !cJSON_IsObject(rp))
		return json_fail(c, "rope_parameters", "must be an object or null");
	if (!cJSON_IsObject(rs))
		rs = rp;
	if (cJSON_IsObject(rs)) {
		struct json_ctx rc = {.file = c->file, .prefix = rs->string, .err = c->err};
		TW_CHECK(json_get_int(&rc, rs, "original_max_position_embeddings", 1, MODEL_MAX_DIM,
				      &m->seq_len, NULL));
	}
	TW_CHECK(hf_dropout(c, o, NULL, 0, NAMES("attention_dropout"), 0, m));
	TW_CHECK(hf_bool(c, o, "tie_word_embeddings", false, &m->tied_embeddings));
	bool attn_bias = false;
	TW_CHECK(hf_bool(c, o, "attention_bias", false, &attn_bias));
	m->qkv_bias = attn_bias || d->qkv_bias;
	m->out_bias = attn_bias;
	TW_CHECK(hf_bool(c, o, "mlp_bias", false, &m->mlp_bias));
	/* the gated MLP (gate, up, down) is the architecture; hidden_act only names its
	 * nonlinearity, which changes neither parameters nor FLOPs */
	m->act = MODEL_ACT_SWIGLU;
	m->norm = MODEL_NORM_RMSNORM;
	m->pos = MODEL_POS_ROPE;
	m->norms_per_layer = 2;
	return TW_OK;
}

/* Qwen's mlp_only_layers: dense layers at arbitrary positions, which twin does not model */
static enum tw_result hf_no_mlp_only_layers(const struct json_ctx *c, const cJSON *o)
{
	const cJSON *only = cJSON_GetObjectItemCaseSensitive(o, "mlp_only_layers");
	if (only && !cJSON_IsNull(only) && (!cJSON_IsArray(only) || cJSON_GetArraySize(only) > 0))
		return json_fail(c, "mlp_only_layers", "must be an empty list (dense layers at "
						     "arbitrary positions are not supported)");
	return TW_OK;
}

/* layer_types' item: 1 full attention, 0 local, -1 neither */
static int full_of_type(const cJSON *it)
{
	const char *t = cJSON_GetStringValue(it);
	return !t ? -1 : !strcmp(t, "full_attention") ? 1 : !strcmp(t, "sliding_attention") ? 0 : -1;
}

/* no_rope_layers' item (Llama 4): 0 a NoPE layer with full attention, 1 a chunked RoPE layer */
static int full_of_rope_flag(const cJSON *it)
{
	return !cJSON_IsNumber(it) ? -1 : it->valuedouble == 0 ? 1 : it->valuedouble == 1 ? 0 : -1;
}

/* Which layers are local, from a per-layer list (HF's layer_types, Llama 4's no_rope_layers):
 * all, none, or full exactly where l % p == r. Only one period can fit: the gap between the
 * first two full layers (one full layer alone: the smallest p that puts no other layer on its
 * phase), checked in one pass. */
static enum tw_result hf_layer_list(const struct json_ctx *c, const char *key, const cJSON *lt,
				    int (*full_of)(const cJSON *), const char *want, struct model *m)
{
	int n = cJSON_GetArraySize(lt);
	if (!cJSON_IsArray(lt) || n != m->layers)
		return json_fail(c, key, "must be a list of num_hidden_layers (%lld) items",
				 (long long)m->layers);
	int first = -1, second = -1, fulls = 0, i = 0;
	for (const cJSON *it = lt->child; it; it = it->next, i++) {
		int full = full_of(it);
		if (full < 0)
			return json_fail(c, key, "item %d: must be %s", i, want);
		if (full && fulls++ == 0)
			first = i;
		else if (full && fulls == 2)
			second = i;
	}
	if (fulls == n) { /* no layer is local */
		m->sliding_window = m->attn_chunk = 0;
		return TW_OK;
	}
	if (fulls == 0)
		return TW_OK; /* every layer local */
	int p = second >= 0 ? second - first : (first + 1 > n - first ? first + 1 : n - first);
	bool ok = p >= 2 && first < p;
	i = 0;
	for (const cJSON *it = lt->child; it && ok; it = it->next, i++)
		ok = full_of(it) == (i % p == first);
	if (!ok)
		return json_fail(c, key, "full attention must recur every p-th layer "
					 "(twin models a periodic pattern)");
	m->full_every = p;
	m->full_first = first;
	return TW_OK;
}

/* Full attention on the last layer of each run of p (layer l global when (l + 1) % p == 0, as
 * transformers builds Gemma's and GPT-OSS's layer_types and Llama 4's NoPE layers): p = 1 makes
 * every layer global, p past the last layer none: legal in transformers, so not refused. */
static void hf_every_pth_full(int64_t p, struct model *m)
{
	if (p == 1)
		m->sliding_window = m->attn_chunk = 0;
	else if (p > m->layers)
		m->full_every = m->full_first = 0; /* every layer local */
	else
		m->full_every = p, m->full_first = p - 1;
}

/* Sliding-window attention: sliding_window (null: none; dflt when absent) on the layers
 * layer_types lists, else, where the family gates it, when use_sliding_window (Qwen: on the
 * layers from max_window_layers on), else every period-th layer global (0: none global): the
 * family's rule, or Gemma 3's sliding_window_pattern where pattern_key (no other family reads
 * that key: Gemma 2 and GPT-OSS alternate, Mistral windows every layer). */
static enum tw_result hf_window(const struct json_ctx *c, const cJSON *o, int64_t dflt,
				bool gated, int64_t period, bool pattern_key, struct model *m)
{
	bool use = true;
	if (gated)
		TW_CHECK(hf_bool(c, o, "use_sliding_window", false, &use));
	const cJSON *sw = cJSON_GetObjectItemCaseSensitive(o, "sliding_window");
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(o, "layer_types");
	bool listed = lt && !cJSON_IsNull(lt); /* a saved list decides, as transformers reads it */
	if ((!use && !listed) || (sw && cJSON_IsNull(sw)))
		return TW_OK;
	TW_CHECK(hf_int(c, o, NAMES("sliding_window"), dflt, 0, &m->sliding_window));
	if (m->sliding_window == 0)
		return TW_OK;
	if (listed)
		return hf_layer_list(c, "layer_types", lt, full_of_type,
				     "\"sliding_attention\" or \"full_attention\"", m);
	if (gated) {
		int64_t from = 0;
		TW_CHECK(hf_int(c, o, NAMES("max_window_layers"), 28, 0, &from));
		if (from >= m->layers)
			m->sliding_window = 0;
		else if (from > 0)
			return json_fail(c, "max_window_layers", "windows on the layers from %lld on only: "
				"twin models all layers or a periodic pattern", (long long)from);
		return TW_OK;
	}
	int64_t p = period;
	if (pattern_key)
		TW_CHECK(hf_int(c, o, NAMES("sliding_window_pattern"), p, 1, &p));
	if (p > 0)
		hf_every_pth_full(p, m);
	return TW_OK;
}

/* A MoE config whose layers transformers builds all dense (a step or a dense prefix past the
 * last layer, which it accepts): twin holds that dense model. */
static void hf_all_dense(struct model *m)
{
	m->experts = m->top_k = m->expert_ffn_hidden = 0;
	m->shared_experts = m->shared_ffn_hidden = m->dense_layers = m->moe_layer_freq = 0;
	m->router_groups = m->router_group_topk = 0;
	m->router_bias = m->shared_expert_gate = false;
}

/* Every step-th layer MoE, layer l when (l + 1) % step == 0 (Qwen-MoE's decoder_sparse_step,
 * Llama 4's interleave_moe_layer_step); a step past the last layer leaves every layer dense. */
static enum tw_result hf_moe_step(const struct json_ctx *c, const cJSON *o, const char *key,
				  struct model *m)
{
	TW_CHECK(hf_int(c, o, NAMES(key), 1, 1, &m->moe_layer_freq));
	if (m->moe_layer_freq > m->layers)
		hf_all_dense(m);
	return TW_OK;
}

static enum tw_result hf_llama(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {32000, 4096, 11008, 32, 32, 0, 2048, false};
	return hf_llama_like(c, o, &d, m);
}

static enum tw_result hf_mistral(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {32000, 4096, 14336, 32, 32, 8, 131072, false};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	return hf_window(c, o, 4096, false, 0, false, m); /* MistralConfig's window: 4096 */
}

static enum tw_result hf_qwen2(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	/* q/k/v always carry a bias in Qwen2's modelling code; o_proj has none */
	static const struct hf_llama_defaults d = {151936, 4096, 22016, 32, 32, 0, 32768, true};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	return hf_window(c, o, 4096, true, 0, false, m);
}

/* Phi-3 and Phi-4 (fused qkv and gate_up projections, which count as llama's); a window on
 * every layer when sliding_window is set (Phi-3-mini-4k: 2047) */
static enum tw_result hf_phi3(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {32064, 3072, 8192, 32, 32, 0, 4096, false};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	return hf_window(c, o, 0, false, 0, false, m);
}

/* Qwen3: Qwen2 without the q/k/v bias, with an RMSNorm over each query and key head and a
 * head_dim of its own (the configuration class's default: 128) */
static enum tw_result hf_qwen3(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {151936, 4096, 22016, 32, 32, 0, 32768, false, 128};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	m->qk_norm = true;
	return hf_window(c, o, 4096, true, 0, false, m);
}

/* Qwen3-MoE: Qwen3's attention (head_dim from hidden / heads unless given), Qwen2-MoE's
 * sparse layers without a shared expert */
static enum tw_result hf_qwen3_moe(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {151936, 2048, 6144, 24, 32, 4, 32768, false};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	m->qk_norm = true;
	TW_CHECK(hf_int(c, o, NAMES("num_experts"), 128, 1, &m->experts));
	TW_CHECK(hf_int(c, o, NAMES("num_experts_per_tok"), 8, 1, &m->top_k));
	TW_CHECK(hf_int(c, o, NAMES("moe_intermediate_size"), 768, 1, &m->expert_ffn_hidden));
	TW_CHECK(hf_no_mlp_only_layers(c, o));
	TW_CHECK(hf_moe_step(c, o, "decoder_sparse_step", m));
	return hf_window(c, o, 4096, true, 0, false, m);
}

/* GPT-OSS: every layer MoE (intermediate_size is an expert's width), biases on attention and
 * on the experts and router, a sink logit per head, windows of 128 on alternate layers */
static enum tw_result hf_gpt_oss(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {201088, 2880, 2880, 36, 64, 8, 131072, false, 64};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	bool ab = true;
	TW_CHECK(hf_bool(c, o, "attention_bias", true, &ab));
	m->qkv_bias = m->out_bias = ab;
	TW_CHECK(hf_int(c, o, NAMES("num_local_experts", "num_experts"), 128, 1, &m->experts));
	TW_CHECK(hf_int(c, o, NAMES("num_experts_per_tok", "experts_per_token"), 4, 1, &m->top_k));
	m->expert_ffn_hidden = m->ffn_hidden;
	m->moe_layer_freq = 1;
	m->mlp_bias = true;    /* gate_up_proj_bias and down_proj_bias of each expert */
	m->router_bias = true; /* the router is a linear with a bias */
	m->attn_sinks = true;
	/* GptOssConfig's layer_types default: sliding on even layers, full on odd ones */
	return hf_window(c, o, 128, false, 2, false, m);
}

/* Gemma 2 and 3 (text): GeGLU MLP (gated like SwiGLU), four RMSNorms per layer (before and
 * after attention and MLP), tied embeddings, head_dim 256 by default; Gemma 2 alternates
 * windowed and global layers, Gemma 3 has one global layer in six and q/k norms */
static enum tw_result hf_gemma(const struct json_ctx *c, const cJSON *o, struct model *m, bool v3)
{
	static const struct hf_llama_defaults d2 = {256000, 2304, 9216, 26, 8, 4, 8192, false, 256};
	static const struct hf_llama_defaults d3 = {262208, 2304, 9216, 26, 8, 4, 131072, false, 256};
	TW_CHECK(hf_llama_like(c, o, v3 ? &d3 : &d2, m));
	TW_CHECK(hf_bool(c, o, "tie_word_embeddings", true, &m->tied_embeddings));
	m->norms_per_layer = 4;
	m->qk_norm = v3;
	return hf_window(c, o, 4096, false, v3 ? 6 : 2, v3, m);
}

static enum tw_result hf_gemma2(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	return hf_gemma(c, o, m, false);
}

static enum tw_result hf_gemma3_text(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	return hf_gemma(c, o, m, true);
}

/* Llama 4's language model: chunked attention on its RoPE layers and full attention on the
 * NoPE ones (every no_rope_layer_interval-th, the last of each run), MoE layers with one shared
 * expert of the experts' width every interleave_moe_layer_step-th layer and dense MLPs of
 * intermediate_size_mlp between; its q/k L2 norms have no weights */
static enum tw_result hf_llama4_text(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {202048, 5120, 8192, 48, 40, 8, 131072, false, 128};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	m->expert_ffn_hidden = m->ffn_hidden;
	TW_CHECK(hf_int(c, o, NAMES("intermediate_size_mlp"), 16384, 1, &m->ffn_hidden));
	TW_CHECK(hf_int(c, o, NAMES("num_local_experts"), 16, 1, &m->experts));
	TW_CHECK(hf_int(c, o, NAMES("num_experts_per_tok"), 1, 1, &m->top_k));
	const cJSON *ml = cJSON_GetObjectItemCaseSensitive(o, "moe_layers");
	if (ml && !cJSON_IsNull(ml))
		return json_fail(c, "moe_layers", "an explicit list is not supported (twin takes "
						  "interleave_moe_layer_step)");
	m->shared_experts = 1;
	m->shared_ffn_hidden = m->expert_ffn_hidden;
	TW_CHECK(hf_moe_step(c, o, "interleave_moe_layer_step", m));
	const cJSON *ch = cJSON_GetObjectItemCaseSensitive(o, "attention_chunk_size");
	if (ch && cJSON_IsNull(ch))
		return TW_OK;
	TW_CHECK(hf_int(c, o, NAMES("attention_chunk_size"), 8192, 1, &m->attn_chunk));
	/* no_rope_layers (1: RoPE and chunks, 0: NoPE and full attention), else the last of
	 * every no_rope_layer_interval layers is NoPE */
	const cJSON *nr = cJSON_GetObjectItemCaseSensitive(o, "no_rope_layers");
	if (nr && !cJSON_IsNull(nr) && !(cJSON_IsArray(nr) && cJSON_GetArraySize(nr) == 0))
		return hf_layer_list(c, "no_rope_layers", nr, full_of_rope_flag, "0 or 1", m);
	int64_t every = 4;
	TW_CHECK(hf_int(c, o, NAMES("no_rope_layer_interval"), 4, 1, &every));
	hf_every_pth_full(every, m); /* 1: every layer NoPE and global; past the last: none */
	return TW_OK;
}

static enum tw_result hf_mixtral(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {32000, 4096, 14336, 32, 32, 8, 131072, false};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	TW_CHECK(hf_int(c, o, NAMES("num_local_experts", "num_experts"), 8, 1, &m->experts));
	TW_CHECK(hf_int(c, o, NAMES("num_experts_per_tok"), 2, 1, &m->top_k));
	m->expert_ffn_hidden = m->ffn_hidden; /* every layer is MoE; experts are w1, w2, w3 */
	m->moe_layer_freq = 1;
	return hf_window(c, o, 0, false, 0, false, m); /* MixtralConfig's window: none */
}

static enum tw_result hf_qwen2_moe(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	static const struct hf_llama_defaults d = {151936, 2048, 5632, 24, 16, 0, 32768, false};
	TW_CHECK(hf_llama_like(c, o, &d, m));
	bool qkv = true;
	TW_CHECK(hf_bool(c, o, "qkv_bias", true, &qkv));
	m->qkv_bias = qkv;
	TW_CHECK(hf_int(c, o, NAMES("num_experts"), 60, 1, &m->experts));
	TW_CHECK(hf_int(c, o, NAMES("num_experts_per_tok"), 4, 1, &m->top_k));
	TW_CHECK(hf_int(c, o, NAMES("moe_intermediate_size"), 1408, 1, &m->expert_ffn_hidden));
	TW_CHECK(hf_int(c, o, NAMES("shared_expert_intermediate_size"), 5632, 0,
			&m->shared_ffn_hidden));
	TW_CHECK(hf_no_mlp_only_layers(c, o));
	if (m->shared_ffn_hidden > 0) {
		m->shared_experts = 1;
		m->shared_expert_gate = true; /* sigmoid gate h x 1 on the shared expert */
	}
	return hf_moe_step(c, o, "decoder_sparse_step", m);
}

/* DeepSeek's gate views the experts as n_group groups (which must divide them), keeps the best
 * topk_group (torch.topk: at most n_group) and takes the top-k from their experts */
static enum tw_result hf_router_groups(const struct json_ctx *c, struct model *m)
{
	int64_t g = m->router_groups, tg = m->router_group_topk, e = m->experts;
	if (g == 0)
		return TW_OK;
	if (e % g)
		return json_fail(c, "n_group", "%lld does not divide n_routed_experts (%lld)",
				 (long long)g, (long long)e);
	if (tg > g)
		return json_fail(c, "topk_group", "must be <= n_group (%lld), got %lld",
				 (long long)g, (long long)tg);
	if (tg == g) { /* every group: no limit */
		m->router_groups = m->router_group_topk = 0;
		return TW_OK;
	}
	/* a top-k beyond the experts is num_experts_per_tok's error, reported after */
	if (m->top_k <= e && m->top_k > tg * (e / g))
		return json_fail(c, "topk_group", "%lld groups of %lld experts hold fewer than "
				 "num_experts_per_tok (%lld)",
				 (long long)tg, (long long)(e / g), (long long)m->top_k);
	return TW_OK;
}

static enum tw_result hf_deepseek(const struct json_ctx *c, const cJSON *o, struct model *m,
				  bool v3)
{
	static const struct hf_llama_defaults d2 = {102400, 4096, 11008, 30, 32, 0, 2048, false};
	static const struct hf_llama_defaults d3 = {129280, 7168, 18432, 61, 128, 0, 4096, false};
	TW_CHECK(hf_llama_like(c, o, v3 ? &d3 : &d2, m));
	if (m->qkv_bias || m->out_bias)
		return json_fail(c, "attention_bias", "true is not supported: twin models MLA's "
				 "projections without biases");
	/* MLA: K and V come from one compressed latent per token, one set per query head */
	m->kv_heads = m->heads;
	m->head_dim = 0;
	const cJSON *ql = cJSON_GetObjectItemCaseSensitive(o, "q_lora_rank");
	if (ql && cJSON_IsNull(ql))
		m->q_lora_rank = 0; /* null: queries are not compressed (V2-Lite) */
	else
		TW_CHECK(hf_int(c, o, NAMES("q_lora_rank"), 1536, 1, &m->q_lora_rank));
	TW_CHECK(hf_int(c, o, NAMES("kv_lora_rank"), 512, 1, &m->kv_lora_rank));
	TW_CHECK(hf_int(c, o, NAMES("qk_nope_head_dim"), 128, 1, &m->qk_nope_head_dim));
	TW_CHECK(hf_int(c, o, NAMES("qk_rope_head_dim"), 64, 1, &m->qk_rope_head_dim));
	TW_CHECK(hf_int(c, o, NAMES("v_head_dim"), 128, 1, &m->v_head_dim));
	m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
	TW_CHECK(hf_int(c, o, NAMES("n_routed_experts"), v3 ? 256 : 64, 1, &m->experts));
	TW_CHECK(hf_int(c, o, NAMES("n_shared_experts"), v3 ? 1 : 2, 0, &m->shared_experts));
	TW_CHECK(hf_int(c, o, NAMES("moe_intermediate_size"), v3 ? 2048 : 1407, 1,
			&m->expert_ffn_hidden));
	/* V2's configuration class has no default top-k: a V2 config must say it */
	TW_CHECK(hf_int(c, o, NAMES("num_experts_per_tok"), v3 ? 8 : -1, 1, &m->top_k));
	TW_CHECK(hf_int(c, o, NAMES("first_k_dense_replace"), v3 ? 3 : 0, 0, &m->dense_layers));
	int64_t freq = 1;
	TW_CHECK(hf_int(c, o, NAMES("moe_layer_freq"), 1, 1, &freq));
	if (freq != 1)
		return json_fail(c, "moe_layer_freq", "only 1 is supported, got %lld", (long long)freq);
	m->moe_layer_freq = 1;
	/* the shared experts are one MLP of n_shared times the expert width */
	m->shared_ffn_hidden = m->shared_experts * m->expert_ffn_hidden;
	m->router_bias = v3; /* e_score_correction_bias, one per routed expert */
	/* group-limited routing: V3's class defaults to 8 groups, the best 4; V2's to none
	 * (null), and V2-Lite's config says 1 of 1, which limits nothing */
	const cJSON *ng = cJSON_GetObjectItemCaseSensitive(o, "n_group");
	const cJSON *tg = cJSON_GetObjectItemCaseSensitive(o, "topk_group");
	if (!(ng && cJSON_IsNull(ng)) && !(tg && cJSON_IsNull(tg))) {
		TW_CHECK(hf_int(c, o, NAMES("n_group"), v3 ? 8 : 1, 1, &m->router_groups));
		TW_CHECK(hf_int(c, o, NAMES("topk_group"), v3 ? 4 : 1, 1, &m->router_group_topk));
	}
	/* every layer dense: transformers builds no gate, so nothing below applies */
	if (m->dense_layers >= m->layers) {
		hf_all_dense(m);
		return TW_OK;
	}
	return hf_router_groups(c, m);
}

static enum tw_result hf_deepseek_v2(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	return hf_deepseek(c, o, m, false);
}

static enum tw_result hf_deepseek_v3(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	return hf_deepseek(c, o, m, true);
}

/* GELU-MLP families: LayerNorm with bias everywhere. */
static void hf_gpt_style(struct model *m)
{
	m->act = MODEL_ACT_GELU;
	m->norm = MODEL_NORM_LAYERNORM;
	m->norm_bias = true;
	m->norms_per_layer = 2;
}

static enum tw_result hf_gpt2(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	hf_gpt_style(m);
	TW_CHECK(hf_int(c, o, NAMES("n_embd", "hidden_size"), 768, 1, &m->hidden));
	TW_CHECK(hf_int(c, o, NAMES("n_layer", "num_hidden_layers"), 12, 1, &m->layers));
	TW_CHECK(hf_int(c, o, NAMES("n_head", "num_attention_heads"), 12, 1, &m->heads));
	TW_CHECK(hf_int(c, o, NAMES("n_positions", "max_position_embeddings"), 1024, 1,
			&m->max_pos));
	TW_CHECK(hf_int(c, o, NAMES("n_inner"), 4 * m->hidden, 1, &m->ffn_hidden));
	TW_CHECK(hf_int(c, o, NAMES("vocab_size"), 50257, 1, &m->vocab));
	m->seq_len = m->max_pos;
	m->kv_heads = m->heads;
	m->pos = MODEL_POS_LEARNED;
	/* lm_head is the token embedding unless the config unties it (PretrainedConfig: true) */
	TW_CHECK(hf_bool(c, o, "tie_word_embeddings", true, &m->tied_embeddings));
	m->qkv_bias = m->out_bias = m->mlp_bias = true; /* Conv1D layers carry a bias */
	return hf_dropout(c, o, NAMES("resid_pdrop"), 0.1, NAMES("attn_pdrop"), 0.1, m);
}

static enum tw_result hf_gpt_neox(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	hf_gpt_style(m);
	TW_CHECK(hf_int(c, o, NAMES("hidden_size"), 6144, 1, &m->hidden));
	TW_CHECK(hf_int(c, o, NAMES("num_hidden_layers"), 44, 1, &m->layers));
	TW_CHECK(hf_int(c, o, NAMES("num_attention_heads"), 64, 1, &m->heads));
	TW_CHECK(hf_int(c, o, NAMES("intermediate_size"), 24576, 1, &m->ffn_hidden));
	TW_CHECK(hf_int(c, o, NAMES("vocab_size"), 50432, 1, &m->vocab));
	TW_CHECK(hf_int(c, o, NAMES("max_position_embeddings"), 2048, 1, &m->seq_len));
	TW_CHECK(hf_bool(c, o, "use_parallel_residual", true, &m->parallel_attn));
	bool ab = true;
	TW_CHECK(hf_bool(c, o, "attention_bias", true, &ab));
	m->qkv_bias = m->out_bias = ab;
	m->mlp_bias = true;
	TW_CHECK(hf_bool(c, o, "tie_word_embeddings", false, &m->tied_embeddings));
	m->kv_heads = m->heads;
	m->pos = MODEL_POS_ROPE;
	return hf_dropout(c, o, NAMES("hidden_dropout"), 0, NAMES("attention_dropout"), 0, m);
}

static enum tw_result hf_falcon(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	hf_gpt_style(m);
	TW_CHECK(hf_int(c, o, NAMES("hidden_size", "n_embed"), 4544, 1, &m->hidden));
	TW_CHECK(hf_int(c, o, NAMES("num_hidden_layers", "n_layer"), 32, 1, &m->layers));
	TW_CHECK(hf_int(c, o, NAMES("num_attention_heads", "n_head"), 71, 1, &m->heads));
	TW_CHECK(hf_int(c, o, NAMES("vocab_size"), 65024, 1, &m->vocab));
	TW_CHECK(hf_int(c, o, NAMES("max_position_embeddings"), 2048, 1, &m->seq_len));
	TW_CHECK(hf_int(c, o, NAMES("ffn_hidden_size"), 4 * m->hidden, 1, &m->ffn_hidden));
	bool multi_query = true, new_arch = false, alibi = false, bias = false;
	TW_CHECK(hf_bool(c, o, "multi_query", true, &multi_query));
	TW_CHECK(hf_bool(c, o, "new_decoder_architecture", false, &new_arch));
	TW_CHECK(hf_bool(c, o, "parallel_attn", true, &m->parallel_attn));
	TW_CHECK(hf_bool(c, o, "alibi", false, &alibi));
	TW_CHECK(hf_bool(c, o, "bias", false, &bias));
	int64_t kv = 0;
	TW_CHECK(hf_int(c, o, NAMES("num_kv_heads", "n_head_kv"), m->heads, 1, &kv));
	/* FalconAttention: one K/V head for multi-query unless the new architecture */
	m->kv_heads = (new_arch || !multi_query) ? kv : 1;
	int64_t nln = 2;
	TW_CHECK(hf_int(c, o, NAMES("num_ln_in_parallel_attn"), 2, 1, &nln));
	if (new_arch)
		m->norms_per_layer = nln == 2 ? 2 : 1;
	else
		m->norms_per_layer = m->parallel_attn ? 1 : 2;
	m->parallel_attn = m->parallel_attn || new_arch;
	m->qkv_bias = m->out_bias = m->mlp_bias = bias;
	m->pos = alibi ? MODEL_POS_ALIBI : MODEL_POS_ROPE;
	TW_CHECK(hf_bool(c, o, "tie_word_embeddings", true, &m->tied_embeddings));
	return hf_dropout(c, o, NAMES("hidden_dropout"), 0, NAMES("attention_dropout"), 0, m);
}

static enum tw_result hf_bloom(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	hf_gpt_style(m);
	/* BloomConfig's own defaults are a toy model: the shape must be in the file */
	TW_CHECK(hf_int(c, o, NAMES("hidden_size", "n_embed"), -1, 1, &m->hidden));
	TW_CHECK(hf_int(c, o, NAMES("n_layer", "num_hidden_layers"), -1, 1, &m->layers));
	TW_CHECK(hf_int(c, o, NAMES("n_head", "num_attention_heads"), -1, 1, &m->heads));
	TW_CHECK(hf_int(c, o, NAMES("vocab_size"), 250880, 1, &m->vocab));
	TW_CHECK(hf_int(c, o, NAMES("n_inner"), 4 * m->hidden, 1, &m->ffn_hidden));
	TW_CHECK(hf_int(c, o, NAMES("seq_length"), 2048, 1, &m->seq_len));
	m->kv_heads = m->heads;
	m->pos = MODEL_POS_ALIBI;
	m->embed_norm = true; /* word_embeddings_layernorm */
	TW_CHECK(hf_bool(c, o, "tie_word_embeddings", true, &m->tied_embeddings));
	m->qkv_bias = m->out_bias = m->mlp_bias = true;
	return hf_dropout(c, o, NAMES("hidden_dropout"), 0, NAMES("attention_dropout"), 0, m);
}

static enum tw_result hf_opt(const struct json_ctx *c, const cJSON *o, struct model *m)
{
	hf_gpt_style(m);
	TW_CHECK(hf_int(c, o, NAMES("hidden_size", "d_model"), 768, 1, &m->hidden));
	TW_CHECK(hf_int(c, o, NAMES("ffn_dim"), 3072, 1, &m->ffn_hidden));
	TW_CHECK(hf_int(c, o, NAMES("num_hidden_layers"), 12, 1, &m->layers));
	TW_CHECK(hf_int(c, o, NAMES("num_attention_heads"), 12, 1, &m->heads));
	TW_CHECK(hf_int(c, o, NAMES("max_position_embeddings"), 2048, 1, &m->seq_len));
	TW_CHECK(hf_int(c, o, NAMES("vocab_size"), 50272, 1, &m->vocab));
	TW_CHECK(hf_int(c, o, NAMES("word_embed_proj_dim"), m->hidden, 1, &m->proj_dim));
	if (m->proj_dim == m->hidden)
		m->proj_dim = 0;
	bool before = true, bias = true;
	TW_CHECK(hf_bool(c, o, "do_layer_norm_before", true, &before));
	TW_CHECK(hf_bool(c, o, "enable_bias", true, &bias));
	const char *const acts[] = {"relu", "gelu", "gelu_new", NULL};
	int a = 0;
	TW_CHECK(json_get_enum(c, o, "activation_function", acts, &a, NULL));
	m->act = a == 0 ? MODEL_ACT_RELU : MODEL_ACT_GELU;
	m->no_final_norm = !before; /* OPT-350m: post-norm blocks, no final LayerNorm */
	m->kv_heads = m->heads;
	m->pos = MODEL_POS_LEARNED;
	m->max_pos = m->seq_len + 2; /* OPTLearnedPositionalEmbedding keeps an offset of 2 */
	TW_CHECK(hf_bool(c, o, "tie_word_embeddings", true, &m->tied_embeddings));
	m->qkv_bias = m->out_bias = m->mlp_bias = bias;
	return hf_dropout(c, o, NAMES("dropout"), 0.1, NAMES("attention_dropout"), 0, m);
}

struct hf_family {
	const char *model_type;
	const char *family;
	enum tw_result (*import)(const struct json_ctx *c, const cJSON *o, struct model *m);
};

static const struct hf_family hf_families[] = {
	{"llama", "llama", hf_llama},
	{"mistral", "mistral", hf_mistral},
	{"qwen2", "qwen2", hf_qwen2},
	{"qwen3", "qwen3", hf_qwen3},
	{"phi3", "phi3", hf_phi3},
	{"mixtral", "mixtral", hf_mixtral},
	{"qwen2_moe", "qwen2_moe", hf_qwen2_moe},
	{"qwen3_moe", "qwen3_moe", hf_qwen3_moe},
	{"gpt_oss", "gpt_oss", hf_gpt_oss},
	{"gemma2", "gemma2", hf_gemma2},
	{"gemma3_text", "gemma3", hf_gemma3_text},
	{"llama4_text", "llama4", hf_llama4_text},
	{"deepseek_v2", "deepseek_v2", hf_deepseek_v2},
	{"deepseek_v3", "deepseek_v3", hf_deepseek_v3},
	{"gpt2", "gpt2", hf_gpt2},
	{"gpt_neox", "gpt_neox", hf_gpt_neox},
	{"falcon", "falcon", hf_falcon},
	{"RefinedWebModel", "falcon", hf_falcon}, /* Falcon's configs before transformers 4.33 */
	{"RefinedWeb", "falcon", hf_falcon},
	{"bloom", "bloom", hf_bloom},
	{"opt", "opt", hf_opt},
};
#define N_HF_FAMILIES (sizeof(hf_families) / sizeof(hf_families[0]))

/* The last component of the path [s, *end): its start; *end moves back over trailing '/'. */
static const char *last_component(const char *s, const char **end)
{
	const char *e = *end;
	while (e > s && e[-1] == '/')
		e--;
	const char *b = e;
	while (b > s && b[-1] != '/')
		b--;
	*end = e;
	return b;
}

/* The model's name from _name_or_path, which is informational: a hub id "org/model", a local
 * directory, or a hub cache snapshot ".../models--org--model/snapshots/<hash>/". Its last
 * component names the model (as "Llama-2-7b-hf" for "meta-llama/Llama-2-7b-hf"); a snapshot
 * is named by its repository. Never refused: empty when nothing is left. */
static void hf_name(const char *p, char *out, size_t len)
{
	const char *e = p + strlen(p);
	const char *b = last_component(p, &e);
	if (b > p) { /* .../snapshots/<hash>: the repository directory above */
		const char *pe = b - 1, *pb = last_component(p, &pe);
		if (pe - pb == 9 && !strncmp(pb, "snapshots", 9) && pb > p) {
			e = pb - 1;
			b = last_component(p, &e);
		}
	}
	if (e - b > 8 && !strncmp(b, "models--", 8)) { /* "models--org--model": model */
		b += 8;
		for (const char *q = b; q + 2 < e; q++)
			if (q[0] == '-' && q[1] == '-') {
				b = q + 2;
				break;
			}
	}
	copy_name(out, len, b, (size_t)(e - b));
}

static enum tw_result hf_import(const cJSON *o, const char *file, struct model *out,
				struct tw_err *err)
{
	struct json_ctx c = {.file = file, .err = err};
	char type[64] = "";
	TW_CHECK(json_check_dups(&c, o));
	TW_CHECK(json_get_str(&c, o, "model_type", type, sizeof(type), NULL));
	const struct hf_family *fam = NULL;
	for (size_t i = 0; i < N_HF_FAMILIES && !fam; i++)
		if (!strcmp(type, hf_families[i].model_type))
			fam = &hf_families[i];
	if (!fam && (!strcmp(type, "gemma3") || !strcmp(type, "llama4")))
		return json_fail(&c, "model_type", "'%s' is the multimodal model: twin models its "
				 "language model, so give its text_config (model_type %s_text) as the config",
				 type, type);
	if (!fam)
		return json_fail(&c, "model_type",
				 "'%s' is not supported (supported: llama, mistral, qwen2, qwen3, phi3, "
				 "mixtral, qwen2_moe, qwen3_moe, gpt_oss, gemma2, gemma3_text, "
				 "llama4_text, deepseek_v2, deepseek_v3, gpt2, gpt_neox, falcon, bloom, "
				 "opt)",
				 type);
	struct model m;
	memset(&m, 0, sizeof(m));
	TW_CHECK(fam->import(&c, o, &m));
	snprintf(m.family, sizeof(m.family), "%s", fam->family);
	const cJSON *np = cJSON_GetObjectItemCaseSensitive(o, "_name_or_path");
	if (np && !cJSON_IsNull(np) && !cJSON_IsString(np))
		return json_fail(&c, "_name_or_path", "must be a string");
	if (cJSON_IsString(np))
		hf_name(np->valuestring, m.name, sizeof(m.name));
	if (!m.name[0])
		name_from_path(file, m.name, sizeof(m.name));
	/* the rules the HF fields must obey, named by their HF names */
	if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
		return json_fail(&c, "num_key_value_heads",
				 "num_attention_heads (%lld) must be a multiple of it (%lld)",
				 (long long)m.heads, (long long)m.kv_heads);
	if (m.head_dim == 0) {
		if (m.hidden % m.heads != 0)
			return json_fail(&c, "num_attention_heads",
					 "hidden size (%lld) must be a multiple of it (%lld) when head_dim is not given",
					 (long long)m.hidden, (long long)m.heads);
		m.head_dim = m.hidden / m.heads;
	}
	if (m.experts > 0 && m.top_k > m.experts)
		return json_fail(&c, "num_experts_per_tok", "must be <= the number of experts (%lld), got %lld",
				 (long long)m.experts, (long long)m.top_k);
	TW_CHECK(model_validate(&m, file, err));
	memcpy(out, &m, sizeof(m)); /* padding too: stored models compare bytewise */
	return TW_OK;
}

/* ---- loading -------------------------------------------------------------------------------- */

static bool looks_like_path(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".json"));
}

static bool is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

void model_list_presets(const char *presets_dir, char *buf, size_t len)
{
	json_list_dir(presets_dir, buf, len);
}

enum tw_result model_load(const char *name_or_path, const char *presets_dir, struct model *out,
			  struct tw_err *err)
{
	if (!name_or_path || !*name_or_path)
		return tw_errf(err, TW_ERR_USAGE, "model: empty name");
	char path[4096];
	bool preset = false;
	if (looks_like_path(name_or_path)) {
		snprintf(path, sizeof(path), "%s", name_or_path);
		/* "llama2-7b.json" that is not here: the preset file of that name */
		if (!strchr(name_or_path, '/') && !is_file(path) && presets_dir) {
			char alt[4096];
			snprintf(alt, sizeof(alt), "%s/%s", presets_dir, name_or_path);
			if (is_file(alt))
				snprintf(path, sizeof(path), "%s", alt);
		}
	} else {
		snprintf(path, sizeof(path), "%s/%s.json", presets_dir ? presets_dir : ".",
			 name_or_path);
		preset = true;
		if (!is_file(path)) {
			if (is_file(name_or_path)) { /* a file in the working directory */
				snprintf(path, sizeof(path), "%s", name_or_path);
				preset = false;
			} else {
				char known[2048];
				model_list_presets(presets_dir ? presets_dir : ".", known, sizeof(known));
				return tw_errf(err, TW_ERR_INVALID,
					       "unknown model '%s' (presets: %s; or give a path to a model JSON or a Hugging Face config.json)",
					       name_or_path, known[0] ? known : "none found");
			}
		}
	}
	cJSON *root = NULL;
	TW_CHECK(json_load_object(path, &root, err));
	struct model m;
	enum tw_result rc;
	if (cJSON_GetObjectItemCaseSensitive(root, "model_type"))
		rc = hf_import(root, path, &m, err);
	else
		rc = model_from_json(root, path, &m, err);
	if (rc == TW_OK && preset && !cJSON_GetObjectItemCaseSensitive(root, "name"))
		snprintf(m.name, sizeof(m.name), "%s", name_or_path);
	cJSON_Delete(root);
	if (rc != TW_OK)
		return rc;
	memcpy(out, &m, sizeof(m)); /* padding too: stored models compare bytewise */
	return TW_OK;
}
