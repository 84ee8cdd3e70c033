/* SPDX-License-Identifier: MIT */
/*
 * fdstate.c — the hooks' per-fd state: which fds they made non-blocking
 * behind the application's back, and the O_NONBLOCK the application
 * believes each has.
 *
 * O_NONBLOCK is a file status flag: it belongs to the open file
 * description, which dup, dup2, dup3 and F_DUPFD share.  So the believed
 * flag lives in a record per description (struct weft__hook_ofd), counted
 * by the fd entries that point to it: an F_SETFL on one dup is seen through
 * every other, as the kernel's flag is.
 *
 * The entries are indexed by fd in chunks of CHUNK that never move, under a
 * directory sized from RLIMIT_NOFILE at first use, which doubles (under the
 * lock) when an fd lies beyond it: no fixed cap.  Lookups take no lock; old
 * directories stay allocated (chained), since a reader may still hold one.
 * Records are recycled, never freed, so a racing reader of a closing fd
 * never touches freed memory.
 *
 * A signal handler never writes the table (close and dup2 there leave the
 * record as a close behind the hooks' back does).  Its mutex is held with
 * every signal blocked (table_lock), so a handler the hooks do not know
 * for one (installed by a raw system call, or run late by a sanitizer)
 * never interrupts its holder on its own thread.  A child
 * forked while a runtime ran does not even read it: no fd of the child is
 * the hooks' (they pass every call through there, so an inherited fd shows
 * its real O_NONBLOCK).  The mutex is held across every fork, so that a
 * child has it unlocked whatever the other threads were doing; but for a
 * fork from a signal handler, which may have interrupted the holder: that
 * child never uses the table (depth.c), and its copy is reset.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "hook.h"

enum { CHUNK = 1024 };

struct weft__hook_ofd {
	unsigned nonblock;		/* atomic: the application's O_NONBLOCK */
	unsigned refs;			/* fd entries pointing here (under lock) */
	struct weft__hook_ofd *next;	/* the free list */
};

struct entry {
	struct weft__hook_ofd *ofd;	/* atomic: NULL when not tracked */
	unsigned gen;			/* atomic: bumped when fd is closed */
	unsigned registered;		/* atomic: the hooks weft_wait'ed on it */
};

struct dir {
	struct dir *prev;		/* kept: a reader may hold it */
	size_t n;
	struct entry *chunk[];		/* atomic pointers */
};

static struct dir *table;		/* atomic */
static struct weft__hook_ofd *free_ofds;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The signal mask of a fork's thread before its prepare handler. */
static __thread sigset_t fork_mask __attribute__((tls_model("initial-exec")));

/* The table's lock, taken with every signal blocked on this thread (the
 * caller's mask saved in *mask): no handler, however installed (and under
 * ThreadSanitizer, whose deferred handlers run outside the hooks'
 * trampoline, at its next interceptor), ever interrupts its holder, so a
 * handler's close or fork never waits on its own thread. */
static void table_lock(sigset_t *mask)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, mask);
	pthread_mutex_lock(&lock);
}

static void table_unlock(const sigset_t *mask)
{
	pthread_mutex_unlock(&lock);
	pthread_sigmask(SIG_SETMASK, mask, NULL);
}

#define LOAD(p) __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)

static struct entry *find(int fd)
{
	struct dir *d = LOAD(&table);
	if (fd < 0 || !d || (size_t)fd / CHUNK >= d->n || weft__hook_forked())
		return NULL;
	struct entry *c = LOAD(&d->chunk[fd / CHUNK]);
	return c ? &c[fd % CHUNK] : NULL;
}

static size_t initial_chunks(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
		return 1;
	return r.rlim_cur / CHUNK + 1;
}

/* A directory covering chunk index i (under lock), or NULL. */
static struct dir *cover(size_t i)
{
	struct dir *d = LOAD(&table);
	if (d && i < d->n)
		return d;
	size_t n = d ? d->n * 2 : initial_chunks();
	while (n <= i)
		n *= 2;
	struct dir *nd = calloc(1, sizeof *nd + n * sizeof nd->chunk[0]);
	if (!nd)
		return NULL;
	nd->prev = d;
	nd->n = n;
	for (size_t k = 0; d && k < d->n; k++)
		nd->chunk[k] = LOAD(&d->chunk[k]);
	STORE(&table, nd);
	return nd;
}

/* fd's entry, created if needed; NULL/ENOMEM. */
static struct entry *get(int fd)
{
	struct entry *e = find(fd);
	if (e || fd < 0)
		return e;
	sigset_t mask;
	table_lock(&mask);
	size_t i = (size_t)fd / CHUNK;
	struct dir *d = cover(i);
	if (d && !LOAD(&d->chunk[i]))
		STORE(&d->chunk[i], calloc(CHUNK, sizeof(struct entry)));
	table_unlock(&mask);
	e = find(fd);
	if (!e)
		errno = ENOMEM;
	return e;
}

/* Under lock: drops one reference to o (NULL is fine). */
static void ofd_put(struct weft__hook_ofd *o)
{
	if (!o || --o->refs > 0)
		return;
	o->next = free_ofds;
	free_ofds = o;
}

/* Under lock: a new record, believed blocking, with one reference. */
static struct weft__hook_ofd *ofd_new(void)
{
	struct weft__hook_ofd *o = free_ofds;
	if (o)
		free_ofds = o->next;
	else if (!(o = calloc(1, sizeof *o)))
		return NULL;
	STORE(&o->nonblock, 0);
	o->refs = 1;
	return o;
}

/* Under lock: points e at o (taking a reference), dropping its old one. */
static void attach(struct entry *e, struct weft__hook_ofd *o)
{
	if (o)
		o->refs++;
	struct weft__hook_ofd *old = __atomic_exchange_n(&e->ofd, o, __ATOMIC_ACQ_REL);
	ofd_put(old);
}

struct weft__hook_ofd *weft__hook_ofd(int fd)
{
	struct entry *e = find(fd);
	return e ? LOAD(&e->ofd) : NULL;
}

bool weft__hook_ofd_nonblock(const struct weft__hook_ofd *o)
{
	return LOAD(&o->nonblock) != 0;
}

void weft__hook_ofd_set_nonblock(struct weft__hook_ofd *o, bool nonblock)
{
	STORE(&o->nonblock, nonblock ? 1u : 0u);
}

int weft__hook_fd_track(int fd)
{
	struct entry *e = get(fd);
	if (!e)
		return -1;
	sigset_t mask;
	table_lock(&mask);
	struct weft__hook_ofd *o = ofd_new();
	if (o) {
		attach(e, o);
		ofd_put(o);	/* attach took the entry's reference */
	}
	table_unlock(&mask);
	if (!o)
		errno = ENOMEM;
	return o ? 0 : -1;
}

void weft__hook_fd_share(int from, int to)
{
	if (weft__hook_in_handler())
		return;
	struct weft__hook_ofd *o = weft__hook_ofd(from);
	struct entry *e = o ? get(to) : find(to);
	if (!e)
		return;
	sigset_t mask;
	table_lock(&mask);
	attach(e, weft__hook_ofd(from));
	table_unlock(&mask);
}

bool weft__hook_fd_forget(int fd)
{
	struct entry *e = find(fd);
	if (!e || (!LOAD(&e->ofd) && !LOAD(&e->registered)) || weft__hook_in_handler())
		return false;
	__atomic_fetch_add(&e->gen, 1, __ATOMIC_SEQ_CST);
	sigset_t mask;
	table_lock(&mask);
	attach(e, NULL);
	table_unlock(&mask);
	__atomic_store_n(&e->registered, 0, __ATOMIC_RELEASE);
	return true;
}

void weft__hook_fd_registered(int fd)
{
	struct entry *e = find(fd);
	if (e && !LOAD(&e->registered))
		STORE(&e->registered, 1);
}

unsigned weft__hook_fd_gen(int fd)
{
	struct entry *e = find(fd);
	return e ? __atomic_load_n(&e->gen, __ATOMIC_SEQ_CST) : 0;
}

void weft__hook_fd_fork_prepare(bool in_handler)
{
	if (!in_handler)
		table_lock(&fork_mask);
}

void weft__hook_fd_fork_done(bool in_handler, bool child)
{
	if (!in_handler)
		table_unlock(&fork_mask);
	else if (child)
		lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;	/* never used there */
}

int weft__hook_blocking(int fd)
{
	struct weft__hook_ofd *o = weft__hook_ofd(fd);
	if (!o || weft__hook_ofd_nonblock(o))
		return HOOK_PASS;
	return weft__hook_mode();
}

bool weft__hook_takes(int nonblock_flag)
{
	return !nonblock_flag && weft__hook_mode() == HOOK_CORO;
}

int weft__hook_created(int fd, bool take)
{
	if (fd < 0)
		return fd;
	if (!take) {
		weft__hook_fd_forget(fd);
		return fd;
	}
	if (weft__hook_fd_track(fd) == 0)
		return fd;
	int saved = errno;
	REAL(close)(fd);
	errno = saved;
	return -1;
}
