#!/bin/sh
# twin compare: A beside B per category and collective type, difference and relative error.
. tests/lib.sh
flat() { tr -d ' \t\n' <"$1"; }
K=tests/fixtures/kineto
sqlite3 "$d/n.sqlite" <tests/fixtures/nsys/rank0.sql
"$TWIN" profile import --kineto $K/rank0.json --kineto $K/rank1.json --name kin --db "$d/t.db" >/dev/null 2>&1
"$TWIN" profile import --nsys "$d/n.sqlite" --name nsys --db "$d/t.db" >/dev/null 2>&1
"$TWIN" compare kin nsys --db "$d/t.db" --json >"$d/j" 2>"$d/e"
check "compare --json exits 0" [ $? -eq 0 ]
# step: A 95 us, B 85 us -> diff -10 us, rel -10/95
check "compare step diff" sh -c "flat() { tr -d ' \t\n' <\"\$1\"; }; flat '$d/j' | grep -q '\"step_ns\":{\"a\":95000,\"b\":85000,\"diff\":-10000,\"rel_err\":-0.10526'"
check "compare per collective" sh -c "tr -d ' \t\n' <'$d/j' | grep -q '\"reduce_scatter\":{\"count\":{\"a\":0,\"b\":0.5,\"diff\":0.5,\"rel_err\":null}'"
"$TWIN" compare kin kin --db "$d/t.db" --json >"$d/s" 2>"$d/e"
check "a run against itself: no difference" sh -c "! tr -d ' \t\n' <'$d/s' | grep -Eq '\"diff\":-?[1-9]'"
"$TWIN" compare 1 2 --db "$d/t.db" >"$d/o" 2>"$d/e"
check "compare table" sh -c "grep -Eq '^step +0\.095 +0\.085 +-0\.010 +-10\.5%' '$d/o' && grep -q '^all_reduce busbw GB/s' '$d/o'"
"$TWIN" compare kin nope --db "$d/t.db" >"$d/o" 2>"$d/e"
check "unknown run: exit 2, one line" sh -c "[ $? -eq 2 ] && [ \$(wc -l <'$d/e') -eq 1 ] && grep -q \"no run 'nope'\" '$d/e'"
# what NCCL ran, side by side: two simulated runs that differ in the algorithm the strategy
# names (NVLSTree across two H100 nodes); measured imports say nothing (null)
for s in "" "--set nccl_algo=Ring,Tree,NVLSTree"; do
	"$TWIN" simulate -m llama2-7b -c dgx-h100 --gpus 16 -s megatron-175b --set tp=1 --set pp=1 \
		--set global_batch=32 --set precision=bf16 $s --db "$d/a.db" >/dev/null 2>"$d/e"
done
"$TWIN" compare 1 2 --db "$d/a.db" >"$d/o" 2>"$d/e"
check "compare: the algorithm each run's collectives ran" \
	grep -Eq '^all_reduce algorithm +A ring/Simple, B nvlstree/Simple$' "$d/o"
"$TWIN" compare 1 2 --db "$d/a.db" --json >"$d/j2" 2>"$d/e"
check "compare --json: nccl_algo per side" sh -c "tr -d ' \t\n' <'$d/j2' | grep -q '\"nccl_algo\":{\"a\":\"ring/Simple\",\"b\":\"nvlstree/Simple\"}'"
check "compare --json: null where a measured run does not say" sh -c "tr -d ' \t\n' <'$d/j' | grep -q '\"nccl_algo\":{\"a\":null,\"b\":null}'"
"$TWIN" compare kin nsys --db "$d/t.db" >"$d/o2" 2>"$d/e"
check "compare: no algorithm row when neither run says" sh -c "! grep -q ' algorithm ' '$d/o2'"
# a name with control characters (stored by an older build) is printed with '?', on one line
sqlite3 "$d/t.db" "UPDATE runs SET name = 'k' || char(10) || 'in' WHERE name = 'kin'"
"$TWIN" compare 1 2 --db "$d/t.db" >"$d/o3" 2>"$d/e"
check "compare: control characters in a name are not printed" sh -c "[ $? -eq 0 ] && grep -q 'k?in' '$d/o3'"
# readers parse ids strictly: '+1' is a name, not run 1
"$TWIN" compare +1 2 --db "$d/t.db" >"$d/o" 2>"$d/e"
check "compare: '+1' is not id 1" sh -c "[ $? -eq 2 ] && grep -q \"no run '+1'\" '$d/e'"
