/* SPDX-License-Identifier: MIT */
/*
 * weft-graceful — a line server that drains on SIGINT or SIGTERM, losing
 * no request and leaving no coroutine behind.  docs/embedding.md walks
 * through it; the drain itself is drain.c, which weft-http shares.
 *
 *   weft-graceful [PORT]     (0: any free port; default 7000)
 *
 * Each line a client sends is a request, answered with the line itself;
 * "sleep MS" is answered "slept MS" after MS milliseconds (a request that
 * takes a while, to see one in flight at the signal).
 *
 * Start-up: the signals are blocked before weft_init (drain_signals), so
 * every thread the runtime starts inherits the mask and they arrive only
 * through a signalfd, which a coroutine reads like any other fd.  The
 * listener comes from weft_listen; the acceptor spawns each connection
 * into a group.
 * Shutdown, when a signal comes (drain_on_signal): cancel the acceptor
 * (cancellation is sticky, so there is no race with a connection being
 * accepted), interrupt the connections waiting for their next line (an
 * interrupted read loses nothing), let the others finish the line they
 * hold, close each connection without a reset (drain_close), and cancel
 * what is left after DRAIN_S.  Then wait for the group, free it, return.
 * The main thread stops the runtime with weft_shutdown_until: a coroutine
 * that outlived the group (none here) would be cancelled after
 * SHUTDOWN_GRACE_S, and named if it ignored that.
 * A getaddrinfo-style blocking call is shown too: the greeting's host name
 * comes from gethostname(2) via weft_offload.
 */
#include <weft.h>

#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drain.h"

enum { DRAIN_S = 10, SHUTDOWN_GRACE_S = 5, LINE_MAX_ = 4096 };

static struct {
	weft_group *all;	/* every connection */
	char host[64];
} conns;

/* The answer to one line (without its newline), in out; its length. */
static int answer(const char *line, size_t len, char *out, size_t size)
{
	char *end;
	unsigned long ms;

	if (len > 6 && len < 16 && memcmp(line, "sleep ", 6) == 0 &&
	    (ms = strtoul(line + 6, &end, 10)) <= 60000 && end == line + len) {
		if (weft_sleep(weft_now() + (int64_t)ms * 1000000) != 0)
			return -1;	/* cancelled at the drain's deadline */
		return snprintf(out, size, "slept %lu\n", ms);
	}
	return snprintf(out, size, "%.*s\n", (int)len, line);
}

/* Answers the whole lines of buf[0..*len), keeping the rest; -1 on error. */
static int answer_lines(int fd, char *buf, size_t *len)
{
	char out[LINE_MAX_ + 2];
	char *p = buf, *nl;

	while ((nl = memchr(p, '\n', *len - (size_t)(p - buf))) != NULL) {
		int n = answer(p, (size_t)(nl - p), out, sizeof out);

		if (n < 0 || weft_write(fd, out, (size_t)n, -1) < 0)
			return -1;
		p = nl + 1;
	}
	*len -= (size_t)(p - buf);
	memmove(buf, p, *len);
	return *len < LINE_MAX_ ? 0 : -1;	/* a line too long: close */
}

static void connection(void *arg)
{
	struct drain_conn c;
	char buf[LINE_MAX_];
	size_t len;
	ssize_t n;

	drain_conn_join(&c, (int)(intptr_t)arg);
	weft_set_name("connection");
	len = (size_t)snprintf(buf, sizeof buf, "hello from %s\n", conns.host);
	n = weft_write(c.fd, buf, len, -1);
	len = 0;
	/* Between two lines the read is drain_idle_read: the drain may end
	 * it (ESHUTDOWN).  Within a line it is a plain read: the drain lets
	 * the client finish it, and answers it. */
	while (n >= 0) {
		n = len == 0 ? drain_idle_read(&c, buf, sizeof buf)
			     : weft_read(c.fd, buf + len, sizeof buf - len, -1);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (answer_lines(c.fd, buf, &len) != 0)
			n = -1;
	}
	if (n == 0)
		weft_close(c.fd);	/* the client closed first */
	else
		drain_close(c.fd);	/* we end it: no reset */
	drain_conn_leave(&c);
}

static void accept_loop(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	weft_set_name("acceptor");
	for (;;) {
		int fd = weft_accept(lfd, NULL, NULL, -1);
		if (fd < 0) {
			if (errno == ECANCELED)	/* the drain */
				return;
			perror("weft_accept");	/* EMFILE and the like back off inside */
			if (errno == ECONNABORTED || errno == EPROTO)
				continue;	/* that client gave up: the next one */
			return;
		}
		/* a member: the group frees it when it returns */
		if (!weft_group_spawn(conns.all, connection, (void *)(intptr_t)fd))
			weft_close(fd);
	}
}

static void lookup_host(void *unused)
{
	(void)unused;
	if (gethostname(conns.host, sizeof conns.host - 1) != 0)	/* may block (NSS) */
		strcpy(conns.host, "weft");
}

/* A runner waits for this line (the port, for port 0). */
static void say_listening(int lfd)
{
	struct sockaddr_storage a;
	socklen_t alen = sizeof a;
	char port[16] = "?";

	if (getsockname(lfd, (struct sockaddr *)&a, &alen) == 0)
		getnameinfo((struct sockaddr *)&a, alen, NULL, 0, port, sizeof port,
			    NI_NUMERICSERV);
	printf("listening on %s\n", port);
	fflush(stdout);
}

struct server {
	const char *port;
	int sigfd, status;
};

static void server_main(void *arg)
{
	struct server *s = arg;
	weft_co *acceptor = NULL;
	weft_set_name("main");
	int lfd = weft_listen(NULL, s->port, 1024, 0);
	conns.all = weft_group_new();
	if (lfd < 0 || !conns.all || weft_offload(lookup_host, NULL) != 0 ||
	    !(acceptor = weft_spawn(accept_loop, (void *)(intptr_t)lfd))) {
		perror("start-up");
		s->status = 1;
		weft_group_free(conns.all);
		return;
	}
	say_listening(lfd);

	/* until SIGINT or SIGTERM; then the drain, and the acceptor joined */
	if (drain_on_signal(s->sigfd, acceptor, conns.all, DRAIN_S * 1000000000LL) != 0)
		s->status = 1;	/* some had to be cancelled */
	weft_group_free(conns.all);	/* every member has returned */
	weft_close(lfd);
	weft_close(s->sigfd);
}

int main(int argc, char **argv)
{
	struct server s = { .port = argc > 1 ? argv[1] : "7000" };
	/* Before weft_init: the workers and helpers inherit the mask. */
	if ((s.sigfd = drain_signals()) < 0) {
		perror("signalfd");
		return 1;
	}
	weft_co *co = NULL;
	if (weft_init(NULL) != 0 || !(co = weft_spawn(server_main, &s)) || weft_join(co) != 0) {
		perror("weft");
		return 1;
	}
	/* Anything still running SHUTDOWN_GRACE_S from now is cancelled. */
	if (weft_shutdown_until(weft_now() + SHUTDOWN_GRACE_S * 1000000000LL) != 0) {
		perror("weft_shutdown_until");	/* the stragglers are named above */
		return 1;
	}
	return s.status;
}
