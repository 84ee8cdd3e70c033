/* SPDX-License-Identifier: MIT */
/*
 * drain.c — a server's shutdown that loses no request (see drain.h).
 *
 * Each connection's state is one atomic word: BUSY, IDLE (waiting in
 * drain_idle_read) or DRAINING.  The drain swaps every registered
 * connection's state to DRAINING and interrupts those it found IDLE, and
 * only those; a connection's read, when it returns, swaps IDLE back to
 * BUSY, and failing that knows the drain has interrupted it or is about
 * to.  Its read may have returned data all the same (the request arrived
 * as the interrupt did), and the interrupt then waits for the next wait,
 * which could be a weft_write: the connection takes it at once, in a
 * sleep that only the interrupt (or the deadline's cancel) ends.
 *
 * The registry is a list under a plain mutex, held for a few instructions
 * and never across a wait: the drain interrupts a connection while it
 * holds the lock, and a connection leaves the list before its coroutine
 * returns, so the handle is valid while the drain uses it.
 */
#include "drain.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

enum { BUSY, IDLE, DRAINING };

#define LINGER_NS 1000000000LL /* drain_close's wait for the client's close */

/* One server per process: the registry is a static. */
static struct {
	pthread_mutex_t lock;
	struct drain_conn head; /* a circular list's anchor */
	bool draining;
} reg = { .lock = PTHREAD_MUTEX_INITIALIZER, .head = { .prev = &reg.head, .next = &reg.head } };

int drain_signals(void)
{
	sigset_t stop;

	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	errno = pthread_sigmask(SIG_BLOCK, &stop, NULL);
	if (errno != 0)
		return -1;
	return signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
}

void drain_conn_join(struct drain_conn *c, int fd)
{
	c->fd = fd;
	c->co = weft_self();
	c->last_read = false;
	pthread_mutex_lock(&reg.lock);
	atomic_init(&c->state, reg.draining ? DRAINING : BUSY);
	c->next = &reg.head;
	c->prev = reg.head.prev;
	c->prev->next = c;
	reg.head.prev = c;
	pthread_mutex_unlock(&reg.lock);
}

void drain_conn_leave(struct drain_conn *c)
{
	pthread_mutex_lock(&reg.lock);
	c->prev->next = c->next;
	c->next->prev = c->prev;
	pthread_mutex_unlock(&reg.lock);
}

bool drain_conn_closing(const struct drain_conn *c)
{
	return atomic_load(&c->state) == DRAINING;
}

/* The drain's interrupt is certain once the state says DRAINING: take it
 * now, so that no later wait of this connection (a write) gets it. */
static void take_interrupt(void)
{
	int err = errno;

	weft_sleep(-1); /* EINTR (or ECANCELED: the deadline) */
	errno = err;
}

ssize_t drain_idle_read(struct drain_conn *c, void *buf, size_t len)
{
	int expected = BUSY;
	ssize_t n;

	if (c->last_read) {
		errno = ESHUTDOWN;
		return -1;
	}
	if (atomic_compare_exchange_strong(&c->state, &expected, IDLE)) {
		n = weft_read(c->fd, buf, len, -1);
		expected = IDLE;
		if (atomic_compare_exchange_strong(&c->state, &expected, BUSY))
			return n;
		c->last_read = true;
		if (n >= 0 || errno != EINTR) {
			take_interrupt(); /* the read ended for its own reason */
			return n;
		}
	}
	/* Draining: what the client sent before it could know is answered; a
	 * deadline already past reads without waiting. */
	c->last_read = true;
	n = weft_read(c->fd, buf, len, 0);
	if (n < 0 && errno == ETIMEDOUT)
		errno = ESHUTDOWN;
	return n;
}

void drain_close(int fd)
{
	char discard[4096];
	int64_t deadline = weft_now() + LINGER_NS;

	if (shutdown(fd, SHUT_WR) == 0)
		while (weft_read(fd, discard, sizeof discard, deadline) > 0)
			;
	weft_close(fd);
}

void drain_start(void)
{
	pthread_mutex_lock(&reg.lock);
	reg.draining = true;
	for (struct drain_conn *c = reg.head.next; c != &reg.head; c = c->next)
		if (atomic_exchange(&c->state, DRAINING) == IDLE)
			weft_interrupt(c->co);
	pthread_mutex_unlock(&reg.lock);
}

ssize_t drain_on_signal(int sigfd, weft_co *acceptor, weft_group *conns, int64_t grace_ns)
{
	struct signalfd_siginfo si;
	int64_t deadline;
	ssize_t left = 0;

	if (weft_read(sigfd, &si, sizeof si, -1) != (ssize_t)sizeof si)
		perror("signalfd"); /* drain all the same */
	else
		fprintf(stderr, "signal %u: draining\n", si.ssi_signo);
	deadline = weft_now() + grace_ns;
	weft_cancel(acceptor); /* sticky: no race with an accept under way */
	weft_join(acceptor);
	drain_start();
	if (weft_group_wait(conns, deadline) != 0) {
		left = weft_group_count(conns);
		weft_group_cancel(conns);
		weft_group_wait(conns, -1);
	}
	fprintf(stderr, "drained: %zd connections cancelled at the deadline\n", left);
	return left;
}
