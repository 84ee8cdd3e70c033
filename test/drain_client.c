/* SPDX-License-Identifier: MIT */
/*
 * drain_client — the clients of test/drain.sh: keep-alive HTTP/1.1
 * connections to weft-http, in four kinds, and the SIGTERM to the server
 * in their midst.
 *
 *   drain_client PORT SERVER_PID
 *
 *   idle      one request, then idle: the drain must close them cleanly
 *             (end of file, never a reset);
 *   racing    one request, then idle until the SIGTERM is sent, then a
 *             request at once, racing the drain: answered ("Connection:
 *             close", then end of file), or end of file with no byte of
 *             an answer (the server never read it);
 *   busy      requests back to back, through the SIGTERM: the same rule
 *             for their last request;
 *   in flight one request and half of a second in one write (the server
 *             has read both once the first is answered); the second half
 *             after the SIGTERM: it must be answered, with "Connection:
 *             close", then end of file.
 *
 * Every answer is checked byte by byte.  Prints "clients: answered N
 * requests" (to compare with the server's count) and exits 0, or names
 * the first failure and exits 1.  A watchdog deadline turns a hang into a
 * failure.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <weft.h>

#include "../examples/http_proto.h"

enum { IDLE = 60, RACING = 60, BUSY = 30, IN_FLIGHT = 30 };
enum kind { K_IDLE, K_RACING, K_BUSY, K_IN_FLIGHT };

#define WATCHDOG_NS (120 * 1000000000LL)
#define REQUEST "GET / HTTP/1.1\r\nHost: weft\r\n\r\n"
#define HALF 14 /* the in-flight request's first part: its request line */

static struct {
	const char *port;
	pid_t server;
	int64_t deadline; /* the watchdog */
	weft_wg *ready; /* every client has had its first answer */
	weft_wg *killed; /* the SIGTERM has been sent */
	atomic_bool killed_flag;
	atomic_ullong answered, unanswered;
	atomic_int failures;
} t;

static void fail(int fd, const char *kind, const char *what)
{
	if (atomic_fetch_add(&t.failures, 1) < 10)
		fprintf(stderr, "FAIL: %s client (fd %d): %s: %s\n", kind, fd, what,
			errno ? strerror(errno) : "-");
}

/* The server's end of file, and nothing before it. */
static bool eof(int fd)
{
	char c;
	ssize_t n = weft_read(fd, &c, 1, t.deadline);

	errno = n > 0 ? EPROTO : n == 0 ? 0 : errno;
	return n == 0;
}

static bool send_all(int fd, const char *p, size_t len)
{
	return weft_write(fd, p, len, t.deadline) == (ssize_t)len;
}

/* A request: its answer, keep-alive or closing (then end of file), or, if
 * it may race the drain, end of file before any byte.  A request sent
 * before the SIGTERM is in the server's socket before the drain begins
 * (loopback delivers in the sender's call), so the server reads it. */
static int exchange(int fd, const char *name, const char *req, bool may_race)
{
	bool unanswered_ok;

	if (!send_all(fd, req, strlen(req))) {
		fail(fd, name, "send");
		return -1;
	}
	/* read after the send: false, and the send came before the kill */
	unanswered_ok = may_race && atomic_load(&t.killed_flag);
	/* the answer's first bytes tell which of the two it is */
	char head[512];
	size_t kl = strlen(http_hello), cl = strlen(http_hello_close);
	ssize_t n = weft_read(fd, head, 1, t.deadline);

	if (n == 0 && unanswered_ok) {
		atomic_fetch_add(&t.unanswered, 1);
		return 0;
	}
	if (n <= 0) {
		if (n == 0)
			errno = 0;
		fail(fd, name, n == 0 ? "end of file instead of an answer" : "read");
		return -1;
	}
	/* read up to the shorter answer's length, then decide */
	size_t got = 1;
	while (got < kl) {
		n = weft_read(fd, head + got, kl - got, t.deadline);
		if (n <= 0) {
			fail(fd, name, "answer cut short");
			return -1;
		}
		got += (size_t)n;
	}
	if (memcmp(head, http_hello, kl) == 0) {
		atomic_fetch_add(&t.answered, 1);
		return 1;
	}
	while (got < cl) {
		n = weft_read(fd, head + got, cl - got, t.deadline);
		if (n <= 0) {
			fail(fd, name, "answer cut short");
			return -1;
		}
		got += (size_t)n;
	}
	if (memcmp(head, http_hello_close, cl) != 0) {
		errno = EPROTO;
		fail(fd, name, "wrong answer");
		return -1;
	}
	atomic_fetch_add(&t.answered, 1);
	if (!eof(fd)) {
		fail(fd, name, "no end of file after Connection: close");
		return -1;
	}
	return 0;
}

static const char *const names[] = { "idle", "racing", "busy", "in-flight" };

static void client(void *arg)
{
	enum kind k = (enum kind)(intptr_t)arg;
	const char *name = names[k];
	int fd = weft_dial("127.0.0.1", t.port, t.deadline);
	int r;

	if (fd < 0) {
		fail(fd, name, "dial");
		weft_wg_done(t.ready);
		return;
	}
	if (k == K_IN_FLIGHT) {
		char first[sizeof REQUEST * 2];

		snprintf(first, sizeof first, "%s%.*s", REQUEST, HALF, REQUEST);
		r = exchange(fd, name, first, false);
	} else {
		r = exchange(fd, name, REQUEST, false);
	}
	weft_wg_done(t.ready);
	if (r != 1)
		goto out;
	switch (k) {
	case K_IDLE:
		if (!eof(fd))
			fail(fd, name, "not closed cleanly");
		break;
	case K_RACING:
		weft_wg_wait(t.killed, t.deadline);
		exchange(fd, name, REQUEST, true);
		break;
	case K_BUSY:
		while ((r = exchange(fd, name, REQUEST, true)) == 1)
			;
		break;
	case K_IN_FLIGHT:
		weft_wg_wait(t.killed, t.deadline);
		weft_sleep(weft_now() + 50 * 1000000LL); /* the drain under way */
		r = exchange(fd, name, &REQUEST[HALF], false);
		if (r == 1)
			fail(fd, name, "kept alive by a draining server");
		break;
	}
out:
	weft_close(fd);
}

static void run(void *unused)
{
	weft_group *g = weft_group_new();
	static const int counts[] = { IDLE, RACING, BUSY, IN_FLIGHT };

	(void)unused;
	t.deadline = weft_now() + WATCHDOG_NS;
	t.ready = weft_wg_new();
	t.killed = weft_wg_new();
	weft_wg_add(t.ready, IDLE + RACING + BUSY + IN_FLIGHT);
	weft_wg_add(t.killed, 1);
	for (int k = 0; k < 4; k++)
		for (int i = 0; i < counts[k]; i++)
			if (!weft_group_spawn(g, client, (void *)(intptr_t)k))
				fail(-1, names[k], "spawn");
	if (weft_wg_wait(t.ready, t.deadline) != 0)
		fail(-1, "every", "ready");
	atomic_store(&t.killed_flag, true);
	if (kill(t.server, SIGTERM) != 0)
		fail(-1, "the", "kill");
	weft_wg_done(t.killed);
	if (weft_group_wait(g, t.deadline) != 0) {
		fail(-1, "some", "still running at the watchdog's deadline");
		weft_group_cancel(g);
	}
	weft_group_free(g);
	weft_wg_free(t.ready);
	weft_wg_free(t.killed);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: drain_client PORT SERVER_PID\n");
		return 2;
	}
	t.port = argv[1];
	t.server = (pid_t)atoi(argv[2]);
	if (weft_main(run, NULL, NULL) != 0) {
		perror("weft_main");
		return 1;
	}
	printf("clients: answered %llu requests (%llu unanswered, ended cleanly)\n",
	       atomic_load(&t.answered), atomic_load(&t.unanswered));
	return atomic_load(&t.failures) ? 1 : 0;
}
