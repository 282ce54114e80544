/* Simulator benchmark (issue 4): one step of GPT-3 175B on 1,024 A100 (TP 8, PP 8, DP 16,
 * 1F1B, 64 micro-batches) in symmetric mode (target <= 50 ms) and full mode (<= 5 s, peak RSS
 * <= 1 GiB), and Llama 3.1 405B on 16,384 H100 (TP 8, PP 16, DP 128) in symmetric mode
 * (<= 200 ms). Prints wall time, events and events/s of each; figures go to docs/BENCHMARKS.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../../sim/sim.h"

struct bench {
	const char *label, *model, *cluster, *strategy;
	int64_t gpus;
	const char *sets[8];
	int nsets;
	bool full;
	double target_ms;
};

static double cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-3;
}

static double tv_ms(struct timeval tv)
{
	return (double)tv.tv_sec * 1e3 + (double)tv.tv_usec * 1e-3;
}

static int run(const struct bench *b)
{
	struct job *j = TW_NEW(struct job);
	struct tw_err err = { 0 };
	struct job_inputs in = { .model = b->model, .cluster = b->cluster, .strategy = b->strategy,
				 .sets = b->sets, .nsets = b->nsets, .gpus = b->gpus,
				 .data_dir = TWIN_SOURCE_DIR };
	if (job_load(&in, j, &err) != TW_OK) {
		printf("%-44s job: %s\n", b->label, err.msg);
		free(j);
		return 1;
	}
	/* what building the roles' plans costs (core/plan), inside the figure below */
	double p0 = cpu_ms();
	int64_t reps[256], w[256];
	int64_t nr = plan_roles(j, reps, w, 256);
	for (int64_t i = 0; i < nr; i++) {
		struct plan p;
		if (plan_rank(j, reps[i], &p, &err) == TW_OK)
			plan_release(&p);
	}
	double plan_cpu = cpu_ms() - p0;
	struct sim_options o = { .full = b->full };
	struct trace t;
	struct sim_stats st;
	struct rusage ru0;
	getrusage(RUSAGE_SELF, &ru0);
	double c0 = cpu_ms();
	int64_t t0 = tw_now_ns();
	enum tw_result rc = sim_run(j, &o, &t, &st, &err);
	int64_t wall = tw_now_ns() - t0;
	double cpu = cpu_ms() - c0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	if (rc != TW_OK) {
		printf("%-44s sim: %s\n", b->label, err.msg);
		free(j);
		return 1;
	}
	double ms = (double)wall * 1e-6;
	printf("%-44s wall %8.1f ms, cpu %8.1f ms (user %.1f, sys %.1f; building %lld plans alone %.1f ms; target %5.0f ms %s)  %9lld events  %8.3g events/s (cpu)  step %.3f s  "
	       "%lld ranks  %zu trace events  %ld page faults  peak RSS %.0f MiB\n",
	       b->label, ms, cpu, tv_ms(ru.ru_utime) - tv_ms(ru0.ru_utime),
	       tv_ms(ru.ru_stime) - tv_ms(ru0.ru_stime), (long long)nr, plan_cpu, b->target_ms,
	       cpu <= b->target_ms ? "met" : "MISSED", (long long)st.events,
	       (double)st.events / (cpu * 1e-3), (double)st.step_ns * 1e-9,
	       (long long)st.ranks_simulated, t.nev, ru.ru_minflt - ru0.ru_minflt,
	       (double)ru.ru_maxrss / 1024.0);
	trace_release(&t);
	free(j);
	return 0;
}

int main(int argc, char **argv)
{
	/* optional argument: run only benchmark number N (0-based) */
	int only = argc > 1 ? atoi(argv[1]) : -1;
	/* 64 micro-batches: global batch 1024 = 64 x micro 1 x dp 16 */
	static const struct bench benches[] = {
		{ "gpt3-175b 1024xA100 tp8 pp8 dp16 symmetric", "gpt3-175b", "dgx-a100-80g",
		  "megatron-175b", 1024, { "global_batch=1024" }, 1, false, 50 },
		{ "llama3.1-405b 16384xH100 tp8 pp16 dp128 sym", "llama3.1-405b", "dgx-h100",
		  "megatron-175b", 16384,
		  /* Meta's split of the 126 layers: a layer fewer on the first and the last stage */
		  { "tp=8", "pp=16", "global_batch=2048", "seq_len=8192", "precision=bf16",
		    "first_stage_layers=7", "last_stage_layers=7" }, 7, false, 200 },
		{ "gpt3-175b 1024xA100 tp8 pp8 dp16 full", "gpt3-175b", "dgx-a100-80g", "megatron-175b",
		  1024, { "global_batch=1024" }, 1, true, 5000 },
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		if (only < 0 || only == (int)i)
			bad += run(&benches[i]);
	return bad ? 1 : 0;
}
