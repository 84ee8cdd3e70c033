/* SPDX-License-Identifier: MIT */
/* Configuration: the environment, explicit fields, defaults, and every bad
 * value; init/shutdown cycles. */
#include "harness.h"
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coro_test.h"

/* weft_init(cfg) with stderr captured into buf. */
static int init_capturing(const weft_config *cfg, char *buf, size_t size, int *err)
{
	struct stderr_capture cap = stderr_capture_begin();
	int r = weft_init(cfg);
	*err = errno;
	stderr_capture_end(&cap, buf, size);
	return r;
}

static void expect_rejected(const char *var, const char *value)
{
	char out[512];
	int err;
	const char *was = getenv(var);	/* a CI run's WEFT_POLLER, kept for the next tests */
	char *saved = was ? strdup(was) : NULL;
	setenv(var, value, 1);
	int r = init_capturing(NULL, out, sizeof out, &err);
	if (saved)
		setenv(var, saved, 1);
	else
		unsetenv(var);
	free(saved);
	if (r == 0)
		weft_shutdown();
	cr_assert_eq(r, -1, "%s=\"%s\" was accepted", var, value);
	cr_assert_eq(err, EINVAL, "%s=\"%s\": errno %d", var, value, err);
	cr_assert_not_null(strstr(out, var), "stderr names %s: \"%s\"", var, out);
	char *nl = strchr(out, '\n');
	cr_assert(nl && nl[1] == 0, "exactly one line: \"%s\"", out);
	cr_assert_eq(weft_worker_count(), 0, "nothing left running");
}

Test(config, bad_environment_values)
{
	static const struct {
		const char *var;
		const char *bad[10];	/* NULL-terminated */
	} cases[] = {
		{ "WEFT_WORKERS", { "", "abc", "0", "1025", "4x", " 4", "-1", "2.5", "99999999999999999999" } },
		{ "WEFT_STACK_SIZE", { "", "big", "0", "1k", "4096", "2g", "64kb", "64q", "-64k", "1t" } },
		{ "WEFT_PIN", { "", "2", "yes", "1 ", "-1" } },
		{ "WEFT_STACK_GUARDS", { "", "many", "-5", "1073741825" } },
		{ "WEFT_BLOCKING_THREADS", { "", "0", "4097", "lots", "8 " } },
		{ "WEFT_STALL_MS", { "", "-1", "3600001", "100ms", "1e3" } },
		{ "WEFT_STATS", { "", "2", "yes", "on" } },
		{ "WEFT_SCHED_SAMPLE", { "", "0", "3", "100", "131072", "-8" } },
		{ "WEFT_POLLER", { "", "Shared", "workers", "1", "shared ", "epoll" } },
	};
	unsetenv("WEFT_WORKERS");
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (size_t i = 0; i < 10 && cases[c].bad[i]; i++)
			expect_rejected(cases[c].var, cases[c].bad[i]);
}

Test(config, bad_fields)
{
	unsetenv("WEFT_WORKERS");
	const weft_config bad[] = {
		WEFT_CONFIG(.workers = 1025),
		WEFT_CONFIG(.stack_size = 1024),
		WEFT_CONFIG(.stack_size = (size_t)2 << 30),
		WEFT_CONFIG(.pin = 2),
		WEFT_CONFIG(.pin = -2),
		WEFT_CONFIG(.poller = -1),
		WEFT_CONFIG(.poller = WEFT_POLLER_WORKER + 1),
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		errno = 0;
		cr_assert_eq(weft_init(&bad[i]), -1, "case %zu accepted", i);
		cr_assert_eq(errno, EINVAL);
	}
}

Test(config, environment_and_fields)
{
	setenv("WEFT_WORKERS", "3", 1);
	cr_assert_eq(weft_init(NULL), 0);
	cr_assert_eq(weft_worker_count(), 3);
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0, "the field wins");
	cr_assert_eq(weft_worker_count(), 2);
	cr_assert_eq(weft_shutdown(), 0);
	setenv("WEFT_PIN", "1", 1);
	setenv("WEFT_STACK_SIZE", "128K", 1);
	cr_assert_eq(weft_init(NULL), 0);
	cr_assert_eq(weft_shutdown(), 0);
	unsetenv("WEFT_PIN");
	unsetenv("WEFT_STACK_SIZE");
	unsetenv("WEFT_WORKERS");
}

Test(config, default_workers_follow_the_affinity_mask)
{
	unsetenv("WEFT_WORKERS");
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
	cr_assert_eq(weft_init(NULL), 0);
	cr_assert_eq(weft_worker_count(), 1);
	cr_assert_eq(weft_shutdown(), 0);
}

static void use_stack(void *arg)
{
	volatile char big[100 << 10];	/* more than the 64 KiB default */
	memset((char *)big, 1, sizeof big);
	*(int *)arg = big[sizeof big - 1];
}

Test(config, stack_size_is_honoured)
{
	setenv("WEFT_STACK_SIZE", "256k", 1);
	int out = 0;
	cr_assert_eq(weft_main(use_stack, &out, NULL), 0);
	cr_assert_eq(out, 1);
	unsetenv("WEFT_STACK_SIZE");
}

static void tiny(void *arg) { ++*(int *)arg; }

Test(config, init_shutdown_cycles)
{
	int runs = 0;
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0, "cycle %d: errno %d", i, errno);
		weft_co *co = weft_spawn(tiny, &runs);
		cr_assert_not_null(co);
		cr_assert_eq(weft_join(co), 0);
		cr_assert_eq(weft_shutdown(), 0);
	}
	cr_assert_eq(runs, 100);
}

Test(config, size_too_small_is_einval)
{
	unsetenv("WEFT_WORKERS");
	weft_config cfg = WEFT_CONFIG_INIT;
	cfg.workers = 2;
	int runs = 0;
	for (uint32_t size = 0; size < sizeof cfg.size; size++) {
		cfg.size = size;
		errno = 0;
		cr_assert_eq(weft_init(&cfg), -1, "size %u accepted", (unsigned)size);
		cr_assert_eq(errno, EINVAL);
		cr_assert_eq(weft_main(tiny, &runs, &cfg), -1, "size %u accepted", (unsigned)size);
		cr_assert_eq(errno, EINVAL);
	}
	cr_assert_eq(runs, 0);
	cr_assert_eq(weft_worker_count(), 0, "nothing left running");
}

/* A caller built against an older, smaller weft_config: the fields past its
 * size are never read (here they hold values that would be EINVAL) and take
 * the environment or the defaults. */
Test(config, older_smaller_size_defaults_the_rest)
{
	weft_config cfg = WEFT_CONFIG_INIT;
	cfg.workers = 2;
	cfg.stack_size = 1024;	/* below the minimum */
	cfg.pin = 2;		/* out of range */
	cfg.size = offsetof(weft_config, stack_size);
	setenv("WEFT_WORKERS", "3", 1);
	cr_assert_eq(weft_init(&cfg), 0, "errno %d", errno);
	cr_assert_eq(weft_worker_count(), 2, "workers is covered: the field wins");
	cr_assert_eq(weft_shutdown(), 0);

	cfg.size = sizeof cfg.size;	/* no field at all */
	cr_assert_eq(weft_init(&cfg), 0, "errno %d", errno);
	cr_assert_eq(weft_worker_count(), 3, "workers past the size: the environment");
	cr_assert_eq(weft_shutdown(), 0);
	unsetenv("WEFT_WORKERS");

	cfg.size = offsetof(weft_config, pin);	/* covers stack_size, not pin */
	errno = 0;
	cr_assert_eq(weft_init(&cfg), -1, "stack_size is covered and read");
	cr_assert_eq(errno, EINVAL);
	cfg.stack_size = 128 << 10;
	cr_assert_eq(weft_init(&cfg), 0, "pin past the size is not read: errno %d", errno);
	cr_assert_eq(weft_shutdown(), 0);
}

/* A caller built against a later, larger weft_config: the fields this
 * library does not know are ignored. */
Test(config, later_larger_size_ignores_unknown_fields)
{
	struct {
		weft_config cfg;
		uint64_t later_field;
	} later = { WEFT_CONFIG(.workers = 2), 12345 };
	later.cfg.size = sizeof later;
	cr_assert_eq(weft_init(&later.cfg), 0, "errno %d", errno);
	cr_assert_eq(weft_worker_count(), 2);
	cr_assert_eq(weft_shutdown(), 0);
}

/* weft.h's version macros, the library's weft_version() and meson.build's
 * project version (WEFT_PROJECT_VERSION, from test/meson.build) agree. */
Test(config, version_matches_the_project)
{
	char parts[32];
	snprintf(parts, sizeof parts, "%d.%d.%d", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR,
		 WEFT_VERSION_PATCH);
	cr_assert_str_eq(parts, WEFT_VERSION);
	cr_assert_str_eq(WEFT_VERSION, WEFT_PROJECT_VERSION);
	cr_assert_str_eq(weft_version(), WEFT_PROJECT_VERSION);
	cr_assert_eq(WEFT_VERSION_NUMBER,
		     WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH);
}
