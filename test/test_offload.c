/* SPDX-License-Identifier: MIT */
/* weft_offload: blocking calls on helper threads while the workers keep
 * serving coroutines; cancellation waits for fn; the helper limit. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "harness.h"
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coro_test.h"

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* ---- fn runs on a plain thread, not on a worker */

struct where {
	pthread_t thread;
	int worker;
	weft_co *self;
};

static void record_where(void *arg)
{
	struct where *w = arg;
	w->thread = pthread_self();
	w->worker = weft_worker_id();
	w->self = weft_self();
}

static void runs_on_a_helper_main(void *unused)
{
	(void)unused;
	struct where w = { .worker = 99 };
	CHECK(weft_offload(record_where, &w) == 0);
	CHECK(w.worker == -1 && w.self == NULL);
	CHECK(!pthread_equal(w.thread, pthread_self()));
}

Test(offload, runs_fn_on_a_helper_thread)
{
	run(1, runs_on_a_helper_main, NULL);
}

Test(offload, plain_thread_runs_fn_inline_and_bad_args)
{
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 1)), 0);
	struct where w = { .worker = 99 };
	cr_assert_eq(weft_offload(record_where, &w), 0);
	cr_assert(pthread_equal(w.thread, pthread_self()));
	errno = 0;
	cr_assert_eq(weft_offload(NULL, NULL), -1);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(weft_shutdown(), 0);
}

/* ---- the use cases: getaddrinfo, a file read, a legacy sleep(1) */

static void resolve(void *arg)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
	int *ok = arg;
	*ok = getaddrinfo("localhost", "80", &hints, &res) == 0;
	if (*ok)
		freeaddrinfo(res);
}

struct file_read {
	const char *path;
	char buf[64];
	ssize_t n;
};

static void read_file(void *arg)
{
	struct file_read *r = arg;
	int fd = open(r->path, O_RDONLY);
	r->n = fd < 0 ? -1 : read(fd, r->buf, sizeof r->buf);
	if (fd >= 0)
		close(fd);
}

static void legacy_sleep(void *arg)
{
	sleep_ms(*(long *)arg);
}

struct answerer {
	weft_chan *ask, *answer;
	int served;
};

/* Answers questions until the channel closes. */
static void answer_main(void *arg)
{
	struct answerer *a = arg;
	int q;
	while (weft_chan_recv(a->ask, &q, -1) == 0) {
		q++;
		CHECK(weft_chan_send(a->answer, &q, -1) == 0);
		a->served++;
	}
}

struct sleeper {
	long ms;
	int done;	/* atomic */
};

static void sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	CHECK(weft_offload(legacy_sleep, &s->ms) == 0);
	__atomic_store_n(&s->done, 1, __ATOMIC_SEQ_CST);
}

static void use_cases_main(void *unused)
{
	(void)unused;
	int ok = 0;
	CHECK(weft_offload(resolve, &ok) == 0 && ok);

	char path[] = "/tmp/weft-offload-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && write(fd, "hello, helper", 13) == 13);
	close(fd);
	struct file_read r = { .path = path };
	CHECK(weft_offload(read_file, &r) == 0);
	unlink(path);
	CHECK(r.n == 13 && memcmp(r.buf, "hello, helper", 13) == 0);

	/* A legacy sleep(1) on the only worker: another coroutine keeps
	 * answering meanwhile, so 100 answers come before the sleep returns
	 * (were the worker blocked, none could). */
	struct answerer a = { weft_chan_new(sizeof(int), 0), weft_chan_new(sizeof(int), 0), 0 };
	weft_co *answerer = go(answer_main, &a);
	struct sleeper s = { .ms = 1000 };
	weft_co *sleeper = go(sleeper_main, &s);
	weft_yield();	/* the sleeper hands its call over */
	for (int i = 0; i < 100; i++) {
		int q = i;
		CHECK(weft_chan_send(a.ask, &q, -1) == 0);
		CHECK(weft_chan_recv(a.answer, &q, -1) == 0 && q == i + 1);
	}
	CHECK(!__atomic_load_n(&s.done, __ATOMIC_SEQ_CST));
	join(sleeper);
	CHECK(s.done);
	weft_chan_close(a.ask);
	join(answerer);
	CHECK(a.served == 100);
	weft_chan_free(a.ask);
	weft_chan_free(a.answer);
}

Test(offload, getaddrinfo_file_read_and_legacy_sleep)
{
	run(1, use_cases_main, NULL);
}

/* ---- 1,000 blocking calls while a ping-pong keeps going */

struct batch {
	unsigned n;
	unsigned finished;	/* atomic */
	int released;		/* atomic: the blocking calls may return */
};

/* Blocks its helper thread until released (10 s at most: then the test
 * fails on `finished`, it does not hang). */
static void block_until_released(void *arg)
{
	struct batch *b = arg;
	for (int i = 0; i < 10000 && !__atomic_load_n(&b->released, __ATOMIC_SEQ_CST); i++)
		sleep_ms(1);
}

static void offloader_main(void *arg)
{
	struct batch *b = arg;
	CHECK(weft_offload(block_until_released, b) == 0);
	__atomic_add_fetch(&b->finished, 1, __ATOMIC_SEQ_CST);
}

static void batch_with_pingpong_main(void *unused)
{
	(void)unused;
	struct batch b = { .n = scaled(1000, 200, 50) };
	weft_co **cos = malloc(b.n * sizeof *cos);
	CHECK(cos != NULL);
	for (unsigned i = 0; i < b.n; i++)
		cos[i] = go(offloader_main, &b);
	/* Every helper is blocked and the other calls queue; the ping-pong
	 * must go on regardless: 1,000 round trips before any call returns. */
	struct answerer a = { weft_chan_new(sizeof(int), 0), weft_chan_new(sizeof(int), 0), 0 };
	weft_co *answerer = go(answer_main, &a);
	int64_t worst = 0;
	for (int i = 0; i < 1000; i++) {
		int64_t t = weft_now();
		int q = i;
		CHECK(weft_chan_send(a.ask, &q, -1) == 0);
		CHECK(weft_chan_recv(a.answer, &q, -1) == 0 && q == i + 1);
		t = weft_now() - t;
		worst = t > worst ? t : worst;
	}
	CHECK(__atomic_load_n(&b.finished, __ATOMIC_SEQ_CST) == 0);
	__atomic_store_n(&b.released, 1, __ATOMIC_SEQ_CST);
	for (unsigned i = 0; i < b.n; i++)
		join(cos[i]);
	free(cos);
	CHECK(b.finished == b.n);
	weft_chan_close(a.ask);
	join(answerer);
	weft_chan_free(a.ask);
	weft_chan_free(a.answer);
	/* Behaviour, not speed: the bound (1 s) only catches a round trip
	 * that waited for blocking calls. */
	fprintf(stderr, "offload batch: %u calls, worst round trip %.3f ms\n", b.n, worst / 1e6);
	CHECK(worst < slack(1000 * MS));
	CHECK(stats_now().offload_calls == b.n);
}

Test(offload, thousand_blocking_calls_while_pingpong_continues)
{
	run(2, batch_with_pingpong_main, NULL);
}

/* ---- cancellation waits for fn */

struct slow {
	int started, returned;	/* atomic */
};

static void slow_call(void *arg)
{
	struct slow *s = arg;
	__atomic_store_n(&s->started, 1, __ATOMIC_SEQ_CST);
	sleep_ms(100);
	__atomic_store_n(&s->returned, 1, __ATOMIC_SEQ_CST);
}

static void cancelled_offloader(void *arg)
{
	struct slow *s = arg;
	errno = 0;
	CHECK(weft_offload(slow_call, s) == -1 && errno == ECANCELED);
	CHECK(__atomic_load_n(&s->returned, __ATOMIC_SEQ_CST));	/* arg was still in use */
	CHECK(weft_offload(slow_call, s) == -1 && errno == ECANCELED);	/* later calls too */
}

static void cancel_main(void *unused)
{
	(void)unused;
	struct slow s = { 0, 0 };
	weft_co *co = go(cancelled_offloader, &s);
	while (!__atomic_load_n(&s.started, __ATOMIC_SEQ_CST))
		weft_sleep(weft_now() + MS);
	CHECK(weft_cancel(co) == 0);
	join(co);
	CHECK(s.returned);
}

Test(offload, cancel_returns_ecanceled_only_after_fn_returned)
{
	run(2, cancel_main, NULL);
}

/* ---- WEFT_BLOCKING_THREADS bounds the helpers */

struct limit {
	int running, most;	/* atomic */
};

static void count_concurrency(void *arg)
{
	struct limit *l = arg;
	int now = __atomic_add_fetch(&l->running, 1, __ATOMIC_SEQ_CST);
	int most = __atomic_load_n(&l->most, __ATOMIC_SEQ_CST);
	while (now > most && !__atomic_compare_exchange_n(&l->most, &most, now, false,
							   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	sleep_ms(20);
	__atomic_sub_fetch(&l->running, 1, __ATOMIC_SEQ_CST);
}

static void limited_one(void *arg)
{
	CHECK(weft_offload(count_concurrency, arg) == 0);
}

static void limit_main(void *unused)
{
	(void)unused;
	struct limit l = { 0, 0 };
	weft_co *cos[12];
	for (int i = 0; i < 12; i++)
		cos[i] = go(limited_one, &l);
	for (int i = 0; i < 12; i++)
		join(cos[i]);
	CHECK(l.most >= 1 && l.most <= 3);
	weft_stats st = stats_now();
	CHECK(st.blocking_threads_max == 3 && st.blocking_threads <= 3);
	CHECK(st.offload_calls == 12);
}

Test(offload, blocking_threads_limit)
{
	setenv("WEFT_BLOCKING_THREADS", "3", 1);
	run(2, limit_main, NULL);
	unsetenv("WEFT_BLOCKING_THREADS");
}

/* ---- an idle helper's deadline does not follow the wall clock */

#if !SANITIZED	/* the sanitizers intercept clock_gettime themselves */
/* The wall clock as the library reads it, an hour behind while wall_behind
 * is set: this interposes libc's clock_gettime for the whole test program.
 * A deadline computed from a reading an hour behind, then waited for on the
 * real wall clock, is what a step of the wall clock an hour forward just
 * after the reading does to it. */
static int wall_behind;	/* atomic (relaxed: set before the calls it affects) */

int clock_gettime(clockid_t clock, struct timespec *ts)
{
	long r = syscall(SYS_clock_gettime, clock, ts);
	if (r == 0 && clock == CLOCK_REALTIME && __atomic_load_n(&wall_behind, __ATOMIC_RELAXED))
		ts->tv_sec -= 3600;
	return (int)r;
}
#endif

static void nothing(void *unused)
{
	(void)unused;
}

static void helper_idles_main(void *unused)
{
	(void)unused;
#if !SANITIZED
	__atomic_store_n(&wall_behind, 1, __ATOMIC_RELAXED);
#endif
	CHECK(weft_offload(nothing, NULL) == 0);
	CHECK(weft_sleep(weft_now() + 200 * MS) == 0);
	weft_stats st = stats_now();
#if !SANITIZED
	__atomic_store_n(&wall_behind, 0, __ATOMIC_RELAXED);
#endif
	if (st.blocking_threads != 1)
		fprintf(stderr, "helpers alive 200 ms after the call: %u\n", st.blocking_threads);
	CHECK(st.blocking_threads == 1);
}

/* A helper idles for its full IDLE_EXIT_S whatever the wall clock does: its
 * deadline is on CLOCK_MONOTONIC (with CLOCK_REALTIME it retired at once
 * here).  Sanitizer builds only check that it idles. */
Test(offload, an_idle_helpers_deadline_ignores_wall_clock_steps)
{
	run(1, helper_idles_main, NULL);
}
