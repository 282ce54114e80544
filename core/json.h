/* json — loading JSON files with cJSON and reading fields with errors that name the file,
 * the field path and the rule ("m.json: layers: must be an integer > 0").
 *
 * A struct json_ctx carries the file name (for messages) and the error sink. Getters return
 * TW_OK when the field is absent and leave *out untouched (so callers pre-set defaults), and
 * set *present when asked. Strict sections: json_check_keys() rejects unknown keys. */
#ifndef TW_JSON_H
#define TW_JSON_H

#include <cjson/cJSON.h>

#include "tw.h"

/* Largest input file twin reads, in bytes: larger files are refused (TW_ERR_LIMIT). */
#define JSON_MAX_FILE_BYTES (64LL * TW_MIB)

/* Read a file (at most max_bytes) into a NUL-terminated buffer; caller frees. */
enum tw_result json_read_file(const char *path, int64_t max_bytes, char **out, size_t *len,
			      struct tw_err *err);

/* Text a JSON parser can take: not gzip-compressed, no NUL byte (the message says which). */
enum tw_result json_check_text(const char *name, const char *text, size_t len, struct tw_err *err);
/* The error for text that does not parse at byte off (cJSON's error position): "f.json:3:17:
 * malformed JSON" followed by where (e.g. " (in traceEvents[2])", or ""); an empty text says so. */
enum tw_result json_malformed(const char *name, const char *text, size_t len, size_t off,
			      const char *where, struct tw_err *err);
/* Parse text; on failure the message has the line and column: "f.json:3:17: malformed JSON". */
enum tw_result json_parse(const char *name, const char *text, size_t len, cJSON **out,
			  struct tw_err *err);
/* json_read_file + json_parse; the root must be an object. Caller frees with cJSON_Delete. */
enum tw_result json_load_object(const char *path, cJSON **out, struct tw_err *err);

struct json_ctx {
	const char *file;   /* for messages */
	const char *prefix; /* path prefix for messages, e.g. "zero_optimization" (may be NULL) */
	struct tw_err *err;
};

/* Integer in [min, max]; accepts integral doubles (1e9) but not 1.5, strings, bools, NaN. */
enum tw_result json_get_int(const struct json_ctx *c, const cJSON *obj, const char *key,
			    int64_t min, int64_t max, int64_t *out, bool *present);
/* Finite number in [min, max]. */
enum tw_result json_get_num(const struct json_ctx *c, const cJSON *obj, const char *key,
			    double min, double max, double *out, bool *present);
enum tw_result json_get_bool(const struct json_ctx *c, const cJSON *obj, const char *key,
			     bool *out, bool *present);
/* String copied into out (size len); too long is an error. */
enum tw_result json_get_str(const struct json_ctx *c, const cJSON *obj, const char *key,
			    char *out, size_t len, bool *present);
/* String that must be one of choices (NULL-terminated); *out is its index. */
enum tw_result json_get_enum(const struct json_ctx *c, const cJSON *obj, const char *key,
			     const char *const *choices, int *out, bool *present);
/* Object (or absent: *out = NULL). */
enum tw_result json_get_obj(const struct json_ctx *c, const cJSON *obj, const char *key,
			    const cJSON **out);

/* Every key of obj must be in allowed (NULL-terminated), else "file: prefix.key: unknown key". */
enum tw_result json_check_keys(const struct json_ctx *c, const cJSON *obj,
			       const char *const *allowed);

/* Record "file: prefix.key: rule" in c->err and return TW_ERR_INVALID. */
/* A key repeated in any object of the tree: cJSON keeps every copy and lookups find the first,
 * so a repeat would be dropped silently (DeepSpeed refuses one too). */
enum tw_result json_check_dups(const struct json_ctx *c, const cJSON *root);
enum tw_result json_fail(const struct json_ctx *c, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Names of the NAME.json files in dir (the presets), sorted and comma-separated, into buf
 * (always NUL-terminated when len > 0; empty when dir cannot be read). */
void json_list_dir(const char *dir, char *buf, size_t len);

/* Overrides: PATH=VALUE applied to a tree. The value is parsed as JSON (number, true, false,
 * null, object) or else taken as a string. With must_exist the path must already be there and
 * the new value must have the same JSON type (numbers stay numbers); otherwise missing objects
 * on the way are created. what names the input in messages ("--set"). */
enum tw_result json_set_path(cJSON *root, const char *assignment, bool must_exist,
			     const char *what, struct tw_err *err);

#endif
