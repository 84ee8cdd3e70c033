/* SPDX-License-Identifier: MIT */
/*
 * clock.h — the library's one clock and the two questions asked of it.
 *
 * weft_now (weft.h, defined in clock.c) is CLOCK_MONOTONIC in nanoseconds;
 * every deadline in weft is absolute on it, -1 meaning none.  Whether a
 * deadline has passed, and how many milliseconds an epoll_wait may sleep
 * until one, were spelled out at each caller; they are here once, inline
 * (both sit on wait paths).
 *
 * A leaf: libc headers and the public weft.h only, so the wait paths
 * (park, io, chan) and the loops (loop, monitor) need nothing else for time.
 */
#ifndef WEFT_CLOCK_H
#define WEFT_CLOCK_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "weft.h"

#define WEFT__CLOCK_NS_PER_MS INT64_C(1000000)

/* True when deadline is set (>= 0) and weft_now() has reached it: a wait
 * for it must not block. */
static inline bool weft__clock_deadline_passed(int64_t deadline)
{
	return deadline >= 0 && deadline <= weft_now();
}

/* An epoll_wait timeout for a sleep of ns nanoseconds: whole milliseconds
 * rounded up, so that the sleep never ends early; 0 when ns <= 0, INT_MAX
 * at most. */
static inline int weft__clock_timeout_ms(int64_t ns)
{
	if (ns <= 0)
		return 0;
	int64_t ms = (ns + WEFT__CLOCK_NS_PER_MS - 1) / WEFT__CLOCK_NS_PER_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

#endif
