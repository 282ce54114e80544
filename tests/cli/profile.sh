#!/bin/sh
# twin profile import / analyze / export / merge on the fixtures (answers worked by hand in
# docs/profiler.md), and malformed inputs.
. tests/lib.sh
has() { grep -Eq "$2" "$1"; }     # file, extended regexp
num() { grep -Eq "\"$2\":[[:space:]]*$3([,}]|$)" "$1"; } # file, key, value

K=tests/fixtures/kineto
sqlite3 "$d/rank0.sqlite" <tests/fixtures/nsys/rank0.sql

# --- Kineto: two ranks, one run
"$TWIN" profile import --kineto $K/rank0.json --kineto $K/rank1.json --name kin --db "$d/t.db" >"$d/o" 2>"$d/e"
check "import kineto exits 0" [ $? -eq 0 ]
check "import kineto reports the run" has "$d/o" '^run 1: 16 events, 2 ranks from 2 files'
"$TWIN" profile analyze kin --db "$d/t.db" --json >"$d/a.json" 2>"$d/e"
check "analyze kineto --json exits 0" [ $? -eq 0 ]
check "kineto step 95 us" num "$d/a.json" step_ns 95000
check "kineto compute 60 us" num "$d/a.json" compute_ns 60000
check "kineto exposed comm 20 us" num "$d/a.json" exposed_comm_ns 20000
check "kineto stall split 20/10/5 us" sh -c "grep -Eq '\"stall_comm_ns\":[[:space:]]*20000' '$d/a.json' && grep -Eq '\"stall_copy_ns\":[[:space:]]*10000' '$d/a.json' && grep -Eq '\"stall_host_ns\":[[:space:]]*5000' '$d/a.json'"
check "kineto all-reduce busbw 228.57 GB/s" has "$d/a.json" '"busbw_GBps":[[:space:]]*228\.57'
check "kineto straggler rank 1" sh -c "tr -d ' \t\n' <'$d/a.json' | grep -q '\"straggler\":{\"rank\":1,\"late_ns\":10000'"
"$TWIN" profile analyze 1 --db "$d/t.db" --per-rank >"$d/t.txt" 2>"$d/e"
check "analyze table has the collectives" has "$d/t.txt" '^all_reduce +0\.50 +4000000'
check "analyze table names the straggler" has "$d/t.txt" '^straggler: rank 1, 0\.010 ms late'
check "analyze --per-rank has 4 rows" [ "$(grep -Ec '^ +[01] +[12] ' "$d/t.txt")" -eq 4 ]

# --- nsys: one rank
"$TWIN" profile import --nsys "$d/rank0.sqlite" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "import nsys exits 0" [ $? -eq 0 ]
"$TWIN" profile analyze 2 --db "$d/t.db" --json >"$d/n.json" 2>"$d/e"
check "nsys step 85 us" num "$d/n.json" step_ns 85000
check "nsys compute 52.5 us" num "$d/n.json" compute_ns 52500
check "nsys exposed comm 10 us" num "$d/n.json" exposed_comm_ns 10000
check "nsys host gaps 17.5 us" num "$d/n.json" stall_host_ns 17500

# --- export: Chrome JSON that imports back to the same answers
"$TWIN" profile export kin --chrome "$d/x.json" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "export exits 0" [ $? -eq 0 ]
check "export has Kineto fields" sh -c "grep -q '\"traceEvents\"' '$d/x.json' && grep -q '\"cat\": \"kernel\"' '$d/x.json' && grep -q '\"baseTimeNanoseconds\"' '$d/x.json'"
"$TWIN" profile import --kineto "$d/x.json" --db "$d/t.db" --json >"$d/o" 2>"$d/e"
"$TWIN" profile analyze 3 --db "$d/t.db" --json >"$d/b.json" 2>"$d/e"
check "export round trip keeps the step" num "$d/b.json" step_ns 95000
check "export round trip keeps the straggler" num "$d/b.json" late_ns 10000

# --- a simulated run's trace imports back with its FLOPs (model vs recomputed), the NCCL
# algorithm of its collectives and the layer / micro-batch tags
"$TWIN" simulate -m gpt2-124m -c dgx-a100-80g --gpus 8 -s examples/strategies/megatron-175b.json \
	--set tp=2 --set pp=2 --set global_batch=8 --set seq_len=1024 --json --trace "$d/sim.json" >"$d/s.json" 2>"$d/e"
"$TWIN" profile import --kineto "$d/sim.json" --name simback --db "$d/sim.db" >"$d/o" 2>"$d/e"
"$TWIN" profile analyze simback --db "$d/sim.db" --json >"$d/sb.json" 2>"$d/e"
cat >"$d/cmp.py" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["analysis"]
b = json.load(open(sys.argv[2]))
ok = s["hw_flops"] > s["model_flops"] > 0  # full recompute: hardware FLOPs exceed model FLOPs
ok = ok and abs(b["model_flops"] - s["model_flops"]) <= 1e-9 * s["model_flops"]
ok = ok and abs(b["hw_flops"] - s["hw_flops"]) <= 1e-9 * s["hw_flops"]
a, c = s["collectives"]["all_reduce"], b["collectives"]["all_reduce"]
ok = ok and a["nccl_algo"] in ("ring", "tree", "nvls") and a["nccl_proto"] in ("LL", "LL128", "Simple")
ok = ok and (a["nccl_algo"], a["nccl_proto"], a["nccl_algo_share"]) == (c["nccl_algo"], c["nccl_proto"], c["nccl_algo_share"])
print(ok)
EOF
check "simulated trace round trip keeps FLOPs and the NCCL algorithm" [ "$(python3 "$d/cmp.py" "$d/s.json" "$d/sb.json")" = True ]

# an export imported again analyses the same: host work (the CPU optimizer, exported as cpu_op),
# categories by twin's own word, the optimizer phase and the recorded peak memory come back
"$TWIN" simulate -m gpt2-124m -c dgx-a100-80g --gpus 8 --ds-config tests/fixtures/exec/ds-z3-offload.json \
	--db "$d/rt.db" --trace "$d/rt.json" >/dev/null 2>"$d/e"
"$TWIN" profile import --kineto "$d/rt.json" --name back --db "$d/rt.db" >/dev/null 2>>"$d/e"
"$TWIN" profile analyze 1 --db "$d/rt.db" --json >"$d/rt1.json" 2>>"$d/e"
"$TWIN" profile analyze back --db "$d/rt.db" --json >"$d/rt2.json" 2>>"$d/e"
check "export then import: the same breakdown, optimizer and peak memory" python3 -c "
import json
a, b = (json.load(open(f)) for f in ('$d/rt1.json', '$d/rt2.json'))
keys = ('step_ns', 'compute_ns', 'comm_ns', 'copy_ns', 'idle_ns', 'optimizer_ns', 'peak_mem_bytes')
assert all(a[k] == b[k] for k in keys), [(k, a[k], b[k]) for k in keys if a[k] != b[k]]
assert a['categories_ns'] == b['categories_ns'], (a['categories_ns'], b['categories_ns'])
assert a['categories_ns']['host'] > 0 and a['peak_mem_bytes'] > 0
"

# --- export of one rank, for HTA (one file per rank)
"$TWIN" profile export kin --rank 1 --chrome "$d/r1.json" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "export --rank writes that rank only" sh -c "grep -q '\"rank\": 1, \"world_size\": 2' '$d/r1.json' && ! grep -q '\"pid\": 0,' '$d/r1.json'"
"$TWIN" profile export kin --rank 5 --chrome "$d/r5.json" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "export --rank of an absent rank: exit 2" sh -c "[ $? -eq 2 ] && grep -q 'has no events of rank 5' '$d/e'"

# --- merge: per-rank databases into one run
"$TWIN" profile import --kineto $K/rank0.json --db "$d/r0.db" >/dev/null 2>&1
"$TWIN" profile import --kineto $K/rank1.json --db "$d/r1.db" >/dev/null 2>&1
"$TWIN" profile merge "$d/r0.db" "$d/r1.db" --name merged --db "$d/t.db" >"$d/o" 2>"$d/e"
check "merge exits 0" [ $? -eq 0 ]
check "merge reports 2 ranks" has "$d/o" '16 events of 2 ranks merged from 2 files'
"$TWIN" profile analyze merged --db "$d/t.db" --json >"$d/m.json" 2>"$d/e"
check "merged run analyses like the two-file import" num "$d/m.json" exposed_comm_ns 20000
"$TWIN" profile merge "$d/r0.db" "$d/r0.db" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "merge refuses one rank twice" sh -c "[ $? -eq 2 ] && grep -q 'rank 0 is also in' '$d/e'"
# a per-rank database written twice holds two runs of its rank: refused, not mixed
"$TWIN" profile import --kineto $K/rank0.json --db "$d/r0.db" >/dev/null 2>&1
"$TWIN" profile merge "$d/r0.db" "$d/r1.db" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "merge refuses a rank in two runs of one file" sh -c "[ $? -eq 2 ] && grep -q 'rank 0 is in two of its runs' '$d/e'"
# a simulated run merged alone keeps its recorded peak memory
"$TWIN" simulate -m gpt2-124m -c dgx-a100-80g --gpus 8 --db "$d/sim1.db" >/dev/null 2>&1
"$TWIN" profile merge "$d/sim1.db" --name sm --db "$d/sm.db" >/dev/null 2>"$d/e"
"$TWIN" profile analyze 1 --db "$d/sim1.db" --json >"$d/p1.json" 2>>"$d/e"
"$TWIN" profile analyze sm --db "$d/sm.db" --json >"$d/p2.json" 2>>"$d/e"
check "merge keeps the runs' peak memory" python3 -c "import json; a = json.load(open('$d/p1.json'))['peak_mem_bytes']; b = json.load(open('$d/p2.json'))['peak_mem_bytes']; assert a > 0 and a == b, (a, b)"

# --- malformed nsys files: clear one-line errors, exit 2
bad_nsys() { # name, SQL edit, expected message
	cp "$d/rank0.sqlite" "$d/bad.sqlite"
	sqlite3 "$d/bad.sqlite" "$2"
	"$TWIN" profile import --nsys "$d/bad.sqlite" --db "$d/t.db" >"$d/o" 2>"$d/e"
	st=$?
	if [ $st -eq 2 ] && [ ! -s "$d/o" ] && [ "$(wc -l <"$d/e")" -eq 1 ] && grep -q "$3" "$d/e"; then
		echo "ok - $1"
	else
		echo "not ok - $1: status $st: $(cat "$d/e")"
	fi
}
bad_nsys "nsys missing StringIds" "DROP TABLE StringIds" "no StringIds table"
bad_nsys "nsys missing kernel tables" "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY" "no CUPTI_ACTIVITY_KIND_KERNEL or _MEMCPY table"
bad_nsys "nsys wrong type" "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 'later' WHERE rowid = 1" "row 1: end is text, expected an integer"
bad_nsys "nsys missing column" "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN copyKind" "has no column 'copyKind'"
head -c 3000 "$d/rank0.sqlite" >"$d/trunc.sqlite"
"$TWIN" profile import --nsys "$d/trunc.sqlite" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "nsys truncated file: exit 2, one line" sh -c "[ $? -eq 2 ] && [ \$(wc -l <'$d/e') -eq 1 ]"
"$TWIN" runs --db "$d/t.db" >"$d/o" 2>&1
check "failed imports leave no runs behind" [ "$(grep -c complete "$d/o")" -eq 4 ]
