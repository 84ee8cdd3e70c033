/* SPDX-License-Identifier: MIT */
/*
 * metrics.h — the scheduler's latency histograms (weft_stats, stats.c).
 *
 * Two per-worker histograms: the scheduling delay (a coroutine becoming
 * runnable, to its dispatch) and the turn time (a dispatch, to its
 * switch-out).  Both are timed with weft_now (clock.h), in nanoseconds.
 *
 * One stamp serves every way of becoming runnable: weft__co_runnable (coro.h),
 * called where a spawn is started (weft__co_start), where a waker wins a
 * park word's CAS to runnable (park.c, wake_co: I/O, timers, sync objects,
 * plain threads, cancels and interrupts alike), where a worker finishes a
 * park a waker notified (weft__park_finish) and where a coroutine yields.
 * It decides
 * whether this runnable period is timed (one in weft__metrics_mask + 1, by
 * a countdown of the calling thread's own): if so it stores the time in
 * the coroutine and sets co->timed; the dispatch (coro.c, enter) then
 * clears co->timed, records the delay and starts timing the turn, which the
 * switch-out records.  An untimed period reads no clock and writes nothing
 * but the countdown: a decrement and a branch at the stamp, a load of
 * co->timed (the control block's first line, which the dispatch touches
 * anyway) at the dispatch, a load of the worker's turn_at at the
 * switch-out.  Only whoever queues the coroutine stamps it, after its
 * park word says so and before it queues it: the queue hand-off publishes
 * ready_at and timed to the dispatching worker, and the dispatch comes
 * before the coroutine's next runnable period, so the two fields have one
 * owner at a time and need no atomics (docs/design.md, "Scheduler
 * metrics").
 *
 * The histograms are log-bucketed (HDR-style): values below 8 ns have a
 * bucket each; above, each power of two [2^e, 2^(e+1)) is cut into 8 equal
 * sub-buckets, so a bucket's width is at most 1/8 of its lower bound: any
 * value is within 12.5% of its bucket's bounds.  Values past the last
 * bucket (about 9 minutes) count in the last.  Fixed memory, no lock, no
 * allocation: a record is two load-and-store pairs on the recording
 * worker's own lines (weft__count, atomic.h: relaxed single-copy-atomic
 * stores by the one writer), read from any thread with relaxed loads: each
 * count is exact and whole, and a snapshot is a moment's approximation.
 */
#ifndef WEFT_METRICS_H
#define WEFT_METRICS_H

#include <stdint.h>

#include "atomic.h"
#include "clock.h"
#include "weft.h"

enum { WEFT__METRICS_SUB_BITS = 3, WEFT__METRICS_SUB = 1 << WEFT__METRICS_SUB_BITS };
_Static_assert(WEFT_HIST_BUCKETS == WEFT__METRICS_SUB + (39 - WEFT__METRICS_SUB_BITS + 1) * WEFT__METRICS_SUB,
	       "the buckets run from 0 to 2^40 ns");

struct weft__metrics_hist {
	uint64_t buckets[WEFT_HIST_BUCKETS];	/* atomic, one writer */
	uint64_t sum;				/* atomic: of the values, ns */
};

/* The bucket of a value of ns nanoseconds. */
static inline unsigned weft__metrics_bucket(uint64_t ns)
{
	if (ns < WEFT__METRICS_SUB)
		return (unsigned)ns;
	unsigned e = 63u - (unsigned)__builtin_clzll(ns);	/* >= SUB_BITS */
	unsigned shift = e - WEFT__METRICS_SUB_BITS;
	unsigned b = WEFT__METRICS_SUB + shift * WEFT__METRICS_SUB +
		     (unsigned)((ns >> shift) & (WEFT__METRICS_SUB - 1));
	return b < WEFT_HIST_BUCKETS ? b : WEFT_HIST_BUCKETS - 1;
}

/* Records one value (the owning worker only). */
static inline void weft__metrics_record(struct weft__metrics_hist *h, int64_t ns)
{
	uint64_t v = ns > 0 ? (uint64_t)ns : 0;
	weft__count(&h->buckets[weft__metrics_bucket(v)]);
	weft__count_n(&h->sum, v);
}

/* One in weft__metrics_mask + 1 runnable periods is timed: the rate, a
 * power of two (set by weft_init from $WEFT_SCHED_SAMPLE, read-only while
 * the runtime runs).  Hidden: every stamp compares with it, directly
 * rather than through the GOT. */
extern unsigned weft__metrics_mask __attribute__((visibility("hidden")));
/* The runnable periods the calling thread leaves untimed before it times
 * one: the stamp that takes it above the mask (below zero, wrapping) times
 * its period and sets it back to the mask (weft__metrics_stamp).  A
 * countdown left above a smaller mask by an earlier run (thread-locals
 * outlive weft_shutdown) fires at once and is reset so: the rate is exact
 * from the first period after weft_init. */
extern __thread unsigned weft__metrics_tick __attribute__((tls_model("initial-exec")));

struct weft_co;
struct weft__worker;
/* Times the runnable period of co that starts now (weft__co_runnable's
 * sampled path). */
__attribute__((cold)) void weft__metrics_stamp(struct weft_co *co);
/* A timed runnable period ends: w dispatches co, stamped, and times its
 * turn (coro.c, enter). */
__attribute__((cold)) void weft__metrics_dispatch(struct weft__worker *w, struct weft_co *co);
/* The timed turn w's running coroutine began ends (w->turn_at != 0; coro.c,
 * the switch-out). */
__attribute__((cold)) void weft__metrics_switch_out(struct weft__worker *w);

/* The delay estimate's interval (weft_sched_delay, stats.c). */
#define WEFT__METRICS_INTERVAL_NS (100 * WEFT__CLOCK_NS_PER_MS)

#endif
