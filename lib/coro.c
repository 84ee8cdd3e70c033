/* SPDX-License-Identifier: MIT */
/*
 * coro.c — coroutines: spawn, run, yield, exit, join and detach.
 *
 * Join: co->join is a completion (park.h) that co's finishing side completes
 * (after the last switch-out, in after_left), with one state of
 * our own, JOIN_DETACHED: weft_detach came first, and co frees itself when
 * it finishes.  Joiner and detacher find WEFT__COMPLETION_SET or put their value
 * in place of NULL; exactly one side frees the control block.  A joiner
 * woken by weft_cancel or by its deadline (weft_join_until) gives up, and
 * the target stays joinable.
 */
#include "coro.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "invariant.h"
#include "atomic.h"
#include "config.h"
#include "context.h"
#include "errors.h"
#include "fifo.h"
#include "group.h"
#include "local.h"
#include "overflow.h"
#include "park.h"
#include "queue.h"
#include "worker.h"

#define JOIN_DETACHED ((void *)4)	/* a slot marker (slot.h) */

/* ------------------------------------------------------ switching */

/* co becomes w's running coroutine; the switch to it follows. */
static void enter(struct weft__worker *w, struct weft_co *co)
{
	uint64_t word = at_load_64(&co->park_word);
	/* Queued once per wait, by the winner of its park word: runnable, or
	 * a yielder back from its FIFO. */
	WEFT__ASSERT(park_state(word) == CO_RUNNABLE || park_state(word) == CO_YIELDING);
	at_store_64(&co->park_word, park_word(park_gen(word), park_result(word), CO_RUNNING));
	co->worker = w;
	weft__count(&w->c.dispatches);	/* every dispatch, direct or not, comes here */
	at_store_64(&w->current_id, co->id);	/* the monitor reads these */
	at_store_ptr(&w->current_fn, (void *)co->fn);
	at_store_ptr((void **)&w->current, co);
	*w->errno_slot = co->saved_errno;
	if (co->timed)
		weft__metrics_dispatch(w, co);
}

_Static_assert(sizeof(struct weft_co) <= WEFT__STACK_PAYLOAD, "the control block fits the payload");
_Static_assert(offsetof(struct weft_co, timed) < 64,
	       "what every wake, dispatch and switch touches fits the first cache line");

/* The stack cache of worker w; NULL (the plain threads' one) for NULL. */
static struct weft__stack_cache *stacks_of(struct weft__worker *w)
{
	return w ? &w->stacks : NULL;
}

/* The control block lives in its stack's payload (stack.h): freeing it is
 * returning the stack, to the cache of w, the worker doing it (or NULL). */
static void co_free(struct weft__worker *w, struct weft_co *co)
{
	struct weft__stack *stack = co->stack;
	co->stack = NULL;	/* a cached stack holds no coroutine (tools/gdb/weft.py) */
	weft__stack_note_sp(stack, (char *)co - co->depth);
	weft__stack_put(stacks_of(w), stack);
}

static void co_finish(struct weft__worker *w, struct weft_co *co)
{
	at_store_uint(&co->live, 0);
	san_destroy(&co->san);
	weft__count(&w->c.finished);
	if (!weft__completion_set(&co->join, JOIN_DETACHED))
		co_free(w, co);
}

/* After co's switch-out, on the stack it switched to (the scheduler's or a
 * successor's): co's stack is idle now. */
static void after_left(struct weft__worker *w, struct weft_co *co)
{
	uint32_t depth = (uint32_t)((char *)co - (char *)co->sp);	/* co is the top */
	if (depth > co->depth)
		co->depth = depth;
	if (!co->guarded && !weft__stack_canary_intact(co->stack))
		weft__overflow_report(co);
	switch (park_state(at_load_64(&co->park_word))) {
	case CO_YIELDING:
		weft__worker_push_yielder(w, co);
		break;
	case CO_PARKING:
	case CO_NOTIFIED:	/* woken while still switching out */
		weft__count(&w->c.parks);
		if (weft__park_finish(co))
			weft__schedule(co);
		break;
	case CO_EXITING:
		co_finish(w, co);
		break;
	default:
		abort();	/* a coroutine can only leave in the states above */
	}
}

/* A coroutine resumed by a direct switch first finishes the switch-out of
 * the one it replaced, on its own stack. */
static void finish_left(struct weft__worker *w)
{
	struct weft_co *left = w->left;
	if (!left)
		return;
	w->left = NULL;
	after_left(w, left);
}

/*
 * co leaves the CPU.  If w has a successor ready (weft__worker_successor:
 * what the scheduler would dispatch next) co switches straight to it, and
 * the successor does what the scheduler would have done after the switch
 * (after_left): a ping-pong hand-off is then two switches, not four.  Either
 * way co's park is finished only once co's stack is no longer in use.
 */
void weft__co_switch_out(struct weft_co *co, int dying)
{
	struct weft__worker *w = co->worker;
	co->saved_errno = *w->errno_slot;
	if (w->turn_at)
		weft__metrics_switch_out(w);
	struct weft_co *next = weft__worker_successor(w);
	if (next) {
		enter(w, next);
		w->left = co;
		san_switch_begin(&co->san, &next->san, dying);
		weft__ctx_switch(&co->sp, next->sp);
	} else {
		san_switch_begin(&co->san, &w->sched_san, dying);
		weft__ctx_switch(&co->sp, w->sched_sp);
	}
	san_switch_end(&co->san);
	finish_left(co->worker);	/* enter() set the worker resuming us */
}

/* Runs co, and the coroutines it switches to directly, until one of them
 * switches back to the scheduler. */
void weft__co_run(struct weft__worker *w, struct weft_co *co)
{
	enter(w, co);
	san_switch_begin(&w->sched_san, &co->san, false);
	weft__ctx_switch(&w->sched_sp, co->sp);
	san_switch_end(&w->sched_san);
	struct weft_co *last = w->current;
	at_store_ptr((void **)&w->current, NULL);
	after_left(w, last);
}

static void co_main(void *arg)
{
	struct weft_co *co = arg;
	san_switch_end(&co->san);
	finish_left(co->worker);
	co->fn(co->arg);
	if (co->locals)
		weft__locals_destroy(co);
	if (co->group)
		weft__group_leave(co);
	uint64_t word = at_load_64(&co->park_word);
	WEFT__ASSERT(park_state(word) == CO_RUNNING);
	at_store_64(&co->park_word, park_word(park_gen(word), 0, CO_EXITING));
	weft__co_switch_out(co, 1);
	abort();	/* never resumed */
}

/* ------------------------------------------------------ public calls */

/* co's name: a copy of name, truncated; "" for NULL. */
static void copy_name(struct weft_co *co, const char *name)
{
	size_t len = name ? strnlen(name, WEFT_NAME_MAX - 1) : 0;
	if (len)	/* a plain spawn: no call into libc */
		memcpy(co->name, name, len);
	co->name[len] = '\0';
}

/* The stack size opts asks for, rounded: 0 for the configured one (no
 * opts, or 0 in it), -EINVAL out of range. */
static ssize_t opts_stack_size(const weft_spawn_opts *opts)
{
	if (!opts || !opts->stack_size)
		return 0;
	if (opts->stack_size > WEFT__CONFIG_STACK_MAX)
		return -EINVAL;
	size_t size = weft__config_page_round(opts->stack_size);
	return (ssize_t)(size < WEFT__CONFIG_STACK_MIN ? WEFT__CONFIG_STACK_MIN : size);
}

weft_co *weft_spawn(void (*fn)(void *), void *arg)
{
	return weft_spawn_with(fn, arg, NULL);
}

/* weft__co_new's body, inline in weft_spawn_with (a spawn's fast path).
 * The fields that weft__co_each_live's callback may read or write while the
 * stack is being reused (signals, park_word, id, fn) are stored
 * atomically here (relaxed: plain moves). */
static inline __attribute__((always_inline)) int co_new(struct weft_co **out, void (*fn)(void *),
							 void *arg, const weft_spawn_opts *opts)
{
	if (!weft__rt_accepting())
		return -EPERM;
	ssize_t size = opts_stack_size(opts);
	if (!fn || size < 0)
		return -EINVAL;
	struct weft__worker *w = weft__worker_self();
	struct weft__stack *stack = size ? weft__stack_get_sized(stacks_of(w), (size_t)size)
					 : weft__stack_get(stacks_of(w));
	if (!stack)
		return -ENOMEM;
	struct weft_co *co = weft__stack_payload(stack);
	co->stack = stack;
	co->depth = 0;
	co->guarded = weft__stack_guarded(stack);
	at_store_ptr((void **)&co->fn, (void *)fn);
	co->arg = arg;
	co->join = NULL;
	co->next = NULL;
	co->worker = w;
	co->saved_errno = 0;
	/* a weft_shutdown_until past its deadline cancels every spawn */
	at_store_uint(&co->signals, at_load_uint(&weft__rt.cancel_all) ? CO_CANCELLED : 0);
	co->locals = NULL;
	co->nlocals = 0;
	co->group = NULL;
	co->pinned = false;
	co->locks = 0;
	copy_name(co, opts ? opts->name : NULL);
	at_store_64(&co->park_word, park_word(0, 0, CO_RUNNABLE));
	at_store_64(&co->id, weft__worker_next_id(w));
	co->sp = weft__ctx_make(weft__stack_top(stack), co_main, co);
	san_init(&co->san, weft__stack_base(stack), weft__stack_usable(stack), true);
	*out = co;
	return 0;
}

int weft__co_new(struct weft_co **out, void (*fn)(void *), void *arg, const weft_spawn_opts *opts)
{
	return co_new(out, fn, arg, opts);
}

weft_co *weft_spawn_with(void (*fn)(void *), void *arg, const weft_spawn_opts *opts)
{
	struct weft_co *co;
	int r = co_new(&co, fn, arg, opts);
	if (r < 0)
		return weft__err_result_null(r);
	weft__co_start(co);
	return co;
}

void weft__co_start(struct weft_co *co)
{
	struct weft__worker *w = co->worker;
	if (w)
		weft__count(&w->c.spawned);
	else
		at_faa_64(&weft__rt.ext_spawned, 1);
	at_store_uint(&co->live, 1);
	weft__co_runnable(co);
	weft__schedule(co);
}

struct each_live {
	void (*fn)(struct weft_co *co, void *arg);
	void *arg;
};

static void visit(void *payload, void *arg)
{
	struct weft_co *co = payload;
	const struct each_live *e = arg;
	if (at_load_uint(&co->live))
		e->fn(co, e->arg);
}

/* A parked coroutine is one whose scheduler finished its switch-out to
 * wait and that no waker has woken yet: PARKED.  Not PARKING: from its
 * arming to that CAS it may still run (publishing the wait), and a spawn
 * leaves its stack's previous park_cause in place.  The cause is stored
 * before the arming store (weft__waiter_init) and the CAS to PARKED reads
 * that store, so the seq_cst load that reads PARKED here happens after the
 * cause's store: the relaxed load reads that wait's cause or, if it was
 * woken and waits again meanwhile, the next wait's (design.md, Metrics). */
static bool census(const void *payload, void *arg)
{
	const struct weft_co *co = payload;
	uint64_t *parked_by = arg;
	if (!at_load_uint((unsigned *)&co->live))
		return false;
	unsigned st = park_state(at_load_64((uint64_t *)&co->park_word));
	unsigned cause = __atomic_load_n(&co->park_cause, __ATOMIC_RELAXED);
	if (st == CO_PARKED && cause < WEFT_PARK_CAUSES)
		parked_by[cause]++;
	return true;
}

uint64_t weft__co_census(uint64_t parked_by[WEFT_PARK_CAUSES], uint64_t *live)
{
	memset(parked_by, 0, WEFT_PARK_CAUSES * sizeof *parked_by);
	return weft__stack_pool_bytes(census, parked_by, live);
}

void weft__co_each_live(void (*fn)(struct weft_co *co, void *arg), void *arg)
{
	struct each_live e = { fn, arg };
	weft__stack_each(visit, &e);
}

/* weft_join_until's body, inline in both calls. */
static inline __attribute__((always_inline)) int join(weft_co *co, int64_t deadline)
{
	if (weft__co_wait_entry(co && co != weft_self()) != 0)
		return -1;
	int r = weft__completion_wait(&co->join, true, deadline, WEFT_PARK_JOIN);
	if (r != 0)
		return weft__err_fail(r);
	co_free(weft__worker_self(), co);
	return 0;
}

int weft_join(weft_co *co)
{
	return join(co, -1);
}

int weft_join_until(weft_co *co, int64_t deadline)
{
	return join(co, deadline);
}

bool weft__co_cancelled(void)
{
	return weft__co_cancelled_of(weft_self());
}

int weft__co_wait_entry(bool valid)
{
	if (!valid)
		return weft__err_fail(EINVAL);
	return weft__co_cancelled() ? weft__err_fail(ECANCELED) : 0;
}

int weft__co_take_entry(bool valid)
{
	if (!valid)
		return weft__err_fail(EINVAL);
	struct weft__worker *w = weft__worker_self();
	if (!w || !w->current)	/* a plain thread */
		return 0;
	w = weft__worker_spend(w);	/* its budget (worker.h) */
	return at_load_uint(&w->current->signals) & CO_CANCELLED ? weft__err_fail(ECANCELED) : 0;
}

int weft_cancel(weft_co *co)
{
	if (!co)
		return weft__err_fail(EINVAL);
	/* The flag first (a full fence): a wait armed after this sees it in
	 * weft__waiter_wait; one armed before is woken here. */
	weft__co_signal_set(co, CO_CANCELLED);
	weft__park_cancel(co);	/* not parked: it will see the flag */
	return 0;
}

int weft_interrupt(weft_co *co)
{
	if (!co)
		return weft__err_fail(EINVAL);
	weft__park_interrupt(co);
	return 0;
}

int weft_detach(weft_co *co)
{
	if (!co)
		return weft__err_fail(EINVAL);
	if (at_cas_ptr(&co->join, NULL, JOIN_DETACHED))
		return 0;
	if (at_load_ptr(&co->join) != WEFT__COMPLETION_SET)
		return weft__err_fail(EINVAL);
	co_free(weft__worker_self(), co);
	return 0;
}

void weft_yield(void)
{
	weft_co *co = weft_self();
	if (!co) {
		sched_yield();
		return;
	}
	uint64_t word = at_load_64(&co->park_word);
	WEFT__ASSERT(park_state(word) == CO_RUNNING);
	at_store_64(&co->park_word, park_word(park_gen(word), 0, CO_YIELDING));
	weft__co_runnable(co);
	weft__co_switch_out(co, 0);
}

void weft_consume_budget(void)
{
	struct weft__worker *w = weft__worker_self();
	if (w && w->current)
		weft__worker_spend(w);
}

uint64_t weft_co_id(const weft_co *co)
{
	return co ? co->id : 0;
}

int weft_set_name(const char *name)
{
	weft_co *co = weft_self();
	if (!co)
		return weft__err_fail(EPERM);
	copy_name(co, name);
	return 0;
}

const char *weft_co_name(const weft_co *co)
{
	return co ? co->name : "";
}
