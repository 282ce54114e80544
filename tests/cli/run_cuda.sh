#!/bin/sh
# twin run --backend cuda where there is no GPU (what CI sees): one line that says so and
# names --backend host, exit status 2, nothing on stdout, no store written. The cuda backend is
# a library twin loads (build/libtwin_cuda.so): twin itself links no CUDA library, a missing or
# broken library is one line naming the file, and with a stand-in driver (an empty
# libcuda.so.1) the real library loads and its probe refuses. On a machine with a GPU,
# tests/gpu/check.sh covers the cuda backend instead.
TWIN=${TWIN:-build/twin}
# twin run starts MPI before it looks for a GPU; make test-valgrind (TWIN_TEST_NO_MPI) leaves
# this out like the other MPI checks (Open MPI itself is not valgrind-clean)
[ -z "${TWIN_TEST_NO_MPI:-}" ] || exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# refuses NAME ERR_SUBSTRING... : the last command exited 2 with one stderr line holding every
# substring, wrote nothing on stdout and no store
refuses() {
	st=$? name=$1
	shift
	lines=$(wc -l <"$tmp/err")
	ok=1
	[ "$st" -eq 2 ] && [ "$lines" -eq 1 ] && [ ! -s "$tmp/out" ] && [ ! -e "$tmp/x.db" ] || ok=0
	for s in "$@"; do
		grep -qF -- "$s" "$tmp/err" || ok=0
	done
	if [ $ok -eq 1 ]; then
		echo "ok - $name: exit 2, one line: $(cat "$tmp/err")"
	else
		echo "not ok - $name: status $st, $lines lines: $(head -c 400 "$tmp/err")"
	fi
}
run_cuda() {
	"$TWIN" run -m tiny -c host-cpu --gpus 1 --backend cuda --db "$tmp/x.db" >"$tmp/out" 2>"$tmp/err"
}

# twin starts without any CUDA library (when it is a binary ldd can read)
if ldd "$TWIN" 2>/dev/null | grep -q 'libc\.so'; then
	cu=$(ldd "$TWIN" | grep -E 'lib(cuda|cudart|cublas|cublasLt|nccl|cupti)\.' | tr -s ' \t\n' ' ')
	if [ -z "$cu" ]; then
		echo "ok - twin links no CUDA library"
	else
		echo "not ok - twin links CUDA libraries: $cu"
	fi
fi

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
	echo "ok - run cuda without a GPU # SKIP this machine has a GPU (run tests/gpu/check.sh)"
	exit 0
fi
if ! "$TWIN" --version | grep -q '^features:.* cuda'; then
	run_cuda
	refuses "run cuda in a build without CUDA" "backend 'cuda' is not in this build" "--backend host"
	exit 0
fi
run_cuda
refuses "run cuda without a GPU" "no CUDA GPU or driver" "--backend host"

# the library missing: named, with the reason
TWIN_CUDA_BACKEND="$tmp/none/libtwin_cuda.so" run_cuda
refuses "run cuda, library missing" "$tmp/none/libtwin_cuda.so: No such file" "--backend host"

# a stand-in driver gets past the driver check: the library itself is loaded
if command -v cc >/dev/null 2>&1 && mkdir "$tmp/drv" &&
	echo 'int twin_test_stand_in_driver;' >"$tmp/drv/d.c" &&
	cc -shared -fPIC -o "$tmp/drv/libcuda.so.1" "$tmp/drv/d.c" 2>/dev/null; then
	LD_LIBRARY_PATH="$tmp/drv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" run_cuda
	refuses "run cuda, stand-in driver: the library loads, its probe refuses" \
		"no CUDA GPU or driver on this machine (cudaGetDeviceCount:" "--backend host"
	echo "not a library" >"$tmp/bad.so"
	LD_LIBRARY_PATH="$tmp/drv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TWIN_CUDA_BACKEND="$tmp/bad.so" run_cuda
	refuses "run cuda, library not loadable: dlerror names it" \
		"cannot load the cuda backend: $tmp/bad.so:" "--backend host"
	LD_LIBRARY_PATH="$tmp/drv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		"$TWIN" calibrate --backend cuda -c dgx-h100 -o "$tmp/x.db" --quick >"$tmp/out" 2>"$tmp/err"
	refuses "calibrate cuda, stand-in driver: the library loads, no GPU" \
		"calibrate --backend cuda: no CUDA GPU or driver on this machine (cudaGetDeviceCount:" \
		"--backend host measures CPU ranks"
else
	echo "ok - run cuda with a stand-in driver # SKIP no C compiler"
fi
