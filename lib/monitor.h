/* SPDX-License-Identifier: MIT */
/*
 * monitor.h — the monitor thread: it keeps a stuck worker's loop served.
 */
#ifndef WEFT_MONITOR_H
#define WEFT_MONITOR_H

#include <stddef.h>
#include <stdint.h>

/* Starts the monitor; stall_ms: report dispatches that run this long, 0 never.
 * 0 or a negative errno. */
int weft__monitor_start(unsigned stall_ms);
/* Stops the monitor thread.  Its eventfd stays open until
 * weft__monitor_fini, which runs once the workers are stopped: a worker
 * that saw the monitor asleep just before it stopped may still signal it
 * (weft__monitor_worker_awake), and must not write to a closed fd, or to
 * another file that took its number. */
void weft__monitor_stop(void);
void weft__monitor_fini(void);
/* How many times it woke. */
uint64_t weft__monitor_wakeups(void);
/* A worker left its sleep: wakes the monitor if it sleeps without a tick. */
void weft__monitor_worker_awake(void);
/* A coroutine's entry fn for a report on stderr: "0x... (symbol+0x.. in
 * object)", as much as dladdr can tell (the stall report, and
 * weft_shutdown_until's list of coroutines that ignored their cancel). */
void weft__monitor_describe_entry(void *fn, char *buf, size_t size);

#endif
