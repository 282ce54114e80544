/* The executor's walker and host backend on hand-built plans (one process): every op kind runs,
 * the trace holds one event per op per timed step with the plan's tags, the measured memory is
 * exactly what the plan allocates, persistent buffers live across steps, failures name the
 * rank, the op and the call (and keep the failing step's completed ops), a plan that does not
 * fit or that MPI's int counts cannot carry allocates nothing. */
#include "../../exec/backend.h"
#include "test.h"

#include <stdlib.h>
#ifdef TWIN_HAVE_MPI
#include <mpi.h>
#endif

static void one_rank_job(struct job *j)
{
	memset(j, 0, sizeof(*j));
	j->gpus = 1;
	j->strat.gpus = j->strat.tp = j->strat.pp = j->strat.dp = j->strat.cp = 1;
	j->strat.ep = 1;
}

static struct plan_op *push(struct plan *p, enum plan_kind kind, enum plan_stream stream, const char *name)
{
	TW_GROW(p->ops, p->cap, p->nops + 1);
	struct plan_op *op = &p->ops[p->nops];
	memset(op, 0, sizeof(*op));
	op->id = (uint32_t)p->nops++;
	op->kind = (uint8_t)kind;
	op->stream = (uint8_t)stream;
	op->name = name;
	op->layer = op->micro = op->stage = -1;
	return op;
}

static void mem_op(struct plan *p, enum plan_kind k, int buf, int cat, int dev, int64_t bytes)
{
	struct plan_op *op = push(p, k, PLAN_STREAM_COMPUTE, k == PLAN_ALLOC ? "alloc" : "free");
	op->u.mem.buf = buf;
	op->u.mem.cat = (uint8_t)cat;
	op->u.mem.dev = (uint8_t)dev;
	op->u.mem.bytes = bytes;
	if (buf + 1 > p->nbufs)
		p->nbufs = buf + 1;
}

/* Persistent params, a transient activation, one op of every kind, a host optimizer. */
static void build_small(struct plan *p)
{
	memset(p, 0, sizeof(*p));
	mem_op(p, PLAN_ALLOC, 0, PLAN_MEM_PARAMS, PLAN_DEV_GPU, 3 * TW_MIB);
	mem_op(p, PLAN_ALLOC, 1, PLAN_MEM_ACTIV, PLAN_DEV_GPU, 2 * TW_MIB);
	struct plan_op *g = push(p, PLAN_COMPUTE, PLAN_STREAM_COMPUTE, "fc1");
	g->u.compute.kernel = PLAN_K_GEMM;
	g->u.compute.dtype = TW_BF16;
	g->u.compute.m = 64, g->u.compute.n = 96, g->u.compute.k = 32, g->u.compute.batch = 2;
	g->u.compute.flops = 2.0 * 2 * 64 * 96 * 32;
	g->layer = 3, g->micro = 1, g->stage = 0, g->phase = PLAN_PHASE_FWD;
	struct plan_op *at = push(p, PLAN_COMPUTE, PLAN_STREAM_COMPUTE, "attn");
	at->u.compute.kernel = PLAN_K_ATTN;
	at->u.compute.b = 1, at->u.compute.heads = 2, at->u.compute.s_q = at->u.compute.s_kv = 16;
	/* MLA-like: value heads narrower than the query-key heads */
	at->u.compute.head_dim = 8, at->u.compute.head_dim_v = 4, at->u.compute.causal = 1;
	at->u.compute.flops = 2.0 * 2 * 16 * 16 * (8 + 4) * 0.5;
	struct plan_op *e = push(p, PLAN_COMPUTE, PLAN_STREAM_COMPUTE, "gelu");
	e->u.compute.kernel = PLAN_K_ELEMWISE;
	e->u.compute.bytes = 4096;
	mem_op(p, PLAN_ALLOC, 2, PLAN_MEM_BUCKETS, PLAN_DEV_GPU, TW_MIB);
	struct plan_op *c = push(p, PLAN_COLL, PLAN_STREAM_COMM, "ar_grads");
	c->u.coll.coll = PLAN_ALL_REDUCE;
	c->u.coll.group = JOB_GROUP_DP;
	c->u.coll.dtype = TW_BF16;
	c->u.coll.count = 1000;
	c->u.coll.bytes = 2000;
	mem_op(p, PLAN_FREE, 1, PLAN_MEM_ACTIV, PLAN_DEV_GPU, 2 * TW_MIB);
	struct plan_op *d = push(p, PLAN_COPY, PLAN_STREAM_COPY_OUT, "grads_d2h");
	d->u.copy.dir = PLAN_D2H;
	d->u.copy.bytes = 8192;
	mem_op(p, PLAN_ALLOC, 3, PLAN_MEM_OPTIM, PLAN_DEV_HOST, 5 * TW_MIB);
	struct plan_op *o = push(p, PLAN_COMPUTE, PLAN_STREAM_HOST, "cpu_adam");
	o->u.compute.kernel = PLAN_K_OPTIM;
	o->u.compute.bytes = 16384;
	o->phase = PLAN_PHASE_OPT;
	struct plan_op *n = push(p, PLAN_COPY, PLAN_STREAM_COPY_OUT, "nvme_out");
	n->u.copy.dir = PLAN_NVME_WRITE;
	n->u.copy.bytes = 4096;
	struct plan_op *nr = push(p, PLAN_COPY, PLAN_STREAM_COPY_IN, "nvme_in");
	nr->u.copy.dir = PLAN_NVME_READ;
	nr->u.copy.bytes = 4096;
	mem_op(p, PLAN_FREE, 2, PLAN_MEM_BUCKETS, PLAN_DEV_GPU, TW_MIB);
}

struct fixture {
	int64_t capacity;  /* predicted "fits" when peak <= capacity */
};

/* The prediction a memory model would make for build_small (walked by hand). */
static enum tw_result small_plan(void *ctx, const struct job *j, int64_t rank, struct plan *p,
				 struct plan_mem *pred, struct tw_err *err)
{
	(void)j, (void)rank;
	struct fixture *f = ctx;
	build_small(p);
	memset(pred, 0, sizeof(*pred));
	/* params 3 + activ 2 + buckets 1 = 6 MiB after the bucket ALLOC */
	pred->peak[PLAN_DEV_GPU] = 6 * TW_MIB;
	pred->at_peak[PLAN_DEV_GPU][PLAN_MEM_PARAMS] = 3 * TW_MIB;
	pred->at_peak[PLAN_DEV_GPU][PLAN_MEM_ACTIV] = 2 * TW_MIB;
	pred->at_peak[PLAN_DEV_GPU][PLAN_MEM_BUCKETS] = TW_MIB;
	pred->max_cat[PLAN_DEV_GPU][PLAN_MEM_PARAMS] = 3 * TW_MIB;
	pred->max_cat[PLAN_DEV_GPU][PLAN_MEM_ACTIV] = 2 * TW_MIB;
	pred->max_cat[PLAN_DEV_GPU][PLAN_MEM_BUCKETS] = TW_MIB;
	pred->peak[PLAN_DEV_HOST] = 5 * TW_MIB;
	pred->at_peak[PLAN_DEV_HOST][PLAN_MEM_OPTIM] = 5 * TW_MIB;
	pred->max_cat[PLAN_DEV_HOST][PLAN_MEM_OPTIM] = 5 * TW_MIB;
	pred->gpu_total = pred->peak[PLAN_DEV_GPU];
	pred->gpu_capacity = f->capacity;
	if (pred->gpu_total > f->capacity) {
		plan_release(p);
		return tw_errf(err, TW_ERR_LIMIT, "rank %lld: the plan does not fit", (long long)rank);
	}
	return TW_OK;
}

static void test_host_run(struct test_ctx *T)
{
	struct job j;
	one_rank_job(&j);
	struct fixture f = {.capacity = TW_GIB};
	struct exec_options opt = {.backend = "host", .steps = 2, .warmup = 1};
	struct trace t;
	struct exec_result res;
	struct tw_err err = {0};
	enum tw_result rc = exec_run_plan(&j, &opt, small_plan, &f, &t, &res, &err);
	CHECK_EQ_INT(T, rc, TW_OK);
	if (rc != TW_OK) {
		printf("#   %s\n", err.msg);
		return;
	}
	CHECK_EQ_INT(T, res.rank, 0);
	CHECK_EQ_INT(T, res.nranks, 1);
	CHECK(T, res.report);
	/* 8 timed ops (not ALLOC/FREE) x 2 steps + 2 step markers */
	CHECK_EQ_INT(T, t.nev, 18);
	CHECK_EQ_INT(T, t.kind, TRACE_KIND_EXEC);
	int seen_gemm = 0, markers = 0;
	for (size_t i = 0; i < t.nev; i++) {
		const struct trace_event *e = &t.ev[i];
		CHECK(T, e->end_ns >= e->start_ns);
		CHECK(T, e->start_ns >= 0);
		CHECK(T, e->step == 0 || e->step == 1);
		if (e->cat == TRACE_MARKER) {
			markers++;
			CHECK_STR_CONTAINS(T, trace_name(&t, e), "step ");
		}
		if (e->cat == TRACE_GEMM) {
			seen_gemm++;
			CHECK_EQ_INT(T, e->op_id, 2);
			CHECK_EQ_INT(T, e->layer, 3);
			CHECK_EQ_INT(T, e->micro, 1);
			CHECK_NEAR(T, e->flops, 2.0 * 2 * 64 * 96 * 32, 1e-12);
			CHECK_STR_CONTAINS(T, trace_name(&t, e), "fc1");
		}
		if (e->cat == TRACE_ALL_REDUCE) {
			CHECK_EQ_INT(T, e->bytes, 2000);
			CHECK_EQ_INT(T, e->group_size, 1);
			/* the communicator as the simulator names it: group and color */
			CHECK_EQ_INT(T, e->comm, 1 + ((int64_t)JOB_GROUP_DP << 32) +
						 job_group_color(&j, JOB_GROUP_DP, 0));
		}
		if (e->op_id == 10)
			CHECK_EQ_INT(T, e->cat, TRACE_HOST);
	}
	CHECK_EQ_INT(T, seen_gemm, 2);
	CHECK_EQ_INT(T, markers, 2);
	/* measured == predicted, by device and category; params persist across steps */
	CHECK_EQ_INT(T, res.peak[PLAN_DEV_GPU], 6 * TW_MIB);
	CHECK_EQ_INT(T, res.at_peak[PLAN_DEV_GPU][PLAN_MEM_ACTIV], 2 * TW_MIB);
	CHECK_EQ_INT(T, res.peak[PLAN_DEV_HOST], 5 * TW_MIB);
	CHECK(T, res.mem_match);
	CHECK_EQ_INT(T, res.rank_peak[0], 6 * TW_MIB);
	CHECK_EQ_INT(T, t.peak_mem[0], 6 * TW_MIB);
	/* 3 steps x 1 verified collective */
	CHECK_EQ_INT(T, res.colls_verified, 3);
	CHECK(T, res.scratch_bytes > 0);
	CHECK(T, t.nmem > 0);
	trace_release(&t);
	exec_result_release(&res);
}

static void test_does_not_fit(struct test_ctx *T)
{
	struct job j;
	one_rank_job(&j);
	struct fixture f = {.capacity = TW_MIB};
	struct exec_options opt = {.backend = "host", .steps = 1};
	struct trace t;
	struct exec_result res;
	struct tw_err err = {0};
	enum tw_result rc = exec_run_plan(&j, &opt, small_plan, &f, &t, &res, &err);
	CHECK_EQ_INT(T, rc, TW_ERR_LIMIT);
	CHECK_STR_CONTAINS(T, err.msg, "does not fit");
	CHECK(T, res.report);
	CHECK_EQ_INT(T, res.peak[PLAN_DEV_GPU], 0); /* nothing allocated */
	CHECK_EQ_INT(T, t.nev, 0);
	trace_release(&t);
	exec_result_release(&res);
}

struct partial_seen {
	int64_t run_id;
	size_t nev;
	size_t failed_step_ops;  /* events of the step that failed (timed step 1) */
	int calls;
};
static int64_t begin_hook(void *ctx, int64_t nranks, struct tw_err *err)
{
	(void)ctx, (void)nranks, (void)err;
	return 42;
}
static void partial_hook(void *ctx, int64_t run_id, const struct trace *t)
{
	struct partial_seen *s = ctx;
	s->run_id = run_id;
	s->nev = t->nev;
	for (size_t i = 0; i < t->nev; i++)
		if (t->ev[i].step == 1 && t->ev[i].cat != TRACE_MARKER)
			s->failed_step_ops++;
	s->calls++;
}

static void test_error_names_rank_op(struct test_ctx *T)
{
	struct job j;
	one_rank_job(&j);
	struct fixture f = {.capacity = TW_GIB};
	struct partial_seen seen = {0};
	/* op 6 is the all-reduce, in the last of two timed steps */
	struct exec_options opt = {.backend = "host", .steps = 2, .warmup = 1,
				   .fault = {EXEC_FAULT_ERROR, 0, 6},
				   .hooks = {&seen, begin_hook, partial_hook}};
	struct trace t;
	struct exec_result res;
	struct tw_err err = {0};
	enum tw_result rc = exec_run_plan(&j, &opt, small_plan, &f, &t, &res, &err);
	CHECK(T, rc != TW_OK);
	CHECK_STR_CONTAINS(T, err.msg, "rank 0: op 6 'ar_grads' (all_reduce over dp");
	CHECK_STR_CONTAINS(T, err.msg, "fault injected");
	CHECK_EQ_INT(T, seen.calls, 1);
	CHECK_EQ_INT(T, seen.run_id, 42);
	/* the first timed step (8 ops and its marker) and the ops of the failing step that ended
	 * before op 6: fc1, attn, gelu */
	CHECK_EQ_INT(T, seen.nev, 12);
	CHECK_EQ_INT(T, seen.failed_step_ops, 3);
	trace_release(&t);
	exec_result_release(&res);
}

/* Verification is live: data altered after the all-reduce is caught and named. */
static void test_verify_catches_corruption(struct test_ctx *T)
{
	struct job j;
	one_rank_job(&j);
	struct fixture f = {.capacity = TW_GIB};
	struct exec_options opt = {.backend = "host", .steps = 1, .fault = {EXEC_FAULT_CORRUPT, 0, 6}};
	struct trace t;
	struct exec_result res;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, exec_run_plan(&j, &opt, small_plan, &f, &t, &res, &err), TW_ERR_INTERNAL);
	CHECK_STR_CONTAINS(T, err.msg, "rank 0: op 6 'ar_grads'");
	CHECK_STR_CONTAINS(T, err.msg, "wrong result at element 0: got 1, expected 0");
	trace_release(&t);
	exec_result_release(&res);
}

static void test_unknown_backend(struct test_ctx *T)
{
	struct job j;
	one_rank_job(&j);
	struct fixture f = {.capacity = TW_GIB};
	struct exec_options opt = {.backend = "tpu", .steps = 1};
	struct trace t;
	struct exec_result res;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, exec_run_plan(&j, &opt, small_plan, &f, &t, &res, &err), TW_ERR_UNSUPPORTED);
	CHECK_STR_CONTAINS(T, err.msg, "backend 'tpu' is not in this build");
	trace_release(&t);
}

/* MPI's int counts, per collective: all-reduce, broadcast and reduce pass count; all-gather,
 * reduce-scatter and all-to-all index count x members; a p2p passes its bytes. */
static void test_mpi_counts(struct test_ctx *T)
{
	struct plan_op op;
	memset(&op, 0, sizeof(op));
	struct tw_err err = {0};
	const int64_t lim = 2147483647LL;
	op.kind = PLAN_COLL;
	int kinds[] = {PLAN_ALL_REDUCE, PLAN_BROADCAST, PLAN_REDUCE};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		op.u.coll.coll = (uint8_t)kinds[i];
		op.u.coll.count = lim;
		CHECK_EQ_INT(T, exec_mpi_counts_fit(&op, 64, &err), TW_OK);
		op.u.coll.count = lim + 1;
		tw_err_clear(&err);
		CHECK_EQ_INT(T, exec_mpi_counts_fit(&op, 64, &err), TW_ERR_LIMIT);
		CHECK_STR_CONTAINS(T, err.msg, "beyond MPI's int counts");
		tw_err_clear(&err);
	}
	int whole[] = {PLAN_ALL_GATHER, PLAN_REDUCE_SCATTER, PLAN_ALL_TO_ALL};
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
		op.u.coll.coll = (uint8_t)whole[i];
		op.u.coll.count = lim / 8;
		CHECK_EQ_INT(T, exec_mpi_counts_fit(&op, 8, &err), TW_OK);
		op.u.coll.count = lim / 8 + 1;
		CHECK_EQ_INT(T, exec_mpi_counts_fit(&op, 8, &err), TW_ERR_LIMIT);
		CHECK_STR_CONTAINS(T, err.msg, "x 8 ranks is beyond MPI's int counts");
		tw_err_clear(&err);
	}
	op.kind = PLAN_P2P;
	op.u.p2p.bytes = lim;
	CHECK_EQ_INT(T, exec_mpi_counts_fit(&op, 2, &err), TW_OK);
	op.u.p2p.bytes = lim + 1;
	CHECK_EQ_INT(T, exec_mpi_counts_fit(&op, 2, &err), TW_ERR_LIMIT);
}

/* A plan with an op MPI cannot take is refused when the backend opens, before the first step
 * allocates anything, naming the op. */
static enum tw_result big_p2p_plan(void *ctx, const struct job *j, int64_t rank, struct plan *p,
				   struct plan_mem *pred, struct tw_err *err)
{
	(void)ctx, (void)j, (void)rank, (void)err;
	memset(p, 0, sizeof(*p));
	memset(pred, 0, sizeof(*pred));
	mem_op(p, PLAN_ALLOC, 0, PLAN_MEM_PARAMS, PLAN_DEV_GPU, TW_MIB);
	struct plan_op *s = push(p, PLAN_P2P, PLAN_STREAM_P2P, "send_act");
	s->flags = PLAN_F_SEND;
	s->u.p2p.peer = 1;
	s->u.p2p.bytes = 2147483648LL;
	pred->peak[PLAN_DEV_GPU] = TW_MIB;
	return TW_OK;
}

static void test_mpi_limit_before_step(struct test_ctx *T)
{
	struct job j;
	one_rank_job(&j);
	struct exec_options opt = {.backend = "host", .steps = 1};
	struct trace t;
	struct exec_result res;
	struct tw_err err = {0};
	CHECK_EQ_INT(T, exec_run_plan(&j, &opt, big_p2p_plan, NULL, &t, &res, &err), TW_ERR_LIMIT);
	CHECK_STR_CONTAINS(T, err.msg, "rank 0: op 1 'send_act' (send to rank 1, 2147483648 bytes");
	CHECK_STR_CONTAINS(T, err.msg, "beyond MPI's int counts");
	CHECK_EQ_INT(T, res.peak[PLAN_DEV_GPU], 0); /* nothing allocated */
	CHECK_EQ_INT(T, t.nev, 0);
	trace_release(&t);
	exec_result_release(&res);
}

static void test_scratch_and_cats(struct test_ctx *T)
{
	struct plan p;
	struct job j;
	one_rank_job(&j);
	build_small(&p);
	struct exec_scratch s;
	exec_scratch_of(&p, &j, &s);
	CHECK_EQ_INT(T, s.gemm_a, 2 * 64 * 32);
	CHECK_EQ_INT(T, s.gemm_b, 2 * 32 * 96);
	CHECK_EQ_INT(T, s.gemm_c, 2 * 64 * 96);
	/* the same GEMM as a backward op: a data grad (64 x 96)(96 x 32) and a weight grad
	 * (32 x 64)(64 x 96), whose operands and outputs the scratch must hold */
	p.ops[2].phase = PLAN_PHASE_BWD;
	struct exec_scratch sb;
	exec_scratch_of(&p, &j, &sb);
	CHECK_EQ_INT(T, sb.gemm_a, 64 * 96);
	CHECK_EQ_INT(T, sb.gemm_b, 96 * 32 > 64 * 96 ? 96 * 32 : 64 * 96);
	CHECK_EQ_INT(T, sb.gemm_c, 32 * 96);
	p.ops[2].phase = PLAN_PHASE_FWD;
	CHECK_EQ_INT(T, s.attn_scores, 2 * 16 * 16);
	CHECK_EQ_INT(T, s.coll_in, 2000);
	CHECK_EQ_INT(T, s.copy_bytes, 8192);
	CHECK_EQ_INT(T, s.host_bytes, 16384);
	CHECK_EQ_INT(T, plan_op_trace_cat(&p.ops[2]), TRACE_GEMM);
	CHECK_EQ_INT(T, plan_op_trace_cat(&p.ops[3]), TRACE_ATTN);
	CHECK_EQ_INT(T, plan_op_trace_cat(&p.ops[4]), TRACE_COMPUTE_OTHER);
	CHECK_EQ_INT(T, plan_op_trace_cat(&p.ops[6]), TRACE_ALL_REDUCE);
	CHECK_EQ_INT(T, plan_op_trace_cat(&p.ops[8]), TRACE_D2H);
	CHECK_EQ_INT(T, plan_op_trace_cat(&p.ops[11]), TRACE_NVME);
	char d[192];
	exec_op_desc(&p.ops[6], d, sizeof(d));
	CHECK_STR_CONTAINS(T, d, "all_reduce over dp, 1000 x bf16, seq 0");
	CHECK(T, !strstr(d, "root"));
	/* a reduce names its root, and is filed with the rooted collectives */
	p.ops[6].u.coll.coll = PLAN_REDUCE;
	p.ops[6].u.coll.root = 3;
	exec_op_desc(&p.ops[6], d, sizeof(d));
	CHECK_STR_CONTAINS(T, d, "reduce over dp, 1000 x bf16, seq 0, root 3");
	CHECK_EQ_INT(T, plan_op_trace_cat(&p.ops[6]), TRACE_BROADCAST);
	/* ... with a flag that keeps NCCL's name for it (profile/export.c) */
	CHECK_EQ_INT(T, plan_trace_flags(PLAN_COLL, PLAN_REDUCE, 0), TRACE_F_REDUCE);
	CHECK_EQ_INT(T, plan_trace_flags(PLAN_COLL, PLAN_BROADCAST, PLAN_F_RECOMPUTE), TRACE_F_RECOMPUTE);
	CHECK_EQ_INT(T, plan_trace_flags(PLAN_COMPUTE, PLAN_REDUCE, 0), 0);
	plan_release(&p);
}

int main(void)
{
#ifdef TWIN_HAVE_MPI
	/* the walker leaves MPI alone when its caller started it, so several runs fit in one process */
	MPI_Init(NULL, NULL);
#endif
	struct test_ctx T = {0};
	TEST_RUN(&T, test_scratch_and_cats);
	TEST_RUN(&T, test_host_run);
	TEST_RUN(&T, test_does_not_fit);
	TEST_RUN(&T, test_error_names_rank_op);
	TEST_RUN(&T, test_verify_catches_corruption);
	TEST_RUN(&T, test_unknown_backend);
	TEST_RUN(&T, test_mpi_counts);
	TEST_RUN(&T, test_mpi_limit_before_step);
#ifdef TWIN_HAVE_MPI
	MPI_Finalize();
#endif
	return test_done(&T);
}
