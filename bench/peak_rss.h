/* SPDX-License-Identifier: MIT */
/*
 * peak_rss_kb(): the process's peak resident set in KiB, for the rss_kb=
 * fields of the bench programs (weft-bench.c, redis.c, the Boost peer; the
 * Go and Tokio peers read the same line).
 *
 * It is /proc/self/status's VmHWM, the high-water mark of this program's
 * own address space, not getrusage's ru_maxrss: Linux carries ru_maxrss
 * over execve from the process before it, so a program started by
 * scripts/bench.py (Python, ~18 MiB resident) reports Python's peak
 * whenever its own is smaller.  ru_maxrss only where /proc cannot be read.
 */
#ifndef WEFT_BENCH_PEAK_RSS_H
#define WEFT_BENCH_PEAK_RSS_H

#include <stdio.h>
#include <sys/resource.h>

static inline long peak_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	struct rusage ru;

	while (f != NULL && kb < 0 && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmHWM: %ld kB", &kb) != 1)
			kb = -1;
	if (f != NULL)
		fclose(f);
	if (kb < 0 && getrusage(RUSAGE_SELF, &ru) == 0)
		kb = ru.ru_maxrss;
	return kb;
}

#endif
