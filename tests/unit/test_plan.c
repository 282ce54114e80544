/* plan builder: FLOPs from shapes, collective matching across group members, P2P matching,
 * dependency order, roles, schedules, and the strategies the builder refuses. */
#include "test.h"
#include "test_plan_fixture.h"

static bool build(const struct job *j, int64_t r, struct plan *p)
{
	struct tw_err e = {0};
	if (plan_rank(j, r, p, &e) != TW_OK) {
		printf("#   plan_rank(%lld): %s\n", (long long)r, e.msg);
		return false;
	}
	return true;
}

/* Training FLOPs per token from the formula (reference/cost-models.md §7.1): 3 x forward,
 * causal attention halved, no recompute. */
static double formula_flops_per_token(const struct model *m, int64_t s)
{
	double h = (double)m->hidden, hd = m->head_dim ? (double)m->head_dim : h / m->heads;
	double q = m->heads * hd, kv = (m->kv_heads ? m->kv_heads : m->heads) * hd;
	double w = m->act == MODEL_ACT_SWIGLU ? 3 : 2;
	double per_layer_dense = 6 * (h * (q + 2 * kv) + q * h) + 6 * q * (double)s;
	double total = 0;
	for (int64_t l = 0; l < m->layers; l++) {
		total += per_layer_dense;
		if (m->experts > 0 && l >= m->dense_layers)
			total += 6 * h * m->expert_ffn_hidden * w * m->top_k +
				 6 * h * m->shared_ffn_hidden * w + 6 * h * m->experts; /* router */
		else
			total += 6 * h * m->ffn_hidden * w;
	}
	return total + 6 * h * (double)m->vocab;
}

static double sum_model_flops(const struct job *j)
{
	double sum = 0;
	for (int64_t r = 0; r < j->gpus; r++) {
		struct plan p;
		if (!build(j, r, &p))
			return -1;
		sum += p.model_flops;
		plan_release(&p);
	}
	return sum;
}

static double op_bytes(const struct plan *p, const char *name);

/* OPT-350m's narrower embedding (proj_dim): the lookup in 512, project_in to the hidden size
 * after it, project_out before a head of K = 512; the plan's model FLOPs are model.c's. */
static void test_flops_proj_dim(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_megatron(j);
	fx_degrees(j, 1, 1, 1, 1, 4);
	j->model.proj_dim = 512;
	double want = model_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	struct plan p;
	if (build(j, 0, &p)) {
		int in = 0, out = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COMPUTE || o->u.compute.kernel != PLAN_K_GEMM)
				continue;
			if (!strcmp(o->name, "project_in"))
				in += o->u.compute.n == 4096 && o->u.compute.k == 512;
			if (!strcmp(o->name, "project_out"))
				out += o->u.compute.n == 512 && o->u.compute.k == 4096;
			if (!strcmp(o->name, "logits"))
				CHECK_EQ_INT(t, o->u.compute.k, 512);
		}
		CHECK_EQ_INT(t, in, 4); /* one a micro-batch */
		CHECK_EQ_INT(t, out, 4);
		CHECK(t, op_bytes(&p, "final_norm") > 0);
		plan_release(&p);
	}
	/* its post-norm blocks end without a final norm: none to run */
	j->model.no_final_norm = true;
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, op_bytes(&p, "final_norm"), -1, 0);
		CHECK_NEAR(t, op_bytes(&p, "final_norm_bwd"), -1, 0);
		plan_release(&p);
	}
	free(j);
}

static void test_flops_dense_gqa_tp_pp_cp(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	j->model.kv_heads = 8; /* GQA */
	fx_megatron(j);
	fx_degrees(j, 2, 2, 2, 1, 4);
	double want = formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	double got = sum_model_flops(j);
	double mf = model_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	printf("#   llama-7b GQA tp2 pp2 cp2: plan %.6e FLOPs, formula %.6e, model.c %.6e\n", got,
	       want, mf);
	CHECK_NEAR(t, got, want, 1e-9);
	CHECK_NEAR(t, got, mf, 1e-9); /* twin model show agrees */
	/* Ulysses or the KV all-gather instead of ring */
	j->strat.cp_kind = STRAT_CP_ALLGATHER;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	j->strat.cp_kind = STRAT_CP_ULYSSES;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	/* recompute adds hardware FLOPs, not model FLOPs */
	j->strat.recompute = STRAT_RECOMPUTE_FULL;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	struct plan p;
	if (build(j, 0, &p)) {
		CHECK(t, p.hw_flops > p.model_flops * 4.0 / 3.0);
		plan_release(&p);
	}
	free(j);
}

/* Context parallelism's exchange in one layer of one micro-batch (cp 4, a 7B MHA model):
 * - ring: three KV hops forward, each posted ahead of the round before the one that uses it;
 *   backward the same three and four hops of the blocks' dK, dV (the last one home), added in
 *   after each round but the first;
 * - allgather under Megatron: one gather of K, V and one kernel of the rank's 1,024 queries over
 *   the 4,096 keys; backward a gather and a reduce-scatter of the grads;
 * - allgather under PyTorch: the gather beside the first round, which does not wait for it;
 *   the dK, dV hops as the ring's, in fp32;
 * - Megatron's selective recompute of the core runs its exchange again. */
struct cp_counts { int kv_send, kv_recv_ahead, dkv_send, dkv_add, ag, rs, attn, attn_rc; };

static struct cp_counts cp_layer(const struct plan *p, int64_t *dkv_bytes, int64_t *ag_count)
{
	struct cp_counts c = {0};
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *o = &p->ops[i];
		if (o->layer != 0 || o->micro != 0)
			continue;
		if (o->kind == PLAN_P2P && !strcmp(o->name, "kv_send"))
			c.kv_send++;
		if (o->kind == PLAN_P2P && !strcmp(o->name, "kv_recv"))
			c.kv_recv_ahead += !(o->flags & PLAN_F_BLOCKING);
		if (o->kind == PLAN_P2P && !strcmp(o->name, "dkv_send")) {
			c.dkv_send++;
			*dkv_bytes = o->u.p2p.bytes;
		}
		if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "dkv_add"))
			c.dkv_add++;
		if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_cp_kv")) {
			c.ag++;
			*ag_count = o->u.coll.count;
		}
		if (o->kind == PLAN_COLL && !strcmp(o->name, "rs_cp_dkv"))
			c.rs++;
		if (o->kind == PLAN_COMPUTE && o->u.compute.kernel == PLAN_K_ATTN)
			*(strcmp(o->name, "attn_recompute") ? &c.attn : &c.attn_rc) += 1;
	}
	return c;
}

/* whether op `a` depends directly on an op named `name` */
static bool deps_on(const struct plan *p, const struct plan_op *a, const char *name)
{
	const uint32_t *d = plan_op_deps(p, a);
	for (uint32_t k = 0; k < a->ndeps; k++)
		if (!strcmp(p->ops[d[k]].name, name))
			return true;
	return false;
}

static void test_cp_exchange(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_megatron(j);
	fx_degrees(j, 1, 1, 4, 1, 1);
	int64_t kvw = 1024 * 2 * 4096; /* the rank's 1,024 of 4,096 tokens of K and V */
	struct plan p;
	int64_t dkv = 0, agc = 0;
	j->strat.cp_kind = STRAT_CP_RING;
	if (build(j, 0, &p)) {
		struct cp_counts c = cp_layer(&p, &dkv, &agc);
		CHECK_EQ_INT(t, c.kv_send, 6);
		CHECK_EQ_INT(t, c.kv_recv_ahead, 6);
		CHECK_EQ_INT(t, c.dkv_send, 4);
		CHECK_EQ_INT(t, c.dkv_add, 3);
		CHECK_EQ_INT(t, c.attn, 8);
		CHECK_EQ_INT(t, dkv, kvw * 2);
		CHECK_EQ_INT(t, c.ag + c.rs, 0);
		/* round r's kernel waits for the receive posted before round r - 1's */
		int round = 0;
		size_t prev = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->layer != 0 || o->micro != 0 || o->phase != PLAN_PHASE_FWD ||
			    strcmp(o->name, "attn"))
				continue;
			bool waits = deps_on(&p, o, "kv_recv");
			CHECK(t, waits == (round > 0));
			if (round > 0) {
				bool ahead = false;
				const uint32_t *d = plan_op_deps(&p, o);
				for (uint32_t k = 0; k < o->ndeps; k++)
					ahead |= !strcmp(p.ops[d[k]].name, "kv_recv") && d[k] < prev;
				CHECK(t, ahead);
			}
			prev = i;
			round++;
		}
		CHECK_EQ_INT(t, round, 4);
		plan_release(&p);
	}
	j->strat.recompute = STRAT_RECOMPUTE_SELECTIVE; /* recompute_modules: core_attn */
	j->strat.recompute_modules = STRAT_RC_CORE_ATTN;
	if (build(j, 0, &p)) {
		struct cp_counts c = cp_layer(&p, &dkv, &agc);
		CHECK_EQ_INT(t, c.attn_rc, 4);
		CHECK_EQ_INT(t, c.kv_send, 9);
		plan_release(&p);
	}
	j->strat.recompute = STRAT_RECOMPUTE_NONE;
	j->strat.cp_kind = STRAT_CP_ALLGATHER;
	if (build(j, 0, &p)) {
		struct cp_counts c = cp_layer(&p, &dkv, &agc);
		CHECK_EQ_INT(t, c.ag, 2);
		CHECK_EQ_INT(t, c.rs, 1);
		CHECK_EQ_INT(t, agc, kvw);
		CHECK_EQ_INT(t, c.attn, 2);
		CHECK_EQ_INT(t, c.kv_send + c.dkv_send + c.dkv_add, 0);
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].layer == 0 && !strcmp(p.ops[i].name, "attn")) {
				CHECK_EQ_INT(t, p.ops[i].u.compute.s_q, 1024);
				CHECK_EQ_INT(t, p.ops[i].u.compute.s_kv, 4096);
			}
		plan_release(&p);
	}
	j->strat.framework = STRAT_FSDP; /* PyTorch's ring attention, all-gather rotation */
	j->strat.async_tp_allreduce = false;
	if (build(j, 0, &p)) {
		struct cp_counts c = cp_layer(&p, &dkv, &agc);
		CHECK_EQ_INT(t, c.ag, 2);
		CHECK_EQ_INT(t, c.rs + c.kv_send, 0);
		CHECK_EQ_INT(t, c.attn, 8);
		CHECK_EQ_INT(t, c.dkv_send, 4);
		CHECK_EQ_INT(t, dkv, kvw * 4); /* fp32 */
		int round = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->layer == 0 && o->micro == 0 && o->phase == PLAN_PHASE_FWD &&
			    !strcmp(o->name, "attn"))
				CHECK(t, deps_on(&p, o, "ag_cp_kv") == (round++ == 1));
		}
		plan_release(&p);
	}
	free(j);
}

static void test_flops_gpt_interleaved(struct test_ctx *t)
{
	struct job *j = fx_job(16);
	fx_gpt(&j->model, 24, 2048, 16);
	j->seq = 2048;
	fx_megatron(j);
	j->strat.schedule = STRAT_SCHED_INTERLEAVED;
	j->strat.vp = 3;
	j->strat.sequence_parallel = true;
	fx_degrees(j, 2, 4, 1, 2, 8);
	double want = formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	CHECK_NEAR(t, sum_model_flops(j),
		   model_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step, 1e-9);
	free(j);
}


static void test_flops_moe(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_moe(j);
	j->strat.ep = 4;
	fx_degrees(j, 2, 1, 1, 2, 2);
	double want = formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	double got = sum_model_flops(j);
	double mf = model_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	printf("#   moe 8 experts top-2 ep4 tp2: plan %.6e, formula %.6e, model.c %.6e\n", got, want,
	       mf);
	CHECK_NEAR(t, got, want, 1e-9);
	CHECK_NEAR(t, got, mf, 1e-9);
	/* the plan has the dispatch and combine all-to-alls over the EP group */
	struct plan p;
	if (build(j, 0, &p)) {
		int a2a = 0;
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].kind == PLAN_COLL && p.ops[i].u.coll.coll == PLAN_ALL_TO_ALL &&
			    p.ops[i].u.coll.group == JOB_GROUP_EP)
				a2a++;
		/* 4 layers x 2 micro x (2 fwd + 2 bwd) */
		CHECK_EQ_INT(t, a2a, 4 * 2 * 4);
		plan_release(&p);
	}
	free(j);
}

/* every member of a group issues the same collectives, in the same order, with the same seq */
static void check_group_match(struct test_ctx *t, const struct job *j, int64_t r1, int64_t r2,
			      enum job_group g)
{
	struct plan a, b;
	if (!build(j, r1, &a))
		return;
	if (!build(j, r2, &b)) {
		plan_release(&a);
		return;
	}
	size_t ia = 0, ib = 0, n = 0;
	for (;;) {
		while (ia < a.nops && !(a.ops[ia].kind == PLAN_COLL && a.ops[ia].u.coll.group == g))
			ia++;
		while (ib < b.nops && !(b.ops[ib].kind == PLAN_COLL && b.ops[ib].u.coll.group == g))
			ib++;
		if (ia == a.nops || ib == b.nops)
			break;
		const struct plan_op *x = &a.ops[ia], *y = &b.ops[ib];
		if (x->u.coll.coll != y->u.coll.coll || x->u.coll.count != y->u.coll.count ||
		    x->u.coll.seq != y->u.coll.seq || (int64_t)n != x->u.coll.seq) {
			printf("#   group %s: ranks %lld/%lld differ at collective %zu\n",
			       job_group_name(g), (long long)r1, (long long)r2, n);
			t->failed_checks++;
			break;
		}
		ia++, ib++, n++;
	}
	CHECK(t, ia == a.nops && ib == b.nops);
	CHECK(t, n > 0);
	plan_release(&a);
	plan_release(&b);
}

static struct job *moe_job(void);

static void test_coll_seq_match(struct test_ctx *t)
{
	struct job *j = fx_job(16);
	fx_megatron(j);
	j->strat.distributed_optimizer = true;
	j->strat.sequence_parallel = true;
	fx_degrees(j, 2, 2, 2, 1, 4); /* tp2 cp2 dp2 pp2 */
	struct job_coord c0 = {0, 0, 0, 1}, c;
	int64_t r0 = job_rank_of(j, &c0);
	c = c0, c.tp = 1;
	check_group_match(t, j, r0, job_rank_of(j, &c), JOB_GROUP_TP);
	c = c0, c.cp = 1;
	check_group_match(t, j, r0, job_rank_of(j, &c), JOB_GROUP_DP_CP);
	/* ZeRO-3 on a plain data-parallel job: gathers and reduce-scatters match */
	struct job *z = fx_job(8);
	z->strat.zero_stage = 3;
	z->strat.overlap_comm = true;
	fx_degrees(z, 1, 1, 1, 1, 2);
	check_group_match(t, z, 0, 5, JOB_GROUP_DP);
	/* DeepSpeed pipeline: the loss broadcast over the pipe group matches across stages */
	struct job *d = fx_job(8);
	d->strat.zero_stage = 1;
	fx_degrees(d, 2, 2, 1, 1, 4);
	check_group_match(t, d, 0, 4, JOB_GROUP_PP);
	check_group_match(t, d, 0, 2, JOB_GROUP_DP);
	/* Megatron-Core's router loss sums its token counts over TP x CP: ranks 0-3 of tp2 cp2 */
	struct job *m = moe_job();
	m->strat.moe_aux_loss_coeff = 1e-3;
	m->strat.sequence_parallel = true;
	fx_degrees(m, 2, 1, 2, 1, 1);
	m->strat.ep = 2;
	int64_t mem[4], idx = -1;
	CHECK_EQ_INT(t, job_group_size(m, JOB_GROUP_TP_CP), 4);
	CHECK_EQ_INT(t, job_group_members(m, JOB_GROUP_TP_CP, 6, mem, &idx), 4);
	CHECK(t, mem[0] == 4 && mem[1] == 5 && mem[2] == 6 && mem[3] == 7 && idx == 2);
	check_group_match(t, m, 0, 3, JOB_GROUP_TP_CP);
	free(m);
	free(j);
	free(z);
	free(d);
}

/* Tied embeddings on two pipeline stages: the first and the last stage all-reduce their
 * word-embedding grads (V/tp x h, in the grad accumulation dtype) in the embedding group, which
 * pairs stage 0 with stage pp-1 at the same tp/cp/dp; a middle stage is alone in its group and
 * issues nothing; untied or pp = 1: nothing. */
static int count_named(const struct plan *p, const char *name, int64_t *count)
{
	int n = 0;
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].kind == PLAN_COLL && !strcmp(p->ops[i].name, name)) {
			n++;
			*count = p->ops[i].u.coll.count;
		}
	return n;
}

static void test_tied_embedding_grads(struct test_ctx *t)
{
	struct job *j = fx_job(16);
	fx_gpt(&j->model, 24, 2048, 16); /* tied, V 51200 */
	j->seq = j->model.seq_len;
	fx_megatron(j);
	fx_degrees(j, 2, 4, 1, 1, 4); /* tp 2, pp 4, dp 2 */
	struct job_coord first = {1, 0, 1, 0}, mid = first, last = first;
	mid.pp = 2, last.pp = 3;
	int64_t rf = job_rank_of(j, &first), rm = job_rank_of(j, &mid), rl = job_rank_of(j, &last);
	int64_t members[2], idx = -1;
	CHECK_EQ_INT(t, job_group_members(j, JOB_GROUP_EMB, rl, members, &idx), 2);
	CHECK_EQ_INT(t, members[0], rf);
	CHECK_EQ_INT(t, members[1], rl);
	CHECK_EQ_INT(t, idx, 1);
	CHECK_EQ_INT(t, job_group_members(j, JOB_GROUP_EMB, rm, members, &idx), 1);
	CHECK_EQ_INT(t, members[0], rm);
	CHECK(t, job_group_color(j, JOB_GROUP_EMB, rf) == job_group_color(j, JOB_GROUP_EMB, rl));
	/* a middle rank's group is itself: its color is its own rank (the executor splits MPI and
	 * NCCL communicators by it; reading past its one member hung MPI_Comm_split) */
	CHECK_EQ_INT(t, job_group_color(j, JOB_GROUP_EMB, rm), rm);
	struct plan p;
	int64_t count = 0;
	const int64_t ranks[3] = {rf, rm, rl};
	for (int k = 0; k < 3; k++)
		if (build(j, ranks[k], &p)) {
			CHECK_EQ_INT(t, count_named(&p, "ar_embed", &count), k == 1 ? 0 : 1);
			if (k != 1)
				CHECK_EQ_INT(t, count, 51200 / 2 * 2048);
			plan_release(&p);
		}
	/* an OPT-style narrower embedding (proj_dim) is V x proj_dim */
	j->model.proj_dim = 512;
	if (build(j, rf, &p)) {
		CHECK_EQ_INT(t, count_named(&p, "ar_embed", &count), 1);
		CHECK_EQ_INT(t, count, 51200 / 2 * 512);
		plan_release(&p);
	}
	j->model.proj_dim = 0;
	check_group_match(t, j, rf, rl, JOB_GROUP_EMB);
	j->model.tied_embeddings = false;
	if (build(j, rf, &p)) {
		CHECK_EQ_INT(t, count_named(&p, "ar_embed", &count), 0);
		plan_release(&p);
	}
	j->model.tied_embeddings = true;
	fx_degrees(j, 2, 1, 1, 1, 4); /* pp 1: one stage holds both */
	if (build(j, 0, &p)) {
		CHECK_EQ_INT(t, count_named(&p, "ar_embed", &count), 0);
		plan_release(&p);
	}
	free(j);
}

/* sends from src to dst and receives at dst from src pair up by seq, with the same bytes */
static void check_p2p_pair(struct test_ctx *t, const struct plan *src, const struct plan *dst,
			   bool expect)
{
	size_t is = 0, id = 0, n = 0;
	for (;;) {
		while (is < src->nops &&
		       !(src->ops[is].kind == PLAN_P2P && (src->ops[is].flags & PLAN_F_SEND) &&
			 src->ops[is].u.p2p.peer == dst->rank))
			is++;
		while (id < dst->nops &&
		       !(dst->ops[id].kind == PLAN_P2P && !(dst->ops[id].flags & PLAN_F_SEND) &&
			 dst->ops[id].u.p2p.peer == src->rank))
			id++;
		if (is == src->nops || id == dst->nops)
			break;
		n++;
		is++, id++;
	}
	CHECK(t, is == src->nops && id == dst->nops); /* same number on both sides */
	/* every send's (seq, bytes) is received exactly once */
	for (size_t i = 0; i < src->nops; i++) {
		const struct plan_op *s = &src->ops[i];
		if (s->kind != PLAN_P2P || !(s->flags & PLAN_F_SEND) || s->u.p2p.peer != dst->rank)
			continue;
		int found = 0;
		for (size_t k = 0; k < dst->nops; k++) {
			const struct plan_op *r = &dst->ops[k];
			if (r->kind == PLAN_P2P && !(r->flags & PLAN_F_SEND) &&
			    r->u.p2p.peer == src->rank && r->u.p2p.seq == s->u.p2p.seq)
				found += r->u.p2p.bytes == s->u.p2p.bytes;
		}
		if (found != 1) {
			printf("#   send seq %lld %lld->%lld received %d times\n",
			       (long long)s->u.p2p.seq, (long long)src->rank, (long long)dst->rank,
			       found);
			t->failed_checks++;
			break;
		}
	}
	CHECK(t, (n > 0) == expect);
}

static void test_p2p_match(struct test_ctx *t)
{
	enum strat_schedule sched[] = {STRAT_SCHED_DS_1F1B, STRAT_SCHED_1F1B,
				       STRAT_SCHED_INTERLEAVED, STRAT_SCHED_GPIPE};
	for (int k = 0; k < 4; k++) {
		struct job *j = fx_job(4);
		fx_megatron(j);
		j->strat.schedule = sched[k];
		j->strat.vp = 2;
		fx_degrees(j, 1, 4, 1, 1, 8);
		struct plan p[4];
		for (int s = 0; s < 4; s++)
			build(j, s, &p[s]);
		for (int s = 0; s < 4; s++) {
			bool wrap = s == 3, inter = sched[k] == STRAT_SCHED_INTERLEAVED;
			check_p2p_pair(t, &p[s], &p[(s + 1) % 4], !wrap || inter);
			check_p2p_pair(t, &p[(s + 1) % 4], &p[s], !wrap || inter);
		}
		for (int s = 0; s < 4; s++)
			plan_release(&p[s]);
		free(j);
	}
	/* ring context parallel: KV blocks around the cp ring */
	struct job *j = fx_job(2);
	fx_degrees(j, 1, 1, 2, 1, 1);
	struct plan a, b;
	if (build(j, 0, &a) && build(j, 1, &b)) {
		check_p2p_pair(t, &a, &b, true);
		check_p2p_pair(t, &b, &a, true);
		plan_release(&a);
		plan_release(&b);
	}
	free(j);
}

/* structure: deps point backwards, FREE follows its ALLOC, streams and names are set */
static void check_structure(struct test_ctx *t, const struct plan *p)
{
	char *alloced = calloc((size_t)p->nbufs + 1, 1);
	int bad = 0;
	for (size_t i = 0; i < p->nops && !bad; i++) {
		const struct plan_op *op = &p->ops[i];
		const uint32_t *d = plan_op_deps(p, op);
		bad |= op->id != i;
		for (uint32_t k = 0; k < op->ndeps; k++)
			bad |= d[k] >= op->id;
		bad |= op->stream >= PLAN_NUM_STREAMS || !op->name;
		if (op->kind == PLAN_ALLOC) {
			bad |= op->u.mem.buf < 0 || op->u.mem.buf >= p->nbufs || alloced[op->u.mem.buf];
			if (!bad)
				alloced[op->u.mem.buf] = 1;
		} else if (op->kind == PLAN_FREE) {
			bad |= op->u.mem.buf < 0 || op->u.mem.buf >= p->nbufs ||
			       alloced[op->u.mem.buf] != 1;
			if (!bad)
				alloced[op->u.mem.buf] = 2;
		} else if (op->kind == PLAN_COMPUTE) {
			bad |= op->u.compute.flops < 0 || op->u.compute.bytes < 0;
		}
		if (bad)
			printf("#   op %zu (%s %s) is malformed\n", i, plan_kind_name(op->kind), op->name);
	}
	CHECK(t, !bad);
	free(alloced);
}

/* sends the next compute op waits for: DeepSpeed's pipeline engine blocks on p2p.send,
 * Megatron's isend does not (its host sync after each p2p batch is the simulator's) */
static int gated_sends(const struct plan *p, bool direct)
{
	int n = 0;
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *o = &p->ops[i];
		if (o->kind != PLAN_P2P || !(o->flags & PLAN_F_SEND))
			continue;
		/* the next compute op waits for the send or for a later op of its (in-order)
		 * stream, such as the receive that follows it */
		for (size_t k = i + 1; k < p->nops; k++) {
			const struct plan_op *c = &p->ops[k];
			if (c->kind != PLAN_COMPUTE)
				continue;
			bool on_send = false;
			for (uint32_t d = 0; d < c->ndeps; d++) {
				const struct plan_op *w = &p->ops[p->deps[c->dep_off + d]];
				on_send |= direct ? w->id == o->id : w->stream == o->stream && w->id >= o->id;
			}
			n += on_send;
			break;
		}
	}
	return n;
}

/* the p2p ops of a plan in order, one letter each: s/r for send/recv, a/g for act/grad */
static void p2p_order(const struct plan *p, char *out, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < p->nops && k + 3 < n; i++) {
		const struct plan_op *o = &p->ops[i];
		if (o->kind != PLAN_P2P)
			continue;
		out[k++] = o->flags & PLAN_F_SEND ? 's' : 'r';
		out[k++] = o->name && strstr(o->name, "grad") ? 'g' : 'a';
		out[k++] = ' ';
	}
	out[k ? k - 1 : 0] = '\0';
}

static void test_ds_pipe_blocking_send(struct test_ctx *t)
{
	struct job *j = fx_job(2);
	fx_degrees(j, 1, 2, 1, 1, 4);
	struct plan p;
	char order[256];
	/* DeepSpeed's TrainSchedule sends a step's result at the stage's next step: stage 0
	 * runs F0 | sa0 F1 | rg0 sa1 B0 | F2 | rg1 sa2 B1 | F3 | rg2 sa3 B2 | rg3 B3, and every
	 * send holds the compute after it (blocking p2p.send) */
	if (build(j, 0, &p)) {
		p2p_order(&p, order, sizeof(order));
		CHECK_STR(t, order, "sa rg sa rg sa rg sa rg");
		CHECK_EQ_INT(t, gated_sends(&p, true), 4);
		plan_release(&p);
	}
	/* the last stage: ra0 F0 | B0 | sg0 ra1 F1 | B1 | ... | B3 | sg3 */
	if (build(j, 1, &p)) {
		p2p_order(&p, order, sizeof(order));
		CHECK_STR(t, order, "ra sg ra sg ra sg ra sg");
		/* through the receive after it, which waits behind the send in the p2p stream */
		CHECK_EQ_INT(t, gated_sends(&p, false), 4);
		plan_release(&p);
	}
	/* one micro-batch: stage 0's activation goes at the idle step after F0, before it waits
	 * for the grad (sending it after the receive would deadlock) */
	fx_degrees(j, 1, 2, 1, 1, 1);
	if (build(j, 0, &p)) {
		p2p_order(&p, order, sizeof(order));
		CHECK_STR(t, order, "sa rg");
		plan_release(&p);
	}
	/* ring attention's KV exchange is batched isend/irecv under DeepSpeed too: its sends
	 * must not hold the stream (every rank sends first: blocking sends would deadlock) */
	free(j);
	j = fx_job(4);
	fx_degrees(j, 1, 2, 2, 1, 2);
	j->strat.cp_kind = STRAT_CP_RING;
	if (build(j, 0, &p)) {
		int kv = 0, kv_blocking = 0, pipe_blocking = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_P2P || !(o->flags & PLAN_F_SEND))
				continue;
			bool is_kv = o->u.p2p.seq % PLAN_P2P_KINDS == PLAN_P2P_KV;
			kv += is_kv;
			kv_blocking += is_kv && (o->flags & PLAN_F_BLOCKING);
			pipe_blocking += !is_kv && (o->flags & PLAN_F_BLOCKING);
		}
		CHECK(t, kv > 0);
		CHECK_EQ_INT(t, kv_blocking, 0);
		CHECK_EQ_INT(t, pipe_blocking, 2); /* stage 0's two activations */
		plan_release(&p);
	}
	free(j);
	j = fx_job(2);
	fx_degrees(j, 1, 2, 1, 1, 4);
	fx_megatron(j);
	j->strat.schedule = STRAT_SCHED_1F1B;
	if (build(j, 0, &p)) {
		CHECK_EQ_INT(t, gated_sends(&p, true), 0);
		plan_release(&p);
	}
	free(j);
}

/* A micro-batch's inputs reach the GPU on the first and the last pipeline stage, one blocking
 * copy (PLAN_F_BATCH) per micro-batch before that stage's forward; middle stages load none,
 * and the first kernel of the forward waits for the copy. */
static void test_batch_inputs(struct test_ctx *t)
{
	struct job *j = fx_job(4);
	fx_degrees(j, 1, 4, 1, 1, 6);
	for (int64_t r = 0; r < 4; r++) {
		struct plan p;
		if (!build(j, r, &p))
			continue;
		int n = 0, waited = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *op = &p.ops[i];
			if (!(op->flags & PLAN_F_BATCH))
				continue;
			n += op->kind == PLAN_COPY && op->u.copy.dir == PLAN_H2D && op->phase == PLAN_PHASE_FWD &&
			     op->u.copy.bytes == 8 * j->strat.micro_batch * j->seq;
			for (size_t k = i + 1; k < p.nops; k++)
				if (p.ops[k].kind == PLAN_COMPUTE) {
					const uint32_t *d = plan_op_deps(&p, &p.ops[k]);
					for (uint32_t q = 0; q < p.ops[k].ndeps; q++)
						waited += d[q] == op->id;
					break;
				}
		}
		CHECK_EQ_INT(t, n, r == 0 || r == 3 ? 6 : 0);
		CHECK_EQ_INT(t, waited, n);
		plan_release(&p);
	}
	free(j);
}

/* DeepSpeed's pipeline engine with TP > 1 splits what it sends between stages over the TP
 * group and the receiver all-gathers it (pipe_partitioned / grad_partitioned, default true);
 * turned off, or under Megatron without SP, the whole activation goes. */
static int64_t first_p2p_bytes(const struct plan *p, const char *name, int *gathers)
{
	int64_t bytes = -1;
	*gathers = 0;
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *op = &p->ops[i];
		if (op->kind == PLAN_P2P && !strcmp(op->name, name) && bytes < 0)
			bytes = op->u.p2p.bytes;
		if (op->kind == PLAN_COLL && op->u.coll.coll == PLAN_ALL_GATHER &&
		    (!strcmp(op->name, "ag_pipe_act") || !strcmp(op->name, "ag_pipe_grad")))
			(*gathers)++;
	}
	return bytes;
}

/* rank's first p2p op `name` moves `bytes`, and the plan has `gathers` ag_pipe_* all-gathers */
static void expect_p2p(struct test_ctx *t, const struct job *j, int64_t rank, const char *name,
		       int64_t bytes, int gathers)
{
	struct plan p;
	int g;
	if (!build(j, rank, &p))
		return;
	CHECK_EQ_INT(t, first_p2p_bytes(&p, name, &g), bytes);
	CHECK_EQ_INT(t, g, gathers);
	plan_release(&p);
}

static void test_ds_pipe_partitioned(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 2, 2, 1, 1, 4); /* TP 2, PP 2, DP 2, 4 micro-batches */
	j->strat.pipe_partitioned = j->strat.grad_partitioned = true;
	int64_t full = 4096LL * 4096 * 2;
	/* stage 0 sends activations and receives grads, gathering each of the 4 */
	expect_p2p(t, j, 0, "send_act", full / 2, 4);
	expect_p2p(t, j, 0, "recv_grad", full / 2, 4);
	struct plan p;
	if (build(j, 0, &p)) {
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].kind == PLAN_COLL && !strcmp(p.ops[i].name, "ag_pipe_grad"))
				CHECK_EQ_INT(t, p.ops[i].u.coll.count, 4096LL * 4096 / 2);
		plan_release(&p);
	}
	expect_p2p(t, j, 4, "recv_act", full / 2, 4); /* stage 1 receives activations */
	/* each split send first makes its PartitionedTensor's meta with a blocking .to(): the
	 * host waits (PLAN_F_HOSTWAIT) for the forward (stage 0) or backward (stage 1) before */
	for (int64_t r = 0; r < 8; r += 4) {
		if (!build(j, r, &p))
			continue;
		int metas = 0, sends = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			sends += o->kind == PLAN_P2P && (o->flags & PLAN_F_SEND);
			if (o->kind != PLAN_COPY || strcmp(o->name, "pipe_meta") != 0)
				continue;
			metas++;
			CHECK(t, (o->flags & PLAN_F_HOSTWAIT) && o->ndeps == 1);
			CHECK(t, o->ndeps == 1 && p.ops[plan_op_deps(&p, o)[0]].kind == PLAN_COMPUTE);
			CHECK(t, i + 1 < p.nops && p.ops[i + 1].kind == PLAN_P2P); /* then the send */
		}
		CHECK_EQ_INT(t, sends, 4);
		CHECK_EQ_INT(t, metas, 4);
		plan_release(&p);
	}
	j->strat.pipe_partitioned = false;
	expect_p2p(t, j, 4, "recv_act", full, 0);
	fx_megatron(j);
	j->strat.sequence_parallel = false;
	expect_p2p(t, j, 0, "send_act", full, 0);
	/* Megatron-LM's scatter-gather (2021-02 to 2023-01): the same split, both directions,
	 * gathered right after the receive and nothing else (no PartitionedTensor copies) */
	j->strat.scatter_gather_p2p = true;
	expect_p2p(t, j, 0, "send_act", full / 2, 4);
	expect_p2p(t, j, 4, "recv_act", full / 2, 4);
	if (build(j, 4, &p)) {
		int gathered = 0, copies = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			copies += o->kind == PLAN_COMPUTE && !strncmp(o->name, "pipe_", 5);
			if (o->kind != PLAN_COLL || strcmp(o->name, "ag_pipe_act") != 0)
				continue;
			const uint32_t *d = plan_op_deps(&p, o);
			gathered += o->ndeps == 1 && p.ops[d[0]].kind == PLAN_P2P &&
				    !strcmp(p.ops[d[0]].name, "recv_act") &&
				    o->u.coll.count == 4096LL * 4096 / 2;
		}
		CHECK_EQ_INT(t, gathered, 4);
		CHECK_EQ_INT(t, copies, 0);
		plan_release(&p);
	}
	j->strat.sequence_parallel = true; /* already split: nothing to gather */
	expect_p2p(t, j, 0, "send_act", full / 2, 0);
	free(j);
}

/* The index of the next op named `name` from `i` on (p->nops: none) */
static size_t next_named(const struct plan *p, size_t i, const char *name)
{
	while (i < p->nops && strcmp(p->ops[i].name ? p->ops[i].name : "", name) != 0)
		i++;
	return i;
}

/* DeepSpeed's PartitionedTensor around a split boundary tensor: the sender clones its part;
 * the receiver clones what it received twice, then full() zeroes a flat buffer, gathers the
 * parts into it and clones it; a backward restores the stage's own output the same way,
 * after its send when the grad is split (before the receive when it comes whole). Before
 * 0.12.4 the gather goes into a list (own part copied in, every part copied out on the NCCL
 * stream); before 0.12.6 each full() starts with a host read of the meta. */
static void test_ds_partitioned_tensor(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 2, 2, 1, 1, 4); /* TP 2, PP 2, DP 2, 4 micro-batches */
	j->strat.pipe_partitioned = j->strat.grad_partitioned = true;
	double full = 4096.0 * 4096 * 2, part = full / 2; /* bytes: T x h x 2, half a rank */
	for (int old = 0; old < 2; old++) {
		j->strat.ds_pipe_list_gather = j->strat.ds_pipe_meta_sync = old;
		for (int64_t r = 0; r < 8; r += 4) {
			struct plan p;
			if (!build(j, r, &p))
				continue;
			int parts = 0, zeros = 0, clones = 0, in_clones = 0, outs = 0, reads = 0, copy_outs = 0;
			for (size_t i = 0; i < p.nops; i++) {
				const struct plan_op *o = &p.ops[i];
				const char *nm = o->name ? o->name : "";
				if (o->kind == PLAN_COMPUTE && !strcmp(nm, "pipe_part")) {
					parts++;
					CHECK(t, o->u.compute.bytes == 2 * part);
					CHECK(t, !strcmp(p.ops[i + 1].name, "pipe_meta"));
				} else if (o->kind == PLAN_COMPUTE && !strcmp(nm, "pipe_in_clone")) {
					in_clones++;
					CHECK(t, o->u.compute.bytes == 4 * part && o->u.compute.extra_kernels == 3);
					CHECK(t, p.ops[i - 1].kind == PLAN_P2P && !strcmp(p.ops[i - 1].name, "recv_act"));
				} else if (o->kind == PLAN_COMPUTE && !strcmp(nm, "pipe_zero")) {
					zeros++;
					CHECK(t, o->u.compute.bytes == (old ? full + 2 * part : full));
					CHECK_EQ_INT(t, o->host_views, old ? 2 : 0);
					/* the meta read the host waits for comes first in old releases */
					const struct plan_op *q = &p.ops[i - (p.ops[i - 1].kind == PLAN_ALLOC ? 2 : 1)];
					bool read = q->kind == PLAN_COPY && q->u.copy.dir == PLAN_D2H &&
						    (q->flags & PLAN_F_HOSTWAIT) && !strcmp(q->name, "pipe_meta_read");
					CHECK_EQ_INT(t, read, old);
					reads += read;
					/* then the gather, (old) the copy out, and the clone */
					size_t g = i + 1;
					CHECK(t, p.ops[g].kind == PLAN_COLL && p.ops[g].u.coll.coll == PLAN_ALL_GATHER &&
						   p.ops[g].u.coll.count == 4096LL * 4096 / 2);
					size_t c = g + 1;
					if (old) {
						CHECK(t, !strcmp(p.ops[c].name, "ag_copy_out") &&
							   p.ops[c].stream == PLAN_STREAM_COMM_TP &&
							   p.ops[c].u.compute.bytes == 2 * full &&
							   p.ops[c].u.compute.extra_kernels == 1);
						copy_outs++;
						c++;
					}
					CHECK(t, !strcmp(p.ops[c].name, "pipe_clone") &&
						   p.ops[c].u.compute.bytes == 2 * full);
					clones++;
				} else if (o->kind == PLAN_COLL && !strcmp(nm, "ag_pipe_out")) {
					outs++;
					/* after this step's send of the previous activation, before the grad's gather */
					size_t g = next_named(&p, i, "ag_pipe_grad"), nx = next_named(&p, i, "recv_grad");
					CHECK(t, g < p.nops && g < nx);
				}
			}
			/* stage 0: 4 sends of activations, 4 backwards restoring its output and gathering
			 * the grad; stage 1: 4 sends of grads, 4 forwards gathering the input */
			CHECK_EQ_INT(t, parts, 4);
			CHECK_EQ_INT(t, in_clones, r ? 4 : 0);
			CHECK_EQ_INT(t, outs, r ? 0 : 4);
			CHECK_EQ_INT(t, zeros, r ? 4 : 8);
			CHECK_EQ_INT(t, clones, zeros);
			CHECK_EQ_INT(t, reads, old ? zeros : 0);
			CHECK_EQ_INT(t, copy_outs, old ? zeros : 0);
			plan_release(&p);
		}
	}
	/* the grad comes whole: _exec_recv_grads restores the output before the receive */
	j->strat.grad_partitioned = false;
	struct plan p;
	if (build(j, 0, &p)) {
		size_t o = next_named(&p, 0, "ag_pipe_out"), r = next_named(&p, 0, "recv_grad");
		CHECK(t, o < r && r < p.nops);
		CHECK_EQ_INT(t, next_named(&p, 0, "ag_pipe_grad"), p.nops);
		plan_release(&p);
	}
	free(j);
}

/* DeepSpeed's partition_activations keeps 1/tp of each checkpointed layer input and gathers
 * it over TP before the recompute; with cpu_checkpointing the gather waits for the copy back */
static void test_ds_partition_activations(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 2, 1, 1, 1, 3); /* TP 2, DP 4, 3 micro-batches of llama-2-7b's 32 layers */
	j->strat.recompute = STRAT_RECOMPUTE_FULL;
	for (int mode = 0; mode < 3; mode++) {
		j->strat.partition_activations = mode > 0;
		j->strat.cpu_checkpointing = mode == 2;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int n = 0, after_copy = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COLL || strcmp(o->name, "ag_ckpt") != 0)
				continue;
			n++;
			CHECK_EQ_INT(t, o->u.coll.count, 4096LL * 4096 / 2);
			const uint32_t *d = plan_op_deps(&p, o);
			after_copy += o->ndeps == 1 && p.ops[d[0]].kind == PLAN_COPY;
		}
		CHECK_EQ_INT(t, n, mode ? 32 * 3 : 0);
		CHECK_EQ_INT(t, after_copy, mode == 2 ? 32 * 3 : 0);
		plan_release(&p);
	}
	free(j);
}

/* Gradient accumulation under DeepSpeed ZeRO 0/1: AccumulateGrad adds each micro-batch's
 * 16-bit grads into param.grad from the second one on (6 bytes per element); the
 * BF16_Optimizer (bf16, fp32 grad accumulation, stage 1) adds every micro-batch's into its
 * fp32 buffer (18); ZeRO-2 and Megatron (fused wgrad accumulation) have no such pass. */
static double grad_acc_bytes(const struct job *j, int *micro_mask)
{
	struct plan p;
	double bytes = 0;
	*micro_mask = 0;
	if (!build(j, 0, &p))
		return -1;
	for (size_t i = 0; i < p.nops; i++) {
		const struct plan_op *o = &p.ops[i];
		if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "grad_acc")) {
			bytes += o->u.compute.bytes;
			*micro_mask |= 1 << o->micro;
		}
	}
	plan_release(&p);
	return bytes;
}

static void test_ds_grad_accumulation(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 3);
	j->strat.zero_stage = 1;
	double trainable = fx_params(j);
	int mask;
	CHECK_NEAR(t, grad_acc_bytes(j, &mask), 2 * 6 * trainable, 1e-9);
	CHECK_EQ_INT(t, mask, 6); /* micro-batches 1 and 2 */
	j->strat.grad_accum_dtype = TW_FP32; /* the BF16_Optimizer */
	CHECK_NEAR(t, grad_acc_bytes(j, &mask), 3 * 18 * trainable, 1e-9);
	CHECK_EQ_INT(t, mask, 7);
	j->strat.grad_accum_dtype = TW_BF16;
	j->strat.zero_stage = 2;
	CHECK_NEAR(t, grad_acc_bytes(j, &mask), 0, 0);
	fx_megatron(j);
	CHECK_NEAR(t, grad_acc_bytes(j, &mask), 0, 0);
	free(j);
}

/* DeepSpeed's gradient copies before its collectives (reference/deepspeed.md §2.2, §2.4):
 * ZeRO-1/2 copy each grad into the IPG bucket and flatten the partition slices again for the
 * all-reduce (2 + 2 bytes each at 16 bits; without contiguous_gradients, flatten and copy back), ZeRO-3 copies into its bucket and interleaves the
 * per-rank chunks for the reduce-scatter; in a pipeline the last grad goes to the previous
 * stage before the reduction (ReduceGrads is the schedule's last step) */
static double named_bytes(const struct plan *p, const char *name)
{
	double bytes = 0;
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].kind == PLAN_COMPUTE && !strcmp(p->ops[i].name, name))
			bytes += p->ops[i].u.compute.bytes;
	return bytes;
}

/* FLOPs (or bytes) of the forward ops named name, recompute left out */
static double sum_fwd(const struct plan *p, const char *name, bool bytes)
{
	double f = 0;
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *op = &p->ops[i];
		if (op->kind == PLAN_COMPUTE && op->phase == PLAN_PHASE_FWD &&
		    !(op->flags & PLAN_F_RECOMPUTE) && !strcmp(op->name, name))
			f += bytes ? op->u.compute.bytes : op->u.compute.flops;
	}
	return f;
}

/* MLA (DeepSeek-V3's shapes on Llama-2-7B's width): the forward GEMMs in front of attention and
 * out_proj are 2 x the attention weights per token and layer (model.c's count); under TP 2 the
 * down projections are duplicated on each rank and the up projections and out_proj split */
static double fwd_gemm_flops(const struct plan *p)
{
	static const char *const names[] = { "q_down", "q_up", "kv_down", "kv_up", "out_proj" };
	double f = 0;
	for (int k = 0; k < 5; k++)
		f += sum_fwd(p, names[k], false);
	return f;
}

static void test_mla_gemms(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	struct model *m = &j->model;
	m->kv_lora_rank = 512, m->q_lora_rank = 1536;
	m->qk_nope_head_dim = 128, m->qk_rope_head_dim = 64, m->v_head_dim = 128;
	const double h = 4096, H = 32, ql = 1536, kl = 512, qk = 192, v = 128;
	const double down = h * ql + h * (kl + 64), up = ql * H * qk + kl * H * (128 + v);
	const double out = H * v * h;
	struct model_params mp;
	model_count(m, &mp);
	CHECK_NEAR(t, mp.attn_per_layer, down + up + out + ql + kl, 0); /* + the latents' norms */
	double T = (double)j->strat.micro_batch * (double)m->seq_len;
	double per_step = (double)j->strat.grad_accum * (double)m->layers * T * 2.0;
	struct plan p;
	CHECK(t, build(j, 0, &p));
	CHECK_NEAR(t, fwd_gemm_flops(&p), per_step * (down + up + out), 1e-9);
	plan_release(&p);
	fx_degrees(j, 2, 1, 1, j->strat.micro_batch, j->strat.grad_accum);
	fx_megatron(j);
	j->strat.sequence_parallel = false;
	CHECK(t, build(j, 0, &p));
	CHECK_NEAR(t, fwd_gemm_flops(&p), per_step * (down + (up + out) / 2), 1e-9);
	plan_release(&p);
	/* SP: the down projections on this rank's half of the tokens, then the latents
	 * (1536 + 512 + 64 wide) gathered, not the hidden state */
	j->strat.sequence_parallel = true;
	CHECK(t, build(j, 0, &p));
	CHECK_NEAR(t, fwd_gemm_flops(&p), per_step * (down / 2 + (up + out) / 2), 1e-9);
	int64_t lat = 0, hid = 0;
	for (size_t i = 0; i < p.nops; i++)
		if (p.ops[i].kind == PLAN_COLL && p.ops[i].phase == PLAN_PHASE_FWD &&
		    !(p.ops[i].flags & PLAN_F_RECOMPUTE)) {
			lat += !strcmp(p.ops[i].name, "ag_sp_latents");
			if (!strcmp(p.ops[i].name, "ag_sp_latents"))
				CHECK_EQ_INT(t, p.ops[i].u.coll.count, (int64_t)T / 2 * (1536 + 512 + 64));
			hid += !strcmp(p.ops[i].name, "ag_sp") && p.ops[i].layer >= 0 &&
			       p.ops[i].u.coll.count == (int64_t)T / 2 * 4096;
		}
	CHECK_EQ_INT(t, lat, j->strat.grad_accum * m->layers);
	/* the hidden state is gathered once a layer, for the MLP; not for attention */
	CHECK_EQ_INT(t, hid, j->strat.grad_accum * m->layers);
	plan_release(&p);
	free(j);
}

/* the count of the last collective named name (-1: none) */
static int64_t coll_count(const struct plan *p, const char *name)
{
	int64_t n = -1;
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].kind == PLAN_COLL && !strcmp(p->ops[i].name, name))
			n = p->ops[i].u.coll.count;
	return n;
}

/* The forward attention FLOPs a rank's plan should carry: model.c's attn_core for its tokens,
 * half of it under TP 2 */
static double want_attn_fwd(const struct job *j)
{
	struct model_flops f;
	model_flops_fwd(&j->model, j->seq, &f);
	double T = (double)j->strat.micro_batch * (double)j->seq;
	return (double)j->strat.grad_accum * T * f.attn_core / 2;
}

/* Sliding-window attention in the plan: flash kernels run the window's share of the pairs in
 * whole tiles (model.c's attn_core, the MFU's model FLOPs, without them); unfused attention
 * computes the whole score matrix, half of which the op carries as causal (sim/compute.c
 * doubles it); q_norm and k_norm run on the local heads each way */
static void test_sliding_window_plan(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	struct model *m = &j->model;
	fx_megatron(j);
	fx_degrees(j, 2, 1, 1, j->strat.micro_batch, j->strat.grad_accum);
	m->sliding_window = j->seq / 4, m->full_every = 4, m->full_first = 3;
	m->qk_norm = true;
	double T = (double)j->strat.micro_batch * (double)j->seq;
	double mbs = (double)j->strat.grad_accum;
	struct plan p;
	CHECK(t, build(j, 0, &p));
	/* the kernels run whole 128-key tiles: a window of w costs one of w + 128 (the model
	 * FLOPs below keep w) */
	m->sliding_window += 128;
	CHECK_NEAR(t, sum_fwd(&p, "attn", false), want_attn_fwd(j), 1e-12);
	m->sliding_window -= 128;
	double hd = (double)m->head_dim;
	CHECK_NEAR(t, sum_fwd(&p, "q_norm", true) / sum_fwd(&p, "k_norm", true),
		   (double)m->heads / (double)m->kv_heads, 1e-12);
	CHECK_NEAR(t, sum_fwd(&p, "q_norm", true), mbs * m->layers * T * m->heads / 2 * hd * 2 * 2,
		   1e-12);
	plan_release(&p);
	CHECK_NEAR(t, sum_model_flops(j),
		   model_flops_per_token(m, j->seq) * (double)j->tokens_per_step, 1e-9);
	/* 3 of 4 layers windowed at a quarter of the sequence: 3/4 x (1/4)(7/8) + 1/4 x 1/2 of s^2 */
	double windowed = want_attn_fwd(j);
	m->sliding_window = 0, m->full_every = 0, m->full_first = 0;
	CHECK_NEAR(t, windowed / want_attn_fwd(j), (0.75 * 0.25 * 0.875 + 0.25 * 0.5) / 0.5, 1e-12);
	/* the executors' share: the windowed layers' with flash, the causal half on a global layer, and the band of keys the
	 * executors run */
	m->sliding_window = j->seq / 4, m->full_every = 4, m->full_first = 3;
	CHECK(t, build(j, 0, &p));
	int seen = 0;
	for (size_t i = 0; i < p.nops; i++) {
		const struct plan_op *o = &p.ops[i];
		if (o->kind != PLAN_COMPUTE || o->u.compute.kernel != PLAN_K_ATTN)
			continue;
		double share;
		int64_t band = plan_attn_band(j, o, &share);
		bool global = o->layer % 4 == 3;
		CHECK_NEAR(t, share, global ? 0.5 : 0.25 * 0.875, 1e-12);
		/* the band: the causal square's width, or 2 x 0.21875 of it */
		CHECK_EQ_INT(t, band, global ? o->u.compute.s_kv : llround(0.4375 * (double)o->u.compute.s_kv));
		seen++;
	}
	CHECK(t, seen > 0);
	plan_release(&p);
	/* unfused: the op carries the causal half of the whole matrix whatever the window */
	j->strat.flash_attention = false;
	m->sliding_window = 0, m->full_every = 0, m->full_first = 0;
	CHECK(t, build(j, 0, &p));
	double causal = sum_fwd(&p, "attn", false);
	plan_release(&p);
	m->sliding_window = j->seq / 4, m->full_every = 4, m->full_first = 3;
	CHECK(t, build(j, 0, &p));
	CHECK_NEAR(t, sum_fwd(&p, "attn", false), causal, 1e-12);
	for (size_t i = 0; i < p.nops; i++)
		if (p.ops[i].kind == PLAN_COMPUTE && p.ops[i].u.compute.kernel == PLAN_K_ATTN) {
			double share;
			CHECK_EQ_INT(t, plan_attn_band(j, &p.ops[i], &share), p.ops[i].u.compute.s_kv);
			CHECK_NEAR(t, share, 0.5, 1e-12);
		}
	plan_release(&p);
	free(j);
}

/* MLA's attention core: Q K^T over the 192-wide query-key heads, A V over the 128-wide value
 * heads, so the plan's attention FLOPs are model.c's attn_core; RoPE turns only the heads'
 * 64-wide rope part and the one shared key part; under SP the duplicated down projections
 * and the norms have partial grads, added over TP before the step (Megatron's
 * _allreduce_layernorm_grads), which a plain SP model makes for its norms only */
static void test_mla_attention_core(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	struct model *m = &j->model;
	m->kv_lora_rank = 512, m->q_lora_rank = 1536;
	m->qk_nope_head_dim = 128, m->qk_rope_head_dim = 64, m->v_head_dim = 128;
	fx_degrees(j, 2, 1, 1, j->strat.micro_batch, j->strat.grad_accum);
	fx_megatron(j);
	j->strat.sequence_parallel = true;
	double T = (double)j->strat.micro_batch * (double)j->seq;
	double mbs = (double)j->strat.grad_accum;
	struct plan p;
	CHECK(t, build(j, 0, &p));
	CHECK_NEAR(t, sum_fwd(&p, "attn", false), want_attn_fwd(j), 1e-12);
	const struct plan_op *a = NULL;
	for (size_t i = 0; i < p.nops && !a; i++)
		if (p.ops[i].kind == PLAN_COMPUTE && !strcmp(p.ops[i].name, "attn"))
			a = &p.ops[i];
	CHECK(t, a && a->u.compute.head_dim == 192 && a->u.compute.head_dim_v == 128);
	/* 16 heads a rank x 64 + the shared 64, 2 bytes read and written (fused) */
	CHECK_NEAR(t, sum_fwd(&p, "rope", true),
		   mbs * m->layers * T * (16.0 * 64 + 64) * 2 * 2, 1e-12);
	int64_t down = 4096 * 1536 + 1536 + 4096 * (512 + 64) + 512;
	CHECK_EQ_INT(t, coll_count(&p, "ar_sp_grads"), m->layers * (2 * 4096 + down) + 4096);
	plan_release(&p);
	/* no SP: every rank runs the down projections on all tokens; nothing to add */
	j->strat.sequence_parallel = false;
	CHECK(t, build(j, 0, &p));
	CHECK_EQ_INT(t, coll_count(&p, "ar_sp_grads"), -1);
	plan_release(&p);
	/* a plain model under SP: its norms */
	m->kv_lora_rank = m->q_lora_rank = 0;
	m->qk_nope_head_dim = m->qk_rope_head_dim = m->v_head_dim = 0;
	j->strat.sequence_parallel = true;
	CHECK(t, build(j, 0, &p));
	CHECK_EQ_INT(t, coll_count(&p, "ar_sp_grads"), m->layers * 2 * 4096 + 4096);
	CHECK_NEAR(t, sum_fwd(&p, "attn", false), want_attn_fwd(j), 1e-12);
	plan_release(&p);
	free(j);
}

/* MFU's model FLOPs under LoRA: no weight grads for the frozen weights (2 x forward for their
 * GEMMs), the attention core 3 x, 6 per adapter parameter; close to what the plan executes
 * outside recompute (its GEMMs and attention) */
static void test_lora_model_flops(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	double full = plan_model_flops_per_token(j);
	CHECK_NEAR(t, full, model_flops_per_token(&j->model, j->seq), 0);
	j->strat.lora_rank = 8;
	j->strat.lora_targets = STRAT_LORA_Q | STRAT_LORA_V;
	struct model_flops f;
	model_flops_fwd(&j->model, j->seq, &f);
	double adapters = 32.0 * 2 * 8 * (4096 + 4096);
	double want = 2 * (f.total - f.attn_core) + 3 * f.attn_core + 6 * adapters;
	CHECK_NEAR(t, plan_model_flops_per_token(j), want, 1e-12);
	CHECK(t, plan_model_flops_per_token(j) < 0.75 * full);
	j->strat.recompute = STRAT_RECOMPUTE_NONE;
	struct plan p;
	if (build(j, 0, &p)) {
		double ex = 0;
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].kind == PLAN_COMPUTE && !(p.ops[i].flags & PLAN_F_RECOMPUTE) &&
			    p.ops[i].phase != PLAN_PHASE_OPT)
				ex += p.ops[i].u.compute.flops;
		double tokens = (double)j->strat.micro_batch * (double)j->strat.grad_accum * (double)j->seq;
		printf("#   LoRA model FLOPs per token %.4g, executed %.4g\n", want, ex / tokens);
		CHECK_NEAR(t, ex / tokens, want, 0.03);
		plan_release(&p);
	}
	free(j);
}

static void test_ds_grad_copies(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 3);
	double psi = fx_params(j);
	struct plan p;
	const int stages[] = {1, 2, 3};
	const double ipg[] = {8 * psi, 3 * 8 * psi, 3 * 4 * psi}; /* once; per micro-batch */
	const double inter[] = {0, 0, 3 * 4 * psi};
	for (int i = 0; i < 3; i++) {
		j->strat.zero_stage = stages[i];
		if (!build(j, 0, &p))
			continue;
		CHECK_NEAR(t, named_bytes(&p, "ipg_copy"), ipg[i], 1e-9);
		CHECK_NEAR(t, named_bytes(&p, "rs_interleave"), inter[i], 1e-9);
		plan_release(&p);
	}
	/* without contiguous_gradients, allreduce_and_copy flattens the bucket and copies the
	 * reduced values back (2 + 2 bytes each), with reduce_scatter or without */
	j->strat.zero_stage = 1;
	j->strat.contiguous_gradients = false;
	for (int rs = 0; rs < 2; rs++) {
		j->strat.reduce_scatter = rs;
		if (build(j, 0, &p)) {
			CHECK_NEAR(t, named_bytes(&p, "ipg_copy"), 8 * psi, 1e-9);
			plan_release(&p);
		}
	}
	j->strat.contiguous_gradients = true, j->strat.reduce_scatter = false;
	if (build(j, 0, &p)) { /* the IPG bucket copy only: average_tensor all-reduces it */
		CHECK_NEAR(t, named_bytes(&p, "ipg_copy"), 4 * psi, 1e-9);
		plan_release(&p);
	}
	/* the pipeline's last stage: its last send_grad comes before its first ar_grads */
	j->strat.contiguous_gradients = j->strat.reduce_scatter = true;
	fx_degrees(j, 1, 2, 1, 1, 3);
	if (build(j, 4, &p)) {
		size_t last_send = 0, first_ar = 0;
		for (size_t i = 0; i < p.nops; i++) {
			if (!strcmp(p.ops[i].name, "send_grad"))
				last_send = i;
			if (!first_ar && !strcmp(p.ops[i].name, "ar_grads"))
				first_ar = i;
		}
		CHECK(t, last_send > 0 && first_ar > last_send);
		plan_release(&p);
	}
	free(j);
}

static void test_structure(struct test_ctx *t)
{
	for (int stage = 0; stage <= 3; stage++) {
		struct job *j = fx_job(8);
		j->strat.zero_stage = stage;
		j->strat.overlap_comm = stage == 3;
		j->strat.offload_optimizer = stage >= 2 ? STRAT_OFFLOAD_CPU : STRAT_OFFLOAD_NONE;
		j->strat.recompute = STRAT_RECOMPUTE_FULL;
		j->strat.cpu_checkpointing = true;
		fx_degrees(j, 1, 1, 1, 1, 2);
		struct plan p;
		if (build(j, 3, &p)) {
			check_structure(t, &p);
			plan_release(&p);
		}
		free(j);
	}
	struct job *j = fx_job(16);
	fx_megatron(j);
	j->strat.schedule = STRAT_SCHED_INTERLEAVED;
	j->strat.vp = 2;
	j->strat.sequence_parallel = true;
	fx_degrees(j, 2, 4, 2, 1, 8);
	for (int64_t r = 0; r < 16; r += 5) {
		struct plan p;
		if (build(j, r, &p)) {
			check_structure(t, &p);
			plan_release(&p);
		}
	}
	free(j);
}

/* what the DeepSpeed stages communicate (reference/deepspeed.md §2) */
static int count_coll(const struct plan *p, enum plan_coll c, enum job_group g, int phase)
{
	int n = 0;
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].kind == PLAN_COLL && p->ops[i].u.coll.coll == c &&
		    p->ops[i].u.coll.group == g && (phase < 0 || p->ops[i].phase == phase))
			n++;
	return n;
}

/* Expert groups with context parallelism: Megatron-Core forms them over dp x cp (cp varying
 * faster), so with cp 2, dp 8, ep 4 an expert group holds both cp ranks of two dp ranks and
 * the experts' replicas span dp·cp/ep = 4 ranks; DeepSpeed and FSDP form them from dp ranks
 * (a group keeps its cp rank, replicas dp/ep = 2). Every rank is in one group of each kind,
 * and an expert group and a replica group meet in exactly one rank. */
static void test_expert_groups_cp(struct test_ctx *t)
{
	struct job *j = fx_job(16);
	fx_megatron(j);
	fx_degrees(j, 1, 1, 2, 1, 1); /* cp 2, dp 8 */
	j->strat.ep = 4;
	for (int fw = 0; fw < 2; fw++) {
		j->strat.framework = fw ? STRAT_FSDP : STRAT_MEGATRON;
		int64_t n_edp = job_group_size(j, JOB_GROUP_EDP);
		CHECK_EQ_INT(t, n_edp, fw ? 2 : 4);
		int64_t ep[4], edp[4], idx;
		CHECK_EQ_INT(t, job_group_members(j, JOB_GROUP_EP, 0, ep, &idx), 4);
		const int64_t want_ep[2][4] = { { 0, 1, 2, 3 }, { 0, 2, 4, 6 } }; /* rank = cp + 2 dp */
		for (int i = 0; i < 4; i++)
			CHECK_EQ_INT(t, ep[i], want_ep[fw][i]);
		int seen[16] = { 0 };
		for (int64_t r = 0; r < 16; r++) {
			job_group_members(j, JOB_GROUP_EP, r, ep, &idx);
			CHECK_EQ_INT(t, ep[idx], r);
			seen[job_group_color(j, JOB_GROUP_EP, r)]++;
			CHECK_EQ_INT(t, job_group_members(j, JOB_GROUP_EDP, r, edp, &idx), n_edp);
			CHECK_EQ_INT(t, edp[idx], r);
			int meet = 0;
			for (int a = 0; a < 4; a++)
				for (int64_t b = 0; b < n_edp; b++)
					meet += ep[a] == edp[b];
			CHECK_EQ_INT(t, meet, 1);
		}
		int groups = 0;
		for (int r = 0; r < 16; r++)
			if (seen[r]) {
				CHECK_EQ_INT(t, seen[r], 4);
				groups++;
			}
		CHECK_EQ_INT(t, groups, 4);
	}
	/* Megatron plans: on 16 GPUs the experts' grads are reduced over their 4 replicas; on 4
	 * GPUs ep 4 spans dp 2 x cp 2, which only Megatron-Core's layout allows; model FLOPs stay
	 * the formula's */
	fx_moe(j);
	fx_megatron(j);
	j->strat.ep = 4;
	fx_degrees(j, 1, 1, 2, 1, 1);
	struct plan p;
	if (build(j, 0, &p)) {
		CHECK(t, count_coll(&p, PLAN_ALL_REDUCE, JOB_GROUP_EDP, PLAN_PHASE_BWD) > 0);
		plan_release(&p);
	}
	j->gpus = 4, j->nodes = 1;
	fx_degrees(j, 1, 1, 2, 1, 1);
	CHECK_EQ_INT(t, job_group_size(j, JOB_GROUP_EDP), 1);
	bool ok = build(j, 0, &p);
	CHECK(t, ok);
	if (ok) {
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_REDUCE, JOB_GROUP_EDP, PLAN_PHASE_BWD), 0);
		plan_release(&p);
	}
	double want = formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	free(j);
}

/* Megatron-Core's MoE layer with SP (Megatron refuses TP with EP without it) routes each rank's
 * own T/tp tokens: all-to-all over EP, all-gather over TP, the experts, reduce-scatter over TP,
 * all-to-all back; only the shared experts gather the sequence. Model FLOPs stay the formula's
 * (each rank runs the router on its own tokens). */
static void test_moe_megatron_dispatcher(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_moe(j);
	fx_megatron(j);
	j->strat.ep = 4;
	fx_degrees(j, 2, 1, 1, 2, 1);
	j->strat.sequence_parallel = true;
	double want = formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	struct plan p;
	if (build(j, 0, &p)) {
		int64_t T = 2 * 1024, tok = T / 2 * 2 * 1024; /* T/tp tokens x top-2 x hidden */
		int a2a = 0, agd = 0, rsc = 0, agsp = 0, shared_dgrad = 0, shared_fused = 0;
		int counts = 0, counts_waited = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_tokens_per_expert")) {
				counts++;
				/* the host waits for it, and the dispatch all-to-all follows */
				counts_waited += (o->flags & PLAN_F_HOSTWAIT) && o->u.coll.group == JOB_GROUP_EP &&
						 o->u.coll.count == 2 * j->model.experts &&
						 p.ops[i + 1].u.coll.coll == PLAN_ALL_TO_ALL;
			}
			shared_dgrad += o->kind == PLAN_COMPUTE && !strcmp(o->name, "shared_fc1_dgrad");
			shared_fused += o->kind == PLAN_COMPUTE && !strcmp(o->name, "shared_fc1_bwd");
			if (o->kind != PLAN_COLL)
				continue;
			if (o->u.coll.coll == PLAN_ALL_TO_ALL && o->u.coll.group == JOB_GROUP_EP) {
				a2a++;
				CHECK_EQ_INT(t, o->u.coll.count, tok);
			}
			if (o->u.coll.group == JOB_GROUP_TP && o->phase == PLAN_PHASE_FWD) {
				if (o->u.coll.coll == PLAN_ALL_GATHER && o->u.coll.count == tok)
					agd++;
				else if (o->u.coll.coll == PLAN_REDUCE_SCATTER && o->u.coll.count == tok)
					rsc++;
				else if (o->u.coll.coll == PLAN_ALL_GATHER)
					agsp++;
			}
		}
		/* one micro-batch of 2 sequences, 4 MoE layers: 2 all-to-alls forward and 2 backward
		 * each; one dispatcher gather and reduce-scatter forward; SP gathers forward for
		 * attention and the shared experts, and one for the head */
		CHECK_EQ_INT(t, a2a, 4 * 4);
		CHECK_EQ_INT(t, agd, 4);
		CHECK_EQ_INT(t, rsc, 4);
		CHECK_EQ_INT(t, agsp, 4 + 4 + 1);
		/* each MoE layer's forward gathers the token counts for the host, which waits */
		CHECK_EQ_INT(t, counts, 4);
		CHECK_EQ_INT(t, counts_waited, 4);
		/* the shared experts' fc1 is a column-parallel linear: its backward splits as a
		 * dense fc1's does (col_bwd) */
		CHECK_EQ_INT(t, shared_dgrad, 4);
		CHECK_EQ_INT(t, shared_fused, 0);
		plan_release(&p);
	}
	free(j);
}

/* The MoE fixture under Megatron with its 8 experts over 4 ranks (expert parallelism) */
static struct job *moe_job(void)
{
	struct job *j = fx_job(8);
	fx_moe(j);
	fx_megatron(j);
	j->strat.ep = 4;
	return j;
}

/* The same MoE model under DeepSpeed's defaults, ep 4 (two local experts) */
static struct job *ds_moe_job(void)
{
	struct job *j = moe_job();
	fx_strategy(&j->strat, 8);
	j->strat.ep = 4;
	return j;
}

/* Release the plans that were built (ok[i]) */
static void release_plans(struct plan *p, const bool *ok, int n)
{
	for (int i = 0; i < n; i++)
		if (ok[i])
			plan_release(&p[i]);
}

/* Megatron-Core's overlap_moe_expert_parallel_comm: the combined 1F1B runs micro-batch i's
 * forward beside micro-batch i - 1's backward, layer by layer, with the all-to-alls on their
 * own stream; the same ops and FLOPs as without it, in another order */
static void test_moe_a2a_overlap(struct test_ctx *t)
{
	struct job *j = moe_job();
	fx_degrees(j, 1, 1, 1, 1, 3); /* three micro-batches */
	struct plan p[2];
	bool ok[2];
	for (int on = 0; on < 2; on++) {
		j->strat.moe_a2a_overlap = on;
		ok[on] = build(j, 0, &p[on]);
	}
	if (ok[0] && ok[1]) {
		int kinds[2][PLAN_NUM_KINDS] = {{0}}, a2a_ep[2] = {0}, a2a[2] = {0};
		for (int on = 0; on < 2; on++)
			for (size_t i = 0; i < p[on].nops; i++) {
				const struct plan_op *o = &p[on].ops[i];
				kinds[on][o->kind]++;
				if (o->kind == PLAN_COLL && o->u.coll.coll == PLAN_ALL_TO_ALL) {
					a2a[on]++;
					a2a_ep[on] += o->stream == PLAN_STREAM_COMM_EP;
				}
			}
		for (int k = 0; k < PLAN_NUM_KINDS; k++)
			CHECK_EQ_INT(t, kinds[1][k], kinds[0][k]);
		CHECK_NEAR(t, p[1].hw_flops, p[0].hw_flops, 1e-12);
		CHECK_NEAR(t, p[1].model_flops, p[0].model_flops, 1e-12);
		/* 3 micro-batches x 4 MoE layers x 4 all-to-alls; with the overlap all on their
		 * own stream */
		CHECK_EQ_INT(t, a2a[0], 3 * 4 * 4);
		CHECK_EQ_INT(t, a2a_ep[0], 0);
		CHECK_EQ_INT(t, a2a_ep[1], a2a[1]);
		/* without it micro-batch 0's backward ends before micro-batch 1's forward starts;
		 * with it micro-batch 1's forward dispatches come between micro-batch 0's backward
		 * ops, each after that layer's expert backward is issued (the host waits for the
		 * token counts with the other micro-batch's MLP backward queued) */
		for (int on = 0; on < 2; on++) {
			size_t first_b0 = SIZE_MAX, last_b0 = 0, fwd1 = 0, inside = 0, after_mlp = 0;
			bool mlp_bwd = false;
			for (size_t i = 0; i < p[on].nops; i++) {
				const struct plan_op *o = &p[on].ops[i];
				if (o->micro == 0 && o->phase == PLAN_PHASE_BWD && o->layer >= 0) {
					first_b0 = first_b0 == SIZE_MAX ? i : first_b0;
					last_b0 = i;
				}
			}
			for (size_t i = 0; i < p[on].nops; i++) {
				const struct plan_op *o = &p[on].ops[i];
				if (o->micro == 0 && o->phase == PLAN_PHASE_BWD &&
				    !strcmp(o->name, "expert_fc1_bwd"))
					mlp_bwd = true;
				if (o->micro != 1 || o->phase != PLAN_PHASE_FWD)
					continue;
				if (!strcmp(o->name, "a2a_dispatch")) {
					fwd1++;
					inside += i > first_b0 && i < last_b0;
				}
				if (!strcmp(o->name, "ag_tokens_per_expert") && mlp_bwd && i < last_b0)
					after_mlp++, mlp_bwd = false;
			}
			CHECK_EQ_INT(t, fwd1, 4);
			CHECK_EQ_INT(t, inside, on ? 4 : 0);
			CHECK_EQ_INT(t, after_mlp, on ? 4 : 0);
		}
		/* the schedule: F0, F1 B0, F2 B1, B2 (micro-batch 2's forward runs beside 1's
		 * backward: its first op comes before 1's backward's last) */
		size_t last_b1 = 0, first_f2 = SIZE_MAX;
		for (size_t i = 0; i < p[1].nops; i++) {
			const struct plan_op *o = &p[1].ops[i];
			if (o->micro == 1 && o->phase == PLAN_PHASE_BWD && o->layer >= 0)
				last_b1 = i;
			if (o->micro == 2 && o->phase == PLAN_PHASE_FWD && o->layer >= 0 &&
			    first_f2 == SIZE_MAX)
				first_f2 = i;
		}
		CHECK(t, first_f2 < last_b1);
	}
	release_plans(p, ok, 2);
	free(j);
}

/* moe_load_imbalance: every rank is costed as the busiest expert rank, which receives that
 * many times the mean token copies: its expert GEMMs, all-to-alls and expert activations grow,
 * what it routes (router, permutation) and the model FLOPs do not */
static void test_moe_load_imbalance(struct test_ctx *t)
{
	struct job *j = moe_job();
	struct plan p[2];
	struct plan_mem mem[2];
	bool ok[2];
	static const double imb[2] = { 1.0, 1.5 };
	for (int i = 0; i < 2; i++) {
		j->strat.moe_load_imbalance = imb[i];
		ok[i] = build(j, 0, &p[i]) && fx_mem(j, 0, &mem[i]);
	}
	if (ok[0] && ok[1]) {
		int64_t rows[2] = { 0 }, a2a[2] = { 0 };
		double perm[2] = { 0 };
		for (int i = 0; i < 2; i++)
			for (size_t k = 0; k < p[i].nops; k++) {
				const struct plan_op *o = &p[i].ops[k];
				if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "expert_fc1") && !rows[i])
					rows[i] = o->u.compute.m;
				if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "permute"))
					perm[i] += o->u.compute.bytes;
				if (o->kind == PLAN_COLL && o->u.coll.coll == PLAN_ALL_TO_ALL)
					a2a[i] += o->u.coll.count;
			}
		/* 1,024 tokens x top-2 over 2 local experts: 1,024 rows each, 1,536 for the busiest */
		CHECK_EQ_INT(t, rows[0], 1024);
		CHECK_EQ_INT(t, rows[1], 1536);
		CHECK_EQ_INT(t, a2a[1], a2a[0] * 3 / 2);
		CHECK_NEAR(t, perm[1], perm[0], 0);
		CHECK_NEAR(t, p[1].model_flops, p[0].model_flops, 1e-9);
		CHECK(t, p[1].hw_flops > p[0].hw_flops);
		CHECK(t, mem[1].gpu_total > mem[0].gpu_total);
	}
	release_plans(p, ok, 2);
	free(j);
}

/* Megatron-Core's moe_shared_expert_overlap: the shared experts' fc1 comes right after the
 * dispatch all-to-all and fc2 after the combine, without waiting for them, while the routed
 * experts and the unpermutation still do; backward likewise; the same ops and FLOPs */
static bool depends_on(const struct plan *p, const struct plan_op *o, uint32_t id)
{
	const uint32_t *d = plan_op_deps(p, o);
	for (uint32_t k = 0; k < o->ndeps; k++)
		if (d[k] == id)
			return true;
	return false;
}

static void test_moe_shared_overlap(struct test_ctx *t)
{
	struct job *j = moe_job();
	struct plan p[2];
	bool ok[2];
	for (int on = 0; on < 2; on++) {
		j->strat.moe_shared_overlap = on;
		ok[on] = build(j, 0, &p[on]);
	}
	if (ok[0] && ok[1]) {
		CHECK_EQ_INT(t, (int64_t)p[1].nops, (int64_t)p[0].nops);
		CHECK_NEAR(t, p[1].hw_flops, p[0].hw_flops, 1e-12);
		CHECK_NEAR(t, p[1].model_flops, p[0].model_flops, 1e-12);
		/* for each all-to-all, the next compute op: with the overlap a shared expert
		 * half that does not wait for it, then the op that does */
		static const char *const a2a[4] = { "a2a_dispatch", "a2a_combine", "a2a_combine_bwd",
						    "a2a_dispatch_bwd" };
		static const char *const beside[4] = { "shared_fc1", "shared_fc2", "shared_fc2_bwd",
						       "shared_fc1_bwd" };
		for (int on = 0; on < 2; on++) {
			int n_beside = 0, n_free = 0, n_waits = 0;
			for (size_t i = 0; i < p[on].nops; i++) {
				const struct plan_op *o = &p[on].ops[i];
				int w = -1;
				for (int k = 0; k < 4; k++)
					if (o->kind == PLAN_COLL && !strcmp(o->name, a2a[k]))
						w = k;
				if (w < 0)
					continue;
				size_t k = i + 1;
				while (k < p[on].nops && p[on].ops[k].kind != PLAN_COMPUTE)
					k++;
				if (k == p[on].nops)
					continue;
				const struct plan_op *c = &p[on].ops[k];
				if (!strcmp(c->name, beside[w])) {
					n_beside++;
					n_free += !depends_on(&p[on], c, o->id);
					while (k < p[on].nops && (p[on].ops[k].kind != PLAN_COMPUTE ||
								 !depends_on(&p[on], &p[on].ops[k], o->id)))
						k++;
					n_waits += k < p[on].nops;
				}
			}
			/* 4 MoE layers, one micro-batch: 4 all-to-alls each */
			CHECK_EQ_INT(t, n_beside, on ? 16 : 0);
			CHECK_EQ_INT(t, n_free, on ? 16 : 0);
			CHECK_EQ_INT(t, n_waits, on ? 16 : 0);
		}
	}
	release_plans(p, ok, 2);
	free(j);
}

/* delay_wgrad_compute (with the combined 1F1B): the experts' backward splits into input and
 * weight grads; the dispatch's backward all-to-all waits only for the input grads, the weight
 * grads come before it on the compute stream; the same FLOPs */
static void test_delay_wgrad(struct test_ctx *t)
{
	struct job *j = moe_job();
	fx_degrees(j, 1, 1, 1, 1, 3);
	j->strat.moe_a2a_overlap = true;
	struct plan p[2];
	bool ok[2];
	for (int on = 0; on < 2; on++) {
		j->strat.delay_wgrad = on;
		ok[on] = build(j, 0, &p[on]);
	}
	if (ok[0] && ok[1]) {
		CHECK_NEAR(t, p[1].hw_flops, p[0].hw_flops, 1e-12);
		CHECK_NEAR(t, p[1].model_flops, p[0].model_flops, 1e-12);
		int fused = 0, dgrad = 0, wgrad = 0, a2a_on_dgrad = 0, a2a = 0;
		uint32_t last_dgrad = UINT32_MAX;
		bool wgrad_since = false;
		for (size_t i = 0; i < p[1].nops; i++) {
			const struct plan_op *o = &p[1].ops[i];
			fused += !strcmp(o->name, "expert_fc1_bwd") || !strcmp(o->name, "expert_fc2_bwd");
			/* the input grads end with the regrouping's backward (two local experts) */
			/* each holds one kind of grads, timed by its own shape */
			if (!strcmp(o->name, "expert_fc1_dgrad"))
				dgrad += o->u.compute.grads == PLAN_GRADS_DATA;
			if (!strcmp(o->name, "sort_chunks_bwd"))
				last_dgrad = o->id, wgrad_since = false;
			if (!strcmp(o->name, "expert_fc1_wgrad"))
				wgrad += o->u.compute.grads == PLAN_GRADS_WEIGHT, wgrad_since = true;
			if (o->kind == PLAN_COLL && !strcmp(o->name, "a2a_dispatch_bwd")) {
				a2a++;
				a2a_on_dgrad += wgrad_since && depends_on(&p[1], o, last_dgrad);
			}
		}
		/* 3 micro-batches x 4 MoE layers */
		CHECK_EQ_INT(t, fused, 0);
		CHECK_EQ_INT(t, dgrad, 12);
		CHECK_EQ_INT(t, wgrad, 12);
		CHECK_EQ_INT(t, a2a, 12);
		CHECK_EQ_INT(t, a2a_on_dgrad, 12);
	}
	release_plans(p, ok, 2);
	free(j);
}

/* Megatron-Core's capacity factor: the router drops what is over each expert's capacity (its
 * own ops); dropping caps the busiest rank's load at the capacity and makes the host wait for
 * the counts before the permutation; padding runs every expert at its capacity, sends padded
 * all-to-alls and needs no counts at all; under DeepEP the cap holds and the notify still opens
 * the dispatch */
static void test_moe_capacity(struct test_ctx *t)
{
	struct job *j = moe_job();
	j->strat.moe_load_imbalance = 1.5;
	j->strat.moe_permute_fusion = true; /* one pass of the copies: bytes scale with them */
	struct plan p[4]; /* dropless, dropping at 1.25, padded to 1.25, DeepEP dropping at 1.25 */
	bool ok[4];
	for (int i = 0; i < 4; i++) {
		j->strat.moe_capacity_factor = i ? 1.25 : 0;
		j->strat.moe_pad_to_capacity = i == 2;
		j->strat.moe_dispatcher = i == 3 ? STRAT_DISPATCH_DEEPEP : STRAT_DISPATCH_ALLTOALL;
		ok[i] = build(j, 0, &p[i]);
	}
	if (ok[0] && ok[1] && ok[2] && ok[3]) {
		int64_t rows[4] = { 0 }, a2a[4] = { 0 };
		double perm[4] = { 0 };
		int counts[4] = { 0 }, counts_first[4] = { 0 }, drops[4] = { 0 }, drop_k[4] = { 0 };
		int notify_after[4] = { 0 };
		for (int i = 0; i < 4; i++) {
			bool permuted = false;
			for (size_t k = 0; k < p[i].nops; k++) {
				const struct plan_op *o = &p[i].ops[k];
				if (o->kind == PLAN_COMPUTE && !strncmp(o->name, "router_drop", 11)) {
					drops[i]++;
					drop_k[i] += 1 + o->u.compute.extra_kernels;
				}
				notify_after[i] += o->kind == PLAN_COLL && !strcmp(o->name, "deepep_notify") &&
						   (o->flags & PLAN_F_HOSTWAIT) && permuted;
				if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "expert_fc1") && !rows[i])
					rows[i] = o->u.compute.m;
				if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "permute")) {
					perm[i] += o->u.compute.bytes;
					permuted = true;
				}
				if (o->kind == PLAN_COLL && o->u.coll.coll == PLAN_ALL_TO_ALL)
					a2a[i] += o->u.coll.count;
				if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_tokens_per_expert")) {
					counts[i]++;
					counts_first[i] += !permuted;
				}
			}
		}
		/* 1,024 rows per local expert balanced: 1,536 at 1.5, 1,280 at the capacity */
		CHECK_EQ_INT(t, rows[0], 1536);
		CHECK_EQ_INT(t, rows[1], 1280);
		CHECK_EQ_INT(t, rows[2], 1280);
		CHECK_EQ_INT(t, a2a[1] * 6, a2a[0] * 5);
		CHECK_EQ_INT(t, a2a[2], a2a[1]);
		/* only padding pads this rank's own permuted tokens */
		CHECK_NEAR(t, perm[1], perm[0], 0);
		CHECK_NEAR(t, perm[2], perm[0] * 1.25, 1e-12);
		/* 4 MoE layers: the counts before the all-to-all (dropless), before the first
		 * permutation of the layer (dropping), none (padded) */
		CHECK_EQ_INT(t, counts[0], 4);
		CHECK_EQ_INT(t, counts[1], 4);
		CHECK_EQ_INT(t, counts[2], 0);
		CHECK_EQ_INT(t, counts_first[1], 1);
		CHECK_EQ_INT(t, counts_first[0], 0);
		CHECK_NEAR(t, p[2].model_flops, p[0].model_flops, 1e-9);
		/* the router drops what is over each expert's 320 slots: 7 kernels forward (6
		 * padded: no and with the map), 1 backward, in each of the 4 layers */
		CHECK_EQ_INT(t, drops[0], 0);
		CHECK_EQ_INT(t, drops[1], 8);
		CHECK_EQ_INT(t, drop_k[1], 4 * (7 + 1));
		CHECK_EQ_INT(t, drop_k[2], 4 * (6 + 1));
		/* DeepEP: the same cap, and its notify still opens each forward dispatch */
		CHECK_EQ_INT(t, rows[3], 1280);
		CHECK_EQ_INT(t, notify_after[3], 4);
		CHECK_EQ_INT(t, drops[3], 8);
	}
	release_plans(p, ok, 4);
	free(j);
}

/* Megatron-Core's token rearrangement: with two local experts the received tokens are regrouped
 * by expert and back, each way and in backward (4 passes a layer, fused or not; padded to
 * capacity too); unfused, torch.split makes a view per (source rank, expert) chunk (none when
 * padded: a transpose) and the permutation sorts the routing map; TE's fused kernels move fewer
 * bytes in fewer kernels. One local expert needs no regrouping. The FLOPs do not move. */
static void test_moe_permute_fusion(struct test_ctx *t)
{
	struct job *j = moe_job(); /* 8 experts over ep 4: two local experts */
	j->strat.moe_grouped_gemm = true; /* no per-expert output concatenation */
	struct plan p[4];          /* unfused, fused, unfused padded to capacity, ep 8 */
	bool ok[4];
	for (int i = 0; i < 4; i++) {
		j->strat.moe_permute_fusion = i == 1;
		j->strat.moe_capacity_factor = i == 2 ? 1.0 : 0;
		j->strat.moe_pad_to_capacity = i == 2;
		j->strat.ep = i == 3 ? 8 : 4;
		ok[i] = build(j, 0, &p[i]);
	}
	if (ok[0] && ok[1] && ok[2] && ok[3]) {
		int sorts[4] = { 0 }, kernels[4] = { 0 };
		uint32_t views[4] = { 0 };
		double bytes[4] = { 0 };
		for (int i = 0; i < 4; i++)
			for (size_t k = 0; k < p[i].nops; k++) {
				const struct plan_op *o = &p[i].ops[k];
				if (o->kind != PLAN_COMPUTE || o->u.compute.kernel != PLAN_K_PERMUTE)
					continue;
				bytes[i] += o->u.compute.bytes;
				kernels[i] += 1 + o->u.compute.extra_kernels;
				sorts[i] += strstr(o->name, "sort_chunks") != NULL;
				if (!strcmp(o->name, "sort_chunks"))
					views[i] += o->host_views;
			}
		/* 4 MoE layers, one micro-batch */
		CHECK_EQ_INT(t, sorts[0], 16);
		CHECK_EQ_INT(t, sorts[1], 16);
		CHECK_EQ_INT(t, sorts[2], 16);
		CHECK_EQ_INT(t, sorts[3], 0);
		/* tokens and probs split into 4 ranks x 2 experts, 4 layers */
		CHECK_EQ_INT(t, views[0], 64);
		CHECK_EQ_INT(t, views[1], 0);
		CHECK_EQ_INT(t, views[2], 0);
		/* a layer: the 4 regroupings (the forward one cats the probs too when split), the
		 * permutation's 8 kernels and the unpermutation's 2, one each backward; fused 1 each */
		CHECK_EQ_INT(t, kernels[0], 4 * (5 + 8 + 2 + 1 + 2));
		CHECK_EQ_INT(t, kernels[1], 4 * (4 + 4));
		/* unfused moves more a layer: the map's sort (37 B an entry of 8 experts x 1,024
		 * tokens), the indices and probs (32 B a copy of 2,048), a pass of the copies
		 * (P = 2,048 x 1,024 x 2 B) more in the unpermutation and in the permutation's
		 * backward each: 303,104 + 65,536 + 4P */
		CHECK_NEAR(t, bytes[0] - bytes[1], 4.0 * (303104 + 65536 + 4.0 * 4194304), 1e-12);
		CHECK_NEAR(t, p[1].hw_flops, p[0].hw_flops, 1e-12);
		CHECK_NEAR(t, p[1].model_flops, p[0].model_flops, 1e-12);
	}
	release_plans(p, ok, 4);
	free(j);
}

/* Megatron-Core's router after its gating GEMM: unfused, the top-k routing is 11 PyTorch
 * kernels forward and 5 backward, fused one each; the load-balancing loss adds 14 and 8 (5 and
 * 5 fused) and sums the tokens per expert over TP x CP, which a lone rank skips; a checkpointed
 * layer's no-grad forward computes no loss, its recompute does; the z-loss adds 12 and 8. The
 * FLOPs do not move. */
static void test_moe_router(struct test_ctx *t)
{
	struct job *j = moe_job(); /* 4 MoE layers, 1,024 tokens, 8 experts, top-2 */
	/* unfused, fused, unfused + loss, fused + loss, loss at tp 2, loss with full recompute,
	 * the z-loss alone */
	struct plan p[7];
	bool ok[7];
	for (int i = 0; i < 7; i++) {
		j->strat.moe_router_fusion = i == 1 || i == 3;
		j->strat.moe_aux_loss_coeff = i >= 2 && i < 6 ? 1e-3 : 0;
		j->strat.moe_z_loss_coeff = i == 6 ? 1e-3 : 0;
		if (i == 6)
			j->strat.recompute = STRAT_RECOMPUTE_NONE;
		if (i == 4) {
			fx_degrees(j, 2, 1, 1, 1, 1);
			j->strat.sequence_parallel = true;
		}
		if (i == 5) {
			fx_degrees(j, 1, 1, 1, 1, 1);
			j->strat.sequence_parallel = false;
			j->strat.recompute = STRAT_RECOMPUTE_FULL;
		}
		ok[i] = build(j, 0, &p[i]);
	}
	if (ok[0] && ok[1] && ok[2] && ok[3] && ok[4] && ok[5] && ok[6]) {
		int kernels[7] = { 0 }, sums[7] = { 0 }, scores[7] = { 0 }, scores_rc[7] = { 0 };
		double topk_bytes = 0;
		for (int i = 0; i < 7; i++)
			for (size_t k = 0; k < p[i].nops; k++) {
				const struct plan_op *o = &p[i].ops[k];
				if (o->kind == PLAN_COLL && !strcmp(o->name, "router_aux_tokens")) {
					sums[i]++;
					CHECK_EQ_INT(t, o->u.coll.group, JOB_GROUP_TP_CP);
					CHECK_EQ_INT(t, o->u.coll.bytes, 8 * 8); /* 8 int64 counts */
				}
				if (o->kind != PLAN_COMPUTE || strncmp(o->name, "router_", 7) ||
				    !strcmp(o->name, "router_bwd"))
					continue;
				kernels[i] += 1 + o->u.compute.extra_kernels;
				if (!strcmp(o->name, "router_aux_scores")) {
					scores[i]++;
					scores_rc[i] += (o->flags & PLAN_F_RECOMPUTE) != 0;
				}
				if (i == 0 && !strcmp(o->name, "router_topk"))
					topk_bytes += o->u.compute.bytes;
			}
		/* kernels a layer (4 layers): routing forward and backward, the loss's, the z-loss's */
		static const int want_k[7] = { 11 + 5, 1 + 1, 11 + 5 + 14 + 8, 1 + 1 + 5 + 5, -1, -1,
					       11 + 5 + 12 + 8 };
		for (int i = 0; i < 7; i++)
			if (want_k[i] > 0)
				CHECK_EQ_INT(t, kernels[i], 4 * want_k[i]);
		/* N = 1,024 x 8 logits of 2 B, n = 1,024 x 2 copies: N (6 lb + 17) + n (4 lb + 32) */
		CHECK_NEAR(t, topk_bytes, 4.0 * (8192 * 29 + 2048 * 40), 1e-12);
		/* the token counts summed over TP x CP: none on a lone rank; the loss once a layer,
		 * with full recompute only in the recompute */
		CHECK(t, sums[2] == 0 && sums[4] == 4);
		CHECK(t, scores[2] == 4 && scores_rc[2] == 0 && scores[5] == 4 && scores_rc[5] == 4);
		for (int i = 1; i < 4; i++)
			CHECK_NEAR(t, p[i].hw_flops, p[0].hw_flops, 1e-12);
	}
	release_plans(p, ok, 7);
	free(j);
}

/* Megatron-Core's per-layer CUDA graphs: each captured module's forward and backward is one
 * replay (graph_replay, graph_replay_bwd), and its ops are the graph's members: attention and
 * MLP apart (two replays a layer each way), the whole layer (one); a MoE layer's router graph
 * ends before the permutation unless moe_preprocess takes it in. */
struct cg_count { int replays, members, permute_members, attn_members, norm2_members; };

static struct cg_count cg_count_of(const struct plan *p)
{
	struct cg_count c = { 0 };
	for (size_t k = 0; k < p->nops; k++) {
		const struct plan_op *o = &p->ops[k];
		c.replays += o->graph == PLAN_GRAPH_REPLAY;
		if (o->graph != PLAN_GRAPH_MEMBER)
			continue;
		c.members++;
		c.permute_members += !strcmp(o->name, "permute") || !strcmp(o->name, "permute_bwd");
		c.attn_members += !strcmp(o->name, "attn") || !strcmp(o->name, "attn_bwd");
		c.norm2_members += !strncmp(o->name, "norm2", 5);
	}
	return c;
}

static void test_cuda_graphs(struct test_ctx *t)
{
	struct job *j = fx_job(8); /* 4 layers, one micro-batch a step on each of 8 ranks */
	fx_megatron(j);
	j->strat.cuda_graph_impl = STRAT_CG_TE;
	struct plan p[5]; /* attn + mlp, whole, MoE attn + router, + preprocess, none */
	bool ok[5];
	j->strat.cuda_graph_modules = STRAT_CG_ATTN | STRAT_CG_MLP;
	ok[0] = build(j, 0, &p[0]);
	j->strat.cuda_graph_modules = 0;
	ok[1] = build(j, 0, &p[1]);
	struct job *m = moe_job();
	m->strat.cuda_graph_impl = STRAT_CG_TE;
	m->strat.cuda_graph_modules = STRAT_CG_ATTN | STRAT_CG_MOE_ROUTER;
	ok[2] = build(m, 0, &p[2]);
	m->strat.cuda_graph_modules |= STRAT_CG_MOE_PREPROCESS;
	ok[3] = build(m, 0, &p[3]);
	m->strat.cuda_graph_impl = STRAT_CG_NONE;
	ok[4] = build(m, 0, &p[4]);
	if (ok[0] && ok[1] && ok[2] && ok[3] && ok[4]) {
		struct cg_count c[5];
		for (int i = 0; i < 5; i++)
			c[i] = cg_count_of(&p[i]);
		int L = (int)j->model.layers;
		CHECK_EQ_INT(t, c[0].replays, L * 4);
		CHECK_EQ_INT(t, c[1].replays, L * 2);
		/* the same ops captured either way: the whole layer's forward and backward */
		CHECK_EQ_INT(t, c[1].members, c[0].members);
		CHECK_EQ_INT(t, c[0].attn_members, L * 2);
		CHECK_EQ_INT(t, c[0].norm2_members, L * 2);
		/* MoE: attention and router graphs, 4 replays a layer; the permutation (and its
		 * backward) only with moe_preprocess */
		CHECK_EQ_INT(t, c[2].replays, 4 * 4);
		CHECK_EQ_INT(t, c[2].permute_members, 0);
		CHECK_EQ_INT(t, c[3].permute_members, 4 * 2);
		CHECK_EQ_INT(t, c[2].norm2_members, 4 * 2);
		CHECK_EQ_INT(t, c[4].replays + c[4].members, 0);
		/* a replay copies the module's input: it adds no FLOPs */
		CHECK_NEAR(t, p[2].hw_flops, p[4].hw_flops, 1e-12);
	}
	release_plans(p, ok, 5);
	free(m);
	free(j);
}

/* Local experts in a loop or grouped: Megatron-Core's SequentialMLP (its default) runs each of
 * a rank's experts as an MLP of its own and concatenates their outputs (and input grads in
 * backward), TEGroupedMLP (moe_grouped_gemm) one grouped call; DeepSpeed's Experts loop and
 * concatenate too, HF's eager blocks loop and add into place, torchtitan groups. The FLOPs do
 * not move. */
static void test_moe_grouped_gemm(struct test_ctx *t)
{
	struct job *j = moe_job(); /* two local experts */
	/* Megatron sequential, Megatron grouped, DeepSpeed, HF eager, torchtitan */
	struct plan p[5];
	bool ok[5];
	for (int i = 0; i < 5; i++) {
		if (i == 2)
			fx_strategy(&j->strat, 8), j->strat.ep = 4;
		j->strat.moe_grouped_gemm = i == 1;
		j->strat.kernels = i == 3 ? STRAT_KERNELS_EAGER : STRAT_KERNELS_FUSED;
		if (i == 4)
			j->strat.framework = STRAT_FSDP;
		ok[i] = build(j, 0, &p[i]);
	}
	if (ok[0] && ok[1] && ok[2] && ok[3] && ok[4]) {
		static const int want_repeat[5] = { 2, 1, 2, 2, 1 }, want_cats[5] = { 8, 0, 8, 0, 0 };
		for (int i = 0; i < 5; i++) {
			int experts = 0, looped = 0, cats = 0, grouped = 0;
			for (size_t k = 0; k < p[i].nops; k++) {
				const struct plan_op *o = &p[i].ops[k];
				if (o->kind != PLAN_COMPUTE)
					continue;
				if (!strncmp(o->name, "expert_fc", 9) || !strncmp(o->name, "expert_act", 10)) {
					experts++;
					looped += plan_op_repeat(o) == want_repeat[i];
				}
				/* a grouped call's GEMMs share the waves: both local experts' */
				grouped += !strncmp(o->name, "expert_fc", 9) && o->u.compute.group == 2;
				cats += !strncmp(o->name, "expert_cat", 10);
			}
			/* 4 layers: fc1, act, fc2 and their backward passes */
			CHECK_EQ_INT(t, experts, 4 * 6);
			CHECK_EQ_INT(t, looped, experts);
			CHECK_EQ_INT(t, cats, want_cats[i]);
			CHECK_EQ_INT(t, grouped, want_repeat[i] == 1 ? 4 * 4 : 0);
		}
		CHECK_NEAR(t, p[1].hw_flops, p[0].hw_flops, 1e-12);
		CHECK_NEAR(t, p[1].model_flops, p[0].model_flops, 1e-12);
	}
	release_plans(p, ok, 5);
	free(j);
}

/* DeepSpeed's MoE layer moves tokens with dense einsums over (token, expert, capacity slot):
 * 1,024 tokens, top-2 of 8 experts of capacity 256 (2,048 slots), hidden 1,024, so each
 * einsum is 2 x 1,024 x 2,048 x 1,024 FLOPs: dispatch and combine forward, the combine's two
 * grads and the dispatch's one backward; no permutations. HF's eager blocks permute instead.
 * The einsums are not model FLOPs. */
static void test_moe_ds_einsum(struct test_ctx *t)
{
	struct job *j = ds_moe_job();
	struct plan p[2]; /* DeepSpeed's fused model code, HF's eager */
	bool ok[2];
	for (int i = 0; i < 2; i++) {
		j->strat.kernels = i ? STRAT_KERNELS_EAGER : STRAT_KERNELS_FUSED;
		ok[i] = build(j, 0, &p[i]);
	}
	if (ok[0] && ok[1]) {
		const double f = 2.0 * 1024 * 2048 * 1024;
		for (int i = 0; i < 2; i++) {
			double ein = 0;
			int n = 0, perm = 0;
			for (size_t k = 0; k < p[i].nops; k++) {
				const struct plan_op *o = &p[i].ops[k];
				if (o->kind != PLAN_COMPUTE)
					continue;
				if (strstr(o->name, "_einsum")) {
					n++;
					ein += o->u.compute.flops;
				}
				perm += strstr(o->name, "permute") != NULL;
			}
			/* 4 MoE layers, one micro-batch: 4 einsums, 5 GEMMs' worth each */
			CHECK_EQ_INT(t, n, i ? 0 : 16);
			CHECK_NEAR(t, ein, i ? 0 : 4 * 5 * f, 1e-12);
			CHECK_EQ_INT(t, perm, i ? 16 : 0);
		}
		CHECK_NEAR(t, p[0].model_flops, p[1].model_flops, 1e-12);
	}
	release_plans(p, ok, 2);
	free(j);
}

/* DeepSpeed's MoE layer pads every expert to its capacity: at capacity factor 1.25 the slots,
 * the einsums and the experts' rows are 1.25 times those at 1 (DeepSpeed's default); without
 * dropping the busiest expert's count sets it (imbalance 1.5), all-reduced over the expert
 * group and read by the host once a layer; the model FLOPs stay the useful work */
static void test_moe_ds_capacity(struct test_ctx *t)
{
	struct job *j = ds_moe_job();
	/* capacity factor 1, 1.25, dropless with imbalance 1.5, 0.5, 0.5 with min_capacity 512 */
	struct plan p[5];
	bool ok[5];
	for (int i = 0; i < 5; i++) {
		j->strat.moe_capacity_factor = i == 1 ? 1.25 : i >= 3 ? 0.5 : 1.0;
		j->strat.moe_dropless = i == 2;
		j->strat.moe_load_imbalance = i == 2 ? 1.5 : 1.0;
		j->strat.moe_min_capacity = i == 4 ? 512 : 4;
		ok[i] = build(j, 0, &p[i]);
	}
	if (ok[0] && ok[1] && ok[2] && ok[3] && ok[4]) {
		double ein[5] = { 0 };
		int64_t rows[5] = { 0 };
		int waits[5] = { 0 };
		for (int i = 0; i < 5; i++)
			for (size_t k = 0; k < p[i].nops; k++) {
				const struct plan_op *o = &p[i].ops[k];
				if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "moe_dispatch_einsum"))
					ein[i] += o->u.compute.flops;
				if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "expert_fc1") && !rows[i])
					rows[i] = o->u.compute.m;
				waits[i] += o->kind == PLAN_COLL && !strcmp(o->name, "moe_capacity_max") &&
					    (o->flags & PLAN_F_HOSTWAIT);
			}
		/* 2,048 slots at 1 (capacity 256 of 8 experts), 2,560 at 1.25, 3,072 at 1.5 */
		CHECK_NEAR(t, ein[1], ein[0] * 1.25, 1e-12);
		CHECK_NEAR(t, ein[2], ein[0] * 1.5, 1e-12);
		/* two local experts: 1,024 rows each at 1 */
		CHECK_EQ_INT(t, rows[0], 1024);
		CHECK_EQ_INT(t, rows[1], 1280);
		CHECK_EQ_INT(t, rows[2], 1536);
		CHECK_EQ_INT(t, waits[0] + waits[1], 0);
		CHECK_EQ_INT(t, waits[2], 4);
		CHECK_NEAR(t, p[1].model_flops, p[0].model_flops, 1e-12);
		CHECK_NEAR(t, p[2].model_flops, p[0].model_flops, 1e-12);
		/* below 1 every expert drops half its share: 1,024 slots, 512 rows; min_capacity
		 * 512 over the factor's 128 an expert: 4,096 slots, and each local expert runs the
		 * 512 slots of each of the 4 ranks */
		CHECK_NEAR(t, ein[3], ein[0] * 0.5, 1e-12);
		CHECK_EQ_INT(t, rows[3], 512);
		CHECK_NEAR(t, ein[4], ein[0] * 2, 1e-12);
		CHECK_EQ_INT(t, rows[4], 2048);
		CHECK_NEAR(t, p[3].model_flops, p[0].model_flops, 1e-12);
	}
	release_plans(p, ok, 5);
	free(j);
}

/* MoE parallel folding (Megatron-Core expert_tp != tp): the expert groups are carved out of a
 * stage's tp x dp ranks in rank order, expert_tp fastest, then ep, then the replicas. With tp 2,
 * dp 8, ep 8, expert_tp 1 on 16 GPUs an expert group is the 8 ranks of a node (both tp ranks
 * of 4 dp ranks) and each expert has 2 replicas; each rank routes its own T/tp tokens, runs
 * whole experts and gathers nothing over TP. With tp 4, expert_tp 2 the dispatched tokens are
 * gathered over the expert TP group. Work per rank, hence model FLOPs, do not change. */
static void test_moe_expert_folding(struct test_ctx *t)
{
	struct job *j = fx_job(16);
	fx_moe(j);
	fx_megatron(j);
	fx_degrees(j, 2, 1, 1, 2, 1);
	j->strat.sequence_parallel = true;
	j->strat.ep = 8;
	struct plan_mem m2, m1;
	bool ok = fx_mem(j, 0, &m2);
	j->strat.expert_tp = 1;
	ok = ok && fx_mem(j, 0, &m1);
	CHECK_EQ_INT(t, job_group_size(j, JOB_GROUP_EDP), 2);
	CHECK_EQ_INT(t, job_group_size(j, JOB_GROUP_ETP), 1);
	int64_t ep[8], edp[2], idx;
	job_group_members(j, JOB_GROUP_EP, 5, ep, &idx);
	job_group_members(j, JOB_GROUP_EDP, 5, edp, &idx);
	for (int i = 0; i < 8; i++)
		CHECK_EQ_INT(t, ep[i], i);
	CHECK_EQ_INT(t, edp[0], 5);
	CHECK_EQ_INT(t, edp[1], 13);
	int seen[16] = { 0 };
	for (int64_t r = 0; r < 16; r++)
		seen[job_group_color(j, JOB_GROUP_EP, r)]++;
	CHECK_EQ_INT(t, seen[0], 8);
	CHECK_EQ_INT(t, seen[8], 8);
	/* whole experts: twice the expert weights of expert_tp 2 */
	if (ok)
		CHECK(t, m1.max_cat[GPU][PLAN_MEM_PARAMS] > m2.max_cat[GPU][PLAN_MEM_PARAMS]);
	double want = formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	struct plan p;
	int64_t tok = 2 * 1024 / 2 * 2 * 1024; /* T/tp tokens x top-2 x hidden */
	if (build(j, 0, &p)) {
		int a2a = 0, etp = 0, fc1 = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "expert_fc1")) {
				fc1++;
				CHECK_EQ_INT(t, o->u.compute.n, 2 * 512); /* the whole expert: gate, up */
			}
			if (o->kind != PLAN_COLL)
				continue;
			if (o->u.coll.coll == PLAN_ALL_TO_ALL && o->u.coll.group == JOB_GROUP_EP) {
				a2a++;
				CHECK_EQ_INT(t, o->u.coll.count, tok);
			}
			etp += o->u.coll.group == JOB_GROUP_ETP ||
			       (o->u.coll.group == JOB_GROUP_TP && o->u.coll.count == tok);
		}
		CHECK_EQ_INT(t, a2a, 4 * 4);
		CHECK_EQ_INT(t, etp, 0);
		CHECK_EQ_INT(t, fc1, 4);
		plan_release(&p);
	}
	fx_degrees(j, 4, 1, 1, 2, 1); /* tp 4, dp 4: ep 4 x expert_tp 2 over 16 ranks */
	j->strat.ep = 4;
	j->strat.expert_tp = 2;
	CHECK_EQ_INT(t, job_group_size(j, JOB_GROUP_EDP), 2);
	int64_t et[2];
	job_group_members(j, JOB_GROUP_ETP, 3, et, &idx);
	CHECK_EQ_INT(t, et[0], 2);
	CHECK_EQ_INT(t, et[1], 3);
	want = formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	tok = 2 * 1024 / 4 * 2 * 1024;
	if (build(j, 0, &p)) {
		int ag = 0, rs = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COLL || o->u.coll.group != JOB_GROUP_ETP)
				continue;
			CHECK_EQ_INT(t, o->u.coll.count, tok);
			ag += o->u.coll.coll == PLAN_ALL_GATHER;
			rs += o->u.coll.coll == PLAN_REDUCE_SCATTER;
		}
		CHECK_EQ_INT(t, ag, 4 * 2); /* dispatch forward, combine's backward */
		CHECK_EQ_INT(t, rs, 4 * 2);
		plan_release(&p);
	}
	free(j);
}

/* DeepEP (moe_dispatcher deepep): at tp 2, ep 8 on two 8-GPU nodes an expert group is 4 ranks
 * on each node; a token goes once to each node it reaches (the rank at its place there) and
 * on over NVLink. 8 experts, top-2, 4 per node: a token reaches 2 (1 - C(4,2)/C(8,2)) = 11/7
 * nodes and 2 ranks; with 2 router groups of which 1 is chosen (a group a node) 1 node. Both
 * stages run side by side (COMM_TP, COMM_EP); the flat dispatcher is one all-to-all. Each
 * forward dispatch starts with the ranks' exchange of their token counts, which the host
 * waits for. */
static void test_moe_deepep(struct test_ctx *t)
{
	struct job *j = fx_job(16);
	fx_moe(j);
	fx_megatron(j);
	fx_degrees(j, 2, 1, 1, 1, 1);
	j->strat.sequence_parallel = true;
	j->strat.ep = 8;
	j->strat.moe_dispatcher = STRAT_DISPATCH_DEEPEP;
	CHECK_EQ_INT(t, job_group_size(j, JOB_GROUP_EP_NODE), 4);
	CHECK_EQ_INT(t, job_group_size(j, JOB_GROUP_EP_XNODE), 2);
	int64_t nd[4], xn[2], idx;
	job_group_members(j, JOB_GROUP_EP_NODE, 6, nd, &idx);
	job_group_members(j, JOB_GROUP_EP_XNODE, 6, xn, &idx);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_INT(t, nd[i], 2 * i);
	CHECK_EQ_INT(t, xn[0], 6);
	CHECK_EQ_INT(t, xn[1], 14);
	CHECK_EQ_INT(t, idx, 0);
	int64_t tok = 1024 / 2 * 1024; /* T/tp tokens x hidden */
	for (int grouped = 0; grouped < 2; grouped++) {
		j->model.router_groups = grouped ? 2 : 0, j->model.router_group_topk = grouped;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int net = 0, nvl = 0, flat = 0, notify = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COLL || o->u.coll.coll != PLAN_ALL_TO_ALL)
				continue;
			/* each forward dispatch's count exchange, which the host waits for */
			if (!strcmp(o->name, "deepep_notify")) {
				notify++;
				CHECK(t, (o->flags & PLAN_F_HOSTWAIT) && o->u.coll.group == JOB_GROUP_EP &&
						 o->u.coll.count == 8);
				continue;
			}
			if (o->u.coll.group == JOB_GROUP_EP_XNODE) {
				net++;
				CHECK_EQ_INT(t, o->stream, PLAN_STREAM_COMM_TP);
				CHECK_EQ_INT(t, o->u.coll.count,
					     grouped ? tok : llround((double)tok * 11.0 / 7.0));
			}
			if (o->u.coll.group == JOB_GROUP_EP_NODE) {
				nvl++;
				CHECK_EQ_INT(t, o->stream, PLAN_STREAM_COMM_EP);
				CHECK_EQ_INT(t, o->u.coll.count, 2 * tok);
			}
			flat += o->u.coll.group == JOB_GROUP_EP;
		}
		CHECK_EQ_INT(t, net, 4 * 4);
		CHECK_EQ_INT(t, nvl, 4 * 4);
		CHECK_EQ_INT(t, flat, 0);
		CHECK_EQ_INT(t, notify, 4);
		plan_release(&p);
	}
	/* an expert group within one node: the flat all-to-all */
	fx_degrees(j, 1, 1, 1, 1, 1);
	CHECK_EQ_INT(t, job_group_size(j, JOB_GROUP_EP_XNODE), 1);
	struct plan p;
	if (build(j, 0, &p)) {
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_TO_ALL, JOB_GROUP_EP, -1), 4 * 4 + 4);
		plan_release(&p);
	}
	free(j);
}

/* With expert parallelism the routed experts' states shard over their data-parallel group:
 * dp / ep replicas of each expert. Each rank then holds as much of them as without it (E/ep
 * experts over dp/ep ranks), and their grads and updated weights move over that group. */
static void test_moe_expert_sharding(struct test_ctx *t)
{
	struct plan_mem m1, m4;
	struct job *j = fx_job(16);
	fx_moe(j);
	fx_degrees(j, 1, 1, 1, 1, 1);
	j->strat.zero_stage = 2;
	bool ok = fx_mem(j, 0, &m1);
	j->strat.ep = 4;
	ok = ok && fx_mem(j, 0, &m4);
	if (ok) {
		double a = (double)m1.max_cat[GPU][PLAN_MEM_OPTIM], b = (double)m4.max_cat[GPU][PLAN_MEM_OPTIM];
		printf("#   ZeRO-2 on 16 GPUs, optimizer states: ep 1 %.0f B, ep 4 %.0f B\n", a, b);
		CHECK_NEAR(t, b, a, 1e-6);
		CHECK_NEAR(t, (double)m4.max_cat[GPU][PLAN_MEM_MASTER],
			   (double)m1.max_cat[GPU][PLAN_MEM_MASTER], 1e-6);
		/* the 16-bit weights are whole on every rank: only the local experts */
		CHECK(t, m4.max_cat[GPU][PLAN_MEM_PARAMS] < m1.max_cat[GPU][PLAN_MEM_PARAMS]);
	}
	struct plan p;
	if (build(j, 0, &p)) {
		/* the updated weights: dense over dp, experts over their group */
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_OPT), 1);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_EDP, PLAN_PHASE_OPT), 1);
		CHECK(t, count_coll(&p, PLAN_ALL_REDUCE, JOB_GROUP_EDP, PLAN_PHASE_BWD) > 0);
		plan_release(&p);
	}
	/* FSDP: each MoE block gathers its dense part over dp and its experts over their group,
	 * and reduce-scatters both ways */
	j->strat.framework = STRAT_FSDP;
	j->strat.fsdp_sharding = STRAT_FSDP_FULL_SHARD;
	j->strat.shard_group = j->strat.dp;
	j->strat.ep = 1;
	ok = fx_mem(j, 0, &m1);
	j->strat.ep = 4;
	ok = ok && fx_mem(j, 0, &m4);
	if (ok)
		CHECK_NEAR(t, (double)m4.max_cat[GPU][PLAN_MEM_OPTIM],
			   (double)m1.max_cat[GPU][PLAN_MEM_OPTIM], 1e-6);
	if (build(j, 0, &p)) {
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_EDP, PLAN_PHASE_FWD), 4);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_REDUCE_SCATTER, JOB_GROUP_EDP, PLAN_PHASE_BWD), 4);
		CHECK(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_FWD) >= 4);
		/* the experts' gather moves this rank's 2 local experts in 4 shards */
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].kind == PLAN_COLL && p.ops[i].u.coll.group == JOB_GROUP_EDP &&
			    p.ops[i].u.coll.coll == PLAN_ALL_GATHER) {
				CHECK_EQ_INT(t, p.ops[i].u.coll.count, 2 * 3 * 1024 * 512 / 4);
				break;
			}
		plan_release(&p);
	}
	free(j);
}

/* HF's eager MoE block finds each local expert's tokens with torch.where, a host wait each
 * (forward and its recompute); fused code (grouped GEMMs, Megatron) does not */
static void test_moe_eager_expert_where(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_moe(j);
	fx_degrees(j, 1, 1, 1, 1, 2);
	j->strat.recompute = STRAT_RECOMPUTE_NONE;
	for (int eager = 1; eager >= 0; eager--) {
		j->strat.kernels = eager ? STRAT_KERNELS_EAGER : STRAT_KERNELS_FUSED;
		struct plan p;
		if (!build(j, 0, &p))
			break;
		int where = 0, waited = 0;
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].kind == PLAN_COMPUTE && !strcmp(p.ops[i].name, "expert_where")) {
				where++;
				waited += (p.ops[i].flags & PLAN_F_HOSTWAIT) != 0;
			}
		/* 4 MoE layers x 8 experts x 2 micro-batches */
		CHECK_EQ_INT(t, where, eager ? 4 * 8 * 2 : 0);
		CHECK_EQ_INT(t, waited, where);
		plan_release(&p);
	}
	free(j);
}

static void test_zero_comm(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 4);
	struct plan p;
	/* stage 0: buckets of 5e8 elements at the boundary only: ceil(6.74e9 / 5e8) = 14 */
	j->strat.zero_stage = 0;
	if (build(j, 0, &p)) {
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_REDUCE, JOB_GROUP_DP, PLAN_PHASE_BWD), 14);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, -1), 0);
		plan_release(&p);
	}
	/* stage 1: the same at the boundary, then one all-gather of the flat buffer */
	j->strat.zero_stage = 1;
	if (build(j, 0, &p)) {
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_REDUCE, JOB_GROUP_DP, PLAN_PHASE_BWD), 14);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_OPT), 1);
		plan_release(&p);
	}
	/* stage 2: every micro-step (4 x 14), on the comm stream when overlap_comm */
	j->strat.zero_stage = 2;
	j->strat.overlap_comm = true;
	if (build(j, 0, &p)) {
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_REDUCE, JOB_GROUP_DP, PLAN_PHASE_BWD), 56);
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].kind == PLAN_COLL && p.ops[i].phase == PLAN_PHASE_BWD)
				CHECK(t, p.ops[i].stream == PLAN_STREAM_COMM);
		plan_release(&p);
	}
	/* stage 3: all-gathers in forward and backward, reduce-scatter every micro-step */
	j->strat.zero_stage = 3;
	if (build(j, 0, &p)) {
		int agf = count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_FWD);
		int agb = count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_BWD);
		int rs = count_coll(&p, PLAN_REDUCE_SCATTER, JOB_GROUP_DP, PLAN_PHASE_BWD);
		printf("#   zero-3, 4 micro-steps: %d fwd gathers, %d bwd gathers, %d reduce-scatters\n",
		       agf, agb, rs);
		CHECK_EQ_INT(t, agf, 4 * 130); /* embedding, 32 x 4 leaf units, head */
		CHECK(t, agb > 0 && agb < agf); /* modules within max_reuse_distance stay */
		CHECK(t, rs >= 4 * 13);         /* >= 6.74e9 / 5e8 per micro-step */
		plan_release(&p);
	}
	/* stage 3's reduce_and_partition_stream is its own with overlap_comm, else the default
	 * (compute) stream; the gathers keep their stream either way */
	for (int oc = 0; oc <= 1; oc++) {
		j->strat.overlap_comm = oc;
		if (!build(j, 0, &p))
			continue;
		int rs = 0, on_compute = 0, ag_comm = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COLL)
				continue;
			if (o->u.coll.coll == PLAN_REDUCE_SCATTER) {
				rs++;
				on_compute += o->stream == PLAN_STREAM_COMPUTE;
			}
			ag_comm += o->u.coll.coll == PLAN_ALL_GATHER && o->stream == PLAN_STREAM_COMM;
		}
		CHECK(t, rs > 0 && ag_comm > 0);
		CHECK_EQ_INT(t, on_compute, oc ? 0 : rs);
		plan_release(&p);
	}
	free(j);
}

/* ZeRO-3 keeps whole every tensor of at most stage3_param_persistence_threshold elements: for
 * GPT (LayerNorms with biases, biased linears) per layer 2 x 2h of norms and 3h + h + 4h + h of
 * biases, and the final norm; they are gathered whole after the step (ag_persistent). A
 * threshold below h keeps none. */
static void test_zero3_persistence(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_gpt(&j->model, 4, 1024, 16);
	j->seq = 2048;
	fx_degrees(j, 1, 1, 1, 1, 1);
	j->strat.zero_stage = 3;
	for (int k = 0; k < 2; k++) {
		j->strat.param_persistence_threshold = k ? 1000 : 100000;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int64_t got = -1, h = 1024, want = (4 * 13 * h + 2 * h + 7) / 8;
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].kind == PLAN_COLL && !strcmp(p.ops[i].name, "ag_persistent"))
				got = p.ops[i].u.coll.count;
		if (k)
			CHECK_EQ_INT(t, got, -1);
		else
			CHECK_EQ_INT(t, got, want);
		plan_release(&p);
	}
	free(j);
}

/* DeepSpeed's reduce_scatter_coalesced slices every gradient into one Python view per rank
 * before each ZeRO-3 reduce-scatter: per micro-step dp x the model's trainable tensors. The
 * fixture is Llama-2-7B-like (RMSNorm, SwiGLU, no biases, untied): HF modules have 9 tensors
 * per layer (2 norms, q, k, v, o, gate, up, down), Megatron's fused code 6 (QKV and gate+up
 * fused); plus the embedding, the final norm and the lm_head. */
static void test_zero3_rs_views(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 2);
	j->strat.zero_stage = 3;
	const enum strat_kernels code[2] = { STRAT_KERNELS_EAGER, STRAT_KERNELS_FUSED };
	const int64_t per_layer[2] = { 9, 6 };
	for (int c = 0; c < 2; c++) {
		j->strat.kernels = code[c];
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int64_t views = 0, others = 0, ag = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COLL && o->u.coll.coll == PLAN_REDUCE_SCATTER)
				views += o->host_views;
			else if (o->kind == PLAN_COLL && o->u.coll.coll == PLAN_ALL_GATHER)
				ag += o->host_views;
			else
				others += o->host_views;
		}
		CHECK_EQ_INT(t, views, 2 * 8 * (32 * per_layer[c] + 3));
		CHECK_EQ_INT(t, others, 0);
		/* coalesced gathers slice every tensor per rank (test_zero3_coalesced) */
		CHECK(t, ag > 0 && ag % 8 == 0);
		plan_release(&p);
	}
	/* ZeRO-2 reduces a flat bucket: no per-rank lists */
	j->strat.zero_stage = 2;
	struct plan p;
	if (build(j, 0, &p)) {
		int64_t views = 0;
		for (size_t i = 0; i < p.nops; i++)
			views += p.ops[i].host_views;
		CHECK_EQ_INT(t, views, 0);
		plan_release(&p);
	}
	free(j);
}

/* whether op d is an all-gather issued after op `last`, or a kernel on the gather's stream
 * (DeepSpeed's torch.cat out of a coalesced gather) that follows one */
static bool fresh_gather(const struct plan *p, const struct plan_op *d, size_t last)
{
	if (d->kind == PLAN_COLL)
		return d->u.coll.coll == PLAN_ALL_GATHER && d->id > last;
	if (d->kind != PLAN_COMPUTE || d->stream == PLAN_STREAM_COMPUTE)
		return false;
	for (uint32_t k = 0; k < d->ndeps; k++)
		if (fresh_gather(p, &p->ops[p->deps[d->dep_off + k]], last))
			return true;
	return false;
}

/* forward compute ops that wait on an all-gather issued after the previous compute op:
 * fetches that were not prefetched */
static int fresh_waits(const struct plan *p)
{
	int n = 0;
	size_t last = 0;
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *o = &p->ops[i];
		if (o->kind != PLAN_COMPUTE || o->phase != PLAN_PHASE_FWD ||
		    o->stream != PLAN_STREAM_COMPUTE)
			continue;
		bool fresh = false;
		for (uint32_t k = 0; k < o->ndeps; k++)
			fresh |= fresh_gather(p, &p->ops[p->deps[o->dep_off + k]], last);
		n += fresh;
		last = i;
	}
	return n;
}

/* DeepSpeed pops its trace queue while the prefetched elements are below the budget, so the
 * next unit is prefetched even when it alone exceeds stage3_prefetch_bucket_size (Llama-2-7B's
 * attention, 67M, and MLP, 135M, over the default 50M); a zero budget prefetches nothing. */
static void test_zero3_prefetch(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	j->strat.zero_stage = 3;
	struct plan p;
	int dflt = -1, none = -1, live0 = -1;
	if (build(j, 0, &p)) {
		dflt = fresh_waits(&p);
		plan_release(&p);
	}
	j->strat.prefetch_bucket_size = 0;
	if (build(j, 0, &p)) {
		none = fresh_waits(&p);
		plan_release(&p);
	}
	j->strat.prefetch_bucket_size = 50000000;
	j->strat.max_live_parameters = 0;
	if (build(j, 0, &p)) {
		live0 = fresh_waits(&p);
		plan_release(&p);
	}
	printf("#   zero-3 forward compute waiting on a gather just issued: default %d, bucket 0: "
	       "%d, max_live 0: %d\n", dflt, none, live0);
	CHECK_EQ_INT(t, dflt, 1); /* only the first unit (the embedding) */
	CHECK_EQ_INT(t, none, 2 + 32 * 4); /* embedding, 32 x 4 leaf units, head */
	CHECK_EQ_INT(t, live0, none);
	free(j);
}

/* ZeRO-3 gathers DeepSpeed's leaf modules one by one: HF's Llama code has separate q, k, v
 * and gate, up Linears (7 gathers a layer: q k v, o, gate up, down; the norms stay whole),
 * Megatron's code fused ones (4); the split keeps every unit's elements. */
static void test_zero3_leaf_modules(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 1);
	j->strat.zero_stage = 3;
	const enum strat_kernels code[2] = { STRAT_KERNELS_EAGER, STRAT_KERNELS_FUSED };
	const int per_layer[2] = { 7, 4 };
	double elems[2] = { 0, 0 };
	for (int c = 0; c < 2; c++) {
		j->strat.kernels = code[c];
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int fwd = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_params") &&
			    o->phase == PLAN_PHASE_FWD) {
				fwd++;
				elems[c] += (double)o->u.coll.count;
			}
		}
		CHECK_EQ_INT(t, fwd, 1 + 32 * per_layer[c] + 1);
		plan_release(&p);
	}
	CHECK_NEAR(t, elems[0], elems[1], 1e-12);
	free(j);
}

/* DeepSpeed ZeRO-2 without use_multi_rank_bucket_allreduce: a bucket (filled from the end of
 * the flat group as backward runs) goes out cut at the partitions it spans, each slice
 * reduced to its owner (before 0.12.4, and 0.13.0 on) or all-reduced (0.12.4 - 0.12.x). Over a micro-step the slices
 * tile the group: every rank receives exactly its partition. */
static void test_zero2_partition_slices(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 4);
	j->strat.zero_stage = 2;
	j->strat.use_multi_rank_bucket_allreduce = false;
	for (int rooted = 0; rooted <= 1; rooted++) {
		j->strat.ds_reduce_rooted = rooted;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int64_t per_root[8] = {0}, total = 0;
		int n = 0, other = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COLL || strcmp(o->name, "ar_grads"))
				continue;
			enum plan_coll want = rooted ? PLAN_REDUCE : PLAN_ALL_REDUCE;
			other += o->u.coll.coll != want;
			if (o->u.coll.root >= 0 && o->u.coll.root < 8)
				per_root[o->u.coll.root] += o->u.coll.count;
			total += o->u.coll.count;
			n++;
		}
		int64_t T = 6738415616LL, S = (T + 7) / 8; /* the fixture: Llama-2-7B */
		printf("#   %s: %d slices for 4 micro-steps of %lld elements\n",
		       rooted ? "reduce" : "all-reduce", n, (long long)T);
		CHECK_EQ_INT(t, other, 0);
		CHECK_EQ_INT(t, total, 4 * T);
		for (int r = 0; r < 8; r++)
			CHECK_EQ_INT(t, per_root[r], 4 * (r < 7 ? S : T - 7 * S));
		CHECK(t, n > 4 * 14); /* more calls than one all-reduce per 5e8-element bucket */
		plan_release(&p);
	}
	/* without contiguous_gradients reduce_ipg_grads takes buffered_reduce_fallback (rank
	 * None): whole buckets all-reduced, no slices */
	j->strat.contiguous_gradients = false;
	struct plan p;
	if (build(j, 0, &p)) {
		int n = 0, rooted = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COLL && !strcmp(o->name, "ar_grads")) {
				n++;
				rooted += o->u.coll.coll != PLAN_ALL_REDUCE;
			}
		}
		CHECK_EQ_INT(t, rooted, 0);
		CHECK_EQ_INT(t, n, 4 * 14); /* ceil(6.74e9 / 5e8) buckets a micro-step */
		plan_release(&p);
	}
	free(j);
}

/* ZeRO-3's reuse distance (DeepSpeed's __params_to_release): a module stays gathered from
 * one use to the next when the modules used in between hold fewer than
 * stage3_max_reuse_distance elements. The fixture's fused layer is qkv 50.3M, o 16.8M,
 * fc1 90.2M, fc2 45.1M elements, its head 131M; one micro-batch. */
static void test_zero3_reuse_distance(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 1);
	j->strat.zero_stage = 3;
	j->strat.kernels = STRAT_KERNELS_FUSED;
	struct plan p;
	/* without recompute a unit's next use is its backward, 2 x (the units after it + the
	 * head) away: under 1e9 for the head and the last two layers' 8 units (the ninth, layer
	 * 29's fc2, is 2 x 535M away); the others are gathered again */
	j->strat.recompute = STRAT_RECOMPUTE_NONE;
	if (build(j, 0, &p)) {
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_FWD), 130);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_BWD),
			     130 - 9);
		plan_release(&p);
	}
	/* full recompute: a unit's next use is its layer's recompute. The last layer's units
	 * are < 1e9 away (the head's forward and backward between), and layer 30's fc1 (980M:
	 * fc2, layer 31 three times, the head twice, qkv and o); the rest are gathered again for
	 * the recompute. From the recompute to the backward a unit is 2 x the layer's units
	 * after it away: qkv 2 x 152M, o 2 x 135M, fc1 2 x 45M, fc2 0. The embedding is
	 * gathered again at the end of backward. */
	j->strat.recompute = STRAT_RECOMPUTE_FULL;
	const int64_t dist[3] = { 1000000000, 150000000, 0 };
	const int bwd[3] = {
		31 * 4 - 1 + 1,      /* every unit kept from its recompute */
		32 * 4 + 32 * 2 + 1, /* qkv and o released after their recompute, gathered again */
		32 * 4 + 32 * 4 + 2, /* nothing kept, not even the head from forward to backward */
	};
	for (int i = 0; i < 3; i++) {
		j->strat.max_reuse_distance = dist[i];
		if (!build(j, 0, &p))
			continue;
		int ag = count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_BWD);
		printf("#   reuse distance %lld: %d backward gathers\n", (long long)dist[i], ag);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, PLAN_PHASE_FWD), 130);
		CHECK_EQ_INT(t, ag, bwd[i]);
		plan_release(&p);
	}
	free(j);
}

/* Tied embeddings under ZeRO-3: the head's GEMM uses the embedding's weight, so DeepSpeed
 * gathers it again there when the forward in between was beyond the reuse distance (a 24 x
 * 2048 GPT: 1.2B elements), keeps it for the head's backward (next to it) and gathers it once
 * more for the lookup's backward: three gathers of V x h a micro-batch. FSDP keeps it (the
 * embedding is in the root unit, not resharded after forward): one. */
static void test_tied_embedding_gathers(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_gpt(&j->model, 24, 2048, 16);
	fx_degrees(j, 1, 1, 1, 1, 1);
	/* one rank's shard of the embedding unit: words and learned positions */
	const int64_t emb = (51200LL + 2048) * 2048 / 8;
	for (int fsdp = 0; fsdp <= 1; fsdp++) {
		j->strat.framework = fsdp ? STRAT_FSDP : STRAT_DEEPSPEED;
		j->strat.zero_stage = 3;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int n = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			n += o->kind == PLAN_COLL && o->u.coll.coll == PLAN_ALL_GATHER &&
			     o->u.coll.count == emb;
		}
		CHECK_EQ_INT(t, n, fsdp ? 1 : 3);
		plan_release(&p);
	}
	free(j);
}

/* DeepSpeed before 0.5.5 gathers parameter by parameter with torch.cuda.synchronize() around
 * the fetch and two per-rank host calls per parameter (a Python narrow, a C++ copy); before
 * 0.6.0 each gradient's reduce-scatter makes three (view, narrow, copy) per rank. The norms
 * (4096 elements, under the 1e5 persistence threshold) stay whole and are not gathered. */
static void test_zero3_old_deepspeed(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 1);
	j->strat.zero_stage = 3;
	j->strat.kernels = STRAT_KERNELS_EAGER;
	j->strat.ds_fetch_per_param = j->strat.ds_fetch_sync = j->strat.ds_rs_per_param = true;
	struct plan p;
	if (!build(j, 0, &p)) {
		free(j);
		return;
	}
	int64_t ag_views = 0, rs_views = 0, fwd = 0;
	int gathers = 0, synced = 0, fwd_gathers = 0, fwd_copies = 0;
	for (size_t i = 0; i < p.nops; i++) {
		const struct plan_op *o = &p.ops[i];
		bool f = o->phase == PLAN_PHASE_FWD;
		if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_params")) {
			gathers++;
			synced += (o->flags & PLAN_F_DEVSYNC) != 0;
			ag_views += o->host_views;
			fwd += f ? o->host_views : 0;
			fwd_gathers += f;
		}
		fwd_copies += f && o->kind == PLAN_COMPUTE && !strcmp(o->name, "ag_copy_out");
		if (o->kind == PLAN_COLL && o->u.coll.coll == PLAN_REDUCE_SCATTER)
			rs_views += o->host_views;
	}
	/* forward of one micro-batch: one gather per leaf module, embedding, per layer q, k, v,
	 * o, gate, up, down (the norms stay), the head's lm_head, each of one tensor; one copy-out
	 * per unit (embedding, 4 per layer, head) */
	CHECK(t, gathers > 0);
	CHECK_EQ_INT(t, synced, gathers);
	CHECK_EQ_INT(t, fwd_gathers, 1 + 32 * 7 + 1);
	CHECK_EQ_INT(t, fwd_copies, 1 + 32 * 4 + 1);
	CHECK_EQ_INT(t, fwd, 2 * 8 * (1 + 32 * 7 + 1));
	CHECK(t, ag_views > fwd); /* backward gathers what was released */
	CHECK_EQ_INT(t, rs_views, 3 * 8 * (32 * 9 + 3));
	CHECK_EQ_INT(t, fresh_waits(&p), 2 + 32 * 4); /* no prefetch to hide a fetch */
	plan_release(&p);
	/* 0.5.5 - 0.5.x: coalesced gathers, still synchronized, no prefetch; every fetch formats
	 * its parameters' norms (a kernel over them, the host waiting) */
	j->strat.ds_fetch_per_param = false;
	j->strat.ds_fetch_norm = true;
	if (!build(j, 0, &p)) {
		free(j);
		return;
	}
	int norms = 0, waited = 0;
	gathers = synced = fwd_copies = 0;
	for (size_t i = 0; i < p.nops; i++) {
		const struct plan_op *o = &p.ops[i];
		if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_params")) {
			gathers++;
			synced += (o->flags & PLAN_F_DEVSYNC) != 0;
		}
		fwd_copies += o->kind == PLAN_COMPUTE && !strcmp(o->name, "ag_copy_out");
		if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "param_norm")) {
			norms++;
			waited += (o->flags & PLAN_F_HOSTWAIT) != 0;
		}
	}
	CHECK(t, gathers > 0);
	CHECK_EQ_INT(t, synced, gathers);
	CHECK_EQ_INT(t, fwd_copies, 0);
	CHECK(t, norms > 0);
	CHECK_EQ_INT(t, waited, norms);
	CHECK_EQ_INT(t, fresh_waits(&p), 2 + 32 * 4);
	/* from 0.6.0: no syncs, no norms, the coordinator prefetches */
	plan_release(&p);
	j->strat.ds_fetch_sync = j->strat.ds_fetch_norm = j->strat.ds_rs_per_param = false;
	if (!build(j, 0, &p)) {
		free(j);
		return;
	}
	synced = norms = 0;
	for (size_t i = 0; i < p.nops; i++) {
		synced += (p.ops[i].flags & PLAN_F_DEVSYNC) != 0;
		norms += p.ops[i].kind == PLAN_COMPUTE && !strcmp(p.ops[i].name, "param_norm");
	}
	CHECK_EQ_INT(t, synced, 0);
	CHECK_EQ_INT(t, norms, 0);
	CHECK(t, fresh_waits(&p) < 2 + 32 * 4);
	plan_release(&p);
	free(j);
}

/* ZeRO++ and MiCS (reference/deepspeed.md §2.4). hpZ: the first micro-batch's forward gathers
 * over the data-parallel group and keeps a secondary partition of each module (a copy the host
 * waits for), every later gather reads it over the hpZ group; qwZ: every gather moves int8 with
 * its scales, quantized before and dequantized after; qgZ: no reduce-scatter, an int4
 * all-to-all within the node and one across nodes; MiCS: gathers and reduce-scatters over the
 * shard group, the replicas' all-reduce at the accumulation boundary only; FSDP HYBRID_SHARD:
 * reduce-scatter over the shard group, the all-reduce over the replicas after each. */
static void test_zero3_zeropp_mics(struct test_ctx *t)
{
	struct job *j = fx_job(32);
	fx_degrees(j, 1, 1, 1, 1, 2);
	j->strat.zero_stage = 3;
	j->strat.overlap_comm = true;
	j->strat.zero_hpz = 8, j->strat.zero_qweights = true;
	struct plan p;
	if (build(j, 0, &p)) {
		int first = 0, later = 0, wrong = 0, notint8 = 0, quant = 0, dequant = 0, copies = 0;
		int scales = 0;
		int waited = 0, dq_first = 0;
		int64_t sec_bytes = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			bool f0 = o->phase == PLAN_PHASE_FWD && o->micro == 0;
			if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_params")) {
				first += f0;
				later += !f0;
				wrong += o->u.coll.group != (f0 ? JOB_GROUP_DP : JOB_GROUP_HPZ);
				notint8 += o->u.coll.dtype != TW_INT8;
			}
			/* the scales in a gather of their own, an fp32 per 8,000 values */
			if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_scales")) {
				scales++;
				CHECK(t, o->u.coll.dtype == TW_FP32 && o->u.coll.count > 0);
			}
			if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "quantize_params"))
				quant++;
			if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "dequantize_params")) {
				dequant++;
				dq_first += f0;
			}
			if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "hpz_copy")) {
				copies++;
				waited += (o->flags & PLAN_F_HOSTWAIT) != 0;
			}
		}
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].kind == PLAN_ALLOC && !strcmp(p.ops[i].name, "hpz_secondary"))
				sec_bytes += p.ops[i].u.mem.bytes;
		CHECK(t, first > 0 && later > first);
		CHECK_EQ_INT(t, wrong, 0);
		CHECK_EQ_INT(t, notint8, 0);
		CHECK_EQ_INT(t, scales, first + later);
		CHECK(t, quant > 0);
		CHECK_EQ_INT(t, quant, dequant);
		/* a secondary per module gathered in the first forward, each waited for */
		CHECK_EQ_INT(t, copies, dq_first);
		CHECK_EQ_INT(t, waited, copies);
		/* the secondaries hold an eighth of the non-persistent parameters, 2 bytes each */
		int64_t layer = 4096LL * 4096 * 4 + 3LL * 4096 * 11008, emb = 32000LL * 4096;
		int64_t want = 2 * (32 * layer + 2 * emb) / 8;
		printf("#   hpZ secondary %lld bytes, expected %lld\n", (long long)sec_bytes,
		       (long long)want);
		CHECK(t, llabs(sec_bytes - want) <= 2 * 8 * 200);
		plan_release(&p);
	}
	/* under parameter offload the secondary partitions are host memory, copied D2H */
	j->strat.offload_param = STRAT_OFFLOAD_CPU;
	if (build(j, 0, &p)) {
		int d2h = 0, host = 0, n = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COPY && !strcmp(o->name, "hpz_copy"))
				d2h += o->u.copy.dir == PLAN_D2H && (o->flags & PLAN_F_HOSTWAIT);
			if (o->kind == PLAN_ALLOC && !strcmp(o->name, "hpz_secondary"))
				n++, host += o->u.mem.dev == PLAN_DEV_HOST;
		}
		CHECK(t, n > 0);
		CHECK_EQ_INT(t, d2h, n);
		CHECK_EQ_INT(t, host, n);
		plan_release(&p);
	}
	j->strat.offload_param = STRAT_OFFLOAD_NONE;
	/* qgZ on 4 nodes: int4 all-to-alls, nothing reduce-scattered */
	j->strat.zero_hpz = 1, j->strat.zero_qweights = false, j->strat.zero_qgrads = true;
	if (build(j, 0, &p)) {
		int64_t node = 0, xnode = 0, nn = 0, nx = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COLL)
				continue;
			if (!strcmp(o->name, "a2a_grads_node")) {
				CHECK_EQ_INT(t, o->u.coll.group, JOB_GROUP_NODE);
				node += o->u.coll.count, nn++;
			}
			if (!strcmp(o->name, "a2a_grads_xnode")) {
				CHECK_EQ_INT(t, o->u.coll.group, JOB_GROUP_XNODE);
				xnode += o->u.coll.count, nx++;
			}
		}
		CHECK_EQ_INT(t, count_coll(&p, PLAN_REDUCE_SCATTER, JOB_GROUP_DP, -1), 0);
		CHECK(t, nn > 0 && nn == nx);
		/* two micro-batches of every trainable parameter, half a byte each, then an eighth */
		double psit = 32.0 * (double)(4096LL * 4096 * 4 + 3LL * 4096 * 11008 + 2 * 4096) +
			      2.0 * 32000 * 4096 + 4096;
		CHECK_NEAR(t, (double)node, psit, 1e-6);
		CHECK_NEAR(t, (double)xnode, psit / 8, 1e-6);
		plan_release(&p);
	}
	/* MiCS over 8-rank shard groups, two micro-batches */
	j->strat.zero_qgrads = false, j->strat.mics_shard = j->strat.shard_group = 8;
	if (build(j, 0, &p)) {
		int ar0 = 0, ar1 = 0;
		int64_t rs = 0, ar = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COLL)
				continue;
			if (!strcmp(o->name, "ar_grads")) {
				CHECK_EQ_INT(t, o->u.coll.group, JOB_GROUP_REPLICA);
				ar0 += o->micro == 0, ar1 += o->micro == 1;
				ar += o->u.coll.count;
			}
			if (!strcmp(o->name, "rs_grads") && o->micro == 1)
				rs += o->u.coll.count;
		}
		CHECK(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_SHARD, -1) > 0);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_GATHER, JOB_GROUP_DP, -1), 0);
		CHECK(t, count_coll(&p, PLAN_REDUCE_SCATTER, JOB_GROUP_SHARD, -1) > 0);
		CHECK_EQ_INT(t, ar0, 0);
		CHECK(t, ar1 > 0);
		CHECK_EQ_INT(t, ar, rs); /* the last micro-batch's partitions, all of them */
		plan_release(&p);
	}
	check_group_match(t, j, 0, 9, JOB_GROUP_REPLICA);
	/* MiCS over 16-rank (two-node) shard groups, hierarchical: across the two nodes into this
	 * rank's slots, placed, then within the node; MiCS's handle slices nothing */
	j->strat.mics_shard = j->strat.shard_group = 16, j->strat.mics_hier = true;
	if (build(j, 0, &p)) {
		int x = 0, n = 0, place = 0, cats = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_params_xnode")) {
				CHECK_EQ_INT(t, o->u.coll.group, JOB_GROUP_SHARD_XNODE);
				const struct plan_op *nx = NULL;
				for (size_t k = i + 1; k < p.nops && !nx; k++)
					if (p.ops[k].kind == PLAN_COLL && !strcmp(p.ops[k].name, "ag_params"))
						nx = &p.ops[k];
				CHECK(t, nx && nx->u.coll.group == JOB_GROUP_NODE &&
					     nx->u.coll.count == 2 * o->u.coll.count);
				x++;
			}
			n += o->kind == PLAN_COLL && !strcmp(o->name, "ag_params");
			place += o->kind == PLAN_COMPUTE && !strcmp(o->name, "ag_place");
			cats += o->kind == PLAN_COMPUTE && !strcmp(o->name, "ag_cat");
		}
		CHECK(t, x > 0);
		CHECK_EQ_INT(t, x, n);
		CHECK_EQ_INT(t, place, x);
		CHECK_EQ_INT(t, cats, 0);
		CHECK_EQ_INT(t, job_group_size(j, JOB_GROUP_SHARD_XNODE), 2);
		plan_release(&p);
	}
	check_group_match(t, j, 0, 8, JOB_GROUP_SHARD_XNODE);
	check_group_match(t, j, 17, 25, JOB_GROUP_SHARD_XNODE);
	j->strat.mics_hier = false;
	/* FSDP HYBRID_SHARD: reduce-scatter within the shard group, all-reduce across replicas */
	j->strat.mics_shard = 0;
	j->strat.framework = STRAT_FSDP;
	j->strat.fsdp_sharding = STRAT_FSDP_HYBRID_SHARD;
	j->strat.schedule = STRAT_SCHED_1F1B;
	if (build(j, 0, &p)) {
		int64_t rs = 0, ar = 0;
		count_named(&p, "rs_grads", &rs);
		count_named(&p, "ar_grads", &ar);
		CHECK(t, count_coll(&p, PLAN_REDUCE_SCATTER, JOB_GROUP_SHARD, -1) > 0);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_REDUCE_SCATTER, JOB_GROUP_DP, -1), 0);
		CHECK_EQ_INT(t, count_coll(&p, PLAN_ALL_REDUCE, JOB_GROUP_REPLICA, -1),
			     count_coll(&p, PLAN_REDUCE_SCATTER, JOB_GROUP_SHARD, -1));
		CHECK_EQ_INT(t, rs, ar);
		plan_release(&p);
	}
	free(j);
}

/* Megatron-Core's uneven first and last stages: every layer is on exactly one stage (the
 * step's FLOPs are the formula's), the first stage holds first_stage_layers of them, the last
 * last_stage_layers, the middle ones an equal share. */
static void test_uneven_stages(struct test_ctx *t)
{
	struct job *j = fx_job(4);
	fx_megatron(j);
	fx_degrees(j, 1, 4, 1, 1, 4);
	j->model.layers = 30; /* 30 = 6 + 2 x 9 + 6 */
	j->strat.first_stage_layers = 6, j->strat.last_stage_layers = 6;
	double want = formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step;
	CHECK_NEAR(t, sum_model_flops(j), want, 1e-9);
	const int64_t per[4] = {6, 9, 9, 6};
	for (int64_t st = 0; st < 4; st++) {
		struct job_coord c = {0, 0, 0, st};
		struct plan p;
		if (!build(j, job_rank_of(j, &c), &p))
			continue;
		int32_t lo = INT32_MAX, hi = -1;
		for (size_t i = 0; i < p.nops; i++)
			if (p.ops[i].layer >= 0) {
				lo = p.ops[i].layer < lo ? p.ops[i].layer : lo;
				hi = p.ops[i].layer > hi ? p.ops[i].layer : hi;
			}
		CHECK_EQ_INT(t, hi - lo + 1, per[st]);
		CHECK_EQ_INT(t, lo, st == 0 ? 0 : 6 + (st - 1) * 9);
		plan_release(&p);
	}
	free(j);
}

/* Every layer is computed by exactly the virtual stage (chunk x pp + stage) want[] names, from
 * the compute ops of every stage's plan, and the step's FLOPs are the formula's. */
static void check_layer_homes(struct test_ctx *t, const struct job *j, const int32_t *want)
{
	int64_t layers = j->model.layers;
	int32_t home[64];
	CHECK_NEAR(t, sum_model_flops(j),
		   formula_flops_per_token(&j->model, j->seq) * (double)j->tokens_per_step, 1e-9);
	for (int64_t l = 0; l < layers; l++)
		home[l] = -1; /* no plan computes it; -2: two do; -3: a receive is labelled with it */
	for (int64_t st = 0; st < j->strat.pp; st++) {
		struct job_coord c = {0, 0, 0, st};
		struct plan p;
		if (!build(j, job_rank_of(j, &c), &p)) {
			CHECK(t, false);
			return;
		}
		for (size_t i = 0; i < p.nops; i++) {
			int32_t l = p.ops[i].layer;
			if (l < 0 || l >= layers)
				continue;
			if (p.ops[i].kind == PLAN_P2P && !strncmp(p.ops[i].name, "recv", 4))
				home[l] = -3; /* a receive belongs to no layer */
			if (p.ops[i].kind != PLAN_COMPUTE)
				continue;
			home[l] = home[l] == -1 || home[l] == p.ops[i].stage ? p.ops[i].stage : -2;
		}
		plan_release(&p);
	}
	for (int64_t l = 0; l < layers; l++)
		CHECK_EQ_INT(t, home[l], want[l]);
}

/* Uneven stages under the interleaved schedule (Megatron-Core's get_transformer_layer_offset):
 * with first/last_stage_layers each band of chunks (one chunk of every stage) holds 1/vp of
 * every stage's count; with the embedding and the loss counted in the split, the pp x vp
 * virtual stages share layers + 2 equally and the first and the last give one up. */
static void test_uneven_stages_interleaved(struct test_ctx *t)
{
	struct job *j = fx_job(4);
	fx_megatron(j);
	fx_degrees(j, 1, 4, 1, 1, 4);
	j->strat.schedule = STRAT_SCHED_INTERLEAVED;
	j->strat.vp = 2;

	/* 36 = 6 + 2 x 12 + 6: chunks of 3, 6, 6, 3 layers; virtual stage v = chunk x 4 + stage */
	j->model.layers = 36;
	j->strat.first_stage_layers = 6, j->strat.last_stage_layers = 6;
	const int32_t want_fl[36] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3,
				     4, 4, 4, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 7, 7, 7};
	check_layer_homes(t, j, want_fl);

	/* 30 + embedding + loss = 32 over 8 virtual stages: 4 each, the first and last hold 3 */
	j->model.layers = 30;
	j->strat.first_stage_layers = 0, j->strat.last_stage_layers = 0;
	j->strat.embed_in_split = true, j->strat.loss_in_split = true;
	const int32_t want_el[30] = {0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
				     4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7};
	check_layer_homes(t, j, want_el);

	/* 6 + embedding + loss = 8: the first and the last virtual stage hold no layer at all */
	j->model.layers = 6;
	const int32_t want_e0[6] = {1, 2, 3, 4, 5, 6};
	check_layer_homes(t, j, want_e0);
	free(j);
}

/* Megatron's interleaved schedule with overlap_p2p_comm: every receive but a stage's first
 * is posted ahead (it does not hold the P2P stream) right after the send of its direction, so
 * in the steady state the item between runs while it transfers; without it every receive
 * holds the stream and is posted at the start of the item that uses it. Stage 1 of 4
 * receives in every item. */
static void test_overlap_p2p_comm(struct test_ctx *t)
{
	struct job *j = fx_job(4);
	fx_megatron(j);
	j->model.layers = 8;
	fx_degrees(j, 1, 4, 1, 1, 8);
	j->strat.schedule = STRAT_SCHED_INTERLEAVED;
	j->strat.vp = 2;
	for (int on = 0; on < 2; on++) {
		j->strat.overlap_p2p_comm = on;
		struct plan p;
		if (!build(j, 1, &p))
			continue;
		int recvs = 0, ahead = 0, early = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_P2P || (o->flags & PLAN_F_SEND))
				continue;
			recvs++;
			if (o->flags & PLAN_F_BLOCKING)
				continue;
			ahead++;
			/* the next compute after it belongs to another item (micro-batch, chunk
			 * or direction) than the receive */
			for (size_t k = i + 1; k < p.nops; k++)
				if (p.ops[k].kind == PLAN_COMPUTE) {
					early += p.ops[k].micro != o->micro || p.ops[k].stage != o->stage ||
						 p.ops[k].phase != o->phase;
					break;
				}
		}
		printf("#   overlap_p2p_comm %d: %d receives, %d posted ahead, %d before another item\n",
		       on, recvs, ahead, early);
		CHECK_EQ_INT(t, recvs, 2 * 8 * 2); /* forward and backward of 8 micro-batches x 2 chunks */
		CHECK_EQ_INT(t, ahead, on ? recvs - 1 : 0);
		/* only across the steady state's F B pairs is there an item between: 8 forwards
		 * of warm-up ((P - s - 1) x 2 + (V - 1) x P), so 8 pairs: 7 forward receives
		 * and 8 backward ones (the first after the last warm-up forward) */
		CHECK_EQ_INT(t, early, on ? 7 + 8 : 0);
		plan_release(&p);
	}
	free(j);
}

/* rank 0's first layer: its saved activations, the buffer its recompute_modules make again,
 * how many ops recompute, and the plan's FLOPs */
struct rc_figs {
	int64_t act, rc, nrc;
	double model, hw;
};

static bool rc_figs(const struct job *j, struct rc_figs *f)
{
	struct plan p;
	memset(f, 0, sizeof(*f));
	f->act = f->rc = -1;
	if (!build(j, 0, &p))
		return false;
	for (size_t i = 0; i < p.nops; i++) {
		const struct plan_op *o = &p.ops[i];
		if (o->kind == PLAN_ALLOC && f->act < 0 && !strcmp(o->name, "activations"))
			f->act = o->u.mem.bytes;
		if (o->kind == PLAN_ALLOC && f->rc < 0 && !strcmp(o->name, "recomputed"))
			f->rc = o->u.mem.bytes;
		if (o->kind == PLAN_COMPUTE && (o->flags & PLAN_F_RECOMPUTE))
			f->nrc++;
	}
	f->model = p.model_flops, f->hw = p.hw_flops;
	plan_release(&p);
	return true;
}

/* Megatron-Core's recompute_modules (selective): a module's tensors leave the layer's saved
 * activations and come back, the same bytes, in a "recomputed" buffer before the layer's
 * backward, beside the module's forward ops; model FLOPs do not change, hardware FLOPs grow by
 * the recomputed forward. Llama-2 7B at TP 2 with SP: mlp = T x 3 x f x 2 bytes / 2 (gate, up,
 * fc2's input); its norms are fused into the linears (no layernorm to recompute). The MoE
 * fixture: moe_act = T x k x fe x 2 / 2, shared_experts = T x 3 x fs x 2 / 2, layernorm = the
 * pre-MLP norm's output, T x h x 2 / 2 with SP; moe = all of the block's. */
static void test_recompute_modules(struct test_ctx *t)
{
	struct job *j = fx_job(2);
	fx_megatron(j);
	fx_degrees(j, 2, 1, 1, 1, 1);
	j->strat.sequence_parallel = true;
	j->strat.recompute = STRAT_RECOMPUTE_SELECTIVE;
	int64_t T = j->seq, ab = 2;
	struct rc_figs base, f;
	j->strat.recompute_modules = STRAT_RC_CORE_ATTN;
	bool ok = rc_figs(j, &base);
	/* flash attention: no buffer to make again; Megatron-Core still re-runs the kernel
	 * (checkpoint_core_attention), once per layer, its forward FLOPs again */
	CHECK(t, ok && base.rc == -1 && base.nrc == j->model.layers);
	struct rc_figs none;
	j->strat.recompute = STRAT_RECOMPUTE_NONE;
	ok = ok && rc_figs(j, &none);
	j->strat.recompute = STRAT_RECOMPUTE_SELECTIVE;
	CHECK(t, ok && base.hw > none.hw && base.model == none.model);
	{ /* DeepSpeed's (Megatron-DeepSpeed's legacy) flash attention: nothing to redo */
		struct job *d = fx_job(2);
		fx_degrees(d, 2, 1, 1, 1, 1);
		d->strat.recompute = STRAT_RECOMPUTE_SELECTIVE;
		struct rc_figs df;
		CHECK(t, rc_figs(d, &df) && df.rc == -1 && df.nrc == 0);
		free(d);
	}
	j->strat.recompute_modules = STRAT_RC_CORE_ATTN | STRAT_RC_MLP | STRAT_RC_LAYERNORM;
	ok = ok && rc_figs(j, &f);
	int64_t mlp = T * 3 * j->model.ffn_hidden * ab / 2;
	CHECK(t, ok);
	CHECK_EQ_INT(t, base.act - f.act, mlp);
	CHECK_EQ_INT(t, f.rc, mlp);
	CHECK(t, f.nrc >= 3); /* fc1, act, fc2 */
	CHECK_NEAR(t, f.model, base.model, 1e-12);
	/* per layer and micro-batch: fc1 (two of f wide) and fc2 again, 2 x T x h x 3f / tp */
	CHECK_NEAR(t, f.hw - base.hw,
		   (double)j->model.layers * 2.0 * T * j->model.hidden * 3.0 * j->model.ffn_hidden / 2,
		   1e-6);

	fx_moe(j);
	T = j->seq;
	j->strat.recompute_modules = STRAT_RC_CORE_ATTN;
	ok = rc_figs(j, &base);
	j->strat.recompute_modules = STRAT_RC_MOE_ACT | STRAT_RC_SHARED | STRAT_RC_LAYERNORM |
				     STRAT_RC_MLP; /* mlp: not an MoE layer's */
	ok = ok && rc_figs(j, &f);
	CHECK(t, ok);
	int64_t want = T * 2 * 512 * ab / 2 + T * 3 * 1024 * ab / 2 + T * 1024 * ab / 2;
	CHECK_EQ_INT(t, base.act - f.act, want);
	CHECK_EQ_INT(t, f.rc, want);
	CHECK_NEAR(t, f.model, base.model, 1e-12);
	CHECK(t, f.hw > base.hw);
	/* moe: the whole block but its input, again with its all-to-alls; the dispatcher (SP)
	 * keeps the experts' input whole on every TP rank, the router's fp32 probabilities are
	 * split with the sequence */
	j->strat.recompute_modules = STRAT_RC_MOE | STRAT_RC_MOE_ACT; /* moe_act: within moe */
	ok = rc_figs(j, &f);
	CHECK(t, ok);
	want = T * 8 * 4 / 2 + T * 2 * 1024 * ab + T * 2 * 3 * 512 * ab / 2 + T * 3 * 1024 * ab / 2;
	CHECK_EQ_INT(t, base.act - f.act, want);
	CHECK_EQ_INT(t, f.rc, want);
	CHECK_NEAR(t, f.model, base.model, 1e-12);
	/* mla_up_proj: MLA's q, k and v (16 heads x 192 each for q and k, x 128 for v, over tp 2)
	 * leave the saved activations and are made again by the up projections and RoPE: their
	 * GEMMs' FLOPs once more per layer; a model without MLA has nothing to drop */
	j->strat.recompute_modules = STRAT_RC_CORE_ATTN | STRAT_RC_MLA_UP;
	ok = rc_figs(j, &f);
	CHECK(t, ok && f.act == base.act && f.rc == -1);
	struct model *m = &j->model;
	m->kv_lora_rank = 512, m->q_lora_rank = 768, m->kv_heads = 16; /* MLA: a k, v per head */
	m->qk_nope_head_dim = 128, m->qk_rope_head_dim = 64, m->v_head_dim = 128;
	j->strat.recompute_modules = STRAT_RC_CORE_ATTN;
	ok = rc_figs(j, &base);
	j->strat.recompute_modules = STRAT_RC_CORE_ATTN | STRAT_RC_MLA_UP;
	ok = ok && rc_figs(j, &f);
	CHECK(t, ok);
	want = T * ab * 16 * (192 + 192 + 128) / 2;
	CHECK_EQ_INT(t, base.act - f.act, want);
	CHECK_EQ_INT(t, f.rc, want);
	CHECK_NEAR(t, f.model, base.model, 1e-12);
	double up = 2.0 * T * (768.0 * 16 * 192 + 512.0 * 16 * (128 + 128)) / 2;
	CHECK_NEAR(t, f.hw - base.hw, (double)m->layers * up, 1e-6);
	free(j);
}

/* Today's DeepSpeed gathers several parameters in one call when it prefetches (or a module has
 * more than one): AllGatherCoalescedHandle.wait slices every parameter out of each rank's chunk
 * (a view per rank and tensor) and torch.cat's it into the parameter, a copy beside the gathered
 * buffer. A fetch of a single-tensor module alone (no prefetch) does neither. */
static void test_zero3_coalesced(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	j->strat.zero_stage = 3;
	j->strat.kernels = STRAT_KERNELS_EAGER; /* q, k, v and gate, up as separate modules */
	for (int pf = 0; pf < 2; pf++) {
		j->strat.prefetch_bucket_size = pf ? 50000000 : 0;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int cats = 0, cat_mem = 0, with_views = 0;
		int64_t views = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			cats += o->kind == PLAN_COMPUTE && !strcmp(o->name, "ag_cat");
			cat_mem += o->kind == PLAN_ALLOC && !strcmp(o->name, "ag_cat");
			if (o->kind == PLAN_COLL && o->u.coll.coll == PLAN_ALL_GATHER && o->host_views) {
				with_views++;
				views += o->host_views;
				CHECK_EQ_INT(t, o->host_views % 8, 0); /* a view per rank */
			}
		}
		if (pf) {
			CHECK(t, cats > 0 && cats <= with_views);
			CHECK_EQ_INT(t, cat_mem, cats);
		} else {
			CHECK_EQ_INT(t, cats, 0);
			CHECK_EQ_INT(t, views, 0);
		}
		plan_release(&p);
	}
	free(j);
}

/* zero_quantized_nontrainable_weights with LoRA: the frozen base weights' partitions are int8
 * (half the bf16 bytes) and their gathers move int8 (and scales) that need no quantization,
 * only the dequantization after. */
static void test_zero3_frozen_int8(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	j->strat.zero_stage = 3;
	j->strat.lora_rank = 8, j->strat.lora_targets = STRAT_LORA_Q | STRAT_LORA_V;
	int64_t params[2] = {0, 0};
	for (int q = 0; q < 2; q++) {
		j->strat.zero_qfrozen = q;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int ag = 0, int8 = 0, quant = 0, dequant = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_params"))
				ag++, int8 += o->u.coll.dtype == TW_INT8;
			quant += o->kind == PLAN_COMPUTE && !strcmp(o->name, "quantize_params");
			dequant += o->kind == PLAN_COMPUTE && !strcmp(o->name, "dequantize_params");
			if (o->kind == PLAN_ALLOC && !strcmp(o->name, "params"))
				params[q] = o->u.mem.bytes;
		}
		CHECK(t, ag > 0);
		CHECK_EQ_INT(t, int8, q ? ag : 0);
		CHECK_EQ_INT(t, quant, 0);
		CHECK(t, q ? dequant > 0 : dequant == 0);
		plan_release(&p);
	}
	CHECK_EQ_INT(t, params[0], 2 * params[1]);
	free(j);
}

/* Whether op a lists op b among its dependencies. */
static bool dep_on(const struct plan *p, uint32_t a, uint32_t b)
{
	const uint32_t *d = plan_op_deps(p, &p->ops[a]);
	for (uint32_t i = 0; i < p->ops[a].ndeps; i++)
		if (d[i] == b)
			return true;
	return false;
}

/* Megatron's column-parallel backward (LinearWithGradAccumulationAndAsyncCommunication): the
 * input grad's all-reduce (async_tensor_model_parallel_allreduce) or reduce-scatter (SP)
 * starts after the input-grad GEMM and runs beside the weight-grad GEMM; the kernel after
 * waits for it. With SP the saved input's gather starts before the input-grad GEMM, which
 * does not wait for it; the weight-grad GEMM does. Without the knob (and no SP): one GEMM
 * for both grads, then the all-reduce on the critical path. */
static void test_async_tp_backward(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_megatron(j);
	fx_degrees(j, 4, 1, 1, 1, 2);
	for (int mode = 0; mode < 3; mode++) { /* sync, async all-reduce, SP */
		j->strat.async_tp_allreduce = mode > 0;
		j->strat.sequence_parallel = mode == 2;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int pairs = 0, fused = 0, sync_ar = 0;
		for (uint32_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			fused += o->kind == PLAN_COMPUTE && (!strcmp(o->name, "qkv_bwd") ||
							     !strcmp(o->name, "fc1_bwd"));
			if (mode == 0 && o->kind == PLAN_COLL && !strcmp(o->name, "ar_tp_bwd") &&
			    i + 1 < p.nops && dep_on(&p, i + 1, i))
				sync_ar++;
			if (o->kind != PLAN_COMPUTE || strcmp(o->name, "fc1_dgrad") != 0)
				continue;
			/* ag? dgrad red wgrad next */
			CHECK(t, i + 3 < p.nops);
			if (i + 3 >= p.nops)
				break;
			uint32_t red = i + 1, wg = i + 2, next = i + 3;
			CHECK_EQ_INT(t, p.ops[red].kind, PLAN_COLL);
			CHECK_EQ_INT(t, p.ops[red].u.coll.coll,
				     mode == 2 ? PLAN_REDUCE_SCATTER : PLAN_ALL_REDUCE);
			CHECK(t, dep_on(&p, red, i));
			CHECK(t, !strcmp(p.ops[wg].name, "fc1_wgrad"));
			CHECK(t, !dep_on(&p, wg, red));
			CHECK(t, dep_on(&p, next, red));
			if (mode == 2) {
				uint32_t ag = i - 1;
				CHECK(t, p.ops[ag].kind == PLAN_COLL &&
						 p.ops[ag].u.coll.coll == PLAN_ALL_GATHER);
				CHECK(t, !dep_on(&p, i, ag));
				CHECK(t, dep_on(&p, wg, ag));
			}
			pairs++;
		}
		if (mode == 0) {
			CHECK(t, fused > 0 && pairs == 0);
			CHECK(t, sync_ar >= fused); /* every layer's two reductions wait */
		} else {
			CHECK(t, fused == 0 && pairs > 0);
		}
		plan_release(&p);
	}
	/* LoRA with SP: the frozen weights need no weight grad, so one GEMM each and no second
	 * gather of the saved input; only the row-parallel linears' grad gathers remain */
	j->strat.lora_rank = 8, j->strat.lora_targets = STRAT_LORA_Q | STRAT_LORA_V;
	j->strat.sequence_parallel = true;
	struct plan p;
	if (build(j, 0, &p)) {
		int qkv = 0, ag = 0;
		for (uint32_t i = 0; i < p.nops; i++) {
			qkv += p.ops[i].kind == PLAN_COMPUTE && !strcmp(p.ops[i].name, "qkv_bwd");
			ag += p.ops[i].kind == PLAN_COLL && !strcmp(p.ops[i].name, "ag_sp_bwd");
		}
		CHECK(t, qkv > 0);
		CHECK_EQ_INT(t, ag, 2 * qkv);
		plan_release(&p);
	}
	free(j);
}

/* Megatron-Core --tp-comm-overlap: the sequence-parallel all-gathers and reduce-scatters go
 * through Transformer Engine's userbuffers (PLAN_F_USERBUF); without it, and every other
 * collective, through NCCL. */
static void test_tp_comm_overlap_userbuffers(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_megatron(j);
	fx_degrees(j, 4, 1, 1, 1, 2);
	j->strat.sequence_parallel = true;
	for (int on = 0; on < 2; on++) {
		j->strat.tp_comm_overlap = on;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int sp = 0, ub = 0, other_ub = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COLL)
				continue;
			bool is_sp = o->u.coll.group == JOB_GROUP_TP &&
				     (o->u.coll.coll == PLAN_ALL_GATHER || o->u.coll.coll == PLAN_REDUCE_SCATTER);
			sp += is_sp;
			ub += is_sp && (o->flags & PLAN_F_USERBUF);
			other_ub += !is_sp && (o->flags & PLAN_F_USERBUF);
		}
		CHECK(t, sp > 0);
		CHECK_EQ_INT(t, ub, on ? sp : 0);
		CHECK_EQ_INT(t, other_ub, 0);
		plan_release(&p);
	}
	free(j);
}

/* FSDP2 (fully_shard): a copy-in of the shard (fp32 master read, bf16 written) before every
 * all-gather on its stream, a copy-out of the gathered unit (a read and a write) on the
 * default stream before the unit runs, the gather's output buffer held beside the parameters
 * while it runs, and the grads chunk-concatenated with their cast to
 * reduce_dtype (bf16 read, fp32 written) before every reduce-scatter. FSDP1 with bf16
 * reduction copies nothing. */
static void test_fsdp2_copies(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 1);
	j->strat.framework = STRAT_FSDP;
	j->strat.fsdp_sharding = STRAT_FSDP_FULL_SHARD;
	j->strat.zero_stage = 3;
	for (int v = 1; v <= 2; v++) {
		j->strat.fsdp_version = v;
		j->strat.comm_dtype = v == 2 ? TW_FP32 : TW_BF16;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		int ag = 0, in = 0, in_before = 0, out = 0, outbuf = 0;
		double rs_in = 0, ag_part = 0, in_bytes = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind == PLAN_COLL && !strcmp(o->name, "ag_params")) {
				ag++;
				ag_part += (double)o->u.coll.count;
				in_before += i > 0 && !strcmp(p.ops[i - 1].name, "ag_copy_in");
			} else if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "ag_copy_in")) {
				in++;
				in_bytes += o->u.compute.bytes;
				CHECK(t, o->stream == PLAN_STREAM_COMM);
			} else if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "ag_copy_out")) {
				out++;
				CHECK(t, o->stream == PLAN_STREAM_COMPUTE);
			} else if (o->kind == PLAN_COMPUTE && !strcmp(o->name, "rs_copy_in")) {
				rs_in += o->u.compute.bytes;
			} else if (o->kind == PLAN_ALLOC && !strcmp(o->name, "ag_output")) {
				outbuf++; /* the gather's output beside the parameters it fills */
				CHECK(t, o->u.mem.cat == PLAN_MEM_GATHERED);
			}
		}
		CHECK(t, ag > 0);
		if (v == 1) {
			CHECK_EQ_INT(t, in + out + outbuf, 0);
			CHECK_NEAR(t, rs_in, 0, 1e-12);
		} else {
			CHECK_EQ_INT(t, in, ag);
			CHECK_EQ_INT(t, in_before, ag);
			CHECK_EQ_INT(t, out, ag);
			CHECK_EQ_INT(t, outbuf, ag);
			CHECK_NEAR(t, in_bytes, 6.0 * ag_part, 1e-12);
			CHECK_NEAR(t, rs_in, 6.0 * fx_params(j), 1e-12);
		}
		plan_release(&p);
	}
	free(j);
}

/* torchtitan's selective op AC (recompute "op"): every second matmul in forward order is
 * kept, the others recomputed before the layer's backward, except the last (its output is
 * never read again); the memory-bound ops too. The fixture is Llama-2-7B-like (MHA, SwiGLU
 * 11008, flash attention): HF code recomputes k, o and up (3 of q k v o gate up down) and keeps
 * the layer input, q, v, gate, down and the attention output with its fp32 log-sum-exp;
 * Megatron's fused code recomputes only o (of QKV, o, fc1, fc2) and keeps QKV and fc1. */
static void test_recompute_op(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_degrees(j, 1, 1, 1, 1, 1);
	j->strat.recompute = STRAT_RECOMPUTE_OP;
	const double T = 4096, h = 4096, f = 11008, L = 32;
	struct { enum strat_kernels code; double rflops, kept; } want[2] = {
		{ STRAT_KERNELS_EAGER, 2 * T * (h * h + h * h + f * h), h + h + h + f + h },
		{ STRAT_KERNELS_FUSED, 2 * T * (h * h), h + 3 * h + 2 * f },
	};
	for (int c = 0; c < 2; c++) {
		j->strat.kernels = want[c].code;
		struct plan p;
		if (!build(j, 0, &p))
			continue;
		double rflops = 0;
		int attn = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *o = &p.ops[i];
			if (o->kind != PLAN_COMPUTE || !(o->flags & PLAN_F_RECOMPUTE))
				continue;
			if (o->u.compute.kernel == PLAN_K_GEMM)
				rflops += o->u.compute.flops;
			attn += o->u.compute.kernel == PLAN_K_ATTN;
		}
		CHECK_NEAR(t, rflops, L * want[c].rflops, 1e-12);
		CHECK_EQ_INT(t, attn, 0); /* flash attention's output is kept */
		struct plan_mem m;
		struct tw_err e = {0};
		if (plan_memory(j, &p, &m, &e) == TW_OK) {
			double per_layer = T * want[c].kept * 2 + T * h * 2 + T * 32 * 4;
			CHECK_NEAR(t, (double)m.max_cat[PLAN_DEV_GPU][PLAN_MEM_ACTIV], L * per_layer,
				   1e-12);
		}
		plan_release(&p);
	}
	free(j);
}

/* bytes per parameter the GPU optimizer step moves (the "optimizer" ops of the plan) */
static double optim_bytes_per_param(const struct plan *p)
{
	double bytes = 0, n = 0;
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].kind == PLAN_COMPUTE && !strcmp(p->ops[i].name, "optimizer")) {
			bytes += p->ops[i].u.compute.bytes;
			n += (double)p->ops[i].u.compute.m;
		}
	return n > 0 ? bytes / n : 0;
}

/* Mixed-precision Adam on the GPU, counted pass by pass: Adam 28 B (master, m, v read and
 * written, fp32 grad read), unscale + inf check 8 B under fp16 loss scaling, the grad norm
 * 4 B when clipping, the 16-bit copy 4 + 2 B. */
static void test_optimizer_passes(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_megatron(j);
	struct plan p;
	j->strat.param_dtype = TW_FP16, j->strat.loss_scaling = true, j->strat.gradient_clipping = 1;
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, optim_bytes_per_param(&p), 28 + 8 + 4 + 4 + 2, 1e-12);
		plan_release(&p);
	}
	j->strat.param_dtype = TW_BF16, j->strat.loss_scaling = false, j->strat.gradient_clipping = 0;
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, optim_bytes_per_param(&p), 28 + 4 + 2, 1e-12);
		plan_release(&p);
	}
	free(j);
}

/* bytes per logit element of the first op named `name` */
static double per_logit(const struct plan *p, const struct job *j, const char *name)
{
	double elems = (double)j->strat.micro_batch * (double)j->seq * (double)(j->model.vocab / j->strat.tp);
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].kind == PLAN_COMPUTE && !strcmp(p->ops[i].name, name))
			return p->ops[i].u.compute.bytes / elems;
	return 0;
}

/* Cross-entropy passes over the logits, counted from the code: Megatron's vocab-parallel CE
 * 38 B/element forward (bf16: cast 6, max 4, subtract 8, exp 8, sum 4, divide 8), 14 backward;
 * HF's causal-LM loss 18 forward (cast 6, log_softmax 12), 22 backward. */
/* bytes of the first compute op named `name` */
static double op_bytes(const struct plan *p, const char *name)
{
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].kind == PLAN_COMPUTE && !strcmp(p->ops[i].name, name))
			return p->ops[i].u.compute.bytes;
	return -1;
}

/* the kernels beyond the first of the first compute op with this name, -1 if none */
static double op_extra(const struct plan *p, const char *name)
{
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].kind == PLAN_COMPUTE && !strcmp(p->ops[i].name, name))
			return p->ops[i].u.compute.extra_kernels;
	return -1;
}

/* DeepSpeed's passes over the grads before the step: the norm (get_grad_norm_direct, each grad
 * .double().norm(2): 2 + 16 B an element) always, and the inf/nan check (fp16, and bf16 with
 * bf16.check_grad_overflow):
 * ZeRO-1/2 run _has_inf_or_nan on each grad of the partition (2 + 26 B an element, six calls a
 * tensor), ZeRO-3 isinf/isnan .any() over its flat grad partitions; then an all-reduce
 * of the flag, whose .item() the host waits for. Without the check: neither. */
static void test_ds_overflow_check(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	const double part = 6738415616.0 / 8; /* the fixture's Llama-2-7B over 8 ranks */
	for (int stage = 2; stage <= 3; stage++)
		for (int chk = 0; chk <= 1; chk++) {
			j->strat.zero_stage = stage;
			j->strat.check_grad_overflow = chk;
			struct plan p;
			if (!build(j, 0, &p))
				continue;
			int64_t c = 0;
			int n = count_named(&p, "overflow_check", &c);
			double bytes = op_bytes(&p, "inf_nan_check");
			CHECK_EQ_INT(t, n, chk);
			for (size_t i = 0; chk && i < p.nops; i++)
				if (p.ops[i].kind == PLAN_COLL && !strcmp(p.ops[i].name, "overflow_check"))
					CHECK(t, p.ops[i].flags & PLAN_F_HOSTWAIT);
			if (!chk)
				CHECK_NEAR(t, bytes, -1, 0);
			else if (stage == 2)
				CHECK_NEAR(t, bytes, part * 28, 1e-6);
			else /* bf16 grad partitions (the fixture's grad_accum_dtype) */
				CHECK_NEAR(t, bytes, part * 2 * (2 + 2), 1e-6);
			/* 32 layers of 6 tensors (fused qkv and fc1, two norms), the embedding, the
			 * final norm and lm_head: ZeRO-2 walks 195 / 8 + 1 of them (6 calls each for
			 * the check, 2 for the norm), ZeRO-3 a partition of each (capped at 255) */
			if (chk && stage == 2)
				CHECK_NEAR(t, op_extra(&p, "inf_nan_check"), 6 * (195 / 8 + 1) - 1, 0);
			CHECK_NEAR(t, op_bytes(&p, "grad_norm_pass"), part * 18, 1e-6);
			CHECK_NEAR(t, op_extra(&p, "grad_norm_pass"), stage == 2 ? 2 * 25 - 1 : 255, 0);
			plan_release(&p);
		}
	free(j);
}

/* The embedding's backward: its token rows (4 passes of T x h x 2 bytes) and the dense grad of
 * the rank's vocabulary rows, zeroed (2 B) and added to the accumulated grad: Megatron's fp32
 * main_grad (read 4 + 2, write 4), DeepSpeed's bf16 param.grad (read 4, write 2). */
static void test_embedding_backward(struct test_ctx *t)
{
	struct job *j = fx_job(8); /* Llama-2-7B, V 32000, h 4096, bf16, micro-batch 1 */
	double rows = 32000.0 * 4096, tok = 4096.0 * 4096 * 2 * 4;
	struct plan p;
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, op_bytes(&p, "embed_bwd"), tok + rows * 8, 1e-9);
		plan_release(&p);
	}
	fx_megatron(j);
	fx_degrees(j, 2, 1, 1, 1, 1);
	if (build(j, 0, &p)) { /* TP 2: half the rows per rank */
		CHECK_NEAR(t, op_bytes(&p, "embed_bwd"), tok + rows / 2 * 12, 1e-9);
		plan_release(&p);
	}
	free(j);
}

static void test_cross_entropy_passes(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	struct plan p;
	j->strat.kernels = STRAT_KERNELS_EAGER; /* HF's loss, DeepSpeed's default without TP/PP */
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, per_logit(&p, j, "loss"), 18, 1e-9);
		CHECK_NEAR(t, per_logit(&p, j, "loss_bwd"), 22, 1e-9);
		plan_release(&p);
	}
	j->strat.kernels = STRAT_KERNELS_FUSED; /* Megatron-DeepSpeed's code: Megatron's loss */
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, per_logit(&p, j, "loss"), 38, 1e-9);
		plan_release(&p);
	}
	fx_megatron(j);
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, per_logit(&p, j, "loss"), 38, 1e-9);
		CHECK_NEAR(t, per_logit(&p, j, "loss_bwd"), 14, 1e-9);
		plan_release(&p);
	}
	free(j);
}


/* Backward passes over the residual stream (tn = tokens x h x 2 bytes): a norm's backward
 * (3 tn) carries autograd's sum of its input's two grads (3 tn); biases add a sum over tokens
 * of the output grad to the op before their GEMM's backward (GPT: out_proj, fc2 1 tn each). */
static void test_backward_passes(struct test_ctx *t)
{
	struct job *j = fx_job(8); /* Llama-2-7B: no biases */
	double tn = 4096.0 * 4096 * 2;
	struct plan p;
	j->strat.hidden_dropout = 0; /* its mask: test_residual_dropout */
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, op_bytes(&p, "norm2_bwd"), 6 * tn, 1e-9);
		CHECK_NEAR(t, op_bytes(&p, "residual1_bwd"), 2 * tn, 1e-9);
		plan_release(&p);
	}
	fx_gpt(&j->model, 24, 2048, 16);
	j->seq = j->model.seq_len;
	tn = 2048.0 * 2048 * 2;
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, op_bytes(&p, "norm2_bwd"), 6 * tn, 1e-9);
		CHECK_NEAR(t, op_bytes(&p, "residual1_bwd"), 3 * tn, 1e-9);
		CHECK_NEAR(t, op_bytes(&p, "residual2_bwd"), 3 * tn, 1e-9);
		CHECK_NEAR(t, op_bytes(&p, "norm1_bwd"), 6 * tn + 2048.0 * 3 * 2048 * 2, 1e-9);
		plan_release(&p);
	}
	free(j);
}

/* The residual adds with hidden dropout: the fused bias_dropout_add writes a 1-byte mask per
 * element (3 tn + tne forward) and its backward reads it (2 tn + tne); eager code runs the
 * dropout as a kernel of its own (read, write the output: 2 tn more, the mask counted once). */
static void test_residual_dropout(struct test_ctx *t)
{
	struct job *j = fx_job(8); /* Llama-2-7B: no biases */
	double tne = 4096.0 * 4096, tn = tne * 2;
	struct plan p;
	j->strat.hidden_dropout = 0;
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, op_bytes(&p, "residual1"), 3 * tn, 1e-9);
		CHECK_NEAR(t, op_bytes(&p, "residual2_bwd"), 2 * tn, 1e-9);
		plan_release(&p);
	}
	j->strat.hidden_dropout = 0.1;
	j->strat.kernels = STRAT_KERNELS_FUSED;
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, op_bytes(&p, "residual1"), 3 * tn + tne, 1e-9);
		CHECK_NEAR(t, op_bytes(&p, "residual2"), 3 * tn + tne, 1e-9);
		CHECK_NEAR(t, op_bytes(&p, "residual2_bwd"), 2 * tn + tne, 1e-9);
		CHECK_NEAR(t, op_extra(&p, "residual1"), 0, 0);
		plan_release(&p);
	}
	j->strat.kernels = STRAT_KERNELS_EAGER;
	if (build(j, 0, &p)) {
		CHECK_NEAR(t, op_bytes(&p, "residual1"), 5 * tn + tne, 1e-9);
		CHECK_NEAR(t, op_bytes(&p, "residual1_bwd"), 4 * tn + tne, 1e-9);
		CHECK_NEAR(t, op_extra(&p, "residual1"), 1, 0);
		plan_release(&p);
	}
	free(j);
}

static void test_offload_ops(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	j->strat.zero_stage = 3;
	j->strat.offload_optimizer = STRAT_OFFLOAD_CPU;
	j->strat.offload_param = STRAT_OFFLOAD_CPU;
	struct plan p;
	if (build(j, 0, &p)) {
		int host = 0, h2d = 0, d2h = 0;
		for (size_t i = 0; i < p.nops; i++) {
			const struct plan_op *op = &p.ops[i];
			if (op->kind == PLAN_COMPUTE && op->u.compute.kernel == PLAN_K_OPTIM)
				host += op->stream == PLAN_STREAM_HOST;
			if (op->kind == PLAN_COPY)
				*(op->u.copy.dir == PLAN_H2D ? &h2d : &d2h) += 1;
		}
		CHECK_EQ_INT(t, host, 1); /* one sub-group of 842M < 1e9 elements */
		CHECK(t, h2d > 34 && d2h > 0);
		plan_release(&p);
	}
	free(j);
}

static void test_roles(struct test_ctx *t)
{
	struct job *j = fx_job(32);
	fx_megatron(j);
	fx_degrees(j, 2, 4, 1, 1, 8);
	int64_t reps[8], w[8];
	int64_t n = plan_roles(j, reps, w, 8);
	CHECK_EQ_INT(t, n, 4);
	int64_t sum = 0;
	for (int64_t i = 0; i < n; i++) {
		struct job_coord c;
		job_coord_of(j, reps[i], &c);
		CHECK_EQ_INT(t, c.pp, i);
		sum += w[i];
	}
	CHECK_EQ_INT(t, sum, 32);
	free(j);
}

static void test_bad_strategies(struct test_ctx *t)
{
	struct plan p;
	struct tw_err e = {0};
	struct job *j = fx_job(8);
	fx_megatron(j);
	j->strat.schedule = STRAT_SCHED_INTERLEAVED;
	j->strat.vp = 3;
	fx_degrees(j, 1, 2, 1, 1, 4);
	CHECK_EQ_INT(t, plan_rank(j, 0, &p, &e), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, e.msg, "vp=3 does not divide the layers per pipeline stage");
	free(j);

	j = fx_job(8);
	fx_moe(j);
	j->strat.ep = 3;
	fx_degrees(j, 1, 1, 1, 1, 1);
	memset(&e, 0, sizeof(e));
	CHECK_EQ_INT(t, plan_rank(j, 0, &p, &e), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, e.msg, "ep=3 does not divide model.experts=8");
	free(j);

	j = fx_job(8);
	j->strat.zero_stage = 3;
	fx_degrees(j, 1, 2, 1, 1, 4);
	memset(&e, 0, sizeof(e));
	CHECK_EQ_INT(t, plan_rank(j, 0, &p, &e), TW_ERR_INVALID);
	CHECK_STR_CONTAINS(t, e.msg, "incompatible with pipeline parallelism");
	memset(&e, 0, sizeof(e));
	CHECK_EQ_INT(t, plan_rank(j, 8, &p, &e), TW_ERR_INVALID);
	free(j);
}

/* bytes and extra kernels of the first non-recompute op `name` of layer 0; -1 when absent */
static double first_op(const struct plan *p, const char *name, int *extra)
{
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *op = &p->ops[i];
		if (op->kind == PLAN_COMPUTE && op->layer == 0 && !(op->flags & PLAN_F_RECOMPUTE) &&
		    !strcmp(op->name, name)) {
			*extra = op->u.compute.extra_kernels;
			return op->u.compute.bytes;
		}
	}
	return -1;
}

/* kernels eager: HF's RMSNorm, SwiGLU and RoPE as eager PyTorch ops (bytes per element from
 * their kernels, docs/plan.md "Eager ops"), the attention output copied; GEMMs unchanged */
static void test_eager_ops(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	const double T = 4096, h = 4096, f = 11008, qk = 8192; /* q + k widths */
	struct { const char *name; double fused, eager; int kernels; } want[] = {
		{"norm1", 4 * T * h, 36 * T * h, 7},        /* 2 ab | casts 12, pow, mean, mul 20, 2 ab */
		{"norm1_bwd", 12 * T * h, 90 * T * h, 11},  /* + the residual grads summed (3 ab) */
		{"norm2", 4 * T * h, 36 * T * h, 7},
		{"act", 6 * T * f, 10 * T * f, 1},          /* silu (2 ab), product (3 ab) */
		{"act_bwd", 10 * T * f, 18 * T * f, 2},
		{"rope", 4 * T * qk, 20 * T * qk, 9},       /* neg, cat, mul, mul, add on q and k */
		{"rope_bwd", 4 * T * qk, 20 * T * qk, 9},
		{"attn_out_copy", -1, 4 * T * h, 0},        /* transpose(1, 2).contiguous() */
	};
	struct plan a, b;
	struct tw_err e = {0};
	j->strat.kernels = STRAT_KERNELS_FUSED;
	CHECK(t, plan_rank(j, 0, &a, &e) == TW_OK);
	j->strat.kernels = STRAT_KERNELS_EAGER;
	CHECK(t, plan_rank(j, 0, &b, &e) == TW_OK);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int xa = -1, xb = -1;
		CHECK_NEAR(t, first_op(&a, want[i].name, &xa), want[i].fused, 1e-12);
		CHECK_NEAR(t, first_op(&b, want[i].name, &xb), want[i].eager, 1e-12);
		CHECK_EQ_INT(t, xb, want[i].kernels);
		if (want[i].fused > 0)
			CHECK_EQ_INT(t, xa, 0);
	}
	CHECK_NEAR(t, b.hw_flops, a.hw_flops, 1e-12);
	CHECK_NEAR(t, b.model_flops, a.model_flops, 1e-12);
	plan_release(&a);
	plan_release(&b);
	free(j);
}

/* recompute_num_layers (Megatron's block method): only the first N layers of each model chunk
 * keep just their input and recompute; here pp 2 x vp 2 over 32 layers, chunks of 8, stage 0
 * holds layers 0-7 and 16-23 */
static void test_recompute_num_layers(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	fx_megatron(j);
	fx_degrees(j, 1, 2, 1, 1, 4);
	j->strat.vp = 2, j->strat.schedule = STRAT_SCHED_INTERLEAVED;
	j->strat.recompute = STRAT_RECOMPUTE_FULL, j->strat.recompute_num_layers = 3;
	struct plan p;
	struct tw_err e = {0};
	CHECK(t, plan_rank(j, 0, &p, &e) == TW_OK);
	bool rec[32] = {false}, seen[32] = {false};
	int64_t ckpts = 0;
	for (size_t i = 0; i < p.nops; i++) {
		const struct plan_op *op = &p.ops[i];
		if (op->layer >= 0 && op->layer < 32 && op->micro == 0) {
			seen[op->layer] = true;
			rec[op->layer] |= (op->flags & PLAN_F_RECOMPUTE) != 0;
		}
		ckpts += op->kind == PLAN_ALLOC && op->u.mem.cat == PLAN_MEM_CKPT;
	}
	int bad = 0;
	for (int l = 0; l < 32; l++) {
		bool on = l < 8 || (l >= 16 && l < 24);
		bool want = on && (l % 8) < 3;
		bad += seen[l] != on || rec[l] != want;
	}
	CHECK_EQ_INT(t, bad, 0);
	CHECK_EQ_INT(t, ckpts, 4 * 2 * 3); /* micro-batches x chunks x N */
	plan_release(&p);
	free(j);
}

/* plan_rebuild reuses an earlier plan's buffers (a larger, different one here) and gives what
 * plan_rank gives: the same ops field by field, the same deps and summaries */
static void test_plan_rebuild(struct test_ctx *t)
{
	struct job *big = fx_job(8), *j = fx_job(8);
	fx_degrees(big, 1, 1, 1, 1, 4); /* four micro-batches */
	fx_megatron(j);
	fx_degrees(j, 2, 2, 1, 1, 2);
	struct plan want, p;
	struct tw_err e = {0};
	memset(&p, 0, sizeof(p));
	CHECK(t, plan_rank(j, 0, &want, &e) == TW_OK);
	CHECK(t, plan_rebuild(big, 0, &p, &e) == TW_OK);
	size_t big_ops = p.nops;
	CHECK(t, plan_rebuild(j, 0, &p, &e) == TW_OK);
	CHECK(t, big_ops > p.nops && p.cap >= big_ops); /* the buffer was kept */
	CHECK_EQ_INT(t, (int64_t)p.nops, (int64_t)want.nops);
	CHECK_EQ_INT(t, (int64_t)p.ndeps, (int64_t)want.ndeps);
	int64_t bad = 0;
	for (size_t i = 0; i < p.nops && i < want.nops; i++) {
		struct plan_op a = p.ops[i], b = want.ops[i];
		bad += strcmp(a.name, b.name) != 0;
		a.name = b.name = NULL;
		bad += memcmp(&a, &b, sizeof(a)) != 0;
	}
	if (p.ndeps == want.ndeps)
		bad += memcmp(p.deps, want.deps, p.ndeps * sizeof(*p.deps)) != 0;
	CHECK_EQ_INT(t, bad, 0);
	CHECK_NEAR(t, p.hw_flops, want.hw_flops, 0);
	CHECK_EQ_INT(t, p.nbufs, want.nbufs);
	plan_release(&p);
	plan_release(&want);
	free(big);
	free(j);
}

/* tf32 (torch allow_tf32): an fp32 job's matmuls (GEMMs and attention) run in TF32 and nothing
 * else changes; a 16-bit job is untouched */
static void test_tf32(struct test_ctx *t)
{
	struct job *j = fx_job(8);
	struct strategy *s = &j->strat;
	s->param_dtype = s->grad_accum_dtype = s->comm_dtype = TW_FP32;
	struct plan a, b;
	struct tw_err e = {0};
	CHECK(t, plan_rank(j, 0, &a, &e) == TW_OK);
	s->tf32 = true;
	CHECK(t, plan_rank(j, 0, &b, &e) == TW_OK);
	CHECK_EQ_INT(t, (int64_t)a.nops, (int64_t)b.nops);
	int64_t mm = 0, other = 0, diff = 0;
	for (size_t i = 0; i < a.nops && i < b.nops; i++) {
		const struct plan_op *x = &a.ops[i], *y = &b.ops[i];
		if (x->kind != PLAN_COMPUTE) {
			diff += x->kind != y->kind;
			continue;
		}
		bool matmul = x->u.compute.kernel == PLAN_K_GEMM || x->u.compute.kernel == PLAN_K_ATTN;
		mm += matmul;
		other += !matmul;
		diff += y->u.compute.dtype != (matmul ? TW_TF32 : x->u.compute.dtype);
		diff += x->u.compute.dtype != TW_FP32; /* every kernel of an fp32 job */
		diff += x->u.compute.bytes != y->u.compute.bytes || x->u.compute.flops != y->u.compute.flops;
	}
	CHECK(t, mm > 0 && other > 0);
	CHECK_EQ_INT(t, diff, 0);
	plan_release(&a);
	plan_release(&b);
	s->param_dtype = s->grad_accum_dtype = s->comm_dtype = TW_BF16;
	CHECK(t, plan_rank(j, 0, &b, &e) == TW_OK);
	for (size_t i = 0; i < b.nops; i++)
		if (b.ops[i].kind == PLAN_COMPUTE && b.ops[i].u.compute.kernel == PLAN_K_GEMM)
			diff += b.ops[i].u.compute.dtype != TW_BF16;
	CHECK_EQ_INT(t, diff, 0);
	plan_release(&b);
	free(j);
}

static void test_names(struct test_ctx *t)
{
	CHECK(t, !strcmp(plan_coll_name(PLAN_REDUCE_SCATTER), "reduce_scatter"));
	CHECK(t, !strcmp(plan_mem_cat_name(PLAN_MEM_OPTIM), "optimizer"));
	CHECK(t, !strcmp(plan_stream_name(PLAN_STREAM_HOST), "host"));
	CHECK(t, !strcmp(plan_kind_name((enum plan_kind)99), "?"));
}

int main(void)
{
	struct test_ctx t = {0};
	TEST_RUN(&t, test_flops_dense_gqa_tp_pp_cp);
	TEST_RUN(&t, test_cp_exchange);
	TEST_RUN(&t, test_flops_proj_dim);
	TEST_RUN(&t, test_flops_gpt_interleaved);
	TEST_RUN(&t, test_flops_moe);
	TEST_RUN(&t, test_moe_expert_sharding);
	TEST_RUN(&t, test_moe_megatron_dispatcher);
	TEST_RUN(&t, test_moe_expert_folding);
	TEST_RUN(&t, test_moe_deepep);
	TEST_RUN(&t, test_coll_seq_match);
	TEST_RUN(&t, test_tied_embedding_grads);
	TEST_RUN(&t, test_p2p_match);
	TEST_RUN(&t, test_ds_pipe_blocking_send);
	TEST_RUN(&t, test_batch_inputs);
	TEST_RUN(&t, test_ds_pipe_partitioned);
	TEST_RUN(&t, test_ds_partitioned_tensor);
	TEST_RUN(&t, test_ds_partition_activations);
	TEST_RUN(&t, test_ds_grad_accumulation);
	TEST_RUN(&t, test_ds_grad_copies);
	TEST_RUN(&t, test_mla_gemms);
	TEST_RUN(&t, test_mla_attention_core);
	TEST_RUN(&t, test_sliding_window_plan);
	TEST_RUN(&t, test_lora_model_flops);
	TEST_RUN(&t, test_structure);
	TEST_RUN(&t, test_moe_eager_expert_where);
	TEST_RUN(&t, test_zero_comm);
	TEST_RUN(&t, test_zero3_persistence);
	TEST_RUN(&t, test_zero3_prefetch);
	TEST_RUN(&t, test_zero3_rs_views);
	TEST_RUN(&t, test_zero3_leaf_modules);
	TEST_RUN(&t, test_zero3_reuse_distance);
	TEST_RUN(&t, test_tied_embedding_gathers);
	TEST_RUN(&t, test_zero2_partition_slices);
	TEST_RUN(&t, test_ds_overflow_check);
	TEST_RUN(&t, test_zero3_old_deepspeed);
	TEST_RUN(&t, test_zero3_zeropp_mics);
	TEST_RUN(&t, test_zero3_coalesced);
	TEST_RUN(&t, test_zero3_frozen_int8);
	TEST_RUN(&t, test_uneven_stages);
	TEST_RUN(&t, test_uneven_stages_interleaved);
	TEST_RUN(&t, test_overlap_p2p_comm);
	TEST_RUN(&t, test_moe_a2a_overlap);
	TEST_RUN(&t, test_moe_load_imbalance);
	TEST_RUN(&t, test_moe_shared_overlap);
	TEST_RUN(&t, test_delay_wgrad);
	TEST_RUN(&t, test_moe_capacity);
	TEST_RUN(&t, test_moe_permute_fusion);
	TEST_RUN(&t, test_moe_router);
	TEST_RUN(&t, test_cuda_graphs);
	TEST_RUN(&t, test_moe_grouped_gemm);
	TEST_RUN(&t, test_moe_ds_einsum);
	TEST_RUN(&t, test_moe_ds_capacity);
	TEST_RUN(&t, test_recompute_modules);
	TEST_RUN(&t, test_tp_comm_overlap_userbuffers);
	TEST_RUN(&t, test_async_tp_backward);
	TEST_RUN(&t, test_expert_groups_cp);
	TEST_RUN(&t, test_fsdp2_copies);
	TEST_RUN(&t, test_recompute_op);
	TEST_RUN(&t, test_optimizer_passes);
	TEST_RUN(&t, test_cross_entropy_passes);
	TEST_RUN(&t, test_embedding_backward);
	TEST_RUN(&t, test_backward_passes);
	TEST_RUN(&t, test_residual_dropout);
	TEST_RUN(&t, test_offload_ops);
	TEST_RUN(&t, test_roles);
	TEST_RUN(&t, test_bad_strategies);
	TEST_RUN(&t, test_recompute_num_layers);
	TEST_RUN(&t, test_plan_rebuild);
	TEST_RUN(&t, test_tf32);
	TEST_RUN(&t, test_eager_ops);
	TEST_RUN(&t, test_names);
	return test_done(&t);
}
