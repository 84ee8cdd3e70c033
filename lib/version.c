/* SPDX-License-Identifier: MIT */
/*
 * version.c — the library's version at run time (weft.h's WEFT_VERSION as
 * the library was compiled; meson.build checks it against the project's).
 */
#include "weft.h"

const char *weft_version(void)
{
	return WEFT_VERSION;
}
