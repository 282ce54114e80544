#!/bin/sh
# twin simulate: the issue's done-when command (Chrome trace parses), the summary, --json,
# symmetric == full step time, a straggler in full mode, --db. Needs $TWIN; run from the
# repo root. Prints "ok - NAME" / "not ok - NAME" per check.
. tests/lib.sh
out=$tmp/out
err=$tmp/err

jget() { # file, python expression on the parsed object d
	python3 -c "import json,sys; d=json.load(open('$1')); print($2)"
}

"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 1024 -s examples/strategies/megatron-175b.json \
	--trace "$tmp/t.json" >"$out" 2>"$err"
st=$?
check "simulate: done-when command exits 0" "[ $st -eq 0 ]"
check "simulate: prints the step time" "grep -q '^step time' '$out'"
check "simulate: prints TFLOP/s and MFU" "grep -q 'MFU' '$out'"
check "simulate: breakdown has all_reduce and p2p rows" "grep -q '^all_reduce' '$out' && grep -q '^p2p' '$out'"
check "simulate: Chrome trace parses as JSON" "python3 -c \"import json; json.load(open('$tmp/t.json'))\""
check "simulate: Chrome trace has complete events" "grep -q '\"ph\"' '$tmp/t.json'"
# the issue's trace args: a GEMM carries its layer, micro-batch and FLOPs, a collective its
# bytes; recomputed forward work is marked
cat >"$tmp/args.py" <<'EOF'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
fc1 = [e["args"] for e in ev if e["name"] == "fc1"]
ar = [e["args"] for e in ev if "AllReduce" in e["name"]]
ok = fc1 and all(a["layer"] >= 0 and a["micro-batch"] >= 0 and a["flops"] > 0 for a in fc1)
ok = ok and len({(a["rank"], a["layer"], a["micro-batch"], a.get("recompute", False)) for a in fc1}) == len(fc1)
ok = ok and ar and all(a["bytes"] > 0 and a["Group size"] > 1 for a in ar)
ok = ok and any(a.get("recompute") and a["phase"] == "bwd" for a in fc1)
print(ok)
EOF
check "simulate: trace args carry layer, micro-batch, FLOPs, bytes, recompute" "[ \"\$(python3 '$tmp/args.py' '$tmp/t.json')\" = True ]"
check "simulate: nothing on stderr" "[ ! -s '$err' ]"

# --json: one object with the summary; MFU between 0 and 1; step time > 0
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 1024 -s examples/strategies/megatron-175b.json \
	--json >"$tmp/sym.json" 2>"$err"
check "simulate --json: parses" "python3 -m json.tool '$tmp/sym.json' >/dev/null"
check "simulate --json: 0 < mfu < 1" "[ \"\$(jget '$tmp/sym.json' '0 < d[\"mfu\"] < 1')\" = True ]"
check "simulate --json: the model code of a Megatron job is fused" "[ \"\$(jget '$tmp/sym.json' 'd[\"model_code\"]')\" = fused ]"
check "simulate --json: analysis has collectives" "[ \"\$(jget '$tmp/sym.json' '\"analysis\" in d and d[\"step_time_s\"] > 0')\" = True ]"

# recompute_num_layers (Megatron's block method): between no recompute and full recompute in
# both step time and memory; all 12 layers of a stage equal full recompute exactly
for n in none 4 12 full; do
	case $n in
	none) a="--set recompute=none" ;; full) a="" ;; *) a="--set recompute_num_layers=$n" ;;
	esac
	# shellcheck disable=SC2086
	"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 1024 -s examples/strategies/megatron-175b.json \
		$a --json >"$tmp/rnl_$n.json" 2>"$err"
done
cat >"$tmp/rnl.py" <<'EOF'
import json, sys
d = {n: json.load(open(f"{sys.argv[1]}/rnl_{n}.json")) for n in ("none", "4", "12", "full")}
t = {n: d[n]["step_time_s"] for n in d}
m = {n: d[n]["memory"]["gpu_bytes"] for n in d}
print(t["none"] < t["4"] < t["full"] and m["none"] > m["4"] > m["full"] and t["12"] == t["full"] and m["12"] == m["full"])
EOF
check "simulate: recompute_num_layers sits between none and full; all of a stage's layers is full" \
	"[ \"\$(python3 '$tmp/rnl.py' '$tmp')\" = True ]"

# the memory verdict: the fullest GPU of every role, as twin memory computes it; a job that does
# not fit is still simulated (exit 0) and says so
check "simulate: prints that the job fits" "grep -q '^memory  *fits: ' '$out'"
"$TWIN" memory -m gpt3-175b -c dgx-a100-80g --gpus 1024 -s examples/strategies/megatron-175b.json \
	--json >"$tmp/mem.json" 2>"$err"
mx=$(jget "$tmp/mem.json" 'max(r["gpu"]["total_bytes"] for r in d["roles"])')
check "simulate --json: memory.gpu_bytes is twin memory's fullest role ($mx)" \
	"[ \"\$(jget '$tmp/sym.json' 'd[\"memory\"][\"fits\"] and d[\"memory\"][\"gpu_bytes\"] == $mx')\" = True ]"
"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 8 --set zero_optimization.stage=2 \
	--set train_micro_batch_size_per_gpu=4 >"$tmp/oom.txt" 2>"$err"
st=$?
check "simulate: a job that does not fit still exits 0" "[ $st -eq 0 ]"
check "simulate: a job that does not fit says so" "grep -q '^memory  *rank 0 does not fit: needs' '$tmp/oom.txt'"
"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 8 --set zero_optimization.stage=2 \
	--set train_micro_batch_size_per_gpu=4 --json >"$tmp/oom.json" 2>"$err"
check "simulate --json: memory.fits false with the shortfall" \
	"[ \"\$(jget '$tmp/oom.json' 'not d[\"memory\"][\"fits\"] and d[\"memory\"][\"short_bytes\"] == d[\"memory\"][\"gpu_bytes\"] - d[\"memory\"][\"capacity_bytes\"] > 0')\" = True ]"

# a host-memory shortfall says so in the JSON, with the host's bytes; the resolved strategy too
"$TWIN" simulate -m gpt3-175b -c dgx-h200 --gpus 8 --ds-config examples/ds_configs/zero3-offload.json \
	--json >"$tmp/host.json" 2>>"$err"
hs=$(jget "$tmp/host.json" 'd["memory"]["short_of"] == "host" and d["memory"]["gpu_bytes"] < d["memory"]["capacity_bytes"] and d["memory"]["host_bytes"] - d["memory"]["host_capacity_bytes"] == d["memory"]["short_bytes"]')
check "simulate --json: a host shortfall is short_of host, over the host's capacity" "[ '$hs' = True ]"
hd=$(jget "$tmp/host.json" 'd["strategy"]["degrees"]["dp"] == 8 and d["strategy"]["batch"]["seq_len"] == 2048')
check "simulate --json: the strategy's degrees and batch" "[ '$hd' = True ]"

# symmetric and full mode agree to the nanosecond on a symmetric job
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --json >"$tmp/s.json" 2>"$err"
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --full --json >"$tmp/f.json" 2>>"$err"
s=$(jget "$tmp/s.json" 'd["sim"]["step_ns"]')
f=$(jget "$tmp/f.json" 'd["sim"]["step_ns"]')
check "simulate: symmetric == full step time ($s ns vs $f ns)" "[ -n '$s' ] && [ '$s' = '$f' ]"
check "simulate: full mode simulates every rank" "[ \"\$(jget '$tmp/f.json' 'd[\"sim\"][\"ranks_simulated\"]')\" = 64 ]"

# MoE parallel folding: the same step in both modes, and with expert_tp 1 the expert
# all-to-all stays inside a node (tp 2 x dp 4 of a stage) where expert_tp = tp spreads it over
# two nodes' dp ranks: a higher bus bandwidth
fold="-m mixtral-8x7b -c dgx-h100 --gpus 64 -s examples/strategies/megatron-175b.json --set tp=2
	--set pp=4 --set ep=8 --set sequence_parallel=true --set global_batch=64 --json"
"$TWIN" simulate $fold --set expert_tp=1 >"$tmp/fs.json" 2>>"$err"
"$TWIN" simulate $fold --set expert_tp=1 --full >"$tmp/ff.json" 2>>"$err"
"$TWIN" simulate $fold >"$tmp/f2.json" 2>>"$err"
fs=$(jget "$tmp/fs.json" 'd["sim"]["step_ns"]')
ff=$(jget "$tmp/ff.json" 'd["sim"]["step_ns"]')
check "simulate: expert_tp 1, symmetric == full step time ($fs ns vs $ff ns)" "[ -n '$fs' ] && [ '$fs' = '$ff' ]"
a1=$(jget "$tmp/fs.json" 'round(d["analysis"]["collectives"]["all_to_all"]["busbw_GBps"])')
a2=$(jget "$tmp/f2.json" 'round(d["analysis"]["collectives"]["all_to_all"]["busbw_GBps"])')
check "simulate: expert_tp 1 keeps the all-to-all in a node ($a1 GB/s vs $a2 GB/s across nodes)" \
	"[ -n '$a1' ] && [ -n '$a2' ] && [ '$a1' -gt \$(( 2 * $a2 )) ]"

# DeepEP: the same expert groups (expert_tp = tp, each over two nodes) dispatched once per node
# a token reaches and on over NVLink: a shorter step than one all-to-all, the same in both modes
"$TWIN" simulate $fold --set moe_dispatcher=deepep >"$tmp/ds.json" 2>>"$err"
"$TWIN" simulate $fold --set moe_dispatcher=deepep --full >"$tmp/df.json" 2>>"$err"
ds=$(jget "$tmp/ds.json" 'd["sim"]["step_ns"]')
df=$(jget "$tmp/df.json" 'd["sim"]["step_ns"]')
d2=$(jget "$tmp/f2.json" 'd["sim"]["step_ns"]')
check "simulate: moe_dispatcher deepep, symmetric == full step time ($ds ns vs $df ns)" "[ -n '$ds' ] && [ '$ds' = '$df' ]"
check "simulate: moe_dispatcher deepep is faster across nodes ($ds ns < $d2 ns)" "[ -n '$ds' ] && [ -n '$d2' ] && [ '$ds' -lt '$d2' ]"

# a straggler GPU (half speed) slows the step in full mode
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --full --json \
	--set 'stragglers=[{"gpu":3,"compute_scale":0.5,"link_scale":1}]' >"$tmp/g.json" 2>>"$err"
g=$(jget "$tmp/g.json" 'd["sim"]["step_ns"]')
check "simulate: a straggler slows full mode ($g ns > $f ns)" "[ -n '$g' ] && [ '$g' -gt '$f' ]"

# a node's NICs at a tenth of their rate, without --full: stragglers imply full mode, and the
# pipeline's p2p through that node slows the step; the same node's NVLink alone does not touch
# the p2p (one stage per node: TP 8 inside it)
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --set 'stragglers=[{"node":3,"link":"nic","link_scale":0.1}]' \
	>"$out" 2>>"$err"
check "simulate: stragglers imply full mode" "grep -q 'simulated every rank (stragglers given): 64 ranks' '$out'"
check "simulate: the summary names the what-if" "grep -q '^straggler what-if    node 3: compute x1.00, nic links x0.10\$' '$out'"
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --json --set 'stragglers=[{"node":3,"link":"nic","link_scale":0.1}]' \
	>"$tmp/nic.json" 2>>"$err"
k=$(jget "$tmp/nic.json" 'd["sim"]["step_ns"]')
check "simulate: node 3's slow NICs slow the pipeline ($k ns > $f ns)" "[ -n '$k' ] && [ '$k' -gt '$f' ]"
check "simulate --json: mode full with stragglers" "[ \"\$(jget '$tmp/nic.json' 'd[\"mode\"]')\" = full ]"
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --json --set 'stragglers=[{"node":3,"link":"pcie","link_scale":1}]' \
	>"$tmp/one.json" 2>>"$err"
o=$(jget "$tmp/one.json" 'd["sim"]["step_ns"]')
check "simulate: a straggler of scale 1 changes nothing ($o ns = $f ns)" "[ -n '$o' ] && [ '$o' = '$f' ]"

# what-if: slower NICs make a DP-heavy job slower
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --set net.nic_gbps=25 --json >"$tmp/n.json" 2>>"$err"
n=$(jget "$tmp/n.json" 'd["sim"]["step_ns"]')
check "simulate: 25 Gb/s NICs are slower than 200 ($n > $s)" "[ -n '$n' ] && [ '$n' -gt '$s' ]"

# --db stores the run
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --db "$tmp/r.db" >"$out" 2>"$err"
check "simulate --db: stored" "grep -q 'stored as run' '$out' && [ -s '$tmp/r.db' ]"

# --memory appends the memory report
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --memory >"$out" 2>"$err"
check "simulate --memory: exits 0 with the summary" "grep -q '^step time' '$out'"

# --max-events: a clear message and exit 2
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --max-events 100 >"$out" 2>"$err"
st=$?
check "simulate --max-events: exit 2, one line" "[ $st -eq 2 ] && [ \$(wc -l <'$err') -eq 1 ] && grep -q 'max-events' '$err'"

# a --set on a descriptive field (read by no prediction) is accepted with a note naming the
# figure to set instead, and changes nothing
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --set node.pcie_gen=5 --json >"$tmp/d.json" 2>"$err"
d=$(jget "$tmp/d.json" 'd["sim"]["step_ns"]')
check "simulate: --set node.pcie_gen notes node.pcie_GBps, step unchanged ($d = $s)" \
	"grep -q 'node.pcie_gen: no prediction reads this field; its effect comes from node.pcie_GBps' '$err' && [ '$d' = '$s' ]"
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --set node.pcie_GBps=20 --json >"$tmp/d.json" 2>"$err"
check "simulate: --set on a field that is read prints no note" "[ ! -s '$err' ]"
# gpu.sms alone moves only the GEMMs' wave quantisation: a note says to scale the peak too
"$TWIN" simulate -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=64 --set gpu.sms=54 --json >"$tmp/d.json" 2>"$err"
check "simulate: --set gpu.sms notes gpu.peak_tflops" \
	"[ \$(wc -l <'$err') -eq 1 ] && grep -q 'gpu.sms: only the GEMM tile model.*gpu.peak_tflops' '$err' && [ -n \"\$(jget '$tmp/d.json' 'd[\"sim\"][\"step_ns\"]')\" ]"

# symmetric == full also where a collective and a compute op start at the same instant on
# different ranks (FSDP with TP; a GPipe pipeline): the compute slowdown does not depend on the
# order the simulator takes those events in (both failed before retime_compute); and with a
# context-parallel ring inside a pipeline, whose p2p peers wrap around the ring (full mode
# deadlocked before peer_of); and DeepSpeed's pipeline with its blocking sends in step order,
# with and without a ring-attention KV exchange (whose sends do not block)
for st in '{"framework":"fsdp","tp":2,"pp":1,"micro_batch":2,"global_batch":32,"recompute":"full"}' \
	'{"framework":"fsdp","tp":1,"pp":2,"micro_batch":1,"global_batch":32,"recompute":"full","schedule":"gpipe"}' \
	'{"framework":"fsdp","fsdp":{"version":2,"reduce_dtype":"fp32"},"micro_batch":1,"global_batch":32,"recompute":"full"}' \
	'{"framework":"fsdp","fsdp":{"version":2},"micro_batch":1,"global_batch":32,"recompute":"op"}' \
	'{"framework":"deepspeed","micro_batch":1,"recompute":"op","ds_config":{"zero_optimization":{"stage":3},"bf16":{"enabled":true}}}' \
	'{"framework":"megatron","tp":2,"pp":2,"cp":2,"micro_batch":1,"global_batch":32,"sequence_parallel":true}' \
	'{"framework":"megatron","tp":1,"pp":2,"cp":4,"cp_kind":"allgather","micro_batch":1,"global_batch":16,"recompute":"selective"}' \
	'{"framework":"fsdp","cp":4,"micro_batch":1,"global_batch":4,"recompute":"full"}' \
	'{"framework":"deepspeed","tp":2,"pp":2,"micro_batch":1,"global_batch":12,"recompute":"full","ds_config":{"zero_optimization":{"stage":1},"bf16":{"enabled":true}}}' \
	'{"framework":"deepspeed","tp":1,"pp":2,"cp":2,"cp_kind":"ring","micro_batch":1,"global_batch":12,"ds_config":{"zero_optimization":{"stage":1},"bf16":{"enabled":true}}}' \
	'{"framework":"megatron","tp":2,"pp":4,"vp":2,"schedule":"interleaved","micro_batch":1,"global_batch":16,"first_stage_layers":6,"last_stage_layers":6}' \
	'{"framework":"megatron","tp":2,"pp":4,"vp":2,"micro_batch":1,"global_batch":16,"overlap_p2p_comm":false}' \
	'{"framework":"megatron","tp":2,"pp":2,"micro_batch":1,"global_batch":16,"sequence_parallel":true,"recompute":"selective","recompute_modules":["mlp","core_attn"],"flash_attention":false}'; do
	echo "$st" >"$tmp/st.json"
	"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 16 -s "$tmp/st.json" --json >"$tmp/a.json" 2>"$err"
	"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 16 -s "$tmp/st.json" --full --json >"$tmp/b.json" 2>>"$err"
	a=$(jget "$tmp/a.json" 'd["sim"]["step_ns"]')
	b=$(jget "$tmp/b.json" 'd["sim"]["step_ns"]')
	check "simulate: symmetric == full for $st ($a vs $b)" "[ -n '$a' ] && [ '$a' = '$b' ]"
done

# groups whose instances lie differently across node boundaries (TP 4 on 6-GPU nodes; expert
# groups of 16 on 72-GPU NVLink domains; a CP pair across two domains for some TP ranks only):
# symmetric mode takes the widest instance of each, as the slowest sets the step, and matches
# full mode exactly on the first two (it was 22% and 41% fast) and within 1% on the third
sym_full() {
	"$TWIN" simulate "$@" --json >"$tmp/a.json" 2>"$err"
	"$TWIN" simulate "$@" --full --json >"$tmp/b.json" 2>>"$err"
	python3 -c "
import json, sys
a, b = (json.load(open(f))['sim']['step_ns'] for f in sys.argv[1:3])
print(abs(a / b - 1))" "$tmp/a.json" "$tmp/b.json"
}
r=$(sym_full -m llama3-8b -c dgx-h100 --gpus 24 --set node.gpus=6 --set net.nics_per_node=6 \
	--set node.nvlink_domain_gpus=6 --set framework=megatron --set tp=4 --set global_batch=6)
check "simulate: TP 4 on 6-GPU nodes, symmetric == full (relative gap $r)" "[ '$r' = 0.0 ]"
r=$(sym_full -m qwen3-30b-a3b -c gb200-nvl72 --gpus 144 --set framework=megatron --set ep=16 --set global_batch=144)
check "simulate: expert groups across NVLink domains, symmetric == full (relative gap $r)" "[ '$r' = 0.0 ]"
r=$(sym_full -m llama-65b -c gb200-nvl72 --gpus 144 --set framework=fsdp --set tp=8 --set cp=2 \
	--set micro_batch=4 --set recompute=selective)
check "simulate: CP pairs across NVLink domains, symmetric within 1% of full (relative gap $r)" \
	"python3 -c 'import sys; sys.exit(not float(\"$r\") < 0.01)'"

# hardware TFLOP/s per GPU is the job's mean (each stage's plan times its GPUs), whichever ranks
# the trace records: a straggler at full speed (recorded with its groups in full mode) moves
# neither the step nor HFU, and HFU stays above MFU on a two-stage pipeline
hf="-m llama3-8b -c dgx-h100 --gpus 16 --set framework=megatron --set tp=8 --set pp=2 --set sequence_parallel=true --set global_batch=8"
"$TWIN" simulate $hf --json >"$tmp/hf0.json" 2>"$err"
"$TWIN" simulate $hf --set 'stragglers=[{"gpu":15,"compute_scale":1}]' --json >"$tmp/hf1.json" 2>>"$err"
check "simulate: HFU is the job's, not the recorded ranks' mean" python3 -c "
import json
a, b = (json.load(open('$tmp/hf%d.json' % i)) for i in (0, 1))
assert a['step_time_s'] == b['step_time_s'] and a['hfu'] == b['hfu'] and a['hfu'] >= a['mfu'], (a['hfu'], b['hfu'], a['mfu'])"

# outputs whole or not at all: --trace and --db naming one file are refused before anything is
# written (the trace used to overwrite the database); a database that cannot be opened leaves
# no trace behind; an empty --db is refused; the trace carries a name for every stream
ob="-m tiny -c dgx-h100 -s megatron-175b --gpus 8 --set tp=2 --set pp=2 --set global_batch=8"
"$TWIN" simulate $ob --db "$tmp/same.db" >/dev/null 2>"$err"
"$TWIN" simulate $ob --trace "$tmp/same.db" --db "$tmp/same.db" >"$tmp/o.txt" 2>"$err"; st=$?
check "simulate: --trace and --db on one file: exit 2, one line, the database kept" \
	"[ $st -eq 2 ] && [ \$(wc -l <'$err') -eq 1 ] && [ ! -s '$tmp/o.txt' ] && \"$TWIN\" runs --db '$tmp/same.db' | grep -q complete"
echo "not a database" >"$tmp/plain.txt"
"$TWIN" simulate $ob --trace "$tmp/left.json" --db "$tmp/plain.txt" >/dev/null 2>"$err"; st=$?
check "simulate: a --db that is no database leaves no trace file" "[ $st -eq 2 ] && [ ! -e '$tmp/left.json' ] && ! ls '$tmp'/left.json.tmp-* >/dev/null 2>&1"
"$TWIN" simulate $ob --db "" >"$tmp/o.txt" 2>"$err"; st=$?
check "simulate: an empty --db is refused" "[ $st -eq 2 ] && [ \$(wc -l <'$err') -eq 1 ] && [ ! -s '$tmp/o.txt' ]"
"$TWIN" simulate $ob --trace "$tmp/names.json" >/dev/null 2>"$err"
check "simulate --trace: a thread name for every stream of every rank" python3 -c "
import json
ev = json.load(open('$tmp/names.json'))['traceEvents']
names = {(e['pid'], e['tid']): e['args']['name'] for e in ev if e.get('name') == 'thread_name'}
used = {(e['pid'], e['tid']) for e in ev if e.get('ph') == 'X'}
assert used <= set(names) and names[(0, 0)] == 'compute' and names[(0, -1)] == 'steps', (used - set(names), names)"

# Megatron's overlap_p2p_comm (on by default under interleaving): receives posted ahead run
# under the compute between, so with the stages a node each the step is shorter than when each
# receive waits at the start of its item
echo '{"framework":"megatron","tp":8,"pp":4,"vp":4,"micro_batch":1,"global_batch":32,"sequence_parallel":true}' >"$tmp/op.json"
for o in true false; do
	"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 32 -s "$tmp/op.json" --set overlap_p2p_comm=$o \
		--json >"$tmp/op_$o.json" 2>"$err"
done
"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 32 -s "$tmp/op.json" --json >"$tmp/op_def.json" 2>>"$err"
check "simulate: overlap_p2p_comm is the interleaved default and shortens the step" python3 -c "
import json
on, off, d = (json.load(open('$tmp/op_%s.json' % k))['sim']['step_ns'] for k in ('true', 'false', 'def'))
assert d == on and on < 0.99 * off, (on, off, d)"

# Megatron-Core's overlap_moe_expert_parallel_comm: the combined 1F1B hides the all-to-alls of
# each micro-batch under another's compute, without a pipeline and under interleaving, and both
# modes give the same step; the exposed all-to-all time falls
echo '{"framework":"megatron","tp":1,"pp":1,"ep":8,"micro_batch":1,"global_batch":64,"precision":"bf16"}' >"$tmp/moeo.json"
# (the interleaved job runs grouped expert GEMMs on 4-sequence micro-batches: with one sequence
# and the experts in a loop it is bound by its host, and the overlap cannot shorten it)
echo '{"framework":"megatron","tp":2,"pp":2,"vp":2,"schedule":"interleaved","ep":8,"expert_tp":1,"sequence_parallel":true,"micro_batch":4,"global_batch":64,"moe_grouped_gemm":true,"precision":"bf16"}' >"$tmp/moeo_pp.json"
for st in moeo moeo_pp; do
	for o in true false; do
		"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/$st.json" \
			--set overlap_moe_expert_parallel_comm=$o --json >"$tmp/${st}_$o.json" 2>"$err"
	done
	"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/$st.json" \
		--set overlap_moe_expert_parallel_comm=true --full --json >"$tmp/${st}_full.json" 2>>"$err"
	check "simulate: overlap_moe_expert_parallel_comm hides all-to-alls ($st), symmetric == full" python3 -c "
import json
on, off, full = (json.load(open('$tmp/${st}_%s.json' % k)) for k in ('true', 'false', 'full'))
a2a = lambda d: d['analysis']['collectives']['all_to_all']
# the step is shorter, without a pipeline and under interleaving (EP folded over TP x DP)
assert on['sim']['step_ns'] < 0.97 * off['sim']['step_ns'], (on['sim']['step_ns'], off['sim']['step_ns'])
assert a2a(on)['exposed_ns'] < 0.8 * a2a(off)['exposed_ns'], (a2a(on), a2a(off))
assert a2a(on)['count'] == a2a(off)['count']
assert on['sim']['step_ns'] == full['sim']['step_ns']"
done

# delay_wgrad_compute under the combined 1F1B: the dispatch's backward starts after the experts'
# input grads, so a GPU-bound step (grouped expert GEMMs) is no longer; both modes agree. (With
# the experts in a loop this job is host-bound, and the weight grads' own calls lengthen it.)
for m in "" --full; do
	"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" --set moe_grouped_gemm=true \
		--set overlap_moe_expert_parallel_comm=true --set delay_wgrad_compute=true $m \
		--json >"$tmp/dwg$m.json" 2>"$err"
done
"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" --set moe_grouped_gemm=true \
	--set overlap_moe_expert_parallel_comm=true --json >"$tmp/dwg_off.json" 2>>"$err"
check "simulate: delay_wgrad_compute keeps or shortens the combined 1F1B's step; symmetric == full" python3 -c "
import json
on, full, ov = (json.load(open(f)) for f in ('$tmp/dwg.json', '$tmp/dwg--full.json', '$tmp/dwg_off.json'))
assert on['sim']['step_ns'] <= ov['sim']['step_ns'] and on['sim']['step_ns'] == full['sim']['step_ns']"

# Megatron's capacity factor: dropping caps an imbalanced load at the capacity, padding runs the
# capacity whatever the routing; both modes agree
for c in "" "--set moe_expert_capacity_factor=1.25" \
	"--set moe_expert_capacity_factor=1.25 --set moe_pad_expert_input_to_capacity=true"; do
	n=$(echo "$c" | wc -w)
	# shellcheck disable=SC2086
	"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
		--set moe_load_imbalance=1.5 $c --json >"$tmp/cap_$n.json" 2>"$err"
done
"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
	--set moe_load_imbalance=1.25 --json >"$tmp/cap_imb.json" 2>>"$err"
"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
	--set moe_expert_capacity_factor=1.25 --set moe_pad_expert_input_to_capacity=true --full \
	--json >"$tmp/cap_full.json" 2>>"$err"
"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
	--set moe_expert_capacity_factor=1.25 --set moe_pad_expert_input_to_capacity=true \
	--json >"$tmp/cap_pad_even.json" 2>>"$err"
# dropping: a 1.5 load capped at 1.25 runs as a 1.25 load plus the drop's own kernels; padding:
# the capacity whatever the routing (and no host wait for the token counts)
check "simulate: capacity factor caps the load (dropping) or fixes it (padding); symmetric == full" python3 -c "
import json
d = {k: json.load(open('$tmp/cap_%s.json' % k))['sim']['step_ns'] for k in ('0', '2', '4', 'imb', 'full', 'pad_even')}
assert d['imb'] <= d['2'] < d['0'], d
assert d['4'] == d['full'] == d['pad_even'], d"

# moe_shared_expert_overlap: Llama 4 Scout's shared expert runs under its all-to-alls, so fewer
# of them are exposed and the step is shorter; both modes agree
for o in false true; do
	"$TWIN" simulate -m llama4-scout -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" --set ep=16 \
		--set moe_shared_expert_overlap=$o --json >"$tmp/mso_$o.json" 2>"$err"
done
"$TWIN" simulate -m llama4-scout -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" --set ep=16 \
	--set moe_shared_expert_overlap=true --full --json >"$tmp/mso_full.json" 2>>"$err"
check "simulate: moe_shared_expert_overlap hides the shared expert under the all-to-alls" python3 -c "
import json
on, off, full = (json.load(open('$tmp/mso_%s.json' % k)) for k in ('true', 'false', 'full'))
a2a = lambda d: d['analysis']['collectives']['all_to_all']['exposed_ns']
assert on['sim']['step_ns'] < off['sim']['step_ns'] and a2a(on) < a2a(off), (on['sim'], off['sim'])
assert on['sim']['step_ns'] == full['sim']['step_ns']"

# moe_permute_fusion: Transformer Engine's fused permutations move fewer bytes in fewer kernels,
# so the host catches up sooner after each layer's wait for the token counts and the step is
# shorter; the model FLOPs are the same; unfused is the default; both modes agree
for o in false true; do
	"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
		--set moe_permute_fusion=$o --json >"$tmp/mpf_$o.json" 2>"$err"
done
"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
	--full --json >"$tmp/mpf_full.json" 2>>"$err"
check "simulate: moe_permute_fusion shortens the step, keeps the FLOPs; unfused is the default; symmetric == full" python3 -c "
import json
on, off, full = (json.load(open('$tmp/mpf_%s.json' % k)) for k in ('true', 'false', 'full'))
assert on['sim']['step_ns'] < 0.99 * off['sim']['step_ns'], (on['sim'], off['sim'])
assert abs(on['tflops_per_gpu_model'] * on['step_time_s'] - off['tflops_per_gpu_model'] * off['step_time_s']) < 1e-6 * off['tflops_per_gpu_model'] * off['step_time_s']
assert off['analysis']['stall_host_ns'] > on['analysis']['stall_host_ns']
assert off['strategy']['activations']['moe_permute_fusion'] is False and on['strategy']['activations']['moe_permute_fusion'] is True
assert full['sim']['step_ns'] == off['sim']['step_ns']"

# moe_grouped_gemm: Qwen3-30B-A3B has 16 experts a rank here; grouped, they are one call each
# instead of a loop with a concatenation, so the step is shorter and the FLOPs the same; both
# modes agree on the loop
for o in false true; do
	"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
		--set moe_grouped_gemm=$o --json >"$tmp/mgg_$o.json" 2>"$err"
done
check "simulate: moe_grouped_gemm shortens the step, keeps the FLOPs; the loop is the default" python3 -c "
import json
on, off, d = (json.load(open('$tmp/%s.json' % k)) for k in ('mgg_true', 'mgg_false', 'mpf_false'))
assert on['sim']['step_ns'] < 0.99 * off['sim']['step_ns'] and off['sim']['step_ns'] == d['sim']['step_ns'], (on['sim'], off['sim'])
f = lambda x: x['tflops_per_gpu_model'] * x['step_time_s']
assert abs(f(on) - f(off)) < 1e-6 * f(off)
assert off['strategy']['activations']['moe_grouped_gemm'] is False"

# DeepSpeed's MoE layer dispatches and combines with einsums over (token, expert, slot), whose
# FLOPs grow with the square of a micro-batch's tokens: hardware FLOPs per token grow with the
# micro-batch, model FLOPs per token do not
for mb in 1 4; do
	"$TWIN" simulate -m mixtral-8x7b -c dgx-h100 --gpus 32 -s ds-zero3 --set zero_optimization.stage=2 \
		--set ep=8 --set kernels=fused --set recompute=none --set seq_len=2048 --set micro_batch=$mb \
		--set global_batch=$((32 * mb)) --json >"$tmp/dsmoe_$mb.json" 2>"$err"
done
check "simulate: DeepSpeed's MoE einsums grow with the micro-batch's tokens squared" python3 -c "
import json
a, b = (json.load(open('$tmp/dsmoe_%d.json' % m)) for m in (1, 4))
hw = lambda d, m: d['tflops_per_gpu_hardware'] * d['step_time_s'] / m
md = lambda d, m: d['tflops_per_gpu_model'] * d['step_time_s'] / m
assert hw(b, 4) > 1.1 * hw(a, 1), (hw(a, 1), hw(b, 4))
assert abs(md(b, 4) - md(a, 1)) < 1e-6 * md(a, 1)"

# DeepSpeed's MoE layer pads every expert to its capacity: a larger capacity factor, or without
# dropping an imbalanced load, lengthens the step; HF's dropless blocks take the imbalance too
D="--set zero_optimization.stage=2 --set ep=8 --set kernels=fused --set recompute=none --set micro_batch=2 --set global_batch=64"
for c in "" "--set moe_expert_capacity_factor=1.25" "--set moe_drop_tokens=false --set moe_load_imbalance=1.5"; do
	n=$(echo "$c" | wc -w)
	# shellcheck disable=SC2086
	"$TWIN" simulate -m mixtral-8x7b -c dgx-h100 --gpus 32 -s ds-zero3 $D $c --json >"$tmp/dscap_$n.json" 2>"$err"
done
check "simulate: DeepSpeed's MoE capacity factor and dropless imbalance lengthen the step" python3 -c "
import json
d = {k: json.load(open('$tmp/dscap_%s.json' % k)) for k in ('0', '2', '4')}
s = {k: v['sim']['step_ns'] for k, v in d.items()}
assert s['0'] < s['2'] and s['0'] < s['4'], s
assert d['0']['strategy']['activations']['moe_drop_tokens'] is True and d['4']['strategy']['activations']['moe_drop_tokens'] is False"

# Megatron-Core's router: fused it runs fewer kernels, the load-balancing loss and the z-loss add some; the
# loss's token counts are summed over TP x CP, and both modes agree; DeepSpeed's capacity factor
# below 1 drops tokens (a shorter step), its min_capacity pads the experts (a longer one)
R="-m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s $tmp/moeo.json --set global_batch=16"
"$TWIN" simulate $R --json >"$tmp/rt_def.json" 2>"$err"
"$TWIN" simulate $R --set moe_router_fusion=true --json >"$tmp/rt_fused.json" 2>>"$err"
"$TWIN" simulate $R --set moe_aux_loss_coeff=0.001 --json >"$tmp/rt_aux.json" 2>>"$err"
"$TWIN" simulate $R --set moe_z_loss_coeff=0.001 --json >"$tmp/rt_z.json" 2>>"$err"
for m in "" --full; do
	"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo_pp.json" --set cp=2 \
		--set ep=4 --set moe_aux_loss_coeff=0.01 $m --json >"$tmp/rtcp$m.json" 2>>"$err"
done
"$TWIN" simulate -m mixtral-8x7b -c dgx-h100 --gpus 32 -s ds-zero3 $D --json >"$tmp/dsmin_def.json" 2>>"$err"
"$TWIN" simulate -m mixtral-8x7b -c dgx-h100 --gpus 32 -s ds-zero3 $D --set moe_expert_capacity_factor=0.5 \
	--json >"$tmp/dsmin_half.json" 2>>"$err"
"$TWIN" simulate -m mixtral-8x7b -c dgx-h100 --gpus 32 -s ds-zero3 $D --set moe_min_capacity=4096 \
	--json >"$tmp/dsmin_min.json" 2>>"$err"
for m in "" --full; do
	"$TWIN" simulate $R --set moe_dispatcher=deepep --set moe_load_imbalance=1.5 $m --json \
		>"$tmp/rtdeep$m.json" 2>>"$err"
	"$TWIN" simulate $R --set moe_dispatcher=deepep --set moe_load_imbalance=1.5 \
		--set moe_expert_capacity_factor=1.1 $m --json >"$tmp/rtdeepcap$m.json" 2>>"$err"
done
check "simulate: the router's fusion and loss, DeepEP's dropping, DeepSpeed's capacity below 1 and min_capacity" python3 -c "
import json
ld = lambda k: json.load(open('$tmp/%s.json' % k))
r = {k: ld('rt_' + k)['sim']['step_ns'] for k in ('def', 'fused', 'aux', 'z')}
assert r['fused'] < r['def'] < r['aux'] and r['def'] < r['z'], r
assert ld('rt_fused')['strategy']['activations']['moe_router_fusion'] is True
assert ld('rt_def')['strategy']['activations']['moe_router_fusion'] is False
assert ld('rtcp')['sim']['step_ns'] == ld('rtcp--full')['sim']['step_ns']
dp = {k: ld(k)['sim']['step_ns'] for k in ('rtdeep', 'rtdeep--full', 'rtdeepcap', 'rtdeepcap--full')}
assert dp['rtdeepcap'] < dp['rtdeep'] and dp['rtdeep'] == dp['rtdeep--full'] and dp['rtdeepcap'] == dp['rtdeepcap--full'], dp
ds = {k: ld('dsmin_' + k)['sim']['step_ns'] for k in ('def', 'half', 'min')}
assert ds['half'] < ds['def'] < ds['min'], ds"

# Megatron-Core's per-layer CUDA graphs: a host-bound job's captured modules cost the host one
# replay each instead of their framework calls, so its step shortens; both modes agree
echo '{"framework":"megatron","tp":2,"pp":1,"micro_batch":1,"global_batch":64,"precision":"bf16","sequence_parallel":true,"hidden_dropout":0,"attention_dropout":0,"seq_len":1024}' >"$tmp/cg.json"
G="-m llama2-7b -c dgx-h100 --gpus 8 -s $tmp/cg.json"
"$TWIN" simulate $G --json >"$tmp/cg_none.json" 2>"$err"
"$TWIN" simulate $G --set cuda_graph_impl=transformer_engine --set 'cuda_graph_modules=["attn"]' \
	--json >"$tmp/cg_attn.json" 2>>"$err"
for m in "" --full; do
	"$TWIN" simulate $G --set cuda_graph_impl=local $m --json >"$tmp/cg_layer$m.json" 2>>"$err"
done
check "simulate: CUDA graphs take a host-bound job's framework calls off the host; symmetric == full" python3 -c "
import json
ld = lambda k: json.load(open('$tmp/cg_%s.json' % k))
s = {k: ld(k)['sim']['step_ns'] for k in ('none', 'attn', 'layer', 'layer--full')}
assert s['attn'] < 0.95 * s['none'] and s['layer'] < 0.95 * s['none'], s
assert s['layer'] == s['layer--full'], s
a = ld('attn')['strategy']['activations']
assert a['cuda_graph_impl'] == 'transformer_engine' and a['cuda_graph_modules'] == ['attn'], a"

# moe_load_imbalance: the busiest expert rank's load; the step grows with it, the model FLOPs
# per step do not, and both modes agree
for i in 1 1.2 1.5; do
	"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
		--set moe_load_imbalance=$i --json >"$tmp/imb_$i.json" 2>"$err"
done
"$TWIN" simulate -m qwen3-30b-a3b -c dgx-h100 --gpus 16 -s "$tmp/moeo.json" \
	--set moe_load_imbalance=1.2 --full --json >"$tmp/imb_full.json" 2>>"$err"
check "simulate: moe_load_imbalance lengthens the step, keeps the model FLOPs; symmetric == full" python3 -c "
import json
r = [json.load(open('$tmp/imb_%s.json' % k)) for k in ('1', '1.2', '1.5', 'full')]
s = [d['sim']['step_ns'] for d in r]
f = [d['tflops_per_gpu_model'] * d['step_time_s'] for d in r]
assert s[0] < s[1] < s[2] and s[1] == s[3], s
assert abs(f[1] / f[0] - 1) < 1e-9 and abs(f[2] / f[0] - 1) < 1e-9, f"
# line with exit 2
echo '{"framework":"megatron","tp":2,"pp":4,"vp":2,"schedule":"interleaved","micro_batch":1,"global_batch":16}' >"$tmp/even.json"
echo '{"framework":"megatron","tp":2,"pp":4,"vp":2,"schedule":"interleaved","micro_batch":1,"global_batch":16,"first_stage_layers":6,"last_stage_layers":6}' >"$tmp/uneven.json"
"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 16 -s "$tmp/even.json" --json >"$tmp/e.json" 2>"$err"
"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 16 -s "$tmp/uneven.json" --json >"$tmp/u.json" 2>>"$err"
e=$(jget "$tmp/e.json" 'd["sim"]["step_ns"]')
u=$(jget "$tmp/u.json" 'd["sim"]["step_ns"]')
check "simulate: interleaved uneven stages change the step ($e vs $u ns)" "[ -n '$e' ] && [ -n '$u' ] && [ '$e' != '$u' ]"
"$TWIN" simulate -m llama2-7b -c dgx-a100-80g --gpus 16 -s "$tmp/uneven.json" --set first_stage_layers=7 \
	--set last_stage_layers=7 >"$tmp/o.txt" 2>"$err"
st=$?
check "simulate: uneven stages that do not split over vp: exit 2, one line" \
	"[ $st -eq 2 ] && [ \$(wc -l <'$err') -eq 1 ] && grep -q 'a stage of 7 layers does not split over vp=2' '$err' && [ ! -s '$tmp/o.txt' ]"
# the embedding and the loss counted in the split: GPT-2's 12 layers + 2 over pp 2 x vp 7, the
# first and the last virtual stage hold no layer
echo '{"framework":"megatron","pp":2,"vp":7,"schedule":"interleaved","micro_batch":1,"global_batch":16,"account_for_embedding_in_pipeline_split":true,"account_for_loss_in_pipeline_split":true}' >"$tmp/afe.json"
"$TWIN" simulate -m gpt2-124m -c dgx-a100-80g --gpus 16 -s "$tmp/afe.json" --json >"$tmp/a.json" 2>"$err"
"$TWIN" simulate -m gpt2-124m -c dgx-a100-80g --gpus 16 -s "$tmp/afe.json" --full --json >"$tmp/b.json" 2>>"$err"
a=$(jget "$tmp/a.json" 'd["sim"]["step_ns"]')
b=$(jget "$tmp/b.json" 'd["sim"]["step_ns"]')
check "simulate: embedding and loss in the split under vp 7: symmetric == full ($a vs $b)" "[ -n '$a' ] && [ '$a' = '$b' ]"
# Megatron-Core's recompute_modules on an MoE model: less memory, a longer step, and the same
# step in both modes
echo '{"framework":"megatron","tp":2,"pp":2,"ep":2,"micro_batch":1,"global_batch":16,"sequence_parallel":true,"distributed_optimizer":true,"recompute":"selective"}' >"$tmp/rc0.json"
echo '{"framework":"megatron","tp":2,"pp":2,"ep":2,"micro_batch":1,"global_batch":16,"sequence_parallel":true,"distributed_optimizer":true,"recompute":"selective","recompute_modules":["moe","layernorm"]}' >"$tmp/rc1.json"
"$TWIN" simulate -m mixtral-8x7b -c dgx-h100 --gpus 16 -s "$tmp/rc0.json" --json >"$tmp/a.json" 2>"$err"
"$TWIN" simulate -m mixtral-8x7b -c dgx-h100 --gpus 16 -s "$tmp/rc1.json" --json >"$tmp/b.json" 2>>"$err"
"$TWIN" simulate -m mixtral-8x7b -c dgx-h100 --gpus 16 -s "$tmp/rc1.json" --full --json >"$tmp/c.json" 2>>"$err"
check "simulate: recompute_modules moe + layernorm: less memory, a longer step, symmetric == full" \
	"[ \"\$(python3 -c \"import json; a, b, c = (json.load(open('$tmp/' + n + '.json')) for n in 'abc'); print(b['memory']['gpu_bytes'] < a['memory']['gpu_bytes'] and b['sim']['step_ns'] > a['sim']['step_ns'] and b['sim']['step_ns'] == c['sim']['step_ns'])\")\" = True ]"

# attention_kernel: the H100 preset's tables from FlashAttention-3's figures; at 8,192 tokens
# FlashAttention-2 is the slowest of the three, and the choice shows in config show
for k in fa2 fa3 cudnn; do
	"$TWIN" simulate -m llama3-8b -c dgx-h100 --gpus 8 -s torchtitan-fsdp2 --set attention_kernel=$k \
		--json >"$tmp/ak_$k.json" 2>"$tmp/ak_$k.err"
done
check "attention_kernel: fa2 slower than cudnn slower than fa3 (Llama-3-8B, 8,192 tokens, H100)" \
	"python3 -c \"import json; t = {k: json.load(open('$tmp/ak_%s.json' % k))['step_time_s'] for k in ('fa2', 'fa3', 'cudnn')}; assert t['fa2'] > t['cudnn'] > t['fa3'], t\""
"$TWIN" config show -m llama3-8b -c dgx-h100 --gpus 8 -s torchtitan-fsdp2 --set attention_kernel=fa3 >"$tmp/akc" 2>&1
check "config show names the attention kernel and its source" "grep -q '^attention_kernel *fa3 *set' '$tmp/akc'"

# --memory with --json: the memory report rides along as one object, its verdict the same as
# twin memory's
"$TWIN" simulate -m llama2-7b -c dgx-h100 --gpus 8 --memory --json >"$tmp/mj.json" 2>"$tmp/mj.err"
"$TWIN" memory -m llama2-7b -c dgx-h100 --gpus 8 --json >"$tmp/m.json" 2>>"$tmp/mj.err"
check "simulate --memory --json: memory_report is twin memory's JSON" \
	"python3 -c \"import json; a = json.load(open('$tmp/mj.json'))['memory_report']; b = json.load(open('$tmp/m.json')); assert a == b, (a, b)\""
# groups of one type that span different node counts: on 3 nodes of 8 with pp 4, the data-
# parallel groups of 6 of stages 0 and 3 lie on one node (NVLS), those of stages 1 and 2
# across two (no NVLS across nodes); each communicator is its own
"$TWIN" simulate -m llama3-8b -c dgx-h100 --gpus 24 --set framework=megatron --set pp=4 \
	--set global_batch=24 --trace "$tmp/span.json" >"$out" 2>"$err"
check "simulate: a group's NCCL algorithm follows the nodes it spans" \
	"python3 -c \"
import json
ev = json.load(open('$tmp/span.json'))['traceEvents']
alg = {e['args']['stage']: e['args']['NCCL algorithm'] for e in ev
       if e.get('ph') == 'X' and '(ar_grads)' in e.get('name', '')}
assert alg[0] == alg[3] == 'nvls' and alg[1] != 'nvls' and alg[2] != 'nvls', alg
\""
# an odd GPU count: the refusal's hint, followed as printed with K = 6 and N = 6, runs (and the
# descriptive field set beside node.gpus, as the hint says, gets no note)
"$TWIN" simulate -m tiny -c dgx-h100 --gpus 12 >"$out" 2>"$err"
hint=$(sed -n 's/.*model such a node: //p' "$err" | sed 's/=K/=6/g; s/=N/=6/g')
# shellcheck disable=SC2086
"$TWIN" simulate -m tiny -c dgx-h100 --gpus 12 $hint >"$out" 2>"$tmp/hint.err"
check "simulate --gpus 12: the whole-node hint runs as printed, without a note" \
	"[ -n \"$hint\" ] && grep -q '^step time' '$out' && [ ! -s '$tmp/hint.err' ]"

# NCCL_ALGO / NCCL_PROTO (strategy nccl_algo, nccl_proto): the tuner picks among what they
# leave; Tree alone makes a one-node TP group's all-reduce NCCL's chain; LL alone is slower
base="-m gpt3-175b -c dgx-a100-80g --gpus 1024 -s examples/strategies/megatron-175b.json"
# shellcheck disable=SC2086
"$TWIN" simulate $base >"$tmp/n0" 2>"$err"
# shellcheck disable=SC2086
"$TWIN" simulate $base --set nccl_algo=Tree >"$tmp/n1" 2>"$err"
# shellcheck disable=SC2086
"$TWIN" simulate $base --set nccl_proto=LL >"$tmp/n2" 2>"$err"
step() { sed -n 's/^step time *\([0-9.]*\) s/\1/p' "$1"; }
check "simulate: nccl_algo=Tree runs every all-reduce as a tree" \
	"grep -q '^all_reduce .* tree/' '$tmp/n1' && ! grep -q '^all_reduce .* ring/' '$tmp/n1'"
check "simulate: nccl_proto=LL is LL only and slower" \
	"grep -q '^all_reduce .* ring/LL\$' '$tmp/n2' && python3 -c 'import sys; sys.exit(not float(\"$(step "$tmp/n2")\") > float(\"$(step "$tmp/n0")\"))'"
# NVLSTree runs when NCCL_ALGO names it (not by the default tuner): data parallelism over two
# H100 nodes, eight GPUs each, all-reduces through NVLS and a two-node tree, faster than the ring
dp2="-m llama2-7b -c dgx-h100 --gpus 16 -s megatron-175b --set tp=1 --set pp=1 --set global_batch=32"
# shellcheck disable=SC2086
"$TWIN" simulate $dp2 >"$tmp/t0" 2>"$err"
# shellcheck disable=SC2086
"$TWIN" simulate $dp2 --set nccl_algo=Ring,Tree,NVLSTree >"$tmp/t1" 2>"$err"
check "simulate: nccl_algo naming NVLSTree runs the two-node all-reduce as NVLS + tree, faster" \
	"grep -q '^all_reduce .* nvlstree/Simple\$' '$tmp/t1' && ! grep -q nvlstree '$tmp/t0' && python3 -c 'import sys; sys.exit(not float(\"$(step "$tmp/t1")\") < float(\"$(step "$tmp/t0")\"))'"
# shellcheck disable=SC2086
"$TWIN" simulate $base --set nccl_algo=pat >"$out" 2>"$err"
st=$?
check "simulate: a collective NCCL_ALGO leaves nothing for is exit 2, one line, no output" \
	"[ $st -eq 2 ] && [ ! -s '$out' ] && [ \$(wc -l <'$err') -eq 1 ] && grep -q 'No algorithm/protocol available' '$err'"
# sliding windows: GPT-OSS-20B (windows of 128 on alternate layers) is faster than the same
# model without them, the same in both modes; with context parallelism the ring refuses the
# windows in one line and Ulysses runs them
cat >"$tmp/gow.json" <<'J'
{"framework": "megatron", "tp": 1, "pp": 1, "ep": 8, "micro_batch": 1, "global_batch": 16,
 "seq_len": 16384, "distributed_optimizer": true}
J
"$TWIN" model show gpt-oss-20b --json | python3 -c 'import json,sys; m=json.load(sys.stdin)["model"]; [m.pop(k) for k in ("sliding_window", "full_attention_every", "full_attention_first")]; json.dump(m, open(sys.argv[1], "w"))' "$tmp/go-full.json"
"$TWIN" simulate -m gpt-oss-20b -c dgx-h100 --gpus 8 -s "$tmp/gow.json" >"$tmp/w1" 2>"$err"
"$TWIN" simulate -m gpt-oss-20b -c dgx-h100 --gpus 8 -s "$tmp/gow.json" --full >"$tmp/w2" 2>"$err"
"$TWIN" simulate -m "$tmp/go-full.json" -c dgx-h100 --gpus 8 -s "$tmp/gow.json" >"$tmp/w3" 2>"$err"
check "simulate: windows make GPT-OSS-20B faster at 16k tokens, the same in both modes" \
	"[ \"$(step "$tmp/w1")\" = \"$(step "$tmp/w2")\" ] && python3 -c 'import sys; sys.exit(not float(\"$(step "$tmp/w1")\") < 0.95 * float(\"$(step "$tmp/w3")\"))'"
"$TWIN" simulate -m gpt-oss-20b -c dgx-h100 --gpus 16 -s "$tmp/gow.json" --set cp=2 >"$out" 2>"$err"
st=$?
check "simulate: ring attention refuses sliding windows (exit 2, one line)" \
	"[ $st -eq 2 ] && [ ! -s '$out' ] && [ \$(wc -l <'$err') -eq 1 ] && grep -q 'cp_kind=ring: Transformer Engine.s p2p ring attention does not run' '$err'"
"$TWIN" simulate -m gpt-oss-20b -c dgx-h100 --gpus 16 -s "$tmp/gow.json" --set cp=2 --set cp_kind=ulysses >"$out" 2>"$err"
check "simulate: Ulysses runs the windows" "grep -q '^step time' '$out'"
"$TWIN" simulate -m gpt-oss-20b -c dgx-h100 --gpus 16 -s "$tmp/gow.json" --set cp=2 --set cp_kind=allgather >"$out" 2>"$err"

# the GPUs' speed spread: a job of 16 runs its compute at the pace of its slowest GPU
# (cluster_job_pace), in both modes alike; identical GPUs run at 1
for v in 0.08 0; do
	for m in "" --full; do
		"$TWIN" simulate -m llama2-7b -c dgx-h100 --gpus 16 -s megatron-175b --set tp=2 --set pp=2 \
			--set global_batch=16 --set gpu.speed_variation=$v $m --json >"$tmp/pace_$v$m.json" 2>"$err"
	done
done
check "simulate: GPU pace of 16 GPUs at an 8% spread; compute slower by it; symmetric == full" python3 -c "
import json, math
a, af, b, bf = (json.load(open('$tmp/pace_' + f + '.json')) for f in ('0.08', '0.08--full', '0', '0--full'))
e = 1.7659913  # E[max of 16 standard normals]
assert abs(a['gpu_pace'] - (1 + 0.08 / (2 * 2.698) * e)) < 1e-6 and b['gpu_pace'] == 1
r = a['analysis']['compute_ns'] / b['analysis']['compute_ns']
assert abs(r - a['gpu_pace']) < 0.002, r
assert a['step_time_s'] > b['step_time_s']
assert a['sim']['step_ns'] == af['sim']['step_ns'] and b['sim']['step_ns'] == bf['sim']['step_ns']"
check "simulate: the summary names the GPU pace" \
	sh -c "'$TWIN' simulate -m llama2-7b -c dgx-h100 --gpus 16 -s megatron-175b --set tp=2 --set pp=2 --set global_batch=16 | grep -q 'GPU pace             x1.0262 on compute: the slowest of 16 GPUs'"
check "simulate: Transformer Engine's KV all-gather runs the windows" "grep -q '^step time' '$out'"

# ZeRO-3 offload with gradient accumulation: partition_grads' copies run on
# reduce_and_partition_stream, not behind the parameter fetches' H2D, so overlap_comm (a
# stream of its own) is not slower than the compute stream
for oc in true false; do
	"$TWIN" simulate -m mixtral-8x7b -c cloud-eth --gpus 4 --ds-config examples/ds_configs/zero3-offload.json \
		--set train_micro_batch_size_per_gpu=1 --set gradient_accumulation_steps=4 \
		--set zero_optimization.overlap_comm=$oc --json >"$tmp/oc_$oc.json" 2>"$err"
done
check "simulate: ZeRO-3 offload, overlap_comm on is faster than off" \
	"[ \"\$(python3 -c \"import json; a=json.load(open('$tmp/oc_true.json')); b=json.load(open('$tmp/oc_false.json')); print(a['step_time_s'] < b['step_time_s'])\")\" = True ]"
