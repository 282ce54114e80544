/* exec — the walker: one rank's plan, step after step, through a backend (exec/backend.h).
 *
 * Start-up: MPI (or a lone process), one communicator per job group (MPI_Comm_split by
 * job_group_color), plan_rank for this rank, the memory model's verdict (all ranks agree before
 * anything is allocated), the backend's scratch, a barrier that fixes t0. Then warm-up and timed
 * steps; ALLOC/FREE are counted here so the measured peak is what the backend really allocated.
 * Finally every rank's events go to rank 0 (MPI_Gatherv), which hands them to the caller.
 *
 * Failure: an error names the rank, the op and the call; the rank hands its partial trace to
 * hooks.partial and, with other ranks around, calls MPI_Abort so that none of them hangs. The
 * --timeout watchdog is a thread that watches the step clock and the op the rank waits on. */
#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef TWIN_HAVE_MPI
#include <mpi.h>
#endif

/* LeakSanitizer (make SAN=1) asks this at exit. Open MPI (with its dlopen'ed components) and
 * the CUDA libraries keep allocations from their initialisation to exit by design, and their
 * stacks cannot be unwound to suppress them by name; so leak checking is off in exactly the
 * processes that started MPI (twin run, test_exec), and on everywhere else. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
#ifdef TWIN_HAVE_MPI
	int inited = 0;
	MPI_Initialized(&inited);
	return inited;
#else
	return 0;
#endif
}

const char *exec_features(void)
{
#ifdef TWIN_HAVE_CUDA
	return "host,cuda";
#else
	return "host";
#endif
}

void exec_op_desc(const struct plan_op *op, char *buf, size_t len)
{
	switch (op->kind) {
	case PLAN_COMPUTE:
		snprintf(buf, len, "%s %s on %s", plan_kernel_name(op->u.compute.kernel),
			 tw_dtype_name(op->u.compute.dtype), plan_stream_name(op->stream));
		break;
	case PLAN_COLL: {
		int n = snprintf(buf, len, "%s over %s, %lld x %s, seq %lld",
				 plan_coll_name(op->u.coll.coll), job_group_name(op->u.coll.group),
				 (long long)op->u.coll.count, tw_dtype_name(op->u.coll.dtype),
				 (long long)op->u.coll.seq);
		if (op->u.coll.coll == PLAN_REDUCE && n > 0 && (size_t)n < len)
			snprintf(buf + n, len - (size_t)n, ", root %d", (int)op->u.coll.root);
		break;
	}
	case PLAN_P2P:
		snprintf(buf, len, "%s %s rank %lld, %lld bytes, seq %lld",
			 (op->flags & PLAN_F_SEND) ? "send" : "recv",
			 (op->flags & PLAN_F_SEND) ? "to" : "from", (long long)op->u.p2p.peer,
			 (long long)op->u.p2p.bytes, (long long)op->u.p2p.seq);
		break;
	case PLAN_COPY:
		snprintf(buf, len, "copy %s, %lld bytes", plan_copy_name(op->u.copy.dir),
			 (long long)op->u.copy.bytes);
		break;
	default:
		snprintf(buf, len, "%s %s %s, %lld bytes", plan_kind_name(op->kind),
			 plan_mem_cat_name(op->u.mem.cat), plan_device_name(op->u.mem.dev),
			 (long long)op->u.mem.bytes);
	}
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

void exec_scratch_of(const struct plan *p, const struct job *j, struct exec_scratch *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *op = &p->ops[i];
		if (op->kind == PLAN_COMPUTE) {
			int64_t bytes = op->u.compute.bytes > 0 ? (int64_t)op->u.compute.bytes : 0;
			int64_t bh = max64(op->u.compute.b, 1) * max64(op->u.compute.heads, 1);
			int64_t sq = op->u.compute.s_q, skv = op->u.compute.s_kv;
			int64_t hd = max64(op->u.compute.head_dim, op->u.compute.head_dim_v);
			bytes = bytes < EXEC_STREAM_CHUNK ? bytes : EXEC_STREAM_CHUNK;
			if (op->stream == PLAN_STREAM_HOST) {
				s->host_bytes = max64(s->host_bytes, bytes);
			} else if (op->u.compute.kernel == PLAN_K_GEMM) {
				/* each of its shapes (a backward op's data and weight grads) */
				struct plan_gemm_part part[2];
				int np = plan_gemm_parts(op, part);
				for (int q = 0; q < np; q++) {
					int64_t m = part[q].m, n = part[q].n, k = part[q].k;
					int64_t nb = max64(part[q].batch, 1);
					s->gemm_a = max64(s->gemm_a, nb * m * k);
					s->gemm_b = max64(s->gemm_b, nb * k * n);
					s->gemm_c = max64(s->gemm_c, nb * m * n);
				}
			} else if (op->u.compute.kernel == PLAN_K_ATTN) {
				s->attn_qkv = max64(s->attn_qkv, bh * max64(sq, skv) * hd);
				s->attn_scores = max64(s->attn_scores, bh * sq * skv);
			} else {
				s->elem_bytes = max64(s->elem_bytes, bytes);
			}
		} else if (op->kind == PLAN_COLL) {
			int64_t n = job_group_size(j, op->u.coll.group);
			int64_t b = op->u.coll.count * tw_dtype_bytes(op->u.coll.dtype);
			int64_t in = b, out = b;
			if (op->u.coll.coll == PLAN_ALL_GATHER)
				out = b * n;
			else if (op->u.coll.coll == PLAN_REDUCE_SCATTER)
				in = b * n;
			else if (op->u.coll.coll == PLAN_ALL_TO_ALL)
				in = out = b * n;
			s->coll_in = max64(s->coll_in, in);
			s->coll_out = max64(s->coll_out, out);
		} else if (op->kind == PLAN_P2P) {
			s->p2p_bytes = max64(s->p2p_bytes, op->u.p2p.bytes);
		} else if (op->kind == PLAN_COPY) {
			s->copy_bytes = max64(s->copy_bytes, op->u.copy.bytes);
		}
	}
}

void exec_result_release(struct exec_result *r)
{
	if (!r)
		return;
	free(r->rank_peak);
	free(r->rank_pred);
	r->rank_peak = r->rank_pred = NULL;
}

/* ---- the watchdog ------------------------------------------------------------------------- */

struct watch {
	pthread_t thread;
	bool running;
	pthread_mutex_t mu;          /* guards the trace while the main thread appends */
	_Atomic int64_t waiting_op;  /* op id, -1: none */
	_Atomic int64_t step_start;  /* ns of the current step's start, 0: not in a step */
	_Atomic int in_ops;          /* past the start-of-step barrier */
	_Atomic int step;
	_Atomic int stop;
	double timeout_s;
	const struct plan *plan;
	struct trace *trace;
	const struct exec_hooks *hooks;
	int64_t run_id, rank;
};

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	int64_t limit = (int64_t)(w->timeout_s * 1e9);
	while (!atomic_load(&w->stop)) {
		sleep_ms(20);
		int64_t start = atomic_load(&w->step_start);
		if (!start || tw_now_ns() - start <= limit)
			continue;
		int64_t id = atomic_load(&w->waiting_op);
		char what[256] = "the other ranks at the start-of-step barrier";
		if (atomic_load(&w->in_ops))
			snprintf(what, sizeof(what), "the end of the step");
		if (id >= 0 && (size_t)id < w->plan->nops) {
			const struct plan_op *op = &w->plan->ops[id];
			char desc[192];
			exec_op_desc(op, desc, sizeof(desc));
			snprintf(what, sizeof(what), "op %lld '%s' (%s)", (long long)id,
				 op->name ? op->name : "?", desc);
		}
		fprintf(stderr, "twin: rank %lld: timeout: step %d stalled for more than %g s, waiting on %s\n",
			(long long)w->rank, atomic_load(&w->step), w->timeout_s, what);
		fflush(stderr);
		if (w->hooks->partial && w->run_id >= 0) {
			pthread_mutex_lock(&w->mu);
			w->hooks->partial(w->hooks->ctx, w->run_id, w->trace);
			pthread_mutex_unlock(&w->mu);
		}
		/* give the other ranks' watchdogs a moment to say what they waited on and store
		 * their partial traces (a loaded machine may not run them for a while), then leave:
		 * mpirun takes the job down when a rank exits non-zero */
		sleep_ms(1000);
		_exit(1);
	}
	return NULL;
}

/* ---- the run ------------------------------------------------------------------------------- */

struct run {
	const struct job *job;
	const struct exec_options *opt;
	const struct exec_backend *be;
	void *self;
	struct exec_env env;
	struct plan plan;
	struct trace tr;             /* this rank's events */
	struct exec_span *span;
	bool *traced;                /* op's event of this step is in tr */
	void **bufs;                 /* live buffer pointers by buffer id */
	int64_t *buf_bytes;          /* bytes of live buffers, -1: not live */
	int64_t live[PLAN_NUM_DEVICES][PLAN_NUM_MEM_CATS], live_dev[PLAN_NUM_DEVICES];
	struct exec_result *res;
	struct watch w;
	int64_t verified;
	bool mpi_inited_here;
#ifdef TWIN_HAVE_MPI
	MPI_Comm groups[JOB_NUM_GROUPS];
	MPI_Comm world;
#endif
};

/* The backend called name: host is built in; cuda is loaded from libtwin_cuda.so. Called
 * after MPI started, so that all ranks agree on a failure and one reports it. */
static enum tw_result backend_named(const char *name, const struct exec_backend **be,
				    struct tw_err *err)
{
	*be = NULL;
	if (!name || !strcmp(name, "host")) {
		*be = &exec_backend_host;
		return TW_OK;
	}
#ifdef TWIN_HAVE_CUDA
	if (!strcmp(name, "cuda")) {
		const struct exec_cuda_module *m;
		TW_CHECK(exec_cuda_load("", "--backend host runs the same plan on CPU ranks", &m, err));
		*be = m->backend;
		return TW_OK;
	}
#endif
	return tw_errf(err, TW_ERR_UNSUPPORTED,
		       "backend '%s' is not in this build (it has: %s; cuda needs the CUDA toolkit with NCCL and cuBLAS at build time); --backend host runs the same plan on CPU ranks",
		       name, exec_features());
}

static void set_msg(struct tw_err *err, const char *msg)
{
	size_t n = strlen(msg);
	if (n >= sizeof(err->msg))
		n = sizeof(err->msg) - 1;
	memcpy(err->msg, msg, n);
	err->msg[n] = '\0';
}

/* Prefix a backend's error with the rank and the op. */
static enum tw_result op_failed(struct run *r, const struct plan_op *op, struct tw_err *err)
{
	char desc[192], msg[2 * sizeof(err->msg)];
	exec_op_desc(op, desc, sizeof(desc));
	snprintf(msg, sizeof(msg), "rank %lld: op %u '%s' (%s): %s", (long long)r->env.rank, op->id,
		 op->name ? op->name : "?", desc, err->msg);
	set_msg(err, msg);
	return err->code;
}

static void account(struct run *r, const struct plan_op *op, int64_t delta, int64_t t_ns)
{
	int dev = op->u.mem.dev, cat = op->u.mem.cat;
	struct exec_result *res = r->res;
	r->live[dev][cat] += delta;
	r->live_dev[dev] += delta;
	if (r->live[dev][cat] > res->max_cat[dev][cat])
		res->max_cat[dev][cat] = r->live[dev][cat];
	if (r->live_dev[dev] > res->peak[dev]) {
		res->peak[dev] = r->live_dev[dev];
		memcpy(res->at_peak[dev], r->live[dev], sizeof(r->live[dev]));
		if (dev == PLAN_DEV_GPU && r->be->device_used)
			res->device_used_bytes = max64(res->device_used_bytes, r->be->device_used(r->self));
	}
	struct trace_mem_sample s = {.rank = (int32_t)r->env.rank, .device = dev, .cat = cat,
				     .t_ns = t_ns, .bytes = r->live[dev][cat]};
	pthread_mutex_lock(&r->w.mu);
	trace_add_mem(&r->tr, &s);
	s.cat = -1;
	s.bytes = r->live_dev[dev];
	trace_add_mem(&r->tr, &s);
	pthread_mutex_unlock(&r->w.mu);
}

static enum tw_result fault(struct run *r, const struct plan_op *op, struct tw_err *err)
{
	const struct exec_fault *f = &r->opt->fault;
	switch (f->kind) {
	case EXEC_FAULT_EXIT:
		fprintf(stderr, "twin: rank %lld: fault injected: exiting at op %u\n",
			(long long)r->env.rank, op->id);
		fflush(stderr);
		_exit(1);
	case EXEC_FAULT_STALL:
		for (;;)
			sleep_ms(1000);
	case EXEC_FAULT_ERROR:
		return tw_errf(err, TW_ERR_INTERNAL, "fault injected: simulated backend failure");
	case EXEC_FAULT_CORRUPT:
		r->env.corrupt_op = op->id;
		return TW_OK;
	default:
		return TW_OK;
	}
}

/* Op i's event of timed step tstep, into this rank's trace (the caller holds w.mu). */
static void trace_op(struct run *r, size_t i, int tstep)
{
	const struct plan_op *op = &r->plan.ops[i];
	bool gpu = strcmp(r->be->name, "cuda") == 0;
	struct trace_event e = {
		.rank = (int32_t)r->env.rank, .device = gpu && op->stream != PLAN_STREAM_HOST ? 0 : -1,
		.stream = op->stream, .cat = plan_op_trace_cat(op), .step = tstep, .op_id = (int32_t)op->id,
		.layer = op->layer, .micro = op->micro, .stage = op->stage, .phase = op->phase,
		.start_ns = r->span[i].start_ns, .end_ns = r->span[i].end_ns,
		.flags = plan_trace_flags((enum plan_kind)op->kind,
					  op->kind == PLAN_COLL ? (int)op->u.coll.coll : -1, op->flags)};
	if (op->kind == PLAN_COMPUTE) {
		e.flops = op->u.compute.flops;
		e.bytes = (int64_t)op->u.compute.bytes;
	} else if (op->kind == PLAN_COLL) {
		e.bytes = op->u.coll.bytes;
		e.group_size = (int32_t)job_group_size(r->job, op->u.coll.group);
		/* the communicator (trace.h), as the simulator records it */
		e.comm = 1 + ((int64_t)op->u.coll.group << 32) +
			 job_group_color(r->job, op->u.coll.group, r->env.rank);
	} else if (op->kind == PLAN_P2P) {
		e.bytes = op->u.p2p.bytes;
		e.group_size = 2;
	} else if (op->kind == PLAN_COPY) {
		e.bytes = op->u.copy.bytes;
	}
	e.name = trace_intern(&r->tr, op->name ? op->name : plan_kind_name(op->kind));
	trace_add(&r->tr, &e);
	r->traced[i] = true;
}

/* Trace op i if its span is complete and it is not traced yet: the ops of a timed step are
 * traced as they end (and the receives posted ahead they waited for, as those end), so that a
 * step that fails or stalls leaves its completed ops in the partial trace. Spans a backend
 * fills only at the end of the step (cuda's GPU ops) are traced then. */
static void trace_if_done(struct run *r, size_t i, int tstep)
{
	const struct plan_op *op = &r->plan.ops[i];
	if (r->traced[i] || op->kind == PLAN_ALLOC || op->kind == PLAN_FREE ||
	    r->span[i].start_ns < 0 || r->span[i].end_ns < r->span[i].start_ns)
		return;
	pthread_mutex_lock(&r->w.mu);
	trace_op(r, i, tstep);
	pthread_mutex_unlock(&r->w.mu);
}

static enum tw_result one_step(struct run *r, int step, bool timed, struct tw_err *err)
{
	const struct plan *p = &r->plan;
	for (size_t i = 0; i < p->nops; i++) {
		r->span[i].start_ns = r->span[i].end_ns = -1;
		r->traced[i] = false;
	}
	int tstep = step - r->opt->warmup;
	/* the watchdog covers the barrier too: a rank that never arrives stalls it */
	atomic_store(&r->w.step, step);
	atomic_store(&r->w.waiting_op, (int64_t)-1);
	atomic_store(&r->w.in_ops, 0);
	atomic_store(&r->w.step_start, tw_now_ns());
#ifdef TWIN_HAVE_MPI
	if (r->env.nranks > 1)
		MPI_Barrier(r->world);
#endif
	int64_t t_start = tw_now_ns();
	atomic_store(&r->w.in_ops, 1);
	TW_CHECK(r->be->step_begin(r->self, step, err));
	bool fault_step = step == r->opt->warmup + r->opt->steps - 1;
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *op = &p->ops[i];
		atomic_store(&r->w.waiting_op, (int64_t)op->id);
		if (fault_step && r->opt->fault.kind != EXEC_FAULT_NONE &&
		    r->opt->fault.rank == r->env.rank && r->opt->fault.op == (int64_t)op->id &&
		    fault(r, op, err) != TW_OK)
			return op_failed(r, op, err);
		enum tw_result rc = TW_OK;
		if (op->kind == PLAN_ALLOC) {
			int32_t b = op->u.mem.buf;
			if (b < 0 || b >= p->nbufs)
				return op_failed(r, op, (tw_errf(err, TW_ERR_INTERNAL, "buffer id %d out of range", b), err));
			if (r->buf_bytes[b] >= 0)
				continue; /* persistent buffer kept from the previous step */
			rc = r->be->alloc(r->self, op, &r->bufs[b], err);
			if (rc == TW_OK) {
				r->buf_bytes[b] = op->u.mem.bytes;
				account(r, op, op->u.mem.bytes, tw_now_ns() - r->env.t0_ns);
			}
		} else if (op->kind == PLAN_FREE) {
			int32_t b = op->u.mem.buf;
			if (b < 0 || b >= p->nbufs || r->buf_bytes[b] < 0)
				return op_failed(r, op, (tw_errf(err, TW_ERR_INTERNAL, "FREE of buffer %d that is not allocated", b), err));
			rc = r->be->release(r->self, op, r->bufs[b], err);
			if (rc == TW_OK) {
				account(r, op, -r->buf_bytes[b], tw_now_ns() - r->env.t0_ns);
				r->buf_bytes[b] = -1;
				r->bufs[b] = NULL;
			}
		} else {
			rc = r->be->issue(r->self, op, r->span, err);
			if (timed && rc == TW_OK) {
				const uint32_t *d = plan_op_deps(p, op);
				for (uint32_t k = 0; k < op->ndeps; k++)
					if (d[k] < p->nops)
						trace_if_done(r, d[k], tstep);
				trace_if_done(r, i, tstep);
			}
		}
		if (rc != TW_OK)
			return op_failed(r, op, err);
	}
	atomic_store(&r->w.waiting_op, (int64_t)-1);
	enum tw_result rc = r->be->step_end(r->self, r->span, err);
	if (rc != TW_OK) {
		int64_t id = atomic_load(&r->w.waiting_op);
		if (id >= 0 && (size_t)id < p->nops)
			return op_failed(r, &p->ops[id], err);
		char msg[2 * sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "rank %lld: end of step %d: %s", (long long)r->env.rank, step, err->msg);
		set_msg(err, msg);
		return rc;
	}
	int64_t t_end = tw_now_ns();
	atomic_store(&r->w.step_start, (int64_t)0);
	if (!timed)
		return TW_OK;
	r->res->step_ns_mean += (t_end - t_start) / (r->opt->steps > 0 ? r->opt->steps : 1);
	pthread_mutex_lock(&r->w.mu);
	char sname[32];
	snprintf(sname, sizeof(sname), "step %d", tstep);
	struct trace_event m = {.rank = (int32_t)r->env.rank, .device = -1, .stream = PLAN_STREAM_COMPUTE,
				.cat = TRACE_MARKER, .step = tstep, .op_id = -1, .layer = -1, .micro = -1,
				.stage = -1, .phase = -1, .start_ns = t_start - r->env.t0_ns,
				.end_ns = t_end - r->env.t0_ns};
	m.name = trace_intern(&r->tr, sname);
	trace_add(&r->tr, &m);
	/* the ops whose spans the end of the step filled */
	for (size_t i = 0; i < p->nops; i++) {
		const struct plan_op *op = &p->ops[i];
		if (r->traced[i] || op->kind == PLAN_ALLOC || op->kind == PLAN_FREE || r->span[i].start_ns < 0)
			continue;
		trace_op(r, i, tstep);
	}
	pthread_mutex_unlock(&r->w.mu);
	return TW_OK;
}

/* ---- MPI plumbing -------------------------------------------------------------------------- */

static enum tw_result mpi_start(struct run *r, struct tw_err *err)
{
	r->env.rank = 0;
	r->env.nranks = 1;
#ifdef TWIN_HAVE_MPI
	int inited = 0, provided = 0;
	MPI_Initialized(&inited);
	if (!inited) {
		if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
			return tw_errf(err, TW_ERR_MPI, "MPI_Init_thread failed");
		r->mpi_inited_here = true;
	}
	r->world = MPI_COMM_WORLD;
	/* errors come back as codes, so that we can name the op and abort every rank */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int rank = 0, size = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	r->env.rank = rank;
	r->env.nranks = size;
	r->env.mpi_world = &r->world;
#endif
	return TW_OK;
}

static void mpi_stop(struct run *r)
{
#ifdef TWIN_HAVE_MPI
	for (int g = 0; g < JOB_NUM_GROUPS; g++)
		if (r->env.mpi_group[g])
			MPI_Comm_free(&r->groups[g]);
	if (r->mpi_inited_here) {
		int fin = 0;
		MPI_Finalized(&fin);
		if (!fin)
			MPI_Finalize();
	}
#else
	(void)r;
#endif
}

/* MPI_Comm_split is collective over the world: a rank that stopped at its first failure would
 * leave the others waiting in the next split, so every rank runs every split and keeps its
 * first error for agree() to report. */
static enum tw_result make_groups(struct run *r, struct tw_err *err)
{
	enum tw_result rc = TW_OK;
	for (int g = 0; g < JOB_NUM_GROUPS; g++) {
		int64_t idx = 0;
		r->env.group_size[g] = job_group_size(r->job, (enum job_group)g);
		/* this rank's group: a middle pipeline stage is alone in its embedding group */
		int64_t mine = job_group_members(r->job, (enum job_group)g, r->env.rank, NULL, &idx);
		r->env.group_index[g] = idx;
		r->env.mpi_group[g] = NULL;
#ifdef TWIN_HAVE_MPI
		if (r->env.group_size[g] <= 1 || r->env.nranks <= 1)
			continue;
		int64_t color = job_group_color(r->job, (enum job_group)g, r->env.rank);
		if (MPI_Comm_split(r->world, (int)(color % 2147483647), (int)r->env.rank,
				   &r->groups[g]) != MPI_SUCCESS) {
			if (rc == TW_OK)
				rc = tw_errf(err, TW_ERR_MPI, "rank %lld: MPI_Comm_split for group %s failed",
					     (long long)r->env.rank, job_group_name((enum job_group)g));
			continue;
		}
		r->env.mpi_group[g] = &r->groups[g];
		int sz = 0;
		MPI_Comm_size(r->groups[g], &sz);
		if (sz != mine && rc == TW_OK)
			rc = tw_errf(err, TW_ERR_INTERNAL,
				     "rank %lld: group %s has %d members, the job says %lld",
				     (long long)r->env.rank, job_group_name((enum job_group)g), sz,
				     (long long)mine);
#else
		(void)err;
		(void)mine;
#endif
	}
	return rc;
}

/* The lowest rank with a problem reports it; all ranks return the same code. */
static enum tw_result agree(struct run *r, enum tw_result rc, struct tw_err *err)
{
	int64_t bad = rc == TW_OK ? r->env.nranks : r->env.rank;
	int code = (int)rc;
#ifdef TWIN_HAVE_MPI
	if (r->env.nranks > 1) {
		long long b = bad;
		int c = code;
		MPI_Allreduce(&b, &bad, 1, MPI_LONG_LONG, MPI_MIN, r->world);
		MPI_Allreduce(&c, &code, 1, MPI_INT, MPI_MAX, r->world);
	}
#endif
	if (bad >= r->env.nranks)
		return TW_OK;
	bool me = bad == r->env.rank;
	if (rc == TW_OK)
		rc = tw_errf(err, (enum tw_result)code, "rank %lld failed", (long long)bad);
#ifdef TWIN_HAVE_MPI
	if (r->env.nranks > 1) {
		/* the reporting rank writes its line before any rank leaves: mpirun takes the job
		 * down at the first non-zero exit and can drop output still on its way */
		if (me) {
			fprintf(stderr, "twin: %s\n", err->msg[0] ? err->msg : tw_strresult(err->code));
			fflush(stderr);
		}
		MPI_Barrier(r->world);
		me = false;
	}
#endif
	r->res->report = me;
	return rc;
}

#ifdef TWIN_HAVE_MPI
/* Rank 0 collects every rank's events, memory samples and names. */
static enum tw_result gather(struct run *r, struct trace *out, struct tw_err *err)
{
	int n = (int)r->env.nranks, me = (int)r->env.rank;
	long long mine[3] = {(long long)r->tr.nev, (long long)r->tr.nmem, (long long)r->tr.strings_len};
	long long *counts = me == 0 ? TW_NEW_ARRAY(long long, 3 * (size_t)n) : NULL;
	MPI_Gather(mine, 3, MPI_LONG_LONG, counts, 3, MPI_LONG_LONG, 0, r->world);
	int *cnt = NULL, *disp = NULL;
	char *buf = NULL;
	if (me == 0) {
		cnt = TW_NEW_ARRAY(int, (size_t)n);
		disp = TW_NEW_ARRAY(int, (size_t)n);
	}
	/* three rounds: events, memory samples, strings */
	size_t elt[3] = {sizeof(struct trace_event), sizeof(struct trace_mem_sample), 1};
	const void *src[3] = {r->tr.ev, r->tr.mem, r->tr.strings};
	char *parts[3] = {NULL, NULL, NULL};
	int64_t *pdisp[3] = {NULL, NULL, NULL};
	for (int k = 0; k < 3; k++) {
		int64_t total = 0;
		if (me == 0) {
			pdisp[k] = TW_NEW_ARRAY(int64_t, (size_t)n);
			for (int i = 0; i < n; i++) {
				int64_t b = counts[3 * i + k] * (int64_t)elt[k];
				if (total + b > 2147483647LL) {
					free(counts), free(cnt), free(disp);
					for (int q = 0; q <= k; q++)
						free(parts[q]), free(pdisp[q]);
					return tw_errf(err, TW_ERR_LIMIT, "trace too large to gather (over 2 GiB); use fewer --steps");
				}
				cnt[i] = (int)b;
				disp[i] = (int)total;
				pdisp[k][i] = total;
				total += b;
			}
			buf = tw_malloc((size_t)total + 1);
		}
		long long mineb = mine[k] * (long long)elt[k];
		MPI_Gatherv(src[k] ? src[k] : "", (int)mineb, MPI_BYTE, buf, cnt, disp, MPI_BYTE, 0, r->world);
		parts[k] = buf;
		buf = NULL;
	}
	if (me == 0) {
		trace_init(out, TRACE_KIND_EXEC, n);
		for (int i = 0; i < n; i++) {
			const struct trace_event *ev = (const void *)(parts[0] + pdisp[0][i]);
			const char *strs = parts[2] + pdisp[2][i];
			for (long long e = 0; e < counts[3 * i]; e++) {
				struct trace_event x = ev[e];
				x.name = trace_intern(out, strs + ev[e].name);
				trace_add(out, &x);
			}
			const struct trace_mem_sample *ms = (const void *)(parts[1] + pdisp[1][i]);
			for (long long e = 0; e < counts[3 * i + 1]; e++)
				trace_add_mem(out, &ms[e]);
		}
	}
	for (int k = 0; k < 3; k++)
		free(parts[k]), free(pdisp[k]);
	free(counts), free(cnt), free(disp);
	return TW_OK;
}
#endif

static void fail_partial(struct run *r)
{
	if (r->opt->hooks.partial && r->res->run_id >= 0) {
		pthread_mutex_lock(&r->w.mu);
		r->opt->hooks.partial(r->opt->hooks.ctx, r->res->run_id, &r->tr);
		pthread_mutex_unlock(&r->w.mu);
	}
}

static void run_release(struct run *r)
{
	if (r->w.running) {
		atomic_store(&r->w.stop, 1);
		pthread_join(r->w.thread, NULL);
		r->w.running = false;
	}
	if (r->self) {
		for (int32_t b = 0; b < r->plan.nbufs; b++)
			if (r->buf_bytes && r->buf_bytes[b] >= 0) {
				struct plan_op op = {.kind = PLAN_FREE};
				/* find the ALLOC for its device */
				for (size_t i = 0; i < r->plan.nops; i++)
					if (r->plan.ops[i].kind == PLAN_ALLOC && r->plan.ops[i].u.mem.buf == b) {
						op = r->plan.ops[i];
						op.kind = PLAN_FREE;
						break;
					}
				struct tw_err e = {0};
				r->be->release(r->self, &op, r->bufs[b], &e);
			}
		r->be->close(r->self);
		r->self = NULL;
	}
	free(r->bufs);
	free(r->buf_bytes);
	free(r->span);
	free(r->traced);
	trace_release(&r->tr);
	plan_release(&r->plan);
	pthread_mutex_destroy(&r->w.mu);
}

enum tw_result exec_run_plan(const struct job *j, const struct exec_options *opt,
			     exec_plan_fn make_plan, void *ctx, struct trace *out,
			     struct exec_result *res, struct tw_err *err)
{
	memset(res, 0, sizeof(*res));
	res->run_id = -1;
	res->report = true;
	trace_init(out, TRACE_KIND_EXEC, 1);
	struct run *r = TW_NEW(struct run);
	r->job = j;
	r->opt = opt;
	r->res = res;
	pthread_mutex_init(&r->w.mu, NULL);
	atomic_store(&r->w.waiting_op, (int64_t)-1);
	r->env.job = j;
	r->env.plan = &r->plan;
	r->env.waiting_op = &r->w.waiting_op;
	r->env.verified = &r->verified;
	r->env.corrupt_op = -1;
	enum tw_result rc = TW_OK;

	r->env.verify = opt->verify || !opt->backend || !strcmp(opt->backend, "host");
	rc = mpi_start(r, err);
	if (rc != TW_OK) {
		free(r);
		return rc;
	}
	res->rank = r->env.rank;
	res->nranks = r->env.nranks;
	trace_init(&r->tr, TRACE_KIND_EXEC, r->env.nranks);

	/* the launch must match the job, and the hardware must be there */
	int64_t want = j->gpus > 0 ? j->gpus : j->strat.gpus;
	if (want != r->env.nranks) {
#ifdef TWIN_HAVE_MPI
		rc = tw_errf(err, TW_ERR_USAGE,
			     "the job has %lld ranks (--gpus) but %lld processes were launched; run it as mpirun -np %lld twin run ...",
			     (long long)want, (long long)r->env.nranks, (long long)want);
#else
		rc = tw_errf(err, TW_ERR_UNSUPPORTED,
			     "the job has %lld ranks but this build has no MPI (apt-get install libopenmpi-dev openmpi-bin, then rebuild)",
			     (long long)want);
#endif
	}
	if (rc == TW_OK)
		rc = backend_named(opt->backend, &r->be, err);
	if (rc == TW_OK)
		rc = r->be->probe(&r->env, err);
	TW_CHECK_GOTO(agree(r, rc, err), rc, out_early);

	/* the plan, and the memory model's verdict before anything is allocated */
	rc = make_plan(ctx, j, r->env.rank, &r->plan, &res->pred, err);
	TW_CHECK_GOTO(agree(r, rc, err), rc, out_early);

	r->span = TW_NEW_ARRAY(struct exec_span, r->plan.nops ? r->plan.nops : 1);
	r->traced = TW_NEW_ARRAY(bool, r->plan.nops ? r->plan.nops : 1);
	r->bufs = TW_NEW_ARRAY(void *, r->plan.nbufs > 0 ? (size_t)r->plan.nbufs : 1);
	r->buf_bytes = TW_NEW_ARRAY(int64_t, r->plan.nbufs > 0 ? (size_t)r->plan.nbufs : 1);
	for (int32_t b = 0; b < r->plan.nbufs; b++)
		r->buf_bytes[b] = -1;
	exec_scratch_of(&r->plan, j, &r->env.scratch);
	if (opt->log_level >= TW_LOG_DEBUG) {
		const struct exec_scratch *x = &r->env.scratch;
		tw_log(TW_LOG_DEBUG,
		       "rank %lld: %zu ops, %d buffers; scratch: gemm %lld/%lld/%lld el, attn %lld/%lld el, elementwise %lld B, host %lld B, coll %lld/%lld B, p2p %lld B, copy %lld B",
		       (long long)r->env.rank, r->plan.nops, r->plan.nbufs, (long long)x->gemm_a,
		       (long long)x->gemm_b, (long long)x->gemm_c, (long long)x->attn_qkv,
		       (long long)x->attn_scores, (long long)x->elem_bytes, (long long)x->host_bytes,
		       (long long)x->coll_in, (long long)x->coll_out, (long long)x->p2p_bytes,
		       (long long)x->copy_bytes);
	}
	rc = make_groups(r, err);
	if (rc == TW_OK)
		rc = r->be->open(&r->env, &r->self, err);
	TW_CHECK_GOTO(agree(r, rc, err), rc, out_early);
	res->scratch_bytes = r->be->scratch_bytes ? r->be->scratch_bytes(r->self) : 0;

	/* the run id (rank 0 creates it; every rank needs it to store a partial trace) */
	if (r->env.rank == 0 && opt->hooks.begin) {
		res->run_id = opt->hooks.begin(opt->hooks.ctx, r->env.nranks, err);
		if (res->run_id < 0)
			rc = err->code != TW_OK ? err->code : TW_ERR_SYSTEM;
	}
	TW_CHECK_GOTO(agree(r, rc, err), rc, out_early);
	r->env.t0_ns = tw_now_ns();
#ifdef TWIN_HAVE_MPI
	if (r->env.nranks > 1) {
		long long id = res->run_id;
		MPI_Bcast(&id, 1, MPI_LONG_LONG, 0, r->world);
		res->run_id = id;
		/* t0: on one host every rank reads the same monotonic clock, so rank 0's t0 puts
		 * all ranks on one time axis; across hosts each rank's own, just after a barrier */
		MPI_Comm node;
		int node_size = 0;
		MPI_Comm_split_type(r->world, MPI_COMM_TYPE_SHARED, (int)r->env.rank, MPI_INFO_NULL, &node);
		MPI_Comm_size(node, &node_size);
		MPI_Comm_free(&node);
		MPI_Barrier(r->world);
		long long t0 = tw_now_ns();
		if (node_size == r->env.nranks)
			MPI_Bcast(&t0, 1, MPI_LONG_LONG, 0, r->world);
		r->env.t0_ns = t0;
	}
#endif

	if (opt->timeout_s > 0) {
		r->w.timeout_s = opt->timeout_s;
		r->w.plan = &r->plan;
		r->w.trace = &r->tr;
		r->w.hooks = &opt->hooks;
		r->w.run_id = res->run_id;
		r->w.rank = r->env.rank;
		if (pthread_create(&r->w.thread, NULL, watch_main, &r->w) == 0)
			r->w.running = true;
	}
	int total = opt->warmup + opt->steps;
	for (int s = 0; s < total && rc == TW_OK; s++)
		rc = one_step(r, s, s >= opt->warmup, err);
	if (rc != TW_OK) {
		/* this rank's events so far go to the store; the other ranks are taken down */
		fail_partial(r);
#ifdef TWIN_HAVE_MPI
		if (r->env.nranks > 1) {
			fprintf(stderr, "twin: %s\n", err->msg);
			fflush(stderr);
			MPI_Abort(r->world, tw_exit_status(rc) ? tw_exit_status(rc) : 1);
		}
#endif
		goto out_early;
	}
	if (r->w.running) {
		atomic_store(&r->w.stop, 1);
		pthread_join(r->w.thread, NULL);
		r->w.running = false;
	}
	res->colls_verified = r->verified;

	/* every rank's peaks to rank 0, and the events */
	res->mem_match = true;
	for (int d = 0; d < PLAN_NUM_DEVICES; d++) {
		if (res->peak[d] != res->pred.peak[d])
			res->mem_match = false;
		for (int c = 0; c < PLAN_NUM_MEM_CATS; c++)
			if (res->max_cat[d][c] != res->pred.max_cat[d][c] ||
			    res->at_peak[d][c] != res->pred.at_peak[d][c])
				res->mem_match = false;
	}
	if (r->env.rank == 0) {
		res->rank_peak = TW_NEW_ARRAY(int64_t, (size_t)r->env.nranks);
		res->rank_pred = TW_NEW_ARRAY(int64_t, (size_t)r->env.nranks);
	}
#ifdef TWIN_HAVE_MPI
	if (r->env.nranks > 1) {
		long long mine[2] = {res->peak[PLAN_DEV_GPU], res->pred.peak[PLAN_DEV_GPU]};
		long long *all = r->env.rank == 0 ? TW_NEW_ARRAY(long long, 2 * (size_t)r->env.nranks) : NULL;
		MPI_Gather(mine, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, 0, r->world);
		int match = res->mem_match, all_match = 0;
		MPI_Reduce(&match, &all_match, 1, MPI_INT, MPI_LAND, 0, r->world);
		if (r->env.rank == 0) {
			for (int64_t i = 0; i < r->env.nranks; i++) {
				res->rank_peak[i] = all[2 * i];
				res->rank_pred[i] = all[2 * i + 1];
			}
			res->mem_match = all_match;
		}
		free(all);
		long long v = res->colls_verified, vs = 0;
		MPI_Reduce(&v, &vs, 1, MPI_LONG_LONG, MPI_SUM, 0, r->world);
		if (r->env.rank == 0)
			res->colls_verified = vs;
		trace_release(out);
		rc = gather(r, out, err);
		if (r->env.rank != 0)
			trace_move(out, &r->tr);
	} else
#endif
	{
		res->rank_peak[0] = res->peak[PLAN_DEV_GPU];
		res->rank_pred[0] = res->pred.peak[PLAN_DEV_GPU];
		trace_release(out);
		trace_move(out, &r->tr);
	}
	out->kind = TRACE_KIND_EXEC;
	out->nranks = r->env.nranks;
	if (r->env.rank == 0) {
		out->peak_mem = TW_NEW_ARRAY(int64_t, (size_t)r->env.nranks);
		memcpy(out->peak_mem, res->rank_peak, sizeof(int64_t) * (size_t)r->env.nranks);
	}
	trace_sort(out);
	res->report = r->env.rank == 0;
out_early:
	run_release(r);
	mpi_stop(r);
	free(r);
	return rc;
}
