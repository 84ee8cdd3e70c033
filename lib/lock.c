/* SPDX-License-Identifier: MIT */
/*
 * lock.c — the contended half of the internal lock (lock.h).
 */
#include "lock.h"

#include "futex.h"

/* The spin's budget, and the most pauses between two reads of the word. */
enum { SPIN_PAUSES = 128, BACKOFF_MAX = 16 };

static void pause_n(unsigned n)
{
	while (n--)
		at_pause();
}

void weft__lock_contended(struct weft__lock *l)
{
	unsigned pauses = 1;
	for (unsigned spent = 0; spent < SPIN_PAUSES; spent += pauses) {
		if (pauses < BACKOFF_MAX)
			pauses *= 2;
		pause_n(pauses);
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
