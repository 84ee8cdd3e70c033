/* Adversarial repro (issue 44 hooks review): the unhooked glibc entry
 * points (sysv_signal, bsd_signal, sigset) read the kernel's action, so the
 * handler they return is the hooks' trampoline, not the application's.
 * Handing it back to the hooked signal() (the save-and-restore idiom)
 * makes the trampoline its own application handler: the next signal
 * recurses until the stack overflows.
 * Usage: leaked_trampoline   (exit 0: ok; killed by SIGSEGV, or 1: wrong)
 * Build: see test/adv/README.md. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile int caught;

static void h(int sig)
{
	(void)sig;
	caught++;
}

int main(void)
{
	signal(SIGUSR1, h);
	void (*saved)(int) = sysv_signal(SIGUSR1, SIG_IGN);	/* save, ignore meanwhile */
	printf("sysv_signal returned %s\n", saved == h ? "the handler" : "another function");
	fflush(stdout);
	signal(SIGUSR1, saved);					/* restore */
	raise(SIGUSR1);
	printf("after raise: caught %d\n", caught);
	return caught == 1 ? 0 : 1;
}
