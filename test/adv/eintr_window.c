/* Adversarial repro (issue 44 hooks review): a plain thread's blocking read
 * on a tracked pipe loses the EINTR of a handler (no SA_RESTART) that runs
 * after the read began but before wait.c's block() takes its snapshot of
 * the handler counters (weft__hook_sigs_now): during the real read's
 * EAGAIN attempt, the getsockopt of read_timeout, and the code between.
 * The kernel's blocking read returns EINTR for any signal that arrives once
 * it has entered the system call; the hooked one then waits on until data
 * comes.  Each round: the reader announces it is about to read, a sender
 * sends one SIGUSR1 after a random 0-2 us; a read still blocked 100 ms
 * later lost its EINTR (a byte is written to end it).  The same program
 * without the hooks is the kernel's baseline (it loses a signal only when
 * it lands before the read's system call is entered).
 * Usage: eintr_window [rounds]   (prints the rounds that lost their EINTR)
 * Build: see test/adv/README.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

static int fds[2];
static pthread_t reader_thread;
static volatile int about_to_read, round_done;
static volatile long result, err;

static void on_usr1(int sig)
{
	(void)sig;
}

static void *reader(void *arg)
{
	long rounds = (long)arg;
	for (long i = 0; i < rounds; i++) {
		char c;
		while (round_done)
			;
		__atomic_store_n(&about_to_read, 1, __ATOMIC_SEQ_CST);
		ssize_t n = read(fds[0], &c, 1);
		result = n;
		err = n < 0 ? errno : 0;
		__atomic_store_n(&round_done, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void spin_ns(long ns)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

static void make_pipe(void *arg)
{
	(void)arg;
	if (pipe(fds) != 0)	/* in a coroutine: tracked under the hooks */
		exit(2);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 300;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;	/* no SA_RESTART: the read must end on EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	if (weft_init(&WEFT_CONFIG(.workers = 1)) != 0)
		return 3;
	weft_join(weft_spawn(make_pipe, NULL));
	pthread_create(&reader_thread, NULL, reader, (void *)rounds);
	long lost = 0, eintr = 0;
	srand(1);
	for (long i = 0; i < rounds; i++) {
		while (!__atomic_load_n(&about_to_read, __ATOMIC_SEQ_CST))
			;
		about_to_read = 0;
		spin_ns(rand() % 2000);
		pthread_kill(reader_thread, SIGUSR1);
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			if (__atomic_load_n(&round_done, __ATOMIC_SEQ_CST))
				break;
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 100) {
				if (write(fds[1], "x", 1) != 1)	/* ends the read: it lost its EINTR */
					exit(4);
				while (!__atomic_load_n(&round_done, __ATOMIC_SEQ_CST))
					;
				break;
			}
			usleep(100);
		}
		if (result == -1 && err == EINTR)
			eintr++;
		else
			lost++;
		__atomic_store_n(&round_done, 0, __ATOMIC_SEQ_CST);
	}
	pthread_join(reader_thread, NULL);
	printf("%ld rounds: %ld EINTR, %ld lost their EINTR (the read waited for data)\n", rounds,
	       eintr, lost);
	return 0;
}
