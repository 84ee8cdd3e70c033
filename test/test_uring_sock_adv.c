/* SPDX-License-Identifier: MIT */
/* Adversarial scenes for stream sockets through the workers' rings
 * (lib/io.c, "sockets on rings"; lib/uring.c) under WEFT_IO=uring and
 * WEFT_URING_SOCKETS=1.  Each test says what it shows; the vfork scenes
 * show a known gap and skip with its reason where they see it. */
#include "harness.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uring_test.h"
#include "worker.h"	/* white-box: which worker runs a coroutine */

enum { LEN = 64 };

struct reader {
	int fd;
	int64_t deadline;
	char buf[LEN];
	ssize_t n;
	int err;
	struct weft__worker *worker;	/* where it queued its RECV */
	atomic_bool done;
};

static void reader_main(void *arg)
{
	struct reader *r = arg;
	r->worker = weft__worker_self();
	r->n = weft_read(r->fd, r->buf, sizeof r->buf, r->deadline);
	r->err = errno;
	atomic_store(&r->done, true);
}

/* ---- a worker in an uninterruptible wait holds back the CQEs of the
 * RECVs it submitted.
 *
 * A known gap (docs/design.md, "The io_uring backend"; weft.h): a reader stalls for as
 * long as another coroutine's system call lasts; readiness does not.  The
 * ring tests SKIP with the gap's reason where they see the stall, and pass
 * where they do not (a kernel that posts the CQE otherwise, or a fix);
 * their other checks (the bytes read, the deadline's ETIMEDOUT) hold
 * either way.  The kernel posts a
 * RECV's CQE through task work on the thread that submitted it (the
 * worker's flush: lib/uring.c, weft__uring_flush); a thread in a killable
 * or uninterruptible sleep (here vfork(2)'s wait for its child; also
 * posix_spawn, a page fault on NFS, a disk in D state) does not run task
 * work, so the CQE, its eventfd signal and the reader's wake all wait for
 * the system call to end.  The monitor adopts the stuck worker, but its
 * flush (lib/monitor.c:255) and rescue only cover what is queued or ready
 * in the poller, not completions owed by the stuck thread.  Under
 * readiness (the control below) the monitor's rescue harvests the stuck
 * worker's epfd and the reader goes on on the other worker at once.
 *
 * The vforked child shares the memory: it feeds the socket and waits (up
 * to 5 s, only to end the scene) for the reader to be done, and exits 1
 * if it never was. */

struct vscene {
	int sv[2];
	struct reader r;
	bool feed;	/* else the reader's deadline ends it */
};

static int child_waits_for_reader(struct vscene *s)
{
	if (s->feed && write(s->sv[1], "abc", 3) != 3)
		return 2;
	for (int i = 0; i < 5000 && !atomic_load(&s->r.done); i++)
		usleep(1000);
	return atomic_load(&s->r.done) ? 0 : 1;
}

struct vrun {
	bool feed, stalled;
};

static void vfork_main(void *arg)
{
	struct vrun *v = arg;
#ifdef WEFT_TEST_TSAN
	bool forks = true;
#else
	bool forks = RUNNING_ON_VALGRIND;
#endif
	if (forks)	/* the child would not share the reader's memory */
		cr_skip_test("vfork(2) is a fork(2) under valgrind and TSan");
	for (int tries = 0; tries < 50; tries++) {
		struct vscene s = { .r = { .fd = -1, .deadline = v->feed ? -1 : weft_now() + 200 * MS },
				    .feed = v->feed };
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s.sv) == 0);
		s.r.fd = s.sv[0];
		char c;
		CHECK(weft_read(s.sv[0], &c, 1, 0) == -1 && errno == ETIMEDOUT);	/* registered */
		uint64_t parks = stats_now().total.parks;
		weft_co *co = go(reader_main, &s.r);
		wait_parks(parks, 1);
		/* let the reader's worker run dry: its own flush submits the RECV */
		CHECK(weft_sleep(weft_now() + 20 * MS) == 0);
		if (weft__worker_self() != s.r.worker || atomic_load(&s.r.done)) {
			CHECK(write(s.sv[1], "x", 1) == 1);	/* not the scene: again */
			join(co);
			CHECK(weft_close(s.sv[0]) == 0 && weft_close(s.sv[1]) == 0);
			continue;
		}
		pid_t pid = vfork();
		if (pid == 0)
			_exit(child_waits_for_reader(&s));
		CHECK(pid > 0);
		int st = 0;
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
		v->stalled = WEXITSTATUS(st) != 0;
		join(co);
		if (v->feed)
			CHECK(s.r.n == 3 && memcmp(s.r.buf, "abc", 3) == 0);
		else
			CHECK(s.r.n == -1 && s.r.err == ETIMEDOUT);
		CHECK(weft_close(s.sv[0]) == 0 && weft_close(s.sv[1]) == 0);
		return;
	}
	cr_skip_test("the reader never shared the vforking coroutine's worker");
}

/* The known gap's reason (test/expected-skips lists it for every
 * configuration). */
#define GAP "known gap: a worker blocked in an uninterruptible system call delays " \
	    "completions of the ring ops it submitted; run such calls with weft_offload"

Test(uring_sock_adv, control_readiness_reader_goes_on_while_its_worker_is_in_vfork, .timeout = 60)
{
	struct vrun v = { .feed = true, .stalled = true };
	run_uring_sockets(2, false, vfork_main, &v);
	cr_assert(!v.stalled, "readiness: the reader stalled behind its worker's vfork");
}

Test(uring_sock_adv, ring_reader_goes_on_while_its_worker_is_in_vfork, .timeout = 60)
{
	struct vrun v = { .feed = true, .stalled = true };
	run_uring_sockets(2, true, vfork_main, &v);
	if (v.stalled)	/* the RECV's CQE waited 5 s for its submitter's vfork */
		cr_skip_test(GAP);
}

/* The same stall for a deadline: the monitor fires the stuck worker's
 * timer and the reader wakes on the other worker, but its ASYNC_CANCEL
 * completes the poll-armed RECV through task work on the submitter too
 * (the cancel's own CQE comes, the RECV's -ECANCELED does not), and
 * away_stop (lib/io.c) waits for it with no deadline: a 200 ms deadline
 * is overrun by the whole vfork.  A weft_close of the fd would wait as
 * long (forget waits for the reader's reference).  The same known gap. */
Test(uring_sock_adv, control_readiness_deadline_ends_a_read_while_its_worker_is_in_vfork, .timeout = 60)
{
	struct vrun v = { .feed = false, .stalled = true };
	run_uring_sockets(2, false, vfork_main, &v);
	cr_assert(!v.stalled, "readiness: the deadline waited for the worker's vfork");
}

Test(uring_sock_adv, ring_deadline_ends_a_read_while_its_worker_is_in_vfork, .timeout = 60)
{
	struct vrun v = { .feed = false, .stalled = true };
	run_uring_sockets(2, true, vfork_main, &v);
	if (v.stalled)	/* a 200 ms deadline returned after the 5 s vfork */
		cr_skip_test(GAP);
}

/* ---- the same for a file transfer on the ring (sockets off: WEFT_IO=uring
 * takes files to the rings by default).  A 16 MiB read of an uncached
 * file on disk goes to the ring of the reader's worker; that worker's
 * other coroutine then vforks while the read is in flight.  A kernel that
 * completes a buffered read through task work on its submitter (async
 * buffered reads retry from the page's wake as task work; an O_DIRECT
 * read's completion is task work too) holds the read until the vfork
 * ends, as for a RECV: the test SKIPs with the gap's reason then.  It
 * passes where the read finished before the vfork or through io-wq,
 * whose completions the kernel posts at once.  The first stall ends it. */
enum { FILE_LEN = 16 << 20 };

struct freader {
	int fd;
	char *buf;
	ssize_t n;
	struct weft__worker *worker;
	atomic_bool done;
};

static void freader_main(void *arg)
{
	struct freader *r = arg;
	r->worker = weft__worker_self();
	r->n = weft_pread(r->fd, r->buf, FILE_LEN, 0, -1);
	atomic_store(&r->done, true);
}

static int child_waits_for_freader(struct freader *r)
{
	for (int i = 0; i < 5000 && !atomic_load(&r->done); i++)
		usleep(1000);
	return atomic_load(&r->done) ? 0 : 1;
}

static void file_vfork_main(void *arg)
{
	int *stalls = arg;
	if (RUNNING_ON_VALGRIND)	/* the child would not share the reader's memory */
		cr_skip_test("vfork(2) is a fork(2) under valgrind and TSan");
	char path[] = "/var/tmp/weft-uring-sock-adv-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && unlink(path) == 0);
	char *buf = malloc(FILE_LEN);
	CHECK(buf);
	memset(buf, 'f', FILE_LEN);
	CHECK(write(fd, buf, FILE_LEN) == FILE_LEN && fsync(fd) == 0);
	for (int tries = 0; tries < 10 && !*stalls; tries++) {
		CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);	/* uncached */
		struct freader r = { .fd = fd, .buf = buf };
		uint64_t parks = stats_now().total.parks;
		weft_co *co = go(freader_main, &r);
		/* parked on the ring, or done without parking: the page cache
		 * may still hold the file (wait_parks would wait for good) */
		while (stats_now().total.parks < parks + 1 && !atomic_load(&r.done))
			weft_yield();
		if (weft__worker_self() == r.worker && !atomic_load(&r.done)) {
			pid_t pid = vfork();
			if (pid == 0)
				_exit(child_waits_for_freader(&r));
			CHECK(pid > 0);
			int st = 0;
			CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
			*stalls += WEXITSTATUS(st) != 0;
		}
		join(co);
		CHECK(r.n == FILE_LEN);	/* whatever the scene, the read stands */
	}
	free(buf);
	CHECK(weft_close(fd) == 0);
}

Test(uring_sock_adv, ring_file_read_goes_on_while_its_worker_is_in_vfork, .timeout = 120)
{
#ifdef WEFT_TEST_TSAN
	cr_skip_test("vfork(2) is a fork(2) under valgrind and TSan");
#endif
	int stalls = 0;
	run_uring_sockets(2, false, file_vfork_main, &stalls);
	if (stalls)	/* the read's CQE waited 5 s for its submitter's vfork */
		cr_skip_test(GAP);
}
