/* SPDX-License-Identifier: MIT */
/*
 * sanitize.h — telling ASan, TSan and valgrind about our stack switches.
 *
 * Each context (a coroutine, or a worker's own scheduler stack) carries a
 * weft__san record.  Around every weft__ctx_switch the switching side calls
 * san_switch_begin(from, to) and, once resumed, san_switch_end(self):
 *   ASan   __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber,
 *          with a NULL fake-stack slot when the leaving coroutine is dying;
 *   TSan   __tsan_switch_to_fiber (fibers made with __tsan_create_fiber);
 *   valgrind  stacks are registered by the stack pool (VALGRIND_STACK_REGISTER).
 * Without sanitizers every function here compiles to nothing.
 */
#ifndef WEFT_SANITIZE_H
#define WEFT_SANITIZE_H

#include <stdbool.h>
#include <stddef.h>

#include "atomic.h"	/* WEFT_ASAN and WEFT_TSAN */

#ifdef WEFT_ASAN
#include <sanitizer/asan_interface.h>
#endif
#ifdef WEFT_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* A function the hooks' signal trampoline calls (weft_self).  Under
 * ThreadSanitizer the trampoline runs beneath TSan's own handler, at
 * whatever point the signal landed, inside TSan's runtime too: instrumented
 * code there re-enters that runtime.  clang's no_sanitize("thread") still
 * instruments function entry and exit; its other attribute turns
 * everything off. */
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define WEFT__SANITIZE_OFF __attribute__((disable_sanitizer_instrumentation))
#endif
#endif
#ifndef WEFT__SANITIZE_OFF
#define WEFT__SANITIZE_OFF __attribute__((no_sanitize("thread")))
#endif

struct weft__san {
	void *asan_fake_stack;	/* ASan's fake-stack handle while switched out */
	const void *stack_lo;	/* the context's stack, for ASan */
	size_t stack_size;
	void *tsan_fiber;	/* TSan's fiber handle */
};

static inline void san_init(struct weft__san *s, const void *lo, size_t size, bool own_fiber)
{
	s->asan_fake_stack = NULL;
	s->stack_lo = lo;
	s->stack_size = size;
	s->tsan_fiber = NULL;
#ifdef WEFT_TSAN
	s->tsan_fiber = own_fiber ? __tsan_create_fiber(0) : __tsan_get_current_fiber();
#else
	(void)own_fiber;
#endif
}

static inline void san_destroy(struct weft__san *s)
{
#ifdef WEFT_TSAN
	__tsan_destroy_fiber(s->tsan_fiber);
#endif
	(void)s;
}

static inline void san_switch_begin(struct weft__san *from, struct weft__san *to, bool from_dying)
{
#ifdef WEFT_ASAN
	__sanitizer_start_switch_fiber(from_dying ? NULL : &from->asan_fake_stack,
				       to->stack_lo, to->stack_size);
#endif
#ifdef WEFT_TSAN
	__tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
	(void)from; (void)to; (void)from_dying;
}

static inline void san_switch_end(struct weft__san *self)
{
#ifdef WEFT_ASAN
	__sanitizer_finish_switch_fiber(self->asan_fake_stack, NULL, NULL);
#endif
	(void)self;
}

/* Clears ASan's poison left on a stack by frames of a finished coroutine. */
static inline void san_unpoison(const void *lo, size_t size)
{
#ifdef WEFT_ASAN
	ASAN_UNPOISON_MEMORY_REGION(lo, size);
#endif
	(void)lo; (void)size;
}

/*
 * TSan intercepts malloc and free but not jemalloc's mallocx and sdallocx,
 * so it cannot see that memory one thread freed and another was given is
 * ordered by the allocator's own locks.  The stack pool says so: a release
 * on `sync` before every free, an acquire on it after every allocation.
 */
static inline void san_before_free(void *sync)
{
#ifdef WEFT_TSAN
	__tsan_release(sync);
#endif
	(void)sync;
}

static inline void san_after_alloc(void *sync)
{
#ifdef WEFT_TSAN
	__tsan_acquire(sync);
#endif
	(void)sync;
}

/* The same for an order that the kernel makes and TSan cannot see: an
 * io_uring operation's submission (its record written, then the SQE) comes
 * before its CQE, which the reaper reads on another thread (uring.c). */
static inline void san_kernel_handoff(void *sync)
{
	san_before_free(sync);
}

static inline void san_kernel_handed(void *sync)
{
	san_after_alloc(sync);
}

#endif
