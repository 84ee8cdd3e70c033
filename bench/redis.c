/* SPDX-License-Identifier: MIT */
/*
 * redis-bench — hiredis clients against one redis-server, three ways, with
 * the same request code (issue 24's benchmark):
 *
 *   hooks    the synchronous API (redisConnect, redisCommand), one weft
 *            coroutine per connection; libweft-hook turns its blocking
 *            reads and writes into parks.  Built (as redis-bench-hooks,
 *            linked with the hook library) only where meson has
 *            weft_hook_dep; redis-bench answers this mode with exit 2.
 *   threads  the same synchronous code, one pthread (default attributes)
 *            per connection.
 *   async    hiredis's async API, every connection on one libevent loop in
 *            the main thread.
 *
 *   redis-bench MODE CLIENTS PORT RUN_S WARM_S [WORKERS]
 *
 * Each client opens one connection to 127.0.0.1:PORT and does SET k v,
 * GET k pairs, one request at a time, each reply checked (GET must return
 * the v just set: the keys are per client).  The clients start together;
 * after WARM_S seconds (connecting, warming up) the window opens, RUN_S
 * seconds later it closes and every client stops after its current
 * request.  Requests (SETs and GETs) that completed inside the window count.
 * WORKERS: the weft workers of hooks (default 1); the other modes only name
 * it in the RESULT line (the runner pins all of them to the same CPU).
 *
 * One line on stdout, as the other bench programs (scripts/bench.py):
 *
 *   RESULT name=redis-1000 impl=hooks workers=1 ns=5000000000 ops=612345
 *          value=122469 check=ok rss_kb=23456 conns=1000 errors=0
 *
 * value is requests per second; rss_kb the peak resident set of the whole
 * process (VmHWM, see peak_rss.h); check=fail (exit status 1) when a
 * client could not connect, lost its connection, or got a wrong reply.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "peak_rss.h"

#define BENCH_PROG "redis-bench"
#include "util.h"

#ifdef REDIS_BENCH_HOOKS
#include <weft.h>
#endif

#define HOST "127.0.0.1"
#define KEYS_PER_CLIENT 16 /* a client's keys: k:ID:0 .. k:ID:15 */
#define MAX_CLIENTS 100000

enum phase { WARM, MEASURE, STOP };

static const char SET_FMT[] = "SET %b %b";
static const char GET_FMT[] = "GET %b";

static struct {
	int port;
	int nclients;
	double run_s, warm_s;
	unsigned workers;
	atomic_int phase;
	atomic_int connected;
	int64_t ns; /* the window's length */
} g;

struct client {
	int id;
	uint64_t seq; /* the pair being done */
	int64_t done; /* requests completed inside the window */
	int64_t errors;
	char key[32], val[48];
	size_t klen, vlen;
	redisAsyncContext *ac; /* async only */
};

static enum phase phase_now(void)
{
	return (enum phase)atomic_load_explicit(&g.phase, memory_order_relaxed);
}

/* ------------------------------------------------- the request code */

/* The key and value of the client's next pair. */
static void next_pair(struct client *cl)
{
	cl->klen = (size_t)snprintf(cl->key, sizeof cl->key, "k:%d:%u", cl->id,
				    (unsigned)(cl->seq % KEYS_PER_CLIENT));
	cl->vlen = (size_t)snprintf(cl->val, sizeof cl->val, "v:%d:%" PRIu64,
				    cl->id, cl->seq);
}

static bool set_ok(const redisReply *r)
{
	return r != NULL && r->type == REDIS_REPLY_STATUS &&
	       strcmp(r->str, "OK") == 0;
}

static bool get_ok(const struct client *cl, const redisReply *r)
{
	return r != NULL && r->type == REDIS_REPLY_STRING &&
	       (size_t)r->len == cl->vlen &&
	       memcmp(r->str, cl->val, cl->vlen) == 0;
}

/* A completed request: counted when inside the window, an error if wrong. */
static void count(struct client *cl, bool ok)
{
	if (phase_now() == MEASURE)
		cl->done++;
	cl->errors += !ok;
}

/* ----------------------------------- synchronous: hooks and threads */

/* One connection's whole life: connect, pairs until STOP, close. */
static void sync_client(struct client *cl)
{
	redisContext *c = redisConnect(HOST, g.port);
	redisReply *r;

	if (c == NULL || c->err) {
		fprintf(stderr, "redis-bench: client %d: connect: %s\n", cl->id,
			c ? c->errstr : "out of memory");
		cl->errors++;
		redisFree(c);
		return;
	}
	atomic_fetch_add(&g.connected, 1);
	while (phase_now() != STOP) {
		next_pair(cl);
		r = redisCommand(c, SET_FMT, cl->key, cl->klen, cl->val, cl->vlen);
		count(cl, set_ok(r));
		if (r == NULL)
			break; /* the connection failed: c->err says why */
		freeReplyObject(r);
		r = redisCommand(c, GET_FMT, cl->key, cl->klen);
		count(cl, get_ok(cl, r));
		if (r == NULL)
			break;
		freeReplyObject(r);
		cl->seq++;
	}
	if (c->err)
		fprintf(stderr, "redis-bench: client %d: %s\n", cl->id, c->errstr);
	redisFree(c);
}

/* The window: WARM_S after the start it opens, RUN_S later it closes;
 * sleep_ns sleeps the way the mode's controller must. */
static void control(void (*sleep_ns)(int64_t))
{
	int64_t t0;

	sleep_ns((int64_t)(g.warm_s * 1e9));
	atomic_store(&g.phase, MEASURE);
	t0 = now_ns();
	sleep_ns((int64_t)(g.run_s * 1e9));
	atomic_store(&g.phase, STOP);
	g.ns = now_ns() - t0;
}

static void thread_sleep(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void *thread_client(void *p)
{
	sync_client(p);
	return NULL;
}

static void run_threads(struct client *cl)
{
	pthread_t *t = calloc((size_t)g.nclients, sizeof *t);
	int i, rc;

	if (t == NULL)
		die("calloc");
	for (i = 0; i < g.nclients; i++) {
		rc = pthread_create(&t[i], NULL, thread_client, &cl[i]);
		if (rc != 0) {
			errno = rc;
			die("pthread_create");
		}
	}
	control(thread_sleep);
	for (i = 0; i < g.nclients; i++)
		pthread_join(t[i], NULL);
	free(t);
}

#ifdef REDIS_BENCH_HOOKS
static void co_client(void *p)
{
	sync_client(p);
}

static void co_sleep(int64_t ns)
{
	weft_sleep(weft_now() + ns);
}

static void hooks_root(void *p)
{
	struct client *cl = p;
	weft_co **co = calloc((size_t)g.nclients, sizeof *co);
	int i;

	if (co == NULL)
		die("calloc");
	for (i = 0; i < g.nclients; i++)
		if ((co[i] = weft_spawn(co_client, &cl[i])) == NULL)
			die("weft_spawn");
	control(co_sleep);
	for (i = 0; i < g.nclients; i++)
		if (weft_join(co[i]) != 0)
			die("weft_join");
	free(co);
}

static void run_hooks(struct client *cl)
{
	weft_config cfg = WEFT_CONFIG_INIT;

	cfg.workers = g.workers;
	if (weft_main(hooks_root, cl, &cfg) != 0)
		die("weft_main");
}
#endif

/* ------------------------------------------- async: one libevent loop */

static void async_next(struct client *cl);

static void async_get_cb(redisAsyncContext *ac, void *r, void *priv)
{
	struct client *cl = priv;

	(void)ac;
	if (r == NULL)
		return; /* the connection is going away; its callback says why */
	count(cl, get_ok(cl, r));
	cl->seq++;
	async_next(cl);
}

static void async_set_cb(redisAsyncContext *ac, void *r, void *priv)
{
	struct client *cl = priv;

	if (r == NULL)
		return;
	count(cl, set_ok(r));
	if (redisAsyncCommand(ac, async_get_cb, cl, GET_FMT, cl->key,
			      cl->klen) != REDIS_OK)
		cl->errors++;
}

/* The next SET, or at STOP the end of the connection. */
static void async_next(struct client *cl)
{
	if (phase_now() == STOP) {
		redisAsyncDisconnect(cl->ac);
		return;
	}
	next_pair(cl);
	if (redisAsyncCommand(cl->ac, async_set_cb, cl, SET_FMT, cl->key,
			      cl->klen, cl->val, cl->vlen) != REDIS_OK)
		cl->errors++;
}

static void async_connected(const redisAsyncContext *ac, int status)
{
	struct client *cl = ac->data;

	if (status != REDIS_OK) {
		fprintf(stderr, "redis-bench: client %d: connect: %s\n", cl->id,
			ac->errstr);
		cl->errors++;
		return;
	}
	atomic_fetch_add(&g.connected, 1);
}

static void async_disconnected(const redisAsyncContext *ac, int status)
{
	struct client *cl = ac->data;

	if (status != REDIS_OK) {
		fprintf(stderr, "redis-bench: client %d: %s\n", cl->id, ac->errstr);
		cl->errors++;
	}
}

/* The controller's two timers: the window opens, then closes (the clients
 * see STOP after their current pair and disconnect; the loop then ends). */
static void async_tick(evutil_socket_t fd, short what, void *p)
{
	static int64_t t0;
	struct event *ev = p;

	(void)fd;
	(void)what;
	if (phase_now() == WARM) {
		struct timeval tv = { (time_t)g.run_s,
				      (suseconds_t)((g.run_s - (time_t)g.run_s) * 1e6) };

		atomic_store(&g.phase, MEASURE);
		t0 = now_ns();
		evtimer_add(ev, &tv);
	} else {
		atomic_store(&g.phase, STOP);
		g.ns = now_ns() - t0;
	}
}

static void run_async(struct client *cl)
{
	struct event_base *base = event_base_new();
	struct event *timer;
	struct timeval tv = { (time_t)g.warm_s,
			      (suseconds_t)((g.warm_s - (time_t)g.warm_s) * 1e6) };
	int i;

	if (base == NULL)
		die("event_base_new");
	for (i = 0; i < g.nclients; i++) {
		redisAsyncContext *ac = redisAsyncConnect(HOST, g.port);

		if (ac == NULL || ac->err) {
			fprintf(stderr, "redis-bench: client %d: connect: %s\n",
				i, ac ? ac->errstr : "out of memory");
			exit(1);
		}
		ac->data = &cl[i];
		cl[i].ac = ac;
		if (redisLibeventAttach(ac, base) != REDIS_OK)
			die("redisLibeventAttach");
		redisAsyncSetConnectCallback(ac, async_connected);
		redisAsyncSetDisconnectCallback(ac, async_disconnected);
		async_next(&cl[i]); /* queued until the connection is up */
	}
	timer = event_new(base, -1, 0, async_tick, event_self_cbarg());
	if (timer == NULL || evtimer_add(timer, &tv) != 0)
		die("evtimer");
	if (event_base_dispatch(base) < 0) /* 1: no events left, the end */
		die("event_base_dispatch");
	event_free(timer);
	event_base_free(base);
}

/* ------------------------------------------------------------------- main */

static void usage(void)
{
	fprintf(stderr, "usage: redis-bench hooks|threads|async CLIENTS PORT "
			"RUN_S WARM_S [WORKERS]\n");
	exit(2);
}

static long parse_long(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		usage();
	return v;
}

static double parse_seconds(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end != '\0' || !(v > 0 && v < 3600))
		usage();
	return v;
}

/* Room for a descriptor per connection: the soft limit raised to the hard. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*run)(struct client *);
	} modes[] = {
#ifdef REDIS_BENCH_HOOKS
		{ "hooks", run_hooks },
#endif
		{ "threads", run_threads },
		{ "async", run_async },
	};
	void (*run)(struct client *) = NULL;
	struct client *cl;
	int64_t done = 0, errors = 0;
	bool ok;
	size_t m;

	if (argc != 6 && argc != 7)
		usage();
	for (m = 0; m < sizeof modes / sizeof modes[0]; m++)
		if (strcmp(argv[1], modes[m].name) == 0)
			run = modes[m].run;
	if (run == NULL) {
		fprintf(stderr, "redis-bench: no mode \"%s\" in this build%s\n",
			argv[1], strcmp(argv[1], "hooks") == 0 ?
			" (hooks: redis-bench-hooks, built with libweft-hook)" : "");
		return 2;
	}
	g.nclients = (int)parse_long(argv[2], 1, MAX_CLIENTS);
	g.port = (int)parse_long(argv[3], 1, 65535);
	g.run_s = parse_seconds(argv[4]);
	g.warm_s = parse_seconds(argv[5]);
	g.workers = argc == 7 ? (unsigned)parse_long(argv[6], 1, 1024) : 1;
	raise_nofile();
	cl = calloc((size_t)g.nclients, sizeof *cl);
	if (cl == NULL)
		die("calloc");
	for (int i = 0; i < g.nclients; i++)
		cl[i].id = i;

	run(cl);

	for (int i = 0; i < g.nclients; i++) {
		done += cl[i].done;
		errors += cl[i].errors;
	}
	ok = errors == 0 && atomic_load(&g.connected) == g.nclients &&
	     done > 0 && g.ns > 0;
	printf("RESULT name=redis-%d impl=%s workers=%u ns=%" PRId64
	       " ops=%" PRId64 " value=%" PRId64 " check=%s rss_kb=%ld"
	       " conns=%d errors=%" PRId64 "\n",
	       g.nclients, argv[1], g.workers, g.ns, done,
	       g.ns > 0 ? (int64_t)((double)done * 1e9 / (double)g.ns) : 0,
	       ok ? "ok" : "fail", peak_rss_kb(), atomic_load(&g.connected),
	       errors);
	free(cl);
	return ok ? 0 : 1;
}
