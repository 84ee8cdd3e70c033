/* SPDX-License-Identifier: MIT */
/*
 * harvest.pml -- when a busy worker harvests readiness (issue 44, finding 6).
 *
 * One worker that never runs dry (a yielder runs whenever nothing else
 * does, so it never sleeps in epoll_wait, whose call would harvest); its
 * ready FIFO, which the deadlines of N sleeping coroutines refill at every
 * fairness turn; a reader parked on an fd whose data arrives ARRIVALS times
 * (it reads, then waits again); any harvest may also bring other fds'
 * events (more coroutines for the FIFO).  The environment is adversarial:
 * at a turn any number of the sleepers may be due, and POLL_NS may pass
 * at any turn, but surely within P turns of the last harvest.
 *
 * Steps and the C they stand for (lib/worker.c, lib/loop.c):
 *   tick, turn every T dispatches   find_local / turn_is_due (GLOBAL_INTERVAL)
 *   poll = ...                      fairness_turn: poll_is_due(w, now), read
 *                                   before the service fires the timers
 *   fire                            weft__loop_service: weft__timers_fire, the
 *                                   woken to the FIFO's back (weft__schedule_ready)
 *   harvest                         harvest / fd_event: the reader and the other
 *                                   fds' coroutines to the FIFO's back;
 *                                   count_harvest: poll_served = ready_pops +
 *                                   ready.len if it woke something, else
 *                                   ready_pops; last_poll = now
 *   debt                            poll_served - c.ready_pops (> 0: what the
 *                                   last harvest woke is still queued)
 *   dispatch                        pick: the FIFO's front (pop_fifos, which
 *                                   counts ready_pops), else the yielder
 *
 * The property, as safety: once the data has arrived, the read returns
 * within BOUND dispatches: the harvest comes at the first turn at which
 * POLL_NS has passed (at most P turns) and the last harvest's wakes have
 * left the FIFO (at most N + 1 pops after it), then the reader waits behind
 * at most N + 1 coroutines.  -DBUG_EMPTY_FIFO_ONLY seeds the old rule, a
 * harvest only at a turn that finds the FIFO empty: the sleepers keep it
 * non-empty at every turn and the reader waits forever (the assertion
 * fails once it has waited BOUND dispatches).
 */

#ifndef N
#define N 4		/* sleepers; N > T lets them keep the FIFO non-empty */
#endif
#define T 3		/* dispatches from one fairness turn to the next */
#define P 2		/* turns within which POLL_NS surely passes */
#define ARRIVALS 2
#define BOUND (P * T + T + 2 * (N + 2) + T)

byte qlen;		/* coroutines in the ready FIFO, the reader included */
byte reader_at;		/* the reader's place in the FIFO (1: the front), 0: not there */
bool reader_waits = true;	/* parked on the fd */
bool data;		/* arrived, not harvested yet */
byte arrivals;
byte debt;		/* pops until what the last harvest woke has left the FIFO */
bool due;		/* POLL_NS has passed since the last harvest */
byte turns_since;	/* turns since the last harvest (capped at P) */
byte tick;		/* dispatches since the last turn */
byte waited;		/* dispatches since the data arrived, until the read returned */

/* Coroutines other than the reader in the FIFO. */
#define OTHERS (qlen - (reader_at > 0 -> 1 : 0))

inline enqueue_some()
{
	/* any number of the coroutines not queued, each to the back */
	do
	:: OTHERS < N -> qlen++
	:: break
	od
}

inline turn()
{
	if
	:: !due && turns_since >= P -> due = true
	:: !due && turns_since < P -> due = true
	:: else
	fi;
#ifdef BUG_EMPTY_FIFO_ONLY
	poll = due && qlen == 0;
#else
	poll = due && (qlen == 0 || debt == 0);
#endif
	enqueue_some();	/* the deadlines that are due */
	if
	:: poll ->
		woke = false;
		if
		:: data && reader_waits ->
			qlen++;
			reader_at = qlen;
			reader_waits = false;
			data = false;
			woke = true
		:: else
		fi;
		if	/* other fds' events */
		:: OTHERS < N -> qlen++; woke = true
		:: true
		fi;
		debt = (woke -> qlen : 0);
		due = false;
		turns_since = 0
	:: else ->
		if
		:: turns_since < P -> turns_since++
		:: else
		fi
	fi
}

inline dispatch()
{
	if
	:: qlen > 0 ->
		qlen--;
		if
		:: debt > 0 -> debt--
		:: else
		fi;
		if
		:: reader_at == 1 ->	/* the read returns; it waits again */
			reader_at = 0;
			waited = 0;
			reader_waits = arrivals < ARRIVALS
		:: reader_at > 1 -> reader_at--
		:: else
		fi
	:: else	/* the yielder */
	fi
}

active proctype worker()
{
	bool poll, woke;
	do
	:: arrivals == ARRIVALS && !data && reader_at == 0 -> break
	:: else ->
		if	/* the data may arrive while the reader waits */
		:: reader_waits && !data && arrivals < ARRIVALS ->
			data = true;
			arrivals++
		:: true
		fi;
		tick++;
		if
		:: tick == T -> tick = 0; turn()
		:: else
		fi;
		dispatch();
		if
		:: data || reader_at > 0 ->
			waited++;
			assert(waited <= BOUND)
		:: else
		fi
	od
}
