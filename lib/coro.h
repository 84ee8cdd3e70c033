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

#include "sanitize.h"
#include "stack.h"
#include "weft.h"

struct weft__worker;
struct weft__local;

struct weft_co {
	void *sp;			/* saved stack pointer while switched out */
	uint64_t park_word;		/* atomic: generation | wake result | state */
	struct weft__worker *worker;	/* the worker running it, or that ran it last */
	struct weft_co *next;		/* link in a yield or injection queue */
	void (*fn)(void *);
	void *arg;
	struct weft__stack *stack;	/* NULL once finished */
	void *join;			/* a completion (park.h), or JOIN_DETACHED (coro.c) */
	uint64_t id;
	int saved_errno;		/* errno follows the coroutine across workers */
	unsigned cancelled;		/* atomic: weft_cancel was called */
	struct weft__local *locals;	/* coroutine-local values, by key slot */
	unsigned nlocals;
	struct weft__san san;
	char name[WEFT_NAME_MAX];	/* weft_set_name's copy, "" if none */
};

/* The scheduler's side: run co on w until it switches out, then finish the
 * transition it asked for (park, yield, exit). */
void weft__co_run(struct weft__worker *w, struct weft_co *co);

/* The coroutine's side: switch to the scheduler of the worker running co. */
void weft__co_switch_out(struct weft_co *co, int dying);

/* True when the calling coroutine has been cancelled (false on a thread):
 * every call that could block checks it first and fails with ECANCELED. */
bool weft__cancelled(void);

#endif
