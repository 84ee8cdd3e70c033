/* SPDX-License-Identifier: MIT */
/*
 * unlock.pml -- the unlock paths of the mutex (sync.c) and the rwlock
 * (rwlock.c) against the object's lifetime (docs/design.md, "Unlock paths").
 *
 * Three users share one object guarded by its own lock (the pattern of
 * glibc bug 13690): U holds the lock at the start, C waits for it and may
 * be cancelled, P (the partner) takes it after U.  U and P hold a
 * reference each, which they drop under the lock, before their unlock; the
 * one that drops the last frees the object after its unlock, once C's call
 * has returned (as a user would join C first): everything the object's
 * lifetime rule (weft.h) asks of a user, and nothing more.  Every access to the object's
 * memory (the state word, the internal lock's word, the queue) asserts that
 * it is not freed: an unlock that writes the object after publishing
 * "free" fails an assertion.  A process left waiting forever is an invalid
 * end state (no lost wake-up in the reworked loops).
 *
 *   default        the mutex: U unlocks; C's cancel can leave M_WAITERS set
 *                  with nobody queued (unlock_contended, unlock_slow)
 *   -DRW_READER    the rwlock: U holds a read hold, C and P are writers
 *                  (read_unlock, last_reader_out, wrlock, writer_gave_up)
 *   -DRW_WRITER    the rwlock: U holds the write lock, C and P are writers
 *                  (write_unlock, write_hand_over)
 *   -DSEM          the semaphore (sem.c), count 0: U releases one permit,
 *                  C acquires (and releases what it got) or is cancelled,
 *                  P acquires and frees once C's call has returned
 *                  (weft_sem_release, add_permit, hand_over, gave_up)
 *   -DSTORE_BEFORE_RELEASE   today's order before the fix, seeded: the
 *                  mutex's unlock stores the unlocked state under its
 *                  internal lock, then releases that lock; the rwlock's
 *                  writer stores state 0 under the lock, then releases it;
 *                  its last reader gives its hold back, then takes the lock;
 *                  the semaphore's release, its waiters gone, adds the
 *                  permit under the lock, then releases it
 *
 * Steps: each C atomic access to the object is one step (assert, then
 * the access).  A section under the internal lock is one step where it
 * writes at most one thing read outside that lock (the state word), as in
 * the other models; the lock's acquire and release are steps of their own,
 * since the window between a store and the release is what is checked.
 * The futex wake after a release (lock.h) is a system call on the address,
 * not an access, and is not modelled.  A failed CAS that retries is the
 * same as not having tried: a CAS loop is one atomic step on the current
 * value.  The claimer's wake (waitq.c, weft__wnode_wake) touches only the
 * node: woken[] here.
 *
 * Not modelled: the mutex's starving mode (its hand-off keeps the mutex
 * locked for the claimed waiter, which returns only after the unlocker's
 * release: no window), deadlines (a cancel stands for any give-up),
 * queued readers (R_WAIT and the readers' batch).
 */

#define NP 3
#define U 0		/* the unlocker */
#define C 1		/* the waiter that may be cancelled */
#define P 2		/* the partner */
#define NONE 255

#define OK 0
#define RETRY 1		/* WEFT__PARK_WAKE_RETRY: the mutex's woken waiter competes again */
#define ECANCELED 2

#define LOCKED 1	/* mutex state bits (sync.c) */
#define WAITERS 2
#define WOKEN 4

bool freed;		/* the object was freed */
byte refs = 2;		/* U's and P's references; the one that drops the last frees */
bool cdone;		/* C's call has returned */
bit lockw;		/* the internal lock's word (lock.h): held or not */
byte q[2];		/* the wait queue (the rwlock's writers' queue), oldest first */
byte qlen;
bool claimed[NP];	/* a waiter's node was claimed (unlinked) */
bool woken[NP];		/* its claimer's wake: touches the node only */

#ifdef RW_READER
#define RWLOCK
#endif
#ifdef RW_WRITER
#define RWLOCK
#endif

#ifdef RWLOCK
byte rd;		/* rwlock state word: readers ... */
bool whel, wwait;	/* ... W_HELD, W_WAIT */
#elif defined(SEM)
byte count;		/* semaphore state word: the count ... */
bool swait;		/* ... and WAITERS */
#else
byte state;		/* mutex state word */
#endif

#define touch() assert(!freed)

inline lock_acquire()
{
	/* a waiter spins or sleeps on the word: if the object is freed
	 * meanwhile, its next look is an access to freed memory */
	atomic { (lockw == 0 || freed) -> touch(); lockw = 1 }
}

inline lock_release()
{
	atomic { touch(); lockw = 0 }
}

inline enqueue()
{
	claimed[me] = false;
	woken[me] = false;
	q[qlen] = me;
	qlen++
}

/* weft__waitq_claim: the oldest node, or NONE. */
inline claim(n)
{
	if
	:: qlen > 0 ->
		n = q[0];
		q[0] = q[1];
		q[1] = NONE;
		qlen--;
		claimed[n] = true
	:: else ->
		n = NONE
	fi
}

inline unlink()
{
	if
	:: qlen > 0 && q[0] == me ->
		q[0] = q[1];
		q[1] = NONE;
		qlen--
	:: qlen > 1 && q[1] == me ->
		q[1] = NONE;
		qlen--
	:: else ->
		skip
	fi
}

/* Adds claimed node n to the wakes (struct weft__wakes). */
inline add_wake(n)
{
	if
	:: n != NONE -> wk = wk | (1 << n)
	:: else -> skip
	fi
}

/* weft__wakes_run: after the last access to the object. */
inline wakes_run()
{
	i = 0;
	do
	:: i < NP ->
		if
		:: wk & (1 << i) -> woken[i] = true
		:: else -> skip
		fi;
		i++
	:: else ->
		break
	od;
	wk = 0
}

/* weft__wait_park after the lock's release: the claimer's wake, or (C only)
 * a cancel, which relocks and settles: claimed, it waits for the claimer's
 * last touch of the node; else it unlinks and gives up (gave_up()). */
inline park(res_claimed)
{
	if
	:: woken[me] ->
		r = res_claimed
	:: me == C ->
		lock_acquire();
		if
		:: claimed[me] ->
			lock_release();
			woken[me];
			r = res_claimed
		:: else ->
			atomic { touch(); unlink(); gave_up() };
			lock_release();
			r = ECANCELED
		fi
	fi
}

#ifdef SEM
/* ------------------------------------------------------------ semaphore */

/* gave_up (sem.c): the last waiter clears WAITERS (the count is 0). */
inline gave_up()
{
	if
	:: qlen == 0 -> swait = false
	:: else -> skip
	fi
}

/* weft_sem_acquire: take, else acquire_slow (queue). */
inline lock()
{
	got = false;
	atomic {
		touch();
		if
		:: count > 0 -> count--; got = true
		:: else -> skip
		fi
	};
	if
	:: got ->
		skip
	:: else ->
		lock_acquire();
		atomic {
			touch();
			if
			:: count > 0 -> count--; got = true
			:: else -> swait = true; enqueue()
			fi
		};
		lock_release();
		if
		:: got -> skip
		:: else -> park(OK); got = (r == OK)
		fi
	fi
}

/* weft_sem_release: add_permit's CAS while WAITERS is clear, else the
 * permit handed to the oldest waiter under the lock. */
inline unlock()
{
	do
	:: atomic {
		touch();
		if
		:: !swait -> count++; done = true
		:: else -> done = false
		fi
	   };
		if
		:: done -> break
		:: else -> skip
		fi;
		lock_acquire();
		atomic {
			touch();
			if
			:: swait ->
				claim(n);
				add_wake(n);
				done = (n != NONE);
				if
				:: qlen == 0 -> swait = false
				:: else -> skip
				fi
			:: else ->
#ifdef STORE_BEFORE_RELEASE
				count++; done = true	/* add_permit under the lock */
#else
				done = false	/* nobody waits: the CAS after the release */
#endif
			fi
		};
		lock_release();
		if
		:: done -> break
		:: else -> skip
		fi
	od;
	wakes_run()
}

#elif !defined(RWLOCK)
/* ------------------------------------------------------------ mutex */

inline gave_up()
{
	skip	/* lock_contended leaves M_WAITERS as it is */
}

inline try_take()
{
	atomic {
		touch();
		if
		:: !(state & LOCKED) -> state = state | LOCKED; got = true
		:: else -> skip
		fi
	}
}

/* weft_mutex_lock: lock_fast / spin_for, then lock_contended. */
inline lock()
{
	got = false;
	try_take();
	if
	:: got ->
		skip
	:: else ->
		lock_acquire();
		do
		:: try_take();
			if
			:: got -> break
			:: else -> skip
			fi;
			/* mark_locked(m, M_WAITERS); the enqueue in the same
			 * lock hold is read only under the lock */
			atomic {
				touch();
				if
				:: state & LOCKED -> state = state | WAITERS; enqueue(); marked = true
				:: else -> marked = false
				fi
			};
			if
			:: marked ->
				lock_release();
				park(RETRY);
				if
				:: r == ECANCELED -> break
				:: else -> skip
				fi;
				lock_acquire();
				atomic { touch(); state = state & ~WOKEN }	/* clear_woken */
			:: else ->
				skip	/* released meanwhile: try again */
			fi
		od;
		if
		:: got -> lock_release()
		:: else -> skip
		fi
	fi
}

/* weft_mutex_unlock: unlock_fast, else unlock_slow. */
inline unlock()
{
	atomic {
		touch();
		if
		:: state == LOCKED -> state = 0; done = true
		:: else -> done = false
		fi
	};
	do
	:: done -> break
	:: else ->
		atomic { touch(); s = state };
		if
		:: (s & WAITERS) && !(s & WOKEN) ->
			/* unlock_contended */
			lock_acquire();
			atomic {
				touch();
				claim(n);
#ifdef STORE_BEFORE_RELEASE
				state = (qlen > 0 -> WAITERS : 0) | (n != NONE -> WOKEN : 0);
#else
				state = LOCKED | (qlen > 0 -> WAITERS : 0) | (n != NONE -> WOKEN : 0);
#endif
				add_wake(n)
			};
			lock_release();
#ifdef STORE_BEFORE_RELEASE
			done = true
#endif
		:: else ->
			atomic {
				touch();
				if
				:: state == s -> state = s & ~LOCKED; done = true
				:: else -> skip
				fi
			}
		fi
	od;
	wakes_run()
}

#else
/* ------------------------------------------------------------ rwlock */

/* writer_gave_up: the last queued writer clears W_WAIT (no queued readers
 * to admit here). */
inline gave_up()
{
	if
	:: qlen == 0 -> wwait = false
	:: else -> skip
	fi
}

/* weft_rwlock_wrlock: try_enter, else lock_slow (enter_or_flag, queue). */
inline lock()
{
	got = false;
	atomic {
		touch();
		if
		:: rd == 0 && !whel && !wwait -> whel = true; got = true
		:: else -> skip
		fi
	};
	if
	:: got ->
		skip
	:: else ->
		lock_acquire();
		atomic {
			touch();
			if
			:: rd == 0 && !whel && !wwait -> whel = true; got = true
			:: else -> wwait = true; enqueue()
			fi
		};
		lock_release();
		if
		:: got -> skip
		:: else -> park(OK); got = (r == OK)
		fi
	fi
}

/* admit_writer, under the lock: the claimed writer holds the lock. */
inline admit_writer()
{
	claim(n);
	assert(n != NONE);
	whel = true;
	if
	:: qlen == 0 -> wwait = false
	:: else -> skip
	fi;
	add_wake(n)
}

/* write_unlock: the CAS W_HELD -> 0, else write_hand_over under the lock. */
inline unlock()
{
	do
	:: atomic {
		touch();
		if
		:: whel && !wwait -> whel = false; done = true
		:: else -> done = false
		fi
	   };
		if
		:: done -> break
		:: else -> skip
		fi;
		lock_acquire();
		atomic {
			touch();
			if
			:: wwait -> admit_writer(); done = true
			:: else ->
#ifdef STORE_BEFORE_RELEASE
				whel = false; done = true	/* state 0 under the lock */
#else
				done = false	/* nobody left: CAS after the release */
#endif
			fi
		};
		lock_release();
		if
		:: done -> break
		:: else -> skip
		fi
	od;
	wakes_run()
}

/* read_unlock by the last reader, U. */
inline read_unlock()
{
#ifdef STORE_BEFORE_RELEASE
	/* the hold given back first, then the lock for the hand-over */
	atomic { touch(); s = rd; rd--; done = (s >= 2 || !wwait) };
	if
	:: done -> skip
	:: else ->
		lock_acquire();
		atomic {
			touch();
			if
			:: rd == 0 && !whel && qlen > 0 -> admit_writer()
			:: else -> skip
			fi
		};
		lock_release()
	fi;
#else
	do
	:: atomic {
		touch();
		if
		:: rd >= 2 || !wwait -> rd--; done = true
		:: else -> done = false
		fi
	   };
		if
		:: done -> break
		:: else -> skip
		fi;
		lock_acquire();
		atomic {
			touch();
			if
			:: rd == 1 && wwait -> admit_writer(); rd = 0; done = true	/* one add */
			:: else -> done = false
			fi
		};
		lock_release();
		if
		:: done -> break
		:: else -> skip
		fi
	od;
#endif
	wakes_run()
}
#endif

proctype user(byte me)
{
	byte r, s, n, wk, i;
	bool got, marked, done, last;

#ifdef SEM
	/* U releases; C acquires (and gives back what it got) or is
	 * cancelled; P acquires and frees once C's call has returned */
	if
	:: me == U ->
		unlock()
	:: me == C ->
		lock();
		if
		:: got -> unlock()
		:: else -> skip
		fi;
		cdone = true
	:: me == P ->
		lock();
		cdone;
		freed = true
	fi
#else
	if
	:: me == U ->
		got = true	/* holds the lock from the start */
	:: else ->
		lock()
	fi;
	if
	:: got && me != C -> atomic { refs--; last = (refs == 0) }
	:: else -> skip
	fi;
#ifdef RW_READER
	if
	:: me == U -> read_unlock()
	:: me != U && got -> unlock()
	:: else -> skip
	fi;
#else
	if
	:: got -> unlock()
	:: else -> skip
	fi;
#endif
	if
	:: me == C -> cdone = true
	:: last -> cdone; freed = true
	:: else -> skip
	fi
#endif
}

init
{
	q[0] = NONE;
	q[1] = NONE;
#ifdef RW_READER
	rd = 1;
#elif defined(RW_WRITER)
	whel = true;
#elif defined(SEM)
	skip;	/* count 0 */
#else
	state = LOCKED;
#endif
	atomic {
		run user(U);
		run user(C);
		run user(P)
	}
}
