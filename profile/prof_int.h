/* prof_int — helpers shared by the importers (internal to profile/). */
#ifndef TW_PROF_INT_H
#define TW_PROF_INT_H

#include "profile.h"

/* A host-side step range (PyTorch ProfilerStep#N, NVTX "step N"), ns; or, for
 * prof_check_steps, a GPU-side one (Kineto's gpu_user_annotation, one per stream). */
struct prof_host_step {
	int64_t step, start_ns, end_ns;
	int32_t rank;
	int32_t device; /* GPU-side: the GPU; host ranges: -1 */
	int32_t stream; /* GPU-side: the stream (tid; 0 when it was not a number); host: -1 */
};

/* Check one file's step ranges (sorts s): on one rank, ranges of one step must overlap or
 * touch — on one stream of one GPU (per_stream: GPU-side ranges, one per stream and step) a
 * step may appear once, across streams its ranges join whatever the gaps. Steps whose spans
 * overlap are allowed (an asynchronous collective or a prefetch copy of step N still runs when
 * step N+1 starts on another stream; Kineto widens each range by 1 ns): the analysis ends a
 * window where the next begins. Errors name path, the rank, the step and its times. */
enum tw_result prof_check_steps(struct prof_host_step *s, size_t n, bool per_stream,
				const char *path, struct tw_err *err);

/* Turn host-side step ranges into GPU-side step markers for rank's events t->ev[first ..
 * first + count):
 * launch_ns[i - first] is the host time the event was launched (-1: unknown). A GPU event
 * belongs to the step whose host range holds its launch; step N on the GPU runs from its first
 * event to the first event of step N+1. Without launch times the host ranges are used as they
 * are. Only steps and events of `rank` are considered. Adds TRACE_MARKER events named
 * "ProfilerStep#N". */
void prof_steps_to_gpu(struct trace *t, int32_t rank, size_t first, size_t count,
		       const int64_t *launch_ns, const struct prof_host_step *steps, size_t nsteps);

/* A blank event: every tag unknown. */
struct trace_event prof_blank_event(int32_t rank);

#endif
