/* SPDX-License-Identifier: MIT */
/*
 * A signal handler's hooked write(2) after the byte budget is spent.
 * Linked with libweft-hook (hooks: build.sh links it for this file).  A
 * coroutine makes K weft_write calls of 64 KiB to /dev/null (none parks),
 * then raise(SIGUSR1); the handler, running on the worker thread over that
 * coroutine, writes a byte to a pipe made by the hooked pipe() (blocking
 * for its caller: the hook runs it as a coroutine call).  hook/io.c's run
 * spends a unit (weft_consume_budget) before the write; once the dispatch's
 * budget is spent that call yields, switching coroutines inside the signal
 * handler (issue 44 asks that a hooked call in a handler never yields).
 * With calls alone that took 127 calls in the dispatch; with the byte
 * budget 8 writes of 64 KiB are enough.  A second coroutine counts its
 * runs: a count that moved during the handler's write means the handler
 * yielded.  Prints, for K in 1..12, whether the handler yielded.  Workers
 * block every signal but SIGSEGV and SIGBUS (thread.c), so this needs a
 * coroutine that unblocked the signal (done here with pthread_sigmask), or a
 * SIGSEGV/SIGBUS handler that writes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

static int devnull, p[2];
static atomic_ulong other_runs;
static atomic_int stop;
static unsigned long in_handler_before, in_handler_after;
static char buf[64 * 1024];

static void on_usr1(int sig)
{
	(void)sig;
	in_handler_before = atomic_load(&other_runs);
	ssize_t r = write(p[1], "x", 1);	/* the hooked write */
	(void)r;
	in_handler_after = atomic_load(&other_runs);
}

static void other(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		atomic_fetch_add(&other_runs, 1);
		weft_yield();
	}
}

static void main_co(void *arg)
{
	(void)arg;
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	CHECK(devnull >= 0 && pipe(p) == 0);
	struct sigaction sa = { .sa_handler = on_usr1 };
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	sigset_t usr1;	/* workers block every signal: the handler runs here only if unblocked */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	CHECK(pthread_sigmask(SIG_UNBLOCK, &usr1, NULL) == 0);
	weft_co *o = weft_spawn(other, NULL);
	int yielded_at = 0;
	for (int k = 1; k <= 12; k++) {
		weft_yield();	/* a fresh dispatch: a fresh budget */
		for (int i = 0; i < k; i++)
			CHECK(weft_write(devnull, buf, sizeof buf, -1) == (ssize_t)sizeof buf);
		raise(SIGUSR1);
		char c;
		CHECK(read(p[0], &c, 1) == 1);
		int y = in_handler_after != in_handler_before;
		printf("  %2d writes of 64 KiB, then a signal: the handler's write %s\n", k,
		       y ? "YIELDED (other coroutines ran inside the signal handler)" : "did not yield");
		if (y && !yielded_at)
			yielded_at = k;
	}
	atomic_store(&stop, 1);
	CHECK(weft_join(o) == 0);
	exit(yielded_at ? 1 : 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	CHECK(weft_main(main_co, NULL, &WEFT_CONFIG(.workers = 1)) == 0);
	return 0;
}
