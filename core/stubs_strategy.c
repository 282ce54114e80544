/* Temporary: replaced by core/strategy.c (delete this file when strategy.c lands). */
#include <cjson/cJSON.h>
#include "strategy.h"
enum tw_result strategy_resolve(const struct strat_inputs *i, const struct model *m,
				const struct cluster *c, struct strategy *o, struct tw_err *e)
{ (void)i; (void)m; (void)c; (void)o; return tw_errf(e, TW_ERR_UNSUPPORTED, "strategy: not built yet"); }
struct cJSON *strategy_to_json(const struct strategy *s) { (void)s; return cJSON_CreateObject(); }
