#!/bin/sh
# CLI tests for "twin model": exact counts printed with thousands separators, every preset and
# every HF fixture loads and shows, --json parses, usage errors exit 2 with one line.
# Run from the repository root with $TWIN set (tests/run.sh does).
. tests/lib.sh

"$TWIN" model show llama2-7b >"$tmp/out" 2>"$tmp/err"
check "model show llama2-7b exits 0" test $? -eq 0
check "model show llama2-7b prints 6,738,415,616" grep -q "total  *6,738,415,616" "$tmp/out"
check "model show llama2-7b has the breakdown" \
	sh -c "grep -q '^  embeddings ' '$tmp/out' && grep -q '^  attention ' '$tmp/out' && \
	grep -q '^  mlp ' '$tmp/out' && grep -q '^  norms ' '$tmp/out' && grep -q '^  head ' '$tmp/out'"
check "model show llama2-7b prints training FLOPs per token" grep -q "^  training " "$tmp/out"
check "model show llama2-7b is quiet on stderr" test ! -s "$tmp/err"

"$TWIN" model show llama3-8b | grep -q "total  *8,030,261,248"
check "model show llama3-8b prints 8,030,261,248" test $? -eq 0
"$TWIN" model show tests/fixtures/hf/llama3-8b.json | grep -q "total  *8,030,261,248"
check "HF llama3-8b config prints 8,030,261,248" test $? -eq 0
"$TWIN" model show mixtral-8x7b >"$tmp/mx"
check "mixtral shows 46.7B total" grep -q "total  *46,702,792,704" "$tmp/mx"
check "mixtral shows 12.9B active" grep -q "active  *12,879,925,248" "$tmp/mx"
check "mixtral shows its experts row" grep -q "^  experts " "$tmp/mx"

# every preset and every HF fixture loads, shows, and gives JSON that parses
for f in examples/models/*.json tests/fixtures/hf/*.json; do
	case $f in
	examples/*) arg=$(basename "$f" .json) ;;
	*) arg=$f ;;
	esac
	if "$TWIN" model show "$arg" >"$tmp/o" 2>"$tmp/e" && grep -q "^  total " "$tmp/o" &&
		[ ! -s "$tmp/e" ]; then
		ok "model show $arg"
	else
		nok "model show $arg" "$(head -c 300 "$tmp/e")"
	fi
	if "$TWIN" model show "$arg" --json >"$tmp/j" 2>"$tmp/e" &&
		python3 -m json.tool "$tmp/j" >/dev/null 2>&1; then
		ok "model show $arg --json parses"
	else
		nok "model show $arg --json parses" "$(head -c 300 "$tmp/e")"
	fi
done

# --json carries the same numbers as the text
"$TWIN" model show llama2-7b --json >"$tmp/j"
t=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(int(d["params"]["total"]), d["model"]["kv_heads"], d["flops_per_token"]["seq"])' "$tmp/j")
check "--json total, kv_heads, seq" test "$t" = "6738415616 32 4096"
# the model JSON of --json is our schema: it loads back and counts the same
python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["model"], open(sys.argv[2],"w"))' \
	"$tmp/j" "$tmp/rt.json"
"$TWIN" model show "$tmp/rt.json" | grep -q "total  *6,738,415,616"
check "--json model section loads back as a model file" test $? -eq 0

# --seq changes only the attention-core FLOPs
a=$("$TWIN" model show llama2-7b --json --seq 2048 | python3 -c 'import json,sys; f=json.load(sys.stdin)["flops_per_token"]; print(f["attn_core_fwd"], f["mlp_fwd"])')
b=$("$TWIN" model show llama2-7b --json | python3 -c 'import json,sys; f=json.load(sys.stdin)["flops_per_token"]; print(int(f["attn_core_fwd"]) // 2, f["mlp_fwd"])')
check "--seq 2048 halves the attention core" test "$a" = "$b"

"$TWIN" model list >"$tmp/l"
check "model list exits 0" test $? -eq 0
check "model list shows every preset" sh -c "for p in gpt3-175b llama2-7b llama2-13b llama2-70b \
	llama-65b llama3-8b llama3-70b llama3.1-405b mixtral-8x7b deepseek-v3 bloom-176b megatron-1t \
	tiny; do grep -q \"^\$p \" '$tmp/l' || exit 1; done"
"$TWIN" model list --json | python3 -m json.tool >/dev/null 2>&1
check "model list --json parses" test $? -eq 0

"$TWIN" model --help >"$tmp/h" 2>&1
check "model --help exits 0" test $? -eq 0
check "model --help shows usage" grep -q "usage: twin model show MODEL" "$tmp/h"
"$TWIN" model show --help | grep -q "usage: twin model show"
check "model show --help" test $? -eq 0

# usage errors: one line on stderr, nothing on stdout, exit 2
usage() { # name, expected substring, args...
	n=$1
	want=$2
	shift 2
	"$TWIN" "$@" >"$tmp/uo" 2>"$tmp/ue"
	st=$?
	if [ "$st" -eq 2 ] && [ ! -s "$tmp/uo" ] && [ "$(wc -l <"$tmp/ue")" -eq 1 ] &&
		grep -qF -- "$want" "$tmp/ue"; then
		ok "$n"
	else
		nok "$n" "status $st: $(head -c 300 "$tmp/ue")"
	fi
}
usage "unknown option" "unknown option '--frobnicate'" model show llama2-7b --frobnicate
usage "missing MODEL" "MODEL is required" model show
usage "two models" "one MODEL only" model show llama2-7b tiny
usage "unknown model subcommand" "unknown subcommand 'shwo'" model shwo llama2-7b
usage "no model subcommand" "expected 'show MODEL' or 'list'" model
usage "--seq needs a value" "--seq needs a value" model show llama2-7b --seq
usage "--seq must be positive" "--seq 0: must be in" model show llama2-7b --seq 0
usage "list takes no arguments" "unknown argument 'x'" model list x

# "NAME.json" that is not in the working directory falls back to the preset file
"$TWIN" model show llama2-7b.json | grep -q "total  *6,738,415,616"
check "model show llama2-7b.json finds the preset" test $? -eq 0

# sliding windows: GPT-OSS's config windows half its layers; the text says so, the JSON round
# trip keeps it, and the windowed model's attention core is below the same model's without
"$TWIN" model show tests/fixtures/hf/gpt-oss-120b.json >"$tmp/go"
check "gpt-oss shows 116,829,156,672" grep -q "total  *116,829,156,672" "$tmp/go"
check "gpt-oss shows its windows" grep -q "sliding window 128 tokens on 18 of 36 layers" "$tmp/go"
"$TWIN" model show tests/fixtures/hf/gpt-oss-120b.json --json >"$tmp/goj"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; json.dump(m, open(sys.argv[2],"w")); m.pop("sliding_window"); m.pop("full_attention_every"); m.pop("full_attention_first"); json.dump(m, open(sys.argv[3],"w"))' \
	"$tmp/goj" "$tmp/go_rt.json" "$tmp/go_full.json"
w=$("$TWIN" model show "$tmp/go_rt.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["flops_per_token"]["attn_core_fwd"])')
f=$("$TWIN" model show "$tmp/go_full.json" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["flops_per_token"]["attn_core_fwd"])')
w0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["flops_per_token"]["attn_core_fwd"])' "$tmp/goj")
check "the window survives the JSON round trip" test "$w" = "$w0"
# 18 full layers at 1/2 of s x s and 18 at (128/4096)(1 - 128/8192): 0.5308 of the full model's
check "windows cut GPT-OSS's attention core to 0.53 of full" \
	python3 -c "import sys; r=$w/$f; sys.exit(0 if abs(r - (0.5 + 128/4096*(1-128/8192))/1.0) < 1e-9 else 1)"

# model files: a repeated key is one line naming it, ours and HF's
printf '{"layers":2,"hidden":64,"heads":4,"ffn_hidden":128,"vocab":100,"seq_len":16,"layers":4}\n' \
	>"$tmp/dup.json"
usage "our model file: duplicate key" "dup.json: layers: duplicate key" model show "$tmp/dup.json"
printf '{"model_type":"llama","num_hidden_layers":32,"num_hidden_layers":2}\n' >"$tmp/hfdup.json"
usage "HF config: duplicate key" "hfdup.json: num_hidden_layers: duplicate key" \
	model show "$tmp/hfdup.json"

# an HF cache snapshot path as _name_or_path names the model by its repository
python3 -c 'import json,sys; d=json.load(open("tests/fixtures/hf/llama3-8b.json")); d["_name_or_path"]="/home/u/.cache/huggingface/hub/models--meta-llama--Meta-Llama-3-8B-Instruct/snapshots/5f0b02c75b57c5855da9ae460ce51323ea669d8a/"; json.dump(d, open(sys.argv[1], "w"))' "$tmp/snap.json"
"$TWIN" model show "$tmp/snap.json" >"$tmp/o" 2>"$tmp/e"
check "a snapshot path names the model" grep -q "^model  *Meta-Llama-3-8B-Instruct (llama)" "$tmp/o"
check "a snapshot path still counts 8,030,261,248" grep -q "total  *8,030,261,248" "$tmp/o"

# tie_word_embeddings false unties GPT-2's head (50257 x 768 more parameters)
python3 -c 'import json,sys; json.dump({"model_type":"gpt2","tie_word_embeddings":False}, open(sys.argv[1], "w"))' "$tmp/g2u.json"
"$TWIN" model show "$tmp/g2u.json" >"$tmp/o" 2>&1
check "GPT-2 untied: head of 38,597,376" grep -q "head  *38,597,376" "$tmp/o"
check "GPT-2 untied: total 163,037,184" grep -q "total  *163,037,184" "$tmp/o"

# a MoE step past the last layer is a dense model; a Gemma 3 pattern past it windows every layer
python3 -c 'import json,sys; json.dump({"model_type":"qwen2_moe","num_hidden_layers":24,"decoder_sparse_step":25}, open(sys.argv[1], "w"))' "$tmp/q2.json"
"$TWIN" model show "$tmp/q2.json" --json >"$tmp/j" 2>"$tmp/e"
check "decoder_sparse_step past the layers: dense" \
	python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; sys.exit(0 if "experts" not in m and m["ffn_hidden"] == 5632 else 1)' "$tmp/j"
python3 -c 'import json,sys; json.dump({"model_type":"gemma3_text","num_hidden_layers":26,"sliding_window":512,"sliding_window_pattern":100}, open(sys.argv[1], "w"))' "$tmp/g3.json"
"$TWIN" model show "$tmp/g3.json" >"$tmp/o" 2>&1
check "sliding_window_pattern past the layers: every layer windowed" \
	grep -q "sliding window 512 tokens on 26 of 26 layers" "$tmp/o"

# errors name the HF key the user wrote
python3 -c 'import json,sys; json.dump({"model_type":"deepseek_v3","n_group":7}, open(sys.argv[1], "w"))' "$tmp/ds.json"
usage "n_group named by its HF name" "ds.json: n_group: 7 does not divide n_routed_experts (256)" \
	model show "$tmp/ds.json"

# MLA's --json has no kv_heads or head_dim, and loads back
"$TWIN" model show deepseek-v3 --json >"$tmp/j"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; assert "kv_heads" not in m and "head_dim" not in m; json.dump(m, open(sys.argv[2],"w"))' \
	"$tmp/j" "$tmp/ds_rt.json"
check "MLA --json leaves kv_heads and head_dim out" test $? -eq 0
"$TWIN" model show "$tmp/ds_rt.json" | grep -q "total  *671,026,419,200"
check "MLA --json model loads back" test $? -eq 0
