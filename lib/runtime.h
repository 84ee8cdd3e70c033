/*
 * runtime.h — the runtime's life cycle (runtime.c).
 */
#ifndef WEFT_RUNTIME_H
#define WEFT_RUNTIME_H

#include <pthread.h>
#include <stdbool.h>

/* True between weft_init and the end of weft_shutdown's drain. */
bool weft__runtime_accepting(void);

/* Starts one of the runtime's threads (worker, monitor, offload helper)
 * running fn(arg), with every signal blocked, so that signals go to the
 * application's threads (and its signalfds): all but SIGSEGV and SIGBUS
 * when `faults` (the workers, whose stack-overflow reporter must see them).
 * Detached when t is NULL.  0 or EAGAIN. */
int weft__thread_start(pthread_t *t, bool faults, void *(*fn)(void *), void *arg);

#endif
