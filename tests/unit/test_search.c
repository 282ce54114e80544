/* search (sim/search.c): on Llama-2 7B over 8 H100 every kept candidate fits on every role
 * (checked again here through the resolver and plan_memory), the best has the smallest
 * simulated step time, the pruning bound never exceeds a simulated time and pruning does not
 * change the top K, the best re-simulates to the same time, pins hold, every candidate keeps the
 * base's model code (kernels), and the refusals
 * (nothing fits, batch not divisible) say so. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../../sim/sim.h"
#include "test.h"

static struct job *load_base(const char *model, const char *cluster, int64_t gpus)
{
	struct job *j = TW_NEW(struct job);
	struct tw_err err = { 0 };
	struct job_inputs in = { .model = model, .cluster = cluster, .gpus = gpus,
				 .data_dir = TWIN_SOURCE_DIR };
	if (job_load(&in, j, &err) != TW_OK) {
		printf("# job_load: %s\n", err.msg);
		free(j);
		return NULL;
	}
	return j;
}

static void space(struct search_space *sp, int64_t batch, int top, bool exhaustive)
{
	search_space_init(sp);
	sp->global_batch = batch;
	sp->top = top;
	sp->exhaustive = exhaustive;
	sp->strategies_dir = TWIN_SOURCE_DIR "/examples/strategies";
}

/* every role of the candidate's job fits, recomputed independently of the search */
static bool fits_everywhere(const struct job *base, const struct search_space *sp,
			    const struct search_cand *c)
{
	struct job *j = TW_NEW(struct job);
	struct tw_err err = { 0 };
	bool ok = search_job(base, sp, c, j, &err) == TW_OK;
	ok = ok && j->strat.tp == c->tp && j->strat.pp == c->pp && j->strat.dp == c->dp &&
	     j->strat.micro_batch == c->micro && j->strat.grad_accum == c->grad_accum;
	/* the model code is the base's at every degree (its default would follow tp and pp), or
	 * the searched framework's own when the base is of another */
	enum strat_kernels k = base->strat.framework == sp->framework ? base->strat.kernels
			       : sp->framework == STRAT_MEGATRON ? STRAT_KERNELS_FUSED
								 : STRAT_KERNELS_EAGER;
	ok = ok && j->strat.kernels == k;
	int64_t reps[512], w[512];
	int64_t nr = ok ? plan_roles(j, reps, w, 512) : 0;
	for (int64_t r = 0; r < nr && ok; r++) {
		struct plan p;
		struct plan_mem m;
		char verdict[256];
		ok = plan_rank(j, reps[r], &p, &err) == TW_OK;
		if (!ok)
			break;
		ok = plan_memory(j, &p, &m, &err) == TW_OK && plan_mem_fits(&m, verdict, sizeof(verdict)) &&
		     m.gpu_total <= c->peak_bytes;
		plan_release(&p);
	}
	free(j);
	return ok;
}

static void test_exhaustive_7b(struct test_ctx *T)
{
	struct job *base = load_base("llama2-7b", "dgx-h100", 8);
	CHECK(T, base != NULL);
	if (!base)
		return;
	struct search_space sp;
	space(&sp, 32, 1000, true);
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.any_fit);
	CHECK(T, r.candidates > 50);
	CHECK_EQ_INT(T, r.simulated, r.fit);   /* exhaustive: everything that fits */
	CHECK_EQ_INT(T, r.ntop, r.fit);        /* top is large enough to hold them all */
	CHECK_EQ_INT(T, r.pruned, 0);
	for (int i = 0; i < r.ntop; i++) {
		const struct search_cand *c = &r.top[i];
		CHECK(T, c->peak_bytes <= c->capacity_bytes);
		CHECK(T, c->short_bytes <= 0);
		CHECK(T, c->step_ns > 0);
		/* the pruning bound is a true lower bound of the simulated time */
		CHECK(T, c->bound_ns <= c->step_ns);
		/* best first */
		CHECK(T, i == 0 || r.top[i - 1].step_ns <= c->step_ns);
		CHECK(T, c->tp * c->pp * c->dp == 8);
		CHECK_EQ_INT(T, c->micro * c->grad_accum * c->dp, 32);
		CHECK(T, c->pp == 1 || c->zero <= 1); /* DeepSpeed: no ZeRO-2/3 with its pipeline */
		CHECK(T, c->mfu > 0 && c->mfu < 1);
	}
	/* the fit check holds on every role, recomputed here (first few: it is slow) */
	for (int i = 0; i < r.ntop && i < 6; i++)
		CHECK(T, fits_everywhere(base, &sp, &r.top[i]));

	/* the best simulates to the same time on its own */
	struct job *j = TW_NEW(struct job);
	CHECK_EQ_INT(T, search_job(base, &sp, &r.top[0], j, &err), TW_OK);
	struct sim_options o = { .full = false };
	struct trace t;
	struct sim_stats st;
	CHECK_EQ_INT(T, sim_run(j, &o, &t, &st, &err), TW_OK);
	CHECK_EQ_INT(T, st.step_ns, r.top[0].step_ns);
	trace_release(&t);
	free(j);

	/* pruning by the bound keeps the same top 5 */
	struct search_space sp5;
	space(&sp5, 32, 5, false);
	struct search_result r5;
	CHECK_EQ_INT(T, search_run(base, &sp5, &r5, &err), TW_OK);
	CHECK_EQ_INT(T, r5.ntop, 5);
	CHECK(T, r5.simulated + r5.pruned == r5.fit);
	CHECK(T, r5.simulated < r.simulated);
	for (int i = 0; i < r5.ntop && i < r.ntop; i++)
		CHECK_EQ_INT(T, r5.top[i].step_ns, r.top[i].step_ns);
	/* the answer does not depend on the number of worker threads */
	for (int th = 1; th <= 4; th += 3) {
		struct search_space spt;
		space(&spt, 32, 5, false);
		spt.threads = th;
		struct search_result rt;
		CHECK_EQ_INT(T, search_run(base, &spt, &rt, &err), TW_OK);
		CHECK_EQ_INT(T, rt.threads, th);
		CHECK_EQ_INT(T, rt.ntop, r5.ntop);
		for (int i = 0; i < rt.ntop && i < r5.ntop; i++) {
			CHECK_EQ_INT(T, rt.top[i].step_ns, r5.top[i].step_ns);
			CHECK_EQ_INT(T, rt.top[i].seq, r5.top[i].seq);
		}
		search_result_release(&rt);
	}
	search_result_release(&r5);
	search_result_release(&r);
	free(base);
}

static void test_pins_and_frameworks(struct test_ctx *T)
{
	struct job *base = load_base("llama2-7b", "dgx-h100", 8);
	if (!base)
		return;
	struct search_space sp;
	space(&sp, 16, 20, false);
	const char *sets[] = { "tp=2", "recompute=full" };
	sp.sets = sets;
	sp.nsets = 2;
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.ntop > 0);
	for (int i = 0; i < r.ntop; i++) {
		CHECK_EQ_INT(T, r.top[i].tp, 2);
		CHECK_EQ_INT(T, r.top[i].recompute, STRAT_RECOMPUTE_FULL);
	}
	search_result_release(&r);

	/* Megatron: layers divisible by pp, sequence parallel with tp */
	space(&sp, 16, 50, false);
	sp.framework = STRAT_MEGATRON;
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.ntop > 0);
	CHECK_EQ_INT(T, r.rejected, 0);
	for (int i = 0; i < r.ntop; i++) {
		CHECK_EQ_INT(T, base->model.layers % r.top[i].pp, 0);
		CHECK(T, r.top[i].sequence_parallel == (r.top[i].tp > 1));
		CHECK(T, r.top[i].zero <= 1);
	}
	search_result_release(&r);

	/* FSDP: no pipeline */
	space(&sp, 16, 50, false);
	sp.framework = STRAT_FSDP;
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.ntop > 0);
	for (int i = 0; i < r.ntop; i++) {
		CHECK_EQ_INT(T, r.top[i].pp, 1);
		CHECK(T, r.top[i].zero != 1);
	}
	search_result_release(&r);
	free(base);
}

/* Megatron's interleaved schedule: with pp 4 and 16 micro-batches the bubble (pp - 1)/m
 * shrinks by vp, so a vp > 1 candidate beats plain 1F1B; candidates resolve to the schedule
 * they name; vp= pins. */
/* Search with `sets` (none: sp's own) and check that every top candidate has the int64
 * field at `off` (a degree: vp, ep, cp) equal to `want`; `some`: at least one candidate. */
static void expect_all(struct test_ctx *T, const struct job *base, struct search_space *sp,
		       const char *const *sets, int nsets, size_t off, int64_t want, bool some)
{
	if (sets) {
		sp->sets = sets;
		sp->nsets = nsets;
	}
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, sp, &r, &err), TW_OK);
	if (some)
		CHECK(T, r.ntop > 0);
	for (int i = 0; i < r.ntop; i++)
		CHECK_EQ_INT(T, *(const int64_t *)((const char *)&r.top[i] + off), want);
	search_result_release(&r);
}

static void test_interleaved(struct test_ctx *T)
{
	struct job *base = load_base("llama2-7b", "dgx-h100", 8);
	if (!base)
		return;
	struct search_space sp;
	space(&sp, 16, 20, true);
	sp.framework = STRAT_MEGATRON;
	const char *sets[] = { "tp=2", "pp=4", "micro_batch=1", "recompute=none", "distributed_optimizer=true" };
	sp.sets = sets;
	sp.nsets = 5;
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	int64_t plain = 0, best_vp = 0, best_vp_ns = 0;
	for (int i = 0; i < r.ntop; i++) {
		const struct search_cand *c = &r.top[i];
		CHECK(T, c->vp == 1 || c->vp == 2 || c->vp == 4 || c->vp == 8); /* 8 layers a stage */
		struct job *j = TW_NEW(struct job);
		if (search_job(base, &sp, c, j, &err) == TW_OK) {
			CHECK_EQ_INT(T, j->strat.vp, c->vp);
			CHECK(T, (j->strat.schedule == STRAT_SCHED_INTERLEAVED) == (c->vp > 1));
			/* a Megatron search from a DeepSpeed base runs Megatron's own (fused) code */
			CHECK_EQ_INT(T, j->strat.kernels, STRAT_KERNELS_FUSED);
		}
		free(j);
		if (c->vp == 1 && c->zero == 1)
			plain = c->step_ns;
		else if (c->vp > 1 && c->zero == 1 && (!best_vp || c->step_ns < best_vp_ns))
			best_vp = c->vp, best_vp_ns = c->step_ns;
	}
	printf("#   llama2-7b tp 2 pp 4, 16 micro-batches: 1F1B %.4f s, interleaved vp %lld %.4f s\n",
	       (double)plain * 1e-9, (long long)best_vp, (double)best_vp_ns * 1e-9);
	CHECK(T, plain > 0 && best_vp > 1);
	CHECK(T, best_vp_ns < plain);
	search_result_release(&r);
	/* pinned */
	const char *pinned[] = { "tp=2", "pp=4", "micro_batch=1", "recompute=none", "vp=4" };
	expect_all(T, base, &sp, pinned, 5, offsetof(struct search_cand, vp), 4, true);
	free(base);
}

/* Megatron also tries the pipeline degrees that split the layers only with the embedding and
 * the loss counted as a layer each (Llama-2 13B: 40 layers, 42 counted: pp 3 on 24 GPUs at tp
 * 8); the candidates resolve to that split; a split the user gives is kept as given. */
static void test_embedding_loss_split(struct test_ctx *T)
{
	struct job *base = load_base("llama2-13b", "dgx-h100", 24);
	if (!base)
		return;
	struct search_space sp;
	space(&sp, 24, 50, true);
	sp.framework = STRAT_MEGATRON;
	const char *sets[] = { "tp=8", "micro_batch=1", "recompute=full", "distributed_optimizer=true" };
	sp.sets = sets;
	sp.nsets = 4;
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	int el = 0, plain = 0;
	for (int i = 0; i < r.ntop; i++) {
		const struct search_cand *c = &r.top[i];
		CHECK_EQ_INT(T, c->split_el, 40 % c->pp != 0);
		struct job *j = TW_NEW(struct job);
		bool ok = search_job(base, &sp, c, j, &err) == TW_OK;
		CHECK(T, ok);
		if (ok) {
			CHECK_EQ_INT(T, j->strat.pp, c->pp);
			CHECK_EQ_INT(T, j->strat.embed_in_split, c->split_el);
			CHECK_EQ_INT(T, j->strat.loss_in_split, c->split_el);
		}
		free(j);
		el += c->split_el;
		plain += !c->split_el;
	}
	CHECK(T, el > 0 && plain > 0);
	search_result_release(&r);
	/* the user's own split with a pinned pp: kept, not added again */
	const char *user[] = { "tp=8", "pp=3", "micro_batch=1", "recompute=full",
			       "account_for_embedding_in_pipeline_split=true",
			       "account_for_loss_in_pipeline_split=true" };
	sp.sets = user;
	sp.nsets = 6;
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.ntop > 0);
	for (int i = 0; i < r.ntop; i++) {
		CHECK_EQ_INT(T, r.top[i].pp, 3);
		CHECK(T, !r.top[i].split_el);
	}
	search_result_release(&r);
	free(base);
}

/* Megatron MoE models also try selective recompute of the experts' activation and the norms
 * (recompute_modules): the candidate resolves to those modules and needs less memory than the
 * same one without recompute; a user's own recompute_modules replaces the choice. */
static void test_moe_recompute_modules(struct test_ctx *T)
{
	struct job *base = load_base("mixtral-8x7b", "dgx-h100", 16);
	if (!base)
		return;
	struct search_space sp;
	space(&sp, 64, 100, true);
	sp.framework = STRAT_MEGATRON;
	const char *sets[] = { "tp=2", "pp=1", "micro_batch=1", "distributed_optimizer=true" };
	sp.sets = sets;
	sp.nsets = 4;
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	int64_t none = 0, rc = 0;
	for (int i = 0; i < r.ntop; i++) {
		const struct search_cand *c = &r.top[i];
		if (c->ep != 8)
			continue;
		if (c->recompute == STRAT_RECOMPUTE_NONE)
			none = c->peak_bytes;
		if (!c->rc_modules)
			continue;
		rc = c->peak_bytes;
		struct job *j = TW_NEW(struct job);
		bool ok = search_job(base, &sp, c, j, &err) == TW_OK;
		CHECK(T, ok);
		CHECK(T, !ok || (j->strat.recompute == STRAT_RECOMPUTE_SELECTIVE &&
				 j->strat.recompute_modules == SEARCH_RC_MOE_MODULES));
		free(j);
	}
	printf("#   mixtral tp 2 ep 8: peak %.2f GiB without recompute, %.2f GiB with sel:moe\n",
	       (double)none / (double)TW_GIB, (double)rc / (double)TW_GIB);
	CHECK(T, none > 0 && rc > 0 && rc < none);
	search_result_release(&r);
	const char *user[] = { "tp=2", "pp=1", "micro_batch=1", "recompute=selective",
			       "recompute_modules=[\"moe_act\"]" };
	sp.sets = user;
	sp.nsets = 5;
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.ntop > 0);
	for (int i = 0; i < r.ntop; i++)
		CHECK(T, !r.top[i].rc_modules);
	search_result_release(&r);
	free(base);
}

/* Expert parallelism for MoE models: ep divides dp (Megatron: dp x cp) and the expert count,
 * or, Megatron at tp > 1 with the experts' TP at 1 (MoE parallel folding), tp x dp x cp;
 * candidates resolve to it, ep= and expert_tp= pin; dense models keep ep 1. */
static void test_expert_parallel(struct test_ctx *T)
{
	struct job *base = load_base("mixtral-8x7b", "dgx-h100", 16);
	if (!base)
		return;
	struct search_space sp;
	space(&sp, 64, 30, true);
	sp.framework = STRAT_MEGATRON;
	const char *sets[] = { "micro_batch=1", "recompute=full", "pp=2", "vp=1" };
	sp.sets = sets;
	sp.nsets = 4;
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.ntop > 0);
	int with_ep = 0;
	for (int i = 0; i < r.ntop; i++) {
		const struct search_cand *c = &r.top[i];
		int64_t et = c->etp > 0 ? c->etp : c->tp; /* Megatron-Core's layouts */
		if (c->etp > 0)
			CHECK_EQ_INT(T, (c->tp * c->dp * c->cp) % (et * c->ep), 0);
		else
			CHECK_EQ_INT(T, (c->dp * c->cp) % c->ep, 0);
		CHECK_EQ_INT(T, base->model.experts % c->ep, 0);
		with_ep += c->ep > 1;
		struct job *j = TW_NEW(struct job);
		if (search_job(base, &sp, c, j, &err) == TW_OK) {
			CHECK_EQ_INT(T, j->strat.ep, c->ep);
			CHECK_EQ_INT(T, j->strat.expert_tp, et);
		}
		free(j);
	}
	CHECK(T, with_ep > 0);
	CHECK_EQ_INT(T, r.rejected, 0);
	search_result_release(&r);
	const char *pinned[] = { "micro_batch=1", "recompute=full", "pp=2", "vp=1", "ep=2" };
	expect_all(T, base, &sp, pinned, 5, offsetof(struct search_cand, ep), 2, true);
	/* expert_tp=1 pinned at tp 2: every candidate folds, ep up to tp x dp (8 here) */
	const char *fold[] = { "micro_batch=1", "recompute=full", "pp=2", "vp=1", "tp=2",
			       "expert_tp=1" };
	expect_all(T, base, &sp, fold, 6, offsetof(struct search_cand, etp), 1, true);
	/* FSDP (torchtitan-style EP) tries it too; DeepSpeed never with ZeRO-3 ("MoE not
	 * supported with Stage 3"), so no candidate is rejected by the resolver for it */
	for (int f = 0; f < 2; f++) {
		space(&sp, 64, 30, true);
		sp.framework = f ? STRAT_DEEPSPEED : STRAT_FSDP;
		const char *one[] = { "micro_batch=1", "recompute=full" };
		sp.sets = one;
		sp.nsets = 2;
		struct search_result q;
		CHECK_EQ_INT(T, search_run(base, &sp, &q, &err), TW_OK);
		int ep = 0;
		for (int i = 0; i < q.ntop; i++) {
			ep += q.top[i].ep > 1;
			CHECK(T, !(f && q.top[i].ep > 1 && q.top[i].zero == 3));
		}
		CHECK(T, f || ep > 0);
		CHECK_EQ_INT(T, q.rejected, 0);
		search_result_release(&q);
	}
	free(base);
	/* Megatron with cp 8 on 32 GPUs, tp 1 pp 1: dp 4, and ep 8 over dp x cp is tried (the
	 * only one that fits) */
	base = load_base("mixtral-8x7b", "dgx-h100", 32);
	if (!base)
		return;
	space(&sp, 8, 20, true);
	sp.framework = STRAT_MEGATRON;
	sp.seq = 16384;
	const char *cp8[] = { "micro_batch=1", "recompute=full", "tp=1", "pp=1", "cp=8" };
	sp.sets = cp8;
	sp.nsets = 5;
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	int beyond_dp = 0;
	for (int i = 0; i < r.ntop; i++)
		beyond_dp += r.top[i].cp == 8 && r.top[i].ep > r.top[i].dp;
	CHECK(T, beyond_dp > 0);
	search_result_release(&r);
	free(base);
	/* dense: ep stays 1 */
	base = load_base("llama2-7b", "dgx-h100", 8);
	if (!base)
		return;
	space(&sp, 16, 10, false);
	expect_all(T, base, &sp, NULL, 0, offsetof(struct search_cand, ep), 1, false);
	free(base);
}

/* Context parallelism (Megatron ring attention) is tried from SEARCH_CP_MIN_SEQ tokens: at
 * 32k tokens a cp > 1 candidate fits and ranks; at 4k it is not tried;
 * cp= pins; a cp the sequence cannot take is refused; a windowed model splits by all-to-all. */
static void test_context_parallel(struct test_ctx *T)
{
	struct job *base = load_base("llama3-8b", "dgx-h100", 16);
	if (!base)
		return;
	struct search_space sp;
	space(&sp, 16, 10, false);
	sp.framework = STRAT_MEGATRON;
	sp.seq = 32768;
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.ntop > 0);
	int with_cp = 0;
	for (int i = 0; i < r.ntop; i++) {
		const struct search_cand *c = &r.top[i];
		CHECK_EQ_INT(T, c->tp * c->pp * c->cp * c->dp, 16);
		with_cp += c->cp > 1;
		struct job *j = TW_NEW(struct job);
		if (search_job(base, &sp, c, j, &err) == TW_OK) {
			CHECK_EQ_INT(T, j->strat.cp, c->cp);
			CHECK_EQ_INT(T, j->seq, 32768);
		}
		free(j);
	}
	CHECK(T, with_cp > 0);
	search_result_release(&r);
	const char *pinned[] = { "cp=2" };
	expect_all(T, base, &sp, pinned, 1, offsetof(struct search_cand, cp), 2, false);
	const char *odd[] = { "cp=3" }; /* 32768 is not a multiple of 6 */
	sp.sets = odd;
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_ERR_INVALID);
	CHECK(T, strstr(err.msg, "cp=3") != NULL);
	sp.sets = NULL;
	sp.nsets = 0;
	sp.seq = 4096; /* short: not tried */
	expect_all(T, base, &sp, NULL, 0, offsetof(struct search_cand, cp), 1, false);
	/* sliding windows: ring attention refuses them, so the candidates that split the
	 * sequence take the all-to-all */
	base->model.sliding_window = 4096, base->model.full_every = 4, base->model.full_first = 3;
	sp.seq = 32768;
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	with_cp = 0;
	for (int i = 0; i < r.ntop; i++) {
		struct job *j = TW_NEW(struct job);
		if (r.top[i].cp > 1 && search_job(base, &sp, &r.top[i], j, &err) == TW_OK) {
			with_cp++;
			CHECK(T, j->strat.cp_kind == STRAT_CP_ULYSSES);
		}
		free(j);
	}
	CHECK(T, with_cp > 0);
	search_result_release(&r);
	free(base);
}

/* ZeRO++ and MiCS for DeepSpeed ZeRO-3 across nodes with tp = cp = 1: their candidates resolve to
 * hpZ over a node, int8 weight gathers and int4 gradient all-to-alls, or MiCS shard groups of a
 * node; on a slow fabric ZeRO++ leads; one node searches neither. */
static void test_zeropp(struct test_ctx *T)
{
	struct job *base = load_base("llama2-7b", "dgx-a100-80g", 32);
	if (!base)
		return;
	base->cluster.net.nics_per_node = 1, base->cluster.net.nic_gbps = 100;
	struct search_space sp;
	space(&sp, 64, 20, false);
	struct search_result r;
	struct tw_err err = { 0 };
	CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_OK);
	CHECK(T, r.ntop > 0);
	int zpp = 0, mics = 0;
	for (int i = 0; i < r.ntop; i++) {
		const struct search_cand *c = &r.top[i];
		if (c->mics) { /* MiCS within a node */
			mics++;
			CHECK(T, !c->zeropp);
			struct job *j = TW_NEW(struct job);
			if (search_job(base, &sp, c, j, &err) == TW_OK)
				CHECK_EQ_INT(T, j->strat.mics_shard, 8);
			free(j);
		}
		if (!c->zeropp)
			continue;
		zpp++;
		CHECK(T, c->zero == 3 && c->tp == 1 && c->cp == 1);
		struct job *j = TW_NEW(struct job);
		if (search_job(base, &sp, c, j, &err) == TW_OK) {
			CHECK_EQ_INT(T, j->strat.zero_hpz, 8);
			CHECK(T, j->strat.zero_qweights && j->strat.zero_qgrads);
		}
		free(j);
	}
	CHECK(T, zpp > 0);
	CHECK(T, mics > 0);
	CHECK(T, r.top[0].zeropp);
	search_result_release(&r);
	struct job *one = load_base("llama2-7b", "dgx-a100-80g", 8);
	if (one) {
		CHECK_EQ_INT(T, search_run(one, &sp, &r, &err), TW_OK);
		for (int i = 0; i < r.ntop; i++)
			CHECK(T, !r.top[i].zeropp && !r.top[i].mics);
		search_result_release(&r);
	}
	free(one);
	free(base);
}

static void test_refusals(struct test_ctx *T)
{
	struct tw_err err = { 0 };
	struct search_result r;
	struct search_space sp;

	/* 70B on one 80 GB GPU: nothing fits, offload included; the shortfall is real */
	struct job *big = load_base("llama2-70b", "dgx-h100", 1);
	if (big) {
		space(&sp, 8, 5, false);
		CHECK_EQ_INT(T, search_run(big, &sp, &r, &err), TW_OK);
		CHECK(T, !r.any_fit);
		CHECK(T, r.offload_tried);
		CHECK(T, r.closest_short_bytes > 0);
		CHECK_EQ_INT(T, r.closest_short_bytes, r.closest.short_bytes);
		/* the GPU is the first constraint: its shortfall is the one reported */
		CHECK_EQ_INT(T, r.closest_short_bytes, r.closest.peak_bytes - r.closest.capacity_bytes);
		/* 70B bf16 weights alone are 2 x 69e9 bytes > 80 GB */
		CHECK(T, r.closest.peak_bytes > 130 * TW_GIB);
		search_result_release(&r);
		free(big);
	}

	/* batch 7 with tp and pp pinned to 1: dp 8 divides no batch of 7 */
	struct job *base = load_base("llama2-7b", "dgx-h100", 8);
	if (base) {
		space(&sp, 7, 5, false);
		const char *sets[] = { "tp=1", "pp=1" };
		sp.sets = sets;
		sp.nsets = 2;
		CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_ERR_INVALID);
		CHECK_STR_CONTAINS(T, err.msg, "not divisible");
		memset(&err, 0, sizeof(err));
		space(&sp, 0, 5, false);
		CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_ERR_INVALID);
		memset(&err, 0, sizeof(err));
		const char *bad[] = { "recompute=sometimes" };
		space(&sp, 8, 5, false);
		sp.sets = bad;
		sp.nsets = 1;
		CHECK_EQ_INT(T, search_run(base, &sp, &r, &err), TW_ERR_INVALID);
		CHECK_STR_CONTAINS(T, err.msg, "recompute");
		free(base);
	}
}

int main(void)
{
	struct test_ctx T = { 0 };
	TEST_RUN(&T, test_exhaustive_7b);
	TEST_RUN(&T, test_pins_and_frameworks);
	TEST_RUN(&T, test_interleaved);
	TEST_RUN(&T, test_embedding_loss_split);
	TEST_RUN(&T, test_moe_recompute_modules);
	TEST_RUN(&T, test_expert_parallel);
	TEST_RUN(&T, test_context_parallel);
	TEST_RUN(&T, test_zeropp);
	TEST_RUN(&T, test_refusals);
	return test_done(&T);
}
