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
#include "io.h"
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

/* A select's wait: one node per channel case, all on one waiter and claim
 * word, and its fd cases (at most one per direction: io.h), which park
 * the same waiter in their fds' slots or queues. */
struct select_wait {
	struct weft__waiter waiter;
	unsigned claim;
	weft_chan_case *cases;
	size_t n;
	size_t nfd;				/* fd cases */
	struct weft__io_case *fd[2];		/* in fds, in case order */
	size_t fd_case[2];			/* their cases' indices */
	struct weft__io_case fds[2];		/* by direction (FD_SLOT_IN, FD_SLOT_OUT) */
	struct weft__wnode nodes[WEFT_SELECT_MAX];	/* a channel case's, at its index */
};

_Static_assert(sizeof(void *) != 8 || sizeof(weft_chan_case) == 32,
	       "the fd field sits in what was padding (weft.h's ABI note)");

static bool is_fd_case(const weft_chan_case *c)
{
	return c->op == WEFT_SELECT_READABLE || c->op == WEFT_SELECT_WRITABLE;
}

/* An fd case's direction: FD_SLOT_IN or FD_SLOT_OUT. */
static int fd_slot(const weft_chan_case *c)
{
	return c->op == WEFT_SELECT_READABLE ? FD_SLOT_IN : FD_SLOT_OUT;
}

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
	struct weft__wakes ws = { .head = NULL };
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
	struct weft__wakes ws = { .head = NULL };
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
		if (is_fd_case(&cases[i]))
			continue;
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
	unsigned slots = 0;	/* the fd cases' directions */
	for (size_t i = 0; i < n; i++) {
		const weft_chan_case *c = &cases[i];
		if (is_fd_case(c)) {
			unsigned bit = 1u << fd_slot(c);
			if (c->ch || c->elem || (slots & bit))
				return -1;
			slots |= bit;
		} else if (!c->ch || (c->op != WEFT_CHAN_SEND && c->op != WEFT_CHAN_RECV) ||
			   (!c->elem && c->ch->elem_size)) {
			return -1;
		}
	}
	return 0;
}

/* Under every lock: the first ready case from a random start, or -1 (an
 * fd case is ready if its poll said so: choosing it performs nothing). */
static long select_ready(struct select_wait *sw, struct weft__wakes *ws)
{
	size_t n = sw->n, start = weft__worker_rand_any() % n;
	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % n;
		weft_chan_case *c = &sw->cases[i];
		int r;
		if (is_fd_case(c))
			r = sw->fds[fd_slot(c)].ready ? 0 : NOT_READY;
		else
			r = c->op == WEFT_CHAN_SEND ? try_send(c->ch, c->elem, ws)
						    : try_recv(c->ch, c->elem, ws);
		if (r != NOT_READY) {
			c->err = r;
			return (long)i;
		}
	}
	return -1;
}

/* select_park's answer when readiness woke it: poll again. */
enum { SELECT_AGAIN = -2 };

/* Whether the park result r is a channel claimer's wake (waitq.h), not an
 * fd queue's hand-over. */
static bool claimer_woke(int r)
{
	return (r & WEFT__PARK_WAKE_CLAIMED) && !(r & WEFT__PARK_WAKE_READY);
}

/* After the park: the channel side.  Returns the case a channel claimer
 * completed, or n.  A claimer's wake carries CLAIMED, and so does an fd
 * queue's hand-over of a turn (fdtable.c), with READY: that one is no
 * claim of ours, and the claim word decides.  Abandoned, it relocks every
 * channel to unlink its nodes (they live: it waits on each); claimed,
 * every channel but the claimer's, whose nodes the claimer unlinked
 * (claim): that one may be freed already. */
static size_t settle_channels(struct select_wait *sw, weft_chan **chs, size_t k, int r)
{
	struct weft__wnode handle = { .waiter = &sw->waiter, .claim = &sw->claim };
	bool by_claimer = claimer_woke(r);
	bool claimed = by_claimer || !weft__wnode_abandon(&handle);
	size_t won = claimed ? weft__wnode_claimed_case(&handle, by_claimer ? r : r & ~WEFT__PARK_WAKE_CLAIMED)
			     : sw->n;
	const weft_chan *skip = claimed ? sw->cases[won].ch : NULL;
	lock_all(chs, k, skip);
	for (size_t i = 0; i < sw->n; i++)
		if (!is_fd_case(&sw->cases[i]) && sw->cases[i].ch != skip)
			weft__wnode_retract(case_queue(&sw->cases[i]), &sw->nodes[i]);
	unlock_all(chs, k, skip);
	for (size_t i = 0; i < sw->n; i++)	/* every channel left: their droppers may return */
		if (!is_fd_case(&sw->cases[i]) && sw->cases[i].ch != skip)
			weft__wnode_left(&sw->nodes[i]);
	return won;
}

/* Under every lock: parks a node per channel case and the waiter in each
 * fd case's slot or queue, waits, settles, and returns with every lock
 * released: the case done, SELECT_AGAIN, or -1 with *err. */
static long select_park(struct select_wait *sw, weft_chan **chs, size_t k, int64_t deadline,
			int *err)
{
	weft_chan_case *cases = sw->cases;
	sw->claim = 0;
	weft__waiter_init(&sw->waiter, WEFT_PARK_SYNC);
	for (size_t i = 0; i < sw->n; i++) {
		if (is_fd_case(&cases[i]))
			continue;
		sw->nodes[i] = (struct weft__wnode){ .waiter = &sw->waiter, .claim = &sw->claim,
						     .index = (unsigned)i, .data = cases[i].elem };
		weft__waitq_push(case_queue(&cases[i]), &sw->nodes[i]);
	}
	unlock_all(chs, k, NULL);	/* RMWs: the StoreLoad the wait needs */
	int self = 0;
	for (size_t j = 0; j < sw->nfd; j++) {	/* RMWs too: slot CASes, qlock */
		int r = weft__io_case_park(sw->fd[j], &sw->waiter);
		self = self ? self : r;
	}
	if (self)	/* readiness nobody had, or a close: do not sleep */
		weft__waiter_wake(&sw->waiter, self);
	int r = weft__waiter_wait_fenced(&sw->waiter, deadline);
	size_t won = settle_channels(sw, chs, k, r);
	/* the fd cases see no channel claimer's flag (fdtable.h's results) */
	int fd_r = claimer_woke(r) ? r & ~WEFT__PARK_WAKE_CLAIMED : r;
	bool again = false;
	long closed = -1;
	for (size_t j = 0; j < sw->nfd; j++) {
		weft__io_case_settle(sw->fd[j], &sw->waiter, fd_r);
		if (closed < 0 && weft__io_case_closed(sw->fd[j]))
			closed = (long)sw->fd_case[j];
		again |= sw->fd[j]->ready;
	}
	if (won < sw->n) {	/* done, whatever else came */
		cases[won].err = sw->nodes[won].result;
		return (long)won;
	}
	if (closed >= 0 || again)	/* an interrupt that came too waits */
		weft__park_interrupt_unused(sw->waiter.co, r);
	if (closed >= 0) {
		cases[closed].err = ECANCELED;
		return closed;
	}
	if (again)
		return SELECT_AGAIN;
	*err = r;
	return -1;
}

/* Ends the fd cases that began; `won` the case reported (or -1). */
static void fd_cases_end(struct select_wait *sw, long won)
{
	for (size_t j = 0; j < sw->nfd; j++)
		weft__io_case_end(sw->fd[j], (long)sw->fd_case[j] == won);
}

/* Begins every fd case: 0, or -1 with errno (none left begun). */
static int fd_cases_begin(struct select_wait *sw, int64_t deadline)
{
	sw->nfd = 0;
	for (size_t i = 0; i < sw->n; i++) {
		const weft_chan_case *c = &sw->cases[i];
		if (!is_fd_case(c))
			continue;
		int d = fd_slot(c);
		struct weft__io_case *fc = &sw->fds[d];
		if (weft__io_case_begin(fc, c->fd, d == FD_SLOT_IN ? WEFT_IN : WEFT_OUT, deadline) != 0) {
			int e = weft__err_get();
			fd_cases_end(sw, -1);
			return weft__err_fail(e);
		}
		sw->fd_case[sw->nfd] = i;
		sw->fd[sw->nfd++] = fc;
	}
	return 0;
}

/* One round: the fd cases polled, the channels tried, else a park.  The
 * case done, SELECT_AGAIN, or -1 with *err. */
static long select_once(struct select_wait *sw, weft_chan **chs, size_t k, int64_t deadline,
			int *err)
{
	if (sw->nfd && (*err = -weft__io_cases_poll(sw->fd, sw->nfd)) != 0)
		return -1;
	struct weft__wakes ws = { .head = NULL };
	lock_all(chs, k, NULL);
	long i = select_ready(sw, &ws);
	if (i >= 0 || weft__clock_deadline_passed(deadline)) {
		unlock_all(chs, k, NULL);
		weft__wakes_run(&ws);
		*err = ETIMEDOUT;
		return i;
	}
	/* nothing was ready: ws holds only nodes dropped (chan_op) */
	long r = select_park(sw, chs, k, deadline, err);
	weft__wakes_settle(&ws);
	return r;
}

int weft_chan_select(weft_chan_case *cases, size_t n, int64_t deadline)
{
	if (weft__co_take_entry(valid_cases(cases, n) == 0) != 0)
		return -1;
	struct select_wait sw;	/* not zeroed: its parts are written as used */
	sw.cases = cases;
	sw.n = n;
	if (fd_cases_begin(&sw, deadline) != 0)
		return -1;
	weft_chan *chs[WEFT_SELECT_MAX];
	size_t k = lock_order(cases, n, chs);
	long i;
	int err = 0;
	while ((i = select_once(&sw, chs, k, deadline, &err)) == SELECT_AGAIN)
		;
	fd_cases_end(&sw, i);
	return i < 0 ? weft__err_fail(err) : (int)i;
}
