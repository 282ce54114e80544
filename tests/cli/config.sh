#!/bin/sh
# twin config show: the issue's done-when command, provenance sources, --set, --json, presets.
# Prints "ok - NAME" / "not ok - NAME" per check. Needs $TWIN; run from the repo root.
. tests/lib.sh
out=$tmp/out
err=$tmp/err

has() { grep -q -- "$1" "$out"; }
row() { # PATH VALUE SOURCE: the provenance row has these three columns
	awk -v p="$1" -v v="$2" -v s="$3" '$1 == p && $2 == v && $3 == s { f = 1 } END { exit !f }' "$out"
}

# the issue's done-when command
"$TWIN" config show -m llama2-70b -c dgx-h100 --gpus 16 \
	--ds-config examples/ds_configs/zero3-offload.json >"$out" 2>"$err"
st=$?
check "zero3-offload: exit 0" '[ $st -eq 0 ]'
check "zero3-offload: nothing on stderr" '[ ! -s "$err" ]'
check "zero3-offload: dp 16 derived" 'row dp 16 derived'
check "zero3-offload: stage 3 from the file" 'row zero_optimization.stage 3 file'
check "zero3-offload: optimizer offloaded to cpu" 'row zero_optimization.offload_optimizer.device cpu file'
check "zero3-offload: params offloaded to cpu" 'row zero_optimization.offload_param.device cpu file'
check "zero3-offload: reduce_bucket_size default 5e8" 'row zero_optimization.reduce_bucket_size 500000000 default'
check "zero3-offload: train_batch_size derived 16" 'row train_batch_size 16 derived'
check "zero3-offload: gpus from the option" 'row gpus 16 option'
check "zero3-offload: tokens per step" 'has "65,536 per step"'

# --set: sources and values
"$TWIN" config show -m llama2-70b -c dgx-h100 --gpus 16 \
	--ds-config examples/ds_configs/zero2.json --set zero_optimization.stage=3 --set tp=8 \
	--set train_micro_batch_size_per_gpu=4 >"$out" 2>"$err"
check "set: stage 3 from --set" 'row zero_optimization.stage 3 set'
check "set: tp 8 from --set" 'row tp 8 set'
check "set: dp 2 derived" 'row dp 2 derived'
check "set: micro 4 from --set" 'row train_micro_batch_size_per_gpu 4 set'
check "set: overlap_comm keeps the file value" 'row zero_optimization.overlap_comm true file'

# version-dependent defaults
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 --ds-config examples/ds_configs/zero2-offload.json \
	--set deepspeed_version=0.19.2 --set gradient_clipping=0.5 >"$out" 2>"$err"
check "version: 0.19.2 has check_grad_overflow off" 'row bf16.check_grad_overflow false default'
check "version: pin_memory stays from the file" 'row zero_optimization.offload_optimizer.pin_memory true file'
check "version: deepspeed_version from --set" 'row deepspeed_version 0.19.2 set'
check "version: gradient_clipping from --set" 'row gradient_clipping 0.5 set'

# --json
"$TWIN" config show -m llama2-70b -c dgx-h100 --gpus 16 \
	--ds-config examples/ds_configs/zero3-offload.json --json >"$out" 2>"$err"
check "json: parses" 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"derived\"][\"dp\"] == 16 and d[\"strategy\"][\"zero\"][\"stage\"] == 3 and d[\"strategy\"][\"zero\"][\"offload_param\"] == \"cpu\" and any(p[\"path\"] == \"dp\" and p[\"source\"] == \"derived\" for p in d[\"strategy\"][\"provenance\"])" "$out"'

# presets and our strategy files
"$TWIN" config show -m gpt3-175b -c dgx-a100-80g --gpus 1024 -s megatron-175b >"$out" 2>"$err"
check "megatron-175b: dp 16, 96 micro-batches" 'row dp 16 derived && row grad_accum 96 derived'
"$TWIN" config show -m gpt3-175b -c dgx-a100-80g --gpus 64 -s megatron-175b-interleaved \
	--set global_batch=64 >"$out" 2>"$err"
check "megatron-175b-interleaved: interleaved schedule by default" 'row schedule interleaved default'
"$TWIN" config show -m llama2-70b -c dgx-h100 --gpus 16 -s llama-70b-fsdp >"$out" 2>"$err"
check "llama-70b-fsdp: FULL_SHARD" 'row fsdp.sharding_strategy FULL_SHARD file'
"$TWIN" config show -m llama2-70b -c dgx-h100 --gpus 16 -s hf-trainer-zero3 >"$out" 2>"$err"
check "hf auto: reduce_bucket_size = hidden^2" 'row zero_optimization.reduce_bucket_size 67108864 derived'
check "hf auto: micro from TrainingArguments" 'row train_micro_batch_size_per_gpu 2 derived'
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 -s lora-zero2 >"$out" 2>"$err"
check "lora-zero2: rank 16 on all linears" 'row lora.rank 16 file && row lora.targets q,k,v,o,gate,up,down file'

# every ds_config example resolves
for f in examples/ds_configs/*.json; do
	"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 --ds-config "$f" >"$out" 2>"$err"
	st=$?
	check "example $f resolves" '[ $st -eq 0 ] && [ ! -s "$err" ]'
done

# unknown top-level key: a warning on stderr, not an error
printf '{"train_micro_batch_size_per_gpu": 1, "my_key": 1}' >"$out.ds.json"
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 --ds-config "$out.ds.json" >"$out" 2>"$err"
st=$?
rm -f "$out.ds.json"
check "unknown top-level key: exit 0" '[ $st -eq 0 ]'
check "unknown top-level key: warning names it" 'grep -q "my_key: unknown top-level key" "$err"'

# help
"$TWIN" config show --help >"$out" 2>"$err"
st=$?
check "help: exit 0 and usage" '[ $st -eq 0 ] && has "usage: twin config show"'
"$TWIN" config frob >"$out" 2>"$err"
st=$?
check "unknown action: exit 2, one line" '[ $st -eq 2 ] && [ $(wc -l <"$err") -eq 1 ]'

# an old DeepSpeed's ZeRO-3 code path is shown, derived from deepspeed_version; today's is not
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 -s ds-zero3 --set deepspeed_version=0.3.13 >"$out" 2>"$err"
check "old deepspeed: per-parameter ZeRO-3 shown" \
	'has "^zero3_code_path  *per-parameter fetch and reduce-scatter, device syncs  *derived  *deepspeed_version < 0.5.5"'
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 -s ds-zero3 --set deepspeed_version=0.5.7 >"$out" 2>"$err"
check "deepspeed 0.5.7: synchronized fetches shown" \
	'has "^zero3_code_path  *device syncs at each fetch, per-parameter reduce-scatter  *derived  *deepspeed_version < 0.6.0"'
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 -s ds-zero3 >"$out" 2>"$err"
check "today's deepspeed: no zero3_code_path row" '! has "^zero3_code_path"'

# Megatron's --grad-reduce-in-bf16: main grads and their reduction in bf16 instead of fp32
echo '{"framework":"megatron","micro_batch":1,"global_batch":16}' >"$out.mg.json"
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 -s "$out.mg.json" >"$out" 2>"$err"
check "megatron bf16: grads accumulated in fp32" 'row grad_accum_dtype fp32 derived'
"$TWIN" config show -m llama2-7b -c dgx-h100 --gpus 8 -s "$out.mg.json" --set grad_reduce_in_bf16=true >"$out" 2>"$err"
check "megatron grad_reduce_in_bf16: grads in bf16" 'row grad_accum_dtype bf16 derived && row grad_reduce_in_bf16 true set'
rm -f "$out.mg.json"
