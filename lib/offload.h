/* SPDX-License-Identifier: MIT */
/*
 * offload.h — the pool of helper threads behind weft_offload.
 */
#ifndef WEFT_OFFLOAD_H
#define WEFT_OFFLOAD_H

#include <stdbool.h>
#include <stdint.h>

/* Sets the pool's limit on helper threads (weft_init); no thread starts yet. */
void weft__offload_init(unsigned max_threads);
/* Tells the helpers to exit and waits until they have (weft_shutdown, once
 * no coroutine is left, so no call is in flight). */
void weft__offload_fini(void);

/*
 * weft_offload for a call that may be abandoned while it waits for a
 * helper: fn(arg) runs on a helper, the calling coroutine parks, and the
 * deadline (absolute ns, -1 none), a weft_cancel or a weft_interrupt end
 * the wait while the call is still queued: it is taken out and never
 * runs, -ETIMEDOUT, -ECANCELED or -EINTR (or -ENOMEM: no room in the
 * worker's timer heap for the deadline).  Once a helper has taken it the
 * caller waits for fn to return (arg stays valid; an interrupt that came
 * meanwhile stays pending for the next wait) and gets 0.  -EAGAIN as
 * weft_offload's.  From a coroutine only.
 */
int weft__offload_until(void (*fn)(void *), void *arg, int64_t deadline);

/* The parts of weft__offload_until, for a caller with its own wait (io.c's
 * files, which weft_close also wakes).  A call queued for a helper: fn and
 * arg are the caller's, done (a completion, park.h) is set once fn has
 * returned; the record stays valid until then or until withdrawn. */
struct weft__offload_call {
	void (*fn)(void *);
	void *arg;
	void *done;
	struct weft__offload_call *next;	/* the pool's FIFO */
};
/* Queues c (done cleared): 0, or -EAGAIN as weft_offload's. */
int weft__offload_submit(struct weft__offload_call *c);
/* Takes c out of the queue if no helper has taken it yet: true if it was
 * there (it will never run); false: a helper runs it, wait for done. */
bool weft__offload_withdraw(struct weft__offload_call *c);

struct weft__offload_stats {
	uint64_t calls;		/* calls run by helpers */
	unsigned threads;	/* helpers alive now */
	unsigned threads_max;	/* the limit */
};
void weft__offload_stats(struct weft__offload_stats *out);

#endif
