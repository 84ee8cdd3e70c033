/* SPDX-License-Identifier: MIT */
/*
 * queue.h — the run queues' operations shared by the scheduler's parts:
 * the locked FIFOs (a worker's ready FIFO, the injection queue), inline
 * since the worker loop (worker.c) pops them at every dispatch that finds
 * its LIFO end empty, and the push onto a worker's deque (queue.c).
 * Below them, what the rest of lib/ calls to make a coroutine runnable:
 * weft__schedule, weft__schedule_ready and weft__schedule_stuck (queue.c).
 */
#ifndef WEFT_QUEUE_H
#define WEFT_QUEUE_H

#include <pthread.h>
#include <stdbool.h>

#include "atomic.h"
#include "coro.h"
#include "fifo.h"
#include "invariant.h"
#include "worker.h"

/* Appends co to q, taking q's lock only when `shared` (see
 * weft__queue_ready_shared). */
static inline void weft__queue_push(struct weft__locked_fifo *q, struct weft_co *co, bool shared)
{
	if (shared)
		pthread_mutex_lock(&q->lock);
	WEFT__FIFO_PUSH(&q->q, co);
	at_store_64(&q->len, at_load_64(&q->len) + 1);
	if (shared)
		pthread_mutex_unlock(&q->lock);
}

/*
 * Warms what the next dispatch from q reads first, while the coroutine just
 * popped runs: the stack lines its switch-in pops and its callers' frames
 * (at its saved sp), and the control block of the one after it, whose sp
 * the pop after this reads.  With a thousand connections those lines have
 * left the cache since the harvest queued them, and each is a miss (and a
 * page walk: every coroutine's control block and stack top are pages of
 * their own) that otherwise stalls the switch
 * (docs/notes/2026-12-06-measurements-behind-the-code.md, "the ready FIFO's prefetch").  Under q's lock when shared:
 * a pusher writes the tail's next.  The head's sp is read relaxed: a
 * coroutine woken before its switch-out completed is writing it (park.h),
 * and a stale value only warms the wrong line.
 */
static inline void weft__queue_warm_head(struct weft__locked_fifo *q)
{
	struct weft_co *head = q->q.head;
	if (!head)
		return;
	const char *sp = __atomic_load_n((char **)&head->sp, __ATOMIC_RELAXED);
	for (int line = 0; line < 4; line++)
		__builtin_prefetch(sp + 64 * line);
	if (head->next)
		__builtin_prefetch(head->next);
}

/* The oldest item of q, or NULL (without the lock when q looks empty);
 * `warm`: the owner's pop, which warms the next one (a thief's would pull
 * the owner's lines to its own cache). */
static inline struct weft_co *weft__queue_pop_warm(struct weft__locked_fifo *q, bool shared, bool warm)
{
	if (at_load_64(&q->len) == 0)
		return NULL;
	if (shared)
		pthread_mutex_lock(&q->lock);
	struct weft_co *co;
	WEFT__FIFO_POP(&q->q, co);
	if (co)
		at_store_64(&q->len, at_load_64(&q->len) - 1);
	if (warm)
		weft__queue_warm_head(q);
	if (shared)
		pthread_mutex_unlock(&q->lock);
	return co;
}

static inline struct weft_co *weft__queue_pop(struct weft__locked_fifo *q, bool shared)
{
	return weft__queue_pop_warm(q, shared, false);
}

static inline struct weft_co *weft__queue_inject_pop(void)
{
	return weft__queue_pop(&weft__rt.inject, true);
}

/*
 * Whether w's ready FIFO needs its lock: thieves pop from it and the
 * monitor's harvests of a stuck loop push to it.  With one worker there are
 * neither (the monitor adopts no loop then: monitor.c), so only the owner
 * touches it, and the two mutex round trips per I/O wake are skipped.
 */
static inline bool weft__queue_ready_shared(struct weft__worker *w)
{
	WEFT__ASSERT(weft__rt.nworkers > 1 || weft__worker_self() == w);
	(void)w;
	return weft__rt.nworkers > 1;
}

/* Onto w's deque; the injection queue when w is NULL or its deque cannot
 * grow. */
void weft__queue_push_local(struct weft__worker *w, struct weft_co *co);

/* Makes co runnable: in this worker's runnext slot if called on a worker
 * (what it displaces goes to the deque), else on the injection queue; wakes
 * an idle worker if nobody is looking for work, except for a lone slot
 * (the caller's worker runs it next; see weft__schedule_stuck).  A coroutine
 * locked to its worker (weft_lock_thread) goes to that worker's pinned FIFO
 * instead, here and in weft__schedule_ready, and that worker is woken. */
void weft__schedule(struct weft_co *co);
/* Around a batch of wakes (a wait queue's claimed nodes) on a worker: the
 * batch's weft__schedule calls push to the deque and keep the newest back,
 * and the end puts that one in the runnext slot and notifies an idle
 * worker once, after all of them are published.  NULL off a worker, where
 * nothing is deferred. */
struct weft__worker *weft__schedule_batch_begin(void);
void weft__schedule_batch_end(struct weft__worker *w);
/* The monitor found w running one coroutine for a tick or more: if w's
 * runnext slot or ready FIFO holds a coroutine (a lone slot and a slept
 * harvest's batch notify nobody: loop.c), wake an idle worker as
 * weft__schedule would have; it steals them since w dispatches nothing
 * (steal.c). */
void weft__schedule_stuck(struct weft__worker *w);
/* The same for a coroutine woken by loop's readiness or deadlines: it goes
 * to the back of that worker's ready FIFO, so that I/O is served in the
 * order it became ready (a LIFO would starve old connections under load);
 * other workers steal from that FIFO too.  Off a worker (the monitor,
 * serving a stuck loop) it goes to the injection queue, which busy workers
 * take at their fairness turns. */
void weft__schedule_ready(struct weft_co *co, struct weft__worker *loop);

#endif
