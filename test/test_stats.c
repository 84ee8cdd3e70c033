/* SPDX-License-Identifier: MIT */
/* weft_stats_get (counters add up and move), $WEFT_STATS=1's table, and the
 * stall detector ($WEFT_STALL_MS). */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "harness.h"
#include <dirent.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <string.h>

#include "coro_test.h"

static weft_stats get_stats(weft_worker_stats *per, unsigned len)
{
	weft_stats st = { .size = sizeof st, .per_worker = per, .per_worker_len = len };
	CHECK(weft_stats_get(&st) == 0);
	CHECK(st.version == WEFT_STATS_VERSION);
	return st;
}

/* ---- spawned = finished + live, per-worker sums, counters that move */

static void park_on(void *arg)
{
	int v;
	CHECK(weft_chan_recv(arg, &v, -1) == -1 && errno == EPIPE);
}

static void add_up_main(void *unused)
{
	(void)unused;
	enum { N = 100 };
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	weft_co *cos[N];
	for (int i = 0; i < N; i++)
		cos[i] = go(park_on, ch);
	/* until every receiver has parked (they run on either worker) */
	weft_worker_stats per[2];
	weft_stats st = get_stats(per, 2);
	for (int i = 0; i < 10000 && st.total.parks < N + 10; i++) {
		CHECK(weft_sleep(weft_now() + MS) == 0);
		st = get_stats(per, 2);
	}
	CHECK(st.workers == 2);
	CHECK(st.live == N + 1);	/* and this one */
	CHECK(st.total.spawned == st.total.finished + st.live);
	CHECK(st.total.finished == per[0].finished + per[1].finished);
	/* weft_main spawned this one from a plain thread: */
	CHECK(st.total.spawned == per[0].spawned + per[1].spawned + 1);
	CHECK(st.total.dispatches >= N + 10);
	CHECK(st.total.parks >= N + 10);
	CHECK(st.total.timers_fired >= 1);	/* a sleep can expire before it arms */
	CHECK(st.stacks_allocated >= N + 1);

	weft_chan_close(ch);
	for (int i = 0; i < N; i++)
		join(cos[i]);
	weft_chan_free(ch);
	st = get_stats(NULL, 0);
	CHECK(st.live == 1);
	CHECK(st.total.spawned == st.total.finished + 1);
	CHECK(st.total.wakeups >= N + 10);
}

Test(stats, counters_add_up)
{
	run(2, add_up_main, NULL);
}

static void read_20(void *arg)
{
	char c;
	for (int i = 0; i < 20; i++)
		CHECK(weft_read(*(int *)arg, &c, 1, -1) == 1);
}

static void socket_main(void *unused)
{
	(void)unused;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	weft_co *reader = go(read_20, &sv[1]);
	for (int i = 0; i < 20; i++) {
		CHECK(weft_sleep(weft_now() + MS) == 0);	/* the reader waits for it */
		CHECK(weft_write(sv[0], "x", 1, -1) == 1);
	}
	join(reader);
	weft_close(sv[0]);
	weft_close(sv[1]);
	weft_stats st = get_stats(NULL, 0);
	CHECK(st.total.polls >= 1 && st.total.ready_events >= 1);
}

Test(stats, io_polls_are_counted)
{
	run(1, socket_main, NULL);
}

Test(stats, bad_arguments)
{
	errno = 0;
	cr_assert_eq(weft_stats_get(NULL), -1);
	cr_assert_eq(errno, EINVAL);
	weft_stats st = { .size = sizeof st };
	errno = 0;
	cr_assert_eq(weft_stats_get(&st), -1, "not running");
	cr_assert_eq(errno, ESRCH);
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 1)), 0);
	st.size = offsetof(weft_stats, monitor_wakeups) - 1;	/* below version 1 */
	errno = 0;
	cr_assert_eq(weft_stats_get(&st), -1);
	cr_assert_eq(errno, EINVAL);
	/* A caller built against version 1 gets version 1's fields, nothing
	 * written past them. */
	st.size = offsetof(weft_stats, monitor_wakeups);
	st.monitor_wakeups = 0xfeedfacecafebeefull;
	cr_assert_eq(weft_stats_get(&st), 0, "version 1's size");
	cr_assert_eq(st.monitor_wakeups, 0xfeedfacecafebeefull, "past its size");
	st.size = sizeof st;
	cr_assert_eq(weft_stats_get(&st), 0, "from a plain thread");
	cr_assert_eq(st.live, 0);
	cr_assert_eq(weft_shutdown(), 0);
}

static void nothing(void *unused)
{
	(void)unused;
}

Test(stats, weft_stats_1_prints_a_table_at_shutdown)
{
	char out[8192];
	setenv("WEFT_STATS", "1", 1);
	struct stderr_capture cap = stderr_capture_begin();
	int r = weft_main(nothing, NULL, &WEFT_CONFIG(.workers = 2));
	stderr_capture_end(&cap, out, sizeof out);
	unsetenv("WEFT_STATS");
	cr_assert_eq(r, 0);
	cr_assert_not_null(strstr(out, "weft stats: 2 workers, 0 live"), "%s", out);
	cr_assert_not_null(strstr(out, "spawned"), "%s", out);
	cr_assert_not_null(strstr(out, "stack_cache_misses"), "%s", out);
	cr_assert_not_null(strstr(out, "stalls"), "%s", out);
}

/* ---- the poller in use: weft_stats.poller, WEFT_STATS=1, Prometheus */

static void poller_main(void *arg)
{
	int *seen = arg;
	weft_stats st = get_stats(NULL, 0);
	*seen = st.poller;
	size_t n = weft_stats_prometheus(&st, NULL, 0);
	char *text = malloc(n + 1), want[64];
	CHECK(text && weft_stats_prometheus(&st, text, n + 1) == n);
	snprintf(want, sizeof want, "\nweft_poller_info{poller=\"%s\"} 1\n",
		 st.poller == WEFT_POLLER_WORKER ? "worker" : "shared");
	CHECK(strstr(text, want));
	CHECK(strstr(text, "# TYPE weft_poller_info gauge\n"));
	free(text);
}

Test(stats, the_poller_in_use_is_reported)
{
	static const struct { int poller; const char *line; } modes[] = {
		{ WEFT_POLLER_SHARED, ", shared poller\n" },
		{ WEFT_POLLER_WORKER, ", worker poller\n" },
	};
	for (unsigned i = 0; i < 2; i++) {
		char out[8192];
		int seen = 0;
		setenv("WEFT_STATS", "1", 1);
		struct stderr_capture cap = stderr_capture_begin();
		int r = weft_main(poller_main, &seen,
				  &WEFT_CONFIG(.workers = 2, .poller = modes[i].poller));
		stderr_capture_end(&cap, out, sizeof out);
		unsetenv("WEFT_STATS");
		cr_assert_eq(r, 0);
		cr_assert_eq(seen, modes[i].poller);
		cr_assert_not_null(strstr(out, modes[i].line), "%s", out);
	}
}

/* ---- the stall detector */

struct spin {
	int64_t ms;
	int64_t yield_every_us;	/* 0: never */
	atomic_bool *stop;	/* if set, ends the spin early */
	uint64_t id;
};

void weft_test_spin(void *arg)
{
	struct spin *s = arg;
	s->id = weft_co_id(weft_self());
	int64_t end = weft_now() + s->ms * MS, next = weft_now() + s->yield_every_us * 1000;
	while (weft_now() < end && !(s->stop && atomic_load(s->stop))) {
		if (s->yield_every_us && weft_now() >= next) {
			weft_yield();
			next = weft_now() + s->yield_every_us * 1000;
		}
	}
}

struct stall_run {
	struct spin spin;
	uint64_t stalls;
};

static void stall_main(void *arg)
{
	struct stall_run *r = arg;
	join(go(weft_test_spin, &r->spin));
	r->stalls = get_stats(NULL, 0).total.stalls;
}

/* Runs a spinner under WEFT_STALL_MS=stall_ms; returns what stderr got. */
static struct stall_run run_spinner(const char *stall_ms, int64_t ms, bool yield, char *out, size_t size)
{
	struct stall_run r = { .spin = { .ms = ms, .yield_every_us = yield ? 1000 : 0 } };
	setenv("WEFT_STALL_MS", stall_ms, 1);
	struct stderr_capture cap = stderr_capture_begin();
	int rc = weft_main(stall_main, &r, &WEFT_CONFIG(.workers = 2));
	stderr_capture_end(&cap, out, size);
	unsetenv("WEFT_STALL_MS");
	cr_assert_eq(rc, 0);
	return r;
}

/* The stall lines about coroutine id (others may stall too, e.g. while
 * valgrind makes a first spawn slow: they are not the subject). */
static unsigned stalls_of(const char *out, uint64_t id)
{
	char want[64];
	snprintf(want, sizeof want, "coroutine %llu ", (unsigned long long)id);
	unsigned n = 0;
	for (const char *p = out; (p = strstr(p, "weft: stall:")); p++) {
		const char *eol = strchr(p, '\n');
		const char *hit = strstr(p, want);
		n += hit && (!eol || hit < eol);
	}
	return n;
}

Test(stats, stall_detector_reports_a_spinning_coroutine_once)
{
	/* valgrind runs one thread at a time: the monitor's 1 ms samples are
	 * not guaranteed to happen during a 400 ms spin there */
	if (RUNNING_ON_VALGRIND)
		cr_skip_test("not checked under valgrind, which serialises threads");
	char out[4096], want[64];
	struct stall_run r = run_spinner("50", 400, false, out, sizeof out);
	cr_assert_eq(stalls_of(out, r.spin.id), 1, "once, naming the coroutine: %s", out);
	snprintf(want, sizeof want, "%p", (void *)weft_test_spin);
	cr_assert_not_null(strstr(out, want), "names its entry: %s", out);
	cr_assert_geq(r.stalls, 1);
}

Test(stats, stall_detector_is_quiet_for_a_coroutine_that_switches)
{
	/* It switches every 1 ms for 400 ms: a detector that counted from the
	 * coroutine's start rather than from its dispatch would report it at
	 * 300 ms.  Not 50 ms: under ASan on a loaded 2-core machine a worker
	 * thread was once preempted for that long between two switches. */
	char out[4096];
	struct stall_run r = run_spinner("300", 400, true, out, sizeof out);
	cr_assert_eq(stalls_of(out, r.spin.id), 0, "%s", out);
	if (!RUNNING_ON_VALGRIND)
		cr_assert_eq(r.stalls, 0, "%s", out);
}

Test(stats, stall_ms_0_disables_the_detector)
{
	char out[4096];
	struct stall_run r = run_spinner("0", 200, false, out, sizeof out);
	cr_assert_null(strstr(out, "weft: stall:"), "%s", out);
	cr_assert_eq(r.stalls, 0);
}

/* ---- the monitor's own cost */

struct busy_run {
	struct spin spin;
	uint64_t wakeups;	/* the monitor's, during the spin */
};

static void busy_main(void *arg)
{
	struct busy_run *r = arg;
	uint64_t before = get_stats(NULL, 0).monitor_wakeups;
	join(go(weft_test_spin, &r->spin));
	r->wakeups = get_stats(NULL, 0).monitor_wakeups - before;
}

/* At one worker nobody could run what a stuck loop's harvest would wake, so
 * the monitor samples only for stalls, a tenth of WEFT_STALL_MS apart: over
 * a 300 ms busy run with the default 100 ms, about 30 wakeups, where a 1 ms
 * tick made about 300 (a busy single-worker server paid them all). */
Test(stats, one_busy_worker_wakes_the_monitor_only_to_look_for_stalls)
{
	struct busy_run r = { .spin = { .ms = 300, .yield_every_us = 1000 } };
	cr_assert_eq(weft_main(busy_main, &r, &WEFT_CONFIG(.workers = 1)), 0);
	cr_assert_leq(r.wakeups, 100, "%llu wakeups in 300 ms", (unsigned long long)r.wakeups);
	cr_assert_geq(r.wakeups, 1, "it still samples for stalls");
}

/* With several workers the monitor samples every 1 ms while its samples
 * find something to do, and backs off to 8 ms after 50 that found nothing
 * (monitor.c).  A sample finds something when the worker is stuck (it saw
 * the same dispatch as the sample before), which a coroutine that switches
 * every 0.25 ms never is, unless its worker is kept off its CPU: then the
 * period goes back to 1 ms, as it must.  So the wakeups of a fixed window
 * tell nothing on a loaded machine (a starved monitor with a fixed 1 ms
 * tick made fewer than 150 in 300 ms there), and the state itself is
 * watched instead: a plain thread reads each thread's blocking syscall
 * from /proc until it sees the monitor in epoll_wait with the 8 ms timeout
 * (no worker waits with one here: the idle one has no timers), while the
 * coroutine switches; it fails if that never happens in 10 s. */
static const int BACKED_OFF_MS = 8;

static bool a_thread_waits_for_ms(int ms)
{
	DIR *d = opendir("/proc/self/task");
	CHECK(d);
	bool seen = false;
	for (struct dirent *e; !seen && (e = readdir(d));) {
		int timeout;
		seen = e->d_name[0] != '.' && thread_in_epoll_wait(atol(e->d_name), &timeout) &&
		       timeout == ms;
	}
	closedir(d);
	return seen;
}

struct backoff_watch {
	atomic_bool seen, done;
	int64_t give_up;
};

static void *backoff_watcher(void *arg)
{
	struct backoff_watch *b = arg;
	while (weft_now() < b->give_up && !a_thread_waits_for_ms(BACKED_OFF_MS))
		nanosleep(&(struct timespec){ .tv_nsec = MS }, NULL);
	atomic_store(&b->seen, weft_now() < b->give_up);
	atomic_store(&b->done, true);
	return NULL;
}

static void backoff_main(void *arg)
{
	struct backoff_watch *b = arg;
	struct spin sp = { .ms = 2 * (b->give_up - weft_now()) / MS, .yield_every_us = 250,
			   .stop = &b->done };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, backoff_watcher, b) == 0);
	join(go(weft_test_spin, &sp));
	CHECK(pthread_join(t, NULL) == 0);
}

Test(stats, a_busy_worker_that_switches_backs_the_monitor_off, .timeout = 60)
{
	struct backoff_watch b = { .give_up = weft_now() + slack(10000 * MS) };
	cr_assert_eq(weft_main(backoff_main, &b, &WEFT_CONFIG(.workers = 2)), 0);
	cr_assert(atomic_load(&b.seen), "in 10 s of switching, the monitor never waited %d ms",
		  BACKED_OFF_MS);
}

Test(stats, one_worker_without_stall_reports_leaves_the_monitor_asleep)
{
	struct busy_run r = { .spin = { .ms = 300, .yield_every_us = 1000 } };
	setenv("WEFT_STALL_MS", "0", 1);
	int rc = weft_main(busy_main, &r, &WEFT_CONFIG(.workers = 1));
	unsetenv("WEFT_STALL_MS");
	cr_assert_eq(rc, 0);
	cr_assert_leq(r.wakeups, 2, "%llu wakeups in 300 ms", (unsigned long long)r.wakeups);
}

/*
 * A worker woken from its sleep by readiness that readies one coroutine
 * runs it itself: it does not wake another worker for it (loop.c, the
 * harvest's notify).  A reader is woken LONE_ROUNDS times by a plain
 * thread, one byte at a time, in lock-step: each byte is written only once
 * the worker that ran the reader's last round is blocked in epoll_wait
 * (/proc), so the reader has parked and its worker sleeps, however loaded
 * the machine: bytes dripped at a fixed pace pile up while the reader's
 * worker is kept off its CPU, and a read that finds one waiting neither
 * parks nor lets its worker sleep, so the scene does not happen.  Each
 * round is then one sleep of the worker that serves it, seen and counted;
 * any sleep beyond those is a worker woken for nothing.  The other worker
 * used to be woken at every round; the monitor still wakes it, rightly,
 * when the reader's worker is preempted for a sample period in the middle
 * of the reader's few microseconds (it takes the shared epfd then: loop.c,
 * take_poller), so a few are allowed, not half.
 */
enum { LONE_ROUNDS = 200 };

struct lone_run {
	int sv[2];
	atomic_int started;	/* reads the reader has started */
	atomic_long tid;	/* the thread that runs the reader's last one */
	weft_worker_stats before[2], after[2];
};

/* Waits until the reader has started read i and its worker sleeps: it has
 * parked in that read (it has no other way to switch out), and the sleep
 * is counted (idle.c counts a sleep before its epoll_wait). */
static void lone_wait_asleep(struct lone_run *r, int i)
{
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (atomic_load(&r->started) <= i || !thread_in_epoll_wait(atomic_load(&r->tid), NULL)) {
		CHECK(weft_now() < give_up);	/* the reader never parked */
		nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 }, NULL);
	}
}

/* One byte per read, LONE_ROUNDS + 1 of them: the stats span the
 * LONE_ROUNDS wakes between the sleep before the first and the one
 * before the last. */
static void *byte_dripper(void *arg)
{
	struct lone_run *r = arg;
	for (int i = 0; i <= LONE_ROUNDS; i++) {
		lone_wait_asleep(r, i);
		if (i == 0)
			get_stats(r->before, 2);
		if (i == LONE_ROUNDS)
			get_stats(r->after, 2);
		CHECK(write(r->sv[1], "x", 1) == 1);
	}
	return NULL;
}

static void lone_reader(void *arg)
{
	struct lone_run *r = arg;
	char b;
	for (int i = 0; i <= LONE_ROUNDS; i++) {
		atomic_store(&r->tid, syscall(SYS_gettid));	/* before started */
		atomic_store(&r->started, i + 1);
		CHECK(weft_read(r->sv[0], &b, 1, -1) == 1);
	}
}

static void lone_main(void *arg)
{
	struct lone_run *r = arg;
	socket_pair(r->sv);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, byte_dripper, r) == 0);
	join(go(lone_reader, r));
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(weft_close(r->sv[0]) == 0);
	close(r->sv[1]);
}

Test(stats, a_wake_that_readies_one_coroutine_leaves_the_other_worker_asleep, .timeout = 60)
{
	struct lone_run r = { .started = 0 };
	cr_assert_eq(weft_main(lone_main, &r, &WEFT_CONFIG(.workers = 2)), 0);
	uint64_t s0 = r.after[0].sleeps - r.before[0].sleeps;
	uint64_t s1 = r.after[1].sleeps - r.before[1].sleeps;
	fprintf(stderr, "sleeps: worker 0 %llu, worker 1 %llu, for %d wakes\n",
		(unsigned long long)s0, (unsigned long long)s1, LONE_ROUNDS);
	/* Judged on the sum: the worker that serves the fd may change
	 * (take_poller, above), splitting the rounds' sleeps between them. */
	uint64_t slept = s0 + s1;
	cr_assert_geq(slept, LONE_ROUNDS, "%llu sleeps counted, %d seen in epoll_wait",
		      (unsigned long long)slept, LONE_ROUNDS);
	cr_assert_lt(slept - LONE_ROUNDS, LONE_ROUNDS / 2,
		     "%llu workers woken for nothing in %d lone wakes",
		     (unsigned long long)(slept - LONE_ROUNDS), LONE_ROUNDS);
}

/*
 * An I/O load that one worker keeps up with stays on that worker (loop.h,
 * the shared poller): the other sleeps deaf to readiness while one is
 * awake, and a slept harvest's batch of short turns wakes nobody.  A plain
 * thread drives ECHO_CONNS echo coroutines in a closed loop, one byte to
 * every connection, then every reply.  The coroutines are spawned in a
 * burst, so the idle worker steals some: with a poller per worker their
 * fds were split between the two, and each worker served its half.
 */
enum { ECHO_CONNS = 16, ECHO_ROUNDS = 300 };

struct echo_run {
	int sv[ECHO_CONNS][2];
	weft_sem *done;
	weft_worker_stats before[2], after[2];
};

static void echo_conn(void *arg)
{
	int fd = *(int *)arg;
	char b;
	while (weft_read(fd, &b, 1, -1) == 1)
		CHECK(weft_write(fd, &b, 1, -1) == 1);
}

static void *echo_driver(void *arg)
{
	struct echo_run *r = arg;
	for (int i = 0; i < ECHO_ROUNDS; i++) {
		char b = 'x';
		for (int c = 0; c < ECHO_CONNS; c++)
			CHECK(write(r->sv[c][1], &b, 1) == 1);
		for (int c = 0; c < ECHO_CONNS; c++)
			CHECK(read(r->sv[c][1], &b, 1) == 1 && b == 'x');
	}
	CHECK(weft_sem_release(r->done) == 0);
	return NULL;
}

static void echo_main(void *arg)
{
	struct echo_run *r = arg;
	weft_co *co[ECHO_CONNS];
	r->done = weft_sem_new(0);
	uint64_t parks = stats_now().total.parks;
	for (int c = 0; c < ECHO_CONNS; c++) {
		socket_pair(r->sv[c]);
		co[c] = go(echo_conn, &r->sv[c][0]);
	}
	wait_parks(parks, ECHO_CONNS);	/* every one parked, its fd registered */
	get_stats(r->before, 2);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, echo_driver, r) == 0);
	CHECK(weft_sem_acquire(r->done, -1) == 0);
	get_stats(r->after, 2);
	CHECK(pthread_join(t, NULL) == 0);
	for (int c = 0; c < ECHO_CONNS; c++) {
		close(r->sv[c][1]);
		join(co[c]);
		CHECK(weft_close(r->sv[c][0]) == 0);
	}
	weft_sem_free(r->done);
}

Test(stats, an_io_load_one_worker_keeps_up_with_stays_on_that_worker, .timeout = 120)
{
	/* under valgrind (one thread at a time) and the sanitizers a batch's
	 * turns are not short against the 200 us a batch may wait before
	 * help is called: there the scene only runs.  On a loaded machine a
	 * preempted worker's batch waits that long too (a guest whose vCPU the
	 * host takes away, or another process on the CPU: then most scenes
	 * split), so scenes are short and the most one-sided of those run in
	 * up to 10 s counts.  Under a process spinning on one of two CPUs,
	 * 10 s of 1,000-round scenes found no one-sided one in 2 runs of 5,
	 * 300-round scenes found one in 6 of 6.  The first one-sided scene
	 * ends the test, as it does at once on a quiet machine; with help
	 * called for every batch (BACKLOG_NS 0) every scene splits 50:50. */
	bool checked = !RUNNING_ON_VALGRIND && !SANITIZED;
	uint64_t best_most = 0, best_total = 1;
	int64_t give_up = weft_now() + (checked ? 10000 : 0) * MS;
	do {
		struct echo_run r;
		cr_assert_eq(weft_main(echo_main, &r, &WEFT_CONFIG(.workers = 2)), 0);
		uint64_t d0 = r.after[0].dispatches - r.before[0].dispatches;
		uint64_t d1 = r.after[1].dispatches - r.before[1].dispatches;
		uint64_t most = d0 > d1 ? d0 : d1;
		fprintf(stderr, "dispatches: %llu and %llu\n", (unsigned long long)d0, (unsigned long long)d1);
		cr_assert_geq(d0 + d1, ECHO_CONNS * ECHO_ROUNDS / 2, "the scene did not happen: %llu dispatches",
			      (unsigned long long)(d0 + d1));	/* (a read finds its byte there at times) */
		if (most * best_total >= best_most * (d0 + d1)) {
			best_most = most;
			best_total = d0 + d1;
		}
	} while (weft_now() < give_up && best_most * 10 < best_total * 9);
	if (!checked)
		cr_skip_test("the scenes ran; their split is not judged under valgrind or a sanitizer");
	cr_assert_geq(best_most * 10, best_total * 9,
		      "the connections were served by both workers: %llu of %llu on the busier",
		      (unsigned long long)best_most, (unsigned long long)best_total);
}

/*
 * An idle worker whose work comes back within microseconds spins rather
 * than sleeps (idle.c, "Spinning on before sleeping").  A producer on one
 * worker never yields: each round it spawns two children (the second
 * displaces the first from its runnext slot into the deque, which
 * notifies), waits until the other worker has stolen and run both, then
 * busy-waits SPIN_GAP_US before the next round.  The other worker is idle
 * for that gap each round: it used to sleep in epoll_wait each time (and
 * be woken by an eventfd write); now, its idle periods being short and its
 * loop owning no fds, it spins through them.
 *
 * Judged per idle period, not per scene: each child notes the time and the
 * sleeps counter when it starts and when it ends, so the idle period before
 * each child is bounded from above by the gap since the one before it ended,
 * and its sleeps are known exactly.  An idle period shorter than SPIN_NS
 * that follows short ones (the last idle period is what lets a worker spin;
 * of two gaps in a row one lies between rounds, an idle one) must hold no
 * sleep: the spinner was still looking when the work came.  That holds
 * however loaded the machine is: a spinner kept off its CPU past its window
 * sleeps, but then its gap is long and it is not judged.  What load can do
 * is leave too few short periods to judge; scenes then run again, up to
 * 10 s, and the test fails if they never made SPIN_JUDGED of them.
 */
enum { SPIN_ROUNDS = 400, SPIN_GAP_US = 10, SPIN_JUDGED = 100 };
static const int64_t SPIN_NS = 50 * 1000;	/* idle.c's window */

struct spin_mark {
	int64_t start, end;
	uint64_t sleeps_at_start, sleeps_at_end;
};

struct spin_run {
	int rounds;
	atomic_int started, ran;
	struct spin_mark marks[2 * SPIN_ROUNDS];
};

static void spin_child(void *arg)
{
	struct spin_run *r = arg;
	struct spin_mark *m = &r->marks[atomic_fetch_add(&r->started, 1)];
	m->start = weft_now();
	m->sleeps_at_start = get_stats(NULL, 0).total.sleeps;
	m->sleeps_at_end = get_stats(NULL, 0).total.sleeps;
	m->end = weft_now();
	atomic_fetch_add(&r->ran, 1);
}

static void busy_wait_us(int64_t us)
{
	int64_t until = weft_now() + us * 1000;
	while (weft_now() < until)
		;
}

static void spin_main(void *arg)
{
	struct spin_run *r = arg;
	atomic_init(&r->started, 0);
	atomic_init(&r->ran, 0);
	for (int i = 0; i < r->rounds; i++) {
		weft_co *a = go(spin_child, r), *b = go(spin_child, r);
		int64_t give_up = weft_now() + slack(10000 * MS);
		while (atomic_load(&r->ran) < 2 * (i + 1))	/* run by the other worker */
			CHECK(weft_now() < give_up);
		weft_detach(a);
		weft_detach(b);
		busy_wait_us(SPIN_GAP_US);
	}
}

/* Counts the short idle periods between rounds of a scene that follow
 * short ones (*judged) and the sleeps in them (*slept); returns all its
 * sleeps.  Only the gaps between rounds are judged: within a round the
 * thief takes the second child in the same search that found the first
 * gone, spinning or not. */
static uint64_t spin_judge(const struct spin_run *r, unsigned *judged, unsigned *slept)
{
	const struct spin_mark *m = r->marks;
	int n = 2 * r->rounds;
	for (int k = 4; k < n; k += 2) {	/* the first child of a round */
		bool short_run = true;
		for (int j = k - 2; j <= k; j++)
			short_run &= m[j].start - m[j - 1].end < SPIN_NS;
		if (!short_run)
			continue;
		(*judged)++;
		*slept += m[k].sleeps_at_start != m[k - 1].sleeps_at_end;
	}
	return m[n - 1].sleeps_at_end - m[0].sleeps_at_start;
}

Test(stats, an_idle_worker_spins_through_short_gaps_instead_of_sleeping, .timeout = 120)
{
	/* the gaps are wall-clock time: under valgrind (one thread at a time)
	 * and the sanitizers they are not short against the spin window, so
	 * there the scene only runs (shorter) */
	bool checked = !RUNNING_ON_VALGRIND && !SANITIZED;
	static struct spin_run r;
	r.rounds = checked ? SPIN_ROUNDS : 50;
	unsigned judged = 0, slept = 0, scenes = 0;
	/* The thief takes the producer's runnext child after a 3 us sleep
	 * (steal.c, RUNNEXT_GRACE_NS) inside its idle period: with the default
	 * 50 us timer slack that sleep alone makes the period long.  The
	 * workers inherit this thread's slack. */
	int slack_was = prctl(PR_GET_TIMERSLACK);
	cr_assert_eq(prctl(PR_SET_TIMERSLACK, 1UL), 0);
	int64_t give_up = weft_now() + (checked ? 10000 : 0) * MS;
	do {
		cr_assert_eq(weft_main(spin_main, &r, &WEFT_CONFIG(.workers = 2)), 0);
		uint64_t sleeps = spin_judge(&r, &judged, &slept);
		scenes++;
		fprintf(stderr, "sleeps: %llu in %d rounds; so far %u of %u short idle periods slept\n",
			(unsigned long long)sleeps, r.rounds, slept, judged);
	} while (!slept && judged < SPIN_JUDGED && weft_now() < give_up);
	cr_assert_eq(prctl(PR_SET_TIMERSLACK, (unsigned long)slack_was), 0);
	if (!checked)
		cr_skip_test("the scene ran; its sleeps are not judged under valgrind or a sanitizer");
	cr_assert_eq(slept, 0, "the idle worker slept in %u of %u idle periods shorter than its spin window",
		     slept, judged);
	cr_assert_geq(judged, SPIN_JUDGED, "the scene did not happen: %u short idle periods in %u scenes",
		      judged, scenes);
}
