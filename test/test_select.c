/* SPDX-License-Identifier: MIT */
/* weft_chan_select's fd cases (WEFT_SELECT_READABLE, WEFT_SELECT_WRITABLE)
 * beside channel cases: readiness that comes while it waits, for reading
 * and for writing; a weft_close while it waits (the case, ECANCELED); a
 * channel case and an fd case racing, where no element is lost, no
 * readiness is lost and the claimer's channel may be freed at once; the
 * deadline, weft_cancel and weft_interrupt; an fd other coroutines wait on
 * too (the queue and its turn); every bad input an error. */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static weft_chan_case fd_case(int op, int fd)
{
	return (weft_chan_case){ .op = op, .fd = fd };
}

static weft_chan_case recv_case(weft_chan *ch, int *v)
{
	return (weft_chan_case){ .ch = ch, .op = WEFT_CHAN_RECV, .elem = v };
}

/* A select of {readable fd, receive on ch} in a coroutine: its result,
 * errno and the cases' err. */
struct sel {
	int fd;
	weft_chan *ch;
	int64_t deadline;
	int v;
	weft_chan_case cs[2];
	int result, err;
	unsigned started;	/* atomic */
};

static void select_main(void *arg)
{
	struct sel *s = arg;
	s->cs[0] = fd_case(WEFT_SELECT_READABLE, s->fd);
	s->cs[1] = recv_case(s->ch, &s->v);
	__atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
	s->result = weft_chan_select(s->cs, 2, s->deadline);
	s->err = errno;
}

/* Spawns s's select and waits until it has parked. */
static weft_co *select_parked(struct sel *s)
{
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(select_main, s);
	while (!__atomic_load_n(&s->started, __ATOMIC_ACQUIRE))
		weft_yield();
	wait_parks(parks, 1);
	return co;
}

/* ------------------------------------------------------ readiness */

static void readable(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	/* readiness that comes while it waits */
	struct sel s = { .fd = sv[0], .ch = ch, .deadline = -1, .result = -2 };
	weft_co *co = select_parked(&s);
	CHECK(s.result == -2);
	CHECK(weft_write(sv[1], "a", 1, -1) == 1);
	join(co);
	CHECK(s.result == 0 && s.cs[0].err == 0);
	char b;
	CHECK(weft_read(sv[0], &b, 1, 0) == 1 && b == 'a');
	/* readiness already there: no wait */
	CHECK(weft_write(sv[1], "b", 1, -1) == 1);
	weft_chan_case cs[2] = { recv_case(ch, &s.v), fd_case(WEFT_SELECT_READABLE, sv[0]) };
	CHECK(weft_chan_select(cs, 2, 0) == 1 && cs[1].err == 0);
	CHECK(weft_read(sv[0], &b, 1, 0) == 1 && b == 'b');
	/* readiness used up is not reported: exact, as weft_wait's */
	CHECK(weft_chan_select(cs, 2, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	/* a hang-up is readable */
	CHECK(weft_close(sv[1]) == 0);
	CHECK(weft_chan_select(cs, 2, -1) == 1);
	CHECK(weft_read(sv[0], &b, 1, 0) == 0);
	CHECK(weft_close(sv[0]) == 0);
	weft_chan_free(ch);
}

Test(select, an_fd_that_becomes_readable_wins)
{
	run(2, readable, NULL);
}

struct writer {
	int fd;
	weft_chan *ch;
	int result, err;
};

static void select_writable(void *arg)
{
	struct writer *w = arg;
	int v;
	weft_chan_case cs[2] = { recv_case(w->ch, &v), fd_case(WEFT_SELECT_WRITABLE, w->fd) };
	w->result = weft_chan_select(cs, 2, -1);
	w->err = errno;
}

static void writable(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	weft_chan_case cs[1] = { fd_case(WEFT_SELECT_WRITABLE, sv[0]) };
	CHECK(weft_chan_select(cs, 1, 0) == 0);	/* room at once */
	/* fill the socket, then wait for room */
	static char buf[4096];
	size_t filled = 0;
	ssize_t n;
	while ((n = send(sv[0], buf, sizeof buf, MSG_DONTWAIT)) > 0)
		filled += (size_t)n;
	CHECK(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	CHECK(weft_chan_select(cs, 1, 0) == -1 && errno == ETIMEDOUT);
	struct writer w = { .fd = sv[0], .ch = ch, .result = -2 };
	uint64_t parks = stats_now().total.parks;
	weft_co *co = go(select_writable, &w);
	wait_parks(parks, 1);
	CHECK(w.result == -2);
	while (filled > 0) {	/* drain it all: room comes */
		n = weft_read(sv[1], buf, sizeof buf, -1);
		CHECK(n > 0);
		filled -= (size_t)n;
	}
	join(co);
	CHECK(w.result == 1);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	weft_chan_free(ch);
}

Test(select, an_fd_that_becomes_writable_wins)
{
	run(2, writable, NULL);
}

/* One select with both directions of one fd: the writable one is ready. */
static void both_directions(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	weft_chan_case cs[2] = { fd_case(WEFT_SELECT_READABLE, sv[0]),
				 fd_case(WEFT_SELECT_WRITABLE, sv[0]) };
	CHECK(weft_chan_select(cs, 2, -1) == 1);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(select, both_directions_of_one_fd)
{
	run(1, both_directions, NULL);
}

/* ------------------------------------------------------ close */

static void closed_while_parked(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	struct sel s = { .fd = sv[0], .ch = ch, .deadline = -1, .result = -2 };
	weft_co *co = select_parked(&s);
	CHECK(weft_close(sv[0]) == 0);	/* returns once the select has let go */
	join(co);
	CHECK(s.result == 0 && s.cs[0].err == ECANCELED);
	/* the number is closed: a select on it now is EBADF */
	weft_chan_case cs[1] = { fd_case(WEFT_SELECT_READABLE, sv[0]) };
	CHECK(weft_chan_select(cs, 1, 0) == -1 && errno == EBADF);
	CHECK(weft_close(sv[1]) == 0);
	weft_chan_free(ch);
}

Test(select, an_fd_closed_while_it_waits_is_its_case_with_ECANCELED)
{
	run(2, closed_while_parked, NULL);
}

/* ------------------------------------------------------ races */

struct race {
	int sv[2];
	weft_chan *ch;	/* rendezvous: a send completes only if taken */
	uint64_t parks;	/* before the round's select */
	unsigned delay;	/* the sender's, after the select parked (spins) */
	int sent;
};

/* Both act once the select may have parked (or has taken a fast path:
 * the helpers never park before they act), the sender after a delay
 * that varies by round, so that its claim lands anywhere around the
 * readiness wake. */
static void race_writer(void *arg)
{
	struct race *r = arg;
	wait_parks(r->parks, 1);
	CHECK(weft_write(r->sv[1], "x", 1, -1) == 1);
}

/* Sends one element and frees the channel as soon as its send returns: the
 * select it completed may not touch the channel again, however it woke. */
static void race_sender(void *arg)
{
	struct race *r = arg;
	weft_chan *ch = r->ch;
	wait_parks(r->parks, 1);
	for (volatile unsigned i = 0; i < r->delay; i++)
		;
	CHECK(weft_chan_send(ch, &r->sent, -1) == 0);
	weft_chan_free(ch);
}

static void channel_and_fd_race(void *arg)
{
	(void)arg;
	struct race r;
	socket_pair(r.sv);
	unsigned rounds = scaled(3000, 600, 60), by_fd = 0, by_chan = 0;
	for (unsigned i = 0; i < rounds; i++) {
		r.ch = weft_chan_new(sizeof(int), 0);
		r.sent = (int)i;
		r.parks = stats_now().total.parks;
		r.delay = (i * 7919) % 4096;
		weft_chan *ch = r.ch;
		int v = -1;
		weft_chan_case cs[2] = { fd_case(WEFT_SELECT_READABLE, r.sv[0]), recv_case(ch, &v) };
		weft_co *w = go(race_writer, &r), *s = go(race_sender, &r);
		int k = weft_chan_select(cs, 2, -1);
		char b;
		if (k == 1) {
			/* the element, once; the byte is still there to read,
			 * whether or not its readiness woke the select */
			by_chan++;
			CHECK(cs[1].err == 0 && v == (int)i);
			CHECK(weft_read(r.sv[0], &b, 1, -1) == 1);
		} else {
			/* readable: the sender still waits for its element */
			by_fd++;
			CHECK(k == 0 && cs[0].err == 0 && v == -1);
			CHECK(weft_read(r.sv[0], &b, 1, -1) == 1);
			CHECK(weft_chan_recv(ch, &v, -1) == 0 && v == (int)i);
		}
		join(w);
		join(s);	/* it freed the channel */
	}
	fprintf(stderr, "select::channel_and_fd_race: %u by the fd, %u by the channel\n", by_fd,
		by_chan);
	CHECK(by_fd + by_chan == rounds);
	CHECK(weft_close(r.sv[0]) == 0 && weft_close(r.sv[1]) == 0);
}

Test(select, a_channel_case_and_an_fd_case_racing_lose_nothing, .timeout = 600)
{
	run(4, channel_and_fd_race, NULL);
}

/* Readiness a select saw and did not report is left for the fd's next
 * waiter.  B's own read said EAGAIN, then a byte came (its edge harvested
 * into the slot as READY); the select, which drops remembered READY to ask
 * poll(2), picks its ready channel case; B's weft_wait(WEFT_AFTER_EAGAIN),
 * which waits for readiness since its EAGAIN, must still return (without
 * the hand-back it waited for an edge that never came: a hang). */
struct after_eagain {
	int fd;
	unsigned phase;	/* atomic: 1 B had its EAGAIN, 2 B may wait */
};

static void after_eagain_main(void *arg)
{
	struct after_eagain *a = arg;
	char b;
	CHECK(recv(a->fd, &b, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
	__atomic_store_n(&a->phase, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&a->phase, __ATOMIC_ACQUIRE) != 2)
		weft_yield();
	CHECK(weft_wait(a->fd, WEFT_IN | WEFT_AFTER_EAGAIN, -1) > 0);
	CHECK(weft_read(a->fd, &b, 1, -1) == 1);
}

static void unreported_readiness_kept(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	CHECK(weft_wait(sv[0], WEFT_OUT, -1) == WEFT_OUT);	/* registered */
	unsigned rounds = scaled(400, 200, 20), unreported = 0;
	for (unsigned i = 0; i < rounds; i++) {
		weft_chan *ch = weft_chan_new(sizeof(int), 1);
		int v = 1;
		CHECK(weft_chan_send(ch, &v, -1) == 0);	/* the channel case is ready */
		struct after_eagain a = { .fd = sv[0] };
		weft_co *b = go(after_eagain_main, &a);
		while (__atomic_load_n(&a.phase, __ATOMIC_ACQUIRE) != 1)
			weft_yield();
		CHECK(weft_write(sv[1], "y", 1, -1) == 1);
		CHECK(weft_sleep(weft_now() + MS / 2) == 0);	/* its edge is harvested, mostly */
		weft_chan_case cs[2] = { fd_case(WEFT_SELECT_READABLE, sv[0]), recv_case(ch, &v) };
		int k = weft_chan_select(cs, 2, -1);
		CHECK(k == 0 || k == 1);
		if (k == 0) {	/* reported: ours to read; B gets the next byte */
			char c;
			CHECK(weft_read(sv[0], &c, 1, -1) == 1);
			CHECK(weft_write(sv[1], "y", 1, -1) == 1);
		} else {
			unreported++;
		}
		__atomic_store_n(&a.phase, 2, __ATOMIC_RELEASE);
		join(b);
		weft_chan_free(ch);
	}
	fprintf(stderr, "select::readiness_it_did_not_report_is_kept: %u of %u unreported\n",
		unreported, rounds);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(select, readiness_it_did_not_report_is_kept, .timeout = 600)
{
	run(2, unreported_readiness_kept, NULL);
}

/* Readiness a select saw and DID report, with data left behind: B's own
 * read said EAGAIN, then two bytes came in one edge (harvested into the
 * slot as READY); the select reports the fd readable and its caller reads
 * one byte; B's weft_wait(WEFT_AFTER_EAGAIN) must return, since a byte is
 * still there.  The select only looks ("performing it does nothing",
 * weft.h), yet its poll dropped the slot's READY: without the hand-back B
 * waits for an edge that never comes.  (With a weft_read of one byte in
 * the select's place, READY stays and B returns.)  An exact weft_wait in
 * the select's place looks the same way (its poll drops READY too). */
static void look_readable(int fd, bool by_select)
{
	if (!by_select) {
		CHECK(weft_wait(fd, WEFT_IN, -1) == WEFT_IN);
		return;
	}
	weft_chan_case cs[1] = { fd_case(WEFT_SELECT_READABLE, fd) };
	CHECK(weft_chan_select(cs, 1, -1) == 0 && cs[0].err == 0);
}

static void reported_readiness_left_data(void *arg)
{
	bool by_select = arg != NULL;
	int sv[2];
	socket_pair(sv);
	CHECK(weft_wait(sv[0], WEFT_OUT, -1) == WEFT_OUT);	/* registered */
	unsigned rounds = 20;
	for (unsigned i = 0; i < rounds; i++) {
		struct after_eagain a = { .fd = sv[0] };
		weft_co *b = go(after_eagain_main, &a);
		while (__atomic_load_n(&a.phase, __ATOMIC_ACQUIRE) != 1)
			weft_yield();
		CHECK(weft_write(sv[1], "yy", 2, -1) == 2);
		CHECK(weft_sleep(weft_now() + MS) == 0);	/* its edge is harvested */
		look_readable(sv[0], by_select);
		char c;
		CHECK(weft_read(sv[0], &c, 1, -1) == 1);	/* one of the two */
		__atomic_store_n(&a.phase, 2, __ATOMIC_RELEASE);
		join(b);	/* B's weft_wait hangs: the harness's timeout */
	}
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(select, reported_readiness_with_data_left_wakes_an_after_eagain_waiter, .timeout = 60)
{
	run(1, reported_readiness_left_data, &(bool){ true });
}

Test(select, exact_weft_wait_with_data_left_wakes_an_after_eagain_waiter, .timeout = 60)
{
	run(1, reported_readiness_left_data, NULL);
}

/* The writable twin: B wrote until EAGAIN; the peer drains it all (the
 * room's edge harvested into the slot as READY); the select reports the
 * fd writable and its caller writes one byte, leaving room; B's
 * weft_wait(WEFT_OUT | WEFT_AFTER_EAGAIN) must return. */
static void fill_main(void *arg)
{
	struct after_eagain *a = arg;
	static char buf[65536];
	while (send(a->fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
		;
	CHECK(errno == EAGAIN);
	__atomic_store_n(&a->phase, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&a->phase, __ATOMIC_ACQUIRE) != 2)
		weft_yield();
	CHECK(weft_wait(a->fd, WEFT_OUT | WEFT_AFTER_EAGAIN, -1) > 0);
	CHECK(weft_write(a->fd, "z", 1, -1) == 1);
}

static void drain(int fd)
{
	static char buf[65536];
	while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
		;
	CHECK(errno == EAGAIN);
}

static void reported_room_left(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	CHECK(weft_wait(sv[0], WEFT_OUT, -1) == WEFT_OUT);	/* registered */
	for (unsigned i = 0; i < 20; i++) {
		struct after_eagain a = { .fd = sv[0] };
		weft_co *b = go(fill_main, &a);
		while (__atomic_load_n(&a.phase, __ATOMIC_ACQUIRE) != 1)
			weft_yield();
		drain(sv[1]);
		CHECK(weft_sleep(weft_now() + MS) == 0);	/* its edge is harvested */
		weft_chan_case cs[1] = { fd_case(WEFT_SELECT_WRITABLE, sv[0]) };
		CHECK(weft_chan_select(cs, 1, -1) == 0 && cs[0].err == 0);
		CHECK(weft_write(sv[0], "w", 1, -1) == 1);	/* room is left */
		__atomic_store_n(&a.phase, 2, __ATOMIC_RELEASE);
		join(b);	/* B's weft_wait hangs: the harness's timeout */
		drain(sv[1]);
	}
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
}

Test(select, reported_writability_with_room_left_wakes_an_after_eagain_waiter, .timeout = 60)
{
	run(1, reported_room_left, NULL);
}

/* Stress: two selects of {readable fd, receive} and a plain reader on one
 * socket, on several workers, while bytes come in chunks and elements are
 * sent: every byte is read (no select or reader sleeps with bytes in the
 * socket) and every element received once. */
struct crowd {
	int sv[2];
	weft_chan *ch;
	unsigned long bytes, sum, msgs;	/* atomic */
};

static void crowd_add(struct crowd *c, ssize_t n)
{
	if (n > 0)
		__atomic_fetch_add(&c->bytes, (unsigned long)n, __ATOMIC_ACQ_REL);
}

static void crowd_select(void *arg)
{
	struct crowd *c = arg;
	char buf[4096];
	for (;;) {
		int v = 0;
		weft_chan_case cs[2] = { fd_case(WEFT_SELECT_READABLE, c->sv[0]), recv_case(c->ch, &v) };
		int k = weft_chan_select(cs, 2, -1);
		CHECK(k == 0 || k == 1);
		if (k == 1) {
			CHECK(cs[1].err == 0);
			__atomic_fetch_add(&c->sum, (unsigned long)v, __ATOMIC_ACQ_REL);
			__atomic_fetch_add(&c->msgs, 1, __ATOMIC_ACQ_REL);
			continue;
		}
		ssize_t n = weft_read(c->sv[0], buf, sizeof buf, 0);
		if (n == 0)
			return;	/* the end */
		CHECK(n > 0 || errno == ETIMEDOUT);
		crowd_add(c, n);
	}
}

static void crowd_read(void *arg)
{
	struct crowd *c = arg;
	char buf[4096];
	ssize_t n;
	while ((n = weft_read(c->sv[0], buf, sizeof buf, -1)) > 0)
		crowd_add(c, n);
	CHECK(n == 0);
}

static void crowd_send(void *arg)
{
	struct crowd *c = arg;
	for (int i = 1; i <= 2000; i++)
		CHECK(weft_chan_send(c->ch, &i, -1) == 0);
}

static void crowd(void *arg)
{
	(void)arg;
	unsigned rounds = scaled(30, 10, 2);
	for (unsigned r = 0; r < rounds; r++) {
		struct crowd c = { .ch = weft_chan_new(sizeof(int), 0) };
		socket_pair(c.sv);
		weft_co *s1 = go(crowd_select, &c), *s2 = go(crowd_select, &c), *rd = go(crowd_read, &c);
		weft_co *snd = go(crowd_send, &c);
		unsigned long total = 0;
		char chunk[700] = { 0 };
		for (unsigned i = 0; i < 3000; i++) {
			size_t len = 1 + (i * 7919) % sizeof chunk;
			CHECK(weft_write(c.sv[1], chunk, len, -1) == (ssize_t)len);
			total += len;
			if (i % 7 == 0)
				weft_yield();
		}
		join(snd);
		/* a hang here: bytes in the socket, every reader asleep */
		while (__atomic_load_n(&c.bytes, __ATOMIC_ACQUIRE) != total ||
		       __atomic_load_n(&c.msgs, __ATOMIC_ACQUIRE) != 2000)
			weft_yield();
		CHECK(__atomic_load_n(&c.sum, __ATOMIC_ACQUIRE) == 2000ul * 2001 / 2);
		CHECK(shutdown(c.sv[1], SHUT_WR) == 0);
		join(s1);
		join(s2);
		join(rd);
		CHECK(weft_close(c.sv[0]) == 0 && weft_close(c.sv[1]) == 0);
		weft_chan_free(c.ch);
	}
}

Test(select, two_selects_and_a_reader_on_one_socket_lose_nothing, .timeout = 600)
{
	run(4, crowd, NULL);
}

/* Stress: weft_close or weft_release of a socket that selects (both
 * directions, and one direction) and a reader wait on, from several
 * workers, its number then reused at once: each select reports an fd case
 * ECANCELED, the reader fails ECANCELED, and the new file's readers work.
 * A select or read that begins only after the close(2) (weft_close's, or
 * the one after weft_release) finds no open fd: EBADF.  Each counts itself
 * parked before its call begins, and a close that does not wait for the
 * parks (r & 2 clear) can end in between when its worker thread is
 * preempted there. */
struct closing {
	int fd;
	weft_chan *ch;
	unsigned parked;	/* atomic */
};

static void closing_select(void *arg)
{
	struct closing *c = arg;
	int v;
	weft_chan_case cs[3] = { fd_case(WEFT_SELECT_READABLE, c->fd), recv_case(c->ch, &v),
				 fd_case(WEFT_SELECT_WRITABLE, c->fd) };
	__atomic_fetch_add(&c->parked, 1, __ATOMIC_ACQ_REL);
	int k = weft_chan_select(cs, 3, -1);
	if (k == -1)	/* it began during the close, or after it */
		CHECK(errno == ECANCELED || errno == EBADF);
	else
		CHECK((k == 0 || k == 2) && cs[k].err == ECANCELED);
}

static void closing_read(void *arg)
{
	struct closing *c = arg;
	char b;
	__atomic_fetch_add(&c->parked, 1, __ATOMIC_ACQ_REL);
	CHECK(weft_read(c->fd, &b, 1, -1) == -1 && (errno == ECANCELED || errno == EBADF));
}

static void fill(int fd)
{
	char buf[4096] = { 0 };
	while (weft_write(fd, buf, sizeof buf, 0) > 0)
		;
	CHECK(errno == ETIMEDOUT);
}

static void closing(void *arg)
{
	(void)arg;
	unsigned rounds = scaled(2000, 300, 30);
	for (unsigned r = 0; r < rounds; r++) {
		int sv[2];
		socket_pair(sv);
		fill(sv[0]);
		bool release = r & 1;
		struct closing c = { .fd = sv[0], .ch = weft_chan_new(sizeof(int), 0) };
		uint64_t parks = stats_now().total.parks;
		weft_co *co[4] = { go(closing_select, &c), go(closing_select, &c), go(closing_read, &c),
				   go(closing_read, &c) };
		while (__atomic_load_n(&c.parked, __ATOMIC_ACQUIRE) != 4)
			weft_yield();
		if (r & 2)
			wait_parks(parks, 4);
		CHECK((release ? weft_release(sv[0]) : weft_close(sv[0])) == 0);
		if (release)
			CHECK(close(sv[0]) == 0);
		for (int i = 0; i < 4; i++)
			join(co[i]);
		weft_chan_free(c.ch);
		int nv[2];
		socket_pair(nv);	/* most likely sv[0]'s number */
		char b;
		CHECK(weft_write(nv[1], "n", 1, -1) == 1);
		CHECK(weft_read(nv[0], &b, 1, -1) == 1 && b == 'n');
		weft_chan_case cs[1] = { fd_case(WEFT_SELECT_WRITABLE, nv[0]) };
		CHECK(weft_chan_select(cs, 1, -1) == 0 && cs[0].err == 0);
		CHECK(weft_close(nv[0]) == 0 && weft_close(nv[1]) == 0 && weft_close(sv[1]) == 0);
	}
}

Test(select, close_or_release_of_a_crowded_fd_ends_every_wait, .timeout = 600)
{
	run(4, closing, NULL);
}

/* ------------------------------------------------------ deadline, cancel, interrupt */

/* After the select: nothing of it is left on the fd (a reader and a writer
 * work as before). */
static void fd_works(int sv[2])
{
	char b;
	CHECK(weft_write(sv[1], "z", 1, -1) == 1);
	CHECK(weft_read(sv[0], &b, 1, -1) == 1 && b == 'z');
}

static void deadline(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	int v;
	weft_chan_case cs[2] = { fd_case(WEFT_SELECT_READABLE, sv[0]), recv_case(ch, &v) };
	int64_t until = weft_now() + 5 * MS;
	CHECK(weft_chan_select(cs, 2, until) == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() >= until);
	CHECK(weft_chan_select(cs, 2, 0) == -1 && errno == ETIMEDOUT);	/* past: no wait */
	fd_works(sv);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	weft_chan_free(ch);
}

Test(select, the_deadline_ends_it)
{
	run(2, deadline, NULL);
}

static void cancel_or_interrupt(bool cancel)
{
	int sv[2];
	socket_pair(sv);
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	struct sel s = { .fd = sv[0], .ch = ch, .deadline = -1, .result = -2 };
	weft_co *co = select_parked(&s);
	CHECK((cancel ? weft_cancel(co) : weft_interrupt(co)) == 0);
	join(co);
	CHECK(s.result == -1 && s.err == (cancel ? ECANCELED : EINTR));
	fd_works(sv);
	if (!cancel) {	/* nothing sticky: the next select waits and wins */
		struct sel t = { .fd = sv[0], .ch = ch, .deadline = -1, .result = -2 };
		co = select_parked(&t);
		int x = 7;
		CHECK(weft_chan_send(ch, &x, -1) == 0);
		join(co);
		CHECK(t.result == 1 && t.v == 7);
	}
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	weft_chan_free(ch);
}

static void cancelled(void *arg)
{
	(void)arg;
	cancel_or_interrupt(true);
}

static void interrupted(void *arg)
{
	(void)arg;
	cancel_or_interrupt(false);
}

Test(select, weft_cancel_ends_it)
{
	run(2, cancelled, NULL);
}

Test(select, weft_interrupt_ends_it_once)
{
	run(2, interrupted, NULL);
}

/* ------------------------------------------------------ other waiters */

struct reader {
	int fd;
	char b;
	ssize_t result;
};

static void reader_main(void *arg)
{
	struct reader *r = arg;
	r->result = weft_read(r->fd, &r->b, 1, -1);
}

/* A reader waits first; the select queues behind it, gets the turn when
 * the reader has read, waits again, and wins at the next byte.  Then a
 * select queued behind a reader is woken by a close. */
static void behind_a_reader(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	struct reader rd = { .fd = sv[0], .result = -2 };
	uint64_t parks = stats_now().total.parks;
	weft_co *r = go(reader_main, &rd);
	wait_parks(parks, 1);
	struct sel s = { .fd = sv[0], .ch = ch, .deadline = -1, .result = -2 };
	weft_co *co = select_parked(&s);
	parks = stats_now().total.parks;
	CHECK(weft_write(sv[1], "1", 1, -1) == 1);
	join(r);
	CHECK(rd.result == 1 && rd.b == '1');
	/* the reader took the byte; the select, handed the turn, waits again
	 * (its first park, and the one after the hand-over) */
	wait_parks(parks, 1);
	CHECK(s.result == -2);
	CHECK(weft_write(sv[1], "2", 1, -1) == 1);
	join(co);
	CHECK(s.result == 0 && s.cs[0].err == 0);
	char b;
	CHECK(weft_read(sv[0], &b, 1, -1) == 1 && b == '2');
	fd_works(sv);

	rd = (struct reader){ .fd = sv[0], .result = -2 };
	parks = stats_now().total.parks;
	r = go(reader_main, &rd);
	wait_parks(parks, 1);
	s = (struct sel){ .fd = sv[0], .ch = ch, .deadline = -1, .result = -2 };
	co = select_parked(&s);
	CHECK(weft_close(sv[0]) == 0);
	join(r);
	join(co);
	CHECK(rd.result == -1);
	CHECK(s.result == 0 && s.cs[0].err == ECANCELED);
	CHECK(weft_close(sv[1]) == 0);
	weft_chan_free(ch);
}

Test(select, behind_another_waiter_of_the_fd)
{
	run(2, behind_a_reader, NULL);
}

/* ------------------------------------------------------ bad input */

static void bad_input(void *arg)
{
	(void)arg;
	int sv[2];
	socket_pair(sv);
	weft_chan *ch = weft_chan_new(sizeof(int), 0);
	int v;
	weft_chan_case cs[2];
	/* not open, negative */
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(close(p[0]) == 0 && close(p[1]) == 0);
	cs[0] = fd_case(WEFT_SELECT_READABLE, p[0]);
	CHECK(weft_chan_select(cs, 1, -1) == -1 && errno == EBADF);
	cs[0] = fd_case(WEFT_SELECT_WRITABLE, -1);
	CHECK(weft_chan_select(cs, 1, -1) == -1 && errno == EBADF);
	/* a bad fd fails the select even beside a ready channel case */
	weft_chan *ready = weft_chan_new(sizeof(int), 1);
	CHECK(weft_chan_send(ready, &v, -1) == 0);
	cs[0] = recv_case(ready, &v);
	cs[1] = fd_case(WEFT_SELECT_READABLE, p[0]);
	CHECK(weft_chan_select(cs, 2, -1) == -1 && errno == EBADF);
	/* an fd case with a channel or an element */
	cs[0] = fd_case(WEFT_SELECT_READABLE, sv[0]);
	cs[0].ch = ch;
	CHECK(weft_chan_select(cs, 1, -1) == -1 && errno == EINVAL);
	cs[0] = fd_case(WEFT_SELECT_READABLE, sv[0]);
	cs[0].elem = &v;
	CHECK(weft_chan_select(cs, 1, -1) == -1 && errno == EINVAL);
	/* a second case of one direction, same fd or not */
	cs[0] = fd_case(WEFT_SELECT_READABLE, sv[0]);
	cs[1] = fd_case(WEFT_SELECT_READABLE, sv[1]);
	CHECK(weft_chan_select(cs, 2, -1) == -1 && errno == EINVAL);
	cs[1] = fd_case(WEFT_SELECT_READABLE, sv[0]);
	CHECK(weft_chan_select(cs, 2, -1) == -1 && errno == EINVAL);
	/* nothing was left behind: the fd and the channel work */
	fd_works(sv);
	CHECK(weft_chan_recv(ready, &v, 0) == 0);
	CHECK(weft_close(sv[0]) == 0 && weft_close(sv[1]) == 0);
	weft_chan_free(ch);
	weft_chan_free(ready);
}

Test(select, bad_fd_cases_fail_clearly)
{
	run(1, bad_input, NULL);
}

static int plain_sv[2];

static void fd_case_eperm(void)
{
	weft_chan_case cs[1] = { fd_case(WEFT_SELECT_READABLE, plain_sv[0]) };
	cr_assert_eq(weft_chan_select(cs, 1, -1), -1);
	cr_assert_eq(errno, EPERM);
}

Test(select, fd_cases_from_a_plain_thread_are_EPERM)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, plain_sv), 0);
	check_outside_coroutines(fd_case_eperm);
	close(plain_sv[0]);
	close(plain_sv[1]);
}
