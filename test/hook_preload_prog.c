/* SPDX-License-Identifier: MIT */
/*
 * hook_preload_prog.c — a weft program that knows nothing of the hooks,
 * for test_hook's LD_PRELOAD test: a coroutine's blocking read(2) of data
 * a plain thread sends 100 ms later, while a ticker coroutine on the same
 * single worker counts.  Exits 0 when the ticker ticked meanwhile (the
 * read parked: the hooks are in), 1 when it did not (the read blocked the
 * worker), 2 on a failure.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weft.h"

static atomic_long ticks;
static atomic_bool stop;
static int status = 2;

static void ticker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		weft_sleep(weft_now() + 1000 * 1000);
		atomic_fetch_add(&ticks, 1);
	}
}

static void *writer(void *arg)
{
	usleep(100 * 1000);
	return write(*(int *)arg, "x", 1) == 1 ? NULL : arg;
}

static void body(void *arg)
{
	(void)arg;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return;
	weft_co *t = weft_spawn(ticker, NULL);
	weft_yield();
	pthread_t w;
	if (!t || pthread_create(&w, NULL, writer, &sv[1]) != 0)
		return;
	long t0 = atomic_load(&ticks);
	char c;
	ssize_t r = read(sv[0], &c, 1);
	long n = atomic_load(&ticks) - t0;
	atomic_store(&stop, true);
	weft_join(t);
	pthread_join(w, NULL);
	if (r == 1 && c == 'x')
		status = n >= 3 ? 0 : 1;
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	if (weft_main(body, NULL, &WEFT_CONFIG(.workers = 1)) != 0)
		return 2;
	return status;
}
