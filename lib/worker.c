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
 *     deque in FIFO order, so a yielder runs only after every other runnable
 *     coroutine of the worker, and yielders can be stolen once in the deque;
 *   - an event loop (loop.h): an epoll instance with the fds it owns, its
 *     timer heap, and an eventfd; an idle worker sleeps in its own
 *     epoll_wait, where its fds' readiness and its deadlines wake it too.
 *     A busy worker harvests its loop and fires its timers at its fairness
 *     turns (fds at most every POLL_NS, and only once its ready FIFO has
 *     run dry); the monitor thread (monitor.c)
 *     serves the loop of a worker stuck in one long coroutine.
 * Coroutines spawned from plain threads go to one global injection queue (a
 * mutex-protected FIFO, checked lock-free for emptiness).
 *
 * Coroutines woken by a worker's loop (readiness, deadlines) go to its
 * *ready FIFO* instead of the deque: I/O is served in the order it became
 * ready, where a LIFO would let fresh events overtake old ones forever under
 * load (an echo server's oldest connections starved that way).
 *
 * Finding work, in order: runnext, the local deque (LIFO, with the fairness
 * pops above), the ready FIFO, the injection queue, the yield FIFO, then
 * stealing: up to STEAL_ROUNDS passes over all other workers in a random
 * order, one item per steal (deque first, else ready FIFO, else runnext),
 * where a victim's runnext is left to it until the last pass and a 3 us
 * grace, and then taken only if the victim dispatched nothing meanwhile
 * (after Go's runqgrab: steal_runnext); then it parks, unless it left
 * work to a victim: its sleep is an epoll_wait on its own loop, which
 * returns at once with whatever fds are ready and timers are due (one
 * system call where a harvest without blocking first made two).
 *
 * Spinning and parking (after Go's proc.go, "Worker thread parking")
 * ----------------------------------------------------------------------
 * A worker that found nothing locally becomes a *spinner* while it steals,
 * but only while spinners are fewer than half the workers: more thieves
 * than that only fight over the same lines.  The invariants are
 *   (1) when work is published and there is an idle worker, then either a
 *       spinner exists or an idle worker is woken (except for a coroutine
 *       alone in the publisher's runnext slot, which its worker runs next;
 *       the monitor notifies for it if the worker gets stuck); and
 *   (2) a spinner that stops spinning because it found work wakes another
 *       idle worker if it was the last spinner, since there may be more.
 * Publishing work (weft__schedule):  push (a swap into a lone runnext
 * slot stops here, see (1)); StoreLoad fence; if nr_spinning is 0
 * and nr_idle > 0, pop one idle worker, count it as a spinner on its behalf
 * (so concurrent publishers do not wake a crowd) and write its eventfd.
 * Going idle (park_worker):  push self on the idle stack (nr_idle++); then
 * stop spinning (nr_spinning--); StoreLoad fence; re-check every queue.  If
 * work appeared, take self off the idle stack again (or, if a waker already
 * took it, accept the wake) and go back to work; else sleep in epoll_wait.
 * The two StoreLoad fences form Dekker's pattern: either the publisher sees
 * the idle worker (or the spinner), or the worker's re-check sees the work.
 * A runnable coroutine is therefore never left in a queue while every worker
 * sleeps.
 *
 * Shutdown: runtime.c sets `draining` and waits until every coroutine has
 * finished (per-worker spawned/finished counters, see weft__all_finished);
 * workers that go idle while draining bump a futex to let it re-check.  Then
 * `stopping` is set, every worker is woken and exits when it finds no work.
 */
#include "worker.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "invariant.h"
#include "atomic.h"
#include "clock.h"
#include "errors.h"
#include "fault.h"
#include "fifo.h"
#include "futex.h"
#include "loop.h"
#include "overflow.h"
#include "park.h"
#include "thread.h"
#include "weft.h"

enum {
	DEQUE_INITIAL = 256,	/* slots; grows by doubling */
	GLOBAL_INTERVAL = 61,	/* dispatches between fairness checks (Go's 61) */
	STEAL_ROUNDS = 4,	/* passes over all victims before giving up (Go's 4) */
	STEAL_BATCH = 32,	/* extra items one steal may bring along */
	ID_BLOCK = 4096,	/* coroutine ids a worker takes at a time */
};
static const int64_t SLICE_NS = 10 * 1000 * 1000;	/* Go's forcePreemptNS */
static const int64_t SLICE_MAX_NS = 1000 * 1000 * 1000;
static const int64_t INJECT_NS = 200 * 1000;		/* Tokio's global-queue target */
static const int64_t INJECT_MAX_NS = 1000 * 1000 * 1000;
/* A busy worker's fds wait at most this long for a harvest (plus the
 * coroutine it is running): long against one epoll_wait, so the harvests
 * cost a busy worker little (docs/bench.md, "Measurements behind the code": poll interval). */
static const int64_t POLL_NS = 50 * 1000;
static const int64_t RUNNEXT_GRACE_NS = 3 * 1000;	/* see steal_one */

struct weft__runtime weft__rt = {
	.idle_lock = PTHREAD_MUTEX_INITIALIZER,
	.inject = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

/* initial-exec: one %fs-relative load, no __tls_get_addr call (the library
 * is meant to be linked, not dlopen'ed late; glibc's static TLS surplus
 * covers that case too). */
static __thread struct weft__worker *tls_worker __attribute__((tls_model("initial-exec")));
static uint64_t next_id_block = 1;	/* atomic: process-wide, never reset */

WEFT__ERRORS_OPAQUE struct weft__worker *weft__worker_self(void)
{
	__asm__ volatile("" ::: "memory");
	return tls_worker;
}

bool weft__runtime_accepting(void)
{
	return at_load_uint(&weft__rt.running) != 0;
}

uint64_t weft__next_id(struct weft__worker *w)
{
	if (!w)
		return at_faa_64(&next_id_block, 1);
	if (w->id_next == w->id_end) {
		w->id_next = at_faa_64(&next_id_block, ID_BLOCK);
		w->id_end = w->id_next + ID_BLOCK;
	}
	return w->id_next++;
}

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

/* ------------------------------------------------------ idle and waking */

/* Pops one idle worker and wakes it as a spinner; false if none is idle. */
static bool wake_idle_worker(void)
{
	struct weft__worker *w = NULL;
	pthread_mutex_lock(&weft__rt.idle_lock);
	unsigned n = at_load_uint(&weft__rt.nr_idle);
	WEFT_ASSERT(n <= weft__rt.nworkers);
	if (n > 0) {
		w = &weft__rt.workers[weft__rt.idle[n - 1]];
		WEFT_ASSERT(at_load_uint(&w->sleeping));	/* listed: announced itself */
		at_store_uint(&weft__rt.nr_idle, n - 1);
		at_store_uint(&w->sleeping, 0);
		at_store_uint(&w->woken_spinning, 1);
		at_faa_uint(&weft__rt.nr_spinning, 1);
	}
	pthread_mutex_unlock(&weft__rt.idle_lock);
	if (w)
		weft__loop_wake(w);
	return w != NULL;
}

/* Invariant (1), after publishing work: the StoreLoad fence of Dekker's
 * pattern, then wake an idle worker unless someone is spinning. */
static void notify_work(void)
{
	at_fence_store_load();
	if (at_load_uint(&weft__rt.nr_spinning) != 0 || at_load_uint(&weft__rt.nr_idle) == 0)
		return;
	wake_idle_worker();
}

static void announce_idle(struct weft__worker *w)
{
	pthread_mutex_lock(&weft__rt.idle_lock);
	unsigned n = at_load_uint(&weft__rt.nr_idle);
	/* sleeping is 1 exactly while w is listed: never listed twice, so
	 * the stack holds at most every worker. */
	WEFT_ASSERT(!at_load_uint(&w->sleeping));
	WEFT_ASSERT(n < weft__rt.nworkers);
	weft__rt.idle[n] = w->index;
	at_store_uint(&w->sleeping, 1);
	at_store_uint(&weft__rt.nr_idle, n + 1);
	pthread_mutex_unlock(&weft__rt.idle_lock);
}

/* Takes w off the idle stack; false if a waker already did (and woke it). */
static bool retract_idle(struct weft__worker *w)
{
	bool found = false;
	pthread_mutex_lock(&weft__rt.idle_lock);
	unsigned n = at_load_uint(&weft__rt.nr_idle);
	for (unsigned i = 0; i < n; i++) {
		if (weft__rt.idle[i] != w->index)
			continue;
		WEFT_ASSERT(at_load_uint(&w->sleeping));
		weft__rt.idle[i] = weft__rt.idle[n - 1];
		at_store_uint(&weft__rt.nr_idle, n - 1);
		at_store_uint(&w->sleeping, 0);
		found = true;
		break;
	}
	WEFT_ASSERT(found || !at_load_uint(&w->sleeping));	/* popped: woken */
	pthread_mutex_unlock(&weft__rt.idle_lock);
	return found;
}

/* Onto w's deque; the injection queue when w is NULL or its deque cannot
 * grow. */
static void push_local(struct weft__worker *w, struct weft_co *co)
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
		notify_work();
		return;
	}
	struct weft_co *older = at_swap_ptr((void **)&w->runnext, co);
	if (!older)
		return;
	push_local(w, older);
	if (weft__rt.nworkers > 1)
		notify_work();
}

void weft__worker_stuck(struct weft__worker *w)
{
	if (at_load_ptr((void **)&w->runnext))
		notify_work();
}

void weft__schedule_ready(struct weft_co *co, struct weft__worker *loop)
{
	fifo_push(&loop->ready, co, ready_shared(loop));
	if (weft__rt.nworkers > 1 || weft__worker_self() != loop)
		notify_work();
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

/* Victims in a random order, no shared state. */
static uint32_t rng_next(struct weft__worker *w)
{
	return xorshift(&w->rng);
}

uint32_t weft__rand(void)
{
	static _Thread_local uint64_t thread_rng;
	struct weft__worker *w = weft__worker_self();
	if (w)
		return rng_next(w);
	if (!thread_rng)	/* seeded from the thread's own address */
		thread_rng = (uintptr_t)&thread_rng | 1;
	return xorshift(&thread_rng);
}

/* The owner's take, skipped without a fence when the deque is surely empty
 * (top only grows and only the owner moves bottom up). */
static struct weft_co *take_local(struct weft__worker *w)
{
	if (at_load_i64(&w->deque.top) >= w->deque.bottom)
		return NULL;
	return weft__deque_take(&w->deque);
}

static struct weft_co *steal_from(struct weft__deque *d)
{
	for (;;) {
		void *item = weft__deque_steal(d);
		if (item != WEFT_DEQUE_ABORT)
			return item;
	}
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
		push_local(w, p);
	}
	notify_work();
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
		if ((co = steal_from(&w->deque)))
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
 * scheduler's context: w's runnext coroutine, the one find_local would pick
 * next, except at a fairness turn, which the scheduler takes.  It counts
 * as find_local's pick would (the tick, a LIFO hit).
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
static struct weft_co *find_local(struct weft__worker *w)
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
		if (item == WEFT_DEQUE_EMPTY || item == WEFT_DEQUE_ABORT)
			break;
		push_local(w, item);
		got = true;
	}
	if (got)
		notify_work();
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
 * fresh work it will run as soon; stealing that split a ping-pong pair
 * every ~70 us.  A victim that did not is stuck, in one coroutine or
 * between two, and its slot is taken.
 */

/* Sleeps rather than spins: the thief still counts as a spinner, so the
 * victim's wakes cost it no syscall, and its CPU is not burnt meanwhile
 * (the kernel's timer slack stretches the 3 us to ~50 us: Go's too). */
static void runnext_grace(void)
{
	struct timespec ts = { .tv_nsec = RUNNEXT_GRACE_NS };
	nanosleep(&ts, NULL);
}

/* The CAS makes the thief's take exclusive against the owner's swap and
 * other thieves.  ABA is harmless: the pointer it empties is a coroutine
 * that is in the slot, runnable, at the moment of the CAS, and the thief
 * reads nothing through it before. */
static struct weft_co *steal_runnext(struct weft__worker *v, bool last, bool *left_alone)
{
	if (!at_load_ptr((void **)&v->runnext))
		return NULL;
	uint64_t dispatched = at_load_64(&v->c.dispatches);
	if (last)
		runnext_grace();
	if (!last || at_load_64(&v->c.dispatches) != dispatched) {
		*left_alone = true;
		return NULL;
	}
	struct weft_co *co = at_load_ptr((void **)&v->runnext);
	return co && at_cas_ptr((void **)&v->runnext, co, NULL) ? co : NULL;
}

/* One item from v (its deque's top, else its ready FIFO, else its runnext
 * slot), or NULL; *left_alone is set when v's runnext was left to v. */
static struct weft_co *steal_one(struct weft__worker *v, bool last, bool *left_alone)
{
	struct weft_co *co = steal_from(&v->deque);
	if (co || (co = fifo_pop(&v->ready, true)))
		return co;
	return steal_runnext(v, last, left_alone);
}

/* Work from another worker or the injection queue, or NULL; *busy is set
 * when some victim had work that was left to it (see above), so the thief
 * keeps spinning rather than park. */
static struct weft_co *steal_work(struct weft__worker *w, bool *busy)
{
	unsigned n = weft__rt.nworkers;
	bool left_alone = false;
	for (int round = 0; round < STEAL_ROUNDS; round++) {
		unsigned start = rng_next(w) % n;
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
		struct weft_co *co = inject_pop();
		if (co)
			return co;
		at_pause();
	}
	*busy = left_alone;
	return NULL;
}

static bool may_spin(struct weft__worker *w)
{
	if (w->spinning)
		return true;
	unsigned n = weft__rt.nworkers;
	if (n < 2 || 2 * at_load_uint(&weft__rt.nr_spinning) >= n)
		return false;
	at_faa_uint(&weft__rt.nr_spinning, 1);
	w->spinning = true;
	return true;
}

/* Invariant (2): a spinner that found work. */
static void stop_spinning(struct weft__worker *w)
{
	if (!w->spinning)
		return;
	w->spinning = false;
	if (at_fas_uint(&weft__rt.nr_spinning, 1) == 1)
		notify_work();
}

static bool any_work(void)
{
	if (at_load_64(&weft__rt.inject.len) != 0)
		return true;
	for (unsigned i = 0; i < weft__rt.nworkers; i++)
		if (weft__deque_size(&weft__rt.workers[i].deque) > 0 ||
		    at_load_ptr((void **)&weft__rt.workers[i].runnext) ||
		    at_load_64(&weft__rt.workers[i].ready.len) != 0)
			return true;
	return false;
}

static void signal_quiesce(void)
{
	if (!at_load_uint(&weft__rt.draining))
		return;
	at_faa_uint((unsigned *)&weft__rt.quiesce, 1);
	weft__futex_wake(&weft__rt.quiesce, 1);
}

/* Returns when there may be work again (or the runtime is stopping). */
static void park_worker(struct weft__worker *w)
{
	announce_idle(w);
	if (w->spinning) {
		w->spinning = false;
		at_fas_uint(&weft__rt.nr_spinning, 1);
	}
	at_fence_store_load();
	signal_quiesce();
	if (any_work() || at_load_uint(&weft__rt.stopping)) {
		if (!retract_idle(w))
			weft__loop_take_token(w);	/* a waker popped us: its write is ours */
	} else {
		struct weft__loop_events got;
		weft__count(&w->c.sleeps);
		weft__loop_wait(w, &got);
		retract_idle(w);	/* a timer, fd or spurious wakeup left us listed */
		/* Off the idle stack first: what the loop wakes goes on our
		 * deque, and notifying must not pick ourselves. */
		weft__loop_woke(w, &got);
	}
	if (at_load_uint(&w->woken_spinning)) {
		at_store_uint(&w->woken_spinning, 0);
		w->spinning = true;	/* the waker counted us as a spinner */
	}
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
		if (!co && may_spin(w))
			co = steal_work(w, &busy);
		if (co) {
			stop_spinning(w);
			weft__co_run(w, co);
			continue;
		}
		if (busy)	/* a victim's runnext was left to it: spin on */
			continue;
		if (at_load_uint(&weft__rt.stopping) && !any_work())
			break;
		park_worker(w);
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
	if (weft__deque_init(&w->deque, DEQUE_INITIAL) != 0)
		return -1;
	return weft__loop_init(w);
}

static void worker_fini(struct weft__worker *w)
{
	weft__deque_fini(&w->deque);
	weft__loop_fini(w);
	pthread_mutex_destroy(&w->ready.lock);
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
}

int weft__workers_start(unsigned n, int pin)
{
	weft__rt.nworkers = n;
	weft__rt.nr_spinning = weft__rt.nr_idle = 0;
	weft__rt.stopping = weft__rt.draining = 0;
	WEFT__FIFO_INIT(&weft__rt.inject.q);
	weft__rt.inject.len = weft__rt.ext_spawned = weft__rt.ext_wakeups = 0;
	weft__rt.workers = aligned_alloc(64, sizeof(struct weft__worker) * n);
	weft__rt.idle = weft__fault() ? NULL : calloc(n, sizeof *weft__rt.idle);
	if (!weft__rt.workers || !weft__rt.idle) {
		workers_free(0);
		return weft__fail(ENOMEM);
	}
	unsigned i;
	for (i = 0; i < n; i++) {
		if (worker_init(&weft__rt.workers[i], i) != 0) {
			int e = errno;
			workers_free(i + 1);
			return weft__fail(e);
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
		return weft__fail(EAGAIN);
	}
	return 0;
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

bool weft__all_finished(void)
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
