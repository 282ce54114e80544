#!/bin/sh
# Runs each libFuzzer target for SECONDS with its seeds; prints executions per target.
# Usage: tests/fuzz/run.sh FUZZ_BUILD_DIR SECONDS
B=$1
SECS=${2:-60}
status=0
mkdir -p "$B/crashes"
for bin in "$B"/fuzz_*; do
	[ -x "$bin" ] || continue
	t=$(basename "$bin")
	corpus="$B/corpus/$t"
	mkdir -p "$corpus"
	seeds=""
	for d in tests/fuzz/seeds/"$t" tests/fuzz/regress/"$t"; do
		[ -d "$d" ] && seeds="$seeds $d"
	done
	# TARGET.seeds names more seed folders (examples/, topologies/, fixtures)
	[ -f "tests/fuzz/$t.seeds" ] && seeds="$seeds $(cat "tests/fuzz/$t.seeds")"
	dict=""
	[ -f "tests/fuzz/$t.dict" ] && dict="-dict=tests/fuzz/$t.dict"
	# shellcheck disable=SC2086
	"$bin" -print_final_stats=1 -close_fd_mask=1 -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 $dict \
		-artifact_prefix="$B/crashes/$t-" "$corpus" $seeds >"$B/$t.log" 2>&1
	rc=$?
	execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$B/$t.log" | awk '{print $2}')
	[ -n "$execs" ] || execs=$(grep -oE '#[0-9]+' "$B/$t.log" | tail -n 1 | tr -d '#')
	if [ $rc -ne 0 ]; then
		echo "fuzz $t: FAILED after ${execs:-?} executions (log: $B/$t.log)"
		grep -E 'ERROR|SUMMARY|artifact' "$B/$t.log" | head -n 5
		status=1
	else
		echo "fuzz $t: ${execs:-?} executions in ${SECS}s, no crash"
	fi
done
exit $status
