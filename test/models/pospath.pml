/* SPDX-License-Identifier: MIT */
/*
 * pospath.pml -- what the position turn is for (lib/io.c, ring_offset and
 * file_away), which posturn.pml does not model: posturn.pml checks that
 * the turn is a mutex (one holder, no lost turn) and has no file
 * position.  This model has one: each read at the position reads the
 * block at `pos` and moves it on; the property is that every block is
 * read at most once (read(2)'s atomicity, which weft.h promises for weft's
 * calls at the position of one fd).
 *
 *   ring reader (weft_read under WEFT_IO=uring): take the turn; at = lseek
 *          (pos); the transfer at offset `at` (reads block at); lseek(at +
 *          1); give the turn.  Three steps, none atomic with the others.
 *   vec reader (weft_readv, lib/net.c: readv(2) on the worker): under
 *          the kernel's position lock, one atomic step: read block pos,
 *          pos++; with VEC_TURN inside the turn (io.c's pos_enter, what
 *          the code does; weft_writev and weft_sendfile's in_fd alike).
 *
 * Configurations
 *  default        two ring readers: passes (the turn orders them).
 *  -DVEC          seeded bug: a ring reader beside a vec reader that takes
 *                 no turn (the code before pos_enter): spin finds a block
 *                 read twice, as test_posturn_adv's
 *                 weft_read_and_weft_readv_at_the_position_read_every_
 *                 block_once did in C.
 *  -DVEC -DVEC_TURN  the vec reader takes the turn too (the code): passes.
 */

#define BLOCKS 3

bool busy;
byte pos;
byte got[BLOCKS];
byte done;

inline take() {
	atomic { !busy -> busy = true }
}

inline give() {
	busy = false
}

inline mark(b) {
	atomic {
		if
		:: b < BLOCKS -> got[b]++; assert(got[b] == 1)
		:: else -> skip	/* end of file */
		fi
	}
}

proctype ring_reader() {
	byte at;
	do
	:: pos >= BLOCKS -> break
	:: else ->
		take();
		at = pos;	/* lseek(SEEK_CUR) */
		mark(at);	/* the ring's read at `at` */
		pos = at + 1;	/* lseek(at + res, SEEK_SET) */
		give()
	od;
	done++
}

proctype vec_reader() {
	do
	:: pos >= BLOCKS -> break
	:: else ->
#ifdef VEC_TURN
		take();
#endif
		atomic { mark(pos); pos++ }	/* readv(2), under the kernel's lock */
#ifdef VEC_TURN
		; give()
#endif
	od;
	done++
}

init {
	atomic {
		run ring_reader();
#ifdef VEC
		run vec_reader()
#else
		run ring_reader()
#endif
	}
	done == 2
}
