/* SPDX-License-Identifier: MIT */
/*
 * monitor.c — serving the loops of workers stuck in a long coroutine.
 *
 * A worker serves readiness and its deadlines only between coroutines.
 * While it runs one coroutine for a long time (a CPU-bound computation, a
 * blocking library call), its expired deadlines and what its ready FIFO
 * and runnext slot hold would wait for it, even with other workers idle,
 * and so would readiness if it was the only worker awake (the others sleep
 * deaf to fds then: loop.h).  The monitor thread prevents that:
 *
 *   - every TICK it samples each worker: a worker that is running a
 *     coroutine (current != NULL), is not asleep, and has not dispatched
 *     anything since the previous tick is *stuck*;
 *   - a stuck worker's due timers are fired (the woken coroutines go to
 *     the injection queue, weft__schedule_ready off a worker, which wakes
 *     an idle worker, and a busy one takes it at a fairness turn; on the
 *     stuck worker's ready FIFO only an idle worker would steal them), and
 *     an idle worker is notified for what its runnext
 *     slot and ready FIFO hold (weft__schedule_stuck: a lone slot and a
 *     slept harvest's batch notify nobody on their own);
 *   - shared poller: while a worker is stuck, the others take the shared
 *     epfd when they sleep, and if nobody holds it an idle worker is woken
 *     to (weft__loop_want_poller), so readiness wakes one at once;
 *   - worker poller: a stuck worker's fds are in its own epfd, which
 *     nobody else sleeps in, so at every period the monitor harvests it
 *     (weft__loop_rescue): readiness waits up to a period, and what it
 *     wakes goes to the injection queue as the timers' wakes do;
 *   - a stuck worker, and an awake one whose earliest deadline has
 *     passed, is asked to make its next dispatch a fairness turn
 *     (weft__worker_ask_turn): else a worker whose dispatches are long
 *     fires its timers only every GLOBAL_INTERVAL of them (worker.c), and
 *     what the monitor fired for it waits that long in the injection
 *     queue behind LIFO work;
 *   - while the timer watcher (idle.c) is awake (it may be stuck), a
 *     sleeping worker's deadlines that passed a millisecond ago are fired
 *     (weft__idle_watch_rescue) as a stuck worker's are: to the injection
 *     queue, an idle worker notified; the monitor's sleep is bounded by
 *     when the next one will have waited that long;
 *   - the monitor sleeps bounded by its period and by the stuck workers'
 *     earliest deadlines.
 * So a stuck worker costs one or two periods of latency to its deadlines
 * and to readiness, once.  The period is a TICK (1 ms) while samples find
 * something to do; after QUIET_SAMPLES in a row that found no worker stuck
 * and no deadline due, it doubles at each further quiet one, up to
 * BACKOFF_MAX (8 ms, and never beyond a tenth of the stall threshold), as
 * Go's sysmon backs off to 10 ms: a busy server whose coroutines switch
 * often pays ~125 monitor wakeups a second, not 1,000.  The first sample
 * that finds something returns the period to a TICK.
 *
 * The same samples detect stalls: a worker whose one dispatch has run for
 * WEFT_STALL_MS (measured from the first sample that saw it, so up to a period
 * late) gets one stderr line naming the coroutine's id and entry function,
 * once per stall, and its `stalls` counter goes up.  The worker publishes the
 * running coroutine's id and entry in its own fields at each dispatch, so the
 * monitor never reads a control block that may be freed under it.
 *
 * Every 10 s the monitor trims the stack depot (stack.c: the stacks nobody
 * needed for the whole period go back to jemalloc).
 *
 * When every worker sleeps in its loop, nothing can get stuck: the monitor
 * sleeps without a timeout (or until the next trim, while the depot holds
 * stacks), and the first worker to wake kicks it (Dekker:
 * the monitor announces `sleeping` then re-checks every worker's `polling`;
 * a worker clears `polling` then checks `sleeping`; both StoreLoad fenced).
 */
#include "monitor.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "atomic.h"
#include "clock.h"
#include "errors.h"
#include "eventfd.h"
#include "fault.h"
#include "idle.h"
#include "loop.h"
#include "queue.h"
#include "stack.h"
#include "thread.h"
#include "timer.h"
#include "weft.h"
#include "uring.h"
#include "worker.h"

static const int64_t TICK_NS = 1000 * 1000;
static const int64_t BACKOFF_MAX_NS = 8 * 1000 * 1000;
enum { QUIET_SAMPLES = 50 };	/* before the period starts doubling */
static const int64_t STACK_TRIM_NS = 10 * 1000 * 1000 * 1000ll;	/* stack.c's period */
enum { STACK_RESERVE = 256 };	/* depot magazines never trimmed (stack.c) */
enum { HUB_KICK = UINT32_MAX };

struct watch {
	uint64_t dispatches;	/* at the previous tick */
	int64_t since;		/* when that dispatch was first seen running */
	bool adopted;		/* stuck: the monitor fires its timers */
	bool reported;		/* that dispatch's stall is reported */
};

static struct {
	pthread_t thread;
	int hub, evfd;
	unsigned stop;		/* atomic */
	unsigned sleeping;	/* atomic: asleep without a tick */
	struct watch *watch;
	int64_t stall_ns;	/* 0: no stall reports */
	int64_t base_ns;	/* between samples; 0: none (sample_period) */
	int64_t period_ns;	/* between samples now: base_ns..max_ns */
	int64_t max_ns;		/* the longest period backing off reaches */
	unsigned quiet;		/* samples in a row that found nothing to do */
	uint64_t wakeups;	/* atomic, written by the monitor only */
	int64_t next_trim;	/* when the stack depot is trimmed next */
	bool stacks_cached;	/* the depot held more than its reserve */
	bool running;
} mon = { .hub = -1, .evfd = -1 };

void weft__monitor_worker_awake(void)
{
	at_fence_store_load();
	if (!at_load_uint(&mon.sleeping))
		return;
	weft__eventfd_signal(mon.evfd);
}

void weft__monitor_describe_entry(void *fn, char *buf, size_t size)
{
	Dl_info info;
	if (!dladdr(fn, &info) || !info.dli_fname)
		snprintf(buf, size, "%p", fn);
	else if (info.dli_sname)
		snprintf(buf, size, "%p (%s+%#tx in %s)", fn, info.dli_sname,
			 (char *)fn - (char *)info.dli_saddr, info.dli_fname);
	else
		snprintf(buf, size, "%p (%s+%#tx)", fn, info.dli_fname,
			 (char *)fn - (char *)info.dli_fbase);
}

static void report_stall(struct weft__worker *w, int64_t ran_ns)
{
	uint64_t id = at_load_64(&w->current_id);
	char entry[512];
	weft__monitor_describe_entry(at_load_ptr(&w->current_fn), entry, sizeof entry);
	/* The dispatch may have ended since the sample; then it was a stall of
	 * this length all the same. */
	fprintf(stderr, "weft: stall: worker %u has run coroutine %" PRIu64
		" (entry %s) for %" PRId64 " ms without switching\n",
		w->index, id, entry, ran_ns / 1000000);
	weft__count(&w->c.stalls);
}

/* Samples worker i: true if it is stuck (see above); reports a stall. */
static bool stuck(unsigned i, int64_t now)
{
	struct weft__worker *w = &weft__rt.workers[i];
	struct watch *m = &mon.watch[i];
	uint64_t d = at_load_64(&w->c.dispatches);
	bool running = at_load_ptr((void **)&w->current) != NULL;
	bool same = d == m->dispatches && running;
	m->dispatches = d;
	if (!same) {
		m->since = now;
		m->reported = false;
	} else if (mon.stall_ns && !m->reported && now - m->since >= mon.stall_ns) {
		m->reported = true;
		report_stall(w, now - m->since);
	}
	return same && !at_load_uint(&w->polling);
}

/*
 * How often the workers are sampled.  Every TICK_NS with several workers:
 * the others can run what a stuck worker's loop wakes.  With one worker
 * nobody could, so the samples only look for stalls: a tenth of the
 * threshold apart (at least TICK_NS), and none when reports are off.  A
 * busy single-worker server then pays 100 monitor wakeups per second at the
 * default threshold, not 1,000.
 */
static int64_t sample_period(unsigned nworkers, int64_t stall_ns)
{
	if (nworkers > 1)
		return TICK_NS;
	return stall_ns / 10 > TICK_NS ? stall_ns / 10 : stall_ns ? TICK_NS : 0;
}

/* The longest period: BACKOFF_MAX_NS, but no more than a tenth of the stall
 * threshold (so reports stay as timely) and no less than the base period
 * (with one worker, which then never backs off; none without samples). */
static int64_t max_period(int64_t base_ns, int64_t stall_ns)
{
	if (!base_ns)
		return 0;
	int64_t max = BACKOFF_MAX_NS;
	if (stall_ns && stall_ns / 10 < max)
		max = stall_ns / 10;
	return max > base_ns ? max : base_ns;
}

/* After a sample: back off while samples find nothing to do (see above). */
static void back_off(bool found)
{
	if (found) {
		mon.quiet = 0;
		mon.period_ns = mon.base_ns;
		return;
	}
	if (mon.quiet < QUIET_SAMPLES) {
		mon.quiet++;
		return;
	}
	mon.period_ns = 2 * mon.period_ns < mon.max_ns ? 2 * mon.period_ns : mon.max_ns;
}

/* Samples the workers (at most once per period) and fires the due timers of
 * the stuck ones; returns the hub timeout in ms, -1 if this sample found
 * every worker asleep. */
static int tick(void)
{
	static int64_t last_sample;
	int64_t now = weft_now(), period = mon.period_ns;
	if (now >= mon.next_trim) {
		mon.stacks_cached = weft__stack_pool_trim(STACK_RESERVE);
		mon.next_trim = now + STACK_TRIM_NS;
	}
	if (!period)	/* nothing to sample: only the trims wake us */
		return weft__clock_timeout_ms(mon.next_trim - now);
	int64_t next = now + period;
	bool sample = now - last_sample >= period, awake = false, found = false, any_stuck = false;
	if (sample)
		last_sample = now;
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *w = &weft__rt.workers[i];
		awake |= !at_load_uint(&w->polling);
		if (sample) {
			bool s = stuck(i, now) && weft__rt.nworkers > 1;
			mon.watch[i].adopted = s;
			if (s)
				weft__schedule_stuck(w);
			any_stuck |= s;
			bool due = !at_load_uint(&w->polling) && weft__timers_next(&w->timers) <= now;
			if (s || due) {
				weft__worker_ask_turn(w);
				found = true;
			}
		}
		if (!mon.watch[i].adopted)
			continue;
		weft__uring_flush(w);	/* what its parked readers queued */
		weft__loop_rescue(w);
		weft__timers_fire(&w->timers, now);
		int64_t t = weft__timers_next(&w->timers);
		if (t < next)
			next = t;
	}
	/* Deep sleep only from a sample: a kick, which comes when a worker
	 * wakes, must not put us straight back to sleep to be kicked again at
	 * its next wake (an eventfd write per wake of a busy worker); so kicks
	 * come at most once per period. */
	bool rescued = weft__idle_watch_rescue(now, &next);
	if (sample) {
		found |= rescued;
		weft__loop_want_poller(any_stuck);
		back_off(found);
	}
	if (!awake && sample)
		return -1;
	return weft__clock_timeout_ms(next - now);
}

/* Everyone asleep in its loop: sleep until a worker wakes (see above). */
static bool all_polling(void)
{
	for (unsigned i = 0; i < weft__rt.nworkers; i++)
		if (!at_load_uint(&weft__rt.workers[i].polling))
			return false;
	return true;
}

static int deep_sleep_timeout(void)
{
	at_store_uint(&mon.sleeping, 1);
	at_fence_store_load();
	if (all_polling() && !at_load_uint(&mon.stop)) {
		if (!mon.stacks_cached)
			return -1;
		int64_t left = mon.next_trim - weft_now();	/* kicked awake or not */
		return weft__clock_timeout_ms(left);
	}
	at_store_uint(&mon.sleeping, 0);
	return weft__clock_timeout_ms(mon.period_ns);
}

static void *monitor_main(void *arg)
{
	(void)arg;
	struct epoll_event ev[16];
	while (!at_load_uint(&mon.stop)) {
		int timeout = tick();
		if (timeout < 0)
			timeout = deep_sleep_timeout();
		int n = epoll_wait(mon.hub, ev, 16, timeout);
		at_store_uint(&mon.sleeping, 0);
		weft__count(&mon.wakeups);
		if (n > 0)	/* the hub holds the kick alone */
			weft__eventfd_drain(mon.evfd);
	}
	return NULL;
}

int weft__monitor_start(unsigned stall_ms)
{
	mon.stall_ns = (int64_t)stall_ms * 1000000;
	mon.base_ns = sample_period(weft__rt.nworkers, mon.stall_ns);
	mon.period_ns = mon.base_ns;
	mon.max_ns = max_period(mon.base_ns, mon.stall_ns);
	mon.quiet = 0;
	at_store_64(&mon.wakeups, 0);
	at_store_uint(&mon.stop, 0);
	at_store_uint(&mon.sleeping, 0);	/* the workers already read it */
	mon.next_trim = weft_now() + STACK_TRIM_NS;
	mon.stacks_cached = false;
	mon.watch = weft__fault() ? NULL : calloc(weft__rt.nworkers, sizeof *mon.watch);
	int err = mon.watch ? 0 : -ENOMEM;
	mon.hub = epoll_create1(EPOLL_CLOEXEC);
	if (!err && mon.hub < 0)
		err = -errno;
	mon.evfd = weft__eventfd_open();
	if (!err && mon.evfd < 0)
		err = mon.evfd;
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = HUB_KICK };
	if (!err && epoll_ctl(mon.hub, EPOLL_CTL_ADD, mon.evfd, &ev) != 0)
		err = -errno;
	if (!err)
		err = weft__thread_start(&mon.thread, false, monitor_main, NULL);
	mon.running = !err;
	if (err) {
		weft__monitor_stop();
		weft__monitor_fini();
	}
	return err;
}

uint64_t weft__monitor_wakeups(void)
{
	return at_load_64(&mon.wakeups);
}

void weft__monitor_stop(void)
{
	if (mon.running) {
		at_store_uint(&mon.stop, 1);
		weft__eventfd_signal(mon.evfd);
		pthread_join(mon.thread, NULL);
		mon.running = false;
	}
}

void weft__monitor_fini(void)
{
	if (mon.hub >= 0)
		close(mon.hub);
	if (mon.evfd >= 0)
		close(mon.evfd);
	mon.hub = mon.evfd = -1;
	free(mon.watch);
	mon.watch = NULL;
}
