/* SPDX-License-Identifier: MIT */
/* Fault injection (meson -Dfault_injection=true): every Nth internal
 * allocation or thread creation fails.  Each failure must surface as
 * NULL/-1 with ENOMEM or EAGAIN, lose nothing already running, and leave a
 * runtime that keeps serving once the faults stop. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "harness.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/ioctl.h>

#include "coro_test.h"
#include "fault.h"
#include "offload.h"	/* white-box: weft__offload_until (adv-cmiss2) */
#include "uring_test.h"	/* white-box: a pipe read on a ring */
#include "worker.h"	/* white-box: the worker's timer heap */

/* Retries an allocation while it fails with ENOMEM, counting the failures. */
#define RETRY(var, expr, failures)                              \
	while (!((var) = (expr))) {                             \
		CHECK(errno == ENOMEM);                         \
		(failures)++;                                   \
	}

/* ---- weft_init fails cleanly at every step, then works */

Test(fault, init_fails_cleanly_then_works)
{
	unsigned failed = 0;
	for (unsigned n = 1; n <= 40; n++) {
		weft__fault_every(n);
		int r = weft_init(&WEFT_CONFIG(.workers = 2));
		int e = errno;
		weft__fault_every(0);
		if (r == 0) {
			cr_assert_eq(weft_shutdown(), 0);
			continue;
		}
		failed++;
		cr_assert(e == ENOMEM || e == EAGAIN, "every %u: errno %d", n, e);
		cr_assert_eq(weft_worker_count(), 0, "nothing left half-started");
	}
	cr_assert_gt(failed, 0, "some init step was made to fail");
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	cr_assert_eq(weft_shutdown(), 0);
}

/* ---- a workload that keeps working through the faults */

enum { PRODUCERS = 64, ITEMS = 50 };

struct workload {
	weft_chan *ch;
	weft_mutex *m;
	weft_key *key;
	int64_t counted;	/* under m */
	unsigned failures;	/* atomic */
};

static void note_failure(struct workload *wl)
{
	__atomic_add_fetch(&wl->failures, 1, __ATOMIC_SEQ_CST);
}

static void producer(void *arg)
{
	struct workload *wl = arg;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	for (int i = 1; i <= ITEMS; i++) {
		/* I/O: registering fds may need the fd table to grow */
		char b = (char)i;
		while (weft_write(sv[0], &b, 1, -1) != 1) {
			CHECK(errno == ENOMEM);
			note_failure(wl);
		}
		while (weft_read(sv[1], &b, 1, -1) != 1) {
			CHECK(errno == ENOMEM);
			note_failure(wl);
		}
		CHECK(b == (char)i);
		/* a deadline: the timer heap may need to grow */
		while (weft_sleep(weft_now() + 10000) != 0) {
			CHECK(errno == ENOMEM);
			note_failure(wl);
		}
		/* a local value: the coroutine's table may need to grow */
		if (weft_local_set(wl->key, (void *)(intptr_t)i) != 0) {
			CHECK(errno == ENOMEM);
			note_failure(wl);
		}
		CHECK(weft_mutex_lock(wl->m) == 0);
		wl->counted += i;
		CHECK(weft_mutex_unlock(wl->m) == 0);
		CHECK(weft_chan_send(wl->ch, &i, -1) == 0);	/* never allocates */
	}
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

static void workload_main(void *arg)
{
	unsigned every = *(unsigned *)arg;
	struct workload wl = { 0 };
	unsigned fails = 0;
	uint64_t before = weft__fault_every(every);
	RETRY(wl.ch, weft_chan_new(sizeof(int), 8), fails);
	RETRY(wl.m, weft_mutex_new(), fails);
	RETRY(wl.key, weft_key_new(NULL), fails);
	weft_co *cos[PRODUCERS];
	for (int i = 0; i < PRODUCERS; i++)
		RETRY(cos[i], weft_spawn(producer, &wl), fails);
	int64_t sum = 0;
	for (int i = 0; i < PRODUCERS * ITEMS; i++) {
		int v;
		CHECK(weft_chan_recv(wl.ch, &v, -1) == 0);
		sum += v;
	}
	for (int i = 0; i < PRODUCERS; i++)
		join(cos[i]);
	uint64_t injected = weft__fault_every(0) - before;
	/* nothing lost, nothing counted twice */
	const int64_t want = (int64_t)PRODUCERS * ITEMS * (ITEMS + 1) / 2;
	CHECK(sum == want && wl.counted == want);
	CHECK(injected > 0 || every > 10);	/* a rare fault may not come at all */
	fprintf(stderr, "every %u: %llu faults injected, %u seen by the workload\n", every,
		(unsigned long long)injected, fails + wl.failures);
	/* and the runtime keeps serving */
	for (int i = 0; i < PRODUCERS; i++)
		cos[i] = go(producer, &wl);
	for (int i = 0; i < PRODUCERS * ITEMS; i++) {
		int v;
		CHECK(weft_chan_recv(wl.ch, &v, -1) == 0);
	}
	for (int i = 0; i < PRODUCERS; i++)
		join(cos[i]);
	weft_chan_free(wl.ch);
	weft_mutex_free(wl.m);
	weft_key_free(wl.key);
}

Test(fault, workload_survives_every_nth_allocation_failing, .timeout = 300)
{
	unsigned everies[] = { 2, 3, 7, 50 };	/* one allocation in n fails */
	for (size_t i = 0; i < sizeof everies / sizeof *everies; i++)
		run(2, workload_main, &everies[i]);
}

/* ---- weft_offload when no helper thread can be created */

static void mark(void *arg)
{
	*(int *)arg = 1;
}

static void offload_main(void *unused)
{
	(void)unused;
	int ran = 0;
	weft__fault_every(1);	/* every thread creation fails */
	errno = 0;
	int r = weft_offload(mark, &ran);
	int e = errno;
	weft__fault_every(0);
	CHECK(r == -1 && e == EAGAIN && !ran);
	CHECK(weft_offload(mark, &ran) == 0 && ran);
}

Test(fault, offload_without_threads_is_eagain)
{
	run(1, offload_main, NULL);
}

/* ---- a weft_close that runs to completion while a call is starting */

struct begin_race {
	int writer;		/* the write end of the pipe now at the number */
	ssize_t first, again;	/* weft_read's results: in the window, after */
	int first_errno;
	char got;
};

static struct begin_race race;

/* Run by io_begin in its window (fault.h): closes fd with weft_close, then
 * puts another pipe's read end, with a byte in it, at the same number. */
static void close_and_reuse(uintptr_t what)
{
	int fd = (int)what;
	weft__fault_on(WEFT__FAULT_IO_BEGIN, NULL);	/* once */
	CHECK(weft_close(fd) == 0);
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	if (p[0] != fd) {	/* the lowest free number is usually fd itself */
		CHECK(dup2(p[0], fd) == fd);
		CHECK(close(p[0]) == 0);
	}
	CHECK(write(p[1], "x", 1) == 1);
	race.writer = p[1];
}

static void read_while_closed(void *unused)
{
	(void)unused;
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	weft__fault_on(WEFT__FAULT_IO_BEGIN, close_and_reuse);
	char b = 0;
	race.first = weft_read(p[0], &b, 1, -1);
	race.first_errno = errno;
	/* a call that starts afterwards is on the new pipe, from a clean entry */
	race.again = weft_read(p[0], &race.got, 1, weft_now() + 1000 * MS);
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0 && close(race.writer) == 0);
}

/* A call whose start overlaps a whole weft_close of its fd must not go on
 * with the fd number, which may already name another file (fdtable.h). */
Test(fault, a_close_during_a_calls_start_is_noticed)
{
	run(1, read_while_closed, NULL);
	cr_assert(race.first == -1 && race.first_errno == ECANCELED,
		  "weft_read in the window returned %zd (errno %d): it read the reused number",
		  race.first, race.first_errno);
	cr_assert(race.again == 1 && race.got == 'x', "the next read: %zd", race.again);
}

/* ---- a call that starts while weft_close is between its bookkeeping and
 * its close(2) */

struct close_race {
	int fd;			/* the number raced on */
	weft_sem *closing, *go;	/* the closer is in its window; it may go on */
	unsigned begun;		/* atomic: the racer's io_begin read the generation */
	int racer_result, racer_errno;
	int nonblocking;	/* the next file's flag after its first weft call */
	ssize_t read;		/* the next file's parked read */
	int read_errno;
	char got;
};

static struct close_race cl;

/* WEFT__FAULT_IO_BEGIN: the racer has read the generation of its call. */
static void note_begun(uintptr_t what)
{
	if ((int)what == cl.fd)
		__atomic_store_n(&cl.begun, 1, __ATOMIC_RELEASE);
}

/* WEFT__FAULT_CLOSE or _CLOSED: holds the closer in its window until told
 * to go. */
static void hold_closer(uintptr_t what)
{
	(void)what;
	weft__fault_on(WEFT__FAULT_CLOSE, NULL);	/* once */
	weft__fault_on(WEFT__FAULT_CLOSED, NULL);
	CHECK(weft_sem_release(cl.closing) == 0);
	CHECK(weft_sem_acquire(cl.go, -1) == 0);
}

static void closer(void *unused)
{
	(void)unused;
	CHECK(weft_close(cl.fd) == 0);
}

static void racer(void *unused)
{
	(void)unused;
	/* no deadline: one already past would not wait out the close(2)
	 * (ETIMEDOUT, io_begin) */
	cl.racer_result = weft_wait(cl.fd, WEFT_IN, -1);
	cl.racer_errno = errno;
}

static void next_reader(void *unused)
{
	(void)unused;
	cl.read = weft_read(cl.fd, &cl.got, 1, -1);
	cl.read_errno = errno;
}

/* One worker: a coroutine runs until it parks, yields or returns. */
static void call_during_close(void *unused)
{
	(void)unused;
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	cl.fd = p[0];
	CHECK(weft_wait(cl.fd, WEFT_IN, 0) == -1 && errno == ETIMEDOUT);	/* registered */
	CHECK((cl.closing = weft_sem_new(0)) && (cl.go = weft_sem_new(0)));
	weft__fault_on(WEFT__FAULT_CLOSE, hold_closer);
	weft__fault_on(WEFT__FAULT_IO_BEGIN, note_begun);
	weft_co *c = go(closer, NULL);
	CHECK(weft_sem_acquire(cl.closing, -1) == 0);
	/* The racer starts inside the closer's window.  The main coroutine
	 * runs again once the racer has read the generation and then parked,
	 * yielded (waiting for the close) or returned: whatever it registers,
	 * it has registered before the close(2).  It is joined before the
	 * number is reused (a call racing that is a race of the caller's). */
	weft_co *r = go(racer, NULL);
	while (!__atomic_load_n(&cl.begun, __ATOMIC_ACQUIRE))
		weft_yield();
	weft__fault_on(WEFT__FAULT_IO_BEGIN, NULL);
	CHECK(weft_sem_release(cl.go) == 0);
	join(c);
	join(r);
	CHECK(close(p[1]) == 0);
	/* the next file at the number: a blocking pipe, as pipe(2) makes it */
	int q[2];
	CHECK(pipe2(q, O_CLOEXEC) == 0);
	if (q[0] != cl.fd) {
		CHECK(dup2(q[0], cl.fd) == cl.fd);
		CHECK(close(q[0]) == 0);
	}
	CHECK(weft_wait(cl.fd, WEFT_IN, 0) == -1 && errno == ETIMEDOUT);
	int fl = fcntl(cl.fd, F_GETFL);
	CHECK(fl >= 0);
	cl.nonblocking = (fl & O_NONBLOCK) != 0;
	if (cl.nonblocking) {	/* else its read would block the one worker */
		weft_co *n = go(next_reader, NULL);
		weft_yield();	/* it parks: the pipe is empty */
		CHECK(write(q[1], "y", 1) == 1);
		join(n);
	}
	CHECK(weft_close(cl.fd) == 0 && close(q[1]) == 0);
	weft_sem_free(cl.closing);
	weft_sem_free(cl.go);
}

/* A call that starts between weft_close's bookkeeping and its close(2)
 * must not register the file being closed: close(2) would drop the
 * kernel's registration behind the entry's back, and the next file with
 * the number would inherit an entry that says registered (fdtable.h). */
Test(fault, a_call_during_closes_close_leaves_no_state)
{
	run(1, call_during_close, NULL);
	cr_assert(cl.nonblocking, "the next file at the number is still blocking: its first "
				  "weft call found the entry registered and skipped registration");
	cr_assert(cl.read == 1 && cl.got == 'y', "the next file's read: %zd", cl.read);
	/* it started as close(2) was about to run: it comes after the close,
	 * on a number that names nothing */
	cr_assert(cl.racer_result == -1 && cl.racer_errno == EBADF, "the racer: %d (errno %d)",
		  cl.racer_result, cl.racer_errno);
}

/* The closer held after its close(2): the number is free, and taken at once
 * by a new pipe, on which a coroutine starts a read. */
static void call_after_closes_close(void *unused)
{
	(void)unused;
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	cl.fd = p[0];
	CHECK(weft_wait(cl.fd, WEFT_IN, 0) == -1 && errno == ETIMEDOUT);	/* registered */
	CHECK((cl.closing = weft_sem_new(0)) && (cl.go = weft_sem_new(0)));
	__atomic_store_n(&cl.begun, 0, __ATOMIC_RELAXED);
	weft__fault_on(WEFT__FAULT_CLOSED, hold_closer);
	weft_co *c = go(closer, NULL);
	CHECK(weft_sem_acquire(cl.closing, -1) == 0);
	CHECK(close(p[1]) == 0);
	int q[2];
	CHECK(pipe2(q, O_CLOEXEC) == 0);
	if (q[0] != cl.fd) {
		CHECK(dup2(q[0], cl.fd) == cl.fd);
		CHECK(close(q[0]) == 0);
	}
	weft__fault_on(WEFT__FAULT_IO_BEGIN, note_begun);
	weft_co *n = go(next_reader, NULL);
	while (!__atomic_load_n(&cl.begun, __ATOMIC_ACQUIRE))
		weft_yield();	/* the reader has started, and parked or yielded */
	weft__fault_on(WEFT__FAULT_IO_BEGIN, NULL);
	CHECK(weft_sem_release(cl.go) == 0);
	join(c);
	weft_yield();	/* the reader parks: the pipe is empty */
	CHECK(write(q[1], "z", 1) == 1);
	join(n);
	int fl = fcntl(cl.fd, F_GETFL);
	CHECK(fl >= 0);
	cl.nonblocking = (fl & O_NONBLOCK) != 0;
	CHECK(weft_close(cl.fd) == 0 && close(q[1]) == 0);
	weft_sem_free(cl.closing);
	weft_sem_free(cl.go);
}

/* A file that takes the number the moment weft_close's close(2) frees it
 * belongs to someone else: its calls are not cancelled by that close, and
 * they start from a clean entry. */
Test(fault, a_call_on_the_next_file_during_closes_end_is_its_own)
{
	cl.read = 0;
	run(1, call_after_closes_close, NULL);
	cr_assert(cl.read == 1 && cl.got == 'z', "the next file's read: %zd (errno %d)", cl.read,
		  cl.read_errno);
	cr_assert(cl.nonblocking, "the next file was not registered");
}

/* ---- a claim that finds only abandoned waiters (waitq.h) */

/* Each test runs a hand-over in the window between a waiter's abandon and
 * its relock (fault.h), so the claim drops the waiter's node: the
 * hand-over must then do what the waiter's give-up step would have, and
 * the waiter must not do it again.  The hand-over runs in another
 * coroutine (one worker): the claimer that dropped the node waits, before
 * it returns, for the waiter to leave the object, so the waiter, held in
 * the window, lets it run until it is in the hand-over (`handing`: it
 * yields only there, in that wait, or once done) and then goes on. */
static struct {
	weft_sem *sem;
	weft_rwlock *rw;
	weft_mutex *m;
	weft_cond *c;
	void (*hand)(void);
	weft_co *helper;
	atomic_int in_window, handing, queued;
} ab;

static void handing_helper(void *unused)
{
	(void)unused;
	atomic_store(&ab.handing, 1);
	ab.hand();
}

static void hand_from_another(uintptr_t what)
{
	(void)what;
	weft__fault_on(WEFT__FAULT_ABANDONED, NULL);	/* once */
	atomic_store(&ab.handing, 0);
	ab.helper = go(handing_helper, NULL);
	while (!atomic_load(&ab.handing))
		weft_yield();
}

static void release_sem(void)
{
	CHECK(weft_sem_release(ab.sem) == 0);
}

static void sem_window(void *unused)
{
	(void)unused;
	ab.sem = weft_sem_new(0);
	CHECK(ab.sem);
	ab.hand = release_sem;
	weft__fault_on(WEFT__FAULT_ABANDONED, hand_from_another);
	CHECK(weft_sem_acquire(ab.sem, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	join(ab.helper);
	/* the release found nobody live: it kept its permit */
	CHECK(weft_sem_tryacquire(ab.sem) == 0);
	CHECK(weft_sem_tryacquire(ab.sem) == -1 && errno == EAGAIN);
	weft_sem_free(ab.sem);
}

Test(fault, a_release_finding_only_an_abandoned_waiter_keeps_its_permit)
{
	run(1, sem_window, NULL);
}

static void read_unlock(void)
{
	CHECK(weft_rwlock_unlock(ab.rw) == 0);	/* read holds are counted, not owned */
}

/* The last reader leaves while the only queued writer is abandoning. */
static void writer_window(void *unused)
{
	(void)unused;
	ab.rw = weft_rwlock_new();
	CHECK(ab.rw && weft_rwlock_rdlock(ab.rw, -1) == 0);
	ab.hand = read_unlock;
	weft__fault_on(WEFT__FAULT_ABANDONED, hand_from_another);
	CHECK(weft_rwlock_wrlock(ab.rw, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	join(ab.helper);
	/* free, with no waiter flag left behind */
	CHECK(weft_rwlock_wrlock(ab.rw, weft_now()) == 0 && weft_rwlock_unlock(ab.rw) == 0);
	CHECK(weft_rwlock_rdlock(ab.rw, weft_now()) == 0 && weft_rwlock_unlock(ab.rw) == 0);
	weft_rwlock_free(ab.rw);
}

Test(fault, the_last_reader_out_finding_only_an_abandoned_writer_frees_the_lock)
{
	run(1, writer_window, NULL);
}

/* POSIX's pthread_cond_destroy example (broadcast, unlock, free at once)
 * against a waiter whose deadline fired and that abandoned its wait: the
 * broadcast drops its node, and must not return before the waiter, on its
 * way to relock c, has left it (a free before that: heap-use-after-free
 * under ASan in the waiter's relock). */
static void broadcast_unlock_free(void)
{
	CHECK(weft_mutex_lock(ab.m) == 0);
	CHECK(weft_cond_broadcast(ab.c) == 0);
	CHECK(weft_mutex_unlock(ab.m) == 0);
	weft_cond_free(ab.c);
}

static void cond_window(void *unused)
{
	(void)unused;
	CHECK((ab.m = weft_mutex_new()) && (ab.c = weft_cond_new()));
	ab.hand = broadcast_unlock_free;
	weft__fault_on(WEFT__FAULT_ABANDONED, hand_from_another);
	CHECK(weft_mutex_lock(ab.m) == 0);
	CHECK(weft_cond_wait(ab.c, ab.m, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_mutex_unlock(ab.m) == 0);
	join(ab.helper);
	weft_mutex_free(ab.m);
}

Test(fault, a_broadcast_that_dropped_an_abandoned_waiter_returns_after_it_left_the_cond)
{
	run(1, cond_window, NULL);
}

/* weft_cond_wait releases its mutex under the cond's lock, and that release
 * may drop a cancelled locker's node: it must wait for that locker to leave
 * the mutex only once the cond's lock is released (a coroutine yields in
 * that wait; holding the lock, it hung the locker's signal on its worker). */
static void signal_in_window(uintptr_t what)
{
	(void)what;
	weft__fault_on(WEFT__FAULT_ABANDONED, NULL);	/* once */
	atomic_store(&ab.in_window, 1);
	while (!atomic_load(&ab.handing))
		weft_yield();
	CHECK(weft_cond_signal(ab.c) == 0);
}

static void cancelled_locker(void *unused)
{
	(void)unused;
	weft__fault_on(WEFT__FAULT_ABANDONED, signal_in_window);
	atomic_store(&ab.queued, 1);
	CHECK(weft_mutex_lock(ab.m) == -1 && errno == ECANCELED);
}

static weft_co *spawn_queued(void (*fn)(void *));

static void cond_release_window(void *unused)
{
	(void)unused;
	CHECK((ab.m = weft_mutex_new()) && (ab.c = weft_cond_new()));
	atomic_store(&ab.in_window, 0);
	atomic_store(&ab.handing, 0);
	CHECK(weft_mutex_lock(ab.m) == 0);
	weft_co *locker = spawn_queued(cancelled_locker);
	CHECK(weft_cancel(locker) == 0);
	while (!atomic_load(&ab.in_window))
		weft_yield();
	/* we yield next in the cond wait: parked, or in the release's wait */
	atomic_store(&ab.handing, 1);
	CHECK(weft_cond_wait(ab.c, ab.m, -1) == 0);
	CHECK(weft_mutex_unlock(ab.m) == 0);
	join(locker);
	weft_cond_free(ab.c);
	weft_mutex_free(ab.m);
}

Test(fault, a_cond_waits_mutex_release_waits_for_a_dropped_locker_without_the_conds_lock)
{
	run(1, cond_release_window, NULL);
}

/* A channel operation that drops an abandoned receiver and then parks
 * (capacity 0: nobody live to take the element) settles after its park;
 * with capacity 1 it buffers and settles before it returns.  The
 * receiver, held in its window, goes on once the sender is in its park or
 * its settle; the sender must then return (no hang) and the element be
 * there for the next receive. */
static weft_chan *ab_ch;
static int ab_send_rc;
static atomic_int ab_settles;

static void count_settle(uintptr_t what)
{
	(void)what;
	atomic_fetch_add(&ab_settles, 1);
}

static void send_one(void)
{
	int v = 5;
	ab_send_rc = weft_chan_send(ab_ch, &v, -1);
}

static void chan_window(void *arg)
{
	size_t cap = *(size_t *)arg;
	CHECK((ab_ch = weft_chan_new(sizeof(int), cap)));
	ab.hand = send_one;
	atomic_store(&ab_settles, 0);
	weft__fault_on(WEFT__FAULT_DROPPED, count_settle);
	weft__fault_on(WEFT__FAULT_ABANDONED, hand_from_another);
	int v = 0;
	CHECK(weft_chan_recv(ab_ch, &v, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_chan_recv(ab_ch, &v, -1) == 0 && v == 5);
	join(ab.helper);
	CHECK(ab_send_rc == 0);
	weft__fault_on(WEFT__FAULT_DROPPED, NULL);
	/* buffered: the send waited for us in its settle (it dropped our
	 * node); parked: we left while it was parked, nothing to wait for */
	CHECK(atomic_load(&ab_settles) == (cap ? 1 : 0));
	weft_chan_free(ab_ch);
}

Test(fault, a_send_that_dropped_an_abandoned_receiver_settles_after_its_park_or_its_buffering)
{
	size_t cap = 0;
	run(1, chan_window, &cap);
	cap = 1;
	run(1, chan_window, &cap);
}

static void wait_handed(uintptr_t what)
{
	(void)what;
	weft__fault_on(WEFT__FAULT_ABANDONED, NULL);
	atomic_store(&ab.in_window, 1);
	while (!atomic_load(&ab.handing))
		weft_yield();
}

static void queued_writer(void *unused)
{
	(void)unused;
	atomic_store(&ab.queued, 1);
	CHECK(weft_rwlock_wrlock(ab.rw, -1) == 0 && weft_rwlock_unlock(ab.rw) == 0);
}

static void abandoning_reader(void *unused)
{
	(void)unused;
	weft__fault_on(WEFT__FAULT_ABANDONED, wait_handed);
	atomic_store(&ab.queued, 1);
	CHECK(weft_rwlock_rdlock(ab.rw, weft_now() + MS) == -1 && errno == ETIMEDOUT);
}

/* One worker: a coroutine that set `queued` and let us run is parked. */
static weft_co *spawn_queued(void (*fn)(void *))
{
	atomic_store(&ab.queued, 0);
	weft_co *co = go(fn, NULL);
	while (!atomic_load(&ab.queued))
		weft_yield();
	return co;
}

/* A writer's unlock finds readers queued, all abandoning: the writer
 * queued behind them must get the lock. */
static void reader_window(void *unused)
{
	(void)unused;
	ab.rw = weft_rwlock_new();
	CHECK(ab.rw && weft_rwlock_wrlock(ab.rw, -1) == 0);
	weft_co *w = spawn_queued(queued_writer);
	weft_co *r = spawn_queued(abandoning_reader);
	while (!atomic_load(&ab.in_window))
		weft_yield();
	atomic_store(&ab.handing, 1);	/* we yield only in the unlock's wait, or once past it */
	CHECK(weft_rwlock_unlock(ab.rw) == 0);
	join(r);
	join(w);
	CHECK(weft_rwlock_wrlock(ab.rw, weft_now()) == 0 && weft_rwlock_unlock(ab.rw) == 0);
	CHECK(weft_rwlock_rdlock(ab.rw, weft_now()) == 0 && weft_rwlock_unlock(ab.rw) == 0);
	weft_rwlock_free(ab.rw);
}

Test(fault, a_write_unlock_finding_only_abandoned_readers_admits_the_writer)
{
	run(1, reader_window, NULL);
}

/* ---- adv-cmiss (b4afdb1, weft__uring_stop): the stop of a ring read
 * waits for the read's CQE with a deadline, whose timer needs room in the
 * worker's heap.  A heap that cannot grow (ENOMEM) wakes that wait at once
 * (co_wait's weft__timer_add failure); it is not cancellable, so
 * weft__completion_wait takes it for a stray wake and waits again, and
 * again: the coroutine spins without ever switching out, its one worker
 * never reaps the ring (the cancel's CQE and the read's are there), and
 * nothing else does (the monitor adopts stuck workers only where there are
 * several).  Before b4afdb1 that wait had no deadline and no timer.  Fails
 * by Criterion's timeout (the call never returns). */

static void long_sleeper(void *unused)
{
	(void)unused;
	weft_sleep(weft_now() + 3600 * (int64_t)1000000000);
}

struct stop_reader {
	int fd;
	ssize_t n;
	int err;
};

static void stop_reader_main(void *arg)
{
	struct stop_reader *r = arg;
	char c;
	r->n = weft_pread(r->fd, &c, 1, 0, -1);	/* no deadline: no timer of its own */
	r->err = errno;
}

static void stop_without_heap_room(void *unused)
{
	(void)unused;
	CHECK(stats_now().io_backend == WEFT_IO_URING);
	int p[2];
	ring_pipe(p);
	struct stop_reader r = { .fd = p[0] };
	uint64_t parks = stats_now().total.parks;
	weft_co *rc = go(stop_reader_main, &r);
	wait_parks(parks, 1);
	/* fill the one worker's timer heap to its capacity */
	struct weft__timers *t = &weft__rt.workers[0].timers;
	weft_co *sl[1024];
	unsigned nsl = 0;
	do {
		CHECK(nsl < sizeof sl / sizeof *sl);
		parks = stats_now().total.parks;
		sl[nsl++] = go(long_sleeper, NULL);
		wait_parks(parks, 1);
	} while (__atomic_load_n(&t->n, __ATOMIC_RELAXED) < __atomic_load_n(&t->cap, __ATOMIC_RELAXED));
	weft__fault_every(1);	/* the heap cannot grow */
	CHECK(weft_cancel(rc) == 0);
	join(rc);	/* hangs here: the reader spins in weft__uring_stop */
	weft__fault_every(0);
	CHECK(r.n == -1 && r.err == ECANCELED);
	for (unsigned i = 0; i < nsl; i++) {
		CHECK(weft_cancel(sl[i]) == 0);
		join(sl[i]);
	}
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(fault, a_ring_reads_stop_without_room_for_its_timer_still_returns, .timeout = 30)
{
	run_uring(1, stop_without_heap_room, NULL);
}

/* ---- adv-cmiss2 (38479da: weft__completion_wait returns ENOMEM where a
 * coroutine's deadline timer cannot be had).  Its callers beside
 * weft__uring_stop: weft_join_until and weft__offload_until.  The heap is
 * filled as in stop_without_heap_room; each checks the contract after the
 * ENOMEM: the joinee still joinable (weft.h: "with co as after
 * ETIMEDOUT"), an offloaded call a helper has taken waited out (0 only
 * once fn returned; -ENOMEM only when fn never runs). */

/* Fills the one worker's timer heap to its capacity with long sleepers;
 * returns how many (in sl). */
static unsigned fill_heap(weft_co **sl, unsigned max)
{
	struct weft__timers *t = &weft__rt.workers[0].timers;
	unsigned nsl = 0;
	do {
		CHECK(nsl < max);
		uint64_t parks = stats_now().total.parks;
		sl[nsl++] = go(long_sleeper, NULL);
		wait_parks(parks, 1);
	} while (__atomic_load_n(&t->n, __ATOMIC_RELAXED) < __atomic_load_n(&t->cap, __ATOMIC_RELAXED));
	return nsl;
}

static void drain_heap(weft_co **sl, unsigned nsl, unsigned from)
{
	for (unsigned i = from; i < nsl; i++) {
		CHECK(weft_cancel(sl[i]) == 0);
		join(sl[i]);
	}
}

static void join_until_nomem(void *unused)
{
	(void)unused;
	static weft_co *sl[1024];
	unsigned nsl = fill_heap(sl, 1024);
	weft__fault_every(1);
	errno = 0;
	int r = weft_join_until(sl[0], weft_now() + 3600 * (int64_t)1000000000);
	int e = errno;
	weft__fault_every(0);
	CHECK(r == -1 && e == ENOMEM);
	/* still joinable, as after ETIMEDOUT */
	CHECK(weft_cancel(sl[0]) == 0);
	CHECK(weft_join_until(sl[0], -1) == 0);
	drain_heap(sl, nsl, 1);
}

Test(fault, a_join_until_without_room_for_its_timer_leaves_co_joinable, .timeout = 30)
{
	run(1, join_until_nomem, NULL);
}

static atomic_int off_started, off_finished;

static void slow_offloaded(void *unused)
{
	(void)unused;
	atomic_store(&off_started, 1);
	usleep(5 * 1000);	/* the caller's wait ends (ENOMEM) meanwhile */
	atomic_store(&off_finished, 1);
}

static void offload_until_nomem(void *unused)
{
	(void)unused;
	int ran = 0;
	CHECK(weft_offload(mark, &ran) == 0 && ran);	/* a helper exists */
	static weft_co *sl[1024];
	unsigned nsl = fill_heap(sl, 1024);
	int waited = 0;
	for (int i = 0; i < 200; i++) {
		atomic_store(&off_started, 0);
		atomic_store(&off_finished, 0);
		weft__fault_every(1);
		int r = weft__offload_until(slow_offloaded, NULL, weft_now() + 3600 * (int64_t)1000000000);
		weft__fault_every(0);
		CHECK(r == 0 || r == -ENOMEM || r == -EAGAIN);
		if (r == 0) {	/* taken by a helper: waited out */
			CHECK(atomic_load(&off_finished));
			waited++;
		}
		else	/* withdrawn: never runs */
			CHECK(!atomic_load(&off_started));
		while (r != 0 && atomic_load(&off_started) && !atomic_load(&off_finished))
			weft_yield();
	}
	fprintf(stderr, "offload_until_nomem: %d of 200 waited out a helper\n", waited);
	drain_heap(sl, nsl, 0);
}

Test(fault, an_offload_until_without_room_for_its_timer_waits_out_its_helper, .timeout = 60)
{
	run(1, offload_until_nomem, NULL);
}

/* ---- adv-cmiss2: the stop of a socket RECV on the ring (WEFT_URING_SOCKETS=1)
 * of the one worker, the heap full, the reader locked to its thread
 * (weft_lock_thread) or not, under the shared and the worker poller:
 * weft__uring_stop's ENOMEM yield must let that worker reap. */

struct sock_stopper {
	int fd;
	bool lock;
	ssize_t first, n;
	int err;
};

static void sock_stopper_main(void *arg)
{
	struct sock_stopper *s = arg;
	char buf[64];
	if (s->lock)
		CHECK(weft_lock_thread() == 0);
	s->first = weft_read(s->fd, buf, sizeof buf, -1);	/* short: drained */
	s->n = weft_read(s->fd, buf, sizeof buf, -1);	/* to the ring, no timer */
	s->err = errno;
	if (s->lock)
		CHECK(weft_unlock_thread() == 0);
}

static void sock_stop_without_heap_room(void *lock)
{
	CHECK(stats_now().io_backend == WEFT_IO_URING);
	int sv[2];
	socket_pair(sv);
	struct sock_stopper s = { .fd = sv[0], .lock = lock != NULL };
	CHECK(write(sv[1], "hello", 5) == 5);
	weft_stats b = stats_now();
	weft_co *rc = go(sock_stopper_main, &s);
	wait_parks(b.total.parks, 1);
	CHECK(s.first == 5);
	uintptr_t v = (uintptr_t)__atomic_load_n(&weft__fd_find(sv[0])->slot[FD_SLOT_IN], __ATOMIC_SEQ_CST);
	CHECK(v == FD_TURN || v == FD_TURN_READY);	/* parked on the ring */
	static weft_co *sl[1024];
	unsigned nsl = fill_heap(sl, 1024);
	uint64_t f0 = weft__fault_every(1);
	CHECK(weft_cancel(rc) == 0);
	join(rc);
	uint64_t f1 = weft__fault_every(0);
	CHECK(f1 > f0);	/* the stop's timer was refused: the yield path ran */
	CHECK(s.n == -1 && s.err == ECANCELED);
	drain_heap(sl, nsl, 0);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

static void sock_stop_run(int poller, bool lock)
{
	CHECK(setenv("WEFT_URING_SOCKETS", "1", 1) == 0);
	run_uring_config(sock_stop_without_heap_room, lock ? (void *)1 : NULL,
			 &WEFT_CONFIG(.workers = 1, .io = WEFT_IO_URING, .poller = poller));
}

Test(fault, a_ring_socket_reads_stop_without_room_for_its_timer_returns_shared, .timeout = 30)
{
	sock_stop_run(0, false);
	sock_stop_run(0, true);
}

Test(fault, a_ring_socket_reads_stop_without_room_for_its_timer_returns_worker_poller, .timeout = 30)
{
	sock_stop_run(WEFT_POLLER_WORKER, false);
	sock_stop_run(WEFT_POLLER_WORKER, true);
}

/* ---- adv-cmiss2: many ring reads of one pipe stopped with the heap full
 * (each weft__uring_stop in its ENOMEM yield loop, re-cancelling by the
 * clock) while a plain thread trickles single bytes in, so cancels also
 * miss reads in transit (test_uring_cmiss_adv's storm): every read returns
 * its byte or ECANCELED, the bytes add up, no buffer written late. */

enum { NOMEM_READERS = 200, NOMEM_MARK = 0x5a };

struct nomem_reader {
	int fd;
	char buf[1];
	ssize_t n;
	int err;
};

static void nomem_read(void *arg)
{
	struct nomem_reader *r = arg;
	r->n = weft_pread(r->fd, r->buf, 1, 0, -1);
	r->err = errno;
	r->buf[0] = (char)NOMEM_MARK;	/* a late CQE's byte would land here */
}

struct nomem_trickler {
	int fd;
	atomic_bool stop;
	atomic_long written;
};

static void *nomem_trickle(void *arg)
{
	struct nomem_trickler *t = arg;
	while (!atomic_load(&t->stop)) {
		if (write(t->fd, "t", 1) == 1)
			atomic_fetch_add(&t->written, 1);
		sched_yield();
	}
	return NULL;
}

static void stop_storm_without_heap_room(void *unused)
{
	(void)unused;
	CHECK(stats_now().io_backend == WEFT_IO_URING);
	int p[2];
	ring_pipe(p);
	static struct nomem_reader r[NOMEM_READERS];
	static weft_co *co[NOMEM_READERS];
	uint64_t parks = stats_now().total.parks;
	for (int i = 0; i < NOMEM_READERS; i++) {
		r[i] = (struct nomem_reader){ .fd = p[0] };
		co[i] = go(nomem_read, &r[i]);
	}
	wait_parks(parks, NOMEM_READERS);
	static weft_co *sl[1024];
	unsigned nsl = fill_heap(sl, 1024);
	struct nomem_trickler t = { .fd = p[1] };
	CHECK(fcntl(p[1], F_SETFL, O_NONBLOCK) == 0);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, nomem_trickle, &t) == 0);
	while (atomic_load(&t.written) < 50)
		weft_yield();
	weft__fault_every(1);
	for (int i = 0; i < NOMEM_READERS; i++)
		CHECK(weft_cancel(co[i]) == 0);
	long got = 0;
	for (int i = 0; i < NOMEM_READERS; i++) {
		join(co[i]);
		if (r[i].n >= 0) {
			CHECK(r[i].n == 1);
			got++;
		} else {
			CHECK(r[i].err == ECANCELED);
		}
	}
	weft__fault_every(0);
	atomic_store(&t.stop, true);
	CHECK(pthread_join(th, NULL) == 0);
	int queued = 0;
	CHECK(ioctl(p[0], FIONREAD, &queued) == 0);
	CHECK(got + queued == atomic_load(&t.written));
	for (int i = 0; i < NOMEM_READERS; i++)
		CHECK((unsigned char)r[i].buf[0] == NOMEM_MARK);
	drain_heap(sl, nsl, 0);
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(fault, ring_reads_stopped_without_heap_room_while_bytes_trickle_in, .timeout = 120)
{
	for (int i = 0; i < 3; i++)
		run_uring(1, stop_storm_without_heap_room, NULL);
}
