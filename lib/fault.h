/* SPDX-License-Identifier: MIT */
/*
 * fault.h — fault injection for the reliability tests (meson option
 * fault_injection).  Every internal allocation and thread creation asks
 * weft__fault() first; in a fault-injection build, one ask in N (N set by
 * weft__fault_every, 0 = never, 1 = always; which ones is pseudo-random but
 * the same in every run) says "fail", and the call site behaves as if
 * the allocation had returned NULL (or pthread_create EAGAIN).  In normal
 * builds weft__fault() is the constant false and costs nothing.
 */
#ifndef WEFT_FAULT_H
#define WEFT_FAULT_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Pause points for race tests: the library calls weft__fault_pause(point,
 * what) where a test may need a thread held or a race forced, `what` being
 * the fd or the object concerned; a test sets the function run there
 * (NULL: none).  Normal builds call nothing.
 *   WEFT__FAULT_IO_BEGIN  io_begin (io.c), after it has read the fd's
 *                         generation and before it holds a reference on
 *                         the entry: the function may run weft_close(fd)
 *                         to completion, which the call must notice.
 *   WEFT__FAULT_CLOSE     weft_close, between its bookkeeping (waiters
 *                         woken, calls drained, fd unregistered) and its
 *                         close(2): the function may park the closer while
 *                         other coroutines start calls on fd.
 *   WEFT__FAULT_CLOSED    weft_close, after its close(2), before the entry
 *                         is the number's next file's: the function may
 *                         park the closer while a new file takes the
 *                         number and a coroutine starts a call on it.
 *   WEFT__FAULT_UNLOCK    the contended unlocks of the mutex and the rwlock
 *                         (what: the object), just before they release its
 *                         internal lock: the window in which an unlock that
 *                         had already published "free" would still write
 *                         the object (docs/design.md, "Unlock paths").  The
 *                         function may wait for another thread to lock,
 *                         unlock and free the object, and must return by
 *                         itself: in a correct unlock that thread cannot
 *                         get the object until the pause is over.
 *   WEFT__FAULT_ABANDONED weft__wait_park_hook (waitq.c), after its waiter
 *                         abandoned its wait and before it relocks the
 *                         object (what: the object), the window in which a
 *                         claim may drop the abandoned node (waitq.h).  The
 *                         function runs in the waiter's context, with no
 *                         lock held.
 *   WEFT__FAULT_DROPPED   weft__wakes_wait_dropped (waitq.c), when a
 *                         claimer, its lock released, starts to wait for
 *                         the waiters whose abandoned nodes it dropped to
 *                         leave the object: the function may let a waiter
 *                         held at WEFT__FAULT_ABANDONED go on.
 */
enum weft__fault_point {
	WEFT__FAULT_IO_BEGIN,
	WEFT__FAULT_CLOSE,
	WEFT__FAULT_CLOSED,
	WEFT__FAULT_UNLOCK,
	WEFT__FAULT_ABANDONED,
	WEFT__FAULT_DROPPED,
	WEFT__FAULT_POINTS
};

#ifdef WEFT_FAULT_INJECTION
bool weft__fault(void);
/* Makes one ask in n fail from now on (0: none); returns the faults
 * injected so far. */
__attribute__((visibility("default"))) uint64_t weft__fault_every(unsigned n);
void weft__fault_pause(enum weft__fault_point point, uintptr_t what);
__attribute__((visibility("default"))) void weft__fault_on(enum weft__fault_point point,
							  void (*fn)(uintptr_t what));
#else
static inline bool weft__fault(void) { return false; }
static inline void weft__fault_pause(enum weft__fault_point point, uintptr_t what)
{
	(void)point;
	(void)what;
}
#endif

#endif
