/* Adversarial repro (issue 44 hooks review): fork() called from a signal
 * handler that interrupted a hooked call holding the fd table's mutex.
 * depth.c's pthread_atfork prepare handler (before_fork) takes that mutex
 * (fdstate.c, weft__hook_fd_fork_prepare): the thread deadlocks on itself.
 * A plain thread dup()s and close()s a tracked fd in a loop (each takes
 * the mutex); another thread signals it; the handler forks, the child
 * _exits, the parent reaps it.
 * Usage: fork_in_handler   (exit 0: ok, 1: deadlock)
 * Build: see test/adv/README.md. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weft.h"

static int fds[2];
static volatile unsigned long loops, forks;
static volatile int stop, kicked, finished;
static pthread_t looper;

static void on_usr1(int sig)
{
	(void)sig;
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	if (p > 0)
		waitpid(p, NULL, 0);
	forks++;
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
	for (int i = 0; i < 2000; i++) {
		pthread_kill(looper, SIGUSR1);
		usleep(500);
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

int main(void)
{
	signal(SIGUSR1, on_usr1);
	int r = weft_init(&WEFT_CONFIG(.workers = 1));
	if (r != 0)
		return 3;
	weft_co *c = weft_spawn(body, NULL);
	weft_join(c);
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
				"(%lu loops, %lu forks)\n", loops, forks);
			_exit(1);
		}
		if (loops != last)
			still = 0;
		last = loops;
	}
	pthread_join(looper, NULL);
	pthread_join(k, NULL);
	fprintf(stderr, "ok: %lu loops, %lu forks\n", loops, forks);
	return 0;
}
