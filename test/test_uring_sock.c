/* SPDX-License-Identifier: MIT */
/* Stream sockets through the workers' rings (lib/io.c, "sockets on rings";
 * lib/uring.c, weft__uring_flush) under WEFT_IO=uring and
 * WEFT_URING_SOCKETS=1 (set by each test): a weft_read that
 * would wait queues an IORING_OP_RECV into the caller's buffer, which its
 * worker's next pass submits; a deadline, weft_cancel or weft_close ends
 * it only once its own CQE has come (the buffer is never written after
 * the call returned), and what it moved is returned, never lost.
 *
 * White-box: a reader on the ring holds its direction's turn (the fd's IN
 * slot says FD_TURN), where a reader waiting on readiness is parked in the
 * slot; the scenes check which one they test. */
#include "harness.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "uring_test.h"

enum { LEN = 64, MARK = 0xa5 };

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
	r->n = weft_read(r->fd, r->buf, r->len, r->deadline);
	r->err = errno;
	atomic_store(&r->done, true);
}

/* Whether the reader of fd waits on a ring: it holds the IN turn, with no
 * waiter in the slot (readiness may have come meanwhile). */
static bool on_ring(int fd)
{
	uintptr_t v = (uintptr_t)__atomic_load_n(&weft__fd_find(fd)->slot[FD_SLOT_IN], __ATOMIC_SEQ_CST);
	return v == FD_TURN || v == FD_TURN_READY;
}

/* Spawns a reader of fd into buf (filled with MARK) and waits until it is
 * parked on a ring. */
static weft_co *park_reader(struct reader *r, int fd, char *buf, int64_t deadline)
{
	memset(buf, MARK, LEN);
	*r = (struct reader){ .fd = fd, .deadline = deadline, .buf = buf, .len = LEN };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(reader_main, r);
	wait_parks(parks, 1);
	CHECK(on_ring(fd));
	return co;
}

static bool marked(const char *buf, size_t from)
{
	for (size_t i = from; i < LEN; i++)
		if ((unsigned char)buf[i] != MARK)
			return false;
	return true;
}

/* After a read that failed: bytes written to its socket now stay queued
 * there (the RECV was cancelled, not left running) and its buffer is
 * untouched, also after the worker has had time to reap. */
static void check_untouched(struct reader *r, int peer)
{
	CHECK(write(peer, "late", 4) == 4);
	for (int i = 0; i < 5; i++)
		weft_yield();
	CHECK(weft_sleep(weft_now() + 10 * MS) == 0);
	CHECK(marked(r->buf, 0));
	char got[8];
	CHECK(weft_read(r->fd, got, sizeof got, -1) == 4 && memcmp(got, "late", 4) == 0);
}

/* ---- a read parked on the ring gets the data written after it parked */

static void data_main(void *unused)
{
	(void)unused;
	CHECK(stats_now().io_backend == WEFT_IO_URING);
	int sv[2];
	socket_pair(sv);
	char buf[LEN];
	struct reader r;
	for (int i = 0; i < 100; i++) {	/* a short read marks drained: the next goes straight in */
		weft_co *co = park_reader(&r, sv[0], buf, -1);
		CHECK(write(sv[1], "hello", 5) == 5);
		join(co);
		CHECK(r.n == 5 && memcmp(buf, "hello", 5) == 0 && marked(buf, 5));
	}
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(uring_sock, a_read_parked_on_the_ring_gets_data, .timeout = 120)
{
	run_uring_sockets(1, true, data_main, NULL);
	run_uring_sockets(2, true, data_main, NULL);
}

/* ---- a write that fills the socket goes on through the ring (SEND) and
 * every byte arrives, in order */

enum { BIG = 4 << 20 };

static void drain_main(void *arg)
{
	int fd = *(int *)arg;
	char *buf = malloc(BIG);
	CHECK(buf);
	size_t got = 0;
	while (got < BIG) {
		ssize_t n = weft_read(fd, buf + got, BIG - got, -1);
		CHECK(n > 0);
		got += (size_t)n;
	}
	for (size_t i = 0; i < BIG; i++)
		CHECK((unsigned char)buf[i] == (unsigned char)(i * 7));
	free(buf);
}

static void write_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	char *buf = malloc(BIG);
	CHECK(buf);
	for (size_t i = 0; i < BIG; i++)
		buf[i] = (char)(i * 7);
	weft_co *co = go(drain_main, &sv[1]);
	CHECK(weft_write(sv[0], buf, BIG, -1) == BIG);
	join(co);
	free(buf);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(uring_sock, a_write_past_the_socket_buffer_moves_every_byte, .timeout = 120)
{
	run_uring_sockets(1, true, write_main, NULL);
	run_uring_sockets(2, true, write_main, NULL);
}

/* ---- a deadline, weft_cancel and weft_close each end a read in flight on
 * the ring, and its buffer is never written after the call returned */

enum how { BY_DEADLINE, BY_CANCEL, BY_CLOSE };

static void end_main(void *arg)
{
	enum how how = *(enum how *)arg;
	int sv[2];
	socket_pair(sv);
	char buf[LEN];
	struct reader r;
	int64_t deadline = how == BY_DEADLINE ? weft_now() + 50 * MS : -1;
	weft_co *co = park_reader(&r, sv[0], buf, deadline);
	if (how == BY_CANCEL)
		CHECK(weft_cancel(co) == 0);
	if (how == BY_CLOSE) {
		int dup_fd = dup(sv[0]);	/* the socket outlives the number: a RECV left would fill buf */
		CHECK(dup_fd >= 0);
		CHECK(weft_close(sv[0]) == 0);
		join(co);
		CHECK(r.n == -1 && r.err == ECANCELED);
		CHECK(write(sv[1], "late", 4) == 4);
		CHECK(weft_sleep(weft_now() + 20 * MS) == 0);
		CHECK(marked(buf, 0));
		int queued = 0;
		CHECK(ioctl(dup_fd, FIONREAD, &queued) == 0 && queued == 4);
		CHECK(close(dup_fd) == 0 && weft_close(sv[1]) == 0);
		return;
	}
	join(co);
	CHECK(r.n == -1 && r.err == (how == BY_DEADLINE ? ETIMEDOUT : ECANCELED));
	check_untouched(&r, sv[1]);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

static void run_end(enum how how)
{
	run_uring_sockets(1, true, end_main, &how);
	run_uring_sockets(2, true, end_main, &how);
}

Test(uring_sock, a_deadline_ends_a_read_on_the_ring, .timeout = 120)
{
	run_end(BY_DEADLINE);
}

Test(uring_sock, weft_cancel_ends_a_read_on_the_ring, .timeout = 120)
{
	run_end(BY_CANCEL);
}

Test(uring_sock, weft_close_ends_a_read_on_the_ring, .timeout = 120)
{
	run_end(BY_CLOSE);
}

/* ---- the peer's hang-up ends a read on the ring with 0 (end of file) */

static void eof_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	char buf[LEN];
	struct reader r;
	weft_co *co = park_reader(&r, sv[0], buf, -1);
	CHECK(weft_close(sv[1]) == 0);
	join(co);
	CHECK(r.n == 0 && marked(buf, 0));
	CHECK(weft_close(sv[0]) == 0);
}

Test(uring_sock, the_peers_hangup_ends_a_read_on_the_ring, .timeout = 120)
{
	run_uring_sockets(1, true, eof_main, NULL);
	run_uring_sockets(2, true, eof_main, NULL);
}

/* ---- a worker stuck in a long coroutine right after a reader queued its
 * RECV (the worker never ran dry, so never flushed): the monitor's rescue
 * submits it, its CQE comes, and the reader goes on on the other worker.
 * Without the monitor's flush the RECV stays in the SQ and the feeder
 * waits for ever (the test's timeout). */

struct stuck {
	atomic_bool stop, spinning;
	int peer;
	struct reader *r;
	weft_co *spinner;
};

static void spin_main(void *arg)
{
	struct stuck *s = arg;
	atomic_store(&s->spinning, true);
	while (!atomic_load(&s->stop))
		;	/* never yields: its worker is stuck */
}

/* Spawns the spinner (it runs next on this worker: runnext) and reads:
 * the read queues its RECV and parks, and the worker goes to the spinner
 * without running dry. */
static void stuck_reader(void *arg)
{
	struct stuck *s = arg;
	s->spinner = go(spin_main, s);
	reader_main(s->r);
}

static void *feeder_main(void *arg)
{
	struct stuck *s = arg;
	while (!atomic_load(&s->spinning))
		sched_yield();
	CHECK(write(s->peer, "abc", 3) == 3);
	while (!atomic_load(&s->r->done))
		sched_yield();	/* an unsubmitted RECV would hang here */
	atomic_store(&s->stop, true);
	return NULL;
}

static void stuck_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	char buf[LEN];
	memset(buf, MARK, sizeof buf);
	struct reader r = { .fd = sv[0], .deadline = -1, .buf = buf, .len = sizeof buf };
	char c;
	CHECK(weft_read(sv[0], &c, 1, 0) == -1 && errno == ETIMEDOUT);	/* registered */
	struct stuck s = { .peer = sv[1], .r = &r };
	pthread_t feeder;
	CHECK(pthread_create(&feeder, NULL, feeder_main, &s) == 0);
	weft_co *rc = go(stuck_reader, &s);
	join(rc);
	join(s.spinner);
	CHECK(pthread_join(feeder, NULL) == 0);
	CHECK(r.n == 3 && memcmp(buf, "abc", 3) == 0);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(uring_sock, a_stuck_workers_queued_recv_is_submitted_by_the_monitor, .timeout = 120)
{
	for (int i = 0; i < 5; i++)
		run_uring_sockets(2, true, stuck_main, NULL);
}

/* ---- thousands of reads in flight on as many sockets, ended by their
 * deadlines, weft_cancel and weft_interrupt while some are fed: each
 * returns what it read or the reason it ended, the bytes read and those
 * left queued add up to those written, and no buffer is written after
 * its call returned (each is marked then and checked once all are idle). */

enum { PAIRS = 1000, CHUNK = 8 };

struct storm {
	int sv[PAIRS][2];
	struct reader r[PAIRS];
	weft_co *co[PAIRS];
	long written[PAIRS];
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
	struct storm *s = calloc(1, sizeof *s);
	CHECK(s);
	int64_t soon = weft_now() + 20 * MS;
	for (int i = 0; i < PAIRS; i++) {
		socket_pair(s->sv[i]);
		struct reader *r = &s->r[i];
		*r = (struct reader){ .fd = s->sv[i][0], .len = CHUNK, .buf = malloc(CHUNK) };
		CHECK(r->buf);
		r->deadline = i % 3 == 0 ? soon + (int64_t)(i % 7) * MS : -1;
		s->co[i] = go(storm_reader, r);
	}
	for (int i = 0; i < PAIRS; i++)
		weft_yield();
	char data[CHUNK * 2];
	memset(data, 'x', sizeof data);
	for (int i = 0; i < PAIRS; i++) {
		if (i % 3 == 1)
			weft_cancel(s->co[i]);
		else if (i % 3 == 2)
			weft_interrupt(s->co[i]);
		if ((i + seed) % 4 == 0) {	/* some reads complete, racing their ends */
			CHECK(write(s->sv[i][1], data, sizeof data) == (ssize_t)sizeof data);
			s->written[i] = (long)sizeof data;
		}
	}
	long got = 0, written = 0;
	int ended = 0;
	for (int i = 0; i < PAIRS; i++) {
		struct reader *r = &s->r[i];
		join(s->co[i]);
		int queued = 0;
		CHECK(ioctl(r->fd, FIONREAD, &queued) == 0);
		CHECK((r->n > 0 ? r->n : 0) + queued == s->written[i]);
		written += s->written[i];
		if (r->n >= 0) {
			CHECK(r->n > 0 && (size_t)r->n <= CHUNK);
			got += r->n;
			continue;
		}
		static const int why[3] = { ETIMEDOUT, ECANCELED, EINTR };
		CHECK(r->err == why[i % 3]);
		ended++;
	}
	fprintf(stderr, "sock storm: %d ended, %ld bytes read of %ld written\n", ended, got, written);
	CHECK(ended > 0);
	CHECK(weft_sleep(weft_now() + 10 * MS) == 0);
	for (int i = 0; i < PAIRS; i++) {
		CHECK(weft_close(s->sv[i][0]) == 0 && weft_close(s->sv[i][1]) == 0);
		for (size_t k = 0; k < CHUNK; k++)
			CHECK((unsigned char)s->r[i].buf[k] == MARK);
		free(s->r[i].buf);
	}
	free(s);
}

Test(uring_sock, thousands_of_socket_reads_cancelled_and_timed_out, .timeout = 300)
{
	for (unsigned seed = 0; seed < 4; seed++) {
		run_uring_sockets(1, true, storm_main, &seed);
		run_uring_sockets(2, true, storm_main, &seed);
	}
}

/* ---- with the shared poller and two workers, sockets wait on readiness
 * (a completion would wake its submitter beside the poller's holder) */

static void shared_main(void *unused)
{
	(void)unused;
	int sv[2];
	socket_pair(sv);
	char buf[LEN];
	memset(buf, MARK, sizeof buf);
	struct reader r = { .fd = sv[0], .deadline = -1, .buf = buf, .len = LEN };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(reader_main, &r);
	wait_parks(parks, 1);
	CHECK(!on_ring(sv[0]));
	CHECK(write(sv[1], "hi", 2) == 2);
	join(co);
	CHECK(r.n == 2);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(uring_sock, the_shared_poller_with_two_workers_keeps_sockets_on_readiness)
{
	CHECK(setenv("WEFT_URING_SOCKETS", "1", 1) == 0);
	run_uring_config(shared_main, NULL,
			 &WEFT_CONFIG(.workers = 2, .io = WEFT_IO_URING, .poller = WEFT_POLLER_SHARED));
}
