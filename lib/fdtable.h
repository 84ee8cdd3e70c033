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
 * Each entry has two waiter slots, reader and writer (index 0 and 1), each a
 * single-waiter slot (slot.h, which completions use too).  A slot's word
 * holds
 *   NULL              nobody waits, no readiness seen
 *   FD_READY          readiness came while nobody waited (kept for the next
 *                     waiter: edge-triggered epoll will not repeat it)
 *   a waiter          one coroutine is parked on this direction
 *   waiter|CLAIMED    a waker (readiness, close) took that waiter and is
 *                     waking it; the waiter may not leave until it is done
 * A waiter parks with CAS(NULL -> w) (or consumes FD_READY); a waker claims
 * with CAS(w -> w|CLAIMED), wakes w through the park protocol, then stores
 * NULL (or FD_READY, if its wake lost to another waker and it brought
 * readiness).  The waiter, once resumed by whichever waker won its park word
 * (readiness, its deadline, close, cancel), retracts: CAS(w -> NULL), or
 * waits while the slot says w|CLAIMED.  So every waker is done with w before
 * the waiter's frame is gone, and the park word (park.h) makes exactly one of
 * them resume it, with that waker's result.  Every CAS is seq_cst (atomic.h).
 *
 * Closing (io.c): weft_close (and weft_release, which leaves out the
 * close(2)) makes gen odd, wakes both slots with ECANCELED,
 * waits until refs (the I/O calls in flight: each holds one from start to
 * return) drops to 0, unregisters, makes gen even again and only then calls
 * close(2).  A call reads gen before it takes its reference and checks it
 * again after (its increment and the closer's bump are ordered the Dekker
 * way, both seq_cst), and registers the fd only under that checked
 * reference: a close that overlaps a call's start is either seen by the
 * call (ECANCELED) or waits for it.  A call that parks checks gen after its
 * slot CAS: the closer's
 * gen bump and its claim are ordered the other way (Dekker, both seq_cst), so
 * either the closer finds the waiter or the waiter sees the close.  Hence no
 * call is left parked on a closed fd, and no call of ours touches an fd
 * number after it has been closed and perhaps reused.
 */
#ifndef WEFT_FDTABLE_H
#define WEFT_FDTABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"

struct weft__waiter;

enum { FD_SLOT_IN = 0, FD_SLOT_OUT = 1 };

struct weft__fd {
	void *slot[2];		/* atomic: see above */
	unsigned owner;		/* atomic: 0 none, FD_OWNER_BUSY, or worker index + 1 */
	unsigned gen;		/* atomic: odd while weft_close runs; names stale events */
	unsigned refs;		/* atomic: I/O calls in flight on the fd */
	unsigned flags;		/* FD_SOCKET, FD_NO_POLL; set by the registrar */
	bool drained;		/* the reader's: its last read came back short */
	bool blocking;		/* registration set O_NONBLOCK (weft_release clears it) */
	unsigned hangup;	/* atomic: an event said RDHUP/HUP/ERR (sticky) */
};

enum {
	FD_OWNER_BUSY = ~0u,	/* being registered right now */
	FD_SOCKET = 1,		/* send(2) with MSG_NOSIGNAL; every arrival is an edge */
	FD_NO_POLL = 2,		/* epoll refused it (regular file): always ready */
	FD_STREAM = 4,		/* a stream socket: a short read means it was empty */
};

/* Whether e's fd is in a loop (the check before weft__loop_register, inline
 * since every I/O call makes it).  A stale true is impossible for a caller
 * holding a checked reference (io.c): only weft_close unregisters. */
static inline bool weft__fd_registered(struct weft__fd *e)
{
	unsigned owner = at_load_uint(&e->owner);
	return owner != 0 && owner != FD_OWNER_BUSY;
}

/* The entry of fd, created if needed; NULL with errno ENOMEM or EBADF. */
struct weft__fd *weft__fd_get(int fd);
/* The entry of fd if one was ever created, else NULL (never allocates). */
struct weft__fd *weft__fd_find(int fd);
/* Frees the whole table (the runtime is stopped: nothing refers to it). */
void weft__fdtable_fini(void);

/* Slot protocol.  park: 0 parked, 1 readiness was pending (consumed),
 * -1 another coroutine waits there (EBUSY). */
int weft__fd_slot_park(void **slot, struct weft__waiter *w);
void weft__fd_slot_retract(void **slot, struct weft__waiter *w);
/* Drops readiness seen while nobody waited (weft_wait re-checks with poll). */
void weft__fd_slot_forget(void **slot);
/* Claims the waiter in slot, or returns NULL: with mark_ready, an empty slot
 * becomes FD_READY.  A claimed waiter is released by fd_slot_release. */
struct weft__waiter *weft__fd_slot_claim(void **slot, bool mark_ready);
void weft__fd_slot_release(void **slot, bool leave_ready);
/* Claims, wakes with result and releases the slot's waiter, if any; with
 * mark_ready, readiness nobody took stays in the slot. */
void weft__fd_slot_wake(void **slot, int result, bool mark_ready);

#endif
