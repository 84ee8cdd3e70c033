/* SPDX-License-Identifier: MIT */
/*
 * offload.c — weft_offload: blocking calls on helper threads.
 *
 * A coroutine that must call something that blocks its thread (a legacy
 * library, getaddrinfo, a read from a slow disk) hands the call to a pool of
 * plain helper threads and parks until it returns; its worker runs others
 * meanwhile.  The call's record lives on the caller's stack: the function,
 * its argument, and a completion (park.h) that the helper completes when the
 * function returns.  The caller's wait is not cancellable: arg must stay
 * valid until fn is done, so weft_cancel only changes the result to
 * ECANCELED once it is.
 *
 * The pool is a locked FIFO of calls and a condition variable.  It grows on
 * demand: a call queued while no helper is idle starts one, up to the limit
 * (WEFT_BLOCKING_THREADS); past it, calls wait in the FIFO.  A helper idle
 * for IDLE_EXIT_S exits (measured on CLOCK_MONOTONIC, so a step of the wall
 * clock neither retires idle helpers early nor keeps them for ever).
 * Helpers block every signal, like the workers.
 * Nothing here is on a scheduler hot path, so one mutex is enough.
 */
#include "offload.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "atomic.h"
#include "coro.h"
#include "errors.h"
#include "fifo.h"
#include "park.h"
#include "thread.h"
#include "weft.h"

enum { IDLE_EXIT_S = 10 };

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work;	/* a call was queued, or stopping (work_init) */
	pthread_cond_t gone;	/* a helper exited */
	WEFT__FIFO(struct weft__offload_call) q;	/* calls waiting for a helper */
	unsigned queued;	/* calls in q */
	unsigned threads;	/* helpers alive */
	unsigned idle;		/* helpers waiting for a call */
	unsigned max;
	bool stopping;
	uint64_t calls;
} pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.gone = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t work_once = PTHREAD_ONCE_INIT;

/* Makes pool.work's timed waits take CLOCK_MONOTONIC deadlines
 * (pthread_cond_timedwait measures against CLOCK_REALTIME unless the
 * condition says otherwise).  Run once, by the first weft__offload_init,
 * before any helper exists. */
static void work_init(void)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&pool.work, &attr);
	pthread_condattr_destroy(&attr);
}

static struct weft__offload_call *take_call(void)
{
	struct weft__offload_call *c;
	WEFT__FIFO_POP(&pool.q, c);
	pool.queued--;
	return c;
}

/* Waits (with pool.lock held) for a call; NULL when the helper should exit:
 * stopping, or idle for IDLE_EXIT_S. */
static struct weft__offload_call *next_call(void)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);	/* pool.work's clock */
	until.tv_sec += IDLE_EXIT_S;
	while (WEFT__FIFO_EMPTY(&pool.q) && !pool.stopping) {
		pool.idle++;
		int r = pthread_cond_timedwait(&pool.work, &pool.lock, &until);
		pool.idle--;
		if (r == ETIMEDOUT && WEFT__FIFO_EMPTY(&pool.q))
			return NULL;
	}
	return WEFT__FIFO_EMPTY(&pool.q) ? NULL : take_call();
}

static void *helper_main(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&pool.lock);
	struct weft__offload_call *c;
	while ((c = next_call())) {
		pool.calls++;
		pthread_mutex_unlock(&pool.lock);
		c->fn(c->arg);
		weft__completion_set(&c->done, NULL);	/* c may be gone after this */
		pthread_mutex_lock(&pool.lock);
	}
	pool.threads--;
	pthread_cond_broadcast(&pool.gone);
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

/* Starts a helper (pool.lock held); false if the system refuses a thread. */
static bool start_helper(void)
{
	bool ok = weft__thread_start(NULL, false, helper_main, NULL) == 0;
	if (ok)
		pool.threads++;
	return ok;
}

/* Queues c, starting a helper if none is free; EAGAIN if there is no helper
 * at all and none can be started (c is not queued then). */
static int submit(struct weft__offload_call *c)
{
	c->done = NULL;
	pthread_mutex_lock(&pool.lock);
	bool need = pool.queued + 1 > pool.idle && pool.threads < pool.max;
	if (need && !start_helper() && pool.threads == 0) {
		pthread_mutex_unlock(&pool.lock);
		return EAGAIN;
	}
	WEFT__FIFO_PUSH(&pool.q, c);
	pool.queued++;
	pthread_cond_signal(&pool.work);
	pthread_mutex_unlock(&pool.lock);
	return 0;
}

int weft_offload(void (*fn)(void *), void *arg)
{
	if (!fn)
		return weft__err_fail(EINVAL);
	if (!weft_self()) {
		fn(arg);	/* a plain thread may block: run it here */
		return 0;
	}
	if (weft__co_cancelled())
		return weft__err_fail(ECANCELED);
	struct weft__offload_call c = { .fn = fn, .arg = arg, .done = NULL };
	int e = submit(&c);
	if (e)
		return weft__err_fail(e);
	weft__completion_wait(&c.done, false, -1, WEFT_PARK_OFFLOAD);
	return weft__co_cancelled() ? weft__err_fail(ECANCELED) : 0;
}

int weft__offload_submit(struct weft__offload_call *c)
{
	return -submit(c);
}

bool weft__offload_withdraw(struct weft__offload_call *c)
{
	pthread_mutex_lock(&pool.lock);
	struct weft__offload_call **link = &pool.q.head, *prev = NULL;
	while (*link && *link != c) {
		prev = *link;
		link = &prev->next;
	}
	bool found = *link == c;
	if (found) {
		*link = c->next;
		if (pool.q.tail == c)
			pool.q.tail = prev;
		pool.queued--;
	}
	pthread_mutex_unlock(&pool.lock);
	return found;
}

int weft__offload_until(void (*fn)(void *), void *arg, int64_t deadline)
{
	struct weft__offload_call c = { .fn = fn, .arg = arg, .done = NULL };
	int e = submit(&c);
	if (e)
		return -e;
	int r = weft__completion_wait(&c.done, true, deadline, WEFT_PARK_OFFLOAD);
	if (r == 0)
		return 0;
	if (weft__offload_withdraw(&c))
		return -r;
	weft__completion_wait(&c.done, false, -1, WEFT_PARK_OFFLOAD);	/* a helper has it: wait it out */
	if (r == EINTR)
		weft__park_interrupt_keep(weft_self());
	return 0;
}

void weft__offload_init(unsigned max_threads)
{
	pthread_once(&work_once, work_init);
	pthread_mutex_lock(&pool.lock);
	pool.max = max_threads;
	pool.stopping = false;
	pool.calls = 0;
	pthread_mutex_unlock(&pool.lock);
}

void weft__offload_fini(void)
{
	pthread_mutex_lock(&pool.lock);
	pool.stopping = true;
	pthread_cond_broadcast(&pool.work);
	while (pool.threads)
		pthread_cond_wait(&pool.gone, &pool.lock);
	pthread_mutex_unlock(&pool.lock);
}

void weft__offload_stats(struct weft__offload_stats *out)
{
	pthread_mutex_lock(&pool.lock);
	out->calls = pool.calls;
	out->threads = pool.threads;
	out->threads_max = pool.max;
	pthread_mutex_unlock(&pool.lock);
}
