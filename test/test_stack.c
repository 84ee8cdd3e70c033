/* SPDX-License-Identifier: MIT */
/* Stack pool: reuse, guard pages, RSS release, and the overflow report. */
#include "harness.h"
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atomic.h"
#include "coro.h"
#include "overflow.h"
#include "worker.h"
#include "stack.h"
#include "sanitize.h"
#include "weft.h"

#include "coro_test.h"

Test(stack, cache_reuses_stacks)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack_cache cache = { 0 };
	struct weft__stack *a = weft__stack_get(&cache);
	cr_assert_not_null(a);
	cr_assert_geq(weft__stack_usable(a), (size_t)60 << 10);
	weft__stack_put(&cache, a);
	cr_assert_eq(weft__stack_get(&cache), a, "a cached stack comes back first");
	cr_assert_eq(cache.hits, 1);
	cr_assert_eq(cache.misses, 1);
	/* overflow the cache: the surplus goes to the depot and comes back */
	struct weft__stack *many[200];
	for (int i = 0; i < 200; i++)
		cr_assert_not_null(many[i] = weft__stack_get(&cache));
	for (int i = 0; i < 200; i++)
		weft__stack_put(&cache, many[i]);
	for (int i = 0; i < 200; i++)
		many[i] = weft__stack_get(&cache);
	for (int i = 0; i < 200; i++)
		weft__stack_put(&cache, many[i]);
	weft__stack_put(&cache, a);
	weft__stack_cache_flush(&cache);
	weft__stack_pool_fini();
}

Test(stack, guard_page_faults, .signal = SIGSEGV)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack *s = weft__stack_get(NULL);
	cr_assert(s->guarded);
	signal(SIGSEGV, SIG_DFL);	/* not ASan's report: the plain signal */
	weft__stack_base(s)[0] = 1;	/* the lowest usable byte is fine */
	*(volatile char *)s->lo = 1;	/* the guard page is not */
}


static size_t resident_pages(char *base, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = len / page, n = 0;
	unsigned char *vec = calloc(pages + 1, 1);
	cr_assert_eq(mincore(base, pages * page, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	return n;
}

Test(stack, a_recycled_stack_keeps_its_guard, .signal = SIGSEGV)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack_cache cache = { 0 };
	struct weft__stack *s = weft__stack_get(&cache);
	weft__stack_put(&cache, s);
	cr_assert_eq(weft__stack_get(&cache), s, "the same stack comes back");
	cr_assert(s->guarded);
	signal(SIGSEGV, SIG_DFL);
	*(volatile char *)s->lo = 1;
}

enum { BURST = 3 * WEFT__STACK_MAGAZINE };

/* Takes n stacks from cache, each fresh (a miss on an empty depot). */
static void take_fresh(struct weft__stack_cache *cache, struct weft__stack **s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		cr_assert_not_null(s[i] = weft__stack_get(cache));
	cr_assert_eq(weft__stack_pool_allocated(), n, "all fresh");
}

/* A stack of the magazine an idle worker filled, from a cache of its own. */
static struct weft__stack *filled_stack(void)
{
	struct weft__stack_cache spawner = { 0 }, other = { 0 };
	struct weft__stack *burst[BURST];
	take_fresh(&spawner, burst, BURST);
	cr_assert(weft__stack_depot_hungry(), "a burst that emptied the depot asks for stacks");
	weft__stack_depot_fill();
	cr_assert_eq(weft__stack_pool_allocated(), BURST + WEFT__STACK_MAGAZINE);
	struct weft__stack *s = weft__stack_get(&other);
	cr_assert_eq(weft__stack_pool_allocated(), BURST + WEFT__STACK_MAGAZINE,
		     "the next miss takes the filled magazine");
	return s;
}

Test(stack, a_few_stacks_leave_the_depot_alone)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack_cache cache = { 0 };
	struct weft__stack *s[WEFT__STACK_MAGAZINE];
	take_fresh(&cache, s, WEFT__STACK_MAGAZINE);
	cr_assert(!weft__stack_depot_hungry(), "no burst: no stacks made ahead");
	weft__stack_depot_fill();
	cr_assert_eq(weft__stack_pool_allocated(), WEFT__STACK_MAGAZINE);
	weft__stack_pool_fini();
}

Test(stack, a_filled_stack_is_ready)
{
	long page = sysconf(_SC_PAGESIZE);
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack *s = filled_stack();
	cr_assert(s->guarded);
	char *top = (char *)(((uintptr_t)s) & ~(uintptr_t)(page - 1));
	cr_assert_eq(resident_pages(top, (size_t)page), 1, "its top page is faulted in");
	cr_assert_eq(resident_pages(weft__stack_base(s), (size_t)page), 0);
	char *payload = weft__stack_payload(s);
	for (int i = 0; i < WEFT__STACK_PAYLOAD; i++)
		cr_assert_eq(payload[i], 0);
	weft__stack_pool_fini();
}

Test(stack, a_filled_stack_guard_faults, .signal = SIGSEGV)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack *s = filled_stack();
	signal(SIGSEGV, SIG_DFL);
	weft__stack_base(s)[0] = 1;
	*(volatile char *)s->lo = 1;
}

Test(stack, deep_use_releases_rss)
{
	long page = sysconf(_SC_PAGESIZE);
	cr_assert_eq(weft__stack_pool_init(256 << 10, -1), 0);
	struct weft__stack_cache cache = { 0 };
	struct weft__stack *s = weft__stack_get(&cache);
	char *base = weft__stack_base(s);
	size_t usable = weft__stack_usable(s);
	memset(base, 0x5a, usable);	/* a "deep" use: every page resident */
	weft__stack_note_sp(s, base + 64);	/* ... seen at a switch */
	weft__stack_put(&cache, s);
	size_t resident = resident_pages(base, usable);
	cr_assert_leq(resident, (size_t)(16 << 10) / (size_t)page + 1,
		      "%zu of %zu pages still resident", resident, usable / (size_t)page);
	weft__stack_pool_fini();
}

/* The same through the scheduler: a coroutine that suspends 40 KiB deep
 * leaves its stack with only the warm top resident for the next one. */
struct deep {
	weft_co *first, *second;
	size_t resident_below_warm;
};

static int suspend_deep(int n)
{
	volatile char pad[1024];
	pad[0] = (char)n;
	if (n == 0)
		weft_yield();
	else
		pad[1] = (char)suspend_deep(n - 1);
	return pad[0] + pad[1];
}

static void deep_first(void *arg)
{
	((struct deep *)arg)->first = weft_self();
	suspend_deep(40);
}

static void deep_second(void *arg)
{
	struct deep *d = arg;
	long page = sysconf(_SC_PAGESIZE);
	d->second = weft_self();
	uintptr_t top = ((uintptr_t)d->second + (uintptr_t)page) & ~(uintptr_t)(page - 1);
	/* from 24 to 40 KiB below the top: what the first one touched, below
	 * the warm 16 KiB and the page that straddles its boundary */
	size_t pages = (16 << 10) / (size_t)page;
	unsigned char vec[64];
	char *lo = (char *)(top - (40 << 10));
	if (mincore(lo, pages * (size_t)page, vec) == 0)
		for (size_t i = 0; i < pages; i++)
			d->resident_below_warm += vec[i] & 1;
}

static void deep_root(void *arg)
{
	weft_join(weft_spawn(deep_first, arg));
	weft_join(weft_spawn(deep_second, arg));
}

Test(stack, a_coroutine_suspended_deep_gives_back_its_pages)
{
	struct deep d = { 0 };
	cr_assert_eq(weft_main(deep_root, &d, &WEFT_CONFIG(.workers = 1)), 0);
	cr_assert_eq(d.first, d.second, "the second coroutine reuses the first one's stack");
	cr_assert_eq(d.resident_below_warm, 0, "%zu pages below the warm top still resident",
		     d.resident_below_warm);
}

/* A process that starts and stops the runtime many times does not grow:
 * the pool created a jemalloc arena per weft_init and destroyed it at
 * shutdown, and jemalloc keeps ~4 KiB of every destroyed arena (found by
 * the fuzzer).  Sanitizer runtimes grow by themselves (ASan's quarantine,
 * TSan's thread records) and valgrind is slow: plain builds only. */
static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%ld %ld", &pages, &resident), 2);
	fclose(f);
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

struct deep_use {
	char *base;
	size_t usable;
};

/* Uses depth x 4 KiB of stack and switches out at the bottom. */
static void descend(int depth)
{
	volatile char frame[4096];
	memset((char *)frame, depth, sizeof frame);
	if (depth > 0)
		descend(depth - 1);
	else
		weft_yield();
	frame[0]++;
}

static void switch_out_deep(void *arg)
{
	struct deep_use *d = arg;
	struct weft__stack *s = weft_self()->stack;
	d->base = weft__stack_base(s);
	d->usable = weft__stack_usable(s);
	descend(32);
}

/* The coroutine records its deepest switch-out itself (coro.c) and hands it
 * to the pool when its stack goes back, which releases the deep pages. */
Test(stack, a_coroutine_that_switched_out_deep_gets_its_pages_released)
{
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 1, .stack_size = 256 << 10)), 0);
	struct deep_use d = { 0 };
	cr_assert_eq(weft_join(weft_spawn(switch_out_deep, &d)), 0);
	size_t resident = resident_pages(d.base, d.usable);
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_leq(resident, (size_t)(16 << 10) / (size_t)sysconf(_SC_PAGESIZE) + 1,
		      "%zu of %zu bytes' pages still resident", resident, d.usable);
}

static void nothing(void *arg) { (void)arg; }

static void init_run_shutdown(int cycles)
{
	for (int i = 0; i < cycles; i++) {
		cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
		cr_assert_eq(weft_join(weft_spawn(nothing, NULL)), 0);
		cr_assert_eq(weft_shutdown(), 0);
	}
}

Test(stack, init_shutdown_cycles_do_not_grow)
{
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
	cr_skip_test("RSS is not measured under a sanitizer (its allocator and shadow memory)");
#endif
	if (RUNNING_ON_VALGRIND)
		cr_skip_test("RSS is not measured under valgrind (its own allocator)");
	enum { CYCLES = 300 };
	init_run_shutdown(50);	/* warm: caches, thread stacks, fd numbers */
	long before = rss_kib();
	init_run_shutdown(CYCLES);
	long grown = rss_kib() - before;
	cr_assert_lt(grown, CYCLES, "%ld KiB more after %d cycles", grown, CYCLES);
}

/* The depot frees what nobody took since the previous trim, and keeps what
 * was in use. */
Test(stack, depot_returns_idle_stacks_to_jemalloc)
{
	enum { N = 5 * WEFT__STACK_MAGAZINE };
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack_cache cache = { 0 };
	struct weft__stack *s[N];
	for (int i = 0; i < N; i++)
		cr_assert_not_null(s[i] = weft__stack_get(&cache));
	for (int i = 0; i < N; i++)
		weft__stack_put(&cache, s[i]);
	weft__stack_cache_flush(&cache);
	cr_assert_eq(weft__stack_pool_allocated(), N);
	cr_assert(weft__stack_pool_trim(0), "the depot holds stacks");
	cr_assert_eq(weft__stack_pool_allocated(), N, "all arrived in this period");
	struct weft__stack *one = weft__stack_get(&cache);	/* takes a magazine */
	cr_assert(!weft__stack_pool_trim(1), "nothing beyond the reserve is left");
	cr_assert_eq(weft__stack_pool_allocated(), 2 * WEFT__STACK_MAGAZINE,
		     "the idle magazines are freed but the reserve, the one taken is not");
	cr_assert(!weft__stack_pool_trim(0), "the depot is empty now");
	cr_assert_eq(weft__stack_pool_allocated(), WEFT__STACK_MAGAZINE,
		     "the idle magazines are freed, the one taken is not");
	weft__stack_put(&cache, one);
	weft__stack_cache_flush(&cache);
	cr_assert(weft__stack_pool_trim(0));
	cr_assert_eq(weft__stack_pool_allocated(), WEFT__STACK_MAGAZINE);
	cr_assert(!weft__stack_pool_trim(0));
	cr_assert_eq(weft__stack_pool_allocated(), 0);
	weft__stack_pool_fini();
}

static char *run_child(void (*fn)(void *), int *status)
{
	return run_child_after(NULL, fn, status);
}

static int depth(int n)
{
	volatile char pad[512];
	pad[0] = (char)n;
	return n == 0 ? pad[0] : depth(n - 1) + pad[0];
}

static void recurse_forever(void *arg)
{
	(void)arg;
	depth(1 << 30);
}

Test(stack, overflow_is_reported)
{
	int status;
	char *err = run_child(recurse_forever, &status);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x, stderr: %s", status, err);
	cr_assert_not_null(strstr(err, "weft: stack overflow in coroutine "), "stderr: %s", err);
	cr_assert_not_null(strstr(err, "(stack 65536 bytes)"), "stderr: %s", err);
}

static void smash_canary(void *arg)
{
	(void)arg;
	struct weft_co *self = weft_self();
	memset(self->stack->lo, 0, 8);	/* what an overflow past the bottom does */
	weft_yield();
}

Test(stack, broken_canary_is_reported)
{
	setenv("WEFT_STACK_GUARDS", "0", 1);	/* canaries only */
	int status;
	char *err = run_child(smash_canary, &status);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x, stderr: %s", status, err);
	cr_assert_not_null(strstr(err, "weft: stack overflow in coroutine "), "stderr: %s", err);
}

static volatile uintptr_t wild = 16;	/* volatile: the compiler cannot see it */

static void not_an_overflow(void *arg)
{
	(void)arg;
	*(volatile int *)wild = 1;
}

Test(stack, other_segfaults_pass_through)
{
	int status;
	char *err = run_child(not_an_overflow, &status);
#if defined(WEFT_TEST_ASAN) || defined(WEFT_TEST_TSAN)
	/* the previous handler is the sanitizer's: it reports the SEGV and exits */
	cr_assert_not_null(strstr(err, "SEGV"), "stderr: %s", err);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
#else
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status %#x, stderr: %s", status, err);
#endif
	cr_assert_null(strstr(err, "stack overflow"), "stderr: %s", err);
}

/* A program's own SIGSEGV handler, installed before weft starts: it repairs
 * faults on its own page (makes it writable, so the write runs again and
 * succeeds) and leaves any other fault to the default action. */
static char *user_page;
static size_t user_page_size;

static void user_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	char *a = si->si_addr;
	if (a >= user_page && a < user_page + user_page_size) {
		mprotect(user_page, user_page_size, PROT_READ | PROT_WRITE);
		return;
	}
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigaction(sig, &dfl, NULL);	/* the fault happens again and kills */
}

static void install_user_segv(void)
{
	user_page_size = (size_t)sysconf(_SC_PAGESIZE);
	user_page = mmap(NULL, user_page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (user_page == MAP_FAILED)
		abort();
	struct sigaction sa = { .sa_sigaction = user_segv, .sa_flags = SA_SIGINFO };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) != 0)
		abort();
}

static void foreign_faults_then_overflow(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2; i++) {
		mprotect(user_page, user_page_size, PROT_NONE);
		*(volatile char *)user_page = 1;	/* the program's handler repairs it */
	}
	static const char said[] = "both faults repaired\n";
	ssize_t unused = write(STDERR_FILENO, said, sizeof said - 1);
	(void)unused;
	depth(1 << 30);
}

/* Faults that are not overflows go to the handler that was there before
 * weft, and the reporter stays: a later overflow is still reported (the
 * first foreign fault used to uninstall it for the whole process). */
Test(stack, overflow_is_reported_after_a_programs_own_handler_ran)
{
	int status;
	char *err = run_child_after(install_user_segv, foreign_faults_then_overflow, &status);
	cr_assert_not_null(strstr(err, "both faults repaired"), "status %#x, stderr: %s", status, err);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x, stderr: %s", status, err);
	cr_assert_not_null(strstr(err, "weft: stack overflow in coroutine "), "stderr: %s", err);
}

/* A worker's overflow handler stack replaces the thread's own alternate
 * stack (ASan installs one per thread) and gives it back at exit, so its
 * owner can free it (found by the fuzzer: one leaked mapping per worker per
 * cycle under ASan). */
Test(stack, worker_altstack_restores_the_threads_own)
{
	static char own[64 << 10];
	stack_t mine = { .ss_sp = own, .ss_size = sizeof own, .ss_flags = 0 }, now;
	cr_assert_eq(sigaltstack(&mine, NULL), 0);
	struct weft__worker w;
	memset(&w, 0, sizeof w);
	weft__overflow_thread_init(&w);
	cr_assert_eq(sigaltstack(NULL, &now), 0);
	cr_assert_neq(now.ss_sp, (void *)own, "the handler's stack is in place");
	weft__overflow_thread_fini(&w);
	cr_assert_eq(sigaltstack(NULL, &now), 0);
	cr_assert_eq(now.ss_sp, (void *)own, "the thread's own is back");
	cr_assert_eq(now.ss_size, sizeof own);
	stack_t off = { .ss_flags = SS_DISABLE };
	sigaltstack(&off, NULL);
}

/* ---- adversarial review of parksw (issue 46): each test below failed on
 * main d547a12 when committed, or guards a path the branch's tests skip. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static sigjmp_buf adv_jmp;

static void adv_on_segv(int sig)
{
	(void)sig;
	siglongjmp(adv_jmp, 1);
}

/* true if a write to p faults */
static bool adv_write_faults(char *p)
{
	struct sigaction sa = { .sa_handler = adv_on_segv }, old;
	sigaction(SIGSEGV, &sa, &old);
	bool faulted = true;
	if (sigsetjmp(adv_jmp, 1) == 0) {
		*(volatile char *)p = 1;
		faulted = false;
	}
	sigaction(SIGSEGV, &old, NULL);
	return faulted;
}

/* process_madvise fails with ENOSYS; with_vlen_over_1 only: only a call of
 * more than one range fails (the probe's one-range calls pass, the batch
 * fails). */
static void adv_block_process_madvise(bool only_vlen_over_1)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, only_vlen_over_1 ? 1 : 0, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
}

/* A burst, a fill, then every stack of the filled magazine: guarded, and a
 * write to its guard page faults. */
static void adv_every_filled_stack_faults(void)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack_cache spawner = { 0 }, other = { 0 };
	struct weft__stack *burst[BURST], *filled[WEFT__STACK_MAGAZINE];
	take_fresh(&spawner, burst, BURST);
	cr_assert(weft__stack_depot_hungry());
	weft__stack_depot_fill();
	cr_assert_eq(weft__stack_pool_allocated(), BURST + WEFT__STACK_MAGAZINE);
	for (unsigned i = 0; i < WEFT__STACK_MAGAZINE; i++)
		cr_assert_not_null(filled[i] = weft__stack_get(&other));
	cr_assert_eq(weft__stack_pool_allocated(), BURST + WEFT__STACK_MAGAZINE,
		     "all 64 came from the filled magazine");
	for (unsigned i = 0; i < WEFT__STACK_MAGAZINE; i++) {
		cr_assert(filled[i]->guarded, "filled stack %u guarded", i);
		cr_assert(adv_write_faults(filled[i]->lo), "filled stack %u: its guard faults", i);
		cr_assert(!adv_write_faults(weft__stack_base(filled[i])),
			  "filled stack %u: its lowest usable page does not", i);
	}
	/* given back and freed: the guard goes with it (jemalloc may reuse it) */
	for (unsigned i = 0; i < WEFT__STACK_MAGAZINE; i++)
		weft__stack_put(&other, filled[i]);
	weft__stack_cache_flush(&other);
	weft__stack_pool_fini();
}

Test(stack_adv, every_filled_stack_guard_faults)
{
	adv_every_filled_stack_faults();
}

/* the fallback path: no process_madvise (kernels before 5.10, or before
 * PIDFD_SELF) */
Test(stack_adv, every_filled_stack_guard_faults_without_process_madvise)
{
	adv_block_process_madvise(false);
	adv_every_filled_stack_faults();
}

/* the batch fails (the probe passed): stack_finish installs each guard */
Test(stack_adv, every_filled_stack_guard_faults_when_the_batch_fails)
{
	adv_block_process_madvise(true);
	adv_every_filled_stack_faults();
}

/* a fill under a guard budget smaller than the magazine: the guarded ones
 * fault, the others carry the canary */
Test(stack_adv, a_fill_past_the_guard_budget)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, BURST + 10), 0);
	struct weft__stack_cache spawner = { 0 }, other = { 0 };
	struct weft__stack *burst[BURST];
	take_fresh(&spawner, burst, BURST);
	weft__stack_depot_fill();
	unsigned guarded = 0;
	for (unsigned i = 0; i < WEFT__STACK_MAGAZINE; i++) {
		struct weft__stack *s = weft__stack_get(&other);
		cr_assert_not_null(s);
		if (s->guarded) {
			guarded++;
			cr_assert(adv_write_faults(s->lo));
		} else {
			cr_assert_eq(*(uint64_t *)(void *)s->lo, 0x77656674c0ffee57ull, "canary");
		}
	}
	cr_assert_eq(guarded, 10);
}

/*
 * MED (memory): hungry is never withdrawn.  After the burst, the coroutines
 * exit and their stacks fill the depot; an idle worker still finds the
 * depot "hungry" (weft__stack_depot_hungry reads only the counter, not
 * pool.nfull) and allocates a fresh magazine, up to HUNGRY_MAX (4 * 64
 * stacks) that nobody asked for, held until a trim (10 s, and never the
 * last 256 magazines' reserve).  Fails: "the depot holds stacks: not hungry".
 */
Test(stack_adv, a_refilled_depot_is_not_hungry)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack_cache spawner = { 0 };
	struct weft__stack *burst[BURST];
	take_fresh(&spawner, burst, BURST);
	for (unsigned i = 0; i < BURST; i++)	/* the burst's coroutines exit */
		weft__stack_put(&spawner, burst[i]);
	weft__stack_cache_flush(&spawner);	/* their worker parks: all in the depot */
	cr_assert(!weft__stack_depot_hungry(), "the depot holds stacks: not hungry");
	weft__stack_depot_fill();
	cr_assert_eq(weft__stack_pool_allocated(), BURST, "no stack made ahead of need");
}

/* Races between a filler and spawners/returners on the depot: every stack
 * handed out is held by one thread at a time (a mark in its payload), and
 * none is lost (allocated equals what the caches and depot free at fini). */
enum { ADV_THREADS = 3, ADV_ROUNDS = 200 };
static atomic_uint adv_stop;

static void *adv_spawner(void *arg)
{
	(void)arg;
	struct weft__stack_cache c = { 0 };
	struct weft__stack *s[BURST];
	for (unsigned r = 0; r < ADV_ROUNDS; r++) {
		for (unsigned i = 0; i < BURST; i++) {
			s[i] = weft__stack_get(&c);
			if (!s[i])
				abort();
			atomic_uint *mark = (atomic_uint *)(void *)weft__stack_payload(s[i]);
			if (atomic_exchange(mark, 1) != 0) {
				fprintf(stderr, "a stack handed out twice\n");
				abort();
			}
		}
		for (unsigned i = 0; i < BURST; i++) {
			atomic_store((atomic_uint *)(void *)weft__stack_payload(s[i]), 0);
			weft__stack_put(&c, s[i]);
		}
		weft__stack_cache_flush(&c);
	}
	return NULL;
}

static void *adv_filler(void *arg)
{
	(void)arg;
	while (!atomic_load(&adv_stop))
		if (weft__stack_depot_hungry())
			weft__stack_depot_fill();
	return NULL;
}

Test(stack_adv, fillers_race_spawners, .timeout = 120)
{
	cr_assert_eq(weft__stack_pool_init(16 << 10, -1), 0);
	pthread_t sp[ADV_THREADS], fi[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&fi[i], NULL, adv_filler, NULL);
	for (int i = 0; i < ADV_THREADS; i++)
		pthread_create(&sp[i], NULL, adv_spawner, NULL);
	for (int i = 0; i < ADV_THREADS; i++)
		pthread_join(sp[i], NULL);
	atomic_store(&adv_stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(fi[i], NULL);
	weft__stack_pool_fini();
	cr_assert_eq(weft__stack_pool_allocated(), 0, "every stack freed at fini");
}

/* A burst of spawns from the plain thread while idle workers fill the
 * depot, then shutdown (fills may still be asked): every coroutine runs
 * (no lost wakeup: a hang fails by the timeout), no stack left at fini. */
static atomic_uint adv_ran;

static void adv_burst_co(void *arg)
{
	(void)arg;
	weft_yield();
	atomic_fetch_add(&adv_ran, 1);
}

#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
enum { ADV_PARENT_ROUNDS = 3 };	/* TSan: ~0.5 ms a spawn on 2 loaded cores */
#else
enum { ADV_PARENT_ROUNDS = 30 };
#endif

static void adv_burst_cycle(unsigned n)
{
	static weft_co *co[600];
	cr_assert_eq(weft_init(&WEFT_CONFIG(.workers = 2)), 0);
	atomic_store(&adv_ran, 0);
	for (unsigned i = 0; i < n; i++)
		cr_assert_not_null(co[i] = weft_spawn(adv_burst_co, NULL));
	for (unsigned i = 0; i < n; i++)
		cr_assert_eq(weft_join(co[i]), 0);
	cr_assert_eq(atomic_load(&adv_ran), n);
	cr_assert_eq(weft_shutdown(), 0);
	cr_assert_eq(weft__stack_pool_allocated(), 0, "every stack freed by shutdown");
}

Test(stack_adv, bursts_with_fills_then_shutdown, .timeout = 120)
{
	for (int i = 0; i < (ADV_PARENT_ROUNDS == 30 ? 100 : 20); i++)
		adv_burst_cycle(600);
}

/* init/shutdown cycles that each fill the depot: RSS stays flat (the fill
 * arena is purged at shutdown). */
Test(stack_adv, init_shutdown_cycles_with_fills_do_not_grow, .timeout = 300)
{
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
	cr_skip_test("RSS is not measured under a sanitizer (its allocator and shadow memory)");
#endif
	if (RUNNING_ON_VALGRIND)
		cr_skip_test("RSS is not measured under valgrind (its own allocator)");
	enum { CYCLES = 150 };
	for (int i = 0; i < 30; i++)
		adv_burst_cycle(600);
	long before = rss_kib();
	for (int i = 0; i < CYCLES; i++)
		adv_burst_cycle(600);
	long grown = rss_kib() - before;
	cr_assert_lt(grown, CYCLES, "%ld KiB more after %d cycles", grown, CYCLES);
}

#ifdef WEFT_FAULT_INJECTION
#include "fault.h"

/* Allocation failures in the middle of a magazine: the part made is whole
 * (each guarded, its guard faults), counted, freed at fini. */
Test(stack_adv, a_fill_that_fails_part_way)
{
	cr_assert_eq(weft__stack_pool_init(64 << 10, -1), 0);
	struct weft__stack_cache spawner = { 0 }, other = { 0 };
	struct weft__stack *burst[BURST];
	take_fresh(&spawner, burst, BURST);
	for (unsigned round = 0; round < 4 && weft__stack_depot_hungry(); round++) {
		uint64_t before = weft__stack_pool_allocated();
		weft__fault_every(4);
		weft__stack_depot_fill();
		weft__fault_every(0);
		uint64_t made = weft__stack_pool_allocated() - before;
		for (uint64_t i = 0; i < made; i++) {
			struct weft__stack *s = weft__stack_get(&other);
			cr_assert_not_null(s);
			cr_assert(s->guarded && adv_write_faults(s->lo), "round %u stack %lu", round,
				  (unsigned long)i);
		}
		cr_assert_eq(weft__stack_pool_allocated(), before + made, "the part made was handed out");
	}
	weft__stack_cache_flush(&other);
	weft__stack_pool_fini();
}
#endif

/* Bursts spawned by a coroutine (the spawner on a worker, the others
 * filling when idle), 4 workers on few cores: every child runs and is
 * joined (a lost wakeup hangs: the timeout fails it). */
static void adv_burst_parent(void *arg)
{
	(void)arg;
	static weft_co *kids[2000];
	for (int round = 0; round < ADV_PARENT_ROUNDS; round++) {
		for (int i = 0; i < 2000; i++)
			kids[i] = weft_spawn(adv_burst_co, NULL);
		for (int i = 0; i < 2000; i++)
			if (!kids[i] || weft_join(kids[i]) != 0)
				abort();
	}
}

Test(stack_adv, coroutine_bursts_with_fills_on_4_workers, .timeout = 120)
{
	for (int i = 0; i < 5; i++) {
		atomic_store(&adv_ran, 0);
		cr_assert_eq(weft_main(adv_burst_parent, NULL, &WEFT_CONFIG(.workers = 4)), 0);
		cr_assert_eq(atomic_load(&adv_ran), ADV_PARENT_ROUNDS * 2000);
		cr_assert_eq(weft__stack_pool_allocated(), 0);
	}
}

/* no guard regions at all (kernels before 6.13): mprotect guards, no
 * process_madvise */
Test(stack_adv, every_filled_stack_guard_faults_with_mprotect_guards)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 102 /* MADV_GUARD_INSTALL */, 0, 2),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
	cr_assert_eq(madvise(NULL, 0, 102), -1, "the filter refuses guard regions");
	adv_every_filled_stack_faults();
}
