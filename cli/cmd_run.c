/* twin run — placeholder until its issue lands. */
#include <stdio.h>

#include "cli.h"

int cmd_run(const struct cli_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	fprintf(stderr, "twin run: not available in this build yet\n");
	return 2;
}
