/* SPDX-License-Identifier: MIT */
/*
 * depth.c — who is calling a hook: a coroutine, a plain thread, or weft
 * itself inside a call the hooks made (weft_wait's poll, the real close,
 * dup2 or dup3 inside weft's close protocol).  The depth lives in a coroutine-local (weft_key):
 * a thread-local would stay raised on a worker while the coroutine that
 * raised it is parked, and other coroutines' calls would pass through.
 *
 * Two callers are plain whatever weft_self() says: a signal handler
 * (signal.c), which must never park or yield, and a child forked while a
 * runtime ran.  The child copied the forking thread's thread-locals, so
 * weft_self() may still name the coroutine that forked, but it has no
 * workers: weft's calls there would act on the parent's epoll instance
 * (shared across fork) and on locks some other thread may have held at
 * the fork.  pthread_atfork handlers mark the child (a child of a process
 * without a runtime may start its own) and hold the fd table's lock across
 * the fork (fdstate.c).  A fork from a signal handler takes no lock (the
 * handler may have interrupted its holder): its child is marked whether or
 * not a runtime ran, since the table may be half-written, and it passes
 * every call to libc, as POSIX asks of a handler's child anyway (only
 * async-signal-safe calls until exec).  A raw clone or vfork runs no
 * handler (a vfork child shares our memory: marking it would mark the
 * parent).
 */
#include <errno.h>
#include <pthread.h>

#include "hook.h"

static weft_key *depth_key;
static pthread_once_t depth_once = PTHREAD_ONCE_INIT;
static bool running_at_fork;	/* a runtime ran when fork was called */
static bool forked;		/* written in the child only */
/* This thread's fork runs in a signal handler: its prepare handler took
 * no lock, and its child trusts nothing (see above). */
static __thread bool fork_in_handler __attribute__((tls_model("initial-exec")));

/* Each handler keeps errno: fork leaves it alone when it succeeds. */
static void before_fork(void)
{
	int saved = errno;
	fork_in_handler = weft__hook_in_handler();
	weft_stats st = { .size = sizeof st };
	__atomic_store_n(&running_at_fork, weft_stats_get(&st) == 0, __ATOMIC_RELAXED);
	weft__hook_fd_fork_prepare(fork_in_handler);
	errno = saved;
}

static void in_parent(void)
{
	int saved = errno;
	weft__hook_fd_fork_done(fork_in_handler, false);
	errno = saved;
}

static void in_child(void)
{
	int saved = errno;
	weft__hook_fd_fork_done(fork_in_handler, true);
	if (fork_in_handler || __atomic_load_n(&running_at_fork, __ATOMIC_RELAXED))
		__atomic_store_n(&forked, true, __ATOMIC_RELAXED);
	errno = saved;
}

__attribute__((constructor)) static void watch_fork(void)
{
	pthread_atfork(before_fork, in_parent, in_child);
}

bool weft__hook_forked(void)
{
	return __atomic_load_n(&forked, __ATOMIC_RELAXED);
}

static void make_key(void)
{
	depth_key = weft_key_new(NULL);
}

static weft_key *key(void)
{
	pthread_once(&depth_once, make_key);
	return depth_key;
}

static uintptr_t depth(void)
{
	return (uintptr_t)weft_local_get(key());
}

int weft__hook_mode(void)
{
	if (weft__hook_in_handler() || weft__hook_forked() || !weft_self())
		return HOOK_PLAIN;
	return depth() ? HOOK_PASS : HOOK_CORO;
}

bool weft__hook_enter(void)
{
	if (!key()) {
		errno = ENOMEM;
		return false;
	}
	return weft_local_set(depth_key, (void *)(depth() + 1)) == 0;
}

void weft__hook_leave(void)
{
	int saved = errno;
	weft_local_set(depth_key, (void *)(depth() - 1));	/* never allocates */
	errno = saved;
}
