/* SPDX-License-Identifier: MIT */
/*
 * group.h — what the coroutine life cycle (coro.c) asks of weft_group
 * (group.c): letting a finished member go.
 */
#ifndef WEFT_GROUP_H
#define WEFT_GROUP_H

struct weft_co;

/* co, a member of co->group, has returned; the group lets it go. */
void weft__group_leave(struct weft_co *co);

#endif
