/* SPDX-License-Identifier: MIT */
/*
 * weft-udp-echo — a UDP echo server: every datagram goes back to its sender
 * as it came.
 *
 *   weft-udp-echo [PORT]  (else $PORT, else 7000; workers: $WEFT_WORKERS)
 *
 * One coroutine on one socket: weft_recvfrom parks it until a datagram is
 * there, weft_sendto sends it back (parking only while the socket's send
 * buffer is full).  UDP has no connections, so there is nothing to spread
 * over coroutines; scripts/bench.py runs it on one worker under
 * `bench/loadgen -u` against Go's peer.  The socket is server.c's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <weft.h>

#include "server.h"

#define DATAGRAM_MAX 65536 /* more than any UDP payload */
#define YIELD_EVERY 64 /* datagrams between two weft_yield calls */

/* Errors of one datagram, not of the socket: an ICMP error of an earlier
 * send to a client that is gone (ECONNREFUSED and the like), or a reply
 * too large for the route.  The next datagram may be fine. */
static bool one_datagram_failed(int err)
{
	return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH ||
	       err == EMSGSIZE || err == EINTR;
}

/* Under load a datagram is always waiting, so weft_recvfrom never parks:
 * the coroutine yields now and then, to let the worker's other coroutines
 * run (and not be reported as a stall, WEFT_STALL_MS). */
static void udp_echo(int fd)
{
	static char buf[DATAGRAM_MAX]; /* one coroutine: not on its stack */

	for (unsigned i = 1;; i++) {
		if (i % YIELD_EVERY == 0)
			weft_yield();
		struct sockaddr_storage from;
		socklen_t len = sizeof from;
		ssize_t n = weft_recvfrom(fd, buf, sizeof buf, 0,
					  (struct sockaddr *)&from, &len, -1);

		if (n >= 0)
			n = weft_sendto(fd, buf, (size_t)n, 0,
					(struct sockaddr *)&from, len, -1);
		if (n < 0 && !one_datagram_failed(errno)) {
			fprintf(stderr, "weft-udp-echo: %s\n", strerror(errno));
			return;
		}
	}
}

int main(int argc, char **argv)
{
	return serve_udp(argc, argv, "weft-udp-echo", udp_echo);
}
