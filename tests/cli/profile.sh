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
"$TWIN" profile import --kineto $K/rank1.json --db "$d/one.db" >"$d/o1" 2>&1
check "import of one rank's file says how many of the job's ranks it holds" has "$d/o1" '^run 1: 8 events, 2 ranks \(1 traced\) from 1 file'
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
# the same step named again by a short range on another thread: one span, the same figures
cp "$d/rank0.sqlite" "$d/dup.sqlite"
sqlite3 "$d/dup.sqlite" "INSERT INTO NVTX_EVENTS(start, end, eventType, text, globalTid, domainId) VALUES (0, 10, 59, 'step 1', 72057611548332179, 0)"
"$TWIN" profile import --nsys "$d/dup.sqlite" --db "$d/dup.db" >"$d/o" 2>"$d/e"
"$TWIN" profile analyze 1 --db "$d/dup.db" --json >"$d/nd.json" 2>>"$d/e"
check "nsys: a step's ranges on two threads are one span (step)" num "$d/nd.json" step_ns 85000
check "nsys: a step's ranges on two threads are one span (compute)" num "$d/nd.json" compute_ns 52500

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
cp "$d/r0.db" "$d/r0b.db"
"$TWIN" profile merge "$d/r0.db" "$d/r0b.db" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "merge refuses one rank twice" sh -c "[ $? -eq 2 ] && grep -q 'rank 0 is also in' '$d/e'"
"$TWIN" profile merge "$d/r0.db" "$d/r0.db" --db "$d/t.db" >"$d/o" 2>"$d/e"
check "merge refuses one file given twice" sh -c "[ $? -eq 2 ] && grep -q 'are the same file' '$d/e'"
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
bad_nsys "nsys NVTX step ending before it starts (named by rowid)" "UPDATE NVTX_EVENTS SET end = 50 WHERE rowid = 2" "NVTX_EVENTS row 2: end 50 < start 100000"
bad_nsys "nsys errors name the rowid, not a counter" "DELETE FROM NVTX_EVENTS WHERE rowid = 1; UPDATE NVTX_EVENTS SET start = 'x' WHERE rowid = 2" "NVTX_EVENTS row 2: start is text"
bad_nsys "nsys time beyond the int64 ns bound" "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE rowid = 1" "row 1: end is 9223372036854775807, out of range"
bad_nsys "nsys negative time" "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -100 WHERE rowid = 1" "row 1: start is -100, out of range"
bad_nsys "nsys kernel name id not in StringIds" "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 999, shortName = 998 WHERE rowid = 1" "demangledName 999 / shortName 998: no such id in StringIds"
bad_nsys "nsys stream id beyond int32" "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 1099511627776 WHERE rowid = 1" "streamId is 1099511627776, out of range"
bad_nsys "nsys report of several processes (a whole launcher)" "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = 1000 + rowid" "processes (globalPid) in one report"
bad_nsys "nsys one step in two ranges" "INSERT INTO NVTX_EVENTS(start, end, eventType, text) VALUES (300000, 400000, 59, 'step 1')" "step 1 appears twice on rank 0"
"$TWIN" runs --db "$d/t.db" >"$d/o" 2>&1
check "failed nsys imports leave no runs behind" [ "$(grep -c complete "$d/o")" -eq 4 ]

# --- exact times: epoch microseconds (1.7e15 us, a double resolves 0.25 us) to the ns
cat >"$d/epoch.json" <<'J'
{"traceEvents":[
{"ph":"X","cat":"kernel","name":"ampere_gemm","pid":0,"tid":7,"ts":1696118400000000.100,"dur":0.100},
{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum","pid":0,"tid":20,"ts":1696118400000000.200,"dur":0.100},
{"ph":"X","cat":"kernel","name":"ampere_gemm","pid":0,"tid":7,"ts":1696118400000000.300,"dur":0.100}
]}
J
"$TWIN" profile import --kineto "$d/epoch.json" --db "$d/ep.db" >/dev/null 2>"$d/e"
"$TWIN" profile analyze 1 --db "$d/ep.db" --json >"$d/ep.json" 2>>"$d/e"
check "epoch-us timestamps exact: step 300 ns, exposed 100, idle 100" sh -c \
	"grep -Eq '\"step_ns\":[[:space:]]*300,' '$d/ep.json' && grep -Eq '\"exposed_comm_ns\":[[:space:]]*100,' '$d/ep.json' && grep -Eq '\"idle_ns\":[[:space:]]*100,' '$d/ep.json'"
check "epoch-us start stored to the ns" [ "$(sqlite3 "$d/ep.db" 'SELECT MIN(start_ns) FROM events')" = 1696118400000000100 ]
cat >"$d/base.json" <<'J'
{"baseTimeNanoseconds": 1696118400000000123, "traceEvents":[
{"ph":"X","cat":"kernel","name":"ampere_gemm","pid":0,"tid":7,"ts":0.001,"dur":1}
]}
J
"$TWIN" profile import --kineto "$d/base.json" --db "$d/ep.db" >/dev/null 2>"$d/e"
check "baseTimeNanoseconds read exactly" [ "$(sqlite3 "$d/ep.db" 'SELECT start_ns FROM events WHERE run_id = 2')" = 1696118400000000124 ]

# --- steps: Kineto's per-stream GPU annotations of one step are one window; an export writes
# one range per step and imports back
cat >"$d/ps.json" <<'J'
{"traceEvents":[
{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#1","pid":0,"tid":7,"ts":0,"dur":90},
{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#1","pid":0,"tid":20,"ts":95,"dur":5},
{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#2","pid":0,"tid":7,"ts":100,"dur":100},
{"ph":"X","cat":"kernel","name":"ampere_gemm","pid":0,"tid":7,"ts":0,"dur":90,"args":{"device":0,"stream":7}},
{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum","pid":0,"tid":20,"ts":95,"dur":5,"args":{"device":0,"stream":20}},
{"ph":"X","cat":"kernel","name":"ampere_gemm","pid":0,"tid":7,"ts":100,"dur":100,"args":{"device":0,"stream":7}}
]}
J
"$TWIN" profile import --kineto "$d/ps.json" --db "$d/ps.db" >/dev/null 2>"$d/e"
check "one step on two streams: one window" sh -c "'$TWIN' profile analyze 1 --db '$d/ps.db' --json | grep -Eq '\"step_ns\":[[:space:]]*100000,'"
"$TWIN" profile export 1 --db "$d/ps.db" --chrome "$d/ps_x.json" >/dev/null 2>"$d/e"
check "export writes one range per step" [ "$(grep -c 'ProfilerStep#1' "$d/ps_x.json")" -eq 1 ]
"$TWIN" profile import --kineto "$d/ps_x.json" --db "$d/ps.db" >/dev/null 2>"$d/e"
check "the export imports back with the same step" sh -c "'$TWIN' profile analyze 2 --db '$d/ps.db' --json | grep -Eq '\"step_ns\":[[:space:]]*100000,'"
# kernels overlapping on one stream (CUDA graphs, programmatic dependent launch): kept, said
cat >"$d/ovk.json" <<'J'
{"traceEvents":[
{"ph":"X","cat":"kernel","name":"ampere_gemm","pid":0,"tid":7,"ts":0,"dur":100,"args":{"device":0,"stream":7}},
{"ph":"X","cat":"kernel","name":"ampere_gemm","pid":0,"tid":7,"ts":50,"dur":100,"args":{"device":0,"stream":7}}
]}
J
"$TWIN" profile import --kineto "$d/ovk.json" --db "$d/ovk.db" >/dev/null 2>"$d/e"
check "kernels overlapping on one stream: imported with a note" sh -c "[ $? -eq 0 ] && grep -q 'note: 1 GPU event starts over 1 us before' '$d/e'"
check "... and counted once" sh -c "'$TWIN' profile analyze 1 --db '$d/ovk.db' --json | grep -Eq '\"compute_ns\":[[:space:]]*150000,'"

# --- large traces are read an element at a time (a whole-file cJSON tree is ~7x the text):
# the same events pretty-printed and compact analyse alike, peak memory stays near the file
# size, and a cut file is refused naming the element
python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
ev, t = [], 0.0
for s in range(1, 4):
    t0 = t
    for k in range(5000):
        c = s * 100000 + k
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": round(t, 3), "dur": 5.0,
                   "args": {"External id": c, "Input Dims": [[8, 1024], [1024, 1024]], "Concrete Inputs": ["", "\"cuda:0\"", "[1]"]}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": round(t + 1, 3),
                   "dur": 3.0, "args": {"correlation": c}})
        if k % 50 == 0:
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0, "tid": 20,
                       "ts": round(t + 8, 3), "dur": 6.5, "args": {"device": 0, "stream": 20, "correlation": c,
                       "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1048576,
                       "Out msg nelems": 1048576, "Group size": 8, "Process Group Name": "0"}})
        else:
            ev.append({"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm {[\"tn\"]}", "pid": 0, "tid": 7,
                       "ts": round(t + 8, 3), "dur": 6.5, "args": {"device": 0, "stream": 7, "correlation": c,
                       "grid": [132, 1, 1], "block": [256, 1, 1]}})
        ev.append({"ph": "f", "id": c, "pid": 0, "tid": 7, "ts": round(t + 8, 3), "cat": "ac2g", "name": "ac2g", "bp": "e"})
        t += 10
    ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % s, "pid": 1, "tid": 1, "ts": round(t0, 3),
               "dur": round(t - t0 - 1, 3)})
doc = {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": ev,
       "baseTimeNanoseconds": 1696118400000000000}
json.dump(doc, open(d + "/large.json", "w"), indent=1)
json.dump(doc, open(d + "/large_compact.json", "w"), separators=(",", ":"))
PY
# the child's exit status and peak RSS (KiB)
peak() { python3 -c "
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)" "$@"; }
set -- $(peak "$TWIN" profile import --kineto "$d/large.json" --name big --db "$d/lg.db")
lg_st=${1:-1} lg_kib=${2:-0}
"$TWIN" profile import --kineto "$d/large_compact.json" --name big --db "$d/lgc.db" >/dev/null 2>"$d/e"
"$TWIN" profile analyze big --db "$d/lg.db" --json >"$d/lg.json" 2>>"$d/e"
"$TWIN" profile analyze big --db "$d/lgc.db" --json >"$d/lgc.json" 2>>"$d/e"
check "large trace: 3 steps, pretty-printed and compact analyse alike" sh -c \
	"[ $lg_st -eq 0 ] && cmp -s '$d/lg.json' '$d/lgc.json' && grep -Eq '\"nsteps\":[[:space:]]*3,' '$d/lg.json' && grep -q all_reduce '$d/lg.json'"
# (a plain binary only: valgrind and ASan have their own memory)
if [ "$(head -c 4 "$TWIN" | od -An -c | tr -d ' ')" = 177ELF ] && ! grep -q __asan_init "$TWIN"; then
	size=$(wc -c <"$d/large.json")
	check "large trace: peak memory under 2x the file + 40 MB" [ $((lg_kib * 1024)) -lt $((2 * size + 40000000)) ]
fi
head -c 6000000 "$d/large.json" >"$d/cut.json"
"$TWIN" profile import --kineto "$d/cut.json" --db "$d/cut.db" >"$d/o" 2>"$d/e"
check "a cut trace: one line naming the file, line, column and element" sh -c \
	"[ $? -eq 2 ] && [ \$(wc -l <'$d/e') -eq 1 ] && grep -Eq 'cut.json:[0-9]+:[0-9]+: malformed JSON \(in traceEvents\[[0-9]+\]\)' '$d/e' && [ ! -e '$d/cut.db' ]"

# --- the same file twice is one rank, not two; merge never writes into an input
cp $K/rank0.json "$d/k0.json"
ln -s k0.json "$d/k0link.json"
"$TWIN" profile import --kineto "$d/k0.json" --kineto "$d/k0link.json" --db "$d/same.db" >"$d/o" 2>"$d/e"
check "import: one file through a symlink is refused" sh -c "[ $? -eq 2 ] && grep -q 'are the same file' '$d/e' && [ ! -e '$d/same.db' ]"
ln -s t.db "$d/tlink.db"
"$TWIN" profile merge "$d/r1.db" "$d/t.db" --db "$d/tlink.db" >"$d/o" 2>"$d/e"
check "merge: output that is an input (through a symlink) is refused" sh -c "[ $? -eq 2 ] && grep -q 'is the input' '$d/e'"
cp "$d/r1.db" "$d/inc.db"
sqlite3 "$d/inc.db" "UPDATE runs SET complete = 0"
"$TWIN" profile merge "$d/inc.db" --db "$d/mi.db" >"$d/o" 2>"$d/e"
check "merge refuses an incomplete run and writes nothing" sh -c "[ $? -eq 2 ] && grep -q 'run 1 is incomplete' '$d/e' && [ ! -e '$d/mi.db' ]"

# --- names: no control characters, no numbers; ids parsed strictly
"$TWIN" profile import --kineto $K/rank0.json --name "$(printf 'x\n!touch %s/pwned\n' "$d")" --db "$d/nm.db" >"$d/o" 2>"$d/e"
check "a name with a newline is refused (one line)" sh -c "[ $? -eq 2 ] && [ \$(wc -l <'$d/e') -eq 1 ] && grep -q 'control characters' '$d/e' && [ ! -e '$d/nm.db' ]"
"$TWIN" profile import --kineto $K/rank0.json --name 7 --db "$d/nm.db" >"$d/o" 2>"$d/e"
check "a numeric name is refused" sh -c "[ $? -eq 2 ] && grep -q 'may not be a number' '$d/e'"
"$TWIN" profile import --kineto $K/rank0.json --db "$d/nm.db" >/dev/null 2>&1
"$TWIN" profile analyze " 1" --db "$d/nm.db" >"$d/o" 2>"$d/e"
check "' 1' is not id 1" sh -c "[ $? -eq 2 ] && grep -q \"no run ' 1'\" '$d/e'"
"$TWIN" profile analyze +1 --db "$d/nm.db" >"$d/o" 2>"$d/e"
check "'+1' is not id 1" sh -c "[ $? -eq 2 ] && grep -q \"no run '+1'\" '$d/e'"
sqlite3 "$d/nm.db" "UPDATE runs SET name = '42' WHERE id = 1"
"$TWIN" profile analyze 42 --db "$d/nm.db" >"$d/o" 2>"$d/e"
check "an old store's numeric name is still found" [ $? -eq 0 ]
sqlite3 "$d/nm.db" "UPDATE runs SET name = 'a' || char(10) || 'b' WHERE id = 1"
"$TWIN" runs --db "$d/nm.db" >"$d/o" 2>"$d/e"
check "runs prints an old control-character name escaped" sh -c "grep -q ' a?b\$' '$d/o' && [ \$(wc -l <'$d/o') -eq 2 ]"

# --- foreign and empty files: nothing in them changes
sqlite3 "$d/for.sqlite" <tests/fixtures/nsys/rank0.sql
sum0=$(cksum <"$d/for.sqlite")
"$TWIN" runs --db "$d/for.sqlite" >/dev/null 2>"$d/e"; st1=$?
"$TWIN" profile import --kineto $K/rank0.json --db "$d/for.sqlite" >/dev/null 2>>"$d/e"; st2=$?
check "a foreign SQLite file is refused by readers and writers" [ $st1 -eq 2 ] && [ $st2 -eq 2 ]
check "... and left as it was (no WAL switch)" sh -c "[ \"\$(cksum <'$d/for.sqlite')\" = '$sum0' ] && [ \"\$(sqlite3 '$d/for.sqlite' 'PRAGMA journal_mode')\" = delete ]"
: >"$d/zero.db"
for c in "runs --db $d/zero.db" "profile analyze 1 --db $d/zero.db" "profile export 1 --chrome $d/z.json --db $d/zero.db" \
	"compare 1 2 --db $d/zero.db" "report breakdown 1 -o $d/zr --db $d/zero.db" "profile merge $d/zero.db --db $d/zm.db"; do
	# shellcheck disable=SC2086
	"$TWIN" $c >"$d/o" 2>"$d/e"
	check "reader of an empty file: $(echo "$c" | cut -d' ' -f1-2)" sh -c "[ $? -eq 2 ] && grep -q 'empty file, not a twin store' '$d/e' && [ ! -s '$d/zero.db' ]"
done

# --- exit status 2 for user errors; export targets
mkdir "$d/adir"
"$TWIN" runs --db "$d/adir" >"$d/o" 2>"$d/e"
check "runs --db DIR: exit 2" sh -c "[ $? -eq 2 ] && grep -q 'is a directory' '$d/e'"
"$TWIN" profile merge "$d/r1.db" --db "$d/adir" >"$d/o" 2>"$d/e"
check "merge --db DIR: exit 2" [ $? -eq 2 ]
"$TWIN" profile export kin --db "$d/t.db" --chrome "$d/adir" >"$d/o" 2>"$d/e"
check "export --chrome DIR: exit 2" sh -c "[ $? -eq 2 ] && grep -q 'is a directory' '$d/e'"
mkfifo "$d/fifo"
echo keep >"$d/target"
ln -s target "$d/slink"
"$TWIN" profile export kin --db "$d/t.db" --chrome "$d/fifo" >"$d/o" 2>"$d/e"; st1=$?
"$TWIN" profile export kin --db "$d/t.db" --chrome "$d/slink" >"$d/o" 2>"$d/e"; st2=$?
check "export refuses a FIFO and a symlink, leaves them" sh -c "[ $st1 -eq 2 ] && [ $st2 -eq 2 ] && [ -p '$d/fifo' ] && [ -L '$d/slink' ] && [ \"\$(cat '$d/target')\" = keep ]"
(umask 022; "$TWIN" profile export kin --db "$d/t.db" --chrome "$d/mode.json" >/dev/null 2>&1)
check "export writes mode 0666 less the umask" [ "$(stat -c %a "$d/mode.json")" = 644 ]
# invalid UTF-8 in a kernel name: the export stays valid JSON
printf '{"traceEvents":[{"ph":"X","cat":"kernel","name":"gemm_\377\376x","pid":0,"tid":7,"ts":0,"dur":10}]}' >"$d/u8.json"
"$TWIN" profile import --kineto "$d/u8.json" --db "$d/u8.db" >/dev/null 2>"$d/e"
"$TWIN" profile export 1 --db "$d/u8.db" --chrome "$d/u8x.json" >/dev/null 2>>"$d/e"
check "invalid UTF-8 names export as valid JSON" python3 -c "import json; j = json.load(open('$d/u8x.json', encoding='utf-8')); assert any(e.get('name') == 'gemm_\ufffd\ufffdx' for e in j['traceEvents'])"
# a store from an older build with negative times: export refuses instead of writing a file
# import would refuse
cp "$d/u8.db" "$d/neg.db"
sqlite3 "$d/neg.db" "UPDATE events SET start_ns = -50 WHERE run_id = 1"
"$TWIN" profile export 1 --db "$d/neg.db" --chrome "$d/neg.json" >"$d/o" 2>"$d/e"
check "export of negative times: exit 2, no file" sh -c "[ $? -eq 2 ] && grep -q 'needs 0 <= start <= end' '$d/e' && [ ! -e '$d/neg.json' ]"
# a crafted rank: refused when loading, never an out-of-memory abort
cp "$d/u8.db" "$d/cr.db"
sqlite3 "$d/cr.db" "UPDATE events SET rank = 2000000000"
"$TWIN" profile export 1 --db "$d/cr.db" --chrome "$d/cr.json" >"$d/o" 2>"$d/e"; st1=$?
"$TWIN" report memory 1 --db "$d/cr.db" -o "$d/crr" >"$d/o" 2>>"$d/e"; st2=$?
check "a stored rank out of range: exit 2 (export, report memory)" sh -c "[ $st1 -eq 2 ] && [ $st2 -eq 2 ] && grep -q 'out of the run.s ranks' '$d/e'"

# --- read-only stores: readers work on a store they cannot write, and never wait on a writer
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
	mkdir "$d/ro"
	cp "$d/t.db" "$d/ro/ro.db"
	chmod 755 "$d" "$d/ro"
	chmod 644 "$d/ro/ro.db"
	asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	asnobody "$TWIN" runs --db "$d/ro/ro.db" >"$d/o" 2>"$d/e"
	check "runs on a store the user cannot write" sh -c "[ $? -eq 0 ] && grep -q merged '$d/o'"
	asnobody "$TWIN" profile analyze kin --db "$d/ro/ro.db" --json >"$d/o" 2>"$d/e"
	check "analyze on a read-only store" [ $? -eq 0 ]
	asnobody "$TWIN" profile import --kineto $K/rank0.json --db "$d/ro/ro.db" >"$d/o" 2>"$d/e"
	check "a writer on a read-only store: exit 2" sh -c "[ $? -eq 2 ] && grep -q 'cannot write the database' '$d/e'"
	chmod 700 "$d"
else
	ok "read-only stores (skipped: needs root and setpriv)"
fi
sqlite3 "$d/t.db" "SELECT 1" >/dev/null
(printf 'BEGIN IMMEDIATE;\nINSERT INTO names(name) VALUES ("lock");\n.shell sleep 3\nCOMMIT;\n' | sqlite3 "$d/t.db" >/dev/null 2>&1 &)
sleep 0.5
start=$(date +%s)
"$TWIN" runs --db "$d/t.db" >/dev/null 2>"$d/e"; st1=$?
"$TWIN" profile analyze kin --db "$d/t.db" >/dev/null 2>>"$d/e"; st2=$?
check "readers do not wait on a writer's lock" sh -c "[ $st1 -eq 0 ] && [ $st2 -eq 0 ] && [ \$(( \$(date +%s) - $start )) -lt 2 ]"
sleep 3

# --- a failed import into a new store leaves no file
python3 -c "
import json
ev = [{'ph': 'X', 'cat': 'kernel', 'name': 'gemm_%d' % i, 'pid': 0, 'tid': 7, 'ts': i, 'dur': 1} for i in range(20000)]
json.dump({'traceEvents': ev}, open('$d/big.json', 'w'))"
# (the limit fits a new store and a small run, not 20,000 names: the store fails mid-write)
(ulimit -f 400; trap '' XFSZ; "$TWIN" profile import --kineto $K/rank0.json --db "$d/fits.db" >"$d/o" 2>"$d/e"; echo $? >"$d/st0")
(ulimit -f 400; trap '' XFSZ; "$TWIN" profile import --kineto "$d/big.json" --db "$d/full.db" >"$d/o" 2>"$d/e"; echo $? >"$d/st")
check "import failing mid-write (file size limit): no store left" sh -c "[ \$(cat '$d/st0') -eq 0 ] && [ \$(cat '$d/st') -ne 0 ] && [ ! -e '$d/full.db' ] && [ ! -e '$d/full.db-wal' ]"
(ulimit -f 8; trap '' XFSZ; "$TWIN" profile import --kineto $K/rank0.json --db "$d/full2.db" >"$d/o" 2>"$d/e"; echo $? >"$d/st")
check "import failing while creating the store: no file left" sh -c "[ \$(cat '$d/st') -ne 0 ] && [ ! -e '$d/full2.db' ]"
