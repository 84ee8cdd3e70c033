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

#include "coro_test.h"
#include "fault.h"

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
static void close_and_reuse(int fd)
{
	weft__fault_on_io_begin(NULL);	/* once */
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
	weft__fault_on_io_begin(close_and_reuse);
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

/* ---- a claim that finds only abandoned waiters (waitq.h) */

/* Each test runs a hand-over in the window between a waiter's abandon and
 * its relock (fault.h), so the claim drops the waiter's node: the
 * hand-over must then do what the waiter's give-up step would have, and
 * the waiter must not do it again. */
static struct {
	weft_sem *sem;
	weft_rwlock *rw;
	atomic_int in_window, handed, queued;
} ab;

static void release_in_window(void)
{
	weft__fault_on_wait_abandoned(NULL);	/* once */
	CHECK(weft_sem_release(ab.sem) == 0);
}

static void sem_window(void *unused)
{
	(void)unused;
	ab.sem = weft_sem_new(0);
	CHECK(ab.sem);
	weft__fault_on_wait_abandoned(release_in_window);
	CHECK(weft_sem_acquire(ab.sem, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	/* the release found nobody live: it kept its permit */
	CHECK(weft_sem_tryacquire(ab.sem) == 0);
	CHECK(weft_sem_tryacquire(ab.sem) == -1 && errno == EAGAIN);
	weft_sem_free(ab.sem);
}

Test(fault, a_release_finding_only_an_abandoned_waiter_keeps_its_permit)
{
	run(1, sem_window, NULL);
}

static void read_unlock_in_window(void)
{
	weft__fault_on_wait_abandoned(NULL);
	CHECK(weft_rwlock_unlock(ab.rw) == 0);	/* read holds are counted, not owned */
}

/* The last reader leaves while the only queued writer is abandoning. */
static void writer_window(void *unused)
{
	(void)unused;
	ab.rw = weft_rwlock_new();
	CHECK(ab.rw && weft_rwlock_rdlock(ab.rw, -1) == 0);
	weft__fault_on_wait_abandoned(read_unlock_in_window);
	CHECK(weft_rwlock_wrlock(ab.rw, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	/* free, with no waiter flag left behind */
	CHECK(weft_rwlock_wrlock(ab.rw, weft_now()) == 0 && weft_rwlock_unlock(ab.rw) == 0);
	CHECK(weft_rwlock_rdlock(ab.rw, weft_now()) == 0 && weft_rwlock_unlock(ab.rw) == 0);
	weft_rwlock_free(ab.rw);
}

Test(fault, the_last_reader_out_finding_only_an_abandoned_writer_frees_the_lock)
{
	run(1, writer_window, NULL);
}

static void wait_handed(void)
{
	weft__fault_on_wait_abandoned(NULL);
	atomic_store(&ab.in_window, 1);
	while (!atomic_load(&ab.handed))
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
	weft__fault_on_wait_abandoned(wait_handed);
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
	CHECK(weft_rwlock_unlock(ab.rw) == 0);
	atomic_store(&ab.handed, 1);
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
