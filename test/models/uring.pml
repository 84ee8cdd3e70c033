/* SPDX-License-Identifier: MIT */
/*
 * uring.pml -- a file transfer in flight on a worker's io_uring (lib/io.c,
 * file_park, file_away and away_stop; lib/uring.c, the reap) against its
 * CQE, the reaper, a deadline, weft_cancel and weft_close (issue 48).
 *
 * The caller submits the read (its buffer is then the kernel's until the
 * CQE), publishes its waiter in the operation's completion word (park.h,
 * completions) and on the fd's `files` list under qlock, checks the close
 * after the push, and parks.  Whoever wins its park word resumes it: the
 * reaper (the CQE came: claim the completion word, wake, store SET), the
 * deadline, a cancel, or the closer (gen bump, then under qlock a wake of
 * every waiter on `files`).  The caller unlinks itself, takes its waiter
 * back from the completion word (failing if the reaper claimed it: the
 * transfer is complete, and its result stands), and otherwise submits an
 * IORING_OP_ASYNC_CANCEL and waits, not cancellably, for the operation's
 * own CQE.  The kernel completes the read with data (if data comes) or,
 * once the cancel has been submitted on the operation's ring and before
 * data, with -ECANCELED; exactly one CQE.  The reaper copies the CQE's
 * result into the operation (on the caller's stack) and then completes
 * its word; the caller reads that copy.  Two workers, each with a ring:
 * the read is on worker 0's; the caller may resume on either worker after
 * its park (a migration), and its cancel goes to the operation's ring
 * (op->ring), which alone knows the operation.  A cancel can miss its
 * operation (uring.c, weft__uring_stop: one caught between its poll's
 * wake and its retry is not found, and arms its poll again), so the
 * caller's wait for the CQE has a deadline, and each time it passes the
 * cancel goes again.  The cancel runs inline in the submission, as
 * io_uring_enter runs IORING_OP_ASYNC_CANCEL.
 *
 * What is checked
 *  - the caller never returns before the operation's CQE (the kernel's
 *    write into the buffer happens before the caller returns);
 *  - bytes the kernel moved are returned, never lost: a CQE with data
 *    makes the call return data, whatever ended its wait;
 *  - every wait ends: the close always comes, so a caller that nobody
 *    wakes is an invalid end state (a lost wake), and the closer, which
 *    waits for the caller's reference, ends too.
 *
 * Configurations and seeded bugs (spin -D...)
 *  default               the deadline and weft_cancel may each fire or not;
 *                        data may come or not; the close comes.
 *  -DNO_DATA             no data comes: only a cancel ends the read (the
 *                        pipe of test_uring.c).
 *  -DMISS                the kernel may miss a cancel, up to MISSES times
 *                        (an operation in transit is found by a later
 *                        cancel); the caller's wait for the CQE may time
 *                        out as often (the model's bound on the real,
 *                        unbounded, retries: a retry that does not cancel
 *                        again then ends in an invalid end state).
 *  -DBUG_NO_CQE_WAIT     after the cancel's submission the caller returns
 *                        its reason without waiting for the operation's
 *                        CQE: it returns before the CQE (the kernel may
 *                        still write the buffer, reused by then).
 *  -DBUG_CHECK_BEFORE_PUSH  the close check before the push on `files`: a
 *                        close between the check and the push wakes
 *                        nobody (a lost wake: the caller parks for good).
 *  -DBUG_REASON_WINS     a wait ended by the deadline, a cancel or the
 *                        close returns its reason even when the cancel came
 *                        too late (the CQE had data): bytes lost.
 *  -DBUG_STORE_AFTER     the reaper completes the word before it stores
 *                        the result: the caller reads a result not yet
 *                        stored (bytes lost), or the reaper writes into an
 *                        operation whose caller has returned.
 *  -DBUG_ONE_CANCEL      (with MISS) one cancel and a wait for the CQE
 *                        without a deadline, as before the storm's hang
 *                        (test_uring.c): a missed cancel strands the read.
 *  -DBUG_NO_RECANCEL     (with MISS) the wait for the CQE times out but
 *                        waits again without a new cancel.
 *  -DSLOW_REAP           (adv-cmiss) stop's deadline may also pass where
 *                        no cancel missed (the CQE is slow to be reaped:
 *                        a busy or stuck reaper), SLOW more times: each
 *                        sends a cancel that finds nothing.  Without it
 *                        the deadline fires only as often as the kernel
 *                        misses, which the code does not promise.
 *  -DONE_WORKER          (adv-cmiss) one worker: the caller never moves, and
 *                        the reaper (that worker's loop harvesting the
 *                        ring's eventfd; the monitor adopts a stuck worker
 *                        only where there are several) and the timer run
 *                        only while the caller is switched out (parked)
 *                        or gone.
 *  -DTIMER_NOMEM         (adv-cmiss, with ONE_WORKER) the worker's timer
 *                        heap cannot grow: a wait with a deadline is woken
 *                        at once (co_wait's weft__timer_add failure,
 *                        ENOMEM) and never switches out.  stop's wait is
 *                        not cancellable, so weft__completion_wait takes
 *                        that for a stray wake and arms again, forever;
 *                        now weft__completion_wait returns ENOMEM and
 *                        weft__uring_stop yields (the loop runs) and looks
 *                        again, cancelling again once its deadline passed
 *                        by the clock.  With BUG_ONE_CANCEL (the code
 *                        before b4afdb1: no deadline, no timer) it passes.
 *  -DBUG_NOMEM_SPIN      (with TIMER_NOMEM) b4afdb1: ENOMEM taken for a
 *                        stray wake, the wait armed again at once, a spin
 *                        that never lets the loop run (modelled as a wait
 *                        for SET that never parks): invalid end state.
 *                        A loop for good is no invalid end state, so the
 *                        yield loop is bounded: the clock passes `until`
 *                        within YIELDS yields, the loop reaps a posted CQE
 *                        before the yielder's next turn, and the kernel
 *                        misses at most MISSES cancels, so the stop ends
 *                        within (MISSES + 1) * (YIELDS + 1) laps, asserted.
 *  -DBUG_YIELD_NO_LOOP   (adv-cmiss2, with TIMER_NOMEM) the yield never
 *                        lets the loop reap: the lap bound fails.
 *  -DBUG_NOMEM_NO_RECANCEL  (adv-cmiss2, with MISS and TIMER_NOMEM) the
 *                        yield loop never cancels again: a missed cancel
 *                        strands the read, the lap bound fails.
 *  -DBUG_CANCEL_CUR      the cancel goes to the ring of the worker the
 *                        caller resumed on: after a migration that ring
 *                        knows no such operation, nothing cancels the read
 *                        (with NO_DATA: the caller waits for good).
 *
 * Correspondence (C -> Promela); one step per C atomic access
 *  park word        gen, wst (ARMED, WOKEN), wres; wake(g, r) is the CAS
 *                   on (g, PARKING) -> (g, WOKEN, r) (park.h).
 *  completion word  done: 0 (NULL), a waiter (its gen), that + CLAIMED,
 *                   SET (park.c, weft__completion_set/_wait,
 *                   weft__slot_retract).
 *  e->files, qlock  listed, listed_gen, each access one atomic block (the
 *                   lock).
 *  e->gen           closed (the closer's seq_cst bump).
 *  e->refs          returned (the caller's reference, dropped on return).
 *  the SQ/CQ        submitted, cqe, cqe_res (the CQE's res); op_res is
 *                   op->res, the reaper's copy; misses, the cancels the
 *                   kernel missed.
 *  the worker       cur: the caller's worker (weft__worker_self), 0 at the
 *                   submission; the operation's ring is 0 (op->ring).
 */

#define ARMED 1
#define WOKEN 2

#define OK 0
#define TIMEDOUT 1
#define CANCELED 2
#define DATA 3

#define NOMEM 4

#define SET 200
#define CLAIMED 100

byte gen;		/* the caller's park generation */
byte wst;		/* its park state: 0 running, ARMED, WOKEN */
byte wres;		/* the winning waker's result */
byte done;		/* the operation's completion word */
bool listed;		/* on the fd's files list */
byte listed_gen;	/* the gen of the waiter listed */
bool closed;		/* the close's gen bump */
bool returned;		/* the caller returned (its buffer and reference gone) */
bool submitted;		/* the read's SQE is in the ring */
#ifdef MISS
#define MISSES 2
#else
#define MISSES 0
#endif
byte misses;		/* the cancels the kernel missed */
#ifdef SLOW_REAP
#define SLOW 2		/* stop's deadline may pass with the CQE posted, unreaped */
#else
#define SLOW 0
#endif
bool cqe;		/* the read's CQE was posted (on ring 0) */
byte cqe_res;		/* its result: DATA or CANCELED */
byte op_res;		/* the operation's copy (op->res), the reaper's store */
byte cur;		/* the caller's worker */
bool first_armed;	/* the first wait's timer is in the heap */
byte first_gen;
byte result;		/* what the call returned */
bool yielded;		/* the caller is in weft_yield (ONE_WORKER) */
#define YIELDS 2		/* yields before the stop's deadline passes */

#ifdef ONE_WORKER
/* the worker's loop runs (reaps, fires timers) only while the caller is
 * switched out, or gone */
#define LOOP_RUNS (wst == ARMED || yielded || returned)
#else
#define LOOP_RUNS true
#endif

inline wake(g, r) {
	atomic {
		if
		:: gen == g && wst == ARMED -> wst = WOKEN; wres = r
		:: else -> skip
		fi
	}
}

inline arm() {
	atomic { gen++; wst = ARMED }
}

/* An IORING_OP_ASYNC_CANCEL on `ring`, run inline by its submission: on
 * the operation's ring (0) before its CQE it stops the operation
 * (-ECANCELED), or, with MISS, misses it (the operation waits on). */
inline cancel_on(ring) {
	atomic {
		if
		:: ring != 0 || cqe -> skip
		:: else ->
			if
			:: misses < MISSES -> misses++
			:: true -> assert(!returned); cqe_res = CANCELED; cqe = true
			fi
		fi
	}
}

/* weft__uring_stop: the cancel, then weft__completion_wait(done, false,
 * deadline) until the CQE came (a stray cancel or interrupt wake does not
 * end it), the cancel again each time the deadline passes. */
inline stop(ring) {
	cancel_on(ring);
	do
	:: done == SET -> break
#if defined(TIMER_NOMEM) && !defined(BUG_ONE_CANCEL)
	:: atomic { done == 0 -> arm(); done = gen; wake(gen, NOMEM) }
		/* woken before it switched out (ENOMEM): taken back */
		atomic {
			if
			:: done == gen -> done = 0
			:: else -> skip
			fi
		}
		(done == SET || done == 0);
		if
		:: done == 0 ->
#ifdef BUG_NOMEM_SPIN
			/* b4afdb1: completion_wait took ENOMEM for a stray
			 * wake and armed again at once, never switching out */
			(done == SET)
#else
			/* weft_yield: the loop takes its turn before the
			 * yielder's next (a fairness turn polls the ring):
			 * a CQE posted by then is reaped */
			yielded = true;
#ifndef BUG_YIELD_NO_LOOP
			(!cqe || done == SET);
#endif
			yielded = false;
			/* the clock: `until` passes within YIELDS yields */
			laps++;
			assert(laps <= (MISSES + 1) * (YIELDS + 1));	/* the stop ends */
			if
			:: spins < YIELDS -> spins++
			:: spins = 0;
#ifndef BUG_NOMEM_NO_RECANCEL
				cancel_on(ring)	/* `until` passed: again */
#else
				skip
#endif
			fi
#endif
		:: else -> skip
		fi
#else
	:: atomic { done == 0 -> arm(); done = gen }
		if
		:: (wst == WOKEN)
#ifndef BUG_ONE_CANCEL
		:: tries < MISSES + SLOW -> wake(gen, TIMEDOUT)	/* its deadline */
#endif
		fi;
		(wst == WOKEN);
		timed = wres == TIMEDOUT;
		atomic {
			if
			:: done == gen -> done = 0	/* taken back */
			:: else -> skip
			fi
		}
		(done == SET || done == 0);
		if
		:: done == 0 && timed ->
			tries++;
#ifndef BUG_NO_RECANCEL
			cancel_on(ring)
#else
			skip
#endif
		:: else -> skip
		fi
#endif
	od
}

active proctype caller() {
	byte r, mygen, tries = 0, laps = 0, spins = 0;
	bool complete = false, timed;
	submitted = true;
	/* file_park */
	arm();
	mygen = gen;
	atomic { first_armed = true; first_gen = mygen }
	atomic {
		if
		:: done == 0 -> done = mygen
		:: else -> complete = true	/* SET: the CQE came first */
		fi
	}
	if
	:: complete -> atomic { wst = 0 }; goto finish	/* disarm */
	:: else -> skip
	fi;
#ifdef BUG_CHECK_BEFORE_PUSH
	if
	:: closed -> wake(mygen, CANCELED)
	:: else -> skip
	fi;
	atomic { listed = true; listed_gen = mygen };
#else
	atomic { listed = true; listed_gen = mygen };
	if
	:: closed -> wake(mygen, CANCELED)
	:: else -> skip
	fi;
#endif
	(wst == WOKEN);
	r = wres;
	atomic { first_armed = false; listed = false };
	/* weft__slot_retract */
	atomic {
		if
		:: done == mygen -> done = 0
		:: else -> complete = true
		fi
	}
	(done == SET || done == 0);
	if
	:: complete -> goto finish
	:: else -> skip
	fi;
	/* resumed on either worker */
#ifdef ONE_WORKER
	cur = 0;
#else
	if
	:: cur = 0
	:: cur = 1
	fi;
#endif
	/* away_stop: weft__uring_stop */
#ifdef BUG_NO_CQE_WAIT
	cancel_on(0);
	result = r;
	goto out;	/* as if the cancel had surely stopped it */
#endif
#ifdef BUG_CANCEL_CUR
	stop(cur);
#else
	stop(0);	/* op->ring */
#endif
	if
#ifdef BUG_REASON_WINS
	:: true -> result = r; goto out
#endif
	:: op_res == CANCELED -> result = r; goto out
	:: else -> skip
	fi;
finish:
	result = op_res;
out:
	atomic {
		assert(cqe);	/* never before the operation's CQE */
		assert(cqe_res != DATA || result == DATA);	/* no bytes lost */
		returned = true
	}
}

/* The kernel's data: one CQE, with data if data comes before a cancel
 * stopped the read (cancel_on posts that CQE); the data write lands in
 * the caller's buffer. */
active proctype kernel() {
	(submitted);
#ifndef NO_DATA
	atomic {
		if
		:: !cqe -> assert(!returned); cqe_res = DATA; cqe = true
		:: true -> skip	/* no data comes */
		fi
	}
#endif
}

/* The reaper (whoever harvests ring 0's eventfd): stores the CQE's
 * result in the operation, then completes the word (uring.c, reap; the
 * store is published by the completion's CAS). */
inline store_res() {
	atomic { assert(!returned); op_res = cqe_res }
}

active proctype reaper() {
	byte j;
	(cqe && LOOP_RUNS);
#ifndef BUG_STORE_AFTER
	store_res();
#endif
	do
	:: atomic { LOOP_RUNS && done == 0 -> done = SET; break }
	:: atomic { LOOP_RUNS && done > 0 && done < CLAIMED -> j = done; done = j + CLAIMED }
		wake(j, OK);
		done = SET;
		break
	od;
#ifdef BUG_STORE_AFTER
	store_res()
#endif
}

/* The deadline: fires on the first wait, or never. */
active proctype timer() {
	if
	:: (first_armed && LOOP_RUNS) -> wake(first_gen, TIMEDOUT)
	:: true -> skip
	fi
}

/* weft_cancel: wakes whatever wait the caller is in, or none. */
active proctype canceller() {
	if
	:: atomic { wst == ARMED -> wake(gen, CANCELED) }
	:: true -> skip
	fi
}

/* weft_close: the gen bump, the walk of files under qlock, then the wait
 * for the caller's reference. */
active proctype closer() {
	closed = true;
	atomic {
		if
		:: listed -> wake(listed_gen, CANCELED)
		:: else -> skip
		fi
	}
	(returned)
}
