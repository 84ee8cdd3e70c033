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
 * Shutdown, when a signal comes: cancel the accept loop (its weft_accept
 * returns ECANCELED, now or at its next call: cancellation is sticky, so
 * there is no race with a connection being accepted), close the listening
 * socket, cancel every connection's coroutine (each unwinds
 * through its own error path: its parked weft_read returns ECANCELED), wait
 * for them all with a wait group, print the runtime's stats, return.
 * A getaddrinfo-style blocking call is shown too: the greeting's host name
 * comes from gethostname(2) via weft_offload.
 */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include <weft.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

enum { MAX_CONNS = 4096 };

/* The live connections, so that shutdown can cancel them.  A connection
 * leaves the set (under the mutex) before its coroutine returns, so every
 * handle in it belongs to a coroutine that has not finished yet.  Once
 * cancelled, a coroutine cannot lock a mutex any more (every call that could
 * block fails with ECANCELED): shutdown cancels under the mutex and never
 * looks at the set again, so a cancelled connection just leaves it as is. */
static struct {
	weft_mutex *lock;
	weft_co *co[MAX_CONNS];
	int fd[MAX_CONNS];
	unsigned n;
	weft_wg *running;
	char host[64];
} conns;

static void conn_leave(weft_co *self)
{
	if (weft_mutex_lock(conns.lock) != 0)
		return;	/* ECANCELED: shutting down, the set is no longer used */
	for (unsigned i = 0; i < conns.n; i++) {
		if (conns.co[i] == self) {
			conns.n--;
			conns.co[i] = conns.co[conns.n];
			conns.fd[i] = conns.fd[conns.n];
			break;
		}
	}
	weft_mutex_unlock(conns.lock);
}

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
	conn_leave(weft_self());
	weft_close(fd);
	weft_wg_done(conns.running);
}

/* Registers and starts a connection's coroutine; false if full. */
static bool conn_start(int fd)
{
	if (weft_mutex_lock(conns.lock) != 0)
		return false;	/* ECANCELED: the acceptor is shutting down */
	bool ok = conns.n < MAX_CONNS;
	weft_co *co = NULL;
	if (ok) {
		weft_wg_add(conns.running, 1);
		co = weft_spawn(connection, (void *)(intptr_t)fd);
		ok = co != NULL;
		if (!ok)
			weft_wg_done(conns.running);
	}
	if (ok) {
		conns.co[conns.n] = co;
		conns.fd[conns.n++] = fd;
		weft_detach(co);	/* it frees itself; shutdown waits on the wait group */
	}
	weft_mutex_unlock(conns.lock);
	return ok;
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
		if (!conn_start(fd))
			weft_close(fd);
	}
}

static void cancel_connections(void)
{
	weft_mutex_lock(conns.lock);
	for (unsigned i = 0; i < conns.n; i++)
		weft_cancel(conns.co[i]);
	weft_mutex_unlock(conns.lock);
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
	conns.lock = weft_mutex_new();
	conns.running = weft_wg_new();
	int lfd = listen_on(s->port);
	if (!conns.lock || !conns.running || lfd < 0 || weft_offload(lookup_host, NULL) != 0) {
		s->status = 1;
		return;
	}
	weft_co *acceptor = weft_spawn(accept_loop, (void *)(intptr_t)lfd);
	if (!acceptor) {
		s->status = 1;
		return;
	}

	struct signalfd_siginfo si;	/* park until SIGINT or SIGTERM */
	if (weft_read(s->sigfd, &si, sizeof si, -1) != (ssize_t)sizeof si)
		perror("signalfd");	/* shut down all the same */
	else
		fprintf(stderr, "signal %u: shutting down\n", si.ssi_signo);

	weft_cancel(acceptor);		/* its weft_accept returns ECANCELED */
	weft_join(acceptor);		/* no new connection after this */
	weft_close(lfd);
	cancel_connections();
	weft_wg_wait(conns.running, -1);
	weft_close(s->sigfd);

	/* weft_wg_done is each connection's last call; it returns right after
	 * (it is detached): wait the moment that takes, 1 s at most. */
	weft_stats st = { .size = sizeof st };
	for (int i = 0; i < 1000 && weft_stats_get(&st) == 0 && st.live > 1; i++)
		weft_sleep(weft_now() + 1000000);
	fprintf(stderr, "shut down: %llu coroutines left besides main\n",
		(unsigned long long)(st.live - 1));
	weft_wg_free(conns.running);
	weft_mutex_free(conns.lock);
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
	if (weft_main(server_main, &s, NULL) != 0) {
		perror("weft_main");
		return 1;
	}
	return s.status;
}
