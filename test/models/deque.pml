/* SPDX-License-Identifier: MIT */
/*
 * deque.pml -- the Chase-Lev work-stealing deque (lib/deque.c, deque.h),
 * with growth, one owner and NTHIEVES thieves.
 *
 * What is checked
 * ---------------
 *  every pushed item is taken exactly once (by the owner's take or by one
 *  thief's steal), no take or steal returns an item that was never pushed or
 *  a stale slot (item 0 / a duplicate), and at the end, once the owner has
 *  drained the deque after every thief finished, nothing is left.  In
 *  particular the last-element race (owner's take vs a steal when one item
 *  is left) and the thief's read-before-CAS against the owner overwriting
 *  the slot after a wrap or copying it into a grown array.
 *
 * The owner pushes NITEMS items (1..NITEMS) and takes nondeterministically
 * in between (at most NTAKES takes before its final drain); each thief makes
 * NSTEALS attempts (an ABORT counts as one; steal_from would retry it).  The
 * initial array has 2 slots: a third live item makes push grow it to 4
 * (array 1), and a push after a take or steal reuses a slot of the 2-slot
 * ring (wrap-around) while a slow thief may still be about to read it.
 *
 * Configurations: -DNTHIEVES=1|2 (default 2), -DNITEMS (default 3, at most
 * 4), -DNTAKES (default 2), -DNSTEALS (default 2).
 * Seeded bugs
 *  -DBUG_NO_CAS          take returns the last element (t == b) without the
 *                        CAS on top: owner and a thief both get it.
 *  -DBUG_READ_AFTER_CAS  steal reads the slot after its CAS: the owner may
 *                        have reused the slot (wrap) in between.
 *  -DBUG_NO_STORE_LOAD   take reads top before its store of bottom is
 *                        visible: what the StoreLoad fence forbids (on x86-64
 *                        the store would sit in the store buffer); modelled
 *                        by swapping the two accesses.
 *
 * Correspondence (C -> Promela), one step per C access to top, bottom,
 * array or a slot, except the owner's loads of bottom and array, which only
 * the owner writes (merged with its next step):
 *  weft__deque_push   b = bottom; t = top (acquire); a = array; if b - t >
 *                     mask: grow (new array, copy t..b-1: one step, the new
 *                     array is private until published; release fence;
 *                     array = new: one step); slot_put(a, b) (relaxed store);
 *                     release fence; bottom = b + 1 (relaxed store).
 *  weft__deque_take   b = bottom - 1; a = array; bottom = b; StoreLoad
 *                     fence; t = top; t > b: bottom = b + 1, NULL; item =
 *                     slot_get(a, b); t < b: item; else CAS top t -> t + 1
 *                     (NULL if it fails); bottom = b + 1.
 *  weft__deque_steal  t = top (acquire); full fence; b = bottom (acquire);
 *                     t >= b: EMPTY; a = array (acquire); item = slot_get(a,
 *                     t); CAS top t -> t + 1, ABORT if it fails.
 * The retired array stays readable (deque.c keeps it until fini), so a thief
 * that loaded the old pointer reads the old array: both arrays exist here.
 *
 * Memory model
 * ------------
 * spin is sequentially consistent.  Lê et al. (PPoPP'13) prove the C11
 * version correct with exactly these orderings; this model checks the
 * algorithm's interleavings, not the orderings.  SC is what the fences give
 * for the accesses that matter: take's at_fence_store_load (mfence /
 * dmb ish) between the bottom store and the top load, steal's at_fence_full
 * between the top load and the bottom load, and the seq_cst CAS on top
 * (lock cmpxchg; CK's CAS bracketed by dmb ish on AArch64).  APPROXIMATIONS:
 * push publishes the slot with a release fence + relaxed bottom store, and
 * the thief reads bottom, array and the slot with acquire fences: the
 * message-passing pattern, for which release/acquire gives the SC outcome;
 * the owner's own loads of bottom/array are relaxed (it is their only
 * writer).  -DBUG_NO_STORE_LOAD shows what the StoreLoad fence prevents.
 */

#ifndef NTHIEVES
#define NTHIEVES 2
#endif
#ifndef NITEMS
#define NITEMS 3
#endif
#ifndef NTAKES
#define NTAKES 2
#endif
#ifndef NSTEALS
#define NSTEALS 2
#endif

#define EMPTY 0
#define ABORT 255

byte top = 1;		/* deque.c starts both at 1 */
byte bottom = 1;
bit array;		/* d->array: 0 = the initial 2 slots, 1 = the grown 4 */
byte a0[2];
byte a1[4];
byte taken[NITEMS + 1];	/* ghost: how often each item was taken */
byte thieves_done;

inline slot_get(a, i, x) {
	if
	:: a == 0 -> x = a0[i % 2]
	:: else -> x = a1[i % 4]
	fi
}

inline got(x) {
	d_step {
		assert(x >= 1 && x <= NITEMS);	/* never garbage or an empty slot */
		assert(taken[x] == 0);		/* never twice */
		taken[x]++
	}
}

/* ---- weft__deque_push(item) ---- */
inline push(item, b, t, a, k) {
	atomic { b = bottom; a = array };		/* own loads */
	t = top;					/* acquire */
	if
	:: b - t > (a == 0 -> 1 : 3) ->
		assert(a == 0);				/* NITEMS <= 4 */
		d_step {				/* grow: copy t..b-1 */
			for (k : t .. b - 1) { a1[k % 4] = a0[k % 2] }
			k = 0
		};
		array = 1;				/* release fence; publish */
		a = 1
	:: else
	fi;
	if						/* slot_put */
	:: a == 0 -> a0[b % 2] = item
	:: else -> a1[b % 4] = item
	fi;
	bottom = b + 1;					/* release fence; store */
	d_step { b = 0; t = 0; a = 0 }
}

/* ---- weft__deque_take: x = the item or EMPTY ---- */
inline take(x, b, t, a) {
	atomic { b = bottom - 1; a = array };		/* own loads */
#ifdef BUG_NO_STORE_LOAD
	t = top;
	bottom = b;
#else
	bottom = b;
	t = top;					/* after the StoreLoad fence */
#endif
	if
	:: t > b -> bottom = b + 1; x = EMPTY		/* it was empty */
	:: else ->
		slot_get(a, b, x);
		if
		:: t < b -> skip			/* not the last one: ours */
		:: else ->				/* the last one */
#ifndef BUG_NO_CAS
			d_step {			/* CAS top t -> t + 1 */
				if
				:: top == t -> top = t + 1
				:: else -> x = EMPTY	/* a thief took it */
				fi
			};
#endif
			bottom = b + 1
		fi
	fi;
	d_step { b = 0; t = 0; a = 0 }
}

active proctype owner()
{
	byte b, t, x, pushed, takes, k;
	bit a;

	do
	:: pushed < NITEMS -> pushed++; push(pushed, b, t, a, k)
	:: takes < NTAKES ->
		takes++;
		take(x, b, t, a);
		if
		:: x != EMPTY -> got(x); x = 0
		:: else
		fi
	:: pushed == NITEMS -> break
	od;
	/* every thief has finished: drain what is left */
	thieves_done == NTHIEVES;
	do
	:: take(x, b, t, a);
		if
		:: x == EMPTY -> break
		:: else -> got(x); x = 0
		fi
	od;
	/* everything pushed was taken exactly once */
	atomic {
		for (k : 1 .. NITEMS) { assert(taken[k] == 1) }
		assert(top == bottom);
		k = 0
	}
}

active [NTHIEVES] proctype thief()
{
	byte t, b, x, n;
	bit a;

	for (n : 1 .. NSTEALS) {
		/* ---- weft__deque_steal ---- */
		t = top;					/* acquire */
		b = bottom;					/* full fence; acquire */
		if
		:: t >= b -> x = EMPTY
		:: else ->
			a = array;				/* acquire */
#ifndef BUG_READ_AFTER_CAS
			slot_get(a, t, x);			/* read BEFORE the CAS */
#endif
			d_step {				/* CAS top t -> t + 1 */
				if
				:: top == t -> top = t + 1
				:: else -> x = ABORT
				fi
			};
#ifdef BUG_READ_AFTER_CAS
			if
			:: x != ABORT -> slot_get(a, t, x)
			:: else
			fi;
#endif
			skip
		fi;
		if
		:: x != EMPTY && x != ABORT -> got(x)
		:: else
		fi;
		d_step { t = 0; b = 0; x = 0; a = 0 }
	}
	thieves_done++
}
