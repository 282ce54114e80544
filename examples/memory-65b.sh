#!/bin/sh
# Does a 65B model fine-tune on one DGX A100 (8 x 80 GB)? ZeRO-3 alone, then with optimizer
# and parameter offload, with full recomputation, with NVMe offload, and with LoRA: how each
# knob moves the peak. Usage: sh examples/memory-65b.sh [path/to/twin]
TWIN=${1:-${TWIN:-build/twin}}
job="-m llama-65b -c dgx-a100-80g --gpus 8"
run() { # title, options...
	title=$1
	shift
	echo "=== $title"
	# shellcheck disable=SC2086
	"$TWIN" memory $job "$@" | grep -E '^  (GPU|host|nvme) |^verdict|^    (optimizer|master|params|grads|activations|checkpoints) '
	echo
}
run "ZeRO-3" --ds-config examples/ds_configs/zero3.json
run "ZeRO-3 + full recompute" --ds-config examples/ds_configs/zero3.json --set recompute=full
run "ZeRO-3 + CPU offload of optimizer and params" --ds-config examples/ds_configs/zero3-offload.json
run "ZeRO-3 + CPU offload + full recompute" --ds-config examples/ds_configs/zero3-offload.json --set recompute=full
run "ZeRO-3 + NVMe offload + full recompute" --ds-config examples/ds_configs/zero3-nvme.json --set recompute=full
run "LoRA r=8 on q,v + ZeRO-3 + full recompute" -s lora-zero3
