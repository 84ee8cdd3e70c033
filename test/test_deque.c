/* SPDX-License-Identifier: MIT */
/* Chase-Lev deque: sequential semantics, growth, and one owner against
 * several thieves on separate threads, every item taken exactly once.  And
 * WEFT__ASSERT (lib/invariant.h) fires on a deque or lock misuse when compiled
 * in. */
#include "harness.h"
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "deque.h"
#include "lock.h"

static void *item(uint64_t i) { return (void *)(uintptr_t)(i + 2); }	/* never EMPTY or ABORT */
static uint64_t index_of(void *p) { return (uint64_t)(uintptr_t)p - 2; }

Test(deque, lifo_for_owner_fifo_for_thieves)
{
	struct weft__deque d;
	cr_assert_eq(weft__deque_init(&d, 4), 0);
	cr_assert_null(weft__deque_take(&d));
	cr_assert_eq(weft__deque_steal(&d), WEFT__DEQUE_EMPTY);
	for (uint64_t i = 0; i < 100; i++)	/* grows 4 -> 128 */
		cr_assert_eq(weft__deque_push(&d, item(i)), 0);
	cr_assert_eq(weft__deque_size(&d), 100);
	cr_assert_eq(weft__deque_steal(&d), item(0));
	cr_assert_eq(weft__deque_steal(&d), item(1));
	cr_assert_eq(weft__deque_take(&d), item(99));
	cr_assert_eq(weft__deque_take(&d), item(98));
	for (uint64_t i = 2; i < 98; i++)
		cr_assert_eq(weft__deque_steal(&d), item(i));
	cr_assert_null(weft__deque_take(&d));
	cr_assert_eq(weft__deque_steal(&d), WEFT__DEQUE_EMPTY);
	cr_assert_eq(weft__deque_size(&d), 0);
	weft__deque_fini(&d);
}

enum { THIEVES = 3 };
#ifdef WEFT_TEST_TSAN
#define ITEMS 300000u
#elif defined(WEFT_TEST_ASAN)
#define ITEMS 1000000u
#else
#define ITEMS 3000000u
#endif

static struct weft__deque shared;
static unsigned char *taken;
static unsigned owner_done;

static void record(void *p)
{
	uint64_t i = index_of(p);
	cr_assert_lt(i, ITEMS, "foreign item %p", p);
	unsigned char prev = __atomic_fetch_add(&taken[i], 1, __ATOMIC_RELAXED);
	cr_assert_eq(prev, 0, "item %lu taken twice", (unsigned long)i);
}

static void *thief(void *arg)
{
	(void)arg;
	for (;;) {
		void *p = weft__deque_steal(&shared);
		if (p == WEFT__DEQUE_ABORT)
			continue;
		if (p != WEFT__DEQUE_EMPTY) {
			record(p);
			continue;
		}
		if (__atomic_load_n(&owner_done, __ATOMIC_ACQUIRE) && weft__deque_size(&shared) == 0)
			return NULL;
	}
}

Test(deque, owner_against_thieves, .timeout = 300)
{
	taken = calloc(ITEMS, 1);
	cr_assert_eq(weft__deque_init(&shared, 8), 0);	/* grows under the thieves' feet */
	pthread_t t[THIEVES];
	for (int i = 0; i < THIEVES; i++)
		pthread_create(&t[i], NULL, thief, NULL);
	uint64_t rng = 88172645463325252ull;
	for (uint64_t i = 0; i < ITEMS; i++) {
		cr_assert_eq(weft__deque_push(&shared, item(i)), 0);
		rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
		/* take often, in bursts, so the last-element race is hit a lot */
		for (unsigned k = rng % 4; k > 0; k--) {
			void *p = weft__deque_take(&shared);
			if (!p)
				break;
			record(p);
		}
	}
	void *p;
	while ((p = weft__deque_take(&shared)))
		record(p);
	__atomic_store_n(&owner_done, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < THIEVES; i++)
		pthread_join(t[i], NULL);
	for (uint64_t i = 0; i < ITEMS; i++)
		cr_assert_eq(taken[i], 1, "item %lu taken %u times", (unsigned long)i, taken[i]);
	weft__deque_fini(&shared);
	free(taken);
}

/* ---- WEFT__ASSERT (lib/invariant.h), when the build compiles it in */

#ifdef WEFT_ASSERTIONS
/* Runs misuse() in a child with stderr on a pipe: it must die of SIGABRT
 * having written one line of weft's naming the condition. */
static void expect_assertion(void (*misuse)(void), const char *cond)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		misuse();
		_exit(0);	/* the assertion did not fire */
	}
	close(p[1]);
	char buf[1024];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof buf - 1 && (r = read(p[0], buf + len, sizeof buf - 1 - len)) > 0)
		len += (size_t)r;
	buf[len] = '\0';
	close(p[0]);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x, stderr: %s",
		  status, buf);
	char want[256];
	snprintf(want, sizeof want, "weft: assertion failed: %s at ", cond);
	cr_assert(strncmp(buf, want, strlen(want)) == 0, "stderr: %s", buf);
	/* Its line ends at file:line.  (What follows, if anything, is not
	 * ours: qemu-user reports the abort on the same stderr.) */
	char *nl = strchr(buf, '\n');
	cr_assert(nl && nl[-1] >= '0' && nl[-1] <= '9', "a line ending file:line: %s", buf);
	cr_assert(nl[1] == '\0' || strncmp(nl + 1, "weft:", 5) != 0, "more than one line: %s", buf);
}

static void release_a_free_lock(void)
{
	struct weft__lock l = { 0 };
	weft__lock_release(&l);
}

static void push_onto_corrupt_indices(void)
{
	struct weft__deque d;
	if (weft__deque_init(&d, 4) != 0)
		_exit(1);
	d.top = d.bottom + 2;	/* top past bottom: no thief could do that */
	weft__deque_push(&d, item(0));
}
#endif

Test(deque, assertions_fire_when_compiled_in)
{
#ifdef WEFT_ASSERTIONS
	expect_assertion(release_a_free_lock, "old != 0");
	expect_assertion(push_onto_corrupt_indices, "t <= b");
#elif defined(cr_skip_test)	/* Criterion's; the TSan stand-in (harness.h) has none */
	cr_skip_test("assertions are not compiled in (-Dassertions=false)");
#endif
}
