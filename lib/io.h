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

#include "fdtable.h"

struct weft__io_op;
struct weft__waiter;
struct weft__worker;

/* An I/O call in flight on fd: its entry, the generation it started in,
 * and what it must do for the fd's other waiters when it returns (`leave`):
 * pass the turns it holds (FD_WAKE_TURN of their directions, as in a wake
 * result), or wake a waiter that parked in the slot since readiness came
 * to this call (WEFT_IN/WEFT_OUT: readiness taken without the turn). */
struct weft__io {
	int fd;
	unsigned gen;
	struct weft__fd *e;
	struct weft__worker *w;	/* the caller's worker, until the call parks */
	unsigned char leave;
};

/* Where a park put a waiter, per direction (WEFT_IN/WEFT_OUT bits): in
 * the slot, in the queue, or nowhere since it took readiness nobody had
 * (fdtable.h's FD_IN_SLOT, FD_IN_QUEUE, FD_TOOK_READY). */
struct weft__io_parked {
	unsigned char parked, queued, ready;
};

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
	bool pos_held;	/* the caller holds fd's position turn already
			 * (weft__io_pos_hold): the call takes none */
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

/* A call that moves another fd's file position (weft_sendfile's in_fd with
 * a NULL offset) holds that fd's position turn, as a call on the fd itself
 * would (io.c, pos_enter): under the uring backend, a call begun on fd
 * (its reference, which weft_close waits for) and, for a file, its turn.
 * weft__io_pos_hold: 0, or -1 with errno (io_begin's, or the turn's
 * ETIMEDOUT, ECANCELED, EINTR); weft__io_pos_drop after a 0 ends it. */
int weft__io_pos_hold(struct weft__io *io, int fd, int64_t deadline);
void weft__io_pos_drop(struct weft__io *io);

/*
 * An fd case of weft_chan_select (chan.c): a call in flight on fd for one
 * direction, whose waiter is the select's, parked beside its channel
 * nodes: io.c's wait in steps.  The select
 *   begins each case (a reference on the entry, the fd registered);
 *   polls them (weft__io_cases_poll: exact readiness, as weft_wait's);
 *   parks: weft__io_case_park on each, after its channel nodes; a case
 *   that must not sleep (readiness nobody had taken, a close) returns the
 *   result the select wakes its own waiter with;
 *   settles each once resumed (weft__io_case_settle, with the park result
 *   as the fd cases see it: without a channel claimer's CLAIMED flag);
 *   ends each (weft__io_case_end), saying whether it reported that case.
 * A wake names its direction, not its fd, so a select has at most one
 * case per direction; the two may share an fd.
 */
struct weft__io_case {
	struct weft__io io;
	struct weft__fd_node q[2];	/* its place in its direction's queue, if it queues */
	struct weft__io_parked p;
	unsigned char events;	/* WEFT_IN or WEFT_OUT */
	unsigned char ready;	/* its last poll, or settle, saw it ready */
	unsigned char took;	/* its last poll confirmed readiness it took from the slot */
};
/* 0, or -1 with errno (EPERM outside a coroutine, EBADF, ECANCELED...). */
int weft__io_case_begin(struct weft__io_case *c, int fd, int events, int64_t deadline);
/* Drops the readiness the n cases remember and asks poll(2), without
 * waiting, which are ready now (each case's `ready`): 0, or -errno (EBADF
 * for an fd that is not open). */
int weft__io_cases_poll(struct weft__io_case *const *cs, size_t n);
/* 0 parked, else the wake result the select must wake itself with. */
int weft__io_case_park(struct weft__io_case *c, struct weft__waiter *w);
void weft__io_case_settle(struct weft__io_case *c, struct weft__waiter *w, int r);
/* Whether c's fd was weft_close'd or weft_release'd since c began. */
bool weft__io_case_closed(const struct weft__io_case *c);
/* Ends c; readiness it saw that the select did not report (`reported`
 * false), or that it took from the slot (reported or not), is left for the
 * fd's next waiter. */
void weft__io_case_end(struct weft__io_case *c, bool reported);

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
