/* SPDX-License-Identifier: MIT */
/* Adversarial scenes for the scheduler metrics of weft_stats version 5
 * (the stamp moved after the park word's CAS, the per-thread countdown,
 * parked_by and stack_bytes_live).  Each scene states what must hold; a
 * failing one is a break of that change.  No wall-clock bounds. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "harness.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coro_test.h"
#include "park.h"

static weft_stats snap(void)
{
	weft_stats st = { .size = sizeof st };
	CHECK(weft_stats_get(&st) == 0);
	CHECK(st.version == WEFT_STATS_VERSION);
	return st;
}

/* ---- WEFT_SCHED_SAMPLE=1 after a run with a larger rate */

static void nothing(void *unused)
{
	(void)unused;
}

/* With WEFT_SCHED_SAMPLE=1 every runnable period is timed: every dispatch
 * so far (this coroutine's own included) is in sched_delay. */
static void every_dispatch_timed(void *unused)
{
	(void)unused;
	weft_stats st = snap();
	CHECK(st.sched_sample == 1);
	if (st.sched_delay.count != st.total.dispatches)
		fprintf(stderr, "sched_delay.count %llu, dispatches %llu\n",
			(unsigned long long)st.sched_delay.count,
			(unsigned long long)st.total.dispatches);
	CHECK(st.sched_delay.count == st.total.dispatches);
}

/* The countdown is the calling thread's own (a __thread int) and is set
 * back to the mask only at a timed stamp: a run with the rate 65536
 * leaves the main thread's countdown at 65535, and the next run, with
 * WEFT_SCHED_SAMPLE=1, leaves its first 65535 stamps from that thread
 * untimed (here: the spawn of weft_main's coroutine). */
Test(metrics_adv, sample_1_after_a_run_at_65536_times_every_period)
{
	cr_assert_eq(setenv("WEFT_SCHED_SAMPLE", "65536", 1), 0);
	run(1, nothing, NULL);
	cr_assert_eq(setenv("WEFT_SCHED_SAMPLE", "1", 1), 0);
	run(1, every_dispatch_timed, NULL);
}

/* ---- parked_by never counts a cause the coroutine never waited for */

enum { IO_PARKERS = 64, CHURN_ROUNDS = 400, CHURN_EACH = 32 };

static void read_byte(void *arg)
{
	char c;
	CHECK(weft_read(*(int *)arg, &c, 1, -1) == 1);
}

struct census_watch {
	atomic_int done;
	atomic_ullong io_seen;		/* the most parked_by[IO] a snapshot read */
	atomic_ullong snapshots;
};

static void *watch_io(void *arg)
{
	struct census_watch *cw = arg;
	while (!atomic_load(&cw->done)) {
		weft_stats st = { .size = sizeof st };
		CHECK(weft_stats_get(&st) == 0);
		if (st.parked_by[WEFT_PARK_IO] > atomic_load(&cw->io_seen))
			atomic_store(&cw->io_seen, st.parked_by[WEFT_PARK_IO]);
		atomic_fetch_add(&cw->snapshots, 1);
	}
	return NULL;
}

static weft_mutex *churn_mu;

/* Waits on a mutex, once: its only park is a sync one. */
static void lock_once(void *unused)
{
	(void)unused;
	CHECK(weft_mutex_lock(churn_mu) == 0);
	weft_yield();
	weft_mutex_unlock(churn_mu);
}

/* Parks once for a short sleep: a timer park. */
static void nap_once(void *unused)
{
	(void)unused;
	CHECK(weft_sleep(weft_now() + 50 * 1000) == 0);
}

static weft_chan *churn_chs[WEFT_SELECT_MAX];

/* Parks once in a select on 64 empty channels until a short deadline: a
 * sync park whose park word says PARKING from weft__waiter_init on, through
 * 64 queue pushes, 64 unlocks and a timer, before co_wait stores its cause. */
static void select_once(void *unused)
{
	(void)unused;
	weft_chan_case cs[WEFT_SELECT_MAX];
	int v[WEFT_SELECT_MAX];
	for (int i = 0; i < WEFT_SELECT_MAX; i++)
		cs[i] = (weft_chan_case){ .ch = churn_chs[i], .op = WEFT_CHAN_RECV, .elem = &v[i] };
	CHECK(weft_chan_select(cs, WEFT_SELECT_MAX, weft_now() + 50 * 1000) == -1 &&
	      errno == ETIMEDOUT);
}

static void (*const churners[])(void *) = { lock_once, nap_once, select_once, select_once };

static void stale_cause_main(void *unused)
{
	(void)unused;
	/* the stacks of 64 finished coroutines whose last park was for I/O */
	int sv[2];
	socket_pair(sv);
	uint64_t parks = stats_now().total.parks;
	weft_co *r[IO_PARKERS];
	for (int i = 0; i < IO_PARKERS; i++)
		r[i] = go(read_byte, &sv[1]);
	wait_parks(parks, IO_PARKERS);
	CHECK(snap().parked_by[WEFT_PARK_IO] == IO_PARKERS);
	char buf[IO_PARKERS];
	memset(buf, 'x', sizeof buf);
	CHECK(write(sv[0], buf, sizeof buf) == (ssize_t)sizeof buf);
	for (int i = 0; i < IO_PARKERS; i++)
		join(r[i]);
	CHECK(snap().parked_by[WEFT_PARK_IO] == 0);
	/* from now on nobody waits for I/O: new coroutines on those stacks
	 * park for a mutex, a sleep or a select, while a thread reads the
	 * census.  Between weft__waiter_init (the park word says PARKING) and
	 * co_wait's store of the cause, the census reads the previous
	 * occupant's cause (park_cause is not reset by a spawn). */
	churn_mu = weft_mutex_new();
	CHECK(churn_mu);
	for (int i = 0; i < WEFT_SELECT_MAX; i++)
		CHECK((churn_chs[i] = weft_chan_new(sizeof(int), 0)) != NULL);
	static struct census_watch cw;
	pthread_t th;
	CHECK(pthread_create(&th, NULL, watch_io, &cw) == 0);
	for (unsigned round = 0; round < scaled(CHURN_ROUNDS, 150, 20); round++) {
		weft_co *co[CHURN_EACH];
		for (int i = 0; i < CHURN_EACH; i++)
			co[i] = go(churners[i % 4], NULL);
		for (int i = 0; i < CHURN_EACH; i++)
			join(co[i]);
	}
	atomic_store(&cw.done, 1);
	CHECK(pthread_join(th, NULL) == 0);
	if (atomic_load(&cw.io_seen))
		fprintf(stderr, "parked_by[IO] read %llu (in %llu snapshots) with no I/O wait\n",
			(unsigned long long)atomic_load(&cw.io_seen),
			(unsigned long long)atomic_load(&cw.snapshots));
	CHECK(atomic_load(&cw.io_seen) == 0);
	weft_mutex_free(churn_mu);
	for (int i = 0; i < WEFT_SELECT_MAX; i++)
		weft_chan_free(churn_chs[i]);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(metrics_adv, parked_by_never_counts_a_cause_not_waited_for)
{
	run(1, stale_cause_main, NULL);	/* the reader thread has the other CPU */
}

/* ---- weft_stats_get and the Prometheus page under spawn/exit churn */

struct churn_read {
	atomic_int done;
	atomic_ullong pages;
};

/* Every histogram series of the page: cumulative buckets that never
 * decrease and end in +Inf equal to _count. */
static unsigned check_page(const char *text)
{
	unsigned series = 0;
	const char *p = text;
	while ((p = strstr(p, "_bucket{")) != NULL) {
		const char *line = p;
		while (line > text && line[-1] != '\n')
			line--;
		size_t name_len = (size_t)(p - line);
		unsigned long long prev = 0, v = 0;
		const char *q = line;
		for (;;) {
			const char *le = strstr(q, "le=\"");
			const char *eol = strchr(q, '\n');
			CHECK(le && eol && le < eol);
			CHECK(sscanf(strchr(le, '}'), "} %llu", &v) == 1);
			CHECK(v >= prev);
			prev = v;
			bool inf = strncmp(le, "le=\"+Inf\"", 9) == 0;
			q = eol + 1;
			if (inf)
				break;
		}
		/* _sum then _count follow */
		const char *cnt = strstr(q, "_count");
		CHECK(cnt && strncmp(q, line, name_len - 7) == 0);
		const char *sp = strchr(cnt, ' ');
		CHECK(sp && strtoull(sp + 1, NULL, 10) == v);
		p = cnt;
		series++;
	}
	return series;
}

static void *read_pages(void *arg)
{
	struct churn_read *cr = arg;
	enum { TEXT = 1 << 20 };
	weft_worker_sched *per = calloc(2, sizeof *per);
	char *text = malloc(TEXT);
	CHECK(per && text);
	while (!atomic_load(&cr->done)) {
		weft_stats st = { .size = sizeof st, .per_worker_sched = per, .per_worker_len = 2 };
		CHECK(weft_stats_get(&st) == 0);
		CHECK(st.stack_bytes_live <= st.stack_bytes);
		uint64_t by = 0;
		for (unsigned c = 0; c < WEFT_PARK_CAUSES; c++)
			by += st.parked_by[c];
		CHECK(by <= st.live + 64);	/* a gauge, but not a wild one */
		size_t need = weft_stats_prometheus(&st, text, TEXT);
		CHECK(need < TEXT);
		CHECK(check_page(text) == 6);	/* 2 histograms, and one per worker each */
		atomic_fetch_add(&cr->pages, 1);
	}
	free(per);
	free(text);
	return NULL;
}

static void short_life(void *arg)
{
	if (arg)
		weft_yield();
}

/* Churns for 300 rounds, and on until the readers have read two pages
 * (on a loaded machine they may not have run at all by then): the pages
 * are read during the churn, not after it. */
static void spawner(void *arg)
{
	const struct churn_read *cr = arg;
	for (int round = 0; round < 300 || atomic_load(&cr->pages) < 2; round++) {
		weft_co *co[16];
		for (int i = 0; i < 16; i++) {
			co[i] = weft_spawn(short_life, (void *)(intptr_t)(i & 1));
			CHECK(co[i]);
			if (i % 4 == 3)
				CHECK(weft_detach(co[i]) == 0);
		}
		for (int i = 0; i < 16; i++)
			if (i % 4 != 3)
				join(co[i]);
	}
}

static void churn_main(void *unused)
{
	(void)unused;
	static struct churn_read cr;
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&th[i], NULL, read_pages, &cr) == 0);
	weft_co *sp[4];
	for (int i = 0; i < 4; i++)
		sp[i] = go(spawner, &cr);
	for (int i = 0; i < 4; i++)
		join(sp[i]);
	atomic_store(&cr.done, 1);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
}

Test(metrics_adv, stats_and_prometheus_under_spawn_exit_churn)
{
	cr_assert_eq(setenv("WEFT_SCHED_SAMPLE", "1", 1), 0);
	run(2, churn_main, NULL);
}

/* ---- the census's window, made to stand still (white-box) */

/* A coroutine arms a wait (weft__waiter_init: its park word says PARKING)
 * and, before it switches out, reads the census itself: it is running, so
 * parked_by must not count it, only main, parked in weft_join (weft.h: "switched out to wait and not yet
 * resumed"); it never waited for I/O, so parked_by[IO] least of all.  The
 * stack it runs on last held a coroutine that parked for I/O, whose
 * park_cause a spawn leaves in place.  The window is where every real wait
 * does its work before co_wait stores the cause: a select's queue pushes
 * and unlocks, a wait queue's push, io_wait's registration, the timer. */
static weft_co *armed;

static void arm_and_read(void *unused)
{
	(void)unused;
	armed = weft_self();
	struct weft__waiter w;
	weft__waiter_init(&w, WEFT_PARK_SYNC);
	weft_stats st = { .size = sizeof st };
	CHECK(weft_stats_get(&st) == 0);
	CHECK(weft__waiter_disarm(&w) == WEFT__WAITER_NOT_WOKEN);
	/* main is parked in weft_join; this one runs */
	bool ok = true;
	for (unsigned c = 0; c < WEFT_PARK_CAUSES; c++) {
		uint64_t want = c == WEFT_PARK_JOIN;
		if (st.parked_by[c] != want)
			fprintf(stderr, "cause %u: %llu parked, not %llu\n", c,
				(unsigned long long)st.parked_by[c], (unsigned long long)want);
		ok = ok && st.parked_by[c] == want;
	}
	CHECK(ok);
}

static void armed_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	uint64_t parks = stats_now().total.parks;
	weft_co *r = go(read_byte, &sv[1]);
	weft_co *was = r;
	wait_parks(parks, 1);
	CHECK(snap().parked_by[WEFT_PARK_IO] == 1);
	CHECK(write(sv[0], "x", 1) == 1);
	join(r);
	/* the next spawn on this worker takes that stack back (its cache is
	 * LIFO): the control block is the stack's payload, so the pointer is
	 * the same */
	weft_co *a = go(arm_and_read, NULL);
	join(a);
	if (armed != was)
		fprintf(stderr, "note: the stack was not reused\n");
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(metrics_adv, an_armed_running_coroutine_is_not_parked_for_a_stale_cause)
{
	run(1, armed_main, NULL);
}

/* ---- stack_bytes_live is a part of stack_bytes */

/* weft.h: stack_bytes_live is "of stack_bytes; the rest is the pool's
 * cache", so stack_bytes - stack_bytes_live must not wrap.  They come from
 * two walks of the pool's list, each under its lock: stacks allocated for
 * live coroutines between the two count in the second only.  A spawn with
 * a stack size other than the pool's allocates a stack and frees it at the
 * end (no cache), so the list grows and shrinks all the time. */
struct live_watch {
	atomic_int done;
	atomic_ullong over;		/* snapshots with live > total */
	atomic_ullong snapshots;
	atomic_ullong worst;		/* the most live exceeded total by */
};

static void *watch_live(void *arg)
{
	struct live_watch *lw = arg;
	while (!atomic_load(&lw->done)) {
		weft_stats st = { .size = sizeof st };
		CHECK(weft_stats_get(&st) == 0);
		if (st.stack_bytes_live > st.stack_bytes) {
			atomic_fetch_add(&lw->over, 1);
			if (st.stack_bytes_live - st.stack_bytes > atomic_load(&lw->worst))
				atomic_store(&lw->worst, st.stack_bytes_live - st.stack_bytes);
		}
		atomic_fetch_add(&lw->snapshots, 1);
	}
	return NULL;
}

static void sized_spawner(void *arg)
{
	(void)arg;
	const weft_spawn_opts opts = { .stack_size = 48 << 10 };
	unsigned rounds = scaled(1500, 200, 50);
	for (unsigned round = 0; round < rounds; round++) {
		weft_co *co[32];
		for (int i = 0; i < 32; i++)
			CHECK((co[i] = weft_spawn_with(short_life, (void *)1, &opts)) != NULL);
		for (int i = 0; i < 32; i++)
			join(co[i]);
	}
}

static void live_main(void *unused)
{
	(void)unused;
	static struct live_watch lw;
	pthread_t th;
	CHECK(pthread_create(&th, NULL, watch_live, &lw) == 0);
	weft_co *sp[4];
	for (int i = 0; i < 4; i++)
		sp[i] = go(sized_spawner, NULL);
	for (int i = 0; i < 4; i++)
		join(sp[i]);
	atomic_store(&lw.done, 1);
	CHECK(pthread_join(th, NULL) == 0);
	if (atomic_load(&lw.over))
		fprintf(stderr, "stack_bytes_live > stack_bytes in %llu of %llu snapshots (by up to %llu bytes)\n",
			(unsigned long long)atomic_load(&lw.over),
			(unsigned long long)atomic_load(&lw.snapshots),
			(unsigned long long)atomic_load(&lw.worst));
	CHECK(atomic_load(&lw.over) == 0);
}

Test(metrics_adv, stack_bytes_live_never_exceeds_stack_bytes)
{
	run(2, live_main, NULL);
}
