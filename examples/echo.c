/* SPDX-License-Identifier: MIT */
/*
 * weft-echo — an echo server: a coroutine per connection, writing back
 * whatever the client sends.
 *
 *   weft-echo [PORT]      (else $PORT, else 7000; workers: $WEFT_WORKERS)
 *
 * Each connection's code is the plain blocking loop one would write with a
 * thread per client; weft_read and weft_write park the coroutine instead of
 * the thread, so one worker serves thousands of clients.  The listening
 * socket, the accept loop and the drain on SIGTERM are in server.c; every
 * read waits between two requests, so it is drain_idle_read.
 */
#include <sys/types.h>

#include <weft.h>

#include "server.h"

static void echo(struct drain_conn *c)
{
	/* on the coroutine's stack (64 KiB by default): no allocation per
	 * client; a large buffer takes a large message in few reads */
	char buf[16 << 10];
	ssize_t n;

	/* weft_read returns what has arrived (at least one byte), 0 at end
	 * of file; weft_write returns only once it has written all n bytes
	 * (or failed: the client is gone, EPIPE instead of SIGPIPE) */
	while ((n = drain_idle_read(c, buf, sizeof buf)) > 0)
		if (weft_write(c->fd, buf, (size_t)n, -1) < 0)
			break;
	if (n == 0)
		weft_close(c->fd); /* the client closed first */
	else
		drain_close(c->fd); /* we end it (the drain: drain.h) */
}

int main(int argc, char **argv)
{
	return serve_tcp(argc, argv, "weft-echo", echo);
}
