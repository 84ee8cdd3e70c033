/* SPDX-License-Identifier: MIT */
/*
 * slot.h — the single-waiter slot: one atomic word where at most one waiter
 * waits for an event, and any number of wakers may race to wake it.  The fd
 * table's reader and writer slots (fdtable.h) and completions (park.h: a
 * coroutine's join, an offloaded call) are both this word.
 *
 * The word holds
 *   NULL              nobody waits
 *   a marker          a state of the user's (fdtable's READY, park's
 *                     COMPLETE, coro's DETACHED): a small even number below
 *                     any waiter's address
 *   w                 the waiter w waits here (published by the waiter's CAS)
 *   w | CLAIMED       a waker claimed w and is waking it
 * A waker claims with CAS(w -> w|CLAIMED), wakes w through the park protocol
 * (park.h), then ends its claim with weft__slot_release, a release fence and
 * a store of the next state: nothing of w is touched after that store.  The
 * waiter, once resumed by whichever waker won its park word, retracts:
 * CAS(w -> NULL), or, finding w|CLAIMED, waits for the claimer's release (a
 * few instructions, unless its thread was preempted: at_backoff).  So no
 * waker reads w after the waiter's frame is gone, and the CAS on the slot
 * makes one waker at most the claimer.  Every CAS is seq_cst (atomic.h).
 *
 * Waiters are at least 2-aligned, so the low bit is free for CLAIMED; the
 * markers are even and below 4096, never a waiter's address.
 */
#ifndef WEFT_SLOT_H
#define WEFT_SLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"

#define WEFT__SLOT_CLAIMED ((uintptr_t)1)

static inline void *weft__slot_claimed(void *w)
{
	return (void *)((uintptr_t)w | WEFT__SLOT_CLAIMED);
}

/* Whether v, read from a slot, is a waiter (claimed or not), not NULL or a
 * marker. */
static inline bool weft__slot_is_waiter(void *v)
{
	return (uintptr_t)v >= 4096;
}

/* Claims v, a waiter just read from *slot: true if this waker won it. */
static inline bool weft__slot_try_claim(void **slot, void *v)
{
	return !((uintptr_t)v & WEFT__SLOT_CLAIMED) && at_cas_ptr(slot, v, weft__slot_claimed(v));
}

/* Ends a claim: the claimer's accesses to the waiter come before the store
 * of the slot's next state, which lets the waiter (and its frame) go. */
static inline void weft__slot_release(void **slot, void *next)
{
	at_fence_release();
	at_store_ptr(slot, next);
}

/* The waiter's side once resumed: takes w back (true) if no waker claimed
 * it; else waits out the claim and returns false (a waker took it, and
 * the slot now holds what that waker released it to). */
static inline bool weft__slot_retract(void **slot, void *w)
{
	for (unsigned spins = 0;; spins++) {
		void *v = at_load_ptr(slot);
		if (v == w && at_cas_ptr(slot, w, NULL))
			return true;
		if (v != w && v != weft__slot_claimed(w))
			return false;
		if (v == weft__slot_claimed(w))
			at_backoff(spins);
	}
}

#endif
