/* SPDX-License-Identifier: MIT */
/*
 * coro_test.h — what the coroutine-level suites (io, sync, cancel) share:
 * checks that work inside coroutines, runtime start-up, sizes scaled for
 * sanitizers and valgrind, the one slack factor of wall-clock bounds, a
 * wait for coroutines to park (and for a thread to sleep in epoll_wait), channel operations in coroutines, a victim
 * blocked in every kind of call (cancel, interrupt), loopback
 * sockets, checks outside coroutines, and weft programs run in a child
 * (fatal paths).
 * Include after harness.h.
 */
#ifndef WEFT_TEST_CORO_TEST_H
#define WEFT_TEST_CORO_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#ifdef SYS_epoll_wait	/* not on AArch64, which has epoll_pwait only */
#define EPOLL_WAIT_NR(nr) ((nr) == SYS_epoll_wait)
#else
#define EPOLL_WAIT_NR(nr) false
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
 * must know which coroutines can park meanwhile (a yield is no park).
 * Fails after 10 s (slack) without. */
static inline void wait_parks(uint64_t parks, uint64_t n)
{
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (stats_now().total.parks < parks + n) {
		CHECK(weft_now() < give_up);	/* they never parked */
		if (weft_self())
			weft_yield();
		else	/* a plain thread: leave the CPUs to the workers */
			nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 }, NULL);
	}
}

/* Whether thread tid of this process is blocked in epoll_wait (or
 * epoll_pwait) with a timeout other than 0 (*timeout_ms: which), read from
 * /proc: a test waits for a worker or the monitor to be asleep there rather
 * than sleeping and assuming it. */
static inline bool thread_in_epoll_wait(long tid, int *timeout_ms)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/self/task/%ld/syscall", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	long nr;
	unsigned long long arg[4];
	bool in = fgets(line, sizeof line, f) &&
		  sscanf(line, "%ld %llx %llx %llx %llx", &nr, &arg[0], &arg[1], &arg[2], &arg[3]) == 5 &&
		  (nr == SYS_epoll_pwait || EPOLL_WAIT_NR(nr)) && (int)arg[3] != 0;
	fclose(f);
	if (in && timeout_ms)
		*timeout_ms = (int)arg[3];
	return in;
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

/* ---- every kind of blocking call, for the suites that end them (cancel,
 * interrupt): a victim coroutine blocks in one kind per round, on objects
 * that nobody else makes ready; the round's root holds the mutex or the
 * rwlock (write) for those kinds, and the join's target never returns by
 * itself. */
enum block_kind {
	BLOCK_READ, BLOCK_SLEEP, BLOCK_JOIN, BLOCK_MUTEX, BLOCK_COND, BLOCK_SEM,
	BLOCK_RWLOCK, BLOCK_WG, BLOCK_RECV, BLOCK_SEND, BLOCK_SELECT, BLOCK_KINDS
};

struct blocker {
	enum block_kind kind;
	int sv[2];
	weft_mutex *m;
	weft_cond *c;
	weft_sem *s;
	weft_rwlock *rw;
	weft_wg *wg;
	weft_chan *ch;
	weft_co *target;
	unsigned parked;	/* atomic: about to block */
	int result, err;	/* what the blocking call returned, its errno */
	bool cond_mutex_held;	/* COND: the mutex was held again on return */
};

/* The kind's blocking call (v->m held for COND: see blocker_main). */
static inline int block(struct blocker *v)
{
	char b;
	int x = 0;
	weft_chan_case cs[1] = { { v->ch, WEFT_CHAN_RECV, &x, 0, 0 } };
	switch (v->kind) {
	case BLOCK_READ:
		return (int)weft_read(v->sv[0], &b, 1, -1);
	case BLOCK_SLEEP:
		return weft_sleep(-1);
	case BLOCK_JOIN:
		return weft_join(v->target);
	case BLOCK_MUTEX:
		return weft_mutex_lock(v->m);
	case BLOCK_COND: {
		int r = weft_cond_wait(v->c, v->m, -1);
		int e = errno;
		v->cond_mutex_held = weft_mutex_unlock(v->m) == 0;
		errno = e;
		return r;
	}
	case BLOCK_SEM:
		return weft_sem_acquire(v->s, -1);
	case BLOCK_RWLOCK:
		return weft_rwlock_rdlock(v->rw, -1);
	case BLOCK_WG:
		return weft_wg_wait(v->wg, -1);
	case BLOCK_RECV:
		return weft_chan_recv(v->ch, &x, -1);
	case BLOCK_SEND:
		return weft_chan_send(v->ch, &x, -1);
	case BLOCK_SELECT:
		return weft_chan_select(cs, 1, -1);
	default:
		abort();
	}
}

/* The start of a victim: takes COND's mutex, marks itself parked and
 * blocks; v->result and v->err get the call's outcome. */
static inline void blocker_main(struct blocker *v)
{
	if (v->kind == BLOCK_COND)
		CHECK(weft_mutex_lock(v->m) == 0);
	__atomic_store_n(&v->parked, 1, __ATOMIC_RELEASE);
	v->result = block(v);
	v->err = errno;
}

/* A round of kind k: the objects, the join's target (target_fn, parked for
 * good), the lock the root holds; then the victim (victim_fn, which calls
 * blocker_main), returned once parked in its blocking call. */
static inline weft_co *blocker_start(struct blocker *v, enum block_kind k,
				     void (*target_fn)(void *), void (*victim_fn)(void *))
{
	*v = (struct blocker){ .kind = k, .m = weft_mutex_new(), .c = weft_cond_new(),
			       .s = weft_sem_new(0), .rw = weft_rwlock_new(),
			       .wg = weft_wg_new(), .ch = weft_chan_new(sizeof(int), 0) };
	CHECK(v->m && v->c && v->s && v->rw && v->wg && v->ch);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, v->sv) == 0);
	CHECK(weft_wg_add(v->wg, 1) == 0);
	uint64_t parks = stats_now().total.parks;
	v->target = go(target_fn, NULL);
	wait_parks(parks, 1);	/* the target, for good */
	if (k == BLOCK_MUTEX)
		CHECK(weft_mutex_lock(v->m) == 0);
	if (k == BLOCK_RWLOCK)
		CHECK(weft_rwlock_wrlock(v->rw, -1) == 0);
	parks = stats_now().total.parks;
	weft_co *co = go(victim_fn, v);
	while (!__atomic_load_n(&v->parked, __ATOMIC_ACQUIRE))
		weft_yield();
	wait_parks(parks, 1);	/* the victim, in its blocking call */
	return co;
}

/* The end of a round whose victim was joined: the root's lock released, the
 * objects checked free of waiters, the target cancelled (it stayed
 * joinable) and joined, everything closed. */
static inline void blocker_end(struct blocker *v)
{
	if (v->kind == BLOCK_COND)
		CHECK(v->cond_mutex_held);
	if (v->kind == BLOCK_MUTEX)
		CHECK(weft_mutex_unlock(v->m) == 0);
	if (v->kind == BLOCK_RWLOCK)
		CHECK(weft_rwlock_unlock(v->rw) == 0);
	CHECK(weft_mutex_trylock(v->m) == 0 && weft_mutex_unlock(v->m) == 0);
	CHECK(weft_rwlock_wrlock(v->rw, 0) == 0 && weft_rwlock_unlock(v->rw) == 0);
	CHECK(weft_sem_release(v->s) == 0 && weft_sem_acquire(v->s, 0) == 0);
	CHECK(weft_cancel(v->target) == 0);
	CHECK(weft_join(v->target) == 0);
	CHECK(weft_close(v->sv[0]) == 0 && weft_close(v->sv[1]) == 0);
	weft_mutex_free(v->m);
	weft_cond_free(v->c);
	weft_sem_free(v->s);
	weft_rwlock_free(v->rw);
	weft_wg_free(v->wg);
	weft_chan_free(v->ch);
}

/* The offload pool's one helper (WEFT_BLOCKING_THREADS=1) held by a
 * coroutine, so that every other offloaded call queues behind it. */
struct pool_hold {
	int pipe[2];
	atomic_bool started;
};

/* An offloaded fn that holds its helper until pool_hold_release. */
static inline void pool_hold_fn(void *arg)
{
	struct pool_hold *bl = arg;
	atomic_store(&bl->started, true);
	char c;
	CHECK(read(bl->pipe[0], &c, 1) == 1);
}

static inline void pool_hold_main(void *arg)
{
	CHECK(weft_offload(pool_hold_fn, arg) == 0);
}

/* Starts a coroutine that holds the only helper until pool_hold_release,
 * once the helper runs it. */
static inline weft_co *pool_hold_start(struct pool_hold *bl)
{
	CHECK(pipe2(bl->pipe, O_CLOEXEC) == 0);
	atomic_store(&bl->started, false);
	weft_co *co = go(pool_hold_main, bl);
	while (!atomic_load(&bl->started))
		weft_yield();
	return co;
}

/* Lets the helper go and joins its holder. */
static inline void pool_hold_release(struct pool_hold *bl, weft_co *holder)
{
	CHECK(write(bl->pipe[1], "g", 1) == 1);
	join(holder);
	close(bl->pipe[0]);
	close(bl->pipe[1]);
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

/* A new empty file in $TMPDIR (else /tmp) named weft-<tag>-XXXXXX, opened
 * read-write and unlinked at once: its fd. */
static inline int unlinked_temp_file(const char *tag)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[4096];
	snprintf(path, sizeof path, "%s/weft-%s-XXXXXX", dir, tag);
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	return fd;
}

#endif
