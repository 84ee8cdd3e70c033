/* SPDX-License-Identifier: MIT */
/*
 * uring.c — the I/O backend chosen at weft_init, and the workers' rings.
 *
 * io_uring is an option that must fall back cleanly: many kernels are too
 * old for the flags or opcodes weft wants, and many sandboxes refuse the
 * system calls outright (Docker's default seccomp profile answers EPERM;
 * kernel.io_uring_disabled).  So weft_init probes: it sets up a ring with
 * the setup flags wanted, dropping those the kernel refuses (EINVAL) one by
 * one, newest first, then asks the ring which opcodes it supports.  The
 * flags kept are those the workers' rings are set up with.
 *
 * Under the uring backend every worker has a ring (weft__uring_ring_init,
 * at worker start).  A file transfer at an offset that the page cache
 * cannot answer at once (io.c, "files": one at the file position goes at
 * the position weft read under the fd's position turn, never at offset -1)
 * is an IORING_OP_READ or IORING_OP_WRITE submitted on
 * the ring of the worker its coroutine runs on, whose user_data is the
 * operation (struct weft__uring_op, on the coroutine's stack); the
 * coroutine parks on the operation's completion word (park.h) and the CQE
 * completes it.  Who reaps: every ring has an eventfd registered with it
 * (io_uring_register_eventfd), watched edge-triggered by the poller that
 * watches its worker's fds (loop.c), so whichever thread harvests that
 * poller reaps the ring, under the ring's CQ lock.  With the shared poller:
 * the worker that owns the ring, another worker, or one that took the
 * poller because the owner is stuck in a long coroutine.  With the worker
 * poller: the owner, in its own epfd, or the monitor's rescue of a stuck
 * owner (monitor.c, as for its sockets).  A coroutine may be
 * resumed on another worker; the operation remembers its ring, and the
 * cancel of it (IORING_OP_ASYNC_CANCEL) goes to that ring from whichever
 * thread the coroutine is on, under the ring's SQ lock.
 *
 * Hence the flags left out, though the kernel has them:
 *   SINGLE_ISSUER   only the creating task may submit or register, and a
 *                   cancel comes from whichever worker the coroutine is on;
 *   DEFER_TASKRUN   completions are posted only when the owner enters the
 *                   kernel to wait for them: a stuck owner strands them;
 *   COOP_TASKRUN    left out as a precaution: io_uring_setup(2) says the
 *                   task work that posts a completion then waits for the
 *                   submitting thread's next transition into the kernel
 *                   instead of interrupting it.  On 6.18 the tests of a
 *                   submitter that spins or sleeps right after submitting
 *                   (test_uring.c) pass with it too, so it may come back
 *                   once measured.
 * They are what the field measures io_uring's gains on sockets with; files
 * gain what matters here, a worker that never blocks on the disk, without
 * them.
 *
 * Stream sockets' reads and writes that would wait (io.c, "sockets on
 * rings") queue an IORING_OP_RECV or IORING_OP_SEND the same way, but
 * leave it in the SQ (`queued`): the worker submits every SQE of its pass
 * in one io_uring_enter (weft__uring_flush, at every pass of its loop and
 * before it sleeps), the monitor does it for a worker stuck in a long
 * coroutine, and a cancel submits what is queued ahead of itself.
 *
 * A submitted SQE cannot be taken back (the kernel's tail has moved), so a
 * submission that the kernel refuses for a while (EAGAIN: no memory for
 * requests; EBUSY: completions overflowed) reaps and tries again until the
 * kernel has consumed it.  A cancelled operation's caller still waits for
 * the operation's own CQE (io.c): the buffer is the caller's.
 */
#include "uring.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "atomic.h"
#include "clock.h"
#include "eventfd.h"
#include "lock.h"
#include "loop.h"
#include "park.h"
#include "sanitize.h"
#include "weft.h"
#include "worker.h"

#ifdef WEFT_HAVE_LIBURING
#include <liburing.h>
#endif
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#else
#define VALGRIND_MAKE_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

static int backend = WEFT_IO_EPOLL;
static int asked_backend = WEFT_IO_AUTO;	/* weft_init's: auto never fails */
static bool sockets_asked;	/* $WEFT_URING_SOCKETS */

int weft__uring_backend(void)
{
	return backend;
}

bool weft__uring_sockets(void)
{
	return sockets_asked && backend == WEFT_IO_URING && asked_backend == WEFT_IO_URING &&
	       weft__loop_ring_wakes_owner();
}

#ifdef WEFT_HAVE_LIBURING
/* The setup flags wanted, oldest kernel first: the probe drops from the end
 * while the kernel says EINVAL. */
static const unsigned wanted_flags[] = {
	IORING_SETUP_SUBMIT_ALL,	/* a bad SQE does not stop the batch */
};
enum { NFLAGS = sizeof wanted_flags / sizeof *wanted_flags, PROBE_ENTRIES = 8 };
/* A worker's ring: SQ_ENTRIES submission slots (a pass's socket SQEs wait
 * there for its flush; a fuller SQ is submitted first: get_sqe),
 * CQ_ENTRIES completion slots, beyond which the kernel keeps completions
 * on its overflow list. */
enum { SQ_ENTRIES = 256, CQ_ENTRIES = 4096 };

/* The opcodes every file and socket call needs (and the cancel of one in
 * flight). */
static const struct { unsigned char op; const char *name; } needed_ops[] = {
	{ IORING_OP_READ, "IORING_OP_READ" },
	{ IORING_OP_WRITE, "IORING_OP_WRITE" },
	{ IORING_OP_RECV, "IORING_OP_RECV" },
	{ IORING_OP_SEND, "IORING_OP_SEND" },
	{ IORING_OP_ASYNC_CANCEL, "IORING_OP_ASYNC_CANCEL" },
};

static unsigned setup_flags;	/* the wanted flags the probe's kernel took */

/* Sets up ring with as many of wanted_flags as the kernel takes: 0, or the
 * setup's -errno (the flags left out are those refused). */
static int ring_setup(struct io_uring *ring, unsigned *flags)
{
	for (unsigned n = NFLAGS;; n--) {
		struct io_uring_params p;
		memset(&p, 0, sizeof p);
		for (unsigned i = 0; i < n; i++)
			p.flags |= wanted_flags[i];
		int r = io_uring_queue_init_params(PROBE_ENTRIES, ring, &p);
		if (r == 0)
			*flags = p.flags;
		if (r != -EINVAL || n == 0)
			return r;
	}
}

/* 0 if io_uring can be had; else -errno and *why. */
static int probe(const char **why)
{
	struct io_uring ring;
	int r = ring_setup(&ring, &setup_flags);
	if (r < 0) {
		*why = "io_uring_setup failed";
		return r;
	}
	struct io_uring_probe *p = io_uring_get_probe_ring(&ring);
	r = p ? 0 : -ENOMEM;
	*why = "io_uring_register(IORING_REGISTER_PROBE) failed";
	for (size_t i = 0; p && i < sizeof needed_ops / sizeof *needed_ops; i++) {
		if (!io_uring_opcode_supported(p, needed_ops[i].op)) {
			*why = needed_ops[i].name;
			r = -ENOSYS;
			break;
		}
	}
	io_uring_free_probe(p);
	io_uring_queue_exit(&ring);
	return r;
}
#else
static int probe(const char **why)
{
	*why = "weft was built without liburing";
	return -ENOSYS;
}
#endif

int weft__uring_select(int asked, bool sockets)
{
	sockets_asked = sockets;
	backend = WEFT_IO_EPOLL;
	asked_backend = asked;
	if (asked == WEFT_IO_EPOLL)
		return 0;
	const char *why = "";
	int r = probe(&why);
	if (r == 0) {
		backend = WEFT_IO_URING;
		return 0;
	}
	if (asked == WEFT_IO_AUTO)
		return 0;
	if (r == -ENOSYS && strncmp(why, "IORING_OP_", 10) == 0)
		fprintf(stderr, "weft: WEFT_IO=uring cannot be had: the kernel lacks %s\n", why);
	else if (r == -ENOSYS)
		fprintf(stderr, "weft: WEFT_IO=uring cannot be had: %s\n", why);
	else
		fprintf(stderr, "weft: WEFT_IO=uring cannot be had: %s: %s\n", why, strerror(-r));
	return r;
}

/* ------------------------------------------------------ the workers' rings */

#ifdef WEFT_HAVE_LIBURING
struct weft__ring {
	struct io_uring ring;
	struct weft__lock sq;	/* submitters: the SQ, io_uring_submit */
	struct weft__lock cq;	/* reapers: the CQ */
	int evfd;		/* registered: signalled at every CQE */
	unsigned queued;	/* atomic: SQEs wait for a flush (written under sq) */
	bool set_up;		/* ring is (io_uring_queue_init_params succeeded) */
	/* weft_stats' counts: each written under its lock (sqes, enters and
	 * cancels under sq, cqes under cq) with a load and a store, read by
	 * weft__uring_counts without it (a moment's figure, as every stat) */
	uint64_t sqes, enters, cqes, cancels;
};

/* One more on a count of r's (its writers hold the count's lock). */
static void count(uint64_t *c, uint64_t n)
{
	at_store_64(c, at_load_64(c) + n);
}

/* Releases r (made by ring_make, perhaps in part). */
static void ring_free(struct weft__ring *r)
{
	if (r->set_up)
		io_uring_queue_exit(&r->ring);
	if (r->evfd >= 0)
		close(r->evfd);	/* the epfd forgets it with the file */
	free(r);
}

/* Sets up w's ring: 0, or -errno and *why. */
static int ring_make(struct weft__ring *r, struct weft__worker *w, const char **why)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	p.flags = setup_flags | IORING_SETUP_CQSIZE;
	p.cq_entries = CQ_ENTRIES;
	*why = "io_uring_setup failed";
	int e = io_uring_queue_init_params(SQ_ENTRIES, &r->ring, &p);
	if (e < 0)
		return e;
	r->set_up = true;
	*why = "eventfd failed";
	r->evfd = weft__eventfd_open();
	if (r->evfd < 0)
		return r->evfd;
	*why = "io_uring_register_eventfd failed";
	e = io_uring_register_eventfd(&r->ring, r->evfd);
	*why = "epoll_ctl failed";
	return e < 0 ? e : weft__loop_watch_ring(w, r->evfd);
}

/*
 * A worker's ring may be refused where the probe's small one was not (a
 * memlock limit: kernels before 5.12 count rings against RLIMIT_MEMLOCK).
 * WEFT_IO=uring then fails weft_init with one line; auto, which must never
 * fail for want of io_uring, leaves that worker without a ring: its
 * coroutines' transfers go to the offload pool (weft__uring_submit_rw).
 */
int weft__uring_ring_init(struct weft__worker *w)
{
	w->ring = NULL;
	if (backend != WEFT_IO_URING)
		return 0;
	struct weft__ring *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->evfd = -1;
	const char *why = "";
	int e = ring_make(r, w, &why);
	if (e == 0) {
		w->ring = r;
		return 0;
	}
	ring_free(r);
	if (asked_backend != WEFT_IO_URING)
		return 0;
	fprintf(stderr, "weft: WEFT_IO=uring cannot be had: a worker's %s: %s\n", why, strerror(-e));
	return e;
}

void weft__uring_ring_fini(struct weft__worker *w)
{
	if (w->ring)
		ring_free(w->ring);
	w->ring = NULL;
}

/* Completes every operation whose CQE has arrived.  A cancel's CQE carries
 * no operation (user_data 0).  Every reaper drains the CQ to empty (peek
 * also flushes the kernel's overflow list), under the lock, so a CQE that
 * arrives after one reaper's last peek signals the eventfd again for the
 * next (edge-triggered: every signal is an event). */
static void reap(struct weft__ring *r)
{
	struct weft__worker *self = weft__worker_self();	/* NULL: the monitor */
	weft__lock_acquire(&r->cq);
	struct io_uring_cqe *cqe;
	while (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
		struct weft__uring_op *op = io_uring_cqe_get_data(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(&r->ring, cqe);
		count(&r->cqes, 1);
		if (!op)
			continue;
		san_kernel_handed(op);
		/* memcheck cannot see the kernel's write into a read's buffer */
		if (res > 0 && op->in)
			VALGRIND_MAKE_MEM_DEFINED(op->in, (size_t)res);
		op->res = res;	/* published by the completion's seq_cst CAS */
		/* op may be gone after this; its coroutine queues FIFO */
		if (self)
			weft__completion_set_ready(&op->done, self);
		else
			weft__completion_set(&op->done, NULL);
	}
	weft__lock_release(&r->cq);
}

void weft__uring_reap(unsigned index)
{
	reap(weft__rt.workers[index].ring);
}

/*
 * A socket's arrival wakes its worker twice where the socket's readiness
 * and the ring's eventfd come apart: the socket is in the poller too, and
 * its edge wakes the sleeper, whose return to user space runs the task
 * work that posts the RECV's CQE and signals the eventfd, whose event then
 * ends the next sleep at once (stats::a_wake_that_readies_one_coroutine_
 * leaves_the_other_worker_asleep counted two sleeps per read).  So a wake
 * reaps the CQEs already there, after draining the eventfd, which takes
 * its pending event out of the poller (epoll reports an edge-triggered
 * fd only if it is still ready); a CQE posted after the drain signals it
 * again.  One load when the CQ is empty.
 */
void weft__uring_reap_own(struct weft__worker *w)
{
	struct weft__ring *r = w->ring;
	if (!r)
		return;
	/* io_uring_cq_ready without the CQ lock: the head another reaper
	 * advances (a release store, liburing's) read atomically too; a CQE
	 * it misses comes with its eventfd's next edge */
	unsigned tail = __atomic_load_n(r->ring.cq.ktail, __ATOMIC_ACQUIRE);
	if (tail == __atomic_load_n(r->ring.cq.khead, __ATOMIC_RELAXED))
		return;
	weft__eventfd_drain(r->evfd);
	reap(r);
}

/* Submits what r's SQ holds (r->sq held) until the kernel has consumed it:
 * an SQE whose tail the kernel has seen cannot be taken back, so a refusal
 * for want of memory (EAGAIN) or for a completion backlog (EBUSY) reaps
 * and tries again. */
static void submit_all(struct weft__ring *r)
{
	if (at_load_uint(&r->queued))	/* relaxed: sq orders it */
		at_store_uint(&r->queued, 0);
	while (io_uring_sq_ready(&r->ring) > 0) {
		int n = io_uring_submit(&r->ring);
		count(&r->enters, 1);
		if (n >= 0 || n == -EINTR)
			continue;
		reap(r);
		sched_yield();
	}
}

/* An SQE of r's (r->sq held): the SQ is empty between submitters, but for
 * a full one, submitted first. */
static struct io_uring_sqe *get_sqe(struct weft__ring *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	if (!sqe) {
		submit_all(r);
		sqe = io_uring_get_sqe(&r->ring);
	}
	return sqe;
}

/* Puts op's SQE on the calling worker's ring, submitted at once (files)
 * or left for the worker's next flush (sockets: `queued`): 0, or -ENOSYS
 * (no ring) or -EAGAIN (no SQE). */
static int submit(struct weft__uring_op *op, int fd, enum weft__uring_kind kind, void *p, size_t len,
		  off_t off)
{
	struct weft__worker *w = weft__worker_self();
	struct weft__ring *r = w ? w->ring : NULL;
	if (!r)
		return -ENOSYS;
	bool write = kind == WEFT__URING_WRITE || kind == WEFT__URING_SEND;
	op->ring = r;
	op->done = NULL;
	op->res = 0;
	op->in = write ? NULL : p;
	unsigned n = len > WEFT__URING_MAX_LEN ? WEFT__URING_MAX_LEN : (unsigned)len;
	weft__lock_acquire(&r->sq);
	struct io_uring_sqe *sqe = get_sqe(r);
	if (sqe) {
		if (kind == WEFT__URING_READ)
			io_uring_prep_read(sqe, fd, p, n, (uint64_t)off);
		else if (kind == WEFT__URING_WRITE)
			io_uring_prep_write(sqe, fd, p, n, (uint64_t)off);
		else if (kind == WEFT__URING_RECV)
			io_uring_prep_recv(sqe, fd, p, n, 0);
		else
			io_uring_prep_send(sqe, fd, p, n, MSG_NOSIGNAL);
		io_uring_sqe_set_data(sqe, op);
		san_kernel_handoff(op);
		count(&r->sqes, 1);
		if (kind == WEFT__URING_READ || kind == WEFT__URING_WRITE)
			submit_all(r);
		else
			at_store_uint(&r->queued, 1);	/* relaxed: see weft__uring_flush */
	}
	weft__lock_release(&r->sq);
	return sqe ? 0 : -EAGAIN;
}

int weft__uring_submit_rw(struct weft__uring_op *op, int fd, bool write, void *p, size_t len,
			  off_t off)
{
	return submit(op, fd, write ? WEFT__URING_WRITE : WEFT__URING_READ, p, len, off);
}

int weft__uring_queue_sock(struct weft__uring_op *op, int fd, bool send, void *p, size_t len)
{
	return submit(op, fd, send ? WEFT__URING_SEND : WEFT__URING_RECV, p, len, 0);
}

/*
 * Submits what w's coroutines queued since the last flush, in one
 * io_uring_enter.  The owner calls it at every pass of its loop (worker.c:
 * when it runs dry, at its fairness turns, before it sleeps); the monitor
 * calls it for a worker stuck in a long coroutine, which would otherwise
 * leave its parked readers' SQEs unsubmitted.  `queued` is read relaxed
 * outside the lock: a queue by w's own coroutines happens before w's next
 * look on w's thread; one the monitor misses is there for the owner's
 * next pass (and the monitor's next period) under the lock.  A cancel
 * submits the queue too (submit_all), so an op's cancel never precedes
 * the op.
 */
void weft__uring_flush(struct weft__worker *w)
{
	struct weft__ring *r = w->ring;
	if (!r || !at_load_uint(&r->queued))
		return;
	weft__lock_acquire(&r->sq);
	submit_all(r);
	weft__lock_release(&r->sq);
}

/* Asks op's ring to cancel op (IORING_OP_ASYNC_CANCEL), from any thread,
 * submitting whatever is queued before it (op, if still queued); `first`:
 * op's first cancel, which counts op as stopped (`cancels`). */
static void cancel(struct weft__uring_op *op, bool first)
{
	struct weft__ring *r = op->ring;
	weft__lock_acquire(&r->sq);
	struct io_uring_sqe *sqe = get_sqe(r);
	while (!sqe) {	/* the cancel must go in: its op's CQE is awaited */
		sched_yield();
		sqe = get_sqe(r);
	}
	io_uring_prep_cancel(sqe, op, 0);
	io_uring_sqe_set_data(sqe, NULL);
	count(&r->sqes, 1);
	if (first)
		count(&r->cancels, 1);
	submit_all(r);
	weft__lock_release(&r->sq);
}

/*
 * A cancel can miss its op.  The kernel looks for the op where it waits
 * (its poll armed, or queued or running on an io-wq worker); an op caught
 * between the two (its poll fired, its retry queued as task work) is not
 * found (-ENOENT), and one running on an io-wq worker is only signalled
 * (-EALREADY): either may then arm its poll again and wait for data that
 * never comes (test_uring.c's storm of pipe reads stranded one read in
 * about five runs).  So the cancel goes again while the op's CQE has not
 * come, the waits between doubling from STOP_FIRST to STOP_MOST: an op
 * caught in transit is found the next time, and one the cancel did reach
 * costs one wait for its CQE.  uring.pml's -DMISS kernel checks it.
 */
enum { STOP_FIRST = 10, STOP_MOST = 1000 };	/* ms */

void weft__uring_stop(struct weft__uring_op *op, unsigned cause)
{
	int64_t wait = STOP_FIRST * WEFT__CLOCK_NS_PER_MS;
	int64_t until = weft_now() + wait;
	cancel(op, true);
	for (;;) {
		int r = weft__completion_wait(&op->done, false, until, cause);
		if (r == 0)
			return;
		if (r == ENOMEM && weft_now() < until) {
			/* no room for the deadline's timer: a turn for the
			 * others (the reaper among them), then look again */
			weft_yield();
			continue;
		}
		cancel(op, false);
		wait = wait * 2 < STOP_MOST * WEFT__CLOCK_NS_PER_MS ? wait * 2 : STOP_MOST * WEFT__CLOCK_NS_PER_MS;
		until = weft_now() + wait;
	}
}
#else
int weft__uring_ring_init(struct weft__worker *w)
{
	w->ring = NULL;
	return 0;
}

void weft__uring_ring_fini(struct weft__worker *w)
{
	(void)w;
}

void weft__uring_reap(unsigned index)
{
	(void)index;
}

void weft__uring_reap_own(struct weft__worker *w)
{
	(void)w;
}

int weft__uring_submit_rw(struct weft__uring_op *op, int fd, bool write, void *p, size_t len,
			  off_t off)
{
	(void)op, (void)fd, (void)write, (void)p, (void)len, (void)off;
	return -ENOSYS;
}

int weft__uring_queue_sock(struct weft__uring_op *op, int fd, bool send, void *p, size_t len)
{
	(void)op, (void)fd, (void)send, (void)p, (void)len;
	return -ENOSYS;
}

void weft__uring_flush(struct weft__worker *w)
{
	(void)w;
}

void weft__uring_stop(struct weft__uring_op *op, unsigned cause)
{
	(void)op, (void)cause;
}
#endif

void weft__uring_counts(struct weft__uring_counts *out)
{
	*out = (struct weft__uring_counts){ 0 };
#ifdef WEFT_HAVE_LIBURING
	for (unsigned i = 0; i < weft__rt.nworkers; i++) {
		struct weft__ring *r = weft__rt.workers[i].ring;
		if (!r)
			continue;
		out->sqes += at_load_64(&r->sqes);
		out->enters += at_load_64(&r->enters);
		out->cqes += at_load_64(&r->cqes);
		out->cancels += at_load_64(&r->cancels);
	}
#endif
}
