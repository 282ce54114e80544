/* tw — errors, allocation, logging, dtypes. */
#define _POSIX_C_SOURCE 200809L
#include "tw.h"

#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const result_names[TW_NUM_RESULTS] = {
	[TW_OK] = "ok",
	[TW_ERR_INVALID] = "invalid input",
	[TW_ERR_USAGE] = "usage error",
	[TW_ERR_SYSTEM] = "system error",
	[TW_ERR_UNSUPPORTED] = "not supported by this build or machine",
	[TW_ERR_LIMIT] = "resource limit reached",
	[TW_ERR_CUDA] = "CUDA error",
	[TW_ERR_NCCL] = "NCCL error",
	[TW_ERR_CUPTI] = "CUPTI error",
	[TW_ERR_MPI] = "MPI error",
	[TW_ERR_SQLITE] = "SQLite error",
	[TW_ERR_INTERNAL] = "internal error",
};

const char *tw_strresult(enum tw_result r)
{
	if ((int)r < 0 || r >= TW_NUM_RESULTS)
		return "unknown error";
	return result_names[r];
}

/* Bad input and usage are the user's to fix (2); the rest are failures of the run (1). */
int tw_exit_status(enum tw_result r)
{
	switch (r) {
	case TW_OK:
		return 0;
	case TW_ERR_INVALID:
	case TW_ERR_USAGE:
	case TW_ERR_UNSUPPORTED:
	case TW_ERR_LIMIT:
		return 2;
	default:
		return 1;
	}
}

enum tw_result tw_errf(struct tw_err *err, enum tw_result code, const char *fmt, ...)
{
	if (!err || err->code != TW_OK)
		return code;
	err->code = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	/* one line: messages never carry a newline */
	for (char *p = err->msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return code;
}

void tw_err_clear(struct tw_err *err)
{
	if (err) {
		err->code = TW_OK;
		err->msg[0] = '\0';
	}
}

static void oom(size_t n)
{
	fprintf(stderr, "twin: out of memory allocating %zu bytes\n", n);
	abort();
}

void *tw_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *tw_calloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p)
		oom(count * size);
	return p;
}

void *tw_realloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

void *tw_realloc_array(void *p, size_t count, size_t size)
{
	if (size && count > SIZE_MAX / size)
		oom(SIZE_MAX);
	return tw_realloc(p, count * size);
}

char *tw_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = tw_malloc(n);
	memcpy(d, s, n);
	return d;
}

void tw_log(enum tw_log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "twin: %s: ", names[level]);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

enum tw_log_level tw_log_level_from_env(void)
{
	const char *s = getenv("TWIN_LOG");
	if (!s)
		return TW_LOG_WARN;
	if (!strcmp(s, "error"))
		return TW_LOG_ERROR;
	if (!strcmp(s, "info"))
		return TW_LOG_INFO;
	if (!strcmp(s, "debug"))
		return TW_LOG_DEBUG;
	return TW_LOG_WARN;
}

static const char *const dtype_names[TW_NUM_DTYPES] = {"fp32", "tf32", "bf16", "fp16", "fp8", "int8"};
static const int dtype_bytes[TW_NUM_DTYPES] = {4, 4, 2, 2, 1, 1};

const char *tw_dtype_name(enum tw_dtype t)
{
	return (int)t >= 0 && t < TW_NUM_DTYPES ? dtype_names[t] : "?";
}

int tw_dtype_bytes(enum tw_dtype t)
{
	return (int)t >= 0 && t < TW_NUM_DTYPES ? dtype_bytes[t] : 0;
}

bool tw_dtype_parse(const char *s, enum tw_dtype *out)
{
	for (int i = 0; i < TW_NUM_DTYPES; i++)
		if (!strcmp(s, dtype_names[i])) {
			*out = (enum tw_dtype)i;
			return true;
		}
	if (!strcmp(s, "float32")) {
		*out = TW_FP32;
		return true;
	}
	if (!strcmp(s, "bfloat16")) {
		*out = TW_BF16;
		return true;
	}
	if (!strcmp(s, "float16")) {
		*out = TW_FP16;
		return true;
	}
	return false;
}

int64_t tw_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * TW_NS_PER_S + ts.tv_nsec;
}

bool tw_mul64(int64_t a, int64_t b, int64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

bool tw_add64(int64_t a, int64_t b, int64_t *out)
{
	return !__builtin_add_overflow(a, b, out);
}

char *tw_fmt_thousands(int64_t v, char *buf, size_t len)
{
	char tmp[32];
	unsigned long long mag = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	snprintf(tmp, sizeof(tmp), "%llu", mag);
	size_t n = strlen(tmp), o = 0;
	if (v < 0 && o + 1 < len)
		buf[o++] = '-';
	for (size_t i = 0; i < n && o + 1 < len; i++) {
		buf[o++] = tmp[i];
		size_t left = n - i - 1;
		if (left && left % 3 == 0 && o + 1 < len)
			buf[o++] = ',';
	}
	buf[o] = '\0';
	return buf;
}

void tw_err_prefix(struct tw_err *err, const char *prefix)
{
	if (!err || err->code == TW_OK)
		return;
	char msg[sizeof(err->msg)];
	memcpy(msg, err->msg, sizeof(msg));
	int n = snprintf(err->msg, sizeof(err->msg), "%s: ", prefix);
	if (n > 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, "%.*s",
			 (int)(sizeof(err->msg) - (size_t)n - 1), msg);
}

enum tw_result tw_out_target(const char *path, struct tw_err *err)
{
	struct stat st;
	if (lstat(path, &st) != 0 || S_ISREG(st.st_mode))
		return TW_OK; /* absent (or unreadable: creating it says why) */
	const char *what = S_ISDIR(st.st_mode)	 ? "is a directory"
			   : S_ISLNK(st.st_mode) ? "is a symbolic link (give the path it points to: "
						   "the output is renamed into place, which would "
						   "replace the link)"
						 : "is not a regular file (a device or a FIFO: the "
						   "output is renamed into place, which would "
						   "replace it)";
	return tw_errf(err, TW_ERR_INVALID, "%s: %s", path, what);
}

enum tw_result tw_out_errcode(int errnum)
{
	return errnum == ENOENT || errnum == ENOTDIR || errnum == EISDIR || errnum == EACCES ||
			       errnum == EPERM || errnum == EROFS || errnum == ENAMETOOLONG
		       ? TW_ERR_INVALID
		       : TW_ERR_SYSTEM;
}

enum tw_result tw_out_open(struct tw_out *o, const char *path, struct tw_err *err)
{
	o->f = NULL;
	if (!path[0])
		return tw_errf(err, TW_ERR_INVALID, "an output path is empty");
	TW_CHECK(tw_out_target(path, err));
	if ((size_t)snprintf(o->tmp, sizeof(o->tmp), "%s.tmp-XXXXXX", path) >= sizeof(o->tmp))
		return tw_errf(err, TW_ERR_INVALID, "%s: path too long", path);
	int fd = mkstemp(o->tmp);
	if (fd < 0)
		return tw_errf(err, tw_out_errcode(errno), "%s: cannot write: %s", path,
			       strerror(errno));
	/* mkstemp makes 0600: give the file the mode a plain create would (0666 less umask) */
	mode_t um = umask(0);
	umask(um);
	if (fchmod(fd, 0666 & ~um) != 0) {
		int e = errno;
		close(fd);
		unlink(o->tmp);
		return tw_errf(err, TW_ERR_SYSTEM, "%s: cannot write: %s", path, strerror(e));
	}
	if (!(o->f = fdopen(fd, "w"))) {
		int e = errno;
		close(fd);
		unlink(o->tmp);
		return tw_errf(err, TW_ERR_SYSTEM, "%s: cannot write: %s", path, strerror(e));
	}
	return TW_OK;
}

enum tw_result tw_out_close(struct tw_out *o, const char *path, bool ok, struct tw_err *err)
{
	enum tw_result rc = TW_OK;
	if (o->f && (fflush(o->f) != 0 || ferror(o->f)) && ok)
		rc = tw_errf(err, TW_ERR_SYSTEM, "%s: cannot write: %s", path, strerror(errno));
	if (o->f && fclose(o->f) != 0 && ok && rc == TW_OK)
		rc = tw_errf(err, TW_ERR_SYSTEM, "%s: cannot write: %s", path, strerror(errno));
	o->f = NULL;
	if (ok && rc == TW_OK && rename(o->tmp, path) != 0)
		rc = tw_errf(err, TW_ERR_SYSTEM, "%s: cannot rename into place: %s", path, strerror(errno));
	if (!ok || rc != TW_OK)
		unlink(o->tmp);
	return rc;
}

size_t tw_utf8_len(const char *p)
{
	const unsigned char *s = (const unsigned char *)p;
	if (s[0] < 0x80)
		return 1;
	size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
		 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
	for (size_t k = 1; k < n; k++)
		if ((s[k] & 0xc0) != 0x80)
			return 0;
	/* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
	if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return n;
}
