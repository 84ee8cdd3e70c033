/* SPDX-License-Identifier: MIT */
/*
 * server.c — the listening socket, the accept loop and the drain on
 * SIGINT or SIGTERM (drain.h) of the example servers (see server.h).
 */
#include "server.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <weft.h>

#define DEFAULT_PORT "7000"
#define BACKLOG 4096 /* the kernel caps it at net.core.somaxconn */

#define DEFAULT_DRAIN_MS 5000

struct server {
	const char *name;
	int type; /* SOCK_STREAM or SOCK_DGRAM */
	int fd; /* listening (TCP) or bound (UDP), non-blocking */
	unsigned port;
	int sigfd; /* TCP: SIGINT and SIGTERM (drain_signals) */
	int64_t drain_ns;
	weft_group *conns; /* TCP: every connection */
	int status; /* main()'s */
};

/* The connection handler (TCP) or the socket's (UDP): one server per
 * process, so plain statics, and a coroutine needs no argument but its
 * socket. */
static void (*tcp_handler)(struct drain_conn *c);
static void (*udp_handler)(int fd);

static int fail(const char *name, const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", name, what, strerror(errno));
	return 1;
}

static int parse_port(const char *s, unsigned *port)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v > 65535)
		return -1;
	*port = (unsigned)v;
	return 0;
}

/* A server holds a descriptor per client: allow as many as we may. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* SO_REUSEADDR: a restarted server can bind while old connections of the
 * previous one are still in TIME_WAIT.  Non-blocking: weft_accept (TCP) or
 * weft_recvfrom (UDP) waits for it in the worker's epoll instead of
 * blocking the worker thread. */
static int open_socket(struct server *s)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_port = htons((uint16_t)s->port),
				    .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t len = sizeof addr;
	int one = 1;

	s->fd = socket(AF_INET, s->type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return fail(s->name, "socket");
	if (setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
		return fail(s->name, "SO_REUSEADDR");
	if (bind(s->fd, (struct sockaddr *)&addr, sizeof addr) != 0)
		return fail(s->name, "bind");
	if (s->type == SOCK_STREAM && listen(s->fd, BACKLOG) != 0)
		return fail(s->name, "listen");
	/* the port the kernel chose, for port 0 */
	if (getsockname(s->fd, (struct sockaddr *)&addr, &len) != 0)
		return fail(s->name, "getsockname");
	s->port = ntohs(addr.sin_port);
	return 0;
}

static void connection(void *fd)
{
	struct drain_conn c;

	drain_conn_join(&c, (int)(intptr_t)fd);
	tcp_handler(&c);
	drain_conn_leave(&c);
}

/* A runner waits for this line; stdout may be a pipe. */
static void say_listening(const struct server *s)
{
	printf("listening on %u\n", s->port);
	fflush(stdout);
}

/* Errors of one connection, not of the listening socket: accept(2) passes
 * on the network errors of the new connection, to be treated like EAGAIN.
 * (weft_accept itself retries ECONNABORTED, and backs off on EMFILE and the
 * like.)  Any other error would repeat at once: better stop. */
static bool one_connection_failed(int err)
{
	switch (err) {
	case EINTR:
	case EPROTO:
	case EPERM: /* a firewall rule */
	case ENETDOWN:
	case ENETUNREACH:
	case ENOPROTOOPT:
	case EHOSTDOWN:
	case EHOSTUNREACH:
	case ENONET:
		return true;
	default:
		return false;
	}
}

/* The accept loop, a coroutine like the connections: while it waits in
 * weft_accept, the worker runs them.  Cancelled by the drain. */
static void acceptor(void *p)
{
	struct server *s = p;

	for (;;) {
		int fd = weft_accept(s->fd, NULL, NULL, -1);

		if (fd < 0) {
			if (errno == ECANCELED)
				return;
			if (!one_connection_failed(errno))
				exit(fail(s->name, "accept"));
			continue;
		}
		/* a member: the group frees it when the client is done */
		if (weft_group_spawn(s->conns, connection, (void *)(intptr_t)fd) == NULL)
			weft_close(fd); /* out of memory: drop this client only */
	}
}

/* The TCP server's main coroutine: the acceptor, then the drain. */
static void tcp_main(void *p)
{
	struct server *s = p;
	weft_co *acc;

	s->conns = weft_group_new();
	acc = s->conns ? weft_spawn(acceptor, s) : NULL;
	if (acc == NULL) {
		s->status = fail(s->name, "spawn");
		weft_group_free(s->conns);
		return;
	}
	say_listening(s);
	drain_on_signal(s->sigfd, acc, s->conns, s->drain_ns);
	weft_group_free(s->conns);
	weft_close(s->fd);
	weft_close(s->sigfd);
	s->status = 0;
}

/* The UDP server's one coroutine: the handler, on the bound socket. */
static void datagrams(void *p)
{
	struct server *s = p;

	say_listening(s);
	udp_handler(s->fd);
}

/* The socket of type on the port of the command line; then run(&s) as
 * weft's main coroutine.  An exit status for main(). */
static int serve(int argc, char **argv, struct server *s, void (*run)(void *))
{
	const char *port = argc > 1 ? argv[1] : getenv("PORT");
	const char *drain_ms = getenv("DRAIN_MS");
	unsigned ms = DEFAULT_DRAIN_MS;

	if (argc > 2 || parse_port(port ? port : DEFAULT_PORT, &s->port) != 0 ||
	    (drain_ms && parse_port(drain_ms, &ms) != 0)) {
		fprintf(stderr, "usage: %s [PORT]   (else $PORT, else %s; "
			"$DRAIN_MS: 0..65535)\n", s->name, DEFAULT_PORT);
		return 2;
	}
	s->drain_ns = (int64_t)ms * 1000000;
	raise_fd_limit();
	if (open_socket(s) != 0)
		return 1;
	if (weft_main(run, s, NULL) != 0)
		return fail(s->name, "weft_main");
	return s->status;
}

int serve_tcp(int argc, char **argv, const char *name, void (*handle)(struct drain_conn *c))
{
	struct server s = { .name = name, .type = SOCK_STREAM, .status = 1 };

	tcp_handler = handle;
	/* before weft_init: every thread it starts inherits the mask */
	s.sigfd = drain_signals();
	if (s.sigfd < 0)
		return fail(name, "signalfd");
	return serve(argc, argv, &s, tcp_main);
}

int serve_udp(int argc, char **argv, const char *name, void (*handle)(int fd))
{
	struct server s = { .name = name, .type = SOCK_DGRAM, .status = 1 };

	udp_handler = handle;
	return serve(argc, argv, &s, datagrams); /* returns only on failure */
}
