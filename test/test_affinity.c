/* SPDX-License-Identifier: MIT */
/* weft_lock_thread / weft_unlock_thread: a locked coroutine resumes on the
 * worker thread it locked on, whoever wakes it and however busy that
 * worker is; the same scenarios move an unlocked one, so they can tell. */
#include "harness.h"
#include <pthread.h>
#include <stdbool.h>

#include "coro_test.h"

/* ------------------------------------------------ every kind of wake */

struct wakes {
	bool lock;
	int sv[2];		/* a plain thread writes to sv[1] */
	weft_chan *ch;		/* a coroutine sends on it */
	weft_mutex *mu;
	unsigned rounds;
	unsigned moved;		/* resumptions on another thread than the last */
	int busy_stop;		/* atomic: the load coroutines stop */
};

/* The worker by weft_worker_id, not pthread_self: glibc declares that one
 * const, and the compiler reuses its value across a suspension (the very
 * trap of a cached thread identity). */
static void note_thread(struct wakes *k, int *last)
{
	if (*last != weft_worker_id())
		k->moved++;
	*last = weft_worker_id();
}

static void nothing(void *arg)
{
	(void)arg;
}

static void *plain_writer(void *arg)
{
	struct wakes *k = arg;
	for (unsigned i = 0; i < k->rounds; i++) {
		usleep(100);
		CHECK(write(k->sv[1], "x", 1) == 1);
	}
	return NULL;
}

static void chan_feeder(void *arg)
{
	struct wakes *k = arg;
	for (unsigned i = 0; i < k->rounds; i++)
		CHECK(weft_chan_send(k->ch, &i, -1) == 0);
}

static void mutex_holder(void *arg)
{
	struct wakes *k = arg;
	for (unsigned i = 0; i < k->rounds; i++) {
		CHECK(weft_mutex_lock(k->mu) == 0);
		weft_yield();
		CHECK(weft_mutex_unlock(k->mu) == 0);
	}
}

/* Keeps both workers busy with yields, so that thieves look everywhere. */
static void busy(void *arg)
{
	struct wakes *k = arg;
	while (!__atomic_load_n(&k->busy_stop, __ATOMIC_ACQUIRE))
		weft_yield();
}

/* One round of every wake: a yield, a timer, a channel hand-off from a
 * coroutine, a mutex hand-off, I/O readiness made by a plain thread, an
 * offload helper's completion.  Each resumption is checked. */
static void waker_rounds(struct wakes *k, int *last)
{
	for (unsigned i = 0; i < k->rounds; i++) {
		weft_yield();
		note_thread(k, last);
		CHECK(weft_sleep(weft_now() + 50 * 1000) == 0);
		note_thread(k, last);
		unsigned v;
		CHECK(weft_chan_recv(k->ch, &v, -1) == 0 && v == i);
		note_thread(k, last);
		CHECK(weft_mutex_lock(k->mu) == 0);
		note_thread(k, last);
		CHECK(weft_mutex_unlock(k->mu) == 0);
		char c;
		CHECK(weft_read(k->sv[0], &c, 1, -1) == 1);
		note_thread(k, last);
		CHECK(weft_offload(nothing, NULL) == 0);
		note_thread(k, last);
	}
}

static void wakes_root(void *arg)
{
	struct wakes *k = arg;
	k->busy_stop = 0;
	socket_pair(k->sv);
	k->ch = weft_chan_new(sizeof(unsigned), 0);
	k->mu = weft_mutex_new();
	CHECK(k->ch && k->mu);
	weft_co *load[4];
	for (int i = 0; i < 4; i++)
		load[i] = go(busy, k);
	pthread_t writer;
	CHECK(pthread_create(&writer, NULL, plain_writer, k) == 0);
	weft_co *feeder = go(chan_feeder, k), *holder = go(mutex_holder, k);
	if (k->lock)
		CHECK(weft_lock_thread() == 0);
	int last = weft_worker_id();
	waker_rounds(k, &last);
	if (k->lock)
		CHECK(weft_unlock_thread() == 0);
	join(feeder);
	join(holder);
	CHECK(pthread_join(writer, NULL) == 0);
	__atomic_store_n(&k->busy_stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++)
		join(load[i]);
	weft_chan_free(k->ch);
	weft_mutex_free(k->mu);
	CHECK(weft_close(k->sv[0]) == 0);
	close(k->sv[1]);
}

Test(affinity, a_locked_coroutine_resumes_on_its_thread_after_every_kind_of_wake, .timeout = 120)
{
	/* Moving is likely, not certain (a loaded machine may leave the
	 * other worker descheduled throughout): a few tries. */
	struct wakes unlocked = { .lock = false, .rounds = scaled(200, 50, 20) };
	for (int tries = 0; tries < 20 && !unlocked.moved; tries++)
		run(2, wakes_root, &unlocked);
	cr_assert_gt(unlocked.moved, 0, "the unlocked coroutine never moved: the test proves nothing");
	struct wakes locked = { .lock = true, .rounds = unlocked.rounds };
	run(2, wakes_root, &locked);
	cr_assert_eq(locked.moved, 0, "the locked coroutine resumed %u times on another thread",
		     locked.moved);
}

/* ------------------------------------------------ a stuck home worker */

/*
 * A coroutine sleeps while its worker is stuck in a spinning coroutine.  The
 * monitor fires the stuck worker's timers, and the other worker runs what
 * they woke: an unlocked sleeper resumes there, while the spinner still
 * spins; a locked one waits until the spinner returns.
 */
struct stuck {
	bool lock;
	int resumed;		/* atomic: the sleeper ran again */
	int started;		/* atomic: the spinner began, at spin_worker */
	int spun;		/* atomic: the spinner returned */
	int spin_worker;
	bool moved, during_spin;
	bool stuck_home;	/* the spinner held the sleeper's worker when it woke */
};

static void spinner(void *arg)
{
	struct stuck *s = arg;
	s->spin_worker = weft_worker_id();
	__atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
	/* Long enough for the monitor to have fired the sleeper's timer
	 * (it looks every tick); an unlocked sleeper ends it early. */
	int64_t end = weft_now() + (int64_t)scaled(200, 400, 2000) * MS;
	while (!__atomic_load_n(&s->resumed, __ATOMIC_ACQUIRE) && weft_now() < end)
		;
	__atomic_store_n(&s->spun, 1, __ATOMIC_RELEASE);
}

static void sleeper(void *arg)
{
	struct stuck *s = arg;
	if (s->lock)
		CHECK(weft_lock_thread() == 0);
	int home = weft_worker_id();
	weft_co *spin = go(spinner, s);	/* this worker's runnext: it runs next, here */
	CHECK(weft_sleep(weft_now() + 5 * MS) == 0);
	bool started = __atomic_load_n(&s->started, __ATOMIC_ACQUIRE);
	s->during_spin = !__atomic_load_n(&s->spun, __ATOMIC_ACQUIRE);
	s->stuck_home = started && s->spin_worker == home;
	s->moved = home != weft_worker_id();
	__atomic_store_n(&s->resumed, 1, __ATOMIC_RELEASE);
	join(spin);
	if (s->lock)
		CHECK(weft_unlock_thread() == 0);
}

static void stuck_root(void *arg)
{
	join(go(sleeper, arg));
}

Test(affinity, a_locked_coroutine_waits_for_its_stuck_worker, .timeout = 60)
{
	struct stuck unlocked = { .lock = false };
	for (int tries = 0; tries < 5 && !(unlocked.moved && unlocked.during_spin); tries++) {
		unlocked = (struct stuck){ .lock = false };
		run(2, stuck_root, &unlocked);
	}
	cr_assert(unlocked.moved && unlocked.during_spin,
		  "the unlocked sleeper did not resume elsewhere during the spin: the test proves nothing");
	/* A worker kept off its CPU (TSan on a loaded host) can let the
	 * other worker steal the spinner from its runnext slot, or sleep
	 * through the 5 ms so that the timer fires before the sleeper has
	 * switched away: either way its worker was never stuck in the
	 * spinner, and the try says nothing.  A few tries. */
	struct stuck locked = { .lock = true };
	for (int tries = 0; tries < 5 && !locked.stuck_home; tries++) {
		locked = (struct stuck){ .lock = true };
		run(2, stuck_root, &locked);
	}
	cr_assert(locked.stuck_home, "the spinner never held the sleeper's worker: the test proves nothing");
	cr_assert(!locked.moved, "the locked sleeper resumed on another thread");
	cr_assert(!locked.during_spin, "the locked sleeper ran while its worker was stuck");
}

/* ------------------------------------------------ nesting and misuse */

static void nesting(void *arg)
{
	(void)arg;
	CHECK(weft_unlock_thread() == -1 && errno == EINVAL);
	CHECK(weft_lock_thread() == 0);
	CHECK(weft_lock_thread() == 0);
	CHECK(weft_unlock_thread() == 0);
	CHECK(weft_unlock_thread() == 0);
	CHECK(weft_unlock_thread() == -1 && errno == EINVAL);
	CHECK(weft_lock_thread() == 0);	/* returning while locked is fine */
}

static void nesting_root(void *arg)
{
	join(go(nesting, arg));
}

Test(affinity, locks_nest_and_misuse_is_reported)
{
	errno = 0;
	cr_assert_eq(weft_lock_thread(), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_unlock_thread(), -1);
	cr_assert_eq(errno, EPERM);
	run(2, nesting_root, NULL);
}
