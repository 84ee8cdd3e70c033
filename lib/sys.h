/* SPDX-License-Identifier: MIT */
/*
 * sys.h — the system calls of the I/O paths (read, write, send, and the
 * vectored, datagram, message and sendfile calls of net.c), made directly
 * rather than through libc.
 *
 * glibc's read, write and send are cancellation points: in a process with
 * more than one thread, which every weft process is, each one brackets the
 * system call with __pthread_enable_asynccancel and ..._disable_asynccancel.
 * weft never cancels its workers with pthread_cancel, so that bracket is pure
 * cost on every message (docs/notes/2026-12-06-user-and-kernel-time.md).  A
 * direct call also keeps weft's own I/O out of reach of an interposed read or
 * send (an LD_PRELOAD hook library): weft's internals must reach the kernel.
 *
 * Under ASan and TSan the libc functions stay: their interceptors check the
 * buffers and make a write to an fd happen before the read that gets it.
 *
 * The contract is libc's: the result, or -1 with errno.  It includes only
 * atomic.h (for WEFT_ASAN and WEFT_TSAN).
 *
 * close(2) and fcntl(2), the fd table's own calls (weft_close, the
 * registration), are direct under the sanitizers too, through syscall(2)
 * there: libweft-hook's close() of an fd it tracks runs weft's close
 * protocol, so a close(2) of weft_close's that reached it would run the
 * protocol again inside the first, on an entry the first holds (a
 * sanitizer's interceptor of close calls the next close, the hooks').
 */
#ifndef WEFT_SYS_H
#define WEFT_SYS_H

#include <errno.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/types.h>
#include <unistd.h>

#include "atomic.h"	/* WEFT_ASAN and WEFT_TSAN */

#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
#define WEFT__SYS_LIBC 1
#elif defined(__x86_64__)
static inline long weft__sys_call6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}
#elif defined(__aarch64__)
static inline long weft__sys_call6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}
#else
#define WEFT__SYS_LIBC 1
#endif

#ifndef WEFT__SYS_LIBC
/* The kernel's -errno result as libc's -1 with errno. */
static inline ssize_t weft__sys_result(long r)
{
	if (r > -4096 && r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}
#endif

/* One wrapper per call: libc's function under the sanitizers, else the
 * system call with up to six arguments. */
#ifdef WEFT__SYS_LIBC
#define WEFT__SYS(libc_call, nr, ...) return libc_call
#else
#define WEFT__SYS(libc_call, nr, a, b, c, d, e, f) \
	return weft__sys_result(weft__sys_call6(nr, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f)))
#endif

/* A system call that is never libc's function, with up to three int or
 * long arguments: syscall(2) under the sanitizers. */
#ifdef WEFT__SYS_LIBC
#define WEFT__SYS_RAW(nr, a, b, c) return (int)syscall(nr, a, b, c)
#else
#define WEFT__SYS_RAW(nr, a, b, c) \
	return (int)weft__sys_result(weft__sys_call6(nr, (long)(a), (long)(b), (long)(c), 0, 0, 0))
#endif

static inline ssize_t weft__sys_read(int fd, void *buf, size_t len)
{
	WEFT__SYS(read(fd, buf, len), SYS_read, fd, buf, len, 0, 0, 0);
}

static inline ssize_t weft__sys_write(int fd, const void *buf, size_t len)
{
	WEFT__SYS(write(fd, buf, len), SYS_write, fd, buf, len, 0, 0, 0);
}

static inline ssize_t weft__sys_send(int fd, const void *buf, size_t len, int flags)
{
	WEFT__SYS(send(fd, buf, len, flags), SYS_sendto, fd, buf, len, flags, 0, 0);
}

/* preadv2 and pwritev2 (offset -1: the file position; flags RWF_*). */
static inline ssize_t weft__sys_preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	WEFT__SYS(preadv2(fd, iov, cnt, off, flags), SYS_preadv2, fd, iov, cnt, off, 0, flags);
}

static inline ssize_t weft__sys_pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	WEFT__SYS(pwritev2(fd, iov, cnt, off, flags), SYS_pwritev2, fd, iov, cnt, off, 0, flags);
}

static inline ssize_t weft__sys_readv(int fd, const struct iovec *iov, int cnt)
{
	WEFT__SYS(readv(fd, iov, cnt), SYS_readv, fd, iov, cnt, 0, 0, 0);
}

static inline ssize_t weft__sys_writev(int fd, const struct iovec *iov, int cnt)
{
	WEFT__SYS(writev(fd, iov, cnt), SYS_writev, fd, iov, cnt, 0, 0, 0);
}

static inline ssize_t weft__sys_recvfrom(int fd, void *buf, size_t len, int flags,
					 struct sockaddr *from, socklen_t *fromlen)
{
	WEFT__SYS(recvfrom(fd, buf, len, flags, from, fromlen), SYS_recvfrom, fd, buf, len, flags,
		  from, fromlen);
}

static inline ssize_t weft__sys_sendto(int fd, const void *buf, size_t len, int flags,
				       const struct sockaddr *to, socklen_t tolen)
{
	WEFT__SYS(sendto(fd, buf, len, flags, to, tolen), SYS_sendto, fd, buf, len, flags, to, tolen);
}

static inline ssize_t weft__sys_recvmsg(int fd, struct msghdr *msg, int flags)
{
	WEFT__SYS(recvmsg(fd, msg, flags), SYS_recvmsg, fd, msg, flags, 0, 0, 0);
}

static inline ssize_t weft__sys_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	WEFT__SYS(sendmsg(fd, msg, flags), SYS_sendmsg, fd, msg, flags, 0, 0, 0);
}

static inline ssize_t weft__sys_sendfile(int out, int in, off_t *offset, size_t count)
{
	WEFT__SYS(sendfile(out, in, offset, count), SYS_sendfile, out, in, offset, count, 0, 0);
}

/* close(2) and fcntl(2): never an interposed function (above). */
static inline int weft__sys_close(int fd)
{
	WEFT__SYS_RAW(SYS_close, fd, 0, 0);
}

static inline int weft__sys_fcntl(int fd, int cmd, long arg)
{
	WEFT__SYS_RAW(SYS_fcntl, fd, cmd, arg);
}

#endif
