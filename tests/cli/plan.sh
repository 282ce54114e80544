#!/bin/sh
# twin plan: the what-if search on Llama-2 7B over 8 H100 — the table, --json (every printed
# candidate fits, best first), --emit-ds-config (both files load back through twin config show
# with the same degrees, written atomically: a failing run leaves nothing), pins, megatron.
# Needs $TWIN; run from the repo root. Prints "ok - NAME" / "not ok - NAME" per check.
. tests/lib.sh
err=$tmp/err

py() { # python expression on the parsed JSON file $1 (as d)
	python3 -c "import json,sys; d=json.load(open('$1')); print($2)"
}

"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 >"$tmp/out" 2>"$err"
st=$?
check "plan: exits 0" "[ $st -eq 0 ]"
check "plan: prints the table header" "grep -q 'tok/s/GPU' '$tmp/out' && grep -q 'MFU' '$tmp/out'"
check "plan: prints 5 candidates" "[ \$(grep -c '^[1-5] ' '$tmp/out') -eq 5 ]"
check "plan: prints counts and search time" "grep -q '^candidates [0-9]* ' '$tmp/out' && grep -q 'configs/s' '$tmp/out'"
check "plan: nothing on stderr" "[ ! -s '$err' ]"

"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --top 8 --json >"$tmp/p.json" 2>"$err"
check "plan --json: parses" "python3 -m json.tool '$tmp/p.json' >/dev/null"
check "plan --json: 8 candidates" "[ \"\$(py '$tmp/p.json' 'len(d[\"top\"])')\" = 8 ]"
check "plan --json: every candidate fits" \
	"[ \"\$(py '$tmp/p.json' 'all(c[\"peak_bytes\"] <= c[\"capacity_bytes\"] for c in d[\"top\"])')\" = True ]"
check "plan --json: best first (step times ascending)" \
	"[ \"\$(py '$tmp/p.json' 'all(a[\"step_time_s\"] <= b[\"step_time_s\"] for a, b in zip(d[\"top\"], d[\"top\"][1:]))')\" = True ]"
check "plan --json: degrees multiply to the GPUs, batch rule holds" \
	"[ \"\$(py '$tmp/p.json' 'all(c[\"tp\"]*c[\"pp\"]*c[\"dp\"] == 8 and c[\"micro_batch\"]*c[\"grad_accum\"]*c[\"dp\"] == 32 for c in d[\"top\"])')\" = True ]"
check "plan --json: counts add up" \
	"[ \"\$(py '$tmp/p.json' 'd[\"simulated\"] + d[\"pruned\"] == d[\"fit\"] and d[\"fit\"] <= d[\"candidates\"]')\" = True ]"

# the best candidate, simulated on its own through the same sets, gives the same step time
sets=$(py "$tmp/p.json" '" ".join("--set " + s for s in d["top"][0]["sets"])')
# shellcheck disable=SC2086
"$TWIN" simulate -m llama2-7b -c dgx-h100 --gpus 8 $sets --json >"$tmp/s.json" 2>"$err"
check "plan: best re-simulates to the same step time" \
	"[ \"\$(python3 -c \"import json; a=json.load(open('$tmp/p.json'))['top'][0]['step_time_s']; b=json.load(open('$tmp/s.json'))['step_time_s']; print(abs(a-b) <= 1e-9*a)\")\" = True ]"

# --emit-ds-config: both files, loaded back as a user would, give the same degrees
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --json \
	--emit-ds-config "$tmp/ds.json" >"$tmp/e.json" 2>"$err"
check "plan --emit-ds-config: exits 0, writes both files" \
	"[ -s '$tmp/ds.json' ] && [ -s '$tmp/ds.json.strategy.json' ]"
check "plan --emit-ds-config: no temporaries left" "[ \$(ls '$tmp' | grep -c tmp) -eq 0 ]"
check "plan --emit-ds-config: ds_config has the batch and ZeRO stage" \
	"[ \"\$(py '$tmp/ds.json' 'd[\"train_batch_size\"] == 32 and \"stage\" in d[\"zero_optimization\"]')\" = True ]"
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 --ds-config "$tmp/ds.json" \
	-s "$tmp/ds.json.strategy.json" --json >"$tmp/c.json" 2>"$err"
check "plan --emit-ds-config: loads back with twin config show" "[ -s '$tmp/c.json' ] && [ ! -s '$err' ]"
want=$(py "$tmp/e.json" '"%d %d %d %d %d" % tuple(d["top"][0][k] for k in ("tp","pp","dp","micro_batch","zero_stage"))')
got=$(python3 -c "
import json
d = json.load(open('$tmp/c.json'))
s = d['strategy']
g = s['degrees']
print('%d %d %d %d %d' % (g['tp'], g['pp'], g['dp'], s['batch']['micro_batch'], s['zero']['stage']))" 2>/dev/null)
check "plan --emit-ds-config: same tp pp dp micro zero ($want = $got)" "[ -n '$want' ] && [ '$want' = '$got' ]"

# --emit-ds-config onto a FIFO (a rename would replace it): refused before the search
mkfifo "$tmp/fifo"
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --emit-ds-config "$tmp/fifo" \
	>"$tmp/o" 2>"$err"
check "plan --emit-ds-config FIFO: exit 2, one line, nothing printed, FIFO kept" \
	"[ $? -eq 2 ] && [ \$(wc -l <'$err') -eq 1 ] && [ ! -s '$tmp/o' ] && [ -p '$tmp/fifo' ] && grep -q 'is not a regular file' '$err'"

# a bare file name (no directory) is a file too, not a preset name
case $TWIN in /*) abs=$TWIN ;; *) abs=$(pwd)/$TWIN ;; esac
(cd "$tmp" && "$abs" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 \
	--emit-ds-config bare.json >out.bare 2>err.bare)
st=$?
check "plan --emit-ds-config with a bare file name: exits 0, writes both files" \
	"[ $st -eq 0 ] && [ -s '$tmp/bare.json' ] && [ -s '$tmp/bare.json.strategy.json' ] && [ ! -s '$tmp/err.bare' ]"

# a failing run writes nothing: nothing fits
"$TWIN" plan -m llama2-70b -c dgx-h100 --gpus 1 --global-batch 8 --emit-ds-config "$tmp/no.json" \
	>"$tmp/out" 2>"$err"
st=$?
check "plan: nothing fits exits 2" "[ $st -eq 2 ]"
check "plan: nothing fits says the shortfall in one line" \
	"grep -q 'smallest shortfall' '$err' && [ \$(wc -l <'$err') -eq 1 ] && [ ! -s '$tmp/out' ]"
check "plan: nothing fits writes no file" "[ ! -e '$tmp/no.json' ] && [ ! -e '$tmp/no.json.strategy.json' ]"

# pins and frameworks
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --set tp=2 --set recompute=full \
	--json >"$tmp/pin.json" 2>"$err"
check "plan --set tp=2 recompute=full: pinned" \
	"[ \"\$(py '$tmp/pin.json' 'all(c[\"tp\"] == 2 and c[\"recompute\"] == \"full\" for c in d[\"top\"])')\" = True ]"
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --framework megatron --json \
	>"$tmp/m.json" 2>"$err"
check "plan --framework megatron: distributed optimizer or not, pp divides layers" \
	"[ \"\$(py '$tmp/m.json' 'd[\"framework\"] == \"megatron\" and all(c[\"shard\"] in (\"distopt\", \"no-distopt\") and 32 % c[\"pp\"] == 0 for c in d[\"top\"])')\" = True ]"
# a pin spelled with its tree's prefix is a pin; a path the search sets itself is refused
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --set strategy.tp=2 \
	--set ds_config.zero_optimization.stage=1 --json >"$tmp/pfx.json" 2>"$err"
check "plan --set strategy.tp=2 ds_config.zero_optimization.stage=1: pinned" \
	"[ \"\$(py '$tmp/pfx.json' 'len(d[\"top\"]) > 0 and all(c[\"tp\"] == 2 and c[\"shard\"] == \"zero 1\" for c in d[\"top\"])')\" = True ]"
# the user's precision stands for every candidate (the search leaves its own out): fp16 with
# loss scaling is a little slower than the default bf16
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --set precision=fp16 --top 1 \
	--json >"$tmp/fp16.json" 2>"$err"
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --top 1 --json >"$tmp/bf16.json" 2>>"$err"
check "plan --set precision=fp16: searched in fp16 (deepspeed)" \
	"python3 -c \"import json; a = json.load(open('$tmp/fp16.json'))['top'][0]['step_time_s']; b = json.load(open('$tmp/bf16.json'))['top'][0]['step_time_s']; assert a > b, (a, b)\""
# a cluster --set changes the answer: half the memory leaves fewer fitting candidates
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --set gpu.memory_gib=40 --json \
	>"$tmp/h.json" 2>"$err"
check "plan --set gpu.memory_gib=40: fewer candidates fit" \
	"[ \"\$(python3 -c \"import json; a=json.load(open('$tmp/p.json'))['fit']; b=json.load(open('$tmp/h.json'))['fit']; print(b < a)\")\" = True ]"

# a pipeline candidate round-trips too (pp lives in the strategy file beside the ds_config)
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --set pp=2 --set recompute=full \
	--emit-ds-config "$tmp/pp.json" >"$tmp/out" 2>"$err"
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 --ds-config "$tmp/pp.json" \
	-s "$tmp/pp.json.strategy.json" --json >"$tmp/c2.json" 2>"$err"
check "plan --emit-ds-config with pp=2: loads back as pp 2, recompute full" \
	"[ \"\$(py '$tmp/c2.json' 'd[\"strategy\"][\"degrees\"][\"pp\"] == 2 and d[\"strategy\"][\"activations\"][\"recompute\"] == \"full\"')\" = True ]"

# Megatron's block recompute is a searched choice: half of each model chunk's layers; a pinned
# recompute_num_layers keeps every candidate at it; other frameworks do not search it
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --framework megatron --exhaustive \
	--top 500 --set gpu.memory_gib=40 --json >"$tmp/blk.json" 2>"$err"
cat >"$tmp/blk.py" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
blk = [c for c in d["top"] if c["recompute_num_layers"] > 0]
ok = len(blk) > 0 and all(c["recompute"] == "full" and c["recompute_num_layers"] == 32 // c["pp"] // c["vp"] // 2 for c in blk)
# each block candidate is faster than its full-recompute twin and needs more memory
key = lambda c: (c["tp"], c["pp"], c["vp"], c["cp"], c["micro_batch"], c["zero_stage"])
full = {key(c): c for c in d["top"] if c["recompute"] == "full" and c["recompute_num_layers"] == 0}
pairs = [(c, full[key(c)]) for c in blk if key(c) in full]
ok = ok and len(pairs) > 0 and all(b["step_time_s"] < f["step_time_s"] and b["peak_bytes"] > f["peak_bytes"] for b, f in pairs)
print(ok)
EOF
check "plan --framework megatron: block recompute candidates (half a chunk) between none and full" \
	"[ \"\$(python3 '$tmp/blk.py' '$tmp/blk.json')\" = True ]"
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --framework megatron \
	--set recompute_num_layers=4 --json >"$tmp/blk4.json" 2>"$err"
check "plan --set recompute_num_layers=4: pinned" \
	"[ \"\$(py '$tmp/blk4.json' 'len(d[\"top\"]) > 0 and all(c[\"recompute\"] == \"full\" and c[\"recompute_num_layers\"] == 4 for c in d[\"top\"])')\" = True ]"
check "plan (deepspeed): no block recompute searched" \
	"[ \"\$(py '$tmp/p.json' 'all(c[\"recompute_num_layers\"] == 0 for c in d[\"top\"])')\" = True ]"
# FSDP searches torchtitan's selective op AC (tp 1, dense); a pin keeps only it
"$TWIN" plan -m llama3-8b -c dgx-a100-80g --gpus 64 --global-batch 64 --seq 8192 --framework fsdp \
	--set recompute=op --json >"$tmp/op.json" 2>"$err"
check "plan (fsdp) --set recompute=op: pinned, tp 1" \
	"[ \"\$(py '$tmp/op.json' 'len(d[\"top\"]) > 0 and all(c[\"recompute\"] == \"op\" and c[\"tp\"] == 1 for c in d[\"top\"])')\" = True ]"
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 32 --framework megatron \
	--set recompute=op >"$tmp/o" 2>"$err"
st=$?
check "plan (megatron) --set recompute=op: exit 2, one line" \
	"[ $st -eq 2 ] && [ \$(wc -l <'$err') -eq 1 ] && grep -q 'fsdp only' '$err'"

# Megatron's pipeline split with the embedding and the loss counted: Llama-2 13B's 40 layers
# (+ 2) on pp 3, marked in the table; the candidate's --set list runs that split
"$TWIN" plan -m llama2-13b -c dgx-h100 --gpus 24 --global-batch 24 --framework megatron \
	--set tp=8 --set pp=3 --set recompute=full >"$tmp/el.txt" 2>"$err"
check "plan: a pp that splits layers + 2 is searched and marked (3*)" \
	"grep -q '^1  *8  *3\\* ' '$tmp/el.txt' && grep -q 'embedding and the loss counted' '$tmp/el.txt'"
"$TWIN" plan -m llama2-13b -c dgx-h100 --gpus 24 --global-batch 24 --framework megatron \
	--set tp=8 --set pp=3 --set recompute=full --top 1 --json >"$tmp/el.json" 2>"$err"
sets=$(py "$tmp/el.json" '" ".join("--set " + s for s in d["top"][0]["sets"])')
# shellcheck disable=SC2086
"$TWIN" config show -m llama2-13b -c dgx-h100 --gpus 24 $sets --json >"$tmp/el.c.json" 2>"$err"
check "plan --json: the candidate's sets give the split (pp 3, embedding and loss counted)" \
	"[ \"\$(py '$tmp/el.json' 'd[\"top\"][0][\"embedding_loss_in_split\"]')\" = True ] && [ \"\$(py '$tmp/el.c.json' 'd[\"strategy\"][\"degrees\"][\"pp\"] == 3 and d[\"strategy\"][\"account_for_embedding_in_pipeline_split\"] and d[\"strategy\"][\"account_for_loss_in_pipeline_split\"]')\" = True ]"

# NCCL_ALGO=Tree: the candidates whose all-gathers or reduce-scatters NCCL could not run are
# dropped and counted; the rest are ranked
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 64 --set nccl_algo=tree --json \
	>"$tmp/nt.json" 2>"$err"
st=$?
check "plan --set nccl_algo=tree: exits 0 with candidates ranked and the unrunnable counted" \
	"[ $st -eq 0 ] && [ \$(py '$tmp/nt.json' \"d['nccl_unrunnable'] > 0 and len(d['top']) > 0\") = True ]"
# every candidate that fits dropped for NCCL_ALGO (NVLSTree alone: no one-node all-reduce):
# one line that says so, not "nothing fits"
"$TWIN" plan -m llama2-7b -c dgx-h100 --gpus 8 --global-batch 64 --set nccl_algo=NVLSTree \
	>"$tmp/o" 2>"$tmp/e"
st=$?
check "plan --set nccl_algo=NVLSTree on one node: exit 2, one line, nothing runs" \
	"[ $st -eq 2 ] && [ ! -s '$tmp/o' ] && [ \$(wc -l <'$tmp/e') -eq 1 ] && grep -q 'nothing runs: .* fit but NCCL could not run them' '$tmp/e'"

# MoE with expert parallelism under Megatron: each choice also with the combined 1F1B
# (overlap_moe_expert_parallel_comm), only where Megatron allows it; a user's pin keeps it off
"$TWIN" plan -m tiny-moe -c dgx-h100 --gpus 16 --global-batch 64 --framework megatron --top 200 \
	--exhaustive --json >"$tmp/mo.json" 2>"$err"
"$TWIN" plan -m tiny-moe -c dgx-h100 --gpus 16 --global-batch 64 --framework megatron --top 200 \
	--exhaustive --set overlap_moe_expert_parallel_comm=false --json >"$tmp/mo_off.json" 2>>"$err"
check "plan: MoE candidates with the combined 1F1B, where Megatron allows it, and not when pinned off" \
	python3 -c "
import json
on, off = (json.load(open(f))['top'] for f in ('$tmp/mo.json', '$tmp/mo_off.json'))
ov = [c for c in on if c['overlap_moe_expert_parallel_comm']]
assert ov and len(ov) < len(on), len(ov)
assert all(c['ep'] > 1 and c['recompute'] != 'full' and (c['pp'] == 1 or c['vp'] > 1) for c in ov)
assert all('overlap_moe_expert_parallel_comm=true' in c['sets'] for c in ov)
assert not any(c['overlap_moe_expert_parallel_comm'] for c in off)"

# Megatron MoE candidates run the experts as grouped GEMMs with the fused permutation and
# router, as Megatron's recipes do; a user's --set comes after and wins (here: a slower best step)
"$TWIN" plan -m tiny-moe -c dgx-h100 --gpus 16 --global-batch 64 --framework megatron --top 1 \
	--set moe_grouped_gemm=false --set moe_permute_fusion=false --set moe_router_fusion=false \
	--json >"$tmp/mo_loop.json" 2>>"$err"
check "plan: Megatron MoE candidates set grouped GEMMs, the fused permutation and router; the user's --set wins" \
	python3 -c "
import json
on, loop = (json.load(open(f))['top'] for f in ('$tmp/mo.json', '$tmp/mo_loop.json'))
assert all('moe_grouped_gemm=true' in c['sets'] and 'moe_permute_fusion=true' in c['sets'] and
           'moe_router_fusion=true' in c['sets'] for c in on)
assert loop[0]['step_time_s'] > on[0]['step_time_s'], (loop[0]['step_time_s'], on[0]['step_time_s'])"

# context parallelism under FSDP (torchtitan's): long samples get cp candidates; a model with
# sliding windows keeps cp 1 there (PyTorch's rotation runs no window)
"$TWIN" plan -m llama3-8b -c dgx-h100 --gpus 16 --global-batch 16 --seq 65536 --framework fsdp \
	--top 20 --exhaustive --json >"$tmp/fcp.json" 2>"$err"
"$TWIN" plan -m gemma3-27b -c dgx-h100 --gpus 16 --global-batch 16 --seq 16384 --framework fsdp \
	--top 20 --exhaustive --json >"$tmp/fcpw.json" 2>>"$err"
check "plan --framework fsdp: cp candidates for long samples, none for a windowed model" python3 -c "
import json
a, w = (json.load(open(f))['top'] for f in ('$tmp/fcp.json', '$tmp/fcpw.json'))
assert any(c['cp'] > 1 for c in a) and w and all(c['cp'] == 1 for c in w), ([c['cp'] for c in a], [c['cp'] for c in w])"
