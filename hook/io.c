/* SPDX-License-Identifier: MIT */
/*
 * io.c — the read and write families: read, write, readv, writev, recv,
 * recvfrom, recvmsg, send, sendto, sendmsg (and glibc's fortified __*_chk
 * entry points of the reads, which fortified libraries call instead).
 *
 * On an fd the application believes blocking (fdstate.c), one loop serves
 * them all, as the blocking call behaves: try the real call; on EAGAIN wait
 * (wait.c: park the coroutine, or poll on a plain thread) and retry.  A read
 * returns after one successful attempt.  A write, like a blocking one, goes
 * on until every byte is taken, and returns what was taken when the
 * deadline or an error comes after some was (as the kernel does); so do a
 * recv and a recvmsg with MSG_WAITALL on a stream socket.  Everything else (an untracked
 * fd, one the application made non-blocking, MSG_DONTWAIT, weft's own
 * calls) is the real call, untouched.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "hook.h"

/* One call: its attempt (the real syscall on what is left), and the state
 * the loop keeps. */
struct op {
	ssize_t (*attempt)(struct op *op, int fd);
	int events;		/* WEFT_IN or WEFT_OUT */
	bool all;		/* go on until len bytes are moved */
	bool last;		/* the attempt says: no more (recvmsg's ancillary data) */
	int flags;		/* the socket calls' flags */
	size_t len, done;
	union {
		void *in;
		const void *out;
	} buf;
	const struct iovec *iov;
	int iovcnt;
	struct msghdr *msg;
	const struct sockaddr *to;
	socklen_t tolen;
	struct sockaddr *from;
	socklen_t *fromlen;
};

static ssize_t run(struct op *op, int fd)
{
	int mode = op->flags & MSG_DONTWAIT ? HOOK_PASS : weft__hook_blocking(fd);
	if (mode == HOOK_PASS)
		return op->attempt(op, fd);
	if (mode == HOOK_CORO)
		weft_consume_budget();	/* a loop of calls that never wait yields at times */
	struct weft__hook_wait w;
	weft__hook_wait_init(&w, fd, op->events, mode);
	for (;;) {
		ssize_t n = op->attempt(op, fd);
		if (n >= 0 && !op->all)
			return n;
		if (n >= 0) {
			op->done += (size_t)n;
			if (n == 0 || op->done >= op->len || op->last)
				return (ssize_t)op->done;
			continue;
		}
		if ((errno != EAGAIN && errno != EWOULDBLOCK) || weft__hook_wait(&w) != 0)
			return op->done ? (ssize_t)op->done : -1;
	}
}

/* ------------------------------------------------------------- buffers */

static char *in_at(struct op *op)
{
	return (char *)op->buf.in + op->done;
}

static const char *out_at(struct op *op)
{
	return (const char *)op->buf.out + op->done;
}

static ssize_t read_attempt(struct op *op, int fd)
{
	return REAL(read)(fd, in_at(op), op->len - op->done);
}

static ssize_t write_attempt(struct op *op, int fd)
{
	return REAL(write)(fd, out_at(op), op->len - op->done);
}

static ssize_t recvfrom_attempt(struct op *op, int fd)
{
	return REAL(recvfrom)(fd, in_at(op), op->len - op->done, op->flags, op->from, op->fromlen);
}

static ssize_t sendto_attempt(struct op *op, int fd)
{
	return REAL(sendto)(fd, out_at(op), op->len - op->done, op->flags, op->to, op->tolen);
}

/* A stream socket's recv with MSG_WAITALL waits for all len bytes. */
static bool wait_all(int fd, int flags)
{
	if (!(flags & MSG_WAITALL))
		return false;
	int type, saved = errno;
	socklen_t len = sizeof type;
	int r = getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len);
	errno = saved;
	return r == 0 && type == SOCK_STREAM;
}

HOOK_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct op op = { .attempt = read_attempt, .events = WEFT_IN, .len = len, .buf.in = buf };
	return run(&op, fd);
}

HOOK_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct op op = { .attempt = write_attempt, .events = WEFT_OUT, .all = true, .len = len,
			 .buf.out = buf };
	return run(&op, fd);
}

HOOK_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
			     socklen_t *fromlen)
{
	struct op op = { .attempt = recvfrom_attempt, .events = WEFT_IN, .flags = flags,
			 .len = len, .buf.in = buf, .from = from, .fromlen = fromlen };
	op.all = weft__hook_ofd(fd) && wait_all(fd, flags);
	return run(&op, fd);
}

HOOK_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return recvfrom(fd, buf, len, flags, NULL, NULL);
}

HOOK_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			   const struct sockaddr *to, socklen_t tolen)
{
	struct op op = { .attempt = sendto_attempt, .events = WEFT_OUT, .all = true,
			 .flags = flags, .len = len, .buf.out = buf, .to = to, .tolen = tolen };
	return run(&op, fd);
}

HOOK_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	return sendto(fd, buf, len, flags, NULL, 0);
}

/* ------------------------------------------------------------- vectors */

/* The total of iov's lengths, or SIZE_MAX when it is not one a call
 * accepts (the real call then says why). */
static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	if (!iov || iovcnt < 0 || iovcnt > IOV_MAX)
		return SIZE_MAX;
	size_t sum = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - sum)
			return SIZE_MAX;
		sum += iov[i].iov_len;
	}
	return sum;
}

/* An attempt's vector after a partial one: a bounded copy on the stack,
 * never an allocation (a hooked call may run in a signal handler). */
enum { REST_MAX = 8 };

/* op's vector past the op->done bytes already moved, into *cnt: the
 * caller's own entries from the first one not yet begun, or, when one was
 * begun, up to REST_MAX of them copied into rest with the first one's
 * remainder (a shorter attempt; the loop makes the next).  The caller's
 * vector is never modified. */
static const struct iovec *iov_rest(const struct op *op, struct iovec rest[REST_MAX], int *cnt)
{
	size_t skip = op->done;
	int i = 0;
	while (i < op->iovcnt && skip >= op->iov[i].iov_len)
		skip -= op->iov[i++].iov_len;
	*cnt = op->iovcnt - i;
	if (skip == 0)
		return op->iov + i;
	if (*cnt > REST_MAX)
		*cnt = REST_MAX;
	memcpy(rest, op->iov + i, (size_t)*cnt * sizeof *rest);
	rest[0].iov_base = (char *)rest[0].iov_base + skip;
	rest[0].iov_len -= skip;
	return rest;
}

static ssize_t readv_attempt(struct op *op, int fd)
{
	return REAL(readv)(fd, op->iov, op->iovcnt);
}

static ssize_t writev_attempt(struct op *op, int fd)
{
	struct iovec rest[REST_MAX];
	int cnt;
	const struct iovec *iov = iov_rest(op, rest, &cnt);
	return REAL(writev)(fd, iov, cnt);
}

/* op's message from `done` on, into m: its iovecs past `done` (rest:
 * iov_rest's) and, after the first attempt, no control buffer (the
 * ancillary data went with, or came with, the first byte). */
static void msg_rest(const struct op *op, struct msghdr *m, struct iovec rest[REST_MAX])
{
	int cnt;
	*m = *op->msg;
	m->msg_iov = (struct iovec *)iov_rest(op, rest, &cnt);
	m->msg_iovlen = (size_t)cnt;
	if (op->done) {
		m->msg_control = NULL;
		m->msg_controllen = 0;
	}
}

/* With MSG_WAITALL, each attempt fills the iovecs past `done`.  The
 * address, the ancillary data and the flags are the first attempt's (the
 * later attempts' flags added): the later ones go without a control buffer,
 * and an attempt that brought ancillary data (descriptors, credentials)
 * ends the call, as the kernel's Unix sockets end it after such a message. */
static ssize_t recvmsg_attempt(struct op *op, int fd)
{
	if (!op->all)
		return REAL(recvmsg)(fd, op->msg, op->flags);
	struct msghdr m;
	struct iovec rest[REST_MAX];
	msg_rest(op, &m, rest);
	if (op->done) {
		m.msg_name = NULL;
		m.msg_namelen = 0;
	}
	ssize_t r = REAL(recvmsg)(fd, &m, op->flags);
	if (r < 0)
		return r;
	if (op->done) {
		op->msg->msg_flags |= m.msg_flags;
		return r;
	}
	op->msg->msg_namelen = m.msg_namelen;
	op->msg->msg_controllen = m.msg_controllen;
	op->msg->msg_flags = m.msg_flags;
	op->last = m.msg_controllen != 0;
	return r;
}

/* After a partial send, the rest goes without the ancillary data, which
 * went with the first byte. */
static ssize_t sendmsg_attempt(struct op *op, int fd)
{
	struct msghdr m;
	struct iovec rest[REST_MAX];
	msg_rest(op, &m, rest);
	return REAL(sendmsg)(fd, &m, op->flags);
}

HOOK_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct op op = { .attempt = readv_attempt, .events = WEFT_IN, .iov = iov, .iovcnt = iovcnt };
	return run(&op, fd);
}

HOOK_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	size_t len = iov_total(iov, iovcnt);
	if (len == SIZE_MAX)
		return REAL(writev)(fd, iov, iovcnt);
	struct op op = { .attempt = writev_attempt, .events = WEFT_OUT, .all = true, .len = len,
			 .iov = iov, .iovcnt = iovcnt };
	return run(&op, fd);
}

/* MSG_WAITALL on a stream socket waits for every iovec to be filled, as
 * recv's does for len bytes. */
HOOK_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct op op = { .attempt = recvmsg_attempt, .events = WEFT_IN, .flags = flags, .msg = msg };
	op.len = msg ? iov_total(msg->msg_iov, (int)msg->msg_iovlen) : SIZE_MAX;
	op.all = op.len != SIZE_MAX && msg->msg_iovlen <= IOV_MAX && weft__hook_ofd(fd) &&
		 wait_all(fd, flags);
	if (op.all) {
		op.iov = msg->msg_iov;
		op.iovcnt = (int)msg->msg_iovlen;
	}
	return run(&op, fd);
}

HOOK_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	size_t len = msg ? iov_total(msg->msg_iov, (int)msg->msg_iovlen) : SIZE_MAX;
	if (len == SIZE_MAX || msg->msg_iovlen > IOV_MAX)
		return REAL(sendmsg)(fd, msg, flags);
	struct op op = { .attempt = sendmsg_attempt, .events = WEFT_OUT, .all = true,
			 .flags = flags, .len = len, .iov = msg->msg_iov,
			 .iovcnt = (int)msg->msg_iovlen, .msg = (struct msghdr *)msg };
	return run(&op, fd);
}

/* -------------------------------------------------------------- accept */

static ssize_t accept_attempt(struct op *op, int fd)
{
	return REAL(accept4)(fd, op->from, op->fromlen, op->flags);
}

/* A listening socket's accept waits as a read does (SO_RCVTIMEO too). */
HOOK_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	bool take = weft__hook_takes(flags & SOCK_NONBLOCK);
	struct op op = { .attempt = accept_attempt, .events = WEFT_IN,
			 .flags = take ? flags | SOCK_NONBLOCK : flags, .from = addr,
			 .fromlen = addrlen };
	return weft__hook_created((int)run(&op, fd), take);
}

HOOK_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
	return accept4(fd, addr, addrlen, 0);
}

/* ------------------------------------------------------ fortified reads */

extern void __chk_fail(void) __attribute__((noreturn));

HOOK_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return read(fd, buf, len);
}

HOOK_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		__chk_fail();
	return recvfrom(fd, buf, len, flags, NULL, NULL);
}

HOOK_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
				   struct sockaddr *from, socklen_t *fromlen)
{
	if (len > buflen)
		__chk_fail();
	return recvfrom(fd, buf, len, flags, from, fromlen);
}
