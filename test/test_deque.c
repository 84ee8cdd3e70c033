/* SPDX-License-Identifier: MIT */
/* Chase-Lev deque: sequential semantics, growth, and one owner against
 * several thieves on separate threads, every item taken exactly once.  And
 * WEFT__ASSERT (lib/invariant.h) fires on a deque or lock misuse when compiled
 * in.  And the intrusive list of the wait queues (lib/list.h). */
#include "harness.h"
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#include "atomic.h"
#include "deque.h"
#include "list.h"
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

/* peek names what the next take returns, and nothing once the deque is
 * empty, whichever end emptied it. */
Test(deque, peek_names_the_next_take)
{
	struct weft__deque d;
	cr_assert_eq(weft__deque_init(&d, 4), 0);
	cr_assert_null(weft__deque_peek(&d));
	for (uint64_t i = 0; i < 10; i++)	/* grows 4 -> 16 */
		cr_assert_eq(weft__deque_push(&d, item(i)), 0);
	for (uint64_t i = 9; i >= 5; i--) {
		cr_assert_eq(weft__deque_peek(&d), item(i));
		cr_assert_eq(weft__deque_take(&d), item(i));
	}
	for (uint64_t i = 0; i < 4; i++)
		cr_assert_eq(weft__deque_steal(&d), item(i));
	cr_assert_eq(weft__deque_peek(&d), item(4), "the last one, after steals");
	cr_assert_eq(weft__deque_steal(&d), item(4));
	cr_assert_null(weft__deque_peek(&d), "stolen empty");
	cr_assert_null(weft__deque_take(&d));
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
#else
	cr_skip_test("assertions are not compiled in (-Dassertions=false)");
#endif
}

/*
 * The StoreLoad fence the deque's take and steal (and the idle and park
 * handshakes) rely on: the store-buffering litmus.  Two threads each store
 * to their own word, fence, and load the other's; with the fence at least
 * one of them must see the other's store.  Without it a store waits in the
 * store buffer past the load, and both read 0 (x86 does that within a few
 * thousand rounds).  The main thread starts each round through `round`.
 * Under the sanitizers every access is seq_cst (atomic.h), and valgrind
 * runs one thread at a time: there the test cannot fail, but runs (fewer
 * rounds: under TSan, beside another suite on 2 CPUs, 200,000 handshakes
 * outlasted the 120 s timeout).  A side waiting for the other yields its
 * CPU after 4,096 spins: when the two share one CPU, a spinner would make
 * every round wait for the scheduler's tick (sooner, the yields
 * desynchronise the two sides and the litmus no longer catches a missing
 * fence).
 */
#ifdef WEFT_TEST_TSAN
#define SB_ROUNDS 5000u
#elif defined(WEFT_TEST_ASAN)
#define SB_ROUNDS 50000u
#else
#define SB_ROUNDS 200000u
#endif
struct sb {
	unsigned x __attribute__((aligned(64)));
	unsigned y __attribute__((aligned(64)));
	unsigned round __attribute__((aligned(64)));	/* the round that may start */
	unsigned done;					/* the other side's last round */
	bool saw[2];					/* each side saw the other's store */
	unsigned rounds;
};

/* Until *word says r. */
static void sb_wait(const unsigned *word, unsigned r)
{
	for (unsigned spins = 0; at_load_uint(word) != r; spins++)
		if (spins < 4096)
			at_pause();
		else
			sched_yield();
}

/* One side of round r: its store, the fence, the load of the other's. */
static bool sb_step(unsigned *mine, unsigned *theirs, unsigned r)
{
	at_store_uint(mine, r);
	at_fence_store_load();
	return at_load_uint(theirs) == r;
}

static void *sb_other(void *arg)
{
	struct sb *s = arg;
	for (unsigned r = 1; r <= s->rounds; r++) {
		sb_wait(&s->round, r);
		s->saw[1] = sb_step(&s->y, &s->x, r);
		at_fence_release();
		at_store_uint(&s->done, r);
	}
	return NULL;
}

Test(deque, the_store_load_fence_keeps_a_store_ahead_of_a_later_load, .timeout = 120)
{
	struct sb s = { .rounds = RUNNING_ON_VALGRIND ? 2000 : SB_ROUNDS };
	unsigned neither = 0;
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, sb_other, &s), 0);
	for (unsigned r = 1; r <= s.rounds; r++) {
		at_store_uint(&s.round, r);
		s.saw[0] = sb_step(&s.x, &s.y, r);
		sb_wait(&s.done, r);
		at_fence_acquire();
		neither += !s.saw[0] && !s.saw[1];
	}
	pthread_join(th, NULL);
	cr_assert_eq(neither, 0, "%u of %u rounds saw neither store", neither, s.rounds);
}

struct item {
	struct weft__list_link link;
	int value;
};

static struct item *new_item(struct weft__list *l, int value)
{
	struct item *it = malloc(sizeof *it);
	cr_assert_not_null(it);
	it->value = value;
	weft__list_push(l, &it->link);
	return it;
}

static int head_value(const struct weft__list *l)
{
	return l->head ? WEFT__LIST_ENTRY(l->head, struct item, link)->value : -1;
}

/* Taking the head out leaves its successor's link unwritten (a wait queue's
 * next node is a cold line on another stack), and that successor, now the
 * head with a stale prev, is taken out without reading it: the freed item
 * it points at would be a use-after-free under ASan. */
Test(list, the_head_goes_without_touching_its_successor)
{
	struct weft__list l = { 0 };
	struct item *a = new_item(&l, 1), *b = new_item(&l, 2), *c = new_item(&l, 3),
		    *d = new_item(&l, 4);
	weft__list_unlink(&l, &a->link);
	cr_assert_eq(b->link.prev, &a->link, "the successor's link was written");
	free(a);
	cr_assert_eq(head_value(&l), 2);
	weft__list_unlink(&l, &c->link);	/* from the middle */
	cr_assert_eq(b->link.next, &d->link);
	cr_assert_eq(d->link.prev, &b->link);
	free(c);
	weft__list_unlink(&l, &b->link);	/* the head, its prev stale */
	free(b);
	cr_assert_eq(head_value(&l), 4);
	cr_assert_eq(l.tail, &d->link);
	struct item *e = new_item(&l, 5);
	weft__list_unlink(&l, &e->link);	/* the tail, not the head */
	free(e);
	cr_assert_eq(l.tail, &d->link);
	cr_assert_null(d->link.next);
	weft__list_unlink(&l, &d->link);	/* the last one */
	free(d);
	cr_assert_null(l.head);
	cr_assert_null(l.tail);
	struct item *f = new_item(&l, 6);
	cr_assert_eq(head_value(&l), 6);
	cr_assert_eq(l.tail, &f->link);
	weft__list_unlink(&l, &f->link);
	free(f);
	cr_assert_null(l.head);
}
