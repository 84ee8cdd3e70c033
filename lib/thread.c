/* SPDX-License-Identifier: MIT */
/*
 * thread.c — weft__thread_start (thread.h).
 */
#include "thread.h"

#include <errno.h>
#include <signal.h>

#include "fault.h"

int weft__thread_start(pthread_t *t, bool faults, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	if (weft__fault() || pthread_attr_init(&attr) != 0)
		return -EAGAIN;
	pthread_t detached;
	if (!t) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		t = &detached;
	}
	sigset_t block, old;
	sigfillset(&block);
	if (faults) {
		sigdelset(&block, SIGSEGV);
		sigdelset(&block, SIGBUS);
	}
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int err = pthread_create(t, &attr, fn, arg) ? -EAGAIN : 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return err;
}
