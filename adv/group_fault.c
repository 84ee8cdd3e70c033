/* SPDX-License-Identifier: MIT */
/*
 * weft_group_spawn_with and weft_group_count under fault injection (build
 * with -Dfault_injection=true: adv/build.sh build-fault adv/group_fault.c).
 * With one allocation in N failing (weft__fault_every), members with their
 * own stack size and a name are spawned into a group; each blocks on a
 * semaphore.  Every refused spawn must fail with ENOMEM (or EAGAIN) and
 * leave the count alone: the count must equal the spawns that succeeded
 * while all block, and 0 once they are released and waited for.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "common.h"

uint64_t weft__fault_every(unsigned n);

enum { SPAWNS = 3000 };
static weft_sem *gate;
static int fails;

static void member(void *arg)
{
	(void)arg;
	CHECK(weft_sem_acquire(gate, -1) == 0);
}

static void round_every(unsigned every)
{
	weft_group *g = weft_group_new();
	CHECK(g);
	long ok = 0, refused = 0, other = 0;
	weft__fault_every(every);
	for (int i = 0; i < SPAWNS; i++) {
		weft_spawn_opts o = { (i & 1) ? 48 * 1024 : 0, "member" };
		errno = 0;
		if (weft_group_spawn_with(g, member, NULL, &o))
			ok++;
		else if (errno == ENOMEM || errno == EAGAIN)
			refused++;
		else
			other++;
	}
	weft__fault_every(0);
	ssize_t during = weft_group_count(g);
	for (long i = 0; i < ok; i++)
		CHECK(weft_sem_release(gate) == 0);
	CHECK(weft_group_wait(g, -1) == 0);
	ssize_t after = weft_group_count(g);
	CHECK(weft_group_free(g) == 0);
	bool bad = during != ok || after != 0 || other != 0;
	fails += bad;
	printf("  1 in %u allocations failing: %ld spawned, %ld refused (ENOMEM), %ld other errors; "
	       "count while blocked %zd (want %ld), after wait %zd: %s\n",
	       every, ok, refused, other, during, ok, after, bad ? "FAIL" : "ok");
}

static void main_co(void *arg)
{
	(void)arg;
	gate = weft_sem_new(0);
	CHECK(gate);
	unsigned every[] = { 2, 3, 7, 50 };
	for (size_t i = 0; i < sizeof every / sizeof every[0]; i++)
		round_every(every[i]);
	weft_sem_free(gate);
	printf("%s\n", fails ? "FAILED" : "all checks held");
	exit(fails ? 1 : 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	CHECK(weft_main(main_co, NULL, &WEFT_CONFIG(.workers = 2)) == 0);
	return 0;
}
