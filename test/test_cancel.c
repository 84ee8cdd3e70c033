/* SPDX-License-Identifier: MIT */
/* weft_cancel: every kind of blocking call returns ECANCELED at once and
 * every later one too; joiners leave their target joinable; cancelling a
 * finished coroutine is a no-op; from plain threads; racing wakes. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static void forever(void *arg)
{
	(void)arg;
	while (weft_sleep(-1) == 0)
		;
}

static void victim(void *arg)
{
	struct blocker *v = arg;
	/* COND's lock comes before `parked`: a cancel that came before it
	 * would fail it (a call of a cancelled coroutine says ECANCELED at
	 * once) */
	blocker_main(v);
	/* later calls fail too, even ones that would not block */
	char b;
	CHECK(weft_write(v->sv[1], "x", 1, -1) == -1 && errno == ECANCELED);
	CHECK(weft_read(v->sv[0], &b, 1, 0) == -1 && errno == ECANCELED);
	CHECK(weft_sleep(0) == -1 && errno == ECANCELED);
	int x = 0;
	CHECK(weft_chan_recv(v->ch, &x, 0) == -1 && errno == ECANCELED);
}

static void cancel_each_kind(void *arg)
{
	(void)arg;
	for (int k = 0; k < BLOCK_KINDS; k++) {
		struct blocker v;
		weft_co *co = blocker_start(&v, k, forever, victim);
		CHECK(weft_cancel(co) == 0);
		CHECK(weft_join(co) == 0);
		CHECK(v.result == -1 && v.err == ECANCELED);
		blocker_end(&v);
	}
}

Test(cancel, every_blocking_call_returns_ecanceled)
{
	run(2, cancel_each_kind, NULL);
}

/* How often quick ran, and what its one call returned: ECANCELED had the
 * cancel come before it returned. */
static int quick_runs, quick_result;

static void quick(void *arg)
{
	(void)arg;
	quick_runs++;
	quick_result = weft_sleep(weft_now()) == 0 ? 0 : errno;	/* a deadline past */
}

/* On one worker: quick is cancelled once its return is counted, and the
 * cancel changes nothing: quick is not run again (weft_yield runs every
 * runnable coroutine first), the cancel did not reach its call, the
 * caller's calls are not cancelled, and the join succeeds. */
static void cancel_finished(void *arg)
{
	(void)arg;
	uint64_t finished = stats_now().total.finished;
	weft_co *co = go(quick, NULL);
	while (stats_now().total.finished == finished)
		weft_yield();
	CHECK(quick_runs == 1 && quick_result == 0);
	CHECK(weft_cancel(co) == 0);
	weft_yield();
	CHECK(quick_runs == 1);
	CHECK(weft_sleep(weft_now()) == 0);
	CHECK(weft_join(co) == 0);
	CHECK(weft_cancel(NULL) == -1 && errno == EINVAL);
}

Test(cancel, a_finished_coroutine_is_a_no_op)
{
	run(1, cancel_finished, NULL);
}

Test(cancel, from_a_plain_thread)
{
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	uint64_t parks = stats_now().total.parks;
	weft_co *co = weft_spawn(forever, NULL);
	cr_assert_not_null(co);
	wait_parks(parks, 1);	/* cancelled in its sleep */
	cr_assert_eq(weft_cancel(co), 0);
	cr_assert_eq(weft_join(co), 0);
	cr_assert_eq(weft_shutdown(), 0);
}

/* Cancel racing readiness and a deadline on a parked reader, thousands of
 * times: the reader returns once, with data, ETIMEDOUT or ECANCELED. */
struct race {
	int sv[2];
	int64_t at;
	int result, err;
};

static void race_reader(void *arg)
{
	struct race *r = arg;
	char b;
	r->result = (int)weft_read(r->sv[0], &b, 1, r->at + 10000);
	r->err = errno;
}

static void race_writer(void *arg)
{
	struct race *r = arg;
	while (weft_now() < r->at)
		;
	CHECK(weft_write(r->sv[1], "!", 1, -1) == 1);
}

#ifdef WEFT_TEST_TSAN
enum { RACE_ROUNDS = 300 };	/* TSan: every switch is ~50x slower */
#else
enum { RACE_ROUNDS = 2000 };
#endif

static void race_root(void *arg)
{
	unsigned *seen = arg;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		struct race r = { .at = weft_now() + 100000 };
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r.sv) == 0);
		weft_co *a = go(race_reader, &r), *b = go(race_writer, &r);
		while (weft_now() < r.at + 5000)
			;
		CHECK(weft_cancel(a) == 0);
		CHECK(weft_join(a) == 0 && weft_join(b) == 0);
		CHECK(r.result == 1 || (r.result == -1 && (r.err == ECANCELED || r.err == ETIMEDOUT)));
		seen[r.result == 1 ? 0 : r.err == ECANCELED ? 1 : 2]++;
		CHECK(weft_close(r.sv[0]) == 0 && weft_close(r.sv[1]) == 0);
	}
}

Test(cancel, racing_readiness_and_a_deadline, .timeout = 120)
{
	unsigned seen[3] = { 0, 0, 0 };
	run(2, race_root, seen);
	cr_assert_eq(seen[0] + seen[1] + seen[2], RACE_ROUNDS);
	fprintf(stderr, "cancel races: %u data, %u cancelled, %u timeout\n", seen[0], seen[1], seen[2]);
}

/* Cancel racing a channel hand-off, thousands of times: the item is either
 * received by the cancelled receiver or still in the channel afterwards —
 * never lost, never both. */
struct chan_race {
	struct chan_op recv;	/* the receiver, cancelled */
	int64_t at;
};

static void chan_race_sender(void *arg)
{
	struct chan_race *r = arg;
	while (weft_now() < r->at)
		;
	int v = 42;
	CHECK(weft_chan_send(r->recv.ch, &v, -1) == 0);
}

static void chan_race_root(void *arg)
{
	unsigned *seen = arg;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		struct chan_race r = { .recv = { .ch = weft_chan_new(sizeof(int), 1), .op = WEFT_CHAN_RECV },
				       .at = weft_now() + 100000 };
		weft_co *a = go(chan_op_main, &r.recv), *b = go(chan_race_sender, &r);
		while (weft_now() < r.at + (i % 10) * 1000)
			;
		CHECK(weft_cancel(a) == 0);
		CHECK(weft_join(a) == 0 && weft_join(b) == 0);
		int got = r.recv.result == 0;
		CHECK(got || r.recv.err == ECANCELED);
		int v = 0;
		int left = weft_chan_recv(r.recv.ch, &v, 0) == 0;
		CHECK(got + left == 1);
		CHECK(got ? r.recv.value == 42 : v == 42);
		seen[got ? 0 : 1]++;
		weft_chan_free(r.recv.ch);
	}
}

Test(cancel, racing_a_channel_hand_off, .timeout = 120)
{
	unsigned seen[2] = { 0, 0 };
	run(2, chan_race_root, seen);
	cr_assert_eq(seen[0] + seen[1], RACE_ROUNDS);
	fprintf(stderr, "cancel vs hand-off: %u received, %u left in the channel\n", seen[0], seen[1]);
}
