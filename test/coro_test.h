/* SPDX-License-Identifier: MIT */
/*
 * coro_test.h — what the coroutine-level suites (io, sync, cancel) share:
 * checks that work inside coroutines, runtime start-up, sizes scaled for
 * sanitizers and valgrind, the one slack factor of wall-clock bounds, a
 * wait for coroutines to park, channel operations in coroutines, loopback
 * sockets, checks outside coroutines, and weft programs run in a child
 * (fatal paths).
 * Include after harness.h.
 */
#ifndef WEFT_TEST_CORO_TEST_H
#define WEFT_TEST_CORO_TEST_H

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weft.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

/* Checks inside coroutines: abort (the harness reports the crash), since
 * cr_assert cannot unwind a worker thread. */
#define CHECK(c)                                                                      \
	do {                                                                          \
		if (!(c)) {                                                           \
			fprintf(stderr, "%s:%d: CHECK(%s) failed, errno %d\n", __FILE__, \
				__LINE__, #c, errno);                                 \
			abort();                                                      \
		}                                                                     \
	} while (0)

static const int64_t MS = 1000 * 1000;

#if defined(WEFT_TEST_TSAN) || defined(WEFT_TEST_ASAN)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* An upper bound on a wall-clock duration, scaled by the one factor the
 * suite has for its instrumented runs: valgrind runs one thread at a time,
 * the sanitizers slow every access.  Every such bound goes through it; a
 * check that can wait for a state instead does. */
static inline int64_t slack(int64_t ns)
{
	if (RUNNING_ON_VALGRIND)
		return 10 * ns;
	return SANITIZED ? 5 * ns : ns;
}

/* A size for plain builds, sanitizer builds and runs under valgrind. */
static inline unsigned scaled(unsigned plain, unsigned sanitized, unsigned valgrind)
{
	if (RUNNING_ON_VALGRIND)
		return valgrind;
	return SANITIZED ? sanitized : plain;
}

/* A snapshot of the running runtime's counters (weft_stats_get). */
static inline weft_stats stats_now(void)
{
	weft_stats st = { .size = sizeof st };
	CHECK(weft_stats_get(&st) == 0);
	return st;
}

/* weft_main(fn, arg) on `workers` workers, asserting success. */
static inline void run(unsigned workers, void (*fn)(void *), void *arg)
{
	cr_assert_eq(weft_main(fn, arg, &WEFT_CONFIG(.workers = workers)), 0, "errno %d", errno);
}

/* Yields until n more parks than `parks` (a weft_stats total.parks read
 * earlier) have happened: coroutines that switched out to wait, each
 * registered where its waker finds it.  A test waits for that state before
 * it acts on the waiters, rather than sleeping and assuming it; the caller
 * must know which coroutines can park meanwhile (a yield is no park). */
static inline void wait_parks(uint64_t parks, uint64_t n)
{
	while (stats_now().total.parks < parks + n)
		weft_yield();
}

static inline weft_co *go(void (*fn)(void *), void *arg)
{
	weft_co *co = weft_spawn(fn, arg);
	CHECK(co != NULL);
	return co;
}

static inline void join(weft_co *co)
{
	CHECK(weft_join(co) == 0);
}

/* A connected pair of Unix stream sockets, close-on-exec. */
static inline void socket_pair(int sv[2])
{
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
}

/* One channel operation without a deadline, as a coroutine (chan_op_main):
 * its result and errno; value is what a send sends, what a receive got. */
struct chan_op {
	weft_chan *ch;
	int op;		/* WEFT_CHAN_SEND or WEFT_CHAN_RECV */
	int value;
	int result, err;
};

static inline void chan_op_main(void *arg)
{
	struct chan_op *p = arg;
	p->result = p->op == WEFT_CHAN_SEND ? weft_chan_send(p->ch, &p->value, -1)
					    : weft_chan_recv(p->ch, &p->value, -1);
	p->err = errno;
}

/* A socket of `type` bound to 127.0.0.1, any port; *addr gets the address. */
static inline int loopback_socket(int type, struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	memset(addr, 0, sizeof *addr);
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)addr, sizeof *addr) == 0);
	socklen_t len = sizeof *addr;
	CHECK(getsockname(fd, (struct sockaddr *)addr, &len) == 0);
	return fd;
}

/* Runs check (cr_asserts that weft calls fail outside a coroutine) twice:
 * with no runtime, then on this plain thread while a runtime runs. */
static inline void check_outside_coroutines(void (*check)(void))
{
	check();
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	check();
	cr_assert_eq(weft_shutdown(), 0);
}

/* Sends this process's stderr (fd 2) to a temporary file until
 * stderr_capture_end copies what was written into buf (NUL-terminated). */
struct stderr_capture {
	FILE *tmp;
	int saved;
};

static inline struct stderr_capture stderr_capture_begin(void)
{
	fflush(stderr);
	struct stderr_capture c = { tmpfile(), dup(STDERR_FILENO) };
	if (!c.tmp || c.saved < 0)
		abort();
	dup2(fileno(c.tmp), STDERR_FILENO);
	return c;
}

static inline void stderr_capture_end(struct stderr_capture *c, char *buf, size_t size)
{
	fflush(stderr);
	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	rewind(c->tmp);
	size_t n = fread(buf, 1, size - 1, c->tmp);
	buf[n] = 0;
	fclose(c->tmp);
}

/* Runs fn as a weft program in a child, after setup (if any) there;
 * returns its stderr, sets *status. */
static inline char *run_child_after(void (*setup)(void), void (*fn)(void *), int *status)
{
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		if (setup)
			setup();
		weft_main(fn, NULL, &WEFT_CONFIG(.workers = 2));
		_exit(0);
	}
	close(fds[1]);
	static char buf[4096];
	size_t n = 0;
	ssize_t r;
	while ((r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(fds[0]);
	cr_assert_eq(waitpid(pid, status, 0), pid);
	return buf;
}

#endif
