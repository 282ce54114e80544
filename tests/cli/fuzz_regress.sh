#!/bin/sh
# Replays every fuzz target's seeds and regression inputs (tests/fuzz/{seeds,regress}/TARGET/)
# through the target built with a plain main(): each must run without a crash or a sanitizer
# report (under make test SAN=1 the sanitizers are on).
for bin in "$BUILD"/fuzzreg/fuzz_*; do
	[ -x "$bin" ] || continue
	t=$(basename "$bin")
	extra=""
	[ -f "tests/fuzz/$t.seeds" ] && extra=$(cat "tests/fuzz/$t.seeds")
	for d in tests/fuzz/seeds/"$t" tests/fuzz/regress/"$t" $extra; do
		[ -d "$d" ] || continue
		for f in "$d"/*; do
			[ -f "$f" ] || continue
			if "$bin" "$f" >/dev/null 2>"$BUILD/fuzzreg/$t.err"; then
				echo "ok - $t replays $f"
			else
				echo "not ok - $t crashes on $f: $(head -c 300 "$BUILD/fuzzreg/$t.err")"
			fi
		done
	done
done
