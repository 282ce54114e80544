/* cupti_trace — CUPTI activity collection for the cuda backend (exec/cuda/cupti.c). */
#ifndef TW_EXEC_CUPTI_TRACE_H
#define TW_EXEC_CUPTI_TRACE_H

#include "../../core/core.h"

struct twin_cupti_stats {
	int64_t records, matched;        /* GPU activity records; those tied to a plan op */
	int64_t memory_records, sync_records, dropped;
};

/* Register the buffers and enable the activity kinds (before the first op). */
enum tw_result twin_cupti_start(struct tw_err *err);
void twin_cupti_stop(void);
/* Around the CUDA calls of plan op `id - 1`. */
void twin_cupti_push(uint64_t id);
void twin_cupti_pop(void);
/* Now on CUPTI's clock (ns), to map its timestamps onto ours. */
int64_t twin_cupti_now(void);
/* Flush; start/end (nops entries, CUPTI ns, -1: no record) of every op since the last call. */
size_t twin_cupti_collect(int64_t *start, int64_t *end, size_t nops, struct twin_cupti_stats *st);

#endif
