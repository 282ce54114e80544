/* json — file loading and field getters with file/field/rule messages. */
#define _POSIX_C_SOURCE 200809L
#include "json.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum tw_result json_read_file(const char *path, int64_t max_bytes, char **out, size_t *len,
			      struct tw_err *err)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return tw_errf(err, TW_ERR_INVALID, "%s: not a regular file", path);
	if ((int64_t)st.st_size > max_bytes)
		return tw_errf(err, TW_ERR_LIMIT, "%s: file is %lld bytes, over the limit of %lld bytes",
			       path, (long long)st.st_size, (long long)max_bytes);
	FILE *f = fopen(path, "rb");
	if (!f)
		return tw_errf(err, TW_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *buf = tw_malloc(cap);
	for (;;) {
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
		if (n + 1 == cap) { /* file grew while reading: keep the limit */
			if ((int64_t)cap > max_bytes) {
				fclose(f);
				free(buf);
				return tw_errf(err, TW_ERR_LIMIT, "%s: file over the limit of %lld bytes",
					       path, (long long)max_bytes);
			}
			cap *= 2;
			buf = tw_realloc(buf, cap);
		}
	}
	bool bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return tw_errf(err, TW_ERR_INVALID, "%s: read error", path);
	}
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	return TW_OK;
}

enum tw_result json_check_text(const char *name, const char *text, size_t len, struct tw_err *err)
{
	/* tensorboard_trace_handler(use_gzip=True) writes .json.gz */
	if (len >= 2 && (unsigned char)text[0] == 0x1f && (unsigned char)text[1] == 0x8b)
		return tw_errf(err, TW_ERR_INVALID, "%s: gzip-compressed; gunzip it first", name);
	if (memchr(text, '\0', len))
		return tw_errf(err, TW_ERR_INVALID, "%s: not a JSON text (contains a NUL byte)", name);
	return TW_OK;
}

enum tw_result json_malformed(const char *name, const char *text, size_t len, size_t off,
			      const char *where, struct tw_err *err)
{
	if (len == 0)
		return tw_errf(err, TW_ERR_INVALID, "%s: empty file, expected a JSON object", name);
	size_t line = 1, col = 1;
	if (off > len)
		off = len;
	for (size_t i = 0; i < off; i++) {
		if (text[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	return tw_errf(err, TW_ERR_INVALID, "%s:%zu:%zu: malformed JSON%s", name, line, col, where);
}

enum tw_result json_parse(const char *name, const char *text, size_t len, cJSON **out,
			  struct tw_err *err)
{
	TW_CHECK(json_check_text(name, text, len, err));
	const char *end = NULL;
	/* cJSON's require_null_terminated needs the NUL inside the length; check the tail here */
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (root && end) {
		while ((size_t)(end - text) < len && strchr(" \t\r\n", *end))
			end++;
		if ((size_t)(end - text) < len) {
			cJSON_Delete(root);
			root = NULL;
		}
	}
	if (!root)
		return json_malformed(name, text, len, end ? (size_t)(end - text) : 0, "", err);
	*out = root;
	return TW_OK;
}

enum tw_result json_load_object(const char *path, cJSON **out, struct tw_err *err)
{
	char *text = NULL;
	size_t len = 0;
	TW_CHECK(json_read_file(path, JSON_MAX_FILE_BYTES, &text, &len, err));
	cJSON *root = NULL;
	enum tw_result rc = json_parse(path, text, len, &root, err);
	free(text);
	if (rc != TW_OK)
		return rc;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return tw_errf(err, TW_ERR_INVALID, "%s: the top level must be a JSON object", path);
	}
	*out = root;
	return TW_OK;
}

enum tw_result json_fail(const struct json_ctx *c, const char *key, const char *fmt, ...)
{
	char rule[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	if (c->prefix && *c->prefix && key)
		return tw_errf(c->err, TW_ERR_INVALID, "%s: %s.%s: %s", c->file, c->prefix, key, rule);
	return tw_errf(c->err, TW_ERR_INVALID, "%s: %s: %s", c->file,
		       key ? key : (c->prefix ? c->prefix : "(top level)"), rule);
}

static const cJSON *field(const cJSON *obj, const char *key, bool *present)
{
	const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	if (v && cJSON_IsNull(v))
		v = NULL; /* null = not given */
	if (present)
		*present = v != NULL;
	return v;
}

enum tw_result json_get_int(const struct json_ctx *c, const cJSON *obj, const char *key,
			    int64_t min, int64_t max, int64_t *out, bool *present)
{
	const cJSON *v = field(obj, key, present);
	if (!v)
		return TW_OK;
	if (!cJSON_IsNumber(v))
		return json_fail(c, key, "must be an integer, got %s",
				 cJSON_IsString(v) ? "a string" : cJSON_IsBool(v) ? "a boolean" : "another type");
	double d = v->valuedouble;
	if (!isfinite(d))
		return json_fail(c, key, "must be a finite integer");
	if (d >= 9.2233720368547758e18 || d <= -9.2233720368547758e18)
		return json_fail(c, key, "%g overflows a 64-bit integer", d);
	if (d != floor(d))
		return json_fail(c, key, "must be an integer, got %g", d);
	int64_t i = (int64_t)d;
	if (i < min || i > max) {
		if (max == INT64_MAX)
			return json_fail(c, key, "must be >= %lld, got %lld", (long long)min, (long long)i);
		return json_fail(c, key, "must be in [%lld, %lld], got %lld", (long long)min,
				 (long long)max, (long long)i);
	}
	*out = i;
	return TW_OK;
}

enum tw_result json_get_num(const struct json_ctx *c, const cJSON *obj, const char *key,
			    double min, double max, double *out, bool *present)
{
	const cJSON *v = field(obj, key, present);
	if (!v)
		return TW_OK;
	if (!cJSON_IsNumber(v))
		return json_fail(c, key, "must be a number");
	double d = v->valuedouble;
	if (!isfinite(d))
		return json_fail(c, key, "must be a finite number");
	if (d < min || d > max)
		return json_fail(c, key, "must be in [%g, %g], got %g", min, max, d);
	*out = d;
	return TW_OK;
}

enum tw_result json_get_bool(const struct json_ctx *c, const cJSON *obj, const char *key,
			     bool *out, bool *present)
{
	const cJSON *v = field(obj, key, present);
	if (!v)
		return TW_OK;
	if (!cJSON_IsBool(v))
		return json_fail(c, key, "must be true or false");
	*out = cJSON_IsTrue(v);
	return TW_OK;
}

enum tw_result json_get_str(const struct json_ctx *c, const cJSON *obj, const char *key,
			    char *out, size_t len, bool *present)
{
	const cJSON *v = field(obj, key, present);
	if (!v)
		return TW_OK;
	if (!cJSON_IsString(v))
		return json_fail(c, key, "must be a string");
	if (strlen(v->valuestring) >= len)
		return json_fail(c, key, "string longer than %zu characters", len - 1);
	strcpy(out, v->valuestring);
	return TW_OK;
}

enum tw_result json_get_enum(const struct json_ctx *c, const cJSON *obj, const char *key,
			     const char *const *choices, int *out, bool *present)
{
	const cJSON *v = field(obj, key, present);
	if (!v)
		return TW_OK;
	char list[256] = "";
	for (int i = 0; choices[i]; i++) {
		if (cJSON_IsString(v) && !strcmp(v->valuestring, choices[i])) {
			*out = i;
			return TW_OK;
		}
		size_t n = strlen(list);
		snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : "", choices[i]);
	}
	return json_fail(c, key, "must be one of: %s", list);
}

enum tw_result json_get_obj(const struct json_ctx *c, const cJSON *obj, const char *key,
			    const cJSON **out)
{
	const cJSON *v = field(obj, key, NULL);
	*out = NULL;
	if (!v)
		return TW_OK;
	if (!cJSON_IsObject(v))
		return json_fail(c, key, "must be an object");
	*out = v;
	return TW_OK;
}

enum tw_result json_check_keys(const struct json_ctx *c, const cJSON *obj,
			       const char *const *allowed)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, obj)
	{
		bool ok = false;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = it->string && !strcmp(it->string, allowed[i]);
		if (!ok)
			return json_fail(c, it->string ? it->string : "?", "unknown key");
	}
	return TW_OK;
}

/* Parse VALUE of --set: JSON if it parses, else a plain string; NULL for a value that opens an
 * array or object but is no JSON (it means JSON, and a broken one is not a string). */
static cJSON *parse_value(const char *s)
{
	cJSON *v = cJSON_ParseWithOpts(s, NULL, 1); /* all of it: "2x" and "0.19.4" are strings */
	if (v)
		return v;
	return s[0] == '[' || s[0] == '{' ? NULL : cJSON_CreateString(s);
}

static const char *json_type_name(const cJSON *v)
{
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsArray(v))
		return "an array";
	if (cJSON_IsObject(v))
		return "an object";
	return "null";
}

enum tw_result json_set_path(cJSON *root, const char *assignment, bool must_exist,
			     const char *what, struct tw_err *err)
{
	const char *eq = strchr(assignment, '=');
	if (!eq || eq == assignment)
		return tw_errf(err, TW_ERR_USAGE, "%s %s: expected PATH=VALUE", what, assignment);
	size_t plen = (size_t)(eq - assignment);
	if (plen >= 256)
		return tw_errf(err, TW_ERR_USAGE, "%s: path too long", what);
	char path[256];
	memcpy(path, assignment, plen);
	path[plen] = '\0';
	const char *value = eq + 1;
	if (path[0] == '.' || path[plen - 1] == '.' || strstr(path, ".."))
		return tw_errf(err, TW_ERR_USAGE, "%s %s: the path has an empty part", what,
			       assignment);
	if (!strcmp(value, "null")) /* a what-if names a value; the default is no --set */
		return tw_errf(err, TW_ERR_INVALID, "%s %s: null is not a value here (leave the "
			       "--set out for the default)", what, assignment);

	cJSON *node = root;
	char *save = NULL;
	char *tok = strtok_r(path, ".", &save);
	char walked[256] = "";
	while (tok) {
		char *next = strtok_r(NULL, ".", &save);
		size_t wl = strlen(walked);
		snprintf(walked + wl, sizeof(walked) - wl, "%s%s", wl ? "." : "", tok);
		if (!cJSON_IsObject(node))
			return tw_errf(err, TW_ERR_INVALID, "%s %.*s: %s is not an object", what,
				       (int)plen, assignment, walked);
		cJSON *child = cJSON_GetObjectItemCaseSensitive(node, tok);
		if (!next) {
			cJSON *v = parse_value(value);
			if (!v)
				return tw_errf(err, TW_ERR_INVALID, "%s %s: the value is not valid JSON",
					       what, assignment);
			if (child && must_exist && !cJSON_IsNull(child)) {
				bool same = (cJSON_IsNumber(child) && cJSON_IsNumber(v)) ||
					    (cJSON_IsBool(child) && cJSON_IsBool(v)) ||
					    (cJSON_IsString(child) && cJSON_IsString(v)) ||
					    (cJSON_IsArray(child) && cJSON_IsArray(v)) ||
					    (cJSON_IsObject(child) && cJSON_IsObject(v));
				if (!same) {
					const char *want = json_type_name(child);
					cJSON_Delete(v);
					return tw_errf(err, TW_ERR_INVALID, "%s %s: %s must be %s", what,
						       assignment, walked, want);
				}
			}
			if (!child && must_exist) {
				cJSON_Delete(v);
				return tw_errf(err, TW_ERR_INVALID, "%s %s: no field %s", what, assignment,
					       walked);
			}
			if (child)
				cJSON_ReplaceItemInObjectCaseSensitive(node, tok, v);
			else
				cJSON_AddItemToObject(node, tok, v);
			return TW_OK;
		}
		if (!child) {
			if (must_exist)
				return tw_errf(err, TW_ERR_INVALID, "%s %s: no field %s", what, assignment,
					       walked);
			child = cJSON_AddObjectToObject(node, tok);
		}
		node = child;
		tok = next;
	}
	return tw_errf(err, TW_ERR_USAGE, "%s %s: empty path", what, assignment);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void json_list_dir(const char *dir, char *buf, size_t len)
{
	if (len == 0)
		return;
	buf[0] = '\0';
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d)
		return;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l <= 5 || strcmp(e->d_name + l - 5, ".json") || e->d_name[0] == '.')
			continue;
		TW_GROW(names, cap, n + 1);
		names[n] = tw_strdup(e->d_name);
		names[n++][l - 5] = '\0';
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_name);
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		if (used + 1 < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
		free(names[i]);
	}
	free(names);
}

/* Where a key sits, for messages: a chain of parents built on the stack while descending. */
struct key_path {
	const struct key_path *up;
	const char *key; /* NULL: an array item */
	int index;
};

static void format_path(const struct key_path *p, char *buf, size_t len)
{
	if (!p) {
		buf[0] = '\0';
		return;
	}
	format_path(p->up, buf, len);
	size_t n = strlen(buf);
	if (p->key)
		snprintf(buf + n, len - n, "%s%s", n ? "." : "", p->key);
	else
		snprintf(buf + n, len - n, "[%d]", p->index);
}

struct named {
	const char *name;
	int index;
};

static int by_name_then_index(const void *a, const void *b)
{
	const struct named *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Names are sorted rather than compared pairwise: an HF config may carry many keys twin never
 * reads. */
static enum tw_result dups_at(const struct json_ctx *c, const cJSON *node,
			      const struct key_path *at)
{
	if (!cJSON_IsObject(node) && !cJSON_IsArray(node))
		return TW_OK;
	int n = cJSON_GetArraySize(node), i = 0;
	if (cJSON_IsObject(node) && n > 1) {
		struct named *v = TW_NEW_ARRAY(struct named, (size_t)n);
		for (const cJSON *it = node->child; it; it = it->next, i++)
			v[i] = (struct named){it->string ? it->string : "", i};
		qsort(v, (size_t)n, sizeof(*v), by_name_then_index);
		int first = -1; /* the earliest key, in file order, that repeats one before it */
		const char *name = NULL;
		for (i = 1; i < n; i++)
			if (!strcmp(v[i].name, v[i - 1].name) && (first < 0 || v[i].index < first))
				first = v[i].index, name = v[i].name;
		free(v);
		if (name) {
			char path[256];
			struct key_path k = {at, name, 0};
			format_path(&k, path, sizeof(path));
			return json_fail(c, path, "duplicate key");
		}
	}
	i = 0;
	for (const cJSON *it = node->child; it; it = it->next, i++) {
		struct key_path k = {at, cJSON_IsObject(node) ? it->string : NULL, i};
		TW_CHECK(dups_at(c, it, &k));
	}
	return TW_OK;
}

enum tw_result json_check_dups(const struct json_ctx *c, const cJSON *root)
{
	return dups_at(c, root, NULL);
}
