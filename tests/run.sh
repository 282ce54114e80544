#!/bin/sh
# Runs every test: unit binaries ($BUILD/tests/test_*), CLI scripts (tests/cli/*.sh) and the
# bad-input corpus (tests/bad/*.case). Each test prints "ok - NAME" or "not ok - NAME"; the
# runner counts them and ends with "N passed, N failed". Usage: tests/run.sh BUILD_DIR
BUILD=${1:-build}
# TWIN may be given (make test-valgrind wraps the binary); ONLY=cli runs the CLI scripts and
# the bad-input corpus, not the unit programs.
TWIN=${TWIN:-$(pwd)/$BUILD/twin}
export TWIN BUILD
export TWIN_HOME=$(pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
pass=0
fail=0

# count "ok"/"not ok" lines of one test program's output; a crash or a non-zero exit without
# any "not ok" line counts as one failure
tally() { # name, output file, exit status
	p=$(grep -c '^ok ' "$2")
	f=$(grep -c '^not ok ' "$2")
	if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "not ok - $1 exited with status $3" >>"$2"
	fi
	pass=$((pass + p))
	fail=$((fail + f))
	if [ "$f" -ne 0 ]; then
		echo "--- $1: $f failed"
		grep -v '^ok ' "$2" | tail -n 40
	else
		echo "$1: $p passed"
	fi
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] && [ "${ONLY:-}" != cli ] || continue
	n=$(basename "$t")
	"$t" >"$log/$n.out" 2>&1
	tally "$n" "$log/$n.out" $?
done

for s in tests/cli/*.sh; do
	[ -f "$s" ] || continue
	n=$(basename "$s" .sh)
	sh "$s" >"$log/cli_$n.out" 2>&1
	tally "cli/$n" "$log/cli_$n.out" $?
done

# Bad-input corpus: each NAME.case holds "args:", "status:" and "stderr:" lines (and "mpi: yes"
# when the command starts MPI); the command
# must exit with that status, print nothing on stdout, and one stderr line containing the text.
out="$log/bad.out"
: >"$out"
for c in tests/bad/*.case; do
	[ -f "$c" ] || continue
	# "mpi: yes" cases start MPI; make test-valgrind (TWIN_TEST_NO_MPI) leaves them out
	if [ -n "${TWIN_TEST_NO_MPI:-}" ] && grep -q '^mpi: yes' "$c"; then continue; fi
	args=$(sed -n 's/^args: //p' "$c")
	want_status=$(sed -n 's/^status: //p' "$c")
	want_err=$(sed -n 's/^stderr: //p' "$c")
	# shellcheck disable=SC2086
	eval "\"$TWIN\" $args" >"$log/bad.stdout" 2>"$log/bad.stderr" </dev/null
	st=$?
	lines=$(wc -l <"$log/bad.stderr")
	if [ "$st" != "${want_status:-2}" ]; then
		echo "not ok - $c: exit status $st, expected ${want_status:-2}: $(head -c 300 "$log/bad.stderr")" >>"$out"
	elif [ -s "$log/bad.stdout" ]; then
		echo "not ok - $c: wrote to stdout" >>"$out"
	elif [ "$lines" -ne 1 ]; then
		echo "not ok - $c: stderr has $lines lines: $(head -c 300 "$log/bad.stderr")" >>"$out"
	elif ! grep -qF -- "$want_err" "$log/bad.stderr"; then
		echo "not ok - $c: stderr '$(cat "$log/bad.stderr")' lacks '$want_err'" >>"$out"
	else
		echo "ok - $c" >>"$out"
	fi
done
tally "bad-input corpus" "$out" 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
