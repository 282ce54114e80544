/* Fuzz target: JSON parsing with line/column errors, typed getters and --set paths.
 * Input: first line is a --set assignment, the rest a JSON text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	size_t alen = nl ? (size_t)(nl - (const char *)data) : 0;
	char *assign = tw_malloc(alen + 1);
	memcpy(assign, data, alen);
	assign[alen] = '\0';
	size_t off = nl ? alen + 1 : 0;
	char *text = tw_malloc(size - off + 1);
	memcpy(text, data + off, size - off);
	text[size - off] = '\0';

	struct tw_err err = {0};
	cJSON *root = NULL;
	if (json_parse("fuzz.json", text, size - off, &root, &err) == TW_OK) {
		struct json_ctx c = {.file = "fuzz.json", .prefix = "x", .err = &err};
		int64_t i = 0;
		double d = 0;
		bool b = false;
		char s[32];
		static const char *const choices[] = {"a", "b", NULL};
		int e = 0;
		const cJSON *o = NULL;
		if (cJSON_IsObject(root)) {
			tw_err_clear(&err);
			json_get_int(&c, root, "i", 1, 1000, &i, NULL);
			tw_err_clear(&err);
			json_get_num(&c, root, "d", 0, 1e18, &d, NULL);
			tw_err_clear(&err);
			json_get_bool(&c, root, "b", &b, NULL);
			tw_err_clear(&err);
			json_get_str(&c, root, "s", s, sizeof(s), NULL);
			tw_err_clear(&err);
			json_get_enum(&c, root, "e", choices, &e, NULL);
			tw_err_clear(&err);
			json_get_obj(&c, root, "o", &o);
			static const char *const allowed[] = {"i", "d", "b", "s", "e", "o", NULL};
			tw_err_clear(&err);
			json_check_keys(&c, root, allowed);
		}
		tw_err_clear(&err);
		json_set_path(root, assign, false, "--set", &err);
		tw_err_clear(&err);
		json_set_path(root, assign, true, "--set", &err);
		cJSON_Delete(root);
	}
	free(assign);
	free(text);
	return 0;
}
