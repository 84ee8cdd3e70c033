/* SPDX-License-Identifier: MIT */
/*
 * net.c — the vectored, socket, datagram and message calls: weft_readv,
 * weft_writev, weft_recv, weft_send, weft_recvfrom, weft_sendto,
 * weft_recvmsg, weft_sendmsg and weft_sendfile.
 *
 * None of them has a loop of its own: each describes its syscall as an
 * attempt (io.h) and hands it to io.c's one-attempt loop (the reads, a
 * datagram, a message) or its write-all loop (writev, send, sendfile), so
 * deadlines, parking, EINTR, cancellation, the reference weft_close waits
 * for and errno after a suspension work as for weft_read and weft_write.
 *
 * What is left here is per call:
 *   - writes to sockets go through send/sendto/sendmsg with MSG_NOSIGNAL
 *     (writev too: sendmsg with the caller's iovecs), never SIGPIPE;
 *   - a partial writev advances a cursor over the caller's (const)
 *     iovecs: the rest of a partly written iovec goes alone, through a
 *     local one-element vector, then whole iovecs again;
 *   - the value-result lengths (fromlen, msg_namelen, msg_controllen) are
 *     restored before each retry, so an EAGAIN never leaves them changed;
 *   - reads tell the loop how much they asked for, which lets a short read
 *     of a stream socket mark it drained (io.c's park_if_drained), except
 *     a MSG_PEEK, which leaves the data queued;
 *   - attempts read errno only through weft__err_get (they run after parks,
 *     possibly on another thread, and may be inlined into the loop).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "errors.h"
#include "io.h"
#include "sys.h"
#include "weft.h"

/* sendfile(2) moves at most 0x7ffff000 bytes a call; ask for less. */
static const size_t SENDFILE_MAX = (size_t)1 << 30;

/* A bad argument found before the call begins: EPERM outside a coroutine
 * comes first, as for every call (weft_wait's rule). */
static int bad_argument(int e)
{
	return weft__err_fail(weft_self() ? e : EPERM);
}

/* The bytes in iov[0..cnt), or SIZE_MAX when they exceed SSIZE_MAX. */
static size_t iov_total(const struct iovec *iov, size_t cnt)
{
	size_t total = 0;
	for (size_t i = 0; i < cnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - total)
			return SIZE_MAX;
		total += iov[i].iov_len;
	}
	return total;
}

/* Checks a caller's vector: its total, or -1 with errno (EINVAL for a count
 * out of 0..IOV_MAX or a total above SSIZE_MAX, EFAULT for a NULL vector). */
static ssize_t iov_check(const struct iovec *iov, int cnt)
{
	if (cnt < 0 || cnt > IOV_MAX)
		return bad_argument(EINVAL);
	if (!iov && cnt > 0)
		return bad_argument(EFAULT);
	size_t total = iov_total(iov, (size_t)cnt);
	return total == SIZE_MAX ? bad_argument(EINVAL) : (ssize_t)total;
}

/* What a read asks for, for the drained hint: nothing for a MSG_PEEK. */
static size_t read_ask(size_t len, int flags)
{
	return flags & MSG_PEEK ? 0 : len;
}

/* ------------------------------------------------------ vectors */

struct vec_op {
	struct weft__io_op op;
	const struct iovec *iov;	/* readv: the vector; writev: the first
					 * iovec not yet written in full */
	int cnt;			/* iovecs from iov on */
	size_t off;			/* writev: bytes of iov[0] already written */
};

static ssize_t readv_attempt(struct weft__io_op *op, int fd)
{
	struct vec_op *v = (struct vec_op *)op;
	return weft__sys_readv(fd, v->iov, v->cnt);
}

ssize_t weft_readv(int fd, const struct iovec *iov, int iovcnt, int64_t deadline)
{
	ssize_t total = iov_check(iov, iovcnt);
	if (total < 0)
		return -1;
	struct vec_op v = { { .attempt = readv_attempt, .asked = (size_t)total }, iov, iovcnt, 0 };
	return weft__io_call(fd, WEFT_IN, &v.op, deadline);
}

/* Moves the cursor past n more bytes written, and past empty iovecs. */
static void vec_advance(struct vec_op *v, size_t n)
{
	n += v->off;
	while (v->cnt > 0 && n >= v->iov->iov_len) {
		n -= v->iov->iov_len;
		v->iov++;
		v->cnt--;
	}
	v->off = n;
}

static ssize_t writev_attempt(struct weft__io_op *op, int fd)
{
	struct vec_op *v = (struct vec_op *)op;
	const struct iovec *iov = v->iov;
	int cnt = v->cnt;
	struct iovec rest;
	op->asked = op->len - op->done;
	if (v->off > 0) {	/* the rest of a partly written iovec, alone */
		rest.iov_base = (char *)iov->iov_base + v->off;
		rest.iov_len = iov->iov_len - v->off;
		op->asked = rest.iov_len;
		iov = &rest;
		cnt = 1;
	}
	ssize_t n;
	if (op->socket) {
		struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt };
		n = weft__sys_sendmsg(fd, &m, MSG_NOSIGNAL);
	} else {
		n = weft__sys_writev(fd, iov, cnt);
	}
	if (n > 0)
		vec_advance(v, (size_t)n);
	return n;
}

ssize_t weft_writev(int fd, const struct iovec *iov, int iovcnt, int64_t deadline)
{
	ssize_t total = iov_check(iov, iovcnt);
	if (total < 0)
		return -1;
	struct vec_op v = { { .attempt = writev_attempt, .len = (size_t)total }, iov, iovcnt, 0 };
	vec_advance(&v, 0);	/* leading empty iovecs */
	return weft__io_write_all(fd, &v.op, deadline);
}

/* ------------------------------------------------------ buffers and datagrams */

struct recv_op {
	struct weft__io_op op;
	void *buf;
	size_t len;
	int flags;
	struct sockaddr *from;
	socklen_t *fromlen;
	socklen_t fromlen0;	/* *fromlen as the caller gave it */
};

static ssize_t recv_attempt(struct weft__io_op *op, int fd)
{
	struct recv_op *r = (struct recv_op *)op;
	if (r->fromlen)
		*r->fromlen = r->fromlen0;
	return weft__sys_recvfrom(fd, r->buf, r->len, r->flags, r->from, r->fromlen);
}

ssize_t weft_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
		      socklen_t *fromlen, int64_t deadline)
{
	struct recv_op r = {
		{ .attempt = recv_attempt, .asked = read_ask(len, flags) },
		buf, len, flags, from, fromlen, fromlen ? *fromlen : 0,
	};
	return weft__io_call(fd, WEFT_IN, &r.op, deadline);
}

ssize_t weft_recv(int fd, void *buf, size_t len, int flags, int64_t deadline)
{
	return weft_recvfrom(fd, buf, len, flags, NULL, NULL, deadline);
}

/* weft_sendto's one datagram, or (write-all) the rest of weft_send's buffer. */
struct send_op {
	struct weft__io_op op;
	const char *buf;
	int flags;
	const struct sockaddr *to;
	socklen_t tolen;
};

static ssize_t send_attempt(struct weft__io_op *op, int fd)
{
	struct send_op *s = (struct send_op *)op;
	op->asked = op->len - op->done;
	return weft__sys_sendto(fd, s->buf + op->done, op->asked, s->flags | MSG_NOSIGNAL, s->to, s->tolen);
}

ssize_t weft_send(int fd, const void *buf, size_t len, int flags, int64_t deadline)
{
	struct send_op s = { { .attempt = send_attempt, .len = len }, buf, flags, NULL, 0 };
	return weft__io_write_all(fd, &s.op, deadline);
}

ssize_t weft_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
		    socklen_t tolen, int64_t deadline)
{
	struct send_op s = { { .attempt = send_attempt, .len = len }, buf, flags, to, tolen };
	return weft__io_call(fd, WEFT_OUT, &s.op, deadline);
}

/* ------------------------------------------------------ messages */

struct msg_op {
	struct weft__io_op op;
	struct msghdr *msg;
	const struct msghdr *cmsg;	/* sendmsg's */
	int flags;
	socklen_t namelen0;		/* recvmsg: the caller's lengths */
	size_t controllen0;
};

static ssize_t recvmsg_attempt(struct weft__io_op *op, int fd)
{
	struct msg_op *m = (struct msg_op *)op;
	m->msg->msg_namelen = m->namelen0;
	m->msg->msg_controllen = m->controllen0;
	return weft__sys_recvmsg(fd, m->msg, m->flags);
}

ssize_t weft_recvmsg(int fd, struct msghdr *msg, int flags, int64_t deadline)
{
	if (!msg)
		return bad_argument(EFAULT);
	size_t total = msg->msg_iov && msg->msg_iovlen <= IOV_MAX
			       ? iov_total(msg->msg_iov, msg->msg_iovlen) : 0;
	struct msg_op m = {
		{ .attempt = recvmsg_attempt, .asked = total == SIZE_MAX ? 0 : read_ask(total, flags) },
		msg, NULL, flags, msg->msg_namelen, msg->msg_controllen,
	};
	return weft__io_call(fd, WEFT_IN, &m.op, deadline);
}

static ssize_t sendmsg_attempt(struct weft__io_op *op, int fd)
{
	struct msg_op *m = (struct msg_op *)op;
	return weft__sys_sendmsg(fd, m->cmsg, m->flags | MSG_NOSIGNAL);
}

ssize_t weft_sendmsg(int fd, const struct msghdr *msg, int flags, int64_t deadline)
{
	if (!msg)
		return bad_argument(EFAULT);
	struct msg_op m = { { .attempt = sendmsg_attempt }, NULL, msg, flags, 0, 0 };
	return weft__io_call(fd, WEFT_OUT, &m.op, deadline);
}

/* ------------------------------------------------------ sendfile */

struct file_op {
	struct weft__io_op op;
	int in_fd;
	off_t *offset;
};

/* op->asked stays 0: a short transfer may be the end of in_fd, not a full
 * socket (an EAGAIN says that). */
static ssize_t sendfile_attempt(struct weft__io_op *op, int fd)
{
	struct file_op *f = (struct file_op *)op;
	size_t left = op->len - op->done;
	return weft__sys_sendfile(fd, f->in_fd, f->offset, left < SENDFILE_MAX ? left : SENDFILE_MAX);
}

/* With a NULL offset the transfer moves in_fd's position: it holds in_fd's
 * position turn throughout (io.h), unless in_fd is out_fd, whose call
 * holds it already.  out_fd's turn (a file's) is then taken first when its
 * number is the lower: two sendfiles crossing between two files take their
 * turns in one order, never each holding the one the other waits for. */
ssize_t weft_sendfile(int out_fd, int in_fd, off_t *offset, size_t count, int64_t deadline)
{
	struct weft__io in, out;
	bool hold = !offset && in_fd != out_fd, out_first = hold && out_fd < in_fd;
	if (out_first && weft__io_pos_hold(&out, out_fd, deadline) != 0)
		return -1;
	if (hold && weft__io_pos_hold(&in, in_fd, deadline) != 0) {
		int e = weft__err_get();
		if (out_first)
			weft__io_pos_drop(&out);
		return weft__err_fail(e);
	}
	struct file_op f = { { .attempt = sendfile_attempt, .len = count, .pos_held = out_first },
			     in_fd, offset };
	ssize_t n = weft__io_write_all(out_fd, &f.op, deadline);
	int e = n < 0 ? weft__err_get() : 0;
	if (hold)
		weft__io_pos_drop(&in);
	if (out_first)
		weft__io_pos_drop(&out);
	return n < 0 ? weft__err_fail(e) : n;
}
