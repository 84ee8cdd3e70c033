/* SPDX-License-Identifier: MIT */
/*
 * weft-http — a minimal HTTP/1.1 server answering every request with
 * "200 OK" and the 13-byte body "Hello, World!".
 *
 *   weft-http [PORT]      (else $PORT, else 7000; workers: $WEFT_WORKERS)
 *
 * A coroutine per connection reads requests, answers every complete one in
 * what it has read (clients may pipeline several) with one write, and keeps
 * the connection open unless the client asks otherwise.  The protocol
 * (parsing, keep-alive, bodies, errors) is in http_proto.c; the listening
 * socket and the accept loop are in server.c; GET /metrics and load
 * shedding ($WEFT_HTTP_SHED_MS) in http_metrics.c.
 */
#include <sys/types.h>

#include <weft.h>

#include "http_metrics.h"
#include "http_proto.h"
#include "server.h"

/* Writes out what http_answer gathered. */
static int flush(int fd, struct http_conn *c)
{
	ssize_t n = c->out_len ? weft_write(fd, c->out, c->out_len, -1) : 0;

	c->out_len = 0;
	return n < 0 ? -1 : 0;
}

static void http(int fd)
{
	struct http_conn c; /* on the coroutine's stack */
	enum http_state st = HTTP_OPEN;

	http_conn_init(&c);
	while (st == HTTP_OPEN) {
		ssize_t n = weft_read(fd, c.in + c.in_len,
				      sizeof c.in - c.in_len, -1);
		if (n <= 0)
			break; /* the client closed, or failed */
		c.in_len += (size_t)n;
		if (http_metrics_route(fd, &c))
			break; /* answered /metrics, or shed: close */
		while ((st = http_answer(&c)) == HTTP_OUT_FULL)
			if (flush(fd, &c) != 0)
				break;
		if (flush(fd, &c) != 0)
			break;
	}
	weft_close(fd);
}

int main(int argc, char **argv)
{
	return serve_tcp(argc, argv, "weft-http", http);
}
