/* A sweep read back from the store: the runs `twin sweep --db` wrote (named LABEL/P=V,...).
 * Traces are loaded and analysed through the profile module's API; the job facts a point's
 * throughput needs (GPUs, tokens per step, model FLOPs, the GPU's peak and capacity) are in
 * the run's stored job JSON, which that API does not return, so they are read here with a
 * read-only SQLite connection from the documented schema (profile/SCHEMA.md, runs.job_json). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "reports.h"

struct srun {
	int64_t id;
	char *suffix;   /* "P1=V1,P2=V2" */
	char *job_json;
};

static const cJSON *path(const cJSON *o, const char *a, const char *b, const char *c)
{
	const char *keys[3] = { a, b, c };
	for (int i = 0; i < 3 && keys[i] && o; i++)
		o = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
	return o;
}

static double num(const cJSON *o, bool *ok)
{
	if (!cJSON_IsNumber(o)) {
		*ok = false;
		return 0;
	}
	return o->valuedouble;
}

/* gpus, tokens per step, model FLOPs per step, dense peak, capacity from a stored job */
static enum tw_result job_facts(const struct srun *r, int64_t *gpus, int64_t *tokens, double *mflops,
				double *peak, double *capacity, struct tw_err *err)
{
	char where[64];
	snprintf(where, sizeof(where), "run %" PRId64 " (stored job)", r->id);
	cJSON *j = r->job_json ? cJSON_Parse(r->job_json) : NULL;
	if (!j)
		return tw_errf(err, TW_ERR_INVALID, "%s: no job JSON: not a simulated sweep point", where);
	enum tw_result rc = TW_OK;
	bool ok = true;
	*gpus = (int64_t)num(path(j, "gpus", NULL, NULL), &ok);
	int64_t gb = (int64_t)num(path(j, "strategy", "batch", "global_batch"), &ok);
	int64_t seq = (int64_t)num(path(j, "strategy", "batch", "seq_len"), &ok);
	*capacity = num(path(j, "cluster", "gpu", "memory_gib"), &ok) * (double)TW_GIB;
	const cJSON *pk = path(j, "cluster", "gpu", "peak_tflops");
	double peaks[TW_NUM_DTYPES] = { 0 };
	for (int d = 0; d < TW_NUM_DTYPES && pk; d++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(pk, tw_dtype_name((enum tw_dtype)d));
		peaks[d] = cJSON_IsNumber(v) ? v->valuedouble : 0;
	}
	const cJSON *pd = path(j, "strategy", "precision", "param_dtype");
	enum tw_dtype dt = TW_BF16;
	if (!cJSON_IsString(pd) || !tw_dtype_parse(pd->valuestring, &dt))
		ok = false;
	bool fp8 = cJSON_IsTrue(path(j, "strategy", "precision", "fp8_gemm"));
	bool tf32 = cJSON_IsTrue(path(j, "strategy", "precision", "tf32"));
	struct model *m = TW_NEW(struct model);
	const cJSON *mj = path(j, "model", NULL, NULL);
	if (!ok || !pk || !mj || *gpus <= 0 || gb <= 0) {
		rc = tw_errf(err, TW_ERR_INVALID,
			     "%s: lacks gpus, strategy.batch, strategy.precision, cluster.gpu or model", where);
		goto out;
	}
	TW_CHECK_GOTO(model_from_json(mj, where, m, err), rc, out);
	if (seq <= 0)
		seq = m->seq_len;
	*tokens = gb * seq;
	{ /* the MFU's model FLOPs, LoRA's too (plan_model_flops_per_token) */
		bool has = true;
		struct job *jb = TW_NEW(struct job);
		jb->model = *m;
		jb->seq = seq;
		jb->strat.lora_rank = (int64_t)num(path(j, "strategy", "lora", "rank"), &has);
		jb->strat.lora_targets = (unsigned)num(path(j, "strategy", "lora", "targets_mask"), &has);
		if (!has)
			jb->strat.lora_rank = 0;
		*mflops = plan_model_flops_per_token(jb) * (double)*tokens;
		free(jb);
	}
	*peak = cluster_gemm_peak(peaks, dt, fp8, tf32);
out:
	free(m);
	cJSON_Delete(j);
	return rc;
}

static enum tw_result sql_err(sqlite3 *q, const char *db_path, struct tw_err *err)
{
	return tw_errf(err, TW_ERR_SQLITE, "%s: reading runs: %s", db_path, sqlite3_errmsg(q));
}

/* The stored runs LABEL/..., oldest first, the newest per suffix. */
static enum tw_result query_runs(sqlite3 *q, const char *db_path, const char *label, struct srun **out,
				 size_t *nout, struct tw_err *err)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(q, "SELECT id, name, job_json FROM runs WHERE complete = 1 AND kind = 'sim'"
				  " AND substr(name, 1, ?2) = ?1 ORDER BY id", -1, &st, NULL) != SQLITE_OK)
		return sql_err(q, db_path, err);
	char prefix[256];
	snprintf(prefix, sizeof(prefix), "%s/", label);
	sqlite3_bind_text(st, 1, prefix, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, (int)strlen(prefix));
	struct srun *r = NULL;
	size_t n = 0, cap = 0;
	enum tw_result rc = TW_OK;
	int s;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);
		const char *job = (const char *)sqlite3_column_text(st, 2);
		const char *suffix = name ? name + strlen(prefix) : "";
		if (!*suffix || !strchr(suffix, '='))
			continue;
		size_t k = 0;
		while (k < n && strcmp(r[k].suffix, suffix))
			k++;
		if (k == n) {
			TW_GROW(r, cap, n + 1);
			memset(&r[n++], 0, sizeof(*r));
		} else {
			free(r[k].suffix);
			free(r[k].job_json);
		}
		r[k].id = sqlite3_column_int64(st, 0);
		r[k].suffix = tw_strdup(suffix);
		r[k].job_json = job ? tw_strdup(job) : NULL;
	}
	if (s != SQLITE_DONE)
		rc = sql_err(q, db_path, err);
	sqlite3_finalize(st);
	*out = r;
	*nout = n;
	return rc;
}

/* "P1=V1,P2=V2" into paths and values (in place); returns the count, -1 when malformed */
static int split_suffix(char *s, char **paths, char **values)
{
	int n = 0;
	for (char *p = s; p;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		char *eq = strchr(p, '=');
		if (!eq || eq == p || n >= RPT_MAX_VARY)
			return -1;
		*eq = '\0';
		paths[n] = p;
		values[n] = eq + 1;
		n++;
		p = comma ? comma + 1 : NULL;
	}
	return n;
}

enum tw_result rpt_sweep_from_store(const char *db_path, const char *label, struct rpt_sweep *s,
				    char *label_out, size_t label_len, struct tw_err *err)
{
	struct prof_db *db = NULL;
	TW_CHECK(prof_db_open_existing(db_path, &db, err)); /* its messages for missing / foreign files */
	sqlite3 *q = prof_db_handle(db); /* read-only, as the store opened it */
	struct srun *runs = NULL;
	size_t n = 0;
	char lab[200];
	enum tw_result rc = TW_OK;
	if (label) {
		snprintf(lab, sizeof(lab), "%s", label);
	} else { /* the newest sweep's label */
		sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(q, "SELECT name FROM runs WHERE complete = 1 AND kind = 'sim' AND"
					  " source = 'twin sweep' AND name LIKE '%/%=%' ORDER BY id DESC LIMIT 1",
				       -1, &st, NULL) != SQLITE_OK) {
			rc = sql_err(q, db_path, err);
			goto out;
		}
		int r = sqlite3_step(st);
		const char *name = r == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
		const char *slash = name ? strrchr(name, '/') : NULL;
		if (slash)
			snprintf(lab, sizeof(lab), "%.*s", (int)(slash - name), name);
		sqlite3_finalize(st);
		if (!slash) {
			rc = tw_errf(err, TW_ERR_INVALID,
				     "%s: no stored sweep (store one with twin sweep ... --db %s)", db_path, db_path);
			goto out;
		}
	}
	if (label_out)
		snprintf(label_out, label_len, "%s", lab);
	TW_CHECK_GOTO(query_runs(q, db_path, lab, &runs, &n, err), rc, out);
	if (n == 0) {
		rc = tw_errf(err, TW_ERR_INVALID, "%s: no stored sweep runs named '%s/PATH=VALUE' (see twin runs --db %s)",
			     db_path, lab, db_path);
		goto out;
	}
	if (n > RPT_MAX_POINTS) {
		rc = tw_errf(err, TW_ERR_LIMIT, "%s: sweep '%s' has more than %d points", db_path, lab,
			     RPT_MAX_POINTS);
		goto out;
	}
	/* the varies: the first run's paths; every run must have the same ones */
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += strlen(runs[i].suffix) + 1;
	memset(s, 0, sizeof(*s));
	s->pts = TW_NEW_ARRAY(struct rpt_point, n);
	s->npts = n;
	size_t used[RPT_MAX_VARY] = { 0 };
	for (size_t i = 0; i < n; i++) {
		char *copy = tw_strdup(runs[i].suffix), *paths[RPT_MAX_VARY], *values[RPT_MAX_VARY];
		int k = split_suffix(copy, paths, values);
		bool same = k > 0 && (i == 0 || k == s->nvary);
		for (int v = 0; same && i > 0 && v < k; v++)
			same = !strcmp(paths[v], s->vary[v].path);
		if (!same) {
			rc = tw_errf(err, TW_ERR_INVALID, "%s: run '%s/%s' does not vary the same paths as '%s/%s'",
				     db_path, lab, runs[i].suffix, lab, runs[0].suffix);
			free(copy);
			goto out;
		}
		for (int v = 0; v < k; v++) {
			struct rpt_vary *vy = &s->vary[v];
			if (i == 0) {
				snprintf(vy->path, sizeof(vy->path), "%s", paths[v]);
				vy->buf = tw_malloc(total);
				s->nvary = k;
			}
			int x = 0;
			while (x < vy->nvalues && strcmp(vy->values[x], values[v]))
				x++;
			if (x == vy->nvalues) {
				if (x >= RPT_MAX_VALUES) {
					rc = tw_errf(err, TW_ERR_LIMIT, "%s: sweep '%s' has more than %d values of %s",
						     db_path, lab, RPT_MAX_VALUES, vy->path);
					free(copy);
					goto out;
				}
				vy->values[x] = vy->buf + used[v];
				strcpy(vy->values[x], values[v]);
				used[v] += strlen(values[v]) + 1;
				vy->nvalues++;
			}
			s->pts[i].value[v] = vy->values[x];
		}
		free(copy);
	}
	/* each point: its analysis and job facts */
	for (size_t i = 0; i < n && rc == TW_OK; i++) {
		struct rpt_point *p = &s->pts[i];
		p->run_id = runs[i].id;
		char id[32];
		snprintf(id, sizeof(id), "%" PRId64, runs[i].id);
		struct trace t;
		memset(&t, 0, sizeof(t));
		struct prof_analysis a;
		int64_t gpus = 0, tokens = 0, rid = 0;
		double mf = 0, peak = 0, cap = 0;
		rc = job_facts(&runs[i], &gpus, &tokens, &mf, &peak, &cap, err);
		if (rc == TW_OK)
			rc = prof_load_trace(db, id, &t, &rid, err);
		if (rc == TW_OK)
			rc = prof_analyze(&t, &a, err);
		if (rc == TW_OK)
			rpt_point_fill(p, &a, gpus, tokens, mf, peak, cap);
		trace_release(&t);
	}
out:
	for (size_t i = 0; i < n; i++) {
		free(runs[i].suffix);
		free(runs[i].job_json);
	}
	free(runs);
	prof_db_close(db);
	return rc;
}
