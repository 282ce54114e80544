/* core — the public header of the shared language of twin (the only core header other
 * modules include). */
#ifndef TW_CORE_H
#define TW_CORE_H

#include "tw.h"
#include "json.h"
#include "model.h"
#include "cluster.h"
#include "strategy.h"
#include "job.h"
#include "plan.h"
#include "trace.h"

#endif
