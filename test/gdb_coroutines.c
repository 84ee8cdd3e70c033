/* SPDX-License-Identifier: MIT */
/*
 * A program for test/gdb_coroutines.sh (tools/gdb/weft.py): the main
 * coroutine spawns four coroutines with distinct entry functions, names two
 * of them, lets three park and one return, then calls weft_test_stop_here(),
 * where gdb stops and lists them.
 *
 *   gdb_co_sleeper   named "sleeper"     parked in weft_sleep (far deadline)
 *   gdb_co_receiver  named "receiver"    parked in weft_chan_recv (no sender)
 *   gdb_co_nested    unnamed             parked in weft_sleep, called from
 *                                        gdb_park_here() <- gdb_park_middle()
 *   gdb_co_done      unnamed             returned, not joined yet ("finished")
 *
 * It prints the ids ("id <entry> <n>"), for the script to check the
 * listing's.  One worker, so nothing runs but the main coroutine when gdb
 * stops.  After the stop, everything is cancelled and joined: the program
 * exits 0 when run without gdb too.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "weft.h"

static volatile int after;	/* work after each call: no tail calls */
static volatile int parked;	/* coroutines that reached their park */
static weft_chan *chan;

/* Where gdb breaks: the coroutines are all parked by then. */
__attribute__((noinline)) void weft_test_stop_here(void)
{
	__asm__ volatile("" ::: "memory");
	after++;
}

static void park_far(void)
{
	parked++;
	weft_sleep(weft_now() + 3600 * (int64_t)1000000000);	/* until cancelled */
}

__attribute__((noinline)) void gdb_park_here(int depth)
{
	(void)depth;
	park_far();
	after++;
}

__attribute__((noinline)) void gdb_park_middle(int depth)
{
	gdb_park_here(depth + 1);
	after++;
}

__attribute__((noinline)) void gdb_co_sleeper(void *arg)
{
	(void)arg;
	weft_set_name("sleeper");
	park_far();
	after++;
}

__attribute__((noinline)) void gdb_co_receiver(void *arg)
{
	(void)arg;
	weft_set_name("receiver");
	int v;
	parked++;
	weft_chan_recv(chan, &v, -1);	/* nobody sends: until cancelled */
	after++;
}

__attribute__((noinline)) void gdb_co_nested(void *arg)
{
	(void)arg;
	gdb_park_middle(1);
	after++;
}

__attribute__((noinline)) void gdb_co_done(void *arg)
{
	(void)arg;
	parked++;
}

static void gdb_co_main(void *arg)
{
	(void)arg;
	weft_set_name("main");
	chan = weft_chan_new(sizeof(int), 0);
	if (!chan)
		abort();
	void (*fns[])(void *) = { gdb_co_sleeper, gdb_co_receiver, gdb_co_nested, gdb_co_done };
	const char *names[] = { "gdb_co_sleeper", "gdb_co_receiver", "gdb_co_nested", "gdb_co_done" };
	enum { N = sizeof fns / sizeof fns[0] };
	weft_co *cos[N];
	for (int i = 0; i < N; i++) {
		cos[i] = weft_spawn(fns[i], NULL);
		if (!cos[i])
			abort();
		printf("id %s %" PRIu64 "\n", names[i], weft_co_id(cos[i]));
	}
	printf("id main %" PRIu64 "\n", weft_co_id(weft_self()));
	fflush(stdout);
	while (parked < N)
		weft_yield();	/* one worker: each runs until it parks or returns */
	weft_yield();		/* the last one is surely switched out */
	weft_test_stop_here();
	for (int i = 0; i < N; i++) {
		weft_cancel(cos[i]);
		weft_join(cos[i]);
	}
	weft_chan_free(chan);
}

int main(void)
{
	return weft_main(gdb_co_main, NULL, &WEFT_CONFIG(.workers = 1)) == 0 ? 0 : 1;
}
