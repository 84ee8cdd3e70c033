/* SPDX-License-Identifier: MIT */
/*
 * server.h — what the example servers share: the listening socket, the
 * accept loop and a coroutine per connection.  See echo.c and http.c; and
 * a bound UDP socket for udp_echo.c.
 */
#ifndef WEFT_EXAMPLE_SERVER_H
#define WEFT_EXAMPLE_SERVER_H

#include "drain.h"

/*
 * Runs a TCP server on the port given as argv[1], else $PORT, else 7000
 * (0: any free port), on every address.  Once it is listening it prints
 * "listening on PORT" on stdout, then accepts connections until SIGINT or
 * SIGTERM, running handle(c) in a coroutine of its own for each, c
 * registered for the drain (drain.h); handle owns c->fd and must close it
 * (drain_close, or weft_close after the client's end of file).  The
 * workers are weft's default, or $WEFT_WORKERS.  On the signal it drains
 * (drain_on_signal), cancelling what is left after $DRAIN_MS milliseconds
 * (default 5000), and returns 0; on failure an exit status for main().
 */
int serve_tcp(int argc, char **argv, const char *name, void (*handle)(struct drain_conn *c));

/*
 * A UDP server on the same port, printing the same line once its socket is
 * bound, then running handle(fd) on that socket (non-blocking) in weft's
 * main coroutine; returns only on failure, as serve_tcp.
 */
int serve_udp(int argc, char **argv, const char *name, void (*handle)(int fd));

#endif
