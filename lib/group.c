/* SPDX-License-Identifier: MIT */
/*
 * group.c — weft_group, a set of coroutines joined together (libdill's
 * bundle, Tokio's JoinSet, the coroutine side of Go's errgroup).
 *
 * A member is an ordinary coroutine, detached at its spawn, that knows its
 * group (co->group) and sits in the group's list of running members (list.h,
 * linked through co->glink, under the group's lock) from before its start
 * until it returns.  So the group joins its members as they finish: when a
 * member's function (and its coroutine-locals' destructors) have returned,
 * coro.c calls weft__group_leave, which unlinks it and counts it out under
 * the lock; the last one out claims every waiter of weft_group_wait and
 * weft_group_free (waitq.h), and wakes them after releasing the lock, its
 * last access to the group.  The coroutine then exits and frees its control
 * block itself, as a detached one does.  Hence the object-lifetime rule
 * (weft.h): a wait that returned 0 has seen the last member's lock release,
 * so weft_group_free may follow at once, even while that member is still
 * switching out.
 *
 * The handle weft_group_spawn returns is valid while the member runs: the
 * caller may weft_cancel it, or read its id or name, only while it knows the
 * member has not returned (it is the member itself, or the member waits on
 * something only the caller can release).  Once the member returns the
 * handle is freed; weft_join and weft_detach never apply to it.  To reach
 * members whose state is unknown, use weft_group_cancel.
 *
 * weft_group_count reads the count under the lock: a member counts from
 * before its start (link_member) until weft__group_leave.
 *
 * Cancellation: weft_group_cancel marks the group and calls weft_cancel on
 * each member in the list, under the lock (a listed member is not freed);
 * a member spawned after it starts cancelled.  Members may spawn members
 * (the group never empties while the spawner runs).  A member that waits
 * for, or frees, its own group would wait for itself: EDEADLK.
 * weft_group_free cancels, then waits without being cancellable (a
 * cancelled caller still waits: the members must not outlive the group).
 */
#include <errno.h>
#include <stdlib.h>

#include "atomic.h"
#include "coro.h"
#include "errors.h"
#include "group.h"
#include "list.h"
#include "waitq.h"
#include "weft.h"

struct weft_group {
	struct weft__lock lock;
	struct weft__waitq waiters;	/* weft_group_wait and weft_group_free callers */
	struct weft__list members;	/* running members, oldest first */
	size_t count;			/* how many */
	bool cancelled;			/* weft_group_cancel was called */
};

weft_group *weft_group_new(void)
{
	return weft__waitq_object_new(sizeof(weft_group));
}

/* Under the lock. */
static void link_member(weft_group *g, struct weft_co *co)
{
	weft__list_push(&g->members, &co->glink);
	g->count++;
}

static void unlink_member(weft_group *g, struct weft_co *co)
{
	weft__list_unlink(&g->members, &co->glink);
	g->count--;
}

weft_co *weft_group_spawn(weft_group *g, void (*fn)(void *), void *arg)
{
	return weft_group_spawn_with(g, fn, arg, NULL);
}

weft_co *weft_group_spawn_with(weft_group *g, void (*fn)(void *), void *arg,
			       const weft_spawn_opts *opts)
{
	if (!g) {
		weft__err_fail(EINVAL);
		return NULL;
	}
	struct weft_co *co;
	int r = weft__co_new(&co, fn, arg, opts);
	if (r < 0)
		return weft__err_result_null(r);
	weft_detach(co);	/* not started yet: always succeeds */
	co->group = g;
	weft__lock_acquire(&g->lock);
	if (g->cancelled)
		weft__co_signal_set(co, CO_CANCELLED);
	link_member(g, co);
	weft__lock_release(&g->lock);
	weft__co_start(co);
	return co;
}

void weft__group_leave(struct weft_co *co)
{
	weft_group *g = co->group;
	co->group = NULL;
	struct weft__wakes ws = { .head = NULL };
	weft__lock_acquire(&g->lock);
	unlink_member(g, co);
	if (g->count == 0)
		weft__waitq_claim_all(&g->waiters, 0, &ws);
	weft__lock_release(&g->lock);	/* the member's last access to g */
	weft__wakes_run(&ws);
}

/* Waits until g has no member: 0, or the wait's failure (ETIMEDOUT,
 * ECANCELED or EINTR if cancellable; a stray cancel or interrupt wake of
 * an uncancellable wait also returns, and the caller waits again). */
static int wait_empty(weft_group *g, int64_t deadline, bool cancellable)
{
	return weft__wait_zero(&g->lock, &g->count, &g->waiters, deadline, cancellable);
}

/* The caller is a member of g, so waiting for g would wait for itself. */
static bool own_group(weft_group *g)
{
	weft_co *self = weft_self();
	return self && self->group == g;
}

int weft_group_wait(weft_group *g, int64_t deadline)
{
	if (weft__co_wait_entry(g != NULL) != 0)
		return -1;
	if (own_group(g))
		return weft__err_fail(EDEADLK);
	int r = wait_empty(g, deadline, true);
	return r ? weft__err_fail(r) : 0;
}

ssize_t weft_group_count(weft_group *g)
{
	if (!g)
		return weft__err_fail(EINVAL);
	weft__lock_acquire(&g->lock);
	size_t n = g->count;
	weft__lock_release(&g->lock);
	return (ssize_t)n;
}

int weft_group_cancel(weft_group *g)
{
	if (!g)
		return weft__err_fail(EINVAL);
	weft__lock_acquire(&g->lock);
	g->cancelled = true;
	for (struct weft__list_link *l = g->members.head; l; l = l->next)
		weft_cancel(WEFT__LIST_ENTRY(l, struct weft_co, glink));
	weft__lock_release(&g->lock);
	return 0;
}

int weft_group_interrupt(weft_group *g)
{
	if (!g)
		return weft__err_fail(EINVAL);
	/* under the lock: a linked member has not returned, so its control
	 * block is alive (weft__group_leave unlinks under the lock) */
	weft__lock_acquire(&g->lock);
	for (struct weft__list_link *l = g->members.head; l; l = l->next)
		weft_interrupt(WEFT__LIST_ENTRY(l, struct weft_co, glink));
	weft__lock_release(&g->lock);
	return 0;
}

int weft_group_free(weft_group *g)
{
	if (!g)
		return weft__err_fail(EINVAL);
	if (own_group(g))
		return weft__err_fail(EDEADLK);
	weft_group_cancel(g);
	while (wait_empty(g, -1, false) != 0)
		;	/* a stray cancel or interrupt wake: wait again */
	free(g);
	return 0;
}
