/* SPDX-License-Identifier: MIT */
/*
 * uring_sock.pml -- the deferred submission of socket SQEs (lib/uring.c,
 * weft__uring_queue_sock, weft__uring_flush, submit_all; lib/worker.c and
 * lib/loop.c, the passes' flushes; lib/monitor.c, the flush of a stuck
 * worker; lib/io.c, away_stop's cancel) under WEFT_IO=uring.
 *
 * Two coroutines on worker 0 each queue a RECV on its ring (under the SQ
 * lock: the SQE, then `queued`) and park on its completion.  Nothing is
 * submitted then: worker 0 submits its SQ at its next pass (a flush: under
 * the lock, submit_all, which clears `queued` and hands the kernel every
 * SQE in order), unless it is stuck in a long coroutine, when the monitor
 * flushes it (it may be wrong about stuck: the worker comes back, queues
 * the second RECV and is stuck again while the monitor flushes).  The
 * first coroutine's deadline may fire: it then submits an ASYNC_CANCEL on
 * the ring (under the lock, after whatever is queued: submit_all) and
 * waits for its RECV's CQE.  Data comes for each RECV once the kernel has
 * it; the kernel completes a RECV with data, or with -ECANCELED for a
 * cancel that finds it in flight; a cancel that finds nothing (its RECV
 * not yet submitted) does nothing.
 *
 * What is checked
 *  - every coroutine's wait ends (a RECV left unsubmitted, or one whose
 *    cancel went in before it, leaves its coroutine parked: an invalid
 *    end state);
 *  - a coroutine returns only after its RECV's CQE.
 *
 * Seeded bugs (spin -D...)
 *  -DBUG_NO_MONITOR_FLUSH  the monitor does not flush a stuck worker: the
 *                        RECVs queued before it got stuck stay in the SQ.
 *  -DBUG_UNLOCKED_FLUSH  the monitor's flush submits what it saw and clears
 *                        `queued` without the lock: a RECV queued between
 *                        the two is left with `queued` clear, and nobody
 *                        flushes it.
 *  -DBUG_CANCEL_FIRST    the cancel goes to the kernel ahead of the SQEs
 *                        queued (a synchronous cancel, or one submitted
 *                        without submit_all): it finds no RECV, and the
 *                        RECV, submitted later, waits for data that the
 *                        deadline's caller (-DNO_DATA) never gets.
 *  -DNO_DATA             no data comes for the first RECV: only its
 *                        deadline's cancel ends it (the deadline fires).
 *  -DTASK_WORK           (adv-sockring: what the kernel does and the model
 *                        above leaves out) a RECV's CQE, with data or
 *                        -ECANCELED, is posted by task work on the thread
 *                        that submitted it, which a thread in an
 *                        uninterruptible wait (vfork, D state) does not run;
 *                        worker 0's last stuck may be such a wait.  The
 *                        good model fails with it (an invalid end state):
 *                        the monitor's flush does not save a RECV the
 *                        stuck worker submitted itself
 *                        (test_uring_sock_adv, *_while_its_worker_is_in_vfork).
 *                        A documented known gap, registered as a finding
 *                        (README.md, "Findings"; docs/design.md, the known gap).
 */

#define NONE	0
#define QUEUED	1	/* its SQE is in the SQ, not submitted */
#define KERNEL	2	/* submitted: armed, waiting for data */
#define DONE	3	/* its CQE came (reaped) */

byte op[2];		/* each RECV's state */
byte sq[3];		/* the SQ, in order: 1 + op index, or 10 + op index for a cancel */
byte sqn;		/* entries in sq */
bit queued;		/* the ring's `queued` flag */
bit lock;		/* the SQ lock */
bit stuck;		/* worker 0 runs a long coroutine */
#ifdef TASK_WORK
#define CANCELLED 4	/* its cancel found it: the CQE is task work */
byte sub[2];		/* who submitted it: 1 worker 0, 2 the monitor */
byte who;		/* the submitter holding the SQ lock */
bit dstate;		/* worker 0 is in an uninterruptible wait: no task work */
#define CAN_POST(k)	(!(sub[k] == 1 && dstate))
#else
#define CAN_POST(k)	true
#endif

inline acquire() { atomic { lock == 0 -> lock = 1 } }
inline release() { lock = 0 }

/* The kernel takes one SQE: a RECV is armed; a cancel completes its RECV
 * with -ECANCELED if the RECV is armed, else finds nothing. */
inline kernel_take(e)
{
	if
	:: e < 10 -> op[e - 1] = KERNEL
#ifdef TASK_WORK
		   ; sub[e - 1] = who
#endif
	:: else -> if
#ifdef TASK_WORK
		   :: op[e - 10] == KERNEL -> op[e - 10] = CANCELLED
#else
		   :: op[e - 10] == KERNEL -> op[e - 10] = DONE
#endif
		   :: else -> skip
		   fi
	fi
}

/* submit_all (the lock held): every SQE, in order, and `queued` cleared. */
inline submit_all()
{
	queued = 0;
	atomic {
		byte i = 0;
		do
		:: i < sqn -> kernel_take(sq[i]); i++
		:: else -> break
		od;
		sqn = 0
	}
}

inline queue_recv(k)
{
	acquire();
	sq[sqn] = 1 + k; sqn++;
	op[k] = QUEUED;
	queued = 1;
	release()
}

inline flush(me)
{
	if
	:: queued -> acquire();
#ifdef TASK_WORK
		who = me;
#endif
		submit_all(); release()
	:: else -> skip
	fi
}

/* The kernel: data for each RECV armed (not for RECV 0 under NO_DATA). */
active proctype kernel()
{
	do
	:: atomic { op[1] == KERNEL && CAN_POST(1) -> op[1] = DONE }
#ifndef NO_DATA
	:: atomic { op[0] == KERNEL && CAN_POST(0) -> op[0] = DONE }
#endif
#ifdef TASK_WORK
	:: atomic { op[0] == CANCELLED && CAN_POST(0) -> op[0] = DONE }
	:: atomic { op[1] == CANCELLED && CAN_POST(1) -> op[1] = DONE }
#endif
	:: atomic { op[0] == DONE && op[1] == DONE -> break }
	od
}

/* Coroutine 0: queues its RECV, parks; its deadline may fire (under
 * NO_DATA it does): the cancel, then the wait for the RECV's CQE. */
active proctype reader0()
{
	queue_recv(0);
	if
	:: op[0] == DONE
	:: true ->	/* the deadline */
		acquire();
#ifdef BUG_CANCEL_FIRST
		atomic { kernel_take(10) };
#else
		sq[sqn] = 10; sqn++;
#endif
#ifdef TASK_WORK
		who = 3;	/* the coroutine, on whichever worker */
#endif
		submit_all();
		release();
		op[0] == DONE
	fi;
	assert(op[0] == DONE)
}

/* Worker 0: runs coroutine 0 (queued above), then either passes (a flush)
 * or gets stuck; back, it runs coroutine 1, which queues the second RECV,
 * and may be stuck again before its next pass. */
active proctype worker()
{
	op[0] != NONE;
	if
	:: flush(1)
	:: stuck = 1; stuck = 0	/* a long coroutine, then back */
	fi;
	queue_recv(1);
	if
	:: flush(1)
	:: stuck = 1	/* stuck for good: the monitor must flush */
#ifdef TASK_WORK
	:: stuck = 1; dstate = 1	/* the same, in an uninterruptible wait */
#endif
	fi;
	op[1] == DONE && (op[0] == DONE);
	stuck = 0;
#ifdef TASK_WORK
	dstate = 0
#endif
}

/* The monitor: flushes worker 0 while it is stuck with SQEs queued (a
 * period with nothing queued changes nothing, so is not modelled). */
active proctype monitor()
{
	do
#ifndef BUG_NO_MONITOR_FLUSH
	:: stuck && queued ->
#ifdef BUG_UNLOCKED_FLUSH
		byte n;
		atomic { n = sqn };
		atomic {
			byte i = 0;
			do
			:: i < n -> kernel_take(sq[i]); i++
			:: else -> break
			od;
			/* what came after the snapshot moves to the front */
			byte j = 0;
			do
			:: n + j < sqn -> sq[j] = sq[n + j]; j++
			:: else -> break
			od;
			sqn = j
		};
		queued = 0
#else
		acquire();
#ifdef TASK_WORK
		who = 2;
#endif
		submit_all(); release()
#endif
#endif
	:: op[0] == DONE && op[1] == DONE -> break
	od
}
