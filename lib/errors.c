/* SPDX-License-Identifier: MIT */
/*
 * errors.c — weft__fail, weft__errno and the public weft_errno_location
 * (errors.h).  WEFT_ERRNO_GUARD is not defined here: `errno` is glibc's.
 */
#include "errors.h"

#include <errno.h>

#include "weft.h"

WEFT__ERRORS_OPAQUE int weft__fail(int e)
{
	errno = e;
	return -1;
}

WEFT__ERRORS_OPAQUE int *weft_errno_location(void)
{
	__asm__ volatile("" ::: "memory");
	return &errno;
}

WEFT__ERRORS_OPAQUE int weft__errno(void)
{
	__asm__ volatile("" ::: "memory");
	return errno;
}
