/* cluster — loading topologies/NAME.json into struct cluster (schema: docs/cluster.md).
 *
 * One table per section describes every scalar field (key, type, offset, range rule); the
 * same tables drive parsing (strict keys, required fields), validation and cluster_to_json,
 * so the three cannot disagree. Objects of numbers (peak_tflops, efficiency tables) and the
 * stragglers array are handled by hand. */
#include "cluster.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static const char *const fabric_names[] = {"infiniband", "roce", "ethernet", "none", NULL};
static const char *const topo_names[] = {"rail_fat_tree", "fat_tree", "single_switch", NULL};
static const char *const intra_names[] = {"nvswitch", "nvlink_mesh", "pcie", "host", NULL};
static const char *const cpu_names[] = {"intel", "amd", "arm", NULL};
static const char *const links_names[] = {"all", "nvlink", "nic", "pcie", NULL};

const char *cluster_fabric_name(enum cluster_fabric f)
{
	return (unsigned)f <= CLUSTER_FABRIC_NONE ? fabric_names[f] : "?";
}
const char *cluster_topo_name(enum cluster_netopo t)
{
	return (unsigned)t <= CLUSTER_TOPO_SINGLE_SWITCH ? topo_names[t] : "?";
}
const char *cluster_intra_name(enum cluster_intra i)
{
	return (unsigned)i <= CLUSTER_INTRA_HOST ? intra_names[i] : "?";
}
const char *cluster_cpu_name(enum cluster_cpu v)
{
	return (unsigned)v <= CLUSTER_CPU_ARM ? cpu_names[v] : "?";
}
const char *cluster_links_name(enum cluster_links l)
{
	return (unsigned)l <= CLUSTER_LINKS_PCIE ? links_names[l] : "?";
}

bool cluster_straggler_covers(const struct cluster *c, const struct cluster_straggler *s, int64_t g)
{
	int64_t per = c->node.gpus > 0 ? c->node.gpus : 1;
	return (s->by_node ? g / per : g) == s->index;
}

/* ---- field tables ----------------------------------------------------------------------- */

enum ftype { F_NUM, F_INT, F_BOOL, F_STR, F_ENUM };
/* Range rules; cross-field rules (zero allowed only for some kinds of node) are in
 * cluster_validate. Every number is also at most CLUSTER_MAX_VALUE in its unit, so that
 * converting GiB to bytes or GB/s to B/s stays far inside int64 and double precision. */
#define CLUSTER_MAX_VALUE 1e9
enum frule { R_ANY, R_POS /* > 0 */, R_NONNEG /* >= 0 */, R_FRAC /* (0, 1] */, R_GE1 /* >= 1 */,
	     R_ALLOC /* [1, 10] */ };

struct field {
	const char *key;
	enum ftype type;
	size_t off; /* in struct cluster */
	size_t size; /* F_STR buffer size */
	const char *const *choices; /* F_ENUM */
	enum frule rule;
	bool optional; /* absent: 0 (a field newer than the files users keep) */
};

#define OFF(m) offsetof(struct cluster, m)
#define NUM(sec, k, r) {#k, F_NUM, OFF(sec.k), 0, NULL, r}
#define INT(sec, k, r) {#k, F_INT, OFF(sec.k), 0, NULL, r}

static const struct field gpu_fields[] = {
	{"name", F_STR, OFF(gpu.name), sizeof(((struct cluster *)0)->gpu.name), NULL, R_ANY},
	INT(gpu, arch_sm, R_NONNEG),
	NUM(gpu, memory_gib, R_POS),
	NUM(gpu, hbm_GBps, R_POS),
	INT(gpu, sms, R_POS),
	NUM(gpu, launch_us, R_NONNEG),
	NUM(gpu, context_gib, R_NONNEG),
	/* optional: files older than the field describe identical GPUs */
	{"speed_variation", F_NUM, OFF(gpu.speed_variation), 0, NULL, R_NONNEG, true},
	{NULL, 0, 0, 0, NULL, 0},
};
static const struct field node_fields[] = {
	INT(node, gpus, R_POS),
	{"intra", F_ENUM, OFF(node.intra), 0, intra_names, R_ANY},
	NUM(node, nvlink_GBps, R_NONNEG),
	{"nvls", F_BOOL, OFF(node.nvls), 0, NULL, R_ANY},
	NUM(node, nvls_GBps, R_NONNEG),
	INT(node, nvlink_domain_gpus, R_NONNEG),
	NUM(node, nvlink_latency_us, R_NONNEG),
	INT(node, pcie_gen, R_NONNEG),
	NUM(node, pcie_GBps, R_NONNEG),
	NUM(node, pcie_latency_us, R_NONNEG),
	NUM(node, host_memory_gib, R_POS),
	INT(node, cpu_cores, R_POS),
	{"cpu_vendor", F_ENUM, OFF(node.cpu_vendor), 0, cpu_names, R_ANY},
	NUM(node, cpu_mem_GBps, R_POS),
	NUM(node, cpu_tflops, R_POS),
	NUM(node, nvme_GBps, R_NONNEG),
	{NULL, 0, 0, 0, NULL, 0},
};
static const struct field net_fields[] = {
	INT(net, nics_per_node, R_NONNEG),
	NUM(net, nic_gbps, R_NONNEG),
	NUM(net, nic_eff, R_FRAC),
	{"fabric", F_ENUM, OFF(net.fabric), 0, fabric_names, R_ANY},
	{"topology", F_ENUM, OFF(net.topology), 0, topo_names, R_ANY},
	INT(net, leaf_radix, R_POS),
	NUM(net, oversubscription, R_GE1),
	NUM(net, latency_us, R_NONNEG),
	/* optional: NCCL's IB and socket transports report 0 */
	{"plugin_latency_us", F_NUM, OFF(net.plugin_latency_us), 0, NULL, R_NONNEG, true},
	INT(net, max_nodes, R_POS),
	{NULL, 0, 0, 0, NULL, 0},
};
static const struct field eff_fields[] = {
	NUM(eff, comm_overlap_slowdown, R_GE1),
	NUM(eff, alloc_fragmentation, R_ALLOC),
	{NULL, 0, 0, 0, NULL, 0},
};

/* An optional field a file leaves out is written into the tree as its default (0) before the
 * --set overrides, so that a what-if can name it in any file. */
static void add_optional_defaults(cJSON *root)
{
	static const struct {
		const char *sec;
		const struct field *fields;
	} secs[] = { { "gpu", gpu_fields }, { "node", node_fields }, { "net", net_fields }, { "eff", eff_fields } };
	for (size_t i = 0; i < sizeof(secs) / sizeof(secs[0]); i++) {
		cJSON *o = cJSON_GetObjectItemCaseSensitive(root, secs[i].sec);
		if (!cJSON_IsObject(o))
			continue;
		for (const struct field *f = secs[i].fields; f->key; f++)
			if (f->optional && f->type == F_NUM && !cJSON_GetObjectItemCaseSensitive(o, f->key))
				cJSON_AddNumberToObject(o, f->key, 0);
	}
}

/* The efficiency tables: key, threshold key (its unit), offset. */
struct eff_desc {
	const char *key, *min_key;
	size_t off;
};
static const struct eff_desc eff_tables[] = {
	{"gemm", "min_flops", OFF(eff.gemm)},
	{"attn", "min_flops", OFF(eff.attn)},
	{"mem", "min_bytes", OFF(eff.mem)},
};
#define N_EFF_TABLES (sizeof(eff_tables) / sizeof(eff_tables[0]))

static double *fnum(const struct cluster *c, const struct field *f)
{
	return (double *)((char *)c + f->off);
}
static int *fint(const struct cluster *c, const struct field *f)
{
	/* enums are stored in an int-sized object; reading them as int is the int value */
	return (int *)((char *)c + f->off);
}

/* ---- strict keys ------------------------------------------------------------------------- */

/* Every key of obj must be one of allowed, or "note", or "K_note" for an allowed K (a string). */
static enum tw_result check_keys(const struct json_ctx *jc, const cJSON *obj,
				 const char *const *allowed)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, obj)
	{
		const char *k = it->string ? it->string : "";
		size_t n = strlen(k);
		bool is_note = !strcmp(k, "note") || (n > 5 && !strcmp(k + n - 5, "_note"));
		size_t base = !strcmp(k, "note") ? 0 : is_note ? n - 5 : n;
		bool ok = base == 0 && is_note;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = strlen(allowed[i]) == base && !strncmp(k, allowed[i], base);
		if (!ok) {
			char list[400] = "";
			for (int i = 0; allowed[i]; i++) {
				size_t l = strlen(list);
				snprintf(list + l, sizeof(list) - l, "%s%s", i ? ", " : "", allowed[i]);
			}
			return json_fail(jc, k, "unknown key (known: %s)", list);
		}
		if (is_note && !cJSON_IsString(it))
			return json_fail(jc, k, "must be a string (where the number comes from)");
		/* cJSON keeps both copies of a repeated key and reads the first: refuse it */
		for (const cJSON *p = obj->child; p != it; p = p->next)
			if (p->string && !strcmp(p->string, k))
				return json_fail(jc, k, "duplicate key");
	}
	return TW_OK;
}

static enum tw_result missing(const struct json_ctx *jc, const char *key)
{
	return json_fail(jc, key, "missing required field");
}

/* ---- parsing ----------------------------------------------------------------------------- */

static enum tw_result parse_fields(const struct json_ctx *jc, const cJSON *obj,
				   const struct field *fields, const char *const *extra,
				   struct cluster *c)
{
	const char *allowed[40];
	int n = 0;
	for (const struct field *f = fields; f->key; f++)
		allowed[n++] = f->key;
	for (int i = 0; extra && extra[i]; i++)
		allowed[n++] = extra[i];
	allowed[n] = NULL;
	TW_CHECK(check_keys(jc, obj, allowed));

	for (const struct field *f = fields; f->key; f++) {
		bool present = false;
		switch (f->type) {
		case F_NUM:
			TW_CHECK(json_get_num(jc, obj, f->key, -HUGE_VAL, HUGE_VAL, fnum(c, f), &present));
			break;
		case F_INT: {
			int64_t v = 0;
			TW_CHECK(json_get_int(jc, obj, f->key, -1000000000, 1000000000, &v, &present));
			*fint(c, f) = (int)v;
			break;
		}
		case F_BOOL:
			TW_CHECK(json_get_bool(jc, obj, f->key, (bool *)((char *)c + f->off), &present));
			break;
		case F_STR:
			TW_CHECK(json_get_str(jc, obj, f->key, (char *)c + f->off, f->size, &present));
			break;
		case F_ENUM: {
			int v = 0;
			TW_CHECK(json_get_enum(jc, obj, f->key, f->choices, &v, &present));
			*fint(c, f) = v;
			break;
		}
		}
		if (!present && !f->optional)
			return missing(jc, f->key);
	}
	return TW_OK;
}

/* A required object member: present and an object. */
static enum tw_result get_section(const struct json_ctx *jc, const cJSON *obj, const char *key,
				  const cJSON **out)
{
	TW_CHECK(json_get_obj(jc, obj, key, out));
	if (!*out)
		return missing(jc, key);
	return TW_OK;
}

static enum tw_result parse_peaks(const struct json_ctx *gpu_jc, const cJSON *gpu,
				  struct cluster *c)
{
	const cJSON *pk;
	TW_CHECK(get_section(gpu_jc, gpu, "peak_tflops", &pk));
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "%s.peak_tflops", gpu_jc->prefix);
	struct json_ctx jc = {gpu_jc->file, prefix, gpu_jc->err};
	const char *allowed[TW_NUM_DTYPES + 1];
	for (int d = 0; d < TW_NUM_DTYPES; d++)
		allowed[d] = tw_dtype_name((enum tw_dtype)d);
	allowed[TW_NUM_DTYPES] = NULL;
	TW_CHECK(check_keys(&jc, pk, allowed));
	for (int d = 0; d < TW_NUM_DTYPES; d++) {
		bool present = false;
		TW_CHECK(json_get_num(&jc, pk, allowed[d], -HUGE_VAL, HUGE_VAL, &c->gpu.peak_tflops[d],
				      &present));
		if (!present)
			return missing(&jc, allowed[d]);
	}
	return TW_OK;
}

/* An array of 1..CLUSTER_MAX_EFF finite numbers. */
static enum tw_result get_num_array(const struct json_ctx *jc, const cJSON *obj, const char *key,
				    double *out, int *n)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!a || cJSON_IsNull(a))
		return missing(jc, key);
	if (!cJSON_IsArray(a))
		return json_fail(jc, key, "must be an array of numbers");
	int len = cJSON_GetArraySize(a);
	if (len < 1 || len > CLUSTER_MAX_EFF)
		return json_fail(jc, key, "must have 1 to %d entries, got %d", CLUSTER_MAX_EFF, len);
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, a)
	{
		if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
			return json_fail(jc, key, "entry %d must be a number", i);
		out[i++] = it->valuedouble;
	}
	*n = len;
	return TW_OK;
}

/* One efficiency table object {min_key: [...], "eff": [...]} at path `prefix`. */
static enum tw_result parse_table(const struct json_ctx *jc, const char *prefix, const cJSON *t,
				  const char *min_key, struct cluster_eff_table *tab)
{
	struct json_ctx tjc = {jc->file, prefix, jc->err}, pjc = {jc->file, NULL, jc->err};
	if (!cJSON_IsObject(t))
		return json_fail(&pjc, prefix, "must be an object {\"%s\": [...], \"eff\": [...]}",
				 min_key);
	const char *allowed[] = {min_key, "eff", NULL};
	TW_CHECK(check_keys(&tjc, t, allowed));
	int nmin = 0, neff = 0;
	TW_CHECK(get_num_array(&tjc, t, min_key, tab->min, &nmin));
	TW_CHECK(get_num_array(&tjc, t, "eff", tab->eff, &neff));
	if (nmin != neff)
		return json_fail(&tjc, "eff", "has %d entries but %s has %d", neff, min_key, nmin);
	tab->n = nmin;
	return TW_OK;
}

/* eff.attn_kernels: named attention tables (optional). A name is 1-15 of [a-z0-9_]. */
static enum tw_result parse_attn_kernels(const struct json_ctx *jc, const cJSON *eff,
					 struct cluster *c)
{
	const cJSON *ak = cJSON_GetObjectItemCaseSensitive(eff, "attn_kernels"), *k;
	c->eff.n_attn_kernels = 0;
	if (!ak || cJSON_IsNull(ak))
		return TW_OK;
	if (!cJSON_IsObject(ak))
		return json_fail(jc, "attn_kernels", "must be an object of named attention tables");
	struct json_ctx kjc = {jc->file, "eff.attn_kernels", jc->err};
	cJSON_ArrayForEach(k, ak)
	{
		const char *name = k->string ? k->string : "";
		size_t n = strlen(name);
		if (!strcmp(name, "note") || (n > 5 && !strcmp(name + n - 5, "_note"))) {
			if (!cJSON_IsString(k))
				return json_fail(&kjc, name, "must be a string (where the number comes from)");
			continue;
		}
		bool ok = n >= 1 && n < CLUSTER_KERNEL_NAME;
		for (size_t i = 0; i < n && ok; i++)
			ok = islower((unsigned char)name[i]) || isdigit((unsigned char)name[i]) || name[i] == '_';
		if (!ok)
			return json_fail(&kjc, name, "a kernel name is 1 to %d of a-z, 0-9 and _",
					 CLUSTER_KERNEL_NAME - 1);
		for (int i = 0; i < c->eff.n_attn_kernels; i++)
			if (!strcmp(c->eff.attn_kernels[i].name, name))
				return json_fail(&kjc, name, "duplicate key");
		if (c->eff.n_attn_kernels >= CLUSTER_MAX_ATTN_KERNELS)
			return json_fail(&kjc, name, "at most %d attention kernels", CLUSTER_MAX_ATTN_KERNELS);
		struct cluster_attn_kernel *ke = &c->eff.attn_kernels[c->eff.n_attn_kernels++];
		snprintf(ke->name, sizeof(ke->name), "%s", name);
		char prefix[64];
		snprintf(prefix, sizeof(prefix), "eff.attn_kernels.%s", name);
		TW_CHECK(parse_table(jc, prefix, k, "min_flops", &ke->t));
	}
	return TW_OK;
}

static enum tw_result parse_eff(const struct json_ctx *root_jc, const cJSON *root,
				struct cluster *c)
{
	const cJSON *eff;
	TW_CHECK(get_section(root_jc, root, "eff", &eff));
	struct json_ctx jc = {root_jc->file, "eff", root_jc->err};
	const char *extra[N_EFF_TABLES + 2];
	for (size_t i = 0; i < N_EFF_TABLES; i++)
		extra[i] = eff_tables[i].key;
	extra[N_EFF_TABLES] = "attn_kernels";
	extra[N_EFF_TABLES + 1] = NULL;
	TW_CHECK(parse_fields(&jc, eff, eff_fields, extra, c));
	for (size_t i = 0; i < N_EFF_TABLES; i++) {
		const struct eff_desc *d = &eff_tables[i];
		const cJSON *t;
		TW_CHECK(get_section(&jc, eff, d->key, &t));
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "eff.%s", d->key);
		TW_CHECK(parse_table(&jc, prefix, t, d->min_key,
				     (struct cluster_eff_table *)((char *)c + d->off)));
	}
	return parse_attn_kernels(&jc, eff, c);
}

static enum tw_result parse_stragglers(const struct json_ctx *root_jc, const cJSON *root,
				       struct cluster *c)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "stragglers");
	if (!a || cJSON_IsNull(a))
		return missing(root_jc, "stragglers");
	if (!cJSON_IsArray(a))
		return json_fail(root_jc, "stragglers", "must be an array (normally empty [])");
	int n = cJSON_GetArraySize(a);
	if (n > CLUSTER_MAX_STRAGGLERS)
		return json_fail(root_jc, "stragglers", "at most %d entries, got %d",
				 CLUSTER_MAX_STRAGGLERS, n);
	int i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, a)
	{
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "stragglers[%d]", i);
		struct json_ctx jc = {root_jc->file, prefix, root_jc->err};
		if (!cJSON_IsObject(it))
			return json_fail(root_jc, prefix, "must be an object {\"gpu\" or \"node\", "
					 "\"compute_scale\", \"link_scale\", \"link\"}");
		const char *allowed[] = {"gpu", "node", "compute_scale", "link_scale", "link", NULL};
		TW_CHECK(check_keys(&jc, it, allowed));
		struct cluster_straggler *s = &c->stragglers[i];
		int64_t gpu = -1, node = -1;
		int links = CLUSTER_LINKS_ALL;
		bool pg = false, pn = false, pc = false, pl = false, pk = false;
		TW_CHECK(json_get_int(&jc, it, "gpu", -1000000000, 1000000000, &gpu, &pg));
		TW_CHECK(json_get_int(&jc, it, "node", -1000000000, 1000000000, &node, &pn));
		TW_CHECK(json_get_num(&jc, it, "compute_scale", -HUGE_VAL, HUGE_VAL, &s->compute_scale, &pc));
		TW_CHECK(json_get_num(&jc, it, "link_scale", -HUGE_VAL, HUGE_VAL, &s->link_scale, &pl));
		TW_CHECK(json_get_enum(&jc, it, "link", links_names, &links, &pk));
		if (pg == pn)
			return json_fail(&jc, pg ? "node" : "gpu",
					 pg ? "give gpu or node, not both" : "missing (or node): which GPU is slow");
		if (pk && !pl)
			return json_fail(&jc, "link", "needs link_scale: how much slower those links run");
		if (!pc && !pl)
			return json_fail(&jc, "compute_scale", "missing (or link_scale): how much slower");
		s->by_node = pn;
		s->index = (int)(pn ? node : gpu);
		if (!pc)
			s->compute_scale = 1.0;
		if (!pl)
			s->link_scale = 1.0;
		s->links = (enum cluster_links)links;
		i++;
	}
	c->n_stragglers = n;
	return TW_OK;
}

static enum tw_result parse_tree(const char *file, const cJSON *root, struct cluster *c,
				 struct tw_err *err)
{
	memset(c, 0, sizeof(*c));
	struct json_ctx jc = {file, NULL, err};
	const char *top[] = {"name", "gpu", "node", "net", "eff", "stragglers", NULL};
	TW_CHECK(check_keys(&jc, root, top));
	bool present = false;
	TW_CHECK(json_get_str(&jc, root, "name", c->name, sizeof(c->name), &present));
	if (!present)
		return missing(&jc, "name");

	const cJSON *sec;
	TW_CHECK(get_section(&jc, root, "gpu", &sec));
	struct json_ctx gjc = {file, "gpu", err};
	const char *gpu_extra[] = {"peak_tflops", NULL};
	TW_CHECK(parse_fields(&gjc, sec, gpu_fields, gpu_extra, c));
	TW_CHECK(parse_peaks(&gjc, sec, c));

	TW_CHECK(get_section(&jc, root, "node", &sec));
	struct json_ctx njc = {file, "node", err};
	TW_CHECK(parse_fields(&njc, sec, node_fields, NULL, c));

	TW_CHECK(get_section(&jc, root, "net", &sec));
	struct json_ctx tjc = {file, "net", err};
	TW_CHECK(parse_fields(&tjc, sec, net_fields, NULL, c));

	TW_CHECK(parse_eff(&jc, root, c));
	TW_CHECK(parse_stragglers(&jc, root, c));
	return TW_OK;
}

/* ---- validation -------------------------------------------------------------------------- */

static enum tw_result check_rule(const char *file, const char *sec, const struct field *f,
				 const struct cluster *c, struct tw_err *err)
{
	if (f->type != F_NUM && f->type != F_INT)
		return TW_OK;
	double v = f->type == F_NUM ? *fnum(c, f) : (double)*fint(c, f);
	const char *rule = NULL;
	switch (f->rule) {
	case R_ANY:
		break;
	case R_POS:
		if (!(v > 0))
			rule = f->type == F_INT ? "must be >= 1" : "must be > 0";
		break;
	case R_NONNEG:
		if (!(v >= 0))
			rule = "must be >= 0";
		break;
	case R_FRAC:
		if (!(v > 0 && v <= 1))
			rule = "must be in (0, 1]";
		break;
	case R_GE1:
		if (!(v >= 1))
			rule = "must be >= 1";
		break;
	case R_ALLOC: /* reserved / allocated: a caching allocator holding 10x is broken */
		if (!(v >= 1 && v <= 10))
			rule = "must be in [1, 10]";
		break;
	}
	if (!isfinite(v))
		rule = "must be a finite number";
	else if (v > CLUSTER_MAX_VALUE)
		rule = "must be at most 1e9";
	if (rule)
		return tw_errf(err, TW_ERR_INVALID, "%s: %s.%s: %s, got %g", file, sec, f->key, rule, v);
	return TW_OK;
}

static enum tw_result check_eff_table(const char *file, const struct eff_desc *d,
				      const struct cluster_eff_table *t, struct tw_err *err)
{
	if (t->n < 1 || t->n > CLUSTER_MAX_EFF)
		return tw_errf(err, TW_ERR_INVALID, "%s: eff.%s: must have 1 to %d entries", file,
			       d->key, CLUSTER_MAX_EFF);
	for (int i = 0; i < t->n; i++)
		if (!(t->min[i] >= 0 && t->min[i] <= 1e30))
			return tw_errf(err, TW_ERR_INVALID, "%s: eff.%s.%s: entry %d must be in [0, 1e30], got %g",
				       file, d->key, d->min_key, i, t->min[i]);
	if (t->min[0] != 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: eff.%s.%s: the first threshold must be 0, got %g",
			       file, d->key, d->min_key, t->min[0]);
	for (int i = 0; i < t->n; i++) {
		if (i > 0 && !(t->min[i] > t->min[i - 1]))
			return tw_errf(err, TW_ERR_INVALID,
				       "%s: eff.%s.%s: thresholds must be strictly ascending (entry %d)",
				       file, d->key, d->min_key, i);
		if (!(t->eff[i] > 0 && t->eff[i] <= 1))
			return tw_errf(err, TW_ERR_INVALID,
				       "%s: eff.%s.eff: entry %d must be in (0, 1], got %g", file, d->key,
				       i, t->eff[i]);
	}
	return TW_OK;
}

#define BAD(...) tw_errf(err, TW_ERR_INVALID, __VA_ARGS__)

enum tw_result cluster_validate(const struct cluster *c, const char *file, struct tw_err *err)
{
	if (!file)
		file = c->name;
	if (!c->name[0])
		return BAD("%s: name: must not be empty", file);
	if (!c->gpu.name[0])
		return BAD("%s: gpu.name: must not be empty", file);
	static const struct {
		const char *sec;
		const struct field *fields;
	} secs[] = {{"gpu", gpu_fields}, {"node", node_fields}, {"net", net_fields}, {"eff", eff_fields}};
	for (size_t s = 0; s < sizeof(secs) / sizeof(secs[0]); s++)
		for (const struct field *f = secs[s].fields; f->key; f++)
			TW_CHECK(check_rule(file, secs[s].sec, f, c, err));

	/* gpu */
	for (int d = 0; d < TW_NUM_DTYPES; d++) {
		double p = c->gpu.peak_tflops[d];
		if (!(p >= 0) || !(p <= CLUSTER_MAX_VALUE))
			return BAD("%s: gpu.peak_tflops.%s: must be in [0, 1e9] (0 = unsupported), got %g",
				   file, tw_dtype_name((enum tw_dtype)d), p);
	}
	if (!(c->gpu.peak_tflops[TW_FP32] > 0))
		return BAD("%s: gpu.peak_tflops.fp32: must be > 0, got %g", file,
			   c->gpu.peak_tflops[TW_FP32]);
	if (c->gpu.speed_variation >= 0.5)
		return BAD("%s: gpu.speed_variation: %g must be below 0.5 (a spread of speeds, "
			   "(fastest - slowest) / median)", file, c->gpu.speed_variation);
	if (c->gpu.context_gib >= c->gpu.memory_gib)
		return BAD("%s: gpu.context_gib: %g GiB must be less than gpu.memory_gib = %g GiB", file,
			   c->gpu.context_gib, c->gpu.memory_gib);

	/* node: the intra-node link that the kind of node uses must be there, the others not */
	const char *intra = cluster_intra_name(c->node.intra);
	bool nvlink = c->node.intra == CLUSTER_INTRA_NVSWITCH ||
		      c->node.intra == CLUSTER_INTRA_NVLINK_MESH;
	if (c->node.gpus > 4096)
		return BAD("%s: node.gpus: at most 4096 per node, got %d", file, c->node.gpus);
	if (nvlink && !(c->node.nvlink_GBps > 0))
		return BAD("%s: node.nvlink_GBps: must be > 0 with node.intra = %s, got %g", file, intra,
			   c->node.nvlink_GBps);
	if (!nvlink && c->node.nvlink_GBps != 0)
		return BAD("%s: node.nvlink_GBps: must be 0 with node.intra = %s (no NVLink), got %g",
			   file, intra, c->node.nvlink_GBps);
	if (nvlink) {
		int d = c->node.nvlink_domain_gpus, g = c->node.gpus;
		if (d < 2 || (d % g != 0 && g % d != 0))
			return BAD("%s: node.nvlink_domain_gpus: must be >= 2 and divide or be a multiple "
				   "of node.gpus = %d, got %d", file, g, d);
	} else if (c->node.nvlink_domain_gpus != 0) {
		return BAD("%s: node.nvlink_domain_gpus: must be 0 with node.intra = %s, got %d", file,
			   intra, c->node.nvlink_domain_gpus);
	}
	if (c->node.nvls && c->node.intra != CLUSTER_INTRA_NVSWITCH)
		return BAD("%s: node.nvls: NVLS needs node.intra = nvswitch, not %s", file, intra);
	if (c->node.nvls && !(c->node.nvls_GBps > 0))
		return BAD("%s: node.nvls_GBps: must be > 0 when node.nvls is true, got %g", file,
			   c->node.nvls_GBps);
	if (!c->node.nvls && c->node.nvls_GBps != 0)
		return BAD("%s: node.nvls_GBps: must be 0 when node.nvls is false, got %g (NVLS off "
			   "as a what-if: node.nvls=false and node.nvls_GBps=0)", file, c->node.nvls_GBps);
	if (c->node.intra == CLUSTER_INTRA_HOST) {
		if (c->node.pcie_gen != 0)
			return BAD("%s: node.pcie_gen: must be 0 with node.intra = host, got %d", file,
				   c->node.pcie_gen);
	} else if (c->node.pcie_gen < 3 || c->node.pcie_gen > 7) {
		return BAD("%s: node.pcie_gen: must be in [3, 7], got %d", file, c->node.pcie_gen);
	}
	if (!(c->node.pcie_GBps > 0))
		return BAD("%s: node.pcie_GBps: must be > 0, got %g", file, c->node.pcie_GBps);
	if (c->gpu.memory_gib * c->node.gpus > c->node.host_memory_gib &&
	    c->node.intra == CLUSTER_INTRA_HOST)
		return BAD("%s: gpu.memory_gib: %d CPU ranks x %g GiB exceed node.host_memory_gib = %g",
			   file, c->node.gpus, c->gpu.memory_gib, c->node.host_memory_gib);

	/* net: one machine (fabric none) or a real fabric */
	if (c->net.fabric == CLUSTER_FABRIC_NONE) {
		if (c->net.nics_per_node != 0 || c->net.nic_gbps != 0)
			return BAD("%s: net.nics_per_node: must be 0 (and net.nic_gbps 0) with net.fabric = "
				   "none, got %d x %g Gb/s", file, c->net.nics_per_node, c->net.nic_gbps);
		if (c->net.max_nodes != 1)
			return BAD("%s: net.max_nodes: must be 1 with net.fabric = none, got %d", file,
				   c->net.max_nodes);
	} else {
		if (c->net.nics_per_node < 1)
			return BAD("%s: net.nics_per_node: must be >= 1 with net.fabric = %s, got %d", file,
				   cluster_fabric_name(c->net.fabric), c->net.nics_per_node);
		if (!(c->net.nic_gbps > 0))
			return BAD("%s: net.nic_gbps: must be > 0 with net.fabric = %s, got %g", file,
				   cluster_fabric_name(c->net.fabric), c->net.nic_gbps);
	}
	if (c->net.max_nodes > 1000000)
		return BAD("%s: net.max_nodes: at most 1000000, got %d", file, c->net.max_nodes);

	/* eff */
	for (size_t i = 0; i < N_EFF_TABLES; i++)
		TW_CHECK(check_eff_table(file, &eff_tables[i],
					 (const struct cluster_eff_table *)((const char *)c +
									    eff_tables[i].off),
					 err));
	for (int i = 0; i < c->eff.n_attn_kernels; i++) {
		char key[64];
		snprintf(key, sizeof(key), "attn_kernels.%s", c->eff.attn_kernels[i].name);
		struct eff_desc d = {key, "min_flops", 0};
		TW_CHECK(check_eff_table(file, &d, &c->eff.attn_kernels[i].t, err));
	}

	/* stragglers: inside the largest job, slower not faster */
	int64_t max_gpus = (int64_t)c->node.gpus * c->net.max_nodes;
	for (int i = 0; i < c->n_stragglers; i++) {
		const struct cluster_straggler *s = &c->stragglers[i];
		int64_t lim = s->by_node ? c->net.max_nodes : max_gpus;
		if (s->index < 0 || s->index >= lim)
			return BAD("%s: stragglers[%d].%s: must be in [0, %lld), got %d", file, i,
				   s->by_node ? "node" : "gpu", (long long)lim, s->index);
		if (!(s->compute_scale > 0 && s->compute_scale <= 1))
			return BAD("%s: stragglers[%d].compute_scale: must be in (0, 1], got %g", file, i,
				   s->compute_scale);
		if (!(s->link_scale > 0 && s->link_scale <= 1))
			return BAD("%s: stragglers[%d].link_scale: must be in (0, 1], got %g", file, i,
				   s->link_scale);
	}
	return TW_OK;
}

/* ---- loading ----------------------------------------------------------------------------- */

static bool is_path(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".json"));
}

void cluster_list_presets(const char *topologies_dir, char *buf, size_t len)
{
	json_list_dir(topologies_dir, buf, len);
}

/* A value a --set gave is named as the --set's, not the file's: "FILE: key...: rule" becomes
 * "--set key=value: key...: rule" for the last --set of that field or one above it. */
static void blame_set(const char *path, const char *const *sets, int nsets, struct tw_err *err)
{
	size_t plen = strlen(path);
	if (strncmp(err->msg, path, plen) || strncmp(err->msg + plen, ": ", 2))
		return;
	const char *field = err->msg + plen + 2;
	for (int i = nsets - 1; i >= 0; i--) {
		const char *eq = strchr(sets[i], '=');
		size_t k = eq ? (size_t)(eq - sets[i]) : 0;
		if (!k || strncmp(field, sets[i], k) || !strchr(":.[", field[k]))
			continue;
		char m[sizeof(err->msg)];
		snprintf(m, sizeof(m), "--set %s: %s", sets[i], field);
		snprintf(err->msg, sizeof(err->msg), "%s", m);
		return;
	}
}

enum tw_result cluster_load(const char *name_or_path, const char *topologies_dir,
			    const char *const *sets, int nsets, struct cluster *out,
			    struct tw_err *err)
{
	if (!name_or_path || !*name_or_path)
		return tw_errf(err, TW_ERR_USAGE, "cluster: empty name");
	char path[1024];
	if (is_path(name_or_path)) {
		snprintf(path, sizeof(path), "%s", name_or_path);
	} else {
		int n = snprintf(path, sizeof(path), "%s/%s.json", topologies_dir ? topologies_dir : ".",
				 name_or_path);
		FILE *f = n < (int)sizeof(path) ? fopen(path, "rb") : NULL;
		if (!f) {
			char known[1024];
			cluster_list_presets(topologies_dir, known, sizeof(known));
			return tw_errf(err, TW_ERR_INVALID,
				       "unknown cluster '%s' (known: %s; or give a path to a .json file)",
				       name_or_path, known[0] ? known : "none found");
		}
		fclose(f);
	}
	cJSON *root = NULL;
	TW_CHECK(json_load_object(path, &root, err));
	enum tw_result rc = TW_OK;
	add_optional_defaults(root);
	for (int i = 0; i < nsets && rc == TW_OK; i++)
		rc = json_set_path(root, sets[i], true, "--set", err);
	if (rc == TW_OK)
		rc = parse_tree(path, root, out, err);
	cJSON_Delete(root);
	if (rc == TW_OK)
		rc = cluster_validate(out, path, err);
	if (rc != TW_OK)
		blame_set(path, sets, nsets, err);
	return rc;
}

const struct cluster_eff_table *cluster_attn_kernel(const struct cluster *c, const char *name,
						    char *list, size_t len)
{
	if (list && len)
		list[0] = '\0';
	const struct cluster_eff_table *hit = NULL;
	for (int i = 0; i < c->eff.n_attn_kernels; i++) {
		if (!strcmp(c->eff.attn_kernels[i].name, name))
			hit = &c->eff.attn_kernels[i].t;
		if (list && len) {
			size_t l = strlen(list);
			snprintf(list + l, len - l, "%s%s", l ? ", " : "", c->eff.attn_kernels[i].name);
		}
	}
	return hit;
}

bool cluster_owns_path(const char *path)
{
	static const char *const roots[] = {"gpu", "node", "net", "eff", "stragglers", "name", NULL};
	size_t n = strcspn(path, ".=");
	for (int i = 0; roots[i]; i++)
		if (strlen(roots[i]) == n && !strncmp(path, roots[i], n))
			return true;
	return false;
}

const char *cluster_descriptive(const char *path)
{
	/* docs/cluster.md, "Descriptive fields": the figures that carry each one's effect */
	static const char *const map[][2] = {
		{ "node.pcie_gen", "node.pcie_GBps" },
		{ "node.cpu_cores", "node.cpu_tflops and node.cpu_mem_GBps" },
		{ "net.fabric", "net.latency_us and net.nic_eff" },
		{ "node.nvlink_domain_gpus", "node.gpus" },
	};
	size_t n = strcspn(path, "=");
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strlen(map[i][0]) == n && !strncmp(path, map[i][0], n))
			return map[i][1];
	return NULL;
}

const char *cluster_partial(const char *path)
{
	size_t n = strcspn(path, "=");
	if (n == strlen("gpu.sms") && !strncmp(path, "gpu.sms", n))
		return "only the GEMM tile model's wave count reads it, not the GPU's speed: for a "
		       "GPU with fewer SMs scale gpu.peak_tflops (and gpu.hbm_GBps) with them";
	return NULL;
}

enum tw_result cluster_check_gpus(const struct cluster *c, int64_t gpus, int *nodes,
				  struct tw_err *err)
{
	int per = c->node.gpus;
	if (per < 1)
		return tw_errf(err, TW_ERR_INVALID, "%s: node.gpus: must be >= 1", c->name);
	if (gpus < 1)
		return tw_errf(err, TW_ERR_INVALID, "--gpus %lld: must be >= 1", (long long)gpus);
	int64_t n = 1;
	if (gpus > per) {
		if (gpus % per != 0)
			return tw_errf(err, TW_ERR_INVALID,
				       "--gpus %lld: a job on more than one node of %s must use whole "
				       "nodes (a multiple of node.gpus = %d); for K GPUs per node, "
				       "model such a node: --set node.gpus=K --set net.nics_per_node=N%s",
				       (long long)gpus, c->name, per,
				       c->node.nvlink_domain_gpus > 0 ? " --set node.nvlink_domain_gpus=K"
								      : "");
		n = gpus / per;
	}
	if (n > c->net.max_nodes)
		return tw_errf(err, TW_ERR_INVALID,
			       "--gpus %lld: needs %lld nodes of %d GPUs, but %s holds at most "
			       "net.max_nodes = %d",
			       (long long)gpus, (long long)n, per, c->name, c->net.max_nodes);
	for (int i = 0; i < c->n_stragglers; i++) {
		const struct cluster_straggler *s = &c->stragglers[i];
		if (!s->by_node && s->index >= gpus)
			return tw_errf(err, TW_ERR_INVALID,
				       "stragglers[%d].gpu: GPU %d is outside the job of %lld GPUs", i,
				       s->index, (long long)gpus);
		if (s->by_node && s->index >= n)
			return tw_errf(err, TW_ERR_INVALID,
				       "stragglers[%d].node: node %d is outside the job of %lld node%s", i,
				       s->index, (long long)n, n == 1 ? "" : "s");
	}
	if (nodes)
		*nodes = (int)n;
	return TW_OK;
}

double cluster_eff_lookup(const struct cluster_eff_table *t, double x)
{
	if (!t || t->n < 1)
		return 1.0;
	double e = t->eff[0];
	for (int i = 1; i < t->n && t->min[i] <= x; i++)
		e = t->eff[i];
	return e;
}

double cluster_intra_GBps(const struct cluster *c)
{
	switch (c->node.intra) {
	case CLUSTER_INTRA_NVSWITCH:
	case CLUSTER_INTRA_NVLINK_MESH:
		return c->node.nvlink_GBps;
	case CLUSTER_INTRA_PCIE:
	case CLUSTER_INTRA_HOST:
		break;
	}
	return c->node.pcie_GBps;
}

double cluster_intra_latency_us(const struct cluster *c)
{
	bool nvlink = c->node.intra == CLUSTER_INTRA_NVSWITCH ||
		      c->node.intra == CLUSTER_INTRA_NVLINK_MESH;
	return nvlink ? c->node.nvlink_latency_us : c->node.pcie_latency_us;
}

/* E[max of n standard normals] = integral of x n phi(x) Phi(x)^(n-1) dx, by the midpoint
 * rule over [-10, 10] (outside it the integral is below 1e-8 for any n up to 2^40) */
static double expected_max_normal(int64_t n)
{
	if (n <= 1)
		return 0.0;
	const double lo = -10.0, hi = 10.0, h = 1.0 / 512.0;
	double sum = 0.0, nn = (double)n;
	for (double x = lo + h / 2; x < hi; x += h) {
		double cdf = 0.5 * erfc(-x / sqrt(2.0));
		if (cdf <= 0.0)
			continue;
		double pdf = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
		sum += x * nn * pdf * exp((nn - 1.0) * log(cdf));
	}
	return sum * h;
}

double cluster_job_pace(const struct cluster *c, int64_t gpus)
{
	/* Tukey's fences of a normal distribution: Q3 + 1.5 IQR = 2.698 sigma from the median */
	double sigma = c->gpu.speed_variation / (2.0 * 2.698);
	if (sigma <= 0.0 || gpus <= 1)
		return 1.0;
	return 1.0 + sigma * expected_max_normal(gpus);
}

double cluster_nic_GBps(const struct cluster *c)
{
	return c->net.nic_gbps / 8.0 * c->net.nic_eff;
}

/* ---- JSON out ---------------------------------------------------------------------------- */

static cJSON *fields_to_json(const struct cluster *c, const struct field *fields, cJSON *o)
{
	for (const struct field *f = fields; f->key; f++) {
		switch (f->type) {
		case F_NUM:
			cJSON_AddNumberToObject(o, f->key, *fnum(c, f));
			break;
		case F_INT:
			cJSON_AddNumberToObject(o, f->key, *fint(c, f));
			break;
		case F_BOOL:
			cJSON_AddBoolToObject(o, f->key, *(const bool *)((const char *)c + f->off));
			break;
		case F_STR:
			cJSON_AddStringToObject(o, f->key, (const char *)c + f->off);
			break;
		case F_ENUM:
			cJSON_AddStringToObject(o, f->key, f->choices[*fint(c, f)]);
			break;
		}
	}
	return o;
}

struct cJSON *cluster_to_json(const struct cluster *c)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", c->name);
	cJSON *gpu = fields_to_json(c, gpu_fields, cJSON_AddObjectToObject(o, "gpu"));
	cJSON *pk = cJSON_AddObjectToObject(gpu, "peak_tflops");
	for (int d = 0; d < TW_NUM_DTYPES; d++)
		cJSON_AddNumberToObject(pk, tw_dtype_name((enum tw_dtype)d), c->gpu.peak_tflops[d]);
	fields_to_json(c, node_fields, cJSON_AddObjectToObject(o, "node"));
	fields_to_json(c, net_fields, cJSON_AddObjectToObject(o, "net"));
	cJSON *eff = fields_to_json(c, eff_fields, cJSON_AddObjectToObject(o, "eff"));
	for (size_t i = 0; i < N_EFF_TABLES; i++) {
		const struct cluster_eff_table *t =
			(const struct cluster_eff_table *)((const char *)c + eff_tables[i].off);
		cJSON *to = cJSON_AddObjectToObject(eff, eff_tables[i].key);
		cJSON_AddItemToObject(to, eff_tables[i].min_key, cJSON_CreateDoubleArray(t->min, t->n));
		cJSON_AddItemToObject(to, "eff", cJSON_CreateDoubleArray(t->eff, t->n));
	}
	if (c->eff.n_attn_kernels > 0) {
		cJSON *ak = cJSON_AddObjectToObject(eff, "attn_kernels");
		for (int i = 0; i < c->eff.n_attn_kernels; i++) {
			const struct cluster_eff_table *t = &c->eff.attn_kernels[i].t;
			cJSON *to = cJSON_AddObjectToObject(ak, c->eff.attn_kernels[i].name);
			cJSON_AddItemToObject(to, "min_flops", cJSON_CreateDoubleArray(t->min, t->n));
			cJSON_AddItemToObject(to, "eff", cJSON_CreateDoubleArray(t->eff, t->n));
		}
	}
	cJSON *st = cJSON_AddArrayToObject(o, "stragglers");
	for (int i = 0; i < c->n_stragglers; i++) {
		const struct cluster_straggler *g = &c->stragglers[i];
		cJSON *s = cJSON_CreateObject();
		cJSON_AddNumberToObject(s, g->by_node ? "node" : "gpu", g->index);
		cJSON_AddNumberToObject(s, "compute_scale", g->compute_scale);
		cJSON_AddNumberToObject(s, "link_scale", g->link_scale);
		cJSON_AddStringToObject(s, "link", links_names[g->links]);
		cJSON_AddItemToArray(st, s);
	}
	return o;
}

double cluster_gemm_peak(const double peak_tflops[TW_NUM_DTYPES], enum tw_dtype param_dtype,
			 bool fp8_gemm, bool tf32)
{
	enum tw_dtype d = fp8_gemm ? TW_FP8 : param_dtype == TW_FP32 && tf32 ? TW_TF32 : param_dtype;
	double p = (int)d >= 0 && d < TW_NUM_DTYPES ? peak_tflops[d] : 0;
	if (p <= 0)
		p = peak_tflops[TW_BF16] > 0 ? peak_tflops[TW_BF16] : peak_tflops[TW_FP16];
	return p;
}
