/* SPDX-License-Identifier: MIT */
/*
 * invariant.h — WEFT__ASSERT, the library's checked invariants.
 *
 * Compiled in only with -Dassertions=true (meson_options.txt: tests and CI,
 * which builds every configuration so; .ci/run), which defines
 * WEFT_ASSERTIONS.  Then a false condition writes one line,
 *
 *   weft: assertion failed: <cond> at <file>:<line>
 *
 * to stderr with write(2) alone (async-signal-safe: no stdio, no malloc, so
 * it works in any context, a signal handler or a worker holding a lock
 * included) and calls abort().  Otherwise WEFT__ASSERT(cond) does nothing
 * and does not evaluate cond: a release build's code is unchanged.  The
 * condition is still compiled (sizeof), so it cannot rot, and a variable
 * kept only for an assertion still counts as used.
 *
 * Not <assert.h>'s assert: that one follows NDEBUG, which a
 * debugoptimized build (the default) leaves undefined, and uses stdio.
 * Assert what the design relies on and a bug would break silently, never
 * what a caller can get wrong (that is an errno).
 *
 * A function called only inside assertions must be marked
 * __attribute__((unused)): in a release build only sizeof names it, and
 * clang reports it otherwise (-Wunneeded-internal-declaration).
 *
 * (Not named assert.h: lib/ is on the include path, and a system header's
 * `#include <assert.h>` would have found it instead of libc's.)
 *
 * A leaf: system headers only.
 */
#ifndef WEFT_INVARIANT_H
#define WEFT_INVARIANT_H

#ifdef WEFT_ASSERTIONS

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* Appends s to the line at *p, up to end. */
__attribute__((unused))
static void weft__assert_put(char **p, char *end, const char *s)
{
	while (*s && *p < end)
		*(*p)++ = *s++;
}

/* Out of line and cold (one copy per file that asserts): a check costs a
 * compare and a branch not taken.  The line is built on the stack and
 * written with one write(2), so lines of two failing threads do not
 * interleave (a very long one is cut short). */
__attribute__((noreturn, cold, noinline, unused))
static void weft__assert_fail(const char *cond, const char *file, unsigned line)
{
	char num[12];
	char *n = num + sizeof num;
	*--n = '\0';
	do
		*--n = (char)('0' + line % 10);
	while ((line /= 10) != 0);
	char buf[512];
	char *p = buf, *end = buf + sizeof buf - 1;
	weft__assert_put(&p, end, "weft: assertion failed: ");
	weft__assert_put(&p, end, cond);
	weft__assert_put(&p, end, " at ");
	weft__assert_put(&p, end, file);
	weft__assert_put(&p, end, ":");
	weft__assert_put(&p, end, n);
	*p++ = '\n';
	for (const char *s = buf; s < p;) {
		ssize_t w = write(STDERR_FILENO, s, (size_t)(p - s));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;	/* nothing more can be said */
		s += w;
	}
	abort();
}

#define WEFT__ASSERT(cond) \
	(__builtin_expect(!!(cond), 1) ? (void)0 : weft__assert_fail(#cond, __FILE__, __LINE__))

#else

#define WEFT__ASSERT(cond) ((void)sizeof(!(cond)))

#endif

#endif
