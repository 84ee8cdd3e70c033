/* SPDX-License-Identifier: MIT */
/* examples/drain.c, the example servers' drain: the interleavings of a
 * connection's read between two requests with the drain, forced on one
 * worker where they can be, raced on two where they cannot.  A request
 * that arrived is returned, never dropped; the drain's interrupt ends one
 * wait, the read's, never a later one (a write that would lose a prefix);
 * after the drain a connection gets one read that does not wait. */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include "../examples/drain.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define REQ "GET / HTTP/1.1\r\n\r\n"

struct conn {
	int sv[2];
	weft_wg *go;		/* the busy connection's cue */
	ssize_t n, n2;		/* drain_idle_read's results */
	int err, err2;
	int sleep_r, sleep_err;	/* a wait after the read: not interrupted */
	char buf[64];
};

/* Reads between two requests twice: the drain lets one read through. */
static void reader(void *arg)
{
	struct conn *t = arg;
	struct drain_conn c;

	drain_conn_join(&c, t->sv[0]);
	if (t->go)
		CHECK(weft_wg_wait(t->go, -1) == 0);
	t->n = drain_idle_read(&c, t->buf, sizeof t->buf);
	t->err = errno;
	t->sleep_r = weft_sleep(weft_now() + MS / 10);
	t->sleep_err = errno;
	t->n2 = drain_idle_read(&c, t->buf, sizeof t->buf);
	t->err2 = errno;
	drain_conn_leave(&c);
}

static void check_answered(const struct conn *t)
{
	CHECK(t->n == (ssize_t)strlen(REQ) && memcmp(t->buf, REQ, strlen(REQ)) == 0);
	CHECK(t->sleep_r == 0);
	CHECK(t->n2 == -1 && t->err2 == ESHUTDOWN);
}

static void start(struct conn *t)
{
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t->sv) == 0);
}

static void finish(struct conn *t)
{
	CHECK(weft_close(t->sv[0]) == 0);
	CHECK(close(t->sv[1]) == 0);
}

/*
 * One worker: the connection parks in its read; the request is written
 * and the drain interrupts it before the worker runs anything else, so the
 * interrupt ends the read (EINTR) while the request is in the socket.  The
 * connection reads it without waiting and returns it.
 */
static void interrupted_root(void *arg)
{
	(void)arg;
	struct conn t = { 0 };
	start(&t);
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(reader, &t);
	wait_parks(parks, 1);	/* in drain_idle_read's weft_read */
	CHECK(write(t.sv[1], REQ, strlen(REQ)) == (ssize_t)strlen(REQ));
	drain_start();
	CHECK(weft_join(co) == 0);
	check_answered(&t);
	finish(&t);
}

Test(drain, an_interrupted_idle_read_returns_the_request_that_came_with_it)
{
	run(1, interrupted_root, NULL);
}

/*
 * Told while busy (not interrupted): the client's next request is already
 * in the socket when the connection reads again; the read returns it
 * without waiting, and the next one says ESHUTDOWN.
 */
static void busy_root(void *arg)
{
	(void)arg;
	struct conn t = { .go = weft_wg_new() };
	CHECK(t.go && weft_wg_add(t.go, 1) == 0);
	start(&t);
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(reader, &t);
	wait_parks(parks, 1);	/* registered, busy, waiting for its cue */
	CHECK(write(t.sv[1], REQ, strlen(REQ)) == (ssize_t)strlen(REQ));
	drain_start();
	CHECK(weft_wg_done(t.go) == 0);
	CHECK(weft_join(co) == 0);
	check_answered(&t);
	weft_wg_free(t.go);
	finish(&t);
}

Test(drain, a_connection_told_while_busy_reads_what_came_without_waiting)
{
	run(1, busy_root, NULL);
}

/* Told while busy, nothing sent: ESHUTDOWN at once, twice. */
static void busy_nothing_root(void *arg)
{
	(void)arg;
	struct conn t = { .go = weft_wg_new() };
	CHECK(t.go && weft_wg_add(t.go, 1) == 0);
	start(&t);
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(reader, &t);
	wait_parks(parks, 1);
	drain_start();
	CHECK(weft_wg_done(t.go) == 0);
	CHECK(weft_join(co) == 0);
	CHECK(t.n == -1 && t.err == ESHUTDOWN && t.sleep_r == 0);
	CHECK(t.n2 == -1 && t.err2 == ESHUTDOWN);
	weft_wg_free(t.go);
	finish(&t);
}

Test(drain, a_connection_told_while_busy_with_nothing_sent_shuts_down)
{
	run(1, busy_nothing_root, NULL);
}

/*
 * Two workers, requests and the drain racing: many connections parked in
 * their reads, a request written to each at offsets around the drain's
 * moment.  Each read returns its request, whether the interrupt ended it
 * or it completed as the interrupt came; in the second case the interrupt
 * is pending, and drain_idle_read must take it, so that the sleep after
 * it (a write, in a server) runs its full time.  The drain is once per
 * process: each round is a child, with many connections.
 */
struct race {
	struct conn t;
	int64_t at;
	bool early;	/* written before the drain began */
};

static bool draining;	/* atomic: set just before drain_start */

static void race_writer(void *arg)
{
	struct race *r = arg;
	while (weft_now() < r->at)
		;
	CHECK(write(r->t.sv[1], REQ, strlen(REQ)) == (ssize_t)strlen(REQ));
	r->early = !__atomic_load_n(&draining, __ATOMIC_SEQ_CST);
}

static void race_root(void *arg)
{
	(void)arg;
	unsigned n = scaled(400, 100, 20);
	struct race *r = calloc(n, sizeof *r);
	weft_co **readers = calloc(n, sizeof *readers), **writers = calloc(n, sizeof *writers);
	CHECK(r && readers && writers);
	uint64_t parks = stats_now().total.parks;
	for (unsigned i = 0; i < n; i++) {
		start(&r[i].t);
		readers[i] = go(reader, &r[i].t);
	}
	wait_parks(parks, n);	/* every one in its read */
	int64_t at = weft_now() + 5 * MS;	/* the drain's moment */
	for (unsigned i = 0; i < n; i++) {
		r[i].at = at - 200000 + (int64_t)(i % 41) * 5000;
		writers[i] = go(race_writer, &r[i]);
	}
	while (weft_now() < at)
		;
	__atomic_store_n(&draining, true, __ATOMIC_SEQ_CST);
	drain_start();
	unsigned early = 0, late_answered = 0;
	for (unsigned i = 0; i < n; i++) {
		struct conn *t = &r[i].t;
		CHECK(weft_join(readers[i]) == 0 && weft_join(writers[i]) == 0);
		if (r[i].early || t->n >= 0)
			check_answered(t);
		else	/* came after the drain's read: never read */
			CHECK(t->err == ESHUTDOWN && t->sleep_r == 0 && t->n2 == -1);
		early += r[i].early;
		late_answered += !r[i].early && t->n >= 0;
		finish(t);
	}
	fprintf(stderr, "drain race: %u of %u requests written before the drain, "
		"%u after it answered\n", early, n, late_answered);
	free(r);
	free(readers);
	free(writers);
}

Test(drain, reads_racing_the_drain_return_their_requests_and_take_the_interrupt, .timeout = 300)
{
	unsigned rounds = scaled(20, 5, 2);
	for (unsigned i = 0; i < rounds; i++) {
		int status;
		char *err = run_child_after(NULL, race_root, &status);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %u: %s", i, err);
		fputs(err, stderr);
	}
}
