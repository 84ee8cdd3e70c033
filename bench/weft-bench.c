/* SPDX-License-Identifier: MIT */
/*
 * weft-bench — the scheduler benchmarks, `sleep` (timers), the
 * synchronisation benchmarks (channels, mutex, semaphore, rwlock) and `local-get`
 * (coroutine-locals), each verifying its own result.
 *
 *   weft-bench NAME WORKERS      run one benchmark (NAME: see "list")
 *   weft-bench list              print the benchmark names
 *
 * Each run prints exactly one line on stdout:
 *
 *   RESULT name=skynet impl=weft workers=2 ns=123456789 ops=1111111
 *          value=499999500000 check=ok [more key=value pairs]
 *
 * ns is the wall time of one timed run, measured with weft_now() around the
 * work only (inside the root coroutine, after the runtime is up; local-get
 * times its own measured loop, see there).  Before it,
 * the same work runs once untimed as a warm-up, in the same process; the Go
 * peer (bench/peers/go) does the same, with the same sizes and algorithms.
 * The exit status is 0 when the check passed, 1 when it failed, 2 on a usage
 * or runtime error.  scripts/bench.py drives it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft.h>

#include "peak_rss.h"

#define BENCH_PROG "weft-bench"
#include "util.h"

/* The sizes; bench/peers/go/main.go uses the same ones. */
#define YIELD_N 2000000 /* yields per coroutine; two coroutines */
#define SPAWN_TOTAL 1000000 /* coroutines spawned and joined */
#define SPAWN_BATCH 1000 /* live at once */
#define SKYNET_SIZE 1000000 /* leaves, 10 children per node */
#define SKYNET_SUM UINT64_C(499999500000)
#define SKYNET_NODES 1111111 /* 1 + 10 + ... + 10^6 */
#define FIB_N 27
#define FIB_EXPECTED 196418
#define FIB_SPAWNS 317810 /* calls with n >= 2: fib(28) - 1 */
#define SLEEP_N 100000 /* coroutines, each sleeping once */
#define SLEEP_NS 1000000 /* for 1 ms */
#define PARKED_N 100000 /* coroutines parked on one channel at once */
#define PINGPONG_N 1000000 /* round trips of the one pair of chan-pingpong */
#define PINGPONG_PAIRS 1000 /* pairs of chan-pingpong-1000 ... */
#define PINGPONG_ROUNDS 1000 /* ... and round trips of each */
#define MUTEX_COS 1000 /* coroutines of mutex ... */
#define MUTEX_ITERS 1000 /* ... each locking this many times */
#define SEM_COS 1000 /* coroutines of sem ... */
#define SEM_PERMITS 10 /* ... sharing this many permits ... */
#define SEM_ITERS 500 /* ... each taking one this many times */
#define RW_COS 1000 /* coroutines of rwlock ... */
#define RW_ITERS 500 /* ... each locking this many times ... */
#define RW_WRITE_EVERY 20 /* ... one lock in 20 a write (95% reads) */
#define SKYNET_CHAN_CAP 10 /* skynet-chan: a parent's channel, one slot a child */
#define LOCAL_N 100000000 /* local-get: reads of each kind */
#define LOCAL_VALUE 3 /* the value read, so that the sums check the reads */

struct outcome {
	int64_t ops; /* operations the run counts (for ns/op) */
	int64_t value; /* the value that was checked */
	bool ok; /* the check passed */
	char extra[96]; /* more key=value pairs for the RESULT line */
	/* > 0: the benchmark timed its measured part itself (local-get, whose
	 * run also holds the __thread loop it is compared with); 0: root()
	 * times the whole run */
	int64_t ns;
};

static unsigned g_workers;

static weft_co *spawn_or_die(void (*fn)(void *), void *arg)
{
	weft_co *co = weft_spawn(fn, arg);
	if (co == NULL)
		die("weft_spawn");
	return co;
}

static void join_or_die(weft_co *co)
{
	if (weft_join(co) != 0)
		die("weft_join");
}

static void *calloc_or_die(size_t n, size_t size)
{
	void *p = calloc(n, size);
	if (p == NULL)
		die("calloc");
	return p;
}

/* Spawns co[i] = fn(args + i * stride) for i < n (stride 0: all share args). */
static void spawn_all(weft_co **co, void (*fn)(void *), void *args,
		      size_t stride, int n)
{
	for (int i = 0; i < n; i++)
		co[i] = spawn_or_die(fn, (char *)args + (size_t)i * stride);
}

static void join_all(weft_co **co, int n)
{
	for (int i = 0; i < n; i++)
		join_or_die(co[i]);
}

/* spawn_all, then join them all: for benchmarks that only wait for the end. */
static void spawn_join_all(void (*fn)(void *), void *args, size_t stride,
			   int n)
{
	weft_co **co = calloc_or_die((size_t)n, sizeof *co);

	spawn_all(co, fn, args, stride, n);
	join_all(co, n);
	free(co);
}

/* Channel calls without a deadline: any error (ECANCELED, EPIPE) is a bug
 * of the benchmark or of weft, not an outcome to report. */
static weft_chan *chan_or_die(size_t elem_size, size_t capacity)
{
	weft_chan *ch = weft_chan_new(elem_size, capacity);
	if (ch == NULL)
		die("weft_chan_new");
	return ch;
}

static void send_or_die(weft_chan *ch, const void *elem)
{
	if (weft_chan_send(ch, elem, -1) != 0)
		die("weft_chan_send");
}

static void recv_or_die(weft_chan *ch, void *elem)
{
	if (weft_chan_recv(ch, elem, -1) != 0)
		die("weft_chan_recv");
}

/* ------------------------------------------------------------------ yield */

/*
 * Two coroutines each call weft_yield() YIELD_N times; ops = 2 * YIELD_N.
 * "repeats" counts the iterations in which the other coroutine did not run
 * since this one's previous iteration.  On one worker weft_yield() must let
 * the other (runnable) coroutine run every time, so only the first iterations
 * may repeat; more than a handful fails the check.
 */
struct yield_state {
	atomic_int last;
	atomic_llong repeats;
	atomic_llong done;
};

struct yield_arg {
	struct yield_state *st;
	int id;
};

static void yield_co(void *p)
{
	struct yield_arg *a = p;
	long long rep = 0, i;

	for (i = 0; i < YIELD_N; i++) {
		if (atomic_load_explicit(&a->st->last, memory_order_relaxed) ==
		    a->id)
			rep++;
		atomic_store_explicit(&a->st->last, a->id,
				      memory_order_relaxed);
		weft_yield();
	}
	atomic_fetch_add(&a->st->repeats, rep);
	atomic_fetch_add(&a->st->done, i);
}

static void bench_yield(struct outcome *o)
{
	struct yield_state st;
	struct yield_arg args[2];
	weft_co *co[2];
	long long repeats;
	int k;

	atomic_init(&st.last, -1);
	atomic_init(&st.repeats, 0);
	atomic_init(&st.done, 0);
	for (k = 0; k < 2; k++) {
		args[k].st = &st;
		args[k].id = k;
		co[k] = spawn_or_die(yield_co, &args[k]);
	}
	for (k = 0; k < 2; k++)
		join_or_die(co[k]);
	repeats = atomic_load(&st.repeats);
	o->ops = 2 * (int64_t)YIELD_N;
	o->value = atomic_load(&st.done);
	o->ok = o->value == o->ops && (g_workers != 1 || repeats <= 4);
	snprintf(o->extra, sizeof o->extra, "repeats=%lld", repeats);
}

/* ------------------------------------------------------------------ spawn */

/*
 * SPAWN_TOTAL coroutines in batches of SPAWN_BATCH: spawn the batch, then join
 * it.  Each child writes its index into its slot; the parent sums the slots.
 */
struct spawn_slot {
	int64_t in, out;
};

static void spawn_co(void *p)
{
	struct spawn_slot *s = p;
	s->out = s->in;
}

static void bench_spawn(struct outcome *o)
{
	static struct spawn_slot slots[SPAWN_BATCH];
	static weft_co *co[SPAWN_BATCH];
	int64_t sum = 0, base;
	int j;

	for (base = 0; base < SPAWN_TOTAL; base += SPAWN_BATCH) {
		for (j = 0; j < SPAWN_BATCH; j++) {
			slots[j].in = base + j;
			slots[j].out = -1;
			co[j] = spawn_or_die(spawn_co, &slots[j]);
		}
		for (j = 0; j < SPAWN_BATCH; j++) {
			join_or_die(co[j]);
			sum += slots[j].out;
		}
	}
	o->ops = SPAWN_TOTAL;
	o->value = sum;
	o->ok = sum == (int64_t)SPAWN_TOTAL * (SPAWN_TOTAL - 1) / 2;
}

/* ----------------------------------------------------------------- skynet */

/*
 * Every node is a coroutine; a node of size > 1 spawns 10 children (their
 * arguments live on its own stack) and joins them in order, summing.
 * rss_kb is the process's peak resident set: what the most coroutines alive
 * at once (and their stacks) cost.
 */
struct sky {
	uint64_t num, size, sum;
};

static void skynet_co(void *p)
{
	struct sky *s = p, kids[10];
	weft_co *co[10];
	uint64_t sub, sum = 0;
	int i;

	if (s->size == 1) {
		s->sum = s->num;
		return;
	}
	sub = s->size / 10;
	for (i = 0; i < 10; i++) {
		kids[i].num = s->num + (uint64_t)i * sub;
		kids[i].size = sub;
		kids[i].sum = 0;
		co[i] = spawn_or_die(skynet_co, &kids[i]);
	}
	for (i = 0; i < 10; i++) {
		join_or_die(co[i]);
		sum += kids[i].sum;
	}
	s->sum = sum;
}

static void bench_skynet(struct outcome *o)
{
	struct sky root = { 0, SKYNET_SIZE, 0 };

	/* the root node is a coroutine too, as in the Go peer */
	join_or_die(spawn_or_die(skynet_co, &root));
	o->ops = SKYNET_NODES;
	o->value = (int64_t)root.sum;
	o->ok = root.sum == SKYNET_SUM;
	snprintf(o->extra, sizeof o->extra, "rss_kb=%ld", peak_rss_kb());
}

/* -------------------------------------------------------------------- fib */

/*
 * fib(n) spawns fib(n-1) as a coroutine, computes fib(n-2) inline, joins.
 * No sequential cutoff.  ops = the number of coroutines spawned.
 */
struct fib_arg {
	int n;
	int64_t r;
};

static int64_t fib(int n);

static void fib_co(void *p)
{
	struct fib_arg *a = p;
	a->r = fib(a->n);
}

static int64_t fib(int n)
{
	struct fib_arg a;
	weft_co *co;
	int64_t b;

	if (n < 2)
		return n;
	a.n = n - 1;
	a.r = 0;
	co = spawn_or_die(fib_co, &a);
	b = fib(n - 2);
	join_or_die(co);
	return a.r + b;
}

static void bench_fib(struct outcome *o)
{
	o->value = fib(FIB_N);
	o->ops = FIB_SPAWNS;
	o->ok = o->value == FIB_EXPECTED;
}

/* ------------------------------------------------------------------ sleep */

/*
 * SLEEP_N coroutines each sleep SLEEP_NS once, all at the same time (the
 * parent spawns them all, then joins them in order).  value = how many woke
 * no earlier than their deadline; all must.  rss_kb is the peak resident set
 * of the process: what SLEEP_N parked coroutines (and their stacks) cost.
 */
static weft_wg *sleep_done;

static void sleep_co(void *p)
{
	atomic_llong *on_time = p;
	int64_t deadline = weft_now() + SLEEP_NS;

	if (weft_sleep(deadline) == 0 && weft_now() >= deadline)
		atomic_fetch_add_explicit(on_time, 1, memory_order_relaxed);
	weft_wg_done(sleep_done);
}

static void bench_sleep(struct outcome *o)
{
	atomic_llong on_time;
	int i;

	atomic_init(&on_time, 0);
	sleep_done = weft_wg_new();
	if (!sleep_done || weft_wg_add(sleep_done, SLEEP_N) != 0)
		die("weft_wg");
	for (i = 0; i < SLEEP_N; i++)
		weft_detach(spawn_or_die(sleep_co, &on_time));
	weft_wg_wait(sleep_done, -1);
	weft_wg_free(sleep_done);
	o->ops = SLEEP_N;
	o->value = atomic_load(&on_time);
	o->ok = o->value == SLEEP_N;
	snprintf(o->extra, sizeof o->extra, "rss_kb=%ld", peak_rss_kb());
}

/* ---------------------------------------------------------- chan-pingpong */

/*
 * A pair: the pinger sends i on `ping`, the ponger receives it and sends
 * i + 1 back on `pong`, both rendezvous channels, `rounds` times; a round
 * trip is good when the pinger gets i + 1.  The pinger is a coroutine of its
 * own (spawned by the benchmark, as in the Go peer), creates the pair's
 * channels, spawns the ponger and joins it.  chan-pingpong runs one pair,
 * chan-pingpong-1000 many at once; ops = all round trips, all must be good.
 */
struct pingpong {
	weft_chan *ping, *pong;
	int rounds;
	int64_t good;
};

static void pong_co(void *p)
{
	struct pingpong *pp = p;
	int v;

	for (int i = 0; i < pp->rounds; i++) {
		recv_or_die(pp->ping, &v);
		v++;
		send_or_die(pp->pong, &v);
	}
}

static void ping_co(void *p)
{
	struct pingpong *pp = p;
	weft_co *ponger;
	int v;

	pp->ping = chan_or_die(sizeof(int), 0);
	pp->pong = chan_or_die(sizeof(int), 0);
	ponger = spawn_or_die(pong_co, pp);
	for (int i = 0; i < pp->rounds; i++) {
		v = i;
		send_or_die(pp->ping, &v);
		recv_or_die(pp->pong, &v);
		pp->good += v == i + 1;
	}
	join_or_die(ponger); /* before the free: it may still be in its send */
	weft_chan_free(pp->ping);
	weft_chan_free(pp->pong);
}

static void pingpong(struct outcome *o, int pairs, int rounds)
{
	struct pingpong *pp = calloc_or_die((size_t)pairs, sizeof *pp);
	int64_t good = 0;

	for (int i = 0; i < pairs; i++)
		pp[i].rounds = rounds;
	spawn_join_all(ping_co, pp, sizeof *pp, pairs);
	for (int i = 0; i < pairs; i++)
		good += pp[i].good;
	free(pp);
	o->ops = (int64_t)pairs * rounds;
	o->value = good;
	o->ok = good == o->ops;
}

static void bench_chan_pingpong(struct outcome *o)
{
	pingpong(o, 1, PINGPONG_N);
}

static void bench_chan_pingpong_1000(struct outcome *o)
{
	pingpong(o, PINGPONG_PAIRS, PINGPONG_ROUNDS);
}

/* ------------------------------------------------------------------ mutex */

/*
 * MUTEX_COS coroutines each lock one weft_mutex MUTEX_ITERS times to
 * increment a plain counter; the count must be exact (a lost update is a
 * broken mutex).  ops = lock+unlock pairs.  On one worker nothing preempts
 * a holder, so the lock is mostly uncontended; contention needs workers > 1.
 */
struct mutex_state {
	weft_mutex *m;
	int64_t count;
};

static void mutex_co(void *p)
{
	struct mutex_state *st = p;

	for (int i = 0; i < MUTEX_ITERS; i++) {
		if (weft_mutex_lock(st->m) != 0)
			die("weft_mutex_lock");
		st->count++;
		if (weft_mutex_unlock(st->m) != 0)
			die("weft_mutex_unlock");
	}
}

static void bench_mutex(struct outcome *o)
{
	struct mutex_state st = { weft_mutex_new(), 0 };

	if (st.m == NULL)
		die("weft_mutex_new");
	spawn_join_all(mutex_co, &st, 0, MUTEX_COS);
	weft_mutex_free(st.m);
	o->ops = (int64_t)MUTEX_COS * MUTEX_ITERS;
	o->value = st.count;
	o->ok = st.count == o->ops;
}

/* ------------------------------------------------------------ sem, rwlock */

/*
 * In both, a holder keeps its permit or lock across one weft_yield(), as a
 * real holder keeps it across I/O, so that the coroutines contend at any
 * worker count (with no scheduling point inside, one worker would never see
 * a waiter).  The peers yield the same way (Go: runtime.Gosched(); Tokio:
 * yield_now()).  ops = acquire+release (lock+unlock) pairs, each with its
 * yield.  An occupancy counts the holders inside at once; the checks fail
 * if there are ever more than the primitive allows.
 */
struct occupancy {
	atomic_int now, max;
};

/* Counts one holder in; returns how many are inside now. */
static int occ_enter(struct occupancy *oc)
{
	int n = atomic_fetch_add(&oc->now, 1) + 1;
	int m = atomic_load_explicit(&oc->max, memory_order_relaxed);

	while (n > m && !atomic_compare_exchange_weak(&oc->max, &m, n))
		;
	return n;
}

static void occ_leave(struct occupancy *oc)
{
	atomic_fetch_sub(&oc->now, 1);
}

/*
 * sem: SEM_COS coroutines share a semaphore of SEM_PERMITS permits, each
 * taking one SEM_ITERS times (acquire, yield, release).  value = the
 * acquisitions that found at most SEM_PERMITS holders inside; all must.
 * max_inside: the most inside at once (SEM_PERMITS when they contended).
 */
struct sem_state {
	weft_sem *s;
	struct occupancy in;
	atomic_llong good;
};

static void sem_co(void *p)
{
	struct sem_state *st = p;
	long long good = 0;

	for (int i = 0; i < SEM_ITERS; i++) {
		if (weft_sem_acquire(st->s, -1) != 0)
			die("weft_sem_acquire");
		good += occ_enter(&st->in) <= SEM_PERMITS;
		weft_yield();
		occ_leave(&st->in);
		if (weft_sem_release(st->s) != 0)
			die("weft_sem_release");
	}
	atomic_fetch_add(&st->good, good);
}

static void bench_sem(struct outcome *o)
{
	struct sem_state st = { .s = weft_sem_new(SEM_PERMITS) };

	if (st.s == NULL)
		die("weft_sem_new");
	atomic_init(&st.in.now, 0);
	atomic_init(&st.in.max, 0);
	atomic_init(&st.good, 0);
	spawn_join_all(sem_co, &st, 0, SEM_COS);
	weft_sem_free(st.s);
	o->ops = (int64_t)SEM_COS * SEM_ITERS;
	o->value = atomic_load(&st.good);
	o->ok = o->value == o->ops;
	snprintf(o->extra, sizeof o->extra, "max_inside=%d",
		 atomic_load(&st.in.max));
}

/*
 * rwlock: RW_COS coroutines each lock one weft_rwlock RW_ITERS times, one
 * lock in RW_WRITE_EVERY a write (coroutine k at the iterations i with
 * (i + k) % RW_WRITE_EVERY == 0, so the writes spread over the run).  A
 * writer increments a, yields, increments b, and must have been alone; a
 * reader reads a, yields, and must then find a and b both equal to what it
 * read (a writer inside with it would show).  value = the locks whose
 * checks passed; all must, and a must equal the writes.  max_readers: the
 * most readers inside at once.
 */
struct rw_state {
	weft_rwlock *l;
	struct occupancy readers, writers;
	int64_t a, b;
	atomic_int next_id;
	atomic_llong good;
};

static void rw_co(void *p)
{
	struct rw_state *st = p;
	int k = atomic_fetch_add(&st->next_id, 1);
	long long good = 0;

	for (int i = 0; i < RW_ITERS; i++) {
		bool write = (i + k) % RW_WRITE_EVERY == 0;
		int rc = write ? weft_rwlock_wrlock(st->l, -1)
			       : weft_rwlock_rdlock(st->l, -1);

		if (rc != 0)
			die(write ? "weft_rwlock_wrlock" : "weft_rwlock_rdlock");
		if (write) {
			bool alone = occ_enter(&st->writers) == 1 &&
				     atomic_load(&st->readers.now) == 0;

			st->a++;
			weft_yield();
			st->b++;
			good += alone && st->a == st->b;
			occ_leave(&st->writers);
		} else {
			int64_t a;

			occ_enter(&st->readers);
			a = st->a;
			weft_yield();
			good += a == st->a && a == st->b &&
				atomic_load(&st->writers.now) == 0;
			occ_leave(&st->readers);
		}
		if (weft_rwlock_unlock(st->l) != 0)
			die("weft_rwlock_unlock");
	}
	atomic_fetch_add(&st->good, good);
}

static void bench_rwlock(struct outcome *o)
{
	struct rw_state st = { .l = weft_rwlock_new() };
	const int64_t writes = (int64_t)RW_COS * RW_ITERS / RW_WRITE_EVERY;

	if (st.l == NULL)
		die("weft_rwlock_new");
	atomic_init(&st.readers.now, 0);
	atomic_init(&st.readers.max, 0);
	atomic_init(&st.writers.now, 0);
	atomic_init(&st.writers.max, 0);
	atomic_init(&st.next_id, 0);
	atomic_init(&st.good, 0);
	spawn_join_all(rw_co, &st, 0, RW_COS);
	weft_rwlock_free(st.l);
	o->ops = (int64_t)RW_COS * RW_ITERS;
	o->value = atomic_load(&st.good);
	o->ok = o->value == o->ops && st.a == writes && st.b == writes;
	snprintf(o->extra, sizeof o->extra, "max_readers=%d",
		 atomic_load(&st.readers.max));
}

/* ------------------------------------------------------------ skynet-chan */

/*
 * skynet as in the classic Go code: every node is a coroutine; a leaf sends
 * its number to its parent, an inner node creates one channel for its 10
 * children (SKYNET_CHAN_CAP slots, so they never wait for it), receives 10
 * sums and sends theirs up.  It then joins its children, which Go leaves to
 * the GC: that reclaims them, and only once they are out of their send may
 * the channel be freed.
 */
struct skychan {
	uint64_t num, size;
	weft_chan *up;
};

static void skynet_chan_co(void *p)
{
	struct skychan *s = p, kids[10];
	weft_co *co[10];
	weft_chan *in;
	uint64_t sub, v, sum = 0;
	int i;

	if (s->size == 1) {
		send_or_die(s->up, &s->num);
		return;
	}
	in = chan_or_die(sizeof(uint64_t), SKYNET_CHAN_CAP);
	sub = s->size / 10;
	for (i = 0; i < 10; i++) {
		kids[i].num = s->num + (uint64_t)i * sub;
		kids[i].size = sub;
		kids[i].up = in;
	}
	spawn_all(co, skynet_chan_co, kids, sizeof kids[0], 10);
	for (i = 0; i < 10; i++) {
		recv_or_die(in, &v);
		sum += v;
	}
	join_all(co, 10);
	weft_chan_free(in);
	send_or_die(s->up, &sum);
}

static void bench_skynet_chan(struct outcome *o)
{
	struct skychan root = { 0, SKYNET_SIZE,
				chan_or_die(sizeof(uint64_t), SKYNET_CHAN_CAP) };
	weft_co *co = spawn_or_die(skynet_chan_co, &root);
	uint64_t sum;

	recv_or_die(root.up, &sum);
	join_or_die(co);
	weft_chan_free(root.up);
	o->ops = SKYNET_NODES;
	o->value = (int64_t)sum;
	o->ok = sum == SKYNET_SUM;
}

/* -------------------------------------------------------------- local-get */

/*
 * The cost of weft_local_get() against a plain __thread read, LOCAL_N reads
 * of each in this (the root) coroutine, back to back in the same process.
 * The compiler barrier in each loop makes it assume memory changed, so the
 * __thread variable is loaded every iteration rather than hoisted out (and
 * the loop folded into a multiplication); weft_local_get is an opaque call
 * anyway, and gets the same barrier for the same loop.  The sums check the
 * reads.  ns and ops are the weft_local_get loop's; thread_ns_per_op is the
 * __thread loop's time per read.  Go has no coroutine-local storage: no peer.
 */
#define COMPILER_BARRIER() __asm__ volatile("" ::: "memory")

static __thread intptr_t tls_value;

static void bench_local_get(struct outcome *o)
{
	weft_key *key = weft_key_new(NULL);
	int64_t t0, t1, t2, sum = 0, tsum = 0;
	const int64_t want = (int64_t)LOCAL_N * LOCAL_VALUE;

	if (key == NULL)
		die("weft_key_new");
	if (weft_local_set(key, (void *)(intptr_t)LOCAL_VALUE) != 0)
		die("weft_local_set");
	/* from the key, not the constant: a value the compiler cannot see
	 * keeps the variable a plain intptr_t (clang narrows a static that only
	 * ever holds a constant) */
	tls_value = (intptr_t)weft_local_get(key);
	t0 = weft_now();
	for (int64_t i = 0; i < LOCAL_N; i++) {
		sum += (intptr_t)weft_local_get(key);
		COMPILER_BARRIER();
	}
	t1 = weft_now();
	for (int64_t i = 0; i < LOCAL_N; i++) {
		tsum += tls_value;
		COMPILER_BARRIER();
	}
	t2 = weft_now();
	weft_key_free(key);
	o->ns = t1 - t0;
	o->ops = LOCAL_N;
	o->value = sum;
	o->ok = sum == want && tsum == want;
	snprintf(o->extra, sizeof o->extra, "thread_ns_per_op=%.3f",
		 (double)(t2 - t1) / LOCAL_N);
}

/* ----------------------------------------------------------------- parked */

/*
 * PARKED_N coroutines each park in a receive on one rendezvous channel; once
 * all have parked (a wait group counts them in), the process's resident set
 * is read, the channel is closed (every receive returns EPIPE) and all are
 * joined.  value = receivers that got EPIPE; all must.  rss_per_co_b is
 * (RSS now - RSS when main started) / PARKED_N: what one parked coroutine
 * costs, runtime included (the peers measure the same way).  At the same
 * moment: vm_mib, the process's virtual size, and maps, its mappings (the
 * lines of /proc/self/maps, which vm.max_map_count bounds).
 */
static long rss_at_start_kb;

/* /proc/self/statm's first two fields, in KiB; -1 each when unreadable. */
struct statm {
	long vm_kb; /* the virtual size */
	long rss_kb; /* the resident set */
};

static struct statm statm_now(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages, resident, page_kb = sysconf(_SC_PAGESIZE) / 1024;
	struct statm st = { -1, -1 };

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) == 2) {
			st.vm_kb = pages * page_kb;
			st.rss_kb = resident * page_kb;
		}
		fclose(f);
	}
	return st;
}

/* The lines of /proc/self/maps (-1 when unreadable). */
static long maps_now(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char buf[4096];
	size_t n;
	long lines = 0;

	if (f == NULL)
		return -1;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		for (size_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
	fclose(f);
	return lines;
}

struct parked {
	weft_chan *ch;
	weft_wg *in, *done;
	atomic_llong closed;
};

static void parked_co(void *p)
{
	struct parked *pk = p;
	int v;

	weft_wg_done(pk->in);
	if (weft_chan_recv(pk->ch, &v, -1) != 0 && errno == EPIPE)
		atomic_fetch_add_explicit(&pk->closed, 1, memory_order_relaxed);
	weft_wg_done(pk->done);
}

static void bench_parked(struct outcome *o)
{
	struct parked pk = { .ch = chan_or_die(sizeof(int), 0), .in = weft_wg_new(),
			     .done = weft_wg_new() };
	int i;

	if (!pk.in || !pk.done || weft_wg_add(pk.in, PARKED_N) != 0 ||
	    weft_wg_add(pk.done, PARKED_N) != 0)
		die("weft_wg");
	atomic_init(&pk.closed, 0);
	for (i = 0; i < PARKED_N; i++)
		weft_detach(spawn_or_die(parked_co, &pk));
	weft_wg_wait(pk.in, -1);
	weft_sleep(weft_now() + SLEEP_NS);	/* the last ones reach their receive */
	struct statm st = statm_now();
	long maps = maps_now();
	weft_chan_close(pk.ch);
	weft_wg_wait(pk.done, -1);
	weft_chan_free(pk.ch);
	weft_wg_free(pk.in);
	weft_wg_free(pk.done);
	o->ops = PARKED_N;
	o->value = atomic_load(&pk.closed);
	o->ok = o->value == PARKED_N;
	snprintf(o->extra, sizeof o->extra,
		 "rss_per_co_b=%ld vm_mib=%ld maps=%ld",
		 (st.rss_kb - rss_at_start_kb) * 1024 / PARKED_N,
		 st.vm_kb / 1024, maps);
}

/* ------------------------------------------------------------------- main */

static const struct bench {
	const char *name;
	void (*fn)(struct outcome *);
} benches[] = {
	{ "yield", bench_yield },
	{ "spawn", bench_spawn },
	{ "skynet", bench_skynet },
	{ "fib", bench_fib },
	{ "sleep", bench_sleep },
	{ "chan-pingpong", bench_chan_pingpong },
	{ "chan-pingpong-1000", bench_chan_pingpong_1000 },
	{ "mutex", bench_mutex },
	{ "sem", bench_sem },
	{ "rwlock", bench_rwlock },
	{ "skynet-chan", bench_skynet_chan },
	{ "local-get", bench_local_get },
	{ "parked", bench_parked },
};

#define NBENCHES (sizeof benches / sizeof benches[0])

struct run {
	const struct bench *b;
	struct outcome warm, timed;
	int64_t ns;
	unsigned workers_seen;
};

static void root(void *p)
{
	struct run *r = p;
	int64_t t0;

	r->workers_seen = weft_worker_count();
	r->b->fn(&r->warm);
	t0 = weft_now();
	r->b->fn(&r->timed);
	r->ns = r->timed.ns > 0 ? r->timed.ns : weft_now() - t0;
}

static void usage(void)
{
	fprintf(stderr, "usage: weft-bench NAME WORKERS   (weft-bench list)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct run r;
	weft_config cfg = WEFT_CONFIG_INIT;
	char *end;
	unsigned long w;
	size_t i;
	bool ok;

	rss_at_start_kb = statm_now().rss_kb;
	if (argc == 2 && strcmp(argv[1], "list") == 0) {
		for (i = 0; i < NBENCHES; i++)
			puts(benches[i].name);
		return 0;
	}
	if (argc != 3)
		usage();
	for (i = 0; i < NBENCHES; i++)
		if (strcmp(argv[1], benches[i].name) == 0)
			r.b = &benches[i];
	if (r.b == NULL) {
		fprintf(stderr, "weft-bench: unknown benchmark \"%s\"\n", argv[1]);
		usage();
	}
	errno = 0;
	w = strtoul(argv[2], &end, 10);
	if (errno != 0 || end == argv[2] || *end != '\0' || w < 1 || w > 1024) {
		fprintf(stderr, "weft-bench: bad worker count \"%s\" (1..1024)\n",
			argv[2]);
		return 2;
	}
	g_workers = (unsigned)w;

	cfg.workers = g_workers;
	if (weft_main(root, &r, &cfg) != 0)
		die("weft_main");

	ok = r.warm.ok && r.timed.ok && r.workers_seen == g_workers;
	printf("RESULT name=%s impl=weft workers=%u ns=%" PRId64 " ops=%" PRId64
	       " value=%" PRId64 " check=%s%s%s\n",
	       r.b->name, r.workers_seen, r.ns, r.timed.ops, r.timed.value,
	       ok ? "ok" : "fail", r.timed.extra[0] ? " " : "", r.timed.extra);
	fflush(stdout);
	return ok ? 0 : 1;
}
