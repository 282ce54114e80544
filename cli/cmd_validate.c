/* twin validate — predict every case of a twin-validation/1 file (validation/README.md) and
 * compare with the measurement: per case, predicted vs measured and the relative error; per
 * metric and source, the count, MAPE and worst case. Predictions come from the models and the
 * case's inputs alone (no lookup by id, no per-case constants). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../profile/profile.h"
#include "../sim/sim.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: twin validate CASES.json [--json] [--only ID-PREFIX] [--max-events N]\n"
		   "                    [--keep DIR] [--set PATH=VALUE]...\n"
		   "\n"
		   "Predict every case of a validation file (twin-validation/1, described in\n"
		   "docs/simulator.md) and compare with the measurement: per case the\n"
		   "metrics, predicted vs measured and the error (predicted - measured) / measured;\n"
		   "then per metric and source the count, MAPE and worst case, and per metric over\n"
		   "all sources the same with the count of cases off by more than 25%%, and a\n"
		   "training line over TFLOP/s per GPU, iteration time and tokens/s together and a\n"
		   "bus_bandwidth line over every busbw_* figure (text only; --json keeps the\n"
		   "README's per-source summary). Cases the models cannot express are listed as\n"
		   "skipped with the reason; what a case left out and twin assumed (--json\n"
		   "\"assumed\") includes: a collective without a size runs at 16 GiB, and one\n"
		   "measured with ml-engineering's all_reduce_bench.py adds the blocking call's\n"
		   "host dispatch (one framework op, 20 us) to NCCL's time; NCCL_ALGO= and\n"
		   "NCCL_PROTO= in a case's text, else the published profile of a fabric it names\n"
		   "(TCPXO: Ring,Tree and Simple), restrict NCCL as the run did. A field of another\n"
		   "type or range than the README's skips its case, named.\n"
		   "Figures a case gives beside the README's metrics are predicted under the\n"
		   "condition their key states and reported as metrics of their own:\n"
		   "busbw_nvls_off_GBps and busbw_non_sharp_GBps (NVLS off), busbw_ring_forced_GBps\n"
		   "and busbw_nvlstree_forced_GBps (NCCL_ALGO), busbw_1node_GBps (one node's GPUs);\n"
		   "a memory case's first-stage activations, model states and peak in Korthikanti\n"
		   "et al.'s configurations (activations_gib_*, params_plus_optimizer_gib,\n"
		   "total_gib_baseline_no_recompute, rel_act_mem_pct_* of the TP baseline).\n"
		   "\n"
		   "  --json               one JSON object (the README's shape)\n"
		   "  --only PREFIX        only the cases whose id starts with PREFIX\n"
		   "  --max-events N       per-case simulation bound (default: the simulator's)\n"
		   "  --keep DIR           write each training case's inputs to DIR (created if\n"
		   "                       missing): ID.model.json, ID.strategy.json and ID.sh,\n"
		   "                       the twin simulate command that predicts the case\n"
		   "  --set PATH=VALUE     a cluster field for every case, after the case's own\n"
		   "                       (repeatable): how a calibrated efficiency or a network\n"
		   "                       figure moves the errors, e.g. --set eff.comm_overlap_slowdown=1.2\n");
}

#define MAX_METRICS 12
#define MAX_ASSUMED 12 /* what a case left out and twin took, one line each */
struct metric {
	char name[48]; /* the measured key: a README metric or a collector's extra */
	double predicted, measured, error;
};

struct vcase {
	const char *id, *source;
	char skipped[640];
	char assumed[MAX_ASSUMED][160];
	int nassumed;
	char why[160]; /* the first figure it could not predict, and why ("" while none) */
	struct metric m[MAX_METRICS];
	int nm;
};

static void assume(struct vcase *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void assume(struct vcase *c, const char *fmt, ...)
{
	if (c->nassumed >= MAX_ASSUMED)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->assumed[c->nassumed++], sizeof(c->assumed[0]), fmt, ap);
	va_end(ap);
}

/* A measured figure twin does not predict: listed with what a case left out, the first one
 * kept as the reason should the case end with no metric */
static void unpredicted(struct vcase *c, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void unpredicted(struct vcase *c, const char *key, const char *fmt, ...)
{
	char r[128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r, sizeof(r), fmt, ap);
	va_end(ap);
	assume(c, "%s not predicted: %s", key, r);
	if (!c->why[0])
		snprintf(c->why, sizeof(c->why), "%s not predicted: %s", key, r);
}

static void add_metric(struct vcase *c, const char *name, double pred, double meas)
{
	if (c->nm >= MAX_METRICS || !(meas != 0) || !isfinite(pred) || !isfinite((pred - meas) / meas))
		return;
	struct metric *m = &c->m[c->nm++];
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->predicted = pred;
	m->measured = meas;
	m->error = (pred - meas) / meas;
}

static const cJSON *field(const cJSON *o, const char *k)
{
	const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
	return v && !cJSON_IsNull(v) ? v : NULL;
}
static bool num(const cJSON *o, const char *k, double *out)
{
	const cJSON *v = field(o, k);
	if (!v || !cJSON_IsNumber(v))
		return false;
	*out = v->valuedouble;
	return true;
}
static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = field(o, k);
	return v && cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The README's types of the case fields twin reads (null is always allowed: not given). A
 * value of another type would otherwise be read as not given and its default used silently. */
enum ftype { F_NUM, F_STR, F_BOOL, F_OBJ };
static const struct ftyped {
	const char *obj, *key;
	enum ftype t;
} case_types[] = {
	{ "model", "preset", F_STR }, { "model", "layers", F_NUM }, { "model", "hidden", F_NUM },
	{ "model", "heads", F_NUM }, { "model", "kv_heads", F_NUM }, { "model", "ffn_hidden", F_NUM },
	{ "model", "vocab", F_NUM }, { "model", "seq_len", F_NUM }, { "model", "activation", F_STR },
	{ "model", "params_b", F_NUM }, { "model", "moe", F_OBJ },
	{ "cluster", "topology", F_STR }, { "cluster", "gpus", F_NUM }, { "cluster", "set", F_OBJ },
	{ "strategy", "framework", F_STR }, { "strategy", "precision", F_STR },
	{ "strategy", "tp", F_NUM }, { "strategy", "pp", F_NUM }, { "strategy", "dp", F_NUM },
	{ "strategy", "cp", F_NUM }, { "strategy", "ep", F_NUM }, { "strategy", "vp", F_NUM },
	{ "strategy", "zero_stage", F_NUM }, { "strategy", "distributed_optimizer", F_BOOL },
	{ "strategy", "micro_batch", F_NUM }, { "strategy", "global_batch", F_NUM },
	{ "strategy", "recompute", F_STR }, { "strategy", "sequence_parallel", F_BOOL },
	{ "strategy", "offload", F_STR },
	{ "collective", "op", F_STR }, { "collective", "bytes", F_NUM },
	{ "collective", "ranks", F_NUM }, { "collective", "algo", F_STR },
};

/* false, with the case's skip reason, when a field has another type than the README's, or a
 * value outside what it names (activation, zero_stage, integers where counts are meant) */
static bool case_fields_ok(const cJSON *cs, struct vcase *vc)
{
	static const char *const tname[] = { "a finite number", "a string", "true or false", "an object" };
	for (size_t i = 0; i < sizeof(case_types) / sizeof(case_types[0]); i++) {
		const struct ftyped *f = &case_types[i];
		const cJSON *o = field(cs, f->obj), *v = field(o, f->key);
		if (o && !cJSON_IsObject(o)) {
			snprintf(vc->skipped, sizeof(vc->skipped), "%s: must be an object", f->obj);
			return false;
		}
		if (!v)
			continue;
		bool ok = f->t == F_NUM    ? cJSON_IsNumber(v) && isfinite(v->valuedouble)
			  : f->t == F_STR  ? cJSON_IsString(v)
			  : f->t == F_BOOL ? cJSON_IsBool(v)
					   : cJSON_IsObject(v);
		if (!ok) {
			snprintf(vc->skipped, sizeof(vc->skipped), "%s.%s: must be %s", f->obj, f->key,
				 tname[f->t]);
			return false;
		}
	}
	const char *act = str(field(cs, "model"), "activation");
	if (act && strcasecmp(act, "gelu") && strcasecmp(act, "swiglu")) {
		snprintf(vc->skipped, sizeof(vc->skipped), "model.activation=%s: must be gelu or swiglu", act);
		return false;
	}
	const cJSON *st = field(cs, "strategy");
	double z;
	if (num(st, "zero_stage", &z) && !(z == 0 || z == 1 || z == 2 || z == 3)) {
		snprintf(vc->skipped, sizeof(vc->skipped), "strategy.zero_stage=%g: must be 0, 1, 2 or 3", z);
		return false;
	}
	/* optimizer offload is DeepSpeed's (ZeRO-Offload): under another framework it would be
	 * read as nothing */
	const char *off = str(st, "offload"), *fw = str(st, "framework");
	if (off && strcasecmp(off, "none") && fw && strcasecmp(fw, "deepspeed") &&
	    strcasecmp(fw, "megatron-deepspeed")) {
		snprintf(vc->skipped, sizeof(vc->skipped),
			 "strategy.offload=%s: modelled with framework deepspeed (framework %s)", off, fw);
		return false;
	}
	/* the parallel degrees and batch sizes are whole numbers from 1 */
	static const char *const counts[] = { "tp", "pp", "dp", "cp", "ep", "vp", "micro_batch", "global_batch" };
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		double d;
		if (num(st, counts[i], &d) && !(d >= 1 && d <= 1e12 && d == floor(d))) {
			snprintf(vc->skipped, sizeof(vc->skipped), "strategy.%s=%g: must be a whole number >= 1",
				 counts[i], d);
			return false;
		}
	}
	/* the data-parallel size a case states must be what its GPUs leave (tp x pp x cp x dp) */
	double g, tp = 1, pp = 1, cp = 1, dp;
	if (num(st, "dp", &dp) && num(field(cs, "cluster"), "gpus", &g)) {
		num(st, "tp", &tp);
		num(st, "pp", &pp);
		num(st, "cp", &cp);
		if (tp * pp * cp * dp != g) {
			snprintf(vc->skipped, sizeof(vc->skipped),
				 "strategy.dp=%g: tp x pp x cp x dp = %g, not cluster.gpus=%g", dp,
				 tp * pp * cp * dp, g);
			return false;
		}
	}
	return true;
}

/* What every case runs with: the command line's options. */
struct vrun {
	const struct cli_ctx *ctx;
	int64_t max_events;
	const char *keep;
	const char *const *sets; /* --set: cluster fields, applied after each case's own */
	int nsets;
};

/* Whether the case's text (notes or source) says a or b: the overlap knobs of Megatron-Core
 * (--overlap-grad-reduce, --overlap-param-gather; Megatron's default is off), AWS's fabric. */
static bool case_mentions(const cJSON *cs, const char *a, const char *b)
{
	const char *t[2] = { str(cs, "notes"), str(cs, "source") };
	for (int i = 0; i < 2; i++)
		if (t[i] && (strstr(t[i], a) || (b && strstr(t[i], b))))
			return true;
	return false;
}

/* NCCL's environment as a case's text states it ("NCCL_ALGO=Ring", "NCCL_ALGO='Tree,Ring'"):
 * the value into out (cap bytes), without quotes, trailing commas or a following variable
 * ("NCCL_ALGO=Tree,NCCL_PROTO=LL128" is Tree). 1 found, 0 not, -1 longer than cap. */
static int case_nccl_env(const cJSON *cs, const char *var, char *out, size_t cap)
{
	const char *t[2] = { str(cs, "notes"), str(cs, "source") };
	size_t vl = strlen(var);
	for (int i = 0; i < 2; i++)
		for (const char *p = t[i] ? strstr(t[i], var) : NULL; p; p = strstr(p + 1, var)) {
			const char *v = p + vl;
			if (*v != '=' || (p > t[i] && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
				continue;
			v++;
			if (*v == '"' || *v == '\'')
				v++;
			size_t n = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789,^");
			if (v[n] == '_') /* ran into the next variable's name: back to its comma */
				while (n > 0 && v[n - 1] != ',')
					n--;
			while (n > 0 && v[n - 1] == ',')
				n--;
			if (n == 0)
				continue;
			if (n >= cap)
				return -1;
			memcpy(out, v, n);
			out[n] = 0;
			return 1;
		}
	return 0;
}

/* Whether the case's text names w as a word of its own (not inside a longer name: "TCPXO",
 * not "XTCPXOY"; "all_reduce_bench" and "all_reduce_bench.py", not "all_reduce_benchmark") */
static bool case_mentions_word(const cJSON *cs, const char *w)
{
	const char *t[2] = { str(cs, "notes"), str(cs, "source") };
	size_t n = strlen(w);
	for (int i = 0; i < 2; i++)
		for (const char *p = t[i] ? strstr(t[i], w) : NULL; p; p = strstr(p + 1, w)) {
			bool before = p == t[i] || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
			bool after = !(isalnum((unsigned char)p[n]) || p[n] == '_');
			if (before && after)
				return true;
		}
	return false;
}

/* The NCCL environment a fabric's published set-up exports, for a case whose text names the
 * fabric. Google's GPUDirect-TCPXO (A3 Mega): the FasTrak plugin's set-up sources
 * nccl-env-profile.sh, which exports NCCL_ALGO=Ring,Tree and NCCL_PROTO=Simple (and
 * NCCL_BUFFSIZE=8 MiB, NCCL_MIN_NCHANNELS=4, p2p chunk sizes and a tuner plugin's config, which
 * twin has no fields for). */
static const struct fabric_env {
	const char *word; /* as the case's text writes it */
	const char *vars[2]; /* NCCL_ALGO, NCCL_PROTO */
	const char *what;
} fabric_envs[] = {
	{ "TCPXO", { "Ring,Tree", "Simple" }, "Google's GPUDirect-TCPXO profile, nccl-env-profile.sh" },
};
static const char *const nccl_vars[2][2] = { { "NCCL_ALGO", "nccl_algo" }, { "NCCL_PROTO", "nccl_proto" } };

/* NCCL_ALGO (i 0) or NCCL_PROTO (i 1) as the case ran: its text's own setting, else the profile
 * of a fabric its text names; 1 found (from: where it came from), 0 neither (NCCL's default),
 * -1 the text's value is longer than cap */
static int case_nccl_var(const cJSON *cs, int i, char *out, size_t cap, char *from, size_t flen)
{
	int got = case_nccl_env(cs, nccl_vars[i][0], out, cap);
	if (got != 0) {
		snprintf(from, flen, "the case's %s", nccl_vars[i][0]);
		return got;
	}
	for (size_t k = 0; k < sizeof(fabric_envs) / sizeof(fabric_envs[0]); k++)
		if (case_mentions_word(cs, fabric_envs[k].word)) {
			snprintf(out, cap, "%s", fabric_envs[k].vars[i]);
			snprintf(from, flen, "%s: the case names %s", fabric_envs[k].what, fabric_envs[k].word);
			return 1;
		}
	return 0;
}

/* The latency AWS's EFA plugin for NCCL (aws-ofi-nccl, src/platform-aws.cpp at 2daf7d3)
 * reports to NCCL by instance family, µs: NCCL adds it to every inter-node step of its model.
 * p3dn 150; p4d, p4de, p5, p5e 75; p5en and every family from p6 on 35 (its "p-series" rule). */
static double aws_family_latency(const char *fam)
{
	static const struct {
		const char *fam;
		double us;
	} known[] = { { "p3dn", 150 }, { "p4d", 75 }, { "p4de", 75 }, { "p5", 75 }, { "p5e", 75 }, { "p5en", 35 } };
	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		if (!strcmp(fam, known[k].fam))
			return known[k].us;
	return fam[1] >= '6' ? 35 : -1;
}

/* The net plugin latency of the first AWS instance type a case's text names, its family
 * (lower case) in fam; -1 if it names none (InfiniBand's 0 stays). A family is "p", one digit
 * 3-9 and letters, where a word starts and ends: "p6-b200.48xlarge", "p5en", "P5.48xlarge". A
 * bare one ("p5", "p4d", not "p4d.24xlarge") counts only where the text says AWS, EC2 or EFA,
 * so that a "P6" elsewhere is not read as an instance. */
static double case_plugin_latency(const cJSON *cs, char fam[8])
{
	const char *t[2] = { str(cs, "notes"), str(cs, "source") };
	bool aws = case_mentions(cs, "AWS", "EC2") || case_mentions(cs, "EFA", NULL);
	for (int i = 0; i < 2; i++)
		for (const char *p = t[i]; p && *p; p++) {
			if ((*p != 'p' && *p != 'P') || (p > t[i] && isalnum((unsigned char)p[-1])) ||
			    p[1] < '3' || p[1] > '9')
				continue;
			size_t n = 2;
			while (n < 6 && isalpha((unsigned char)p[n]))
				n++;
			if (isalnum((unsigned char)p[n]))
				continue; /* "P100", "p5enx": not a family */
			bool sized = p[n] == '.' || p[n] == '-'; /* p5.48xlarge, p6-b200 */
			if (!sized && !aws)
				continue;
			for (size_t k = 0; k < n; k++)
				fam[k] = (char)tolower((unsigned char)p[k]);
			fam[n] = 0;
			double us = aws_family_latency(fam);
			if (us >= 0)
				return us;
		}
	return -1;
}

/* Whether the case's cluster.set or the command line sets path */
static bool sets_path(const struct vrun *vr, const cJSON *set, const char *path)
{
	if (set && cJSON_IsObject(set) && cJSON_GetObjectItemCaseSensitive(set, path))
		return true;
	size_t n = strlen(path);
	for (int i = 0; i < vr->nsets; i++)
		if (!strncmp(vr->sets[i], path, n) && vr->sets[i][n] == '=')
			return true;
	return false;
}

#define CASE_SETS 16
/* "path=value" strings: the net plugin latency of an AWS instance the case's text names,
 * the case's cluster.set object, then the command line's --set (later ones win) */
static int cluster_sets(const struct vrun *vr, const cJSON *cs, struct vcase *vc, char bufs[][160],
			const char **sets)
{
	const cJSON *cl = field(cs, "cluster"), *set = field(cl, "set"), *e;
	int n = 0;
	char fam[8];
	double plat = case_plugin_latency(cs, fam);
	if (plat >= 0 && !sets_path(vr, set, "net.plugin_latency_us")) {
		snprintf(bufs[n], 160, "net.plugin_latency_us=%g", plat);
		sets[n] = bufs[n];
		n++;
		assume(vc, "net.plugin_latency_us=%g (aws-ofi-nccl's figure for the %s named in the case)",
		       plat, fam);
	}
	if (set && cJSON_IsObject(set)) {
		cJSON_ArrayForEach(e, set)
		{
			if (n >= CASE_SETS)
				break;
			char *v = cJSON_PrintUnformatted(e);
			snprintf(bufs[n], 160, "%s=%s", e->string, v);
			free(v);
			sets[n] = bufs[n];
			n++;
		}
	}
	for (int i = 0; i < vr->nsets; i++)
		sets[n++] = vr->sets[i];
	return n;
}

/* ---- collective cases ---- */

/* A GPU or rank count from a case: a whole number within what --gpus takes (converting
 * anything else to an integer would be undefined). */
#define VALIDATE_MAX_GPUS 1000000
/* 16 GiB: nccl-tests' usual -e 16G and all_reduce_bench.py's largest payload */
#define VALIDATE_LARGE_BYTES 17179869184.0
static bool whole_gpus(double v)
{
	return v >= 1 && v <= VALIDATE_MAX_GPUS && v == floor(v);
}

/* A collective's name as sources write it ("allreduce", "AllReduce", nccl-tests'
 * "all_reduce_perf", "send_recv") as the simulator's (all_reduce ...); unknown names pass
 * through for sim_collective to refuse with its list. */
/* s lower-cased without "_", "-" and spaces, into out (cap bytes); its length */
static size_t squash(const char *s, char *out, size_t cap)
{
	size_t n = 0;
	for (; *s && n + 1 < cap; s++)
		if (*s != '_' && *s != '-' && *s != ' ')
			out[n++] = (char)tolower((unsigned char)*s);
	out[n] = 0;
	return n;
}

static const char *canon_op(const char *op)
{
	static const char *const names[] = { "all_reduce", "all_gather", "reduce_scatter",
					     "all_to_all", "broadcast", "reduce", "sendrecv" };
	char a[64], b[32];
	size_t n = squash(op, a, sizeof(a));
	if (n > 4 && !strcmp(a + n - 4, "perf"))
		a[n - 4] = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (squash(names[i], b, sizeof(b)) && !strcmp(a, b))
			return names[i];
	return op;
}

/* Figures a collective case may carry beside busbw_GBps (the collector's keys, the
 * validation README leaves the measured object open): the same call under a stated
 * condition, predicted under that condition and reported as a metric of its own. */
struct coll_extra {
	const char *key;
	const char *algo;     /* NCCL_ALGO the measurement forced; NULL: the tuner's choice */
	bool nvls_off;        /* NCCL_NVLS_ENABLE=0 (NVLink SHARP is NVLS) */
	bool one_node;        /* the same payload on one node's GPUs */
};
static const struct coll_extra coll_extras[] = {
	{ "busbw_nvls_off_GBps", NULL, true, false },
	{ "busbw_non_sharp_GBps", NULL, true, false },
	{ "busbw_ring_forced_GBps", "ring", false, false },
	{ "busbw_nvlstree_forced_GBps", "nvlstree", false, false },
	{ "busbw_1node_GBps", NULL, false, true },
};

/* A measured figure: false when the key is absent, or present but not a positive number
 * (then named in the case's assumed list) */
static bool extra_value(const cJSON *me, const char *key, struct vcase *vc, double *out)
{
	const cJSON *v = field(me, key);
	if (!v)
		return false;
	/* a normal positive number: 1e999 reads as infinity, and 1e-320 would make the error so */
	if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isnormal(v->valuedouble)) {
		unpredicted(vc, key, "the measured value is not a positive number");
		return false;
	}
	*out = v->valuedouble;
	return true;
}

static void run_collective(const struct vrun *vr, const cJSON *cs, struct vcase *vc)
{
	const cJSON *cl = field(cs, "cluster"), *co = field(cs, "collective"), *me = field(cs, "measured");
	double meas, bytes, ranks;
	const char *op = str(co, "op"), *topo = str(cl, "topology"), *algo = str(co, "algo");
	if (!co || !op || !topo) {
		snprintf(vc->skipped, sizeof(vc->skipped), "collective case without collective.op or cluster.topology");
		return;
	}
	bool has_main = extra_value(me, "busbw_GBps", vc, &meas), has_extra = false;
	for (size_t i = 0; i < sizeof(coll_extras) / sizeof(coll_extras[0]); i++)
		has_extra |= field(me, coll_extras[i].key) != NULL;
	if (!has_main && !has_extra) {
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", vc->why[0] ? vc->why : "no measured busbw_GBps");
		return;
	}
	const cJSON *by = field(co, "bytes"); /* NULL: absent or null */
	if (by && !num(co, "bytes", &bytes)) {
		snprintf(vc->skipped, sizeof(vc->skipped), "collective.bytes: must be a number (bytes)");
		return;
	}
	if (!by) {
		/* a bus bandwidth quoted without a size is the large-message figure (a GPU's or
		 * fabric's "all-reduce GB/s"): the largest size nccl-tests and all_reduce_bench.py
		 * sweep to, where latency and fill are under 1% */
		bytes = VALIDATE_LARGE_BYTES;
		assume(vc, "collective.bytes=%g GiB (not given: a busbw quoted alone is the large-message one)",
		       bytes / (double)TW_GIB);
	}
	if (!num(co, "ranks", &ranks) && !num(cl, "gpus", &ranks)) {
		snprintf(vc->skipped, sizeof(vc->skipped), "collective.ranks not given");
		return;
	}
	if (!whole_gpus(ranks)) {
		snprintf(vc->skipped, sizeof(vc->skipped),
			 "collective.ranks=%g: not a whole number in 1 .. %d", ranks, VALIDATE_MAX_GPUS);
		return;
	}
	double cg;
	if (num(cl, "gpus", &cg) && ranks > cg) {
		snprintf(vc->skipped, sizeof(vc->skipped),
			 "collective.ranks=%g: more than the case's cluster.gpus=%g", ranks, cg);
		return;
	}
	char bufs[CASE_SETS][160];
	const char *sets[CASE_SETS + CLI_MAX_SETS];
	int ns = cluster_sets(vr, cs, vc, bufs, sets);
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/topologies", vr->ctx->data_dir);
	struct cluster c;
	struct tw_err err = { 0 };
	if (cluster_load(topo, dir, sets, ns, &c, &err) != TW_OK) {
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", err.msg);
		return;
	}
	/* ml-engineering's all_reduce_bench.py times each call alone: barrier, start event, one
	 * blocking torch.distributed call, end event, on a GPU left idle by the barrier, so the
	 * window also holds the call's host dispatch, one framework op; nccl-tests launches its
	 * iterations back to back, which hides it */
	bool blocking = case_mentions_word(cs, "all_reduce_bench");
	double host_us = blocking ? STRAT_HOST_OP_US : 0;
	struct sim_nccl_env env = { 0 };
	for (int i = 0; i < 2; i++) {
		char v[64], from[160], why[192];
		int got = case_nccl_var(cs, i, v, sizeof(v), from, sizeof(from));
		if (got < 0) {
			assume(vc, "the case's %s is longer than %zu characters: not read", nccl_vars[i][0],
			       sizeof(v) - 1);
		} else if (got > 0 &&
			   !strat_nccl_list(v, i == 1, i ? &env.no_protos : &env.no_algos,
					    i ? &env.named_protos : &env.named_algos, why, sizeof(why))) {
			snprintf(vc->skipped, sizeof(vc->skipped), "%s=%s (%s): %s", nccl_vars[i][0], v,
				 from, why);
			return;
		} else if (got > 0) {
			assume(vc, "%s=%s (%s)", nccl_vars[i][0], v, from);
		}
	}
	struct sim_coll_result r;
	if (sim_collective(&c, canon_op(op), bytes, (int64_t)ranks, algo, host_us, &env, &r, &err) != TW_OK) {
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", err.msg);
		return;
	}
	if (!algo && has_main)
		assume(vc, "collective.algo=%s/%s (NCCL's tuner choice)", r.algo, r.proto);
	else if (algo && strcasecmp(algo, r.algo))
		assume(vc, "collective.algo=%s cannot run this call in the model: %s/%s, the tuner's "
		       "choice", algo, r.algo, r.proto);
	if (blocking)
		assume(vc, "harness all_reduce_bench.py: one blocking call, %.1f us of NCCL + %g us host dispatch",
		       r.nccl_us, host_us);
	if (has_main)
		add_metric(vc, "busbw_GBps", r.busbw_GBps, meas);

	for (size_t i = 0; i < sizeof(coll_extras) / sizeof(coll_extras[0]); i++) {
		const struct coll_extra *x = &coll_extras[i];
		double xm;
		if (!extra_value(me, x->key, vc, &xm))
			continue;
		/* the case's own algorithm stays unless the condition replaces it (NVLS off
		 * leaves the tuner to choose among the rest, or keeps a ring or tree the case
		 * names) */
		const char *xa = x->algo ? x->algo : algo;
		if (x->nvls_off && xa && !strncasecmp(xa, "nvls", 4))
			xa = NULL;
		struct cluster xc = c;
		if (x->nvls_off) /* no in-switch reduction, and so no NVLS bandwidth */
			xc.node.nvls = false, xc.node.nvls_GBps = 0;
		memset(&err, 0, sizeof(err));
		if (sim_collective(&xc, canon_op(op), bytes, x->one_node ? xc.node.gpus : (int64_t)ranks, xa,
				   host_us, &env, &r, &err) != TW_OK) {
			unpredicted(vc, x->key, "%s", err.msg);
			continue;
		}
		/* a forced algorithm that cannot run here: NCCL refuses the call, so there is no
		 * figure to predict (sim_collective falls back to the tuner for a case's algo) */
		if (x->algo && strcmp(r.algo, x->algo)) {
			unpredicted(vc, x->key, "%s cannot run here", x->algo);
			continue;
		}
		add_metric(vc, x->key, r.busbw_GBps, xm);
	}
}

/* ---- training cases ---- */

static char *write_temp(const cJSON *o, struct tw_err *err)
{
	const char *tmp = getenv("TMPDIR");
	char *path = tw_malloc(1100);
	snprintf(path, 1100, "%s/twin-validate-XXXXXX.json", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemps(path, 5);
	if (fd < 0) {
		tw_errf(err, TW_ERR_SYSTEM, "%s: cannot create a temporary file", path);
		free(path);
		return NULL;
	}
	char *text = cJSON_PrintUnformatted(o);
	size_t n = strlen(text);
	bool ok = write(fd, text, n) == (ssize_t)n;
	close(fd);
	free(text);
	if (!ok) {
		unlink(path);
		free(path);
		tw_errf(err, TW_ERR_SYSTEM, "cannot write a temporary file");
		return NULL;
	}
	return path;
}

/* every path in msg (cap bytes) replaced by name */
static void unpath(char *msg, size_t cap, const char *path, const char *name)
{
	if (!path || !path[0])
		return;
	char out[1024];
	size_t n = 0, pl = strlen(path), nl = strlen(name);
	for (const char *p = msg; *p && n + 1 < sizeof(out);) {
		if (!strncmp(p, path, pl) && n + nl + 1 < sizeof(out)) {
			memcpy(out + n, name, nl);
			n += nl;
			p += pl;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
	size_t m = n < cap - 1 ? n : cap - 1;
	memcpy(msg, out, m);
	msg[m] = '\0';
}

static cJSON *model_json(const cJSON *m, struct vcase *vc)
{
	cJSON *o = cJSON_CreateObject();
	static const char *const ints[] = { "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len" };
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		double v;
		if (num(m, ints[i], &v))
			cJSON_AddNumberToObject(o, ints[i], v);
	}
	double ffn, hidden;
	if (!num(m, "ffn_hidden", &ffn) && num(m, "hidden", &hidden)) {
		cJSON_AddNumberToObject(o, "ffn_hidden", 4 * hidden);
		assume(vc, "model.ffn_hidden=4*hidden (GPT default)");
	}
	double vocab;
	if (!num(m, "vocab", &vocab)) {
		vocab = 51200; /* Megatron's GPT-2 vocabulary padded to a multiple of 128 x tp */
		assume(vc, "model.vocab=51200 (Megatron GPT default)");
	}
	cJSON_AddNumberToObject(o, "vocab", vocab);
	const char *act = str(m, "activation");
	bool swiglu = act && !strcasecmp(act, "swiglu");
	cJSON_AddStringToObject(o, "name", "case");
	cJSON_AddStringToObject(o, "family", swiglu ? "llama" : "gpt");
	cJSON_AddStringToObject(o, "activation", swiglu ? "swiglu" : "gelu");
	cJSON_AddStringToObject(o, "norm", swiglu ? "rmsnorm" : "layernorm");
	cJSON_AddStringToObject(o, "position", swiglu ? "rope" : "learned");
	if (!swiglu) {
		double s;
		if (num(m, "seq_len", &s))
			cJSON_AddNumberToObject(o, "max_position", s);
	}
	cJSON_AddBoolToObject(o, "tied_embeddings", !swiglu);
	cJSON_AddBoolToObject(o, "biases", !swiglu);
	return o;
}

/* Whether the words just before p (in text t) or just after it deny it: "no flash
 * attention", "without FlashAttention", "flash attention off". */
static bool denied(const char *t, const char *p)
{
	static const char *const before[] = { "no ", "not ", "without ", "w/o ", "non-" };
	static const char *const after[] = { " off", ": off", " disabled", ": false", "=false",
					      " not used", " was not", " is not" };
	size_t back = (size_t)(p - t) < 12 ? (size_t)(p - t) : 12;
	char pre[16];
	for (size_t i = 0; i < back; i++)
		pre[i] = (char)tolower((unsigned char)p[(ptrdiff_t)i - (ptrdiff_t)back]);
	pre[back] = 0;
	for (size_t i = 0; i < sizeof(before) / sizeof(before[0]); i++) {
		const char *q = strstr(pre, before[i]);
		if (q && (q == pre || !isalpha((unsigned char)q[-1])))
			return true;
	}
	const char *w = p;
	while (*w && (isalnum((unsigned char)*w) || *w == '-' || *w == '_'))
		w++; /* the rest of the word ("flash-attn", "FlashAttention-2") */
	if (!strncmp(w, " attention", 10))
		w += 10;
	for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++)
		if (!strncmp(w, after[i], strlen(after[i])))
			return true;
	return false;
}

/* Whether the measured run used fused (flash) attention: the format has no field for it, so
 * read the case's own text: 1 it says so, -1 it says it did not, 0 it does not say; runs that
 * predate FlashAttention (2022) used Megatron's unfused softmax, which keeps the s x s scores
 * in HBM. */
static int case_flash(const cJSON *cs)
{
	static const char *const says[] = { "flash", "Flash", "FLASH", "Transformer Engine",
					    "Megatron-Core", "megatroncore" };
	const char *t[3] = { str(cs, "notes"), str(cs, "source"), str(cs, "id") };
	bool yes = false;
	for (int i = 0; i < 3; i++)
		for (size_t k = 0; t[i] && k < sizeof(says) / sizeof(says[0]); k++)
			for (const char *p = strstr(t[i], says[k]); p; p = strstr(p + 1, says[k])) {
				if (k < 3 && denied(t[i], p))
					return -1;
				yes = true;
			}
	return yes ? 1 : 0;
}

/* The month (yymm) of the arXiv paper a case's source cites ("arXiv 2104.04473": April 2021);
 * 0 if it cites none. */
static int case_arxiv_yymm(const cJSON *cs)
{
	const char *src = str(cs, "source"), *a = src ? strstr(src, "arXiv ") : NULL;
	if (!a || strlen(a) < 11 || a[10] != '.')
		return 0;
	int yymm = 0;
	for (int i = 6; i < 10; i++) {
		if (!isdigit((unsigned char)a[i]))
			return 0;
		yymm = yymm * 10 + (a[i] - '0');
	}
	return yymm % 100 >= 1 && yymm % 100 <= 12 ? yymm : 0; /* a month, or no date */
}

/* The latest month (yymm) a case's run can date from: its arXiv paper's, else the first date
 * its source gives ("commit 50a4b5fa, 2021-04-08"; a bare year "2020" counts as its December).
 * 0: no date. */
static int case_yymm(const cJSON *cs)
{
	int yymm = case_arxiv_yymm(cs);
	const char *src = str(cs, "source");
	for (const char *p = src; !yymm && p && *p; p++) {
		if (p[0] != '2' || p[1] != '0' || !isdigit((unsigned char)p[2]) ||
		    !isdigit((unsigned char)p[3]) || (p > src && isalnum((unsigned char)p[-1])) ||
		    isalnum((unsigned char)p[4]))
			continue;
		int yy = (p[2] - '0') * 10 + (p[3] - '0'), mm = 12;
		if (p[4] == '-' && isdigit((unsigned char)p[5]) && isdigit((unsigned char)p[6]))
			mm = (p[5] - '0') * 10 + (p[6] - '0');
		if (mm >= 1 && mm <= 12)
			yymm = yy * 100 + mm;
	}
	return yymm;
}

/* The DeepSpeed release a case ran: the cases do not say, so take the newest release out
 * before the month of the arXiv paper the source cites ("arXiv 2104.04473": April 2021).
 * Release dates from DeepSpeed's git tags; only releases whose behaviour the models tell
 * apart matter (docs/strategy.md, "Version-dependent"). NULL: no arXiv id in the source. */
static const char *case_deepspeed_version(const cJSON *cs, int *yymm)
{
	static const struct { int yymm; const char *v; } rel[] = {
		{ 2009, "0.3.0" },  { 2101, "0.3.10" }, { 2103, "0.3.13" }, { 2104, "0.3.14" },
		{ 2106, "0.4.0" },  { 2108, "0.5.0" },  { 2111, "0.5.5" },  { 2201, "0.5.10" },
		{ 2203, "0.6.0" },  { 2207, "0.7.0" },  { 2301, "0.8.0" },  { 2304, "0.9.0" },
		{ 2307, "0.10.0" }, { 2311, "0.12.0" }, { 2312, "0.12.6" }, { 2403, "0.14.0" },
		{ 2411, "0.16.0" },
		{ 2506, "0.17.0" }, { 2510, "0.18.0" }, { 2605, "0.19.0" }, { 2607, "0.19.3" },
		{ 2608, "0.19.5" } };
	*yymm = case_arxiv_yymm(cs);
	const char *v = NULL;
	for (size_t i = 0; *yymm && i < sizeof(rel) / sizeof(rel[0]); i++)
		if (rel[i].yymm < *yymm) /* out before the paper's month began */
			v = rel[i].v;
	/* a paper from before the oldest release twin tells apart: that release */
	return *yymm && !v ? rel[0].v : v;
}

/* Megatron-LM's async TP all-reduce of the input grads (async_tensor_model_parallel_allreduce)
 * landed in 2021-09 (git history); a run dated before October 2021 ran without it. */
#define MEGATRON_ASYNC_TP_YYMM 2109
/* Megatron-LM overlaps the interleaved schedule's p2p by default since 2023-10 (an opt-in flag
 * from 2023-05); a run dated before November 2023 batched and waited for it */
#define MEGATRON_OVERLAP_P2P_YYMM 2310
/* Megatron-LM's scatter-gather of stage-boundary tensors was on by default from 2021-02-16
 * (commit 72e4230) until its p2p code moved into Megatron-Core without it (2023-01-31): a run
 * dated after February 2021 and by January 2023 split them over TP */
#define MEGATRON_SCATTER_GATHER_FROM_YYMM 2102
#define MEGATRON_SCATTER_GATHER_TO_YYMM 2301

static cJSON *strategy_json(const cJSON *cs, const cJSON *s, const cJSON *m, bool moe,
			    struct vcase *vc)
{
	cJSON *o = cJSON_CreateObject();
	for (int i = 0; i < 2; i++) {
		char v[64], from[160];
		int got = case_nccl_var(cs, i, v, sizeof(v), from, sizeof(from));
		if (got > 0) {
			cJSON_AddStringToObject(o, nccl_vars[i][1], v);
			assume(vc, "strategy.%s=%s (%s)", nccl_vars[i][1], v, from);
		} else if (got < 0) {
			assume(vc, "the case's %s is longer than %zu characters: not read", nccl_vars[i][0],
			       sizeof(v) - 1);
		}
	}
	int flash = case_flash(cs);
	cJSON_AddBoolToObject(o, "flash_attention", flash > 0);
	if (flash <= 0)
		assume(vc, "strategy.flash_attention=false (%s)",
		       flash < 0 ? "the case says it ran without" : "the case does not mention fused attention");
	const char *fw = str(s, "framework");
	if (!fw)
		fw = "megatron";
	/* the frameworks by other names: NeMo and Megatron-Core run Megatron's code,
	 * Megatron-DeepSpeed DeepSpeed's engine (with Megatron's model code under tp or pp),
	 * torchtitan FSDP2 */
	static const struct { const char *alias, *fw; int fsdp_version; } alias[] = {
		{ "nemo", "megatron", 0 }, { "megatron-core", "megatron", 0 }, { "mcore", "megatron", 0 },
		{ "megatron-lm", "megatron", 0 }, { "megatron-deepspeed", "deepspeed", 0 },
		{ "torchtitan", "fsdp", 2 }, { "fsdp2", "fsdp", 2 } };
	const char *given = fw;
	for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++)
		if (!strcasecmp(given, alias[i].alias)) {
			fw = alias[i].fw;
			assume(vc, "strategy.framework=%s (%s runs its code)", fw, given);
			if (alias[i].fsdp_version)
				cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "fsdp"), "version",
							alias[i].fsdp_version);
			break;
		}
	cJSON_AddStringToObject(o, "framework", fw);
	int yymm = 0;
	const char *dsv = !strcmp(fw, "deepspeed") ? case_deepspeed_version(cs, &yymm) : NULL;
	if (dsv) {
		cJSON_AddStringToObject(o, "deepspeed_version", dsv);
		assume(vc, "strategy.deepspeed_version=%s (the release out before the source's "
		       "arXiv month %04d)", dsv, yymm);
	}
	if (!strcmp(fw, "megatron")) {
		yymm = case_yymm(cs);
		if (yymm && yymm < MEGATRON_ASYNC_TP_YYMM) {
			cJSON_AddBoolToObject(o, "async_tensor_model_parallel_allreduce", false);
			assume(vc, "strategy.async_tensor_model_parallel_allreduce=false (the source "
			       "dates from 20%02d-%02d, before Megatron-LM had it)", yymm / 100,
			       yymm % 100);
		}
		double tpd = 1, ppd = 1;
		if (yymm > MEGATRON_SCATTER_GATHER_FROM_YYMM && yymm <= MEGATRON_SCATTER_GATHER_TO_YYMM &&
		    num(s, "tp", &tpd) && tpd > 1 && num(s, "pp", &ppd) && ppd > 1 &&
		    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "sequence_parallel"))) {
			cJSON_AddBoolToObject(o, "scatter_gather_tensors_in_pipeline", true);
			assume(vc, "strategy.scatter_gather_tensors_in_pipeline=true (the source dates "
			       "from 20%02d-%02d, when Megatron-LM split pipeline sends over TP by "
			       "default)", yymm / 100, yymm % 100);
		}
		bool distopt = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "distributed_optimizer"));
		double zs = 0;
		distopt = distopt || (num(s, "zero_stage", &zs) && zs >= 1);
		if (case_mentions(cs, "overlap-grad-reduce", "grad-reduce/param-gather overlap")) {
			cJSON_AddBoolToObject(o, "overlap_grad_reduce", true);
			assume(vc, "strategy.overlap_grad_reduce=true (the case says so)");
		}
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "sequence_parallel")) &&
		    case_mentions(cs, "tp-comm-overlap", "TP comm overlap")) {
			cJSON_AddBoolToObject(o, "tp_comm_overlap", true);
			assume(vc, "strategy.tp_comm_overlap=true (the case says so)");
		}
		if (distopt && case_mentions(cs, "overlap-param-gather", "param-gather overlap")) {
			cJSON_AddBoolToObject(o, "overlap_param_gather", true);
			assume(vc, "strategy.overlap_param_gather=true (the case says so)");
		}
		/* MoE: Megatron-LM's MoE example scripts and Megatron-Bridge's model providers run
		 * the local experts as grouped GEMMs and fuse the token permutation, and Bridge's
		 * performance recipes the router (Megatron-Core defaults to none); a case that says
		 * otherwise keeps the default */
		if (moe) {
			if (!case_mentions(cs, "SequentialMLP", "moe_grouped_gemm=false")) {
				cJSON_AddBoolToObject(o, "moe_grouped_gemm", true);
				assume(vc, "strategy.moe_grouped_gemm=true (Megatron's MoE scripts and "
					   "recipes pass it)");
			}
			if (!case_mentions(cs, "moe_permute_fusion=false", "permute fusion off")) {
				cJSON_AddBoolToObject(o, "moe_permute_fusion", true);
				assume(vc, "strategy.moe_permute_fusion=true (Megatron's MoE scripts and "
					   "recipes pass it)");
			}
			if (!case_mentions(cs, "moe_router_fusion=false", "router fusion off")) {
				cJSON_AddBoolToObject(o, "moe_router_fusion", true);
				assume(vc, "strategy.moe_router_fusion=true (Megatron-Bridge's "
					   "performance recipes pass it)");
			}
		}
	}
	static const char *const ints[] = { "tp", "pp", "cp", "ep", "micro_batch", "global_batch" };
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		double v;
		if (num(s, ints[i], &v))
			cJSON_AddNumberToObject(o, ints[i], v);
		else if (!strcmp(ints[i], "micro_batch")) {
			/* Megatron-LM has no default (it asserts --micro-batch-size is set); 1 is
			 * what its example and paper scripts pass for pipelined GPT runs. DeepSpeed
			 * would fold the whole batch into one micro-batch, which no pipeline run does */
			cJSON_AddNumberToObject(o, "micro_batch", 1);
			assume(vc, "strategy.micro_batch=1 (not given; Megatron-LM requires it and its "
				   "example scripts pass 1)");
		} else if (!strcmp(ints[i], "global_batch")) {
			assume(vc, "strategy.global_batch not given: the framework's default (one "
				   "micro-batch per data-parallel rank)");
		}
	}
	double vp = 1, seq;
	if (num(s, "vp", &vp) && vp > 1) {
		cJSON_AddNumberToObject(o, "vp", vp);
		cJSON_AddStringToObject(o, "schedule", "interleaved");
		if (!strcmp(fw, "megatron") && yymm && yymm <= MEGATRON_OVERLAP_P2P_YYMM) {
			cJSON_AddBoolToObject(o, "overlap_p2p_comm", false);
			assume(vc, "strategy.overlap_p2p_comm=false (the source dates from "
			       "20%02d-%02d, before Megatron-LM overlapped it by default)",
			       yymm / 100, yymm % 100);
		}
	} else if (!strcmp(fw, "megatron")) {
		cJSON_AddStringToObject(o, "schedule", "1f1b");
	}
	if (num(m, "seq_len", &seq))
		cJSON_AddNumberToObject(o, "seq_len", seq);
	/* Megatron needs equal stages unless the first and the last are set apart (Llama 3's
	 * 405B took a layer off each of its 16): a case whose layers pp does not divide gets
	 * ceil(layers / pp) on each middle stage and the rest split between the two ends */
	double nl, npp;
	if (!strcmp(fw, "megatron") && vp <= 1 && num(m, "layers", &nl) && num(s, "pp", &npp) &&
	    npp >= 2 && nl >= npp && fmod(nl, npp) != 0) {
		int64_t l = (int64_t)nl, p = (int64_t)npp, mid = (l + p - 1) / p, r = l - (p - 2) * mid;
		if (r >= 2) {
			cJSON_AddNumberToObject(o, "first_stage_layers", (double)(r / 2));
			cJSON_AddNumberToObject(o, "last_stage_layers", (double)(r - r / 2));
			assume(vc, "strategy.first_stage_layers=%" PRId64 ", last_stage_layers=%" PRId64
			       " (pp=%" PRId64 " does not divide %" PRId64 " layers; the middle stages "
			       "hold %" PRId64 " each)", r / 2, r - r / 2, p, l, mid);
		}
	}
	const char *rc = str(s, "recompute");
	if (rc)
		cJSON_AddStringToObject(o, "recompute", rc);
	else
		assume(vc, "strategy.recompute=none (default)");
	const cJSON *sp = field(s, "sequence_parallel");
	if (sp && cJSON_IsBool(sp))
		cJSON_AddBoolToObject(o, "sequence_parallel", cJSON_IsTrue(sp));
	const char *prec = str(s, "precision");
	if (!prec)
		assume(vc, "strategy.precision not given: the framework's default");
	if (prec && strcmp(prec, "fp8") != 0)
		cJSON_AddStringToObject(o, "precision", prec);
	else if (prec)
		cJSON_AddStringToObject(o, "precision", "bf16"), cJSON_AddBoolToObject(o, "fp8", true);
	double zs = 0;
	num(s, "zero_stage", &zs);
	const cJSON *dopt = field(s, "distributed_optimizer");
	bool distopt = dopt && cJSON_IsTrue(dopt);
	const char *off = str(s, "offload");
	if (!strcmp(fw, "megatron")) {
		if (distopt || zs >= 1)
			cJSON_AddBoolToObject(o, "distributed_optimizer", true);
	} else if (!strcmp(fw, "fsdp") && (zs == 1 || zs == 2)) {
		/* FSDP's SHARD_GRAD_OP is ZeRO-2; 3 is its default FULL_SHARD, and 0 is what the
		 * format's template says for "not ZeRO", not a sign of NO_SHARD */
		cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "fsdp");
		if (!f)
			f = cJSON_AddObjectToObject(o, "fsdp");
		cJSON_AddStringToObject(f, "sharding_strategy", "SHARD_GRAD_OP");
		assume(vc, "strategy.fsdp.sharding_strategy=SHARD_GRAD_OP (zero_stage %g)", zs);
	} else if (!strcmp(fw, "deepspeed")) {
		cJSON *ds = cJSON_AddObjectToObject(o, "ds_config");
		cJSON *zo = cJSON_AddObjectToObject(ds, "zero_optimization");
		cJSON_AddNumberToObject(zo, "stage", zs);
		if (off && strcmp(off, "none") != 0) {
			cJSON *oo = cJSON_AddObjectToObject(zo, "offload_optimizer");
			cJSON_AddStringToObject(oo, "device", off);
		}
		if (prec && !strcmp(prec, "bf16"))
			cJSON_AddBoolToObject(cJSON_AddObjectToObject(ds, "bf16"), "enabled", true);
		else
			cJSON_AddBoolToObject(cJSON_AddObjectToObject(ds, "fp16"), "enabled", true);
	}
	return o;
}

/* FLOPs of one iteration by Megatron's formula (Narayanan et al. SC'21 eq. 3):
 * passes x 24 B s l h^2 (1 + s/(6h) + V/(4 passes l h)) with passes 4 when the recompute
 * forward is counted, 3 otherwise (reference/cost-models.md §7.1). */
static double megatron_flops(double B, double s, double l, double h, double V, double passes)
{
	return passes * 24.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (4.0 * passes * l * h));
}

/* The FLOPs a source counts for one step of B sequences of s tokens: a GPT of the SC'21 shape
 * (GELU, 4h MLP, full multi-head attention, no experts) by Megatron's formula, which the papers
 * that report such runs use; any other shape (SwiGLU, GQA, another MLP width, MoE, MLA) by the
 * model's own count as the usual MFU formulas make it (PaLM's 6N + 12 l h s, torchtitan's,
 * Megatron-LM's num_floating_point_operations of 2024): 6 x the matmul weights a token goes
 * through (top-k of the experts), the whole s x s attention (causal not halved), the logits;
 * the recompute pass (passes 4) adds a forward of everything but the logits. */
static double source_flops(const struct model *m, double B, double s, double passes)
{
	bool gpt = m->act == MODEL_ACT_GELU && m->experts == 0 && m->ffn_hidden == 4 * m->hidden &&
		   (m->kv_heads == 0 || m->kv_heads == m->heads) &&
		   m->heads * m->head_dim == m->hidden && m->kv_lora_rank == 0;
	if (gpt)
		return megatron_flops(B, s, (double)m->layers, (double)m->hidden, (double)m->vocab,
				      passes);
	struct model_flops f;
	model_flops_fwd(m, (int64_t)s, &f);
	return B * s * (passes * (f.total - f.logits + f.attn_core) + 3.0 * f.logits);
}

/* The case's id as a file name: anything but letters, digits, '.', '-' and '_' becomes '_'. */
/* A file name for a case id: its safe characters, and where it had others (or was cut, or
 * starts with a dot) a hash of the whole id, so that two ids never share files */
static void file_stem(const char *id, char *out, size_t len)
{
	size_t i = 0;
	bool changed = id[0] == '.' || id[0] == '\0';
	for (; id[i] && i + 1 < len - 10; i++) {
		char c = id[i];
		bool ok = isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
		out[i] = ok ? c : '_';
		changed |= !ok;
	}
	changed |= id[i] != '\0';
	out[i] = '\0';
	if (changed) {
		uint32_t h = 2166136261u; /* FNV-1a */
		for (const char *p = id; *p; p++)
			h = (h ^ (unsigned char)*p) * 16777619u;
		snprintf(out + i, len - i, "-%08x", h);
	}
}

static bool write_text(const char *path, const char *text)
{
	struct tw_out o;
	struct tw_err err = { 0 };
	if (tw_out_open(&o, path, &err) != TW_OK)
		return false;
	bool ok = fputs(text, o.f) >= 0 && fputc('\n', o.f) != EOF;
	return tw_out_close(&o, path, ok, &err) == TW_OK && ok;
}

/* --keep: the case's model and strategy files and the twin simulate command that uses them,
 * so a case can be rerun, traced or varied by hand. A file that cannot be written is noted
 * among the case's assumptions, not fatal: the prediction does not depend on it. */
/* cmd (cap bytes) holding n, plus s; returns the new length, cap when it did not fit */
static size_t sh_append(char *cmd, size_t cap, size_t n, const char *s)
{
	size_t l = strlen(s);
	if (n >= cap || l >= cap - n)
		return cap;
	memcpy(cmd + n, s, l + 1);
	return n + l;
}

/* s as one single-quoted shell word ('it'\''s'), appended */
static size_t sh_quote(char *cmd, size_t cap, size_t n, const char *s)
{
	n = sh_append(cmd, cap, n, "'");
	for (const char *p = s; *p && n < cap; p++) {
		char c[2] = { *p, 0 };
		n = sh_append(cmd, cap, n, *p == '\'' ? "'\\''" : c);
	}
	return sh_append(cmd, cap, n, "'");
}

static void keep_case(const char *dir, const char *id, const cJSON *mj, const cJSON *sj,
		      const char *preset, const char *topo, double gpus, const char *const *sets,
		      int nsets, struct vcase *vc)
{
	char stem[200], mpath[1400], spath[1400], cpath[1400], cwd[1024] = "";
	file_stem(id, stem, sizeof(stem));
	/* the script runs from anywhere: its files by absolute path */
	if (dir[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	snprintf(mpath, sizeof(mpath), "%s%s%s/%s.model.json", cwd, cwd[0] ? "/" : "", dir, stem);
	snprintf(spath, sizeof(spath), "%s%s%s/%s.strategy.json", cwd, cwd[0] ? "/" : "", dir, stem);
	snprintf(cpath, sizeof(cpath), "%s/%s.sh", dir, stem);
	char *mt = mj ? cJSON_Print(mj) : NULL, *st = cJSON_Print(sj);
	bool ok = (!mt || write_text(mpath, mt)) && st && write_text(spath, st);
	free(mt);
	free(st);
	/* the command, with the paths as written (a preset model goes by its name). Every string
	 * from the case (its id, topology, preset, sets) is data to the shell: the id's comment
	 * keeps printable characters only, the arguments are single-quoted with their quotes
	 * escaped */
	char cmd[8192], safe_id[160];
	size_t k = 0;
	for (const char *p = id; *p && k + 1 < sizeof(safe_id); p++)
		safe_id[k++] = (unsigned char)*p >= 0x20 && *p != 0x7f ? *p : '?';
	safe_id[k] = '\0';
	size_t n = (size_t)snprintf(cmd, sizeof(cmd), "#!/bin/sh\n# twin validate case %s\n\"${TWIN:-twin}\" simulate -m ",
				    safe_id);
	n = sh_quote(cmd, sizeof(cmd), n, mj ? mpath : preset);
	n = sh_append(cmd, sizeof(cmd), n, " -c ");
	n = sh_quote(cmd, sizeof(cmd), n, topo);
	char g[48];
	snprintf(g, sizeof(g), " --gpus %.0f -s ", gpus);
	n = sh_append(cmd, sizeof(cmd), n, g);
	n = sh_quote(cmd, sizeof(cmd), n, spath);
	for (int i = 0; i < nsets; i++) {
		n = sh_append(cmd, sizeof(cmd), n, " --set ");
		n = sh_quote(cmd, sizeof(cmd), n, sets[i]);
	}
	n = sh_append(cmd, sizeof(cmd), n, " \"$@\"");
	ok = ok && n < sizeof(cmd) && write_text(cpath, cmd);
	if (!ok)
		assume(vc, "--keep: could not write %s/%s.*", dir, stem);
}

/* A case's model.moe into our model fields. The format leaves its keys open, so take the
 * names our model files, Megatron-Core's arguments and HF configs use for the same thing;
 * false (the case skipped, with the reason) when the experts or top-k are not there. */
static bool moe_json(const cJSON *moe, cJSON *o, struct vcase *vc)
{
	static const struct { const char *ours, *names[6]; } keys[] = {
		{ "experts", { "experts", "num_experts", "num_moe_experts", "num_local_experts",
			       "n_routed_experts", NULL } },
		{ "top_k", { "top_k", "topk", "router_topk", "moe_router_topk", "num_experts_per_tok",
			     NULL } },
		{ "expert_ffn_hidden", { "expert_ffn_hidden", "ffn_hidden", "moe_ffn_hidden_size",
					 "moe_intermediate_size", NULL } },
		{ "shared_experts", { "shared_experts", "n_shared_experts", "num_shared_experts", NULL } },
		{ "shared_ffn_hidden", { "shared_ffn_hidden", "moe_shared_expert_intermediate_size",
					 "shared_expert_intermediate_size", NULL } },
		{ "dense_layers", { "dense_layers", "first_k_dense_replace", NULL } },
		{ "moe_layer_freq", { "moe_layer_freq", "layer_freq", NULL } },
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		double v = 0;
		bool got = false;
		const char *gk = NULL;
		/* every name given must be a number and agree with the others (the first would
		 * win silently, a list such as Megatron's [1,0,1,...] layer pattern be dropped) */
		for (int k = 0; keys[i].names[k]; k++) {
			const cJSON *x = field(moe, keys[i].names[k]);
			if (!x)
				continue;
			if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) {
				snprintf(vc->skipped, sizeof(vc->skipped), "model.moe.%s: must be a finite "
					 "number%s", keys[i].names[k], i == 6 ? " (every k-th layer; a "
					 "per-layer list is not modelled)" : "");
				return false;
			}
			if (got && x->valuedouble != v) {
				snprintf(vc->skipped, sizeof(vc->skipped), "model.moe: %s=%g and %s=%g disagree",
					 gk, v, keys[i].names[k], x->valuedouble);
				return false;
			}
			if (!got)
				v = x->valuedouble, gk = keys[i].names[k];
			got = true;
		}
		if (got) {
			cJSON_AddNumberToObject(o, keys[i].ours, v);
		} else if (i < 2) {
			snprintf(vc->skipped, sizeof(vc->skipped), "model.moe gives no %s (keys taken: "
				 "%s, %s, %s, ...)", keys[i].ours, keys[i].names[0], keys[i].names[1],
				 keys[i].names[2]);
			return false;
		} else if (i == 2 && num(o, "ffn_hidden", &v)) {
			/* Mixtral's config: the FFN size is each expert's */
			cJSON_AddNumberToObject(o, "expert_ffn_hidden", v);
			assume(vc, "model.moe.expert_ffn_hidden=model.ffn_hidden");
		}
	}
	return true;
}

/* Figures a memory case may carry beside peak_mem_gib (the collector's keys, from Korthikanti
 * et al.'s Figures 1 and 7): the first pipeline stage's activations (with full recompute its
 * layer-input checkpoints), model states and peak in stated configurations, from the plan's
 * memory walk of rank 0. A percentage is of the TP baseline: no sequence parallelism, no
 * recompute, the case's strategy otherwise. */
enum mx_what { MX_ACT_GIB, MX_STATES_GIB, MX_PEAK_GIB, MX_ACT_PCT };
struct mem_extra {
	const char *key;
	bool sp;
	enum strat_recompute rc;
	enum mx_what what;
};
static const struct mem_extra mem_extras[] = {
	{ "params_plus_optimizer_gib", false, STRAT_RECOMPUTE_NONE, MX_STATES_GIB },
	{ "activations_gib_sp_selective", true, STRAT_RECOMPUTE_SELECTIVE, MX_ACT_GIB },
	{ "activations_gib_baseline_no_recompute", false, STRAT_RECOMPUTE_NONE, MX_ACT_GIB },
	{ "total_gib_baseline_no_recompute", false, STRAT_RECOMPUTE_NONE, MX_PEAK_GIB },
	{ "rel_act_mem_pct_seq", true, STRAT_RECOMPUTE_NONE, MX_ACT_PCT },
	{ "rel_act_mem_pct_sel", false, STRAT_RECOMPUTE_SELECTIVE, MX_ACT_PCT },
	{ "rel_act_mem_pct_seq_sel", true, STRAT_RECOMPUTE_SELECTIVE, MX_ACT_PCT },
	{ "rel_act_mem_pct_full_recompute", false, STRAT_RECOMPUTE_FULL, MX_ACT_PCT },
};
#define NUM_MEM_EXTRAS (sizeof(mem_extras) / sizeof(mem_extras[0]))

static bool has_mem_extra(const cJSON *me)
{
	for (size_t i = 0; i < NUM_MEM_EXTRAS; i++)
		if (field(me, mem_extras[i].key))
			return true;
	return false;
}

/* rank 0's memory walk with sequence parallelism and recompute as given (the rest of the
 * job's strategy kept); the strategy is restored */
static enum tw_result variant_mem(struct job *j, bool sp, enum strat_recompute rc, struct plan_mem *m,
				  struct tw_err *err)
{
	struct strategy keep = j->strat;
	j->strat.sequence_parallel = sp;
	j->strat.tp_comm_overlap &= sp; /* Megatron's TP overlap needs SP */
	j->strat.recompute = rc;
	j->strat.recompute_num_layers = 0;
	j->strat.recompute_modules = 0; /* the attention core, Korthikanti's selective */
	struct plan p;
	enum tw_result rv = plan_rank(j, 0, &p, err);
	if (rv == TW_OK) {
		rv = plan_memory(j, &p, m, err);
		plan_release(&p);
	}
	j->strat = keep;
	return rv;
}

static int64_t variant_act(const struct plan_mem *m, enum strat_recompute rc)
{
	return m->max_cat[PLAN_DEV_GPU][rc == STRAT_RECOMPUTE_FULL ? PLAN_MEM_CKPT : PLAN_MEM_ACTIV];
}

static void run_mem_extras(struct job *j, const cJSON *me, struct vcase *vc)
{
	struct plan_mem base, m;
	struct tw_err err = { 0 };
	bool have_base = false;
	for (size_t i = 0; i < NUM_MEM_EXTRAS; i++) {
		const struct mem_extra *x = &mem_extras[i];
		double meas;
		if (!extra_value(me, x->key, vc, &meas))
			continue;
		if (x->sp && (j->strat.tp < 2 || j->seq % j->strat.tp)) {
			unpredicted(vc, x->key, "sequence parallelism needs tp > 1 dividing seq_len");
			continue;
		}
		if (x->what == MX_ACT_PCT && !have_base) {
			if (variant_mem(j, false, STRAT_RECOMPUTE_NONE, &base, &err) != TW_OK) {
				unpredicted(vc, x->key, "%s", err.msg);
				continue;
			}
			have_base = true;
		}
		bool own = x->what == MX_STATES_GIB; /* states do not depend on SP or recompute */
		if (variant_mem(j, own ? j->strat.sequence_parallel : x->sp, own ? j->strat.recompute : x->rc,
				&m, &err) != TW_OK) {
			unpredicted(vc, x->key, "%s", err.msg);
			continue;
		}
		double pred = 0;
		switch (x->what) {
		case MX_ACT_GIB:
			pred = (double)variant_act(&m, x->rc) / (double)TW_GIB;
			break;
		case MX_STATES_GIB:
			pred = (double)m.states_peak[PLAN_DEV_GPU] / (double)TW_GIB;
			break;
		case MX_PEAK_GIB:
			pred = (double)m.peak[PLAN_DEV_GPU] / (double)TW_GIB;
			break;
		case MX_ACT_PCT: {
			int64_t b = variant_act(&base, STRAT_RECOMPUTE_NONE);
			if (b <= 0) {
				unpredicted(vc, x->key, "the baseline keeps no activations");
				continue;
			}
			pred = 100.0 * (double)variant_act(&m, x->rc) / (double)b;
			break;
		}
		}
		add_metric(vc, x->key, pred, meas);
	}
}

static void run_training(const struct vrun *vr, const cJSON *cs, struct vcase *vc,
			 bool memory_only)
{
	const struct cli_ctx *ctx = vr->ctx;
	int64_t max_events = vr->max_events;
	const char *keep = vr->keep;
	const cJSON *mo = field(cs, "model"), *cl = field(cs, "cluster"), *st = field(cs, "strategy"),
		    *me = field(cs, "measured");
	const char *notes = str(cs, "notes");
	struct tw_err err = { 0 };
	const cJSON *moe = field(mo, "moe");
	if (moe && !cJSON_IsObject(moe)) {
		snprintf(vc->skipped, sizeof(vc->skipped), "model.moe is not an object (experts, top_k, ...)");
		return;
	}
	const char *topo = str(cl, "topology");
	double gpus;
	if (!topo || !num(cl, "gpus", &gpus)) {
		snprintf(vc->skipped, sizeof(vc->skipped), "cluster.topology or cluster.gpus missing");
		return;
	}
	if (!whole_gpus(gpus)) {
		snprintf(vc->skipped, sizeof(vc->skipped),
			 "cluster.gpus=%g: not a whole number in 1 .. %d", gpus, VALIDATE_MAX_GPUS);
		return;
	}
	double t_meas = 0, tfl_meas = 0, mfu_meas = 0, tok_meas = 0, tokg_meas = 0, mem_meas = 0;
	bool has_t = extra_value(me, "iter_time_s", vc, &t_meas),
	     has_tfl = extra_value(me, "tflops_per_gpu", vc, &tfl_meas),
	     has_mfu = extra_value(me, "mfu", vc, &mfu_meas),
	     has_tok = extra_value(me, "tokens_per_s", vc, &tok_meas),
	     has_tokg = extra_value(me, "tokens_per_s_per_gpu", vc, &tokg_meas),
	     has_mem = extra_value(me, "peak_mem_gib", vc, &mem_meas);
	double pp = 1, gb;
	num(st, "pp", &pp);
	if (!memory_only && pp > 1 && !num(st, "global_batch", &gb)) {
		snprintf(vc->skipped, sizeof(vc->skipped), "strategy.global_batch not given: with pp=%g the pipeline bubble, hence the throughput, depends on it", pp);
		return;
	}
	if (memory_only && !has_mem && !has_mem_extra(me)) {
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", vc->why[0] ? vc->why : "no memory figure measured (peak_mem_gib, or activations or states in GiB or % of a baseline)");
		return;
	}
	if (!memory_only && !(has_t || has_tfl || has_mfu || has_tok || has_tokg)) {
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", vc->why[0] ? vc->why : "no throughput metric measured");
		return;
	}
	/* the job through the same loaders a user's files go through */
	char *mpath = NULL, *spath = NULL;
	/* the case's own shape when it gives one (a preset name may not be one of ours) */
	const char *preset = str(mo, "preset");
	double dummy;
	if (num(mo, "layers", &dummy) && num(mo, "hidden", &dummy) && num(mo, "heads", &dummy))
		preset = NULL;
	/* a MoE model: the case's own experts, or a preset with them */
	bool is_moe = cJSON_IsObject(moe);
	if (preset && !is_moe) {
		char dir[1024];
		snprintf(dir, sizeof(dir), "%s/examples/models", ctx->data_dir);
		struct model *pm = TW_NEW(struct model);
		struct tw_err perr;
		is_moe = model_load(preset, dir, pm, &perr) == TW_OK && model_is_moe(pm);
		free(pm);
	}
	cJSON *mj = NULL, *sj = strategy_json(cs, st, mo, is_moe, vc);
	if (!preset) {
		mj = model_json(mo, vc);
		if (moe && !moe_json(moe, mj, vc)) {
			cJSON_Delete(mj);
			cJSON_Delete(sj);
			return;
		}
		mpath = write_temp(mj, &err);
	}
	spath = write_temp(sj, &err);
	char bufs[CASE_SETS][160];
	const char *sets[CASE_SETS + CLI_MAX_SETS];
	int ns = cluster_sets(vr, cs, vc, bufs, sets);
	if (keep)
		keep_case(keep, vc->id, mj, sj, preset, topo, gpus, sets, ns, vc);
	cJSON_Delete(mj);
	cJSON_Delete(sj);
	struct job *j = TW_NEW(struct job);
	struct trace t;
	memset(&t, 0, sizeof(t));
	if ((!preset && !mpath) || !spath) {
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", err.msg);
		goto out;
	}
	struct job_inputs in = { .model = preset ? preset : mpath, .cluster = topo, .strategy = spath,
				 .sets = sets, .nsets = ns, .gpus = (int64_t)gpus, .data_dir = ctx->data_dir };
	if (job_load(&in, j, &err) != TW_OK) {
		/* the reason names the case's model and strategy, not their temporary files (whose
		 * random names would make two runs' --json differ) */
		unpath(err.msg, sizeof(err.msg), mpath, "the case's model");
		unpath(err.msg, sizeof(err.msg), spath, "the case's strategy");
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", err.msg);
		goto out;
	}
	if (j->strat.framework != STRAT_MEGATRON) /* the cases do not say which model code ran */
		assume(vc, "strategy.kernels=%s (%s default)",
		       strat_kernels_name(j->strat.kernels),
		       j->strat.framework == STRAT_FSDP ? "FSDP" : "DeepSpeed");
	if (memory_only && !has_mem) {
		run_mem_extras(j, me, vc);
		goto out;
	}
	struct sim_options so = { .max_events = max_events };
	struct sim_stats ss;
	if (sim_run(j, &so, &t, &ss, &err) != TW_OK) {
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", err.msg);
		goto out;
	}
	struct prof_analysis a;
	if (prof_analyze(&t, &a, &err) != TW_OK) {
		snprintf(vc->skipped, sizeof(vc->skipped), "%s", err.msg);
		goto out;
	}
	if (has_mem)
		add_metric(vc, "peak_mem_gib", (double)a.peak_mem_bytes / (double)TW_GIB, mem_meas);
	if (memory_only) {
		run_mem_extras(j, me, vc);
		goto out;
	}
	double step = (double)a.step_ns * 1e-9;
	if (has_t)
		add_metric(vc, "iter_time_s", step, t_meas);
	if (has_tok)
		add_metric(vc, "tokens_per_s", (double)j->tokens_per_step / step, tok_meas);
	if (has_tokg)
		add_metric(vc, "tokens_per_s_per_gpu", (double)j->tokens_per_step / step / (double)j->gpus, tokg_meas);
	if (has_tfl || has_mfu) {
		/* the source's own FLOP count: Megatron's formula, with the recompute forward pass
		 * when the notes say the count includes it */
		bool counts_recompute = j->strat.recompute == STRAT_RECOMPUTE_FULL && notes &&
					(strstr(notes, "recompute") || strstr(notes, "Eq.3") || strstr(notes, "96*"));
		double F = source_flops(&j->model, (double)j->strat.global_batch, (double)j->seq,
					counts_recompute ? 4.0 : 3.0);
		double tfl = F / (step * (double)j->gpus) * 1e-12;
		if (has_tfl)
			add_metric(vc, "tflops_per_gpu", tfl, tfl_meas);
		if (has_mfu) {
			double peak = j->cluster.gpu.peak_tflops[j->strat.param_dtype];
			if (peak <= 0)
				peak = j->cluster.gpu.peak_tflops[TW_FP16];
			if (peak > 0)
				add_metric(vc, "mfu", tfl / peak, mfu_meas);
		}
	}
out:
	trace_release(&t);
	free(j);
	if (mpath) {
		unlink(mpath);
		free(mpath);
	}
	if (spath) {
		unlink(spath);
		free(spath);
	}
}

/* ---- summary ---- */

struct group {
	char metric[48];
	const char *source;
	int64_t count, over;   /* over: cases off by more than 25% */
	double sum, worst;
	const char *worst_id;
};

/* one case's error into a group */
static void group_add(struct group *g, double error, const char *id)
{
	g->count++;
	g->over += fabs(error) > 0.25;
	g->sum += fabs(error);
	if (!g->worst_id || fabs(error) > fabs(g->worst)) {
		g->worst = error;
		g->worst_id = id;
	}
}

/* A summary line over several metrics together, naming them (text output) */
static void print_total(int w, const struct group *g, const char *metrics)
{
	if (g->count > 0)
		printf("%-*s %6" PRId64 " %7.1f%% %6" PRId64 " %+8.1f%%  %s  (%s)\n", w, g->metric,
		       g->count, 100 * g->sum / (double)g->count, g->over, 100 * g->worst, g->worst_id,
		       metrics);
}

/* per metric and source, or (by_source false) per metric over every source */
static int summarise(const struct vcase *cs, size_t n, bool by_source, struct group **out)
{
	struct group *g = NULL;
	size_t ng = 0, cap = 0;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < cs[i].nm; k++) {
			const struct metric *m = &cs[i].m[k];
			size_t x = 0;
			const char *src = by_source ? cs[i].source : "all sources";
			while (x < ng && (strcmp(g[x].metric, m->name) || strcmp(g[x].source, src)))
				x++;
			if (x == ng) {
				TW_GROW(g, cap, ng + 1);
				memset(&g[ng], 0, sizeof(g[ng]));
				snprintf(g[ng].metric, sizeof(g[ng].metric), "%s", m->name);
				g[ng].source = src;
				ng++;
			}
			group_add(&g[x], m->error, cs[i].id);
		}
	*out = g;
	return (int)ng;
}

/* The command line's --set must apply to every topology the selected cases name (paths and
 * values: a preset may lack a field another has, eff.attn_kernels' tables), checked before any
 * case runs. A topology that does not load on its own is the case's to report. */
static enum tw_result check_sets(const struct cli_ctx *ctx, const cJSON *cases, const char *only,
				 const char *const *sets, int nsets, struct tw_err *err)
{
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/topologies", ctx->data_dir);
	const cJSON *cs;
	const char *seen[32]; /* topologies checked already (a file names a handful) */
	int nseen = 0;
	cJSON_ArrayForEach(cs, cases)
	{
		const char *id = str(cs, "id"), *topo = str(field(cs, "cluster"), "topology");
		if (nsets == 0 || !topo || (only && id && strncmp(id, only, strlen(only)) != 0))
			continue;
		bool done = false;
		for (int i = 0; i < nseen && !done; i++)
			done = !strcmp(seen[i], topo);
		if (done)
			continue;
		if (nseen < 32)
			seen[nseen++] = topo;
		struct cluster c;
		struct tw_err e = { 0 };
		if (cluster_load(topo, dir, NULL, 0, &c, &e) != TW_OK)
			continue;
		if (cluster_load(topo, dir, sets, nsets, &c, &e) != TW_OK)
			return tw_errf(err, e.code, "--set on %s (case %s): %s", topo, id ? id : "?", e.msg);
	}
	return TW_OK;
}

int cmd_validate(const struct cli_ctx *ctx, int argc, char **argv)
{
	if (cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	const char *path = NULL, *only = NULL, *keep = NULL;
	const char *usets[CLI_MAX_SETS];
	int nusets = 0;
	bool json = false;
	int64_t max_events = 0;
	struct tw_err err = { 0 };
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (cli_is_opt(argv[i], "--set")) {
			const char *v = cli_value(argc, argv, &i, "--set", &err);
			if (!v)
				return cli_fail(&err);
			if (nusets >= CLI_MAX_SETS)
				return cli_usage_error("validate", "--set: at most %d overrides", CLI_MAX_SETS);
			if (!strchr(v, '='))
				return cli_usage_error("validate", "--set %s: expected PATH=VALUE", v);
			char p[128];
			snprintf(p, sizeof(p), "%.*s", (int)strcspn(v, "="), v);
			if (!cluster_owns_path(p))
				return cli_usage_error("validate", "--set %s: validate takes cluster fields "
						       "(gpu., node., net., eff.); the cases give the strategy", p);
			usets[nusets++] = v;
		} else if (cli_is_opt(argv[i], "--only")) {
			if (!(only = cli_value(argc, argv, &i, "--only", &err)))
				return cli_fail(&err);
		} else if (cli_is_opt(argv[i], "--max-events")) {
			const char *v = cli_value(argc, argv, &i, "--max-events", &err);
			if (!v || cli_parse_int("--max-events", v, 1, INT64_MAX, &max_events, &err) != TW_OK)
				return cli_fail(&err);
		} else if (cli_is_opt(argv[i], "--keep")) {
			if (!(keep = cli_value(argc, argv, &i, "--keep", &err)))
				return cli_fail(&err);
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return cli_usage_error("validate", "unknown option '%s' (see twin validate --help)", argv[i]);
		} else if (!path) {
			path = argv[i];
		} else {
			return cli_usage_error("validate", "one validation file, got '%s' too", argv[i]);
		}
	}
	if (!path)
		return cli_usage_error("validate", "missing the validation file (twin validate CASES.json)");
	struct vrun vr = { ctx, max_events, keep, usets, nusets };
	if (keep) {
		struct stat sb;
		if (mkdir(keep, 0777) != 0 && errno != EEXIST)
			return cli_fail((tw_errf(&err, TW_ERR_SYSTEM, "--keep %s: cannot create: %s", keep,
						 strerror(errno)), &err));
		if (stat(keep, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(keep, W_OK) != 0)
			return cli_fail((tw_errf(&err, TW_ERR_INVALID, "--keep %s: not a writable directory",
						 keep), &err));
	}
	cJSON *root = NULL;
	if (json_load_object(path, &root, &err) != TW_OK)
		return cli_fail(&err);
	const char *schema = str(root, "schema");
	const cJSON *cases = field(root, "cases");
	if (!schema || strcmp(schema, "twin-validation/1") != 0) {
		cJSON_Delete(root);
		tw_errf(&err, TW_ERR_INVALID, "%s: schema: must be \"twin-validation/1\"", path);
		return cli_fail(&err);
	}
	if (!cases || !cJSON_IsArray(cases)) {
		cJSON_Delete(root);
		tw_errf(&err, TW_ERR_INVALID, "%s: cases: must be an array", path);
		return cli_fail(&err);
	}
	if (check_sets(ctx, cases, only, usets, nusets, &err) != TW_OK) {
		cJSON_Delete(root);
		return cli_fail(&err);
	}
	/* training cases go through temporary files: a system that cannot make them fails the
	 * run (exit 1) instead of skipping every case */
	{
		cJSON *probe = cJSON_CreateObject();
		char *p = write_temp(probe, &err);
		cJSON_Delete(probe);
		if (!p) {
			cJSON_Delete(root);
			return cli_fail(&err);
		}
		unlink(p);
		free(p);
	}
	size_t n = (size_t)cJSON_GetArraySize(cases), nv = 0;
	struct vcase *vc = TW_NEW_ARRAY(struct vcase, n ? n : 1);
	const cJSON *cs;
	size_t idx = 0;
	cJSON_ArrayForEach(cs, cases)
	{
		const char *id = str(cs, "id");
		idx++;
		if (!cJSON_IsObject(cs) || !id) {
			free(vc);
			cJSON_Delete(root);
			tw_errf(&err, TW_ERR_INVALID, "%s: cases[%zu]: must be an object with a string \"id\"", path, idx - 1);
			return cli_fail(&err);
		}
		if (only && strncmp(id, only, strlen(only)) != 0)
			continue;
		struct vcase *v = &vc[nv++];
		v->id = id;
		v->source = str(cs, "source") ? str(cs, "source") : "";
		const char *kind = str(cs, "kind");
		/* a case id twice would count one measurement twice (and --keep overwrite it) */
		bool dup = false;
		for (size_t k = 0; k + 1 < nv && !dup; k++)
			dup = !strcmp(vc[k].id, id);
		if (!kind)
			snprintf(v->skipped, sizeof(v->skipped), "no kind");
		else if (dup)
			snprintf(v->skipped, sizeof(v->skipped), "id %s: a case of that id came before", id);
		else if (!case_fields_ok(cs, v))
			;
		else if (!strcmp(kind, "collective"))
			run_collective(&vr, cs, v);
		else if (!strcmp(kind, "training"))
			run_training(&vr, cs, v, false);
		else if (!strcmp(kind, "memory"))
			run_training(&vr, cs, v, true);
		else
			snprintf(v->skipped, sizeof(v->skipped), "unknown kind '%s'", kind);
		if (!v->skipped[0] && v->nm == 0)
			snprintf(v->skipped, sizeof(v->skipped), "%s",
				 v->why[0] ? v->why : "no measured metric the models predict");
	}
	struct group *g;
	int ng = summarise(vc, nv, true, &g);
	if (json) {
		cJSON *out = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(out, "cases");
		for (size_t i = 0; i < nv; i++) {
			cJSON *c = cJSON_CreateObject();
			cJSON_AddStringToObject(c, "id", vc[i].id);
			cJSON_AddStringToObject(c, "source", vc[i].source);
			if (vc[i].skipped[0])
				cJSON_AddStringToObject(c, "skipped", vc[i].skipped);
			else
				cJSON_AddNullToObject(c, "skipped");
			cJSON *as = cJSON_AddArrayToObject(c, "assumed");
			for (int k = 0; k < vc[i].nassumed; k++)
				cJSON_AddItemToArray(as, cJSON_CreateString(vc[i].assumed[k]));
			cJSON *ms = cJSON_AddArrayToObject(c, "metrics");
			for (int k = 0; k < vc[i].nm; k++) {
				cJSON *m = cJSON_CreateObject();
				cJSON_AddStringToObject(m, "name", vc[i].m[k].name);
				cJSON_AddNumberToObject(m, "predicted", vc[i].m[k].predicted);
				cJSON_AddNumberToObject(m, "measured", vc[i].m[k].measured);
				cJSON_AddNumberToObject(m, "error", vc[i].m[k].error);
				cJSON_AddItemToArray(ms, m);
			}
			cJSON_AddItemToArray(arr, c);
		}
		cJSON *sum = cJSON_AddArrayToObject(out, "summary");
		for (int k = 0; k < ng; k++) {
			cJSON *s = cJSON_CreateObject();
			cJSON_AddStringToObject(s, "metric", g[k].metric);
			cJSON_AddStringToObject(s, "source", g[k].source);
			cJSON_AddNumberToObject(s, "count", (double)g[k].count);
			cJSON_AddNumberToObject(s, "mape", g[k].sum / (double)g[k].count);
			cJSON_AddStringToObject(s, "worst_id", g[k].worst_id);
			cJSON_AddNumberToObject(s, "worst_error", g[k].worst);
			cJSON_AddItemToArray(sum, s);
		}
		cli_print_json(out);
	} else {
		size_t skipped = 0;
		int w = 16; /* the metric column: the longest name */
		for (int k = 0; k < ng; k++)
			if ((int)strlen(g[k].metric) > w)
				w = (int)strlen(g[k].metric);
		int wc = 48; /* the case column: the longest id */
		for (size_t i = 0; i < nv; i++)
			if ((int)strlen(vc[i].id) > wc)
				wc = (int)strlen(vc[i].id);
		printf("%-*s %-*s %12s %12s %8s\n", wc, "case", w, "metric", "predicted", "measured", "error");
		for (size_t i = 0; i < nv; i++) {
			if (vc[i].skipped[0]) {
				skipped++;
				continue;
			}
			for (int k = 0; k < vc[i].nm; k++)
				printf("%-*s %-*s %12.4g %12.4g %+7.1f%%\n", wc, vc[i].id, w, vc[i].m[k].name,
				       vc[i].m[k].predicted, vc[i].m[k].measured, 100 * vc[i].m[k].error);
		}
		if (skipped) {
			printf("\nskipped (%zu):\n", skipped);
			for (size_t i = 0; i < nv; i++)
				if (vc[i].skipped[0])
					printf("  %-46s %s\n", vc[i].id, vc[i].skipped);
		}
		printf("\n%-*s %6s %8s %9s  %-40s %s\n", w, "metric", "count", "MAPE", "worst", "worst case", "source");
		for (int k = 0; k < ng; k++)
			printf("%-*s %6" PRId64 " %7.1f%% %+8.1f%%  %-40s %.60s\n", w, g[k].metric, g[k].count,
			       100 * g[k].sum / (double)g[k].count, 100 * g[k].worst, g[k].worst_id, g[k].source);
		struct group *all = NULL;
		int na = summarise(vc, nv, false, &all);
		printf("\n%-*s %6s %8s %6s %9s  %s\n", w, "all sources", "count", "MAPE", ">25%", "worst",
		       "worst case");
		for (int k = 0; k < na; k++)
			printf("%-*s %6" PRId64 " %7.1f%% %6" PRId64 " %+8.1f%%  %s\n", w, all[k].metric,
			       all[k].count, 100 * all[k].sum / (double)all[k].count, all[k].over,
			       100 * all[k].worst, all[k].worst_id);
		free(all);
		/* training throughput: TFLOP/s per GPU, iteration time or tokens/s, whichever a case
		 * gives (mfu is TFLOP/s over the peak, so it is not counted twice) */
		struct group t = { .metric = "training" };
		for (size_t i = 0; i < nv; i++)
			for (int k = 0; k < vc[i].nm; k++) {
				const struct metric *m = &vc[i].m[k];
				if (!strcmp(m->name, "tflops_per_gpu") || !strcmp(m->name, "iter_time_s") ||
				    !strncmp(m->name, "tokens_per_s", 12))
					group_add(&t, m->error, vc[i].id);
			}
		/* collective bus bandwidth: every busbw figure, the plain one and those a case gives
		 * under a stated condition (NVLS off, NCCL_ALGO forced, one node) */
		struct group b = { .metric = "bus_bandwidth" };
		for (size_t i = 0; i < nv; i++)
			for (int k = 0; k < vc[i].nm; k++)
				if (!strncmp(vc[i].m[k].name, "busbw", 5))
					group_add(&b, vc[i].m[k].error, vc[i].id);
		print_total(w, &t, "tflops_per_gpu, iter_time_s, tokens_per_s[_per_gpu]");
		print_total(w, &b, "busbw_*");
	}
	free(g);
	free(vc);
	cJSON_Delete(root);
	return 0;
}
