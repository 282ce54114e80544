/* Sweeps: --vary parsing, the cross product of the values, the derived metrics of a point
 * and the result table. The points are simulated by cli/ (the simulator is not ours to call). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reports.h"

static bool is_count(const char *s, int64_t *out)
{
	char *end = NULL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno == ERANGE || v < 1 || v > 1000000)
		return false;
	*out = v;
	return true;
}

/* The comma that ends the value starting at p, or NULL: commas inside a JSON array, object or
 * string belong to the value (--vary 'stragglers=[],[{"node":1,"compute_scale":0.5}]'). */
static char *value_end(char *p)
{
	int depth = 0;
	bool str = false;
	for (; *p; p++) {
		if (str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				str = false;
		} else if (*p == '"') {
			str = true;
		} else if (*p == '[' || *p == '{') {
			depth++;
		} else if ((*p == ']' || *p == '}') && depth > 0) {
			depth--;
		} else if (*p == ',' && depth == 0) {
			return p;
		}
	}
	return NULL;
}

enum tw_result rpt_sweep_add_vary(struct rpt_sweep *s, const char *arg, struct tw_err *err)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg)
		return tw_errf(err, TW_ERR_USAGE, "--vary %s: expected PATH=V1,V2,... (e.g. gpus=8,16,32)",
			       arg);
	size_t plen = (size_t)(eq - arg);
	if (plen >= sizeof(s->vary[0].path))
		return tw_errf(err, TW_ERR_USAGE, "--vary %.40s...: path longer than %zu characters",
			       arg, sizeof(s->vary[0].path) - 1);
	if (s->nvary >= RPT_MAX_VARY)
		return tw_errf(err, TW_ERR_USAGE, "--vary %s: at most %d --vary options", arg,
			       RPT_MAX_VARY);
	struct rpt_vary *v = &s->vary[s->nvary];
	memset(v, 0, sizeof(*v));
	memcpy(v->path, arg, plen);
	v->path[plen] = '\0';
	for (int k = 0; k < s->nvary; k++)
		if (!strcmp(s->vary[k].path, v->path))
			return tw_errf(err, TW_ERR_USAGE, "--vary %s: %s is already varied", arg, v->path);
	v->buf = tw_strdup(eq + 1);
	enum tw_result rc = TW_OK;
	for (char *p = v->buf;;) {
		char *comma = value_end(p);
		if (comma)
			*comma = '\0';
		if (!*p) {
			rc = tw_errf(err, TW_ERR_USAGE, "--vary %s: empty value", arg);
			break;
		}
		if (v->nvalues >= RPT_MAX_VALUES) {
			rc = tw_errf(err, TW_ERR_USAGE, "--vary %s: at most %d values", arg, RPT_MAX_VALUES);
			break;
		}
		int64_t n;
		if (!strcmp(v->path, "gpus") && !is_count(p, &n)) {
			rc = tw_errf(err, TW_ERR_USAGE,
				     "--vary %s: gpus value '%s' must be an integer in [1, 1000000]", arg, p);
			break;
		}
		for (int k = 0; k < v->nvalues; k++)
			if (!strcmp(v->values[k], p)) {
				rc = tw_errf(err, TW_ERR_USAGE, "--vary %s: value '%s' given twice", arg, p);
				break;
			}
		if (rc != TW_OK)
			break;
		v->values[v->nvalues++] = p;
		if (!comma)
			break;
		p = comma + 1;
	}
	if (rc != TW_OK) {
		free(v->buf);
		memset(v, 0, sizeof(*v));
		return rc;
	}
	s->nvary++;
	return TW_OK;
}

enum tw_result rpt_sweep_expand(struct rpt_sweep *s, struct tw_err *err)
{
	if (s->nvary == 0)
		return tw_errf(err, TW_ERR_USAGE, "--vary PATH=V1,V2,... is required");
	size_t n = 1;
	for (int k = 0; k < s->nvary; k++) {
		n *= (size_t)s->vary[k].nvalues;
		if (n > RPT_MAX_POINTS)
			return tw_errf(err, TW_ERR_LIMIT,
				       "--vary: the cross product has more than %d points", RPT_MAX_POINTS);
	}
	free(s->pts);
	s->pts = TW_NEW_ARRAY(struct rpt_point, n);
	s->npts = n;
	for (size_t i = 0; i < n; i++) {
		size_t rest = i;
		for (int k = s->nvary - 1; k >= 0; k--) { /* last --vary fastest */
			size_t m = (size_t)s->vary[k].nvalues;
			s->pts[i].value[k] = s->vary[k].values[rest % m];
			rest /= m;
		}
		s->pts[i].run_id = -1;
		snprintf(s->pts[i].reason, sizeof(s->pts[i].reason), "not simulated");
	}
	return TW_OK;
}

void rpt_point_label(const struct rpt_sweep *s, const struct rpt_point *p, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int k = 0; k < s->nvary && used < len; k++) {
		int w = snprintf(buf + used, len - used, "%s%s=%s", k ? "," : "", s->vary[k].path,
				 p->value[k]);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

void rpt_point_fill(struct rpt_point *p, const struct prof_analysis *a, int64_t gpus,
		    int64_t tokens_per_step, double model_flops_per_step, double peak_tflops,
		    double capacity_bytes)
{
	p->a = *a;
	p->gpus = gpus;
	p->step_s = (double)a->step_ns * 1e-9;
	p->exposed_comm_s = (double)a->exposed_comm_ns * 1e-9;
	p->peak_mem_bytes = (double)a->peak_mem_bytes;
	p->capacity_bytes = capacity_bytes;
	p->fits = capacity_bytes > 0 && p->peak_mem_bytes <= capacity_bytes;
	p->ok = true;
	p->reason[0] = '\0';
	if (p->step_s <= 0 || gpus <= 0)
		return;
	p->tokens_s = (double)tokens_per_step / p->step_s;
	p->tokens_s_gpu = p->tokens_s / (double)gpus;
	p->tflops_gpu = model_flops_per_step / (double)gpus / p->step_s * 1e-12;
	p->mfu = peak_tflops > 0 ? p->tflops_gpu / peak_tflops : 0;
}

void rpt_sweep_print(FILE *f, const struct rpt_sweep *s)
{
	int w = 5;
	char label[512];
	for (size_t i = 0; i < s->npts; i++) {
		rpt_point_label(s, &s->pts[i], label, sizeof(label));
		int l = (int)strlen(label);
		if (l > w)
			w = l;
	}
	fprintf(f, "%-*s %9s %12s %10s %8s %6s %10s %9s  %s\n", w, "point", "step s", "tokens/s",
		"tok/s/GPU", "TFLOP/s", "MFU", "exp.comm s", "peak GiB", "fit");
	for (size_t i = 0; i < s->npts; i++) {
		const struct rpt_point *p = &s->pts[i];
		rpt_point_label(s, p, label, sizeof(label));
		if (!p->ok) {
			fprintf(f, "%-*s invalid: %s\n", w, label, p->reason);
			continue;
		}
		fprintf(f, "%-*s %9.4f %12.1f %10.1f %8.1f %5.1f%% %10.4f %9.2f  %s\n", w, label,
			p->step_s, p->tokens_s, p->tokens_s_gpu, p->tflops_gpu, 100 * p->mfu,
			p->exposed_comm_s, p->peak_mem_bytes / (double)TW_GIB,
			p->fits ? "fits" : "does not fit");
	}
}

cJSON *rpt_sweep_json(const struct rpt_sweep *s)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *vary = cJSON_AddArrayToObject(root, "vary");
	for (int k = 0; k < s->nvary; k++) {
		cJSON *v = cJSON_CreateObject();
		cJSON_AddStringToObject(v, "path", s->vary[k].path);
		cJSON *vals = cJSON_AddArrayToObject(v, "values");
		for (int i = 0; i < s->vary[k].nvalues; i++)
			cJSON_AddItemToArray(vals, cJSON_CreateString(s->vary[k].values[i]));
		cJSON_AddItemToArray(vary, v);
	}
	cJSON *pts = cJSON_AddArrayToObject(root, "points");
	for (size_t i = 0; i < s->npts; i++) {
		const struct rpt_point *p = &s->pts[i];
		cJSON *o = cJSON_CreateObject();
		cJSON *vals = cJSON_AddObjectToObject(o, "values");
		for (int k = 0; k < s->nvary; k++)
			cJSON_AddStringToObject(vals, s->vary[k].path, p->value[k]);
		cJSON_AddBoolToObject(o, "ok", p->ok);
		if (!p->ok) {
			cJSON_AddStringToObject(o, "reason", p->reason);
		} else {
			cJSON_AddNumberToObject(o, "gpus", (double)p->gpus);
			cJSON_AddNumberToObject(o, "step_time_s", p->step_s);
			cJSON_AddNumberToObject(o, "tokens_per_s", p->tokens_s);
			cJSON_AddNumberToObject(o, "tokens_per_s_per_gpu", p->tokens_s_gpu);
			cJSON_AddNumberToObject(o, "tflops_per_gpu_model", p->tflops_gpu);
			cJSON_AddNumberToObject(o, "mfu", p->mfu);
			cJSON_AddNumberToObject(o, "exposed_comm_s", p->exposed_comm_s);
			cJSON_AddNumberToObject(o, "peak_mem_bytes", p->peak_mem_bytes);
			cJSON_AddNumberToObject(o, "capacity_bytes", p->capacity_bytes);
			cJSON_AddBoolToObject(o, "fits", p->fits);
			if (p->run_id >= 0)
				cJSON_AddNumberToObject(o, "run_id", (double)p->run_id);
		}
		cJSON_AddItemToArray(pts, o);
	}
	return root;
}

void rpt_sweep_release(struct rpt_sweep *s)
{
	for (int k = 0; k < s->nvary; k++)
		free(s->vary[k].buf);
	free(s->pts);
	memset(s, 0, sizeof(*s));
}

/* ---- step parts ---------------------------------------------------------------------------- */

static const enum trace_cat part_colls[6] = { TRACE_ALL_GATHER, TRACE_REDUCE_SCATTER,
					      TRACE_ALL_REDUCE, TRACE_ALL_TO_ALL, TRACE_P2P,
					      TRACE_BROADCAST };

const char *rpt_part_name(int i)
{
	static const char *const names[RPT_NUM_PARTS] = {
		"compute", "exposed all-gather", "exposed reduce-scatter", "exposed all-reduce",
		"exposed all-to-all", "exposed p2p", "exposed broadcast", "exposed copies",
		"pipeline bubble", "other idle"
	};
	return i >= 0 && i < RPT_NUM_PARTS ? names[i] : "?";
}

/* step = compute + idle, idle = stall on comm + stall on copies + host-side gaps
 * (docs/profiler.md). The comm stall is split over the collectives in proportion to each one's
 * own exposed time (those can overlap each other, so they are not simply added); the bubble
 * is carved out of the host-side gaps. */
void rpt_parts_of(const struct prof_analysis *a, struct rpt_parts *out)
{
	memset(out, 0, sizeof(*out));
	out->ns[0] = a->compute_ns;
	double sum = 0;
	for (int k = 0; k < 6; k++)
		sum += (double)a->coll[part_colls[k]].exposed_ns;
	int64_t given = 0;
	int last = -1;
	for (int k = 0; k < 6; k++) {
		int64_t e = a->coll[part_colls[k]].exposed_ns;
		if (sum <= 0 || e <= 0)
			continue;
		out->ns[1 + k] = (int64_t)((double)a->stall_comm_ns * (double)e / sum);
		given += out->ns[1 + k];
		last = 1 + k;
	}
	if (last >= 0) /* rounding: the parts add up exactly */
		out->ns[last] += a->stall_comm_ns - given;
	else
		out->ns[9] += a->stall_comm_ns; /* comm stall without per-collective detail */
	out->ns[7] = a->stall_copy_ns;
	int64_t bubble = a->bubble_ns < a->stall_host_ns ? a->bubble_ns : a->stall_host_ns;
	if (bubble < 0)
		bubble = 0;
	out->ns[8] = bubble;
	out->ns[9] += a->stall_host_ns - bubble;
}
