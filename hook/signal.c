/* SPDX-License-Identifier: MIT */
/*
 * signal.c — signal handlers, as the hooks must see them: whether the
 * calling thread is inside one (a hooked call there must never park,
 * yield or take a lock), and whether the handlers that interrupted a
 * plain thread's wait asked for SA_RESTART (the blocking call's EINTR).
 *
 * sigaction and signal are hooked: a handler function is installed behind
 * a trampoline that counts, per thread, the handlers running (the depth)
 * and the handlers run without SA_RESTART, then calls the application's
 * handler as the kernel would have.  The application sees its own handler
 * and flags in the old action.  The counters are thread-locals of the
 * initial-exec model: a handler may read and write them (no allocation,
 * no lock), as it may the hooked calls.
 *
 * A handler left by siglongjmp never lowers the depth: the depth counts
 * only while the signal that raised it from zero is still blocked, as it
 * is during its handler unless it was installed with SA_NODEFER; the mask
 * siglongjmp restores unblocks it (checked by the next hooked call, and
 * by the next handler in the mask of the code it interrupted).
 *
 * A sanitizer's runtime installs its own handlers through sigaction while
 * it starts, before anything else of the process runs (ThreadSanitizer's,
 * before its own state exists): that code is left uninstrumented
 * (NOT_TSAN), and the real sigaction is glibc's __sigaction until the
 * lookup of the real functions has run (dlsym, which allocates, may not
 * be called that early).
 */
#include <errno.h>
#include <pthread.h>
#include <ucontext.h>

#include "hook.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))
#define NOT_TSAN __attribute__((no_sanitize("thread")))

extern int __sigaction(int, const struct sigaction *, struct sigaction *);

/* The application's handler and flags behind the trampoline, per signal. */
static struct {
	void *fn;	/* atomic */
	int flags;	/* atomic */
} handlers[NSIG];

static TLS unsigned depth;	/* handlers running on this thread */
static TLS int outer;		/* the outermost one's signal, when it is blocked */
static TLS unsigned handled, norestart;

NOT_TSAN static void trampoline(int sig, siginfo_t *info, void *ctx)
{
	void *fn = __atomic_load_n(&handlers[sig].fn, __ATOMIC_ACQUIRE);
	int flags = __atomic_load_n(&handlers[sig].flags, __ATOMIC_RELAXED);
	const ucontext_t *uc = ctx;
	if (depth && outer && !sigismember(&uc->uc_sigmask, outer))
		depth = 0;	/* the interrupted code is no handler: one was left by siglongjmp */
	if (depth++ == 0)
		outer = flags & SA_NODEFER ? 0 : sig;
	handled++;
	if (!(flags & SA_RESTART))
		norestart++;
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, info, ctx);
	else
		((void (*)(int))fn)(sig);
	depth--;
}

bool weft__hook_in_handler(void)
{
	if (__builtin_expect(depth == 0, 1))
		return false;
	if (!outer)
		return true;
	int saved = errno;
	sigset_t cur;
	bool blocked = pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, outer);
	errno = saved;
	if (!blocked)
		depth = 0;	/* left by siglongjmp */
	return blocked;
}

void weft__hook_sigs_now(struct weft__hook_sigs *s)
{
	s->handled = handled;
	s->norestart = norestart;
}

bool weft__hook_restarts(const struct weft__hook_sigs *before)
{
	return handled != before->handled && norestart == before->norestart;
}

NOT_TSAN static bool wrapped(int sig)
{
	return sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP;
}

NOT_TSAN static bool function(const struct sigaction *act)
{
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
	       act->sa_handler != SIG_ERR;
}

/* The trampoline's place in *old taken by the application's handler. */
NOT_TSAN static void unwrap(struct sigaction *old, void *fn, int flags)
{
	if (old->sa_sigaction != trampoline)
		return;
	old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | (flags & SA_SIGINFO);
	if (flags & SA_SIGINFO)
		old->sa_sigaction = (void (*)(int, siginfo_t *, void *))fn;
	else
		old->sa_handler = (void (*)(int))fn;
}

/* The real sigaction: the next one after this library once looked up. */
NOT_TSAN static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int (*f)(int, const struct sigaction *, struct sigaction *) =
		__atomic_load_n(&weft__hook_real.sigaction, __ATOMIC_ACQUIRE);
	return (f ? f : __sigaction)(sig, act, old);
}

NOT_TSAN HOOK_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!wrapped(sig))
		return real_sigaction(sig, act, old);
	void *prev_fn = __atomic_load_n(&handlers[sig].fn, __ATOMIC_ACQUIRE);
	int prev_flags = __atomic_load_n(&handlers[sig].flags, __ATOMIC_RELAXED);
	struct sigaction mine;
	if (act && function(act)) {
		mine = *act;
		mine.sa_sigaction = trampoline;
		mine.sa_flags |= SA_SIGINFO;
		__atomic_store_n(&handlers[sig].flags, act->sa_flags, __ATOMIC_RELAXED);
		__atomic_store_n(&handlers[sig].fn,
				 act->sa_flags & SA_SIGINFO ? (void *)act->sa_sigaction
							    : (void *)act->sa_handler,
				 __ATOMIC_RELEASE);
		act = &mine;
	}
	int r = real_sigaction(sig, act, old);
	if (r == 0 && old)
		unwrap(old, prev_fn, prev_flags);
	return r;
}

/* glibc's signal: BSD semantics (SA_RESTART, the signal blocked in its
 * handler), through the hooked sigaction. */
NOT_TSAN HOOK_EXPORT void (*signal(int sig, void (*handler)(int)))(int)
{
	struct sigaction act = { .sa_handler = handler, .sa_flags = SA_RESTART }, old;
	sigemptyset(&act.sa_mask);
	if (sig > 0 && sig < NSIG)
		sigaddset(&act.sa_mask, sig);
	if (sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}
