/* SPDX-License-Identifier: MIT */
/*
 * queue.c — making a coroutine runnable: a worker's runnext slot and the
 * bottom of its deque, its ready FIFO for what its loop woke, the injection
 * queue from plain threads (worker.c's essay: runnext, "A lone runnext
 * coroutine wakes nobody", the ready FIFO).  What a worker runs next is
 * chosen in worker.c.
 */
#include "queue.h"

#include "atomic.h"
#include "idle.h"
#include "loop.h"
#include "worker.h"

static inline void queue_push_local(struct weft__worker *w, struct weft_co *co)
{
	if (!w || weft__deque_push(&w->deque, co) != 0)
		weft__queue_push(&weft__rt.inject, co, true);
}

void weft__queue_push_local(struct weft__worker *w, struct weft_co *co)
{
	queue_push_local(w, co);
}

/*
 * On a worker, co goes into its runnext slot, and the coroutine it displaces
 * (older work) to the bottom of the deque, which is then notified.  A lone
 * slot is not (after Tokio's lifo_slot): w runs co as soon as the current
 * coroutine leaves, and a thief would leave it alone anyway (steal_runnext),
 * so a wake would buy nothing but an eventfd write on w's side, at every
 * hand-off of a ping-pong whose other worker has gone to sleep
 * (docs/notes/2026-12-06-measurements-behind-the-code.md, "lone runnext").  If w gets
 * stuck in the current coroutine instead, the monitor notifies for the
 * slot (weft__schedule_stuck).
 */
/*
 * A coroutine locked to its worker (weft_lock_thread) goes to that worker's
 * pinned FIFO, which nobody steals from; the worker is woken by its eventfd
 * unless it is the caller (a wake to a worker that is not asleep stays in
 * the eventfd until its next harvest or sleep takes it, so no handshake
 * with its idling is needed).  False for an unlocked coroutine.
 */
static __attribute__((noinline)) void push_pinned(struct weft_co *co, struct weft__worker *home)
{
	weft__queue_push(&home->pinned, co, true);
	if (home != weft__worker_self())
		weft__loop_wake(home);
}

/* Inline: every wake of an unlocked coroutine pays one load here. */
static inline bool schedule_pinned(struct weft_co *co)
{
	if (__builtin_expect(!co->pinned, 1))
		return false;
	push_pinned(co, co->worker);	/* the one worker that runs it */
	return true;
}

/* co into w's runnext slot, what it displaces to the deque: true if it
 * displaced one (to be notified). */
static inline bool swap_runnext(struct weft__worker *w, struct weft_co *co)
{
	struct weft_co *older = at_swap_ptr((void **)&w->runnext, co);
	if (older)
		queue_push_local(w, older);
	return older;
}

/* A batch's push to the deque, notified every BATCH_NOTIFY pushes: a
 * batch of a hundred thousand (a channel's close) took ~60 ms to push,
 * and with one notify at its end the sleeping workers started on it only
 * then; now the first push wakes a thief, whose steals wake the next
 * (idle.c, invariant 2), while the batch goes on.  A notify that finds a
 * spinner costs a fence and a load. */
enum { BATCH_NOTIFY = 32 };

static void batch_push(struct weft__worker *w, struct weft_co *co)
{
	queue_push_local(w, co);
	if (w->batch_pushed++ % BATCH_NOTIFY == 0 && weft__rt.nworkers > 1)
		weft__idle_notify();
}

void weft__schedule(struct weft_co *co)
{
	if (schedule_pinned(co))
		return;
	struct weft__worker *w = weft__worker_self();
	if (!w) {
		weft__queue_push(&weft__rt.inject, co, true);
		weft__idle_notify();
		return;
	}
	if (!w->batching) {
		if (swap_runnext(w, co) && weft__rt.nworkers > 1)
			weft__idle_notify();
		return;
	}
	/* In a batch, the newest wake is held back for the slot and the one
	 * before it goes to the deque: the slot is swapped once a batch */
	if (w->batch_held)
		batch_push(w, w->batch_held);
	w->batch_held = co;
}

/* A batch of n wakes would swap the runnext slot n times (an RMW on a line
 * that thieves read) and notify for each of the n - 1 coroutines it
 * displaces into the deque: instead the newest goes to the slot at the
 * end, once, and the notify at the end covers the deque's pushes (its
 * fence orders them all before the idle check); the ones every
 * BATCH_NOTIFY pushes (batch_push) only start thieves early.  Only the batch's own thread sees the
 * held coroutine, for the few instructions until the end. */
struct weft__worker *weft__schedule_batch_begin(void)
{
	struct weft__worker *w = weft__worker_self();
	if (w)
		w->batching = true;
	return w;
}

void weft__schedule_batch_end(struct weft__worker *w)
{
	if (!w)
		return;
	w->batching = false;
	struct weft_co *co = w->batch_held;
	w->batch_held = NULL;
	w->batch_pushed = 0;
	if (co)
		swap_runnext(w, co);
	if (weft__rt.nworkers > 1)
		weft__idle_notify();
}

void weft__schedule_stuck(struct weft__worker *w)
{
	if (at_load_ptr((void **)&w->runnext) || at_load_64(&w->ready.len) != 0)
		weft__idle_notify();
}

/*
 * Off a worker the caller is the monitor, waking for a stuck loop (its
 * rescue harvest, its timers): the coroutine goes to the injection queue,
 * not to the stuck worker's ready FIFO.  An idle worker is notified either
 * way, but a busy one never steals, and its fairness turns take the
 * injection queue, never another worker's FIFO (docs/design.md, "Busy
 * workers and stuck workers").
 */
void weft__schedule_ready(struct weft_co *co, struct weft__worker *loop)
{
	if (schedule_pinned(co))
		return;
	struct weft__worker *self = weft__worker_self();
	if (!self) {
		weft__queue_push(&weft__rt.inject, co, true);
		weft__idle_notify();
		return;
	}
	weft__queue_push(&loop->ready, co, weft__queue_ready_shared(loop));
	if (weft__rt.nworkers > 1 && (self != loop || !loop->harvesting))
		weft__idle_notify();	/* else the harvest's end notifies */
}
