/* SPDX-License-Identifier: MIT */
/* Adversarial scenes for the two pollers ($WEFT_POLLER, loop.h): each runs
 * with each poller, and what the shared poller does is what the worker
 * poller must do too ("the behaviour of every call is the same in both",
 * weft.h).  White-box: it reads which worker a coroutine runs on. */
#include "harness.h"
#include <errno.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "poller_test.h"
#include "worker.h"

/* A coroutine that keeps its worker busy with work of its own (a yield
 * loop never runs dry, so that worker never steals) until told to stop;
 * `where` says which worker it runs on. */
struct yielder {
	atomic_int stop;
	_Atomic(struct weft__worker *) where;
};

static void yield_loop(void *arg)
{
	struct yielder *y = arg;
	while (!atomic_load(&y->stop)) {
		atomic_store(&y->where, weft__worker_self());
		weft_yield();
	}
}

/* ------------------------------------------------------ stuck owner, busy helper */

/*
 * Worker A registers the fd and gets stuck (this coroutine, locked to it,
 * spins without yielding); worker B is awake and busy with a yield loop of
 * its own; a reader is parked on the fd.  The byte is written: with the
 * shared poller B's fairness turns harvest the shared epfd and run the
 * reader; with the worker poller only A's epfd has the fd and the
 * monitor's rescue wakes the reader (weft__loop_rescue).  It queued it on
 * A's ready FIFO before, and B, never out of work, never stole it: the
 * reader waited for as long as A was stuck.  Now the injection queue,
 * which B's fairness turns take.  Fails after 10 s (slack).
 */
static void stuck_owner_busy_helper(void *arg)
{
	(void)arg;
	CHECK(weft_lock_thread() == 0);
	int sv[2];
	socket_pair(sv);
	struct weft__worker *a = register_here(sv[0]);
	struct reader r = { .fd = sv[0] };
	uint64_t parks = stats_now().total.parks;
	weft_co *rco = go(read_one, &r);
	wait_parks(parks, 1);
	CHECK(weft__worker_self() == a);
	struct yielder y = { 0 };
	weft_co *yco = go(yield_loop, &y);
	/* no yield from here on: A runs nothing else, so B steals the loop */
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (atomic_load(&y.where) == NULL && weft_now() < give_up)
		;
	CHECK(atomic_load(&y.where) != NULL && atomic_load(&y.where) != a);
	CHECK(write(sv[1], "x", 1) == 1);
	give_up = weft_now() + slack(10000 * MS);
	while (!atomic_load(&r.done) && weft_now() < give_up)
		;
	bool served = atomic_load(&r.done);
	atomic_store(&y.stop, 1);
	if (!served)
		fprintf(stderr, "stuck_owner_busy_helper: the reader was not run in 10 s "
				"while its fd's loop was stuck and the other worker busy\n");
	join(rco);
	join(yco);
	CHECK(served);
	CHECK(r.got == 1);
	CHECK(weft_unlock_thread() == 0);
	CHECK(weft_close(sv[0]) == 0);
	CHECK(weft_close(sv[1]) == 0);
}

Test(poller_adv, shared_stuck_owner_busy_helper)
{
	run_with(WEFT_POLLER_SHARED, stuck_owner_busy_helper);
}

Test(poller_adv, worker_stuck_owner_busy_helper)
{
	run_with(WEFT_POLLER_WORKER, stuck_owner_busy_helper);
}

/* ------------------------------------------------------ stuck owner's timer, busy helper */

struct sleeper {
	_Atomic(struct weft__worker *) where;	/* the worker it slept on */
	atomic_int done;
};

static void sleep_briefly(void *arg)
{
	struct sleeper *s = arg;
	atomic_store(&s->where, weft__worker_self());
	CHECK(weft_sleep(weft_now() + MS) == 0);
	atomic_store(&s->done, 1);
}

/*
 * The timer twin of the scene above: a sleeper parks on worker A (its
 * deadline in A's heap), A gets stuck, B is busy with a yield loop.  Only
 * the monitor fires A's timers while A spins; it queued the sleeper on A's
 * ready FIFO before, where B, never out of work, never looked: the sleeper
 * waited for as long as A was stuck, with either poller.  Fails after 10 s
 * (slack).
 */
static void stuck_owner_timer_busy_helper(void *arg)
{
	(void)arg;
	CHECK(weft_lock_thread() == 0);
	struct weft__worker *a = weft__worker_self();
	struct sleeper s = { .where = NULL };
	uint64_t parks = stats_now().total.parks;
	weft_co *sco = go(sleep_briefly, &s);
	wait_parks(parks, 1);
	CHECK(atomic_load(&s.where) == a);	/* its deadline is in A's heap */
	struct yielder y = { 0 };
	weft_co *yco = go(yield_loop, &y);
	/* no yield from here on: A runs nothing else, so B steals the loop */
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (atomic_load(&y.where) == NULL && weft_now() < give_up)
		;
	CHECK(atomic_load(&y.where) != NULL && atomic_load(&y.where) != a);
	give_up = weft_now() + slack(10000 * MS);
	while (!atomic_load(&s.done) && weft_now() < give_up)
		;
	bool served = atomic_load(&s.done);
	atomic_store(&y.stop, 1);
	if (!served)
		fprintf(stderr, "stuck_owner_timer_busy_helper: the sleeper was not run in 10 s "
				"while its worker was stuck and the other worker busy\n");
	join(sco);
	join(yco);
	CHECK(served);
	CHECK(weft_unlock_thread() == 0);
}

Test(poller_adv, shared_stuck_owner_timer_busy_helper)
{
	run_with(WEFT_POLLER_SHARED, stuck_owner_timer_busy_helper);
}

Test(poller_adv, worker_stuck_owner_timer_busy_helper)
{
	run_with(WEFT_POLLER_WORKER, stuck_owner_timer_busy_helper);
}

/* ------------------------------------------------------ both directions, stuck owner */

struct writer {
	int fd;
	ssize_t got;
	atomic_int done;
};

static void write_one(void *arg)
{
	struct writer *w = arg;
	w->got = weft_write(w->fd, "w", 1, -1);
	atomic_store(&w->done, 1);
}

/* Fills fd's send buffer: the next write would block. */
static size_t fill(int fd)
{
	static char junk[4096];
	size_t n = 0;
	ssize_t r;
	while ((r = send(fd, junk, sizeof junk, MSG_DONTWAIT)) > 0)
		n += (size_t)r;
	CHECK(r == -1 && errno == EAGAIN);
	return n;
}

/* A reader and a writer of one fd, parked from the other worker, while the
 * fd's loop (this coroutine's worker) is stuck: the peer drains the
 * buffer and writes a byte; both must be woken (the rescue claims both
 * slots of one event). */
static void stuck_owner_both_directions(void *arg)
{
	(void)arg;
	CHECK(weft_lock_thread() == 0);
	int sv[2];
	socket_pair(sv);
	struct weft__worker *a = register_here(sv[0]);
	size_t filled = fill(sv[0]);
	struct reader r = { .fd = sv[0] };
	struct writer wr = { .fd = sv[0] };
	uint64_t parks = stats_now().total.parks;
	weft_co *rco = go(read_one, &r);
	weft_co *wco = go(write_one, &wr);
	wait_parks(parks, 2);
	CHECK(weft__worker_self() == a);
	static char sink[1 << 16];
	size_t drained = 0;
	while (drained < filled) {
		ssize_t n = read(sv[1], sink, sizeof sink);
		CHECK(n > 0);
		drained += (size_t)n;
	}
	CHECK(write(sv[1], "x", 1) == 1);
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (!(atomic_load(&r.done) && atomic_load(&wr.done)) && weft_now() < give_up)
		;
	CHECK(atomic_load(&r.done) && atomic_load(&wr.done));
	join(rco);
	join(wco);
	CHECK(r.got == 1 && wr.got == 1);
	CHECK(weft_unlock_thread() == 0);
	CHECK(weft_close(sv[0]) == 0);
	CHECK(weft_close(sv[1]) == 0);
}

Test(poller_adv, shared_stuck_owner_both_directions)
{
	run_with(WEFT_POLLER_SHARED, stuck_owner_both_directions);
}

Test(poller_adv, worker_stuck_owner_both_directions)
{
	run_with(WEFT_POLLER_WORKER, stuck_owner_both_directions);
}

/* ------------------------------------------------------ number reuse across loops */

struct on_other {
	int fd;
	struct weft__worker *not_on;
	_Atomic(struct weft__worker *) ran_on;
	ssize_t got;
};

/* Reads one byte of fd from a worker other than not_on (yields until it is
 * stolen there: the caller spins without yielding meanwhile). */
static void read_elsewhere(void *arg)
{
	struct on_other *o = arg;
	while (weft__worker_self() == o->not_on)
		weft_yield();
	atomic_store(&o->ran_on, weft__worker_self());
	char b;
	o->got = weft_read(o->fd, &b, 1, -1);
}

/* fd is registered on this worker and closed; a dup keeps its file (and a
 * registration keyed by another number) alive; the number, reused at once
 * by a new socket, is first waited on from the other worker.  Readiness of
 * the old file must not be taken for the new one's, and the new one's must
 * wake its reader. */
static void reuse_on_other_loop(void *arg)
{
	(void)arg;
	CHECK(weft_lock_thread() == 0);	/* a stays this coroutine's worker */
	int sv[2];
	socket_pair(sv);
	struct weft__worker *a = register_here(sv[0]);
	int keep = dup(sv[0]);
	CHECK(keep >= 0);
	CHECK(weft_close(sv[0]) == 0);
	int nv[2];
	socket_pair(nv);
	CHECK(nv[0] == sv[0]);
	struct on_other o = { .fd = nv[0], .not_on = a };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(read_elsewhere, &o);
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (!atomic_load(&o.ran_on) && weft_now() < give_up)
		;	/* no yield: the other worker steals it */
	CHECK(atomic_load(&o.ran_on) != NULL && atomic_load(&o.ran_on) != a);
	wait_parks(parks, 1);
	CHECK(write(sv[1], "old", 3) == 3);	/* the old file: no wake for nv[0] */
	CHECK(write(nv[1], "n", 1) == 1);
	join(co);
	CHECK(o.got == 1);
	char b[4];
	CHECK(read(keep, b, sizeof b) == 3);
	CHECK(close(keep) == 0);
	CHECK(weft_unlock_thread() == 0);
	CHECK(weft_close(nv[0]) == 0);
	CHECK(weft_close(nv[1]) == 0);
	CHECK(weft_close(sv[1]) == 0);
}

Test(poller_adv, shared_reuse_on_other_loop)
{
	run_with(WEFT_POLLER_SHARED, reuse_on_other_loop);
}

Test(poller_adv, worker_reuse_on_other_loop)
{
	run_with(WEFT_POLLER_WORKER, reuse_on_other_loop);
}

/* ------------------------------------------------------ shutdown with fds on several loops */

static int kept[2][2];	/* one pair registered on each worker, left open across runs */

struct registrar {
	int fd;
	_Atomic(struct weft__worker *) on;
};

static void register_there(void *arg)
{
	struct registrar *g = arg;
	atomic_store(&g->on, register_here(g->fd));
}

/* Registers kept[0][0] here and kept[1][0] from the other worker (this
 * coroutine spins without yielding meanwhile, so that worker steals the
 * registrar), and returns without closing them: the runtime stops with
 * fds in both loops. */
static void leave_registered(void *arg)
{
	(void)arg;
	CHECK(weft_lock_thread() == 0);
	struct weft__worker *a = register_here(kept[0][0]);
	struct registrar g = { .fd = kept[1][0] };
	weft_co *co = go(register_there, &g);
	int64_t give_up = weft_now() + slack(10000 * MS);
	while (!atomic_load(&g.on) && weft_now() < give_up)
		;
	CHECK(atomic_load(&g.on) != NULL && atomic_load(&g.on) != a);
	join(co);
	CHECK(stats_now().registered_fds == 2);
	CHECK(weft_unlock_thread() == 0);
}

/* The next run (either poller) starts with no registration: a read of
 * each kept fd registers it afresh and is woken by its byte. */
static void use_again(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2; i++) {
		struct reader r = { .fd = kept[i][0] };
		uint64_t parks = stats_now().total.parks;
		weft_co *co = go(read_one, &r);
		wait_parks(parks, 1);
		CHECK(write(kept[i][1], "k", 1) == 1);
		join(co);
		CHECK(r.got == 1);
		CHECK(weft_close(kept[i][0]) == 0);
		CHECK(weft_close(kept[i][1]) == 0);
	}
}

static void shutdown_then_again(int first, int second)
{
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, kept[0]) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, kept[1]) == 0);
	run_with(first, leave_registered);
	run_with(second, use_again);
}

Test(poller_adv, worker_shutdown_with_fds_then_shared)
{
	shutdown_then_again(WEFT_POLLER_WORKER, WEFT_POLLER_SHARED);
}

Test(poller_adv, worker_shutdown_with_fds_then_worker)
{
	shutdown_then_again(WEFT_POLLER_WORKER, WEFT_POLLER_WORKER);
}
