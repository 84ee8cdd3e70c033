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

#ifdef WEFT_FAULT_INJECTION
bool weft__fault(void);
/* Makes one ask in n fail from now on (0: none); returns the faults
 * injected so far. */
__attribute__((visibility("default"))) uint64_t weft__fault_every(unsigned n);
#else
static inline bool weft__fault(void) { return false; }
#endif

#endif
