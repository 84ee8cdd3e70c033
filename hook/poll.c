/* SPDX-License-Identifier: MIT */
/*
 * poll.c — poll, ppoll and select (and glibc's fortified __poll_chk and
 * __ppoll_chk) in a coroutine: a real poll that does not wait first; when
 * nothing is ready and the timeout allows waiting, the coroutine parks
 * until one of the fds is ready or the timeout: on the fd itself when it
 * is the only one, the hooks track it and weft_wait can wait for all its
 * events (not POLLPRI, nor band data), else on a temporary
 * epoll instance holding them all, which leaves the fds' own flags and
 * weft's registrations alone.  Then the real poll again says what is
 * ready.  ppoll with a signal mask waits in the real ppoll on the offload
 * pool, the mask applied to the helper thread that waits.  Elsewhere (plain
 * threads, weft itself) the real calls run.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "hook.h"

static const short EPOLL_KINDS =
	POLLIN | POLLPRI | POLLOUT | POLLRDHUP | POLLRDNORM | POLLRDBAND | POLLWRNORM | POLLWRBAND;

/* The index of the only entry that asks for something, or -1. */
static long only_one(const struct pollfd *fds, nfds_t n)
{
	long only = -1;
	for (nfds_t i = 0; i < n; i++) {
		if (fds[i].fd < 0)
			continue;
		if (only >= 0)
			return -1;
		only = (long)i;
	}
	return only;
}

/* The poll events weft_wait waits for: normal data in and out, and the
 * hang-ups that come with a readable end.  Priority and band data
 * (POLLPRI, POLLRDBAND, POLLWRBAND) are not among them. */
static const short WEFT_KINDS = POLLIN | POLLRDNORM | POLLRDHUP | POLLOUT | POLLWRNORM;

/* weft_wait's events for a poll's, or 0 when it cannot wait for them all. */
static int weft_events(short events)
{
	if (events & EPOLL_KINDS & ~WEFT_KINDS)
		return 0;
	return (events & (POLLIN | POLLRDNORM | POLLRDHUP) ? WEFT_IN : 0) |
	       (events & (POLLOUT | POLLWRNORM) ? WEFT_OUT : 0);
}

/* Adds fds[i] to ep; a duplicate fd gets the union of its entries' events. */
static void add_one(int ep, const struct pollfd *fds, nfds_t i)
{
	struct epoll_event ev = { .events = (uint32_t)(fds[i].events & EPOLL_KINDS) };
	ev.data.fd = fds[i].fd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i].fd, &ev) == 0 || errno != EEXIST)
		return;	/* not pollable by epoll (a file): the real poll said so */
	for (nfds_t k = 0; k < i; k++)
		if (fds[k].fd == fds[i].fd)
			ev.events |= (uint32_t)(fds[k].events & EPOLL_KINDS);
	epoll_ctl(ep, EPOLL_CTL_MOD, fds[i].fd, &ev);
}

/* Parks on a temporary epoll instance holding every fd. */
static int park_all(struct pollfd *fds, nfds_t n, int64_t deadline)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -1;
	int saved = errno;
	for (nfds_t i = 0; i < n; i++)
		if (fds[i].fd >= 0)
			add_one(ep, fds, i);
	errno = saved;
	if (!weft__hook_enter()) {
		REAL(close)(ep);
		return -1;
	}
	int r = weft_wait(ep, WEFT_IN, deadline);
	int err = errno;
	weft_close(ep);
	weft__hook_leave();
	errno = err;
	return r < 0 && err != ETIMEDOUT ? -1 : 0;
}

/* Parks until something may be ready: 0 (poll again), or -1 with errno
 * (ECANCELED, ...). */
static int park(struct pollfd *fds, nfds_t n, int64_t deadline)
{
	long i = only_one(fds, n);
	int events = i >= 0 ? weft_events(fds[i].events) : 0;
	if (!events || !weft__hook_ofd(fds[i].fd))
		return park_all(fds, n, deadline);
	struct weft__hook_wait w;
	weft__hook_wait_init(&w, fds[i].fd, events, HOOK_CORO);
	w.timed = true;
	w.deadline = deadline;
	if (weft__hook_wait(&w) == 0 || errno == EAGAIN || errno == EBADF)
		return 0;	/* a closed fd: the real poll says POLLNVAL */
	return -1;
}

int weft__hook_poll(struct pollfd *fds, nfds_t n, int64_t deadline)
{
	for (;;) {
		int r = REAL(poll)(fds, n, 0);
		if (r != 0 || (deadline >= 0 && weft_now() >= deadline))
			return r;
		if (park(fds, n, deadline) != 0)
			return -1;
	}
}

HOOK_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (timeout == 0 || weft__hook_mode() != HOOK_CORO)
		return REAL(poll)(fds, n, timeout);
	return weft__hook_poll(fds, n, timeout < 0 ? -1 : weft__hook_after((int64_t)timeout * 1000000));
}

static bool valid_ts(const struct timespec *ts)
{
	return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}

/* A ppoll with a signal mask, for the offload pool. */
struct masked {
	struct pollfd *fds;
	nfds_t n;
	const struct timespec *ts;
	const sigset_t *mask;
	int r;
	int err;
};

static void masked_run(void *arg)
{
	struct masked *m = arg;
	m->r = REAL(ppoll)(m->fds, m->n, m->ts, m->mask);
	m->err = errno;
}

/* The mask must hold, atomically, for the thread that waits: a parked
 * coroutine has none, so the real ppoll runs on an offload helper (whose
 * mask blocks every signal but while this call waits), which is then the
 * thread the signals it unblocks can be delivered to.  Fds ready already
 * are answered on the worker, by a zero-timeout poll without the mask: the
 * kernel's ppoll reports ready fds before it looks at signals. */
static int masked_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			const sigset_t *mask)
{
	int r = REAL(poll)(fds, n, 0);
	if (r > 0)
		return r;
	struct masked m = { .fds = fds, .n = n, .ts = ts, .mask = mask };
	if (weft__hook_offload(masked_run, &m) != 0)
		return -1;
	errno = m.err;
	return m.r;
}

HOOK_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		      const sigset_t *sigmask)
{
	if ((ts && !valid_ts(ts)) || weft__hook_mode() != HOOK_CORO)
		return REAL(ppoll)(fds, n, ts, sigmask);
	if (sigmask)
		return masked_ppoll(fds, n, ts, sigmask);
	return weft__hook_poll(fds, n, ts ? weft__hook_after(weft__hook_ts_ns(ts)) : -1);
}

extern void __chk_fail(void) __attribute__((noreturn));

HOOK_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		__chk_fail();
	return poll(fds, n, timeout);
}

HOOK_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			    const sigset_t *sigmask, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		__chk_fail();
	return ppoll(fds, n, ts, sigmask);
}

/* -------------------------------------------------------------- select */

/* The kernel's select sets (fs/select.c): what makes an fd readable,
 * writable, exceptional. */
static const short IN_SET = POLLRDNORM | POLLRDBAND | POLLIN | POLLHUP | POLLERR;
static const short OUT_SET = POLLWRBAND | POLLWRNORM | POLLOUT | POLLERR;
static const short EX_SET = POLLPRI;

static bool in(fd_set *set, int fd)
{
	return set && FD_ISSET(fd, set);
}

/* The pollfds of select's sets: their count, in *out (malloc'd). */
static nfds_t to_pollfds(int nfds, fd_set *r, fd_set *w, fd_set *e, struct pollfd **out)
{
	nfds_t n = 0;
	*out = malloc((size_t)(nfds ? nfds : 1) * sizeof **out);
	for (int fd = 0; *out && fd < nfds; fd++) {
		short ev = (short)((in(r, fd) ? POLLIN : 0) | (in(w, fd) ? POLLOUT : 0) |
				   (in(e, fd) ? POLLPRI : 0));
		if (ev)
			(*out)[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	return n;
}

/* Writes poll's answer back into select's sets: the count, or -1/EBADF. */
static int from_pollfds(const struct pollfd *p, nfds_t n, fd_set *r, fd_set *w, fd_set *e)
{
	for (nfds_t i = 0; i < n; i++)
		if (p[i].revents & POLLNVAL) {
			errno = EBADF;
			return -1;
		}
	int count = 0;
	fd_set *sets[3] = { r, w, e };
	const short kinds[3] = { IN_SET, OUT_SET, EX_SET }, asked[3] = { POLLIN, POLLOUT, POLLPRI };
	for (int s = 0; s < 3; s++) {
		if (!sets[s])
			continue;
		FD_ZERO(sets[s]);
		for (nfds_t i = 0; i < n; i++) {
			if ((p[i].events & asked[s]) && (p[i].revents & kinds[s])) {
				FD_SET(p[i].fd, sets[s]);
				count++;
			}
		}
	}
	return count;
}

/* Linux's select leaves the time not slept in *tv. */
static void time_left(struct timeval *tv, int64_t deadline)
{
	int64_t left = deadline - weft_now();
	if (left < 0)
		left = 0;
	tv->tv_sec = left / 1000000000;
	tv->tv_usec = (left % 1000000000) / 1000;
}

HOOK_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	bool now = tv && tv->tv_sec == 0 && tv->tv_usec == 0;
	bool bad = nfds < 0 || nfds > FD_SETSIZE || (tv && (tv->tv_sec < 0 || tv->tv_usec < 0));
	if (now || bad || weft__hook_mode() != HOOK_CORO)
		return REAL(select)(nfds, r, w, e, tv);
	int64_t deadline = -1;
	if (tv) {
		struct timespec ts = { tv->tv_sec, tv->tv_usec * 1000 };
		deadline = weft__hook_after(weft__hook_ts_ns(&ts));
	}
	struct pollfd *p;
	nfds_t n = to_pollfds(nfds, r, w, e, &p);
	if (!p)
		return -1;
	int k = weft__hook_poll(p, n, deadline);
	if (k >= 0)
		k = from_pollfds(p, n, r, w, e);
	int saved = errno;
	free(p);
	errno = saved;
	if (tv)
		time_left(tv, deadline);
	return k;
}
