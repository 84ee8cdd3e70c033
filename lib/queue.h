/* SPDX-License-Identifier: MIT */
/*
 * queue.h — a worker's run queues (queue.c), for the other parts of the
 * scheduler: the worker loop (worker.c) and the thieves (steal.c).
 * weft__schedule, weft__schedule_ready and weft__worker_successor, which
 * the rest of lib/ calls, are declared in worker.h.
 */
#ifndef WEFT_QUEUE_H
#define WEFT_QUEUE_H

#include <stdbool.h>

struct weft__worker;
struct weft__locked_fifo;
struct weft_co;

/* What w runs next from its own queues and the injection queue, fairness
 * turns included (they also harvest w's loop); NULL if all are empty. */
struct weft_co *weft__queue_find(struct weft__worker *w);
/* Onto w's deque; the injection queue when w is NULL or its deque cannot
 * grow. */
void weft__queue_push_local(struct weft__worker *w, struct weft_co *co);
/* The oldest item of q, or NULL; q's lock is taken only if `shared`. */
struct weft_co *weft__queue_fifo_pop(struct weft__locked_fifo *q, bool shared);
/* The oldest coroutine of the injection queue, or NULL. */
struct weft_co *weft__queue_inject_pop(void);

#endif
