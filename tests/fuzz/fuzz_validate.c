/* Fuzz target: the validation-file reader (twin validate FILE --json), end to end: every case
 * that parses is predicted. The command's output is discarded by
 * tests/fuzz/run.sh (-close_fd_mask=1); only crashes and sanitizer reports count. */
#include <stdint.h>
#include <unistd.h>

#include "cli/cli.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[128];
	if (!fuzz_write_file("validate", data, size, path, sizeof(path)))
		return 0;
	struct cli_ctx ctx = {.data_dir = TWIN_SOURCE_DIR, .log_level = TW_LOG_ERROR};
	/* an event budget keeps one input's simulations to about a second under the sanitizers
	 * (a valid case may ask for a step of millions of events; libFuzzer's timeout is 10 s) */
	char a0[] = "validate", a2[] = "--json", a3[] = "--max-events", a4[] = "1000000";
	char *argv[] = {a0, path, a2, a3, a4, NULL};
	cmd_validate(&ctx, 5, argv);
	unlink(path);
	return 0;
}
