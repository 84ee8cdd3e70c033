/* SPDX-License-Identifier: MIT */
/*
 * posturn.pml -- an fd's position turn (lib/io.c, pos_take and pos_give;
 * close_files' claim of its queue): under the uring backend a weft_read or
 * weft_write at the file position holds its fd's turn for the whole call;
 * the others queue on the fd's pos_queue (waitq.h) under qlock.
 *
 *   take:  under qlock: busy clear -> set it, the turn is ours; the fd
 *          closed -> ECANCELED; else queue a node and park (unlocking).
 *          Woken by its claimer: the claim's result (0: handed the turn;
 *          ECANCELED: the close).  Ended by its deadline, a cancel or an
 *          interrupt: the abandon CAS on its claim word; if that fails a
 *          claimer completed the wait and its result stands (0: the turn
 *          is ours); else relock, unlink, fail.  Holding the turn after a
 *          wait on an fd that is closing: give it back, ECANCELED.
 *   give:  under qlock: claim the oldest open node with 0 (the turn passes
 *          to it, busy stays set) or, with none, clear busy; wake after
 *          the unlock.
 *   close: the gen bump, then under qlock claim every open node with
 *          ECANCELED; wake after the unlock.
 *
 * What is checked
 *  - one holder at a time (holders <= 1);
 *  - every wait ends: a waiter that nobody wakes, whose deadline may not
 *    come, is an invalid end state (a lost turn);
 *  - the turn comes back: once every caller has returned, busy is clear.
 *
 * Configurations and seeded bugs (spin -D...)
 *  default                 NW callers (3), each with a deadline that may
 *                          fire or not, and a close that may come or not.
 *  -DBUG_ABANDON_DROPS     a waiter whose abandon fails (its claimer handed
 *                          it the turn as its deadline fired) returns its
 *                          deadline's ETIMEDOUT without giving the turn
 *                          back: busy stays set, the next caller waits for
 *                          good.
 *  -DBUG_CLOSE_HANDS       the close claims the waiters with 0, as a give
 *                          does: two callers hold the turn.
 *  -DBUG_GIVE_CLEARS       give hands the turn to the oldest waiter and
 *                          clears busy too: a newcomer takes it beside the
 *                          waiter.
 *
 * Correspondence (C -> Promela)
 *  qlock            each atomic block that touches busy, q, linked
 *  e->pos_busy      busy
 *  e->pos_queue     q[], qn (FIFO of caller indices); linked[i]
 *  claim word       claim[i]: OPEN, HANDED (0), CLOSED (ECANCELED),
 *                   ABANDONED; the claim and abandon are CASes
 *  park word        woken[i]: the claimer's wake, after its unlock
 *  e->gen           closed
 */

#ifndef NW
#define NW 3
#endif

#define OPEN 0
#define HANDED 1
#define CLOSED 2
#define ABANDONED 3

bool busy;
byte q[NW];
byte qn;
bool linked[NW];
byte claim[NW];
bool woken[NW];
bool closed;
byte holders;
byte finished;

/* under qlock: pops q's head into n (q non-empty); k: a scratch byte */
inline pop(n, k) {
	n = q[0];
	k = 0;
	do
	:: k + 1 < qn -> q[k] = q[k + 1]; k++
	:: else -> break
	od;
	qn--;
	linked[n] = false
}

/* under qlock: unlinks node i; j, m: scratch bytes */
inline unlink(i, j, m) {
	j = 0;
	m = 0;
	do
	:: j < qn -> if
		:: q[j] != i -> q[m] = q[j]; m++
		:: else -> skip
		fi;
		j++
	:: else -> break
	od;
	qn = m;
	linked[i] = false
}

/* pos_give: the turn to the oldest open node, or busy cleared; the wake
 * after the unlock */
inline give(to, n, k) {
	to = NW;
	atomic {
		do
		:: qn > 0 -> pop(n, k);
			if
			:: claim[n] == OPEN -> claim[n] = HANDED; to = n; break
			:: else -> skip	/* abandoned: dropped */
			fi
		:: else -> break
		od;
		if
		:: to == NW -> busy = false
		:: else ->
#ifdef BUG_GIVE_CLEARS
			busy = false
#else
			skip
#endif
		fi
	}
	if
	:: to < NW -> woken[to] = true
	:: else -> skip
	fi
}

proctype caller(byte me) {
	byte r = 0;	/* 0 held the turn; 1 failed */
	bool mine = false, dl;
	byte to, n, k;
	if
	:: dl = true	/* a deadline (or a cancel, an interrupt) that comes */
	:: dl = false
	fi;
	atomic {
		if
		:: !busy -> busy = true; mine = true
		:: busy && closed -> r = 1
		:: busy && !closed -> q[qn] = me; qn++; linked[me] = true
		fi
	}
	if
	:: mine || r == 1 -> goto held
	:: else -> skip
	fi;
	/* parked: the claimer's wake, or the deadline (which may not come) */
	if
	:: woken[me] ->
		if
		:: claim[me] == HANDED -> mine = true
		:: else -> r = 1
		fi
	:: dl ->	/* the deadline: the abandon CAS */
		atomic {
			if
			:: claim[me] == OPEN -> claim[me] = ABANDONED
			:: else -> skip
			fi
		}
		if
		:: claim[me] == ABANDONED ->
			atomic {
				if
				:: linked[me] -> unlink(me, n, k)
				:: else -> skip
				fi
			}
			r = 1
		:: claim[me] == HANDED ->
#ifdef BUG_ABANDON_DROPS
			r = 1; goto out
#else
			mine = true
#endif
		:: claim[me] == CLOSED -> r = 1
		fi
	fi;
	/* handed the turn as the close began: give it back */
	if
	:: mine && closed -> give(to, n, k); mine = false; r = 1
	:: else -> skip
	fi;
held:
	if
	:: mine ->
		atomic { holders++; assert(holders == 1) }
		holders--;
		give(to, n, k)
	:: else -> skip
	fi;
out:
	finished++
}

proctype closer() {
	closed = true;
	byte woke[NW];
	byte nw = 0, i, n, k;
	atomic {
		do
		:: qn > 0 -> pop(n, k);
			if
			:: claim[n] == OPEN ->
#ifdef BUG_CLOSE_HANDS
				claim[n] = HANDED;
#else
				claim[n] = CLOSED;
#endif
				woke[nw] = n; nw++
			:: else -> skip
			fi
		:: else -> break
		od
	}
	i = 0;
	do
	:: i < nw -> woken[woke[i]] = true; i++
	:: else -> break
	od
}

init {
	byte i;
	atomic {
		i = 0;
		do
		:: i < NW -> run caller(i); i++
		:: else -> break
		od;
		if
		:: run closer()
		:: skip
		fi
	}
	finished == NW;
	assert(!busy)
}
