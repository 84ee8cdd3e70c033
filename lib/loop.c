/* SPDX-License-Identifier: MIT */
/*
 * loop.c — the runtime's poller, shared or per worker, and the workers'
 * sleeps (see loop.h), fd registration and the readiness side of the fd
 * slot protocol (fdtable.h).
 */
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "clock.h"
#include "eventfd.h"
#include "fdtable.h"
#include "idle.h"
#include "monitor.h"
#include "park.h"
#include "sys.h"
#include "timer.h"
#include "uring.h"
#include "weft.h"
#include "worker.h"

/* epoll data of a worker's wake-up eventfd in its own epfd, and of the
 * poller's kick in the shared one (event_tag never makes them: fd -1, -2). */
static const uint64_t TOKEN_TAG = UINT64_MAX;
static const uint64_t KICK_TAG = UINT64_MAX - 1;
/* A worker's ring's eventfd (uring.c): RING_TAG + the worker's index.  An
 * fd's tag is below it: its generation is a multiple of FD_GEN_STEP while
 * it is registered, so at most 0xfffffffc << 32 | fd. */
static const uint64_t RING_TAG = 0xfffffffeull << 32;

/* The poller (loop.h). */
static struct {
	int mode;		/* WEFT_POLLER_SHARED or WEFT_POLLER_WORKER */
	int epfd;		/* shared: every registered fd, edge-triggered; kick */
	int kick;		/* shared: eventfd, level-triggered: wakes the holder */
	unsigned holder;	/* atomic: index + 1 of the worker asleep in epfd, or 0 */
	unsigned wanted;	/* atomic: the monitor's last sample saw a worker stuck */
	unsigned nfds;		/* atomic: fds registered, in every loop */
	unsigned rings;		/* atomic: rings' eventfds watched (uring.c) */
} io = { .mode = WEFT_POLLER_SHARED, .epfd = -1, .kick = -1 };

void weft__loop_select(int mode)
{
	io.mode = mode;
}

int weft__loop_poller(void)
{
	return io.mode;
}

static bool per_worker(void)
{
	return io.mode == WEFT_POLLER_WORKER;
}

/*
 * Whether a ring's completion wakes its owner only.  The kernel posts a
 * completion through task work on the thread that submitted the SQE,
 * which wakes that thread from any sleep (EINTR: uring.c), and the ring's
 * eventfd wakes whoever sleeps on the epfd that watches it.  With the
 * worker poller those are one thread, the owner (its own epfd), as they
 * are with one worker; with the shared poller and more, the owner asleep
 * off the poller wakes for nothing beside the holder, per completion
 * (stats::a_wake_that_readies_one_coroutine_leaves_the_other_worker_asleep
 * counted 201 such wakes in 200 reads).  Socket transfers go to the rings
 * only where this holds (io.c).
 */
bool weft__loop_ring_wakes_owner(void)
{
	return per_worker() || weft__rt.nworkers == 1;
}

/* The epoll instance that holds the fds w registers, and that w harvests. */
static int fds_epfd(struct weft__worker *w)
{
	return per_worker() ? w->epfd : io.epfd;
}

/* Whether anything is in the shared epfd beside the kick: a poller is
 * needed. */
static bool watching(void)
{
	return at_load_uint(&io.nfds) != 0 || at_load_uint(&io.rings) != 0;
}

/* Whether anything is registered where w harvests: with the worker
 * poller, its fds and its ring's eventfd (set before the workers and the
 * monitor start: weft__loop_watch_ring). */
static bool has_fds(struct weft__worker *w)
{
	if (per_worker())
		return at_load_uint(&w->nfds) != 0 || w->ring;
	return watching();
}

int weft__loop_shared_init(void)
{
	io.holder = io.wanted = io.nfds = io.rings = 0;
	if (per_worker())
		return 0;	/* each worker's own epfd serves */
	io.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (io.epfd < 0)
		return -errno;
	io.kick = weft__eventfd_open();
	if (io.kick < 0)
		return io.kick;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = KICK_TAG };
	return epoll_ctl(io.epfd, EPOLL_CTL_ADD, io.kick, &ev) == 0 ? 0 : -errno;
}

/* The ring's eventfd goes where w's fds go: the shared epfd, or w's own
 * with the worker poller (there is no shared one then), whose harvests,
 * sleeps and the monitor's rescue of a stuck w reap it. */
int weft__loop_watch_ring(struct weft__worker *w, int evfd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u64 = RING_TAG + w->index };
	if (epoll_ctl(fds_epfd(w), EPOLL_CTL_ADD, evfd, &ev) != 0)
		return -errno;
	if (!per_worker())
		at_faa_uint(&io.rings, 1);
	return 0;
}

/* epoll data: the fd and its entry's generation, so that an event queued
 * before a close cannot be taken for one of the fd number's next owner. */
static uint64_t event_tag(int fd, unsigned gen)
{
	return (uint64_t)gen << 32 | (uint32_t)fd;
}

/* evfd is level-triggered in epfd: a token stays visible until its worker
 * drains it (see loop.h). */
int weft__loop_init(struct weft__worker *w)
{
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		return -errno;
	w->evfd = weft__eventfd_open();
	if (w->evfd < 0)
		return w->evfd;
	int r = weft__timers_init(&w->timers, w);
	if (r < 0)
		return r;
	w->timers_ready = true;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TOKEN_TAG };
	return epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) == 0 ? 0 : -errno;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void weft__loop_shared_fini(void)
{
	close_fd(&io.epfd);
	close_fd(&io.kick);
}

void weft__loop_fini(struct weft__worker *w)
{
	close_fd(&w->epfd);
	close_fd(&w->evfd);
	if (w->timers_ready)
		weft__timers_fini(&w->timers);
	w->timers_ready = false;
}

/* ------------------------------------------------------ registration */

/* 0 or a negative errno; *was_blocking: whether it had to clear
 * O_NONBLOCK (for weft_release). */
static int make_nonblocking(int fd, bool *was_blocking)
{
	int fl = weft__sys_fcntl(fd, F_GETFL, 0);	/* never the hooks' fcntl (sys.h) */
	if (fl < 0)
		return -errno;
	*was_blocking = !(fl & O_NONBLOCK);
	if (fl & O_NONBLOCK)
		return 0;
	return weft__sys_fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 ? 0 : -errno;
}

/* Registers fd in w's poller (e's owner word says FD_OWNER_BUSY: we are
 * the registrar). */
static int register_fd(struct weft__worker *w, struct weft__fd *e, int fd)
{
	int epfd = fds_epfd(w);
	struct epoll_event ev = {
		.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
		.data.u64 = event_tag(fd, at_load_uint(&e->gen)),
	};
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -errno;
	int type = 0;
	socklen_t len = sizeof type;
	e->flags = 0;
	if (S_ISSOCK(st.st_mode))
		e->flags = getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM
				   ? FD_SOCKET | FD_STREAM : FD_SOCKET;
	at_store_uint(&e->drained, 0);
	e->blocking = false;
	at_store_uint(&e->hangup, 0);
	at_store_uint(&e->nowait_off[FD_SLOT_IN], 0);
	at_store_uint(&e->nowait_off[FD_SLOT_OUT], 0);
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
		/* epoll cannot watch them (EPERM): io.c's file path serves them */
		int fl = weft__sys_fcntl(fd, F_GETFL, 0);
		if (fl < 0)
			return -errno;
		e->flags = FD_FILE | FD_NO_POLL | ((fl & O_DIRECT) ? FD_DIRECT : 0);
		return 0;
	}
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		if (errno != EPERM)
			return -errno;
		e->flags |= FD_NO_POLL;	/* another file epoll refuses: never EAGAIN */
		return 0;
	}
	int r = make_nonblocking(fd, &e->blocking);
	if (r < 0) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		return r;
	}
	at_faa_uint(&io.nfds, 1);
	if (per_worker())
		at_faa_uint(&w->nfds, 1);
	return 0;
}

int weft__loop_register(struct weft__fd *e, int fd)
{
	for (;;) {
		unsigned owner = at_load_uint(&e->owner);
		if (owner == 0 && at_cas_uint(&e->owner, 0, FD_OWNER_BUSY))
			break;
		if (owner != 0 && owner != FD_OWNER_BUSY)
			return 0;
		if (owner == FD_OWNER_BUSY)
			sched_yield();	/* another coroutine is registering it */
	}
	struct weft__worker *w = weft__worker_self();
	int r = register_fd(w, e, fd);
	if (r < 0) {
		at_store_uint(&e->owner, 0);
		return r;
	}
	at_fence_release();	/* flags before owner */
	at_store_uint(&e->owner, w->index + 1);
	return 0;
}

void weft__loop_unregister(struct weft__fd *e, int fd)
{
	if (!(e->flags & FD_NO_POLL)) {
		struct weft__worker *w = &weft__rt.workers[at_load_uint(&e->owner) - 1];
		epoll_ctl(fds_epfd(w), EPOLL_CTL_DEL, fd, NULL);
		at_fas_uint(&io.nfds, 1);
		if (per_worker())
			at_fas_uint(&w->nfds, 1);
	}
	/* no readiness or turn carries over (no call is left: the queues are
	 * empty) */
	at_store_ptr(&e->slot[FD_SLOT_IN], NULL);
	at_store_ptr(&e->slot[FD_SLOT_OUT], NULL);
	e->flags = 0;
	at_store_uint(&e->owner, 0);
}

/* ------------------------------------------------------ readiness */

static void fd_event(struct weft__worker *w, uint64_t tag, uint32_t events)
{
	struct weft__fd *e = weft__fd_find((int)(uint32_t)tag);
	if (!e || at_load_uint(&e->gen) != (unsigned)(tag >> 32))
		return;		/* the fd was closed since */
	bool in = events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR);
	if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		at_store_uint(&e->hangup, 1);	/* before the wake: see park_if_drained */
	bool out = events & (EPOLLOUT | EPOLLHUP | EPOLLERR);
	bool rq = false, wq = false;
	struct weft__waiter *r = in ? weft__fd_slot_claim(&e->slot[FD_SLOT_IN], true, &rq) : NULL;
	struct weft__waiter *wr = out ? weft__fd_slot_claim(&e->slot[FD_SLOT_OUT], true, &wq) : NULL;
	/* a waiter with others queued behind gets the turn with its wake */
	int rturn = rq ? FD_WAKE_TURN(WEFT_IN) : 0, wturn = wq ? FD_WAKE_TURN(WEFT_OUT) : 0;
	if (r && r == wr) {	/* one weft_wait(fd, WEFT_IN | WEFT_OUT) */
		bool woke = weft__waiter_wake_ready(
			r, WEFT__PARK_WAKE_READY | WEFT_IN | WEFT_OUT | rturn | wturn, w);
		weft__fd_slot_release(e, FD_SLOT_IN, rq, woke, true);
		weft__fd_slot_release(e, FD_SLOT_OUT, wq, woke, true);
		return;
	}
	if (r) {
		bool woke = weft__waiter_wake_ready(r, WEFT__PARK_WAKE_READY | WEFT_IN | rturn, w);
		weft__fd_slot_release(e, FD_SLOT_IN, rq, woke, true);
	}
	if (wr) {
		bool woke = weft__waiter_wake_ready(wr, WEFT__PARK_WAKE_READY | WEFT_OUT | wturn, w);
		weft__fd_slot_release(e, FD_SLOT_OUT, wq, woke, true);
	}
	/* (claimed here rather than one slot at a time: one waiter in both
	 * slots gets one wake with both events) */
}

/*
 * Dispatches n harvested events of w's poller: fd readiness to its
 * waiters.  The kick is the holder's to drain (DRAIN_KICK: w slept in the
 * shared epfd): a harvest without blocking leaves it, so that it cannot
 * take a kick from under a holder asleep (epoll would find nothing and put
 * the holder back to sleep).  The wake-up token, in w's own epfd with the
 * worker poller, is drained by w awake (DRAIN_TOKEN): a write still there
 * was meant for a sleep that has ended (see weft__loop_take_token); the
 * monitor's rescue leaves it to w.  Returns the number of fd events.
 */
enum { DRAIN_KICK = 1, DRAIN_TOKEN = 2 };

static int dispatch(struct weft__worker *w, struct epoll_event *ev, int n, unsigned drain)
{
	int fds = 0;
	for (int i = 0; i < n; i++) {
		uint64_t tag = ev[i].data.u64;
		if (tag < RING_TAG) {
			fd_event(w, tag, ev[i].events);
			fds++;
		} else if (tag < KICK_TAG) {
			weft__uring_reap((unsigned)(tag - RING_TAG));
			fds++;
		} else if (tag == KICK_TAG && (drain & DRAIN_KICK)) {
			weft__eventfd_drain(io.kick);
		} else if (tag == TOKEN_TAG && (drain & DRAIN_TOKEN)) {
			weft__eventfd_drain(w->evfd);
		}
	}
	return fds;
}

/* Harvests one batch of w's poller without blocking, w awake (see
 * weft__loop_harvest_more for the rest). */
static int harvest(struct weft__worker *w)
{
	struct epoll_event ev[WEFT__LOOP_BATCH];
	int n = epoll_wait(fds_epfd(w), ev, WEFT__LOOP_BATCH, 0);
	w->harvest_full = n == WEFT__LOOP_BATCH;
	return dispatch(w, ev, n > 0 ? n : 0, DRAIN_TOKEN);
}

/*
 * The monitor's rescue of a stuck worker w with the worker poller: nobody
 * else harvests w's epfd, so it harvests it, every batch, without
 * blocking.  What it wakes goes to the injection queue, the monitor being
 * no worker (weft__schedule_ready), where an idle worker notified for it
 * or a busy one's fairness turn takes it.  It touches none of w's own
 * fields: w may come back meanwhile and harvest too (epoll hands each
 * event to one harvester; the slot protocol takes concurrent wakers:
 * fdtable.h).
 */
void weft__loop_rescue(struct weft__worker *w)
{
	if (!per_worker() || !has_fds(w))
		return;
	struct epoll_event ev[WEFT__LOOP_BATCH];
	int n;
	do {
		n = epoll_wait(w->epfd, ev, WEFT__LOOP_BATCH, 0);
		dispatch(w, ev, n > 0 ? n : 0, 0);
	} while (n == WEFT__LOOP_BATCH);
}

/* The harvest's count, and what the POLL_NS turns go by: its time, and
 * the ready FIFO's tail if it woke something (to the FIFO's back). */
static bool count_harvest(struct weft__worker *w, int64_t now, int events)
{
	w->last_poll = now;
	uint64_t queued = events > 0 ? at_load_64(&w->ready.len) : 0;
	w->poll_served = at_load_64(&w->c.ready_pops) + queued;
	weft__count(&w->c.polls);
	weft__count_n(&w->c.ready_events, (uint64_t)events);
	return events > 0;
}

/*
 * What a harvest woke goes to the harvester's ready FIFO, and idle workers
 * are notified once, at the harvest's end, rather than at every coroutine
 * (weft__schedule_ready).  A harvest at a fairness turn that woke
 * something while the worker's own work (its runnext slot, its deque) is
 * queued keeps nothing: that work comes first, so an idle worker is
 * notified.  Otherwise the harvester keeps its whole batch while it drains
 * it fast: the other workers are asleep, and waking one costs its eventfd
 * write, its return from epoll_wait, its steals and the lines its stolen
 * coroutines pull across, more than a batch of short I/O turns
 * (docs/notes/2026-12-05-shared-poller.md).  Only once the batch has waited
 * BACKLOG_NS (weft__loop_backlog) is an idle worker notified to help.
 */
static const int64_t BACKLOG_NS = 200 * 1000;

static void harvest_begin(struct weft__worker *w)
{
	w->harvesting = true;
}

static void harvest_end(struct weft__worker *w, int64_t now, bool notify)
{
	w->harvesting = false;
	if (weft__rt.nworkers == 1 || at_load_64(&w->ready.len) == 0)
		return;
	if (notify)
		weft__idle_notify();
	else if (!w->backlog_since)
		w->backlog_since = now;
}

void weft__loop_backlog(struct weft__worker *w, int64_t now)
{
	if (at_load_64(&w->ready.len) == 0) {
		w->backlog_since = 0;
		return;
	}
	if (now - w->backlog_since < BACKLOG_NS)
		return;
	w->backlog_since = 0;
	weft__idle_notify();
}

bool weft__loop_service(struct weft__worker *w, int64_t now, bool poll_fds)
{
	weft__uring_flush(w);	/* a busy worker's pass: its queued SQEs go in */
	harvest_begin(w);
	bool woke = weft__timers_fire(&w->timers, now);
	woke |= weft__idle_fire_watched(w, now);
	if (poll_fds && has_fds(w))
		woke |= count_harvest(w, now, harvest(w));
	/* what it woke waits behind its own work, if it has any */
	bool behind = at_load_ptr((void **)&w->runnext) || weft__deque_size(&w->deque) > 0;
	harvest_end(w, now, woke && behind);
	return woke;
}

static int sleep_timeout_ms(struct weft__worker *w)
{
	int64_t next = weft__idle_sleep_until(w);
	if (next == INT64_MAX)
		return -1;
	return weft__clock_timeout_ms(next - weft_now());	/* never early */
}

/* The wake-up token is consumed awake: the flag alone, since a waker
 * writes no eventfd while w is awake (a late write from a wake meant for
 * an earlier sleep is drained when that sleep sees it: weft__loop_wait). */
void weft__loop_take_token(struct weft__worker *w)
{
	at_store_uint(&w->kicked, 0);
}

/*
 * Whether w holds the shared epfd for this sleep (never with the worker
 * poller, where w's own epfd holds its fds): only if fds are
 * registered, nobody holds it, and either every other worker sleeps too or
 * the monitor wants a holder (a worker is stuck).  While another worker is
 * awake it harvests at its turns and when it runs dry, so w sleeps through
 * readiness rather than be woken for what that worker would have served;
 * a stuck worker serves nothing, so for as long as one is, every sleep
 * takes the role if it is free (a sleep's harvest wakes w for its own
 * coroutines' next messages too: were the role for one sleep per sample,
 * each message would wait for a sample).
 */
static bool take_poller(struct weft__worker *w)
{
	if (per_worker() || !watching())
		return false;
	if (at_load_uint(&weft__rt.nr_idle) < weft__rt.nworkers && !at_load_uint(&io.wanted))
		return false;
	return at_cas_uint(&io.holder, 0, w->index + 1);
}

void weft__loop_want_poller(bool stuck)
{
	if (per_worker())
		return;		/* the monitor rescues: weft__loop_rescue */
	if (at_load_uint(&io.wanted) != stuck)
		at_store_uint(&io.wanted, stuck);
	if (stuck && watching() && at_load_uint(&io.holder) == 0)
		weft__idle_notify();
}

void weft__loop_wait(struct weft__worker *w, struct weft__loop_events *got)
{
	weft__uring_flush(w);	/* nothing queued sleeps with the worker */
	bool holder = take_poller(w);
	/* Dekker with weft__loop_wake: polling, then the kick flag; the waker
	 * sets the flag, then reads polling. */
	at_store_uint(&w->polling, holder ? WEFT__LOOP_SHARED : WEFT__LOOP_OWN);
	at_fence_store_load();
	int timeout = at_load_uint(&w->kicked) ? 0 : sleep_timeout_ms(w);
	int n = epoll_wait(holder ? io.epfd : w->epfd, got->ev, WEFT__LOOP_BATCH, timeout);
	at_store_uint(&w->polling, 0);
	weft__idle_watch_woke(w);
	if (holder)
		at_store_uint(&io.holder, 0);
	weft__monitor_worker_awake();
	got->n = n > 0 ? n : 0;
	got->holder = holder;
	got->polled = holder || per_worker();
	weft__loop_take_token(w);
	for (int i = 0; i < got->n; i++)
		if (got->ev[i].data.u64 == TOKEN_TAG)
			weft__eventfd_drain(w->evfd);	/* after the flag: see take_token */
}

void weft__loop_woke(struct weft__worker *w, struct weft__loop_events *got)
{
	int64_t now = weft_now();
	harvest_begin(w);
	int events = dispatch(w, got->ev, got->n, got->holder ? DRAIN_KICK : 0);
	weft__uring_reap_own(w);	/* what came with this wake (uring.c) */
	if (got->polled) {
		w->harvest_full = got->n == WEFT__LOOP_BATCH;
		count_harvest(w, now, events);
	}
	weft__timers_fire(&w->timers, now);
	weft__idle_fire_watched(w, now);
	harvest_end(w, now, false);
}

/*
 * A harvest takes one batch, and what it leaves stays in the kernel's ready
 * list until the harvester runs dry.  So what the harvest touched for each
 * event (the fd's entry, the waiter on the coroutine's stack, its control
 * block) is still in cache when the coroutine runs a batch later, where a
 * harvest of everything ready (a thousand connections) had evicted it by
 * then: a miss each, several per message
 * (docs/notes/2026-12-05-one-batch-per-harvest.md).  A worker that runs
 * dry after a full batch harvests the next one itself, before it steals or
 * sleeps: going to sleep first would let it take the shared epfd only
 * while every other worker sleeps too, and at 2 workers the one awake
 * would serve the backlog alone (with the worker poller, its sleep would
 * take the next batch, but only after its steals).  After a short
 * batch nothing is left, and the sleep's own epoll_wait serves: no second
 * system call per sleep on a lightly loaded server.
 */
bool weft__loop_harvest_more(struct weft__worker *w)
{
	if (!w->harvest_full)
		return false;
	w->harvest_full = false;	/* set again if this batch fills up too */
	return weft__loop_service(w, weft_now(), true);
}

unsigned weft__loop_nfds(void)
{
	return at_load_uint(&io.nfds);
}

/* The token: the flag, then, if w is asleep, the eventfd it sleeps on: its
 * own (which holds its fds too with the worker poller), or the kick if it
 * holds the shared epfd (awake, it sees the flag before it sleeps).  A
 * kick meant for a holder that has just woken wakes the next holder once,
 * for nothing. */
void weft__loop_wake(struct weft__worker *w)
{
	at_store_uint(&w->kicked, 1);
	at_fence_store_load();
	unsigned where = at_load_uint(&w->polling);
	if (where == WEFT__LOOP_SHARED)
		weft__eventfd_signal(io.kick);
	else if (where == WEFT__LOOP_OWN)
		weft__eventfd_signal(w->evfd);
}
