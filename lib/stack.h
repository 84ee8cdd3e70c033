/*
 * stack.h — the coroutine stack pool.
 *
 * Stacks come from a jemalloc arena of weft's own (arenas.create), page
 * aligned.  Memory layout of one stack, low addresses first:
 *
 *   lo                                                          hi
 *   | guard page (PROT_NONE) | usable stack ...  | weft__stack |
 *     or, past the mapping budget, a canary line
 *
 * A guarded stack costs two mappings (vm.max_map_count is 65530 by default),
 * so only a budget of stacks get a guard page; the others carry a canary line
 * at their low end, checked whenever their coroutine switches out and when
 * the stack comes back to the pool.
 *
 * Free stacks are kept in a per-worker cache (no lock, no allocator call on
 * spawn or exit), which overflows into and refills from a global depot under
 * a mutex, which overflows into jemalloc.  A stack coming back after a deep
 * use has everything below its warm top released with madvise(MADV_DONTNEED).
 */
#ifndef WEFT_STACK_H
#define WEFT_STACK_H

#include <stdbool.h>
#include <stddef.h>

struct weft__stack {
	struct weft__stack *next;	/* free-list link while cached */
	char *lo;			/* lowest address of the allocation */
	size_t alloc_size;		/* bytes allocated from jemalloc */
	bool guarded;			/* guard page at lo, else canary line */
	unsigned valgrind_id;		/* VALGRIND_STACK_REGISTER's id */
};

struct weft__stack_cache {
	struct weft__stack *head;
	unsigned count;
	unsigned long hits, misses;	/* counters for stats */
};

/* Sets up the pool for stacks of stack_size bytes, at most `guards` of them
 * with a guard page at once (-1: a quarter of vm.max_map_count); -1/ENOMEM. */
int weft__stack_pool_init(size_t stack_size, long guards);
/* Frees every cached stack and the arena (all stacks must be back). */
void weft__stack_pool_fini(void);
/* Returns every stack in cache to the depot (a worker that is exiting). */
void weft__stack_cache_flush(struct weft__stack_cache *cache);

/* A stack from cache (may be NULL: a plain thread) or the depot; NULL/ENOMEM. */
struct weft__stack *weft__stack_get(struct weft__stack_cache *cache);
void weft__stack_put(struct weft__stack_cache *cache, struct weft__stack *s);

/* The highest usable address: where a new context's first frame goes. */
static inline void *weft__stack_top(struct weft__stack *s) { return s; }
/* The lowest usable address and the usable size. */
char *weft__stack_base(const struct weft__stack *s);
size_t weft__stack_usable(const struct weft__stack *s);

/* true if the stack's canary line is intact (always true when guarded). */
bool weft__stack_canary_intact(const struct weft__stack *s);
static inline bool weft__stack_intact(const struct weft__stack *s)
{
	return s->guarded || weft__stack_canary_intact(s);
}
/* true if addr lies in the stack's guard page or just below it. */
bool weft__stack_guard_hit(const struct weft__stack *s, const void *addr);

/* The configured stack size (as weft_config.stack_size). */
size_t weft__stack_size(void);

#endif
