/* SPDX-License-Identifier: MIT */
/*
 * The timer load of io::a_busy_ready_fifo_does_not_keep_readiness_unharvested
 * (1,000 sleepers of 50 us beside a yielder, one worker) with R readers on R
 * pipes instead of one, every pipe written at once.  A harvest takes one
 * batch (WEFT__LOOP_BATCH, 64 events), and the next harvest waits until what
 * this one queued (the sleepers the timers queued before it included) has
 * left the ready FIFO: the k-th fd waits about k / 64 harvests, each behind
 * the whole FIFO.  Prints the sleepers' wakes between the writes and the
 * first and the last read (the one-reader test's bound: 4 per sleeper).
 * argv[1]: R (256); argv[2]: the sleepers' rounds (100).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <unistd.h>
#include "common.h"

enum { SLEEPERS = 1000, WRITE_AFTER = 2 * SLEEPERS };
static int readers = 256, rounds = 100;

static struct {
	int (*p)[2];
	atomic_ulong wakes;
	atomic_int written, reads_done, sleepers_left;
	unsigned long at_write, at_first, at_last;
	int64_t t_write, t_first, t_last;
} t;

static void sleeper(void *arg)
{
	(void)arg;
	for (int i = 0; i < rounds && atomic_load(&t.reads_done) < readers; i++) {
		CHECK(weft_sleep(weft_now() + 50 * 1000) == 0);
		unsigned long n = atomic_fetch_add(&t.wakes, 1) + 1;
		if (n >= WRITE_AFTER && !atomic_exchange(&t.written, 1)) {
			t.t_write = weft_now();
			t.at_write = n;
			for (int r = 0; r < readers; r++)
				CHECK(write(t.p[r][1], "x", 1) == 1);
		}
	}
	atomic_fetch_sub(&t.sleepers_left, 1);
}

static void reader(void *arg)
{
	int *p = arg;
	char c;
	CHECK(weft_read(p[0], &c, 1, -1) == 1);
	int done = atomic_fetch_add(&t.reads_done, 1) + 1;
	if (done == 1) {
		t.at_first = atomic_load(&t.wakes);
		t.t_first = weft_now();
	}
	if (done == readers) {
		t.at_last = atomic_load(&t.wakes);
		t.t_last = weft_now();
	}
}

static void yielder(void *arg)
{
	(void)arg;
	while (atomic_load(&t.sleepers_left) > 0)
		weft_yield();
}

static void main_co(void *arg)
{
	(void)arg;
	t.p = calloc((size_t)readers, sizeof *t.p);
	weft_co **rd = calloc((size_t)readers, sizeof *rd);
	static weft_co *co[SLEEPERS];
	CHECK(t.p && rd);
	for (int r = 0; r < readers; r++) {
		CHECK(pipe2(t.p[r], O_CLOEXEC) == 0);
		rd[r] = weft_spawn(reader, t.p[r]);
	}
	weft_yield();	/* the readers park first */
	atomic_store(&t.sleepers_left, SLEEPERS);
	weft_co *y = weft_spawn(yielder, NULL);
	for (int i = 0; i < SLEEPERS; i++)
		co[i] = weft_spawn(sleeper, NULL);
	for (int r = 0; r < readers; r++)
		CHECK(weft_join(rd[r]) == 0);
	for (int i = 0; i < SLEEPERS; i++)
		CHECK(weft_join(co[i]) == 0);
	CHECK(weft_join(y) == 0);
	for (int r = 0; r < readers; r++)
		CHECK(weft_close(t.p[r][0]) == 0 && close(t.p[r][1]) == 0);
	free(rd);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		readers = atoi(argv[1]);
	if (argc > 2)
		rounds = atoi(argv[2]);
	CHECK(weft_main(main_co, NULL, &WEFT_CONFIG(.workers = 1)) == 0);
	printf("%d readers beside %d sleepers: wakes from the writes to the first read %lu (%.2f ms), "
	       "to the last %lu (%.2f ms); bound for one reader %d; total wakes %lu of %d\n",
	       readers, SLEEPERS, t.at_first - t.at_write, (t.t_first - t.t_write) / 1e6,
	       t.at_last - t.at_write, (t.t_last - t.t_write) / 1e6, 4 * SLEEPERS,
	       (unsigned long)atomic_load(&t.wakes), SLEEPERS * rounds);
	return t.at_last - t.at_write > 4ul * SLEEPERS;
}
