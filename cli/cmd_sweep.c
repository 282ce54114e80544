/* twin sweep — placeholder until its issue lands. */
#include <stdio.h>

#include "cli.h"

int cmd_sweep(const struct cli_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	fprintf(stderr, "twin sweep: not available in this build yet\n");
	return 2;
}
