/* SPDX-License-Identifier: MIT */
/*
 * local.h — coroutine-local storage (local.c): per-coroutine values for
 * process-wide keys.
 */
#ifndef WEFT_LOCAL_H
#define WEFT_LOCAL_H

#include <stdint.h>

struct weft_co;

/* One coroutine's value for the key in slot i of the registry; gen says
 * which key (slots are reused after weft_key_free). */
struct weft__local {
	void *value;
	uint64_t gen;
};

/* Runs the destructors of co's values (on co's own stack, as its last act)
 * and frees its table. */
void weft__locals_destroy(struct weft_co *co);

#endif
