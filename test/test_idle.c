/* SPDX-License-Identifier: MIT */
/* Idle workers (idle.c), white-box: a worker refused by the spinner limit
 * does not loop on work it may not take. */
#include "harness.h"
#include <stdatomic.h>

#include "atomic.h"
#include "coro_test.h"
#include "idle.h"
#include "worker.h"

#define WORKERS 3
#define ROUNDS 2000

static atomic_uint outstanding;
static uint64_t retracts, children;

static void spin_ns(int64_t ns)
{
	int64_t end = weft_now() + ns;
	while (weft_now() < end)
		;
}

static void child(void *arg)
{
	(void)arg;
	spin_ns(2000);
	atomic_fetch_sub(&outstanding, 1);
}

static uint64_t sum_retracts(void)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < weft__rt.nworkers; i++)
		n += at_load_64(&weft__rt.workers[i].c.retracts);
	return n;
}

/* Fans out 1-6 children at a time (the last in the runnext slot, the
 * others on the deque) and stays busy: work in sight of the idle workers
 * that one spinner is to take, or the root's worker runs next. */
static void fanout_root(void *arg)
{
	(void)arg;
	uint64_t before = sum_retracts();
	for (int r = 0; r < ROUNDS; r++) {
		int kids = 1 + r % 6;
		for (int i = 0; i < kids; i++) {
			atomic_fetch_add(&outstanding, 1);
			weft_detach(weft_spawn(child, NULL));
			children++;
		}
		spin_ns(20000);
		while (atomic_load(&outstanding))
			weft_yield();
	}
	retracts = sum_retracts() - before;
}

/* Each retraction of a park re-check needs the spinners to have left the
 * work in sight to the one re-checking; a refused worker that retracts on
 * a spinner's work loops, at every fan-out, until the spinner steals it. */
Test(idle, a_refused_worker_sleeps_on_a_spinner_s_work, .timeout = 300)
{
	run(WORKERS, fanout_root, NULL);
	fprintf(stderr, "%llu park re-check retractions for %llu children\n",
		(unsigned long long)retracts, (unsigned long long)children);
	cr_assert_leq(retracts, 4 * children, "%llu retractions for %llu children",
		      (unsigned long long)retracts, (unsigned long long)children);
}

/* ------------------------------------------------------ the timer watch */

#define TICKERS 7	/* one per worker besides the one of main, parked in its joins */
#define TICKS 50
static const int64_t TICK_NS = 2 * MS;

static atomic_uint tickers_started;
static _Atomic int64_t grid;

/* Holds its worker until every ticker holds one, so their first deadlines
 * go into seven heaps; then sleeps to the same grid as the others. */
static void ticker(void *arg)
{
	(void)arg;
	if (atomic_fetch_add(&tickers_started, 1) + 1 == TICKERS)
		atomic_store(&grid, weft_now());
	while (!atomic_load(&grid))
		;
	for (int k = 1; k <= TICKS; k++)
		CHECK(weft_sleep(atomic_load(&grid) + k * TICK_NS) == 0);
}

static uint64_t watch_sleeps, watch_fired;

static void tickers_root(void *arg)
{
	(void)arg;
	weft_co *co[TICKERS];
	weft_stats before = stats_now();
	for (int i = 0; i < TICKERS; i++)
		co[i] = go(ticker, NULL);
	for (int i = 0; i < TICKERS; i++)
		join(co[i]);
	weft_stats after = stats_now();
	watch_sleeps = after.total.sleeps - before.total.sleeps;
	watch_fired = after.total.timers_fired - before.total.timers_fired;
}

/* Timers of the same instants spread over seven workers' heaps: one
 * worker sleeps for them all and fires them (the others sleep without a
 * timeout), so a batch of deadlines costs about one worker's sleep, not
 * one per heap. */
Test(idle, one_worker_sleeps_for_the_timers_of_all, .timeout = 300)
{
	run(TICKERS + 1, tickers_root, NULL);
	fprintf(stderr, "%llu worker sleeps for %llu timers fired\n",
		(unsigned long long)watch_sleeps, (unsigned long long)watch_fired);
	cr_assert_gt(watch_fired, 0);
	cr_assert_leq(2 * watch_sleeps, watch_fired, "%llu worker sleeps for %llu timers fired",
		      (unsigned long long)watch_sleeps, (unsigned long long)watch_fired);
}

#define RESCUE_ROUNDS 8

static atomic_bool sleeper_started, slept_out;

static void late_sleeper(void *arg)
{
	(void)arg;
	atomic_store(&sleeper_started, true);
	spin_ns(2 * MS);	/* the root's worker goes to sleep first */
	CHECK(weft_sleep(weft_now() + 30 * MS) == 0);
	atomic_store(&slept_out, true);
}

/* The root's worker goes to sleep first, takes the watch and sleeps until
 * the root's own deadline (5 ms); the sleeper's worker, going to sleep
 * after it with a later deadline (30 ms), sleeps untimed.  The root, woken
 * at 5 ms, spins without a dispatch until the sleeper has woken: the
 * watcher is awake and stuck, and only the monitor's rescue fires the
 * sleeper's timer. */
static void rescue_root(void *arg)
{
	(void)arg;
	for (int r = 0; r < RESCUE_ROUNDS; r++) {
		atomic_store(&sleeper_started, false);
		atomic_store(&slept_out, false);
		weft_co *s = go(late_sleeper, NULL);
		while (!atomic_load(&sleeper_started))
			;	/* no dispatch: another worker takes it (the monitor) */
		CHECK(weft_sleep(weft_now() + 5 * MS) == 0);
		int64_t give_up = weft_now() + slack(10000 * MS);
		while (!atomic_load(&slept_out) && weft_now() < give_up)
			;
		CHECK(atomic_load(&slept_out));	/* its deadline waited for our dispatch */
		join(s);
	}
}

/* The watcher, woken early and stuck in one coroutine, fires nothing: the
 * monitor fires the sleeper's deadline that passed (to the injection queue,
 * the sleeping worker notified). */
Test(idle, a_stuck_watcher_leaves_no_deadline_behind, .timeout = 300)
{
	run(2, rescue_root, NULL);
}

/* ------------------------------------------------------ the watch, attacked */

/* One deadline through the word's until: never earlier (a sleeper leaving
 * it to the watcher would see it due before the watcher wakes), at most one
 * unit later (0, the AWAKE value, is never an until: 0 ns goes to one unit),
 * or INT64_MAX where the units run out. */
static void check_until(int64_t ns)
{
	uint64_t until = weft__idle_watch_encode(ns);
	int64_t back = weft__idle_watch_decode(until);
	cr_assert_neq(until, 0, "%lld encodes as AWAKE", (long long)ns);
	cr_assert_geq(back, ns, "%lld decodes to %lld: early", (long long)ns, (long long)back);
	if (ns > INT64_MAX - 2047)
		cr_assert_eq(back, INT64_MAX, "%lld decodes to %lld", (long long)ns, (long long)back);
	else
		cr_assert_leq(back - ns, 2048, "%lld decodes to %lld", (long long)ns, (long long)back);
}

Test(idle, the_watch_word_rounds_a_deadline_up_and_saturates)
{
	check_until(0);
	check_until(1);
	check_until(2047);
	check_until(2048);
	for (int64_t d = 2047; d >= 0; d--)
		check_until(INT64_MAX - d);
	cr_assert_eq(weft__idle_watch_decode(weft__idle_watch_encode(INT64_MAX - 2047)), INT64_MAX - 2047);
}


static atomic_bool far_started;

static void far_sleeper(void *arg)
{
	(void)arg;
	atomic_store(&far_started, true);
	(void)weft_sleep(INT64_MAX - 1);	/* a legal deadline: "forever" */
}

/* Whether worker i sleeps in its loop holding the watch, sleeping until a
 * deadline (not AWAKE, not a scan under way). */
static bool sleeps_holding_watch(unsigned i)
{
	uint64_t x = at_load_64(&weft__rt.timer_watch);
	return at_load_uint(&weft__rt.workers[i].polling) && (x & 2047) == i + 1 && (x >> 11) != 0 &&
	       (x >> 11) != (UINT64_MAX >> 11);
}

/* The other worker's only deadline is INT64_MAX - 1: it takes the watch and
 * sleeps until it.  Then the root sleeps 10 ms on its own worker, which
 * finds a watcher sleeping until "later than 10 ms" and sleeps untimed: the
 * word's until, rounded up past INT64_MAX, decodes negative, so every
 * deadline counts as covered.  Both workers sleep untimed with a deadline
 * due; nothing wakes them (the monitor rescues only for an awake watcher). */
static void far_root(void *arg)
{
	(void)arg;
	atomic_store(&far_started, false);
	weft_co *far = go(far_sleeper, NULL);
	while (!atomic_load(&far_started))
		;	/* no dispatch: the other worker takes it (the monitor) */
	unsigned other = 1 - (unsigned)weft_worker_id();
	while (!sleeps_holding_watch(other))
		;	/* the state, not a duration */
	CHECK(weft_sleep(weft_now() + 10 * MS) == 0);	/* hangs without a fix */
	CHECK(weft_cancel(far) == 0);
	(void)weft_join(far);
}

Test(idle, a_watcher_sleeping_until_int64_max_minus_1_covers_no_one, .timeout = 60)
{
	run(2, far_root, NULL);
}

static int64_t watcher_until;

static void watcher_sleeper(void *arg)
{
	(void)arg;
	atomic_store(&far_started, true);
	(void)weft_sleep(watcher_until);
}

/* The other worker's only deadline is 10 s away: it takes the watch and
 * sleeps until then.  The root then sleeps 20 ms on its own worker, whose
 * deadline comes before the watcher's: it takes the watch over (scans,
 * sleeps until its own deadline) rather than sleep untimed and wait for
 * the watcher's.  Judged by the state: the root woke before the watcher's
 * deadline (nothing else fires it: the monitor rescues only for an awake
 * watcher). */
static void takeover_root(void *arg)
{
	(void)arg;
	atomic_store(&far_started, false);
	watcher_until = weft_now() + 10000 * MS;
	weft_co *far = go(watcher_sleeper, NULL);
	while (!atomic_load(&far_started))
		;	/* no dispatch: the other worker takes it (the monitor) */
	unsigned other = 1 - (unsigned)weft_worker_id();
	while (!sleeps_holding_watch(other))
		;	/* the state, not a duration */
	CHECK(weft_sleep(weft_now() + 20 * MS) == 0);
	CHECK(weft_now() < watcher_until);	/* woke for its own deadline */
	CHECK(weft_cancel(far) == 0);
	(void)weft_join(far);
}

Test(idle, a_sleeper_due_before_the_watcher_takes_the_watch_over, .timeout = 60)
{
	run(2, takeover_root, NULL);
}
