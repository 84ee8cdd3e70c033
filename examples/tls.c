/* SPDX-License-Identifier: MIT */
/*
 * weft-tls — weft-http's "Hello, World!" over TLS (OpenSSL), with a client
 * that checks every byte of the answers, and a certificate maker.
 *
 *   weft-tls server PORT CERT KEY [HANDSHAKE_MS]
 *       HTTPS on PORT (0: any free port; it prints "listening on PORT"),
 *       with the PEM certificate chain CERT and private key KEY.  A client
 *       must finish its handshake within HANDSHAKE_MS (default 10000) or is
 *       closed; a connection may stay silent 60 s between requests.
 *       Workers: $WEFT_WORKERS.
 *   weft-tls client HOST PORT CLIENTS [CAFILE]
 *       CLIENTS connections at once, a coroutine each: 10 requests one at a
 *       time, a POST with a 40,000-byte body, then 5 pipelined requests
 *       whose last says "Connection: close"; every answer is compared byte
 *       for byte with weft-http's, and the server's close_notify must follow.
 *       With CAFILE the server's certificate is verified against it and must
 *       name HOST; without, nothing is verified.  Exit status 0 when every
 *       client got every byte right; each failure is printed.
 *   weft-tls cert CERT KEY
 *       writes a self-signed certificate for localhost, 127.0.0.1 and ::1
 *       (EC P-256, valid one day) and its key, for the two above.
 *
 * The TLS plumbing (non-blocking SSL objects parked in weft_wait, deadlines,
 * errors) is in weft_tls.c; the HTTP protocol is weft-http's (http_proto.c);
 * the listening socket and the accept loop are server.c's.
 */
#define WEFT_ERRNO_GUARD /* errno is read after calls that suspend */
#include <weft.h>

#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http_proto.h"
#include "server.h"
#include "weft_tls.h"

#define NS_PER_MS 1000000LL
#define IDLE_NS (60000 * NS_PER_MS) /* between two requests */
#define SHUTDOWN_NS (1000 * NS_PER_MS) /* to send our close_notify */
#define CLIENT_NS (10000 * NS_PER_MS) /* a client's whole conversation */

/* ------------------------------------------------------------------ server */

static SSL_CTX *server_ctx;
static int64_t handshake_ns = 10000 * NS_PER_MS;

/* Writes out what http_answer gathered. */
static ssize_t flush(struct tls_conn *t, struct http_conn *c)
{
	ssize_t n = tls_conn_write(t, c->out, c->out_len, weft_now() + IDLE_NS);

	c->out_len = 0;
	return n;
}

/* weft-http's loop (http.c), over TLS.  The 16 KiB of buffers are on the
 * heap, leaving the coroutine's stack to OpenSSL's calls.  Its reads are
 * OpenSSL's, so the drain (drain.h) does not interrupt them: a connection
 * ends on its own, or is cancelled at the drain's deadline. */
static void https(struct drain_conn *dc)
{
	int fd = dc->fd;
	struct tls_conn t;
	struct http_conn *c = NULL;
	enum http_state st = HTTP_OPEN;
	ssize_t n = -1;

	if (tls_conn_init(&t, server_ctx, fd, NULL) != 0 ||
	    tls_conn_handshake(&t, weft_now() + handshake_ns) != 0)
		goto out;
	if ((c = malloc(sizeof *c)) == NULL) {
		snprintf(t.err, sizeof t.err, "out of memory");
		goto out;
	}
	http_conn_init(c);
	while (st == HTTP_OPEN) {
		n = tls_conn_read(&t, c->in + c->in_len, sizeof c->in - c->in_len,
				  weft_now() + IDLE_NS);
		if (n <= 0)
			break; /* 0: the client's close_notify */
		c->in_len += (size_t)n;
		while ((st = http_answer(c)) == HTTP_OUT_FULL && (n = flush(&t, c)) >= 0)
			;
		if (n < 0 || (n = flush(&t, c)) < 0)
			break;
	}
	if (n >= 0) /* done: "Connection: close", or the client's close_notify */
		n = tls_conn_shutdown(&t, weft_now() + SHUTDOWN_NS);
out:
	if (n < 0)
		fprintf(stderr, "weft-tls server: fd %d: %s\n", fd, t.err);
	free(c);
	tls_conn_free(&t);
}

static int server(int argc, char **argv)
{
	char err[256], name[] = "weft-tls server";
	char *port_argv[] = { name, argv[2], NULL };

	if (argc == 6) {
		char *end;
		long ms = strtol(argv[5], &end, 10);

		if (*end != '\0' || ms <= 0 || ms > 3600000) {
			fprintf(stderr, "weft-tls: HANDSHAKE_MS: 1..3600000\n");
			return 2;
		}
		handshake_ns = ms * NS_PER_MS;
	}
	server_ctx = tls_server_ctx(argv[3], argv[4], err, sizeof err);
	if (server_ctx == NULL) {
		fprintf(stderr, "weft-tls server: %s\n", err);
		return 1;
	}
	return serve_tcp(2, port_argv, "weft-tls server", https);
}

/* ------------------------------------------------------------------ client */

enum { SEQUENTIAL = 10, PIPELINED = 5, BODY = 40000 };

struct client {
	int id;
	unsigned answers; /* checked */
	char err[300]; /* "" if all went well */
};

static struct {
	SSL_CTX *ctx;
	const char *host;
	struct addrinfo *addrs;
	struct client *clients;
	int n;
} cl;

/* A connected non-blocking socket to one of the addresses, or -1/errno. */
static int dial(int64_t deadline)
{
	int fd = -1;

	errno = EADDRNOTAVAIL;
	for (struct addrinfo *a = cl.addrs; a != NULL; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0)
			continue;
		if (weft_connect(fd, a->ai_addr, a->ai_addrlen, deadline) == 0)
			return fd;
		int e = errno;
		weft_close(fd);
		errno = e;
		fd = -1;
	}
	return fd;
}

/* Reads exactly len bytes and compares them with want. */
static int expect(struct client *c, struct tls_conn *t, const char *want, size_t len,
		  int64_t deadline)
{
	char buf[4096];

	for (size_t got = 0; got < len;) {
		size_t chunk = len - got < sizeof buf ? len - got : sizeof buf;
		ssize_t n = tls_conn_read(t, buf, chunk, deadline);

		if (n < 0) {
			snprintf(c->err, sizeof c->err, "%s", t->err);
			return -1;
		}
		if (n == 0) {
			snprintf(c->err, sizeof c->err, "end of stream after %zu of %zu bytes",
				 got, len);
			return -1;
		}
		for (size_t i = 0; i < (size_t)n; i++) {
			if (buf[i] != want[got + i]) {
				snprintf(c->err, sizeof c->err, "byte %zu of %zu: 0x%02x, not 0x%02x",
					 got + i, len, (unsigned char)buf[i],
					 (unsigned char)want[got + i]);
				return -1;
			}
		}
		got += (size_t)n;
	}
	return 0;
}

static int send_all(struct client *c, struct tls_conn *t, const char *buf, size_t len,
		    int64_t deadline)
{
	if (tls_conn_write(t, buf, len, deadline) < 0) {
		snprintf(c->err, sizeof c->err, "%s", t->err);
		return -1;
	}
	return 0;
}

/* The conversation of weft-tls client's top comment. */
static int converse(struct client *c, struct tls_conn *t, int64_t deadline)
{
	size_t hello = strlen(http_hello), close_len = strlen(http_hello_close);
	char req[256], *buf = malloc(BODY + PIPELINED * sizeof req);
	size_t len = 0;
	int rc = -1;

	if (buf == NULL) {
		snprintf(c->err, sizeof c->err, "out of memory");
		return -1;
	}
	for (int i = 0; i < SEQUENTIAL; i++) {
		int n = snprintf(req, sizeof req, "GET /c%d/r%d HTTP/1.1\r\nHost: %s\r\n\r\n",
				 c->id, i, cl.host);
		if (send_all(c, t, req, (size_t)n, deadline) != 0 ||
		    expect(c, t, http_hello, hello, deadline) != 0)
			goto out;
		c->answers++;
	}
	/* a body longer than a TLS record (16 KiB), which the server skips */
	len = (size_t)snprintf(buf, BODY + 1, "POST /c%d HTTP/1.1\r\nHost: %s\r\n"
			       "Content-Length: %d\r\n\r\n", c->id, cl.host, BODY);
	memset(buf + len, 'a' + c->id % 26, BODY);
	if (send_all(c, t, buf, len + BODY, deadline) != 0 ||
	    expect(c, t, http_hello, hello, deadline) != 0)
		goto out;
	c->answers++;
	/* pipelined: the server answers what it has read in one write */
	len = 0;
	for (int i = 0; i < PIPELINED; i++)
		len += (size_t)snprintf(buf + len, sizeof req,
					"GET /c%d/p%d HTTP/1.1\r\nHost: %s\r\n%s\r\n", c->id, i,
					cl.host, i == PIPELINED - 1 ? "Connection: close\r\n" : "");
	if (send_all(c, t, buf, len, deadline) != 0)
		goto out;
	for (int i = 0; i < PIPELINED - 1; i++, c->answers++)
		if (expect(c, t, http_hello, hello, deadline) != 0)
			goto out;
	if (expect(c, t, http_hello_close, close_len, deadline) != 0)
		goto out;
	c->answers++;
	/* then the server's close_notify, and nothing else */
	if (tls_conn_read(t, buf, 1, deadline) != 0) {
		snprintf(c->err, sizeof c->err, "no close_notify after the last answer: %s",
			 t->err[0] ? t->err : "more data");
		goto out;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

static void client(void *arg)
{
	struct client *c = arg;
	int64_t deadline = weft_now() + CLIENT_NS;
	struct tls_conn t;
	int fd = dial(deadline);

	if (fd < 0) {
		snprintf(c->err, sizeof c->err, "connect: %s", strerror(errno));
		return;
	}
	if (tls_conn_init(&t, cl.ctx, fd, cl.host) != 0 ||
	    tls_conn_handshake(&t, deadline) != 0) {
		snprintf(c->err, sizeof c->err, "%s", t.err);
	} else if (converse(c, &t, deadline) == 0) {
		/* our close_notify: the server may have closed already (EPIPE) */
		tls_conn_shutdown(&t, deadline);
	}
	tls_conn_free(&t);
}

static void clients(void *unused)
{
	weft_co **co = calloc((size_t)cl.n, sizeof *co);

	(void)unused;
	for (int i = 0; co != NULL && i < cl.n; i++) {
		cl.clients[i].id = i;
		co[i] = weft_spawn(client, &cl.clients[i]);
		if (co[i] == NULL)
			snprintf(cl.clients[i].err, sizeof cl.clients[i].err, "spawn: %s",
				 strerror(errno));
	}
	for (int i = 0; co != NULL && i < cl.n; i++)
		if (co[i] != NULL)
			weft_join(co[i]);
	free(co);
}

static int client_main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG };
	char err[256];
	unsigned answers = 0;
	int failed = 0, rc;

	cl.host = argv[2];
	cl.n = atoi(argv[4]);
	if (cl.n <= 0 || cl.n > 100000) {
		fprintf(stderr, "weft-tls client: CLIENTS: 1..100000\n");
		return 2;
	}
	/* before the runtime starts: a blocking lookup is fine on this thread */
	rc = getaddrinfo(cl.host, argv[3], &hints, &cl.addrs);
	if (rc != 0) {
		fprintf(stderr, "weft-tls client: %s: %s\n", cl.host, gai_strerror(rc));
		return 1;
	}
	cl.ctx = tls_client_ctx(argc == 6 ? argv[5] : NULL, err, sizeof err);
	cl.clients = calloc((size_t)cl.n, sizeof *cl.clients);
	if (cl.ctx == NULL || cl.clients == NULL) {
		fprintf(stderr, "weft-tls client: %s\n", cl.ctx ? "out of memory" : err);
		return 1;
	}
	if (weft_main(clients, NULL, NULL) != 0) {
		fprintf(stderr, "weft-tls client: weft_main: %s\n", strerror(errno));
		return 1;
	}
	for (int i = 0; i < cl.n; i++) {
		answers += cl.clients[i].answers;
		if (cl.clients[i].err[0] != '\0' && failed++ < 10)
			fprintf(stderr, "weft-tls client %d: %s\n", i, cl.clients[i].err);
	}
	printf("weft-tls client: %d clients, %u answers checked, %d clients failed\n", cl.n,
	       answers, failed);
	free(cl.clients);
	freeaddrinfo(cl.addrs);
	SSL_CTX_free(cl.ctx);
	return failed ? 1 : 0;
}

/* ------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	char err[256];

	if (argc >= 5 && argc <= 6 && strcmp(argv[1], "server") == 0)
		return server(argc, argv);
	if (argc >= 5 && argc <= 6 && strcmp(argv[1], "client") == 0)
		return client_main(argc, argv);
	if (argc == 4 && strcmp(argv[1], "cert") == 0) {
		if (tls_make_cert(argv[2], argv[3], 1, err, sizeof err) == 0)
			return 0;
		fprintf(stderr, "weft-tls cert: %s\n", err);
		return 1;
	}
	fprintf(stderr, "usage: weft-tls server PORT CERT KEY [HANDSHAKE_MS]\n"
			"       weft-tls client HOST PORT CLIENTS [CAFILE]\n"
			"       weft-tls cert CERT KEY\n");
	return 2;
}
