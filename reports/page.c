/* A report page: content blocks rendered as index.md and index.html, data files, gnuplot
 * scripts and the charts gnuplot draws from them. Everything is written into a temporary
 * directory next to the target and renamed into place at the end, so a failure leaves
 * nothing half-written. */
/* nftw is XSI */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reports.h"

enum block_kind { B_HEADING, B_PARA, B_TABLE_HEAD, B_TABLE_ROW, B_CHART };

struct block {
	enum block_kind kind;
	char *text;      /* heading, paragraph, '|'-separated cells, chart caption */
	char *name;      /* chart: file stem */
	char *data;      /* chart: its data file */
	bool rendered;   /* chart */
	char ext[8];     /* chart: "png" or "svg" once rendered */
};

struct rpt_page {
	char *dir, *tmp, *title;
	bool force;
	struct block *b;
	size_t nb, cap;
	bool gnuplot;
	int charts, rendered;
};

static char *vfmt(const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	char *s = tw_malloc((size_t)(n < 0 ? 0 : n) + 1);
	vsnprintf(s, (size_t)(n < 0 ? 0 : n) + 1, fmt, ap);
	return s;
}

static struct block *add(struct rpt_page *pg, enum block_kind k, char *text)
{
	TW_GROW(pg->b, pg->cap, pg->nb + 1);
	struct block *b = &pg->b[pg->nb++];
	memset(b, 0, sizeof(*b));
	b->kind = k;
	b->text = text;
	return b;
}

void rpt_heading(struct rpt_page *pg, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(pg, B_HEADING, vfmt(fmt, ap));
	va_end(ap);
}

void rpt_para(struct rpt_page *pg, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(pg, B_PARA, vfmt(fmt, ap));
	va_end(ap);
}

void rpt_table_begin(struct rpt_page *pg, const char *header)
{
	add(pg, B_TABLE_HEAD, tw_strdup(header));
}

void rpt_table_row(struct rpt_page *pg, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(pg, B_TABLE_ROW, vfmt(fmt, ap));
	va_end(ap);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* gnuplot on PATH: the first executable PATH entry holding it. */
static bool have_gnuplot(void)
{
	const char *path = getenv("PATH");
	if (!path)
		return false;
	char *copy = tw_strdup(path), *save = NULL;
	bool found = false;
	for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char f[4096];
		snprintf(f, sizeof(f), "%s/gnuplot", *d ? d : ".");
		found = access(f, X_OK) == 0;
	}
	free(copy);
	return found;
}

enum tw_result rpt_page_begin(const char *dir, bool force, const char *title,
			      struct rpt_page **out, struct tw_err *err)
{
	*out = NULL;
	struct stat st;
	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return tw_errf(err, TW_ERR_INVALID, "-o %s: exists and is not a directory", dir);
		DIR *d = opendir(dir);
		if (!d)
			return tw_errf(err, TW_ERR_SYSTEM, "-o %s: %s", dir, strerror(errno));
		bool empty = true;
		for (struct dirent *e; (e = readdir(d));)
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				empty = false;
		closedir(d);
		if (!empty && !force)
			return tw_errf(err, TW_ERR_INVALID,
				       "-o %s: directory exists and is not empty (use --force to replace it)",
				       dir);
	} else if (errno != ENOENT) {
		return tw_errf(err, TW_ERR_SYSTEM, "-o %s: %s", dir, strerror(errno));
	}
	/* the temporary directory sits beside dir, so the final rename stays on one file system */
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	char *tmp = tw_malloc(n + 16);
	snprintf(tmp, n + 16, "%.*s.tmp-XXXXXX", (int)n, dir);
	if (!mkdtemp(tmp)) {
		enum tw_result rc = tw_errf(err, TW_ERR_SYSTEM, "-o %s: cannot create a directory beside it: %s",
					    dir, strerror(errno));
		free(tmp);
		return rc;
	}
	chmod(tmp, 0755);
	struct rpt_page *pg = TW_NEW(struct rpt_page);
	pg->dir = tw_malloc(n + 1);
	memcpy(pg->dir, dir, n);
	pg->dir[n] = '\0';
	pg->tmp = tmp;
	pg->title = tw_strdup(title);
	pg->force = force;
	pg->gnuplot = have_gnuplot();
	*out = pg;
	return TW_OK;
}

FILE *rpt_data_open(struct rpt_page *pg, const char *name, struct tw_err *err)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", pg->tmp, name);
	FILE *f = fopen(path, "w");
	if (!f)
		tw_errf(err, TW_ERR_SYSTEM, "%s: %s", path, strerror(errno));
	return f;
}

static enum tw_result close_checked(FILE *f, const char *what, struct tw_err *err)
{
	bool bad = ferror(f) != 0;
	if (fclose(f) != 0 || bad)
		return tw_errf(err, TW_ERR_SYSTEM, "writing %s failed", what);
	return TW_OK;
}

enum tw_result rpt_chart(struct rpt_page *pg, const char *name, const char *data,
			 const char *caption, const char *gp_body, struct tw_err *err)
{
	char file[256];
	snprintf(file, sizeof(file), "%s.gp", name);
	FILE *f = rpt_data_open(pg, file, err);
	if (!f)
		return TW_ERR_SYSTEM;
	/* The script chooses its own terminal, so it renders with whatever gnuplot a reader has:
	 * pngcairo (antialiased), else the libgd png terminal, else SVG. */
	fprintf(f, "# %s\n# render: gnuplot %s (in this directory)\n", caption, file);
	fprintf(f, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		   "    set terminal pngcairo size 1000,600 noenhanced font 'Sans,11'\n"
		   "    set output '%s.png'\n"
		   "} else {\n"
		   "    if (strstrt(' '.GPVAL_TERMINALS.' ', ' png ') > 0) {\n"
		   "        set terminal png size 1000,600 noenhanced\n"
		   "        set output '%s.png'\n"
		   "    } else {\n"
		   "        set terminal svg size 1000,600 noenhanced\n"
		   "        set output '%s.svg'\n"
		   "    }\n"
		   "}\n"
		   "set encoding utf8\n"
		   "set grid ytics lc rgb '#dddddd'\n"
		   "set key outside right top\n",
		name, name, name);
	fputs(gp_body, f);
	fputs("\nset output\n", f);
	TW_CHECK(close_checked(f, file, err));
	struct block *b = add(pg, B_CHART, tw_strdup(caption));
	b->name = tw_strdup(name);
	b->data = tw_strdup(data);
	pg->charts++;
	return TW_OK;
}

/* Run gnuplot on one script inside the report directory; its messages go to gnuplot.log. */
static bool render(struct rpt_page *pg, struct block *b)
{
	char log[4096], script[512];
	snprintf(log, sizeof(log), "%s/gnuplot.log", pg->tmp);
	snprintf(script, sizeof(script), "%s.gp", b->name);
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int nul = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (nul >= 0)
			dup2(nul, 0);
		if (chdir(pg->tmp) != 0)
			_exit(127);
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(127);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return false;
	static const char *const exts[] = { "png", "svg" };
	for (int i = 0; i < 2; i++) {
		char out[4096];
		struct stat st;
		snprintf(out, sizeof(out), "%s/%s.%s", pg->tmp, b->name, exts[i]);
		if (stat(out, &st) == 0 && st.st_size > 0) {
			snprintf(b->ext, sizeof(b->ext), "%s", exts[i]);
			return true;
		}
	}
	return false;
}

/* a '|' inside a cell's text (rpt_cell) is written back as '|' */
#define CELL_BAR '\x1f'

const char *rpt_cell(char *buf, size_t n, const char *s)
{
	size_t k = 0;
	for (; s && *s && k + 1 < n; s++)
		buf[k++] = *s == '|' ? CELL_BAR : *s;
	if (n > 0)
		buf[k] = '\0';
	return buf;
}

static void md_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		char c = *s == CELL_BAR ? '|' : *s;
		if (c == '|' || c == '*' || c == '_' || c == '<' || c == '`')
			fputc('\\', f);
		fputc(c, f);
	}
}

static void html_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case CELL_BAR: fputc('|', f); break;
		default: fputc(*s, f);
		}
	}
}

/* cells of a '|'-separated row, in order */
static void each_cell(const char *row, FILE *f, bool html, bool head)
{
	const char *p = row;
	for (;;) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		char *cell = tw_malloc(len + 1);
		memcpy(cell, p, len);
		cell[len] = '\0';
		if (html) {
			fputs(head ? "<th>" : "<td>", f);
			html_escape(f, cell);
			fputs(head ? "</th>" : "</td>", f);
		} else {
			fputs("| ", f);
			md_escape(f, cell);
			fputc(' ', f);
		}
		free(cell);
		if (!bar)
			break;
		p = bar + 1;
	}
	if (!html)
		fputs("|\n", f);
}

static size_t ncells(const char *row)
{
	size_t n = 1;
	for (; *row; row++)
		n += *row == '|';
	return n;
}

static void render_hint(FILE *f, const struct block *b, bool html)
{
	if (html) {
		fprintf(f, "<p><em>Chart not rendered: run <code>gnuplot %s.gp</code> in this directory "
			   "(it writes <code>%s.png</code>, or <code>.svg</code>).</em></p>\n",
			b->name, b->name);
	} else {
		fprintf(f, "*Chart not rendered: run `gnuplot %s.gp` in this directory (it writes "
			   "`%s.png`, or `.svg`).*\n\n", b->name, b->name);
	}
}

static enum tw_result write_md(struct rpt_page *pg, struct tw_err *err)
{
	FILE *f = rpt_data_open(pg, "index.md", err);
	if (!f)
		return TW_ERR_SYSTEM;
	fputs("# ", f);
	md_escape(f, pg->title);
	fputs("\n\n", f);
	for (size_t i = 0; i < pg->nb; i++) {
		struct block *b = &pg->b[i];
		switch (b->kind) {
		case B_HEADING:
			fputs("## ", f);
			md_escape(f, b->text);
			fputs("\n\n", f);
			break;
		case B_PARA:
			md_escape(f, b->text);
			fputs("\n\n", f);
			break;
		case B_TABLE_HEAD:
			each_cell(b->text, f, false, true);
			for (size_t c = ncells(b->text); c > 0; c--)
				fputs("|---", f);
			fputs("|\n", f);
			break;
		case B_TABLE_ROW:
			each_cell(b->text, f, false, false);
			if (i + 1 >= pg->nb || pg->b[i + 1].kind != B_TABLE_ROW)
				fputc('\n', f);
			break;
		case B_CHART:
			if (b->rendered) {
				fputs("![", f);
				md_escape(f, b->text);
				fprintf(f, "](%s.%s)\n\n", b->name, b->ext);
			} else {
				fputs("**", f);
				md_escape(f, b->text);
				fputs("**\n\n", f);
				render_hint(f, b, false);
			}
			fputc('*', f);
			md_escape(f, b->text);
			fprintf(f, "* — data and script: `%s`, `%s.gp`\n\n", b->data, b->name);
			break;
		}
	}
	if (pg->charts > pg->rendered && !pg->gnuplot)
		fputs("gnuplot was not found on PATH when this report was written, so the charts are "
		      "not drawn. Install it (Debian: `apt-get install gnuplot-nox`) and run "
		      "`for f in *.gp; do gnuplot \"$f\"; done` in this directory.\n",
		      f);
	return close_checked(f, "index.md", err);
}

static enum tw_result write_html(struct rpt_page *pg, struct tw_err *err)
{
	FILE *f = rpt_data_open(pg, "index.html", err);
	if (!f)
		return TW_ERR_SYSTEM;
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
	html_escape(f, pg->title);
	fputs("</title>\n<style>\n"
	      "body { font-family: sans-serif; max-width: 70em; margin: 2em auto; color: #222; }\n"
	      "table { border-collapse: collapse; margin: 1em 0; }\n"
	      "th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }\n"
	      "th:first-child, td:first-child { text-align: left; }\n"
	      "th { background: #f0f0f0; }\n"
	      "figure { margin: 1em 0; } img { max-width: 100%; }\n"
	      "figcaption { color: #555; font-size: 0.9em; }\n"
	      "</style>\n</head>\n<body>\n<h1>",
	      f);
	html_escape(f, pg->title);
	fputs("</h1>\n", f);
	for (size_t i = 0; i < pg->nb; i++) {
		struct block *b = &pg->b[i];
		switch (b->kind) {
		case B_HEADING:
			fputs("<h2>", f);
			html_escape(f, b->text);
			fputs("</h2>\n", f);
			break;
		case B_PARA:
			fputs("<p>", f);
			html_escape(f, b->text);
			fputs("</p>\n", f);
			break;
		case B_TABLE_HEAD:
			fputs("<table>\n<tr>", f);
			each_cell(b->text, f, true, true);
			fputs("</tr>\n", f);
			if (i + 1 >= pg->nb || pg->b[i + 1].kind != B_TABLE_ROW)
				fputs("</table>\n", f);
			break;
		case B_TABLE_ROW:
			fputs("<tr>", f);
			each_cell(b->text, f, true, false);
			fputs("</tr>\n", f);
			if (i + 1 >= pg->nb || pg->b[i + 1].kind != B_TABLE_ROW)
				fputs("</table>\n", f);
			break;
		case B_CHART:
			fputs("<figure>\n", f);
			if (b->rendered) {
				fprintf(f, "<img src=\"%s.%s\" alt=\"", b->name, b->ext);
				html_escape(f, b->text);
				fputs("\">\n", f);
			} else {
				render_hint(f, b, true);
			}
			fputs("<figcaption>", f);
			html_escape(f, b->text);
			fprintf(f, " — data and script: <a href=\"%s\">%s</a>, "
				   "<a href=\"%s.gp\">%s.gp</a></figcaption>\n</figure>\n",
				b->data, b->data, b->name, b->name);
			break;
		}
	}
	if (pg->charts > pg->rendered && !pg->gnuplot)
		fputs("<p>gnuplot was not found on PATH when this report was written, so the charts are "
		      "not drawn. Install it (Debian: <code>apt-get install gnuplot-nox</code>) and run "
		      "<code>for f in *.gp; do gnuplot \"$f\"; done</code> in this directory.</p>\n",
		      f);
	fputs("</body>\n</html>\n", f);
	return close_checked(f, "index.html", err);
}

enum tw_result rpt_page_commit(struct rpt_page *pg, struct tw_err *err)
{
	enum tw_result rc = TW_OK;
	if (pg->gnuplot) {
		for (size_t i = 0; i < pg->nb; i++)
			if (pg->b[i].kind == B_CHART && (pg->b[i].rendered = render(pg, &pg->b[i])))
				pg->rendered++;
		if (pg->rendered < pg->charts)
			tw_log(TW_LOG_WARN, "report: gnuplot drew %d of %d charts (see %s/gnuplot.log)",
			       pg->rendered, pg->charts, pg->dir);
		else {
			char log[4096];
			snprintf(log, sizeof(log), "%s/gnuplot.log", pg->tmp);
			struct stat st;
			if (stat(log, &st) == 0 && st.st_size == 0)
				remove(log);
		}
	}
	TW_CHECK_GOTO(write_md(pg, err), rc, fail);
	TW_CHECK_GOTO(write_html(pg, err), rc, fail);
	/* rename(2) replaces an empty directory; a non-empty one (--force) is moved aside first
	 * and removed once the new one is in place */
	if (rename(pg->tmp, pg->dir) != 0) {
		if ((errno != ENOTEMPTY && errno != EEXIST) || !pg->force) {
			rc = tw_errf(err, TW_ERR_SYSTEM, "-o %s: %s", pg->dir, strerror(errno));
			goto fail;
		}
		size_t n = strlen(pg->dir) + 16;
		char *old = tw_malloc(n);
		snprintf(old, n, "%s.old-XXXXXX", pg->dir);
		if (!mkdtemp(old) || rename(pg->dir, old) != 0) {
			rc = tw_errf(err, TW_ERR_SYSTEM, "-o %s: cannot move the old report aside: %s",
				     pg->dir, strerror(errno));
			rmdir(old);
			free(old);
			goto fail;
		}
		if (rename(pg->tmp, pg->dir) != 0) {
			rc = tw_errf(err, TW_ERR_SYSTEM, "-o %s: %s", pg->dir, strerror(errno));
			rename(old, pg->dir); /* put the old report back */
			free(old);
			goto fail;
		}
		rm_tree(old);
		free(old);
	}
	free(pg->tmp);
	pg->tmp = NULL;
	return TW_OK;
fail:
	rm_tree(pg->tmp);
	free(pg->tmp);
	pg->tmp = NULL;
	return rc;
}

void rpt_page_result(const struct rpt_page *pg, struct rpt_result *out)
{
	out->charts = pg->charts;
	out->rendered = pg->rendered;
	out->gnuplot = pg->gnuplot;
}

void rpt_page_free(struct rpt_page *pg)
{
	if (!pg)
		return;
	for (size_t i = 0; i < pg->nb; i++) {
		free(pg->b[i].text);
		free(pg->b[i].name);
		free(pg->b[i].data);
	}
	free(pg->b);
	free(pg->dir);
	free(pg->tmp);
	free(pg->title);
	free(pg);
}

void rpt_page_abort(struct rpt_page *pg)
{
	if (!pg)
		return;
	if (pg->tmp)
		rm_tree(pg->tmp);
	rpt_page_free(pg);
}
