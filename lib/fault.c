/* SPDX-License-Identifier: MIT */
/*
 * fault.c — the counter behind weft__fault (fault.h); built only with the
 * meson option fault_injection.  One shared atomic counter: fault builds
 * are for tests, not for speed.
 */
#include "fault.h"

#include "atomic.h"

static unsigned every;		/* atomic */
static uint64_t asks, injected;	/* atomic */
static void (*pause_fn[WEFT__FAULT_POINTS])(uintptr_t what);	/* atomic: release store, acquire load */

/* Fails about one ask in n, at pseudo-random (but reproducible) asks: a
 * strict "every nth" would fail the same allocation of a retried operation
 * that asks n times, forever. */
bool weft__fault(void)
{
	unsigned n = at_load_uint(&every);
	if (!n)
		return false;
	uint64_t x = at_faa_64(&asks, 1) + 0x9e3779b97f4a7c15u;	/* splitmix64 */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	x ^= x >> 31;
	if (n > 1 && x % n != 0)
		return false;
	at_faa_64(&injected, 1);
	return true;
}

uint64_t weft__fault_every(unsigned n)
{
	at_store_64(&asks, 0);
	at_store_uint(&every, n);
	return at_load_64(&injected);
}

/* Acquire pairs with the release in weft__fault_on: a function seen is
 * seen with everything the test set up before installing it. */
void weft__fault_pause(enum weft__fault_point point, uintptr_t what)
{
	void (*fn)(uintptr_t) = __atomic_load_n(&pause_fn[point], __ATOMIC_ACQUIRE);
	if (fn)
		fn(what);
}

void weft__fault_on(enum weft__fault_point point, void (*fn)(uintptr_t what))
{
	__atomic_store_n(&pause_fn[point], fn, __ATOMIC_RELEASE);
}
