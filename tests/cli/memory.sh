#!/bin/sh
# CLI tests for "twin memory": the 65B question (ZeRO-3 alone does not fit on 8 x 80 GB,
# offload and recompute change the answer), per-stage roles under PP, --json parses and
# agrees with the text, and "twin simulate --memory" shares the report.
. tests/lib.sh
job="-m llama-65b -c dgx-a100-80g --gpus 8"

# shellcheck disable=SC2086
"$TWIN" memory $job --ds-config examples/ds_configs/zero3.json >"$tmp/z3" 2>"$tmp/err"
check "memory zero3 exits 0" test $? -eq 0
check "memory zero3 is quiet on stderr" test ! -s "$tmp/err"
check "65B ZeRO-3 does not fit on 8 x 80 GB" grep -q "GPU .*does not fit: needs .* GiB more — largest items: optimizer" "$tmp/z3"
check "memory prints the breakdown" sh -c "grep -q '^    master ' '$tmp/z3' && grep -q '^    activations ' '$tmp/z3' && grep -q '^    cuda context ' '$tmp/z3'"
# optimizer states are 8 B x 65.3e9 / 8 = 60.80 GiB per GPU
check "ZeRO-3 optimizer states 60.80 GiB per GPU" grep -q "^    optimizer  *60.80 GiB" "$tmp/z3"

# shellcheck disable=SC2086
"$TWIN" memory $job --ds-config examples/ds_configs/zero3-offload.json --set recompute=full >"$tmp/off"
check "offload + full recompute fits on the GPU" grep -q "^  GPU .*fits, .* GiB free" "$tmp/off"
check "offload puts the optimizer states on the host" sh -c "sed -n '/^  host/,\$p' '$tmp/off' | grep -q '^    optimizer  *60.80 GiB'"
check "full recompute keeps checkpoints" grep -q "^    checkpoints " "$tmp/off"

# shellcheck disable=SC2086
"$TWIN" memory $job -s lora-zero3 >"$tmp/lora"
check "LoRA fits and has tiny optimizer states" sh -c "grep -q '^  GPU .*fits' '$tmp/lora' && grep -q '^    optimizer  *0.0[0-9] GiB' '$tmp/lora'"

# pipeline: one role per stage, the first stage holds more activations than the last
"$TWIN" memory -m gpt3-175b -c dgx-a100-80g --gpus 64 -s megatron-175b >"$tmp/pp" 2>&1
check "megatron 175B: one role per pipeline stage" test "$(grep -c '^pipeline stage ' "$tmp/pp")" -eq 8
"$TWIN" memory -m gpt3-175b -c dgx-a100-80g --gpus 64 -s megatron-175b --json >"$tmp/pp.json"
check "--json parses" python3 -c "import json,sys; json.load(open('$tmp/pp.json'))"
# full recompute, 1F1B: stage s keeps 8 - s micro-batches x 12 layer inputs of 2sbh bytes
check "--json: stage s keeps (8 - s) x 12 x 2sbh of checkpoints" python3 -c "
import json; d = json.load(open('$tmp/pp.json')); r = d['roles']
c = [x['gpu']['breakdown_bytes']['checkpoints'] for x in r]
assert c == [(8 - s) * 12 * 2 * 2048 * 12288 for s in range(8)], c"
check "--json: verdict and capacity per role" python3 -c "
import json; d = json.load(open('$tmp/pp.json'))
g = d['roles'][0]['gpu']; assert g['capacity_bytes'] > 0 and g['verdict'] and 'fits' in g"

# simulate --memory prints the same report after its own output
if "$TWIN" simulate $job --ds-config examples/ds_configs/zero3.json --memory >"$tmp/sim" 2>"$tmp/simerr"; then
	check "simulate --memory prints the memory report" grep -q "largest items: optimizer" "$tmp/sim"
else
	check "simulate --memory fails with one line" test "$(wc -l <"$tmp/simerr")" -eq 1
fi

# every recompute mode is named in the header (op was read past the end of a name table)
for r in none selective full op; do
	"$TWIN" memory -m llama3-8b -c dgx-h100 --gpus 8 -s torchtitan-fsdp2 --set recompute=$r >"$tmp/rc" 2>&1
	check "memory header names recompute $r" grep -q "recompute $r, " "$tmp/rc"
done

# a fused cross-entropy keeps only the 16-bit logits (8,192 tokens x 128,256 x 2 bytes; HF's
# eager loss holds 10 bytes a logit); hidden dropout adds two 1-byte masks per layer
mem8b="-m llama3-8b -c dgx-h100 --gpus 8 -s torchtitan-fsdp2 --json"
# shellcheck disable=SC2086
"$TWIN" memory $mem8b --set cross_entropy=fused >"$tmp/ce.json"
check "cross_entropy fused: logits are 2 bytes a logit" python3 -c "
import json; b = json.load(open('$tmp/ce.json'))['roles'][0]['gpu']['breakdown_bytes']
assert b['logits'] == 8192 * 128256 * 2, b['logits']"
# shellcheck disable=SC2086
"$TWIN" memory $mem8b --set recompute=none >"$tmp/d0.json"
# shellcheck disable=SC2086
"$TWIN" memory $mem8b --set recompute=none --set hidden_dropout=0.1 >"$tmp/d1.json"
check "hidden_dropout 0.1 keeps 2 x 8192 x 4096 bytes more per layer" python3 -c "
import json
a = [json.load(open(f))['roles'][0]['gpu']['breakdown_bytes']['activations'] for f in ('$tmp/d0.json', '$tmp/d1.json')]
assert a[1] - a[0] == 32 * 2 * 8192 * 4096, a"
# shellcheck disable=SC2086
"$TWIN" memory $mem8b --set hidden_dropout=2 >"$tmp/bad" 2>"$tmp/baderr"
check "hidden_dropout 2 exits 2" test $? -eq 2
check "hidden_dropout 2: one line naming the field and the range" sh -c "test \$(wc -l <'$tmp/baderr') -eq 1 && grep -q 'hidden_dropout: must be in \[0, 1\]' '$tmp/baderr' && test ! -s '$tmp/bad'"
"$TWIN" memory -m llama3-8b -c dgx-h100 --gpus 8 -s torchtitan-fsdp2 --set cross_entropy=fused >"$tmp/hdr" 2>&1
check "memory header says the loss is fused and names no dropout" sh -c "grep -q '^batch .*, fused loss' '$tmp/hdr' && ! grep -q dropout '$tmp/hdr'"
check "memory header names Megatron's default dropout" grep -q "^batch .*, dropout 0.1/0.1" "$tmp/pp"
