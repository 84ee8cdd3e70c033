/* SPDX-License-Identifier: MIT */
/* The TLS helper of weft-tls (examples/weft_tls.c) over socket pairs: a
 * megabyte each way checked byte for byte, through WANT_WRITE and the
 * close_notify; each error as its errno, with OpenSSL's words (handshake
 * and read deadlines, cancellation, an EOF without close_notify, a peer
 * that does not speak TLS, an unknown CA, a wrong host name); and the
 * error-queue rule: a stale error in the thread's queue changes nothing. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include "weft_tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

static struct {
	char dir[32];
	SSL_CTX *server;	/* localhost's certificate */
	SSL_CTX *client;	/* verifies it */
	SSL_CTX *stranger;	/* verifies against another certificate */
} fx;

static void make_cert(const char *name)
{
	char cert[64], key[64], err[256];

	snprintf(cert, sizeof cert, "%s/%s.pem", fx.dir, name);
	snprintf(key, sizeof key, "%s/%s-key.pem", fx.dir, name);
	cr_assert_eq(tls_make_cert(cert, key, 1, err, sizeof err), 0, "%s", err);
}

/* Two certificates in a temporary directory, and the three contexts. */
static void setup(void)
{
	char cert[64], key[64], other[64], err[256];

	strcpy(fx.dir, "/tmp/weft-tls-XXXXXX");
	cr_assert_not_null(mkdtemp(fx.dir));
	make_cert("cert");
	make_cert("other");
	snprintf(cert, sizeof cert, "%s/cert.pem", fx.dir);
	snprintf(key, sizeof key, "%s/cert-key.pem", fx.dir);
	snprintf(other, sizeof other, "%s/other.pem", fx.dir);
	fx.server = tls_server_ctx(cert, key, err, sizeof err);
	cr_assert_not_null(fx.server, "%s", err);
	fx.client = tls_client_ctx(cert, err, sizeof err);
	cr_assert_not_null(fx.client, "%s", err);
	fx.stranger = tls_client_ctx(other, err, sizeof err);
	cr_assert_not_null(fx.stranger, "%s", err);
}

static void teardown(void)
{
	const char *files[] = { "cert.pem", "cert-key.pem", "other.pem", "other-key.pem" };
	char path[64];

	SSL_CTX_free(fx.server);
	SSL_CTX_free(fx.client);
	SSL_CTX_free(fx.stranger);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", fx.dir, files[i]);
		unlink(path);
	}
	rmdir(fx.dir);
}

/* Runs fn in a coroutine on 2 workers, between setup and teardown. */
static void with_certs(void (*fn)(void *))
{
	setup();
	run(2, fn, NULL);
	teardown();
}

/* A server end and a client end (of ctx, checking host) on a socket pair. */
struct pair {
	struct tls_conn s, c;
};

static void pair_open(struct pair *p, SSL_CTX *ctx, const char *host)
{
	int sv[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(tls_conn_init(&p->s, fx.server, sv[0], NULL) == 0);
	CHECK(tls_conn_init(&p->c, ctx, sv[1], host) == 0);
}

static void pair_close(struct pair *p)
{
	tls_conn_free(&p->s);
	tls_conn_free(&p->c);
}

/* The client's handshake, in a coroutine of its own: errno, or 0. */
struct side {
	struct tls_conn *t;
	int err;
};

static void client_handshake(void *arg)
{
	struct side *s = arg;

	s->err = tls_conn_handshake(s->t, weft_now() + 5000 * MS) == 0 ? 0 : errno;
}

/* Both handshakes at once; the server's errno (0 for success) in *server. */
static int handshake(struct pair *p, int *server)
{
	struct side c = { &p->c, -1 };
	weft_co *co = go(client_handshake, &c);

	*server = tls_conn_handshake(&p->s, weft_now() + 5000 * MS) == 0 ? 0 : errno;
	join(co);
	return c.err;
}

static void handshake_ok(struct pair *p)
{
	int server, client = handshake(p, &server);

	if (client != 0 || server != 0)
		fprintf(stderr, "client: %s\nserver: %s\n", p->c.err, p->s.err);
	CHECK(client == 0 && server == 0);
}

/* A pair with both handshakes done. */
static void pair_connect(struct pair *p, SSL_CTX *ctx, const char *host)
{
	pair_open(p, ctx, host);
	handshake_ok(p);
}

/* ------------------------------------------------------------ the bytes */

enum { MIB = 1 << 20 };

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + (i >> 8) * 13 + (i >> 16));
}

/* Writes a megabyte in one call (far more than the socket holds: the call
 * parks on WANT_WRITE), then its close_notify. */
static void write_mib(void *arg)
{
	struct tls_conn *t = arg;
	unsigned char *b = malloc(MIB);

	CHECK(b != NULL);
	for (size_t i = 0; i < MIB; i++)
		b[i] = pattern(i);
	CHECK(tls_conn_write(t, b, MIB, weft_now() + 30000 * MS) == MIB);
	CHECK(tls_conn_shutdown(t, weft_now() + 5000 * MS) == 0);
	free(b);
}

/* Reads a megabyte in odd-sized pieces, slowly at first, checking each
 * byte, then the close_notify. */
static void read_mib(struct tls_conn *t)
{
	unsigned char b[3001];
	size_t got = 0;

	while (got < MIB) {
		ssize_t n = tls_conn_read(t, b, sizeof b, weft_now() + 30000 * MS);
		if (n <= 0)
			fprintf(stderr, "after %zu bytes: %zd, %s\n", got, n, t->err);
		CHECK(n > 0);
		for (ssize_t i = 0; i < n; i++)
			CHECK(b[i] == pattern(got + (size_t)i));
		got += (size_t)n;
		if (got < MIB / 4)
			weft_sleep(weft_now() + MS / 10); /* the writer fills the socket */
	}
	CHECK(tls_conn_read(t, b, sizeof b, weft_now() + 5000 * MS) == 0);
}

static void a_megabyte_each_way(void *unused)
{
	struct pair p;
	(void)unused;

	pair_connect(&p, fx.client, "localhost");
	weft_co *w = go(write_mib, &p.c);
	read_mib(&p.s);
	join(w);
	pair_close(&p);

	pair_connect(&p, fx.client, "127.0.0.1"); /* an IP address SAN */
	w = go(write_mib, &p.s);
	read_mib(&p.c);
	join(w);
	pair_close(&p);
}

Test(tls, a_megabyte_each_way_byte_exact_then_the_close_notify, .timeout = 300)
{
	with_certs(a_megabyte_each_way);
}

/* ------------------------------------------------------------ deadlines */

static void handshake_expires(void *unused)
{
	struct pair p;
	(void)unused;

	pair_open(&p, fx.client, "localhost");
	int64_t t0 = weft_now();
	errno = 0;
	CHECK(tls_conn_handshake(&p.s, t0 + 100 * MS) == -1); /* the client never speaks */
	CHECK(errno == ETIMEDOUT);
	CHECK(weft_now() - t0 >= 100 * MS);
	CHECK(strcmp(p.s.err, "handshake: Connection timed out") == 0);
	pair_close(&p);
}

Test(tls, the_handshake_expires_against_a_silent_peer)
{
	with_certs(handshake_expires);
}

/* Writes "hello" in 20 ms. */
static void write_hello_later(void *arg)
{
	weft_sleep(weft_now() + 20 * MS);
	CHECK(tls_conn_write(arg, "hello", 5, -1) == 5);
}

static void read_expires(void *unused)
{
	struct pair p;
	char b[8];
	(void)unused;

	pair_connect(&p, fx.client, "localhost");
	errno = 0;
	CHECK(tls_conn_read(&p.s, b, sizeof b, weft_now() + 50 * MS) == -1);
	CHECK(errno == ETIMEDOUT);
	/* a deadline breaks nothing: the connection goes on */
	weft_co *w = go(write_hello_later, &p.c);
	CHECK(tls_conn_read(&p.s, b, sizeof b, weft_now() + 5000 * MS) == 5);
	CHECK(memcmp(b, "hello", 5) == 0);
	join(w);
	CHECK(tls_conn_shutdown(&p.s, weft_now() + 5000 * MS) == 0);
	pair_close(&p);
}

Test(tls, a_read_expires_and_the_connection_goes_on)
{
	with_certs(read_expires);
}

/* ----------------------------------------------------------- the errors */

static void server_handshake_forever(void *arg)
{
	struct side *s = arg;

	s->err = tls_conn_handshake(s->t, -1) == 0 ? 0 : errno;
}

static void handshake_cancelled(void *unused)
{
	struct pair p;
	(void)unused;

	pair_open(&p, fx.client, "localhost");
	struct side s = { &p.s, -1 };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(server_handshake_forever, &s);
	wait_parks(parks, 1);	/* waiting for the client's hello */
	CHECK(weft_cancel(co) == 0);
	join(co);
	CHECK(s.err == ECANCELED);
	pair_close(&p);
}

Test(tls, a_parked_handshake_is_cancelled)
{
	with_certs(handshake_cancelled);
}

static void eof_without_close_notify(void *unused)
{
	struct pair p;
	char b[8];
	(void)unused;

	/* after the handshake */
	pair_connect(&p, fx.client, "localhost");
	tls_conn_free(&p.c); /* no close_notify */
	errno = 0;
	CHECK(tls_conn_read(&p.s, b, sizeof b, weft_now() + 5000 * MS) == -1);
	CHECK(errno == ECONNRESET);
	errno = 0;
	CHECK(tls_conn_shutdown(&p.s, weft_now() + 5000 * MS) == -1); /* not after that */
	CHECK(errno == ENOTCONN);
	tls_conn_free(&p.s);

	/* during it */
	pair_open(&p, fx.client, "localhost");
	tls_conn_free(&p.c);
	errno = 0;
	CHECK(tls_conn_handshake(&p.s, weft_now() + 5000 * MS) == -1);
	CHECK(errno == ECONNRESET);
	tls_conn_free(&p.s);
}

Test(tls, an_eof_without_close_notify_is_econnreset)
{
	with_certs(eof_without_close_notify);
}

static void not_tls(void *unused)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
	int sv[2];
	struct tls_conn s;
	(void)unused;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(tls_conn_init(&s, fx.server, sv[0], NULL) == 0);
	CHECK(weft_write(sv[1], req, sizeof req - 1, -1) == sizeof req - 1);
	errno = 0;
	CHECK(tls_conn_handshake(&s, weft_now() + 5000 * MS) == -1);
	CHECK(errno == EPROTO);
	CHECK(strstr(s.err, "handshake: error:") == s.err); /* OpenSSL's words */
	CHECK(strstr(s.err, "SSL routines") != NULL);
	tls_conn_free(&s);
	weft_close(sv[1]);
}

Test(tls, a_peer_that_does_not_speak_tls_is_eproto_in_openssl_words)
{
	with_certs(not_tls);
}

static void verify_fails(SSL_CTX *ctx, const char *host, const char *why)
{
	struct pair p;
	int server, client;

	pair_open(&p, ctx, host);
	client = handshake(&p, &server);
	CHECK(client == EPROTO);
	if (strstr(p.c.err, why) == NULL)
		fprintf(stderr, "client: %s\n", p.c.err);
	CHECK(strstr(p.c.err, "certificate verify failed") != NULL);
	CHECK(strstr(p.c.err, why) != NULL);
	CHECK(server == EPROTO); /* the client's alert */
	pair_close(&p);
}

static void unknown_ca_and_wrong_name(void *unused)
{
	(void)unused;
	verify_fails(fx.stranger, "localhost", "self-signed certificate");
	verify_fails(fx.client, "example.org", "hostname mismatch");
}

Test(tls, an_unknown_ca_or_a_wrong_name_is_eproto_and_says_why)
{
	with_certs(unknown_ca_and_wrong_name);
}

/* --------------------------------------------------- the error queue rule */

/* OpenSSL's SSL_get_error reports SSL_ERROR_SSL whenever the thread's queue
 * holds an error, whoever left it: after a migration, a worker's queue may
 * hold another coroutine's.  Each call clears it first. */
static void stale_error(void *unused)
{
	struct pair p;
	char b[8];
	(void)unused;

	pair_connect(&p, fx.client, "localhost");
	weft_co *w = go(write_hello_later, &p.c);
	ERR_raise(ERR_LIB_SSL, SSL_R_BAD_LENGTH); /* someone else's, left over */
	CHECK(tls_conn_read(&p.s, b, sizeof b, weft_now() + 5000 * MS) == 5); /* parks first */
	CHECK(memcmp(b, "hello", 5) == 0);
	join(w);
	pair_close(&p);
}

Test(tls, a_stale_error_in_the_threads_queue_changes_nothing)
{
	with_certs(stale_error);
}
