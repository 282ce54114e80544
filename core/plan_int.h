/* plan_int — what the plan's own files share (not for other modules). */
#ifndef TW_PLAN_INT_H
#define TW_PLAN_INT_H

#include "plan.h"

#define PLAN_NONE UINT32_MAX

struct plan_op *plan_push(struct plan *p, enum plan_kind kind, enum plan_stream stream,
			  const char *name, const uint32_t *deps, int ndeps);

#endif
