/* SPDX-License-Identifier: MIT */
/* Context switch: round trips, register and FP-control preservation. */
#include "harness.h"
#include <fenv.h>
#include <stdint.h>
#include <stdlib.h>

#include "context.h"
#include "weft.h"

static void *main_sp, *co_sp;
static volatile long counter;

static void bounce(void *arg)
{
	long n = (long)(intptr_t)arg;
	for (long i = 0; i < n; i++) {
		counter++;
		weft__ctx_switch(&co_sp, main_sp);
	}
	weft__ctx_switch(&co_sp, main_sp);
	abort();
}

static char *new_stack(size_t size)
{
	char *s = aligned_alloc(64, size);
	cr_assert_not_null(s);
	return s;
}

Test(switch, round_trips)
{
	enum { N = 100000, SIZE = 64 << 10 };
	char *stack = new_stack(SIZE);
	co_sp = weft__ctx_make(stack + SIZE, bounce, (void *)(intptr_t)N);
	counter = 0;
	for (long i = 0; i < N; i++) {
		weft__ctx_switch(&main_sp, co_sp);
		cr_assert_eq(counter, i + 1);
	}
	weft__ctx_switch(&main_sp, co_sp);
	free(stack);
}

/* Callee-saved values live across switches (the compiler keeps these in
 * callee-saved registers under optimisation). */
static void churn(void *arg)
{
	(void)arg;
	for (;;) {
		volatile double d = 3.25;
		(void)d;
		weft__ctx_switch(&co_sp, main_sp);
	}
}

Test(switch, callee_saved_survive)
{
	enum { SIZE = 64 << 10 };
	char *stack = new_stack(SIZE);
	co_sp = weft__ctx_make(stack + SIZE, churn, NULL);
	long a = 1, b = 2, c = 3, d = 4, e = 5;
	double x = 1.5, y = 2.5;
	for (int i = 0; i < 1000; i++) {
		weft__ctx_switch(&main_sp, co_sp);
		a += b; b += c; c += d; d += e; e += 1;
		x = x * 1.0000001 + y;
	}
	cr_assert_eq(e, 1005);
	cr_assert(x > 1000.0);
	cr_assert(a > 0 && b > 0 && c > 0 && d > 0);
	free(stack);
}

static int seen_round;
static void other_rounding(void *arg)
{
	(void)arg;
	seen_round = fegetround();	/* a new context starts at the default */
	fesetround(FE_DOWNWARD);
	weft__ctx_switch(&co_sp, main_sp);
	seen_round = fegetround();	/* its own mode came back */
	weft__ctx_switch(&co_sp, main_sp);
	abort();
}

Test(switch, fp_control_is_per_context)
{
	enum { SIZE = 64 << 10 };
	char *stack = new_stack(SIZE);
	fesetround(FE_UPWARD);
	co_sp = weft__ctx_make(stack + SIZE, other_rounding, NULL);
	weft__ctx_switch(&main_sp, co_sp);
	cr_assert_eq(seen_round, FE_TONEAREST);
	cr_assert_eq(fegetround(), FE_UPWARD, "the switch back restores the caller's mode");
	weft__ctx_switch(&main_sp, co_sp);
	cr_assert_eq(seen_round, FE_DOWNWARD);
	cr_assert_eq(fegetround(), FE_UPWARD);
	fesetround(FE_TONEAREST);
	free(stack);
}

/* Through the runtime: a coroutine's rounding mode follows it across yields
 * and migrations, and does not leak into others. */
static void keep_mode(void *arg)
{
	int mode = (int)(intptr_t)arg;
	fesetround(mode);
	for (int i = 0; i < 2000; i++) {
		weft_yield();
		if (fegetround() != mode)
			abort();
	}
}

Test(switch, fp_mode_follows_coroutine)
{
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	const int modes[] = { FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO, FE_TONEAREST };
	weft_co *co[8];
	for (int i = 0; i < 8; i++)
		co[i] = weft_spawn(keep_mode, (void *)(intptr_t)modes[i % 4]);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(weft_join(co[i]), 0);
	cr_assert_eq(weft_shutdown(), 0);
}
