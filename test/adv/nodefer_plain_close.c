/* Adversarial repro (issue 44 hooks review), the same root cause as
 * nodefer_longjmp.c seen from a plain thread: after an SA_NODEFER handler
 * left by siglongjmp, the thread counts as inside a handler for good, so
 * its close() of a tracked socket that a coroutine waited on is the real
 * close(2), behind weft's back (fdstate.c: a handler never writes the
 * table).  weft still believes the number registered in its epoll; the
 * next socket of that number, made and read in a coroutine, parks forever
 * though its data has arrived.
 * Usage: nodefer_plain_close [nodefer|defer]   (exit 0: ok, 1: hang)
 * Build: see test/adv/README.md. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weft.h"

static int use_nodefer = 1;
static int sv[2];
static sigjmp_buf env;

static void on_usr1(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

static void writer(void *arg)
{
	weft_sleep(20 * 1000 * 1000);
	write(*(int *)arg, "x", 1);
}

/* A socket pair made in a coroutine (tracked), its first end read after
 * it had to wait (registered in weft's epoll). */
static void pair_and_wait(void *arg)
{
	(void)arg;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		exit(2);
	weft_co *w = weft_spawn(writer, &sv[1]);
	char c;
	ssize_t n = read(sv[0], &c, 1);
	weft_join(w);
	fprintf(stderr, "socket pair %d,%d: read %zd\n", sv[0], sv[1], n);
}

static void *watchdog(void *arg)
{
	(void)arg;
	sleep(10);
	fprintf(stderr, "HANG: the second pair's read never returned\n");
	_exit(1);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "defer") == 0)
		use_nodefer = 0;
	if (weft_init(&WEFT_CONFIG(.workers = 2)) != 0)
		return 3;
	weft_join(weft_spawn(pair_and_wait, NULL));
	int first = sv[0];

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = use_nodefer ? SA_NODEFER : 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	if (sigsetjmp(env, 1) == 0)
		raise(SIGUSR1);
	fprintf(stderr, "left the handler (%s); closing %d and %d\n",
		use_nodefer ? "SA_NODEFER" : "no SA_NODEFER", sv[0], sv[1]);
	close(sv[0]);
	close(sv[1]);

	pthread_t t;
	pthread_create(&t, NULL, watchdog, NULL);
	weft_join(weft_spawn(pair_and_wait, NULL));
	if (sv[0] != first)
		fprintf(stderr, "(the number was not reused: %d, not %d)\n", sv[0], first);
	weft_shutdown();
	fprintf(stderr, "ok\n");
	return 0;
}
