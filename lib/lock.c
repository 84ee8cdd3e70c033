/* SPDX-License-Identifier: MIT */
/*
 * lock.c — the contended half of the internal lock (lock.h).
 */
#include "lock.h"

#include "futex.h"

enum { SPINS = 100 };

void weft__lock_contended(struct weft__lock *l)
{
	for (int i = 0; i < SPINS; i++) {
		at_pause();
		if (at_load_uint(&l->word) == 0 && at_cas_uint(&l->word, 0, 1))
			return;
	}
	while (at_swap_uint(&l->word, 2) != 0)
		weft__futex_wait(&l->word, 2, NULL);
}

void weft__lock_wake(struct weft__lock *l)
{
	weft__futex_wake(&l->word, 1);
}
