/* SPDX-License-Identifier: MIT */
/*
 * weft-graceful — an echo server that shuts down gracefully on SIGINT or
 * SIGTERM, leaving no coroutine behind.  docs/embedding.md walks through it.
 *
 *   weft-graceful [PORT]     (0: any free port; default 7000)
 *
 * Start-up: the signals are blocked before weft_init, so every thread the
 * runtime starts inherits the mask and they arrive only through a signalfd,
 * which a coroutine reads like any other fd.
 * Shutdown, when a signal comes: cancel the group that holds the accept
 * loop and every connection (weft_group_cancel): the acceptor's weft_accept
 * returns ECANCELED, now or at its next call (cancellation is sticky, so
 * there is no race with a connection being accepted), each connection
 * unwinds through its own error path (its parked weft_read returns
 * ECANCELED), and a connection the acceptor spawns meanwhile starts
 * cancelled.  Wait for the group, free it, print the runtime's stats,
 * return.  The main thread then stops the runtime with
 * weft_shutdown_until: a coroutine that outlived the group (none here) would
 * be cancelled after SHUTDOWN_GRACE_S, and named if it ignored that.
 * A getaddrinfo-style blocking call is shown too: the greeting's host name
 * comes from gethostname(2) via weft_offload.
 */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include <weft.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

enum { SHUTDOWN_GRACE_S = 5 };

static struct {
	weft_group *all;	/* the acceptor and every connection */
	char host[64];
} conns;

static void connection(void *arg)
{
	int fd = (int)(intptr_t)arg;
	weft_set_name("connection");
	char buf[4096];
	int len = snprintf(buf, sizeof buf, "hello from %s\n", conns.host);
	ssize_t n = weft_write(fd, buf, (size_t)len, -1);
	while (n >= 0 && (n = weft_read(fd, buf, sizeof buf, -1)) > 0)
		n = weft_write(fd, buf, (size_t)n, -1);
	/* n < 0: the client went away, or we were cancelled (ECANCELED) */
	weft_close(fd);
}

static void accept_loop(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	weft_set_name("acceptor");
	for (;;) {
		int fd = weft_accept(lfd, NULL, NULL, -1);
		if (fd < 0) {
			if (errno == ECANCELED)	/* shutting down */
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

static int listen_on(int port)
{
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	socklen_t alen = sizeof a;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1024) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
		perror("listen");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	printf("listening on %d\n", ntohs(a.sin6_port));
	fflush(stdout);
	return fd;
}

static void lookup_host(void *unused)
{
	(void)unused;
	if (gethostname(conns.host, sizeof conns.host - 1) != 0)	/* may block (NSS) */
		strcpy(conns.host, "weft");
}

struct server {
	int port, sigfd, status;
};

static void server_main(void *arg)
{
	struct server *s = arg;
	weft_set_name("main");
	conns.all = weft_group_new();
	int lfd = listen_on(s->port);
	if (!conns.all || lfd < 0 || weft_offload(lookup_host, NULL) != 0 ||
	    !weft_group_spawn(conns.all, accept_loop, (void *)(intptr_t)lfd)) {
		s->status = 1;
		weft_group_free(conns.all);
		return;
	}

	struct signalfd_siginfo si;	/* park until SIGINT or SIGTERM */
	if (weft_read(s->sigfd, &si, sizeof si, -1) != (ssize_t)sizeof si)
		perror("signalfd");	/* shut down all the same */
	else
		fprintf(stderr, "signal %u: shutting down\n", si.ssi_signo);

	weft_group_cancel(conns.all);	/* the acceptor and every connection */
	weft_group_wait(conns.all, -1);	/* each has closed its fd */
	weft_group_free(conns.all);
	weft_close(lfd);
	weft_close(s->sigfd);

	/* The group's wait returns once the last member has returned, while it
	 * may still be switching out: wait the moment that takes, 1 s at most. */
	weft_stats st = { .size = sizeof st };
	for (int i = 0; i < 1000 && weft_stats_get(&st) == 0 && st.live > 1; i++)
		weft_sleep(weft_now() + 1000000);
	fprintf(stderr, "shut down: %llu coroutines left besides main\n",
		(unsigned long long)(st.live - 1));
}

int main(int argc, char **argv)
{
	struct server s = { .port = argc > 1 ? atoi(argv[1]) : 7000 };
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	/* Before weft_init: the workers and helpers inherit the mask. */
	if (pthread_sigmask(SIG_BLOCK, &stop, NULL) != 0 ||
	    (s.sigfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
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
