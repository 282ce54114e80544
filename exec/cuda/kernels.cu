// kernels — the few device kernels the cuda backend needs that no library provides: a
// memory-bound kernel that streams the plan's bytes, the row softmax of unfused attention, and
// the fill / check of known collective data. C launchers (kernels.h) so that cuda.c stays C.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels.h"

// Read one float per element, write one: bytes/2 read, bytes/2 written (float4 wide).
__global__ void k_stream(const float4 *in, float4 *out, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float4 v = in[i];
		out[i] = make_float4(v.x * 0.999f + 0.001f, v.y * 0.999f + 0.001f, v.z * 0.999f + 0.001f,
				     v.w * 0.999f + 0.001f);
	}
}

extern "C" int twin_k_stream(const void *in, void *out, int64_t bytes, cudaStream_t s)
{
	int64_t n = bytes / 32; // float4 read + float4 written
	if (n <= 0)
		return cudaSuccess;
	int64_t blocks = (n + 255) / 256;
	if (blocks > 65535 * 8)
		blocks = 65535 * 8;
	k_stream<<<(unsigned)blocks, 256, 0, s>>>((const float4 *)in, (float4 *)out, n);
	return cudaGetLastError();
}

template <typename T> __device__ float to_f(T x) { return (float)x; }
template <> __device__ float to_f<__half>(__half x) { return __half2float(x); }
template <> __device__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ T from_f(float x) { return (T)x; }
template <> __device__ __half from_f<__half>(float x) { return __float2half(x); }
template <> __device__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

// One block per row; causal rows see the first (row % sq) + 1 + (cols - sq) columns.
template <typename T>
__global__ void k_softmax(T *s, int64_t rows, int64_t cols, int64_t sq, int causal)
{
	__shared__ float red[32];
	int64_t r = blockIdx.x;
	if (r >= rows)
		return;
	T *x = s + r * cols;
	int64_t lim = causal ? (r % sq) + 1 + (cols - sq) : cols;
	if (lim > cols)
		lim = cols;
	if (lim < 1)
		lim = 1;
	float mx = -INFINITY;
	for (int64_t j = threadIdx.x; j < lim; j += blockDim.x)
		mx = fmaxf(mx, to_f(x[j]));
	for (int o = 16; o > 0; o /= 2)
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x / 32] = mx;
	__syncthreads();
	if (threadIdx.x < 32) {
		float v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : -INFINITY;
		for (int o = 16; o > 0; o /= 2)
			v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
		if (threadIdx.x == 0)
			red[0] = v;
	}
	__syncthreads();
	mx = red[0];
	__syncthreads();
	float sum = 0;
	for (int64_t j = threadIdx.x; j < lim; j += blockDim.x)
		sum += __expf(to_f(x[j]) - mx);
	for (int o = 16; o > 0; o /= 2)
		sum += __shfl_xor_sync(0xffffffffu, sum, o);
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x / 32] = sum;
	__syncthreads();
	if (threadIdx.x < 32) {
		float v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.0f;
		for (int o = 16; o > 0; o /= 2)
			v += __shfl_xor_sync(0xffffffffu, v, o);
		if (threadIdx.x == 0)
			red[0] = v;
	}
	__syncthreads();
	float inv = 1.0f / red[0];
	for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
		x[j] = from_f<T>(j < lim ? __expf(to_f(x[j]) - mx) * inv : 0.0f);
}

extern "C" int twin_k_softmax(void *s, int elt, int64_t rows, int64_t cols, int64_t sq, int causal,
			      cudaStream_t st)
{
	if (rows <= 0 || cols <= 0)
		return cudaSuccess;
	if (rows > 2147483647LL)
		return cudaErrorInvalidValue;
	dim3 grid((unsigned)rows);
	switch (elt) {
	case TWIN_ELT_F32: k_softmax<float><<<grid, 256, 0, st>>>((float *)s, rows, cols, sq, causal); break;
	case TWIN_ELT_F16: k_softmax<__half><<<grid, 256, 0, st>>>((__half *)s, rows, cols, sq, causal); break;
	default: k_softmax<__nv_bfloat16><<<grid, 256, 0, st>>>((__nv_bfloat16 *)s, rows, cols, sq, causal);
	}
	return cudaGetLastError();
}

// The known data of backend.h's exec_pattern, as values of the element type.
__device__ unsigned pattern(int64_t g, int64_t i, int64_t seq)
{
	return (unsigned)((g * 7 + i * 3 + seq) & 3);
}

__device__ float expect(int coll, int64_t n, int64_t idx, int64_t c, int64_t i, int64_t seq)
{
	unsigned sum = 0;
	switch (coll) {
	case TWIN_COLL_ALL_REDUCE:
	case TWIN_COLL_REDUCE: // at the root
		for (int64_t g = 0; g < n; g++)
			sum += pattern(g, i, seq);
		return (float)sum;
	case TWIN_COLL_REDUCE_SCATTER:
		for (int64_t g = 0; g < n; g++)
			sum += pattern(g, idx * c + i, seq);
		return (float)sum;
	case TWIN_COLL_ALL_GATHER:
		return (float)pattern(i / c, i % c, seq);
	case TWIN_COLL_BROADCAST:
		return (float)pattern(0, i, seq);
	default: // all-to-all
		return (float)pattern(i / c, idx * c + i % c, seq);
	}
}

template <typename T> __global__ void k_fill(T *b, int64_t n, int64_t g, int64_t seq)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		b[i] = from_f<T>((float)pattern(g, i, seq));
}

__global__ void k_fill_u8(unsigned char *b, int64_t n, int64_t g, int64_t seq)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		b[i] = (unsigned char)pattern(g, i, seq);
}

template <typename T>
__global__ void k_check(const T *b, int64_t n, int coll, int64_t gn, int64_t idx, int64_t c, int64_t seq,
			unsigned long long *bad)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		if (to_f(b[i]) != expect(coll, gn, idx, c, i, seq))
			atomicMin(bad, (unsigned long long)i);
}

__global__ void k_check_u8(const unsigned char *b, int64_t n, int64_t g, int64_t seq, unsigned long long *bad)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		if (b[i] != (unsigned char)pattern(g, i, seq))
			atomicMin(bad, (unsigned long long)i);
}

static unsigned grid_for(int64_t n)
{
	int64_t b = (n + 255) / 256;
	return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

extern "C" int twin_k_fill(void *b, int elt, int64_t n, int64_t g, int64_t seq, cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	switch (elt) {
	case TWIN_ELT_F32: k_fill<float><<<grid_for(n), 256, 0, s>>>((float *)b, n, g, seq); break;
	case TWIN_ELT_F16: k_fill<__half><<<grid_for(n), 256, 0, s>>>((__half *)b, n, g, seq); break;
	case TWIN_ELT_BF16: k_fill<__nv_bfloat16><<<grid_for(n), 256, 0, s>>>((__nv_bfloat16 *)b, n, g, seq); break;
	default: k_fill_u8<<<grid_for(n), 256, 0, s>>>((unsigned char *)b, n, g, seq);
	}
	return cudaGetLastError();
}

extern "C" int twin_k_check(const void *b, int elt, int64_t n, int coll, int64_t gn, int64_t idx,
			    int64_t c, int64_t seq, unsigned long long *bad, cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	switch (elt) {
	case TWIN_ELT_F32: k_check<float><<<grid_for(n), 256, 0, s>>>((const float *)b, n, coll, gn, idx, c, seq, bad); break;
	case TWIN_ELT_F16: k_check<__half><<<grid_for(n), 256, 0, s>>>((const __half *)b, n, coll, gn, idx, c, seq, bad); break;
	case TWIN_ELT_BF16: k_check<__nv_bfloat16><<<grid_for(n), 256, 0, s>>>((const __nv_bfloat16 *)b, n, coll, gn, idx, c, seq, bad); break;
	default: return cudaErrorInvalidValue;
	}
	return cudaGetLastError();
}

extern "C" int twin_k_check_bytes(const void *b, int64_t n, int64_t g, int64_t seq,
				  unsigned long long *bad, cudaStream_t s)
{
	if (n <= 0)
		return cudaSuccess;
	k_check_u8<<<grid_for(n), 256, 0, s>>>((const unsigned char *)b, n, g, seq, bad);
	return cudaGetLastError();
}
