/* SPDX-License-Identifier: MIT */
/*
 * fdslot.pml -- one fd waiter slot (lib/fdtable.h/.c) under the park word
 * (lib/park.c), as weft_read uses it (lib/io.c), racing against readiness
 * (lib/loop.c fd_event), a deadline (lib/timer.c weft__timers_fire), close
 * (weft_close) and cancel (weft_cancel / weft__park_cancel).
 *
 * Scope since issue 22: any number of coroutines may wait on one direction
 * (fdtable.c queues all but the one in the slot, which holds the turn).
 * With one coroutine the slot never holds another waiter or a turn, nothing
 * is queued (the FD_QUEUED bit is never set), and every step below is what
 * the C code does: the same CASes, the same release values (NULL, READY),
 * retract's CAS(w -> NULL) or wait on w|CLAIMED, close's claim/wake/release
 * NULL.  The one step the C code adds on this path is a load: a call woken
 * by readiness looks at the slot as it returns, for a waiter parked since
 * (weft__fd_nudge), and with one coroutine there is none.  The queue, the
 * FD_QUEUED bit and the turn's hand-offs are not modelled here.
 *
 * What is checked
 * ---------------
 *  - exactly one resumption per wait: one CAS wins each wait generation
 *    (won <= 1), the coroutine is queued at most once per wait (pushes <= 1)
 *    and only resumed from the run queue after its switch-out (on_cpu == 0)
 *    and in CO_RUNNABLE;
 *  - the result it sees is the winning waker's (r == won_res) and the call's
 *    result is one of the causes that actually happened (data read, deadline,
 *    cancel, close);
 *  - no use of the waiter after it is gone: every waker that dereferences the
 *    waiter (w->co, w->gen; the timer heap's entry) asserts that it is live
 *    and is the same incarnation (w_inc) that it claimed.  The coroutine's
 *    io_park runs in a loop (readiness -> retry the read -> park again), and
 *    every incarnation of `struct weft__waiter w` lives at the same stack
 *    address, so a stale pointer would name the new wait;
 *  - nothing is stranded: the process `stranded` asserts that, whenever the
 *    coroutine sits parked (its worker has finished weft__park_finish) and
 *    no waker is in the middle of an operation, it is still PARKED (not
 *    left NOTIFIED/RUNNABLE unqueued), and neither ready data with its edge
 *    already harvested, nor a cancel, nor a close is pending against it;
 *  - weft_close returns: it waits for refs == 0 at a label that is not an
 *    end label (a call left parked on a closed fd is an invalid end state);
 *  - no call reads the fd after weft_close has closed it (the number may
 *    name another file by then).
 *
 * Configurations (spin -D...)
 *  default            one coroutine doing weft_read(fd, deadline) with the
 *                     deadline chosen by spin (none / already past / future),
 *                     two data arrivals (edges), one harvesting thread, a
 *                     canceller, a closer, the timer heap.
 *  -DTWO_HARVESTERS   a second harvesting thread (the monitor harvesting a
 *                     stuck worker's loop while the worker harvests it too).
 *  -DNO_CANCEL / -DNO_CLOSE   leave that waker out (smaller runs).
 *  -DSTRICT_DISARM    also assert r == won_res on io_park's disarm path for a
 *                     cancel: spin then shows the benign race described
 *                     under "Findings" below (1).
 *  -DSTRICT_UNREGISTER  assert that once weft_close has unregistered the fd
 *                     and no waker is busy, the slot stays NULL: spin shows
 *                     finding (2).
 * Seeded bugs
 *  -DBUG_NO_CLAIM        fd_event and weft__fd_slot_wake wake the waiter they
 *                        read from the slot without CASing it to CLAIMED: the
 *                        waiter retracts and moves on while the waker still
 *                        uses it.
 *  -DBUG_NO_CLOSE_CHECK  io_park does not re-check io_closed after its slot
 *                        CAS: it parks on an fd whose close already swept the
 *                        slot.
 *  -DBUG_TIMER_UNLOCKED  weft__timers_fire wakes the waiter after dropping the
 *                        heap lock: weft__timer_remove no longer waits for the
 *                        firing, and the waiter leaves while it is being woken.
 *  -DBUG_GEN_AFTER_REF   io_begin reads gen only once, after its refs FAA (as
 *                        it did before issue 20): a close that runs entirely
 *                        before the FAA goes unnoticed, and the call reads
 *                        the closed fd.
 *
 * Correspondence (C -> Promela); one step per C atomic access unless "merged"
 * ----------------------------------------------------------------------
 *  slot word e->slot[IN]   slot: S_NULL, S_READY, S_W (&w), S_WCL (&w|CLAIMED);
 *                          slot_inc is a ghost: which incarnation of w put it.
 *  co->park_word           pw_state / pw_gen / pw_res (see park.pml).
 *  w (on the stack)        w_live, w_gen (w->gen), w_timers (w->timers),
 *                          w_inc (ghost incarnation number).
 *  e->gen, e->refs         fd_gen, refs.   co->cancelled: cancelled.
 *  io_begin                load cancelled; load gen (odd -> ECANCELED; even but
 *                          not 0: the fd was closed before, EBADF); FAA refs;
 *                          load gen (changed -> ECANCELED).  Registration is
 *                          not modelled: it happens under the reference.
 *  read(2)                 one step on `data` (the socket buffer).
 *  weft__waiter_init       merged load+store of the park word (RUNNING has no
 *                          other writer: every wake_co ignores RUNNING).
 *  weft__fd_slot_park      load slot; CAS NULL->w or READY->NULL; retry.
 *  io_closed               load e->gen.
 *  weft__fd_slot_retract   load; CAS w->NULL; while w|CLAIMED wait (modelled as
 *                          blocking until the slot changes, then reloading).
 *  weft__waiter_disarm     load park word; store (gen,0,RUNNING): two steps.
 *  co_wait                 fence; load cancelled -> weft__waiter_wake(ECANCELED);
 *                          expired -> wake(ETIMEDOUT); deadline -> timer_add
 *                          (under the heap lock: one step); load word; NOTIFIED
 *                          -> store RUNNING (merged: no other writer), else
 *                          switch out; after resuming weft__timer_remove (one
 *                          step under the heap lock); load the result.
 *  weft__co_run (after the switch) load state; weft__park_finish: load; CAS
 *                          PARKING->PARKED; else load + store RUNNABLE + queue.
 *  the scheduler           `sched`: takes the coroutine off the run queue
 *                          (weft__schedule / weft__schedule_ready: the queue is
 *                          abstract) and resumes it.
 *  wake_co                 load word (after reading w->co, w->gen); CAS; queue.
 *  fd_event                epoll_wait returns the edge + load e->gen vs the
 *                          tag's gen (one step, see harvester()); weft__fd_slot_claim(mark_ready): load;
 *                          CAS NULL->READY / CAS w->w|CLAIMED; wake_ready;
 *                          weft__fd_slot_release: release fence + store
 *                          READY (wake lost) or NULL.
 *  weft_close              FAA gen (odd); weft__fd_slot_wake(ECANCELED, false):
 *                          claim (no READY), wake, release NULL; wait refs == 0;
 *                          weft__loop_unregister: store slot NULL; the gen
 *                          moves around close(2) (one FAA here; the close(2)
 *                          phase and the next file: fdclose.pml).
 *  weft_cancel             FAA cancelled; weft__park_cancel = wake_co(any_gen).
 *  weft__timers_fire       lock; pop w (heap entry: in_heap/heap_inc); wake_ready
 *                          (ETIMEDOUT) under the lock; unlock.
 * Result codes are distinct per cause here (R_CLOSE and R_CANCEL are both
 * ECANCELED in C) so the checks can tell the causes apart.
 *
 * Memory model
 * ------------
 * spin is sequentially consistent.  Valid here because every slot CAS, the
 * park-word CASes, the gen and refs FAAs and the cancelled FAA are seq_cst
 * RMWs (atomic.h brackets them with dmb ish on AArch64; lock-prefixed on
 * x86-64), and the two Dekker pairs are RMW/fence -> load:
 *   closer: FAA gen (seq_cst) -> claim's load of the slot;
 *   waiter: slot CAS (seq_cst) -> io_closed's relaxed load of gen;
 *   canceller: FAA cancelled (seq_cst) -> park word load;
 *   waiter: park word store (relaxed, waiter_init) -> at_fence_store_load in
 *   co_wait -> relaxed load of cancelled.
 * APPROXIMATIONS: the slot and park-word loads before each CAS, io_closed's
 * gen load, the refs load in weft_close and the timer heap's `next` are
 * relaxed (ck_pr_load); weft__fd_slot_release is a release fence + relaxed
 * store (pairs with the retracting waiter's CAS/load that reads it); the
 * park word stores in waiter_init / disarm / co_wait are relaxed and ordered
 * for the wakers by the slot CAS that publishes w (seq_cst) and, for the
 * disarm, by nothing (see Findings (1)).  data/edge model the kernel, not
 * memory.
 *
 * Findings (C behaviour, modelled as is; neither is a correctness bug)
 * --------------------------------------
 *  (1) weft__waiter_disarm (park.c) says "No waker can reach w, so nobody else
 *  writes the word now", but weft__park_cancel reaches the coroutine, not w,
 *  for any generation.  If weft_cancel's CAS (gen, PARKING) -> (gen,
 *  ECANCELED, NOTIFIED) lands between disarm's load (PARKING) and its store
 *  (gen, 0, RUNNING), that store erases the NOTIFIED word: park_cancel
 *  returned true but nobody sees its result; io_park returns the readiness
 *  (or, when the disarm was for a close, the close's ECANCELED) instead.  Benign, because co->cancelled is sticky and checked after a
 *  StoreLoad fence by every later wait (co_wait) and call (io_begin), so the
 *  cancel is delivered at the next blocking point.  -DSTRICT_DISARM shows it.
 *
 *  (2) fd_event checks the event's tag against e->gen and only then claims
 *  the slot; nothing stops weft_close from running to completion in between
 *  (gen odd, sweep, refs == 0, weft__loop_unregister stores NULL, gen even,
 *  close(2)).  The late harvester then CASes NULL -> READY into the entry of
 *  a closed fd (or claims and wakes a waiter of the fd number's next owner,
 *  whose registration does not reset the slots).  Benign: the next waiter
 *  takes it for readiness, retries its syscall, gets EAGAIN and parks again
 *  (io_park's wakes "may be spurious"), but loop.c's "no readiness carries
 *  over" is not strictly true.  -DSTRICT_UNREGISTER shows it.
 */

#ifndef NEDGES
#define NEDGES 2	/* data arrivals */
#endif

#define S_NULL  0
#define S_READY 1
#define S_W     2
#define S_WCL   3

#define CO_RUNNABLE  1
#define CO_RUNNING   2
#define CO_PARKING   4
#define CO_PARKED    5
#define CO_NOTIFIED  6

/* results */
#define R_NONE     0
#define R_READY    1	/* WEFT__PARK_WAKE_READY | WEFT_IN */
#define R_TIMEDOUT 2	/* ETIMEDOUT */
#define R_CANCEL   3	/* ECANCELED from weft_cancel */
#define R_CLOSE    4	/* ECANCELED from weft_close */
#define R_OK       5	/* the read returned data */
#define R_BADF     6	/* the fd was closed before the call began */
#define NOT_WOKEN  255

#define DL_NONE   0
#define DL_PAST   1
#define DL_FUTURE 2

/* the fd entry */
byte slot = S_NULL;
byte slot_inc;		/* ghost: incarnation of w held by slot */
byte fd_gen;
byte refs;
/* the socket */
bit data;
bit edge;		/* epoll has an undelivered edge for the fd */
/* the coroutine */
byte pw_state = CO_RUNNING;
byte pw_gen;
byte pw_res;
bit cancelled;
bit on_cpu = 1;		/* the coroutine's stack is in use by a CPU */
bit co_waiting;		/* model: switched out, its worker done with it */
byte queued;		/* run-queue entries */
bit resumed;		/* the scheduler handed the CPU back */
bit co_done;
/* the waiter frame */
bit w_live;
byte w_gen;
bit w_timers;
byte w_inc;		/* ghost: which io_park incarnation */
/* ghosts per wait generation */
byte won;		/* successful wake CASes */
byte won_res;
byte pushes;
/* the timer heap */
bit hlock;
bit in_heap;
byte heap_inc;
/* model: wakers in the middle of an operation */
byte busy;
bit unregistered;	/* model: weft_close has finished */

/* ---------------------------------------------------------- wake_co */

inline push_runq() {
	d_step { assert(pushes == 0); pushes++; queued++ }
}

/*
 * wake_co(w->co, gen, any_gen, res): returns ok = 1 if its CAS won.
 * VIA_W: the caller holds w (claimed, or under the heap lock) as incarnation
 * minc; reading w->gen is a dereference of w.  Otherwise any_gen (cancel).
 */
inline wake_co(VIA_W, minc, res, ok, g, l_st, l_gen, l_res) {
	if
	:: VIA_W ->
		d_step { assert(w_live && w_inc == minc); g = w_gen }	/* w->co, w->gen */
	:: else
	fi;
	ok = 0;
	do
	:: d_step { l_st = pw_state; l_gen = pw_gen; l_res = pw_res };	/* load */
		if
		:: VIA_W && l_gen != g -> break
		:: else
		fi;
		if
		:: l_st != CO_PARKING && l_st != CO_PARKED -> break
		:: else
		fi;
		d_step {						/* CAS */
			if
			:: pw_state == l_st && pw_gen == l_gen && pw_res == l_res ->
				ok = 1;
				won++;
				assert(won == 1);
				won_res = res;
				pw_res = res;
				if
				:: l_st == CO_PARKING -> pw_state = CO_NOTIFIED
				:: else -> pw_state = CO_RUNNABLE
				fi
			:: else
			fi
		};
		if
		:: ok -> break
		:: else
		fi
	od;
	if
	:: ok && l_st == CO_PARKED -> push_runq()
	:: else
	fi;
	d_step { g = 0; l_st = 0; l_gen = 0; l_res = 0 }
}

/*
 * weft__fd_slot_claim(slot, mark_ready): w = 1 and minc set if it claimed.
 * With BUG_NO_CLAIM the waker takes the waiter it read, without the CAS.
 */
inline slot_claim(MARK_READY, w, minc, v) {
	w = 0;
	do
	:: d_step { v = slot; minc = slot_inc };			/* load */
		if
		:: v == S_NULL ->
			if
			:: !MARK_READY -> break
			:: else ->
				d_step {				/* CAS NULL -> READY */
					if
					:: slot == S_NULL -> slot = S_READY; v = NOT_WOKEN
					:: else
					fi
				};
				if
				:: v == NOT_WOKEN -> break
				:: else
				fi
			fi
		:: v == S_READY || v == S_WCL -> break
		:: v == S_W ->
#ifdef BUG_NO_CLAIM
			w = 1; break
#else
			d_step {				/* CAS w -> w|CLAIMED */
				if
				:: slot == S_W -> slot = S_WCL; w = 1
				:: else
				fi
			};
			if
			:: w -> break
			:: else
			fi
#endif
		fi
	od;
	v = 0
}

/* weft__fd_slot_release: release fence; store READY or NULL */
inline slot_release(LEAVE_READY) {
	if
	:: LEAVE_READY -> slot = S_READY
	:: else -> slot = S_NULL
	fi
}

/* weft__fd_slot_retract(slot, w) */
inline retract(inc, v, g) {
	do
	:: d_step { v = slot; g = slot_inc };			/* load */
		if
		:: v == S_W ->
			assert(g == inc);			/* it can only be ours */
			d_step {				/* CAS w -> NULL */
				if
				:: slot == S_W -> slot = S_NULL; v = 0
				:: else
				fi
			};
			if
			:: v == 0 -> break
			:: else
			fi
		:: v == S_WCL -> (slot != S_WCL)	/* a waker is between claim and release */
		:: else -> break			/* a waker took it and is done */
		fi
	od;
	atomic { v = 0; g = 0 }
}

/* ---------------------------------------------------------- coroutine */

active proctype co()
{
	byte dl, g0, v, r, g, l_st, l_gen, l_res, inc, result;
	bit ready, parked, ok, closed;

	if
	:: dl = DL_NONE
	:: dl = DL_PAST
	:: dl = DL_FUTURE
	fi;

	/* ---- io_begin ---- */
	if
	:: cancelled -> result = R_CANCEL; goto finished	/* weft__co_cancelled */
	:: else
	fi;
#ifdef BUG_GEN_AFTER_REF
	refs++;				/* the old order: gen read once, after the FAA */
	g0 = fd_gen;
	if
	:: g0 & 1 -> refs--; result = R_CLOSE; goto finished
	:: else
	fi;
#else
	g0 = fd_gen;			/* the generation the call starts in */
	if
	:: g0 & 1 -> result = R_CLOSE; goto finished	/* weft_close is running */
	:: g0 != 0 -> result = R_BADF; goto finished	/* closed before: EBADF */
	:: else
	fi;
	refs++;
	if
	:: fd_gen != g0 -> refs--; result = R_CLOSE; goto finished	/* a close ran */
	:: else
	fi;
#endif

	/* ---- weft_read's loop ---- */
read:
	atomic {					/* read(2) */
		assert(!unregistered);		/* never after weft_close's close(2) */
		if
		:: data -> data = 0; result = R_OK
		:: else -> result = R_NONE
		fi
	};
	if
	:: result == R_OK -> goto io_end
	:: else
	fi;

	/* ---- io_retry(EAGAIN) -> io_park(io, WEFT_IN, deadline) ---- */
	d_step {					/* weft__waiter_init */
		inc++;
		w_live = 1; w_inc = inc; w_timers = 0;
		pw_gen++; w_gen = pw_gen; pw_res = 0; pw_state = CO_PARKING;
		won = 0; won_res = 0; pushes = 0;
		ready = 0; parked = 0; r = NOT_WOKEN
	};
	/* weft__fd_slot_park */
	do
	:: v = slot;
		if
		:: v == S_NULL ->
			d_step {
				if
				:: slot == S_NULL -> slot = S_W; slot_inc = inc; parked = 1
				:: else
				fi
			};
			if
			:: parked -> break
			:: else
			fi
		:: v == S_READY ->
			d_step {
				if
				:: slot == S_READY -> slot = S_NULL; ready = 1
				:: else
				fi
			};
			if
			:: ready -> break
			:: else
			fi
		:: else -> assert(false)	/* another waiter or a turn: the queue (fdtable.c),
						 * which one coroutine never reaches */
		fi
	od;
	v = 0;
	/* the close check after the slot CAS */
#ifdef BUG_NO_CLOSE_CHECK
	closed = 0;
#else
	closed = (fd_gen != g0);
#endif

	if
	:: ready || closed ->
		/* retract; weft__waiter_disarm */
		if
		:: parked -> retract(inc, v, g)
		:: else
		fi;
		d_step { l_st = pw_state; l_res = pw_res };	/* disarm: load */
		r = (l_st == CO_NOTIFIED -> l_res : NOT_WOKEN);
		d_step { pw_state = CO_RUNNING; pw_res = 0; l_st = 0; l_res = 0 };	/* store */
#ifdef STRICT_DISARM
		assert(won == 0 || r == won_res);
#else
		assert(won == 0 || won_res == R_CANCEL || r == won_res);
#endif
		if
		:: r == NOT_WOKEN -> r = (ready -> R_READY : R_CLOSE)
		:: else
		fi
	:: else ->
		/* ---- weft__waiter_wait -> co_wait ---- */
		if
		:: cancelled ->					/* after the StoreLoad fence */
			wake_co(1, inc, R_CANCEL, ok, g, l_st, l_gen, l_res)
		:: else ->
			if
			:: dl == DL_PAST ->
				wake_co(1, inc, R_TIMEDOUT, ok, g, l_st, l_gen, l_res)
			:: dl == DL_FUTURE ->
				atomic {			/* weft__timer_add */
					hlock == 0 ->
					in_heap = 1; heap_inc = inc; w_timers = 1
				}
			:: else
			fi
		fi;
		ok = 0;
		v = pw_state;					/* load word */
		if
		:: v == CO_NOTIFIED ->
			d_step { pw_state = CO_RUNNING; v = 0 }	/* do not switch */
		:: else ->
			d_step { on_cpu = 0; v = 0 };		/* weft__co_switch_out */
			/* the worker, on its own stack: co_run's switch, park_finish */
			v = pw_state;
			assert(v == CO_PARKING || v == CO_NOTIFIED);
			g = pw_gen;
			d_step {
				if
				:: pw_state == CO_PARKING && pw_gen == g && pw_res == 0 ->
					pw_state = CO_PARKED; v = 0
				:: else
				fi
			};
			if
			:: v != 0 ->				/* a waker came first */
				g = pw_res;			/* load */
				d_step { assert(pw_state == CO_NOTIFIED); pw_state = CO_RUNNABLE; g = 0 };
				push_runq()
			:: else
			fi;
			d_step { v = 0; g = 0; co_waiting = 1 };
end_park:		atomic { resumed -> resumed = 0; co_waiting = 0; on_cpu = 1 }
		fi;
		if
		:: w_timers ->
			atomic {				/* weft__timer_remove */
				hlock == 0 ->
				if
				:: in_heap && heap_inc == inc -> in_heap = 0
				:: else
				fi
			}
		:: else
		fi;
		r = pw_res;					/* park_result(load) */
		assert(won == 1 && r == won_res);
		/* retract */
		if
		:: parked -> retract(inc, v, g)
		:: else
		fi
	fi;
	/* io_park's return; the frame (and w) is gone */
	if
	:: fd_gen != g0 -> r = R_CLOSE				/* io_closed */
	:: else
	fi;
	d_step { w_live = 0; ready = 0; parked = 0; closed = 0 };
	/* io_retry: readiness -> read again; else fail with the error */
	if
	:: r == R_READY -> r = 0; goto read
	:: else -> result = r; r = 0
	fi;

io_end:
	refs--;
finished:
	/* the call's result is one of the causes that happened */
	assert(result == R_OK || result == R_BADF ||
	       (result == R_TIMEDOUT && dl != DL_NONE) ||
	       (result == R_CANCEL && cancelled) ||
	       (result == R_CLOSE && fd_gen != 0));
	co_done = 1
}

/* ---------------------------------------------------------- scheduler */

active proctype sched()
{
end:
	do
	:: atomic {
		queued > 0 ->
		queued--;
		assert(on_cpu == 0);		/* its switch-out completed */
		assert(pw_state == CO_RUNNABLE);
		pw_state = CO_RUNNING;		/* weft__co_run */
		resumed = 1
	   }
	od
}

/* ---------------------------------------------------------- wakers */

/* the kernel: data arrives, epoll queues an edge (coalesced while pending) */
active proctype kernel()
{
	byte k;
	for (k : 1 .. NEDGES) {
		d_step { data = 1; edge = 1 }
	}
}

/* a thread harvesting the loop: epoll_wait returns the edge; fd_event */
proctype harvester()
{
	byte w, minc, v, g, l_st, l_gen, l_res;
	bit ok, stale;
end:
	do
	:: d_step {
		/* epoll_wait returns the edge; fd_event loads e->gen (merged:
		 * the return touches no memory of the protocol, so it commutes
		 * with everything between the two) */
		edge -> edge = 0; busy++;
		stale = (fd_gen != 0)
	   };
		if
		:: stale -> d_step { stale = 0; busy-- }	/* closed since: the tag's gen is stale */
		:: else ->
			slot_claim(1, w, minc, v);
			if
			:: w ->
				wake_co(1, minc, R_READY, ok, g, l_st, l_gen, l_res);
				d_step { slot_release(!ok); w = 0; minc = 0; ok = 0; busy-- }
			:: else -> d_step { minc = 0; busy-- }
			fi
		fi
	od
}

#ifndef NO_CANCEL
active proctype canceller()
{
	byte g, l_st, l_gen, l_res;
	bit ok;
	d_step { cancelled = 1; busy++ };		/* at_faa_uint */
	wake_co(0, 0, R_CANCEL, ok, g, l_st, l_gen, l_res);	/* weft__park_cancel */
	busy--
}
#endif

#ifndef NO_CLOSE
active proctype closer()
{
	byte w, minc, v, g, l_st, l_gen, l_res;
	bit ok;
	d_step { fd_gen++; busy++ };			/* FAA gen: odd */
	slot_claim(0, w, minc, v);			/* weft__fd_slot_wake */
	if
	:: w ->
		wake_co(1, minc, R_CLOSE, ok, g, l_st, l_gen, l_res);
		d_step { slot_release(0); w = 0; minc = 0; ok = 0 }
	:: else
	fi;
	busy--;
	refs == 0;			/* not an end label: a stuck call is an error */
	slot = S_NULL;			/* weft__loop_unregister */
	d_step { fd_gen++; unregistered = 1 }	/* gen moves on; close(2) */
}
#endif

/* the worker's (or the monitor's) weft__timers_fire */
active proctype timer()
{
	byte minc, g, l_st, l_gen, l_res;
	bit ok;
end:
	do
	:: atomic { in_heap && hlock == 0 -> hlock = 1; in_heap = 0; minc = heap_inc; busy++ };
#ifdef BUG_TIMER_UNLOCKED
		hlock = 0;
#endif
		wake_co(1, minc, R_TIMEDOUT, ok, g, l_st, l_gen, l_res);
#ifdef BUG_TIMER_UNLOCKED
		d_step { ok = 0; minc = 0; busy-- }
#else
		d_step { hlock = 0; ok = 0; minc = 0; busy-- }
#endif
	od
}

/* ---------------------------------------------------------- checker */

active proctype stranded()
{
end:
	do
	:: atomic {
		(co_waiting && queued == 0 && !resumed && busy == 0) ->
		assert(pw_state == CO_PARKED);		/* not NOTIFIED/RUNNABLE unqueued */
		assert(!cancelled);			/* a cancel that did not wake it */
		assert(fd_gen == 0);			/* a close that did not wake it */
		assert(!(data && !edge))		/* readiness harvested but lost */
	   }
#ifdef STRICT_UNREGISTER
	:: atomic { (unregistered && busy == 0) -> assert(slot == S_NULL) }
#endif
	od
}

init {
	atomic {
		run harvester();
#ifdef TWO_HARVESTERS
		run harvester()
#endif
	}
}
