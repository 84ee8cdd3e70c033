/* SPDX-License-Identifier: MIT */
/* Coroutine-local storage: values follow coroutines across workers,
 * destructors run once per value, keys come and go safely. */
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "weft.h"

static unsigned long destroyed;
static void count_destroy(void *value)
{
	(void)value;
	__atomic_fetch_add(&destroyed, 1, __ATOMIC_RELAXED);
}

Test(local, outside_a_coroutine)
{
	weft_key *key = weft_key_new(NULL);
	cr_assert_not_null(key);
	errno = 0;
	cr_assert_eq(weft_local_set(key, &destroyed), -1);
	cr_assert_eq(errno, EPERM);
	cr_assert_null(weft_local_get(key));
	weft_key_free(key);
	weft_key_free(NULL);
}

static weft_key *shared_key;
static unsigned migrated;

/* TSan runs every switch ~50x slower: fewer coroutines and rounds there. */
#ifdef WEFT_TEST_TSAN
enum { KEEPERS = 400, MIN_ROUNDS = 50 };
#else
enum { KEEPERS = 2000, MIN_ROUNDS = 200 };
#endif

static void keep_value(void *arg)
{
	if (weft_local_get(shared_key) != NULL)
		abort();	/* a new coroutine starts unset */
	if (weft_local_set(shared_key, arg) != 0)
		abort();
	int where = weft_worker_id();
	/* at least MIN_ROUNDS rounds, and on until some coroutine has migrated */
	for (int i = 0; i < 100000; i++) {
		if (i >= MIN_ROUNDS && __atomic_load_n(&migrated, __ATOMIC_RELAXED))
			break;
		weft_yield();
		if (weft_local_get(shared_key) != arg)
			abort();
		if (weft_worker_id() != where) {
			__atomic_fetch_add(&migrated, 1, __ATOMIC_RELAXED);
			where = weft_worker_id();
		}
	}
}

static void keepers(void *arg)
{
	(void)arg;
	static weft_co *co[KEEPERS];
	for (uintptr_t i = 0; i < KEEPERS; i++)
		co[i] = weft_spawn(keep_value, (void *)(i + 1));
	for (int i = 0; i < KEEPERS; i++)
		cr_assert_eq(weft_join(co[i]), 0);
}

Test(local, values_follow_coroutines_across_workers, .timeout = 300)
{
	shared_key = weft_key_new(count_destroy);
	destroyed = migrated = 0;
	cr_assert_eq(weft_main(keepers, NULL, &WEFT_CONFIG(.workers = 2)), 0);
	cr_assert_eq(destroyed, KEEPERS, "one destructor call per value");
	cr_assert_gt(migrated, 0, "no coroutine moved between workers");
	weft_key_free(shared_key);
}

static void set_and_return(void *arg)
{
	if (weft_local_set(shared_key, arg) != 0)
		abort();
}

static void *plain_joiner(void *arg)
{
	(void)arg;
	for (int i = 0; i < 500; i++) {
		weft_co *co = weft_spawn(set_and_return, &destroyed);
		if (!co || weft_join(co) != 0)
			abort();
	}
	return NULL;
}

Test(local, destructors_run_before_join_for_detached_and_at_shutdown)
{
	shared_key = weft_key_new(count_destroy);
	destroyed = 0;
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	weft_co *co = weft_spawn(set_and_return, &destroyed);
	cr_assert_eq(weft_join(co), 0);
	cr_assert_eq(destroyed, 1, "the value is destroyed before join returns");
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(weft_detach(weft_spawn(set_and_return, &destroyed)), 0);
	pthread_t t;
	pthread_create(&t, NULL, plain_joiner, NULL);
	pthread_join(t, NULL);
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_eq(destroyed, 1 + 1000 + 500);
	weft_key_free(shared_key);
}

/* Many keys; destructors in key order; a destructor that sets another key
 * causes another pass, and passes are bounded. */
enum { MANY = 600 };
static weft_key *keys[MANY];
static int order[MANY], norder;
static weft_key *late_key, *sticky_key;
static int late_seen, sticky_runs;

static void record_order(void *value) { order[norder++] = (int)(intptr_t)value - 1; }
static void late_destroy(void *value) { (void)value; late_seen++; }
static void set_late(void *value)
{
	(void)value;
	weft_local_set(late_key, &late_seen);	/* needs a second pass */
}
static void sticky(void *value)
{
	sticky_runs++;
	weft_local_set(sticky_key, value);	/* never gives up */
}

static weft_key *trigger_key;

static void use_many(void *arg)
{
	(void)arg;
	for (int i = MANY - 1; i >= 0; i--)	/* set in reverse: order is by key */
		cr_assert_eq(weft_local_set(keys[i], (void *)(intptr_t)(i + 1)), 0);
	for (int i = 0; i < MANY; i++)
		cr_assert_eq(weft_local_get(keys[i]), (void *)(intptr_t)(i + 1));
	trigger_key = weft_key_new(set_late);
	cr_assert_eq(weft_local_set(trigger_key, &late_seen), 0);
	cr_assert_eq(weft_local_set(sticky_key, &sticky_runs), 0);
}

Test(local, many_keys_ordered_destructors_bounded_passes)
{
	late_key = weft_key_new(late_destroy);
	sticky_key = weft_key_new(sticky);
	for (int i = 0; i < MANY; i++)
		cr_assert_not_null(keys[i] = weft_key_new(record_order));
	norder = late_seen = sticky_runs = 0;
	cr_assert_eq(weft_main(use_many, NULL, &WEFT_CONFIG(.workers = 1)), 0);
	cr_assert_eq(norder, MANY);
	for (int i = 0; i < MANY; i++)
		cr_assert_eq(order[i], i, "destructor %d ran at position %d", order[i], i);
	cr_assert_eq(late_seen, 1, "a value set by a destructor is destroyed too");
	cr_assert_eq(sticky_runs, 4, "passes stop after 4");
	weft_key_free(trigger_key);
}

Test(local, the_key_limit)
{
	static weft_key *all[1100];
	int n = 0;
	while (n < 1100 && (all[n] = weft_key_new(NULL)))
		n++;
	cr_assert_lt(n, 1100);
	cr_assert_eq(errno, EAGAIN);
	cr_assert_geq(n, 1000);
	while (n > 0)
		weft_key_free(all[--n]);
	cr_assert_not_null(all[0] = weft_key_new(NULL), "slots come back");
	weft_key_free(all[0]);
}

/* Freeing a key while a coroutine holds a value: no destructor, no crash,
 * and a new key reusing the slot does not see the old value. */
static int freed_destroyed;
static void freed_destroy(void *value) { (void)value; freed_destroyed++; }

static void hold_then_free(void *arg)
{
	(void)arg;
	weft_key *k = weft_key_new(freed_destroy);
	cr_assert_eq(weft_local_set(k, &freed_destroyed), 0);
	weft_key_free(k);
	weft_key *again = weft_key_new(freed_destroy);	/* likely the same slot */
	cr_assert_null(weft_local_get(again), "an old value leaked into a new key");
	weft_yield();
	cr_assert_null(weft_local_get(again));
	weft_key_free(again);
}

Test(local, key_freed_while_in_use)
{
	freed_destroyed = 0;
	cr_assert_eq(weft_main(hold_then_free, NULL, &WEFT_CONFIG(.workers = 2)), 0);
	cr_assert_eq(freed_destroyed, 0);
}

static void bad_key(void *arg)
{
	(void)arg;
	cr_assert_eq(weft_local_set(NULL, arg), -1);
	cr_assert_eq(errno, EINVAL);
	cr_assert_null(weft_local_get(NULL));
}

Test(local, null_key)
{
	cr_assert_eq(weft_main(bad_key, NULL, &WEFT_CONFIG(.workers = 1)), 0);
}
