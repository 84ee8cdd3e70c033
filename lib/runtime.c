/* SPDX-License-Identifier: MIT */
/*
 * runtime.c — weft_init, weft_shutdown, weft_main and the small queries.
 *
 * init: resolve the configuration, create the stack pool's arena, start the
 * workers and the monitor.  shutdown: wait until every coroutine has
 * finished (draining), print the stats if asked, stop accepting spawns,
 * stop the offload helpers, stop the monitor, stop and
 * join the workers, free the pool and the fd table.  shutdown_until: the
 * same drain until its deadline, then cancels what still runs (below).  A mutex
 * serialises init and shutdown against each other; nothing on a hot path
 * takes it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <pthread.h>
#include <time.h>

#include "atomic.h"
#include "config.h"
#include "coro.h"
#include "errors.h"
#include "fdtable.h"
#include "futex.h"
#include "loop.h"
#include "metrics.h"
#include "monitor.h"
#include "offload.h"
#include "overflow.h"
#include "stack.h"
#include "stats.h"
#include "uring.h"
#include "weft.h"
#include "worker.h"

static pthread_mutex_t lifecycle_lock = PTHREAD_MUTEX_INITIALIZER;
static bool started;	/* under lifecycle_lock */
static bool print_stats;	/* $WEFT_STATS=1 */

static int init_locked(const weft_config *cfg)
{
	if (started)
		return -EALREADY;
	struct weft__config_settings s;
	int r = weft__config_resolve(cfg, &s);
	if (r < 0)
		return r;
	if ((r = weft__uring_select(s.io, s.uring_sockets)) < 0)
		return r;
	weft__loop_select(s.poller);
	if ((r = weft__stack_pool_init(s.stack_size, s.stack_guards)) < 0)
		return r;
	weft__overflow_install();
	weft__offload_init(s.blocking_threads);
	print_stats = s.stats;
	weft__metrics_mask = s.sched_sample - 1;
	if ((r = weft__workers_start(s.workers, s.pin)) < 0) {
		weft__stack_pool_fini();
		return r;
	}
	if ((r = weft__monitor_start(s.stall_ms)) < 0) {
		weft__workers_stop();
		weft__stack_pool_fini();
		weft__workers_free();
		return r;
	}
	started = true;
	at_store_uint(&weft__rt.running, 1);
	return 0;
}

int weft_init(const weft_config *cfg)
{
	pthread_mutex_lock(&lifecycle_lock);
	int r = init_locked(cfg);
	pthread_mutex_unlock(&lifecycle_lock);
	return weft__err_result(r);
}

/* Waits until every coroutine has finished (true) or until deadline
 * (false; -1: none), calling sweep (if given) at once and then once per
 * tick at most (a round also ends whenever a worker goes idle). */
static bool wait_finished_until(int64_t deadline, void (*sweep)(void))
{
	at_store_uint(&weft__rt.draining, 1);
	at_fence_store_load();
	const int64_t tick = 10 * 1000 * 1000;
	int64_t swept = 0;
	for (bool first = true; !weft__workers_all_finished(); first = false) {
		if (sweep && (first || weft_now() - swept >= tick)) {
			sweep();
			swept = weft_now();
		}
		uint32_t seen = at_load_uint((unsigned *)&weft__rt.quiesce);
		if (weft__workers_all_finished())
			break;
		int64_t left = tick;
		if (deadline >= 0) {
			left = deadline - weft_now();
			if (left <= 0)
				return false;
			if (left > tick)
				left = tick;
		}
		/* Woken when a worker goes idle; the timeout is a safety net. */
		const struct timespec ts = { 0, (long)left };
		weft__futex_wait(&weft__rt.quiesce, seen, &ts);
	}
	return true;
}

/* With lifecycle_lock held and every coroutine finished. */
static void stop_locked(void)
{
	if (print_stats)
		weft__stats_print(stderr);
	at_store_uint(&weft__rt.running, 0);
	weft__offload_fini();
	weft__monitor_stop();
	weft__workers_stop();
	weft__monitor_fini();	/* after the workers: see monitor.h */
	weft__stack_pool_fini();
	weft__workers_free();
	weft__fdtable_fini();	/* registrations died with the loops */
	started = false;
}

/* Takes lifecycle_lock if the runtime runs and the caller is a plain
 * thread: 0, else -EDEADLK or -ESRCH. */
static int shutdown_begin(void)
{
	if (weft__worker_self())
		return -EDEADLK;
	pthread_mutex_lock(&lifecycle_lock);
	if (!started) {
		pthread_mutex_unlock(&lifecycle_lock);
		return -ESRCH;
	}
	return 0;
}

int weft_shutdown(void)
{
	int r = shutdown_begin();
	if (r < 0)
		return weft__err_result(r);
	wait_finished_until(-1, NULL);
	stop_locked();
	pthread_mutex_unlock(&lifecycle_lock);
	return 0;
}

static void cancel_one(struct weft_co *co, void *arg)
{
	(void)arg;
	weft_cancel(co);
}

/* Cancels every live coroutine; a spawn that missed cancel_all is caught by
 * the next sweep (so spawns need no fence).  Cancelling one twice is
 * harmless: a wait that is not cancellable loops over the stray wake. */
static void cancel_sweep(void)
{
	weft__co_each_live(cancel_one, NULL);
}

static void name_one(struct weft_co *co, void *arg)
{
	(void)arg;
	char entry[512];
	weft__monitor_describe_entry(at_load_ptr((void **)&co->fn), entry, sizeof entry);
	fprintf(stderr, "weft: shutdown: coroutine %" PRIu64 " (entry %s) ignored its cancellation\n",
		at_load_64(&co->id), entry);
}

/*
 * weft_shutdown_until: the drain of weft_shutdown until deadline; then
 * cancel_all (spawns start cancelled) and a sweep of weft__co_each_live
 * cancels every coroutine still running, again every 10 ms (a spawn that
 * missed cancel_all) for GRACE; those still running then are named and the
 * runtime is left up, draining ended, for a later shutdown.
 */
int weft_shutdown_until(int64_t deadline)
{
	const int64_t GRACE = 1000 * 1000 * 1000;
	int r = shutdown_begin();
	if (r < 0)
		return weft__err_result(r);
	if (!wait_finished_until(deadline, NULL)) {
		at_store_uint(&weft__rt.cancel_all, 1);
		at_fence_store_load();
		bool done = wait_finished_until(weft_now() + GRACE, cancel_sweep);
		if (!done)
			weft__co_each_live(name_one, NULL);
		at_store_uint(&weft__rt.cancel_all, 0);
		if (!done) {
			at_store_uint(&weft__rt.draining, 0);
			pthread_mutex_unlock(&lifecycle_lock);
			return weft__err_fail(ETIMEDOUT);
		}
	}
	stop_locked();
	pthread_mutex_unlock(&lifecycle_lock);
	return 0;
}

int weft_main(void (*fn)(void *), void *arg, const weft_config *cfg)
{
	if (weft_init(cfg) != 0)
		return -1;
	weft_co *co = weft_spawn(fn, arg);
	int e = co ? 0 : errno;
	if (co)
		weft_join(co);
	weft_shutdown();
	return e ? weft__err_fail(e) : 0;
}

int weft_worker_id(void)
{
	struct weft__worker *w = weft__worker_self();
	return w ? (int)w->index : -1;
}

unsigned weft_worker_count(void)
{
	return weft__rt_accepting() ? weft__rt.nworkers : 0;
}
