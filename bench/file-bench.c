/* SPDX-License-Identifier: MIT */
/*
 * file-bench — the weft side of bench.py's file rows (issue 48): CONC
 * coroutines each read 4 KiB blocks at random block-aligned offsets of one
 * file with weft_pread, for SECONDS, on WORKERS workers; the backend is
 * WEFT_IO's (uring: the workers' rings; epoll: the offload pool).
 *
 *   file-bench NAME WORKERS PATH CONC SECONDS
 *
 * NAME: file-cache-4k (the file as opened: bench.py reads it into the page
 * cache first) or file-direct-4k (opened O_DIRECT).  Every block of the
 * file starts with its index (bench.py writes it so): each read checks it.
 * Prints
 *   RESULT name=NAME impl=weft workers=W ns=N ops=N value=CONC check=ok|fail cpu_ns=N
 * ns: the timed window; ops: the reads in it; cpu_ns: the process's user
 * and system time over the same window (getrusage: every thread, the
 * pool's helpers and the rings' kernel workers included).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "weft.h"

enum { BLOCK = 4096 };

struct scene {
	int fd;
	uint64_t blocks;
	int64_t ns;	/* the window */
	atomic_bool stop;
	atomic_bool counting;
	atomic_uint_fast64_t reads;
	atomic_uint_fast64_t bad;
};

static int64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static void reader(void *arg)
{
	struct scene *s = arg;
	_Alignas(BLOCK) unsigned char buf[BLOCK];
	uint64_t x = (uint64_t)(uintptr_t)buf ^ 0x9e3779b97f4a7c15u;
	uint64_t n = 0;
	bool counted = false;
	while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;	/* xorshift64 */
		uint64_t i = x % s->blocks;
		if (weft_pread(s->fd, buf, BLOCK, (off_t)(i * BLOCK), -1) != BLOCK) {
			atomic_fetch_add(&s->bad, 1);
			break;
		}
		uint64_t got;
		memcpy(&got, buf, sizeof got);
		if (got != i)
			atomic_fetch_add(&s->bad, 1);
		if (!counted && atomic_load_explicit(&s->counting, memory_order_relaxed)) {
			counted = true;
			n = 0;
		}
		n++;
	}
	atomic_fetch_add(&s->reads, counted ? n : 0);
}

struct args {
	struct scene *s;
	unsigned conc;
	double seconds;
	int64_t cpu;
};

static void run(void *arg)
{
	struct args *a = arg;
	struct scene *s = a->s;
	weft_co **co = calloc(a->conc, sizeof *co);
	for (unsigned i = 0; i < a->conc; i++)
		co[i] = weft_spawn(reader, s);
	weft_sleep(weft_now() + 500 * 1000 * 1000);	/* warm-up */
	int64_t c0 = cpu_ns(), t0 = weft_now();
	atomic_store(&s->counting, true);
	weft_sleep(t0 + (int64_t)(a->seconds * 1e9));
	atomic_store(&s->stop, true);
	s->ns = weft_now() - t0;
	a->cpu = cpu_ns() - c0;
	for (unsigned i = 0; i < a->conc; i++)
		weft_join(co[i]);
	free(co);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: file-bench file-cache-4k|file-direct-4k WORKERS PATH CONC SECONDS\n");
		return 2;
	}
	const char *name = argv[1];
	bool direct = strcmp(name, "file-direct-4k") == 0;
	if (!direct && strcmp(name, "file-cache-4k") != 0) {
		fprintf(stderr, "file-bench: unknown row %s\n", name);
		return 2;
	}
	unsigned workers = (unsigned)atoi(argv[2]);
	struct scene s = { .fd = open(argv[3], O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0)) };
	struct stat st;
	if (s.fd < 0 || fstat(s.fd, &st) != 0) {
		fprintf(stderr, "file-bench: %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	s.blocks = (uint64_t)st.st_size / BLOCK;
	struct args a = { .s = &s, .conc = (unsigned)atoi(argv[4]), .seconds = atof(argv[5]) };
	if (s.blocks == 0 || a.conc == 0 || workers == 0 || a.seconds <= 0) {
		fprintf(stderr, "file-bench: bad arguments\n");
		return 2;
	}
	if (weft_main(run, &a, &WEFT_CONFIG(.workers = workers)) != 0) {
		fprintf(stderr, "file-bench: weft_main: %s\n", strerror(errno));
		return 1;
	}
	printf("RESULT name=%s impl=weft workers=%u ns=%" PRId64 " ops=%" PRIuFAST64
	       " value=%u check=%s cpu_ns=%" PRId64 "\n",
	       name, workers, s.ns, atomic_load(&s.reads), a.conc, atomic_load(&s.bad) ? "fail" : "ok",
	       a.cpu);
	return atomic_load(&s.bad) ? 1 : 0;
}
