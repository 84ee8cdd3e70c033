/* SPDX-License-Identifier: MIT */
/*
 * weft-epoll — the limit the server rows are measured against: the echo and
 * HTTP "hello" servers a careful C programmer writes without coroutines, on
 * epoll, non-blocking sockets, a state struct per connection.
 *
 *   [EPOLL_LOOPS=N] weft-epoll echo-server|http-server PORT [et|lt]
 *
 * It prints "listening on PORT" once it accepts (PORT 0: any free port), as
 * weft's example servers and the other peers do.  Connections are accepted
 * with accept4 until EAGAIN; each gets TCP_NODELAY, as weft's get.
 *
 * EPOLL_LOOPS (1..1024, default 1): that many independent loops, one thread each, each
 * with its own epoll instance and its own SO_REUSEPORT listener on the same
 * port, so the kernel spreads the connections over them and nothing is
 * shared after the accept: the shape of nginx's workers, and what N cores
 * give a server that needs no scheduler.
 *
 * et (the default): edge-triggered, registered once for input and output.
 * On an event the connection is served until the socket is drained: read,
 * answer (echo the bytes back, or the HTTP answers of http_proto.c), write;
 * a read shorter than the buffer means the socket was empty, so no further
 * read is made to see EAGAIN.  A write that does not complete keeps the rest
 * and stops reading (back-pressure) until the output edge.
 * lt: level-triggered, one read per input event, and output interest only
 * while a write is pending (an epoll_ctl to add it and one to drop it).
 * The suite runs the default.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../examples/http_proto.h"

enum { ECHO_BUF = 16 << 10, EVENTS = 256, BACKLOG = 4096, MAX_LOOPS = 1024 };

struct conn {
	int fd;
	bool http;
	bool closing;		/* close once out is written (HTTP) */
	bool full;		/* HTTP: answers are waiting for room in out */
	bool want_out;		/* lt: EPOLLOUT is registered */
	size_t out_off;		/* written so far of the pending output */
	size_t out_len;		/* pending output (echo: in buf; HTTP: in h.out) */
	union {
		char buf[ECHO_BUF];
		struct http_conn h;
	};
};

static __thread int epfd;	/* the calling loop's */
static bool edge = true;
static bool serving_http;

static void die(const char *what)
{
	fprintf(stderr, "weft-epoll: %s: %s\n", what, strerror(errno));
	exit(1);
}

static char *out_base(struct conn *c)
{
	return c->http ? c->h.out : c->buf;
}

static void conn_close(struct conn *c)
{
	close(c->fd);	/* also leaves the epoll set */
	free(c);
}

/* lt only: output interest while a write is pending. */
static void want_output(struct conn *c, bool on)
{
	if (edge || c->want_out == on)
		return;
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
		die("epoll_ctl");
	c->want_out = on;
}

/* Writes the pending output: 1 done, 0 the socket is full, -1 failed. */
static int write_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, out_base(c) + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			want_output(c, true);
			return 0;
		}
		if (n < 0)
			return -1;
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	if (c->http)
		c->h.out_len = 0;
	want_output(c, false);
	return 1;
}

/* Reads once into the connection's buffer: bytes read, 0 at EOF, -1 for
 * EAGAIN (nothing there), -2 failed.  recv, not read: the socket layer's
 * entry is the cheaper one
 * (docs/notes/2026-12-06-measurements-behind-the-code.md, "recv"). */
static ssize_t read_in(struct conn *c, size_t *room)
{
	char *to = c->http ? c->h.in + c->h.in_len : c->buf;
	*room = c->http ? sizeof c->h.in - c->h.in_len : sizeof c->buf;
	for (;;) {
		ssize_t n = recv(c->fd, to, *room, 0);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN ? -1 : -2;
	}
}

/* HTTP: answers what c->h.in holds. */
static void answer_http(struct conn *c)
{
	enum http_state st = http_answer(&c->h);
	c->full = st == HTTP_OUT_FULL;
	c->closing = st == HTTP_CLOSE;
	c->out_len = c->h.out_len;
}

/* After n bytes were read: the output to write. */
static void answer(struct conn *c, size_t n)
{
	if (!c->http) {
		c->out_len = n;
		return;
	}
	c->h.in_len += n;
	answer_http(c);
}

/* Writes the pending output (HTTP: and the answers that waited for room):
 * as write_out. */
static int flush(struct conn *c)
{
	int w;
	while ((w = write_out(c)) == 1 && c->http && c->full)
		answer_http(c);
	return w;
}

/* Serves c after an event: false when it is to be closed. */
static bool serve(struct conn *c)
{
	for (;;) {
		int w = flush(c);
		if (w < 0 || (w == 1 && c->closing))
			return false;
		if (w == 0)
			return true;	/* back-pressure: wait for the output edge */
		size_t room;
		ssize_t n = read_in(c, &room);
		if (n == -1)
			return true;
		if (n <= 0)
			return false;	/* EOF or failure */
		answer(c, (size_t)n);
		if (!edge || (size_t)n < room) {	/* drained (or lt: one read per event) */
			w = flush(c);
			return w >= 0 && !(w == 1 && c->closing);
		}
	}
}

static void accept_all(int lfd)
{
	int one = 1;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EMFILE || errno == ENFILE)
				return;	/* (EMFILE: the backlog keeps it) */
			continue;	/* a failed connection */
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct conn *c = malloc(sizeof *c);
		if (!c) {
			close(fd);
			continue;
		}
		*c = (struct conn){ .fd = fd, .http = serving_http };
		if (c->http)
			http_conn_init(&c->h);
		struct epoll_event ev = { .events = EPOLLIN | (edge ? EPOLLOUT | EPOLLET : 0),
					  .data.ptr = c };
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			close(fd);
			free(c);
		}
	}
}

/* A listener on port (0: any) that shares it with the other loops'. */
static int listener(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, BACKLOG) != 0)
		die("listen");
	return fd;
}

static unsigned port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	if (getsockname(fd, (struct sockaddr *)&a, &len) != 0)
		die("getsockname");
	return ntohs(a.sin_port);
}

/* One loop: its own epoll instance serving its own listener. */
static void *loop_main(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		die("epoll_create1");
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) != 0)
		die("epoll_ctl");
	struct epoll_event evs[EVENTS];
	for (;;) {
		int n = epoll_wait(epfd, evs, EVENTS, -1);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (!c) {
				accept_all(lfd);
				continue;
			}
			if (!serve(c))
				conn_close(c);
		}
	}
	return NULL;
}

static bool parse_uint(const char *s, unsigned long max, unsigned long *v)
{
	char *end;
	errno = 0;
	*v = strtoul(s, &end, 10);
	return *s && !*end && !errno && *v <= max;
}

int main(int argc, char **argv)
{
	bool http = argc > 1 && strcmp(argv[1], "http-server") == 0;
	unsigned long port = 0, loops = 1;
	const char *env = getenv("EPOLL_LOOPS");
	if (env && (!parse_uint(env, MAX_LOOPS, &loops) || loops == 0)) {
		fprintf(stderr, "weft-epoll: EPOLL_LOOPS=%s: not a number in 1..%d\n", env,
			MAX_LOOPS);
		return 2;
	}
	if (argc < 3 || argc > 4 || (!http && strcmp(argv[1], "echo-server") != 0) ||
	    !parse_uint(argv[2], 65535, &port) ||
	    (argc == 4 && strcmp(argv[3], "et") && strcmp(argv[3], "lt"))) {
		fprintf(stderr, "usage: [EPOLL_LOOPS=N] weft-epoll echo-server|http-server PORT [et|lt]\n");
		return 2;
	}
	edge = argc < 4 || strcmp(argv[3], "et") == 0;
	serving_http = http;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* Every listener is bound before the port is announced, so no
	 * connection reaches a port with fewer loops than asked. */
	int lfds[MAX_LOOPS];
	lfds[0] = listener((unsigned)port);
	port = port_of(lfds[0]);
	for (unsigned long i = 1; i < loops; i++)
		lfds[i] = listener((unsigned)port);
	printf("listening on %lu\n", port);
	fflush(stdout);
	for (unsigned long i = 1; i < loops; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, loop_main, (void *)(intptr_t)lfds[i]) != 0)
			die("pthread_create");
	}
	loop_main((void *)(intptr_t)lfds[0]);
	return 0;
}
