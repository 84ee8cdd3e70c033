/* SPDX-License-Identifier: MIT */
/*
 * io.h — the one I/O mechanism of io.c, for the calls built on it (net.c).
 *
 * Every weft I/O call is a non-blocking syscall attempt in a loop: begin
 * (a reference on the fd's entry, which weft_close waits for, and the fd
 * registered in a loop), try; on EINTR try again; on EAGAIN park on the
 * fd's slot (or queue: any number may wait) for the call's direction
 * until readiness, the deadline, a close or a cancel; end.  A caller describes its syscall as an attempt
 * callback in a struct weft__io_op (embed it in a larger struct for the
 * callback's arguments) and hands it to one of two loops:
 *
 *   weft__io_call       one successful attempt is the result (read, recv,
 *                       a datagram, a message);
 *   weft__io_write_all  attempts until op->len bytes are written, or an
 *                       attempt returns 0 (its source ended: sendfile).
 *
 * Both return the result or -1 with errno (EPERM outside a coroutine,
 * ECANCELED, ETIMEDOUT, the syscall's errno), errno set after the last
 * suspension.  The attempt runs on the coroutine, possibly on another
 * thread after each park: it reports failure through errno as the syscall
 * left it, and the loop reads that with weft__err_get().
 */
#ifndef WEFT_IO_H
#define WEFT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct weft__io_op;

/* One non-blocking try on fd: >= 0, or -1 with errno (EAGAIN: park). */
typedef ssize_t weft__io_attempt(struct weft__io_op *op, int fd);

struct weft__io_op {
	weft__io_attempt *attempt;
	/* What the attempt offered the fd, in bytes (set by the caller for a
	 * read, by each attempt for a write).  A stream socket that gives a
	 * read fewer was empty, and the next read on it may park first; a
	 * socket that takes fewer from a write is full, so the loop parks
	 * for room before the next try.  0 says neither (a MSG_PEEK, or
	 * sendfile, whose short transfers can mean the end of in_fd). */
	size_t asked;
	size_t len;	/* write_all: the bytes to write in all */
	size_t done;	/* write_all: bytes written so far (the loop counts) */
	bool socket;	/* set before the first attempt: fd is a socket */
	bool file;	/* the op is io.c's buf_op, which a regular file or block
			 * device serves through the file path (never blocking
			 * the worker) instead of the attempts */
};

/* Runs op->attempt until it succeeds once; events is WEFT_IN or WEFT_OUT,
 * the direction an EAGAIN waits for. */
ssize_t weft__io_call(int fd, int events, struct weft__io_op *op, int64_t deadline);

/* Runs op->attempt until op->done reaches op->len (EINVAL above SSIZE_MAX)
 * or an attempt returns 0; returns op->done.  Each attempt writes from
 * op->done on (it keeps its own cursor), sets op->asked and returns the
 * bytes it wrote, which the loop adds to op->done.  On an error a prefix
 * (op->done bytes) has been written. */
ssize_t weft__io_write_all(int fd, struct weft__io_op *op, int64_t deadline);

/* Turns Nagle's algorithm off on a connected socket (weft_accept's and
 * weft_dial's, weft.h), best effort: a socket that refuses it (one that is
 * not TCP) is left as it is. */
void weft__io_nodelay(int fd);

/*
 * weft_close with op(fd, arg) run in place of its close(2), for
 * libweft-hook's dup2 and dup3 onto an fd weft may have registered (the
 * call that replaces the file closes it): no call registers the file
 * being replaced, and the number's next file starts clean.  op: >= 0, or
 * -1 with errno; the result is op's, run alone where fd is not open or
 * has no entry.  Exported for the hooks (hook/hook.h declares it too);
 * not part of the API.
 */
typedef int weft__io_op(int fd, void *arg);
__attribute__((visibility("default"))) int weft__io_replace(int fd, weft__io_op *op, void *arg);

#endif
