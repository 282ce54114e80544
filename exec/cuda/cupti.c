/* cupti — the cuda backend's activity tracing (docs/executor.md; reference/profiling.md §1).
 *
 * Enabled kinds: CONCURRENT_KERNEL, MEMCPY, MEMSET (what ran on the GPU and when), MEMORY2 and
 * SYNCHRONIZATION (counted), RUNTIME, DRIVER and EXTERNAL_CORRELATION (to tie each kernel to the plan op
 * that launched it: the backend pushes op id + 1 as a CUSTOM0 external id around the op's
 * calls). After each step, twin_cupti_collect flushes the buffers and gives every op the span
 * from its first kernel's start to its last kernel's end, on CUPTI's clock.
 *
 * CUPTI's buffer callbacks take no user pointer, so the collector is one static object guarded
 * by a mutex — the one piece of global state in exec/, forced by the API. */
#include "cupti_trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef TWIN_HAVE_CUPTI
#include <cupti.h>

/* Record revisions: the ones of the CUPTI we build with (13.x, checked here); for older CUPTI
 * (CUDA 11/12) the oldest revisions they all define. start, end and correlationId sit at the
 * same offsets in every revision since Kernel5 / Memcpy4 / Memset3, which is all we read. */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 twin_kernel_rec;
typedef CUpti_ActivityMemcpy6 twin_memcpy_rec;
typedef CUpti_ActivityMemset4 twin_memset_rec;
#else
typedef CUpti_ActivityKernel5 twin_kernel_rec;
typedef CUpti_ActivityMemcpy4 twin_memcpy_rec;
typedef CUpti_ActivityMemset3 twin_memset_rec;
#endif

struct rec { uint32_t corr; uint64_t start, end; };
struct ext { uint32_t corr; uint64_t id; };

static struct collector {
	pthread_mutex_t mu;
	struct rec *recs;
	size_t nrecs, recs_cap;
	struct ext *exts;
	size_t nexts, exts_cap;
	int64_t memory_records, sync_records, dropped;
} col = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define BUF_BYTES (8u << 20)

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = aligned_alloc(8, BUF_BYTES);
	*size = *buf ? BUF_BYTES : 0;
	*max_records = 0;
}

static void add_rec(uint32_t corr, uint64_t start, uint64_t end)
{
	if (!start || end < start)
		return; /* no timing was collected for it */
	TW_GROW(col.recs, col.recs_cap, col.nrecs + 1);
	col.recs[col.nrecs++] = (struct rec){corr, start, end};
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	(void)ctx, (void)stream, (void)size;
	CUpti_Activity *r = NULL;
	pthread_mutex_lock(&col.mu);
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		switch (r->kind) {
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
			const twin_kernel_rec *k = (const void *)r;
			add_rec(k->correlationId, k->start, k->end);
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMCPY: {
			const twin_memcpy_rec *m = (const void *)r;
			add_rec(m->correlationId, m->start, m->end);
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMSET: {
			const twin_memset_rec *m = (const void *)r;
			add_rec(m->correlationId, m->start, m->end);
			break;
		}
		case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
			const CUpti_ActivityExternalCorrelation *e = (const void *)r;
			if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
				TW_GROW(col.exts, col.exts_cap, col.nexts + 1);
				col.exts[col.nexts++] = (struct ext){e->correlationId, e->externalId};
			}
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMORY2:
			col.memory_records++;
			break;
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
			col.sync_records++;
			break;
		default:
			break;
		}
	}
	size_t dropped = 0;
	cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped);
	col.dropped += (int64_t)dropped;
	pthread_mutex_unlock(&col.mu);
	free(buf);
}

static enum tw_result cupti_failed(CUptiResult r, const char *call, struct tw_err *err)
{
	const char *s = NULL;
	cuptiGetResultString(r, &s);
	return tw_errf(err, TW_ERR_CUPTI, "%s: %s", call, s ? s : "unknown CUPTI error");
}

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_RUNTIME,
	CUPTI_ACTIVITY_KIND_DRIVER /* NCCL and cuBLAS may launch through the driver API */,
	CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

enum tw_result twin_cupti_start(struct tw_err *err)
{
	CUptiResult r = cuptiActivityRegisterCallbacks(buf_request, buf_complete);
	if (r != CUPTI_SUCCESS)
		return cupti_failed(r, "cuptiActivityRegisterCallbacks", err);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		r = cuptiActivityEnable(kinds[i]);
		if (r != CUPTI_SUCCESS)
			return cupti_failed(r, "cuptiActivityEnable", err);
	}
	return TW_OK;
}

void twin_cupti_stop(void)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		cuptiActivityDisable(kinds[i]);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_lock(&col.mu);
	free(col.recs);
	free(col.exts);
	col.recs = NULL;
	col.exts = NULL;
	col.nrecs = col.recs_cap = col.nexts = col.exts_cap = 0;
	pthread_mutex_unlock(&col.mu);
}

void twin_cupti_push(uint64_t id)
{
	cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void twin_cupti_pop(void)
{
	uint64_t last = 0;
	cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

int64_t twin_cupti_now(void)
{
	uint64_t t = 0;
	cuptiGetTimestamp(&t);
	return (int64_t)t;
}

static int by_corr(const void *a, const void *b)
{
	uint32_t x = ((const struct ext *)a)->corr, y = ((const struct ext *)b)->corr;
	return x < y ? -1 : x > y;
}

size_t twin_cupti_collect(int64_t *start, int64_t *end, size_t nops, struct twin_cupti_stats *st)
{
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_lock(&col.mu);
	for (size_t i = 0; i < nops; i++)
		start[i] = end[i] = -1;
	qsort(col.exts, col.nexts, sizeof(*col.exts), by_corr);
	size_t matched = 0;
	for (size_t i = 0; i < col.nrecs; i++) {
		struct ext key = {col.recs[i].corr, 0};
		const struct ext *e = bsearch(&key, col.exts, col.nexts, sizeof(key), by_corr);
		if (!e || e->id == 0 || e->id > nops)
			continue;
		size_t op = (size_t)(e->id - 1);
		int64_t s = (int64_t)col.recs[i].start, f = (int64_t)col.recs[i].end;
		if (start[op] < 0 || s < start[op])
			start[op] = s;
		if (f > end[op])
			end[op] = f;
		matched++;
	}
	if (st) {
		st->records = (int64_t)col.nrecs;
		st->matched = (int64_t)matched;
		st->memory_records = col.memory_records;
		st->sync_records = col.sync_records;
		st->dropped = col.dropped;
	}
	col.nrecs = col.nexts = 0;
	pthread_mutex_unlock(&col.mu);
	return matched;
}

#else /* CUDA without CUPTI: op spans come from CUDA events alone */

enum tw_result twin_cupti_start(struct tw_err *err)
{
	return tw_errf(err, TW_ERR_UNSUPPORTED, "CUPTI is not in this build");
}
void twin_cupti_stop(void) {}
void twin_cupti_push(uint64_t id) { (void)id; }
void twin_cupti_pop(void) {}
int64_t twin_cupti_now(void) { return 0; }
size_t twin_cupti_collect(int64_t *start, int64_t *end, size_t nops, struct twin_cupti_stats *st)
{
	(void)start, (void)end, (void)nops;
	if (st)
		memset(st, 0, sizeof(*st));
	return 0;
}
#endif
