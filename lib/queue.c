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
#include "worker.h"

void weft__queue_push_local(struct weft__worker *w, struct weft_co *co)
{
	if (!w || weft__deque_push(&w->deque, co) != 0)
		weft__queue_push(&weft__rt.inject, co, true);
}

/*
 * On a worker, co goes into its runnext slot, and the coroutine it displaces
 * (older work) to the bottom of the deque, which is then notified.  A lone
 * slot is not (after Tokio's lifo_slot): w runs co as soon as the current
 * coroutine leaves, and a thief would leave it alone anyway (steal_runnext),
 * so a wake would buy nothing but an eventfd write on w's side, at every
 * hand-off of a ping-pong whose other worker has gone to sleep
 * (docs/bench.md, "Measurements behind the code": lone runnext).  If w gets stuck in the current coroutine instead, the monitor
 * notifies for the slot (weft__schedule_stuck).
 */
void weft__schedule(struct weft_co *co)
{
	struct weft__worker *w = weft__worker_self();
	if (!w) {
		weft__queue_push(&weft__rt.inject, co, true);
		weft__idle_notify();
		return;
	}
	struct weft_co *older = at_swap_ptr((void **)&w->runnext, co);
	if (!older)
		return;
	weft__queue_push_local(w, older);
	if (weft__rt.nworkers > 1)
		weft__idle_notify();
}

void weft__schedule_stuck(struct weft__worker *w)
{
	if (at_load_ptr((void **)&w->runnext))
		weft__idle_notify();
}

void weft__schedule_ready(struct weft_co *co, struct weft__worker *loop)
{
	weft__queue_push(&loop->ready, co, weft__queue_ready_shared(loop));
	if (weft__rt.nworkers > 1 || weft__worker_self() != loop)
		weft__idle_notify();
}
