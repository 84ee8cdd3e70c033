/* SPDX-License-Identifier: MIT */
/*
 * hook.h — what the files of libweft-hook share: the real functions, the
 * per-coroutine depth that lets weft's own calls through, the fd state
 * table, and the one wait that every blocking call on a hooked fd makes.
 *
 * Only weft's public API is used.  errno is read through weft's guard
 * (WEFT_ERRNO_GUARD), since a hook may resume on another worker thread after
 * it parked.
 */
#ifndef WEFT_HOOK_H
#define WEFT_HOOK_H

#define WEFT_ERRNO_GUARD
#include "weft.h"

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#define HOOK_EXPORT __attribute__((visibility("default")))

/* libweft's weft_close with op(fd, arg) in place of its close(2) (lib/io.h,
 * where it is defined): close, dup2 and dup3 of an fd weft may have
 * registered, from a coroutine. */
typedef int weft__io_op(int fd, void *arg);
int weft__io_replace(int fd, weft__io_op *op, void *arg);

/* ------------------------------------------------------ the real functions */

struct weft__hook_real {
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*socket)(int, int, int);
	int (*socketpair)(int, int, int, int[2]);
	int (*pipe)(int[2]);
	int (*pipe2)(int[2], int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*close)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	unsigned (*sleep)(unsigned);
	int (*usleep)(useconds_t);
	int (*nanosleep)(const struct timespec *, struct timespec *);
	int (*clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	struct hostent *(*gethostbyname)(const char *);
	int (*gethostbyname_r)(const char *, struct hostent *, char *, size_t,
			       struct hostent **, int *);
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
};

extern struct weft__hook_real weft__hook_real;

/* Looks every real function up (dlsym(RTLD_NEXT)); idempotent. */
void weft__hook_resolve(void);

/* The real f, looked up on first use (a call may come before our
 * constructor ran, from another library's). */
#define REAL(f) \
	(__builtin_expect(weft__hook_real.f != NULL, 1) ? weft__hook_real.f \
							: (weft__hook_resolve(), weft__hook_real.f))

/* ------------------------------------------------------------------ depth */

/*
 * Who is calling: HOOK_PASS inside a call the hooks made into weft (weft's
 * own close, fcntl and poll must reach the real ones), HOOK_PLAIN on a
 * thread that runs no coroutine (plain, offload helper, scheduler), inside
 * a signal handler (which must never park or yield) and in a child forked
 * while a runtime ran (which has none), and HOOK_CORO in a
 * coroutine.  The depth is the coroutine's (a weft_key), not
 * the thread's: a hook that parks inside weft leaves its worker to other
 * coroutines, and may resume on another worker.
 */
enum { HOOK_PASS, HOOK_PLAIN, HOOK_CORO };
int weft__hook_mode(void);
/* Raises the calling coroutine's depth: false (errno set) if it cannot. */
bool weft__hook_enter(void);
void weft__hook_leave(void);
/* Whether this process is a child forked while a runtime ran: it has no
 * runtime, and the fd table is the parent's (never used there). */
bool weft__hook_forked(void);

/* ------------------------------------------------------------- signals */

/* Whether the calling thread runs a signal handler installed through the
 * hooked sigaction, signal or their kin (signal.c); async-signal-safe. */
bool weft__hook_in_handler(void);
/* The handlers run on the calling thread so far, for weft__hook_restarts. */
struct weft__hook_sigs {
	unsigned handled;	/* handlers run */
	unsigned norestart;	/* of those, without SA_RESTART */
};
void weft__hook_sigs_now(struct weft__hook_sigs *s);
/* Whether a handler ran on the calling thread since *since. */
bool weft__hook_handled_since(const struct weft__hook_sigs *since);
/* After handlers ran: whether every handler run since *since asked for
 * SA_RESTART, so the blocking call would have restarted; *since becomes
 * now, for the rest of the call. */
bool weft__hook_restarts(struct weft__hook_sigs *since);

/* ------------------------------------------------------------- fd state */

/*
 * An fd the hooks made non-blocking behind the application's back is
 * "tracked": its open file description has a record of the O_NONBLOCK the
 * application believes it has (fdstate.c).  Every other fd is untouched.
 */
struct weft__hook_ofd;

/* The caller's mode (HOOK_PLAIN, HOOK_CORO) when a call on fd must behave
 * as blocking over the non-blocking fd, which is the hooks' work: fd is
 * tracked and believed blocking, and the caller is not weft itself.  Else
 * HOOK_PASS: the real call, untouched.  Untracked fds cost one lookup. */
int weft__hook_blocking(int fd);
/* After a creation call made fd: with take, tracks it (the hooks made it
 * non-blocking), else clears what a number closed behind the hooks' back
 * left.  fd, or -1 (fd closed again) when it cannot be tracked. */
int weft__hook_created(int fd, bool take);
/* Whether a creation call without a non-blocking flag hands its fd to
 * the hooks: in a coroutine only. */
bool weft__hook_takes(int nonblock_flag);
/* fd's record, or NULL when fd is not tracked. */
struct weft__hook_ofd *weft__hook_ofd(int fd);
/* Whether the application believes the description non-blocking. */
bool weft__hook_ofd_nonblock(const struct weft__hook_ofd *o);
void weft__hook_ofd_set_nonblock(struct weft__hook_ofd *o, bool nonblock);
/* fd as tracked, the application believing it blocking: 0, or -1/ENOMEM. */
int weft__hook_fd_track(int fd);
/* After a dup: to shares from's record (or is untracked, like from). */
void weft__hook_fd_share(int from, int to);
/* Forgets fd (before a close): untracks it, bumps its generation, and
 * returns whether the hooks tracked it or registered it in weft
 * (weft_wait): whether weft may have it registered. */
bool weft__hook_fd_forget(int fd);
/* Notes that the hooks are about to weft_wait on fd. */
void weft__hook_fd_registered(int fd);
/* fd's generation: it changes whenever fd is closed through the hooks. */
unsigned weft__hook_fd_gen(int fd);
/* Around fork (pthread_atfork): the table's lock held across it, so that
 * the child's copy is consistent and unlocked; not by a fork in a signal
 * handler (in_handler), whose child must not use the table. */
void weft__hook_fd_fork_prepare(bool in_handler);
void weft__hook_fd_fork_done(bool in_handler, bool child);

/* ------------------------------------------------------------- waiting */

/*
 * A blocking call's wait on one fd, for its whole duration: the direction,
 * and the deadline (absolute weft_now() ns; -1 none) taken from
 * SO_RCVTIMEO (WEFT_IN) or SO_SNDTIMEO (WEFT_OUT) when it first waits.
 */
struct weft__hook_wait {
	int fd;
	int events;
	int mode;
	bool timed;		/* the deadline is known (read, or the caller's) */
	bool exact;		/* not after an EAGAIN: a spurious wake would mislead */
	int64_t since;		/* when the call first had to wait (0: not yet) */
	int64_t deadline;	/* absolute ns, -1 none: once timed */
	struct weft__hook_sigs sigs;	/* a plain thread's handlers when the call began */
};

/* At the start of the call, before its first attempt: a handler that runs
 * from then on ends the call as it would have ended the blocking one. */
void weft__hook_wait_init(struct weft__hook_wait *w, int fd, int events, int mode);
/* Waits until fd is ready for w's direction: 0, or -1 with errno EAGAIN at
 * the deadline, EBADF when fd was closed meanwhile, ECANCELED when the
 * coroutine was cancelled, or another error of weft_wait or poll. */
int weft__hook_wait(struct weft__hook_wait *w);

/* Runs fn(arg) on the offload pool while the coroutine parks; where no
 * helper can be had (EAGAIN: fn did not run) it runs here.  0, or -1 with
 * errno (ECANCELED: fn ran, the caller was cancelled meanwhile; the caller
 * must undo what fn made). */
int weft__hook_offload(void (*fn)(void *), void *arg);

/* poll(2) in a coroutine, with a deadline (absolute ns, -1 none). */
int weft__hook_poll(struct pollfd *fds, nfds_t n, int64_t deadline);

/* ns from a timespec, saturating; the deadline `ns` from now (-1: none). */
int64_t weft__hook_ts_ns(const struct timespec *ts);
int64_t weft__hook_after(int64_t ns);

#endif
