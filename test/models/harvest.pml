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
 *   round                           fairness_turn: once READY_NS has passed
 *                                   (at any turn, surely within P of the last
 *                                   round) and no round is under way, a round
 *                                   of as many pops of the ready FIFO, the
 *                                   pinned FIFO and the yield FIFO as each
 *                                   holds then (ready_round, pinned_round,
 *                                   yield_round); the yield FIFO's share
 *                                   stops at a yielder not due yet, which
 *                                   never happens here: it is due once the
 *                                   LIFO end as it stood at its yield has
 *                                   run (yield_due), and the LIFO end is
 *                                   empty
 *   dispatch                        pick: round_pop (the ready FIFO's share,
 *                                   then the pinned FIFO's, then the yield
 *                                   FIFO's), else the ready FIFO's front
 *                                   (pop_ready, which counts ready_pops), else
 *                                   the pinned FIFO's, else the yield FIFO's
 *
 * The yield FIFO holds the yielder and a transfer that yields because its
 * budget is spent (weft__worker_budget_spent), YIELDS times; -DLOCKED locks
 * the reader to the worker (weft_lock_thread): its wake goes to the pinned
 * FIFO.
 *
 * The property, as safety: once the data has arrived, the read returns
 * within BOUND dispatches: the harvest comes at the first turn at which
 * POLL_NS has passed (at most P turns) and the last harvest's wakes have
 * left the FIFO (at most N + 1 pops after it), then the reader waits behind
 * at most N + 1 coroutines and a round's shares of the other FIFOs (the
 * locked reader: for the next round, then behind the ready FIFO's share);
 * and the transfer runs again within XBOUND dispatches of its yield (the
 * round under way and the next, behind the ready and pinned FIFOs' shares
 * and the yielder, with up to P turns before each).
 * Seeded bugs, each the rule before (the assertion fails once the reader
 * or the transfer has waited its bound):
 *   -DBUG_EMPTY_FIFO_ONLY   a harvest only at a turn that finds the ready
 *                           FIFO empty, which the sleepers never let happen;
 *   -DLOCKED -DBUG_PINNED_LAST  a round of ready.len + pinned.len pops of
 *                           the ready FIFO, else the pinned one: the pinned
 *                           FIFO is popped only once the ready FIFO is empty;
 *   -DBUG_YIELD_LAST        no share of the yield FIFO in a round: it is
 *                           popped only once every other FIFO is empty.
 */

#ifndef N
#define N 4		/* sleepers; N > T lets them keep the FIFO non-empty */
#endif
#define T 3		/* dispatches from one fairness turn to the next */
#define P 2		/* turns within which POLL_NS (READY_NS) surely passes */
#define ARRIVALS 2
#define YIELDS 2	/* the transfer's yields */
#define ROUND (N + 4)	/* the most a round pops: ready, pinned, yield FIFOs */
#define BOUND (P * T + T + 2 * (N + 2) + T + (P + 1) * T + 2 * ROUND)
#define XBOUND ((P + 1) * T + 2 * ROUND)

byte qlen;		/* coroutines in the ready FIFO, the reader included */
byte reader_at;		/* the reader's place in the FIFO (1: the front), 0: not there */
bool reader_pinned;	/* the reader is in the pinned FIFO (its only coroutine) */
bool reader_waits = true;	/* parked on the fd */
bool data;		/* arrived, not harvested yet */
byte arrivals;
byte debt;		/* pops until what the last harvest woke has left the FIFO */
bool due;		/* POLL_NS has passed since the last harvest */
byte turns_since;	/* turns since the last harvest (capped at P) */
byte tick;		/* dispatches since the last turn */
byte waited;		/* dispatches since the data arrived, until the read returned */
byte rround, pround, yround;	/* pops left in the round: ready, pinned, yield FIFO */
bool rdue;		/* READY_NS has passed since the last round began */
byte rturns;		/* turns since the last round began (capped at P) */
byte x_at = 2;		/* the transfer's place in the yield FIFO (behind the yielder) */
byte x_yields = 1;	/* its yields so far */
byte x_waited;		/* dispatches since it yielded */

/* Coroutines other than the reader in the FIFO. */
#define OTHERS (qlen - (reader_at > 0 -> 1 : 0))
#define YLEN (x_at > 0 -> 2 : 1)	/* the yielder, and the transfer */
#define ROUND_ON (rround + pround + yround > 0)

inline enqueue_some()
{
	/* any number of the coroutines not queued, each to the back */
	do
	:: OTHERS < N -> qlen++
	:: break
	od
}

inline wake_reader()
{
#ifdef LOCKED
	reader_pinned = true;
#else
	qlen++;
	reader_at = qlen;
#endif
	reader_waits = false;
	data = false
}

inline read_returns()	/* it waits again */
{
	waited = 0;
	reader_waits = arrivals < ARRIVALS
}

inline begin_round()
{
	if
	:: rturns >= P -> rdue = true
	:: rturns < P -> rdue = true	/* READY_NS may pass early */
	:: rturns < P -> skip
	fi;
	if
	:: !ROUND_ON && rdue ->
#ifdef BUG_PINNED_LAST
		rround = qlen + (reader_pinned -> 1 : 0);
#else
		rround = qlen;
		pround = (reader_pinned -> 1 : 0);
#endif
#ifndef BUG_YIELD_LAST
		yround = YLEN;
#endif
		rdue = false;
		rturns = 0
	:: else ->
		if
		:: rturns < P -> rturns++
		:: else
		fi
	fi
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
			wake_reader();
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
	fi;
	begin_round()	/* with what the service woke */
}

inline pop_ready()
{
	qlen--;
	if
	:: debt > 0 -> debt--
	:: else
	fi;
	if
	:: reader_at == 1 ->
		reader_at = 0;
		read_returns()
	:: reader_at > 1 -> reader_at--
	:: else
	fi
}

inline pop_pinned()
{
	reader_pinned = false;
	read_returns()
}

inline pop_yield()	/* the front runs and yields again, to the back */
{
	if
	:: x_at == 1 ->
		x_waited = 0;
		if
		:: x_yields < YIELDS -> x_yields++; x_at = 2
		:: else -> x_at = 0	/* the transfer is done */
		fi
	:: x_at == 2 -> x_at = 1	/* the yielder ran */
	:: else
	fi
}

/* pop_fifos: the ready FIFO, else the pinned one */
inline pop_fifos()
{
	if
	:: qlen > 0 -> pop_ready(); popped = true
	:: qlen == 0 && reader_pinned -> pop_pinned(); popped = true
	:: else
	fi
}

inline dispatch()
{
	popped = false;
	if	/* round_pop: the ready FIFO's share (BUG_PINNED_LAST: pop_fifos) */
	:: rround > 0 ->
#ifdef BUG_PINNED_LAST
		pop_fifos();
#else
		if
		:: qlen > 0 -> pop_ready(); popped = true
		:: else
		fi;
#endif
		rround = (popped -> rround - 1 : 0)
	:: else
	fi;
	if	/* the pinned FIFO's */
	:: !popped && pround > 0 ->
		if
		:: reader_pinned -> pop_pinned(); popped = true; pround--
		:: else -> pround = 0
		fi
	:: else
	fi;
	if	/* the yield FIFO's (never empty: the yielder) */
	:: !popped && yround > 0 -> pop_yield(); popped = true; yround--
	:: else
	fi;
	if	/* pick: the LIFO end is empty here */
	:: !popped -> pop_fifos()
	:: else
	fi;
	if
	:: !popped -> pop_yield()
	:: else
	fi
}

active proctype worker()
{
	bool poll, woke, popped;
	do
	:: arrivals == ARRIVALS && !data && reader_at == 0 && !reader_pinned && x_at == 0 -> break
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
		:: data || reader_at > 0 || reader_pinned ->
			waited++;
			assert(waited <= BOUND)
		:: else
		fi;
		if
		:: x_at > 0 ->
			x_waited++;
			assert(x_waited <= XBOUND)
		:: else
		fi
	od
}
