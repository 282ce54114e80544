/* host — the executor's CPU backend: every rank is a process, collectives are MPI over the
 * job's group communicators, GEMMs are OpenBLAS sgemm (fp32) of the plan's shapes, attention is
 * two GEMMs around a row softmax, memory-bound kernels stream the plan's bytes, copies are
 * memcpy (NVMe: pwrite/pread of an unlinked temporary file), ALLOC is malloc of the plan's bytes
 * (touched, so the pages are real). Ops run one after another in plan order; each is timed
 * with CLOCK_MONOTONIC. Collective and p2p data are the known pattern of backend.h, reduced as
 * unsigned integers of the dtype's width (the same bytes on the wire, exact sums), and checked
 * after every call. A receive the plan posts ahead (no PLAN_F_BLOCKING: Megatron's
 * overlap_p2p_comm irecvs, ring attention's KV blocks) is an MPI_Irecv when reached, waited for
 * by the first op that depends on it, as the simulator and Megatron do: run in plan order as a
 * blocking MPI_Recv it would wait for data its peer sends only after a later op of this rank. */
#include "backend.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TWIN_HAVE_MPI
#include <mpi.h>
#endif
#ifdef TWIN_HAVE_BLAS
#include <cblas.h>
#endif

struct pending_send {
#ifdef TWIN_HAVE_MPI
	MPI_Request req;
#endif
	void *buf;
	uint32_t op;
};

/* A receive posted ahead: in flight until an op that depends on it (or the end of the step)
 * waits for it; its data are checked then. */
struct pending_recv {
#ifdef TWIN_HAVE_MPI
	MPI_Request req;
#endif
	unsigned char *buf;          /* its own buffer: several may be in flight at once */
	uint32_t op;
	bool done;                   /* MPI_Test saw it complete (at done_ns) */
	int64_t done_ns;             /* CLOCK_MONOTONIC ns */
};

struct host {
	const struct exec_env *env;
	float *ga, *gb, *gc;             /* GEMM operands */
	float *q, *k, *v, *s;            /* attention: q, k, v (and o in q's place), scores */
	float *ein, *eout;               /* memory-bound kernels */
	float *hin, *hout;               /* host-stream ops (CPU optimizer) */
	unsigned char *cin, *cout;       /* collectives */
	unsigned char *copy_a, *copy_b;  /* copies */
	unsigned char *recv;             /* p2p receive */
	int64_t scratch;
	int nvme_fd;
	struct pending_send *sends;
	size_t nsends, sends_cap;
	struct pending_recv *recvs;
	size_t nrecvs, recvs_cap;
};

/* An operand buffer, touched; NULL for none. Running out of host memory is an error of the run
 * (one line naming the buffer), not an abort: *ok turns false and later calls do nothing. */
static void *scratch(struct host *h, int64_t bytes, const char *what, bool *ok, struct tw_err *err)
{
	if (bytes <= 0 || !*ok)
		return NULL;
	void *p = malloc((size_t)bytes);
	if (!p) {
		*ok = false;
		tw_errf(err, TW_ERR_SYSTEM,
			"rank %lld: the host backend's scratch for %s: malloc(%lld): out of host memory",
			(long long)h->env->rank, what, (long long)bytes);
		return NULL;
	}
	h->scratch += bytes;
	memset(p, 0, (size_t)bytes);
	return p;
}

enum tw_result exec_mpi_counts_fit(const struct plan_op *op, int64_t group_size,
				   struct tw_err *err)
{
	const int64_t lim = 2147483647LL;
	if (op->kind == PLAN_P2P) {
		if (op->u.p2p.bytes < 0 || op->u.p2p.bytes > lim)
			return tw_errf(err, TW_ERR_LIMIT,
				       "p2p of %lld bytes is beyond MPI's int counts (2^31-1); the host backend cannot run it",
				       (long long)op->u.p2p.bytes);
		return TW_OK;
	}
	if (op->kind != PLAN_COLL)
		return TW_OK;
	int64_t c = op->u.coll.count, n = group_size;
	int kind = op->u.coll.coll;
	bool whole = kind == PLAN_ALL_GATHER || kind == PLAN_REDUCE_SCATTER || kind == PLAN_ALL_TO_ALL;
	if (c < 0)
		return tw_errf(err, TW_ERR_INTERNAL, "negative count %lld", (long long)c);
	if (c > lim)
		return tw_errf(err, TW_ERR_LIMIT,
			       "count %lld is beyond MPI's int counts (2^31-1); the host backend cannot run this collective",
			       (long long)c);
	if (whole && n > 1 && c > lim / n)
		return tw_errf(err, TW_ERR_LIMIT,
			       "count %lld x %lld ranks is beyond MPI's int counts (2^31-1); the host backend cannot run this collective",
			       (long long)c, (long long)n);
	return TW_OK;
}

static enum tw_result mpi_counts_fit(const struct exec_env *env, const struct plan_op *op,
				     struct tw_err *err)
{
	int64_t n = op->kind == PLAN_COLL ? env->group_size[op->u.coll.group] : 2;
	if (n <= 1 && op->u.coll.count >= 0)
		return TW_OK; /* a group of one is a copy, no MPI call */
	return exec_mpi_counts_fit(op, n, err);
}

static enum tw_result host_probe(const struct exec_env *env, struct tw_err *err)
{
	(void)env;
	(void)err;
	return TW_OK;
}

static void host_close(void *self);

static enum tw_result host_open(const struct exec_env *env, void **self, struct tw_err *err)
{
	*self = NULL;
	/* an op MPI cannot take stops the run before it starts, not in the middle of a step */
	const struct plan *p = env->plan;
	for (size_t i = 0; p && i < p->nops; i++)
		if (mpi_counts_fit(env, &p->ops[i], err) != TW_OK) {
			char desc[192], msg[sizeof(err->msg)];
			enum tw_result code = err->code;
			exec_op_desc(&p->ops[i], desc, sizeof(desc));
			snprintf(msg, sizeof(msg), "%s", err->msg);
			tw_err_clear(err);
			return tw_errf(err, code, "rank %lld: op %u '%s' (%s): %s", (long long)env->rank,
				       p->ops[i].id, p->ops[i].name ? p->ops[i].name : "?", desc, msg);
		}
	struct host *h = TW_NEW(struct host);
	const struct exec_scratch *s = &env->scratch;
	h->env = env;
	h->nvme_fd = -1;
	bool ok = true;
	h->ga = scratch(h, s->gemm_a * 4, "GEMM operand A", &ok, err);
	h->gb = scratch(h, s->gemm_b * 4, "GEMM operand B", &ok, err);
	h->gc = scratch(h, s->gemm_c * 4, "GEMM output", &ok, err);
	h->q = scratch(h, s->attn_qkv * 4, "attention Q", &ok, err);
	h->k = scratch(h, s->attn_qkv * 4, "attention K", &ok, err);
	h->v = scratch(h, s->attn_qkv * 4, "attention V", &ok, err);
	h->s = scratch(h, s->attn_scores * 4, "attention scores", &ok, err);
	h->ein = scratch(h, s->elem_bytes / 2 + 4, "memory-bound kernels", &ok, err);
	h->eout = scratch(h, s->elem_bytes / 2 + 4, "memory-bound kernels", &ok, err);
	h->hin = scratch(h, s->host_bytes / 2 + 4, "host-stream ops", &ok, err);
	h->hout = scratch(h, s->host_bytes / 2 + 4, "host-stream ops", &ok, err);
	h->cin = scratch(h, s->coll_in, "collective input", &ok, err);
	h->cout = scratch(h, s->coll_out, "collective output", &ok, err);
	h->copy_a = scratch(h, s->copy_bytes, "copies", &ok, err);
	h->copy_b = scratch(h, s->copy_bytes, "copies", &ok, err);
	h->recv = scratch(h, s->p2p_bytes, "p2p receives", &ok, err);
	if (!ok) {
		host_close(h);
		return err->code;
	}
	*self = h;
	return TW_OK;
}

static void host_close(void *self)
{
	struct host *h = self;
	free(h->ga), free(h->gb), free(h->gc);
	free(h->q), free(h->k), free(h->v), free(h->s);
	free(h->ein), free(h->eout), free(h->hin), free(h->hout);
	free(h->cin), free(h->cout), free(h->copy_a), free(h->copy_b), free(h->recv);
	for (size_t i = 0; i < h->nsends; i++)
		free(h->sends[i].buf);
	free(h->sends);
	/* a receive still in flight is left after a failure, when MPI_Abort ends the process:
	 * its buffer is kept, since MPI may still write it */
	for (size_t i = 0; i < h->nrecvs; i++)
		if (h->recvs[i].done)
			free(h->recvs[i].buf);
	free(h->recvs);
	if (h->nvme_fd >= 0)
		close(h->nvme_fd);
	free(h);
}

static int64_t host_scratch_bytes(void *self)
{
	return ((struct host *)self)->scratch;
}

static enum tw_result host_step_begin(void *self, int step, struct tw_err *err)
{
	(void)self, (void)step, (void)err;
	return TW_OK;
}

static enum tw_result host_alloc(void *self, const struct plan_op *op, void **ptr, struct tw_err *err)
{
	(void)self;
	*ptr = NULL;
	if (op->u.mem.bytes < 0)
		return tw_errf(err, TW_ERR_INTERNAL, "negative ALLOC size %lld", (long long)op->u.mem.bytes);
	if (op->u.mem.dev == PLAN_DEV_NVME || op->u.mem.bytes == 0)
		return TW_OK; /* NVMe space is counted, not reserved */
	*ptr = malloc((size_t)op->u.mem.bytes);
	if (!*ptr)
		return tw_errf(err, TW_ERR_SYSTEM, "malloc(%lld): out of host memory",
			       (long long)op->u.mem.bytes);
	memset(*ptr, 0, (size_t)op->u.mem.bytes);
	return TW_OK;
}

static enum tw_result host_release(void *self, const struct plan_op *op, void *ptr, struct tw_err *err)
{
	(void)self, (void)op, (void)err;
	free(ptr);
	return TW_OK;
}

/* ---- compute --------------------------------------------------------------------------------- */

static void sgemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b, float *c, bool bt)
{
#ifdef TWIN_HAVE_BLAS
	cblas_sgemm(CblasRowMajor, CblasNoTrans, bt ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
		    1.0f, a, (int)k, b, bt ? (int)k : (int)n, 0.0f, c, (int)n);
#else
	/* without BLAS: the plain loop (correct, slow; `make` says blas is missing) */
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			float acc = 0;
			for (int64_t p = 0; p < k; p++)
				acc += a[i * k + p] * (bt ? b[j * k + p] : b[p * n + j]);
			c[i * n + j] = acc;
		}
#endif
}

/* A memory-bound kernel: read bytes/2, write bytes/2, in passes over the bounded scratch. */
static void stream_bytes(const float *in, float *out, int64_t bytes)
{
	for (int64_t off = 0; off < bytes; off += EXEC_STREAM_CHUNK) {
		int64_t chunk = bytes - off < EXEC_STREAM_CHUNK ? bytes - off : EXEC_STREAM_CHUNK;
		int64_t n = chunk / 8;
		for (int64_t i = 0; i < n; i++)
			out[i] = in[i] * 0.999f + 0.001f;
	}
}

static void softmax_rows(float *s, int64_t rows, int64_t cols, int64_t sq, bool causal)
{
	for (int64_t r = 0; r < rows; r++) {
		float *x = s + r * cols;
		int64_t lim = causal ? (r % sq) + 1 + (cols - sq) : cols;
		if (lim > cols)
			lim = cols;
		if (lim < 1)
			lim = 1;
		float mx = x[0];
		for (int64_t j = 1; j < lim; j++)
			mx = x[j] > mx ? x[j] : mx;
		float sum = 0;
		for (int64_t j = 0; j < lim; j++) {
			x[j] = expf(x[j] - mx);
			sum += x[j];
		}
		for (int64_t j = 0; j < cols; j++)
			x[j] = j < lim ? x[j] / sum : 0.0f;
	}
}

static void attention(struct host *h, const struct plan_op *op)
{
	int64_t bh = (op->u.compute.b > 0 ? op->u.compute.b : 1) *
		     (op->u.compute.heads > 0 ? op->u.compute.heads : 1);
	int64_t sq = op->u.compute.s_q, skv = op->u.compute.s_kv, d = op->u.compute.head_dim;
	int64_t dv = op->u.compute.head_dim_v > 0 ? op->u.compute.head_dim_v : d;
	/* GEMMs that make up the op's FLOPs, alternately QK^T and PV (their mean FLOPs each): 2
	 * forward, 4 backward; a sliding window's band of keys is as wide, against its share, as
	 * the causal square against its half */
	double share;
	int64_t band = plan_attn_band(h->env->job, op, &share);
	double per = (double)bh * (double)sq * (double)skv * (double)(d + dv) * share;
	skv = band;
	long ngemm = per > 0 ? lround(op->u.compute.flops / per) : 2;
	if (ngemm < 2)
		ngemm = 2;
	for (long g = 0; g < ngemm; g += 2) {
		for (int64_t i = 0; i < bh; i++)
			sgemm(sq, skv, d, h->q + i * sq * d, h->k + i * skv * d, h->s + i * sq * skv, true);
		if (g == 0)
			softmax_rows(h->s, bh * sq, skv, sq, op->u.compute.causal);
		if (g + 1 < ngemm)
			for (int64_t i = 0; i < bh; i++)
				sgemm(sq, dv, skv, h->s + i * sq * skv, h->v + i * skv * dv, h->q + i * sq * dv,
				      false);
	}
}

static void compute(struct host *h, const struct plan_op *op)
{
	int64_t bytes = op->u.compute.bytes > 0 ? (int64_t)op->u.compute.bytes : 0;
	if (op->stream == PLAN_STREAM_HOST) {
		stream_bytes(h->hin, h->hout, bytes);
		return;
	}
	switch (op->u.compute.kernel) {
	case PLAN_K_GEMM: {
		/* each of its shapes: a backward op's data grads and weight grads */
		struct plan_gemm_part part[2];
		int np = plan_gemm_parts(op, part);
		for (int q = 0; q < np; q++) {
			int64_t m = part[q].m, n = part[q].n, k = part[q].k;
			for (int64_t b = 0; b < part[q].batch; b++)
				sgemm(m, n, k, h->ga + b * m * k, h->gb + b * k * n, h->gc + b * m * n,
				      false);
		}
		break;
	}
	case PLAN_K_ATTN:
		attention(h, op);
		/* Megatron's fp32 softmax fallback: its extra passes over the scores */
		stream_bytes(h->ein, h->eout, (int64_t)plan_torch_softmax_bytes(op));
		break;
	default:
		stream_bytes(h->ein, h->eout, bytes);
	}
}

/* ---- collectives and p2p ----------------------------------------------------------------------- */

static uint64_t get_w(const unsigned char *b, int w, int64_t i)
{
	switch (w) {
	case 1: return b[i];
	case 2: { uint16_t x; memcpy(&x, b + 2 * i, 2); return x; }
	case 4: { uint32_t x; memcpy(&x, b + 4 * i, 4); return x; }
	default: { uint64_t x; memcpy(&x, b + 8 * i, 8); return x; }
	}
}

static void put_w(unsigned char *b, int w, int64_t i, uint64_t v)
{
	switch (w) {
	case 1: b[i] = (unsigned char)v; break;
	case 2: { uint16_t x = (uint16_t)v; memcpy(b + 2 * i, &x, 2); break; }
	case 4: { uint32_t x = (uint32_t)v; memcpy(b + 4 * i, &x, 4); break; }
	default: memcpy(b + 8 * i, &v, 8);
	}
}

static uint64_t mask_w(int w)
{
	return w >= 8 ? ~0ULL : (1ULL << (8 * w)) - 1;
}

/* Expected output element i of a collective (member idx of n, count c per the NCCL argument). */
static uint64_t coll_expect(int coll, int64_t n, int64_t idx, int64_t c, int64_t i, int64_t seq)
{
	uint64_t sum = 0;
	switch (coll) {
	case PLAN_ALL_REDUCE:
	case PLAN_REDUCE: /* at the root */
		for (int64_t g = 0; g < n; g++)
			sum += exec_pattern(g, i, seq);
		return sum;
	case PLAN_REDUCE_SCATTER:
		for (int64_t g = 0; g < n; g++)
			sum += exec_pattern(g, idx * c + i, seq);
		return sum;
	case PLAN_ALL_GATHER:
		return exec_pattern(i / c, i % c, seq);
	case PLAN_BROADCAST:
		return exec_pattern(0, i, seq);
	default: /* all-to-all: chunk j came from member j, its chunk number idx */
		return exec_pattern(i / c, idx * c + i % c, seq);
	}
}

#ifdef TWIN_HAVE_MPI
static MPI_Datatype mpi_uint(int w)
{
	return w == 1 ? MPI_UINT8_T : w == 2 ? MPI_UINT16_T : w == 4 ? MPI_UINT32_T : MPI_UINT64_T;
}

static enum tw_result mpi_failed(int rc, const char *call, struct tw_err *err)
{
	char s[MPI_MAX_ERROR_STRING] = "";
	int len = 0;
	MPI_Error_string(rc, s, &len);
	return tw_errf(err, TW_ERR_MPI, "%s: %s", call, s);
}
#endif

static enum tw_result coll(struct host *h, const struct plan_op *op, struct exec_span *span,
			   struct tw_err *err)
{
	const struct exec_env *env = h->env;
	int g = op->u.coll.group, w = tw_dtype_bytes(op->u.coll.dtype);
	int64_t n = env->group_size[g], idx = env->group_index[g], c = op->u.coll.count;
	int64_t seq = op->u.coll.seq, root = op->u.coll.root;
	int kind = op->u.coll.coll;
	int64_t in_n = c, out_n = c;
	if (kind == PLAN_ALL_GATHER)
		out_n = c * n;
	else if (kind == PLAN_REDUCE_SCATTER)
		in_n = c * n;
	else if (kind == PLAN_ALL_TO_ALL)
		in_n = out_n = c * n;
	TW_CHECK(mpi_counts_fit(env, op, err)); /* host_open checked the plan: a guard */
	/* known input */
	for (int64_t i = 0; i < in_n; i++) {
		uint64_t v = kind == PLAN_ALL_TO_ALL || kind == PLAN_REDUCE_SCATTER
				     ? exec_pattern(idx, i, seq)
				     : exec_pattern(kind == PLAN_BROADCAST ? 0 : idx, i, seq);
		put_w(h->cin, w, i, v);
	}
	if (kind == PLAN_BROADCAST)
		for (int64_t i = 0; i < out_n; i++)
			put_w(h->cout, w, i, idx == 0 ? get_w(h->cin, w, i) : 0xA5);
	int64_t t0 = tw_now_ns();
	const void *comm = env->mpi_group[g];
	if (!comm || n <= 1) {
		if (kind != PLAN_BROADCAST)
			memcpy(h->cout, h->cin, (size_t)(out_n * w));
	} else {
#ifdef TWIN_HAVE_MPI
		MPI_Comm cm = *(const MPI_Comm *)comm;
		MPI_Datatype t = mpi_uint(w);
		int rc;
		const char *call;
		switch (kind) {
		case PLAN_ALL_REDUCE:
			call = "MPI_Allreduce";
			rc = MPI_Allreduce(h->cin, h->cout, (int)c, t, MPI_SUM, cm);
			break;
		case PLAN_ALL_GATHER:
			call = "MPI_Allgather";
			rc = MPI_Allgather(h->cin, (int)c, t, h->cout, (int)c, t, cm);
			break;
		case PLAN_REDUCE_SCATTER:
			call = "MPI_Reduce_scatter_block";
			rc = MPI_Reduce_scatter_block(h->cin, h->cout, (int)c, t, MPI_SUM, cm);
			break;
		case PLAN_BROADCAST:
			call = "MPI_Bcast";
			rc = MPI_Bcast(h->cout, (int)c, t, 0, cm);
			break;
		case PLAN_REDUCE:
			call = "MPI_Reduce";
			rc = MPI_Reduce(h->cin, h->cout, (int)c, t, MPI_SUM, (int)root, cm);
			break;
		default:
			call = "MPI_Alltoall";
			rc = MPI_Alltoall(h->cin, (int)c, t, h->cout, (int)c, t, cm);
		}
		if (rc != MPI_SUCCESS)
			return mpi_failed(rc, call, err);
#endif
	}
	int64_t t1 = tw_now_ns();
	span[op->id].start_ns = t0 - env->t0_ns;
	span[op->id].end_ns = t1 - env->t0_ns;
	if (env->corrupt_op == (int64_t)op->id && out_n > 0)
		put_w(h->cout, w, 0, get_w(h->cout, w, 0) + 1);
	if (env->verify && (kind != PLAN_REDUCE || idx == root)) { /* a reduce's result: the root's */
		uint64_t m = mask_w(w);
		for (int64_t i = 0; i < out_n; i++) {
			uint64_t want = coll_expect(kind, n, idx, c, i, seq) & m, got = get_w(h->cout, w, i);
			if (got != want)
				return tw_errf(err, TW_ERR_INTERNAL,
					       "wrong result at element %lld: got %llu, expected %llu",
					       (long long)i, (unsigned long long)got, (unsigned long long)want);
		}
		(*env->verified)++;
	}
	return TW_OK;
}

#ifdef TWIN_HAVE_MPI
/* Check a receive's data against its sender's pattern (and alter it first when the fault
 * injection says so). */
static enum tw_result recv_check(struct host *h, const struct plan_op *op, unsigned char *buf,
				 struct tw_err *err)
{
	const struct exec_env *env = h->env;
	int64_t bytes = op->u.p2p.bytes, peer = op->u.p2p.peer, seq = op->u.p2p.seq;
	if (env->corrupt_op == (int64_t)op->id && bytes > 0)
		buf[0]++;
	if (!env->verify)
		return TW_OK;
	for (int64_t i = 0; i < bytes; i++)
		if (buf[i] != (unsigned char)exec_pattern(peer, i, seq))
			return tw_errf(err, TW_ERR_INTERNAL,
				       "wrong data received at byte %lld: got %u, expected %u",
				       (long long)i, buf[i], exec_pattern(peer, i, seq));
	(*env->verified)++;
	return TW_OK;
}

/* Take posted receive k off the list: wait for it unless MPI_Test saw it done, end its span,
 * check its data. A failure names the receive (the caller's error names the op that
 * needed it). */
static enum tw_result recv_finish(struct host *h, size_t k, struct exec_span *span,
				  struct tw_err *err)
{
	const struct exec_env *env = h->env;
	struct pending_recv pr = h->recvs[k];
	h->recvs[k] = h->recvs[--h->nrecvs];
	const struct plan_op *op = &env->plan->ops[pr.op];
	enum tw_result rc = TW_OK;
	if (!pr.done) {
		int64_t was = atomic_load(env->waiting_op);
		atomic_store(env->waiting_op, (int64_t)pr.op);
		int mrc = MPI_Wait(&pr.req, MPI_STATUS_IGNORE);
		atomic_store(env->waiting_op, was);
		if (mrc != MPI_SUCCESS)
			rc = mpi_failed(mrc, "MPI_Wait (posted receive)", err);
		pr.done_ns = tw_now_ns();
	}
	if (rc == TW_OK) {
		span[pr.op].end_ns = pr.done_ns - env->t0_ns;
		rc = recv_check(h, op, pr.buf, err);
	}
	free(pr.buf);
	if (rc != TW_OK) {
		char desc[192], msg[sizeof(err->msg)];
		exec_op_desc(op, desc, sizeof(desc));
		snprintf(msg, sizeof(msg), "%s", err->msg);
		enum tw_result code = err->code;
		tw_err_clear(err);
		return tw_errf(err, code, "the receive posted ahead, op %u '%s' (%s): %s", op->id,
			       op->name ? op->name : "?", desc, msg);
	}
	return TW_OK;
}
#endif

#ifdef TWIN_HAVE_MPI
/* Finish the posted receives op depends on, looking through ALLOC/FREE (which run at once and
 * are not waited on) to their own dependencies, as the cuda backend's wait_deps does. */
static enum tw_result finish_deps(struct host *h, const struct plan_op *op, int depth,
				  struct exec_span *span, struct tw_err *err)
{
	const struct plan *p = h->env->plan;
	const uint32_t *d = plan_op_deps(p, op);
	for (uint32_t i = 0; i < op->ndeps && h->nrecvs > 0; i++) {
		const struct plan_op *dep = &p->ops[d[i]];
		if (dep->kind == PLAN_P2P) {
			for (size_t k = 0; k < h->nrecvs; k++)
				if (h->recvs[k].op == d[i]) {
					TW_CHECK(recv_finish(h, k, span, err));
					break;
				}
		} else if (depth < 8 && (dep->kind == PLAN_ALLOC || dep->kind == PLAN_FREE)) {
			TW_CHECK(finish_deps(h, dep, depth + 1, span, err));
		}
	}
	return TW_OK;
}
#endif

/* Before op runs: the receives posted ahead that it depends on must have arrived (the plan's
 * order is a topological one and every op waits for its own, so its direct dependencies
 * suffice). Those still in flight are polled, so that their spans end near their arrival. */
static enum tw_result wait_posted(struct host *h, const struct plan_op *op, struct exec_span *span,
				  struct tw_err *err)
{
#ifdef TWIN_HAVE_MPI
	if (h->nrecvs == 0)
		return TW_OK;
	for (size_t k = 0; k < h->nrecvs; k++) {
		struct pending_recv *pr = &h->recvs[k];
		int flag = 0;
		if (!pr->done && MPI_Test(&pr->req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) {
			pr->done = true;
			pr->done_ns = tw_now_ns();
		}
	}
	return finish_deps(h, op, 0, span, err);
#else
	(void)h, (void)op, (void)span, (void)err;
	return TW_OK;
#endif
}

static enum tw_result p2p(struct host *h, const struct plan_op *op, struct exec_span *span,
			  struct tw_err *err)
{
	const struct exec_env *env = h->env;
	int64_t bytes = op->u.p2p.bytes, peer = op->u.p2p.peer, seq = op->u.p2p.seq;
	bool send = op->flags & PLAN_F_SEND;
	TW_CHECK(mpi_counts_fit(env, op, err)); /* host_open checked the plan: a guard */
	if (peer < 0 || peer >= env->nranks || peer == env->rank)
		return tw_errf(err, TW_ERR_INTERNAL, "p2p peer %lld is not another rank of %lld",
			       (long long)peer, (long long)env->nranks);
#ifdef TWIN_HAVE_MPI
	MPI_Comm world = *(const MPI_Comm *)env->mpi_world;
	int tag = (int)(seq % 32767);
	int64_t t0, t1;
	if (send) {
		/* non-blocking, from its own copy: the pipeline schedule relies on sends not waiting
		 * for the receiver (as NCCL's and Megatron's batched isend do) */
		unsigned char *buf = malloc((size_t)bytes + 1);
		if (!buf)
			return tw_errf(err, TW_ERR_SYSTEM, "malloc(%lld): out of host memory",
				       (long long)bytes + 1);
		for (int64_t i = 0; i < bytes; i++)
			buf[i] = (unsigned char)exec_pattern(env->rank, i, seq);
		TW_GROW(h->sends, h->sends_cap, h->nsends + 1);
		struct pending_send *ps = &h->sends[h->nsends++];
		ps->buf = buf;
		ps->op = op->id;
		t0 = tw_now_ns();
		int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, (int)peer, tag, world, &ps->req);
		t1 = tw_now_ns();
		if (rc != MPI_SUCCESS)
			return mpi_failed(rc, "MPI_Isend", err);
	} else if (!(op->flags & PLAN_F_BLOCKING)) {
		/* posted ahead: the op that uses it waits (wait_posted), its span ends then */
		unsigned char *buf = malloc((size_t)bytes + 1);
		if (!buf)
			return tw_errf(err, TW_ERR_SYSTEM, "malloc(%lld): out of host memory",
				       (long long)bytes + 1);
		memset(buf, 0xA5, (size_t)bytes);
		TW_GROW(h->recvs, h->recvs_cap, h->nrecvs + 1);
		struct pending_recv *pr = &h->recvs[h->nrecvs];
		memset(pr, 0, sizeof(*pr));
		pr->buf = buf;
		pr->op = op->id;
		t0 = tw_now_ns();
		int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, (int)peer, tag, world, &pr->req);
		if (rc != MPI_SUCCESS) {
			free(buf);
			return mpi_failed(rc, "MPI_Irecv", err);
		}
		h->nrecvs++;
		span[op->id].start_ns = t0 - env->t0_ns;
		return TW_OK;
	} else {
		memset(h->recv, 0xA5, (size_t)bytes);
		t0 = tw_now_ns();
		int rc = MPI_Recv(h->recv, (int)bytes, MPI_BYTE, (int)peer, tag, world, MPI_STATUS_IGNORE);
		t1 = tw_now_ns();
		if (rc != MPI_SUCCESS)
			return mpi_failed(rc, "MPI_Recv", err);
		TW_CHECK(recv_check(h, op, h->recv, err));
	}
	span[op->id].start_ns = t0 - env->t0_ns;
	span[op->id].end_ns = t1 - env->t0_ns;
	return TW_OK;
#else
	(void)h, (void)span, (void)seq, (void)send;
	return tw_errf(err, TW_ERR_UNSUPPORTED, "p2p needs MPI, which this build lacks");
#endif
}

static enum tw_result copy(struct host *h, const struct plan_op *op, struct exec_span *span,
			   struct tw_err *err)
{
	int64_t bytes = op->u.copy.bytes;
	int dir = op->u.copy.dir;
	if (bytes <= 0)
		return TW_OK;
	if ((dir == PLAN_NVME_READ || dir == PLAN_NVME_WRITE) && h->nvme_fd < 0) {
		const char *tmp = getenv("TMPDIR");
		char path[512];
		snprintf(path, sizeof(path), "%s/twin-nvme-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		h->nvme_fd = mkstemp(path);
		if (h->nvme_fd < 0)
			return tw_errf(err, TW_ERR_SYSTEM, "mkstemp(%s): %s", path, strerror(errno));
		unlink(path);
	}
	int64_t t0 = tw_now_ns();
	if (dir == PLAN_NVME_WRITE || dir == PLAN_NVME_READ) {
		int64_t done = 0;
		while (done < bytes) {
			ssize_t k = dir == PLAN_NVME_WRITE
					    ? pwrite(h->nvme_fd, h->copy_a + done, (size_t)(bytes - done), done)
					    : pread(h->nvme_fd, h->copy_b + done, (size_t)(bytes - done), done);
			if (k < 0)
				return tw_errf(err, TW_ERR_SYSTEM, "%s: %s",
					       dir == PLAN_NVME_WRITE ? "pwrite" : "pread", strerror(errno));
			if (k == 0) { /* reading past what was written: the rest is zeros */
				memset(h->copy_b + done, 0, (size_t)(bytes - done));
				break;
			}
			done += k;
		}
	} else if (dir == PLAN_H2D) {
		memcpy(h->copy_b, h->copy_a, (size_t)bytes);
	} else {
		memcpy(h->copy_a, h->copy_b, (size_t)bytes);
	}
	int64_t t1 = tw_now_ns();
	span[op->id].start_ns = t0 - h->env->t0_ns;
	span[op->id].end_ns = t1 - h->env->t0_ns;
	return TW_OK;
}

static enum tw_result host_issue(void *self, const struct plan_op *op, struct exec_span *span,
				 struct tw_err *err)
{
	struct host *h = self;
	TW_CHECK(wait_posted(h, op, span, err));
	switch (op->kind) {
	case PLAN_COMPUTE: {
		int64_t t0 = tw_now_ns();
		compute(h, op);
		int64_t t1 = tw_now_ns();
		span[op->id].start_ns = t0 - h->env->t0_ns;
		span[op->id].end_ns = t1 - h->env->t0_ns;
		return TW_OK;
	}
	case PLAN_COLL:
		return coll(h, op, span, err);
	case PLAN_P2P:
		return p2p(h, op, span, err);
	case PLAN_COPY:
		return copy(h, op, span, err);
	default:
		return TW_OK;
	}
}

static enum tw_result host_step_end(void *self, struct exec_span *span, struct tw_err *err)
{
	struct host *h = self;
#ifdef TWIN_HAVE_MPI
	/* receives posted ahead that no op waited for (every one is posted by now, so the sends
	 * below complete too) */
	while (h->nrecvs > 0) {
		enum tw_result rc = recv_finish(h, h->nrecvs - 1, span, err);
		if (rc != TW_OK) {
			atomic_store(h->env->waiting_op, (int64_t)-1);
			return rc;
		}
	}
	for (size_t i = 0; i < h->nsends; i++) {
		atomic_store(h->env->waiting_op, (int64_t)h->sends[i].op);
		int rc = MPI_Wait(&h->sends[i].req, MPI_STATUS_IGNORE);
		free(h->sends[i].buf);
		h->sends[i].buf = NULL;
		if (rc != MPI_SUCCESS) {
			for (size_t k = i + 1; k < h->nsends; k++)
				free(h->sends[k].buf);
			h->nsends = 0;
			return mpi_failed(rc, "MPI_Wait (pending send)", err);
		}
	}
#else
	(void)span, (void)err;
#endif
	h->nsends = 0;
	atomic_store(h->env->waiting_op, (int64_t)-1);
	return TW_OK;
}

const struct exec_backend exec_backend_host = {
	.name = "host",
	.probe = host_probe,
	.open = host_open,
	.step_begin = host_step_begin,
	.alloc = host_alloc,
	.release = host_release,
	.issue = host_issue,
	.step_end = host_step_end,
	.device_used = NULL,
	.scratch_bytes = host_scratch_bytes,
	.close = host_close,
};
