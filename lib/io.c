/* SPDX-License-Identifier: MIT */
/*
 * io.c — weft_wait, weft_read, weft_write, weft_pread, weft_pwrite,
 * weft_accept, weft_connect, weft_close, weft_release and weft_sleep.
 * Regular files and block devices take their own path ("files" below).
 *
 * Every call has the same shape: try the syscall; on EAGAIN park on the fd's
 * slot for that direction, or in its queue behind other waiters (fdtable.h),
 * until readiness (or the turn), the deadline or a close wins the park word
 * (park.h); retry; on return, pass on the turn it holds.  The call holds a reference on
 * the fd's entry from start to return, which is what weft_close waits for.
 * The two loops of that shape, one attempt and write-all, take the syscall
 * as a callback and serve net.c's calls too (io.h).
 *
 * errno: a call may resume on another thread than the one it started on, so
 * errno is read only through weft__err_get() (out of line: its thread-local
 * address is computed afresh after every suspension), and failures after a
 * suspension are reported with weft__err_fail (docs/design.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "invariant.h"
#include "list.h"
#include "atomic.h"
#include "clock.h"
#include "coro.h"
#include "errors.h"
#include "fault.h"
#include "fdtable.h"
#include "io.h"
#include "loop.h"
#include "offload.h"
#include "park.h"
#include "sys.h"
#include "uring.h"
#include "weft.h"
#include "worker.h"

static const int64_t BACKOFF_MIN_NS = 1000 * 1000;
static const int64_t BACKOFF_MAX_NS = 100 * 1000 * 1000;

enum {
	LEAVE_TURNS = FD_WAKE_TURN(WEFT_IN | WEFT_OUT),	/* the turn bits of leave */
	LEAVE_POS = 0x80,	/* leave: give back the fd's position turn (pos_enter) */
};

/* Drops a reference taken in io_begin. */
static inline void ref_drop(struct weft__fd *e)
{
	unsigned old = at_fas_uint(&e->refs, 1);
	WEFT__ASSERT(old > 0);	/* never below zero: one drop per reference */
}

/*
 * *gen, read from e; or, while a weft_close's close(2) runs (FD_GEN_CLOSED),
 * the generation of the number's next file, once it has one: a call that
 * comes as close(2) runs is a call on whatever the number names after it,
 * and that file's entry must be clean and its first call not cancelled.
 * close(2) may take long (SO_LINGER): a call (`call`) waits only until its
 * deadline or its cancellation, -ETIMEDOUT or -ECANCELED; a closer's
 * forget waits for it to end.  0 when *gen is settled.
 */
static int gen_settled(struct weft__fd *e, unsigned *gen, bool call, int64_t deadline)
{
	while ((*gen & FD_GEN_PHASE) == FD_GEN_CLOSED) {
		if (call && weft__co_cancelled())
			return -ECANCELED;
		if (call && weft__clock_deadline_passed(deadline))
			return -ETIMEDOUT;
		weft_yield();	/* the closer is in close(2): let others run */
		*gen = at_load_uint(&e->gen);
	}
	return 0;
}

/*
 * Starts a call on fd: takes a reference on its entry, notes the generation
 * the call runs in, and registers fd in a loop if it is in none; -1 with
 * errno when fd is being or has been closed since the call started
 * (ECANCELED), or cannot be registered.
 *
 * The generation is read first and checked again once the reference is
 * held, so a weft_close anywhere in between is seen: one that ran to the
 * end left gen FD_GEN_STEP higher, one still running left it odd.  A close that
 * bumps gen after our increment finds the reference and waits for it: we
 * increment refs then load gen, weft_close increments gen then loads refs,
 * each RMW seq_cst (fenced on both sides, atomic.h: the first load of gen
 * cannot move below our increment either), so (Dekker) either it sees our
 * reference or we see its bump.  Registering only under a checked
 * reference means no registration lands between a close's unregister and
 * its close(2), where it would outlive the fd: gen stays odd until
 * close(2) has returned (weft_close).
 */
static int io_begin(struct weft__io *io, int fd, int64_t deadline)
{
	struct weft__worker *w = weft__worker_self();
	if (!w || !w->current)
		return weft__err_fail(EPERM);
	w = weft__worker_spend(w);	/* its budget (worker.h) */
	if (at_load_uint(&w->current->signals) & CO_CANCELLED)
		return weft__err_fail(ECANCELED);
	struct weft__fd *e;
	int r = weft__fd_get(fd, &e);
	if (r < 0)
		return weft__err_fail(-r);
	unsigned gen = at_load_uint(&e->gen);
	weft__fault_pause(WEFT__FAULT_IO_BEGIN, (uintptr_t)fd);	/* tests: a close may run here */
	r = gen_settled(e, &gen, true, deadline);
	if (r < 0)
		return weft__err_fail(-r);
	if (gen & FD_GEN_CLOSING)	/* weft_close is running */
		return weft__err_fail(ECANCELED);
	at_faa_uint(&e->refs, 1);
	if (at_load_uint(&e->gen) != gen) {
		ref_drop(e);
		return weft__err_fail(ECANCELED);
	}
	r = weft__fd_registered(e) ? 0 : weft__loop_register(e, fd);
	if (r < 0) {
		ref_drop(e);
		return weft__err_fail(-r);
	}
	io->fd = fd;
	io->gen = gen;
	io->e = e;
	io->w = w;
	io->leave = 0;
	return 0;
}

/* The call moved n bytes (n >= 0): they count against the budget too
 * (worker.h), unless it parked, which gave the worker back.  A transfer
 * under a unit's worth costs one compare. */
static inline void io_moved(struct weft__io *io, ssize_t n)
{
	if (n >= WEFT__WORKER_BUDGET_BYTES && io->w)
		weft__worker_spend_bytes(io->w, (size_t)n);
}

/* A call holding a turn is returning, having not parked again: it did
 * not end in EAGAIN, so what woke it may not be used up, and the next
 * waiter gets to try (fdtable.c).  A call that took readiness without the
 * turn wakes a waiter that parked in the slot meanwhile (weft__fd_nudge). */
static void pos_give(struct weft__io *io);

static __attribute__((noinline)) void io_leave(struct weft__io *io)
{
	if (io->leave & LEAVE_POS)
		pos_give(io);
	for (int bit = WEFT_IN, d = FD_SLOT_IN; bit <= WEFT_OUT; bit <<= 1, d++) {
		if (io->leave & FD_WAKE_TURN(bit))
			weft__fd_pass(io->e, d);
		else if (io->leave & bit)
			weft__fd_nudge(io->e, d);
	}
}

/* Ends the call.  The common case inline: a read woken by readiness, with
 * nobody else waiting (one load). */
static inline void io_end(struct weft__io *io)
{
	unsigned leave = io->leave;
	if (leave) {
		if (leave == WEFT_IN)
			weft__fd_nudge(io->e, FD_SLOT_IN);
		else
			io_leave(io);
	}
	ref_drop(io->e);
}

static bool io_closed(const struct weft__io *io)
{
	return at_load_uint(&io->e->gen) != io->gen;
}

/* The call's result: r (>= 0), or -1 with errno e, after io_end. */
static ssize_t io_return(struct weft__io *io, ssize_t r, int e)
{
	io_end(io);
	return r >= 0 ? r : weft__err_fail(e);
}

/* Takes w out of the slots in `parked` (a waiter leaving a slot it held
 * with others queued takes the turn, to pass it on). */
static inline void retract(struct weft__io *io, int parked, struct weft__waiter *w)
{
	if ((parked & WEFT_IN) && weft__fd_retract(io->e, FD_SLOT_IN, w))
		io->leave |= FD_WAKE_TURN(WEFT_IN);
	if ((parked & WEFT_OUT) && weft__fd_retract(io->e, FD_SLOT_OUT, w))
		io->leave |= FD_WAKE_TURN(WEFT_OUT);
}

/* Takes w's nodes out of the queues in `queued`; returns those whose
 * claimer had taken it (each hands the turn, or wakes it for a close). */
static int unqueue(struct weft__io *io, int queued, struct weft__fd_node *q)
{
	int claimed = 0;
	for (int bit = WEFT_IN, d = FD_SLOT_IN; bit <= WEFT_OUT; bit <<= 1, d++)
		if ((queued & bit) && weft__fd_unqueue(io->e, d, &q[d]))
			claimed |= bit;
	return claimed;
}

/* After unqueue: waits out the claimers of the queues in `claimed` and
 * takes the turns they handed over; r is the park result. */
static void take_turns(struct weft__io *io, int claimed, struct weft__fd_node *q, int r)
{
	for (int bit = WEFT_IN, d = FD_SLOT_IN; bit <= WEFT_OUT; bit <<= 1, d++) {
		if (!(claimed & bit))
			continue;
		weft__fd_unqueue_done(&q[d], r, bit);
		io->leave |= (unsigned char)(q[d].node.result & FD_WAKE_TURN(bit));
	}
}

/* io_wait's answer when it would have to queue and q is NULL (no result
 * of a park: those are >= 0 or a negative errno above -4096). */
enum { WOULD_QUEUE = INT_MIN };

/* Puts w in the slot, or the queue through q, of each direction of
 * events, or takes readiness nobody had (p says which, per direction); a
 * turn parked goes back into the slot, and readiness is counted anew.
 * With q NULL (one direction only) it returns WOULD_QUEUE where it would
 * queue, having changed nothing; else 0. */
static inline __attribute__((always_inline)) int io_publish(struct weft__io *io, int events,
							    struct weft__waiter *w,
							    struct weft__fd_node *q,
							    struct weft__io_parked *p)
{
	*p = (struct weft__io_parked){ 0, 0, 0 };
	for (int bit = WEFT_IN, d = FD_SLOT_IN; bit <= WEFT_OUT; bit <<= 1, d++) {
		if (!(events & bit))
			continue;
		int r = weft__fd_park(io->e, d, w, io->leave & FD_WAKE_TURN(bit), q ? &q[d] : NULL);
		if (r == FD_WOULD_QUEUE)
			return WOULD_QUEUE;
		p->parked |= r == FD_IN_SLOT ? bit : 0;
		p->queued |= r == FD_IN_QUEUE ? bit : 0;
		p->ready |= r == FD_TOOK_READY ? bit : 0;
	}
	io->leave &= (unsigned char)((LEAVE_TURNS | LEAVE_POS) & ~FD_WAKE_TURN(p->parked));
	return 0;
}

/* Takes w back from where io_publish put it; returns the directions whose
 * queue node a claimer had taken (each hands the turn, or wakes it for a
 * close). */
static inline __attribute__((always_inline)) int io_retract(struct weft__io *io,
							    const struct weft__io_parked *p,
							    struct weft__waiter *w,
							    struct weft__fd_node *q)
{
	retract(io, p->parked, w);
	return p->queued ? unqueue(io, p->queued, q) : 0;
}

/* After io_retract, r being the park result: takes the turns handed over
 * and notes what the call must do when it returns (`leave`); returns the
 * ready subset of events (ready: the readiness io_publish took). */
static inline __attribute__((always_inline)) int io_settled(struct weft__io *io, int events,
							    int ready, int claimed,
							    struct weft__fd_node *q, int r)
{
	if (claimed) {
		take_turns(io, claimed, q, r);
		ready |= claimed;
	}
	if (r & WEFT__PARK_WAKE_READY) {	/* a readiness wake may hand the turn */
		ready |= r & events;
		io->leave |= (unsigned char)(r & FD_WAKE_TURN(events));
	}
	io->leave |= (unsigned char)(ready & ~(io->leave >> 4));	/* readiness without a turn */
	return ready;
}

/*
 * Parks until one of events is (probably) ready: returns the subset the wake
 * reported, which may be spurious (readiness seen earlier and since used
 * up), or -errno: ETIMEDOUT, ECANCELED, ENOMEM.  Parks in a direction's
 * slot when nobody else waits there or the call holds that direction's
 * turn, else in its queue through q (fdtable.h); a turn handed over counts
 * as readiness (the holder tries its call, and passes the turn on unless
 * it ends in EAGAIN).  w: armed (weft__waiter_init).  With q NULL (one
 * direction only) it returns WOULD_QUEUE where it would queue, having
 * changed nothing but w's arming.
 */
static inline __attribute__((always_inline)) int io_wait(struct weft__io *io, int events,
							 int64_t deadline, struct weft__waiter *w,
							 struct weft__fd_node *q)
{
	struct weft__io_parked p;
	if (io_publish(io, events, w, q, &p) == WOULD_QUEUE)
		return WOULD_QUEUE;
	int r, claimed;
	/* The close check comes after the slot CASes (see fdtable.h). */
	if (p.ready || io_closed(io)) {
		claimed = io_retract(io, &p, w, q);
		/* a claimer of ours is about to wake w, or lost to whoever did:
		 * let the wake land rather than disarm under it */
		r = claimed ? weft__waiter_wait(w, -1) : weft__waiter_disarm(w);
		if (r == WEFT__WAITER_NOT_WOKEN)
			r = p.ready ? WEFT__PARK_WAKE_READY | p.ready : ECANCELED;
	} else {
		/* every direction was published by an RMW after the arming (a
		 * slot's CAS, or the queue lock): the fence the wait needs */
		r = weft__waiter_wait_fenced(w, deadline);
		claimed = io_retract(io, &p, w, q);
	}
	int ready = io_settled(io, events, p.ready, claimed, q, r);
	int got = io_closed(io) ? -ECANCELED : ready || (r & WEFT__PARK_WAKE_READY) ? ready : -r;
	if (got != -EINTR)	/* ready or closed all the same */
		weft__park_interrupt_unused(w->co, r);
	return got;
}

/* io_wait with queue nodes: out of line, so that the common park (one
 * direction, a free slot) keeps them off its frame.  Every message's
 * resume touches that frame's lines, cold with a thousand connections in
 * rotation (docs/notes/2026-12-06-lines-a-message-touches.md). */
static __attribute__((noinline)) int io_wait_queued(struct weft__io *io, int events, int64_t deadline,
						     struct weft__waiter *w)
{
	struct weft__fd_node q[2];
	return io_wait(io, events, deadline, w, q);
}

/* io_wait, or the wait-until-ready of a file epoll cannot watch. */
static int io_park(struct weft__io *io, int events, int64_t deadline)
{
	io->w = NULL;	/* it may go on on another worker, in another dispatch */
	if (io->e->flags & FD_NO_POLL) {
		weft_yield();	/* epoll cannot tell: let others run, then retry */
		return events;
	}
	/* one waiter, armed once (park.h), serves both tries: nothing has
	 * published it when the first gives up */
	struct weft__waiter w;
	weft__waiter_init(&w, WEFT_PARK_IO);
	if (events == WEFT_IN || events == WEFT_OUT) {
		int r = io_wait(io, events, deadline, &w, NULL);
		if (r != WOULD_QUEUE)
			return r;
	}
	return io_wait_queued(io, events, deadline, &w);
}

/* After a syscall failed with errno e: 0 to retry it (EINTR, or EAGAIN and
 * then a wake for events), else the errno to fail with. */
static int io_retry(struct weft__io *io, int e, int events, int64_t deadline)
{
	if (e == EINTR)
		return 0;
	if (e != EAGAIN && e != EWOULDBLOCK)
		return e;
	int r = io_park(io, events, deadline);
	return r < 0 ? -r : 0;
}

/*
 * A socket whose last read came back short was empty then, and every later
 * arrival is an edge (sk_data_ready wakes epoll per packet), which our slot
 * keeps as READY if nobody waits: so the next read may park first and skip
 * the read that would only say EAGAIN, one syscall in three for an echo.
 * Stream sockets only: a datagram read is short with more queued, and pipes
 * signal edges since Linux 5.5 only when they were empty.  Not with a past
 * deadline, which promises a try without waiting.  Not once the peer has
 * hung up: data and the FIN (or RST) that arrive before a harvest make one
 * event, so after the short read that takes the data no edge is left to
 * come for the end of file (found by test/soak: CLOSE-WAIT connections
 * whose readers never woke).  The harvester sets `hangup` before it wakes.
 */
static bool drained(const struct weft__io *io, int64_t deadline)
{
	return at_load_uint(&io->e->drained) && (io->e->flags & FD_STREAM) && !at_load_uint(&io->e->hangup) &&
	       !weft__clock_deadline_passed(deadline);
}

static int park_if_drained(struct weft__io *io, int64_t deadline)
{
	if (!drained(io, deadline))
		return 0;
	int r = io_park(io, WEFT_IN, deadline);
	return r < 0 ? -r : 0;
}

/* A read or write of one buffer; off: pread's and pwrite's offset, -1 for
 * the file position. */
struct buf_op {
	struct weft__io_op op;
	union {
		char *in;
		const char *out;
	} p;
	off_t off;
};

/* ------------------------------------------------------ files */

/*
 * Regular files and block devices, which epoll cannot watch: a read or
 * write may wait for the disk (a page not cached, dirty pages throttled),
 * which would stop the worker and every coroutine queued on it.  So the
 * worker only tries the transfer with RWF_NOWAIT, which the page cache
 * answers at once or refuses (EAGAIN), and a refused one goes off the
 * worker while the coroutine is parked: under the uring backend to the
 * worker's ring (an IORING_OP_READ or IORING_OP_WRITE, uring.c), under
 * epoll to the offload pool, whose helper does it blocking.  O_DIRECT files skip the try: RWF_NOWAIT there avoids only locks
 * and still waits for the device.  A file system that cannot say
 * (EOPNOTSUPP: procfs and sysfs reads, buffered ext4 writes) is not one
 * that would wait: the fd remembers it for that direction (nowait_off) and
 * its transfers run on the worker as a plain blocking call, as they would
 * without the runtime.  Sending them to the pool instead would put every
 * log line behind the program's own offloads (a deadlock when a helper
 * waits for this coroutine) and make a past deadline fail them.
 *
 * A deadline, weft_cancel, weft_interrupt or a weft_close of the fd ends
 * the wait (file_park: the parked transfer is on the fd's `files` list,
 * where the close finds it), and the coroutine stops the transfer
 * (away_stop): one still queued for a helper is withdrawn; one on a ring
 * gets an IORING_OP_ASYNC_CANCEL on that ring, and the coroutine waits for
 * the transfer's own CQE, since it reads into or writes from the caller's
 * buffer.  A transfer stopped before it moved anything fails the call with
 * ETIMEDOUT, ECANCELED or EINTR.  One a helper has started, or that the
 * kernel completed anyway (a read under way is not interrupted), is
 * waited for, and its result stands: the bytes it moved are returned,
 * never lost (weft.h, weft_pread).  One mechanism for both backends.
 */
struct file_op {
	int fd;
	bool write;
	char *p;
	size_t len;
	off_t off;	/* -1: the file position */
	bool turn;	/* holds the fd's position turn (pos_take): a transfer
			 * at the file position may go to a ring */
	ssize_t n;	/* the helper's result */
	int err;	/* its errno, when n < 0 */
};

static ssize_t file_rw(struct file_op *f, int flags)
{
	struct iovec iov = { f->p, f->len };
	return f->write ? weft__sys_pwritev2(f->fd, &iov, 1, f->off, flags)
			: weft__sys_preadv2(f->fd, &iov, 1, f->off, flags);
}

/* On a helper (a plain thread): the blocking transfer. */
static void file_run(void *arg)
{
	struct file_op *f = arg;
	do
		f->n = file_rw(f, 0);
	while (f->n < 0 && errno == EINTR);
	f->err = f->n < 0 ? errno : 0;
}

/* One transfer of f done blocking on the worker: its result, or -errno. */
static ssize_t file_direct(struct file_op *f)
{
	file_run(f);
	return f->n >= 0 ? f->n : -f->err;
}

/* A transfer of f off the worker: on the worker's ring, else (the epoll
 * backend; no ring) a helper's call. */
struct file_away {
	bool ring;
	bool sock;	/* a socket's transfer: its waits count as I/O (stats) */
	struct weft__uring_op op;
	struct weft__offload_call call;
};

/* Starts a at offset `at` on a ring (at >= 0, ring_offset), else on the
 * pool: 0, or -EAGAIN (no helper could be had). */
static int away_start(struct file_away *a, struct file_op *f, off_t at)
{
	a->sock = false;
	a->ring = at >= 0 && weft__uring_submit_rw(&a->op, f->fd, f->write, f->p, f->len, at) == 0;
	if (a->ring)
		return 0;
	a->call = (struct weft__offload_call){ .fn = file_run, .arg = f };
	return weft__offload_submit(&a->call);
}

static void **away_done(struct file_away *a)
{
	return a->ring ? &a->op.done : &a->call.done;
}

/* What a's waits are counted as (weft_stats' parked_by). */
static int away_cause(const struct file_away *a)
{
	return a->sock ? WEFT_PARK_IO : WEFT_PARK_OFFLOAD;
}

/* Stops a, whose wait ended early, and waits until it has ended: true if
 * it moved nothing (withdrawn from the pool's queue, or cancelled on its
 * ring: -ECANCELED, or -EINTR from a worker of the kernel's that the
 * cancel interrupted), false if its result stands. */
static bool away_stop(struct file_away *a)
{
	if (a->ring) {
		weft__uring_stop(&a->op, away_cause(a));
		return a->op.res == -ECANCELED || a->op.res == -EINTR;
	}
	if (weft__offload_withdraw(&a->call))
		return true;
	weft__completion_wait(&a->call.done, false, -1, away_cause(a));
	return false;
}

/* A file_park's entry on its fd's `files`. */
struct file_wait {
	struct weft__list_link link;
	struct weft__waiter *w;
};

/* weft_close's wake of the transfers parked off the worker on e and of
 * those waiting for its position turn (forget): ECANCELED, under qlock
 * (see file_park and pos_take), the turn's woken after its release. */
static void close_files(struct weft__fd *e)
{
	struct weft__wakes ws = { .head = NULL };
	weft__lock_acquire(&e->qlock);
	for (struct weft__list_link *l = e->files.head; l; l = l->next)
		weft__waiter_wake(WEFT__LIST_ENTRY(l, struct file_wait, link)->w, ECANCELED);
	weft__waitq_claim_all(&e->pos_queue, ECANCELED, &ws);
	weft__lock_release(&e->qlock);
	weft__wakes_run(&ws);
}

/*
 * The position turn.  read(2) and write(2) hold the file's position lock
 * for their whole transfer; a ring's transfer holds nothing.  At offset -1
 * the kernel reads the position when it issues the transfer and advances
 * it when it completes, unlocked, so two in flight read the same bytes
 * (test_file_adv's two_interrupted_readers), and an O_DIRECT read that
 * completes asynchronously need not advance it at all (seen on Linux
 * 6.18: readers one at a time read the same blocks again).  So under the
 * uring backend every weft call that moves a file's position takes its
 * fd's turn for the whole call: weft_read and weft_write (file_call: its
 * RWF_NOWAIT tries at the position, under the kernel's lock, included:
 * they would race a ring's transfer), weft_readv, weft_writev and
 * weft_sendfile's out_fd (pos_enter: a readv(2) at the position beside a
 * ring's transfer reads its block again, and the ring side's lseek moves
 * the position back), and weft_sendfile's in_fd with a NULL offset
 * (weft__io_pos_hold).  A transfer that goes to the ring goes at the
 * position read with lseek, which file_away moves on by what the transfer
 * moved (ring_offset); an O_APPEND write goes to the pool, the flag read
 * when the write would go to the ring (fcntl(F_SETFL) may set it after
 * the fd was registered).  One
 * call at a time per fd; the others queue, oldest first, on the fd's
 * pos_queue (waitq.h), where a deadline, weft_cancel, weft_interrupt or
 * weft_close ends their wait.  A turn given back goes to the oldest
 * waiter (claimed with 0: it holds the turn even if its deadline raced the
 * claim, and its transfer sees the deadline); weft_close claims the
 * waiters with ECANCELED.  The turn is weft's, per fd number: another
 * number for the same open file (dup(2)) or a plain read(2) beside it is
 * not serialised with a ring's transfer (weft.h, weft_read).  Under epoll
 * the kernel's position lock serialises them all, and no turn is taken.
 * test/models/posturn.pml checks the turn.
 */

/* Takes io's fd's position turn: 0, else ETIMEDOUT, ECANCELED (a cancel,
 * or a close of the fd) or EINTR, the turn not taken.  The close check
 * and the queueing are under one hold of qlock, which close_files takes
 * after its gen bump (seq_cst): either it finds the node or the check
 * sees the close. */
static int pos_take(struct weft__io *io, int64_t deadline)
{
	struct weft__fd *e = io->e;
	weft__lock_acquire(&e->qlock);
	bool busy = e->pos_busy;
	e->pos_busy = true;
	int r = !busy ? 0 : io_closed(io) ? ECANCELED : weft__clock_deadline_passed(deadline) ? ETIMEDOUT : -1;
	if (r >= 0) {
		weft__lock_release(&e->qlock);
		return r;
	}
	io->w = NULL;	/* it parks: it may go on on another worker (io_moved) */
	struct weft__wait x;
	weft__wait_enqueue(&x, &e->pos_queue, NULL);
	x.waiter.cause = WEFT_PARK_IO;	/* for the fd, as its readiness */
	r = weft__wait_park(&x, &e->qlock, &e->pos_queue, deadline);
	if (r == 0 && io_closed(io)) {	/* handed the turn as the close began */
		pos_give(io);
		r = ECANCELED;
	}
	return r;
}

/* Gives the turn back: to the oldest waiter, if any, else free. */
static void pos_give(struct weft__io *io)
{
	struct weft__fd *e = io->e;
	struct weft__wakes ws = { .head = NULL };
	weft__lock_acquire(&e->qlock);
	struct weft__wnode *n = weft__waitq_claim(&e->pos_queue, &ws);
	if (n)
		weft__wakes_add(&ws, n, 0);
	else
		e->pos_busy = false;
	weft__lock_release(&e->qlock);
	weft__wakes_run(&ws);
}

/* A call on a file that is not on the file path (weft_readv, weft_writev,
 * weft_sendfile's out_fd: one syscall at the position per attempt) takes
 * the position turn under the uring backend, as file_call does, so that it
 * never runs beside a ring's transfer at the position; io_end gives it back
 * (LEAVE_POS).  0, else pos_take's error. */
static __attribute__((noinline)) int pos_enter(struct weft__io *io, int64_t deadline)
{
	if (weft__uring_backend() != WEFT_IO_URING)
		return 0;
	int e = pos_take(io, deadline);
	if (e == 0)
		io->leave |= LEAVE_POS;
	return e;
}

int weft__io_pos_hold(struct weft__io *io, int fd, int64_t deadline)
{
	io->e = NULL;
	if (weft__uring_backend() != WEFT_IO_URING)
		return 0;
	if (io_begin(io, fd, deadline) != 0)
		return -1;
	int e = (io->e->flags & FD_FILE) ? pos_enter(io, deadline) : 0;
	return e ? (int)io_return(io, -1, e) : 0;
}

void weft__io_pos_drop(struct weft__io *io)
{
	if (io->e)
		io_end(io);
}

/*
 * Parks until *done completes, the deadline passes, or a weft_cancel, a
 * weft_interrupt or a weft_close of the fd ends the wait: 0 (complete,
 * whoever else woke it: an interrupt that came meanwhile stays pending),
 * else ETIMEDOUT, ECANCELED or EINTR; cause: what the wait counts as
 * (WEFT_PARK_OFFLOAD, or WEFT_PARK_IO for a socket's).  The waiter is published twice: in
 * *done for the completer (park.h, completions) and on the fd's `files`
 * for weft_close (forget), under qlock, which the closer holds while it
 * wakes and the waiter takes to unlink before it returns.  The close check
 * comes after the push: forget bumps gen (seq_cst) before it walks the
 * list, and qlock orders the walk after or before the push (Dekker, as a
 * slot's park: fdtable.h), so either the walk finds the waiter or the
 * check sees the close.
 */
static int file_park(struct weft__io *io, void **done, int64_t deadline, int cause)
{
	struct weft__waiter w;
	weft__waiter_init(&w, cause);
	if (!at_cas_ptr(done, NULL, &w)) {	/* complete already */
		weft__park_interrupt_unused(w.co, weft__waiter_disarm(&w));
		return 0;
	}
	struct weft__fd *e = io->e;
	struct file_wait fw = { .w = &w };
	weft__lock_acquire(&e->qlock);
	weft__list_push(&e->files, &fw.link);
	weft__lock_release(&e->qlock);
	if (io_closed(io))
		weft__waiter_wake(&w, ECANCELED);
	int r = weft__waiter_wait_fenced(&w, deadline);
	weft__lock_acquire(&e->qlock);
	weft__list_unlink(&e->files, &fw.link);
	weft__lock_release(&e->qlock);
	if (weft__slot_retract(done, &w))
		return r;	/* not complete: taken back */
	weft__park_interrupt_unused(w.co, r);
	return 0;
}

/* Whether fd's open file has O_APPEND now: read at each write that would
 * go to a ring, since fcntl(F_SETFL) may set it at any time (true when
 * fcntl fails: the pool is right either way). */
static bool appends(int fd)
{
	int fl = weft__sys_fcntl(fd, F_GETFL, 0);
	return fl < 0 || (fl & O_APPEND);
}

/* The offset of f's transfer on a ring: f's own; for one at the file
 * position, under the position turn, the position (lseek), which
 * file_away moves on by what the transfer moved; -1 for the pool: a
 * transfer at the position without the turn, or an O_APPEND write (it
 * lands at the end of the file, where the position must follow it). */
static off_t ring_offset(const struct file_op *f)
{
	if (f->off >= 0)
		return f->off;
	if (!f->turn || (f->write && appends(f->fd)))
		return -1;
	return lseek(f->fd, 0, SEEK_CUR);	/* -1 (a device without one): the pool */
}

/* Waits for a, started, as file_park does, and stops it if the wait ended
 * early: a ring op's result, or -errno; a pool call's leaves its result in
 * f (0 returned). */
static int away_wait(struct weft__io *io, struct file_away *a, int64_t deadline)
{
	int r = file_park(io, away_done(a), deadline, away_cause(a));
	if (r && away_stop(a))
		return -r;
	if (r == EINTR)	/* the transfer's result stands: the interrupt waits */
		weft__park_interrupt_keep(weft_self());
	return a->ring ? a->op.res : 0;
}

/* One transfer of f off the worker: its result, or -errno. */
static ssize_t file_away(struct weft__io *io, struct file_op *f, int64_t deadline)
{
	struct file_away a;
	off_t at = ring_offset(f);
	int e = away_start(&a, f, at);
	if (e < 0)
		return e;
	int r = away_wait(io, &a, deadline);
	if (r < 0)
		return r;
	if (!a.ring)
		return f->n >= 0 ? f->n : -f->err;
	if (f->off < 0 && r > 0)	/* the position, as read(2) leaves it */
		lseek(f->fd, at + r, SEEK_SET);
	return r;
}

/* One transfer of f: on the worker when the page cache answers at once,
 * else off it; its result, or -errno. */
static ssize_t file_once(struct weft__io *io, struct file_op *f, int64_t deadline)
{
	unsigned *off = &io->e->nowait_off[f->write ? FD_SLOT_OUT : FD_SLOT_IN];
	if (at_load_uint(off))
		return file_direct(f);
	if (!(io->e->flags & FD_DIRECT)) {
		ssize_t n = file_rw(f, RWF_NOWAIT);
		if (n >= 0)
			return n;
		int e = weft__err_get();
		if (e == EOPNOTSUPP) {	/* the file system cannot say */
			at_store_uint(off, 1);
			return file_direct(f);
		}
		if (e != EAGAIN && e != EINTR)
			return -e;
	}
	if (weft__clock_deadline_passed(deadline))
		return -ETIMEDOUT;	/* a past deadline: no waiting */
	io->w = NULL;	/* it may go on on another worker */
	return file_away(io, f, deadline);
}

/* file_call's loop over f (f->turn as the caller took it). */
static ssize_t file_moves(struct weft__io *io, struct buf_op *b, struct file_op *f, int64_t deadline)
{
	bool write = f->write;
	size_t len = write ? b->op.len : b->op.asked, done = 0;
	do {
		ssize_t n = done && (weft__co_cancelled() || io_closed(io)) ? -ECANCELED : 0;
		if (n == 0) {
			f->p = (char *)(write ? b->p.out : b->p.in) + done;
			f->len = len - done;
			f->off = b->off < 0 ? -1 : b->off + (off_t)done;
			n = file_once(io, f, deadline);
		}
		if (n < 0 && (write || !done))
			return n;
		if (n < 0) {	/* a read's error after some bytes, which stand */
			weft__park_interrupt_unused(weft_self(), (int)-n);
			break;
		}
		if (n == 0)
			break;	/* end of file; or a write that took nothing */
		done += (size_t)n;
	} while (done < len);
	return (ssize_t)done;
}

/* weft_read's, weft_pread's, weft_write's and weft_pwrite's path on a
 * file; op is a buf_op.  Each goes on until all of len is moved, as read(2)
 * and write(2) do on a file: a short RWF_NOWAIT read took the cached head
 * of the range, and the rest is tried again (0 at end of file, else EAGAIN
 * and a helper).  A read that fails after some bytes returns them (they
 * moved the file position; an interrupt stays pending for the next wait);
 * a write fails with a prefix written (weft.h).  One at the file position
 * holds the fd's position turn throughout under the uring backend. */
static __attribute__((noinline)) ssize_t file_call(struct weft__io *io, struct weft__io_op *op, bool write,
						   int64_t deadline)
{
	struct buf_op *b = (struct buf_op *)op;
	struct file_op f = { .fd = io->fd, .write = write,
			     .turn = b->off < 0 && weft__uring_backend() == WEFT_IO_URING };
	int e = f.turn ? pos_take(io, deadline) : 0;
	if (e)
		return io_return(io, -1, e);
	ssize_t n = file_moves(io, b, &f, deadline);
	if (f.turn)
		pos_give(io);
	if (n < 0)
		return io_return(io, -1, (int)-n);
	io_moved(io, n);
	return io_return(io, n, 0);
}

/* ------------------------------------------------------ sockets on rings */

/*
 * Under WEFT_IO=uring a stream socket's weft_read or weft_write that would
 * wait for readiness (the try said EAGAIN or came back short, or the
 * drained hint skips the try: park_if_drained) instead queues an
 * IORING_OP_RECV (IORING_OP_SEND) into the caller's own buffer on its
 * worker's ring and parks on the op's completion, which its worker's next
 * pass submits with every SQE its coroutines queued since the last
 * (weft__uring_flush: one io_uring_enter for many).  The park, deadline,
 * cancel, interrupt and close are the file ops' (away_wait): the op's CQE
 * is waited for before the call returns, and the bytes it moved stand.
 * Other calls (vectored, msg, datagrams, accept, connect) and every other
 * backend wait on readiness.
 */
static bool sock_ring(const struct weft__io *io, const struct weft__io_op *op)
{
	return op->file && (io->e->flags & FD_STREAM) && weft__uring_sockets();
}

/* One recv (send) of p[0..len) on io's socket through the ring: its
 * result, or -errno; -EAGAIN where the ring could not take it (no SQE, or
 * the kernel refused to wait), to wait on readiness instead.  The call
 * takes the direction's turn first, so that the FIFO of its waiters
 * (fdtable.h) holds: a caller finding another waiter there (in the slot,
 * queued, or holding the turn on a ring) waits on readiness behind it, and
 * a turn holder's ring op leaves readiness that comes meanwhile in the
 * slot (FD_TURN_READY) without a wake. */
static ssize_t sock_ring_once(struct weft__io *io, bool send, void *p, size_t len, int64_t deadline)
{
	if (weft__clock_deadline_passed(deadline))
		return -ETIMEDOUT;	/* a past deadline: no waiting */
	int d = send ? FD_SLOT_OUT : FD_SLOT_IN;
	unsigned char turn = (unsigned char)FD_WAKE_TURN(send ? WEFT_OUT : WEFT_IN);
	if (!(io->leave & turn) && !weft__fd_take_turn(io->e, d))
		return -EAGAIN;	/* others wait: queue behind them */
	io->leave |= turn;	/* passed on at the return, whatever happens */
	struct file_away a = { .ring = true, .sock = true };
	if (weft__uring_queue_sock(&a.op, io->fd, send, p, len) < 0)
		return -EAGAIN;
	io->w = NULL;	/* it may go on on another worker */
	return away_wait(io, &a, deadline);
}

/* After a try that said EAGAIN (n < 0) or a read skipped by the drained
 * hint: the read through the ring, or, where the ring says -EAGAIN, a
 * park on readiness (io_retry); the bytes, or -1 with errno to retry
 * after a park (0 in *e), or an errno to fail with (in *e). */
static ssize_t sock_ring_read(struct weft__io *io, struct weft__io_op *op, int64_t deadline, int *e)
{
	ssize_t n = sock_ring_once(io, false, ((struct buf_op *)op)->p.in, op->asked, deadline);
	*e = n >= 0 ? 0 : (int)-n;
	if (n == -EAGAIN)
		*e = io_retry(io, EAGAIN, WEFT_IN, deadline);
	return n >= 0 ? n : -1;
}

/* A write that must wait for room (its try said EAGAIN, or was short on a
 * socket, err EAGAIN) or failed with err: 0 to go on (the ring's send moved
 * op->done on, or readiness came), else the errno to fail with. */
static int write_wait(struct weft__io *io, struct weft__io_op *op, int err, int64_t deadline)
{
	if (err != EAGAIN || !sock_ring(io, op))
		return io_retry(io, err, WEFT_OUT, deadline);
	char *p = (char *)((struct buf_op *)op)->p.out + op->done;
	ssize_t n = sock_ring_once(io, true, p, op->len - op->done, deadline);
	if (n == -EAGAIN)
		return io_retry(io, EAGAIN, WEFT_OUT, deadline);
	if (n < 0)
		return (int)-n;
	op->done += (size_t)n;
	return 0;
}

/* How a call on a file (FD_FILE) goes on: -1, on the file path (op is a
 * buf_op: file_call); else 0, with the position turn if it needs one
 * (pos_enter), or pos_enter's error. */
static int file_enter(struct weft__io *io, struct weft__io_op *op, int64_t deadline)
{
	if (op->file)
		return -1;
	return op->pos_held ? 0 : pos_enter(io, deadline);
}

/* The one-attempt loop (io.h).  A read (asked > 0) may park first after a
 * short read (park_if_drained) and marks the next one; any other call that
 * took readiness for WEFT_IN clears the mark, since the edge it consumed
 * may have brought data it left queued (a MSG_PEEK).  attempt is op's, as
 * a parameter: inlined into weft_read and weft_write it is a constant, and
 * their syscall a direct call. */
#define IO_LOOP static inline __attribute__((always_inline)) ssize_t

/* io_begin for op, which learns the fd's kind for its attempts. */
static int io_open(struct weft__io *io, int fd, struct weft__io_op *op, int64_t deadline)
{
	if (io_begin(io, fd, deadline) != 0)
		return -1;
	op->socket = io->e->flags & FD_SOCKET;
	return 0;
}

static ssize_t pread_attempt(struct weft__io_op *op, int fd);

IO_LOOP io_call(int fd, int events, weft__io_attempt *attempt, struct weft__io_op *op,
		int64_t deadline)
{
	struct weft__io io;
	if (io_open(&io, fd, op, deadline) != 0)
		return -1;
	if (io.e->flags & FD_FILE) {
		int e = file_enter(&io, op, deadline);
		if (e < 0)
			return file_call(&io, op, false, deadline);
		if (e)
			return io_return(&io, -1, e);
	}
	/* pread(2)'s answer on a socket, before any wait (park_if_drained) */
	if (attempt == pread_attempt && op->socket)
		return io_return(&io, -1, ESPIPE);
	bool reads = events == WEFT_IN, hint = reads && op->asked > 0;
	int e = 0;
	ssize_t n = -1;
	/* the ring is asked about only where the read would park anyway */
	if (hint && drained(&io, deadline) && sock_ring(&io, op))
		n = sock_ring_read(&io, op, deadline, &e);
	else if (hint)
		e = park_if_drained(&io, deadline);
	if (e)
		return io_return(&io, -1, e);
	for (;;) {
		if (n < 0)
			n = attempt(op, fd);
		if (n < 0) {
			int err = weft__err_get();
			if (hint && err == EAGAIN && sock_ring(&io, op))
				n = sock_ring_read(&io, op, deadline, &e);
			else
				e = io_retry(&io, err, events, deadline);
		}
		if (n >= 0) {
			if (reads)
				at_store_uint(&io.e->drained, hint && n > 0 && (size_t)n < op->asked);
			io_moved(&io, n);
			return io_return(&io, n, 0);
		}
		if (e)
			return io_return(&io, -1, e);
	}
}

ssize_t weft__io_call(int fd, int events, struct weft__io_op *op, int64_t deadline)
{
	return io_call(fd, events, op->attempt, op, deadline);
}

/* recv(2) on sockets: the socket layer's entry, without read(2)'s file
 * layer (the position lock, the permission and fsnotify hooks): less per
 * call (docs/notes/2026-12-06-measurements-behind-the-code.md, "recv");
 * read(2) on everything else. */
static ssize_t read_attempt(struct weft__io_op *op, int fd)
{
	char *p = ((struct buf_op *)op)->p.in;
	if (op->socket)
		return weft__sys_recvfrom(fd, p, op->asked, 0, NULL, NULL);
	return weft__sys_read(fd, p, op->asked);
}

ssize_t weft_read(int fd, void *buf, size_t len, int64_t deadline)
{
	struct buf_op b = { { .attempt = read_attempt, .asked = len, .file = true }, { .in = buf }, -1 };
	return io_call(fd, WEFT_IN, read_attempt, &b.op, deadline);
}

/* pread(2), on an fd that is not a file (a pipe or socket: ESPIPE). */
static ssize_t pread_attempt(struct weft__io_op *op, int fd)
{
	struct buf_op *b = (struct buf_op *)op;
	struct iovec iov = { b->p.in, op->asked };
	return weft__sys_preadv2(fd, &iov, 1, b->off, 0);
}

ssize_t weft_pread(int fd, void *buf, size_t len, off_t offset, int64_t deadline)
{
	if (offset < 0)	/* before io_call: pread's offset is never the position */
		return weft_self() ? weft__err_fail(EINVAL) : weft__err_fail(EPERM);
	struct buf_op b = { { .attempt = pread_attempt, .asked = len, .file = true }, { .in = buf }, offset };
	return io_call(fd, WEFT_IN, pread_attempt, &b.op, deadline);
}

/* The write-all loop (io.h). */
IO_LOOP io_write_all(int fd, weft__io_attempt *attempt, struct weft__io_op *op, int64_t deadline)
{
	struct weft__io io;
	if (io_open(&io, fd, op, deadline) != 0)
		return -1;
	if (op->len > SSIZE_MAX)
		return io_return(&io, -1, EINVAL);
	if (io.e->flags & FD_FILE) {
		int e = file_enter(&io, op, deadline);
		if (e < 0)
			return file_call(&io, op, true, deadline);
		if (e)
			return io_return(&io, -1, e);
	}
	op->done = 0;
	while (op->done < op->len) {
		op->asked = 0;
		ssize_t n = attempt(op, fd);
		int e;
		if (n > 0) {
			op->done += (size_t)n;
			/* a short send filled the socket buffer: wait for room
			 * (an edge) instead of a send that says EAGAIN */
			if (op->done == op->len || !op->socket || (size_t)n >= op->asked)
				continue;
			e = write_wait(&io, op, EAGAIN, deadline);
		} else if (n == 0) {
			break;	/* the source ended (sendfile at the end of in_fd) */
		} else {
			e = write_wait(&io, op, weft__err_get(), deadline);
		}
		if (e)
			return io_return(&io, -1, e);
	}
	io_moved(&io, (ssize_t)op->done);
	return io_return(&io, (ssize_t)op->done, 0);
}

ssize_t weft__io_write_all(int fd, struct weft__io_op *op, int64_t deadline)
{
	return io_write_all(fd, op->attempt, op, deadline);
}

/* send(2) without SIGPIPE on sockets, write(2) on everything else (pipes:
 * the workers block SIGPIPE, so write returns EPIPE there too). */
static ssize_t write_attempt(struct weft__io_op *op, int fd)
{
	const char *p = ((struct buf_op *)op)->p.out + op->done;
	op->asked = op->len - op->done;
	if (op->socket)
		return weft__sys_send(fd, p, op->asked, MSG_NOSIGNAL);
	return weft__sys_write(fd, p, op->asked);
}

ssize_t weft_write(int fd, const void *buf, size_t len, int64_t deadline)
{
	struct buf_op b = { { .attempt = write_attempt, .len = len, .file = true }, { .out = buf }, -1 };
	return io_write_all(fd, write_attempt, &b.op, deadline);
}

/* pwrite(2) from op->done on, on an fd that is not a file (ESPIPE). */
static ssize_t pwrite_attempt(struct weft__io_op *op, int fd)
{
	struct buf_op *b = (struct buf_op *)op;
	struct iovec iov = { (char *)b->p.out + op->done, op->len - op->done };
	op->asked = iov.iov_len;
	return weft__sys_pwritev2(fd, &iov, 1, b->off + (off_t)op->done, 0);
}

ssize_t weft_pwrite(int fd, const void *buf, size_t len, off_t offset, int64_t deadline)
{
	if (offset < 0)
		return weft_self() ? weft__err_fail(EINVAL) : weft__err_fail(EPERM);
	struct buf_op b = { { .attempt = pwrite_attempt, .len = len, .file = true }, { .out = buf }, offset };
	return io_write_all(fd, pwrite_attempt, &b.op, deadline);
}

static bool out_of_resources(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

/* Sleeps a backoff step, not past deadline: 0, or -errno (e when the deadline
 * is already reached: the error that made us back off). */
static int back_off(int64_t *step, int64_t deadline, int e)
{
	int64_t now = weft_now(), until = now + *step;
	if (deadline >= 0 && deadline <= now)
		return -e;
	if (deadline >= 0 && deadline < until)
		until = deadline;
	if (*step < BACKOFF_MAX_NS)
		*step *= 2;
	return weft_sleep(until) == 0 ? 0 : -weft__err_get();
}

void weft__io_nodelay(int fd)
{
	int one = 1;
	/* Best effort: sockets that are not TCP refuse it, each its own way
	 * (EOPNOTSUPP from a Unix socket, ENOPROTOOPT from vsock, TIPC,
	 * SCTP), and a connection never fails for it. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int weft_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int64_t deadline)
{
	struct weft__io io;
	if (io_begin(&io, fd, deadline) != 0)
		return -1;
	int64_t step = BACKOFF_MIN_NS;
	for (;;) {
		int c = accept4(fd, addr, addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c >= 0) {
			weft__io_nodelay(c);
			return (int)io_return(&io, c, 0);
		}
		int e = weft__err_get();
		if (out_of_resources(e)) {
			e = -back_off(&step, deadline, e);
			if (!e && io_closed(&io))
				e = ECANCELED;
		} else if (e != ECONNABORTED) {
			e = io_retry(&io, e, WEFT_IN, deadline);
			step = BACKOFF_MIN_NS;
		} else {
			e = 0;
		}
		if (e)
			return (int)io_return(&io, -1, e);
	}
}

/* poll(2) of n fds without waiting: 0, or -errno (EBADF: one is not
 * open). */
static int poll_now(struct pollfd *p, nfds_t n)
{
	int r;
	while ((r = poll(p, n, 0)) < 0 && weft__err_get() == EINTR)
		;
	if (r < 0)
		return -weft__err_get();
	for (nfds_t i = 0; i < n; i++)
		if (p[i].revents & POLLNVAL)
			return -EBADF;
	return 0;
}

static struct pollfd poll_for(int fd, int events)
{
	return (struct pollfd){ .fd = fd, .events = (short)((events & WEFT_IN ? POLLIN : 0) |
							       (events & WEFT_OUT ? POLLOUT : 0)) };
}

/* The ready subset of events in p's answer (a hang-up or an error is
 * ready for both). */
static int poll_ready(const struct pollfd *p, int events)
{
	int r = 0;
	if ((events & WEFT_IN) && (p->revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)))
		r |= WEFT_IN;
	if ((events & WEFT_OUT) && (p->revents & (POLLOUT | POLLHUP | POLLERR)))
		r |= WEFT_OUT;
	return r;
}

/* poll(2) without waiting: the ready subset of events, or -errno. */
static int ready_now(int fd, int events)
{
	struct pollfd p = poll_for(fd, events);
	int r = poll_now(&p, 1);
	return r < 0 ? r : poll_ready(&p, events);
}

/* Readiness remembered from before is stale: poll decides.  It was what
 * a read's drained hint counted on (park_if_drained), so the next read
 * must try.  Returns the directions whose remembered readiness it took. */
static int forget_ready(struct weft__io *io, int events)
{
	int took = 0;
	if (events & WEFT_IN) {
		if (weft__fd_slot_forget(&io->e->slot[FD_SLOT_IN]))
			took |= WEFT_IN;
		at_store_uint(&io->e->drained, 0);
	}
	if ((events & WEFT_OUT) && weft__fd_slot_forget(&io->e->slot[FD_SLOT_OUT]))
		took |= WEFT_OUT;
	return took;
}

/* Hands readiness on dirs back to the fd: to the waiter in its slot, or
 * left READY for the next one (a stale READY costs that one a retry).  A
 * call gives back readiness it took from the slot (forget_ready), even
 * when it reports it: it only looks, its caller may leave data behind,
 * and another waiter (one parked after its own EAGAIN waits for an edge)
 * may have counted on it; a select gives back too what it saw and did not
 * report.  A turn held is passed on anyway (io_end), and leaves READY with
 * nobody queued; a closed fd's waiters are woken by its close. */
static void hand_back(struct weft__io *io, int dirs)
{
	if (io_closed(io))
		return;
	for (int bit = WEFT_IN, d = FD_SLOT_IN; bit <= WEFT_OUT; bit <<= 1, d++) {
		if (!(dirs & bit) || (io->leave & FD_WAKE_TURN(bit)))
			continue;
		io->leave &= (unsigned char)~bit;
		weft__fd_redeliver(io->e, d);
	}
}

/* weft_wait's loop, for an io already begun: exact readiness, or -errno.
 * Remembered readiness it took that poll confirms is handed back. */
static int wait_ready(struct weft__io *io, int events, int64_t deadline)
{
	int took, r;
	do {
		took = forget_ready(io, events);
		r = ready_now(io->fd, events);
	} while (r == 0 && (r = io_park(io, events, deadline)) >= 0);
	if (r > 0)
		hand_back(io, took & r);
	return r;
}

/* weft_wait after the caller's EAGAIN: one park, no poll; readiness it
 * took may be spurious (weft.h), and a wake that brought none counts as
 * readiness for all of events (the caller's retry will tell). */
static int wait_edge(struct weft__io *io, int events, int64_t deadline)
{
	int r = io_park(io, events, deadline);
	return r == 0 ? events : r;
}

int weft_wait(int fd, int events, int64_t deadline)
{
	int dirs = events & (WEFT_IN | WEFT_OUT);
	if (!dirs || (events & ~(WEFT_IN | WEFT_OUT | WEFT_AFTER_EAGAIN)))
		return weft_self() ? weft__err_fail(EINVAL) : weft__err_fail(EPERM);
	struct weft__io io;
	if (io_begin(&io, fd, deadline) != 0)
		return -1;
	int r = events & WEFT_AFTER_EAGAIN ? wait_edge(&io, dirs, deadline)
					   : wait_ready(&io, dirs, deadline);
	if (dirs & WEFT_IN)
		at_store_uint(&io.e->drained, 0);	/* it dropped READY: the next read must try */
	return (int)io_return(&io, r, -r);
}

/* ------------------------------------------------------ select's fd cases */

int weft__io_case_begin(struct weft__io_case *c, int fd, int events, int64_t deadline)
{
	c->events = (unsigned char)events;
	c->ready = 0;
	c->took = 0;
	return io_begin(&c->io, fd, deadline);
}

int weft__io_cases_poll(struct weft__io_case *const *cs, size_t n)
{
	struct pollfd p[2];
	WEFT__ASSERT(n <= 2);	/* one per direction */
	int took[2];
	for (size_t i = 0; i < n; i++) {
		took[i] = forget_ready(&cs[i]->io, cs[i]->events);
		p[i] = poll_for(cs[i]->io.fd, cs[i]->events);
	}
	int r = poll_now(p, n);
	for (size_t i = 0; i < n; i++) {
		cs[i]->ready = r == 0 && poll_ready(&p[i], cs[i]->events);
		cs[i]->took = cs[i]->ready && took[i];
	}
	return r;
}

int weft__io_case_park(struct weft__io_case *c, struct weft__waiter *w)
{
	c->io.w = NULL;	/* it may go on on another worker */
	c->p = (struct weft__io_parked){ 0, 0, 0 };
	if (c->io.e->flags & FD_NO_POLL)	/* epoll cannot tell: always ready */
		return WEFT__PARK_WAKE_READY | c->events;
	io_publish(&c->io, c->events, w, c->q, &c->p);
	/* The close check comes after the slot CAS (see fdtable.h). */
	if (io_closed(&c->io))
		return ECANCELED;
	return c->p.ready ? WEFT__PARK_WAKE_READY | c->p.ready : 0;
}

void weft__io_case_settle(struct weft__io_case *c, struct weft__waiter *w, int r)
{
	int claimed = io_retract(&c->io, &c->p, w, c->q);
	c->ready = io_settled(&c->io, c->events, c->p.ready, claimed, c->q, r) != 0;
}

bool weft__io_case_closed(const struct weft__io_case *c)
{
	return io_closed(&c->io);
}

void weft__io_case_end(struct weft__io_case *c, bool reported)
{
	if (c->ready && (c->took || !reported))
		hand_back(&c->io, c->events);
	io_end(&c->io);
}

int weft_connect(int fd, const struct sockaddr *addr, socklen_t addrlen, int64_t deadline)
{
	struct weft__io io;
	if (io_begin(&io, fd, deadline) != 0)
		return -1;
	if (connect(fd, addr, addrlen) == 0)
		return (int)io_return(&io, 0, 0);
	int e = weft__err_get();
	if (e != EINPROGRESS && e != EINTR)
		return (int)io_return(&io, -1, e);
	int r = wait_ready(&io, WEFT_OUT, deadline);
	if (r < 0)
		return (int)io_return(&io, -1, -r);
	socklen_t len = sizeof e;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
		e = weft__err_get();
	return (int)io_return(&io, e ? -1 : 0, e);
}

/*
 * weft_close's protocol up to the close(2), which weft_release shares: wakes
 * the fd's waiters with ECANCELED, waits for its calls in flight, takes it
 * out of its loop (with restore, back to the blocking mode it had before
 * weft registered it), which clears the entry.  Returns whether it was
 * registered.  gen is left odd (FD_GEN_CLOSING): the caller hands the
 * entry on.  Every entry that exists goes through the protocol, registered
 * or not: a call holding a reference may be about to register fd
 * (io_begin).
 */
static bool forget(struct weft__fd *e, int fd, bool restore)
{
	/* a close(2) of the number's last file may still be finishing: the
	 * entry is ours once it has handed the entry on */
	unsigned gen = at_load_uint(&e->gen);
	gen_settled(e, &gen, false, -1);
	/* gen is odd only inside weft_close or weft_release (two at once on
	 * one fd are a caller's double close, which this would catch). */
	gen = at_faa_uint(&e->gen, FD_GEN_CLOSING);
	WEFT__ASSERT((gen & FD_GEN_PHASE) == 0);
	weft__fd_close_wake(e, FD_SLOT_IN);
	weft__fd_close_wake(e, FD_SLOT_OUT);
	close_files(e);
	while (at_load_uint(&e->refs) != 0)
		weft_yield();	/* calls woken above or registering are returning */
	/* no registration is under way: each is made under a reference */
	bool registered = at_load_uint(&e->owner) != 0;
	if (registered && restore && e->blocking) {
		int fl = weft__sys_fcntl(fd, F_GETFL, 0);
		if (fl >= 0)
			weft__sys_fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	if (registered)
		weft__loop_unregister(e, fd);
	return registered;
}

/* Moves e's generation on from phase `from` (FD_GEN_CLOSING or
 * FD_GEN_CLOSED) to `to` of the same close, FD_GEN_STEP being the next
 * file's: seq_cst, so a call that sees the new value sees the entry as
 * forget left it. */
static void gen_move(struct weft__fd *e, unsigned from, unsigned to)
{
	unsigned gen = at_faa_uint(&e->gen, to - from);
	WEFT__ASSERT((gen & FD_GEN_PHASE) == from);
}

/* For an fd that is open: 0, and its entry in *e (NULL if none was ever
 * made, or, with make, none could be); else -EPERM outside a coroutine,
 * -EBADF.  A number that is not open is only a number: its entry is left
 * alone (a call racing on it gets EBADF from its own registration, not
 * ECANCELED from a close that closes nothing). */
static int open_entry(int fd, struct weft__fd **e, bool make)
{
	if (!weft_self())
		return -EPERM;
	if (weft__sys_fcntl(fd, F_GETFD, 0) < 0)
		return -EBADF;
	if (!make || weft__fd_get(fd, e) != 0)
		*e = weft__fd_find(fd);
	return 0;
}

/*
 * weft_close's protocol with op(fd, arg) in place of close(2): forget,
 * then op with gen at FD_GEN_CLOSED (a call that starts meanwhile waits
 * for it, io_begin), then the next file's generation.  op's result, or -1
 * with its errno.  The entry is made if need be: a call starting now may
 * be making it.  A number that is not open, or has no entry, gets op alone
 * when `any` (dup2 onto a free number is no close), else EBADF.
 */
static int close_with(int fd, weft__io_op *op, void *arg, bool any)
{
	struct weft__fd *e;
	int r = open_entry(fd, &e, true);
	if (r == -EBADF && any)
		return op(fd, arg);
	if (r < 0)
		return weft__err_fail(-r);
	if (!e)
		return op(fd, arg);
	forget(e, fd, false);
	gen_move(e, FD_GEN_CLOSING, FD_GEN_CLOSED);
	weft__fault_pause(WEFT__FAULT_CLOSE, (uintptr_t)fd);	/* tests: calls may start here */
	r = op(fd, arg);
	int err = r < 0 ? weft__err_get() : 0;
	weft__fault_pause(WEFT__FAULT_CLOSED, (uintptr_t)fd);	/* tests: the number may be reused here */
	gen_move(e, FD_GEN_CLOSED, FD_GEN_STEP);
	return r < 0 ? weft__err_fail(err) : r;
}

/* close(2), the system call: never an interposed close() (sys.h), which
 * may be libweft-hook's, itself a way into close_with.  Its EINTR (a file
 * system's flush interrupted; under the uring backend a ring's completion
 * does it with no signal: weft.h) is a success: Linux has freed the number
 * before the flush, and a retry would close its next owner. */
static int close_op(int fd, void *arg)
{
	(void)arg;
	int r = weft__sys_close(fd);
	return r < 0 && weft__err_get() == EINTR ? 0 : r;
}

int weft_close(int fd)
{
	return close_with(fd, close_op, NULL, false);
}

int weft__io_replace(int fd, weft__io_op *op, void *arg)
{
	return close_with(fd, op, arg, true);
}

int weft_release(int fd)
{
	struct weft__fd *e;
	int r = open_entry(fd, &e, false);
	if (r < 0)
		return weft__err_fail(-r);
	if (!e)
		return weft__err_fail(EBADF);
	bool registered = forget(e, fd, true);
	gen_move(e, FD_GEN_CLOSING, FD_GEN_STEP);
	return registered ? 0 : weft__err_fail(EBADF);
}

int weft_sleep(int64_t deadline)
{
	if (!weft_self())
		return weft__err_fail(EPERM);
	if (weft__co_cancelled())
		return weft__err_fail(ECANCELED);
	if (weft__clock_deadline_passed(deadline))
		return 0;
	struct weft__waiter w;
	weft__waiter_init(&w, WEFT_PARK_TIMER);
	int r = weft__waiter_wait(&w, deadline);
	return r == ETIMEDOUT ? 0 : weft__err_fail(r);
}
