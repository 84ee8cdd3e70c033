/* SPDX-License-Identifier: MIT */
/* The workers' rings (lib/uring.c) under the file path (lib/io.c): a
 * transfer in flight on a ring is ended by a deadline, weft_cancel,
 * weft_interrupt or weft_close only once its own CQE has come, and what
 * it moved is returned, never lost.
 *
 * A read from a regular file completes in microseconds, too fast to act
 * on while it is in flight.  So the scenes read a pipe that the fd table
 * has been told is a file opened O_DIRECT (white-box: FD_FILE | FD_DIRECT,
 * so every read goes to the ring without the RWF_NOWAIT try), made
 * blocking again: the ring's read then waits for data for as long as
 * nobody writes, and only a cancel ends it. */
#include "harness.h"
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "uring_test.h"
#include "park.h"	/* white-box: an op's completion */
#include "uring.h"	/* white-box: an op submitted, then a stuck worker */

static void check_backend(void)
{
	CHECK(stats_now().io_backend == WEFT_IO_URING);
}

/* ---- weft_close of an fd with a read in flight on a ring: the reader
 * returns ECANCELED (the close cancelled it on the ring and the reader
 * waited for its CQE) and the close returns.  A close that waited for the
 * transfer to end on its own would wait for ever: nobody writes. */

struct reader {
	int fd;
	int64_t deadline;
	char *buf;
	size_t len;
	ssize_t n;
	int err;
	atomic_bool done;
};

static void reader_main(void *arg)
{
	struct reader *r = arg;
	r->n = weft_pread(r->fd, r->buf, r->len, 0, r->deadline);
	r->err = errno;
	atomic_store(&r->done, true);
}

static void closer_main(void *arg)
{
	CHECK(weft_close(*(int *)arg) == 0);
}

static void close_main(void *unused)
{
	(void)unused;
	check_backend();
	int p[2];
	ring_pipe(p);
	char buf[64];
	struct reader r = { .fd = p[0], .deadline = -1, .buf = buf, .len = sizeof buf };
	uint64_t parks = stats_now().total.parks;
	weft_co *rc = go(reader_main, &r);
	wait_parks(parks, 1);	/* the read is on the ring */
	CHECK(!atomic_load(&r.done));
	weft_co *cc = go(closer_main, &p[0]);
	join(cc);
	join(rc);
	if (r.n != -1 || r.err != ECANCELED)
		fprintf(stderr, "close of an fd with a ring read in flight: %zd, errno %d\n", r.n, r.err);
	CHECK(r.n == -1 && r.err == ECANCELED);
	CHECK(weft_close(p[1]) == 0);
}

Test(uring, close_cancels_a_read_in_flight_on_a_ring)
{
	run_uring(2, close_main, NULL);
}

/* ---- a weft_read at the file position waits for its fd's position
 * turn (io.c) while another holds it: its deadline, weft_cancel,
 * weft_interrupt and weft_close each end that wait, at once, while the
 * holder's transfer is still under way (a pipe nobody writes: the file
 * position of a pipe is no position, so the holder's read is a helper's,
 * blocked in read(2)).  A waiter that only a give-back could wake would
 * wait for ever here. */

static void pos_reader_main(void *arg)
{
	struct reader *r = arg;
	r->n = weft_read(r->fd, r->buf, r->len, r->deadline);
	r->err = errno;
	atomic_store(&r->done, true);
}

/* A second reader of fd, parked for the turn, ended by `end` (NULL: its
 * deadline); returns its errno, the read having failed. */
static int turn_waiter_ended(int fd, int64_t deadline, void (*end)(weft_co *))
{
	char c;
	struct reader r = { .fd = fd, .deadline = deadline, .buf = &c, .len = 1 };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(pos_reader_main, &r);
	wait_parks(parks, 1);
	if (end)
		end(co);
	join(co);
	CHECK(r.n == -1);
	return r.err;
}

static void cancel_co(weft_co *co)
{
	CHECK(weft_cancel(co) == 0);
}

static void interrupt_co(weft_co *co)
{
	CHECK(weft_interrupt(co) == 0);
}

static void turn_main(void *unused)
{
	(void)unused;
	check_backend();
	int p[2];
	ring_pipe(p);
	char hc;
	struct reader holder = { .fd = p[0], .deadline = -1, .buf = &hc, .len = 1 };
	uint64_t parks = stats_now().total.parks;
	weft_co *hco = go(pos_reader_main, &holder);
	wait_parks(parks, 1);	/* the holder's read is with a helper */
	CHECK(turn_waiter_ended(p[0], weft_now() + 20 * MS, NULL) == ETIMEDOUT);
	CHECK(turn_waiter_ended(p[0], -1, cancel_co) == ECANCELED);
	CHECK(turn_waiter_ended(p[0], -1, interrupt_co) == EINTR);
	char c;
	struct reader last = { .fd = p[0], .deadline = -1, .buf = &c, .len = 1 };
	parks = stats_now().total.parks;
	weft_co *lco = go(pos_reader_main, &last);
	wait_parks(parks, 1);
	weft_co *cc = go(closer_main, &p[0]);
	while (!atomic_load(&last.done))
		weft_yield();	/* the close wakes it; the holder's read goes on */
	CHECK(last.n == -1 && last.err == ECANCELED);
	CHECK(!atomic_load(&holder.done));
	CHECK(write(p[1], "x", 1) == 1);	/* the holder's read ends: its byte stands */
	join(lco);
	join(hco);
	join(cc);
	CHECK(holder.n == 1 && hc == 'x');
	CHECK(weft_close(p[1]) == 0);
}

Test(uring, a_wait_for_the_position_turn_ends_on_a_deadline_cancel_interrupt_or_close, .timeout = 120)
{
	run_uring(2, turn_main, NULL);
}

/* ---- weft_stats' ring counts (version 6) match a known scene: N reads
 * on a ring, each one SQE, one submission and one CQE; then one read that
 * its deadline ends: its SQE and its cancel's (or cancels': a cancel can
 * miss, and goes again), a CQE for each, one transfer stopped. */

enum { COUNTED_READS = 50 };

static void counts_main(void *unused)
{
	(void)unused;
	check_backend();
	int p[2];
	ring_pipe(p);
	char bytes[COUNTED_READS];
	memset(bytes, 'x', sizeof bytes);
	CHECK(write(p[1], bytes, sizeof bytes) == (ssize_t)sizeof bytes);
	weft_stats a = stats_now();
	for (int i = 0; i < COUNTED_READS; i++) {
		char c;
		CHECK(weft_pread(p[0], &c, 1, 0, -1) == 1 && c == 'x');
	}
	weft_stats b = stats_now();
	if (b.ring_sqes - a.ring_sqes != COUNTED_READS || b.ring_cqes - a.ring_cqes != COUNTED_READS ||
	    b.ring_enters - a.ring_enters != COUNTED_READS || b.ring_cancels != a.ring_cancels)
		fprintf(stderr, "%d ring reads: %llu SQEs, %llu submissions, %llu CQEs, %llu cancels\n",
			COUNTED_READS, (unsigned long long)(b.ring_sqes - a.ring_sqes),
			(unsigned long long)(b.ring_enters - a.ring_enters),
			(unsigned long long)(b.ring_cqes - a.ring_cqes),
			(unsigned long long)(b.ring_cancels - a.ring_cancels));
	CHECK(b.ring_sqes - a.ring_sqes == COUNTED_READS);
	CHECK(b.ring_enters - a.ring_enters == COUNTED_READS);
	CHECK(b.ring_cqes - a.ring_cqes == COUNTED_READS);
	CHECK(b.ring_cancels == a.ring_cancels);
	char c;
	CHECK(weft_pread(p[0], &c, 1, 0, weft_now() + 10 * MS) == -1 && errno == ETIMEDOUT);
	weft_stats d;
	do {	/* a cancel's own CQE may come after the read's */
		weft_yield();
		d = stats_now();
	} while (d.ring_cqes - b.ring_cqes < d.ring_sqes - b.ring_sqes);
	/* one stop; its cancel sent again where the first missed (uring.c) */
	CHECK(d.ring_cancels - b.ring_cancels == 1);
	CHECK(d.ring_sqes - b.ring_sqes >= 2);
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(uring, the_ring_counts_match_a_known_scene, .timeout = 120)
{
	run_uring(1, counts_main, NULL);
}

/* ---- thousands of reads in flight, ended by their deadlines, weft_cancel
 * and weft_interrupt while a writer feeds the pipe: each returns what it
 * read (a read the cancel came too late for) or the reason it ended, the
 * bytes returned and those left in the pipe add up to those written (none
 * lost), and no read's buffer is written after its call returned (each is
 * filled with a marker then, and checked once every ring is idle: a call
 * that returned before its CQE would find pipe bytes there). */

enum { READERS = 2000, CHUNK = 8, MARK = 0xa5 };

struct storm {
	struct reader r[READERS];
	weft_co *co[READERS];
	atomic_long returned;
	atomic_int left;
};

static void storm_reader(void *arg)
{
	struct reader *r = arg;
	reader_main(r);
	memset(r->buf, MARK, r->len);	/* a late CQE's bytes would land here */
}

static void storm_main(void *arg)
{
	unsigned seed = *(unsigned *)arg;
	check_backend();
	int p[2];
	ring_pipe(p);
	struct storm *s = calloc(1, sizeof *s);
	CHECK(s);
	uint64_t parks = stats_now().total.parks;
	int64_t soon = weft_now() + 20 * MS;
	for (int i = 0; i < READERS; i++) {
		struct reader *r = &s->r[i];
		r->fd = p[0];
		r->len = CHUNK;
		r->buf = malloc(CHUNK);
		CHECK(r->buf);
		r->deadline = i % 3 == 0 ? soon + (int64_t)(i % 7) * MS : -1;
		s->co[i] = go(storm_reader, r);
	}
	/* the reads without a deadline are on a ring (those with one may have
	 * timed out before they ran, under load, without parking) */
	wait_parks(parks, READERS - READERS / 3 - 1);
	long written = 0;
	char data[CHUNK * 4];
	memset(data, 'x', sizeof data);
	for (int i = 0; i < READERS; i++) {
		if (i % 3 == 1)	/* (a read that took data has finished: no matter) */
			weft_cancel(s->co[i]);
		else if (i % 3 == 2)
			weft_interrupt(s->co[i]);
		if ((i + seed) % 50 == 0) {	/* some reads complete, racing their ends */
			CHECK(write(p[1], data, sizeof data) == (ssize_t)sizeof data);
			written += (long)sizeof data;
		}
	}
	long got = 0;
	int ended = 0;
	for (int i = 0; i < READERS; i++) {
		struct reader *r = &s->r[i];
		join(s->co[i]);
		if (r->n >= 0) {
			CHECK(r->n > 0 && (size_t)r->n <= CHUNK);
			got += r->n;
			continue;
		}
		static const int why[3] = { ETIMEDOUT, ECANCELED, EINTR };
		if (r->err != why[i % 3])
			fprintf(stderr, "reader %d: errno %d, want %d\n", i, r->err, why[i % 3]);
		CHECK(r->err == why[i % 3]);
		ended++;
	}
	int queued = 0;
	CHECK(ioctl(p[0], FIONREAD, &queued) == 0);
	fprintf(stderr, "storm: %d ended, %ld bytes read of %ld written, %d left in the pipe\n", ended, got,
		written, queued);
	CHECK(got + queued == written);
	CHECK(weft_close(p[0]) == 0);	/* every ring is idle: no read is left */
	CHECK(weft_close(p[1]) == 0);
	for (int i = 0; i < READERS; i++) {
		for (size_t k = 0; k < CHUNK; k++)
			CHECK((unsigned char)s->r[i].buf[k] == MARK);
		free(s->r[i].buf);
	}
	free(s);
}

Test(uring, thousands_of_reads_in_flight_cancelled_and_timed_out, .timeout = 300)
{
	unsigned seed = 0;
	run_uring(2, storm_main, &seed);
	seed = 17;
	run_uring(1, storm_main, &seed);
}

/* ---- the same for writes: a full pipe's write end taken for a file,
 * thousands of writes in flight on the rings, ended by deadlines, cancels
 * and interrupts while a reader drains some: each write returns all its
 * bytes (it went in, if only after its end came) or fails having written
 * none, and the bytes returned add up to those the pipe took. */

struct wstorm {
	int fd;
	int64_t deadline;
	ssize_t n;
	int err;
};

static void storm_writer(void *arg)
{
	struct wstorm *w = arg;
	char data[CHUNK];
	memset(data, 'y', sizeof data);
	w->n = weft_pwrite(w->fd, data, sizeof data, 0, w->deadline);
	w->err = errno;
}

static void wstorm_main(void *unused)
{
	(void)unused;
	check_backend();
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	char fill[4096];
	memset(fill, 'f', sizeof fill);
	long filled = 0;
	for (ssize_t n; (n = write(p[1], fill, sizeof fill)) > 0;)
		filled += n;	/* full: every write below waits for room */
	CHECK(weft_write(p[1], fill, 1, 0) == -1 && errno == ETIMEDOUT);	/* registered */
	as_direct_file(p[1]);
	struct wstorm *w = calloc(READERS, sizeof *w);
	weft_co **co = calloc(READERS, sizeof *co);
	CHECK(w && co);
	uint64_t parks = stats_now().total.parks;
	int64_t soon = weft_now() + 20 * MS;
	for (int i = 0; i < READERS; i++) {
		w[i].fd = p[1];
		w[i].deadline = i % 3 == 0 ? soon + (int64_t)(i % 7) * MS : -1;
		co[i] = go(storm_writer, &w[i]);
	}
	wait_parks(parks, READERS - READERS / 3 - 1);
	long drained = 0;
	char sink[4096];
	for (int i = 0; i < READERS; i++) {
		if (i % 3 == 1)
			weft_cancel(co[i]);
		else if (i % 3 == 2)
			weft_interrupt(co[i]);
		if (i == READERS / 2) {	/* a page of room: for some, racing their ends */
			ssize_t n = read(p[0], sink, sizeof sink);
			CHECK(n > 0 || errno == EAGAIN);	/* (the writers may lag) */
			drained += n > 0 ? n : 0;
		}
	}
	long wrote = 0;
	for (int i = 0; i < READERS; i++) {
		join(co[i]);
		if (w[i].n >= 0) {
			CHECK(w[i].n == CHUNK);
			wrote += w[i].n;
			continue;
		}
		static const int why[3] = { ETIMEDOUT, ECANCELED, EINTR };
		CHECK(w[i].err == why[i % 3]);
	}
	CHECK(weft_close(p[1]) == 0);	/* every ring is idle: no write is left */
	for (ssize_t n; (n = read(p[0], sink, sizeof sink)) > 0;)
		drained += n;
	fprintf(stderr, "write storm: %ld bytes written by the calls, %ld drained beyond the %ld filled\n", wrote,
		drained - filled, filled);
	CHECK(drained - filled == wrote);
	CHECK(close(p[0]) == 0);
	free(w);
	free(co);
}

Test(uring, thousands_of_writes_in_flight_cancelled_and_timed_out, .timeout = 300)
{
	run_uring(2, wstorm_main, NULL);
	run_uring(1, wstorm_main, NULL);
}

/* ---- a read in flight on a ring whose deadline passes after the data
 * came: the read's bytes are returned (the cancel found it complete). */

static void late_main(void *unused)
{
	(void)unused;
	int p[2];
	ring_pipe(p);
	char buf[3];	/* what is written: a file read goes on to its length */
	struct reader r = { .fd = p[0], .deadline = -1, .buf = buf, .len = sizeof buf };
	uint64_t parks = stats_now().total.parks;
	weft_co *rc = go(reader_main, &r);
	wait_parks(parks, 1);
	CHECK(write(p[1], "abc", 3) == 3);
	CHECK(weft_cancel(rc) == 0);	/* at once: it may be before or after the CQE */
	join(rc);
	int queued = 0;
	CHECK(ioctl(p[0], FIONREAD, &queued) == 0);
	CHECK((r.n == 3 && queued == 0) || (r.n == -1 && r.err == ECANCELED && queued == 3));
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(uring, a_cancel_racing_a_completion_loses_no_bytes)
{
	for (int i = 0; i < 50; i++)
		run_uring(2, late_main, NULL);
}

/* ---- the ring's CQE is reaped while the worker that submitted the read
 * runs a long coroutine: the read's coroutine, pinned nowhere, goes on on
 * the other worker (the shared poller watches every ring's eventfd). */

struct stuck {
	atomic_bool stop;
	atomic_bool spinning;
	int wfd;
	struct reader *r;
};

/* A plain thread: the write, and the end of the spin once the read is
 * done (a coroutine doing it might sit in the stuck worker's queue). */
static void *feeder_main(void *arg)
{
	struct stuck *s = arg;
	while (!atomic_load(&s->spinning))
		sched_yield();
	CHECK(write(s->wfd, "abc", 3) == 3);
	while (!atomic_load(&s->r->done))
		sched_yield();	/* a stranded CQE would hang here (the suite's timeout) */
	atomic_store(&s->stop, true);
	return NULL;
}

static void spin_main(void *arg)
{
	struct stuck *s = arg;
	atomic_store(&s->spinning, true);
	while (!atomic_load(&s->stop))
		;	/* never yields: its worker is stuck */
}

static void stuck_main(void *unused)
{
	(void)unused;
	int p[2];
	ring_pipe(p);
	char buf[3];	/* what is written: a file read goes on to its length */
	struct reader r = { .fd = p[0], .deadline = -1, .buf = buf, .len = sizeof buf };
	uint64_t parks = stats_now().total.parks;
	weft_co *rc = go(reader_main, &r);
	wait_parks(parks, 1);
	struct stuck s = { .wfd = p[1], .r = &r };
	pthread_t feeder;
	CHECK(pthread_create(&feeder, NULL, feeder_main, &s) == 0);
	weft_co *sc = go(spin_main, &s);
	join(rc);
	join(sc);
	CHECK(pthread_join(feeder, NULL) == 0);
	CHECK(r.n == 3);
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(uring, a_completion_is_reaped_while_a_worker_is_stuck, .timeout = 120)
{
	for (int i = 0; i < 10; i++)
		run_uring(2, stuck_main, NULL);
}

/* ---- the same, with the worker stuck being the very thread that
 * submitted the read (white-box: the coroutine submits on its worker's
 * ring and spins at once), and then with that thread asleep in its loop.
 * The kernel posts a pipe read's completion through task work on the
 * submitting thread: with DEFER_TASKRUN that work would wait for the
 * thread to ask for completions, and neither a spinning nor a sleeping
 * worker asks (uring.c says which flags the rings leave out and why); and
 * a ring reaped by its owner only would strand the spinner's: under the
 * worker poller the ring's eventfd is in the owner's own epfd, and the
 * monitor's rescue of the stuck owner must reap it even where that epfd
 * holds no fd. */

struct submitter {
	int fd, wfd;
	bool spin;		/* the submitter spins (else it returns) */
	char buf[3];
	struct weft__uring_op op;
	atomic_bool submitted;
	atomic_bool stop;
};

static void submit_spin_main(void *arg)
{
	struct submitter *s = arg;
	CHECK(weft__uring_submit_rw(&s->op, s->fd, false, s->buf, sizeof s->buf, 0) == 0);
	atomic_store(&s->submitted, true);
	while (!atomic_load(&s->stop))
		;	/* never yields nor enters the kernel */
}

static void submit_main(void *arg)
{
	struct submitter *s = arg;
	CHECK(weft__uring_submit_rw(&s->op, s->fd, false, s->buf, sizeof s->buf, 0) == 0);
	atomic_store(&s->submitted, true);
	atomic_store(&s->stop, true);	/* its worker goes to sleep */
}

/* A plain thread: the write, then, beside a spinning submitter, a wait
 * for the read's completion and the end of the spin. */
static void *completion_feeder(void *arg)
{
	struct submitter *s = arg;
	while (!atomic_load(&s->submitted))
		sched_yield();
	CHECK(write(s->wfd, "abc", 3) == 3);
	if (!s->spin)
		return NULL;
	CHECK(weft__completion_wait(&s->op.done, false, -1, WEFT_PARK_OFFLOAD) == 0);	/* a hang: stranded */
	atomic_store(&s->stop, true);
	return NULL;
}

static void submitter_main(void *arg)
{
	int p[2];	/* a blocking pipe that weft never registered: under the
			 * worker poller no epfd holds an fd, the ring's eventfd
			 * alone calls for the monitor's rescue of the spinner */
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	struct submitter s = { .fd = p[0], .wfd = p[1], .spin = arg != NULL };
	pthread_t feeder;
	CHECK(pthread_create(&feeder, NULL, completion_feeder, &s) == 0);
	join(go(s.spin ? submit_spin_main : submit_main, &s));
	if (!s.spin)	/* the one worker sleeps: a hang if the CQE waits for it */
		CHECK(weft__completion_wait(&s.op.done, false, -1, WEFT_PARK_OFFLOAD) == 0);
	CHECK(pthread_join(feeder, NULL) == 0);
	CHECK(s.op.res == 3 && memcmp(s.buf, "abc", 3) == 0);
	CHECK(close(p[0]) == 0 && close(p[1]) == 0);
}

Test(uring, a_completion_comes_while_its_submitter_spins, .timeout = 120)
{
	for (int i = 0; i < 5; i++)
		run_uring(2, submitter_main, "spin");
}

Test(uring, a_completion_comes_while_its_submitter_sleeps, .timeout = 120)
{
	for (int i = 0; i < 5; i++)
		run_uring(1, submitter_main, NULL);
}

/* ---- a coroutine whose read is in flight on its worker's ring moves to
 * the other worker (its own is stuck in a spinner it spawned just before
 * the read: runnext, so that worker runs it next) and is cancelled there:
 * its cancel must go to the operation's ring (op->ring), not to the ring
 * of the worker it resumed on, which knows no such operation (the read
 * would then never end: nobody writes until the call has returned).  The
 * call returns ECANCELED, and the bytes written after it stay in the pipe:
 * the buffer is untouched. */

struct mover {
	int fd;
	char buf[8];
	int before, after;	/* the reader's worker around the read */
	int spinner;		/* the spinner's worker */
	ssize_t n;
	int err;
	weft_co *co, *spin_co;
	atomic_bool spinning, done, stop;
};

static void mover_spin(void *arg)
{
	struct mover *m = arg;
	m->spinner = weft_worker_id();
	atomic_store(&m->spinning, true);
	while (!atomic_load(&m->stop))
		;	/* never yields: its worker is stuck */
}

static void mover_read(void *arg)
{
	struct mover *m = arg;
	m->before = weft_worker_id();
	m->spin_co = go(mover_spin, m);
	m->n = weft_pread(m->fd, m->buf, sizeof m->buf, 0, -1);
	m->err = errno;
	m->after = weft_worker_id();
	atomic_store(&m->done, true);
}

/* A plain thread: the cancel once the reader's worker spins, then, once
 * the call has returned, the write and the end of the spin. */
static void *mover_canceller(void *arg)
{
	struct mover *m = arg;
	while (!atomic_load(&m->spinning))
		sched_yield();
	CHECK(weft_cancel(m->co) == 0);
	while (!atomic_load(&m->done))
		sched_yield();	/* a cancel on the wrong ring: a hang here */
	atomic_store(&m->stop, true);
	return NULL;
}

static void mover_main(void *arg)
{
	int *moved = arg;
	int p[2];
	ring_pipe(p);
	struct mover m = { .fd = p[0] };
	memset(m.buf, '-', sizeof m.buf);
	m.co = go(mover_read, &m);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, mover_canceller, &m) == 0);
	join(m.co);
	CHECK(pthread_join(t, NULL) == 0);
	join(m.spin_co);
	if (m.n != -1 || m.err != ECANCELED)
		fprintf(stderr, "a read cancelled after a migration: %zd, errno %d\n", m.n, m.err);
	CHECK(m.n == -1 && m.err == ECANCELED);
	CHECK(write(p[1], "abcdefgh", 8) == 8);
	char got[8];
	CHECK(read(p[0], got, 8) == 8 && memcmp(got, "abcdefgh", 8) == 0);	/* the pipe kept them */
	for (size_t i = 0; i < sizeof m.buf; i++)
		CHECK(m.buf[i] == '-');
	if (m.spinner == m.before && m.after != m.before)
		(*moved)++;
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(uring, a_read_cancelled_after_its_coroutine_moved_cancels_on_its_ring, .timeout = 300)
{
	int moved = 0;
	for (int i = 0; i < 10; i++)
		run_uring(2, mover_main, &moved);
	fprintf(stderr, "cancel after a migration: %d of 10 runs moved\n", moved);
	cr_assert_gt(moved, 0, "the reader never resumed on the other worker");
}
