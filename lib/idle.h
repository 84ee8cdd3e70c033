/* SPDX-License-Identifier: MIT */
/*
 * idle.h — spinning, going idle and waking idle workers (idle.c; the
 * protocol is in worker.c's essay, "Spinning and parking").
 */
#ifndef WEFT_IDLE_H
#define WEFT_IDLE_H

#include <stdbool.h>
#include <stdint.h>

struct weft__worker;

/* Invariant (1), after publishing work: a StoreLoad fence, then wake an
 * idle worker unless someone is spinning. */
void weft__idle_notify(void);
/* Whether w may look for work as a spinner (fewer than half the workers
 * spin); counts it as one. */
bool weft__idle_may_spin(struct weft__worker *w);
/* w found no work: whether it looks again rather than sleep (an idle
 * spinner whose idle periods are short, for at most SPIN_NS: idle.c). */
bool weft__idle_spin_on(struct weft__worker *w);
/* w found work after looking in vain: notes how long it was idle. */
void weft__idle_ended(struct weft__worker *w);
/* Invariant (2): a spinner that found work wakes another if it was the
 * last spinner. */
void weft__idle_stop_spinning(struct weft__worker *w);
/* Whether any queue of any worker, or the injection queue, holds work
 * that any worker may run (pinned FIFOs are not: idle.c). */
bool weft__idle_any_work(void);
/* Goes idle: returns when there may be work again (or the runtime is
 * stopping), having slept in w's loop unless work appeared meanwhile. */
void weft__idle_park(struct weft__worker *w);

/* The timer watch (idle.c): one sleeping worker sleeps for the earliest
 * deadline of every sleeping worker's heap and fires them.  sleep_until:
 * w, announced idle and past the StoreLoad fence, is going to sleep: the
 * absolute deadline it sleeps until, INT64_MAX for none. */
int64_t weft__idle_sleep_until(struct weft__worker *w);
/* w has returned from its sleep: if it holds the watch, it is awake. */
void weft__idle_watch_woke(struct weft__worker *w);
/* If w holds the watch, fires the due timers of the sleeping workers onto
 * w's ready FIFO; whether any was due. */
bool weft__idle_fire_watched(struct weft__worker *w, int64_t now);
/* The monitor's rescue while the watcher is awake (it may be stuck): fires
 * the heap of every sleeping worker whose next deadline passed a while ago
 * (idle.c), to the injection queue; whether any was due.  Lowers *wake to
 * when the next such deadline will have waited that long (the monitor's
 * next tick). */
bool weft__idle_watch_rescue(int64_t now, int64_t *wake);
/* The watch word's until: a deadline (ns) in its units, rounded up, and
 * back, saturating at INT64_MAX (exposed for test_idle's unit check). */
uint64_t weft__idle_watch_encode(int64_t ns);
int64_t weft__idle_watch_decode(uint64_t until);

#endif
