/* SPDX-License-Identifier: MIT */
/*
 * fdturn.pml -- the turn of one fd direction with several waiters (issue 22):
 * the slot (lib/fdtable.h) holds the waiter that has the turn, the others
 * queue FIFO (lib/waitq.c nodes under the entry's qlock), and the turn
 * travels by fd_event's turn-carrying wake, a waiter leaving the slot on its
 * own, weft__fd_pass when a call returns without EAGAIN, and
 * release_to_head when a turn-carrying wake lost.  NW (2 or 3) coroutines
 * each make one weft_read-like call (lib/io.c io_call: attempt, io_park,
 * retry, io_end) on the reader direction, against data arrivals (the
 * kernel), one harvesting thread (lib/loop.c fd_event), one deadline or
 * cancel of one caller (at any moment: asleep in the slot or the queue,
 * holding the turn, not parked yet), and weft_close (lib/io.c forget).
 *
 * fdslot.pml checks the single-waiter slot with the park word spelled out
 * (PARKING/PARKED/NOTIFIED, the run queue, the timer heap); here the park
 * word is abstract (below), and what is spelled out is the slot word with
 * its QUEUED bit and turn values, the queue, the nodes' claim words and the
 * call's `leave` bits.
 *
 * What is checked
 * ---------------
 *  - at most one turn holder: a call sets FD_WAKE_TURN in its `leave` only
 *    while no other call has it (TAKE_TURN);
 *  - no lost wakeup, as safety: the process `watcher` asserts, in every
 *    quiescent state (every waiter has returned or sleeps in its wait with
 *    its park word unwon, no edge is waiting to be harvested, the harvester
 *    and the closer are not in the middle of an operation), that
 *      . the slot holds no turn (TURN / TURN_READY: nobody would pass it)
 *        and no claim,
 *      . no waiter sleeps while the socket has data (data > 0), except in
 *        the window design.md documents (see `late` below),
 *      . a queued waiter has a holder to hand it the turn: the slot holds a
 *        waiter with QUEUED (unless weft_close is running: it empties the
 *        queue and then the slot);
 *    and with weft_close in the run, close's wait for refs == 0 is not an
 *    end label, so a call never woken is an invalid end state;
 *  - FIFO: a newcomer never overtakes queued waiters: it takes the slot
 *    (NULL -> w) or a left readiness (READY -> NULL) only while the queue is
 *    empty (or the fd is closing); the queue hands the turn to its head;
 *  - no waiter woken twice: each wait's park word is won once (the
 *    abstraction), and a queue node is claimed only while open
 *    (an fd waiter settles under qlock, so its node is open while queued;
 *    waitq_claim CASes it all the same: waitq.pml);
 *  - no touch of a waiter after it left: every waker that dereferences the
 *    waiter or its node (the slot claimer's wake and release, a node
 *    claimer's wake and its WAKING clear) asserts that the io_park frame is
 *    live and is the incarnation it claimed (w_live/w_inc: every retry of
 *    io_park puts w and q at the same stack address);
 *  - a turn is only passed from a turn (weft__fd_pass's WEFT__ASSERT), a
 *    claimed slot is still claimed when its claimer releases it (nobody
 *    else writes a claimed slot), a retracting waiter finds only its own
 *    incarnation in the slot, a node is unlinked only while linked, and no
 *    call reads the fd after weft_close's close(2).
 *
 * The window that is not a bug (design.md, "One window is left"): a call
 * whose EAGAIN came before readiness that another call took without the
 * turn, and which parks only after that call returned (its nudge found no
 * waiter in the slot), sleeps until the next edge.  The ghost late[i] marks
 * a call that was between its EAGAIN and its park when another call ran
 * weft__fd_nudge; the lost-wakeup check exempts it while it sleeps in the
 * slot, or in the queue behind a slot holder that is late too (with three
 * callers, two late ones: one parks in the slot, the other queues behind
 * it).  A late waiter queued behind a holder that is not late is not
 * exempt.  -DSTRICT_WINDOW drops the exemption and spin shows the window
 * (a finding, documented).
 *
 * Configurations (spin -D...)
 *  default           NW=2 callers, 2 arrivals, pipe edges (an edge only when
 *                    the buffer was empty), reads that take everything, one
 *                    message or nothing (a MSG_PEEK or weft_wait-like call:
 *                    returns without EAGAIN and without using the readiness
 *                    up), one deadline/cancel, weft_close.
 *  -DNW=3            three callers (check.sh: with -DNO_CLOSE, and -DNO_INTR
 *                    or -DNDATA=1, to stay small).  -DNW=3 with everything
 *                    else default was run once when this model was written:
 *                    219,441,150 states, 0 errors, complete (depth 278),
 *                    ~16 min and 13 GB (pan -O2 -DCOLLAPSE -w26).
 *  -DNO_CLOSE        no weft_close: a waiter left sleeping with no data is a
 *                    valid end state (its wait is an end label).
 *  -DNO_INTR         no deadline/cancel.
 *  -DNO_PEEK         reads always take data.
 *  -DSOCKET_EDGES    every arrival is an edge (sockets) instead of pipes'.
 *  -DSTRICT_WINDOW   finding: the documented window (above).
 * Seeded bugs (each must give an error)
 *  -DBUG_NO_PASS          io_end does not pass the turn of a call that
 *                         returns without EAGAIN (it nudges as if it had
 *                         readiness without the turn): the turn stays in
 *                         the slot, the queue sleeps with data pending.
 *  -DBUG_TURN_TO_LOSER    weft__fd_release_queued gives the turn to the
 *                         claimed waiter even when the wake lost (its
 *                         deadline or cancel won): the departed waiter
 *                         "holds" the turn, nobody passes it.
 *  -DBUG_ENQ_NO_RECHECK   enqueue trusts the slot value fd_park loaded before
 *                         it took qlock, and sets QUEUED with a blind OR:
 *                         the holder leaves in between (readiness arrives,
 *                         the turn is passed to nobody) and the waiter
 *                         queues behind nobody.
 *  -DBUG_RETRACT_QUEUED   weft__fd_retract only handles w (not w|QUEUED): a
 *                         waiter resumed by its deadline leaves its slot
 *                         naming it; the next readiness wakes a dead waiter.
 *
 * Correspondence (C -> Promela)
 * -----------------------------
 *  e->slot[IN]       slot: low 3 bits S_NULL, S_READY, S_TURN, S_TURN_READY,
 *                    W(i) = 4 + i (waiter of caller i); QB = FD_QUEUED, CB =
 *                    WEFT__SLOT_CLAIMED.  slot_inc (ghost): the incarnation
 *                    of the waiter that published itself there.
 *  e->queue[IN]      qa[0..qlen-1], FIFO; node i is caller i's q[IN].
 *  n->claim          nclaim[i]: C_OPEN 0, C_WAKING (case 1 | WAITQ_WAKING),
 *                    C_DONE (WAKING cleared), C_ABANDONED.
 *  n->result         nturn[i]: turn_result (1) or close's READY|IN (0).
 *  park word         pw[i]: P_RUN, P_ARMED, or the winning result.  ABSTRACT:
 *                    weft__waiter_init = pw := P_ARMED (merged into the
 *                    EAGAIN step: nobody reaches w before the slot CAS or
 *                    the queue push publishes it); weft__waiter_wake = one
 *                    atomic CAS P_ARMED -> result (the winner); the waiter's
 *                    weft__waiter_wait = block until pw != P_ARMED (or the
 *                    cancel flag is set: co_wait's check), then take the
 *                    result; weft__waiter_disarm = one atomic step.  The
 *                    PARKING/PARKED/NOTIFIED states, the run queue and the
 *                    switch-out are park.pml's and fdslot.pml's subject.
 *  results           R_READY = READY|IN, R_READY_TURN = READY|IN|TURN(IN)
 *                    (fd_event, nudge); R_CL_TURN = turn_result|CLAIMED (a
 *                    node claimed by pass / release_to_head); R_CL_CLOSE =
 *                    READY|IN|CLAIMED (a node claimed by close); R_CLOSE =
 *                    ECANCELED (close's slot claim); R_INTR = ETIMEDOUT or
 *                    ECANCELED (deadline or cancel).
 *  io->leave         lv[i]: L_IN (readiness without the turn), L_TURN
 *                    (FD_WAKE_TURN(WEFT_IN)); global only for the checks.
 *  io_begin          load cancelled; load gen (odd: ECANCELED; not 0: the
 *                    fd was closed before, EBADF); FAA refs; load gen.
 *  read(2)           one step on `data`: take all / one / none (peek), or
 *                    EAGAIN (then waiter_init, merged).
 *  weft__fd_park     each iteration "load slot; CAS" is ONE step (a failed
 *                    CAS only retries with nothing written: a stutter), and
 *                    enqueue's qlock section is merged into it (below):
 *                    NULL -> w; READY -> NULL (FD_TOOK_READY); with the
 *                    turn, park_holder TURN_READY -> TURN (took) or TURN ->
 *                    w (|QB kept); else enqueue: claimed -> BACK_OFF (wait
 *                    until the claim is released, look again), else CAS
 *                    v -> v|QB (if not set) and push the node (claim 0).
 *  io_park           after the park: leave &= turns, minus the turn if it
 *                    parked in the slot; `ready || io_closed(io)` (one gen
 *                    load) -> retract, unqueue, waiter_wait(-1) if claimed
 *                    else disarm; otherwise waiter_wait(deadline), retract,
 *                    unqueue; then take_turns (weft__fd_unqueue_done: wait
 *                    while WAKING unless r is this node's claimer's), the
 *                    turn flag of a readiness wake, leave |= IN without a
 *                    turn; the frame ends (w_live = 0) with the last
 *                    io_closed load.
 *  weft__fd_retract  (inline load + slow loop) each "load; CAS" one step:
 *                    not mine -> false; w -> NULL; w|QB -> TURN|QB (true:
 *                    it takes the turn); w|CB -> wait until the slot changes.
 *  weft__fd_unqueue  settle (CAS claim 0 -> ABANDONED), unlink and
 *                    queue_shrunk's first look: one step under qlock;
 *                    queue_shrunk finding a claimed waiter drops qlock,
 *                    waits until the claim is released, retakes it and
 *                    looks again (one step).
 *  weft__fd_pass     qlock; claim_head; CAS turn -> next; unlock: ONE step;
 *                    then weft__wnode_wake outside the lock.
 *  weft__wnode_wake  wake CAS (asserting w live, same incarnation); if it
 *                    lost: clear WAKING (asserting the same).
 *  weft__fd_nudge    load slot (inline) and, for a waiter, slot_claim without
 *                    mark_ready: one step; wake; weft__fd_slot_release.
 *  fd_event          epoll_wait returns the edge + the tag's gen check (one
 *                    step); weft__fd_slot_claim(mark_ready) one step; wake
 *                    (turn flag if QB); weft__fd_slot_release: queued and
 *                    woke -> store TURN|QB; queued and lost ->
 *                    release_to_head (qlock; claim_head; store next; unlock:
 *                    one step) then wake the head; else store NULL/READY.
 *  weft_close        FAA gen (odd); weft__fd_close_wake: qlock + claim every
 *                    node (one step), wake each (wnode_wake), slot_claim
 *                    without mark_ready, wake ECANCELED, store NULL; wait
 *                    refs == 0 (not an end label); unregister (slot NULL),
 *                    FAA gen, close(2): one step (nobody is left).
 *  deadline/cancel   caller 0's (the callers are identical and spin tries
 *                    every interleaving, so which caller is hit is
 *                    symmetric); one step: set the sticky flag (co->cancelled, or the
 *                    deadline passed) and win the park word if armed (the
 *                    timer fires under the heap lock, which the waiter takes
 *                    to leave the heap: fdslot.pml).
 *
 * Merged steps and qlock.  Every qlock section here writes at most one
 * thing that is read without qlock (the slot word; node claims and results
 * are read outside only by their own waiter after it settled under qlock),
 * so each section is one atomic step: acquiring a lock commutes to the
 * right and releasing it to the left of other threads' steps that do not
 * take it (Lipton), and qlock itself needs no variable.  (Nobody waits for
 * a claimed slot while holding qlock: queue_shrunk's backoff drops it.)
 *
 * Memory model: sequentially consistent, as fdslot.pml's header argues:
 * every slot CAS, the gen and refs FAAs and the claim CAS are seq_cst; the
 * loads before a CAS only choose what to CAS; weft__slot_release is a
 * release fence + store read by the retracting waiter's load; the WAKING
 * clear is a release store read with acquire; node links, results and
 * claims otherwise under qlock.  APPROXIMATION: those relaxed/acquire/
 * release accesses are taken as SC.
 *
 * Abstracted away: the writer direction and a waiter on both directions
 * (one weft_wait(IN|OUT) gets one wake for both), the timer heap and the
 * run queue (fdslot.pml), weft_wait's poll(2) and slot_forget, the drained
 * hint (park_if_drained), registration, a second harvester, more than one
 * call per coroutine, and the late-harvester finding of fdslot.pml (2).
 */

#ifndef NW
#define NW 2		/* callers */
#endif
#ifndef NDATA
#define NDATA 2		/* data arrivals */
#endif

/* slot word */
#define S_NULL       0
#define S_READY      1
#define S_TURN       2
#define S_TURN_READY 3
#define W(i)         (4 + (i))
#define QB           8
#define CB           16
#define BASE(v)      ((v) & 7)
#define ISW(v)       (BASE(v) >= 4)
#define WHO(v)       (BASE(v) - 4)
#define HASQ(v)      (((v) & QB) != 0)
#define HASCL(v)     (((v) & CB) != 0)
#define ISTURN(v)    (BASE(v) == S_TURN || BASE(v) == S_TURN_READY)

/* park word / results */
#define P_RUN        0
#define P_ARMED      1
#define R_READY      2
#define R_READY_TURN 3
#define R_CL_TURN    4
#define R_CL_CLOSE   5
#define R_CLOSE      6
#define R_INTR       7
#define NOT_WOKEN    8

/* node claim words */
#define C_OPEN       0
#define C_WAKING     1
#define C_DONE       2
#define C_ABANDONED  3

/* leave bits */
#define L_IN   1
#define L_TURN 2

/* phases (ghost) */
#define PH_RUN    0
#define PH_WIN    1	/* between EAGAIN and the park's publication */
#define PH_PARKED 2	/* in waiter_wait */
#define PH_DONE   3

/* weft__fd_park's outcome */
#define IN_SLOT  1
#define IN_QUEUE 2
#define TOOK     3
#define BACK_OFF 4

#define NONE 255

byte slot = S_NULL;
byte slot_inc;
byte qa[3];
byte qlen;
byte nclaim[3];
bit nturn[3];
byte pw[3];
bit w_live[3];
byte w_inc[3];
bit intr[3];
byte lv[3];
byte phase[3];
bit late[3];

byte data;
bit edge;
byte fd_gen;
byte refs;
bit closed_fd;
bit hbusy;
bit cbusy;

/* the call i takes the turn: nobody else holds it */
inline TAKE_TURN(i) {
	assert(i == 0 || !(lv[0] & L_TURN));
	assert(i == 1 || !(lv[1] & L_TURN));
	assert(i == 2 || !(lv[2] & L_TURN));
	lv[i] = lv[i] | L_TURN
}

/* a newcomer takes the slot or a left readiness: nobody queues before it */
#define FIFO_OK (qlen == 0 || fd_gen != 0)

/* weft__waiter_wake(w, res) by a waker holding w as incarnation inc */
inline wake(who, inc, res, woke) {
	assert(w_live[who] && w_inc[who] == inc);
	if
	:: pw[who] == P_ARMED -> pw[who] = res; woke = 1
	:: else -> woke = 0
	fi
}

inline q_remove(i, k) {
	k = 0;
	do
	:: k < qlen && qa[k] != i -> k++
	:: k < qlen && qa[k] == i ->
		do
		:: k + 1 < qlen -> qa[k] = qa[k + 1]; k++
		:: else -> break
		od;
		qlen--;
		qa[qlen] = 0;
		break
	:: k >= qlen -> assert(false)	/* unlinking a node that is not linked */
	od;
	k = 0
}

/* claim_head under qlock: n and ninc name the claimed node, next the slot's
 * value after the hand-off. */
inline claim_head(n, ninc, next) {
	if
	:: qlen > 0 ->
		n = qa[0];
		qa[0] = qa[1]; qa[1] = qa[2]; qa[2] = 0;
		qlen--;
		assert(nclaim[n] == C_OPEN);	/* sole node: queued, so open */
		assert(w_live[n]);
		ninc = w_inc[n];
		nclaim[n] = C_WAKING;
		nturn[n] = 1;
		next = S_TURN | (qlen > 0 -> QB : 0)
	:: else ->
		n = NONE;
		next = S_READY
	fi
}

/* weft__wnode_wake */
inline wnode_wake(n, ninc, res, woke) {
	atomic { wake(n, ninc, res, woke) };
	if
	:: !woke ->
		atomic {
			assert(w_live[n] && w_inc[n] == ninc);
			nclaim[n] = C_DONE
		}
	:: else
	fi
}

/* weft__fd_slot_release after a claim of (who, inc, qd) whose wake said woke,
 * mark_ready set (fd_event, nudge) */
inline slot_release(who, inc, qd, woke, n, ninc, next) {
#ifdef BUG_TURN_TO_LOSER
#define LOSER_TOO 1
#else
#define LOSER_TOO 0
#endif
	if
	:: qd && (woke || LOSER_TOO) ->	/* the woken waiter holds the turn */
		atomic { assert(ISW(slot) && HASCL(slot)); slot = S_TURN | QB }
	:: qd && !woke && !LOSER_TOO ->
		atomic {	/* release_to_head: qlock; claim_head; store; unlock */
			assert(ISW(slot) && HASCL(slot));
			claim_head(n, ninc, next);
			slot = next
		};
		if
		:: n != NONE -> wnode_wake(n, ninc, R_CL_TURN, woke)
		:: else
		fi
	:: !qd ->
		atomic { assert(ISW(slot) && HASCL(slot)); slot = (woke -> S_NULL : S_READY) }
	fi
}

proctype waiter(byte i) {
	byte g, v, r, n, ninc, next, who, inc, k;
	bit parked, queued, ready, claimed, woke, qd, path, held;

	/* io_begin (the cancelled and gen loads merged: a cancel between
	 * them commutes with the gen load) */
	atomic {
		if
		:: intr[i] -> goto out
		:: else
		fi;
		g = fd_gen;
		if
		:: g != 0 -> goto out	/* odd: closing (ECANCELED); 2: closed (EBADF) */
		:: else
		fi
	};
	atomic { refs++; held = 1 };
	if
	:: fd_gen != g -> goto out	/* ref_drop below */
	:: else
	fi;

attempt:
	atomic {
		assert(!closed_fd);
		if
		:: data > 0 ->
			if
			:: data = 0			/* takes everything */
			:: data > 1 -> data--		/* takes one message, more left */
#ifndef NO_PEEK
			:: skip			/* MSG_PEEK / weft_wait: uses nothing up */
#endif
			fi;
			goto ret
		:: else ->		/* EAGAIN; io_park's weft__waiter_init */
			phase[i] = PH_WIN;
			late[i] = 0;
			w_inc[i]++;
			w_live[i] = 1;
			pw[i] = P_ARMED
		fi
	};

park:	/* weft__fd_park (inline + slow loop), enqueue merged */
	atomic {
		v = slot;
		if
		:: v == S_NULL ->
			assert(FIFO_OK);
			slot = W(i); slot_inc = w_inc[i]; r = IN_SLOT
		:: v == S_READY ->
			assert(FIFO_OK);
			slot = S_NULL; r = TOOK
		:: (lv[i] & L_TURN) && ISTURN(v) ->	/* park_holder */
			if
			:: BASE(v) == S_TURN_READY -> slot = S_TURN | (v & QB); r = TOOK
			:: else -> slot = W(i) | (v & QB); slot_inc = w_inc[i]; r = IN_SLOT
			fi
		:: else ->
			assert(!(lv[i] & L_TURN));	/* a turn stays in the slot */
			assert(ISW(v) || ISTURN(v));
#ifdef BUG_ENQ_NO_RECHECK
			if
			:: ISW(v) && HASCL(v) -> r = BACK_OFF
			:: else -> r = IN_QUEUE	/* decided on this load; qlock next */
			fi
#else
			if
			:: ISW(v) && HASCL(v) -> r = BACK_OFF
			:: else ->
				slot = v | QB;
				qa[qlen] = i; qlen++;
				nclaim[i] = C_OPEN;
				nturn[i] = 0;
				r = IN_QUEUE
			fi
#endif
		fi;
		if
		:: r != BACK_OFF ->
			phase[i] = PH_RUN;
			parked = (r == IN_SLOT);
			queued = (r == IN_QUEUE);
			ready = (r == TOOK);
			/* a turn parked goes back into the slot; readiness anew */
			lv[i] = (parked -> 0 : lv[i] & L_TURN)
		:: else
		fi;
		v = 0
	};
	if
	:: r == BACK_OFF -> !(ISW(slot) && HASCL(slot)); goto park
	:: else
	fi;
#ifdef BUG_ENQ_NO_RECHECK
	if
	:: queued ->
		atomic {	/* under qlock, without a second look */
			slot = slot | QB;
			qa[qlen] = i; qlen++;
			nclaim[i] = C_OPEN;
			nturn[i] = 0
		}
	:: else
	fi;
#endif

	/* the close check after the slot CAS or the queueing */
	atomic {
		path = (ready || fd_gen != g);
		if
		:: path -> goto leave_slot
		:: else -> goto wait
		fi
	};
after_wait:
	if
	:: path -> goto settle
	:: else
	fi;

leave_slot:	/* retract(io, parked, &w) */
	if
	:: parked ->
		do
		:: atomic {
			v = slot;
			if
			:: BASE(v) != W(i) -> k = 0	/* a waker took it */
			:: v == W(i) ->
				assert(slot_inc == w_inc[i]);
				slot = S_NULL; k = 0
			:: v == (W(i) | QB) ->
				assert(slot_inc == w_inc[i]);
#ifdef BUG_RETRACT_QUEUED
				k = 0
#else
				slot = S_TURN | QB;	/* leaving a queue: take the turn */
				TAKE_TURN(i);
				k = 0
#endif
			:: BASE(v) == W(i) && HASCL(v) -> k = 1
			fi
		   };
			if
			:: k -> slot != v	/* at_backoff until the claimer releases */
			:: else -> v = 0; break
			fi
		od
	:: else
	fi;

	/* unqueue: settle + unlink + queue_shrunk under qlock */
	if
	:: queued ->
		atomic {
			claimed = (nclaim[i] != C_OPEN);
			if
			:: !claimed ->
				nclaim[i] = C_ABANDONED;
				q_remove(i, k)
			:: else
			fi
		};
		if
		:: !claimed ->
			do
			:: atomic {
				if
				:: qlen > 0 || !HASQ(slot) -> k = 0
				:: else ->
					if
					:: ISW(slot) && HASCL(slot) -> k = 1
					:: else -> slot = slot & ~QB; k = 0
					fi
				fi
			   };
				if
				:: k -> !(ISW(slot) && HASCL(slot))	/* unlock, back off, relock */
				:: else -> break
				fi
			od
		:: else
		fi
	:: else
	fi;

	if
	:: path ->
		if
		:: claimed -> goto wait	/* weft__waiter_wait(&w, -1) */
		:: else ->
			atomic {	/* weft__waiter_disarm */
				r = pw[i];
				pw[i] = P_RUN;
				if
				:: r == P_ARMED -> r = (ready -> R_READY : R_CLOSE)
				:: else
				fi
			}
		fi
	:: else
	fi;

settle:
	/* take_turns (weft__fd_unqueue_done: wait while WAKING unless r is this
	 * node's claimer's; the turn it handed), a readiness wake's turn,
	 * readiness without a turn, the io_closed load; io_park's frame (w, q)
	 * ends.  One step: the locals commute, and WAKING, once clear, stays. */
	atomic {
		(!claimed || r == R_CL_TURN || r == R_CL_CLOSE || nclaim[i] != C_WAKING) ->
		if
		:: claimed ->
			assert(nclaim[i] == C_WAKING || nclaim[i] == C_DONE);
			if
			:: nturn[i] -> TAKE_TURN(i)
			:: else
			fi;
			ready = 1
		:: else
		fi;
		if
		:: r == R_READY || r == R_READY_TURN || r == R_CL_TURN || r == R_CL_CLOSE ->
			ready = 1;
			if
			:: r == R_READY_TURN || r == R_CL_TURN -> TAKE_TURN(i)
			:: else
			fi
		:: else
		fi;
		if
		:: ready && !(lv[i] & L_TURN) -> lv[i] = lv[i] | L_IN
		:: else
		fi;
		w_live[i] = 0;
		k = (fd_gen != g -> 0 : (ready -> 1 : 0));
		r = 0; parked = 0; queued = 0; ready = 0; claimed = 0; path = 0;
		if
		:: k -> k = 0; goto attempt	/* retry the read */
		:: else -> goto ret	/* ECANCELED (closed), ETIMEDOUT, ECANCELED */
		fi
	};

wait:	/* weft__waiter_wait: co_wait's cancel check, sleep, the result */
	atomic {
		phase[i] = PH_PARKED;
#ifdef NO_CLOSE
end_wait:
#endif
		(pw[i] != P_ARMED || intr[i]) ->
		if
		:: pw[i] == P_ARMED -> pw[i] = R_INTR
		:: else
		fi;
		r = pw[i];
		pw[i] = P_RUN;
		phase[i] = PH_RUN;
		late[i] = 0
	};
	goto after_wait;

ret:	/* io_end: pass the turn, or nudge; then drop the reference */
	if
	:: (lv[i] & L_TURN) ->
#ifdef BUG_NO_PASS
		atomic { lv[i] = 0; v = slot; k = 0 }
#else
		atomic {	/* weft__fd_pass: qlock; claim_head; CAS; unlock */
			claim_head(n, ninc, next);
			assert(ISTURN(slot));
			slot = next;
			lv[i] = 0
		};
		if
		:: n != NONE -> wnode_wake(n, ninc, R_CL_TURN, woke)
		:: else
		fi
#endif
	:: lv[i] == L_IN ->
		atomic {	/* weft__fd_nudge: load; slot_claim(no mark_ready) */
			lv[i] = 0;
			k = 0;
			do	/* the window (see the header) */
			:: k < NW -> if :: phase[k] == PH_WIN -> late[k] = 1 :: else fi; k++
			:: else -> break
			od;
			v = slot;
			if
			:: ISW(v) && !HASCL(v) ->
				slot = v | CB; who = WHO(v); inc = slot_inc; qd = HASQ(v); k = 1
			:: else -> k = 0
			fi
		};
		if
		:: k ->
			atomic { wake(who, inc, (qd -> R_READY_TURN : R_READY), woke) };
			slot_release(who, inc, qd, woke, n, ninc, next)
		:: else
		fi
	:: else
	fi;
out:
	atomic {
		if
		:: held -> refs--; held = 0	/* ref_drop (io_end's, or io_begin's) */
		:: else	/* returned before its reference */
		fi;
		phase[i] = PH_DONE;
		v = 0; r = 0; n = 0; ninc = 0; next = 0; who = 0; inc = 0; k = 0;
		parked = 0; queued = 0; ready = 0; claimed = 0; woke = 0; qd = 0; path = 0
	}
}

proctype harvester() {
	byte v, who, inc, qd, n, ninc, next;
	bit woke, took;
end_h:
	do
	:: atomic { edge -> edge = 0; hbusy = 1; took = (fd_gen == 0) };	/* epoll_wait; tag gen */
		if
		:: took ->
			atomic {	/* weft__fd_slot_claim(mark_ready) */
				v = slot;
				took = 0;
				if
				:: ISW(v) && !HASCL(v) ->
					slot = v | CB; who = WHO(v); inc = slot_inc; qd = HASQ(v); took = 1
				:: ISW(v) && HASCL(v) -> skip	/* someone else is on it */
				:: v == S_NULL -> slot = S_READY
				:: BASE(v) == S_TURN -> slot = S_TURN_READY | (v & QB)
				:: else -> skip	/* readiness is already marked */
				fi;
				hbusy = took;
				v = (took -> v : 0)
			};
			if
			:: took ->
				atomic { wake(who, inc, (qd -> R_READY_TURN : R_READY), woke) };
				slot_release(who, inc, qd, woke, n, ninc, next);
				atomic {
					hbusy = 0;
					v = 0; who = 0; inc = 0; qd = 0; n = 0; ninc = 0; next = 0; woke = 0; took = 0
				}
			:: else
			fi
		:: else -> atomic { hbusy = 0; took = 0 }
		fi
	od
}

proctype producer() {
	byte k;
	do
	:: k < NDATA ->
		atomic {
#ifdef SOCKET_EDGES
			edge = 1;
#else
			if
			:: data == 0 -> edge = 1
			:: else
			fi;
#endif
			data++;
			k++
		}
	:: else -> break
	od
}

/* The deadline or cancel of caller 0: the callers run the same code and
 * spin explores every interleaving, so which one it hits is symmetric (the
 * one hit may be first or last in the queue, in the slot, holding the
 * turn, or not parked yet). */
proctype interrupter() {
	atomic {
		intr[0] = 1;
		if
		:: pw[0] == P_ARMED -> pw[0] = R_INTR
		:: else
		fi
	}
}

proctype closer() {
	byte c[3], ci[3], k, v, who, inc;
	bit woke, took;
	atomic { fd_gen++; cbusy = 1 };	/* odd: closing */
	atomic {	/* close_wake: qlock; claim every node; unlock */
		k = 0;
		do
		:: k < 3 && k < qlen ->
			c[k] = qa[k];
			assert(nclaim[c[k]] == C_OPEN && w_live[c[k]]);
			ci[k] = w_inc[c[k]];
			nclaim[c[k]] = C_WAKING;
			nturn[c[k]] = 0;
			k++
		:: else -> break
		od;
		do
		:: k < 3 -> c[k] = NONE; k++
		:: else -> break
		od;
		qlen = 0; qa[0] = 0; qa[1] = 0; qa[2] = 0;
		k = 0
	};
	do
	:: k < 3 && c[k] != NONE -> wnode_wake(c[k], ci[k], R_CL_CLOSE, woke); k++
	:: else -> break
	od;
	atomic {	/* slot_claim without mark_ready */
		v = slot;
		if
		:: ISW(v) && !HASCL(v) -> slot = v | CB; who = WHO(v); inc = slot_inc; took = 1
		:: else -> took = 0
		fi
	};
	if
	:: took ->
		atomic { wake(who, inc, R_CLOSE, woke) };
		atomic { assert(ISW(slot) && HASCL(slot)); slot = S_NULL }
	:: else
	fi;
	cbusy = 0;
	refs == 0;	/* not an end label: every call must return */
	atomic {	/* unregister, gen even, close(2) */
		slot = S_NULL;
		fd_gen++;
		closed_fd = 1
	}
}

#define WQUIET(j) (j >= NW || phase[j] == PH_DONE || (phase[j] == PH_PARKED && pw[j] == P_ARMED && !intr[j]))
#ifdef STRICT_WINDOW
#define LATE(j) 0
#else
/* the window: j is late and so is the waiter asleep in the slot (j itself,
 * or the one j queued behind) */
#define LATE(j) (late[j] && (ISW(slot) -> late[WHO(slot)] : 0))
#endif
#define NOT_LOST(j) (j >= NW || phase[j] != PH_PARKED || data == 0 || LATE(j))

proctype watcher() {
end_w:
	do
	:: atomic {
		WQUIET(0) && WQUIET(1) && WQUIET(2) && !edge && !hbusy && !cbusy ->
		assert(!ISTURN(slot) && !HASCL(slot));	/* no stranded turn or claim */
		assert(NOT_LOST(0) && NOT_LOST(1) && NOT_LOST(2));	/* no lost wakeup */
		assert(qlen == 0 || (ISW(slot) && HASQ(slot)) || fd_gen != 0)	/* a holder */
	   }
	od
}

init {
	atomic {
		byte j;
		for (j : 0 .. NW - 1) {
			run waiter(j)
		}
		run producer();
		run harvester();
#ifndef NO_INTR
		run interrupter();
#endif
#ifndef NO_CLOSE
		run closer();
#endif
		run watcher()
	}
}
