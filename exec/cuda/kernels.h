/* kernels — C launchers of the cuda backend's own kernels (exec/cuda/kernels.cu). Each returns a
 * cudaError_t as int (0: launched). Element types: */
#ifndef TW_EXEC_CUDA_KERNELS_H
#define TW_EXEC_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>

enum { TWIN_ELT_F32 = 0, TWIN_ELT_F16, TWIN_ELT_BF16, TWIN_ELT_U8 };
/* the same numbering as enum plan_coll */
enum { TWIN_COLL_ALL_GATHER = 0, TWIN_COLL_REDUCE_SCATTER, TWIN_COLL_ALL_REDUCE, TWIN_COLL_BROADCAST,
       TWIN_COLL_ALL_TO_ALL, TWIN_COLL_REDUCE };

#ifdef __cplusplus
extern "C" {
#endif
/* memory-bound kernel: reads bytes/2 from in, writes bytes/2 to out */
int twin_k_stream(const void *in, void *out, int64_t bytes, cudaStream_t s);
/* row softmax over rows x cols (row-major) in place, causal mask for square-ish blocks */
int twin_k_softmax(void *s, int elt, int64_t rows, int64_t cols, int64_t sq, int causal, cudaStream_t st);
/* known data: element i = exec_pattern(g, i, seq) */
int twin_k_fill(void *b, int elt, int64_t n, int64_t g, int64_t seq, cudaStream_t s);
/* lowest wrong index into *bad (atomicMin; preset to ~0) */
int twin_k_check(const void *b, int elt, int64_t n, int coll, int64_t gn, int64_t idx, int64_t c,
		 int64_t seq, unsigned long long *bad, cudaStream_t s);
int twin_k_check_bytes(const void *b, int64_t n, int64_t g, int64_t seq, unsigned long long *bad,
		       cudaStream_t s);
#ifdef __cplusplus
}
#endif

#endif
