/* A tiny test harness: each tests/unit/test_*.c is one program whose main() calls TEST_RUN
 * for each test function; checks print "ok - name" / "not ok - name: file:line: expr" and
 * test_done() returns the exit status. No global mutable state besides the counters here,
 * which live in main's frame via struct test_ctx. */
#ifndef TW_TEST_H
#define TW_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

struct test_ctx {
	int failed_checks; /* in the current test */
	int passed, failed;
	const char *name;
};

#define CHECK(T, cond)                                                                             \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("#   %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);        \
			(T)->failed_checks++;                                                      \
		}                                                                                  \
	} while (0)
#define CHECK_EQ_INT(T, a, b)                                                                      \
	do {                                                                                       \
		long long a_ = (long long)(a), b_ = (long long)(b);                                \
		if (a_ != b_) {                                                                    \
			printf("#   %s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, \
			       #a, a_, #b, b_);                                                    \
			(T)->failed_checks++;                                                      \
		}                                                                                  \
	} while (0)
/* relative tolerance */
#define CHECK_NEAR(T, a, b, rel)                                                                   \
	do {                                                                                       \
		double a_ = (double)(a), b_ = (double)(b);                                         \
		if (!(fabs(a_ - b_) <= (rel) * fabs(b_) + 1e-300)) {                               \
			printf("#   %s:%d: %s = %.9g, expected %.9g (rel tol %g)\n", __FILE__,     \
			       __LINE__, #a, a_, b_, (double)(rel));                               \
			(T)->failed_checks++;                                                      \
		}                                                                                  \
	} while (0)
#define CHECK_STR_CONTAINS(T, hay, needle)                                                         \
	do {                                                                                       \
		const char *h_ = (hay), *n_ = (needle);                                            \
		if (!h_ || !strstr(h_, n_)) {                                                      \
			printf("#   %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,  \
			       h_ ? h_ : "(null)", n_);                                            \
			(T)->failed_checks++;                                                      \
		}                                                                                  \
	} while (0)

#define CHECK_STR(T, got, want)                                                                    \
	do {                                                                                       \
		const char *g_ = (got), *w_ = (want);                                              \
		if (!g_ || strcmp(g_, w_) != 0) {                                                  \
			printf("#   %s:%d: \"%s\", expected \"%s\"\n", __FILE__, __LINE__,        \
			       g_ ? g_ : "(null)", w_);                                            \
			(T)->failed_checks++;                                                      \
		}                                                                                  \
	} while (0)

#define TEST_RUN(T, fn)                                                                            \
	do {                                                                                       \
		(T)->failed_checks = 0;                                                            \
		(T)->name = #fn;                                                                   \
		fn(T);                                                                             \
		if ((T)->failed_checks) {                                                          \
			printf("not ok - %s\n", #fn);                                              \
			(T)->failed++;                                                             \
		} else {                                                                           \
			printf("ok - %s\n", #fn);                                                  \
			(T)->passed++;                                                             \
		}                                                                                  \
		fflush(stdout);                                                                    \
	} while (0)

static inline int test_done(struct test_ctx *t)
{
	printf("# %d passed, %d failed\n", t->passed, t->failed);
	return t->failed ? 1 : 0;
}

#endif
