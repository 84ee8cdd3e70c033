/* SPDX-License-Identifier: MIT */
/*
 * steal.c — taking work from other workers: their deques' tops, their ready
 * FIFOs, and on the last pass their runnext slots (worker.c's essay,
 * "Finding work").
 */
#include "steal.h"

#include <time.h>

#include "atomic.h"
#include "idle.h"
#include "queue.h"
#include "worker.h"

enum {
	STEAL_ROUNDS = 2,	/* passes over all victims before giving up (see steal_runnext) */
	STEAL_BATCH = 32,	/* extra items one steal may bring along */
};
static const int64_t RUNNEXT_GRACE_NS = 3 * 1000;	/* see steal_runnext */

/*
 * After a successful steal, take up to half of what the victim still has
 * (at most STEAL_BATCH) into our own deque: the victim's top line is already
 * in our cache, so each extra item costs one local CAS instead of another
 * round of cross-core misses.  Chase-Lev moves top by one per CAS, so a batch
 * is a loop (research notes, pitfall 7).
 */
static void steal_more(struct weft__worker *w, struct weft__deque *victim)
{
	int64_t n = weft__deque_size(victim) / 2;
	if (n > STEAL_BATCH)
		n = STEAL_BATCH;
	bool got = false;
	while (n-- > 0) {
		void *item = weft__deque_steal(victim);
		if (item == WEFT__DEQUE_EMPTY || item == WEFT__DEQUE_ABORT)
			break;
		weft__queue_push_local(w, item);
		weft__count(&w->c.steals);	/* a coroutine taken, as the first */
		got = true;
	}
	if (got)
		weft__idle_notify();
}

/*
 * A victim's runnext coroutine is what its running coroutine just woke or
 * spawned, and the victim runs it next, as soon as the current one parks.
 * Stealing it moves a ping-pong pair across cores at every exchange.  So a
 * thief leaves it alone until its last pass, and then gives the victim
 * RUNNEXT_GRACE_NS first (Go's runqgrab: usleep(3) on the last of 4
 * passes).  Unlike Go, it takes the slot only if the victim dispatched
 * nothing meanwhile: a victim that did has taken the coroutine (the owner
 * takes the slot before anything else), and what the slot holds now is
 * fresh work it will run as soon; stealing that splits a ping-pong pair
 * over two cores at every exchange.  A victim that did not is stuck, in one coroutine or
 * between two, and its slot is taken.
 */

/* Sleeps rather than spins: the thief still counts as a spinner, so the
 * victim's wakes cost it no syscall, and its CPU is not burnt meanwhile
 * (the kernel's timer slack stretches the sleep, as it does Go's). */
static void runnext_grace(void)
{
	struct timespec ts = { .tv_nsec = RUNNEXT_GRACE_NS };
	nanosleep(&ts, NULL);
}

/* v's deque's top, else its ready FIFO's head, or NULL. */
static struct weft_co *steal_queued(struct weft__worker *v)
{
	struct weft_co *co = weft__deque_steal_retry(&v->deque);
	return co ? co : weft__queue_pop(&v->ready, true);
}

/* The CAS makes the thief's take exclusive against the owner's swap and
 * other thieves.  ABA is harmless: the pointer it empties is a coroutine
 * that is in the slot, runnable, at the moment of the CAS, and the thief
 * reads nothing through it before.  What v queued during the grace is
 * taken first, with a batch (steal_more): a producer that keeps its slot
 * full (a spawn loop) pushes the one it displaces to its deque, so the
 * grace is paid once for those, not once per slot.  A grace that saw v
 * dispatch nothing marks v (graced) until v dispatches again, for the
 * last spinner's wake (idle.c).  Every thief still naps: the nap is also
 * what spaces a spinner's looks, and thieves that took a graced slot at
 * once looked again at once, several steal attempts per stolen coroutine
 * behind a spawning coroutine at 8 workers
 * (sched::idle_workers_try_few_steals). */
static struct weft_co *steal_runnext(struct weft__worker *v, bool last, bool *left_alone)
{
	if (!at_load_ptr((void **)&v->runnext))
		return NULL;
	if (!last) {
		*left_alone = true;
		return NULL;
	}
	uint64_t dispatched = at_load_64(&v->c.dispatches);
	runnext_grace();
	struct weft_co *co = steal_queued(v);
	if (co)
		return co;
	if (at_load_64(&v->c.dispatches) != dispatched) {
		*left_alone = true;
		return NULL;
	}
	at_store_64(&v->graced, dispatched + 1);
	co = at_load_ptr((void **)&v->runnext);
	return co && at_cas_ptr((void **)&v->runnext, co, NULL) ? co : NULL;
}

/* One item from v (its deque's top, else its ready FIFO, else its runnext
 * slot), or NULL; *left_alone is set when v's runnext was left to v. */
static struct weft_co *steal_one(struct weft__worker *v, bool last, bool *left_alone)
{
	struct weft_co *co = steal_queued(v);
	return co ? co : steal_runnext(v, last, left_alone);
}

/* Work from another worker or the injection queue, or NULL; *busy is set
 * when some victim had work that was left to it (see above), so the thief
 * keeps spinning rather than park. */
struct weft_co *weft__steal_work(struct weft__worker *w, bool *busy)
{
	unsigned n = weft__rt.nworkers;
	bool left_alone = false;
	for (int round = 0; round < STEAL_ROUNDS; round++) {
		unsigned start = weft__worker_rand(w) % n;
		for (unsigned i = 0; i < n; i++) {
			struct weft__worker *v = &weft__rt.workers[(start + i) % n];
			if (v == w)
				continue;
			weft__count(&w->c.steal_attempts);
			struct weft_co *co = steal_one(v, round == STEAL_ROUNDS - 1, &left_alone);
			if (co) {
				weft__count(&w->c.steals);
				steal_more(w, &v->deque);
				return co;
			}
		}
		struct weft_co *co = weft__queue_inject_pop();
		if (co)
			return co;
		at_pause();
	}
	*busy = left_alone;
	return NULL;
}
