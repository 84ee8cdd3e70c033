/* SPDX-License-Identifier: MIT */
/*
 * harness.h — the tests' view of Criterion.
 *
 * Normally this is Criterion itself.  Under ThreadSanitizer Criterion cannot
 * start: its sandbox maps a shared arena at a random address in a range that
 * TSan's shadow memory reserves whole (Snaipe/Criterion#274).  TSan builds
 * therefore use the small stand-in below (harness.c): the same Test(),
 * cr_assert_*() and cr_skip_test() spellings, each test run in a forked
 * child, with the .timeout and .signal options the suite uses.
 *
 * A test that cannot run here calls cr_skip_test(reason): both runners then
 * print "[SKIP] suite::name: reason" (Criterion with --verbose, as
 * test/meson.build runs it), which scripts/check-skips reads.  A skipped
 * test never counts as a pass.
 */
#ifndef WEFT_TEST_HARNESS_H
#define WEFT_TEST_HARNESS_H

#ifndef WEFT_MINI_HARNESS
#include <criterion/criterion.h>
#else

#include <stdbool.h>
#include <string.h>

struct harness_test {
	const char *suite, *name;
	void (*fn)(void);
	int timeout;	/* seconds; 0: the default */
	int signal;	/* the signal the test must die of; 0: none */
	struct harness_test *next;
};

void harness_register(struct harness_test *t);
void harness_check(bool ok, const char *expr, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
_Noreturn void harness_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define Test(suite_, name_, ...)                                                        \
	static void suite_##_##name_##_fn(void);                                         \
	static struct harness_test suite_##_##name_##_test = {                           \
		.suite = #suite_, .name = #name_, .fn = suite_##_##name_##_fn, __VA_ARGS__ }; \
	__attribute__((constructor)) static void suite_##_##name_##_reg(void)            \
	{ harness_register(&suite_##_##name_##_test); }                                  \
	static void suite_##_##name_##_fn(void)

#define HARNESS_CHECK(cond, text, ...) \
	harness_check((cond), text, __FILE__, __LINE__, " " __VA_ARGS__)
#define cr_assert(c, ...) HARNESS_CHECK((c), #c, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) HARNESS_CHECK((a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) HARNESS_CHECK((a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) HARNESS_CHECK((a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) HARNESS_CHECK((a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) HARNESS_CHECK((a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) HARNESS_CHECK((a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...) HARNESS_CHECK((p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) HARNESS_CHECK((p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) HARNESS_CHECK(strcmp((a), (b)) == 0, #a " == " #b, __VA_ARGS__)
#define cr_skip_test(...) harness_skip(__VA_ARGS__)

#endif
#endif
