/* SPDX-License-Identifier: MIT */
/*
 * loop.h — the runtime's poller, the workers' sleeps and timers, and how fds
 * come to be registered.
 *
 * The poller is chosen at weft_init ($WEFT_POLLER, weft_config.poller;
 * docs/design.md, "The poller"); everything else is one mechanism.
 *
 * Each worker has
 *   epfd    its own epoll instance, holding evfd (level-triggered), and
 *           with the worker poller the fds it registered;
 *   evfd    an eventfd that other threads write to wake it (the wake-up
 *           token, with the `kicked` flag: weft__loop_wake);
 *   timers  its deadline heap (timer.h), which bounds a sleep: the timer
 *           watch's, or its own if it comes first (idle.c).
 * Every fd weft waits on is registered once, by the first wait on it,
 * edge-triggered for both directions, its entry's owner naming the
 * registering worker (fdtable.h):
 *
 * shared (the default): one epoll instance serves every worker (the shared
 * epfd).  Any worker harvests it without blocking: at its fairness turns
 * (at most every POLL_NS, worker.c) and the monitor never.  A worker out
 * of work sleeps in one of the two: in the shared epfd if it takes the
 * *holder* role (at most one worker at a time; only when every other
 * worker sleeps too, or while the monitor sees a worker stuck), so that
 * readiness wakes it; else in its own epfd, deaf to readiness, which the
 * workers that are awake serve.  So an I/O load that one worker keeps up
 * with stays on that worker, as it would in a hand-written event loop,
 * instead of waking a second one for every batch.  The holder is woken by
 * the kick, an eventfd in the shared epfd that only a holder drains.
 *
 * worker: the fd goes to the epfd of the worker that registers it, which
 * alone harvests it, at its fairness turns and in every sleep (readiness
 * wakes it); there is no holder.  While it is stuck, the monitor harvests
 * its epfd instead (weft__loop_rescue).
 *
 * Either way a readiness event wakes the waiter through its slot
 * (fdtable.h); the woken coroutine goes to the back of the harvester's
 * ready FIFO (weft__schedule_ready); other workers steal from there,
 * notified as harvest_end (loop.c) decides.  What the monitor's rescue
 * wakes goes to the injection queue instead (queue.c).
 */
#ifndef WEFT_LOOP_H
#define WEFT_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct weft__worker;
struct weft__fd;

/* The poller in use from now on: WEFT_POLLER_SHARED or WEFT_POLLER_WORKER
 * (before weft__loop_shared_init). */
void weft__loop_select(int mode);
/* Whether a ring's completion wakes its owner only (loop.c): the worker
 * poller, or one worker. */
bool weft__loop_ring_wakes_owner(void);
/* The shared epfd and its kick (none with the worker poller), before any
 * worker's loop; 0 or a negative errno (weft__loop_shared_fini releases
 * what was made either way). */
int weft__loop_shared_init(void);
void weft__loop_shared_fini(void);
/* w's own epfd, wake-up eventfd and timer heap; 0 or a negative errno
 * (weft__loop_fini releases what was made either way). */
int weft__loop_init(struct weft__worker *w);
void weft__loop_fini(struct weft__worker *w);
/* The number of fds registered, in every loop. */
unsigned weft__loop_nfds(void);
/* The poller in use: WEFT_POLLER_SHARED or WEFT_POLLER_WORKER. */
int weft__loop_poller(void);
/* Has w's poller (the shared one, or w's own with the worker poller) watch
 * w's ring's eventfd (edge-triggered), whose events go to
 * weft__uring_reap(w->index); 0 or -errno.  Closing evfd unwatches it. */
int weft__loop_watch_ring(struct weft__worker *w, int evfd);

/* Registers fd, whose entry is e, in the calling worker's poller (the
 * shared epfd or its own) if it is not registered yet (and makes it
 * non-blocking); 0 or a negative errno.  The
 * caller holds a reference on e (io.c), so no weft_close can unregister fd
 * meanwhile. */
int weft__loop_register(struct weft__fd *e, int fd);
/* Takes a registered fd out of its poller and clears its entry
 * (weft_close, once no call is in flight on it). */
void weft__loop_unregister(struct weft__fd *e, int fd);

/* w's service at a fairness turn: fires due timers, and harvests its
 * fds' poller if poll_fds; true if either made something runnable. */
bool weft__loop_service(struct weft__worker *w, int64_t now, bool poll_fds);
/* w's queues ran dry: if its last harvest filled its batch, harvests the
 * next without blocking; true if that made something runnable. */
bool weft__loop_harvest_more(struct weft__worker *w);
/* A worker's ready FIFO has held a batch its sleep harvested since
 * w->backlog_since: notifies an idle worker once it has waited too long
 * (loop.c, harvest_end); now is the caller's clock. */
void weft__loop_backlog(struct weft__worker *w, int64_t now);
/* The monitor's sample: whether it saw a worker stuck.  While one is, a
 * worker going to sleep takes the shared epfd if nobody holds it, and if
 * fds are registered and nobody does, an idle worker is woken to. */
void weft__loop_want_poller(bool stuck);
/* The monitor saw w stuck: with the worker poller, harvests w's epfd for
 * it (the shared poller's holder serves instead: nothing to do). */
void weft__loop_rescue(struct weft__worker *w);
/* weft__worker.polling: where a worker sleeps. */
enum { WEFT__LOOP_OWN = 1, WEFT__LOOP_SHARED = 2 };
/* Events per harvest: few enough that what a harvest touches is still
 * cached when its coroutines run (weft__loop_harvest_more). */
enum { WEFT__LOOP_BATCH = 64 };
/* What one sleep harvested (weft__loop_wait). */
struct weft__loop_events {
	int n;
	bool holder;			/* it slept in the shared epfd */
	bool polled;			/* it slept where its fds' readiness wakes it */
	struct epoll_event ev[WEFT__LOOP_BATCH];
};
/* Sleeps until woken (weft__loop_wake), the earliest deadline, or, as the
 * holder, an fd's readiness; consumes the wake-up token and leaves the fd
 * events in *got, for weft__loop_woke to dispatch once the worker is off
 * the idle stack (what they wake is then not notified to the worker
 * itself). */
void weft__loop_wait(struct weft__worker *w, struct weft__loop_events *got);
/* Dispatches them and fires the due timers (a full batch leaves the rest
 * to weft__loop_harvest_more). */
void weft__loop_woke(struct weft__worker *w, struct weft__loop_events *got);
/* Gives w the wake-up token (the kicked flag, and the eventfd it sleeps
 * on); take_token consumes it. */
void weft__loop_wake(struct weft__worker *w);
void weft__loop_take_token(struct weft__worker *w);

#endif
