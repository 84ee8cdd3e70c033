/* SPDX-License-Identifier: MIT */
/*
 * eventfd.h — the wake-up eventfds of the workers' loops (loop.c) and of the
 * monitor (monitor.c), as inline wrappers.
 *
 * Each is non-blocking and close-on-exec, and counts: a write adds one, a
 * read takes the whole count and makes the fd unreadable again, so any
 * number of wakes before the sleeper reads cost it one wakeup.  A write can
 * fail only by EINTR (the count never nears its 2^64 - 2 limit) and a read
 * by EINTR or EAGAIN (nothing to take): both are retried on EINTR only.
 *
 * A leaf: system headers only.
 */
#ifndef WEFT_EVENTFD_H
#define WEFT_EVENTFD_H

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* A fresh wake-up eventfd, or a negative errno. */
static inline int weft__eventfd_open(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Wakes whoever sleeps on fd (or the next one to). */
static inline void weft__eventfd_signal(int fd)
{
	uint64_t one = 1;
	while (write(fd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

/* Takes every pending wake of fd (none: returns at once). */
static inline void weft__eventfd_drain(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof v) < 0 && errno == EINTR)
		;
}

#endif
