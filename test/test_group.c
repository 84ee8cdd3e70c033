/* SPDX-License-Identifier: MIT */
/* Groups and weft_shutdown_until (issue 23): a group of 10,000 members
 * waited; members cancelled while blocked in weft_read; a group freed with
 * members still running (from a coroutine and from a plain thread); members
 * spawning members; a wait whose deadline expires, then succeeds; a member
 * spawned after the cancel starts cancelled; the errors; counts under
 * churn and members spawned with options (issue 49); and a shutdown
 * whose deadline cancels a reader parked forever (0) or cannot stop a
 * spinner (ETIMEDOUT, the spinner named on stderr). */
#define WEFT_ERRNO_GUARD	/* errno is read after calls that suspend */
#include "weft.h"

#include "harness.h"
#include "coro_test.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* -------------------------------------------------------- many members */

static void count_one(void *arg)
{
	atomic_fetch_add((atomic_uint *)arg, 1);
}

static void ten_thousand(void *arg)
{
	(void)arg;
	unsigned n = scaled(10000, 10000, 1000);
	atomic_uint done = 0;
	weft_group *g = weft_group_new();
	CHECK(g);
	for (unsigned i = 0; i < n; i++)
		CHECK(weft_group_spawn(g, count_one, &done) != NULL);
	CHECK(weft_group_wait(g, -1) == 0);
	CHECK(atomic_load(&done) == n);
	CHECK(weft_group_free(g) == 0);
}

Test(group, ten_thousand_members_waited)
{
	run(2, ten_thousand, NULL);
}

/* -------------------------------------------------------- cancelled mid-I/O */

enum { READERS = 64 };

struct readers {
	int sv[READERS][2];
	atomic_uint cancelled, other;
	atomic_uint next;
};

static void reader(void *arg)
{
	struct readers *r = arg;
	unsigned i = atomic_fetch_add(&r->next, 1);
	char b;
	ssize_t n = weft_read(r->sv[i][0], &b, 1, -1);
	if (n == -1 && errno == ECANCELED)
		atomic_fetch_add(&r->cancelled, 1);
	else
		atomic_fetch_add(&r->other, 1);
}

static void cancel_mid_io(void *arg)
{
	(void)arg;
	struct readers r = { 0 };
	for (unsigned i = 0; i < READERS; i++)
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r.sv[i]) == 0);
	weft_group *g = weft_group_new();
	CHECK(g);
	uint64_t parks = stats_now().total.parks;
	for (unsigned i = 0; i < READERS; i++)
		CHECK(weft_group_spawn(g, reader, &r) != NULL);
	wait_parks(parks, READERS);	/* all parked in weft_read */
	CHECK(weft_group_wait(g, weft_now() + MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_group_cancel(g) == 0);
	CHECK(weft_group_wait(g, -1) == 0);
	CHECK(atomic_load(&r.cancelled) == READERS);
	CHECK(atomic_load(&r.other) == 0);
	CHECK(weft_group_free(g) == 0);
	for (unsigned i = 0; i < READERS; i++) {
		close(r.sv[i][0]);
		close(r.sv[i][1]);
	}
}

Test(group, cancelled_mid_io_every_member_returns_ecanceled)
{
	run(2, cancel_mid_io, NULL);
}

/* -------------------------------------------------------- freed while running */

struct sleepers {
	atomic_uint started, finished;
};

static void sleeper(void *arg)
{
	struct sleepers *s = arg;
	atomic_fetch_add(&s->started, 1);
	int r = weft_sleep(-1);
	CHECK(r == -1 && errno == ECANCELED);
	atomic_fetch_add(&s->finished, 1);
}

enum { SLEEPERS = 100 };

static void free_running(struct sleepers *s)
{
	weft_group *g = weft_group_new();
	CHECK(g);
	for (unsigned i = 0; i < SLEEPERS; i++)
		CHECK(weft_group_spawn(g, sleeper, s) != NULL);
	while (atomic_load(&s->started) < SLEEPERS)
		weft_yield();
	CHECK(atomic_load(&s->finished) == 0);
	CHECK(weft_group_free(g) == 0);
	CHECK(atomic_load(&s->finished) == SLEEPERS);
}

static void free_running_co(void *arg)
{
	struct sleepers s = { 0 };
	(void)arg;
	free_running(&s);
	/* a cancelled caller still waits for the members */
	struct sleepers s2 = { 0 };
	weft_group *g = weft_group_new();
	CHECK(g);
	for (unsigned i = 0; i < SLEEPERS; i++)
		CHECK(weft_group_spawn(g, sleeper, &s2) != NULL);
	CHECK(weft_cancel(weft_self()) == 0);
	CHECK(weft_group_wait(g, -1) == -1 && errno == ECANCELED);
	CHECK(weft_group_free(g) == 0);
	CHECK(atomic_load(&s2.finished) == SLEEPERS);
}

Test(group, freed_with_members_running_from_a_coroutine)
{
	run(2, free_running_co, NULL);
}

Test(group, freed_with_members_running_from_a_plain_thread)
{
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	struct sleepers s = { 0 };
	free_running(&s);
	cr_assert_eq(weft_shutdown(), 0);
}

/* -------------------------------------------------------- members spawning members */

struct tree {
	weft_group *g;
	atomic_uint nodes;
};

struct node {
	struct tree *t;
	unsigned depth;
};

static void node(void *arg);

static void grow(struct tree *t, unsigned depth)
{
	struct node *n = malloc(sizeof *n);
	CHECK(n);
	*n = (struct node){ t, depth };
	CHECK(weft_group_spawn(t->g, node, n) != NULL);
}

static void node(void *arg)
{
	struct node n = *(struct node *)arg;
	free(arg);
	atomic_fetch_add(&n.t->nodes, 1);
	CHECK(weft_group_wait(n.t->g, -1) == -1 && errno == EDEADLK);
	CHECK(weft_group_free(n.t->g) == -1 && errno == EDEADLK);
	if (n.depth == 0)
		return;
	weft_yield();	/* let the children start before their parent returns */
	for (unsigned i = 0; i < 4; i++)
		grow(n.t, n.depth - 1);
}

static void members_spawn(void *arg)
{
	(void)arg;
	struct tree t = { .g = weft_group_new() };
	CHECK(t.g);
	grow(&t, 5);	/* 1 + 4 + ... + 4^5 = 1365 nodes */
	CHECK(weft_group_wait(t.g, -1) == 0);
	CHECK(atomic_load(&t.nodes) == 1365);
	CHECK(weft_group_free(t.g) == 0);
}

Test(group, members_spawn_members)
{
	run(2, members_spawn, NULL);
}

/* -------------------------------------------------------- deadlines */

struct gated {
	weft_sem *gate;
	atomic_uint finished;
};

static void gated(void *arg)
{
	struct gated *x = arg;
	CHECK(weft_sem_acquire(x->gate, -1) == 0);
	atomic_fetch_add(&x->finished, 1);
}

static void wait_deadline(void *arg)
{
	(void)arg;
	struct gated x = { .gate = weft_sem_new(0) };
	CHECK(x.gate);
	weft_group *g = weft_group_new();
	CHECK(g);
	for (unsigned i = 0; i < 10; i++)
		CHECK(weft_group_spawn(g, gated, &x) != NULL);
	int64_t t0 = weft_now();
	CHECK(weft_group_wait(g, t0 + 50 * MS) == -1 && errno == ETIMEDOUT);
	CHECK(weft_now() - t0 >= 50 * MS);
	CHECK(weft_group_wait(g, 0) == -1 && errno == ETIMEDOUT);	/* past: no block */
	CHECK(atomic_load(&x.finished) == 0);	/* still running */
	for (unsigned i = 0; i < 10; i++)
		CHECK(weft_sem_release(x.gate) == 0);
	CHECK(weft_group_wait(g, -1) == 0);
	CHECK(atomic_load(&x.finished) == 10);
	CHECK(weft_group_wait(g, 0) == 0);	/* empty: at once */
	CHECK(weft_group_free(g) == 0);
	weft_sem_free(x.gate);
}

Test(group, wait_deadline_expires_then_a_later_wait_succeeds)
{
	run(2, wait_deadline, NULL);
}

/* -------------------------------------------------------- cancel, errors */

static void starts_cancelled(void *arg)
{
	CHECK(weft_sleep(-1) == -1 && errno == ECANCELED);
	atomic_fetch_add((atomic_uint *)arg, 1);
}

static void spawn_after_cancel(void *arg)
{
	(void)arg;
	atomic_uint n = 0;
	weft_group *g = weft_group_new();
	CHECK(g);
	CHECK(weft_group_cancel(g) == 0);
	CHECK(weft_group_spawn(g, starts_cancelled, &n) != NULL);
	CHECK(weft_group_spawn(g, starts_cancelled, &n) != NULL);
	CHECK(weft_group_wait(g, weft_now() + 10000 * MS) == 0);
	CHECK(atomic_load(&n) == 2);
	CHECK(weft_group_free(g) == 0);
}

Test(group, a_member_spawned_after_the_cancel_starts_cancelled)
{
	run(2, spawn_after_cancel, NULL);
}

static void cancelled_waiter(void *arg)
{
	weft_group *g = arg;
	CHECK(weft_cancel(weft_self()) == 0);
	CHECK(weft_group_wait(g, -1) == -1 && errno == ECANCELED);
}

static void errors(void *arg)
{
	(void)arg;
	CHECK(weft_group_spawn(NULL, count_one, NULL) == NULL && errno == EINVAL);
	CHECK(weft_group_wait(NULL, -1) == -1 && errno == EINVAL);
	CHECK(weft_group_cancel(NULL) == -1 && errno == EINVAL);
	CHECK(weft_group_free(NULL) == -1 && errno == EINVAL);
	CHECK(weft_shutdown_until(-1) == -1 && errno == EDEADLK);	/* from a coroutine */
	weft_group *g = weft_group_new();
	CHECK(g);
	CHECK(weft_group_spawn(g, NULL, NULL) == NULL && errno == EINVAL);
	struct gated x = { .gate = weft_sem_new(0) };
	CHECK(x.gate);
	CHECK(weft_group_spawn(g, gated, &x) != NULL);
	join(go(cancelled_waiter, g));
	CHECK(atomic_load(&x.finished) == 0);
	CHECK(weft_sem_release(x.gate) == 0);
	CHECK(weft_group_wait(g, -1) == 0);
	CHECK(weft_group_free(g) == 0);
	weft_sem_free(x.gate);
}

Test(group, errors)
{
	run(2, errors, NULL);
}

/* -------------------------------------------------------- counts and options */

/* Members churn (each yields a few times, so that they finish while others
 * start) while a plain thread and a coroutine on another worker count them:
 * a count is never negative nor above the spawns made by the time it was
 * read, and it is 0 once weft_group_wait has returned. */
struct churn {
	weft_group *g;
	atomic_long spawned;		/* spawns begun */
	atomic_int stop;
	atomic_long counts;		/* counts taken */
};

static void churner(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3; i++)
		weft_yield();
}

/* in_coroutine: yield between counts, so that the worker runs its other
 * coroutines too. */
static void count_until_stopped(struct churn *c, bool in_coroutine)
{
	while (!atomic_load(&c->stop)) {
		ssize_t n = weft_group_count(c->g);
		long spawned = atomic_load(&c->spawned);
		if (n < 0 || n > spawned) {
			fprintf(stderr, "count %zd with %ld spawned\n", n, spawned);
			abort();
		}
		atomic_fetch_add(&c->counts, 1);
		if (in_coroutine)
			weft_yield();
	}
}

static void *count_on_a_thread(void *arg)
{
	count_until_stopped(arg, false);
	return NULL;
}

static void count_in_a_coroutine(void *arg)
{
	count_until_stopped(arg, true);
}

static void counts_under_churn(void *arg)
{
	(void)arg;
	struct churn c = { .g = weft_group_new() };
	CHECK(c.g && weft_group_count(c.g) == 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, count_on_a_thread, &c) == 0);
	weft_co *counter = go(count_in_a_coroutine, &c);
	long n = scaled(20000, 5000, 500);
	for (long i = 0; i < n; i++) {
		atomic_fetch_add(&c.spawned, 1);
		CHECK(weft_group_spawn(c.g, churner, NULL) != NULL);
		if (i % 64 == 0)
			weft_yield();	/* some finish meanwhile */
	}
	CHECK(weft_group_wait(c.g, -1) == 0);
	CHECK(weft_group_count(c.g) == 0);
	atomic_store(&c.stop, 1);
	CHECK(pthread_join(t, NULL) == 0);
	join(counter);
	CHECK(atomic_load(&c.counts) > 0);
	CHECK(weft_group_free(c.g) == 0);
}

Test(group, counts_under_churn_stay_between_0_and_the_spawns, .timeout = 120)
{
	run(2, counts_under_churn, NULL);
}

/* weft_group_spawn_with: the member has its name, and a stack that holds a
 * recursion its runtime's 64 KiB stacks could not; a count sees the member
 * while it runs. */
enum { DEEP = 400 };	/* ~250 KiB of frames (test_prims.c's depth) */

static int depth(int n)
{
	volatile char pad[512];
	pad[0] = (char)n;
	__asm__ volatile("" : : "r"(pad) : "memory");	/* the whole array escapes */
	int below = n == 0 ? 0 : depth(n - 1);
	__asm__ volatile("" : : "r"(pad) : "memory");
	return below + pad[0];
}

struct deep_member {
	weft_sem *gate;
	int out;
	char name[16];
};

static void deep_member(void *arg)
{
	struct deep_member *d = arg;
	snprintf(d->name, sizeof d->name, "%s", weft_co_name(weft_self()));
	CHECK(weft_sem_acquire(d->gate, -1) == 0);
	d->out = depth(DEEP);
}

static void spawn_with(void *arg)
{
	(void)arg;
	weft_group *g = weft_group_new();
	CHECK(g);
	struct deep_member d = { .gate = weft_sem_new(0), .out = -1 };
	CHECK(d.gate);
	weft_spawn_opts o = { .stack_size = 1 << 20, .name = "deep-member" };
	CHECK(weft_group_spawn_with(g, deep_member, &d, &o) != NULL);
	CHECK(weft_group_count(g) == 1);
	CHECK(weft_sem_release(d.gate) == 0);
	CHECK(weft_group_wait(g, -1) == 0 && weft_group_count(g) == 0);
	int want = 0;	/* what depth(DEEP) returns, without the recursion */
	for (int k = 1; k <= DEEP; k++)
		want += (char)k;
	CHECK(d.out == want && strcmp(d.name, "deep-member") == 0);

	CHECK(weft_group_spawn_with(g, count_one, &d.out, NULL) != NULL);	/* NULL: defaults */
	errno = 0;
	o.stack_size = ((size_t)1 << 30) + 1;
	CHECK(weft_group_spawn_with(g, count_one, &d.out, &o) == NULL && errno == EINVAL);
	CHECK(weft_group_spawn_with(NULL, count_one, &d.out, NULL) == NULL && errno == EINVAL);
	CHECK(weft_group_spawn_with(g, NULL, NULL, NULL) == NULL && errno == EINVAL);
	CHECK(weft_group_free(g) == 0);
	weft_sem_free(d.gate);
	errno = 0;
	CHECK(weft_group_count(NULL) == -1 && errno == EINVAL);
}

Test(group, spawn_with_names_the_member_and_sizes_its_stack, .timeout = 60)
{
	cr_assert_eq(weft_main(spawn_with, NULL, &WEFT_CONFIG(.workers = 2, .stack_size = 64 << 10)), 0,
		     "errno %d", errno);
}

/* -------------------------------------------------------- weft_shutdown_until */

struct parked_reader {
	int sv[2];
	atomic_int started, result, err;
};

static void read_forever(void *arg)
{
	struct parked_reader *p = arg;
	char b;
	atomic_store(&p->started, 1);
	ssize_t n = weft_read(p->sv[0], &b, 1, -1);
	atomic_store(&p->err, errno);
	atomic_store(&p->result, (int)n);
}

Test(group, shutdown_until_cancels_a_parked_reader_at_its_deadline)
{
	struct parked_reader p = { .result = 1 };
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p.sv), 0);
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	weft_co *co = weft_spawn(read_forever, &p);
	cr_assert_not_null(co);
	cr_assert_eq(weft_detach(co), 0);
	while (!atomic_load(&p.started))
		weft_yield();
	int64_t t0 = weft_now();
	cr_assert_eq(weft_shutdown_until(t0 + 100 * MS), 0, "errno %d", errno);
	cr_assert_geq(weft_now() - t0, 100 * MS);
	cr_assert_eq(atomic_load(&p.result), -1);
	cr_assert_eq(atomic_load(&p.err), ECANCELED);
	cr_assert_eq(weft_shutdown_until(-1), -1);
	cr_assert_eq(errno, ESRCH);
	close(p.sv[0]);
	close(p.sv[1]);
}

Test(group, shutdown_until_returns_at_once_when_nothing_runs)
{
	static atomic_uint n;
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	weft_co *co = weft_spawn(count_one, &n);
	cr_assert_not_null(co);
	cr_assert_eq(weft_join(co), 0);
	cr_assert_eq(weft_shutdown_until(weft_now() + 10000 * MS), 0);
}

struct spinner {
	int64_t until;
	atomic_ullong id;
};

static void spin_ignoring_cancel(void *arg)
{
	struct spinner *s = arg;
	atomic_store(&s->id, weft_co_id(weft_self()));
	while (weft_now() < s->until)
		;
}

Test(group, shutdown_until_names_a_spinner_that_ignores_its_cancel, .timeout = 60)
{
	/* the spinner stops by itself 4 s from now, past the deadline's 1 s grace */
	struct spinner s = { .until = weft_now() + 4000 * MS };
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	weft_co *co = weft_spawn(spin_ignoring_cancel, &s);
	cr_assert_not_null(co);
	cr_assert_eq(weft_detach(co), 0);
	while (!atomic_load(&s.id))
		weft_yield();
	char out[4096];
	struct stderr_capture cap = stderr_capture_begin();
	int64_t t0 = weft_now();
	int r = weft_shutdown_until(t0 + 100 * MS);
	int e = errno;
	int64_t took = weft_now() - t0;
	stderr_capture_end(&cap, out, sizeof out);
	cr_assert_eq(r, -1);
	cr_assert_eq(e, ETIMEDOUT);
	cr_assert_geq(took, 1100 * MS);
	char want[128];
	snprintf(want, sizeof want, "weft: shutdown: coroutine %llu (entry %p",
		 (unsigned long long)atomic_load(&s.id), (void *)spin_ignoring_cancel);
	cr_assert_not_null(strstr(out, want), "named: %s", out);
	unsigned lines = 0;
	for (const char *p = out; (p = strstr(p, "weft: shutdown:")); p++)
		lines++;
	cr_assert_eq(lines, 1, "one line: %s", out);
	/* the runtime is still up; a plain shutdown waits for the spinner */
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_geq(weft_now(), s.until);
}
