/* Fuzz target: DeepSpeed ds_config.json and our strategy JSON, resolved against a fixed
 * model and cluster (llama2-7b on two DGX-H100 nodes). The same input is tried both ways. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model m;
	struct cluster c;
	struct tw_err err = {0};
	/* loaded per input: the harness keeps no state between runs */
	if (model_load("llama2-7b", TWIN_SOURCE_DIR "/examples/models", &m, &err) != TW_OK ||
	    cluster_load("dgx-h100", TWIN_SOURCE_DIR "/topologies", NULL, 0, &c, &err) != TW_OK)
		abort();
	char path[128];
	if (!fuzz_write_file("strategy", data, size, path, sizeof(path)))
		return 0;
	struct strategy *s = TW_NEW(struct strategy);
	struct strat_inputs in = {.ds_config_path = path,
				  .strategies_dir = TWIN_SOURCE_DIR "/examples/strategies",
				  .gpus = 16};
	tw_err_clear(&err);
	if (strategy_resolve(&in, &m, &c, s, &err) == TW_OK)
		cJSON_Delete(strategy_to_json(s));
	in.ds_config_path = NULL;
	in.strategy_path = path;
	tw_err_clear(&err);
	if (strategy_resolve(&in, &m, &c, s, &err) == TW_OK)
		cJSON_Delete(strategy_to_json(s));
	free(s);
	unlink(path);
	return 0;
}
