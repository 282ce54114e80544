#!/bin/sh
# make demo: the main job on a built-in example — will Llama-2-7B train on two DGX H100 nodes
# with ZeRO-2, how fast, where does the time go, and what does a slower network cost?
TWIN=${1:-build/twin}
set -e
run() {
	echo
	echo "\$ twin $*"
	"$TWIN" "$@"
}
run model show llama2-7b
run simulate -m llama2-7b -c dgx-h100 --gpus 16 --ds-config examples/ds_configs/zero2.json --memory
run simulate -m llama2-7b -c dgx-h100 --gpus 16 --ds-config examples/ds_configs/zero2.json --set net.nic_gbps=100
