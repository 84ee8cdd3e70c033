/* SPDX-License-Identifier: MIT */
/* The scheduler's histograms, gauges and delay estimate (weft_stats version
 * 3, weft_stats_quantile, weft_sched_delay; lib/metrics.h).  Every run times
 * every runnable period ($WEFT_SCHED_SAMPLE=1), so counts are exact.
 *
 * No check bounds a wall-clock time from above: a turn spins until the
 * clock has moved by at least its length, so every duration has a hard
 * lower bound, and what is compared from above is a ratio of two sums that
 * a loaded machine stretches alike (see each test). */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "harness.h"
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coro_test.h"
#include "metrics.h"

static void run_timed(unsigned workers, void (*fn)(void *), void *arg)
{
	cr_assert_eq(setenv("WEFT_SCHED_SAMPLE", "1", 1), 0);
	run(workers, fn, arg);
}

static weft_stats snap(void)
{
	weft_stats st = { .size = sizeof st };
	CHECK(weft_stats_get(&st) == 0);
	CHECK(st.version == WEFT_STATS_VERSION);
	return st;
}

/* Busy until ns have passed on weft_now (a turn of at least ns). */
static void compute(int64_t ns)
{
	int64_t end = weft_now() + ns;
	while (weft_now() < end)
		;
}

/* The lower bound of bucket i. */
static uint64_t lower(unsigned i)
{
	return i ? weft_hist_bound(i - 1) : 0;
}

/* ---- the buckets and the quantile helper */

Test(metrics, buckets_bound_their_values_within_an_eighth)
{
	for (unsigned i = 1; i < WEFT_HIST_BUCKETS - 1; i++) {
		uint64_t lo = lower(i), hi = weft_hist_bound(i);
		cr_assert(hi > lo, "bucket %u", i);
		if (i >= 8)	/* below 8 ns a bucket is one value */
			cr_assert((hi - lo) * 8 <= lo, "bucket %u: [%lu, %lu) wider than 12.5%%", i,
				  (unsigned long)lo, (unsigned long)hi);
		cr_assert_eq(weft__metrics_bucket(lo), i);
		cr_assert_eq(weft__metrics_bucket(hi - 1), i);
		cr_assert_eq(weft__metrics_bucket(lo + (hi - lo) / 2), i);
	}
	cr_assert_eq(weft_hist_bound(WEFT_HIST_BUCKETS - 1), UINT64_MAX);
	cr_assert_eq(weft__metrics_bucket(UINT64_MAX), WEFT_HIST_BUCKETS - 1);
	cr_assert_eq(weft__metrics_bucket(0), 0);
}

Test(metrics, quantile_reads_the_rank_s_bucket)
{
	static weft_hist h;
	cr_assert_eq(weft_stats_quantile(&h, 0.5), 0);	/* empty */
	unsigned a = weft__metrics_bucket(1000), b = weft__metrics_bucket(2000000);
	h.buckets[a] = 90;
	h.buckets[b] = 10;
	h.count = 100;
	cr_assert_eq(weft_stats_quantile(&h, 0), weft_hist_bound(a));
	cr_assert_eq(weft_stats_quantile(&h, 0.5), weft_hist_bound(a));
	cr_assert_eq(weft_stats_quantile(&h, 0.9), weft_hist_bound(a));	/* rank 90 */
	cr_assert_eq(weft_stats_quantile(&h, 0.901), weft_hist_bound(b));
	cr_assert_eq(weft_stats_quantile(&h, 1), weft_hist_bound(b));
	errno = 0;
	cr_assert_eq(weft_stats_quantile(&h, 1.5), UINT64_MAX);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(weft_stats_quantile(NULL, 0.5), UINT64_MAX);
	cr_assert_eq(weft_stats_quantile(&h, nan("")), UINT64_MAX);	/* NaN */
}

/* ---- a known turn lands in its bucket */

enum { TURNS = 40 };
static const int64_t TURN_NS = 2 * 1000 * 1000;

static void two_ms_turns(void *unused)
{
	(void)unused;
	for (int i = 0; i < TURNS; i++) {
		compute(TURN_NS);
		weft_yield();
	}
}

static void turn_main(void *unused)
{
	(void)unused;
	weft_co *co = go(two_ms_turns, NULL);
	join(co);
	weft_stats st = snap();
	/* The spinner's TURNS turns that compute, each of at least 2 ms: none
	 * is lost or measured short.  (More may reach 2 ms: a short turn,
	 * this one's or the spinner's last, during which the OS took the
	 * worker away.) */
	unsigned b = weft__metrics_bucket((uint64_t)TURN_NS);
	uint64_t at_least = 0;
	for (unsigned i = b; i < WEFT_HIST_BUCKETS; i++)
		at_least += st.turn_time.buckets[i];
	CHECK(at_least >= TURNS);
	/* The lowest of them is in the 2 ms bucket itself (which holds up to
	 * 97 us more): a turn leaves it for a higher one only when the OS
	 * took the worker away meanwhile, which a loaded machine does to many
	 * turns but not to every one of TURNS (that is the one way this
	 * check could fail; no bound holds most of them in).  Valgrind runs
	 * one thread at a time, the others in the middle of turns: not
	 * judged there. */
	CHECK(RUNNING_ON_VALGRIND || st.turn_time.buckets[b] >= 1);
	CHECK(lower(b) <= (uint64_t)TURN_NS && (uint64_t)TURN_NS < weft_hist_bound(b));
	CHECK(st.sched_sample == 1);
	CHECK(st.turn_time.sum_ns >= (uint64_t)TURNS * (uint64_t)TURN_NS);
}

Test(metrics, a_2ms_turn_lands_in_the_2ms_bucket)
{
	run_timed(1, turn_main, NULL);
}

/* ---- N yielders on one worker wait for the other N - 1 turns */

enum { YIELDERS = 4, ROUNDS = 50 };
/* long against a switch: valgrind's switches are slower, its turns longer */
#define YIELD_TURN_NS ((int64_t)(RUNNING_ON_VALGRIND ? 2000 : 200) * 1000)

static void yielder(void *unused)
{
	(void)unused;
	for (int i = 0; i < ROUNDS; i++) {
		compute(YIELD_TURN_NS);
		weft_yield();
	}
}

static void yielders_main(void *unused)
{
	(void)unused;
	weft_co *co[YIELDERS];
	for (int i = 0; i < YIELDERS; i++)
		co[i] = go(yielder, NULL);
	for (int i = 0; i < YIELDERS; i++)
		join(co[i]);
	weft_stats st = snap();
	/*
	 * Round robin: each turn is waited out by the other N - 1 yielders,
	 * so the delays add up to (N - 1) times the turns, less the first and
	 * last rounds' (fewer waiters) and plus the switches.  The ratio of
	 * the sums does not move when the OS takes the CPU in a turn (it
	 * stretches that turn and the delays it causes alike); only the
	 * time between two turns (a switch: a few hundred ns of each 200 us,
	 * or a preemption there) adds to the delays alone, which the factor
	 * 2 leaves room for many times over.
	 */
	double ratio = (double)st.sched_delay.sum_ns / (double)st.turn_time.sum_ns;
	fprintf(stderr, "delays / turns: %.3f for %d yielders\n", ratio, YIELDERS);
	CHECK(ratio > (YIELDERS - 1) * 0.75 && ratio < (YIELDERS - 1) * 2.0);
	/* and the median delay is at least N - 1 whole turns: its bucket
	 * reaches (N - 1) * 200 us */
	CHECK(weft_stats_quantile(&st.sched_delay, 0.5) > (uint64_t)((YIELDERS - 1) * YIELD_TURN_NS));
}

Test(metrics, n_yielders_wait_n_minus_1_turns)
{
	run_timed(1, yielders_main, NULL);
}

/* ---- a coroutine woken by a plain thread counts from the wake */

struct thread_wake {
	weft_chan *ch;
	weft_stats before;
	int64_t sent_at;
};

static void *send_later(void *arg)
{
	struct thread_wake *t = arg;
	struct timespec nap = { 0, 50 * 1000 * 1000 };	/* a park longer than the wake's delay */
	nanosleep(&nap, NULL);
	t->before = snap();
	t->sent_at = weft_now();
	int v = 1;
	CHECK(weft_chan_send(t->ch, &v, -1) == 0);
	return NULL;
}

static void receiver(void *arg)
{
	struct thread_wake *t = arg;
	int v;
	CHECK(weft_chan_recv(t->ch, &v, -1) == 0);
	int64_t ran_at = weft_now();
	weft_stats after = snap();
	/* One runnable period ended since the thread's snapshot: this
	 * wake's (the test's main waits in its join).  Its delay lies between
	 * the send and now: its bucket starts no later than that. */
	CHECK(after.sched_delay.count == t->before.sched_delay.count + 1);
	unsigned b = 0;
	while (after.sched_delay.buckets[b] == t->before.sched_delay.buckets[b])
		b++;
	CHECK(lower(b) <= (uint64_t)(ran_at - t->sent_at));
}

static void thread_wake_main(void *unused)
{
	(void)unused;
	struct thread_wake t = { .ch = weft_chan_new(sizeof(int), 0) };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(receiver, &t);
	wait_parks(parks, 1);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, send_later, &t) == 0);
	join(co);
	CHECK(pthread_join(th, NULL) == 0);
	weft_chan_free(t.ch);
}

Test(metrics, a_plain_thread_s_wake_counts_from_the_wake)
{
	run_timed(1, thread_wake_main, NULL);
}

/* ---- gauges */

static void park_on(void *arg)
{
	int v;
	CHECK(weft_chan_recv(arg, &v, -1) == -1 && errno == EPIPE);
}

static void gauges_main(void *unused)
{
	(void)unused;
	enum { N = 1000 };
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	static weft_co *cos[N];
	uint64_t parks = stats_now().total.parks;
	for (int i = 0; i < N; i++)
		cos[i] = go(park_on, ch);
	wait_parks(parks, N);
	/* all parked; this one runs: live - running - queued */
	weft_stats st = snap();
	CHECK(st.live == N + 1);
	CHECK(st.runnable == 0 && st.inject_queued == 0);
	CHECK(st.parked == N);
	CHECK(st.parked_by[WEFT_PARK_SYNC] == N);
	CHECK(st.stack_bytes >= (uint64_t)(N + 1) * (16 << 10));
	CHECK(st.stack_bytes_live >= (uint64_t)(N + 1) * (16 << 10));
	CHECK(st.stack_bytes_live <= st.stack_bytes);
	/* a socket pair the runtime has polled counts two fds, until closed */
	int sv[2];
	socket_pair(sv);
	char c = 'x';
	CHECK(weft_write(sv[0], &c, 1, -1) == 1 && weft_read(sv[1], &c, 1, -1) == 1);
	CHECK(snap().registered_fds == st.registered_fds + 2);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	CHECK(snap().registered_fds == st.registered_fds);
	weft_worker_sched per[2];
	weft_stats pw = { .size = sizeof pw, .per_worker_sched = per, .per_worker_len = 2 };
	CHECK(weft_stats_get(&pw) == 0);
	CHECK(per[0].runnable + per[1].runnable == 0);
	CHECK(per[0].delay.count + per[1].delay.count == pw.sched_delay.count);
	CHECK(per[0].turn.count + per[1].turn.count == pw.turn_time.count);
	weft_chan_close(ch);
	for (int i = 0; i < N; i++)
		join(cos[i]);
	weft_chan_free(ch);
	st = snap();
	CHECK(st.parked == 0 && st.live == 1 && st.parked_by[WEFT_PARK_SYNC] == 0);
}

Test(metrics, gauges_read_1000_parked)
{
	run_timed(2, gauges_main, NULL);
}

/* ---- parked by cause: one coroutine in each kind of wait */

static void sleep_long(void *unused)
{
	(void)unused;
	CHECK(weft_sleep(weft_now() + 3600 * 1000 * MS) == -1 && errno == ECANCELED);
}

static void read_one(void *arg)
{
	char c;
	CHECK(weft_read(*(int *)arg, &c, 1, -1) == 1);
}

static void join_one(void *arg)
{
	join(arg);
}

static void check_parked_by(const uint64_t want[WEFT_PARK_CAUSES])
{
	weft_stats st = snap();
	for (unsigned c = 0; c < WEFT_PARK_CAUSES; c++) {
		if (st.parked_by[c] != want[c])
			fprintf(stderr, "cause %u: %llu parked, not %llu\n", c,
				(unsigned long long)st.parked_by[c], (unsigned long long)want[c]);
		CHECK(st.parked_by[c] == want[c]);
	}
}

static void causes_main(void *unused)
{
	(void)unused;
	uint64_t parks = stats_now().total.parks;
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	int sv[2];
	socket_pair(sv);
	weft_co *sleeper = go(sleep_long, NULL);
	weft_co *reader = go(read_one, &sv[1]);
	weft_co *receiver = go(park_on, ch);
	weft_co *joiner = go(join_one, receiver);
	static struct pool_hold hold;
	weft_co *holder = pool_hold_start(&hold);
	wait_parks(parks, 5);
	uint64_t each[WEFT_PARK_CAUSES];
	for (unsigned c = 0; c < WEFT_PARK_CAUSES; c++)
		each[c] = 1;
	check_parked_by(each);
	CHECK(weft_cancel(sleeper) == 0);
	CHECK(write(sv[0], "x", 1) == 1);
	weft_chan_close(ch);
	pool_hold_release(&hold, holder);
	join(sleeper);
	join(reader);
	join(joiner);
	check_parked_by((uint64_t[WEFT_PARK_CAUSES]){ 0 });
	weft_chan_free(ch);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(metrics, parked_by_cause_reads_each_kind_of_wait)
{
	run_timed(2, causes_main, NULL);
}

/* ---- the delay estimate reads a standing queue */

struct estimate {
	atomic_int seen;	/* the thread saw the estimate reach the floor */
	atomic_llong best;
};

static void estimate_yielder(void *arg)
{
	struct estimate *e = arg;
	/* until the thread has seen it, or about 10 s of rounds */
	for (int i = 0; i < 2500 && !atomic_load(&e->seen); i++) {
		compute(YIELD_TURN_NS * 5);
		weft_yield();
	}
}

static void *watch_estimate(void *arg)
{
	struct estimate *e = arg;
	/* each delay in the queue is at least three other 1 ms turns */
	int64_t floor = (YIELDERS - 1) * YIELD_TURN_NS * 5;
	while (!atomic_load(&e->seen)) {
		int64_t d = weft_sched_delay();
		if (d > atomic_load(&e->best))
			atomic_store(&e->best, d);
		if (d >= floor)
			atomic_store(&e->seen, 1);
		struct timespec nap = { 0, 1000 * 1000 };
		nanosleep(&nap, NULL);
	}
	return NULL;
}

static void estimate_main(void *unused)
{
	(void)unused;
	static struct estimate e;
	CHECK(weft_sched_delay() < YIELD_TURN_NS);	/* idle so far */
	pthread_t th;
	CHECK(pthread_create(&th, NULL, watch_estimate, &e) == 0);
	weft_co *co[YIELDERS];
	for (int i = 0; i < YIELDERS; i++)
		co[i] = go(estimate_yielder, &e);
	for (int i = 0; i < YIELDERS; i++)
		join(co[i]);
	if (!atomic_load(&e.seen))
		atomic_store(&e.seen, 2);	/* stop the thread: failed */
	CHECK(pthread_join(th, NULL) == 0);
	if (atomic_load(&e.seen) != 1)
		fprintf(stderr, "estimate reached %lld ns only\n", (long long)atomic_load(&e.best));
	CHECK(atomic_load(&e.seen) == 1);
}

Test(metrics, the_delay_estimate_reads_a_standing_queue)
{
	run_timed(1, estimate_main, NULL);
}

/* ---- readers racing writers (TSan) */

struct race {
	atomic_int done;
};

static void pinger(void *arg)
{
	weft_chan **ch = arg;
	for (int i = 0; i < 20000; i++) {
		int v = i;
		CHECK(weft_chan_send(ch[0], &v, -1) == 0);
		CHECK(weft_chan_recv(ch[1], &v, -1) == 0);
		if (i % 64 == 0)
			weft_yield();
	}
}

static void ponger(void *arg)
{
	weft_chan **ch = arg;
	for (int i = 0; i < 20000; i++) {
		int v;
		CHECK(weft_chan_recv(ch[0], &v, -1) == 0);
		CHECK(weft_chan_send(ch[1], &v, -1) == 0);
	}
}

static void *read_stats(void *arg)
{
	struct race *r = arg;
	static weft_stats prev, st;
	static weft_worker_sched per[2];
	while (!atomic_load(&r->done)) {
		st = (weft_stats){ .size = sizeof st, .per_worker_sched = per, .per_worker_len = 2 };
		CHECK(weft_stats_get(&st) == 0);
		(void)weft_sched_delay();
		/* every bucket only grows */
		for (unsigned i = 0; i < WEFT_HIST_BUCKETS; i++)
			CHECK(st.sched_delay.buckets[i] >= prev.sched_delay.buckets[i] &&
			      st.turn_time.buckets[i] >= prev.turn_time.buckets[i]);
		prev = st;
	}
	return NULL;
}

static void race_main(void *unused)
{
	(void)unused;
	static struct race r;
	pthread_t th;
	CHECK(pthread_create(&th, NULL, read_stats, &r) == 0);
	enum { PAIRS = 4 };
	weft_chan *ch[PAIRS][2];
	weft_co *co[PAIRS][2];
	for (int p = 0; p < PAIRS; p++) {
		ch[p][0] = weft_chan_new(sizeof(int), 0);
		ch[p][1] = weft_chan_new(sizeof(int), 0);
		co[p][0] = go(pinger, ch[p]);
		co[p][1] = go(ponger, ch[p]);
	}
	for (int p = 0; p < PAIRS; p++) {
		join(co[p][0]);
		join(co[p][1]);
		weft_chan_free(ch[p][0]);
		weft_chan_free(ch[p][1]);
	}
	atomic_store(&r.done, 1);
	CHECK(pthread_join(th, NULL) == 0);
}

Test(metrics, readers_race_writers)
{
	run_timed(2, race_main, NULL);
}

/* ---- the Prometheus text */

static void prometheus_main(void *unused)
{
	(void)unused;
	weft_co *co = go(two_ms_turns, NULL);
	join(co);
	weft_stats st = snap();
	char small[16];
	size_t need = weft_stats_prometheus(&st, small, sizeof small);
	CHECK(need > sizeof small && strlen(small) == sizeof small - 1);	/* cut, terminated */
	char *text = malloc(need + 1);
	CHECK(text && weft_stats_prometheus(&st, text, need + 1) == need && strlen(text) == need);
	/* cumulative buckets that end in +Inf = _count */
	const char *p = text;
	uint64_t prev = 0, n = 0;
	char le[64];
	unsigned long long v;
	while ((p = strstr(p, "weft_turn_seconds_bucket{le=\"")) != NULL) {
		CHECK(sscanf(p, "weft_turn_seconds_bucket{le=\"%63[^\"]\"} %llu", le, &v) == 2);
		CHECK(v >= prev);
		prev = v;
		n++;
		p++;
	}
	CHECK(n > 100 && strcmp(le, "+Inf") == 0 && prev == st.turn_time.count);
	char want[96];
	snprintf(want, sizeof want, "\nweft_turn_seconds_count %llu\n", (unsigned long long)st.turn_time.count);
	CHECK(strstr(text, want));
	/* le is the bucket's bound in seconds, to the nanosecond */
	CHECK(strstr(text, "weft_turn_seconds_bucket{le=\"0.001966080\"}"));
	CHECK(strstr(text, "# TYPE weft_sched_delay_seconds histogram\n"));
	CHECK(strstr(text, "\nweft_parked_coroutines 0\n"));
	CHECK(strstr(text, "\nweft_parked_by_cause_coroutines{cause=\"offload\"} 0\n"));
	CHECK(strstr(text, "\nweft_stack_bytes_live "));
	CHECK(strstr(text, "\nweft_live_coroutines 1\n"));
	CHECK(strstr(text, "\nweft_registered_fds 0\n"));
	CHECK(strstr(text, "# TYPE weft_dispatches_total counter\nweft_dispatches_total "));
	CHECK(!strstr(text, "worker=\""));	/* no per_worker_sched given */
	free(text);
	/* with per_worker_sched: a family per histogram and runnable, labelled */
	weft_worker_sched per[1];
	st = (weft_stats){ .size = sizeof st, .per_worker_sched = per, .per_worker_len = 1 };
	CHECK(weft_stats_get(&st) == 0);
	need = weft_stats_prometheus(&st, NULL, 0);
	text = malloc(need + 1);
	CHECK(text && weft_stats_prometheus(&st, text, need + 1) == need);
	CHECK(strstr(text, "# TYPE weft_worker_turn_seconds histogram\n"));
	snprintf(want, sizeof want, "\nweft_worker_turn_seconds_count{worker=\"0\"} %llu\n",
		 (unsigned long long)per[0].turn.count);
	CHECK(strstr(text, want));
	CHECK(strstr(text, "\nweft_worker_sched_delay_seconds_bucket{worker=\"0\",le=\"+Inf\"} "));
	CHECK(strstr(text, "\nweft_worker_runnable_coroutines{worker=\"0\"} 0\n"));
	free(text);
	errno = 0;
	CHECK(weft_stats_prometheus(NULL, small, sizeof small) == 0 && errno == EINVAL);
}

Test(metrics, prometheus_text)
{
	run_timed(1, prometheus_main, NULL);
}
