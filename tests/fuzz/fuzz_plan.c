/* Fuzz target: the plan builder fed with fuzzed but parseable jobs. Byte 0 picks the model
 * (tiny, tiny-moe, or tiny with sliding windows on alternate layers, q/k norms and sinks),
 * byte 1 the GPU count (1, 2, 4, 8), the rest is our strategy JSON. Every
 * role's plan must build (or be refused with an error) and pass the memory walk, without a
 * crash, overflow or runaway. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	static const char *const models[] = {"tiny", "tiny-moe"};
	static const int64_t gpus[] = {1, 2, 4, 8};
	const char *model = models[data[0] % 3 % 2];
	bool windowed = data[0] % 3 == 2;
	int64_t n = gpus[data[1] % 4];
	char path[128];
	if (!fuzz_write_file("plan", data + 2, size - 2, path, sizeof(path)))
		return 0;
	struct job_inputs in = {.model = model, .cluster = "host-cpu", .strategy = path, .gpus = n,
				.data_dir = TWIN_SOURCE_DIR};
	struct job *j = TW_NEW(struct job);
	struct tw_err err = {0};
	enum tw_result rc = job_load(&in, j, &err);
	if (rc == TW_OK && windowed) {
		j->model.sliding_window = 32, j->model.full_every = 2, j->model.full_first = 1;
		j->model.qk_norm = j->model.attn_sinks = true;
		rc = model_validate(&j->model, "tiny", &err);
	}
	if (rc == TW_OK) {
		int64_t reps[64], weights[64];
		int64_t nroles = plan_roles(j, reps, weights, 64);
		for (int64_t i = 0; i < nroles && i < 64; i++) {
			struct plan p = {0};
			tw_err_clear(&err);
			if (plan_rank(j, reps[i], &p, &err) == TW_OK) {
				struct plan_mem m;
				tw_err_clear(&err);
				if (plan_memory(j, &p, &m, &err) == TW_OK) {
					char verdict[256];
					plan_mem_fits(&m, verdict, sizeof(verdict));
				}
			}
			plan_release(&p);
		}
	}
	free(j);
	unlink(path);
	return 0;
}
