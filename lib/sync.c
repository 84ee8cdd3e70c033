/*
 * sync.c — mutex, condition variable and wait group, on the wait queues of
 * waitq.h (and so on the one park/wake protocol).
 *
 * Mutex.  `state` is 0 (free), 1 (locked) or 2 (locked, maybe waiters).
 * Uncontended lock and unlock are one CAS each, no lock, no syscall.  A
 * contended locker takes the internal lock, marks the state 2, queues itself
 * and parks.  Unlock with state 2 takes the internal lock and hands the mutex
 * to the oldest waiter it can claim: the state never passes through 0, so a
 * newcomer cannot barge in ahead of the queue (FIFO hand-off, no
 * starvation).  A locker spins briefly first while the state is 1 (see
 * spin_for).  The CASes are seq_cst: a locker's 1 -> 2 and an unlocker's
 * 1 -> 0 cannot both succeed, and an unlocker that sees 2 finds the queued
 * waiter under the lock.
 */
#include <errno.h>
#include <stdlib.h>

#include "atomic.h"
#include "coro.h"
#include "waitq.h"
#include "weft.h"
#include "worker.h"

enum { SPIN_ROUNDS = 100 };

/* Every object here starts with its internal lock. */
static void *object_new(size_t size)
{
	pthread_mutex_t *lock = calloc(1, size);
	if (!lock)
		weft__fail(ENOMEM);
	else
		pthread_mutex_init(lock, NULL);
	return lock;
}

static void object_free(void *object)
{
	if (!object)
		return;
	pthread_mutex_destroy(object);
	free(object);
}

/* ------------------------------------------------------ mutex */

struct weft_mutex {
	pthread_mutex_t lock;	/* first: see object_new */
	unsigned state;		/* atomic: 0 free, 1 locked, 2 locked and contended */
	weft_co *owner;		/* atomic */
	struct weft__waitq q;
};

weft_mutex *weft_mutex_new(void)
{
	return object_new(sizeof(weft_mutex));
}

void weft_mutex_free(weft_mutex *m)
{
	object_free(m);
}

static int acquired(weft_mutex *m, weft_co *self)
{
	at_store_ptr((void **)&m->owner, self);
	return 0;
}

/*
 * A holder on another worker usually leaves within a short critical section,
 * far sooner than a park and a hand-off across cores (a wake-up there costs
 * microseconds, machine-floors.md).  So spin briefly while the mutex is held
 * and nobody is queued; once someone is queued (state 2), FIFO hand-off
 * decides and newcomers queue behind.  Useless on one worker: the holder
 * cannot run while we spin.
 */
static bool spin_for(weft_mutex *m)
{
	if (weft__rt.nworkers < 2)
		return false;
	for (int i = 0; i < SPIN_ROUNDS; i++) {
		unsigned s = at_load_uint(&m->state);
		if (s == 0 && at_cas_uint(&m->state, 0, 1))
			return true;
		if (s == 2)
			return false;
		at_pause();
	}
	return false;
}

static int lock_contended(weft_mutex *m, weft_co *self)
{
	pthread_mutex_lock(&m->lock);
	for (;;) {
		unsigned s = at_load_uint(&m->state);
		if (s == 0 && at_cas_uint(&m->state, 0, 1))
			break;
		if (s == 2 || (s == 1 && at_cas_uint(&m->state, 1, 2))) {
			struct weft__wait x;
			weft__wait_enqueue(&x, &m->q, NULL);
			int r = weft__wait_park(&x, &m->lock, &m->q, -1);
			if (r != 0) {
				pthread_mutex_unlock(&m->lock);
				return weft__fail(r);
			}
			break;	/* handed over: the state stayed locked for us */
		}
	}
	pthread_mutex_unlock(&m->lock);
	return acquired(m, self);
}

int weft_mutex_lock(weft_mutex *m)
{
	weft_co *self = weft_self();
	if (!self)
		return weft__fail(EPERM);
	if (!m)
		return weft__fail(EINVAL);
	if (at_load_ptr((void **)&m->owner) == self)
		return weft__fail(EDEADLK);
	if (weft__cancelled())
		return weft__fail(ECANCELED);
	if (at_cas_uint(&m->state, 0, 1) || spin_for(m))
		return acquired(m, self);
	return lock_contended(m, self);
}

int weft_mutex_trylock(weft_mutex *m)
{
	weft_co *self = weft_self();
	if (!self)
		return weft__fail(EPERM);
	if (!m)
		return weft__fail(EINVAL);
	if (!at_cas_uint(&m->state, 0, 1))
		return weft__fail(EBUSY);
	return acquired(m, self);
}

int weft_mutex_unlock(weft_mutex *m)
{
	weft_co *self = weft_self();
	if (!self)
		return weft__fail(EPERM);
	if (!m)
		return weft__fail(EINVAL);
	if (at_load_ptr((void **)&m->owner) != self)
		return weft__fail(EPERM);
	at_store_ptr((void **)&m->owner, NULL);
	if (at_cas_uint(&m->state, 1, 0))
		return 0;
	pthread_mutex_lock(&m->lock);
	struct weft__wnode *n = weft__waitq_claim(&m->q);
	if (n) {
		at_store_uint(&m->state, weft__waitq_live(&m->q) ? 2 : 1);
		weft__wnode_wake(n, 0);
	} else {
		at_store_uint(&m->state, 0);
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* ------------------------------------------------------ condition variable */

struct weft_cond {
	pthread_mutex_t lock;
	struct weft__waitq q;
};

weft_cond *weft_cond_new(void)
{
	return object_new(sizeof(weft_cond));
}

void weft_cond_free(weft_cond *c)
{
	object_free(c);
}

/* cond_wait returns with m held, also once cancelled, when every lock call
 * fails with ECANCELED: then it retries trylock, yielding in between. */
static void relock(weft_mutex *m)
{
	if (weft_mutex_lock(m) == 0)
		return;
	while (weft_mutex_trylock(m) != 0)
		weft_yield();
}

int weft_cond_wait(weft_cond *c, weft_mutex *m, int64_t deadline)
{
	weft_co *self = weft_self();
	if (!self)
		return weft__fail(EPERM);
	if (!c || !m)
		return weft__fail(EINVAL);
	if (at_load_ptr((void **)&m->owner) != self)
		return weft__fail(EPERM);
	if (weft__cancelled())
		return weft__fail(ECANCELED);
	pthread_mutex_lock(&c->lock);
	struct weft__wait x;
	/* Queued before the mutex is released: a signal after the release
	 * finds us (no lost wake-up). */
	weft__wait_enqueue(&x, &c->q, NULL);
	weft_mutex_unlock(m);
	int r = weft__wait_park(&x, &c->lock, &c->q, deadline);
	pthread_mutex_unlock(&c->lock);
	relock(m);
	return r ? weft__fail(r) : 0;
}

static int cond_wake(weft_cond *c, bool all)
{
	if (!c)
		return weft__fail(EINVAL);
	pthread_mutex_lock(&c->lock);
	if (all) {
		weft__waitq_wake_all(&c->q, 0);
	} else {
		struct weft__wnode *n = weft__waitq_claim(&c->q);
		if (n)
			weft__wnode_wake(n, 0);
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int weft_cond_signal(weft_cond *c)
{
	return cond_wake(c, false);
}

int weft_cond_broadcast(weft_cond *c)
{
	return cond_wake(c, true);
}

/* ------------------------------------------------------ wait group */

struct weft_wg {
	pthread_mutex_t lock;
	long count;		/* under lock */
	struct weft__waitq q;
};

weft_wg *weft_wg_new(void)
{
	return object_new(sizeof(weft_wg));
}

void weft_wg_free(weft_wg *wg)
{
	object_free(wg);
}

int weft_wg_add(weft_wg *wg, int delta)
{
	if (!wg)
		return weft__fail(EINVAL);
	pthread_mutex_lock(&wg->lock);
	long n = wg->count + delta;
	if (n >= 0) {
		wg->count = n;
		if (n == 0)
			weft__waitq_wake_all(&wg->q, 0);
	}
	pthread_mutex_unlock(&wg->lock);
	return n < 0 ? weft__fail(EINVAL) : 0;
}

int weft_wg_done(weft_wg *wg)
{
	return weft_wg_add(wg, -1);
}

int weft_wg_wait(weft_wg *wg, int64_t deadline)
{
	if (!wg)
		return weft__fail(EINVAL);
	if (weft__cancelled())
		return weft__fail(ECANCELED);
	pthread_mutex_lock(&wg->lock);
	int r = 0;
	if (wg->count > 0) {
		struct weft__wait x;
		weft__wait_enqueue(&x, &wg->q, NULL);
		r = weft__wait_park(&x, &wg->lock, &wg->q, deadline);
	}
	pthread_mutex_unlock(&wg->lock);
	return r ? weft__fail(r) : 0;
}
