/* Fuzz target: cluster files, optionally with one --set override: an input whose first line
 * is "SET PATH=VALUE" applies it to the JSON that follows. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char set[256] = "";
	const char *sets[1] = {set};
	int nsets = 0;
	if (size > 4 && !memcmp(data, "SET ", 4)) {
		const uint8_t *nl = memchr(data, '\n', size);
		size_t n = nl ? (size_t)(nl - data) - 4 : 0;
		if (nl && n < sizeof(set)) {
			memcpy(set, data + 4, n);
			set[n] = '\0';
			nsets = 1;
			size -= (size_t)(nl - data) + 1;
			data = nl + 1;
		}
	}
	char path[128];
	if (!fuzz_write_file("cluster", data, size, path, sizeof(path)))
		return 0;
	struct cluster c;
	struct tw_err err = {0};
	if (cluster_load(path, TWIN_SOURCE_DIR "/topologies", sets, nsets, &c, &err) == TW_OK) {
		int nodes = 0;
		tw_err_clear(&err);
		cluster_check_gpus(&c, c.node.gpus, &nodes, &err);
		cluster_eff_lookup(&c.eff.gemm, 1e12);
		cJSON_Delete(cluster_to_json(&c));
	}
	unlink(path);
	return 0;
}
