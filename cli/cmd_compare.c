/* twin compare — placeholder until its issue lands. */
#include <stdio.h>

#include "cli.h"

int cmd_compare(const struct cli_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	fprintf(stderr, "twin compare: not available in this build yet\n");
	return 2;
}
