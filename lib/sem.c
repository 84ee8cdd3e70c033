/* SPDX-License-Identifier: MIT */
/*
 * sem.c — weft_sem, a counting semaphore on the wait queues of waitq.h.
 *
 * FIFO, no barging: a release while someone waits hands its permit to the
 * oldest waiter (claimed under the lock, woken after the lock's release, as
 * every wake is: the object-lifetime rule), never to a newcomer.  So the
 * count is above zero only while nobody waits, and one 64-bit word holds
 * both: state = count << 1 | WAITERS, with WAITERS set => count 0.
 *   acquire: CAS count -> count - 1 while count > 0, no lock; else, under
 *     the lock, set WAITERS (count still 0), queue and park.  A waiter woken
 *     by its claimer holds the permit it was handed, even if its deadline or
 *     a cancel raced the claim (waitq.h).
 *   release: CAS count -> count + 1 while WAITERS is clear, no lock; else,
 *     under the lock, claim the oldest waiter and hand it the permit.
 * WAITERS is set and cleared only under the lock: it is cleared by the
 * release that empties the queue (claiming the last waiter, or dropping
 * the nodes of waiters that gave up: waitq.h), and by the last waiter that
 * gives up and unlinks its own node (gave_up), so a release never adds a
 * permit while a waiter is queued.
 * An uncontended acquire or release is one CAS; its last access to the
 * object.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "atomic.h"
#include "clock.h"
#include "coro.h"
#include "errors.h"
#include "waitq.h"
#include "weft.h"

enum { WAITERS = 1 };
static const uint64_t ONE = 2;	/* a permit, in the state word */
static const uint64_t COUNT_MAX = UINT_MAX;

struct weft_sem {
	uint64_t state;		/* atomic: count << 1 | WAITERS */
	struct weft__lock lock;
	struct weft__waitq q;
};

weft_sem *weft_sem_new(unsigned value)
{
	weft_sem *s = weft__waitq_object_new(sizeof *s);
	if (s)
		s->state = (uint64_t)value * ONE;
	return s;
}

void weft_sem_free(weft_sem *s)
{
	free(s);
}

/* Takes a permit if there is one (there is none while anyone waits). */
static bool take(weft_sem *s)
{
	uint64_t st;
	while ((st = at_load_64(&s->state)) >= ONE)
		if (at_cas_64(&s->state, st, st - ONE))
			return true;
	return false;
}

/* Under the lock, after a waiter gave up: the last one clears WAITERS (the
 * count is 0 while it is set, and nobody else writes the word then). */
static void gave_up(void *obj, struct weft__wakes *ws)
{
	(void)ws;
	weft_sem *s = obj;
	if (weft__waitq_empty(&s->q))	/* nor a node given up: waitq.h */
		at_store_64(&s->state, 0);
}

static int acquire_slow(weft_sem *s, int64_t deadline)
{
	weft__lock_acquire(&s->lock);
	for (;;) {
		uint64_t st = at_load_64(&s->state);
		if (st >= ONE) {	/* a release came meanwhile; WAITERS is clear */
			if (!at_cas_64(&s->state, st, st - ONE))
				continue;
			weft__lock_release(&s->lock);
			return 0;
		}
		if (weft__clock_deadline_passed(deadline)) {
			weft__lock_release(&s->lock);
			return ETIMEDOUT;
		}
		if (st == WAITERS || at_cas_64(&s->state, 0, WAITERS))
			break;
	}
	struct weft__wait x;
	weft__wait_enqueue(&x, &s->q, NULL);
	return weft__wait_park_hook(&x, &s->lock, &s->q, deadline, gave_up, s);
}

int weft_sem_acquire(weft_sem *s, int64_t deadline)
{
	if (weft__co_wait_entry(s != NULL) != 0)
		return -1;
	if (take(s))
		return 0;
	int r = acquire_slow(s, deadline);
	return r ? weft__err_fail(r) : 0;
}

int weft_sem_tryacquire(weft_sem *s)
{
	if (!s)
		return weft__err_fail(EINVAL);
	return take(s) ? 0 : weft__err_fail(EAGAIN);
}

/* Adds a permit while nobody waits: 0, EOVERFLOW at the maximum, or
 * WAITERS (the caller must hand the permit over instead). */
static int add_permit(weft_sem *s)
{
	for (;;) {
		uint64_t st = at_load_64(&s->state);
		if (st & WAITERS)
			return WAITERS;
		if (st / ONE == COUNT_MAX)
			return EOVERFLOW;
		if (at_cas_64(&s->state, st, st + ONE))
			return 0;
	}
}

/* Under the lock: the permit goes to the oldest waiter, if any (false:
 * nobody waits, WAITERS is clear). */
static bool hand_over(weft_sem *s, struct weft__wakes *ws)
{
	if (!(at_load_64(&s->state) & WAITERS))
		return false;
	struct weft__wnode *n = weft__waitq_claim(&s->q, ws);
	if (n)
		weft__wakes_add(ws, n, 0);
	if (weft__waitq_empty(&s->q))
		at_store_64(&s->state, 0);
	return n != NULL;
}

/* A permit is published lock-free (add_permit's CAS, the last access to s:
 * a taker may free s at once), or handed to a waiter under the lock; if the
 * waiters gave up before the lock was taken, the lock is released first
 * and the CAS tried again (design.md, "Unlock paths"). */
int weft_sem_release(weft_sem *s)
{
	if (!s)
		return weft__err_fail(EINVAL);
	int r;
	while ((r = add_permit(s)) == WAITERS) {
		struct weft__wakes ws = { .head = NULL };
		weft__lock_acquire(&s->lock);
		bool handed = hand_over(s, &ws);
		weft__lock_release(&s->lock);
		weft__wakes_run(&ws);	/* also when only dropped nodes were found */
		if (handed)
			return 0;
	}
	return r ? weft__err_fail(r) : 0;
}
