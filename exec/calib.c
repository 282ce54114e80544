/* calib — microbenchmarks behind `twin calibrate` (docs/calibrate.md). The host backend times
 * OpenBLAS sgemm at several sizes (one thread: a rank's core; all threads: the node), streaming
 * memcpy (one thread and all cores) and, under mpirun with >= 2 ranks, MPI_Allreduce bus
 * bandwidth. calib_apply writes the figures into a cluster file tree in the file's schema. */
#include "backend.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef TWIN_HAVE_MPI
#include <mpi.h>
#endif
#ifdef TWIN_HAVE_BLAS
#include <cblas.h>
#endif

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void stamp(struct calib_result *r, const char *backend)
{
	snprintf(r->backend, sizeof(r->backend), "%s", backend);
	if (gethostname(r->host, sizeof(r->host)) != 0)
		snprintf(r->host, sizeof(r->host), "unknown-host");
	r->host[sizeof(r->host) - 1] = '\0';
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(r->date, sizeof(r->date), "%Y-%m-%dT%H:%MZ", &tm);
}

/* ---- memory bandwidth: memcpy of a buffer larger than the caches ---- */

struct copy_start {
	atomic_int ready;            /* threads that touched their buffers */
	atomic_int go;               /* set once all are ready */
};

struct copy_arg {
	unsigned char *src, *dst;
	size_t bytes;
	int reps;
	struct copy_start *start;    /* NULL: one thread */
	double t0, t1, best_s;       /* timed loop start and end, best repetition */
};

static void *copy_run(void *p)
{
	struct copy_arg *a = p;
	memset(a->src, 1, a->bytes); /* touch: real pages before timing */
	memset(a->dst, 2, a->bytes);
	if (a->start) {
		atomic_fetch_add(&a->start->ready, 1);
		while (!atomic_load(&a->start->go))
			sched_yield();
	}
	a->best_s = 1e30;
	a->t0 = now_s();
	for (int i = 0; i < a->reps; i++) {
		double t = now_s();
		memcpy(a->dst, a->src, a->bytes);
		double dt = now_s() - t;
		if (dt < a->best_s)
			a->best_s = dt;
	}
	a->t1 = now_s();
	return NULL;
}

/* Read + written bytes per second: one thread, its best repetition; several threads, all the
 * bytes they moved from the first one's start to the last one's end. */
static double copy_GBps(size_t bytes, int threads, int reps)
{
	struct copy_arg *a = TW_NEW_ARRAY(struct copy_arg, (size_t)threads);
	pthread_t *th = TW_NEW_ARRAY(pthread_t, (size_t)threads);
	struct copy_start st;
	atomic_init(&st.ready, 0);
	atomic_init(&st.go, 0);
	for (int i = 0; i < threads; i++) {
		a[i].bytes = bytes;
		a[i].reps = reps;
		a[i].start = threads > 1 ? &st : NULL;
	}
	int n = 1; /* threads running: the caller plus those created */
	for (int i = 1; i < threads; i++) {
		a[i].src = tw_malloc(bytes);
		a[i].dst = tw_malloc(bytes);
		if (pthread_create(&th[i], NULL, copy_run, &a[i]) != 0)
			break;
		n++;
	}
	a[0].src = tw_malloc(bytes);
	a[0].dst = tw_malloc(bytes);
	if (n > 1) {
		memset(a[0].src, 1, bytes);
		memset(a[0].dst, 2, bytes);
		while (atomic_load(&st.ready) < n - 1)
			sched_yield();
		a[0].start = NULL;
		atomic_store(&st.go, 1);
	}
	copy_run(&a[0]);
	for (int i = 1; i < n; i++)
		pthread_join(th[i], NULL);
	double GBps;
	if (n == 1) {
		GBps = 2.0 * (double)bytes / a[0].best_s * 1e-9;
	} else {
		double t0 = a[0].t0, t1 = a[0].t1;
		for (int i = 1; i < n; i++) {
			t0 = a[i].t0 < t0 ? a[i].t0 : t0;
			t1 = a[i].t1 > t1 ? a[i].t1 : t1;
		}
		GBps = 2.0 * (double)bytes * (double)reps * (double)n / (t1 - t0) * 1e-9;
	}
	for (int i = 0; i < threads; i++) {
		free(a[i].src);
		free(a[i].dst);
	}
	free(a);
	free(th);
	return GBps;
}

/* ---- GEMM ---- */

#ifdef TWIN_HAVE_BLAS
/* best sgemm rate (TFLOP/s) of n x n x n over enough repetitions to take min_s seconds */
static double sgemm_tflops(int64_t n, double min_s, float *a, float *b, float *c)
{
	double flops = 2.0 * (double)n * (double)n * (double)n;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a,
		    (int)n, b, (int)n, 0.0f, c, (int)n); /* warm-up: threads, caches */
	double best = 1e30, spent = 0;
	int reps = 0;
	while ((spent < min_s || reps < 3) && reps < 10000) {
		double t0 = now_s();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f,
			    a, (int)n, b, (int)n, 0.0f, c, (int)n);
		double dt = now_s() - t0;
		spent += dt;
		reps++;
		if (dt < best)
			best = dt;
	}
	return flops / best * 1e-12;
}
#endif

static enum tw_result host_measure(const struct calib_options *o, struct calib_result *r,
				   struct tw_err *err)
{
#ifndef TWIN_HAVE_BLAS
	(void)o;
	(void)r;
	return tw_errf(err, TW_ERR_UNSUPPORTED,
		       "calibrate --backend host needs OpenBLAS, which this build lacks "
		       "(apt-get install libopenblas-dev, then make)");
#else
	static const int64_t sizes_quick[] = { 32, 64, 128, 256, 512 };
	static const int64_t sizes_full[] = { 32, 64, 128, 256, 512, 1024, 2048 };
	const int64_t *sizes = o->quick ? sizes_quick : sizes_full;
	int ns = o->quick ? 5 : 7;
	double min_s = o->quick ? 0.03 : 0.2;
	int64_t nmax = sizes[ns - 1];
	float *a = tw_malloc((size_t)(nmax * nmax) * sizeof(float));
	float *b = tw_malloc((size_t)(nmax * nmax) * sizeof(float));
	float *c = tw_malloc((size_t)(nmax * nmax) * sizeof(float));
	for (int64_t i = 0; i < nmax * nmax; i++) {
		a[i] = (float)((i * 7) % 13) * 0.01f;
		b[i] = (float)((i * 5) % 11) * 0.01f;
	}
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (cores < 1)
		cores = 1;
	r->host_threads = (int)cores;

	/* a rank is one core: one BLAS thread */
	openblas_set_num_threads(1);
	r->gemm_dtype = TW_FP32;
	r->npoints = ns;
	double peak = 0;
	for (int i = 0; i < ns; i++) {
		r->gemm[i].n = sizes[i];
		r->gemm[i].flops = 2.0 * (double)sizes[i] * (double)sizes[i] * (double)sizes[i];
		r->gemm[i].tflops = sgemm_tflops(sizes[i], min_s, a, b, c);
		if (r->gemm[i].tflops > peak)
			peak = r->gemm[i].tflops;
	}
	r->peak_tflops[TW_FP32] = peak;
	/* the node: every core (CPU Adam and the like) */
	if (r->ranks <= 1) {
		openblas_set_num_threads((int)cores);
		r->cpu_tflops = sgemm_tflops(nmax, min_s, a, b, c);
		openblas_set_num_threads(1);
	}
	free(a);
	free(b);
	free(c);

	size_t bytes = (size_t)(o->quick ? 64 : 256) * TW_MIB;
	int reps = o->quick ? 3 : 8;
	r->mem_GBps = copy_GBps(bytes, 1, reps);
	if (r->ranks <= 1)
		r->host_mem_GBps = copy_GBps(bytes / 4, (int)cores, reps);
	return TW_OK;
#endif
}

#ifdef TWIN_HAVE_MPI
/* in-place MPI_Allreduce of `bytes` of floats; nccl-tests' busbw = algbw x 2 (n - 1) / n */
static enum tw_result mpi_allreduce_busbw(struct calib_result *r, bool quick, struct tw_err *err)
{
	size_t bytes = (size_t)(quick ? 16 : 128) * TW_MIB;
	size_t count = bytes / sizeof(float);
	float *buf = tw_malloc(bytes);
	for (size_t i = 0; i < count; i++)
		buf[i] = 1.0f;
	int reps = quick ? 3 : 10;
	double best = 1e30;
	for (int i = 0; i <= reps; i++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now_s();
		if (MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) !=
		    MPI_SUCCESS) {
			free(buf);
			return tw_errf(err, TW_ERR_MPI, "calibrate: MPI_Allreduce of %zu bytes failed", bytes);
		}
		double dt = now_s() - t0;
		/* the slowest rank's time is the collective's time */
		MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (i > 0 && dt < best) /* i == 0: warm-up (connection set-up) */
			best = dt;
	}
	free(buf);
	double n = (double)r->ranks;
	r->allreduce_bytes = (double)bytes;
	r->allreduce_busbw_GBps = (double)bytes / best * 1e-9 * 2.0 * (n - 1) / n;
	return TW_OK;
}
#endif

/* Under a launcher (Open MPI, PMI, Slurm) we take part in MPI; a plain process does not. */
static bool under_mpi_launcher(void)
{
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

enum tw_result calib_measure(const struct calib_options *o, struct calib_result *r,
			     struct tw_err *err)
{
	memset(r, 0, sizeof(*r));
	r->ranks = 1;
	r->report = true;
	if (!o->backend || (strcmp(o->backend, "host") && strcmp(o->backend, "cuda")))
		return tw_errf(err, TW_ERR_USAGE, "calibrate: --backend must be host or cuda (got %s)",
			       o->backend ? o->backend : "nothing");
	if (!strcmp(o->backend, "cuda")) {
		stamp(r, "cuda");
#ifdef TWIN_HAVE_CUDA
		const struct exec_cuda_module *m;
		TW_CHECK(exec_cuda_load("calibrate --backend cuda: ", "--backend host measures CPU ranks",
					&m, err));
		return m->calib_measure(o, r, err);
#else
		return tw_errf(err, TW_ERR_UNSUPPORTED,
			       "calibrate --backend cuda: this build has no CUDA (toolkit with NCCL and "
			       "cuBLAS under CUDA_HOME, then make)");
#endif
	}
	stamp(r, "host");
	enum tw_result rc = TW_OK;
#ifdef TWIN_HAVE_MPI
	bool mpi = under_mpi_launcher(), inited_here = false;
	if (mpi) {
		int inited = 0, rank = 0, size = 1;
		MPI_Initialized(&inited);
		if (!inited) {
			if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
				return tw_errf(err, TW_ERR_MPI, "calibrate: MPI_Init failed");
			inited_here = true;
		}
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
		MPI_Comm_size(MPI_COMM_WORLD, &size);
		r->ranks = size;
		r->report = rank == 0;
		MPI_Barrier(MPI_COMM_WORLD);
	}
	rc = host_measure(o, r, err);
	if (mpi) {
		/* every rank measured at once: a rank's share; rank 0 reports the mean */
		int ok = rc == TW_OK, all_ok = 0;
		MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
		if (all_ok && r->ranks > 1) {
			double v[2 + CALIB_MAX_POINTS] = { r->mem_GBps, r->peak_tflops[TW_FP32] };
			for (int i = 0; i < r->npoints; i++)
				v[2 + i] = r->gemm[i].tflops;
			MPI_Allreduce(MPI_IN_PLACE, v, 2 + CALIB_MAX_POINTS, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			r->mem_GBps = v[0] / r->ranks;
			r->peak_tflops[TW_FP32] = v[1] / r->ranks;
			for (int i = 0; i < r->npoints; i++)
				r->gemm[i].tflops = v[2 + i] / r->ranks;
			rc = mpi_allreduce_busbw(r, o->quick, err);
		} else if (!all_ok && rc == TW_OK) {
			rc = tw_errf(err, TW_ERR_MPI, "calibrate: another rank failed to measure");
		}
		if (inited_here) {
			int fin = 0;
			MPI_Finalized(&fin);
			if (!fin)
				MPI_Finalize();
		}
	}
#else
	rc = host_measure(o, r, err);
#endif
	return rc;
}

/* ---- writing the cluster file tree ---- */

/* four significant digits: what timing noise allows (never rounds a positive value to 0) */
static double sig4(double v)
{
	char b[32];
	snprintf(b, sizeof(b), "%.4g", v);
	return strtod(b, NULL);
}

static void note(struct calib_result const *r, char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "measured by twin calibrate on %s at %s: %s", r->host, r->date, what);
}

/* set obj.key = v and obj.key_note = note (numbers must already be numbers in the file) */
static enum tw_result set_num(cJSON *obj, const char *path, const char *key, double v,
			      const char *nt, struct tw_err *err)
{
	cJSON *it = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	if (!it || !cJSON_IsNumber(it))
		return tw_errf(err, TW_ERR_INVALID, "calibrate: base cluster has no number %s.%s",
			       path, key);
	cJSON_SetNumberValue(it, v);
	char nk[96];
	snprintf(nk, sizeof(nk), "%s_note", key);
	cJSON_DeleteItemFromObjectCaseSensitive(obj, nk);
	cJSON_AddStringToObject(obj, nk, nt);
	return TW_OK;
}

static void set_obj_note(cJSON *obj, const char *nt)
{
	cJSON_DeleteItemFromObjectCaseSensitive(obj, "note");
	cJSON_AddStringToObject(obj, "note", nt);
}

/* eff.gemm from the sweep: threshold = FLOPs of each size (the first 0), eff = its rate over
 * the best rate, as the simulator's step-function lookup reads it */
static enum tw_result set_gemm_table(const struct calib_result *r, cJSON *eff, double peak,
				     struct tw_err *err)
{
	cJSON *g = eff ? cJSON_GetObjectItemCaseSensitive(eff, "gemm") : NULL;
	if (!g || !cJSON_IsObject(g))
		return tw_errf(err, TW_ERR_INVALID, "calibrate: base cluster has no object eff.gemm");
	cJSON *mins = cJSON_CreateArray(), *effs = cJSON_CreateArray();
	char pts[320];
	size_t len = 0;
	pts[0] = '\0';
	for (int i = 0; i < r->npoints && i < CLUSTER_MAX_EFF; i++) {
		double e = r->gemm[i].tflops / peak;
		if (e > 1)
			e = 1;
		if (e < 0.001)
			e = 0.001;
		e = sig4(e);
		cJSON_AddItemToArray(mins, cJSON_CreateNumber(i == 0 ? 0 : r->gemm[i].flops));
		cJSON_AddItemToArray(effs, cJSON_CreateNumber(e));
		if (len + 32 < sizeof(pts))
			len += (size_t)snprintf(pts + len, sizeof(pts) - len, "%s%lld^3 %.3g", i ? ", " : "",
						(long long)r->gemm[i].n, r->gemm[i].tflops);
	}
	cJSON_ReplaceItemInObjectCaseSensitive(g, "min_flops", mins);
	cJSON_ReplaceItemInObjectCaseSensitive(g, "eff", effs);
	char what[512], nt[700];
	snprintf(what, sizeof(what),
		 "%s GEMM n x n x n, TFLOP/s: %s; eff = rate / best rate, threshold = 2 n^3 of each size",
		 tw_dtype_name(r->gemm_dtype), pts);
	note(r, nt, sizeof(nt), what);
	set_obj_note(g, nt);
	return TW_OK;
}

enum tw_result calib_apply(const struct calib_result *r, const struct cluster *base,
			   struct cJSON *root, struct tw_err *err)
{
	cJSON *gpu = cJSON_GetObjectItemCaseSensitive(root, "gpu");
	cJSON *node = cJSON_GetObjectItemCaseSensitive(root, "node");
	cJSON *eff = cJSON_GetObjectItemCaseSensitive(root, "eff");
	cJSON *pk = gpu ? cJSON_GetObjectItemCaseSensitive(gpu, "peak_tflops") : NULL;
	if (!gpu || !node || !eff || !pk)
		return tw_errf(err, TW_ERR_INVALID,
			       "calibrate: base cluster lacks gpu, gpu.peak_tflops, node or eff");
	char nt[512], what[256];
	double peak = r->peak_tflops[r->gemm_dtype];
	if (peak <= 0 || r->npoints == 0)
		return tw_errf(err, TW_ERR_INTERNAL, "calibrate: no GEMM was measured");

	/* peak TFLOP/s per measured dtype */
	{
		char list[256] = "";
		size_t len = 0;
		for (int d = 0; d < TW_NUM_DTYPES; d++) {
			double v = r->peak_tflops[d];
			/* the host executor runs bf16/fp16 GEMMs as sgemm (docs/executor.md) */
			if (!strcmp(r->backend, "host") && (d == TW_BF16 || d == TW_FP16) &&
			    base->gpu.peak_tflops[d] > 0)
				v = r->peak_tflops[TW_FP32];
			if (v <= 0)
				continue;
			v = sig4(v);
			cJSON *it = cJSON_GetObjectItemCaseSensitive(pk, tw_dtype_name((enum tw_dtype)d));
			if (!it || !cJSON_IsNumber(it))
				return tw_errf(err, TW_ERR_INVALID,
					       "calibrate: base cluster has no number gpu.peak_tflops.%s",
					       tw_dtype_name((enum tw_dtype)d));
			cJSON_SetNumberValue(it, v);
			if (len + 40 < sizeof(list))
				len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s %.4g", len ? ", " : "",
							tw_dtype_name((enum tw_dtype)d), v);
		}
		snprintf(what, sizeof(what), "best GEMM rate, TFLOP/s: %s%s%s", list,
			 !strcmp(r->backend, "host") ? " (one core, OpenBLAS sgemm; bf16/fp16 run as sgemm)" : " (cuBLAS)",
			 "; other dtypes kept from the base file");
		note(r, nt, sizeof(nt), what);
		set_obj_note(pk, nt);
	}
	TW_CHECK(set_gemm_table(r, eff, peak, err));

	if (r->mem_GBps > 0) {
		snprintf(what, sizeof(what), "%s, read + written bytes",
			 !strcmp(r->backend, "host")
				 ? (r->ranks > 1 ? "memcpy on every rank at once, mean per rank" : "memcpy on one core")
				 : "device-to-device cudaMemcpy");
		note(r, nt, sizeof(nt), what);
		TW_CHECK(set_num(gpu, "gpu", "hbm_GBps", sig4(r->mem_GBps), nt, err));
	}
	if (r->host_mem_GBps > 0) {
		snprintf(what, sizeof(what), "memcpy on %d threads at once, read + written bytes", r->host_threads);
		note(r, nt, sizeof(nt), what);
		TW_CHECK(set_num(node, "node", "cpu_mem_GBps",
				 sig4(r->host_mem_GBps), nt, err));
	}
	if (r->cpu_tflops > 0) {
		snprintf(what, sizeof(what), "OpenBLAS sgemm %lld^3 on %d threads",
			 (long long)r->gemm[r->npoints - 1].n, r->host_threads);
		note(r, nt, sizeof(nt), what);
		TW_CHECK(set_num(node, "node", "cpu_tflops", sig4(r->cpu_tflops),
				 nt, err));
	}
	if (r->h2d_GBps > 0 && r->d2h_GBps > 0) {
		double v = r->h2d_GBps < r->d2h_GBps ? r->h2d_GBps : r->d2h_GBps;
		snprintf(what, sizeof(what), "pinned cudaMemcpy, the slower of H2D %.1f and D2H %.1f GB/s",
			 r->h2d_GBps, r->d2h_GBps);
		note(r, nt, sizeof(nt), what);
		TW_CHECK(set_num(node, "node", "pcie_GBps", sig4(v), nt, err));
	}
	if (r->allreduce_busbw_GBps > 0) {
		double v = sig4(r->allreduce_busbw_GBps);
		if (!strcmp(r->backend, "host")) {
			/* CPU ranks: the shared-memory transport is the intra-node link (pcie_GBps) */
			snprintf(what, sizeof(what), "MPI_Allreduce bus bandwidth (nccl-tests definition), %d ranks, %.0f MiB",
				 r->ranks, r->allreduce_bytes / (double)TW_MIB);
			note(r, nt, sizeof(nt), what);
			TW_CHECK(set_num(node, "node", "pcie_GBps", v, nt, err));
		} else {
			snprintf(what, sizeof(what), "NCCL all-reduce bus bandwidth, %d GPUs, %.0f MiB",
				 r->ranks, r->allreduce_bytes / (double)TW_MIB);
			note(r, nt, sizeof(nt), what);
			if (base->node.nvls)
				TW_CHECK(set_num(node, "node", "nvls_GBps", v, nt, err));
			else if (base->node.intra == CLUSTER_INTRA_PCIE)
				TW_CHECK(set_num(node, "node", "pcie_GBps", v, nt, err));
			else
				TW_CHECK(set_num(node, "node", "nvlink_GBps", v, nt, err));
		}
	}
	return TW_OK;
}
