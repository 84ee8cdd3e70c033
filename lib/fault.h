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
 * A pause point for race tests: io_begin (io.c) calls weft__fault_io_begin
 * with the fd after it has read the fd's generation and before it holds a
 * reference on the entry, the window in which a weft_close must still be
 * noticed.  A test sets the function run there (NULL: none); it may run
 * weft_close(fd) to completion.  Normal builds call nothing.
 */
/*
 * Another: weft__wait_park_hook (waitq.c) calls weft__fault_wait_abandoned
 * after its waiter abandoned its wait and before it relocks the object, the
 * window in which a claim may drop the abandoned node (waitq.h).  The
 * function runs in the waiter's context, with no lock held.
 */
#ifdef WEFT_FAULT_INJECTION
bool weft__fault(void);
/* Makes one ask in n fail from now on (0: none); returns the faults
 * injected so far. */
__attribute__((visibility("default"))) uint64_t weft__fault_every(unsigned n);
void weft__fault_io_begin(int fd);
__attribute__((visibility("default"))) void weft__fault_on_io_begin(void (*fn)(int fd));
void weft__fault_wait_abandoned(void);
__attribute__((visibility("default"))) void weft__fault_on_wait_abandoned(void (*fn)(void));
#else
static inline bool weft__fault(void) { return false; }
static inline void weft__fault_io_begin(int fd) { (void)fd; }
static inline void weft__fault_wait_abandoned(void) {}
#endif

#endif
