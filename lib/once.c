/* SPDX-License-Identifier: MIT */
/*
 * once.c — weft_once_run: a function run exactly once, its concurrent
 * callers parked until it has returned.
 *
 * weft_once is one word of the caller's (WEFT_ONCE_INIT: 0), so it cannot
 * hold a queue.  The waiters park in one of a fixed table of wait queues,
 * chosen by the word's address (the parking-lot idea of WebKit and Rust's
 * parking_lot): the state word says RUNNING, then DONE, with a WAITERS bit
 * set under the bucket's lock by the first caller that queues.  The runner
 * swaps in DONE after fn returned and, only if WAITERS was set, claims every
 * waiter of the bucket under its lock and wakes them after its release.
 * Its waiters' nodes carry the word's address, and it claims only those:
 * a waiter claimed so knows the word is DONE and never reads it again (its
 * runner may have freed it), and waiters of other words that share the
 * bucket stay queued.  A waiter checks the word under
 * the bucket's lock before it queues, and the runner takes that lock after
 * its swap, so no wake is lost.  The runner's swap is its last access to
 * the word, and the buckets are static: a caller that returned may free the
 * word at once.
 */
#include <errno.h>
#include <stdint.h>

#include "atomic.h"
#include "coro.h"
#include "errors.h"
#include "waitq.h"
#include "weft.h"

enum { RUNNING = 1, WAITERS = 2, DONE = 4 };
enum { BUCKET_BITS = 6 };

static struct bucket {
	struct weft__lock lock;
	struct weft__waitq q;
} __attribute__((aligned(64))) buckets[1u << BUCKET_BITS];

static struct bucket *bucket_of(const weft_once *o)
{
	uint64_t h = (uint64_t)(uintptr_t)o * 0x9e3779b97f4a7c15ull;	/* Fibonacci hashing */
	return &buckets[h >> (64 - BUCKET_BITS)];
}

/* Parks until o is DONE: 0, or ECANCELED. */
static int wait_done(weft_once *o)
{
	struct bucket *b = bucket_of(o);
	for (;;) {
		weft__lock_acquire(&b->lock);
		unsigned st = at_load_uint(&o->state);
		if (st == DONE) {
			weft__lock_release(&b->lock);
			return 0;
		}
		if (!(st & WAITERS) && !at_cas_uint(&o->state, st, st | WAITERS)) {
			weft__lock_release(&b->lock);	/* it was DONE meanwhile */
			continue;
		}
		/* claimed only once o is DONE (see the top) */
		struct weft__wait x;
		weft__wait_enqueue(&x, &b->q, o);
		return weft__wait_park(&x, &b->lock, &b->q, -1);
	}
}

int weft_once_run(weft_once *o, void (*fn)(void *), void *arg)
{
	if (!o || !fn)
		return weft__err_fail(EINVAL);
	unsigned st = at_load_uint(&o->state);
	if (st == DONE)
		return 0;
	if (weft__co_cancelled())
		return weft__err_fail(ECANCELED);
	if (st == 0 && at_cas_uint(&o->state, 0, RUNNING)) {
		fn(arg);
		if (at_swap_uint(&o->state, DONE) & WAITERS) {
			struct bucket *b = bucket_of(o);
			struct weft__wakes ws = { .head = NULL };
			weft__lock_acquire(&b->lock);
			weft__waitq_claim_all_of(&b->q, o, 0, &ws);
			weft__lock_release(&b->lock);
			weft__wakes_run(&ws);
		}
		return 0;
	}
	int r = wait_done(o);
	return r ? weft__err_fail(r) : 0;
}
