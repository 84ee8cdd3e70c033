/* SPDX-License-Identifier: MIT */
/* Adversarial scenes against the file path (weft_read, weft_pread, ...):
 * each says what the path must do and why a simpler one would not. */
#include "harness.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "coro_test.h"
#include "fdtable.h"	/* white-box: the fd's generation (a close under way) */

enum { BLOCK = 4096 };

static unsigned char byte_at(size_t i)
{
	return (unsigned char)((i * 2654435761u) >> 13);
}

/* A temporary file of size bytes (byte_at), synced and dropped from the
 * page cache; unlinked.  flags: open(2)'s extra flags (O_DIRECT). */
static int temp_file(size_t size, int flags)
{
	int fd = unlinked_temp_file("adv");
	unsigned char *b = malloc(size);
	CHECK(b);
	for (size_t i = 0; i < size; i++)
		b[i] = byte_at(i);
	CHECK(pwrite(fd, b, size, 0) == (ssize_t)size);
	free(b);
	CHECK(fsync(fd) == 0);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	if (!flags)
		return fd;
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	int again = open(self, O_RDWR | O_CLOEXEC | flags);
	close(fd);
	return again;
}

/* ---- weft_pread on a stream socket whose last read came back short
 * fails with ESPIPE at once: the socket's drained hint must not park it
 * first (with no data coming it would wait for its deadline). */

static void drained_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	char buf[16];
	CHECK(weft_write(sv[1], "x", 1, -1) == 1);
	CHECK(weft_read(sv[0], buf, sizeof buf, -1) == 1);	/* short: drained */
	errno = 0;
	ssize_t n = weft_pread(sv[0], buf, sizeof buf, 0, weft_now() + 300 * 1000 * 1000);
	int e = errno;
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	if (n != -1 || e != ESPIPE)
		fprintf(stderr, "weft_pread on a drained socket: %zd, errno %d (%s), want ESPIPE\n", n, e,
			strerror(e));
	CHECK(n == -1 && e == ESPIPE);
}

Test(file_adv, pread_on_a_drained_socket_is_espipe_at_once)
{
	run(1, drained_main, NULL);
}

/* ---- two readers of one fd (the file position), interrupted at random:
 * every byte is read exactly once (a transfer withdrawn that still ran, or
 * one run twice, would skip bytes or read them twice) */

enum { SHARED_SIZE = 64 * BLOCK };

struct shared {
	int fd;
	atomic_ulong bytes;
	atomic_ulong sum;
	atomic_ulong interrupted;
	atomic_int readers_left;
};

static void shared_reader(void *arg)
{
	struct shared *s = arg;
	_Alignas(BLOCK) char buf[BLOCK];	/* O_DIRECT's alignment */
	for (;;) {
		ssize_t n = weft_read(s->fd, buf, sizeof buf, -1);
		if (n < 0) {
			CHECK(errno == EINTR);
			atomic_fetch_add(&s->interrupted, 1);
			continue;
		}
		if (n == 0)
			break;
		unsigned long sum = 0;
		for (ssize_t i = 0; i < n; i++)
			sum += (unsigned char)buf[i] * 131u + 7;
		atomic_fetch_add(&s->sum, sum);
		atomic_fetch_add(&s->bytes, (unsigned long)n);
	}
	atomic_fetch_sub(&s->readers_left, 1);
}

static void shared_main(void *arg)
{
	int flags = *(int *)arg;
	for (int round = 0; round < 20; round++) {
		struct shared s = { .fd = temp_file(SHARED_SIZE, flags) };
		CHECK(s.fd >= 0);
		atomic_store(&s.readers_left, 2);
		weft_co *a = go(shared_reader, &s), *b = go(shared_reader, &s);
		while (atomic_load(&s.readers_left)) {
			weft_interrupt(round & 1 ? a : b);
			weft_yield();
		}
		join(a);
		join(b);
		unsigned long want = 0;
		for (size_t i = 0; i < SHARED_SIZE; i++)
			want += byte_at(i) * 131u + 7;
		CHECK(atomic_load(&s.bytes) == SHARED_SIZE);
		CHECK(atomic_load(&s.sum) == want);
		CHECK(weft_close(s.fd) == 0);
	}
}

Test(file_adv, two_interrupted_readers_read_every_byte_once)
{
	int flags = 0;
	cr_assert_eq(setenv("WEFT_BLOCKING_THREADS", "1", 1), 0);
	run(2, shared_main, &flags);
	run(1, shared_main, &flags);
}

/* The same, every transfer on the helper (O_DIRECT). */
Test(file_adv, two_interrupted_direct_readers_read_every_byte_once)
{
	int flags = O_DIRECT, probe = temp_file(BLOCK, O_DIRECT);
	if (probe < 0)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
	close(probe);
	cr_assert_eq(setenv("WEFT_BLOCKING_THREADS", "1", 1), 0);
	run(2, shared_main, &flags);
	run(1, shared_main, &flags);
}

/* ---- many coroutines reading one fd at its position, on two workers:
 * every block is read exactly once.  Under the uring backend each read
 * goes to a ring at the position weft read under the fd's position turn
 * (io.c); two at once there would read the same block (as two
 * IORING_OP_READs at offset -1 would), and skip another.  Each block
 * starts with its own index, so a block read twice or never is named. */

enum { POS_BLOCKS = 512, POS_READERS = 32 };

struct pos_scene {
	int fd;
	atomic_uint seen[POS_BLOCKS];
	atomic_int bad;
};

static void pos_reader(void *arg)
{
	struct pos_scene *s = arg;
	_Alignas(BLOCK) unsigned char buf[BLOCK];
	ssize_t n;
	while ((n = weft_read(s->fd, buf, sizeof buf, -1)) == BLOCK) {
		uint32_t i;
		memcpy(&i, buf, sizeof i);
		if (i < POS_BLOCKS)
			atomic_fetch_add(&s->seen[i], 1);
		else
			atomic_fetch_add(&s->bad, 1);
	}
	if (n != 0)
		atomic_fetch_add(&s->bad, 1);
}

static void pos_main(void *arg)
{
	int flags = *(int *)arg;
	for (int round = 0; round < 4; round++) {
		struct pos_scene s = { .fd = temp_file(POS_BLOCKS * BLOCK, 0) };
		for (uint32_t i = 0; i < POS_BLOCKS; i++)
			CHECK(pwrite(s.fd, &i, sizeof i, (off_t)i * BLOCK) == sizeof i);
		CHECK(fsync(s.fd) == 0 && posix_fadvise(s.fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
		if (flags) {
			char self[64];
			snprintf(self, sizeof self, "/proc/self/fd/%d", s.fd);
			int again = open(self, O_RDONLY | O_CLOEXEC | flags);
			CHECK(again >= 0);
			close(s.fd);
			s.fd = again;
		}
		weft_stats before = stats_now();
		weft_co *co[POS_READERS];
		for (int i = 0; i < POS_READERS; i++)
			co[i] = go(pos_reader, &s);
		for (int i = 0; i < POS_READERS; i++)
			join(co[i]);
		/* under uring every O_DIRECT read was a ring's (weft_stats v6) */
		if (flags && before.io_backend == WEFT_IO_URING)
			CHECK(stats_now().ring_sqes - before.ring_sqes >= POS_BLOCKS);
		unsigned twice = 0, never = 0;
		for (int i = 0; i < POS_BLOCKS; i++) {
			twice += atomic_load(&s.seen[i]) > 1;
			never += atomic_load(&s.seen[i]) == 0;
		}
		if (twice || never || atomic_load(&s.bad))
			fprintf(stderr, "%d readers at the position: %u blocks read twice or more, %u never, %d bad reads\n",
				POS_READERS, twice, never, atomic_load(&s.bad));
		CHECK(!twice && !never && !atomic_load(&s.bad));
		CHECK(weft_close(s.fd) == 0);
	}
}

Test(file_adv, many_readers_at_the_position_read_every_block_once)
{
	int flags = 0;
	run(2, pos_main, &flags);
}

Test(file_adv, many_direct_readers_at_the_position_read_every_block_once)
{
	int flags = O_DIRECT, probe = temp_file(BLOCK, O_DIRECT);
	if (probe < 0)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
	close(probe);
	run(2, pos_main, &flags);
}

/* ---- many coroutines writing one O_DIRECT fd at its position: every
 * block lands in its own place, none overwritten (a write at the position
 * weft read, two at once, would write the same block; the position, left
 * behind, would make the next one overwrite it). */

enum { POS_WRITERS = 16, POS_WRITES = 32 };

struct wpos_scene {
	int fd;
	atomic_int bad;
};

static void pos_writer(void *arg)
{
	struct wpos_scene *s = arg;
	static atomic_uint next;
	_Alignas(BLOCK) unsigned char buf[BLOCK];
	memset(buf, 0, sizeof buf);
	for (int i = 0; i < POS_WRITES; i++) {
		uint32_t id = atomic_fetch_add(&next, 1) + 1;	/* never 0 */
		memcpy(buf, &id, sizeof id);
		if (weft_write(s->fd, buf, sizeof buf, -1) != BLOCK)
			atomic_fetch_add(&s->bad, 1);
	}
}

static void wpos_main(void *unused)
{
	(void)unused;
	struct wpos_scene s = { .fd = temp_file(BLOCK, O_DIRECT) };
	CHECK(s.fd >= 0 && lseek(s.fd, 0, SEEK_SET) == 0);
	weft_co *co[POS_WRITERS];
	for (int i = 0; i < POS_WRITERS; i++)
		co[i] = go(pos_writer, &s);
	for (int i = 0; i < POS_WRITERS; i++)
		join(co[i]);
	enum { TOTAL = POS_WRITERS * POS_WRITES };
	CHECK(!atomic_load(&s.bad));
	CHECK(lseek(s.fd, 0, SEEK_CUR) == (off_t)TOTAL * BLOCK);
	static bool seen[TOTAL + 1];
	memset(seen, 0, sizeof seen);
	unsigned dup = 0, lost = 0;
	_Alignas(BLOCK) unsigned char buf[BLOCK];
	for (int i = 0; i < TOTAL; i++) {
		CHECK(pread(s.fd, buf, BLOCK, (off_t)i * BLOCK) == BLOCK);
		uint32_t id;
		memcpy(&id, buf, sizeof id);
		CHECK(id >= 1 && id <= TOTAL);
		dup += seen[id];
		seen[id] = true;
	}
	for (int i = 1; i <= TOTAL; i++)
		lost += !seen[i];
	if (dup || lost)
		fprintf(stderr, "%d writers at the position: %u blocks written twice, %u lost (overwritten)\n", POS_WRITERS,
			dup, lost);
	CHECK(!dup && !lost);
	CHECK(weft_close(s.fd) == 0);
}

Test(file_adv, many_direct_writers_at_the_position_write_every_block_once)
{
	int probe = temp_file(BLOCK, O_DIRECT);
	if (probe < 0)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
	close(probe);
	run(2, wpos_main, NULL);
}

/* ---- weft_close of a file while a coroutine's transfer waits for a
 * helper: weft.h says every coroutine waiting on it returns ECANCELED.
 * The close must reach the waiter parked on its transfer (the fd's list of
 * them, io.c file_park) and the transfer must be withdrawn: a close that
 * waited until a helper had run it would deadlock where the pool waits
 * for the closer.  The scene runs on the epoll backend, whose pool it
 * holds; test_uring.c has the same for a read in flight on a ring. */

struct closer {
	int fd;
	int r;
	atomic_bool done;
};

static void close_main(void *arg)
{
	struct closer *c = arg;
	c->r = weft_close(c->fd);
	atomic_store(&c->done, true);
}

struct qreader {
	int fd;
	ssize_t n;
	int err;
	atomic_bool done;
};

static void qread_main(void *arg)
{
	struct qreader *r = arg;
	_Alignas(BLOCK) char buf[BLOCK];
	r->n = weft_pread(r->fd, buf, sizeof buf, 0, -1);
	r->err = errno;
	atomic_store(&r->done, true);
}

static void close_queued_main(void *unused)
{
	(void)unused;
	int fd = temp_file(4 * BLOCK, O_DIRECT);
	CHECK(fd >= 0);
	struct pool_hold bl;
	weft_co *holder = pool_hold_start(&bl);
	uint64_t parks = stats_now().total.parks;
	struct qreader r = { .fd = fd };
	weft_co *rc = go(qread_main, &r);
	while (stats_now().total.parks < parks + 1)
		weft_yield();	/* the reader waits for the helper */
	CHECK(!atomic_load(&r.done));
	struct closer c = { .fd = fd };
	weft_co *cc = go(close_main, &c);
	struct weft__fd *e = weft__fd_find(fd);
	CHECK(e);
	while (!(at_load_uint(&e->gen) & FD_GEN_CLOSING) && !atomic_load(&c.done))
		weft_yield();	/* the close has begun */
	for (int i = 0; i < 100000 && !(atomic_load(&r.done) && atomic_load(&c.done)); i++)
		weft_yield();	/* give the close's wake and the close time to land */
	bool reader_done = atomic_load(&r.done), closer_done = atomic_load(&c.done);
	pool_hold_release(&bl, holder);	/* free the helper */
	join(rc);
	join(cc);
	fprintf(stderr,
		"close of a file with a queued transfer: before the pool was free the reader %s, the "
		"closer %s; reader's result %zd errno %d (%s)\n",
		reader_done ? "had returned" : "still waited", closer_done ? "had returned" : "still waited",
		r.n, r.err, strerror(r.err));
	CHECK(reader_done && closer_done);
	CHECK(r.n == -1 && r.err == ECANCELED);
}

Test(file_adv, close_cancels_a_queued_transfer)
{
	int probe = temp_file(BLOCK, O_DIRECT);
	if (probe < 0)
		cr_skip_test("no O_DIRECT here");
	close(probe);
	cr_assert_eq(setenv("WEFT_BLOCKING_THREADS", "1", 1), 0);
	cr_assert_eq(setenv("WEFT_IO", "epoll", 1), 0);	/* the pool's queue (test_uring.c: the ring's) */
	run(2, close_queued_main, NULL);
}

/* ---- a short read of a regular file that is not at its end: RWF_NOWAIT
 * takes the cached head of the range and returns it; read(2) on a regular
 * file reads all it can (only EOF or a signal shortens it), and so do
 * weft_read and weft_pread (weft.h): file_call reads the rest. */

static void partial_main(void *arg)
{
	ssize_t *out = arg;
	enum { SIZE = 64 * BLOCK };
	int fd = temp_file(SIZE, 0);
	char *buf = malloc(SIZE);
	CHECK(buf);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) == 0);	/* no readahead */
	CHECK(pread(fd, buf, BLOCK, 0) == BLOCK);	/* the first page cached */
	out[0] = weft_pread(fd, buf, SIZE, 0, -1);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	CHECK(pread(fd, buf, BLOCK, 0) == BLOCK);
	out[1] = weft_read(fd, buf, SIZE, -1);
	free(buf);
	CHECK(weft_close(fd) == 0);
}

Test(file_adv, read_of_a_partly_cached_file_is_whole)
{
	ssize_t n[2] = { 0, 0 };
	run(1, partial_main, n);
	fprintf(stderr, "partly cached file: weft_pread %zd, weft_read %zd of %d\n", n[0], n[1], 64 * BLOCK);
	cr_assert_eq(n[0], 64 * BLOCK, "a short pread of a regular file short of its end");
	cr_assert_eq(n[1], 64 * BLOCK, "a short read of a regular file short of its end");
}

/* ---- fds of other kinds keep their own paths: each call's result is
 * the plain system call's */

static void same(const char *what, ssize_t got, int got_err, ssize_t want, int want_err)
{
	if (got == want && (got >= 0 || got_err == want_err))
		return;
	fprintf(stderr, "%s: weft %zd errno %d, plain %zd errno %d\n", what, got, got_err, want, want_err);
	CHECK(false);
}

static void kind(const char *what, int fd)
{
	char a[256], b[256];
	errno = 0;
	ssize_t pw = pread(fd, b, sizeof b, 0);
	int pe = errno;
	errno = 0;
	ssize_t ww = weft_pread(fd, a, sizeof a, 0, -1);
	int we = errno;
	char name[128];
	snprintf(name, sizeof name, "%s pread", what);
	same(name, ww, we, pw, pe);
}

static void kinds_main(void *unused)
{
	(void)unused;
	int fd;
	CHECK((fd = open("/dev/zero", O_RDWR | O_CLOEXEC)) >= 0);
	kind("/dev/zero", fd);
	CHECK(weft_close(fd) == 0);
	CHECK((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0);
	kind("/dev/null", fd);
	CHECK(weft_close(fd) == 0);
	CHECK((fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)) >= 0);
	kind("/proc/self/status", fd);
	char buf[64];
	CHECK(weft_read(fd, buf, sizeof buf, -1) > 0);
	CHECK(weft_close(fd) == 0);
	CHECK((fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0);
	kind("a directory", fd);
	CHECK(weft_close(fd) == 0);
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	kind("a pipe", p[0]);
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
	int sv[2];
	socket_pair(sv);
	kind("a socket", sv[0]);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(file_adv, other_kinds_answer_as_the_system_calls)
{
	run(1, kinds_main, NULL);
}

/* ---- a past deadline ("try without waiting") on a file whose file
 * system cannot answer RWF_NOWAIT (EOPNOTSUPP: procfs reads, buffered
 * ext4 writes) still succeeds: EOPNOTSUPP means "cannot say", not "would
 * wait", and such a file's transfers run on the worker as plain calls. */

static void past_main(void *arg)
{
	ssize_t *out = arg;
	char buf[256];
	int fd;
	CHECK((fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)) >= 0);
	errno = 0;
	out[0] = weft_read(fd, buf, sizeof buf, 0);
	out[1] = errno;
	CHECK(weft_close(fd) == 0);
	fd = temp_file(BLOCK, 0);
	CHECK(pread(fd, buf, sizeof buf, 0) == sizeof buf);	/* cached */
	errno = 0;
	out[2] = weft_write(fd, buf, sizeof buf, 0);	/* a page-cache write */
	out[3] = errno;
	CHECK(weft_close(fd) == 0);
}

Test(file_adv, a_past_deadline_reads_a_proc_file_and_writes_a_cached_ext4_file)
{
	ssize_t r[4];
	run(1, past_main, r);
	fprintf(stderr, "past deadline: weft_read of /proc/self/status %zd errno %zd; weft_write of a cached ext4 file %zd errno %zd\n",
		r[0], r[1], r[2], r[3]);
	cr_assert(r[0] > 0, "weft_read(/proc/self/status, deadline 0): %zd, errno %zd", r[0], r[1]);
	cr_assert(r[2] == 256, "weft_write(cached file, deadline 0): %zd, errno %zd", r[2], r[3]);
}

/* ---- many one-transfer coroutines under a deadline, a cancel and an
 * interrupt at once, at random moments; each frees its buffer as soon as
 * its call returns (ASan: a helper writing into it later is a
 * heap-use-after-free) and checks what it got */

struct storm {
	int fd;
	atomic_ulong ok, timedout, cancelled, interrupted;
};

struct storm_one {
	struct storm *s;
	int64_t deadline;
	bool write;
};

static void storm_transfer(void *arg)
{
	struct storm_one *o = arg;
	char *buf;
	CHECK(posix_memalign((void **)&buf, BLOCK, BLOCK) == 0);
	memset(buf, 0xAA, BLOCK);
	ssize_t n;
	if (o->write) {
		for (size_t i = 0; i < BLOCK; i++)
			buf[i] = (char)byte_at(2 * BLOCK + i);
		n = weft_pwrite(o->s->fd, buf, BLOCK, 2 * BLOCK, o->deadline);
	} else {
		n = weft_pread(o->s->fd, buf, BLOCK, BLOCK, o->deadline);
	}
	int e = errno;
	if (n >= 0) {
		CHECK(n == BLOCK);
		if (!o->write)
			for (size_t i = 0; i < BLOCK; i++)
				CHECK((unsigned char)buf[i] == byte_at(BLOCK + i));
		atomic_fetch_add(&o->s->ok, 1);
	} else {
		CHECK(e == ETIMEDOUT || e == ECANCELED || e == EINTR);
		if (!o->write)
			for (size_t i = 0; i < BLOCK; i++)
				CHECK(buf[i] == (char)0xAA);
		atomic_fetch_add(e == ETIMEDOUT ? &o->s->timedout : e == ECANCELED ? &o->s->cancelled
										    : &o->s->interrupted, 1);
	}
	free(buf);
	free(o);
}

static void storm_main(void *arg)
{
	int flags = *(int *)arg;
	struct storm s = { .fd = temp_file(4 * BLOCK, flags) };
	CHECK(s.fd >= 0);
	unsigned seed = 12345;
	enum { ROUNDS = 3000, AT_ONCE = 8 };
	for (int round = 0; round < ROUNDS; round++) {
		weft_co *co[AT_ONCE];
		for (int i = 0; i < AT_ONCE; i++) {
			struct storm_one *o = malloc(sizeof *o);
			CHECK(o);
			o->s = &s;
			o->write = rand_r(&seed) % 4 == 0;
			unsigned d = rand_r(&seed) % 8;	/* none, or 0..~2 ms (scaled up) */
			o->deadline = d == 0 ? -1 : weft_now() + slack((int64_t)(rand_r(&seed) % (d * 250)) * 1000);
			co[i] = go(storm_transfer, o);
		}
		for (int i = 0; i < AT_ONCE; i++) {
			for (unsigned y = rand_r(&seed) % 4; y; y--)
				weft_yield();
			unsigned r = rand_r(&seed) % 4;
			if (r & 1)
				weft_interrupt(co[i]);
			if (r & 2)
				weft_cancel(co[i]);
		}
		for (int i = 0; i < AT_ONCE; i++)
			join(co[i]);
	}
	fprintf(stderr, "storm: ok %lu, timed out %lu, cancelled %lu, interrupted %lu\n", atomic_load(&s.ok),
		atomic_load(&s.timedout), atomic_load(&s.cancelled), atomic_load(&s.interrupted));
	CHECK(weft_close(s.fd) == 0);
}

static void storm(unsigned workers, const char *threads)
{
	int flags = O_DIRECT, probe = temp_file(BLOCK, O_DIRECT);
	if (probe < 0)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
	close(probe);
	cr_assert_eq(setenv("WEFT_BLOCKING_THREADS", threads, 1), 0);
	run(workers, storm_main, &flags);
}

Test(file_adv, storm_1_worker_1_helper, .timeout = 300)
{
	storm(1, "1");
}

Test(file_adv, storm_2_workers_1_helper, .timeout = 300)
{
	storm(2, "1");
}

Test(file_adv, storm_2_workers_4_helpers, .timeout = 300)
{
	storm(2, "4");
}

/* ---- a write to a file on ext4 does not queue behind a busy offload
 * pool (here its one helper waits for a pipe): ext4 answers a buffered
 * RWF_NOWAIT write with EOPNOTSUPP, and the write runs on the worker, as
 * a plain write would; queued behind the pool it would wait for the
 * program's own offloads (a deadlock had the pipe's writer been this
 * coroutine). */

static void starve_main(void *arg)
{
	ssize_t *out = arg;
	int fd = temp_file(BLOCK, 0);
	struct pool_hold bl;
	weft_co *holder = pool_hold_start(&bl);
	errno = 0;
	out[0] = weft_write(fd, "a log line\n", 11, weft_now() + 1000 * 1000 * 1000);
	out[1] = errno;
	pool_hold_release(&bl, holder);
	CHECK(weft_close(fd) == 0);
}

Test(file_adv, a_file_write_does_not_wait_for_a_busy_pool)
{
	ssize_t r[2];
	cr_assert_eq(setenv("WEFT_BLOCKING_THREADS", "1", 1), 0);
	run(1, starve_main, r);
	fprintf(stderr, "a write of 11 bytes to a file while the pool's one helper is busy: %zd, errno %zd (%s)\n",
		r[0], r[1], strerror((int)r[1]));
	cr_assert_eq(r[0], 11);
}

/* ---- the main coroutine returns while transfers are queued and under
 * way: weft_main returns, no helper writes into a freed buffer (ASan) */

static int shutdown_fd;

static void detached_reader(void *unused)
{
	(void)unused;
	char *buf;
	CHECK(posix_memalign((void **)&buf, BLOCK, 16 * BLOCK) == 0);
	ssize_t n = weft_pread(shutdown_fd, buf, 16 * BLOCK, 0, -1);
	CHECK(n == 16 * BLOCK || (n == -1 && (errno == ECANCELED || errno == EINTR)));
	free(buf);
}

static void shutdown_main(void *unused)
{
	(void)unused;
	for (int i = 0; i < 200; i++)
		CHECK(weft_detach(weft_spawn(detached_reader, NULL)) == 0);
}

Test(file_adv, main_returns_with_transfers_queued)
{
	int probe = temp_file(BLOCK, O_DIRECT);
	if (probe < 0)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
	close(probe);
	cr_assert_eq(setenv("WEFT_BLOCKING_THREADS", "2", 1), 0);
	for (int round = 0; round < 20; round++) {
		shutdown_fd = temp_file(16 * BLOCK, O_DIRECT);
		run(2, shutdown_main, NULL);
		close(shutdown_fd);
	}
}
