/* SPDX-License-Identifier: MIT */
/*
 * context.h — the machine context switch (switch_x86_64.S, switch_aarch64.S).
 *
 * A suspended context is nothing but a stack pointer: weft__ctx_switch pushes
 * the callee-saved registers and the floating-point control state (x86-64:
 * rbx rbp r12-r15, MXCSR and the x87 control word; AArch64: x19-x30, d8-d15
 * and FPCR) on the running stack, stores the stack pointer in *from and pops
 * the same frame off the stack `to` points at.  Caller-saved registers need
 * no saving: the switch is an ordinary call as far as the compiler knows.
 */
#ifndef WEFT_CONTEXT_H
#define WEFT_CONTEXT_H

#include <stddef.h>

/* Saves the running context into *from and resumes the one saved at `to`. */
void weft__ctx_switch(void **from, void *to);

/*
 * Forges the first frame of a new context on the stack whose highest address
 * is `top`, and returns its stack pointer.  The first switch to it "returns"
 * into weft__ctx_entry (the trampoline, the outermost frame of every
 * coroutine, where unwinders stop), which calls fn(arg).  fn must never
 * return: it ends by switching away for good.  The new context starts with
 * the default floating-point environment (round-to-nearest, no exceptions
 * unmasked).
 */
void *weft__ctx_make(void *top, void (*fn)(void *), void *arg);

#endif
