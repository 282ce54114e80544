/* libtwinprof.so — CUPTI activity tracing of any CUDA program, loaded by the driver through
 * CUDA_INJECTION64_PATH, written into the twin store (TWIN_DB). Design (docs/profiler.md):
 *
 *  - CUPTI hands activity records back in buffers. The buffers come from a fixed pool
 *    allocated at start; the request and completion callbacks (CUPTI's threads, the hot path)
 *    only flip atomic states and post a semaphore: no allocation, no lock, no I/O. When the
 *    pool is empty CUPTI drops records, and we count them.
 *  - A writer thread wakes every TWIN_PROF_FLUSH_MS (and when a buffer completes), asks CUPTI
 *    for completed buffers, turns records into trace events and appends them to the run in
 *    one transaction per flush; at exit it forces a final flush and marks the run complete
 *    with the dropped-record count. A process killed mid-run leaves an incomplete run holding
 *    what was flushed.
 *  - Any failure disables tracing with one line on stderr; the program runs on unchanged.
 *
 * State is one static struct: CUPTI's buffer callbacks carry no user pointer. */
#include <cupti.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../profile.h"

#define EXPORT __attribute__((visibility("default")))

enum { BUF_FREE = 0, BUF_CUPTI, BUF_FULL };

struct buf {
	uint8_t *data;
	_Atomic int state;
	size_t valid;          /* bytes of records, set before state becomes BUF_FULL */
};

/* open NVTX ranges (writer thread only) */
struct open_range {
	uint32_t id;
	int64_t start;
	uint32_t name;         /* interned in the current batch trace */
	char text[96];
};

static struct {
	_Atomic int initialized;
	_Atomic int disabled;
	_Atomic int stop;
	_Atomic int64_t dropped;
	_Atomic int64_t pool_empty;      /* requests we could not serve */
	struct buf *bufs;
	size_t nbufs, buf_bytes;
	sem_t wake;
	pthread_t writer;
	bool writer_running;
	pthread_mutex_t flush_lock;      /* writer and at-exit flush never drain at once */
	CUpti_SubscriberHandle sub;
	/* writer-thread state */
	struct prof_db *db;
	int64_t run_id;
	int32_t rank;
	int flush_ms;
	int64_t live_bytes[64];          /* per device, from MEMORY2 */
	struct open_range *open;
	size_t nopen, open_cap;
	char db_path[512];
} G;

static void say(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "twinprof: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
}

static const char *cupti_str(CUptiResult r)
{
	const char *s = NULL;
	if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		s = "unknown CUPTI error";
	return s;
}

/* First failure wins: stop tracing, say so once. */
static void disable(const char *what, const char *why)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&G.disabled, &expected, 1))
		return;
	say("tracing disabled: %s: %s", what, why);
}

/* ---- the hot path: CUPTI's buffer callbacks ---------------------------------------------- */

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = NULL;
	*size = 0;
	*max_records = 0;
	if (atomic_load(&G.disabled))
		return;
	for (size_t i = 0; i < G.nbufs; i++) {
		int expected = BUF_FREE;
		if (atomic_compare_exchange_strong(&G.bufs[i].state, &expected, BUF_CUPTI)) {
			*buffer = G.bufs[i].data;
			*size = G.buf_bytes;
			return;
		}
	}
	atomic_fetch_add(&G.pool_empty, 1); /* CUPTI drops records and counts them */
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				   size_t valid)
{
	(void)ctx;
	(void)stream;
	(void)size;
	size_t dropped = 0;
	if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&G.dropped, (int64_t)dropped);
	for (size_t i = 0; i < G.nbufs; i++)
		if (G.bufs[i].data == buffer) {
			G.bufs[i].valid = valid;
			atomic_store(&G.bufs[i].state, BUF_FULL);
			sem_post(&G.wake); /* async-signal-safe, never blocks */
			return;
		}
}

/* ---- records to trace events (writer thread) --------------------------------------------- */

static void add_event(struct trace *t, int32_t device, int32_t stream, enum trace_cat cat,
		      uint64_t start, uint64_t end, int64_t bytes, const char *name)
{
	if (start == 0 || end < start)
		return; /* "no timing information" (header) */
	struct trace_event e = {.rank = G.rank, .device = device, .stream = stream, .cat = cat,
				.step = -1, .op_id = -1, .layer = -1, .micro = -1, .stage = -1,
				.phase = -1, .start_ns = (int64_t)start, .end_ns = (int64_t)end,
				.bytes = bytes};
	e.name = trace_intern(t, name ? name : "");
	trace_add(t, &e);
}

static void on_marker(struct trace *t, const CUpti_ActivityMarker2 *m)
{
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
		add_event(t, -1, -1, TRACE_MARKER, m->timestamp, m->timestamp, 0, m->name);
	} else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		TW_GROW(G.open, G.open_cap, G.nopen + 1);
		struct open_range *o = &G.open[G.nopen++];
		o->id = m->id;
		o->start = (int64_t)m->timestamp;
		snprintf(o->text, sizeof(o->text), "%s", m->name ? m->name : "");
	} else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		for (size_t i = 0; i < G.nopen; i++)
			if (G.open[i].id == m->id) {
				add_event(t, -1, -1, TRACE_MARKER, (uint64_t)G.open[i].start,
					  m->timestamp, 0, G.open[i].text);
				G.open[i] = G.open[--G.nopen];
				break;
			}
	}
}

static void parse_buffer(struct trace *t, uint8_t *data, size_t valid)
{
	CUpti_Activity *r = NULL;
	char name[64];
	for (;;) {
		CUptiResult rc = cuptiActivityGetNextRecord(data, valid, &r);
		if (rc != CUPTI_SUCCESS)
			break; /* MAX_LIMIT_REACHED is the normal end; INVALID_KIND an incomplete one */
		switch (r->kind) {
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
			const CUpti_ActivityKernel10 *k = (const void *)r;
			const char *n = k->name ? k->name : "kernel";
			add_event(t, (int32_t)k->deviceId, (int32_t)k->streamId,
				  prof_classify_kernel(n), k->start, k->end, 0, n);
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMCPY: {
			const CUpti_ActivityMemcpy6 *m = (const void *)r;
			enum trace_cat c = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? TRACE_H2D
					 : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? TRACE_D2H
					 : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP ? TRACE_P2P
											  : TRACE_COMPUTE_OTHER;
			snprintf(name, sizeof(name), "Memcpy %s",
				 c == TRACE_H2D ? "HtoD" : c == TRACE_D2H ? "DtoH"
				 : c == TRACE_P2P ? "PtoP" : "DtoD");
			add_event(t, (int32_t)m->deviceId, (int32_t)m->streamId, c, m->start, m->end,
				  (int64_t)m->bytes, name);
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMCPY2: {
			const CUpti_ActivityMemcpyPtoP4 *m = (const void *)r;
			add_event(t, (int32_t)m->deviceId, (int32_t)m->streamId, TRACE_P2P, m->start,
				  m->end, (int64_t)m->bytes, "Memcpy PtoP");
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMSET: {
			const CUpti_ActivityMemset4 *m = (const void *)r;
			add_event(t, (int32_t)m->deviceId, (int32_t)m->streamId, TRACE_COMPUTE_OTHER,
				  m->start, m->end, (int64_t)m->bytes, "Memset");
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMORY2: {
			const CUpti_ActivityMemory4 *m = (const void *)r;
			uint32_t d = m->deviceId < 64 ? m->deviceId : 63;
			if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
				G.live_bytes[d] += (int64_t)m->bytes;
			else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
				G.live_bytes[d] -= (int64_t)m->bytes;
			struct trace_mem_sample s = {G.rank, PLAN_DEV_GPU, -1, (int64_t)m->timestamp,
						     G.live_bytes[d]};
			trace_add_mem(t, &s);
			break;
		}
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
			/* host blocking: kept as a zero-cost marker, not GPU work */
			const CUpti_ActivitySynchronization2 *s = (const void *)r;
			static const char *const types[] = {"sync: unknown", "sync: event",
							    "sync: stream wait event", "sync: stream",
							    "sync: context"};
			add_event(t, -1, (int32_t)s->streamId, TRACE_MARKER, s->start, s->end, 0,
				  types[s->type <= 4 ? s->type : 0]);
			break;
		}
		case CUPTI_ACTIVITY_KIND_MARKER:
			on_marker(t, (const void *)r);
			break;
		default:
			break;
		}
	}
}

/* Drain every full buffer into one batch, append it (one transaction), free the buffers. */
static void drain(void)
{
	pthread_mutex_lock(&G.flush_lock);
	struct trace t;
	trace_init(&t, TRACE_KIND_EXEC, G.rank + 1);
	for (size_t i = 0; i < G.nbufs; i++) {
		if (atomic_load(&G.bufs[i].state) != BUF_FULL)
			continue;
		parse_buffer(&t, G.bufs[i].data, G.bufs[i].valid);
		atomic_store(&G.bufs[i].state, BUF_FREE);
	}
	if ((t.nev || t.nmem) && G.db && !atomic_load(&G.disabled)) {
		struct tw_err err = {0};
		if (prof_run_append(G.db, G.run_id, &t, &err) != TW_OK)
			disable("writing the trace", err.msg);
	}
	trace_release(&t);
	pthread_mutex_unlock(&G.flush_lock);
}

static void *writer_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&G.stop)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += G.flush_ms / 1000;
		ts.tv_nsec += (long)(G.flush_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		int rc = sem_timedwait(&G.wake, &ts);
		if (atomic_load(&G.stop))
			break;
		if (rc != 0 && errno == ETIMEDOUT && !atomic_load(&G.disabled))
			cuptiActivityFlushAll(0); /* completed buffers only; safe from any thread */
		drain();
	}
	return NULL;
}

/* ---- set-up and teardown ------------------------------------------------------------------ */

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, /* never KERNEL: it serialises kernels */
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMCPY2,
	CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_MEMORY2,
	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
	CUPTI_ACTIVITY_KIND_MARKER,
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static void CUPTIAPI on_callback(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id,
				 const void *data)
{
	(void)u;
	(void)d;
	(void)id;
	(void)data;
}

static void at_exit(void)
{
	if (!atomic_load(&G.initialized)) {
		/* preloaded but never initialised by the driver */
		const char *inj = getenv("CUDA_INJECTION64_PATH");
		if (inj && strstr(inj, "twinprof"))
			say("tracing disabled: %s%s", "the CUDA driver never loaded the injection "
			    "(no GPU or no driver on this machine?)", "");
		return;
	}
	if (G.writer_running) {
		if (!atomic_load(&G.disabled)) {
			for (size_t k = 0; k < NKINDS; k++)
				cuptiActivityDisable(kinds[k]);
			cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		}
		atomic_store(&G.stop, 1);
		sem_post(&G.wake);
		pthread_join(G.writer, NULL);
		G.writer_running = false;
		drain();
	}
	if (G.db) {
		struct tw_err err = {0};
		int64_t dropped = atomic_load(&G.dropped);
		if (!atomic_load(&G.disabled) &&
		    prof_run_finish(G.db, G.run_id, dropped, &err) != TW_OK)
			say("could not complete the run: %s%s", err.msg, "");
		if (dropped)
			fprintf(stderr, "twinprof: %lld activity records dropped (pool of %zu x %zu "
				"bytes full; raise TWIN_PROF_BUFFERS)\n", (long long)dropped, G.nbufs,
				G.buf_bytes);
		prof_db_close(G.db);
		G.db = NULL;
	}
	if (G.sub)
		cuptiUnsubscribe(G.sub);
}

static long env_long(const char *name, long def, long lo, long hi)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	long v = strtol(s, &end, 10);
	return *end || v < lo || v > hi ? def : v;
}

static int32_t env_rank(void)
{
	static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
					   "PMI_RANK"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		long v = env_long(vars[i], -1, 0, 1 << 24);
		if (v >= 0)
			return (int32_t)v;
	}
	return 0;
}

/* "%r" in TWIN_DB becomes the rank: per-rank files for 'twin profile merge' */
static void db_path(char *out, size_t len, int32_t rank)
{
	const char *p = getenv("TWIN_DB");
	if (!p || !*p)
		p = "twin.db";
	size_t k = 0;
	for (; *p && k + 12 < len; p++) {
		if (p[0] == '%' && p[1] == 'r') {
			k += (size_t)snprintf(out + k, len - k, "%d", rank);
			p++;
		} else {
			out[k++] = *p;
		}
	}
	out[k] = '\0';
}

static bool setup(void)
{
	CUptiResult r;
	G.rank = env_rank();
	G.flush_ms = (int)env_long("TWIN_PROF_FLUSH_MS", 2000, 10, 600000);
	G.nbufs = (size_t)env_long("TWIN_PROF_BUFFERS", 16, 2, 4096);
	G.buf_bytes = (size_t)env_long("TWIN_PROF_BUFFER_KB", 4096, 64, 1 << 20) * 1024;
	db_path(G.db_path, sizeof(G.db_path), G.rank);

	uint32_t version = 0;
	if ((r = cuptiGetVersion(&version)) != CUPTI_SUCCESS) {
		disable("cuptiGetVersion", cupti_str(r));
		return false;
	}
	r = cuptiSubscribe(&G.sub, on_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		G.sub = NULL;
		disable("cuptiSubscribe", "another CUPTI client is active (nsys, Nsight Compute or "
			"the PyTorch profiler); one CUPTI subscriber per process");
		return false;
	}
	if (r != CUPTI_SUCCESS) {
		G.sub = NULL;
		disable("cuptiSubscribe", cupti_str(r));
		return false;
	}
	/* the pool: fixed, allocated once, 8-byte aligned as CUPTI requires */
	G.bufs = calloc(G.nbufs, sizeof(*G.bufs));
	if (!G.bufs) {
		disable("allocating the buffer pool", strerror(ENOMEM));
		return false;
	}
	for (size_t i = 0; i < G.nbufs; i++) {
		G.bufs[i].data = aligned_alloc(8, G.buf_bytes);
		if (!G.bufs[i].data) {
			disable("allocating the buffer pool", strerror(ENOMEM));
			return false;
		}
	}
	struct tw_err err = {0};
	if (prof_db_open(G.db_path, &G.db, &err) != TW_OK) {
		disable("opening the store", err.msg);
		return false;
	}
	char cmd[256] = "";
	FILE *f = fopen("/proc/self/cmdline", "r");
	if (f) {
		size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
		fclose(f);
		for (size_t i = 0; i + 1 < n; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		cmd[n] = '\0';
	}
	const char *label = getenv("TWIN_RUN");
	struct prof_run_meta meta = {.kind = TRACE_KIND_EXEC, .name = label ? label : "live",
				     .backend = "cupti", .nranks = G.rank + 1, .source = cmd};
	if (prof_run_begin(G.db, &meta, &G.run_id, &err) != TW_OK) {
		disable("creating the run", err.msg);
		return false;
	}
	if ((r = cuptiActivityRegisterCallbacks(buf_requested, buf_completed)) != CUPTI_SUCCESS) {
		disable("cuptiActivityRegisterCallbacks", cupti_str(r));
		return false;
	}
	for (size_t k = 0; k < NKINDS; k++) {
		r = cuptiActivityEnable(kinds[k]);
		/* markers need NVTX_INJECTION64_PATH; the others are required */
		if (r != CUPTI_SUCCESS && kinds[k] != CUPTI_ACTIVITY_KIND_MARKER &&
		    kinds[k] != CUPTI_ACTIVITY_KIND_MEMORY2) {
			disable("cuptiActivityEnable", cupti_str(r));
			return false;
		}
	}
	if (sem_init(&G.wake, 0, 0) != 0 || pthread_mutex_init(&G.flush_lock, NULL) != 0) {
		disable("starting the writer", strerror(errno));
		return false;
	}
	if (pthread_create(&G.writer, NULL, writer_main, NULL) != 0) {
		disable("starting the writer", strerror(errno));
		return false;
	}
	G.writer_running = true;
	return true;
}

/* Called by the CUDA driver when CUDA_INJECTION64_PATH names this library. Returns 1 in every
 * case: a failure here must not stop the program. */
EXPORT int InitializeInjection(void)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&G.initialized, &expected, 1))
		return 1;
	if (!setup()) {
		for (size_t k = 0; k < NKINDS; k++)
			cuptiActivityDisable(kinds[k]);
		if (G.db) {
			prof_db_close(G.db);
			G.db = NULL;
		}
	}
	return 1;
}

/* at-exit work is registered at load time, so that a library preloaded into a program whose
 * driver never initialises can say why nothing was traced */
__attribute__((constructor)) static void on_load(void)
{
	atexit(at_exit);
}
