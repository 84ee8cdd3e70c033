/* SPDX-License-Identifier: MIT */
/*
 * stack.h — the coroutine stack pool.
 *
 * Stacks come from a jemalloc arena of weft's own (arenas.create), page
 * aligned.  Memory layout of one stack, low addresses first:
 *
 *   lo                                                                  hi
 *   | guard page | usable stack ... | payload | weft__stack |
 *     or, past the guard budget, a canary line
 *
 * The guard page is a guard region (MADV_GUARD_INSTALL, Linux 6.13: a page
 * table marker that costs no mapping), else PROT_NONE.  An mprotect-guarded
 * stack costs two mappings (vm.max_map_count is 65530 by default), so then
 * only a budget of stacks get a guard page; the others carry a canary line
 * at their low end, checked whenever their coroutine switches out and when
 * the stack comes back to the pool.
 *
 * Free stacks are kept in a per-worker cache (no lock, no allocator call on
 * spawn or exit), which overflows into and refills from a global depot of
 * magazines (arrays of WEFT__STACK_MAGAZINE stacks, moved whole under one mutex, as
 * in Bonwick's magazine allocator and Photon's stack pool); the depot gives
 * stacks nobody needed for a while back to jemalloc (weft__stack_pool_trim).
 * Plain threads share one cache under a lock.  A stack coming back after a
 * deep use (its coroutine switched out deep: weft__stack_note_sp) has
 * everything below its warm top released with madvise(MADV_DONTNEED).
 */
#ifndef WEFT_STACK_H
#define WEFT_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct weft__stack {
	struct weft__stack *all_prev;	/* every allocated stack, cached or not, */
	struct weft__stack *all_next;	/* so shutdown can free them all */
	char *lo;			/* lowest address of the allocation */
	size_t alloc_size;		/* bytes allocated from jemalloc */
	bool guarded;			/* guard page at lo, else canary line */
	bool guard_region;		/* the guard is MADV_GUARD_INSTALL's */
	char *deepest;			/* the lowest stack pointer switched out at */
	unsigned valgrind_id;		/* VALGRIND_STACK_REGISTER's id */
};

enum { WEFT__STACK_MAGAZINE = 64 };	/* stacks per magazine (see stack.c) */

/* A worker's cache: an array, so taking and giving never chase pointers
 * through cold stack headers. */
struct weft__stack_cache {
	struct weft__stack *slot[2 * WEFT__STACK_MAGAZINE];
	unsigned count;
	uint64_t hits, misses;		/* atomic, one writer: for stats */
};

/* Sets up the pool for stacks of stack_size bytes, at most `guards` of them
 * with a guard page at once (-1: a quarter of vm.max_map_count); -ENOMEM. */
int weft__stack_pool_init(size_t stack_size, long guards);
/* Frees every stack, cached or still held by an unjoined coroutine, and the
 * arena. */
void weft__stack_pool_fini(void);
/* Returns every stack in cache to the depot (a worker that is exiting). */
void weft__stack_cache_flush(struct weft__stack_cache *cache);

/* A stack from cache (NULL: the plain threads' shared cache), the depot, or
 * jemalloc; NULL/ENOMEM. */
struct weft__stack *weft__stack_get(struct weft__stack_cache *cache);
void weft__stack_put(struct weft__stack_cache *cache, struct weft__stack *s);
/* true if a burst of spawns has emptied the depot: a worker with nothing to
 * run may fill it. */
bool weft__stack_depot_hungry(void);
/* Puts a magazine of fresh stacks in the depot if it is still hungry. */
void weft__stack_depot_fill(void);
/* A stack of size bytes (a page multiple, as weft__stack_size): from the
 * pool when that is the configured size, else allocated for one coroutine
 * and freed, not cached, by weft__stack_put; NULL/ENOMEM. */
struct weft__stack *weft__stack_get_sized(struct weft__stack_cache *cache, size_t size);
/* s's size, as weft__stack_size counts it (what it was allocated for). */
size_t weft__stack_bytes(const struct weft__stack *s);

/*
 * Just below the header, STACK_PAYLOAD bytes belong to the stack's user: the
 * coroutine control block lives there, so a spawn allocates nothing but a
 * stack, and the control block is cached (and warm) with it.
 */
enum { WEFT__STACK_PAYLOAD = 256 };
static inline void *weft__stack_payload(struct weft__stack *s)
{
	return (char *)s - WEFT__STACK_PAYLOAD;
}

/* The highest usable address: where a new context's first frame goes. */
static inline void *weft__stack_top(struct weft__stack *s) { return weft__stack_payload(s); }
/* The lowest usable address and the usable size. */
char *weft__stack_base(const struct weft__stack *s);
size_t weft__stack_usable(const struct weft__stack *s);

/* true if s has a guard page (nothing to check at a switch), false if it has
 * a canary line.  A coroutine reads this once, at spawn, so that its
 * switch-outs need not read the header: with thousands of coroutines in
 * rotation the header's line is cold, a cache miss per switch. */
static inline bool weft__stack_guarded(const struct weft__stack *s)
{
	return s->guarded;
}
/* true if the canary line of s (not guarded) is intact. */
bool weft__stack_canary_intact(const struct weft__stack *s);
/* Records that the stack's coroutine switched out with stack pointer sp (a
 * coroutine keeps its own deepest switch-out and records it once, when it
 * is done with the stack, for the same reason as above). */
static inline void weft__stack_note_sp(struct weft__stack *s, void *sp)
{
	if ((char *)sp < s->deepest)
		s->deepest = sp;
}

/* true if addr lies in the stack's guard page or just below it. */
bool weft__stack_guard_hit(const struct weft__stack *s, const void *addr);

/* Frees the depot's stacks that stayed unused since the previous call, but
 * not the last `reserve` magazines; true if a later call may free more. */
bool weft__stack_pool_trim(size_t reserve);

/* Calls fn(payload, arg) for every allocated stack, cached or in use, under
 * the lock of the list of all stacks (none is freed meanwhile). */
void weft__stack_each(void (*fn)(void *payload, void *arg), void *arg);

/* Stacks allocated from jemalloc now, cached or in use. */
uint64_t weft__stack_pool_allocated(void);
/* Their bytes, summed (returned), and in *live the bytes of those for
 * whose payload in_use(payload, arg) returns true: one walk under one hold
 * of the pool's lock, so *live never exceeds the total; for stats. */
uint64_t weft__stack_pool_bytes(bool (*in_use)(const void *payload, void *arg), void *arg,
				uint64_t *live);

/* The configured stack size (as weft_config.stack_size). */
size_t weft__stack_size(void);

#endif
