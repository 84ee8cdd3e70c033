/* SPDX-License-Identifier: MIT */
/*
 * atomic.h — the orderings weft's lock-free code uses, named by what they do.
 *
 * Normal builds map every operation onto Concurrency Kit's ck_pr: relaxed,
 * single-copy-atomic loads and stores plus explicit fences.  Note that on
 * AArch64 ck_pr_cas_* and ck_pr_faa_* carry no ordering of their own, so
 * every RMW that must order memory is bracketed by explicit fences here
 * rather than at the call sites.  On x86-64 a `lock`-prefixed RMW is itself
 * a full barrier, and the brackets are compiler barriers only (CK's
 * ck_pr_fence_memory would emit an mfence on each side even under TSO, which
 * an uncontended mutex would pay at every call:
 * docs/notes/2026-12-06-measurements-behind-the-code.md, "fence brackets").
 *
 * ThreadSanitizer cannot see through ck_pr's inline assembly (or its volatile
 * fallback) and ignores stand-alone fences, so under TSan the same operations
 * become seq_cst __atomic builtins, which TSan understands, and the fences
 * become compiler barriers.  seq_cst is at least as strong as each ordering
 * named below, so the TSan build checks a strictly stronger program: it can
 * miss a missing fence (that is what the model checks are for), but every
 * race it reports is real.  AddressSanitizer cannot see into the inline
 * assembly either (an atomic access to freed memory would pass unchecked:
 * a lock released after its object was freed), so ASan builds use the
 * builtins too.
 */
#ifndef WEFT_ATOMIC_H
#define WEFT_ATOMIC_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#if defined(__SANITIZE_THREAD__)
#define WEFT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_ASAN 1
#endif
#endif

#if defined(WEFT_TSAN) || defined(WEFT_ASAN)

#define WEFT__ATOMIC_SC __ATOMIC_SEQ_CST
static inline uint64_t at_load_64(const uint64_t *p) { return __atomic_load_n(p, WEFT__ATOMIC_SC); }
static inline int64_t at_load_i64(const int64_t *p) { return __atomic_load_n(p, WEFT__ATOMIC_SC); }
static inline void at_store_i64(int64_t *p, int64_t v) { __atomic_store_n(p, v, WEFT__ATOMIC_SC); }
static inline void at_store_64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, WEFT__ATOMIC_SC); }
static inline unsigned at_load_uint(const unsigned *p) { return __atomic_load_n(p, WEFT__ATOMIC_SC); }
static inline void at_store_uint(unsigned *p, unsigned v) { __atomic_store_n(p, v, WEFT__ATOMIC_SC); }
static inline void *at_load_ptr(void *const *p) { return __atomic_load_n(p, WEFT__ATOMIC_SC); }
static inline void at_store_ptr(void **p, void *v) { __atomic_store_n(p, v, WEFT__ATOMIC_SC); }
static inline bool at_cas_64(uint64_t *p, uint64_t old, uint64_t new_)
{ return __atomic_compare_exchange_n(p, &old, new_, false, WEFT__ATOMIC_SC, WEFT__ATOMIC_SC); }
static inline bool at_cas_i64(int64_t *p, int64_t old, int64_t new_)
{ return __atomic_compare_exchange_n(p, &old, new_, false, WEFT__ATOMIC_SC, WEFT__ATOMIC_SC); }
static inline bool at_cas_uint(unsigned *p, unsigned old, unsigned new_)
{ return __atomic_compare_exchange_n(p, &old, new_, false, WEFT__ATOMIC_SC, WEFT__ATOMIC_SC); }
static inline bool at_cas_ptr(void **p, void *old, void *new_)
{ return __atomic_compare_exchange_n(p, &old, new_, false, WEFT__ATOMIC_SC, WEFT__ATOMIC_SC); }
static inline void *at_swap_ptr(void **p, void *v) { return __atomic_exchange_n(p, v, WEFT__ATOMIC_SC); }
static inline unsigned at_swap_uint(unsigned *p, unsigned v) { return __atomic_exchange_n(p, v, WEFT__ATOMIC_SC); }
static inline uint64_t at_faa_64(uint64_t *p, uint64_t d) { return __atomic_fetch_add(p, d, WEFT__ATOMIC_SC); }
static inline unsigned at_faa_uint(unsigned *p, unsigned d) { return __atomic_fetch_add(p, d, WEFT__ATOMIC_SC); }
static inline unsigned at_fas_uint(unsigned *p, unsigned d) { return __atomic_fetch_sub(p, d, WEFT__ATOMIC_SC); }
/* Every access above is seq_cst, so the program is sequentially consistent
 * without fences (TSan does not model stand-alone fences anyway). */
static inline void at_fence_acquire(void) { __asm__ volatile("" ::: "memory"); }
static inline void at_fence_release(void) { __asm__ volatile("" ::: "memory"); }
static inline void at_fence_store_load(void) { __asm__ volatile("" ::: "memory"); }
static inline void at_fence_full(void) { __asm__ volatile("" ::: "memory"); }
#if defined(WEFT_TSAN)
static inline void at_pause(void) { }
#elif defined(__x86_64__)
static inline void at_pause(void) { __builtin_ia32_pause(); }
#else
static inline void at_pause(void) { __asm__ volatile("yield" ::: "memory"); }
#endif

#else /* ck_pr */

#include <ck_pr.h>

/* Relaxed single-copy-atomic accesses. */
static inline uint64_t at_load_64(const uint64_t *p) { return ck_pr_load_64(p); }
static inline int64_t at_load_i64(const int64_t *p) { return (int64_t)ck_pr_load_64((const uint64_t *)p); }
static inline void at_store_i64(int64_t *p, int64_t v) { ck_pr_store_64((uint64_t *)p, (uint64_t)v); }
static inline void at_store_64(uint64_t *p, uint64_t v) { ck_pr_store_64(p, v); }
static inline unsigned at_load_uint(const unsigned *p) { return ck_pr_load_uint(p); }
static inline void at_store_uint(unsigned *p, unsigned v) { ck_pr_store_uint(p, v); }
static inline void *at_load_ptr(void *const *p) { return ck_pr_load_ptr(p); }
static inline void at_store_ptr(void **p, void *v) { ck_pr_store_ptr(p, v); }

/*
 * Read-modify-writes, sequentially consistent: a full fence on each side
 * (`dmb ish` on AArch64, where CK's CAS is relaxed; on x86-64, where `lock`
 * already orders everything, only the compiler must be kept from moving
 * accesses across).
 */
#if defined(__x86_64__)
static inline void rmw_fence(void) { ck_pr_barrier(); }
#else
static inline void rmw_fence(void) { ck_pr_fence_memory(); }
#endif

/* name(p, a[, b]): CK's op between two rmw_fence()s. */
#define AT_RMW2(type, name, ck, t1, t2)				\
	static inline type name(t1 *p, t2 a, t2 b)		\
	{							\
		rmw_fence();					\
		type r = ck(p, a, b);				\
		rmw_fence();					\
		return r;					\
	}
#define AT_RMW1(type, name, ck, t1, t2)				\
	static inline type name(t1 *p, t2 a)			\
	{							\
		rmw_fence();					\
		type r = ck(p, a);				\
		rmw_fence();					\
		return r;					\
	}
AT_RMW2(bool, at_cas_64, ck_pr_cas_64, uint64_t, uint64_t)
AT_RMW2(bool, at_cas_uint, ck_pr_cas_uint, unsigned, unsigned)
AT_RMW2(bool, at_cas_ptr, ck_pr_cas_ptr, void *, void *)
AT_RMW1(void *, at_swap_ptr, ck_pr_fas_ptr, void *, void *)
AT_RMW1(unsigned, at_swap_uint, ck_pr_fas_uint, unsigned, unsigned)
AT_RMW1(uint64_t, at_faa_64, ck_pr_faa_64, uint64_t, uint64_t)
AT_RMW1(unsigned, at_faa_uint, ck_pr_faa_uint, unsigned, unsigned)
#undef AT_RMW1
#undef AT_RMW2
static inline bool at_cas_i64(int64_t *p, int64_t old, int64_t new_)
{
	return at_cas_64((uint64_t *)p, (uint64_t)old, (uint64_t)new_);
}
static inline unsigned at_fas_uint(unsigned *p, unsigned d)
{
	return at_faa_uint(p, (unsigned)-d);
}

/* Acquire: no later access moves above the preceding load. */
static inline void at_fence_acquire(void) { ck_pr_fence_acquire(); }
/* Release: no earlier access moves below the following store. */
static inline void at_fence_release(void) { ck_pr_fence_release(); }
/* StoreLoad: emitted even on TSO.  On x86-64 a locked RMW of the stack's
 * top word rather than mfence: for ordinary (write-back) memory it orders
 * the same (every locked instruction is a full barrier), and it is cheaper,
 * as Linux's smp_mb() found; mfence also orders non-temporal stores and
 * write-combining memory, which weft never uses.  Elsewhere dmb ish. */
#if defined(__x86_64__)
static inline void at_fence_store_load(void)
{
	__asm__ volatile("lock; orq $0, (%%rsp)" ::: "memory", "cc");
}
static inline void at_fence_full(void) { at_fence_store_load(); }
#else
static inline void at_fence_store_load(void) { ck_pr_fence_strict_store_load(); }
static inline void at_fence_full(void) { ck_pr_fence_strict_memory(); }
#endif
static inline void at_pause(void) { ck_pr_stall(); }

#endif

/* One round of a wait for another thread's few instructions (a waker
 * between its claim and its release): PAUSE at first, then give the CPU
 * away, in case that thread was preempted. */
static inline void at_backoff(unsigned spins)
{
	if (spins < 64)
		at_pause();
	else
		sched_yield();
}

/* A counter with one writer, read racily by others (stats): a load and a
 * store, no RMW, so readers see whole values and the writer pays nothing. */
static inline void weft__count_n(uint64_t *c, uint64_t n)
{
	at_store_64(c, at_load_64(c) + n);
}
static inline void weft__count(uint64_t *c) { weft__count_n(c, 1); }

#endif /* WEFT_ATOMIC_H */
