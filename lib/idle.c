/* SPDX-License-Identifier: MIT */
/*
 * idle.c — spinning, going idle and waking idle workers: the idle stack,
 * the spinner count and the Dekker handshake between a publisher of work
 * and a worker going to sleep (worker.c's essay, "Spinning and parking").
 */
#include "idle.h"

#include "atomic.h"
#include "clock.h"
#include "config.h"
#include "futex.h"
#include "invariant.h"
#include "loop.h"
#include "timer.h"
#include "worker.h"

/* ------------------------------------------------------ idle and waking */

/* Pops one idle worker and wakes it as a spinner; false if none is idle. */
static bool wake_idle_worker(void)
{
	struct weft__worker *w = NULL;
	pthread_mutex_lock(&weft__rt.idle_lock);
	unsigned n = at_load_uint(&weft__rt.nr_idle);
	WEFT__ASSERT(n <= weft__rt.nworkers);
	if (n > 0) {
		w = &weft__rt.workers[weft__rt.idle[n - 1]];
		WEFT__ASSERT(at_load_uint(&w->sleeping));	/* listed: announced itself */
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
void weft__idle_notify(void)
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
	WEFT__ASSERT(!at_load_uint(&w->sleeping));
	WEFT__ASSERT(n < weft__rt.nworkers);
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
		WEFT__ASSERT(at_load_uint(&w->sleeping));
		weft__rt.idle[i] = weft__rt.idle[n - 1];
		at_store_uint(&weft__rt.nr_idle, n - 1);
		at_store_uint(&w->sleeping, 0);
		found = true;
		break;
	}
	WEFT__ASSERT(found || !at_load_uint(&w->sleeping));	/* popped: woken */
	pthread_mutex_unlock(&weft__rt.idle_lock);
	return found;
}

/* Spinners are at most half the workers that are not idle, w counted
 * (Go's limit: 2 * nmspinning < gomaxprocs - npidle): work comes from the
 * busy ones, and with few of them busy, more thieves would only probe the
 * same few queues (or, with more workers than CPUs, take the CPUs the busy
 * ones need); with no other worker awake, w has nobody to steal from.
 * Leaving w out (one spinner fewer) made a worker back from a short
 * coroutine sleep while the spinner it had just woken was still on its
 * way: a sleep and a wake per item behind a slow producer
 * (docs/notes/2026-12-07-parked-switches.md).  A worker refused goes idle,
 * and its re-check there (loads only) covers what it did not look for,
 * unless a spinner is counted (must_look_again). */
bool weft__idle_may_spin(struct weft__worker *w)
{
	if (w->spinning)
		return true;
	unsigned n = weft__rt.nworkers;
	unsigned others = n - 1 - at_load_uint(&weft__rt.nr_idle);	/* w is not idle */
	if (others == 0 || 2 * at_load_uint(&weft__rt.nr_spinning) > others)
		return false;
	at_faa_uint(&weft__rt.nr_spinning, 1);
	w->spinning = true;
	return true;
}

/*
 * Spinning on before sleeping.  A sleep costs a round trip through the
 * kernel on both sides: the waker's eventfd write, the sleeper's return
 * from epoll_wait and its context switch.  Where work comes back within
 * microseconds (a lock's writer phase ends and hands it to a batch of
 * readers on the other worker), that round trip is the cost of the idle
 * period; Go avoids it by making yielded work visible to every P.  So the
 * last spinner, if its last idle period (from the first look that found
 * nothing to the next dispatch, slept or not) was shorter than SPIN_NS,
 * watches for work for up to SPIN_NS before it sleeps; one whose last idle
 * period was longer sleeps at once, so a worker that waits for timers
 * burns no CPU.  Nor does any worker spin on while fds are registered: a
 * server's load, sharing the CPUs, needs the cycles, and the sleep of the
 * last worker to go idle is how readiness is heard at once (loop.h).
 *
 * The watch is loads only (work_for), and a steal pass follows only once a
 * queue shows work: a pass per look would probe every victim, its fence
 * and its lines, however empty.  Only the last spinner watches: the others
 * go idle after their pass, so a coroutine published meanwhile draws one
 * thief, not a crowd that all but one leave empty-handed; and publishers
 * wake nobody while it watches (nr_spinning), since it sees their work.
 * When it gives up, its park re-checks every queue after it stops
 * counting as a spinner (idle_park), as any spinner's does: a publisher
 * that saw it spinning woke nobody (test/models/park.pml, BUG_WATCH_NO_RECHECK).
 */
static const int64_t SPIN_NS = 50 * 1000;

/* What w may run: any worker's stealable work, or its own pinned FIFO's. */
static bool work_for(struct weft__worker *w)
{
	return weft__idle_any_work() || at_load_64(&w->pinned.len) != 0;
}

bool weft__idle_spin_on(struct weft__worker *w)
{
	int64_t now = weft_now();
	if (!w->idle_since)
		w->idle_since = now;
	if (!w->spinning || !w->idle_short || weft__loop_nfds() != 0 ||
	    at_load_uint(&weft__rt.nr_spinning) != 1)
		return false;
	for (; now - w->idle_since < SPIN_NS; now = weft_now()) {
		if (work_for(w))
			return true;
		at_pause();
	}
	return false;
}

void weft__idle_ended(struct weft__worker *w)
{
	w->idle_short = weft_now() - w->idle_since < SPIN_NS;
	w->idle_since = 0;
}

/* Whether some queue holds work another worker may take: the injection
 * queue, a deque or a ready FIFO, and, with_runnext, a runnext slot.
 * Pinned FIFOs are left out: a worker that saw another's would spin on
 * work it may not take.  A pinned coroutine's worker is woken by its
 * eventfd (queue.c); at shutdown there is none (all have finished). */
static bool work_in_sight(bool with_runnext)
{
	if (at_load_64(&weft__rt.inject.len) != 0)
		return true;
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *v = &weft__rt.workers[i];
		if (weft__deque_size(&v->deque) > 0 || at_load_64(&v->ready.len) != 0 ||
		    (with_runnext && at_load_ptr((void **)&v->runnext)))
			return true;
	}
	return false;
}

bool weft__idle_any_work(void)
{
	return work_in_sight(true);
}

/*
 * Invariant (2): a spinner that found work.  The last one wakes another
 * idle worker if work is still in sight after it stopped counting (the
 * FAS, a full fence, then the loads: Dekker's pattern against a
 * publisher's push, fence and load of nr_spinning, so a publisher that
 * skipped its wake because this spinner counted has its work seen here).
 *
 * A runnext slot counts only when no thief has graced its owner in the
 * owner's current dispatch (steal.c: a thief that napped and saw the owner
 * dispatch nothing marks it until it dispatches again).  A graced owner that keeps its
 * slot filled is a producer in a long dispatch (a spawn loop): its next
 * spawn displaces the slot's coroutine to the deque, which notifies
 * (queue.c), and the spinners that come take the slot anyway.  Woken for
 * such a slot at every steal, a producer slower than its thieves (8
 * workers on 2 CPUs, spawns that fault in fresh stacks) made every steal
 * wake a sleeper: the thief ran its one coroutine, came back refused by
 * weft__idle_may_spin (the woken one spinning) and slept, the woken one
 * stole the next item and woke the next sleeper, a wake and a sleep per
 * item (docs/notes/2026-12-07-parked-switches.md).  An owner nobody graced
 * yet (a parallel-for's root that spawned its children and computes its
 * own share) would otherwise get no notify for its slot but the monitor's
 * stuck sample, a tick (1 ms or more) later: the woken thieves wake each
 * other down its children (test_idletax_adv, parallel_for_*;
 * test/models/stopwake.pml).  The loads are racy: a miss costs the wait
 * for the monitor, or one wake too many.
 */
static bool ungraced_slot_in_sight(void)
{
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *v = &weft__rt.workers[i];
		if (at_load_ptr((void **)&v->runnext) &&
		    at_load_64(&v->graced) != at_load_64(&v->c.dispatches) + 1)
			return true;
	}
	return false;
}

void weft__idle_stop_spinning(struct weft__worker *w)
{
	if (!w->spinning)
		return;
	w->spinning = false;
	/* nobody idle: nobody to wake, and one who goes idle later re-checks
	 * (idle_park), so the scan of every worker's queues is skipped */
	if (at_fas_uint(&weft__rt.nr_spinning, 1) == 1 && at_load_uint(&weft__rt.nr_idle) != 0 &&
	    (work_in_sight(false) || ungraced_slot_in_sight()))
		weft__idle_notify();
}

static void signal_quiesce(void)
{
	if (!at_load_uint(&weft__rt.draining))
		return;
	at_faa_uint((unsigned *)&weft__rt.quiesce, 1);
	weft__futex_wake(&weft__rt.quiesce, 1);
}

/* After idle_park's fence: whether w must look again instead of sleeping.
 * Stealable work seen while a spinner is counted is that spinner's to find:
 * the spinner takes it, or stops counting and then re-checks (its own park)
 * or, the last one and having found other work, notifies, which wakes an
 * idle worker (w is listed).  Looking again would only loop back here, w
 * refused by weft__idle_may_spin, on the idle lock, while the spinner is
 * about to steal what w saw or a busy worker runs its runnext.  Its own
 * pinned FIFO is w's alone.  The queues are loaded before nr_spinning. */
static bool must_look_again(struct weft__worker *w)
{
	if (at_load_uint(&weft__rt.stopping) || at_load_64(&w->pinned.len) != 0)
		return true;
	return weft__idle_any_work() && at_load_uint(&weft__rt.nr_spinning) == 0;
}

/* Returns when there may be work again (or the runtime is stopping). */
void weft__idle_park(struct weft__worker *w)
{
	announce_idle(w);
	if (w->spinning) {
		w->spinning = false;
		at_fas_uint(&weft__rt.nr_spinning, 1);
	}
	at_fence_store_load();
	signal_quiesce();
	if (must_look_again(w)) {
		weft__count(&w->c.retracts);
		if (!retract_idle(w))
			weft__loop_take_token(w);	/* a waker popped us: the token is ours */
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

/* ------------------------------------------------------ the timer watch */

/*
 * One timed sleeper (Go's: one M waits in netpoll for the earliest timer
 * of every P).  Were every worker to sleep until its own next deadline, a
 * load whose timers are spread over N heaps would wake N workers per
 * batch of deadlines, each for a few coroutines that one worker runs in
 * microseconds.  So one worker at a time, the watcher, sleeps until the
 * earliest deadline of every sleeping worker's heap, and when it wakes, or
 * at its fairness turns while awake, it fires their due timers onto its
 * own ready FIFO (what it cannot run soon it shares as any harvest,
 * loop.c's backlog).  The others sleep without a timeout unless their own
 * earliest deadline comes before the watcher's.
 *
 * weft__rt.timer_watch is one word: the watcher (index + 1, 0 none) and
 * until when it sleeps, in WATCH_SHIFT units rounded up, or NONE (it sleeps
 * with no deadline), AWAKE, or SCAN (its scan is under way: every sleeper
 * sleeps until its own deadline meanwhile).  A worker going to sleep
 * (weft__idle_sleep_until, after announce_idle's sleeping store and
 * idle_park's StoreLoad fence):
 *   - with no watcher, or one that is awake, or itself, or one that sleeps
 *     past w's own next deadline: CASes the word to (SCAN, itself), a full
 *     fence, then loads every sleeping worker's flag and next deadline, and
 *     CASes (SCAN, itself) to (earliest, itself): the timeout it sleeps
 *     with (the one it took the watch from wakes at its own timeout and
 *     finds it is no longer the watcher);
 *   - during another's scan: sleeps until its own next deadline;
 *   - else with no timeout: the watcher wakes before w's next deadline.
 * Dekker: a sleeper that read the word before a watcher's SCAN CAS had
 * stored its sleeping flag before that CAS, so the scan after it sees the
 * flag and its heap; one that read SCAN covers itself; one that read
 * `until` has nothing due before that watcher wakes, which then fires it,
 * or, awake, fires it at its turns or scans again when it sleeps, unless a
 * sleeper took the watch from it and scanned.  A watcher that wakes CASes
 * (until, itself) to (AWAKE, itself).  While it is awake, the monitor fires
 * a sleeper's deadlines that have waited RESCUE_NS (weft__idle_watch_rescue),
 * as it fires a stuck worker's: to the injection queue (queue.c), an idle
 * worker notified; an awake watcher stuck in one coroutine fires nothing.
 * test/models/timerwatch.pml.
 */
enum { WATCH_SHIFT = 11 };	/* the holder's bits: WEFT__CONFIG_WORKERS_MAX + 1 fits */
#define WATCH_HOLDER ((UINT64_C(1) << WATCH_SHIFT) - 1)
#define WATCH_AWAKE UINT64_C(0)
#define WATCH_SCAN (UINT64_MAX >> WATCH_SHIFT)
#define WATCH_NONE (WATCH_SCAN - 1)
_Static_assert(WEFT__CONFIG_WORKERS_MAX < WATCH_HOLDER, "a holder fits the watch word");

static uint64_t watch_word(uint64_t until, unsigned holder)
{
	return until << WATCH_SHIFT | holder;
}

static unsigned watch_holder(uint64_t x)
{
	return (unsigned)(x & WATCH_HOLDER);
}

static uint64_t watch_until(uint64_t x)
{
	return x >> WATCH_SHIFT;
}

/* A deadline (ns) in the word's units, rounded up: a sleeper that leaves a
 * timer to the watcher never has it due before the watcher wakes.  The
 * last 2047 ns below INT64_MAX round up to 2^52, past what decodes back. */
uint64_t weft__idle_watch_encode(int64_t ns)
{
	if (ns == INT64_MAX)
		return WATCH_NONE;
	if (ns <= 0)
		return 1;
	return ((uint64_t)ns + WATCH_HOLDER) >> WATCH_SHIFT;
}

/* Saturating: an until past INT64_MAX's units (NONE, or a deadline in the
 * last 2047 ns rounded up) is INT64_MAX, never a shift into the sign bit
 * (which would cover every sleeper's deadline: all would sleep untimed). */
int64_t weft__idle_watch_decode(uint64_t until)
{
	if (until > (uint64_t)INT64_MAX >> WATCH_SHIFT)
		return INT64_MAX;
	return (int64_t)(until << WATCH_SHIFT);
}

/* The earliest deadline of w's heap and of every sleeping worker's. */
static int64_t sleepers_next(struct weft__worker *w)
{
	int64_t next = weft__timers_next(&w->timers);
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *o = &weft__rt.workers[i];
		if (o == w || !at_load_uint(&o->sleeping))
			continue;
		int64_t t = weft__timers_next(&o->timers);
		if (t < next)
			next = t;
	}
	return next;
}

int64_t weft__idle_sleep_until(struct weft__worker *w)
{
	unsigned me = w->index + 1;
	int64_t own = weft__timers_next(&w->timers);
	for (;;) {
		uint64_t x = at_load_64(&weft__rt.timer_watch);
		unsigned h = watch_holder(x);
		if (h != 0 && h != me && watch_until(x) == WATCH_SCAN)
			return own;
		if (h != 0 && h != me && watch_until(x) != WATCH_AWAKE &&
		    own >= weft__idle_watch_decode(watch_until(x)))
			return INT64_MAX;
		/* a full fence: the scan's loads come after it */
		if (at_cas_64(&weft__rt.timer_watch, x, watch_word(WATCH_SCAN, me)))
			break;
	}
	int64_t next = sleepers_next(w);
	uint64_t until = weft__idle_watch_encode(next);
	at_cas_64(&weft__rt.timer_watch, watch_word(WATCH_SCAN, me), watch_word(until, me));
	return next;
}

void weft__idle_watch_woke(struct weft__worker *w)
{
	uint64_t x = at_load_64(&weft__rt.timer_watch);
	if (watch_holder(x) == w->index + 1 && watch_until(x) != WATCH_AWAKE)
		at_cas_64(&weft__rt.timer_watch, x, watch_word(WATCH_AWAKE, w->index + 1));
}

bool weft__idle_fire_watched(struct weft__worker *w, int64_t now)
{
	if (watch_holder(at_load_64(&weft__rt.timer_watch)) != w->index + 1)
		return false;
	bool woke = false;
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *o = &weft__rt.workers[i];
		if (o != w && at_load_uint(&o->sleeping))
			woke |= weft__timers_fire_to(&o->timers, now, w);
	}
	return woke;
}

/* A sleeper's deadline waits for an awake watcher's turns at most this
 * long before the monitor fires it: what a sleep's timeout, rounded up to
 * the millisecond, may add. */
static const int64_t RESCUE_NS = 1000 * 1000;

bool weft__idle_watch_rescue(int64_t now, int64_t *wake)
{
	uint64_t x = at_load_64(&weft__rt.timer_watch);
	if (watch_holder(x) == 0 || watch_until(x) != WATCH_AWAKE)
		return false;
	bool fired = false;
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *o = &weft__rt.workers[i];
		if (i + 1 == watch_holder(x) || !at_load_uint(&o->polling))
			continue;
		int64_t t = weft__timers_next(&o->timers);
		if (t == INT64_MAX)
			continue;
		if (t <= now - RESCUE_NS) {
			/* off a worker: to the injection queue, an idle worker
			 * notified (weft__schedule_ready), as a stuck worker's */
			fired |= weft__timers_fire(&o->timers, now);
		} else {
			/* saturated: a deadline near INT64_MAX (forever) */
			int64_t due = t > INT64_MAX - RESCUE_NS ? INT64_MAX : t + RESCUE_NS;
			if (due < *wake)
				*wake = due;
		}
	}
	return fired;
}
