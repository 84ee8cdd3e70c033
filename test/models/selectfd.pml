/* SPDX-License-Identifier: MIT */
/*
 * selectfd.pml -- a select with a channel case and an fd case (lib/chan.c's
 * select_park and settle_channels; lib/io.c's weft__io_case_park and
 * weft__io_case_settle), racing the channel case's claimer, the fd case's
 * wakers (readiness, weft_close) and the deadline and weft_cancel.
 *
 * The select has one waiter (one park word) and one claim word.  It links
 * a node in the channel's queue under the channel's lock, unlocks, then
 * puts its waiter in the fd direction's slot (CAS NULL -> w, or takes the
 * READY nobody had) or, with -DQUEUED, queues a node of its own behind the
 * slot's holder (the node has its own claim word: fdtable.h).  A close
 * seen after the slot CAS (gen moved), or READY taken, and it wakes its
 * own waiter instead of sleeping.  Resumed by whichever waker won its park
 * word, it settles:
 *   - the channel side first: a channel claimer's wake (CLAIMED without
 *     READY) is its claim; any other wake -- readiness, a close, an fd
 *     queue's hand-over of the turn (which carries CLAIMED too, with
 *     READY), the deadline, a cancel -- CASes the claim word 0 ->
 *     ABANDONED.  Failed: the channel claimer completed the operation and
 *     may have freed the channel; the select waits for WAKING to clear and
 *     never touches the channel again.  Succeeded: it relocks the channel
 *     (alive: it still waits on it) and unlinks its node;
 *   - then the fd side: retracts the slot (CAS w -> NULL, or waits while a
 *     waker holds w|CLAIMED) or settles its queue node (CAS its claim
 *     0 -> ABANDONED under qlock; failed: a hand-over or a close claimed
 *     it, and it waits for that claimer's WAKING clear and holds the turn).
 * It reports the channel case if claimed, else the fd case if its fd was
 * closed (ECANCELED), else polls again (readiness came), else fails with
 * the park result.
 *
 * Checked, over a complete search:
 *   - no access to the channel after its claimer may have freed it (every
 *     lock and queue access asserts it alive; the claimer frees it as soon
 *     as its call returns, since the select's wait on it was completed);
 *   - the channel operation is completed exactly when the select reports
 *     the channel case (no element lost, none taken twice);
 *   - no waker (channel claimer, readiness, close, hand-over) touches the
 *     select's waiter or nodes after the select returned (its frame is
 *     gone), and nothing of the select is left linked or in the slot;
 *   - the fd case is reported closed only after a close, and "poll again"
 *     only after readiness came.
 *
 * Seeded bugs (each must be found):
 *   BUG_CLAIMED_IS_CHAN   (QUEUED) any CLAIMED wake is taken for the
 *                         channel claimer's, the fd queue's hand-over
 *                         included: the claim word is not CASed, so the
 *                         select reports a channel case nobody completed,
 *                         or a claimer completes it after it returned
 *   BUG_FD_NO_ABANDON     a wake by the fd case (readiness, close) is
 *                         taken to mean the channel case was not claimed:
 *                         the select relocks the channel without the
 *                         abandon CAS -- a use after free, and a completed
 *                         receive reported as the fd case (element lost)
 *   BUG_NO_RETRACT_WAIT   the select, claimed by the channel, leaves the
 *                         fd slot without waiting out a waker that holds
 *                         it CLAIMED: that waker touches a gone waiter
 *   BUG_NO_HANDBACK       (LOOK) the fd case hands back the READY its poll
 *                         took only when the select did not report it:
 *                         a reported case whose caller leaves data
 *                         behind strands the waiter that parked after
 *                         its own EAGAIN (asleep, data in the socket)
 *
 * With -DLOOK, the step before the park instead (lib/io.c's
 * weft__io_cases_poll and weft__io_case_end; weft_wait's exact wait_ready
 * is the same, a case always reported): the select drops the slot's READY
 * (forget_ready) and asks poll; a ready case is reported or, another case
 * ready too, not; its caller reads one byte of what is there.  Beside it,
 * a waiter B whose read said EAGAIN parks as weft_wait(WEFT_AFTER_EAGAIN)
 * does (in the slot, or takes READY), reads on a wake, and parks again on
 * EAGAIN; a write of two bytes (one edge) and its harvest.  The hand-back
 * (weft__fd_redeliver: wakes the waiter in the slot, or leaves READY) goes
 * to the READY the poll took and confirmed, reported or not, and to
 * readiness seen and not reported.  Checked: B never sleeps for good (an
 * invalid end state) while a byte is left for it (the caller reads at most
 * one of the two).
 *
 * Memory model: sequentially consistent (every CAS the C code makes here
 * is seq_cst; the WAKING clears are release stores read with acquire; the
 * channel's lock and qlock are modelled as atomic test-and-sets / single
 * steps, each qlock section writing one thing read outside it).  The park
 * word is abstract (one CAS per wait: park.pml and fdslot.pml check it);
 * the queue behind the slot and the turn's travels are fdturn.pml's, here
 * reduced to the one hand-over that claims the select's node.
 */

/* park results: who won the park word */
#define PW_CHAN 1	/* the channel claimer: result | CLAIMED */
#define PW_READY 2	/* fd readiness from the slot: READY | bit */
#define PW_CLOSE 3	/* weft_close from the slot: ECANCELED */
#define PW_FDCLAIM 4	/* an fd queue node's claimer: READY | bit (| turn) | CLAIMED */
#define PW_TIMEOUT 5
#define PW_CANCEL 6

/* claim words: 0 open, WAKING while a claimer works, ABANDONED */
#define WAKING 8
#define ABANDONED 15

/* the slot: NULL, READY, w, w|CLAIMED */
#define S_NULL 0
#define S_READY 1
#define S_W 2
#define S_WCL 3

/* what the select reports */
#define RET_NONE 0
#define RET_CHAN 1
#define RET_CLOSED 2
#define RET_AGAIN 3
#define RET_FAIL 4

bool alive = true;	/* the channel */
bool lk;		/* its lock */
bool linked;		/* the select's channel node */
byte claim;		/* the select's claim word */
byte pw;		/* the park word */
bool parked;		/* the select published itself */
bool gone;		/* the select returned: its frame is gone */
byte completed;		/* channel operations completed for the select */
byte ret = RET_NONE;

byte slot = S_NULL;	/* the fd direction's slot */
byte gen;		/* the fd's generation: 1 once weft_close began */
bool fdlinked;		/* QUEUED: the select's fd queue node */
byte fdclaim;		/* QUEUED: its claim word */
bool readiness;		/* ghost: readiness came (a harvest, a hand-over) */

inline touch()
{
	assert(alive)
}

inline wake(why, woke)
{
	atomic {
		if
		:: pw == 0 -> pw = why; woke = true
		:: else -> woke = false
		fi
	}
}

proctype Select()
{
	byte r, self = 0;
	bool took = false, claimed, by_claimer, fd_claimed = false;
	/* select_park: the channel node, under the channel's lock */
	touch();
	atomic { !lk -> lk = true };
	touch();
	linked = true;
	lk = false;
	parked = true;
	/* weft__io_case_park: the slot (or the queue) after the channel */
#ifdef QUEUED
	atomic { fdlinked = true; fdclaim = 0 };
#else
	atomic {
		if
		:: slot == S_NULL -> slot = S_W
		:: slot == S_READY -> slot = S_NULL; took = true
		fi
	}
#endif
	if
	:: gen != 0 -> self = PW_CLOSE	/* the close check after the CAS */
	:: else -> if
		:: took -> self = PW_READY
		:: else
		fi
	fi;
	if
	:: self != 0 -> atomic { if :: pw == 0 -> pw = self :: else fi }
	:: else
	fi;
	pw != 0;	/* weft__waiter_wait_fenced */
	r = pw;

	/* settle_channels */
#ifdef BUG_CLAIMED_IS_CHAN
	by_claimer = r == PW_CHAN || r == PW_FDCLAIM;
#else
	by_claimer = r == PW_CHAN;
#endif
#ifdef BUG_FD_NO_ABANDON
	if
	:: r == PW_READY || r == PW_CLOSE -> claimed = false	/* no CAS */
	:: else ->
#endif
	atomic {
		if
		:: by_claimer -> claimed = true
		:: !by_claimer && claim == 0 -> claim = ABANDONED; claimed = false
		:: !by_claimer && claim != 0 -> claimed = true
		fi
	}
#ifdef BUG_FD_NO_ABANDON
	fi;
#endif
	if
	:: claimed && !by_claimer -> (claim & WAKING) == 0	/* weft__wnode_claimed_case */
	:: else
	fi;
	if
	:: !claimed ->	/* relock: alive, we wait on it */
		touch();
		atomic { !lk -> lk = true };
		touch();
		linked = false;
		lk = false
	:: else	/* the claimer unlinked it; the channel may be gone */
	fi;

	/* weft__io_case_settle */
#ifdef QUEUED
	atomic {	/* weft__fd_unqueue, under qlock */
		if
		:: fdclaim == 0 -> fdclaim = ABANDONED; fdlinked = false
		:: else -> fd_claimed = true
		fi
	}
	if
	:: fd_claimed && r != PW_FDCLAIM -> (fdclaim & WAKING) == 0	/* weft__fd_unqueue_done */
	:: else
	fi;
#else
	do	/* weft__fd_retract */
	:: atomic { slot == S_W -> slot = S_NULL }; break
#ifdef BUG_NO_RETRACT_WAIT
	:: slot == S_WCL && claimed -> break
#endif
	:: slot == S_WCL -> skip	/* a waker is on it: back off */
	:: slot != S_W && slot != S_WCL -> break
	od;
#endif

	/* the answer */
	if
	:: claimed -> ret = RET_CHAN
	:: !claimed && gen != 0 -> ret = RET_CLOSED
	:: !claimed && gen == 0 && (r == PW_READY || took || fd_claimed || r == PW_FDCLAIM) ->
		ret = RET_AGAIN
	:: else -> ret = RET_FAIL
	fi;
	assert((ret == RET_CHAN) == (completed == 1));
	assert(completed <= 1);
	assert(ret != RET_AGAIN || readiness);
	assert(!linked || !alive);
	assert(slot != S_W && slot != S_WCL && !fdlinked);
	gone = true
}

/* A call on the channel that claims the select's node (try_send's claim of
 * a receiver), then frees the channel once its call returned if that
 * completed the select's wait (a one-shot reply channel), else once the
 * select returned. */
proctype Partner()
{
	bool claimed = false, woke;
	touch();
	atomic { !lk -> lk = true };
	touch();
	if
	:: linked ->
		assert(!gone);
		linked = false;
		atomic {
			if
			:: claim == 0 -> claim = 1 | WAKING; claimed = true
			:: else	/* abandoned: dropped */
			fi
		}
		if
		:: claimed -> completed++
		:: else
		fi
	:: else
	fi;
	lk = false;
	/* weft__wnode_wake, after the release */
	if
	:: claimed ->
		assert(!gone);
		wake(PW_CHAN, woke);
		if
		:: !woke -> assert(!gone); claim = claim & ~WAKING
		:: else
		fi;
		alive = false
	:: else ->
		gone;
		alive = false
	fi
}

#ifndef QUEUED
/* fd_event: readiness claims the waiter in the slot, or leaves READY. */
proctype Harvester()
{
	bool mine = false, woke;
	atomic {
		readiness = true;
		if
		:: slot == S_NULL -> slot = S_READY
		:: slot == S_W -> slot = S_WCL; mine = true
		:: else
		fi
	}
	if
	:: mine ->
		assert(!gone);
		wake(PW_READY, woke);
		assert(!gone);
		if	/* weft__fd_slot_release */
		:: woke -> slot = S_NULL
		:: else -> slot = S_READY
		fi
	:: else
	fi
}

/* weft_close: the generation first, then the slot's waiter, ECANCELED. */
proctype Closer()
{
	bool mine = false, woke;
	gen = 1;
	atomic {
		if
		:: slot == S_W -> slot = S_WCL; mine = true
		:: else
		fi
	}
	if
	:: mine ->
		assert(!gone);
		wake(PW_CLOSE, woke);
		assert(!gone);
		slot = S_NULL
	:: else
	fi
}
#else
/* A claimer of the select's fd queue node: the slot holder's
 * weft__fd_pass (the turn, with readiness) or weft_close's sweep of the
 * queue (why: which); its wake carries CLAIMED, with READY. */
proctype NodeClaimer(bool closing)
{
	bool mine = false, woke;
	if
	:: closing -> gen = 1
	:: else
	fi;
	atomic {	/* under qlock */
		if
		:: !closing -> readiness = true
		:: else
		fi;
		if
		:: fdlinked && fdclaim == 0 -> fdclaim = WAKING; fdlinked = false; mine = true
		:: else
		fi
	}
	if
	:: mine ->
		assert(!gone);
		wake(PW_FDCLAIM, woke);
		if
		:: !woke -> assert(!gone); fdclaim = fdclaim & ~WAKING
		:: else
		fi
	:: else
	fi
}
#endif

/* The deadline (the timer heap) and weft_cancel. */
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

#ifndef LOOK
init {
	atomic {
		run Select();
		run Partner();
#ifdef QUEUED
		run NodeClaimer(false);
		run NodeClaimer(true);
#else
		run Harvester();
		run Closer();
#endif
		run Waker(PW_TIMEOUT);
#ifndef NO_CANCEL
		run Waker(PW_CANCEL)
#endif
	}
}
#else
byte data;		/* bytes in the socket */
bool asleep;		/* B parked in the slot, not yet woken */

/* fd_event's harvest and weft__fd_redeliver alike: wakes the waiter in the
 * slot (claim, wake, release: one step here; fdslot.pml checks them), or
 * leaves READY. */
inline nudge_ready()
{
	atomic {
		if
		:: slot == S_NULL -> slot = S_READY
		:: slot == S_W -> slot = S_NULL; asleep = false
		:: else
		fi
	}
}

/* The peer's write of two bytes: one edge, harvested later. */
proctype Writer()
{
	data = data + 2;
	nudge_ready()
}

/* weft_read after EAGAIN, as libweft-hook's read: weft_wait(WEFT_IN |
 * WEFT_AFTER_EAGAIN) parks once (takes READY, or sleeps in the slot until
 * a wake), then the read again; EAGAIN parks again. */
proctype B()
{
	do
	:: atomic { data > 0 -> data--; break }
	:: data == 0 ->	/* EAGAIN; its park comes later */
		atomic {
			if
			:: slot == S_READY -> slot = S_NULL
			:: slot == S_NULL -> slot = S_W; asleep = true
			fi
		};
		!asleep	/* an invalid end state if it sleeps for good */
	od
}

/* A select with one fd case (readable) and, maybe, another case ready. */
proctype Look()
{
	bool took = false, ready, reported;
	atomic {	/* forget_ready */
		if
		:: slot == S_READY -> slot = S_NULL; took = true
		:: else
		fi
	}
	ready = data > 0;	/* poll(2) */
	took = took && ready;
	if
	:: ready -> reported = true
	:: ready -> reported = false	/* another case ready: it picks that one */
	:: else -> reported = false
	fi;
	/* weft__io_case_end */
#ifdef BUG_NO_HANDBACK
	if
	:: ready && !reported -> nudge_ready()
	:: else
	fi;
#else
	if
	:: ready && (took || !reported) -> nudge_ready()
	:: else
	fi;
#endif
	if	/* its caller reads one byte */
	:: reported -> atomic { if :: data > 0 -> data-- :: else fi }
	:: else
	fi
}

init {
	atomic {
		run B();
		run Writer();
		run Look()
	}
}
#endif
