/* SPDX-License-Identifier: MIT */
/*
 * http_proto.c — parsing and answering of weft-http's protocol (see
 * http_proto.h).
 */
#include "http_proto.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#define STATUS_200 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" \
		   "Content-Length: 13\r\n"
#define HELLO "\r\nHello, World!"

enum answer { KEEP_ALIVE, KEEP_ALIVE_10, CLOSE, BAD_REQUEST, TOO_LARGE };

const char http_hello[] = STATUS_200 HELLO;
const char http_hello_close[] = STATUS_200 "Connection: close\r\n" HELLO;

static const char *const answers[] = {
	[KEEP_ALIVE] = http_hello,
	/* an HTTP/1.0 client closes unless told it may keep the connection */
	[KEEP_ALIVE_10] = STATUS_200 "Connection: keep-alive\r\n" HELLO,
	[CLOSE] = http_hello_close,
	[BAD_REQUEST] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
			"Connection: close\r\n\r\n",
	[TOO_LARGE] = "HTTP/1.1 431 Request Header Fields Too Large\r\n"
		      "Content-Length: 0\r\nConnection: close\r\n\r\n",
};

/* What a request head says about the connection. */
struct request {
	bool http10; /* else HTTP/1.1 */
	bool keep_alive;
	uint64_t body; /* Content-Length */
};

/* -------------------------------------------------------------- parsing */

static bool name_is(const char *p, size_t n, const char *name)
{
	return n == strlen(name) && strncasecmp(p, name, n) == 0;
}

/* Whether a header value mentions word, ignoring case ("Keep-Alive",
 * "close"): good enough for Connection's short token lists. */
static bool mentions(const char *p, size_t n, const char *word)
{
	size_t w = strlen(word);

	for (size_t i = 0; i + w <= n; i++)
		if (strncasecmp(p + i, word, w) == 0)
			return true;
	return false;
}

/* Decimal digits only; 18 of them cannot overflow. */
static bool parse_length(const char *p, size_t n, uint64_t *v)
{
	if (n == 0 || n > 18)
		return false;
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		*v = *v * 10 + (uint64_t)(p[i] - '0');
	}
	return true;
}

/* "METHOD TARGET HTTP/1.x": only the version matters here. */
static bool parse_request_line(const char *p, size_t n, struct request *r)
{
	const char *sp = memchr(p, ' ', n), *end = p + n;

	if (n < 8 || sp == NULL || memchr(sp + 1, ' ', (size_t)(end - sp - 1))
	    == NULL)
		return false;
	if (memcmp(end - 8, "HTTP/1.", 7) != 0 ||
	    (end[-1] != '0' && end[-1] != '1'))
		return false;
	r->http10 = p[n - 1] == '0';
	return true;
}

/* One "Name: value" line, without its CRLF. */
static bool parse_header(const char *p, size_t n, struct request *r,
			 bool *says_close, bool *says_keep)
{
	const char *colon = memchr(p, ':', n), *v, *end = p + n;

	if (colon == NULL || colon == p)
		return false;
	for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (name_is(p, (size_t)(colon - p), "Connection")) {
		*says_close |= mentions(v, (size_t)(end - v), "close");
		*says_keep |= mentions(v, (size_t)(end - v), "keep-alive");
	} else if (name_is(p, (size_t)(colon - p), "Content-Length")) {
		return parse_length(v, (size_t)(end - v), &r->body);
	} else if (name_is(p, (size_t)(colon - p), "Transfer-Encoding")) {
		*says_close = true; /* a chunked body: see the top */
	}
	return true;
}

/* A whole head, from the request line to the blank line (excluded). */
static bool parse_head(const char *p, size_t n, struct request *r)
{
	const char *end = p + n;
	bool says_close = false, says_keep = false, first = true;

	*r = (struct request){ 0 };
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((eol ? eol : end) - p);

		if (len > 0 && p[len - 1] == '\r')
			len--;
		if (first ? !parse_request_line(p, len, r)
			  : !parse_header(p, len, r, &says_close, &says_keep))
			return false;
		first = false;
		p = eol ? eol + 1 : end;
	}
	r->keep_alive = r->http10 ? says_keep && !says_close : !says_close;
	return true;
}

/* ------------------------------------------------------------- answering */

/* Appends answer a to c->out; false if it does not fit (flush first). */
static bool answer(struct http_conn *c, enum answer a)
{
	size_t n = strlen(answers[a]);

	if (c->out_len + n > sizeof c->out)
		return false;
	memcpy(c->out + c->out_len, answers[a], n);
	c->out_len += n;
	c->out_count++;
	return true;
}

/* Drops what has arrived of the last request's body; returns its length. */
static size_t drop_body(struct http_conn *c, size_t pos)
{
	size_t n = c->in_len - pos;

	if (n > c->skip)
		n = (size_t)c->skip;
	c->skip -= n;
	return n;
}

/* Empty lines before a request line are to be ignored (RFC 9112, 2.2). */
static size_t empty_lines(const struct http_conn *c, size_t pos)
{
	size_t n = 0;

	while (pos + n < c->in_len &&
	       (c->in[pos + n] == '\r' || c->in[pos + n] == '\n'))
		n++;
	return n;
}

void http_conn_init(struct http_conn *c)
{
	c->in_len = c->out_len = 0;
	c->out_count = 0;
	c->skip = 0;
	c->closing = false;
}

/* Consumes the first pos bytes of c->in. */
static void consume(struct http_conn *c, size_t pos)
{
	memmove(c->in, c->in + pos, c->in_len - pos);
	c->in_len -= pos;
}

enum http_state http_answer(struct http_conn *c)
{
	size_t pos = 0;
	enum http_state st = HTTP_OPEN;

	while (st == HTTP_OPEN) {
		const char *head, *blank;
		struct request r;
		enum answer a;
		size_t end;

		pos += drop_body(c, pos);
		if (c->skip > 0)
			break; /* the rest of a body is still to come */
		pos += empty_lines(c, pos);
		head = c->in + pos;
		blank = memmem(head, c->in_len - pos, "\r\n\r\n", 4);
		if (blank == NULL) {
			/* an incomplete head; none fits if it fills in[] */
			if (pos == 0 && c->in_len == sizeof c->in)
				st = answer(c, TOO_LARGE) ? HTTP_CLOSE : HTTP_OUT_FULL;
			break;
		}
		if (!parse_head(head, (size_t)(blank - head), &r)) {
			st = answer(c, BAD_REQUEST) ? HTTP_CLOSE : HTTP_OUT_FULL;
			break;
		}
		end = (size_t)(blank + 4 - c->in);
		/* the last request that has arrived, its body included */
		if (c->closing && c->in_len - end <= r.body)
			r.keep_alive = false;
		a = !r.keep_alive ? CLOSE : r.http10 ? KEEP_ALIVE_10 : KEEP_ALIVE;
		if (!answer(c, a)) {
			st = HTTP_OUT_FULL; /* this request again, after the flush */
			break;
		}
		pos = end;
		c->skip = r.body;
		st = r.keep_alive ? HTTP_OPEN : HTTP_CLOSE;
	}
	consume(c, pos);
	return st;
}
