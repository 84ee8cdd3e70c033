/* SPDX-License-Identifier: MIT */
/* Adversarial scenes for the workers' rings (lib/uring.c) under the file
 * path (lib/io.c), beyond test_uring.c.  The pipe-as-O_DIRECT-file trick
 * of test_uring.c keeps reads in flight until data comes. */
#include "harness.h"
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "coro_test.h"
#include "fdtable.h"	/* white-box: the fd's flags */

static void run_uring(unsigned workers, void (*fn)(void *), void *arg)
{
	int r = weft_main(fn, arg, &WEFT_CONFIG(.workers = workers, .io = WEFT_IO_URING));
	if (r != 0 && (errno == ENOSYS || errno == EPERM))
		cr_skip_test("io_uring cannot be had here (errno %d)", errno);
	cr_assert_eq(r, 0, "errno %d", errno);
}

static void as_direct_file(int fd)
{
	struct weft__fd *e = weft__fd_find(fd);
	CHECK(e);
	e->flags |= FD_FILE | FD_DIRECT;
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0);
}

static void ring_pipe(int p[2])
{
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	char c;
	CHECK(weft_read(p[0], &c, 1, 0) == -1 && errno == ETIMEDOUT);
	as_direct_file(p[0]);
}

struct reader {
	int fd;
	char buf[1];
	ssize_t n;
	int err;
};

static void reader_main(void *arg)
{
	struct reader *r = arg;
	r->n = weft_pread(r->fd, r->buf, 1, 0, -1);
	r->err = errno;
}

/* ---- a coroutine that blocks its worker in a plain system call (no
 * signal handler anywhere in the process) while a read that worker
 * submitted is in flight on its ring: the read's completion is the
 * kernel's task_work, run on the submitting thread and raised as a
 * notification signal (TWA_SIGNAL: neither COOP_TASKRUN nor DEFER_TASKRUN
 * is set), so an epoll_wait, which the kernel never restarts, returns -1
 * EINTR though no signal was sent.  Under WEFT_IO=epoll (the pool does the
 * read) the same scene times out with 0.  One worker: the submitter and
 * the blocked coroutine share it. */

struct epblocker {
	atomic_int tid;
	int wfd;
	int got;
	int err;
};

static void epoll_blocker(void *arg)
{
	struct epblocker *b = arg;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	atomic_store(&b->tid, (int)syscall(SYS_gettid));
	struct epoll_event ev;
	b->got = epoll_wait(ep, &ev, 1, 1000);	/* nothing is ever ready in ep */
	b->err = errno;
	close(ep);
}

/* Whether thread tid is inside epoll_wait or epoll_pwait now. */
static bool in_epoll_wait(int tid)
{
	char path[64], line[64] = "";
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	long nr = fgets(line, sizeof line, f) ? strtol(line, NULL, 10) : -1;
	bool in = nr == SYS_epoll_pwait;
#ifdef SYS_epoll_wait
	in |= nr == SYS_epoll_wait;
#endif
	fclose(f);
	return in;
}

static void *pipe_feeder(void *arg)
{
	struct epblocker *b = arg;
	int tid;
	while ((tid = atomic_load(&b->tid)) == 0 || !in_epoll_wait(tid))
		sched_yield();
	CHECK(write(b->wfd, "x", 1) == 1);	/* completes the ring read */
	return NULL;
}

static void eintr_main(void *unused)
{
	(void)unused;
	int p[2];
	ring_pipe(p);
	struct reader r = { .fd = p[0] };
	uint64_t parks = stats_now().total.parks;
	weft_co *rc = go(reader_main, &r);
	wait_parks(parks, 1);	/* the read is on worker 0's ring */
	struct epblocker b = { .wfd = p[1] };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, pipe_feeder, &b) == 0);
	weft_co *bc = go(epoll_blocker, &b);
	join(bc);
	join(rc);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(r.n == 1);
	if (b.got != 0)
		fprintf(stderr, "a worker's epoll_wait with nothing ready: %d, errno %d (no signal was sent)\n",
			b.got, b.err);
	CHECK(b.got == 0);
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(uring_adv, a_ring_completion_interrupts_no_system_call_of_its_worker, .timeout = 120)
{
	run_uring(1, eintr_main, NULL);
}

/* ---- the same with what the rings are for: a regular file's uncached
 * read (64 MiB, its pages dropped) in flight on worker 0's ring while a
 * coroutine on worker 0 sits in a plain epoll_wait. */

enum { BIG = 64 << 20 };

struct big_read {
	int fd;
	char *buf;
	ssize_t n;
};

static void big_reader(void *arg)
{
	struct big_read *r = arg;
	r->n = weft_pread(r->fd, r->buf, BIG, 0, -1);
}

static void file_eintr_main(void *unused)
{
	(void)unused;
	char path[] = "/tmp/weft-uring-adv-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(unlink(path) == 0);
	char *buf = malloc(BIG);
	CHECK(buf);
	memset(buf, 'f', BIG);
	CHECK(write(fd, buf, BIG) == BIG);
	CHECK(fsync(fd) == 0);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);	/* uncached */
	struct big_read r = { .fd = fd, .buf = buf };
	uint64_t parks = stats_now().total.parks;
	weft_co *rc = go(big_reader, &r);
	wait_parks(parks, 1);	/* on worker 0's ring */
	struct epblocker b = { .wfd = -1 };
	weft_co *bc = go(epoll_blocker, &b);
	join(bc);
	join(rc);
	CHECK(r.n == BIG);
	if (b.got != 0)
		fprintf(stderr, "a worker's epoll_wait with nothing ready, a file read in flight: %d, errno %d\n",
			b.got, b.err);
	CHECK(b.got == 0);
	free(buf);
	CHECK(weft_close(fd) == 0);
}

Test(uring_adv, a_file_read_on_the_ring_interrupts_no_system_call_of_its_worker, .timeout = 120)
{
	run_uring(1, file_eintr_main, NULL);
}
