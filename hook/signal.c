/* SPDX-License-Identifier: MIT */
/*
 * signal.c — signal handlers, as the hooks must see them: whether the
 * calling thread is inside one (a hooked call there must never park,
 * yield or take a lock), and whether the handlers that interrupted a
 * plain thread's wait asked for SA_RESTART (the blocking call's EINTR).
 *
 * Every way glibc installs a handler is hooked (sigaction, signal,
 * bsd_signal, ssignal, sysv_signal, sigset): a handler function is
 * installed behind a trampoline that counts, per thread, the handlers
 * running (the depth) and the handlers run without SA_RESTART, then calls
 * the application's handler as the kernel would have.  The application
 * sees its own handler and flags in the old action; the trampoline handed
 * back as a new action (read from the kernel some other way) keeps the
 * application's handler behind it.  The counters are thread-locals of the
 * initial-exec model: a handler may read and write them (no allocation,
 * no lock), as it may the hooked calls.
 *
 * The application's actions are published under a sequence count, and
 * the hooked sigaction runs with every signal blocked under a spinlock: a
 * trampoline never reads one action's handler with another's flags, and
 * concurrent calls never leave the kernel with one call's handler and the
 * other's flags (sigaction is async-signal-safe: no mutex).
 *
 * A handler left by siglongjmp never lowers the depth.  The outermost
 * handler counts as running only while all of these hold: the calling
 * code runs the coroutine it interrupted (weft_self(); a handler never
 * switches), its stack pointer lies below the trampoline's frame (on the
 * alternate signal stack when the handler runs there), and, unless it was
 * installed with SA_NODEFER, its signal is still blocked.  The next hooked
 * call (or the next handler) that finds one false resets the depth.  The
 * one case this misjudges (docs/hooks.md): after a jump out of a handler
 * on the interrupted stack, a hooked call from deeper in that stack than
 * the handler's frame, before any from above it, is taken for the
 * handler's when the handler had SA_NODEFER or its signal is blocked again.
 *
 * A sanitizer's runtime installs its own handlers through sigaction while
 * it starts, before anything else of the process runs (ThreadSanitizer's,
 * before its own state exists): that code is left uninstrumented
 * (NOT_TSAN), its signal mask is set by the raw system call, and the real
 * sigaction is glibc's __sigaction until the lookup of the real functions
 * has run (dlsym, which allocates, may not be called that early).
 */
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "hook.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))
/* clang's no_sanitize("thread") still instruments function entry and exit,
 * which TSan's early sigaction calls cannot take: it has an attribute that
 * turns everything off. */
#if defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
#define NOT_TSAN __attribute__((disable_sanitizer_instrumentation))
#else
#define NOT_TSAN __attribute__((no_sanitize("thread")))
#endif
#if defined(__x86_64__) || defined(__i386__)
#define SPIN() __builtin_ia32_pause()
#else
#define SPIN() ((void)0)
#endif

extern int __sigaction(int, const struct sigaction *, struct sigaction *);

/* The application's action behind the trampoline, per signal. */
struct action {
	void *fn;		/* its handler; once set, never NULL again */
	int flags;		/* its sa_flags */
	bool installed;		/* the kernel's action is the trampoline */
};

static struct {
	unsigned seq;		/* atomic: odd while written */
	struct action a;	/* each field atomic */
} actions[NSIG];

static int writing;		/* the writers' spinlock (atomic) */

static TLS unsigned depth;	/* handlers running on this thread */
static TLS unsigned handled, norestart;
/* The outermost running handler: its signal and flags, the trampoline's
 * frame, the coroutine it interrupted, the alternate stack it runs on. */
static TLS int outer, outer_flags;
static TLS uintptr_t frame, alt_lo, alt_hi;
static TLS weft_co *outer_co;

NOT_TSAN static struct action load(int sig)
{
	struct action a;
	unsigned seq;
	do {
		while ((seq = __atomic_load_n(&actions[sig].seq, __ATOMIC_ACQUIRE)) & 1)
			SPIN();	/* a writer on another thread, its signals blocked */
		a.fn = __atomic_load_n(&actions[sig].a.fn, __ATOMIC_RELAXED);
		a.flags = __atomic_load_n(&actions[sig].a.flags, __ATOMIC_RELAXED);
		a.installed = __atomic_load_n(&actions[sig].a.installed, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (__atomic_load_n(&actions[sig].seq, __ATOMIC_RELAXED) != seq);
	return a;
}

/* Under the writers' lock. */
NOT_TSAN static void store(int sig, struct action a)
{
	unsigned seq = __atomic_load_n(&actions[sig].seq, __ATOMIC_RELAXED);
	__atomic_store_n(&actions[sig].seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&actions[sig].a.fn, a.fn, __ATOMIC_RELAXED);
	__atomic_store_n(&actions[sig].a.flags, a.flags, __ATOMIC_RELAXED);
	__atomic_store_n(&actions[sig].a.installed, a.installed, __ATOMIC_RELAXED);
	__atomic_store_n(&actions[sig].seq, seq + 2, __ATOMIC_RELEASE);
}

/* Whether the outermost handler was left (by siglongjmp), seen from code
 * whose frame is sp and whose signal mask is mask (see above). */
NOT_TSAN static bool outer_left(uintptr_t sp, const sigset_t *mask)
{
	if (weft_self() != outer_co)
		return true;
	if (sp >= frame || (alt_hi && (sp < alt_lo || sp >= alt_hi)))
		return true;
	return !(outer_flags & SA_NODEFER) && !sigismember(mask, outer);
}

NOT_TSAN static void enter_outer(int sig, int flags, uintptr_t sp, const ucontext_t *uc)
{
	outer = sig;
	outer_flags = flags;
	frame = sp;
	outer_co = weft_self();
	uintptr_t lo = (uintptr_t)uc->uc_stack.ss_sp, hi = lo + uc->uc_stack.ss_size;
	bool alt = !(uc->uc_stack.ss_flags & SS_DISABLE) && sp >= lo && sp < hi;
	alt_lo = alt ? lo : 0;
	alt_hi = alt ? hi : 0;
}

NOT_TSAN static void trampoline(int sig, siginfo_t *info, void *ctx)
{
	struct action a = load(sig);
	const ucontext_t *uc = ctx;
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	if (depth && outer_left(sp, &uc->uc_sigmask))
		depth = 0;
	if (depth++ == 0)
		enter_outer(sig, a.flags, sp, uc);
	handled++;
	if (!(a.flags & SA_RESTART))
		norestart++;
	if (a.flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))a.fn)(sig, info, ctx);
	else
		((void (*)(int))a.fn)(sig);
	depth--;
}

bool weft__hook_in_handler(void)
{
	if (__builtin_expect(depth == 0, 1))
		return false;
	int saved = errno;
	sigset_t cur;
	bool left = pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 &&
		    outer_left((uintptr_t)__builtin_frame_address(0), &cur);
	errno = saved;
	if (left)
		depth = 0;
	return !left;
}

void weft__hook_sigs_now(struct weft__hook_sigs *s)
{
	s->handled = handled;
	s->norestart = norestart;
}

bool weft__hook_handled_since(const struct weft__hook_sigs *since)
{
	return handled != since->handled;
}

bool weft__hook_restarts(struct weft__hook_sigs *since)
{
	bool r = norestart == since->norestart;
	weft__hook_sigs_now(since);
	return r;
}

NOT_TSAN static bool wrapped(int sig)
{
	return sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP;
}

NOT_TSAN static bool is_trampoline(const struct sigaction *act)
{
	return (void *)act->sa_sigaction == (void *)trampoline;
}

NOT_TSAN static bool function(const struct sigaction *act)
{
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
	       act->sa_handler != SIG_ERR;
}

/* The application's view of the kernel's old action *old, whose
 * application action was prev: the trampoline's place taken by the
 * application's handler, and the flags of a handler the kernel reset to
 * SIG_DFL (SA_RESETHAND) the application's. */
NOT_TSAN static void unwrap(struct sigaction *old, struct action prev)
{
	bool reset = old->sa_handler == SIG_DFL && prev.installed && (prev.flags & SA_RESETHAND);
	if (!is_trampoline(old) && !reset)
		return;
	old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | (prev.flags & SA_SIGINFO);
	if (reset)
		return;
	if (prev.flags & SA_SIGINFO)
		old->sa_sigaction = (void (*)(int, siginfo_t *, void *))prev.fn;
	else
		old->sa_handler = (void (*)(int))prev.fn;
}

/* The real sigaction: the next one after this library once looked up. */
NOT_TSAN static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int (*f)(int, const struct sigaction *, struct sigaction *) =
		__atomic_load_n(&weft__hook_real.sigaction, __ATOMIC_ACQUIRE);
	return (f ? f : __sigaction)(sig, act, old);
}

/* The calling thread's signal mask, by the system call itself (see above;
 * it cannot fail here, so errno, weft's instrumented guard, is untouched). */
NOT_TSAN static void set_mask(const sigset_t *set, sigset_t *old)
{
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, set, old, (size_t)(_NSIG / 8));
}

/* Under the writers' lock: the kernel's action for act, and the
 * application's record of it (prev, the record before). */
NOT_TSAN static int install(int sig, const struct sigaction *act, struct sigaction *old,
			    struct action prev)
{
	if (!act || !function(act)) {
		int r = real_sigaction(sig, act, old);
		if (r == 0 && act)
			store(sig, (struct action){ prev.fn, prev.flags, false });
		return r;
	}
	struct action a = { act->sa_flags & SA_SIGINFO ? (void *)act->sa_sigaction
						       : (void *)act->sa_handler,
			    act->sa_flags, true };
	if (is_trampoline(act)) {
		if (!prev.fn) {
			errno = EINVAL;	/* no application handler known behind it */
			return -1;
		}
		a = (struct action){ prev.fn, prev.flags, true };
	}
	struct sigaction mine = *act;
	mine.sa_sigaction = trampoline;
	mine.sa_flags |= SA_SIGINFO;
	store(sig, a);	/* first: the kernel may deliver to the trampoline at once */
	int r = real_sigaction(sig, &mine, old);
	if (r != 0)
		store(sig, prev);
	return r;
}

NOT_TSAN HOOK_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!wrapped(sig))
		return real_sigaction(sig, act, old);
	sigset_t all, mask;
	sigfillset(&all);
	set_mask(&all, &mask);
	while (__atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE))
		SPIN();
	struct action prev = load(sig);
	int r = install(sig, act, old, prev);
	__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
	set_mask(&mask, NULL);
	if (r == 0 && old)
		unwrap(old, prev);
	return r;
}

/* Installs handler with flags, as the glibc call of that name: the old
 * handler, or SIG_ERR/EINVAL. */
NOT_TSAN static void (*install_handler(int sig, void (*handler)(int), int flags, bool self_blocked))(int)
{
	if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction act = { .sa_handler = handler, .sa_flags = flags }, old;
	sigemptyset(&act.sa_mask);
	if (self_blocked)
		sigaddset(&act.sa_mask, sig);
	if (sigaction(sig, &act, &old) != 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* glibc's signal, bsd_signal and ssignal: BSD semantics (SA_RESTART, the
 * signal blocked in its handler). */
NOT_TSAN HOOK_EXPORT void (*signal(int sig, void (*handler)(int)))(int)
{
	return install_handler(sig, handler, SA_RESTART, true);
}

NOT_TSAN HOOK_EXPORT void (*bsd_signal(int sig, void (*handler)(int)))(int)
{
	return install_handler(sig, handler, SA_RESTART, true);
}

NOT_TSAN HOOK_EXPORT void (*ssignal(int sig, void (*handler)(int)))(int)
{
	return install_handler(sig, handler, SA_RESTART, true);
}

/* System V semantics: reset to SIG_DFL on delivery, not blocked in its
 * handler, no restart. */
NOT_TSAN HOOK_EXPORT void (*sysv_signal(int sig, void (*handler)(int)))(int)
{
	return install_handler(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

NOT_TSAN HOOK_EXPORT void (*__sysv_signal(int sig, void (*handler)(int)))(int)
{
	return install_handler(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

/* sigset, as glibc's: SIG_HOLD blocks sig, any other disposition is
 * installed (no flags) and unblocks it; the old one is SIG_HOLD when sig
 * was blocked. */
NOT_TSAN HOOK_EXPORT void (*sigset(int sig, void (*disp)(int)))(int)
{
	sigset_t set, was;
	sigemptyset(&set);
	if (sig <= 0 || sig >= NSIG || sigaddset(&set, sig) != 0 || disp == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction old;
	if (disp == SIG_HOLD) {
		if (pthread_sigmask(SIG_BLOCK, &set, &was) != 0 || sigaction(sig, NULL, &old) != 0)
			return SIG_ERR;
		return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
	}
	void (*prev)(int) = install_handler(sig, disp, 0, false);
	if (prev == SIG_ERR || pthread_sigmask(SIG_UNBLOCK, &set, &was) != 0)
		return SIG_ERR;
	return sigismember(&was, sig) ? SIG_HOLD : prev;
}
