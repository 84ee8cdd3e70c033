/* SPDX-License-Identifier: MIT */
/*
 * deque.c — Chase-Lev deque (see deque.h).
 *
 * Memory orderings (Lê et al. 2013, figure 1, mapped onto atomic.h):
 *
 * push:  b = bottom (relaxed, the owner's own); t = top (acquire, so a slot a
 *        thief just vacated is not overwritten before its read of it);
 *        slot[b] = item (relaxed atomic); RELEASE fence; bottom = b + 1
 *        (relaxed).  The fence makes the item and everything the owner wrote
 *        before it (the coroutine's state) visible to a thief that sees the
 *        new bottom.
 *
 * take:  b = bottom - 1; bottom = b (relaxed); STORE-LOAD fence; t = top.
 *        The StoreLoad fence is the one that matters: without it the owner
 *        could read a stale top while a thief reads the old bottom, and both
 *        would take the last item.  If t < b the item is the owner's without
 *        a CAS.  If t == b it is the last item: owner and thieves race with a
 *        seq_cst CAS on top, and the owner restores bottom = b + 1 whether it
 *        wins or not.  If t > b the deque was empty: restore bottom.
 *
 * steal: t = top (acquire); FULL fence (orders the top read before the bottom
 *        read, pairing with take's StoreLoad); b = bottom (acquire).  If
 *        t < b: read the array and slot[t] BEFORE the CAS (after a successful
 *        CAS by someone else the owner may overwrite or regrow), then CAS top
 *        t -> t + 1 (seq_cst).  A failed CAS is ABORT, not EMPTY.
 *
 * Growth: the owner copies the live range into an array twice as large and
 * publishes it with a release store; thieves may still read the old array,
 * so retired arrays are chained on `older` and freed only with the deque.
 * Capacities double, so the retired arrays together are never larger than
 * the live one: a bounded cost that needs no epoch scheme on the steal path.
 */
#include "deque.h"

#include <errno.h>
#include <stdlib.h>

#include "invariant.h"
#include "atomic.h"
#include "fault.h"

static struct weft__deque_array *array_new(int64_t capacity)
{
	struct weft__deque_array *a = weft__fault() ? NULL : malloc(sizeof *a + (size_t)capacity * sizeof(void *));
	if (!a)
		return NULL;
	a->mask = capacity - 1;
	a->older = NULL;
	return a;
}

static inline void *slot_get(struct weft__deque_array *a, int64_t i)
{
	return at_load_ptr(&a->slot[i & a->mask]);
}

static inline void slot_put(struct weft__deque_array *a, int64_t i, void *item)
{
	at_store_ptr(&a->slot[i & a->mask], item);
}

int weft__deque_init(struct weft__deque *d, int64_t capacity)
{
	d->array = array_new(capacity);
	if (!d->array)
		return -ENOMEM;
	d->top = 1;	/* start at 1: b - 1 in take never goes below zero */
	d->bottom = 1;
	return 0;
}

void weft__deque_fini(struct weft__deque *d)
{
	struct weft__deque_array *a = d->array;
	while (a) {
		struct weft__deque_array *older = a->older;
		free(a);
		a = older;
	}
	d->array = NULL;
}

static struct weft__deque_array *grow(struct weft__deque *d, struct weft__deque_array *a,
				      int64_t t, int64_t b)
{
	struct weft__deque_array *n = array_new((a->mask + 1) * 2);
	if (!n)
		return NULL;
	for (int64_t i = t; i < b; i++)
		slot_put(n, i, slot_get(a, i));
	n->older = a;
	/* release: the copied slots are visible before the array is. */
	at_fence_release();
	at_store_ptr((void **)&d->array, n);
	return n;
}

int weft__deque_push(struct weft__deque *d, void *item)
{
	int64_t b = at_load_i64(&d->bottom);
	int64_t t = at_load_i64(&d->top);
	at_fence_acquire();
	struct weft__deque_array *a = at_load_ptr((void **)&d->array);
	/* Outside a take, thieves move top only up to bottom. */
	WEFT__ASSERT(t <= b);
	if (b - t > a->mask) {
		a = grow(d, a, t, b);
		if (!a)
			return -ENOMEM;
	}
	WEFT__ASSERT(b - t <= a->mask);	/* a free slot for the item */
	slot_put(a, b, item);
	at_fence_release();
	at_store_i64(&d->bottom, b + 1);
	return 0;
}

void *weft__deque_take(struct weft__deque *d)
{
	int64_t b = at_load_i64(&d->bottom) - 1;
	struct weft__deque_array *a = at_load_ptr((void **)&d->array);
	at_store_i64(&d->bottom, b);
	at_fence_store_load();
	int64_t t = at_load_i64(&d->top);
	/* At most one thief got past our lowered bottom: it took the last. */
	WEFT__ASSERT(t <= b + 1);
	if (t > b) {
		at_store_i64(&d->bottom, b + 1);
		return NULL;
	}
	void *item = slot_get(a, b);
	if (t < b)
		return item;
	if (!at_cas_i64(&d->top, t, t + 1))
		item = NULL;	/* a thief took the last one */
	at_store_i64(&d->bottom, b + 1);
	return item;
}

void *weft__deque_peek(struct weft__deque *d)
{
	int64_t b = at_load_i64(&d->bottom) - 1;
	if (at_load_i64(&d->top) > b)
		return NULL;
	return slot_get(at_load_ptr((void **)&d->array), b);
}

void *weft__deque_steal(struct weft__deque *d)
{
	int64_t t = at_load_i64(&d->top);
	at_fence_full();
	int64_t b = at_load_i64(&d->bottom);
	at_fence_acquire();
	if (t >= b)
		return WEFT__DEQUE_EMPTY;
	struct weft__deque_array *a = at_load_ptr((void **)&d->array);
	at_fence_acquire();	/* the array's slots after the array pointer */
	void *item = slot_get(a, t);
	if (!at_cas_i64(&d->top, t, t + 1))
		return WEFT__DEQUE_ABORT;
	return item;
}

int64_t weft__deque_size(const struct weft__deque *d)
{
	int64_t n = at_load_i64(&d->bottom) - at_load_i64(&d->top);
	return n > 0 ? n : 0;
}
