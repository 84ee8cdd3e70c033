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
 *   CASes it 0 -> (the node's case + 1); the winner completes the operation
 *   (copies the element, hands over the mutex) and wakes the waiter, still
 *   under the lock.  A node whose claim is taken is dead and is skipped.
 *
 *   The waiter is resumed by whichever waker won its park word (a claim, its
 *   deadline, a close, a cancel).  A claimer wakes with its result |
 *   WEFT__WAKE_CLAIMED: a waiter of one node (struct weft__wait) resumed so
 *   is done without relocking, since the claimer unlinked the node, set its
 *   result and wrote the element before its park-word CAS, and touches
 *   neither the node nor the waiter after it.  Any other waiter relocks
 *   and CASes its claim 0 -> ABANDONED.  If that fails, a claimer completed
 *   the operation (and lost the park word to a deadline or a cancel): the
 *   wait succeeded, whatever the park word said.  Otherwise it unlinks its
 *   nodes and fails with the park word's result.
 *
 * So an operation is completed at most once (one claim CAS wins), never
 * completed for a waiter that gave up (it took the claim first), and the
 * waiter leaves only when no waker can still touch its nodes: after the
 * claimer's last touch, or after relocking (wakers touch nodes only under
 * the lock).  The claim CAS is seq_cst.
 *
 * A sole node (a plain wait: the claim word is its own) needs no CAS: its
 * word is touched only under its queue's lock, and it is 0 while the node is
 * queued, since a waiter that abandons it unlinks it in the same critical
 * section.  So a claimer just stores it (two RMWs fewer per channel round
 * trip); only a select's shared word is CASed against the other queues'
 * claimers.
 *
 * Skipping the relock (with the inline copy of word-sized elements and the
 * fence the wait no longer repeats, park.h) took a channel ping-pong round
 * trip from 1,408 to 1,334 instructions at one worker (callgrind), and from
 * ~330 to ~270 ns at one worker, ~450 to ~380 ns at two (interleaved A/B
 * runs): a lock CAS, a release swap and the settle CAS fewer per wait.
 */
#ifndef WEFT_WAITQ_H
#define WEFT_WAITQ_H

#include <stdbool.h>
#include <stdint.h>

#include "lock.h"
#include "park.h"

enum { WAITQ_ABANDONED = ~0u };
/* A claimer's wake result: the flag | 0 or the operation's error (park.h's
 * results are 16-bit; errno values stay below it, WEFT__WAKE_READY above). */
enum { WEFT__WAKE_CLAIMED = 0x2000 };

struct weft__wnode {
	struct weft__wnode *next, *prev;
	struct weft__waiter *waiter;	/* shared by the nodes of one wait */
	unsigned *claim;		/* atomic, shared likewise: 0 open, case+1, ABANDONED */
	unsigned index;			/* this node's case (select) */
	void *data;			/* the element to send, or where to receive it */
	int result;			/* set by the claimer: 0 done, or EPIPE (closed) */
	bool linked;
	bool sole;			/* claim is this node's alone (see above) */
};

/* One wait on one queue (everything but select). */
struct weft__wait {
	struct weft__waiter waiter;
	unsigned claim;
	struct weft__wnode node;
};

struct weft__waitq {
	struct weft__wnode *head, *tail;
};

void weft__waitq_push(struct weft__waitq *q, struct weft__wnode *n);
void weft__waitq_unlink(struct weft__waitq *q, struct weft__wnode *n);
/* Pops nodes until one can be claimed; NULL when none can. */
struct weft__wnode *weft__waitq_claim(struct weft__waitq *q);
/* True if a live (unclaimed) node waits in q. */
bool weft__waitq_live(struct weft__waitq *q);
/* Completes a claimed node with result and wakes its waiter (under the
 * lock). */
void weft__wnode_wake(struct weft__wnode *n, int result);
/* Claims and wakes every live node of q with result. */
void weft__waitq_wake_all(struct weft__waitq *q, int result);

/* Under lock: arms x and queues it on q (data: see wnode). */
void weft__wait_enqueue(struct weft__wait *x, struct weft__waitq *q, void *data);
/* Unlocks, parks until claimed or deadline, settles (relocking only when
 * not woken by the claimer) and returns with the lock *released*: 0 or the
 * claimer's result when claimed, else the park result (ETIMEDOUT, ...). */
int weft__wait_park(struct weft__wait *x, struct weft__lock *lock, struct weft__waitq *q,
		    int64_t deadline);
/* The waiter's side, relocked after its wait: true if a claimer completed
 * the operation (the claim word then names the case), false if the waiter
 * abandoned it and must unlink its nodes. */
bool weft__wnode_settle(struct weft__wnode *n);

#endif
