/* SPDX-License-Identifier: MIT */
/*
 * waitq.c — FIFO queues of parked waiters (see waitq.h for the protocol).
 * Every function here but the allocation runs under the owning object's lock
 * or, for the wakes, after its release.
 */
#include "waitq.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "invariant.h"
#include "atomic.h"
#include "errors.h"
#include "fault.h"
#include "queue.h"

void *weft__waitq_object_new(size_t size)
{
	void *object = weft__fault() ? NULL : calloc(1, size);
	if (!object)
		weft__err_fail(ENOMEM);
	return object;
}

void weft__waitq_push(struct weft__waitq *q, struct weft__wnode *n)
{
	WEFT__ASSERT(!n->linked);
	weft__list_push(&q->nodes, &n->link);
	n->linked = true;
}

void weft__waitq_unlink(struct weft__waitq *q, struct weft__wnode *n)
{
	if (!n->linked)
		return;
	weft__list_unlink(&q->nodes, &n->link);
	n->linked = false;
}

/* The node of a link in a queue. */
static struct weft__wnode *node_of(struct weft__list_link *l)
{
	return WEFT__LIST_ENTRY(l, struct weft__wnode, link);
}

/* Counts the dead node n, unlinked, in ws (NULL: not counted), whose
 * waiter relocks the object: ws waits for it to leave (waitq.h).  Out of
 * line: a claim that drops nothing carries none of it. */
static __attribute__((cold, noinline)) void drop(struct weft__wnode *n, struct weft__wakes *ws)
{
	n->dropper = ws ? &ws->dropped : NULL;
	if (ws)
		at_faa_uint(&ws->dropped, 1);
}

/* Takes n out of q and claims it; false if it was dead (its wait won
 * elsewhere or abandoned: dropped, and its waiter, finding it unlinked,
 * knows it).  A CAS even for a sole node: its waiter abandons it without
 * the lock. */
static bool take(struct weft__waitq *q, struct weft__wnode *n, struct weft__wakes *ws)
{
	weft__waitq_unlink(q, n);
	if (at_cas_uint(n->claim, 0, (n->index + 1) | WAITQ_WAKING))
		return true;
	drop(n, ws);
	return false;
}

struct weft__wnode *weft__waitq_claim(struct weft__waitq *q, struct weft__wakes *ws)
{
	while (!weft__waitq_empty(q)) {
		struct weft__wnode *n = node_of(q->nodes.head);
		if (n->link.next)	/* the next claim's node: a cold line */
			__builtin_prefetch(node_of(n->link.next));
		if (take(q, n, ws))
			return n;
	}
	return NULL;
}

void weft__waitq_claim_all(struct weft__waitq *q, int result, struct weft__wakes *ws)
{
	struct weft__wnode *n;
	while ((n = weft__waitq_claim(q, ws))) {
		WEFT__ASSERT(n->sole);
		weft__wakes_add(ws, n, result);
	}
}

void weft__waitq_claim_all_of(struct weft__waitq *q, const void *data, int result,
			      struct weft__wakes *ws)
{
	struct weft__list_link *next;
	for (struct weft__list_link *l = q->nodes.head; l; l = next) {
		struct weft__wnode *n = node_of(l);
		next = l->next;	/* unlinking leaves it as it was (list.h) */
		if (n->data == data && take(q, n, ws))
			weft__wakes_add(ws, n, result);
	}
}

/* Wakes n's waiter.  A waiter resumed by this wake may return (and its
 * stack go) at once, so n is read before and never after; a waiter that a
 * deadline or a cancel resumed first waits for the WAKING clear, which is
 * the last touch (release: the reads above happen before it). */
void weft__wnode_wake(struct weft__wnode *n)
{
	unsigned *claim = n->claim;
	/* Claimed (waitq_claim), so unlinked, and its waiter waits for us. */
	WEFT__ASSERT(!n->linked);
	WEFT__ASSERT((at_load_uint(claim) & WAITQ_WAKING) && at_load_uint(claim) != WAITQ_ABANDONED);
	if (weft__waiter_wake(n->waiter, n->result | WEFT__PARK_WAKE_CLAIMED))
		return;
	unsigned v = at_load_uint(claim);
	at_fence_release();
	at_store_uint(claim, v & ~WAITQ_WAKING);
}

void weft__wakes_run_list(struct weft__wnode *n)
{
	struct weft__worker *w = weft__schedule_batch_begin();
	for (struct weft__wnode *next; n; n = next) {
		next = n->wake_next;
		weft__wnode_wake(n);
	}
	weft__schedule_batch_end(w);
}

/* The dropped waiters relock the object, a few instructions away unless
 * they wait for its lock (held by another) or were preempted; one may be a
 * coroutine of this worker, so a coroutine yields between tries. */
void weft__wakes_wait_dropped(struct weft__wakes *ws)
{
	weft__fault_pause(WEFT__FAULT_DROPPED, 0);
	for (unsigned spins = 0; at_load_uint(&ws->dropped); spins++) {
		if (weft_self())
			weft_yield();
		else
			at_backoff(spins);
	}
}

void weft__wait_enqueue(struct weft__wait *x, struct weft__waitq *q, void *data)
{
	weft__waiter_init(&x->waiter, WEFT_PARK_SYNC);
	x->claim = 0;
	x->node = (struct weft__wnode){ .waiter = &x->waiter, .claim = &x->claim, .data = data,
					.sole = true };
	weft__waitq_push(q, &x->node);
}

int weft__wait_park(struct weft__wait *x, struct weft__lock *lock, struct weft__waitq *q,
		    int64_t deadline)
{
	return weft__wait_park_hook(x, lock, q, deadline, NULL, NULL);
}

int weft__wait_zero(struct weft__lock *lock, const size_t *count, struct weft__waitq *q,
		    int64_t deadline, bool cancellable)
{
	weft__lock_acquire(lock);
	if (*count == 0) {
		weft__lock_release(lock);
		return 0;
	}
	struct weft__wait x;
	weft__wait_enqueue(&x, q, NULL);
	x.waiter.cancellable = cancellable;
	return weft__wait_park(&x, lock, q, deadline);
}

int weft__wait_park_hook(struct weft__wait *x, struct weft__lock *lock, struct weft__waitq *q,
			 int64_t deadline, void (*gave_up)(void *obj, struct weft__wakes *ws),
			 void *obj)
{
	weft__lock_release(lock);	/* an RMW: the StoreLoad the wait needs */
	int r = weft__waiter_wait_fenced(&x->waiter, deadline);
	if (r & WEFT__PARK_WAKE_CLAIMED)
		return r & ~WEFT__PARK_WAKE_CLAIMED;
	if (!weft__wnode_abandon(&x->node)) {	/* claimed: the object may be gone */
		weft__wnode_claimed_case(&x->node, r);
		return x->node.result;
	}
	/* Abandoned while queued: the object lives, as we still wait on it. */
	weft__fault_pause(WEFT__FAULT_ABANDONED, (uintptr_t)obj);
	struct weft__wakes ws = { .head = NULL };
	weft__lock_acquire(lock);
	/* not retracted: a claimer dropped it, and did our part */
	if (weft__wnode_retract(q, &x->node) && gave_up)
		gave_up(obj, &ws);
	weft__lock_release(lock);
	weft__wnode_left(&x->node);	/* the object may go now */
	weft__wakes_run(&ws);
	return r;
}

bool weft__wnode_abandon(struct weft__wnode *n)
{
	return at_cas_uint(n->claim, 0, WAITQ_ABANDONED);
}

unsigned weft__wnode_claimed_case(struct weft__wnode *n, int r)
{
	/* completed all the same: an interrupt that won the park word waits
	 * for the next wait (park.h) */
	weft__park_interrupt_unused(n->waiter->co, r);
	/* The claimer wins or loses our park word within a few instructions
	 * of its lock release; only an OS preemption makes this wait long. */
	for (unsigned spins = 0; !(r & WEFT__PARK_WAKE_CLAIMED) && (at_load_uint(n->claim) & WAITQ_WAKING);
	     spins++)
		at_backoff(spins);
	at_fence_acquire();
	unsigned claim = at_load_uint(n->claim);
	WEFT__ASSERT(claim != 0 && claim != WAITQ_ABANDONED);	/* a claimer's: abandon failed */
	return (claim & ~WAITQ_WAKING) - 1;
}
