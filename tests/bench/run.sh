#!/bin/sh
# Runs every benchmark binary ($BUILD/bench/bench_*) and prints its figures.
# Usage: tests/bench/run.sh BUILD_DIR
BUILD=${1:-build}
status=0
for b in "$BUILD"/bench/bench_*; do
	[ -x "$b" ] || continue
	"$b" || status=1
done
exit $status
