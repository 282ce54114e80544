/* Options shared by the subcommands, and printing helpers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

const char cli_job_opts_help[] =
	"  -m, --model MODEL       model preset (examples/models) or path (ours or HF config.json)\n"
	"  -c, --cluster CLUSTER   cluster preset (topologies/) or path\n"
	"      --gpus N            GPUs the job uses (whole nodes, or fewer on one node)\n"
	"      --ds-config FILE    DeepSpeed ds_config.json\n"
	"  -s, --strategy S        strategy preset (examples/strategies) or path\n"
	"      --set PATH=VALUE    override a cluster or strategy field (repeatable), e.g.\n"
	"                          net.nic_gbps=100, gpu.memory_gib=96, zero_optimization.stage=3,\n"
	"                          nccl_algo=Ring (NCCL_ALGO), net.plugin_latency_us=35 (AWS EFA)\n"
	"      --json              machine-readable output\n";

int cli_fail(const struct tw_err *err)
{
	fprintf(stderr, "twin: %s\n", err->msg[0] ? err->msg : tw_strresult(err->code));
	return tw_exit_status(err->code);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "twin %s: ", cmd);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 2;
}

bool cli_is_opt(const char *arg, const char *name)
{
	size_t n = strlen(name);
	return !strncmp(arg, name, n) && (arg[n] == '\0' || (arg[n] == '=' && name[1] == '-'));
}

const char *cli_value(int argc, char **argv, int *i, const char *opt, struct tw_err *err)
{
	const char *a = argv[*i];
	size_t n = strlen(opt);
	const char *v = NULL;
	if (a[n] == '=')
		v = a + n + 1;
	else if (*i + 1 < argc)
		v = argv[++*i];
	if (!v || !v[0]) {
		/* an empty value names nothing (an empty --db would open a throwaway database) */
		tw_errf(err, TW_ERR_USAGE, "option %s needs a value", opt);
		return NULL;
	}
	return v;
}

bool cli_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	if (!strcmp(a, b))
		return true;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

enum tw_result cli_parse_int(const char *opt, const char *s, int64_t min, int64_t max,
			     int64_t *out, struct tw_err *err)
{
	char *end = NULL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno == ERANGE)
		return tw_errf(err, TW_ERR_USAGE, "%s %s: must be an integer", opt, s);
	if (v < min || v > max)
		return tw_errf(err, TW_ERR_USAGE, "%s %s: must be in [%lld, %lld]", opt, s,
			       (long long)min, (long long)max);
	*out = v;
	return TW_OK;
}

bool cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return true;
	return false;
}

void cli_job_opts_init(struct cli_job_opts *o, const struct cli_ctx *ctx)
{
	memset(o, 0, sizeof(*o));
	o->in.data_dir = ctx->data_dir;
	o->in.sets = o->sets;
}

int cli_job_opt(struct cli_job_opts *o, int argc, char **argv, int *i, struct tw_err *err)
{
	const char *a = argv[*i];
	const char *v;
#define VALUE(optname)                                                                             \
	do {                                                                                       \
		v = cli_value(argc, argv, i, optname, err);                                        \
		if (!v)                                                                            \
			return -1;                                                                 \
	} while (0)
	if (!strcmp(a, "-m") || cli_is_opt(a, "--model")) {
		VALUE(a[1] == '-' ? "--model" : "-m");
		o->in.model = v;
	} else if (!strcmp(a, "-c") || cli_is_opt(a, "--cluster")) {
		VALUE(a[1] == '-' ? "--cluster" : "-c");
		o->in.cluster = v;
	} else if (!strcmp(a, "-s") || cli_is_opt(a, "--strategy")) {
		VALUE(a[1] == '-' ? "--strategy" : "-s");
		o->in.strategy = v;
	} else if (cli_is_opt(a, "--ds-config")) {
		VALUE("--ds-config");
		o->in.ds_config = v;
	} else if (cli_is_opt(a, "--gpus")) {
		VALUE("--gpus");
		if (cli_parse_int("--gpus", v, 1, 1000000, &o->in.gpus, err) != TW_OK)
			return -1;
	} else if (cli_is_opt(a, "--set")) {
		VALUE("--set");
		if (o->in.nsets >= CLI_MAX_SETS) {
			tw_errf(err, TW_ERR_USAGE, "--set: at most %d overrides", CLI_MAX_SETS);
			return -1;
		}
		if (!strchr(v, '=')) {
			tw_errf(err, TW_ERR_USAGE, "--set %s: expected PATH=VALUE", v);
			return -1;
		}
		o->sets[o->in.nsets++] = v;
	} else if (!strcmp(a, "--json")) {
		o->json = true;
	} else {
		return 0;
	}
	return 1;
#undef VALUE
}

void cli_straggler_str(const struct cluster_straggler *g, char *buf, size_t len)
{
	snprintf(buf, len, "%s %d: compute x%.2f, %s links x%.2f", g->by_node ? "node" : "GPU",
		 g->index, g->compute_scale, cluster_links_name(g->links),
		 g->link_scale);
}

/* Whether the user's --set gives path (PATH=...) */
static bool sets_path(const struct cli_job_opts *o, const char *path)
{
	size_t n = strlen(path);
	for (int i = 0; i < o->in.nsets; i++)
		if (!strncmp(o->sets[i], path, n) && o->sets[i][n] == '=')
			return true;
	return false;
}

void cli_set_notes(const struct cli_job_opts *o)
{
	if (o->in.quiet)
		return;
	for (int i = 0; i < o->in.nsets; i++) {
		const char *v = o->sets[i];
		const char *fig = cluster_descriptive(v);
		const char *part = cluster_partial(v);
		if (fig && sets_path(o, fig))
			continue; /* set beside the field it describes, as it must be */
		if (fig) /* accepted and kept, but a what-if on it alone changes nothing */
			fprintf(stderr, "twin: note: --set %.*s: no prediction reads this field; "
					"its effect comes from %s\n", (int)strcspn(v, "="), v, fig);
		else if (part) /* read, but not for what a what-if on it suggests */
			fprintf(stderr, "twin: note: --set %.*s: %s\n", (int)strcspn(v, "="), v, part);
	}
}

enum tw_result cli_job_load(struct cli_job_opts *o, const char *cmd, struct job *out,
			    struct tw_err *err)
{
	if (!o->in.model)
		return tw_errf(err, TW_ERR_USAGE, "%s: -m MODEL is required", cmd);
	if (!o->in.cluster)
		return tw_errf(err, TW_ERR_USAGE, "%s: -c CLUSTER is required", cmd);
	TW_CHECK(job_load(&o->in, out, err));
	cli_set_notes(o); /* after the sets are known good: a refusal stays one line */
	return TW_OK;
}

void cli_print_json(struct cJSON *obj)
{
	char *s = cJSON_Print(obj);
	if (s) {
		fputs(s, stdout);
		fputc('\n', stdout);
		free(s);
	}
	cJSON_Delete(obj);
}
