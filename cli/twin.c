/* twin — main and the table of subcommands. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

struct cli_cmd {
	const char *name;
	cli_fn fn;
	const char *summary;
};

static const struct cli_cmd commands[] = {
	{"model", cmd_model, "show a model: parameters by component, FLOPs per token"},
	{"topo", cmd_topo, "show a cluster: GPUs, memory, peak rates, links"},
	{"config", cmd_config, "show the resolved strategy with where each value came from"},
	{"memory", cmd_memory, "peak memory per rank with its breakdown: does it fit?"},
	{"simulate", cmd_simulate, "predict step time, breakdown and peak memory"},
	{"validate", cmd_validate, "predicted vs published measurements"},
	{"plan", cmd_plan, "search parallel configurations that fit and are fast"},
	{"sweep", cmd_sweep, "simulate over values of up to four fields (their cross product)"},
	{"run", cmd_run, "execute the plan on GPUs (cuda) or CPU ranks (host) and trace it"},
	{"profile", cmd_profile, "import, analyze, export and merge traces"},
	{"runs", cmd_runs, "list the runs in the store"},
	{"compare", cmd_compare, "compare two runs category by category"},
	{"report", cmd_report, "write a report directory with charts"},
	{"calibrate", cmd_calibrate, "measure this machine and write a cluster file"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: twin [--version] [--help] SUBCOMMAND [OPTIONS]\n\n"
		   "twin is a digital twin of distributed large-model training.\n\nSubcommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'twin SUBCOMMAND --help' describes one. MODEL, CLUSTER and STRATEGY are a preset\n"
		   "name or a path. TWIN_HOME points at the data (examples/, topologies/).\n");
}

static void version(void)
{
	const char *f = TWIN_FEATURES;
	printf("twin %s\nfeatures: core sim profile%s%s\n", TW_VERSION, *f ? " " : "", f);
#ifndef TWIN_HAVE_CUDA
	printf("missing: cuda (install the CUDA toolkit with NCCL and cuBLAS at CUDA_HOME, then rebuild)\n");
#endif
#ifndef TWIN_HAVE_CUPTI
	printf("missing: cupti (libtwinprof.so needs CUPTI under CUPTI_HOME)\n");
#endif
#ifndef TWIN_HAVE_MPI
	printf("missing: mpi (apt-get install libopenmpi-dev openmpi-bin, then rebuild)\n");
#endif
#ifndef TWIN_HAVE_BLAS
	printf("missing: blas (apt-get install libopenblas-dev, then rebuild)\n");
#endif
}

/* The data directory: $TWIN_HOME, else the directory above build/ that holds this binary,
 * else the source directory it was built from. */
static const char *data_dir(char *buf, size_t len)
{
	const char *env = getenv("TWIN_HOME");
	if (env && *env)
		return env;
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		/* build/twin or build/san/twin */
		for (int up = 0; up < 3; up++) {
			char *slash = strrchr(exe, '/');
			if (!slash)
				break;
			*slash = '\0';
			char probe[PATH_MAX + 16];
			snprintf(probe, sizeof(probe), "%s/topologies", exe);
			if (access(probe, R_OK) == 0) {
				snprintf(buf, len, "%s", exe);
				return buf;
			}
		}
	}
	return TWIN_SOURCE_DIR;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		version();
		return 0;
	}
	char dir[PATH_MAX];
	struct cli_ctx ctx = {.data_dir = data_dir(dir, sizeof(dir)),
			      .log_level = tw_log_level_from_env()};
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(cmd, commands[i].name))
			return commands[i].fn(&ctx, argc - 1, argv + 1);
	if (cmd[0] == '-')
		fprintf(stderr, "twin: unknown option '%s' (see twin --help)\n", cmd);
	else
		fprintf(stderr, "twin: unknown subcommand '%s' (see twin --help)\n", cmd);
	return 2;
}
