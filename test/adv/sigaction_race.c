/* Adversarial repro (issue 44 hooks review): two threads install their own
 * SIGUSR1 handler at once.  The kernel's sigaction is atomic: afterwards
 * the action is one thread's or the other's.  The hooked sigaction
 * (signal.c) stores the handler's function and flags in handlers[sig] with
 * two separate stores, then calls the real sigaction: two racing calls can
 * leave one thread's function with the other's flags (the trampoline then
 * calls an SA_SIGINFO handler as a one-argument one, or the reverse), and
 * the kernel's mask and SA_RESTART from either.  Each round: both threads
 * install, then the action is read back and checked for consistency.
 * Usage: sigaction_race [rounds]   (exit 0: ok, 1: a mixed action)
 * Build: see test/adv/README.md. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void h1(int s) { (void)s; }
static void h2(int s, siginfo_t *i, void *c) { (void)s; (void)i; (void)c; }

/* A spinning barrier for three threads: the installers leave it within
 * nanoseconds of each other, where a sleeping one would wake them
 * microseconds apart. */
static unsigned arrived, generation;

static void barrier(void)
{
	unsigned g = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&arrived, 1, __ATOMIC_ACQ_REL) == 3) {
		__atomic_store_n(&arrived, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&generation, g + 1, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&generation, __ATOMIC_ACQUIRE) == g)
		sched_yield();
}
static long rounds = 200000;

static void *installer(void *arg)
{
	int which = (int)(long)arg;
	struct sigaction a;
	memset(&a, 0, sizeof a);
	sigemptyset(&a.sa_mask);
	if (which == 1) {
		a.sa_handler = h1;
		a.sa_flags = SA_RESTART;
	} else {
		a.sa_sigaction = h2;
		a.sa_flags = SA_SIGINFO;
		sigaddset(&a.sa_mask, SIGUSR2);
	}
	for (long i = 0; i < rounds; i++) {
		barrier();
		sigaction(SIGUSR1, &a, NULL);
		barrier();
		barrier();	/* main checks */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atol(argv[1]);
	pthread_t t1, t2;
	pthread_create(&t1, NULL, installer, (void *)1L);
	pthread_create(&t2, NULL, installer, (void *)2L);
	long bad = 0, first = -1;
	char first_line[200] = "";
	for (long i = 0; i < rounds; i++) {
		barrier();
		barrier();
		struct sigaction o;
		sigaction(SIGUSR1, NULL, &o);
		int is1 = o.sa_handler == h1, siginfo = !!(o.sa_flags & SA_SIGINFO),
		    restart = !!(o.sa_flags & SA_RESTART), usr2 = sigismember(&o.sa_mask, SIGUSR2);
		int ok = is1 ? !siginfo && restart && !usr2
			     : o.sa_sigaction == h2 && siginfo && !restart && usr2;
		if (!ok && bad++ == 0) {
			first = i;
			snprintf(first_line, sizeof first_line,
				 "handler=%s SA_SIGINFO=%d SA_RESTART=%d SIGUSR2-in-mask=%d",
				 is1 ? "h1 (installed plain, SA_RESTART, empty mask)"
				     : "h2 (installed SA_SIGINFO, no SA_RESTART, mask {SIGUSR2})",
				 siginfo, restart, usr2);
		}
		barrier();
	}
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	if (bad) {
		printf("MIXED: %ld of %ld rounds left a mixed action; the first (round %ld): %s\n",
		       bad, rounds, first, first_line);
		return 1;
	}
	printf("ok: %ld rounds, every action one thread's\n", rounds);
	return 0;
}
