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
