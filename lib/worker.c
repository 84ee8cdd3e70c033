/* SPDX-License-Identifier: MIT */
/*
 * worker.c — the scheduler: workers, stealing, idling and waking.
 *
 * Design
 * ======
 * There is one worker thread per CPU.  A worker owns
 *   - a runnext slot and a Chase-Lev deque of runnable coroutines
 *     (deque.c).  What a coroutine spawns or wakes goes into the slot, and
 *     the coroutine it displaces to the deque's bottom; the owner takes the
 *     slot, then the bottom, so the newest runs next on the same worker
 *     while its lines are warm; thieves take the oldest from the top, and
 *     the slot last (steal_runnext).  The slot makes a hand-off two swaps
 *     (put, take) where the deque costs a StoreLoad fence on each side and
 *     a CAS on `top` for a last item: every take in a ping-pong.  Slot and
 *     bottom are one LIFO end: to keep it from starving older work, a
 *     worker that has dispatched only from it for a time slice (SLICE_NS)
 *     takes its own oldest item from the top (a steal from itself), and the
 *     injection queue gets a turn at least every INJECT_NS (see
 *     fairness_turn);
 *   - a FIFO of coroutines that yielded, touched by the owner alone.  When
 *     the deque runs dry the oldest yielder runs and the others move into the
 *     deque in FIFO order (only while another worker sleeps for want of
 *     work: pop_yielder), so a yielder runs after the other runnable
 *     coroutines of the worker, and yielders can be stolen once in the deque;
 *     what keeps refilling the other queues (a timer load refills the ready
 *     FIFO at every turn) holds it back only until the LIFO end as it stood
 *     at its yield has run (by count) and the next round of the FIFOs
 *     (fairness_turn);
 *   - an event loop (loop.h): its timer heap and an eventfd in an epoll
 *     instance of its own, beside the one epoll instance all workers share
 *     for the fds (the shared poller: any worker harvests it, and what a
 *     harvest wakes goes to the harvester's ready FIFO).  An idle worker
 *     sleeps in an epoll_wait: in the shared instance when every other
 *     worker sleeps too (it is then the one that hears readiness), else in
 *     its own, where its deadlines and wakes reach it.  With the worker
 *     poller its own instance holds the fds it registered, and it always
 *     sleeps there.  A busy worker
 *     harvests and fires its timers at its fairness turns (fds at most
 *     every POLL_NS, and only once what its last harvest woke has left its
 *     ready FIFO); the monitor thread (monitor.c) serves the timers and
 *     the fds of a worker stuck in one long coroutine.
 * Coroutines spawned from plain threads go to one global injection queue (a
 * mutex-protected FIFO, checked lock-free for emptiness).
 *
 * Coroutines woken by a worker's loop (readiness, deadlines) go to its
 * *ready FIFO* instead of the deque: I/O is served in the order it became
 * ready, where a LIFO would let fresh events overtake old ones forever under
 * load (an echo server's oldest connections starved that way).
 *
 * Finding work, in order: runnext, the local deque (LIFO, with the fairness
 * pops above), the ready FIFO, the injection queue, the yield FIFO, the
 * next batch of readiness if the worker's last harvest came back full (a
 * harvest takes one batch: weft__loop_harvest_more), then stealing: up to
 * STEAL_ROUNDS passes over all other workers in a random order, one item
 * per steal (deque first, else ready FIFO, else runnext), where a victim's
 * runnext is left to it until the last pass and a 3 us grace, and then
 * taken only if the victim dispatched nothing meanwhile (after Go's
 * runqgrab: steal_runnext); then it parks, unless it left work to a
 * victim: its sleep is an epoll_wait (see the event loop above), which
 * returns at once with whatever is ready and due (one system call where a
 * harvest without blocking first made two: after a short batch nothing is
 * left to harvest first).
 *
 * Spinning and parking (after Go's proc.go, "Worker thread parking")
 * ----------------------------------------------------------------------
 * A worker that found nothing locally becomes a *spinner* while it steals,
 * but only while spinners are at most half the workers that are not idle,
 * itself counted (Go's limit): more thieves than that only fight over the
 * same lines.  Only
 * the last spinner watches on for work before it sleeps (idle.c).  The
 * invariants are
 *   (1) when work is published and there is an idle worker, then either a
 *       spinner exists or an idle worker is woken (except for a coroutine
 *       alone in the publisher's runnext slot, which its worker runs next;
 *       the monitor notifies for it if the worker gets stuck); and
 *   (2) a spinner that stops spinning because it found work wakes another
 *       idle worker if it was the last spinner and work is still in sight
 *       after it stopped counting, since there may be more: a runnext slot
 *       only when no thief has graced its owner in its current dispatch
 *       (idle.c, weft__idle_stop_spinning).
 * Publishing work (weft__schedule):  push (a swap into a lone runnext
 * slot stops here, see (1)); StoreLoad fence; if nr_spinning is 0
 * and nr_idle > 0, pop one idle worker, count it as a spinner on its behalf
 * (so concurrent publishers do not wake a crowd) and write its eventfd.
 * Going idle (weft__idle_park):  push self on the idle stack (nr_idle++); then
 * stop spinning (nr_spinning--); StoreLoad fence; re-check every queue.  If
 * work appeared, take self off the idle stack again (or, if a waker already
 * took it, accept the wake) and go back to work; else sleep in epoll_wait.
 * The two StoreLoad fences form Dekker's pattern: either the publisher sees
 * the idle worker (or the spinner), or the worker's re-check sees the work.
 * A runnable coroutine is therefore never left in a queue while every worker
 * sleeps.
 *
 * Shutdown: runtime.c sets `draining` and waits until every coroutine has
 * finished (per-worker spawned/finished counters, see weft__workers_all_finished);
 * workers that go idle while draining bump a futex to let it re-check.  Then
 * `stopping` is set, every worker is woken and exits when it finds no work.
 */
#include "worker.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "invariant.h"
#include "atomic.h"
#include "clock.h"
#include "errors.h"
#include "fault.h"
#include "fifo.h"
#include "idle.h"
#include "futex.h"
#include "loop.h"
#include "overflow.h"
#include "park.h"
#include "sanitize.h"
#include "queue.h"
#include "steal.h"
#include "thread.h"
#include "uring.h"
#include "weft.h"

enum {
	DEQUE_INITIAL = 256,	/* slots; grows by doubling */
	GLOBAL_INTERVAL = 61,	/* dispatches between fairness checks (Go's 61) */
	ID_BLOCK = 4096,	/* coroutine ids a worker takes at a time */
};
static const int64_t SLICE_NS = 10 * 1000 * 1000;	/* Go's forcePreemptNS */
static const int64_t SLICE_MAX_NS = 1000 * 1000 * 1000;
static const int64_t INJECT_NS = 200 * 1000;		/* Tokio's global-queue target */
static const int64_t INJECT_MAX_NS = 1000 * 1000 * 1000;
static const int64_t READY_NS = 200 * 1000;		/* the ready FIFOs' round interval */
/* A busy worker's fds wait at most this long for a harvest (plus the
 * coroutine it is running): long against one epoll_wait, so the harvests
 * cost a busy worker little (docs/notes/2026-12-06-measurements-behind-the-code.md,
 * "poll interval"). */
static const int64_t POLL_NS = 50 * 1000;

struct weft__rt_state weft__rt = {
	.idle_lock = PTHREAD_MUTEX_INITIALIZER,
	.inject = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

/* initial-exec: one %fs-relative load, no __tls_get_addr call (the library
 * is meant to be linked, not dlopen'ed late; glibc's static TLS surplus
 * covers that case too). */
static __thread struct weft__worker *tls_worker __attribute__((tls_model("initial-exec")));
static uint64_t next_id_block = 1;	/* atomic: process-wide, never reset */

WEFT__ERR_OPAQUE struct weft__worker *weft__worker_self(void)
{
	__asm__ volatile("" ::: "memory");
	return tls_worker;
}

/* Here rather than in coro.c so that it reads the thread-local itself: one
 * opaque call, not two (it sits on every mutex lock and unlock). */
WEFT__ERR_OPAQUE WEFT__SANITIZE_OFF weft_co *weft_self(void)
{
	__asm__ volatile("" ::: "memory");
	struct weft__worker *w = tls_worker;
	return w ? w->current : NULL;
}

uint64_t weft__worker_next_id(struct weft__worker *w)
{
	if (!w)
		return at_faa_64(&next_id_block, 1);
	if (w->id_next == w->id_end) {
		w->id_next = at_faa_64(&next_id_block, ID_BLOCK);
		w->id_end = w->id_next + ID_BLOCK;
	}
	return w->id_next++;
}

/* ------------------------------------------------------ finding work */

/* xorshift64*: one step of the generator whose state is *x (never 0). */
static uint32_t xorshift(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return (uint32_t)((*x * 2685821657736338717ull) >> 32);
}

/* w's generator: thieves order their victims with it (steal.c). */
uint32_t weft__worker_rand(struct weft__worker *w)
{
	return xorshift(&w->rng);
}

uint32_t weft__worker_rand_any(void)
{
	static _Thread_local uint64_t thread_rng;
	struct weft__worker *w = weft__worker_self();
	if (w)
		return weft__worker_rand(w);
	if (!thread_rng)	/* seeded from the thread's own address */
		thread_rng = (uintptr_t)&thread_rng | 1;
	return xorshift(&thread_rng);
}

/* ------------------------------------------------------ finding work */

/* The owner's take, skipped without a fence when the deque is surely empty
 * (top only grows and only the owner moves bottom up).  It prefetches the
 * control block the next take returns, a line on a page of its own that
 * `enter` would miss on (a woken army's:
 * docs/notes/2026-12-06-measurements-behind-the-code.md, "the deque's prefetch");
 * only its address, since a thief may
 * take it and it may finish meanwhile. */
static struct weft_co *take_local(struct weft__worker *w)
{
	if (at_load_i64(&w->deque.top) >= w->deque.bottom)
		return NULL;
	struct weft_co *co = weft__deque_take(&w->deque);
	if (co)
		__builtin_prefetch(weft__deque_peek(&w->deque));
	return co;
}

/*
 * The oldest yielder, to run now that the deque is dry.  With several
 * workers, and one of them asleep for want of work, the younger ones move
 * into the deque (oldest on top of the bottom end, so they keep their FIFO
 * order) where it can steal them, and it is woken.  While every other
 * worker is busy or still spinning they stay here: a spinner that took the
 * holders of a contended lock between their turns only spread them over
 * two cores, each lock operation then crossing between them
 * (docs/notes/2026-12-06-measurements-behind-the-code.md,
 * "private yielders").  A spinner finds nothing for SPIN_NS at most, sleeps
 * (nr_idle), and the next pop here shares.
 */
static __attribute__((noinline)) void share_yielders(struct weft__worker *w);

static inline __attribute__((always_inline)) struct weft_co *pop_yielder(struct weft__worker *w)
{
	struct weft_co *co;
	WEFT__FIFO_POP(&w->yielders, co);
	if (!co)
		return NULL;
	at_store_64(&w->nyielders, w->nyielders - 1);
	if (weft__rt.nworkers > 1 && !WEFT__FIFO_EMPTY(&w->yielders) &&
	    at_load_uint(&weft__rt.nr_idle) != 0)
		share_yielders(w);
	return co;
}

/* pop_yielder's slow path: the younger yielders into the deque, and an
 * idle worker woken. */
static void share_yielders(struct weft__worker *w)
{
	struct weft_co *rev = NULL, *p;
	WEFT__FIFO_TAKE_ALL(&w->yielders, p);
	at_store_64(&w->nyielders, 0);
	while (p) {
		struct weft_co *next = p->next;
		p->next = rev;
		rev = p;
		p = next;
	}
	for (p = rev; p; p = rev) {
		rev = p->next;
		if (p->pinned)	/* locked to w (weft_lock_thread): not stealable */
			weft__queue_push(&w->pinned, p, true);
		else
			weft__queue_push_local(w, p);
	}
	weft__idle_notify();
}

/* The oldest coroutine w's loop woke. */
static struct weft_co *pop_ready(struct weft__worker *w)
{
	struct weft_co *co = weft__queue_pop_warm(&w->ready, weft__queue_ready_shared(w), true);
	if (co) {
		weft__count(&w->c.ready_pops);
		if (w->backlog_since && (w->tick & 7) == 0)	/* a clock read every 8th */
			weft__loop_backlog(w, weft_now());
		return co;
	}
	w->backlog_since = 0;
	return NULL;
}

/* The oldest coroutine w's loop woke, else the oldest locked to w. */
static struct weft_co *pop_fifos(struct weft__worker *w)
{
	struct weft_co *co = pop_ready(w);
	return co ? co : weft__queue_pop(&w->pinned, true);
}

/* The next pop of w's round, once one is under way (fairness_turn): the
 * ready FIFO's share, then the pinned FIFO's, then the yield FIFO's.  A
 * share ends early when its FIFO runs dry (thieves may have emptied the
 * ready FIFO, pop_yielder may have shared the yielders), and the yield
 * FIFO's at a yielder that is not due yet. */
static __attribute__((noinline)) struct weft_co *round_pop_slow(struct weft__worker *w)
{
	struct weft_co *co;
	if (w->ready_round) {
		co = pop_ready(w);
		w->ready_round = co ? w->ready_round - 1 : 0;
		if (co)
			return co;
	}
	if (w->pinned_round) {
		co = weft__queue_pop(&w->pinned, true);
		w->pinned_round = co ? w->pinned_round - 1 : 0;
		if (co)
			return co;
	}
	if (!w->yield_round)
		return NULL;
	co = w->yielders.head;	/* the oldest yielder, if it is due */
	if (!co || at_load_64(&w->c.dispatches) < co->yield_due) {
		w->yield_round = 0;	/* the next round looks again */
		return NULL;
	}
	w->yield_round--;
	return pop_yielder(w);
}

static inline struct weft_co *round_pop(struct weft__worker *w)
{
	if (!(w->ready_round | w->pinned_round | w->yield_round))
		return NULL;
	return round_pop_slow(w);
}

/*
 * Whether a fairness turn harvests its fds' poller: POLL_NS after the last
 * harvest, once what that harvest woke has left the ready FIFO.  While it
 * is still queued, what a harvest would bring would queue behind it, and
 * the harvest when the FIFO runs dry costs it nothing (a busy server's
 * turns made one extra epoll_wait every GLOBAL_INTERVAL messages).  What
 * timers woke does not hold a harvest back: deadlines that refill the FIFO
 * at every turn kept readiness unharvested for as long as they did.  So an
 * fd waits for POLL_NS or for the FIFO as it stood at the last harvest,
 * whichever is longer, then for the next turn.  (Thieves' pops are not
 * counted: the FIFO's running dry covers what they took.)
 */
static bool poll_is_due(struct weft__worker *w, int64_t now)
{
	if (now - w->last_poll < POLL_NS)
		return false;
	return at_load_64(&w->ready.len) == 0 || at_load_64(&w->c.ready_pops) >= w->poll_served;
}

/*
 * Fairness, checked every GLOBAL_INTERVAL dispatches against the clock (and
 * at the next one when the monitor asks: a due deadline, a stuck worker):
 *   - the worker's FIFOs (what its loop woke, what is locked to it, what
 *     yielded) get a *round* every READY_NS: as many pops of each as it
 *     held at the turn, in that order, come before the LIFO end again (so
 *     a coroutine woken behind n others waits for at most n of them and
 *     one interval of LIFO work, however fast the FIFOs before its own
 *     refill), and the next round starts only once this one is done.  The
 *     yield FIFO's share stops at a yielder that is not due yet
 *     (weft__worker_push_yielder): as many coroutines as its LIFO end held
 *     at its yield have not run yet, and it yielded to let them;
 *   - the injection queue gets a turn every inject interval: INJECT_NS at
 *     first (Tokio aims its global-queue interval at 200 us), doubling up
 *     to INJECT_MAX_NS with each turn taken while local work is still
 *     pending;
 *   - a worker that has dispatched only from its deque's bottom for a whole
 *     slice takes its own oldest item (a steal from itself).  The slice
 *     starts at SLICE_NS and doubles (up to SLICE_MAX_NS) with every such
 *     turn until the deque runs dry.
 * Counting dispatches alone would be wrong: taking older work every few
 * dispatches turns a depth-first fork-join tree breadth-first, and its live
 * set of stacks explodes (machine-floors.md).  The doubling stops the same
 * cascade in slow motion: in a tree whose fresh stacks take longer than a
 * slice to fault in, each turn would start another subtree of fresh stacks.
 * The ready rounds neither double nor stop at one pop: what a loop woke
 * already has its stack, and its wait is the latency of a timer or of
 * readiness, which a doubling interval would stretch without bound (one
 * pop per turn served a dozen of 40 expired timers in a second of spawn
 * chain; test_sched, woken_coroutines_run_beside_a_chain_of_spawns).
 */
static struct weft_co *fairness_turn(struct weft__worker *w)
{
	int64_t now = weft_now();
	struct weft_co *co;
	if (at_load_uint(&w->turn_asked))
		at_store_uint(&w->turn_asked, 0);
	weft__loop_service(w, now, poll_is_due(w, now));
	if (w->backlog_since)
		weft__loop_backlog(w, now);
	/* A round under way is finished first, so the LIFO end runs between
	 * rounds (renewing it whenever READY_NS had passed starved the LIFO
	 * end of a worker whose 61 dispatches outlast READY_NS). */
	if (!(w->ready_round | w->pinned_round | w->yield_round) &&
	    now - w->ready_turn >= READY_NS) {	/* with what the service woke */
		w->ready_turn = now;
		w->ready_round = at_load_64(&w->ready.len);
		w->pinned_round = at_load_64(&w->pinned.len);
		w->yield_round = w->nyielders;
	}
	if (!w->slice_start) {	/* the deque ran dry since the last turn */
		w->slice_start = w->inject_turn = now;
		w->slice_len = SLICE_NS;
		w->inject_len = INJECT_NS;
		return NULL;	/* find_local pops the round next */
	}
	if (now - w->inject_turn >= w->inject_len) {
		w->inject_turn = now;
		if (w->inject_len < INJECT_MAX_NS)
			w->inject_len *= 2;
		if ((co = weft__queue_inject_pop())) {
			weft__count(&w->c.inject_pops);
			return co;
		}
	}
	if ((co = round_pop(w)))
		return co;
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

/* Whether w's next dispatch is a fairness turn: every GLOBAL_INTERVAL-th,
 * or the next one once the monitor has asked (weft__worker_ask_turn). */
static bool turn_is_due(struct weft__worker *w)
{
	return (w->tick + 1) % GLOBAL_INTERVAL == 0 || at_load_uint(&w->turn_asked);
}

void weft__worker_ask_turn(struct weft__worker *w)
{
	if (!at_load_uint(&w->turn_asked))
		at_store_uint(&w->turn_asked, 1);
}

struct weft__worker *weft__worker_budget_spent(struct weft__worker *w)
{
	weft__worker_ask_turn(w);	/* due timers and a harvest first */
	weft_yield();
	/* The caller is the first call of its new dispatch: what it spends by
	 * bytes counts there, not in a count the next call would reset. */
	w = weft__worker_self();
	w->budget_dispatch = at_load_64(&w->c.dispatches);
	w->budget_calls = 1;
	return w;
}

/* co, taken from w's LIFO end (runnext or the deque's bottom), counted. */
static struct weft_co *lifo_hit(struct weft__worker *w, struct weft_co *co)
{
	weft__count(&w->c.lifo_hits);
	return co;
}

/* w's next coroutine between fairness turns: the round under way,
 * the LIFO end, the ready FIFOs, the injection queue, the oldest yielder.
 * Runnext and the deque's bottom are the same LIFO end for the fairness
 * slice: only when both are dry does the slice restart. */
static struct weft_co *pick(struct weft__worker *w)
{
	struct weft_co *co;
	if ((co = round_pop(w)))
		return co;
	if ((co = take_runnext(w)) || (co = take_local(w)))
		return lifo_hit(w, co);
	w->slice_start = 0;	/* restart the clocks at the next turn (no clock read here) */
	if ((co = pop_fifos(w)))
		return co;
	if ((co = weft__queue_inject_pop())) {
		weft__count(&w->c.inject_pops);
		return co;
	}
	return pop_yielder(w);
}

/*
 * What a coroutine leaving w's CPU may switch to directly, skipping the
 * scheduler's context: the one find_local would pick next, except at a
 * fairness turn, which the scheduler takes.  It counts as find_local's
 * pick would (the tick).  So a server's message, a wake from the ready
 * FIFO, is one switch instead of two.
 */
struct weft_co *weft__worker_successor(struct weft__worker *w)
{
	if (turn_is_due(w))
		return NULL;
	struct weft_co *co = pick(w);
	if (co)
		w->tick++;
	return co;
}

static struct weft_co *find_local(struct weft__worker *w)
{
	struct weft_co *co;
	bool turn = turn_is_due(w);
	w->tick++;
	if (turn && (co = fairness_turn(w)))
		return co;
	return pick(w);
}

static void *worker_main(void *arg)
{
	struct weft__worker *w = arg;
	tls_worker = w;
	w->errno_slot = &errno;
	weft__overflow_thread_init(w);
	pthread_attr_t attr;
	void *lo = NULL;
	size_t size = 0;
	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		pthread_attr_getstack(&attr, &lo, &size);
		pthread_attr_destroy(&attr);
	}
	san_init(&w->sched_san, lo, size, false);
	for (;;) {
		struct weft_co *co = find_local(w);
		bool busy = false;
		if (!co)	/* ran dry: the pass's socket SQEs go in one enter */
			weft__uring_flush(w);
		if (!co && weft__loop_harvest_more(w))
			continue;
		if (!co && weft__idle_may_spin(w))
			co = weft__steal_work(w, &busy);
		/* nothing to run, but stacks to make for a burst of spawns: a
		 * job like a coroutine's, taken as one (stack.c, depot_hunger) */
		bool fill = !co && weft__stack_depot_hungry();
		if (co || fill) {
			if (w->spinning)	/* else no call at every dispatch */
				weft__idle_stop_spinning(w);
			if (w->idle_since)
				weft__idle_ended(w);
			if (co)
				weft__co_run(w, co);
			else
				weft__stack_depot_fill();
			continue;
		}
		/* a victim's runnext was left to it, or work may come soon */
		if (busy || weft__idle_spin_on(w))
			continue;
		if (at_load_uint(&weft__rt.stopping) && !weft__idle_any_work())
			break;
		weft__idle_park(w);
	}
	if (w->spinning)
		at_fas_uint(&weft__rt.nr_spinning, 1);
	weft__stack_cache_flush(&w->stacks);
	weft__overflow_thread_fini(w);
	tls_worker = NULL;
	return NULL;
}

/* ------------------------------------------------------ start and stop */

static int worker_init(struct weft__worker *w, unsigned index)
{
	memset(w, 0, sizeof *w);
	w->index = index;
	w->rng = 0x9e3779b97f4a7c15ull * (index + 1);
	w->epfd = w->evfd = -1;	/* slice_start 0: the first fairness turn sets the clocks */
	pthread_mutex_init(&w->ready.lock, NULL);
	pthread_mutex_init(&w->pinned.lock, NULL);
	int r = weft__deque_init(&w->deque, DEQUE_INITIAL);
	r = r < 0 ? r : weft__loop_init(w);
	return r < 0 ? r : weft__uring_ring_init(w);
}

static void worker_fini(struct weft__worker *w)
{
	weft__deque_fini(&w->deque);
	weft__uring_ring_fini(w);
	weft__loop_fini(w);
	pthread_mutex_destroy(&w->ready.lock);
	pthread_mutex_destroy(&w->pinned.lock);
}

static void pin_thread(pthread_t t, unsigned index)
{
	cpu_set_t mask;
	if (sched_getaffinity(0, sizeof mask, &mask) != 0)
		return;
	unsigned ncpu = (unsigned)CPU_COUNT(&mask), seen = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &mask) || seen++ != index % ncpu)
			continue;
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		pthread_setaffinity_np(t, sizeof one, &one);
		return;
	}
}

static void workers_free(unsigned initialised)
{
	for (unsigned i = 0; i < initialised; i++)
		worker_fini(&weft__rt.workers[i]);
	free(weft__rt.workers);
	free(weft__rt.idle);
	weft__rt.workers = NULL;
	weft__rt.idle = NULL;
	weft__loop_shared_fini();
}

int weft__workers_start(unsigned n, int pin)
{
	weft__rt.nworkers = n;
	weft__rt.nr_spinning = weft__rt.nr_idle = 0;
	weft__rt.timer_watch = 0;
	weft__rt.stopping = weft__rt.draining = 0;
	WEFT__FIFO_INIT(&weft__rt.inject.q);
	weft__rt.inject.len = weft__rt.ext_spawned = weft__rt.ext_wakeups = 0;
	weft__rt.workers = aligned_alloc(64, sizeof(struct weft__worker) * n);
	weft__rt.idle = weft__fault() ? NULL : calloc(n, sizeof *weft__rt.idle);
	if (!weft__rt.workers || !weft__rt.idle) {
		workers_free(0);
		return -ENOMEM;
	}
	int r = weft__loop_shared_init();
	if (r < 0) {
		workers_free(0);
		return r;
	}
	unsigned i;
	for (i = 0; i < n; i++) {
		r = worker_init(&weft__rt.workers[i], i);
		if (r < 0) {
			workers_free(i + 1);
			return r;
		}
	}
	int err = 0;
	for (i = 0; i < n && !err; i++) {
		err = weft__thread_start(&weft__rt.workers[i].thread, true, worker_main,
					 &weft__rt.workers[i]);
		if (!err && pin > 0)
			pin_thread(weft__rt.workers[i].thread, i);
	}
	if (err) {
		weft__rt.nworkers = i - 1;	/* the started ones */
		weft__workers_stop();
		workers_free(n);
	}
	return err;
}

void weft__workers_stop(void)
{
	at_store_uint(&weft__rt.stopping, 1);
	at_fence_store_load();
	for (unsigned i = 0; i < weft__rt.nworkers; i++)
		weft__loop_wake(&weft__rt.workers[i]);
	for (unsigned i = 0; i < weft__rt.nworkers; i++)
		pthread_join(weft__rt.workers[i].thread, NULL);
}

void weft__workers_free(void)
{
	workers_free(weft__rt.nworkers);
	weft__rt.nworkers = 0;
}

bool weft__workers_all_finished(void)
{
	/* finished first, then spawned: counters only grow, so equal sums
	 * mean that at the moment between the two passes nothing was alive. */
	uint64_t finished = 0, spawned = 0;
	for (unsigned i = 0; i < weft__rt.nworkers; i++)
		finished += at_load_64(&weft__rt.workers[i].c.finished);
	at_fence_acquire();
	spawned = at_load_64(&weft__rt.ext_spawned);
	for (unsigned i = 0; i < weft__rt.nworkers; i++)
		spawned += at_load_64(&weft__rt.workers[i].c.spawned);
	return finished == spawned;
}
