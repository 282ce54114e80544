/* Fuzz target: model files — our schema and Hugging Face config.json — then the counts and
 * FLOPs of whatever loads (they must not overflow or divide by zero). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[128];
	if (!fuzz_write_file("model", data, size, path, sizeof(path)))
		return 0;
	struct model m;
	struct tw_err err = {0};
	if (model_load(path, TWIN_SOURCE_DIR "/examples/models", &m, &err) == TW_OK) {
		struct model_params p;
		model_count(&m, &p);
		struct model_flops f;
		model_flops_fwd(&m, m.seq_len, &f);
		(void)model_flops_per_token(&m, m.seq_len);
		cJSON_Delete(model_to_json(&m));
	}
	unlink(path);
	return 0;
}
