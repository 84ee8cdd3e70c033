/* SPDX-License-Identifier: MIT */
/* The budget (lib/worker.h, weft__worker_spend): a coroutine whose calls
 * may wait but never have to (its fd always ready, its channel never
 * empty) never parks, and still its worker runs the other coroutines,
 * fires their timers and harvests their readiness.  Each test runs on one
 * worker, where nobody else could. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

/* worker.h's WEFT__WORKER_BUDGET: the calls of one dispatch before it
 * yields, and WEFT__WORKER_BUDGET_BYTES: the bytes an fd call moves that
 * spend one more unit. */
enum { BUDGET = 128, BUDGET_BYTES = 4096, CHUNK = 16 };

static atomic_long calls;	/* made by the busy coroutine so far */
static atomic_long seen;	/* calls made when the other one ran; -1 before */

static void note_calls(void *arg)
{
	(void)arg;
	atomic_store(&seen, atomic_load(&calls));
}

/* Makes n calls of call(target), each returning want, while another
 * coroutine waits behind this one (spawned first, so queued on this
 * worker): it must get to run within `within` calls (the budget). */
static void calls_let_the_other_run_within(long n, long within, ssize_t (*call)(void *),
					   void *target, ssize_t want)
{
	atomic_store(&calls, 0);
	atomic_store(&seen, -1);
	weft_co *other = go(note_calls, NULL);
	for (long i = 0; i < n; i++) {
		CHECK(call(target) == want);
		atomic_fetch_add(&calls, 1);
	}
	join(other);
	long s = atomic_load(&seen);
	if (s < 0 || s >= within) {
		fprintf(stderr, "the other coroutine ran after %ld of %ld calls\n", s, n);
		abort();
	}
}

static void calls_let_the_other_run(long n, ssize_t (*call)(void *), void *target, ssize_t want)
{
	calls_let_the_other_run_within(n, BUDGET, call, target, want);
}

/* A pipe whose read end holds `*bytes` bytes: as much as it takes. */
static void full_pipe(int p[2], size_t *bytes)
{
	CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	static const char page[4096];
	ssize_t n;
	*bytes = 0;
	while ((n = write(p[1], page, sizeof page)) > 0)
		*bytes += (size_t)n;
	CHECK(n < 0 && errno == EAGAIN && *bytes >= 2 * BUDGET * CHUNK);
}

static ssize_t read_chunk(void *fd)
{
	char buf[CHUNK];
	return weft_read(*(int *)fd, buf, CHUNK, -1);
}

static void reads(void *arg)
{
	(void)arg;
	int p[2];
	size_t bytes;
	full_pipe(p, &bytes);
	calls_let_the_other_run((long)(bytes / CHUNK), read_chunk, &p[0], CHUNK);
	CHECK(weft_close(p[0]) == 0 && close(p[1]) == 0);
}

Test(budget, a_reader_whose_fd_stays_ready_lets_the_others_run)
{
	run(1, reads, NULL);
}

/* weft_consume_budget is the same count, for operations that are not
 * weft's calls; outside a coroutine it does nothing. */
static ssize_t spend(void *unused)
{
	(void)unused;
	weft_consume_budget();
	return 0;
}

static void spends(void *arg)
{
	(void)arg;
	calls_let_the_other_run(4 * BUDGET, spend, NULL, 0);
}

Test(budget, consume_budget_spends_the_same_budget)
{
	weft_consume_budget();	/* no runtime */
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 1)), 0);
	weft_consume_budget();	/* a plain thread beside the runtime */
	cr_assert_eq(weft_shutdown(), 0);
	run(1, spends, NULL);
}

/* Small writes into an empty pipe: an anonymous pipe merges them into its
 * pages, so 64 KiB take 4,096 of them before it is full. */
static ssize_t write_chunk(void *fd)
{
	static const char buf[CHUNK];
	return weft_write(*(int *)fd, buf, CHUNK, -1);
}

static void writes(void *arg)
{
	(void)arg;
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	calls_let_the_other_run(4 * BUDGET, write_chunk, &p[1], CHUNK);
	CHECK(close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(budget, a_writer_whose_fd_stays_ready_lets_the_others_run)
{
	run(1, writes, NULL);
}

static atomic_long runs;	/* the counter's runs so far */
static atomic_bool counting;

static void count_runs(void *arg)
{
	(void)arg;
	while (atomic_load(&counting)) {
		atomic_fetch_add(&runs, 1);
		weft_yield();
	}
}

/* Makes n calls of call(target), each returning want, beside a coroutine
 * that counts its runs and yields: every dispatch of the caller (the calls
 * between two of the counter's runs) makes at most `most` calls, the first
 * dispatch and every later one, the calls that yielded included. */
static void calls_per_dispatch_at_most(long n, long most, ssize_t (*call)(void *), void *target,
				       ssize_t want)
{
	atomic_store(&runs, 0);
	atomic_store(&counting, true);
	weft_co *counter = go(count_runs, NULL);
	long last = -1, in_dispatch = 0, worst = 0;
	for (long i = 0; i < n; i++) {
		CHECK(call(target) == want);
		long r = atomic_load(&runs);
		in_dispatch = r == last ? in_dispatch + 1 : 1;
		last = r;
		if (in_dispatch > worst)
			worst = in_dispatch;
	}
	atomic_store(&counting, false);
	join(counter);
	if (worst > most) {
		fprintf(stderr, "a dispatch made %ld calls, %ld allowed\n", worst, most);
		abort();
	}
}

/* Big transfers that never wait: 64 KiB writes to /dev/null and reads of
 * /dev/zero (both always ready: epoll refuses them).  Each call spends a
 * unit and one per BUDGET_BYTES it moved, so the other coroutine runs
 * after the calls that spend BUDGET units, not after BUDGET calls; and so
 * in every later dispatch, where the call that yielded counts its bytes
 * too (it went uncharged: 9 calls a dispatch where 8 are allowed). */
enum { BIG = 64 << 10, BIG_UNITS = 1 + BIG / BUDGET_BYTES };

static ssize_t write_big(void *fd)
{
	static const char buf[BIG];
	return weft_write(*(int *)fd, buf, BIG, -1);
}

static ssize_t read_big(void *fd)
{
	static char buf[BIG];
	return weft_read(*(int *)fd, buf, BIG, -1);
}

static void big_transfers(void *arg)
{
	(void)arg;
	long within = (BUDGET + BIG_UNITS - 1) / BIG_UNITS + 1;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	CHECK(null >= 0 && zero >= 0);
	calls_let_the_other_run_within(4 * BUDGET, within, write_big, &null, BIG);
	calls_let_the_other_run_within(4 * BUDGET, within, read_big, &zero, BIG);
	calls_per_dispatch_at_most(4 * BUDGET, within - 1, write_big, &null, BIG);
	calls_per_dispatch_at_most(4 * BUDGET, within - 1, read_big, &zero, BIG);
	CHECK(weft_close(null) == 0 && weft_close(zero) == 0);
}

Test(budget, big_transfers_that_never_wait_yield_by_bytes)
{
	run(1, big_transfers, NULL);
}

/* Accepts a connection and closes it: 0, or -1. */
static ssize_t accept_one(void *l)
{
	int fd = weft_accept(*(int *)l, NULL, NULL, -1);
	return fd >= 0 && close(fd) == 0 ? 0 : -1;
}

/* A flood of connections, all queued before the first accept. */
static void accepts(void *arg)
{
	(void)arg;
	long n = 3 * BUDGET;
	struct sockaddr_in addr;
	int l = loopback_socket(SOCK_STREAM, &addr);
	CHECK(listen(l, (int)n) == 0);
	int *clients = calloc((size_t)n, sizeof *clients);
	CHECK(clients != NULL);
	for (long i = 0; i < n; i++) {	/* blocking: each is queued when it returns */
		clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(clients[i] >= 0);
		CHECK(connect(clients[i], (struct sockaddr *)&addr, sizeof addr) == 0);
	}
	calls_let_the_other_run(n, accept_one, &l, 0);
	for (long i = 0; i < n; i++)
		CHECK(close(clients[i]) == 0);
	free(clients);
	CHECK(weft_close(l) == 0);
}

Test(budget, an_accept_loop_under_a_flood_lets_the_others_run)
{
	run(1, accepts, NULL);
}

/* Channel operations spend the same budget: a receiver whose channel
 * always holds an element. */
static ssize_t recv_one(void *ch)
{
	int v;
	return weft_chan_recv(ch, &v, -1);
}

static void receives(void *arg)
{
	(void)arg;
	long n = 4 * BUDGET;
	weft_chan *ch = weft_chan_new(sizeof(int), (size_t)n);
	CHECK(ch != NULL);
	for (int i = 0; i < n; i++)	/* no other coroutine yet: nobody to yield to */
		CHECK(weft_chan_send(ch, &i, -1) == 0);
	calls_let_the_other_run(n, recv_one, ch, 0);
	weft_chan_free(ch);
}

Test(budget, a_receiver_whose_channel_stays_full_lets_the_others_run)
{
	run(1, receives, NULL);
}

/* A reader of /dev/zero, which is never empty (epoll refuses it: weft treats
 * it as always ready), beside a sleeper and a reader of a pipe that a plain
 * thread writes once, 10 ms in: the reader of /dev/zero reads until both
 * are done, which they can be only through its worker's timers and
 * harvests. */
struct endless {
	int once[2];
	atomic_int done;	/* the sleeper's and the pipe reader's */
};

static void *write_later(void *arg)
{
	struct endless *f = arg;
	usleep(10 * 1000);
	CHECK(write(f->once[1], "x", 1) == 1);
	return NULL;
}

static void sleeper(void *arg)
{
	struct endless *f = arg;
	for (int i = 0; i < 5; i++)
		CHECK(weft_sleep(weft_now() + MS) == 0);
	atomic_fetch_add(&f->done, 1);
}

static void read_once(void *arg)
{
	struct endless *f = arg;
	char c;
	CHECK(weft_read(f->once[0], &c, 1, -1) == 1);
	atomic_fetch_add(&f->done, 1);
}

static void endless(void *arg)
{
	(void)arg;
	struct endless f = { .done = 0 };
	CHECK(pipe2(f.once, O_CLOEXEC) == 0);
	int zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	CHECK(zero >= 0);
	weft_co *s = go(sleeper, &f), *r = go(read_once, &f);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, write_later, &f) == 0);
	char buf[CHUNK];
	int64_t give_up = weft_now() + slack(20000 * MS);
	while (atomic_load(&f.done) < 2 && weft_now() < give_up)
		CHECK(weft_read(zero, buf, CHUNK, -1) == CHUNK);
	CHECK(atomic_load(&f.done) == 2);
	CHECK(pthread_join(t, NULL) == 0);
	join(s);
	join(r);
	CHECK(weft_close(zero) == 0);
	CHECK(weft_close(f.once[0]) == 0 && close(f.once[1]) == 0);
}

Test(budget, a_reader_that_never_waits_lets_timers_and_readiness_through, .timeout = 60)
{
	run(1, endless, NULL);
}
