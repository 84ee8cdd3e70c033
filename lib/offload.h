/* SPDX-License-Identifier: MIT */
/*
 * offload.h — the pool of helper threads behind weft_offload.
 */
#ifndef WEFT_OFFLOAD_H
#define WEFT_OFFLOAD_H

#include <stdint.h>

/* Sets the pool's limit on helper threads (weft_init); no thread starts yet. */
void weft__offload_init(unsigned max_threads);
/* Tells the helpers to exit and waits until they have (weft_shutdown, once
 * no coroutine is left, so no call is in flight). */
void weft__offload_fini(void);

struct weft__offload_stats {
	uint64_t calls;		/* calls run by helpers */
	unsigned threads;	/* helpers alive now */
	unsigned threads_max;	/* the limit */
};
void weft__offload_stats(struct weft__offload_stats *out);

#endif
