/* SPDX-License-Identifier: MIT */
/*
 * park.h — the one park/wake protocol.  Join, I/O, sleeps and (later)
 * mutexes, condition variables and channels all use these calls.
 *
 * A waiter stands for one blocking wait of one context: a coroutine (it
 * parks; its worker runs others) or a plain thread (it blocks on a futex).
 *
 *   struct weft__waiter w;
 *   weft__waiter_init(&w, cause);   // 1. arm: the wait has a fresh generation
 *   publish &w where a waker finds it (under a lock, or with a CAS);
 *   int r = weft__waiter_wait(&w, deadline);  // 2. sleep until woken or the
 *                                   //    deadline; r = the result (ETIMEDOUT)
 *   retract w from where it was published (the waker may have done it)
 *
 *   and a waker, having found w:
 *   weft__waiter_wake(&w, result);  // true only for the one waker that won
 *
 * For a coroutine, arming sets its park word to PARKING with a new
 * generation.  A waker CASes the word from (gen, PARKING) to (gen, result,
 * NOTIFIED) or from (gen, PARKED) to (gen, result, RUNNABLE) and queues it;
 * a wake for an older generation, or a second wake, fails its CAS.  The
 * coroutine's scheduler CASes (gen, PARKING) to (gen, PARKED) only after the
 * switch-out has completed; if that CAS fails a waker came early (NOTIFIED)
 * and the scheduler queues the coroutine itself.  So a coroutine is resumed
 * exactly once per wait, and never before it has left the CPU.  The wake
 * result travels inside the word, so the winner's result is the one seen.
 *
 * Deadlines: a coroutine's waiter goes into its worker's timer heap
 * (timer.h), whose firing is one more waker (result ETIMEDOUT); a thread's
 * futex wait times out and the thread wakes itself the same way.  A deadline
 * already past wakes the waiter at once, so "do not block" needs no special
 * case.  Whoever wins the word, the waiter leaves the heap before
 * weft__waiter_wait returns.
 *
 * Results are 16-bit codes: 0, an errno value, or one of the flags below
 * (the one list of them, checked disjoint at compile time).
 *
 * Orderings: the waker's CAS is seq_cst (atomic.h); it acquires the state the
 * parked coroutine wrote before its switch-out (the scheduler's CAS to PARKED
 * is seq_cst too), and queueing the coroutine publishes it with release
 * semantics (deque push, or the injection queue's lock).
 */
#ifndef WEFT_PARK_H
#define WEFT_PARK_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "weft.h"

struct weft_co;

enum weft__co_state {
	CO_RUNNABLE = 1,
	CO_RUNNING,
	CO_YIELDING,
	CO_PARKING,
	CO_PARKED,
	CO_NOTIFIED,
	CO_EXITING,
};

static inline unsigned park_state(uint64_t w) { return (unsigned)(w & 0xff); }
static inline int park_result(uint64_t w) { return (int)((w >> 8) & 0xffff); }
static inline uint32_t park_gen(uint64_t w) { return (uint32_t)(w >> 32); }
static inline uint64_t park_word(uint32_t gen, int result, unsigned state)
{
	return ((uint64_t)gen << 32) | ((uint64_t)(result & 0xffff) << 8) | state;
}

struct weft__timers;

struct weft__waiter {
	struct weft_co *co;	/* the parked coroutine, or NULL for a thread */
	uint32_t gen;		/* the coroutine's park generation */
	uint32_t futex;		/* thread waiters: 0 waiting, else WOKEN | result */
	int64_t deadline;	/* absolute weft_now() ns, -1 for none */
	struct weft__timers *timers;	/* the heap it was put in, if any */
	uint32_t timer_index;	/* its place there, under the heap's lock */
	bool cancellable;	/* weft_cancel wakes it (default; see completions) */
	unsigned char cause;	/* what it waits for (weft__waiter_init) */
};

/* Wake results beside 0 and errno values (Linux's are below 4096). */
enum {
	WEFT__PARK_WAKE_RETRY = 0x1000,	/* mutex: the woken waiter competes again (sync.c) */
	WEFT__PARK_WAKE_CLAIMED = 0x2000,	/* | 0, errno or RETRY: a wait queue claimer's (waitq.h) */
	WEFT__PARK_WAKE_READY = 0x4000,	/* | the ready WEFT_IN/WEFT_OUT: I/O readiness (loop.c) */
};
_Static_assert(EHWPOISON < WEFT__PARK_WAKE_RETRY && WEFT__PARK_WAKE_RETRY > 0xfff,
	       "errno values stay below the flags");
_Static_assert(((WEFT__PARK_WAKE_RETRY | WEFT__PARK_WAKE_CLAIMED | WEFT__PARK_WAKE_READY) & 0xfff) == 0 &&
		       !(WEFT__PARK_WAKE_RETRY & WEFT__PARK_WAKE_CLAIMED) &&
		       !(WEFT__PARK_WAKE_RETRY & WEFT__PARK_WAKE_READY) &&
		       !(WEFT__PARK_WAKE_CLAIMED & WEFT__PARK_WAKE_READY),
	       "wake flags are distinct bits above every errno value");
_Static_assert(((WEFT_IN | WEFT_OUT) & ~0xfff) == 0, "the ready events fit under the flags");
_Static_assert((WEFT__PARK_WAKE_RETRY | WEFT__PARK_WAKE_CLAIMED | WEFT__PARK_WAKE_READY) <= 0xffff,
	       "results are 16 bits (park_word)");
enum { WEFT__WAITER_NOT_WOKEN = -1 };		/* weft__waiter_disarm: nobody woke it */

/* Arms w for the calling coroutine (or thread): cause is what it waits
 * for (WEFT_PARK_*, weft_stats.parked_by), stored in the coroutine before
 * its park word says PARKING. */
void weft__waiter_init(struct weft__waiter *w, unsigned cause);
/* Ends a wait that will not sleep, once no waker can reach w any more (it was
 * never published, or has been retracted): returns the result of a wake that
 * came meanwhile, else WEFT__WAITER_NOT_WOKEN. */
int weft__waiter_disarm(struct weft__waiter *w);
/* Sleeps until woken or until deadline (absolute ns, -1 none); returns the
 * winning waker's result, ETIMEDOUT for the deadline. */
int weft__waiter_wait(struct weft__waiter *w, int64_t deadline);
/* The same, for a caller that did an RMW after arming w (weft__waiter_init's
 * store), such as a lock release or the CAS that published w: every RMW is a
 * full fence (atomic.h), which gives the StoreLoad order the cancel check
 * needs, so the wait skips its own. */
int weft__waiter_wait_fenced(struct weft__waiter *w, int64_t deadline);
bool weft__waiter_wake(struct weft__waiter *w, int result);
/* The same for the wakes of loop's readiness and deadlines: the coroutine
 * goes to the back of that worker's ready FIFO (weft__schedule_ready),
 * whichever worker harvests; the injection queue when the monitor does,
 * for a stuck loop. */
struct weft__worker;
bool weft__waiter_wake_ready(struct weft__waiter *w, int result, struct weft__worker *loop);

/* Who is calling, for the objects that check their holder (a mutex, a
 * rwlock's writer): the coroutine, or for a plain thread its pthread_self()
 * with the low bit set (a coroutine's address never has it).  Never 0.
 * weft__park_context_of takes weft_self(), for a caller that needs the
 * coroutine anyway (a mutex lock checks its cancel flag too). */
static inline uintptr_t weft__park_context_of(struct weft_co *co)
{
	return co ? (uintptr_t)co : (uintptr_t)pthread_self() | 1;
}
static inline uintptr_t weft__park_context_id(void)
{
	return weft__park_context_of(weft_self());
}

/* weft_cancel's wake: whatever co is parked on now (no waiter needed: the
 * waiter retracts itself from wherever it waits once resumed). */
bool weft__park_cancel(struct weft_co *co);
/* weft_interrupt: ends co's current wait with EINTR, or leaves the
 * interrupt pending for its next one (park.c). */
void weft__park_interrupt(struct weft_co *co);
/* For a wait whose result r was an interrupt's EINTR but which succeeded
 * anyway (a claimer completed it, readiness came) or which an interrupt
 * does not end (it is not cancellable): the interrupt is left pending for
 * the next wait of co (NULL: a plain thread, nothing to do). */
void weft__park_interrupt_keep(struct weft_co *co);
static inline void weft__park_interrupt_unused(struct weft_co *co, int r)
{
	if (r == EINTR && co)
		weft__park_interrupt_keep(co);
}

/*
 * A completion: an event that happens once (a coroutine finishing, an
 * offloaded call returning), awaited by at most one waiter at a time.  One
 * atomic word:
 *   NULL               not complete, nobody waits
 *   WEFT__COMPLETION_SET     complete
 *   a waiter           someone waits on it
 *   waiter|CLAIMED     the completer is waking that waiter
 *   any other value    the caller's own state (JOIN_DETACHED): the
 *                      completer leaves it alone and reports it
 * The completer claims the waiter before waking it and stores COMPLETE only
 * after its last access to the waiter (release), so a waiter that sees
 * COMPLETE may return and let its stack frame (and the waiter) go.  A waiter
 * woken by weft_cancel takes itself back (CAS to NULL), unless the completer
 * claimed it first; then it waits for COMPLETE (a few instructions away).
 */
#define WEFT__COMPLETION_SET ((void *)2)
/* Completes *word; returns false (and does nothing) if it holds `other`
 * (a caller state; NULL: there is none). */
bool weft__completion_set(void **word, void *other);
/* Completes *word as a harvest wakes: a coroutine waiting goes to the
 * back of loop's ready FIFO (weft__schedule_ready), not to the runnext
 * slot of the completer's worker, whose LIFO deque would take a batch of
 * completions newest first (a reaper completes many at once). */
void weft__completion_set_ready(void **word, struct weft__worker *loop);
/* Waits for *word to complete until deadline (absolute ns, -1 none): 0, or
 * ECANCELED if `cancellable` and the caller was cancelled, or ETIMEDOUT or
 * ENOMEM (a coroutine's deadline whose timer the heap had no room for: it
 * did not wait) (the word is then left NULL or COMPLETE, so a later wait
 * works), EINVAL if the
 * word holds someone else's waiter or another state.  A completion that
 * races the deadline wins: 0.  cause: WEFT_PARK_JOIN or WEFT_PARK_OFFLOAD
 * (weft_stats.parked_by). */
int weft__completion_wait(void **word, bool cancellable, int64_t deadline, unsigned cause);

/* Scheduler side: the coroutine switched out in PARKING; make it PARKED, or
 * runnable if a waker came first.  Returns true if it must be queued. */
bool weft__park_finish(struct weft_co *co);

#endif
