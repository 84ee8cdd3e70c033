/* SPDX-License-Identifier: MIT */
/*
 * weft — an M:N runtime of stackful coroutines on work-stealing workers.
 *
 * This is the only public header.  Conventions, as in libdill and POSIX:
 *   - functions returning int return 0 (or a documented non-negative value)
 *     on success and -1 with errno set on failure;
 *   - functions returning a pointer return NULL with errno set on failure;
 *   - errno is always set on the thread that returns from the call, after the
 *     call's last suspension (see docs/design.md, "errno and thread-locals
 *     across suspension");
 *   - every call that may wait (I/O, sleep, join, the synchronisation
 *     objects, channels and select) also fails with ECANCELED once its
 *     coroutine is cancelled (weft_cancel) and with EINTR when
 *     weft_interrupt ends its wait; the per-call lists below leave these
 *     two out.
 *
 * A coroutine may resume on another worker thread after any call that can
 * suspend (weft_yield, weft_join, weft_read, ...).  Never keep the address of
 * any __thread variable across such a call; see docs/design.md.  errno is
 * safe by default in every file that includes this header: glibc lets the
 * compiler reuse an &errno computed before such a call, so this header makes
 * `errno` mean (*weft_errno_location()), which is computed afresh at each use
 * (see weft_errno_location below).
 *
 * A system call a coroutine makes itself, not through weft, blocks its
 * worker thread for as long as it lasts (weft_offload moves such calls
 * off it).  Under the io_uring backend (WEFT_IO, docs/tuning.md) the
 * completion of a file transfer on the ring of the worker that submitted
 * it interrupts that worker's system call as a signal would, with no
 * signal sent: a call the kernel restarts after a signal that no handler
 * caught (read, poll, nanosleep, a futex wait, ...) goes on unseen, but one
 * it never restarts (epoll_wait, epoll_pwait, io_getevents, sigtimedwait,
 * semtimedop, ...: signal(7)) may fail with EINTR.  Retry it as for a
 * signal (with the time left, if it has a timeout).  weft's own calls never
 * fail so (close(2)'s EINTR is weft_close's success: see there).  The
 * other way round, a known gap: that completion is work the kernel runs on
 * the submitting worker, which an uninterruptible or killable system call
 * (vfork, posix_spawn, fsync, a disk in D state, a major page fault) holds
 * until it ends, so a worker blocked in an uninterruptible system call
 * delays completions of the ring ops it submitted (file transfers, and
 * stream sockets under WEFT_URING_SOCKETS=1), and the deadlines, cancels
 * and closes that wait for them; run such calls with weft_offload.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_EXPORT
#endif

/* ---------------------------------------------------------------- version */

/*
 * The version of this header: WEFT_VERSION_MAJOR.MINOR.PATCH, as a string in
 * WEFT_VERSION and as one comparable integer in WEFT_VERSION_NUMBER
 * (major * 10000 + minor * 100 + patch).  meson.build's project version is
 * checked against these at configure time.
 *
 * Compatibility: while the major version is 0, a minor bump (0.1 -> 0.2) may
 * break the API and the ABI, and the shared library's soname carries both
 * numbers (libweft.so.0.1); a patch bump never breaks either.  From 1.0 on,
 * only a major bump breaks, and the soname carries the major number.
 */
#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION "0.1.0"
#define WEFT_VERSION_NUMBER \
	(WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH)

/*
 * The version of the library the program runs with ("0.1.0"), which may be a
 * later patch release than the WEFT_VERSION it was compiled against.  Never
 * fails; callable at any time, from any thread.
 */
WEFT_EXPORT const char *weft_version(void);

/*
 * The calling thread's errno, like glibc's __errno_location but not declared
 * const, so the compiler computes it afresh at every use and never carries
 * one thread's address across a suspension.  Every file that includes this
 * header gets `errno` defined as (*weft_errno_location()): reading errno
 * after a call that suspended reads the errno of the thread the coroutine
 * runs on now.  It costs a function call per use of errno.
 *
 * A file that never reads or writes errno across a suspension and wants
 * glibc's own `errno` back defines WEFT_NO_ERRNO_GUARD before including this
 * header.  WEFT_ERRNO_GUARD, which turned the guard on in earlier versions,
 * is still accepted and changes nothing.
 */
WEFT_EXPORT int *weft_errno_location(void);
#ifndef WEFT_NO_ERRNO_GUARD
#include <errno.h>
#undef errno
#define errno (*weft_errno_location())
#endif

/* ---------------------------------------------------------------- runtime */

/*
 * Runtime configuration.  Start from WEFT_CONFIG_INIT, which sets `size` and
 * zeroes the rest, then set the fields you want (or, in C, use WEFT_CONFIG):
 *
 *     weft_config cfg = WEFT_CONFIG_INIT;
 *     cfg.workers = 4;
 *
 * ABI growth: `size` is the caller's sizeof(weft_config); new fields are
 * only ever appended, and the library reads only the fields that lie wholly
 * within `size`: the fields of a later version than the caller's take their
 * defaults, and fields of a later version than the library's (a larger
 * size) are ignored.  A size smaller than the `size` field itself is EINVAL.
 *
 * A zero field means "take it from the environment, else the default":
 *   workers     1..1024; $WEFT_WORKERS; default: the CPUs in the affinity
 *               mask, capped by the cgroup CPU quota when one is set.
 *   stack_size  bytes, 16 KiB..1 GiB, rounded up to the page size;
 *               $WEFT_STACK_SIZE (accepts k/m/g suffixes); default 64 KiB.
 *   pin         1 pins worker i to the i-th CPU of the affinity mask, -1 does
 *               not pin; 0 means $WEFT_PIN (0 or 1), default off.
 *   io          the I/O backend, a WEFT_IO_* value; 0 means $WEFT_IO
 *               (auto, epoll or uring), default WEFT_IO_AUTO.  WEFT_IO_AUTO
 *               probes io_uring at weft_init and takes epoll, silently,
 *               where it cannot be had (an old kernel, a seccomp filter);
 *               WEFT_IO_URING where it cannot be had fails weft_init with
 *               ENOSYS, EPERM or the probe's errno and one stderr line
 *               saying why.  weft_stats reports the one in use.
 *   poller      where fd readiness is polled, a WEFT_POLLER_* value; 0
 *               means $WEFT_POLLER (shared or worker), default
 *               WEFT_POLLER_SHARED: one epoll instance for every worker's
 *               fds.  WEFT_POLLER_WORKER gives each worker its own, which
 *               owns the fds first waited on from that worker (their
 *               waiters' wakes are stolen as any other work).  The
 *               behaviour of every call is the same in both
 *               (docs/design.md, "The poller").
 * See docs/tuning.md for every variable, its range and its default.
 */
typedef struct weft_config {
	uint32_t size;		/* sizeof(weft_config) (WEFT_CONFIG_INIT sets it) */
	unsigned workers;
	size_t stack_size;
	int pin;
	int io;			/* appended: a WEFT_IO_* value, 0 for the default */
	int poller;		/* appended: a WEFT_POLLER_* value, 0 for the default */
} weft_config;

/* weft_config.io and weft_stats.io_backend. */
enum { WEFT_IO_AUTO = 1, WEFT_IO_EPOLL = 2, WEFT_IO_URING = 3 };

/* weft_config.poller and weft_stats.poller. */
enum { WEFT_POLLER_SHARED = 1, WEFT_POLLER_WORKER = 2 };

/* An initializer for a weft_config: every field 0 but size (C and C++). */
#define WEFT_CONFIG_INIT { sizeof(weft_config), 0, 0, 0, 0, 0 }

#ifndef __cplusplus
/* In C, a weft_config with size set and the fields named, as a compound
 * literal: weft_main(fn, arg, &WEFT_CONFIG(.workers = 2)). */
#define WEFT_CONFIG(...) ((weft_config){ .size = sizeof(weft_config), __VA_ARGS__ })
#endif

/*
 * Starts the workers.  cfg may be NULL (all defaults).
 * Errors: EALREADY if the runtime is already running; EINVAL for a bad size
 * or field or a bad environment variable (one line naming it and its valid range is
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
 * weft_shutdown with a deadline (absolute weft_now() ns; -1 none): waits
 * until every coroutine has finished or the deadline passes; then cancels
 * (weft_cancel) every coroutine still running, and every one spawned
 * meanwhile, and waits for them.  Returns 0 once all have finished and the
 * runtime is stopped, as weft_shutdown does.  ETIMEDOUT if some still run a
 * second after their cancellation (they ignore it: they never block, or
 * catch ECANCELED and carry on): each is named on stderr, one line with its
 * id and entry function, and the runtime is left running (they stay
 * cancelled), for a later weft_shutdown or weft_shutdown_until.
 * Errors: those of weft_shutdown.
 */
WEFT_EXPORT int weft_shutdown_until(int64_t deadline);

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
 * Options for weft_spawn_with; a zero field takes the default.
 *   stack_size  bytes, rounded up to the page size and to at least 16 KiB;
 *               at most 1 GiB (weft_config.stack_size's range), else
 *               EINVAL.  0: the runtime's stack size.  A stack of another
 *               size than the runtime's is allocated for this coroutine and
 *               freed when it is joined (the stack pool keeps only stacks
 *               of the runtime's size), so such spawns cost more.
 *   name        copied as by weft_set_name (NULL: none).
 */
typedef struct weft_spawn_opts {
	size_t stack_size;
	const char *name;
} weft_spawn_opts;

/*
 * weft_spawn with options (opts may be NULL: weft_spawn).  Errors: those of
 * weft_spawn; EINVAL for a stack_size above 1 GiB.
 */
WEFT_EXPORT weft_co *weft_spawn_with(void (*fn)(void *), void *arg, const weft_spawn_opts *opts);

/*
 * Waits for co to return, then frees it.  In a coroutine it parks the
 * coroutine (the worker runs others); in a plain thread it blocks the thread.
 * Errors: EINVAL if co is NULL, is the caller itself, or was already joined or
 * detached (detected while co has not been freed yet).
 */
WEFT_EXPORT int weft_join(weft_co *co);

/*
 * weft_join with a deadline (absolute weft_now() ns; -1 none; one already
 * past joins only a coroutine that has returned): waits for co to return,
 * then frees it.  Errors: those of weft_join; ETIMEDOUT, after which co is
 * still running (or just returned) and must still be joined or detached;
 * ENOMEM (a coroutine's: the timer heap), with co as after ETIMEDOUT.
 * From coroutines (which park) and plain threads (which block).
 */
WEFT_EXPORT int weft_join_until(weft_co *co, int64_t deadline);

/*
 * Groups (libdill's bundles, Tokio's JoinSet): a set of coroutines, its
 * members, that the group joins as they return, waited for, cancelled and
 * freed together.  Every call works from coroutines (which park) and plain
 * threads (which block).  The object-lifetime rule holds: weft_group_free may
 * be called as soon as weft_group_wait has returned.
 */
typedef struct weft_group weft_group;

/* A new, empty group; NULL/ENOMEM. */
WEFT_EXPORT weft_group *weft_group_new(void);

/*
 * Spawns fn(arg) as a member of g (as weft_spawn: the default stack and no
 * name); a member may spawn members.  After weft_group_cancel, the member
 * starts cancelled.  The group frees the member when it returns: the handle
 * returned may be used (weft_cancel, weft_co_id, weft_co_name) only while
 * the caller knows the member has not returned, and never with weft_join or
 * weft_detach.  NULL with errno: EINVAL if g or fn is NULL; those of
 * weft_spawn.
 */
WEFT_EXPORT weft_co *weft_group_spawn(weft_group *g, void (*fn)(void *), void *arg);

/*
 * weft_group_spawn with weft_spawn_with's options (a name, a stack size;
 * opts may be NULL: weft_group_spawn).  Errors: those of weft_group_spawn;
 * EINVAL for a stack_size above 1 GiB.
 */
WEFT_EXPORT weft_co *weft_group_spawn_with(weft_group *g, void (*fn)(void *), void *arg,
					   const weft_spawn_opts *opts);

/*
 * The number of members of g that have not returned yet: spawned, and not
 * yet finished (a member counts from its spawn until its function and its
 * coroutine-locals' destructors have returned).  From any thread; a
 * snapshot, which members spawning or returning meanwhile may change.
 * Errors: EINVAL if g is NULL (-1).
 */
WEFT_EXPORT ssize_t weft_group_count(weft_group *g);

/*
 * Waits until every member of g has returned (the members spawned while it
 * waits included): 0.  Errors: EINVAL if g is NULL; ETIMEDOUT at deadline
 * (absolute weft_now() ns, -1 none), the members left running; ECANCELED if
 * the caller is cancelled; EDEADLK if the caller is a member of g.
 */
WEFT_EXPORT int weft_group_wait(weft_group *g, int64_t deadline);

/* Calls weft_cancel on every member of g, and on every member spawned
 * later.  Errors: EINVAL if g is NULL. */
WEFT_EXPORT int weft_group_cancel(weft_group *g);

/* Calls weft_interrupt on every member of g now (members spawned later are
 * not interrupted): the safe way to interrupt members, whose handles are
 * gone once they return (a server telling its idle connections to look
 * up, weft_interrupt).  Errors: EINVAL if g is NULL. */
WEFT_EXPORT int weft_group_interrupt(weft_group *g);

/*
 * Cancels the members of g that still run, waits for them (a cancelled
 * caller waits all the same: members never outlive their group) and frees
 * g.  Errors: EINVAL if g is NULL; EDEADLK if the caller is a member of g
 * (nothing is done).
 */
WEFT_EXPORT int weft_group_free(weft_group *g);

/*
 * Lets co free itself when it returns (at once if it already has).
 * Errors: EINVAL if co is NULL or was already joined or detached.
 */
WEFT_EXPORT int weft_detach(weft_co *co);

/*
 * Cancels co: its current blocking call (I/O, sleep, join, mutex, condition
 * variable, wait group, channel, select, offload: see weft_offload)
 * returns -1/ECANCELED at once, and
 * so does every later one, ready or not, so it unwinds through its own error
 * paths (weft_cond_wait still returns with its mutex held).  A cancelled
 * joiner's target stays joinable.  Cancelling a finished coroutine is a
 * no-op; co must still be joined or detached (and not yet have been).
 * From any thread; never blocks.  Errors: EINVAL for NULL.
 */
WEFT_EXPORT int weft_cancel(weft_co *co);

/*
 * Interrupts co: its current blocking call (the calls weft_cancel ends,
 * but offload's and weft_group_free's waits, which an interrupt leaves
 * waiting) returns -1/EINTR, once; if co is not waiting, its next wait
 * does, as a pending signal would.  Unlike weft_cancel nothing is sticky:
 * the calls after that one run as usual, so a coroutine can be told to
 * look up from a wait (a keep-alive read, a channel receive) and then write
 * a last answer or close cleanly.  A call that is ready does not wait and
 * is not interrupted: the interrupt stays pending for the next wait.  A
 * wait that completes at the same moment (its channel element arrived,
 * its mutex was handed over, its join target finished, its fd became
 * ready) succeeds, and the interrupt stays pending likewise.  Nothing is
 * lost: an interrupted read leaves the data in the socket, an interrupted
 * send leaves the element with the sender; weft_write may have written a
 * prefix, as on any error.  Interrupts do not queue: interrupting co twice
 * before a wait takes the first is one interrupt.  The lifetime rules of
 * the objects waited on are those of weft_cancel.  From any thread; never
 * blocks.  co must not have been
 * joined or detached (an interrupt of a finished coroutine does nothing).
 * Errors: EINVAL for NULL.
 */
WEFT_EXPORT int weft_interrupt(weft_co *co);

/*
 * Lets every other runnable coroutine of this worker run before the caller
 * runs again.  Outside a coroutine it is sched_yield(2).
 */
WEFT_EXPORT void weft_yield(void);

/*
 * Spends one unit of the calling coroutine's budget, as every fd call and
 * channel operation of weft does (an fd call one more per 4 KiB it moved):
 * the 128th unit of one run of a coroutine (between two of its switches)
 * first lets its worker fire due timers, harvest readiness and run the
 * others, as weft_yield does.  So a
 * loop whose calls never have to wait (an accept loop under a flood of
 * connections, a reader whose peer keeps its socket full, a receiver whose
 * channel is never empty) cannot keep the rest of its worker waiting.
 * Call it once per call in such loops over operations that are not weft's
 * (a library's own non-blocking I/O, as the hook layer's calls are): a few
 * instructions while budget is left.  Outside a coroutine it does nothing.
 */
WEFT_EXPORT void weft_consume_budget(void);

/* The calling coroutine, or NULL outside a coroutine. */
WEFT_EXPORT weft_co *weft_self(void);

/* co's id: unique and never reused within the process; 0 for NULL. */
WEFT_EXPORT uint64_t weft_co_id(const weft_co *co);

/* The longest name weft_set_name keeps, with its terminating NUL. */
#define WEFT_NAME_MAX 32

/*
 * Names the calling coroutine (copied, truncated to WEFT_NAME_MAX - 1 bytes;
 * NULL or "" clears it), for debuggers (`info weft-coroutines` in
 * tools/gdb/weft.py).  Errors: EPERM outside a coroutine.
 */
WEFT_EXPORT int weft_set_name(const char *name);

/* co's name ("" if it has none); co must not have been joined or detached. */
WEFT_EXPORT const char *weft_co_name(const weft_co *co);

/* 0..n-1 on a worker thread, -1 elsewhere.  May change after a suspension. */
WEFT_EXPORT int weft_worker_id(void);

/* The number of workers, 0 when the runtime is not running. */
WEFT_EXPORT unsigned weft_worker_count(void);

/*
 * Thread affinity for foreign code (Go's runtime.LockOSThread habit).
 * After weft_lock_thread the calling coroutine always resumes on the worker
 * thread it called from: it is never stolen, and whoever wakes it (another
 * worker, a plain thread, a timer, I/O readiness) queues it there.  So a
 * library that keeps per-thread state across a blocking call (OpenSSL's
 * error queue, a thread-local cached by a client library: docs/hooks.md)
 * stays correct (errno needs none of this: it follows each coroutine).  The worker keeps running
 * other coroutines meanwhile; if it is stuck in one, the locked coroutine
 * waits for it rather than run elsewhere.  Calls nest: the coroutine is
 * unlocked when weft_unlock_thread has been called as many times as
 * weft_lock_thread.  A coroutine that returns while locked just ends.
 * Errors: EPERM outside a coroutine; EOVERFLOW past UINT_MAX nested locks;
 * EINVAL from weft_unlock_thread when not locked.
 */
WEFT_EXPORT int weft_lock_thread(void);
WEFT_EXPORT int weft_unlock_thread(void);

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC). */
WEFT_EXPORT int64_t weft_now(void);

/* ------------------------------------------------------- I/O and time */

/*
 * Blocking-style I/O for coroutines.  The calling coroutine parks until the
 * fd is ready (its worker runs others meanwhile); the first call on an fd
 * registers it, edge-triggered, with the runtime's poller, and makes it
 * non-blocking (O_NONBLOCK is a property of the open file description:
 * dup'ed fds and other processes sharing it see it too).
 *
 * An fd belongs to no worker and no coroutine: any coroutine on any worker
 * may use it, one after another or at once (a pooled upstream connection
 * handed between coroutines through a channel or under a mutex).  Moving it
 * costs nothing beyond the cache lines of its entry, which follow the
 * caller; it is neither re-registered nor re-armed.  The caller that hands
 * it on must be done with its own calls on it (or have them end by
 * weft_close): as with read(2), two readers of one stream at once each get
 * some of its bytes.
 *
 * deadline: absolute, in weft_now() nanoseconds; -1 means none; a deadline
 * already past means "do not block" (the call still succeeds if it can
 * without waiting).  Expiry: -1 with ETIMEDOUT.
 *
 * Errors common to every call below: EPERM outside a coroutine; ECANCELED
 * when the fd is weft_close'd or weft_release'd while the call waits (or
 * runs); EBADF; ENOMEM when the fd table or a timer heap cannot grow.
 *
 * Any number of coroutines may wait on the same direction of the same fd
 * (N acceptors on one listener, several readers of one UDP socket, a
 * reader and a weft_wait caller): they queue, FIFO.  One readiness wakes
 * one waiter per direction; when the woken call does not end up waiting
 * again (it read something, accepted, was a weft_wait, or timed out or was
 * cancelled), the next waiter gets its turn to try, so nobody sleeps while
 * the fd may be ready.
 *
 * An fd used with these calls must be closed with weft_close (or given back
 * with weft_release first): plain close(2) on it is undefined (its number
 * may come back still registered).  Regular files and block devices,
 * which epoll cannot watch, never block the worker either: weft_read,
 * weft_write, weft_pread and weft_pwrite take from or give to the page
 * cache on the worker when it can answer at once (RWF_NOWAIT), and
 * otherwise (a page not cached, an O_DIRECT file, writeback throttling)
 * park the coroutine while a helper of the offload pool does the transfer,
 * or, under WEFT_IO=uring, the worker's io_uring (see weft_pread for what
 * a deadline or cancel does to it; weft_read for the file position; and
 * the top of this file for a worker blocked in an uninterruptible system
 * call, which delays completions of the ring ops it submitted).  A file
 * system that cannot answer RWF_NOWAIT (EOPNOTSUPP: procfs and sysfs
 * reads, buffered writes on ext4 and others) costs what it did without
 * weft: the fd remembers it for that direction, and those transfers are
 * a blocking call on the worker, which also succeeds with a past
 * deadline.  The other calls on such files (readv, writev, sendfile's
 * in_fd) do not wait: they block the worker for as long as the disk takes.
 */
enum { WEFT_IN = 1, WEFT_OUT = 2, WEFT_AFTER_EAGAIN = 4 };

/*
 * Waits until fd is ready for any of events (WEFT_IN, WEFT_OUT or both) and
 * returns the ready subset, as poll(2) sees it (a hang-up or error counts as
 * ready for both).  Errors: EINVAL for an empty or unknown events mask;
 * ETIMEDOUT; ECANCELED; EBADF.
 *
 * With WEFT_AFTER_EAGAIN added to events, the caller says that its own
 * last call on fd in those directions failed with EAGAIN (a library's
 * non-blocking read or write, SSL_read's WANT_READ): weft_wait then skips
 * the poll(2) that makes its answer exact and waits for the next readiness
 * weft sees, or returns at once with readiness that arrived since (an edge
 * is never lost between the caller's EAGAIN and this call).  The answer
 * may be spurious: readiness that came before that EAGAIN and was used up
 * by it.  The caller then retries its call, gets EAGAIN again and waits
 * again, which then blocks: the loop costs one system call less per wait
 * than the exact form.
 */
WEFT_EXPORT int weft_wait(int fd, int events, int64_t deadline);

/*
 * Like read(2): returns at least one byte as soon as some is there, 0 at end
 * of file.  On a regular file or block device, as read(2) there, it reads
 * all of len short of the end of file (a range only partly in the page
 * cache is read whole), unless a deadline, cancel or interrupt ends the
 * wait for the rest: it then returns the bytes read (an interrupt stays
 * pending for the next wait).  Errors: those of read(2), ETIMEDOUT,
 * ECANCELED.
 *
 * The file position: weft_read, weft_write, weft_readv and weft_writev
 * calls at the position of one file are atomic with each other, as read(2)
 * and write(2) are: each moves its whole range, and two never read the
 * same bytes.  Under WEFT_IO=epoll the kernel's position lock does it.
 * Under WEFT_IO=uring weft does it per fd number: one such call at a time
 * per fd, weft_sendfile from the position (a NULL offset) included (the
 * others wait their turn, which their deadline, weft_cancel,
 * weft_interrupt or a weft_close of fd ends), and a transfer that goes to
 * the ring reads the position (lseek), transfers at that offset and moves
 * the position by what it moved.  A write to a file whose status flags
 * have O_APPEND when the write is made (set at open or later with
 * fcntl(F_SETFL)) goes to a helper instead, and leaves the position at
 * the end of the file, as write(2) does.  Another fd for the same open
 * file (dup(2), a fork, /proc/self/fd) or a plain read(2), write(2) or
 * lseek(2) on it meanwhile is not ordered with such a transfer: the two may
 * use the same position.  Share a position through one fd, or use
 * weft_pread and weft_pwrite.
 */
WEFT_EXPORT ssize_t weft_read(int fd, void *buf, size_t len, int64_t deadline);

/*
 * Writes all len bytes, waiting as needed, and returns len.  Never raises
 * SIGPIPE: a closed peer is EPIPE.  On an error or the deadline, a prefix of
 * buf may have been written (the stream is then best closed).  Errors: those
 * of write(2), ETIMEDOUT, ECANCELED.
 */
WEFT_EXPORT ssize_t weft_write(int fd, const void *buf, size_t len, int64_t deadline);

/*
 * Like pread(2): reads up to len bytes at offset (the file position is
 * neither used nor moved), at least one byte (all of len short of the end
 * of a file, as weft_read), 0 at end of file.  On a
 * regular file or block device the worker never blocks (see above); on a
 * pipe or socket it is ESPIPE, as pread(2).
 *
 * A deadline, weft_cancel, weft_interrupt or a weft_close of fd ends the
 * call with ETIMEDOUT, ECANCELED, EINTR or ECANCELED while the transfer
 * has not started (it waits for a helper) or, under WEFT_IO=uring (the
 * transfer is on a worker's io_uring), once the kernel has cancelled it.
 * One that has started cannot be stopped (no kernel interrupts a disk
 * read), and one the kernel completed before the cancel reached it stands:
 * the call waits for it (under uring: for its completion), so the buffer
 * is never written after the call returns, and returns its result, the
 * bytes read, never lost, even when the deadline passed or the coroutine
 * was cancelled meanwhile (a cancelled coroutine's next call fails; an
 * interrupt stays pending for its next wait).  The same holds for
 * weft_read and weft_write on such files.
 * Errors: those of pread(2) (EINVAL for a negative offset), ETIMEDOUT,
 * ECANCELED, EINTR; EAGAIN if no helper thread exists and none can be
 * created.
 */
WEFT_EXPORT ssize_t weft_pread(int fd, void *buf, size_t len, off_t offset, int64_t deadline);

/*
 * Like pwrite(2), but writes all len bytes at offset (as weft_write does,
 * in as many transfers as it takes) and returns len; the file position is
 * neither used nor moved.  A deadline, cancel or interrupt that comes while
 * a transfer waits for a helper fails the call (ETIMEDOUT, ECANCELED,
 * EINTR) with the transfers before it written; one that comes while a
 * transfer runs lets it finish, and a cancel then stops the call before
 * the next (ECANCELED, a prefix written).  Errors: those of pwrite(2)
 * (ESPIPE on a pipe or socket, EINVAL for a negative offset, ENOSPC,
 * EFBIG), ETIMEDOUT, ECANCELED, EINTR; EAGAIN as weft_pread.
 */
WEFT_EXPORT ssize_t weft_pwrite(int fd, const void *buf, size_t len, off_t offset, int64_t deadline);

/*
 * Accepts a connection on the listening socket fd, as accept4(2); the new fd
 * is non-blocking and close-on-exec.  A TCP one has TCP_NODELAY set, as Go's
 * connections have: a small write goes out at once instead of waiting for
 * the peer's ACK of the last one (Nagle's algorithm).  To keep Nagle's
 * algorithm, set the option back to 0 after the call: setsockopt(fd,
 * IPPROTO_TCP, TCP_NODELAY, &zero, sizeof zero).  Setting it is best
 * effort: sockets that refuse it (Unix, vsock, SCTP ones) are left as they
 * are, and the call never fails or closes the connection for it.  When
 * the process or system is out of fds or memory (EMFILE, ENFILE, ENOBUFS,
 * ENOMEM) it backs off (1 ms, doubling to 100 ms; the coroutine sleeps,
 * the worker serves others) and retries until the deadline, which then
 * fails with that errno.
 * ECONNABORTED is retried.  Errors: those of accept4(2), ETIMEDOUT, ECANCELED.
 */
WEFT_EXPORT int weft_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int64_t deadline);

/*
 * Connects the socket fd, as connect(2), waiting for the handshake.
 * Errors: those of connect(2) (ECONNREFUSED, ...), ETIMEDOUT (the connect is
 * then still in progress: close the socket), ECANCELED.
 */
WEFT_EXPORT int weft_connect(int fd, const struct sockaddr *addr, socklen_t addrlen, int64_t deadline);

/*
 * Resolving, dialing and listening by name (TCP).  host is a name or a
 * numeric IPv4 or IPv6 address, service a port number or a service name
 * (/etc/services).  Numeric hosts and ports are resolved inline, without
 * blocking; names with getaddrinfo(3) on the offload pool (see
 * weft_offload; from a plain thread, by a direct getaddrinfo).  Names
 * under the reserved .invalid domain fail at once (RFC 6761).  A lookup
 * that the caller stops waiting for (deadline, weft_cancel) finishes on its
 * own, and weft_shutdown waits for it.
 *
 * Resolution failures, as errno values:
 *   ENOENT   no such host or service (EAI_NONAME, EAI_SERVICE, EAI_NODATA,
 *            EAI_ADDRFAMILY);
 *   EAGAIN   a temporary failure, e.g. no name server answered (EAI_AGAIN),
 *            or no helper thread could be created;
 *   ENOMEM   EAI_MEMORY;
 *   EINVAL   EAI_BADFLAGS, EAI_FAMILY, EAI_SOCKTYPE;
 *   EIO      EAI_FAIL and any other;
 *   and EAI_SYSTEM's errno.
 */

/*
 * Connects to host:service and returns the connected socket: non-blocking,
 * close-on-exec, ready for weft's calls (close it with weft_close).  Every
 * address of host is a candidate, tried with Happy Eyeballs (RFC 8305):
 * in getaddrinfo's order with alternating address families, a new attempt
 * every 250 ms while earlier ones are still connecting (at once when every
 * earlier one has failed); the first to connect wins, the others are
 * closed.  deadline covers the lookup and the attempts; a deadline already
 * past still tries what needs no waiting (a numeric address's first
 * attempt, checked once), then fails with ETIMEDOUT.  However it ends,
 * every attempt's socket but the winner's is closed before it returns.
 * The socket has TCP_NODELAY set, as weft_accept's have (which says how to
 * keep Nagle's algorithm).  Errors: EPERM outside a coroutine; EINVAL for a
 * NULL host or service; the resolution failures above; ETIMEDOUT;
 * ECANCELED; when every attempt failed, the errno of the one that failed
 * last (ECONNREFUSED, ENETUNREACH, ...); ENOMEM, EMFILE.
 */
WEFT_EXPORT int weft_dial(const char *host, const char *service, int64_t deadline);

/* weft_listen's flags. */
enum {
	WEFT_REUSEPORT = 1	/* SO_REUSEPORT: several listeners on one port
				 * (one per process or per worker, all with this
				 * flag), the kernel balancing connections */
};

/*
 * Returns a listening TCP socket bound to host:service with backlog
 * (listen(2)'s: capped by net.core.somaxconn): non-blocking, close-on-exec,
 * SO_REUSEADDR (a restarted server rebinds at once), for weft_accept
 * (whose connections have TCP_NODELAY set).
 * host NULL is any address, dual-stack: IPv6's "::" with IPV6_V6ONLY off,
 * which IPv4 clients reach too, or IPv4's 0.0.0.0 where the system has no
 * IPv6; "::" is dual-stack too.  A name binds the first of its addresses
 * that can be bound.  Service "0" picks a free port (getsockname(2) says
 * which).  It never waits but for a name's lookup, and works from plain
 * threads too (with or without the runtime); in a coroutine a name is
 * looked up on the offload pool.
 * Errors: EINVAL for a NULL service, a negative backlog or an unknown
 * flag; the resolution failures above; ECANCELED (a cancelled coroutine
 * that needs a lookup); those of socket(2), bind(2) and listen(2)
 * (EADDRINUSE, EACCES, ...).
 */
WEFT_EXPORT int weft_listen(const char *host, const char *service, int backlog, int flags);

/*
 * Closes fd: every coroutine waiting on it returns ECANCELED, weft_close
 * waits for the calls in flight on fd to return, takes fd out of its loop,
 * then calls close(2) and returns its result.  A later fd with the same
 * number starts clean.  A call started on fd while weft_close runs gets
 * ECANCELED or runs before the close, or, started as its close(2) runs,
 * waits for it; after it, fd is just a number.
 * Errors: EPERM outside a coroutine; those of close(2) but EINTR, after
 * which Linux has closed fd all the same (a retry could close the number's
 * next owner): weft_close returns 0 then.
 */
WEFT_EXPORT int weft_close(int fd);

/*
 * Makes weft forget fd without closing it, so that the caller owns it again
 * (to hand it to a library that close(2)s it, or to block on it): every
 * coroutine waiting on fd returns ECANCELED, weft_release waits for the
 * calls in flight on fd to return, takes fd out of its loop, and restores
 * the blocking mode fd had before weft first registered it (O_NONBLOCK
 * cleared again if weft set it).  Afterwards close(2) of fd is fine, and a
 * weft call on fd (or on a new fd with its number) registers it anew.
 * Errors: EPERM outside a coroutine; EBADF if fd is not open or weft has
 * not registered it (no weft call ran on it since it was last closed or
 * released).
 */
WEFT_EXPORT int weft_release(int fd);

/*
 * Vectored, socket, datagram and message I/O.  The same conventions as
 * weft_read and weft_write: deadlines, EPERM outside a coroutine (before any
 * argument check), ECANCELED, any number of waiters per direction, writes
 * that never raise SIGPIPE (a closed peer is EPIPE).  flags are those of the syscall named and pass
 * through (MSG_PEEK, MSG_TRUNC, MSG_CMSG_CLOEXEC, MSG_OOB, ...); the sends
 * add MSG_NOSIGNAL.
 */

/*
 * Like readv(2): returns at least one byte as soon as some is there, 0 at
 * end of file.  Errors: those of readv(2) (EINVAL for iovcnt outside
 * 0..IOV_MAX or lengths summing above SSIZE_MAX, EFAULT for a NULL iov),
 * ETIMEDOUT, ECANCELED.
 */
WEFT_EXPORT ssize_t weft_readv(int fd, const struct iovec *iov, int iovcnt, int64_t deadline);

/*
 * Writes every byte of the iovcnt buffers, in order, waiting as needed, and
 * returns their total, like weft_write (a partial write resumes where it
 * stopped, within an iovec if need be; iov is not modified).  On an error
 * or the deadline, a prefix may have been written.  Errors: as weft_readv,
 * and those of writev(2) (on sockets, sendmsg(2)).
 */
WEFT_EXPORT ssize_t weft_writev(int fd, const struct iovec *iov, int iovcnt, int64_t deadline);

/*
 * Like recv(2): at least one byte as soon as some is there (a datagram
 * socket: one datagram, truncated to len), 0 at end of stream.  With
 * MSG_PEEK the data stays queued.  Errors: those of recv(2), ETIMEDOUT,
 * ECANCELED.
 */
WEFT_EXPORT ssize_t weft_recv(int fd, void *buf, size_t len, int flags, int64_t deadline);

/*
 * Sends all len bytes on the socket fd, waiting as needed, and returns len,
 * like weft_write; MSG_NOSIGNAL is always added.  On a datagram socket each
 * attempt is a datagram: use weft_sendto for one.  Errors: those of
 * send(2) (ENOTSOCK), ETIMEDOUT, ECANCELED; a prefix may have been sent.
 */
WEFT_EXPORT ssize_t weft_send(int fd, const void *buf, size_t len, int flags, int64_t deadline);

/*
 * Receives one datagram, as recvfrom(2): its length (truncated to len, with
 * MSG_TRUNC its real length), the sender in *from and *fromlen when from is
 * not NULL.  On a stream socket it is weft_recv.  Errors: those of
 * recvfrom(2), ETIMEDOUT, ECANCELED.
 */
WEFT_EXPORT ssize_t weft_recvfrom(int fd, void *buf, size_t len, int flags,
				  struct sockaddr *from, socklen_t *fromlen, int64_t deadline);

/*
 * Sends one datagram of len bytes (to may be NULL on a connected socket), as
 * sendto(2), waiting for room; returns len.  On a stream socket it returns
 * what one sendto(2) took, which may be less: use weft_send to send all.
 * Errors: those of sendto(2) (EMSGSIZE, ...), ETIMEDOUT, ECANCELED.
 */
WEFT_EXPORT ssize_t weft_sendto(int fd, const void *buf, size_t len, int flags,
				const struct sockaddr *to, socklen_t tolen, int64_t deadline);

/*
 * Receives one message, as recvmsg(2), ancillary data included (SCM_RIGHTS
 * fds arrive open and blocking; MSG_CMSG_CLOEXEC makes them close-on-exec).
 * msg's value-result fields are as recvmsg(2) leaves them after the
 * successful attempt.  Errors: those of recvmsg(2) (EFAULT for a NULL msg),
 * ETIMEDOUT, ECANCELED.
 */
WEFT_EXPORT ssize_t weft_recvmsg(int fd, struct msghdr *msg, int flags, int64_t deadline);

/*
 * Sends one message, as sendmsg(2), ancillary data included (SCM_RIGHTS
 * works), waiting for room; returns the bytes sent.  A datagram goes whole;
 * on a stream socket one sendmsg(2) may take less than all (the ancillary
 * data goes with the first byte).  Errors: those of sendmsg(2) (EFAULT for
 * a NULL msg), ETIMEDOUT, ECANCELED.
 */
WEFT_EXPORT ssize_t weft_sendmsg(int fd, const struct msghdr *msg, int flags, int64_t deadline);

/*
 * Copies count bytes of in_fd to out_fd (a socket, usually) with
 * sendfile(2), waiting for room in out_fd as needed, and returns count, or
 * fewer only when in_fd ends first.  offset as sendfile(2): NULL reads from
 * in_fd's file position and advances it; otherwise reads from *offset,
 * leaves the position alone and sets *offset past the last byte sent (also
 * on an error).  With a NULL offset, under WEFT_IO=uring the call holds
 * in_fd's position turn (weft_read): it is atomic with weft's other calls
 * at in_fd's position; under WEFT_IO=epoll it is as sendfile(2), which
 * takes no position lock, and may read the bytes a weft_read at in_fd's
 * position reads meanwhile.  in_fd is not waited on: a regular file (or another fd
 * sendfile(2) reads without blocking).  Never raises SIGPIPE (the workers
 * block it): a closed peer is EPIPE.  Errors: those of sendfile(2)
 * (EBADF, EINVAL for count above SSIZE_MAX), ETIMEDOUT, ECANCELED; some
 * bytes may have been sent.
 */
WEFT_EXPORT ssize_t weft_sendfile(int out_fd, int in_fd, off_t *offset, size_t count,
				  int64_t deadline);

/*
 * Parks the calling coroutine until deadline (absolute weft_now() ns) and
 * returns 0, never earlier (weft_now() >= deadline on return).  A deadline
 * already past returns 0 at once; -1 sleeps until cancelled.
 * Errors: EPERM outside a coroutine; ECANCELED; ENOMEM (timer heap).
 */
WEFT_EXPORT int weft_sleep(int64_t deadline);

/* ----------------------------------------------------- blocking offload */

/*
 * Runs fn(arg) on a helper thread and parks the calling coroutine until it
 * returns; the worker runs other coroutines meanwhile.  For calls that block
 * their thread: getaddrinfo(3), file reads, a legacy library's sleep(3).
 * fn runs on a plain thread, so the weft calls it makes behave as from a
 * plain thread (joins and channel operations block that thread).
 * The helpers are created on demand, up to $WEFT_BLOCKING_THREADS (1..4096,
 * default 64); past that, calls queue in order.  A helper idle for 10 s
 * exits.  Called from a plain thread, weft_offload just calls fn(arg).
 * Cancellation: weft_cancel does not interrupt fn; weft_offload still waits
 * for fn to return (so arg stays valid), then returns -1/ECANCELED.  A
 * coroutine already cancelled gets ECANCELED at once, and fn does not run.
 * Errors: EINVAL if fn is NULL; EAGAIN if no helper thread exists and none
 * can be created (fn did not run); ECANCELED as above.
 */
WEFT_EXPORT int weft_offload(void (*fn)(void *), void *arg);

/* ------------------------------------------------------------------ stats */

/* Counters of one worker (or their sums).  Each only grows while the
 * runtime runs; they start at 0 at weft_init. */
typedef struct weft_worker_stats {
	uint64_t spawned;		/* coroutines created by code on this worker */
	uint64_t finished;		/* coroutines that returned on this worker */
	uint64_t dispatches;		/* switches into a coroutine */
	uint64_t steals;		/* coroutines taken from other workers */
	uint64_t steal_attempts;	/* victims probed */
	uint64_t parks;			/* coroutines that switched out to wait */
	uint64_t wakeups;		/* waits ended by a wake this worker made */
	uint64_t sleeps;		/* times it ran out of work and waited in
					 * epoll_wait (at once back if events were pending) */
	uint64_t polls;			/* its harvests of the fds' readiness */
	uint64_t ready_events;		/* fd events those harvests returned */
	uint64_t timers_fired;		/* deadlines that expired in its timer heap */
	uint64_t lifo_hits;		/* taken from its own runnext slot or deque */
	uint64_t inject_pops;		/* from the injection queue (plain threads) */
	uint64_t ready_pops;		/* from its queue of I/O-woken coroutines */
	uint64_t stack_cache_hits;	/* spawns served by its stack cache */
	uint64_t stack_cache_misses;	/* spawns that went to the depot or jemalloc */
	uint64_t stalls;		/* stalls reported (WEFT_STALL_MS) */
} weft_worker_stats;

#define WEFT_STATS_VERSION 6

/*
 * A latency histogram (version 3), in nanoseconds.  Log-bucketed
 * (HDR-style): bucket i < 8 holds the value i; above, every power of two
 * is cut into 8 equal buckets, so a bucket is at most 12.5% of its lower
 * bound wide and any quantile read from it is within 12.5% of the truth.
 * Bucket i holds the values in [weft_hist_bound(i - 1), weft_hist_bound(i))
 * (from 0 for i = 0); the last also holds everything past it (about 9
 * minutes).  The same bounds for every histogram.
 */
#define WEFT_HIST_BUCKETS 304
typedef struct weft_hist {
	uint64_t count;				/* values recorded: the buckets' sum */
	uint64_t sum_ns;			/* their sum */
	uint64_t buckets[WEFT_HIST_BUCKETS];	/* values per bucket */
} weft_hist;

/* Why a coroutine is parked (weft_stats.parked_by, version 5): waiting for
 * an fd's readiness, a deadline alone (weft_sleep), a synchronization
 * object (mutex, condition, semaphore, rwlock, channel, select, once,
 * group, wait queue), a coroutine's end (weft_join), an offloaded call. */
enum {
	WEFT_PARK_IO,
	WEFT_PARK_TIMER,
	WEFT_PARK_SYNC,
	WEFT_PARK_JOIN,
	WEFT_PARK_OFFLOAD,
	WEFT_PARK_CAUSES	/* fixed: a new cause would be a new field */
};

/* The scheduler's view of one worker (version 3): see weft_stats. */
typedef struct weft_worker_sched {
	uint64_t runnable;		/* coroutines queued on it now */
	weft_hist delay;		/* scheduling delay, as weft_stats.sched_delay */
	weft_hist turn;			/* turn time, as weft_stats.turn_time */
} weft_worker_sched;

/*
 * A snapshot of the runtime's counters.  ABI growth: set `size` to
 * sizeof(weft_stats) before the call; a later library fills only what fits
 * in that size and sets `version`; new fields are only ever appended.
 */
typedef struct weft_stats {
	uint32_t size;			/* in: sizeof(weft_stats) */
	uint32_t version;		/* out: WEFT_STATS_VERSION */
	weft_worker_stats *per_worker;	/* in: NULL, or room for per_worker_len */
	unsigned per_worker_len;	/* in: entries at per_worker */
	unsigned workers;		/* out: the number of workers (entries filled:
					 * the smaller of the two) */
	weft_worker_stats total;	/* out: sums over the workers; spawned and
					 * wakeups include plain threads' */
	uint64_t live;			/* out: coroutines spawned and not finished */
	uint64_t stacks_allocated;	/* out: stacks held from jemalloc (in use or cached) */
	uint64_t offload_calls;		/* out: weft_offload calls run by helpers */
	unsigned blocking_threads;	/* out: helper threads alive now */
	unsigned blocking_threads_max;	/* out: their limit */
	/* version 2 */
	uint64_t monitor_wakeups;	/* out: times the monitor thread woke: its
					 * samples, kicks and harvests (its cost) */
	/* version 3: the scheduler's latencies and gauges */
	weft_worker_sched *per_worker_sched;	/* in: NULL, or room for per_worker_len */
	unsigned sched_sample;		/* out: one runnable period in this many is
					 * timed ($WEFT_SCHED_SAMPLE; 1: all) */
	weft_hist sched_delay;		/* out: from a coroutine becoming runnable
					 * (spawned, woken by anything, yielding) to
					 * its dispatch, over every worker (the timed
					 * periods: one in sched_sample) */
	weft_hist turn_time;		/* out: from a timed dispatch to the
					 * coroutine's switch-out (park, yield, exit) */
	uint64_t runnable;		/* out: coroutines queued on the workers now
					 * (not the injection queue: inject_queued) */
	uint64_t inject_queued;		/* out: queued by plain threads, not yet taken */
	uint64_t parked;		/* out: live coroutines neither running nor
					 * queued: parked, or between a wake and its
					 * queueing (not split by cause) */
	uint64_t stack_bytes;		/* out: the bytes of the stacks_allocated */
	uint64_t registered_fds;	/* out: fds in the runtime's poller (not
					 * regular files, which are never polled) */
	/* version 4 */
	int io_backend;			/* out: WEFT_IO_EPOLL or WEFT_IO_URING */
	/* version 5 */
	uint64_t parked_by[WEFT_PARK_CAUSES];	/* out: coroutines parked now, by
					 * cause (WEFT_PARK_IO, ...): switched out
					 * to wait (the switch-out complete) and
					 * not yet woken; one still on its way
					 * out, or woken and not yet queued, is
					 * not counted (parked counts those) */
	uint64_t stack_bytes_live;	/* out: the bytes of the stacks of live
					 * coroutines (of stack_bytes; the rest is
					 * the pool's cache) */
	/* version 6: the workers' io_uring rings, summed over them (all 0
	 * under WEFT_IO=epoll) */
	uint64_t ring_sqes;		/* out: SQEs submitted: transfers (files;
					 * sockets under WEFT_URING_SOCKETS) and
					 * their cancels */
	uint64_t ring_enters;		/* out: submissions (io_uring_enter calls) */
	uint64_t ring_cqes;		/* out: CQEs reaped (a cancel's own too) */
	uint64_t ring_cancels;		/* out: transfers stopped with
					 * IORING_OP_ASYNC_CANCEL (a deadline,
					 * cancel, interrupt or close that ended
					 * a transfer's wait, or no room for its
					 * deadline's timer), one each: a cancel
					 * sent again counts in ring_sqes only */
	int poller;			/* out: WEFT_POLLER_SHARED or WEFT_POLLER_WORKER */
} weft_stats;

/*
 * Fills *out (see weft_stats).  From any thread while the runtime runs (not
 * racing weft_shutdown on another thread).
 * Counters are read without stopping the workers: each is exact, the sums
 * are a moment's approximation, except that finished <= spawned always
 * (live never underflows).  $WEFT_STATS=1 prints the same table on stderr
 * at weft_shutdown, with p50, p99 and p99.9 of each histogram.  A caller
 * whose size covers version 3 may pass per_worker_sched.  Errors: EINVAL
 * if out is NULL or out->size is smaller than the version-1 struct; ESRCH
 * if the runtime is not running.
 */
WEFT_EXPORT int weft_stats_get(weft_stats *out);

/*
 * The upper bound (exclusive, ns) of bucket i of a weft_hist; UINT64_MAX
 * for i >= WEFT_HIST_BUCKETS - 1 (the last bucket has none).
 */
WEFT_EXPORT uint64_t weft_hist_bound(unsigned i);

/*
 * The q-quantile (0 <= q <= 1) of h, in ns: the upper bound of the bucket
 * that holds the value of rank ceil(q * count) (rank 1 for q = 0), so the
 * true quantile is below it by at most 12.5%.  0 for an empty histogram.
 * The histogram may come from weft_stats (a snapshot; no runtime needed).
 * Errors: UINT64_MAX with errno EINVAL if h is NULL or q is not in [0, 1].
 */
WEFT_EXPORT uint64_t weft_stats_quantile(const weft_hist *h, double q);

/*
 * Formats the snapshot st (filled by weft_stats_get with st->size =
 * sizeof(weft_stats)) in the Prometheus text exposition format (version
 * 0.0.4) into buf, NUL-terminated, as snprintf does: returns the length of
 * the whole text (without the NUL), which is more than len - 1 when it was
 * cut; call again with more room then.  The metrics, all prefixed weft_:
 * the histograms sched_delay_seconds and turn_seconds (cumulative _bucket
 * series from 1 us up, one per histogram bucket, then le="+Inf", _sum and
 * _count), the gauges (sched_sample, workers, live_coroutines,
 * runnable_coroutines, inject_queued_coroutines, parked_coroutines,
 * parked_by_cause_coroutines{cause="io|timer|sync|join|offload"}, stacks,
 * stack_bytes, stack_bytes_live, registered_fds, blocking_threads), the
 * info gauge poller_info{poller="shared|worker"} (always 1),
 * every counter of weft_worker_stats summed, as <name>_total, and the
 * counters offload_calls_total, monitor_wakeups_total and the rings'
 * ring_sqes_total, ring_enters_total, ring_cqes_total and
 * ring_cancels_total.  If
 * st->per_worker_sched was given, the per-worker families follow, each
 * series labelled worker="N": worker_sched_delay_seconds and
 * worker_turn_seconds (histograms, as above) and
 * worker_runnable_coroutines.  Needs no runtime.  Errors: 0
 * with errno EINVAL if st is NULL or older than this header's
 * weft_stats, or buf is NULL with len > 0.
 */
WEFT_EXPORT size_t weft_stats_prometheus(const weft_stats *st, char *buf, size_t len);

/*
 * The current scheduling delay, in ns, for shedding load (CoDel's
 * estimator): over the workers, the largest of the least delay each saw in
 * its last whole interval of 100 ms.  The least, not a high quantile: a
 * burst that one interval drains is no standing queue, while a minimum
 * above the target means every coroutine in that interval waited at least
 * that long.  It lags by one interval at most; a worker that timed nothing
 * in the last two intervals counts as 0 (idle).  Lock-free, a few loads
 * per worker; 0 when the runtime is not running.
 */
WEFT_EXPORT int64_t weft_sched_delay(void);

/* ------------------------------------------------------ synchronisation */

/*
 * Mutexes, condition variables, wait groups, semaphores, reader-writer
 * locks, once and channels, for coroutines on any workers and for plain
 * threads (an offloaded function, a thread of the program's own) alike.
 * Waiting parks a coroutine (its worker runs others) and blocks a plain
 * thread on a futex; none of them spins an OS thread, and their uncontended
 * paths make no syscall (those of mutexes, semaphores, rwlocks and once
 * are one atomic operation).  Creation errors: ENOMEM.  A NULL object is EINVAL.  A lock is held by the coroutine that took it, wherever
 * it runs next (it may unlock on another worker), or by the plain thread.
 *
 * Coroutine-only rules that remain: weft_sleep and the I/O calls above
 * (EPERM elsewhere: they wait on a worker's event loop and timer heap,
 * which a plain thread has not), and weft_cancel, which reaches only
 * coroutines (a plain thread's wait ends by its deadline or its waker).
 *
 * Object lifetime (POSIX's rule for pthread objects, for every weft object):
 * once every call on an object has returned to its caller, or a wait on it
 * has returned, the object may be freed at once, by anyone, with its _free
 * call.  So "wait, then free" is safe: weft_wg_wait then weft_wg_free; a
 * weft_chan_recv (or a select) on a one-shot reply channel then
 * weft_chan_free, while the sender's call may still be on its way out; the
 * last user's weft_mutex_unlock then weft_mutex_free; a weft_cond_wait woken
 * by a broadcast then weft_cond_free; weft_group_wait then weft_group_free,
 * while the last member is still on its way out.  What stays undefined is freeing an
 * object while a call on it has not returned: a waiter still parked on it,
 * or a call that another thread may still make.
 *
 * To keep that rule, a call said below never to block (an unlock, a
 * release, a signal or broadcast, a close, weft_wg_add) may wait a moment
 * in one case: when it finds a waiter whose deadline or cancel has just
 * ended its wait, it waits for that waiter to leave the object (a few
 * instructions: retake the object's internal lock, unlink, release it).  A
 * coroutine yields meanwhile, a plain thread spins and then yields its
 * CPU.  That waiter needs nothing the caller holds, so this cannot
 * deadlock; but none of these calls is async-signal-safe.
 */

typedef struct weft_mutex weft_mutex;
WEFT_EXPORT weft_mutex *weft_mutex_new(void);
WEFT_EXPORT void weft_mutex_free(weft_mutex *m);

/*
 * Locks m, waiting while another coroutine or thread holds it.  Waiters
 * queue in FIFO order.  While waits are short a running locker may take a
 * just-released mutex ahead of the woken waiter (as Go's sync.Mutex does);
 * once a waiter has waited 1 ms, unlock hands the mutex to the oldest
 * waiter and nobody barges until the queue moves fast again: no waiter
 * starves.  From coroutines (which park) and plain threads (which block).
 * Errors: EDEADLK if the caller already holds m; ECANCELED.
 */
WEFT_EXPORT int weft_mutex_lock(weft_mutex *m);
/* Locks m if it is free (and not being handed to a waiter); else EBUSY. */
WEFT_EXPORT int weft_mutex_trylock(weft_mutex *m);
/* Unlocks m.  Errors: EPERM if the caller (coroutine or plain thread) does
 * not hold it. */
WEFT_EXPORT int weft_mutex_unlock(weft_mutex *m);

typedef struct weft_cond weft_cond;
WEFT_EXPORT weft_cond *weft_cond_new(void);
WEFT_EXPORT void weft_cond_free(weft_cond *c);

/*
 * Releases m (which the caller must hold: else EPERM), waits for a signal or
 * broadcast on c or for the deadline, and locks m again before returning,
 * also on ETIMEDOUT and ECANCELED.  Wake-ups may be spurious (a signal that
 * raced a deadline): check the predicate in a loop.  From coroutines and
 * plain threads.
 */
WEFT_EXPORT int weft_cond_wait(weft_cond *c, weft_mutex *m, int64_t deadline);
/* Wakes the oldest waiter / every waiter of c.  From any thread; never blocks. */
WEFT_EXPORT int weft_cond_signal(weft_cond *c);
WEFT_EXPORT int weft_cond_broadcast(weft_cond *c);

/* Go's sync.WaitGroup. */
typedef struct weft_wg weft_wg;
WEFT_EXPORT weft_wg *weft_wg_new(void);
WEFT_EXPORT void weft_wg_free(weft_wg *wg);
/* Adds delta to the counter; at 0 every waiter is released.  A counter that
 * would go negative is EINVAL and is left unchanged.  From any thread. */
WEFT_EXPORT int weft_wg_add(weft_wg *wg, int delta);
WEFT_EXPORT int weft_wg_done(weft_wg *wg);	/* weft_wg_add(wg, -1) */
/* Waits until the counter is 0 (at once if it is).  From a coroutine or a
 * plain thread (which blocks).  Errors: ETIMEDOUT; ECANCELED. */
WEFT_EXPORT int weft_wg_wait(weft_wg *wg, int64_t deadline);

/*
 * Counting semaphore (Tokio's Semaphore, POSIX's sem_t), FIFO with no
 * barging: a release while someone waits hands the permit to the oldest
 * waiter, never to a newcomer, so no waiter starves.  Acquire works from
 * coroutines (which park) and plain threads (which block); tryacquire and
 * release from any thread, never blocking.  value and the count are at most
 * UINT_MAX.  Uncontended acquire and release are one atomic operation each.
 */
typedef struct weft_sem weft_sem;
WEFT_EXPORT weft_sem *weft_sem_new(unsigned value);
WEFT_EXPORT void weft_sem_free(weft_sem *s);
/* Takes a permit, waiting for one until the deadline.  Errors: ETIMEDOUT;
 * ECANCELED (no permit is taken). */
WEFT_EXPORT int weft_sem_acquire(weft_sem *s, int64_t deadline);
/* Takes a permit if one is free (none is while anyone waits); else EAGAIN. */
WEFT_EXPORT int weft_sem_tryacquire(weft_sem *s);
/* Gives a permit back (to the oldest waiter, if any).  Errors: EOVERFLOW if
 * the count is UINT_MAX already. */
WEFT_EXPORT int weft_sem_release(weft_sem *s);

/*
 * Reader-writer lock, writer-preferring: any number of readers or one
 * writer hold it; a waiting writer stops new readers (a stream of readers
 * cannot starve it), and a writer's unlock lets in every reader that queued
 * meanwhile before the next writer (nor can writers starve readers).
 * Waiters queue in FIFO order per kind.  From coroutines (which park) and
 * plain threads (which block).
 *
 * Ownership: the write hold belongs to the coroutine (or plain thread) that
 * took it.  Read holds are counted, not owned (as Go's RWMutex): an unlock
 * by a caller that is not the writer gives back one read hold, whoever took
 * it.  So a reader may not take a second read hold while a writer may be
 * waiting (it would wait behind the writer, which waits for it), and a
 * reader that calls wrlock deadlocks; neither is detected.
 * Errors: rdlock and wrlock: EDEADLK if the caller holds the write lock;
 * ETIMEDOUT; ECANCELED.  unlock: EPERM if the lock is not held at all, or is
 * write-held by another caller.
 */
typedef struct weft_rwlock weft_rwlock;
WEFT_EXPORT weft_rwlock *weft_rwlock_new(void);
WEFT_EXPORT void weft_rwlock_free(weft_rwlock *l);
WEFT_EXPORT int weft_rwlock_rdlock(weft_rwlock *l, int64_t deadline);
WEFT_EXPORT int weft_rwlock_wrlock(weft_rwlock *l, int64_t deadline);
WEFT_EXPORT int weft_rwlock_unlock(weft_rwlock *l);

/*
 * One-time initialisation (pthread_once, Go's sync.Once):
 *
 *     static weft_once once = WEFT_ONCE_INIT;
 *     weft_once_run(&once, init_tables, NULL);
 *
 * The first caller runs fn(arg); every other caller, concurrent or later,
 * returns only after fn has returned, and fn's writes are visible to it.
 * Concurrent callers park (coroutines) or block (plain threads).  fn runs
 * on the first caller's stack and must not call weft_once_run on the same
 * object (it would wait for itself).  Errors: EINVAL for a NULL o or fn;
 * ECANCELED for a cancelled caller while fn has not returned (a cancelled
 * first caller does not run fn; a cancelled runner's fn still completes).
 * A weft_once needs no free; it must not be copied while in use.
 */
typedef struct weft_once {
	unsigned state;		/* private */
} weft_once;
#define WEFT_ONCE_INIT { 0 }
WEFT_EXPORT int weft_once_run(weft_once *o, void (*fn)(void *), void *arg);

/*
 * Channels of elements of elem_size bytes (0 is allowed: signals only).
 * capacity 0 is a rendezvous channel (Go's unbuffered): a send completes when
 * a receiver takes the element.  Elements are copied in and out; FIFO per
 * channel.  Send and receive work from coroutines and from plain threads
 * (which block).  Close as in Go: senders get EPIPE, receivers get what is
 * buffered and then EPIPE.  Errors: EINVAL (NULL elem with elem_size > 0, or
 * elem_size * capacity overflows), ETIMEDOUT, ECANCELED, EPIPE.
 */
typedef struct weft_chan weft_chan;
WEFT_EXPORT weft_chan *weft_chan_new(size_t elem_size, size_t capacity);
WEFT_EXPORT void weft_chan_free(weft_chan *ch);
WEFT_EXPORT int weft_chan_send(weft_chan *ch, const void *elem, int64_t deadline);
WEFT_EXPORT int weft_chan_recv(weft_chan *ch, void *elem, int64_t deadline);
/* Closes ch and wakes everyone parked on it with EPIPE.  From any thread.
 * Closing twice is EPIPE. */
WEFT_EXPORT int weft_chan_close(weft_chan *ch);

/*
 * Select: waits until one of n (1..WEFT_SELECT_MAX) cases can happen, does
 * exactly that one, and returns its index; the others are not performed.
 * When several are ready, one is picked at random (no case starves).  A
 * case is a channel operation (WEFT_CHAN_SEND, WEFT_CHAN_RECV) or an fd's
 * readiness (WEFT_SELECT_READABLE, WEFT_SELECT_WRITABLE), so "the socket
 * is readable or the shutdown channel has a message" is one wait:
 *
 *     weft_chan_case cs[] = {
 *         { .op = WEFT_SELECT_READABLE, .fd = sock },
 *         { .ch = shutdown, .op = WEFT_CHAN_RECV, .elem = &msg },
 *     };
 *     int i = weft_chan_select(cs, 2, deadline);
 *
 * The winning case's err is 0, or EPIPE when its channel is closed (a
 * send, or a receive with nothing left to drain), or ECANCELED when its fd
 * was weft_close'd or weft_release'd while the select waited.  A channel
 * may appear in several cases.  Errors: EINVAL (bad case, n out of range),
 * ETIMEDOUT, ECANCELED (the caller was cancelled), EINTR (interrupted),
 * and for fd cases those below.  From coroutines and plain threads (fd
 * cases: coroutines only).
 *
 * An fd case (ch and elem NULL, fd set) is ready when fd is, as poll(2)
 * says (a hang-up or an error is ready for both): exact, as weft_wait's
 * answer, at the moment the select returns; performing it does nothing
 * (the caller then reads or writes: another coroutine reading the same fd
 * may have taken the data by then, and the read then waits).  Readiness
 * the select saw but did not report (it picked another case) is left for
 * the fd's next waiter.  The fd is registered as by any I/O call below (it
 * becomes non-blocking) and must be closed with weft_close.  Other
 * coroutines may wait on the same fd and direction meanwhile (a reader,
 * weft_wait, another select): they queue, as for the I/O calls.  A select
 * has at most one READABLE and one WRITABLE case (EINVAL for a second of
 * either); the two may name one fd.  fd errors: EPERM from a plain thread;
 * EBADF when fd is not open (or negative); ECANCELED when it is being
 * weft_close'd as the select starts; ENOMEM (the fd table).  A plain
 * close(2) of an fd a select waits on is undefined, as for every I/O call.
 *
 * ABI: the op values and the fd field were appended; fd sits where a
 * 64-bit ABI had padding (the struct's size is unchanged there) and is
 * read only for fd cases.
 */
enum { WEFT_CHAN_SEND = 1, WEFT_CHAN_RECV = 2, WEFT_SELECT_MAX = 64 };
enum { WEFT_SELECT_READABLE = 3, WEFT_SELECT_WRITABLE = 4 };
typedef struct weft_chan_case {
	weft_chan *ch;	/* NULL for an fd case */
	int op;		/* WEFT_CHAN_SEND, WEFT_CHAN_RECV, WEFT_SELECT_READABLE or
			 * WEFT_SELECT_WRITABLE */
	void *elem;	/* the element to send, or where to receive one; NULL for an fd case */
	int err;	/* out: 0, EPIPE (a channel) or ECANCELED (an fd) */
	int fd;		/* an fd case's fd */
} weft_chan_case;
WEFT_EXPORT int weft_chan_select(weft_chan_case *cases, size_t n, int64_t deadline);

/* ---------------------------------------------------- coroutine-locals */

/*
 * Coroutine-local storage: what pthread keys are to threads.  Use it instead
 * of __thread for anything that must follow a coroutine (a request id, a
 * trace span, an arena): coroutines migrate between worker threads, and the
 * compiler may cache a __thread address across a suspension (see
 * docs/design.md, "errno and thread-locals across suspension").
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
