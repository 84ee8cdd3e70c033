/* SPDX-License-Identifier: MIT */
/*
 * futex.h — the futex calls of the library, as inline wrappers.
 *
 * Every futex here is process-private (FUTEX_*_PRIVATE: the words live in
 * the library's own memory, never shared with another process).  A wait
 * sleeps only while *word still equals val (the kernel compares
 * atomically), so a waker that changes the word before its wake cannot be
 * missed; waits may also return early (a signal, a spurious wakeup), so
 * every caller waits in a loop that re-reads its word.  The orderings are
 * the callers' atomic operations on the word (atomic.h); the syscall adds
 * none that anyone relies on.
 *
 * Users: the internal lock (lock.c), thread waiters (park.c), and
 * weft_shutdown's drain (runtime.c, woken from idle.c).
 *
 * A leaf: system headers only.
 */
#ifndef WEFT_FUTEX_H
#define WEFT_FUTEX_H

#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleeps while *word == val, at most rel (NULL: no limit). */
static inline long weft__futex_wait(uint32_t *word, uint32_t val, const struct timespec *rel)
{
	return syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, rel, NULL, 0);
}

/* Sleeps while *word == val, until deadline: absolute CLOCK_MONOTONIC
 * nanoseconds (weft_now's clock), -1 for none.  FUTEX_WAIT_BITSET takes an
 * absolute timeout on CLOCK_MONOTONIC, so a loop of waits needs no
 * recomputation of what is left. */
static inline long weft__futex_wait_until(uint32_t *word, uint32_t val, int64_t deadline)
{
	struct timespec ts = { deadline / 1000000000, deadline % 1000000000 };
	return syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, val,
		       deadline >= 0 ? &ts : NULL, NULL, FUTEX_BITSET_MATCH_ANY);
}

/* Wakes up to n threads sleeping on word. */
static inline long weft__futex_wake(uint32_t *word, int n)
{
	return syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#endif
