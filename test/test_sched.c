/* SPDX-License-Identifier: MIT */
/* Scheduler: spawn/join/detach/yield semantics, fairness, migration, and
 * the park/wake protocol hammered across workers and plain threads. */
#include "harness.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weft.h"
#include "coro_test.h"

static void start(unsigned workers)
{
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = workers)), 0, "errno %d", errno);
}

static void stop(void)
{
	cr_assert_eq(weft_shutdown(), 0, "errno %d", errno);
}

static void nop(void *arg) { (void)arg; }

Test(sched, calls_outside_the_runtime)
{
	errno = 0;
	cr_assert_null(weft_spawn(nop, NULL));
	cr_assert_eq(errno, EPERM);
	cr_assert_null(weft_self());
	cr_assert_eq(weft_worker_id(), -1);
	cr_assert_eq(weft_worker_count(), 0);
	cr_assert_eq(weft_shutdown(), -1);
	cr_assert_eq(errno, ESRCH);
	cr_assert_eq(weft_co_id(NULL), 0);
	int64_t a = weft_now(), b = weft_now();
	cr_assert(a > 0 && b >= a);
}

static unsigned long counter;
static void bump(void *arg) { (void)arg; __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED); }

/* TSan keeps a thread context per fiber and dies past 8128 live ones, so
 * its build runs the same tests smaller. */
#ifdef WEFT_TEST_TSAN
#define FANOUT 100u
#define HAMMER_PAIRS 3000
#define LIVE 4000
#else
#define HAMMER_PAIRS 20000
#define LIVE 100000
#define FANOUT 1000u	/* 1,000,000 spawns */
#endif

static void spawner(void *arg)
{
	(void)arg;
	weft_co *kids[FANOUT];
	for (unsigned i = 0; i < FANOUT - 1; i++)
		cr_assert_not_null(kids[i] = weft_spawn(bump, NULL));
	for (unsigned i = 0; i < FANOUT - 1; i++)
		cr_assert_eq(weft_join(kids[i]), 0);
	bump(NULL);
}

static void *plain_spawner(void *arg)
{
	(void)arg;
	weft_co *kids[FANOUT];
	for (unsigned i = 0; i < FANOUT; i++)
		kids[i] = weft_spawn(spawner, NULL);
	for (unsigned i = 0; i < FANOUT; i++)
		if (!kids[i] || weft_join(kids[i]) != 0)
			abort();
	return NULL;
}

static void tree_root(void *arg)
{
	(void)arg;
	weft_co *kids[FANOUT / 2];
	for (unsigned i = 0; i < FANOUT / 2; i++)
		cr_assert_not_null(kids[i] = weft_spawn(spawner, NULL));
	for (unsigned i = 0; i < FANOUT / 2; i++)
		cr_assert_eq(weft_join(kids[i]), 0);
}

Test(sched, a_million_nested_spawns, .timeout = 900)	/* valgrind: minutes */
{
	start(2);
	counter = 0;
	/* half the tree from a coroutine, the other half from two plain threads
	 * (FANOUT/2 spawners each... one of them a full FANOUT, see below) */
	weft_co *root = weft_spawn(tree_root, NULL);
	pthread_t t;
	pthread_create(&t, NULL, plain_spawner, NULL);
	cr_assert_eq(weft_join(root), 0);
	pthread_join(t, NULL);
	stop();
	cr_assert_eq(counter, (unsigned long)FANOUT * FANOUT * 3 / 2);
}

/* Three coroutines on one worker, each yielding: they must interleave
 * round-robin.  They are spawned from a coroutine, so all three are
 * runnable before the first one runs. */
enum { ROUNDS = 200 };
static int fair_log[3 * ROUNDS];
static unsigned fair_n;

static void fair(void *arg)
{
	for (int i = 0; i < ROUNDS; i++) {
		fair_log[fair_n++] = (int)(intptr_t)arg;
		weft_yield();
	}
}

static void fair_root(void *arg)
{
	(void)arg;
	weft_co *co[3];
	for (int i = 0; i < 3; i++)
		co[i] = weft_spawn(fair, (void *)(intptr_t)i);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(weft_join(co[i]), 0);
}

Test(sched, yield_is_round_robin)
{
	fair_n = 0;
	cr_assert_eq(weft_main(fair_root, NULL, &WEFT_CONFIG(.workers = 1)), 0);
	cr_assert_eq(fair_n, 3 * ROUNDS);
	cr_assert(fair_log[0] != fair_log[1] && fair_log[1] != fair_log[2] && fair_log[0] != fair_log[2]);
	for (unsigned i = 3; i < fair_n; i++)
		cr_assert_eq(fair_log[i], fair_log[i - 3], "out of turn at %u", i);
}

/* A yielder must let a freshly woken or spawned coroutine run too. */
static unsigned long spins;
static void spin_until(void *arg)
{
	while (!__atomic_load_n((int *)arg, __ATOMIC_ACQUIRE)) {
		spins++;
		weft_yield();
	}
}

static void set_flag(void *arg) { __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE); }

Test(sched, yielder_does_not_starve_others)
{
	start(1);
	int flag = 0;
	weft_co *a = weft_spawn(spin_until, &flag);
	weft_co *b = weft_spawn(set_flag, &flag);
	cr_assert_eq(weft_join(a), 0);
	cr_assert_eq(weft_join(b), 0);
	stop();
}

static void join_errors(void *arg)
{
	(void)arg;
	cr_assert_eq(weft_join(weft_self()), -1);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(weft_shutdown(), -1);
	cr_assert_eq(errno, EDEADLK);
	cr_assert_geq(weft_worker_id(), 0);
	cr_assert_lt((unsigned)weft_worker_id(), weft_worker_count());
}

static void wait_flag(void *arg)
{
	while (!__atomic_load_n((int *)arg, __ATOMIC_ACQUIRE))
		weft_yield();
}

/* Busy-waits for *flag without ever switching out. */
static void spin_without_switching(const int *flag)
{
	while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE))
		;
}

/* Coroutines that compute and yield, all on one worker, spread to the
 * other once it is idle: yielders are kept from thieves only while no
 * worker sleeps (worker.c, pop_yielder).  The other worker is kept busy
 * (a coroutine that does not switch) until every one of them has yielded
 * once, so none was stolen on its way in. */
static unsigned spread_mask, spread_yielded;
static int spread_blocker_on;

/* Computes in 200 us slices between yields until both workers have run
 * one, or 10 s (30 under valgrind, which runs one thread at a time) have
 * passed: the bound only ends a failing run. */
static void compute_and_yield(void *arg)
{
	int64_t give_up = *(const int64_t *)arg;
	for (int i = 0; __atomic_load_n(&spread_mask, __ATOMIC_RELAXED) != 3u && weft_now() < give_up;
	     i++) {
		int64_t until = weft_now() + 200 * 1000;
		while (weft_now() < until)
			;
		__atomic_fetch_or(&spread_mask, 1u << weft_worker_id(), __ATOMIC_RELAXED);
		if (i == 0)
			__atomic_fetch_add(&spread_yielded, 1, __ATOMIC_RELEASE);
		weft_yield();
	}
}

static void block_until_all_yielded(void *arg)
{
	(void)arg;
	__atomic_store_n(&spread_blocker_on, weft_worker_id() + 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&spread_yielded, __ATOMIC_ACQUIRE) < 8)
		;
}

static void spread_root(void *arg)
{
	(void)arg;
	/* the blocker waits in our runnext slot, which the other worker takes
	 * while we do not switch (the monitor notifies it) */
	weft_co *blocker = weft_spawn(block_until_all_yielded, NULL), *co[8];
	cr_assert_not_null(blocker);
	spin_without_switching(&spread_blocker_on);
	cr_assert_neq(spread_blocker_on, weft_worker_id() + 1);
	int64_t give_up = weft_now() + slack(10000 * MS);
	for (int i = 0; i < 8; i++)
		cr_assert_not_null(co[i] = weft_spawn(compute_and_yield, &give_up));
	for (int i = 0; i < 8; i++)
		cr_assert_eq(weft_join(co[i]), 0);
	cr_assert_eq(weft_join(blocker), 0);
}

Test(sched, yielders_spread_to_an_idle_worker, .timeout = 60)
{
	/* Under valgrind, which runs one thread at a time, the scene does not
	 * come about on a busy host: in one such run the idle worker slept
	 * and woke 448 times and tried 1,796 steals in the 30 s without
	 * getting one of the yielders (WEFT_STATS), and the library before
	 * the budget failed alike, 2 runs of 2.  Natively it takes them at
	 * once. */
	if (RUNNING_ON_VALGRIND)
		cr_skip_test("valgrind runs one thread at a time: the scene does not come about");
	spread_mask = spread_yielded = 0;
	spread_blocker_on = 0;
	cr_assert_eq(weft_main(spread_root, NULL, &WEFT_CONFIG(.workers = 2)), 0);
	cr_assert_eq(spread_mask, 3u, "ran on workers %#x only", spread_mask);
}

/* What a coroutine spawns or wakes waits in its worker's runnext slot; if
 * that coroutine then runs on without switching, another worker must take
 * the slot (after its grace), or the two would wait for each other forever. */
static void spawn_then_spin(void *arg)
{
	weft_co *co = weft_spawn(set_flag, arg);
	cr_assert_not_null(co);
	cr_assert_eq(weft_detach(co), 0);
	spin_without_switching(arg);
}

struct wake_spin { weft_chan *ch; int flag; };

static void wake_then_spin(void *arg)
{
	struct wake_spin *ws = arg;
	int v = 1;
	cr_assert_eq(weft_chan_send(ws->ch, &v, -1), 0);
	spin_without_switching(&ws->flag);
}

static void receiver(void *arg)
{
	struct wake_spin *ws = arg;
	int v;
	cr_assert_eq(weft_chan_recv(ws->ch, &v, -1), 0);
	set_flag(&ws->flag);
}

Test(sched, a_busy_workers_next_coroutine_is_taken_by_another, .timeout = 30)
{
	start(2);
	int flag = 0;
	weft_co *a = weft_spawn(spawn_then_spin, &flag);
	cr_assert_not_null(a);
	cr_assert_eq(weft_join(a), 0);
	struct wake_spin ws = { .ch = weft_chan_new(sizeof(int), 0) };
	cr_assert_not_null(ws.ch);
	weft_stats st = { .size = sizeof st };
	cr_assert_eq(weft_stats_get(&st), 0);
	uint64_t parks = st.total.parks;
	weft_co *r = weft_spawn(receiver, &ws);
	cr_assert_not_null(r);
	do {	/* until it parks: the send then wakes it into the sender's runnext */
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 }, NULL);
		cr_assert_eq(weft_stats_get(&st), 0);
	} while (st.total.parks == parks);
	weft_co *w = weft_spawn(wake_then_spin, &ws);
	cr_assert_not_null(w);
	cr_assert_eq(weft_join(w), 0);
	cr_assert_eq(weft_join(r), 0);
	weft_chan_free(ws.ch);
	stop();
}

Test(sched, misuse_is_reported)
{
	start(2);
	cr_assert_eq(weft_init(NULL), -1);
	cr_assert_eq(errno, EALREADY);
	cr_assert_eq(weft_join(NULL), -1);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(weft_detach(NULL), -1);
	cr_assert_eq(errno, EINVAL);
	cr_assert_null(weft_spawn(NULL, NULL));
	cr_assert_eq(errno, EINVAL);
	weft_co *co = weft_spawn(join_errors, NULL);
	cr_assert_eq(weft_join(co), 0);

	int flag = 0;
	co = weft_spawn(wait_flag, &flag);
	cr_assert_eq(weft_detach(co), 0);
	cr_assert_eq(weft_detach(co), -1, "detached twice");
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(weft_join(co), -1, "joined after detach");
	cr_assert_eq(errno, EINVAL);
	__atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
	stop();
}

Test(sched, detached_coroutines_finish_before_shutdown)
{
	start(2);
	counter = 0;
	for (int i = 0; i < 10000; i++) {
		weft_co *co = weft_spawn(bump, NULL);
		cr_assert_not_null(co);
		cr_assert_eq(weft_detach(co), 0);
	}
	stop();
	cr_assert_eq(counter, 10000);
}

static void yield_some(void *arg)
{
	for (uintptr_t i = 0; i < (uintptr_t)arg; i++)
		weft_yield();
	bump(NULL);
}

Test(sched, ids_are_unique_and_never_reused)
{
	enum { N = 3000 };
	static uint64_t ids[2 * N];
	for (int round = 0; round < 2; round++) {	/* across init cycles too */
		start(2);
		weft_co *co[N];
		for (int i = 0; i < N; i++) {
			co[i] = weft_spawn(yield_some, (void *)(uintptr_t)(i % 3));
			ids[round * N + i] = weft_co_id(co[i]);
		}
		for (int i = 0; i < N; i++)
			cr_assert_eq(weft_join(co[i]), 0);
		stop();
	}
	for (int i = 0; i < 2 * N; i++) {
		cr_assert_neq(ids[i], 0);
		for (int j = i + 1; j < 2 * N; j++)
			cr_assert_neq(ids[i], ids[j], "id %lu twice", (unsigned long)ids[i]);
	}
}

/* The park/wake protocol under fire: joins of coroutines that finish while
 * the joiner is parking, from coroutines and plain threads at once. */
static void joiner(void *arg)
{
	weft_co *target = arg;
	if (weft_join(target) != 0)
		abort();
	bump(NULL);
}

static void *plain_joiner(void *arg)
{
	for (int i = 0; i < 2000; i++) {
		weft_co *co = weft_spawn(yield_some, (void *)(uintptr_t)(i % 2));
		if (!co || weft_join(co) != 0)
			abort();
	}
	(void)arg;
	return NULL;
}

Test(sched, park_wake_hammer, .timeout = 300)
{
	start(2);
	counter = 0;
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, plain_joiner, NULL);
	enum { PAIRS = HAMMER_PAIRS };
	weft_co **js = calloc(PAIRS, sizeof *js);
	for (int i = 0; i < PAIRS; i++) {
		weft_co *target = weft_spawn(yield_some, (void *)(uintptr_t)(i % 3));
		js[i] = weft_spawn(joiner, target);
	}
	for (int i = 0; i < PAIRS; i++)
		cr_assert_eq(weft_join(js[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	stop();
	free(js);
	cr_assert_eq(counter, 2 * PAIRS + 4000);
}

/* errno follows the coroutine; a coroutine that migrates still reads its own
 * value, and the runtime's own errors are reported on the current thread. */
static unsigned migrations;

/* The safe pattern for code that suspends (docs/design.md): touch errno
 * through out-of-line helpers, so no address of it is cached across a
 * suspension (glibc declares __errno_location const). */
__attribute__((noinline)) static int read_errno(void)
{
	__asm__ volatile("" ::: "memory");
	return errno;
}

__attribute__((noinline)) static void write_errno(int e)
{
	__asm__ volatile("" ::: "memory");
	errno = e;
}

enum { KEEPERS = 64, MIN_ROUNDS = 500, MAX_ROUNDS = 100000 };

static void errno_keeper(void *arg)
{
	int mine = (int)(intptr_t)arg;
	int where = weft_worker_id();
	write_errno(mine);
	/* at least MIN_ROUNDS, and on until some coroutine has migrated */
	for (int i = 0; i < MAX_ROUNDS; i++) {
		if (i >= MIN_ROUNDS && __atomic_load_n(&migrations, __ATOMIC_RELAXED))
			break;
		weft_yield();
		if (read_errno() != mine)
			abort();
		if (weft_worker_id() != where) {
			__atomic_fetch_add(&migrations, 1, __ATOMIC_RELAXED);
			where = weft_worker_id();
		}
		/* a failing call after a suspension reports on this thread */
		if (weft_join(NULL) != -1 || read_errno() != EINVAL)
			abort();
		write_errno(mine);
	}
}

/* All keepers start on the root's worker; the other worker steals some. */
static void errno_root(void *arg)
{
	(void)arg;
	weft_co *co[KEEPERS];
	for (int i = 0; i < KEEPERS; i++)
		co[i] = weft_spawn(errno_keeper, (void *)(intptr_t)(1000 + i));
	for (int i = 0; i < KEEPERS; i++)
		cr_assert_eq(weft_join(co[i]), 0);
}

Test(sched, errno_survives_migration)
{
	migrations = 0;
	cr_assert_eq(weft_main(errno_root, NULL, &WEFT_CONFIG(.workers = 2)), 0);
	/* Under valgrind on a busy host the yielders may not spread at all
	 * (yielders_spread_to_an_idle_worker): errno was checked across
	 * every yield all the same, on one worker. */
	if (RUNNING_ON_VALGRIND && migrations == 0)
		cr_skip_test("no migration under valgrind: errno checked on one worker only");
	cr_assert_gt(migrations, 0, "coroutines never moved between workers");
}

/*
 * A coroutine that parks while its worker's runnext slot holds the coroutine
 * it just woke switches straight to that one (coro.c).  Two coroutines
 * handing a token over two rendezvous channels on one worker do nothing
 * else: each keeps its own errno, and the chain still leaves the scheduler
 * its fairness turns, so a sleeper's timer fires and a coroutine spawned
 * from a plain thread runs while the pair goes on (else: the timeout).
 */
struct hand_off {
	weft_chan *to_pong, *to_ping;
	int rounds;		/* the pair's round trips, or 0: until both flags */
	int slept, injected;	/* atomic */
	unsigned long trips;
};

static bool hand_off_done(struct hand_off *h)
{
	if (h->rounds)
		return h->trips == (unsigned long)h->rounds;
	return __atomic_load_n(&h->slept, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&h->injected, __ATOMIC_ACQUIRE);
}

static void hand_off_ping(void *arg)
{
	struct hand_off *h = arg;
	int more;
	do {
		more = !hand_off_done(h);
		write_errno(1000 + h->rounds);
		cr_assert_eq(weft_chan_send(h->to_pong, &more, -1), 0);
		cr_assert_eq(read_errno(), 1000 + h->rounds);
		int back;
		cr_assert_eq(weft_chan_recv(h->to_ping, &back, -1), 0);
		cr_assert_eq(read_errno(), 1000 + h->rounds);
		__atomic_store_n(&h->trips, h->trips + 1, __ATOMIC_RELAXED);
	} while (more);
}

static void hand_off_pong(void *arg)
{
	struct hand_off *h = arg;
	int more;
	do {
		write_errno(2000 + h->rounds);
		cr_assert_eq(weft_chan_recv(h->to_pong, &more, -1), 0);
		cr_assert_eq(read_errno(), 2000 + h->rounds);
		cr_assert_eq(weft_chan_send(h->to_ping, &more, -1), 0);
		cr_assert_eq(read_errno(), 2000 + h->rounds);
	} while (more);
}

static void hand_off_pair(void *arg)
{
	struct hand_off *h = arg;
	h->to_pong = weft_chan_new(sizeof(int), 0);
	h->to_ping = weft_chan_new(sizeof(int), 0);
	cr_assert(h->to_pong && h->to_ping);
	weft_co *pong = weft_spawn(hand_off_pong, h);
	weft_co *ping = weft_spawn(hand_off_ping, h);
	cr_assert(pong && ping);
	cr_assert_eq(weft_join(ping), 0);
	cr_assert_eq(weft_join(pong), 0);
	weft_chan_free(h->to_pong);
	weft_chan_free(h->to_ping);
}

Test(sched, errno_survives_direct_hand_offs)
{
	start(1);
	struct hand_off h = { .rounds = 20000 };
	hand_off_pair(&h);
	cr_assert_eq(h.trips, 20001ul);	/* the rounds, then the last "stop" */
	stop();
}

static void sleep_then_flag(void *arg)
{
	struct hand_off *h = arg;
	cr_assert_eq(weft_sleep(weft_now() + 2 * 1000 * 1000), 0);
	__atomic_store_n(&h->slept, 1, __ATOMIC_RELEASE);
}

static void injected_flag(void *arg)
{
	struct hand_off *h = arg;
	__atomic_store_n(&h->injected, 1, __ATOMIC_RELEASE);
}

Test(sched, a_hand_off_chain_leaves_turns_to_timers_and_spawns, .timeout = 60)
{
	start(1);
	struct hand_off h = { .rounds = 0 };
	weft_co *sleeper = weft_spawn(sleep_then_flag, &h);
	cr_assert_not_null(sleeper);
	cr_assert_eq(weft_detach(sleeper), 0);
	/* this thread's spawn goes through the injection queue, once the pair runs */
	weft_co *pair_root = weft_spawn(hand_off_pair, &h);
	cr_assert_not_null(pair_root);
	while (__atomic_load_n(&h.trips, __ATOMIC_RELAXED) < 1000)
		sched_yield();
	weft_co *inj = weft_spawn(injected_flag, &h);
	cr_assert_not_null(inj);
	cr_assert_eq(weft_join(inj), 0);
	cr_assert_eq(weft_join(pair_root), 0);
	cr_assert(h.slept && h.injected);
	stop();
}

/*
 * What a worker's loop woke (here: timers) gets its turns while the worker
 * has LIFO work pending: a chain of short coroutines, each spawning the
 * next into the runnext slot, runs for up to CHAIN_NS; SLEEPERS coroutines
 * whose timers expired early in it must all run while it goes on.  (When the
 * ready FIFO shared the injection queue's turn, one woken coroutine ran per
 * turn and the turns' interval doubled: about a dozen of them in a second.)
 */
enum { SLEEPERS = 40 };
static const int64_t CHAIN_NS = 1000 * 1000 * 1000;
static const int64_t LINK_NS = 20 * 1000;

struct chain {
	int64_t end;		/* the chain stops by then */
	unsigned woken;		/* sleepers that ran */
	unsigned links;
	bool ended_early;	/* every sleeper ran before the chain's end */
};

static void spin_for(int64_t ns)
{
	int64_t until = weft_now() + ns;
	while (weft_now() < until)
		;
}

static void chain_link(void *arg)
{
	struct chain *c = arg;
	spin_for(LINK_NS);
	c->links++;
	if (c->woken == SLEEPERS) {
		c->ended_early = true;
		return;
	}
	if (weft_now() < c->end)
		cr_assert_not_null(weft_spawn(chain_link, c));
}

static void sleep_until_woken(void *arg)
{
	struct chain *c = arg;
	cr_assert_eq(weft_sleep(weft_now() + 2 * 1000 * 1000), 0);
	c->woken++;
}

static void chain_root(void *arg)
{
	struct chain *c = arg;
	weft_co *sleeper[SLEEPERS];
	for (int i = 0; i < SLEEPERS; i++)
		cr_assert_not_null(sleeper[i] = weft_spawn(sleep_until_woken, c));
	weft_yield();	/* they all sleep */
	c->end = weft_now() + CHAIN_NS;
	cr_assert_not_null(weft_spawn(chain_link, c));
	for (int i = 0; i < SLEEPERS; i++)
		cr_assert_eq(weft_join(sleeper[i]), 0);
}

Test(sched, woken_coroutines_run_beside_a_chain_of_spawns, .timeout = 60)
{
	struct chain c = { 0 };
	cr_assert_eq(weft_main(chain_root, &c, &WEFT_CONFIG(.workers = 1)), 0);
	cr_assert(c.ended_early, "%u of %d woken coroutines ran in %u links (%lld ms)", c.woken,
		  SLEEPERS, c.links, (long long)(CHAIN_NS / 1000000));
}

/*
 * The converse: what a worker spawns runs beside a ready FIFO that never
 * empties.  TICKERS coroutines sleep 1 ms and work TICK_NS, TICKS times:
 * 4x more work than one worker has time for, so their deadlines are due
 * again before they have all run, and every fairness turn fires a batch
 * into the ready FIFO.  20 ms in, one of them spawns a coroutine (into its
 * runnext slot) that notes how many ticks had run.  A round of the ready
 * FIFO is as many pops as it held at a turn, and the LIFO end runs after
 * it; a turn used to renew a round still under way whenever READY_NS had
 * passed, which with 61 dispatches of TICK_NS was every turn, so the spawn
 * ran only once the tickers were done (failed: it ran after all 20,000
 * ticks).
 */
enum { TICKERS = 200, TICKS = 100 };
static const int64_t TICK_NS = 20 * 1000;

struct ticks {
	unsigned done;		/* ticks run (one worker) */
	unsigned spawn_saw;	/* done when the spawn ran */
};

static void spawned_counts(void *arg)
{
	struct ticks *t = arg;
	t->spawn_saw = t->done;
}

static void ticker(void *arg)
{
	struct ticks *t = arg;
	for (int i = 0; i < TICKS; i++) {
		cr_assert_eq(weft_sleep(weft_now() + 1000 * 1000), 0);
		spin_for(TICK_NS);
		t->done++;
	}
}

static void late_spawner(void *arg)
{
	cr_assert_eq(weft_sleep(weft_now() + 20 * 1000 * 1000), 0);
	weft_co *co = weft_spawn(spawned_counts, arg);
	cr_assert_not_null(co);
	cr_assert_eq(weft_join(co), 0);
}

static void tickers_root(void *arg)
{
	weft_co *co[TICKERS + 1];
	for (int i = 0; i < TICKERS; i++)
		cr_assert_not_null(co[i] = weft_spawn(ticker, arg));
	cr_assert_not_null(co[TICKERS] = weft_spawn(late_spawner, arg));
	for (int i = 0; i <= TICKERS; i++)
		cr_assert_eq(weft_join(co[i]), 0);
}

Test(sched, a_spawn_runs_beside_a_ready_fifo_that_never_empties, .timeout = 120)
{
	struct ticks t = { .spawn_saw = ~0u };
	cr_assert_eq(weft_main(tickers_root, &t, &WEFT_CONFIG(.workers = 1)), 0);
	cr_assert_lt(t.spawn_saw, t.done / 2, "the spawn ran after %u of %u ticks", t.spawn_saw, t.done);
}

/*
 * And a yielder: the same load, and 20 ms in a coroutine yields once.  The
 * yield FIFO has a share in the rounds of the worker's FIFOs, behind their
 * ready shares, for a yielder once as many coroutines have run as its LIFO
 * end held at its yield (none here: the ticks run from the ready FIFO).
 * So it runs after the round under way and the next one's ready share (at
 * most TICKERS ticks each: a ticker is in the ready FIFO once at a time),
 * and a turn's 61 dispatches before each round: within 3 * TICKERS ticks.
 * The yield FIFO used to be popped only once every other queue was empty,
 * which the tickers' deadlines never let happen: the yielder ran again
 * after 19,507 of the 20,000 ticks.
 */
struct yield_ticks {
	struct ticks t;
	unsigned at_yield, at_return;
};

static void late_yielder(void *arg)
{
	struct yield_ticks *y = arg;
	cr_assert_eq(weft_sleep(weft_now() + 20 * 1000 * 1000), 0);
	y->at_yield = y->t.done;
	weft_yield();
	y->at_return = y->t.done;
}

static void yield_tickers_root(void *arg)
{
	struct yield_ticks *y = arg;
	weft_co *co[TICKERS + 1];
	for (int i = 0; i < TICKERS; i++)
		cr_assert_not_null(co[i] = weft_spawn(ticker, &y->t));
	cr_assert_not_null(co[TICKERS] = weft_spawn(late_yielder, y));
	for (int i = 0; i <= TICKERS; i++)
		cr_assert_eq(weft_join(co[i]), 0);
}

Test(sched, a_yielder_runs_beside_a_ready_fifo_that_never_empties, .timeout = 120)
{
	struct yield_ticks y = { 0 };
	cr_assert_eq(weft_main(yield_tickers_root, &y, &WEFT_CONFIG(.workers = 1)), 0);
	cr_assert_lt(y.at_yield, y.t.done / 2, "the load was over before the yield");
	cr_assert_leq(y.at_return - y.at_yield, 3u * TICKERS,
		      "the yielder ran again after %u of %u ticks (it yielded after %u)",
		      y.at_return - y.at_yield, y.t.done, y.at_yield);
}

/*
 * A worker whose dispatches are long still serves its deadlines within
 * about a monitor tick: both workers run chains of LONG_LINK_NS links (each
 * spawning the next into its runnext slot) while a sleeper sleeps 1 ms
 * SLEEPS times.  The monitor asks a worker with a due deadline for a
 * fairness turn at its next dispatch (median oversleep ~1 ms here);
 * before, the timer waited for the 61st dispatch (120 ms, 60 links).  Not
 * judged under valgrind, which runs one thread at a time: there the
 * monitor's tick waits for its turn among spinning workers (CI once saw a
 * median of 53 ms, with --fair-sched=yes).
 */
enum { SLEEPS = 21 };
static const int64_t LONG_LINK_NS = 2 * 1000 * 1000;

struct long_chain {
	bool done;		/* atomic: the sleeper has slept */
	int64_t late[SLEEPS];
};

static void long_link(void *arg)
{
	struct long_chain *c = arg;
	spin_for(LONG_LINK_NS);
	if (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE))
		cr_assert_not_null(weft_spawn(long_link, c));
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void long_chains_root(void *arg)
{
	struct long_chain *c = arg;
	cr_assert_not_null(weft_spawn(long_link, c));
	cr_assert_not_null(weft_spawn(long_link, c));
	for (int i = 0; i < SLEEPS; i++) {
		int64_t deadline = weft_now() + 1000 * 1000;
		cr_assert_eq(weft_sleep(deadline), 0);
		c->late[i] = weft_now() - deadline;
	}
	__atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
}

/* The median oversleep of one run of the scene; *worst its longest. */
static int64_t long_chains_median(int64_t *worst)
{
	struct long_chain c = { 0 };
	cr_assert_eq(weft_main(long_chains_root, &c, &WEFT_CONFIG(.workers = 2)), 0);
	qsort(c.late, SLEEPS, sizeof c.late[0], cmp_i64);
	*worst = c.late[SLEEPS - 1];
	return c.late[SLEEPS / 2];
}

/* The best median of up to 3 runs: a sanitizer's slowness or a host that
 * keeps the sleeper's worker off its CPU can spoil one run's median, while
 * the turn missing spoils every run (120 ms). */
Test(sched, deadlines_are_served_beside_long_dispatches, .timeout = 120)
{
	int64_t worst, median = long_chains_median(&worst);
	for (int run = 1; run < 3 && median >= 10 * LONG_LINK_NS && !RUNNING_ON_VALGRIND; run++) {
		int64_t w, m = long_chains_median(&w);
		if (m < median)
			median = m, worst = w;
	}
	if (RUNNING_ON_VALGRIND)
		cr_skip_test("not judged under valgrind (median oversleep %lld us)", (long long)median / 1000);
	cr_assert_lt(median, slack(10 * LONG_LINK_NS), "median oversleep %lld us (worst %lld us), the best of 3 runs",
		     (long long)median / 1000, (long long)worst / 1000);
}

/* 100,000 coroutines alive at once: more than vm.max_map_count allows
 * mprotect guard pages for.  With guard regions (Linux 6.13+) every stack is
 * guarded; elsewhere, and past WEFT_STACK_GUARDS, stacks get canaries. */
static unsigned live;
static void stay_alive(void *arg)
{
	__atomic_fetch_add(&live, 1, __ATOMIC_RELAXED);
	wait_flag(arg);
}

static void hundred_thousand_live(void)
{
	/* valgrind keeps its own table of mappings, smaller than the kernel's */
	const int N = RUNNING_ON_VALGRIND ? 2000 : LIVE;
	start(2);
	int flag = 0;
	weft_co **co = calloc(N, sizeof *co);
	for (int i = 0; i < N; i++)
		cr_assert_not_null(co[i] = weft_spawn(stay_alive, &flag), "spawn %d: errno %d", i, errno);
	while (__atomic_load_n(&live, __ATOMIC_RELAXED) < (unsigned)N)
		weft_yield();
	__atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < N; i++)
		cr_assert_eq(weft_join(co[i]), 0);
	stop();
	free(co);
}

Test(sched, a_hundred_thousand_live, .timeout = 300)
{
	hundred_thousand_live();
}

Test(sched, a_hundred_thousand_live_past_the_guard_budget, .timeout = 300)
{
	setenv("WEFT_STACK_GUARDS", "1000", 1);	/* the rest get canaries */
	hundred_thousand_live();
}

Test(sched, main_runs_and_returns)
{
	counter = 0;
	cr_assert_eq(weft_main(bump, NULL, &WEFT_CONFIG(.workers = 2)), 0);
	cr_assert_eq(counter, 1);
	cr_assert_eq(weft_worker_count(), 0);
}

/* Coroutines never joined are freed by shutdown (guard pages restored before
 * the memory goes back to jemalloc): the next runtime reuses it safely. */
static void touch_stack(void *arg)
{
	volatile char buf[32 << 10];
	memset((char *)buf, 1, sizeof buf);
	bump(arg);
}

Test(sched, shutdown_frees_unjoined_coroutines)
{
	counter = 0;
	for (int round = 0; round < 3; round++) {
		start(2);
		for (int i = 0; i < 500; i++)
			cr_assert_not_null(weft_spawn(touch_stack, NULL));	/* never joined */
		stop();
	}
	cr_assert_eq(counter, 1500);
}

/* weft_set_name copies (truncating) and weft_co_name reads it back, from
 * the coroutine and from its joiner; only coroutines have names. */
static void named(void *arg)
{
	char long_name[WEFT_NAME_MAX + 10];
	memset(long_name, 'x', sizeof long_name - 1);
	long_name[sizeof long_name - 1] = '\0';
	cr_assert_str_eq(weft_co_name(weft_self()), "", "no name at first");
	cr_assert_eq(weft_set_name(long_name), 0);
	cr_assert_eq(strlen(weft_co_name(weft_self())), WEFT_NAME_MAX - 1, "truncated");
	cr_assert_eq(weft_set_name(NULL), 0);
	cr_assert_str_eq(weft_co_name(weft_self()), "", "NULL clears it");
	char buf[] = "worker-7";
	cr_assert_eq(weft_set_name(buf), 0);
	buf[0] = 'W';	/* a copy: the caller's buffer may change or go */
	__atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n((int *)arg, __ATOMIC_ACQUIRE) != 2)
		weft_yield();
}

Test(sched, names)
{
	start(2);
	errno = 0;
	cr_assert_eq(weft_set_name("thread"), -1, "not from a plain thread");
	cr_assert_eq(errno, EPERM);
	cr_assert_str_eq(weft_co_name(NULL), "");
	int step = 0;
	weft_co *co = weft_spawn(named, &step);
	while (__atomic_load_n(&step, __ATOMIC_ACQUIRE) != 1)
		sched_yield();
	cr_assert_str_eq(weft_co_name(co), "worker-7");
	__atomic_store_n(&step, 2, __ATOMIC_RELEASE);
	cr_assert_eq(weft_join(co), 0);
	stop();
}

/* ---- the idle workers' tax: what a worker that finds nothing costs */

enum {
	TRICKLE_N = 20000,		/* coroutines spawned */
	TRICKLE_GAP = 2000,		/* the producer's work between spawns */
	TRICKLE_WORKERS = 8,
	ATTEMPTS_PER_CO = 4,		/* generous: about one is expected */
};

static void count_one(void *arg)
{
	__atomic_fetch_add((unsigned *)arg, 1, __ATOMIC_RELAXED);
}

/* One producer spawns coroutines one at a time, working a little between
 * spawns: the other workers find a coroutine now and then and nothing in
 * between, in idle periods short enough that they spin on. */
static void trickle_root(void *arg)
{
	for (unsigned i = 0; i < TRICKLE_N; i++) {
		weft_co *co = weft_spawn(count_one, arg);
		cr_assert_not_null(co);
		cr_assert_eq(weft_detach(co), 0);
		for (volatile unsigned j = 0; j < TRICKLE_GAP; j++)
			;
	}
}

/* The last spinner waits for work to show by watching the queues with loads,
 * and steals only once a victim shows some, while the other idle workers
 * sleep: the idle workers make about one steal attempt per coroutine the
 * program runs, not a pass over every victim at every look of every
 * spinner.  Counts, not time: the producer's gaps are loop iterations. */
Test(sched, idle_workers_try_few_steals, .timeout = 300)
{
	start(TRICKLE_WORKERS);
	unsigned done = 0;
	weft_co *root = weft_spawn(trickle_root, &done);
	cr_assert_not_null(root);
	cr_assert_eq(weft_join(root), 0);
	while (__atomic_load_n(&done, __ATOMIC_RELAXED) != TRICKLE_N)
		sched_yield();
	weft_stats st = { .size = sizeof st };
	cr_assert_eq(weft_stats_get(&st), 0);
	stop();
	fprintf(stderr, "%llu steal attempts, %llu steals, %llu sleeps for %u coroutines\n",
		    (unsigned long long)st.total.steal_attempts, (unsigned long long)st.total.steals,
		    (unsigned long long)st.total.sleeps, TRICKLE_N);
#ifdef WEFT_TEST_TSAN
	bool tsan = true;
#else
	bool tsan = false;
#endif
	/* There every step is many times slower and the producer's gaps
	 * outlast the spin window: the workers sleep between coroutines, each
	 * one a wake and a search (the regime of long gaps, not this one). */
	if (RUNNING_ON_VALGRIND || tsan)
		cr_skip_test("SKIP: the scene ran; its counts are not judged under valgrind or "
			     "ThreadSanitizer, whose gaps outlast the spin window");
	cr_assert_leq(st.total.steal_attempts, (uint64_t)ATTEMPTS_PER_CO * TRICKLE_N,
		      "%llu steal attempts (%llu steals, %llu sleeps) for %u coroutines",
		      (unsigned long long)st.total.steal_attempts, (unsigned long long)st.total.steals,
		      (unsigned long long)st.total.sleeps, TRICKLE_N);
}
