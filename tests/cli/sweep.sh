#!/bin/sh
# twin sweep: one simulated point per --vary value (cross product of several), a table row per
# point, invalid points as rows with their reason, stored runs named LABEL/PATH=V.
. tests/lib.sh
Z="-m llama2-7b -c dgx-a100-80g --ds-config examples/ds_configs/zero2.json"

# shellcheck disable=SC2086
"$TWIN" sweep $Z --vary gpus=8,16,32 --db "$d/t.db" --name scale >"$d/o" 2>"$d/e"
check "sweep gpus: exit 0, nothing on stderr" sh -c "[ $? -eq 0 ] && [ ! -s '$d/e' ]"
check "sweep gpus: a header and one row per point" sh -c \
	"grep -q '^point .*tokens/s' '$d/o' && [ \$(grep -Ec '^gpus=(8|16|32) +[0-9.]+ ' '$d/o') -eq 3 ]"
# weak scaling (micro-batch 1 per GPU): throughput grows with the GPU count, per GPU it does not
check "sweep gpus: tokens/s increases with GPUs" sh -c \
	"awk '/^gpus=/ { if (NR > 2 && \$3 <= prev) bad = 1; prev = \$3 } END { exit bad }' '$d/o'"
check "sweep gpus: tokens/s per GPU at most the 8-GPU value" sh -c \
	"awk '/^gpus=8 / { b = \$4 } /^gpus=/ { if (\$4 > b * 1.0001) bad = 1 } END { exit bad }' '$d/o'"
check "sweep gpus: all fit on 80 GB" sh -c "[ \$(grep -c ' fits\$' '$d/o') -eq 3 ]"
"$TWIN" runs --db "$d/t.db" >"$d/r" 2>&1
check "sweep --db: three runs stored with their labels" sh -c \
	"grep -q 'scale/gpus=8\$' '$d/r' && grep -q 'scale/gpus=16\$' '$d/r' && grep -q 'scale/gpus=32\$' '$d/r'"
"$TWIN" profile analyze scale/gpus=16 --db "$d/t.db" >"$d/a" 2>&1
check "a stored point analyses like any run" grep -q 'exposed' "$d/a"

# the same point as twin simulate
# shellcheck disable=SC2086
"$TWIN" simulate $Z --gpus 16 --json >"$d/s" 2>/dev/null
# shellcheck disable=SC2086
"$TWIN" sweep $Z --vary gpus=16 --json >"$d/j" 2>/dev/null
check "sweep point = twin simulate (step time)" sh -c \
	"a=\$(tr -d ' \t\n' <'$d/s' | grep -o '\"step_time_s\":[0-9.e+-]*' | head -1); [ -n \"\$a\" ] && tr -d ' \t\n' <'$d/j' | grep -qF \"\$a\""

# JSON values keep their commas: a node slowing down step by step (stragglers imply full mode)
# shellcheck disable=SC2086
"$TWIN" sweep $Z --gpus 16 --vary 'stragglers=[],[{"node":1,"compute_scale":0.8}],[{"node":1,"compute_scale":0.5}]' >"$d/o" 2>"$d/e"
check "sweep stragglers: three rows" sh -c "[ \$(grep -c '^stragglers=\\[' '$d/o') -eq 3 ]"
check "sweep stragglers: a slower node is slower" sh -c \
	"awk '/^stragglers=\\[\\] / { a = \$2 } /compute_scale\":0.8/ { b = \$2 } /compute_scale\":0.5/ { c = \$2 } END { exit !(a > 0 && b > a && c > b) }' '$d/o'"

# cross product, invalid points are rows, not an abort
# shellcheck disable=SC2086
"$TWIN" sweep $Z --gpus 16 --vary tp=1,3 --vary net.nic_gbps=100,400 >"$d/o" 2>"$d/e"
check "sweep cross product: exit 0" [ $? -eq 0 ]
check "sweep cross product: 4 rows, first --vary slowest" sh -c \
	"grep -E '^tp=' '$d/o' | cut -d' ' -f1 | tr '\n' ' ' | grep -qx 'tp=1,net.nic_gbps=100 tp=1,net.nic_gbps=400 tp=3,net.nic_gbps=100 tp=3,net.nic_gbps=400 '"
check "sweep: invalid point shows its reason" sh -c \
	"[ \$(grep -c '^tp=3,.*invalid: .*not divisible by tp' '$d/o') -eq 2 ]"
check "sweep: a slower network is not faster" sh -c \
	"awk '/^tp=1,net.nic_gbps=100 / { a = \$2 } /^tp=1,net.nic_gbps=400 / { b = \$2 } END { exit !(a >= b && b > 0) }' '$d/o'"
# shellcheck disable=SC2086
"$TWIN" sweep $Z --gpus 16 --vary tp=1,3 --json >"$d/j" 2>"$d/e"
check "sweep --json: points with ok and reason" sh -c \
	"tr -d ' \t\n' <'$d/j' | grep -q '\"ok\":false,\"reason\":\"--gpus16isnotdivisible' && tr -d ' \t\n' <'$d/j' | grep -q '\"tokens_per_s\":'"

# a model that does not fit: the row says so
"$TWIN" sweep -m llama2-70b -c dgx-a100-80g --ds-config examples/ds_configs/zero2.json --vary gpus=8 >"$d/o" 2>&1
check "sweep: does not fit" grep -q 'does not fit$' "$d/o"

# bad --vary: one line, exit 2, nothing on stdout
# shellcheck disable=SC2086
"$TWIN" sweep $Z --vary gpus=8,abc >"$d/o" 2>"$d/e"
check "sweep bad --vary: exit 2, one line" sh -c \
	"[ $? -eq 2 ] && [ ! -s '$d/o' ] && [ \$(wc -l <'$d/e') -eq 1 ] && grep -q \"gpus value 'abc'\" '$d/e'"
