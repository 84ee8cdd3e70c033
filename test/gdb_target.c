/* SPDX-License-Identifier: MIT */
/* A program for test/gdb_backtrace.sh: a breakpoint in leaf() is hit inside
 * a coroutine, three frames above the coroutine's entry. */
#include <stdio.h>

#include "weft.h"

__attribute__((noinline)) void weft_test_leaf(int x)
{
	printf("leaf %d\n", x);
}

static volatile int after;	/* work after each call: no tail calls */

__attribute__((noinline)) void weft_test_middle(int x)
{
	weft_test_leaf(x + 1);
	after++;
}

static void entry(void *arg)
{
	(void)arg;
	weft_test_middle(1);
	after++;
}

int main(void)
{
	return weft_main(entry, NULL, &WEFT_CONFIG(.workers = 1)) == 0 ? 0 : 1;
}
