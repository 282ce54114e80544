#!/bin/sh
# twin simulate: host dispatch (strategy host_op_us) and Megatron's DP overlap knobs
# (overlap_grad_reduce, overlap_param_gather). Needs $TWIN; run from the repo root. Prints
# "ok - NAME" / "not ok - NAME" per check.
. tests/lib.sh

step() { # json file -> step time in s
	python3 -c "import json; print(json.load(open('$1'))['step_time_s'])"
}
sim() { # out.json, extra args...
	o=$1
	shift
	"$TWIN" simulate --json "$@" >"$o" 2>"$tmp/err" || echo "exit $?" >>"$tmp/fail"
}

# a small model with small micro-batches is bound by the host thread: without host cost it
# is much faster; a large model is GPU-bound and hardly changes
echo '{"framework":"megatron","micro_batch":1,"global_batch":8}' >"$tmp/small.json"
sim "$tmp/s0.json" -m gpt2-124m -c dgx-a100-80g --gpus 1 -s "$tmp/small.json" --set host_op_us=0
sim "$tmp/s1.json" -m gpt2-124m -c dgx-a100-80g --gpus 1 -s "$tmp/small.json"
check "host: runs" "[ ! -s '$tmp/fail' ]"
# the step grows by exactly the time the GPU waits for the host thread, a sizeable share of it,
# and without host cost the GPU never waits
cat >"$tmp/host.py" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
stall0, stall1 = a["analysis"]["stall_host_ns"], b["analysis"]["stall_host_ns"]
grow = b["analysis"]["step_ns"] - a["analysis"]["step_ns"]
assert stall0 == 0, stall0
assert abs(grow - stall1) <= 1000, (grow, stall1)
assert stall1 >= 0.15 * b["analysis"]["step_ns"], (stall1, b["analysis"]["step_ns"])
PY
check "host: small model slower by exactly its host stall, >= 15% of the step" \
	"python3 '$tmp/host.py' '$tmp/s0.json' '$tmp/s1.json'"
sim "$tmp/b0.json" -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json --set global_batch=64 --set host_op_us=0
sim "$tmp/b1.json" -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json --set global_batch=64
check "host: GPT-3 175B is GPU-bound (within 1%)" \
	"python3 -c \"import sys; a,b=$(step "$tmp/b0.json"),$(step "$tmp/b1.json"); sys.exit(0 if a <= b < 1.01 * a else 1)\""

# Megatron DP overlap: symmetric == full to the nanosecond with both knobs on
set -- -m gpt3-175b -c dgx-a100-80g --gpus 128 -s examples/strategies/megatron-175b.json \
	--set global_batch=32 --set pp=4 --set distributed_optimizer=true \
	--set overlap_grad_reduce=true --set overlap_param_gather=true
sim "$tmp/o_sym.json" "$@"
sim "$tmp/o_full.json" "$@" --full
check "overlap: symmetric == full" "[ \"$(step "$tmp/o_sym.json")\" = \"$(step "$tmp/o_full.json")\" ]"
sim "$tmp/n_sym.json" -m gpt3-175b -c dgx-a100-80g --gpus 128 -s examples/strategies/megatron-175b.json \
	--set global_batch=32 --set pp=4 --set distributed_optimizer=true
check "overlap: the knobs change the plan" "[ \"$(step "$tmp/o_sym.json")\" != \"$(step "$tmp/n_sym.json")\" ]"
# Megatron-Core --tp-comm-overlap: the SP collectives run alongside their GEMMs, so the step
# gets shorter; symmetric == full still
set -- -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=16 --set sequence_parallel=true
sim "$tmp/t0.json" "$@"
sim "$tmp/t1.json" "$@" --set tp_comm_overlap=true
sim "$tmp/t1f.json" "$@" --set tp_comm_overlap=true --full
check "tp_comm_overlap: shorter step" \
	"python3 -c \"import sys; sys.exit(0 if $(step "$tmp/t1.json") < $(step "$tmp/t0.json") else 1)\""
check "tp_comm_overlap: symmetric == full" "[ \"$(step "$tmp/t1.json")\" = \"$(step "$tmp/t1f.json")\" ]"
# Megatron's async TP all-reduce (on by default): each column-parallel backward's all-reduce
# runs beside its weight-grad GEMM, so part of the all-reduce time is hidden and the step is
# shorter than with it off, where every all-reduce is exposed; symmetric == full
set -- -m gpt3-175b -c dgx-a100-80g --gpus 64 -s examples/strategies/megatron-175b.json \
	--set global_batch=16
sim "$tmp/a1.json" "$@"
sim "$tmp/a1f.json" "$@" --full
sim "$tmp/a0.json" "$@" --set async_tensor_model_parallel_allreduce=false
cat >"$tmp/a.py" <<'PY'
import json, sys
on, off = (json.load(open(f))["analysis"] for f in sys.argv[1:3])
ar_on, ar_off = on["collectives"]["all_reduce"], off["collectives"]["all_reduce"]
assert on["step_ns"] < off["step_ns"], (on["step_ns"], off["step_ns"])
assert ar_off["exposed_ns"] >= 0.99 * ar_off["time_ns"], ar_off
assert ar_on["exposed_ns"] < 0.9 * ar_on["time_ns"], ar_on
PY
check "async TP all-reduce: shorter step, less of the all-reduce exposed" \
	"python3 '$tmp/a.py' '$tmp/a1.json' '$tmp/a0.json'"
check "async TP all-reduce: symmetric == full" "[ \"$(step "$tmp/a1.json")\" = \"$(step "$tmp/a1f.json")\" ]"
"$TWIN" config show -m gpt3-175b -c dgx-a100-80g --gpus 128 -s examples/strategies/megatron-175b.json \
	--set overlap_grad_reduce=true >"$tmp/cfg" 2>&1
check "overlap: config shows the knob and host_op_us" \
	"grep -q '^overlap_grad_reduce  *true  *set' '$tmp/cfg' && grep -q '^host_op_us' '$tmp/cfg'"
# DeepSpeed before 0.5.5: torch.cuda.synchronize() around every ZeRO-3 fetch, so no gather
# overlaps compute, and per-rank host loops make the step longer; symmetric == full
set -- -m llama3-8b -c dgx-a100-80g --gpus 16 -s examples/strategies/ds-zero3.json
sim "$tmp/z_new.json" "$@"
sim "$tmp/z_old.json" "$@" --set deepspeed_version=0.3.13
sim "$tmp/z_oldf.json" "$@" --set deepspeed_version=0.3.13 --full
cat >"$tmp/z.py" <<'PY'
import json, sys
new, old = (json.load(open(f))["analysis"] for f in sys.argv[1:3])
ag_new, ag_old = new["collectives"]["all_gather"], old["collectives"]["all_gather"]
assert ag_new["exposed_ns"] < 0.5 * ag_new["time_ns"], ag_new
assert ag_old["exposed_ns"] == ag_old["time_ns"], ag_old
assert old["step_ns"] > new["step_ns"], (old["step_ns"], new["step_ns"])
assert old["stall_host_ns"] > new["stall_host_ns"]
PY
check "old deepspeed zero-3: gathers fully exposed, a longer step" \
	"python3 '$tmp/z.py' '$tmp/z_new.json' '$tmp/z_old.json'"
check "old deepspeed zero-3: symmetric == full" \
	"[ \"$(step "$tmp/z_old.json")\" = \"$(step "$tmp/z_oldf.json")\" ]"
check "runs: no failures" "[ ! -s '$tmp/fail' ]"
