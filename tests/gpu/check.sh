#!/bin/sh
# tests/gpu/check.sh — the executor's check on a machine with an NVIDIA GPU (a few minutes).
#
#   sh tests/gpu/check.sh            (from anywhere; it works in the repository root)
#
# 1. Finds the CUDA toolkit, NCCL, cuBLAS and CUPTI: under CUDA_HOME (default /usr/local/cuda,
#    or the nvcc on PATH), else inside the Python wheels (nvidia-nccl-cu*, nvidia-cublas-cu*,
#    nvidia-cuda-cupti-cu*: `python3 -c 'import nvidia.nccl'`), for which it makes a shim
#    directory with the unversioned .so links the linker wants; passes NCCL_HOME, CUBLAS_HOME,
#    CUPTI_HOME to make and builds build/twin and build/libtwin_cuda.so (the cuda backend, which
#    links those libraries and which twin dlopens for --backend cuda).
# 2. Runs a single-GPU step of a ~1.3B-parameter GPT (tests/fixtures/exec/gpt-1b.json), ZeRO
#    stage 0, then with the optimizer offloaded to the CPU: twin simulate (predicted) beside
#    twin run --backend cuda (measured): step time and breakdown, peak memory.
# 3. GEMM and copy sanity: achieved TFLOP/s of the GEMMs and GB/s of the offload copies, from the
#    stored trace, against plausible bounds for the device.
# Everything it prints is also kept under tests/gpu/results/<UTC date>-<device>/.
# Exit status: 0 all ran, 1 something failed, 2 no GPU here.
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "check.sh: no NVIDIA GPU or driver here (nvidia-smi -L fails); nothing to check" >&2
	exit 2
fi
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
DEV=$(echo "$GPU" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')
OUT="$ROOT/tests/gpu/results/$(date -u +%Y%m%d-%H%M)-$DEV"
mkdir -p "$OUT"
LOG="$OUT/check.log"
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
fail=0

say "# twin GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')"
say "device: $GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$LOG" 2>&1

# ---- 1. toolkit and libraries -------------------------------------------------------------
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$CUDA_HOME/bin/nvcc" ] && command -v nvcc >/dev/null 2>&1; then
	CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
fi
if [ ! -f "$CUDA_HOME/include/cuda_runtime.h" ]; then
	say "check.sh: no CUDA toolkit (cuda_runtime.h) under $CUDA_HOME; set CUDA_HOME"
	exit 1
fi

# pkgdir MODULE: the directory of a Python package (namespace packages have no __file__)
pkgdir() {
	python3 -c "import importlib, sys; m = importlib.import_module('$1'); print(list(m.__path__)[0])" 2>/dev/null
}
SHIM="$ROOT/build/gpu-shim"
# shim NAME PKGDIR LIB...: include/ and lib/ of a wheel, with libX.so -> libX.so.N links
shim() {
	name=$1 dir=$2
	shift 2
	d="$SHIM/$name"
	rm -rf "$d"
	mkdir -p "$d/lib"
	ln -s "$dir/include" "$d/include"
	for f in "$dir"/lib/*.so*; do
		[ -e "$f" ] && ln -sf "$f" "$d/lib/"
	done
	for l in "$@"; do
		v=$(ls "$dir"/lib/"$l".so.* 2>/dev/null | head -n 1)
		[ -n "$v" ] && ln -sf "$v" "$d/lib/$l.so"
	done
	echo "$d"
}
# find HEADER SUBDIR_IN_CUDA_HOME PYMODULE SHIMNAME LIB...
find_lib() {
	hdr=$1 mod=$2 name=$3
	shift 3
	for d in "$CUDA_HOME" "$CUDA_HOME/extras/CUPTI"; do
		if [ -f "$d/include/$hdr" ]; then
			echo "$d"
			return 0
		fi
	done
	p=$(pkgdir "$mod")
	if [ -n "$p" ] && [ -f "$p/include/$hdr" ]; then
		shim "$name" "$p" "$@"
		return 0
	fi
	return 1
}
NCCL_HOME=$(find_lib nccl.h nvidia.nccl nccl libnccl) || { say "check.sh: NCCL not found (apt install libnccl-dev, or pip install nvidia-nccl-cu12)"; exit 1; }
CUBLAS_HOME=$(find_lib cublas_v2.h nvidia.cublas cublas libcublas libcublasLt) || { say "check.sh: cuBLAS not found"; exit 1; }
CUPTI_HOME=$(find_lib cupti.h nvidia.cuda_cupti cupti libcupti) || { say "check.sh: CUPTI not found"; exit 1; }
say "CUDA_HOME=$CUDA_HOME NCCL_HOME=$NCCL_HOME CUBLAS_HOME=$CUBLAS_HOME CUPTI_HOME=$CUPTI_HOME"

JOBS=$(nproc 2>/dev/null || echo 4)
if ! make -j"$JOBS" CUDA_HOME="$CUDA_HOME" NCCL_HOME="$NCCL_HOME" CUBLAS_HOME="$CUBLAS_HOME" \
	CUPTI_HOME="$CUPTI_HOME" build/twin build/libtwin_cuda.so >"$OUT/build.log" 2>&1; then
	say "check.sh: build failed (last lines of $OUT/build.log):"
	tail -n 20 "$OUT/build.log" | tee -a "$LOG"
	exit 1
fi
TWIN="$ROOT/build/twin"
"$TWIN" --version | tee -a "$LOG"
if ! "$TWIN" --version | grep -q "features:.*cuda"; then
	say "check.sh: build/twin has no cuda backend"
	exit 1
fi
# the backend library finds every library it links (rpath into CUDA_HOME or the wheel shims)
say "build/libtwin_cuda.so links: $(ldd "$ROOT/build/libtwin_cuda.so" | awk '/=>/ { print $1 }' | grep -E 'cu|nccl' | tr '\n' ' ')"
if ldd "$ROOT/build/libtwin_cuda.so" | grep -q "not found"; then
	say "check.sh: build/libtwin_cuda.so has unresolved libraries:"
	ldd "$ROOT/build/libtwin_cuda.so" | grep "not found" | tee -a "$LOG"
	exit 1
fi

# ---- 2. one GPU, ~1.3B GPT: predicted vs measured ---------------------------------------------
case "$GPU" in
*H200*) CLUSTER=dgx-h200 ;;
*H100*) CLUSTER=dgx-h100 ;;
*B200*) CLUSTER=dgx-b200 ;;
*A100*80*) CLUSTER=dgx-a100-80g ;;
*A100*) CLUSTER=dgx-a100-40g ;;
*V100*) CLUSTER=dgx1-v100-32g ;;
*) CLUSTER=dgx-h100 ; say "note: no cluster file for '$GPU'; predictions use dgx-h100" ;;
esac
MODEL=tests/fixtures/exec/gpt-1b.json
DB="$OUT/twin.db"
say "model: $MODEL ($("$TWIN" model show "$MODEL" 2>/dev/null | grep -i -m 1 param))"
say "cluster: $CLUSTER"

for s in gpu-z0 gpu-z2-offload; do
	S=tests/fixtures/exec/$s.json
	say ""
	say "## $s"
	say "### predicted (twin memory, twin simulate)"
	timeout 300 "$TWIN" memory -m "$MODEL" -c "$CLUSTER" --gpus 1 -s "$S" >"$OUT/$s.memory.txt" 2>&1
	tee -a "$LOG" <"$OUT/$s.memory.txt"
	timeout 300 "$TWIN" simulate -m "$MODEL" -c "$CLUSTER" --gpus 1 -s "$S" --db "$DB" \
		>"$OUT/$s.simulate.txt" 2>&1 || say "(twin simulate failed: status $?)"
	tee -a "$LOG" <"$OUT/$s.simulate.txt"
	say "### measured (twin run --backend cuda --steps 3 --warmup 2)"
	timeout 600 "$TWIN" run -m "$MODEL" -c "$CLUSTER" --gpus 1 -s "$S" --backend cuda --steps 3 \
		--warmup 2 --timeout 300 --verify --db "$DB" --name "check-$s" >"$OUT/$s.run.txt" 2>&1
	st=$?
	tee -a "$LOG" <"$OUT/$s.run.txt"
	if [ "$st" -ne 0 ]; then
		say "twin run failed: status $st"
		fail=1
		continue
	fi
	# the same run as JSON is in the store; compare the newest simulation with it
	ids=$(python3 - "$DB" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
sim = db.execute("select max(id) from runs where kind = 'sim'").fetchone()[0]
ex = db.execute("select max(id) from runs where kind = 'exec'").fetchone()[0]
print(sim or "", ex or "")
EOF
)
	set -- $ids
	if [ $# -eq 2 ]; then
		say "### predicted (run $1) vs measured (run $2): twin compare"
		timeout 120 "$TWIN" compare "$1" "$2" --db "$DB" >"$OUT/$s.compare.txt" 2>&1
		tee -a "$LOG" <"$OUT/$s.compare.txt"
	fi
done

# ---- 3. GEMM and copy sanity from the stored traces -------------------------------------------
say ""
say "## GEMM and copy sanity (achieved rates in the measured traces)"
python3 - "$DB" "$GPU" >>"$LOG.sanity" 2>&1 <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
gpu = sys.argv[2]
# dense bf16 peak TFLOP/s and host<->device GB/s one way, for plausibility bounds only
peak = next((v for k, v in [("B200", 2250), ("H200", 989), ("H100", 989), ("A100", 312), ("V100", 125)] if k in gpu), 500)
pcie = 64 if ("H" in gpu or "B200" in gpu) else 32
bad = 0
for run, name in db.execute("select id, name from runs where kind = 'exec' order by id"):
    q = """select c.name, sum(e.flops), sum(e.bytes), sum(e.end_ns - e.start_ns), count(*)
           from events e join categories c on c.id = e.category where e.run_id = ? group by c.name"""
    for cat, flops, nbytes, ns, n in db.execute(q, (run,)):
        if not ns:
            continue
        if cat == "gemm":
            tf = flops / ns / 1e3
            ok = 0.05 * peak <= tf <= 1.05 * peak
            bad += not ok
            print(f"run {run} {name}: gemm {n} kernels, {tf:.1f} TFLOP/s achieved (peak {peak}): {'plausible' if ok else 'SUSPECT'}")
        elif cat in ("h2d", "d2h"):
            gbs = nbytes / ns
            ok = 1 <= gbs <= 1.1 * pcie
            bad += not ok
            print(f"run {run} {name}: {cat} {n} copies, {nbytes / 2**30:.2f} GiB at {gbs:.1f} GB/s (link ~{pcie} GB/s): {'plausible' if ok else 'SUSPECT'}")
sys.exit(1 if bad else 0)
EOF
st=$?
cat "$LOG.sanity"
cat "$LOG.sanity" >>"$LOG"
rm -f "$LOG.sanity"
[ "$st" -ne 0 ] && fail=1

say ""
say "results: $OUT"
exit $fail
