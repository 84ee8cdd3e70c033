/* SPDX-License-Identifier: MIT */
/* adv/common.h — what the adversarial reproductions of branch server share. */
#ifndef ADV_COMMON_H
#define ADV_COMMON_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "weft.h"

#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "%s:%d: CHECK(%s) failed, errno %d\n", __FILE__, __LINE__, \
				#c, errno);                                               \
			abort();                                                          \
		}                                                                         \
	} while (0)
#endif
