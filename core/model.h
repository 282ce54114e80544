/* model — the transformer being trained: our own JSON schema (examples/models/NAME.json,
 * documented in docs/model.md), presets by name, and import of Hugging Face config.json.
 *
 * Every family is normalised to one struct model. Counts are exact for exact configs. */
#ifndef TW_MODEL_H
#define TW_MODEL_H

#include "tw.h"

enum model_act { MODEL_ACT_GELU = 0, MODEL_ACT_SWIGLU, MODEL_ACT_SQUARED_RELU, MODEL_ACT_RELU };
enum model_norm { MODEL_NORM_LAYERNORM = 0, MODEL_NORM_RMSNORM };
enum model_pos { MODEL_POS_ROPE = 0, MODEL_POS_LEARNED, MODEL_POS_ALIBI };

struct model {
	char name[64];
	char family[32];      /* "llama", "gpt2", ... or "custom" */
	int64_t layers;       /* transformer blocks */
	int64_t hidden;       /* h */
	int64_t heads;        /* query heads */
	int64_t kv_heads;     /* = heads for MHA, < heads for GQA/MQA */
	int64_t head_dim;     /* default hidden / heads */
	int64_t ffn_hidden;   /* dense MLP width (also DeepSeek's dense-first layers) */
	int64_t vocab;
	int64_t seq_len;      /* default training sequence length, tokens */
	int64_t max_pos;      /* rows of a learned position table (0 when not learned) */
	enum model_act act;
	enum model_norm norm;
	enum model_pos pos;
	bool tied_embeddings; /* lm_head shares the embedding matrix */
	bool qkv_bias;        /* bias on q, k, v projections */
	bool out_bias;        /* bias on the attention output projection */
	bool mlp_bias;        /* biases on MLP linears */
	bool norm_bias;       /* LayerNorm with bias (2h params) vs RMSNorm (h) */
	bool parallel_attn;   /* attention and MLP read the same input (Falcon, NeoX) */
	int norms_per_layer;  /* 2 usually, 1 for Falcon-7B */
	bool embed_norm;      /* BLOOM's word_embeddings_layernorm */
	int64_t proj_dim;     /* OPT word_embed_proj_dim when != hidden, else 0 */
	bool no_final_norm;   /* no norm after the last block (OPT with do_layer_norm_before false) */
	/* the dropout probabilities the model's own config sets (HF's resid_pdrop / hidden_dropout /
	 * dropout, attn_pdrop / attention_dropout), which eager HF modules apply; unset: the
	 * strategy's defaults */
	bool dropout_given;
	double hidden_dropout, attention_dropout;

	/* MoE (experts == 0: dense) */
	int64_t experts;             /* routed experts */
	int64_t top_k;
	int64_t expert_ffn_hidden;   /* width of one routed expert */
	int64_t shared_experts;      /* count of shared experts (always active) */
	int64_t shared_ffn_hidden;   /* total width of the shared expert MLP */
	int64_t dense_layers;        /* first k layers are dense (DeepSeek first_k_dense_replace) */
	int64_t moe_layer_freq;      /* every n-th layer is MoE (Qwen2-MoE decoder_sparse_step), 1 */
	bool router_bias;            /* DeepSeek-V3 e_score_correction_bias */
	/* group-limited routing (DeepSeek n_group / topk_group, Megatron-Core
	 * --moe-router-num-groups / --moe-router-group-topk): the experts form router_groups
	 * equal groups and a token's top_k come from its best router_group_topk groups;
	 * 0: no limit */
	int64_t router_groups, router_group_topk;
	bool shared_expert_gate;     /* Qwen2-MoE h x 1 sigmoid gate */

	/* local attention, 0: every layer attends causally to all tokens. A sliding window
	 * (Mistral, Gemma 2 and 3, GPT-OSS): a query sees itself and the sliding_window - 1 tokens
	 * before it. Chunked attention (Llama 4): the sequence is cut into chunks of attn_chunk
	 * tokens and a query sees the tokens of its chunk up to itself. full_every > 0 keeps full
	 * attention on the layers l with l % full_every == full_first (Gemma 3's five local
	 * layers to one global is 6 and 5); 0: every layer is local */
	int64_t sliding_window, attn_chunk, full_every, full_first;
	bool qk_norm;         /* RMSNorm over each query and key head (Qwen3, Gemma 3): 2 x head_dim */
	bool attn_sinks;      /* a learned sink logit per query head (GPT-OSS): heads per layer */

	/* MLA (kv_lora_rank == 0: ordinary attention) */
	int64_t q_lora_rank;         /* 0: q not compressed */
	int64_t kv_lora_rank;
	int64_t qk_nope_head_dim;
	int64_t qk_rope_head_dim;
	int64_t v_head_dim;
};

/* Parameter counts by component (elements). */
struct model_params {
	int64_t embedding;  /* token (+ position, + embedding norm) tables */
	int64_t attention;  /* all layers */
	int64_t mlp;        /* dense MLPs, all layers */
	int64_t experts;    /* routed + shared experts and routers, all layers */
	int64_t norms;      /* per-layer and final norms */
	int64_t head;       /* lm_head when not tied */
	int64_t total;
	int64_t active;     /* per token: routed experts counted top_k of experts */
	/* per layer, for the plan builder */
	int64_t attn_per_layer;
	int64_t mlp_per_dense_layer;
	int64_t moe_per_layer;        /* routed + shared + router of one MoE layer */
	int64_t expert_params;        /* one routed expert */
	int64_t norms_per_layer;
};

/* Load MODEL: a preset name (examples/models/NAME.json, found via presets_dir), a path to our
 * JSON, or a path to a Hugging Face config.json (recognised by "model_type"). */
enum tw_result model_load(const char *name_or_path, const char *presets_dir, struct model *out,
			  struct tw_err *err);
/* Parse from an already-loaded cJSON object (file names messages). A key repeated anywhere in
 * obj is refused, as model_load refuses it in either schema. */
struct cJSON;
enum tw_result model_from_json(const struct cJSON *obj, const char *file, struct model *out,
			       struct tw_err *err);
/* Checks ranges and consistency (heads % kv_heads, ...). */
enum tw_result model_validate(const struct model *m, const char *file, struct tw_err *err);

bool model_is_moe(const struct model *m);
bool model_layer_is_moe(const struct model *m, int64_t layer);
void model_count(const struct model *m, struct model_params *out);
/* Whether layer l attends locally (a sliding window or a chunk), and how many layers do. */
bool model_layer_local(const struct model *m, int64_t layer);
int64_t model_local_layers(const struct model *m);
/* The share of the s x s query-key pairs that layer l computes at sequence length seq: 1/2 for
 * causal attention, (w/s)(1 - w/2s) for a window of w < s tokens, about c/2s for chunks of c. */
double model_attn_frac(const struct model *m, int64_t layer, int64_t seq);
/* The share of a window of w tokens alone: (w/s)(1 - w/2s), 1/2 from w >= s. */
double model_window_frac(int64_t seq, int64_t window);

/* Training FLOPs per token (forward + backward = 3 x forward, FMA = 2), at sequence length
 * seq (causal attention counted as half of s x s), without recompute; the "model FLOPs" of MFU. */
double model_flops_per_token(const struct model *m, int64_t seq);
/* Forward FLOPs per token split by component (attention linears, attention core, mlp, logits). */
struct model_flops {
	double attn_linear, attn_core, mlp, moe, logits, total;
};
void model_flops_fwd(const struct model *m, int64_t seq, struct model_flops *out);

/* Names of the presets in presets_dir (sorted, comma-separated) into buf. */
void model_list_presets(const char *presets_dir, char *buf, size_t len);

/* JSON for --json and for storing the job; caller frees with cJSON_Delete. */
struct cJSON *model_to_json(const struct model *m);

#endif
