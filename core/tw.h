/* tw — the base of core/: result codes with context, checked allocation, logging, dtypes,
 * whole-or-nothing output files.
 *
 * Every fallible function returns enum tw_result and, on failure, fills a struct tw_err with
 * one line that names the file, the field and the rule. Only cli/ turns a result into an exit
 * status (tw_exit_status). Host allocation cannot fail: tw_malloc aborts on out-of-memory. */
#ifndef TW_H
#define TW_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TW_VERSION "0.1.0"

enum tw_result {
	TW_OK = 0,
	TW_ERR_INVALID,     /* bad input: file, field, rule (exit 2) */
	TW_ERR_USAGE,       /* bad command line (exit 2) */
	TW_ERR_SYSTEM,      /* I/O, OS (exit 1) */
	TW_ERR_UNSUPPORTED, /* feature not in this build / no device (exit 2) */
	TW_ERR_LIMIT,       /* a documented resource limit was hit (exit 2) */
	TW_ERR_CUDA,
	TW_ERR_NCCL,
	TW_ERR_CUPTI,
	TW_ERR_MPI,
	TW_ERR_SQLITE,
	TW_ERR_INTERNAL,
	TW_NUM_RESULTS
};

/* One error message, written once by whoever saw the problem first. */
struct tw_err {
	enum tw_result code;
	char msg[512];
};

const char *tw_strresult(enum tw_result r);
int tw_exit_status(enum tw_result r);

/* Record an error and return its code: `return tw_errf(err, TW_ERR_INVALID, "%s: %s: %s", ...)`.
 * If err already holds an error it is kept (the first error wins). err may be NULL. */
enum tw_result tw_errf(struct tw_err *err, enum tw_result code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void tw_err_clear(struct tw_err *err);
/* "PREFIX: message": names the file (or input) a message from a lower layer was about */
void tw_err_prefix(struct tw_err *err, const char *prefix);

#define TW_CHECK(call)                                                                             \
	do {                                                                                       \
		enum tw_result tw_rc_ = (call);                                                    \
		if (tw_rc_ != TW_OK)                                                               \
			return tw_rc_;                                                             \
	} while (0)
#define TW_CHECK_GOTO(call, rc, label)                                                             \
	do {                                                                                       \
		(rc) = (call);                                                                     \
		if ((rc) != TW_OK)                                                                 \
			goto label;                                                                \
	} while (0)

/* Allocation: aborts with a message on out-of-memory, so callers never check for NULL.
 * Memory from tw_calloc/tw_new_array is zeroed. Free with free(). */
void *tw_malloc(size_t n);
void *tw_calloc(size_t count, size_t size);
void *tw_realloc(void *p, size_t n);
void *tw_realloc_array(void *p, size_t count, size_t size); /* overflow-checked */
char *tw_strdup(const char *s);
#define TW_NEW(T) ((T *)tw_calloc(1, sizeof(T)))
#define TW_NEW_ARRAY(T, n) ((T *)tw_calloc((n), sizeof(T)))
/* Grow a dynamic array `p` with capacity `cap` (elements) to hold at least `need`. */
#define TW_GROW(p, cap, need)                                                                      \
	do {                                                                                       \
		if ((size_t)(need) > (size_t)(cap)) {                                              \
			size_t tw_nc_ = (cap) ? (size_t)(cap) * 2 : 16;                            \
			while (tw_nc_ < (size_t)(need))                                            \
				tw_nc_ *= 2;                                                       \
			(p) = tw_realloc_array((p), tw_nc_, sizeof(*(p)));                         \
			(cap) = tw_nc_;                                                            \
		}                                                                                  \
	} while (0)

/* Logging to stderr. The level is read once from TWIN_LOG (error|warn|info|debug) by the CLI
 * and passed down; the library never reads the environment itself. */
enum tw_log_level { TW_LOG_ERROR = 0, TW_LOG_WARN, TW_LOG_INFO, TW_LOG_DEBUG };
void tw_log(enum tw_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
enum tw_log_level tw_log_level_from_env(void);

/* Element types of tensors and GEMMs. */
enum tw_dtype { TW_FP32 = 0, TW_TF32, TW_BF16, TW_FP16, TW_FP8, TW_INT8, TW_NUM_DTYPES };
const char *tw_dtype_name(enum tw_dtype t);
int tw_dtype_bytes(enum tw_dtype t); /* bytes per element; fp8/int8 = 1, tf32 stored as 4 */
bool tw_dtype_parse(const char *s, enum tw_dtype *out);

/* Units. Time inside the simulator is integer ns; sizes are bytes (int64_t). */
#define TW_KIB 1024LL
#define TW_MIB (1024LL * 1024)
#define TW_GIB (1024LL * 1024 * 1024)
#define TW_NS_PER_S 1000000000LL

/* Monotonic clock in ns (for executors and benchmarks). */
int64_t tw_now_ns(void);

/* Checked 64-bit arithmetic: false on overflow. */
bool tw_mul64(int64_t a, int64_t b, int64_t *out);
bool tw_add64(int64_t a, int64_t b, int64_t *out);

/* Length of the valid UTF-8 sequence at s (1 for ASCII), 0 when the bytes are not UTF-8
 * (overlong, a surrogate, beyond U+10FFFF, truncated). */
size_t tw_utf8_len(const char *s);

/* "6,738,415,616" into buf (>= 32 bytes); returns buf. */
char *tw_fmt_thousands(int64_t v, char *buf, size_t len);

/* Output written whole or not at all: tw_out_open creates a temporary file beside path (its
 * name in o->tmp); tw_out_close closes it and, when ok, renames it onto path, else removes it.
 * Errors name path. */
struct tw_out {
	FILE *f;
	char tmp[4096];
};
enum tw_result tw_out_open(struct tw_out *o, const char *path, struct tw_err *err);
/* Whether path may be replaced by a rename: absent or a regular file. A directory, a symbolic
 * link (the rename would replace the link), a device or a FIFO is refused (TW_ERR_INVALID). */
enum tw_result tw_out_target(const char *path, struct tw_err *err);
/* The error code of an output that cannot be created: the user's path (missing folder, no
 * permission, read-only) is TW_ERR_INVALID, anything else TW_ERR_SYSTEM. */
enum tw_result tw_out_errcode(int errnum);
enum tw_result tw_out_close(struct tw_out *o, const char *path, bool ok, struct tw_err *err);

#endif
