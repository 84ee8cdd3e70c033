/* SPDX-License-Identifier: MIT */
/*
 * timer.h — a worker's deadlines: a binary min-heap of parked waiters.
 *
 * Every blocking call with a deadline parks a waiter (park.h) and, on a
 * coroutine, puts it in the heap of the worker it runs on.  The heap bounds
 * that worker's epoll_wait, or, while it sleeps, the timer watcher's (idle.c),
 * and is checked at its fairness turns; the monitor (monitor.c) fires it
 * when the worker is stuck in a long coroutine.
 *
 * A waiter leaves the heap in one of two ways, both under the heap's lock:
 *   - it expires: weft__timers_fire pops it and wakes it with ETIMEDOUT
 *     *while holding the lock*;
 *   - its wait ended otherwise: weft__timer_remove takes it out, O(log n).
 * Because firing happens under the lock and removal takes the same lock, a
 * waiter (which lives on its coroutine's stack) is never touched by a firing
 * after its wait has returned.  Insertions come only from the heap's own
 * worker; removals and firings from any thread (a coroutine may have
 * migrated since it parked, the monitor fires for a stuck worker).
 *
 * Why a heap and not a wheel: the operations a server does are insert and
 * (mostly) cancel, when the I/O wins; both are O(log n) here with a few
 * cache lines touched, and the earliest deadline is O(1) for epoll_wait's
 * timeout.  A hashed wheel makes insert/cancel O(1) but needs a tick, which
 * either wakes idle workers periodically or costs precision.  The suite's
 * `sleep` row (docs/bench.md) times many concurrent sleeps.
 */
#ifndef WEFT_TIMER_H
#define WEFT_TIMER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct weft__waiter;

struct weft__worker;

struct weft__timers {
	pthread_mutex_t lock;
	struct weft__worker *owner;	/* expired waiters go to its ready FIFO */
	struct weft__waiter **heap;	/* heap[0] has the earliest deadline */
	uint32_t n, cap;
	int64_t next;			/* atomic: heap[0]'s deadline, INT64_MAX if none */
	uint64_t fired;			/* deadlines expired (written under lock) */
};

enum { WEFT__TIMER_NONE = UINT32_MAX };	/* waiter->timer_index when not in a heap */

int weft__timers_init(struct weft__timers *t, struct weft__worker *owner);
void weft__timers_fini(struct weft__timers *t);

/* Adds w (w->deadline set) to t; -ENOMEM if the heap cannot grow. */
int weft__timer_add(struct weft__timers *t, struct weft__waiter *w);
/* Takes w out of its heap if it is still there (any thread). */
void weft__timer_remove(struct weft__waiter *w);
/* Wakes, with ETIMEDOUT, every waiter whose deadline is <= now; false if
 * none was due (without taking the lock). */
bool weft__timers_fire(struct weft__timers *t, int64_t now);
/* The same, the woken coroutines going to to's ready FIFO (the timer
 * watch fires a sleeping worker's heap onto its own: idle.c). */
bool weft__timers_fire_to(struct weft__timers *t, int64_t now, struct weft__worker *to);
/* The earliest deadline, INT64_MAX when there is none (a racy hint). */
int64_t weft__timers_next(struct weft__timers *t);

#endif
