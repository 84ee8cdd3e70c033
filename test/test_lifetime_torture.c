/* SPDX-License-Identifier: MIT */
/*
 * Object lifetime when a wait ends by its deadline or by weft_cancel while
 * a partner claims it (weft.h, "Object lifetime"; docs/design.md, "Object
 * lifetime").  Each round: a waiter coroutine, locked onto the driver's
 * worker, parks on a fresh object; the driver then keeps that worker busy
 * (it never yields) while the waiter's wait is ended by weft_cancel or by
 * its deadline (the monitor fires the timers of a stuck worker), and a
 * partner (a plain thread, or a coroutine on the other worker) completes
 * the waiter's call, returns and frees the object, as weft.h allows.  Only
 * then may the waiter run: its call must succeed (the partner completed
 * it) without touching the object again, which ASan, TSan and valgrind
 * report.  Every wait-queue primitive: channel send and receive, select,
 * condition variable, semaphore, rwlock, wait group, group, once.
 */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

enum end { BY_CANCEL, BY_DEADLINE };

struct round;

/* One primitive: the waiter's call, and how the partner completes it. */
struct prim {
	/* The driver, before the waiter starts: a fresh object (and helpers). */
	void (*setup)(struct round *r);
	/* The waiter's call: 0 done, else its errno. */
	int (*wait)(struct round *r, int64_t deadline);
	/* The driver, its worker kept busy, before the partner starts: its
	 * own part of the claim, or NULL. */
	void (*driver_claim)(struct round *r);
	/* The partner: completes the waiter's call, then frees the object. */
	void (*claim_free)(struct round *r);
	/* The driver, once the waiter returned: frees the helpers, or NULL. */
	void (*teardown)(struct round *r);
	bool no_deadline;	/* the call takes none (once) */
};

struct round {
	const struct prim *p;
	bool thread_partner;	/* else a coroutine */
	int worker;		/* the driver's, where the waiter is locked */
	int64_t delay;		/* the waiter's deadline from its call; -1: none */
	void *obj;		/* freed by the partner */
	void *aux, *aux2;	/* helpers, freed by teardown */
	pthread_t thread;	/* a plain-thread runner (once) */
	weft_co *co;		/* a coroutine runner or member */
	weft_sem *home;		/* the waiter, stolen, waits here for the driver */
	atomic_int away;	/* it does */
	atomic_int calling;	/* the waiter is in its call */
	atomic_int busy;	/* the driver keeps the worker busy */
	atomic_int freed;	/* the partner freed the object */
	atomic_int flag;	/* the primitive's own */
	int result;
};

/* ------------------------------------------------------ the round */

static uint64_t timers_fired(int worker)
{
	weft_worker_stats per[64];
	weft_stats st = { .size = sizeof st, .per_worker = per, .per_worker_len = 64 };
	CHECK(weft_stats_get(&st) == 0 && (unsigned)worker < st.workers);
	return per[worker].timers_fired;
}

/* Stolen by the other worker: parks until the driver wakes it, which
 * queues it on the driver's worker (a yield would requeue it where it is,
 * and both workers could go on yielding for ever). */
static void go_home(struct round *r)
{
	atomic_store(&r->away, 1);
	CHECK(weft_sem_acquire(r->home, -1) == 0);
}

static void waiter(void *arg)
{
	struct round *r = arg;
	while (weft_worker_id() != r->worker)
		go_home(r);
	CHECK(weft_lock_thread() == 0);	/* no switch since the check */
	atomic_store(&r->calling, 1);
	/* A deadline that passed before the call parked (the thread was
	 * preempted) ends it before the driver ran: call again. */
	do
		r->result = r->p->wait(r, r->delay < 0 ? -1 : weft_now() + r->delay);
	while (r->result == ETIMEDOUT && !atomic_load(&r->busy));
}

static void partner(struct round *r)
{
	r->p->claim_free(r);
	atomic_store(&r->freed, 1);
}

static void *partner_thread(void *arg)
{
	partner(arg);
	return NULL;
}

static void partner_co(void *arg)
{
	partner(arg);
}

static void one_round(const struct prim *p, enum end end, bool thread_partner)
{
	struct round r = { .p = p, .thread_partner = thread_partner, .worker = weft_worker_id(),
			   .delay = end == BY_DEADLINE ? scaled(1, 2, 20) * MS : -1 };
	p->setup(&r);
	uint64_t fired = timers_fired(r.worker);
	r.home = weft_sem_new(0);
	CHECK(r.home);
	weft_co *w = go(waiter, &r);
	while (!atomic_load(&r.calling)) {
		if (atomic_exchange(&r.away, 0))
			CHECK(weft_sem_release(r.home) == 0);
		weft_yield();
	}
	/* The waiter runs on this worker only and did not return: it is
	 * parked in its call, its node queued.  From here until the partner
	 * freed the object, this worker runs nothing else. */
	atomic_store(&r.busy, 1);
	if (end == BY_CANCEL)
		CHECK(weft_cancel(w) == 0);
	else	/* the monitor fires it: this worker is stuck */
		while (timers_fired(r.worker) == fired)
			;
	if (p->driver_claim)
		p->driver_claim(&r);
	pthread_t t;
	weft_co *pc = NULL;
	if (thread_partner)
		CHECK(pthread_create(&t, NULL, partner_thread, &r) == 0);
	else
		pc = go(partner_co, &r);
	while (!atomic_load(&r.freed))
		;
	if (thread_partner)
		CHECK(pthread_join(t, NULL) == 0);
	else
		join(pc);
	join(w);
	weft_sem_free(r.home);
	if (r.result != 0) {
		fprintf(stderr, "claimed wait returned %d (end %d, thread partner %d)\n", r.result,
			end, thread_partner);
		abort();
	}
	if (p->teardown)
		p->teardown(&r);
}

static unsigned round_count(enum end end, bool thread_partner)
{
	const char *env = getenv("LIFETIME_ROUNDS");
	if (env)
		return (unsigned)strtoul(env, NULL, 10);
	/* a deadline round waits for the monitor; a coroutine partner too,
	 * when it is queued on the busy worker */
	if (end == BY_CANCEL && thread_partner)
		return scaled(1000, 300, 10);
	return scaled(100, 40, 3);
}

static void driver(void *arg)
{
	const struct prim *p = arg;
	CHECK(weft_lock_thread() == 0);
	for (int end = BY_CANCEL; end <= BY_DEADLINE; end++) {
		if (end == BY_DEADLINE && p->no_deadline)
			continue;
		for (int thread = 0; thread <= 1; thread++)
			for (unsigned i = round_count(end, thread); i > 0; i--)
				one_round(p, end, thread);
	}
}

static void torture(const struct prim *p)
{
	run(2, driver, (void *)p);
}

/* ------------------------------------------------------ channels */

static int err_of(int rc)
{
	return rc == 0 ? 0 : errno;
}

static void chan_setup(struct round *r)
{
	r->obj = weft_chan_new(sizeof(long), 0);
	CHECK(r->obj);
}

static int chan_send_wait(struct round *r, int64_t deadline)
{
	long v = 42;
	return err_of(weft_chan_send(r->obj, &v, deadline));
}

static void chan_recv_free(struct round *r)
{
	long v = 0;
	CHECK(weft_chan_recv(r->obj, &v, -1) == 0 && v == 42);
	weft_chan_free(r->obj);
}

Test(lifetime, claimed_send_ended_by_deadline_or_cancel_leaves_the_channel_alone, .timeout = 600)
{
	static const struct prim p = { .setup = chan_setup, .wait = chan_send_wait,
				       .claim_free = chan_recv_free };
	torture(&p);
}

static int chan_recv_wait(struct round *r, int64_t deadline)
{
	long v = 0;
	if (weft_chan_recv(r->obj, &v, deadline) != 0)
		return errno;
	CHECK(v == 42);
	return 0;
}

static void chan_send_free(struct round *r)
{
	long v = 42;
	CHECK(weft_chan_send(r->obj, &v, -1) == 0);
	weft_chan_free(r->obj);
}

Test(lifetime, claimed_recv_ended_by_deadline_or_cancel_leaves_the_channel_alone, .timeout = 600)
{
	static const struct prim p = { .setup = chan_setup, .wait = chan_recv_wait,
				       .claim_free = chan_send_free };
	torture(&p);
}

/* The select sends and receives on the channel that is freed (the claimer
 * takes the send; the receive's node must go with it) and receives on
 * another one, which lives on. */
static void select_setup(struct round *r)
{
	chan_setup(r);
	r->aux = weft_chan_new(sizeof(long), 0);
	CHECK(r->aux);
}

static int select_wait(struct round *r, int64_t deadline)
{
	long out = 42, in = 0, other = 0;
	weft_chan_case cases[] = {
		{ .ch = r->obj, .op = WEFT_CHAN_SEND, .elem = &out },
		{ .ch = r->obj, .op = WEFT_CHAN_RECV, .elem = &in },
		{ .ch = r->aux, .op = WEFT_CHAN_RECV, .elem = &other },
	};
	int i = weft_chan_select(cases, 3, deadline);
	if (i < 0)
		return errno;
	CHECK(i == 0 && cases[0].err == 0);
	return 0;
}

static void select_teardown(struct round *r)
{
	weft_chan_free(r->aux);
}

Test(lifetime, claimed_select_ended_by_deadline_or_cancel_leaves_the_channel_alone, .timeout = 600)
{
	static const struct prim p = { .setup = select_setup, .wait = select_wait,
				       .claim_free = chan_recv_free, .teardown = select_teardown };
	torture(&p);
}

/* ------------------------------------------------------ cond, sem, rwlock, wait group */

/* POSIX's pthread_cond_destroy example: broadcast, unlock, free. */
static void cond_setup(struct round *r)
{
	r->obj = weft_cond_new();
	r->aux = weft_mutex_new();
	CHECK(r->obj && r->aux);
}

static int cond_wait(struct round *r, int64_t deadline)
{
	CHECK(weft_mutex_lock(r->aux) == 0);
	int e = err_of(weft_cond_wait(r->obj, r->aux, deadline));
	CHECK(weft_mutex_unlock(r->aux) == 0);
	return e;
}

static void cond_broadcast_free(struct round *r)
{
	CHECK(weft_mutex_lock(r->aux) == 0);
	CHECK(weft_cond_broadcast(r->obj) == 0);
	CHECK(weft_mutex_unlock(r->aux) == 0);
	weft_cond_free(r->obj);
}

static void cond_teardown(struct round *r)
{
	weft_mutex_free(r->aux);
}

Test(lifetime, claimed_cond_wait_ended_by_deadline_or_cancel_leaves_the_cond_alone, .timeout = 600)
{
	static const struct prim p = { .setup = cond_setup, .wait = cond_wait,
				       .claim_free = cond_broadcast_free, .teardown = cond_teardown };
	torture(&p);
}

static void sem_setup(struct round *r)
{
	r->obj = weft_sem_new(0);
	CHECK(r->obj);
}

static int sem_wait(struct round *r, int64_t deadline)
{
	return err_of(weft_sem_acquire(r->obj, deadline));
}

static void sem_release_free(struct round *r)
{
	CHECK(weft_sem_release(r->obj) == 0);
	weft_sem_free(r->obj);
}

Test(lifetime, claimed_sem_acquire_ended_by_deadline_or_cancel_leaves_the_sem_alone, .timeout = 600)
{
	static const struct prim p = { .setup = sem_setup, .wait = sem_wait,
				       .claim_free = sem_release_free };
	torture(&p);
}

/* The driver holds the write lock; its unlock hands a read hold to the
 * waiter, which the partner gives back (read holds are counted, not
 * owned) before it frees the lock. */
static void rwlock_setup(struct round *r)
{
	r->obj = weft_rwlock_new();
	CHECK(r->obj && weft_rwlock_wrlock(r->obj, -1) == 0);
}

static int rwlock_wait(struct round *r, int64_t deadline)
{
	return err_of(weft_rwlock_rdlock(r->obj, deadline));
}

static void rwlock_hand_over(struct round *r)
{
	CHECK(weft_rwlock_unlock(r->obj) == 0);
}

static void rwlock_unlock_free(struct round *r)
{
	CHECK(weft_rwlock_unlock(r->obj) == 0);
	weft_rwlock_free(r->obj);
}

Test(lifetime, claimed_rdlock_ended_by_deadline_or_cancel_leaves_the_rwlock_alone, .timeout = 600)
{
	static const struct prim p = { .setup = rwlock_setup, .wait = rwlock_wait,
				       .driver_claim = rwlock_hand_over,
				       .claim_free = rwlock_unlock_free };
	torture(&p);
}

static void wg_setup(struct round *r)
{
	r->obj = weft_wg_new();
	CHECK(r->obj && weft_wg_add(r->obj, 1) == 0);
}

static int wg_wait(struct round *r, int64_t deadline)
{
	return err_of(weft_wg_wait(r->obj, deadline));
}

static void wg_done_free(struct round *r)
{
	CHECK(weft_wg_done(r->obj) == 0);
	weft_wg_free(r->obj);
}

Test(lifetime, claimed_wg_wait_ended_by_deadline_or_cancel_leaves_the_wait_group_alone,
     .timeout = 600)
{
	static const struct prim p = { .setup = wg_setup, .wait = wg_wait,
				       .claim_free = wg_done_free };
	torture(&p);
}

/* ------------------------------------------------------ group, once */

/* The group's one member waits for the gate (aux); the partner opens it,
 * waits for the group itself and frees it. */
static void member(void *arg)
{
	struct round *r = arg;
	CHECK(weft_sem_acquire(r->aux, -1) == 0);
}

static void group_setup(struct round *r)
{
	r->obj = weft_group_new();
	r->aux = weft_sem_new(0);
	CHECK(r->obj && r->aux && weft_group_spawn(r->obj, member, r));
}

static int group_wait(struct round *r, int64_t deadline)
{
	return err_of(weft_group_wait(r->obj, deadline));
}

static void group_open_free(struct round *r)
{
	CHECK(weft_sem_release(r->aux) == 0);
	CHECK(weft_group_wait(r->obj, -1) == 0);
	CHECK(weft_group_free(r->obj) == 0);
}

static void group_teardown(struct round *r)
{
	weft_sem_free(r->aux);
}

Test(lifetime, claimed_group_wait_ended_by_deadline_or_cancel_leaves_the_group_alone,
     .timeout = 600)
{
	static const struct prim p = { .setup = group_setup, .wait = group_wait,
				       .claim_free = group_open_free, .teardown = group_teardown };
	torture(&p);
}

/* The runner (a thread or a coroutine, as the partner) runs the once's fn,
 * which waits for the gate (aux); once its call returned, it frees the
 * once and says so (aux2). */
static void once_fn(void *arg)
{
	struct round *r = arg;
	atomic_store(&r->flag, 1);
	CHECK(weft_sem_acquire(r->aux, -1) == 0);
}

static void never(void *arg)
{
	(void)arg;
	CHECK(!"the waiter's once ran fn");
}

static void once_runner(void *arg)
{
	struct round *r = arg;
	CHECK(weft_once_run(r->obj, once_fn, r) == 0);
	free(r->obj);
	CHECK(weft_sem_release(r->aux2) == 0);
}

static void *once_runner_thread(void *arg)
{
	once_runner(arg);
	return NULL;
}

static void once_setup(struct round *r)
{
	r->obj = calloc(1, sizeof(weft_once));
	r->aux = weft_sem_new(0);
	r->aux2 = weft_sem_new(0);
	CHECK(r->obj && r->aux && r->aux2);
	if (r->thread_partner)
		CHECK(pthread_create(&r->thread, NULL, once_runner_thread, r) == 0);
	else
		r->co = go(once_runner, r);
	while (!atomic_load(&r->flag))	/* fn runs: the waiter will park */
		weft_yield();
}

static int once_wait(struct round *r, int64_t deadline)
{
	(void)deadline;
	return err_of(weft_once_run(r->obj, never, NULL));
}

static void once_open_free(struct round *r)
{
	CHECK(weft_sem_release(r->aux) == 0);
	CHECK(weft_sem_acquire(r->aux2, -1) == 0);
}

static void once_teardown(struct round *r)
{
	if (r->thread_partner)
		CHECK(pthread_join(r->thread, NULL) == 0);
	else
		join(r->co);
	weft_sem_free(r->aux);
	weft_sem_free(r->aux2);
}

Test(lifetime, claimed_once_wait_ended_by_cancel_leaves_the_once_alone, .timeout = 600)
{
	static const struct prim p = { .setup = once_setup, .wait = once_wait,
				       .claim_free = once_open_free, .teardown = once_teardown,
				       .no_deadline = true };
	torture(&p);
}
