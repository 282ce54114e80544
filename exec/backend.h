/* backend — the vtable the executor's walker (exec/exec.c) drives, one per kind of hardware:
 * "host" (exec/host.c: MPI ranks, OpenBLAS, malloc) and "cuda" (exec/cuda/: cuBLAS, NCCL, CUDA
 * events, CUPTI). Internal to exec/.
 *
 * The walker goes through the plan in its op order, once per step. It does the memory
 * accounting and the tracing; a backend only performs ops and says when they ran. Times are ns
 * on CLOCK_MONOTONIC minus env->t0_ns (the end of the start-up barrier, common to all ranks of
 * one host). */
#ifndef TW_EXEC_BACKEND_H
#define TW_EXEC_BACKEND_H

#include <stdatomic.h>

#include "exec.h"

/* Operand and staging buffers the backend keeps outside the plan's ALLOCs, sized by the largest
 * op of each kind in the plan (exec_scratch_of). Elements are counted, bytes where stated. */
struct exec_scratch {
	int64_t gemm_a, gemm_b, gemm_c;  /* elements of batch x m x k, batch x k x n, batch x m x n */
	int64_t attn_qkv;                /* elements of one of q, k, v, o: b x heads x s x head_dim */
	int64_t attn_scores;             /* elements of b x heads x s_q x s_kv */
	int64_t elem_bytes;              /* largest memory-bound kernel: bytes read + written */
	int64_t host_bytes;              /* largest host-stream op (CPU optimizer): bytes */
	int64_t coll_in, coll_out;       /* bytes of the largest collective's input / output */
	int64_t p2p_bytes;
	int64_t copy_bytes;
};
void exec_scratch_of(const struct plan *p, const struct job *j, struct exec_scratch *out);

/* Memory-bound kernels stream their bytes through a buffer of at most this many bytes (read +
 * written), in passes: the HBM/DRAM traffic is the plan's, the footprint is bounded (an
 * optimizer step over all states would otherwise double the memory). 512 MiB is far beyond
 * any cache. */
#define EXEC_STREAM_CHUNK (512LL * 1024 * 1024)

/* One op's measured interval; start_ns < 0: not measured. */
struct exec_span {
	int64_t start_ns, end_ns;
};

struct exec_env {
	const struct job *job;
	const struct plan *plan;
	int64_t rank, nranks;
	bool verify;
	int64_t t0_ns;
	struct exec_scratch scratch;
	/* MPI communicators (pointers to MPI_Comm), NULL without MPI; group[g] is NULL when the
	 * group has one member. Members are in ascending rank order (job_group_members). */
	const void *mpi_world;
	const void *mpi_group[JOB_NUM_GROUPS];
	int64_t group_size[JOB_NUM_GROUPS], group_index[JOB_NUM_GROUPS];
	/* the op this rank is waiting on, for the --timeout watchdog (-1: none) */
	_Atomic int64_t *waiting_op;
	/* collectives and p2p checked so far (verify) */
	int64_t *verified;
	/* fault injection: the op whose received data the backend alters before checking, -1 */
	int64_t corrupt_op;
};

struct exec_backend {
	const char *name;
	/* Is the hardware there? Before anything is planned or allocated (no GPU: TW_ERR_UNSUPPORTED
	 * with one line that says so and names --backend host). */
	enum tw_result (*probe)(const struct exec_env *env, struct tw_err *err);
	enum tw_result (*open)(const struct exec_env *env, void **self, struct tw_err *err);
	enum tw_result (*step_begin)(void *self, int step, struct tw_err *err);
	/* ALLOC: a real allocation of op->u.mem.bytes on op->u.mem.dev. */
	enum tw_result (*alloc)(void *self, const struct plan_op *op, void **ptr, struct tw_err *err);
	/* FREE (ordered after the ops the plan makes it depend on). */
	enum tw_result (*release)(void *self, const struct plan_op *op, void *ptr, struct tw_err *err);
	/* COMPUTE, COLL, P2P, COPY. Synchronous backends fill span[op->id] here; an op left in
	 * flight (host: a receive posted ahead) gets its end when an op that depends on it, or
	 * step_end, waits for it. The walker traces an op once its span is whole. */
	enum tw_result (*issue)(void *self, const struct plan_op *op, struct exec_span *span,
				struct tw_err *err);
	/* Wait for everything issued in the step; fill the spans not filled yet. */
	enum tw_result (*step_end)(void *self, struct exec_span *span, struct tw_err *err);
	/* device bytes in use now as the driver sees them, -1: not known */
	int64_t (*device_used)(void *self);
	int64_t (*scratch_bytes)(void *self);
	void (*close)(void *self);
};

extern const struct exec_backend exec_backend_host;

/* The cuda backend and `calibrate --backend cuda` live in a shared object, libtwin_cuda.so
 * (exec/cuda/, built only where the CUDA toolkit is), so that twin itself links no CUDA library:
 * every other command starts without loading cuBLAS, NCCL and CUPTI, and twin runs on machines
 * that lack them. exec_cuda_load dlopens it when the cuda backend is asked for. The library's
 * one exported symbol, EXEC_CUDA_ENTRY, returns this table; it calls back into twin for the core
 * functions (tw_errf, tw_log, ...), which the twin binary exports for it (Makefile). */
#define EXEC_CUDA_LIB "libtwin_cuda.so"
#define EXEC_CUDA_ENTRY "twin_cuda_module"
#define EXEC_CUDA_ENV "TWIN_CUDA_BACKEND" /* overrides where the library is */
#define EXEC_CUDA_ABI 2                   /* bump when struct exec_cuda_module changes */
struct exec_cuda_module {
	int abi;                          /* EXEC_CUDA_ABI, first so that it can always be read */
	/* sizes of what twin and the library share, as the library saw them: a library left from
	 * another build of twin is refused rather than run */
	size_t env_bytes, backend_bytes, plan_op_bytes, calib_bytes, job_bytes;
	const struct exec_backend *backend;
	enum tw_result (*calib_measure)(const struct calib_options *o, struct calib_result *r,
					struct tw_err *err);
};
typedef const struct exec_cuda_module *(*exec_cuda_entry_fn)(void);
const struct exec_cuda_module *twin_cuda_module(void); /* defined in the library only */
#define EXEC_CUDA_MODULE_INIT(backend_, calib_)                                                   \
	{ .abi = EXEC_CUDA_ABI, .env_bytes = sizeof(struct exec_env),                              \
	  .backend_bytes = sizeof(struct exec_backend), .plan_op_bytes = sizeof(struct plan_op),   \
	  .calib_bytes = sizeof(struct calib_result), .job_bytes = sizeof(struct job),               \
	  .backend = (backend_), .calib_measure = (calib_) }

/* Where the library is: $TWIN_CUDA_BACKEND, else libtwin_cuda.so in the directory of the
 * running binary (/proc/self/exe; make puts both in build/). */
enum tw_result exec_cuda_path(char *buf, size_t len, struct tw_err *err);
/* dlopen + dlsym + the ABI check of the library at path (no driver check). The library stays
 * loaded for the life of the process (CUDA libraries do not support being unloaded). */
enum tw_result exec_cuda_open(const char *path, const struct exec_cuda_module **m,
			      struct tw_err *err);
/* Find the library, check for the CUDA driver (libcuda.so.1: without it there is no GPU, and
 * loading cuBLAS and NCCL only to find that out costs ~0.1 s), open it. Failures are one line,
 * TW_ERR_UNSUPPORTED, "<prefix><what went wrong>; <hint>". */
enum tw_result exec_cuda_load(const char *prefix, const char *hint,
			      const struct exec_cuda_module **m, struct tw_err *err);

/* Known data for verified collectives: element i of the buffer member `g` of the group
 * contributes to collective `seq`. Small values, so that sums stay exact in every dtype
 * (bf16 holds integers up to 256 exactly; sums of up to 64 ranks of values <= 3 stay below). */
static inline unsigned exec_pattern(int64_t g, int64_t i, int64_t seq)
{
	return (unsigned)((g * 7 + i * 3 + seq) & 3);
}

/* Where the walker gets this rank's plan and the memory model's prediction for it; returns
 * TW_ERR_LIMIT with the predicted breakdown when the plan does not fit. exec_run passes
 * plan_rank + plan_memory (exec/run.c); unit tests pass hand-built plans. */
typedef enum tw_result (*exec_plan_fn)(void *ctx, const struct job *j, int64_t rank,
				       struct plan *p, struct plan_mem *pred, struct tw_err *err);
enum tw_result exec_run_plan(const struct job *j, const struct exec_options *opt,
			     exec_plan_fn make_plan, void *ctx, struct trace *out,
			     struct exec_result *res, struct tw_err *err);

/* Whether the host backend's MPI calls can take op (TW_ERR_LIMIT with one line if not). MPI's
 * counts are int: all-reduce, broadcast and reduce pass the op's count; all-gather,
 * reduce-scatter and all-to-all pass it too, but their whole buffer (count x group_size) is
 * what MPI implementations index (a reduce-scatter may run as a reduce of it), so that must
 * fit as well; a p2p passes its bytes. The host backend checks every op when it opens, before
 * the first step. */
enum tw_result exec_mpi_counts_fit(const struct plan_op *op, int64_t group_size,
				   struct tw_err *err);

/* "all_reduce over dp (4 ranks), seq 3" etc. for error messages */
void exec_op_desc(const struct plan_op *op, char *buf, size_t len);

#endif
