/* SPDX-License-Identifier: MIT */
/*
 * interrupt.pml -- weft_interrupt (lib/park.c, weft__park_interrupt and
 * the pending check in co_wait) against a coroutine that waits several
 * times in a row and the ordinary wakers of those waits (issue 49).
 *
 * weft_interrupt(co) ends co's current wait, or its next one if co is not
 * waiting, with EINTR, once.  The interrupt is a pending flag, co->interrupt
 * (0 or PENDING), which only its claimer may turn into a wake: the
 * interrupter claims it (CAS PENDING -> 0) and then wakes the wait it saw
 * by its generation; a wait claims it itself when it starts (the check
 * after its arming) and wakes itself.  A wake of the interrupter's that
 * fails (that wait ended otherwise meanwhile) puts the flag back and looks
 * again, so the next wait gets it.
 *
 * What is checked
 *  - at most once: the waits that end with EINTR never outnumber the
 *    interrupts (each weft_interrupt that found the flag clear counts one;
 *    one that found it pending merges into it, as a pending signal does);
 *  - nothing lost: when everyone is done, every interrupt was delivered to
 *    a wait or is still pending for the next one (the ghost count drops by
 *    one where an interrupt merges into a pending one);
 *  - every wait ends (each has an ordinary waker too; the final check is
 *    not an end label, so a wait left asleep is an invalid end state).
 *
 * Configurations and seeded bugs (spin -D...)
 *  default            one interrupter, NWAITS waits.
 *  -DTWO              two interrupters (merging while pending).
 *  -DNAIVE            the interrupter sets the flag and wakes whatever wait
 *                     it sees without claiming the flag: an interrupt that
 *                     a wait's start check consumed is delivered again, to
 *                     the next wait (two EINTRs for one interrupt).
 *  -DNO_PUT_BACK      a failed wake (the interrupter's, or a wait's own
 *                     after its check) drops the claimed interrupt: lost.
 *  -DDISARM_STORE     weft__waiter_disarm stores RUNNING over the park
 *                     word (as it did before weft_interrupt): an
 *                     interrupter's wake that lands between its load and
 *                     its store is overwritten, the interrupt lost.
 *  -DNO_UNUSED_PUT_BACK  a wait whose EINTR did not end it drops the
 *                     interrupt: one that completed all the same (a
 *                     claimer's, weft__wnode_claimed_case), or one that
 *                     was never published (completion_wait's failed CAS,
 *                     io_wait's disarm): lost.
 *
 * Correspondence (C -> Promela); one step per C atomic access
 *  co->park_word   gen, st (RUNNING, PARKING, WOKEN; PARKED is PARKING
 *                  here: the queueing of a woken coroutine is park.pml's),
 *                  res (OK or EINTR).
 *  co->interrupt   flag (0, PENDING).
 *  weft__waiter_init   the arming store: gen++, st = PARKING; the wait is
 *                  then published, or not (its publishing CAS failed:
 *                  weft__waiter_disarm returns a wake that came, and an
 *                  EINTR among them is put back).
 *  a wait woken with EINTR that completed all the same (a claimer won the
 *                  operation, readiness came): puts the interrupt back
 *                  (weft__park_interrupt_unused).
 *  co_wait         the StoreLoad fence (spin is sequentially consistent),
 *                  the pending check: CAS flag PENDING -> 0, and on success
 *                  the self-wake (which a waker may have beaten: the
 *                  interrupt then goes back to pending); then the sleep
 *                  until st == WOKEN.
 *  wake_co         CAS on (gen, PARKING) -> (gen, WOKEN, res).
 *  weft_interrupt  CAS flag 0 -> PENDING (a failure: one is pending, merge);
 *                  loop { load park word; not waiting -> done; CAS flag
 *                  PENDING -> 0 (a failure: the wait took it) -> done;
 *                  wake_co(gen) -> done; CAS flag 0 -> PENDING (a failure:
 *                  another interrupt is pending, it is that one's) -> done }
 *  the waker       one per wait: waits until the wait is armed (or gone)
 *                  and wakes it by generation with OK.
 */

#ifndef NWAITS
#define NWAITS 3
#endif

#define RUNNING 0
#define PARKING 1
#define WOKEN   2

#define OK    0
#define EINTR 1

byte gen;
byte st = RUNNING;
bit res;
bit flag;		/* co->interrupt: 1 = PENDING */
byte issued;		/* ghost: interrupts that set the flag */
byte delivered;		/* ghost: waits that ended with EINTR */
byte done;

/* wake_co: the CAS on the park word for generation g */
inline wake(g, r, won)
{
	d_step {
		if
		:: gen == g && st == PARKING -> st = WOKEN; res = r; won = 1
		:: else -> won = 0
		fi
	}
}

/* A claimed interrupt whose wake failed goes back to pending; if another
 * is pending by then, this one merges into it (the ghost count with it).
 * again: whether the caller should look again. */
inline put_back(again)
{
	d_step {
		if
		:: flag == 0 -> flag = 1; again = 1
		:: else -> issued--; again = 0
		fi
	}
}

active proctype co()
{
	byte i;
	bit won;
	for (i : 1 .. NWAITS) {
		d_step { gen++; st = PARKING };		/* arm */
		if
		:: skip;	/* published: it waits */
		:: goto unpublished	/* its publishing CAS failed: nothing to wait for */
		fi;
		if	/* the pending check: claim it, wake ourselves */
		:: d_step { flag == 1 -> flag = 0 }; wake(gen, EINTR, won);
#ifndef NO_PUT_BACK
			if
			:: !won -> put_back(won)	/* a waker came first */
			:: else
			fi
#endif
		:: else
		fi;
		st == WOKEN;				/* asleep until woken */
		if
		:: res == EINTR ->
			if
			:: d_step { delivered++;
				assert(delivered <= issued) }	/* at most once */
			:: skip;	/* completed all the same (a claimer's) */
#ifndef NO_UNUSED_PUT_BACK
				put_back(won)
#endif
			fi
		:: else
		fi;
		goto settled;
unpublished:	/* weft__waiter_disarm: a wake that came meanwhile is returned,
		 * by a CAS PARKING -> RUNNING that fails once a wake landed */
		if
		:: d_step { st == PARKING -> st = RUNNING }
#ifdef DISARM_STORE
		:: d_step { st == WOKEN -> st = RUNNING }	/* a store: the wake overwritten */
#else
		:: st == WOKEN ->
#ifndef NO_UNUSED_PUT_BACK
			if
			:: res == EINTR -> put_back(won)
			:: else
			fi
#else
			skip
#endif
#endif
		fi;
settled:	st = RUNNING
	}
	done++
}

active proctype waker()
{
	byte i;
	bit won;
	for (i : 1 .. NWAITS) {
		gen >= i;
		wake(i, OK, won)
	}
	done++
}

inline interrupt()
{
	byte g;
	bit waiting, won;
	if
	:: d_step { flag == 0 -> flag = 1; issued++ }
	:: d_step { flag == 1 -> skip };		/* merged */
		goto out
	fi;
	do
	:: d_step { g = gen; waiting = (st == PARKING) };
		if
		:: !waiting -> break			/* the next wait's check takes it */
		:: else
		fi;
#ifdef NAIVE
		wake(g, EINTR, won);
		break
#else
		if
		:: d_step { flag == 1 -> flag = 0 }
		:: else -> break			/* the wait claimed it */
		fi;
		wake(g, EINTR, won);
		if
		:: won -> break
		:: else
		fi;
#ifdef NO_PUT_BACK
		break
#else
		put_back(won);				/* and look again */
		if
		:: !won -> break
		:: else
		fi
#endif
#endif
	od;
out:	skip
}

active proctype interrupter()
{
	interrupt();
	done++
}

#ifdef TWO
active proctype interrupter2()
{
	interrupt();
	done++
}
#define NPROCS 4
#else
#define NPROCS 3
#endif

active proctype final()
{
	done == NPROCS;
	assert(delivered + flag == issued)
}
