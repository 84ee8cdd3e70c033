/* SPDX-License-Identifier: MIT */
/*
 * park.pml -- the park/wake protocol (lib/park.c, lib/coro.c) together with
 * the scheduler's spinning/idle handshake (lib/worker.c).
 *
 * What is checked
 * ---------------
 *  (1) safety: a coroutine is dispatched only in CO_RUNNABLE, is never run
 *      by two workers at once and is never resumed before the worker that
 *      ran it last has completed its switch-out (on_cpu[c] == NONE at
 *      weft__co_run); it sits in at most one run queue at a time; a
 *      coroutine leaves only in the states weft__co_run accepts (its
 *      `default: abort()`); the waiter resumes with the waker's result.
 *  (2) no lost wakeup, as a safety property:
 *      - the process `lost_wakeup` asserts, in every state where both
 *        workers sleep in weft__loop_wait with no wake-up token pending and
 *        the plain thread is between operations, that every run queue is
 *        empty and no coroutine is left RUNNABLE-but-unqueued, or PARKED
 *        although its wake already happened, or exited but not finished
 *        (co_finish, counted in `done`): in such a state the checker can
 *        always step, so the system never deadlocks and the join below
 *        alone would not reveal it;
 *      - the plain thread ends by joining (waiting until every coroutine has
 *        finished: weft__workers_all_finished), at a label that is not an end
 *        label, so a coroutine stranded for good is an invalid end state.
 *      Workers sleep at `end_sleep` (a valid end state); nothing else may
 *      block at the end.  No `timeout` is used anywhere.
 *
 * Configurations (spin -D...)
 *  default        NCO = 1: coroutine 0 waits on an event; the plain thread T
 *                 spawns it (injection queue) and then sets the event, which
 *                 wakes it from outside the runtime (weft__schedule with no
 *                 worker: inject_push + notify_work).
 *  -DSETTER_CO    NCO = 2: T spawns both; coroutine 1 sets the event, so the
 *                 wake comes from a coroutine on a worker (its own queue).
 *  -DSPURIOUS     weft__loop_wait may also return without a token (a timer
 *                 or an fd of the loop, or epoll's spurious return).
 *  -DFILL=N       a worker that found nothing may fill the stack depot
 *                 (lib/stack.c, weft__stack_depot_fill: a burst of spawns
 *                 emptied it), N times in all: a job taken like a
 *                 coroutine, spinning stopped first, then it looks again.
 *  -DNW=3         three workers (default 2): with one busy and one spinning,
 *                 the third is refused by the spinner limit (may_spin) while
 *                 work it may not take is in sight.  The lost_wakeup watcher
 *                 covers NW 2 and 3.
 *  (3) with -DMAX_RETRACTS=N, no hot loop of a refused worker: a worker
 *      refused by may_spin whose park re-check retracts N times in a row (no dispatch, no
 *      sleep, no spinning in between) fails an assertion.  A retraction is
 *      justified only when no spinner is counted: each one then needs a
 *      spinner to give up in between, so a bounded count is the model's
 *      form of "it does not loop" (the livelock itself is a cycle, which
 *      the safety search does not see).
 * Seeded bugs (each must make spin report an error):
 *  -DBUG_NO_RECHECK   park_worker sleeps without any_work() after announcing
 *                     idle (no Dekker re-check): a lost wakeup.
 *  -DBUG_SPIN_DEC_LATE  park_worker re-checks the queues before it stops
 *                     counting itself as a spinner (nr_spinning--), so a
 *                     publisher in between sees a spinner and wakes nobody.
 *  -DBUG_WATCH_NO_RECHECK  a spinner that watched the queues until SPIN_NS
 *                     (spin_on) sleeps without re-checking them, since it
 *                     "has just looked": a publisher after its last look saw
 *                     it spinning and woke nobody.
 *  -DBUG_EARLY_QUEUE  wake_co queues a coroutine it finds in PARKING instead
 *                     of leaving it NOTIFIED for weft__park_finish: it can be
 *                     resumed before its switch-out completed.
 *  -DBUG_REFUSED_LOOP  (with -DNW=3 -DSETTER_CO) the park re-check retracts on
 *                     any work in sight, also while a spinner is counted: a
 *                     refused worker retracts, is refused again, parks,
 *                     retracts... on the idle lock (assertion (3)).
 *  -DFINDING_NO_STOP_WAKE  stop_spinning never wakes another worker (invariant
 *                     (2) dropped): spin reports no error, so no change of
 *                     that wake is checked by this model (check.sh runs it
 *                     as `ok`, the blind spot); stopwake.pml checks it.
 *  -DBUG_FILL_KEEPS_COUNT  (with -DFILL) the fill job clears the worker's
 *                     spinning flag without nr_spinning--: publishers go
 *                     on seeing a spinner that is gone, and wake nobody.
 *  -DBUG_NO_FINISH_LEFT  (with -DSETTER_CO) a coroutine resumed by a direct
 *                     switch skips its predecessor's after_left: the setter,
 *                     which exits straight into the waiter it woke, is never
 *                     finished, so T's join waits for good.
 *
 * Correspondence (C function -> Promela)
 * --------------------------------------
 *  park word co->park_word = (gen, result, state): pw_gen[c], pw_res[c],
 *  pw_state[c].  Each C atomic load / store / CAS / FAA on a shared word is
 *  one Promela step, except where noted "merged": a merge is only done where
 *  no other thread can observe the intermediate state (the reason is given).
 *
 *  weft_spawn (plain thread)  T: pw_state = RUNNABLE; inject_push (fifo_push:
 *                             under the inject lock, len store = 1 step);
 *                             notify_work.
 *  weft__waiter_init +        coroutine 0, pc W_START: the event object (a
 *  weft__wait_enqueue         mutex-protected flag + one waiter, like sync.c
 *                             on waitq.c) in one step under ev_lock: if the
 *                             flag is set go on, else gen+1 / PARKING /
 *                             result 0 and publish c in ev_slot.  Merged:
 *                             the park word is reachable only through
 *                             ev_slot, under ev_lock (cancel is not modelled
 *                             here; fdslot.pml models weft_cancel).
 *  co_wait                    pc W_WAIT: the StoreLoad fence + cancelled
 *                             load are omitted (no cancel); load park word;
 *                             NOTIFIED -> store RUNNING and keep running
 *                             (merged load+store: a NOTIFIED word has no
 *                             other writer), else weft__co_switch_out.
 *  weft__co_switch_out        the step that sets on_cpu[c] = NONE: from then
 *                             on the worker runs on its own stack.
 *  co_wait (after resume)     pc W_RESUMED: load the result; relock, retract
 *                             (weft__wait_park / settle), unlock: one step.
 *  co_main end                pc W_EXIT: store EXITING (merged load+store:
 *                             RUNNING has no other writer) + switch-out.
 *  weft__co_run               worker: load + store RUNNING (merged: RUNNABLE
 *                             has no other writer), on_cpu = me; the
 *                             coroutine's steps; then `switch (load state)`:
 *                             PARKING/NOTIFIED -> weft__park_finish, EXITING
 *                             -> co_finish (done++; the join word is not
 *                             modelled: T joins through `done`), anything
 *                             else -> assert(false) (the C code aborts).
 *  weft__co_switch_out with   after the switch-out, optionally take_local
 *  a direct successor         (weft__worker_successor: the tick may send it
 *                             to the scheduler instead), then the leaver's
 *                             after_left as above, then the successor runs
 *                             (co_run's dispatch step, no find_local).  The
 *                             runnext slot is modelled as the deque's
 *                             bottom: the owner takes both the same way.
 *                             The C successor may also come from w's ready
 *                             FIFOs, the injection queue or its yield FIFO
 *                             (worker.c, pick): queues the park protocol
 *                             sees only through weft__schedule and the
 *                             dispatch, as it sees the deque.
 *  weft__park_finish          load word (gen); CAS (gen,0,PARKING) ->
 *                             (gen,0,PARKED); on failure load, store
 *                             (gen,result,RUNNABLE), weft__schedule.
 *  wake_co                    load word; gen / state checks; CAS to
 *                             NOTIFIED (from PARKING) or RUNNABLE (from
 *                             PARKED, then weft__schedule); a failed CAS
 *                             reloads.  The setter runs it under ev_lock,
 *                             like weft__wnode_wake.
 *  weft__schedule             on a worker: the swap into its runnext slot
 *                             (and push_local of a displaced coroutine) is
 *                             the abstract queue's push, then notify_work
 *                             (nworkers=2) if it displaced one (see
 *                             schedule_on); not on a worker: inject_push,
 *                             then notify_work.
 *  notify_work                fence; load nr_spinning; load nr_idle;
 *                             wake_idle_worker.
 *  wake_idle_worker           lock idle_lock + load/store nr_idle + pop idle[]
 *                             + woken_spinning = 1 (one step: woken_spinning
 *                             is read by the popped worker only after it took
 *                             idle_lock itself in retract_idle); FAA
 *                             nr_spinning (own step: read without the lock);
 *                             unlock; weft__loop_wake = token[w] = 1
 *                             (eventfd write).
 *  announce_idle              one step: lock, idle[n] = me, store nr_idle
 *                             (its only store read outside the lock), unlock.
 *  retract_idle               one step likewise (waits for idle_lock).
 *  park_worker                announce_idle; FAA nr_spinning-- if spinning;
 *                             fence; any_work (inject len, deque 0 size,
 *                             deque 1 size: three loads, three steps; the
 *                             ready FIFOs are always empty here); then
 *                             retract_idle + weft__loop_take_token (token = 0,
 *                             a non-blocking eventfd read), or
 *                             weft__loop_wait (end_sleep: block until the
 *                             token, consume it) + retract_idle; finally
 *                             woken_spinning -> spinning.
 *  worker_main / find_local   take_local (own deque), inject_pop (len load,
 *                             then the locked pop: 1 step each), may_spin,
 *                             steal_work, stop_spinning, weft__co_run,
 *                             park_worker.  The yield FIFO, the ready FIFO,
 *                             loop_service, the fairness turns, stopping and
 *                             draining are not modelled (no yields, timers,
 *                             fds or shutdown here).
 *  may_spin                   load nr_idle, load nr_spinning (others =
 *                             nworkers - 1 - idle; others == 0 or 2 *
 *                             spinning > others? then no), FAA +1.
 *  weft__idle_spin_on         only while nr_spinning == 1 (load): the
 *                             watch, any_work's three loads until one shows
 *                             work (back to find_local) or it gives up
 *                             (nondeterministic: SPIN_NS), then park_worker.
 *                             idle_short and the fds' count are left out (any
 *                             outcome of theirs is a path explored).
 *  stop_spinning              FAA -1 (returns old); old == 1 and a load
 *                             of nr_idle != 0 -> any_work
 *                             (work_in_sight, and a runnext slot only when its
 *                             owner looks stopped: the abstract queue holds
 *                             the slot too, so the model looks at it; a lone
 *                             slot is published with no notify either; the
 *                             slot rule is stopwake.pml's) -> notify_work if
 *                             found.
 *                             This wake is for parallelism, not for the
 *                             invariant: the spinner itself looks at every
 *                             queue again before it sleeps, so no seeded
 *                             bug of the look is a lost wakeup here (a
 *                             coroutine that never returns is not modelled).
 *  steal_work                 one pass: steal from the other worker's deque,
 *                             then inject_pop.  STEAL_ROUNDS repeats the same
 *                             loads, each of which may find nothing, so one
 *                             round covers every outcome; steal_more never
 *                             moves anything with <= 2 items (n = size/2).
 *
 * The deques are abstract here: push/take/steal are atomic operations on a
 * small array (deque.pml checks the Chase-Lev algorithm itself; its
 * take_local/weft__deque_size read is one load of the size).  Each abstract
 * queue stands for a worker's runnext slot and deque together: the slot is
 * its newest item (take_runnext, then take_local), thieves take the deque's
 * top before the slot, and a coroutine displaced from the slot enters the
 * deque only after its successor is in the slot, so a reader of both
 * (any_work) never sees neither while either holds it.
 *
 * Memory model
 * ------------
 * spin is sequentially consistent.  What makes that valid for this protocol:
 *  - every RMW (at_cas_*, at_faa_*, at_fas_*) is seq_cst: bracketed by
 *    `dmb ish` on AArch64, `lock`-prefixed on x86-64 (atomic.h);
 *  - the Dekker pairs have explicit StoreLoad fences (mfence / dmb ish):
 *    weft__schedule: the runnext swap and a push (bottom store / inject
 *    lock) -> notify_work's at_fence_store_load -> loads of nr_spinning,
 *    nr_idle;
 *    park_worker: nr_idle store (announce_idle, released by the mutex) and
 *    the nr_spinning FAA -> at_fence_store_load -> any_work's loads.
 *    When the worker was not spinning, its last store before the fence is
 *    the nr_idle store inside announce_idle; pthread_mutex_unlock is a
 *    release only, and the explicit fence after it is what orders that
 *    store before any_work's loads.
 *  - APPROXIMATIONS (relaxed/acquire/release only in C, SC here):
 *    * notify_work's loads of nr_spinning and nr_idle are relaxed
 *      (ck_pr_load), ordered after the push only by the preceding fence;
 *    * any_work's loads (inject.len, bottom, top, ready.len) are relaxed,
 *      after the fence; weft__deque_size reads bottom then top with no
 *      fence between them (a racy estimate; modelled as one atomic load);
 *    * fifo_pop's lock-free len load is relaxed; the pop itself is under
 *      the FIFO's mutex;
 *    * the park word's plain stores (waiter_init, co_wait's NOTIFIED path,
 *      co_run's RUNNING store, co_main's EXITING store, park_finish's
 *      RUNNABLE store) are relaxed ck_pr stores.  They are ordered for the
 *      waker by the publication of the waiter (ev_lock) and the context
 *      switch, and for the next worker by the queue's release (deque push's
 *      release fence, the FIFO mutex) paired with the take's acquire;
 *    * the eventfd write/read are syscalls (full barriers in practice);
 *    * woken_spinning is a relaxed store/load, ordered by idle_lock.
 *    None of these is read on a path where a weaker order would let a
 *    load see an older value than the model allows, except through the
 *    fences named above; spin cannot check that part (see README.md).
 */

#ifndef NW
#define NW 2
#endif
#ifdef SETTER_CO
#define NCO 2
#else
#define NCO 1
#endif
#define NONE 255

/* enum weft__co_state (park.h); CO_NEW = not spawned yet (model only) */
#define CO_NEW       0
#define CO_RUNNABLE  1
#define CO_RUNNING   2
#define CO_PARKING   4
#define CO_PARKED    5
#define CO_NOTIFIED  6
#define CO_EXITING   7

#define R_WOKEN 1	/* the setter's wake result */

/* waiter coroutine's program counter (lives on its stack) */
#define W_START   0
#define W_WAIT    1
#define W_RESUMED 2
#define W_EXIT    3

/* ---------------------------------------------------------- state */

byte pw_state[NCO];	/* co->park_word: state */
byte pw_gen[NCO];	/*                generation */
byte pw_res[NCO];	/*                result */
byte pc0 = W_START;	/* the waiter coroutine's resume point */
byte on_cpu[NCO] = NONE;	/* model: worker executing on c's stack, or NONE */
byte queued[NCO];	/* model: run-queue entries holding c */
byte done;		/* coroutines finished (co_finish) */

/* the event: sync object with its internal lock, one flag, one waiter */
bit ev_lock;
bit ev_flag;
byte ev_slot = NONE;	/* the queued waiter's coroutine */
byte ev_gen;		/* waiter->gen */

/* scheduler (worker.c) */
typedef deque_t { byte item[NCO]; byte n };
deque_t dq[NW];			/* abstract per-worker deques */
chan inj = [NCO] of { byte };	/* weft__rt.inject; len(inj) = inject.len */
byte nr_spinning;
byte nr_idle;
byte idle[NW];
bit idle_lock;
bit woken_spinning[NW];
bit token[NW];			/* the worker's eventfd counter != 0 */
bit asleep[NW];			/* model: inside weft__loop_wait */
bit t_busy = 1;			/* model: T is inside an operation */
byte fills;			/* model: depot fills so far (-DFILL) */

/* ---------------------------------------------------------- queues */

/* deque push (owner): one step; queued[] tracks double queueing */
inline dq_push(w, c) {
	d_step {
		assert(queued[c] == 0);
		queued[c]++;
		dq[w].item[dq[w].n] = c;
		dq[w].n++
	}
}

inline inject_push(c) {
	d_step {
		assert(queued[c] == 0);
		queued[c]++;
		inj!c
	}
}

/* fifo_pop: lock-free len check, then the pop under the FIFO's lock */
inline inject_pop(c) {
	if
	:: len(inj) > 0 ->
		d_step {
			if
			:: nempty(inj) -> inj?c; queued[c]--
			:: empty(inj) -> skip
			fi
		}
	:: else
	fi
}

/* take_local / weft__deque_take: newest, at the bottom */
inline take_local(w, c) {
	d_step {
		if
		:: dq[w].n > 0 ->
			dq[w].n--;
			c = dq[w].item[dq[w].n];
			dq[w].item[dq[w].n] = 0;
			queued[c]--
		:: else
		fi
	}
}

/* steal_from / weft__deque_steal: oldest, at the top */
inline steal(vic, sc, si) {
	d_step {
		if
		:: dq[vic].n > 0 ->
			sc = dq[vic].item[0];
			for (si : 1 .. NCO - 1) { dq[vic].item[si - 1] = dq[vic].item[si] }
			dq[vic].n--;
			dq[vic].item[dq[vic].n] = 0;
			queued[sc]--
		:: else
		fi;
		si = 0
	}
}

/* ---------------------------------------------------------- idle/wake */

/* wake_idle_worker */
inline wake_idle_worker(v) {
	atomic {
		idle_lock == 0 -> idle_lock = 1;
		if
		:: nr_idle > 0 ->
			v = idle[nr_idle - 1];
			idle[nr_idle - 1] = 0;
			nr_idle--;
			woken_spinning[v] = 1	/* sleeping = 0 too */
		:: else -> v = NONE
		fi
	}
	if
	:: v != NONE -> nr_spinning++	/* at_faa_uint: read outside the lock */
	:: else
	fi;
	idle_lock = 0;
	if
	:: v != NONE -> token[v] = 1	/* weft__loop_wake: eventfd write */
	:: else
	fi;
	v = 0
}

/* notify_work: at_fence_store_load; two relaxed loads; wake */
inline notify_work(v) {
	if
	:: nr_spinning != 0 -> skip
	:: else ->
		if
		:: nr_idle == 0 -> skip
		:: else -> wake_idle_worker(v)
		fi
	fi
}

/* weft__idle_any_work: loads only, one queue at a time */
inline any_work(found, i) {
	found = (len(inj) > 0);
	for (i : 0 .. NW - 1) {
		if
		:: !found -> found = (dq[i].n > 0)
		:: else
		fi
	};
	i = 0
}

/*
 * weft__schedule from a worker: the swap into the slot (+ push_local of what
 * it displaced), then notify_work only if it displaced something: a lone
 * slot is the owner's to run next.  The abstract queue does not tell the
 * slot from the deque: a queue that was empty before the push had an empty
 * slot (no notify); for a non-empty one both outcomes are explored.
 */
inline schedule_on(w, c, v) {
	v = dq[w].n;	/* before the push: only the owner pushes, so a 0 stays 0 */
	dq_push(w, c);
	if
	:: v == 0 -> skip
	:: else -> v = 0;
		if
		:: notify_work(v)
		:: skip
		fi
	fi
}

/* ---------------------------------------------------------- wake_co */

/*
 * wake_co(co, gen, any_gen = false, result, NULL): l_* is the loaded word.
 * ok = 1 when this waker's CAS won; the coroutine was then queued (from
 * PARKED) or left NOTIFIED (from PARKING) for park_finish / co_wait.
 * ON_WORKER: 1 = weft__schedule on worker `me`, 0 = from a plain thread.
 */
inline wake_co(c, gen, res, ok, l_st, l_gen, l_res, me, ON_WORKER, v) {
	ok = 0;
	do
	:: d_step { l_st = pw_state[c]; l_gen = pw_gen[c]; l_res = pw_res[c] };	/* load */
		if
		:: l_gen != gen -> break	/* an older generation's wake */
		:: else
		fi;
		if
		:: l_st != CO_PARKING && l_st != CO_PARKED -> break
		:: else
		fi;
		/* the CAS */
		d_step {
			if
			:: pw_state[c] == l_st && pw_gen[c] == l_gen && pw_res[c] == l_res ->
				ok = 1;
				pw_res[c] = res;
#ifdef BUG_EARLY_QUEUE
				pw_state[c] = CO_RUNNABLE
#else
				if
				:: l_st == CO_PARKING -> pw_state[c] = CO_NOTIFIED
				:: else -> pw_state[c] = CO_RUNNABLE
				fi
#endif
			:: else -> ok = 0
			fi
		};
		if
		:: ok -> break
		:: else	/* CAS failed: reload */
		fi
	od;
	if
#ifdef BUG_EARLY_QUEUE
	:: ok ->
#else
	:: ok && l_st == CO_PARKED ->
#endif
		if
		:: ON_WORKER -> schedule_on(me, c, v)
		:: else -> inject_push(c); notify_work(v)
		fi
	:: else
	fi;
	d_step { l_st = 0; l_gen = 0; l_res = 0 }
}

/*
 * The event's set side (weft__waitq_wake_all under the object's lock):
 * lock, flag = 1, pop the waiter, wake it, unlock.
 */
inline set_event(me, ON_WORKER, sw, sg, ok, l_st, l_gen, l_res, v) {
	atomic {
		ev_lock == 0 -> ev_lock = 1;
		ev_flag = 1;
		sw = ev_slot;
		sg = ev_gen;
		ev_slot = NONE
	}
	if
	:: sw != NONE -> wake_co(sw, sg, R_WOKEN, ok, l_st, l_gen, l_res, me, ON_WORKER, v)
	:: else
	fi;
	d_step { ev_lock = 0; sw = 0; sg = 0; ok = 0 }
}

/* ---------------------------------------------------------- workers */

/* weft__park_finish + weft__schedule (co_run's PARKING/NOTIFIED case) */
inline park_finish(me, c, g, r, v) {
	g = pw_gen[c];					/* load word */
	d_step {					/* CAS PARKING -> PARKED */
		if
		:: pw_state[c] == CO_PARKING && pw_gen[c] == g && pw_res[c] == 0 ->
			pw_state[c] = CO_PARKED; g = NONE
		:: else
		fi
	}
	if
	:: g != NONE ->					/* a waker came first */
		r = pw_res[c];				/* load word */
		assert(pw_state[c] == CO_NOTIFIED);
		pw_state[c] = CO_RUNNABLE;		/* store (gen, result, RUNNABLE) */
		schedule_on(me, c, v)
	:: else
	fi;
	d_step { g = 0; r = 0 }
}

proctype worker(byte me)
{
	byte c = NONE;
	byte nxt = NONE;	/* a direct successor (weft__worker_successor) */
	byte st, g, r, v, sv;
	byte retracts;	/* refused passes that retracted in a row: no dispatch,
			 * no sleep, no spinning in between */
	bit spinning, found, ok, refused, filling;
#ifdef BUG_WATCH_NO_RECHECK
	bit watched;
#endif
	byte sw, sg, l_st, l_gen, l_res;	/* setter coroutine's frame */

top:
	/* find_local */
	take_local(me, c);
	if
	:: c == NONE -> inject_pop(c)
	:: else
	fi;
	if
	:: c == NONE ->
		/* may_spin: fewer than half the other workers not idle */
		if
		:: spinning -> skip
		:: else ->
			v = nr_idle;			/* load */
			if
			:: NW - 1 - v == 0 || 2 * nr_spinning > NW - 1 - v -> v = 0; refused = 1
			:: else -> d_step { v = 0; nr_spinning++; spinning = 1; retracts = 0 }
			fi
		fi;
		/* steal_work: one round over the other workers, then inject */
		if
		:: spinning ->
			for (sv : 0 .. NW - 1) {
				if
				:: sv != me && c == NONE -> steal(sv, c, v)
				:: else
				fi
			};
			sv = 0;
			if
			:: c == NONE -> inject_pop(c)
			:: else
			fi
		:: else
		fi
	:: else
	fi;

#ifdef FILL
	/* weft__stack_depot_fill: having found nothing, a worker may make
	 * stacks for a burst of spawns (a hungry depot), a job it takes as it
	 * takes a coroutine: it stops spinning first (FILL jobs in all) */
	if
	:: c == NONE && fills < FILL -> fills++; filling = 1
	:: true
	fi;
#endif
	if
	:: c != NONE || filling ->
		/* stop_spinning */
		if
#ifdef SEED_FILL_STAYS_SPINNING
		/* adv-parksw seed: the filler stays a counted spinner through
		 * its fill, so publishers wake nobody while it fills.  spin
		 * finds no error: the model cannot tell a wake delayed by a
		 * whole fill from one on time (check.sh runs it as `ok`, the
		 * blind spot; design.md, "The stack pool") */
		:: filling -> skip
#endif
		:: spinning ->
#ifdef BUG_FILL_KEEPS_COUNT
			if
			:: filling -> d_step { spinning = 0; v = 0 }	/* no nr_spinning-- */
			:: else -> d_step { spinning = 0; v = nr_spinning; nr_spinning-- }
			fi;
#else
			d_step { spinning = 0; v = nr_spinning; nr_spinning-- };
#endif
			if
#ifdef FINDING_NO_STOP_WAKE
			:: false -> skip	/* the last spinner never wakes another */
#else
			:: v == 1 && nr_idle != 0 -> any_work(found, v); v = found
#endif
			:: else -> v = 0
			fi;
			if
			:: v == 1 && found -> v = 0; found = 0; notify_work(v)
			:: else -> v = 0; found = 0
			fi
		:: else
		fi;

#ifdef FILL
		if
		:: filling -> filling = 0; goto top	/* the stacks made, it looks again */
		:: else
		fi;
#endif
		/* ---- weft__co_run(me, c), or a direct switch to c ---- */
dispatch:	retracts = 0;
		d_step {
			assert(pw_state[c] == CO_RUNNABLE);
			assert(on_cpu[c] == NONE);	/* its last switch-out is complete */
			pw_state[c] = CO_RUNNING;
			on_cpu[c] = me
		};
		if
		:: c == 0 ->
			/* the waiter coroutine, from its resume point */
			do
			:: pc0 == W_START ->
				atomic {
					ev_lock == 0 ->
					if
					:: ev_flag -> pc0 = W_EXIT
					:: else ->
						pw_gen[0]++;		/* weft__waiter_init */
						pw_res[0] = 0;
						pw_state[0] = CO_PARKING;
						ev_slot = 0;		/* enqueue, unlock */
						ev_gen = pw_gen[0];
						pc0 = W_WAIT
					fi
				}
			:: pc0 == W_WAIT ->
				st = pw_state[0];			/* co_wait: load word */
				if
				:: st == CO_NOTIFIED ->
					d_step { pw_state[0] = CO_RUNNING; pc0 = W_RESUMED; st = 0 }
				:: else ->
					d_step { pc0 = W_RESUMED; on_cpu[0] = NONE; st = 0 };
					break				/* switched out */
				fi
			:: pc0 == W_RESUMED ->
				assert(pw_res[0] == R_WOKEN);		/* the waker's result */
				atomic {
					ev_lock == 0 ->			/* relock, retract, unlock */
					if
					:: ev_slot == 0 -> ev_slot = NONE
					:: else
					fi;
					pc0 = W_EXIT
				}
			:: pc0 == W_EXIT ->
				d_step { pw_state[0] = CO_EXITING; on_cpu[0] = NONE };
				break
			od
#ifdef SETTER_CO
		:: c == 1 ->
			/* the setter coroutine: never blocks, runs to its end */
			set_event(me, 1, sw, sg, ok, l_st, l_gen, l_res, v);
			d_step { pw_state[1] = CO_EXITING; on_cpu[1] = NONE }
#endif
		fi;
		/* weft__co_switch_out may switch straight to the worker's next
		 * coroutine (or not: a fairness turn, or none); then that one
		 * finishes c's switch-out below, on its own stack, before it
		 * runs.  Either way: after_left, switch (park_state(load)) */
		if
		:: take_local(me, nxt)
		:: skip
		fi;
		st = pw_state[c];
#ifdef BUG_NO_FINISH_LEFT
		if
		:: nxt != NONE -> st = CO_RUNNING	/* finish_left forgotten */
		:: else
		fi;
#endif
		if
		:: st == CO_RUNNING -> st = 0
		:: st == CO_PARKING || st == CO_NOTIFIED -> st = 0; park_finish(me, c, g, r, v)
		:: st == CO_EXITING -> d_step { st = 0; done++ }	/* co_finish */
		:: else -> assert(false)			/* abort() */
		fi;
		c = nxt;
		nxt = NONE;
		if
		:: c != NONE -> goto dispatch
		:: else -> goto top
		fi
	:: else
	fi;

	/* spin_on: the last spinner watches the queues (loads) until one shows
	 * work, then looks again from the top; or gives up (SPIN_NS) */
	if
	:: spinning && nr_spinning == 1 ->
		do
		:: any_work(found, v);
			if
			:: found -> found = 0; goto top
			:: else
			fi
		:: break			/* SPIN_NS passed */
		od;
#ifdef BUG_WATCH_NO_RECHECK
		watched = 1
#endif
	:: else
	fi;

	/* ---- park_worker(me) ---- */
	atomic {					/* announce_idle */
		idle_lock == 0 ->
		idle[nr_idle] = me;
		nr_idle++
	}
#ifndef BUG_SPIN_DEC_LATE
	if
	:: spinning -> d_step { spinning = 0; nr_spinning-- }
	:: else
	fi;
#endif
	/* at_fence_store_load; any_work() */
#if defined(BUG_NO_RECHECK)
	found = 0;
#elif defined(BUG_WATCH_NO_RECHECK)
	if
	:: watched -> found = 0		/* "it has just looked" */
	:: else -> any_work(found, v)
	fi;
	watched = 0;
#else
	any_work(found, v);
#endif
#ifndef BUG_REFUSED_LOOP
	/* work seen while a spinner is counted is that spinner's to find:
	 * it re-checks after it stops counting, or notifies if it was the
	 * last and found work; looking again would only be refused */
	if
	:: found && nr_spinning != 0 -> found = 0
	:: else
	fi;
#endif
#ifdef BUG_SPIN_DEC_LATE
	if
	:: spinning -> d_step { spinning = 0; nr_spinning-- }
	:: else
	fi;
#endif
	if
	:: found ->
		atomic {				/* retract_idle */
			idle_lock == 0 ->
			ok = 0;
			for (v : 0 .. NW - 1) {
				if
				:: v < nr_idle && idle[v] == me && !ok ->
					idle[v] = idle[nr_idle - 1];
					idle[nr_idle - 1] = 0;
					nr_idle--;
					ok = 1
				:: else
				fi
			}
			v = 0
		}
		if
		:: !ok -> token[me] = 0		/* weft__loop_take_token */
		:: else
		fi;
#ifdef MAX_RETRACTS
		if
		:: refused -> retracts++;
			assert(retracts < MAX_RETRACTS)	/* no loop on what it may not take */
		:: else
		fi
#endif
	:: else ->
		retracts = 0;
		asleep[me] = 1;			/* weft__loop_wait */
end_sleep:
		if
		:: atomic { token[me] -> token[me] = 0; asleep[me] = 0 }
#ifdef SPURIOUS
		:: asleep[me] = 0		/* a timer, an fd, or a spurious return */
#endif
		fi;
		atomic {				/* retract_idle */
			idle_lock == 0 ->
			ok = 0;
			for (v : 0 .. NW - 1) {
				if
				:: v < nr_idle && idle[v] == me && !ok ->
					idle[v] = idle[nr_idle - 1];
					idle[nr_idle - 1] = 0;
					nr_idle--;
					ok = 1
				:: else
				fi
			}
			v = 0
		}
	fi;
	d_step {
		found = 0; ok = 0; refused = 0;
		if
		:: woken_spinning[me] -> woken_spinning[me] = 0; spinning = 1; retracts = 0
		:: else
		fi
	}
	goto top
}

/* ---------------------------------------------------------- plain thread */

active proctype T()
{
	byte c, v, sw, sg, l_st, l_gen, l_res;
	bit ok;

	/* weft_spawn from a plain thread, for each coroutine */
	for (c : 0 .. NCO - 1) {
		t_busy = 1;
		d_step { pw_state[c] = CO_RUNNABLE };
		inject_push(c);
		notify_work(v);
		t_busy = 0
	}
	c = 0;
#ifndef SETTER_CO
	/* set the event from outside the runtime: wake_co + inject */
	t_busy = 1;
	set_event(NONE, 0, sw, sg, ok, l_st, l_gen, l_res, v);
	t_busy = 0;
#endif
	/* join: a plain thread waits until every coroutine has finished.
	 * Not an end label: if the coroutines are stranded, spin reports an
	 * invalid end state. */
	done == NCO
}

/* ---------------------------------------------------------- checker */

#if NW == 3
#define ALL_ASLEEP (asleep[0] && asleep[1] && asleep[2] && !token[0] && !token[1] && !token[2])
#define ALL_EMPTY (dq[0].n == 0 && dq[1].n == 0 && dq[2].n == 0)
#else
#define ALL_ASLEEP (asleep[0] && asleep[1] && !token[0] && !token[1])
#define ALL_EMPTY (dq[0].n == 0 && dq[1].n == 0)
#endif

active proctype lost_wakeup()
{
	byte c, exited;
end:
	do
	:: atomic {
		(ALL_ASLEEP && !t_busy) ->
		assert(len(inj) == 0 && ALL_EMPTY);
		for (c : 0 .. NCO - 1) {
			assert(pw_state[c] == CO_NEW || pw_state[c] == CO_EXITING ||
			       (pw_state[c] == CO_PARKED && !ev_flag));
			if
			:: pw_state[c] == CO_EXITING -> exited++
			:: else
			fi
		}
		/* every coroutine that left for good was finished (co_finish):
		 * this state repeats forever, so T's join would not show it */
		assert(exited == done);
		c = 0;
		exited = 0
	   }
	od
}

init {
	byte c;
	atomic {
		for (c : 0 .. NW - 1) { run worker(c) }
	}
}
