/* SPDX-License-Identifier: MIT */
/* I/O and timers: echo over loopback, deadlines, close, fd reuse, the
 * readiness/deadline/close races, many sleeps, a stuck worker's loop,
 * accept under EMFILE, and every call outside a coroutine. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Checks inside coroutines: abort (Criterion reports the crash), since
 * cr_assert cannot unwind a worker thread. */

static void raise_fd_limit(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

/* A listening TCP socket on 127.0.0.1, any port; *addr gets its address. */
static int listener(int backlog, struct sockaddr_in *addr)
{
	int fd = loopback_socket(SOCK_STREAM, addr);
	CHECK(listen(fd, backlog) == 0);
	return fd;
}

static int tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	return fd;
}

/* ------------------------------------------------------ outside */

static void check_all_eperm(void)
{
	char b[1];
	errno = 0;
	cr_assert_eq(weft_wait(0, WEFT_IN, -1), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_read(0, b, 1, -1), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_write(1, b, 1, -1), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_accept(0, NULL, NULL, -1), -1);
	cr_assert_eq(errno, EPERM);
	struct sockaddr_in a = { .sin_family = AF_INET };
	errno = 0;
	cr_assert_eq(weft_connect(0, (struct sockaddr *)&a, sizeof a, -1), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_close(0), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_sleep(0), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_wait(0, 0, -1), -1, "EPERM comes before EINVAL");
	cr_assert_eq(errno, EPERM);
}

Test(io, every_call_outside_a_coroutine_is_eperm)
{
	check_outside_coroutines(check_all_eperm);
}

static void bad_arguments(void *arg)
{
	(void)arg;
	char b[1];
	CHECK(weft_read(-1, b, 1, -1) == -1 && errno == EBADF);
	CHECK(weft_write(-5, b, 1, -1) == -1 && errno == EBADF);
	CHECK(weft_wait(-1, WEFT_IN, -1) == -1 && errno == EBADF);
	CHECK(weft_close(-1) == -1 && errno == EBADF);
	int sv[2];
	socket_pair(sv);
	CHECK(weft_wait(sv[0], 0, -1) == -1 && errno == EINVAL);
	CHECK(weft_wait(sv[0], 8, -1) == -1 && errno == EINVAL);
	CHECK(weft_wait(sv[0], WEFT_AFTER_EAGAIN, -1) == -1 && errno == EINVAL);	/* no direction */
	int unused = dup(sv[0]);
	CHECK(unused >= 0 && close(unused) == 0);
	CHECK(weft_read(unused, b, 1, -1) == -1 && errno == EBADF);	/* not open */
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

/* A number closed before: weft_close of it again is EBADF and closes
 * nothing, so calls on it racing that second close see EBADF, never a
 * close's ECANCELED (the API fuzzer found a repeated close bumping the
 * entry's generation under a concurrent weft_wait). */
struct closed_number {
	int fd;
	atomic_int stop;
	atomic_int canceled;
};

static void close_it_again(void *arg)
{
	struct closed_number *cn = arg;
	while (!atomic_load(&cn->stop)) {
		CHECK(weft_close(cn->fd) == -1 && errno == EBADF);
		weft_yield();
	}
}

static void closed_number_races(void *arg)
{
	(void)arg;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(weft_wait(sv[0], WEFT_OUT, -1) == WEFT_OUT);	/* registered */
	CHECK(weft_close(sv[0]) == 0);
	struct closed_number cn = { .fd = sv[0] };
	weft_co *closer = go(close_it_again, &cn);
	for (unsigned i = 0; i < scaled(200000, 20000, 2000); i++) {
		int r = weft_wait(cn.fd, WEFT_IN, weft_now() + MS);
		CHECK(r == -1 && (errno == EBADF || errno == ECANCELED));
		if (errno == ECANCELED)
			atomic_fetch_add(&cn.canceled, 1);
	}
	atomic_store(&cn.stop, 1);
	join(closer);
	CHECK(atomic_load(&cn.canceled) == 0);
	CHECK(weft_close(sv[1]) == 0);
}

Test(io, a_number_closed_before_stays_ebadf_under_repeated_closes, .timeout = 300)
{
	run(2, closed_number_races, NULL);
}

Test(io, bad_arguments)
{
	run(1, bad_arguments, NULL);
}

/* ------------------------------------------------------ echo */

struct echo_test {
	struct sockaddr_in addr;
	int lfd;
	unsigned conns, msgs;
	unsigned long verified;	/* atomic: bytes checked by the clients */
};

enum { CHUNK = 16384, MAX_MSG = 65536 };

static void echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char *buf = malloc(CHUNK);
	CHECK(buf);
	ssize_t n;
	while ((n = weft_read(fd, buf, CHUNK, -1)) > 0)
		CHECK(weft_write(fd, buf, (size_t)n, -1) == n);
	CHECK(n == 0);
	free(buf);
	CHECK(weft_close(fd) == 0);
}

static void acceptor(void *arg)
{
	struct echo_test *t = arg;
	for (unsigned i = 0; i < t->conns; i++) {
		int c = weft_accept(t->lfd, NULL, NULL, -1);
		CHECK(c >= 0);
		CHECK(fcntl(c, F_GETFL) & O_NONBLOCK);
		CHECK(fcntl(c, F_GETFD) & FD_CLOEXEC);
		CHECK(weft_detach(go(echo_conn, (void *)(intptr_t)c)) == 0);
	}
}

/* Message sizes and contents are a function of (connection, message, byte),
 * so the reader can check what the writer sent without sharing a buffer. */
static size_t msg_size(unsigned conn, unsigned m)
{
	uint64_t x = (conn + 1) * 0x9e3779b97f4a7c15ull ^ (m + 1) * 0xbf58476d1ce4e5b9ull;
	x ^= x >> 31;
	return (size_t)(x % MAX_MSG) + 1;
}

static unsigned char msg_byte(unsigned conn, unsigned m, size_t i)
{
	return (unsigned char)(conn * 131 + m * 31 + i * 7 + (i >> 8));
}

struct client {
	struct echo_test *t;
	unsigned conn;
	int fd;
};

static void client_writer(void *arg)
{
	struct client *c = arg;
	unsigned char *buf = malloc(MAX_MSG);
	CHECK(buf);
	for (unsigned m = 0; m < c->t->msgs; m++) {
		size_t n = msg_size(c->conn, m);
		for (size_t i = 0; i < n; i++)
			buf[i] = msg_byte(c->conn, m, i);
		CHECK(weft_write(c->fd, buf, n, -1) == (ssize_t)n);
	}
	free(buf);
}

static void client(void *arg)
{
	struct client *c = arg;
	c->fd = tcp_socket();
	CHECK(weft_connect(c->fd, (struct sockaddr *)&c->t->addr, sizeof c->t->addr, -1) == 0);
	weft_co *writer = go(client_writer, c);	/* full duplex: reader and writer */
	unsigned char *buf = malloc(CHUNK);
	CHECK(buf);
	unsigned long total = 0;
	for (unsigned m = 0; m < c->t->msgs; m++) {
		size_t n = msg_size(c->conn, m), got = 0;
		while (got < n) {
			size_t want = n - got < CHUNK ? n - got : CHUNK;
			ssize_t r = weft_read(c->fd, buf, want, -1);
			CHECK(r > 0);
			for (ssize_t i = 0; i < r; i++)
				CHECK(buf[i] == msg_byte(c->conn, m, got + (size_t)i));
			got += (size_t)r;
		}
		total += n;
	}
	/* The client closes first, having read everything: a server that
	 * closed first with megabytes still queued would leave orphaned
	 * sockets, which the kernel resets under memory pressure. */
	join(writer);
	free(buf);
	CHECK(weft_close(c->fd) == 0);
	__atomic_fetch_add(&c->t->verified, total, __ATOMIC_RELAXED);
}

static void echo_root(void *arg)
{
	struct echo_test *t = arg;
	t->lfd = listener(4096, &t->addr);
	weft_co *acc = go(acceptor, t);
	struct client *cs = calloc(t->conns, sizeof *cs);
	weft_co **co = calloc(t->conns, sizeof *co);
	CHECK(cs && co);
	for (unsigned i = 0; i < t->conns; i++) {
		cs[i] = (struct client){ .t = t, .conn = i };
		co[i] = go(client, &cs[i]);
	}
	for (unsigned i = 0; i < t->conns; i++)
		join(co[i]);
	join(acc);
	CHECK(weft_close(t->lfd) == 0);
	free(cs);
	free(co);
}

Test(io, echo_over_loopback_every_byte_verified, .timeout = 600)
{
	raise_fd_limit();
	struct echo_test t = { .conns = scaled(1000, 200, 20), .msgs = scaled(100, 10, 5) };
	run(2, echo_root, &t);
	unsigned long expect = 0;
	for (unsigned c = 0; c < t.conns; c++)
		for (unsigned m = 0; m < t.msgs; m++)
			expect += msg_size(c, m);
	cr_assert_eq(t.verified, expect);
}

/* ------------------------------------------------------ deadlines */

static void write_later(void *arg)
{
	int *fd = arg;
	CHECK(weft_sleep(weft_now() + 20 * MS) == 0);
	CHECK(weft_write(*fd, "x", 1, -1) == 1);
}

static void read_deadlines(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	char b[4];
	/* nothing to read: expires, never early */
	int64_t dl = weft_now() + 30 * MS;
	CHECK(weft_read(sv[0], b, 1, dl) == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() >= dl);
	/* a past deadline does not block, but succeeds when it can */
	CHECK(weft_read(sv[0], b, 1, 0) == -1 && errno == ETIMEDOUT);
	CHECK(weft_write(sv[1], "ab", 2, 0) == 2);
	CHECK(weft_read(sv[0], b, sizeof b, 0) == 2 && memcmp(b, "ab", 2) == 0);
	/* the data comes at +20 ms, the deadline at +2 s: success */
	weft_co *w = go(write_later, &sv[1]);
	dl = weft_now() + 2000 * MS;
	CHECK(weft_read(sv[0], b, 1, dl) == 1 && b[0] == 'x');
	CHECK(weft_now() < dl);
	join(w);
	/* weft_wait: the subset, then a timeout */
	CHECK(weft_wait(sv[0], WEFT_IN | WEFT_OUT, -1) == WEFT_OUT);
	CHECK(weft_wait(sv[0], WEFT_IN, weft_now() + 10 * MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_write(sv[1], "y", 1, -1) == 1);
	CHECK(weft_wait(sv[0], WEFT_IN, weft_now() + 1000 * MS) == WEFT_IN);
	CHECK(weft_wait(sv[0], WEFT_IN | WEFT_OUT, 0) == (WEFT_IN | WEFT_OUT));
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(io, read_deadlines)
{
	run(2, read_deadlines, NULL);
}

static void connect_later(void *arg)
{
	struct sockaddr_in *addr = arg;
	CHECK(weft_sleep(weft_now() + 20 * MS) == 0);
	int fd = tcp_socket();
	CHECK(weft_connect(fd, (struct sockaddr *)addr, sizeof *addr, weft_now() + 5000 * MS) == 0);
	CHECK(weft_close(fd) == 0);
}

static void accept_deadlines(void *arg)
{
	(void)arg;
	struct sockaddr_in addr;
	int lfd = listener(16, &addr);
	int64_t dl = weft_now() + 30 * MS;
	CHECK(weft_accept(lfd, NULL, NULL, dl) == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() >= dl);
	weft_co *c = go(connect_later, &addr);
	struct sockaddr_in peer;
	socklen_t len = sizeof peer;
	int fd = weft_accept(lfd, (struct sockaddr *)&peer, &len, weft_now() + 5000 * MS);
	CHECK(fd >= 0 && len == sizeof peer && peer.sin_family == AF_INET);
	join(c);
	CHECK(weft_close(fd) == 0 && weft_close(lfd) == 0);
}

Test(io, accept_deadlines)
{
	run(2, accept_deadlines, NULL);
}

/*
 * A connect that cannot complete: a listener with backlog 0 that never
 * accepts.  Once its queue is full, the kernel drops further SYNs and the
 * client keeps retransmitting: the connect stays in progress.
 */
static void connect_deadlines(void *arg)
{
	(void)arg;
	struct sockaddr_in addr;
	int lfd = listener(0, &addr);
	enum { MAXFILL = 64 };
	int filled[MAXFILL], nfilled = 0;
	int64_t dl = 0;
	int r = 0;
	for (; nfilled < MAXFILL; nfilled++) {
		filled[nfilled] = tcp_socket();
		dl = weft_now() + 50 * MS;
		r = weft_connect(filled[nfilled], (struct sockaddr *)&addr, sizeof addr, dl);
		if (r != 0)
			break;
	}
	CHECK(nfilled < MAXFILL);	/* the queue filled up */
	CHECK(r == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() >= dl);
	for (int i = 0; i <= nfilled; i++)
		CHECK(weft_close(filled[i]) == 0);
	CHECK(weft_close(lfd) == 0);
	/* and one that succeeds well within its deadline */
	lfd = listener(16, &addr);
	int fd = tcp_socket();
	CHECK(weft_connect(fd, (struct sockaddr *)&addr, sizeof addr, weft_now() + 5000 * MS) == 0);
	CHECK(weft_close(fd) == 0 && weft_close(lfd) == 0);
}

Test(io, connect_deadlines)
{
	run(2, connect_deadlines, NULL);
}

static void connect_refused(void *arg)
{
	(void)arg;
	struct sockaddr_in addr;
	int lfd = listener(1, &addr);
	CHECK(close(lfd) == 0);	/* never waited on: plain close is fine */
	int fd = tcp_socket();
	CHECK(weft_connect(fd, (struct sockaddr *)&addr, sizeof addr, weft_now() + 5000 * MS) == -1);
	CHECK(errno == ECONNREFUSED);
	CHECK(weft_close(fd) == 0);
}

Test(io, connect_to_a_closed_port_is_refused)
{
	run(2, connect_refused, NULL);
}

/* ------------------------------------------------------ close */

struct parked {
	int fd;
	int result, err;
};

static void park_reader(void *arg)
{
	struct parked *p = arg;
	char b[1];
	p->result = (int)weft_read(p->fd, b, 1, -1);
	p->err = errno;
}

static void park_writer(void *arg)
{
	struct parked *p = arg;
	static char big[1 << 16];
	for (;;) {	/* until the socket buffer is full and we park */
		p->result = (int)weft_write(p->fd, big, sizeof big, -1);
		if (p->result < 0)
			break;
	}
	p->err = errno;
}

/* The close comes once both have parked (weft_stats' parks): both calls
 * return ECANCELED. */
static void close_parked(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	struct parked r = { .fd = sv[0] }, w = { .fd = sv[0] };
	uint64_t parks = stats_now().total.parks;
	weft_co *rc = go(park_reader, &r), *wc = go(park_writer, &w);
	wait_parks(parks, 2);
	CHECK(weft_close(sv[0]) == 0);
	join(rc);
	join(wc);
	CHECK(r.result == -1 && r.err == ECANCELED);
	CHECK(w.result == -1 && w.err == ECANCELED);
	CHECK(weft_close(sv[1]) == 0);
}

Test(io, close_wakes_a_parked_reader_and_writer)
{
	run(2, close_parked, NULL);
}

static void fd_reuse(void *arg)
{
	(void)arg;
	int a[2], b[2];
	socket_pair(a);
	CHECK(weft_write(a[1], "old", 3, -1) == 3);	/* readiness pending on a[0] */
	CHECK(weft_wait(a[0], WEFT_IN, -1) == WEFT_IN);
	int num = a[0];
	CHECK(weft_close(a[0]) == 0);
	socket_pair(b);
	CHECK(b[0] == num || b[1] == num);	/* the lowest free number comes back */
	int fd = b[0] == num ? b[0] : b[1], peer = b[0] == num ? b[1] : b[0];
	char c[8];
	/* clean: nothing ready, no stale readiness from the old fd */
	CHECK(weft_wait(fd, WEFT_IN, weft_now() + 20 * MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_read(fd, c, sizeof c, 0) == -1 && errno == ETIMEDOUT);
	CHECK(weft_write(peer, "new", 3, -1) == 3);
	CHECK(weft_read(fd, c, sizeof c, -1) == 3 && memcmp(c, "new", 3) == 0);
	CHECK(weft_close(fd) == 0 && weft_close(peer) == 0 && weft_close(a[1]) == 0);
}

Test(io, an_fd_number_reused_after_close_starts_clean)
{
	run(2, fd_reuse, NULL);
}

/* A coroutine calling weft_wait on fd without pause, from the other worker
 * while it can. */
struct close_racer {
	int fd;
	unsigned stop, calls;	/* atomic */
};

static void close_racer_main(void *arg)
{
	struct close_racer *r = arg;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		if (weft_wait(r->fd, WEFT_IN, 0) < 0)
			CHECK(errno == ETIMEDOUT || errno == ECANCELED || errno == EBADF);
		__atomic_fetch_add(&r->calls, 1, __ATOMIC_RELEASE);
	}
}

struct byte_read {
	int fd;
	ssize_t result;
	char got;
};

static void one_byte_reader(void *arg)
{
	struct byte_read *b = arg;
	b->result = weft_read(b->fd, &b->got, 1, -1);
}

static void close_races(void *arg)
{
	(void)arg;
	unsigned rounds = scaled(1000, 100, 10);
	for (unsigned i = 0; i < rounds; i++) {
		int p[2], q[2];
		CHECK(pipe2(p, O_CLOEXEC) == 0);
		int num = p[0];
		CHECK(weft_wait(num, WEFT_IN, 0) == -1 && errno == ETIMEDOUT);	/* registered */
		struct close_racer r = { .fd = num };
		weft_co *co = go(close_racer_main, &r);
		while (!__atomic_load_n(&r.calls, __ATOMIC_ACQUIRE))
			weft_yield();
		CHECK(weft_close(num) == 0);
		/* before the number is reused: a call on a number while another
		 * thread opens a file there is a race of the caller's (TSan) */
		__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
		join(co);
		/* the next file at the number: a blocking pipe, as pipe(2) makes it */
		CHECK(pipe2(q, O_CLOEXEC) == 0);
		if (q[0] != num) {
			CHECK(dup2(q[0], num) == num);
			CHECK(close(q[0]) == 0);
		}
		CHECK(weft_wait(num, WEFT_IN, 0) == -1 && errno == ETIMEDOUT);
		int fl = fcntl(num, F_GETFL);
		CHECK(fl >= 0 && (fl & O_NONBLOCK));	/* registered by weft, not inherited */
		struct byte_read b = { .fd = num };
		weft_co *reader = go(one_byte_reader, &b);
		weft_yield();	/* it parks, as a rule: the pipe is empty */
		CHECK(write(q[1], "n", 1) == 1);
		join(reader);
		CHECK(b.result == 1 && b.got == 'n');
		CHECK(weft_close(num) == 0 && close(p[1]) == 0 && close(q[1]) == 0);
	}
}

/* Calls racing weft_close from another worker, round after round: each
 * gets ECANCELED or runs before the close, or comes after it (EBADF); the
 * next file at the number is registered by its first call (non-blocking)
 * and its read parks and wakes.  The window
 * before close(2) is a few instructions wide here: the fault suite holds
 * the closer in it (fault::a_call_during_closes_close_leaves_no_state). */
Test(io, calls_racing_close_leave_the_number_clean, .timeout = 300)
{
	run(2, close_races, NULL);
}

/*
 * A close(2) that takes long: a TCP socket with SO_LINGER whose unsent data
 * the peer does not read.  close(2) frees the number at once and lingers in
 * the kernel until the data is acknowledged or the linger time is out;
 * weft_close holds the entry at FD_GEN_CLOSED all along.  Another thread
 * opens a file at the number the moment it is free (the case FD_GEN_CLOSED
 * is for), and a coroutine calls weft_read on that file with a short
 * deadline, or is cancelled in it: it must fail at its deadline
 * (ETIMEDOUT) or cancellation (ECANCELED) while the close(2) still
 * lingers, which it does until the test drains the peer (the linger time
 * is far beyond anything the test waits for).  Without the deadline and
 * cancel checks in gen_settled, the read returned only once close(2) had
 * (the linger time out): closed set.
 */
enum { LINGER_S = 30 };

struct lingering {
	int fd;
	int worker;	/* the test's: the closer must block another one */
	atomic_int closing, closed, elsewhere;
};

static void linger_closer(void *arg)
{
	struct lingering *l = arg;
	if (weft_worker_id() == l->worker) {
		atomic_store(&l->elsewhere, -1);	/* spawned again */
		return;
	}
	atomic_store(&l->elsewhere, 1);
	atomic_store(&l->closing, 1);
	CHECK(weft_close(l->fd) == 0);
	atomic_store(&l->closed, 1);
}

/* A connected loopback TCP socket whose send queue is full and never
 * drained (the peer's end is *peer), with SO_LINGER set. */
static int lingering_socket(int *peer)
{
	struct sockaddr_in addr;
	int lfd = listener(1, &addr);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(c >= 0);
	int small = 4096;
	CHECK(setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
	CHECK(connect(c, (struct sockaddr *)&addr, sizeof addr) == 0);
	int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	CHECK(s >= 0);
	CHECK(setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
	static char buf[65536];
	while (send(s, buf, sizeof buf, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		;
	CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
	struct linger lg = { 1, LINGER_S };
	CHECK(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
	close(lfd);
	*peer = c;
	return s;
}

struct next_read {
	int fd;
	struct lingering *l;
	int64_t deadline;
	ssize_t r;
	int err, closed;
};

static void next_read_main(void *arg)
{
	struct next_read *nr = arg;
	char c;
	nr->r = weft_read(nr->fd, &c, 1, nr->deadline);
	nr->err = errno;
	nr->closed = atomic_load(&nr->l->closed);
}

static bool linger_not_seen;	/* the scene did not come about */

static void lingering_close_then_next_file(void *arg)
{
	bool cancel = arg != NULL;
	int peer;
	struct lingering l = { .fd = lingering_socket(&peer) };
	CHECK(weft_wait(l.fd, WEFT_IN, 0) == -1 && errno == ETIMEDOUT);	/* registered */
	/* the closer on the other worker, which its close(2) then blocks */
	CHECK(weft_lock_thread() == 0);
	l.worker = weft_worker_id();
	weft_co *closer;
	for (;;) {
		atomic_store(&l.elsewhere, 0);
		closer = go(linger_closer, &l);
		while (!atomic_load(&l.elsewhere))
			;	/* busy, not yielding: the other worker steals it */
		if (atomic_load(&l.elsewhere) > 0)
			break;
		join(closer);
	}
	/* close(2) has freed the number (and lingers) */
	while (!atomic_load(&l.closing) || fcntl(l.fd, F_GETFD) >= 0)
		weft_yield();
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	if (p[1] == l.fd) {	/* the write end took the number: move it */
		int w = dup(p[1]);
		CHECK(w >= 0 && close(p[1]) == 0);
		p[1] = w;
	}
	if (p[0] != l.fd) {
		CHECK(dup2(p[0], l.fd) == l.fd);
		CHECK(close(p[0]) == 0);
	}
	int64_t t0 = weft_now();
	struct next_read nr = { .fd = l.fd, .l = &l, .deadline = cancel ? -1 : t0 + 20 * MS };
	if (cancel) {	/* a reader without deadline, cancelled once it is in the call */
		weft_co *co = go(next_read_main, &nr);
		weft_sleep(t0 + 20 * MS);
		CHECK(weft_cancel(co) == 0);
		join(co);
	} else {
		next_read_main(&nr);
	}
	fprintf(stderr, "weft_read on the number's next file: %zd errno %d after %.1f ms; "
			"the other file's close(2) %s\n", nr.r, nr.err, (double)(weft_now() - t0) / 1e6,
		nr.closed ? "had returned" : "still lingering");
	CHECK(nr.r == -1 && nr.err == (cancel ? ECANCELED : ETIMEDOUT));
	/* its deadline or cancel, not the other file's linger time; a close(2)
	 * that did not linger (valgrind's) leaves nothing to judge */
	linger_not_seen = nr.closed;
	char buf[4096];	/* the data acknowledged: close(2) returns */
	while (read(peer, buf, sizeof buf) > 0)
		;
	join(closer);
	CHECK(weft_unlock_thread() == 0);
	CHECK(weft_close(l.fd) == 0 && close(p[1]) == 0 && close(peer) == 0);
}

static void run_lingering(bool cancel)
{
	run(2, lingering_close_then_next_file, cancel ? "cancel" : NULL);
	if (linger_not_seen)
		cr_skip_test("the other file's close(2) returned before the call ended: it did "
			     "not linger here");
}

Test(io, a_call_on_the_next_file_keeps_its_deadline_while_a_close_lingers, .timeout = 120)
{
	run_lingering(false);
}

Test(io, a_call_on_the_next_file_can_be_cancelled_while_a_close_lingers, .timeout = 120)
{
	run_lingering(true);
}

/* ------------------------------------------------------ many waiters */

/*
 * Any number of coroutines wait on one direction of one fd: the first in
 * the slot, the others queued FIFO behind it.  One worker, so the order is
 * the spawn order: each waiter is spawned and runs until it parks before
 * the next (a yield lets it run; `parked` says it got to its call).
 */
enum { WAITERS = 4 };

struct waiter {
	int fd, events;		/* events 0: weft_read of one byte */
	int64_t deadline;
	int result, err;
	char got;
	unsigned parked;	/* atomic: about to call */
	unsigned *order;	/* shared: where finishing waiters take a number */
	int place;		/* the number this one took */
};

static void waiter_main(void *arg)
{
	struct waiter *w = arg;
	__atomic_store_n(&w->parked, 1, __ATOMIC_RELEASE);
	if (w->events)
		w->result = weft_wait(w->fd, w->events, w->deadline);
	else
		w->result = (int)weft_read(w->fd, &w->got, 1, w->deadline);
	w->err = errno;
	w->place = (int)__atomic_fetch_add(w->order, 1, __ATOMIC_RELAXED);
}

/* Spawns a waiter and lets it park (one worker: it runs on our yield and
 * parks before we run again). */
static weft_co *spawn_waiter(struct waiter *w)
{
	weft_co *co = go(waiter_main, w);
	while (!__atomic_load_n(&w->parked, __ATOMIC_ACQUIRE))
		weft_yield();
	return co;
}

static unsigned finished(struct waiter *w, int n)
{
	unsigned k = 0;
	for (int i = 0; i < n; i++)
		k += w[i].place >= 0;
	return k;
}

static void init_waiters(struct waiter *w, int n, int fd, unsigned *order)
{
	for (int i = 0; i < n; i++)
		w[i] = (struct waiter){ .fd = fd, .deadline = -1, .order = order, .place = -1 };
}

/* The scene of the tests below: up to WAITERS waiters on one socket of a
 * pair, taking numbers from `order` as they finish. */
struct queue {
	int sv[2];
	unsigned order;
	struct waiter w[WAITERS];
	weft_co *co[WAITERS];
};

/* n waiters (reads, no deadline) on a fresh pair's sv[0], not yet spawned:
 * the caller may change them first. */
static void queue_open(struct queue *q, int n)
{
	socket_pair(q->sv);
	q->order = 0;
	init_waiters(q->w, n, q->sv[0], &q->order);
}

/* Spawns the n waiters in order, each parked before the next. */
static void queue_spawn(struct queue *q, int n)
{
	for (int i = 0; i < n; i++)
		q->co[i] = spawn_waiter(&q->w[i]);
}

static void queue_join(struct queue *q, int n)
{
	for (int i = 0; i < n; i++)
		join(q->co[i]);
}

static void queue_close(struct queue *q)
{
	CHECK(weft_close(q->sv[0]) == 0 && weft_close(q->sv[1]) == 0);
}

/* Lets the worker harvest and run what it woke (it idles in epoll_wait
 * while we sleep); no assertion on the time. */
static void settle(void)
{
	CHECK(weft_sleep(weft_now() + 20 * MS) == 0);
}

static void fifo_readers(void *arg)
{
	(void)arg;
	struct queue q;
	queue_open(&q, WAITERS);
	queue_spawn(&q, WAITERS);
	CHECK(weft_wait(q.sv[0], WEFT_OUT, -1) == WEFT_OUT);	/* the other direction is free */
	/* one edge for all four bytes: each reader takes one and, not having
	 * ended in EAGAIN, passes the turn to the next */
	CHECK(weft_write(q.sv[1], "abcd", 4, -1) == 4);
	queue_join(&q, WAITERS);
	for (int i = 0; i < WAITERS; i++)
		CHECK(q.w[i].result == 1 && q.w[i].got == 'a' + i && q.w[i].place == i);
	queue_close(&q);
}

Test(io, readers_of_one_fd_queue_and_are_served_in_fifo_order)
{
	run(1, fifo_readers, NULL);
}

static uint64_t wakeups(void)
{
	return stats_now().total.wakeups;
}

static void one_wakes_one(void *arg)
{
	(void)arg;
	struct queue q;
	struct waiter *w = q.w;
	queue_open(&q, WAITERS);
	queue_spawn(&q, WAITERS);
	for (int i = 0; i < WAITERS; i++) {
		uint64_t before = wakeups(), naps = 1;
		CHECK(weft_write(q.sv[1], &"wxyz"[i], 1, -1) == 1);
		while (w[i].place < 0) {
			CHECK(weft_sleep(weft_now() + MS) == 0);
			naps++;
		}
		settle();	/* time for a herd, if there were one, to show */
		/* the readiness woke the head, which took the byte and passed
		 * the turn on (one more wake: that reader found EAGAIN and holds
		 * the slot now), and our sleeps ended: no other waiter woke */
		uint64_t woke = wakeups() - before;
		CHECK(woke <= 2 + naps);
		CHECK(finished(w, WAITERS) == (unsigned)i + 1);
		CHECK(w[i].place == i && w[i].result == 1 && w[i].got == "wxyz"[i]);
	}
	queue_join(&q, WAITERS);
	queue_close(&q);
}

Test(io, one_readiness_wakes_one_waiter)
{
	run(1, one_wakes_one, NULL);
}

/* weft_wait callers do not consume what they see: each passes the turn,
 * so a reader queued behind them gets the data and nobody sleeps while it
 * is there. */
static void waits_pass_the_turn(void *arg)
{
	(void)arg;
	struct queue q;
	struct waiter *w = q.w;
	queue_open(&q, 3);
	w[0].events = w[1].events = WEFT_IN;	/* two weft_waits, then a read */
	queue_spawn(&q, 3);
	CHECK(weft_write(q.sv[1], "q", 1, -1) == 1);
	queue_join(&q, 3);
	CHECK(w[0].result == WEFT_IN && w[1].result == WEFT_IN);
	CHECK(w[2].result == 1 && w[2].got == 'q');
	CHECK(w[0].place == 0 && w[1].place == 1 && w[2].place == 2);
	queue_close(&q);
}

Test(io, a_woken_waiter_that_does_not_consume_passes_the_turn)
{
	run(1, waits_pass_the_turn, NULL);
}

static void close_wakes_queued(void *arg)
{
	(void)arg;
	struct queue q;
	queue_open(&q, WAITERS);
	q.w[2].events = WEFT_IN;	/* a weft_wait among the readers */
	queue_spawn(&q, WAITERS);
	CHECK(weft_close(q.sv[0]) == 0);
	for (int i = 0; i < WAITERS; i++) {
		join(q.co[i]);
		CHECK(q.w[i].result == -1 && q.w[i].err == ECANCELED);
	}
	CHECK(finished(q.w, WAITERS) == WAITERS);
	CHECK(weft_close(q.sv[1]) == 0);
}

Test(io, close_wakes_every_queued_waiter_with_ecanceled)
{
	run(1, close_wakes_queued, NULL);
}

static void queued_timeouts(void *arg)
{
	(void)arg;
	struct queue q;
	struct waiter *w = q.w;
	weft_co **co = q.co;
	queue_open(&q, WAITERS);
	w[0].deadline = weft_now() + 50 * MS;	/* the slot's holder gives up */
	w[2].deadline = weft_now() + 50 * MS;	/* and one queued behind it */
	queue_spawn(&q, WAITERS);
	join(co[0]);
	join(co[2]);
	CHECK(w[0].result == -1 && w[0].err == ETIMEDOUT);
	CHECK(w[2].result == -1 && w[2].err == ETIMEDOUT);
	CHECK(weft_cancel(co[3]) == 0);	/* a cancel leaves the queue too */
	join(co[3]);
	CHECK(w[3].result == -1 && w[3].err == ECANCELED);
	/* the one left gets the turn the holder passed on leaving */
	CHECK(weft_write(q.sv[1], "k", 1, -1) == 1);
	join(co[1]);
	CHECK(w[1].result == 1 && w[1].got == 'k');
	/* and the fd works as before for new waiters */
	struct waiter more[2];
	init_waiters(more, 2, q.sv[0], &q.order);
	weft_co *mc[2] = { spawn_waiter(&more[0]), spawn_waiter(&more[1]) };
	CHECK(weft_write(q.sv[1], "mn", 2, -1) == 2);
	join(mc[0]);
	join(mc[1]);
	CHECK(more[0].got == 'm' && more[1].got == 'n');
	queue_close(&q);
}

Test(io, a_queued_waiter_timing_out_or_cancelled_leaves_the_others_working)
{
	run(1, queued_timeouts, NULL);
}

/* Several readers of one datagram socket on two workers: every datagram
 * reaches exactly one of them, and none is left unread (a reader asleep
 * while datagrams wait would leave the others to finish, or hang). */
enum { DGRAM_READERS = 4 };

struct dgram_share {
	int fd;
	unsigned n;		/* datagrams numbered 0..n-1, then one stop each */
	unsigned char *seen;	/* atomic per element: times received */
};

static void dgram_reader(void *arg)
{
	struct dgram_share *d = arg;
	for (;;) {
		unsigned v;
		CHECK(weft_read(d->fd, &v, sizeof v, -1) == (ssize_t)sizeof v);
		if (v == ~0u)
			return;
		CHECK(v < d->n);
		__atomic_fetch_add(&d->seen[v], 1, __ATOMIC_RELAXED);
	}
}

static void dgram_readers(void *arg)
{
	(void)arg;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0);
	struct dgram_share d = { .fd = sv[0], .n = scaled(20000, 5000, 1000) };
	d.seen = calloc(d.n, 1);
	CHECK(d.seen != NULL);
	weft_co *co[DGRAM_READERS];
	for (int i = 0; i < DGRAM_READERS; i++)
		co[i] = go(dgram_reader, &d);
	for (unsigned v = 0; v < d.n; v++) {
		CHECK(weft_write(sv[1], &v, sizeof v, -1) == (ssize_t)sizeof v);
		if (v % 64 == 0)
			weft_yield();
	}
	unsigned stop = ~0u;
	for (int i = 0; i < DGRAM_READERS; i++)
		CHECK(weft_write(sv[1], &stop, sizeof stop, -1) == (ssize_t)sizeof stop);
	for (int i = 0; i < DGRAM_READERS; i++)
		join(co[i]);
	for (unsigned v = 0; v < d.n; v++)
		CHECK(d.seen[v] == 1);
	free(d.seen);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(io, readers_sharing_a_datagram_socket_get_every_datagram_once, .timeout = 300)
{
	run(2, dgram_readers, NULL);
}

enum { ACCEPTORS = 64 };

struct acceptors {
	int lfd;
	int fd[ACCEPTORS];
};

struct acceptor_arg {
	struct acceptors *a;
	int i;
};

static void one_accept(void *arg)
{
	struct acceptor_arg *x = arg;
	x->a->fd[x->i] = weft_accept(x->a->lfd, NULL, NULL, -1);
	CHECK(x->a->fd[x->i] >= 0);
}

static void many_acceptors(void *arg)
{
	(void)arg;
	struct sockaddr_in addr;
	struct acceptors a = { .lfd = listener(ACCEPTORS, &addr) };
	struct acceptor_arg x[ACCEPTORS];
	weft_co *co[ACCEPTORS];
	for (int i = 0; i < ACCEPTORS; i++) {
		x[i] = (struct acceptor_arg){ &a, i };
		co[i] = go(one_accept, &x[i]);
	}
	int c[ACCEPTORS];
	for (int i = 0; i < ACCEPTORS; i++) {
		c[i] = tcp_socket();
		CHECK(weft_connect(c[i], (struct sockaddr *)&addr, sizeof addr, -1) == 0);
		if (i % 8 == 0)
			weft_yield();	/* let acceptors park among the arrivals */
	}
	for (int i = 0; i < ACCEPTORS; i++)
		join(co[i]);
	/* every connection accepted exactly once: 64 distinct open fds */
	for (int i = 0; i < ACCEPTORS; i++) {
		CHECK(fcntl(a.fd[i], F_GETFD) >= 0);
		for (int j = 0; j < i; j++)
			CHECK(a.fd[i] != a.fd[j]);
	}
	for (int i = 0; i < ACCEPTORS; i++)
		CHECK(weft_close(a.fd[i]) == 0 && weft_close(c[i]) == 0);
	CHECK(weft_close(a.lfd) == 0);
}

Test(io, many_acceptors_on_one_listener_all_get_connections, .timeout = 120)
{
	run(2, many_acceptors, NULL);
}

Test(io, many_acceptors_on_one_worker, .timeout = 120)
{
	run(1, many_acceptors, NULL);
}

static void write_epipe(void *arg)
{
	(void)arg;
	int sv[2], p[2];
	socket_pair(sv);
	CHECK(weft_close(sv[1]) == 0);
	CHECK(weft_write(sv[0], "x", 1, -1) == -1 && errno == EPIPE);
	CHECK(pipe(p) == 0);
	CHECK(weft_close(p[0]) == 0);
	CHECK(weft_write(p[1], "x", 1, -1) == -1 && errno == EPIPE);
	CHECK(weft_close(p[1]) == 0 && weft_close(sv[0]) == 0);
	/* a regular file: epoll cannot watch it, the calls just work */
	char path[] = "/tmp/weft-io-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && unlink(path) == 0);
	CHECK(weft_write(fd, "file", 4, -1) == 4);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	char b[8];
	CHECK(weft_read(fd, b, sizeof b, -1) == 4 && memcmp(b, "file", 4) == 0);
	CHECK(weft_read(fd, b, sizeof b, -1) == 0);
	CHECK(weft_wait(fd, WEFT_IN | WEFT_OUT, -1) == (WEFT_IN | WEFT_OUT));
	CHECK(weft_close(fd) == 0);
}

Test(io, write_to_a_closed_peer_is_epipe_without_sigpipe)
{
	signal(SIGPIPE, SIG_DFL);	/* a SIGPIPE would kill the test */
	run(2, write_epipe, NULL);
}

/* A short read on a stream socket lets the next read park first; that must
 * never miss data that came in between, and datagram sockets (where a short
 * read says nothing about what is queued) must not park at all. */
static void short_reads(void *arg)
{
	(void)arg;
	int st[2], dg[2];
	socket_pair(st);
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, dg) == 0);
	char b[64];
	for (int i = 0; i < 1000; i++) {
		CHECK(weft_write(st[1], "ab", 2, -1) == 2);
		CHECK(weft_read(st[0], b, sizeof b, -1) == 2);	/* short: drained */
		CHECK(weft_write(st[1], "c", 1, -1) == 1);	/* arrives before we park */
		CHECK(weft_read(st[0], b, sizeof b, weft_now() + 5000 * MS) == 1 && b[0] == 'c');
	}
	/* weft_wait drops remembered readiness: a read after it must not park */
	CHECK(weft_write(st[1], "ab", 2, -1) == 2);
	CHECK(weft_read(st[0], b, sizeof b, -1) == 2);
	CHECK(weft_write(st[1], "e", 1, -1) == 1);
	CHECK(weft_sleep(weft_now() + 2 * MS) == 0);	/* its edge is harvested: READY */
	CHECK(weft_wait(st[0], WEFT_IN, -1) == WEFT_IN);
	CHECK(weft_read(st[0], b, sizeof b, weft_now() + 5000 * MS) == 1 && b[0] == 'e');
	for (int i = 0; i < 3; i++)
		CHECK(weft_write(dg[1], "d", 1, -1) == 1);
	for (int i = 0; i < 3; i++)	/* each short; all three already queued */
		CHECK(weft_read(dg[0], b, sizeof b, weft_now() + 5000 * MS) == 1);
	CHECK(weft_close(st[0]) == 0 && weft_close(st[1]) == 0);
	CHECK(weft_close(dg[0]) == 0 && weft_close(dg[1]) == 0);
}

Test(io, short_reads_never_miss_data)
{
	run(2, short_reads, NULL);
}

/* ------------------------------------------------------ races */

/*
 * Each round: a reader parks with a deadline ~now, while one coroutine
 * writes a byte and another closes the fd, all at about the same moment, on
 * two workers.  Whatever wins, the reader returns exactly once, with a
 * result that matches: the byte, ETIMEDOUT, or ECANCELED (and never parks
 * on a closed fd, which would hang the test).
 */
struct race {
	int sv[2];
	unsigned started;	/* atomic: the reader is about to call weft_read */
	int64_t at;		/* when the writer and closer act */
	int result, err;
	char got;
};

/* Waits until the reader has started, then until its `at` (+ offset). */
static void spin_until_time(struct race *r, int64_t offset)
{
	while (!__atomic_load_n(&r->started, __ATOMIC_ACQUIRE))
		weft_yield();
	int64_t at = __atomic_load_n(&r->at, __ATOMIC_RELAXED) + offset;
	while (weft_now() < at)
		;
}

static void race_reader(void *arg)
{
	struct race *r = arg;
	char b = 0;
	int64_t at = weft_now() + 50000;
	__atomic_store_n(&r->at, at, __ATOMIC_RELAXED);
	__atomic_store_n(&r->started, 1, __ATOMIC_RELEASE);
	r->result = (int)weft_read(r->sv[0], &b, 1, at + (int64_t)(r->sv[0] % 3) * 20000);
	r->err = errno;
	r->got = b;
}

static void race_writer(void *arg)
{
	struct race *r = arg;
	spin_until_time(r, 0);
	ssize_t n = weft_write(r->sv[1], "!", 1, -1);
	CHECK(n == 1 || errno == EPIPE);	/* EPIPE: the closer came first */
}

static void race_closer(void *arg)
{
	struct race *r = arg;
	spin_until_time(r, 10000);
	CHECK(weft_close(r->sv[0]) == 0);
}

/* data, timeout, cancelled, closed before the call began (EBADF) */
static unsigned race_outcomes[4];

static void race_root(void *arg)
{
	unsigned rounds = *(unsigned *)arg;
	for (unsigned i = 0; i < rounds; i++) {
		struct race r = { .started = 0 };
		socket_pair(r.sv);
		weft_co *a = go(race_reader, &r), *b = go(race_writer, &r), *c = go(race_closer, &r);
		join(a);
		join(b);
		join(c);
		if (r.result == 1) {
			CHECK(r.got == '!');
			race_outcomes[0]++;
		} else {
			CHECK(r.result == -1);
			CHECK(r.err == ETIMEDOUT || r.err == ECANCELED || r.err == EBADF);
			race_outcomes[r.err == ETIMEDOUT ? 1 : r.err == ECANCELED ? 2 : 3]++;
		}
		CHECK(weft_close(r.sv[1]) == 0);
	}
}

Test(io, readiness_deadline_and_close_race, .timeout = 300)
{
	unsigned rounds = scaled(5000, 1000, 100);
	run(2, race_root, &rounds);
	cr_assert_eq(race_outcomes[0] + race_outcomes[1] + race_outcomes[2] + race_outcomes[3], rounds);
	fprintf(stderr, "race outcomes: %u data, %u timeout, %u cancelled, %u closed first\n",
		race_outcomes[0], race_outcomes[1], race_outcomes[2], race_outcomes[3]);
}

/* ------------------------------------------------------ sleeps */

struct sleeper {
	int64_t deadline, woke;
};

static void sleeper(void *arg)
{
	struct sleeper *s = arg;
	CHECK(weft_sleep(s->deadline) == 0);
	s->woke = weft_now();
}

static void many_sleeps(void *arg)
{
	unsigned n = *(unsigned *)arg;
	struct sleeper *s = calloc(n, sizeof *s);
	weft_co **co = calloc(n, sizeof *co);
	CHECK(s && co);
	int64_t base = weft_now() + 50 * MS;
	for (unsigned i = 0; i < n; i++) {
		s[i].deadline = base + (int64_t)(i % 97) * MS / 10;	/* spread over ~10 ms */
		co[i] = go(sleeper, &s[i]);
	}
	for (unsigned i = 0; i < n; i++)
		join(co[i]);
	for (unsigned i = 0; i < n; i++)
		CHECK(s[i].woke >= s[i].deadline);	/* none early */
	free(s);
	free(co);
}

Test(io, a_hundred_thousand_sleeps_all_wake_none_early, .timeout = 300)
{
	unsigned n = scaled(100000, 4000, 1000);
	run(2, many_sleeps, &n);
}

static void sleep_edges(void *arg)
{
	(void)arg;
	CHECK(weft_sleep(0) == 0);		/* past: at once */
	CHECK(weft_sleep(weft_now()) == 0);
	int64_t dl = weft_now() + 5 * MS;
	CHECK(weft_sleep(dl) == 0 && weft_now() >= dl);
}

Test(io, sleep_edges)
{
	run(1, sleep_edges, NULL);
}

/* ------------------------------------------------------ stuck worker */

/*
 * One coroutine registers a socket pair, then spins on the CPU without
 * yielding until the others are done.  Two other coroutines (stolen by the
 * other worker) ping-pong 200 messages over the pair.  The ping-pong must
 * finish while the spinner is still spinning, and without waiting for the
 * monitor at each message: the other worker, which sleeps between the
 * messages, must hold the shared epfd for as long as a worker is stuck, so
 * that readiness wakes it at once.  It used to hold it for one sleep per
 * monitor sample, so each message waited for a sample: the worker slept
 * deaf in its own epfd until the monitor woke it to take the role (~400 such
 * sleeps, and as many monitor wakeups, for the 200 round trips).  The test
 * counts those deaf sleeps, as the workers' sleeps less their polls (a
 * sleep in the shared epfd counts a poll; a poll at a turn only lowers the
 * figure: 366 with the one-sleep role, 0 without, a few below 0 on a loaded
 * machine), not monitor wakeups: those follow the ping-pong's wall time (a
 * sample per millisecond), which TSan on a loaded machine once stretched
 * past the bound with the hand-off working (131 for 200 round trips).
 */
struct stuck {
	int sv[2];
	unsigned done;		/* atomic: ping-pong finished */
	unsigned spinning;	/* atomic */
	int64_t spin_until;
	bool finished_during_spin;
	int64_t deaf_sleeps;	/* during the ping-pong: sleeps less polls */
};

enum { PINGS = 200 };
/* Under valgrind, which runs one thread at a time, each system call of the
 * ping-pong's worker can wait for the spinner's turn to end: 200 round trips
 * alone took the whole 30 s spin there, so it makes 20. */
static int pings(void)
{
	return RUNNING_ON_VALGRIND ? 20 : PINGS;
}
/* How long a spinner spins at most.  It stops as soon as the other side is
 * done, so the bound only needs to be generous: under valgrind on a loaded
 * 2-core machine the 200 round trips once took more than 5 s. */
static const int64_t SPIN_BOUND = 30000 * MS;

static void pinger(void *arg)
{
	struct stuck *s = arg;
	char b;
	weft_worker_stats before = stats_now().total;
	for (int i = 0; i < pings(); i++) {
		CHECK(weft_write(s->sv[0], "p", 1, -1) == 1);
		CHECK(weft_read(s->sv[0], &b, 1, -1) == 1 && b == 'q');
	}
	weft_worker_stats after = stats_now().total;
	/* The spinner's worker neither sleeps nor polls; the other one polls
	 * at every sleep in the shared epfd, and at its turns. */
	s->deaf_sleeps = (int64_t)(after.sleeps - before.sleeps) - (int64_t)(after.polls - before.polls);
	s->finished_during_spin = weft_now() < s->spin_until;
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
}

static void ponger(void *arg)
{
	struct stuck *s = arg;
	char b;
	for (int i = 0; i < pings(); i++) {
		CHECK(weft_read(s->sv[1], &b, 1, -1) == 1 && b == 'p');
		CHECK(weft_write(s->sv[1], "q", 1, -1) == 1);
	}
}

static void spinner(void *arg)
{
	struct stuck *s = arg;
	/* register both ends in this worker's loop */
	CHECK(weft_wait(s->sv[0], WEFT_OUT, -1) == WEFT_OUT);
	CHECK(weft_wait(s->sv[1], WEFT_OUT, -1) == WEFT_OUT);
	s->spin_until = weft_now() + SPIN_BOUND;
	__atomic_store_n(&s->spinning, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) && weft_now() < s->spin_until)
		;
}

static void stuck_root(void *arg)
{
	struct stuck *s = arg;
	socket_pair(s->sv);
	weft_co *sp = go(spinner, s);
	while (!__atomic_load_n(&s->spinning, __ATOMIC_ACQUIRE))
		CHECK(weft_sleep(weft_now() + MS) == 0);
	/* the spinner's worker is busy: these run on the other one */
	weft_co *a = go(pinger, s), *b = go(ponger, s);
	join(a);
	join(b);
	join(sp);
	CHECK(weft_close(s->sv[0]) == 0 && weft_close(s->sv[1]) == 0);
}

Test(io, a_stuck_worker_does_not_starve_its_fds, .timeout = 90)
{
	struct stuck s = { .done = 0 };
	run(2, stuck_root, &s);
	cr_assert(s.finished_during_spin, "the ping-pong waited for the stuck worker");
	cr_assert_lt(s.deaf_sleeps, pings() / 2, "%lld sleeps outside the shared epfd for %d round trips",
		     (long long)s.deaf_sleeps, pings());
}

/* The same for a deadline: a sleeper whose timer is in the stuck worker's
 * heap wakes while that worker spins.  The sleeper runs first on the
 * spinner's worker unless the other worker steals it first.  A round proves
 * something only if both ran on one worker and the spin began before the
 * sleeper's deadline (on a loaded machine the spinner can be descheduled for
 * longer than the sleep); other rounds are repeated.  A starved timer would
 * fire only once the spin ends, at spin_until. */
struct stuck_timer {
	unsigned done;		/* atomic: the sleeper woke */
	int victim_worker, spinner_worker;
	int64_t deadline, woke_at, spin_began, spin_until;
	int64_t quiet_ns;	/* switching busily first, for so long */
};

static void timer_victim(void *arg)
{
	struct stuck_timer *s = arg;
	s->victim_worker = weft_worker_id();
	s->deadline = weft_now() + 20 * MS;
	CHECK(weft_sleep(s->deadline) == 0);	/* parks in this worker's heap */
	s->woke_at = weft_now();
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
}

static void timer_spinner(void *arg)
{
	struct stuck_timer *s = arg;
	for (int64_t end = weft_now() + s->quiet_ns; weft_now() < end;)
		weft_yield();
	weft_co *v = go(timer_victim, s);
	weft_yield();	/* the victim (deque bottom) runs before we resume */
	s->spinner_worker = weft_worker_id();
	s->spin_began = weft_now();
	s->spin_until = s->spin_began + SPIN_BOUND;
	while (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) && weft_now() < s->spin_until)
		;
	join(v);
}

static void stuck_timer_rounds(int64_t quiet_ns)
{
	int valid = 0;
	for (int round = 0; round < 20 && valid < 3; round++) {
		struct stuck_timer s = { .quiet_ns = quiet_ns };
		run(2, timer_spinner, &s);
		if (s.victim_worker != s.spinner_worker || s.spin_began >= s.deadline)
			continue;
		valid++;
		cr_assert_lt(s.woke_at, s.spin_until, "the sleeper waited for the stuck worker");
	}
	cr_assert_gt(valid, 0, "no round had the sleeper parked on the spinning worker");
}

Test(io, a_stuck_worker_does_not_starve_its_timers, .timeout = 120)
{
	stuck_timer_rounds(0);
}

/* The same after 200 ms in which the monitor's samples found nothing to do,
 * so that it has backed off to its longest period (monitor.c): the stuck
 * worker is found all the same, one or two long periods later. */
Test(io, a_backed_off_monitor_still_serves_a_stuck_worker, .timeout = 120)
{
	stuck_timer_rounds(200 * MS);
}

/* ------------------------------------------------------ EMFILE */

/* Counts accept4 calls that failed with EMFILE: interposed on libc's. */
static unsigned long emfile_accepts;

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int r = (int)syscall(SYS_accept4, fd, addr, len, flags);
	if (r < 0 && errno == EMFILE)
		__atomic_fetch_add(&emfile_accepts, 1, __ATOMIC_RELAXED);
	return r;
}

struct emfile {
	struct sockaddr_in addr;
	int lfd;
	int hogs[64];
	int nhogs;
	unsigned accepted;	/* atomic */
};

static void emfile_acceptor(void *arg)
{
	struct emfile *t = arg;
	for (;;) {
		int c = weft_accept(t->lfd, NULL, NULL, -1);
		CHECK(c >= 0);
		__atomic_fetch_add(&t->accepted, 1, __ATOMIC_RELEASE);
		CHECK(weft_detach(go(echo_conn, (void *)(intptr_t)c)) == 0);
		if (__atomic_load_n(&t->accepted, __ATOMIC_ACQUIRE) == 3)
			return;
	}
}

/* True when some fd number below the soft limit is not installed. */
static bool fd_table_has_hole(void)
{
	struct rlimit r;
	CHECK(getrlimit(RLIMIT_NOFILE, &r) == 0);
	for (int fd = 0; fd < (int)r.rlim_cur; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
			return true;
	return false;
}

/*
 * Opens /dev/null until EMFILE, until every fd number is installed.  One pass
 * is not enough: the kernel's accept4 reserves a number while it runs, even
 * when it ends in EAGAIN, so an acceptor woken at that moment makes open()
 * fail with a number that comes free a moment later (the test failed so once
 * under TSan; a thread looping on a nonblocking accept4 left a hole after
 * 36% of single passes).  fcntl sees installed fds only, so a full table is
 * one without holes.
 */
static void fill_fd_table(struct emfile *t)
{
	for (;;) {
		while (t->nhogs < 64 &&
		       (t->hogs[t->nhogs] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
			t->nhogs++;
		CHECK(t->nhogs < 64 && errno == EMFILE);
		if (!fd_table_has_hole())
			return;
		CHECK(weft_sleep(weft_now() + MS) == 0);
	}
}

static void emfile_root(void *arg)
{
	struct emfile *t = arg;
	t->lfd = listener(64, &t->addr);
	weft_co *acc = go(emfile_acceptor, t);
	/* an established connection, served throughout */
	int a = tcp_socket();
	CHECK(weft_connect(a, (struct sockaddr *)&t->addr, sizeof t->addr, -1) == 0);
	while (__atomic_load_n(&t->accepted, __ATOMIC_ACQUIRE) < 1)
		weft_sleep(weft_now() + MS);
	/* use up every fd, then connect once more (the kernel queues it; the
	 * socket was made before the last hog) */
	int b = tcp_socket();
	fill_fd_table(t);
	CHECK(weft_connect(b, (struct sockaddr *)&t->addr, sizeof t->addr, -1) == 0);
	/* 300 ms of EMFILE: the acceptor backs off, the old connection works */
	int64_t until = weft_now() + 300 * MS;
	unsigned long before = __atomic_load_n(&emfile_accepts, __ATOMIC_RELAXED);
	char buf[4];
	while (weft_now() < until) {
		CHECK(weft_write(a, "ping", 4, -1) == 4);
		CHECK(weft_read(a, buf, 4, -1) == 4 && memcmp(buf, "ping", 4) == 0);
		CHECK(weft_sleep(weft_now() + 10 * MS) == 0);
	}
	unsigned long failed = __atomic_load_n(&emfile_accepts, __ATOMIC_RELAXED) - before;
	CHECK(failed >= 1);		/* it did hit EMFILE */
	CHECK(failed < 50);		/* and backed off (1 ms doubling: ~8 tries) */
	CHECK(__atomic_load_n(&t->accepted, __ATOMIC_ACQUIRE) == 1);
	/* free fds: the pending connection is accepted, and a new one too */
	for (int i = 0; i < t->nhogs; i++)
		close(t->hogs[i]);
	CHECK(weft_write(b, "more", 4, -1) == 4);
	CHECK(weft_read(b, buf, 4, -1) == 4 && memcmp(buf, "more", 4) == 0);
	int c = tcp_socket();
	CHECK(weft_connect(c, (struct sockaddr *)&t->addr, sizeof t->addr, -1) == 0);
	join(acc);
	CHECK(weft_close(a) == 0 && weft_close(b) == 0 && weft_close(c) == 0);
	CHECK(weft_close(t->lfd) == 0);
}

Test(io, accept_survives_emfile_then_recovers, .timeout = 60)
{
	/* Valgrind only emulates RLIMIT_NOFILE: the kernel's accept4 succeeds,
	 * then valgrind closes the new fd and reports EMFILE, which drops the
	 * pending connection this test needs. */
	if (RUNNING_ON_VALGRIND)
		cr_skip_test("valgrind's own fds answer EMFILE before the kernel's limit");
	/* A forked child with a low fd limit, so the rest of the suite keeps
	 * its fds. */
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct rlimit r = { 64, 64 };
		getrlimit(RLIMIT_NOFILE, &r);
		r.rlim_cur = 64;
		if (setrlimit(RLIMIT_NOFILE, &r) != 0)
			_exit(3);
		struct emfile t = { .lfd = -1 };
		_exit(weft_main(emfile_root, &t, &WEFT_CONFIG(.workers = 2)) == 0 ? 0 : 4);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
}

/* Data and the peer's FIN arriving before one harvest make one event; the
 * short read that takes the data must not make the next read wait for an
 * edge that will never come (found by test/soak: CLOSE-WAIT connections
 * whose readers never woke). */
struct eof_reader {
	int fd;
	ssize_t first, second;
	int err;
};

static void eof_reader_main(void *arg)
{
	struct eof_reader *r = arg;
	char buf[64];
	r->first = weft_read(r->fd, buf, sizeof buf, -1);
	r->second = weft_read(r->fd, buf, sizeof buf, weft_now() + 2000 * MS);
	r->err = errno;
}

static void data_and_fin_main(void *unused)
{
	(void)unused;
	for (int round = 0; round < 20; round++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
		struct eof_reader r = { .fd = sv[0] };
		weft_co *reader = go(eof_reader_main, &r);
		CHECK(weft_sleep(weft_now() + MS) == 0);	/* it parks in its first read */
		/* both before the worker polls again: one event, IN | RDHUP */
		CHECK(write(sv[1], "abc", 3) == 3 && shutdown(sv[1], SHUT_WR) == 0);
		join(reader);
		CHECK(r.first == 3);
		CHECK(r.second == 0);	/* end of file, not ETIMEDOUT */
		CHECK(weft_close(sv[0]) == 0 && close(sv[1]) == 0);
	}
}

Test(io, end_of_file_in_the_same_event_as_data_is_seen)
{
	run(1, data_and_fin_main, NULL);
}

/* ------------------------------------------------------ direct system calls */

#if !SANITIZED && (defined(__x86_64__) || defined(__aarch64__))
/*
 * weft's read and send reach the kernel directly (lib/sys.h), not through
 * libc's cancellation-point wrappers, and so not through whatever interposes
 * them either.  These stand-ins for libc's read and send (the executable's
 * definitions win over libc's for the whole process) count the calls that
 * reach them on the watched fd.
 */
static atomic_int watched_fd = -1;
static atomic_uint interposed_calls;

ssize_t read(int fd, void *buf, size_t len)
{
	if (fd == atomic_load(&watched_fd))
		atomic_fetch_add(&interposed_calls, 1);
	return syscall(SYS_read, fd, buf, len);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	if (fd == atomic_load(&watched_fd))
		atomic_fetch_add(&interposed_calls, 1);
	return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

/* epoll_wait calls made by one thread (the worker under test). */
static atomic_long counted_tid = -1;
static atomic_uint epoll_waits;

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	if (syscall(SYS_gettid) == atomic_load(&counted_tid))
		atomic_fetch_add(&epoll_waits, 1);
	return (int)syscall(SYS_epoll_pwait, epfd, ev, max, timeout, NULL, 8);
}

static void direct_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	atomic_store(&watched_fd, sv[0]);
	char b[4] = { 0 };
	CHECK(weft_write(sv[0], "ping", 4, -1) == 4);
	CHECK(recv(sv[1], b, 4, MSG_WAITALL) == 4 && memcmp(b, "ping", 4) == 0);
	CHECK(write(sv[1], "pong", 4) == 4);
	CHECK(weft_read(sv[0], b, 4, -1) == 4 && memcmp(b, "pong", 4) == 0);
	atomic_store(&watched_fd, -1);
	CHECK(weft_close(sv[0]) == 0 && close(sv[1]) == 0);
}

Test(io, read_and_send_bypass_libc_and_its_interposers)
{
	run(1, direct_main, NULL);
	cr_assert_eq(atomic_load(&interposed_calls), 0, "weft's I/O went through libc's read or send");
}

/* poll(2) calls that name the watched fd (weft_wait's exact form makes one
 * before it parks). */
static atomic_uint watched_polls;

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	for (nfds_t i = 0; i < n; i++)
		if (fds[i].fd == atomic_load(&watched_fd))
			atomic_fetch_add(&watched_polls, 1);
	struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
	return (int)syscall(SYS_ppoll, fds, n, timeout < 0 ? NULL : &ts, NULL, 8);
}

/* Reads what is there and then the caller's own EAGAIN, as a library's
 * non-blocking read does before it waits. */
static void drain(int fd)
{
	char b[16];
	while (recv(fd, b, sizeof b, MSG_DONTWAIT) > 0)
		;
	CHECK(errno == EAGAIN);
}

static void after_eagain_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	atomic_store(&watched_fd, sv[0]);
	int in = WEFT_IN | WEFT_AFTER_EAGAIN;
	/* parks until a write 20 ms later */
	drain(sv[0]);
	weft_co *w = go(write_later, &sv[1]);
	CHECK(weft_wait(sv[0], in, weft_now() + 5000 * MS) == WEFT_IN);
	CHECK(weft_join(w) == 0);
	/* readiness between the caller's EAGAIN and its wait is not lost */
	drain(sv[0]);
	CHECK(write(sv[1], "now", 3) == 3);
	CHECK(weft_wait(sv[0], in, weft_now() + 5000 * MS) == WEFT_IN);
	/* the deadline */
	drain(sv[0]);
	CHECK(weft_wait(sv[0], in, weft_now() + 10 * MS) == -1 && errno == ETIMEDOUT);
	CHECK(atomic_load(&watched_polls) == 0);
	/* the exact form polls first, and the stand-in sees it */
	CHECK(weft_wait(sv[0], WEFT_OUT, -1) == WEFT_OUT);
	CHECK(atomic_load(&watched_polls) == 1);
	atomic_store(&watched_fd, -1);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(io, wait_after_eagain_parks_without_a_poll)
{
	run(1, after_eagain_main, NULL);
}

/*
 * A worker that runs out of work sleeps in an epoll_wait that harvests what
 * wakes it (returning at once when something is pending): one call per
 * sleep.  It used to harvest once without blocking first, then sleep on a
 * second epoll instance nesting the first, then harvest the first: three.
 * A reader on one worker parks ROUNDS times and a plain thread wakes it
 * each time with one byte, a while later.
 */
enum { SLEEP_ROUNDS = 40 };

struct waker_run {
	int fd, peer;
	atomic_int started;	/* rounds the reader has started */
};

static uint64_t worker_sleeps;	/* the worker's sleeps while counted */

static void napping_reader(void *arg)
{
	struct waker_run *s = arg;
	uint64_t sleeps = stats_now().total.sleeps;
	atomic_store(&counted_tid, syscall(SYS_gettid));	/* one worker: its thread */
	for (int i = 0; i < SLEEP_ROUNDS; i++) {
		char b;
		atomic_store(&s->started, i + 1);
		CHECK(weft_read(s->fd, &b, 1, -1) == 1);
	}
	atomic_store(&counted_tid, -1);
	worker_sleeps = stats_now().total.sleeps - sleeps;
}

static void *byte_writer(void *arg)
{
	struct waker_run *s = arg;
	for (int i = 0; i < SLEEP_ROUNDS; i++) {
		while (atomic_load(&s->started) <= i)
			usleep(100);
		/* the reader has started round i: its worker's next blocking
		 * epoll_wait is this round's sleep */
		int64_t give_up = weft_now() + slack(10000 * MS);
		while (!thread_in_epoll_wait(atomic_load(&counted_tid), NULL)) {
			CHECK(weft_now() < give_up);
			usleep(50);
		}
		CHECK(write(s->peer, "x", 1) == 1);
	}
	return NULL;
}

static void sleeps_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	struct waker_run s = { .fd = sv[0], .peer = sv[1] };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, byte_writer, &s) == 0);
	join(go(napping_reader, &s));
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(weft_close(sv[0]) == 0 && close(sv[1]) == 0);
}

Test(io, a_sleep_costs_one_epoll_wait_which_harvests)
{
	atomic_store(&epoll_waits, 0);
	run(1, sleeps_main, NULL);
	unsigned n = atomic_load(&epoll_waits);
	unsigned sleeps = (unsigned)worker_sleeps;
	/* each byte is written once the worker sleeps: a sleep per round at
	 * least (more if it woke for nothing) */
	cr_assert_geq(sleeps, SLEEP_ROUNDS, "the scene did not happen: %u sleeps in %d rounds", sleeps,
		      SLEEP_ROUNDS);
	/* 1 per sleep (and the harvest that registers nothing at the start) */
	cr_assert_leq(n, sleeps + 2, "%u epoll_wait calls for %u sleeps", n, sleeps);
	cr_assert_geq(n, sleeps, "%u epoll_wait calls for %u sleeps", n, sleeps);
}
#else
/* The tests above define libc's functions, which a sanitizer's
 * interceptors define too; they say so rather than vanish. */
static void interposing_skipped(void)
{
	cr_skip_test("interposes libc's calls: not under a sanitizer, x86-64 and AArch64 only");
}

Test(io, read_and_send_bypass_libc_and_its_interposers)
{
	interposing_skipped();
}

Test(io, wait_after_eagain_parks_without_a_poll)
{
	interposing_skipped();
}

Test(io, a_sleep_costs_one_epoll_wait_which_harvests)
{
	interposing_skipped();
}
#endif

/* ------------------------------------------------------ harvest turns */

/*
 * A harvest takes one batch (WEFT__LOOP_BATCH events), and a worker that
 * runs dry after a full batch harvests the next one itself rather than go
 * to sleep; a busy worker does not harvest at its fairness turns (every 61
 * dispatches, at most every 50 us) while its ready FIFO still holds
 * coroutines the last harvest woke: what it would bring would queue behind
 * them.  READERS readers park on one byte each; the bytes all come at once;
 * each woken reader then works for 100 us.  So the harvests are one per
 * batch (the last one short) and the sleeps' own: a harvest of all of them
 * at once (1 or 2 harvests) had evicted from the cache what it touched for
 * the first readers by the time the last ran (loop.c); harvests at the
 * turns would add 16; and the worker sleeps once or twice, not once per
 * batch.
 */
enum { READERS = 1000, HARVEST_BATCH = 64 /* lib/loop.h: WEFT__LOOP_BATCH */ };

struct turn_reader {
	int fd;
	weft_co *co;
};

static void turn_reader_main(void *arg)
{
	struct turn_reader *r = arg;
	char b;
	CHECK(weft_read(r->fd, &b, 1, -1) == 1);
	int64_t until = weft_now() + 100 * 1000;
	while (weft_now() < until)
		;
}

struct harvests {
	uint64_t polls, sleeps;
};

static struct harvests harvests_now(void)
{
	weft_stats st = stats_now();
	return (struct harvests){ st.total.polls, st.total.sleeps };
}

static void turns_main(void *arg)
{
	struct harvests *h = arg;
	static struct turn_reader r[READERS];
	static int peer[READERS];
	for (int i = 0; i < READERS; i++) {
		int sv[2];
		socket_pair(sv);
		r[i].fd = sv[0];
		peer[i] = sv[1];
		r[i].co = go(turn_reader_main, &r[i]);
	}
	/* Every reader parks: a yielder runs after every other runnable
	 * coroutine of its worker (a sleep of 20 ms was not enough under
	 * valgrind beside another suite, once the sleeper's wake no longer
	 * waited behind the readers' first runs: worker.c, ready rounds). */
	weft_yield();
	struct harvests before = harvests_now();
	for (int i = 0; i < READERS; i++)
		CHECK(write(peer[i], "x", 1) == 1);
	for (int i = 0; i < READERS; i++)
		join(r[i].co);
	struct harvests after = harvests_now();
	h->polls = after.polls - before.polls;
	h->sleeps = after.sleeps - before.sleeps;
	for (int i = 0; i < READERS; i++)
		CHECK(weft_close(r[i].fd) == 0 && close(peer[i]) == 0);
}

/* With sockets on the rings (WEFT_IO=uring, WEFT_URING_SOCKETS=1, here on
 * one worker) the readers wait on RECVs, not readiness: their wakes come
 * from reaps, and a reap drains the whole CQ (it must: the eventfd is an
 * edge), so there are no batches to count. */
static bool sockets_on_rings(void)
{
	const char *io = getenv("WEFT_IO"), *sockets = getenv("WEFT_URING_SOCKETS");
	return io && strcmp(io, "uring") == 0 && sockets && strcmp(sockets, "1") == 0;
}

Test(io, a_worker_harvests_a_batch_at_a_time_and_not_at_turns, .timeout = 120)
{
	if (sockets_on_rings())
		cr_skip_test("sockets on the rings: a reap takes the whole CQ, not a harvest's batch");
	raise_fd_limit();
	struct harvests h = { 0, 0 };
	run(1, turns_main, &h);
	unsigned batches = READERS / HARVEST_BATCH;
	cr_assert_geq(h.polls, batches, "%llu harvests to serve %d readers", (unsigned long long)h.polls, READERS);
	cr_assert_leq(h.polls, batches + 8, "%llu harvests to serve %d readers", (unsigned long long)h.polls, READERS);
	cr_assert_leq(h.sleeps, 3, "%llu sleeps while %d readers were ready", (unsigned long long)h.sleeps, READERS);
}

/*
 * A busy worker harvests readiness within a bound however busy its ready
 * FIFO stays (docs/design.md, "Busy workers and stuck workers").  On one
 * worker, SLEEPERS coroutines sleep POLL_NS (50 us) in a loop beside a
 * yielder, so that the deadlines refill the ready FIFO at every turn and
 * the worker never sleeps; a reader waits on a pipe.  Once the load runs,
 * a sleeper writes the pipe's byte; the wakes of sleepers between that
 * write and the read's return are counted (dispatches, not time).  The
 * harvest comes at the first turn POLL_NS after the last one (its wakes
 * were none: the load is timers), and in POLL_NS a sleeper of POLL_NS
 * runs at most twice; the reader then queues behind at most every other
 * coroutine once.  So 3 wakes per sleeper and a turn's dispatches; the
 * bound is 4.  A worker that harvested only at turns where its ready FIFO
 * was empty served the read once the load was over: every sleeper's
 * remaining rounds.
 */
enum { SLEEPERS = 1000, SLEEPER_ROUNDS = 20, WRITE_AFTER = 2 * SLEEPERS };

struct timer_load {
	int p[2];
	weft_co *reader;
	atomic_ulong wakes;		/* the sleepers' wakes so far */
	unsigned long at_write, at_read;
	atomic_int written, read_done;
	atomic_int sleepers_left;
	bool locked;			/* the reader is locked to its worker */
};

static void load_sleeper(void *arg)
{
	struct timer_load *t = arg;
	for (int i = 0; i < SLEEPER_ROUNDS && !atomic_load(&t->read_done); i++) {
		CHECK(weft_sleep(weft_now() + 50 * 1000) == 0);
		unsigned long n = atomic_fetch_add(&t->wakes, 1) + 1;
		if (n >= WRITE_AFTER && !atomic_exchange(&t->written, 1)) {
			CHECK(write(t->p[1], "x", 1) == 1);
			t->at_write = n;
		}
	}
	atomic_fetch_sub(&t->sleepers_left, 1);
}

static void load_reader(void *arg)
{
	struct timer_load *t = arg;
	char c;
	if (t->locked)
		CHECK(weft_lock_thread() == 0);
	CHECK(weft_read(t->p[0], &c, 1, -1) == 1);
	t->at_read = atomic_load(&t->wakes);
	atomic_store(&t->read_done, 1);
	if (t->locked)
		CHECK(weft_unlock_thread() == 0);
}

static void load_yielder(void *arg)
{
	struct timer_load *t = arg;
	while (atomic_load(&t->sleepers_left) > 0)
		weft_yield();
}

static void timer_load_main(void *arg)
{
	struct timer_load *t = arg;
	static weft_co *co[SLEEPERS];
	CHECK(pipe2(t->p, O_CLOEXEC) == 0);
	t->reader = go(load_reader, t);
	weft_yield();	/* the reader parks on the pipe first */
	atomic_store(&t->sleepers_left, SLEEPERS);
	weft_co *yielder = go(load_yielder, t);
	for (int i = 0; i < SLEEPERS; i++)
		co[i] = go(load_sleeper, t);
	join(t->reader);
	for (int i = 0; i < SLEEPERS; i++)
		join(co[i]);
	join(yielder);
	CHECK(weft_close(t->p[0]) == 0 && close(t->p[1]) == 0);
}

static void timer_load_run(bool locked)
{
	static struct timer_load t;
	memset(&t, 0, sizeof t);
	t.locked = locked;
	run(1, timer_load_main, &t);
	cr_assert(atomic_load(&t.written), "the load ended before the write");
	unsigned long waited = t.at_read - t.at_write;
	cr_assert_leq(waited, 4ul * SLEEPERS,
		      "%lu sleepers' wakes between the byte's write and its read (%d sleepers)", waited,
		      SLEEPERS);
}

Test(io, a_busy_ready_fifo_does_not_keep_readiness_unharvested, .timeout = 120)
{
	timer_load_run(false);
}

/* The same with the reader locked to its worker (weft_lock_thread): its
 * wake goes to the pinned FIFO, which a round pops for what it held at the
 * turn, after the ready FIFO's share.  The pinned FIFO used to be popped
 * only once the ready FIFO was empty, which the deadlines never let
 * happen: the read returned once the load was over. */
Test(io, a_busy_ready_fifo_does_not_keep_a_locked_reader_waiting, .timeout = 120)
{
	timer_load_run(true);
}

/* ------------------------------------------------------ fairness */

/*
 * A thousand connections in a closed loop are served alike (issue 25; the
 * suite's "slowest connection" column).  Echo coroutines serve socket
 * pairs; a plain thread (weft_offload's) drives them, sending one message
 * on each and the next as soon as its echo is back.  Once every connection
 * has had an echo (every server has started), it counts the echoes for a
 * window of at least a second that averages at least `mean` per
 * connection, then stops sending and waits for the echoes still in flight.
 *
 * Two failures.  A lost wake: the echo in flight never comes while the
 * driver waits (10 s), since nothing but the end of file would wake the
 * server (one event dropped in the harvest, as an experiment: the slowest
 * got 5 echoes against a mean of 40, at both worker counts).  A connection
 * left behind while the others are served: the slowest falls below half
 * the mean.  The order of the wakes alone does not starve anyone here: with
 * them run newest first (an experiment too) the slowest still got 26-34 of
 * 40.  The window is timed, not counted, because a worker thread that the
 * host takes off its CPU holds its current coroutine (no scheduler can move
 * a coroutine off the stack it runs on): under AddressSanitizer beside
 * another suite, 450 ms windows saw echo coroutines run 100 ms "without
 * switching" (stall reports) and gaps of up to 100 ms between one
 * connection's echoes; CI once had its slowest at 15 of 30 in a run that
 * reported an echo coroutine stalled for 100 ms, when windows were counted
 * (30 echoes each, ~0.3 s).  A second makes half a window far beyond
 * those.  The message gives the slowest connection's longest wait (the
 * one still open at the window's end included) and the stalls reported.
 * Both worker counts: at 2 the batches are shared through steals and
 * whichever worker holds the poller.  Not under ThreadSanitizer, whose
 * timing says nothing of fairness: there single dispatches lasted up to
 * 327 ms (stall reports), the slowest connection at 2 workers got 9-10
 * echoes of a mean of 30, and at 1 worker the run took over 300 s, its
 * worker at 100% CPU, where 2 workers took 2 s: perf put half of that
 * worker's samples in ThreadSanitizer's vector clocks (ThreadClock's
 * acquire and release), whose entries grow with the fibers it tracks, one
 * per coroutine.
 */
enum { FAIR_MSG = 8 };
#define FAIR_WINDOW (1000 * MS)	/* the shortest window counted */
#define FAIR_DRAIN (10 * 1000 * MS)	/* the longest wait for an echo */

struct fair {
	unsigned conns, mean;	/* connections; counted echoes per connection, at least */
	int *peer;		/* the driver's ends */
	unsigned *echoes;	/* per connection, counted */
	unsigned *got;		/* bytes of the echo in flight received so far */
	int64_t *last;		/* per connection: when its last echo came */
	int64_t *wait;		/* per connection: its longest wait for an echo in the window */
	uint64_t total;		/* echoes counted so far */
	int64_t start, end;	/* the window (weft_now()) */
	uint64_t stalls;	/* stalls reported in the window */
};

static void fair_send(int fd)
{
	CHECK(write(fd, "01234567", FAIR_MSG) == FAIR_MSG);
}

/* Reads what connection i's echo has ready: true once the echo is whole. */
static bool fair_read(struct fair *f, unsigned i)
{
	char b[FAIR_MSG];
	ssize_t r = read(f->peer[i], b, FAIR_MSG - f->got[i]);
	CHECK(r > 0);
	f->got[i] += (unsigned)r;
	if (f->got[i] < FAIR_MSG)
		return false;
	f->got[i] = 0;
	return true;
}

/* How long connection i has waited for an echo in the window at now. */
static int64_t fair_waited(const struct fair *f, unsigned i, int64_t now)
{
	return now - (f->last[i] > f->start ? f->last[i] : f->start);
}

/* Counts connection i's echo, which came at now. */
static void fair_count(struct fair *f, unsigned i, int64_t now)
{
	int64_t waited = fair_waited(f, i, now);
	if (waited > f->wait[i])
		f->wait[i] = waited;
	f->last[i] = now;
	f->echoes[i]++;
	f->total++;
}

/* Up to 256 events from ep; fails after FAIR_DRAIN without one. */
static int fair_wait(int ep, struct epoll_event *ev)
{
	for (;;) {
		int n = epoll_wait(ep, ev, 256, FAIR_DRAIN / MS);
		if (n < 0 && errno == EINTR)
			continue;	/* (a sanitizer's signal) */
		CHECK(n > 0);	/* no echo for FAIR_DRAIN: a connection lost its wake */
		return n;
	}
}

static void fair_start(struct fair *f, int64_t now)
{
	memset(f->echoes, 0, f->conns * sizeof *f->echoes);
	f->start = now;
	f->stalls = stats_now().total.stalls;
}

static bool fair_done(const struct fair *f, int64_t now)
{
	return f->start && f->total >= (uint64_t)f->conns * f->mean && now - f->start >= FAIR_WINDOW;
}

/* The closed loop, until the window is done. */
static void fair_loop(struct fair *f, int ep)
{
	unsigned started = 0;	/* connections echoed once: counting starts after */
	struct epoll_event ev[256];
	for (;;) {
		int n = fair_wait(ep, ev);
		int64_t now = weft_now();
		for (int k = 0; k < n; k++) {
			unsigned i = ev[k].data.u32;
			if (!fair_read(f, i))
				continue;
			if (f->start)
				fair_count(f, i, now);
			else if (f->echoes[i]++ == 0 && ++started == f->conns)
				fair_start(f, now);
			if (fair_done(f, now)) {
				f->end = now;
				f->stalls = stats_now().total.stalls - f->stalls;
				return;	/* i's echo is not in flight now */
			}
			fair_send(f->peer[i]);
		}
	}
}

/* The driver: the closed loop, then the echoes still in flight (all but
 * the one that ended the window). */
static void fair_drive(void *arg)
{
	struct fair *f = arg;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	for (unsigned i = 0; i < f->conns; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, f->peer[i], &ev) == 0);
		fair_send(f->peer[i]);
	}
	fair_loop(f, ep);
	for (unsigned left = f->conns - 1; left > 0;) {
		struct epoll_event ev[256];
		int n = fair_wait(ep, ev);
		for (int k = 0; k < n; k++)
			left -= fair_read(f, ev[k].data.u32);
	}
	CHECK(close(ep) == 0);
}

static void fair_main(void *arg)
{
	struct fair *f = arg;
	weft_co **co = calloc(f->conns, sizeof *co);
	CHECK(co != NULL);
	for (unsigned i = 0; i < f->conns; i++) {
		int sv[2];
		socket_pair(sv);
		f->peer[i] = sv[1];
		co[i] = go(echo_conn, (void *)(intptr_t)sv[0]);
	}
	CHECK(weft_offload(fair_drive, f) == 0);
	/* nothing in flight: the servers see the end of file */
	for (unsigned i = 0; i < f->conns; i++)
		CHECK(shutdown(f->peer[i], SHUT_WR) == 0);
	for (unsigned i = 0; i < f->conns; i++) {
		join(co[i]);
		CHECK(close(f->peer[i]) == 0);
	}
	free(co);
}

static void fair_init(struct fair *f, unsigned conns, unsigned mean)
{
	raise_fd_limit();
	*f = (struct fair){ .conns = conns, .mean = mean };
	f->peer = calloc(conns, sizeof *f->peer);
	f->echoes = calloc(conns, sizeof *f->echoes);
	f->got = calloc(conns, sizeof *f->got);
	f->last = calloc(conns, sizeof *f->last);
	f->wait = calloc(conns, sizeof *f->wait);
	cr_assert(f->peer && f->echoes && f->got && f->last && f->wait);
}

static void fair_fini(struct fair *f)
{
	free(f->peer);
	free(f->echoes);
	free(f->got);
	free(f->last);
	free(f->wait);
}

static void check_fair(unsigned workers)
{
#ifdef WEFT_TEST_TSAN
	cr_skip_test("not run under ThreadSanitizer (%u workers)", workers);
#endif
	struct fair f;
	fair_init(&f, scaled(1000, 1000, 200), scaled(40, 30, 30));
	run(workers, fair_main, &f);
	unsigned least = 0;
	for (unsigned i = 1; i < f.conns; i++)
		if (f.echoes[i] < f.echoes[least])
			least = i;
	unsigned got = f.echoes[least];
	int64_t open = fair_waited(&f, least, f.end);	/* since its last echo */
	double mean = (double)f.total / f.conns, window = (double)(f.end - f.start) / MS,
	       waited = (double)(f.wait[least] > open ? f.wait[least] : open) / MS;
	fair_fini(&f);
	cr_assert_geq(got, mean / 2,
		      "%u workers: the slowest of %u connections got %u echoes, the mean %.1f, in %.0f ms "
		      "(its longest wait %.0f ms; %llu stalls reported)",
		      workers, f.conns, got, mean, window, waited, (unsigned long long)f.stalls);
}

Test(io, a_thousand_connections_in_a_closed_loop_are_served_alike_on_one_worker, .timeout = 300)
{
	check_fair(1);
}

Test(io, a_thousand_connections_in_a_closed_loop_are_served_alike_on_two_workers, .timeout = 300)
{
	check_fair(2);
}
