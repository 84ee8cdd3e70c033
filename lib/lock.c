/*
 * lock.c — the contended half of the internal lock (lock.h).
 */
#include "lock.h"

#include <linux/futex.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { SPINS = 100 };

void weft__lock_contended(struct weft__lock *l)
{
	for (int i = 0; i < SPINS; i++) {
		at_pause();
		if (at_load_uint(&l->word) == 0 && at_cas_uint(&l->word, 0, 1))
			return;
	}
	while (at_swap_uint(&l->word, 2) != 0)
		syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void weft__lock_wake(struct weft__lock *l)
{
	syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
