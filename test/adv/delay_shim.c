/* SPDX-License-Identifier: MIT */
/*
 * delay_shim.c — stands between libweft-hook and libc (linked right after
 * the hooks, so that their dlsym(RTLD_NEXT) finds these): holds one close,
 * dup2 or dup3 of an armed fd number before the real call, until released.
 * And one read of an armed fd, after the real read has returned, so that a
 * hooked read holds its result (EAGAIN) before it waits.  They stand in
 * And one fcntl(fd, F_GETFD), before the real call (weft_close's first
 * step on the fd).  They stand in
 * for a thread preempted between the hooks' decisions and the real system
 * calls.  In a coroutine the hold yields (its worker runs the others).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <unistd.h>

#include "weft.h"

/* what: 0 close, dup2 or dup3 of the number; 1 read; 2 fcntl(F_GETFD) */
static atomic_int target[3] = { -1, -1, -1 };
static atomic_int in_call[3], released[3];

void shim_arm(int what, int fd)
{
	atomic_store(&in_call[what], 0);
	atomic_store(&released[what], 0);
	atomic_store(&target[what], fd);
}

int shim_in_call(int what)
{
	return atomic_load(&in_call[what]);
}

void shim_release(int what)
{
	atomic_store(&released[what], 1);
}

static void hold(int what, int fd)
{
	int t = fd;
	if (fd < 0 || !atomic_compare_exchange_strong(&target[what], &t, -1))
		return;
	atomic_store(&in_call[what], 1);
	while (!atomic_load(&released[what])) {
		if (weft_self())
			weft_yield();
		else
			usleep(1000);
	}
}

ssize_t read(int fd, void *buf, size_t len)
{
	static ssize_t (*real)(int, void *, size_t);
	if (!real)
		real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	ssize_t r = real(fd, buf, len);
	int saved = errno;
	hold(1, fd);
	errno = saved;
	return r;
}

int close(int fd)
{
	static int (*real)(int);
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "close");
	hold(0, fd);
	return real(fd);
}

int dup2(int from, int to)
{
	static int (*real)(int, int);
	if (!real)
		real = (int (*)(int, int))dlsym(RTLD_NEXT, "dup2");
	hold(0, to);
	return real(from, to);
}

int dup3(int from, int to, int flags)
{
	static int (*real)(int, int, int);
	if (!real)
		real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "dup3");
	hold(0, to);
	return real(from, to, flags);
}

int fcntl(int fd, int cmd, ...)
{
	static int (*real)(int, int, ...);
	if (!real)
		real = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (cmd == F_GETFD)
		hold(2, fd);
	return real(fd, cmd, arg);
}
