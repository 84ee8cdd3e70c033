/* SPDX-License-Identifier: MIT */
/*
 * weft_tls.c — TLS over weft's I/O with OpenSSL (see weft_tls.h).
 */
#define WEFT_ERRNO_GUARD /* errno is read after calls that suspend */
#include <weft.h>

#include "weft_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

/* --------------------------------------------------- setup (plain threads) */

/* OpenSSL's first queued error in words (else "what failed"); empties the
 * queue.  The setup calls run on one thread, so the queue is theirs. */
static void ssl_words(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	char words[200];

	if (e == 0)
		snprintf(err, errlen, "%s failed", what);
	else {
		ERR_error_string_n(e, words, sizeof words);
		snprintf(err, errlen, "%s: %s", what, words);
	}
	ERR_clear_error();
}

SSL_CTX *tls_server_ctx(const char *cert_file, const char *key_file, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (ctx == NULL) {
		ssl_words(err, errlen, "SSL_CTX_new");
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
		ssl_words(err, errlen, cert_file);
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		ssl_words(err, errlen, key_file);
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* one read(2) takes what has arrived, not a record's 5-byte header
	 * and then its body: a read less per request (Go's crypto/tls reads
	 * ahead too) */
	SSL_CTX_set_read_ahead(ctx, 1);
	return ctx;
}

SSL_CTX *tls_client_ctx(const char *ca_file, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx == NULL) {
		ssl_words(err, errlen, "SSL_CTX_new");
		return NULL;
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    (ca_file != NULL && SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1)) {
		ssl_words(err, errlen, ca_file ? ca_file : "SSL_CTX_set_min_proto_version");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, ca_file ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	return ctx;
}

static int add_ext(X509 *x, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (ext == NULL)
		return 0;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok;
}

static X509 *self_signed(EVP_PKEY *key, int days)
{
	X509 *x = X509_new();
	X509_NAME *name = x ? X509_get_subject_name(x) : NULL;

	if (x == NULL || X509_set_version(x, 2) != 1 || /* 2 is v3 */
	    ASN1_INTEGER_set(X509_get_serialNumber(x), (long)time(NULL)) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -60) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(x), 86400L * days) == NULL ||
	    X509_set_pubkey(x, key) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
				       (const unsigned char *)"localhost", -1, -1, 0) != 1 ||
	    X509_set_issuer_name(x, name) != 1 ||
	    add_ext(x, NID_basic_constraints, "critical,CA:TRUE") != 1 ||
	    add_ext(x, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") != 1 ||
	    X509_sign(x, key, EVP_sha256()) == 0) {
		X509_free(x);
		return NULL;
	}
	return x;
}

/* fopen(path, "w") with the file's mode mode if it is created. */
static FILE *create(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	if (f == NULL && fd >= 0)
		close(fd);
	return f;
}

static int write_pem(const char *path, mode_t mode, X509 *x, EVP_PKEY *key, char *err,
		     size_t errlen)
{
	FILE *f = create(path, mode);
	int ok;

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	ok = x ? PEM_write_X509(f, x) : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	if (fclose(f) != 0 || ok != 1) {
		ssl_words(err, errlen, path);
		return -1;
	}
	return 0;
}

int tls_make_cert(const char *cert_file, const char *key_file, int days, char *err,
		  size_t errlen)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = key ? self_signed(key, days) : NULL;
	int rc = -1;

	if (x == NULL)
		ssl_words(err, errlen, "a self-signed certificate");
	else if (write_pem(key_file, 0600, NULL, key, err, errlen) == 0 &&
		 write_pem(cert_file, 0644, x, NULL, err, errlen) == 0)
		rc = 0;
	X509_free(x);
	EVP_PKEY_free(key);
	return rc;
}

/* ------------------------------------------------ connections (coroutines) */

int tls_conn_init(struct tls_conn *t, SSL_CTX *ctx, int fd, const char *host)
{
	unsigned char addr[16];
	bool ip = host && (inet_pton(AF_INET, host, addr) == 1 ||
			   inet_pton(AF_INET6, host, addr) == 1);

	*t = (struct tls_conn){ .fd = fd };
	ERR_clear_error();
	t->ssl = SSL_new(ctx);
	if (t->ssl == NULL || SSL_set_fd(t->ssl, fd) != 1) {
		ssl_words(t->err, sizeof t->err, "SSL_new");
		errno = ENOMEM;
		return -1;
	}
	if (host == NULL) {
		SSL_set_accept_state(t->ssl);
		return 0;
	}
	SSL_set_connect_state(t->ssl);
	/* SNI takes names only; the certificate check takes either */
	if ((!ip && SSL_set_tlsext_host_name(t->ssl, host) != 1) ||
	    ((SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER) &&
	     (ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host)
		 : SSL_set1_host(t->ssl, host)) != 1)) {
		ssl_words(t->err, sizeof t->err, host);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* Fills t->err and returns -1 with errno e. */
static int fail(struct tls_conn *t, int e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->err, sizeof t->err, fmt, ap);
	va_end(ap);
	errno = e;
	return -1;
}

/* An SSL_ERROR_SSL, from the queue of the thread that made the call. */
static int protocol_error(struct tls_conn *t, const char *what)
{
	unsigned long e = ERR_get_error();
	long verify = SSL_get_verify_result(t->ssl);
	char words[160];
	int err = EPROTO;

	ERR_error_string_n(e, words, sizeof words);
	ERR_clear_error();
	if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
		err = ECONNRESET; /* closed without a close_notify */
	else if (ERR_GET_REASON(e) == ERR_R_MALLOC_FAILURE)
		err = ENOMEM;
	if (verify != X509_V_OK)
		return fail(t, err, "%s: %s (%s)", what, words,
			    X509_verify_cert_error_string(verify));
	return fail(t, err, "%s: %s", what, words);
}

enum op { HANDSHAKE, READ, WRITE, SHUTDOWN };
static const char *const op_name[] = { "handshake", "read", "write", "shutdown" };

/* One attempt: > 0 done, else what SSL_get_error needs. */
static int attempt(struct tls_conn *t, enum op op, void *buf, size_t len, size_t *done)
{
	switch (op) {
	case HANDSHAKE:
		return SSL_do_handshake(t->ssl);
	case READ:
		return SSL_read_ex(t->ssl, buf, len, done);
	case WRITE: /* all of len, or a retry with the same arguments */
		return SSL_write_ex(t->ssl, buf, len, done);
	case SHUTDOWN: /* 0: ours sent, the peer's not seen: done too */
		return SSL_shutdown(t->ssl) >= 0 ? 1 : -1;
	}
	return -1;
}

/*
 * Runs op to its end, parking in weft_wait for the direction OpenSSL wants:
 * 1 done, 0 at the peer's close_notify, -1/errno.  Between ERR_clear_error
 * and the reading of the queue nothing may suspend (see weft_tls.h): this
 * thread's queue is the one the attempt filled.
 */
static int run(struct tls_conn *t, enum op op, void *buf, size_t len, size_t *done,
	       int64_t deadline)
{
	/* OpenSSL's socket calls are not weft's: a reader whose peer keeps it
	 * busy spends the coroutine's budget here, as weft_read would */
	weft_consume_budget();
	for (;;) {
		int ret, sys, e;

		ERR_clear_error();
		errno = 0;
		ret = attempt(t, op, buf, len, done);
		sys = errno;
		if (ret > 0)
			return 1;
		e = SSL_get_error(t->ssl, ret);
		switch (e) {
		case SSL_ERROR_WANT_READ:
		case SSL_ERROR_WANT_WRITE:
			ERR_clear_error(); /* nothing left in it to read later */
			/* OpenSSL asks after its read or write said EAGAIN:
			 * no poll(2) first; a spurious wake only retries */
			if (weft_wait(t->fd, (e == SSL_ERROR_WANT_READ ? WEFT_IN : WEFT_OUT) |
						     WEFT_AFTER_EAGAIN,
				      deadline) < 0)
				return fail(t, errno, "%s: %s", op_name[op], strerror(errno));
			continue; /* perhaps on another thread now */
		case SSL_ERROR_ZERO_RETURN:
			return 0;
		case SSL_ERROR_SYSCALL:
			t->broken = true;
			ERR_clear_error();
			if (sys == 0 || sys == EAGAIN) /* an EOF the protocol did not expect */
				return fail(t, ECONNRESET, "%s: the peer closed the connection",
					    op_name[op]);
			return fail(t, sys, "%s: %s", op_name[op], strerror(sys));
		case SSL_ERROR_SSL:
			t->broken = true;
			return protocol_error(t, op_name[op]);
		default:
			t->broken = true;
			ERR_clear_error();
			return fail(t, EIO, "%s: SSL error %d", op_name[op], e);
		}
	}
}

int tls_conn_handshake(struct tls_conn *t, int64_t deadline)
{
	int r = run(t, HANDSHAKE, NULL, 0, NULL, deadline);

	if (r == 0) {
		t->broken = true;
		return fail(t, ECONNRESET, "handshake: the peer closed the connection");
	}
	return r < 0 ? -1 : 0;
}

ssize_t tls_conn_read(struct tls_conn *t, void *buf, size_t len, int64_t deadline)
{
	size_t n = 0;
	int r;

	if (len == 0)
		return 0;
	r = run(t, READ, buf, len, &n, deadline);
	return r < 0 ? -1 : r == 0 ? 0 : (ssize_t)n;
}

ssize_t tls_conn_write(struct tls_conn *t, const void *buf, size_t len, int64_t deadline)
{
	size_t n = 0;
	int r;

	if (len == 0)
		return 0;
	r = run(t, WRITE, (void *)buf, len, &n, deadline);
	if (r == 0)
		return fail(t, EPIPE, "write: the peer has closed the connection");
	return r < 0 ? -1 : (ssize_t)n;
}

int tls_conn_shutdown(struct tls_conn *t, int64_t deadline)
{
	if (t->broken)
		return fail(t, ENOTCONN, "shutdown: the connection failed before");
	return run(t, SHUTDOWN, NULL, 0, NULL, deadline) < 0 ? -1 : 0;
}

void tls_conn_free(struct tls_conn *t)
{
	SSL_free(t->ssl); /* the socket BIO does not close fd */
	t->ssl = NULL;
	if (t->fd >= 0)
		weft_close(t->fd);
	t->fd = -1;
}
