/* SPDX-License-Identifier: MIT */
/* Object lifetime: every weft object may be freed as soon as the last call
 * on it has returned (weft.h, "Object lifetime").  Each test repeats "wait,
 * then free at once" many times while another context is the waker: a plain
 * thread (preempted or slow after its wake, the widest window) or a
 * coroutine on the other worker.  A waker still inside the object after the
 * waiter returned is a use-after-free, which ASan reports and valgrind
 * flags; plain builds usually survive it, so this suite is for the
 * sanitizer and valgrind stages above all. */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* $LIFETIME_ROUNDS overrides the count (to time a build). */
static unsigned rounds(void)
{
	const char *env = getenv("LIFETIME_ROUNDS");
	if (env)
		return (unsigned)strtoul(env, NULL, 10);
	return scaled(200000, 200000, 3000);
}

/* ------------------------------------------------------ the waker */

/* What the waker is asked to do with an object. */
enum job_kind { JOB_STOP, JOB_WG_DONE, JOB_REPLY, JOB_BROADCAST, JOB_SEM_RELEASE, JOB_RW_UNLOCK,
		JOB_RW_WRITE };

struct job {
	enum job_kind kind;
	void *obj;			/* the wait group, reply channel, cond, sem or rwlock */
	atomic_int *flag;		/* JOB_BROADCAST: the predicate; JOB_RW_WRITE: held */
};

/* Serves jobs until JOB_STOP: each wakes the requester, who may free the
 * object at once. */
static void serve(void *arg)
{
	weft_chan *jobs = arg;
	struct job j;
	while (weft_chan_recv(jobs, &j, -1) == 0 && j.kind != JOB_STOP) {
		long v = 42;
		switch (j.kind) {
		case JOB_WG_DONE:
			CHECK(weft_wg_done(j.obj) == 0);
			break;
		case JOB_REPLY:
			CHECK(weft_chan_send(j.obj, &v, -1) == 0);
			break;
		case JOB_BROADCAST:
			atomic_store(j.flag, 1);
			CHECK(weft_cond_broadcast(j.obj) == 0);
			break;
		case JOB_SEM_RELEASE:
			CHECK(weft_sem_release(j.obj) == 0);
			break;
		case JOB_RW_UNLOCK:	/* a read hold: counted, not owned */
			CHECK(weft_rwlock_unlock(j.obj) == 0);
			break;
		case JOB_RW_WRITE: {
			/* hold the write lock a moment, so the requester's
			 * rdlock usually queues, then let it in */
			CHECK(weft_rwlock_wrlock(j.obj, -1) == 0);
			atomic_store(j.flag, 1);
			int64_t until = weft_now() + 2000;
			while (weft_now() < until)
				;
			CHECK(weft_rwlock_unlock(j.obj) == 0);
			break;
		}
		case JOB_STOP:
			break;
		}
	}
}

static void *serve_thread(void *arg)
{
	serve(arg);
	return NULL;
}

/* A test body: runs on a coroutine, asks the waker through jobs. */
struct lifetime_case {
	void (*body)(weft_chan *jobs);
	bool thread_waker;	/* else a coroutine on the other worker */
};

static void run_case(void *arg)
{
	struct lifetime_case *lc = arg;
	weft_chan *jobs = weft_chan_new(sizeof(struct job), 0);
	CHECK(jobs);
	pthread_t t;
	weft_co *server = NULL;
	if (lc->thread_waker)
		CHECK(pthread_create(&t, NULL, serve_thread, jobs) == 0);
	else
		server = go(serve, jobs);
	lc->body(jobs);
	struct job stop = { .kind = JOB_STOP };
	CHECK(weft_chan_send(jobs, &stop, -1) == 0);
	if (lc->thread_waker)
		CHECK(pthread_join(t, NULL) == 0);
	else
		join(server);
	weft_chan_free(jobs);
}

static void both_wakers(void (*body)(weft_chan *jobs))
{
	struct lifetime_case lc = { .body = body, .thread_waker = true };
	run(2, run_case, &lc);
	lc.thread_waker = false;
	run(2, run_case, &lc);
}

static void ask(weft_chan *jobs, enum job_kind kind, void *obj, atomic_int *flag)
{
	struct job j = { .kind = kind, .obj = obj, .flag = flag };
	CHECK(weft_chan_send(jobs, &j, -1) == 0);
}

/* ------------------------------------------------------ wait group */

static void wg_rounds(weft_chan *jobs)
{
	for (unsigned i = 0; i < rounds(); i++) {
		weft_wg *wg = weft_wg_new();
		CHECK(wg);
		CHECK(weft_wg_add(wg, 1) == 0);
		ask(jobs, JOB_WG_DONE, wg, NULL);
		CHECK(weft_wg_wait(wg, -1) == 0);
		weft_wg_free(wg);
	}
}

Test(lifetime, wait_group_freed_right_after_its_wait, .timeout = 600)
{
	both_wakers(wg_rounds);
}

/* ------------------------------------------------------ reply channels */

static void reply_rounds(weft_chan *jobs, size_t capacity)
{
	for (unsigned i = 0; i < rounds(); i++) {
		weft_chan *reply = weft_chan_new(sizeof(long), capacity);
		CHECK(reply);
		ask(jobs, JOB_REPLY, reply, NULL);
		long v = 0;
		CHECK(weft_chan_recv(reply, &v, -1) == 0);
		CHECK(v == 42);
		weft_chan_free(reply);
	}
}

static void rendezvous_rounds(weft_chan *jobs)
{
	reply_rounds(jobs, 0);
}

static void buffered_rounds(weft_chan *jobs)
{
	reply_rounds(jobs, 1);
}

Test(lifetime, rendezvous_reply_channel_freed_right_after_its_receive, .timeout = 600)
{
	both_wakers(rendezvous_rounds);
}

Test(lifetime, buffered_reply_channel_freed_right_after_its_receive, .timeout = 600)
{
	both_wakers(buffered_rounds);
}

/* The winning channel of a select, freed as soon as select returns; the
 * other case's channel never fires. */
static void select_rounds(weft_chan *jobs)
{
	weft_chan *never = weft_chan_new(sizeof(long), 0);
	CHECK(never);
	for (unsigned i = 0; i < rounds(); i++) {
		weft_chan *reply = weft_chan_new(sizeof(long), i % 2);
		CHECK(reply);
		ask(jobs, JOB_REPLY, reply, NULL);
		long v = 0, unused;
		weft_chan_case cases[] = {
			{ .ch = never, .op = WEFT_CHAN_RECV, .elem = &unused },
			{ .ch = reply, .op = WEFT_CHAN_RECV, .elem = &v },
		};
		CHECK(weft_chan_select(cases, 2, -1) == 1);
		CHECK(cases[1].err == 0 && v == 42);
		weft_chan_free(reply);
	}
	weft_chan_free(never);
}

Test(lifetime, select_winner_freed_right_after_select, .timeout = 600)
{
	both_wakers(select_rounds);
}

/* ------------------------------------------------------ helpers */

/* A coroutine that lives across rounds and runs fn on each round handed to
 * it (a spawn per round would make each round cost a TSan fiber's
 * creation). */
struct helper {
	weft_chan *in;
	weft_co *co;
	void (*fn)(void *round);
};

static void helper_main(void *arg)
{
	struct helper *h = arg;
	void *round;
	while (weft_chan_recv(h->in, &round, -1) == 0 && round)
		h->fn(round);
}

static void helper_start(struct helper *h, void (*fn)(void *round))
{
	h->fn = fn;
	h->in = weft_chan_new(sizeof(void *), 0);
	CHECK(h->in);
	h->co = go(helper_main, h);
}

static void helper_give(struct helper *h, void *round)
{
	CHECK(weft_chan_send(h->in, &round, -1) == 0);
}

static void helper_stop(struct helper *h)
{
	helper_give(h, NULL);
	join(h->co);
	weft_chan_free(h->in);
}

/* ------------------------------------------------------ condition variable */

/* The waiter holds the mutex until it waits; the helper takes the mutex
 * next, so it knows the waiter is queued, and only then asks for the
 * broadcast.  The waiter frees the cond (and its mutex) as soon as its wait
 * returns. */
struct cond_round {
	weft_cond *c;
	weft_mutex *m;
	weft_chan *jobs;
	atomic_int flag;
};

static void ask_broadcast_once_queued(void *round)
{
	struct cond_round *cr = round;
	CHECK(weft_mutex_lock(cr->m) == 0);
	CHECK(weft_mutex_unlock(cr->m) == 0);
	ask(cr->jobs, JOB_BROADCAST, cr->c, &cr->flag);	/* last touch of *cr */
}

static void cond_rounds(weft_chan *jobs)
{
	struct helper h;
	helper_start(&h, ask_broadcast_once_queued);
	for (unsigned i = 0; i < rounds(); i++) {
		struct cond_round cr = { .c = weft_cond_new(), .m = weft_mutex_new(), .jobs = jobs };
		CHECK(cr.c && cr.m);
		CHECK(weft_mutex_lock(cr.m) == 0);
		helper_give(&h, &cr);
		while (!atomic_load(&cr.flag))
			CHECK(weft_cond_wait(cr.c, cr.m, -1) == 0);
		CHECK(weft_mutex_unlock(cr.m) == 0);
		weft_cond_free(cr.c);
		weft_mutex_free(cr.m);
	}
	helper_stop(&h);
}

Test(lifetime, cond_freed_right_after_broadcast, .timeout = 600)
{
	both_wakers(cond_rounds);
}

/* ------------------------------------------------------ mutex */

/* The holder unlocks while the helper waits (in normal mode, or handed over
 * in starving mode when the holder kept it over 1 ms); the helper takes it,
 * unlocks and frees it at once, as the last user. */
struct mutex_round {
	weft_mutex *m;
	atomic_int waiting;
};

static void last_user(void *round)
{
	struct mutex_round *mr = round;
	weft_mutex *m = mr->m;
	atomic_store(&mr->waiting, 1);	/* last touch of *mr */
	CHECK(weft_mutex_lock(m) == 0);
	CHECK(weft_mutex_unlock(m) == 0);
	weft_mutex_free(m);
}

static void mutex_rounds(void *arg)
{
	(void)arg;
	struct helper h;
	helper_start(&h, last_user);
	for (unsigned i = 0; i < rounds(); i++) {
		struct mutex_round mr = { .m = weft_mutex_new() };
		CHECK(mr.m);
		CHECK(weft_mutex_lock(mr.m) == 0);
		helper_give(&h, &mr);
		while (!atomic_load(&mr.waiting))
			weft_yield();
		/* Let it park (or, one round in 64, start starving). */
		int64_t hold = i % 64 == 0 ? weft_now() + 2 * MS : weft_now() + 2000;
		while (weft_now() < hold)
			;
		CHECK(weft_mutex_unlock(mr.m) == 0);
	}
	helper_stop(&h);
}

Test(lifetime, mutex_freed_by_the_waiter_it_was_handed_to, .timeout = 600)
{
	run(2, mutex_rounds, NULL);
}

/* ------------------------------------------------------ semaphore */

/* The waker's release hands its permit to the parked acquirer, which frees
 * the semaphore at once. */
static void sem_rounds(weft_chan *jobs)
{
	for (unsigned i = 0; i < rounds(); i++) {
		weft_sem *s = weft_sem_new(0);
		CHECK(s);
		ask(jobs, JOB_SEM_RELEASE, s, NULL);
		CHECK(weft_sem_acquire(s, -1) == 0);
		weft_sem_free(s);
	}
}

Test(lifetime, sem_freed_right_after_its_acquire, .timeout = 600)
{
	both_wakers(sem_rounds);
}

/* ------------------------------------------------------ reader-writer lock */

/* A writer let in by the last reader's unlock (the waker's), and a reader
 * let in by the waker's write unlock, each free the lock at once. */
static void rwlock_rounds(weft_chan *jobs)
{
	for (unsigned i = 0; i < rounds(); i++) {
		weft_rwlock *l = weft_rwlock_new();
		CHECK(l);
		CHECK(weft_rwlock_rdlock(l, -1) == 0);
		ask(jobs, JOB_RW_UNLOCK, l, NULL);	/* gives back our read hold */
		CHECK(weft_rwlock_wrlock(l, -1) == 0);
		CHECK(weft_rwlock_unlock(l) == 0);
		weft_rwlock_free(l);

		l = weft_rwlock_new();
		CHECK(l);
		atomic_int held = 0;
		ask(jobs, JOB_RW_WRITE, l, &held);
		while (!atomic_load(&held))
			weft_yield();
		CHECK(weft_rwlock_rdlock(l, -1) == 0);
		CHECK(weft_rwlock_unlock(l) == 0);
		weft_rwlock_free(l);
	}
}

Test(lifetime, rwlock_freed_right_after_the_lock_it_was_handed, .timeout = 600)
{
	both_wakers(rwlock_rounds);
}

/* ------------------------------------------------------ group */

/* The last member's leave wakes the waiter after releasing the group's
 * lock; the waiter frees the group at once, while the member is still
 * leaving (switching out).  The member spins a moment so the waiter
 * usually parks first. */
static void member_spins(void *arg)
{
	(void)arg;
	int64_t until = weft_now() + 2000;
	while (weft_now() < until)
		;
}

/* A quarter of the rounds per waiter, since each round spawns a coroutine;
 * under TSan, whose fiber creation costs milliseconds, 1,000 at most. */
static unsigned group_round_count(void)
{
	unsigned n = rounds() / 4;
#ifdef WEFT_TEST_TSAN
	if (n > 1000)
		n = 1000;
#endif
	return n;
}

static void group_rounds(void)
{
	for (unsigned i = 0, n = group_round_count(); i < n; i++) {
		weft_group *g = weft_group_new();
		CHECK(g);
		CHECK(weft_group_spawn(g, member_spins, NULL) != NULL);
		CHECK(weft_group_wait(g, -1) == 0);
		CHECK(weft_group_free(g) == 0);
	}
}

static void group_rounds_co(void *arg)
{
	(void)arg;
	group_rounds();
}

Test(lifetime, group_freed_right_after_its_wait, .timeout = 600)
{
	run(2, group_rounds_co, NULL);	/* the waiter a coroutine */
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	group_rounds();			/* the waiter a plain thread */
	cr_assert_eq(weft_shutdown(), 0);
}
