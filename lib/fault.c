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
static void (*io_begin_hook)(int fd);	/* atomic: release store, acquire load */
static void (*abandoned_hook)(void);	/* the same */

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

/* Acquire pairs with the release in weft__fault_on_io_begin: a hook seen is
 * seen with everything the test set up before installing it. */
void weft__fault_io_begin(int fd)
{
	void (*fn)(int) = __atomic_load_n(&io_begin_hook, __ATOMIC_ACQUIRE);
	if (fn)
		fn(fd);
}

void weft__fault_on_io_begin(void (*fn)(int fd))
{
	__atomic_store_n(&io_begin_hook, fn, __ATOMIC_RELEASE);
}

void weft__fault_wait_abandoned(void)
{
	void (*fn)(void) = __atomic_load_n(&abandoned_hook, __ATOMIC_ACQUIRE);
	if (fn)
		fn();
}

void weft__fault_on_wait_abandoned(void (*fn)(void))
{
	__atomic_store_n(&abandoned_hook, fn, __ATOMIC_RELEASE);
}
