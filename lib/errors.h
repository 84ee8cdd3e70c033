/* SPDX-License-Identifier: MIT */
/*
 * errors.h — reporting and reading errno from inside the library.
 *
 * A coroutine may resume on another worker thread after any call that can
 * suspend, and glibc declares __errno_location const, so the compiler may
 * reuse an &errno computed before the suspension: the old thread's errno.
 * These calls are out of line and opaque to interprocedural analysis
 * (WEFT__ERR_OPAQUE), so every use computes the thread-local's address
 * afresh.  weft_errno_location is the public form (weft.h).
 *
 * The convention (libuv's): an internal function that can fail returns a
 * negative errno (-ENOMEM), and 0 or a count on success; it never sets
 * errno.  Only the public boundary does: `return weft__err_result(r);`.  The
 * boundary includes a public call's file-local body (chan.c's chan_op for
 * send and recv), the one constructor helper whose NULL the public
 * constructors return as it is (weft__waitq_object_new: ENOMEM), and the
 * entry checks of the calls that may wait (weft__co_wait_entry: EINVAL,
 * ECANCELED).
 *
 * A leaf: it includes only libc headers, so every file can report an error
 * without depending on the scheduler (worker.h) for it.
 */
#ifndef WEFT_ERRORS_H
#define WEFT_ERRORS_H

/* Out of line and invisible to the callers' optimiser: what the function
 * reads (a thread-local) is read afresh at each call.  weft__worker_self
 * (worker.c) is defined the same way, for the same reason. */
#if defined(__clang__)
#define WEFT__ERR_OPAQUE __attribute__((noinline))
#else
#define WEFT__ERR_OPAQUE __attribute__((noinline, noipa))
#endif

/* Reports errno = e on the calling thread and returns -1 (out of line). */
int weft__err_fail(int e);
/* A public call's result from an internal one's: r when r >= 0, else -1
 * with errno = -r. */
static inline int weft__err_result(int r)
{
	return r < 0 ? weft__err_fail(-r) : r;
}
/* The same for a public call that returns a pointer: NULL, errno = -r. */
static inline void *weft__err_result_null(int r)
{
	weft__err_fail(-r);
	return (void *)0;
}
/* The calling thread's errno, read through a fresh thread-local address
 * (out of line: safe after a suspension moved the coroutine). */
int weft__err_get(void);

#endif
