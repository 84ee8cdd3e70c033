/* SPDX-License-Identifier: MIT */
/*
 * affinity.c — weft_lock_thread and weft_unlock_thread: a coroutine that
 * calls into foreign code keeping per-thread state across a blocking call
 * (OpenSSL's error queue, a library's cached thread-local, errno read late)
 * stays on the worker thread it locked on, as Go's runtime.LockOSThread
 * keeps a goroutine on its thread.  Unlike Go, the worker still runs other
 * coroutines meanwhile; only the locked one is kept from migrating.  How
 * its wakes reach that worker is in worker.c's essay (the pinned FIFO).
 */
#include <errno.h>
#include <limits.h>

#include "coro.h"
#include "errors.h"
#include "worker.h"

int weft_lock_thread(void)
{
	struct weft__worker *w = weft__worker_self();
	struct weft_co *co = w ? w->current : NULL;
	if (!co)
		return weft__err_fail(EPERM);
	if (co->locks == UINT_MAX)
		return weft__err_fail(EOVERFLOW);
	if (co->locks++ == 0)
		co->pinned = true;	/* w stays co->worker: only w dispatches it now */
	return 0;
}

int weft_unlock_thread(void)
{
	struct weft_co *co = weft_self();
	if (!co)
		return weft__err_fail(EPERM);
	if (co->locks == 0)
		return weft__err_fail(EINVAL);
	if (--co->locks == 0)
		co->pinned = false;
	return 0;
}
