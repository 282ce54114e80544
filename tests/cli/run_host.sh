#!/bin/sh
# twin run --backend host: one rank without a launcher, and 4 MPI ranks (mpirun --oversubscribe)
# for ZeRO 0-3, TP 2, PP 2 and CPU offload on the tiny model. Each run verifies its collectives
# (host always does), stores its trace, and its measured ALLOC peaks must equal the memory
# model's prediction on every rank, device and category. Run from the repository root.
TWIN=${TWIN:-build/twin}
# make test-valgrind sets TWIN_TEST_NO_MPI: every check here starts MPI, whose own library
# is not valgrind-clean; these runs are covered by make test and make test SAN=1
[ -z "${TWIN_TEST_NO_MPI:-}" ] || exit 0
FIX=tests/fixtures/exec
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's shared-memory transport wants a writable session dir; keep it in our temp dir
export TMPDIR="$tmp"

ok() { echo "ok - $1"; }
nok() { echo "not ok - $1${2:+: $2}"; }

# field NAME FILE: the first number or boolean called NAME in a JSON file
field() { sed -n "s/.*\"$1\":[[:space:]]*\([-0-9.eE+a-z]*\).*/\1/p" "$2" | head -n 1; }

have_sqlite=0
command -v sqlite3 >/dev/null 2>&1 && have_sqlite=1

# events stored for run ID in DB, and whether the run is complete
stored() { sqlite3 "$1" "select count(*) from events where run_id = $2"; }
run_complete() { sqlite3 "$1" "select complete from runs where id = $2"; }
# events in store $1 whose name is one of the quoted SQL list $2 ('a', 'b')
named_ops() { sqlite3 "$1" "SELECT count(*) FROM events e JOIN names n ON n.id = e.name_id WHERE n.name IN ($2)"; }

check_run() { # name, output json, status, db, want_verified(0|1)
	name=$1 out=$2 st=$3 db=$4
	if [ "$st" -ne 0 ]; then
		nok "$name" "exit status $st: $(tail -n 3 "$out.err" | tr '\n' ' ')"
		return
	fi
	match=$(field memory_match "$out")
	ver=$(field verified "$out")
	run=$(field run_id "$out")
	if [ "$match" != true ]; then
		nok "$name" "measured memory differs from the memory model: $(head -c 600 "$out")"
	elif [ "$5" = 1 ] && ! [ "${ver:-0}" -gt 0 ] 2>/dev/null; then
		nok "$name" "no collective was verified"
	elif [ "$have_sqlite" = 1 ] && { [ "$(stored "$db" "$run")" -le 0 ] || [ "$(run_complete "$db" "$run")" != 1 ]; }; then
		nok "$name" "run $run not stored complete in $db"
	else
		ok "$name (verified $ver)"
	fi
}

# ---- one rank, no launcher ----
db=$tmp/one.db
"$TWIN" run -m tiny -c host-cpu --gpus 1 --backend host --steps 2 --warmup 1 --db "$db" --json \
	>"$tmp/one.json" 2>"$tmp/one.json.err"
check_run "run host, one rank without mpirun" "$tmp/one.json" $? "$db" 0
# the text output says the same
"$TWIN" run -m tiny -c host-cpu --gpus 1 --backend host --steps 1 --db "$db" >"$tmp/one.txt" 2>&1
if grep -q "memory model check: measured == predicted" "$tmp/one.txt" && grep -q "gemm" "$tmp/one.txt"; then
	ok "run host, text summary"
else
	nok "run host, text summary" "$(head -c 400 "$tmp/one.txt")"
fi

if ! command -v mpirun >/dev/null 2>&1; then
	echo "ok - run host under mpirun # SKIP no mpirun"
	exit 0
fi
MPIRUN="mpirun -np 4 --oversubscribe --allow-run-as-root"

# ---- four ranks: every strategy feature the plan has ----
for s in z0 z1 z2 z3 tp2 pp2 pp2-vp3-split ds-tp2-pp2 z2-offload z3-offload drop-ce fsdp-drop; do
	db=$tmp/$s.db
	timeout 120 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/$s.json" --backend host \
		--steps 1 --warmup 0 --db "$db" --json >"$tmp/$s.json" 2>"$tmp/$s.json.err"
	check_run "run host, 4 ranks, $s" "$tmp/$s.json" $? "$db" 1
done

# Megatron's interleaved schedule with as many micro-batches as stages: with overlap_p2p_comm
# (its default there) a stage-boundary receive is posted ahead, so rank 0's plan receives
# micro-batch 0's grad before it sends micro-batch 1's activation. The receive is an MPI_Irecv
# that the op using it waits for (a blocking MPI_Recv in plan order deadlocked): TP 2 x PP 2
# (vp 2), PP 2 x CP 2 (vp 2), and MoE's combined 1F1B over ep 2 x PP 2 (vp 2)
for v in tp2pp2:-m@tiny@-s@tiny-host@--set@vp=2@--set@grad_accum=2 \
	cp2:-m@tiny@-s@$FIX/pp2.json@--set@vp=2@--set@grad_accum=2@--set@cp=2 \
	moe:-m@tiny-moe@-s@$FIX/pp2.json@--set@vp=2@--set@grad_accum=2@--set@ep=2@--set@recompute=none@--set@overlap_moe_expert_parallel_comm=true; do
	name=${v%%:*} opt=$(echo "${v#*:}" | tr @ ' ')
	db=$tmp/mbpp-$name.db
	timeout 120 $MPIRUN "$TWIN" run $opt -c host-cpu --gpus 4 --backend host --steps 1 --warmup 0 \
		--timeout 60 --db "$db" --json >"$tmp/mbpp-$name.json" 2>"$tmp/mbpp-$name.json.err"
	check_run "run host, 4 ranks, interleaved with micro-batches == pp, $name" "$tmp/mbpp-$name.json" $? "$db" 1
done
if [ "$have_sqlite" = 1 ]; then
	# every send has its receive in the trace, the posted ones included, each ending after it
	# starts
	db=$tmp/mbpp-tp2pp2.db
	sends=$(named_ops "$db" "'send_act', 'send_grad'")
	recvs=$(named_ops "$db" "'recv_act', 'recv_grad'")
	bad=$(sqlite3 "$db" "SELECT count(*) FROM events e JOIN names n ON n.id = e.name_id WHERE n.name LIKE 'recv_%' AND e.end_ns < e.start_ns")
	if [ "${sends:-0}" -gt 0 ] && [ "$sends" = "$recvs" ] && [ "$bad" = 0 ]; then
		ok "run host, interleaved: $recvs receives traced for $sends sends"
	else
		nok "run host, interleaved receives" "sends '$sends', receives '$recvs', reversed spans '$bad'"
	fi
fi

# the pipeline's split tensors as older code ran them: DeepSpeed 0.5.5's PartitionedTensor
# (list gather, meta read back to the host) and Megatron-LM's scatter-gather (2021-22)
db=$tmp/ds055.db
timeout 120 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/ds-tp2-pp2.json" \
	--set deepspeed_version=0.5.5 --backend host --steps 1 --warmup 0 --db "$db" --json \
	>"$tmp/ds055.json" 2>"$tmp/ds055.json.err"
check_run "run host, 4 ranks, DeepSpeed 0.5.5 pipeline, TP 2 x PP 2" "$tmp/ds055.json" $? "$db" 1
db=$tmp/sg.db
timeout 120 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/tp2.json" --set pp=2 \
	--set sequence_parallel=false --set scatter_gather_tensors_in_pipeline=true --set grad_accum=4 \
	--backend host --steps 1 --warmup 0 --db "$db" --json >"$tmp/sg.json" 2>"$tmp/sg.json.err"
check_run "run host, 4 ranks, Megatron scatter-gather, TP 2 x PP 2" "$tmp/sg.json" $? "$db" 1

# ZeRO-2 without use_multi_rank_bucket_allreduce: each bucket goes out partition by partition,
# reduced to its owner (ncclReduce / MPI_Reduce, its result checked there; so before
# DeepSpeed 0.12.4, where the key did not exist), or in 0.12.4 - 0.12.x all-reduced slice by
# slice; more calls than one all-reduce per bucket
for v in rooted:--set@zero_optimization.use_multi_rank_bucket_allreduce=false \
	old:--set@deepspeed_version=0.12.5@--set@zero_optimization.use_multi_rank_bucket_allreduce=false \
	pre:--set@deepspeed_version=0.12.3 bucket:; do
	name=${v%%:*} opt=$(echo "${v#*:}" | tr @ ' ')
	db=$tmp/z2-$name.db
	timeout 120 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/z2.json" $opt --backend host \
		--steps 1 --warmup 0 --db "$db" --json >"$tmp/z2-$name.json" 2>"$tmp/z2-$name.json.err"
	check_run "run host, 4 ranks, ZeRO-2 grads $name" "$tmp/z2-$name.json" $? "$db" 1
done
if [ "$have_sqlite" = 1 ]; then
	cnt() { sqlite3 "$tmp/z2-$1.db" "SELECT count(*) FROM events e JOIN names n ON n.id = e.name_id JOIN categories c ON c.id = e.category WHERE n.name = 'ar_grads' AND c.name = '$2'"; }
	r=$(cnt rooted broadcast) o=$(cnt old all_reduce) b=$(cnt bucket all_reduce) p=$(cnt pre broadcast)
	# the reduces carry the trace's reduce flag (2), which keeps NCCL's name in exports
	rf=$(sqlite3 "$tmp/z2-rooted.db" "SELECT count(*) FROM events e JOIN names n ON n.id = e.name_id WHERE n.name = 'ar_grads' AND (e.flags & 2) != 0")
	if [ "$(cnt rooted all_reduce)" = 0 ] && [ "${r:-0}" -gt "${b:-0}" ] && [ "$o" = "$r" ] && [ "$p" = "$r" ] &&
		[ "${b:-0}" -gt 0 ] && [ "$rf" = "$r" ]; then
		ok "run host, ZeRO-2 grads by partition: $r reduces, $o slice all-reduces, $b bucket all-reduces"
	else
		nok "run host, ZeRO-2 grads by partition" "reduces '$r' ('$rf' flagged), slice all-reduces '$o', bucket all-reduces '$b', 0.12.3 reduces '$p'"
	fi
fi

# ZeRO++ (hpZ over rank pairs, int8 weight gathers, int4 gradient all-to-alls) on 2 nodes of
# 2 ranks, MiCS over 2-rank shard groups and MiCS over both nodes gathered hierarchically:
# every collective of their groups verified
for s in zpp mics mics-hier; do
	db=$tmp/$s.db
	timeout 120 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/$s.json" --backend host \
		--set node.gpus=2 --set net.max_nodes=2 --set net.fabric=ethernet --set net.nic_gbps=100 \
		--set net.nics_per_node=1 --steps 1 --warmup 0 --db "$db" --json >"$tmp/$s.json" \
		2>"$tmp/$s.json.err"
	check_run "run host, 4 ranks, $s" "$tmp/$s.json" $? "$db" 1
done
if [ "$have_sqlite" = 1 ]; then
	n=$(named_ops "$tmp/zpp.db" "'a2a_grads_node', 'a2a_grads_xnode', 'hpz_copy'")
	r=$(named_ops "$tmp/zpp.db" "'rs_grads'")
	a=$(named_ops "$tmp/mics.db" "'ar_grads'")
	if [ "${n:-0}" -gt 0 ] && [ "$r" = 0 ] && [ "${a:-0}" -gt 0 ]; then
		ok "run host, qgZ all-to-alls instead of reduce-scatters ($n ops), MiCS all-reduces ($a)"
	else
		nok "run host, ZeRO++ / MiCS ops" "qgZ/hpZ ops '$n', reduce-scatters '$r', MiCS all-reduces '$a'"
	fi
fi

# LoRA's frozen base weights kept and gathered as int8, with hpZ over rank pairs
db=$tmp/qfrozen.db
timeout 120 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s lora-zero3 --backend host \
	--set zero_optimization.zero_quantized_nontrainable_weights=true \
	--set zero_optimization.zero_hpz_partition_size=2 --set zero_optimization.reduce_bucket_size=200000 \
	--steps 1 --warmup 0 --db "$db" --json >"$tmp/qfrozen.json" 2>"$tmp/qfrozen.json.err"
check_run "run host, 4 ranks, LoRA with int8 frozen weights and hpZ" "$tmp/qfrozen.json" $? "$db" 1

# MoE with experts over 2 ranks: their grads, states and updated weights move over the expert
# data-parallel pairs (ZeRO-1, ZeRO-2; FSDP2 gathers and reduce-scatters them there); Megatron
# TP 2 with SP routes each rank's own tokens (all-to-all, then a TP all-gather); Megatron CP 2
# folds both cp ranks into an expert group, whose replicas are then the two dp ranks;
# Megatron-Core's recompute_modules (experts' activation, norms; the whole block) under TP 2
# with SP; Megatron-Core's combined 1F1B (overlap_moe_expert_parallel_comm) under TP 2 with SP,
# and under the interleaved schedule over 2 stages with delay_wgrad_compute; the busiest expert
# rank's load (moe_load_imbalance 1.37); a shared expert beside the all-to-alls
# (moe_shared_expert_overlap); experts padded to their capacity (fixed all-to-alls, no counts);
# the router's losses and token dropping under TP 2 (the loss's counts summed over TP x CP)
for s in z1 z2 fsdp2 tp2 cp2 rc-modules rc-moe a2a-overlap a2a-overlap-pp imbalance shared-overlap \
	capacity-pad router-loss; do
	model=tiny-moe
	db=$tmp/moe-$s.db
	spec="$FIX/$s.json"
	[ "$s" = a2a-overlap ] && spec="$FIX/tp2.json --set overlap_moe_expert_parallel_comm=true"
	[ "$s" = a2a-overlap-pp ] && spec="$FIX/tp2.json --set tp=1 --set sequence_parallel=false \
		--set pp=2 --set vp=2 --set schedule=interleaved --set grad_accum=4 \
		--set overlap_moe_expert_parallel_comm=true --set delay_wgrad_compute=true"
	[ "$s" = imbalance ] && spec="$FIX/tp2.json --set moe_load_imbalance=1.37"
	[ "$s" = capacity-pad ] && spec="$FIX/tp2.json --set moe_expert_capacity_factor=1.5 \
		--set moe_pad_expert_input_to_capacity=true"
	[ "$s" = router-loss ] && spec="$FIX/tp2.json --set moe_aux_loss_coeff=0.01 \
		--set moe_z_loss_coeff=0.001 --set moe_expert_capacity_factor=1.25"
	[ "$s" = shared-overlap ] && spec="$FIX/tp2.json --set moe_shared_expert_overlap=true" &&
		model=$FIX/tiny-moe-shared.model.json
	[ "$s" = fsdp2 ] && spec="torchtitan-fsdp2 --set global_batch=4 --set seq_len=128"
	[ "$s" = cp2 ] && spec="$FIX/tp2.json --set tp=1 --set cp=2 --set distributed_optimizer=true"
	timeout 120 $MPIRUN "$TWIN" run -m $model -c host-cpu --gpus 4 -s $spec --set ep=2 \
		--backend host --steps 1 --warmup 0 --db "$db" --json >"$tmp/moe-$s.json" \
		2>"$tmp/moe-$s.json.err"
	check_run "run host, 4 ranks, MoE ep 2, $s" "$tmp/moe-$s.json" $? "$db" 1
done
if [ "$have_sqlite" = 1 ]; then
	e=$(named_ops "$tmp/moe-router-loss.db" "'router_aux_tokens', 'router_drop'")
	if [ "${e:-0}" -gt 0 ]; then
		ok "run host, the router's loss counts and token dropping ran ($e ops)"
	else
		nok "run host, router loss ops" "router_aux_tokens/router_drop ops '$e'"
	fi
	e=$(named_ops "$tmp/moe-fsdp2.db" "'ag_experts'")
	if [ "${e:-0}" -gt 0 ]; then
		ok "run host, FSDP2 with ep 2 gathers the experts apart ($e ops)"
	else
		nok "run host, FSDP2 expert gathers" "ag_experts ops '$e'"
	fi
fi

# context parallelism over 2 ranks as Transformer Engine's KV all-gather (its core recomputed,
# exchange and all) and as PyTorch's ring attention with its default all-gather rotation: the
# gathers and the grads' reduce-scatter or ring hops run and verify
for s in megatron fsdp; do
	db=$tmp/cp-$s.db
	spec="$FIX/tp2.json --set tp=1 --set cp=2 --set cp_kind=allgather"
	[ "$s" = fsdp ] && spec="torchtitan-fsdp2 --set global_batch=2 --set seq_len=128 --set cp=2"
	timeout 120 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s $spec --backend host \
		--steps 1 --warmup 0 --db "$db" --json >"$tmp/cp-$s.json" 2>"$tmp/cp-$s.json.err"
	check_run "run host, 4 ranks, cp 2 allgather, $s" "$tmp/cp-$s.json" $? "$db" 1
	if [ "$have_sqlite" = 1 ]; then
		e=$(named_ops "$db" "'ag_cp_kv', 'rs_cp_dkv', 'dkv_send'")
		if [ "${e:-0}" -gt 0 ]; then
			ok "run host, cp 2 allgather, $s: its exchange ran ($e ops)"
		else
			nok "run host, cp 2 allgather, $s" "no ag_cp_kv / rs_cp_dkv / dkv_send ops ('$e')"
		fi
	fi
done

# a tied model over 4 pipeline stages: the first and the last stage all-reduce their embedding
# grads (ar_embed), the middle ones are alone in their embedding groups
db=$tmp/tied.db
timeout 120 $MPIRUN "$TWIN" run -m "$FIX/tiny-tied.model.json" -c host-cpu --gpus 4 -s "$FIX/pp4.json" \
	--backend host --steps 1 --warmup 0 --db "$db" --json >"$tmp/tied.json" 2>"$tmp/tied.json.err"
check_run "run host, 4 ranks, tied embeddings over pp 4" "$tmp/tied.json" $? "$db" 1
if [ "$have_sqlite" = 1 ]; then
	emb=$(sqlite3 "$db" "SELECT group_concat(r) FROM (SELECT e.rank AS r FROM events e JOIN names n ON n.id = e.name_id WHERE n.name = 'ar_embed' ORDER BY e.rank)")
	if [ "$emb" = "0,3" ]; then
		ok "run host, ar_embed ran on the first and the last stage only"
	else
		nok "run host, ar_embed ranks" "got '$emb', expected 0,3"
	fi
fi

# the offload runs have a host-memory peak, measured == predicted
h=$(field rank0_host_peak_measured "$tmp/z2-offload.json")
hp=$(field rank0_host_peak_predicted "$tmp/z2-offload.json")
if [ -n "$h" ] && [ "$h" = "$hp" ] && [ "$h" != 0 ]; then
	ok "run host, offload host memory measured == predicted ($h bytes)"
else
	nok "run host, offload host memory" "measured '$h', predicted '$hp'"
fi

# ---- failures ----
# a rank that exits early: every rank ends, non-zero, nothing hangs
db=$tmp/exit.db
timeout 60 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/tp2.json" --backend host \
	--steps 1 --warmup 0 --db "$db" --fault exit:1:20 >"$tmp/exit.out" 2>&1
st=$?
if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] && grep -q "rank 1: fault injected: exiting at op 20" "$tmp/exit.out"; then
	ok "run host, a rank that exits early takes the job down (status $st)"
else
	nok "run host, a rank that exits early" "status $st: $(tail -n 5 "$tmp/exit.out" | tr '\n' ' ')"
fi

# a stalled rank: --timeout names the op every rank waited on, stores what was traced (which
# rank's watchdog fires first is a race: mpirun may stop the others before they print). The
# limit leaves room for a loaded machine: four ranks on two busy cores ran a whole step past
# 2 s without any stall
db=$tmp/stall.db
timeout 90 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/tp2.json" --backend host \
	--steps 2 --warmup 0 --timeout 10 --db "$db" --fault stall:1:20 >"$tmp/stall.out" 2>&1
st=$?
n=$(grep -c "timeout: step 1 stalled for more than 10 s, waiting on op" "$tmp/stall.out")
if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] && [ "$n" -ge 1 ] &&
	grep -q "rank [0-3]: timeout: step 1 stalled for more than 10 s, waiting on op 20 " "$tmp/stall.out"; then
	ok "run host, --timeout aborts a stalled step naming the op ($n ranks reported)"
else
	nok "run host, --timeout" "status $st: $(tail -n 6 "$tmp/stall.out" | tr '\n' ' ')"
fi
if [ "$have_sqlite" = 1 ]; then
	c=$(sqlite3 "$db" "select complete from runs order by id desc limit 1")
	e=$(sqlite3 "$db" "select count(*) from events")
	if [ "$c" = 0 ] && [ "${e:-0}" -gt 0 ]; then
		ok "run host, the stalled run is stored incomplete with $e events"
	else
		nok "run host, partial trace" "complete '$c', events '$e'"
	fi
fi

# a backend error on one rank: it names rank, op and call; every rank exits non-zero
timeout 60 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/tp2.json" --backend host \
	--steps 1 --warmup 0 --db "$tmp/err.db" --fault error:2:30 >"$tmp/err.out" 2>&1
st=$?
if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] && grep -q "twin: rank 2: op 30 '.*fault injected" "$tmp/err.out"; then
	ok "run host, an error names rank and op and ends every rank (status $st)"
else
	nok "run host, error on one rank" "status $st: $(tail -n 5 "$tmp/err.out" | tr '\n' ' ')"
fi

# verification is live across ranks: data altered after a collective is caught and named (the
# collective: rank 1's first one in the stored tp2 run)
op=20
if [ "$have_sqlite" = 1 ]; then
	op=$(sqlite3 "$tmp/tp2.db" "select e.op_id from events e join categories c on c.id = e.category
		where e.rank = 1 and c.name in ('all_reduce', 'reduce_scatter', 'all_gather')
		order by e.start_ns limit 1")
fi
timeout 60 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 -s "$FIX/tp2.json" --backend host \
	--steps 1 --warmup 0 --db "$tmp/bad.db" --fault "corrupt:1:${op:-20}" >"$tmp/bad.out" 2>&1
st=$?
if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] &&
	grep -q "twin: rank 1: op ${op:-20} '.*over tp.*wrong result at element 0" "$tmp/bad.out"; then
	ok "run host, a wrong collective result is caught and named (status $st)"
else
	nok "run host, wrong collective result" "status $st: $(tail -n 5 "$tmp/bad.out" | tr '\n' ' ')"
fi

# a plan whose GPU share fits but whose host share does not (ZeRO-3 NVMe offload with large
# buckets on 0.85 GiB of host memory): the verdict twin memory gives, refused before anything
# is allocated, once, exit 2
timeout 60 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 --ds-config examples/ds_configs/zero3-nvme.json \
	--set zero_optimization.reduce_bucket_size=200000 --set zero_optimization.stage3_prefetch_bucket_size=100000 \
	--set gpu.memory_gib=0.1 --set node.host_memory_gib=0.85 --backend host --steps 1 --warmup 0 \
	--db "$tmp/hfit.db" >"$tmp/hfit.out" 2>"$tmp/hfit.err"
st=$?
n=$(grep -c "^twin:" "$tmp/hfit.err")
if [ "$st" -eq 2 ] && [ "$n" -eq 1 ] && grep -q "does not fit in host memory, nothing was allocated" "$tmp/hfit.err" &&
	[ ! -s "$tmp/hfit.out" ] && [ ! -e "$tmp/hfit.db" ]; then
	ok "run host, a plan whose host memory does not fit is refused once under mpirun"
else
	nok "run host, host memory does not fit" "status $st, $n messages: $(head -c 300 "$tmp/hfit.err")"
fi

# a collective MPI's int counts cannot carry (Llama-2-7B's fp32 grads all-reduced in one call
# over dp 2): refused when the plan is loaded, naming the op, before anything is allocated
timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root "$TWIN" run -m llama2-7b -c host-cpu --gpus 2 \
	-s "$FIX/tp2.json" --set tp=1 --set sequence_parallel=false --set seq_len=128 \
	--set gpu.memory_gib=1000 --set node.host_memory_gib=10000 --backend host --steps 1 --warmup 0 \
	--db "$tmp/mpilim.db" >"$tmp/mpilim.out" 2>"$tmp/mpilim.err"
st=$?
n=$(grep -c "^twin:" "$tmp/mpilim.err")
if [ "$st" -eq 2 ] && [ "$n" -eq 1 ] && [ ! -e "$tmp/mpilim.db" ] &&
	grep -q "twin: rank 0: op [0-9]* '[a-z_]*' (all_reduce over dp.*beyond MPI's int counts" "$tmp/mpilim.err"; then
	ok "run host, a collective beyond MPI's int counts is refused before the first step"
else
	nok "run host, MPI count limit" "status $st, $n messages: $(head -c 300 "$tmp/mpilim.err")"
fi

# input warnings and notes come once, from rank 0, not once per rank
printf '%s\n' '{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,' \
	'"bf16": {"enabled": true}, "zero_optimization": {"stage": 1}, "foo_unknown": 1}' >"$tmp/unk.json"
timeout 120 $MPIRUN "$TWIN" run -m tiny -c host-cpu --gpus 4 --ds-config "$tmp/unk.json" --set node.gpus=2 \
	--set net.max_nodes=2 --set net.fabric=ethernet --set net.nic_gbps=100 --set net.nics_per_node=1 \
	--backend host --steps 1 --warmup 0 --db "$tmp/once.db" >"$tmp/once.out" 2>"$tmp/once.err"
st=$?
w=$(grep -c "foo_unknown: unknown top-level key" "$tmp/once.err")
n=$(grep -c "note: --set net.fabric" "$tmp/once.err")
if [ "$st" -eq 0 ] && [ "$w" -eq 1 ] && [ "$n" -eq 1 ]; then
	ok "run host, input warnings and notes printed once under mpirun"
else
	nok "run host, warnings once" "status $st, warning $w times, note $n times: $(head -c 300 "$tmp/once.err")"
fi

# a stall in the only timed step: the ops that ended before it are stored
db=$tmp/stall1.db
timeout 90 mpirun -np 2 --oversubscribe --allow-run-as-root "$TWIN" run -m tiny -c host-cpu --gpus 2 \
	-s "$FIX/tp2.json" --backend host --steps 1 --warmup 0 --timeout 5 --db "$db" --fault stall:1:20 \
	>"$tmp/stall1.out" 2>&1
st=$?
if [ "$have_sqlite" = 1 ]; then
	e=$(sqlite3 "$db" "select count(*) from events" 2>/dev/null)
	if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] && [ "${e:-0}" -gt 0 ]; then
		ok "run host, a stall in the only timed step stores the $e events that ended"
	else
		nok "run host, partial step" "status $st, events '$e': $(tail -n 4 "$tmp/stall1.out" | tr '\n' ' ')"
	fi
fi

# the host backend's scratch beyond the address space (8 GiB of attention scores under a 4 GiB
# limit): one line, exit 1, no abort. AddressSanitizer cannot start under such a limit
if grep -q __asan_init "$TWIN" 2>/dev/null; then
	echo "ok - run host, scratch out of memory # SKIP AddressSanitizer build"
else
	(ulimit -v 4194304; OPENBLAS_NUM_THREADS=1 timeout 60 "$TWIN" run -m tiny -c host-cpu --gpus 1 \
		--set seq_len=16384 --set flash_attention=false --set gpu.memory_gib=100 \
		--set node.host_memory_gib=1000 --backend host --steps 1 --warmup 0 --db "$tmp/oom.db" \
		>"$tmp/oom.out" 2>"$tmp/oom.err")
	st=$?
	n=$(wc -l <"$tmp/oom.err")
	if [ "$st" -eq 1 ] && [ "$n" -eq 1 ] && grep -q "rank 0: the host backend's scratch for .*out of host memory" "$tmp/oom.err"; then
		ok "run host, scratch beyond host memory fails with one line"
	else
		nok "run host, scratch out of memory" "status $st, $n lines: $(head -c 300 "$tmp/oom.err")"
	fi
fi

# a plan that does not fit: refused before anything is allocated, once, exit 2
timeout 60 mpirun -np 2 --oversubscribe --allow-run-as-root "$TWIN" run -m tiny -c host-cpu --gpus 2 \
	--backend host --set gpu.memory_gib=0.06 --db "$tmp/fit.db" >"$tmp/fit.out" 2>"$tmp/fit.err"
st=$?
n=$(grep -c "does not fit" "$tmp/fit.err")
if [ "$st" -ne 0 ] && [ "$n" -eq 1 ] && [ ! -s "$tmp/fit.out" ] && [ ! -e "$tmp/fit.db" ]; then
	ok "run host, a plan that does not fit is refused once under mpirun"
else
	nok "run host, does not fit" "status $st, $n messages: $(head -c 300 "$tmp/fit.err")"
fi
