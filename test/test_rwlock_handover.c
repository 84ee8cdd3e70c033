/* SPDX-License-Identifier: MIT */
/*
 * The rwlock's hand-overs against waiters that abandon their wait as the
 * unlock runs (fault-injection build; one scenario per argument, 0-3).
 * Under the rwlock's lock a waiter flag may cover only abandoned nodes,
 * their waiters between the abandon CAS and the relock (waitq.h), so an
 * unlock that hands over may find nobody live:
 *   s1  last reader out, the one writer abandoned: the lock must be free.
 *   s2  writer out, the one reader abandoned, nobody else: the unlock must
 *       not publish "free" before its last access (docs/design.md, "Unlock
 *       paths"): a partner must not get the lock inside the unlock.
 *   s3  last reader out, the one writer abandoned, a reader queued behind
 *       it: that reader must enter (the writer's give-up admits it, and
 *       its wake must survive the unlock's retry of its CAS).
 *   s4  writer out, the one writer abandoned: as s2.
 * Each scenario holds the abandoning waiter (a plain thread whose deadline
 * fired) at WEFT__FAULT_ABANDONED while the main coroutine unlocks, and the
 * unlock at WEFT__FAULT_UNLOCK while a partner tries the lock.  Merged the
 * obvious ways, the hand-overs left the lock held by nobody (s1), let the
 * partner in inside the unlock (s2, s4) or lost the reader's wake (s3).
 * An unlock that dropped the waiter's node lets it go on from
 * WEFT__FAULT_DROPPED, as it waits for it to leave the rwlock.
 * alarm(60) turns a hang into a failure.
 */
#include "weft.h"

#include "fault.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "%s:%d: CHECK(%s) failed, errno %d\n", __FILE__, \
				__LINE__, #c, errno);                              \
			abort();                                                   \
		}                                                                  \
	} while (0)
static const int64_t MS = 1000 * 1000;

static _Thread_local int hold_me;
static atomic_int in_pause, release_waiter;

static void abandoned(uintptr_t what)
{
	(void)what;
	if (!hold_me)
		return;
	atomic_store(&in_pause, 1);
	while (!atomic_load(&release_waiter))
		sched_yield();
}

/* An unlock that dropped the held waiter's node waits for it to leave the
 * rwlock before it returns (waitq.h): it lets it go on. */
static void dropped(uintptr_t what)
{
	(void)what;
	atomic_store(&release_waiter, 1);
}

struct waiter {
	weft_rwlock *l;
	bool write;
	int r, err;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	hold_me = 1;
	int64_t dl = weft_now() + 300 * MS;
	w->r = w->write ? weft_rwlock_wrlock(w->l, dl) : weft_rwlock_rdlock(w->l, dl);
	w->err = errno;
	return NULL;
}

/* The unlock pause: has another thread got the lock, fast path, while the
 * unlock still holds the object's internal lock? */
static atomic_uintptr_t armed;
static atomic_int partner_go, partner_got;

static void in_unlock(uintptr_t what)
{
	uintptr_t want = what;
	if (!atomic_compare_exchange_strong(&armed, &want, 0))
		return;
	atomic_store(&partner_go, 1);
	int64_t until = weft_now() + 100 * MS;
	while (!atomic_load(&partner_got) && weft_now() < until)
		sched_yield();
	if (atomic_load(&partner_got)) {
		fprintf(stderr, "FAIL: another thread write-locked %p inside its unlock "
				"(free published before the unlock's last access)\n", (void *)what);
		abort();
	}
}

static void *partner_main(void *arg)
{
	weft_rwlock *l = arg;
	while (!atomic_load(&partner_go))
		sched_yield();
	if (weft_rwlock_wrlock(l, 0) == 0) {	/* past deadline: only if free */
		atomic_store(&partner_got, 1);
		CHECK(weft_rwlock_unlock(l) == 0);
	}
	return NULL;
}

static void start_waiter(pthread_t *t, struct waiter *w)
{
	atomic_store(&in_pause, 0);
	atomic_store(&release_waiter, 0);
	CHECK(pthread_create(t, NULL, waiter_main, w) == 0);
	while (!atomic_load(&in_pause))	/* queued, timed out, abandoned, held */
		weft_yield();
}

static void finish_waiter(pthread_t t, struct waiter *w)
{
	atomic_store(&release_waiter, 1);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(w->r == -1 && w->err == ETIMEDOUT);
}

/* The lock must be free now: a writer gets it within 2 s. */
static void check_free(weft_rwlock *l, const char *what)
{
	if (weft_rwlock_wrlock(l, weft_now() + 2000 * MS) != 0) {
		fprintf(stderr, "FAIL %s: the rwlock is held by nobody yet a writer cannot get it "
				"(errno %d)\n", what, errno);
		abort();
	}
	CHECK(weft_rwlock_unlock(l) == 0);
	fprintf(stderr, "ok %s\n", what);
}

static void s1(void *arg)
{
	(void)arg;
	weft_rwlock *l = weft_rwlock_new();
	CHECK(weft_rwlock_rdlock(l, -1) == 0);
	struct waiter w = { .l = l, .write = true };
	pthread_t t;
	start_waiter(&t, &w);
	CHECK(weft_rwlock_unlock(l) == 0);	/* the last reader, W_WAIT over an abandoned node */
	finish_waiter(t, &w);
	check_free(l, "s1 last reader out, the writer abandoned");
	weft_rwlock_free(l);
}

struct reader {
	weft_rwlock *l;
	int r, err;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	rd->r = weft_rwlock_rdlock(rd->l, weft_now() + 3000 * MS);
	rd->err = errno;
	if (rd->r == 0)
		CHECK(weft_rwlock_unlock(rd->l) == 0);
	return NULL;
}

static void s3(void *arg)
{
	(void)arg;
	weft_rwlock *l = weft_rwlock_new();
	CHECK(weft_rwlock_rdlock(l, -1) == 0);
	struct waiter w = { .l = l, .write = true };
	struct reader rd = { .l = l };
	pthread_t t, r;
	atomic_store(&in_pause, 0);
	atomic_store(&release_waiter, 0);
	/* the writer queues (W_WAIT), then the reader behind it (R_WAIT),
	 * then the writer's deadline (300 ms) fires and it abandons */
	CHECK(pthread_create(&t, NULL, waiter_main, &w) == 0);
	weft_sleep(weft_now() + 50 * MS);
	CHECK(pthread_create(&r, NULL, reader_main, &rd) == 0);
	while (!atomic_load(&in_pause))
		weft_yield();
	CHECK(weft_rwlock_unlock(l) == 0);	/* the last reader out */
	finish_waiter(t, &w);
	CHECK(pthread_join(r, NULL) == 0);
	if (rd.r != 0) {
		fprintf(stderr, "FAIL s3: the reader queued behind the abandoned writer never "
				"entered (errno %d): its wake was lost\n", rd.err);
		abort();
	}
	check_free(l, "s3 last reader out, the writer abandoned, a reader behind it");
	weft_rwlock_free(l);
}

static void writer_out(bool write_waiter, const char *what)
{
	weft_rwlock *l = weft_rwlock_new();
	CHECK(weft_rwlock_wrlock(l, -1) == 0);
	struct waiter w = { .l = l, .write = write_waiter };
	pthread_t t, p;
	start_waiter(&t, &w);
	atomic_store(&partner_go, 0);
	atomic_store(&partner_got, 0);
	CHECK(pthread_create(&p, NULL, partner_main, l) == 0);
	weft__fault_on(WEFT__FAULT_UNLOCK, in_unlock);
	atomic_store(&armed, (uintptr_t)l);
	CHECK(weft_rwlock_unlock(l) == 0);
	atomic_store(&armed, 0);
	atomic_store(&partner_go, 1);
	CHECK(pthread_join(p, NULL) == 0);
	finish_waiter(t, &w);
	check_free(l, what);
	weft_rwlock_free(l);
}

static void s2(void *arg)
{
	(void)arg;
	writer_out(false, "s2 writer out, the reader abandoned");
}

static void s4(void *arg)
{
	(void)arg;
	writer_out(true, "s4 writer out, the writer abandoned");
}

int main(int argc, char **argv)
{
	weft__fault_on(WEFT__FAULT_ABANDONED, abandoned);
	weft__fault_on(WEFT__FAULT_DROPPED, dropped);
	alarm(60);
	void (*fns[])(void *) = { s1, s2, s3, s4 };
	for (int i = 1; i < argc; i++) {
		int k = atoi(argv[i]);
		CHECK(weft_main(fns[k], NULL, &WEFT_CONFIG(.workers = 2)) == 0);
	}
	return 0;
}
