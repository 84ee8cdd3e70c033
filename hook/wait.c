/* SPDX-License-Identifier: MIT */
/*
 * wait.c — the wait of a blocking call on a hooked fd, for every call that
 * can block: a coroutine parks in weft_wait (its worker runs others); a
 * plain thread blocks in the real poll(2), since the hooks made the fd
 * non-blocking under it.  Either way the deadline is the socket's
 * SO_RCVTIMEO or SO_SNDTIMEO, counted from when the call first has to wait,
 * and its expiry is EAGAIN, as the kernel's.  And the wait of a call that
 * must block a thread (the resolver, ppoll with a signal mask): on the
 * offload pool.
 *
 * A coroutine does not ask the kernel for the timeout when it starts to
 * wait (a getsockopt per blocking call was one of the four system calls of
 * a hiredis request): it parks for at most PROBE_NS and asks only if that
 * expires.  No socket times out sooner: the kernel keeps SO_RCVTIMEO and
 * SO_SNDTIMEO in jiffies, rounded up to at least one, and a jiffy is at
 * least 1 ms.  Most waits end before, woken by readiness.  (A timeout set
 * during the first millisecond of a wait applies to it; the kernel's
 * blocking call reads it once, at its start.)
 */
#include <errno.h>
#include <limits.h>

#include "hook.h"

static const int64_t NS_PER_MS = 1000 * 1000;
static const int64_t PROBE_NS = 1000 * 1000;	/* the shortest socket timeout */

int64_t weft__hook_ts_ns(const struct timespec *ts)
{
	if (ts->tv_sec >= INT64_MAX / 1000000000 - 1)
		return INT64_MAX / 2;
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int64_t weft__hook_after(int64_t ns)
{
	int64_t now = weft_now();
	return ns > INT64_MAX / 2 - now ? INT64_MAX / 2 : now + ns;
}

/* w's deadline: SO_RCVTIMEO (WEFT_IN) or SO_SNDTIMEO (WEFT_OUT) from
 * w->since, or -1: none set, or not a socket. */
static void read_timeout(struct weft__hook_wait *w)
{
	struct timeval tv;
	socklen_t len = sizeof tv;
	int saved = errno;
	int r = getsockopt(w->fd, SOL_SOCKET, w->events == WEFT_IN ? SO_RCVTIMEO : SO_SNDTIMEO, &tv,
			   &len);
	errno = saved;
	w->timed = true;
	w->deadline = -1;
	if (r != 0 || (tv.tv_sec == 0 && tv.tv_usec == 0))
		return;
	struct timespec ts = { tv.tv_sec, tv.tv_usec * 1000 };
	int64_t ns = weft__hook_ts_ns(&ts);
	w->deadline = ns > INT64_MAX / 2 - w->since ? INT64_MAX / 2 : w->since + ns;
}

static bool expired(const struct weft__hook_wait *w)
{
	return w->deadline >= 0 && weft_now() >= w->deadline;
}

void weft__hook_wait_init(struct weft__hook_wait *w, int fd, int events, int mode)
{
	*w = (struct weft__hook_wait){ .fd = fd, .events = events, .mode = mode, .deadline = -1 };
	if (mode == HOOK_PLAIN)
		weft__hook_sigs_now(&w->sigs);
}

/* weft_wait until deadline, its ECANCELED as EBADF when the hooks closed
 * fd meanwhile (the generation moved), else as the coroutine's own
 * cancellation.  A wait after the call's EAGAIN (all but connect's) skips
 * weft_wait's poll(2): a spurious wake only makes the call try again, get
 * EAGAIN and wait again. */
static int park_until(struct weft__hook_wait *w, int64_t deadline)
{
	unsigned gen = weft__hook_fd_gen(w->fd);
	weft__hook_fd_registered(w->fd);
	if (!weft__hook_enter())
		return -1;
	int r = weft_wait(w->fd, w->exact ? w->events : w->events | WEFT_AFTER_EAGAIN, deadline);
	weft__hook_leave();
	if (r >= 0)
		return 0;
	if (errno == ECANCELED && weft__hook_fd_gen(w->fd) != gen)
		errno = EBADF;
	return -1;
}

/* A coroutine's wait: within PROBE_NS of its start without the timeout
 * (see above), then until the timeout, whose expiry is EAGAIN. */
static int park(struct weft__hook_wait *w)
{
	for (;;) {
		if (w->timed && expired(w)) {
			errno = EAGAIN;
			return -1;
		}
		if (park_until(w, w->timed ? w->deadline : w->since + PROBE_NS) == 0)
			return 0;
		if (errno != ETIMEDOUT)
			return -1;
		if (!w->timed)
			read_timeout(w);
	}
}

/* Milliseconds left until deadline, rounded up (never early); -1 none. */
static int poll_ms(int64_t deadline)
{
	if (deadline < 0)
		return -1;
	int64_t ms = (deadline - weft_now() + NS_PER_MS - 1) / NS_PER_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* A plain thread's wait: the real poll(2).  A signal handler that runs
 * during the call ends it with EINTR as it would have ended the blocking
 * call (signal(7)): unless every handler run meanwhile asked for
 * SA_RESTART, and always on a socket with a timeout.  During the call is
 * from its start (weft__hook_wait_init): a handler that ran in its first
 * attempt, or between its polls, ends it before the next poll, as one that
 * interrupts a poll does.  A handler the hooks did not install (signal.c)
 * is seen only by its poll's EINTR, and counts as one without SA_RESTART. */
static int block(struct weft__hook_wait *w)
{
	struct pollfd p = { .fd = w->fd, .events = w->events == WEFT_IN ? POLLIN : POLLOUT };
	for (;;) {
		if (w->deadline >= 0 && weft_now() >= w->deadline) {
			errno = EAGAIN;
			return -1;
		}
		if (weft__hook_handled_since(&w->sigs) &&
		    (w->deadline >= 0 || !weft__hook_restarts(&w->sigs))) {
			errno = EINTR;
			return -1;
		}
		int r = REAL(poll)(&p, 1, poll_ms(w->deadline));
		if (r > 0)
			return 0;	/* ready, or POLLNVAL: the retried call says EBADF */
		if (r < 0 && (errno != EINTR || !weft__hook_handled_since(&w->sigs)))
			return -1;
	}
}

int weft__hook_wait(struct weft__hook_wait *w)
{
	if (!w->since)
		w->since = weft_now();
	if (w->mode == HOOK_CORO)
		return park(w);
	if (!w->timed)
		read_timeout(w);
	if (expired(w)) {
		errno = EAGAIN;
		return -1;
	}
	return block(w);
}

int weft__hook_offload(void (*fn)(void *), void *arg)
{
	if (!weft__hook_enter())
		return -1;
	int r = weft_offload(fn, arg);
	weft__hook_leave();
	if (r == 0 || errno != EAGAIN)
		return r;
	fn(arg);
	return 0;
}
