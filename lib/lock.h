/* SPDX-License-Identifier: MIT */
/*
 * lock.h — the short internal lock of the synchronisation objects and
 * channels (their queues and buffers, held for a few dozen instructions).
 *
 * A futex lock after Drepper's "Futexes Are Tricky" (mutex #2) with a short
 * spin first.  The word is 0 (free), 1 (held) or 2 (held, and a thread may
 * sleep on it).  Acquiring is one CAS 0 -> 1 inline; releasing is one swap
 * to 0 inline, and a futex wake only if the old value was 2.  Contended,
 * an acquirer spins, re-trying the CAS when the word reads 0, with a
 * backoff: 2, 4, 8, then 16 pauses between reads, SPIN_PAUSES pauses
 * in all; then it swaps in 2 and sleeps on the futex until its swap
 * returns 0.  Each read of a spinner pulls the line (the object's state
 * beside the lock word) away from the holder, whose next write must fetch
 * it back, so reading after every pause slows the holder down
 * (docs/notes/2026-12-06-measurements-behind-the-code.md, "lock backoff").
 *
 * Orderings: the CAS and swap that take the lock are seq_cst RMWs (atomic.h)
 * and so at least acquire: the holder sees everything the previous holder
 * wrote before its release.  The release swap is seq_cst, so at least
 * release.  A sleeper cannot miss its wake: it sleeps only while the word is
 * 2 (FUTEX_WAIT compares atomically), and a releaser that sees 2 wakes one.
 *
 * Coroutines never switch out while holding it (the wait protocol releases
 * before parking: waitq.h), so a holder is always running, or preempted by
 * the OS; a spinner gives up after SPIN_PAUSES pauses rather than burn its CPU.
 * Under TSan the RMWs are __atomic builtins, which it understands.
 * It replaces pthread_mutex_t, a PLT call with a type dispatch on each side
 * (docs/notes/2026-12-06-measurements-behind-the-code.md, "internal lock").
 */
#ifndef WEFT_LOCK_H
#define WEFT_LOCK_H

#include "invariant.h"
#include "atomic.h"

struct weft__lock {
	unsigned word;		/* atomic: 0 free, 1 held, 2 held with sleepers maybe */
};

void weft__lock_contended(struct weft__lock *l);
void weft__lock_wake(struct weft__lock *l);

static inline void weft__lock_acquire(struct weft__lock *l)
{
	if (!at_cas_uint(&l->word, 0, 1))
		weft__lock_contended(l);
}

static inline void weft__lock_release(struct weft__lock *l)
{
	unsigned old = at_swap_uint(&l->word, 0);
	WEFT__ASSERT(old != 0);	/* it was held */
	if (old == 2)
		weft__lock_wake(l);
}

#endif
