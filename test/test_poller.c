/* SPDX-License-Identifier: MIT */
/* The two pollers ($WEFT_POLLER, weft_config.poller; loop.h), white-box:
 * where an fd is registered, a waiter woken while its fd's loop is stuck,
 * and a close while a waiter is parked.  Every scene runs with each poller,
 * whatever the environment says. */
#include "harness.h"
#include <errno.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "atomic.h"
#include "poller_test.h"
#include "fdtable.h"
#include "loop.h"
#include "worker.h"

/* Whether fd is in worker w's own epoll instance: adding it again there is
 * EEXIST (else the probe's registration is taken out again). */
static bool in_own_epfd(struct weft__worker *w, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) == 0) {
		CHECK(epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL) == 0);
		return false;
	}
	CHECK(errno == EEXIST);
	return true;
}

/* ------------------------------------------------------ registration */

/* worker: in the first waiter's own epfd, owned by that worker, and in no
 * other; shared: in no worker's own epfd (the shared one has it). */
static void registered_where(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	struct weft__worker *w = register_here(sv[0]);
	struct weft__fd *e = weft__fd_find(sv[0]);
	CHECK(e && at_load_uint(&e->owner) == w->index + 1);
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__worker *o = &weft__rt.workers[i];
		CHECK(in_own_epfd(o, sv[0]) == (poller == WEFT_POLLER_WORKER && o == w));
	}
	CHECK(weft__loop_nfds() == 1);
	CHECK(at_load_uint(&w->nfds) == (poller == WEFT_POLLER_WORKER ? 1u : 0u));
	CHECK(weft_close(sv[0]) == 0);
	CHECK(weft__loop_nfds() == 0 && at_load_uint(&w->nfds) == 0);
	CHECK(weft_close(sv[1]) == 0);
}

Test(poller, shared_registers_in_the_shared_epfd)
{
	run_with(WEFT_POLLER_SHARED, registered_where);
}

Test(poller, worker_registers_on_the_first_waiters_loop)
{
	run_with(WEFT_POLLER_WORKER, registered_where);
}

/* ------------------------------------------------------ a stuck loop */

/* The fd is registered on this coroutine's worker, which it is locked to;
 * a reader parks on it; then this coroutine makes the byte readable and
 * spins, never yielding, until the reader has run: the loop that owns the
 * fd (worker) or the only worker awake (shared) is stuck, and only the
 * monitor's rescue (weft__loop_rescue) or the poller it asks an idle
 * worker to hold (weft__loop_want_poller) gets the reader woken and
 * stolen.  Fails after 10 s (slack) without. */
static void stuck_owner(void *arg)
{
	(void)arg;
	CHECK(weft_lock_thread() == 0);
	int sv[2];
	socket_pair(sv);
	struct weft__worker *w = register_here(sv[0]);
	struct reader r = { .fd = sv[0] };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(read_one, &r);
	wait_parks(parks, 1);
	CHECK(weft__worker_self() == w);
	CHECK(write(sv[1], "x", 1) == 1);
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (!atomic_load(&r.done) && weft_now() < give_up)
		;
	CHECK(atomic_load(&r.done));	/* else nobody served the stuck loop's fd */
	join(co);
	CHECK(r.got == 1);
	CHECK(weft_unlock_thread() == 0);
	CHECK(weft_close(sv[0]) == 0);
	CHECK(weft_close(sv[1]) == 0);
}

Test(poller, shared_wakes_a_waiter_while_its_loop_is_stuck)
{
	run_with(WEFT_POLLER_SHARED, stuck_owner);
}

Test(poller, worker_wakes_a_waiter_while_its_loop_is_stuck)
{
	run_with(WEFT_POLLER_WORKER, stuck_owner);
}

/* ------------------------------------------------------ close */

/* A reader parked on an fd that this coroutine registered: the close ends
 * its call ECANCELED and takes the fd out of its loop; the fd's number,
 * reused at once, registers afresh and carries data. */
static void close_parked(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	struct weft__worker *w = register_here(sv[0]);
	struct reader r = { .fd = sv[0] };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(read_one, &r);
	wait_parks(parks, 1);
	CHECK(weft_close(sv[0]) == 0);
	join(co);
	CHECK(r.got == -1 && r.err == ECANCELED);
	CHECK(weft__loop_nfds() == 0 && at_load_uint(&w->nfds) == 0);
	int again[2];
	socket_pair(again);
	CHECK(again[0] == sv[0]);	/* the lowest free number */
	struct reader r2 = { .fd = again[0] };
	parks = stats_now().total.parks;
	co = go(read_one, &r2);
	wait_parks(parks, 1);
	CHECK(weft_write(again[1], "y", 1, -1) == 1);
	join(co);
	CHECK(r2.got == 1);
	CHECK(weft_close(again[0]) == 0);
	CHECK(weft_close(again[1]) == 0);
	CHECK(weft_close(sv[1]) == 0);
}

Test(poller, shared_close_while_parked)
{
	run_with(WEFT_POLLER_SHARED, close_parked);
}

Test(poller, worker_close_while_parked)
{
	run_with(WEFT_POLLER_WORKER, close_parked);
}
