/* cuda_load — finds and opens libtwin_cuda.so, the cuda backend (exec/backend.h,
 * docs/executor.md). Plain dlopen: this file needs no CUDA header and builds everywhere. */
#include "backend.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum tw_result exec_cuda_path(char *buf, size_t len, struct tw_err *err)
{
	const char *env = getenv(EXEC_CUDA_ENV);
	if (env && *env) {
		if (strlen(env) >= len)
			return tw_errf(err, TW_ERR_UNSUPPORTED, "%s: path longer than %zu bytes",
				       EXEC_CUDA_ENV, len - 1);
		memcpy(buf, env, strlen(env) + 1);
		return TW_OK;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return tw_errf(err, TW_ERR_UNSUPPORTED,
			       "cannot locate %s (readlink /proc/self/exe: %s); set %s to its path",
			       EXEC_CUDA_LIB, strerror(errno), EXEC_CUDA_ENV);
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	if ((size_t)snprintf(buf, len, "%s/%s", slash ? exe : ".", EXEC_CUDA_LIB) >= len)
		return tw_errf(err, TW_ERR_UNSUPPORTED, "%s/%s: path too long", exe, EXEC_CUDA_LIB);
	return TW_OK;
}

enum tw_result exec_cuda_open(const char *path, const struct exec_cuda_module **m,
			      struct tw_err *err)
{
	*m = NULL;
	/* RTLD_NOW: a symbol twin does not export shows here, not in the middle of a run.
	 * RTLD_LOCAL: the CUDA libraries stay out of the global namespace. */
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return tw_errf(err, TW_ERR_UNSUPPORTED, "cannot load the cuda backend: %s", dlerror());
	dlerror();
	void *sym = dlsym(h, EXEC_CUDA_ENTRY);
	const char *e = dlerror();
	if (e || !sym) {
		enum tw_result rc = tw_errf(err, TW_ERR_UNSUPPORTED, "%s is not twin's cuda backend: %s",
					    path, e ? e : "entry symbol is NULL");
		dlclose(h);
		return rc;
	}
	exec_cuda_entry_fn entry;
	memcpy(&entry, &sym, sizeof(entry)); /* ISO C has no object-to-function pointer cast */
	const struct exec_cuda_module *mod = entry();
	if (!mod || mod->abi != EXEC_CUDA_ABI || mod->env_bytes != sizeof(struct exec_env) ||
	    mod->backend_bytes != sizeof(struct exec_backend) ||
	    mod->plan_op_bytes != sizeof(struct plan_op) ||
	    mod->calib_bytes != sizeof(struct calib_result) || mod->job_bytes != sizeof(struct job) ||
	    !mod->backend || !mod->calib_measure)
		/* not dlclose'd: its constructors ran, and CUDA libraries do not like unloading */
		return tw_errf(err, TW_ERR_UNSUPPORTED,
			       "%s was built for another version of twin (interface %d, expected %d, or "
			       "different struct sizes); rebuild it with make",
			       path, mod ? mod->abi : -1, EXEC_CUDA_ABI);
	*m = mod;
	return TW_OK;
}

enum tw_result exec_cuda_load(const char *prefix, const char *hint,
			      const struct exec_cuda_module **m, struct tw_err *err)
{
	char path[PATH_MAX];
	struct tw_err e = {0};
	enum tw_result rc = exec_cuda_path(path, sizeof(path), &e);
	if (rc == TW_OK && access(path, R_OK) != 0)
		rc = tw_errf(&e, TW_ERR_UNSUPPORTED,
			     "the cuda backend %s: %s (make builds it next to twin where the CUDA "
			     "toolkit is; %s names another path)",
			     path, strerror(errno), EXEC_CUDA_ENV);
	if (rc == TW_OK) {
		/* The driver first. It is never closed: the runtime loads it again anyway. */
		if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))
			rc = tw_errf(&e, TW_ERR_UNSUPPORTED, "no CUDA GPU or driver on this machine (%s)",
				     dlerror());
	}
	if (rc == TW_OK)
		rc = exec_cuda_open(path, m, &e);
	if (rc != TW_OK)
		return tw_errf(err, rc, "%s%s; %s", prefix ? prefix : "", e.msg, hint);
	return TW_OK;
}
