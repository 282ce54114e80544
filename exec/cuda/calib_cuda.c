/* calib_cuda — `twin calibrate --backend cuda` (docs/calibrate.md), CUDA builds only: a cuBLAS
 * GEMM sweep per dtype on GPU 0 (fp32, tf32, bf16, fp16), device-to-device copy bandwidth,
 * pinned H2D/D2H bandwidth, and NCCL all-reduce bus bandwidth over every local GPU (one
 * process, ncclCommInitAll). Times come from CUDA events (wall clock for NCCL across devices). */
#include "../exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

static enum tw_result cu_fail(cudaError_t e, const char *call, struct tw_err *err)
{
	return tw_errf(err, TW_ERR_CUDA, "calibrate: %s: %s", call, cudaGetErrorString(e));
}
#define CU(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			rc = cu_fail(e_, #call, err);                                              \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)
#define BL(call)                                                                                   \
	do {                                                                                       \
		cublasStatus_t b_ = (call);                                                        \
		if (b_ != CUBLAS_STATUS_SUCCESS) {                                                 \
			rc = tw_errf(err, TW_ERR_CUDA, "calibrate: %s: %s", #call,                 \
				     cublasGetStatusString(b_));                                   \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)
#define NC(call)                                                                                   \
	do {                                                                                       \
		ncclResult_t n_ = (call);                                                          \
		if (n_ != ncclSuccess) {                                                           \
			rc = tw_errf(err, TW_ERR_NCCL, "calibrate: %s: %s", #call,                 \
				     ncclGetErrorString(n_));                                      \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct gemm_kind {
	enum tw_dtype dt;
	cudaDataType_t type;
	cublasComputeType_t compute;
};

/* best of `reps` n x n x n GEMMs (after one warm-up), TFLOP/s */
static enum tw_result gemm_rate(cublasHandle_t h, const struct gemm_kind *k, int n, int reps,
				void *a, void *b, void *c, cudaEvent_t e0, cudaEvent_t e1,
				double *tflops, struct tw_err *err)
{
	enum tw_result rc = TW_OK;
	float alpha = 1.0f, beta = 0.0f;
	float best_ms = 1e30f;
	for (int i = 0; i <= reps; i++) {
		CU(cudaEventRecord(e0, 0));
		BL(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, k->type, n, b, k->type,
				n, &beta, c, k->type, n, k->compute, CUBLAS_GEMM_DEFAULT));
		CU(cudaEventRecord(e1, 0));
		CU(cudaEventSynchronize(e1));
		float ms = 0;
		CU(cudaEventElapsedTime(&ms, e0, e1));
		if (i > 0 && ms < best_ms)
			best_ms = ms;
	}
	*tflops = 2.0 * (double)n * (double)n * (double)n / ((double)best_ms * 1e-3) * 1e-12;
out:
	return rc;
}

static enum tw_result copy_rate(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
				int reps, cudaEvent_t e0, cudaEvent_t e1, double *GBps,
				struct tw_err *err)
{
	enum tw_result rc = TW_OK;
	float best_ms = 1e30f;
	for (int i = 0; i <= reps; i++) {
		CU(cudaEventRecord(e0, 0));
		CU(cudaMemcpyAsync(dst, src, bytes, kind, 0));
		CU(cudaEventRecord(e1, 0));
		CU(cudaEventSynchronize(e1));
		float ms = 0;
		CU(cudaEventElapsedTime(&ms, e0, e1));
		if (i > 0 && ms < best_ms)
			best_ms = ms;
	}
	*GBps = (double)bytes / ((double)best_ms * 1e-3) * 1e-9;
out:
	return rc;
}

static enum tw_result nccl_busbw(int ndev, size_t bytes, int reps, struct calib_result *r,
				 struct tw_err *err)
{
	enum tw_result rc = TW_OK;
	ncclComm_t *comms = TW_NEW_ARRAY(ncclComm_t, (size_t)ndev);
	float **buf = TW_NEW_ARRAY(float *, (size_t)ndev);
	cudaStream_t *st = TW_NEW_ARRAY(cudaStream_t, (size_t)ndev);
	bool inited = false;
	size_t count = bytes / sizeof(float);
	for (int d = 0; d < ndev; d++) {
		CU(cudaSetDevice(d));
		CU(cudaMalloc((void **)&buf[d], bytes));
		CU(cudaMemset(buf[d], 0, bytes));
		CU(cudaStreamCreate(&st[d]));
	}
	NC(ncclCommInitAll(comms, ndev, NULL));
	inited = true;
	double best = 1e30;
	for (int i = 0; i <= reps; i++) {
		for (int d = 0; d < ndev; d++) {
			CU(cudaSetDevice(d));
			CU(cudaDeviceSynchronize());
		}
		double t0 = now_s();
		NC(ncclGroupStart());
		for (int d = 0; d < ndev; d++)
			NC(ncclAllReduce(buf[d], buf[d], count, ncclFloat, ncclSum, comms[d], st[d]));
		NC(ncclGroupEnd());
		for (int d = 0; d < ndev; d++) {
			CU(cudaSetDevice(d));
			CU(cudaStreamSynchronize(st[d]));
		}
		double dt = now_s() - t0;
		if (i > 0 && dt < best) /* i == 0: warm-up (connection set-up) */
			best = dt;
	}
	r->allreduce_bytes = (double)bytes;
	r->allreduce_busbw_GBps = (double)bytes / best * 1e-9 * 2.0 * (ndev - 1) / ndev;
out:
	if (inited)
		for (int d = 0; d < ndev; d++)
			ncclCommDestroy(comms[d]);
	for (int d = 0; d < ndev; d++) {
		cudaSetDevice(d);
		if (buf[d])
			cudaFree(buf[d]);
		if (st[d])
			cudaStreamDestroy(st[d]);
	}
	cudaSetDevice(0);
	free(comms);
	free(buf);
	free(st);
	return rc;
}

enum tw_result calib_cuda_measure(const struct calib_options *o, struct calib_result *r,
				  struct tw_err *err)
{
	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev == 0)
		return tw_errf(err, TW_ERR_UNSUPPORTED,
			       "calibrate --backend cuda: no CUDA GPU or driver on this machine "
			       "(cudaGetDeviceCount: %s); --backend host measures CPU ranks",
			       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
	r->ranks = ndev;
	r->report = true;
	enum tw_result rc = TW_OK;
	cublasHandle_t h = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	void *a = NULL, *b = NULL, *c = NULL, *pin = NULL;
	static const int sizes_quick[] = { 256, 512, 1024, 2048, 4096 };
	static const int sizes_full[] = { 256, 512, 1024, 2048, 4096, 8192 };
	const int *sizes = o->quick ? sizes_quick : sizes_full;
	int ns = o->quick ? 5 : 6, reps = o->quick ? 3 : 10;
	int nmax = sizes[ns - 1];
	size_t mat = (size_t)nmax * (size_t)nmax * 4; /* fp32 is the widest operand */

	CU(cudaSetDevice(0));
	CU(cudaEventCreate(&e0));
	CU(cudaEventCreate(&e1));
	BL(cublasCreate(&h));
	CU(cudaMalloc(&a, mat));
	CU(cudaMalloc(&b, mat));
	CU(cudaMalloc(&c, mat));
	CU(cudaMemset(a, 0, mat)); /* zeros: no inf/nan in any dtype */
	CU(cudaMemset(b, 0, mat));

	const struct gemm_kind kinds[] = {
		{ TW_FP32, CUDA_R_32F, CUBLAS_COMPUTE_32F },
		{ TW_TF32, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32 },
		{ TW_FP16, CUDA_R_16F, CUBLAS_COMPUTE_32F },
		{ TW_BF16, CUDA_R_16BF, CUBLAS_COMPUTE_32F },
	};
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		bool table = kinds[k].dt == TW_BF16; /* eff.gemm comes from the bf16 sweep */
		for (int i = 0; i < ns; i++) {
			double t = 0;
			rc = gemm_rate(h, &kinds[k], sizes[i], reps, a, b, c, e0, e1, &t, err);
			if (rc != TW_OK)
				goto out;
			if (t > r->peak_tflops[kinds[k].dt])
				r->peak_tflops[kinds[k].dt] = t;
			if (table) {
				r->gemm[i].n = sizes[i];
				r->gemm[i].flops = 2.0 * (double)sizes[i] * sizes[i] * sizes[i];
				r->gemm[i].tflops = t;
			}
		}
	}
	r->gemm_dtype = TW_BF16;
	r->npoints = ns;

	/* device memory: a copy reads and writes every byte */
	{
		size_t bytes = mat;
		double GBps = 0;
		rc = copy_rate(b, a, bytes, cudaMemcpyDeviceToDevice, reps, e0, e1, &GBps, err);
		if (rc != TW_OK)
			goto out;
		r->mem_GBps = 2 * GBps;
	}
	/* pinned host copies */
	{
		size_t bytes = (size_t)(o->quick ? 64 : 256) * TW_MIB;
		if (bytes > mat)
			bytes = mat;
		CU(cudaHostAlloc(&pin, bytes, cudaHostAllocDefault));
		memset(pin, 0, bytes);
		rc = copy_rate(a, pin, bytes, cudaMemcpyHostToDevice, reps, e0, e1, &r->h2d_GBps, err);
		if (rc == TW_OK)
			rc = copy_rate(pin, a, bytes, cudaMemcpyDeviceToHost, reps, e0, e1, &r->d2h_GBps, err);
		if (rc != TW_OK)
			goto out;
	}
	if (ndev >= 2)
		rc = nccl_busbw(ndev, (size_t)(o->quick ? 64 : 512) * TW_MIB, reps, r, err);
out:
	if (pin)
		cudaFreeHost(pin);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	if (h)
		cublasDestroy(h);
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	return rc;
}
