/*
 * stack.c — the coroutine stack pool (see stack.h for the layout and tiers).
 */
#include "stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include "atomic.h"
#include "fault.h"
#include "sanitize.h"

#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define WEFT_VALGRIND 1
#endif

enum {
	CACHE_SLOTS = 2 * WEFT_MAGAZINE,	/* a full cache spills its older half */
	DEPOT_MAGAZINES = 256,		/* full magazines kept: 16,384 stacks */
	WARM_BYTES = 16 << 10,	/* top of a stack left resident when it is recycled */
	CANARY_BYTES = 64,	/* the canary line at the low end of an unguarded stack */
	VALGRIND_GUARDS = 1000,	/* the guard budget under valgrind */
};
static const uint64_t CANARY = 0x77656674c0ffee57ull;

static struct {
	size_t stack_size;	/* usable bytes, header included */
	size_t page;
	unsigned arena;
	int mallocx_flags;
	unsigned long guard_budget;	/* guarded stacks allowed at once */
	unsigned long guarded_live;	/* atomic */
	pthread_mutex_t depot_lock;	/* guards full, nfull, empty */
	struct weft__magazine *full;
	unsigned nfull;
	struct weft__magazine *empty;	/* spare magazine structs */
	pthread_mutex_t all_lock;	/* guards all */
	struct weft__stack *all;	/* every allocated stack */
	uint64_t allocated;		/* how many (under all_lock) */
	pthread_mutex_t shared_lock;	/* guards shared */
	struct weft__stack_cache shared;	/* the plain threads' cache */
} pool = {
	.depot_lock = PTHREAD_MUTEX_INITIALIZER,
	.shared_lock = PTHREAD_MUTEX_INITIALIZER,
	.all_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* The list of all stacks changes only when jemalloc is called: off the hot
 * path. */
static void all_add(struct weft__stack *s)
{
	pthread_mutex_lock(&pool.all_lock);
	s->all_prev = NULL;
	s->all_next = pool.all;
	if (pool.all)
		pool.all->all_prev = s;
	pool.all = s;
	pool.allocated++;
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
	pool.allocated--;
	pthread_mutex_unlock(&pool.all_lock);
}

struct weft__magazine {
	struct weft__magazine *next;
	unsigned n;
	struct weft__stack *s[WEFT_MAGAZINE];
};

size_t weft__stack_size(void) { return pool.stack_size; }

char *weft__stack_base(const struct weft__stack *s)
{
	return s->lo + pool.page;
}

size_t weft__stack_usable(const struct weft__stack *s)
{
	return (size_t)((const char *)s - WEFT_STACK_PAYLOAD - weft__stack_base(s));
}

/*
 * The guard budget: a quarter of vm.max_map_count, leaving the rest to the
 * application and to jemalloc (each guarded stack splits its extent in two).
 */
static unsigned long read_guard_budget(void)
{
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

int weft__stack_pool_init(size_t stack_size, long guards)
{
	size_t sz = sizeof pool.arena;
	if (mallctl("arenas.create", &pool.arena, &sz, NULL, 0) != 0) {
		errno = ENOMEM;
		return -1;
	}
	pool.page = (size_t)sysconf(_SC_PAGESIZE);
	pool.stack_size = stack_size;
	pool.mallocx_flags = (int)(MALLOCX_ARENA(pool.arena) | MALLOCX_ALIGN(pool.page) |
				   MALLOCX_TCACHE_NONE);
	pool.guard_budget = guards < 0 ? read_guard_budget() : (unsigned long)guards;
	pool.guarded_live = 0;
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

static struct weft__stack *stack_alloc(void)
{
	size_t alloc = pool.stack_size + pool.page;
	char *lo = weft__fault() ? NULL : mallocx(alloc, pool.mallocx_flags);
	if (!lo) {
		errno = ENOMEM;
		return NULL;
	}
	struct weft__stack *s = (struct weft__stack *)(void *)(lo + alloc - sizeof *s);
	s = (struct weft__stack *)((uintptr_t)s & ~(uintptr_t)63);
	s->lo = lo;
	s->alloc_size = alloc;
	s->guarded = take_guard_slot();
	if (s->guarded && mprotect(lo, pool.page, PROT_NONE) != 0) {
		at_faa_64((uint64_t *)&pool.guarded_live, (uint64_t)-1);
		s->guarded = false;
	}
	if (!s->guarded)
		write_canary(lo);
	memset(weft__stack_payload(s), 0, WEFT_STACK_PAYLOAD);	/* no coroutine yet */
	all_add(s);
#ifdef WEFT_VALGRIND
	s->valgrind_id = VALGRIND_STACK_REGISTER(weft__stack_base(s), (char *)s);
#endif
	return s;
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
		if (mprotect(lo, pool.page, PROT_READ | PROT_WRITE) != 0) {
			perror("weft: mprotect (leaking one stack)");
			return;
		}
		at_faa_64((uint64_t *)&pool.guarded_live, (uint64_t)-1);
	}
	sdallocx(lo, alloc, pool.mallocx_flags);
}

/*
 * A stack used deeper than its warm top has touched its sentinel line (the
 * line just below the warm zone, which is zero while untouched): release the
 * pages below the warm zone so a parked army of shallow coroutines does not
 * keep a deep one's RSS.  The probe costs one cache line, not a syscall.
 */
static void release_if_deep(struct weft__stack *s)
{
	char *warm = (char *)s - WARM_BYTES;
	char *base = weft__stack_base(s);
	if (warm <= base)
		return;
	const uint64_t *line = (const uint64_t *)(void *)(warm - 64);
#ifdef WEFT_VALGRIND
	/* memcheck marks memory below a dead stack pointer undefined */
	VALGRIND_MAKE_MEM_DEFINED(line, 64);
#endif
	uint64_t any = 0;
	for (int i = 0; i < 8; i++)
		any |= line[i];
	if (!any)
		return;
	char *from = base + (s->guarded ? 0 : pool.page);	/* keep the canary page */
	uintptr_t to = (uintptr_t)warm & ~(uintptr_t)(pool.page - 1);
	if ((uintptr_t)from < to)
		madvise(from, to - (uintptr_t)from, MADV_DONTNEED);
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
	}
	pthread_mutex_unlock(&pool.depot_lock);
	return m;
}

/* Keeps m's stacks if the depot has room (true), else leaves m to the caller. */
static bool depot_give_full(struct weft__magazine *m)
{
	pthread_mutex_lock(&pool.depot_lock);
	bool room = pool.nfull < DEPOT_MAGAZINES;
	if (room) {
		m->next = pool.full;
		pool.full = m;
		pool.nfull++;
	}
	pthread_mutex_unlock(&pool.depot_lock);
	return room;
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

static void free_stacks(struct weft__stack **s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		stack_free(s[i]);
}

/* Moves the n oldest stacks of c into the depot (or frees them when the
 * depot is full or no magazine can be had). */
static void spill(struct weft__stack_cache *c, unsigned n)
{
	struct weft__magazine *m = depot_take_empty();
	if (!m) {
		free_stacks(c->slot, n);
	} else {
		memcpy(m->s, c->slot, n * sizeof *m->s);
		m->n = n;
		if (!depot_give_full(m)) {
			free_stacks(m->s, n);
			depot_give_empty(m);
		}
	}
	c->count -= n;
	memmove(c->slot, c->slot + n, c->count * sizeof *c->slot);
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
	if (!m)
		return stack_alloc();
	memcpy(c->slot, m->s, m->n * sizeof *m->s);
	c->count = m->n;
	depot_give_empty(m);
	return c->slot[--c->count];
}

static void cache_put(struct weft__stack_cache *c, struct weft__stack *s)
{
	if (c->count == CACHE_SLOTS)
		spill(c, WEFT_MAGAZINE);	/* keep the warmer half */
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

void weft__stack_put(struct weft__stack_cache *cache, struct weft__stack *s)
{
	san_unpoison(weft__stack_base(s), weft__stack_usable(s));
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
		spill(cache, cache->count < WEFT_MAGAZINE ? cache->count : WEFT_MAGAZINE);
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
	char name[64];
	snprintf(name, sizeof name, "arena.%u.destroy", pool.arena);
	mallctl(name, NULL, NULL, NULL, 0);
}

uint64_t weft__stack_pool_allocated(void)
{
	pthread_mutex_lock(&pool.all_lock);
	uint64_t n = pool.allocated;
	pthread_mutex_unlock(&pool.all_lock);
	return n;
}
