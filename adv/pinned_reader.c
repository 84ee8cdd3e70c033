/* SPDX-License-Identifier: MIT */
/*
 * The timer load of io::a_busy_ready_fifo_does_not_keep_readiness_unharvested
 * (1,000 sleepers of 50 us beside a yielder, one worker), with the reader
 * locked to its worker (weft_lock_thread).  The harvest now comes within its
 * bound, but a locked coroutine's wake goes to the pinned FIFO, and
 * pop_fifos pops the pinned FIFO only once the ready FIFO is empty, which
 * the timers refill at every turn: the read returns when the load ends.
 * Prints the sleepers' wakes between the write and the read; the unlocked
 * test's bound is 4 * SLEEPERS.  argv[1] "unlocked" runs the reader unlocked
 * (the control); argv[2] the sleepers' rounds (20); argv[3] the workers (1).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

enum { SLEEPERS = 1000, WRITE_AFTER = 2 * SLEEPERS };
static int SLEEPER_ROUNDS = 20;	/* argv[2] */
static unsigned workers = 1;	/* argv[3] */

static struct {
	int p[2];
	int lock;
	atomic_ulong wakes;
	unsigned long at_write, at_read;
	atomic_int written, read_done, sleepers_left;
	int64_t t_write, t_read;
} t;

static void sleeper(void *arg)
{
	(void)arg;
	for (int i = 0; i < SLEEPER_ROUNDS && !atomic_load(&t.read_done); i++) {
		CHECK(weft_sleep(weft_now() + 50 * 1000) == 0);
		unsigned long n = atomic_fetch_add(&t.wakes, 1) + 1;
		if (n >= WRITE_AFTER && !atomic_exchange(&t.written, 1)) {
			t.t_write = weft_now();
			CHECK(write(t.p[1], "x", 1) == 1);
			t.at_write = n;
		}
	}
	atomic_fetch_sub(&t.sleepers_left, 1);
}

static void reader(void *arg)
{
	(void)arg;
	char c;
	if (t.lock)
		CHECK(weft_lock_thread() == 0);
	CHECK(weft_read(t.p[0], &c, 1, -1) == 1);
	t.t_read = weft_now();
	t.at_read = atomic_load(&t.wakes);
	atomic_store(&t.read_done, 1);
	if (t.lock)
		CHECK(weft_unlock_thread() == 0);
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
	static weft_co *co[SLEEPERS];
	CHECK(pipe2(t.p, O_CLOEXEC) == 0);
	weft_co *r = weft_spawn(reader, NULL);
	weft_yield();
	atomic_store(&t.sleepers_left, SLEEPERS);
	weft_co *y = weft_spawn(yielder, NULL);
	for (int i = 0; i < SLEEPERS; i++)
		co[i] = weft_spawn(sleeper, NULL);
	CHECK(weft_join(r) == 0);
	for (int i = 0; i < SLEEPERS; i++)
		CHECK(weft_join(co[i]) == 0);
	CHECK(weft_join(y) == 0);
	CHECK(weft_close(t.p[0]) == 0 && close(t.p[1]) == 0);
}

int main(int argc, char **argv)
{
	t.lock = !(argc > 1 && strcmp(argv[1], "unlocked") == 0);
	if (argc > 2)
		SLEEPER_ROUNDS = atoi(argv[2]);
	if (argc > 3)
		workers = (unsigned)atoi(argv[3]);
	CHECK(weft_main(main_co, NULL, &WEFT_CONFIG(.workers = workers)) == 0);
	unsigned long waited = t.at_read - t.at_write;
	printf("%s reader: %lu sleepers' wakes between write and read (bound %d), %.2f ms; total wakes %lu of %d\n",
	       t.lock ? "locked" : "unlocked", waited, 4 * SLEEPERS, (t.t_read - t.t_write) / 1e6,
	       (unsigned long)atomic_load(&t.wakes), SLEEPERS * SLEEPER_ROUNDS);
	return waited > 4ul * SLEEPERS ? 1 : 0;
}
