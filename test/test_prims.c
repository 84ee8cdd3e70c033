/* SPDX-License-Identifier: MIT */
/* The primitives of issue 23: semaphores (a bound on 1,000 coroutines,
 * FIFO without barging, deadlines, cancellation, plain threads),
 * reader-writer locks (readers together, writers alone, a waiting writer
 * not starved by readers, a writer giving up lets readers in, ownership
 * errors), once (1,000 concurrent callers, fn once, everyone after it), timed
 * joins, and spawn options (stack size, name). */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>

/* Yields until *flag reaches want, or fails the test after 10 s. */
static void await_at_least(atomic_uint *flag, unsigned want)
{
	int64_t end = weft_now() + slack(10000 * MS);
	while (atomic_load(flag) < want) {
		CHECK(weft_now() < end);
		if (weft_self())
			CHECK(weft_sleep(weft_now() + MS / 10) == 0);
		else
			weft_yield();
	}
}

/* Records the highest value v reached. */
static void note_max(atomic_uint *max, unsigned v)
{
	unsigned m = atomic_load(max);
	while (v > m && !atomic_compare_exchange_weak(max, &m, v))
		;
}

/* A call's result r (already made): -1 with errno e.  (On a plain thread:
 * errno is read after the call, nothing suspends in between.) */
static void fails_with(int r, int e)
{
	cr_assert_eq(r, -1);
	cr_assert_eq(errno, e, "errno %d, not %d", errno, e);
}

/* Spawns n coroutines of fn(arg) and joins them. */
static void spawn_join(unsigned n, void (*fn)(void *), void *arg)
{
	weft_co **co = calloc(n, sizeof *co);
	CHECK(co);
	for (unsigned i = 0; i < n; i++)
		co[i] = go(fn, arg);
	for (unsigned i = 0; i < n; i++)
		join(co[i]);
	free(co);
}

struct call {
	void (*fn)(void *);
	void *arg;
};

static void *call_on_thread(void *p)
{
	struct call *c = p;
	c->fn(c->arg);
	return NULL;
}

/* Runs fn(arg) on t plain threads and c coroutines at once (the runtime
 * running; called from a plain thread), and waits for them all. */
static void on_threads_and_coroutines(unsigned t, unsigned c, void (*fn)(void *), void *arg)
{
	struct call call = { fn, arg };
	pthread_t *th = calloc(t, sizeof *th);
	weft_co **co = calloc(c, sizeof *co);
	cr_assert(th && co);
	for (unsigned i = 0; i < t; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, call_on_thread, &call), 0);
	for (unsigned i = 0; i < c; i++)
		cr_assert_not_null(co[i] = weft_spawn(fn, arg));
	for (unsigned i = 0; i < t; i++)
		pthread_join(th[i], NULL);
	for (unsigned i = 0; i < c; i++)
		cr_assert_eq(weft_join(co[i]), 0);
	free(th);
	free(co);
}

/* ------------------------------------------------------ semaphore */

struct bound {
	weft_sem *s;
	atomic_uint inside, max, done;
	int64_t deadline;	/* for the first 10 to gather */
};

static void bounded(void *arg)
{
	struct bound *b = arg;
	CHECK(weft_sem_acquire(b->s, -1) == 0);
	note_max(&b->max, atomic_fetch_add(&b->inside, 1) + 1);
	/* hold the permit until 10 were inside at once (or 10 s passed: the
	 * check below fails then), and a moment longer */
	do
		CHECK(weft_sleep(weft_now() + MS / 20) == 0);
	while (atomic_load(&b->max) < 10 && weft_now() < b->deadline);
	atomic_fetch_sub(&b->inside, 1);
	atomic_fetch_add(&b->done, 1);
	CHECK(weft_sem_release(b->s) == 0);
}

static void bound_root(void *arg)
{
	spawn_join(1000, bounded, arg);
}

Test(prims, sem_bounds_1000_coroutines_to_10, .timeout = 120)
{
	struct bound b = { .s = weft_sem_new(10), .deadline = weft_now() + slack(10000 * MS) };
	cr_assert_not_null(b.s);
	run(2, bound_root, &b);
	cr_assert_eq(atomic_load(&b.done), 1000);
	cr_assert_eq(atomic_load(&b.max), 10, "at most 10 inside at once, and 10 reached: %u", atomic_load(&b.max));
	cr_assert_eq(weft_sem_tryacquire(b.s), 0, "every permit came back");
	weft_sem_free(b.s);
}

enum { FIFO_N = 16 };

struct sem_fifo {
	weft_sem *s;
	unsigned order[FIFO_N];
	atomic_uint got;
};

static struct sem_fifo sf;

static void sem_fifo_waiter(void *arg)
{
	CHECK(weft_sem_acquire(sf.s, -1) == 0);
	sf.order[atomic_fetch_add(&sf.got, 1)] = (unsigned)(uintptr_t)arg;
}

static void sem_fifo_root(void *arg)
{
	(void)arg;
	weft_co *co[FIFO_N];
	for (unsigned i = 0; i < FIFO_N; i++) {
		co[i] = go(sem_fifo_waiter, (void *)(uintptr_t)i);
		/* One worker: the waiter, in the runnext slot, runs and queues
		 * before a yielder resumes (a 2 ms sleep was not always enough
		 * under valgrind on a loaded machine). */
		weft_yield();
	}
	for (unsigned i = 0; i < FIFO_N; i++) {
		CHECK(weft_sem_release(sf.s) == 0);
		/* the permit went to the oldest waiter: no barging */
		CHECK(weft_sem_tryacquire(sf.s) == -1 && errno == EAGAIN);
		await_at_least(&sf.got, i + 1);
	}
	for (unsigned i = 0; i < FIFO_N; i++)
		join(co[i]);
}

Test(prims, sem_serves_waiters_in_fifo_order_without_barging, .timeout = 60)
{
	sf.s = weft_sem_new(0);
	cr_assert_not_null(sf.s);
	run(1, sem_fifo_root, NULL);
	for (unsigned i = 0; i < FIFO_N; i++)
		cr_assert_eq(sf.order[i], i, "position %u went to %u", i, sf.order[i]);
	weft_sem_free(sf.s);
}

static void sem_cancelled(void *arg)
{
	CHECK(weft_sem_acquire(arg, -1) == -1 && errno == ECANCELED);
}

static void sem_deadlines(void *arg)
{
	(void)arg;
	weft_sem *s = weft_sem_new(0);
	CHECK(s);
	int64_t t0 = weft_now();
	CHECK(weft_sem_acquire(s, t0 + 5 * MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() >= t0 + 5 * MS);
	CHECK(weft_sem_acquire(s, 0) == -1 && errno == ETIMEDOUT);	/* past: no wait */
	CHECK(weft_sem_tryacquire(s) == -1 && errno == EAGAIN);
	/* the waiters that gave up took nothing: a release is a free permit */
	CHECK(weft_sem_release(s) == 0);
	CHECK(weft_sem_acquire(s, 0) == 0);	/* past deadline, but free */
	/* a cancelled waiter returns ECANCELED; the next release is free */
	uint64_t parks = stats_now().total.parks;
	weft_co *c = go(sem_cancelled, s);
	wait_parks(parks, 1);
	CHECK(weft_cancel(c) == 0);
	join(c);
	CHECK(weft_sem_release(s) == 0);
	CHECK(weft_sem_tryacquire(s) == 0);
	weft_sem_free(s);

	s = weft_sem_new(UINT_MAX);
	CHECK(s);
	CHECK(weft_sem_release(s) == -1 && errno == EOVERFLOW);
	CHECK(weft_sem_tryacquire(s) == 0);
	CHECK(weft_sem_release(s) == 0);
	weft_sem_free(s);
}

Test(prims, sem_deadlines_cancellation_and_errors)
{
	fails_with(weft_sem_acquire(NULL, -1), EINVAL);
	fails_with(weft_sem_release(NULL), EINVAL);
	fails_with(weft_sem_tryacquire(NULL), EINVAL);
	weft_sem_free(NULL);
	run(2, sem_deadlines, NULL);
}

struct mixed {
	weft_sem *s;
	unsigned rounds;
	atomic_uint inside, max;
};

static void mixed_round(struct mixed *m)
{
	CHECK(weft_sem_acquire(m->s, -1) == 0);
	note_max(&m->max, atomic_fetch_add(&m->inside, 1) + 1);
	weft_yield();
	atomic_fetch_sub(&m->inside, 1);
	CHECK(weft_sem_release(m->s) == 0);
}

static void mixed_co(void *arg)
{
	struct mixed *m = arg;
	for (unsigned i = 0; i < m->rounds; i++)
		mixed_round(m);
}

Test(prims, sem_shared_by_plain_threads_and_coroutines, .timeout = 120)
{
	struct mixed m = { .s = weft_sem_new(2), .rounds = scaled(2000, 300, 50) };
	cr_assert_not_null(m.s);
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	/* a plain thread's wait times out, and blocks until a coroutine's release */
	cr_assert_eq(weft_sem_acquire(m.s, -1), 0);
	cr_assert_eq(weft_sem_acquire(m.s, -1), 0);
	fails_with(weft_sem_acquire(m.s, weft_now() + 5 * MS), ETIMEDOUT);
	cr_assert_eq(weft_sem_release(m.s), 0);
	cr_assert_eq(weft_sem_release(m.s), 0);
	on_threads_and_coroutines(3, 20, mixed_co, &m);
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_leq(atomic_load(&m.max), 2);
	cr_assert_eq(atomic_load(&m.inside), 0);
	weft_sem_free(m.s);
}

/* ------------------------------------------------------ reader-writer lock */

struct rw {
	weft_rwlock *l;
	unsigned rounds;
	atomic_uint readers, writers;
	atomic_uint entered;
	atomic_bool stop;
	weft_sem *release;	/* rd_hold unlocks on it */
	atomic_bool writer_done;
	unsigned long value;	/* written under the write lock */
};

enum { READERS = 50 };

static void reader_waits_for_all(void *arg)
{
	struct rw *rw = arg;
	CHECK(weft_rwlock_rdlock(rw->l, -1) == 0);
	atomic_fetch_add(&rw->readers, 1);
	await_at_least(&rw->readers, READERS);	/* only if all are inside at once */
	CHECK(weft_rwlock_unlock(rw->l) == 0);
}

static void readers_root(void *arg)
{
	spawn_join(READERS, reader_waits_for_all, arg);
}

Test(prims, rwlock_lets_many_readers_in_at_once, .timeout = 60)
{
	struct rw rw = { .l = weft_rwlock_new() };
	cr_assert_not_null(rw.l);
	run(2, readers_root, &rw);
	cr_assert_eq(atomic_load(&rw.readers), READERS);
	weft_rwlock_free(rw.l);
}

static void rw_reader(void *arg)
{
	struct rw *rw = arg;
	for (unsigned i = 0; i < rw->rounds; i++) {
		CHECK(weft_rwlock_rdlock(rw->l, -1) == 0);
		atomic_fetch_add(&rw->readers, 1);
		CHECK(atomic_load(&rw->writers) == 0);
		unsigned long v = rw->value;
		weft_yield();
		CHECK(rw->value == v);
		atomic_fetch_sub(&rw->readers, 1);
		CHECK(weft_rwlock_unlock(rw->l) == 0);
	}
}

static void rw_writer(void *arg)
{
	struct rw *rw = arg;
	for (unsigned i = 0; i < rw->rounds; i++) {
		CHECK(weft_rwlock_wrlock(rw->l, -1) == 0);
		CHECK(atomic_fetch_add(&rw->writers, 1) == 0);
		CHECK(atomic_load(&rw->readers) == 0);
		unsigned long v = rw->value;
		weft_yield();
		rw->value = v + 1;
		atomic_fetch_sub(&rw->writers, 1);
		CHECK(weft_rwlock_unlock(rw->l) == 0);
	}
}

static void *rw_writer_thread(void *arg)
{
	rw_writer(arg);
	return NULL;
}

static void *rw_reader_thread(void *arg)
{
	rw_reader(arg);
	return NULL;
}

enum { MIX_READERS = 20, MIX_WRITERS = 5 };

static void rw_mix_root(void *arg)
{
	weft_co *co[MIX_READERS + MIX_WRITERS];
	for (unsigned i = 0; i < MIX_READERS + MIX_WRITERS; i++)
		co[i] = go(i < MIX_READERS ? rw_reader : rw_writer, arg);
	for (unsigned i = 0; i < MIX_READERS + MIX_WRITERS; i++)
		join(co[i]);
}

Test(prims, rwlock_writers_are_alone_with_coroutines_and_threads, .timeout = 120)
{
	struct rw rw = { .l = weft_rwlock_new(), .rounds = scaled(500, 100, 20) };
	cr_assert_not_null(rw.l);
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	pthread_t tw, tr;
	cr_assert_eq(pthread_create(&tw, NULL, rw_writer_thread, &rw), 0);
	cr_assert_eq(pthread_create(&tr, NULL, rw_reader_thread, &rw), 0);
	weft_co *root = weft_spawn(rw_mix_root, &rw);
	cr_assert_not_null(root);
	cr_assert_eq(weft_join(root), 0);
	pthread_join(tw, NULL);
	pthread_join(tr, NULL);
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_eq(rw.value, (unsigned long)(MIX_WRITERS + 1) * rw.rounds, "no write was lost");
	weft_rwlock_free(rw.l);
}

/* Readers hold the lock without a gap: each keeps its hold until a newer
 * reader has entered (or 1 ms has passed, when new readers are held back),
 * until the writer is done.  Without writer preference the writer would
 * wait for ever. */
static void stream_reader(void *arg)
{
	struct rw *rw = arg;
	while (!atomic_load(&rw->writer_done)) {
		CHECK(weft_rwlock_rdlock(rw->l, -1) == 0);
		unsigned me = atomic_fetch_add(&rw->entered, 1) + 1;
		int64_t end = weft_now() + MS;
		while (atomic_load(&rw->entered) == me && weft_now() < end)
			weft_yield();
		CHECK(weft_rwlock_unlock(rw->l) == 0);
	}
}

static void starving_writer(void *arg)
{
	struct rw *rw = arg;
	await_at_least(&rw->entered, 100);	/* the stream is flowing */
	CHECK(weft_rwlock_wrlock(rw->l, weft_now() + 2000 * MS) == 0);
	atomic_store(&rw->writer_done, true);
	CHECK(weft_rwlock_unlock(rw->l) == 0);
}

static void stream_root(void *arg)
{
	enum { N = 8 };
	weft_co *co[N + 1];
	for (unsigned i = 0; i < N; i++)
		co[i] = go(stream_reader, arg);
	co[N] = go(starving_writer, arg);
	for (unsigned i = 0; i <= N; i++)
		join(co[i]);
}

Test(prims, rwlock_waiting_writer_is_not_starved_by_a_stream_of_readers, .timeout = 60)
{
	struct rw rw = { .l = weft_rwlock_new() };
	cr_assert_not_null(rw.l);
	run(2, stream_root, &rw);
	weft_rwlock_free(rw.l);
}

static void unlock_not_mine(void *arg)
{
	CHECK(weft_rwlock_unlock(arg) == -1 && errno == EPERM);
	CHECK(weft_rwlock_rdlock(arg, 0) == -1 && errno == ETIMEDOUT);
	CHECK(weft_rwlock_wrlock(arg, weft_now() + 2 * MS) == -1 && errno == ETIMEDOUT);
}

/* Holds a read lock, parked (one park) until rd_release. */
static void rd_hold(void *arg)
{
	struct rw *rw = arg;
	CHECK(weft_rwlock_rdlock(rw->l, -1) == 0);
	atomic_fetch_add(&rw->entered, 1);
	CHECK(weft_sem_acquire(rw->release, -1) == 0);
	CHECK(weft_rwlock_unlock(rw->l) == 0);
}

static void rd_release(struct rw *rw)
{
	atomic_store(&rw->stop, true);
	CHECK(weft_sem_release(rw->release) == 0);
}

/* Gives up after 200 ms: long enough for the late reader to queue behind
 * it on a loaded machine (wait_parks fails if it does not). */
static void timed_writer(void *arg)
{
	struct rw *rw = arg;
	CHECK(weft_rwlock_wrlock(rw->l, weft_now() + slack(200 * MS)) == -1 && errno == ETIMEDOUT);
}

static void late_reader(void *arg)
{
	struct rw *rw = arg;
	/* queued behind the waiting writer; let in when it gives up, while the
	 * first reader still holds the lock */
	CHECK(weft_rwlock_rdlock(rw->l, weft_now() + 2000 * MS) == 0);
	CHECK(!atomic_load(&rw->stop));
	atomic_fetch_add(&rw->entered, 1);
	CHECK(weft_rwlock_unlock(rw->l) == 0);
}

static void rw_errors(void *arg)
{
	(void)arg;
	weft_rwlock *l = weft_rwlock_new();
	CHECK(l);
	CHECK(weft_rwlock_unlock(l) == -1 && errno == EPERM);	/* not held */
	CHECK(weft_rwlock_wrlock(l, -1) == 0);
	CHECK(weft_rwlock_wrlock(l, -1) == -1 && errno == EDEADLK);
	CHECK(weft_rwlock_rdlock(l, -1) == -1 && errno == EDEADLK);
	join(go(unlock_not_mine, l));	/* write-held by another */
	CHECK(weft_rwlock_unlock(l) == 0);
	CHECK(weft_rwlock_unlock(l) == -1 && errno == EPERM);
	/* read holds are counted: two holds, two unlocks, then EPERM */
	CHECK(weft_rwlock_rdlock(l, 0) == 0);
	CHECK(weft_rwlock_rdlock(l, 0) == 0);
	CHECK(weft_rwlock_wrlock(l, 0) == -1 && errno == ETIMEDOUT);
	CHECK(weft_rwlock_unlock(l) == 0);
	CHECK(weft_rwlock_unlock(l) == 0);
	CHECK(weft_rwlock_unlock(l) == -1 && errno == EPERM);

	/* a writer that gives up lets in the readers queued behind it */
	struct rw rw = { .l = l, .release = weft_sem_new(0) };
	CHECK(rw.release);
	uint64_t parks = stats_now().total.parks;
	weft_co *holder = go(rd_hold, &rw);
	wait_parks(parks, 1);	/* in, and parked */
	weft_co *w = go(timed_writer, &rw);
	wait_parks(parks, 2);	/* the writer waits */
	weft_co *late = go(late_reader, &rw);
	wait_parks(parks, 3);	/* the reader is held back */
	CHECK(atomic_load(&rw.entered) == 1);
	join(w);
	join(late);
	CHECK(atomic_load(&rw.entered) == 2);
	rd_release(&rw);
	join(holder);
	weft_sem_free(rw.release);
	weft_rwlock_free(l);
}

Test(prims, rwlock_deadlines_ownership_and_errors)
{
	fails_with(weft_rwlock_rdlock(NULL, -1), EINVAL);
	fails_with(weft_rwlock_wrlock(NULL, -1), EINVAL);
	fails_with(weft_rwlock_unlock(NULL), EINVAL);
	weft_rwlock_free(NULL);
	run(2, rw_errors, NULL);
}

/* A writer queued behind a reader, cancelled, lets in the reader queued
 * behind it while the first reader still holds the lock; the lock is then
 * free for a writer once both readers are out. */
static void cancelled_writer(void *arg)
{
	struct rw *rw = arg;
	CHECK(weft_rwlock_wrlock(rw->l, -1) == -1 && errno == ECANCELED);
}

static void rw_cancel(void *arg)
{
	(void)arg;
	struct rw rw = { .l = weft_rwlock_new(), .release = weft_sem_new(0) };
	CHECK(rw.l && rw.release);
	uint64_t parks = stats_now().total.parks;
	weft_co *holder = go(rd_hold, &rw);
	wait_parks(parks, 1);	/* in, and parked */
	weft_co *w = go(cancelled_writer, &rw);
	wait_parks(parks, 2);	/* the writer waits */
	weft_co *late = go(late_reader, &rw);
	wait_parks(parks, 3);	/* the reader is held back */
	CHECK(atomic_load(&rw.entered) == 1);
	CHECK(weft_cancel(w) == 0);
	join(w);
	join(late);
	CHECK(atomic_load(&rw.entered) == 2);
	CHECK(weft_rwlock_rdlock(rw.l, 0) == 0);	/* nobody waits: in at once */
	CHECK(weft_rwlock_unlock(rw.l) == 0);
	rd_release(&rw);
	join(holder);
	weft_sem_free(rw.release);
	CHECK(weft_rwlock_wrlock(rw.l, 0) == 0);
	CHECK(weft_rwlock_unlock(rw.l) == 0);
	weft_rwlock_free(rw.l);
}

Test(prims, rwlock_cancelled_writer_lets_queued_readers_in)
{
	run(2, rw_cancel, NULL);
}

/* Readers and writers, coroutines and a plain thread, with deadlines from
 * none (0: only if free) to a few hundred microseconds, so that waiters give
 * up while others enter and leave without the lock: exclusion holds, and
 * the lock is free at the end (every hold and every wait undone). */
static void rw_timed_round(struct rw *rw, unsigned i)
{
	bool write = i % 4 == 0;
	int64_t deadline = i % 3 == 0 ? 0 : weft_now() + (int64_t)(i % 5) * 100 * 1000;
	int r = write ? weft_rwlock_wrlock(rw->l, deadline) : weft_rwlock_rdlock(rw->l, deadline);
	if (r != 0) {
		CHECK(errno == ETIMEDOUT);
		return;
	}
	if (write) {
		CHECK(atomic_fetch_add(&rw->writers, 1) == 0);
		CHECK(atomic_load(&rw->readers) == 0);
	} else {
		atomic_fetch_add(&rw->readers, 1);
		CHECK(atomic_load(&rw->writers) == 0);
	}
	if (weft_self())
		weft_yield();
	atomic_fetch_sub(write ? &rw->writers : &rw->readers, 1);
	CHECK(weft_rwlock_unlock(rw->l) == 0);
}

static void rw_timed(void *arg)
{
	struct rw *rw = arg;
	unsigned seed = atomic_fetch_add(&rw->entered, 1);
	for (unsigned i = 0; i < rw->rounds; i++)
		rw_timed_round(rw, seed * 7 + i);
}

static void *rw_timed_thread(void *arg)
{
	rw_timed(arg);
	return NULL;
}

static void rw_timed_root(void *arg)
{
	spawn_join(16, rw_timed, arg);
}

Test(prims, rwlock_timed_waiters_race_the_lock_free_paths, .timeout = 120)
{
	struct rw rw = { .l = weft_rwlock_new(), .rounds = scaled(2000, 300, 50) };
	cr_assert_not_null(rw.l);
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, rw_timed_thread, &rw), 0);
	weft_co *root = weft_spawn(rw_timed_root, &rw);
	cr_assert_not_null(root);
	cr_assert_eq(weft_join(root), 0);
	pthread_join(t, NULL);
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_eq(weft_rwlock_wrlock(rw.l, 0), 0, "the lock was left free");
	cr_assert_eq(weft_rwlock_unlock(rw.l), 0);
	weft_rwlock_free(rw.l);
}

/* ------------------------------------------------------ once */

struct once_case {
	weft_once once;
	atomic_uint calls, done, returned;
	atomic_bool early;	/* someone returned before fn was done */
};

static void once_fn(void *arg)
{
	struct once_case *oc = arg;
	atomic_fetch_add(&oc->calls, 1);
	if (weft_self())
		CHECK(weft_sleep(weft_now() + 20 * MS) == 0);	/* the others pile up */
	atomic_store(&oc->done, 1);
}

static void once_caller(void *arg)
{
	struct once_case *oc = arg;
	CHECK(weft_once_run(&oc->once, once_fn, oc) == 0);
	if (!atomic_load(&oc->done))
		atomic_store(&oc->early, true);
	atomic_fetch_add(&oc->returned, 1);
}

static void *once_thread(void *arg)
{
	once_caller(arg);
	return NULL;
}

static void once_root(void *arg)
{
	spawn_join(1000, once_caller, arg);
}

Test(prims, once_runs_fn_once_for_1000_concurrent_callers, .timeout = 60)
{
	struct once_case oc = { .once = WEFT_ONCE_INIT };
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	pthread_t t[2];
	weft_co *root = weft_spawn(once_root, &oc);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, once_thread, &oc), 0);
	cr_assert_eq(weft_join(root), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_eq(atomic_load(&oc.calls), 1);
	cr_assert_eq(atomic_load(&oc.returned), 1002);
	cr_assert(!atomic_load(&oc.early), "a caller returned before fn had");
	/* later calls return at once, without running fn */
	cr_assert_eq(weft_once_run(&oc.once, once_fn, &oc), 0);
	cr_assert_eq(atomic_load(&oc.calls), 1);
}

static void once_cancelled(void *arg)
{
	CHECK(weft_once_run(arg, once_fn, NULL) == -1 && errno == ECANCELED);
}

static void once_slow(void *arg)
{
	struct once_case *oc = arg;
	atomic_fetch_add(&oc->calls, 1);
	while (!atomic_load(&oc->done))
		weft_yield();	/* not a park: the caller counts its waiter's */
}

static void once_slow_caller(void *arg)
{
	struct once_case *oc = arg;
	CHECK(weft_once_run(&oc->once, once_slow, oc) == 0);
}

/* Cancelled before the call: ECANCELED (fn not run) on a fresh once, 0 on
 * a done one. */
static void once_self_cancelled(void *arg)
{
	struct once_case *oc = arg;
	weft_once fresh = WEFT_ONCE_INIT;
	CHECK(weft_cancel(weft_self()) == 0);
	CHECK(weft_once_run(&fresh, once_fn, oc) == -1 && errno == ECANCELED);
	CHECK(weft_once_run(&oc->once, once_fn, oc) == 0);
}

static void once_errors(void *arg)
{
	(void)arg;
	struct once_case oc = { .once = WEFT_ONCE_INIT };
	CHECK(weft_once_run(&oc.once, NULL, NULL) == -1 && errno == EINVAL);
	CHECK(weft_once_run(NULL, once_fn, NULL) == -1 && errno == EINVAL);
	/* a waiter cancelled while fn runs returns ECANCELED; fn completes */
	weft_co *r = go(once_slow_caller, &oc);
	await_at_least(&oc.calls, 1);
	uint64_t parks = stats_now().total.parks;
	weft_co *c = go(once_cancelled, &oc.once);
	wait_parks(parks, 1);	/* waiting for fn */
	CHECK(weft_cancel(c) == 0);
	join(c);
	atomic_store(&oc.done, 1);
	join(r);
	CHECK(atomic_load(&oc.calls) == 1);
	join(go(once_self_cancelled, &oc));
	CHECK(atomic_load(&oc.calls) == 1);
}

Test(prims, once_cancellation_and_errors)
{
	run(2, once_errors, NULL);
}

/* ------------------------------------------------------ timed join */

struct gate {
	atomic_bool open;
	atomic_uint finished;
};

static void until_open(void *arg)
{
	struct gate *g = arg;
	while (!atomic_load(&g->open))
		CHECK(weft_sleep(weft_now() + MS / 2) == 0);
	atomic_fetch_add(&g->finished, 1);	/* last touch of *g */
}

static void quick(void *arg)
{
	(void)arg;
}

/* Expires on a running target (which stays joinable), then succeeds; from
 * a coroutine or a plain thread alike. */
static void timed_joins(void)
{
	struct gate g = { false, 0 };
	weft_co *co = go(until_open, &g);
	int64_t t0 = weft_now();
	CHECK(weft_join_until(co, t0 + 10 * MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() >= t0 + 10 * MS);
	CHECK(weft_join_until(co, 0) == -1 && errno == ETIMEDOUT);	/* past: no wait */
	CHECK(atomic_load(&g.finished) == 0);
	atomic_store(&g.open, true);
	CHECK(weft_join_until(co, weft_now() + 5000 * MS) == 0);
	CHECK(atomic_load(&g.finished) == 1);

	/* a target that returned is joined even with a past deadline */
	co = go(quick, NULL);
	while (weft_join_until(co, 0) != 0)
		CHECK(errno == ETIMEDOUT);

	/* after a timeout, detach still works */
	atomic_store(&g.open, false);
	co = go(until_open, &g);
	CHECK(weft_join_until(co, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_detach(co) == 0);
	atomic_store(&g.open, true);
	await_at_least(&g.finished, 2);
	CHECK(weft_join_until(NULL, -1) == -1 && errno == EINVAL);
}

static void timed_joins_co(void *arg)
{
	(void)arg;
	timed_joins();
	CHECK(weft_join_until(weft_self(), -1) == -1 && errno == EINVAL);
}

Test(prims, join_until_expires_and_succeeds_from_coroutines_and_threads, .timeout = 60)
{
	run(2, timed_joins_co, NULL);
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	timed_joins();
	cr_assert_eq(weft_shutdown(), 0);
}

/* ------------------------------------------------------ spawn options */

/* Each frame holds 512 bytes across the call below it (its address escapes
 * before and after, so no compiler shrinks it or makes the recursion a
 * loop). */
__attribute__((noinline)) static int depth(int n)
{
	char pad[512];
	pad[0] = (char)n;
	__asm__ volatile("" : : "r"(pad) : "memory");	/* the whole array escapes */
	int below = n == 0 ? 0 : depth(n - 1);
	__asm__ volatile("" : : "r"(pad) : "memory");
	return below + pad[0];
}

enum { DEEP = 400 };	/* ~250 KiB of frames (more under ASan): past 16 KiB, within 1 MiB */

static void deep(void *arg)
{
	*(int *)arg = depth(DEEP);
}

static void spawn_sizes(void *arg)
{
	(void)arg;
	int out = -1;
	weft_co *co = weft_spawn_with(deep, &out, &(weft_spawn_opts){ .stack_size = 1 << 20,
								     .name = "deep" });
	CHECK(co);
	CHECK(strcmp(weft_co_name(co), "deep") == 0);
	join(co);
	int want = 0;	/* what depth(DEEP) returns, without the recursion */
	for (int k = 1; k <= DEEP; k++)
		want += (char)k;
	CHECK(out == want);

	/* out of range */
	errno = 0;
	CHECK(!weft_spawn_with(deep, &out, &(weft_spawn_opts){ .stack_size = ((size_t)1 << 30) + 1 }));
	CHECK(errno == EINVAL);
	CHECK(!weft_spawn_with(NULL, NULL, NULL) && errno == EINVAL);
	/* tiny sizes are raised to 16 KiB; NULL opts and zero fields: defaults */
	join(weft_spawn_with(quick, NULL, &(weft_spawn_opts){ .stack_size = 1 }));
	co = weft_spawn_with(quick, NULL, NULL);
	CHECK(co && strcmp(weft_co_name(co), "") == 0);
	join(co);
	join(weft_spawn_with(quick, NULL, &(weft_spawn_opts){ 0 }));

	/* stacks of another size are not kept in the pool of default ones */
	uint64_t before = stats_now().stacks_allocated;
	for (int i = 0; i < 100; i++)
		join(weft_spawn_with(deep, &out, &(weft_spawn_opts){ .stack_size = 1 << 20 }));
	CHECK(stats_now().stacks_allocated == before);
}

Test(prims, spawn_with_sets_the_stack_size_and_name, .timeout = 60)
{
	run(2, spawn_sizes, NULL);
}

/* A 16 KiB stack overflows under the same recursion: the child dies with
 * the overflow report, which names the coroutine's own stack size. */
static void deep_in_16k(void *arg)
{
	int out;
	join(weft_spawn_with(deep, &out, &(weft_spawn_opts){ .stack_size = 16 << 10 }));
	(void)arg;
}

Test(prims, spawn_with_16k_overflows_where_1m_does_not, .timeout = 60)
{
	int status;
	char *buf = run_child_after(NULL, deep_in_16k, &status);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x, stderr: %s", status, buf);
	cr_assert_not_null(strstr(buf, "weft: stack overflow in coroutine "), "stderr: %s", buf);
	cr_assert_not_null(strstr(buf, "(stack 16384 bytes)"), "stderr: %s", buf);
}

/* ------------------------------------------------------ mutex and cond from threads */

struct shared {
	weft_mutex *m;
	weft_cond *c;
	unsigned per;
	unsigned long value;	/* under m */
	unsigned holders;	/* under m: must stay 0 or 1 */
	bool ready;		/* under m */
};

static void shared_add(void *arg)
{
	struct shared *sh = arg;
	for (unsigned i = 0; i < sh->per; i++) {
		CHECK(weft_mutex_lock(sh->m) == 0);
		CHECK(sh->holders++ == 0);
		unsigned long v = sh->value;
		if (i % 16 == 0)
			weft_yield();	/* a thread's sched_yield, a coroutine's switch */
		sh->value = v + 1;
		sh->holders--;
		CHECK(weft_mutex_unlock(sh->m) == 0);
	}
}

/* A plain thread waits on the cond; a coroutine signals it. */
static void *cond_thread(void *arg)
{
	struct shared *sh = arg;
	CHECK(weft_mutex_lock(sh->m) == 0);
	/* times out, unless this thread came so late (a loaded machine) that
	 * the signaller's 5 ms sleep was over: then the signal wakes it */
	int r = weft_cond_wait(sh->c, sh->m, weft_now() + MS);
	CHECK((r == -1 && errno == ETIMEDOUT) || (r == 0 && sh->ready));
	while (!sh->ready)
		CHECK(weft_cond_wait(sh->c, sh->m, -1) == 0);
	CHECK(weft_mutex_unlock(sh->m) == 0);
	return NULL;
}

static void cond_signaller(void *arg)
{
	struct shared *sh = arg;
	CHECK(weft_sleep(weft_now() + 5 * MS) == 0);
	CHECK(weft_mutex_lock(sh->m) == 0);
	sh->ready = true;
	CHECK(weft_cond_signal(sh->c) == 0);
	CHECK(weft_mutex_unlock(sh->m) == 0);
}

static void unlock_foreign_mutex(void *arg)
{
	CHECK(weft_mutex_unlock(arg) == -1 && errno == EPERM);
}

Test(prims, mutex_and_cond_serve_plain_threads, .timeout = 120)
{
	struct shared sh = { .m = weft_mutex_new(), .c = weft_cond_new(),
			     .per = scaled(2000, 300, 50) };
	cr_assert(sh.m && sh.c);
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	pthread_t ct;
	on_threads_and_coroutines(3, 10, shared_add, &sh);
	cr_assert_eq(sh.value, 13ul * sh.per);

	/* held by this thread: a coroutine's unlock is EPERM */
	cr_assert_eq(weft_mutex_lock(sh.m), 0);
	weft_co *f = weft_spawn(unlock_foreign_mutex, sh.m);
	cr_assert_eq(weft_join(f), 0);
	cr_assert_eq(weft_mutex_unlock(sh.m), 0);

	cr_assert_eq(pthread_create(&ct, NULL, cond_thread, &sh), 0);
	weft_co *s = weft_spawn(cond_signaller, &sh);
	cr_assert_eq(weft_join(s), 0);
	pthread_join(ct, NULL);
	cr_assert_eq(weft_shutdown(), 0);
	weft_mutex_free(sh.m);
	weft_cond_free(sh.c);
}
