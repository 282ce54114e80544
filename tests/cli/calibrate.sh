#!/bin/sh
# twin calibrate: --quick on the host writes a cluster file that loads (topo show) and
# simulates, with every measured field noted "measured by twin calibrate"; under mpirun with
# 2 ranks the MPI all-reduce bandwidth is written too; --backend cuda without a GPU refuses in
# one line with exit 2 and writes nothing. Needs $TWIN; run from the repo root.
. tests/lib.sh
err=$tmp/err

py() { # python expression on the parsed JSON file $1 (as d)
	python3 -c "import json,sys; d=json.load(open('$1')); print($2)"
}

"$TWIN" calibrate --backend host -c host-cpu -o "$tmp/mine.json" --quick >"$tmp/out" 2>"$err"
st=$?
check "calibrate host --quick: exits 0" "[ $st -eq 0 ]"
check "calibrate host --quick: says what it wrote" "grep -q 'wrote $tmp/mine.json' '$tmp/out'"
check "calibrate host --quick: nothing on stderr" "[ ! -s '$err' ]"
check "calibrate: no temporaries left" "[ \$(ls '$tmp' | grep -c tmp) -eq 0 ]"
check "calibrate: file is named after the output" "[ \"\$(py '$tmp/mine.json' 'd[\"name\"]')\" = mine ]"
check "calibrate: measured fp32 peak is positive and noted" \
	"[ \"\$(py '$tmp/mine.json' 'd[\"gpu\"][\"peak_tflops\"][\"fp32\"] > 0 and \"measured by twin calibrate on\" in d[\"gpu\"][\"peak_tflops\"][\"note\"]')\" = True ]"
check "calibrate: eff.gemm table from the sweep (first threshold 0, eff in (0, 1], one is 1)" \
	"[ \"\$(py '$tmp/mine.json' 'd[\"eff\"][\"gemm\"][\"min_flops\"][0] == 0 and all(0 < e <= 1 for e in d[\"eff\"][\"gemm\"][\"eff\"]) and max(d[\"eff\"][\"gemm\"][\"eff\"]) == 1 and \"measured by\" in d[\"eff\"][\"gemm\"][\"note\"]')\" = True ]"
check "calibrate: memory bandwidth measured and noted" \
	"[ \"\$(py '$tmp/mine.json' 'd[\"gpu\"][\"hbm_GBps\"] > 0 and \"measured by twin calibrate\" in d[\"gpu\"][\"hbm_GBps_note\"] and \"measured by\" in d[\"node\"][\"cpu_mem_GBps_note\"]')\" = True ]"
check "calibrate: unmeasured fields keep the base's notes" \
	"[ \"\$(py '$tmp/mine.json' '\"measured by\" not in d[\"gpu\"][\"launch_us_note\"]')\" = True ]"
"$TWIN" topo show "$tmp/mine.json" >"$tmp/topo" 2>"$err"
check "calibrate: written file loads (topo show)" "[ \$? -eq 0 ] && grep -q mine '$tmp/topo'"
"$TWIN" simulate -m tiny -c "$tmp/mine.json" -s tiny-host --gpus 4 >"$tmp/sim" 2>"$err"
check "calibrate: twin simulate -c written.json works" "grep -q '^step time' '$tmp/sim'"
"$TWIN" calibrate --backend host -c host-cpu -o "$tmp/mine.json" --quick --json >"$tmp/c.json" 2>"$err"
check "calibrate --json: parses, has the sweep" "[ \"\$(py '$tmp/c.json' 'len(d[\"gemm\"]) >= 4 and d[\"mem_GBps\"] > 0')\" = True ]"

# two MPI ranks: the all-reduce bus bandwidth becomes the shared-memory link
if [ -z "${TWIN_TEST_NO_MPI:-}" ] && command -v mpirun >/dev/null 2>&1; then
	mpirun --allow-run-as-root --oversubscribe -np 2 "$TWIN" calibrate --backend host -c host-cpu \
		-o "$tmp/mpi.json" --quick >"$tmp/out" 2>"$err"
	check "calibrate under mpirun -np 2: exits 0" "[ \$? -eq 0 ]"
	check "calibrate under mpirun -np 2: all-reduce busbw written and noted" \
		"[ \"\$(py '$tmp/mpi.json' 'd[\"node\"][\"pcie_GBps\"] > 0 and \"MPI_Allreduce\" in d[\"node\"][\"pcie_GBps_note\"]')\" = True ]"
	check "calibrate under mpirun -np 2: one report" "[ \$(grep -c '^wrote' '$tmp/out') -eq 1 ]"
fi

# cuda without a GPU: one line, exit 2, no file
"$TWIN" calibrate --backend cuda -c dgx-h100 -o "$tmp/gpu.json" --quick >"$tmp/out" 2>"$err"
st=$?
if nvidia-smi >/dev/null 2>&1; then
	check "calibrate cuda: exits 0 on a GPU machine" "[ $st -eq 0 ] && [ -s '$tmp/gpu.json' ]"
else
	check "calibrate cuda without a GPU: exit 2" "[ $st -eq 2 ]"
	check "calibrate cuda without a GPU: one stderr line, nothing on stdout" \
		"[ \$(wc -l <'$err') -eq 1 ] && [ ! -s '$tmp/out' ]"
	check "calibrate cuda without a GPU: writes nothing" "[ ! -e '$tmp/gpu.json' ]"
fi

# an output that a rename would replace wrongly (a FIFO, a symbolic link, a directory) is
# refused before anything is measured, and left as it was
mkfifo "$tmp/fifo"
ln -s "$tmp/target.json" "$tmp/link.json"
: >"$tmp/target.json"
for o in "$tmp/fifo" "$tmp/link.json" "$tmp"; do
	"$TWIN" calibrate --backend host -c host-cpu -o "$o" --quick >"$tmp/out" 2>"$err"
	st=$?
	check "calibrate -o ${o#"$tmp"/}: exit 2, one line, before measuring" \
		"[ $st -eq 2 ] && [ \$(wc -l <'$err') -eq 1 ] && [ ! -s '$tmp/out' ]"
done
check "calibrate: the FIFO and the link are left as they were" \
	"[ -p '$tmp/fifo' ] && [ -L '$tmp/link.json' ] && [ ! -s '$tmp/target.json' ]"
