/* SPDX-License-Identifier: MIT */
/*
 * http_proto.h — the HTTP/1.1 "hello" protocol of weft-http, without its
 * I/O: requests are parsed from a connection's input buffer and answered
 * into its output buffer, which the caller reads into and writes out as it
 * likes.  weft-http (a coroutine per connection) and the hand-written epoll
 * peer of the benchmarks (bench/peers/epoll) both use it, so they serve the
 * same bytes for the same requests.
 *
 * Every request is answered "200 OK" with the 13-byte body "Hello, World!".
 * Clients may pipeline; a connection stays open unless the client asks
 * otherwise ("Connection: close", or HTTP/1.0 without "Connection:
 * keep-alive").  Bodies announced by Content-Length are skipped; a chunked
 * body ends the connection after the answer (chunks are not parsed).  A
 * head that does not parse gets 400, one longer than the input buffer 431;
 * both close the connection.
 */
#ifndef WEFT_EXAMPLE_HTTP_PROTO_H
#define WEFT_EXAMPLE_HTTP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_IN_MAX 8192 /* a longer request head gets 431 */
#define HTTP_OUT_MAX 8192 /* answers gathered for one write */

struct http_conn {
	size_t in_len; /* bytes read and not yet parsed, at in[0] */
	uint64_t skip; /* body bytes of the last request still to discard */
	size_t out_len; /* answers in out[0], not yet written */
	unsigned out_count; /* how many answers out[] holds */
	bool closing; /* the server closes: see http_answer */
	char in[HTTP_IN_MAX];
	char out[HTTP_OUT_MAX];
};

enum http_state {
	HTTP_OPEN, /* write out, then read more */
	HTTP_CLOSE, /* write out, then close the connection */
	HTTP_OUT_FULL, /* write out, then call http_answer again */
};

/* The exact answers to an HTTP/1.1 request that keeps the connection open,
 * and to one with "Connection: close", for clients that check every byte
 * (weft-tls client). */
extern const char http_hello[];
extern const char http_hello_close[];

void http_conn_init(struct http_conn *c);

/* Answers the complete requests in c->in (appending to c->out) and keeps
 * the incomplete rest at the start of c->in for the next read.  With
 * c->closing set (a server draining), the request that ends what has
 * arrived is answered with "Connection: close", and HTTP_CLOSE returned. */
enum http_state http_answer(struct http_conn *c);

#endif
