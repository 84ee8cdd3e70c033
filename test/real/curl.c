/* SPDX-License-Identifier: MIT */
/*
 * libcurl's easy API (curl_easy_perform, blocking) in coroutines against
 * weft's own HTTP example (examples/http.c, weft-http, started on a free
 * loopback port): 200 concurrent coroutines each fetch 200 responses on one
 * keep-alive connection, every status and body checked, beside the ticker
 * of real.c.
 *   test_real_curl [--unhooked]      (weft-http: $WEFT_REAL_HTTP)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "real.h"

#if defined(WEFT_TEST_ASAN) || defined(WEFT_TEST_TSAN)
enum { CLIENTS = 200, REQUESTS = 100 };
#else
enum { CLIENTS = 200, REQUESTS = 200 };
#endif

static const char BODY[] = "Hello, World!";

static int start(struct real_env *env)
{
	char port[16];
	char *argv[] = { env->data, port, NULL };

	snprintf(port, sizeof port, "%d", env->port);
	return real_spawn(env, argv, false);
}

struct body {
	char buf[64];
	size_t len;
	bool overflow;
};

static size_t append(char *data, size_t size, size_t n, void *arg)
{
	struct body *b = arg;

	n *= size;
	if (n > sizeof b->buf - b->len) {
		b->overflow = true;
		return n;
	}
	memcpy(b->buf + b->len, data, n);
	b->len += n;
	return n;
}

/* One GET: status 200 and the example's body. */
static int fetch(CURL *c, const char *url)
{
	struct body b = { .len = 0 };
	long status = 0;
	CURLcode rc;

	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc == CURLE_OK && status == 200 && !b.overflow && b.len == sizeof BODY - 1 &&
	    memcmp(b.buf, BODY, b.len) == 0)
		return 0;
	fprintf(stderr, "curl: GET %s: %s, status %ld, %zu bytes%s\n", url,
		curl_easy_strerror(rc), status, b.len, b.overflow ? " and more" : "");
	return -1;
}

static int session(struct real_env *env, unsigned client)
{
	CURL *c = curl_easy_init();
	char url[64];
	int rc = 0;

	if (!c)
		return -1;
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
	for (unsigned i = 0; i < REQUESTS && rc == 0; i++) {
		snprintf(url, sizeof url, "http://127.0.0.1:%d/%u/%u", env->port, client, i);
		rc = fetch(c, url);
	}
	curl_easy_cleanup(c);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct real_test t = {
		.name = "curl", .start = start, .stop_signal = SIGTERM, .session = session,
		.clients = CLIENTS, .stack_size = 256 << 10,
	};
	char *http = getenv("WEFT_REAL_HTTP");

	if (!http || !*http)
		real_skip(t.name, "no weft-http to fetch from (WEFT_REAL_HTTP unset: built with "
			  "-Dexamples=false?)");
	const char *const needs[] = { http, NULL };
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		fprintf(stderr, "curl_global_init failed\n");
		return 1;
	}
	int rc = real_main(&t, needs, argc, argv, http);
	curl_global_cleanup();
	return rc;
}
