/* SPDX-License-Identifier: MIT */
/*
 * hiredis's synchronous API in coroutines against a real redis-server (the
 * test starts it on a free loopback port, without persistence, in a
 * throwaway directory): 1,000 coroutines on the test's workers each open a
 * connection and do 100 SET/GET pairs, every reply checked, beside the
 * ticker of real.c.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "real.h"

#if defined(WEFT_TEST_ASAN) || defined(WEFT_TEST_TSAN)
enum { CLIENTS = 200, PAIRS = 100 };
#else
enum { CLIENTS = 1000, PAIRS = 100 };
#endif

static int start(struct real_env *env)
{
	char port[16], dir[80];
	char *argv[] = { "/usr/bin/redis-server", "--port", port, "--bind", "127.0.0.1",
			 "--save", "", "--appendonly", "no", "--dir", dir,
			 "--tcp-backlog", "1024", "--maxclients", "4000", NULL };

	snprintf(port, sizeof port, "%d", env->port);
	snprintf(dir, sizeof dir, "%s", env->dir);
	return real_spawn(env, argv, false);
}

/* One command; its reply must be `want` (a status or a bulk string). */
static int command(redisContext *c, const char *want, const char *fmt, const char *key,
		   const char *val)
{
	redisReply *r = val ? redisCommand(c, fmt, key, val) : redisCommand(c, fmt, key);
	int ok = r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING) &&
		 r->len == strlen(want) && memcmp(r->str, want, r->len) == 0;

	if (!ok)
		fprintf(stderr, "redis: %s %s: %s\n", fmt, key,
			r ? (r->str ? r->str : "(no string)") : c->errstr);
	freeReplyObject(r);
	return ok ? 0 : -1;
}

static int session(struct real_env *env, unsigned client)
{
	redisContext *c = redisConnect("127.0.0.1", env->port);
	char key[32], val[32];
	int rc = 0;

	if (!c || c->err) {
		fprintf(stderr, "redis: connect: %s\n", c ? c->errstr : "out of memory");
		redisFree(c);
		return -1;
	}
	for (unsigned i = 0; i < PAIRS && rc == 0; i++) {
		snprintf(key, sizeof key, "k:%u:%u", client, i);
		snprintf(val, sizeof val, "v:%u:%u", i, client);
		rc = command(c, "OK", "SET %s %s", key, val);
		if (rc == 0)
			rc = command(c, val, "GET %s", key, NULL);
	}
	redisFree(c);
	return rc;
}

int main(int argc, char **argv)
{
	static const char *const needs[] = { "/usr/bin/redis-server", NULL };
	static const struct real_test t = {
		.name = "redis", .start = start, .stop_signal = SIGTERM, .session = session,
		.clients = CLIENTS,
	};

	return real_main(&t, needs, argc, argv, NULL);
}
