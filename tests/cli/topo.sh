#!/bin/sh
# CLI tests for "twin topo": every preset shows (text and JSON), --set changes what is shown,
# list, help. Prints "ok - NAME" / "not ok - NAME" per check.
TWIN=${TWIN:-build/twin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name, then a command that must succeed
	name=$1
	shift
	if "$@" >/dev/null 2>&1; then echo "ok - $name"; else echo "not ok - $name"; fi
}

presets=$(ls topologies/*.json | sed 's|topologies/||; s|\.json$||')
n=$(echo "$presets" | wc -l)
check "topo: at least 11 presets ($n)" test "$n" -ge 11

for p in $presets; do
	"$TWIN" topo show "$p" >"$tmp/out" 2>"$tmp/err"
	st=$?
	check "topo show $p: exit 0, nothing on stderr" test "$st" -eq 0 -a ! -s "$tmp/err"
	check "topo show $p: names the cluster" grep -q "^cluster $p\$" "$tmp/out"
	check "topo show $p: has the link tiers" grep -q "^Links" "$tmp/out"
	check "topo show $p: peak TFLOP/s per dtype" grep -q "peak TFLOP/s.*fp32.*bf16.*fp8" "$tmp/out"
	"$TWIN" topo show "$p" --json >"$tmp/json" 2>"$tmp/err"
	check "topo show $p --json: parses" python3 -m json.tool "$tmp/json"
	check "topo show $p --json: has name, gpu, node, net, eff, links" python3 -c "
import json, sys
d = json.load(open('$tmp/json'))
sys.exit(0 if d['name'] == '$p' and all(k in d for k in ('gpu', 'node', 'net', 'eff', 'stragglers', 'links')) else 1)"
done

# what the table says for a known preset
"$TWIN" topo show dgx-h100 >"$tmp/h100"
check "dgx-h100: 989.4 bf16" grep -q "bf16 989.4" "$tmp/h100"
check "dgx-h100: NVSwitch 370.8 GB/s" grep -q "NVSwitch, 370.8 GB/s" "$tmp/h100"
check "dgx-h100: NVLS 475" grep -q "NVLS.*475 GB/s" "$tmp/h100"
check "dgx-h100: 8 NICs x 400 Gb/s" grep -q "8 NICs x 400 Gb/s" "$tmp/h100"
check "dgx-h100: PCIe Gen5" grep -q "PCIe  *Gen5" "$tmp/h100"

# --set changes the output, in text and JSON
"$TWIN" topo show dgx-h100 --set net.nic_gbps=100 >"$tmp/set"
check "--set net.nic_gbps=100: shows 100 Gb/s" grep -q "8 NICs x 100 Gb/s" "$tmp/set"
check "--set net.nic_gbps=100: no longer 400" sh -c "! grep -q '400 Gb/s' '$tmp/set'"
check "--set net.nic_gbps=100: NIC tier 11.8 GB/s" grep -q "NIC  *11.8 GB/s" "$tmp/set"
"$TWIN" topo show dgx-h100 --set=net.nic_gbps=100 --set gpu.memory_gib=96 --json >"$tmp/setj"
check "--set in JSON" python3 -c "
import json, sys
d = json.load(open('$tmp/setj'))
sys.exit(0 if d['net']['nic_gbps'] == 100 and d['gpu']['memory_gib'] == 96 else 1)"
"$TWIN" topo show dgx-h100 --set 'stragglers=[{"gpu":3,"compute_scale":0.8,"link_scale":1}]' >"$tmp/strag"
check "--set stragglers: listed" grep -q "GPU 3: compute x0.80" "$tmp/strag"
"$TWIN" topo show dgx-h100 --set 'stragglers=[{"node":2,"link":"nic","link_scale":0.5}]' >"$tmp/strag"
check "--set stragglers: a node's NICs listed" grep -q "node 2: compute x1.00, nic links x0.50" "$tmp/strag"

# a path works like a preset, and the JSON output (less the derived "links") loads back as a
# cluster file
"$TWIN" topo show dgx-a100-80g --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
del d['links']
json.dump(d, sys.stdout)" >"$tmp/mine.json"
"$TWIN" topo show "$tmp/mine.json" >"$tmp/mine.txt" 2>"$tmp/err"
check "JSON output loads back as a cluster file" test $? -eq 0 -a ! -s "$tmp/err"
"$TWIN" topo show dgx-a100-80g >"$tmp/orig.txt"
check "loaded back: same table" cmp -s "$tmp/orig.txt" "$tmp/mine.txt"

# list and help
"$TWIN" topo list >"$tmp/list"
check "topo list: one line per preset" test "$(wc -l <"$tmp/list")" -eq "$n"
check "topo list: dgx-h100 line" grep -q "^dgx-h100 .*H100" "$tmp/list"
check "topo list --json parses" sh -c "'$TWIN' topo list --json | python3 -m json.tool"
check "topo --help" sh -c "'$TWIN' topo --help | grep -q 'twin topo show CLUSTER'"
check "topo show --help" sh -c "'$TWIN' topo show --help | grep -q -- '--set PATH=VALUE'"

# the net plugin's latency (EFA's 35 µs): shown with the fabric's, kept in the JSON
"$TWIN" topo show dgx-b200 --set net.plugin_latency_us=35 >"$tmp/efa.txt"
check "topo show: the net plugin's latency" grep -q "net plugin reports 35.0 us" "$tmp/efa.txt"
check "topo show: no plugin latency on InfiniBand" sh -c "! grep -q 'net plugin' '$tmp/orig.txt'"
check "topo show --json: net.plugin_latency_us" sh -c "'$TWIN' topo show dgx-b200 --set net.plugin_latency_us=35 --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"net\"][\"plugin_latency_us\"] == 35'"
# a file written before an optional field: it reads as 0, and --set can still name it
older() { # preset, section, field, output file: the preset without the field and its note
	python3 -c "
import json
d = json.load(open('topologies/$1.json'))
for k in ('$3', '$3_note'):
    del d['$2'][k]
json.dump(d, open('$4', 'w'))"
}
reads_zero() { # file, section, field: the field loads as 0
	"$TWIN" topo show "$1" --json | python3 -c "import json,sys; assert json.load(sys.stdin)['$2']['$3'] == 0"
}
older dgx-b200 net plugin_latency_us "$tmp/old.json"
check "an older cluster file without net.plugin_latency_us loads (0)" reads_zero "$tmp/old.json" net plugin_latency_us
check "--set net.plugin_latency_us on a file without it" \
	sh -c "'$TWIN' topo show '$tmp/old.json' --set net.plugin_latency_us=75 | grep -q 'net plugin reports 75.0 us'"

# the GPUs' speed spread: shown with the pace of 8 and 1,024 GPUs; a file without it reads as 0
check "topo show: the GPUs' speed spread and a job's pace" \
	sh -c "'$TWIN' topo show dgx-h100 | grep -q 'spread       8% between the fastest and slowest GPU.*x1.021 on 8 GPUs, x1.048 on 1,024'"
check "topo show: no spread line for identical GPUs" \
	sh -c "! '$TWIN' topo show dgx-h100 --set gpu.speed_variation=0 | grep -q 'spread  '"
older dgx-h100 gpu speed_variation "$tmp/old_spread.json"
check "an older cluster file without gpu.speed_variation loads (0)" reads_zero "$tmp/old_spread.json" gpu speed_variation
