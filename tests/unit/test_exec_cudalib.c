/* Loading the cuda backend from libtwin_cuda.so (exec/cuda_load.c): where it is looked for, the
 * one-line failures (missing file, not a library, not twin's library, no driver), and — in a
 * CUDA build — that the real library loads into a binary linked as twin is (every symbol it
 * needs exported), gives the cuda backend, and on a machine without a GPU refuses in its probe
 * with the one line twin run prints. */
#include "../../exec/backend.h"
#include "test.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

static void test_path(struct test_ctx *T)
{
	char buf[PATH_MAX], exe[PATH_MAX];
	struct tw_err err = {0};
	setenv(EXEC_CUDA_ENV, "/opt/x/libtwin_cuda.so", 1);
	CHECK_EQ_INT(T, exec_cuda_path(buf, sizeof(buf), &err), TW_OK);
	CHECK(T, !strcmp(buf, "/opt/x/libtwin_cuda.so"));
	tw_err_clear(&err);
	CHECK_EQ_INT(T, exec_cuda_path(buf, 8, &err), TW_ERR_UNSUPPORTED);
	CHECK_STR_CONTAINS(T, err.msg, EXEC_CUDA_ENV);
	unsetenv(EXEC_CUDA_ENV);
	/* next to the running binary */
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	CHECK(T, n > 0);
	exe[n > 0 ? n : 0] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		slash[1] = '\0';
	strcat(exe, EXEC_CUDA_LIB);
	CHECK_EQ_INT(T, exec_cuda_path(buf, sizeof(buf), &err), TW_OK);
	CHECK(T, !strcmp(buf, exe));
}

static void test_missing(struct test_ctx *T)
{
	struct tw_err err = {0};
	const struct exec_cuda_module *m = NULL;
	setenv(EXEC_CUDA_ENV, "/nonexistent/libtwin_cuda.so", 1);
	CHECK_EQ_INT(T, exec_cuda_load("calibrate --backend cuda: ", "HINT", &m, &err),
		     TW_ERR_UNSUPPORTED);
	CHECK(T, m == NULL);
	CHECK_STR_CONTAINS(T, err.msg, "calibrate --backend cuda: the cuda backend /nonexistent/libtwin_cuda.so: No such file");
	CHECK_STR_CONTAINS(T, err.msg, "; HINT");
	CHECK(T, !strchr(err.msg, '\n'));
	unsetenv(EXEC_CUDA_ENV);
}

static void test_not_a_library(struct test_ctx *T)
{
	struct tw_err err = {0};
	const struct exec_cuda_module *m = NULL;
	char path[] = "/tmp/twin-test-cudalib-XXXXXX";
	int fd = mkstemp(path);
	CHECK(T, fd >= 0);
	if (fd < 0)
		return;
	CHECK(T, write(fd, "not ELF\n", 8) == 8);
	close(fd);
	CHECK_EQ_INT(T, exec_cuda_open(path, &m, &err), TW_ERR_UNSUPPORTED);
	CHECK(T, m == NULL);
	/* dlerror's words, naming the file */
	CHECK_STR_CONTAINS(T, err.msg, "cannot load the cuda backend: ");
	CHECK_STR_CONTAINS(T, err.msg, path);
	unlink(path);
	/* a real library without the entry symbol */
	tw_err_clear(&err);
	CHECK_EQ_INT(T, exec_cuda_open("libm.so.6", &m, &err), TW_ERR_UNSUPPORTED);
	CHECK_STR_CONTAINS(T, err.msg, "libm.so.6 is not twin's cuda backend");
	CHECK_STR_CONTAINS(T, err.msg, EXEC_CUDA_ENTRY);
}

#ifdef TWIN_HAVE_CUDA
static void test_real_library(struct test_ctx *T)
{
	/* the test binary is in BUILD/tests/, the library in BUILD/ */
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	CHECK(T, n > 0);
	exe[n > 0 ? n : 0] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	strcat(exe, "/../" EXEC_CUDA_LIB);
	struct tw_err err = {0};
	const struct exec_cuda_module *m = NULL;
	CHECK_EQ_INT(T, exec_cuda_open(exe, &m, &err), TW_OK);
	if (!m) {
		printf("#   %s\n", err.msg);
		return;
	}
	CHECK(T, !strcmp(m->backend->name, "cuda"));
	CHECK(T, m->calib_measure != NULL);
	/* the probe: no driver here gives twin run's line; with a driver, whatever the GPUs say */
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	struct exec_env env = {0};
	enum tw_result rc = m->backend->probe(&env, &err);
	if (!drv) {
		CHECK_EQ_INT(T, rc, TW_ERR_UNSUPPORTED);
		CHECK_STR_CONTAINS(T, err.msg, "no CUDA GPU or driver on this machine");
		CHECK_STR_CONTAINS(T, err.msg, "--backend host");
		/* through the loader: the driver is checked before the library is opened */
		setenv(EXEC_CUDA_ENV, exe, 1);
		tw_err_clear(&err);
		CHECK_EQ_INT(T, exec_cuda_load("", "H", &m, &err), TW_ERR_UNSUPPORTED);
		CHECK_STR_CONTAINS(T, err.msg, "no CUDA GPU or driver on this machine (libcuda.so.1");
		unsetenv(EXEC_CUDA_ENV);
	}
}
#endif

int main(void)
{
	struct test_ctx t = {0};
	TEST_RUN(&t, test_path);
	TEST_RUN(&t, test_missing);
	TEST_RUN(&t, test_not_a_library);
#ifdef TWIN_HAVE_CUDA
	TEST_RUN(&t, test_real_library);
#endif
	return test_done(&t);
}
