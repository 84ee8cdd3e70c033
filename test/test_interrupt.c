/* SPDX-License-Identifier: MIT */
/* weft_interrupt: every kind of blocking call returns EINTR, once, and the
 * calls after it run as usual; an interrupt that finds no wait waits for
 * the next one; a finished coroutine ignores it; from plain threads; racing
 * wakes, where nothing is lost and no interrupt is delivered twice; the
 * waits an interrupt does not end (offload) keep it for the next one. */
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
	while (weft_sleep(-1) == 0 || errno == EINTR)
		;
}

static void victim(void *arg)
{
	struct blocker *v = arg;
	blocker_main(v);
	/* nothing is sticky: the calls after it run as usual */
	char b;
	CHECK(weft_write(v->sv[1], "x", 1, -1) == 1);
	CHECK(weft_read(v->sv[0], &b, 1, -1) == 1 && b == 'x');
	CHECK(weft_sleep(weft_now() + MS / 10) == 0);
}

/* Each victim's objects are then as they were, nobody waiting on them, and
 * the joiner's target stays joinable, not interrupted (blocker_end). */
static void interrupt_each_kind(void *arg)
{
	(void)arg;
	for (int k = 0; k < BLOCK_KINDS; k++) {
		struct blocker v;
		weft_co *co = blocker_start(&v, k, forever, victim);
		CHECK(weft_interrupt(co) == 0);
		CHECK(weft_join(co) == 0);
		CHECK(v.result == -1 && v.err == EINTR);
		blocker_end(&v);
	}
}

Test(interrupt, every_blocking_call_returns_eintr_once)
{
	run(2, interrupt_each_kind, NULL);
}

/* Interrupted while it runs: the ready calls before its next wait are not
 * interrupted, and that wait is, at once; the one after waits as usual. */
struct pending {
	weft_chan *ch;
	unsigned interrupted;	/* atomic */
	int ready_results, wait_result, wait_err, next_result;
};

static void pending_victim(void *arg)
{
	struct pending *p = arg;
	while (!__atomic_load_n(&p->interrupted, __ATOMIC_ACQUIRE))
		;	/* running, on its own worker */
	int x = 7;
	p->ready_results = weft_chan_send(p->ch, &x, -1);	/* room: ready */
	p->ready_results |= weft_chan_recv(p->ch, &x, -1);	/* an element: ready */
	p->ready_results |= weft_sleep(weft_now() - 1);		/* past: no wait */
	p->wait_result = weft_chan_recv(p->ch, &x, -1);		/* would wait */
	p->wait_err = errno;
	p->next_result = weft_chan_recv(p->ch, &x, weft_now() + MS);	/* waits, times out */
	CHECK(errno == ETIMEDOUT);
}

static void interrupt_before_waiting(void *arg)
{
	(void)arg;
	struct pending p = { .ch = weft_chan_new(sizeof(int), 1) };
	weft_co *co = go(pending_victim, &p);
	CHECK(weft_interrupt(co) == 0);
	CHECK(weft_interrupt(co) == 0);	/* two before a wait are one */
	__atomic_store_n(&p.interrupted, 1, __ATOMIC_RELEASE);
	CHECK(weft_join(co) == 0);
	CHECK(p.ready_results == 0);
	CHECK(p.wait_result == -1 && p.wait_err == EINTR);
	CHECK(p.next_result == -1);
	weft_chan_free(p.ch);
}

Test(interrupt, before_the_wait_it_waits_for_the_wait)
{
	run(2, interrupt_before_waiting, NULL);
}

static int quick_runs, quick_result;

static void quick(void *arg)
{
	(void)arg;
	quick_runs++;
	quick_result = weft_sleep(weft_now()) == 0 ? 0 : errno;
}

/* On one worker: a finished coroutine's interrupt changes nothing, the
 * caller's calls are not interrupted, the join succeeds. */
static void interrupt_finished(void *arg)
{
	(void)arg;
	uint64_t finished = stats_now().total.finished;
	weft_co *co = go(quick, NULL);
	while (stats_now().total.finished == finished)
		weft_yield();
	CHECK(weft_interrupt(co) == 0);
	weft_yield();
	CHECK(quick_runs == 1 && quick_result == 0);
	CHECK(weft_sleep(weft_now() + MS / 10) == 0);
	CHECK(weft_join(co) == 0);
	CHECK(weft_interrupt(NULL) == -1 && errno == EINVAL);
}

Test(interrupt, a_finished_coroutine_ignores_it)
{
	run(1, interrupt_finished, NULL);
}

/* From a plain thread: the sleeper wakes with EINTR and sleeps again. */
static unsigned sleeper_eintr;

static void sleeper(void *arg)
{
	(void)arg;
	CHECK(weft_sleep(-1) == -1 && errno == EINTR);
	CHECK(weft_sleep(weft_now() + MS / 10) == 0);	/* not sticky */
	__atomic_store_n(&sleeper_eintr, 1, __ATOMIC_RELEASE);
	CHECK(weft_sleep(-1) == -1 && errno == ECANCELED);
}

Test(interrupt, from_a_plain_thread)
{
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	uint64_t parks = 0;
	weft_stats st = { .size = sizeof st };
	cr_assert_eq(weft_stats_get(&st), 0);
	parks = st.total.parks;
	weft_co *co = weft_spawn(sleeper, NULL);
	cr_assert_not_null(co);
	do {	/* until it parks */
		sched_yield();
		cr_assert_eq(weft_stats_get(&st), 0);
	} while (st.total.parks == parks);
	cr_assert_eq(weft_interrupt(co), 0);
	while (!__atomic_load_n(&sleeper_eintr, __ATOMIC_ACQUIRE))
		sched_yield();
	cr_assert_eq(weft_cancel(co), 0);
	cr_assert_eq(weft_join(co), 0);
	cr_assert_eq(weft_shutdown(), 0);
}

/*
 * Interrupts racing a channel hand-off, thousands of times: the receiver
 * gets the element or EINTR; an EINTR leaves the element in the channel,
 * and an interrupt the hand-off beat is delivered to the receiver's next
 * wait.  So each round sees exactly one EINTR, never two, and never loses
 * the element.
 */
#define RACE_ROUNDS scaled(2000, 300, 50)

struct chan_race {
	weft_chan *ch;
	int64_t at;
	int got, eintrs;
};

static void race_receiver(void *arg)
{
	struct chan_race *r = arg;
	int x = 0;
	if (weft_chan_recv(r->ch, &x, -1) == 0)
		r->got = x;
	else
		CHECK(errno == EINTR && ++r->eintrs);
	/* the interrupt, delivered or pending, ends exactly one wait */
	if (r->eintrs == 0)
		CHECK(weft_chan_recv(r->ch, &x, -1) == -1 && errno == EINTR && ++r->eintrs);
	/* and no other: this wait runs to its deadline */
	CHECK(weft_sleep(weft_now() + MS / 10) == 0);
}

static void race_sender(void *arg)
{
	struct chan_race *r = arg;
	while (weft_now() < r->at)
		;
	int v = 42;
	CHECK(weft_chan_send(r->ch, &v, -1) == 0);
}

static void chan_race_root(void *arg)
{
	unsigned *seen = arg;
	for (unsigned i = 0; i < RACE_ROUNDS; i++) {
		struct chan_race r = { .ch = weft_chan_new(sizeof(int), 1),
				       .at = weft_now() + 100000 };
		weft_co *a = go(race_receiver, &r), *b = go(race_sender, &r);
		while (weft_now() < r.at + (i % 10) * 1000)
			;
		CHECK(weft_interrupt(a) == 0);
		CHECK(weft_join(a) == 0 && weft_join(b) == 0);
		CHECK(r.eintrs == 1);
		int x = 0;
		bool left = weft_chan_recv(r.ch, &x, 0) == 0;
		CHECK(left != (r.got == 42));	/* received, or still there */
		seen[left]++;
		weft_chan_free(r.ch);
	}
}

Test(interrupt, racing_a_hand_off_loses_nothing_and_counts_once, .timeout = 120)
{
	unsigned seen[2] = { 0, 0 };
	run(2, chan_race_root, seen);
	cr_assert_eq(seen[0] + seen[1], RACE_ROUNDS);
	fprintf(stderr, "interrupt races: %u received, %u left in the channel\n", seen[0], seen[1]);
}

/*
 * Interrupts racing readiness on a parked reader: the reader gets the byte
 * or EINTR, and the interrupt ends exactly one of its waits: a read that
 * got the byte leaves it pending for the next wait; an interrupted read
 * leaves the byte in the socket for the next read.
 */
struct io_race {
	int sv[2];
	int64_t at;
	int bytes, eintrs;
};

static void io_race_reader(void *arg)
{
	struct io_race *r = arg;
	char b;
	for (int i = 0; i < 2; i++) {	/* the byte, then the pending interrupt */
		ssize_t n = weft_read(r->sv[0], &b, 1, -1);
		if (n == 1)
			r->bytes++;
		else
			CHECK(n == -1 && errno == EINTR && ++r->eintrs);
	}
	CHECK(weft_sleep(weft_now() + MS / 10) == 0);	/* no second interrupt */
}

static void io_race_writer(void *arg)
{
	struct io_race *r = arg;
	while (weft_now() < r->at)
		;
	CHECK(weft_write(r->sv[1], "!", 1, -1) == 1);
}

static void io_race_root(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < RACE_ROUNDS; i++) {
		struct io_race r = { .at = weft_now() + 100000 };
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r.sv) == 0);
		weft_co *a = go(io_race_reader, &r), *b = go(io_race_writer, &r);
		while (weft_now() < r.at + (i % 10) * 1000)
			;
		CHECK(weft_interrupt(a) == 0);
		CHECK(weft_join(a) == 0 && weft_join(b) == 0);
		CHECK(r.bytes == 1 && r.eintrs == 1);
		CHECK(weft_close(r.sv[0]) == 0 && weft_close(r.sv[1]) == 0);
	}
}

Test(interrupt, racing_readiness_loses_no_byte_and_counts_once, .timeout = 120)
{
	run(2, io_race_root, NULL);
}

/*
 * One worker, the interleaving forced: the victim's cond_wait is signalled
 * (it returns 0) while the signaller still holds the mutex, so its relock
 * waits on the mutex, and that wait is interrupted.  The cond wait keeps
 * the mutex semantics (returns 0 with m held), and the interrupt is not
 * lost: the next wait gets it.  (Before, relock swallowed it.)
 */
static weft_mutex *cm;
static weft_cond *cc;
static int cond_waiting, cond_r, sleep_r, sleep_e;

static void cond_victim(void *arg)
{
	(void)arg;
	CHECK(weft_mutex_lock(cm) == 0);
	cond_waiting = 1;
	cond_r = weft_cond_wait(cc, cm, -1);
	CHECK(weft_mutex_unlock(cm) == 0);
	sleep_r = weft_sleep(weft_now() + 100 * MS);
	sleep_e = errno;
}

static void interrupt_cond_relock(void *arg)
{
	(void)arg;
	cm = weft_mutex_new();
	cc = weft_cond_new();
	weft_co *a = go(cond_victim, NULL);
	while (!cond_waiting)
		weft_yield();
	weft_yield();			/* the victim parks on cc */
	CHECK(weft_mutex_lock(cm) == 0);
	CHECK(weft_cond_signal(cc) == 0);
	weft_yield();			/* woken: its relock parks on cm */
	CHECK(weft_interrupt(a) == 0);
	weft_yield();
	CHECK(weft_mutex_unlock(cm) == 0);
	CHECK(weft_join(a) == 0);
	CHECK(cond_r == 0);
	CHECK(sleep_r == -1 && sleep_e == EINTR);
	weft_cond_free(cc);
	weft_mutex_free(cm);
}

Test(interrupt, a_cond_waits_relock_keeps_it_for_the_next_wait)
{
	run(1, interrupt_cond_relock, NULL);
}

/* weft_group_interrupt: every member's wait ends with EINTR, once. */
static void interrupted_member(void *arg)
{
	unsigned *eintrs = arg;
	if (weft_sleep(-1) == -1 && errno == EINTR)
		__atomic_fetch_add(eintrs, 1, __ATOMIC_RELAXED);
	CHECK(weft_sleep(weft_now() + MS / 10) == 0);	/* not sticky */
}

static void interrupt_group(void *arg)
{
	(void)arg;
	unsigned eintrs = 0;
	weft_group *g = weft_group_new();
	CHECK(g);
	uint64_t parks = stats_now().total.parks;
	for (int i = 0; i < 16; i++)
		CHECK(weft_group_spawn(g, interrupted_member, &eintrs));
	wait_parks(parks, 16);
	CHECK(weft_group_interrupt(g) == 0);
	CHECK(weft_group_wait(g, -1) == 0);
	CHECK(eintrs == 16);
	CHECK(weft_group_free(g) == 0);
	CHECK(weft_group_interrupt(NULL) == -1 && errno == EINVAL);
}

Test(interrupt, a_group_interrupt_reaches_every_member)
{
	run(2, interrupt_group, NULL);
}

/* An offloaded call's wait is not interrupted (its argument must outlive
 * the call); the interrupt waits for the next wait. */
static void slow_call(void *arg)
{
	usleep(20000);
	*(int *)arg = 1;
}

static void offload_victim(void *arg)
{
	int *result = arg;
	CHECK(weft_offload(slow_call, result) == 0 && *result == 1);
	*result = weft_sleep(-1) == -1 ? errno : 0;
}

static void interrupt_offload(void *arg)
{
	(void)arg;
	int result = 0;
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(offload_victim, &result);
	wait_parks(parks, 1);
	CHECK(weft_interrupt(co) == 0);
	CHECK(weft_join(co) == 0);
	CHECK(result == EINTR);
}

Test(interrupt, an_offload_wait_keeps_it_for_the_next_wait)
{
	run(2, interrupt_offload, NULL);
}
