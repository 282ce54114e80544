/* twin memory — placeholder until its issue lands. */
#include <stdio.h>

#include "cli.h"

int cmd_memory(const struct cli_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	fprintf(stderr, "twin memory: not available in this build yet\n");
	return 2;
}

int cli_memory_report(const struct job *j, bool json, struct tw_err *err)
{
	(void)j;
	(void)json;
	return tw_errf(err, TW_ERR_UNSUPPORTED, "memory report not built yet");
}
