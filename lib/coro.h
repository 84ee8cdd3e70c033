/* SPDX-License-Identifier: MIT */
/*
 * coro.h — the coroutine control block and its life cycle.
 *
 * States of a coroutine (the low byte of park_word, see park.h):
 *
 *   RUNNABLE --run--> RUNNING --weft_yield--> YIELDING --(scheduler)--> RUNNABLE
 *                        |
 *                        +--park--> PARKING --(scheduler)--> PARKED --wake--> RUNNABLE
 *                        |             \--wake--> NOTIFIED --(scheduler)--> RUNNABLE
 *                        +--return--> EXITING --(scheduler)--> finished
 *
 * Every transition marked "(scheduler)" runs after the coroutine's
 * switch-out has completed, on the stack it switched to: the worker's own,
 * or that of the successor it switched to directly (coro.c, after_left).
 * That is what guarantees that no other worker can resume a coroutine whose
 * registers are still being saved.
 */
#ifndef WEFT_CORO_H
#define WEFT_CORO_H

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"
#include "list.h"
#include "metrics.h"
#include "sanitize.h"
#include "stack.h"
#include "weft.h"

struct weft__worker;
struct weft__local;
struct weft_group;

/* The first cache line holds what a message's wake, dispatch and switch
 * touch (the stack's payload is 64-byte aligned: stack.c): with thousands
 * of coroutines in rotation every other line of the block is a cache miss
 * per message (docs/notes/2026-12-06-lines-a-message-touches.md).  The
 * stack's header is not read at a switch (docs/design.md, "The stack
 * pool"). */
struct weft_co {
	void *sp;			/* saved stack pointer while switched out */
	uint64_t park_word;		/* atomic: generation | wake result | state */
	struct weft__worker *worker;	/* the worker running it, or that ran it last */
	struct weft_co *next;		/* link in a yield or injection queue */
	uint64_t id;			/* weft_co_id; each dispatch publishes it and */
	void (*fn)(void *);		/* fn for the monitor's stall report */
	int saved_errno;		/* errno follows the coroutine across workers */
	unsigned signals;		/* atomic: CO_CANCELLED, CO_INTERRUPTED (below) */
	uint32_t depth;			/* the most bytes below its top it switched out at */
	bool guarded;			/* its stack has a guard, not a canary (stack.h) */
	/* weft_lock_thread (affinity.c): while locks > 0 only the worker it
	 * locked on dispatches it, so worker stays that worker, and pinned
	 * (locks > 0, kept in this line, which every wake reads) sends its
	 * wakes there.  Both are written by the coroutine itself while it
	 * runs; a waker reads pinned and worker only after the park word's
	 * CAS that makes it runnable, which orders them after the
	 * coroutine's last write before parking. */
	bool pinned;
	bool timed;			/* its runnable period is timed (metrics.h) */
	unsigned char park_cause;	/* atomic: what its last armed wait waits
					 * for (WEFT_PARK_*; weft__waiter_init,
					 * weft__co_census) */
	/* the rest: spawn, exit, join and the rarer calls */
	struct weft__stack *stack;	/* NULL once finished */
	void *join;			/* a completion (park.h), or JOIN_DETACHED (coro.c) */
	void *arg;
	struct weft__local *locals;	/* coroutine-local values, by key slot */
	unsigned nlocals;
	struct weft__san san;
	struct weft_group *group;	/* the group it is a member of (group.c), or NULL */
	struct weft__list_link glink;	/* its link among the members, under the group's lock */
	unsigned live;			/* atomic: spawned and not yet finished (weft__co_each_live) */
	unsigned locks;
	uint64_t yield_due;		/* in the yield FIFO: the worker's dispatch count
					 * by which as many coroutines as its LIFO end held
					 * at the yield have run (weft__worker_push_yielder) */
	int64_t ready_at;		/* when it became runnable, if timed */
	char name[WEFT_NAME_MAX];	/* weft_set_name's copy, "" if none */
};

/* co becomes runnable now (the one stamp of every runnable period,
 * metrics.h), called by whoever is about to queue it: a spawn started, the
 * waker that won its park word, its own worker finishing a park a waker
 * notified (weft__park_finish), a yield; any thread. */
static inline void weft__co_runnable(struct weft_co *co)
{
	if (__builtin_expect(--weft__metrics_tick > weft__metrics_mask, 0))
		weft__metrics_stamp(co);
}

/* The scheduler's side: run co on w until it switches out, then finish the
 * transition it asked for (park, yield, exit). */
void weft__co_run(struct weft__worker *w, struct weft_co *co);

/* The coroutine's side: switch to the scheduler of the worker running co. */
void weft__co_switch_out(struct weft_co *co, int dying);

/* weft_spawn_with in two steps: a coroutine ready to run but not yet
 * scheduled, in *out (0; else -EPERM, -EINVAL or -ENOMEM), which the caller
 * may set up (a group adopts it), then its start. */
int weft__co_new(struct weft_co **out, void (*fn)(void *), void *arg, const weft_spawn_opts *opts);
void weft__co_start(struct weft_co *co);

/* Calls fn(co, arg) for every coroutine spawned and not finished, under the
 * stack pool's lock (so no stack is freed meanwhile; fn must not spawn).
 * Racy by design: a coroutine may finish, and its stack be reused by a new
 * one, while fn runs; fn's effect (a cancel, a line on stderr) must be
 * harmless then.  For weft_shutdown_until (runtime.c). */
void weft__co_each_live(void (*fn)(struct weft_co *co, void *arg), void *arg);
/* The live coroutines, counted for weft_stats: parked_by (those parked, by
 * cause; zeroed first) and the bytes of their stacks (in *live), of all
 * the pool's stacks (returned).  One walk of every stack under one hold of
 * the pool's lock, with racy reads: a gauge, but *live <= the total. */
uint64_t weft__co_census(uint64_t parked_by[WEFT_PARK_CAUSES], uint64_t *live);

/*
 * A coroutine's signals word: CO_CANCELLED, set by weft_cancel and never
 * cleared (every later call fails); CO_INTERRUPTED, weft_interrupt's
 * pending interrupt, which one wait takes and ends with EINTR (park.c).
 * Both in one word so that a wait reads them with one load, on the line
 * every park touches.
 */
enum { CO_CANCELLED = 1u, CO_INTERRUPTED = 2u };

/* Sets bit in co's signals: false if it was set already. */
static inline bool weft__co_signal_set(struct weft_co *co, unsigned bit)
{
	unsigned s = at_load_uint(&co->signals);
	while (!(s & bit)) {
		if (at_cas_uint(&co->signals, s, s | bit))
			return true;
		s = at_load_uint(&co->signals);
	}
	return false;
}

/* Clears bit in co's signals: true if this call cleared it. */
static inline bool weft__co_signal_take(struct weft_co *co, unsigned bit)
{
	unsigned s = at_load_uint(&co->signals);
	while (s & bit) {
		if (at_cas_uint(&co->signals, s, s & ~bit))
			return true;
		s = at_load_uint(&co->signals);
	}
	return false;
}

/* True when the calling coroutine has been cancelled (false on a thread):
 * every call that could block checks it first and fails with ECANCELED.
 * weft__co_cancelled_of takes weft_self(), for a caller that has it anyway
 * (a mutex lock: its holder id too). */
static inline bool weft__co_cancelled_of(const struct weft_co *co)
{
	return co && (at_load_uint(&co->signals) & CO_CANCELLED);
}
bool weft__co_cancelled(void);
/* The first checks of a public call that may wait, in this order: EINVAL
 * unless valid (the call's own check of its arguments), then ECANCELED if
 * the calling coroutine has been cancelled.  0 to go on, or -1 with errno
 * set, for the call to return as it is (errors.h: part of the boundary). */
int weft__co_wait_entry(bool valid);
/* The same for a call that takes from a source that may never run dry (a
 * channel's elements): in a coroutine it also spends a unit of its budget
 * before the cancel check (weft__worker_spend: a yield every
 * WEFT__WORKER_BUDGET-th call). */
int weft__co_take_entry(bool valid);

#endif
