/* SPDX-License-Identifier: MIT */
/*
 * sync.c — mutex, condition variable and wait group, on the wait queues of
 * waitq.h (and so on the one park/wake protocol).
 *
 * Mutex (after Go's sync.Mutex).  `state` holds M_LOCKED, M_WAITERS (the
 * queue may hold waiters), M_STARVING and M_WOKEN.  Uncontended lock and unlock are
 * one CAS each (after a load of the state with several workers: lock_fast),
 * no lock, no syscall.  A contended locker spins briefly, then
 * takes the internal lock, sets M_WAITERS, queues (FIFO) and parks.
 *   Normal mode: unlock releases the mutex and wakes the oldest waiter to
 *   compete for it; a running locker may take it first (barging), which
 *   keeps short critical sections from turning into a convoy of park/wake
 *   pairs.  The woken waiter that loses queues again.  While a woken waiter
 *   is on its way back (M_WOKEN), unlocks wake nobody else (unlock_slow).
 *   Starving mode: a waiter that has waited 1 ms (STARVE_NS) sets
 *   M_STARVING; from then on unlock hands the mutex, still locked, to the
 *   oldest waiter, and newcomers cannot take it (they queue behind).  The
 *   mode ends when the queue empties or a waiter got it within 1 ms.
 * So no waiter starves (its wait is bounded by the queue ahead of it once
 * the mode flips), and under light contention there are no hand-offs.
 * The holder is a coroutine or a plain thread (weft__park_context_id); a
 * plain thread's wait blocks it on its futex word (park.h), so mutexes and
 * condition variables serve offloaded functions and other threads too.
 * Every state change while the mutex is locked is made by its owner or
 * under the internal lock; the lock-free ones are single CASes.  M_WOKEN is
 * set only with a claimed waiter, whose wake result is WEFT__PARK_WAKE_RETRY, and
 * that waiter clears it (clear_woken) whatever it does next, cancelled or
 * not: a bit left set would stop every later wake.  Clearing it early (the
 * hand-off's store) costs at most one extra wake.
 */
#include <errno.h>
#include <stdlib.h>

#include "atomic.h"
#include "clock.h"
#include "coro.h"
#include "errors.h"
#include "fault.h"
#include "waitq.h"
#include "weft.h"
#include "worker.h"

enum { SPIN_ROUNDS = 10 };
enum { M_LOCKED = 1, M_WAITERS = 2, M_STARVING = 4, M_WOKEN = 8 };	/* mutex state bits */
static const int64_t STARVE_NS = 1000 * 1000;	/* Go's starvationThresholdNs */

/* ------------------------------------------------------ mutex */

struct weft_mutex {
	struct weft__lock lock;
	unsigned state;		/* atomic: M_LOCKED | M_WAITERS | M_STARVING | M_WOKEN */
	void *owner;		/* atomic: the holder's weft__park_context_id, or NULL */
	struct weft__waitq q;
};

weft_mutex *weft_mutex_new(void)
{
	return weft__waitq_object_new(sizeof(weft_mutex));
}

void weft_mutex_free(weft_mutex *m)
{
	free(m);
}

/* The mutex's holder: the coroutine, or the plain thread (park.h). */
static void *caller(void)
{
	return (void *)weft__park_context_id();
}

static int acquired(weft_mutex *m, void *self)
{
	at_store_ptr(&m->owner, self);
	return 0;
}

/* Takes m if it is free and not reserved for a queued waiter (starving). */
static bool try_take(weft_mutex *m)
{
	unsigned s = at_load_uint(&m->state);
	return !(s & (M_LOCKED | M_STARVING)) && at_cas_uint(&m->state, s, s | M_LOCKED);
}

/*
 * The uncontended lock and unlock.  With one worker the mutex is contended
 * only by coroutines that park while holding it, so the state is usually 0
 * and a CAS from it wins at once.  With several, the lockers of the other
 * workers keep waiter bits set for long stretches (a woken waiter waits in
 * the runnext slot of a worker busy with the lock's holders), and a CAS
 * expecting 0 then fails: a locked instruction for nothing, and the line
 * taken exclusive from the cores that read it.  So the state is read first
 * (docs/notes/2026-12-06-measurements-behind-the-code.md, "mutex fast path").
 */
static inline bool lock_fast(weft_mutex *m)
{
	if (weft__rt.nworkers == 1)
		return at_cas_uint(&m->state, 0, M_LOCKED);
	return try_take(m);
}

static inline bool unlock_fast(weft_mutex *m)
{
	if (weft__rt.nworkers > 1 && at_load_uint(&m->state) != M_LOCKED)
		return false;
	return at_cas_uint(&m->state, M_LOCKED, 0);
}

/*
 * A holder on another worker usually leaves within a short critical section,
 * far sooner than a park and a wake across cores: spin briefly first.
 * Useless on one worker: the holder cannot run while we spin.  Briefly means
 * SPIN_ROUNDS looks: each look pulls the state's line from the holder's core
 * and slows its next lock, so a longer spin costs more than the parks it
 * saves (docs/notes/2026-12-06-measurements-behind-the-code.md, "mutex spin").
 */
static bool spin_for(weft_mutex *m)
{
	if (weft__rt.nworkers < 2)
		return false;
	for (int i = 0; i < SPIN_ROUNDS; i++) {
		if (try_take(m))
			return true;
		if (at_load_uint(&m->state) & M_STARVING)
			return false;
		at_pause();
	}
	return false;
}

/* Adds bit while m is locked: false if m was released meanwhile (then the
 * caller must try to take it instead, or nobody might ever wake it). */
static bool mark_locked(weft_mutex *m, unsigned bit)
{
	unsigned s = at_load_uint(&m->state);
	return (s & M_LOCKED) && ((s & bit) || at_cas_uint(&m->state, s, s | bit));
}

/* The woken waiter is back (under m->lock): the next unlock may wake
 * another.  A CAS: bargers and the owner's unlock change the state
 * without m->lock. */
static void clear_woken(weft_mutex *m)
{
	unsigned s = at_load_uint(&m->state);
	while (!at_cas_uint(&m->state, s, s & ~M_WOKEN))
		s = at_load_uint(&m->state);
}

static int lock_contended(weft_mutex *m, void *self)
{
	int64_t since = 0;
	weft__lock_acquire(&m->lock);
	while (!try_take(m)) {
		if (!mark_locked(m, M_WAITERS))
			continue;	/* released meanwhile: try again */
		struct weft__wait x;
		weft__wait_enqueue(&x, &m->q, NULL);
		if (!since)
			since = weft_now();
		int r = weft__wait_park(&x, &m->lock, &m->q, -1);
		bool long_wait = weft_now() - since >= STARVE_NS;
		if (r != 0 && r != WEFT__PARK_WAKE_RETRY)
			return weft__err_fail(r);
		weft__lock_acquire(&m->lock);
		if (r == WEFT__PARK_WAKE_RETRY)
			clear_woken(m);
		if (r == 0) {	/* handed over in starving mode: locked for us */
			if (!long_wait)	/* the queue moves fast again; we own m, and
					 * the other writers need m->lock */
				at_store_uint(&m->state, at_load_uint(&m->state) & ~M_STARVING);
			break;
		}
		if (long_wait)
			mark_locked(m, M_STARVING);	/* no more barging: hand-off */
	}
	weft__lock_release(&m->lock);
	return acquired(m, self);
}

/* Unlock with waiters or in starving mode: under m->lock, claims the oldest
 * waiter, if any, into ws.  In starving mode it hands m over, still locked
 * (true: done).  Otherwise it leaves M_LOCKED set (false): the caller's
 * CAS clears it after the lock's release, so that the CAS that publishes
 * "free" is the unlock's last access to m (design.md, "Unlock paths").
 * Only the owner and holders of m->lock write the state while it is
 * locked, and try_take cannot succeed while M_LOCKED is set, so plain
 * stores suffice here. */
static bool unlock_contended(weft_mutex *m, struct weft__wakes *ws)
{
	weft__lock_acquire(&m->lock);
	bool starving = at_load_uint(&m->state) & M_STARVING;
	struct weft__wnode *n = weft__waitq_claim(&m->q, ws);
	/* a node left may be one given up (waitq.h): then M_WAITERS stays set
	 * for nobody, and the next unlock's claim finds none and clears it */
	bool more = n && !weft__waitq_empty(&m->q);
	if (n && starving) {
		at_store_uint(&m->state, M_LOCKED | (more ? M_WAITERS | M_STARVING : 0));
		weft__wakes_add(ws, n, 0);
	} else {
		at_store_uint(&m->state, M_LOCKED | (more ? M_WAITERS : 0) | (n ? M_WOKEN : 0));
		if (n)
			weft__wakes_add(ws, n, WEFT__PARK_WAKE_RETRY);
	}
	weft__fault_pause(WEFT__FAULT_UNLOCK, (uintptr_t)m);
	weft__lock_release(&m->lock);
	return n && starving;
}

/* Unlock when the state is more than M_LOCKED.  While a woken waiter is on
 * its way back (M_WOKEN) nobody else is woken, as in Go: every unlock
 * waking one more waiter that would mostly lose to a barger and queue again
 * turned contention into a stream of park/wake pairs; the woken waiter
 * clears the bit when it is back, so the next unlock wakes the next one.
 * M_LOCKED is cleared only by the CAS here, after m->lock's release; the
 * caller runs ws after it (it reads only the claimed nodes). */
static void unlock_slow(weft_mutex *m, struct weft__wakes *ws)
{
	for (;;) {
		unsigned s = at_load_uint(&m->state);
		if ((s & M_STARVING) || ((s & M_WAITERS) && !(s & M_WOKEN))) {
			if (unlock_contended(m, ws))
				break;
			continue;
		}
		if (at_cas_uint(&m->state, s, s & ~M_LOCKED))
			break;
	}
}

/* Releases m, held by the caller.  True if it took the slow path: then the
 * waiter it handed over to, if any, and the nodes it dropped are in ws, to
 * run; the fast path leaves ws as it was (an unlock with nobody queued
 * pays nothing for them). */
static inline bool release(weft_mutex *m, struct weft__wakes *ws)
{
	at_store_ptr(&m->owner, NULL);
	if (unlock_fast(m))
		return false;
	unlock_slow(m, ws);
	return true;
}

int weft_mutex_lock(weft_mutex *m)
{
	if (!m)
		return weft__err_fail(EINVAL);
	weft_co *co = weft_self();	/* one look for both checks */
	void *self = (void *)weft__park_context_of(co);
	if (at_load_ptr(&m->owner) == self)
		return weft__err_fail(EDEADLK);
	if (weft__co_cancelled_of(co))
		return weft__err_fail(ECANCELED);
	if (lock_fast(m) || spin_for(m))
		return acquired(m, self);
	return lock_contended(m, self);
}

int weft_mutex_trylock(weft_mutex *m)
{
	if (!m)
		return weft__err_fail(EINVAL);
	if (!try_take(m))
		return weft__err_fail(EBUSY);
	return acquired(m, caller());
}

int weft_mutex_unlock(weft_mutex *m)
{
	if (!m)
		return weft__err_fail(EINVAL);
	if (at_load_ptr(&m->owner) != caller())
		return weft__err_fail(EPERM);
	struct weft__wakes ws = { .head = NULL };
	if (release(m, &ws))
		weft__wakes_run(&ws);
	return 0;
}

/* ------------------------------------------------------ condition variable */

struct weft_cond {
	struct weft__lock lock;
	struct weft__waitq q;
};

weft_cond *weft_cond_new(void)
{
	return weft__waitq_object_new(sizeof(weft_cond));
}

void weft_cond_free(weft_cond *c)
{
	free(c);
}

/* cond_wait returns with m held, also once cancelled, when every lock call
 * fails with ECANCELED: then it retries trylock, yielding in between. */
static void relock(weft_mutex *m)
{
	if (weft_mutex_lock(m) == 0)
		return;
	/* Cancelled, or interrupted: the interrupt is left for the next wait
	 * (cond_wait reports its own wait's result), and this one must not
	 * wait again, or it would take it back. */
	weft__park_interrupt_unused(weft_self(), weft__err_get());
	while (weft_mutex_trylock(m) != 0)
		weft_yield();
}

int weft_cond_wait(weft_cond *c, weft_mutex *m, int64_t deadline)
{
	if (!c || !m)
		return weft__err_fail(EINVAL);
	if (at_load_ptr(&m->owner) != caller())
		return weft__err_fail(EPERM);
	if (weft__co_cancelled())
		return weft__err_fail(ECANCELED);
	weft__lock_acquire(&c->lock);
	struct weft__wait x;
	/* Queued before the mutex is released: a signal after the release
	 * finds us (no lost wake-up). */
	weft__wait_enqueue(&x, &c->q, NULL);
	/* The mutex's wake runs under c's lock; the wait for the nodes its
	 * release dropped (waitq.h) only once that lock is released: a
	 * coroutine may yield there, and must not hold it. */
	struct weft__wakes ws = { .head = NULL };
	release(m, &ws);
	weft__wakes_wake(&ws);
	int r = weft__wait_park(&x, &c->lock, &c->q, deadline);
	weft__wakes_settle(&ws);
	relock(m);
	return r ? weft__err_fail(r) : 0;
}

static int cond_wake(weft_cond *c, bool all)
{
	if (!c)
		return weft__err_fail(EINVAL);
	struct weft__wakes ws = { .head = NULL };
	weft__lock_acquire(&c->lock);
	if (all) {
		weft__waitq_claim_all(&c->q, 0, &ws);
	} else {
		struct weft__wnode *n = weft__waitq_claim(&c->q, &ws);
		if (n)
			weft__wakes_add(&ws, n, 0);
	}
	weft__lock_release(&c->lock);
	weft__wakes_run(&ws);
	return 0;
}

int weft_cond_signal(weft_cond *c)
{
	return cond_wake(c, false);
}

int weft_cond_broadcast(weft_cond *c)
{
	return cond_wake(c, true);
}

/* ------------------------------------------------------ wait group */

struct weft_wg {
	struct weft__lock lock;
	size_t count;		/* under lock */
	struct weft__waitq q;
};

weft_wg *weft_wg_new(void)
{
	return weft__waitq_object_new(sizeof(weft_wg));
}

void weft_wg_free(weft_wg *wg)
{
	free(wg);
}

int weft_wg_add(weft_wg *wg, int delta)
{
	if (!wg)
		return weft__err_fail(EINVAL);
	struct weft__wakes ws = { .head = NULL };
	weft__lock_acquire(&wg->lock);
	/* never below 0 (nor past SIZE_MAX, which an int cannot reach) */
	bool fits = delta >= 0 || (size_t)-(long)delta <= wg->count;
	if (fits) {
		wg->count += (size_t)(long)delta;	/* modulo 2^n: a subtraction too */
		if (wg->count == 0)
			weft__waitq_claim_all(&wg->q, 0, &ws);
	}
	weft__lock_release(&wg->lock);
	weft__wakes_run(&ws);
	return fits ? 0 : weft__err_fail(EINVAL);
}

int weft_wg_done(weft_wg *wg)
{
	return weft_wg_add(wg, -1);
}

int weft_wg_wait(weft_wg *wg, int64_t deadline)
{
	if (weft__co_wait_entry(wg != NULL) != 0)
		return -1;
	int r = weft__wait_zero(&wg->lock, &wg->count, &wg->q, deadline, true);
	return r ? weft__err_fail(r) : 0;
}
