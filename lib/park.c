/*
 * park.c — the park/wake protocol (see park.h for the states and orderings).
 */
#include "park.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "atomic.h"
#include "coro.h"
#include "worker.h"

enum { THREAD_WOKEN = 0x80000000u };

static void futex_wait(uint32_t *word, uint32_t val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void weft__waiter_init(struct weft__waiter *w)
{
	struct weft__worker *wk = weft__worker_self();
	struct weft_co *co = wk ? wk->current : NULL;
	w->co = co;
	w->futex = 0;
	if (!co) {
		w->gen = 0;
		return;
	}
	/* Arm: a new generation in PARKING.  The store is ordered before the
	 * publication of w by the publisher's lock or seq_cst CAS. */
	uint32_t gen = park_gen(at_load_64(&co->park_word)) + 1;
	w->gen = gen;
	at_store_64(&co->park_word, park_word(gen, 0, CO_PARKING));
}

void weft__waiter_disarm(struct weft__waiter *w)
{
	if (w->co)
		at_store_64(&w->co->park_word, park_word(w->gen, 0, CO_RUNNING));
}

int weft__waiter_wait(struct weft__waiter *w)
{
	if (!w->co) {
		uint32_t v;
		while (!((v = at_load_uint((unsigned *)&w->futex)) & THREAD_WOKEN))
			futex_wait(&w->futex, v);
		return (int)(v & 0xffff);
	}
	weft__co_switch_out(w->co, 0);
	return park_result(at_load_64(&w->co->park_word));
}

bool weft__waiter_wake(struct weft__waiter *w, int result)
{
	if (!w->co) {
		if (!at_cas_uint((unsigned *)&w->futex, 0, THREAD_WOKEN | ((unsigned)result & 0xffff)))
			return false;
		/* w may be gone once the thread sees the word; a wake on a stale
		 * address is harmless, every futex wait here loops. */
		futex_wake(&w->futex);
		return true;
	}
	struct weft_co *co = w->co;
	for (;;) {
		uint64_t word = at_load_64(&co->park_word);
		if (park_gen(word) != w->gen)
			return false;
		unsigned st = park_state(word);
		unsigned next = st == CO_PARKING ? CO_NOTIFIED : st == CO_PARKED ? CO_RUNNABLE : 0;
		if (!next)
			return false;
		if (!at_cas_64(&co->park_word, word, park_word(w->gen, result, next)))
			continue;
		if (next == CO_RUNNABLE)
			weft__schedule(co);
		return true;
	}
}

bool weft__park_finish(struct weft_co *co)
{
	uint64_t word = at_load_64(&co->park_word);
	uint32_t gen = park_gen(word);
	if (at_cas_64(&co->park_word, park_word(gen, 0, CO_PARKING), park_word(gen, 0, CO_PARKED)))
		return false;
	/* A waker came first (NOTIFIED): the coroutine is ours to queue. */
	word = at_load_64(&co->park_word);
	at_store_64(&co->park_word, park_word(gen, park_result(word), CO_RUNNABLE));
	return true;
}
