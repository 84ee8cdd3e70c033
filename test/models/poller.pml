/* SPDX-License-Identifier: MIT */
/*
 * poller.pml -- the worker poller ($WEFT_POLLER=worker, lib/loop.c): fd
 * registration on the first waiter's loop, readiness served by that loop
 * or, while it is stuck, by the monitor's rescue, and weft_close's
 * unregistration from the owner's loop; where a woken reader is queued
 * and which worker may run it from there.
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
 * -DCLOSE, weft_close from either worker.  Worker 1 may turn busy for
 * good at any moment (a yield loop of its own: it never runs dry, so it
 * never steals); then it takes only its own ready FIFO and, at its
 * fairness turns, the injection queue.
 *
 * What is checked
 *  - every call ends (no invalid end state): a parked reader is woken by
 *    readiness, whichever loop owns the fd and whether or not it is stuck,
 *    or by the close, and a reader woken by readiness is run by a worker,
 *    even with worker 0 stuck and worker 1 busy;
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
 *  -DBUG_RESCUE_ON_STUCK  the rescue queues the reader on the stuck
 *                      worker's ready FIFO (the code before): only an idle
 *                      worker steals from there, and a busy one never is.
 * Finding (spin -D...)
 *  -DSTUCK_WITH_QUEUE  worker 0 may get stuck with the reader in its own
 *                      ready FIFO (its harvest queued it just before): with
 *                      worker 1 busy nobody runs it until worker 0 comes
 *                      back (docs/design.md, "Busy workers and stuck
 *                      workers": a known gap).  The good runs let worker 0
 *                      get stuck only with that FIFO empty.
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
 *  weft__schedule_ready  queued: Q_READY0 + w for worker w's own harvest
 *                      (its ready FIFO), Q_INJECT for the monitor's (the
 *                      injection queue; a timer the monitor fires for a
 *                      stuck worker takes the same call); the queues are
 *                      abstract (one step per push or pop).
 *  a worker's pick     its own ready FIFO and the injection queue while
 *                      not stuck (busy or not: a fairness turn); another
 *                      worker's ready FIFO only when idle (a steal).
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
#define Q_NONE   0	/* not queued (running, parked, or run already) */
#define Q_READY0 1	/* worker 0's ready FIFO; Q_READY0 + 1 worker 1's */
#define Q_INJECT 3	/* the injection queue */

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
bit busy1;		/* worker 1 busy with its own work for good */
byte queued = Q_NONE;	/* where the woken reader waits to be run */
bit ran;		/* a worker has run the woken reader */
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
 * to the slot unless it names an earlier generation; a woken reader is
 * queued on `q`. */
inline harvest(w, q)
{
	d_step {
		if
		:: evq[w] ->
			evq[w] = 0;
			if
			:: evgen[w] == gen && slot == S_WAITER -> slot = S_EMPTY; woken = 1; queued = q
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
	if
	:: woken -> ran			/* queued: until a worker runs it */
	:: else
	fi;
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
	:: !stuck[w] && evq[w] -> harvest(w, Q_READY0 + w)	/* a turn, or its sleep woken */
#ifdef STUCK_WITH_QUEUE
	:: w == 0 && !stuck[w] -> stuck[w] = 1	/* a coroutine that never switches */
#else
	:: atomic { w == 0 && !stuck[w] && queued != Q_READY0 -> stuck[w] = 1 }
#endif
	:: w == 1 && !busy1 -> busy1 = 1	/* a yield loop of its own */
	:: atomic { !stuck[w] && (queued == Q_READY0 + w || queued == Q_INJECT) ->
		queued = Q_NONE; ran = 1 }
	:: atomic { !stuck[w] && !(w == 1 && busy1) && queued == Q_READY0 + 1 - w ->
		queued = Q_NONE; ran = 1 }	/* idle: a steal */
	od
}

proctype monitor()
{
end:	do
	:: stuck[0] && evq[0] ->	/* its period's rescue */
#if defined(BUG_RESCUE_ON_STUCK)
		harvest(0, Q_READY0)
#elif !defined(BUG_NO_RESCUE)
		harvest(0, Q_INJECT)
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
	/* its wake goes to the closer's own runnext slot: run at once here */
	atomic { if :: slot == S_WAITER -> slot = S_EMPTY; woken = 1; ran = 1 :: else fi };
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
