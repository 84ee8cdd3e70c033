/* SPDX-License-Identifier: MIT */
/* weft_dial and weft_listen (lib/dial.c): numeric addresses without the
 * offload pool, names through it; Happy Eyeballs falling back from a
 * refused family at once and from a hung one (a listener whose backlog is
 * full drops the SYN) after 250 ms, the loser closed; resolution failures
 * and their errno; deadlines and cancellation during the lookup and the
 * attempts, every socket closed (/proc/self/fd counted); EPERM and EINVAL;
 * listeners: dual-stack wildcard, WEFT_REUSEPORT, from plain threads.
 *
 * Two loopback families are needed for the Happy Eyeballs cases: the test
 * dials "localhost" when it resolves to ::1 and 127.0.0.1 here, else
 * DUAL_HOST, a name this file's getaddrinfo (below, interposed on libc's
 * for the library's calls) serves with both; without a usable ::1 those
 * cases say so and pass.  Nothing here uses the network beyond loopback. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* ------------------------------------------------------ the test's resolver */

static const char DUAL_HOST[] = "weft-dual.test";	/* ::1, then 127.0.0.1 */
static const char SLOW_HOST[] = "weft-slow.test";	/* 127.0.0.1 after 300 ms */
static const char NONAME_HOST[] = "weft-noname.test";	/* EAI_NONAME */
static const char AGAIN_HOST[] = "weft-again.test";	/* EAI_AGAIN */

/* How long SLOW_HOST's lookup takes: 300 ms, 3 s under valgrind. */
static int64_t slow_ns(void)
{
	return (RUNNING_ON_VALGRIND ? 3000 : 300) * MS;
}

typedef int gai_fn(const char *, const char *, const struct addrinfo *, struct addrinfo **);
static gai_fn *real_getaddrinfo;

__attribute__((constructor)) static void find_real_getaddrinfo(void)
{
	void *f = dlsym(RTLD_NEXT, "getaddrinfo");
	memcpy(&real_getaddrinfo, &f, sizeof f);
}

static bool named(const char *node, const char *name)
{
	return node && strcmp(node, name) == 0;
}

/* When the last lookup returned (weft_now): where a dial's attempts start,
 * after however long the offload pool took to run it. */
static _Atomic int64_t lookup_returned;

/* libc's, but for the names above (a numeric-only lookup of them fails,
 * as it must: they are names). */
static int resolve(const char *node, const char *service, const struct addrinfo *hints,
		   struct addrinfo **res)
{
	if (hints && (hints->ai_flags & AI_NUMERICHOST))
		return real_getaddrinfo(node, service, hints, res);
	if (named(node, NONAME_HOST))
		return EAI_NONAME;
	if (named(node, AGAIN_HOST))
		return EAI_AGAIN;
	if (named(node, SLOW_HOST)) {
		usleep((useconds_t)(slow_ns() / 1000));
		node = "127.0.0.1";
	}
	if (!named(node, DUAL_HOST))
		return real_getaddrinfo(node, service, hints, res);
	struct addrinfo *v6, *v4;
	int r = real_getaddrinfo("::1", service, hints, &v6);
	if (r)
		return r;
	if ((r = real_getaddrinfo("127.0.0.1", service, hints, &v4))) {
		freeaddrinfo(v6);
		return r;
	}
	struct addrinfo *last = v6;
	while (last->ai_next)
		last = last->ai_next;
	last->ai_next = v4;
	*res = v6;
	return 0;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		struct addrinfo **res)
{
	int r = resolve(node, service, hints, res);
	atomic_store(&lookup_returned, weft_now());
	return r;
}

/* ------------------------------------------------------ helpers */

static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	CHECK(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static uint64_t offload_calls(void)
{
	weft_stats s = { .size = sizeof s };
	CHECK(weft_stats_get(&s) == 0);
	return s.offload_calls;
}

static socklen_t loopback(int family, unsigned port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof *a;
	}
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
	a->sin6_family = AF_INET6;
	a->sin6_port = htons((uint16_t)port);
	a->sin6_addr = in6addr_loopback;
	return sizeof *a;
}

static unsigned port_of(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	CHECK(getsockname(fd, (struct sockaddr *)&ss, &len) == 0);
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

static int family_of(int fd, bool peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	CHECK((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&ss, &len) == 0);
	return ss.ss_family;
}

/* A plain (blocking) listener on family's loopback at port (0: any), or -1
 * with errno. */
static int plain_listener(int family, unsigned port, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t len = loopback(family, port, &ss);
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, backlog) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static bool v6_usable(void)
{
	int fd = plain_listener(AF_INET6, 0, 1);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Reports the test skipped where ::1 is not usable: called before a test
 * that needs both families, after the IPv4 half of one that has both. */
static void require_v6(const char *what)
{
	if (!v6_usable())
		cr_skip_test("::1 is not usable here: %s not run", what);
}

/* A listener whose accept queue is full, so that the kernel drops the SYN
 * of the next connect, which hangs: listen(fd, 0), then connections nobody
 * accepts until one does not complete within 100 ms. */
struct blackhole {
	int listener;
	int fill[32];
	int nfill;
};

static bool blackhole_open(struct blackhole *b, int family, unsigned port)
{
	b->nfill = 0;
	if ((b->listener = plain_listener(family, port, 0)) < 0)
		return false;
	struct sockaddr_storage ss;
	socklen_t len = loopback(family, port_of(b->listener), &ss);
	while (b->nfill < (int)(sizeof b->fill / sizeof b->fill[0])) {
		int c = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		CHECK(c >= 0);
		b->fill[b->nfill++] = c;
		CHECK(connect(c, (struct sockaddr *)&ss, len) == 0 || errno == EINPROGRESS);
		struct pollfd p = { .fd = c, .events = POLLOUT };
		if (poll(&p, 1, 100) == 0)
			return true;	/* this one's SYN was dropped */
	}
	CHECK(!"the backlog never filled");
	return false;
}

static void blackhole_close(struct blackhole *b)
{
	for (int i = 0; i < b->nfill; i++)
		close(b->fill[i]);
	close(b->listener);
}

/* The name to dial for both loopback families (::1 usable: require_v6):
 * "localhost" when it resolves to both here, else DUAL_HOST.  *first: the
 * family its first address has (Happy Eyeballs starts there). */
static const char *dual_host(int *first)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	const char *host = "localhost";
	bool v4 = false, v6 = false;
	if (real_getaddrinfo(host, NULL, &hints, &res) == 0) {
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			v4 |= ai->ai_family == AF_INET;
			v6 |= ai->ai_family == AF_INET6;
		}
		*first = res->ai_family;
		freeaddrinfo(res);
	}
	if (!v4 || !v6) {
		fprintf(stderr, "dial: localhost is not both ::1 and 127.0.0.1 here (/etc/hosts); "
				"dialing %s, which the test's resolver serves as both\n", DUAL_HOST);
		host = DUAL_HOST;
		*first = AF_INET6;
	}
	return host;
}

static const char *loopback_name(int family)
{
	return family == AF_INET ? "127.0.0.1" : "::1";
}

static int other(int family)
{
	return family == AF_INET ? AF_INET6 : AF_INET;
}

static void service(char buf[8], unsigned port)
{
	snprintf(buf, 8, "%u", port);
}

/* A connection from weft_dial works: a byte each way through l. */
static void check_connection(int fd, int l)
{
	CHECK(fd >= 0);
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	int s = weft_accept(l, NULL, NULL, weft_now() + 5000 * MS);
	CHECK(s >= 0);
	char c = 'x';
	CHECK(weft_write(fd, "d", 1, -1) == 1);
	CHECK(weft_read(s, &c, 1, -1) == 1 && c == 'd');
	CHECK(weft_write(s, "l", 1, -1) == 1);
	CHECK(weft_read(fd, &c, 1, -1) == 1 && c == 'l');
	CHECK(weft_close(s) == 0);
}

/* Dials host at listener l's port, checks that it reached `family` with no
 * socket left over but its own and that the connection works, closes it;
 * returns how long the dial took. */
static int64_t dial_returned;	/* when dial_and_check's dial returned */

static int64_t dial_and_check(const char *host, int l, int family)
{
	char port[8];
	service(port, port_of(l));
	int before = fd_count();
	int64_t t0 = weft_now();
	int fd = weft_dial(host, port, t0 + 10000 * MS);
	dial_returned = weft_now();
	int64_t took = dial_returned - t0;
	CHECK(fd >= 0 && family_of(fd, true) == family);
	CHECK(fd_count() == before + 1);	/* no attempt's socket left over */
	check_connection(fd, l);
	CHECK(weft_close(fd) == 0);
	return took;
}

/* ------------------------------------------------------ dialing */

static void numeric_main(void *arg)
{
	(void)arg;
	for (int family = AF_INET; family; family = family == AF_INET ? AF_INET6 : 0) {
		if (family == AF_INET6 && !v6_usable())
			break;
		int l = weft_listen(loopback_name(family), "0", 16, 0);
		CHECK(l >= 0 && family_of(l, false) == family);
		uint64_t calls = offload_calls();
		dial_and_check(loopback_name(family), l, family);
		CHECK(offload_calls() == calls);	/* no lookup on the pool */
		CHECK(weft_close(l) == 0);
	}
}

Test(dial, numeric_addresses_connect_without_the_offload_pool)
{
	run(2, numeric_main, NULL);
	require_v6("the IPv6 half");
}

static void name_main(void *arg)
{
	(void)arg;
	int l = weft_listen("127.0.0.1", "0", 16, 0);
	CHECK(l >= 0);
	uint64_t calls = offload_calls();
	dial_and_check(SLOW_HOST, l, AF_INET);
	CHECK(offload_calls() == calls + 1);	/* the lookup ran on the pool */
	CHECK(weft_close(l) == 0);
}

Test(dial, a_name_is_looked_up_on_the_offload_pool)
{
	run(2, name_main, NULL);
}

/* The listener on one family only: an attempt at the other is refused at
 * once, and the next starts at once, not 250 ms later. */
static void fallback_main(void *arg)
{
	(void)arg;
	int first = AF_INET6;
	const char *host = dual_host(&first);
	for (int pass = 0; pass < 2; pass++) {
		int family = pass == 0 ? other(first) : first;
		int l = weft_listen(loopback_name(family), "0", 16, 0);
		CHECK(l >= 0);
		dial_and_check(host, l, family);
		CHECK(weft_close(l) == 0);
		/* no 250 ms wait after a refusal, judged from the lookup's
		 * return (the offload pool may be slow to run it, not the
		 * attempts: a refusal on loopback comes at once) */
		if (pass == 0)
			CHECK(dial_returned - atomic_load(&lookup_returned) < slack(200 * MS));
	}
	/* no listener on either family: the last attempt's errno */
	int l = weft_listen("::1", "0", 16, 0);
	CHECK(l >= 0);
	char port[8];
	service(port, port_of(l));
	CHECK(weft_close(l) == 0);
	int before = fd_count();
	errno = 0;
	CHECK(weft_dial(host, port, -1) == -1 && errno == ECONNREFUSED);
	CHECK(fd_count() == before);
}

Test(dial, falls_back_at_once_to_the_family_with_a_listener)
{
	require_v6("the two-family test");
	run(2, fallback_main, NULL);
}

/* The first family's listener drops SYNs: its attempt hangs, the other
 * family's starts 250 ms later and wins; the hung one is closed. */
static void hung_main(void *arg)
{
	(void)arg;
	int first = AF_INET6;
	const char *host = dual_host(&first);
	int l = -1;
	struct blackhole b;
	for (int tries = 0; l < 0; tries++) {	/* one port on both families */
		CHECK(tries < 20);
		l = weft_listen(loopback_name(other(first)), "0", 16, 0);
		CHECK(l >= 0);
		if (!blackhole_open(&b, first, port_of(l))) {
			CHECK(errno == EADDRINUSE);
			CHECK(weft_close(l) == 0);
			l = -1;
		}
	}
	int64_t took = dial_and_check(host, l, other(first));	/* the hung attempt closed */
	CHECK(took >= 250 * MS);
	/* judged from the lookup's return: the offload pool that runs it can
	 * be slow to start or wake on a loaded machine, the attempts not */
	int64_t attempts = dial_returned - atomic_load(&lookup_returned);
	CHECK(attempts >= 250 * MS);
	CHECK(attempts < slack(900 * MS));
	CHECK(weft_close(l) == 0);
	blackhole_close(&b);
}

Test(dial, a_hung_family_loses_to_the_other_after_250_ms)
{
	require_v6("the two-family test");
	run(2, hung_main, NULL);
}

static void resolution_main(void *arg)
{
	(void)arg;
	static const struct {
		const char *host, *service;
		int err;
		bool pool;	/* goes through the offload pool */
	} cases[] = {
		{ "weft-test.invalid", "80", ENOENT, false },
		{ "INVALID.", "80", ENOENT, false },
		{ "a.b.Invalid", "80", ENOENT, false },
		{ NONAME_HOST, "80", ENOENT, true },
		{ AGAIN_HOST, "80", EAGAIN, true },
		{ "127.0.0.1", "weft-no-such-service", ENOENT, true },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t calls = offload_calls();
		errno = 0;
		/* a deadline in case a lookup went to the network after all */
		int fd = weft_dial(cases[i].host, cases[i].service, weft_now() + 10000 * MS);
		if (fd != -1 || errno != cases[i].err)
			fprintf(stderr, "case %zu: %s:%s: %d, errno %d\n", i, cases[i].host,
				cases[i].service, fd, errno);
		CHECK(fd == -1 && errno == cases[i].err);
		CHECK(offload_calls() == calls + cases[i].pool);
	}
	errno = 0;
	CHECK(weft_listen("weft-test.invalid", "0", 16, 0) == -1 && errno == ENOENT);
	CHECK(weft_listen(NONAME_HOST, "0", 16, 0) == -1 && errno == ENOENT);
}

Test(dial, resolution_failures_map_to_errno)
{
	run(2, resolution_main, NULL);
}

/* A deadline: during the lookup, against a hung attempt, already past. */
static void deadline_main(void *arg)
{
	(void)arg;
	struct blackhole b;
	CHECK(blackhole_open(&b, AF_INET, 0));
	char port[8];
	service(port, port_of(b.listener));
	int before = fd_count();

	int64_t t0 = weft_now();
	errno = 0;
	CHECK(weft_dial("127.0.0.1", port, t0 + 200 * MS) == -1 && errno == ETIMEDOUT);
	int64_t took = weft_now() - t0;
	CHECK(took >= 200 * MS && took < slack(2000 * MS));
	CHECK(fd_count() == before);

	t0 = weft_now();
	errno = 0;
	CHECK(weft_dial(SLOW_HOST, port, t0 + 50 * MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() - t0 < slow_ns());	/* did not wait for the lookup */
	CHECK(fd_count() == before);

	/* past: no waiting, but what needs none is done */
	t0 = weft_now();
	errno = 0;
	CHECK(weft_dial("127.0.0.1", port, 0) == -1 && errno == ETIMEDOUT);
	errno = 0;
	CHECK(weft_dial(SLOW_HOST, port, 0) == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() - t0 < slack(250 * MS));	/* the lookup would take 300 ms */
	CHECK(fd_count() == before);
	blackhole_close(&b);

	before = fd_count();
	int l = weft_listen("127.0.0.1", "0", 16, 0);
	CHECK(l >= 0);
	service(port, port_of(l));
	int fd = weft_dial("127.0.0.1", port, weft_now() - 1);	/* loopback: at once */
	check_connection(fd, l);
	CHECK(weft_close(fd) == 0);
	CHECK(weft_close(l) == 0);
	errno = 0;	/* refused at once: the attempt's errno, not ETIMEDOUT */
	CHECK(weft_dial("127.0.0.1", port, 0) == -1 && errno == ECONNREFUSED);
	CHECK(fd_count() == before);
}

Test(dial, deadlines_during_the_lookup_and_the_attempts)
{
	run(2, deadline_main, NULL);
}

struct dialer {
	const char *host;
	char port[8];
	int fd, err;
	int64_t returned;
};

static void dialer_main(void *arg)
{
	struct dialer *d = arg;
	errno = 0;
	d->fd = weft_dial(d->host, d->port, -1);
	d->err = errno;
	d->returned = weft_now();
}

/* Cancels a dial of host (both families hung when it is a two-family name)
 * after `after` ns: ECANCELED at once, every socket closed. */
static void cancel_dial(const char *host, unsigned port, int64_t after)
{
	int before = fd_count();
	struct dialer d = { .host = host };
	service(d.port, port);
	weft_co *co = go(dialer_main, &d);
	CHECK(weft_sleep(weft_now() + after) == 0);
	int64_t cancelled = weft_now();
	CHECK(weft_cancel(co) == 0);
	join(co);
	CHECK(d.fd == -1 && d.err == ECANCELED);
	CHECK(d.returned - cancelled < slack(200 * MS));
	CHECK(fd_count() == before);
}

static void cancel_main(void *arg)
{
	(void)arg;
	struct blackhole b4, b6;
	CHECK(blackhole_open(&b4, AF_INET, 0));
	cancel_dial("127.0.0.1", port_of(b4.listener), 100 * MS);
	cancel_dial(SLOW_HOST, port_of(b4.listener), 50 * MS);	/* in the lookup */
	if (v6_usable()) {	/* two attempts pending when cancelled */
		int first;
		const char *host = dual_host(&first);
		bool hung = false;
		for (int tries = 0; !hung; tries++) {
			CHECK(tries < 20);
			if (!(hung = blackhole_open(&b6, AF_INET6, port_of(b4.listener)))) {
				CHECK(errno == EADDRINUSE);
				blackhole_close(&b4);
				CHECK(blackhole_open(&b4, AF_INET, 0));
			}
		}
		cancel_dial(host, port_of(b4.listener), 400 * MS);
		blackhole_close(&b6);
	}
	blackhole_close(&b4);
}

Test(dial, cancel_mid_dial_closes_every_attempt)
{
	run(2, cancel_main, NULL);
	require_v6("the two-family cancel");
}

static void check_eperm(void)
{
	errno = 0;
	cr_assert_eq(weft_dial("127.0.0.1", "1", -1), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_dial(NULL, NULL, -1), -1);	/* before the argument checks */
	cr_assert_eq(errno, EPERM);
}

Test(dial, outside_a_coroutine_is_eperm)
{
	check_outside_coroutines(check_eperm);
}

static void bad_arguments_main(void *arg)
{
	(void)arg;
	errno = 0;
	CHECK(weft_dial(NULL, "80", -1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(weft_dial("127.0.0.1", NULL, -1) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(weft_listen(NULL, NULL, 16, 0) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(weft_listen(NULL, "0", -1, 0) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(weft_listen(NULL, "0", 16, 2) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(weft_listen(NULL, "0", 16, -1) == -1 && errno == EINVAL);
}

Test(dial, bad_arguments)
{
	int before = fd_count();
	run(2, bad_arguments_main, NULL);
	cr_assert_eq(fd_count(), before);
}

/* ------------------------------------------------------ TCP_NODELAY */

static int nodelay(int fd)
{
	int on = -1;
	socklen_t len = sizeof on;
	CHECK(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0);
	return on;
}

/* Both ends of a connection from weft_dial and weft_accept (on weft_listen's
 * listener) have TCP_NODELAY; set back to 0 (weft.h's way to keep Nagle's
 * algorithm), it stays 0 through weft's calls.  weft_accept on a Unix
 * listener, which refuses the option, accepts all the same. */
static void nodelay_main(void *arg)
{
	(void)arg;
	int l = weft_listen("127.0.0.1", "0", 16, 0);
	CHECK(l >= 0);
	char port[8];
	service(port, port_of(l));
	int fd = weft_dial("127.0.0.1", port, weft_now() + 10000 * MS);
	CHECK(fd >= 0);
	int s = weft_accept(l, NULL, NULL, weft_now() + 5000 * MS);
	CHECK(s >= 0);
	CHECK(nodelay(fd) && nodelay(s));
	int zero = 0;
	CHECK(setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &zero, sizeof zero) == 0);
	char c;
	CHECK(weft_write(fd, "d", 1, -1) == 1 && weft_read(s, &c, 1, -1) == 1);
	CHECK(weft_write(s, "l", 1, -1) == 1 && weft_read(fd, &c, 1, -1) == 1);
	CHECK(nodelay(s) == 0 && nodelay(fd));
	CHECK(weft_close(s) == 0 && weft_close(fd) == 0 && weft_close(l) == 0);

	struct sockaddr_un un = { .sun_family = AF_UNIX };	/* abstract: nothing to unlink */
	snprintf(un.sun_path + 1, sizeof un.sun_path - 1, "weft-nodelay-%d", (int)getpid());
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&un, sizeof un) == 0 && listen(l, 4) == 0);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&un, sizeof un) == 0);
	s = weft_accept(l, NULL, NULL, weft_now() + 5000 * MS);
	CHECK(s >= 0);
	CHECK(weft_close(s) == 0 && close(fd) == 0 && weft_close(l) == 0);
}

Test(dial, connections_have_tcp_nodelay)
{
	run(1, nodelay_main, NULL);
}

/* Sockets that are not TCP refuse TCP_NODELAY each their own way: a Unix
 * one with EOPNOTSUPP, vsock, TIPC and SCTP ones with ENOPROTOOPT.  While
 * refuse_nodelay is set, this file's setsockopt (interposed on libc's for
 * the library's calls, as getaddrinfo above) answers ENOPROTOOPT for
 * TCP_NODELAY, as vsock does: weft_dial and weft_accept set it best
 * effort, and the connection works all the same.  (Before, both closed
 * the connection and failed with ENOPROTOOPT.) */
typedef int setsockopt_fn(int, int, int, const void *, socklen_t);
static setsockopt_fn *real_setsockopt;
static atomic_bool refuse_nodelay;

__attribute__((constructor)) static void find_real_setsockopt(void)
{
	void *f = dlsym(RTLD_NEXT, "setsockopt");
	memcpy(&real_setsockopt, &f, sizeof f);
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (atomic_load(&refuse_nodelay) && level == IPPROTO_TCP && name == TCP_NODELAY) {
		errno = ENOPROTOOPT;
		return -1;
	}
	return real_setsockopt(fd, level, name, val, len);
}

static void refused_nodelay_main(void *arg)
{
	(void)arg;
	int l = weft_listen("127.0.0.1", "0", 16, 0);
	CHECK(l >= 0);
	char port[8];
	service(port, port_of(l));
	atomic_store(&refuse_nodelay, true);
	int fd = weft_dial("127.0.0.1", port, weft_now() + 10000 * MS);
	int dial_errno = errno;
	int s = weft_accept(l, NULL, NULL, weft_now() + 5000 * MS);
	int accept_errno = errno;
	atomic_store(&refuse_nodelay, false);
	if (fd < 0 || s < 0) {
		fprintf(stderr, "refused TCP_NODELAY: weft_dial %d (errno %d), weft_accept %d (errno %d)\n",
			fd, dial_errno, s, accept_errno);
		abort();
	}
	char c;
	CHECK(weft_write(fd, "d", 1, -1) == 1 && weft_read(s, &c, 1, -1) == 1);
	CHECK(weft_write(s, "l", 1, -1) == 1 && weft_read(fd, &c, 1, -1) == 1);
	CHECK(weft_close(s) == 0 && weft_close(fd) == 0 && weft_close(l) == 0);
}

Test(dial, a_refused_tcp_nodelay_fails_no_connection)
{
	int before = fd_count();
	run(1, refused_nodelay_main, NULL);
	cr_assert_eq(fd_count(), before);
}

/* ------------------------------------------------------ listening */

static void check_listener(int l)
{
	cr_assert_geq(l, 0, "errno %d", errno);
	cr_assert(fcntl(l, F_GETFL) & O_NONBLOCK);
	cr_assert(fcntl(l, F_GETFD) & FD_CLOEXEC);
	int on = 0;
	socklen_t len = sizeof on;
	cr_assert_eq(getsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, &len), 0);
	cr_assert(on);
}

/* From a plain thread, no runtime: weft_listen never needs one. */
Test(listen, reuseport_twice_on_one_port)
{
	int a = weft_listen(NULL, "0", 16, WEFT_REUSEPORT);
	check_listener(a);
	char port[8];
	service(port, port_of(a));
	int b = weft_listen(NULL, port, 16, WEFT_REUSEPORT);
	check_listener(b);
	cr_assert_eq(port_of(b), port_of(a));
	errno = 0;
	cr_assert_eq(weft_listen(NULL, port, 16, 0), -1);	/* without the flag */
	cr_assert_eq(errno, EADDRINUSE);
	close(a);
	close(b);

	a = weft_listen("127.0.0.1", "0", 16, 0);
	check_listener(a);
	service(port, port_of(a));
	errno = 0;
	cr_assert_eq(weft_listen("127.0.0.1", port, 16, 0), -1);
	cr_assert_eq(errno, EADDRINUSE);
	errno = 0;
	cr_assert_eq(weft_listen("127.0.0.1", port, 16, WEFT_REUSEPORT), -1);	/* a's lacks it */
	cr_assert_eq(errno, EADDRINUSE);
	close(a);

	a = weft_listen("localhost", "0", 16, 0);	/* a name, on this thread */
	check_listener(a);
	close(a);
}

static void dual_stack_main(void *arg)
{
	(void)arg;
	int l = weft_listen(NULL, "0", 16, 0);
	CHECK(l >= 0);
	char port[8];
	service(port, port_of(l));
	bool v6 = v6_usable();
	if (v6) {
		CHECK(family_of(l, false) == AF_INET6);
		int off = 1;
		socklen_t len = sizeof off;
		CHECK(getsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, &len) == 0 && off == 0);
	}
	for (int family = AF_INET; family; family = v6 && family == AF_INET ? AF_INET6 : 0)
		dial_and_check(loopback_name(family), l, family);
	CHECK(weft_close(l) == 0);

	uint64_t calls = offload_calls();
	l = weft_listen(SLOW_HOST, "0", 16, 0);	/* a name, from a coroutine: the pool */
	CHECK(l >= 0 && family_of(l, false) == AF_INET);
	CHECK(offload_calls() == calls + 1);
	CHECK(weft_close(l) == 0);
}

Test(listen, the_any_address_is_dual_stack)
{
	run(2, dual_stack_main, NULL);
	require_v6("the IPv6 half");
}
