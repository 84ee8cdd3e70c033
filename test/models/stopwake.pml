/* SPDX-License-Identifier: MIT */
/*
 * stopwake.pml -- invariant (2)'s wake (worker.c's essay; idle.c,
 * weft__idle_stop_spinning) in a parallel-for's shape, which park.pml cannot
 * see (there the runnext slot is the deque's newest item and its owner is
 * never stuck).
 *
 * An owner spawns NFILL coroutines and then is stuck for good (a root that
 * computes its own share): the first goes to its runnext slot, each later
 * one displaces the slot's to the deque and notifies (queue.c).  NT thieves
 * start asleep, listed idle.  A thief that runs a coroutine is stuck for
 * good too (a child's share).  The slot is taken by a thief only when the
 * deque is empty (steal_runnext: the last pass, the owner graced since it
 * dispatches nothing).
 *
 * Property (the assertion in `stranded`): once the owner is stuck and every
 * thief sleeps or is stuck, no coroutine is left in the deque or the slot.
 * In the C code the monitor's stuck sample is the backstop for such a slot
 * (weft__schedule_stuck), a tick or more later; it is not modelled: the
 * property is that no monitor is needed.
 *
 * Sequentially consistent, each step atomic: the Dekker fences of notify,
 * park and stop_spinning are park.pml's.  The slot test of stop_spinning
 * (no thief has graced the owner in its current dispatch) is `graced`: set
 * by the thief that takes the slot (steal_runnext marks a stuck owner after
 * its nap, before its CAS), never cleared (the owner never dispatches
 * again).
 *
 *   -DNFILL=n  coroutines spawned (default 2, at most 3), NT = NFILL thieves
 *   -DFINDING_NO_STOP_WAKE  stop_spinning never wakes another worker
 *   -DBUG_IGNORE_RUNNEXT    stop_spinning ignores runnext slots (idletax's
 *                           work_in_sight(false))
 *   -DBUG_SLOT_FILLS        the slot counts only if nobody filled a slot
 *                           since this thief's wake (a rule tried before the
 *                           graced test): with NFILL=3 the owner's last
 *                           spawn after the second thief's wake makes it
 *                           wake nobody for the slot
 */
#ifndef NFILL
#define NFILL 2
#endif
#define NT NFILL
#define UNWOKEN 255

byte dq;		/* deque length */
bit slot;		/* the owner's runnext slot */
byte fills;		/* slot fills so far (c.spawned + c.wakeups) */
bit graced;		/* the owner graced by a thief (steal.c) */
bit owner_stuck;
byte nr_idle, nr_spinning;
bit listed[NT];		/* on the idle stack (sleeping) */
bit asleep[NT];		/* waiting in its loop for a token */
bit woken[NT];		/* the token */
byte woken_fills[NT];
bit stuck[NT];

/* wake_idle_worker after the fence: any listed worker (the stack's order
 * does not matter here) */
inline notify()
{
	atomic {
		if
		:: nr_spinning == 0 && nr_idle > 0 ->
			if
			:: listed[0] -> k = 0
			:: listed[1] -> k = 1
#if NT > 2
			:: listed[2] -> k = 2
#endif
			fi;
			listed[k] = 0;
			nr_idle--;
			woken_fills[k] = fills;
			woken[k] = 1;
			nr_spinning++
		:: else -> skip
		fi
	}
}

proctype owner()
{
	byte i, k;
	atomic { fills++; slot = 1 }	/* a lone slot: no notify */
	i = 1;
	do
	:: i < NFILL ->
		atomic { fills++; dq++ };	/* the displaced one to the deque */
		notify();
		i++
	:: else -> break
	od;
	owner_stuck = 1
}

proctype thief(byte me)
{
	byte k, spin_fills, old;
	bit got, slots;
sleep:
	atomic { asleep[me] = 1 };
end_wait:
	atomic { woken[me] -> woken[me] = 0; asleep[me] = 0 };
	spin_fills = woken_fills[me];
steal:
	atomic {
		if
		:: dq > 0 -> dq--; got = 1
		:: dq == 0 && slot -> graced = 1; slot = 0; got = 1
		:: else -> got = 0
		fi
	};
	if
	:: got ->
		/* weft__idle_stop_spinning */
		atomic {
			old = nr_spinning;
			nr_spinning--;
#if defined(BUG_IGNORE_RUNNEXT)
			slots = 0;
#elif defined(BUG_SLOT_FILLS)
			slots = slot && spin_fills != UNWOKEN && spin_fills == fills;
#else
			slots = slot && !graced;
#endif
			slots = (old == 1 && nr_idle > 0 && (dq > 0 || slots))
		};
#ifndef FINDING_NO_STOP_WAKE
		if
		:: slots -> notify()
		:: else -> skip
		fi;
#endif
		stuck[me] = 1;
end_stuck:
		false
	:: else ->
		/* weft__idle_park: listed, no longer a spinner, the re-check */
		atomic { listed[me] = 1; nr_idle++ };
		nr_spinning--;
		atomic {
			if
			:: (dq > 0 || slot) && nr_spinning == 0 ->
				if
				:: listed[me] ->	/* retract_idle, then a spinner of its own */
					listed[me] = 0; nr_idle--;
					nr_spinning++; spin_fills = UNWOKEN
				:: else ->	/* a waker popped it: its token */
					woken[me] = 0; spin_fills = woken_fills[me]
				fi
			:: else -> goto sleep
			fi
		};
		goto steal
	fi
}

init
{
	byte t;
	atomic {
		for (t : 0 .. NT - 1) {
			listed[t] = 1;
			nr_idle++;
			run thief(t)
		}
		run owner()
	}
}

#if NT == 2
#define ALL_QUIET ((asleep[0] || stuck[0]) && (asleep[1] || stuck[1]))
#else
#define ALL_QUIET ((asleep[0] || stuck[0]) && (asleep[1] || stuck[1]) && (asleep[2] || stuck[2]))
#endif

active proctype stranded()
{
end:
	atomic {
		owner_stuck && ALL_QUIET && !woken[0] && !woken[1] && !woken[NT - 1] ->
			assert(dq == 0 && slot == 0)
	}
}
