/* SPDX-License-Identifier: MIT */
/*
 * list.h — the intrusive doubly-linked list: a head and a tail pointer, the
 * items linked through a struct weft__list_link of their own (as BSD's
 * TAILQ).  No allocation; O(1) push at the tail and unlink from anywhere.
 *
 * Two lists share this shape: a wait queue's nodes (waitq.h: a waiter that
 * gives up unlinks its node from the middle) and a group's running members
 * (group.c, linked through their control blocks: a member leaves whenever
 * it returns).  An item finds its struct from its link with
 * WEFT__LIST_ENTRY.  The list keeps no count and does not know whether an
 * item is linked: an item is unlinked only from the list it is in.
 *
 * The head's prev pointer is not kept: taking the head out does not write
 * the next item's link, which in a wait queue sits on another coroutine's
 * stack, a cold line (the waker of a semaphore or a mutex pops the head at
 * every hand-over).  Every other item's prev is its predecessor, and an
 * item is the head exactly when the list's head says so.
 *
 * No atomics and no lock here: a list is touched under its owner's lock.
 *
 * A leaf: it includes only libc headers.
 */
#ifndef WEFT_LIST_H
#define WEFT_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct weft__list_link {
	struct weft__list_link *prev, *next;
};

/* All-zero (NULL, NULL) is the empty list. */
struct weft__list {
	struct weft__list_link *head, *tail;
};

/* The struct of `type` whose `member` (a struct weft__list_link) is link. */
#define WEFT__LIST_ENTRY(link, type, member) \
	((type *)(void *)((char *)(link) - offsetof(type, member)))

/* Appends n at the tail. */
static inline void weft__list_push(struct weft__list *l, struct weft__list_link *n)
{
	n->next = NULL;
	n->prev = l->tail;
	if (l->tail)
		l->tail->next = n;
	else
		l->head = n;
	l->tail = n;
}

/* Takes n, which is in l, out of l (n's own pointers are left as they
 * were). */
static inline void weft__list_unlink(struct weft__list *l, struct weft__list_link *n)
{
	bool head = l->head == n;
	if (head)
		l->head = n->next;	/* the new head's stale prev is never read */
	else
		n->prev->next = n->next;
	if (!n->next)
		l->tail = head ? NULL : n->prev;
	else if (!head)
		n->next->prev = n->prev;
}

#endif
