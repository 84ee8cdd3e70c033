/* SPDX-License-Identifier: MIT */
/*
 * fifo.h — the intrusive FIFO: a head and a tail pointer, the items linked
 * through their own `next` field (as BSD's STAILQ).  No allocation, O(1)
 * push at the tail and pop at the head.
 *
 * Three queues share this shape: a worker's yield FIFO (owner-only, no
 * lock: coro.c pushes, worker.c pops), the locked FIFOs of coroutines in
 * worker.h (the injection queue and each worker's ready FIFO, under their
 * pthread mutex, with a lock-free length beside them), and offload.c's
 * queue of calls (under the pool's mutex).  They hold different types, so
 * the FIFO is a set of macros over any struct with a `next` pointer; the
 * queue's type is WEFT__FIFO(type).  They evaluate their arguments more
 * than once: pass plain lvalues.
 *
 * No atomics and no lock here: a FIFO is touched by one thread at a time,
 * its owner's or its lock holder's; the orderings are the lock's (or none,
 * for an owner-only FIFO).
 *
 * A leaf: it includes nothing.
 */
#ifndef WEFT_FIFO_H
#define WEFT_FIFO_H

/* A FIFO of `type` items, linked through type's `next`; all-zero (NULL,
 * NULL) is the empty FIFO. */
#define WEFT__FIFO(type) struct { type *head, *tail; }

#define WEFT__FIFO_INIT(q) ((q)->head = (q)->tail = NULL)
#define WEFT__FIFO_EMPTY(q) ((q)->head == NULL)

/* Appends item, whose `next` becomes NULL. */
#define WEFT__FIFO_PUSH(q, item) do {			\
		(item)->next = NULL;			\
		if ((q)->tail)				\
			(q)->tail->next = (item);	\
		else					\
			(q)->head = (item);		\
		(q)->tail = (item);			\
	} while (0)

/* Unlinks the oldest item into out; out = NULL when q is empty. */
#define WEFT__FIFO_POP(q, out) do {			\
		(out) = (q)->head;			\
		if (out) {				\
			(q)->head = (out)->next;	\
			if (!(q)->head)			\
				(q)->tail = NULL;	\
		}					\
	} while (0)

/* Empties q into out: its items, oldest first, NULL-terminated. */
#define WEFT__FIFO_TAKE_ALL(q, out) do {		\
		(out) = (q)->head;			\
		(q)->head = (q)->tail = NULL;		\
	} while (0)

#endif
