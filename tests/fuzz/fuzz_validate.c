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
	char a0[] = "validate", a2[] = "--json";
	char *argv[] = {a0, path, a2, NULL};
	cmd_validate(&ctx, 3, argv);
	unlink(path);
	return 0;
}
