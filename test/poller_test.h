/* SPDX-License-Identifier: MIT */
/* Scene helpers shared by test_poller.c and test_poller_adv.c (white-box:
 * which worker a coroutine runs on).  Every scene runs with each poller,
 * whatever the environment says. */
#ifndef WEFT_POLLER_TEST_H
#define WEFT_POLLER_TEST_H

#include <errno.h>
#include <stdatomic.h>

#include "coro_test.h"
#include "worker.h"

static int poller;	/* the scene's: WEFT_POLLER_SHARED or WEFT_POLLER_WORKER */

static inline void run_with(int p, void (*fn)(void *))
{
	poller = p;
	cr_assert_eq(weft_main(fn, NULL, &WEFT_CONFIG(.workers = 2, .poller = p)), 0,
		     "errno %d", errno);
}

/* The calling coroutine's first wait on fd registers it (a wait that times
 * out, nothing being readable); returns the worker it ran on. */
static inline struct weft__worker *register_here(int fd)
{
	struct weft__worker *w = weft__worker_self();	/* no switch before the registration */
	CHECK(weft_wait(fd, WEFT_IN, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	return w;
}

/* A coroutine's one-byte read of fd, its result, and a flag set once it
 * returned. */
struct reader {
	int fd;
	ssize_t got;
	int err;
	atomic_int done;
};

static inline void read_one(void *arg)
{
	struct reader *r = arg;
	char b;
	r->got = weft_read(r->fd, &b, 1, -1);
	r->err = errno;
	atomic_store(&r->done, 1);
}

#endif
