/* SPDX-License-Identifier: MIT */
/*
 * http_metrics.c — GET /metrics and load shedding for weft-http (see
 * http_metrics.h).
 */
#include "http_metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft.h>

static const char shed_answer[] =
	"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\n"
	"Connection: close\r\n\r\n";

/* $WEFT_HTTP_SHED_MS in ns, read once; 0: never shed. */
static int64_t shed_target(void)
{
	/* first reads on several workers may race: each computes the same
	 * value, stored and loaded atomically (relaxed: no other data) */
	static _Atomic int64_t target = -1;
	int64_t t = atomic_load_explicit(&target, memory_order_relaxed);
	if (t < 0) {
		const char *s = getenv("WEFT_HTTP_SHED_MS");
		t = s ? strtoll(s, NULL, 10) * 1000000 : 0;
		if (t < 0)
			t = 0;
		atomic_store_explicit(&target, t, memory_order_relaxed);
	}
	return t;
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = weft_write(fd, p, n, -1);
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* The stats page: a header, then weft_stats_prometheus's text, with the
 * per-worker series. */
static void serve_metrics(int fd)
{
	unsigned n = weft_worker_count();
	weft_worker_sched *per = calloc(n, sizeof *per);
	weft_stats st = { .size = sizeof st, .per_worker_sched = per, .per_worker_len = per ? n : 0 };
	if (weft_stats_get(&st) != 0) {
		free(per);
		return;
	}
	size_t len = weft_stats_prometheus(&st, NULL, 0);
	char *body = malloc(len + 1);
	if (!body) {
		free(per);
		return;
	}
	weft_stats_prometheus(&st, body, len + 1);
	char head[160];
	int h = snprintf(head, sizeof head,
			 "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n", len);
	if (write_all(fd, head, (size_t)h))
		write_all(fd, body, len);
	free(body);
	free(per);
}

/* True when c->in holds a whole request head that asks for GET /metrics. */
static bool is_metrics(const struct http_conn *c)
{
	static const char get[] = "GET /metrics";
	size_t n = sizeof get - 1;
	if (c->in_len <= n || memcmp(c->in, get, n) != 0 ||
	    (c->in[n] != ' ' && c->in[n] != '?'))
		return false;
	for (size_t i = n; i + 3 < c->in_len; i++)
		if (memcmp(c->in + i, "\r\n\r\n", 4) == 0)
			return true;
	return false;
}

bool http_metrics_route(int fd, struct http_conn *c)
{
	if (is_metrics(c)) {
		serve_metrics(fd);
		return true;
	}
	int64_t target = shed_target();
	if (!target || weft_sched_delay() <= target)
		return false;
	write_all(fd, shed_answer, sizeof shed_answer - 1);
	return true;
}
