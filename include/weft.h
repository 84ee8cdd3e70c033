/*
 * weft — an M:N runtime of stackful coroutines on work-stealing workers.
 *
 * This is the only public header.  Conventions, as in libdill and POSIX:
 *   - functions returning int return 0 (or a documented non-negative value)
 *     on success and -1 with errno set on failure;
 *   - functions returning a pointer return NULL with errno set on failure;
 *   - errno is always set on the thread that returns from the call, after the
 *     call's last suspension (see docs/design.md, "errno and thread-locals").
 *
 * A coroutine may resume on another worker thread after any call that can
 * suspend (weft_yield, weft_join, ...).  Never keep the address of errno or of
 * any __thread variable across such a call; see docs/design.md.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_EXPORT
#endif

/* ---------------------------------------------------------------- runtime */

/*
 * Runtime configuration.  A zero field means "take it from the environment,
 * else the default":
 *   workers     1..1024; $WEFT_WORKERS; default: the CPUs in the affinity
 *               mask, capped by the cgroup CPU quota when one is set.
 *   stack_size  bytes, 16 KiB..1 GiB, rounded up to the page size;
 *               $WEFT_STACK_SIZE (accepts k/m/g suffixes); default 64 KiB.
 *   pin         1 pins worker i to the i-th CPU of the affinity mask, -1 does
 *               not pin; 0 means $WEFT_PIN (0 or 1), default off.
 * See docs/tuning.md for every variable, its range and its default.
 */
typedef struct weft_config {
	unsigned workers;
	size_t stack_size;
	int pin;
} weft_config;

/*
 * Starts the workers.  cfg may be NULL (all defaults).
 * Errors: EALREADY if the runtime is already running; EINVAL for a bad field
 * or a bad environment variable (one line naming it and its valid range is
 * printed on stderr); ENOMEM / EAGAIN if memory or threads cannot be had
 * (nothing is left half-started).
 */
WEFT_EXPORT int weft_init(const weft_config *cfg);

/*
 * From a plain thread only: waits until every coroutine has finished, stops
 * the workers and frees everything, including coroutines that finished but
 * were never joined or detached (their handles become invalid).  The runtime
 * can be initialised again afterwards.  Errors: EDEADLK when called from a coroutine or a worker;
 * ESRCH when the runtime is not running.
 */
WEFT_EXPORT int weft_shutdown(void);

/*
 * weft_init(cfg), runs fn(arg) as a coroutine, waits for it to return, then
 * weft_shutdown().  Returns 0, or -1 with the errno of the step that failed.
 */
WEFT_EXPORT int weft_main(void (*fn)(void *), void *arg, const weft_config *cfg);

/* ------------------------------------------------------------- coroutines */

typedef struct weft_co weft_co;

/*
 * Creates a coroutine running fn(arg) and makes it runnable.  Callable from a
 * coroutine or from any plain thread.  Every coroutine must be joined or
 * detached exactly once.  Errors: EPERM if the runtime is not running (or is
 * shutting down); EINVAL if fn is NULL; ENOMEM if no stack or control block
 * can be allocated.
 */
WEFT_EXPORT weft_co *weft_spawn(void (*fn)(void *), void *arg);

/*
 * Waits for co to return, then frees it.  In a coroutine it parks the
 * coroutine (the worker runs others); in a plain thread it blocks the thread.
 * Errors: EINVAL if co is NULL, is the caller itself, or was already joined or
 * detached (detected while co has not been freed yet).
 */
WEFT_EXPORT int weft_join(weft_co *co);

/*
 * Lets co free itself when it returns (at once if it already has).
 * Errors: EINVAL if co is NULL or was already joined or detached.
 */
WEFT_EXPORT int weft_detach(weft_co *co);

/*
 * Lets every other runnable coroutine of this worker run before the caller
 * runs again.  Outside a coroutine it is sched_yield(2).
 */
WEFT_EXPORT void weft_yield(void);

/* The calling coroutine, or NULL outside a coroutine. */
WEFT_EXPORT weft_co *weft_self(void);

/* co's id: unique and never reused within the process; 0 for NULL. */
WEFT_EXPORT uint64_t weft_co_id(const weft_co *co);

/* 0..n-1 on a worker thread, -1 elsewhere.  May change after a suspension. */
WEFT_EXPORT int weft_worker_id(void);

/* The number of workers, 0 when the runtime is not running. */
WEFT_EXPORT unsigned weft_worker_count(void);

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC). */
WEFT_EXPORT int64_t weft_now(void);

/* ---------------------------------------------------- coroutine-locals */

/*
 * Coroutine-local storage: what pthread keys are to threads.  Use it instead
 * of __thread for anything that must follow a coroutine (a request id, a
 * trace span, an arena): coroutines migrate between worker threads, and the
 * compiler may cache a __thread address across a suspension (see
 * docs/design.md, "errno and thread-locals").
 *
 * Keys are process-wide and independent of weft_init/weft_shutdown; at most
 * 1024 exist at once.  A new coroutine starts with every key unset (no
 * inheritance).  Get and set are O(1) and do not allocate after the first
 * set of a key in a coroutine.
 */
typedef struct weft_key weft_key;

/*
 * Creates a key.  destructor (may be NULL) runs when a coroutine that holds
 * a non-NULL value for the key finishes: after its function returns, on its
 * own stack and worker, before weft_join of it returns (or before a detached
 * one is freed).  Destructors run in the order the keys were created
 * (lowest slot first); a destructor may get and set keys, and the passes
 * repeat while values remain, at most 4 times.
 * Errors: ENOMEM; EAGAIN when 1024 keys exist.
 */
WEFT_EXPORT weft_key *weft_key_new(void (*destructor)(void *value));

/*
 * Deletes a key.  Values coroutines still hold for it are dropped without
 * running the destructor (as pthread_key_delete does) and are never visible
 * through a later key.  Using key after this call is undefined.  NULL is a
 * no-op.
 */
WEFT_EXPORT void weft_key_free(weft_key *key);

/* Sets the calling coroutine's value for key.  Errors: EPERM outside a
 * coroutine; EINVAL for a NULL key; ENOMEM (the old value is kept). */
WEFT_EXPORT int weft_local_set(weft_key *key, void *value);

/* The calling coroutine's value for key: NULL when unset, outside a
 * coroutine, or for a NULL key. */
WEFT_EXPORT void *weft_local_get(weft_key *key);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_H */
