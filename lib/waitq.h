/* SPDX-License-Identifier: MIT */
/*
 * waitq.h — FIFO queues of parked waiters, for the synchronisation objects
 * (mutex, condition variable, wait group, channel).
 *
 * Each object guards its queues with its own lock.  A waiting context puts a
 * node (on its own stack) in a queue, unlocks, parks (park.h), relocks and
 * retracts.  A waker, under the lock, pops nodes and tries to *claim* them:
 *
 *   node->claim points at a word shared by every node of one wait (a select
 *   waits in several queues at once; a plain wait has one node).  A waker
 *   CASes it 0 -> (the node's case + 1) | WAITQ_WAKING; the winner completes
 *   the operation (copies the element, hands over the mutex), sets the
 *   node's result and adds it to its own list of wakes.  A node whose claim
 *   is taken is dead and is skipped.
 *
 *   The waker wakes the waiters of its list only after it has released the
 *   object's lock, and touches the object no more (weft__wakes_run).  The
 *   waiter is resumed by whichever waker won its park word (a claim, its
 *   deadline, a close, a cancel).  A claimer wakes with its result |
 *   WEFT__PARK_WAKE_CLAIMED: a waiter of one node (struct weft__wait) resumed so
 *   is done without relocking, since the claimer unlinked the node, set its
 *   result and wrote the element before its lock release, and touches
 *   neither the node nor the waiter after its park-word CAS.
 *
 *   Any other waiter first CASes its claim 0 -> ABANDONED, *without* the
 *   lock (weft__wnode_abandon).  If that fails, a claimer completed the
 *   operation (and lost the park word to a deadline or a cancel): the wait
 *   succeeded, whatever the park word said, and the object may already be
 *   freed (its claimer returned), so the waiter never touches it again: it
 *   waits until the claimer, having lost, clears WAITQ_WAKING (its last
 *   touch of the waiter; a few instructions away), reads its result from
 *   its node and leaves.  If the CAS succeeds, no claimer can take the
 *   node any more, and the object is alive: a waiter still waits on it
 *   (weft.h, "Object lifetime").  The waiter relocks and unlinks its nodes
 *   (a select's on every object but a claimer's: chan.c), and fails with the
 *   park word's result.
 *
 * So an operation is completed at most once (one claim CAS wins), never
 * completed for a waiter that gave up (it took the claim first), the
 * waiter leaves only when no waker can still touch its nodes, and a claimed
 * waiter learns its result from its node, never from the object.  The
 * object's lifetime rule (weft.h) holds: a waiter returns only after the
 * claimer's lock release, which is the claimer's last access to the object
 * (bar a futex wake on the lock word, lock.h), so it may free the object at
 * once.  Waking under the lock instead let a woken waiter free the object
 * while its waker still read the queue or released the lock.  The claim
 * and abandon CASes are seq_cst; the clear of WAITQ_WAKING is a release
 * store read with acquire.  (docs/design.md, "Object lifetime", argues it
 * path by path; test/models/waitq.pml checks it.)
 *
 * Every claim is a CAS, a sole node's (a plain wait: the claim word is its
 * own) too, since its waiter may abandon it outside the lock.  Hence a
 * queue may hold an abandoned node whose waiter has yet to relock: a
 * claimer that pops it drops it (unlinks it and goes on), and the waiter,
 * finding its node unlinked, knows that the claimer saw it gone: it skips
 * its give-up step (weft__wait_park_hook's gave_up), as the claimer
 * counted it out.  So a claim that returns NULL may have emptied a
 * queue of such nodes: its caller treats it as "everyone gave up".
 *
 * That waiter still relocks the object, so a claimer that dropped its node
 * must not return (after which the object may be freed: a broadcast, an
 * unlock, a free) before it has left: it points the node at a count on
 * its own stack (weft__wakes' dropped) and adds one, under the lock; the
 * waiter, relocking, finds its node unlinked, reads that pointer under the
 * lock, unlocks (its last access to the object) and then takes one off
 * (the claimer's stack word: it waits for it).  weft__wakes_run waits for
 * the count to reach 0.  A select's nodes dropped on the channels it
 * relocks count likewise.  Nothing is paid when nothing was dropped.
 */
#ifndef WEFT_WAITQ_H
#define WEFT_WAITQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomic.h"
#include "list.h"
#include "lock.h"
#include "park.h"

/* Claim word values beside 0 (open) and case + 1. */
enum { WAITQ_WAKING = 0x40000000u, WAITQ_ABANDONED = ~0u };

struct weft__wnode {
	struct weft__list_link link;	/* in its queue, while linked */
	struct weft__waiter *waiter;	/* shared by the nodes of one wait */
	unsigned *claim;		/* atomic, shared likewise: 0 open, (case+1)|WAKING, ABANDONED */
	void *data;			/* the element to send, where to receive it, or the word waited for (once.c) */
	union {
		struct weft__wnode *wake_next;	/* in its claimer's wakes, once claimed */
		unsigned *dropper;	/* a claimer that dropped it: its wakes' count (never claimed) */
	};
	unsigned index;			/* this node's case (select) */
	int result;			/* set by the claimer: 0 done, EPIPE (closed), WEFT__PARK_WAKE_RETRY */
	bool linked;
	bool sole;			/* claim is this node's alone (not a select's) */
};

/* A select keeps WEFT_SELECT_MAX of them on its stack: dropper shares a
 * word rather than grow them. */
_Static_assert(sizeof(struct weft__wnode) <= 64, "a wait node stays within 64 bytes");

/* One wait on one queue (everything but select). */
struct weft__wait {
	struct weft__waiter waiter;
	unsigned claim;
	struct weft__wnode node;
};

/* A queue of wnodes, oldest first (list.h); all-zero is the empty queue. */
struct weft__waitq {
	struct weft__list nodes;
};

/* The nodes a waker claimed under an object's lock, to wake after its
 * release (linked through their wake_next pointers), and how many dead
 * nodes it dropped whose waiters have yet to leave the object (atomic:
 * each such waiter decrements it, its last step, after its unlock). */
struct weft__wakes {
	struct weft__wnode *head;
	unsigned dropped;
};

/* A new object that keeps wait queues, zeroed (its lock free, its queues
 * empty); NULL/ENOMEM. */
void *weft__waitq_object_new(size_t size);

/* True if no node, live or dead, is queued in q: whether anyone waits
 * there, or has abandoned a node it has yet to unlink (see above), without
 * reading a node (a cold line on a waiter's stack). */
static inline bool weft__waitq_empty(const struct weft__waitq *q)
{
	return !q->nodes.head;
}
void weft__waitq_push(struct weft__waitq *q, struct weft__wnode *n);
void weft__waitq_unlink(struct weft__waitq *q, struct weft__wnode *n);
/* Pops nodes until one can be claimed (dropping dead ones, counted in ws:
 * see weft__wakes_run); NULL when none can.  ws NULL only for an object
 * that is never freed (an fd table entry): its dropped waiters are not
 * waited for. */
struct weft__wnode *weft__waitq_claim(struct weft__waitq *q, struct weft__wakes *ws);
/* Under the lock: completes the claimed node n with result and adds it to
 * ws, to be woken after the lock's release.  (Inline, as is the empty
 * check below: they sit on every channel operation.) */
static inline void weft__wakes_add(struct weft__wakes *ws, struct weft__wnode *n, int result)
{
	n->result = result;
	n->wake_next = ws->head;
	ws->head = n;
}
/* Under the lock: claims every live node of q with result, into ws
 * (never NULL here).  Plain waits only: a select's nodes on one channel
 * go together (chan.c's claim). */
void weft__waitq_claim_all(struct weft__waitq *q, int result, struct weft__wakes *ws);
/* The same for the live nodes of q whose data is `data` (a queue that
 * objects share: once.c); the others stay queued. */
void weft__waitq_claim_all_of(struct weft__waitq *q, const void *data, int result,
			      struct weft__wakes *ws);
/* After the lock's release: wakes every node of ws.  It reads only the
 * nodes and their waiters, never the object. */
void weft__wnode_wake(struct weft__wnode *n);
void weft__wakes_run_list(struct weft__wnode *head);
void weft__wakes_wait_dropped(struct weft__wakes *ws);
static inline void weft__wakes_wake(struct weft__wakes *ws)
{
	struct weft__wnode *n = ws->head;
	if (n && !n->wake_next)
		weft__wnode_wake(n);	/* the common case: one partner */
	else if (n)
		weft__wakes_run_list(n);
}
/* With no lock held: waits until every waiter whose node ws dropped has
 * left the object (weft__wnode_left), so that the caller's return, after
 * which the object may be freed, is after their last access too.  Every
 * claimer runs it before it returns. */
static inline void weft__wakes_settle(struct weft__wakes *ws)
{
	if (at_load_uint(&ws->dropped))
		weft__wakes_wait_dropped(ws);
}
/* The wakes, then the settle: a claimer's last step. */
static inline void weft__wakes_run(struct weft__wakes *ws)
{
	weft__wakes_wake(ws);
	weft__wakes_settle(ws);
}
/* The waiter's side, under the lock it relocked after its abandon (or
 * after another case won its select): takes n out of q; true if it did,
 * false if a claimer dropped n (then n keeps that claimer's count for
 * weft__wnode_left). */
static inline bool weft__wnode_retract(struct weft__waitq *q, struct weft__wnode *n)
{
	if (!n->linked)
		return false;
	weft__waitq_unlink(q, n);
	n->dropper = NULL;
	return true;
}
/* After the waiter's last access to the object, its lock released, for
 * each node it retracted: lets the claimer that dropped n, if one did,
 * return.  n is the waiter's own: nobody else writes it any more. */
static inline void weft__wnode_left(struct weft__wnode *n)
{
	if (n->dropper)
		at_fas_uint(n->dropper, 1);
}

/* Under lock: arms x and queues it on q (data: see wnode). */
void weft__wait_enqueue(struct weft__wait *x, struct weft__waitq *q, void *data);
/* Unlocks, parks until claimed or deadline, settles (relocking only when
 * it abandoned the node: never once claimed) and returns with the lock
 * *released*: 0 or the claimer's result when claimed, else the park result
 * (ETIMEDOUT, ...). */
int weft__wait_park(struct weft__wait *x, struct weft__lock *lock, struct weft__waitq *q,
		    int64_t deadline);
/* Waits on q, under lock (taken here), until *count is 0: a wait group's
 * count, a group's members.  Whoever brings it to 0 claims every node of q
 * (weft__waitq_claim_all).  0, or the wait's failure (ETIMEDOUT; ECANCELED
 * when cancellable), with the lock released. */
int weft__wait_zero(struct weft__lock *lock, const size_t *count, struct weft__waitq *q,
		    int64_t deadline, bool cancellable);
/* The same, for an object whose waiter, in giving up, may unblock others (a
 * writer that held new readers back): gave_up(obj, ws) runs under the lock
 * once the node is unlinked, if the waiter unlinked it itself (a claimer
 * that dropped it did gave_up's part), and the wakes it adds to ws are run
 * after the lock's release, as every wake is. */
int weft__wait_park_hook(struct weft__wait *x, struct weft__lock *lock, struct weft__waitq *q,
			 int64_t deadline, void (*gave_up)(void *obj, struct weft__wakes *ws),
			 void *obj);
/* The waiter's side, not woken by its claimer: CASes the claim word 0 ->
 * ABANDONED, without the object's lock.  True if it did: no claimer can
 * take the wait any more, and the waiter must relock to unlink its nodes;
 * false if a claimer completed it (the claim word then names the case): the
 * object must not be touched again. */
bool weft__wnode_abandon(struct weft__wnode *n);
/* After an abandon that failed, with r the wait's result: waits until the
 * claimer is done with the waiter (at once if the claimer's own wake
 * resumed it); returns the case (claim - 1).  An interrupt that resumed
 * it is left pending for the waiter's next wait. */
unsigned weft__wnode_claimed_case(struct weft__wnode *n, int r);

#endif
