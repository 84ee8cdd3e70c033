/* SPDX-License-Identifier: MIT */
/*
 * timerwatch.pml -- the timer watch (lib/idle.c, "the timer watch"): one
 * sleeping worker sleeps until the earliest deadline of every sleeping
 * worker's heap and fires them; the others sleep without a timeout unless
 * their own deadline comes first.
 *
 * What is checked
 * ---------------
 *  No timer late or lost: time advances only while every worker sleeps
 *  (process `clock`), to the earliest timeout among the sleepers; in that
 *  state every deadline in every heap must be at or after that timeout
 *  (assert in `clock`), so no deadline passes while all sleep, and a heap
 *  with a deadline while every worker sleeps without a timeout is a failed
 *  assertion (the minimum timeout is then INF).  While a worker is awake,
 *  time stands still: an awake worker fires its own heap at its turns, and
 *  the watcher, awake, the sleepers' too (weft__idle_fire_watched); a stuck
 *  awake watcher is the monitor's to rescue (weft__idle_watch_rescue), which
 *  is not modelled.
 *
 * Model
 * -----
 *  Each heap holds at most one deadline (heap[i], INF none): its earliest,
 *  which is all the protocol reads (weft__timers_next).  A worker, awake,
 *  fires its own due deadline, the due deadlines of every sleeping worker if
 *  it holds the watch, may arm one deadline (now + 1 or now + 2, up to
 *  TMAX), then announces itself idle (sleeping[me] = 1, after which
 *  idle_park's StoreLoad fence: every step here is sequentially
 *  consistent) and runs weft__idle_sleep_until: one step loads the watch
 *  word (holder, until), one step CASes it; the scan is a load of each
 *  other worker's sleeping flag, then of its heap (two steps); then the CAS
 *  (SCAN, me) -> (earliest, me).  It sleeps (asleep[me]) with timeout
 *  tmo[me].  Woken (by the clock at its timeout, or early: a token or a
 *  spurious return, at most MAXEARLY times), it runs weft__idle_watch_woke
 *  (its CAS to AWAKE), retracts (sleeping[me] = 0) and loops.
 *  `until` values: AWAKE 0, deadlines in the word's units, NONE (= INF:
 *  the watcher sleeps with no deadline), SCAN.  The word's rounding is
 *  modelled with units of 2 ticks (enc, rounding up, and dec, WATCH_SHIFT
 *  11 in idle.c) and a top deadline FAR (INT64_MAX - 1: a legal deadline,
 *  "forever"), which a worker may arm: it rounds up to UTOP + 1, one unit
 *  past the largest that decodes back (2^52 in idle.c), and decodes
 *  saturating, to INF.  The watcher's own timeout is its real deadline,
 *  only the word is rounded.
 *
 * Seeded bugs (each must make spin report an error):
 *  -DBUG_TRUST_SCAN      a sleeper that finds another's scan under way
 *                        sleeps untimed, trusting it: the scan may have
 *                        loaded its sleeping flag before it was stored.
 *  -DBUG_NO_TAKEOVER     a sleeper whose own deadline comes before the
 *                        watcher's sleeps untimed instead of taking the
 *                        watch: "every worker sleeps untimed while a timer
 *                        is due" (the watcher wakes too late for it).
 *  -DBUG_DECODE_OVERFLOW dec of UTOP + 1 (the top deadline rounded up)
 *                        shifts into the sign bit: below every deadline,
 *                        so every sleeper counts itself covered by a
 *                        watcher sleeping until FAR and sleeps untimed.
 */
#ifndef NW
#define NW 3
#endif
#ifndef TMAX
#define TMAX 3
#endif
#define INF 10
#define NONE INF
#define FAR 9		/* the top deadline: odd, so it rounds up past UTOP */
#define UTOP 4		/* the largest unit that decodes back: (FAR - 1) / 2 */
#define SCAN 11
#define AWAKE 0
#ifndef MAXEARLY
#define MAXEARLY 1
#endif

byte now = 0;
byte heap[NW];		/* earliest deadline, INF none */
bool sleeping[NW];	/* announced idle */
bool asleep[NW];	/* in epoll_wait */
byte tmo[NW];		/* that sleep's deadline, INF none */
byte holder = 0;	/* the watch word: the watcher's index + 1 ... */
byte until = AWAKE;	/* ... and until when it sleeps */
byte early = 0;

/* A deadline in the word's units, rounded up (weft__idle_watch_encode). */
inline enc(t, u)
{
	if
	:: t == INF -> u = NONE
	:: else -> u = (t + 1) / 2
	fi
}

/* Back, saturating at INF (weft__idle_watch_decode); the seeded bug wraps
 * to below every deadline. */
inline dec(u, d)
{
	if
	:: u > UTOP ->
#ifdef BUG_DECODE_OVERFLOW
		d = (u == NONE -> INF : 0)
#else
		d = INF
#endif
	:: else -> d = 2 * u
	fi
}

proctype worker(byte me)
{
	byte xh, xu, xd, own, next, i, t;
	bool s;
awake:
	atomic { if :: heap[me] <= now -> heap[me] = INF :: else -> skip fi };
	if
	:: holder == me + 1 ->
		i = 0;
		do
		:: i < NW ->
			atomic {
				if
				:: i != me && sleeping[i] && heap[i] <= now -> heap[i] = INF
				:: else -> skip
				fi
			};
			i++
		:: else -> break
		od
	:: else -> skip
	fi;
	if
	:: heap[me] == INF && now + 1 <= TMAX -> heap[me] = now + 1
	:: heap[me] == INF && now + 2 <= TMAX -> heap[me] = now + 2
	:: heap[me] == INF && now < FAR -> heap[me] = FAR
	:: true -> skip
	fi;
	sleeping[me] = 1;
	own = heap[me];		/* only w arms its heap: no one else raises it */
	do
	:: atomic { xh = holder; xu = until };
		dec(xu, xd);
		if
		:: xh != 0 && xh != me + 1 && xu == SCAN ->
#ifdef BUG_TRUST_SCAN
			tmo[me] = INF;
#else
			tmo[me] = own;
#endif
			goto sleep
		:: xh != 0 && xh != me + 1 && xu != AWAKE && xu != SCAN && own >= xd ->
			tmo[me] = INF;
			goto sleep
#ifdef BUG_NO_TAKEOVER
		:: xh != 0 && xh != me + 1 && xu != AWAKE && xu != SCAN && own < xd ->
			tmo[me] = INF;
			goto sleep
#endif
		:: else ->
			atomic {
				if
				:: holder == xh && until == xu -> holder = me + 1; until = SCAN; break
				:: else -> skip
				fi
			}
		fi
	od;
	next = heap[me];
	i = 0;
	do
	:: i < NW ->
		if
		:: i != me ->
			s = sleeping[i];
			if
			:: s -> t = heap[i]; if :: t < next -> next = t :: else -> skip fi
			:: else -> skip
			fi
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	enc(next, xu);
	atomic { if :: holder == me + 1 && until == SCAN -> until = xu :: else -> skip fi };
	tmo[me] = next;
sleep:
	skip;
	d_step { xh = 0; xu = 0; xd = 0; own = 0; next = 0; i = 0; t = 0; s = 0 };
	asleep[me] = 1;
end_sleep:
	(!asleep[me]);
	atomic { if :: holder == me + 1 && until != AWAKE -> until = AWAKE :: else -> skip fi };
	sleeping[me] = 0;
	goto awake
}

proctype clock()
{
	byte t, i;
end_clock:
	do
	:: atomic {
		(asleep[0] && asleep[1]
#if NW > 2
		 && asleep[2]
#endif
		) ->
		t = INF;
		i = 0;
		do
		:: i < NW -> if :: tmo[i] < t -> t = tmo[i] :: else -> skip fi; i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < NW -> assert(heap[i] >= t); i++
		:: else -> break
		od;
		if
		:: t == INF -> goto end_idle	/* no timeout and no timer: a valid end */
		:: t > now -> now = t
		:: else -> skip
		fi;
		i = 0;
		do
		:: i < NW -> if :: tmo[i] <= now -> asleep[i] = 0 :: else -> skip fi; i++
		:: else -> break
		od
	   }
	:: early < MAXEARLY ->
		atomic {
			if
			:: asleep[0] -> asleep[0] = 0
			:: asleep[1] -> asleep[1] = 0
#if NW > 2
			:: asleep[2] -> asleep[2] = 0
#endif
			fi;
			early++
		}
	od;
end_idle:
	skip
}

init
{
	byte i;
	atomic {
		i = 0;
		do
		:: i < NW -> heap[i] = INF; tmo[i] = INF; i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < NW -> run worker(i); i++
		:: else -> break
		od;
		run clock()
	}
}
