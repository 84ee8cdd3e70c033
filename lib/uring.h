/* SPDX-License-Identifier: MIT */
/*
 * uring.h — the I/O backend chosen at weft_init ($WEFT_IO, weft_config.io):
 * epoll, or io_uring where the kernel gives it (docs/tuning.md, WEFT_IO).
 */
#ifndef WEFT_URING_H
#define WEFT_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct weft__worker;
struct weft__ring;

/*
 * Resolves the backend asked for (WEFT_IO_AUTO, WEFT_IO_EPOLL or
 * WEFT_IO_URING) and makes it the one in use: auto probes io_uring (a ring
 * set up with the flags wanted, the refused ones dropped one by one, and
 * every opcode needed supported) and takes epoll where the probe fails;
 * uring fails where it does: -errno (ENOSYS for a build without liburing or
 * a kernel without an opcode, else the setup's errno) after one stderr
 * line saying why.  0 on success.  sockets: $WEFT_URING_SOCKETS (see
 * weft__uring_sockets).
 */
int weft__uring_select(int asked, bool sockets);

/* The backend in use: WEFT_IO_EPOLL or WEFT_IO_URING. */
int weft__uring_backend(void);

/* Whether stream sockets' reads and writes that would wait go through the
 * workers' rings: only when WEFT_URING_SOCKETS=1 and WEFT_IO=uring were
 * asked for (they cost more CPU per message than readiness, measured:
 * docs/notes/2026-12-07-uring-sockets.md) and a completion wakes its
 * ring's owner only
 * (weft__loop_ring_wakes_owner; docs/design.md, "The io_uring
 * backend"). */
bool weft__uring_sockets(void);

/* Sets up w's ring under the uring backend (w->ring; NULL under epoll) and
 * has its worker's poller watch its eventfd: 0 or -errno, after one stderr
 * line, under WEFT_IO=uring; under auto a refused ring leaves w->ring NULL
 * (its transfers go to the offload pool) and returns 0. */
int weft__uring_ring_init(struct weft__worker *w);
void weft__uring_ring_fini(struct weft__worker *w);

/* The poller's event for the ring of worker `index`: completes the
 * operations whose CQEs arrived (any thread; uring.c). */
void weft__uring_reap(unsigned index);

/* After w's sleep: reaps w's ring if CQEs wait there, which its eventfd
 * announced to the poller but this wake did not carry (w only). */
void weft__uring_reap_own(struct weft__worker *w);

/*
 * One read or write in flight on a ring.  It lives with its caller (a
 * coroutine's stack) until its CQE has arrived: done completes (park.h)
 * only then, with res the CQE's result (bytes, or -errno; -ECANCELED for
 * one that a cancel stopped before it moved anything).
 */
struct weft__uring_op {
	void *done;		/* a completion: set by the reaper */
	int res;		/* the CQE's res, once done */
	struct weft__ring *ring;	/* the ring it went to (its cancel's) */
	void *in;		/* a read's buffer (NULL: a write) */
};

/* What an SQE of weft's does. */
enum weft__uring_kind { WEFT__URING_READ, WEFT__URING_WRITE, WEFT__URING_RECV, WEFT__URING_SEND };

/* The most one SQE moves (its length is 32 bits); the caller loops. */
#define WEFT__URING_MAX_LEN (1u << 30)

/* Submits pread(fd, p, len, off) (write: pwrite; len capped at
 * WEFT__URING_MAX_LEN) on the calling worker's ring: 0, the CQE will
 * complete op; or
 * -ENOSYS (no ring: the epoll backend, or a plain thread) or -EAGAIN (the
 * SQ is full), op is not in flight. */
int weft__uring_submit_rw(struct weft__uring_op *op, int fd, bool write, void *p, size_t len,
			  off_t off);
/* Queues recv(fd, p, len, 0) (send: send(fd, p, len, MSG_NOSIGNAL)) on the
 * calling worker's ring, for its worker's next flush: 0, the CQE will
 * complete op; or -ENOSYS or -EAGAIN as weft__uring_submit_rw. */
int weft__uring_queue_sock(struct weft__uring_op *op, int fd, bool send, void *p, size_t len);

/* Submits the SQEs queued on w's ring, if any (any thread). */
void weft__uring_flush(struct weft__worker *w);

/* Stops op, in flight: cancels it on its ring (IORING_OP_ASYNC_CANCEL),
 * from whichever thread the caller is on, after whatever is queued before
 * it, and waits (not cancellable; counted as `cause`, weft_stats' parked_by)
 * until its own CQE has come, cancelling it again while it does not (a
 * cancel can miss: uring.c).  op->res is then the CQE's: -ECANCELED, or
 * -EINTR, if the cancel stopped it. */
void weft__uring_stop(struct weft__uring_op *op, unsigned cause);

/* What the workers' rings did, summed over them (weft_stats, version 6):
 * SQEs submitted (transfers and cancels), io_uring_submit calls (each one
 * io_uring_enter), CQEs reaped (a cancel's own included), and
 * operations stopped (weft__uring_stop: one each, however many cancels it
 * sent).  All 0 under epoll. */
struct weft__uring_counts {
	uint64_t sqes, enters, cqes, cancels;
};
void weft__uring_counts(struct weft__uring_counts *out);

#endif
