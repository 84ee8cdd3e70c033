/* SPDX-License-Identifier: MIT */
/* weft-http's load shedding (examples/http_metrics.c): while the runtime's
 * scheduling delay (weft_sched_delay) is over $WEFT_HTTP_SHED_MS, a request
 * is answered 503; under it, 200.  A connection coroutine here does what
 * weft-http's does with one request (http_metrics_route, else http_answer),
 * on a socket pair; the delay is made by a standing queue of coroutines
 * that each compute for a while per turn on the one worker.
 *
 * No check bounds a wall-clock time: the over-target scene waits for the
 * estimate itself to pass the target (each delay in that queue is at least
 * the other yielders' turns, far over it). */
#define WEFT_ERRNO_GUARD
#include "harness.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coro_test.h"
#include "../examples/http_metrics.h"

enum { YIELDERS = 4 };
static const int64_t TARGET_MS = 5;
/* a turn: the queue's delay is at least (YIELDERS - 1) turns, 3x the target */
#define TURN_NS (TARGET_MS * MS)

static const char request[] = "GET / HTTP/1.1\r\nHost: test\r\n\r\n";

/* weft-http's connection, for one request: a route's answer, else hello. */
static void serve_one(void *arg)
{
	int fd = *(int *)arg;
	static struct http_conn c;
	http_conn_init(&c);
	c.in[0] = '\0';
	while (!strstr(c.in, "\r\n\r\n")) {
		ssize_t n = weft_read(fd, c.in + c.in_len, sizeof c.in - 1 - c.in_len, -1);
		CHECK(n > 0);
		c.in_len += (size_t)n;
		c.in[c.in_len] = '\0';
	}
	if (http_metrics_route(fd, &c))
		return;
	CHECK(http_answer(&c) != HTTP_OUT_FULL);
	CHECK(weft_write(fd, c.out, c.out_len, -1) == (ssize_t)c.out_len);
}

/* Sends one request through a fresh connection; the status line's code. */
static int ask(void)
{
	int sv[2];
	socket_pair(sv);
	weft_co *server = go(serve_one, &sv[1]);
	CHECK(weft_write(sv[0], request, sizeof request - 1, -1) == (ssize_t)(sizeof request - 1));
	char head[64] = { 0 };
	size_t got = 0;
	while (got < 12) {
		ssize_t n = weft_read(sv[0], head + got, sizeof head - 1 - got, -1);
		CHECK(n > 0);
		got += (size_t)n;
	}
	join(server);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	int code = 0;
	CHECK(sscanf(head, "HTTP/1.1 %d", &code) == 1);
	return code;
}

static atomic_bool stop;

static void busy_yielder(void *unused)
{
	(void)unused;
	while (!atomic_load(&stop)) {
		int64_t end = weft_now() + TURN_NS;
		while (weft_now() < end)
			;
		weft_yield();
	}
}

static void shed_main(void *unused)
{
	(void)unused;
	/* idle: the delay is far under the target */
	CHECK(weft_sched_delay() < TARGET_MS * MS);
	CHECK(ask() == 200);
	/* a standing queue: every dispatch waits for the other yielders */
	weft_co *co[YIELDERS];
	for (int i = 0; i < YIELDERS; i++)
		co[i] = go(busy_yielder, NULL);
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (weft_sched_delay() <= TARGET_MS * MS) {
		CHECK(weft_now() < give_up);	/* the estimate never rose */
		weft_yield();
	}
	CHECK(ask() == 503);
	atomic_store(&stop, true);
	for (int i = 0; i < YIELDERS; i++)
		join(co[i]);
}

Test(http_shed, over_the_target_503_under_it_200)
{
	cr_assert_eq(setenv("WEFT_HTTP_SHED_MS", "5", 1), 0);
	cr_assert_eq(setenv("WEFT_SCHED_SAMPLE", "1", 1), 0);
	run(1, shed_main, NULL);
}
