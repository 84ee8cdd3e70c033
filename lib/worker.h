/* SPDX-License-Identifier: MIT */
/*
 * worker.h — workers, the runtime that owns them, and scheduling.
 * The design is explained at the top of worker.c.
 */
#ifndef WEFT_WORKER_H
#define WEFT_WORKER_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"
#include "coro.h"
#include "deque.h"
#include "fifo.h"
#include "metrics.h"
#include "sanitize.h"
#include "stack.h"
#include "timer.h"

/* Per-worker counters: written only by their worker (relaxed atomic stores),
 * read racily by shutdown and stats.  They live in the worker's own lines. */
struct weft__counters {
	uint64_t spawned, finished;
	uint64_t dispatches;		/* coroutines run (the monitor's progress mark) */
	uint64_t steals, steal_attempts;
	uint64_t parks;			/* coroutines that switched out to wait */
	uint64_t wakeups;		/* wakes this worker won (park.c) */
	uint64_t sleeps;		/* times the worker slept in its loop */
	uint64_t retracts;		/* park re-checks that took it off the idle stack */
	uint64_t polls, ready_events;	/* its own harvests of epfd, their events */
	uint64_t lifo_hits, inject_pops, ready_pops;
	uint64_t stalls;		/* written by the monitor only */
};

/* A locked FIFO of coroutines (fifo.h), with a lock-free emptiness check:
 * the injection queue, and each worker's queue of coroutines woken by its
 * loop.  q is touched only under lock, whose acquire and release order
 * the items' links and contents.  len is written under lock and read
 * without it (relaxed single-copy-atomic loads and stores, atomic.h): a
 * reader that sees 0 skips the lock and the FIFO; work it missed is covered
 * as any published work is, by the pusher's weft__idle_notify (a StoreLoad fence,
 * then the idle check) or by the pushing worker itself (queue.c). */
struct weft__locked_fifo {
	pthread_mutex_t lock;
	WEFT__FIFO(struct weft_co) q;
	uint64_t len;			/* atomic */
};

/*
 * A worker, its fields grouped by who touches them (Tokio's Core and Remote
 * split), each group starting on its own cache line so that the owner's
 * constant writes do not share a line with what other threads write:
 *   shared     written by other threads too: thieves (runnext, the ready
 *              FIFO's lock), wakers (sleeping, woken_spinning, kicked, the
 *              pinned FIFO), the monitor (the timer heap's lock,
 *              turn_asked);
 *   fixed      written once at start, read by anyone;
 *   published  written by the owner, read by others: the counters (stats,
 *              the monitor's and thieves' progress marks) and what it runs
 *              (the monitor's stall report);
 *   owner      touched by the worker thread alone.
 * The deque keeps its own top (thieves) and bottom (owner) lines.
 */
#define WEFT__WORKER_LINE __attribute__((aligned(64)))
struct weft__worker {
	struct weft__deque deque;
	/* shared */
	struct weft_co *runnext WEFT__WORKER_LINE;	/* atomic: what runs next (queue.c) */
	struct weft__locked_fifo ready;	/* woken by readiness or a deadline, in order */
	struct weft__locked_fifo pinned;	/* runnable coroutines locked to this worker
						 * (weft_lock_thread): never stolen */
	unsigned polling;		/* atomic: 0 awake, or where it sleeps (loop.h) */
	unsigned kicked;		/* atomic: the wake-up token (weft__loop_wake) */
	unsigned sleeping;		/* atomic: 1 while announced idle */
	unsigned woken_spinning;	/* atomic: the waker made it a spinner */
	unsigned turn_asked;		/* atomic: the monitor asks for a fairness turn */
	unsigned nfds;			/* atomic: fds registered in epfd (worker poller) */
	uint64_t graced;		/* atomic: c.dispatches + 1 when a thief's runnext
					 * grace last saw it dispatch nothing (steal.c);
					 * a hint, its order immaterial: a stale value
					 * costs a nap or takes the slot early, and the
					 * slot's CAS decides who runs it */
	struct weft__timers timers;	/* its deadlines (timer.h) */
	/* fixed */
	unsigned index WEFT__WORKER_LINE;
	int epfd;			/* its own epoll instance: evfd, and with the
					 * worker poller its fds (loop.h) */
	int evfd;			/* its wake-up eventfd */
	struct weft__ring *ring;	/* its io_uring (uring.c), NULL under epoll */
	pthread_t thread;
	/* published */
	struct weft__counters c WEFT__WORKER_LINE;
	struct weft_co *current;	/* the running coroutine, NULL between */
	uint64_t current_id;		/* atomic: its id and entry, for the */
	void *current_fn;		/* monitor's stall report (not through co) */
	/* owner */
	struct weft_co *left WEFT__WORKER_LINE;	/* one that switched straight to current,
						 * whose switch-out current finishes (coro.c) */
	void *sched_sp;			/* the scheduler context, while a coroutine runs */
	int64_t turn_at;		/* when the running coroutine's timed turn began, or 0 */
	struct weft__san sched_san;
	int64_t last_poll;		/* when it last harvested its fds' poller */
	uint64_t poll_served;		/* c.ready_pops by which what that harvest
					 * woke has left the ready FIFO (worker.c) */
	int64_t backlog_since;		/* its ready FIFO has held a slept harvest since (loop.c) */
	bool harvesting;		/* in its own harvest: wakes defer their notify (loop.c) */
	bool harvest_full;		/* its last harvest filled its batch (loop.c) */
	bool batching;			/* in a batch of wakes (queue.c) ... */
	struct weft_co *batch_held;	/* ... its newest, for the runnext slot at its end */
	unsigned batch_pushed;		/* ... and how many it pushed to the deque */
	bool timers_ready;
	uint64_t budget_dispatch;	/* the dispatch budget_calls counts in */
	unsigned budget_calls;		/* units spent in it (weft__worker_spend) */
	int *errno_slot;		/* this worker thread's errno (the thread never changes) */
	WEFT__FIFO(struct weft_co) yielders;	/* FIFO of yielders */
	uint64_t nyielders;		/* how many it holds (atomic: stats reads it) */
	struct weft__stack_cache stacks;
	uint64_t rng;
	unsigned tick;
	int64_t slice_start;		/* when the bottom-only run began */
	int64_t slice_len;		/* its current length (see fairness_turn) */
	int64_t inject_turn;		/* when the injection queue last had a turn */
	int64_t inject_len;		/* the interval until its next turn */
	int64_t ready_turn;		/* when its ready FIFO last had a round */
	uint64_t ready_round;		/* pops left in the current round: of the ready */
	uint64_t pinned_round;		/* FIFO, then of the pinned FIFO, */
	uint64_t yield_round;		/* then of the yield FIFO (fairness_turn) */
	bool spinning;
	bool idle_short;		/* its last idle period was short (idle.c) */
	int64_t idle_since;		/* when it last found no work; 0 while busy */
	uint64_t id_next, id_end;	/* a block of coroutine ids */
	void *altstack;			/* sigaltstack for the overflow handler */
	stack_t old_altstack;		/* the thread's own, restored at exit */
	/* touched only by timed periods (metrics.h, metrics.c), out of the
	 * way of the lines above: the owner's ... */
	int64_t delay_win_start WEFT__WORKER_LINE;	/* the delay estimate's current */
	int64_t delay_win_min;		/* interval: when it began, its least delay so far */
	/* ... and published */
	int64_t delay_min_last;		/* atomic: the least delay of its last whole */
	int64_t delay_min_at;		/* interval, and when that interval ended */
	struct weft__metrics_hist delay;	/* runnable to dispatch */
	struct weft__metrics_hist turn;		/* dispatch to switch-out */
} WEFT__WORKER_LINE;

struct weft__rt_state {
	unsigned nworkers;
	struct weft__worker *workers;
	unsigned running;		/* atomic: accepting spawns */
	unsigned stopping;		/* atomic: workers exit when idle */
	unsigned nr_spinning;		/* atomic: workers looking for work */
	unsigned nr_idle;		/* atomic: workers announced idle */
	pthread_mutex_t idle_lock;	/* guards idle[] */
	unsigned *idle;			/* stack of idle worker indices */
	uint64_t timer_watch;		/* atomic: who sleeps for the sleepers' timers (idle.c) */
	struct weft__locked_fifo inject;	/* spawns and wakes from plain threads */
	uint64_t ext_spawned;		/* atomic: spawns from plain threads */
	uint64_t ext_wakeups;		/* atomic: wakes won by plain threads */
	uint32_t quiesce;		/* futex: bumped when a worker goes idle while draining */
	unsigned draining;		/* atomic: a shutdown is waiting */
	unsigned cancel_all;		/* atomic: weft_shutdown_until passed its deadline:
					 * spawns start cancelled */
};

extern struct weft__rt_state weft__rt;

/* True between weft_init and the end of weft_shutdown's drain (runtime.c
 * sets weft__rt.running). */
static inline bool weft__rt_accepting(void)
{
	return at_load_uint(&weft__rt.running) != 0;
}

/* The worker this thread is, or NULL.  Never cached across a suspension:
 * out of line, so the thread-local's address is computed afresh. */
struct weft__worker *weft__worker_self(void);
/* A pseudo-random number from this thread's own generator (the worker's, or
 * a thread-local one on other threads): no shared state, no race. */
uint32_t weft__worker_rand_any(void);
/* The same from w's generator (w the caller's worker). */
uint32_t weft__worker_rand(struct weft__worker *w);

/* The coroutine to switch to directly from one leaving w (what w's
 * scheduler would dispatch next from w's own queues), or NULL: then switch
 * to w's scheduler. */
struct weft_co *weft__worker_successor(struct weft__worker *w);
/* Queues co, which yielded on w, in w's yield FIFO (w's own thread).  co
 * is due once w has dispatched as many coroutines as its LIFO end (runnext,
 * the deque) held then: a round of w's FIFOs does not run it before them
 * (the budget asks for a turn as it yields; worker.c, fairness_turn).  What
 * the ready and pinned FIFOs held comes first anyway: a round pops them
 * before the yield FIFO. */
static inline void weft__worker_push_yielder(struct weft__worker *w, struct weft_co *co)
{
	int64_t lifo = w->deque.bottom - at_load_i64(&w->deque.top) +
		       (at_load_ptr((void **)&w->runnext) != NULL);
	co->yield_due = at_load_64(&w->c.dispatches) + (uint64_t)(lifo > 0 ? lifo : 0);
	WEFT__FIFO_PUSH(&w->yielders, co);
	at_store_64(&w->nyielders, w->nyielders + 1);	/* read by stats */
}
/* Makes w's next dispatch a fairness turn (the monitor, for w's due
 * timers or its ready FIFOs: monitor.c); any thread. */
void weft__worker_ask_turn(struct weft__worker *w);

/*
 * The budget (docs/design.md, "The budget"): every fd call and channel
 * operation (and weft_consume_budget) spends one unit of its coroutine's
 * budget for the dispatch it runs in (one run between two switches: every
 * switch to a coroutine, direct or not, bumps c.dispatches, coro.c), an fd
 * call that did not park one more per WEFT__WORKER_BUDGET_BYTES it moved,
 * and the call that finds the budget spent first asks for a fairness
 * turn and yields (weft__worker_budget_spent).  w is the caller's worker,
 * running a coroutine; returns the worker the caller goes on with (after a
 * yield, perhaps another).
 */
enum { WEFT__WORKER_BUDGET = 128, WEFT__WORKER_BUDGET_BYTES = 4096 };
struct weft__worker *weft__worker_budget_spent(struct weft__worker *w);
static inline struct weft__worker *weft__worker_spend(struct weft__worker *w)
{
	uint64_t d = at_load_64(&w->c.dispatches);	/* the owner's own counter */
	if (w->budget_dispatch != d) {	/* the first call of a dispatch */
		w->budget_dispatch = d;
		w->budget_calls = 1;
		return w;
	}
	if (++w->budget_calls < WEFT__WORKER_BUDGET)
		return w;
	return weft__worker_budget_spent(w);
}

/* n bytes moved by an fd call whose weft__worker_spend was w's, in w's
 * current dispatch: a unit per WEFT__WORKER_BUDGET_BYTES, so that a
 * coroutine moving much data without waiting yields by bytes as well as by
 * calls (the next call's spend yields once the budget is gone). */
static inline void weft__worker_spend_bytes(struct weft__worker *w, size_t n)
{
	size_t units = n / WEFT__WORKER_BUDGET_BYTES;
	w->budget_calls += units < WEFT__WORKER_BUDGET ? (unsigned)units : WEFT__WORKER_BUDGET;
}

/* Starts and stops the worker threads (runtime.c drives them); start
 * returns 0 or a negative errno (ENOMEM, EMFILE, EAGAIN). */
int weft__workers_start(unsigned n, int pin);
void weft__workers_stop(void);		/* wakes and joins every worker */
void weft__workers_free(void);		/* then frees them */
/* True when every coroutine spawned so far has finished. */
bool weft__workers_all_finished(void);

/* A fresh coroutine id (unique in the process). */
uint64_t weft__worker_next_id(struct weft__worker *w);

#endif
