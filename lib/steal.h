/* SPDX-License-Identifier: MIT */
/*
 * steal.h — taking work from other workers (steal.c).
 */
#ifndef WEFT_STEAL_H
#define WEFT_STEAL_H

#include <stdbool.h>

struct weft__worker;
struct weft_co;

/* Work from another worker or the injection queue, or NULL; *busy is set
 * when some victim had work that was left to it (its runnext), so the
 * thief keeps spinning rather than park. */
struct weft_co *weft__steal_work(struct weft__worker *w, bool *busy);

#endif
