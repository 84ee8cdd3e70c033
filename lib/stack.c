/* SPDX-License-Identifier: MIT */
/*
 * stack.c — the coroutine stack pool (see stack.h for the layout and tiers).
 */
#include "stack.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "atomic.h"
#include "fault.h"
#include "sanitize.h"

#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define WEFT_VALGRIND 1
#endif

/* Linux 6.13's lightweight guard regions (uapi asm-generic/mman-common.h) */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#define MADV_GUARD_REMOVE 103
#endif
#ifndef MADV_POPULATE_WRITE	/* Linux 5.14 */
#define MADV_POPULATE_WRITE 23
#endif
#ifndef SYS_process_madvise	/* Linux 5.10 */
#define SYS_process_madvise 440
#endif

enum {
	CACHE_SLOTS = 2 * WEFT__STACK_MAGAZINE,	/* a full cache spills its older half */
	WARM_BYTES = 16 << 10,	/* top of a stack left resident when it is recycled */
	CANARY_BYTES = 64,	/* the canary line at the low end of an unguarded stack */
	VALGRIND_GUARDS = 1000,	/* the guard budget under valgrind */
	SELF_PIDFD = -10000,	/* PIDFD_SELF (Linux 6.14): process_madvise on our own mm */
	HUNGRY_FROM = 2 * WEFT__STACK_MAGAZINE,	/* see depot_hunger */
	HUNGRY_MAX = 4,
};
static const uint64_t CANARY = 0x77656674c0ffee57ull;

static struct {
	size_t stack_size;	/* usable bytes, header included */
	size_t page;
	unsigned arena;
	unsigned fill_arena;		/* the depot fill's (see depot_hunger) */
	int mallocx_flags;
	int fill_flags;
	bool guard_regions;		/* MADV_GUARD_INSTALL works */
	bool vectored;			/* ... and so do process_madvise's on SELF_PIDFD */
	unsigned long guard_budget;	/* guarded stacks allowed at once */
	unsigned long guarded_live;	/* atomic */
	pthread_mutex_t depot_lock;	/* guards full .. empty */
	struct weft__magazine *full;	/* newest first */
	size_t nfull;
	size_t nfull_low;		/* the fewest since the last trim */
	struct weft__magazine *empty;	/* spare magazine structs */
	unsigned hungry;		/* atomic: magazines asked of idle workers */
	unsigned filling;		/* atomic: a worker is filling one */
	pthread_mutex_t all_lock;	/* guards all */
	struct weft__stack *all;	/* every allocated stack */
	uint64_t allocated;		/* how many (written under all_lock) */
	pthread_mutex_t shared_lock;	/* guards shared */
	struct weft__stack_cache shared;	/* the plain threads' cache */
} pool = {
	.depot_lock = PTHREAD_MUTEX_INITIALIZER,
	.shared_lock = PTHREAD_MUTEX_INITIALIZER,
	.all_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* The list of all stacks changes only when jemalloc is called: off the hot
 * path.  s[0..n) are linked outside the lock and spliced in, so a batch
 * holds it no longer than one stack.  allocated is written under all_lock
 * and read without it. */
static void all_add(struct weft__stack *const *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		s[i]->all_prev = i ? s[i - 1] : NULL;
		s[i]->all_next = i + 1 < n ? s[i + 1] : NULL;
	}
	pthread_mutex_lock(&pool.all_lock);
	s[n - 1]->all_next = pool.all;
	if (pool.all)
		pool.all->all_prev = s[n - 1];
	pool.all = s[0];
	at_store_64(&pool.allocated, pool.allocated + n);
	pthread_mutex_unlock(&pool.all_lock);
}

static void all_remove(struct weft__stack *s)
{
	pthread_mutex_lock(&pool.all_lock);
	if (s->all_prev)
		s->all_prev->all_next = s->all_next;
	else
		pool.all = s->all_next;
	if (s->all_next)
		s->all_next->all_prev = s->all_prev;
	at_store_64(&pool.allocated, pool.allocated - 1);
	pthread_mutex_unlock(&pool.all_lock);
}

struct weft__magazine {
	struct weft__magazine *next;
	unsigned n;
	struct weft__stack *s[WEFT__STACK_MAGAZINE];
};

size_t weft__stack_size(void) { return pool.stack_size; }

char *weft__stack_base(const struct weft__stack *s)
{
	return s->lo + pool.page;
}

size_t weft__stack_usable(const struct weft__stack *s)
{
	return (size_t)((const char *)s - WEFT__STACK_PAYLOAD - weft__stack_base(s));
}

/* true if this kernel has guard regions (Linux 6.13): a guard that is a page
 * table marker, not a mapping of its own, so it costs no vm.max_map_count. */
static bool probe_guard_regions(size_t page)
{
#ifdef WEFT_VALGRIND
	if (RUNNING_ON_VALGRIND)	/* memcheck would not know the page is gone */
		return false;
#endif
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	bool ok = madvise(p, page, MADV_GUARD_INSTALL) == 0;
	munmap(p, 2 * page);
	return ok;
}

/* madvise(advice) on every range of iov (page sized), one system call;
 * false if not all of them took it. */
static bool madvise_each(const struct iovec *iov, unsigned n, int advice)
{
	return syscall(SYS_process_madvise, SELF_PIDFD, iov, n, advice, 0) ==
	       (long)(n * pool.page);
}

/* true if process_madvise on our own mm takes a guard and a populate
 * (Linux 6.14: PIDFD_SELF, and any advice for the caller's own mm). */
static bool probe_vectored(size_t page)
{
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	bool ok = madvise_each(&(struct iovec){ p, page }, 1, MADV_GUARD_INSTALL) &&
		  madvise_each(&(struct iovec){ p + page, page }, 1, MADV_POPULATE_WRITE);
	munmap(p, 2 * page);
	return ok;
}

/*
 * The default guard budget: unbounded with guard regions; else a quarter of
 * vm.max_map_count, leaving the rest to the application and to jemalloc
 * (each mprotect-guarded stack splits its extent in two).
 */
static unsigned long default_guard_budget(void)
{
	if (pool.guard_regions)
		return ULONG_MAX;
	unsigned long max_maps = 65530;
	FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
	if (f) {
		if (fscanf(f, "%lu", &max_maps) != 1)
			max_maps = 65530;
		fclose(f);
	}
#ifdef WEFT_VALGRIND
	/* valgrind tracks a few thousand mappings of its own at most */
	if (RUNNING_ON_VALGRIND && max_maps / 4 > VALGRIND_GUARDS)
		return VALGRIND_GUARDS;
#endif
	return max_maps / 4;
}

/*
 * The arenas (the pool's, and the depot fill's) are created once per
 * process and kept across weft_init / weft_shutdown cycles: jemalloc keeps
 * some of an arena's metadata after arena.<i>.destroy, which the fuzzer saw
 * as growth over cycles (docs/notes/2026-12-06-measurements-behind-the-code.md,
 * "arena").  Shutdown purges them instead.
 */
static int arena_get(unsigned which, unsigned *arena)
{
	static bool created[2];	/* under runtime.c's lifecycle lock */
	static unsigned index[2];
	size_t sz = sizeof index[which];
	if (!created[which] && mallctl("arenas.create", &index[which], &sz, NULL, 0) != 0)
		return -1;
	created[which] = true;
	*arena = index[which];
	return 0;
}

static int arena_flags(unsigned arena)
{
	return (int)(MALLOCX_ARENA(arena) | MALLOCX_ALIGN(pool.page) | MALLOCX_TCACHE_NONE);
}

static void arena_purge(unsigned arena)
{
	char name[64];
	snprintf(name, sizeof name, "arena.%u.purge", arena);
	mallctl(name, NULL, NULL, NULL, 0);
}

int weft__stack_pool_init(size_t stack_size, long guards)
{
	if (arena_get(0, &pool.arena) != 0 || arena_get(1, &pool.fill_arena) != 0)
		return -ENOMEM;
	pool.page = (size_t)sysconf(_SC_PAGESIZE);
	pool.stack_size = stack_size;
	pool.mallocx_flags = arena_flags(pool.arena);
	pool.fill_flags = arena_flags(pool.fill_arena);
	pool.guard_regions = probe_guard_regions(pool.page);
	pool.vectored = pool.guard_regions && probe_vectored(pool.page);
	pool.guard_budget = guards < 0 ? default_guard_budget() : (unsigned long)guards;
	pool.guarded_live = 0;
	pool.nfull_low = 0;
	pool.hungry = 0;
	pool.filling = 0;
	return 0;
}

static bool take_guard_slot(void)
{
	unsigned long live = at_load_64((uint64_t *)&pool.guarded_live);
	while (live < pool.guard_budget) {
		if (at_cas_64((uint64_t *)&pool.guarded_live, live, live + 1))
			return true;
		live = at_load_64((uint64_t *)&pool.guarded_live);
	}
	return false;
}

/* Makes s's lowest page a guard: a guard region, else PROT_NONE; false if
 * neither could be had. */
static bool install_guard(struct weft__stack *s)
{
	s->guard_region = pool.guard_regions && madvise(s->lo, pool.page, MADV_GUARD_INSTALL) == 0;
	return s->guard_region || mprotect(s->lo, pool.page, PROT_NONE) == 0;
}

/* Makes s's guard page ordinary memory again. */
static bool remove_guard(const struct weft__stack *s)
{
	if (s->guard_region)
		return madvise(s->lo, pool.page, MADV_GUARD_REMOVE) == 0;
	return mprotect(s->lo, pool.page, PROT_READ | PROT_WRITE) == 0;
}

static void write_canary(char *lo)
{
	uint64_t *w = (uint64_t *)(void *)lo;
	for (size_t i = 0; i < CANARY_BYTES / sizeof *w; i++)
		w[i] = CANARY;
}

bool weft__stack_canary_intact(const struct weft__stack *s)
{
	const uint64_t *w = (const uint64_t *)(const void *)s->lo;
	for (size_t i = 0; i < CANARY_BYTES / sizeof *w; i++)
		if (w[i] != CANARY)
			return false;
	return true;
}

bool weft__stack_guard_hit(const struct weft__stack *s, const void *addr)
{
	/* A frame larger than the guard may jump past it: accept a fault up to
	 * 16 pages below the stack as an overflow of it too. */
	uintptr_t a = (uintptr_t)addr, lo = (uintptr_t)s->lo;
	return a < lo + pool.page && a + 16 * pool.page >= lo;
}

static char *stack_mem(size_t alloc, int flags)
{
	return weft__fault() ? NULL : mallocx(alloc, flags);
}

/* The header of the stack allocated at lo; its guard page not yet made. */
static struct weft__stack *stack_header(char *lo, size_t alloc)
{
	san_after_alloc(&pool.arena);
	struct weft__stack *s = (struct weft__stack *)(void *)(lo + alloc - sizeof *s);
	s = (struct weft__stack *)((uintptr_t)s & ~(uintptr_t)63);
	s->lo = lo;
	s->alloc_size = alloc;
	s->guarded = take_guard_slot();
	s->guard_region = false;
	return s;
}

/* Makes s ready for a coroutine but for the list of all: its guard page
 * (unless a batch's guard region is there already) or canary, an empty
 * payload. */
static void stack_finish(struct weft__stack *s)
{
	if (s->guarded && !s->guard_region && !install_guard(s)) {
		at_faa_64((uint64_t *)&pool.guarded_live, (uint64_t)-1);
		s->guarded = false;
	}
	if (!s->guarded)
		write_canary(s->lo);
	s->deepest = (char *)s;
	memset(weft__stack_payload(s), 0, WEFT__STACK_PAYLOAD);	/* no coroutine yet */
#ifdef WEFT_VALGRIND
	s->valgrind_id = VALGRIND_STACK_REGISTER(weft__stack_base(s), (char *)s);
#endif
}

/* A stack of size bytes (usable, header included; a page multiple). */
static struct weft__stack *stack_alloc(size_t size)
{
	size_t alloc = size + pool.page;
	char *lo = stack_mem(alloc, pool.mallocx_flags);
	if (!lo)
		return NULL;
	struct weft__stack *s = stack_header(lo, alloc);
	stack_finish(s);
	all_add(&s, 1);
	return s;
}

/*
 * Up to n fresh stacks of the configured size into out; how many (0: ENOMEM).
 * A fresh stack costs a guard install and a page fault (its top page, the
 * header's), each a kernel entry; where process_madvise takes them
 * (pool.vectored), each is one system call for the whole batch.
 */
static unsigned stack_alloc_fresh(struct weft__stack **out, unsigned n)
{
	size_t alloc = pool.stack_size + pool.page;
	char *lo[WEFT__STACK_MAGAZINE];
	struct iovec iov[WEFT__STACK_MAGAZINE];
	unsigned got = 0, nguard = 0;
	while (got < n && (lo[got] = stack_mem(alloc, pool.fill_flags)))
		got++;
	if (!got)
		return 0;
	for (unsigned i = 0; i < got; i++)
		iov[i] = (struct iovec){ lo[i] + alloc - pool.page, pool.page };
	if (pool.vectored)	/* else the header's first write faults it in */
		madvise_each(iov, got, MADV_POPULATE_WRITE);
	for (unsigned i = 0; i < got; i++) {
		out[i] = stack_header(lo[i], alloc);
		if (out[i]->guarded)
			iov[nguard++] = (struct iovec){ lo[i], pool.page };
	}
	/* A batch that failed part way: stack_finish installs each (a guard
	 * installed over a guard is a no-op). */
	bool installed = pool.vectored && nguard && madvise_each(iov, nguard, MADV_GUARD_INSTALL);
	for (unsigned i = 0; i < got; i++) {
		out[i]->guard_region = installed && out[i]->guarded;
		stack_finish(out[i]);
	}
	all_add(out, got);
	return got;
}

static void stack_free(struct weft__stack *s)
{
	char *lo = s->lo;
	size_t alloc = s->alloc_size;
	all_remove(s);
#ifdef WEFT_VALGRIND
	VALGRIND_STACK_DEREGISTER(s->valgrind_id);
#endif
	if (s->guarded) {
		/* Restore the page before jemalloc may hand it to anyone else. */
		if (!remove_guard(s)) {
			perror("weft: removing a guard page (leaking one stack)");
			return;
		}
		at_faa_64((uint64_t *)&pool.guarded_live, (uint64_t)-1);
	}
	san_before_free(&pool.arena);
	sdallocx(lo, alloc, pool.mallocx_flags);
}

/*
 * A stack whose coroutine ever switched out with its stack pointer below the
 * warm top has everything below the warm top released when it comes back, so
 * a parked army of shallow coroutines does not keep the RSS of the deep ones
 * that used the stacks before.  The depth is the lowest saved stack pointer
 * (one compare per switch, kept by the coroutine and handed over with
 * weft__stack_note_sp); a coroutine that went deep and came back up without
 * switching out is not seen.  Probing a line below
 * the warm top instead sees every deep use, but the probe of an untouched
 * page faults it in (a page of RSS and a page fault per fresh stack) and
 * releasing unconditionally costs a syscall per stack: docs/design.md, "The
 * stack pool", and docs/notes/2026-12-06-measurements-behind-the-code.md,
 * "deep stacks".
 */
static void release_if_deep(struct weft__stack *s)
{
	char *warm = (char *)s - WARM_BYTES;
	char *base = weft__stack_base(s);
	char *deepest = s->deepest;
	s->deepest = (char *)s;
	if (deepest >= warm || warm <= base)
		return;
	uintptr_t to = (uintptr_t)warm & ~(uintptr_t)(pool.page - 1);
	if ((uintptr_t)base < to)
		madvise(base, to - (uintptr_t)base, MADV_DONTNEED);
}

/* ------------------------------------------------------ the depot */

/* A full magazine, or NULL. */
static struct weft__magazine *depot_take_full(void)
{
	pthread_mutex_lock(&pool.depot_lock);
	struct weft__magazine *m = pool.full;
	if (m) {
		pool.full = m->next;
		pool.nfull--;
		if (pool.nfull < pool.nfull_low)
			pool.nfull_low = pool.nfull;
	}
	pthread_mutex_unlock(&pool.depot_lock);
	return m;
}

static void depot_give_full(struct weft__magazine *m)
{
	pthread_mutex_lock(&pool.depot_lock);
	m->next = pool.full;
	pool.full = m;
	pool.nfull++;
	pthread_mutex_unlock(&pool.depot_lock);
}

static void depot_give_empty(struct weft__magazine *m)
{
	pthread_mutex_lock(&pool.depot_lock);
	m->next = pool.empty;
	pool.empty = m;
	pthread_mutex_unlock(&pool.depot_lock);
}

static struct weft__magazine *depot_take_empty(void)
{
	pthread_mutex_lock(&pool.depot_lock);
	struct weft__magazine *m = pool.empty;
	if (m)
		pool.empty = m->next;
	pthread_mutex_unlock(&pool.depot_lock);
	return m ? m : weft__fault() ? NULL : malloc(sizeof *m);
}

/*
 * A burst of spawns that has emptied the depot takes fresh stacks, a page
 * fault and a guard install each, on the spawner's own time; behind it the
 * other workers run dry between its spawns and nap or sleep.  So a miss on
 * an empty depot, once the pool is past HUNGRY_FROM stacks (a burst, not a
 * program that runs a few coroutines), asks for a magazine, up to
 * HUNGRY_MAX outstanding, and a worker that finds no work fills one
 * (weft__stack_depot_fill): the faults are taken in parallel with the
 * spawns, by a worker that would otherwise be idle.  One worker fills at a
 * time, from an arena of its own: two fillers, or a filler and the
 * spawner's fresh stacks, contend for an arena's lock in jemalloc and
 * sleep on it.
 * hungry and filling are hints (sequentially consistent at_* loads, CAS and
 * stores; a stale read costs a fill too many or too few, bounded by
 * HUNGRY_MAX); the stacks themselves pass through the depot's mutex.
 */
static void depot_hunger(void)
{
	if (weft__stack_pool_allocated() < HUNGRY_FROM)
		return;
	unsigned n = at_load_uint(&pool.hungry);
	if (n < HUNGRY_MAX)	/* a lost race leaves it for the next miss */
		at_cas_uint(&pool.hungry, n, n + 1);
}

bool weft__stack_depot_hungry(void)
{
	return at_load_uint(&pool.hungry) != 0 && !at_load_uint(&pool.filling);
}

void weft__stack_depot_fill(void)
{
	if (!at_cas_uint(&pool.filling, 0, 1))
		return;
	unsigned n = at_load_uint(&pool.hungry);
	struct weft__magazine *m = NULL;
	if (n && at_cas_uint(&pool.hungry, n, n - 1) && (m = depot_take_empty()))
		m->n = stack_alloc_fresh(m->s, WEFT__STACK_MAGAZINE);
	if (m && m->n)
		depot_give_full(m);
	else if (m)
		depot_give_empty(m);
	at_store_uint(&pool.filling, 0);
}

static void free_stacks(struct weft__stack **s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		stack_free(s[i]);
}

/* Moves the n oldest stacks of c into the depot (or frees them when no
 * magazine can be had). */
static void spill(struct weft__stack_cache *c, unsigned n)
{
	struct weft__magazine *m = depot_take_empty();
	if (!m) {
		free_stacks(c->slot, n);
	} else {
		memcpy(m->s, c->slot, n * sizeof *m->s);
		m->n = n;
		depot_give_full(m);
		/* stacks given back answer the burst's asks: an ask left
		 * standing would have idle workers fill magazines nobody
		 * needs (up to HUNGRY_MAX) */
		if (at_load_uint(&pool.hungry))
			at_store_uint(&pool.hungry, 0);
	}
	c->count -= n;
	memmove(c->slot, c->slot + n, c->count * sizeof *c->slot);
}

/*
 * The depot keeps every magazine given to it, and trims by its working set
 * (Bonwick and Adams, "Magazines and Vmem", 2001): it records the fewest
 * full magazines it held since the last trim, and a trim frees that many,
 * the oldest: stacks nobody needed for a whole period, but never the last
 * `reserve` magazines.  The monitor trims every 10 s and keeps 256 (16,384
 * stacks, at least a page of RSS each once used).  So a burst of 100,000
 * coroutines finds its stacks again in the next burst (no page faults: the
 * fresh-page floor in docs/bench.md), and all but the reserve go back to
 * jemalloc one to two periods after the last; bursts within the reserve (an
 * accept flood) never fault again, where without it every flood would
 * fault fresh stacks and the well-behaved clients' tail latency with it
 * (docs/notes/2026-12-06-measurements-behind-the-code.md, "depot reserve").
 */
bool weft__stack_pool_trim(size_t reserve)
{
	pthread_mutex_lock(&pool.depot_lock);
	size_t keep = pool.nfull - pool.nfull_low;
	if (keep < reserve)
		keep = pool.nfull < reserve ? pool.nfull : reserve;
	struct weft__magazine **link = &pool.full, *idle;
	for (size_t i = 0; i < keep; i++)
		link = &(*link)->next;
	idle = *link;
	*link = NULL;
	pool.nfull = pool.nfull_low = keep;
	pthread_mutex_unlock(&pool.depot_lock);
	for (struct weft__magazine *m = idle, *next; m; m = next) {
		next = m->next;
		free_stacks(m->s, m->n);
		free(m);
	}
	return keep > reserve;
}

/* ------------------------------------------------------ caches */

static struct weft__stack *cache_get(struct weft__stack_cache *c)
{
	if (c->count) {
		weft__count(&c->hits);
		return c->slot[--c->count];
	}
	weft__count(&c->misses);
	struct weft__magazine *m = depot_take_full();
	if (!m) {
		depot_hunger();
		return stack_alloc(pool.stack_size);
	}
	memcpy(c->slot, m->s, m->n * sizeof *m->s);
	c->count = m->n;
	depot_give_empty(m);
	return c->slot[--c->count];
}

static void cache_put(struct weft__stack_cache *c, struct weft__stack *s)
{
	if (c->count == CACHE_SLOTS)
		spill(c, WEFT__STACK_MAGAZINE);	/* keep the warmer half */
	c->slot[c->count++] = s;
}

struct weft__stack *weft__stack_get(struct weft__stack_cache *cache)
{
	if (cache)
		return cache_get(cache);
	pthread_mutex_lock(&pool.shared_lock);
	struct weft__stack *s = cache_get(&pool.shared);
	pthread_mutex_unlock(&pool.shared_lock);
	return s;
}

/*
 * A stack of another size than the configured one (weft_spawn_with) is
 * allocated for its coroutine alone and freed when it comes back: the
 * caches and the depot hold default stacks only, so a spawn never gets a
 * stack of the wrong size and odd sizes never crowd the default ones out.
 * (A program that spawns many coroutines of one other size pays a jemalloc
 * call, and a guard-page syscall, per spawn.)
 */
struct weft__stack *weft__stack_get_sized(struct weft__stack_cache *cache, size_t size)
{
	return size == pool.stack_size ? weft__stack_get(cache) : stack_alloc(size);
}

size_t weft__stack_bytes(const struct weft__stack *s)
{
	return s->alloc_size - pool.page;
}

void weft__stack_put(struct weft__stack_cache *cache, struct weft__stack *s)
{
	san_unpoison(weft__stack_base(s), weft__stack_usable(s));
	if (weft__stack_bytes(s) != pool.stack_size) {
		stack_free(s);
		return;
	}
	release_if_deep(s);
	if (cache) {
		cache_put(cache, s);
		return;
	}
	pthread_mutex_lock(&pool.shared_lock);
	cache_put(&pool.shared, s);
	pthread_mutex_unlock(&pool.shared_lock);
}

void weft__stack_cache_flush(struct weft__stack_cache *cache)
{
	while (cache->count)
		spill(cache, cache->count < WEFT__STACK_MAGAZINE ? cache->count : WEFT__STACK_MAGAZINE);
}

void weft__stack_pool_fini(void)
{
	weft__stack_cache_flush(&pool.shared);
	struct weft__magazine *m;
	while ((m = depot_take_full()))
		free(m);
	while (pool.all)	/* cached, and held by coroutines never joined */
		stack_free(pool.all);
	while ((m = pool.empty)) {
		pool.empty = m->next;
		free(m);
	}
	arena_purge(pool.arena);
	arena_purge(pool.fill_arena);
}

uint64_t weft__stack_pool_allocated(void)
{
	return at_load_64(&pool.allocated);
}

uint64_t weft__stack_pool_bytes(bool (*in_use)(const void *payload, void *arg), void *arg,
				uint64_t *live)
{
	uint64_t n = 0, used = 0;
	pthread_mutex_lock(&pool.all_lock);
	for (struct weft__stack *s = pool.all; s; s = s->all_next) {
		uint64_t bytes = weft__stack_bytes(s);
		n += bytes;
		if (in_use(weft__stack_payload(s), arg))
			used += bytes;
	}
	pthread_mutex_unlock(&pool.all_lock);
	*live = used;
	return n;
}

void weft__stack_each(void (*fn)(void *payload, void *arg), void *arg)
{
	pthread_mutex_lock(&pool.all_lock);
	for (struct weft__stack *s = pool.all; s; s = s->all_next)
		fn(weft__stack_payload(s), arg);
	pthread_mutex_unlock(&pool.all_lock);
}
