/* SPDX-License-Identifier: MIT */
/*
 * timer.c — the per-worker deadline heap (see timer.h for the protocol).
 */
#include "timer.h"

#include <errno.h>
#include <stdlib.h>

#include "atomic.h"
#include "fault.h"
#include "park.h"

enum { HEAP_INITIAL = 64 };

int weft__timers_init(struct weft__timers *t, struct weft__worker *owner)
{
	t->owner = owner;
	t->heap = NULL;
	t->n = t->cap = 0;
	t->next = INT64_MAX;
	int r = pthread_mutex_init(&t->lock, NULL);
	return r ? -r : 0;
}

void weft__timers_fini(struct weft__timers *t)
{
	free(t->heap);
	t->heap = NULL;
	pthread_mutex_destroy(&t->lock);
}

static void place(struct weft__timers *t, uint32_t i, struct weft__waiter *w)
{
	t->heap[i] = w;
	w->timer_index = i;
}

static void sift_up(struct weft__timers *t, uint32_t i, struct weft__waiter *w)
{
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (t->heap[parent]->deadline <= w->deadline)
			break;
		place(t, i, t->heap[parent]);
		i = parent;
	}
	place(t, i, w);
}

static void sift_down(struct weft__timers *t, uint32_t i, struct weft__waiter *w)
{
	for (;;) {
		uint32_t child = 2 * i + 1;
		if (child >= t->n)
			break;
		if (child + 1 < t->n && t->heap[child + 1]->deadline < t->heap[child]->deadline)
			child++;
		if (w->deadline <= t->heap[child]->deadline)
			break;
		place(t, i, t->heap[child]);
		i = child;
	}
	place(t, i, w);
}

static void publish_next(struct weft__timers *t)
{
	at_store_i64(&t->next, t->n ? t->heap[0]->deadline : INT64_MAX);
}

/* Removes heap[i]; the last element fills the hole and moves either way. */
static void remove_at(struct weft__timers *t, uint32_t i)
{
	struct weft__waiter *gone = t->heap[i];
	gone->timer_index = WEFT__TIMER_NONE;
	struct weft__waiter *last = t->heap[--t->n];
	if (i == t->n)
		return;
	if (i > 0 && last->deadline < t->heap[(i - 1) / 2]->deadline)
		sift_up(t, i, last);
	else
		sift_down(t, i, last);
}

static int reserve(struct weft__timers *t)
{
	if (t->n < t->cap)
		return 0;
	uint32_t cap = t->cap ? 2 * t->cap : HEAP_INITIAL;
	void *heap = weft__fault() ? NULL : realloc(t->heap, (size_t)cap * sizeof *t->heap);
	if (!heap)
		return -ENOMEM;
	t->heap = heap;
	t->cap = cap;
	return 0;
}

int weft__timer_add(struct weft__timers *t, struct weft__waiter *w)
{
	pthread_mutex_lock(&t->lock);
	int r = reserve(t);
	if (r == 0) {
		w->timers = t;
		sift_up(t, t->n++, w);
		publish_next(t);
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

void weft__timer_remove(struct weft__waiter *w)
{
	struct weft__timers *t = w->timers;
	pthread_mutex_lock(&t->lock);
	if (w->timer_index != WEFT__TIMER_NONE) {
		remove_at(t, w->timer_index);
		publish_next(t);
	}
	pthread_mutex_unlock(&t->lock);
}

bool weft__timers_fire(struct weft__timers *t, int64_t now)
{
	return weft__timers_fire_to(t, now, t->owner);
}

bool weft__timers_fire_to(struct weft__timers *t, int64_t now, struct weft__worker *to)
{
	if (weft__timers_next(t) > now)
		return false;
	pthread_mutex_lock(&t->lock);
	while (t->n > 0 && t->heap[0]->deadline <= now) {
		struct weft__waiter *w = t->heap[0];
		remove_at(t, 0);
		weft__count(&t->fired);	/* one writer: the lock holder */
		/* Under the lock: w's wait cannot return (and free w) before its
		 * weft__timer_remove gets the lock, after this wake. */
		weft__waiter_wake_ready(w, ETIMEDOUT, to);
	}
	publish_next(t);
	pthread_mutex_unlock(&t->lock);
	return true;
}

int64_t weft__timers_next(struct weft__timers *t)
{
	return at_load_i64(&t->next);
}
