/* SPDX-License-Identifier: MIT */
/*
 * config.h — the runtime's configuration: weft_config, the environment and
 * the defaults, resolved once by weft_init.  docs/tuning.md lists them all.
 */
#ifndef WEFT_CONFIG_H
#define WEFT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "weft.h"

enum {
	WEFT__CONFIG_WORKERS_MAX = 1024,
	WEFT__CONFIG_STACK_MIN = 16 << 10,
	WEFT__CONFIG_STACK_DEFAULT = 64 << 10,
	WEFT__CONFIG_BLOCKING_THREADS_MAX = 4096,
	WEFT__CONFIG_BLOCKING_THREADS_DEFAULT = 64,
	WEFT__CONFIG_STALL_MS_MAX = 3600 * 1000,
	WEFT__CONFIG_STALL_MS_DEFAULT = 100,
	WEFT__CONFIG_SCHED_SAMPLE_MAX = 65536,
	WEFT__CONFIG_SCHED_SAMPLE_DEFAULT = 256,
};
#define WEFT__CONFIG_STACK_MAX ((size_t)1 << 30)

/* n rounded up to the page size (stack sizes). */
size_t weft__config_page_round(size_t n);

struct weft__config_settings {
	unsigned workers;
	size_t stack_size;	/* rounded up to the page size */
	int pin;		/* 1 or -1 */
	long stack_guards;	/* guarded stacks allowed at once; -1: the default */
	unsigned blocking_threads;	/* weft_offload's helpers, at most */
	unsigned stall_ms;	/* report a coroutine running this long; 0: never */
	bool stats;		/* print the stats table at shutdown */
	unsigned sched_sample;	/* time one runnable period in this many (metrics.h) */
	int io;			/* WEFT_IO_AUTO, WEFT_IO_EPOLL or WEFT_IO_URING: asked for */
	int poller;		/* WEFT_POLLER_SHARED or WEFT_POLLER_WORKER (loop.h) */
	bool uring_sockets;	/* $WEFT_URING_SOCKETS: sockets' waits on the rings (uring.h) */
};

/* Fills out from cfg (the fields its size covers), the environment and the
 * defaults; -EINVAL (after one stderr line for a bad environment
 * variable). */
int weft__config_resolve(const weft_config *cfg, struct weft__config_settings *out);

/* The CPUs in the affinity mask, capped by the cgroup CPU quota. */
unsigned weft__config_default_workers(void);

#endif
