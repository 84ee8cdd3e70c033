/* SPDX-License-Identifier: MIT */
/*
 * A transfer that never waits, beside a busy ready FIFO, on one worker.
 * 1,000 sleepers of 50 us keep the ready FIFO non-empty (the timer load of
 * io::a_busy_ready_fifo_does_not_keep_readiness_unharvested; a busy server's
 * readiness does the same); once the load runs, a coroutine writes 1 MiB to
 * /dev/null in 64 KiB weft_write calls, which never park.  With the byte
 * budget the 9th call (512 KiB moved) yields, and a yielder goes to the
 * yielders FIFO, which pick pops only when the deque, the ready FIFO, the
 * pinned FIFO and the injection queue are all empty (no fairness turn pops
 * it): the transfer's second half waits until the load ends.  Prints the
 * sleepers' wakes and the time between the transfer's first and last write.
 * argv[1]: the sleepers' rounds (20).  Exits 1 when the transfer saw more
 * than 4 wakes per sleeper (the bound io's reader test allows readiness).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

enum { SLEEPERS = 1000, START_AFTER = 2 * SLEEPERS, CHUNK = 64 * 1024, CHUNKS = 16 };
static int rounds = 20;

static struct {
	atomic_ulong wakes;
	atomic_int started, done, sleepers_left;
	unsigned long at_start, at_end;
	int64_t t_start, t_end;
	int null_fd;
} t;

static char buf[CHUNK];

static void transfer(void *arg)
{
	(void)arg;
	t.t_start = weft_now();
	t.at_start = atomic_load(&t.wakes);
	for (int i = 0; i < CHUNKS; i++)
		CHECK(weft_write(t.null_fd, buf, CHUNK, -1) == CHUNK);
	t.t_end = weft_now();
	t.at_end = atomic_load(&t.wakes);
	atomic_store(&t.done, 1);
}

static void sleeper(void *arg)
{
	(void)arg;
	for (int i = 0; i < rounds && !atomic_load(&t.done); i++) {
		CHECK(weft_sleep(weft_now() + 50 * 1000) == 0);
		unsigned long n = atomic_fetch_add(&t.wakes, 1) + 1;
		if (n >= START_AFTER && !atomic_exchange(&t.started, 1))
			CHECK(weft_detach(weft_spawn(transfer, NULL)) == 0);
	}
	atomic_fetch_sub(&t.sleepers_left, 1);
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
	t.null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(t.null_fd >= 0);
	atomic_store(&t.sleepers_left, SLEEPERS);
	weft_co *y = weft_spawn(yielder, NULL);
	for (int i = 0; i < SLEEPERS; i++)
		co[i] = weft_spawn(sleeper, NULL);
	for (int i = 0; i < SLEEPERS; i++)
		CHECK(weft_join(co[i]) == 0);
	CHECK(weft_join(y) == 0);
	while (!atomic_load(&t.done))
		weft_yield();
	CHECK(weft_close(t.null_fd) == 0);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atoi(argv[1]);
	CHECK(weft_main(main_co, NULL, &WEFT_CONFIG(.workers = 1)) == 0);
	printf("1 MiB in 64 KiB writes beside %d sleepers x %d rounds: %lu sleepers' wakes, %.2f ms "
	       "during the transfer; total wakes %lu\n",
	       SLEEPERS, rounds, t.at_end - t.at_start, (t.t_end - t.t_start) / 1e6,
	       (unsigned long)atomic_load(&t.wakes));
	return t.at_end - t.at_start > 4ul * SLEEPERS;	/* the reader test's bound */
}
