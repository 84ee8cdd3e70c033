/* SPDX-License-Identifier: MIT */
/* Scene helpers shared by test_uring.c and test_uring_adv.c (white-box:
 * the fd table's flags).  A read from a regular file completes too fast to
 * act on while it is in flight, so the scenes read a pipe that the fd
 * table has been told is a file opened O_DIRECT, made blocking again: the
 * ring's read then waits for data for as long as nobody writes. */
#ifndef WEFT_URING_TEST_H
#define WEFT_URING_TEST_H

#include <fcntl.h>

#include "coro_test.h"
#include "fdtable.h"	/* white-box: the fd's flags */

/* weft_main(fn, arg, cfg) for a cfg that asks for the uring backend; skips
 * where io_uring cannot be had. */
static inline void run_uring_config(void (*fn)(void *), void *arg, const weft_config *cfg)
{
	int r = weft_main(fn, arg, cfg);
	if (r != 0 && (errno == ENOSYS || errno == EPERM))
		cr_skip_test("io_uring cannot be had here (errno %d)", errno);
	cr_assert_eq(r, 0, "errno %d", errno);
}

/* weft_main(fn, arg) on `workers` workers with the uring backend. */
static inline void run_uring(unsigned workers, void (*fn)(void *), void *arg)
{
	run_uring_config(fn, arg, &WEFT_CONFIG(.workers = workers, .io = WEFT_IO_URING));
}

/* run_uring with sockets on the rings or not ($WEFT_URING_SOCKETS, off by
 * default), and the worker poller where there are several workers:
 * sockets go to the rings only where a completion wakes its ring's owner
 * alone (lib/loop.c, weft__loop_ring_wakes_owner). */
static inline void run_uring_sockets(unsigned workers, bool sockets, void (*fn)(void *), void *arg)
{
	CHECK(setenv("WEFT_URING_SOCKETS", sockets ? "1" : "0", 1) == 0);
	int poller = workers > 1 ? WEFT_POLLER_WORKER : 0;
	run_uring_config(fn, arg,
			 &WEFT_CONFIG(.workers = workers, .io = WEFT_IO_URING, .poller = poller));
}

/* Makes the file path take fd, registered, for an O_DIRECT file: its
 * transfers go to the ring, blocking (until data or room) there. */
static inline void as_direct_file(int fd)
{
	struct weft__fd *e = weft__fd_find(fd);
	CHECK(e);
	e->flags |= FD_FILE | FD_DIRECT;
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0);
}

/* A pipe whose read end (p[0]) the file path takes for an O_DIRECT file:
 * its reads go to the ring and wait there for data. */
static inline void ring_pipe(int p[2])
{
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	char c;
	CHECK(weft_read(p[0], &c, 1, 0) == -1 && errno == ETIMEDOUT);	/* registered */
	as_direct_file(p[0]);
}

#endif
