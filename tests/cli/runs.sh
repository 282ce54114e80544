#!/bin/sh
# twin runs: lists the runs of a store, as a table and as JSON; incomplete runs are marked.
. tests/lib.sh
K=tests/fixtures/kineto
"$TWIN" profile import --kineto $K/rank0.json --db "$d/t.db" >/dev/null 2>&1
"$TWIN" profile import --kineto $K/rank1.json --name second --db "$d/t.db" >/dev/null 2>&1
"$TWIN" runs --db "$d/t.db" >"$d/o" 2>"$d/e"
check "runs exits 0" [ $? -eq 0 ]
check "runs lists two runs" [ "$(grep -Ec '^ +[12] +import +kineto' "$d/o")" -eq 2 ]
check "runs shows the name" grep -Eq '^ +2 .* second$' "$d/o"
check "runs shows the job's ranks and the one traced" grep -Eq '^ +2 +import +kineto +2 +1 +8 ' "$d/o"
"$TWIN" runs --db "$d/t.db" --json >"$d/j" 2>"$d/e"
check "runs --json" sh -c "tr -d ' \t\n' <'$d/j' | grep -q '\"id\":2,\"kind\":\"import\",\"name\":\"second\",\"backend\":\"kineto\",\"nranks\":2,\"traced_ranks\":1,\"nevents\":8,\"dropped\":0,\"complete\":true'"
# a run whose writer died before its events were committed
sqlite3 "$d/t.db" "INSERT INTO runs(kind, name, backend, created_utc, nranks) VALUES ('exec', 'died', 'cupti', '2026-01-01T00:00:00Z', 1)"
"$TWIN" runs --db "$d/t.db" >"$d/o" 2>"$d/e"
check "runs marks incomplete runs" grep -Eq '^ +3 +exec +cupti .* incomplete .* died$' "$d/o"
"$TWIN" profile analyze died --db "$d/t.db" >"$d/o" 2>"$d/e"
check "analyze of an empty incomplete run: exit 2, one line" sh -c "[ $? -eq 2 ] && [ \$(wc -l <'$d/e') -eq 1 ] && grep -q 'run 3 (exec): cannot analyse: trace: no events' '$d/e'"
sqlite3 "$d/t.db" "UPDATE runs SET complete = 1, dropped = 12 WHERE id = 3"
"$TWIN" runs --db "$d/t.db" >"$d/o" 2>"$d/e"
check "runs shows dropped records" grep -Eq '^ +3 .* dropped 12 ' "$d/o"
: >"$d/empty.db"
"$TWIN" runs --db "$d/empty.db" >"$d/o" 2>"$d/e"
check "an empty file is no store to a reader (exit 2, unchanged)" sh -c "[ $? -eq 2 ] && grep -q 'empty file, not a twin store' '$d/e' && [ ! -s '$d/empty.db' ]"
"$TWIN" profile import --kineto $K/rank0.json --db "$d/empty.db" >/dev/null 2>"$d/e"
"$TWIN" runs --db "$d/empty.db" >"$d/o" 2>"$d/e"
check "a writer initialises an empty file" grep -Eq '^ +1 +import +kineto' "$d/o"
sqlite3 "$d/t.db" "UPDATE schema_version SET version = 7"
"$TWIN" runs --db "$d/t.db" >"$d/o" 2>"$d/e"
check "newer schema refused" sh -c "[ $? -eq 2 ] && grep -q 'schema version 7 is newer than this twin supports' '$d/e'"
# a symmetric simulation keeps one rank per role: the job's ranks and the traced ones differ
"$TWIN" simulate -m tiny -c dgx-a100-80g --gpus 8 -s megatron-175b --set tp=2 --set pp=2 \
	--db "$d/s.db" >/dev/null 2>"$d/e"
"$TWIN" runs --db "$d/s.db" >"$d/o" 2>"$d/e"
check "a symmetric run: 8 ranks, 2 traced" grep -Eq '^ +1 +sim +sim +8 +2 ' "$d/o"
