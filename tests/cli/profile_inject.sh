#!/bin/sh
# libtwinprof.so: loads into a small CUDA program and, with no GPU or driver here, disables
# itself with one line on stderr while the program runs on unchanged.
BUILD=${BUILD:-build}
LIB=$(pwd)/$BUILD/libtwinprof.so
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$LIB" ] || [ ! -f "$CUDA_HOME/include/cuda_runtime.h" ]; then
	echo "ok - inject skipped: no libtwinprof.so (built only with CUDA and CUPTI)"
	exit 0
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cat >"$d/prog.c" <<'PROG'
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
/* argv[1]: call the library's InitializeInjection as the CUDA driver would */
int main(int argc, char **argv)
{
	if (argc > 1) {
		void *h = dlopen(argv[1], RTLD_NOW);
		int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
		printf("init=%d\n", init ? init() : -1);
	}
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	printf("cudaGetDeviceCount=%d\n", (int)e);
	return 0;
}
PROG
if ! cc -o "$d/prog" "$d/prog.c" -I"$CUDA_HOME/include" -L"$CUDA_HOME/lib64" \
	-Wl,-rpath,"$CUDA_HOME/lib64" -lcudart -ldl 2>"$d/cc.err"; then
	echo "not ok - inject: cannot build the test program: $(head -c 300 "$d/cc.err")"
	exit 1
fi
check() { # name, condition...
	n=$1
	shift
	if "$@"; then echo "ok - $n"; else echo "not ok - $n"; fi
}
one_line() { [ "$(wc -l <"$1")" -eq 1 ]; }

# exported entry point only
check "inject exports InitializeInjection" sh -c "nm -D --defined-only '$LIB' | grep -q ' T InitializeInjection$'"
check "inject exports nothing else" sh -c "[ \$(nm -D --defined-only '$LIB' | grep -c ' T ') -eq 1 ]"

# 1. as a user runs it, preloaded so that it is in the process even without a driver
CUDA_INJECTION64_PATH=$LIB LD_PRELOAD=$LIB TWIN_DB="$d/a.db" "$d/prog" >"$d/1.out" 2>"$d/1.err"
st=$?
check "inject: program exits 0" [ "$st" -eq 0 ]
check "inject: program output unchanged" grep -q '^cudaGetDeviceCount=' "$d/1.out"
check "inject: one stderr line" one_line "$d/1.err"
check "inject: says tracing is disabled" grep -q '^twinprof: tracing disabled: .*no GPU or no driver' "$d/1.err"

# 2. the driver's call, made directly: CUPTI cannot start without a driver
CUDA_INJECTION64_PATH=$LIB TWIN_DB="$d/b.db" "$d/prog" "$LIB" >"$d/2.out" 2>"$d/2.err"
st=$?
check "inject init: program exits 0" [ "$st" -eq 0 ]
check "inject init: InitializeInjection returns 1" grep -q '^init=1$' "$d/2.out"
check "inject init: one stderr line" one_line "$d/2.err"
check "inject init: says tracing is disabled" grep -q '^twinprof: tracing disabled: cupti' "$d/2.err"
check "inject init: no store written when disabled" [ ! -f "$d/b.db" ]

# 3. The whole pipeline with a stand-in CUPTI (preloaded, so it shadows the real one): the
# buffer pool, the writer thread, the at-exit flush, the store, the dropped-record count.
# Scripted records, rank 3 (ns): NVTX "step 0" [990000, 1095000); gemm [1000000, 1040000);
# NCCL all-reduce [1020000, 1070000); H2D 1 MB [1070000, 1080000); memset [1080000, 1085000);
# 1 GiB allocated. Hand-worked: step 105 us, compute 45, comm 50, exposed 30, idle 60 =
# 30 comm + 10 copy + 20 host, peak 1 GiB.
cat >"$d/fake.c" <<'FAKE'
#include <cupti.h>
#include <stdlib.h>
#include <string.h>
static CUpti_BuffersCallbackRequestFunc req;
static CUpti_BuffersCallbackCompleteFunc done;
static int emitted;
static size_t drop_once;
CUptiResult cuptiGetVersion(uint32_t *v) { *v = CUPTI_API_VERSION; return CUPTI_SUCCESS; }
CUptiResult cuptiGetResultString(CUptiResult r, const char **s) { (void)r; *s = "fake"; return CUPTI_SUCCESS; }
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc f, void *u)
{
	(void)f; (void)u; *h = (CUpti_SubscriberHandle)1;
	const char *d = getenv("FAKE_CUPTI_DROP");
	drop_once = d ? (size_t)atol(d) : 0;
	return getenv("FAKE_CUPTI_MULTI") ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED : CUPTI_SUCCESS;
}
CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h) { (void)h; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) { (void)k; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) { (void)k; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c)
{ req = r; done = c; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n)
{ (void)c; (void)s; *n = drop_once; drop_once = 0; return CUPTI_SUCCESS; }
static size_t rec_size(CUpti_ActivityKind k)
{
	switch (k) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
	case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
	case CUPTI_ACTIVITY_KIND_MARKER: return sizeof(CUpti_ActivityMarker2);
	default: return 0;
	}
}
#define ALIGN8(x) (((x) + 7) & ~(size_t)7)
CUptiResult cuptiActivityGetNextRecord(uint8_t *b, size_t valid, CUpti_Activity **r)
{
	size_t off = 0;
	if (*r) {
		off = (size_t)((uint8_t *)*r - b) + ALIGN8(rec_size((*r)->kind));
	}
	if (off >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*r = (CUpti_Activity *)(b + off);
	return CUPTI_SUCCESS;
}
static uint8_t *put(uint8_t *p, const void *rec, CUpti_ActivityKind k)
{
	memcpy(p, rec, rec_size(k));
	return p + ALIGN8(rec_size(k));
}
CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	(void)flag;
	if (emitted || !req) return CUPTI_SUCCESS;
	emitted = 1;
	uint8_t *buf = NULL; size_t size = 0, max = 0;
	req(&buf, &size, &max);
	if (!buf) return CUPTI_SUCCESS;
	uint8_t *p = buf;
	CUpti_ActivityMarker2 m = {0};
	m.kind = CUPTI_ACTIVITY_KIND_MARKER; m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START; m.timestamp = 990000; m.id = 1; m.name = "step 0";
	p = put(p, &m, m.kind);
	CUpti_ActivityKernel10 k = {0};
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL; k.start = 1000000; k.end = 1040000; k.deviceId = 0; k.streamId = 7;
	k.name = "_Z22ampere_sgemm_128x64_tnv";
	p = put(p, &k, k.kind);
	k.start = 1020000; k.end = 1070000; k.streamId = 13; k.name = "_Z36ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
	p = put(p, &k, k.kind);
	CUpti_ActivityMemcpy6 c = {0};
	c.kind = CUPTI_ACTIVITY_KIND_MEMCPY; c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD; c.bytes = 1000000;
	c.start = 1070000; c.end = 1080000; c.streamId = 14;
	p = put(p, &c, c.kind);
	CUpti_ActivityMemset4 s = {0};
	s.kind = CUPTI_ACTIVITY_KIND_MEMSET; s.start = 1080000; s.end = 1085000; s.streamId = 7; s.bytes = 4096;
	p = put(p, &s, s.kind);
	CUpti_ActivityMemory4 a = {0};
	a.kind = CUPTI_ACTIVITY_KIND_MEMORY2; a.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	a.bytes = 1073741824; a.timestamp = 1000000;
	p = put(p, &a, a.kind);
	CUpti_ActivitySynchronization2 y = {0};
	y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION; y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
	y.start = 1085000; y.end = 1090000; y.streamId = 7;
	p = put(p, &y, y.kind);
	m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END; m.timestamp = 1095000; m.name = NULL;
	p = put(p, &m, m.kind);
	done(NULL, 0, buf, size, (size_t)(p - buf));
	return CUPTI_SUCCESS;
}
FAKE
cat >"$d/run.c" <<'RUN'
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* the driver's call; "kill": die by SIGKILL after the periodic flush */
int main(int argc, char **argv)
{
	void *h = dlopen(argv[1], RTLD_NOW);
	int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
	if (!init || init() != 1)
		return 3;
	if (argc > 2 && !strcmp(argv[2], "kill")) {
		usleep(800000);
		raise(SIGKILL);
	}
	return 0;
}
RUN
if cc -shared -fPIC -o "$d/libfakecupti.so" "$d/fake.c" -I"$CUDA_HOME/include" 2>"$d/cc.err" &&
	cc -o "$d/run" "$d/run.c" -ldl 2>>"$d/cc.err"; then
	TWIN=${TWIN:-$(pwd)/$BUILD/twin}
	RANK=3 TWIN_DB="$d/live.db" TWIN_RUN=fake LD_PRELOAD="$d/libfakecupti.so" "$d/run" "$LIB" >"$d/3.out" 2>"$d/3.err"
	check "fake CUPTI: traced program exits 0 silently" sh -c "[ $? -eq 0 ] && [ ! -s '$d/3.err' ]"
	"$TWIN" runs --db "$d/live.db" >"$d/runs" 2>&1
	check "fake CUPTI: one complete cupti run of 6 events" grep -Eq '^ +1 +exec +cupti +4 +1 +6 +complete .* fake$' "$d/runs"
	"$TWIN" profile analyze fake --db "$d/live.db" --json >"$d/a.json" 2>&1
	flat=$(tr -d ' \t\n' <"$d/a.json")
	for kv in step_ns:105000 compute_ns:45000 comm_ns:50000 exposed_comm_ns:30000 idle_ns:60000 \
		stall_comm_ns:30000 stall_copy_ns:10000 stall_host_ns:20000 peak_mem_bytes:1073741824; do
		case "$flat" in
		*"\"${kv%%:*}\":${kv#*:},"*) echo "ok - fake CUPTI: ${kv%%:*} = ${kv#*:}" ;;
		*) echo "not ok - fake CUPTI: ${kv%%:*} != ${kv#*:}: $(head -c 400 "$d/a.json")" ;;
		esac
	done
	# dropped records are counted into the run and reported once
	FAKE_CUPTI_DROP=7 TWIN_DB="$d/drop.db" LD_PRELOAD="$d/libfakecupti.so" "$d/run" "$LIB" >"$d/4.out" 2>"$d/4.err"
	check "fake CUPTI: dropped records reported in one line" sh -c "[ \$(wc -l <'$d/4.err') -eq 1 ] && grep -q '^twinprof: 7 activity records dropped' '$d/4.err'"
	check "fake CUPTI: dropped records stored" sh -c "'$TWIN' runs --db '$d/drop.db' | grep -q 'dropped 7'"
	# another CUPTI client in the process
	FAKE_CUPTI_MULTI=1 TWIN_DB="$d/multi.db" LD_PRELOAD="$d/libfakecupti.so" "$d/run" "$LIB" >"$d/5.out" 2>"$d/5.err"
	check "fake CUPTI: second subscriber: exits 0, one line" sh -c "[ $? -eq 0 ] && [ \$(wc -l <'$d/5.err') -eq 1 ] && grep -q 'another CUPTI client is active' '$d/5.err'"
	# killed after a periodic flush: an incomplete run that holds what was flushed
	TWIN_PROF_FLUSH_MS=50 TWIN_DB="$d/kill.db" LD_PRELOAD="$d/libfakecupti.so" "$d/run" "$LIB" kill >"$d/6.out" 2>"$d/6.err"
	check "fake CUPTI: killed process leaves an incomplete run with its events" sh -c "'$TWIN' runs --db '$d/kill.db' | grep -Eq '^ +1 +exec +cupti +1 +1 +6 +incomplete'"
else
	echo "not ok - fake CUPTI: cannot build: $(head -c 300 "$d/cc.err")"
fi
