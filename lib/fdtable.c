/* SPDX-License-Identifier: MIT */
/*
 * fdtable.c — the chunked fd table and its waiter-slot protocol
 * (see fdtable.h).
 */
#include "fdtable.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "fault.h"
#include "park.h"
#include "slot.h"

enum {
	CHUNK_SHIFT = 10,
	CHUNK = 1 << CHUNK_SHIFT,	/* entries per chunk (32 KiB) */
	DIR_INITIAL = 64,		/* chunks: fds 0..65535 before the first growth */
};

#define FD_READY ((void *)2)	/* a slot marker (slot.h) */

struct dir {
	size_t nchunks;
	struct dir *retired;	/* the directory this one replaced */
	struct weft__fd *chunk[];	/* atomic pointers; NULL until used */
};

static struct dir *table;	/* atomic: the current directory */
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;

struct weft__fd *weft__fd_find(int fd)
{
	if (fd < 0)
		return NULL;
	struct dir *d = at_load_ptr((void **)&table);
	size_t c = (size_t)fd >> CHUNK_SHIFT;
	if (!d || c >= d->nchunks)
		return NULL;
	struct weft__fd *chunk = at_load_ptr((void **)&d->chunk[c]);
	/* The chunk's zeroed contents were published by grow_lock's release
	 * and the pointer store (address dependency orders the reads). */
	return chunk ? &chunk[fd & (CHUNK - 1)] : NULL;
}

/* Under grow_lock: a directory with at least c + 1 chunks. */
static struct dir *dir_for(size_t c)
{
	struct dir *old = table;
	if (old && c < old->nchunks)
		return old;
	size_t n = old ? old->nchunks : DIR_INITIAL;
	while (n <= c)
		n *= 2;
	struct dir *d = weft__fault() ? NULL : calloc(1, sizeof *d + n * sizeof d->chunk[0]);
	if (!d)
		return NULL;
	d->nchunks = n;
	d->retired = old;
	if (old)
		memcpy(d->chunk, old->chunk, old->nchunks * sizeof d->chunk[0]);
	at_fence_release();
	at_store_ptr((void **)&table, d);
	return d;
}

struct weft__fd *weft__fd_get(int fd)
{
	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	struct weft__fd *e = weft__fd_find(fd);
	if (e)
		return e;
	size_t c = (size_t)fd >> CHUNK_SHIFT;
	pthread_mutex_lock(&grow_lock);
	struct dir *d = dir_for(c);
	if (d && !d->chunk[c]) {
		struct weft__fd *chunk = weft__fault() ? NULL : calloc(CHUNK, sizeof *chunk);
		if (chunk) {
			at_fence_release();
			at_store_ptr((void **)&d->chunk[c], chunk);
		}
	}
	pthread_mutex_unlock(&grow_lock);
	e = weft__fd_find(fd);
	if (!e)
		errno = ENOMEM;
	return e;
}

void weft__fdtable_fini(void)
{
	pthread_mutex_lock(&grow_lock);
	struct dir *d = table;
	if (d)
		for (size_t i = 0; i < d->nchunks; i++)
			free(d->chunk[i]);
	while (d) {
		struct dir *older = d->retired;
		free(d);
		d = older;
	}
	at_store_ptr((void **)&table, NULL);
	pthread_mutex_unlock(&grow_lock);
}

/* ------------------------------------------------------ slots */

int weft__fd_slot_park(void **slot, struct weft__waiter *w)
{
	for (;;) {
		void *v = at_load_ptr(slot);
		if (v == NULL) {
			if (at_cas_ptr(slot, NULL, w))
				return 0;
		} else if (v == FD_READY) {
			if (at_cas_ptr(slot, FD_READY, NULL))
				return 1;
		} else {
			return -1;
		}
	}
}

void weft__fd_slot_retract(void **slot, struct weft__waiter *w)
{
	weft__slot_retract(slot, w);
}

void weft__fd_slot_forget(void **slot)
{
	at_cas_ptr(slot, FD_READY, NULL);
}

struct weft__waiter *weft__fd_slot_claim(void **slot, bool mark_ready)
{
	for (;;) {
		void *v = at_load_ptr(slot);
		if (v == NULL) {
			if (!mark_ready || at_cas_ptr(slot, NULL, FD_READY))
				return NULL;
		} else if (!weft__slot_is_waiter(v) || ((uintptr_t)v & WEFT__SLOT_CLAIMED)) {
			return NULL;	/* nothing to wake, or someone else is on it */
		} else if (weft__slot_try_claim(slot, v)) {
			return v;
		}
	}
}

void weft__fd_slot_release(void **slot, bool leave_ready)
{
	weft__slot_release(slot, leave_ready ? FD_READY : NULL);
}

void weft__fd_slot_wake(void **slot, int result, bool mark_ready)
{
	struct weft__waiter *w = weft__fd_slot_claim(slot, mark_ready);
	if (w)
		weft__fd_slot_release(slot, !weft__waiter_wake(w, result) && mark_ready);
}
