/* SPDX-License-Identifier: MIT */
/*
 * dial.c — weft_dial and weft_listen: resolving names, dialing TCP with
 * Happy Eyeballs, and listening.
 *
 * Resolving.  getaddrinfo is tried first with AI_NUMERICHOST and
 * AI_NUMERICSERV, which never blocks: numeric addresses and ports (and a
 * NULL host) are resolved inline, on the caller's thread.  Only what that
 * refuses with EAI_NONAME (a name) is looked up for real: from a plain
 * thread by a direct getaddrinfo; from a coroutine on the offload pool,
 * through a small detached resolver coroutine that calls weft_offload and
 * then a wait group, so that the caller can stop waiting at its deadline or
 * on weft_cancel (weft_offload itself waits for its function whatever
 * happens).  The lookup's record (the copies of host and service, the
 * result, the wait group) is shared by two references, the caller's and the
 * resolver's; whoever drops the last frees it, so a caller that gave up
 * leaves the resolver to free a result nobody reads.  Names under the
 * reserved .invalid top-level domain (RFC 6761, section 6.4) fail at once,
 * without a lookup.  getaddrinfo's errors become errno values in
 * gai_errno (the mapping is documented in weft.h).
 *
 * Happy Eyeballs (RFC 8305), as a state machine run by the dialing
 * coroutine alone, with no helper coroutine to join or cancel:
 *
 *   - the addresses are put in attempt order: the family of getaddrinfo's
 *     first address (its RFC 6724 preference) first, then alternating
 *     families, each family's addresses in getaddrinfo's order (RFC 8305
 *     section 4, First Address Family Count 1);
 *   - an attempt is a non-blocking socket and connect(2) (EINPROGRESS),
 *     added to a private epoll set; an attempt that fails at once (no such
 *     family, no route) is over at once;
 *   - the state is: the next address to try, the attempts pending (their
 *     sockets in the epoll set, by index), the time the next attempt is due
 *     (ATTEMPT_DELAY after the last one started) and the last error;
 *   - each turn of the loop starts the next attempt when none is pending
 *     or when it is due, then waits with weft_wait on the epoll set (one fd
 *     that is readable when any attempt finished) until the next attempt is
 *     due or the deadline, then harvests the set without waiting: an
 *     attempt whose SO_ERROR is 0 connected and wins, a failed one is
 *     closed and its errno kept;
 *   - it ends when one wins (every other pending socket is closed), when
 *     every address has been tried and every attempt failed (the errno of
 *     the one that failed last), at the deadline (ETIMEDOUT) or on
 *     cancellation (ECANCELED).  Whatever way it ends, every socket but the
 *     winner's is closed before weft_dial returns, and the epoll set with
 *     weft_close (weft_wait registered it).
 *
 * A deadline already past still resolves numeric addresses and starts the
 * first attempt; weft_wait then checks the set once without waiting, so a
 * connection that completes at once (or an attempt that fails at once,
 * and the next after it) is still seen; then ETIMEDOUT.
 *
 * The winner is returned as socket(2) made it: non-blocking, close-on-exec,
 * never yet seen by weft's loops (the first weft call on it registers it).
 * Listeners are bound with SO_REUSEADDR (and SO_REUSEPORT on request); the
 * wildcard host is IPv6's any address with IPV6_V6ONLY off (dual-stack),
 * IPv4's where the system has no IPv6.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "atomic.h"
#include "clock.h"
#include "coro.h"
#include "errors.h"
#include "fault.h"
#include "io.h"
#include "weft.h"

/* RFC 8305's Connection Attempt Delay (its recommended value). */
static const int64_t ATTEMPT_DELAY_NS = 250 * WEFT__CLOCK_NS_PER_MS;

/* ------------------------------------------------------ resolving */

/* getaddrinfo's error gai as an errno value (weft.h documents the mapping);
 * sys is errno as getaddrinfo left it, for EAI_SYSTEM. */
static int gai_errno(int gai, int sys)
{
	switch (gai) {
	case EAI_NONAME:
	case EAI_SERVICE:
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
	case EAI_ADDRFAMILY:
#endif
		return ENOENT;
	case EAI_AGAIN:
		return EAGAIN;
	case EAI_MEMORY:
		return ENOMEM;
	case EAI_BADFLAGS:
	case EAI_FAMILY:
	case EAI_SOCKTYPE:
		return EINVAL;
	case EAI_SYSTEM:
		return sys ? sys : EIO;
	default:	/* EAI_FAIL and anything new */
		return EIO;
	}
}

/* getaddrinfo, as an errno value (0 on success). */
static int gai(const char *host, const char *service, const struct addrinfo *hints,
	       struct addrinfo **res)
{
	int r = getaddrinfo(host, service, hints, res);
	return r ? gai_errno(r, weft__err_get()) : 0;
}

/* True for "invalid" and names under it, with or without the final dot. */
static bool reserved_invalid(const char *host)
{
	static const char tld[] = "invalid";
	size_t n = strlen(host), t = sizeof tld - 1;
	if (n > 0 && host[n - 1] == '.')
		n--;
	if (n < t || strncasecmp(host + n - t, tld, t) != 0)
		return false;
	return n == t || host[n - t - 1] == '.';
}

/* A lookup on the offload pool, shared by its caller and its resolver
 * coroutine (the design comment above). */
struct lookup {
	unsigned refs;		/* atomic: 2, then 1, then freed */
	weft_wg *done;		/* 1 until the resolver has a result */
	struct addrinfo hints;
	struct addrinfo *res;	/* the result, until the caller takes it */
	int err;		/* 0, or the lookup's errno value */
	char *host;		/* copies (host NULL stays NULL) */
	char *service;
};

static void lookup_drop(struct lookup *l)
{
	if (at_fas_uint(&l->refs, 1) != 1)
		return;
	if (l->res)
		freeaddrinfo(l->res);
	weft_wg_free(l->done);
	free(l);
}

/* On a helper thread. */
static void lookup_call(void *arg)
{
	struct lookup *l = arg;
	l->err = gai(l->host, l->service, &l->hints, &l->res);
}

/* The resolver coroutine (detached). */
static void lookup_main(void *arg)
{
	struct lookup *l = arg;
	if (weft_offload(lookup_call, l) != 0)
		l->err = weft__err_get();	/* EAGAIN: no helper thread, no call */
	weft_wg_done(l->done);
	lookup_drop(l);
}

/* Looks host:service up on the offload pool, waiting until deadline: 0 and
 * the addresses in *res, or an errno value (ETIMEDOUT and ECANCELED leave
 * the lookup running; its resolver frees what it finds). */
static int lookup(const char *host, const char *service, const struct addrinfo *hints,
		  int64_t deadline, struct addrinfo **res)
{
	size_t hl = host ? strlen(host) + 1 : 0, sl = strlen(service) + 1;
	struct lookup *l = weft__fault() ? NULL : malloc(sizeof *l + hl + sl);
	weft_wg *done = l ? weft_wg_new() : NULL;
	if (!done || weft_wg_add(done, 1) != 0) {
		weft_wg_free(done);
		free(l);
		return ENOMEM;
	}
	char *copies = (char *)(l + 1);
	*l = (struct lookup){ .refs = 2, .done = done, .hints = *hints,
			      .host = host ? memcpy(copies, host, hl) : NULL,
			      .service = memcpy(copies + hl, service, sl) };
	weft_co *co = weft_spawn(lookup_main, l);
	if (!co) {
		int e = weft__err_get();
		weft_wg_free(done);
		free(l);
		return e;
	}
	weft_detach(co);
	int e = weft_wg_wait(done, deadline) == 0 ? l->err : weft__err_get();
	if (e == 0) {
		*res = l->res;
		l->res = NULL;
	}
	lookup_drop(l);
	return e;
}

/* The TCP addresses of host:service in *res (freeaddrinfo them): 0, or an
 * errno value.  ai_flags: AI_PASSIVE for a listener.  Numeric ones inline;
 * names as the design comment says. */
static int resolve(const char *host, const char *service, int ai_flags, int64_t deadline,
		   struct addrinfo **res)
{
	struct addrinfo hints = {
		.ai_flags = ai_flags | AI_NUMERICHOST | AI_NUMERICSERV,
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_protocol = IPPROTO_TCP,
	};
	int r = getaddrinfo(host, service, &hints, res);
	if (r != EAI_NONAME)
		return r ? gai_errno(r, weft__err_get()) : 0;
	if (host && reserved_invalid(host))
		return ENOENT;
	hints.ai_flags = ai_flags;
	if (!weft_self())
		return gai(host, service, &hints, res);
	if (weft__co_cancelled())
		return ECANCELED;
	if (weft__clock_deadline_passed(deadline))
		return ETIMEDOUT;
	return lookup(host, service, &hints, deadline, res);
}

/* ------------------------------------------------------ Happy Eyeballs */

/* The first address from ai on whose family is (same) or is not (!same)
 * family. */
static const struct addrinfo *next_of(const struct addrinfo *ai, int family, bool same)
{
	while (ai && (ai->ai_family == family) != same)
		ai = ai->ai_next;
	return ai;
}

/* res in attempt order, alternating families from the first one's, into
 * out (room for every address); returns how many. */
static size_t interleave(const struct addrinfo *res, const struct addrinfo **out)
{
	int family = res->ai_family;
	const struct addrinfo *p[2] = { res, next_of(res, family, false) };
	size_t n = 0;
	for (int turn = 0; p[0] || p[1]; turn ^= 1) {
		if (!p[turn])
			continue;
		out[n++] = p[turn];
		p[turn] = next_of(p[turn]->ai_next, family, turn == 0);
	}
	return n;
}

/* The state of one weft_dial's attempts. */
struct race {
	const struct addrinfo **order;	/* the addresses, in attempt order */
	int *fd;			/* fd[i]: attempt i's pending socket, or -1 */
	size_t n;			/* addresses */
	size_t next;			/* the next address to attempt */
	size_t pending;			/* attempts connecting */
	int64_t due;			/* when the next attempt starts anyway */
	int epfd;			/* the pending sockets, for EPOLLOUT */
	int err;			/* the errno of the last attempt that failed */
};

/* Starts the next attempt: its socket when it connected at once, else -1
 * (pending, or failed: r->err). */
static int start(struct race *r, int64_t now)
{
	size_t i = r->next++;
	const struct addrinfo *ai = r->order[i];
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);
	if (fd < 0) {
		r->err = weft__err_get();
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	int e = weft__err_get();
	/* EINTR: a non-blocking connect goes on in the background */
	if (e == EINPROGRESS || e == EINTR) {
		struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = i };
		if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) == 0) {
			r->fd[i] = fd;
			r->pending++;
			r->due = now + ATTEMPT_DELAY_NS;
			return -1;
		}
		e = weft__err_get();
	}
	close(fd);
	r->err = e;
	return -1;
}

/* Takes the attempts that finished out of the set, without waiting: the
 * first connected socket, else -1 (the failed ones closed, r->err set).
 * *finished: whether any did. */
static int harvest(struct race *r, bool *finished)
{
	struct epoll_event ev[8];
	int n;
	while ((n = epoll_wait(r->epfd, ev, 8, 0)) > 0) {
		for (int k = 0; k < n; k++) {
			size_t i = (size_t)ev[k].data.u64;
			int fd = r->fd[i], e = 0;
			socklen_t len = sizeof e;
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
				e = weft__err_get();
			r->fd[i] = -1;
			r->pending--;
			*finished = true;
			if (e == 0)
				return fd;
			close(fd);	/* which takes it out of the set */
			r->err = e;
		}
	}
	return -1;
}

/* Runs the attempts until one connects (its socket), or -1 with the errno
 * value in r->err.  Closes nothing but failed attempts: see dial. */
static int race(struct race *r, int64_t deadline)
{
	for (;;) {
		int64_t now = weft_now();
		while (r->next < r->n && (r->pending == 0 || now >= r->due)) {
			int fd = start(r, now);
			if (fd >= 0)
				return fd;
		}
		if (r->pending == 0)
			return -1;	/* every address tried, every attempt failed */
		int64_t until = deadline;
		if (r->next < r->n && (until < 0 || r->due < until))
			until = r->due;
		if (weft_wait(r->epfd, WEFT_IN, until) < 0) {
			r->err = weft__err_get();
			if (r->err != ETIMEDOUT)
				return -1;	/* ECANCELED, ENOMEM */
			if (until == deadline || weft__clock_deadline_passed(deadline))
				return -1;
			continue;		/* the next attempt is due */
		}
		bool finished = false;
		int fd = harvest(r, &finished);
		if (fd >= 0)
			return fd;
		if (!finished && weft__clock_deadline_passed(deadline)) {
			r->err = ETIMEDOUT;
			return -1;
		}
	}
}

/* Happy Eyeballs over res: the connected socket, or -1 with the errno value
 * in *err; every other socket closed. */
static int dial(const struct addrinfo *res, int64_t deadline, int *err)
{
	size_t n = 0;
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
		n++;
	struct race r = { .err = ENOMEM, .epfd = -1 };
	r.order = weft__fault() ? NULL : malloc(n * (sizeof *r.order + sizeof *r.fd));
	if (!r.order || (r.epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		*err = r.order ? weft__err_get() : ENOMEM;
		free(r.order);
		return -1;
	}
	r.fd = (int *)(r.order + n);
	r.n = interleave(res, r.order);
	for (size_t i = 0; i < n; i++)
		r.fd[i] = -1;
	int fd = race(&r, deadline);
	if (fd >= 0)
		weft__io_nodelay(fd);
	for (size_t i = 0; i < n; i++)
		if (r.fd[i] >= 0)
			close(r.fd[i]);	/* the losers, and every attempt on failure */
	weft_close(r.epfd);
	free(r.order);
	*err = r.err;
	return fd;
}

int weft_dial(const char *host, const char *service, int64_t deadline)
{
	if (!weft_self())
		return weft__err_fail(EPERM);
	if (weft__co_wait_entry(host && service) != 0)
		return -1;
	struct addrinfo *res;
	int e = resolve(host, service, 0, deadline, &res);
	if (e)
		return weft__err_fail(e);
	int fd = dial(res, deadline, &e);
	freeaddrinfo(res);
	return fd >= 0 ? fd : weft__err_fail(e);
}

/* ------------------------------------------------------ listening */

static bool is_any6(const struct addrinfo *ai)
{
	const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)(const void *)ai->ai_addr;
	return ai->ai_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr);
}

/* A listener on ai: its fd, or -1 with the errno value in *err. */
static int bind_listen(const struct addrinfo *ai, int backlog, int flags, int *err)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0) {
		*err = weft__err_get();
		return -1;
	}
	int one = 1, zero = 0;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    ((flags & WEFT_REUSEPORT) &&
	     setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
	    (is_any6(ai) && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) != 0) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
		*err = weft__err_get();
		close(fd);
		return -1;
	}
	return fd;
}

/* The wildcard listener: IPv6's dual-stack one, or IPv4's where the system
 * has no IPv6 (no such family, or no such address: IPv6 disabled). */
static int listen_any(const struct addrinfo *res, int backlog, int flags, int *err)
{
	const struct addrinfo *v6 = next_of(res, AF_INET6, true), *v4 = next_of(res, AF_INET, true);
	*err = EAFNOSUPPORT;
	if (v6) {
		int fd = bind_listen(v6, backlog, flags, err);
		if (fd >= 0 || (*err != EAFNOSUPPORT && *err != EADDRNOTAVAIL))
			return fd;
	}
	return v4 ? bind_listen(v4, backlog, flags, err) : -1;
}

int weft_listen(const char *host, const char *service, int backlog, int flags)
{
	if (!service || backlog < 0 || (flags & ~WEFT_REUSEPORT))
		return weft__err_fail(EINVAL);
	struct addrinfo *res;
	int e = resolve(host, service, AI_PASSIVE, -1, &res);
	if (e)
		return weft__err_fail(e);
	int fd = -1;
	if (!host)
		fd = listen_any(res, backlog, flags, &e);
	for (const struct addrinfo *ai = res; host && ai && fd < 0; ai = ai->ai_next)
		fd = bind_listen(ai, backlog, flags, &e);
	freeaddrinfo(res);
	return fd >= 0 ? fd : weft__err_fail(e);
}
