/* SPDX-License-Identifier: MIT */
/*
 * Adversarial scenes against the idletax scheduler change (idle.c's last
 * spinner wake, the spinner limit counting the worker itself, steal.c's
 * `graced` runnext grace, queue.c's batch notifies every 32): bursts of
 * spawns from one coroutine while the others go idle, plain threads waking
 * coroutines, a channel close waking thousands, ping-pong with idle
 * workers, yield loops, each at 2, 4 and 8 workers and looped.  A lost
 * wake is a hang (.timeout fails it); a coroutine run twice shows in its
 * run count.  White-box: the last test reads `graced` and the runnext slot.
 */
#include "harness.h"
#include <pthread.h>
#include <stdatomic.h>

#include "atomic.h"
#include "coro_test.h"
#include "monitor.h"
#include "worker.h"

static const unsigned worker_counts[] = { 2, 4, 8 };
#define NCOUNTS (sizeof worker_counts / sizeof worker_counts[0])

/* ------------------------------------------------------ spawn bursts */

#define BURST_MAX 200
static atomic_uint ran[BURST_MAX];
static atomic_uint left;

static void burst_child(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	atomic_fetch_add(&ran[i], 1);
	for (volatile int k = 0; k < 50 * (int)(i % 7); k++)
		;
	atomic_fetch_sub(&left, 1);
}

/* One coroutine spawns bursts of 1..BURST_MAX children, then parks in
 * joins (so its worker goes idle too) and waits for all; between bursts
 * every worker has gone idle (a short sleep parks everyone). */
static void burst_root(void *arg)
{
	unsigned rounds = (unsigned)(uintptr_t)arg;
	weft_co *kids[BURST_MAX];
	for (unsigned r = 0; r < rounds; r++) {
		unsigned n = 1 + (r * 37) % BURST_MAX;
		for (unsigned i = 0; i < n; i++)
			atomic_store(&ran[i], 0);
		atomic_store(&left, n);
		for (unsigned i = 0; i < n; i++)
			kids[i] = go(burst_child, (void *)(uintptr_t)i);
		for (unsigned i = 0; i < n; i++)
			join(kids[i]);
		CHECK(atomic_load(&left) == 0);
		for (unsigned i = 0; i < n; i++)
			CHECK(atomic_load(&ran[i]) == 1);	/* never run twice */
		if (r % 8 == 0)
			weft_sleep(weft_now() + 200 * 1000);	/* all go idle */
	}
}

Test(idletax_adv, spawn_bursts_with_idle_workers, .timeout = 120)
{
	for (unsigned c = 0; c < NCOUNTS; c++)
		run(worker_counts[c], burst_root, (void *)(uintptr_t)scaled(300, 60, 10));
}

/* ------------------------------------------------ plain thread wakes */

#define PT_CO 64
static weft_sem *pt_sem[PT_CO];
static weft_chan *pt_ack;
static unsigned pt_rounds;

static void pt_waiter(void *arg)
{
	weft_sem *s = arg;
	for (unsigned r = 0; r < pt_rounds; r++) {
		CHECK(weft_sem_acquire(s, -1) == 0);
		int one = 1;
		CHECK(weft_chan_send(pt_ack, &one, -1) == 0);
	}
}

/* A plain thread releases every waiter's semaphore (into the injection
 * queue, a notify each) and blocks for all the acks, round after round:
 * each round starts with every worker idle. */
static void *pt_thread(void *arg)
{
	(void)arg;
	for (unsigned r = 0; r < pt_rounds; r++) {
		for (unsigned i = 0; i < PT_CO; i++)
			CHECK(weft_sem_release(pt_sem[i]) == 0);
		for (unsigned i = 0; i < PT_CO; i++) {
			int v;
			CHECK(weft_chan_recv(pt_ack, &v, -1) == 0);
		}
	}
	return NULL;
}

static void pt_root(void *arg)
{
	(void)arg;
	pt_ack = weft_chan_new(sizeof(int), 0);
	weft_co *co[PT_CO];
	for (unsigned i = 0; i < PT_CO; i++) {
		pt_sem[i] = weft_sem_new(0);
		co[i] = go(pt_waiter, pt_sem[i]);
	}
	pthread_t t;
	CHECK(pthread_create(&t, NULL, pt_thread, NULL) == 0);
	for (unsigned i = 0; i < PT_CO; i++)
		join(co[i]);
	CHECK(pthread_join(t, NULL) == 0);	/* its last recvs are done or about to be */
	for (unsigned i = 0; i < PT_CO; i++)
		weft_sem_free(pt_sem[i]);
	weft_chan_free(pt_ack);
}

Test(idletax_adv, plain_thread_wakes, .timeout = 120)
{
	pt_rounds = scaled(300, 50, 10);
	for (unsigned c = 0; c < NCOUNTS; c++)
		run(worker_counts[c], pt_root, NULL);
}

/* ------------------------------------------------ channel close wakes */

#define CL_CO 3000
static weft_chan *cl_ch;
static atomic_uint cl_woken;

static void cl_receiver(void *arg)
{
	(void)arg;
	int v;
	CHECK(weft_chan_recv(cl_ch, &v, -1) == -1 && errno == EPIPE);
	atomic_fetch_add(&cl_woken, 1);
}

static weft_co *cl_co[CL_CO];

/* Thousands parked on one channel, closed by one coroutine: a batch of
 * wakes, notified at its first push and every 32 after. */
static void cl_root(void *arg)
{
	unsigned rounds = (unsigned)(uintptr_t)arg;
	for (unsigned r = 0; r < rounds; r++) {
		cl_ch = weft_chan_new(sizeof(int), 0);
		atomic_store(&cl_woken, 0);
		unsigned n = CL_CO - (r * 97) % 1000;
		uint64_t parks = stats_now().total.parks;
		for (unsigned i = 0; i < n; i++)
			cl_co[i] = go(cl_receiver, NULL);
		wait_parks(parks, n);
		CHECK(weft_chan_close(cl_ch) == 0);
		for (unsigned i = 0; i < n; i++)
			join(cl_co[i]);
		CHECK(atomic_load(&cl_woken) == n);
		weft_chan_free(cl_ch);
	}
}

Test(idletax_adv, channel_close_wakes_thousands, .timeout = 180)
{
	for (unsigned c = 0; c < NCOUNTS; c++)
		run(worker_counts[c], cl_root, (void *)(uintptr_t)scaled(20, 4, 1));
}

/* ------------------------------------------------ ping-pong + yielders */

struct pp {
	weft_chan *a, *b;
	unsigned n;
};

static void pp_ping(void *arg)
{
	struct pp *p = arg;
	for (unsigned i = 0; i < p->n; i++) {
		int v = (int)i, got;
		CHECK(weft_chan_send(p->a, &v, -1) == 0);
		CHECK(weft_chan_recv(p->b, &got, -1) == 0 && got == (int)i);
	}
}

static void pp_pong(void *arg)
{
	struct pp *p = arg;
	for (unsigned i = 0; i < p->n; i++) {
		int v;
		CHECK(weft_chan_recv(p->a, &v, -1) == 0 && v == (int)i);
		CHECK(weft_chan_send(p->b, &v, -1) == 0);
	}
}

static void yielder(void *arg)
{
	unsigned n = (unsigned)(uintptr_t)arg;
	for (unsigned i = 0; i < n; i++)
		weft_yield();
}

/* Ping-pong pairs, while a few yielders keep one or two workers busy and
 * the rest go idle between exchanges. */
static void pp_root(void *arg)
{
	unsigned pairs = (unsigned)(uintptr_t)arg;
	struct pp p[8];
	weft_co *co[2 * 8 + 2];
	unsigned k = 0;
	for (unsigned i = 0; i < pairs; i++) {
		p[i] = (struct pp){ weft_chan_new(sizeof(int), 0), weft_chan_new(sizeof(int), 0),
				    scaled(3000, 500, 50) };
		co[k++] = go(pp_ping, &p[i]);
		co[k++] = go(pp_pong, &p[i]);
	}
	co[k++] = go(yielder, (void *)(uintptr_t)scaled(20000, 3000, 300));
	co[k++] = go(yielder, (void *)(uintptr_t)scaled(20000, 3000, 300));
	for (unsigned i = 0; i < k; i++)
		join(co[i]);
	for (unsigned i = 0; i < pairs; i++) {
		weft_chan_free(p[i].a);
		weft_chan_free(p[i].b);
	}
}

Test(idletax_adv, ping_pong_and_yield_loops, .timeout = 180)
{
	for (unsigned c = 0; c < NCOUNTS; c++)
		for (unsigned pairs = 1; pairs <= 8; pairs *= 2)
			run(worker_counts[c], pp_root, (void *)(uintptr_t)pairs);
}

/* ------------------------------------- every worker needed at once */

/*
 * Invariant (2) with no rescue: the root spawns one CPU-bound child per
 * other worker (plus a no-op one left last, in the runnext slot the
 * monitor would rescue) and then spins, never yielding, until every child
 * has started; each child spins likewise until all have.  The children
 * wait in the root's deque (and the first thief's, after steal_more):
 * the monitor's rescue of a stuck worker (weft__schedule_stuck) looks at
 * its runnext slot and ready FIFO, never its deque, so only the chain of
 * wakes (a displaced push notifies; the last spinner that found work wakes
 * another while work is in sight) gets every worker running.  A wake the
 * chain skips leaves the barrier short for good: CHECK fails after 10 s
 * with the count that started.
 */
static atomic_uint bar_in;
static unsigned bar_need;

static void bar_wait(void)
{
	int64_t give_up = weft_now() + slack(10000 * MS);
	atomic_fetch_add(&bar_in, 1);
	while (atomic_load(&bar_in) < bar_need) {
		if (weft_now() > give_up) {
			fprintf(stderr, "lost wake: %u of %u at the barrier after 10 s\n",
				atomic_load(&bar_in), bar_need);
			CHECK(!"every worker running");
		}
	}
}

static void bar_child(void *arg)
{
	(void)arg;
	bar_wait();
}

static void noop(void *arg)
{
	(void)arg;
}

static void bar_root(void *arg)
{
	unsigned rounds = (unsigned)(uintptr_t)arg;
	unsigned k = weft__rt.nworkers - 1;
	weft_co *kids[64];
	for (unsigned r = 0; r < rounds; r++) {
		atomic_store(&bar_in, 0);
		bar_need = k + 1;
		for (unsigned i = 0; i < k; i++)
			kids[i] = go(bar_child, NULL);
		kids[k] = go(noop, NULL);
		bar_wait();
		for (unsigned i = 0; i <= k; i++)
			join(kids[i]);
		weft_sleep(weft_now() + 100 * 1000);	/* every worker goes idle */
	}
}

Test(idletax_adv, every_worker_needed_at_once, .timeout = 300)
{
	static const unsigned counts[] = { 2, 3, 4, 6, 8 };
	for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++)
		run(counts[c], bar_root, (void *)(uintptr_t)scaled(counts[c] > 4 ? 30 : 100, 10, 2));
}

/* ------------------------------- the last child waits for the monitor */

/*
 * FAILS on idletax (ece22dd on): a parallel-for whose root stays on its
 * CPU.  The root spawns K children (K-1 displaced to its deque, the last
 * in its runnext slot) and then is stuck (a plain nanosleep loop: a
 * worker that runs no other coroutine, without taking a CPU from the 2 of
 * the test machine) until every child has started.  The spinner that
 * steals the last deque item is the last spinner, and
 * weft__idle_stop_spinning (idle.c) looks for work in sight *without the
 * runnext slots*: it wakes nobody, so the last child waits for the
 * monitor's stuck sample (weft__schedule_stuck, 1 ms ticks or more)
 * instead of the thief that the old unconditional wake brought at once.
 * The event compared, no clock: whether the monitor woke at all between
 * the spawns and the last child's start.  With the runnext slots looked
 * at again (work_in_sight(true) in weft__idle_stop_spinning) 10-33% of
 * rounds see no monitor wakeup (the thief comes in ~0.1 ms, the monitor
 * wakes every 1 ms or more); on idletax none (only the monitor's sample
 * gets the slot run).  Fails as: "N workers: the last child started only
 * after a monitor wakeup in 200 of 200 rounds".
 */
#define PF_ROUNDS 200
static atomic_uint pf_started;
static unsigned pf_kids, pf_quick;

static void pf_child(void *arg)
{
	(void)arg;
	atomic_fetch_add(&pf_started, 1);
	nanosleep(&(struct timespec){ .tv_nsec = 2 * MS }, NULL);	/* its share, stuck */
}

static void pf_root(void *arg)
{
	(void)arg;
	weft_co *co[64];
	pf_kids = weft__rt.nworkers - 1;
	for (unsigned r = 0; r < PF_ROUNDS; r++) {
		atomic_store(&pf_started, 0);
		uint64_t mon = weft__monitor_wakeups();
		for (unsigned i = 0; i < pf_kids; i++)
			co[i] = go(pf_child, NULL);
		/* its own share: stuck until every child started */
		while (atomic_load(&pf_started) < pf_kids)
			nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 }, NULL);
		pf_quick += weft__monitor_wakeups() == mon;
		for (unsigned i = 0; i < pf_kids; i++)
			join(co[i]);
		weft_sleep(weft_now() + MS / 2);	/* every worker idle again */
	}
}

Test(idletax_adv, parallel_for_last_child_waits_for_the_monitor, .timeout = 120)
{
	static const unsigned counts[] = { 3, 4, 8 };
	/* Under valgrind or a sanitizer the chain of woken thieves down the
	 * children outlasts a monitor tick, whatever wakes them */
	bool checked = !RUNNING_ON_VALGRIND && !SANITIZED;
	for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++) {
		pf_quick = 0;
		run(counts[c], pf_root, NULL);
		fprintf(stderr, "%u workers: all children started with no monitor wakeup in %u of %u rounds\n",
			counts[c], pf_quick, PF_ROUNDS);
		/* Judged at 3 and 4 workers: one or two woken thieves between
		 * the spawns and the last child.  At 8 (on 2 CPUs) the chain is
		 * seven thieves, each napping its runnext grace (steal.c), and
		 * it races the monitor's tick whatever the wake rule: printed,
		 * not judged. */
		if (!checked || counts[c] > 4)
			continue;
		cr_assert_geq(pf_quick, 5,
			      "%u workers: the last child started only after a monitor wakeup in "
			      "%u of %u rounds (a thief should have been woken for it)",
			      counts[c], PF_ROUNDS - pf_quick, PF_ROUNDS);
	}
	if (!checked)
		cr_skip_test("the scenes ran; the monitor's wakeups are not judged under valgrind or a sanitizer");
}
