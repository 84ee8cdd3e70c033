/* SPDX-License-Identifier: MIT */
/*
 * fdtable.h — the fd table: per fd, which loop owns it and who waits on it.
 *
 * One entry per fd number, in one table indexed by fd and shared by every
 * loop.  An entry belongs to the loop (worker) whose epoll instance the fd
 * is registered in; each loop's fd table is the set of entries it owns.
 * One array instead of one per loop: with N loops, N fd-indexed arrays would
 * each grow to the highest fd of the process (N times the memory), while an
 * entry is only ever reached through its fd number anyway.
 *
 * The table is chunked: a directory of fixed-size chunks that never move, so
 * an entry's address is stable and lookups take no lock.  The directory
 * grows by doubling under a mutex; old directories stay allocated until
 * weft__fdtable_fini (the deque's argument: the sizes sum to less than the
 * last one, and a reader may still hold an old one).
 *
 * Each entry has two directions, reader and writer (index 0 and 1), each
 * with a waiter slot (slot.h, which completions use too) for the one
 * coroutine that holds the direction's turn, and a FIFO queue (waitq.h,
 * under the entry's qlock) for any others.  A slot's word holds
 *   NULL              nobody waits, no readiness seen
 *   FD_READY          readiness came while nobody waited (kept for the next
 *                     waiter: edge-triggered epoll will not repeat it)
 *   w                 coroutine waiter w is parked on this direction
 *   w|CLAIMED         a waker (readiness, close) took that waiter and is
 *                     waking it; the waiter may not leave until it is done
 *   FD_TURN           the turn is out: a coroutine that was woken from the
 *                     slot or handed the turn by the queue runs its call,
 *                     and passes the turn on when it returns (fdtable.c)
 *   FD_TURN_READY     the same, and readiness came meanwhile
 * and, on a waiter or a turn, the bit FD_QUEUED while the queue is not
 * empty (set and cleared under qlock, never while the slot is CLAIMED).
 *
 * With nobody queued the protocol is the single waiter's: a waiter parks
 * with CAS(NULL -> w) (or consumes FD_READY); a waker claims with
 * CAS(w -> w|CLAIMED), wakes w through the park protocol, then stores NULL
 * (or FD_READY, if its wake lost to another waker and it brought
 * readiness).  The waiter, once resumed by whichever waker won its park
 * word (readiness, its deadline, close, cancel), retracts: CAS(w -> NULL),
 * or waits while the slot says w|CLAIMED.  So every waker is done with w
 * before the waiter's frame is gone, and the park word (park.h) makes
 * exactly one of them resume it, with that waker's result.  Every CAS is
 * seq_cst (atomic.h).
 *
 * A second waiter finds the slot taken (a waiter or a turn) and queues
 * instead (fdtable.c has the rest): a readiness waker that claims w|QUEUED
 * hands w the turn with its wake (FD_WAKE_TURN in the result, FD_TURN in
 * the slot); a waiter leaving w|QUEUED on its own (deadline, cancel) takes
 * the turn to pass it on; whoever holds the turn when its call returns
 * passes it to the queue's head (FD_TURN stays, the head retries its
 * call), or leaves FD_READY when the queue is empty.  One readiness wakes
 * one waiter; a waiter that does not use it up lets the next one try.
 *
 * Closing (io.c): weft_close (and weft_release, which leaves out the
 * close(2)) makes gen odd (FD_GEN_CLOSING), wakes every waiter of both
 * directions (queued or in the slot: weft__fd_close_wake) with ECANCELED,
 * waits until refs (the I/O calls in flight: each holds one from start to
 * return) drops to 0 and unregisters, which clears the entry; a close then
 * marks gen FD_GEN_CLOSED, calls close(2), and only then gives the entry
 * to the number's next file (gen a multiple of FD_GEN_STEP again).  A call
 * that finds FD_GEN_CLOSED waits for that and starts afresh: it came as
 * close(2) ran, so it is a call on whatever the number names afterwards
 * (nothing, or a file another thread opened the moment close(2) freed the
 * number, whose calls must neither be cancelled by a close that was not
 * theirs nor register anything before it).  No call can register the file
 * being closed after its unregistration, so close(2) never drops a
 * registration that the entry still records.  A call reads gen before it
 * takes its reference and checks it again after (its increment and the
 * closer's bump are ordered the Dekker way, both seq_cst), and registers
 * the fd only under that checked reference: a close that overlaps a
 * call's start is either seen by the call (ECANCELED) or waits for it.
 * A call that parks checks gen after its
 * slot CAS or its queueing: the closer's gen bump and its claim are ordered
 * the other way (Dekker, both seq_cst; for the queue, qlock, which the
 * closer takes after its bump to claim every queued node), so either the
 * closer finds the waiter or the waiter sees the close.  Hence no
 * call is left parked on a closed fd, and no call of ours touches an fd
 * number after it has been closed and perhaps reused.
 */
#ifndef WEFT_FDTABLE_H
#define WEFT_FDTABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"
#include "list.h"
#include "lock.h"
#include "slot.h"
#include "waitq.h"

struct weft__waiter;

enum { FD_SLOT_IN = 0, FD_SLOT_OUT = 1 };

struct weft__fd {
	void *slot[2];		/* atomic: see above */
	struct weft__waitq queue[2];	/* under qlock: waiters behind the slot's */
	struct weft__lock qlock;
	unsigned owner;		/* atomic: 0 none, FD_OWNER_BUSY, or worker index + 1 */
	unsigned gen;		/* atomic: odd while weft_close runs (FD_GEN_*); names
				 * stale events */
	unsigned refs;		/* atomic: I/O calls in flight on the fd */
	unsigned flags;		/* FD_SOCKET, FD_NO_POLL, ...; set by the registrar */
	unsigned drained;	/* atomic: the last read came back short (a hint;
				 * readers may race on it) */
	bool blocking;		/* registration set O_NONBLOCK (weft_release clears it) */
	unsigned hangup;	/* atomic: an event said RDHUP/HUP/ERR (sticky) */
	unsigned nowait_off[2];	/* atomic, per direction (FD_SLOT_*) of an FD_FILE:
				 * its RWF_NOWAIT try said EOPNOTSUPP (io.c) */
	struct weft__list files;	/* under qlock: file transfers parked off the
					 * worker, which weft_close wakes (io.c) */
	bool pos_busy;		/* under qlock: a transfer at the file position
				 * holds the fd's turn (io.c, "files") */
	struct weft__waitq pos_queue;	/* under qlock: those waiting for that turn */
};

/* gen's low bits: a multiple of FD_GEN_STEP while the fd is open, plus
 * FD_GEN_CLOSING while weft_close or weft_release forgets it (a call
 * that starts gets ECANCELED), plus FD_GEN_CLOSED while weft_close's
 * close(2) runs (a call that starts waits for it; see above). */
enum { FD_GEN_CLOSING = 1, FD_GEN_CLOSED = 3, FD_GEN_PHASE = 3, FD_GEN_STEP = 4 };

enum {
	FD_OWNER_BUSY = ~0u,	/* being registered right now */
	FD_SOCKET = 1,		/* send(2) with MSG_NOSIGNAL; every arrival is an edge */
	FD_NO_POLL = 2,		/* epoll refused it (regular file): always ready */
	FD_STREAM = 4,		/* a stream socket: a short read means it was empty */
	FD_FILE = 8,		/* a regular file or block device (with FD_NO_POLL):
				 * weft_read and weft_write never block on it (io.c) */
	FD_DIRECT = 16,		/* FD_FILE opened O_DIRECT: RWF_NOWAIT would still
				 * wait for the device, so every transfer offloads */
};

/* Whether e's fd is in a loop (the check before weft__loop_register, inline
 * since every I/O call makes it).  A stale true is impossible for a caller
 * holding a checked reference (io.c): only weft_close unregisters. */
static inline bool weft__fd_registered(struct weft__fd *e)
{
	unsigned owner = at_load_uint(&e->owner);
	return owner != 0 && owner != FD_OWNER_BUSY;
}

/* The entry of fd in *out, created if needed: 0, or -EBADF or -ENOMEM. */
int weft__fd_get(int fd, struct weft__fd **out);
/* The entry of fd if one was ever created, else NULL (never allocates). */
struct weft__fd *weft__fd_find(int fd);
/* Frees the whole table (the runtime is stopped: nothing refers to it). */
void weft__fdtable_fini(void);

/* Slot words beside NULL, a waiter and waiter|CLAIMED (slot.h markers:
 * even and below 4096).  FD_QUEUED is bit 1, free in a waiter's address
 * (8-aligned) and in the markers, which are multiples of 4. */
#define FD_QUEUED ((uintptr_t)2)
#define FD_READY ((void *)4)
#define FD_TURN ((uintptr_t)8)
#define FD_TURN_READY ((uintptr_t)16)

/* The turn flag of a readiness wake (or a hand-off) for the direction
 * WEFT_IN or WEFT_OUT: the woken waiter holds that direction's turn and
 * must pass it on when its call returns (weft__fd_pass). */
#define FD_WAKE_TURN(bit) ((bit) << 4)

/* A waiter's place in a direction's queue (on its stack). */
struct weft__fd_node {
	struct weft__wnode node;
	unsigned claim;		/* the node's claim word (waitq.h) */
};

/* What weft__fd_park did. */
enum { FD_IN_SLOT, FD_IN_QUEUE, FD_TOOK_READY, FD_WOULD_QUEUE };

/* Parks w on direction d: in the slot (FD_IN_SLOT), or in the queue through
 * n when another waiter holds the turn (FD_IN_QUEUE; with n NULL, nothing
 * changed: FD_WOULD_QUEUE), or consumes readiness nobody took
 * (FD_TOOK_READY).  turn: the caller holds d's turn (it parks in the slot,
 * queue or not).  The uncontended cases are inline. */
int weft__fd_park_slow(struct weft__fd *e, int d, struct weft__waiter *w, bool turn,
		       struct weft__fd_node *n);
static inline int weft__fd_park(struct weft__fd *e, int d, struct weft__waiter *w, bool turn,
				struct weft__fd_node *n)
{
	void *v = at_load_ptr(&e->slot[d]);
	if (v == NULL && at_cas_ptr(&e->slot[d], NULL, w))
		return FD_IN_SLOT;
	return weft__fd_park_slow(e, d, w, turn, n);
}
/* Takes w back from d's slot once resumed; true if it leaves holding the
 * turn (it left a queue behind without being woken from the slot). */
bool weft__fd_retract_slow(struct weft__fd *e, int d, struct weft__waiter *w);
static inline bool weft__fd_retract(struct weft__fd *e, int d, struct weft__waiter *w)
{
	void *v = at_load_ptr(&e->slot[d]);
	/* a waker took it and is done (its result says if with the turn) */
	if (((uintptr_t)v & ~(FD_QUEUED | WEFT__SLOT_CLAIMED)) != (uintptr_t)w)
		return false;
	return weft__fd_retract_slow(e, d, w);
}
/* Takes n out of d's queue once resumed; true if a claimer had taken it
 * (then its result is in n->node.result, and weft__fd_unqueue_done must
 * run once w can no longer be woken by anyone but that claimer). */
bool weft__fd_unqueue(struct weft__fd *e, int d, struct weft__fd_node *n);
/* Waits until n's claimer is done with the waiter; r is the park result
 * (whether that claimer's own wake resumed it), bit n's direction. */
void weft__fd_unqueue_done(struct weft__fd_node *n, int r, int bit);
/* The turn holder of d is returning: hands the turn to the queue's head,
 * or leaves FD_READY when nobody queues. */
void weft__fd_pass(struct weft__fd *e, int d);
/* Takes d's turn when nobody holds it (the slot NULL or FD_READY: no
 * waiter, no turn out), for a call that waits off the slot (a socket's
 * transfer on a ring, io.c): later callers queue behind it, and it passes
 * the turn on when it returns (weft__fd_pass).  Whether it took it. */
bool weft__fd_take_turn(struct weft__fd *e, int d);
/* A call woken by readiness on d, or that took FD_READY, is returning: a
 * waiter that parked meanwhile is woken (it may find what was left). */
void weft__fd_nudge_slow(struct weft__fd *e, int d);
static inline void weft__fd_nudge(struct weft__fd *e, int d)
{
	void *v = at_load_ptr(&e->slot[d]);
	if ((uintptr_t)v >= 4096)	/* a waiter (slot.h): rare */
		weft__fd_nudge_slow(e, d);
}
/* A call that took readiness on d and returns without using it (a select
 * that reported another case), or that only looked (an exact weft_wait, a
 * select's fd case, which dropped READY to ask poll): the readiness goes
 * to a waiter in the slot, or is left for the next one (READY; a stale one
 * costs a retry). */
void weft__fd_redeliver(struct weft__fd *e, int d);
/* Drops readiness seen while nobody waited (weft_wait re-checks with poll);
 * returns whether there was some to drop. */
bool weft__fd_slot_forget(void **slot);
/* Readiness side.  Claims the waiter in d's slot, or returns NULL: with
 * mark_ready, readiness is left for the next waiter (FD_READY, or
 * FD_TURN_READY while the turn is out).  *queued: others queue behind the
 * claimed waiter, whose wake result must then carry FD_WAKE_TURN.  A
 * claimed waiter is released by weft__fd_slot_release, told whether the
 * wake won its park word. */
static inline struct weft__waiter *weft__fd_slot_claim(void **slot, bool mark_ready,
							 bool *queued)
{
	for (;;) {
		uintptr_t v = (uintptr_t)at_load_ptr(slot);
		if (weft__slot_is_waiter((void *)v)) {
			if (v & WEFT__SLOT_CLAIMED)
				return NULL;	/* someone else is on it */
			if (at_cas_ptr(slot, (void *)v, (void *)(v | WEFT__SLOT_CLAIMED))) {
				*queued = v & FD_QUEUED;
				return (struct weft__waiter *)(v & ~FD_QUEUED);
			}
		} else if (!mark_ready) {
			return NULL;
		} else if (v == 0) {
			if (at_cas_ptr(slot, NULL, FD_READY))
				return NULL;
		} else if ((v & ~FD_QUEUED) == FD_TURN) {
			if (at_cas_ptr(slot, (void *)v, (void *)(FD_TURN_READY | (v & FD_QUEUED))))
				return NULL;
		} else {
			return NULL;	/* readiness is already marked */
		}
	}
}
void weft__fd_release_queued(struct weft__fd *e, int d, bool woke);
static inline void weft__fd_slot_release(struct weft__fd *e, int d, bool queued, bool woke,
					 bool mark_ready)
{
	if (queued)
		weft__fd_release_queued(e, d, woke);
	else	/* FD_READY: readiness the lost wake brought */
		weft__slot_release(&e->slot[d], !woke && mark_ready ? FD_READY : NULL);
}
/* weft_close's: wakes every waiter of d, queued or in the slot, ECANCELED
 * (a queued one by a wake whose call then sees the close). */
void weft__fd_close_wake(struct weft__fd *e, int d);

#endif
