/* twin profile — placeholder until its issue lands. */
#include <stdio.h>

#include "cli.h"

int cmd_profile(const struct cli_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	fprintf(stderr, "twin profile: not available in this build yet\n");
	return 2;
}
