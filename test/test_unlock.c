/* SPDX-License-Identifier: MIT */
/* Unlock paths (docs/design.md, "Unlock paths"): an unlock publishes "free"
 * as its very last access to the object, so whoever takes the object next
 * may free it at once, even while the unlocker's call has not returned.
 * Each round is a small reference-counted object guarded by its own lock
 * (the pattern of glibc bug 13690): three users, the unlocker, a waiter
 * that is cancelled, and a partner (a plain thread or a coroutine); each
 * drops its reference when done and the last one frees the lock.  The
 * cancelled waiter leaves the state that sends the unlocker down its
 * contended path.  A write to the lock after it was freed is a
 * use-after-free, which ASan reports and valgrind flags.
 *
 * The window is a few instructions.  The fault-injection build widens it:
 * the contended unlock pauses there (WEFT__FAULT_UNLOCK, lib/fault.h) until
 * the partner has been through or a few milliseconds have passed; on a
 * correct unlock the partner cannot get the lock during the pause. */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#ifdef WEFT_FAULT_INJECTION
#include "fault.h"
#define FAULT_BUILD 1
#else
#define FAULT_BUILD 0
#endif

/* $UNLOCK_ROUNDS overrides the count (to time a build).  The fault build
 * pauses up to WINDOW_NS per round. */
static unsigned rounds(void)
{
	const char *env = getenv("UNLOCK_ROUNDS");
	if (env)
		return (unsigned)strtoul(env, NULL, 10);
	return FAULT_BUILD ? 200 : scaled(5000, 2000, 100);
}

/* ------------------------------------------------------ the pause point */

#ifdef WEFT_FAULT_INJECTION
/* A correct unlock keeps the partner out for the whole pause, so it must
 * end by itself: it only widens the window, never gates the test. */
static const int64_t WINDOW_NS = 5 * 1000 * 1000;

static struct {
	_Atomic(const void *) obj;	/* the lock whose next unlock pauses */
	atomic_int passed;		/* the partner is through this round */
} window;

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Runs inside the unlock, on its thread: it must not park, only wait.
 * The unlock has not made its last access yet, so a partner through
 * already has freed a lock the unlock is about to write.  Under ASan the
 * pause just returns, and ASan reports that write. */
static void pause_in_unlock(uintptr_t what)
{
	const void *armed = (const void *)what;
	if (!atomic_compare_exchange_strong(&window.obj, &armed, NULL))
		return;
	int64_t until = mono_ns() + WINDOW_NS;
	while (!atomic_load(&window.passed) && mono_ns() < until)
		sched_yield();
#ifndef WEFT_TEST_ASAN
	CHECK(!atomic_load(&window.passed));	/* the lock was freed inside its unlock */
#endif
}

static void arm_window(const void *obj)
{
	weft__fault_on(WEFT__FAULT_UNLOCK, pause_in_unlock);
	atomic_store(&window.passed, 0);
	atomic_store(&window.obj, obj);
}

static void partner_passed(void)
{
	atomic_store(&window.passed, 1);
}
#else
static void arm_window(const void *obj)
{
	(void)obj;
}

static void partner_passed(void)
{
}
#endif

/* ------------------------------------------------------ one round */

struct round {
	void *lock;		/* the mutex or rwlock */
	atomic_int users;	/* whoever drops the last frees the lock */
	atomic_int go;		/* the unlocker is about to unlock */
	weft_co *waiter;	/* the waiter that gets cancelled */
	atomic_int waiter_done;	/* its lock call has returned */
	atomic_int done;	/* the partner is done with the round */
};

/* Drops a reference: true for the last one (which frees the lock). */
static bool drop_user(struct round *r)
{
	return atomic_fetch_sub(&r->users, 1) == 1;
}

static void relax(void)
{
	if (weft_self())
		weft_yield();
	else
		sched_yield();
}

/* Waits (without parking: the round counts parks) until *flag is set. */
static void wait_flag(atomic_int *flag)
{
	while (!atomic_load(flag))
		relax();
}

/* Waits until some coroutine parked since `parks`: the waiter, the only
 * coroutine that parks meanwhile, is queued on the lock. */
static void wait_parked(uint64_t parks)
{
	while (stats_now().total.parks == parks)
		weft_yield();
}

/* ------------------------------------------------------ the partner */

/* Runs fn on each round handed over, as a plain thread or a coroutine (on
 * either worker); it never parks between rounds. */
struct partner {
	void (*fn)(struct round *r);
	_Atomic(struct round *) next;
	atomic_int stop;
	bool thread;
	pthread_t t;
	weft_co *co;
};

static void partner_loop(void *arg)
{
	struct partner *p = arg;
	for (;;) {
		struct round *r;
		while (!(r = atomic_load(&p->next))) {
			if (atomic_load(&p->stop))
				return;
			relax();
		}
		atomic_store(&p->next, NULL);
		p->fn(r);
		atomic_store(&r->done, 1);	/* last touch of *r */
	}
}

static void *partner_thread(void *arg)
{
	partner_loop(arg);
	return NULL;
}

static void partner_start(struct partner *p)
{
	if (p->thread)
		CHECK(pthread_create(&p->t, NULL, partner_thread, p) == 0);
	else
		p->co = go(partner_loop, p);
}

static void partner_stop(struct partner *p)
{
	atomic_store(&p->stop, 1);
	if (p->thread)
		CHECK(pthread_join(p->t, NULL) == 0);
	else
		join(p->co);
}

/* ------------------------------------------------------ mutex */

/* The waiter queues behind the unlocker and is cancelled, which leaves the
 * mutex's waiters bit set with nobody queued: the unlock is contended. */
static void mutex_waiter(void *arg)
{
	struct round *r = arg;
	weft_mutex *m = r->lock;
	if (weft_mutex_lock(m) == 0)
		CHECK(weft_mutex_unlock(m) == 0);
	else
		CHECK(errno == ECANCELED);
	if (drop_user(r))
		weft_mutex_free(m);
}

/* The partner takes the mutex as soon as the unlocker lets it go. */
static void mutex_partner(struct round *r)
{
	weft_mutex *m = r->lock;
	wait_flag(&r->go);
	CHECK(weft_mutex_lock(m) == 0);
	bool last = drop_user(r);
	CHECK(weft_mutex_unlock(m) == 0);
	if (last)
		weft_mutex_free(m);
	partner_passed();
}

static void mutex_rounds(void *arg)
{
	struct partner p = { .fn = mutex_partner, .thread = *(bool *)arg };
	partner_start(&p);
	for (unsigned i = 0; i < rounds(); i++) {
		struct round r = { .lock = weft_mutex_new(), .users = 3 };
		weft_mutex *m = r.lock;
		CHECK(m);
		CHECK(weft_mutex_lock(m) == 0);
		atomic_store(&p.next, &r);
		uint64_t parks = stats_now().total.parks;
		r.waiter = go(mutex_waiter, &r);
		wait_parked(parks);
		CHECK(weft_cancel(r.waiter) == 0);
		join(r.waiter);
		arm_window(m);
		atomic_store(&r.go, 1);
		bool last = drop_user(&r);
		CHECK(weft_mutex_unlock(m) == 0);	/* the contended path */
		if (last)
			weft_mutex_free(m);
		wait_flag(&r.done);
	}
	partner_stop(&p);
}

Test(unlock, mutex_freed_by_the_next_holder_after_a_cancelled_waiter, .timeout = 600)
{
	bool thread = true;
	run(2, mutex_rounds, &thread);
	thread = false;
	run(2, mutex_rounds, &thread);
}

/* ------------------------------------------------------ reader-writer lock */

/* A writer queued behind the unlocker's read hold; the partner cancels it
 * while the unlocker, the last reader, leaves. */
static void rwlock_waiter(void *arg)
{
	struct round *r = arg;
	weft_rwlock *l = r->lock;
	if (weft_rwlock_wrlock(l, -1) == 0)
		CHECK(weft_rwlock_unlock(l) == 0);
	else
		CHECK(errno == ECANCELED);
	atomic_store(&r->waiter_done, 1);
	if (drop_user(r))
		weft_rwlock_free(l);
}

/* Once the unlocker lets go, the partner cancels the queued writer and,
 * when its call has returned, write-locks: the lock is then free. */
static void rwlock_partner(struct round *r)
{
	weft_rwlock *l = r->lock;
	wait_flag(&r->go);
	CHECK(weft_cancel(r->waiter) == 0);
	wait_flag(&r->waiter_done);
	CHECK(weft_rwlock_wrlock(l, -1) == 0);
	CHECK(weft_rwlock_unlock(l) == 0);
	if (drop_user(r))
		weft_rwlock_free(l);
	partner_passed();
}

static void rwlock_rounds(void *arg)
{
	struct partner p = { .fn = rwlock_partner, .thread = *(bool *)arg };
	partner_start(&p);
	for (unsigned i = 0; i < rounds(); i++) {
		struct round r = { .lock = weft_rwlock_new(), .users = 3 };
		weft_rwlock *l = r.lock;
		CHECK(l);
		CHECK(weft_rwlock_rdlock(l, -1) == 0);
		atomic_store(&p.next, &r);
		uint64_t parks = stats_now().total.parks;
		r.waiter = go(rwlock_waiter, &r);
		wait_parked(parks);
		arm_window(l);
		atomic_store(&r.go, 1);
		bool last = drop_user(&r);
		CHECK(weft_rwlock_unlock(l) == 0);	/* the last reader, a writer queued */
		if (last)
			weft_rwlock_free(l);
		join(r.waiter);
		wait_flag(&r.done);
	}
	partner_stop(&p);
}

Test(unlock, rwlock_freed_by_the_next_writer_after_the_last_reader, .timeout = 600)
{
	bool thread = true;
	run(2, rwlock_rounds, &thread);
	thread = false;
	run(2, rwlock_rounds, &thread);
}
