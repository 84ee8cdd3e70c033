/* SPDX-License-Identifier: MIT */
/* Files never block a worker: weft_read, weft_write, weft_pread and
 * weft_pwrite on regular files; a read the page cache does not hold leaves
 * the worker's other coroutines running; deadlines, cancels and interrupts
 * of transfers queued for a helper and of one under way; thousands of them
 * abandoned (run under ASan by CI's sanitizer builds). */
#include "harness.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "coro_test.h"
#include "offload.h"	/* white-box: weft__offload_until */

enum { BLOCK = 4096 };

/* A temporary file of `size` bytes, byte i being (char)(i * 7 + 1),
 * written to the disk and dropped from the page cache where the kernel
 * allows; unlinked at once.  flags: open(2)'s extra flags (O_DIRECT). */
static int temp_file(size_t size, int flags)
{
	int fd = unlinked_temp_file("file");
	char *chunk = malloc(1 << 16);
	CHECK(chunk);
	for (size_t at = 0; at < size; at += 1 << 16) {
		for (size_t i = 0; i < 1 << 16; i++)
			chunk[i] = (char)((at + i) * 7 + 1);
		size_t n = size - at < (1 << 16) ? size - at : 1 << 16;
		CHECK(pwrite(fd, chunk, n, (off_t)at) == (ssize_t)n);
	}
	free(chunk);
	CHECK(fsync(fd) == 0);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	if (!flags)
		return fd;
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	int again = open(self, O_RDWR | O_CLOEXEC | flags);
	close(fd);
	return again;	/* -1 where the file system refuses flags */
}

static bool pattern_at(const char *buf, size_t len, off_t off)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != (char)(((size_t)off + i) * 7 + 1))
			return false;
	return true;
}

static void *aligned_block(size_t size)
{
	void *p;
	CHECK(posix_memalign(&p, BLOCK, size) == 0);
	return p;
}

/* ---- the calls themselves */

static void calls_main(void *unused)
{
	(void)unused;
	int fd = temp_file(3 * BLOCK, 0);
	char buf[BLOCK];
	CHECK(weft_pread(fd, buf, 100, 5000, -1) == 100 && pattern_at(buf, 100, 5000));
	CHECK(lseek(fd, 0, SEEK_CUR) == 0);	/* pread moves no position */
	CHECK(weft_read(fd, buf, 10, -1) == 10 && pattern_at(buf, 10, 0));
	CHECK(lseek(fd, 0, SEEK_CUR) == 10);	/* read does */
	CHECK(weft_pread(fd, buf, sizeof buf, 3 * BLOCK - 4, -1) == 4);	/* short at the end */
	CHECK(weft_pread(fd, buf, sizeof buf, 3 * BLOCK, -1) == 0);	/* end of file */
	memset(buf, 'w', sizeof buf);
	CHECK(weft_pwrite(fd, buf, sizeof buf, 2 * BLOCK + 10, -1) == (ssize_t)sizeof buf);
	CHECK(lseek(fd, 0, SEEK_CUR) == 10);
	CHECK(weft_write(fd, buf, 6, -1) == 6);
	CHECK(lseek(fd, 0, SEEK_CUR) == 16);
	char back[BLOCK];
	CHECK(pread(fd, back, sizeof back, 2 * BLOCK + 10) == (ssize_t)sizeof back);
	CHECK(memcmp(back, buf, sizeof buf) == 0);
	CHECK(pread(fd, back, 6, 10) == 6 && memcmp(back, "wwwwww", 6) == 0);
	/* a past deadline: the cache answers without waiting */
	CHECK(weft_pread(fd, back, 100, 0, 0) == 100);
	errno = 0;
	CHECK(weft_pread(fd, buf, 1, -1, -1) == -1 && errno == EINVAL);
	CHECK(weft_pwrite(fd, buf, 1, -5, -1) == -1 && errno == EINVAL);
	CHECK(weft_close(fd) == 0);
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	CHECK(weft_pread(p[0], buf, 1, 0, -1) == -1 && errno == ESPIPE);
	CHECK(weft_pwrite(p[1], buf, 1, 0, -1) == -1 && errno == ESPIPE);
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

static void outside(void)
{
	char b;
	errno = 0;
	cr_assert_eq(weft_pread(0, &b, 1, 0, -1), -1);
	cr_assert_eq(errno, EPERM);
	cr_assert_eq(weft_pwrite(1, &b, 1, -1, -1), -1);
	cr_assert_eq(errno, EPERM, "EPERM before the argument check");
}

Test(file, read_write_pread_pwrite)
{
	run(2, calls_main, NULL);
	check_outside_coroutines(outside);
}

/* ---- a read the page cache does not hold leaves the worker running */

struct pingpong {
	int sv[2];
	atomic_bool stop;
	atomic_ulong rounds;
};

static void ping(void *arg)
{
	struct pingpong *pp = arg;
	char c = 'p';
	while (!atomic_load(&pp->stop)) {
		CHECK(weft_write(pp->sv[0], &c, 1, -1) == 1);
		CHECK(weft_read(pp->sv[0], &c, 1, -1) == 1);
		atomic_fetch_add(&pp->rounds, 1);
	}
	CHECK(shutdown(pp->sv[0], SHUT_WR) == 0);
}

static void pong(void *arg)
{
	struct pingpong *pp = arg;
	char c;
	while (weft_read(pp->sv[1], &c, 1, -1) == 1)
		CHECK(weft_write(pp->sv[1], &c, 1, -1) == 1);
}

/* Pages of fd's first `size` bytes that the page cache holds. */
static size_t resident_pages(int fd, size_t size)
{
	void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (size + page - 1) / page, n = 0;
	unsigned char *vec = malloc(pages);
	CHECK(vec && mincore(map, size, vec) == 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(map, size);
	return n;
}

struct cold {
	int flags;		/* open(2) flags of the file: 0 or O_DIRECT */
	bool positional;	/* weft_pread, else weft_read after lseek */
	uint64_t offloaded;	/* out: transfers the helpers did */
	unsigned long during;	/* out: ping-pong rounds while reads were under way */
	bool refused;		/* out: the file system refused flags */
	bool cached;		/* out: the page cache kept the file */
	int backend;		/* out: weft_stats' io_backend */
};

enum { COLD_SIZE = 8 << 20, COLD_READS = 64, COLD_CHUNK = 64 << 10 };

static void cold_main(void *arg)
{
	struct cold *c = arg;
	int fd = temp_file(COLD_SIZE, c->flags);
	if (fd < 0) {
		c->refused = true;
		return;
	}
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) == 0);	/* no readahead */
	if (!c->flags && resident_pages(fd, COLD_SIZE) * sysconf(_SC_PAGESIZE) > COLD_SIZE / 2) {
		c->cached = true;
		CHECK(weft_close(fd) == 0);
		return;
	}
	struct pingpong pp = { .rounds = 0 };
	socket_pair(pp.sv);
	weft_co *a = go(ping, &pp), *b = go(pong, &pp);
	while (atomic_load(&pp.rounds) == 0)
		weft_yield();
	char *buf = aligned_block(COLD_CHUNK);
	uint64_t before = stats_now().offload_calls;
	for (unsigned i = 0; i < COLD_READS; i++) {
		off_t off = (off_t)((i * 37u) % (COLD_SIZE / COLD_CHUNK)) * COLD_CHUNK;
		/* a fresh run: no budget yield (weft_consume_budget) inside the
		 * call lets the ping-pong run, only a wait for the disk does */
		weft_yield();
		unsigned long r0 = atomic_load(&pp.rounds);
		ssize_t n;
		if (c->positional) {
			n = weft_pread(fd, buf, COLD_CHUNK, off, -1);
		} else {
			CHECK(lseek(fd, off, SEEK_SET) == off);
			n = weft_read(fd, buf, COLD_CHUNK, -1);
		}
		c->during += atomic_load(&pp.rounds) - r0;
		CHECK(n == COLD_CHUNK && pattern_at(buf, COLD_CHUNK, off));
	}
	c->offloaded = stats_now().offload_calls - before;
	c->backend = stats_now().io_backend;
	atomic_store(&pp.stop, true);
	join(a);
	join(b);
	free(buf);
	CHECK(weft_close(pp.sv[0]) == 0 && weft_close(pp.sv[1]) == 0 && weft_close(fd) == 0);
}

/* One worker: a read that blocked it would stop the ping-pong for its
 * length, so no round could happen while any read is under way. */
static void cold_read(int flags, bool positional)
{
	struct cold c = { .flags = flags, .positional = positional };
	run(1, cold_main, &c);
	if (c.refused)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
	if (c.cached)
		cr_skip_test("the page cache kept the file (posix_fadvise DONTNEED ignored: tmpfs?)");
	cr_assert_gt(c.during, 0, "no ping-pong round while %u reads of uncached pages ran (%lu offloaded)",
		     COLD_READS, (unsigned long)c.offloaded);
	/* under uring a read at an offset goes to the worker's ring, not to
	 * a helper (the file position's reads stay with the pool: io.c) */
	if (c.backend == WEFT_IO_URING && positional)
		cr_assert_eq(c.offloaded, 0, "%lu reads at an offset went to the pool under WEFT_IO=uring",
			     (unsigned long)c.offloaded);
}

Test(file, uncached_read_leaves_the_worker_running)
{
	cold_read(0, false);
}

Test(file, uncached_pread_leaves_the_worker_running)
{
	cold_read(0, true);
}

Test(file, direct_pread_leaves_the_worker_running)
{
	cold_read(O_DIRECT, true);
}

/* ---- deadlines, cancels and interrupts: the one helper held by a
 * blocker, so that every transfer queues for it */

static void noop(void *unused)
{
	(void)unused;
}

/* Lets the helper go, joins its holder and runs one more call through the
 * pool (every call queued before it has been taken); returns the calls the
 * helpers ran since `before`, the blocker's and that one's not counted. */
static uint64_t pool_hold_end(struct pool_hold *bl, weft_co *holder, uint64_t before)
{
	pool_hold_release(bl, holder);
	CHECK(weft_offload(noop, NULL) == 0);
	return stats_now().offload_calls - before - 2;
}

struct reader {
	int fd;
	int64_t deadline;
	ssize_t n;
	int err;
	atomic_bool done;
};

static void read_main(void *arg)
{
	struct reader *r = arg;
	_Alignas(BLOCK) char buf[BLOCK];
	memset(buf, 0xAA, sizeof buf);
	r->n = weft_pread(r->fd, buf, sizeof buf, BLOCK, r->deadline);
	r->err = errno;
	if (r->n < 0)	/* the transfer never ran: the buffer is as it was */
		for (size_t i = 0; i < sizeof buf; i++)
			CHECK(buf[i] == (char)0xAA);
	else
		CHECK(r->n == BLOCK && pattern_at(buf, BLOCK, BLOCK));
	atomic_store(&r->done, true);
}

enum { END_DEADLINE, END_CANCEL, END_INTERRUPT, END_PAST };

static void queued_main(void *arg)
{
	int how = *(int *)arg;
	int fd = temp_file(4 * BLOCK, O_DIRECT);
	if (fd < 0) {
		*(int *)arg = -1;
		return;
	}
	struct pool_hold bl;
	uint64_t before = stats_now().offload_calls;
	weft_co *holder = pool_hold_start(&bl);
	struct reader r = { .fd = fd, .deadline = -1 };
	if (how == END_DEADLINE)
		r.deadline = weft_now() + 2 * MS;
	if (how == END_PAST)
		r.deadline = 0;
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(read_main, &r);
	if (how == END_CANCEL || how == END_INTERRUPT) {
		while (stats_now().total.parks < parks + 1) {
			CHECK(!atomic_load(&r.done));	/* it must wait for the helper */
			weft_yield();
		}
		CHECK(how == END_CANCEL ? weft_cancel(co) == 0 : weft_interrupt(co) == 0);
	}
	join(co);
	static const int expected[] = { ETIMEDOUT, ECANCELED, EINTR, ETIMEDOUT };
	CHECK(r.n == -1 && r.err == expected[how]);
	CHECK(pool_hold_end(&bl, holder, before) == 0);	/* it never ran */
	CHECK(weft_close(fd) == 0);
}

/* The scenes of the pool's queue run on the epoll backend: under uring a
 * transfer at an offset goes to the ring (test_uring.c has the ring's). */
static void epoll_pool(const char *threads)
{
	cr_assert_eq(setenv("WEFT_BLOCKING_THREADS", threads, 1), 0);
	cr_assert_eq(setenv("WEFT_IO", "epoll", 1), 0);
}

static void queued(int how)
{
	int arg = how;
	epoll_pool("1");
	run(2, queued_main, &arg);
	if (arg < 0)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
}

Test(file, deadline_ends_a_queued_transfer)
{
	queued(END_DEADLINE);
}

Test(file, cancel_ends_a_queued_transfer)
{
	queued(END_CANCEL);
}

Test(file, interrupt_ends_a_queued_transfer)
{
	queued(END_INTERRUPT);
}

Test(file, past_deadline_does_not_wait_for_the_disk)
{
	queued(END_PAST);
}

/* A transfer under way is waited for past the end of the wait (here a
 * cancel, which takes the path of a deadline and an interrupt): the
 * helper's fn sees the caller still inside the call when it returns. */
struct under_way {
	struct pool_hold bl;
	atomic_bool returned;
	atomic_bool seen_returned;	/* fn saw the caller gone: a defect */
	int r;
};

static void under_way_fn(void *arg)
{
	struct under_way *u = arg;
	pool_hold_fn(&u->bl);
	atomic_store(&u->seen_returned, atomic_load(&u->returned));
}

static void under_way_caller(void *arg)
{
	struct under_way *u = arg;
	u->r = weft__offload_until(under_way_fn, u, -1);
	atomic_store(&u->returned, true);
}

static void under_way_main(void *unused)
{
	(void)unused;
	struct under_way u = { .r = 1 };
	CHECK(pipe2(u.bl.pipe, O_CLOEXEC) == 0);
	weft_co *co = go(under_way_caller, &u);
	while (!atomic_load(&u.bl.started)) {
		CHECK(!atomic_load(&u.returned));
		weft_yield();
	}
	CHECK(weft_cancel(co) == 0);
	weft_yield();	/* the cancelled caller runs (one worker, FIFO) */
	CHECK(!atomic_load(&u.returned));
	pool_hold_release(&u.bl, co);	/* co, the caller, is the holder here */
	CHECK(u.r == 0 && !atomic_load(&u.seen_returned));
}

Test(file, a_transfer_under_way_is_waited_for)
{
	run(1, under_way_main, NULL);
}

/* ---- thousands abandoned: timed out, cancelled, interrupted, and run */

static void many_main(void *arg)
{
	int fd = temp_file(4 * BLOCK, O_DIRECT);
	if (fd < 0) {
		*(int *)arg = -1;
		return;
	}
	unsigned n = scaled(4000, 1000, 100);
	struct reader *rs = calloc(n, sizeof *rs);
	weft_co **cos = calloc(n, sizeof *cos);
	CHECK(rs && cos);
	struct pool_hold bl;
	uint64_t before = stats_now().offload_calls;
	weft_co *holder = pool_hold_start(&bl);
	uint64_t parks = stats_now().total.parks;
	for (unsigned i = 0; i < n; i++) {
		rs[i] = (struct reader){ .fd = fd, .deadline = i % 4 == 0 ? weft_now() + (i % 5) * MS : -1 };
		cos[i] = go(read_main, &rs[i]);
	}
	/* those without a deadline park (one whose deadline passed before it
	 * ran fails at once); a cancel or interrupt that comes before its
	 * coroutine parks ends the wait all the same */
	while (stats_now().total.parks < parks + n - n / 4) {
		CHECK(!atomic_load(&rs[1].done));	/* it must wait for the helper */
		weft_yield();
	}
	for (unsigned i = 0; i < n; i++) {
		if (i % 4 == 1)
			CHECK(weft_cancel(cos[i]) == 0);
		if (i % 4 == 2)
			CHECK(weft_interrupt(cos[i]) == 0);
	}
	for (unsigned i = 0; i < n; i++)
		if (i % 4 != 3)
			join(cos[i]);
	uint64_t ran = pool_hold_end(&bl, holder, before);
	for (unsigned i = 0; i < n; i++) {
		if (i % 4 == 3)
			join(cos[i]);
		static const int expected[] = { ETIMEDOUT, ECANCELED, EINTR, 0 };
		CHECK(i % 4 == 3 ? rs[i].n == BLOCK : rs[i].n == -1 && rs[i].err == expected[i % 4]);
	}
	CHECK(ran == n / 4);	/* only the ones left alone ran */
	free(rs);
	free(cos);
	CHECK(weft_close(fd) == 0);
}

Test(file, thousands_abandoned_while_queued)
{
	int arg = 0;
	epoll_pool("1");
	run(2, many_main, &arg);
	if (arg < 0)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
}
