/* SPDX-License-Identifier: MIT */
/*
 * x86-64 System V context switch.  See context.h for the contract.
 *
 * Saved frame, from the saved stack pointer upwards (64 bytes):
 *   0: MXCSR (4 bytes)  4: x87 control word (2 bytes)  6: padding
 *   8: r15  16: r14  24: r13  32: r12  40: rbx  48: rbp  56: return address
 * The frame is resumed with `pop; jmp *reg` rather than `ret`: a `ret` into
 * another stack mispredicts every time (its return stack buffer predicts the
 * caller on the old stack).
 */
	.text

	.globl	weft__ctx_switch
	.hidden	weft__ctx_switch
	.type	weft__ctx_switch, @function
	.p2align 4
weft__ctx_switch:
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	pushq	%r13
	.cfi_adjust_cfa_offset 8
	pushq	%r14
	.cfi_adjust_cfa_offset 8
	pushq	%r15
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movq	%rsp, (%rdi)
	movq	%rsi, %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	popq	%rcx
	jmpq	*%rcx
	.cfi_endproc
	.size	weft__ctx_switch, .-weft__ctx_switch

/*
 * The first frame of every coroutine: rbx holds fn, r12 its argument.  The
 * return address is marked undefined so debuggers end the backtrace here.
 */
	.globl	weft__ctx_entry
	.hidden	weft__ctx_entry
	.type	weft__ctx_entry, @function
	.p2align 4
weft__ctx_entry:
	.cfi_startproc
	.cfi_undefined rip
	xorl	%ebp, %ebp
	movq	%r12, %rdi
	callq	*%rbx
	ud2
	.cfi_endproc
	.size	weft__ctx_entry, .-weft__ctx_entry

	.section .note.GNU-stack,"",@progbits
