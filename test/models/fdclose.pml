/* SPDX-License-Identifier: MIT */
/*
 * fdclose.pml -- weft_close (lib/io.c) against calls that start while it
 * runs, and the fd number's next file (issue 44, finding 5).
 *
 * An fd entry (lib/fdtable.h) outlives the files that take its number.
 * weft_close forgets the file (waiters woken, calls drained, the fd
 * unregistered: owner 0) and calls close(2).  A call that registers the
 * old file again after the unregistration, before the close(2), leaves the
 * entry saying "registered" while close(2) drops the kernel's
 * registration: the next file with the number would skip EPOLL_CTL_ADD and
 * O_NONBLOCK (its read parks forever, or blocks the worker).  And a file
 * another thread opens the moment close(2) frees the number is not the
 * closed one: its calls must not be cancelled by that close.
 *
 * Processes: the closer (weft_close of file 1, the number's file at the
 * start); a user of file 1 whose one call (io_begin, registration, the
 * syscall) may start at any moment, before, during or after the close;
 * an opener (another thread) that takes the number as soon as close(2)
 * frees it, makes file 2 there, runs one call on it (or none), then
 * weft_closes it too (a second close of the number while the first may
 * still be finishing).
 *
 * What is checked
 *  - a call that started before close(2) (it read gen before the ghost
 *    `sysclosed` was set) touches only its own file: it registered it or
 *    runs its syscall while the number still names it (it "runs before
 *    the close"), or it gets ECANCELED;
 *  - a call that runs its syscall finds its file registered and
 *    non-blocking (else a read would park forever, or block the worker);
 *  - the next file's call is never cancelled by a close that was not its
 *    own;
 *  - forget starts only on an entry whose previous close has ended (gen a
 *    multiple of 4), and it waits for the calls in flight (refs == 0 at a
 *    label that is not an end label);
 *  - at the end, an entry that says registered names a registered file;
 *  - every process ends (no invalid end state): weft_close's close(2) may
 *    linger (SO_LINGER) past the next file's call, which then ends at its
 *    own deadline or cancel, and close(2) never runs weft_close again.
 *
 * Configurations and seeded bugs (spin -D...)
 *  default               the order of issue 44: gen odd until close(2) has
 *                        returned, FD_GEN_CLOSED around it; close(2) of
 *                        file 1 returns at once or lingers until the next
 *                        file's call is over; a call waiting in gen_settled
 *                        may give up (its deadline, or a cancel); close(2)
 *                        is the system call (lib/sys.h).
 *  -DCLOSE_AFTER_RESET   the order before the fix: gen made even (the next
 *                        file's) after the unregistration, then close(2):
 *                        a call in between registers the file being closed.
 *                        (gen as it was then: even open, odd closing, no
 *                        FD_GEN_CLOSED, nothing to wait out.)
 *  -DBUG_CANCEL_CLOSED   io_begin treats FD_GEN_CLOSED as FD_GEN_CLOSING
 *                        (ECANCELED) instead of waiting for the next
 *                        file's generation: the file that takes the number
 *                        as close(2) returns gets ECANCELED.
 *  -DBUG_FORGET_NO_SETTLE  forget bumps gen without waiting out a close(2)
 *                        of the number's previous file: the two closes'
 *                        generations mix.
 *  -DBUG_SETTLE_NO_DEADLINE  gen_settled reads neither the call's deadline
 *                        nor its cancellation: while file 1's close(2)
 *                        lingers, the next file's call waits for it, and
 *                        the close waits for the call (invalid end state).
 *  -DBUG_HOOKED_CLOSE    weft_close's close(2) is the interposable close(),
 *                        libweft-hook's (an fd the hooks track): it runs the
 *                        close protocol again, in the same coroutine, whose
 *                        forget waits for the FD_GEN_CLOSED that only the
 *                        outer close ends (invalid end state).
 *
 * Correspondence (C -> Promela); one step per C atomic access
 *  e->gen, e->refs, e->owner   fd_gen, refs, owner (O_NONE, O_BUSY, O_REG).
 *  the kernel                  at: the file the number names (0: free);
 *                              kreg[f]: f is in the shared epoll; nb[f]:
 *                              f is O_NONBLOCK.  close(2) of f: at = 0 and
 *                              kreg[f] = 0 (epoll drops a closed file).
 *  io_begin                    load gen (+ the ghost `late`: close(2) of
 *                              file 1 had happened); gen_settled: while
 *                              gen & 3 == FD_GEN_CLOSED (3), wait for a
 *                              change and reload, or give up (R_GAVE_UP:
 *                              the deadline or a cancel, at any moment);
 *                              odd -> ECANCELED; FAA
 *                              refs; load gen (changed -> ECANCELED).
 *  weft__fd_registered / weft__loop_register   load owner: O_REG -> go on;
 *                              CAS O_NONE -> O_BUSY; register_fd (fstat,
 *                              EPOLL_CTL_ADD, fcntl O_NONBLOCK on whatever
 *                              the number names: one step; EBADF if
 *                              nothing); store O_REG, or O_NONE on failure;
 *                              O_BUSY: wait (sched_yield) and reload.
 *  the call's syscall          one step on the number; then ref_drop.
 *  forget                      gen_settled; FAA gen (+1, FD_GEN_CLOSING);
 *                              (waking the waiters: fdslot.pml, fdturn.pml)
 *                              wait refs == 0; load owner; registered:
 *                              EPOLL_CTL_DEL, store owner O_NONE (the slots'
 *                              reset is not modelled).
 *  weft_close                  forget; gen_move to FD_GEN_CLOSED (+2);
 *                              close(2) (the number freed at once; a
 *                              linger: waits for `next_called`, the next
 *                              file's call over); gen_move to the next
 *                              file's (+1).
 * Memory model: spin is sequentially consistent; gen's and refs' RMWs and
 * loads are seq_cst in C (atomic.h), owner's CAS too; the registrar's
 * fence before its owner store and the syscalls' own ordering (the kernel's
 * fd table lock orders close(2) before the open(2) that reuses the number)
 * are message passing.  Not modelled: weft_release (it has no close(2):
 * gen goes from FD_GEN_CLOSING to the next file's at once, and a caller
 * that close(2)s the fd afterwards owns it, calls on it included).
 */

#define O_NONE 0
#define O_BUSY 1
#define O_REG  2

#define R_NONE     0
#define R_OK       1
#define R_CANCELED 2
#define R_BADF     3
#define R_GAVE_UP  4	/* its own deadline or cancel, in gen_settled */

byte fd_gen;
byte refs;
byte owner = O_NONE;
byte at = 1;		/* the kernel: file 1 holds the number */
bit kreg[3];
bit nb[3];
bit sysclosed;		/* ghost: close(2) of file 1 has happened */
bit next_called;	/* the opener's call (or its choice of none) is over */
byte done;

/*
 * One weft call on the number by the user of file `own`: io_begin, the
 * registration if the entry has none, the syscall, ref_drop.
 */
inline io_call(own, late, res, g)
{
	d_step { g = fd_gen; late = sysclosed };
	do	/* gen_settled */
#if !defined(BUG_CANCEL_CLOSED) && !defined(CLOSE_AFTER_RESET)
	:: (g & 3) == 3 && fd_gen != g -> d_step { g = fd_gen; late = sysclosed }
#ifndef BUG_SETTLE_NO_DEADLINE
	:: (g & 3) == 3 -> res = R_GAVE_UP; break
#endif
	:: (g & 3) != 3 -> break
#else
	:: else -> break
#endif
	od;
	if
	:: res == R_GAVE_UP
	:: g & 1 && res != R_GAVE_UP -> res = R_CANCELED	/* weft_close is running */
	:: else ->
		refs++;
		if
		:: fd_gen != g -> refs--; res = R_CANCELED
		:: else ->
			do
			:: owner == O_REG -> res = R_OK; break
			:: atomic { owner == O_NONE -> owner = O_BUSY };
				d_step {
					assert(late || at == own);	/* its own file only */
					if
					:: at == 0 -> res = R_BADF
					:: else -> kreg[at] = 1; nb[at] = 1; res = R_OK
					fi
				};
				if
				:: res == R_OK -> owner = O_REG
				:: else -> owner = O_NONE
				fi;
				break
			od;
			if
			:: res == R_OK ->
				d_step {	/* the syscall; a read would park */
					assert(late || at == own);
					assert(at == 0 || (kreg[at] && nb[at]))
				}
			:: else
			fi;
			refs--
		fi
	fi
}

inline weft_close(f, g)
{
	/* forget */
#ifdef CLOSE_AFTER_RESET
	d_step { g = fd_gen; fd_gen++ };
	assert((g & 1) == 0);		/* gen: even open, odd closing */
#else
#ifndef BUG_FORGET_NO_SETTLE
	(fd_gen & 3) != 3;		/* gen_settled */
#endif
	d_step { g = fd_gen; fd_gen++ };
	assert((g & 3) == 0);
#endif
	refs == 0;			/* not an end label: a stuck call is an error */
	assert(at == f && owner != O_BUSY);
	if
	:: owner == O_REG -> kreg[f] = 0; owner = O_NONE	/* weft__loop_unregister */
	:: else
	fi;
#ifdef CLOSE_AFTER_RESET
	fd_gen++;			/* even: the next file's */
	d_step { at = 0; kreg[f] = 0; sysclosed = sysclosed || f == 1 };	/* close(2) */
#else
	fd_gen = fd_gen + 2;		/* FD_GEN_CLOSED */
#ifdef BUG_HOOKED_CLOSE
	/* the hooks' close(): the close protocol again, its forget first */
	(fd_gen & 3) != 3;		/* gen_settled: not an end label */
	assert(0);			/* not reached */
#endif
	d_step { at = 0; kreg[f] = 0; sysclosed = sysclosed || f == 1 };	/* close(2) */
	if
	:: f == 1 -> next_called	/* lingers past the next file's call */
	:: true
	fi;
	fd_gen++;			/* the next file's */
#endif
}

active proctype closer()
{
	byte g;
	weft_close(1, g);
	done++
}

active proctype user()
{
	byte g, res;
	bit late;
	io_call(1, late, res, g);
	done++
}

active proctype opener()
{
	byte g, res;
	bit late;
	atomic { at == 0 -> at = 2 };	/* open(2) takes the free number */
	if
	:: io_call(2, late, res, g);
		assert(res == R_OK || res == R_GAVE_UP)	/* not cancelled by file 1's close */
	:: skip				/* closed unused */
	fi;
	next_called = 1;
	weft_close(2, g);
	done++
}

active proctype final()
{
end:	done == 3 -> assert(owner != O_REG || (at != 0 && kreg[at]))
}
