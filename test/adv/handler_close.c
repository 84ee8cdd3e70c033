/* Adversarial repro (issue 44 hooks review): close() in a signal handler
 * the hooks did not see installed (sigset, bsd_signal, sysv_signal, or any
 * handler under ThreadSanitizer) takes the fd table's mutex, which the
 * interrupted hooked call may hold: the thread deadlocks on itself.  A
 * plain thread dup()s and close()s a tracked fd in a loop; another thread
 * signals it; the handler dup()s and close()s the same fd.
 * Usage: handler_close [sigaction|sigset]   (exit 0: ok, 1: deadlock)
 * Build: see test/adv/README.md. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft.h"

static int fds[2];
static volatile unsigned long loops, handled;
static volatile int stop, kicked, finished;
static pthread_t looper;

static void on_usr1(int sig)
{
	(void)sig;
	int d = dup(fds[0]);
	close(d);
	handled++;
}

static void *loop(void *arg)
{
	(void)arg;
	while (!stop) {
		int d = dup(fds[0]);
		close(d);
		loops++;
	}
	finished = 1;
	return NULL;
}

static void *kicker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 5000; i++) {
		pthread_kill(looper, SIGUSR1);
		usleep(200);
	}
	kicked = 1;
	return NULL;
}

static void body(void *arg)
{
	(void)arg;
	if (pipe(fds) != 0)	/* made in a coroutine: tracked */
		exit(2);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "sigset") == 0)
		sigset(SIGUSR1, on_usr1);
	else
		signal(SIGUSR1, on_usr1);
	if (weft_init(&WEFT_CONFIG(.workers = 1)) != 0)
		return 3;
	weft_join(weft_spawn(body, NULL));
	pthread_t k;
	pthread_create(&looper, NULL, loop, NULL);
	pthread_create(&k, NULL, kicker, NULL);
	unsigned long last = ~0ul;
	for (int still = 0; !finished; ) {
		if (kicked)
			stop = 1;
		sleep(1);
		if (loops == last && ++still >= 5) {
			fprintf(stderr, "HANG: the looping thread made no progress for 5 s "
				"(%lu loops, %lu handled)\n", loops, handled);
			_exit(1);
		}
		if (loops != last)
			still = 0;
		last = loops;
	}
	pthread_join(looper, NULL);
	pthread_join(k, NULL);
	fprintf(stderr, "ok: %lu loops, %lu handled\n", loops, handled);
	return 0;
}
