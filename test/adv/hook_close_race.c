/* SPDX-License-Identifier: MIT */
/*
 * hook_close_race.c — issue 44 finding 5 through the hooks: a hooked
 * close() or dup2() onto fd N from a plain thread, held (delay_shim.c)
 * between the hooks' decision and the real call, while a coroutine's
 * hooked read(N) waits and so registers N's file in weft; the real call
 * then drops the kernel's registration while weft's entry says registered,
 * and the number's next file inherits it: its read parks and is never
 * woken by readiness (EAGAIN at its SO_RCVTIMEO, the byte unread).
 *
 *   hook_close_race close        close(N), N never waited on before
 *   hook_close_race dup2         dup2(M, N), N never waited on before
 *   hook_close_race dup2-waited  dup2(M, N), N waited on (weft_release path)
 *   hook_close_race close-waited close(N), N waited on (weft_close: the
 *                                fixed path; the control, expected to pass)
 *   hook_close_race close-racing-wait
 *                                close(N) from a plain thread, N waited on:
 *                                the hooks run weft_close in a coroutine
 *                                made for it, and a read that starts waiting
 *                                meanwhile (held before weft_close's first
 *                                step) marks N registered in the hooks
 *                                again; weft_close's own close(2) is then
 *                                the hooks' close(), which runs weft_close
 *                                again in the same coroutine: it waits for
 *                                FD_GEN_CLOSED to end, which only the outer
 *                                weft_close can end.  The close never
 *                                returns.
 *
 * Exit 0: the next file's read got its byte (close-racing-wait: the close
 * returned); 1: the bug; 2: not set up.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "weft.h"

void shim_arm(int what, int fd);	/* 0: close/dup2/dup3 before; 1: read after; 2: F_GETFD */
int shim_in_call(int what);
void shim_release(int what);

static const int64_t MS = 1000 * 1000;
static const char *mode;
static int status = 2;

#define FAIL_SETUP(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(2); } while (0)

/* Whether some epoll instance of this process watches fd number fd. */
static bool epoll_watches(int fd)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	bool found = false;
	while (!found && d && (de = readdir(d))) {
		char path[300], link[64], line[256];
		snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
		ssize_t n = readlink(path, link, sizeof link - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (strcmp(link, "anon_inode:[eventpoll]") != 0)
			continue;
		snprintf(path, sizeof path, "/proc/self/fdinfo/%s", de->d_name);
		FILE *f = fopen(path, "r");
		int tfd;
		while (f && fgets(line, sizeof line, f))
			if (sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd)
				found = true;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

static void set_rcvtimeo(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
		FAIL_SETUP("setsockopt: %s", strerror(errno));
}

struct rd {
	int fd;
	ssize_t r;
	int err;
	char byte;
	int64_t took;
};

static void reader(void *arg)
{
	struct rd *rd = arg;
	int64_t t0 = weft_now();
	rd->r = read(rd->fd, &rd->byte, 1);	/* hooked: parks */
	rd->err = errno;
	rd->took = weft_now() - t0;
}

struct op {
	int n, from;
};

static atomic_int op_done;

static void *plain_op(void *arg)
{
	struct op *op = arg;
	if (strncmp(mode, "close", 5) == 0)
		close(op->n);	/* hooked */
	else if (dup2(op->from, op->n) != op->n)	/* hooked */
		FAIL_SETUP("dup2: %s", strerror(errno));
	atomic_store(&op_done, 1);
	return NULL;
}

static void write_later(void *arg)
{
	int fd = *(int *)arg;
	weft_sleep(weft_now() + 50 * MS);
	if (write(fd, "x", 1) != 1)
		FAIL_SETUP("write: %s", strerror(errno));
}

static atomic_int plain_done;

static void *plain_close(void *arg)
{
	close(*(int *)arg);	/* hooked: weft_close in a coroutine made for it */
	atomic_store(&plain_done, 1);
	return NULL;
}

static void close_racing_wait(int n, int peer)
{
	(void)peer;
	set_rcvtimeo(n, 300);
	shim_arm(1, n);	/* R1: EAGAIN, held before it waits */
	struct rd r1 = { .fd = n };
	weft_co *c1 = weft_spawn(reader, &r1);
	while (!shim_in_call(1))
		weft_yield();
	shim_arm(2, n);	/* the plain thread's close: weft_close held at its start */
	pthread_t t;
	pthread_create(&t, NULL, plain_close, &n);
	while (!shim_in_call(2))
		weft_yield();
	shim_release(1);	/* R1 waits: the hooks note N registered again */
	/* (N is in epoll already, from the first wait: let R1 get parked, well
	 * within its 300 ms) */
	weft_sleep(weft_now() + 20 * MS);
	fprintf(stderr, "%s: R1 waits on fd %d\n", mode, n);
	shim_release(2);
	for (int i = 0; i < 5000 && !atomic_load(&plain_done); i++)
		weft_sleep(weft_now() + MS);
	weft_join(c1);
	fprintf(stderr, "%s: R1's read: %zd, errno %d (%s)\n", mode, r1.r, r1.err, strerror(r1.err));
	if (!atomic_load(&plain_done)) {
		fprintf(stderr, "%s: FAIL: the plain thread's close(%d) has not returned after 5 s "
				"(weft_close re-entered through the hooks' close(), waiting for its "
				"own FD_GEN_CLOSED)\n", mode, n);
		_exit(1);	/* the runtime cannot stop: a coroutine spins */
	}
	pthread_join(t, NULL);
	status = 0;
	fprintf(stderr, "%s: ok\n", mode);
}

static void test(void *arg)
{
	(void)arg;
	bool waited = strstr(mode, "-waited") != NULL;
	int sv[2], nv[2];
	/* made in a coroutine: the hooks track them (non-blocking for real) */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, nv) != 0)
		FAIL_SETUP("socketpair");
	int n = sv[0];
	bool racing = strcmp(mode, "close-racing-wait") == 0;
	if (waited || racing) {	/* a wait on N: the hooks note it registered */
		weft_co *w = weft_spawn(write_later, &sv[1]);
		char c;
		if (read(n, &c, 1) != 1)
			FAIL_SETUP("first read");
		weft_join(w);
	}
	if (racing) {
		close_racing_wait(n, sv[1]);
		return;
	}
	set_rcvtimeo(n, 300);
	/* R1's hooked read(N) has decided N is a hooked blocking fd and got
	 * EAGAIN: held before it waits */
	shim_arm(1, n);
	struct rd r1 = { .fd = n };
	weft_co *c1 = weft_spawn(reader, &r1);
	while (!shim_in_call(1))
		weft_yield();
	/* a plain thread's close(N) or dup2(M, N): held between the hooks'
	 * decision and the real call */
	struct op op = { n, nv[0] };
	shim_arm(0, n);
	pthread_t t;
	pthread_create(&t, NULL, plain_op, &op);
	while (!shim_in_call(0))
		weft_yield();
	shim_release(1);	/* R1 waits: weft registers N */
	for (int i = 0; i < 1000 && !epoll_watches(n); i++)
		weft_sleep(weft_now() + MS);
	bool old_registered = epoll_watches(n);
	fprintf(stderr, "%s: a read that got EAGAIN before the %s and waits during it %s fd %d's "
			"old file\n", mode, strncmp(mode, "close", 5) == 0 ? "close" : "dup2",
		old_registered ? "registered" : "did not register", n);
	shim_release(0);
	while (!atomic_load(&op_done))	/* (a pthread_join here would block the worker) */
		weft_sleep(weft_now() + MS);
	pthread_join(t, NULL);
	weft_cancel(c1);
	weft_join(c1);
	fprintf(stderr, "%s: that read: %zd, errno %d (%s)\n", mode, r1.r, r1.err, strerror(r1.err));
	/* the number's next file */
	int peer;
	if (strncmp(mode, "close", 5) == 0) {
		int q[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, q) != 0)
			FAIL_SETUP("socketpair");
		if (q[0] == n)
			peer = q[1];
		else if (q[1] == n)
			peer = q[0];
		else
			FAIL_SETUP("the number was not reused (%d %d, wanted %d)", q[0], q[1], n);
	} else {
		peer = nv[1];	/* N is now a copy of nv[0] */
	}
	set_rcvtimeo(n, 1000);
	fprintf(stderr, "%s: before the next file's first call, epoll watches fd %d: %s\n", mode,
		n, epoll_watches(n) ? "yes" : "no");
	struct rd r2 = { .fd = n };
	weft_co *w = weft_spawn(write_later, &peer);
	weft_co *c2 = weft_spawn(reader, &r2);
	weft_join(w);
	weft_join(c2);
	fprintf(stderr, "%s: the next file's read: %zd, errno %d (%s), after %.0f ms; epoll watches "
			"fd %d: %s\n", mode, r2.r, r2.r < 0 ? r2.err : 0, r2.r < 0 ? strerror(r2.err) : "-",
		(double)r2.took / 1e6, n, epoll_watches(n) ? "yes" : "no");
	status = r2.r == 1 && r2.byte == 'x' ? 0 : 1;
	fprintf(stderr, "%s: %s\n", mode, status == 0 ? "ok" :
		"FAIL: the byte was there, weft never registered the number's next file");
}

int main(int argc, char **argv)
{
	if (argc != 2)
		FAIL_SETUP("usage: %s close|dup2|dup2-waited|close-waited|close-racing-wait", argv[0]);
	mode = argv[1];
	alarm(30);	/* watchdog */
	if (weft_main(test, NULL, &WEFT_CONFIG(.workers = 2)) != 0)
		FAIL_SETUP("weft_main: %s", strerror(errno));
	return status;
}
