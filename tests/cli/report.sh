#!/bin/sh
# twin report: directories with index.md, index.html, data, gnuplot scripts and PNG charts;
# the no-gnuplot path; refusal of a non-empty directory; nothing left behind on failure.
. tests/lib.sh
# PNG files start with 89 50 4e 47 0d 0a 1a 0a
is_png() { [ "$(od -An -tx1 -N8 "$1" 2>/dev/null | tr -d ' \n')" = 89504e470d0a1a0a ]; }
Z="-m llama2-7b -c dgx-a100-80g --ds-config examples/ds_configs/zero2.json"
have_gp=0
command -v gnuplot >/dev/null 2>&1 && have_gp=1

# scaling, simulated here
# shellcheck disable=SC2086
"$TWIN" report scaling $Z --vary gpus=8,16,32 -o "$d/scal" --db "$d/t.db" --name sc >"$d/o" 2>"$d/e"
check "report scaling: exit 0" [ $? -eq 0 ]
check "report scaling: index.md, index.html, data, script" sh -c \
	"[ -s '$d/scal/index.md' ] && [ -s '$d/scal/index.html' ] && [ -s '$d/scal/scaling.dat' ] && [ -s '$d/scal/scaling.gp' ] && [ -s '$d/scal/scaling.csv' ]"
check "report scaling: data has the three GPU counts, efficiency 100% at the smallest" sh -c \
	"awk '!/^#/ { n++; g = g \$1 \" \" } \$1 == 8 && \$5 == 100 { ok = 1 } END { exit !(n == 3 && g == \"8 16 32 \" && ok) }' '$d/scal/scaling.dat'"
check "report scaling: the page has the results table and the chart" sh -c \
	"grep -q '^| gpus=32 | 32 |' '$d/scal/index.md' && grep -q '<img src=\"scaling.png\"' '$d/scal/index.html'"
if [ $have_gp -eq 1 ]; then
	for c in scaling throughput breakdown; do
		if is_png "$d/scal/$c.png"; then echo "ok - report scaling: $c.png is a PNG"; else echo "not ok - report scaling: $c.png is a PNG"; fi
	done
	check "report scaling: stdout says all rendered" grep -q 'all rendered' "$d/o"
fi
check "report scaling --db: points stored" sh -c "'$TWIN' runs --db '$d/t.db' | grep -q 'sc/gpus=16\$'"
# the same sweep read back from the store (by label, and as the newest sweep): same numbers
"$TWIN" report scaling sc --db "$d/t.db" -o "$d/stored" >/dev/null 2>"$d/e"
check "report scaling from the store: exit 0, same data as simulated" sh -c \
	"[ $? -eq 0 ] && cmp -s '$d/scal/scaling.dat' '$d/stored/scaling.dat' && cmp -s '$d/scal/breakdown.dat' '$d/stored/breakdown.dat'"
"$TWIN" report whatif --db "$d/t.db" -o "$d/stored2" >/dev/null 2>"$d/e"
check "report whatif of the newest stored sweep" sh -c "[ $? -eq 0 ] && grep -q \"Stored sweep 'sc'\" '$d/stored2/index.md' && [ \$(grep -c '^\"gpus=' '$d/stored2/whatif.dat') -eq 3 ]"
"$TWIN" report scaling nosuch --db "$d/t.db" -o "$d/bad" >"$d/o" 2>"$d/e"
check "report scaling of an unknown stored sweep: exit 2, one line, nothing written" sh -c \
	"[ $? -eq 2 ] && [ \$(wc -l <'$d/e') -eq 1 ] && grep -q \"no stored sweep runs named 'nosuch/\" '$d/e' && [ ! -e '$d/bad' ]"
check "report: no temporary directory left" sh -c "! ls -d '$d'/*.tmp-* 2>/dev/null"

# the same directory again: refused; --force replaces it
# shellcheck disable=SC2086
"$TWIN" report scaling $Z --vary gpus=8,16 -o "$d/scal" >"$d/o" 2>"$d/e"
check "report: non-empty directory refused (exit 2, one line)" sh -c \
	"[ $? -eq 2 ] && [ ! -s '$d/o' ] && [ \$(wc -l <'$d/e') -eq 1 ] && grep -q 'not empty (use --force' '$d/e'"
check "report: refused directory untouched" grep -q '^| gpus=32 |' "$d/scal/index.md"
# shellcheck disable=SC2086
"$TWIN" report scaling $Z --vary gpus=8,16 -o "$d/scal" --force >"$d/o" 2>"$d/e"
check "report --force: replaced" sh -c "[ $? -eq 0 ] && ! grep -q 'gpus=32' '$d/scal/index.md' && grep -q '^| gpus=16 |' '$d/scal/index.md'"
check "report --force: no old copy left" sh -c "! ls -d '$d'/*.old-* 2>/dev/null"
mkdir "$d/empty"
# shellcheck disable=SC2086
"$TWIN" report whatif $Z --gpus 16 --vary net.nic_gbps=100,400 -o "$d/empty" >/dev/null 2>&1
check "report into an existing empty directory" sh -c "[ $? -eq 0 ] && [ -s '$d/empty/index.md' ] && [ -s '$d/empty/whatif.csv' ]"

# stored simulated runs: breakdown, memory, timeline, compare
"$TWIN" report breakdown sc/gpus=8 sc/gpus=32 --db "$d/t.db" -o "$d/bd" >/dev/null 2>"$d/e"
check "report breakdown: exit 0" sh -c "[ $? -eq 0 ] && [ -s '$d/bd/breakdown.dat' ] && [ -s '$d/bd/breakdown.gp' ]"
# the parts of each bar add up to the step (columns 2.. of breakdown.dat vs the table's step)
check "report breakdown: parts add up to the step" sh -c \
	"awk -F'\t' 'NR > 2 { s = 0; for (i = 2; i <= NF; i++) s += \$i; print s }' '$d/bd/breakdown.dat' >'$d/sum'; \
	 grep -E '^\| sc/gpus=(8|32) \| [0-9.]+ \|' '$d/bd/index.md' | awk -F'|' '{ print \$3 }' >'$d/step'; \
	 paste '$d/sum' '$d/step' | awk '{ if (\$1 - \$2 > 0.01 || \$2 - \$1 > 0.01) bad = 1; n++ } END { exit bad || n != 2 }'"
check "report breakdown: communication table" grep -q '^| sc/gpus=32 | all\\_reduce |' "$d/bd/index.md"
"$TWIN" report memory sc/gpus=8 --db "$d/t.db" -o "$d/mem" >/dev/null 2>"$d/e"
check "report memory (run): exit 0, per-rank peaks" sh -c "[ $? -eq 0 ] && grep -q '^| 0 | [0-9.]* |' '$d/mem/index.md' && [ -s '$d/mem/memory_time.dat' ]"
"$TWIN" report timeline sc/gpus=8 --db "$d/t.db" -o "$d/tl" >/dev/null 2>"$d/e"
check "report timeline: exit 0, lanes of rank 0" sh -c "[ $? -eq 0 ] && grep -q \"'r0 compute' 0\" '$d/tl/timeline.gp' && grep -q '^# gemm' '$d/tl/timeline.dat'"
"$TWIN" report compare sc/gpus=8 sc/gpus=16 --db "$d/t.db" -o "$d/cmp" >/dev/null 2>"$d/e"
check "report compare: exit 0, step row with relative difference" sh -c \
	"[ $? -eq 0 ] && grep -Eq '^\| step \| [0-9.]+ \| [0-9.]+ \| [+-][0-9.]+ \| [+-][0-9.]+%' '$d/cmp/index.md'"
"$TWIN" report memory -m llama2-70b -c dgx-a100-80g --gpus 32 -s megatron-175b --set tp=8 --set pp=4 -o "$d/pm" >/dev/null 2>"$d/e"
check "report memory (plan): one row per pipeline stage, with a verdict" sh -c \
	"[ $? -eq 0 ] && [ \$(grep -c '^| stage [0-3] | 8 |.*fits, ' '$d/pm/index.md') -eq 4 ]"
if [ $have_gp -eq 1 ]; then
	for f in bd/breakdown mem/memory mem/memory_time tl/timeline cmp/compare pm/memory; do
		if is_png "$d/$f.png"; then echo "ok - report: $f.png is a PNG"; else echo "not ok - report: $f.png is a PNG"; fi
	done
fi

# an imported trace (tests/fixtures/kineto: two ranks, rank 1 starts its collectives 10 us
# later; step windows from ProfilerStep#N): lanes per rank and stream, times from each
# rank's step start
K=tests/fixtures/kineto
"$TWIN" profile import --kineto $K/rank0.json --kineto $K/rank1.json --name kin --db "$d/k.db" >/dev/null 2>&1
"$TWIN" report timeline kin --db "$d/k.db" -o "$d/ktl" >/dev/null 2>"$d/e"
check "report timeline (kineto): step 1, both ranks" sh -c \
	"[ $? -eq 0 ] && grep -q 'One step, 2 ranks shown' '$d/ktl/index.md' && grep -q \"kin, step 1'\" '$d/ktl/timeline.gp'"
check "report timeline (kineto): all-reduce at 50 us on rank 0, 60 us on rank 1" sh -c \
	"sed -n '/^# all_reduce/,/^\$/p' '$d/ktl/timeline.dat' | grep -Fx '0.050000	0.090000	1' >/dev/null && \
	 sed -n '/^# all_reduce/,/^\$/p' '$d/ktl/timeline.dat' | grep -Fx '0.060000	0.090000	3' >/dev/null"
"$TWIN" report timeline kin --step 2 --ranks 1 --db "$d/k.db" -o "$d/ktl2" >/dev/null 2>"$d/e"
check "report timeline --step 2 --ranks 1: the copy, one rank" sh -c \
	"[ $? -eq 0 ] && grep -Fxq '# d2h' '$d/ktl2/timeline.dat' && ! grep -q \"'r1 \" '$d/ktl2/timeline.gp'"

# a '|' in a run name stays in its cell: the step lands under "step ms"
"$TWIN" profile import --kineto $K/rank0.json --name 'a|b' --db "$d/k.db" >/dev/null 2>&1
"$TWIN" report breakdown 'a|b' kin --db "$d/k.db" -o "$d/bar" >/dev/null 2>"$d/e"
check "report breakdown: a run name with '|' keeps the columns" sh -c \
	"[ $? -eq 0 ] && grep -q '^| a\\\\|b | [0-9.]* |' '$d/bar/index.md' && grep -q '<td>a|b</td>' '$d/bar/index.html'"

# without gnuplot: data and scripts, no charts, the page says how to render them
PATH=/nonexistent "$TWIN" report breakdown sc/gpus=8 --db "$d/t.db" -o "$d/nogp" >"$d/o" 2>"$d/e"
check "report without gnuplot: exit 0" [ $? -eq 0 ]
check "report without gnuplot: script and data, no PNG" sh -c \
	"[ -s '$d/nogp/breakdown.gp' ] && [ -s '$d/nogp/breakdown.dat' ] && ! ls '$d/nogp/'*.png 2>/dev/null"
check "report without gnuplot: the page says how to render" sh -c \
	"grep -q 'gnuplot was not found' '$d/nogp/index.md' && grep -q 'gnuplot breakdown.gp' '$d/nogp/index.md' && grep -q 'gnuplot was not found' '$d/nogp/index.html'"
check "report without gnuplot: stdout says so" grep -q 'not rendered (gnuplot not on PATH' "$d/o"
if [ $have_gp -eq 1 ]; then
	(cd "$d/nogp" && gnuplot breakdown.gp) >/dev/null 2>&1
	check "the written script renders later" is_png "$d/nogp/breakdown.png"
fi

# failures write nothing
"$TWIN" report timeline nope --db "$d/t.db" -o "$d/bad" >"$d/o" 2>"$d/e"
check "report unknown run: exit 2, one line" sh -c \
	"[ $? -eq 2 ] && [ ! -s '$d/o' ] && [ \$(wc -l <'$d/e') -eq 1 ] && grep -q \"no run 'nope'\" '$d/e'"
check "report unknown run: no directory written" sh -c "[ ! -e '$d/bad' ] && ! ls -d '$d'/bad.tmp-* 2>/dev/null"
"$TWIN" report timeline sc/gpus=8 --step 7 --db "$d/t.db" -o "$d/bad" >"$d/o" 2>"$d/e"
check "report timeline missing step: exit 2, nothing left" sh -c \
	"[ $? -eq 2 ] && grep -q 'has no step 7' '$d/e' && [ ! -e '$d/bad' ] && ! ls -d '$d'/bad.tmp-* 2>/dev/null"

# -o may not be or hold an input, nor the current directory, nor be a symbolic link
mkdir "$d/in"
cp "$d/t.db" "$d/in/s.db"
"$TWIN" report breakdown sc/gpus=8 --db "$d/in/s.db" -o "$d/in" --force >"$d/o" 2>"$d/e"
check "report -o holding the store: refused, store kept" sh -c \
	"[ $? -eq 2 ] && grep -q 'holds the input' '$d/e' && '$TWIN' runs --db '$d/in/s.db' | grep -q 'sc/gpus=8'"
"$TWIN" report breakdown sc/gpus=8 --db "$d/in/s.db" -o "$d" --force >"$d/o" 2>"$d/e"
check "report -o an ancestor of the store: refused" sh -c "[ $? -eq 2 ] && grep -q 'holds the input' '$d/e' && [ -s '$d/in/s.db' ]"
(cd "$d/in" && "$TWIN" report breakdown sc/gpus=8 --db "$d/t.db" -o . --force >"$d/o" 2>"$d/e")
check "report -o . : refused" sh -c "[ $? -eq 2 ] && grep -q 'holds the current directory' '$d/e' && [ -s '$d/in/s.db' ]"
mkdir "$d/real"
ln -s real "$d/link"
"$TWIN" report breakdown sc/gpus=8 --db "$d/t.db" -o "$d/link" --force >"$d/o" 2>"$d/e"
check "report -o a symlink: exit 2" sh -c "[ $? -eq 2 ] && grep -q 'is a symbolic link' '$d/e' && [ -L '$d/link' ]"
"$TWIN" report breakdown sc/gpus=8 --db "$d/t.db" -o "$d/nosuch/x" >"$d/o" 2>"$d/e"
check "report -o in a missing directory: exit 2" sh -c "[ $? -eq 2 ] && grep -q 'parent directory does not exist' '$d/e'"
"$TWIN" report timeline sc/gpus=8 --db "$d/t.db" --name x -o "$d/nm" >"$d/o" 2>"$d/e"
check "report refuses an option its kind does not take" sh -c "[ $? -eq 2 ] && grep -q 'timeline does not take --name' '$d/e' && [ ! -e '$d/nm' ]"

# a name with a newline in an old store never reaches a gnuplot script raw (gnuplot runs '!')
cp "$d/t.db" "$d/inj.db"
sqlite3 "$d/inj.db" "UPDATE runs SET name = 'x' || char(10) || '!touch $d/pwned' || char(10) WHERE name = 'sc/gpus=8'"
"$TWIN" report compare 1 3 --db "$d/inj.db" -o "$d/inj" >/dev/null 2>"$d/e"
check "report with a control-character name: no injection" sh -c \
	"[ ! -e '$d/pwned' ] && ! grep -q '^!' '$d/inj'/*.gp && ! grep -q '^!' '$d/inj'/*.dat && grep -q 'x?!touch' '$d/inj/index.md'"
