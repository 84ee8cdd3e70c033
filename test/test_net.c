/* SPDX-License-Identifier: MIT */
/* The vectored, socket, datagram and message calls (lib/net.c) and
 * weft_release: each call's success, end of file, deadline, close, cancel,
 * outside a coroutine and bad arguments (one table of calls for all of
 * them); many small iovecs through a small send buffer to a slow reader;
 * a UDP echo of 10,000 datagrams; an fd passed over a Unix socket;
 * sendfile of 64 MiB; weft_release and the fd number's reuse. */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* CHECK, naming the call of the table being checked. */
#define CHECK_CALL(c, call)                                                              \
	do {                                                                             \
		if (!(c)) {                                                              \
			fprintf(stderr, "%s:%d: %s: CHECK(%s) failed, errno %d\n", __FILE__, \
				__LINE__, (call)->name, #c, errno);                      \
			abort();                                                         \
		}                                                                        \
	} while (0)

/* A temporary file holding n bytes of pattern(i), unlinked. */
static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + (i >> 8) * 13 + (i >> 16));
}

static int pattern_file(size_t n)
{
	char path[] = "/tmp/weft-net-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && unlink(path) == 0);
	enum { BLOCK = 1 << 16 };
	unsigned char *b = malloc(BLOCK);
	CHECK(b);
	for (size_t off = 0; off < n; off += BLOCK) {
		size_t len = n - off < BLOCK ? n - off : BLOCK;
		for (size_t i = 0; i < len; i++)
			b[i] = pattern(off + i);
		CHECK(pwrite(fd, b, len, (off_t)off) == (ssize_t)len);
	}
	free(b);
	return fd;
}

/* Fills the send buffer of fd (a blocking socket not yet seen by weft)
 * until a one-byte send would block. */
static void fill(int fd)
{
	static char junk[4096];
	while (send(fd, junk, sizeof junk, MSG_DONTWAIT) > 0)
		;
	while (send(fd, junk, 1, MSG_DONTWAIT) > 0)
		;
	CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
}

/* ------------------------------------------------------ libc bypassed */

#if !SANITIZED && (defined(__x86_64__) || defined(__aarch64__))
#include <sys/sendfile.h>
#include <sys/syscall.h>
/*
 * weft's calls reach the kernel directly (lib/sys.h), not through libc, and
 * so not through whatever interposes libc (an LD_PRELOAD hook library, which
 * must see only the application's calls).  These stand-ins for libc's (the
 * executable's definitions win for the whole process) count the calls made
 * on the watched fd; each_call_succeeds watches each call's fd.
 */
#define BYPASS_CHECKED 1
static atomic_int watched_fd = -1;
static atomic_uint interposed_calls;

static void count_call(int fd)
{
	if (fd == atomic_load(&watched_fd))
		atomic_fetch_add(&interposed_calls, 1);
}

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	count_call(fd);
	return syscall(SYS_readv, fd, iov, cnt);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	count_call(fd);
	return syscall(SYS_writev, fd, iov, cnt);
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	count_call(fd);
	return syscall(SYS_recvfrom, fd, buf, len, flags, from, fromlen);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
	       socklen_t tolen)
{
	count_call(fd);
	return syscall(SYS_sendto, fd, buf, len, flags, to, tolen);
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	count_call(fd);
	return syscall(SYS_recvmsg, fd, msg, flags);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	count_call(fd);
	return syscall(SYS_sendmsg, fd, msg, flags);
}

ssize_t sendfile(int out, int in, off_t *offset, size_t count)
{
	count_call(out);
	return syscall(SYS_sendfile, out, in, offset, count);
}

static void watch(int fd)
{
	atomic_store(&watched_fd, fd);
}
#else
#define BYPASS_CHECKED 0
static void watch(int fd)
{
	(void)fd;
}
#endif

/* ------------------------------------------------------ the table of calls */

/* Each entry does one call on fd with buf[0..len) (the writes send
 * pattern(0..len); sendfile reads it from a pattern file). */
struct call {
	const char *name;
	int dir;	/* WEFT_IN or WEFT_OUT */
	ssize_t (*fn)(int fd, void *buf, size_t len, int64_t deadline);
	bool all;	/* a write that writes every byte */
};

static int the_file = -1;	/* sendfile's source: pattern bytes */

/* weft_readv or weft_writev of buf[0..len) as three iovecs: its first
 * half, an empty one, the rest. */
static ssize_t split_call(ssize_t (*fn)(int, const struct iovec *, int, int64_t), int fd,
			  void *buf, size_t len, int64_t dl)
{
	size_t half = len / 2;
	struct iovec iov[3] = { { buf, half }, { NULL, 0 }, { (char *)buf + half, len - half } };
	return fn(fd, iov, 3, dl);
}

static ssize_t call_readv(int fd, void *buf, size_t len, int64_t dl)
{
	return split_call(weft_readv, fd, buf, len, dl);
}

static ssize_t call_recv(int fd, void *buf, size_t len, int64_t dl)
{
	return weft_recv(fd, buf, len, 0, dl);
}

static ssize_t call_recvfrom(int fd, void *buf, size_t len, int64_t dl)
{
	struct sockaddr_storage from;
	socklen_t fromlen = sizeof from;
	return weft_recvfrom(fd, buf, len, 0, (struct sockaddr *)&from, &fromlen, dl);
}

static ssize_t call_recvmsg(int fd, void *buf, size_t len, int64_t dl)
{
	struct iovec iov = { buf, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	return weft_recvmsg(fd, &m, 0, dl);
}

static ssize_t call_writev(int fd, void *buf, size_t len, int64_t dl)
{
	return split_call(weft_writev, fd, buf, len, dl);
}

static ssize_t call_send(int fd, void *buf, size_t len, int64_t dl)
{
	return weft_send(fd, buf, len, 0, dl);
}

static ssize_t call_sendto(int fd, void *buf, size_t len, int64_t dl)
{
	return weft_sendto(fd, buf, len, 0, NULL, 0, dl);
}

static ssize_t call_sendmsg(int fd, void *buf, size_t len, int64_t dl)
{
	struct iovec iov = { buf, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	return weft_sendmsg(fd, &m, 0, dl);
}

static ssize_t call_sendfile(int fd, void *buf, size_t len, int64_t dl)
{
	(void)buf;
	off_t off = 0;
	ssize_t n = weft_sendfile(fd, the_file, &off, len, dl);
	CHECK(n < 0 || off == n);
	return n;
}

static const struct call calls[] = {
	{ "weft_readv", WEFT_IN, call_readv, false },
	{ "weft_recv", WEFT_IN, call_recv, false },
	{ "weft_recvfrom", WEFT_IN, call_recvfrom, false },
	{ "weft_recvmsg", WEFT_IN, call_recvmsg, false },
	{ "weft_writev", WEFT_OUT, call_writev, true },
	{ "weft_send", WEFT_OUT, call_send, true },
	{ "weft_sendto", WEFT_OUT, call_sendto, false },
	{ "weft_sendmsg", WEFT_OUT, call_sendmsg, false },
	{ "weft_sendfile", WEFT_OUT, call_sendfile, true },
};
enum { NCALLS = sizeof calls / sizeof calls[0], MSG = 5 };

/* A stream pair for call c: c runs on sv[0]; for a write, sv[0]'s send
 * buffer is full when full is set. */
static void pair_for(const struct call *c, int sv[2], bool full)
{
	socket_pair(sv);
	if (c->dir == WEFT_OUT && full)
		fill(sv[0]);
}

static void each_call_succeeds(void *arg)
{
	(void)arg;
	the_file = pattern_file(MSG);
	unsigned char want[MSG], got[MSG + 1];
	for (size_t i = 0; i < MSG; i++)
		want[i] = pattern(i);
	for (const struct call *c = calls; c < calls + NCALLS; c++) {
		int sv[2];
		pair_for(c, sv, false);
		watch(sv[0]);
		memset(got, 0, sizeof got);
		if (c->dir == WEFT_IN) {
			CHECK_CALL(weft_write(sv[1], want, MSG, -1) == MSG, c);
			CHECK_CALL(c->fn(sv[0], got, sizeof got, weft_now() + 5000 * MS) == MSG, c);
		} else {
			CHECK_CALL(c->fn(sv[0], want, MSG, weft_now() + 5000 * MS) == MSG, c);
			CHECK_CALL(weft_read(sv[1], got, sizeof got, -1) == MSG, c);
		}
		CHECK_CALL(memcmp(got, want, MSG) == 0, c);
		watch(-1);
		CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	}
	CHECK(weft_close(the_file) == 0);
}

Test(net, each_call_succeeds)
{
	run(2, each_call_succeeds, NULL);
#if BYPASS_CHECKED
	cr_assert_eq(atomic_load(&interposed_calls), 0, "a weft call went through libc (lib/sys.h)");
#endif
}

/* Reads want bytes from fd, checking each against pattern(position); with
 * naps, it sleeps now and then (a slow reader). */
struct pattern_reader {
	int fd;
	bool naps;
	size_t want, got;
};

static void pattern_reader_main(void *arg)
{
	struct pattern_reader *r = arg;
	enum { BUF = 1 << 16 };
	unsigned char *b = malloc(BUF);
	CHECK(b);
	while (r->got < r->want) {
		ssize_t n = weft_read(r->fd, b, BUF, weft_now() + 60000 * MS);
		CHECK(n > 0);
		for (ssize_t i = 0; i < n; i++)
			CHECK(b[i] == pattern(r->got + (size_t)i));
		r->got += (size_t)n;
		if (r->naps && r->got % 7 == 0)
			CHECK(weft_sleep(weft_now() + MS / 4) == 0);
	}
	free(b);
}

/* The write-all calls write every byte of 1 MiB through a 4 KiB send
 * buffer to a reader that naps: many partial writes, each resumed. */
static void each_write_all_call_writes_all(void *arg)
{
	(void)arg;
	size_t size = scaled(1 << 20, 1 << 20, 1 << 16);
	the_file = pattern_file(size);
	unsigned char *want = malloc(size);
	CHECK(want);
	for (size_t i = 0; i < size; i++)
		want[i] = pattern(i);
	for (const struct call *c = calls; c < calls + NCALLS; c++) {
		if (!c->all)
			continue;
		int sv[2];
		socket_pair(sv);
		int small = 4096;
		CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
		struct pattern_reader r = { .fd = sv[1], .naps = true, .want = size };
		weft_co *co = go(pattern_reader_main, &r);
		CHECK_CALL(c->fn(sv[0], want, size, weft_now() + 60000 * MS) == (ssize_t)size, c);
		join(co);
		CHECK_CALL(r.got == size, c);
		CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	}
	free(want);
	CHECK(weft_close(the_file) == 0);
}

Test(net, each_write_all_call_writes_every_byte_to_a_slow_reader, .timeout = 300)
{
	run(2, each_write_all_call_writes_all, NULL);
}

/* Reads see the end of file (0); writes to a closed peer see EPIPE, and
 * no SIGPIPE (it would kill the test). */
static void each_call_at_end_of_file(void *arg)
{
	(void)arg;
	the_file = pattern_file(MSG);
	for (const struct call *c = calls; c < calls + NCALLS; c++) {
		int sv[2];
		pair_for(c, sv, false);
		char b[MSG];
		if (c->dir == WEFT_IN) {
			CHECK(shutdown(sv[1], SHUT_WR) == 0);
			CHECK_CALL(c->fn(sv[0], b, sizeof b, -1) == 0, c);
		} else {
			CHECK(close(sv[1]) == 0);
			CHECK_CALL(c->fn(sv[0], b, sizeof b, -1) == -1 && errno == EPIPE, c);
		}
		CHECK(weft_close(sv[0]) == 0);
		if (c->dir == WEFT_IN)
			CHECK(close(sv[1]) == 0);
	}
	CHECK(weft_close(the_file) == 0);
}

Test(net, each_call_at_end_of_file)
{
	signal(SIGPIPE, SIG_DFL);
	run(2, each_call_at_end_of_file, NULL);
}

/* Nothing to read, no room to write: a deadline expires, never early; a
 * past one fails at once without blocking. */
static void each_call_expires(void *arg)
{
	(void)arg;
	the_file = pattern_file(MSG);
	for (const struct call *c = calls; c < calls + NCALLS; c++) {
		int sv[2];
		pair_for(c, sv, true);
		char b[MSG] = { 0 };
		int64_t dl = weft_now() + 20 * MS;
		CHECK_CALL(c->fn(sv[0], b, sizeof b, dl) == -1 && errno == ETIMEDOUT, c);
		CHECK_CALL(weft_now() >= dl, c);
		int64_t before = weft_now();
		CHECK_CALL(c->fn(sv[0], b, sizeof b, 0) == -1 && errno == ETIMEDOUT, c);
		CHECK_CALL(weft_now() - before < slack(1000 * MS), c);
		CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	}
	CHECK(weft_close(the_file) == 0);
}

Test(net, each_call_expires)
{
	run(2, each_call_expires, NULL);
}

/* A coroutine parked in the call; weft_close of its fd, or weft_cancel of
 * it, makes it return ECANCELED. */
struct parked_call {
	const struct call *c;
	int fd;
	bool by_cancel;
	ssize_t result;
	int err;
};

static void parked_call_main(void *arg)
{
	struct parked_call *p = arg;
	char b[MSG] = { 0 };
	p->result = p->c->fn(p->fd, b, sizeof b, weft_now() + 10000 * MS);
	p->err = errno;
	/* once cancelled, every later call fails at once */
	if (p->by_cancel)
		CHECK_CALL(p->c->fn(p->fd, b, sizeof b, -1) == -1 && errno == ECANCELED, p->c);
}

static void each_call_cancelled(void *arg)
{
	(void)arg;
	the_file = pattern_file(MSG);
	for (const struct call *c = calls; c < calls + NCALLS; c++) {
		for (int by_cancel = 0; by_cancel < 2; by_cancel++) {
			int sv[2];
			pair_for(c, sv, true);
			struct parked_call p = { .c = c, .fd = sv[0], .by_cancel = by_cancel };
			uint64_t parks = stats_now().total.parks;
			weft_co *co = go(parked_call_main, &p);
			wait_parks(parks, 1);	/* in its call */
			if (by_cancel)
				CHECK(weft_cancel(co) == 0);
			else
				CHECK(weft_close(sv[0]) == 0);
			join(co);
			CHECK_CALL(p.result == -1 && p.err == ECANCELED, c);
			if (by_cancel)
				CHECK(weft_close(sv[0]) == 0);
			CHECK(weft_close(sv[1]) == 0);
		}
	}
	CHECK(weft_close(the_file) == 0);
}

/* The close or cancel comes once the call has parked (wait_parks): a close
 * before the call began would give EBADF, not ECANCELED. */
Test(net, each_call_is_cancelled_by_close_and_by_cancel)
{
	run(1, each_call_cancelled, NULL);
}

static void check_all_eperm(void)
{
	char b[1];
	for (const struct call *c = calls; c < calls + NCALLS; c++) {
		errno = 0;
		cr_assert_eq(c->fn(0, b, 1, -1), -1, "%s", c->name);
		cr_assert_eq(errno, EPERM, "%s", c->name);
	}
	errno = 0;
	cr_assert_eq(weft_release(0), -1);
	cr_assert_eq(errno, EPERM);
	/* EPERM comes before the argument checks */
	errno = 0;
	cr_assert_eq(weft_readv(0, NULL, -1, -1), -1);
	cr_assert_eq(errno, EPERM);
	errno = 0;
	cr_assert_eq(weft_sendmsg(0, NULL, 0, -1), -1);
	cr_assert_eq(errno, EPERM);
}

Test(net, every_call_outside_a_coroutine_is_eperm)
{
	check_outside_coroutines(check_all_eperm);
}

/* ------------------------------------------------------ bad arguments */

struct bad_case {
	const char *name;
	ssize_t (*fn)(int fd);	/* fd: one end of an open stream pair */
	int err;
};

static int not_open(void)
{
	int fd = dup(0);
	CHECK(fd >= 0 && close(fd) == 0);
	return fd;
}

static struct iovec one_iov[1] = { { NULL, 0 } };
static char byte[1];

static ssize_t bad_readv_count(int fd) { return weft_readv(fd, one_iov, -1, -1); }
static ssize_t bad_writev_count(int fd) { return weft_writev(fd, one_iov, IOV_MAX + 1, -1); }
static ssize_t bad_readv_null(int fd) { return weft_readv(fd, NULL, 1, -1); }
static ssize_t bad_writev_null(int fd) { return weft_writev(fd, NULL, 2, -1); }
static ssize_t bad_writev_sum(int fd)
{
	struct iovec big[2] = { { byte, (size_t)SSIZE_MAX }, { byte, 1 } };
	return weft_writev(fd, big, 2, -1);
}
static ssize_t bad_readv_fd(int fd) { (void)fd; return weft_readv(-1, one_iov, 1, -1); }
static ssize_t bad_writev_fd(int fd) { (void)fd; return weft_writev(not_open(), one_iov, 1, -1); }
static ssize_t bad_recv_fd(int fd) { (void)fd; return weft_recv(-1, byte, 1, 0, -1); }
static ssize_t bad_send_fd(int fd) { (void)fd; return weft_send(not_open(), byte, 1, 0, -1); }
static ssize_t bad_recvfrom_fd(int fd) { (void)fd; return weft_recvfrom(-3, byte, 1, 0, NULL, NULL, -1); }
static ssize_t bad_sendto_fd(int fd) { (void)fd; return weft_sendto(-1, byte, 1, 0, NULL, 0, -1); }
static ssize_t bad_recvmsg_null(int fd) { return weft_recvmsg(fd, NULL, 0, -1); }
static ssize_t bad_sendmsg_null(int fd) { return weft_sendmsg(fd, NULL, 0, -1); }
static ssize_t bad_recvmsg_fd(int fd)
{
	(void)fd;
	struct msghdr m = { .msg_iov = one_iov, .msg_iovlen = 1 };
	return weft_recvmsg(not_open(), &m, 0, -1);
}
static ssize_t bad_sendmsg_fd(int fd)
{
	(void)fd;
	struct msghdr m = { .msg_iov = one_iov, .msg_iovlen = 1 };
	return weft_sendmsg(-1, &m, 0, -1);
}
static ssize_t bad_sendfile_in(int fd) { return weft_sendfile(fd, not_open(), NULL, 1, -1); }
static ssize_t bad_sendfile_out(int fd) { (void)fd; return weft_sendfile(-1, 0, NULL, 1, -1); }
static ssize_t bad_sendfile_count(int fd) { return weft_sendfile(fd, 0, NULL, (size_t)SSIZE_MAX + 1, -1); }
static ssize_t bad_sendfile_offset(int fd)
{
	off_t off = -1;
	return weft_sendfile(fd, the_file, &off, 1, -1);
}
static ssize_t bad_send_pipe(int fd)
{
	(void)fd;
	int p[2];
	CHECK(pipe(p) == 0);
	ssize_t r = weft_send(p[1], byte, 1, 0, -1);
	int e = errno;
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
	errno = e;
	return r;
}
static ssize_t bad_release_fd(int fd) { (void)fd; return weft_release(not_open()); }
static ssize_t bad_release_unseen(int fd)
{
	(void)fd;
	int sv[2];
	socket_pair(sv);	/* open, but weft never saw it */
	ssize_t r = weft_release(sv[0]);
	int e = errno;
	CHECK(close(sv[0]) == 0 && close(sv[1]) == 0);
	errno = e;
	return r;
}

static const struct bad_case bad_cases[] = {
	{ "readv: negative count", bad_readv_count, EINVAL },
	{ "writev: count above IOV_MAX", bad_writev_count, EINVAL },
	{ "readv: NULL vector", bad_readv_null, EFAULT },
	{ "writev: NULL vector", bad_writev_null, EFAULT },
	{ "writev: total above SSIZE_MAX", bad_writev_sum, EINVAL },
	{ "readv: fd -1", bad_readv_fd, EBADF },
	{ "writev: fd not open", bad_writev_fd, EBADF },
	{ "recv: fd -1", bad_recv_fd, EBADF },
	{ "send: fd not open", bad_send_fd, EBADF },
	{ "recvfrom: fd -3", bad_recvfrom_fd, EBADF },
	{ "sendto: fd -1", bad_sendto_fd, EBADF },
	{ "recvmsg: NULL msg", bad_recvmsg_null, EFAULT },
	{ "sendmsg: NULL msg", bad_sendmsg_null, EFAULT },
	{ "recvmsg: fd not open", bad_recvmsg_fd, EBADF },
	{ "sendmsg: fd -1", bad_sendmsg_fd, EBADF },
	{ "sendfile: in_fd not open", bad_sendfile_in, EBADF },
	{ "sendfile: out_fd -1", bad_sendfile_out, EBADF },
	{ "sendfile: count above SSIZE_MAX", bad_sendfile_count, EINVAL },
	{ "sendfile: negative offset", bad_sendfile_offset, EINVAL },
	{ "send: not a socket", bad_send_pipe, ENOTSOCK },
	{ "release: fd not open", bad_release_fd, EBADF },
	{ "release: fd weft never saw", bad_release_unseen, EBADF },
};

static void bad_arguments(void *arg)
{
	(void)arg;
	the_file = pattern_file(MSG);
	for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
		const struct bad_case *b = &bad_cases[i];
		int sv[2];
		socket_pair(sv);
		errno = 0;
		ssize_t r = b->fn(sv[0]);
		if (r != -1 || errno != b->err) {
			fprintf(stderr, "%s: returned %zd, errno %d (want -1, errno %d)\n", b->name,
				r, errno, b->err);
			abort();
		}
		CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	}
	CHECK(weft_close(the_file) == 0);
}

Test(net, bad_arguments)
{
	run(1, bad_arguments, NULL);
}

/* ------------------------------------------------------ vectors */

/*
 * A writer sends rounds of ~1,000 iovecs (1 to 53 bytes, empty ones, and
 * every 97th of 5,000 bytes, so partial writes stop inside iovecs) through
 * a 4 KiB send buffer to a reader that reads into 7 small iovecs and naps
 * now and then: most writev attempts are partial.  Every byte is checked
 * against its position in the stream.
 */
enum { VEC_N = 1000, VEC_BIG = 5000 };

static size_t vec_len(unsigned round, unsigned i)
{
	if (i % 97 == 5)
		return VEC_BIG;
	if (i % 31 == 0)
		return 0;
	return (round * 17 + i * 7919) % 53 + 1;
}

struct vec_test {
	int sv[2];
	unsigned rounds;
	size_t total;
	size_t checked;
};

static void vec_writer(void *arg)
{
	struct vec_test *t = arg;
	struct iovec *iov = calloc(VEC_N, sizeof *iov), *copy = calloc(VEC_N, sizeof *copy);
	unsigned char *buf = malloc(VEC_N * VEC_BIG);
	CHECK(iov && copy && buf);
	size_t pos = 0;
	for (unsigned r = 0; r < t->rounds; r++) {
		size_t off = 0, sum = 0;
		for (unsigned i = 0; i < VEC_N; i++) {
			size_t len = vec_len(r, i);
			for (size_t k = 0; k < len; k++)
				buf[off + k] = pattern(pos + sum + k);
			iov[i] = (struct iovec){ buf + off, len };
			off += len;
			sum += len;
		}
		memcpy(copy, iov, VEC_N * sizeof *iov);
		CHECK(weft_writev(t->sv[0], iov, VEC_N, weft_now() + 60000 * MS) == (ssize_t)sum);
		CHECK(memcmp(copy, iov, VEC_N * sizeof *iov) == 0);	/* iov is const */
		pos += sum;
	}
	t->total = pos;
	CHECK(shutdown(t->sv[0], SHUT_WR) == 0);
	free(iov);
	free(copy);
	free(buf);
}

static void vec_root(void *arg)
{
	struct vec_test *t = arg;
	socket_pair(t->sv);
	int small = 4096;
	CHECK(setsockopt(t->sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0);
	CHECK(setsockopt(t->sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
	weft_co *w = go(vec_writer, t);
	unsigned char b[7][19];
	struct iovec iov[7];
	for (int i = 0; i < 7; i++)
		iov[i] = (struct iovec){ b[i], (size_t)(i * 3 + 1) };	/* 1, 4, ..., 19 bytes */
	size_t pos = 0;
	for (unsigned reads = 0;; reads++) {
		if (reads % 64 == 0)
			CHECK(weft_sleep(weft_now() + MS / 2) == 0);	/* a slow reader */
		ssize_t n = weft_readv(t->sv[1], iov, 7, weft_now() + 60000 * MS);
		CHECK(n >= 0);
		if (n == 0)
			break;
		for (int i = 0; i < 7 && n > 0; i++)
			for (size_t k = 0; k < iov[i].iov_len && n > 0; k++, n--, pos++)
				CHECK(b[i][k] == pattern(pos));
	}
	join(w);
	t->checked = pos;
	CHECK(weft_close(t->sv[0]) == 0 && weft_close(t->sv[1]) == 0);
}

Test(net, writev_and_readv_of_many_small_iovecs_through_a_small_buffer, .timeout = 300)
{
	struct vec_test t = { .rounds = scaled(40, 10, 3) };
	run(2, vec_root, &t);
	cr_assert_gt(t.total, 0);
	cr_assert_eq(t.checked, t.total);
}

/* ------------------------------------------------------ datagrams */

/*
 * A UDP echo of 10,000 datagrams between two coroutines on two workers:
 * the client keeps at most WINDOW in flight (loopback drops only what
 * overflows a receive buffer, and WINDOW of them fit), and checks each
 * echo whole: its length and every byte, in order.
 */
enum { WINDOW = 16, DGRAM_MAX = 1400 };

static size_t dgram_len(unsigned seq)
{
	return 4 + (seq * 2654435761u) % (DGRAM_MAX - 4);
}

static void dgram_fill(unsigned char *b, unsigned seq)
{
	memcpy(b, &seq, 4);
	for (size_t i = 4; i < dgram_len(seq); i++)
		b[i] = (unsigned char)(seq + i * 31);
}

struct udp_test {
	int server, client;
	struct sockaddr_in server_addr;
	unsigned count;
	unsigned echoed, verified;
};

static void udp_server(void *arg)
{
	struct udp_test *t = arg;
	unsigned char b[DGRAM_MAX + 1];
	for (unsigned i = 0; i < t->count; i++) {
		struct sockaddr_in from;
		socklen_t fromlen = sizeof from;
		ssize_t n = weft_recvfrom(t->server, b, sizeof b, 0, (struct sockaddr *)&from,
					  &fromlen, weft_now() + 10000 * MS);
		CHECK(n > 0 && fromlen == sizeof from && from.sin_family == AF_INET);
		CHECK(weft_sendto(t->server, b, (size_t)n, 0, (struct sockaddr *)&from, fromlen, -1) == n);
		t->echoed++;
	}
}

static void udp_client_sender(void *arg)
{
	struct udp_test *t = arg;
	unsigned char b[DGRAM_MAX];
	for (unsigned seq = 0; seq < t->count; seq++) {
		while (seq >= __atomic_load_n(&t->verified, __ATOMIC_ACQUIRE) + WINDOW)
			CHECK(weft_sleep(weft_now() + MS / 10) == 0);
		dgram_fill(b, seq);
		struct iovec iov = { b, dgram_len(seq) };
		struct msghdr m = { .msg_name = &t->server_addr, .msg_namelen = sizeof t->server_addr,
				    .msg_iov = &iov, .msg_iovlen = 1 };
		CHECK(weft_sendmsg(t->client, &m, 0, -1) == (ssize_t)dgram_len(seq));
	}
}

static void udp_root(void *arg)
{
	struct udp_test *t = arg;
	struct sockaddr_in caddr;
	t->server = loopback_socket(SOCK_DGRAM, &t->server_addr);
	t->client = loopback_socket(SOCK_DGRAM, &caddr);
	weft_co *s = go(udp_server, t), *snd = go(udp_client_sender, t);
	unsigned char b[DGRAM_MAX + 1], want[DGRAM_MAX];
	for (unsigned seq = 0; seq < t->count; seq++) {
		ssize_t n = weft_recv(t->client, b, sizeof b, 0, weft_now() + 10000 * MS);
		CHECK(n == (ssize_t)dgram_len(seq));	/* whole, in order */
		dgram_fill(want, seq);
		CHECK(memcmp(b, want, (size_t)n) == 0);
		__atomic_store_n(&t->verified, seq + 1, __ATOMIC_RELEASE);
	}
	join(snd);
	join(s);
	CHECK(weft_close(t->server) == 0 && weft_close(t->client) == 0);
}

Test(net, udp_echo_of_ten_thousand_datagrams_each_whole, .timeout = 300)
{
	struct udp_test t = { .count = scaled(10000, 10000, 1000) };
	run(2, udp_root, &t);
	cr_assert_eq(t.verified, t.count);
	cr_assert_eq(t.echoed, t.count);
}

/* ------------------------------------------------------ SCM_RIGHTS */

/* One end of a fresh stream pair goes over a Unix socket with sendmsg; the
 * receiver gets it with recvmsg (the byte that carries it too) and talks to
 * the sender's end through it with weft calls. */
static void pass_fd(void *arg)
{
	(void)arg;
	int ch[2], sv[2];
	socket_pair(ch);
	socket_pair(sv);
	for (int cloexec = 0; cloexec < 2; cloexec++) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} ctl;
		memset(&ctl, 0, sizeof ctl);
		char tag = 'F';
		struct iovec iov = { &tag, 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
				    .msg_controllen = sizeof ctl.b };
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &sv[1], sizeof(int));
		CHECK(weft_sendmsg(ch[0], &m, 0, -1) == 1);

		memset(&ctl, 0, sizeof ctl);
		char got = 0;
		struct iovec riov = { &got, 1 };
		struct msghdr r = { .msg_iov = &riov, .msg_iovlen = 1, .msg_control = ctl.b,
				    .msg_controllen = sizeof ctl.b };
		CHECK(weft_recvmsg(ch[1], &r, cloexec ? MSG_CMSG_CLOEXEC : 0, weft_now() + 5000 * MS) == 1);
		CHECK(got == 'F' && !(r.msg_flags & MSG_CTRUNC));
		c = CMSG_FIRSTHDR(&r);
		CHECK(c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		      c->cmsg_len == CMSG_LEN(sizeof(int)));
		int fd;
		memcpy(&fd, CMSG_DATA(c), sizeof fd);
		CHECK(fd >= 0 && fd != sv[1]);
		CHECK(!!(fcntl(fd, F_GETFD) & FD_CLOEXEC) == cloexec);
		/* the passed fd works, both ways */
		char b[8];
		CHECK(weft_send(fd, "ping", 4, 0, -1) == 4);
		CHECK(weft_recv(sv[0], b, sizeof b, 0, weft_now() + 5000 * MS) == 4 && memcmp(b, "ping", 4) == 0);
		CHECK(weft_send(sv[0], "pong", 4, 0, -1) == 4);
		CHECK(weft_recv(fd, b, sizeof b, 0, weft_now() + 5000 * MS) == 4 && memcmp(b, "pong", 4) == 0);
		CHECK(weft_close(fd) == 0);
	}
	CHECK(weft_close(ch[0]) == 0 && weft_close(ch[1]) == 0);
	CHECK(weft_close(sv[0]) == 0 && close(sv[1]) == 0);
}

Test(net, an_fd_passed_over_a_unix_socket_works)
{
	run(2, pass_fd, NULL);
}

/* MSG_PEEK leaves the data queued, and a read after it gets it at once,
 * whatever a short peek said about the queue. */
static void peek(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	char b[16];
	for (int i = 0; i < 100; i++) {
		CHECK(weft_write(sv[1], "abc", 3, -1) == 3);
		CHECK(weft_recv(sv[0], b, sizeof b, MSG_PEEK, weft_now() + 5000 * MS) == 3);
		CHECK(weft_recv(sv[0], b, sizeof b, MSG_PEEK, weft_now() + 5000 * MS) == 3);
		CHECK(weft_recv(sv[0], b, sizeof b, 0, weft_now() + 5000 * MS) == 3 && memcmp(b, "abc", 3) == 0);
	}
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(net, msg_peek_leaves_the_data_queued)
{
	run(1, peek, NULL);
}

/* ------------------------------------------------------ sendfile */

struct file_test {
	size_t size;
	size_t verified;
};

static void sendfile_root(void *arg)
{
	struct file_test *t = arg;
	int file = pattern_file(t->size);
	int sv[2];
	socket_pair(sv);
	/* with an offset: the file's position stays where it was */
	CHECK(lseek(file, 3, SEEK_SET) == 3);
	struct pattern_reader r = { .fd = sv[1], .want = t->size };
	weft_co *rd = go(pattern_reader_main, &r);
	off_t off = 0;
	CHECK(weft_sendfile(sv[0], file, &off, t->size, weft_now() + 120000 * MS) == (ssize_t)t->size);
	CHECK(off == (off_t)t->size && lseek(file, 0, SEEK_CUR) == 3);
	join(rd);
	CHECK(r.got == t->size);
	t->verified = r.got;
	/* without: from the position, which advances; it stops early only at
	 * the end of the file */
	CHECK(lseek(file, (off_t)t->size - 10, SEEK_SET) == (off_t)t->size - 10);
	CHECK(weft_sendfile(sv[0], file, NULL, 100, -1) == 10);
	CHECK(lseek(file, 0, SEEK_CUR) == (off_t)t->size);
	CHECK(weft_sendfile(sv[0], file, NULL, 100, -1) == 0);
	unsigned char tail[10];
	CHECK(weft_read(sv[1], tail, sizeof tail, -1) == 10);
	for (size_t i = 0; i < 10; i++)
		CHECK(tail[i] == pattern(t->size - 10 + i));
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0 && weft_close(file) == 0);
}

Test(net, sendfile_of_64_mib_to_a_socket_is_byte_exact, .timeout = 300)
{
	struct file_test t = { .size = (size_t)scaled(64, 64, 4) << 20 };
	run(2, sendfile_root, &t);
	cr_assert_eq(t.verified, t.size);
}

/* ------------------------------------------------------ weft_release */

static void release(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);	/* blocking, as socketpair makes them */
	CHECK(!(fcntl(sv[0], F_GETFL) & O_NONBLOCK));
	/* a reader parked on it is woken with ECANCELED */
	struct parked_call p = { .c = &calls[1], .fd = sv[0] };	/* weft_recv */
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(parked_call_main, &p);
	wait_parks(parks, 1);
	CHECK(fcntl(sv[0], F_GETFL) & O_NONBLOCK);	/* weft made it non-blocking */
	CHECK(weft_release(sv[0]) == 0);
	join(co);
	CHECK(p.result == -1 && p.err == ECANCELED);
	/* blocking again, and the caller's: plain calls work on it */
	CHECK(!(fcntl(sv[0], F_GETFL) & O_NONBLOCK));
	CHECK(weft_release(sv[0]) == -1 && errno == EBADF);	/* forgotten */
	CHECK(write(sv[1], "x", 1) == 1);
	char b[8];
	CHECK(read(sv[0], b, sizeof b) == 1 && b[0] == 'x');
	/* the caller closes it; the number comes back and weft uses it afresh */
	int num = sv[0];
	CHECK(close(sv[0]) == 0);
	int again[2];
	socket_pair(again);
	CHECK(again[0] == num || again[1] == num);
	int fd = again[0] == num ? again[0] : again[1], peer = again[0] == num ? again[1] : again[0];
	CHECK(weft_recv(fd, b, sizeof b, 0, weft_now() + 20 * MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_send(peer, "new", 3, 0, -1) == 3);
	CHECK(weft_recv(fd, b, sizeof b, 0, weft_now() + 5000 * MS) == 3 && memcmp(b, "new", 3) == 0);
	CHECK(weft_send(fd, "back", 4, 0, -1) == 4);
	CHECK(weft_recv(peer, b, sizeof b, 0, weft_now() + 5000 * MS) == 4 && memcmp(b, "back", 4) == 0);
	CHECK(weft_close(fd) == 0 && weft_close(peer) == 0 && weft_close(sv[1]) == 0);
	/* an fd that was non-blocking before weft saw it stays non-blocking */
	int nb[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, nb) == 0);
	CHECK(weft_wait(nb[0], WEFT_OUT, -1) == WEFT_OUT);
	CHECK(weft_release(nb[0]) == 0);
	CHECK(fcntl(nb[0], F_GETFL) & O_NONBLOCK);
	CHECK(close(nb[0]) == 0 && close(nb[1]) == 0);
}

Test(net, release_gives_the_fd_back_blocking_and_its_number_is_reusable)
{
	run(1, release, NULL);	/* the reader parks before we go on (see above) */
}
