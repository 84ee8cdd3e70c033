/* Adversarial repro (issue 44 hooks review): a SIGSEGV handler installed
 * with SA_NODEFER and left by siglongjmp, in a coroutine, leaves the
 * hooks' per-thread handler depth raised on that worker thread for good
 * (signal.c: outer = 0 for SA_NODEFER, so nothing ever lowers it).  From
 * then on every coroutine on that worker is a "plain thread" to the hooks:
 * a blocking read on a tracked pipe blocks the worker in the real poll,
 * and with one worker its writer never runs.
 * Usage: nodefer_longjmp [nodefer|defer]   (exit 0: ok, 1: hang)
 * Build: see test/adv/README.md. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "weft.h"

static sigjmp_buf env;
static int use_nodefer = 1;
static int fds[2];

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

static void writer(void *arg)
{
	(void)arg;
	weft_sleep(20 * 1000 * 1000);
	write(fds[1], "x", 1);
}

static void *watchdog(void *arg)
{
	(void)arg;
	sleep(10);
	fprintf(stderr, "HANG: the read never returned (worker blocked in the real poll)\n");
	_exit(1);
}

static void body(void *arg)
{
	(void)arg;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_segv;
	sa.sa_flags = use_nodefer ? SA_NODEFER : 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	if (sigsetjmp(env, 1) == 0)
		*(volatile int *)0 = 1;	/* fault; the handler jumps back */
	fprintf(stderr, "recovered from the fault (%s)\n", use_nodefer ? "SA_NODEFER" : "no SA_NODEFER");
	if (pipe(fds) != 0) {	/* made in a coroutine: tracked */
		perror("pipe");
		exit(2);
	}
	weft_spawn(writer, NULL);
	char c;
	ssize_t n = read(fds[0], &c, 1);
	fprintf(stderr, "read returned %zd\n", n);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "defer") == 0)
		use_nodefer = 0;
	pthread_t t;
	pthread_create(&t, NULL, watchdog, NULL);
	int r = weft_main(body, NULL, &WEFT_CONFIG(.workers = 1));
	fprintf(stderr, "weft_main: %d\n", r);
	return r == 0 ? 0 : 3;
}
