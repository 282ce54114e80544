/* cuda — the executor's GPU backend (docs/executor.md).
 *
 * One GPU per rank (local rank on the node, from MPI_COMM_TYPE_SHARED). One CUDA stream per plan
 * stream, plus a second p2p stream: sends to higher ranks and receives from lower ranks go on
 * the "up" NCCL communicator and stream, the rest on "down", so between any two ranks each
 * communicator carries one direction only and pipeline send/recv cannot deadlock.
 *
 * Per op: wait for the CUDA events of its dependencies on other streams, record a start event,
 * launch, record an end event (also the op's "done" event for later dependencies). GEMMs are
 * cuBLAS strided-batched in the plan's dtype (fp32 accumulation; fp8/int8 run as bf16); attention
 * is cuBLAS QK^T, our row softmax, cuBLAS PV (the score matrix is materialised: not flash); other
 * compute is a kernel streaming the op's bytes; collectives are NCCL over one communicator per
 * job group (ncclCommSplit of the world communicator, whose unique id rank 0 broadcasts over MPI);
 * offload copies are cudaMemcpyAsync from/to pinned staging; the CPU optimizer and NVMe copies run
 * on the host thread once their dependencies' events completed. ALLOC/FREE are stream-ordered
 * (cudaMallocAsync/cudaFreeAsync on the compute stream) for device buffers and malloc for host
 * buffers. Operands live in scratch buffers outside the plan's ALLOCs, which are reservations.
 *
 * Timing: CUDA events give every op's span; CUPTI, when it can subscribe, replaces it with the
 * span from the op's first kernel start to its last kernel end. */
#include "../backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#ifdef TWIN_HAVE_MPI
#include <mpi.h>
#endif

#include "cupti_trace.h"
#include "kernels.h"

enum { ST_P2P_DOWN = PLAN_NUM_STREAMS, NUM_ST };

struct cu {
	const struct exec_env *env;
	int device;
	cudaStream_t st[NUM_ST];
	cublasHandle_t blas;
	ncclComm_t world, group[JOB_NUM_GROUPS], up, down;
	bool nccl;
	cudaEvent_t *ev_start, *ev_end, base;
	int *where;              /* stream index an op ran on this step, -1: host or not issued */
	int64_t last_on[NUM_ST]; /* the last op issued on each stream this step, -1: none */
	int64_t base_host_ns;    /* host time (since t0) of the base event */
	int64_t base_cupti_ns;   /* CUPTI time at the same moment */
	bool cupti;
	int64_t *cs, *ce;        /* CUPTI spans */
	/* scratch */
	void *ga, *gb, *gc, *q, *k, *v, *o, *s, *ein, *eout, *hin, *hout;
	void *cin[NUM_ST], *cout[NUM_ST];
	void *p2p_send, *p2p_recv[2];
	void *dev_in, *dev_out, *pin_in, *pin_out;
	unsigned long long *bad; /* device: lowest wrong index per op (verify) */
	unsigned long long *bad_host;
	int nvme_fd;
	int64_t scratch;
};

static enum tw_result cuda_failed(cudaError_t e, const char *call, struct tw_err *err)
{
	return tw_errf(err, TW_ERR_CUDA, "%s: %s", call, cudaGetErrorString(e));
}
#define CU(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess)                                                             \
			return cuda_failed(e_, #call, err);                                        \
	} while (0)
#define NC(call, comm)                                                                             \
	do {                                                                                       \
		ncclResult_t n_ = (call);                                                          \
		if (n_ != ncclSuccess)                                                             \
			return tw_errf(err, TW_ERR_NCCL, "%s: %s%s%s", #call, ncclGetErrorString(n_), \
				       ncclGetLastError(comm) ? ": " : "",                         \
				       ncclGetLastError(comm) ? ncclGetLastError(comm) : "");      \
	} while (0)
#define BL(call)                                                                                   \
	do {                                                                                       \
		cublasStatus_t b_ = (call);                                                        \
		if (b_ != CUBLAS_STATUS_SUCCESS)                                                   \
			return tw_errf(err, TW_ERR_CUDA, "%s: %s", #call, cublasGetStatusString(b_)); \
	} while (0)

static enum tw_result cuda_probe(const struct exec_env *env, struct tw_err *err)
{
	(void)env;
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0)
		return tw_errf(err, TW_ERR_UNSUPPORTED,
			       "no CUDA GPU or driver on this machine (cudaGetDeviceCount: %s); --backend host runs the same plan on CPU ranks",
			       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
	return TW_OK;
}

static enum tw_result dev_scratch(struct cu *c, void **p, int64_t bytes, struct tw_err *err)
{
	*p = NULL;
	if (bytes <= 0)
		return TW_OK;
	bytes = (bytes + 255) & ~(int64_t)255;
	CU(cudaMalloc(p, (size_t)bytes));
	/* 0x3c3c: small normal numbers in fp32, fp16 and bf16 alike */
	CU(cudaMemset(*p, 0x3c, (size_t)bytes));
	c->scratch += bytes;
	return TW_OK;
}

static enum tw_result pinned_scratch(struct cu *c, void **p, int64_t bytes, struct tw_err *err)
{
	*p = NULL;
	if (bytes <= 0)
		return TW_OK;
	CU(cudaHostAlloc(p, (size_t)bytes, cudaHostAllocDefault));
	memset(*p, 0x3c, (size_t)bytes);
	c->scratch += bytes;
	return TW_OK;
}

static int local_rank(const struct exec_env *env)
{
#ifdef TWIN_HAVE_MPI
	if (env->mpi_world) {
		MPI_Comm node;
		int r = 0;
		MPI_Comm_split_type(*(const MPI_Comm *)env->mpi_world, MPI_COMM_TYPE_SHARED,
				    (int)env->rank, MPI_INFO_NULL, &node);
		MPI_Comm_rank(node, &r);
		MPI_Comm_free(&node);
		return r;
	}
#endif
	return (int)env->rank;
}

static enum tw_result open_nccl(struct cu *c, struct tw_err *err)
{
	const struct exec_env *env = c->env;
	if (env->nranks <= 1)
		return TW_OK;
#ifdef TWIN_HAVE_MPI
	/* as nccl-tests: rank 0 makes the unique id, MPI carries it to everyone */
	/* the strategy's NCCL_ALGO / NCCL_PROTO: NCCL reads them from the environment only, so
	 * the run sets them before NCCL's first call, as the job's launcher would */
	const struct strategy *st = &env->job->strat;
	const char *const var[2] = { "NCCL_ALGO", "NCCL_PROTO" }, *const want[2] = { st->nccl_algo, st->nccl_proto };
	for (int i = 0; i < 2; i++) {
		const char *have = getenv(var[i]);
		if (want[i][0])
			setenv(var[i], want[i], 1);
		else if (have && have[0] && env->rank == 0) /* the run would differ from the plan */
			tw_log(TW_LOG_WARN, "%s=%s from the environment applies to this run; the strategy's "
			       "%s does not say it (set it there to simulate the same)", var[i], have,
			       i ? "nccl_proto" : "nccl_algo");
	}
	ncclUniqueId id;
	if (env->rank == 0)
		NC(ncclGetUniqueId(&id), NULL);
	MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, *(const MPI_Comm *)env->mpi_world);
	NC(ncclCommInitRank(&c->world, (int)env->nranks, id, (int)env->rank), NULL);
	c->nccl = true;
	for (int g = 0; g < JOB_NUM_GROUPS; g++) {
		if (env->group_size[g] <= 1)
			continue;
		int color = (int)(job_group_color(env->job, (enum job_group)g, env->rank) % 2147483647);
		NC(ncclCommSplit(c->world, color, (int)env->rank, &c->group[g], NULL), c->world);
	}
	NC(ncclCommSplit(c->world, 0, (int)env->rank, &c->up, NULL), c->world);
	NC(ncclCommSplit(c->world, 0, (int)env->rank, &c->down, NULL), c->world);
	return TW_OK;
#else
	return tw_errf(err, TW_ERR_UNSUPPORTED, "multi-rank cuda runs need MPI, which this build lacks");
#endif
}

static enum tw_result cuda_open_in(struct cu *c, struct tw_err *err)
{
	const struct exec_env *env = c->env;
	const struct exec_scratch *s = &env->scratch;
	int n = 0;
	CU(cudaGetDeviceCount(&n));
	c->device = local_rank(env) % n;
	CU(cudaSetDevice(c->device));
	/* CUPTI first, so that it sees every kernel; without it (another tool subscribed, e.g.
	 * nsys) the CUDA events still time every op */
	struct tw_err cerr = {0};
	c->cupti = twin_cupti_start(&cerr) == TW_OK;
	if (!c->cupti)
		tw_log(TW_LOG_WARN, "rank %lld: CUPTI tracing off (%s); op times from CUDA events",
		       (long long)env->rank, cerr.msg);
	for (int i = 0; i < NUM_ST; i++)
		CU(cudaStreamCreateWithFlags(&c->st[i], cudaStreamNonBlocking));
	BL(cublasCreate(&c->blas));
	/* keep freed pool memory: stream-ordered ALLOC/FREE should not go back to the driver */
	cudaMemPool_t pool;
	CU(cudaDeviceGetDefaultMemPool(&pool, c->device));
	uint64_t keep = UINT64_MAX;
	CU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
	size_t nops = env->plan->nops ? env->plan->nops : 1;
	c->ev_start = TW_NEW_ARRAY(cudaEvent_t, nops);
	c->ev_end = TW_NEW_ARRAY(cudaEvent_t, nops);
	c->where = TW_NEW_ARRAY(int, nops);
	c->cs = TW_NEW_ARRAY(int64_t, nops);
	c->ce = TW_NEW_ARRAY(int64_t, nops);
	for (size_t i = 0; i < nops; i++) {
		CU(cudaEventCreate(&c->ev_start[i]));
		CU(cudaEventCreate(&c->ev_end[i]));
	}
	CU(cudaEventCreate(&c->base));
	int64_t e4 = 4; /* bytes per element of the widest dtype */
	TW_CHECK(dev_scratch(c, &c->ga, s->gemm_a * e4, err));
	TW_CHECK(dev_scratch(c, &c->gb, s->gemm_b * e4, err));
	TW_CHECK(dev_scratch(c, &c->gc, s->gemm_c * e4, err));
	TW_CHECK(dev_scratch(c, &c->q, s->attn_qkv * e4, err));
	TW_CHECK(dev_scratch(c, &c->k, s->attn_qkv * e4, err));
	TW_CHECK(dev_scratch(c, &c->v, s->attn_qkv * e4, err));
	TW_CHECK(dev_scratch(c, &c->o, s->attn_qkv * e4, err));
	TW_CHECK(dev_scratch(c, &c->s, s->attn_scores * e4, err));
	TW_CHECK(dev_scratch(c, &c->ein, s->elem_bytes / 2 + 64, err));
	TW_CHECK(dev_scratch(c, &c->eout, s->elem_bytes / 2 + 64, err));
	/* collectives: one pair per stream that carries them, so concurrent ones do not share */
	const int coll_st[] = {PLAN_STREAM_COMM, PLAN_STREAM_COMM_TP, PLAN_STREAM_COMM_EP};
	for (int i = 0; i < 3; i++) {
		TW_CHECK(dev_scratch(c, &c->cin[coll_st[i]], s->coll_in, err));
		TW_CHECK(dev_scratch(c, &c->cout[coll_st[i]], s->coll_out, err));
	}
	TW_CHECK(dev_scratch(c, &c->p2p_send, s->p2p_bytes, err));
	TW_CHECK(dev_scratch(c, &c->p2p_recv[0], s->p2p_bytes, err));
	TW_CHECK(dev_scratch(c, &c->p2p_recv[1], s->p2p_bytes, err));
	TW_CHECK(dev_scratch(c, &c->dev_in, s->copy_bytes, err));
	TW_CHECK(dev_scratch(c, &c->dev_out, s->copy_bytes, err));
	TW_CHECK(pinned_scratch(c, &c->pin_in, s->copy_bytes, err));
	TW_CHECK(pinned_scratch(c, &c->pin_out, s->copy_bytes, err));
	if (s->host_bytes > 0) {
		c->hin = tw_calloc(1, (size_t)s->host_bytes / 2 + 64);
		c->hout = tw_calloc(1, (size_t)s->host_bytes / 2 + 64);
	}
	CU(cudaMalloc((void **)&c->bad, nops * sizeof(*c->bad)));
	c->bad_host = TW_NEW_ARRAY(unsigned long long, nops);
	CU(cudaDeviceSynchronize());
	return open_nccl(c, err);
}

static void cuda_close(void *self);

static enum tw_result cuda_open(const struct exec_env *env, void **self, struct tw_err *err)
{
	struct cu *c = TW_NEW(struct cu);
	c->env = env;
	c->nvme_fd = -1;
	enum tw_result rc = cuda_open_in(c, err);
	if (rc != TW_OK) {
		cuda_close(c);
		return rc;
	}
	*self = c;
	return TW_OK;
}

static void cuda_close(void *self)
{
	struct cu *c = self;
	if (!c)
		return;
	cudaDeviceSynchronize();
	if (c->nccl) {
		for (int g = 0; g < JOB_NUM_GROUPS; g++)
			if (c->group[g])
				ncclCommDestroy(c->group[g]);
		if (c->up)
			ncclCommDestroy(c->up);
		if (c->down)
			ncclCommDestroy(c->down);
		ncclCommDestroy(c->world);
	}
	void *dev[] = {c->ga, c->gb, c->gc, c->q, c->k, c->v, c->o, c->s, c->ein, c->eout,
		       c->p2p_send, c->p2p_recv[0], c->p2p_recv[1], c->dev_in, c->dev_out, c->bad};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		if (dev[i])
			cudaFree(dev[i]);
	for (int i = 0; i < NUM_ST; i++) {
		if (c->cin[i])
			cudaFree(c->cin[i]);
		if (c->cout[i])
			cudaFree(c->cout[i]);
	}
	if (c->pin_in)
		cudaFreeHost(c->pin_in);
	if (c->pin_out)
		cudaFreeHost(c->pin_out);
	size_t nops = c->env->plan->nops;
	if (c->ev_start)
		for (size_t i = 0; i < nops; i++) {
			cudaEventDestroy(c->ev_start[i]);
			cudaEventDestroy(c->ev_end[i]);
		}
	if (c->base)
		cudaEventDestroy(c->base);
	if (c->blas)
		cublasDestroy(c->blas);
	for (int i = 0; i < NUM_ST; i++)
		if (c->st[i])
			cudaStreamDestroy(c->st[i]);
	if (c->cupti)
		twin_cupti_stop();
	if (c->nvme_fd >= 0)
		close(c->nvme_fd);
	free(c->ev_start), free(c->ev_end), free(c->where), free(c->cs), free(c->ce);
	free(c->hin), free(c->hout), free(c->bad_host);
	free(c);
}

static int64_t cuda_scratch_bytes(void *self)
{
	return ((struct cu *)self)->scratch;
}

static int64_t cuda_device_used(void *self)
{
	(void)self;
	size_t free_b = 0, total = 0;
	if (cudaMemGetInfo(&free_b, &total) != cudaSuccess)
		return -1;
	return (int64_t)(total - free_b);
}

static enum tw_result cuda_step_begin(void *self, int step, struct tw_err *err)
{
	(void)step;
	struct cu *c = self;
	size_t nops = c->env->plan->nops;
	for (size_t i = 0; i < nops; i++)
		c->where[i] = -1;
	for (int i = 0; i < NUM_ST; i++)
		c->last_on[i] = -1;
	CU(cudaMemset(c->bad, 0xff, (nops ? nops : 1) * sizeof(*c->bad)));
	CU(cudaEventRecord(c->base, c->st[PLAN_STREAM_COMPUTE]));
	CU(cudaEventSynchronize(c->base));
	c->base_host_ns = tw_now_ns() - c->env->t0_ns;
	c->base_cupti_ns = c->cupti ? twin_cupti_now() : 0;
	return TW_OK;
}

static enum tw_result cuda_alloc(void *self, const struct plan_op *op, void **ptr, struct tw_err *err)
{
	struct cu *c = self;
	*ptr = NULL;
	size_t bytes = (size_t)op->u.mem.bytes;
	if (op->u.mem.bytes <= 0 || op->u.mem.dev == PLAN_DEV_NVME)
		return TW_OK;
	if (op->u.mem.dev == PLAN_DEV_HOST) {
		*ptr = malloc(bytes);
		if (!*ptr)
			return tw_errf(err, TW_ERR_SYSTEM, "malloc(%zu): out of host memory", bytes);
		memset(*ptr, 0, bytes);
		return TW_OK;
	}
	CU(cudaMallocAsync(ptr, bytes, c->st[PLAN_STREAM_COMPUTE]));
	return TW_OK;
}

static enum tw_result cuda_release(void *self, const struct plan_op *op, void *ptr, struct tw_err *err)
{
	struct cu *c = self;
	if (!ptr)
		return TW_OK;
	if (op->u.mem.dev == PLAN_DEV_HOST) {
		free(ptr);
		return TW_OK;
	}
	CU(cudaFreeAsync(ptr, c->st[PLAN_STREAM_COMPUTE]));
	return TW_OK;
}

static int stream_of(const struct cu *c, const struct plan_op *op)
{
	if (op->kind == PLAN_P2P) {
		bool send = op->flags & PLAN_F_SEND;
		bool to_higher = op->u.p2p.peer > c->env->rank;
		/* up: sends to higher, receives from lower */
		return (send == to_higher) ? PLAN_STREAM_P2P : ST_P2P_DOWN;
	}
	return op->stream < PLAN_NUM_STREAMS ? op->stream : PLAN_STREAM_COMPUTE;
}

static cudaDataType_t cu_type(int dtype, int *elt)
{
	switch (dtype) {
	case TW_FP32:
	case TW_TF32:
		*elt = TWIN_ELT_F32;
		return CUDA_R_32F;
	case TW_FP16:
		*elt = TWIN_ELT_F16;
		return CUDA_R_16F;
	default: /* bf16; fp8 and int8 GEMMs run as bf16 (docs/executor.md) */
		*elt = TWIN_ELT_BF16;
		return CUDA_R_16BF;
	}
}

static enum tw_result gemm(struct cu *c, cudaStream_t s, int dtype, int64_t m, int64_t n, int64_t k,
			   int64_t batch, bool ta, const void *a, int64_t lda, int64_t sa, const void *b,
			   int64_t ldb, int64_t sb, void *out, int64_t ldc, int64_t sc, struct tw_err *err)
{
	if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
		return TW_OK;
	if (m > 2147483647LL || n > 2147483647LL || k > 2147483647LL || batch > 2147483647LL)
		return tw_errf(err, TW_ERR_LIMIT, "GEMM dimension beyond cuBLAS's int range");
	int elt;
	cudaDataType_t t = cu_type(dtype, &elt);
	cublasComputeType_t ct = dtype == TW_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	float alpha = 1.0f, beta = 0.0f;
	BL(cublasSetStream(c->blas, s));
	BL(cublasGemmStridedBatchedEx(c->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)m, (int)n,
				      (int)k, &alpha, a, t, (int)lda, sa, b, t, (int)ldb, sb, &beta, out,
				      t, (int)ldc, sc, (int)batch, ct, CUBLAS_GEMM_DEFAULT));
	return TW_OK;
}

static enum tw_result compute(struct cu *c, const struct plan_op *op, cudaStream_t s, struct tw_err *err)
{
	int dtype = op->u.compute.dtype;
	int64_t bytes = op->u.compute.bytes > 0 ? (int64_t)op->u.compute.bytes : 0;
	if (op->u.compute.kernel == PLAN_K_GEMM) {
		/* each of its shapes (a backward op's data grads and weight grads); row-major
		 * C(m x n) = A(m x k) B(k x n) is column-major C^T = B^T A^T */
		struct plan_gemm_part part[2];
		int np = plan_gemm_parts(op, part);
		/* a loop over local experts: one call per expert, each over its share of the batch
		 * (the same synthetic operands each time, the same work) */
		int64_t rep = plan_op_repeat(op);
		for (int q = 0; q < np; q++) {
			int64_t m = part[q].m, n = part[q].n, k = part[q].k, nb = part[q].batch;
			int64_t r = rep >= 2 && nb % rep == 0 ? rep : 1;
			for (int64_t i = 0; i < r; i++)
				TW_CHECK(gemm(c, s, dtype, n, m, k, nb / r, false, c->gb, n, k * n, c->ga,
					      k, m * k, c->gc, n, m * n, err));
		}
		return TW_OK;
	}
	if (op->u.compute.kernel == PLAN_K_ATTN) {
		int64_t bh = (op->u.compute.b > 0 ? op->u.compute.b : 1) *
			     (op->u.compute.heads > 0 ? op->u.compute.heads : 1);
		int64_t sq = op->u.compute.s_q, skv = op->u.compute.s_kv, d = op->u.compute.head_dim;
		int64_t dv = op->u.compute.head_dim_v > 0 ? op->u.compute.head_dim_v : d;
		/* GEMMs alternately QK^T and PV, their mean FLOPs each; a sliding window's band of
		 * keys is as wide, against its share, as the causal square against its half */
			double share;
		int64_t band = plan_attn_band(c->env->job, op, &share);
		double per = (double)bh * (double)sq * (double)skv * (double)(d + dv) * share;
		skv = band;
		long ngemm = per > 0 ? (long)(op->u.compute.flops / per + 0.5) : 2;
		if (ngemm < 2)
			ngemm = 2;
		int elt;
		cu_type(dtype, &elt);
		for (long g = 0; g < ngemm; g += 2) {
			/* S(sq x skv) = Q K^T: column-major S^T = K Q^T */
			TW_CHECK(gemm(c, s, dtype, skv, sq, d, bh, true, c->k, d, skv * d, c->q, d, sq * d,
				      c->s, skv, sq * skv, err));
			if (g == 0) {
				int rc = twin_k_softmax(c->s, elt, bh * sq, skv, sq, op->u.compute.causal, s);
				if (rc)
					return cuda_failed((cudaError_t)rc, "twin_k_softmax", err);
			}
			/* O(sq x dv) = P V: column-major O^T = V^T P^T */
			if (g + 1 < ngemm)
				TW_CHECK(gemm(c, s, dtype, dv, sq, skv, bh, false, c->v, dv, skv * dv, c->s,
					      skv, sq * skv, c->o, dv, sq * dv, err));
		}
		/* Megatron's fp32 softmax fallback: its extra passes over the scores, streamed */
		bytes = (int64_t)plan_torch_softmax_bytes(op);
	}
	/* an op that stands for several eager kernels streams its bytes in as many launches */
	int64_t launches = op->u.compute.kernel == PLAN_K_ATTN ? op->u.compute.extra_kernels
							       : 1 + op->u.compute.extra_kernels;
	launches *= plan_op_repeat(op);
	int64_t step = launches > 1 ? (bytes + launches - 1) / launches : bytes;
	if (step > EXEC_STREAM_CHUNK || step < 1)
		step = EXEC_STREAM_CHUNK;
	for (int64_t off = 0; off < bytes; off += step) {
		int64_t chunk = bytes - off < step ? bytes - off : step;
		int rc = twin_k_stream(c->ein, c->eout, chunk, s);
		if (rc)
			return cuda_failed((cudaError_t)rc, "twin_k_stream", err);
	}
	return TW_OK;
}

static ncclDataType_t nccl_type(int dtype, int *elt)
{
	switch (dtype) {
	case TW_FP32:
	case TW_TF32:
		*elt = TWIN_ELT_F32;
		return ncclFloat32;
	case TW_FP16:
		*elt = TWIN_ELT_F16;
		return ncclFloat16;
	case TW_BF16:
		*elt = TWIN_ELT_BF16;
		return ncclBfloat16;
	default: /* fp8 / int8: moved as bytes, summed as int8 (verification skips them) */
		*elt = TWIN_ELT_U8;
		return ncclInt8;
	}
}

static enum tw_result coll(struct cu *c, const struct plan_op *op, int si, bool pre, struct tw_err *err)
{
	const struct exec_env *env = c->env;
	cudaStream_t s = c->st[si];
	int g = op->u.coll.group, kind = op->u.coll.coll, elt;
	ncclDataType_t t = nccl_type(op->u.coll.dtype, &elt);
	int64_t n = env->group_size[g], idx = env->group_index[g], cnt = op->u.coll.count;
	int64_t seq = op->u.coll.seq;
	void *in = c->cin[si] ? c->cin[si] : c->cin[PLAN_STREAM_COMM];
	void *out = c->cout[si] ? c->cout[si] : c->cout[PLAN_STREAM_COMM];
	int64_t in_n = cnt, out_n = cnt;
	if (kind == PLAN_ALL_GATHER)
		out_n = cnt * n;
	else if (kind == PLAN_REDUCE_SCATTER)
		in_n = cnt * n;
	else if (kind == PLAN_ALL_TO_ALL)
		in_n = out_n = cnt * n;
	bool check = env->verify && elt != TWIN_ELT_U8;
	if (pre) { /* known input, before the timed region */
		if (check) {
			int rc = twin_k_fill(in, elt, in_n, kind == PLAN_BROADCAST ? 0 : idx, seq, s);
			if (!rc && kind == PLAN_BROADCAST && idx != 0)
				rc = cudaMemsetAsync(out, 0, (size_t)(out_n * tw_dtype_bytes(op->u.coll.dtype)), s);
			if (rc)
				return cuda_failed((cudaError_t)rc, "twin_k_fill", err);
		}
		return TW_OK;
	}
	ncclComm_t comm = c->group[g];
	if (!comm || n <= 1) {
		CU(cudaMemcpyAsync(out, in, (size_t)(out_n * tw_dtype_bytes(op->u.coll.dtype)),
				   cudaMemcpyDeviceToDevice, s));
	} else {
		switch (kind) {
		case PLAN_ALL_REDUCE:
			NC(ncclAllReduce(in, out, (size_t)cnt, t, ncclSum, comm, s), comm);
			break;
		case PLAN_ALL_GATHER:
			NC(ncclAllGather(in, out, (size_t)cnt, t, comm, s), comm);
			break;
		case PLAN_REDUCE_SCATTER:
			NC(ncclReduceScatter(in, out, (size_t)cnt, t, ncclSum, comm, s), comm);
			break;
		case PLAN_BROADCAST:
			NC(ncclBroadcast(idx == 0 ? in : out, out, (size_t)cnt, t, 0, comm, s), comm);
			break;
		case PLAN_REDUCE:
			NC(ncclReduce(in, out, (size_t)cnt, t, ncclSum, (int)op->u.coll.root, comm, s),
			   comm);
			break;
		default: { /* all-to-all as grouped send/recv (every NCCL version has them) */
			size_t chunk = (size_t)cnt * (size_t)tw_dtype_bytes(op->u.coll.dtype);
			NC(ncclGroupStart(), comm);
			for (int64_t p = 0; p < n; p++) {
				NC(ncclSend((char *)in + (size_t)p * chunk, (size_t)cnt, t, (int)p, comm, s), comm);
				NC(ncclRecv((char *)out + (size_t)p * chunk, (size_t)cnt, t, (int)p, comm, s), comm);
			}
			NC(ncclGroupEnd(), comm);
		}
		}
	}
	return TW_OK;
}

static enum tw_result coll_check(struct cu *c, const struct plan_op *op, int si, struct tw_err *err)
{
	const struct exec_env *env = c->env;
	int g = op->u.coll.group, kind = op->u.coll.coll, elt;
	nccl_type(op->u.coll.dtype, &elt);
	int64_t n = env->group_size[g], idx = env->group_index[g], cnt = op->u.coll.count;
	if (!env->verify || elt == TWIN_ELT_U8 || (kind == PLAN_REDUCE && idx != op->u.coll.root))
		return TW_OK; /* a reduce's result is the root's */
	int64_t out_n = kind == PLAN_ALL_GATHER || kind == PLAN_ALL_TO_ALL ? cnt * n : cnt;
	void *out = c->cout[si] ? c->cout[si] : c->cout[PLAN_STREAM_COMM];
	if (env->corrupt_op == (int64_t)op->id && out_n > 0)
		CU(cudaMemsetAsync(out, 0x7f, 1, c->st[si]));
	int rc = twin_k_check(out, elt, out_n, kind, n, idx, cnt, op->u.coll.seq, &c->bad[op->id], c->st[si]);
	if (rc)
		return cuda_failed((cudaError_t)rc, "twin_k_check", err);
	return TW_OK;
}

static enum tw_result p2p(struct cu *c, const struct plan_op *op, int si, bool pre, struct tw_err *err)
{
	const struct exec_env *env = c->env;
	cudaStream_t s = c->st[si];
	bool send = op->flags & PLAN_F_SEND;
	int64_t bytes = op->u.p2p.bytes, peer = op->u.p2p.peer;
	void *rbuf = c->p2p_recv[si == PLAN_STREAM_P2P ? 0 : 1];
	if (pre) {
		if (env->verify && send) {
			int rc = twin_k_fill(c->p2p_send, TWIN_ELT_U8, bytes, env->rank, op->u.p2p.seq, s);
			if (rc)
				return cuda_failed((cudaError_t)rc, "twin_k_fill", err);
		}
		return TW_OK;
	}
	if (!c->nccl || peer < 0 || peer >= env->nranks || peer == env->rank)
		return tw_errf(err, TW_ERR_INTERNAL, "p2p peer %lld is not another rank of %lld",
			       (long long)peer, (long long)env->nranks);
	ncclComm_t comm = si == PLAN_STREAM_P2P ? c->up : c->down;
	if (send)
		NC(ncclSend(c->p2p_send, (size_t)bytes, ncclInt8, (int)peer, comm, s), comm);
	else
		NC(ncclRecv(rbuf, (size_t)bytes, ncclInt8, (int)peer, comm, s), comm);
	return TW_OK;
}

/* The host thread waits for the GPU ops op depends on (through ALLOC/FREE, as wait_deps). */
static enum tw_result wait_deps_host(struct cu *c, const struct plan_op *op, int depth,
				     struct tw_err *err)
{
	const struct plan *p = c->env->plan;
	const uint32_t *d = plan_op_deps(p, op);
	for (uint32_t i = 0; i < op->ndeps; i++) {
		const struct plan_op *dep = &p->ops[d[i]];
		if (c->where[d[i]] >= 0) {
			atomic_store(c->env->waiting_op, (int64_t)d[i]);
			CU(cudaEventSynchronize(c->ev_end[d[i]]));
		} else if (depth < 8 && (dep->kind == PLAN_ALLOC || dep->kind == PLAN_FREE)) {
			TW_CHECK(wait_deps_host(c, dep, depth + 1, err));
		}
	}
	atomic_store(c->env->waiting_op, (int64_t)op->id);
	return TW_OK;
}

/* Host-side ops: CPU optimizer, NVMe copies. */
static enum tw_result host_op(struct cu *c, const struct plan_op *op, struct exec_span *span,
			      struct tw_err *err)
{
	TW_CHECK(wait_deps_host(c, op, 0, err));
	int64_t t0 = tw_now_ns();
	if (op->kind == PLAN_COMPUTE) {
		float *in = c->hin, *out = c->hout;
		int64_t bytes = (int64_t)(op->u.compute.bytes > 0 ? op->u.compute.bytes : 0);
		for (int64_t off = 0; off < bytes; off += EXEC_STREAM_CHUNK) {
			int64_t n = (bytes - off < EXEC_STREAM_CHUNK ? bytes - off : EXEC_STREAM_CHUNK) / 8;
			for (int64_t i = 0; i < n; i++)
				out[i] = in[i] * 0.999f + 0.001f;
		}
	} else {
		int64_t bytes = op->u.copy.bytes;
		if (c->nvme_fd < 0) {
			char path[] = "/tmp/twin-nvme-XXXXXX";
			c->nvme_fd = mkstemp(path);
			if (c->nvme_fd < 0)
				return tw_errf(err, TW_ERR_SYSTEM, "mkstemp(%s) failed", path);
			unlink(path);
		}
		ssize_t k = op->u.copy.dir == PLAN_NVME_WRITE
				    ? pwrite(c->nvme_fd, c->pin_out, (size_t)bytes, 0)
				    : pread(c->nvme_fd, c->pin_in, (size_t)bytes, 0);
		if (k < 0)
			return tw_errf(err, TW_ERR_SYSTEM, "%s failed",
				       op->u.copy.dir == PLAN_NVME_WRITE ? "pwrite" : "pread");
	}
	int64_t t1 = tw_now_ns();
	span[op->id].start_ns = t0 - c->env->t0_ns;
	span[op->id].end_ns = t1 - c->env->t0_ns;
	return TW_OK;
}

/* Make stream si wait for the GPU ops op depends on, looking through ALLOC/FREE (host-side,
 * no event) to their own dependencies. Host ops need nothing: they ran to completion after
 * synchronising on theirs. */
static enum tw_result wait_deps(struct cu *c, const struct plan_op *op, int si, int depth,
				struct tw_err *err)
{
	const struct plan *p = c->env->plan;
	const uint32_t *d = plan_op_deps(p, op);
	for (uint32_t i = 0; i < op->ndeps; i++) {
		int w = c->where[d[i]];
		const struct plan_op *dep = &p->ops[d[i]];
		if (w >= 0 && w != si)
			CU(cudaStreamWaitEvent(c->st[si], c->ev_end[d[i]], 0));
		else if (w < 0 && depth < 8 && (dep->kind == PLAN_ALLOC || dep->kind == PLAN_FREE))
			TW_CHECK(wait_deps(c, dep, si, depth + 1, err));
	}
	return TW_OK;
}

static enum tw_result wait_op(struct cu *c, uint32_t id, struct tw_err *err);

/* The host syncs the framework makes (the plan's flags; the simulator's engine reads the same):
 * a device-synced op (old DeepSpeed's ZeRO-3 fetch) waits for everything issued before it, and
 * it, a stream-synced op (hpZ's secondary copy) and a micro-batch's blocking input copy are
 * waited for once issued. */
static bool host_waits_for(const struct plan_op *op)
{
	return (op->flags & (PLAN_F_DEVSYNC | PLAN_F_HOSTWAIT)) ||
	       ((op->flags & PLAN_F_BATCH) && op->kind == PLAN_COPY);
}

static enum tw_result device_sync(struct cu *c, struct tw_err *err)
{
	for (int i = 0; i < NUM_ST; i++)
		if (c->last_on[i] >= 0)
			TW_CHECK(wait_op(c, (uint32_t)c->last_on[i], err));
	return TW_OK;
}

static enum tw_result cuda_issue(void *self, const struct plan_op *op, struct exec_span *span,
				 struct tw_err *err)
{
	struct cu *c = self;
	if (op->flags & PLAN_F_DEVSYNC)
		TW_CHECK(device_sync(c, err));
	bool host = (op->kind == PLAN_COMPUTE && op->stream == PLAN_STREAM_HOST) ||
		    (op->kind == PLAN_COPY &&
		     (op->u.copy.dir == PLAN_NVME_READ || op->u.copy.dir == PLAN_NVME_WRITE));
	nvtxRangePushA(op->name ? op->name : plan_kind_name(op->kind));
	enum tw_result rc;
	if (host) {
		rc = host_op(c, op, span, err);
		nvtxRangePop();
		return rc;
	}
	int si = stream_of(c, op);
	cudaStream_t s = c->st[si];
	rc = wait_deps(c, op, si, 0, err);
	if (rc != TW_OK) {
		nvtxRangePop();
		return rc;
	}
	if (op->kind == PLAN_COLL)
		rc = coll(c, op, si, true, err);
	else if (op->kind == PLAN_P2P)
		rc = p2p(c, op, si, true, err);
	else
		rc = TW_OK;
	if (c->cupti)
		twin_cupti_push((uint64_t)op->id + 1);
	cudaError_t e = rc == TW_OK ? cudaEventRecord(c->ev_start[op->id], s) : cudaSuccess;
	if (e != cudaSuccess)
		rc = cuda_failed(e, "cudaEventRecord", err);
	if (rc == TW_OK) {
		switch (op->kind) {
		case PLAN_COMPUTE:
			rc = compute(c, op, s, err);
			break;
		case PLAN_COLL:
			rc = coll(c, op, si, false, err);
			break;
		case PLAN_P2P:
			rc = p2p(c, op, si, false, err);
			break;
		case PLAN_COPY: {
			bool h2d = op->u.copy.dir == PLAN_H2D;
			e = cudaMemcpyAsync(h2d ? c->dev_in : c->pin_out, h2d ? c->pin_in : c->dev_out,
					    (size_t)op->u.copy.bytes,
					    h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s);
			if (e != cudaSuccess)
				rc = cuda_failed(e, "cudaMemcpyAsync", err);
			break;
		}
		default:
			break;
		}
	}
	if (rc == TW_OK && (e = cudaEventRecord(c->ev_end[op->id], s)) != cudaSuccess)
		rc = cuda_failed(e, "cudaEventRecord", err);
	if (c->cupti)
		twin_cupti_pop();
	nvtxRangePop();
	if (rc != TW_OK)
		return rc;
	c->where[op->id] = si;
	c->last_on[si] = op->id;
	if (op->kind == PLAN_COLL)
		TW_CHECK(coll_check(c, op, si, err));
	else if (op->kind == PLAN_P2P && !(op->flags & PLAN_F_SEND) && c->env->verify) {
		if (c->env->corrupt_op == (int64_t)op->id && op->u.p2p.bytes > 0)
			CU(cudaMemsetAsync(c->p2p_recv[si == PLAN_STREAM_P2P ? 0 : 1], 0x7f, 1, s));
		int r = twin_k_check_bytes(c->p2p_recv[si == PLAN_STREAM_P2P ? 0 : 1], op->u.p2p.bytes,
					   op->u.p2p.peer, op->u.p2p.seq, &c->bad[op->id], s);
		if (r)
			return cuda_failed((cudaError_t)r, "twin_k_check_bytes", err);
	}
	if (host_waits_for(op))
		TW_CHECK(wait_op(c, op->id, err));
	return TW_OK;
}

/* Wait for one op's end event, watching NCCL for a failed peer so that no rank hangs on it. */
static enum tw_result wait_op(struct cu *c, uint32_t id, struct tw_err *err)
{
	atomic_store(c->env->waiting_op, (int64_t)id);
	for (long polls = 0;; polls++) {
		cudaError_t e = cudaEventQuery(c->ev_end[id]);
		if (e == cudaSuccess)
			return TW_OK;
		if (e != cudaErrorNotReady)
			return cuda_failed(e, "cudaEventQuery", err);
		if (c->nccl && polls % 64 == 63) {
			ncclComm_t all[JOB_NUM_GROUPS + 3];
			int k = 0;
			for (int g = 0; g < JOB_NUM_GROUPS; g++)
				if (c->group[g])
					all[k++] = c->group[g];
			all[k++] = c->world, all[k++] = c->up, all[k++] = c->down;
			for (int i = 0; i < k; i++) {
				ncclResult_t async = ncclSuccess;
				ncclCommGetAsyncError(all[i], &async);
				if (async != ncclSuccess && async != ncclInProgress)
					return tw_errf(err, TW_ERR_NCCL, "ncclCommGetAsyncError: %s",
						       ncclGetErrorString(async));
			}
		}
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
}

static enum tw_result cuda_step_end(void *self, struct exec_span *span, struct tw_err *err)
{
	struct cu *c = self;
	const struct plan *p = c->env->plan;
	for (size_t i = 0; i < p->nops; i++)
		if (c->where[i] >= 0)
			TW_CHECK(wait_op(c, (uint32_t)i, err));
	CU(cudaDeviceSynchronize());
	atomic_store(c->env->waiting_op, (int64_t)-1);
	if (c->env->verify && p->nops) {
		CU(cudaMemcpy(c->bad_host, c->bad, p->nops * sizeof(*c->bad), cudaMemcpyDeviceToHost));
		for (size_t i = 0; i < p->nops; i++) {
			const struct plan_op *op = &p->ops[i];
			if (c->where[i] < 0 || (op->kind != PLAN_COLL && op->kind != PLAN_P2P))
				continue;
			if (op->kind == PLAN_P2P && (op->flags & PLAN_F_SEND))
				continue;
			if (op->kind == PLAN_COLL && op->u.coll.coll == PLAN_REDUCE &&
			    c->env->group_index[op->u.coll.group] != op->u.coll.root)
				continue; /* not checked: a reduce's result is the root's */
			if (c->bad_host[i] != ~0ULL) {
				atomic_store(c->env->waiting_op, (int64_t)i);
				return tw_errf(err, TW_ERR_INTERNAL, "wrong result at element %llu",
					       c->bad_host[i]);
			}
			(*c->env->verified)++;
		}
	}
	for (size_t i = 0; i < p->nops; i++) {
		if (c->where[i] < 0)
			continue;
		float ms0 = 0, ms1 = 0;
		CU(cudaEventElapsedTime(&ms0, c->base, c->ev_start[i]));
		CU(cudaEventElapsedTime(&ms1, c->base, c->ev_end[i]));
		span[i].start_ns = c->base_host_ns + (int64_t)(ms0 * 1e6);
		span[i].end_ns = c->base_host_ns + (int64_t)(ms1 * 1e6);
	}
	if (c->cupti) {
		struct twin_cupti_stats st;
		twin_cupti_collect(c->cs, c->ce, p->nops, &st);
		for (size_t i = 0; i < p->nops; i++)
			if (c->where[i] >= 0 && c->cs[i] >= 0) {
				span[i].start_ns = c->base_host_ns + (c->cs[i] - c->base_cupti_ns);
				span[i].end_ns = c->base_host_ns + (c->ce[i] - c->base_cupti_ns);
			}
		if (st.dropped)
			tw_log(TW_LOG_WARN, "rank %lld: CUPTI dropped %lld records",
			       (long long)c->env->rank, (long long)st.dropped);
	}
	return TW_OK;
}

static const struct exec_backend exec_backend_cuda = {
	.name = "cuda",
	.probe = cuda_probe,
	.open = cuda_open,
	.step_begin = cuda_step_begin,
	.alloc = cuda_alloc,
	.release = cuda_release,
	.issue = cuda_issue,
	.step_end = cuda_step_end,
	.device_used = cuda_device_used,
	.scratch_bytes = cuda_scratch_bytes,
	.close = cuda_close,
};

/* The library's one exported symbol (exec/backend.h): everything else in it is hidden. */
__attribute__((visibility("default"))) const struct exec_cuda_module *twin_cuda_module(void)
{
	static const struct exec_cuda_module m = EXEC_CUDA_MODULE_INIT(&exec_backend_cuda,
								       calib_cuda_measure);
	return &m;
}
