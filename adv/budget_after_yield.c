/* SPDX-License-Identifier: MIT */
/*
 * The byte budget of the call that follows a budget yield.  weft__worker_spend
 * yields inside io_begin and returns without opening a budget for the new
 * dispatch (budget_dispatch still names the old one), so the bytes that call
 * moves (io_moved -> weft__worker_spend_bytes) are added to a count that the
 * next call's spend resets: every dispatch after the first runs one call
 * more than the budget allows, uncharged.  design.md: "a dispatch moves at
 * most about 512 KiB before its coroutine yields, in 64 KiB calls 8 of
 * them".  On one worker a writer writes CHUNK-byte buffers to /dev/null
 * (never waits) while a yielder counts; prints the writes of each of the
 * writer's dispatches.  argv[1]: CHUNK in KiB (64).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

enum { WRITES = 64 };
static size_t chunk = 64 * 1024;
static atomic_ulong yields;	/* the yielder's runs */
static atomic_int done;
static unsigned long seen[WRITES];

static void writer(void *arg)
{
	(void)arg;
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	char *buf = calloc(1, chunk);
	CHECK(buf);
	for (int i = 0; i < WRITES; i++) {
		CHECK(weft_write(fd, buf, chunk, -1) == (ssize_t)chunk);
		seen[i] = atomic_load(&yields);
	}
	free(buf);
	CHECK(weft_close(fd) == 0);
	atomic_store(&done, 1);
}

static void yielder(void *arg)
{
	(void)arg;
	while (!atomic_load(&done)) {
		atomic_fetch_add(&yields, 1);
		weft_yield();
	}
}

static void main_co(void *arg)
{
	(void)arg;
	weft_co *y = weft_spawn(yielder, NULL);
	weft_co *w = weft_spawn(writer, NULL);
	CHECK(weft_join(w) == 0 && weft_join(y) == 0);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		chunk = (size_t)atoi(argv[1]) * 1024;
	CHECK(weft_main(main_co, NULL, &WEFT_CONFIG(.workers = 1)) == 0);
	printf("%zu KiB writes per dispatch of the writer:", chunk / 1024);
	int run = 1;
	for (int i = 1; i < WRITES; i++) {
		if (seen[i] != seen[i - 1]) {
			printf(" %d", run);
			run = 0;
		}
		run++;
	}
	printf(" %d (the budget allows %zu)\n", run, (128 + chunk / 4096) / (1 + chunk / 4096));
	return 0;
}
