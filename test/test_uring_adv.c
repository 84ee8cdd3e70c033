/* SPDX-License-Identifier: MIT */
/* Adversarial scenes for the workers' rings (lib/uring.c) under the file
 * path (lib/io.c), beyond test_uring.c.  The pipe-as-O_DIRECT-file trick
 * of test_uring.c keeps reads in flight until data comes. */
#include "harness.h"
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "uring_test.h"

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
 * is set), so an epoll_wait, which the kernel never restarts, may return
 * -1 EINTR though no signal was sent.  weft.h documents it ("Threads and
 * blocking calls"): such a call is retried as for a signal, and then
 * succeeds; these scenes retry it and check what it finally returns (0:
 * nothing is ever ready in its instance).  Under WEFT_IO=epoll no EINTR
 * comes.  One worker: the submitter and the blocked coroutine share it. */

struct epblocker {
	atomic_int tid;
	int wfd;
	int got;
	int err;
	int eintrs;	/* the EINTRs retried */
};

/* epoll_wait of an instance with nothing in it, for ms in all, retried on
 * EINTR with what is left, as weft.h tells a caller to. */
static void epoll_blocker(void *arg)
{
	struct epblocker *b = arg;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	atomic_store(&b->tid, (int)syscall(SYS_gettid));
	int64_t until = weft_now() + 1000 * 1000 * 1000;
	struct epoll_event ev;
	for (;;) {
		int64_t left = until - weft_now();
		b->got = epoll_wait(ep, &ev, 1, left > 0 ? (int)((left + 999999) / 1000000) : 0);
		b->err = errno;
		if (b->got >= 0 || b->err != EINTR)
			break;
		b->eintrs++;
	}
	close(ep);
}

/* Whether thread tid is inside epoll_wait or epoll_pwait now. */
static bool in_epoll_wait(int tid)
{
	return thread_in_epoll_wait(tid, NULL);
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
	fprintf(stderr, "a worker's epoll_wait, a ring read completing: %d EINTR retried\n", b.eintrs);
	if (b.got != 0)
		fprintf(stderr, "a worker's epoll_wait with nothing ready, retried: %d, errno %d\n",
			b.got, b.err);
	CHECK(b.got == 0);
	CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0);
}

Test(uring_adv, a_raw_epoll_wait_retried_on_eintr_beside_a_ring_read_succeeds, .timeout = 120)
{
	run_uring(1, eintr_main, NULL);
}

/* ---- the same with what the rings are for: a regular file's uncached
 * read (64 MiB, its pages dropped) in flight on worker 0's ring while a
 * coroutine on worker 0 sits in a plain epoll_wait, retried on EINTR. */

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
	fprintf(stderr, "a worker's epoll_wait, a file read on the ring: %d EINTR retried\n", b.eintrs);
	if (b.got != 0)
		fprintf(stderr, "a worker's epoll_wait with nothing ready, a file read in flight, retried: %d, errno %d\n",
			b.got, b.err);
	CHECK(b.got == 0);
	free(buf);
	CHECK(weft_close(fd) == 0);
}

Test(uring_adv, a_raw_epoll_wait_retried_on_eintr_beside_a_file_read_succeeds, .timeout = 120)
{
	run_uring(1, file_eintr_main, NULL);
}

/* ---- weft's own system calls never surface such an EINTR: the worker's
 * sleep in its loop (an epoll_wait with a timeout) is interrupted by the
 * ring read's completion, and the calls parked meanwhile end as they
 * should: the ring read with its byte, a weft_read of a pipe with the byte
 * written after, a weft_sleep with 0.  One worker: the loop that sleeps is
 * the submitter's. */

struct own {
	int rfd[2];		/* the ring read's pipe */
	int qfd[2];		/* the parked weft_read's pipe */
	atomic_int tid;		/* the worker's thread */
	struct reader r;
	ssize_t qn;
	int qerr;
	int slept;
	int sleep_err;
};

static void pipe_reader(void *arg)
{
	struct own *o = arg;
	char c;
	o->qn = weft_read(o->qfd[0], &c, 1, -1);
	o->qerr = errno;
}

static void sleeper(void *arg)
{
	struct own *o = arg;
	atomic_store(&o->tid, (int)syscall(SYS_gettid));
	o->slept = weft_sleep(weft_now() + 50 * 1000 * 1000);
	o->sleep_err = errno;
}

/* A plain thread: once the worker sleeps in its loop, completes the ring
 * read (the EINTR of that sleep), then once it sleeps again, wakes the
 * weft_read. */
static void *own_feeder(void *arg)
{
	struct own *o = arg;
	int tid;
	while ((tid = atomic_load(&o->tid)) == 0 || !thread_in_epoll_wait(tid, NULL))
		sched_yield();
	CHECK(write(o->rfd[1], "x", 1) == 1);
	while (!thread_in_epoll_wait(tid, NULL))
		sched_yield();
	CHECK(write(o->qfd[1], "y", 1) == 1);
	return NULL;
}

static void own_main(void *unused)
{
	(void)unused;
	struct own o = { 0 };
	ring_pipe(o.rfd);
	CHECK(pipe2(o.qfd, O_CLOEXEC) == 0);
	o.r.fd = o.rfd[0];
	uint64_t parks = stats_now().total.parks;
	weft_co *rc = go(reader_main, &o.r);
	weft_co *qc = go(pipe_reader, &o);
	weft_co *sc = go(sleeper, &o);
	wait_parks(parks, 3);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, own_feeder, &o) == 0);
	join(rc);
	join(qc);
	join(sc);
	CHECK(pthread_join(t, NULL) == 0);
	if (o.r.n != 1 || o.qn != 1 || o.slept != 0)
		fprintf(stderr, "ring read %zd (errno %d), weft_read %zd (errno %d), weft_sleep %d (errno %d)\n",
			o.r.n, o.r.err, o.qn, o.qerr, o.slept, o.sleep_err);
	CHECK(o.r.n == 1 && o.qn == 1 && o.slept == 0);
	for (int i = 0; i < 2; i++)
		CHECK(weft_close(o.rfd[i]) == 0 && weft_close(o.qfd[i]) == 0);
}

Test(uring_adv, weft_calls_never_surface_a_ring_completions_eintr, .timeout = 120)
{
	run_uring(1, own_main, NULL);
}

/* ---- close(2) may fail EINTR (a file system's flush interrupted: under
 * the uring backend with no signal sent, as above), and on Linux the fd is
 * closed all the same: retrying would close the number's next owner.  So
 * weft_close says 0 for it.  A seccomp filter makes close(2) of one number
 * answer EINTR in a child (the fd stays open there: the filter skips the
 * call). */

enum { EINTR_FD = 900 };

static void close_eintr_setup(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, EINTR_FD, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EINTR & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof f / sizeof *f, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		fprintf(stderr, "no seccomp\n");
		_exit(0);
	}
}

static void close_eintr_main(void *unused)
{
	(void)unused;
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	CHECK(dup2(p[0], EINTR_FD) == EINTR_FD);
	char c;
	CHECK(weft_read(EINTR_FD, &c, 1, 0) == -1 && errno == ETIMEDOUT);	/* registered */
	errno = 0;
	int r = weft_close(EINTR_FD);
	fprintf(stderr, "weft_close: %d, errno %d\n", r, r ? errno : 0);
}

Test(uring_adv, weft_close_takes_closes_eintr_for_closed)
{
	int status;
	char *err = run_child_after(close_eintr_setup, close_eintr_main, &status);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: status %#x: %s", status, err);
	if (strstr(err, "no seccomp"))
		cr_skip_test("seccomp filters cannot be installed here");
	cr_assert(strstr(err, "weft_close: 0, errno 0\n"), "the child said: %s", err);
}
