/* SPDX-License-Identifier: MIT */
/*
 * loop.h — a worker's event loop: its epoll instance, its timers, and how
 * fds come to be registered there.
 *
 * Each worker has
 *   epfd    the loop proper: the fds this worker owns, edge-triggered for
 *           both directions, each registered once, by the first wait on it;
 *           and evfd, level-triggered;
 *   evfd    an eventfd that other threads write to wake the worker (the
 *           wake-up token);
 *   timers  its deadline heap (timer.h), which bounds the sleep.
 * The owner harvests epfd when it has nothing to run, at its fairness turns
 * (at most every POLL_NS), and in the epoll_wait it sleeps in: one system
 * call both waits and harvests.  The monitor (monitor.c) harvests a stuck
 * worker's epfd too.  evfd is level-triggered so that a monitor harvest
 * never takes a token meant for the worker: the token stays visible until
 * the owner drains it.  A readiness event wakes the waiter through its slot
 * (fdtable.h); the woken coroutine goes to the back of the owner's ready
 * FIFO (weft__schedule_ready), whoever harvested, the owner or the monitor;
 * other workers steal from there, and one that is idle is notified unless
 * the owner harvested and is the only worker.
 */
#ifndef WEFT_LOOP_H
#define WEFT_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct weft__worker;
struct weft__fd;

/* w's epoll set, wake-up eventfd and timer heap; 0 or a negative errno
 * (weft__loop_fini releases what was made either way). */
int weft__loop_init(struct weft__worker *w);
void weft__loop_fini(struct weft__worker *w);

/* Registers fd, whose entry is e, in the calling worker's loop if it is not
 * in any loop yet (and makes it non-blocking); 0 or a negative errno.  The
 * caller holds a reference on e (io.c), so no weft_close can unregister fd
 * meanwhile. */
int weft__loop_register(struct weft__fd *e, int fd);
/* Takes a registered fd out of its loop and clears its entry (weft_close,
 * once no call is in flight on it). */
void weft__loop_unregister(struct weft__fd *e, int fd);

/* Harvests w's epfd without blocking; returns the number of events. */
int weft__loop_poll(struct weft__worker *w);
/* The owner's service: fires due timers, and harvests epfd if poll_fds;
 * true if either made something runnable. */
bool weft__loop_service(struct weft__worker *w, int64_t now, bool poll_fds);
/* What one sleep harvested (weft__loop_wait). */
enum { WEFT__LOOP_BATCH = 128 };
struct weft__loop_events {
	int n;
	struct epoll_event ev[WEFT__LOOP_BATCH];
};
/* Sleeps until woken (evfd), an fd of the loop is ready, or the earliest
 * deadline; consumes the wake-up token and leaves the fd events in *got,
 * for weft__loop_woke to dispatch once the worker is off the idle stack
 * (what they wake is then not notified to the worker itself). */
void weft__loop_wait(struct weft__worker *w, struct weft__loop_events *got);
/* Dispatches them (harvesting on if the batch was full) and fires the due
 * timers. */
void weft__loop_woke(struct weft__worker *w, struct weft__loop_events *got);
/* Writes w's eventfd (the wake-up token); take_token reads it. */
void weft__loop_wake(struct weft__worker *w);
void weft__loop_take_token(struct weft__worker *w);

#endif
