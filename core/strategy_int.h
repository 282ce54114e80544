/* strategy internals shared by strategy.c (our strategy JSON, degrees, batch, checks, output)
 * and strategy_ds.c (DeepSpeed ds_config.json with DeepSpeed's semantics). Not public. */
#ifndef TW_STRATEGY_INT_H
#define TW_STRATEGY_INT_H

#include <cjson/cJSON.h>

#include "json.h"
#include "model.h"
#include "strategy.h"

enum strat_tree { STRAT_TREE_DS = 0, STRAT_TREE_OURS };

/* One --set aimed at the strategy, after routing: which tree and the path inside it. */
struct strat_set {
	enum strat_tree tree;
	char path[128];        /* inside its tree: "zero_optimization.stage", "tp" */
	const char *assignment; /* as given, for messages: "zero_optimization.stage=3" */
	char label[160];        /* "--set zero_optimization.stage=3" */
};

/* One batch quantity as the inputs give it. */
struct strat_bval {
	bool given, is_auto, from_set;
	int64_t v;
	char why[96];
};

/* Everything the resolution carries between its steps. */
struct strat_rd {
	struct strategy *s;
	struct tw_err *err;
	const struct model *m;
	const struct cluster *c;
	const char *ds_file;   /* label of the ds_config tree, NULL when there is none */
	const char *our_file;  /* label of our strategy tree, NULL when there is none */
	struct strat_set sets[64];
	int nsets;
	int version;           /* deepspeed_version as major<<20 | minor<<10 | patch */

	/* batch inputs: from ds_config (train_batch_size, micro, gas) and from our keys */
	struct strat_bval ds_tb, ds_mb, ds_gas, our_gb, our_mb, our_ga;
	/* HF TrainingArguments (our "hf_trainer" block) used to fill "auto" */
	int64_t hf_micro, hf_gas;
	bool hf_micro_given, hf_gas_given, hf_bf16, hf_fp16;
	double hf_max_grad_norm;
	/* precision as our file states it (for "auto" and agreement with ds_config) */
	bool precision_given;
	enum tw_dtype precision;
	bool optimizer_given;  /* our "optimizer" key */
	/* hints the ds_config gives about degrees */
	int64_t ds_autotp, ds_sp;
	bool tp_given, cp_given;
	bool fp16_auto, bf16_auto;
	/* HF fills for ZeRO keys when "auto" (need the model's hidden size) */
	bool rbs_auto, prefetch_auto, persist_auto;
	bool ds_prov;          /* record provenance of DeepSpeed keys (framework deepspeed) */
	bool ds_optimizer_given;
	bool ds_fp16, ds_bf16; /* what the ds_config enables (after "auto") */
	/* warnings, printed once the strategy resolves (bad input gets its one error line) */
	char warn[8][320];
	int nwarn;
};

/* Queue a warning line (dropped past the eighth). */
void strat_warn(struct strat_rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define STRAT_VERSION(a, b, c) (((a) << 20) | ((b) << 10) | (c))

/* Provenance: insert or replace the entry for path (first insertion fixes the order). */
void strat_prov(struct strategy *s, const char *path, enum strat_src src, const char *why,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Where a value of tree/path came from: the --set that wrote it, else the file. */
const struct strat_set *strat_find_set(const struct strat_rd *r, enum strat_tree t,
				       const char *path);
/* Source and why for a value that is present in tree t at path. */
enum strat_src strat_src_of(const struct strat_rd *r, enum strat_tree t, const char *path,
			    char *why, size_t len);
/* The label for messages about tree t at path: "--set P=V" or the file name. */
const char *strat_label(const struct strat_rd *r, enum strat_tree t, const char *path);

/* True when the value is the string "auto". */
bool strat_is_auto(const cJSON *v);

/* Whether key is a top-level key DeepSpeed's config knows (routes --set). */
bool strat_ds_top_key(const char *key);

/* Parse a ds_config tree with DeepSpeed's semantics into r->s and r's batch inputs. */
enum tw_result strat_ds_parse(struct strat_rd *r, const cJSON *ds);
/* After dp is known: DeepSpeed's batch rule (derivation table and messages, §1.2). */
enum tw_result strat_ds_batch(struct strat_rd *r);
/* HF "auto" fills that need the model (reduce_bucket_size = h*h, ...). */
void strat_ds_auto_model(struct strat_rd *r);

#endif
