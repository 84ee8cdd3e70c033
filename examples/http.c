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
 *
 * SIGINT or SIGTERM drains the server (drain.h; docs/embedding.md, section
 * 8): a connection waiting for its next request is closed, one holding
 * part of a request reads the rest, and the last answer of each says
 * "Connection: close"; what is left after $DRAIN_MS is cancelled.  On the
 * way out it prints how many requests it answered, and how many
 * connections the deadline cut off holding a request (read, or answered
 * but not written out): the drain's test compares them with its clients'.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/types.h>

#include <weft.h>

#include "http_metrics.h"
#include "http_proto.h"
#include "server.h"

static atomic_ullong answered, cut_off;

/* Writes out what http_answer gathered. */
static int flush(int fd, struct http_conn *c, unsigned long long *done)
{
	ssize_t n = c->out_len ? weft_write(fd, c->out, c->out_len, -1) : 0;

	if (n < 0)
		return -1;
	*done += c->out_count;
	c->out_len = 0;
	c->out_count = 0;
	return 0;
}

/* Answers what has arrived; -1/errno if a write failed. */
static int answer_all(int fd, struct http_conn *c, enum http_state *st, unsigned long long *done)
{
	while ((*st = http_answer(c)) == HTTP_OUT_FULL)
		if (flush(fd, c, done) != 0)
			return -1;
	return flush(fd, c, done);
}

/* The next read: between two requests the drain may end it. */
static ssize_t next_read(struct drain_conn *dc, struct http_conn *c)
{
	if (c->in_len == 0)
		return drain_idle_read(dc, c->in, sizeof c->in);
	return weft_read(dc->fd, c->in + c->in_len, sizeof c->in - c->in_len, -1);
}

static void http(struct drain_conn *dc)
{
	struct http_conn c; /* on the coroutine's stack */
	enum http_state st = HTTP_OPEN;
	unsigned long long done = 0;
	int err = 0; /* 0: the client closed first */

	http_conn_init(&c);
	while (st == HTTP_OPEN) {
		ssize_t n = next_read(dc, &c);

		if (n <= 0) { /* the client closed, or failed; or the drain */
			err = n < 0 ? errno : 0;
			break;
		}
		c.in_len += (size_t)n;
		if (http_metrics_route(dc->fd, &c))
			break; /* answered /metrics, or shed: close */
		c.closing = drain_conn_closing(dc);
		if (answer_all(dc->fd, &c, &st, &done) != 0) {
			err = errno;
			break;
		}
	}
	atomic_fetch_add(&answered, done);
	if (err == ECANCELED && (c.in_len > 0 || c.out_count > 0))
		atomic_fetch_add(&cut_off, 1);
	if (st == HTTP_OPEN && err == 0)
		weft_close(dc->fd);
	else
		drain_close(dc->fd); /* we end it: no reset */
}

int main(int argc, char **argv)
{
	int status = serve_tcp(argc, argv, "weft-http", http);

	fprintf(stderr, "weft-http: answered %llu requests; %llu connections cut off holding one\n",
		atomic_load(&answered), atomic_load(&cut_off));
	return status;
}
