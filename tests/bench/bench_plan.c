/* bench_plan — how fast the plan builder is: every distinct role of GPT-3 175B on 1,024
 * GPUs (TP 8, PP 8, DP 16, Megatron 1F1B, 64 micro-batches), built and memory-walked.
 * Prints figures; not a timed test. Usage: bench_plan [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/core.h"

static void gpt3(struct job *j)
{
	struct model *m = &j->model;
	strcpy(m->name, "gpt3-175b");
	m->layers = 96, m->hidden = 12288, m->heads = 96, m->kv_heads = 96, m->head_dim = 128;
	m->ffn_hidden = 49152, m->vocab = 51200, m->seq_len = 2048, m->max_pos = 2048;
	m->act = MODEL_ACT_GELU, m->norm = MODEL_NORM_LAYERNORM, m->pos = MODEL_POS_LEARNED;
	m->tied_embeddings = m->qkv_bias = m->out_bias = m->mlp_bias = m->norm_bias = true;
	m->norms_per_layer = 2;
	struct cluster *c = &j->cluster;
	c->gpu.memory_gib = 80, c->node.gpus = 8, c->node.host_memory_gib = 2048;
	c->eff.alloc_fragmentation = 1.0;
	struct strategy *s = &j->strat;
	s->framework = STRAT_MEGATRON;
	s->tp = 8, s->pp = 8, s->dp = 16, s->cp = 1, s->ep = 1, s->vp = 1;
	s->schedule = STRAT_SCHED_1F1B;
	s->micro_batch = 1, s->grad_accum = 64, s->global_batch = 1024;
	s->param_dtype = TW_FP16, s->grad_accum_dtype = TW_FP32, s->comm_dtype = TW_FP32;
	s->optimizer = STRAT_OPT_ADAM;
	s->reduce_bucket_size = 40000000;
	s->recompute = STRAT_RECOMPUTE_FULL;
	s->flash_attention = true;
	j->gpus = 1024, j->nodes = 128, j->seq = 2048;
	j->tokens_per_step = 1024LL * 2048;
}

int main(int argc, char **argv)
{
	int repeats = argc > 1 ? atoi(argv[1]) : 5;
	if (repeats < 1)
		repeats = 1;
	struct job *j = TW_NEW(struct job);
	gpt3(j);
	int64_t reps[8], w[8];
	int64_t n = plan_roles(j, reps, w, 8);
	int64_t best = INT64_MAX;
	size_t ops = 0, deps = 0;
	for (int r = 0; r < repeats; r++) {
		int64_t t0 = tw_now_ns();
		ops = deps = 0;
		for (int64_t i = 0; i < n; i++) {
			struct plan p;
			struct plan_mem m;
			struct tw_err e = {0};
			if (plan_rank(j, reps[i], &p, &e) != TW_OK ||
			    plan_memory(j, &p, &m, &e) != TW_OK) {
				fprintf(stderr, "bench_plan: %s\n", e.msg);
				return 1;
			}
			ops += p.nops;
			deps += p.ndeps;
			plan_release(&p);
		}
		int64_t dt = tw_now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	printf("bench_plan: gpt3-175b, 1024 GPUs (tp 8, pp 8, dp 16), 1F1B, 64 micro-batches, full "
	       "recompute: %lld roles, %zu ops, %zu deps, build + memory walk of all roles %.1f ms "
	       "(best of %d), %.0f ns/op\n",
	       (long long)n, ops, deps, (double)best / 1e6, repeats, (double)best / (double)ops);
	free(j);
	return 0;
}
