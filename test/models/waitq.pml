/* SPDX-License-Identifier: MIT */
/*
 * waitq.pml -- the wait queue's claim/abandon protocol and object lifetime
 * (waitq.h; docs/design.md, "Object lifetime").
 *
 * One waiter parks on one object (a plain wait: one node, its claim word
 * its own) or, with -DSELECT, on two (a select: a node per case, one shared
 * claim word; with -DSAME_OBJ both cases are on object 0).  Partners are
 * calls on the objects that claim the waiter's node (try_send's claim of a
 * receiver, a broadcast, a hand-over): under the object's lock each pops
 * the object's oldest linked node, drops it if its claim CAS fails, else
 * completes the operation (and, for a select, unlinks the select's other
 * nodes on that object: chan.c's claim), unlocks, and only then CASes the
 * waiter's park word; a claimer that loses it clears WAKING (its last touch
 * of the node).  A claimer that dropped a node points it at a count of its
 * own and adds one; before its call returns it waits for that count to be
 * 0 (weft__wakes_run).  Its call then returns, and the last call on the
 * object to return frees it (weft.h: every call on it has returned, and
 * the waiter's wait there is over: completed, or given up and its node
 * dropped by a call that returned -- POSIX's destroy after a broadcast
 * whose waiter timed out) or, with -DMAYBE_FREE, may leave it.
 * With -DCLOSE each partner is a close (weft_chan_close): it claims every
 * live node it finds, not the first only (a select with two cases on the
 * closed object: the first is claimed, the second must go with it).
 * Beside the claims, the waiter's deadline and weft_cancel race for its park
 * word (each at most once, at any time after the park).
 *
 * The waiter, resumed, returns at once if its claimer's wake resumed it;
 * else it CASes the claim word 0 -> ABANDONED without any lock.  Failed: a
 * claimer completed the wait; it waits for WAKING to clear, takes its
 * result from the node and never touches the claimer's object (a select
 * relocks its other objects to unlink its nodes there).  Succeeded: it
 * relocks every object it waits on and unlinks its nodes (unless a claimer
 * dropped them).  Then, every lock released, it takes one off the count of
 * each claimer that dropped one of its nodes (read under the lock).
 *
 * Checked, over a complete search:
 *   - no access to a freed object (every lock, unlock and queue access
 *     asserts the object alive): the property of issue 44's finding 1;
 *   - the operation is completed exactly once for a waiter that returns
 *     success, never for one that returns its deadline or cancel;
 *   - no claimer touches a node after its waiter returned (its stack is
 *     gone), and no node is left linked in a live object when its waiter
 *     returns (a dangling pointer in the queue).
 *
 * Seeded bugs (each must be found):
 *   RELOCK_AFTER_CLAIM   the waiter relocks first and settles under the
 *                        lock (the order before issue 44): a use after free
 *   BUG_SOLE_STORE       a claimer stores a sole node's claim word instead
 *                        of CASing it (sound only while abandons took the
 *                        lock): completes an abandoned wait
 *   BUG_RELOCK_WINNER    (SELECT) a claimed select relocks the claimer's
 *                        object too
 *   BUG_KEEP_SIBLINGS    (SELECT SAME_OBJ) the claimer leaves the select's
 *                        other nodes on its object linked; with CLOSE
 *                        (claim_all of waitq.c, which knows no select) the
 *                        close then drops them and waits for good for the
 *                        select, which never relocks its claimer's object
 *   NO_DROP_WAIT         a claimer that dropped an abandoned node returns
 *                        without waiting for its waiter to leave: the
 *                        object is freed under the relocking waiter
 *
 * Memory model: every shared variable is sequentially consistent (the C
 * code's claim, abandon and park-word CASes are seq_cst; the WAKING clear is
 * a release store read with acquire; the object's lock is modelled as an
 * atomic test-and-set).  The park word is abstract (one CAS per wait:
 * park.pml checks it).
 */

#ifdef SELECT
#define NNODE 2
#else
#define NNODE 1
#endif
#define NOBJ 2
#ifdef CLOSE
#define CLAIM_MORE true	/* a close claims every live node */
#else
#define CLAIM_MORE !claimed
#endif
#ifndef NCLAIM
#define NCLAIM 1	/* partners per object the waiter waits on */
#endif

/* claim word: 0 open, (case + 1) | WAKING, ABANDONED */
#define WAKING 8
#define ABANDONED 15

/* park word: 0 armed, else who won it */
#define PW_CLAIMED 1
#define PW_TIMEDOUT 2
#define PW_CANCELED 3

bool alive[NOBJ];
bool lk[NOBJ];
byte calls[NOBJ];	/* partner calls on each object not yet returned */
byte nodeobj[NNODE];
bool linked[NNODE];
byte claim;		/* the wait's claim word */
byte pw;		/* the waiter's park word */
bool parked;		/* the waiter published its nodes */
bool gone;		/* the waiter returned: its nodes (stack) are gone */
byte completed;		/* operations completed for the waiter */
byte claimedon = NOBJ;	/* the object whose call completed it */
bool droppedon[NOBJ];	/* a call on it dropped one of the waiter's nodes */
byte dropper[NNODE];	/* the pid of the call that dropped the node, 0 none */
byte dropcount[8];	/* per call (by pid): dropped nodes whose waiter is yet to leave */

inline touch(o)
{
	assert(alive[o])
}

inline lock(o)
{
	touch(o);
	atomic { !lk[o] -> lk[o] = true }
}

inline unlock(o)
{
	touch(o);
	lk[o] = false
}

/* whether the waiter waits on object o */
#define WAITS_ON(o) (nodeobj[0] == o || nodeobj[NNODE - 1] == o)

proctype Waiter()
{
	byte i, r, won = NOBJ;	/* the claimer's object, NOBJ none */
	bool abandoned;
	/* weft__wait_enqueue / select_park: every lock held, nodes pushed */
	for (i : 0 .. NOBJ - 1) {
		if
		:: WAITS_ON(i) -> lock(i)
		:: else
		fi
	}
	for (i : 0 .. NNODE - 1) {
		linked[i] = true
	}
	parked = true;
	for (i : 0 .. NOBJ - 1) {
		if
		:: WAITS_ON(i) -> unlock(i)
		:: else
		fi
	}
	pw != 0;	/* weft__waiter_wait: resumed by whoever won the word */
	r = pw;
#ifdef RELOCK_AFTER_CLAIM
	/* the order before: relock, then settle under the lock */
	if
	:: r == PW_CLAIMED -> abandoned = false
	:: else ->
		for (i : 0 .. NOBJ - 1) {
			if
			:: WAITS_ON(i) -> lock(i)
			:: else
			fi
		}
		atomic {
			if
			:: claim == 0 -> claim = ABANDONED; abandoned = true
			:: else -> abandoned = false
			fi
		}
		for (i : 0 .. NNODE - 1) {
			touch(nodeobj[i]);
			linked[i] = false
		}
		for (i : 0 .. NOBJ - 1) {
			if
			:: WAITS_ON(i) -> unlock(i)
			:: else
			fi
		}
	fi;
	if
	:: !abandoned && r != PW_CLAIMED -> (claim & WAKING) == 0
	:: else
	fi;
#else
	/* weft__wnode_abandon: the CAS before any lock */
	atomic {
		if
		:: r != PW_CLAIMED && claim == 0 -> claim = ABANDONED; abandoned = true
		:: else -> abandoned = false
		fi
	}
	if
	:: abandoned -> won = NOBJ	/* relock every object: alive, we wait on it */
	:: else ->
		/* weft__wnode_claimed_case: the claimer is done with us */
		if
		:: r != PW_CLAIMED -> (claim & WAKING) == 0
		:: else
		fi;
#ifdef BUG_RELOCK_WINNER
		won = NOBJ;
#else
		won = nodeobj[(claim & ~WAKING) - 1];
#endif
	fi;
	/* unlink what is left, on every object but the claimer's */
	for (i : 0 .. NOBJ - 1) {
		if
		:: WAITS_ON(i) && i != won -> lock(i)
		:: else
		fi
	}
	for (i : 0 .. NNODE - 1) {
		if
		:: nodeobj[i] != won -> touch(nodeobj[i]); linked[i] = false
		:: else
		fi
	}
	for (i : 0 .. NOBJ - 1) {
		if
		:: WAITS_ON(i) && i != won -> unlock(i)
		:: else
		fi
	}
#endif
	/* weft__wnode_left: every lock released, each dropper may return
	 * (dropper[] was written under the lock, and never after the unlink);
	 * only for the nodes it retracted: not on its claimer's object */
	for (i : 0 .. NNODE - 1) {
		if
		:: dropper[i] != 0 && nodeobj[i] != won -> dropcount[dropper[i]]--
		:: else
		fi
	}
	/* the result: the claimer's when claimed, else the park word's */
	if
	:: abandoned -> assert(completed == 0)
	:: else -> assert(completed == 1)
	fi;
	/* no node of ours left in a live object's queue */
	for (i : 0 .. NNODE - 1) {
		assert(!linked[i] || !alive[nodeobj[i]])
	}
	gone = true
}

/* One call on object o that claims the oldest live node it finds. */
proctype Partner(byte o)
{
	byte i, j;
	bool claimed = false, took, woke;
	lock(o);
	/* weft__waitq_claim: pop until a claim CAS succeeds (a close: on to
	 * the end of the queue) */
	for (i : 0 .. NNODE - 1) {
		if
		:: CLAIM_MORE && linked[i] && nodeobj[i] == o ->
			touch(o);
			assert(!gone);
			linked[i] = false;
			atomic {
				if
#ifdef BUG_SOLE_STORE
				:: NNODE == 1 -> claim = (i + 1) | WAKING; took = true
#endif
				:: claim == 0 -> claim = (i + 1) | WAKING; took = true
				:: else	/* dead: dropped, counted */
					took = false;
					dropper[i] = _pid;
					dropcount[_pid]++;
					droppedon[o] = true
				fi
			}
			if
			:: took ->
				claimed = true;
				completed++;
				claimedon = o;
#ifndef BUG_KEEP_SIBLINGS
				/* chan.c's claim: the select's other nodes on o */
				for (j : 0 .. NNODE - 1) {
					if
					:: nodeobj[j] == o && linked[j] -> linked[j] = false
					:: else
					fi
				}
#endif
			:: else
			fi
		:: else
		fi
	}
	unlock(o);
	/* weft__wnode_wake, after the release */
	if
	:: claimed ->
		assert(!gone);
		atomic {
			if
			:: pw == 0 -> pw = PW_CLAIMED; woke = true
			:: else -> woke = false
			fi
		}
		if
		:: !woke -> assert(!gone); claim = claim & ~WAKING
		:: else
		fi
	:: else
	fi;
#ifndef NO_DROP_WAIT
	/* weft__wakes_wait_dropped */
	dropcount[_pid] == 0;
#endif
	/* the call returned; the last one out frees o once every call on o
	 * has returned and the waiter's wait there is over: it returned, or a
	 * call on o completed it (it is on its way out: weft.h), or a call on
	 * o that returned dropped its abandoned node (it gave up) */
	atomic {
		calls[o]--;
		if
		:: calls[o] == 0 && (claimedon == o || gone || droppedon[o]) ->
#ifdef MAYBE_FREE
			if
			:: alive[o] = false
			:: skip
			fi
#else
			alive[o] = false
#endif
		:: else
		fi
	}
}

/* The deadline (the timer heap) and weft_cancel: one more waker each. */
proctype Waker(byte why)
{
	parked;
	atomic {
		if
		:: pw == 0 -> pw = why
		:: else
		fi
	}
}

init {
	byte o, k;
	atomic {
		alive[0] = true;
		alive[1] = true;
		nodeobj[0] = 0;
#ifdef SELECT
#ifdef SAME_OBJ
		nodeobj[1] = 0;
#else
		nodeobj[1] = 1;
#endif
#endif
		for (o : 0 .. NOBJ - 1) {
			if
			:: WAITS_ON(o) -> calls[o] = NCLAIM
			:: else
			fi
		}
		run Waiter();
		for (o : 0 .. NOBJ - 1) {
			if
			:: WAITS_ON(o) ->
				for (k : 1 .. NCLAIM) {
					run Partner(o)
				}
			:: else
			fi
		}
		run Waker(PW_TIMEDOUT);
		run Waker(PW_CANCELED)
	}
}
