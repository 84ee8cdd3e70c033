/* SPDX-License-Identifier: MIT */
/*
 * clock.c — weft_now (clock.h).
 */
#include "clock.h"

#include <time.h>

int64_t weft_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
