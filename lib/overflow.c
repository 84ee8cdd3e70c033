/*
 * overflow.c — the stack-overflow reporter (see overflow.h).
 */
#include "overflow.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coro.h"
#include "worker.h"

enum { ALTSTACK_BYTES = 64 << 10 };

static struct sigaction previous;
static volatile sig_atomic_t installed;

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
	p = put_u64(p, weft__stack_size());
	p = put_str(p, " bytes)\n");
	ssize_t unused = write(STDERR_FILENO, line, (size_t)(p - line));
	(void)unused;
	abort();
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	struct weft__worker *w = weft__worker_self();
	struct weft_co *co = w ? w->current : NULL;
	if (co && weft__stack_guard_hit(co->stack, si->si_addr))
		weft__overflow_report(co);
	/* Not ours: put back what was there and let the fault happen again. */
	sigaction(sig, &previous, NULL);
	installed = 0;
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
