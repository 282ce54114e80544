/* Hand-filled jobs for the plan tests (no loaders needed): Llama-2-7B, a GPT-3-like model
 * and a small MoE, on DGX-like nodes, with a DeepSpeed-default strategy. */
#ifndef TEST_PLAN_FIXTURE_H
#define TEST_PLAN_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "../../core/core.h"

static inline void fx_llama7b(struct model *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->name, "llama-2-7b");
	strcpy(m->family, "llama");
	m->layers = 32, m->hidden = 4096, m->heads = 32, m->kv_heads = 32, m->head_dim = 128;
	m->ffn_hidden = 11008, m->vocab = 32000, m->seq_len = 4096;
	m->act = MODEL_ACT_SWIGLU, m->norm = MODEL_NORM_RMSNORM, m->pos = MODEL_POS_ROPE;
	m->norms_per_layer = 2;
}

/* GPT-3 style: learned positions, LayerNorm with bias, biases everywhere, tied embeddings */
static inline void fx_gpt(struct model *m, int64_t layers, int64_t hidden, int64_t heads)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->name, "gpt");
	strcpy(m->family, "gpt2");
	m->layers = layers, m->hidden = hidden, m->heads = heads, m->kv_heads = heads;
	m->head_dim = hidden / heads, m->ffn_hidden = 4 * hidden, m->vocab = 51200;
	m->seq_len = 2048, m->max_pos = 2048;
	m->act = MODEL_ACT_GELU, m->norm = MODEL_NORM_LAYERNORM, m->pos = MODEL_POS_LEARNED;
	m->tied_embeddings = true, m->qkv_bias = m->out_bias = m->mlp_bias = m->norm_bias = true;
	m->norms_per_layer = 2;
}

static inline void fx_cluster(struct cluster *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->name, "dgx-a100-80g");
	c->gpu.memory_gib = 80, c->gpu.context_gib = 0;
	c->node.gpus = 8, c->node.host_memory_gib = 2048;
	c->eff.alloc_fragmentation = 1.0;
}

/* DeepSpeed defaults (reference/deepspeed.md §1.4) */
static inline void fx_strategy(struct strategy *s, int64_t gpus)
{
	memset(s, 0, sizeof(*s));
	s->framework = STRAT_DEEPSPEED;
	s->gpus = gpus, s->tp = 1, s->pp = 1, s->cp = 1, s->ep = 1, s->vp = 1, s->dp = gpus;
	s->schedule = STRAT_SCHED_DS_1F1B;
	s->micro_batch = 1, s->grad_accum = 1, s->global_batch = gpus;
	s->param_dtype = TW_BF16, s->grad_accum_dtype = TW_BF16, s->comm_dtype = TW_BF16;
	s->optimizer = STRAT_OPT_ADAMW;
	s->contiguous_gradients = true, s->reduce_scatter = true;
	s->reduce_bucket_size = 500000000, s->allgather_bucket_size = 500000000;
	s->prefetch_bucket_size = 50000000, s->param_persistence_threshold = 100000;
	s->max_live_parameters = 1000000000, s->max_reuse_distance = 1000000000;
	s->sub_group_size = 1000000000;
	s->offload_ratio = 1.0;
	s->moe_min_capacity = 4; /* DeepSpeed's default */
	s->use_multi_rank_bucket_allreduce = true, s->ds_reduce_rooted = true, s->ds_ratio_last = true;
	s->flash_attention = true;
	/* Korthikanti's accounting, which the activation tests follow, counts dropout masks */
	s->hidden_dropout = s->attention_dropout = 0.1;
}

static inline struct job *fx_job(int64_t gpus)
{
	struct job *j = TW_NEW(struct job);
	fx_llama7b(&j->model);
	fx_cluster(&j->cluster);
	fx_strategy(&j->strat, gpus);
	j->gpus = gpus;
	j->nodes = (int)((gpus + 7) / 8);
	j->seq = j->model.seq_len;
	j->tokens_per_step = j->strat.global_batch * j->seq;
	return j;
}

/* keep dp = gpus / (tp pp cp) and the global batch consistent after changing degrees */
static inline void fx_degrees(struct job *j, int64_t tp, int64_t pp, int64_t cp, int64_t micro,
		       int64_t accum)
{
	struct strategy *s = &j->strat;
	s->tp = tp, s->pp = pp, s->cp = cp;
	s->dp = j->gpus / (tp * pp * cp);
	s->micro_batch = micro, s->grad_accum = accum;
	s->global_batch = micro * accum * s->dp;
	j->tokens_per_step = s->global_batch * j->seq;
}

static inline void fx_megatron(struct job *j)
{
	struct strategy *s = &j->strat;
	s->framework = STRAT_MEGATRON;
	s->zero_stage = 0;
	s->grad_accum_dtype = TW_FP32, s->comm_dtype = TW_FP32;
	s->schedule = STRAT_SCHED_1F1B;
	s->reduce_bucket_size = 40000000;
	s->async_tp_allreduce = true; /* Megatron's default */
}

/* all parameters of the job's model (every one on a rank with TP 1 and PP 1) */
static inline double fx_params(const struct job *j)
{
	struct model_params mp;
	model_count(&j->model, &mp);
	return (double)mp.total;
}

/* build and walk rank r; returns false on error */
static inline bool fx_mem(const struct job *j, int64_t r, struct plan_mem *mem)
{
	struct plan p;
	struct tw_err e = {0};
	if (plan_rank(j, r, &p, &e) != TW_OK) {
		printf("#   plan_rank: %s\n", e.msg);
		return false;
	}
	bool ok = plan_memory(j, &p, mem, &e) == TW_OK;
	if (!ok)
		printf("#   plan_memory: %s\n", e.msg);
	plan_release(&p);
	return ok;
}

/* a small MoE: 4 layers, 8 routed experts of 512 (top 2) and one shared of 1024 */
static inline void fx_moe(struct job *j)
{
	struct model *m = &j->model;
	m->layers = 4, m->hidden = 1024, m->heads = 16, m->kv_heads = 4, m->head_dim = 64;
	m->ffn_hidden = 2816, m->vocab = 32000, m->seq_len = 1024;
	m->experts = 8, m->top_k = 2, m->expert_ffn_hidden = 512, m->shared_experts = 1;
	m->shared_ffn_hidden = 1024, m->moe_layer_freq = 1;
	j->seq = 1024;
}

#define GPU PLAN_DEV_GPU
#define HOST PLAN_DEV_HOST

#endif
