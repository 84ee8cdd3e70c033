/* SPDX-License-Identifier: MIT */
/*
 * queue.c — a worker's run queues and what it runs next: the runnext slot,
 * the deque's owner end, the ready FIFO of coroutines its loop woke, the
 * injection queue of plain threads' spawns and wakes, the yield FIFO, and
 * the fairness turns between them (worker.c's essay, "Finding work").
 */
#include "queue.h"

#include "atomic.h"
#include "clock.h"
#include "idle.h"
#include "invariant.h"
#include "loop.h"
#include "worker.h"

enum { GLOBAL_INTERVAL = 61 };	/* dispatches between fairness checks (Go's 61) */
static const int64_t SLICE_NS = 10 * 1000 * 1000;	/* Go's forcePreemptNS */
static const int64_t SLICE_MAX_NS = 1000 * 1000 * 1000;
static const int64_t INJECT_NS = 200 * 1000;		/* Tokio's global-queue target */
static const int64_t INJECT_MAX_NS = 1000 * 1000 * 1000;
/* A busy worker's fds wait at most this long for a harvest (plus the
 * coroutine it is running): long against one epoll_wait, so the harvests
 * cost a busy worker little (docs/bench.md, "Measurements behind the code":
 * poll interval). */
static const int64_t POLL_NS = 50 * 1000;

/* ------------------------------------------------------ locked FIFOs */

/* The FIFO's lock is taken only when `shared` (see ready_shared). */
static void fifo_push(struct weft__locked_fifo *q, struct weft_co *co, bool shared)
{
	if (shared)
		pthread_mutex_lock(&q->lock);
	WEFT__FIFO_PUSH(&q->q, co);
	at_store_64(&q->len, at_load_64(&q->len) + 1);
	if (shared)
		pthread_mutex_unlock(&q->lock);
}

static struct weft_co *fifo_pop(struct weft__locked_fifo *q, bool shared)
{
	if (at_load_64(&q->len) == 0)
		return NULL;
	if (shared)
		pthread_mutex_lock(&q->lock);
	struct weft_co *co;
	WEFT__FIFO_POP(&q->q, co);
	if (co)
		at_store_64(&q->len, at_load_64(&q->len) - 1);
	if (shared)
		pthread_mutex_unlock(&q->lock);
	return co;
}

static void inject_push(struct weft_co *co)
{
	fifo_push(&weft__rt.inject, co, true);
}

static struct weft_co *inject_pop(void)
{
	return fifo_pop(&weft__rt.inject, true);
}

/*
 * Whether w's ready FIFO needs its lock: thieves pop from it and the
 * monitor's harvests of a stuck loop push to it.  With one worker there are
 * neither (the monitor adopts no loop then: monitor.c), so only the owner
 * touches it, and the two mutex round trips per I/O wake are skipped.
 */
static bool ready_shared(struct weft__worker *w)
{
	WEFT_ASSERT(weft__rt.nworkers > 1 || weft__worker_self() == w);
	return weft__rt.nworkers > 1;
}

static struct weft_co *ready_pop(struct weft__worker *w)
{
	return fifo_pop(&w->ready, ready_shared(w));
}

/* For the thieves (steal.c): the same, out of line; the owner's own pops
 * above stay inlined into weft__queue_find. */
struct weft_co *weft__queue_fifo_pop(struct weft__locked_fifo *q, bool shared)
{
	return fifo_pop(q, shared);
}

struct weft_co *weft__queue_inject_pop(void)
{
	return inject_pop();
}

/* Onto w's deque; the injection queue when w is NULL or its deque cannot
 * grow. */
void weft__queue_push_local(struct weft__worker *w, struct weft_co *co)
{
	if (!w || weft__deque_push(&w->deque, co) != 0)
		inject_push(co);
}

/*
 * On a worker, co goes into its runnext slot, and the coroutine it displaces
 * (older work) to the bottom of the deque, which is then notified.  A lone
 * slot is not (after Tokio's lifo_slot): w runs co as soon as the current
 * coroutine leaves, and a thief would leave it alone anyway (steal_runnext),
 * so a wake would buy nothing but an eventfd write on w's side, at every
 * hand-off of a ping-pong whose other worker has gone to sleep
 * (docs/bench.md, "Measurements behind the code": lone runnext).  If w gets stuck in the current coroutine instead, the monitor
 * notifies for the slot (weft__worker_stuck).
 */
void weft__schedule(struct weft_co *co)
{
	struct weft__worker *w = weft__worker_self();
	if (!w) {
		inject_push(co);
		weft__idle_notify();
		return;
	}
	struct weft_co *older = at_swap_ptr((void **)&w->runnext, co);
	if (!older)
		return;
	weft__queue_push_local(w, older);
	if (weft__rt.nworkers > 1)
		weft__idle_notify();
}

void weft__worker_stuck(struct weft__worker *w)
{
	if (at_load_ptr((void **)&w->runnext))
		weft__idle_notify();
}

void weft__schedule_ready(struct weft_co *co, struct weft__worker *loop)
{
	fifo_push(&loop->ready, co, ready_shared(loop));
	if (weft__rt.nworkers > 1 || weft__worker_self() != loop)
		weft__idle_notify();
}

/* The owner's take, skipped without a fence when the deque is surely empty
 * (top only grows and only the owner moves bottom up). */
static struct weft_co *take_local(struct weft__worker *w)
{
	if (at_load_i64(&w->deque.top) >= w->deque.bottom)
		return NULL;
	return weft__deque_take(&w->deque);
}

/*
 * The oldest yielder, to run now that the deque is dry.  With several
 * workers the younger ones move into the deque (oldest on top of the bottom
 * end, so they keep their FIFO order) where idle workers can steal them.
 */
static struct weft_co *pop_yielder(struct weft__worker *w)
{
	struct weft_co *co;
	WEFT__FIFO_POP(&w->yielders, co);
	if (!co)
		return NULL;
	if (weft__rt.nworkers == 1 || WEFT__FIFO_EMPTY(&w->yielders))
		return co;
	struct weft_co *rev = NULL, *p;
	WEFT__FIFO_TAKE_ALL(&w->yielders, p);
	while (p) {
		struct weft_co *next = p->next;
		p->next = rev;
		rev = p;
		p = next;
	}
	for (p = rev; p; p = rev) {
		rev = p->next;
		weft__queue_push_local(w, p);
	}
	weft__idle_notify();
	return co;
}

/*
 * Fairness, checked every GLOBAL_INTERVAL dispatches against the clock:
 *   - the injection queue, and then the worker's ready FIFO (coroutines its
 *     loop woke), get a turn every inject interval: INJECT_NS at first
 *     (Tokio aims its global-queue interval at 200 us), doubling up to
 *     INJECT_MAX_NS with each turn taken while local work is still pending;
 *   - a worker that has dispatched only from its deque's bottom for a whole
 *     slice takes its own oldest item (a steal from itself).  The slice
 *     starts at SLICE_NS and doubles (up to SLICE_MAX_NS) with every such
 *     turn until the deque runs dry.
 * Counting dispatches alone would be wrong: taking older work every few
 * dispatches turns a depth-first fork-join tree breadth-first, and its live
 * set of stacks explodes (machine-floors.md).  The doubling stops the same
 * cascade in slow motion: in a tree whose fresh stacks take longer than a
 * slice to fault in, each turn would start another subtree of fresh stacks.
 */
static struct weft_co *fairness_turn(struct weft__worker *w)
{
	int64_t now = weft_now();
	struct weft_co *co;
	/* Not while the ready FIFO still holds coroutines: what a harvest
	 * brought would queue behind them, and the harvest when it runs dry
	 * costs them nothing; a busy server's turns made one extra epoll_wait
	 * every GLOBAL_INTERVAL messages. */
	weft__loop_service(w, now, now - w->last_poll >= POLL_NS && at_load_64(&w->ready.len) == 0);
	if (!w->slice_start) {	/* the deque ran dry since the last turn */
		w->slice_start = w->inject_turn = now;
		w->slice_len = SLICE_NS;
		w->inject_len = INJECT_NS;
		return NULL;
	}
	if (now - w->inject_turn >= w->inject_len) {
		w->inject_turn = now;
		if (w->inject_len < INJECT_MAX_NS)
			w->inject_len *= 2;
		if ((co = inject_pop())) {
			weft__count(&w->c.inject_pops);
			return co;
		}
		if ((co = ready_pop(w))) {
			weft__count(&w->c.ready_pops);
			return co;
		}
	}
	if (now - w->slice_start >= w->slice_len) {
		w->slice_start = now;
		if (w->slice_len < SLICE_MAX_NS)
			w->slice_len *= 2;
		if ((co = weft__deque_steal_retry(&w->deque)))
			return co;
	}
	return NULL;
}

/* The owner's take of its runnext slot: a swap, since thieves may CAS the
 * slot empty (steal_runnext); a plain load first skips it when empty. */
static struct weft_co *take_runnext(struct weft__worker *w)
{
	if (!at_load_ptr((void **)&w->runnext))
		return NULL;
	return at_swap_ptr((void **)&w->runnext, NULL);
}

/* Whether w's next dispatch is a fairness turn: every GLOBAL_INTERVAL-th. */
static bool turn_is_due(const struct weft__worker *w)
{
	return (w->tick + 1) % GLOBAL_INTERVAL == 0;
}

/* co, taken from w's LIFO end (runnext or the deque's bottom), counted. */
static struct weft_co *lifo_hit(struct weft__worker *w, struct weft_co *co)
{
	weft__count(&w->c.lifo_hits);
	return co;
}

/*
 * What a coroutine leaving w's CPU may switch to directly, skipping the
 * scheduler's context: w's runnext coroutine, the one weft__queue_find would pick
 * next, except at a fairness turn, which the scheduler takes.  It counts
 * as weft__queue_find's pick would (the tick, a LIFO hit).
 */
struct weft_co *weft__worker_successor(struct weft__worker *w)
{
	if (turn_is_due(w))
		return NULL;
	struct weft_co *co = take_runnext(w);
	if (!co)
		return NULL;
	w->tick++;
	return lifo_hit(w, co);
}

/* Runnext and the deque's bottom are the same LIFO end for the fairness
 * slice: only when both are dry does the slice restart. */
struct weft_co *weft__queue_find(struct weft__worker *w)
{
	struct weft_co *co;
	bool turn = turn_is_due(w);
	w->tick++;
	if (turn && (co = fairness_turn(w)))
		return co;
	if ((co = take_runnext(w)) || (co = take_local(w)))
		return lifo_hit(w, co);
	w->slice_start = 0;	/* restart the clocks at the next turn (no clock read here) */
	if ((co = ready_pop(w))) {
		weft__count(&w->c.ready_pops);
		return co;
	}
	if ((co = inject_pop())) {
		weft__count(&w->c.inject_pops);
		return co;
	}
	return pop_yielder(w);
}
