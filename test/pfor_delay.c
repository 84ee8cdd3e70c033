/* SPDX-License-Identifier: MIT */
/*
 * pfor_delay.c — a CPU-bound parallel-for against the last spinner's wake
 * (idle.c, weft__idle_stop_spinning): a root spawns K children (K-1
 * displaced to its deque, the last in its runnext slot) and then computes
 * its own share without yielding (here: blocks in plain nanosleep calls, a
 * stuck worker that leaves the CPUs to the others).  The last child should
 * start on a thief woken for it, not wait for the monitor's stuck sample
 * (a tick of 1 ms or more).  Prints the median and p90 of the last child's
 * start delay over ROUNDS rounds.  Not a test: a measurement (wall clock);
 * the test is idletax_adv's parallel_for scene.
 *
 * Usage: pfor_delay [workers] [rounds]
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "weft.h"

static _Atomic int64_t spawned_at, last_started;
static atomic_uint started;
static unsigned kids;

/* A worker stuck without taking a CPU (a plain blocking call, not weft's),
 * so that 2 CPUs can host more stuck workers than they have cores. */
static void stuck_for(int64_t ns)
{
	nanosleep(&(struct timespec){ .tv_nsec = ns }, NULL);
}

static void child(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	if (i == kids - 1)
		atomic_store(&last_started, weft_now());
	atomic_fetch_add(&started, 1);
	stuck_for(2 * 1000 * 1000);	/* its share */
}

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static unsigned rounds;
static int64_t delays[10000];

static void root(void *arg)
{
	(void)arg;
	weft_co *co[64];
	for (unsigned r = 0; r < rounds; r++) {
		atomic_store(&started, 0);
		atomic_store(&last_started, 0);
		atomic_store(&spawned_at, weft_now());
		for (unsigned i = 0; i < kids; i++)
			co[i] = weft_spawn(child, (void *)(uintptr_t)i);
		/* its own share, no yield, until every child has started */
		while (atomic_load(&started) < kids)
			stuck_for(20 * 1000);
		delays[r] = atomic_load(&last_started) - atomic_load(&spawned_at);
		for (unsigned i = 0; i < kids; i++)
			weft_join(co[i]);
		weft_sleep(weft_now() + 500 * 1000);	/* all idle again */
	}
}

int main(int argc, char **argv)
{
	unsigned workers = argc > 1 ? (unsigned)atoi(argv[1]) : 4;
	rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 200;
	kids = workers - 1;
	if (weft_main(root, NULL, &WEFT_CONFIG(.workers = workers)) != 0)
		return 2;
	qsort(delays, rounds, sizeof delays[0], cmp);
	printf("workers %u kids %u rounds %u: last child's start delay p50 %.3f ms p90 %.3f ms max %.3f ms\n",
	       workers, kids, rounds, delays[rounds / 2] / 1e6, delays[rounds * 9 / 10] / 1e6,
	       delays[rounds - 1] / 1e6);
	return 0;
}
