/* SPDX-License-Identifier: MIT */
/*
 * errno across suspensions, with nothing but the header's default: this file
 * reads and writes plain `errno` around calls that suspend and migrate, as a
 * user's code does, and defines nothing before including weft.h.  Built with
 * -DWEFT_NO_ERRNO_GUARD (glibc's const __errno_location) at -O2, the keepers
 * below read the errno of the thread they left.
 */
#include "harness.h"
#include <errno.h>
#include <stdint.h>

#include "weft.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

enum { KEEPERS = 64, MIN_ROUNDS = 500, MAX_ROUNDS = 100000 };

static unsigned migrations;
static unsigned wrong;	/* rounds that read another thread's errno */

static void errno_keeper(void *arg)
{
	int mine = (int)(intptr_t)arg;
	int where = weft_worker_id();
	errno = mine;
	/* at least MIN_ROUNDS, and on until some coroutine has migrated */
	for (int i = 0; i < MAX_ROUNDS; i++) {
		if (i >= MIN_ROUNDS && __atomic_load_n(&migrations, __ATOMIC_RELAXED))
			break;
		weft_yield();
		if (errno != mine)
			__atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
		if (weft_worker_id() != where) {
			__atomic_fetch_add(&migrations, 1, __ATOMIC_RELAXED);
			where = weft_worker_id();
		}
		/* a failing call after a suspension reports on this thread */
		if (weft_join(NULL) != -1 || errno != EINVAL)
			__atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
		errno = mine;
	}
}

static void errno_root(void *arg)
{
	(void)arg;
	weft_co *co[KEEPERS];
	for (int i = 0; i < KEEPERS; i++)
		co[i] = weft_spawn(errno_keeper, (void *)(intptr_t)(1000 + i));
	for (int i = 0; i < KEEPERS; i++)
		cr_assert_eq(weft_join(co[i]), 0);
}

Test(errno_guard, plain_errno_follows_the_coroutine)
{
	cr_assert_eq(weft_main(errno_root, NULL, &WEFT_CONFIG(.workers = 2)), 0);
	cr_assert_eq(wrong, 0, "%u rounds read another thread's errno", wrong);
	/* Under valgrind on a busy host the keepers may not spread at all
	 * (sched::errno_survives_migration says the same). */
	if (RUNNING_ON_VALGRIND && migrations == 0)
		cr_skip_test("no migration under valgrind: errno checked on one worker only");
	cr_assert_gt(migrations, 0, "coroutines never moved between workers");
}
