/* SPDX-License-Identifier: MIT */
/*
 * sock.c — the calls that make, copy, configure and close fds: socket,
 * socketpair, pipe, pipe2, connect, close, dup, dup2, dup3, fcntl and
 * ioctl(FIONBIO).
 *
 * In a coroutine, an fd made without SOCK_NONBLOCK / O_NONBLOCK is made
 * non-blocking for real and tracked as believed blocking (fdstate.c);
 * fcntl(F_GETFL) shows the believed flag, F_SETFL and FIONBIO change it
 * and keep the real one set.  Copies share the record.  close of an fd the
 * hooks track or waited on, and dup2 and dup3 onto one, go through weft's
 * close protocol (weft__io_replace) with the real call in place of its
 * close(2): the coroutines parked on it are woken (their calls fail with
 * EBADF, wait.c), and no call registers the file being closed.
 */
/* With _FILE_OFFSET_BITS=64, glibc's headers name fcntl fcntl64 for the
 * linker: both are defined here, under their own names (on 64-bit systems
 * the two are one function). */
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hook.h"

HOOK_EXPORT int socket(int domain, int type, int protocol)
{
	bool take = weft__hook_takes(type & SOCK_NONBLOCK);
	return weft__hook_created(REAL(socket)(domain, take ? type | SOCK_NONBLOCK : type, protocol),
				  take);
}

/* Both fds of a pair, or neither. */
static int created_pair(int r, int fds[2], bool take)
{
	if (r != 0)
		return r;
	if (weft__hook_created(fds[0], take) < 0) {
		int saved = errno;
		REAL(close)(fds[1]);
		errno = saved;
		return -1;
	}
	if (weft__hook_created(fds[1], take) >= 0)
		return 0;
	int saved = errno;
	close(fds[0]);
	errno = saved;
	return -1;
}

HOOK_EXPORT int socketpair(int domain, int type, int protocol, int fds[2])
{
	bool take = weft__hook_takes(type & SOCK_NONBLOCK);
	int r = REAL(socketpair)(domain, take ? type | SOCK_NONBLOCK : type, protocol, fds);
	return created_pair(r, fds, take);
}

HOOK_EXPORT int pipe2(int fds[2], int flags)
{
	bool take = weft__hook_takes(flags & O_NONBLOCK);
	return created_pair(REAL(pipe2)(fds, take ? flags | O_NONBLOCK : flags), fds, take);
}

HOOK_EXPORT int pipe(int fds[2])
{
	return pipe2(fds, 0);
}

/* ------------------------------------------------------------- connect */

/* A connect in progress, finished as a blocking connect finishes: its
 * SO_ERROR, or EINPROGRESS at SO_SNDTIMEO. */
static int connect_finish(struct weft__hook_wait *w)
{
	if (weft__hook_wait(w) != 0) {
		if (errno == EAGAIN)
			errno = EINPROGRESS;
		return -1;
	}
	int err;
	socklen_t len = sizeof err;
	if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		return -1;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

HOOK_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	int mode = weft__hook_blocking(fd);
	if (mode == HOOK_PASS)
		return REAL(connect)(fd, addr, addrlen);
	struct weft__hook_wait w;
	weft__hook_wait_init(&w, fd, WEFT_OUT, mode);
	w.exact = true;	/* connect_finish reads SO_ERROR on the wake's word */
	for (;;) {
		if (REAL(connect)(fd, addr, addrlen) == 0)
			return 0;
		if (errno == EINPROGRESS)
			return connect_finish(&w);
		/* a Unix socket whose listener's backlog is full */
		if (errno != EAGAIN || weft__hook_wait(&w) != 0)
			return -1;
	}
}

/* --------------------------------------------------------------- close */

/* The real close, dup2 or dup3 of fd (the target), which weft may have
 * registered (the caller forgot fd first): run through weft__io_replace,
 * which wakes the coroutines parked on fd and keeps any call from
 * registering the file until the real call has returned.  The hooks'
 * depth is raised around it (a call weft makes there is weft's own).
 * weft's calls are for coroutines: a plain thread has one made for it;
 * where none can be made (no runtime running: weft registers nothing any
 * more), the real call alone. */
struct letting_go {
	weft__io_op *op;
	int fd;
	int from, flags;	/* dup2, dup3 */
	int result;
	int err;
};

static int let_go_here(struct letting_go *l)
{
	if (!weft__hook_enter())
		return l->op(l->fd, l);
	int r = weft__io_replace(l->fd, l->op, l);
	weft__hook_leave();
	return r;
}

static void let_go_in_coroutine(void *arg)
{
	struct letting_go *l = arg;
	l->result = let_go_here(l);
	l->err = errno;
}

static int let_go(struct letting_go *l, int mode)
{
	if (mode == HOOK_CORO)
		return let_go_here(l);
	weft_co *co = weft_spawn(let_go_in_coroutine, l);
	if (!co || weft_join(co) != 0)
		return l->op(l->fd, l);
	errno = l->err;
	return l->result;
}

static int real_close(int fd, void *arg)
{
	(void)arg;
	return REAL(close)(fd);
}

HOOK_EXPORT int close(int fd)
{
	int mode = weft__hook_mode();
	if (mode == HOOK_PASS || !weft__hook_fd_forget(fd))
		return REAL(close)(fd);
	struct letting_go l = { .op = real_close, .fd = fd };
	return let_go(&l, mode);
}

/* ----------------------------------------------------------------- dup */

HOOK_EXPORT int dup(int fd)
{
	int r = REAL(dup)(fd);
	if (r >= 0 && weft__hook_mode() != HOOK_PASS)
		weft__hook_fd_share(fd, r);
	return r;
}

static int real_dup2(int to, void *arg)
{
	return REAL(dup2)(((struct letting_go *)arg)->from, to);
}

static int real_dup3(int to, void *arg)
{
	struct letting_go *l = arg;
	return REAL(dup3)(l->from, to, l->flags);
}

/* dup2 and dup3 (op) replace `to` in one step, as the real calls do.
 * When the copy is going to happen, a tracked target is let go as close()
 * lets it go (the calls parked on it fail with EBADF), the real call
 * standing for the close(2): the number stays taken throughout. */
static int dup_onto(int from, int to, weft__io_op *op, int flags)
{
	int mode = weft__hook_mode();
	bool copies = mode != HOOK_PASS && from != to && REAL(fcntl)(from, F_GETFD) >= 0;
	struct letting_go l = { .op = op, .fd = to, .from = from, .flags = flags };
	int r = copies && weft__hook_fd_forget(to) ? let_go(&l, mode) : op(to, &l);
	if (r >= 0 && copies)
		weft__hook_fd_share(from, r);
	return r;
}

HOOK_EXPORT int dup2(int from, int to)
{
	return dup_onto(from, to, real_dup2, 0);
}

HOOK_EXPORT int dup3(int from, int to, int flags)
{
	return dup_onto(from, to, real_dup3, flags);
}

/* --------------------------------------------------------------- fcntl */

/* F_GETFL with the believed O_NONBLOCK. */
static int get_flags(int fd)
{
	int fl = REAL(fcntl)(fd, F_GETFL);
	struct weft__hook_ofd *o = weft__hook_ofd(fd);
	if (fl < 0 || !o)
		return fl;
	return weft__hook_ofd_nonblock(o) ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
}

/* F_SETFL, the real O_NONBLOCK kept on a tracked fd. */
static int set_flags(int fd, int fl)
{
	struct weft__hook_ofd *o = weft__hook_ofd(fd);
	int r = REAL(fcntl)(fd, F_SETFL, o ? fl | O_NONBLOCK : fl);
	if (r == 0 && o)
		weft__hook_ofd_set_nonblock(o, fl & O_NONBLOCK);
	return r;
}

static int hooked_fcntl(int fd, int cmd, void *arg)
{
	if (weft__hook_mode() == HOOK_PASS)
		return REAL(fcntl)(fd, cmd, arg);
	int r;
	switch (cmd) {
	case F_GETFL:
		return get_flags(fd);
	case F_SETFL:
		return set_flags(fd, (int)(intptr_t)arg);
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		r = REAL(fcntl)(fd, cmd, arg);
		if (r >= 0)
			weft__hook_fd_share(fd, r);
		return r;
	default:
		return REAL(fcntl)(fd, cmd, arg);
	}
}

HOOK_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return hooked_fcntl(fd, cmd, arg);
}

HOOK_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return hooked_fcntl(fd, cmd, arg);
}

/* --------------------------------------------------------------- ioctl */

HOOK_EXPORT int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct weft__hook_ofd *o = weft__hook_mode() == HOOK_PASS ? NULL : weft__hook_ofd(fd);
	if (request != FIONBIO || !o)
		return REAL(ioctl)(fd, request, arg);
	int one = 1;
	int r = REAL(ioctl)(fd, FIONBIO, &one);
	if (r == 0)
		weft__hook_ofd_set_nonblock(o, *(const int *)arg != 0);
	return r;
}
