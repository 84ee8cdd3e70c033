/* SPDX-License-Identifier: MIT */
/*
 * runtime.c — weft_init, weft_shutdown, weft_main and the small queries.
 *
 * init: resolve the configuration, create the stack pool's arena, start the
 * workers and the monitor.  shutdown: wait until every coroutine has
 * finished (draining), print the stats if asked, stop accepting spawns,
 * stop the offload helpers, stop the monitor, stop and
 * join the workers, free the pool and the fd table.  A mutex
 * serialises init and shutdown against each other; nothing on a hot path
 * takes it.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "atomic.h"
#include "config.h"
#include "errors.h"
#include "fdtable.h"
#include "futex.h"
#include "monitor.h"
#include "offload.h"
#include "overflow.h"
#include "stack.h"
#include "stats.h"
#include "weft.h"
#include "worker.h"

static pthread_mutex_t lifecycle_lock = PTHREAD_MUTEX_INITIALIZER;
static bool started;	/* under lifecycle_lock */
static bool print_stats;	/* $WEFT_STATS=1 */

static int init_locked(const weft_config *cfg)
{
	if (started)
		return weft__fail(EALREADY);
	struct weft__settings s;
	if (weft__config_resolve(cfg, &s) != 0)
		return -1;
	if (weft__stack_pool_init(s.stack_size, s.stack_guards) != 0)
		return -1;
	weft__overflow_install();
	weft__offload_init(s.blocking_threads);
	print_stats = s.stats;
	if (weft__workers_start(s.workers, s.pin) != 0) {
		int e = errno;
		weft__stack_pool_fini();
		return weft__fail(e);
	}
	if (weft__monitor_start(s.stall_ms) != 0) {
		int e = errno;
		weft__workers_stop();
		weft__stack_pool_fini();
		weft__workers_free();
		return weft__fail(e);
	}
	started = true;
	at_store_uint(&weft__rt.running, 1);
	return 0;
}

int weft_init(const weft_config *cfg)
{
	pthread_mutex_lock(&lifecycle_lock);
	int r = init_locked(cfg);
	int e = errno;
	pthread_mutex_unlock(&lifecycle_lock);
	return r == 0 ? 0 : weft__fail(e);
}

static void wait_all_finished(void)
{
	at_store_uint(&weft__rt.draining, 1);
	at_fence_store_load();
	const struct timespec tick = { 0, 10 * 1000 * 1000 };
	while (!weft__all_finished()) {
		uint32_t seen = at_load_uint((unsigned *)&weft__rt.quiesce);
		if (weft__all_finished())
			break;
		/* Woken when a worker goes idle; the timeout is a safety net. */
		weft__futex_wait(&weft__rt.quiesce, seen, &tick);
	}
}

int weft_shutdown(void)
{
	if (weft__worker_self())
		return weft__fail(EDEADLK);
	pthread_mutex_lock(&lifecycle_lock);
	if (!started) {
		pthread_mutex_unlock(&lifecycle_lock);
		return weft__fail(ESRCH);
	}
	wait_all_finished();
	if (print_stats)
		weft__stats_print(stderr);
	at_store_uint(&weft__rt.running, 0);
	weft__offload_fini();
	weft__monitor_stop();
	weft__workers_stop();
	weft__stack_pool_fini();
	weft__workers_free();
	weft__fdtable_fini();	/* registrations died with the loops */
	started = false;
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
	return e ? weft__fail(e) : 0;
}

int weft_worker_id(void)
{
	struct weft__worker *w = weft__worker_self();
	return w ? (int)w->index : -1;
}

unsigned weft_worker_count(void)
{
	return weft__runtime_accepting() ? weft__rt.nworkers : 0;
}
