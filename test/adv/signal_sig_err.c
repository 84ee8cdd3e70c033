/* Adversarial repro (issue 44 hooks review): sigaction's and signal's
 * answers, printed one per line, to diff a run under the hooks against a
 * run without them (the kernel's and glibc's answers).
 * Usage: signal_sig_err > out; LD_PRELOAD=... signal_sig_err > out2; diff
 * Build: see test/adv/README.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void h1(int s) { (void)s; }
static void h2(int s, siginfo_t *i, void *c) { (void)s; (void)i; (void)c; }

static const char *name(void *fn)
{
	if (fn == (void *)SIG_DFL) return "SIG_DFL";
	if (fn == (void *)SIG_IGN) return "SIG_IGN";
	if (fn == (void *)SIG_ERR) return "SIG_ERR";
	if (fn == (void *)h1) return "h1";
	if (fn == (void *)h2) return "h2";
	return "OTHER";
}

static void show(const char *what, int sig)
{
	struct sigaction o;
	memset(&o, 0, sizeof o);
	int r = sigaction(sig, NULL, &o);
	printf("%-40s r=%d handler=%s flags=%#x usr2-in-mask=%d\n", what, r,
	       name((void *)o.sa_handler), o.sa_flags & ~0x04000000 /* SA_RESTORER */,
	       sigismember(&o.sa_mask, SIGUSR2));
}

int main(void)
{
	errno = 0;
	void (*p)(int) = signal(SIGUSR1, SIG_ERR);
	printf("%-40s ret=%s errno=%d\n", "signal(SIGUSR1, SIG_ERR)", name((void *)p), errno);
	show("after signal(SIG_ERR)", SIGUSR1);
	signal(SIGUSR1, SIG_DFL);

	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_handler = h1;
	a.sa_flags = SA_RESTART | SA_RESETHAND;
	sigemptyset(&a.sa_mask);
	sigaddset(&a.sa_mask, SIGUSR2);
	sigaction(SIGUSR1, &a, NULL);
	show("h1 SA_RESTART|SA_RESETHAND", SIGUSR1);
	raise(SIGUSR1);
	show("after raise (reset)", SIGUSR1);

	memset(&a, 0, sizeof a);
	a.sa_sigaction = h2;
	a.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&a.sa_mask);
	struct sigaction same = a;
	sigaction(SIGUSR1, &same, &same);	/* act and old the same struct */
	printf("%-40s handler=%s\n", "old via same struct", name((void *)same.sa_handler));
	show("h2 SA_SIGINFO|SA_NODEFER", SIGUSR1);
	a.sa_handler = SIG_IGN;
	a.sa_flags = 0;
	sigaction(SIGUSR1, &a, NULL);
	show("SIG_IGN", SIGUSR1);
	p = signal(SIGUSR1, h1);
	printf("%-40s ret=%s\n", "signal(h1) returns", name((void *)p));
	show("signal(h1)", SIGUSR1);
	errno = 0;
	int r = sigaction(32, &a, NULL);
	printf("%-40s r=%d errno=%d\n", "sigaction(32)", r, errno);
	errno = 0;
	p = signal(0, h1);
	printf("%-40s ret=%s errno=%d\n", "signal(0, h1)", name((void *)p), errno);
	return 0;
}
