/* SPDX-License-Identifier: MIT */
/*
 * context.c — forging the first frame of a new context (see context.h).
 * The frame layouts are documented in switch_x86_64.S and switch_aarch64.S.
 */
#include "context.h"

#include <stdint.h>
#include <string.h>

void weft__ctx_entry(void);

#if defined(__x86_64__)

enum { FRAME_WORDS = 8, MXCSR_DEFAULT = 0x1f80, X87_CW_DEFAULT = 0x037f };

void *weft__ctx_make(void *top, void (*fn)(void *), void *arg)
{
	/* 16 bytes below top: after the frame is popped, rsp is 16-aligned
	 * when the trampoline calls fn, as the ABI requires. */
	uintptr_t t = ((uintptr_t)top & ~(uintptr_t)15) - 16;
	uint64_t *sp = (uint64_t *)t - FRAME_WORDS;
	memset(sp, 0, FRAME_WORDS * sizeof *sp);
	sp[0] = MXCSR_DEFAULT | ((uint64_t)X87_CW_DEFAULT << 32);
	sp[4] = (uint64_t)(uintptr_t)arg;		/* r12 */
	sp[5] = (uint64_t)(uintptr_t)fn;		/* rbx */
	sp[7] = (uint64_t)(uintptr_t)weft__ctx_entry;	/* return address */
	return sp;
}

#elif defined(__aarch64__)

enum { FRAME_WORDS = 22 };

void *weft__ctx_make(void *top, void (*fn)(void *), void *arg)
{
	uintptr_t t = (uintptr_t)top & ~(uintptr_t)15;
	uint64_t *sp = (uint64_t *)t - FRAME_WORDS;
	memset(sp, 0, FRAME_WORDS * sizeof *sp);
	sp[0] = (uint64_t)(uintptr_t)fn;		/* x19 */
	sp[1] = (uint64_t)(uintptr_t)arg;		/* x20 */
	sp[11] = (uint64_t)(uintptr_t)weft__ctx_entry;	/* x30 */
	return sp;					/* FPCR 0: the default */
}

#else
#error "weft supports x86-64 and AArch64 only"
#endif
