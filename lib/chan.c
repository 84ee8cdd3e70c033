/* SPDX-License-Identifier: MIT */
/*
 * chan.c — channels of fixed-size elements, bounded or rendezvous, and
 * select, on the wait queues of waitq.h.
 *
 * A channel is a ring of `cap` elements, a queue of parked receivers and a
 * queue of parked senders, under one lock.  Receivers park only when the
 * ring is empty, senders only when it is full (always, for capacity 0), so
 * an operation that finds a parked partner completes with it directly: the
 * element is copied between the two callers' buffers (or through the ring,
 * for a receiver that takes the oldest element and lets a parked sender's
 * element in behind it), under the lock, by whoever arrives second.  The
 * partner is *claimed* first (waitq.h), so an element is handed over at most
 * once, and never to a waiter whose deadline already gave up.
 *
 * Close (Go's semantics): senders get EPIPE; receivers drain what is
 * buffered, then get EPIPE.  Parked senders and receivers are woken with
 * EPIPE.
 *
 * select locks every distinct channel of its cases in address order (no
 * lock-order deadlock), tries the cases starting at a random one (so no
 * ready case starves), and otherwise parks one node per case, all sharing
 * one claim word: the first partner to claim it decides the case, the
 * others find it taken and skip it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "clock.h"
#include "coro.h"
#include "errors.h"
#include "fault.h"
#include "waitq.h"
#include "weft.h"
#include "worker.h"

struct weft_chan {
	struct weft__lock lock;
	size_t elem_size, cap;
	size_t head, count;	/* the ring: oldest element, number buffered */
	bool closed;
	struct weft__waitq recvq, sendq;
	unsigned char ring[];	/* elem_size * cap bytes, in the channel's allocation */
};

weft_chan *weft_chan_new(size_t elem_size, size_t capacity)
{
	if (capacity && elem_size > SIZE_MAX / capacity) {
		weft__err_fail(EINVAL);
		return NULL;
	}
	size_t ring_size = elem_size * capacity;
	weft_chan *ch = ring_size > SIZE_MAX - sizeof *ch || weft__fault() ? NULL : calloc(1, sizeof *ch + ring_size);
	if (!ch) {
		weft__err_fail(ENOMEM);
		return NULL;
	}
	ch->elem_size = elem_size;
	ch->cap = capacity;
	return ch;
}

void weft_chan_free(weft_chan *ch)
{
	free(ch);
}

/* ------------------------------------------------------ one operation */

/* (With elements of size 0 the ring is empty and every slot is its start,
 * which copy skips.) */
static unsigned char *slot(weft_chan *ch, size_t i)
{
	return ch->ring + ((ch->head + i) % ch->cap) * ch->elem_size;
}

/* Word-sized elements (the common case: ints, pointers) are copied inline
 * rather than through a memcpy call. */
static void copy(weft_chan *ch, void *to, const void *from)
{
	switch (ch->elem_size) {
	case 0:
		return;
	case sizeof(uint32_t):
		memcpy(to, from, sizeof(uint32_t));
		return;
	case sizeof(uint64_t):
		memcpy(to, from, sizeof(uint64_t));
		return;
	default:
		memcpy(to, from, ch->elem_size);
	}
}

enum { NOT_READY = -1 };

/* A select's wait: one node per case, all on one waiter and claim word. */
struct select_wait {
	struct weft__waiter waiter;
	unsigned claim;
	const weft_chan_case *cases;
	size_t n;
	struct weft__wnode nodes[WEFT_SELECT_MAX];
};

static struct weft__waitq *case_queue(const weft_chan_case *c)
{
	return c->op == WEFT_CHAN_SEND ? &c->ch->sendq : &c->ch->recvq;
}

/* Under ch's lock: claims q's oldest live node (waitq.h).  A select's
 * other nodes on ch go with it: once claimed, the select never touches ch
 * again (ch may be freed as soon as we return), so its claimer unlinks
 * them; the select's waiter waits for us (WAKING) before its stack goes. */
static struct weft__wnode *claim(weft_chan *ch, struct weft__waitq *q, struct weft__wakes *ws)
{
	struct weft__wnode *n = weft__waitq_claim(q, ws);
	if (!n || n->sole)
		return n;
	struct select_wait *sw = (struct select_wait *)((char *)(n - n->index) -
							 offsetof(struct select_wait, nodes));
	for (size_t i = 0; i < sw->n; i++)
		if (sw->cases[i].ch == ch)
			weft__waitq_unlink(case_queue(&sw->cases[i]), &sw->nodes[i]);
	return n;
}

/* Under ch's lock, for its close: claims every live node of q with EPIPE,
 * through claim, so that a select with other cases on ch leaves none of
 * them behind (its nodes on ch are not the claimer's to drop: the select
 * never relocks ch, and a dropper would wait for it there for good). */
static void claim_all(weft_chan *ch, struct weft__waitq *q, struct weft__wakes *ws)
{
	struct weft__wnode *n;
	while ((n = claim(ch, q, ws)))
		weft__wakes_add(ws, n, EPIPE);
}

int weft_chan_close(weft_chan *ch)
{
	if (!ch)
		return weft__err_fail(EINVAL);
	struct weft__wakes ws = { NULL };
	weft__lock_acquire(&ch->lock);
	bool was = ch->closed;
	ch->closed = true;
	/* both queues emptied: a select claimed here leaves no node on ch */
	claim_all(ch, &ch->recvq, &ws);
	claim_all(ch, &ch->sendq, &ws);
	weft__lock_release(&ch->lock);
	weft__wakes_run(&ws);
	return was ? weft__err_fail(EPIPE) : 0;
}

/* Under the lock: 0 sent, EPIPE, or NOT_READY.  A partner it completed
 * goes on ws, to be woken after the lock's release (waitq.h). */
static int try_send(weft_chan *ch, const void *elem, struct weft__wakes *ws)
{
	if (ch->closed)
		return EPIPE;
	struct weft__wnode *r = claim(ch, &ch->recvq, ws);
	if (r) {
		copy(ch, r->data, elem);
		weft__wakes_add(ws, r, 0);
		return 0;
	}
	if (ch->count == ch->cap)
		return NOT_READY;
	copy(ch, slot(ch, ch->count++), elem);
	return 0;
}

/* Under the lock: 0 received, EPIPE (closed and drained), or NOT_READY;
 * partners as for try_send. */
static int try_recv(weft_chan *ch, void *elem, struct weft__wakes *ws)
{
	struct weft__wnode *s;
	if (ch->count > 0) {
		copy(ch, elem, slot(ch, 0));
		ch->head = (ch->head + 1) % ch->cap;
		ch->count--;
		if ((s = claim(ch, &ch->sendq, ws))) {	/* room for one more */
			copy(ch, slot(ch, ch->count++), s->data);
			weft__wakes_add(ws, s, 0);
		}
		return 0;
	}
	if ((s = claim(ch, &ch->sendq, ws))) {	/* rendezvous */
		copy(ch, elem, s->data);
		weft__wakes_add(ws, s, 0);
		return 0;
	}
	return ch->closed ? EPIPE : NOT_READY;
}

static int chan_op(weft_chan *ch, int op, void *elem, int64_t deadline)
{
	if (weft__co_take_entry(ch && (elem || !ch->elem_size)) != 0)
		return -1;
	struct weft__wakes ws = { NULL };
	weft__lock_acquire(&ch->lock);
	int r = op == WEFT_CHAN_SEND ? try_send(ch, elem, &ws) : try_recv(ch, elem, &ws);
	if (r != NOT_READY) {
		weft__lock_release(&ch->lock);
		weft__wakes_run(&ws);
		return r ? weft__err_fail(r) : 0;
	}
	/* NOT_READY completed nobody, but may have dropped nodes whose waiters
	 * relock ch: we wait for them (waitq.h) once the park has released
	 * the lock, as cond_wait does for its mutex, and before we return. */
	struct weft__wait x;
	struct weft__waitq *q = op == WEFT_CHAN_SEND ? &ch->sendq : &ch->recvq;
	weft__wait_enqueue(&x, q, elem);
	r = weft__wait_park(&x, &ch->lock, q, deadline);
	weft__wakes_settle(&ws);
	return r ? weft__err_fail(r) : 0;
}

int weft_chan_send(weft_chan *ch, const void *elem, int64_t deadline)
{
	return chan_op(ch, WEFT_CHAN_SEND, (void *)elem, deadline);
}

int weft_chan_recv(weft_chan *ch, void *elem, int64_t deadline)
{
	return chan_op(ch, WEFT_CHAN_RECV, elem, deadline);
}

/* ------------------------------------------------------ select */

/* The distinct channels of the cases, in address order. */
static size_t lock_order(const weft_chan_case *cases, size_t n, weft_chan **out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		weft_chan *ch = cases[i].ch;
		size_t j = k;
		while (j > 0 && out[j - 1] > ch)
			j--;
		if (j > 0 && out[j - 1] == ch)
			continue;
		memmove(&out[j + 1], &out[j], (k - j) * sizeof *out);
		out[j] = ch;
		k++;
	}
	return k;
}

/* Lock and unlock every channel of chs but skip (NULL: none). */
static void lock_all(weft_chan **chs, size_t k, const weft_chan *skip)
{
	for (size_t i = 0; i < k; i++)
		if (chs[i] != skip)
			weft__lock_acquire(&chs[i]->lock);
}

static void unlock_all(weft_chan **chs, size_t k, const weft_chan *skip)
{
	for (size_t i = k; i-- > 0;)
		if (chs[i] != skip)
			weft__lock_release(&chs[i]->lock);
}

static int valid_cases(const weft_chan_case *cases, size_t n)
{
	if (!cases || n == 0 || n > WEFT_SELECT_MAX)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const weft_chan_case *c = &cases[i];
		if (!c->ch || (c->op != WEFT_CHAN_SEND && c->op != WEFT_CHAN_RECV) ||
		    (!c->elem && c->ch->elem_size))
			return -1;
	}
	return 0;
}

/* Under every lock: the first ready case from a random start, or -1. */
static long select_ready(weft_chan_case *cases, size_t n, struct weft__wakes *ws)
{
	size_t start = weft__worker_rand_any() % n;
	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % n;
		weft_chan_case *c = &cases[i];
		int r = c->op == WEFT_CHAN_SEND ? try_send(c->ch, c->elem, ws)
						: try_recv(c->ch, c->elem, ws);
		if (r != NOT_READY) {
			c->err = r;
			return (long)i;
		}
	}
	return -1;
}

/* Under every lock: parks a node per case, waits, settles, and returns
 * with every lock released.  Abandoned, it relocks every channel to unlink
 * its nodes (they live: it waits on each); claimed, every channel but the
 * claimer's, whose nodes the claimer unlinked (claim): that one may be
 * freed already. */
static long select_park(weft_chan_case *cases, size_t n, weft_chan **chs, size_t k,
			int64_t deadline, int *err)
{
	struct select_wait sw;	/* not zeroed: its nodes are written as used */
	sw.claim = 0;
	sw.cases = cases;
	sw.n = n;
	weft__waiter_init(&sw.waiter);
	for (size_t i = 0; i < n; i++) {
		sw.nodes[i] = (struct weft__wnode){ .waiter = &sw.waiter, .claim = &sw.claim,
						    .index = (unsigned)i, .data = cases[i].elem };
		weft__waitq_push(case_queue(&cases[i]), &sw.nodes[i]);
	}
	unlock_all(chs, k, NULL);	/* RMWs: the StoreLoad the wait needs */
	int r = weft__waiter_wait_fenced(&sw.waiter, deadline);
	bool claimed = (r & WEFT__PARK_WAKE_CLAIMED) || !weft__wnode_abandon(&sw.nodes[0]);
	size_t won = claimed ? weft__wnode_claimed_case(&sw.nodes[0], r) : n;
	const weft_chan *skip = claimed ? cases[won].ch : NULL;
	lock_all(chs, k, skip);
	/* skip's nodes: its claimer unlinked them (claim) */
	for (size_t i = 0; i < n; i++)
		if (cases[i].ch != skip)
			weft__wnode_retract(case_queue(&cases[i]), &sw.nodes[i]);
	unlock_all(chs, k, skip);
	for (size_t i = 0; i < n; i++)	/* every channel left: their droppers may return */
		if (cases[i].ch != skip)
			weft__wnode_left(&sw.nodes[i]);
	if (!claimed) {
		*err = r;
		return -1;
	}
	cases[won].err = sw.nodes[won].result;
	return (long)won;
}

int weft_chan_select(weft_chan_case *cases, size_t n, int64_t deadline)
{
	if (weft__co_take_entry(valid_cases(cases, n) == 0) != 0)
		return -1;
	weft_chan *chs[WEFT_SELECT_MAX];
	size_t k = lock_order(cases, n, chs);
	struct weft__wakes ws = { NULL };
	lock_all(chs, k, NULL);
	long i = select_ready(cases, n, &ws);
	int err = ETIMEDOUT;
	if (i >= 0 || weft__clock_deadline_passed(deadline)) {
		unlock_all(chs, k, NULL);
		weft__wakes_run(&ws);
	} else {	/* nothing was ready: ws holds only nodes dropped (chan_op) */
		i = select_park(cases, n, chs, k, deadline, &err);
		weft__wakes_settle(&ws);
	}
	return i < 0 ? weft__err_fail(err) : (int)i;
}
