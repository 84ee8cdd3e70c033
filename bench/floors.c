/* SPDX-License-Identifier: MIT */
/*
 * floors — the machine's cost floors, measured by the suite itself: what the
 * cheapest possible version of each thing weft does costs here, so that the
 * benchmarks can be read against them (scripts/bench.py's cost model).
 *
 *   floors NAME [1]      measure one floor (the optional 1 is the worker
 *                        count of the suite's `PROGRAM NAME WORKERS`
 *                        convention; floors run on their own threads)
 *   floors list          print the floor names
 *
 * Each run measures the floor twice in the same process, an untimed warm-up
 * and then a timed run of the same size, timing the measured loop only
 * (CLOCK_MONOTONIC around it; set-up such as thread creation, mmap and munmap
 * is outside).  The loop runs in chunks of a few hundred or thousand
 * operations up to the floor's size, but stops after RUN_CAP_NS, so that a
 * loaded machine (where a wake can take 250 µs rather than 15) still gets
 * through in well under a second; ops says what was done.  It prints one
 * line in the suite's format (bench/README.md):
 *
 *   RESULT name=switch impl=floor workers=1 ns=51234567 ops=10000000
 *          value=10000000 check=ok
 *
 * ns is the timed run's total, ops the operations it did (ns/ops is the
 * floor), value what was counted to check it.  The floors:
 *
 *   switch         weft's own context switch (lib/context.h, the assembly of
 *                  switch_x86_64.S / switch_aarch64.S): two contexts on one
 *                  thread switching back and forth.  ops: switches.
 *   cas            an uncontended compare-and-swap (`lock cmpxchg` on
 *                  x86-64) on a cache line no other thread touches, each
 *                  depending on the previous one.  ops: CASes.
 *   line-transfer  one cache line handed between two threads pinned to the
 *                  first two CPUs of the affinity mask: a counter the one
 *                  makes odd and the other even, each spinning (no pause)
 *                  until it sees the other's write.  ops: one-way hand-offs.
 *                  Needs 2 CPUs: with fewer it fails (check=fail) and says
 *                  why on stderr.
 *   epoll-wait     `epoll_wait` with timeout 0 on an empty epoll set: the
 *                  cost of a syscall that does nothing.  ops: calls.
 *   eventfd-wake   thread B sleeps in `epoll_wait` on an eventfd; A writes
 *                  it, B wakes, reads it and answers on a second eventfd
 *                  that A sleeps on the same way.  ops: one-way wakes (two
 *                  per round trip).  Pinned as line-transfer when there are
 *                  2 CPUs, unpinned otherwise (pinned=no in the RESULT).
 *   fresh-page     the first write to a fresh 4 KiB anonymous page (mmap
 *                  MAP_NORESERVE, MADV_NOHUGEPAGE), one byte per page with
 *                  a stride of 17 pages so that no two touched pages are
 *                  neighbours.  ops: pages; value: the minor faults the
 *                  loop took (getrusage), at least one per page.
 *   send-read      a 64-byte send(2) on one end of a loopback TCP connection
 *                  and a read(2) of it at the other, on one thread (both
 *                  ends TCP_NODELAY): the system calls of an echo message.
 *                  ops: messages; value: the bytes read.
 *   send-recv      the same with recv(2) for the read: the socket layer's
 *                  entry, which weft and the epoll peer use
 *                  (docs/notes/2026-12-06-measurements-behind-the-code.md,
 *                  "recv").
 *
 * The exit status is 0 when the check passed, 1 when it failed, 2 on a
 * usage or system error.  scripts/bench.py runs every floor once per
 * invocation of the suite.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "context.h"

#define BENCH_PROG "floors"
#include "util.h"

/* The sizes (ops per run, at most; about 0.1 s each on a quiet 2-CPU VM),
 * and the chunks they run in (between two looks at the clock). */
#define SWITCH_N INT64_C(10000000)
#define CAS_N INT64_C(10000000)
#define LINE_N INT64_C(200000) /* one-way: 100,000 round trips */
#define EPOLL_N INT64_C(100000)
#define WAKE_N INT64_C(10000) /* one-way: 5,000 round trips */
#define PAGE_N INT64_C(10000)
#define MSG_N INT64_C(50000)
#define RUN_CAP_NS INT64_C(200000000) /* a run stops after its chunk then */

#define STACK_SIZE (64 * 1024) /* the switch floor's second context */
#define PAGE_SIZE 4096
#define PAGE_STRIDE 17 /* pages between two touched ones */

/* More key=value pairs for the RESULT line (a floor's set-up may set them). */
static char result_extra[64];

/* -------------------------------------------------------------- threads */

/* The first two CPUs of the affinity mask, and the mask to restore. */
static struct {
	cpu_set_t saved;
	int cpu[2];
	int n; /* how many of cpu[] there are (0 to 2) */
} cpus;

static void find_cpus(void)
{
	if (sched_getaffinity(0, sizeof cpus.saved, &cpus.saved) != 0)
		die("sched_getaffinity");
	cpus.n = 0;
	for (int c = 0; c < CPU_SETSIZE && cpus.n < 2; c++)
		if (CPU_ISSET(c, &cpus.saved))
			cpus.cpu[cpus.n++] = c;
}

static void set_affinity(pthread_attr_t *attr, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	errno = pthread_attr_setaffinity_np(attr, sizeof set, &set);
	if (errno != 0)
		die("pthread_attr_setaffinity_np");
}

static void pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		die("sched_setaffinity");
}

static void unpin_self(void)
{
	if (sched_setaffinity(0, sizeof cpus.saved, &cpus.saved) != 0)
		die("sched_setaffinity");
}

/* Starts fn on a thread of its own, on cpus.cpu[1] when pinned, and puts the
 * calling thread on cpus.cpu[0]. */
static pthread_t start_partner(void *(*fn)(void *), bool pinned)
{
	pthread_attr_t attr;
	pthread_t t;

	if ((errno = pthread_attr_init(&attr)) != 0)
		die("pthread_attr_init");
	if (pinned) {
		set_affinity(&attr, cpus.cpu[1]);
		pin_self(cpus.cpu[0]);
	}
	if ((errno = pthread_create(&t, &attr, fn, NULL)) != 0)
		die("pthread_create");
	pthread_attr_destroy(&attr);
	return t;
}

static void join_partner(pthread_t t)
{
	if ((errno = pthread_join(t, NULL)) != 0)
		die("pthread_join");
	unpin_self();
}

/* --------------------------------------------------------------- switch */

static struct {
	void *main_sp, *co_sp;
	void *stack;
	int64_t resumed; /* times the second context ran */
} sw;

/* The second context: back to the first, forever (it is never freed but
 * with the process). */
static void sw_partner(void *arg)
{
	(void)arg;
	for (;;) {
		sw.resumed++;
		weft__ctx_switch(&sw.co_sp, sw.main_sp);
	}
}

static bool switch_setup(void)
{
	sw.stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sw.stack == MAP_FAILED)
		die("mmap");
	sw.co_sp = weft__ctx_make((char *)sw.stack + STACK_SIZE, sw_partner,
				  NULL);
	return true;
}

/* n switches: n / 2 there and back. */
static bool switch_run(int64_t n, int64_t *value)
{
	int64_t before = sw.resumed;

	for (int64_t i = 0; i < n / 2; i++)
		weft__ctx_switch(&sw.main_sp, sw.co_sp);
	*value = 2 * (sw.resumed - before);
	return *value == n;
}

/* ------------------------------------------------------------------ cas */

static _Alignas(64) uint64_t cas_line[8];

static bool cas_run(int64_t n, int64_t *value)
{
	uint64_t start = __atomic_load_n(&cas_line[0], __ATOMIC_RELAXED);

	for (int64_t i = 0; i < n; i++) {
		uint64_t old = start + (uint64_t)i;
		if (!__atomic_compare_exchange_n(&cas_line[0], &old, old + 1,
						 false, __ATOMIC_SEQ_CST,
						 __ATOMIC_SEQ_CST))
			break;
	}
	*value = (int64_t)(__atomic_load_n(&cas_line[0], __ATOMIC_RELAXED) -
			   start);
	return *value == n;
}

/* -------------------------------------------------------- line-transfer */

#define BALL_STOP UINT64_MAX /* odd: the partner sees it, and returns */

static struct {
	_Alignas(64) uint64_t ball; /* the one line that moves */
	char pad[64 - sizeof(uint64_t)];
	pthread_t partner;
} lt;

static uint64_t wait_odd(void)
{
	uint64_t v;

	while (((v = __atomic_load_n(&lt.ball, __ATOMIC_ACQUIRE)) & 1) == 0)
		;
	return v;
}

/* Makes every odd value even, until BALL_STOP. */
static void *lt_partner(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t v = wait_odd();
		if (v == BALL_STOP)
			return NULL;
		__atomic_store_n(&lt.ball, v + 1, __ATOMIC_RELEASE);
	}
}

static bool line_setup(void)
{
	if (cpus.n < 2) {
		fprintf(stderr, "floors: line-transfer needs 2 CPUs in the "
			"affinity mask, there is %d\n", cpus.n);
		return false;
	}
	lt.ball = 0;
	lt.partner = start_partner(lt_partner, true);
	return true;
}

/* n one-way hand-offs: n / 2 round trips, odd there, even back. */
static bool line_run(int64_t n, int64_t *value)
{
	uint64_t start = __atomic_load_n(&lt.ball, __ATOMIC_RELAXED), v = start;

	for (int64_t i = 0; i < n / 2; i++, v += 2) {
		__atomic_store_n(&lt.ball, v + 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&lt.ball, __ATOMIC_ACQUIRE) != v + 2)
			;
	}
	*value = (int64_t)(v - start);
	return *value == n;
}

static void line_teardown(void)
{
	__atomic_store_n(&lt.ball, BALL_STOP, __ATOMIC_RELEASE);
	join_partner(lt.partner);
}

/* ----------------------------------------------------------- epoll-wait */

static int epfd = -1;

static int epoll_or_die(void)
{
	int fd = epoll_create1(EPOLL_CLOEXEC);
	if (fd < 0)
		die("epoll_create1");
	return fd;
}

static bool epoll_setup(void)
{
	epfd = epoll_or_die();
	return true;
}

static bool epoll_run(int64_t n, int64_t *value)
{
	struct epoll_event ev;
	int64_t empty = 0;

	for (int64_t i = 0; i < n; i++)
		empty += epoll_wait(epfd, &ev, 1, 0) == 0;
	*value = empty;
	return empty == n;
}

static void epoll_teardown(void)
{
	close(epfd);
}

/* --------------------------------------------------------- eventfd-wake */

/* to_b: A -> B, A's writes wake B; to_a: B's answers wake A.  Each side
 * sleeps in epoll_wait on its own epoll set, which holds its eventfd. */
static struct {
	int to_b, to_a, ep_b, ep_a;
	atomic_bool stop;
	bool pinned;
	pthread_t partner;
} ew;

static int eventfd_or_die(void)
{
	int fd = eventfd(0, EFD_CLOEXEC);
	if (fd < 0)
		die("eventfd");
	return fd;
}

static int epoll_of(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	int ep = epoll_or_die();

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		die("epoll_ctl");
	return ep;
}

/* Sleeps until fd is readable, then reads it: what was written since. */
static uint64_t sleep_read(int ep, int fd)
{
	struct epoll_event ev;
	uint64_t x;

	while (epoll_wait(ep, &ev, 1, -1) != 1)
		if (errno != EINTR)
			die("epoll_wait");
	if (read(fd, &x, sizeof x) != sizeof x)
		die("read eventfd");
	return x;
}

static void post(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof one) != sizeof one)
		die("write eventfd");
}

/* B: answers every wake, until told to stop. */
static void *ew_partner(void *arg)
{
	(void)arg;
	for (;;) {
		sleep_read(ew.ep_b, ew.to_b);
		if (atomic_load(&ew.stop))
			return NULL;
		post(ew.to_a);
	}
}

static bool wake_setup(void)
{
	ew.to_b = eventfd_or_die();
	ew.to_a = eventfd_or_die();
	ew.ep_b = epoll_of(ew.to_b);
	ew.ep_a = epoll_of(ew.to_a);
	atomic_init(&ew.stop, false);
	ew.pinned = cpus.n >= 2;
	snprintf(result_extra, sizeof result_extra, "pinned=%s",
		 ew.pinned ? "yes" : "no");
	if (!ew.pinned)
		fprintf(stderr, "floors: eventfd-wake unpinned: %d CPU in the "
			"affinity mask\n", cpus.n);
	ew.partner = start_partner(ew_partner, ew.pinned);
	return true;
}

/* n one-way wakes: n / 2 round trips. */
static bool wake_run(int64_t n, int64_t *value)
{
	int64_t answers = 0;

	for (int64_t i = 0; i < n / 2; i++) {
		post(ew.to_b);
		answers += (int64_t)sleep_read(ew.ep_a, ew.to_a);
	}
	*value = 2 * answers;
	return *value == n;
}

static void wake_teardown(void)
{
	atomic_store(&ew.stop, true);
	post(ew.to_b);
	join_partner(ew.partner);
	close(ew.ep_a);
	close(ew.ep_b);
	close(ew.to_a);
	close(ew.to_b);
}

/* ----------------------------------------------------------- fresh-page */

static struct {
	char *base;
	size_t len;
	size_t next; /* the next page to touch, in strides */
} fp;

/* A fresh mapping for each run (the warm-up's pages are no longer fresh),
 * room for n pages. */
static void page_prepare(int64_t n)
{
	fp.next = 0;
	fp.len = (size_t)n * PAGE_STRIDE * PAGE_SIZE;
	fp.base = mmap(NULL, fp.len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (fp.base == MAP_FAILED)
		die("mmap");
	if (madvise(fp.base, fp.len, MADV_NOHUGEPAGE) != 0)
		die("madvise MADV_NOHUGEPAGE");
}

static long minor_faults(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		die("getrusage");
	return ru.ru_minflt;
}

/* One byte of each of the next n PAGE_STRIDE-th pages; value: the faults
 * it took. */
static bool page_run(int64_t n, int64_t *value)
{
	volatile char *p = fp.base;
	long before = minor_faults();

	for (int64_t i = 0; i < n; i++, fp.next++)
		p[fp.next * PAGE_STRIDE * PAGE_SIZE] = 1;
	*value = minor_faults() - before;
	return *value >= n;
}

static void page_finish(void)
{
	if (munmap(fp.base, fp.len) != 0)
		die("munmap");
}

/* -------------------------------------------------- send-read, send-recv */

enum { MSG_LEN = 64 };

static struct {
	int tx, rx; /* the connection's two ends */
} sr;

static void nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
		die("setsockopt TCP_NODELAY");
}

/* A loopback TCP connection: sr.tx connected to sr.rx. */
static bool msg_setup(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) != 0 || listen(l, 1) != 0)
		die("listen on loopback");
	sr.tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sr.tx < 0 || connect(sr.tx, (struct sockaddr *)&a, sizeof a) != 0)
		die("connect on loopback");
	sr.rx = accept(l, NULL, NULL);
	if (sr.rx < 0)
		die("accept");
	close(l);
	nodelay(sr.tx);
	nodelay(sr.rx);
	return true;
}

/* n messages sent and taken back with read(2) or recv(2); value: bytes. */
static bool msg_run(int64_t n, int64_t *value, bool use_recv)
{
	static char out[MSG_LEN], in[16 << 10];
	int64_t got = 0;

	for (int64_t i = 0; i < n; i++) {
		if (send(sr.tx, out, sizeof out, 0) != (ssize_t)sizeof out)
			die("send");
		ssize_t r = use_recv ? recv(sr.rx, in, sizeof in, 0) : read(sr.rx, in, sizeof in);
		got += r > 0 ? r : 0;
	}
	*value = got;
	return got == n * MSG_LEN;
}

static bool read_run(int64_t n, int64_t *value)
{
	return msg_run(n, value, false);
}

static bool recv_run(int64_t n, int64_t *value)
{
	return msg_run(n, value, true);
}

static void msg_teardown(void)
{
	close(sr.tx);
	close(sr.rx);
}

/* ----------------------------------------------------------------- main */

static const struct floor {
	const char *name;
	int64_t ops, chunk; /* at most ops per run, in chunks (even) */
	bool (*setup)(void); /* false: it cannot run here (says why) */
	void (*prepare)(int64_t n); /* before each run, untimed */
	bool (*run)(int64_t n, int64_t *value); /* timed; true: check ok */
	void (*finish)(void); /* after each run, untimed */
	void (*teardown)(void);
} floors[] = {
	{ "switch", SWITCH_N, 10000, switch_setup, NULL, switch_run, NULL,
	  NULL },
	{ "cas", CAS_N, 10000, NULL, NULL, cas_run, NULL, NULL },
	{ "line-transfer", LINE_N, 100, line_setup, NULL, line_run, NULL,
	  line_teardown },
	{ "epoll-wait", EPOLL_N, 1000, epoll_setup, NULL, epoll_run, NULL,
	  epoll_teardown },
	{ "eventfd-wake", WAKE_N, 100, wake_setup, NULL, wake_run, NULL,
	  wake_teardown },
	{ "fresh-page", PAGE_N, 100, NULL, page_prepare, page_run,
	  page_finish, NULL },
	{ "send-read", MSG_N, 1000, msg_setup, NULL, read_run, NULL,
	  msg_teardown },
	{ "send-recv", MSG_N, 1000, msg_setup, NULL, recv_run, NULL,
	  msg_teardown },
};

#define NFLOORS (sizeof floors / sizeof floors[0])

struct outcome {
	int64_t ns, ops, value;
	bool ok;
};

/* One run of f: prepare, the timed chunks (until f->ops or RUN_CAP_NS),
 * finish. */
static struct outcome run_once(const struct floor *f)
{
	struct outcome o = { 0, 0, 0, true };
	int64_t t0, v;

	if (f->prepare)
		f->prepare(f->ops);
	t0 = now_ns();
	do {
		o.ok = f->run(f->chunk, &v) && o.ok;
		o.value += v;
		o.ops += f->chunk;
	} while (o.ops < f->ops && now_ns() - t0 < RUN_CAP_NS);
	o.ns = now_ns() - t0;
	if (f->finish)
		f->finish();
	return o;
}

/* The warm-up and the timed run; the outcome is the timed one's, failed
 * if either failed. */
static struct outcome measure(const struct floor *f)
{
	struct outcome warm, timed = { 0, 0, 0, false };

	if (f->setup && !f->setup())
		return timed;
	warm = run_once(f);
	timed = run_once(f);
	timed.ok = timed.ok && warm.ok;
	if (f->teardown)
		f->teardown();
	return timed;
}

static const struct floor *find_floor(const char *name)
{
	for (size_t i = 0; i < NFLOORS; i++)
		if (strcmp(name, floors[i].name) == 0)
			return &floors[i];
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: floors NAME [1]   (floors list)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const struct floor *f;
	struct outcome o;

	if (argc == 2 && strcmp(argv[1], "list") == 0) {
		for (size_t i = 0; i < NFLOORS; i++)
			puts(floors[i].name);
		return 0;
	}
	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "1") != 0))
		usage();
	f = find_floor(argv[1]);
	if (f == NULL) {
		fprintf(stderr, "floors: unknown floor \"%s\"\n", argv[1]);
		usage();
	}
	find_cpus();
	o = measure(f);
	printf("RESULT name=%s impl=floor workers=1 ns=%" PRId64 " ops=%" PRId64
	       " value=%" PRId64 " check=%s%s%s\n",
	       f->name, o.ns, o.ops, o.value, o.ok ? "ok" : "fail",
	       result_extra[0] ? " " : "", result_extra);
	fflush(stdout);
	return o.ok ? 0 : 1;
}
