/* SPDX-License-Identifier: MIT */
/*
 * util.h — what every bench program needs: die() for a failed set-up step
 * (one line on stderr, "PROG: what: strerror(errno)", exit status 2, which
 * scripts/bench.py reports as a failed run) and now_ns(), the monotonic
 * clock.  PROG is BENCH_PROG, defined by the including file.
 */
#ifndef WEFT_BENCH_UTIL_H
#define WEFT_BENCH_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BENCH_PROG
#error "define BENCH_PROG, the program's name for its error lines, before util.h"
#endif

static inline _Noreturn void die(const char *what)
{
	fprintf(stderr, BENCH_PROG ": %s: %s\n", what, strerror(errno));
	exit(2);
}

static inline int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
