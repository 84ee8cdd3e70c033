/* SPDX-License-Identifier: MIT */
/*
 * park.c — the park/wake protocol (see park.h for the states and orderings).
 */
#include "park.h"

#include <errno.h>
#include <pthread.h>

#include "invariant.h"
#include "queue.h"
#include "slot.h"
#include "atomic.h"
#include "clock.h"
#include "coro.h"
#include "futex.h"
#include "timer.h"
#include "weft.h"
#include "worker.h"

enum { THREAD_WOKEN = 0x80000000u };

void weft__waiter_init(struct weft__waiter *w, unsigned cause)
{
	/* kept in w across the call: no register to save for it */
	w->cause = (unsigned char)cause;
	struct weft__worker *wk = weft__worker_self();
	struct weft_co *co = wk ? wk->current : NULL;
	w->co = co;
	w->futex = 0;
	w->deadline = -1;
	w->timers = NULL;
	w->timer_index = WEFT__TIMER_NONE;
	w->cancellable = true;
	if (!co) {
		w->gen = 0;
		return;
	}
	/* The cause first (relaxed: a plain byte store), then the arming
	 * store, which orders it: the scheduler's CAS to PARKED reads PARKING,
	 * and weft__co_census counts a coroutine only in PARKED, so the cause
	 * it reads is this wait's or a later one's (design.md, Metrics). */
	__atomic_store_n(&co->park_cause, w->cause, __ATOMIC_RELAXED);
	/* Arm: a new generation in PARKING.  The store is ordered before the
	 * publication of w by the publisher's lock or seq_cst CAS. */
	uint32_t gen = park_gen(at_load_64(&co->park_word)) + 1;
	w->gen = gen;
	at_store_64(&co->park_word, park_word(gen, 0, CO_PARKING));
}

/* For the assertions: a park word armed for wait gen, possibly woken. */
__attribute__((unused)) static inline bool armed_for(uint64_t word, uint32_t gen)
{
	return park_gen(word) == gen &&
	       (park_state(word) == CO_PARKING || park_state(word) == CO_NOTIFIED);
}

int weft__waiter_disarm(struct weft__waiter *w)
{
	if (!w->co) {
		uint32_t v = at_load_uint((unsigned *)&w->futex);
		return v & THREAD_WOKEN ? (int)(v & 0xffff) : WEFT__WAITER_NOT_WOKEN;
	}
	/* No waker can reach w, but weft_cancel and weft_interrupt reach the
	 * park word itself: a CAS, so that a wake of theirs is returned, never
	 * overwritten (an interrupt's would be lost: interrupt.pml). */
	uint64_t word = at_load_64(&w->co->park_word);
	for (;;) {
		WEFT__ASSERT(armed_for(word, w->gen));
		if (park_state(word) == CO_NOTIFIED)
			break;
		if (at_cas_64(&w->co->park_word, word, park_word(w->gen, 0, CO_RUNNING)))
			return WEFT__WAITER_NOT_WOKEN;
		word = at_load_64(&w->co->park_word);
	}
	/* woken: nobody writes the word any more */
	at_store_64(&w->co->park_word, park_word(w->gen, 0, CO_RUNNING));
	return park_result(word);
}

static int thread_wait(struct weft__waiter *w, int64_t deadline)
{
	uint32_t v;
	while (!((v = at_load_uint((unsigned *)&w->futex)) & THREAD_WOKEN)) {
		if (weft__clock_deadline_passed(deadline)) {
			weft__waiter_wake(w, ETIMEDOUT);	/* loses to an earlier waker */
			continue;
		}
		weft__futex_wait_until(&w->futex, v, deadline);
	}
	return (int)(v & 0xffff);
}

/* A wait that took its coroutine's pending interrupt ends with EINTR,
 * unless a waker came first: the interrupt then waits for the next wait. */
static void interrupt_self(struct weft__waiter *w)
{
	if (!weft__waiter_wake(w, EINTR))
		weft__park_interrupt_unused(w->co, EINTR);
}

/* The coroutine side: a deadline is one more waker, the worker's heap. */
static int co_wait(struct weft__waiter *w, int64_t deadline, bool fenced)
{
	struct weft_co *co = w->co;
	/* Armed by weft__waiter_init, and no other wait since: a waker may only
	 * have made it NOTIFIED. */
	WEFT__ASSERT(armed_for(at_load_64(&co->park_word), w->gen));
	/* StoreLoad: the arming store before the flag load; weft_cancel
	 * stores the flag before it loads the park word (Dekker).  A caller
	 * that published w with an RMW (a full fence, atomic.h) has one. */
	if (!fenced)
		at_fence_store_load();
	/* A wait whose deadline has passed does not wait, so an interrupt
	 * does not end it: it stays pending for one that does. */
	unsigned signals = w->cancellable ? at_load_uint(&co->signals) : 0;
	if (signals & CO_CANCELLED)
		weft__waiter_wake(w, ECANCELED);
	else if (weft__clock_deadline_passed(deadline))
		weft__waiter_wake(w, ETIMEDOUT);
	else if ((signals & CO_INTERRUPTED) && weft__co_signal_take(co, CO_INTERRUPTED))
		interrupt_self(w);
	else if (deadline >= 0) {
		w->deadline = deadline;
		if (weft__timer_add(&co->worker->timers, w) != 0)
			weft__waiter_wake(w, ENOMEM);
	}
	uint64_t word = at_load_64(&co->park_word);
	if (park_state(word) == CO_NOTIFIED) {	/* woken already: do not switch */
		at_store_64(&co->park_word, park_word(w->gen, park_result(word), CO_RUNNING));
	} else {
		weft__co_switch_out(co, 0);
	}
	if (w->timers)
		weft__timer_remove(w);
	uint64_t done = at_load_64(&co->park_word);
	/* Resumed once, by a wake of this wait (enter() made it RUNNING). */
	WEFT__ASSERT(park_gen(done) == w->gen && park_state(done) == CO_RUNNING);
	if (!w->cancellable)	/* an interrupt does not end it: keep it */
		weft__park_interrupt_unused(co, park_result(done));
	return park_result(done);
}

int weft__waiter_wait(struct weft__waiter *w, int64_t deadline)
{
	return w->co ? co_wait(w, deadline, false) : thread_wait(w, deadline);
}

int weft__waiter_wait_fenced(struct weft__waiter *w, int64_t deadline)
{
	return w->co ? co_wait(w, deadline, true) : thread_wait(w, deadline);
}

static void count_wakeup(void)
{
	struct weft__worker *self = weft__worker_self();
	if (self)
		weft__count(&self->c.wakeups);
	else
		at_faa_64(&weft__rt.ext_wakeups, 1);
}

/* The waker's CAS on co's park word, for wait generation gen (any current
 * one if any_gen); queues co if it had fully parked. */
static bool wake_co(struct weft_co *co, uint32_t gen, bool any_gen, int result,
		    struct weft__worker *ready_on)
{
	for (;;) {
		uint64_t word = at_load_64(&co->park_word);
		if (!any_gen && park_gen(word) != gen)
			return false;
		unsigned st = park_state(word);
		unsigned next = st == CO_PARKING ? CO_NOTIFIED : st == CO_PARKED ? CO_RUNNABLE : 0;
		if (!next)
			return false;
		if (!at_cas_64(&co->park_word, word, park_word(park_gen(word), result, next)))
			continue;
		count_wakeup();
		if (next != CO_RUNNABLE)
			return true;	/* its worker queues it (weft__park_finish) */
		weft__co_runnable(co);	/* queuing it is ours: the queue publishes the stamp */
		if (ready_on)
			weft__schedule_ready(co, ready_on);
		else
			weft__schedule(co);
		return true;
	}
}

static bool wake(struct weft__waiter *w, int result, struct weft__worker *ready_on)
{
	WEFT__ASSERT(result >= 0 && result <= 0xffff);	/* it travels in 16 bits */
	if (!w->co) {
		if (!at_cas_uint((unsigned *)&w->futex, 0, THREAD_WOKEN | ((unsigned)result & 0xffff)))
			return false;
		/* w may be gone once the thread sees the word; a wake on a stale
		 * address is harmless, every futex wait here loops. */
		weft__futex_wake(&w->futex, 1);
		return true;
	}
	return wake_co(w->co, w->gen, false, result, ready_on);
}

bool weft__park_cancel(struct weft_co *co)
{
	return wake_co(co, 0, true, ECANCELED, NULL);
}

/*
 * The pending interrupt is one bit, CO_INTERRUPTED, which only its taker
 * turns into a wake: this side takes it back and wakes the wait it saw, by
 * its generation; a wait that starts takes it itself (co_wait).  So one
 * interrupt ends one wait: a wait that took it cannot be woken for it again
 * here, since this side wakes only with the bit in hand.  A wake that fails
 * (that wait ended otherwise meanwhile) puts the bit back and looks again,
 * so the next wait gets it; if another interrupt set the bit meanwhile,
 * the two are one.  Orderings: the bit's RMWs are full fences, before the
 * load of the park word here; a wait loads the bit after its arming store
 * and its StoreLoad fence (Dekker, as weft_cancel's flag): either the wait
 * sees the bit or this side sees it waiting.  test/models/interrupt.pml.
 */
void weft__park_interrupt(struct weft_co *co)
{
	if (!weft__co_signal_set(co, CO_INTERRUPTED))
		return;	/* one is pending: the two are one */
	for (;;) {
		uint64_t word = at_load_64(&co->park_word);
		unsigned st = park_state(word);
		if (st != CO_PARKING && st != CO_PARKED)
			return;	/* not waiting: its next wait takes the bit */
		if (!weft__co_signal_take(co, CO_INTERRUPTED))
			return;	/* a wait took it */
		if (wake_co(co, park_gen(word), false, EINTR, NULL))
			return;
		if (!weft__co_signal_set(co, CO_INTERRUPTED))
			return;	/* another is pending: the two are one */
	}
}

void weft__park_interrupt_keep(struct weft_co *co)
{
	weft__co_signal_set(co, CO_INTERRUPTED);
}

bool weft__waiter_wake(struct weft__waiter *w, int result)
{
	return wake(w, result, NULL);
}

bool weft__waiter_wake_ready(struct weft__waiter *w, int result, struct weft__worker *loop)
{
	return wake(w, result, loop);
}

bool weft__park_finish(struct weft_co *co)
{
	uint64_t word = at_load_64(&co->park_word);
	uint32_t gen = park_gen(word);
	WEFT__ASSERT(park_state(word) == CO_PARKING || park_state(word) == CO_NOTIFIED);
	if (at_cas_64(&co->park_word, park_word(gen, 0, CO_PARKING), park_word(gen, 0, CO_PARKED)))
		return false;
	/* A waker came first (NOTIFIED): the coroutine is ours to queue. */
	word = at_load_64(&co->park_word);
	WEFT__ASSERT(park_state(word) == CO_NOTIFIED && park_gen(word) == gen);
	at_store_64(&co->park_word, park_word(gen, park_result(word), CO_RUNNABLE));
	weft__co_runnable(co);
	return true;
}

/* ------------------------------------------------------ completions */

/* Wakes the claimed waiter w and ends the claim with COMPLETE (slot.h).  A
 * thread waiter is marked woken first and kicked (weft__futex_wake) after
 * COMPLETE: it would otherwise wait out the claim for the length of the
 * syscall; a kick on a stale address is harmless (see wake). */
static void complete_waiter(void **word, struct weft__waiter *w, struct weft__worker *loop)
{
	if (w->co) {
		wake(w, 0, loop);
		weft__slot_release(word, WEFT__COMPLETION_SET);
		return;
	}
	uint32_t *futex = &w->futex;
	bool won = at_cas_uint((unsigned *)futex, 0, THREAD_WOKEN);
	weft__slot_release(word, WEFT__COMPLETION_SET);
	if (won)
		weft__futex_wake(futex, 1);
}

static bool completion_set(void **word, void *other, struct weft__worker *loop)
{
	for (;;) {
		void *j = at_load_ptr(word);
		if (other && j == other)
			return false;
		if (j == NULL && at_cas_ptr(word, NULL, WEFT__COMPLETION_SET))
			return true;
		WEFT__ASSERT(j == NULL || weft__slot_is_waiter(j));	/* completed once */
		if (j != NULL && weft__slot_try_claim(word, j)) {
			complete_waiter(word, j, loop);
			return true;
		}
	}
}

bool weft__completion_set(void **word, void *other)
{
	return completion_set(word, other, NULL);
}

void weft__completion_set_ready(void **word, struct weft__worker *loop)
{
	completion_set(word, NULL, loop);
}

int weft__completion_wait(void **word, bool cancellable, int64_t deadline, unsigned cause)
{
	for (;;) {
		void *state = at_load_ptr(word);
		if (state == WEFT__COMPLETION_SET)
			return 0;
		if (state != NULL)
			return EINVAL;
		struct weft__waiter w;
		weft__waiter_init(&w, cause);
		w.cancellable = cancellable;
		if (!at_cas_ptr(word, NULL, &w)) {
			/* an interrupt that took this unpublished wait is kept */
			weft__park_interrupt_unused(w.co, weft__waiter_disarm(&w));
			continue;
		}
		int r = weft__waiter_wait(&w, deadline);
		/* Taken back: resumed by a cancel, an interrupt or the deadline,
		 * not claimed (the completer's only wake, result 0, comes after
		 * its claim). */
		bool complete = !weft__slot_retract(word, &w);
		if (cancellable && r == ECANCELED)
			return ECANCELED;
		if (complete) {
			weft__park_interrupt_unused(w.co, r);
			return 0;
		}
		if (r == ETIMEDOUT || r == ENOMEM || (cancellable && r == EINTR))
			return r;	/* (ENOMEM: no room for the deadline's timer) */
		/* not cancellable: a stray cancel or interrupt wake; wait again */
	}
}
