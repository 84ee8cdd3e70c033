/* SPDX-License-Identifier: MIT */
/*
 * errors.c — weft__err_fail, weft__err_get and the public weft_errno_location
 * (errors.h).  `errno` here is glibc's (WEFT_NO_ERRNO_GUARD, lib/meson.build).
 */
#include "errors.h"

#include <errno.h>

#include "weft.h"

WEFT__ERR_OPAQUE int weft__err_fail(int e)
{
	errno = e;
	return -1;
}

WEFT__ERR_OPAQUE int *weft_errno_location(void)
{
	__asm__ volatile("" ::: "memory");
	return &errno;
}

WEFT__ERR_OPAQUE int weft__err_get(void)
{
	__asm__ volatile("" ::: "memory");
	return errno;
}
