/* SPDX-License-Identifier: MIT */
/*
 * drain.h — a server's shutdown that loses no request (docs/embedding.md,
 * section 8): on SIGINT or SIGTERM, stop accepting, let the requests in
 * flight finish, close the idle keep-alive connections without racing a
 * request the client has just sent, and cancel what is left at a deadline.
 * Used by the example servers (server.c, graceful.c).
 *
 * A connection is busy while it holds part of a request or writes its
 * answers, and idle while it waits in drain_idle_read for the next request.
 * The drain interrupts (weft_interrupt) idle connections only: an
 * interrupted read loses nothing (the bytes stay in the socket), while an
 * interrupted weft_write would end with EINTR after an unknown prefix.  A
 * busy connection is told by its state instead: its next drain_idle_read
 * does not wait (it returns what has already arrived, else ESHUTDOWN).
 */
#ifndef WEFT_EXAMPLE_DRAIN_H
#define WEFT_EXAMPLE_DRAIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <weft.h>

/* One connection, on its coroutine's stack, registered while it runs. */
struct drain_conn {
	int fd;
	weft_co *co;
	atomic_int state; /* busy, idle or draining: drain.c */
	bool last_read; /* the drain's one read without waiting is done */
	struct drain_conn *prev, *next;
};

/*
 * Blocks SIGINT and SIGTERM in the calling thread and returns a signalfd
 * (non-blocking, close-on-exec) that receives them, or -1/errno.  Call it
 * on the main thread before weft_init, so that every thread the runtime
 * starts inherits the mask and the signals arrive only through the fd.
 */
int drain_signals(void);

/*
 * Registers the calling coroutine's connection on fd (the drain finds it
 * there); it starts busy, or draining if the drain has begun.  Call
 * drain_conn_leave before the coroutine returns.
 */
void drain_conn_join(struct drain_conn *c, int fd);
void drain_conn_leave(struct drain_conn *c);

/*
 * The read between two requests: weft_read's results, or -1/ESHUTDOWN when
 * the server drains and nothing has arrived (close the connection).  What
 * a client sent before the drain reached this connection is returned, not
 * dropped: once the drain has begun, the connection gets one more read,
 * which does not wait, then ESHUTDOWN.  Answer what it read, then close
 * (drain_conn_closing says so).
 */
ssize_t drain_idle_read(struct drain_conn *c, void *buf, size_t len);

/* Whether the server drains: answer what has been read, then close. */
bool drain_conn_closing(const struct drain_conn *c);

/*
 * Closes a connection the server ends, without resetting it: shuts down
 * writing (the client reads our last answer, then end of file), discards
 * what the client still sends until it closes too or for a second at most,
 * then weft_close.  A plain close(2) with unread bytes in the socket sends
 * a reset, which can destroy the last answer before the client reads it.
 */
void drain_close(int fd);

/*
 * Begins the drain: every registered connection, and every one that joins
 * later, is told; those waiting in drain_idle_read are interrupted.  Never
 * blocks (drain_on_signal calls it after the acceptor has stopped).
 */
void drain_start(void);

/*
 * The life of a server after start-up: waits for SIGINT or SIGTERM on
 * sigfd, stops accepting (cancels and joins acceptor, which must return on
 * ECANCELED), interrupts the idle connections, waits for the members of
 * conns until grace_ns from the signal, then cancels those left and waits
 * for them.  Prints one line on stderr for the signal and one for the
 * drain; returns how many connections were cancelled at the deadline.
 */
ssize_t drain_on_signal(int sigfd, weft_co *acceptor, weft_group *conns, int64_t grace_ns);

#endif
