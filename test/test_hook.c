/* SPDX-License-Identifier: MIT */
/*
 * test_hook.c — libweft-hook (docs/hooks.md): blocking libc calls made in
 * coroutines park them while their worker runs others (a ticker coroutine
 * on the same, single worker keeps ticking), with the blocking calls'
 * results: socket timeouts, poll and select timeouts, connect and accept,
 * the application's view of O_NONBLOCK across fcntl, ioctl and dups, close
 * of a parked fd, plain threads on hooked fds, sleeps, the resolver on the
 * offload pool, POLLPRI, a forked child's calls, EINTR and the calls made
 * inside signal handlers, and a weft program that only LD_PRELOAD hooks.
 *
 * Every test checks something that only holds with the hooks (the worker
 * kept running, or the fd is non-blocking for real), so each fails when
 * this file is linked without them.
 */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef cr_skip_test
#define SKIP(...) cr_skip_test(__VA_ARGS__)
#else
#define SKIP(...)                                       \
	do {                                            \
		fprintf(stderr, __VA_ARGS__);           \
		fputc('\n', stderr);                    \
		return;                                 \
	} while (0)
#endif

/* ------------------------------------------------------------ helpers */

/* Whether fd is O_NONBLOCK for real (the kernel's flags, past any hook). */
static bool really_nonblocking(int fd)
{
	char path[64], line[128];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	unsigned long flags = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "flags: %lo", &flags) == 1)
			break;
	fclose(f);
	return flags & O_NONBLOCK;
}

/* An fd the hooks made non-blocking while the application believes it
 * blocking. */
static bool hooked(int fd)
{
	return really_nonblocking(fd) && !(fcntl(fd, F_GETFL) & O_NONBLOCK);
}

static bool probe_result;

static void probe(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	probe_result = really_nonblocking(sv[0]);
	close(sv[0]);
	close(sv[1]);
}

/* Whether the hooks are in place.  Under a sanitizer whose interceptors
 * keep them out, the test is skipped (said so); in a plain build their
 * absence is a failure. */
static bool hooks_in_place(void)
{
#ifdef HOOK_TEST_NO_PROBE	/* to see each test's own checks fail without the hooks */
	return true;
#endif
	run(1, probe, NULL);
	if (!probe_result && SANITIZED)
		return false;
	cr_assert(probe_result, "libweft-hook is not interposed (socketpair in a coroutine "
				"made a blocking fd)");
	return true;
}

#define REQUIRE_HOOKS()                                                               \
	do {                                                                          \
		if (!hooks_in_place())                                                \
			SKIP("hook: the sanitizer's interceptors keep libweft-hook out"); \
	} while (0)

/* A watchdog for a wake that never comes: a timeout far beyond any wait
 * the tests make, only ever reached when the wake was lost (a hang turned
 * into a failure).  Never a bound on how long a correct wait takes. */
enum { WATCHDOG_MS = 30 * 1000 };

static int64_t since(int64_t t0)
{
	return weft_now() - t0;
}

/* A coroutine that ticks every millisecond (weft_sleep: no hook) on the
 * same worker as the test's coroutine (run with 1 worker): its ticks during
 * a blocking call show the worker was not blocked. */
static atomic_long ticks;
static atomic_bool ticking;

static void ticker(void *arg)
{
	(void)arg;
	while (atomic_load(&ticking)) {
		weft_sleep(weft_now() + MS);
		atomic_fetch_add(&ticks, 1);
	}
}

/* Runs fn(arg) while the ticker runs: the ticks counted meanwhile. */
static long ticks_during(void (*fn)(void *), void *arg)
{
	atomic_store(&ticking, true);
	weft_co *t = go(ticker, NULL);
	weft_yield();
	long t0 = atomic_load(&ticks);
	fn(arg);
	long n = atomic_load(&ticks) - t0;
	atomic_store(&ticking, false);
	join(t);
	return n;
}

/* The worker ran others (3 ticks at least) while fn(arg) blocked. */
#define CHECK_NOT_BLOCKED(fn, arg) CHECK(ticks_during((fn), (arg)) >= 3)

/* A coroutine that writes `byte` to fd after ms milliseconds. */
struct later {
	int fd;
	int ms;
	char byte;
};

static void write_later(void *arg)
{
	struct later *l = arg;
	weft_sleep(weft_now() + l->ms * MS);
	CHECK(write(l->fd, &l->byte, 1) == 1);
}

static void set_timeout(int fd, int opt, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	CHECK(setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv) == 0);
}

/* ------------------------------------------------- reads and timeouts */

struct rd {
	int fd;
	ssize_t r;
	int err;
	char byte;
	int64_t took;
	int64_t end;	/* weft_now() when the read returned */
};

static void blocking_read(void *arg)
{
	struct rd *rd = arg;
	int64_t t0 = weft_now();
	rd->r = read(rd->fd, &rd->byte, 1);
	rd->err = errno;
	rd->end = weft_now();
	rd->took = rd->end - t0;
}

static void read_while_ticking(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	CHECK(hooked(sv[0]));
	struct later l = { sv[1], 100, 'x' };
	int64_t t0 = weft_now();	/* the write comes 100 ms after this at the earliest */
	weft_co *w = go(write_later, &l);
	struct rd rd = { .fd = sv[0] };
	CHECK_NOT_BLOCKED(blocking_read, &rd);
	CHECK(rd.r == 1 && rd.byte == 'x');
	CHECK(since(t0) >= 100 * MS);	/* no timeout: it waited for the data */
	join(w);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, a_blocking_read_parks_the_coroutine_and_the_worker_runs_others)
{
	REQUIRE_HOOKS();
	run(1, read_while_ticking, NULL);
}

/* Hooked calls that never wait spend weft's budget (weft_consume_budget)
 * as weft's own calls do: a coroutine writing into a pipe with room lets
 * the others on its worker run within 128 writes. */
static atomic_long budget_calls, budget_seen;

static void note_budget_calls(void *arg)
{
	(void)arg;
	atomic_store(&budget_seen, atomic_load(&budget_calls));
}

static void writes_with_room(void *arg)
{
	(void)arg;
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(hooked(p[1]));
	atomic_store(&budget_calls, 0);
	atomic_store(&budget_seen, -1);
	weft_co *other = go(note_budget_calls, NULL);
	static const char buf[16];	/* 512 of them fit one page of the pipe */
	for (int i = 0; i < 512; i++) {
		CHECK(write(p[1], buf, sizeof buf) == (ssize_t)sizeof buf);
		atomic_fetch_add(&budget_calls, 1);
	}
	join(other);
	long seen = atomic_load(&budget_seen);
	if (seen < 0 || seen >= 128)
		fprintf(stderr, "the other coroutine ran after %ld of 512 writes\n", seen);
	CHECK(seen >= 0 && seen < 128);
	close(p[0]);
	close(p[1]);
}

Test(hook, blocking_calls_that_never_wait_let_the_others_run)
{
	REQUIRE_HOOKS();
	run(1, writes_with_room, NULL);
}

static void rcvtimeo(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	set_timeout(sv[0], SO_RCVTIMEO, 150);
	struct rd rd = { .fd = sv[0] };
	CHECK_NOT_BLOCKED(blocking_read, &rd);
	CHECK(rd.r == -1 && (rd.err == EAGAIN || rd.err == EWOULDBLOCK));
	CHECK(rd.took >= 150 * MS);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, so_rcvtimeo_is_eagain_at_the_set_time_not_before)
{
	REQUIRE_HOOKS();
	run(1, rcvtimeo, NULL);
}

/* The shortest timeout a socket can have (one jiffy: the kernel rounds up),
 * which is about the hooks' probe (wait.c): EAGAIN not before the timeout
 * the kernel reports. */
static void shortest_rcvtimeo(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	struct timeval tv = { 0, 1 };
	CHECK(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	socklen_t len = sizeof tv;
	CHECK(getsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, &len) == 0);
	int64_t want = (int64_t)tv.tv_sec * 1000 * MS + (int64_t)tv.tv_usec * 1000;
	CHECK(want >= 1 * MS);
	for (int i = 0; i < 5; i++) {
		struct rd rd = { .fd = sv[0] };
		blocking_read(&rd);
		CHECK(rd.r == -1 && (rd.err == EAGAIN || rd.err == EWOULDBLOCK));
		CHECK(rd.took >= want);
	}
	close(sv[0]);
	close(sv[1]);
}

Test(hook, the_shortest_so_rcvtimeo_is_eagain_not_before_the_kernel_says)
{
	REQUIRE_HOOKS();
	run(1, shortest_rcvtimeo, NULL);
}

/* Counts the socket-timeout queries made through libc's getsockopt (the
 * hooks', and this file's): interposed on libc's. */
static atomic_uint timeout_queries;

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO))
		atomic_fetch_add(&timeout_queries, 1);
	return (int)syscall(SYS_getsockopt, fd, level, name, val, len);
}

enum { QUICK_WAITS = 200 };

static void quick_writer(void *arg)
{
	int fd = *(int *)arg;
	for (int i = 0; i < QUICK_WAITS; i++) {
		weft_yield();	/* the reader parks first */
		CHECK(write(fd, "x", 1) == 1);
		char b;
		CHECK(read(fd, &b, 1) == 1);
	}
}

/* A blocking read woken within microseconds does not ask the kernel for
 * the socket's timeout: a getsockopt per wait was one of the four system
 * calls of a hiredis request.  The reader's waits each end at once (its peer
 * writes after one yield); without the probe every one asked. */
static void quick_waits(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	unsigned before = atomic_load(&timeout_queries);
	weft_co *w = go(quick_writer, &sv[1]);
	for (int i = 0; i < QUICK_WAITS; i++) {
		char b;
		CHECK(read(sv[0], &b, 1) == 1);
		CHECK(write(sv[0], &b, 1) == 1);
	}
	join(w);
	unsigned queries = atomic_load(&timeout_queries) - before;
	fprintf(stderr, "%u timeout queries for %d waits\n", queries, QUICK_WAITS);
	/* a wait past the probe (a slow, loaded machine) may ask */
	CHECK(queries < QUICK_WAITS / 4);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, a_wait_woken_within_a_millisecond_does_not_ask_for_the_socket_timeout)
{
	REQUIRE_HOOKS();
	run(1, quick_waits, NULL);
}

struct wr {
	int fd;
	ssize_t r;
	int err;
	int64_t took;
};

static char big[1 << 20];

static void blocking_write(void *arg)
{
	struct wr *wr = arg;
	int64_t t0 = weft_now();
	wr->r = write(wr->fd, big, sizeof big);
	wr->err = errno;
	wr->took = since(t0);
}

static void sndtimeo(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	set_timeout(sv[0], SO_SNDTIMEO, 100);
	/* a blocking write of more than fits: what fitted, at the timeout */
	struct wr wr = { .fd = sv[0] };
	CHECK_NOT_BLOCKED(blocking_write, &wr);
	CHECK(wr.r > 0 && wr.r < (ssize_t)sizeof big);
	CHECK(wr.took >= 100 * MS);
	/* the socket is full: nothing fits, EAGAIN at the timeout */
	CHECK_NOT_BLOCKED(blocking_write, &wr);
	CHECK(wr.r == -1 && wr.err == EAGAIN);
	CHECK(wr.took >= 100 * MS);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, so_sndtimeo_on_a_full_socket)
{
	REQUIRE_HOOKS();
	run(1, sndtimeo, NULL);
}

/* A plain thread drains the peer as the coroutine writes: a blocking
 * write of 1 MiB returns 1 MiB, every byte in order. */
static void *drain(void *arg)
{
	int fd = *(int *)arg;
	size_t n = 0;
	char buf[65536];
	ssize_t r;
	while (n < sizeof big && (r = read(fd, buf, sizeof buf)) > 0) {
		CHECK(memcmp(buf, big + n, (size_t)r) == 0);
		n += (size_t)r;
	}
	CHECK(n == sizeof big);
	return NULL;
}

static void write_all(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (char)(i * 7);
	int sv[2];
	socket_pair(sv);
	CHECK(hooked(sv[0]));
	pthread_t t;
	CHECK(pthread_create(&t, NULL, drain, &sv[1]) == 0);
	struct wr wr = { .fd = sv[0] };
	blocking_write(&wr);
	CHECK(wr.r == (ssize_t)sizeof big);
	CHECK(pthread_join(t, NULL) == 0);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, a_blocking_write_writes_everything)
{
	REQUIRE_HOOKS();
	run(1, write_all, NULL);
}

/* A blocking writev of three vectors, 1 MiB in all, drained as it goes:
 * every partial write resumes within an iovec, the bytes in order. */
static void writev_all(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (char)(i * 13);
	int sv[2];
	socket_pair(sv);
	CHECK(hooked(sv[0]));
	pthread_t t;
	CHECK(pthread_create(&t, NULL, drain, &sv[1]) == 0);
	struct iovec iov[3] = { { big, 1000 }, { big + 1000, 300000 },
				{ big + 301000, sizeof big - 301000 } };
	CHECK(writev(sv[0], iov, 3) == (ssize_t)sizeof big);
	CHECK(iov[1].iov_base == big + 1000 && iov[1].iov_len == 300000);	/* untouched */
	CHECK(pthread_join(t, NULL) == 0);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, a_blocking_writev_writes_every_vector)
{
	REQUIRE_HOOKS();
	run(1, writev_all, NULL);
}

/* ---------------------------------------------------------- poll, select */

struct pl {
	struct pollfd *fds;
	nfds_t n;
	int timeout;
	int r;
	int64_t took;
};

static void do_poll(void *arg)
{
	struct pl *p = arg;
	int64_t t0 = weft_now();
	p->r = poll(p->fds, p->n, p->timeout);
	p->took = since(t0);
}

static void polls(void *arg)
{
	int a[2], b[2], c[2];
	socket_pair(a);
	socket_pair(b);
	CHECK(pipe2(c, O_NONBLOCK) == 0);	/* the application's own non-blocking fd */
	/* one fd, the timeout */
	struct pollfd one = { .fd = a[0], .events = POLLIN };
	struct pl p = { &one, 1, 120, 0, 0 };
	CHECK_NOT_BLOCKED(do_poll, &p);
	CHECK(p.r == 0 && p.took >= 120 * MS);
	/* three fds, one becomes ready */
	struct pollfd three[3] = { { a[0], POLLIN, 0 }, { b[0], POLLIN, 0 }, { c[0], POLLIN, 0 } };
	struct later l = { b[1], 100, 'b' };
	int64_t t0 = weft_now();	/* the write comes 100 ms after this at the earliest */
	weft_co *w = go(write_later, &l);
	p = (struct pl){ three, 3, -1, 0, 0 };
	CHECK_NOT_BLOCKED(do_poll, &p);
	CHECK(p.r == 1 && three[1].revents == POLLIN && !three[0].revents && !three[2].revents);
	CHECK(since(t0) >= 100 * MS);
	join(w);
	/* timeout 0 never waits */
	p = (struct pl){ three, 2, 0, 0, 0 };
	do_poll(&p);
	CHECK(p.r == 1);
	/* a blocking fd the hooks do not track (made on the plain thread)
	 * stays blocking after a coroutine polled it */
	int *plain = arg;
	struct pollfd pf = { .fd = plain[0], .events = POLLIN };
	p = (struct pl){ &pf, 1, 120, 0, 0 };
	CHECK_NOT_BLOCKED(do_poll, &p);
	CHECK(p.r == 0 && !really_nonblocking(plain[0]));
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
		close(c[i]);
	}
}

Test(hook, poll_with_a_timeout_and_with_several_fds)
{
	REQUIRE_HOOKS();
	int plain[2];
	cr_assert_eq(pipe(plain), 0);
	run(1, polls, plain);
	close(plain[0]);
	close(plain[1]);
}

struct sel {
	int fd;
	int ms;
	int r;
	bool set;
	int64_t took;
	struct timeval left;
};

static void do_select(void *arg)
{
	struct sel *s = arg;
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(s->fd, &rd);
	s->left = (struct timeval){ 0, s->ms * 1000 };
	int64_t t0 = weft_now();
	s->r = select(s->fd + 1, &rd, NULL, NULL, &s->left);
	s->took = since(t0);
	s->set = FD_ISSET(s->fd, &rd);
}

static void selects(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	struct sel s = { .fd = sv[0], .ms = 120 };
	CHECK_NOT_BLOCKED(do_select, &s);
	CHECK(s.r == 0 && !s.set && s.took >= 120 * MS);
	CHECK(s.left.tv_sec == 0 && s.left.tv_usec == 0);
	struct later l = { sv[1], 100, 's' };
	int64_t t0 = weft_now();	/* the write comes 100 ms after this at the earliest */
	weft_co *w = go(write_later, &l);
	s = (struct sel){ .fd = sv[0], .ms = 800 };
	CHECK_NOT_BLOCKED(do_select, &s);
	CHECK(s.r == 1 && s.set && since(t0) >= 100 * MS);
	CHECK(s.left.tv_usec > 0);	/* the time not slept */
	join(w);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, select_waits_for_readiness_or_its_timeout)
{
	REQUIRE_HOOKS();
	run(1, selects, NULL);
}

/* ---------------------------------------------------- connect, accept */

struct acc {
	int fd;
	int c;
	int64_t took;
};

static void do_accept(void *arg)
{
	struct acc *a = arg;
	int64_t t0 = weft_now();
	a->c = accept(a->fd, NULL, NULL);
	a->took = since(t0);
}

static void client(void *arg)
{
	struct sockaddr_in *addr = arg;
	weft_sleep(weft_now() + 100 * MS);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0 && hooked(fd));
	CHECK(connect(fd, (struct sockaddr *)addr, sizeof *addr) == 0);
	CHECK(write(fd, "hi", 2) == 2);
	close(fd);
}

static void connect_accept(void *arg)
{
	(void)arg;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(lfd >= 0 && hooked(lfd));
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(bind(lfd, (struct sockaddr *)&addr, sizeof addr) == 0);
	socklen_t len = sizeof addr;
	CHECK(getsockname(lfd, (struct sockaddr *)&addr, &len) == 0);
	CHECK(listen(lfd, 8) == 0);
	int64_t t0 = weft_now();	/* the client connects 100 ms after this at the earliest */
	weft_co *c = go(client, &addr);
	struct acc a = { .fd = lfd };
	CHECK_NOT_BLOCKED(do_accept, &a);
	CHECK(a.c >= 0 && hooked(a.c) && since(t0) >= 100 * MS);
	char buf[4] = { 0 };
	CHECK(recv(a.c, buf, 2, MSG_WAITALL) == 2 && memcmp(buf, "hi", 2) == 0);
	CHECK(read(a.c, buf, 1) == 0);
	join(c);
	close(a.c);
	/* SO_RCVTIMEO bounds accept */
	set_timeout(lfd, SO_RCVTIMEO, 100);
	a = (struct acc){ .fd = lfd };
	CHECK_NOT_BLOCKED(do_accept, &a);
	CHECK(a.c == -1 && errno == EAGAIN && a.took >= 100 * MS);
	close(lfd);
	/* a refused connect fails as the blocking one does */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(fd, (struct sockaddr *)&addr, sizeof addr) == -1 && errno == ECONNREFUSED);
	close(fd);
}

Test(hook, blocking_connect_and_accept)
{
	REQUIRE_HOOKS();
	run(1, connect_accept, NULL);
}

/* ------------------------------------------------ flags, dups, close */

static void app_flags(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	CHECK(hooked(sv[0]));
	int fl = fcntl(sv[0], F_GETFL);
	CHECK(fl >= 0 && !(fl & O_NONBLOCK) && (fl & O_RDWR));
	/* the application makes it non-blocking: EAGAIN at once */
	CHECK(fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) == 0);
	CHECK(fcntl(sv[0], F_GETFL) & O_NONBLOCK);
	char c;
	set_timeout(sv[0], SO_RCVTIMEO, WATCHDOG_MS);
	int64_t t0 = weft_now();
	CHECK(read(sv[0], &c, 1) == -1 && errno == EAGAIN);
	CHECK(since(t0) < WATCHDOG_MS * MS);	/* before the timeout: it did not wait */
	set_timeout(sv[0], SO_RCVTIMEO, 0);
	/* and blocking again: still non-blocking for real */
	CHECK(fcntl(sv[0], F_SETFL, fl) == 0);
	CHECK(hooked(sv[0]));
	/* FIONBIO says the same */
	int on = 1;
	CHECK(ioctl(sv[0], FIONBIO, &on) == 0 && (fcntl(sv[0], F_GETFL) & O_NONBLOCK));
	on = 0;
	CHECK(ioctl(sv[0], FIONBIO, &on) == 0 && hooked(sv[0]));
	/* created non-blocking: passed straight through */
	int nb = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(nb >= 0 && (fcntl(nb, F_GETFL) & O_NONBLOCK) && really_nonblocking(nb));
	close(nb);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, fcntl_reports_the_applications_flags)
{
	REQUIRE_HOOKS();
	run(1, app_flags, NULL);
}

static void dups(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	int d = dup(sv[0]);
	int d2 = fcntl(sv[0], F_DUPFD_CLOEXEC, 50);
	int spare[2];
	CHECK(pipe(spare) == 0);
	CHECK(dup2(sv[0], spare[0]) == spare[0]);
	int fds[] = { d, d2, spare[0] };
	for (int i = 0; i < 3; i++) {
		CHECK(fds[i] >= 0 && hooked(fds[i]));
		struct later l = { sv[1], 100, (char)('0' + i) };
		weft_co *w = go(write_later, &l);
		struct rd rd = { .fd = fds[i] };
		CHECK_NOT_BLOCKED(blocking_read, &rd);
		CHECK(rd.r == 1 && rd.byte == '0' + i);
		join(w);
	}
	/* one open file description: F_SETFL through a copy is seen by all */
	CHECK(fcntl(d, F_SETFL, O_NONBLOCK) == 0);
	CHECK(fcntl(sv[0], F_GETFL) & O_NONBLOCK);
	CHECK(fcntl(d2, F_SETFL, 0) == 0);
	CHECK(hooked(sv[0]) && hooked(d));
	/* closing a copy leaves the others tracked */
	close(d);
	CHECK(hooked(sv[0]));
	close(d2);
	close(spare[0]);
	close(spare[1]);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, dup_dup2_and_f_dupfd_keep_the_state)
{
	REQUIRE_HOOKS();
	run(1, dups, NULL);
}

static void close_later(void *arg)
{
	int *fd = arg;
	weft_sleep(weft_now() + 100 * MS);
	CHECK(close(*fd) == 0);
}

/* Without the hooks the read would block the only worker, and the close
 * would never come: after a second, a plain thread sends a byte instead,
 * and the read's result says what happened. */
struct watchdog {
	int fd;
	atomic_bool done;
};

static void *watch(void *arg)
{
	struct watchdog *w = arg;
	for (int i = 0; i < 100 && !atomic_load(&w->done); i++)
		usleep(10 * 1000);
	if (!atomic_load(&w->done))
		send(w->fd, "w", 1, MSG_NOSIGNAL);
	return NULL;
}

static void close_parked(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	struct watchdog wd = { .fd = sv[1] };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, watch, &wd) == 0);
	int64_t t0 = weft_now();	/* the close comes 100 ms after this at the earliest */
	weft_co *c = go(close_later, &sv[0]);
	struct rd rd = { .fd = sv[0] };
	CHECK_NOT_BLOCKED(blocking_read, &rd);
	atomic_store(&wd.done, true);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(rd.r == -1 && rd.err == EBADF && since(t0) >= 100 * MS);
	join(c);
	close(sv[1]);
}

Test(hook, close_of_an_fd_a_coroutine_is_parked_on_wakes_it_with_ebadf)
{
	REQUIRE_HOOKS();
	run(1, close_parked, NULL);
}

static void read_cancelled(void *arg)
{
	blocking_read(arg);
}

static void cancel_parked(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	CHECK(hooked(sv[0]));
	struct rd rd = { .fd = sv[0] };
	weft_co *r = go(read_cancelled, &rd);
	weft_sleep(weft_now() + 30 * MS);
	CHECK(weft_cancel(r) == 0);
	join(r);
	CHECK(rd.r == -1 && rd.err == ECANCELED);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, a_cancelled_coroutine_parked_in_read_gets_ecanceled)
{
	REQUIRE_HOOKS();
	run(1, cancel_parked, NULL);
}

/* ------------------------------------------------------- plain threads */

static void *plain_read(void *arg)
{
	struct rd *rd = arg;
	blocking_read(rd);
	return NULL;
}

static void plain_thread(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	CHECK(hooked(sv[0]));
	pthread_t t;
	struct rd rd = { .fd = sv[0] };
	CHECK(pthread_create(&t, NULL, plain_read, &rd) == 0);
	weft_sleep(weft_now() + 100 * MS);
	int64_t wrote = weft_now();	/* the thread's read cannot end before this */
	CHECK(write(sv[1], "p", 1) == 1);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(rd.r == 1 && rd.byte == 'p' && rd.end >= wrote);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, a_plain_threads_read_on_a_hooked_fd_still_blocks)
{
	REQUIRE_HOOKS();
	run(1, plain_thread, NULL);
}

/* --------------------------------------------------------------- sleeps */

struct sl {
	int kind;
	int64_t took;
	int r;
};

static void do_sleep(void *arg)
{
	struct sl *s = arg;
	int64_t t0 = weft_now();
	struct timespec ts = { 0, 80 * 1000 * 1000 }, rem;
	switch (s->kind) {
	case 0:
		s->r = nanosleep(&ts, &rem);
		break;
	case 1:
		s->r = usleep(80 * 1000);
		break;
	case 2:
		s->r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		break;
	default: {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		now.tv_nsec += ts.tv_nsec;
		now.tv_sec += now.tv_nsec / 1000000000;
		now.tv_nsec %= 1000000000;
		s->r = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &now, NULL);
	}
	}
	s->took = since(t0);
}

static void sleeps(void *arg)
{
	(void)arg;
	for (int k = 0; k < 4; k++) {
		struct sl s = { .kind = k };
		CHECK_NOT_BLOCKED(do_sleep, &s);
		CHECK(s.r == 0 && s.took >= 79 * MS);
	}
}

Test(hook, sleeps_park_only_the_coroutine)
{
	REQUIRE_HOOKS();
	run(1, sleeps, NULL);
}

/* ------------------------------------------------------------- resolver */

static uint64_t offload_calls(void)
{
	return stats_now().offload_calls;
}

static void resolve(void *arg)
{
	(void)arg;
	uint64_t before = offload_calls();
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	CHECK(getaddrinfo("localhost", "80", &hints, &res) == 0);
	CHECK(res != NULL);
	freeaddrinfo(res);
	struct hostent *h = gethostbyname("localhost");
	CHECK(h != NULL && h->h_addr_list[0] != NULL);
	CHECK(offload_calls() >= before + 2);
}

Test(hook, getaddrinfo_and_gethostbyname_run_on_the_offload_pool)
{
	REQUIRE_HOOKS();
	run(1, resolve, NULL);
}

/* ------------------------------------------------- ppoll with a mask */

struct pp {
	struct pollfd *fds;
	nfds_t n;
	const struct timespec *ts;
	int r;
	int err;
	int64_t took;
};

static atomic_bool ppoll_called;	/* a do_ppoll has begun */

/* ppoll with an empty signal mask: every signal unblocked while it waits. */
static void do_ppoll(void *arg)
{
	struct pp *p = arg;
	sigset_t none;
	sigemptyset(&none);
	atomic_store(&ppoll_called, true);
	int64_t t0 = weft_now();
	p->r = ppoll(p->fds, p->n, p->ts, &none);
	p->err = errno;
	p->took = since(t0);
}

static atomic_int usr1_caught;
static _Atomic pthread_t usr1_thread;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_store(&usr1_thread, pthread_self());
	atomic_fetch_add(&usr1_caught, 1);
}

/* Writes 50 ms after the next do_ppoll began (counting from the thread's
 * start instead, a slow start-up of the ppoll, as under valgrind, left
 * the worker too little of the 50 ms to show it ran others). */
static void *write_in_50ms(void *arg)
{
	for (int i = 0; i < 10 * 1000 && !atomic_load(&ppoll_called); i++)
		usleep(1000);
	usleep(50 * 1000);
	CHECK(write(*(int *)arg, "p", 1) == 1);
	return NULL;
}

static void ppolls(void *arg)
{
	(void)arg;
	int fds[2];
	CHECK(pipe(fds) == 0);
	/* readable after 50 ms (a plain thread writes, so that a blocked
	 * worker fails the test rather than hangs it): the worker keeps
	 * running meanwhile */
	struct pollfd pf = { .fd = fds[0], .events = POLLIN };
	pthread_t t;
	int64_t t0 = weft_now();	/* the write comes 50 ms after this at the earliest */
	atomic_store(&ppoll_called, false);
	CHECK(pthread_create(&t, NULL, write_in_50ms, &fds[1]) == 0);
	struct pp p = { &pf, 1, NULL, 0, 0, 0 };
	CHECK_NOT_BLOCKED(do_ppoll, &p);
	if (p.r != 1 || pf.revents != POLLIN || since(t0) < 50 * MS)
		fprintf(stderr, "ppoll: %d, revents %#x, errno %d, %lld ms after the writer started\n", p.r,
			pf.revents, p.err, (long long)(since(t0) / MS));
	CHECK(p.r == 1 && pf.revents == POLLIN && since(t0) >= 50 * MS);
	CHECK(pthread_join(t, NULL) == 0);
	char c;
	CHECK(read(fds[0], &c, 1) == 1 && c == 'p');
	/* the timeout: 0, never early */
	struct timespec ts = { 0, 100 * MS };
	p = (struct pp){ &pf, 1, &ts, -1, 0, 0 };
	CHECK_NOT_BLOCKED(do_ppoll, &p);
	CHECK(p.r == 0 && pf.revents == 0 && p.took >= 100 * MS);
	/* a zero timeout: 0 at once */
	struct timespec now = { 0, 0 };
	p = (struct pp){ &pf, 1, &now, -1, 0, 0 };
	do_ppoll(&p);
	CHECK(p.r == 0 && pf.revents == 0);
	/* a closed fd is POLLNVAL at once, as the kernel says */
	struct pollfd two[2] = { { fds[0], POLLIN, 0 }, { 1000, POLLIN, 0 } };
	struct timespec long_ts = { WATCHDOG_MS / 1000, 0 };
	p = (struct pp){ two, 2, &long_ts, -1, 0, 0 };
	do_ppoll(&p);
	CHECK(p.r == 1 && two[1].revents == POLLNVAL && two[0].revents == 0);
	CHECK(p.took < WATCHDOG_MS * MS);	/* before its timeout: not woken by it */
	/* a bad timeout is EINVAL */
	struct timespec bad = { 0, 1000 * 1000 * 1000 };
	p = (struct pp){ &pf, 1, &bad, 0, 0, 0 };
	do_ppoll(&p);
	CHECK(p.r == -1 && p.err == EINVAL);
	/* SIGUSR1, blocked in every thread, is pending: the mask unblocks it
	 * for the wait, the handler runs (on the thread that waits, not the
	 * worker) and ppoll says EINTR */
	CHECK(kill(getpid(), SIGUSR1) == 0);
	p = (struct pp){ &pf, 1, &ts, 0, 0, 0 };
	pthread_t worker = pthread_self();
	do_ppoll(&p);
	CHECK(p.r == -1 && p.err == EINTR && atomic_load(&usr1_caught) == 1);
	CHECK(!pthread_equal(atomic_load(&usr1_thread), worker));
	close(fds[0]);
	close(fds[1]);
}

Test(hook, ppoll_with_a_signal_mask_parks_only_the_coroutine)
{
	REQUIRE_HOOKS();
#ifdef WEFT_TEST_TSAN
	/* reached through TSan's ppoll interceptor, the offload pool's locks
	 * go unrecorded: false races (docs/hooks.md, "ThreadSanitizer") */
	SKIP("hook: a masked ppoll is not run under TSan (docs/hooks.md)");
#endif
	struct sigaction sa = { .sa_handler = on_usr1 };
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	cr_assert_eq(pthread_sigmask(SIG_BLOCK, &usr1, NULL), 0);
	run(1, ppolls, NULL);
}

/* -------------------------------------------------- recvmsg MSG_WAITALL */

/* A coroutine that writes `pieces` pieces of `size` bytes of big to fd,
 * 5 ms apart, then shuts the socket down for writing when `eof`. */
struct dribble {
	int fd;
	int pieces;
	size_t size;
	bool eof;
};

static void write_pieces(void *arg)
{
	struct dribble *d = arg;
	for (int i = 0; i < d->pieces; i++) {
		weft_sleep(weft_now() + 5 * MS);
		CHECK(write(d->fd, big + (size_t)i * d->size, d->size) == (ssize_t)d->size);
	}
	if (d->eof)
		CHECK(shutdown(d->fd, SHUT_WR) == 0);
}

struct rm {
	int fd;
	char *buf;
	size_t len;
	ssize_t r;
	int err;
	int64_t took;
	int passed;	/* the fd received with the data, or -1 */
};

/* recvmsg(MSG_WAITALL) into two iovecs of buf: 300 bytes, then the rest. */
static void waitall_recvmsg(void *arg)
{
	struct rm *m = arg;
	struct iovec iov[2] = { { m->buf, 300 }, { m->buf + 300, m->len - 300 } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	int64_t t0 = weft_now();
	m->r = recvmsg(m->fd, &msg, MSG_WAITALL);
	m->err = errno;
	m->took = since(t0);
}

/* Sends 100 bytes of big with an fd (SCM_RIGHTS), then, 20 ms later, 100
 * more. */
static void pass_fd_then_write(void *arg)
{
	struct dribble *d = arg;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl = { 0 };
	struct iovec iov = { big, 100 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			      .msg_controllen = sizeof ctl.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &d->fd, sizeof(int));
	CHECK(sendmsg(d->fd, &msg, 0) == 100);
	weft_sleep(weft_now() + 20 * MS);
	CHECK(write(d->fd, big + 100, 100) == 100);
}

/* waitall_recvmsg with room for one fd: the fd received, in m->passed. */
static void waitall_recvmsg_fd(void *arg)
{
	struct rm *m = arg;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov[2] = { { m->buf, 300 }, { m->buf + 300, m->len - 300 } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl.buf,
			      .msg_controllen = sizeof ctl.buf };
	m->r = recvmsg(m->fd, &msg, MSG_WAITALL);
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	m->passed = -1;
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&m->passed, CMSG_DATA(c), sizeof(int));
}

static void recvmsg_waitall(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (char)(i * 11);
	static char got[1000];
	int sv[2];
	socket_pair(sv);
	/* 10 pieces of 100 bytes: all 1000, in order, across both iovecs */
	struct dribble d = { sv[1], 10, 100, false };
	weft_co *w = go(write_pieces, &d);
	struct rm m = { .fd = sv[0], .buf = got, .len = sizeof got };
	CHECK_NOT_BLOCKED(waitall_recvmsg, &m);
	CHECK(m.r == (ssize_t)sizeof got && memcmp(got, big, sizeof got) == 0);
	join(w);
	/* SO_RCVTIMEO: the partial count at the timeout */
	set_timeout(sv[0], SO_RCVTIMEO, 100);
	d = (struct dribble){ sv[1], 2, 100, false };
	w = go(write_pieces, &d);
	m = (struct rm){ .fd = sv[0], .buf = got, .len = sizeof got };
	waitall_recvmsg(&m);
	CHECK(m.r == 200 && memcmp(got, big, 200) == 0 && m.took >= 100 * MS);
	join(w);
	/* nothing came: EAGAIN at the timeout */
	m = (struct rm){ .fd = sv[0], .buf = got, .len = sizeof got };
	waitall_recvmsg(&m);
	CHECK(m.r == -1 && m.err == EAGAIN && m.took >= 100 * MS);
	/* descriptors passed with a piece end the call after that piece, as
	 * the kernel ends it; the descriptor arrives with it */
	d = (struct dribble){ sv[1], 1, 100, false };
	w = go(pass_fd_then_write, &d);
	m = (struct rm){ .fd = sv[0], .buf = got, .len = sizeof got };
	waitall_recvmsg_fd(&m);
	CHECK(m.r == 100 && memcmp(got, big, 100) == 0 && m.passed >= 0);
	close(m.passed);
	join(w);
	char rest[100];
	CHECK(recv(sv[0], rest, sizeof rest, MSG_WAITALL) == 100);
	/* end of file: what came before it (no timeout: a writer held back on
	 * a loaded machine must not end the call first) */
	set_timeout(sv[0], SO_RCVTIMEO, 0);
	d = (struct dribble){ sv[1], 3, 100, true };
	w = go(write_pieces, &d);
	m = (struct rm){ .fd = sv[0], .buf = got, .len = sizeof got };
	waitall_recvmsg(&m);
	CHECK(m.r == 300 && memcmp(got, big, 300) == 0);
	join(w);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, recvmsg_with_msg_waitall_fills_every_iovec)
{
	REQUIRE_HOOKS();
	run(1, recvmsg_waitall, NULL);
}

/* ----------------------------------------------- dup2 onto a parked fd */

static void dup_later(void *arg)
{
	int *from_to = arg;
	weft_sleep(weft_now() + 100 * MS);
	CHECK(dup2(from_to[0], from_to[1]) == from_to[1]);
}

static void dup2_parked(void *arg)
{
	(void)arg;
	int a[2], b[2];
	socket_pair(a);
	socket_pair(b);
	/* the parked read fails as close would make it */
	int from_to[2] = { b[0], a[0] };
	int64_t t0 = weft_now();	/* the dup2 comes 100 ms after this at the earliest */
	weft_co *d = go(dup_later, from_to);
	struct rd rd = { .fd = a[0] };
	CHECK_NOT_BLOCKED(blocking_read, &rd);
	CHECK(rd.r == -1 && rd.err == EBADF && since(t0) >= 100 * MS);
	join(d);
	/* a[0] is now b[0]'s file, hooked: a read parks until b[1] writes */
	CHECK(hooked(a[0]));
	struct later l = { b[1], 50, 'd' };
	weft_co *w = go(write_later, &l);
	rd = (struct rd){ .fd = a[0] };
	CHECK_NOT_BLOCKED(blocking_read, &rd);
	CHECK(rd.r == 1 && rd.byte == 'd');
	join(w);
	/* the old file lost its last fd: its peer sees end of file */
	char c;
	CHECK(read(a[1], &c, 1) == 0);
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
	}
}

Test(hook, dup2_onto_a_parked_fd_wakes_it_with_ebadf_and_takes_the_number)
{
	REQUIRE_HOOKS();
	run(1, dup2_parked, NULL);
}

/* A plain thread that opens and closes fds (pipes, sockets) as fast as it
 * can, and counts the times it was given `watched`, or found it closed
 * (fcntl, between the opens: the number was free). */
struct opener {
	int watched;
	atomic_bool stop;
	atomic_long stolen, freed, opened;
};

static void *open_fds(void *arg)
{
	struct opener *o = arg;
	for (unsigned n = 0; !atomic_load(&o->stop); n++) {
		for (int k = 0; k < 8; k++)
			if (fcntl(o->watched, F_GETFD) < 0)
				atomic_fetch_add(&o->freed, 1);
		int fds[2];
		if ((n % 2 ? socketpair(AF_UNIX, SOCK_STREAM, 0, fds) : pipe(fds)) != 0)
			continue;
		atomic_fetch_add(&o->opened, 1);
		for (int i = 0; i < 2; i++) {
			if (fds[i] == o->watched)
				atomic_fetch_add(&o->stolen, 1);	/* left open: dup2 replaces it */
			else
				close(fds[i]);
		}
	}
	return NULL;
}

static void read_until_bad(void *arg)
{
	struct rd *rd = arg;
	blocking_read(rd);
	CHECK(rd->r == -1 && rd->err == EBADF);
}

/* A reader parks on `target` while another coroutine dup2s (dup3 every
 * other time) onto it, again and again; meanwhile the opener must never
 * get the number: it is never free. */
static void dup2_stress(void *arg)
{
	(void)arg;
	int a[2], b[2];
	socket_pair(a);
	socket_pair(b);
	int target = dup(a[0]);
	CHECK(target >= 0);
	set_timeout(a[0], SO_RCVTIMEO, 2000);	/* a reader that missed the dup2 fails */
	set_timeout(b[0], SO_RCVTIMEO, 2000);
	struct opener o = { .watched = target };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, open_fds, &o) == 0);
	/* the rounds take milliseconds: on a loaded machine they could all
	 * pass before the opener first ran, and then prove nothing */
	while (atomic_load(&o.opened) == 0)
		CHECK(weft_sleep(weft_now() + 1000 * 1000) == 0);
	unsigned rounds = scaled(10000, 1000, 100);
	for (unsigned i = 0; i < rounds; i++) {
		struct rd rd = { .fd = target };
		weft_co *r = go(read_until_bad, &rd);
		weft_yield();	/* the reader parks on target */
		int from = i % 2 ? a[0] : b[0];
		CHECK((i % 4 < 2 ? dup2(from, target) : dup3(from, target, O_CLOEXEC)) == target);
		join(r);
	}
	atomic_store(&o.stop, true);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(atomic_load(&o.opened) > 0);
	if (atomic_load(&o.stolen) || atomic_load(&o.freed))
		fprintf(stderr, "fd %d: the opener got it %ld times, found it closed %ld times\n",
			target, atomic_load(&o.stolen), atomic_load(&o.freed));
	CHECK(atomic_load(&o.stolen) == 0 && atomic_load(&o.freed) == 0);
	close(target);
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
	}
}

Test(hook, dup2_onto_a_parked_fd_never_frees_the_number)
{
	REQUIRE_HOOKS();
	run(1, dup2_stress, NULL);
}

/* ----------------------------------------------------------------- fork */

/* The child of a coroutine's fork closes the inherited fds, as a child
 * does before exec: that must not touch the parent's registrations (the
 * epoll instance is shared across fork), and the parent's next blocking
 * read on the fd still wakes when data comes. */
static void fork_and_close(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	CHECK(hooked(sv[0]));
	struct later l = { sv[1], 10, 'a' };
	weft_co *w = go(write_later, &l);
	struct rd rd = { .fd = sv[0] };
	blocking_read(&rd);	/* parks: registers sv[0] with weft */
	CHECK(rd.r == 1 && rd.byte == 'a');
	join(w);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* no runtime here: the calls are libc's, the fd's real flag shows */
		int shown = fcntl(sv[0], F_GETFL) & O_NONBLOCK ? 0 : 1;
		bool ok = dup2(sv[1], sv[0]) == sv[0] && close(sv[0]) == 0 && close(sv[1]) == 0;
		_exit(shown | (ok ? 0 : 2));
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
	set_timeout(sv[0], SO_RCVTIMEO, WATCHDOG_MS);
	l.byte = 'b';
	w = go(write_later, &l);
	rd = (struct rd){ .fd = sv[0] };
	blocking_read(&rd);
	if (rd.r != 1)
		fprintf(stderr, "the parent's read: %zd, errno %d (EAGAIN: never woken)\n", rd.r,
			rd.err);
	CHECK(rd.r == 1 && rd.byte == 'b');
	join(w);
	if (WEXITSTATUS(status))
		fprintf(stderr, "the child: %s%s\n",
			WEXITSTATUS(status) & 1 ? "F_GETFL hid the real O_NONBLOCK; " : "",
			WEXITSTATUS(status) & 2 ? "dup2 or close failed" : "");
	CHECK(WEXITSTATUS(status) == 0);
	close(sv[0]);
	close(sv[1]);
}

Test(hook, a_forked_childs_close_leaves_the_parents_fds_alone)
{
	REQUIRE_HOOKS();
	run(1, fork_and_close, NULL);
}

/* ---------------------------------------------------------------- EINTR */

static void on_alarm(int sig)
{
	(void)sig;
}

/* A plain thread's blocking read or write on a tracked fd, interrupted. */
struct intr {
	int fd;		/* tracked */
	int peer;	/* the other end: unblocks the call */
	bool out;	/* a write (on a full socket), else a read */
	pthread_t t;
	atomic_bool entered, done;
	ssize_t r;
	int err;
};

static void *intr_call(void *arg)
{
	struct intr *x = arg;
	char c = 'w';
	atomic_store(&x->entered, true);
	x->r = x->out ? write(x->fd, &c, 1) : read(x->fd, &c, 1);
	x->err = errno;
	atomic_store(&x->done, true);
	return NULL;
}

/* Unblocks x's call: a byte to read, or room to write. */
static void unblock(struct intr *x)
{
	static char room[1 << 20];
	if (x->out)
		CHECK(read(x->peer, room, sizeof room) > 0);
	else
		CHECK(write(x->peer, "u", 1) == 1);
}

/* Runs x's call on a plain thread and sends it SIGALRM (handled with
 * sa_flags) every millisecond until the call returns; after `patience`
 * signals the call is unblocked, so one that never ends on EINTR returns
 * what the unblocking gave instead of hanging.  (The test does not wait
 * for the handler to have run: ThreadSanitizer runs it only at the
 * thread's next interceptor, which a restarted wait never reaches.) */
static void interrupt(struct intr *x, int sa_flags, int patience)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = sa_flags }, old;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGALRM, &sa, &old) == 0);
	atomic_store(&x->entered, false);
	atomic_store(&x->done, false);
	CHECK(pthread_create(&x->t, NULL, intr_call, x) == 0);
	while (!atomic_load(&x->entered))
		sched_yield();
	for (int i = 0; !atomic_load(&x->done); i++) {
		if (i == patience)
			unblock(x);
		if (pthread_kill(x->t, SIGALRM) != 0)
			break;
		struct timespec ms = { 0, MS };
		nanosleep(&ms, NULL);	/* a plain thread: the real one */
	}
	CHECK(pthread_join(x->t, NULL) == 0);
	CHECK(sigaction(SIGALRM, &old, NULL) == 0);
}

/* Made in a coroutine, so tracked: a pipe and two socket pairs. */
struct intr_fds {
	int pipe[2], sv[2], full[2];
};

static void make_intr_fds(void *arg)
{
	struct intr_fds *f = arg;
	CHECK(pipe(f->pipe) == 0 && hooked(f->pipe[0]));
	socket_pair(f->sv);
	socket_pair(f->full);
	CHECK(hooked(f->sv[0]) && hooked(f->full[0]));
}

Test(hook, a_plain_threads_call_on_a_hooked_fd_gets_eintr_as_the_kernel_gives_it)
{
	REQUIRE_HOOKS();
	struct intr_fds f;
	run(1, make_intr_fds, &f);
	enum { PATIENCE = 1000 };
	/* without SA_RESTART: EINTR */
	struct intr x = { .fd = f.pipe[0], .peer = f.pipe[1] };
	interrupt(&x, 0, PATIENCE);
	cr_assert(x.r == -1 && x.err == EINTR, "read without SA_RESTART: %zd, errno %d", x.r,
		  x.err);
	/* with SA_RESTART: restarted, until the data comes */
	x = (struct intr){ .fd = f.sv[0], .peer = f.sv[1] };
	interrupt(&x, SA_RESTART, 5);
	cr_assert(x.r == 1, "read with SA_RESTART: %zd, errno %d", x.r, x.err);
	/* with SA_RESTART on a socket with SO_RCVTIMEO: EINTR all the same */
	set_timeout(f.sv[0], SO_RCVTIMEO, WATCHDOG_MS);
	x = (struct intr){ .fd = f.sv[0], .peer = f.sv[1] };
	interrupt(&x, SA_RESTART, PATIENCE);
	cr_assert(x.r == -1 && x.err == EINTR, "read with SA_RESTART and SO_RCVTIMEO: %zd, errno %d",
		  x.r, x.err);
	/* and a write with SO_SNDTIMEO on a full socket */
	char c = 'f';
	while (send(f.full[0], &c, 1, MSG_DONTWAIT) == 1)
		;
	set_timeout(f.full[0], SO_SNDTIMEO, WATCHDOG_MS);
	x = (struct intr){ .fd = f.full[0], .peer = f.full[1], .out = true };
	interrupt(&x, SA_RESTART, PATIENCE);
	cr_assert(x.r == -1 && x.err == EINTR,
		  "write with SA_RESTART and SO_SNDTIMEO: %zd, errno %d", x.r, x.err);
	for (int i = 0; i < 2; i++) {
		close(f.pipe[i]);
		close(f.sv[i]);
		close(f.full[i]);
	}
}

/* ------------------------------------------------------ signal handlers */

/* A coroutine that counts its turns on the test's worker. */
static atomic_long turns;
static atomic_bool turning;

static void turner(void *arg)
{
	(void)arg;
	while (atomic_load(&turning)) {
		atomic_fetch_add(&turns, 1);
		weft_yield();
	}
}

static int handler_fd;			/* a tracked pipe's write end */
static atomic_long turns_in_handler;	/* the turner's turns while it ran */
static atomic_bool handler_ok;

/* A handler that makes hooked calls that would yield (a loop of writes
 * spends the budget) and park (a poll with a timeout) in a coroutine. */
static void on_usr2(int sig)
{
	(void)sig;
	long t0 = atomic_load(&turns);
	bool ok = true;
	for (int i = 0; i < 512; i++)
		ok = ok && write(handler_fd, "s", 1) == 1;
	ok = ok && poll(NULL, 0, 1) == 0;
	atomic_store(&turns_in_handler, atomic_load(&turns) - t0);
	atomic_store(&handler_ok, ok);
}

/* A handler left by siglongjmp: the calls after it are a coroutine's. */
static sigjmp_buf jump;
static bool jump_not_judged;

static void on_usr2_jump(int sig)
{
	(void)sig;
	siglongjmp(jump, 1);
}

static void handler_in_coroutine(void *arg)
{
	(void)arg;
	int p[2];
	CHECK(pipe(p) == 0 && hooked(p[1]));
	handler_fd = p[1];
	atomic_store(&turning, true);
	weft_co *t = go(turner, NULL);
	weft_yield();
	/* the worker blocks signals: this one is let through on it for the
	 * test, as a fault's (SIGSEGV's) always is */
	sigset_t usr2;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	weft_lock_thread();
	CHECK(pthread_sigmask(SIG_UNBLOCK, &usr2, NULL) == 0);
	CHECK(pthread_kill(pthread_self(), SIGUSR2) == 0);
	CHECK(pthread_sigmask(SIG_BLOCK, &usr2, NULL) == 0);
	weft_unlock_thread();
	CHECK(atomic_load(&handler_ok));
	if (atomic_load(&turns_in_handler) != 0)
		fprintf(stderr, "the handler yielded: the turner ran %ld times in it\n",
			atomic_load(&turns_in_handler));
	CHECK(atomic_load(&turns_in_handler) == 0);
	/* the turner runs when this coroutine does yield */
	long t0 = atomic_load(&turns);
	for (int i = 0; i < 10 && atomic_load(&turns) == t0; i++)
		weft_yield();
	CHECK(atomic_load(&turns) > t0);
	/* a handler left by siglongjmp: the poll after it parks again (a park
	 * counted), and the turner runs meanwhile where it can.  Not judged
	 * under valgrind, where that poll does not park (not explained yet:
	 * its signal frames and the hooks' check of a handler's frame) */
	if (RUNNING_ON_VALGRIND) {
		jump_not_judged = true;
		atomic_store(&turning, false);
		join(t);
		close(p[0]);
		close(p[1]);
		return;
	}
	struct sigaction sa = { .sa_handler = on_usr2_jump }, old;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR2, &sa, &old) == 0);
	weft_lock_thread();
	CHECK(pthread_sigmask(SIG_UNBLOCK, &usr2, NULL) == 0);
	if (sigsetjmp(jump, 1) == 0)
		CHECK(pthread_kill(pthread_self(), SIGUSR2) == 0);
	uint64_t parks = stats_now().total.parks;
	CHECK(poll(NULL, 0, 1) == 0);
	uint64_t parked = stats_now().total.parks - parks;
	CHECK(pthread_sigmask(SIG_BLOCK, &usr2, NULL) == 0);
	weft_unlock_thread();
	CHECK(sigaction(SIGUSR2, &old, NULL) == 0);
	CHECK(parked > 0);
	atomic_store(&turning, false);
	join(t);
	char buf[512];
	CHECK(read(p[0], buf, sizeof buf) == sizeof buf);
	close(p[0]);
	close(p[1]);
}

/* A handler on a plain thread closes a tracked fd a coroutine waited on:
 * the real close, async-signal-safe (no coroutine made for weft_close, no
 * lock). */
static int close_in_handler_fd;
static atomic_int close_in_handler_r;	/* close's errno, 0 on success, -1 not run */

static void on_usr2_close(int sig)
{
	(void)sig;
	int saved = errno;
	int r = close(close_in_handler_fd);
	atomic_store(&close_in_handler_r, r == 0 ? 0 : errno);
	errno = saved;
}

struct plain_close {
	atomic_bool done;
	uint64_t spawned;	/* coroutines spawned while the handler ran */
};

static void *signal_self(void *arg)
{
	struct plain_close *pc = arg;
	sigset_t usr2;	/* blocked, as on the worker this thread was made on */
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	CHECK(pthread_sigmask(SIG_UNBLOCK, &usr2, NULL) == 0);
	uint64_t s0 = stats_now().total.spawned;
	CHECK(pthread_kill(pthread_self(), SIGUSR2) == 0);
	pc->spawned = stats_now().total.spawned - s0;
	atomic_store(&pc->done, true);
	return NULL;
}

static void close_in_plain_handler(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	struct later l = { sv[1], 1, 'c' };
	weft_co *w = go(write_later, &l);
	struct rd rd = { .fd = sv[0] };
	blocking_read(&rd);	/* parks: registers sv[0] with weft */
	CHECK(rd.r == 1);
	join(w);
	close_in_handler_fd = sv[0];
	atomic_store(&close_in_handler_r, -1);
	struct plain_close pc = { .done = false };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, signal_self, &pc) == 0);
	while (!atomic_load(&pc.done))
		weft_sleep(weft_now() + MS);	/* the worker stays free */
	CHECK(pthread_join(t, NULL) == 0);
	if (pc.spawned || atomic_load(&close_in_handler_r))
		fprintf(stderr, "close in a handler: errno %d, %llu coroutine(s) spawned\n",
			atomic_load(&close_in_handler_r), (unsigned long long)pc.spawned);
	CHECK(atomic_load(&close_in_handler_r) == 0 && pc.spawned == 0);
	close(sv[1]);
}

static void handle_usr2(void (*fn)(int))
{
	struct sigaction sa = { .sa_handler = fn };
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
}

Test(hook, a_hooked_call_in_a_signal_handler_never_parks_yields_or_locks)
{
	REQUIRE_HOOKS();
	handle_usr2(on_usr2);
	run(1, handler_in_coroutine, NULL);
	handle_usr2(on_usr2_close);
	run(1, close_in_plain_handler, NULL);
	handle_usr2(SIG_DFL);
	if (jump_not_judged)
		SKIP("hook: a handler left by siglongjmp is not judged under valgrind "
		     "(the poll after it does not park there: unexplained)");
}

/* Runs hook_signal_prog SCENARIO [ARG] (its own process: it installs
 * handlers, forks, and hangs when it fails, until its watchdog): its exit
 * status, or 128 + the signal that killed it. */
static int signal_prog(const char *scenario, const char *arg)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execl(SIGNAL_PROG, SIGNAL_PROG, scenario, arg, (char *)NULL);
		_exit(127);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define SIGNAL_SCENARIO(scenario, arg)                                              \
	do {                                                                        \
		int st_ = signal_prog(scenario, arg);                               \
		if (st_ == 77)                                                      \
			SKIP("hook: %s decided nothing here (its SKIP line says why)", \
			     scenario);                                             \
		cr_assert_eq(st_, 0, "hook_signal_prog %s: exit %d", scenario, st_);  \
	} while (0)

/* An SA_NODEFER handler left by siglongjmp: the coroutines of its worker,
 * and a plain thread's close, are theirs again. */
Test(hook, an_sa_nodefer_handler_left_by_siglongjmp_is_left)
{
	REQUIRE_HOOKS();
	SIGNAL_SCENARIO("nodefer-coroutine", NULL);
	SIGNAL_SCENARIO("nodefer-plain-close", NULL);
}

/* Handlers that make async-signal-safe calls on tracked fds while they
 * interrupt the hooks' own (the fd table's lock) or malloc: never a
 * deadlock, whichever of glibc's calls installed them. */
Test(hook, handlers_that_close_fork_or_sendmsg_never_deadlock)
{
	REQUIRE_HOOKS();
	SIGNAL_SCENARIO("sendmsg-in-handler", NULL);
	SIGNAL_SCENARIO("fork-in-handler", NULL);	/* from here TSan skips */
	SIGNAL_SCENARIO("close-in-handler", "sigset");
	SIGNAL_SCENARIO("close-in-handler", "bsd_signal");
}

/* The old action is the application's, whichever call installed it; errno
 * after fork; glibc's answers to bad input. */
Test(hook, handlers_and_actions_read_back_as_the_application_installed_them)
{
	REQUIRE_HOOKS();
	SIGNAL_SCENARIO("old-handlers", NULL);
	SIGNAL_SCENARIO("signal-answers", NULL);
	SIGNAL_SCENARIO("fork-errno", NULL);
}

/* Two threads' sigactions at once leave one whole action. */
Test(hook, concurrent_sigactions_leave_one_whole_action)
{
	REQUIRE_HOOKS();
	SIGNAL_SCENARIO("sigaction-race", NULL);
}

/* A plain thread's blocking read ends on EINTR for a handler that ran in
 * its first attempt, as the kernel's ends for one during the call. */
Test(hook, a_handler_during_a_plain_threads_call_ends_it_with_eintr)
{
	REQUIRE_HOOKS();
	SIGNAL_SCENARIO("eintr-from-start", NULL);
}

/* ---------------------------------------------------------------- POLLPRI */

/* Sends an urgent byte on fd; if the poll has not returned WATCHDOG_MS
 * later, wakes it with normal data too (a hang turned into a failure). */
struct oob {
	int fd;
	atomic_bool polled;	/* the poll returned */
	bool rescued;		/* the watchdog had to wake it */
};

static void send_oob(void *arg)
{
	struct oob *o = arg;
	weft_sleep(weft_now() + 20 * MS);	/* lets the poll park first */
	CHECK(send(o->fd, "!", 1, MSG_OOB) == 1);
	int64_t t0 = weft_now();
	while (!atomic_load(&o->polled) && since(t0) < WATCHDOG_MS * MS)
		weft_sleep(weft_now() + MS);
	if (atomic_load(&o->polled))
		return;
	o->rescued = true;
	CHECK(send(o->fd, "n", 1, 0) == 1);
}

/* poll for POLLPRI alone on one tracked TCP socket wakes on urgent data,
 * which makes it POLLPRI and not POLLIN. */
static void poll_pri(void *arg)
{
	(void)arg;
	struct sockaddr_in addr;
	int lfd = loopback_socket(SOCK_STREAM, &addr);
	CHECK(listen(lfd, 1) == 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(c, (struct sockaddr *)&addr, sizeof addr) == 0);
	int s = accept(lfd, NULL, NULL);
	CHECK(s >= 0 && hooked(s));
	struct oob o = { .fd = c };
	weft_co *w = go(send_oob, &o);
	struct pollfd pf = { .fd = s, .events = POLLPRI };
	int r = poll(&pf, 1, -1);
	atomic_store(&o.polled, true);
	join(w);
	if (o.rescued)
		fprintf(stderr, "poll for POLLPRI slept through the urgent data\n");
	CHECK(r == 1 && (pf.revents & POLLPRI) && !o.rescued);
	close(s);
	close(c);
	close(lfd);
}

Test(hook, poll_for_pollpri_on_one_tracked_fd_wakes_on_urgent_data)
{
	REQUIRE_HOOKS();
	run(1, poll_pri, NULL);
}

/* ----------------------------------------------------------- LD_PRELOAD */

/* Runs hook_preload_prog (linked with weft only), with or without
 * LD_PRELOAD of the hooks: its exit status. */
static int preload_run(bool preload)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (preload)
			setenv("LD_PRELOAD", HOOK_LIB, 1);
		else
			unsetenv("LD_PRELOAD");
		execl(PRELOAD_PROG, PRELOAD_PROG, (char *)NULL);
		_exit(127);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(hook, ld_preload_hooks_an_unlinked_weft_program)
{
	if (SANITIZED)
		SKIP("hook: LD_PRELOAD is not tried under sanitizers (their runtime must "
		     "come first in the preload list)");
	cr_assert_eq(preload_run(true), 0);
	cr_assert_eq(preload_run(false), 1);	/* and without it, the worker blocked */
}

/* ------------------------------------------- weft_close of a hooked fd */

/* A weft program with the hooks loaded calls weft_close itself on an fd a
 * hooked blocking call has waited on.  weft_close's close(2) must be the
 * system call: were it the (interposed) close(), the hooks' close would
 * let the fd go through weft's close protocol again, in the same
 * coroutine, while the outer weft_close holds the entry at FD_GEN_CLOSED,
 * and the inner one's forget would wait (yield) forever for that phase to
 * end (the test's timeout). */

static void weft_close_of_hooked(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	CHECK(hooked(sv[0]));
	struct later l = { sv[1], 20, 'x' };
	weft_co *w = go(write_later, &l);
	struct rd rd = { .fd = sv[0] };
	blocking_read(&rd);	/* waits: the hooks register the fd */
	CHECK(rd.r == 1 && rd.byte == 'x');
	join(w);
	CHECK(weft_close(sv[0]) == 0);
	CHECK(fcntl(sv[0], F_GETFD) == -1 && errno == EBADF);
	close(sv[1]);
}

Test(hook, weft_close_of_an_fd_the_hooks_waited_on_returns, .timeout = 60)
{
	REQUIRE_HOOKS();
	run(2, weft_close_of_hooked, NULL);
}

/* ------------------------------- close and dup2 of an fd weft registered */

/* Whether an epoll instance of this process watches fd number fd (the
 * kernel's view, /proc/self/fdinfo). */
static bool epoll_watches(int fd)
{
	DIR *d = opendir("/proc/self/fd");
	CHECK(d != NULL);
	struct dirent *de;
	bool found = false;
	while (!found && (de = readdir(d))) {
		char path[300], link[64], line[256];
		snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
		ssize_t n = readlink(path, link, sizeof link - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (strcmp(link, "anon_inode:[eventpoll]") != 0)
			continue;
		snprintf(path, sizeof path, "/proc/self/fdinfo/%s", de->d_name);
		FILE *f = fopen(path, "r");
		int tfd;
		while (f && fgets(line, sizeof line, f))
			if (sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd)
				found = true;
		if (f)
			fclose(f);
	}
	closedir(d);
	return found;
}

/*
 * An fd the hooks track (made in a coroutine) that weft registered through
 * a call of the program's own (weft_wait), never through a hooked call:
 * the hooks' close() or dup2() onto it must run weft's close protocol, or
 * weft's entry still says registered when the real call has dropped the
 * kernel's registration, and the number's next file is never watched (its
 * reads park and are never woken).  Before, the hooks let only an fd they
 * had waited on go through weft, and the real call ran alone: the next
 * file's first call found the entry registered and epoll did not watch it.
 */
static void replaced_behind_weft(void *arg)
{
	bool dup = arg != NULL;
	int sv[2], nv[2];
	socket_pair(sv);
	socket_pair(nv);
	int n = sv[0];
	CHECK(hooked(n));
	CHECK(weft_wait(n, WEFT_IN, 0) == -1 && errno == ETIMEDOUT);	/* weft registers it */
	CHECK(epoll_watches(n));
	if (dup) {
		CHECK(dup2(nv[0], n) == n);	/* hooked */
	} else {
		CHECK(close(n) == 0);	/* hooked */
		CHECK(dup2(nv[0], n) == n);	/* the next file at the number */
	}
	CHECK(weft_wait(n, WEFT_IN, 0) == -1 && errno == ETIMEDOUT);
	CHECK(epoll_watches(n));	/* the next file is registered */
	CHECK(write(nv[1], "z", 1) == 1);
	char c = 0;
	CHECK(weft_read(n, &c, 1, -1) == 1 && c == 'z');
	CHECK(weft_close(n) == 0);
	close(sv[1]);
	close(nv[0]);
	close(nv[1]);
}

Test(hook, close_of_an_fd_weft_registered_leaves_the_next_file_clean, .timeout = 60)
{
	REQUIRE_HOOKS();
	run(1, replaced_behind_weft, NULL);
}

Test(hook, dup2_onto_an_fd_weft_registered_leaves_the_next_file_clean, .timeout = 60)
{
	REQUIRE_HOOKS();
	run(1, replaced_behind_weft, "dup2");
}
