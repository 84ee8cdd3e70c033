/* SPDX-License-Identifier: MIT */
/* Adversarial tests of weft__uring_stop (lib/uring.c, commit b4afdb1: a
 * cancel that misses its op goes again).  A pipe that many ring reads wait
 * on while a plain thread trickles single bytes into it: every byte wakes
 * every read's poll, one retry takes it and the others arm their poll
 * again, so a cancel often finds a read in transit (-ENOENT) and must go
 * again.  Each read returns its byte or the reason its wait ended, the
 * bytes returned and those left in the pipe add up to those written, and
 * no buffer is written after its call returned. */
#include "harness.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "park.h"	/* white-box: an op's completion */
#include "uring.h"	/* white-box: an op submitted, then stopped */
#include "uring_test.h"

enum { TRICKLE_READERS = 600, TRICKLE_ROUNDS = 3, MARK = 0xa5 };

struct trickle_reader {
	int fd;
	int64_t deadline;
	char buf[1];
	ssize_t n;
	int err;
};

static void trickle_read(void *arg)
{
	struct trickle_reader *r = arg;
	r->n = weft_pread(r->fd, r->buf, 1, 0, r->deadline);
	r->err = errno;
	r->buf[0] = (char)MARK;	/* a late CQE's byte would land here */
}

struct trickler {
	int fd;
	atomic_bool stop;
	long written;
	atomic_long written_atomic;	/* the same, for the scene to watch */
};

/* A plain thread: one byte at a time, as fast as the pipe takes them. */
static void *trickle(void *arg)
{
	struct trickler *t = arg;
	while (!atomic_load(&t->stop)) {
		if (write(t->fd, "t", 1) == 1)
			atomic_store(&t->written_atomic, ++t->written);
		sched_yield();
	}
	return NULL;
}

struct trickle_scene {
	struct trickle_reader r[TRICKLE_READERS];
	weft_co *co[TRICKLE_READERS];
};

static void trickle_main(void *unused)
{
	(void)unused;
	CHECK(stats_now().io_backend == WEFT_IO_URING);
	int p[2];
	ring_pipe(p);
	struct trickle_scene *s = calloc(1, sizeof *s);
	CHECK(s);
	weft_stats before = stats_now();
	int64_t soon = weft_now() + 5 * MS;
	for (int i = 0; i < TRICKLE_READERS; i++) {
		s->r[i] = (struct trickle_reader){ .fd = p[0],
						   .deadline = i % 3 == 0 ? soon + (int64_t)(i % 5) * MS : -1 };
		s->co[i] = go(trickle_read, &s->r[i]);
	}
	wait_parks(before.total.parks, TRICKLE_READERS - TRICKLE_READERS / 3 - 1);
	struct trickler t = { .fd = p[1] };
	CHECK(fcntl(p[1], F_SETFL, O_NONBLOCK) == 0);	/* full: it waits no more */
	pthread_t th;
	CHECK(pthread_create(&th, NULL, trickle, &t) == 0);
	while (atomic_load(&t.written_atomic) < 200)	/* the trickle is under way */
		weft_yield();
	for (int i = 0; i < TRICKLE_READERS; i++) {
		if (i % 3 == 1)
			weft_cancel(s->co[i]);
		else if (i % 3 == 2)
			weft_interrupt(s->co[i]);
		weft_yield();
	}
	long got = 0;
	int ended = 0;
	for (int i = 0; i < TRICKLE_READERS; i++) {
		join(s->co[i]);
		struct trickle_reader *r = &s->r[i];
		if (r->n >= 0) {
			CHECK(r->n == 1);
			got++;
			continue;
		}
		static const int why[3] = { ETIMEDOUT, ECANCELED, EINTR };
		if (r->err != why[i % 3])
			fprintf(stderr, "reader %d: errno %d, want %d\n", i, r->err, why[i % 3]);
		CHECK(r->err == why[i % 3]);
		ended++;
	}
	atomic_store(&t.stop, true);
	CHECK(pthread_join(th, NULL) == 0);
	int queued = 0;
	CHECK(ioctl(p[0], FIONREAD, &queued) == 0);
	weft_stats after = stats_now();
	fprintf(stderr, "trickle: %ld read of %ld written, %d left; %d ended, %llu cancels, %llu SQEs\n", got,
		t.written, queued, ended, (unsigned long long)(after.ring_cancels - before.ring_cancels),
		(unsigned long long)(after.ring_sqes - before.ring_sqes));
	CHECK(got + queued == t.written);
	CHECK(weft_close(p[0]) == 0);	/* every ring is idle: no read is left */
	CHECK(weft_close(p[1]) == 0);
	for (int i = 0; i < TRICKLE_READERS; i++)
		CHECK((unsigned char)s->r[i].buf[0] == MARK);
	free(s);
}

Test(uring_cmiss_adv, reads_cancelled_while_single_bytes_trickle_in, .timeout = 300)
{
	for (int round = 0; round < TRICKLE_ROUNDS; round++) {
		run_uring(2, trickle_main, NULL);
		run_uring(1, trickle_main, NULL);
	}
}

/* ---- ring_cancels counts a stopped transfer once (docs/tuning.md: "one
 * per deadline, cancel, interrupt or close that ended a transfer's wait";
 * a cancel sent again counts in ring_sqes only).  A pipe
 * read that nobody feeds sits with its poll armed: the first cancel finds
 * it (the kernel cannot miss it).  The one worker, its ring's owner and
 * only reaper (the monitor adopts stuck workers only where there are
 * several), runs a long coroutine (200 ms of spin, a scene length, not a
 * bound on anything), so the read's -ECANCELED CQE waits in the CQ past
 * weft__uring_stop's 10, 20, 40 ... ms deadlines, and each one sends
 * another cancel.  Failed on the first version of weft__uring_stop, which
 * counted each: "one stop of a poll-armed read: 5 cancels". */

struct owner_spin {
	int fd;
	char buf[1];
	struct weft__uring_op op;
	uint64_t sent;	/* the cancels the stop sent */
	atomic_bool submitted;
	atomic_bool stopping;
	atomic_bool stopped;
};

static void submit_and_spin(void *arg)
{
	struct owner_spin *s = arg;
	CHECK(weft__uring_submit_rw(&s->op, s->fd, false, s->buf, 1, 0) == 0);
	atomic_store(&s->submitted, true);
	while (!atomic_load(&s->stopping))
		;	/* never yields: its worker, the ring's owner, is stuck */
	int64_t until = weft_now() + 200 * MS;
	while (weft_now() < until)
		;	/* a long coroutine while the stop waits for the CQE */
}

/* A plain thread stops the read (weft__uring_stop runs from any thread,
 * as from a coroutine on another worker). */
static void *stopper(void *arg)
{
	struct owner_spin *s = arg;
	while (!atomic_load(&s->submitted))
		sched_yield();
	uint64_t cancels = stats_now().ring_cancels;
	atomic_store(&s->stopping, true);
	weft__uring_stop(&s->op, WEFT_PARK_OFFLOAD);
	s->sent = stats_now().ring_cancels - cancels;
	atomic_store(&s->stopped, true);
	return NULL;
}

static void unreaped_main(void *unused)
{
	(void)unused;
	CHECK(stats_now().io_backend == WEFT_IO_URING);
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);	/* never fed: the read stays poll-armed */
	struct owner_spin s = { .fd = p[0] };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, stopper, &s) == 0);
	join(go(submit_and_spin, &s));
	while (!atomic_load(&s.stopped))
		weft_yield();	/* the worker must run its loop to reap */
	CHECK(pthread_join(th, NULL) == 0);
	CHECK(s.op.res == -ECANCELED);
	if (s.sent != 1)
		fprintf(stderr, "one stop of a poll-armed read: %llu cancels\n", (unsigned long long)s.sent);
	CHECK(s.sent == 1);
	CHECK(close(p[0]) == 0 && close(p[1]) == 0);
}

Test(uring_cmiss_adv, a_cancel_that_found_its_read_counts_once_while_its_cqe_waits_for_a_reaper, .timeout = 60)
{
	run_uring(1, unreaped_main, NULL);
}
