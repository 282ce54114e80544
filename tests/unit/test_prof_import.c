/* Importers on the fixtures (tests/fixtures/{nsys,kineto}), with the hand-worked answers of
 * docs/profiler.md, and on malformed files; the Chrome exporter reads back as Kineto. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../profile/profile.h"
#include "test.h"

#define FIX TWIN_SOURCE_DIR "/tests/fixtures"

static char tmpdir[256];

static const char *tmp(const char *name)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmpdir, name);
	return buf[k];
}

/* the nsys fixture, built with the sqlite3 CLI from its .sql, plus an edit */
static bool make_nsys(const char *out, const char *edit)
{
	char cmd[1024];
	unlink(out);
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' < '%s/nsys/rank0.sql'", out, FIX);
	if (system(cmd) != 0)
		return false;
	if (!edit)
		return true;
	sqlite3 *h;
	if (sqlite3_open(out, &h) != SQLITE_OK)
		return false;
	int rc = sqlite3_exec(h, edit, NULL, NULL, NULL);
	sqlite3_close(h);
	return rc == SQLITE_OK;
}

/* rank 0, steps from NVTX "step 1" [0,100) us and "step 2" [100,200) us; on the GPU:
 *   step 1 = [10,120) us: gemm [10,50), memset [80,85) -> compute 45; reduce-scatter [30,70)
 *     -> exposed [50,70) = 20; h2d [60,80) -> exposed 20; idle [50,80) [85,120) = 65 =
 *     comm 20 + copy [70,80) 10 + host 35
 *   step 2 = [120,180) us: gemm 60, idle 0
 *   means: step 85, compute 52.5, comm 20, exposed 10, idle 32.5 = 10 + 5 + 17.5, copy 10 */
static void test_nsys_fixture(struct test_ctx *T)
{
	const char *db = tmp("n0.sqlite");
	CHECK(T, make_nsys(db, NULL));
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 0);
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_import_nsys(db, 0, &t, &err), TW_OK);
	if (err.code)
		printf("#   %s\n", err.msg);
	CHECK_EQ_INT(T, t.nev, 5 + 2);
	CHECK_EQ_INT(T, t.nranks, 1);
	int rs = 0, h2d = 0;
	for (size_t i = 0; i < t.nev; i++) {
		rs += t.ev[i].cat == TRACE_REDUCE_SCATTER;
		h2d += t.ev[i].cat == TRACE_H2D && t.ev[i].bytes == 2000000;
	}
	CHECK_EQ_INT(T, rs, 1);
	CHECK_EQ_INT(T, h2d, 1);
	struct prof_analysis a;
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.nsteps, 2);
	CHECK_EQ_INT(T, a.step_ns, 85000);
	CHECK_EQ_INT(T, a.compute_ns, 52500);
	CHECK_EQ_INT(T, a.comm_ns, 20000);
	CHECK_EQ_INT(T, a.exposed_comm_ns, 10000);
	CHECK_EQ_INT(T, a.copy_ns, 10000);
	CHECK_EQ_INT(T, a.exposed_copy_ns, 10000);
	CHECK_EQ_INT(T, a.idle_ns, 32500);
	CHECK_EQ_INT(T, a.stall_comm_ns, 10000);
	CHECK_EQ_INT(T, a.stall_copy_ns, 5000);
	CHECK_EQ_INT(T, a.stall_host_ns, 17500);
	CHECK_EQ_INT(T, a.cat_ns[TRACE_REDUCE_SCATTER], 20000);
	CHECK_EQ_INT(T, a.coll[TRACE_REDUCE_SCATTER].bw_time_ns, 0); /* size unknown in nsys */
	trace_release(&t);
}

static void nsys_bad(struct test_ctx *T, const char *edit, const char *want)
{
	const char *db = tmp("bad.sqlite");
	CHECK(T, make_nsys(db, edit));
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 0);
	struct tw_err err = {0};
	CHECK(T, prof_import_nsys(db, 0, &t, &err) != TW_OK);
	CHECK_STR_CONTAINS(T, err.msg, want);
	CHECK_EQ_INT(T, t.nev, 0);
	trace_release(&t);
}

static void test_nsys_malformed(struct test_ctx *T)
{
	nsys_bad(T, "DROP TABLE StringIds", "no StringIds table");
	nsys_bad(T, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE correlationId = 12",
		 "CUPTI_ACTIVITY_KIND_KERNEL row 2: start is text, expected an integer" /* rowid */);
	nsys_bad(T, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY",
		 "no CUPTI_ACTIVITY_KIND_KERNEL or _MEMCPY table");
	nsys_bad(T, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName",
		 "has no column 'demangledName'");
	nsys_bad(T, "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET end = 1", "end 1 < start 60000");
	/* NVTX and runtime rows are named by rowid too (row 1 deleted: the counter would say 1) */
	nsys_bad(T, "DELETE FROM NVTX_EVENTS WHERE rowid = 1; UPDATE NVTX_EVENTS SET end = 5 WHERE rowid = 2",
		 "NVTX_EVENTS row 2: end 5 < start 100000");
	nsys_bad(T, "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid = 1;"
		    " UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 'x' WHERE rowid = 3",
		 "CUPTI_ACTIVITY_KIND_RUNTIME row 3: start is text");
	/* times in [0, 4e18] ns; names through StringIds; int32 stream ids */
	nsys_bad(T, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -100 WHERE rowid = 1",
		 "row 1: start is -100, out of range");
	nsys_bad(T, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE rowid = 1",
		 "row 1: end is 9223372036854775807, out of range");
	nsys_bad(T, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 99, shortName = 98 WHERE rowid = 2",
		 "row 2: demangledName 99 / shortName 98: no such id in StringIds");
	nsys_bad(T, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 4294967303 WHERE rowid = 1",
		 "streamId is 4294967303, out of range");
	/* not SQLite at all */
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 0);
	struct tw_err err = {0};
	CHECK(T, prof_import_nsys(FIX "/kineto/rank0.json", 0, &t, &err) != TW_OK);
	CHECK_STR_CONTAINS(T, err.msg, "not an nsys SQLite export");
	tw_err_clear(&err);
	CHECK(T, prof_import_nsys(tmp("missing.sqlite"), 0, &t, &err) != TW_OK);
	CHECK_STR_CONTAINS(T, err.msg, "no such file");
	trace_release(&t);
}

/* Two ranks, steps ProfilerStep#1/#2 projected onto the GPU (docs/profiler.md):
 *   rank 0 step 1 [50,150): compute 70, all-reduce [100,140) exposed 20, idle 30 = 20 + 10 host
 *   rank 0 step 2 [150,240): compute 50, all-gather [160,220) exposed 20, d2h [220,240) 20,
 *     idle 40 = 20 comm + 20 copy
 *   rank 1: the same with collectives starting 10 us later (it arrives late)
 *   means: step 95, compute 60, comm 45, exposed 20, idle 35 = 20 + 10 + 5
 *   all-reduce 8 MB, n = 2, 40 + 30 us: algbw = busbw = 16 MB / 70 us = 228.57 GB/s
 *   all-gather 4 MB per rank, n = 2, 60 + 50 us: algbw = 16 MB / 110 us = 145.45, busbw 72.73
 *   straggler: rank 1, 10 us late at both collectives */
static void check_kineto_analysis(struct test_ctx *T, const struct prof_analysis *a)
{
	CHECK_EQ_INT(T, a->nranks, 2);
	CHECK_EQ_INT(T, a->nsteps, 2);
	CHECK_EQ_INT(T, a->step_ns, 95000);
	CHECK_EQ_INT(T, a->compute_ns, 60000);
	CHECK_EQ_INT(T, a->cat_ns[TRACE_ATTN], 15000);
	CHECK_EQ_INT(T, a->comm_ns, 45000);
	CHECK_EQ_INT(T, a->exposed_comm_ns, 20000);
	CHECK_EQ_INT(T, a->idle_ns, 35000);
	CHECK_EQ_INT(T, a->stall_comm_ns, 20000);
	CHECK_EQ_INT(T, a->stall_copy_ns, 10000);
	CHECK_EQ_INT(T, a->stall_host_ns, 5000);
	CHECK_EQ_INT(T, a->copy_ns, 10000);
	CHECK_NEAR(T, a->coll[TRACE_ALL_REDUCE].mean_count, 0.5, 1e-12);
	CHECK_NEAR(T, a->coll[TRACE_ALL_REDUCE].algbw_GBps, 16e6 / 70000, 1e-9);
	CHECK_NEAR(T, a->coll[TRACE_ALL_REDUCE].busbw_GBps, 16e6 / 70000, 1e-9);
	CHECK_NEAR(T, a->coll[TRACE_ALL_GATHER].algbw_GBps, 16e6 / 110000, 1e-9);
	CHECK_NEAR(T, a->coll[TRACE_ALL_GATHER].busbw_GBps, 8e6 / 110000, 1e-9);
	CHECK_EQ_INT(T, a->straggler_rank, 1);
	CHECK_EQ_INT(T, a->straggler_ns, 10000);
	CHECK_EQ_INT(T, a->straggler_colls, 2);
}

static void test_kineto_fixture(struct test_ctx *T)
{
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 0);
	struct tw_err err = {0};
	/* given in reverse: ranks come from distributedInfo.rank, not the order */
	CHECK_EQ_INT(T, prof_import_kineto(FIX "/kineto/rank1.json", 0, &t, &err), TW_OK);
	CHECK_EQ_INT(T, prof_import_kineto(FIX "/kineto/rank0.json", 1, &t, &err), TW_OK);
	if (err.code)
		printf("#   %s\n", err.msg);
	CHECK_EQ_INT(T, t.nranks, 2);
	CHECK_EQ_INT(T, t.nev, 2 * (6 + 2));
	int64_t ar_bytes = 0;
	for (size_t i = 0; i < t.nev; i++)
		if (t.ev[i].cat == TRACE_ALL_REDUCE)
			ar_bytes = t.ev[i].bytes;
	CHECK_EQ_INT(T, ar_bytes, 8000000);
	struct prof_analysis a;
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	check_kineto_analysis(T, &a);
	/* export -> import gives the same analysis (the exporter writes Kineto's fields) */
	const char *out = tmp("export.json");
	CHECK_EQ_INT(T, prof_export_chrome_file(&t, out, &err), TW_OK);
	struct trace u;
	trace_init(&u, TRACE_KIND_IMPORT, 0);
	CHECK_EQ_INT(T, prof_import_kineto(out, 0, &u, &err), TW_OK);
	CHECK_EQ_INT(T, u.nev, t.nev);
	struct prof_analysis b;
	CHECK_EQ_INT(T, prof_analyze(&u, &b, &err), TW_OK);
	check_kineto_analysis(T, &b);
	trace_release(&u);
	trace_release(&t);
}

/* NCCL's rooted Reduce shares the broadcast category; TRACE_F_REDUCE keeps its name through
 * the exporter and back: a reduce and a broadcast, exported and imported again. */
static void test_reduce_round_trip(struct test_ctx *T)
{
	CHECK(T, prof_nccl_is_reduce("ncclDevKernel_Reduce_Sum_f16_RING_LL(x)"));
	CHECK(T, prof_nccl_is_reduce("ncclKernel_Reduce_RING_LL_Sum_half(x)"));
	CHECK(T, !prof_nccl_is_reduce("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)"));
	CHECK(T, !prof_nccl_is_reduce("ncclDevKernel_Broadcast_RING_LL(x)"));
	CHECK(T, !prof_nccl_is_reduce("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"));
	struct trace t;
	trace_init(&t, TRACE_KIND_SIM, 0);
	const char *names[2] = {"ar_grads", "bcast"};
	for (int i = 0; i < 2; i++) {
		struct trace_event e = {.rank = 0, .device = 0, .stream = 1, .cat = TRACE_BROADCAST,
					.step = 0, .op_id = i, .layer = -1, .micro = -1, .stage = -1,
					.phase = -1, .start_ns = 1000 * i, .end_ns = 1000 * i + 500,
					.bytes = 1 << 20, .group_size = 8,
					.flags = i == 0 ? TRACE_F_REDUCE : 0};
		e.name = trace_intern(&t, names[i]);
		trace_add(&t, &e);
	}
	struct tw_err err = {0};
	const char *out = tmp("reduce.json");
	CHECK_EQ_INT(T, prof_export_chrome_file(&t, out, &err), TW_OK);
	FILE *f = fopen(out, "r");
	char buf[8192] = {0};
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	CHECK(T, strstr(buf, "\"ncclDevKernel_Reduce (ar_grads)\"") != NULL);
	CHECK(T, strstr(buf, "\"ncclDevKernel_Broadcast (bcast)\"") != NULL);
	CHECK(T, strstr(buf, "\"Collective name\": \"reduce\"") != NULL);
	CHECK(T, strstr(buf, "\"Collective name\": \"broadcast\"") != NULL);
	struct trace u;
	trace_init(&u, TRACE_KIND_IMPORT, 0);
	CHECK_EQ_INT(T, prof_import_kineto(out, 0, &u, &err), TW_OK);
	int reduces = 0, bcasts = 0;
	for (size_t i = 0; i < u.nev; i++) {
		if (u.ev[i].cat != TRACE_BROADCAST)
			continue;
		if (u.ev[i].flags & TRACE_F_REDUCE)
			reduces++;
		else
			bcasts++;
	}
	CHECK_EQ_INT(T, reduces, 1);
	CHECK_EQ_INT(T, bcasts, 1);
	trace_release(&u);
	trace_release(&t);
}

/* text written to a file of the test's folder and imported into *t (initialised here) */
static void kineto_import_text(struct test_ctx *T, const char *name, const char *text,
			       struct trace *t)
{
	const char *p = tmp(name);
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	trace_init(t, TRACE_KIND_IMPORT, 0);
	struct tw_err err = {0};
	CHECK_EQ_INT(T, prof_import_kineto(p, 0, t, &err), TW_OK);
}

/* GPU-side ProfilerStep annotations are the step windows as they are: step [20,120) us holds
 * a 60 us GEMM -> step 100, compute 60, idle 40 (the CPU range [0,50) is not used). */
static void test_kineto_gpu_annotation(struct test_ctx *T)
{
	struct trace t;
	kineto_import_text(T, "gua.json", "{\"traceEvents\": ["
	      "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#4\", \"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": 50},"
	      "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#4\", \"pid\": 0, \"tid\": 7, \"ts\": 20, \"dur\": 100},"
	      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ampere_sgemm\", \"pid\": 0, \"tid\": 7, \"ts\": 30, \"dur\": 60, \"args\": {\"correlation\": 5}},"
	      "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": 5, \"dur\": 3, \"args\": {\"correlation\": 5}}"
	      "]}", &t);
	struct tw_err err = {0};
	struct prof_analysis a;
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.nsteps, 1);
	CHECK_EQ_INT(T, a.step_ns, 100000);
	CHECK_EQ_INT(T, a.compute_ns, 60000);
	CHECK_EQ_INT(T, a.idle_ns, 40000);
	trace_release(&t);
}

static void kineto_bad(struct test_ctx *T, const char *text, const char *want)
{
	const char *p = tmp("bad.json");
	FILE *f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 0);
	struct tw_err err = {0};
	CHECK(T, prof_import_kineto(p, 0, &t, &err) != TW_OK);
	CHECK_STR_CONTAINS(T, err.msg, want);
	CHECK_EQ_INT(T, t.nev, 0);
	trace_release(&t);
}

static void test_kineto_malformed(struct test_ctx *T)
{
	kineto_bad(T, "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"na", "malformed");
	kineto_bad(T, "[1, 2]", "top level is not an object");
	kineto_bad(T, "{\"schemaVersion\": 1}", "traceEvents: missing");
	kineto_bad(T, "{\"traceEvents\": {}}", "traceEvents: must be an array");
	kineto_bad(T, "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
		      "\"ts\": \"12\", \"dur\": 1}]}",
		   "traceEvents[0].ts: must be a number");
	kineto_bad(T, "{\"traceEvents\": [{\"ph\": \"M\"}, {\"ph\": \"X\", \"cat\": \"kernel\", "
		      "\"name\": \"k\", \"ts\": 1, \"dur\": -1}]}",
		   "traceEvents[1].dur: must be a number >= 0");
	kineto_bad(T, "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1}]}",
		   "traceEvents[0].name: missing");
	kineto_bad(T, "{\"distributedInfo\": {\"rank\": \"zero\"}, \"traceEvents\": []}",
		   "distributedInfo.rank: must be an integer");
	kineto_bad(T, "{\"traceEvents\": [7]}", "traceEvents[0]: must be an object");
#define KX(extra) "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", " extra "}"
	/* times: >= 0, and their sums never overflow the int64 ns clock */
	kineto_bad(T, "{\"traceEvents\": [" KX("\"ts\": -50, \"dur\": 1") "]}",
		   "traceEvents[0].ts: must be >= 0");
	kineto_bad(T, "{\"baseTimeNanoseconds\": 4e18, \"traceEvents\": ["
		      KX("\"ts\": 3900000000000000.0, \"dur\": 1") "]}",
		   "ts + baseTimeNanoseconds is beyond 4e18 ns");
	kineto_bad(T, "{\"traceEvents\": [" KX("\"ts\": 3900000000000000.0, \"dur\": 3900000000000000.0") "]}",
		   "traceEvents[0].dur: ts + dur is beyond 4e18 ns");
	kineto_bad(T, "{\"baseTimeNanoseconds\": 1000, \"traceEvents\": [" KX("\"ts\": -2, \"dur\": 1") "]}",
		   "starts before time 0");
	/* ranges and sizes that would be stored as other values */
	kineto_bad(T, "{\"traceEvents\": [" KX("\"ts\": 0, \"dur\": 1, \"args\": {\"Collective name\": "
		      "\"allreduce\", \"Group size\": 1e15}") "]}",
		   "args.Group size: must be an integer");
	kineto_bad(T, "{\"distributedInfo\": {\"rank\": 0, \"world_size\": 1e12}, \"traceEvents\": []}",
		   "distributedInfo.world_size: must be an integer");
	/* steps: one range per step and stream of a GPU */
#define GS(n, tid, ts, dur) "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": " \
	"\"ProfilerStep#" #n "\", \"tid\": " #tid ", \"ts\": " #ts ", \"dur\": " #dur "}, "
	kineto_bad(T, "{\"traceEvents\": [" GS(1, 7, 0, 100) GS(1, 7, 200, 100)
		      KX("\"ts\": 0, \"dur\": 250") "]}",
		   "step 1 appears twice on stream 7 of GPU 0 of rank 0");
	/* steps whose windows overlap (a collective of step 1 still running when step 2
	 * starts): step 1 ends where step 2 begins, the kernel counts once */
	{
		struct trace t;
		kineto_import_text(T, "overlap.json",
			    "{\"traceEvents\": [" GS(1, 7, 0, 150) GS(2, 7, 100, 150)
			    KX("\"ts\": 0, \"dur\": 250") "]}", &t);
		struct tw_err err = {0};
		struct prof_analysis a;
		CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
		CHECK_EQ_INT(T, a.nsteps, 2);
		CHECK_EQ_INT(T, a.step_ns, 125000);    /* 100 and 150 us */
		CHECK_EQ_INT(T, a.compute_ns, 125000); /* 250 us of kernel, once */
		trace_release(&t);
	}
	/* one step on stream 7 of two GPUs (one process drives both) */
	{
		struct trace t;
		kineto_import_text(T, "twogpus.json",
			    "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", "
			    "\"name\": \"ProfilerStep#1\", \"pid\": 0, \"tid\": 7, \"ts\": 0, \"dur\": 100}, "
			    "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#1\", "
			    "\"pid\": 1, \"tid\": 7, \"ts\": 0, \"dur\": 100}, "
			    KX("\"ts\": 0, \"dur\": 50") "]}", &t);
		trace_release(&t);
	}
#undef GS
#undef KX
}

/* Epoch-microsecond timestamps (1.7e15 us: a double resolves 0.25 us) are read to the ns, so
 * are 3-decimal ones and an integer baseTimeNanoseconds; a step's GPU annotations on two
 * streams make one window. */
static void test_kineto_exact_times(struct test_ctx *T)
{
	struct trace t;
	kineto_import_text(T, "epoch.json", "{\"traceEvents\":[\n"
	      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ampere_gemm\",\"pid\":0,\"tid\":7,\"ts\":1696118400000000.100,\"dur\":0.100},\n"
	      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum\",\"pid\":0,\"tid\":20,\"ts\":1696118400000000.200,\"dur\":0.100},\n"
	      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ampere_gemm\",\"pid\":0,\"tid\":7,\"ts\":1696118400000000.300,\"dur\":0.100},\n"
	      "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ampere_gemm\",\"pid\":0,\"tid\":7,\"ts\":1696118400000001,\"dur\":0.001}\n"
	      "]}", &t);
	trace_sort(&t);
	CHECK_EQ_INT(T, t.nev, 4);
	if (t.nev == 4) {
		CHECK(T, t.ev[0].start_ns == 1696118400000000100LL && t.ev[0].end_ns == 1696118400000000200LL);
		CHECK(T, t.ev[1].start_ns == 1696118400000000200LL);
		CHECK(T, t.ev[2].start_ns == 1696118400000000300LL);
		CHECK(T, t.ev[3].start_ns == 1696118400000001000LL && t.ev[3].end_ns == 1696118400000001001LL);
	}
	trace_release(&t);
	kineto_import_text(T, "base.json",
			   "{\"baseTimeNanoseconds\": 1696118400000000123, \"traceEvents\": [{\"ph\": "
			   "\"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 0.001, \"dur\": 1}]}",
			   &t);
	CHECK(T, t.nev == 1 && t.ev[0].start_ns == 1696118400000000124LL);
	trace_release(&t);
	/* one step, annotated on streams 7 and 20: the window is their union, [0, 100) us */
	kineto_import_text(T, "streams.json", "{\"traceEvents\": ["
	      "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#1\", \"tid\": 7, \"ts\": 0, \"dur\": 90},"
	      "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#1\", \"tid\": 20, \"ts\": 95, \"dur\": 5},"
	      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"tid\": 7, \"ts\": 0, \"dur\": 90},"
	      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce\", \"tid\": 20, \"ts\": 95, \"dur\": 5}"
	      "]}", &t);
	struct tw_err err = {0};
	struct prof_analysis a;
	CHECK_EQ_INT(T, prof_analyze(&t, &a, &err), TW_OK);
	CHECK_EQ_INT(T, a.nsteps, 1);
	CHECK_EQ_INT(T, a.step_ns, 100000);
	CHECK_EQ_INT(T, a.idle_ns, 10000);
	trace_release(&t);
}

/* a file's text, imported: the number of events (-1: refused, message in err) */
static long kineto_text(const char *text, size_t len, struct tw_err *err)
{
	const char *p = tmp("scan.json");
	FILE *f = fopen(p, "wb");
	fwrite(text, 1, len, f);
	fclose(f);
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 0);
	tw_err_clear(err);
	long n = prof_import_kineto(p, 0, &t, err) == TW_OK ? (long)t.nev : -1;
	if (n < 0 && t.nev != 0)
		n = -2; /* a refused file must leave the trace as it was */
	trace_release(&t);
	return n;
}

static void kineto_ok(struct test_ctx *T, const char *text, long want)
{
	struct tw_err err = {0};
	long n = kineto_text(text, strlen(text), &err);
	if (n != want)
		printf("#   %s\n#   -> %s\n", text, err.msg);
	CHECK_EQ_INT(T, n, want);
}

/* The events are read an element at a time (the file is not parsed whole): the scanner that
 * finds each element's end knows strings, escapes and nesting; the top-level traceEvents is
 * the only one taken; every malformed file is refused as a whole-file parse would refuse it,
 * at the same line and column, naming the element. */
static void test_kineto_scanner(struct test_ctx *T)
{
#define KX "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": 1}"
	/* brackets, braces, escaped quotes and backslashes inside strings; nested args */
	kineto_ok(T, "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k[\\\"]{}\\\\\", "
		     "\"ts\": 1, \"dur\": 1, \"args\": {\"a\": {\"b\": [1, {\"c\": \"]\"}]}, \"s\": \"\\\\\\\"}\"}}, "
		     KX "]}", 2);
	/* "traceEvents" in a string, in a nested object, after the array, escaped */
	kineto_ok(T, "{\"note\": \"\\\"traceEvents\\\": [\", \"meta\": {\"traceEvents\": [" KX "]}, "
		     "\"traceEvents\": [" KX "], \"tail\": \"]}\"}", 1);
	kineto_ok(T, "{\"trace\\u0045vents\": [" KX ", " KX "]}", 2); /* the same key to cJSON */
	kineto_ok(T, "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, "
		     "\"dur\": 1, \"args\": {\"traceEvents\": [" KX "]}}]}", 1);
	kineto_bad(T, "{\"meta\": {\"traceEvents\": [" KX "]}, \"x\": \"traceEvents\"}", "traceEvents: missing");
	/* empty arrays, whitespace as cJSON reads it (every byte up to the space), a BOM */
	kineto_ok(T, "{\"traceEvents\": []}", 0);
	kineto_ok(T, "\n{ \"traceEvents\" :\t[\n \r]\n}\n", 0);
	kineto_ok(T, "{\"traceEvents\":[" KX "," KX "]}", 2);
	kineto_ok(T, "{\"traceEvents\":\x01[\x02" KX "\x1f,\x0b" KX "\n]}", 2);
	kineto_ok(T, "\xEF\xBB\xBF{\"traceEvents\": [" KX "]}", 1);
	/* truncated, unbalanced, trailing garbage: line and column of the whole file */
	kineto_bad(T, "{\"traceEvents\": [" KX ", {\"ph\": \"X, \"cat\": \"kernel\"}]}",
		   "bad.json:1:92: malformed JSON (in traceEvents[1])");
	kineto_bad(T, "{\"traceEvents\": [" KX ", {\"ph\": \"X", "bad.json:1:88: malformed JSON (in traceEvents[1])");
	kineto_bad(T, "{\"traceEvents\": [" KX ", {\"ph\": \"X\\", "malformed JSON (in traceEvents[1])");
	kineto_bad(T, "{\"traceEvents\": [" KX "}]}", "bad.json:1:78: malformed JSON");
	kineto_bad(T, "{\"traceEvents\": [" KX "]]}", "bad.json:1:79: malformed JSON");
	kineto_bad(T, "{\"traceEvents\": [{\"a\": [}]}", "bad.json:1:25: malformed JSON (in traceEvents[0])");
	kineto_bad(T, "{\"traceEvents\": [" KX ",]}", "bad.json:1:79: malformed JSON (in traceEvents[1])");
	kineto_bad(T, "{\"traceEvents\": [7x]}", "bad.json:1:19: malformed JSON (in traceEvents[0])");
	kineto_bad(T, "{\"traceEvents\": [" KX "]} x", "bad.json:1:81: malformed JSON");
	kineto_bad(T, "{\"traceEvents\": [" KX "]}\n{}", "bad.json:2:1: malformed JSON");
	kineto_bad(T, "{\"traceEvents\" [" KX "]}", "bad.json:1:16: malformed JSON");
	kineto_bad(T, "{\"traceEvents\": [" KX "] \"b\": 1}", "bad.json:1:80: malformed JSON");
	kineto_bad(T, "", "empty file");
	kineto_bad(T, "{\"traceEvents\": []}\x01", "bad.json:1:20: malformed JSON");
	/* malformed JSON comes before any field's error, and the first in the text wins */
	kineto_bad(T, "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1, \"dur\": 1}, "
		      "{\"ph\": nul}]}", "bad.json:1:74: malformed JSON (in traceEvents[1])");
	kineto_bad(T, "{\"distributedInfo\": {\"rank\": \"zero\"}, \"traceEvents\": [{]}",
		   "bad.json:1:57: malformed JSON (in traceEvents[0])");
	kineto_bad(T, "{\"traceEvents\": [{\"a\": x}], \"b\": }", "bad.json:1:24: malformed JSON");
	kineto_bad(T, "{\"traceEvents\": [" KX "], \"b\": }", "bad.json:1:86: malformed JSON");
	kineto_bad(T, "{\"a\": x, \"traceEvents\": [{]}", "bad.json:1:7: malformed JSON");
	/* the top level: an object with one traceEvents array */
	kineto_bad(T, "[" KX "]", "top level is not an object");
	kineto_bad(T, "[" KX ", ", "bad.json:1:63: malformed JSON");
	kineto_bad(T, "\"traceEvents\"", "top level is not an object");
	kineto_bad(T, "{\"traceEvents\": \"x\"}", "traceEvents: must be an array");
	kineto_bad(T, "{\"traceEvents\": [], \"traceEvents\": [" KX "]}",
		   "traceEvents: appears twice at the top level");
	kineto_bad(T, "{\"traceEvents\": 1, \"traceEvents\": []}", "traceEvents: appears twice");
	struct tw_err err = {0};
	CHECK_EQ_INT(T, kineto_text("{\"traceEvents\": [{\"ph\": \"X\0\"}]}", 30, &err), -1);
	CHECK_STR_CONTAINS(T, err.msg, "contains a NUL byte");
	/* cJSON nests 1000 deep; an element sits in two containers, as in the whole file */
	char deep[2200];
	for (int m = 997; m <= 998; m++) {
		int w = snprintf(deep, sizeof(deep), "{\"traceEvents\": [{\"ph\": \"M\", \"args\": ");
		memset(deep + w, '[', (size_t)m);
		memset(deep + w + m, ']', (size_t)m);
		snprintf(deep + w + 2 * m, sizeof(deep) - (size_t)(w + 2 * m), "}]}");
		if (m == 997)
			kineto_ok(T, deep, 0);
		else
			kineto_bad(T, deep, "bad.json:1:1035: malformed JSON (in traceEvents[0])");
	}
	/* every cut of a trace is refused as malformed (never imported in part) */
	const char *full = "{\"distributedInfo\": {\"rank\": 0}, \"traceEvents\": [\n  " KX ",\n  "
			   "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"n[\\\"x\\\"]\", \"ts\": 2, \"dur\": 1, "
			   "\"args\": {\"s\": [1, {\"t\": \"}\"}]}}\n], \"baseTimeNanoseconds\": 1000}";
	size_t flen = strlen(full), refused = 0;
	CHECK_EQ_INT(T, kineto_text(full, flen, &err), 2);
	for (size_t cut = 0; cut < flen; cut++) {
		long n = kineto_text(full, cut, &err);
		refused += n == -1 && (strstr(err.msg, "malformed JSON") || strstr(err.msg, "empty file")) &&
			   strstr(err.msg, "scan.json");
		if (n != -1)
			printf("#   cut at %zu: %ld events\n", cut, n);
	}
	CHECK_EQ_INT(T, refused, flen);
#undef KX
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/twin_test_import_%d", (int)getpid());
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", tmpdir);
	if (system(cmd) != 0)
		return 1;
	struct test_ctx T = {0};
	TEST_RUN(&T, test_nsys_fixture);
	TEST_RUN(&T, test_nsys_malformed);
	TEST_RUN(&T, test_kineto_fixture);
	TEST_RUN(&T, test_kineto_gpu_annotation);
	TEST_RUN(&T, test_reduce_round_trip);
	TEST_RUN(&T, test_kineto_malformed);
	TEST_RUN(&T, test_kineto_exact_times);
	TEST_RUN(&T, test_kineto_scanner);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmpdir);
	return test_done(&T);
}
