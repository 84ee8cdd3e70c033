/* SPDX-License-Identifier: MIT */
/*
 * overflow.c — the stack-overflow reporter (see overflow.h).
 */
#include "overflow.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "atomic.h"
#include "coro.h"
#include "worker.h"

enum { ALTSTACK_BYTES = 64 << 10 };

/* The disposition before ours: written once, before any worker starts. */
static struct sigaction previous;
static volatile sig_atomic_t installed;
/* atomic: the previous handler was SA_RESETHAND and has run (relaxed: a
 * second fault racing the first may call it twice, as two threads faulting
 * at once could under the kernel's own reset) */
static unsigned previous_spent;

/* Async-signal-safe decimal formatting. */
static char *put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_str(char *p, const char *s)
{
	size_t n = strlen(s);
	memcpy(p, s, n);
	return p + n;
}

_Noreturn void weft__overflow_report(const struct weft_co *co)
{
	char line[128], *p = line;
	p = put_str(p, "weft: stack overflow in coroutine ");
	p = put_u64(p, co->id);
	p = put_str(p, " (stack ");
	p = put_u64(p, weft__stack_bytes(co->stack));
	p = put_str(p, " bytes)\n");
	ssize_t unused = write(STDERR_FILENO, line, (size_t)(p - line));
	(void)unused;
	abort();
}

/* SIG_DFL for sig, from a handler: the process is about to die of sig. */
static void default_action(int sig)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
}

/*
 * Hands a fault that is not an overflow to the disposition that was there
 * before weft, leaving ours installed for the faults still to come (on any
 * thread).  A handler function is called here, as the kernel would have:
 * with its siginfo if it asked for one, and its sa_mask blocked meanwhile.
 * One installed with SA_RESETHAND is called once; afterwards it counts as
 * SIG_DFL.  SIG_DFL (and SIG_IGN, which the kernel does not honour for a
 * fault) ends the process as before: the default action is put back, and
 * the faulting instruction, run again on return, raises the signal anew; a
 * signal sent with kill(2) does not happen again, so it is raised.  A sent
 * signal that was ignored stays ignored.
 */
static void forward(int sig, siginfo_t *si, void *uc)
{
	bool sent = si->si_code <= 0;	/* SI_USER, SI_QUEUE, SI_TKILL: not a fault */
	bool function = previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN;
	if (function && !at_load_uint(&previous_spent)) {
		if (previous.sa_flags & SA_RESETHAND)
			at_store_uint(&previous_spent, 1);
		sigset_t old;
		pthread_sigmask(SIG_BLOCK, &previous.sa_mask, &old);
		if (previous.sa_flags & SA_SIGINFO)
			previous.sa_sigaction(sig, si, uc);
		else
			previous.sa_handler(sig);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return;
	}
	if (sent && previous.sa_handler == SIG_IGN)
		return;
	default_action(sig);
	if (sent)
		raise(sig);	/* delivered once this handler returns */
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	struct weft__worker *w = weft__worker_self();
	struct weft_co *co = w ? w->current : NULL;
	if (co && si->si_code > 0 && weft__stack_guard_hit(co->stack, si->si_addr))
		weft__overflow_report(co);
	forward(sig, si, uc);
}

void weft__overflow_install(void)
{
	if (installed)
		return;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &previous) == 0)
		installed = 1;
}

void weft__overflow_thread_init(struct weft__worker *w)
{
	void *p = mmap(NULL, ALTSTACK_BYTES, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	w->altstack = p == MAP_FAILED ? NULL : p;
	if (!w->altstack)
		return;	/* overflows then die without the report */
	stack_t ss = { .ss_sp = p, .ss_size = ALTSTACK_BYTES, .ss_flags = 0 };
	sigaltstack(&ss, &w->old_altstack);	/* ASan installs its own: keep it */
}

void weft__overflow_thread_fini(struct weft__worker *w)
{
	if (!w->altstack)
		return;
	sigaltstack(&w->old_altstack, NULL);	/* so its owner can free it */
	munmap(w->altstack, ALTSTACK_BYTES);
	w->altstack = NULL;
}
