/* SPDX-License-Identifier: MIT */
/*
 * resolve.c — getaddrinfo, gethostbyname and gethostbyname_r in a
 * coroutine: the real function runs on weft's offload pool (a helper
 * thread) while the coroutine parks.  gethostbyname's result lives in a
 * buffer of the calling coroutine's (a weft_key, freed when it finishes),
 * valid until its next gethostbyname, wherever it resumes; a plain
 * thread's call is the real one, with glibc's static storage.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "hook.h"

/* ---------------------------------------------------------- getaddrinfo */

struct gai {
	const char *node, *service;
	const struct addrinfo *hints;
	struct addrinfo *res;
	int result;
	int err;
};

static void gai_run(void *arg)
{
	struct gai *g = arg;
	g->result = REAL(getaddrinfo)(g->node, g->service, g->hints, &g->res);
	g->err = errno;
}

HOOK_EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
			    struct addrinfo **res)
{
	if (weft__hook_mode() != HOOK_CORO)
		return REAL(getaddrinfo)(node, service, hints, res);
	struct gai g = { .node = node, .service = service, .hints = hints };
	if (weft__hook_offload(gai_run, &g) != 0) {
		if (g.result == 0 && g.res)
			freeaddrinfo(g.res);
		return EAI_SYSTEM;	/* errno: ECANCELED, ENOMEM */
	}
	if (g.result == 0)
		*res = g.res;
	errno = g.err;
	return g.result;
}

/* ------------------------------------------------------- gethostbyname */

struct ghbn {
	const char *name;
	struct hostent *ret;
	char *buf;
	size_t buflen;
	struct hostent *result;
	int h_err;
	int r;
};

static void ghbn_run(void *arg)
{
	struct ghbn *g = arg;
	g->r = REAL(gethostbyname_r)(g->name, g->ret, g->buf, g->buflen, &g->result, &g->h_err);
}

HOOK_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
				struct hostent **result, int *h_errnop)
{
	if (weft__hook_mode() != HOOK_CORO)
		return REAL(gethostbyname_r)(name, ret, buf, buflen, result, h_errnop);
	struct ghbn g = { .name = name, .ret = ret, .buf = buf, .buflen = buflen };
	if (weft__hook_offload(ghbn_run, &g) != 0) {
		*result = NULL;
		*h_errnop = NETDB_INTERNAL;
		return errno;
	}
	*result = g.result;
	*h_errnop = g.h_err;
	return g.r;
}

/* A coroutine's gethostbyname storage. */
struct host_buf {
	struct hostent ent;
	size_t len;
	char buf[];
};

static weft_key *host_key;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void make_host_key(void)
{
	host_key = weft_key_new(free);
}

/* The coroutine's buffer, with room for at least len bytes, or NULL. */
static struct host_buf *host_buf(size_t len)
{
	pthread_once(&host_once, make_host_key);
	struct host_buf *b = weft_local_get(host_key);
	if (b && b->len >= len)
		return b;
	struct host_buf *nb = malloc(sizeof *nb + len);
	if (!nb || weft_local_set(host_key, nb) != 0) {
		free(nb);
		return NULL;
	}
	free(b);
	nb->len = len;
	return nb;
}

HOOK_EXPORT struct hostent *gethostbyname(const char *name)
{
	if (weft__hook_mode() != HOOK_CORO)
		return REAL(gethostbyname)(name);
	struct hostent *result = NULL;
	int herr = NETDB_INTERNAL, r = ERANGE;
	for (size_t len = 1024; r == ERANGE && len <= (1u << 20); len *= 4) {
		struct host_buf *b = host_buf(len);
		if (!b)
			break;
		r = gethostbyname_r(name, &b->ent, b->buf, b->len, &result, &herr);
	}
	h_errno = result ? 0 : herr;
	return result;
}
