#!/bin/sh
# twin run --backend cuda where there is no GPU (what CI sees): one line that says so and
# names --backend host, exit status 2, nothing on stdout, no store written. On a machine with a
# GPU, tests/gpu/check.sh covers the cuda backend instead.
TWIN=${TWIN:-build/twin}
# twin run starts MPI before it looks for a GPU; make test-valgrind (TWIN_TEST_NO_MPI) leaves
# this out like the other MPI checks (Open MPI itself is not valgrind-clean)
[ -z "${TWIN_TEST_NO_MPI:-}" ] || exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
	echo "ok - run cuda without a GPU # SKIP this machine has a GPU (run tests/gpu/check.sh)"
	exit 0
fi
"$TWIN" run -m tiny -c host-cpu --gpus 1 --backend cuda --db "$tmp/x.db" >"$tmp/out" 2>"$tmp/err"
st=$?
lines=$(wc -l <"$tmp/err")
if [ "$st" -eq 2 ] && [ "$lines" -eq 1 ] && [ ! -s "$tmp/out" ] && [ ! -e "$tmp/x.db" ] &&
	grep -q -- "--backend host" "$tmp/err" &&
	{ grep -q "no CUDA GPU or driver" "$tmp/err" || grep -q "backend 'cuda' is not in this build" "$tmp/err"; }; then
	echo "ok - run cuda without a GPU: exit 2, one line: $(cat "$tmp/err")"
else
	echo "not ok - run cuda without a GPU: status $st, $lines lines: $(head -c 400 "$tmp/err")"
fi
