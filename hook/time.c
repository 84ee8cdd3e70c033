/* SPDX-License-Identifier: MIT */
/*
 * time.c — sleep, usleep, nanosleep and clock_nanosleep in a coroutine:
 * weft_sleep parks the coroutine, its worker runs others.  Results as the
 * real calls'; a cancelled coroutine's sleep ends early as an interrupted
 * one would, with ECANCELED (nanosleep's rem says what was left, sleep
 * returns the seconds left).  clock_nanosleep takes CLOCK_MONOTONIC and
 * CLOCK_REALTIME, relative or TIMER_ABSTIME (an absolute realtime is
 * turned into a monotonic deadline when the call starts: a later jump of
 * the realtime clock does not move it); other clocks run the real call.
 */
#include <errno.h>

#include "hook.h"

static const int64_t NS = 1000000000;

/* Sleeps until deadline (absolute weft_now() ns): 0, or the errno with
 * which it stopped early (ECANCELED, ENOMEM). */
static int sleep_until(int64_t deadline)
{
	return weft_sleep(deadline) == 0 ? 0 : errno;
}

/* The time left until deadline, in *rem (when not NULL). */
static void remaining(struct timespec *rem, int64_t deadline)
{
	if (!rem)
		return;
	int64_t left = deadline - weft_now();
	if (left < 0)
		left = 0;
	rem->tv_sec = left / NS;
	rem->tv_nsec = left % NS;
}

static bool valid(const struct timespec *ts)
{
	return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < NS;
}

HOOK_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	if (weft__hook_mode() != HOOK_CORO || !req || !valid(req))
		return REAL(nanosleep)(req, rem);
	int64_t deadline = weft__hook_after(weft__hook_ts_ns(req));
	int e = sleep_until(deadline);
	if (!e)
		return 0;
	remaining(rem, deadline);
	errno = e;
	return -1;
}

HOOK_EXPORT unsigned sleep(unsigned seconds)
{
	if (weft__hook_mode() != HOOK_CORO)
		return REAL(sleep)(seconds);
	int64_t deadline = weft__hook_after((int64_t)seconds * NS);
	if (!sleep_until(deadline))
		return 0;
	int64_t left = deadline - weft_now();
	return left > 0 ? (unsigned)((left + NS - 1) / NS) : 0;
}

HOOK_EXPORT int usleep(useconds_t usec)
{
	if (weft__hook_mode() != HOOK_CORO)
		return REAL(usleep)(usec);
	int e = sleep_until(weft__hook_after((int64_t)usec * 1000));
	if (!e)
		return 0;
	errno = e;
	return -1;
}

/* clock_nanosleep's deadline on weft's clock. */
static int64_t clock_deadline(clockid_t clock, int flags, const struct timespec *req)
{
	int64_t ns = weft__hook_ts_ns(req);
	if (!(flags & TIMER_ABSTIME))
		return weft__hook_after(ns);
	struct timespec now;
	clock_gettime(clock, &now);
	return weft__hook_after(ns - weft__hook_ts_ns(&now));
}

HOOK_EXPORT int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
				struct timespec *rem)
{
	bool ours = clock == CLOCK_MONOTONIC || clock == CLOCK_REALTIME;
	if (!ours || weft__hook_mode() != HOOK_CORO || !req || !valid(req))
		return REAL(clock_nanosleep)(clock, flags, req, rem);
	int64_t deadline = clock_deadline(clock, flags, req);
	int saved = errno;
	int e = sleep_until(deadline);
	errno = saved;	/* clock_nanosleep returns its error, errno untouched */
	if (e && !(flags & TIMER_ABSTIME))
		remaining(rem, deadline);
	return e;
}
