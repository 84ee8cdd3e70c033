/* SPDX-License-Identifier: MIT */
/* Adversarial scenes against the position turn (lib/io.c, pos_take,
 * ring_offset, file_away) under WEFT_IO=uring: weft_read and weft_write at
 * the file position go to the ring at the offset weft read with lseek, and
 * weft moves the position by what the transfer moved.  weft.h promises
 * that weft's calls at the position of one file are atomic with each other
 * (as read(2) and write(2) are); each scene here shows a weft call, or a
 * state of the fd, that the turn once did not cover; each header says
 * how its scene failed before the fix (branch posfix). */
#include "harness.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "uring_test.h"

enum { BLOCK = 4096, BLOCKS = 256 };

/* A temporary file of `blocks` blocks, block i holding i in its first
 * word, synced, dropped from the page cache and reopened O_DIRECT (its
 * transfers then all go to the ring); unlinked.  -1 where the file system
 * refuses O_DIRECT. */
static int direct_file(unsigned blocks, int extra)
{
	int fd = unlinked_temp_file("posturn");
	_Alignas(BLOCK) unsigned char b[BLOCK];
	for (unsigned i = 0; i < blocks; i++) {
		memset(b, 0, sizeof b);
		memcpy(b, &i, sizeof i);
		CHECK(pwrite(fd, b, BLOCK, (off_t)i * BLOCK) == BLOCK);
	}
	CHECK(fsync(fd) == 0);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	int again = open(self, O_RDWR | O_CLOEXEC | O_DIRECT | extra);
	close(fd);
	return again;
}

static void need_direct(void)
{
	int probe = direct_file(1, 0);
	if (probe < 0)
		cr_skip_test("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
	close(probe);
}

/* ---- weft_read (the ring, under the turn) and weft_readv (readv(2) on
 * the worker, no turn) on one fd: every block is read once.
 *
 * Failed under WEFT_IO=uring while weft_readv, weft_writev and
 * weft_sendfile's in_fd at the position took no turn (lib/net.c; weft.h
 * says weft's calls at the position are atomic with each other and names
 * only another fd or a plain read(2)/write(2)/lseek(2) as exceptions).
 * The ring's reader reads the position with lseek, a readv moves it, the
 * ring's read lands at the old offset and its lseek(at + res) puts the
 * position back: blocks read twice, the readv's advance undone. */

struct mixed {
	int fd;
	atomic_uint seen[BLOCKS];
	atomic_int left;
};

/* How a reader reads a block at the position. */
enum how { BY_READ, BY_READV, BY_SENDFILE };
static const enum how by_readv = BY_READV, by_sendfile = BY_SENDFILE;

struct mixed_reader {
	struct mixed *m;
	enum how how;
	int sv[2];	/* BY_SENDFILE: the block goes through sv[0] to sv[1] */
};

/* A block sent with weft_sendfile from the position through a socket
 * pair and read back: its length, 0 at end of file. */
static ssize_t sendfile_block(struct mixed_reader *r, unsigned char *buf)
{
	ssize_t n = weft_sendfile(r->sv[0], r->m->fd, NULL, BLOCK, -1);
	for (ssize_t got = 0; n > 0 && got < n;) {
		ssize_t k = weft_read(r->sv[1], buf + got, (size_t)(n - got), -1);
		CHECK(k > 0);
		got += k;
	}
	return n;
}

static ssize_t mixed_block(struct mixed_reader *r, unsigned char *buf)
{
	struct iovec iov = { buf, BLOCK };
	switch (r->how) {
	case BY_READV:
		return weft_readv(r->m->fd, &iov, 1, -1);
	case BY_SENDFILE:
		return sendfile_block(r, buf);
	default:
		return weft_read(r->m->fd, buf, BLOCK, -1);
	}
}

static void mixed_read(void *arg)
{
	struct mixed_reader *r = arg;
	_Alignas(BLOCK) unsigned char buf[BLOCK];
	for (;;) {
		ssize_t n = mixed_block(r, buf);
		CHECK(n >= 0);
		if (n == 0)
			break;
		CHECK(n == BLOCK);
		unsigned i;
		memcpy(&i, buf, sizeof i);
		CHECK(i < BLOCKS);
		atomic_fetch_add(&r->m->seen[i], 1);
		weft_yield();
	}
	atomic_fetch_sub(&r->m->left, 1);
}

/* Two weft_read readers and two readers by *how_arg at one fd. */
static void mixed_main(void *how_arg)
{
	enum how other = *(const enum how *)how_arg;
	for (int round = 0; round < 20; round++) {
		static struct mixed m;
		memset(&m, 0, sizeof m);
		m.fd = direct_file(BLOCKS, 0);
		CHECK(m.fd >= 0);
		atomic_store(&m.left, 4);
		struct mixed_reader rs[4];
		weft_co *c[4];
		for (int k = 0; k < 4; k++) {
			rs[k] = (struct mixed_reader){ &m, k & 1 ? other : BY_READ, { -1, -1 } };
			if (rs[k].how == BY_SENDFILE)
				CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rs[k].sv) == 0);
			c[k] = go(mixed_read, &rs[k]);
		}
		for (int k = 0; k < 4; k++) {
			join(c[k]);
			if (rs[k].how == BY_SENDFILE)
				CHECK(weft_close(rs[k].sv[0]) == 0 && weft_close(rs[k].sv[1]) == 0);
		}
		unsigned twice = 0, never = 0;
		for (unsigned i = 0; i < BLOCKS; i++) {
			unsigned s = atomic_load(&m.seen[i]);
			twice += s > 1;
			never += s == 0;
		}
		if (twice || never)
			fprintf(stderr, "round %d: %u blocks read twice or more, %u never (of %d)\n", round,
				twice, never, BLOCKS);
		CHECK(twice == 0 && never == 0);
		CHECK(weft_close(m.fd) == 0);
	}
}

Test(posturn_adv, weft_read_and_weft_readv_at_the_position_read_every_block_once, .timeout = 120)
{
	need_direct();
	run_uring(2, mixed_main, (void *)&by_readv);
}

/* ---- The same with weft_sendfile from the position (a NULL offset)
 * beside weft_read under WEFT_IO=uring: failed before weft_sendfile held
 * in_fd's position turn (blocks sent twice). */
Test(posturn_adv, weft_read_and_weft_sendfile_at_the_position_read_every_block_once, .timeout = 120)
{
	need_direct();
	run_uring(2, mixed_main, (void *)&by_sendfile);
}

/* ---- weft_write (the ring, under the turn) and weft_writev (writev(2)
 * on the worker, no turn) appending blocks to one fd at its position:
 * every block lands, none overwritten.
 *
 * Failed under WEFT_IO=uring for the same reason (weft_writev took no
 * turn): a ring write at the lseek'd offset
 * overwrites the writev's block and its lseek moves the position back. */

struct writers {
	int fd;
	atomic_uint next;	/* the tag of the next block written */
};

struct writer {
	struct writers *s;
	bool vec;
};

enum { WRITES = 64 };

static void mixed_write(void *arg)
{
	struct writer *w = arg;
	_Alignas(BLOCK) unsigned char buf[BLOCK];
	for (int k = 0; k < WRITES; k++) {
		memset(buf, 0, sizeof buf);
		unsigned tag = atomic_fetch_add(&w->s->next, 1) + 1;
		memcpy(buf, &tag, sizeof tag);
		struct iovec iov = { buf, sizeof buf };
		ssize_t n = w->vec ? weft_writev(w->s->fd, &iov, 1, -1) : weft_write(w->s->fd, buf, sizeof buf, -1);
		CHECK(n == BLOCK);
		weft_yield();
	}
}

static void writers_main(void *unused)
{
	(void)unused;
	for (int round = 0; round < 10; round++) {
		struct writers s = { .fd = direct_file(0, 0) };
		CHECK(s.fd >= 0);
		struct writer ws[4];
		weft_co *c[4];
		for (int k = 0; k < 4; k++) {
			ws[k] = (struct writer){ &s, k & 1 };
			c[k] = go(mixed_write, &ws[k]);
		}
		for (int k = 0; k < 4; k++)
			join(c[k]);
		off_t pos = lseek(s.fd, 0, SEEK_CUR);
		struct stat st;
		CHECK(fstat(s.fd, &st) == 0);
		if (st.st_size != 4 * WRITES * BLOCK || pos != st.st_size)
			fprintf(stderr, "round %d: file %lld bytes, position %lld, want %d for both\n", round,
				(long long)st.st_size, (long long)pos, 4 * WRITES * BLOCK);
		CHECK(st.st_size == 4 * WRITES * BLOCK && pos == st.st_size);
		CHECK(weft_close(s.fd) == 0);
	}
}

Test(posturn_adv, weft_write_and_weft_writev_at_the_position_overwrite_nothing, .timeout = 120)
{
	need_direct();
	run_uring(2, writers_main, NULL);
}

/* ---- O_APPEND set with fcntl(F_SETFL) after the fd's first weft call:
 * a weft_write leaves the position at the end of the file, as write(2)
 * does.
 *
 * Failed under WEFT_IO=uring while FD_APPEND was read once, at
 * registration (lib/loop.c register_fd): ring_offset, lib/io.c, then sends
 * the write to the ring at the lseek'd offset, the kernel appends it all
 * the same (IOCB_APPEND), and file_away's lseek(at + res) puts the
 * position in the middle of the file, not at its end. */

static void append_main(void *unused)
{
	(void)unused;
	int fd = direct_file(4, 0);
	CHECK(fd >= 0);
	_Alignas(BLOCK) unsigned char buf[BLOCK];
	CHECK(weft_read(fd, buf, BLOCK, -1) == BLOCK);	/* registered, position 1 block */
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(fd, F_SETFL, fl | O_APPEND) == 0);
	memset(buf, 0xab, sizeof buf);
	CHECK(weft_write(fd, buf, BLOCK, -1) == BLOCK);
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	off_t pos = lseek(fd, 0, SEEK_CUR);
	if (st.st_size != 5 * BLOCK || pos != st.st_size)
		fprintf(stderr, "O_APPEND by fcntl: file %lld bytes, position %lld, want %d for both\n",
			(long long)st.st_size, (long long)pos, 5 * BLOCK);
	CHECK(st.st_size == 5 * BLOCK);
	CHECK(pos == st.st_size);
	CHECK(weft_close(fd) == 0);
}

Test(posturn_adv, o_append_set_by_fcntl_after_registration_keeps_the_position_at_the_end, .timeout = 60)
{
	need_direct();
	run_uring(1, append_main, NULL);
}

/* ---- The controls: the same scenes under WEFT_IO=epoll, where the
 * kernel's position lock orders every call, pass (the failures above are
 * the uring backend's). */

static void run_epoll(unsigned workers, void (*fn)(void *), void *arg)
{
	cr_assert_eq(weft_main(fn, arg, &WEFT_CONFIG(.workers = workers, .io = WEFT_IO_EPOLL)), 0,
		     "errno %d", errno);
}

Test(posturn_adv, control_epoll_read_and_readv, .timeout = 120)
{
	need_direct();
	run_epoll(2, mixed_main, (void *)&by_readv);
}

/* No control for weft_sendfile: sendfile(2) with a NULL offset takes no
 * position lock (the kernel's do_sendfile reads f_pos and stores it back
 * unlocked), so under WEFT_IO=epoll it races read(2) as the plain calls
 * do (weft.h, weft_sendfile). */

Test(posturn_adv, control_epoll_write_and_writev, .timeout = 120)
{
	need_direct();
	run_epoll(2, writers_main, NULL);
}

Test(posturn_adv, control_epoll_o_append_by_fcntl, .timeout = 60)
{
	need_direct();
	run_epoll(1, append_main, NULL);
}

/* ---- The turn held long (a pipe the file path takes for an O_DIRECT
 * file: lseek says ESPIPE, so the holder's read waits on a helper for
 * data): waiters queued behind it end by their deadline, a weft_cancel or
 * a weft_interrupt, the others get the turn one by one as bytes come, and
 * a weft_close ends the waiters left (ECANCELED) without a hang; looped,
 * on two workers, so the waiters resume wherever they are stolen to.
 * (A check of the turn's queue: passes on filering.) */

enum { TURN_WAITERS = 8, TURN_ROUNDS = 100 };

struct turn_scene {
	int fd;
	atomic_int ok, timedout, cancelled, interrupted, other;
};

struct turn_waiter {
	struct turn_scene *s;
	int kind;	/* 0 deadline, 1 cancel, 2 interrupt, 3 none */
};

static void turn_wait(void *arg)
{
	struct turn_waiter *t = arg;
	char c;
	int64_t deadline = t->kind == 0 ? weft_now() + 5 * MS : -1;
	ssize_t n = weft_read(t->s->fd, &c, 1, deadline);
	int e = errno;
	if (n == 1)
		atomic_fetch_add(&t->s->ok, 1);
	else if (n < 0 && e == ETIMEDOUT)
		atomic_fetch_add(&t->s->timedout, 1);
	else if (n < 0 && e == ECANCELED)
		atomic_fetch_add(&t->s->cancelled, 1);
	else if (n < 0 && e == EINTR)
		atomic_fetch_add(&t->s->interrupted, 1);
	else
		atomic_fetch_add(&t->s->other, 1);
}

static int turn_done(struct turn_scene *s)
{
	return atomic_load(&s->ok) + atomic_load(&s->timedout) + atomic_load(&s->cancelled) +
	       atomic_load(&s->interrupted) + atomic_load(&s->other);
}

static void turn_yield_until(struct turn_scene *s, int n)
{
	int64_t give_up = weft_now() + slack(20000 * MS);
	while (turn_done(s) < n) {
		CHECK(weft_now() < give_up);	/* a waiter never came back: the turn is lost */
		weft_yield();
	}
}

static void turn_closer(void *arg)
{
	CHECK(weft_close(*(int *)arg) == 0);
}

static void turn_main(void *unused)
{
	(void)unused;
	for (int round = 0; round < TURN_ROUNDS; round++) {
		int p[2];
		ring_pipe(p);
		struct turn_scene s = { .fd = p[0] };
		struct turn_waiter hw = { &s, 3 }, tw[TURN_WAITERS];
		uint64_t parks = stats_now().total.parks;
		weft_co *h = go(turn_wait, &hw), *c[TURN_WAITERS];
		wait_parks(parks, 1);	/* the holder waits for data */
		for (int k = 0; k < TURN_WAITERS; k++) {
			tw[k] = (struct turn_waiter){ &s, k % 4 };
			c[k] = go(turn_wait, &tw[k]);
		}
		wait_parks(parks, 1 + TURN_WAITERS);	/* all queued for the turn */
		for (int k = 0; k < TURN_WAITERS; k++) {
			if (tw[k].kind == 1)
				weft_cancel(c[k]);
			if (tw[k].kind == 2)
				weft_interrupt(c[k]);
		}
		turn_yield_until(&s, 3 * TURN_WAITERS / 4);
		int live = TURN_WAITERS / 4;
		char bytes[1 + TURN_WAITERS] = { 0 };
		if (round & 1) {	/* hand the turn on to every live waiter */
			CHECK(write(p[1], bytes, (size_t)(1 + live)) == 1 + live);
			turn_yield_until(&s, TURN_WAITERS + 1);
			CHECK(atomic_load(&s.ok) == 1 + live);
			CHECK(weft_close(p[0]) == 0);
		} else {	/* close with them queued: ECANCELED, the holder's byte stands */
			weft_co *cl = go(turn_closer, &p[0]);
			turn_yield_until(&s, TURN_WAITERS);
			CHECK(write(p[1], bytes, 1) == 1);
			join(cl);
			turn_yield_until(&s, TURN_WAITERS + 1);
			CHECK(atomic_load(&s.ok) == 1);
			CHECK(atomic_load(&s.cancelled) == 2 * TURN_WAITERS / 4);
		}
		if (atomic_load(&s.other) || atomic_load(&s.timedout) != TURN_WAITERS / 4 ||
		    atomic_load(&s.interrupted) != TURN_WAITERS / 4)
			fprintf(stderr, "round %d: ok %d timedout %d cancelled %d interrupted %d other %d\n",
				round, atomic_load(&s.ok), atomic_load(&s.timedout), atomic_load(&s.cancelled),
				atomic_load(&s.interrupted), atomic_load(&s.other));
		CHECK(atomic_load(&s.other) == 0);
		CHECK(atomic_load(&s.timedout) == TURN_WAITERS / 4);
		CHECK(atomic_load(&s.interrupted) == TURN_WAITERS / 4);
		join(h);
		for (int k = 0; k < TURN_WAITERS; k++)
			join(c[k]);
		close(p[1]);
	}
}

Test(posturn_adv, waiters_for_a_held_turn_end_by_deadline_cancel_interrupt_and_close, .timeout = 300)
{
	run_uring(2, turn_main, NULL);
}

/* ---- One reader at the position whose ring reads race their deadline
 * and interrupts (a cancel that comes as the CQE says bytes moved, or
 * before): the blocks come back in order, none twice, none skipped, as
 * the position must follow exactly what each CQE moved.  (Passes on
 * filering.) */

static void racing_reader(void *arg)
{
	int fd = *(int *)arg;
	_Alignas(BLOCK) unsigned char buf[BLOCK];
	unsigned want = 0, fails = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	for (;;) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		int64_t deadline = (rng >> 60) < 12 ? weft_now() + (int64_t)((rng >> 33) % 60000) : -1;
		ssize_t n = weft_read(fd, buf, sizeof buf, deadline);
		if (n < 0) {
			CHECK(errno == ETIMEDOUT || errno == EINTR);
			fails++;
			continue;
		}
		if (n == 0)
			break;
		CHECK(n == BLOCK);
		unsigned i;
		memcpy(&i, buf, sizeof i);
		if (i != want)
			fprintf(stderr, "read block %u where %u was next (after %u failed reads)\n", i, want,
				fails);
		CHECK(i == want);
		want++;
	}
	CHECK(want == BLOCKS);
}

static void racing_main(void *unused)
{
	(void)unused;
	uint64_t cancels = stats_now().ring_cancels;
	for (int round = 0; round < 20; round++) {
		int fd = direct_file(BLOCKS, 0);
		CHECK(fd >= 0);
		weft_co *r = go(racing_reader, &fd);
		for (int k = 0; k < 200; k++) {
			weft_interrupt(r);
			(void)stats_now();	/* the rings' counts read as they move (TSan) */
			weft_yield();
		}
		join(r);
		CHECK(weft_close(fd) == 0);
	}
	/* the scene did cancel ring reads in flight */
	CHECK(stats_now().ring_cancels > cancels);
}

Test(posturn_adv, a_reader_whose_ring_reads_race_deadlines_and_interrupts_reads_in_order, .timeout = 300)
{
	need_direct();
	run_uring(2, racing_main, NULL);
}

/* ---- Two weft_sendfiles crossing between two files, each at in_fd's
 * position: each holds its in_fd's turn and takes its out_fd's, so
 * without one order for the two turns one held A waiting for B while the
 * other held B waiting for A, for good (no deadline).  Both go on now: the
 * lower fd's turn is taken first. */

enum { CROSS_ROUNDS = 3000, CROSS_BYTES = 512 };

struct cross {
	int from, to;
};

static int cached_file(size_t bytes)
{
	int fd = unlinked_temp_file("posturn");
	CHECK(ftruncate(fd, (off_t)bytes) == 0);
	return fd;
}

static void cross_send(void *arg)
{
	struct cross *c = arg;
	for (int i = 0; i < CROSS_ROUNDS; i++) {
		ssize_t n = weft_sendfile(c->to, c->from, NULL, CROSS_BYTES, -1);
		CHECK(n >= 0);
		if (i % 64 == 0)
			weft_yield();
	}
}

static void cross_main(void *unused)
{
	(void)unused;
	int a = cached_file((size_t)CROSS_ROUNDS * CROSS_BYTES * 2);
	int b = cached_file((size_t)CROSS_ROUNDS * CROSS_BYTES * 2);
	struct cross c[4] = { { a, b }, { b, a }, { a, b }, { b, a } };
	weft_co *co[4];
	for (int i = 0; i < 4; i++)
		co[i] = go(cross_send, &c[i]);
	for (int i = 0; i < 4; i++)
		join(co[i]);
	CHECK(weft_close(a) == 0);
	CHECK(weft_close(b) == 0);
}

Test(posturn_adv, crossing_sendfiles_between_two_files_both_go_on, .timeout = 120)
{
	run_uring(2, cross_main, NULL);
}
