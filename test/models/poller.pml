/* SPDX-License-Identifier: MIT */
/*
 * poller.pml -- the worker poller ($WEFT_POLLER=worker, lib/loop.c): fd
 * registration on the first waiter's loop, readiness served by that loop
 * or, while it is stuck, by the monitor's rescue, and weft_close's
 * unregistration from the owner's loop.
 *
 * With the worker poller each worker's epoll instance holds the fds first
 * waited on from that worker (the entry's owner: its index + 1); only that
 * worker harvests it, at its turns and in its sleeps, and the monitor
 * while it is stuck (weft__loop_rescue).  The slot protocol itself is
 * fdslot.pml's and fdturn.pml's; here the slot is one waiter or a READY
 * mark, enough to show where each wake comes from.
 *
 * Processes: caller 0 (a read that parks until readiness) and caller 1 (a
 * call that does not park), each on a worker chosen at the start, so
 * either may be the first to register; two workers, each harvesting its
 * own epoll instance, worker 0 possibly stuck from any moment on (a
 * coroutine that never switches); the monitor, harvesting a stuck
 * worker's instance; the kernel, making the fd readable once; with
 * -DCLOSE, weft_close from either worker.
 *
 * What is checked
 *  - every call ends (no invalid end state): a parked reader is woken by
 *    readiness, whichever loop owns the fd and whether or not it is stuck,
 *    or by the close;
 *  - the fd is in at most one epoll instance, its owner's, and each
 *    worker's count of fds (nfds) says how many its instance holds;
 *  - after weft_close's unregistration the fd is in no epoll instance
 *    (the file may outlive the number: a dup, so close(2) drops nothing).
 *
 * Configurations and seeded bugs (spin -D...)
 *  default             registration, readiness, a stuck owner.
 *  -DCLOSE             + weft_close while the reader may be parked.
 *  -DBUG_NO_RESCUE     the monitor leaves a stuck worker's instance alone
 *                      (the shared poller's holder alone would serve): a
 *                      reader on a stuck owner's fd waits for good.
 *  -DBUG_REREGISTER    a caller registers the fd on its own loop whenever
 *                      that loop lacks it (no owner check): the fd is in
 *                      two instances.
 *  -DBUG_DEL_SELF      (with CLOSE) weft_close deletes the fd from the
 *                      closer's worker's instance, not the owner's.
 *
 * Correspondence (C -> Promela); one step per C atomic access
 *  e->owner            owner (0 none, BUSY, w + 1).
 *  e->gen, e->refs     gen (even open, odd closing), refs.
 *  a worker's epfd     inep[w]: holds the fd; evq[w]: an edge queued in
 *                      its ready list (ADD queues one if the fd is readable
 *                      already; DEL drops it); nfds[w]: w->nfds.
 *  the slot            slot: S_EMPTY, S_WAITER (the reader parked), S_READY
 *                      (readiness that found nobody).
 *  fd_event            gen check (the tag: the entry's generation at ADD),
 *                      then wake the waiter or leave READY.
 *  weft__loop_register CAS owner 0 -> BUSY; EPOLL_CTL_ADD on the caller's
 *                      worker's epfd, nfds++; store owner w + 1.
 *  weft__loop_unregister  EPOLL_CTL_DEL on the owner's epfd, nfds--;
 *                      owner 0.
 */

#define NW 2
#define BUSY 255
#define S_EMPTY  0
#define S_WAITER 1
#define S_READY  2

byte owner;
byte gen;
byte refs;
bit inep[NW];
bit evq[NW];
byte evgen[NW];		/* the tag of the queued edge */
byte nfds[NW];
bit readable;
byte slot = S_EMPTY;
bit woken;		/* the reader's wake: readiness or the close */
bit stuck[NW];
byte done;

inline check_epfds()
{
	assert(inep[0] + inep[1] <= 1);
	assert(!inep[0] || owner == 1);
	assert(!inep[1] || owner == 2);
}

/* EPOLL_CTL_ADD on w's epfd: an fd readable already queues an edge. */
inline epoll_add(w)
{
	d_step {
		inep[w] = 1;
		nfds[w]++;
		if
		:: readable -> evq[w] = 1; evgen[w] = gen
		:: else
		fi
	}
}

/* The first wait registers the fd on the caller's worker's loop. */
inline register_on(w)
{
#ifdef BUG_REREGISTER
	if
	:: atomic { !inep[w] && owner != BUSY -> owner = BUSY }; epoll_add(w); owner = w + 1
	:: else
	fi
#else
	do
	:: owner != 0 && owner != BUSY -> break
	:: atomic { owner == 0 -> owner = BUSY };
		epoll_add(w);
		owner = w + 1;	/* after the fence: flags before owner */
		break
	od
#endif
}

/* One harvest of w's epfd by w or the monitor: the edge, if queued, goes
 * to the slot unless it names an earlier generation. */
inline harvest(w)
{
	d_step {
		if
		:: evq[w] ->
			evq[w] = 0;
			if
			:: evgen[w] == gen && slot == S_WAITER -> slot = S_EMPTY; woken = 1
			:: evgen[w] == gen && slot == S_EMPTY -> slot = S_READY
			:: else	/* stale (a closed file's), or READY already */
			fi
		:: else
		fi
	}
}

proctype reader()
{
	byte w, g;
	if
	:: w = 0
	:: w = 1
	fi;
	g = gen;
	if
	:: g & 1 -> goto over	/* ECANCELED: weft_close is running */
	:: else
	fi;
	refs++;
	if
	:: gen != g -> refs--; goto over
	:: else
	fi;
	register_on(w);
	check_epfds();
	/* the read: EAGAIN unless readable; then park in the slot */
	if
	:: readable -> goto out
	:: else
	fi;
	if
	:: atomic { slot == S_READY -> slot = S_EMPTY };	/* readiness came first: retry */
		goto out
	:: atomic { slot == S_EMPTY -> slot = S_WAITER }
	fi;
	if
	:: gen != g ->	/* the close came: retract */
		atomic { if :: slot == S_WAITER -> slot = S_EMPTY :: else fi }
	:: else
	fi;
	woken || slot != S_WAITER;	/* parked: not an end state */
out:
	refs--;
over:
	done++
}

/* A call that does not park (a write with room): it may register first. */
proctype caller()
{
	byte w, g;
	if
	:: w = 0
	:: w = 1
	fi;
	g = gen;
	if
	:: g & 1 -> goto over
	:: else
	fi;
	refs++;
	if
	:: gen == g -> register_on(w); check_epfds()
	:: else
	fi;
	refs--;
over:
	done++
}

proctype worker(byte w)
{
end:	do
	:: !stuck[w] && evq[w] -> harvest(w)	/* a turn, or its sleep woken */
	:: w == 0 && !stuck[w] -> stuck[w] = 1	/* a coroutine that never switches */
	od
}

proctype monitor()
{
end:	do
	:: stuck[0] && evq[0] ->	/* its period's rescue */
#ifndef BUG_NO_RESCUE
		harvest(0)
#else
		(false)
#endif
	od
}

proctype kernel()
{
	d_step {
		readable = 1;
		if :: inep[0] -> evq[0] = 1; evgen[0] = gen :: else fi;
		if :: inep[1] -> evq[1] = 1; evgen[1] = gen :: else fi
	}
}

#ifdef CLOSE
proctype closer()
{
	byte me;
	if
	:: me = 0
	:: me = 1
	fi;
	gen++;				/* FD_GEN_CLOSING */
	atomic { if :: slot == S_WAITER -> slot = S_EMPTY; woken = 1 :: else fi };
	refs == 0;			/* the calls in flight are over */
	owner != BUSY;
	d_step {
		if
		:: owner != 0 ->
#ifdef BUG_DEL_SELF
			inep[me] = 0; evq[me] = 0; nfds[me]--;
#else
			inep[owner - 1] = 0; evq[owner - 1] = 0; nfds[owner - 1]--;
#endif
			owner = 0
		:: else
		fi
	};
	assert(!inep[0] && !inep[1]);
	slot = S_EMPTY;
	gen++;				/* the next file's */
	done++
}
#endif

init
{
	atomic {
		run reader();
		run caller();
		run worker(0);
		run worker(1);
		run monitor();
		run kernel();
#ifdef CLOSE
		run closer();
#endif
	}
#ifdef CLOSE
	done == 3;
#else
	done == 2;
#endif
	assert(nfds[0] == inep[0] && nfds[1] == inep[1]);
}
