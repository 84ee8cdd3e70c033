/* SPDX-License-Identifier: MIT */
/*
 * overflow.h — reporting stack overflows instead of mysterious crashes.
 *
 * A SIGSEGV handler, run on a per-worker alternate signal stack, recognises
 * a fault in the guard page of the running coroutine's stack and prints
 *   weft: stack overflow in coroutine <id> (stack <size> bytes)
 * before aborting.  Any other SIGSEGV goes to the disposition that was there
 * before weft (overflow.c: a handler is called with what the kernel would
 * have passed it; the default action still ends the process), and the
 * reporter stays installed for the next one, on any thread.  Stacks
 * without a guard page (past the mapping budget, see stack.h) carry a canary
 * that the scheduler checks after every switch-out; a broken canary is
 * reported with the same line.
 */
#ifndef WEFT_OVERFLOW_H
#define WEFT_OVERFLOW_H

struct weft__worker;
struct weft_co;

/* Installs the process-wide handler (once; idempotent). */
void weft__overflow_install(void);
/* Per worker thread: its alternate signal stack. */
void weft__overflow_thread_init(struct weft__worker *w);
void weft__overflow_thread_fini(struct weft__worker *w);
/* Prints the overflow line for co and aborts. */
_Noreturn void weft__overflow_report(const struct weft_co *co);

#endif
