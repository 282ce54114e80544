/* twin profile — import traces (nsys SQLite, Kineto JSON), analyse a run, export it as
 * Chrome/Perfetto JSON, merge per-rank databases. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../profile/profile.h"
#include "cli.h"

static const char profile_help[] =
	"usage: twin profile import (--nsys FILE.sqlite | --kineto FILE.json)... [--name N] [--db F] [--json]\n"
	"       twin profile analyze RUN [--per-rank] [--db F] [--json]\n"
	"       twin profile export RUN --chrome OUT.json [--rank R] [--db F]\n"
	"       twin profile merge INPUT.db... [--name N] [--db F] [--json]\n\n"
	"import   reads 'nsys export --type sqlite' files and PyTorch profiler (Kineto) traces;\n"
	"         several files form one run, one file per rank (Kineto: distributedInfo.rank,\n"
	"         else file order; nsys: file order)\n"
	"analyze  step breakdown per category, exposed communication, stall split, achieved\n"
	"         algbw/busbw per collective type (nccl-tests definitions), stragglers\n"
	"export   Chrome / Perfetto trace JSON with Kineto's fields; --rank R writes one rank\n"
	"         (HTA reads one file per rank)\n"
	"merge    combines the runs of per-rank databases (e.g. written by libtwinprof.so with\n"
	"         TWIN_DB=rank%r.db) into one run of the database given by --db\n\n"
	"RUN is a run id or name (see 'twin runs'). The default database is twin.db.\n";

/* the options given, so that each action refuses those it does not take */
enum { O_DB = 1, O_NAME = 2, O_CHROME = 4, O_FILES = 8, O_RANK = 16, O_JSON = 32, O_PER_RANK = 64,
       O_NUM = 7 };

struct popts {
	unsigned given;             /* O_* */
	const char *spelled[O_NUM]; /* each as first written */
	const char *db;
	const char *name;
	const char *chrome;
	int64_t rank; /* export: -1 all */
	bool json, per_rank;
	const char *pos[256];
	int npos;
	const char *nsys[256], *kineto[256];
	int nnsys, nkineto;
	/* file order across both kinds, for rank numbering */
	const char *files[512];
	bool file_is_nsys[512];
	int nfiles;
};

static int parse(const char *sub, int argc, char **argv, struct popts *o)
{
	struct tw_err err = {0};
	memset(o, 0, sizeof(*o));
	o->db = "twin.db";
	o->rank = -1;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v;
		unsigned bit = cli_is_opt(a, "--db") ? O_DB : cli_is_opt(a, "--name") ? O_NAME
			     : cli_is_opt(a, "--chrome") ? O_CHROME
			     : cli_is_opt(a, "--nsys") || cli_is_opt(a, "--kineto") ? O_FILES
			     : cli_is_opt(a, "--rank") ? O_RANK : !strcmp(a, "--json") ? O_JSON
			     : !strcmp(a, "--per-rank") ? O_PER_RANK : 0;
		for (int k = 0; k < O_NUM; k++)
			if (bit == 1u << k && !o->spelled[k])
				o->spelled[k] = a;
		o->given |= bit;
		if (cli_is_opt(a, "--db")) {
			if (!(o->db = cli_value(argc, argv, &i, "--db", &err)))
				return cli_fail(&err);
		} else if (cli_is_opt(a, "--name")) {
			if (!(o->name = cli_value(argc, argv, &i, "--name", &err)))
				return cli_fail(&err);
		} else if (cli_is_opt(a, "--chrome")) {
			if (!(o->chrome = cli_value(argc, argv, &i, "--chrome", &err)))
				return cli_fail(&err);
		} else if (cli_is_opt(a, "--nsys") || cli_is_opt(a, "--kineto")) {
			bool nsys = cli_is_opt(a, "--nsys");
			if (!(v = cli_value(argc, argv, &i, nsys ? "--nsys" : "--kineto", &err)))
				return cli_fail(&err);
			if (o->nfiles >= 512 || o->nnsys >= 256 || o->nkineto >= 256)
				return cli_usage_error("profile", "too many input files (at most 256 per kind)");
			if (nsys)
				o->nsys[o->nnsys++] = v;
			else
				o->kineto[o->nkineto++] = v;
			o->file_is_nsys[o->nfiles] = nsys;
			o->files[o->nfiles++] = v;
		} else if (cli_is_opt(a, "--rank")) {
			if (!(v = cli_value(argc, argv, &i, "--rank", &err)) ||
			    cli_parse_int("--rank", v, 0, INT32_MAX, &o->rank, &err) != TW_OK)
				return cli_fail(&err);
		} else if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--per-rank")) {
			o->per_rank = true;
		} else if (a[0] == '-' && a[1] != '\0') {
			return cli_usage_error("profile", "%s: unknown option '%s' (see twin profile --help)",
					       sub, a);
		} else {
			if (o->npos >= 256)
				return cli_usage_error("profile", "too many arguments");
			o->pos[o->npos++] = a;
		}
	}
	return -1; /* parsed */
}

/* An option the action does not take is refused, not ignored (analyze --chrome would
 * otherwise write nothing and say nothing). */
static int check_options(const char *sub, const struct popts *o, unsigned takes)
{
	for (int k = 0; k < O_NUM; k++)
		if ((o->given & ~takes) & (1u << k)) {
			char opt[64];
			snprintf(opt, sizeof(opt), "%.*s", (int)strcspn(o->spelled[k], "="), o->spelled[k]);
			return cli_usage_error("profile", "%s does not take %s (see twin profile --help)",
					       sub, opt);
		}
	return -1;
}

/* Whether two existing paths are one file (device and inode: also through another path or
 * a symbolic link). */
static bool same_inode(const char *a, const char *b)
{
	struct stat sa, sb;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

static int check_name(const char *name)
{
	struct tw_err err = {0};
	if (name && prof_run_name_check(name, "--name", &err) != TW_OK)
		return cli_fail(&err);
	return -1;
}

/* a GPU event's stream and span */
struct stream_ivl {
	int32_t rank, device, stream;
	int64_t a, b;
};

static int stream_ivl_cmp(const void *pa, const void *pb)
{
	const struct stream_ivl *x = pa, *y = pb;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	return (x->a > y->a) - (x->a < y->a);
}

/* Kernels of one stream run in order, but CUDA graphs and programmatic dependent launch let
 * them overlap; every category's time is a union, so nothing counts twice. Overlaps beyond
 * clock jitter (1 us) are said, once per import, on stderr. */
static void note_stream_overlaps(const struct trace *t)
{
	struct stream_ivl *k = TW_NEW_ARRAY(struct stream_ivl, t->nev + 1);
	size_t n = 0, over = 0;
	for (size_t i = 0; i < t->nev; i++) {
		const struct trace_event *e = &t->ev[i];
		if (e->cat != TRACE_MARKER && e->cat != TRACE_HOST && e->device >= 0)
			k[n++] = (struct stream_ivl){e->rank, e->device, e->stream, e->start_ns,
						     e->end_ns};
	}
	/* by stream and start; b carries the end of the stream's latest event so far */
	qsort(k, n, sizeof(*k), stream_ivl_cmp);
	for (size_t i = 1; i < n; i++)
		if (k[i].rank == k[i - 1].rank && k[i].device == k[i - 1].device &&
		    k[i].stream == k[i - 1].stream) {
			if (k[i].a + 1000 < k[i - 1].b)
				over++;
			if (k[i].b < k[i - 1].b)
				k[i].b = k[i - 1].b;
		}
	free(k);
	if (over)
		fprintf(stderr, "twin: note: %zu GPU event%s start%s over 1 us before the previous one "
			"on the stream ends (CUDA graphs, programmatic dependent launch); each "
			"category's time is a union, so none counts twice\n",
			over, over == 1 ? "" : "s", over == 1 ? "s" : "");
}

static int do_import(struct popts *o)
{
	if (o->nfiles == 0)
		return cli_usage_error("profile", "import: give --nsys FILE or --kineto FILE");
	if (o->npos)
		return cli_usage_error("profile", "import: unexpected argument '%s'", o->pos[0]);
	int st = check_name(o->name);
	if (st >= 0)
		return st;
	/* one file given twice would be two ranks of one process */
	for (int i = 0; i < o->nfiles; i++)
		for (int k = 0; k < i; k++)
			if (same_inode(o->files[i], o->files[k]))
				return cli_usage_error("profile", "import: %s and %s are the same file; "
						       "give each rank's file once", o->files[k], o->files[i]);
	struct tw_err err = {0};
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 0);
	enum tw_result rc = TW_OK;
	int *owner = NULL; /* file that supplied each rank */
	size_t nowner = 0;
	for (int i = 0; i < o->nfiles && rc == TW_OK; i++) {
		size_t before = t.nev;
		rc = o->file_is_nsys[i] ? prof_import_nsys(o->files[i], i, &t, &err)
					: prof_import_kineto(o->files[i], i, &t, &err);
		/* step markers alone are no activity: the run would analyse as all idle */
		size_t work = 0;
		for (size_t e = before; rc == TW_OK && e < t.nev; e++)
			work += t.ev[e].cat != TRACE_MARKER;
		if (rc == TW_OK && work == 0)
			rc = tw_errf(&err, TW_ERR_INVALID, "%s: no GPU activity found (kernels, copies, "
				     "memsets)%s", o->files[i], t.nev > before ? "; only step markers" : "");
		/* the same rank from two files is two processes claiming one rank */
		for (size_t e = before; rc == TW_OK && e < t.nev; e++) {
			size_t r = (size_t)t.ev[e].rank;
			if (r >= nowner) {
				owner = tw_realloc_array(owner, r + 1, sizeof(*owner));
				for (size_t q = nowner; q <= r; q++)
					owner[q] = -1;
				nowner = r + 1;
			}
			if (owner[r] == -1)
				owner[r] = i;
			else if (owner[r] != i)
				rc = tw_errf(&err, TW_ERR_INVALID,
					     "%s: rank %zu is also in %s; give one file per rank",
					     o->files[i], r, o->files[owner[r]]);
		}
	}
	free(owner);
	if (rc == TW_OK && t.nev == 0)
		rc = tw_errf(&err, TW_ERR_INVALID, "%s: no GPU activity found", o->files[0]);
	if (rc != TW_OK) {
		trace_release(&t);
		return cli_fail(&err);
	}
	trace_sort(&t);
	note_stream_overlaps(&t);
	char source[1024] = "";
	size_t len = 0;
	for (int i = 0; i < o->nfiles && len < sizeof(source) - 1; i++)
		len += (size_t)snprintf(source + len, sizeof(source) - len, "%s%s", i ? " " : "",
					o->files[i]);
	struct prof_run_meta meta = {.kind = TRACE_KIND_IMPORT,
				     .name = o->name,
				     .backend = o->nnsys && o->nkineto ? "mixed"
						: o->nnsys		 ? "nsys"
									 : "kineto",
				     .nranks = t.nranks,
				     .source = source};
	struct prof_db *db;
	int64_t id = 0;
	rc = prof_db_open(o->db, &db, &err);
	if (rc == TW_OK) {
		rc = prof_store_trace(db, &meta, &t, &id, &err);
		if (rc == TW_OK)
			prof_db_close(db);
		else
			prof_db_discard(db); /* no empty store left behind */
	}
	if (rc != TW_OK) {
		trace_release(&t);
		return cli_fail(&err);
	}
	/* the job's ranks (world_size) and those the files hold (as twin runs shows them) */
	int64_t traced = 0;
	bool *seen = t.nranks > 0 ? TW_NEW_ARRAY(bool, (size_t)t.nranks) : NULL;
	for (size_t i = 0; seen && i < t.nev; i++) {
		int32_t r = t.ev[i].rank;
		if (r >= 0 && r < t.nranks && !seen[r]) {
			seen[r] = true;
			traced++;
		}
	}
	free(seen);
	if (o->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddNumberToObject(j, "run", (double)id);
		cJSON_AddNumberToObject(j, "events", (double)t.nev);
		cJSON_AddNumberToObject(j, "nranks", (double)t.nranks);
		cJSON_AddNumberToObject(j, "traced_ranks", (double)traced);
		cli_print_json(j);
	} else {
		char tr[48] = "";
		if (traced != t.nranks)
			snprintf(tr, sizeof(tr), " (%" PRId64 " traced)", traced);
		printf("run %" PRId64 ": %zu events, %" PRId64 " rank%s%s from %d file%s into %s\n", id,
		       t.nev, t.nranks, t.nranks == 1 ? "" : "s", tr, o->nfiles,
		       o->nfiles == 1 ? "" : "s", o->db);
	}
	trace_release(&t);
	return 0;
}

static int load_run(struct popts *o, const char *sub, struct trace *t, struct prof_run_info *info)
{
	if (o->npos != 1)
		return cli_usage_error("profile", "%s: give one RUN (id or name)", sub);
	struct tw_err err = {0};
	struct prof_db *db;
	if (prof_db_open_existing(o->db, &db, &err) != TW_OK)
		return cli_fail(&err);
	enum tw_result rc = prof_run_info(db, o->pos[0], info, &err);
	if (rc == TW_OK)
		rc = prof_load_trace(db, o->pos[0], t, NULL, &err);
	prof_db_close(db);
	if (rc != TW_OK)
		return cli_fail(&err);
	return -1;
}

static int do_analyze(struct popts *o)
{
	struct trace t;
	struct prof_run_info info;
	int st = load_run(o, "analyze", &t, &info);
	if (st >= 0)
		return st;
	struct tw_err err = {0};
	struct prof_analysis a;
	struct prof_step *rows = NULL;
	size_t n = 0;
	enum tw_result rc = prof_analyze(&t, &a, &err);
	if (rc == TW_OK && o->per_rank)
		rc = prof_analyze_steps(&t, &rows, &n, &err);
	trace_release(&t);
	if (rc != TW_OK) {
		char m[sizeof(err.msg)];
		snprintf(m, sizeof(m), "%s", err.msg);
		tw_err_clear(&err);
		tw_errf(&err, rc, "run %" PRId64 " (%s): cannot analyse: %s", info.id,
			prof_kind_name(info.kind), m);
		return cli_fail(&err);
	}
	if (o->json) {
		cJSON *j = prof_analysis_to_json(&a);
		cJSON *r = cJSON_AddObjectToObject(j, "run");
		cJSON_AddNumberToObject(r, "id", (double)info.id);
		cJSON_AddStringToObject(r, "kind", prof_kind_name(info.kind));
		cJSON_AddStringToObject(r, "backend", info.backend);
		cJSON_AddStringToObject(r, "name", info.name);
		cJSON_AddBoolToObject(r, "complete", info.complete);
		cJSON_AddNumberToObject(r, "dropped", (double)info.dropped);
		if (o->per_rank) {
			cJSON *arr = cJSON_AddArrayToObject(j, "steps");
			for (size_t i = 0; i < n; i++) {
				cJSON *x = prof_analysis_to_json(&rows[i].a);
				cJSON_AddNumberToObject(x, "rank", (double)rows[i].rank);
				cJSON_AddNumberToObject(x, "step", (double)rows[i].step);
				cJSON_AddNumberToObject(x, "start_ns", (double)rows[i].start_ns);
				cJSON_AddItemToArray(arr, x);
			}
		}
		cli_print_json(j);
	} else {
		char shown[sizeof(info.name)];
		prof_name_display(shown, sizeof(shown), info.name);
		printf("run %" PRId64 " (%s, backend %s%s%s)%s\n", info.id, prof_kind_name(info.kind),
		       info.backend, shown[0] ? ", " : "", shown,
		       info.complete ? "" : " — INCOMPLETE: the writer did not finish");
		if (info.dropped)
			printf("warning: %" PRId64 " activity records were dropped while tracing\n",
			       info.dropped);
		prof_analysis_print(stdout, &a);
		if (o->per_rank) {
			printf("\n%5s %6s %11s %11s %11s %11s %11s %11s %11s %11s\n", "rank", "step",
			       "step ms", "compute", "comm", "exposed", "idle", "st.comm", "st.copy",
			       "st.host");
			for (size_t i = 0; i < n; i++) {
				const struct prof_analysis *x = &rows[i].a;
				printf("%5" PRId64 " %6" PRId64 " %11.3f %11.3f %11.3f %11.3f %11.3f %11.3f"
				       " %11.3f %11.3f\n",
				       rows[i].rank, rows[i].step, x->step_ns / 1e6, x->compute_ns / 1e6,
				       x->comm_ns / 1e6, x->exposed_comm_ns / 1e6, x->idle_ns / 1e6,
				       x->stall_comm_ns / 1e6, x->stall_copy_ns / 1e6,
				       x->stall_host_ns / 1e6);
			}
		}
	}
	free(rows);
	return 0;
}

static int do_export(struct popts *o)
{
	if (!o->chrome)
		return cli_usage_error("profile", "export: give --chrome OUT.json");
	if (cli_same_file(o->chrome, o->db))
		return cli_usage_error("profile", "export: --chrome %s would overwrite the database %s",
				       o->chrome, o->db);
	struct trace t;
	struct prof_run_info info;
	int st = load_run(o, "export", &t, &info);
	if (st >= 0)
		return st;
	struct tw_err err = {0};
	if (o->rank >= 0) { /* keep one rank's events */
		/* the ranks it holds, for the message when that one is not among them (a simulated
		 * run keeps one rank per role, not the job's every rank) */
		int64_t nr = t.nranks > 0 ? t.nranks : 1;
		bool *held = TW_NEW_ARRAY(bool, (size_t)nr);
		size_t k = 0;
		for (size_t i = 0; i < t.nev; i++) {
			if (t.ev[i].rank == o->rank)
				t.ev[k++] = t.ev[i];
			else if (t.ev[i].rank >= 0 && t.ev[i].rank < nr)
				held[t.ev[i].rank] = true;
		}
		char have[160] = "";
		size_t hl = 0;
		for (int64_t r = 0; r < nr && hl + 24 < sizeof(have); r++)
			if (held[r])
				hl += (size_t)snprintf(have + hl, sizeof(have) - hl, "%s%" PRId64,
						       hl ? ", " : "", r);
		if (hl + 24 >= sizeof(have))
			snprintf(have + hl, sizeof(have) - hl, ", ...");
		free(held);
		t.nev = k;
		if (k == 0) {
			trace_release(&t);
			tw_errf(&err, TW_ERR_INVALID, "run %" PRId64 " has no events of rank %" PRId64
				" (it holds ranks %s)", info.id, o->rank, have[0] ? have : "none");
			return cli_fail(&err);
		}
	}
	enum tw_result rc = prof_export_chrome_file(&t, o->chrome, &err);
	size_t nev = t.nev;
	trace_release(&t);
	if (rc != TW_OK)
		return cli_fail(&err);
	if (!o->json)
		printf("run %" PRId64 ": %zu events written to %s\n", info.id, nev, o->chrome);
	return 0;
}

/* Every run of each input database, concatenated into one run of o->db. */
static int do_merge(struct popts *o)
{
	if (o->npos == 0)
		return cli_usage_error("profile", "merge: give the per-rank databases to merge");
	int st = check_name(o->name);
	if (st >= 0)
		return st;
	for (int i = 0; i < o->npos; i++) {
		/* writing into an input would merge the run into its own store, beside itself */
		if (!strcmp(o->pos[i], o->db) || same_inode(o->pos[i], o->db))
			return cli_usage_error("profile", "merge: --db %s is the input %s; write the "
					       "merged run to another database", o->db, o->pos[i]);
		for (int k = 0; k < i; k++)
			if (same_inode(o->pos[i], o->pos[k]))
				return cli_usage_error("profile", "merge: %s and %s are the same file; "
						       "give each input once", o->pos[k], o->pos[i]);
	}
	struct tw_err err = {0};
	struct trace all;
	trace_init(&all, TRACE_KIND_EXEC, 0);
	enum tw_result rc = TW_OK;
	int64_t dropped = 0;
	bool kinds_differ = false, have_kind = false;
	enum trace_kind kind = TRACE_KIND_EXEC;
	char backend[32] = "";
	int32_t *owner = NULL; /* input index that supplied each rank */
	int64_t *owner_run = NULL; /* and its run there */
	size_t nowner = 0;
	int64_t *peaks = NULL; /* per rank recorded peak memory, bytes (-1: none) */
	size_t npeaks = 0;
	for (int i = 0; i < o->npos && rc == TW_OK; i++) {
		struct prof_db *in;
		if ((rc = prof_db_open_existing(o->pos[i], &in, &err)) != TW_OK)
			break;
		struct prof_run_info *runs;
		size_t n;
		rc = prof_list_runs(in, &runs, &n, &err);
		if (rc == TW_OK && n == 0)
			rc = tw_errf(&err, TW_ERR_INVALID, "%s: no runs to merge", o->pos[i]);
		for (size_t k = 0; rc == TW_OK && k < n; k++) {
			char id[32];
			snprintf(id, sizeof(id), "%" PRId64, runs[k].id);
			/* a run whose writer did not finish (a killed process) would come out of
			 * the merge looking complete */
			if (!runs[k].complete) {
				rc = tw_errf(&err, TW_ERR_INVALID,
					     "%s: run %" PRId64 " is incomplete (its writer did not finish); "
					     "merge takes complete runs only", o->pos[i], runs[k].id);
				break;
			}
			struct trace t;
			if ((rc = prof_load_trace(in, id, &t, NULL, &err)) != TW_OK)
				break;
			if (!have_kind) {
				kind = runs[k].kind;
				snprintf(backend, sizeof(backend), "%s", runs[k].backend);
				have_kind = true;
			} else if (runs[k].kind != kind) {
				kinds_differ = true;
			}
			dropped += runs[k].dropped;
			for (size_t e = 0; e < t.nev && rc == TW_OK; e++) {
				int32_t r = t.ev[e].rank;
				if (r < 0)
					continue;
				if ((size_t)r >= nowner) {
					size_t nn = (size_t)r + 1;
					owner = tw_realloc_array(owner, nn, sizeof(*owner));
					owner_run = tw_realloc_array(owner_run, nn, sizeof(*owner_run));
					for (size_t q = nowner; q < nn; q++)
						owner[q] = -1;
					nowner = nn;
				}
				if (owner[r] == -1) {
					owner[r] = i;
					owner_run[r] = runs[k].id;
				} else if (owner[r] != i) {
					rc = tw_errf(&err, TW_ERR_INVALID,
						     "%s: rank %d is also in %s; merge takes one file per rank",
						     o->pos[i], r, o->pos[owner[r]]);
				} else if (owner_run[r] != runs[k].id) {
					/* a per-rank database written twice (a rerun with one TWIN_DB) */
					rc = tw_errf(&err, TW_ERR_INVALID,
						     "%s: rank %d is in two of its runs (%" PRId64 " and %" PRId64
						     "); merge takes one run per rank",
						     o->pos[i], r, owner_run[r], runs[k].id);
				}
			}
			/* the runs' recorded peaks (a simulated or executed run's) */
			for (int64_t r = 0; rc == TW_OK && t.peak_mem && r < t.nranks; r++) {
				if ((size_t)r >= npeaks) {
					size_t nn = (size_t)r + 1;
					peaks = tw_realloc_array(peaks, nn, sizeof(*peaks));
					for (size_t q = npeaks; q < nn; q++)
						peaks[q] = -1;
					npeaks = nn;
				}
				if (t.peak_mem[r] > peaks[r])
					peaks[r] = t.peak_mem[r];
			}
			for (size_t e = 0; e < t.nev && rc == TW_OK; e++) {
				struct trace_event ev = t.ev[e];
				ev.name = trace_intern(&all, trace_name(&t, &t.ev[e]));
				trace_add(&all, &ev);
			}
			for (size_t m = 0; m < t.nmem && rc == TW_OK; m++)
				trace_add_mem(&all, &t.mem[m]);
			if (t.nranks > all.nranks)
				all.nranks = t.nranks;
			trace_release(&t);
		}
		free(runs);
		prof_db_close(in);
	}
	free(owner);
	free(owner_run);
	if (rc == TW_OK && npeaks > 0 && all.nranks > 0) {
		all.peak_mem = TW_NEW_ARRAY(int64_t, (size_t)all.nranks);
		for (int64_t r = 0; r < all.nranks; r++)
			all.peak_mem[r] = (size_t)r < npeaks && peaks[r] > 0 ? peaks[r] : 0;
	}
	free(peaks);
	size_t work = 0;
	for (size_t e = 0; e < all.nev; e++)
		work += all.ev[e].cat != TRACE_MARKER;
	if (rc == TW_OK && work == 0)
		rc = tw_errf(&err, TW_ERR_INVALID, "merge: the inputs hold no GPU activity%s",
			     all.nev ? " (only step markers)" : "");
	int64_t id = 0;
	if (rc == TW_OK) {
		trace_sort(&all);
		all.kind = kinds_differ ? TRACE_KIND_IMPORT : kind;
		struct prof_run_meta meta = {.kind = all.kind, .name = o->name, .backend = backend,
					     .nranks = all.nranks, .source = "twin profile merge"};
		struct prof_db *db;
		if ((rc = prof_db_open(o->db, &db, &err)) == TW_OK) {
			rc = prof_store_trace(db, &meta, &all, &id, &err);
			/* the inputs' dropped-record counts carry over */
			if (rc == TW_OK && dropped) {
				rc = prof_run_finish(db, id, dropped, &err);
			}
			if (rc == TW_OK)
				prof_db_close(db);
			else
				prof_db_discard(db);
		}
	}
	size_t nev = all.nev;
	int64_t nranks = all.nranks;
	trace_release(&all);
	if (rc != TW_OK)
		return cli_fail(&err);
	if (o->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddNumberToObject(j, "run", (double)id);
		cJSON_AddNumberToObject(j, "events", (double)nev);
		cJSON_AddNumberToObject(j, "nranks", (double)nranks);
		cli_print_json(j);
	} else {
		printf("run %" PRId64 ": %zu events of %" PRId64 " ranks merged from %d file%s into %s\n",
		       id, nev, nranks, o->npos, o->npos == 1 ? "" : "s", o->db);
	}
	return 0;
}

int cmd_profile(const struct cli_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	if (cli_wants_help(argc, argv)) {
		fputs(profile_help, stdout);
		return 0;
	}
	if (argc < 2)
		return cli_usage_error("profile", "give an action: import, analyze, export or merge "
					"(see twin profile --help)");
	const char *sub = argv[1];
	struct popts *o = TW_NEW(struct popts);
	int st = parse(sub, argc, argv, o);
	static const struct {
		const char *name;
		unsigned takes; /* the options it takes */
		int (*run)(struct popts *);
	} actions[] = {
		{"import", O_DB | O_NAME | O_FILES | O_JSON, do_import},
		{"analyze", O_DB | O_JSON | O_PER_RANK, do_analyze},
		{"analyse", O_DB | O_JSON | O_PER_RANK, do_analyze},
		{"export", O_DB | O_CHROME | O_RANK | O_JSON, do_export},
		{"merge", O_DB | O_NAME | O_JSON, do_merge},
	};
	if (st < 0) {
		size_t k = 0;
		while (k < sizeof(actions) / sizeof(actions[0]) && strcmp(sub, actions[k].name))
			k++;
		if (k == sizeof(actions) / sizeof(actions[0]))
			st = cli_usage_error("profile", "unknown action '%s' (import, analyze, export, merge)",
					     sub);
		else if ((st = check_options(sub, o, actions[k].takes)) < 0)
			st = actions[k].run(o);
	}
	free(o);
	return st;
}
