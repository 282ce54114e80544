/* Temporary: replaced by core/model.c (delete this file when model.c lands). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include "model.h"
enum tw_result model_load(const char *n, const char *d, struct model *o, struct tw_err *e)
{ (void)d; (void)o; return tw_errf(e, TW_ERR_UNSUPPORTED, "%s: model loading not built yet", n); }
struct cJSON *model_to_json(const struct model *m) { (void)m; return cJSON_CreateObject(); }
