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
#include "sanitize.h"

#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define WEFT_VALGRIND 1
#endif

enum {
	CACHE_MAX = 256,	/* stacks a worker keeps; half go to the depot when full */
	DEPOT_MAX = 16384,	/* stacks the depot keeps before freeing to jemalloc */
	WARM_BYTES = 16 << 10,	/* top of a stack left resident when it is recycled */
	CANARY_BYTES = 64,	/* the canary line at the low end of an unguarded stack */
};
static const uint64_t CANARY = 0x77656674c0ffee57ull;

static struct {
	size_t stack_size;	/* usable bytes, header included */
	size_t page;
	unsigned arena;
	int mallocx_flags;
	unsigned long guard_budget;	/* guarded stacks allowed at once */
	unsigned long guarded_live;	/* atomic */
	pthread_mutex_t depot_lock;
	struct weft__stack *depot;
	unsigned depot_count;
} pool = { .depot_lock = PTHREAD_MUTEX_INITIALIZER };

size_t weft__stack_size(void) { return pool.stack_size; }

char *weft__stack_base(const struct weft__stack *s)
{
	return s->lo + pool.page;
}

size_t weft__stack_usable(const struct weft__stack *s)
{
	return (size_t)((const char *)s - weft__stack_base(s));
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
	pool.depot = NULL;
	pool.depot_count = 0;
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
	char *lo = mallocx(alloc, pool.mallocx_flags);
	if (!lo) {
		errno = ENOMEM;
		return NULL;
	}
	struct weft__stack *s = (struct weft__stack *)(void *)(lo + alloc - sizeof *s);
	s = (struct weft__stack *)((uintptr_t)s & ~(uintptr_t)63);
	s->lo = lo;
	s->alloc_size = alloc;
	s->next = NULL;
	s->guarded = take_guard_slot();
	if (s->guarded && mprotect(lo, pool.page, PROT_NONE) != 0) {
		at_faa_64((uint64_t *)&pool.guarded_live, (uint64_t)-1);
		s->guarded = false;
	}
	if (!s->guarded)
		write_canary(lo);
#ifdef WEFT_VALGRIND
	s->valgrind_id = VALGRIND_STACK_REGISTER(weft__stack_base(s), (char *)s);
#endif
	return s;
}

static void stack_free(struct weft__stack *s)
{
	char *lo = s->lo;
	size_t alloc = s->alloc_size;
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

static void free_list(struct weft__stack *s)
{
	while (s) {
		struct weft__stack *next = s->next;
		stack_free(s);
		s = next;
	}
}

/* Adds the list head..tail of n stacks; frees them instead when the depot is
 * full (it keeps what it has: those are as warm as any). */
static void depot_push_list(struct weft__stack *head, struct weft__stack *tail, unsigned n)
{
	pthread_mutex_lock(&pool.depot_lock);
	bool room = pool.depot_count + n <= DEPOT_MAX;
	if (room) {
		tail->next = pool.depot;
		pool.depot = head;
		pool.depot_count += n;
	}
	pthread_mutex_unlock(&pool.depot_lock);
	if (!room) {
		tail->next = NULL;
		free_list(head);
	}
}

/* Moves up to `want` stacks from the depot into cache (one lock for all);
 * returns how many moved. */
static unsigned depot_refill(struct weft__stack_cache *cache, unsigned want)
{
	unsigned n = 0;
	pthread_mutex_lock(&pool.depot_lock);
	while (n < want && pool.depot) {
		struct weft__stack *s = pool.depot;
		pool.depot = s->next;
		s->next = cache->head;
		cache->head = s;
		n++;
	}
	pool.depot_count -= n;
	pthread_mutex_unlock(&pool.depot_lock);
	cache->count += n;
	return n;
}

struct weft__stack *weft__stack_get(struct weft__stack_cache *cache)
{
	struct weft__stack_cache single = { 0 };
	struct weft__stack_cache *c = cache ? cache : &single;
	if (!c->head) {
		if (cache)
			cache->misses++;
		/* a worker refills half its cache at once; a plain thread takes one */
		if (!depot_refill(c, cache ? CACHE_MAX / 2 : 1))
			return stack_alloc();
	} else {
		cache->hits++;
	}
	struct weft__stack *s = c->head;
	c->head = s->next;
	c->count--;
	return s;
}

void weft__stack_put(struct weft__stack_cache *cache, struct weft__stack *s)
{
	san_unpoison(weft__stack_base(s), weft__stack_usable(s));
	release_if_deep(s);
	if (!cache) {
		depot_push_list(s, s, 1);
		return;
	}
	s->next = cache->head;
	cache->head = s;
	if (++cache->count < CACHE_MAX)
		return;
	/* Full: keep the warmest half, hand the colder half to the depot. */
	struct weft__stack *tail = cache->head;
	for (unsigned i = 1; i < CACHE_MAX / 2; i++)
		tail = tail->next;
	struct weft__stack *cold = tail->next;
	tail->next = NULL;
	cache->count = CACHE_MAX / 2;
	struct weft__stack *cold_tail = cold;
	while (cold_tail->next)
		cold_tail = cold_tail->next;
	depot_push_list(cold, cold_tail, CACHE_MAX - CACHE_MAX / 2);
}

void weft__stack_cache_flush(struct weft__stack_cache *cache)
{
	struct weft__stack *head = cache->head;
	if (!head)
		return;
	struct weft__stack *tail = head;
	while (tail->next)
		tail = tail->next;
	depot_push_list(head, tail, cache->count);
	cache->head = NULL;
	cache->count = 0;
}

void weft__stack_pool_fini(void)
{
	free_list(pool.depot);
	pool.depot = NULL;
	pool.depot_count = 0;
	char name[64];
	snprintf(name, sizeof name, "arena.%u.destroy", pool.arena);
	mallctl(name, NULL, NULL, NULL, 0);
}
