/* SPDX-License-Identifier: MIT */
/*
 * weft_group_count and weft_group_spawn_with under attack:
 *   1. bad options (stack_size 0, 1, 1 GiB, 1 GiB + 1, SIZE_MAX; a NULL
 *      name; a 10,000-byte name; NULL fn; NULL group): each refused spawn
 *      must leave the count as it was;
 *   2. churn: members (custom stacks, names) spawn members and return while
 *      plain threads and a coroutine call weft_group_count; every read must
 *      lie between 0 and the spawns so far, and be 0 after weft_group_wait;
 *   3. a member that counts its own group (it counts itself);
 *   4. weft_group_cancel racing spawns and counts, then weft_group_free.
 * Run under ASan and TSan; exits 0 when every check holds.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include "common.h"

enum { ROUNDS = 2000, COUNTERS = 3 };

static weft_group *g;
static atomic_long spawned;	/* members spawned so far */
static atomic_int stop;
static atomic_long bad_reads, reads;

static void leaf(void *arg)
{
	(void)arg;
	if ((uintptr_t)arg & 1)
		weft_yield();
}

static void self_counter(void *arg)
{
	ssize_t n = weft_group_count(g);
	if (n < 1) {
		fprintf(stderr, "a member counted %zd in its own group\n", n);
		atomic_fetch_add(&bad_reads, 1);
	}
	(void)arg;
}

static void parent(void *arg)
{
	static const weft_spawn_opts o[2] = { { 64 * 1024, "leaf-a" }, { 0, NULL } };
	for (int i = 0; i < 4; i++) {
		atomic_fetch_add(&spawned, 1);
		if (!weft_group_spawn_with(g, leaf, (void *)(uintptr_t)i, &o[i & 1]))
			atomic_fetch_sub(&spawned, 1);	/* cancelled groups still spawn; ENOMEM would land here */
	}
	(void)arg;
}

static void check_read(ssize_t n)
{
	atomic_fetch_add(&reads, 1);
	if (n < 0 || n > atomic_load(&spawned)) {
		fprintf(stderr, "weft_group_count read %zd with %ld spawned\n", n, atomic_load(&spawned));
		atomic_fetch_add(&bad_reads, 1);
	}
}

static void *thread_counter(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		check_read(weft_group_count(g));
	return NULL;
}

static void co_counter(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		check_read(weft_group_count(g));
		weft_yield();
	}
}

static int fails;

static void expect_refused(const char *what, weft_co *co, int err)
{
	ssize_t n = weft_group_count(g);
	if (co || errno != err || n != 0) {
		printf("  FAIL %s: co %p errno %d (want %d), count %zd (want 0)\n", what, (void *)co, errno,
		       err, n);
		fails++;
	} else {
		printf("  ok   %s: refused with %s, count %zd\n", what, strerror(err), n);
	}
}

static void expect_spawned(const char *what, const weft_spawn_opts *o)
{
	weft_co *co = weft_group_spawn_with(g, leaf, NULL, o);
	int e = errno;
	CHECK(weft_group_wait(g, -1) == 0);
	ssize_t n = weft_group_count(g);
	if (!co || n != 0) {
		printf("  FAIL %s: co %p errno %d, count after wait %zd\n", what, (void *)co, e, n);
		fails++;
	} else {
		printf("  ok   %s: spawned, count after wait %zd\n", what, n);
	}
}

static void main_co(void *arg)
{
	(void)arg;
	static char longname[10000];
	memset(longname, 'n', sizeof longname - 1);
	g = weft_group_new();
	CHECK(g);
	printf("1. options\n");
	expect_spawned("stack_size 0", &(weft_spawn_opts){ 0, "zero" });
	expect_spawned("stack_size 1", &(weft_spawn_opts){ 1, NULL });
	expect_spawned("stack_size 1 GiB", &(weft_spawn_opts){ (size_t)1 << 30, NULL });
	expect_refused("stack_size 1 GiB + 1",
		       weft_group_spawn_with(g, leaf, NULL, &(weft_spawn_opts){ ((size_t)1 << 30) + 1, NULL }),
		       EINVAL);
	expect_refused("stack_size SIZE_MAX",
		       weft_group_spawn_with(g, leaf, NULL, &(weft_spawn_opts){ SIZE_MAX, NULL }), EINVAL);
	expect_refused("stack_size SIZE_MAX - 4095",
		       weft_group_spawn_with(g, leaf, NULL, &(weft_spawn_opts){ SIZE_MAX - 4095, NULL }),
		       EINVAL);
	expect_spawned("10,000-byte name", &(weft_spawn_opts){ 0, longname });
	expect_refused("NULL fn", weft_group_spawn_with(g, NULL, NULL, NULL), EINVAL);
	errno = 0;
	ssize_t n = weft_group_count(NULL);
	printf("  %s weft_group_count(NULL): %zd errno %d\n", n == -1 && errno == EINVAL ? "ok  " : "FAIL", n,
	       errno);
	fails += !(n == -1 && errno == EINVAL);
	errno = 0;
	weft_co *co = weft_group_spawn_with(NULL, leaf, NULL, NULL);
	printf("  %s weft_group_spawn_with(NULL group): %p errno %d\n", !co && errno == EINVAL ? "ok  " : "FAIL",
	       (void *)co, errno);
	fails += !(!co && errno == EINVAL);

	printf("2. churn with %d plain-thread counters and a coroutine counter\n", COUNTERS);
	pthread_t t[COUNTERS];
	for (int i = 0; i < COUNTERS; i++)
		CHECK(pthread_create(&t[i], NULL, thread_counter, NULL) == 0);
	weft_co *cc = weft_spawn(co_counter, NULL);
	for (int r = 0; r < ROUNDS; r++) {
		atomic_fetch_add(&spawned, 1);
		CHECK(weft_group_spawn_with(g, parent, NULL, &(weft_spawn_opts){ 32 * 1024, "parent" }));
		if (r % 64 == 0)
			weft_yield();
		if (r % 500 == 499) {	/* 4. a cancel racing the spawns */
			CHECK(weft_group_cancel(g) == 0);
		}
	}
	CHECK(weft_group_wait(g, -1) == 0);
	ssize_t after = weft_group_count(g);
	atomic_store(&stop, 1);
	for (int i = 0; i < COUNTERS; i++)
		pthread_join(t[i], NULL);
	CHECK(weft_join(cc) == 0);
	printf("  %ld reads, %ld out of range; count after wait %zd\n", atomic_load(&reads),
	       atomic_load(&bad_reads), after);
	fails += atomic_load(&bad_reads) != 0 || after != 0;

	printf("3. a member counting its own group\n");
	weft_group *g2 = weft_group_new();
	weft_group *keep = g;
	g = g2;
	for (int i = 0; i < 100; i++)
		CHECK(weft_group_spawn(g, self_counter, NULL));
	CHECK(weft_group_free(g2) == 0);
	g = keep;
	fails += atomic_load(&bad_reads) != 0;
	CHECK(weft_group_free(g) == 0);
	printf("%s\n", fails ? "FAILED" : "all checks held");
	exit(fails ? 1 : 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	CHECK(weft_main(main_co, NULL, &WEFT_CONFIG(.workers = 2)) == 0);
	return 0;
}
