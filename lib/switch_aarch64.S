/* SPDX-License-Identifier: MIT */
/*
 * AArch64 (AAPCS64) context switch.  See context.h for the contract.
 *
 * Saved frame, from the saved stack pointer upwards (176 bytes):
 *   0: x19 x20  16: x21 x22  32: x23 x24  48: x25 x26  64: x27 x28
 *   80: x29 (frame pointer) x30 (return address)
 *   96: d8 d9  112: d10 d11  128: d12 d13  144: d14 d15  160: FPCR  168: pad
 */
	.text

	.globl	weft__ctx_switch
	.hidden	weft__ctx_switch
	.type	weft__ctx_switch, %function
	.p2align 4
weft__ctx_switch:
	.cfi_startproc
	sub	sp, sp, #176
	.cfi_adjust_cfa_offset 176
	stp	x19, x20, [sp, #0]
	stp	x21, x22, [sp, #16]
	stp	x23, x24, [sp, #32]
	stp	x25, x26, [sp, #48]
	stp	x27, x28, [sp, #64]
	stp	x29, x30, [sp, #80]
	stp	d8, d9, [sp, #96]
	stp	d10, d11, [sp, #112]
	stp	d12, d13, [sp, #128]
	stp	d14, d15, [sp, #144]
	mrs	x9, fpcr
	str	x9, [sp, #160]
	mov	x9, sp
	str	x9, [x0]
	mov	sp, x1
	ldr	x9, [sp, #160]
	msr	fpcr, x9
	ldp	x19, x20, [sp, #0]
	ldp	x21, x22, [sp, #16]
	ldp	x23, x24, [sp, #32]
	ldp	x25, x26, [sp, #48]
	ldp	x27, x28, [sp, #64]
	ldp	x29, x30, [sp, #80]
	ldp	d8, d9, [sp, #96]
	ldp	d10, d11, [sp, #112]
	ldp	d12, d13, [sp, #128]
	ldp	d14, d15, [sp, #144]
	add	sp, sp, #176
	ret
	.cfi_endproc
	.size	weft__ctx_switch, .-weft__ctx_switch

/*
 * The first frame of every coroutine: x19 holds fn, x20 its argument.  The
 * return address is marked undefined so debuggers end the backtrace here.
 */
	.globl	weft__ctx_entry
	.hidden	weft__ctx_entry
	.type	weft__ctx_entry, %function
	.p2align 4
weft__ctx_entry:
	.cfi_startproc
	.cfi_undefined x30
	mov	x29, #0
	mov	x0, x20
	blr	x19
	brk	#0
	.cfi_endproc
	.size	weft__ctx_entry, .-weft__ctx_entry

	.section .note.GNU-stack,"",%progbits
