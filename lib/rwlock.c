/* SPDX-License-Identifier: MIT */
/*
 * rwlock.c — weft_rwlock, a writer-preferring reader-writer lock on the
 * wait queues of waitq.h.
 *
 * One 64-bit word holds the holders and what waits (Go's RWMutex keeps
 * the same in its readerCount): state = readers * READER | R_WAIT | W_WAIT
 * | W_HELD, beside the writer's context id (park.h) and two FIFO queues,
 * readers' and writers', under the object's lock.
 *   rdlock: enters (readers + 1, one CAS, no lock) if no writer holds the
 *     lock *or waits for it*, else queues: a waiting writer stops new
 *     readers, so a stream of readers cannot starve it.
 *   wrlock: enters (0 -> W_HELD, one CAS, no lock) if nobody holds the
 *     lock and nobody waits, else queues.
 *   unlock: a reader's is one CAS (readers - 1), no lock, unless it is the
 *     last reader out while a writer waits: it then hands the lock to the
 *     oldest writer, under the lock, its own hold going in the same add.
 *     A writer's is one CAS (W_HELD -> 0) unless someone waits: it then
 *     hands the lock to every reader queued meanwhile (a batch, as Go's
 *     RWMutex does: nor can a stream of writers starve readers), else to
 *     the next writer.  An unlock that finds, under the lock, nobody left
 *     to hand over to releases the lock and tries its CAS again: it never
 *     gives its hold back before its last access to the object
 *     (design.md, "Unlock paths").  A writer that gives up its wait
 *     (deadline, cancel) lets the queued readers in if it was the last
 *     writer in their way.
 * R_WAIT and W_WAIT say whether rq and wq hold anyone; they are set and
 * cleared only under the lock.  W_HELD is set or cleared without it only
 * from a word with no waiter flag (0 <-> W_HELD), and readers enter without
 * it only while neither writer flag is set; so while a waiter flag is set,
 * the lock holder's only competitors on the word are readers leaving, and
 * it changes the word with one add.  A waiter sets its flag with a CAS on
 * the word it decided on, so a lock-free unlock either replaced that word
 * first (the waiter's CAS fails, and it decides again) or finds the flag
 * in the word it replaces (and hands over if it was the last holder).
 * A hand-over is done for the waiter under the lock (the reader counted,
 * the writer's id stored) before it is claimed; wakes run after the lock's
 * release (the object-lifetime rule), so a waiter that returns may free the
 * lock at once.  An uncontended call's last access to the object is its
 * CAS.  Read holds are counted, not owned (see weft.h).
 *
 * Orderings: every RMW on state is seq_cst (atomic.h).  A writer's
 * entering CAS acquires what the last holder wrote before its releasing
 * CAS, and a reader's likewise; hand-overs order through the lock and the
 * wake (waitq.h).  writer is written only by the thread that holds the
 * write lock (or hands it over, under the lock) and is cleared before the
 * releasing CAS, so a caller comparing it with its own id reads its own
 * last store or a later one: never a stale copy of its own id.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "atomic.h"
#include "clock.h"
#include "coro.h"
#include "errors.h"
#include "fault.h"
#include "invariant.h"
#include "park.h"
#include "waitq.h"
#include "weft.h"

enum {
	W_HELD = 1,	/* a writer holds the lock (readers is 0) */
	W_WAIT = 2,	/* wq holds writers: new readers queue */
	R_WAIT = 4,	/* rq holds readers (so W_HELD or W_WAIT is set) */
};
static const uint64_t READER = 8;	/* one read hold, in the state word */

struct weft_rwlock {
	uint64_t state;		/* atomic: readers * READER | R_WAIT | W_WAIT | W_HELD */
	void *writer;		/* atomic: the write holder's context id, NULL for none */
	struct weft__lock lock;
	struct weft__waitq rq, wq;	/* queued readers and writers, under lock */
};

weft_rwlock *weft_rwlock_new(void)
{
	return weft__waitq_object_new(sizeof(weft_rwlock));
}

void weft_rwlock_free(weft_rwlock *l)
{
	free(l);
}

/* Whether the caller may enter, given the state word s. */
static bool may_enter(uint64_t s, bool write)
{
	return write ? s == 0 : !(s & (W_HELD | W_WAIT));
}

/* Enters from the state word s (a reader counted, or a writer's W_HELD and
 * id) if s allows it and the word still holds it: one CAS. */
static bool try_enter(weft_rwlock *l, uint64_t s, bool write, uintptr_t id)
{
	/* seq_cst, so acquire: the previous holders' accesses, released by
	 * their leaving CAS (or the hand-over's lock), happen before ours */
	if (!may_enter(s, write) || !at_cas_64(&l->state, s, write ? W_HELD : s + READER))
		return false;
	if (write)	/* relaxed: read back by this holder, compared by others */
		at_store_ptr(&l->writer, (void *)id);
	return true;
}

/* Whether the caller holds the write lock (its id is looked up only when
 * somebody does: readers need none). */
static bool holds_write(weft_rwlock *l)
{
	/* relaxed: the caller's own last store, or a later one (see the top) */
	void *w = at_load_ptr(&l->writer);
	return w && (uintptr_t)w == weft__park_context_id();
}

/* Under the lock, a waiter flag set: applies delta (flags set or cleared, by
 * the lock; readers admitted) to the word with one add, which commutes with
 * the readers leaving meanwhile, the only lock-free change possible then. */
static void update(weft_rwlock *l, uint64_t delta)
{
	WEFT__ASSERT(at_load_64(&l->state) & (W_WAIT | R_WAIT));
	/* seq_cst; ordering for the waiters comes from the lock and the wake */
	at_faa_64(&l->state, delta);
}

/* Under the lock, writers queued and the lock free: the oldest live one
 * enters.  False if every one had abandoned its wait (waitq.h: a claim
 * drops those nodes): wq is empty then, and the caller does what their
 * writer_gave_up would have done. */
static bool admit_writer(weft_rwlock *l, struct weft__wakes *ws)
{
	struct weft__wnode *n = weft__waitq_claim(&l->wq, ws);
	if (!n)
		return false;
	/* relaxed: the lock's release and the wake's CAS publish it */
	at_store_ptr(&l->writer, n->data);
	weft__wakes_add(ws, n, 0);
	return true;
}

/* Under the lock: every queued reader enters; returns the state's delta. */
static uint64_t admit_readers(weft_rwlock *l, struct weft__wakes *ws)
{
	uint64_t delta = 0;
	struct weft__wnode *n;
	while ((n = weft__waitq_claim(&l->rq, ws))) {
		delta += READER;
		weft__wakes_add(ws, n, 0);
	}
	return delta - R_WAIT;
}

/* Under the lock, after a writer gave up: if no writer is left in their way,
 * the queued readers enter. */
static void writer_gave_up(void *obj, struct weft__wakes *ws)
{
	weft_rwlock *l = obj;
	if (!weft__waitq_empty(&l->wq))
		return;
	uint64_t s = at_load_64(&l->state);
	uint64_t delta = -(uint64_t)W_WAIT;
	if ((s & R_WAIT) && !(s & W_HELD))
		delta += admit_readers(l, ws);
	update(l, delta);
}

/* Under the lock, after a reader gave up: the last one clears R_WAIT. */
static void reader_gave_up(void *obj, struct weft__wakes *ws)
{
	(void)ws;
	weft_rwlock *l = obj;
	if (weft__waitq_empty(&l->rq))
		update(l, -(uint64_t)R_WAIT);
}

/* Under the lock: enters if the word allows it, else sets the caller's
 * waiter flag.  0 entered, EAGAIN queue, EDEADLK, ETIMEDOUT.  id: a
 * writer's, 0 for a reader. */
static int enter_or_flag(weft_rwlock *l, bool write, uintptr_t id, int64_t deadline)
{
	uint64_t flag = write ? W_WAIT : R_WAIT;
	for (;;) {
		uint64_t s = at_load_64(&l->state);
		if ((s & W_HELD) && holds_write(l))
			return EDEADLK;
		if (may_enter(s, write)) {
			if (try_enter(l, s, write, id))
				return 0;
			continue;	/* readers came or went meanwhile */
		}
		if (weft__clock_deadline_passed(deadline))
			return ETIMEDOUT;
		/* a CAS, not an add: an unlock without the lock may have
		 * changed the word since s, and the decision with it
		 * (seq_cst: the unlock that replaces this word sees the flag) */
		if ((s & flag) || at_cas_64(&l->state, s, s | flag))
			return EAGAIN;
	}
}

/* Enters or queues, under the lock; id as enter_or_flag's (a writer's node
 * carries it to the hand-over, which stores it). */
static int lock_slow(weft_rwlock *l, bool write, uintptr_t id, int64_t deadline)
{
	weft__lock_acquire(&l->lock);
	int r = enter_or_flag(l, write, id, deadline);
	if (r != EAGAIN) {
		weft__lock_release(&l->lock);
		return r;
	}
	struct weft__waitq *q = write ? &l->wq : &l->rq;
	struct weft__wait x;
	weft__wait_enqueue(&x, q, (void *)id);
	return weft__wait_park_hook(&x, &l->lock, q, deadline,
				    write ? writer_gave_up : reader_gave_up, l);
}

static int lock(weft_rwlock *l, bool write, int64_t deadline)
{
	if (weft__co_wait_entry(l != NULL) != 0)
		return -1;
	/* Both read the word first: a writer's CAS expecting 0 would fail,
	 * a locked instruction for nothing, whenever readers hold or wait
	 * (as the mutex's: sync.c, lock_fast).  Only a writer's id is kept
	 * (unlock and EDEADLK compare with it). */
	uintptr_t id = write ? weft__park_context_id() : 0;
	if (try_enter(l, at_load_64(&l->state), write, id))
		return 0;
	int r = lock_slow(l, write, id, deadline);
	return r ? weft__err_fail(r) : 0;
}

int weft_rwlock_rdlock(weft_rwlock *l, int64_t deadline)
{
	return lock(l, false, deadline);
}

int weft_rwlock_wrlock(weft_rwlock *l, int64_t deadline)
{
	return lock(l, true, deadline);
}

/* Under the lock, the caller the last reader and a writer queued: the
 * oldest writer enters, and the caller's hold goes with the same add.
 * False (nothing done) if the word says otherwise now. */
static bool last_reader_out(weft_rwlock *l, struct weft__wakes *ws)
{
	uint64_t s = at_load_64(&l->state);
	if (s / READER != 1 || !(s & W_WAIT))
		return false;
	if (!admit_writer(l, ws)) {
		/* every queued writer had abandoned its wait (waitq.h): their
		 * give-up falls to us, and our hold goes back by the caller's
		 * CAS after the lock's release */
		writer_gave_up(l, ws);
		return false;
	}
	update(l, (uint64_t)W_HELD - READER - (weft__waitq_empty(&l->wq) ? W_WAIT : 0));
	return true;
}

/* Runs hand(l, ws) under the lock, then its wakes (after the release, as
 * every wake): whether it handed the lock over.  The fault build pauses
 * just before the release: the unlock paths' window (fault.h). */
static bool hand_over(weft_rwlock *l, bool (*hand)(weft_rwlock *, struct weft__wakes *))
{
	struct weft__wakes ws = { .head = NULL };
	weft__lock_acquire(&l->lock);
	bool handed = hand(l, &ws);
	weft__fault_pause(WEFT__FAULT_UNLOCK, (uintptr_t)l);
	weft__lock_release(&l->lock);
	weft__wakes_run(&ws);	/* a hand-over's, or readers a writer's give-up let in */
	return handed;
}

/* Gives back one read hold: EPERM if there is none.  The last reader out
 * while a writer waits hands the lock over under the lock, its hold given
 * back by the hand-over's add: it never lets go of the lock before it is
 * done with the object (design.md, "Unlock paths"). */
static int read_unlock(weft_rwlock *l)
{
	for (;;) {
		uint64_t s = at_load_64(&l->state);
		if (s < READER)	/* not read-held (W_HELD: the writer is another) */
			return EPERM;
		if (s >= 2 * READER || !(s & W_WAIT)) {
			/* seq_cst, so release: our reads happen before the
			 * next writer's entering CAS or hand-over */
			if (at_cas_64(&l->state, s, s - READER))
				return 0;
			continue;
		}
		if (hand_over(l, last_reader_out))
			return 0;
	}
}

/* Under the lock, the caller's write hold to give back and someone waiting:
 * the queued readers enter if any, else the oldest writer.  False if
 * nobody waits any more (they gave up): the caller then gives its hold back
 * with its own CAS, after the lock's release. */
static bool write_hand_over(weft_rwlock *l, struct weft__wakes *ws)
{
	uint64_t s = at_load_64(&l->state);
	if (s & R_WAIT) {
		uint64_t delta = admit_readers(l, ws);
		if (delta != -(uint64_t)R_WAIT) {	/* some entered */
			update(l, delta - W_HELD);
			return true;
		}
		/* every one had abandoned its wait (waitq.h): the writers'
		 * turn, if any waits */
		update(l, delta);
	}
	if (!(s & W_WAIT))
		return false;
	if (!admit_writer(l, ws)) {	/* nobody left: W_HELD stays ours */
		update(l, -(uint64_t)W_WAIT);
		return false;
	}
	if (weft__waitq_empty(&l->wq))
		update(l, -(uint64_t)W_WAIT);
	return true;
}

static void write_unlock(weft_rwlock *l)
{
	/* relaxed, ordered before the releasing CAS by its full fence */
	at_store_ptr(&l->writer, NULL);
	for (;;) {
		/* seq_cst, so release: our accesses happen before the next
		 * holder's (tried only on a word without waiters, as lock's) */
		if (at_load_64(&l->state) == W_HELD && at_cas_64(&l->state, W_HELD, 0))
			return;
		if (hand_over(l, write_hand_over))
			return;
	}
}

int weft_rwlock_unlock(weft_rwlock *l)
{
	if (!l)
		return weft__err_fail(EINVAL);
	if (holds_write(l)) {
		write_unlock(l);
		return 0;
	}
	int r = read_unlock(l);
	return r ? weft__err_fail(r) : 0;
}
