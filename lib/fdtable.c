/* SPDX-License-Identifier: MIT */
/*
 * fdtable.c — the chunked fd table and its waiter protocol (see fdtable.h):
 * per direction, a slot for the waiter holding the turn and a FIFO of the
 * others.
 *
 * The queue.  A waiter that finds the slot taken (another waiter, or the
 * turn out) takes qlock, sets FD_QUEUED on the slot word (a CAS, so a
 * claimer's CAS on the same word either sees the bit or comes first) and
 * pushes its node.  The turn then travels:
 *   - a readiness waker (fd_event, weft__fd_nudge) claiming w|QUEUED wakes
 *     w with FD_WAKE_TURN and releases the slot to FD_TURN|QUEUED: w holds
 *     the turn.  If that wake lost (w was resumed by its deadline, a cancel
 *     or its other direction), the waker hands the turn to the queue's
 *     head itself, under qlock, before its release;
 *   - a waiter resumed otherwise, leaving w|QUEUED, CASes it to
 *     FD_TURN|QUEUED: it holds the turn;
 *   - the holder, when its call returns (io.c), passes it: under qlock it
 *     claims the head (waitq.h), leaves FD_TURN (|QUEUED if more wait) and
 *     wakes the head, which retries its call; with nobody queued it leaves
 *     FD_READY, since what woke it may not be used up.  A holder whose call
 *     ends in EAGAIN instead parks in the slot again (FD_TURN -> w).
 * A queued waiter resumed otherwise (deadline, cancel) settles its node
 * under qlock: not claimed, it unlinks it (and clears FD_QUEUED if the
 * queue is now empty); claimed, it holds the turn (the claim won, whatever
 * woke it: waitq.h) and passes it on in its turn.
 * Nobody waits for a CLAIMED slot while holding qlock (the claimer may need
 * qlock to hand the turn on): they drop it, back off and look again.  The
 * uncontended path (nobody queued) makes the single waiter's CASes and no
 * other RMW: the returning call's check (weft__fd_nudge) is one load.
 *
 * Orderings: every CAS on a slot is seq_cst (atomic.h), so the bit a
 * queuer sets and a claimer's CAS are ordered on the one word (the claimer
 * sees FD_QUEUED, or the queuer sees the claim and backs off); the loads
 * before them are relaxed and only choose what to CAS.  A claimer ends its
 * claim with weft__slot_release (release fence, then the store), its last
 * touch of the waiter.  The queues, the nodes' links and results are read
 * and written under qlock (acquire/release, lock.h); a node's claim word
 * follows waitq.h (the claim under qlock, the WAKING clear a release store
 * read with acquire).  The close check after queueing is ordered by qlock:
 * weft_close bumps gen (seq_cst) before it takes qlock to claim the queue.
 */
#include "fdtable.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "fault.h"
#include "invariant.h"
#include "park.h"
#include "slot.h"

enum {
	CHUNK_SHIFT = 10,
	CHUNK = 1 << CHUNK_SHIFT,	/* entries per chunk (80 KiB: 80-byte entries) */
	DIR_INITIAL = 64,		/* chunks: fds 0..65535 before the first growth */
};

struct dir {
	size_t nchunks;
	struct dir *retired;	/* the directory this one replaced */
	struct weft__fd *chunk[];	/* atomic pointers; NULL until used */
};

static struct dir *table;	/* atomic: the current directory */
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;

struct weft__fd *weft__fd_find(int fd)
{
	if (fd < 0)
		return NULL;
	struct dir *d = at_load_ptr((void **)&table);
	size_t c = (size_t)fd >> CHUNK_SHIFT;
	if (!d || c >= d->nchunks)
		return NULL;
	struct weft__fd *chunk = at_load_ptr((void **)&d->chunk[c]);
	/* The chunk's zeroed contents were published by grow_lock's release
	 * and the pointer store (address dependency orders the reads). */
	return chunk ? &chunk[fd & (CHUNK - 1)] : NULL;
}

/* Under grow_lock: a directory with at least c + 1 chunks. */
static struct dir *dir_for(size_t c)
{
	struct dir *old = table;
	if (old && c < old->nchunks)
		return old;
	size_t n = old ? old->nchunks : DIR_INITIAL;
	while (n <= c)
		n *= 2;
	struct dir *d = weft__fault() ? NULL : calloc(1, sizeof *d + n * sizeof d->chunk[0]);
	if (!d)
		return NULL;
	d->nchunks = n;
	d->retired = old;
	if (old)
		memcpy(d->chunk, old->chunk, old->nchunks * sizeof d->chunk[0]);
	at_fence_release();
	at_store_ptr((void **)&table, d);
	return d;
}

/* weft__fd_get's first use of fd's chunk: allocates it (and a directory
 * large enough) under grow_lock.  Out of line, so that the lookup every
 * I/O call makes saves no registers for it. */
static __attribute__((noinline)) int create_entry(int fd, struct weft__fd **out)
{
	size_t c = (size_t)fd >> CHUNK_SHIFT;
	pthread_mutex_lock(&grow_lock);
	struct dir *d = dir_for(c);
	if (d && !d->chunk[c]) {
		struct weft__fd *chunk = weft__fault() ? NULL : calloc(CHUNK, sizeof *chunk);
		if (chunk) {
			at_fence_release();
			at_store_ptr((void **)&d->chunk[c], chunk);
		}
	}
	pthread_mutex_unlock(&grow_lock);
	*out = weft__fd_find(fd);
	return *out ? 0 : -ENOMEM;
}

int weft__fd_get(int fd, struct weft__fd **out)
{
	if (fd < 0)
		return -EBADF;
	if ((*out = weft__fd_find(fd)))
		return 0;
	return create_entry(fd, out);
}

void weft__fdtable_fini(void)
{
	pthread_mutex_lock(&grow_lock);
	struct dir *d = table;
	if (d)
		for (size_t i = 0; i < d->nchunks; i++)
			free(d->chunk[i]);
	while (d) {
		struct dir *older = d->retired;
		free(d);
		d = older;
	}
	at_store_ptr((void **)&table, NULL);
	pthread_mutex_unlock(&grow_lock);
}

/* ------------------------------------------------------ slots */

_Static_assert(_Alignof(struct weft__waiter) >= 4 && _Alignof(struct weft__fd_node) >= 4,
	       "waiters leave CLAIMED and FD_QUEUED free");
_Static_assert(FD_WAKE_TURN(WEFT_IN | WEFT_OUT) < 0x1000 &&
		       !(FD_WAKE_TURN(WEFT_IN | WEFT_OUT) & (WEFT_IN | WEFT_OUT)),
	       "turn flags sit between the ready events and the wake flags (park.h)");

enum { RETRY = -1, BACK_OFF = -2 };

static inline uintptr_t word(void *v)
{
	return (uintptr_t)v;
}

static inline bool is_turn(uintptr_t v)
{
	v &= ~FD_QUEUED;
	return v == FD_TURN || v == FD_TURN_READY;
}

static inline bool is_claimed_waiter(uintptr_t v)
{
	return weft__slot_is_waiter((void *)v) && (v & WEFT__SLOT_CLAIMED);
}

/* The result a hand-off (or a turn-carrying readiness wake) gives. */
static inline int turn_result(int d)
{
	int bit = d == FD_SLOT_IN ? WEFT_IN : WEFT_OUT;
	return WEFT__PARK_WAKE_READY | bit | FD_WAKE_TURN(bit);
}

/* The holder of d's turn parks (v: a turn) or consumes the readiness that
 * came while it ran. */
static int park_holder(void **slot, uintptr_t v, struct weft__waiter *w)
{
	uintptr_t q = v & FD_QUEUED;
	if ((v & ~FD_QUEUED) == FD_TURN_READY)
		return at_cas_ptr(slot, (void *)v, (void *)(FD_TURN | q)) ? FD_TOOK_READY : RETRY;
	return at_cas_ptr(slot, (void *)v, (void *)(word(w) | q)) ? FD_IN_SLOT : RETRY;
}

/* Queues w behind the slot's holder (v: a waiter or a turn, read before). */
static int enqueue(struct weft__fd *e, int d, struct weft__waiter *w, struct weft__fd_node *n)
{
	void **slot = &e->slot[d];
	weft__lock_acquire(&e->qlock);
	uintptr_t v = word(at_load_ptr(slot));
	int r = FD_IN_QUEUE;
	if (v == 0 || v == word(FD_READY))
		r = RETRY;	/* the holder left: park in the slot */
	else if (is_claimed_waiter(v))
		r = BACK_OFF;	/* its waker will release it in a moment */
	else if (!(v & FD_QUEUED) && !at_cas_ptr(slot, (void *)v, (void *)(v | FD_QUEUED)))
		r = RETRY;
	if (r == FD_IN_QUEUE) {
		n->claim = 0;
		n->node = (struct weft__wnode){ .waiter = w, .claim = &n->claim, .sole = true };
		weft__waitq_push(&e->queue[d], &n->node);
	}
	weft__lock_release(&e->qlock);
	return r;
}

int weft__fd_park_slow(struct weft__fd *e, int d, struct weft__waiter *w, bool turn,
		       struct weft__fd_node *n)
{
	void **slot = &e->slot[d];
	for (unsigned spins = 0;; spins++) {
		void *v = at_load_ptr(slot);
		int r = RETRY;
		if (v == NULL) {
			if (at_cas_ptr(slot, NULL, w))
				return FD_IN_SLOT;
		} else if (v == FD_READY) {
			if (at_cas_ptr(slot, FD_READY, NULL))
				return FD_TOOK_READY;
		} else if (turn && is_turn(word(v))) {
			r = park_holder(slot, word(v), w);
		} else {
			WEFT__ASSERT(!turn);	/* a turn stays in the slot until its holder acts */
			if (!n)
				return FD_WOULD_QUEUE;
			r = enqueue(e, d, w, n);
		}
		if (r >= 0)
			return r;
		if (r == BACK_OFF)
			at_backoff(spins);
	}
}

bool weft__fd_retract_slow(struct weft__fd *e, int d, struct weft__waiter *w)
{
	void **slot = &e->slot[d];
	uintptr_t mine = word(w);
	for (unsigned spins = 0;; spins++) {
		uintptr_t v = word(at_load_ptr(slot));
		if (v == mine && at_cas_ptr(slot, w, NULL))
			return false;
		/* leaving a queue behind: take the turn to pass it on */
		if (v == (mine | FD_QUEUED) &&
		    at_cas_ptr(slot, (void *)v, (void *)(FD_TURN | FD_QUEUED)))
			return true;
		if ((v & ~FD_QUEUED) == (mine | WEFT__SLOT_CLAIMED))
			at_backoff(spins);	/* a waker is on it: it releases in a moment */
		else if ((v & ~FD_QUEUED) != mine)
			return false;	/* a waker took it (its result says if with the turn) */
	}
}

/* Under qlock, d's queue just lost a node: clears FD_QUEUED if it is empty.
 * May drop and retake qlock (never waits for a claim while holding it). */
static void queue_shrunk(struct weft__fd *e, int d)
{
	void **slot = &e->slot[d];
	for (unsigned spins = 0; weft__waitq_empty(&e->queue[d]); spins++) {
		uintptr_t v = word(at_load_ptr(slot));
		if (!(v & FD_QUEUED))
			return;
		if (is_claimed_waiter(v)) {
			weft__lock_release(&e->qlock);
			at_backoff(spins);
			weft__lock_acquire(&e->qlock);
		} else if (at_cas_ptr(slot, (void *)v, (void *)(v & ~FD_QUEUED))) {
			return;
		}
	}
}

bool weft__fd_unqueue(struct weft__fd *e, int d, struct weft__fd_node *n)
{
	weft__lock_acquire(&e->qlock);
	bool claimed = !weft__wnode_abandon(&n->node);
	if (!claimed) {
		weft__waitq_unlink(&e->queue[d], &n->node);
		queue_shrunk(e, d);
	}
	weft__lock_release(&e->qlock);
	return claimed;
}

void weft__fd_unqueue_done(struct weft__fd_node *n, int r, int bit)
{
	/* r names this node's claimer only if it carries this direction */
	bool by_claimer = (r & WEFT__PARK_WAKE_CLAIMED) && (r & bit);
	weft__wnode_claimed_case(&n->node, by_claimer ? r : 0);
}

/* Under qlock: claims d's head for the turn (NULL if nobody queues) and
 * says what the slot holds after the hand-off. */
static struct weft__wnode *claim_head(struct weft__fd *e, int d, void **next)
{
	struct weft__wnode *n = weft__waitq_claim(&e->queue[d], NULL);
	if (n) {
		n->result = turn_result(d);
		*next = (void *)(FD_TURN | (weft__waitq_empty(&e->queue[d]) ? 0 : FD_QUEUED));
	} else {
		*next = FD_READY;	/* what woke the last holder may be left */
	}
	return n;
}

void weft__fd_pass(struct weft__fd *e, int d)
{
	void **slot = &e->slot[d];
	void *next;
	weft__lock_acquire(&e->qlock);
	struct weft__wnode *n = claim_head(e, d, &next);
	/* only readiness (FD_TURN -> FD_TURN_READY) changes a turn without qlock */
	for (;;) {
		void *v = at_load_ptr(slot);
		WEFT__ASSERT(is_turn(word(v)));
		if (at_cas_ptr(slot, v, next))
			break;
	}
	weft__lock_release(&e->qlock);
	if (n)
		weft__wnode_wake(n);
}

/* A CAS like a waiter's park (seq_cst): a waker that finds FD_TURN marks
 * FD_TURN_READY instead of waking anyone, an enqueuer queues behind it,
 * and a closer finds no waiter in the slot (it wakes the taker through the
 * taker's own wait: io.c, file_park). */
bool weft__fd_take_turn(struct weft__fd *e, int d)
{
	void **slot = &e->slot[d];
	return at_cas_ptr(slot, NULL, (void *)FD_TURN) || at_cas_ptr(slot, FD_READY, (void *)FD_TURN);
}

/* Wakes the waiter in d's slot, with readiness; with mark_ready, leaves
 * readiness for the next one when nobody waits there. */
static void nudge(struct weft__fd *e, int d, bool mark_ready)
{
	bool queued;
	struct weft__waiter *w = weft__fd_slot_claim(&e->slot[d], mark_ready, &queued);
	if (!w)
		return;
	int bit = d == FD_SLOT_IN ? WEFT_IN : WEFT_OUT;
	int r = WEFT__PARK_WAKE_READY | bit | (queued ? FD_WAKE_TURN(bit) : 0);
	weft__fd_slot_release(e, d, queued, weft__waiter_wake(w, r), true);
}

void weft__fd_nudge_slow(struct weft__fd *e, int d)
{
	nudge(e, d, false);
}

void weft__fd_redeliver(struct weft__fd *e, int d)
{
	nudge(e, d, true);
}

bool weft__fd_slot_forget(void **slot)
{
	return at_cas_ptr(slot, FD_READY, NULL);
}

/* A claimer whose wake lost, with others queued: the turn it brought goes
 * to the queue's head (the claimed waiter, resumed otherwise, sees a slot
 * that is no longer its own and leaves without it). */
static void release_to_head(struct weft__fd *e, int d)
{
	void *next;
	weft__lock_acquire(&e->qlock);
	struct weft__wnode *n = claim_head(e, d, &next);
	weft__slot_release(&e->slot[d], next);
	weft__lock_release(&e->qlock);
	if (n)
		weft__wnode_wake(n);
}

void weft__fd_release_queued(struct weft__fd *e, int d, bool woke)
{
	if (woke)	/* the woken waiter holds the turn */
		weft__slot_release(&e->slot[d], (void *)(FD_TURN | FD_QUEUED));
	else
		release_to_head(e, d);
}

void weft__fd_close_wake(struct weft__fd *e, int d)
{
	int bit = d == FD_SLOT_IN ? WEFT_IN : WEFT_OUT;
	struct weft__wakes ws = { .head = NULL };
	weft__lock_acquire(&e->qlock);
	struct weft__wnode *n;
	/* no turn with these: each call sees the close and returns */
	while ((n = weft__waitq_claim(&e->queue[d], NULL)))
		weft__wakes_add(&ws, n, WEFT__PARK_WAKE_READY | bit);
	weft__lock_release(&e->qlock);
	weft__wakes_run(&ws);
	bool queued;
	struct weft__waiter *w = weft__fd_slot_claim(&e->slot[d], false, &queued);
	if (w) {
		weft__waiter_wake(w, ECANCELED);
		weft__slot_release(&e->slot[d], NULL);	/* closing: nobody takes a turn */
	}
}
