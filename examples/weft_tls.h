/* SPDX-License-Identifier: MIT */
/*
 * weft_tls.h — TLS over weft's I/O with OpenSSL: a non-blocking SSL object
 * on a socket weft owns, whose SSL_ERROR_WANT_READ / WANT_WRITE park the
 * coroutine in weft_wait(fd, WEFT_IN / WEFT_OUT, deadline) and then call
 * OpenSSL again.  Used by weft-tls (tls.c); docs/embedding.md explains the
 * pattern, which fits any library that does its own socket I/O.
 *
 * Every call takes an absolute deadline (weft_now() nanoseconds, -1 none) and
 * fails with -1/errno in weft's style; OpenSSL's own words for the failure
 * are kept in the connection's err[] for a human to read.  The errnos:
 *
 *   ETIMEDOUT, ECANCELED, EBADF, ...  from the weft_wait that parked the call
 *   ECONNRESET, EPIPE, ...            the socket's own error (SSL_ERROR_SYSCALL)
 *   ECONNRESET                        the peer closed without a close_notify
 *                                     (or sent one in the middle of a handshake)
 *   EPROTO                            a TLS protocol error, a failed
 *                                     certificate verification (SSL_ERROR_SSL)
 *   ENOMEM                            OpenSSL could not allocate
 *   EIO                               anything else OpenSSL reports
 *
 * The trap: OpenSSL keeps its error queue per thread, and a coroutine may
 * resume on another worker thread after any weft call that suspends.  So
 * every SSL_* call here is preceded by ERR_clear_error() and followed at once
 * (before any weft call) by SSL_get_error() and the reading of the queue: an
 * error read after a weft_wait would be another thread's, or nothing.
 */
#ifndef WEFT_EXAMPLE_TLS_H
#define WEFT_EXAMPLE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

struct tls_conn {
	SSL *ssl;
	int fd; /* non-blocking; weft_close'd by tls_conn_free */
	bool broken; /* a fatal error: no close_notify may follow (OpenSSL's rule) */
	char err[256]; /* the last failure, in words (OpenSSL's when it has them) */
};

/* A server context with the certificate chain and private key of these PEM
 * files (TLS 1.2 or later).  NULL on failure, with err filled in. */
SSL_CTX *tls_server_ctx(const char *cert_file, const char *key_file, char *err, size_t errlen);

/* A client context that verifies servers against the CA certificates of
 * ca_file (PEM; a self-signed server certificate is its own CA), or, with
 * ca_file NULL, verifies nothing (for tests only).  NULL on failure. */
SSL_CTX *tls_client_ctx(const char *ca_file, char *err, size_t errlen);

/*
 * Writes a self-signed certificate for "localhost" and 127.0.0.1 (an EC
 * P-256 key, valid for days days from now) and its private key, both PEM,
 * the key readable by the owner only.  0, or -1 with err filled in.
 */
int tls_make_cert(const char *cert_file, const char *key_file, int days, char *err,
		  size_t errlen);

/*
 * Sets t up for the socket fd (connected, non-blocking, owned by t from now:
 * tls_conn_free weft_close's it, even when this fails).  host NULL makes
 * a server end; else a client end that sends host as SNI and, if ctx
 * verifies, checks that the certificate names host (a DNS name or an IP
 * address).  0, or -1/ENOMEM/EINVAL.
 */
int tls_conn_init(struct tls_conn *t, SSL_CTX *ctx, int fd, const char *host);

/* The handshake, as a server or client as t was set up.  0, or -1/errno. */
int tls_conn_handshake(struct tls_conn *t, int64_t deadline);

/* Like weft_read: at least one byte of decrypted data, 0 when the peer sent
 * its close_notify, or -1/errno. */
ssize_t tls_conn_read(struct tls_conn *t, void *buf, size_t len, int64_t deadline);

/* Like weft_write: writes all len bytes and returns len, or -1/errno (a
 * prefix may have gone out). */
ssize_t tls_conn_write(struct tls_conn *t, const void *buf, size_t len, int64_t deadline);

/*
 * Sends our close_notify (waiting for room in the socket until deadline);
 * does not wait for the peer's, as RFC 8446 (6.1) allows when the connection
 * is closed next.  0, or -1/errno; -1/ENOTCONN after a fatal error, when
 * there must be no close_notify.
 */
int tls_conn_shutdown(struct tls_conn *t, int64_t deadline);

/* Frees the SSL object and weft_close's the socket. */
void tls_conn_free(struct tls_conn *t);

#endif
