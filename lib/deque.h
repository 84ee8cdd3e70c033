/* SPDX-License-Identifier: MIT */
/*
 * deque.h — the Chase-Lev work-stealing deque of runnable coroutines.
 *
 * One owner pushes and takes at the bottom (LIFO: what a coroutine just
 * spawned or woke runs next, while its cache lines are warm); any number of
 * thieves steal at the top (the oldest work, usually the biggest subtree).
 * Items are opaque non-NULL pointers.
 *
 * Following Lê, Pop, Cohen and Zappa Nardelli, "Correct and Efficient
 * Work-Stealing for Weak Memory Models" (PPoPP'13), with the orderings spelled
 * out in deque.c.  top and bottom are signed 64-bit and only grow, so they
 * never wrap and never suffer ABA.
 */
#ifndef WEFT_DEQUE_H
#define WEFT_DEQUE_H

#include <stdbool.h>
#include <stdint.h>

struct weft__deque_array {
	int64_t mask;				/* capacity - 1, capacity a power of two */
	struct weft__deque_array *older;	/* retired arrays, freed with the deque */
	void *slot[];
};

struct weft__deque {
	int64_t top __attribute__((aligned(64)));	/* thieves CAS it */
	int64_t bottom __attribute__((aligned(64)));	/* the owner's */
	struct weft__deque_array *array;
};

/* An empty deque of `capacity` slots (a power of two); -ENOMEM. */
int weft__deque_init(struct weft__deque *d, int64_t capacity);
/* Frees the array and every retired one.  No thread may use d any more. */
void weft__deque_fini(struct weft__deque *d);

/* Owner only.  Grows the array when full; -ENOMEM if it cannot. */
int weft__deque_push(struct weft__deque *d, void *item);
/* Owner only.  The newest item, or NULL when empty. */
void *weft__deque_take(struct weft__deque *d);

/* Result of a steal: an item, EMPTY, or ABORT (lost a race: try again). */
#define WEFT__DEQUE_EMPTY ((void *)0)
#define WEFT__DEQUE_ABORT ((void *)1)
/* Any thread, the owner included.  The oldest item, EMPTY or ABORT. */
void *weft__deque_steal(struct weft__deque *d);
/* A steal retried until it did not lose a race: the top item, or NULL
 * (WEFT__DEQUE_EMPTY) when the deque is empty. */
static inline void *weft__deque_steal_retry(struct weft__deque *d)
{
	for (;;) {
		void *item = weft__deque_steal(d);
		if (item != WEFT__DEQUE_ABORT)
			return item;
	}
}

/* Owner only: the item the next take would return, or NULL; a thief may
 * take it meanwhile, so it is a hint (a prefetch's address), never to be
 * dereferenced. */
void *weft__deque_peek(struct weft__deque *d);
/* A racy size estimate (for stats and idle checks). */
int64_t weft__deque_size(const struct weft__deque *d);

#endif
