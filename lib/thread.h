/* SPDX-License-Identifier: MIT */
/*
 * thread.h — starting the runtime's own threads (workers, the monitor,
 * offload helpers).
 *
 * They block every signal, so that signals go to the application's threads
 * (and its signalfds); the workers keep SIGSEGV and SIGBUS, which their
 * stack-overflow reporter (overflow.h) must see.  Fault-injection builds may
 * refuse a thread (fault.h), as the system may.
 *
 * A leaf: libc headers and fault.h only, so a module that starts a thread
 * does not depend on the runtime's life cycle (runtime.c) for it.
 */
#ifndef WEFT_THREAD_H
#define WEFT_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* Starts fn(arg) on a new thread with every signal blocked: all but SIGSEGV
 * and SIGBUS when `faults`.  Detached when t is NULL.  0 or -EAGAIN. */
int weft__thread_start(pthread_t *t, bool faults, void *(*fn)(void *), void *arg);

#endif
