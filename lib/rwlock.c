/* SPDX-License-Identifier: MIT */
/*
 * rwlock.c — weft_rwlock, a writer-preferring reader-writer lock on the
 * wait queues of waitq.h.
 *
 * The holders (a count of readers, or the writer's context id: park.h) and
 * two FIFO queues, readers' and writers', all under the object's lock.
 *   rdlock: enters if no writer holds the lock *or waits for it*, else
 *     queues: a waiting writer stops new readers, so a stream of readers
 *     cannot starve it.
 *   wrlock: enters if nobody holds the lock, else queues.
 *   unlock: the last reader out hands the lock to the oldest writer; a
 *     writer hands it to every reader queued meanwhile (a batch, as Go's
 *     RWMutex does: nor can a stream of writers starve readers), else to the
 *     next writer.  A writer that gives up its wait (deadline, cancel) lets
 *     the queued readers in if it was the last writer in their way.
 * A hand-over is done for the waiter under the lock (the reader counted,
 * the writer's id stored) before it is claimed; wakes run after the lock's
 * release (the object-lifetime rule), so a waiter that returns may free the
 * lock at once.  Read holds are counted, not owned (see weft.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "clock.h"
#include "coro.h"
#include "errors.h"
#include "park.h"
#include "waitq.h"
#include "weft.h"

struct weft_rwlock {
	struct weft__lock lock;
	unsigned long readers;	/* read holds; the fields below too, under lock */
	uintptr_t writer;	/* the write holder's context id, 0 for none */
	struct weft__waitq rq, wq;	/* queued readers and writers */
};

weft_rwlock *weft_rwlock_new(void)
{
	return weft__waitq_object_new(sizeof(weft_rwlock));
}

void weft_rwlock_free(weft_rwlock *l)
{
	free(l);
}

/* Under the lock: every queued reader enters. */
static void admit_readers(weft_rwlock *l, struct weft__wakes *ws)
{
	struct weft__wnode *n;
	while ((n = weft__waitq_claim(&l->rq))) {
		l->readers++;
		weft__wakes_add(ws, n, 0);
	}
}

/* Under the lock, the lock free: the oldest queued writer enters. */
static void admit_writer(weft_rwlock *l, struct weft__wakes *ws)
{
	struct weft__wnode *n = weft__waitq_claim(&l->wq);
	if (n) {
		l->writer = (uintptr_t)n->data;
		weft__wakes_add(ws, n, 0);
	}
}

/* Under the lock, after a writer gave up: if no writer is left in their way,
 * the queued readers enter. */
static void writer_gave_up(void *obj, struct weft__wakes *ws)
{
	weft_rwlock *l = obj;
	if (!l->writer && !weft__waitq_live(&l->wq))
		admit_readers(l, ws);
}

/* Queues the caller (id) on q and parks: 0 once it was let in. */
static int wait_turn(weft_rwlock *l, struct weft__waitq *q, uintptr_t id, int64_t deadline)
{
	if (weft__clock_deadline_passed(deadline)) {
		weft__lock_release(&l->lock);
		return ETIMEDOUT;
	}
	struct weft__wait x;
	weft__wait_enqueue(&x, q, (void *)id);
	return weft__wait_park_hook(&x, &l->lock, q, deadline, q == &l->wq ? writer_gave_up : NULL,
				    l);
}

static int lock(weft_rwlock *l, bool write, int64_t deadline)
{
	if (!l)
		return weft__err_fail(EINVAL);
	if (weft__co_cancelled())
		return weft__err_fail(ECANCELED);
	uintptr_t id = weft__park_context_id();
	weft__lock_acquire(&l->lock);
	if (l->writer == id) {
		weft__lock_release(&l->lock);
		return weft__err_fail(EDEADLK);
	}
	bool enter = write ? !l->writer && !l->readers : !l->writer && !weft__waitq_live(&l->wq);
	if (enter) {
		if (write)
			l->writer = id;
		else
			l->readers++;
		weft__lock_release(&l->lock);
		return 0;
	}
	int r = wait_turn(l, write ? &l->wq : &l->rq, id, deadline);
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

int weft_rwlock_unlock(weft_rwlock *l)
{
	if (!l)
		return weft__err_fail(EINVAL);
	uintptr_t id = weft__park_context_id();
	struct weft__wakes ws = { NULL };
	int r = 0;
	weft__lock_acquire(&l->lock);
	if (l->writer == id) {
		l->writer = 0;
		if (weft__waitq_live(&l->rq))
			admit_readers(l, &ws);
		else
			admit_writer(l, &ws);
	} else if (!l->writer && l->readers) {
		if (--l->readers == 0)
			admit_writer(l, &ws);
	} else {
		r = EPERM;	/* not held, or write-held by another caller */
	}
	weft__lock_release(&l->lock);
	weft__wakes_run(&ws);
	return r ? weft__err_fail(r) : 0;
}
