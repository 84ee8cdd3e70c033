/* SPDX-License-Identifier: MIT */
/*
 * stats.h — the runtime's counters (weft_stats_get, stats.c).
 */
#ifndef WEFT_STATS_H
#define WEFT_STATS_H

#include <stdio.h>

/* Prints the table of every counter, total and per worker ($WEFT_STATS=1
 * at shutdown, once every coroutine has finished). */
void weft__stats_print(FILE *f);

#endif
