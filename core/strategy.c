/* strategy — resolving how a job is parallelised: our strategy JSON (docs/strategy.md), the
 * DeepSpeed config (strategy_ds.c), --set overrides, defaults per framework, the derived
 * degrees and batch, and every rule the frameworks check. Each resolved value records where it
 * came from in s->prov. */
#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cluster.h"
#include "strategy_int.h"

#define DEFAULT_DS_VERSION "0.19.6"
#define MAX_DEGREE (1 << 20)

/* ---- provenance and set bookkeeping --------------------------------------------------------- */

void strat_prov(struct strategy *s, const char *path, enum strat_src src, const char *why,
		const char *fmt, ...)
{
	int i;
	for (i = 0; i < s->nprov; i++)
		if (!strcmp(s->prov[i].path, path))
			break;
	if (i == s->nprov) {
		if (s->nprov >= STRAT_MAX_PROV)
			return; /* the table is sized for every field; extra entries are dropped */
		s->nprov++;
	}
	struct strat_prov *p = &s->prov[i];
	snprintf(p->path, sizeof(p->path), "%s", path);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->value, sizeof(p->value), fmt, ap);
	va_end(ap);
	p->src = src;
	snprintf(p->why, sizeof(p->why), "%s", why ? why : "");
}

const struct strat_set *strat_find_set(const struct strat_rd *r, enum strat_tree t,
				       const char *path)
{
	/* the last --set wins; a set of a parent object covers its children */
	for (int i = r->nsets - 1; i >= 0; i--) {
		const struct strat_set *x = &r->sets[i];
		size_t n = strlen(x->path);
		if (x->tree == t && !strncmp(path, x->path, n) && (path[n] == '\0' || path[n] == '.'))
			return x;
	}
	return NULL;
}

const char *strat_label(const struct strat_rd *r, enum strat_tree t, const char *path)
{
	const struct strat_set *x = strat_find_set(r, t, path);
	if (x)
		return x->label;
	const char *f = t == STRAT_TREE_DS ? r->ds_file : r->our_file;
	return f ? f : "strategy";
}

/* An object's label for a rule about the object as a whole ("fsdp options need framework
 * fsdp"): a --set that gave it or a parent; else, when --sets gave every key it holds (they
 * made it), the last of them; else the file */
static const char *object_label(const struct strat_rd *r, enum strat_tree t, const char *path,
				const cJSON *obj)
{
	const struct strat_set *x = strat_find_set(r, t, path), *last = NULL;
	const cJSON *it;
	if (x || !obj)
		return strat_label(r, t, path);
	cJSON_ArrayForEach(it, obj)
	{
		char kp[160];
		snprintf(kp, sizeof(kp), "%s.%s", path, it->string);
		if (!(x = strat_find_set(r, t, kp)))
			return strat_label(r, t, path);
		last = x;
	}
	return last ? last->label : strat_label(r, t, path);
}

enum strat_src strat_src_of(const struct strat_rd *r, enum strat_tree t, const char *path,
			    char *why, size_t len)
{
	const struct strat_set *x = strat_find_set(r, t, path);
	if (why && len) {
		/* labels may be longer than why: keep the start */
		const char *l = strat_label(r, t, path);
		size_t n = strlen(l) < len - 1 ? strlen(l) : len - 1;
		memcpy(why, l, n);
		why[n] = '\0';
	}
	return x ? STRAT_SRC_SET : STRAT_SRC_FILE;
}

bool strat_is_auto(const cJSON *v)
{
	return v && cJSON_IsString(v) && !strcmp(v->valuestring, "auto");
}

const char *strat_src_name(enum strat_src s)
{
	static const char *const names[] = {"default", "file", "derived", "set", "option"};
	return (int)s >= 0 && s <= STRAT_SRC_OPTION ? names[s] : "?";
}

/* ---- presets ---------------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void strategy_list_presets(const char *strategies_dir, char *buf, size_t len)
{
	char *names[256];
	int n = 0;
	if (len)
		buf[0] = '\0';
	DIR *d = strategies_dir ? opendir(strategies_dir) : NULL;
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && n < 256) {
		size_t l = strlen(e->d_name);
		if (l > 5 && !strcmp(e->d_name + l - 5, ".json") && e->d_name[0] != '.') {
			names[n] = tw_strdup(e->d_name);
			names[n][l - 5] = '\0';
			n++;
		}
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
	for (int i = 0; i < n; i++) {
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
		free(names[i]);
	}
}

static bool is_path(const char *s)
{
	size_t n = strlen(s);
	return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".json"));
}

/* ---- --set routing -------------------------------------------------------------------------- */

static const char *const our_keys[] = {
	"name", "description", "note", "framework", "deepspeed_version", "tp", "pp", "cp", "cp_kind",
	"ep", "expert_tp", "vp", "sequence_parallel", "schedule", "recompute", "recompute_num_layers",
	"flash_attention", "fp8", "tf32", "kernels",
	"precision", "optimizer", "distributed_optimizer", "fsdp", "lora", "seq_len", "micro_batch",
	"global_batch", "grad_accum", "hf_trainer", "ds_config", "host_op_us",
	"overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "overlap_p2p_comm",
	"scatter_gather_tensors_in_pipeline", "async_tensor_model_parallel_allreduce", "grad_reduce_in_bf16",
	"first_stage_layers", "last_stage_layers", "account_for_embedding_in_pipeline_split",
	"account_for_loss_in_pipeline_split", "recompute_modules", "hidden_dropout",
	"attention_dropout", "cross_entropy", "attention_kernel", "nccl_algo", "nccl_proto",
	"moe_dispatcher", "overlap_moe_expert_parallel_comm", "moe_load_imbalance",
	"moe_shared_expert_overlap", "delay_wgrad_compute", "moe_expert_capacity_factor",
	"moe_pad_expert_input_to_capacity", "moe_permute_fusion", "moe_grouped_gemm", "moe_drop_tokens",
	"moe_router_fusion", "moe_aux_loss_coeff", "moe_z_loss_coeff", "moe_min_capacity",
	"cuda_graph_impl", "cuda_graph_modules", NULL};

static bool is_our_key(const char *k)
{
	for (int i = 0; our_keys[i]; i++)
		if (!strcmp(k, our_keys[i]))
			return true;
	return false;
}

/* Decide the tree of each --set: our keys go to the strategy, DeepSpeed's to the ds_config;
 * "ds_config." and "strategy." prefixes say it explicitly. */
static enum tw_result route_sets(struct strat_rd *r, const struct strat_inputs *in)
{
	r->nsets = 0;
	for (int i = 0; i < in->nsets; i++) {
		const char *a = in->sets[i];
		const char *eq = strchr(a, '=');
		if (!eq || eq == a)
			return tw_errf(r->err, TW_ERR_USAGE, "--set %s: expected PATH=VALUE", a);
		if (r->nsets >= (int)(sizeof(r->sets) / sizeof(r->sets[0])))
			return tw_errf(r->err, TW_ERR_USAGE, "--set: too many strategy overrides");
		struct strat_set *x = &r->sets[r->nsets++];
		x->assignment = a;
		snprintf(x->label, sizeof(x->label), "--set %s", a);
		size_t plen = (size_t)(eq - a);
		if (plen >= sizeof(x->path))
			return tw_errf(r->err, TW_ERR_USAGE, "--set %s: path too long", a);
		char path[128], first[128];
		memcpy(path, a, plen);
		path[plen] = '\0';
		const char *p = path;
		if (!strncmp(p, "ds_config.", 10)) {
			x->tree = STRAT_TREE_DS;
			p += 10;
		} else if (!strncmp(p, "strategy.", 9)) {
			x->tree = STRAT_TREE_OURS;
			p += 9;
		} else {
			size_t fl = strcspn(p, ".");
			memcpy(first, p, fl);
			first[fl] = '\0';
			if (is_our_key(first) && !(strcmp(first, "optimizer") == 0 && p[fl] == '.'))
				x->tree = STRAT_TREE_OURS;
			else if (strat_ds_top_key(first))
				x->tree = STRAT_TREE_DS;
			else
				return tw_errf(r->err, TW_ERR_INVALID,
					       "--set %s: unknown strategy field '%s' (strategy keys: "
					       "framework, tp, pp, cp, ep, vp, schedule, recompute, "
					       "precision, micro_batch, ...; or a ds_config key such as "
					       "zero_optimization.stage)",
					       a, first);
		}
		if (!*p)
			return tw_errf(r->err, TW_ERR_USAGE, "--set %s: empty path", a);
		if (x->tree == STRAT_TREE_OURS && !strcmp(p, "ds_config"))
			return tw_errf(r->err, TW_ERR_USAGE,
				       "--set %s: give a DeepSpeed config with --ds-config FILE, or set "
				       "its keys (zero_optimization.stage=3, ...)",
				       a);
		snprintf(x->path, sizeof(x->path), "%s", p);
	}
	return TW_OK;
}

/* json_set_path wants "PATH=VALUE" with the path inside the tree. */
static enum tw_result apply_sets(struct strat_rd *r, enum strat_tree t, cJSON *root)
{
	for (int i = 0; i < r->nsets; i++) {
		const struct strat_set *x = &r->sets[i];
		if (x->tree != t)
			continue;
		const char *eq = strchr(x->assignment, '=');
		size_t n = strlen(x->path) + strlen(eq) + 1;
		char *as = tw_malloc(n);
		snprintf(as, n, "%s%s", x->path, eq);
		enum tw_result rc = json_set_path(root, as, false, "--set", r->err);
		free(as);
		TW_CHECK(rc);
	}
	return TW_OK;
}

/* the first --set aimed at tree t, NULL: none */
static const struct strat_set *first_set(const struct strat_rd *r, enum strat_tree t)
{
	for (int i = 0; i < r->nsets; i++)
		if (r->sets[i].tree == t)
			return &r->sets[i];
	return NULL;
}

/* ---- our strategy JSON ------------------------------------------------------------------------ */

struct oval {
	bool given;
	enum strat_src src;
	char why[96];
};

static void opath(const char *prefix, const char *key, char *out, size_t len)
{
	if (prefix)
		snprintf(out, len, "%s.%s", prefix, key);
	else
		snprintf(out, len, "%s", key);
}

static void oval_fill(struct strat_rd *r, const char *path, struct oval *ov)
{
	if (ov->given)
		ov->src = strat_src_of(r, STRAT_TREE_OURS, path, ov->why, sizeof(ov->why));
}

static enum tw_result oint(struct strat_rd *r, const cJSON *o, const char *prefix,
			   const char *key, int64_t min, int64_t max, int64_t *out, struct oval *ov)
{
	char path[128];
	opath(prefix, key, path, sizeof(path));
	struct json_ctx c = {strat_label(r, STRAT_TREE_OURS, path), prefix, r->err};
	memset(ov, 0, sizeof(*ov));
	TW_CHECK(json_get_int(&c, o, key, min, max, out, &ov->given));
	oval_fill(r, path, ov);
	return TW_OK;
}

static enum tw_result obool(struct strat_rd *r, const cJSON *o, const char *prefix,
			    const char *key, bool *out, struct oval *ov)
{
	char path[128];
	opath(prefix, key, path, sizeof(path));
	struct json_ctx c = {strat_label(r, STRAT_TREE_OURS, path), prefix, r->err};
	memset(ov, 0, sizeof(*ov));
	TW_CHECK(json_get_bool(&c, o, key, out, &ov->given));
	oval_fill(r, path, ov);
	return TW_OK;
}

static enum tw_result oenum(struct strat_rd *r, const cJSON *o, const char *prefix,
			    const char *key, const char *const *choices, int *out, struct oval *ov)
{
	char path[128];
	opath(prefix, key, path, sizeof(path));
	struct json_ctx c = {strat_label(r, STRAT_TREE_OURS, path), prefix, r->err};
	memset(ov, 0, sizeof(*ov));
	TW_CHECK(json_get_enum(&c, o, key, choices, out, &ov->given));
	oval_fill(r, path, ov);
	return TW_OK;
}

static enum tw_result onum(struct strat_rd *r, const cJSON *o, const char *prefix,
			   const char *key, double min, double max, double *out, struct oval *ov)
{
	char path[128];
	opath(prefix, key, path, sizeof(path));
	struct json_ctx c = {strat_label(r, STRAT_TREE_OURS, path), prefix, r->err};
	memset(ov, 0, sizeof(*ov));
	TW_CHECK(json_get_num(&c, o, key, min, max, out, &ov->given));
	oval_fill(r, path, ov);
	return TW_OK;
}

static enum tw_result oobj(struct strat_rd *r, const cJSON *o, const char *key,
			   const char *const *allowed, const cJSON **out)
{
	struct json_ctx c = {strat_label(r, STRAT_TREE_OURS, key), NULL, r->err};
	TW_CHECK(json_get_obj(&c, o, key, out));
	if (*out && allowed) {
		c.prefix = key;
		TW_CHECK(json_check_keys(&c, *out, allowed));
	}
	return TW_OK;
}

/* "0.19.6" -> STRAT_VERSION(0, 19, 6); "0.14" is 0.14.0 */
static bool parse_version(const char *s, int *out)
{
	int part[3] = {0, 0, 0}, n = 0;
	const char *p = s;
	while (n < 3) {
		if (!isdigit((unsigned char)*p))
			return false;
		long v = 0;
		while (isdigit((unsigned char)*p) && v < 1000)
			v = v * 10 + (*p++ - '0');
		if (v >= 1000)
			return false;
		part[n++] = (int)v;
		if (*p == '\0')
			break;
		if (*p != '.')
			return false;
		p++;
	}
	if (*p || n < 2)
		return false;
	*out = STRAT_VERSION(part[0], part[1], part[2]);
	return true;
}

static const char *const framework_names[] = {"deepspeed", "megatron", "fsdp", NULL};
static const char *const schedule_names[] = {"ds-1f1b", "1f1b", "interleaved", "gpipe", NULL};
static const char *const recompute_names[] = {"none", "selective", "full", "op", NULL};

const char *strat_recompute_name(enum strat_recompute r)
{
	return r >= STRAT_RECOMPUTE_NONE && r <= STRAT_RECOMPUTE_OP ? recompute_names[r] : "?";
}
static const char *const cp_kind_names[] = {"ring", "ulysses", "allgather", NULL};
static const char *const kernels_names[] = {"fused", "eager", NULL};

const char *const strat_nccl_algo_names[STRAT_NCCL_ALGOS] = { "tree", "ring", "nvls", "pat", "nvlstree" };
const char *const strat_nccl_proto_names[STRAT_NCCL_PROTOS] = { "LL", "LL128", "Simple" };

/* NCCL_ALGO / NCCL_PROTO's syntax: names separated by commas, any case, all of them excluded
 * with a leading '^'. NCCL's algorithms the simulator does not model (skip, n of them) are
 * accepted and leave the set as it is. The set of the names that stay; 0 (with why) when none
 * does or a name is unknown. */
static unsigned nccl_set(const char *text, const char *const *names, int n, const char *const *skip,
			 char *why, size_t why_len)
{
	const char *p = text;
	bool neg = *p == '^';
	if (neg)
		p++;
	unsigned named = 0, all = (1u << n) - 1;
	while (*p) {
		size_t len = strcspn(p, ",");
		char tok[32];
		if (len == 0) {
			snprintf(why, why_len, "'%s': names separated by commas, '^' first to exclude them", text);
			return 0;
		}
		/* a name longer than any of NCCL's is reported as not one of them, cut */
		snprintf(tok, sizeof(tok), "%.*s", (int)(len < sizeof(tok) ? len : sizeof(tok) - 1), p);
		bool known = false;
		for (int i = 0; i < n && !known; i++)
			if (!strcasecmp(tok, names[i])) {
				named |= 1u << i;
				known = true;
			}
		for (int i = 0; skip && skip[i] && !known; i++)
			known = !strcasecmp(tok, skip[i]);
		if (!known) {
			char list[96] = "";
			for (int i = 0; i < n; i++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", names[i]);
			snprintf(why, why_len, "'%s' is not one of %s%s", tok, list,
				 skip ? " (or NCCL's CollNetDirect, CollNetChain, not modelled)" : "");
			return 0;
		}
		p += len + (p[len] == ',');
		if (p[-1] == ',' && !*p) {
			snprintf(why, why_len, "'%s': a comma with no name after it", text);
			return 0;
		}
	}
	unsigned set = neg ? all & ~named : named;
	if (!set)
		snprintf(why, why_len, "'%s' leaves none of the %s the simulator models", text,
			 skip ? "algorithms" : "protocols");
	return set;
}

const char *strat_kernels_name(enum strat_kernels k)
{
	return k == STRAT_KERNELS_EAGER ? kernels_names[1] : kernels_names[0];
}
static const char *const ce_names[] = {"unfused", "fused", NULL};
static const char *const dispatcher_names[] = {"alltoall", "deepep", NULL};
/* enum strat_cg_impl, then Megatron's whole-iteration graph, which is refused */
static const char *const cg_impl_names[] = {"none", "transformer_engine", "local", "full_iteration",
					    NULL};
#define CG_FULL_ITERATION 3 /* its index in cg_impl_names */
static const char *const precision_names[] = {"fp32", "bf16", "fp16", NULL};
static const enum tw_dtype precision_types[] = {TW_FP32, TW_BF16, TW_FP16};
static const char *const optimizer_names[] = {"adamw", "adam", "sgd", "lion", "adagrad", NULL};
static const char *const fsdp_names[] = {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD",
					 "NO_SHARD", NULL};
static const char *const offload_names[] = {"none", "cpu", "nvme"};

/* Values our file gives, kept until the defaults (which depend on the framework) are known. */
struct ours {
	struct oval framework, version, tp, pp, cp, cp_kind, kernels, ep, etp, vp, sp, schedule,
		recompute, flash, fp8, tf32, precision, optimizer, distopt, fsdp_sharding, fsdp_group,
		fsdp_version, fsdp_reduce, lora_rank, lora_targets, seq_len, host_op, ogr, opg, tpo, atp,
		rnl, grb, fsl, lsl, afe, afl, rcm, hdrop, adrop, ce, akern, op2p, nalgo, nproto, disp,
		moeo, imb, mso, dwg, mcf, mpad, mpf, mgg, mdt, mrf, aux, zl, mcap, cgi, cgm, sgp;
	bool ogr_v, opg_v, tpo_v, atp_v, grb_v, afe_v, afl_v, op2p_v, sgp_v, moeo_v, mso_v, dwg_v, mpad_v,
		mpf_v, mgg_v, mdt_v, mrf_v;
	double host_op_v, hdrop_v, adrop_v, imb_v, mcf_v, aux_v, zl_v;
	int framework_i, schedule_i, recompute_i, cp_kind_i, kernels_i, precision_i, optimizer_i,
		fsdp_i, fsdp_reduce_i, ce_i, disp_i, cgi_i;
	int64_t tp_v, pp_v, cp_v, ep_v, etp_v, vp_v, seq_v, fsdp_group_v, fsdp_version_v, lora_rank_v,
		rnl_v, fsl_v, lsl_v, mcap_v;
	bool sp_v, flash_v, fp8_v, tf32_v, distopt_v;
	char version_v[16], akern_v[16], nalgo_v[64], nproto_v[64];
	unsigned lora_targets_v, rcm_v, cgm_v;
	bool has_fsdp, has_lora;
	const char *fsdp_label; /* who gave the fsdp object (object_label) */
};

static enum tw_result parse_lora_targets(struct strat_rd *r, const cJSON *lora, unsigned *out,
					 struct oval *ov)
{
	memset(ov, 0, sizeof(*ov));
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(lora, "targets");
	const char *label = strat_label(r, STRAT_TREE_OURS, "lora.targets");
	*out = STRAT_LORA_Q | STRAT_LORA_V; /* PEFT's default for Llama: q_proj, v_proj */
	if (!t || cJSON_IsNull(t))
		return TW_OK;
	if (cJSON_IsString(t) && (!strcmp(t->valuestring, "all-linear") ||
				  !strcmp(t->valuestring, "all"))) {
		*out = STRAT_LORA_Q | STRAT_LORA_K | STRAT_LORA_V | STRAT_LORA_O | STRAT_LORA_GATE |
		       STRAT_LORA_UP | STRAT_LORA_DOWN;
	} else {
		if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) == 0)
			return tw_errf(r->err, TW_ERR_INVALID,
				       "%s: lora.targets: must be a non-empty array of module names "
				       "or \"all-linear\"",
				       label);
		static const char *const names[] = {"q", "k", "v", "o", "gate", "up", "down"};
		*out = 0;
		const cJSON *e;
		cJSON_ArrayForEach(e, t)
		{
			int hit = -1;
			for (int i = 0; i < 7 && e && cJSON_IsString(e); i++) {
				char a[16], b[16];
				snprintf(a, sizeof(a), "%s", names[i]);
				snprintf(b, sizeof(b), "%s_proj", names[i]);
				if (!strcmp(e->valuestring, a) || !strcmp(e->valuestring, b))
					hit = i;
			}
			if (hit < 0)
				return tw_errf(r->err, TW_ERR_INVALID,
					       "%s: lora.targets: unknown module %s (known: q, k, v, o, "
					       "gate, up, down, or q_proj ... down_proj)",
					       label, cJSON_IsString(e) ? e->valuestring : "(not a string)");
			*out |= 1u << hit;
		}
	}
	ov->given = true;
	oval_fill(r, "lora.targets", ov);
	return TW_OK;
}

/* Megatron-Core's --recompute-modules names, in STRAT_RC_* bit order */
static const char *const rc_module_names[] = {"core_attn", "mlp", "moe_act", "shared_experts",
					      "layernorm", "moe", "mla_up_proj"};
#define RC_NMODULES (sizeof(rc_module_names) / sizeof(*rc_module_names))

const char *strat_rc_module_name(int i)
{
	return i >= 0 && (size_t)i < RC_NMODULES ? rc_module_names[i] : NULL;
}

/* An array of Megatron-Core module names (key) into a bit set, bit i for names[i]; `verb` and
 * `list` finish the messages ("... is not a module Megatron-Core <verb> (<list>)"). *out keeps
 * its default when the key is absent. */
static enum tw_result parse_module_set(struct strat_rd *r, const cJSON *o, const char *key,
				       const char *const *names, size_t n, bool empty_ok,
				       const char *verb, const char *list, unsigned *out,
				       struct oval *ov)
{
	memset(ov, 0, sizeof(*ov));
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, key);
	const char *label = strat_label(r, STRAT_TREE_OURS, key);
	if (!t || cJSON_IsNull(t))
		return TW_OK;
	if (!cJSON_IsArray(t) || (!empty_ok && cJSON_GetArraySize(t) == 0))
		return tw_errf(r->err, TW_ERR_INVALID, "%s: %s: must be a%s array of module names (%s)",
			       label, key, empty_ok ? "n" : " non-empty", list);
	*out = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, t)
	{
		const char *nm = cJSON_IsString(e) ? e->valuestring : "(not a string)";
		size_t hit = n;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(nm, names[i]))
				hit = i;
		if (hit == n)
			return tw_errf(r->err, TW_ERR_INVALID,
				       "%s: %s: %s is not a module Megatron-Core %s (%s)", label, key, nm,
				       verb, list);
		*out |= 1u << hit;
	}
	ov->given = true;
	oval_fill(r, key, ov);
	return TW_OK;
}

static enum tw_result parse_rc_modules(struct strat_rd *r, const cJSON *o, unsigned *out,
				       struct oval *ov)
{
	*out = STRAT_RC_CORE_ATTN;
	return parse_module_set(r, o, "recompute_modules", rc_module_names, RC_NMODULES, false,
				"recomputes", "core_attn, mlp, moe_act, shared_experts, layernorm, moe, "
				"mla_up_proj", out, ov);
}

static const char *const cg_module_names[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess"};
#define CG_NMODULES (sizeof(cg_module_names) / sizeof(*cg_module_names))

/* cuda_graph_modules: Megatron-Core's CudaGraphModule names; [] is the whole layer */
static enum tw_result parse_cg_modules(struct strat_rd *r, const cJSON *o, unsigned *out,
				       struct oval *ov)
{
	*out = 0;
	return parse_module_set(r, o, "cuda_graph_modules", cg_module_names, CG_NMODULES, true,
				"captures", "attn, mlp, moe, moe_router, moe_preprocess; [] for the "
				"whole layer", out, ov);
}

static enum tw_result sfail(struct strat_rd *r, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum tw_result parse_ours(struct strat_rd *r, const cJSON *o, struct ours *u)
{
	static const char *const fsdp_keys[] = {"sharding_strategy", "shard_group_size", "version",
						"reduce_dtype", NULL};
	static const char *const lora_keys[] = {"rank", "targets", "alpha", NULL};
	static const char *const hf_keys[] = {"per_device_train_batch_size",
					      "gradient_accumulation_steps", "max_grad_norm", "bf16",
					      "fp16", "tf32", NULL};
	memset(u, 0, sizeof(*u));
	struct json_ctx c = {r->our_file ? r->our_file : "strategy", NULL, r->err};
	if (o) {
		/* a set of an unknown key was refused when routing; an unknown key here is the file's */
		const cJSON *it;
		cJSON_ArrayForEach(it, o)
		{
			if (!is_our_key(it->string)) {
				c.file = strat_label(r, STRAT_TREE_OURS, it->string);
				return json_fail(&c, it->string, "unknown key (see docs/strategy.md)");
			}
			if (strat_is_auto(it) && strcmp(it->string, "ds_config"))
				return tw_errf(r->err, TW_ERR_INVALID,
					       "%s: %s: \"auto\" is a ds_config value; give a value here",
					       strat_label(r, STRAT_TREE_OURS, it->string), it->string);
		}
	}
	TW_CHECK(oenum(r, o, NULL, "framework", framework_names, &u->framework_i, &u->framework));
	char ver[16] = DEFAULT_DS_VERSION;
	c.file = strat_label(r, STRAT_TREE_OURS, "deepspeed_version");
	TW_CHECK(json_get_str(&c, o, "deepspeed_version", ver, sizeof(ver), &u->version.given));
	oval_fill(r, "deepspeed_version", &u->version);
	if (!parse_version(ver, &r->version))
		return json_fail(&c, "deepspeed_version", "'%s' is not a version like 0.19.6", ver);
	snprintf(u->version_v, sizeof(u->version_v), "%s", ver);

	TW_CHECK(oint(r, o, NULL, "tp", 1, MAX_DEGREE, &u->tp_v, &u->tp));
	TW_CHECK(oint(r, o, NULL, "pp", 1, MAX_DEGREE, &u->pp_v, &u->pp));
	TW_CHECK(oint(r, o, NULL, "cp", 1, MAX_DEGREE, &u->cp_v, &u->cp));
	TW_CHECK(oenum(r, o, NULL, "cp_kind", cp_kind_names, &u->cp_kind_i, &u->cp_kind));
	TW_CHECK(oenum(r, o, NULL, "kernels", kernels_names, &u->kernels_i, &u->kernels));
	TW_CHECK(oint(r, o, NULL, "ep", 1, MAX_DEGREE, &u->ep_v, &u->ep));
	TW_CHECK(oint(r, o, NULL, "expert_tp", 1, MAX_DEGREE, &u->etp_v, &u->etp));
	TW_CHECK(oint(r, o, NULL, "vp", 1, MAX_DEGREE, &u->vp_v, &u->vp));
	TW_CHECK(obool(r, o, NULL, "sequence_parallel", &u->sp_v, &u->sp));
	TW_CHECK(oenum(r, o, NULL, "schedule", schedule_names, &u->schedule_i, &u->schedule));
	TW_CHECK(oenum(r, o, NULL, "recompute", recompute_names, &u->recompute_i, &u->recompute));
	TW_CHECK(oint(r, o, NULL, "recompute_num_layers", 1, INT64_MAX, &u->rnl_v, &u->rnl));
	TW_CHECK(parse_rc_modules(r, o, &u->rcm_v, &u->rcm));
	TW_CHECK(parse_cg_modules(r, o, &u->cgm_v, &u->cgm));
	TW_CHECK(oenum(r, o, NULL, "cuda_graph_impl", cg_impl_names, &u->cgi_i, &u->cgi));
	TW_CHECK(oint(r, o, NULL, "first_stage_layers", 1, INT64_MAX, &u->fsl_v, &u->fsl));
	TW_CHECK(oint(r, o, NULL, "last_stage_layers", 1, INT64_MAX, &u->lsl_v, &u->lsl));
	TW_CHECK(obool(r, o, NULL, "account_for_embedding_in_pipeline_split", &u->afe_v, &u->afe));
	TW_CHECK(obool(r, o, NULL, "account_for_loss_in_pipeline_split", &u->afl_v, &u->afl));
	TW_CHECK(obool(r, o, NULL, "flash_attention", &u->flash_v, &u->flash));
	TW_CHECK(onum(r, o, NULL, "hidden_dropout", 0, 1, &u->hdrop_v, &u->hdrop));
	TW_CHECK(onum(r, o, NULL, "attention_dropout", 0, 1, &u->adrop_v, &u->adrop));
	TW_CHECK(oenum(r, o, NULL, "cross_entropy", ce_names, &u->ce_i, &u->ce));
	TW_CHECK(oenum(r, o, NULL, "moe_dispatcher", dispatcher_names, &u->disp_i, &u->disp));
	c.file = strat_label(r, STRAT_TREE_OURS, "attention_kernel");
	TW_CHECK(json_get_str(&c, o, "attention_kernel", u->akern_v, sizeof(u->akern_v),
			      &u->akern.given));
	oval_fill(r, "attention_kernel", &u->akern);
	c.file = strat_label(r, STRAT_TREE_OURS, "nccl_algo");
	TW_CHECK(json_get_str(&c, o, "nccl_algo", u->nalgo_v, sizeof(u->nalgo_v), &u->nalgo.given));
	oval_fill(r, "nccl_algo", &u->nalgo);
	c.file = strat_label(r, STRAT_TREE_OURS, "nccl_proto");
	TW_CHECK(json_get_str(&c, o, "nccl_proto", u->nproto_v, sizeof(u->nproto_v), &u->nproto.given));
	oval_fill(r, "nccl_proto", &u->nproto);
	TW_CHECK(obool(r, o, NULL, "fp8", &u->fp8_v, &u->fp8));
	TW_CHECK(obool(r, o, NULL, "tf32", &u->tf32_v, &u->tf32));
	TW_CHECK(onum(r, o, NULL, "host_op_us", 0, 1e4, &u->host_op_v, &u->host_op));
	TW_CHECK(obool(r, o, NULL, "overlap_grad_reduce", &u->ogr_v, &u->ogr));
	TW_CHECK(obool(r, o, NULL, "overlap_param_gather", &u->opg_v, &u->opg));
	TW_CHECK(obool(r, o, NULL, "tp_comm_overlap", &u->tpo_v, &u->tpo));
	TW_CHECK(obool(r, o, NULL, "overlap_p2p_comm", &u->op2p_v, &u->op2p));
	TW_CHECK(obool(r, o, NULL, "scatter_gather_tensors_in_pipeline", &u->sgp_v, &u->sgp));
	TW_CHECK(obool(r, o, NULL, "overlap_moe_expert_parallel_comm", &u->moeo_v, &u->moeo));
	TW_CHECK(onum(r, o, NULL, "moe_load_imbalance", 1, 64, &u->imb_v, &u->imb));
	TW_CHECK(obool(r, o, NULL, "moe_shared_expert_overlap", &u->mso_v, &u->mso));
	TW_CHECK(obool(r, o, NULL, "delay_wgrad_compute", &u->dwg_v, &u->dwg));
	TW_CHECK(onum(r, o, NULL, "moe_expert_capacity_factor", 0, 64, &u->mcf_v, &u->mcf));
	TW_CHECK(obool(r, o, NULL, "moe_pad_expert_input_to_capacity", &u->mpad_v, &u->mpad));
	TW_CHECK(obool(r, o, NULL, "moe_permute_fusion", &u->mpf_v, &u->mpf));
	TW_CHECK(obool(r, o, NULL, "moe_grouped_gemm", &u->mgg_v, &u->mgg));
	TW_CHECK(obool(r, o, NULL, "moe_drop_tokens", &u->mdt_v, &u->mdt));
	TW_CHECK(obool(r, o, NULL, "moe_router_fusion", &u->mrf_v, &u->mrf));
	TW_CHECK(onum(r, o, NULL, "moe_aux_loss_coeff", 0, 1e3, &u->aux_v, &u->aux));
	TW_CHECK(onum(r, o, NULL, "moe_z_loss_coeff", 0, 1e3, &u->zl_v, &u->zl));
	TW_CHECK(oint(r, o, NULL, "moe_min_capacity", 0, 1 << 20, &u->mcap_v, &u->mcap));
	TW_CHECK(obool(r, o, NULL, "async_tensor_model_parallel_allreduce", &u->atp_v, &u->atp));
	TW_CHECK(obool(r, o, NULL, "grad_reduce_in_bf16", &u->grb_v, &u->grb));
	TW_CHECK(oenum(r, o, NULL, "precision", precision_names, &u->precision_i, &u->precision));
	TW_CHECK(oenum(r, o, NULL, "optimizer", optimizer_names, &u->optimizer_i, &u->optimizer));
	TW_CHECK(obool(r, o, NULL, "distributed_optimizer", &u->distopt_v, &u->distopt));
	TW_CHECK(oint(r, o, NULL, "seq_len", 1, INT64_MAX, &u->seq_v, &u->seq_len));

	const cJSON *fs = NULL, *lo = NULL, *hf = NULL;
	TW_CHECK(oobj(r, o, "fsdp", fsdp_keys, &fs));
	u->has_fsdp = fs != NULL;
	u->fsdp_label = object_label(r, STRAT_TREE_OURS, "fsdp", fs);
	TW_CHECK(oenum(r, fs, "fsdp", "sharding_strategy", fsdp_names, &u->fsdp_i, &u->fsdp_sharding));
	TW_CHECK(oint(r, fs, "fsdp", "shard_group_size", 1, MAX_DEGREE, &u->fsdp_group_v,
		      &u->fsdp_group));
	TW_CHECK(oint(r, fs, "fsdp", "version", 1, 2, &u->fsdp_version_v, &u->fsdp_version));
	TW_CHECK(oenum(r, fs, "fsdp", "reduce_dtype", precision_names, &u->fsdp_reduce_i,
		       &u->fsdp_reduce));
	TW_CHECK(oobj(r, o, "lora", lora_keys, &lo));
	u->has_lora = lo != NULL;
	if (lo) {
		TW_CHECK(oint(r, lo, "lora", "rank", 1, 1 << 20, &u->lora_rank_v, &u->lora_rank));
		if (!u->lora_rank.given)
			return tw_errf(r->err, TW_ERR_INVALID, "%s: lora.rank: missing (LoRA needs a rank)",
				       strat_label(r, STRAT_TREE_OURS, "lora"));
		double alpha;
		struct oval ov;
		TW_CHECK(onum(r, lo, "lora", "alpha", 0, 1e9, &alpha, &ov));
		TW_CHECK(parse_lora_targets(r, lo, &u->lora_targets_v, &u->lora_targets));
	}

	/* batch keys (for deepspeed they meet the ds_config's in strat_ds_batch) */
	struct oval ov;
	TW_CHECK(oint(r, o, NULL, "micro_batch", 1, INT64_MAX, &r->our_mb.v, &ov));
	r->our_mb.given = ov.given;
	r->our_mb.from_set = ov.given && ov.src == STRAT_SRC_SET;
	snprintf(r->our_mb.why, sizeof(r->our_mb.why), "%s", ov.why);
	TW_CHECK(oint(r, o, NULL, "grad_accum", 1, INT64_MAX, &r->our_ga.v, &ov));
	r->our_ga.given = ov.given;
	r->our_ga.from_set = ov.given && ov.src == STRAT_SRC_SET;
	snprintf(r->our_ga.why, sizeof(r->our_ga.why), "%s", ov.why);
	TW_CHECK(oint(r, o, NULL, "global_batch", 1, INT64_MAX, &r->our_gb.v, &ov));
	r->our_gb.given = ov.given;
	r->our_gb.from_set = ov.given && ov.src == STRAT_SRC_SET;
	snprintf(r->our_gb.why, sizeof(r->our_gb.why), "%s", ov.why);

	/* HF TrainingArguments that fill "auto" */
	TW_CHECK(oobj(r, o, "hf_trainer", hf_keys, &hf));
	r->hf_max_grad_norm = 1.0; /* TrainingArguments default */
	TW_CHECK(oint(r, hf, "hf_trainer", "per_device_train_batch_size", 1, INT64_MAX, &r->hf_micro,
		      &ov));
	r->hf_micro_given = ov.given;
	TW_CHECK(oint(r, hf, "hf_trainer", "gradient_accumulation_steps", 1, INT64_MAX, &r->hf_gas,
		      &ov));
	r->hf_gas_given = ov.given;
	TW_CHECK(onum(r, hf, "hf_trainer", "max_grad_norm", 0, 1e300, &r->hf_max_grad_norm, &ov));
	TW_CHECK(obool(r, hf, "hf_trainer", "bf16", &r->hf_bf16, &ov));
	TW_CHECK(obool(r, hf, "hf_trainer", "fp16", &r->hf_fp16, &ov));
	/* TrainingArguments(tf32=...) sets torch's allow_tf32, as our tf32 does */
	bool hf_tf32 = false;
	TW_CHECK(obool(r, hf, "hf_trainer", "tf32", &hf_tf32, &ov));
	if (ov.given && u->tf32.given && hf_tf32 != u->tf32_v)
		return sfail(r, "tf32", "tf32=%s disagrees with hf_trainer.tf32=%s",
			     u->tf32_v ? "true" : "false", hf_tf32 ? "true" : "false");
	if (ov.given && !u->tf32.given)
		u->tf32 = ov, u->tf32_v = hf_tf32;

	r->precision_given = u->precision.given;
	r->precision = precision_types[u->precision_i];
	r->optimizer_given = u->optimizer.given;
	return TW_OK;
}

/* ---- loading the inputs ----------------------------------------------------------------------- */

/* DeepSpeed loads with dict_raise_error_on_duplicate_keys; cJSON would keep the first. */
static enum tw_result check_dups(struct strat_rd *r, const char *file, const cJSON *o)
{
	struct json_ctx c = {file, NULL, r->err};
	return json_check_dups(&c, o);
}

struct trees {
	cJSON *ours, *ds;
	char our_file[512], ds_file[512]; /* paths as opened */
	char our_label[512], ds_label[512]; /* as messages name them: presets relative to the repo */
};

static enum tw_result load_trees(struct strat_rd *r, const struct strat_inputs *in,
				 struct trees *t)
{
	if (in->strategy_path) {
		if (is_path(in->strategy_path)) {
			snprintf(t->our_file, sizeof(t->our_file), "%s", in->strategy_path);
		} else {
			const char *dir = in->strategies_dir ? in->strategies_dir : ".";
			snprintf(t->our_file, sizeof(t->our_file), "%s/%s.json", dir, in->strategy_path);
			size_t dl = strlen(dir), sl = strlen("examples/strategies");
			if (dl >= sl && !strcmp(dir + dl - sl, "examples/strategies"))
				snprintf(t->our_label, sizeof(t->our_label), "examples/strategies/%s.json",
					 in->strategy_path);
			if (access(t->our_file, R_OK) != 0) {
				char known[1024];
				strategy_list_presets(in->strategies_dir, known, sizeof(known));
				return tw_errf(r->err, TW_ERR_INVALID,
					       "unknown strategy preset '%s' (known: %s)",
					       in->strategy_path, known[0] ? known : "none");
			}
		}
		if (!t->our_label[0])
			snprintf(t->our_label, sizeof(t->our_label), "%s", t->our_file);
		TW_CHECK(json_load_object(t->our_file, &t->ours, r->err));
		r->our_file = t->our_label;
		TW_CHECK(check_dups(r, t->our_label, t->ours));
		cJSON *emb = cJSON_GetObjectItemCaseSensitive(t->ours, "ds_config");
		if (emb && !cJSON_IsNull(emb)) {
			if (in->ds_config_path)
				return tw_errf(r->err, TW_ERR_INVALID,
					       "%s: ds_config: the strategy embeds a ds_config and "
					       "--ds-config gives another; give one of them",
					       t->our_label);
			if (cJSON_IsObject(emb)) {
				t->ds = cJSON_DetachItemViaPointer(t->ours, emb);
				if (snprintf(t->ds_label, sizeof(t->ds_label), "%s (ds_config)",
					     t->our_label) >= (int)sizeof(t->ds_label))
					return tw_errf(r->err, TW_ERR_LIMIT, "%s: path too long",
						       t->our_label);
			} else if (cJSON_IsString(emb)) {
				/* a path, relative to the strategy file */
				const char *slash = strrchr(t->our_file, '/');
				const char *lslash = strrchr(t->our_label, '/');
				if (emb->valuestring[0] == '/' || !slash) {
					snprintf(t->ds_file, sizeof(t->ds_file), "%s", emb->valuestring);
					snprintf(t->ds_label, sizeof(t->ds_label), "%s", emb->valuestring);
				} else {
					snprintf(t->ds_file, sizeof(t->ds_file), "%.*s/%s",
						 (int)(slash - t->our_file), t->our_file,
						 emb->valuestring);
					snprintf(t->ds_label, sizeof(t->ds_label), "%.*s/%s",
						 lslash ? (int)(lslash - t->our_label) : 0, t->our_label,
						 emb->valuestring);
				}
				TW_CHECK(json_load_object(t->ds_file, &t->ds, r->err));
				TW_CHECK(check_dups(r, t->ds_label, t->ds));
				cJSON_DeleteItemFromObjectCaseSensitive(t->ours, "ds_config");
			} else {
				return tw_errf(r->err, TW_ERR_INVALID,
					       "%s: ds_config: must be an object or a path", t->our_label);
			}
			r->ds_file = t->ds_label;
		}
	}
	if (in->ds_config_path) {
		snprintf(t->ds_file, sizeof(t->ds_file), "%s", in->ds_config_path);
		TW_CHECK(json_load_object(t->ds_file, &t->ds, r->err));
		TW_CHECK(check_dups(r, t->ds_file, t->ds));
		r->ds_file = t->ds_file;
	}
	if (!t->ours && first_set(r, STRAT_TREE_OURS)) {
		t->ours = cJSON_CreateObject();
		r->our_file = NULL;
	}
	const struct strat_set *ds_set = first_set(r, STRAT_TREE_DS);
	if (!t->ds && ds_set) {
		/* messages about the DeepSpeed config then name the first --set that made it */
		t->ds = cJSON_CreateObject();
		snprintf(t->ds_file, sizeof(t->ds_file), "%s", ds_set->label);
		r->ds_file = t->ds_file;
	}
	if (t->ours)
		TW_CHECK(apply_sets(r, STRAT_TREE_OURS, t->ours));
	if (t->ds)
		TW_CHECK(apply_sets(r, STRAT_TREE_DS, t->ds));
	return TW_OK;
}

/* ---- the resolution --------------------------------------------------------------------------- */

static const char *fw_name(enum strat_framework f)
{
	return framework_names[f];
}

/* Prov for a value of our file: its source when given, else the default with why. */
static void oprov(struct strategy *s, const char *path, const struct oval *ov, const char *defwhy,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void oprov(struct strategy *s, const char *path, const struct oval *ov, const char *defwhy,
		  const char *fmt, ...)
{
	char v[64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	strat_prov(s, path, ov->given ? ov->src : STRAT_SRC_DEFAULT, ov->given ? ov->why : defwhy,
		   "%s", v);
}

/* An error about a strategy value: the label is where the value came from. */
/* ZeRO++ and MiCS need the degrees: DeepSpeed builds their groups from consecutive global
 * ranks (groups._create_zero_param_parallel_group, MiCS_CommGroups, qgZ's local / global
 * all-to-all groups), which are data-parallel ranks only without tp and cp. */
static enum tw_result check_zeropp(struct strat_rd *r)
{
	struct strategy *s = r->s;
	const char *key = s->zero_hpz > 1	   ? "zero_optimization.zero_hpz_partition_size"
			  : s->mics_shard > 0 ? "zero_optimization.mics_shard_size"
			  : s->zero_qgrads    ? "zero_optimization.zero_quantized_gradients"
					      : NULL;
	if (!key)
		return TW_OK;
	if (s->tp * s->cp > 1)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: %s: modelled with tp = cp = 1 only (DeepSpeed forms its groups "
			       "from consecutive ranks; here tp=%" PRId64 ", cp=%" PRId64 ")",
			       strat_label(r, STRAT_TREE_DS, key), key, s->tp, s->cp);
	int64_t g = s->zero_hpz > 1 ? s->zero_hpz : s->mics_shard;
	if (g > 1 && (g > s->dp || s->dp % g))
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: %s=%" PRId64 " does not divide the data-parallel size %" PRId64,
			       strat_label(r, STRAT_TREE_DS, key), key, g, s->dp);
	if (s->mics_shard > 0)
		s->shard_group = s->mics_shard;
	int64_t per_node = r->c && r->c->node.gpus > 0 ? r->c->node.gpus : s->dp;
	/* MiCS's hierarchical gather (create_mics_comm_groups) needs a shard group over whole
	 * nodes */
	if (s->mics_hier && s->mics_shard <= per_node)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: mics_shard_size=%" PRId64 " stays within a node of %" PRId64
			       " GPUs (DeepSpeed: sharding spans on single node, no need for hierarchy "
			       "allgather)",
			       strat_label(r, STRAT_TREE_DS,
					   "zero_optimization.mics_hierarchical_params_gather"),
			       s->mics_shard, per_node);
	if (s->mics_hier && s->mics_shard % per_node)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: mics_shard_size=%" PRId64 " is not whole nodes of %" PRId64
			       " GPUs, which the hierarchical gather needs",
			       strat_label(r, STRAT_TREE_DS,
					   "zero_optimization.mics_hierarchical_params_gather"),
			       s->mics_shard, per_node);
	if (s->zero_qgrads && s->dp <= per_node) {
		s->zero_qgrads = false;
		strat_prov(s, "zero_optimization.zero_quantized_gradients", STRAT_SRC_DERIVED,
			   "one node: DeepSpeed reduce-scatters (qgZ needs more than one)", "false");
	}
	return TW_OK;
}

static enum tw_result sfail(struct strat_rd *r, const char *path, const char *fmt, ...)
{
	char rule[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	/* a rule across fields ("a,b,c") is labelled by the first of them a --set gave, else by
	 * the first (the file's) */
	char one[64] = "";
	if (path && strchr(path, ',')) {
		const char *q = path;
		while (*q) {
			size_t n = strcspn(q, ",");
			char f[64];
			snprintf(f, sizeof(f), "%.*s", (int)n, q);
			if (!one[0] || strat_find_set(r, STRAT_TREE_OURS, f))
				snprintf(one, sizeof(one), "%s", f);
			if (strat_find_set(r, STRAT_TREE_OURS, f))
				break;
			q += n + (q[n] == ',');
		}
		path = one;
	}
	const char *label = path ? strat_label(r, STRAT_TREE_OURS, path)
				 : (r->our_file ? r->our_file : "strategy");
	return tw_errf(r->err, TW_ERR_INVALID, "%s: %s", label, rule);
}

/* Degrees from our keys and the ds_config's hints (AutoTP, Ulysses). */
static enum tw_result resolve_degrees(struct strat_rd *r, const struct strat_inputs *in,
				      struct ours *u)
{
	struct strategy *s = r->s;
	s->gpus = in->gpus > 0 ? in->gpus : (r->c && r->c->node.gpus > 0 ? r->c->node.gpus : 1);
	strat_prov(s, "gpus", in->gpus > 0 ? STRAT_SRC_OPTION : STRAT_SRC_DEFAULT,
		   in->gpus > 0 ? "--gpus" : "one node of the cluster", "%" PRId64, s->gpus);

	s->tp = u->tp.given ? u->tp_v : 1;
	if (r->ds_autotp > 0) {
		if (u->tp.given && u->tp_v != r->ds_autotp)
			return sfail(r, "tp", "tp=%" PRId64 " disagrees with %s: "
					      "tensor_parallel.autotp_size=%" PRId64,
				     u->tp_v, r->ds_file, r->ds_autotp);
		if (!u->tp.given) {
			s->tp = r->ds_autotp;
			u->tp.given = true;
			u->tp.src = strat_src_of(r, STRAT_TREE_DS, "tensor_parallel.autotp_size",
						 u->tp.why, sizeof(u->tp.why));
			strncat(u->tp.why, " (autotp_size)", sizeof(u->tp.why) - strlen(u->tp.why) - 1);
		}
	}
	oprov(s, "tp", &u->tp, "no tensor parallel", "%" PRId64, s->tp);
	s->pp = u->pp.given ? u->pp_v : 1;
	oprov(s, "pp", &u->pp, "no pipeline parallel", "%" PRId64, s->pp);
	s->cp = u->cp.given ? u->cp_v : 1;
	/* each framework's default: Megatron's cp_comm_type p2p, PyTorch's context_parallel
	 * rotate_method all-gather (torchtitan's too), DeepSpeed's sequence parallelism */
	static const enum strat_cp_kind kind_default[] = {
		[STRAT_DEEPSPEED] = STRAT_CP_ULYSSES, [STRAT_MEGATRON] = STRAT_CP_RING,
		[STRAT_FSDP] = STRAT_CP_ALLGATHER};
	static const char *const kind_why_of[] = {
		[STRAT_DEEPSPEED] = "DeepSpeed runs Ulysses",
		[STRAT_MEGATRON] = "Megatron's cp_comm_type p2p (ring)",
		[STRAT_FSDP] = "PyTorch's context_parallel rotates by all-gather"};
	s->cp_kind = u->cp_kind.given ? (enum strat_cp_kind)u->cp_kind_i : kind_default[s->framework];
	const char *kind_why = kind_why_of[s->framework];
	if (r->ds_sp > 0) {
		if (u->cp.given && u->cp_v != r->ds_sp)
			return sfail(r, "cp", "cp=%" PRId64 " disagrees with %s: "
					      "sequence_parallel_size=%" PRId64,
				     u->cp_v, r->ds_file, r->ds_sp);
		if (!u->cp.given) {
			s->cp = r->ds_sp;
			u->cp.given = true;
			u->cp.src = strat_src_of(r, STRAT_TREE_DS, "sequence_parallel_size", u->cp.why,
						 sizeof(u->cp.why));
			strncat(u->cp.why, " (sequence_parallel_size)",
				sizeof(u->cp.why) - strlen(u->cp.why) - 1);
		}
		if (u->cp_kind.given && s->cp_kind != STRAT_CP_ULYSSES)
			return sfail(r, "cp_kind", "cp_kind=%s, but DeepSpeed's "
						   "sequence_parallel_size is Ulysses",
				     cp_kind_names[s->cp_kind]);
		s->cp_kind = STRAT_CP_ULYSSES;
	}
	if (s->cp > 1 && s->cp_kind == STRAT_CP_ALLGATHER && s->framework == STRAT_DEEPSPEED)
		return sfail(r, "cp_kind", "cp_kind=allgather is Megatron's (Transformer Engine) and "
					   "PyTorch's context parallelism; DeepSpeed's is Ulysses");
	oprov(s, "cp", &u->cp, "no context parallel", "%" PRId64, s->cp);
	if (s->cp > 1)
		oprov(s, "cp_kind", &u->cp_kind, kind_why, "%s", cp_kind_names[s->cp_kind]);

	int64_t tpp, mp;
	if (!tw_mul64(s->tp, s->pp, &tpp) || !tw_mul64(tpp, s->cp, &mp))
		return sfail(r, NULL, "tp x pp x cp overflows 64 bits");
	if (s->gpus % mp) {
		/* a degree the ds_config gave is named with its key */
		char from[256] = "";
		if (r->ds_autotp > 0 && s->tp == r->ds_autotp)
			snprintf(from, sizeof(from), " (tp from %s: tensor_parallel.autotp_size)",
				 strat_label(r, STRAT_TREE_DS, "tensor_parallel.autotp_size"));
		else if (r->ds_sp > 0 && s->cp == r->ds_sp)
			snprintf(from, sizeof(from), " (cp from %s: sequence_parallel_size)",
				 strat_label(r, STRAT_TREE_DS, "sequence_parallel_size"));
		return tw_errf(r->err, TW_ERR_INVALID,
			       "--gpus %" PRId64 " is not divisible by tp x pp x cp = %" PRId64
			       " x %" PRId64 " x %" PRId64 " = %" PRId64 "%s",
			       s->gpus, s->tp, s->pp, s->cp, mp, from);
	}
	s->dp = s->gpus / mp;
	strat_prov(s, "dp", STRAT_SRC_DERIVED, "gpus / (tp * pp * cp)", "%" PRId64, s->dp);

	s->ep = u->ep.given ? u->ep_v : 1;
	oprov(s, "ep", &u->ep, "no expert parallel", "%" PRId64, s->ep);
	s->expert_tp = u->etp.given ? u->etp_v : s->tp;
	oprov(s, "expert_tp", &u->etp, "tp (Megatron-Core's default)", "%" PRId64, s->expert_tp);
	s->vp = u->vp.given ? u->vp_v : 1;
	oprov(s, "vp", &u->vp, "no virtual pipeline stages", "%" PRId64, s->vp);

	/* sequence parallel: Megatron turns it off when tp == 1 */
	s->sequence_parallel = u->sp.given ? u->sp_v : false;
	if (s->sequence_parallel && s->tp == 1) {
		s->sequence_parallel = false;
		strat_prov(s, "sequence_parallel", STRAT_SRC_DERIVED,
			   "off: Megatron disables it when tp = 1", "false");
	} else {
		oprov(s, "sequence_parallel", &u->sp, "Megatron default", "%s",
		      s->sequence_parallel ? "true" : "false");
	}

	/* schedule */
	if (u->schedule.given) {
		s->schedule = (enum strat_schedule)u->schedule_i;
		oprov(s, "schedule", &u->schedule, "", "%s", schedule_names[s->schedule]);
	} else {
		const char *why;
		if (s->framework == STRAT_DEEPSPEED) {
			s->schedule = STRAT_SCHED_DS_1F1B;
			why = "DeepSpeed's TrainSchedule";
		} else if (s->vp > 1) {
			s->schedule = STRAT_SCHED_INTERLEAVED;
			why = "vp > 1: Megatron interleaved 1F1B";
		} else {
			s->schedule = STRAT_SCHED_1F1B;
			why = s->framework == STRAT_MEGATRON ? "Megatron 1F1B" : "torch Schedule1F1B";
		}
		strat_prov(s, "schedule", STRAT_SRC_DEFAULT, why, "%s", schedule_names[s->schedule]);
	}
	return TW_OK;
}

/* A Megatron-Core MoE kernel choice (off by default): refused for other frameworks, its
 * provenance shown for MoE models */
static enum tw_result megatron_moe_flag(struct strat_rd *r, const char *key, const struct oval *ov,
					bool v, bool *out)
{
	struct strategy *s = r->s;
	*out = ov->given && v;
	if (ov->given && s->framework != STRAT_MEGATRON)
		return sfail(r, key, "needs framework megatron");
	if (s->framework == STRAT_MEGATRON && (ov->given || (r->m && r->m->experts > 0)))
		oprov(s, key, ov, "Megatron default", "%s", *out ? "true" : "false");
	return TW_OK;
}

/* Megatron-Core's per-layer CUDA graphs, with the rules its TransformerConfig asserts
 * (transformer_config.py) and the captures that would meet a host synchronization */
static enum tw_result check_cuda_graphs(struct strat_rd *r, const struct ours *u)
{
	struct strategy *s = r->s;
	const char *k = "cuda_graph_impl", *km = "cuda_graph_modules";
	bool full = u->cgi.given && u->cgi_i == CG_FULL_ITERATION;
	s->cuda_graph_impl = u->cgi.given && !full ? (enum strat_cg_impl)u->cgi_i : STRAT_CG_NONE;
	s->cuda_graph_modules = u->cgm_v;
	if (full)
		return sfail(r, k, "full_iteration (the whole forward-backward in one graph) is not "
			     "modelled; transformer_engine and local (per-layer graphs) are");
	if ((u->cgi.given || u->cgm.given) && s->framework != STRAT_MEGATRON)
		return sfail(r, u->cgi.given ? k : km, "needs framework megatron (Megatron-Core's CUDA "
			     "graphs)");
	if (s->framework == STRAT_MEGATRON)
		oprov(s, k, &u->cgi, "Megatron default", "%s", cg_impl_names[s->cuda_graph_impl]);
	if (s->cuda_graph_impl == STRAT_CG_NONE) {
		if (u->cgm.given)
			return sfail(r, km, "needs cuda_graph_impl transformer_engine or local (without "
				     "an implementation nothing is captured)");
		return TW_OK;
	}
	unsigned m = s->cuda_graph_modules;
	bool moe = r->m && r->m->experts > 0;
	bool all_moe = moe && r->m->dense_layers == 0 && r->m->moe_layer_freq <= 1;
	bool drop_pad = s->moe_capacity_factor > 0 && s->moe_pad_to_capacity;
	if ((m & STRAT_CG_MOE) && (m & STRAT_CG_MOE_ROUTER))
		return sfail(r, km, "must not contain both moe and moe_router (Megatron-Core)");
	if ((m & STRAT_CG_MOE_PREPROCESS) && !(m & STRAT_CG_MOE_ROUTER))
		return sfail(r, km, "moe_preprocess needs moe_router (Megatron-Core: \"moe_preprocess "
			     "cuda graph is only supported with moe_router cuda graph\")");
	if (!moe && (m & (STRAT_CG_MOE | STRAT_CG_MOE_ROUTER)))
		return sfail(r, km, "moe and moe_router need a mixture-of-experts model");
	if (all_moe && (m & STRAT_CG_MLP))
		return sfail(r, km, "mlp captures dense layers' MLPs, and every layer of %s is MoE",
			     r->m->name);
	if (moe && !drop_pad && (m & STRAT_CG_MOE))
		return sfail(r, km, "moe needs drop-and-pad routing (moe_expert_capacity_factor with "
			     "moe_pad_expert_input_to_capacity): dropless routing synchronizes the "
			     "host inside the MoE block");
	if (moe && !drop_pad && m == 0)
		return sfail(r, u->cgm.given ? km : k, "without cuda_graph_modules (or with []) it "
			     "captures the whole layer, which on a MoE model needs drop-and-pad routing "
			     "(moe_expert_capacity_factor with moe_pad_expert_input_to_capacity): "
			     "dropless routing synchronizes the host inside the MoE block");
	if ((m & STRAT_CG_MOE_PREPROCESS) && s->moe_dispatcher == STRAT_DISPATCH_ALLTOALL &&
	    s->moe_capacity_factor > 0 && !s->moe_pad_to_capacity)
		return sfail(r, km, "moe_preprocess with the alltoall dispatcher and a capacity factor "
			     "would capture its host synchronization (Megatron-Core refuses it)");
	if (s->recompute == STRAT_RECOMPUTE_FULL)
		return sfail(r, k, "does not run with recompute full (Megatron-Core: \"full recompute "
			     "is only supported with full iteration CUDA graph\")");
	if (s->recompute == STRAT_RECOMPUTE_SELECTIVE) {
		unsigned rc = s->recompute_modules;
		if (s->cuda_graph_impl == STRAT_CG_TE && (rc & STRAT_RC_MOE) && (m & STRAT_CG_MOE_ROUTER))
			return sfail(r, km, "moe_router does not run with moe in recompute_modules under "
				     "transformer_engine graphs (Megatron-Core)");
		bool whole = m == 0;
		if (s->attention_dropout != 0 && (whole || (m & STRAT_CG_ATTN)) &&
		    (rc & STRAT_RC_CORE_ATTN))
			return sfail(r, km, "graphed attention recomputes core_attn, which does not run "
				     "with attention dropout (Megatron-Core: set attention_dropout 0)");
		if (s->hidden_dropout != 0 && (((whole || (m & STRAT_CG_MLP)) && (rc & STRAT_RC_MLP)) ||
					       ((whole || (m & STRAT_CG_MOE)) && (rc & STRAT_RC_MOE))))
			return sfail(r, km, "a graphed MLP or MoE block that is recomputed does not run "
				     "with hidden dropout (Megatron-Core: set hidden_dropout 0)");
	}
	char ml[96] = "";
	for (size_t i = 0; i < CG_NMODULES; i++)
		if (m & (1u << i)) {
			size_t n = strlen(ml);
			snprintf(ml + n, sizeof(ml) - n, "%s%s", n ? "," : "", cg_module_names[i]);
		}
	oprov(s, km, &u->cgm, "the whole layer", "%s", m ? ml : "[]");
	return TW_OK;
}

/* The MoE knobs: the busiest expert rank's load (a what-if of dropless routing), Megatron's
 * capacity factor and padding, and
 * Megatron-Core's overlaps with the rules its TransformerConfig asserts (transformer_config.py):
 * the combined 1F1B (overlap_moe_expert_parallel_comm) needs expert parallelism, no full
 * recompute and no recomputed MoE block, a 16-bit model and with a pipeline the interleaved
 * schedule, and excludes the shared-expert overlap; delay_wgrad_compute needs it */
static enum tw_result check_moe_knobs(struct strat_rd *r, const struct ours *u)
{
	struct strategy *s = r->s;
	/* DeepSpeed's MoE layer (Megatron-DeepSpeed's model code) pads every expert to its
	 * capacity: the capacity factor times its mean share while it drops tokens (its default),
	 * else the busiest expert's count; HF's eager blocks under DeepSpeed are dropless */
	bool ds_layer = s->framework == STRAT_DEEPSPEED && s->kernels == STRAT_KERNELS_FUSED;
	s->moe_dropless = u->mdt.given && !u->mdt_v;
	if (u->mdt.given && !ds_layer)
		return sfail(r, "moe_drop_tokens", "is DeepSpeed's MoE layer's (framework deepspeed "
			     "with kernels fused, Megatron-DeepSpeed's model code)");
	if (ds_layer && (u->mdt.given || (r->m && r->m->experts > 0)))
		oprov(s, "moe_drop_tokens", &u->mdt, "DeepSpeed default", "%s",
		      s->moe_dropless ? "false" : "true");
	s->moe_load_imbalance = u->imb.given ? u->imb_v : 1.0;
	if (u->imb.given && r->m && r->m->experts == 0)
		return sfail(r, "moe_load_imbalance", "needs a mixture-of-experts model (%s is dense)",
			     r->m->name);
	if (u->imb.given && s->moe_load_imbalance > 1 && s->ep < 2)
		return sfail(r, "moe_load_imbalance", "needs expert parallelism: ep > 1 (with every "
			     "expert on each rank, imbalance moves work between a rank's own experts)");
	if (u->imb.given && s->moe_load_imbalance > 1 && ds_layer && !s->moe_dropless)
		return sfail(r, "moe_load_imbalance", "DeepSpeed's MoE pads each expert to its "
			     "capacity (capacity_factor) and drops what is over it: imbalance costs it "
			     "tokens, not time (moe_drop_tokens false sizes the capacity by the "
			     "busiest expert)");
	if (u->imb.given || (r->m && r->m->experts > 0))
		oprov(s, "moe_load_imbalance", &u->imb, "balanced routing", "%g",
		      s->moe_load_imbalance);
	/* Megatron-Core's token dropping and padding, with its all-to-all dispatcher */
	s->moe_capacity_factor = u->mcf.given ? u->mcf_v : 0;
	s->moe_pad_to_capacity = u->mpad.given && u->mpad_v;
	if (u->mpad.given && s->framework != STRAT_MEGATRON)
		return sfail(r, "moe_pad_expert_input_to_capacity", "needs framework megatron");
	if (u->mcf.given && s->framework != STRAT_MEGATRON && !ds_layer)
		return sfail(r, "moe_expert_capacity_factor", "needs framework megatron, or "
			     "DeepSpeed's MoE layer (kernels fused)");
	if (u->mcf.given && ds_layer && s->moe_dropless)
		return sfail(r, "moe_expert_capacity_factor", "DeepSpeed ignores it when it does not "
			     "drop tokens (moe_drop_tokens false): the busiest expert sets the capacity");
	if (u->mcf.given && u->mcf_v <= 0)
		return sfail(r, "moe_expert_capacity_factor", "must be > 0 (leave it out for dropless "
			     "routing)");
	if (u->mcf.given && r->m && r->m->experts == 0)
		return sfail(r, "moe_expert_capacity_factor", "needs a mixture-of-experts model (%s is "
			     "dense)", r->m->name);
	if (s->moe_pad_to_capacity && s->moe_dispatcher != STRAT_DISPATCH_ALLTOALL)
		return sfail(r, "moe_pad_expert_input_to_capacity", "is modelled with moe_dispatcher "
			     "alltoall (Megatron-Core's DeepEP manager does not pad to capacity; "
			     "HybridEP's drop_and_pad is not modelled)");
	if (s->moe_pad_to_capacity && !u->mcf.given)
		return sfail(r, "moe_pad_expert_input_to_capacity", "needs moe_expert_capacity_factor "
			     "(Megatron: \"moe_expert_capacity_factor must be set to use "
			     "moe_pad_expert_input_to_capacity\")");
	if (ds_layer && !s->moe_dropless && (u->mcf.given || (r->m && r->m->experts > 0))) {
		s->moe_capacity_factor = u->mcf.given ? u->mcf_v : 1.0;
		oprov(s, "moe_expert_capacity_factor", &u->mcf, "DeepSpeed default", "%g",
		      s->moe_capacity_factor);
	} else if (u->mcf.given) {
		oprov(s, "moe_expert_capacity_factor", &u->mcf, "dropless", "%g",
		      s->moe_capacity_factor);
		oprov(s, "moe_pad_expert_input_to_capacity", &u->mpad, "Megatron default", "%s",
		      s->moe_pad_to_capacity ? "true" : "false");
	}
	TW_CHECK(megatron_moe_flag(r, "moe_permute_fusion", &u->mpf, u->mpf_v, &s->moe_permute_fusion));
	TW_CHECK(megatron_moe_flag(r, "moe_grouped_gemm", &u->mgg, u->mgg_v, &s->moe_grouped_gemm));
	TW_CHECK(megatron_moe_flag(r, "moe_router_fusion", &u->mrf, u->mrf_v, &s->moe_router_fusion));
	/* Megatron-Core's load-balancing loss: only whether it is on changes the step */
	s->moe_aux_loss_coeff = u->aux.given ? u->aux_v : 0;
	if (u->aux.given && s->framework != STRAT_MEGATRON)
		return sfail(r, "moe_aux_loss_coeff", "needs framework megatron (DeepSpeed's gates "
			     "always compute their loss)");
	if (u->aux.given && r->m && r->m->experts == 0)
		return sfail(r, "moe_aux_loss_coeff", "needs a mixture-of-experts model (%s is dense)",
			     r->m->name);
	if (s->framework == STRAT_MEGATRON && (u->aux.given || (r->m && r->m->experts > 0)))
		oprov(s, "moe_aux_loss_coeff", &u->aux, "Megatron default", "%g",
		      s->moe_aux_loss_coeff);
	s->moe_z_loss_coeff = u->zl.given ? u->zl_v : 0;
	if (u->zl.given && s->framework != STRAT_MEGATRON)
		return sfail(r, "moe_z_loss_coeff", "needs framework megatron");
	if (u->zl.given && r->m && r->m->experts == 0)
		return sfail(r, "moe_z_loss_coeff", "needs a mixture-of-experts model (%s is dense)",
			     r->m->name);
	if (s->framework == STRAT_MEGATRON && (u->zl.given || (r->m && r->m->experts > 0)))
		oprov(s, "moe_z_loss_coeff", &u->zl, "Megatron default", "%g", s->moe_z_loss_coeff);
	/* DeepSpeed's min_capacity: no expert's capacity below it */
	s->moe_min_capacity = u->mcap.given ? u->mcap_v : 4;
	if (u->mcap.given && !ds_layer)
		return sfail(r, "moe_min_capacity", "is DeepSpeed's MoE layer's (framework deepspeed "
			     "with kernels fused, Megatron-DeepSpeed's model code)");
	if (ds_layer && (u->mcap.given || (r->m && r->m->experts > 0)))
		oprov(s, "moe_min_capacity", &u->mcap, "DeepSpeed default", "%" PRId64,
		      s->moe_min_capacity);
	s->moe_shared_overlap = u->mso.given && u->mso_v;
	if (s->framework != STRAT_MEGATRON && u->mso.given)
		return sfail(r, "moe_shared_expert_overlap", "needs framework megatron");
	if (s->moe_shared_overlap && r->m && r->m->shared_experts == 0)
		return sfail(r, "moe_shared_expert_overlap", "needs a model with shared experts (%s has "
			     "none)", r->m->name);
	if (s->framework == STRAT_MEGATRON && (u->mso.given || (r->m && r->m->shared_experts > 0)))
		oprov(s, "moe_shared_expert_overlap", &u->mso, "Megatron default", "%s",
		      s->moe_shared_overlap ? "true" : "false");
	const char *k = "overlap_moe_expert_parallel_comm";
	s->moe_a2a_overlap = u->moeo.given && u->moeo_v;
	if (s->framework != STRAT_MEGATRON && u->moeo.given)
		return sfail(r, k, "needs framework megatron (Megatron-Core's combined 1F1B schedule)");
	if (s->framework == STRAT_MEGATRON)
		oprov(s, k, &u->moeo, "Megatron default", "%s", s->moe_a2a_overlap ? "true" : "false");
	s->delay_wgrad = u->dwg.given && u->dwg_v;
	if (u->dwg.given && s->framework != STRAT_MEGATRON)
		return sfail(r, "delay_wgrad_compute", "needs framework megatron");
	if (s->delay_wgrad && !s->moe_a2a_overlap)
		return sfail(r, "delay_wgrad_compute", "needs overlap_moe_expert_parallel_comm (Megatron: "
			     "\"overlap_moe_expert_parallel_comm must be enabled when enabling "
			     "delay_wgrad_compute\")");
	if (s->framework == STRAT_MEGATRON && (u->dwg.given || s->moe_a2a_overlap))
		oprov(s, "delay_wgrad_compute", &u->dwg, "Megatron default", "%s",
		      s->delay_wgrad ? "true" : "false");
	if (!s->moe_a2a_overlap)
		return TW_OK;
	if (r->m && r->m->experts == 0)
		return sfail(r, k, "needs a mixture-of-experts model (%s is dense)", r->m->name);
	if (s->ep < 2)
		return sfail(r, k, "needs expert parallelism: ep > 1 (ep=%" PRId64 ")", s->ep);
	if (s->recompute == STRAT_RECOMPUTE_FULL)
		return sfail(r, k, "does not run with recompute full (Megatron: \"disable full "
			     "recomputation when enabling overlap_moe_expert_parallel_comm\")");
	if (s->recompute == STRAT_RECOMPUTE_SELECTIVE && (s->recompute_modules & STRAT_RC_MOE))
		return sfail(r, k, "does not run with moe in recompute_modules");
	if (s->param_dtype != TW_BF16 && s->param_dtype != TW_FP16)
		return sfail(r, k, "needs a bf16 or fp16 model (precision is fp32)");
	if (s->moe_shared_overlap)
		return sfail(r, k, "does not run with moe_shared_expert_overlap (Megatron: \"disable "
			     "moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm\")");
	if (s->pp > 1 && !(s->schedule == STRAT_SCHED_INTERLEAVED && s->vp > 1))
		return sfail(r, k, "with pp > 1 needs schedule interleaved with vp > 1 (Megatron: "
			     "\"virtual_pipeline_model_parallel_size must be specified\")");
	return TW_OK;
}

/* Rules between degrees and framework, independent of the model. */
static enum tw_result check_framework(struct strat_rd *r, const struct ours *u)
{
	struct strategy *s = r->s;
	const char *sched = schedule_names[s->schedule];
	if (s->framework == STRAT_DEEPSPEED) {
		if (s->schedule != STRAT_SCHED_DS_1F1B)
			return sfail(r, "schedule",
				     "schedule %s: DeepSpeed's pipeline runs only its TrainSchedule "
				     "(ds-1f1b)",
				     sched);
		if (s->vp > 1)
			return sfail(r, "vp",
				     "vp=%" PRId64 ": DeepSpeed's pipeline has no interleaved schedule "
				     "(vp must be 1 with framework deepspeed)",
				     s->vp);
		if (s->pp > 1 && s->zero_stage >= 2)
			return tw_errf(r->err, TW_ERR_INVALID,
				       "%s: zero_optimization.stage=%d with pp=%" PRId64
				       ": ZeRO-2 and ZeRO-3 are incompatible with pipeline "
				       "parallelism (DeepSpeed)",
				       strat_label(r, STRAT_TREE_DS, "zero_optimization.stage"),
				       s->zero_stage, s->pp);
		if (u->distopt.given && u->distopt_v)
			return sfail(r, "distributed_optimizer",
				     "distributed_optimizer is Megatron's; with DeepSpeed use "
				     "zero_optimization.stage 1");
	} else {
		if (s->schedule == STRAT_SCHED_DS_1F1B)
			return sfail(r, "schedule",
				     "schedule ds-1f1b is DeepSpeed's; framework %s runs 1f1b, "
				     "interleaved or gpipe",
				     fw_name(s->framework));
		if (s->framework == STRAT_FSDP && u->distopt.given && u->distopt_v)
			return sfail(r, "distributed_optimizer",
				     "distributed_optimizer is Megatron's; FSDP shards by "
				     "fsdp.sharding_strategy");
	}
	if (u->has_fsdp && s->framework != STRAT_FSDP)
		return tw_errf(r->err, TW_ERR_INVALID, "%s: fsdp options need framework fsdp "
			       "(framework is %s)", u->fsdp_label, fw_name(s->framework));
	if (s->schedule == STRAT_SCHED_INTERLEAVED && s->vp < 2)
		return sfail(r, "schedule", "schedule interleaved needs vp >= 2 (vp=%" PRId64 ")",
			     s->vp);
	if (s->vp > 1 && s->schedule != STRAT_SCHED_INTERLEAVED)
		return sfail(r, "vp", "vp=%" PRId64 " needs schedule interleaved (schedule is %s)",
			     s->vp, sched);
	if (s->vp > 1 && s->pp < 2)
		return sfail(r, "vp", "vp=%" PRId64 " needs pp > 1 (pp=%" PRId64 ")", s->vp, s->pp);
	if (s->expert_tp != s->tp && s->framework != STRAT_MEGATRON)
		return sfail(r, "expert_tp",
			     "expert_tp=%" PRId64 " differs from tp=%" PRId64 ": a separate expert "
			     "tensor-parallel degree is Megatron-Core's (framework is %s)",
			     s->expert_tp, s->tp, fw_name(s->framework));
	if (s->expert_tp != s->tp && strat_ep_span(s) % (s->expert_tp * s->ep))
		return sfail(r, "expert_tp",
			     "expert_tp x ep = %" PRId64 " x %" PRId64 " does not divide tp x dp x cp = %"
			     PRId64 " (Megatron-Core folds the expert groups over a stage's ranks)",
			     s->expert_tp, s->ep, strat_ep_span(s));
	if (s->ep <= 1 || (s->dp * strat_ep_cp(s)) % s->ep == 0 || s->expert_tp != s->tp)
		return TW_OK;
	if (s->framework == STRAT_MEGATRON)
		return sfail(r, "ep",
			     "strategy.ep=%" PRId64 " does not divide dp x cp=%" PRId64
			     " (Megatron-Core forms expert-parallel groups from data- and "
			     "context-parallel ranks unless expert_tp folds them over tp as well)",
			     s->ep, s->dp * s->cp);
	return sfail(r, "ep",
		     "strategy.ep=%" PRId64 " does not divide dp=%" PRId64
		     " (expert-parallel groups are formed from data-parallel ranks)",
		     s->ep, s->dp);
}

/* Batch for Megatron and FSDP: global = micro x grad_accum x dp (Megatron's wording). */
static enum tw_result batch_megatron(struct strat_rd *r)
{
	struct strategy *s = r->s;
	int64_t mb = r->our_mb.given ? r->our_mb.v : 1, ga, gb, unit;
	strat_prov(s, "micro_batch", r->our_mb.given ? (r->our_mb.from_set ? STRAT_SRC_SET : STRAT_SRC_FILE)
						     : STRAT_SRC_DEFAULT,
		   r->our_mb.given ? r->our_mb.why : "twin default", "%" PRId64, mb);
	if (!tw_mul64(mb, s->dp, &unit))
		return sfail(r, "micro_batch", "micro_batch x dp overflows 64 bits");
	if (r->our_gb.given) {
		gb = r->our_gb.v;
		if (gb % unit)
			return sfail(r, "global_batch",
				     "global batch size (%" PRId64 ") is not divisible by micro batch "
				     "size (%" PRId64 ") times data parallel size (%" PRId64 ")",
				     gb, mb, s->dp);
		ga = gb / unit;
		if (r->our_ga.given && r->our_ga.v != ga)
			return sfail(r, "grad_accum",
				     "grad_accum=%" PRId64 " but global_batch / (micro_batch x dp) = %" PRId64
				     " / (%" PRId64 " x %" PRId64 ") = %" PRId64,
				     r->our_ga.v, gb, mb, s->dp, ga);
		strat_prov(s, "grad_accum", STRAT_SRC_DERIVED, "global_batch / (micro_batch * dp)",
			   "%" PRId64, ga);
		strat_prov(s, "global_batch", r->our_gb.from_set ? STRAT_SRC_SET : STRAT_SRC_FILE,
			   r->our_gb.why, "%" PRId64, gb);
	} else {
		ga = r->our_ga.given ? r->our_ga.v : 1;
		strat_prov(s, "grad_accum",
			   r->our_ga.given ? (r->our_ga.from_set ? STRAT_SRC_SET : STRAT_SRC_FILE)
					   : STRAT_SRC_DEFAULT,
			   r->our_ga.given ? r->our_ga.why : "no accumulation", "%" PRId64, ga);
		if (!tw_mul64(unit, ga, &gb))
			return sfail(r, "grad_accum", "micro_batch x grad_accum x dp overflows 64 bits");
		strat_prov(s, "global_batch", STRAT_SRC_DERIVED, "micro_batch * grad_accum * dp",
			   "%" PRId64, gb);
	}
	s->micro_batch = mb;
	s->grad_accum = ga;
	s->global_batch = gb;
	return TW_OK;
}

/* Rules between the strategy and the model. */
/* both uneven stage sizes given */
static bool uneven2(const struct strategy *s)
{
	return s->first_stage_layers > 0 && s->last_stage_layers > 0;
}

static enum tw_result check_model(struct strat_rd *r)
{
	struct strategy *s = r->s;
	const struct model *m = r->m;
	if (!m)
		return TW_OK;
	const char *mn = m->name[0] ? m->name : "model";
	if (m->heads > 0 && m->heads % s->tp)
		return sfail(r, "tp", "strategy.tp=%" PRId64 " does not divide model.heads=%" PRId64 " (%s)",
			     s->tp, m->heads, mn);
	if (m->kv_heads > 0 && m->kv_heads % s->tp)
		return sfail(r, "tp",
			     "strategy.tp=%" PRId64 " does not divide model.kv_heads=%" PRId64 " (%s)",
			     s->tp, m->kv_heads, mn);
	if (m->ffn_hidden > 0 && m->ffn_hidden % s->tp)
		return sfail(r, "tp",
			     "strategy.tp=%" PRId64 " does not divide model.ffn_hidden=%" PRId64 " (%s)",
			     s->tp, m->ffn_hidden, mn);
	if (m->experts > 0 && m->expert_ffn_hidden > 0 && m->expert_ffn_hidden % s->expert_tp)
		return sfail(r, s->expert_tp == s->tp ? "tp" : "expert_tp",
			     "strategy.%s=%" PRId64 " does not divide model.expert_ffn_hidden=%" PRId64
			     " (%s): experts are tensor-parallel like the MLP",
			     s->expert_tp == s->tp ? "tp" : "expert_tp", s->expert_tp,
			     m->expert_ffn_hidden, mn);
	if (m->layers > 0 && s->pp > m->layers)
		return sfail(r, "pp",
			     "strategy.pp=%" PRId64 " is larger than model.layers=%" PRId64
			     " (%s): every stage needs a layer",
			     s->pp, m->layers, mn);
	bool uneven = s->first_stage_layers > 0 || s->last_stage_layers > 0;
	if (m->layers > 0 && uneven) {
		/* Megatron-Core: the middle stages share what the first and the last leave */
		int64_t rest = m->layers - s->first_stage_layers - s->last_stage_layers;
		int64_t mid = s->pp - (s->first_stage_layers > 0) - (s->last_stage_layers > 0);
		const char *k = s->first_stage_layers > 0 ? "first_stage_layers" : "last_stage_layers";
		char given[96];
		if (uneven2(s))
			snprintf(given, sizeof(given),
				 "first_stage_layers=%" PRId64 " and last_stage_layers=%" PRId64,
				 s->first_stage_layers, s->last_stage_layers);
		else
			snprintf(given, sizeof(given), "%s=%" PRId64, k,
				 s->first_stage_layers > 0 ? s->first_stage_layers
							   : s->last_stage_layers);
		if (rest < 0)
			return sfail(r, k, "%s exceed%s model.layers=%" PRId64 " (%s)", given,
				     uneven2(s) ? "" : "s", m->layers, mn);
		if (mid == 0 && rest != 0)
			return sfail(r, k, "%s with pp=%" PRId64 " leave no other stage, so they must "
				     "add up to model.layers=%" PRId64 " (%s)", given, s->pp, m->layers, mn);
		if (rest < mid || (mid > 0 && rest % mid))
			return sfail(r, k, "%s leave%s %" PRId64 " of model.layers=%" PRId64 " (%s) for "
				     "the other %" PRId64 " stages: they must split it equally, a layer "
				     "or more each", given, uneven2(s) ? "" : "s", rest, m->layers, mn,
				     mid);
		/* Megatron-Core: under interleaving every stage's count splits over its vp chunks */
		int64_t bad = s->first_stage_layers % s->vp ? s->first_stage_layers
			      : s->last_stage_layers % s->vp ? s->last_stage_layers
			      : mid > 0 && (rest / mid) % s->vp ? rest / mid : 0;
		if (s->vp > 1 && bad)
			return sfail(r, k, "%s: a stage of %" PRId64 " layer%s does not split over "
				     "vp=%" PRId64 " model chunks (Megatron: each stage's layers must be "
				     "divisible by vp)", given, bad, bad == 1 ? "" : "s", s->vp);
	} else if (m->layers > 0 && s->framework != STRAT_DEEPSPEED && !s->embed_in_split &&
		   !s->loss_in_split && m->layers % s->pp)
		return sfail(r, "pp",
			     "strategy.pp=%" PRId64 " does not divide model.layers=%" PRId64
			     " (%s): %s needs equal stages%s",
			     s->pp, m->layers, mn, fw_name(s->framework),
			     s->framework == STRAT_MEGATRON
				     ? " (Megatron: or first_stage_layers / last_stage_layers)" : "");
	if (s->vp > 1 && m->layers > 0 && !uneven && !s->embed_in_split && !s->loss_in_split &&
	    (m->layers / s->pp) % s->vp)
		return sfail(r, "vp",
			     "strategy.vp=%" PRId64 " does not divide the %" PRId64
			     " layers per stage (model.layers=%" PRId64 " / pp=%" PRId64 ")",
			     s->vp, m->layers / s->pp, m->layers, s->pp);
	if (s->ep > 1 && m->experts <= 0)
		return sfail(r, "ep", "strategy.ep=%" PRId64 " but %s has no experts", s->ep, mn);
	if (s->ep > 1 && m->experts % s->ep)
		return sfail(r, "ep",
			     "strategy.ep=%" PRId64 " does not divide model.experts=%" PRId64 " (%s)",
			     s->ep, m->experts, mn);
	int64_t seq = s->seq_len;
	if (m->pos == MODEL_POS_LEARNED && m->max_pos > 0 && seq > m->max_pos)
		return sfail(r, "seq_len",
			     "seq_len=%" PRId64 " is longer than %s's learned position table "
			     "(max_position=%" PRId64 "): positions past it have no embedding",
			     seq, mn, m->max_pos);
	bool chunked = s->cp_kind == STRAT_CP_RING || s->cp_kind == STRAT_CP_ALLGATHER;
	if (s->cp > 1 && chunked && seq % (2 * s->cp))
		return sfail(r, "cp",
			     "strategy.cp=%" PRId64 ": seq_len=%" PRId64
			     " must be divisible by 2 x cp (cp_kind %s splits the sequence into "
			     "2 x cp chunks)",
			     s->cp, seq, cp_kind_names[s->cp_kind]);
	/* Transformer Engine's ring (its p2p cp_comm_type) refuses sliding windows; its all-to-all
	 * and KV all-gather run them, and PyTorch's ring attention (SDPA, either rotation) has no
	 * window */
	bool ring_like = s->cp_kind == STRAT_CP_RING ||
			 (s->cp_kind == STRAT_CP_ALLGATHER && s->framework != STRAT_MEGATRON);
	if (s->cp > 1 && ring_like && m->sliding_window > 0 && model_local_layers(m) > 0 &&
	    m->sliding_window < seq)
		return sfail(r, "cp_kind",
			     "strategy.cp_kind=%s: %s does not run %s's sliding window (%" PRId64
			     " tokens): use cp_kind ulysses (all-to-all)%s",
			     cp_kind_names[s->cp_kind],
			     s->framework == STRAT_MEGATRON
				     ? "Transformer Engine's p2p ring attention"
				     : "PyTorch's ring attention",
			     mn, m->sliding_window,
			     s->framework == STRAT_MEGATRON ? " or allgather (its KV all-gather)" : "");
	if (s->cp > 1 && s->cp_kind == STRAT_CP_ULYSSES) {
		if (seq % s->cp)
			return sfail(r, "cp",
				     "strategy.cp=%" PRId64 " does not divide seq_len=%" PRId64,
				     s->cp, seq);
		if (m->heads > 0 && (m->heads / s->tp) % s->cp)
			return sfail(r, "cp",
				     "strategy.cp=%" PRId64 " (Ulysses) does not divide the %" PRId64
				     " attention head%s per tensor-parallel rank",
				     s->cp, m->heads / s->tp, m->heads / s->tp == 1 ? "" : "s");
	}
	if (s->sequence_parallel && seq % s->tp)
		return sfail(r, "sequence_parallel",
			     "sequence parallel splits the sequence over tp: seq_len=%" PRId64
			     " is not divisible by tp=%" PRId64,
			     seq, s->tp);
	if (s->lora_rank > 0 && m->hidden > 0 && s->lora_rank > m->hidden)
		return sfail(r, "lora.rank",
			     "lora.rank=%" PRId64 " is larger than model.hidden=%" PRId64,
			     s->lora_rank, m->hidden);
	if (s->recompute == STRAT_RECOMPUTE_OP && (m->experts > 0 || m->kv_lora_rank > 0))
		return sfail(r, "recompute", "recompute op (torchtitan's selective op AC) is "
			     "modelled for dense models with plain attention; %s has %s", mn,
			     m->experts > 0 ? "experts" : "MLA attention (kv_lora_rank)");
	return TW_OK;
}

static void put_degree_placeholders(struct strategy *s)
{
	/* fix the print order: identity, degrees, batch first */
	static const char *const order[] = {"framework", "deepspeed_version", "gpus", "tp", "pp",
					    "cp", "cp_kind", "dp", "ep", "expert_tp", "vp", "sequence_parallel",
					    "schedule", "train_batch_size",
					    "train_micro_batch_size_per_gpu",
					    "gradient_accumulation_steps", "micro_batch", "grad_accum",
					    "global_batch", "micro_batches_per_step", "seq_len", NULL};
	for (int i = 0; order[i]; i++)
		strat_prov(s, order[i], STRAT_SRC_DEFAULT, "", "%s", "");
}

static void drop_placeholders(struct strategy *s)
{
	int k = 0;
	for (int i = 0; i < s->nprov; i++)
		if (s->prov[i].value[0])
			s->prov[k++] = s->prov[i];
	s->nprov = k;
}

/* nccl_algo / nccl_proto (NCCL_ALGO / NCCL_PROTO): *no = what the text takes from the tuner,
 * the text kept in out; "" leaves all */
bool strat_nccl_list(const char *text, bool protos, unsigned *no, unsigned *named, char *why,
		     size_t why_len)
{
	static const char *const unmodelled[] = { "collnetdirect", "collnetchain", NULL };
	int n = protos ? STRAT_NCCL_PROTOS : STRAT_NCCL_ALGOS;
	unsigned set = nccl_set(text, protos ? strat_nccl_proto_names : strat_nccl_algo_names, n,
				protos ? NULL : unmodelled, why, why_len);
	*no = ((1u << n) - 1) & ~set;
	*named = text[0] != '^' ? set : 0;
	return set != 0;
}

/* the strategy's nccl_algo / nccl_proto (NCCL_ALGO / NCCL_PROTO as the job sets them) */
static enum tw_result nccl_env(struct strat_rd *r, const char *key, const char *env, const char *text,
			       bool protos, unsigned *no, unsigned *named, char *out, size_t cap)
{
	*no = *named = 0;
	if (!text[0])
		return TW_OK;
	char why[192];
	if (!strat_nccl_list(text, protos, no, named, why, sizeof(why)))
		return sfail(r, key, "%s (%s): %s", key, env, why);
	snprintf(out, cap, "%s", text);
	return TW_OK;
}

static enum tw_result resolve(struct strat_rd *r, const struct strat_inputs *in, struct trees *t)
{
	struct strategy *s = r->s;
	struct ours u;
	TW_CHECK(parse_ours(r, t->ours, &u));

	s->framework = u.framework.given ? (enum strat_framework)u.framework_i : STRAT_DEEPSPEED;
	put_degree_placeholders(s);
	oprov(s, "framework", &u.framework, "twin default", "%s", fw_name(s->framework));
	snprintf(s->deepspeed_version, sizeof(s->deepspeed_version), "%s", u.version_v);
	s->ds_fetch_per_param = r->version < STRAT_VERSION(0, 5, 5);
	s->ds_fetch_sync = s->ds_rs_per_param = r->version < STRAT_VERSION(0, 6, 0);
	s->ds_fetch_norm = s->ds_fetch_sync && r->version >= STRAT_VERSION(0, 3, 15);
	s->ds_reduce_rooted = r->version < STRAT_VERSION(0, 12, 4) || r->version >= STRAT_VERSION(0, 13, 0);
	s->ds_ratio_last = r->version >= STRAT_VERSION(0, 18, 0);
	s->ds_pipe_list_gather = r->version < STRAT_VERSION(0, 12, 4);
	s->ds_pipe_meta_sync = r->version < STRAT_VERSION(0, 12, 6);
	if (s->framework == STRAT_DEEPSPEED)
		oprov(s, "deepspeed_version", &u.version, "DeepSpeed master at the time of writing",
		      "%s", s->deepspeed_version);
	if (t->ds && s->framework != STRAT_DEEPSPEED)
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: a ds_config is read only with framework deepspeed (framework is %s)",
			       r->ds_file, fw_name(s->framework));

	/* DeepSpeed semantics; for the other frameworks only to fill the ZeRO fields */
	r->ds_prov = s->framework == STRAT_DEEPSPEED;
	cJSON *empty = NULL;
	const cJSON *ds = t->ds;
	if (!ds)
		ds = empty = cJSON_CreateObject();
	enum tw_result rc = strat_ds_parse(r, ds);
	cJSON_Delete(empty);
	TW_CHECK(rc);

	/* precision: for deepspeed the ds_config decides; our key must agree */
	if (s->framework == STRAT_DEEPSPEED && u.precision.given && !t->ds) {
		/* no ds_config: our precision stands for its fp16/bf16 sections */
		enum tw_dtype d = precision_types[u.precision_i];
		s->param_dtype = s->grad_accum_dtype = s->comm_dtype = d;
		s->loss_scaling = d == TW_FP16;
		oprov(s, "precision", &u.precision, "", "%s", tw_dtype_name(d));
		strat_prov(s, "fp16.enabled", STRAT_SRC_DERIVED, "strategy precision", "%s",
			   d == TW_FP16 ? "true" : "false");
		strat_prov(s, "bf16.enabled", STRAT_SRC_DERIVED, "strategy precision", "%s",
			   d == TW_BF16 ? "true" : "false");
		strat_prov(s, "data_types.grad_accum_dtype", STRAT_SRC_DERIVED, "the model dtype",
			   "%s", tw_dtype_name(d));
		strat_prov(s, "communication_data_type", STRAT_SRC_DERIVED, "the model dtype", "%s",
			   tw_dtype_name(d));
	}
	if (s->framework == STRAT_DEEPSPEED) {
		if (u.precision.given && !r->fp16_auto && !r->bf16_auto &&
		    precision_types[u.precision_i] != s->param_dtype)
			return sfail(r, "precision",
				     "precision=%s disagrees with %s, which runs %s (fp16.enabled / "
				     "bf16.enabled)",
				     precision_names[u.precision_i],
				     r->ds_file ? r->ds_file : "the DeepSpeed defaults",
				     tw_dtype_name(s->param_dtype));
		if (u.optimizer.given && !r->ds_optimizer_given) {
			s->optimizer = (enum strat_optimizer)u.optimizer_i;
			oprov(s, "optimizer", &u.optimizer, "", "%s", optimizer_names[u.optimizer_i]);
		}
	} else {
		/* bf16 where the GPU has it (Ampere on), else fp16 (V100, T4) */
		bool no_bf16 = r->c && r->c->gpu.name[0] && r->c->gpu.peak_tflops[TW_BF16] <= 0;
		s->param_dtype = u.precision.given ? precision_types[u.precision_i]
			       : no_bf16 ? TW_FP16 : TW_BF16;
		oprov(s, "precision", &u.precision,
		      no_bf16 ? "twin default for megatron and fsdp on a GPU without bf16"
			      : "twin default for megatron and fsdp",
		      "%s", tw_dtype_name(s->param_dtype));
		if (s->framework == STRAT_MEGATRON && s->param_dtype == TW_BF16 && u.grb.given && u.grb_v) {
			/* Megatron-LM --grad-reduce-in-bf16 */
			s->grad_accum_dtype = TW_BF16;
			oprov(s, "grad_reduce_in_bf16", &u.grb, "", "true");
			strat_prov(s, "grad_accum_dtype", STRAT_SRC_DERIVED,
				   "grad_reduce_in_bf16: main grads and their reduction in bf16", "bf16");
		} else if (s->framework == STRAT_MEGATRON && s->param_dtype == TW_BF16) {
			s->grad_accum_dtype = TW_FP32;
			strat_prov(s, "grad_accum_dtype", STRAT_SRC_DERIVED,
				   "Megatron accumulates bf16 grads in fp32", "fp32");
		} else {
			s->grad_accum_dtype = s->param_dtype;
			strat_prov(s, "grad_accum_dtype", STRAT_SRC_DERIVED,
				   s->framework == STRAT_FSDP ? "FSDP reduce_dtype = param_dtype"
							      : "the model dtype",
				   "%s", tw_dtype_name(s->grad_accum_dtype));
		}
		s->comm_dtype = s->grad_accum_dtype;
		s->loss_scaling = s->param_dtype == TW_FP16;
		s->check_grad_overflow = false;
		s->gradient_clipping = 1.0;
		strat_prov(s, "gradient_clipping", STRAT_SRC_DEFAULT,
			   s->framework == STRAT_MEGATRON ? "Megatron default clip_grad"
							  : "HF Trainer max_grad_norm default",
			   "1");
		s->optimizer = u.optimizer.given ? (enum strat_optimizer)u.optimizer_i
						 : STRAT_OPT_ADAMW;
		oprov(s, "optimizer", &u.optimizer,
		      s->framework == STRAT_MEGATRON ? "Megatron default (adam, decoupled decay)"
						     : "twin default",
		      "%s", optimizer_names[s->optimizer]);
		s->offload_optimizer = s->offload_param = STRAT_OFFLOAD_NONE;
		s->partition_activations = s->cpu_checkpointing = false;
		s->pipe_partitioned = s->grad_partitioned = false;
	}
	if (s->framework == STRAT_MEGATRON) {
		s->distributed_optimizer = u.distopt.given && u.distopt_v;
		oprov(s, "distributed_optimizer", &u.distopt, "Megatron default", "%s",
		      s->distributed_optimizer ? "true" : "false");
		s->zero_stage = s->distributed_optimizer ? 1 : 0;
		strat_prov(s, "zero_stage", STRAT_SRC_DERIVED,
			   s->distributed_optimizer ? "distributed optimizer shards states like ZeRO-1"
						    : "optimizer states replicated",
			   "%d", s->zero_stage);
		s->overlap_grad_reduce = u.ogr.given && u.ogr_v;
		s->overlap_param_gather = u.opg.given && u.opg_v;
		oprov(s, "overlap_grad_reduce", &u.ogr, "Megatron default", "%s",
		      s->overlap_grad_reduce ? "true" : "false");
		oprov(s, "overlap_param_gather", &u.opg, "Megatron default", "%s",
		      s->overlap_param_gather ? "true" : "false");
		if (s->overlap_param_gather && !s->distributed_optimizer)
			return sfail(r, "overlap_param_gather",
				     "needs distributed_optimizer (Megatron's rule)");
		s->tp_comm_overlap = u.tpo.given && u.tpo_v;
		oprov(s, "tp_comm_overlap", &u.tpo, "Megatron default", "%s",
		      s->tp_comm_overlap ? "true" : "false");
		s->async_tp_allreduce = !u.atp.given || u.atp_v;
		oprov(s, "async_tensor_model_parallel_allreduce", &u.atp, "Megatron default", "%s",
		      s->async_tp_allreduce ? "true" : "false");
		/* gradient buckets reduced as they fill, on the DP stream */
		s->overlap_comm = s->overlap_grad_reduce;
	} else if (s->framework == STRAT_FSDP) {
		s->fsdp_sharding = u.fsdp_sharding.given ? (enum strat_fsdp)u.fsdp_i
							 : STRAT_FSDP_FULL_SHARD;
		oprov(s, "fsdp.sharding_strategy", &u.fsdp_sharding, "PyTorch FSDP default", "%s",
		      fsdp_names[s->fsdp_sharding]);
		s->fsdp_version = u.fsdp_version.given ? (int)u.fsdp_version_v : 1;
		oprov(s, "fsdp.version", &u.fsdp_version, "FSDP's flat parameters (FSDP1)", "%d",
		      s->fsdp_version);
		if (u.fsdp_reduce.given) { /* MixedPrecision(Policy).reduce_dtype */
			s->comm_dtype = precision_types[u.fsdp_reduce_i];
			oprov(s, "fsdp.reduce_dtype", &u.fsdp_reduce, "", "%s",
			      tw_dtype_name(s->comm_dtype));
		}
		static const int zs[] = {3, 2, 3, 0};
		s->zero_stage = zs[s->fsdp_sharding];
		strat_prov(s, "zero_stage", STRAT_SRC_DERIVED, "what the sharding strategy shards",
			   "%d", s->zero_stage);
		s->overlap_comm = true; /* FSDP prefetches and reduces on its own streams */
	}
	if (s->framework != STRAT_MEGATRON && (u.ogr.given || u.opg.given))
		return sfail(r, u.ogr.given ? "overlap_grad_reduce" : "overlap_param_gather",
			     "needs framework megatron (DeepSpeed: zero_optimization.overlap_comm)");
	if (s->framework != STRAT_MEGATRON && u.tpo.given)
		return sfail(r, "tp_comm_overlap", "needs framework megatron");
	if (s->framework != STRAT_MEGATRON && u.op2p.given)
		return sfail(r, "overlap_p2p_comm", "needs framework megatron");
	if (s->framework != STRAT_MEGATRON && u.sgp.given)
		return sfail(r, "scatter_gather_tensors_in_pipeline",
			     "needs framework megatron (DeepSpeed: pipeline.pipe_partitioned)");
	if (s->framework != STRAT_MEGATRON && u.atp.given)
		return sfail(r, "async_tensor_model_parallel_allreduce", "needs framework megatron");
	if (u.grb.given && u.grb_v && (s->framework != STRAT_MEGATRON || s->param_dtype != TW_BF16))
		return sfail(r, "grad_reduce_in_bf16", "needs framework megatron with precision bf16");
	if (s->framework != STRAT_FSDP && u.fsdp_group.given)
		return sfail(r, "fsdp.shard_group_size", "needs framework fsdp");

	s->recompute = u.recompute.given ? (enum strat_recompute)u.recompute_i : STRAT_RECOMPUTE_NONE;
	s->recompute_num_layers = u.rnl.given ? u.rnl_v : 0;
	s->recompute_modules = u.rcm.given ? u.rcm_v : STRAT_RC_CORE_ATTN;
	s->flash_attention = u.flash.given ? u.flash_v : true;
	s->fp8_gemm = u.fp8.given && u.fp8_v;
	s->tf32 = u.tf32.given && u.tf32_v;
	s->host_op_us = u.host_op.given ? u.host_op_v : STRAT_HOST_OP_US;
	s->lora_rank = u.has_lora ? u.lora_rank_v : 0;
	s->lora_targets = u.has_lora ? u.lora_targets_v : 0;

	TW_CHECK(resolve_degrees(r, in, &u));
	TW_CHECK(check_framework(r, &u));
	if (s->framework == STRAT_MEGATRON) {
		/* Megatron-LM overlaps the interleaved schedule's p2p (on by default since
		 * 2023-10, --no-overlap-p2p-communication) and turns it off for the others */
		bool inter = s->schedule == STRAT_SCHED_INTERLEAVED && s->vp > 1;
		if (u.op2p.given && u.op2p_v && !inter)
			return sfail(r, "overlap_p2p_comm",
				     "needs schedule interleaved (Megatron: \"non-interleaved schedule "
				     "does not support overlapping p2p communication\")");
		s->overlap_p2p_comm = inter && (!u.op2p.given || u.op2p_v);
		oprov(s, "overlap_p2p_comm", &u.op2p,
		      inter ? "Megatron default" : "Megatron: interleaved schedule only", "%s",
		      s->overlap_p2p_comm ? "true" : "false");
		s->scatter_gather_p2p = u.sgp.given && u.sgp_v;
		oprov(s, "scatter_gather_tensors_in_pipeline", &u.sgp,
		      "Megatron-Core default (Megatron-LM's from 2021-02 to 2023-01)", "%s",
		      s->scatter_gather_p2p ? "true" : "false");
	}
	/* Megatron's own model code has fused kernels, and so has Megatron-DeepSpeed's, the code
	 * DeepSpeed runs with tensor or pipeline parallelism; a DeepSpeed job without them, and
	 * FSDP, run HF transformers (or torchtitan) modules in eager PyTorch */
	bool megatron_code = s->framework == STRAT_MEGATRON ||
			     (s->framework == STRAT_DEEPSPEED && (s->tp > 1 || s->pp > 1));
	s->kernels = u.kernels.given ? (enum strat_kernels)u.kernels_i
				     : megatron_code ? STRAT_KERNELS_FUSED : STRAT_KERNELS_EAGER;
	/* Megatron's --hidden-dropout and --attention-dropout default to 0.1; the HF / torchtitan
	 * configs of today's LLMs (Llama, Mistral, Qwen, MPT) set 0, and eager HF modules apply
	 * what the model's config.json says (GPT-2's and OPT's 0.1) */
	bool model_drop = !megatron_code && r->m && r->m->dropout_given;
	double hdrop = megatron_code ? 0.1 : model_drop ? r->m->hidden_dropout : 0.0;
	double adrop = megatron_code ? 0.1 : model_drop ? r->m->attention_dropout : 0.0;
	s->hidden_dropout = u.hdrop.given ? u.hdrop_v + 0.0 : hdrop; /* + 0.0: -0 is 0 */
	s->attention_dropout = u.adrop.given ? u.adrop_v + 0.0 : adrop;
	s->cross_entropy = u.ce.given ? (enum strat_ce)u.ce_i : STRAT_CE_UNFUSED;
	s->moe_dispatcher = u.disp.given ? (enum strat_dispatcher)u.disp_i : STRAT_DISPATCH_ALLTOALL;
	if (s->moe_dispatcher == STRAT_DISPATCH_DEEPEP && s->ep < 2)
		return sfail(r, "moe_dispatcher", "moe_dispatcher deepep routes tokens between expert-"
			     "parallel ranks: it needs ep > 1 (ep=%" PRId64 ")", s->ep);
	if (s->framework == STRAT_DEEPSPEED && s->pp > 1 && s->zero_stage == 1 && s->overlap_comm) {
		s->overlap_comm = false;
		strat_prov(s, "zero_optimization.overlap_comm", STRAT_SRC_DERIVED,
			   "DeepSpeed's pipeline turns it off for ZeRO-1", "false");
	}

	/* FSDP HYBRID_SHARD: shard within a node by default */
	if (s->framework == STRAT_FSDP) {
		int64_t g;
		if (u.fsdp_group.given) {
			g = u.fsdp_group_v;
			if (s->dp % g)
				return sfail(r, "fsdp.shard_group_size",
					     "fsdp.shard_group_size=%" PRId64 " does not divide dp=%" PRId64,
					     g, s->dp);
		} else {
			int64_t per_node = r->c && r->c->node.gpus > 0 ? r->c->node.gpus : s->dp;
			g = per_node / (s->tp * s->cp) > 0 ? per_node / (s->tp * s->cp) : 1;
			while (g > 1 && s->dp % g)
				g--;
		}
		s->shard_group = s->fsdp_sharding == STRAT_FSDP_HYBRID_SHARD ? g : s->dp;
		if (s->fsdp_sharding == STRAT_FSDP_HYBRID_SHARD)
			oprov(s, "fsdp.shard_group_size", &u.fsdp_group,
			      "data-parallel ranks of one node", "%" PRId64, s->shard_group);
	}

	if (s->framework == STRAT_DEEPSPEED && s->zero_stage == 3)
		TW_CHECK(check_zeropp(r));
	/* expert parallelism needs DeepSpeed's MoE layers, and its engine asserts "MoE not
	 * supported with Stage 3" (ep 1: HF's expert modules are plain parameters, fine) */
	if (s->framework == STRAT_DEEPSPEED && s->zero_stage == 3 && s->ep > 1)
		return sfail(r, "ep",
			     "strategy.ep=%" PRId64 " with ZeRO stage 3: DeepSpeed refuses MoE layers "
			     "at stage 3 (\"MoE not supported with Stage 3\"); use stage 1 or 2, or ep 1",
			     s->ep);
	/* Megatron-LM's arguments: --tp-comm-overlap asserts sequence parallelism (which it turns
	 * off at tp 1) */
	if (s->framework == STRAT_MEGATRON && s->tp_comm_overlap && !s->sequence_parallel)
		return sfail(r, "tp_comm_overlap,sequence_parallel",
			     "tp_comm_overlap needs sequence_parallel true (Megatron: \"Tensor parallel "
			     "communication/GEMM overlap can happen only when sequence parallelism is "
			     "enabled\"; at tp 1 there is none)");
	/* Megatron-Core's TransformerConfig: "When using expert parallelism and tensor
	 * parallelism, sequence parallelism must be used" */
	if (s->framework == STRAT_MEGATRON && s->ep > 1 && s->tp > 1 && !s->sequence_parallel)
		return sfail(r, "sequence_parallel,ep,tp",
			     "strategy.ep=%" PRId64 " with tp=%" PRId64 " needs sequence_parallel true "
			     "(Megatron-Core: \"When using expert parallelism and tensor parallelism, "
			     "sequence parallelism must be used\")",
			     s->ep, s->tp);
	/* folded experts route the rank's own share of the sequence (T / tp) */
	if (s->expert_tp != s->tp && s->tp > 1 && !s->sequence_parallel)
		return sfail(r, "sequence_parallel,expert_tp",
			     "expert_tp=%" PRId64 " with tp=%" PRId64 " needs sequence_parallel true "
			     "(the experts' groups are folded over the sequence-parallel ranks)",
			     s->expert_tp, s->tp);
	if (s->framework == STRAT_FSDP && s->fsdp_sharding == STRAT_FSDP_HYBRID_SHARD && s->ep > 1)
		return sfail(r, "ep",
			     "strategy.ep=%" PRId64 " with FSDP HYBRID_SHARD is not modelled (experts "
			     "shard over their data-parallel group; use FULL_SHARD or ep 1)",
			     s->ep);

	/* uneven first and last pipeline stages (Megatron-Core), given or from counting the
	 * embedding and the loss as a layer each of the split */
	s->first_stage_layers = u.fsl.given ? u.fsl_v : 0;
	s->last_stage_layers = u.lsl.given ? u.lsl_v : 0;
	bool afe = u.afe.given && u.afe_v, afl = u.afl.given && u.afl_v;
	const char *afk = afe ? "account_for_embedding_in_pipeline_split"
			      : "account_for_loss_in_pipeline_split";
	if ((afe || afl) && (u.fsl.given || u.lsl.given))
		return sfail(r, afk,
			     "first_stage_layers / last_stage_layers cannot be given with "
			     "account_for_embedding_in_pipeline_split or "
			     "account_for_loss_in_pipeline_split (Megatron refuses both)");
	if ((afe || afl) && r->m && r->m->layers > 0 && s->pp > 1 &&
	    s->framework == STRAT_MEGATRON) {
		/* Megatron-Core: with vp 1 the stages split layers + the counted ones; with vp > 1
		 * the pp x vp virtual stages do */
		int64_t n = r->m->layers + afe + afl, parts = s->pp * (s->vp > 1 ? s->vp : 1);
		if (n % parts)
			return sfail(r, afk,
				     "model.layers=%" PRId64 " plus the %s counted as a layer (%" PRId64
				     ") must be divisible by %s=%" PRId64 " (Megatron)",
				     r->m->layers, afe && afl ? "embedding and the loss"
						   : afe ? "embedding" : "loss",
				     n, s->vp > 1 ? "pp x vp" : "pp", parts);
		oprov(s, "account_for_embedding_in_pipeline_split", &u.afe, "", "%s",
		      afe ? "true" : "false");
		oprov(s, "account_for_loss_in_pipeline_split", &u.afl, "", "%s",
		      afl ? "true" : "false");
		s->embed_in_split = afe;
		s->loss_in_split = afl;
		if (s->vp > 1) {
			strat_prov(s, "layers_per_virtual_stage", STRAT_SRC_DERIVED,
				   afe && afl ? "the first and the last virtual stage hold one fewer"
				   : afe      ? "the first virtual stage holds one fewer"
					      : "the last virtual stage holds one fewer",
				   "%" PRId64, n / parts);
		} else {
			if (afe)
				s->first_stage_layers = n / s->pp - 1;
			if (afl)
				s->last_stage_layers = n / s->pp - 1;
			strat_prov(s, "first_stage_layers", STRAT_SRC_DERIVED,
				   afe ? "the embedding counts as a layer" : "an equal share",
				   "%" PRId64, s->first_stage_layers);
			strat_prov(s, "last_stage_layers", STRAT_SRC_DERIVED,
				   afl ? "the loss counts as a layer" : "an equal share", "%" PRId64,
				   s->last_stage_layers);
		}
	}
	if (u.fsl.given || u.lsl.given || afe || afl) {
		const char *k = u.fsl.given   ? "first_stage_layers"
				: u.lsl.given ? "last_stage_layers"
					      : afk;
		if (s->framework != STRAT_MEGATRON)
			return sfail(r, k, "%s is Megatron's (%s)", k,
				     s->framework == STRAT_DEEPSPEED
					     ? "DeepSpeed partitions its stages itself"
					     : "framework fsdp splits the layers equally over the stages");
		if (s->pp < 2)
			return sfail(r, k, "%s needs pp >= 2 (pp=%" PRId64 ")", k, s->pp);
		if (!afe && !afl) {
			oprov(s, "first_stage_layers", &u.fsl, "an equal share", "%" PRId64,
			      s->first_stage_layers);
			oprov(s, "last_stage_layers", &u.lsl, "an equal share", "%" PRId64,
			      s->last_stage_layers);
		}
	}

	/* batch */
	s->seq_len = u.seq_len.given ? u.seq_v : (r->m && r->m->seq_len > 0 ? r->m->seq_len : 0);
	s->lora_rank = u.has_lora ? u.lora_rank_v : 0;
	TW_CHECK(check_model(r));
	if (s->framework == STRAT_DEEPSPEED)
		TW_CHECK(strat_ds_batch(r));
	else
		TW_CHECK(batch_megatron(r));
	strat_prov(s, "micro_batches_per_step", STRAT_SRC_DERIVED,
		   s->pp > 1 ? "grad_accum: micro-batches through the pipeline"
			     : "grad_accum: forward/backward passes per optimizer step",
		   "%" PRId64, s->grad_accum);
	if (s->schedule == STRAT_SCHED_INTERLEAVED && s->grad_accum % s->pp)
		return sfail(r, "vp",
			     "number of microbatches (%" PRId64 ") is not divisible by "
			     "pipeline-model-parallel-size (%" PRId64 ") when using interleaved "
			     "schedule (Megatron)",
			     s->grad_accum, s->pp);
	if (s->seq_len > 0)
		oprov(s, "seq_len", &u.seq_len, "the model's", "%" PRId64, s->seq_len);

	oprov(s, "recompute", &u.recompute, "no activation recomputation", "%s",
	      recompute_names[s->recompute]);
	if (s->recompute == STRAT_RECOMPUTE_OP && (s->tp > 1 || s->lora_rank > 0))
		return sfail(r, "recompute", "recompute op (torchtitan's selective op AC) is "
			     "modelled without %s", s->tp > 1 ? "tensor parallelism (tp 1)" : "LoRA");
	if (u.rnl.given) {
		if (s->recompute != STRAT_RECOMPUTE_FULL)
			return sfail(r, "recompute_num_layers", "needs recompute full (it says how many "
				     "layers of each stage's chunk are recomputed; recompute is %s)",
				     recompute_names[s->recompute]);
		if (r->m && r->m->layers > 0 && s->recompute_num_layers > r->m->layers)
			return sfail(r, "recompute_num_layers", "recompute_num_layers=%" PRId64 ": "
				     "more than the model's %" PRId64 " layers", s->recompute_num_layers,
				     r->m->layers);
		oprov(s, "recompute_num_layers", &u.rnl, "", "%" PRId64, s->recompute_num_layers);
	}
	if (u.rcm.given) {
		if (s->framework != STRAT_MEGATRON || s->recompute != STRAT_RECOMPUTE_SELECTIVE)
			return sfail(r, "recompute_modules", "recompute_modules is Megatron-Core's "
				     "fine-grained selective recompute: it needs framework megatron and "
				     "recompute selective (framework %s, recompute %s)",
				     fw_name(s->framework), recompute_names[s->recompute]);
		char ml[96] = "";
		for (size_t i = 0; i < RC_NMODULES; i++)
			if (s->recompute_modules & (1u << i)) {
				size_t n = strlen(ml);
				snprintf(ml + n, sizeof(ml) - n, "%s%s", n ? "," : "", rc_module_names[i]);
			}
		oprov(s, "recompute_modules", &u.rcm, "core_attn", "%s", ml);
	}
	oprov(s, "flash_attention", &u.flash, "twin default: fused attention keeps no s x s scores",
	      "%s", s->flash_attention ? "true" : "false");
	oprov(s, "host_op_us", &u.host_op, "eager PyTorch: host time per framework op (docs/simulator.md)",
	      "%g", s->host_op_us);
	oprov(s, "fp8", &u.fp8, "GEMMs in the model dtype", "%s", s->fp8_gemm ? "true" : "false");
	if (s->fp8_gemm && r->c && r->c->gpu.name[0] && r->c->gpu.peak_tflops[TW_FP8] <= 0)
		return sfail(r, "fp8", "fp8: GPU %s has no fp8 tensor cores", r->c->gpu.name);
	oprov(s, "kernels", &u.kernels,
	      megatron_code ? "Megatron's model code: fused norm, activation and RoPE kernels"
			    : "HF / torchtitan modules in eager PyTorch",
	      "%s", kernels_names[s->kernels]);
	const char *drop_why = megatron_code ? "Megatron's default"
			       : model_drop  ? "the model's config"
					     : "HF / torchtitan LLM configs: no dropout";
	oprov(s, "hidden_dropout", &u.hdrop, drop_why, "%g", s->hidden_dropout);
	oprov(s, "attention_dropout", &u.adrop, drop_why, "%g", s->attention_dropout);
	oprov(s, "cross_entropy", &u.ce, "the model code's own loss", "%s", ce_names[s->cross_entropy]);
	oprov(s, "moe_dispatcher", &u.disp, "one all-to-all over the expert group", "%s",
	      dispatcher_names[s->moe_dispatcher]);
	TW_CHECK(check_moe_knobs(r, &u));
	TW_CHECK(check_cuda_graphs(r, &u));
	if (u.akern.given) {
		snprintf(s->attention_kernel, sizeof(s->attention_kernel), "%s", u.akern_v);
		if (!s->flash_attention)
			return sfail(r, "attention_kernel", "attention_kernel: %s names a flash attention "
				     "kernel; flash_attention is false", u.akern_v);
		char have[96];
		if (r->c && r->c->gpu.name[0] &&
		    !cluster_attn_kernel(r->c, u.akern_v, have, sizeof(have)))
			return sfail(r, "attention_kernel", "attention_kernel: cluster %s has no table "
				     "for '%s' (eff.attn_kernels: %s)", r->c->name, u.akern_v,
				     have[0] ? have : "none");
	}
	/* Unnamed, the kernel the code path runs, when the cluster has its table: Megatron-Core's
	 * Transformer Engine prefers cuDNN's fused attention on Hopper+ (where the presets have
	 * one; FlashAttention-2 below), PyTorch's SDPA (flash backend; cuDNN only opt-in through
	 * 2.10), HF's flash_attention_2 and Megatron-DeepSpeed's flash-attn run FlashAttention-2 */
	const char *akern_why = "the cluster's attention table (eff.attn)";
	if (!u.akern.given && s->flash_attention && r->c && r->c->gpu.name[0]) {
		static const char *const te[] = {"cudnn", "fa2"}, *const torch[] = {"fa2"};
		bool mcore = s->framework == STRAT_MEGATRON;
		const char *const *try = mcore ? te : torch;
		for (int i = 0; i < (mcore ? 2 : 1) && !s->attention_kernel[0]; i++)
			if (cluster_attn_kernel(r->c, try[i], NULL, 0))
				snprintf(s->attention_kernel, sizeof(s->attention_kernel), "%s", try[i]);
		if (s->attention_kernel[0])
			akern_why = !strcmp(s->attention_kernel, "cudnn")
					    ? "Transformer Engine prefers cuDNN's fused attention on Hopper+"
				    : mcore ? "Transformer Engine runs FlashAttention-2 before Hopper"
					    : "PyTorch SDPA's flash backend / flash-attn 2: FlashAttention-2";
	}
	oprov(s, "attention_kernel", &u.akern, akern_why, "%s",
	      s->attention_kernel[0] ? s->attention_kernel : "-");
	TW_CHECK(nccl_env(r, "nccl_algo", "NCCL_ALGO", u.nalgo.given ? u.nalgo_v : "", false,
			  &s->nccl_no_algos, &s->nccl_named_algos, s->nccl_algo, sizeof(s->nccl_algo)));
	TW_CHECK(nccl_env(r, "nccl_proto", "NCCL_PROTO", u.nproto.given ? u.nproto_v : "", true,
			  &s->nccl_no_protos, &s->nccl_named_protos, s->nccl_proto, sizeof(s->nccl_proto)));
	oprov(s, "nccl_algo", &u.nalgo, "NCCL's tuner picks from all", "%s", s->nccl_algo[0] ? s->nccl_algo : "-");
	oprov(s, "nccl_proto", &u.nproto, "NCCL's tuner picks from all", "%s", s->nccl_proto[0] ? s->nccl_proto : "-");
	oprov(s, "tf32", &u.tf32, "PyTorch default: fp32 matmuls in fp32 (allow_tf32 off since 1.12)",
	      "%s", s->tf32 ? "true" : "false");
	if (s->tf32 && r->c && r->c->gpu.name[0] && r->c->gpu.peak_tflops[TW_TF32] <= 0)
		return sfail(r, "tf32", "tf32: GPU %s has no TF32 tensor cores", r->c->gpu.name);
	/* ZeRO-Infinity's NVMe offload on nodes without NVMe would be free in the model */
	if ((s->offload_optimizer == STRAT_OFFLOAD_NVME || s->offload_param == STRAT_OFFLOAD_NVME) &&
	    r->c && r->c->gpu.name[0] && !(r->c->node.nvme_GBps > 0))
	{
		const char *k = s->offload_param == STRAT_OFFLOAD_NVME
					? "zero_optimization.offload_param.device"
					: "zero_optimization.offload_optimizer.device";
		return tw_errf(r->err, TW_ERR_INVALID,
			       "%s: %s: nvme on nodes without NVMe (node.nvme_GBps is 0)",
			       strat_label(r, STRAT_TREE_DS, k), k);
	}
	/* fp16 (bf16) on a GPU without it runs emulated on CUDA cores, if at all: not modelled */
	enum tw_dtype half = s->param_dtype;
	if ((half == TW_FP16 || half == TW_BF16) && r->c && r->c->gpu.name[0] &&
	    r->c->gpu.peak_tflops[half] <= 0) {
		bool f16 = half == TW_FP16, hf_auto = f16 ? r->fp16_auto : r->bf16_auto;
		const char *dn = f16 ? "fp16" : "bf16";
		const char *hint = f16 ? "gpu.peak_tflops.fp16 is 0" : "use fp16";
		char key[32];
		snprintf(key, sizeof(key), "%s.enabled", dn);
		if (s->framework == STRAT_DEEPSPEED && r->ds_file && !u.precision.given && !hf_auto)
			return tw_errf(r->err, TW_ERR_INVALID,
				       "%s: %s: GPU %s has no %s tensor cores (%s)",
				       strat_label(r, STRAT_TREE_DS, key), key, r->c->gpu.name, dn, hint);
		return sfail(r, "precision", "%s: GPU %s has no %s tensor cores (%s)",
			     !hf_auto ? "precision"
			     : f16    ? "hf_trainer.fp16 (fp16.enabled: auto)"
				      : "hf_trainer.bf16 (bf16.enabled: auto)",
			     r->c->gpu.name, dn, hint);
	}
	if (s->lora_rank > 0) {
		oprov(s, "lora.rank", &u.lora_rank, "", "%" PRId64, s->lora_rank);
		char tg[64] = "";
		static const char *const tn[] = {"q", "k", "v", "o", "gate", "up", "down"};
		for (int i = 0; i < 7; i++)
			if (s->lora_targets & (1u << i)) {
				size_t n = strlen(tg);
				snprintf(tg + n, sizeof(tg) - n, "%s%s", n ? "," : "", tn[i]);
			}
		oprov(s, "lora.targets", &u.lora_targets, "PEFT default for Llama: q_proj, v_proj", "%s",
		      tg);
	}
	strat_ds_auto_model(r);
	(void)offload_names;
	drop_placeholders(s);
	return TW_OK;
}

void strat_warn(struct strat_rd *r, const char *fmt, ...)
{
	if (r->nwarn >= (int)(sizeof(r->warn) / sizeof(r->warn[0])))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->warn[r->nwarn++], sizeof(r->warn[0]), fmt, ap);
	va_end(ap);
}

enum tw_result strategy_resolve(const struct strat_inputs *in, const struct model *m,
				const struct cluster *c, struct strategy *out, struct tw_err *err)
{
	memset(out, 0, sizeof(*out));
	struct strat_rd *r = TW_NEW(struct strat_rd);
	struct trees *t = TW_NEW(struct trees);
	r->s = out;
	r->err = err;
	r->m = m;
	r->c = c;
	r->version = STRAT_VERSION(0, 19, 6);
	enum tw_result rc = route_sets(r, in);
	if (rc == TW_OK)
		rc = load_trees(r, in, t);
	if (rc == TW_OK)
		rc = resolve(r, in, t);
	for (int i = 0; rc == TW_OK && !in->quiet && i < r->nwarn; i++)
		tw_log(TW_LOG_WARN, "%s", r->warn[i]);
	cJSON_Delete(t->ours);
	cJSON_Delete(t->ds);
	free(t);
	free(r);
	return rc;
}

/* ---- output ----------------------------------------------------------------------------------- */

void strategy_chunk_layers(const struct strategy *s, int64_t layers, int64_t stage,
			   int64_t chunk, int64_t *first, int64_t *count)
{
	int64_t P = s->pp > 0 ? s->pp : 1;
	int64_t V = s->schedule == STRAT_SCHED_INTERLEAVED && s->vp > 1 && P > 1 ? s->vp : 1;
	int64_t f = s->first_stage_layers, l = s->last_stage_layers;
	if (V > 1 && (s->embed_in_split || s->loss_in_split)) {
		/* Megatron-Core: layers + the embedding + the loss split equally over the pp x vp
		 * virtual stages; the first (last) virtual stage gives its embedding's (loss's)
		 * share up */
		int64_t e = s->embed_in_split, vs = chunk * P + stage;
		int64_t per = (layers + e + s->loss_in_split) / (P * V);
		*first = vs * per - (vs > 0 ? e : 0);
		*count = per - (vs == 0 ? e : 0) - (vs == P * V - 1 ? s->loss_in_split : 0);
		return;
	}
	if (P > 1 && (f > 0 || l > 0)) {
		/* Megatron-Core: the middle stages share what the first and the last leave; under
		 * interleaving each band of chunks (one chunk of every stage) holds 1/vp of it */
		int64_t mid = P - (f > 0) - (l > 0);
		int64_t per = mid > 0 ? (layers - f - l) / mid : 0;
		int64_t f0 = (f > 0 ? f : per) / V, l0 = (l > 0 ? l : per) / V, m0 = per / V;
		int64_t band = f0 + (P - 2) * m0 + l0;
		*first = chunk * band + (stage == 0 ? 0 : f0 + (stage - 1) * m0);
		*count = stage == 0 ? f0 : stage == P - 1 ? l0 : m0;
		return;
	}
	if (V > 1) {
		int64_t per = layers / (P * V);
		*first = (chunk * P + stage) * per;
		*count = per;
		return;
	}
	int64_t per = layers / P, extra = layers % P;
	*first = stage * per + (stage < extra ? stage : extra);
	*count = per + (stage < extra ? 1 : 0);
}

int64_t strat_ep_cp(const struct strategy *s)
{
	return s->framework == STRAT_MEGATRON && s->cp > 1 ? s->cp : 1;
}

int64_t strat_expert_tp(const struct strategy *s)
{
	return s->expert_tp > 0 ? s->expert_tp : s->tp;
}

int64_t strat_ep_span(const struct strategy *s)
{
	return s->tp * s->dp * strat_ep_cp(s);
}

struct cJSON *strategy_to_json(const struct strategy *s)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "framework", framework_names[s->framework]);
	cJSON_AddStringToObject(o, "deepspeed_version", s->deepspeed_version);
	cJSON *d = cJSON_AddObjectToObject(o, "degrees");
	cJSON_AddNumberToObject(d, "gpus", (double)s->gpus);
	cJSON_AddNumberToObject(d, "tp", (double)s->tp);
	cJSON_AddNumberToObject(d, "pp", (double)s->pp);
	cJSON_AddNumberToObject(d, "cp", (double)s->cp);
	cJSON_AddStringToObject(d, "cp_kind", cp_kind_names[s->cp_kind]);
	cJSON_AddNumberToObject(d, "dp", (double)s->dp);
	cJSON_AddNumberToObject(d, "ep", (double)s->ep);
	cJSON_AddNumberToObject(d, "expert_tp", (double)s->expert_tp);
	cJSON_AddNumberToObject(d, "vp", (double)s->vp);
	cJSON_AddBoolToObject(o, "sequence_parallel", s->sequence_parallel);
	cJSON_AddStringToObject(o, "schedule", schedule_names[s->schedule]);
	cJSON *b = cJSON_AddObjectToObject(o, "batch");
	cJSON_AddNumberToObject(b, "micro_batch", (double)s->micro_batch);
	cJSON_AddNumberToObject(b, "grad_accum", (double)s->grad_accum);
	cJSON_AddNumberToObject(b, "global_batch", (double)s->global_batch);
	cJSON_AddNumberToObject(b, "micro_batches_per_step", (double)s->grad_accum);
	cJSON_AddNumberToObject(b, "seq_len", (double)s->seq_len);
	cJSON *p = cJSON_AddObjectToObject(o, "precision");
	cJSON_AddStringToObject(p, "param_dtype", tw_dtype_name(s->param_dtype));
	cJSON_AddStringToObject(p, "grad_accum_dtype", tw_dtype_name(s->grad_accum_dtype));
	cJSON_AddStringToObject(p, "comm_dtype", tw_dtype_name(s->comm_dtype));
	cJSON_AddBoolToObject(p, "fp8_gemm", s->fp8_gemm);
	cJSON_AddBoolToObject(p, "tf32", s->tf32);
	cJSON_AddBoolToObject(p, "loss_scaling", s->loss_scaling);
	cJSON_AddBoolToObject(p, "check_grad_overflow", s->check_grad_overflow);
	cJSON_AddStringToObject(o, "optimizer", optimizer_names[s->optimizer]);
	cJSON_AddNumberToObject(o, "gradient_clipping", s->gradient_clipping);
	cJSON *z = cJSON_AddObjectToObject(o, "zero");
	cJSON_AddNumberToObject(z, "stage", s->zero_stage);
	cJSON_AddBoolToObject(z, "overlap_comm", s->overlap_comm);
	cJSON_AddBoolToObject(z, "contiguous_gradients", s->contiguous_gradients);
	cJSON_AddBoolToObject(z, "reduce_scatter", s->reduce_scatter);
	cJSON_AddBoolToObject(z, "use_multi_rank_bucket_allreduce", s->use_multi_rank_bucket_allreduce);
	cJSON_AddNumberToObject(z, "reduce_bucket_size", (double)s->reduce_bucket_size);
	cJSON_AddNumberToObject(z, "allgather_bucket_size", (double)s->allgather_bucket_size);
	cJSON_AddNumberToObject(z, "prefetch_bucket_size", (double)s->prefetch_bucket_size);
	cJSON_AddNumberToObject(z, "param_persistence_threshold",
				(double)s->param_persistence_threshold);
	cJSON_AddNumberToObject(z, "max_live_parameters", (double)s->max_live_parameters);
	cJSON_AddNumberToObject(z, "max_reuse_distance", (double)s->max_reuse_distance);
	cJSON_AddNumberToObject(z, "sub_group_size", (double)s->sub_group_size);
	cJSON_AddStringToObject(z, "offload_optimizer", offload_names[s->offload_optimizer]);
	cJSON_AddStringToObject(z, "offload_param", offload_names[s->offload_param]);
	cJSON_AddBoolToObject(z, "offload_pin_memory", s->offload_pin_memory);
	cJSON_AddBoolToObject(z, "offload_param_pin_memory", s->offload_param_pin_memory);
	cJSON_AddNumberToObject(z, "offload_ratio", s->offload_ratio);
	cJSON_AddNumberToObject(z, "hpz_partition_size", (double)(s->zero_hpz > 1 ? s->zero_hpz : 1));
	cJSON_AddBoolToObject(z, "quantized_weights", s->zero_qweights);
	cJSON_AddBoolToObject(z, "quantized_gradients", s->zero_qgrads);
	cJSON_AddBoolToObject(z, "quantized_nontrainable_weights", s->zero_qfrozen);
	cJSON_AddNumberToObject(z, "mics_shard_size", s->mics_shard > 0 ? (double)s->mics_shard : -1);
	cJSON_AddBoolToObject(z, "mics_hierarchical_params_gather", s->mics_hier);
	cJSON_AddBoolToObject(o, "distributed_optimizer", s->distributed_optimizer);
	cJSON *f = cJSON_AddObjectToObject(o, "fsdp");
	cJSON_AddStringToObject(f, "sharding_strategy", fsdp_names[s->fsdp_sharding]);
	cJSON_AddNumberToObject(f, "shard_group_size", (double)s->shard_group);
	cJSON_AddNumberToObject(f, "version", s->fsdp_version);
	cJSON *a = cJSON_AddObjectToObject(o, "activations");
	cJSON_AddStringToObject(a, "recompute", recompute_names[s->recompute]);
	cJSON_AddNumberToObject(a, "recompute_num_layers", (double)s->recompute_num_layers);
	cJSON *rm = cJSON_AddArrayToObject(a, "recompute_modules");
	for (size_t i = 0; i < RC_NMODULES; i++)
		if (s->recompute == STRAT_RECOMPUTE_SELECTIVE && (s->recompute_modules & (1u << i)))
			cJSON_AddItemToArray(rm, cJSON_CreateString(rc_module_names[i]));
	cJSON_AddNumberToObject(o, "first_stage_layers", (double)s->first_stage_layers);
	cJSON_AddNumberToObject(o, "last_stage_layers", (double)s->last_stage_layers);
	cJSON_AddBoolToObject(o, "account_for_embedding_in_pipeline_split", s->embed_in_split);
	cJSON_AddBoolToObject(o, "account_for_loss_in_pipeline_split", s->loss_in_split);
	cJSON_AddBoolToObject(a, "partition_activations", s->partition_activations);
	cJSON_AddBoolToObject(a, "cpu_checkpointing", s->cpu_checkpointing);
	cJSON_AddBoolToObject(a, "flash_attention", s->flash_attention);
	cJSON_AddStringToObject(a, "kernels", kernels_names[s->kernels]);
	cJSON_AddNumberToObject(a, "hidden_dropout", s->hidden_dropout);
	cJSON_AddNumberToObject(a, "attention_dropout", s->attention_dropout);
	cJSON_AddStringToObject(a, "cross_entropy", ce_names[s->cross_entropy]);
	cJSON_AddStringToObject(a, "moe_dispatcher", dispatcher_names[s->moe_dispatcher]);
	cJSON_AddBoolToObject(a, "overlap_moe_expert_parallel_comm", s->moe_a2a_overlap);
	cJSON_AddNumberToObject(a, "moe_load_imbalance", s->moe_load_imbalance);
	cJSON_AddBoolToObject(a, "moe_shared_expert_overlap", s->moe_shared_overlap);
	cJSON_AddBoolToObject(a, "delay_wgrad_compute", s->delay_wgrad);
	cJSON_AddNumberToObject(a, "moe_expert_capacity_factor", s->moe_capacity_factor);
	cJSON_AddBoolToObject(a, "moe_pad_expert_input_to_capacity", s->moe_pad_to_capacity);
	cJSON_AddBoolToObject(a, "moe_permute_fusion", s->moe_permute_fusion);
	cJSON_AddBoolToObject(a, "moe_grouped_gemm", s->moe_grouped_gemm);
	cJSON_AddBoolToObject(a, "moe_drop_tokens", !s->moe_dropless);
	cJSON_AddBoolToObject(a, "moe_router_fusion", s->moe_router_fusion);
	cJSON_AddNumberToObject(a, "moe_aux_loss_coeff", s->moe_aux_loss_coeff);
	cJSON_AddNumberToObject(a, "moe_z_loss_coeff", s->moe_z_loss_coeff);
	cJSON_AddNumberToObject(a, "moe_min_capacity", (double)s->moe_min_capacity);
	cJSON_AddStringToObject(a, "cuda_graph_impl", cg_impl_names[s->cuda_graph_impl]);
	cJSON *cgm = cJSON_AddArrayToObject(a, "cuda_graph_modules");
	for (size_t i = 0; i < CG_NMODULES; i++)
		if (s->cuda_graph_modules & (1u << i))
			cJSON_AddItemToArray(cgm, cJSON_CreateString(cg_module_names[i]));
	cJSON_AddStringToObject(a, "attention_kernel", s->attention_kernel);
	cJSON_AddStringToObject(o, "nccl_algo", s->nccl_algo);
	cJSON_AddStringToObject(o, "nccl_proto", s->nccl_proto);
	cJSON *pl = cJSON_AddObjectToObject(o, "pipeline");
	cJSON_AddBoolToObject(pl, "pipe_partitioned", s->pipe_partitioned);
	cJSON_AddBoolToObject(pl, "grad_partitioned", s->grad_partitioned);
	cJSON_AddNumberToObject(o, "host_op_us", s->host_op_us);
	cJSON_AddBoolToObject(o, "overlap_grad_reduce", s->overlap_grad_reduce);
	cJSON_AddBoolToObject(o, "overlap_param_gather", s->overlap_param_gather);
	cJSON_AddBoolToObject(o, "tp_comm_overlap", s->tp_comm_overlap);
	cJSON_AddBoolToObject(o, "overlap_p2p_comm", s->overlap_p2p_comm);
	cJSON_AddBoolToObject(o, "scatter_gather_tensors_in_pipeline", s->scatter_gather_p2p);
	cJSON_AddBoolToObject(o, "async_tensor_model_parallel_allreduce", s->async_tp_allreduce);
	cJSON *l = cJSON_AddObjectToObject(o, "lora");
	cJSON_AddNumberToObject(l, "rank", (double)s->lora_rank);
	cJSON_AddNumberToObject(l, "targets_mask", s->lora_targets);
	cJSON *pv = cJSON_AddArrayToObject(o, "provenance");
	for (int i = 0; i < s->nprov; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "path", s->prov[i].path);
		cJSON_AddStringToObject(e, "value", s->prov[i].value);
		cJSON_AddStringToObject(e, "source", strat_src_name(s->prov[i].src));
		cJSON_AddStringToObject(e, "why", s->prov[i].why);
		cJSON_AddItemToArray(pv, e);
	}
	return o;
}
