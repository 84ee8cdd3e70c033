/* SPDX-License-Identifier: MIT */
/*
 * loadgen — a closed-loop load generator for echo servers.  Plain C11 and
 * epoll, no weft: it measures weft's servers and their peers alike.
 *
 *   loadgen [-u] [-c CONNS] [-s SIZE] [-b BIG -B BIG_SIZE] [-d SECONDS]
 *           [-w SECONDS] [-h HOST] [-p PORT] [-t THREADS] [-i IMPL]
 *           [-W WORKERS]
 *
 * Each of CONNS connections sends a message of SIZE bytes, waits for all of
 * it to come back, checks every byte, records the round trip and sends the
 * next one.  The first -w seconds are a warm-up (nothing recorded), the next
 * -d seconds are measured.  The bytes of message number q on connection k
 * are k's own random words, each XORed with a mask made from q (see
 * fill_message), so bytes that belong to another connection or to an
 * earlier message are caught, not just lost or corrupted ones.
 *
 * It prints one line on stdout, in the format of the benchmark suite
 * (bench/README.md), e.g.
 *
 *   RESULT name=echo-100-64 impl=weft workers=1 ns=2000012345 ops=180000
 *          value=90000 check=ok p50_us=1101.2 p99_us=1310.5 ...
 *
 * value is messages per second: the echoes completed in the measured window
 * over its length.  At its end no new message starts, and the ones in flight
 * get DRAIN_NS to come back: their round trips still count in the latencies,
 * and one that does not come back is lost (a server that loses bytes stalls
 * a closed loop rather than failing it).  p50/p99/p999/max are round trips
 * in microseconds, from a log-linear histogram (buckets under 1.6% wide).
 * conn_min is the fewest echoes any connection completed in the window: far
 * below ops/conns, the server starves some connections.  check=fail, and exit
 * status 1, when a connection could not be made, failed, was closed, returned
 * a wrong byte, or lost its echo.  Exit status 2: usage.
 *
 * -u: UDP instead of TCP.  Each of CONNS UDP sockets (connected to the
 * server, so that it takes only the server's datagrams) sends a message as
 * one datagram of SIZE bytes and waits for one datagram back: the whole
 * message, byte for byte.  UDP may drop datagrams, so a message not echoed
 * within UDP_TIMEOUT_NS is lost: counted (lost=, over the whole run) and
 * replaced by the connection's next message, so that a drop costs a
 * connection UDP_TIMEOUT_NS rather than the run.  An echo of a lost message
 * that comes later is no error (late=); any other datagram, or one of the
 * wrong length, is (check=fail).  Lost datagrams do not fail the check; the
 * name is udp-CONNS-SIZE.
 *
 * -b BIG -B BIG_SIZE: BIG more connections, each sending BIG_SIZE-byte
 * messages in the same closed loop beside the CONNS ones (fairness: small
 * requests beside long transfers).  They are left out of value, the
 * latencies and conn_min, which are the CONNS connections' alone; their
 * rate is big_mib_s (MiB echoed per second in the window); the name is
 * fair-CONNS-SIZE.  Not with -u.
 *
 * Single-threaded by default, so that on a 2-CPU machine it takes one CPU
 * and leaves the other to the server; -t splits the connections over
 * threads, each with its own epoll instance.  loadgen_cpu= is the CPU time
 * it used per second of its run: near 1.0 per thread, the load generator
 * rather than the server may be what limits the rate.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "loadgen"
#include "util.h"

#define NS_PER_S INT64_C(1000000000)
#define DRAIN_NS (2 * NS_PER_S) /* for the echoes in flight at the end */
#define CONNECT_TIMEOUT_S 5
#define MAX_REPORTED_ERRORS 5 /* per process; the rest are only counted */
#define EVENTS_PER_WAIT 256
#define UDP_TIMEOUT_NS (NS_PER_S / 2) /* -u: a message not echoed is lost */
#define SWEEP_NS (UDP_TIMEOUT_NS / 10) /* -u: how often to look for them */
#define LATE_SEQS 4 /* -u: lost messages whose late echo is still accepted */
#define UDP_MAX 65507 /* the largest UDP payload over IPv4 */

struct opts {
	unsigned conns;
	size_t size;
	unsigned big_conns; /* -b: connections beside CONNS moving big_size messages */
	size_t big_size; /* -B */
	double duration_s, warmup_s;
	const char *host, *port, *impl;
	unsigned workers, threads;
	bool udp; /* -u */
};

/* ------------------------------------------------------------ histogram */

/*
 * Log-linear buckets, as in HdrHistogram: values below 2^SUB_BITS ns have a
 * bucket each; above, a value keeps its top SUB_BITS bits, so a bucket is at
 * most 1/64 of its value wide (under 1.6%, reported at its midpoint).
 */
enum {
	SUB_BITS = 7,
	HALF = 1 << (SUB_BITS - 1),
	VALUE_BITS = 40, /* up to 2^40 ns, 18 minutes; longer is clamped */
	NBUCKETS = (VALUE_BITS - SUB_BITS + 2) * HALF,
};

struct hist {
	uint64_t count[NBUCKETS];
	uint64_t n;
	int64_t max;
};

static int bucket_shift(int64_t v)
{
	int msb = 63 - __builtin_clzll((unsigned long long)v | 1);
	return v < 2 * HALF ? 0 : msb - (SUB_BITS - 1);
}

static void hist_add(struct hist *h, int64_t v)
{
	int shift;

	if (v < 0)
		v = 0;
	if (v >= INT64_C(1) << VALUE_BITS)
		v = (INT64_C(1) << VALUE_BITS) - 1;
	shift = bucket_shift(v);
	h->count[shift * HALF + (v >> shift)]++;
	h->n++;
	if (v > h->max)
		h->max = v;
}

static void hist_merge(struct hist *into, const struct hist *h)
{
	for (int i = 0; i < NBUCKETS; i++)
		into->count[i] += h->count[i];
	into->n += h->n;
	if (h->max > into->max)
		into->max = h->max;
}

/* The value below which a fraction q of the samples lie (0 when empty). */
static int64_t hist_quantile(const struct hist *h, double q)
{
	uint64_t rank = (uint64_t)(q * (double)h->n + 0.999999), seen = 0;

	if (rank < 1)
		rank = 1;
	for (int i = 0; i < NBUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank && h->count[i]) {
			int shift = i < 2 * HALF ? 0 : i / HALF - 1;
			int64_t low = (int64_t)(i - shift * HALF) << shift;
			int64_t mid = low + ((INT64_C(1) << shift) >> 1);
			return mid < h->max ? mid : h->max;
		}
	}
	return 0;
}

/* -------------------------------------------------------------- pattern */

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A connection's own random words, drawn once: bytes misrouted from another
 * connection, or shifted within a message, do not match. */
static void fill_base(uint64_t *base, size_t words, uint32_t id)
{
	uint64_t state = id;

	for (size_t i = 0; i < words; i++)
		base[i] = splitmix64(&state);
}

/*
 * Message seq is the base with every word XORed with the same random mask;
 * distinct seq give distinct masks (splitmix64 is a bijection), so a stale
 * word of an earlier message does not match.  Cheap on purpose: the load
 * generator shares the machine with the server it measures, so its cost per
 * message caps the rate it can measure.
 */
static void fill_message(uint64_t *msg, const uint64_t *base, size_t words,
			 uint32_t seq)
{
	uint64_t state = seq, mask = splitmix64(&state);

	for (size_t i = 0; i < words; i++)
		msg[i] = base[i] ^ mask;
}

/* ------------------------------------------------------------ the loops */

struct conn {
	int fd; /* -1 once failed */
	uint32_t id; /* 0..conns-1, seeds the pattern */
	uint32_t seq; /* the current message's number */
	size_t size; /* of its messages: -s, or -B for a big one */
	bool big; /* -b: not in the latencies, rate and conn_min */
	size_t sent, got; /* of the current message: bytes written, echoed */
	int64_t t0; /* when the current message was first written */
	uint64_t done; /* echoes completed in the window */
	bool busy; /* a message is in flight */
	bool want_out; /* EPOLLOUT registered: the last write was partial */
	unsigned char *msg; /* the current message, what must come back */
	uint64_t *base; /* the connection's pattern (see fill_message) */
	uint32_t lost_seq[LATE_SEQS]; /* -u: the last messages lost, 0: none */
	unsigned lost_next; /* -u: where the next lost one goes in lost_seq */
};

/* One epoll loop over a slice of the connections; one per thread. */
struct loop {
	const struct opts *o;
	struct conn *conns;
	unsigned nconns, live;
	unsigned busy; /* connections with a message in flight */
	int ep;
	int64_t t_measure, t_end; /* the measured window */
	int64_t t_stopped; /* when this loop stopped */
	unsigned char *scratch; /* what read(2) returns, before the check */
	unsigned char *late_msg; /* -u: a lost message, made again to compare */
	int64_t next_sweep; /* -u: when to look for lost messages next */
	struct hist hist; /* round trips completed in the window or the drain */
	uint64_t msgs; /* round trips completed in the window */
	uint64_t big_bytes; /* -b: bytes the big connections echoed in it */
	unsigned errors, lost, late;
	pthread_t thread;
};

static atomic_uint reported_errors;

/* A message of size bytes is generated as this many whole words. */
static size_t words(size_t size)
{
	return (size + sizeof(uint64_t) - 1) / sizeof(uint64_t);
}

/* User plus system time of the whole process, every thread. */
static int64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void conn_fail(struct loop *l, struct conn *c, const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&reported_errors, 1) < MAX_REPORTED_ERRORS) {
		fprintf(stderr, "loadgen: connection %" PRIu32 ", message %" PRIu32
			": ", c->id, c->seq);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	if (c->fd >= 0)
		close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	l->errors++;
	l->live--;
	if (c->busy) {
		c->busy = false;
		l->busy--;
	}
}

static bool set_events(struct loop *l, struct conn *c, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0),
				  .data.ptr = c };

	if (epoll_ctl(l->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
		conn_fail(l, c, "epoll_ctl: %s", strerror(errno));
		return false;
	}
	c->want_out = out;
	return true;
}

/* Writes what the socket takes; waits for EPOLLOUT only when it is full. */
static void conn_send(struct loop *l, struct conn *c)
{
	size_t size = c->size;

	while (c->sent < size) {
		ssize_t n = send(c->fd, c->msg + c->sent, size - c->sent,
				 MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!c->want_out)
				set_events(l, c, true);
			return;
		}
		if (n < 0) {
			conn_fail(l, c, "send: %s", strerror(errno));
			return;
		}
		c->sent += (size_t)n;
	}
	if (c->want_out)
		set_events(l, c, false);
}

static void conn_start(struct loop *l, struct conn *c)
{
	c->seq++;
	c->sent = c->got = 0;
	c->busy = true;
	l->busy++;
	fill_message((uint64_t *)c->msg, c->base, words(c->size), c->seq);
	c->t0 = now_ns();
	conn_send(l, c);
}

/* A complete echo: record it, and start the next until the window ends. */
static void conn_done(struct loop *l, struct conn *c)
{
	int64_t t = now_ns();

	c->busy = false;
	l->busy--;
	if (t >= l->t_measure && c->big && t < l->t_end)
		l->big_bytes += c->size;
	if (t >= l->t_measure && !c->big)
		hist_add(&l->hist, t - c->t0);
	if (t >= l->t_measure && !c->big && t < l->t_end) {
		l->msgs++;
		c->done++;
	}
	if (t < l->t_end)
		conn_start(l, c);
}

/* got came back where want should have, at offset of the message, and
 * differs (memcmp said so): say where, and fail the connection. */
static void mismatch(struct loop *l, struct conn *c, const unsigned char *got,
		     const unsigned char *want, size_t offset)
{
	size_t i = 0;

	while (got[i] == want[i])
		i++;
	conn_fail(l, c, "wrong byte at offset %zu: got 0x%02x, want 0x%02x",
		  offset + i, got[i], want[i]);
}

/* TCP: reads no further than the current message: the next one's bytes
 * must not come before it is sent. */
static void stream_recv(struct loop *l, struct conn *c)
{
	size_t size = c->size;
	ssize_t n;

	do
		n = read(c->fd, l->scratch, size - c->got);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n < 0) {
		conn_fail(l, c, "read: %s", strerror(errno));
		return;
	}
	if (n == 0) {
		conn_fail(l, c, "closed by the server after %zu of %zu bytes",
			  c->got, size);
		return;
	}
	if (memcmp(l->scratch, c->msg + c->got, (size_t)n) != 0) {
		mismatch(l, c, l->scratch, c->msg + c->got, c->got);
		return;
	}
	c->got += (size_t)n;
	if (c->got == size)
		conn_done(l, c);
}

/* -u: whether the datagram in scratch is the late echo of one of c's lost
 * messages; each is taken once (a second echo is an error). */
static bool late_echo(struct loop *l, struct conn *c)
{
	size_t size = l->o->size;

	for (unsigned i = 0; i < LATE_SEQS; i++) {
		if (c->lost_seq[i] == 0)
			continue;
		fill_message((uint64_t *)l->late_msg, c->base, words(size),
			     c->lost_seq[i]);
		if (memcmp(l->scratch, l->late_msg, size) == 0) {
			c->lost_seq[i] = 0;
			l->late++;
			return true;
		}
	}
	return false;
}

/* -u: one datagram, which must be the whole current message (MSG_TRUNC:
 * recv returns a longer one's real length), or a late echo. */
static void dgram_recv(struct loop *l, struct conn *c)
{
	size_t size = l->o->size;
	ssize_t n;

	do
		n = recv(c->fd, l->scratch, size, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n < 0) {
		conn_fail(l, c, "recv: %s", strerror(errno));
		return;
	}
	if ((size_t)n != size) {
		conn_fail(l, c, "a datagram of %zd bytes, not %zu", n, size);
		return;
	}
	if (c->busy && memcmp(l->scratch, c->msg, size) == 0) {
		c->got = size;
		conn_done(l, c);
	} else if (!late_echo(l, c)) {
		if (c->busy)
			mismatch(l, c, l->scratch, c->msg, 0);
		else
			conn_fail(l, c, "a datagram with no message in flight");
	}
}

/* -u: the messages in flight for UDP_TIMEOUT_NS are lost; their
 * connections start their next ones until the window ends. */
static void dgram_sweep(struct loop *l, int64_t now)
{
	for (unsigned i = 0; i < l->nconns; i++) {
		struct conn *c = &l->conns[i];

		if (c->fd < 0 || !c->busy || now - c->t0 < UDP_TIMEOUT_NS)
			continue;
		c->lost_seq[c->lost_next++ % LATE_SEQS] = c->seq;
		c->busy = false;
		l->busy--;
		l->lost++;
		if (now < l->t_end)
			conn_start(l, c);
	}
	l->next_sweep = now + SWEEP_NS;
}

/* The time to wait until, or -1 when done: the window's end, then the end
 * of the drain while echoes are in flight; with -u, the next sweep first. */
static int64_t loop_deadline(const struct loop *l, int64_t now)
{
	int64_t until;

	if (l->live == 0)
		return -1;
	if (now < l->t_end)
		until = l->t_end;
	else if (l->busy > 0 && now < l->t_end + DRAIN_NS)
		until = l->t_end + DRAIN_NS;
	else
		return -1;
	return l->o->udp && l->next_sweep < until ? l->next_sweep : until;
}

static void *loop_run(void *p)
{
	struct loop *l = p;
	struct epoll_event ev[EVENTS_PER_WAIT];
	int64_t t, until;

	for (unsigned i = 0; i < l->nconns; i++)
		if (l->conns[i].fd >= 0)
			conn_start(l, &l->conns[i]);
	l->next_sweep = now_ns() + SWEEP_NS;
	while ((until = loop_deadline(l, t = now_ns())) >= 0) {
		/* round up: waking just before the deadline would spin */
		int ms = (int)((until - t + 999999) / 1000000);
		int n = epoll_wait(l->ep, ev, EVENTS_PER_WAIT, ms);
		if (n < 0 && errno != EINTR) {
			perror("loadgen: epoll_wait");
			exit(2);
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = ev[i].data.ptr;
			/* an earlier event of this batch may have failed it */
			if (c->fd >= 0 && (ev[i].events & EPOLLOUT))
				conn_send(l, c);
			if (c->fd >= 0 &&
			    (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				(l->o->udp ? dgram_recv : stream_recv)(l, c);
		}
		if (l->o->udp && (t = now_ns()) >= l->next_sweep)
			dgram_sweep(l, t);
	}
	l->t_stopped = now_ns();
	l->lost += l->busy; /* not back by the end of the drain */
	return NULL;
}

/* ---------------------------------------------------------------- setup */

/* Blocking connect (SO_SNDTIMEO bounds it on Linux), then non-blocking.
 * A UDP socket's connect only sets where its datagrams go, and whose it
 * takes. */
static int dial(const struct addrinfo *ai)
{
	struct timeval tv = { .tv_sec = CONNECT_TIMEOUT_S };
	int one = 1, fd;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
	    connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    (ai->ai_socktype == SOCK_STREAM &&
	     setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);
	if (p == NULL) {
		perror("loadgen: calloc");
		exit(2);
	}
	return p;
}

/* Connects every connection of the loop; a failed one counts as an error. */
static void loop_init(struct loop *l, const struct opts *o,
		      const struct addrinfo *ai, struct conn *conns,
		      unsigned first, unsigned n)
{
	l->o = o;
	l->conns = conns;
	l->nconns = n;
	l->scratch = xcalloc(1, o->size > o->big_size ? o->size : o->big_size);
	l->late_msg = xcalloc(words(o->size), sizeof(uint64_t));
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	if (l->ep < 0) {
		perror("loadgen: epoll_create1");
		exit(2);
	}
	for (unsigned i = 0; i < n; i++) {
		struct conn *c = &conns[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

		c->id = first + i;
		c->big = c->id >= o->conns;
		c->size = c->big ? o->big_size : o->size;
		c->msg = xcalloc(words(c->size), sizeof(uint64_t));
		c->base = xcalloc(words(c->size), sizeof(uint64_t));
		fill_base(c->base, words(c->size), c->id);
		c->fd = dial(ai);
		l->live++; /* until conn_fail says otherwise */
		if (c->fd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
			conn_fail(l, c, "connect to %s:%s: %s", o->host, o->port,
				  strerror(errno));
	}
}

/* The servers under test may hold 1,000 connections; so do we. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static struct addrinfo *resolve(const struct opts *o)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = o->udp ? SOCK_DGRAM : SOCK_STREAM },
			*ai;
	int rc = getaddrinfo(o->host, o->port, &hints, &ai);

	if (rc != 0) {
		fprintf(stderr, "loadgen: %s:%s: %s\n", o->host, o->port,
			gai_strerror(rc));
		exit(2);
	}
	return ai;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: loadgen [-u] [-c CONNS] [-s SIZE] [-b BIG -B BIG_SIZE] [-d SECONDS]\n"
		"               [-w SECONDS] [-h HOST] [-p PORT] [-t THREADS] [-i IMPL]\n"
		"               [-W WORKERS]\n"
		"-u: UDP (SIZE up to %d; no -b)\n"
		"defaults: -c 100 -s 64 -d 10 -w 1 -h 127.0.0.1 -p 7000 -t 1 -i unknown -W 1\n",
		UDP_MAX);
	exit(2);
}

static unsigned long parse_count(const char *s, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max)
		usage();
	return v;
}

static double parse_seconds(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 86400)
		usage();
	return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	int ch;

	*o = (struct opts){ .conns = 100, .size = 64, .duration_s = 10,
			    .warmup_s = 1, .host = "127.0.0.1", .port = "7000",
			    .impl = "unknown", .workers = 1, .threads = 1 };
	while ((ch = getopt(argc, argv, "uc:s:b:B:d:w:h:p:t:i:W:")) != -1) {
		switch (ch) {
		case 'u': o->udp = true; break;
		case 'c': o->conns = (unsigned)parse_count(optarg, 1000000); break;
		case 's': o->size = parse_count(optarg, 64 << 20); break;
		case 'b': o->big_conns = (unsigned)parse_count(optarg, 1000000); break;
		case 'B': o->big_size = parse_count(optarg, 64 << 20); break;
		case 'd': o->duration_s = parse_seconds(optarg); break;
		case 'w': o->warmup_s = parse_seconds(optarg); break;
		case 'h': o->host = optarg; break;
		case 'p': o->port = optarg; break;
		case 't': o->threads = (unsigned)parse_count(optarg, 1024); break;
		case 'i': o->impl = optarg; break;
		case 'W': o->workers = (unsigned)parse_count(optarg, 1024); break;
		default: usage();
		}
	}
	if (optind != argc || o->duration_s <= 0 || (o->udp && o->size > UDP_MAX) ||
	    (o->big_conns > 0) != (o->big_size > 0) || (o->udp && o->big_conns))
		usage();
	if (o->threads > o->conns + o->big_conns)
		o->threads = o->conns + o->big_conns;
}

/* What the loops found, added up. */
struct totals {
	struct hist hist;
	uint64_t msgs, big_bytes;
	uint64_t conn_min; /* UINT64_MAX until a live connection is seen */
	unsigned errors, lost, late;
	int64_t stopped; /* when the last loop stopped */
};

static void add_up(struct totals *t, const struct loop *l)
{
	hist_merge(&t->hist, &l->hist);
	t->msgs += l->msgs;
	t->big_bytes += l->big_bytes;
	t->errors += l->errors;
	t->lost += l->lost;
	t->late += l->late;
	if (l->t_stopped > t->stopped)
		t->stopped = l->t_stopped;
	for (unsigned i = 0; i < l->nconns; i++)
		if (l->conns[i].fd >= 0 && !l->conns[i].big && l->conns[i].done < t->conn_min)
			t->conn_min = l->conns[i].done;
}

/* Loop 0 on this thread, the others on threads of their own. */
static void run_loops(struct loop *loops, unsigned n)
{
	for (unsigned t = 1; t < n; t++)
		if (pthread_create(&loops[t].thread, NULL, loop_run, &loops[t])) {
			fprintf(stderr, "loadgen: pthread_create failed\n");
			exit(2);
		}
	loop_run(&loops[0]);
	for (unsigned t = 1; t < n; t++)
		pthread_join(loops[t].thread, NULL);
}

/* The RESULT line; returns whether the check passed (with -u, lost
 * datagrams do not fail it). */
static bool report(const struct opts *o, const struct totals *t, int64_t ns,
		   double cpu)
{
	bool ok = t->errors == 0 && (o->udp || t->lost == 0) && t->msgs > 0;
	const struct hist *h = &t->hist;

	if (t->lost && o->udp)
		fprintf(stderr, "loadgen: %u datagram(s) lost (no echo within "
			"%.1f s), %u of them echoed later\n", t->lost,
			(double)UDP_TIMEOUT_NS / NS_PER_S, t->late);
	else if (t->lost)
		fprintf(stderr, "loadgen: %u echo(es) did not come back within "
			"%.1f s of the end\n", t->lost, (double)DRAIN_NS / NS_PER_S);
	printf("RESULT name=%s-%u-%zu impl=%s workers=%u ns=%" PRId64
	       " ops=%" PRIu64 " value=%.0f check=%s p50_us=%.1f p99_us=%.1f"
	       " p999_us=%.1f max_us=%.1f conns=%u size=%zu threads=%u"
	       " errors=%u lost=%u conn_min=%" PRIu64 " loadgen_cpu=%.2f",
	       o->udp ? "udp" : o->big_conns ? "fair" : "echo", o->conns, o->size, o->impl,
	       o->workers,
	       ns, t->msgs,
	       (double)t->msgs * NS_PER_S / (double)ns, ok ? "ok" : "fail",
	       hist_quantile(h, 0.50) / 1e3, hist_quantile(h, 0.99) / 1e3,
	       hist_quantile(h, 0.999) / 1e3, h->max / 1e3, o->conns, o->size,
	       o->threads, t->errors, t->lost,
	       t->conn_min == UINT64_MAX ? 0 : t->conn_min, cpu);
	if (o->udp)
		printf(" late=%u", t->late);
	if (o->big_conns)
		printf(" big_conns=%u big_size=%zu big_mib_s=%.1f", o->big_conns, o->big_size,
		       (double)t->big_bytes * NS_PER_S / (double)ns / (1 << 20));
	putchar('\n');
	fflush(stdout);
	return ok;
}

int main(int argc, char **argv)
{
	static struct totals tot = { .conn_min = UINT64_MAX };
	struct opts o;
	struct addrinfo *ai;
	struct loop *loops;
	struct conn *conns;
	int64_t t0, cpu0, t_measure, t_end, ns;
	unsigned all;

	parse_opts(argc, argv, &o);
	raise_nofile();
	ai = resolve(&o);
	all = o.conns + o.big_conns;
	conns = xcalloc(all, sizeof *conns);
	loops = xcalloc(o.threads, sizeof *loops);
	for (unsigned t = 0, first = 0; t < o.threads; t++) {
		unsigned n = all / o.threads + (t < all % o.threads);
		loop_init(&loops[t], &o, ai, conns + first, first, n);
		first += n;
	}
	freeaddrinfo(ai);

	/* Everything is connected: the clock starts now, for every loop. */
	t0 = now_ns();
	cpu0 = cpu_ns();
	t_measure = t0 + (int64_t)(o.warmup_s * NS_PER_S);
	t_end = t_measure + (int64_t)(o.duration_s * NS_PER_S);
	for (unsigned t = 0; t < o.threads; t++) {
		loops[t].t_measure = t_measure;
		loops[t].t_end = t_end;
	}
	run_loops(loops, o.threads);
	for (unsigned t = 0; t < o.threads; t++)
		add_up(&tot, &loops[t]);

	/* the window, or less when every connection failed before its end */
	ns = (tot.stopped < t_end ? tot.stopped : t_end) - t_measure;
	return report(&o, &tot, ns < 1 ? 1 : ns,
		      (double)(cpu_ns() - cpu0) / (double)(now_ns() - t0))
		       ? 0 : 1;
}
