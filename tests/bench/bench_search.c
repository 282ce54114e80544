/* Search benchmark (twin plan): Llama-2 70B on 64 H100 (8 nodes), global batch 512 of 4,096
 * tokens, DeepSpeed and Megatron, on 1 thread and on every CPU. Prints candidates, how many
 * fit and were simulated, the wall and CPU time, and candidates per second (figures go to
 * docs/search.md). An argument N runs only benchmark N. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../../sim/sim.h"

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

struct bench {
	const char *label, *model, *cluster;
	int64_t gpus, batch;
	enum strat_framework fw;
	int threads;
};

static int run(const struct bench *b)
{
	struct job *base = TW_NEW(struct job);
	struct tw_err err = { 0 };
	struct job_inputs in = { .model = b->model, .cluster = b->cluster, .gpus = b->gpus,
				 .data_dir = TWIN_SOURCE_DIR };
	if (job_load(&in, base, &err) != TW_OK) {
		printf("%-40s job: %s\n", b->label, err.msg);
		free(base);
		return 1;
	}
	struct search_space sp;
	search_space_init(&sp);
	sp.framework = b->fw;
	sp.global_batch = b->batch;
	sp.threads = b->threads;
	struct search_result r;
	double c0 = cpu_s();
	enum tw_result rc = search_run(base, &sp, &r, &err);
	double cpu = cpu_s() - c0;
	if (rc != TW_OK) {
		printf("%-40s search: %s\n", b->label, err.msg);
		free(base);
		return 1;
	}
	printf("%-40s %2d thr  candidates %5lld  fit %4lld  simulated %3lld  pruned %4lld  "
	       "wall %6.2f s (filter %5.2f, sim %5.2f)  cpu %6.2f s  %6.1f configs/s (wall)  "
	       "%6.1f configs/s (cpu)  best %.3f s\n",
	       b->label, r.threads, (long long)r.candidates, (long long)r.fit, (long long)r.simulated,
	       (long long)r.pruned, r.wall_s, r.filter_s, r.sim_s, cpu, r.configs_per_s,
	       (double)r.candidates / cpu, r.ntop ? (double)r.top[0].step_ns * 1e-9 : 0.0);
	search_result_release(&r);
	free(base);
	return 0;
}

int main(int argc, char **argv)
{
	int only = argc > 1 ? atoi(argv[1]) : -1;
	static const struct bench benches[] = {
		{ "llama2-70b 64xH100 B512 deepspeed", "llama2-70b", "dgx-h100", 64, 512, STRAT_DEEPSPEED, 1 },
		{ "llama2-70b 64xH100 B512 deepspeed", "llama2-70b", "dgx-h100", 64, 512, STRAT_DEEPSPEED, 0 },
		{ "llama2-70b 64xH100 B512 megatron", "llama2-70b", "dgx-h100", 64, 512, STRAT_MEGATRON, 0 },
		{ "llama2-7b 8xH100 B64 deepspeed", "llama2-7b", "dgx-h100", 8, 64, STRAT_DEEPSPEED, 0 },
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		if (only < 0 || only == (int)i)
			bad += run(&benches[i]);
	return bad ? 1 : 0;
}
