#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test/models/check.sh -- exhaustive spin safety checks of the Promela models
# (see README.md).  Every good configuration must report 0 errors over a
# complete search; every seeded bug (and each documented finding) must make
# spin report at least one error.  One line per run; exit status 1 on any
# unexpected outcome, 2 if a run could not be built.
#
#   test/models/check.sh            all runs, $JOBS (default: nproc) at a time
#   JOBS=1 test/models/check.sh     one at a time
#   KEEP=1 test/models/check.sh     keep the work directory (trails, pan output)
set -u

here=$(cd "$(dirname "$0")" && pwd)

if ! command -v spin >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "check.sh: installing spin" >&2
		apt-get install -y spin >/dev/null 2>&1 ||
			{ apt-get update >/dev/null 2>&1 && apt-get install -y spin >/dev/null 2>&1; }
	fi
	if ! command -v spin >/dev/null 2>&1; then
		echo "check.sh: spin is not installed; run: sudo apt-get install -y spin" >&2
		exit 1
	fi
fi
CC=${CC:-cc}
if ! command -v "$CC" >/dev/null 2>&1; then
	echo "check.sh: no C compiler ($CC) to build pan" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/weft-models.XXXXXX")
if [ -n "${KEEP:-}" ]; then
	echo "check.sh: work directory $work" >&2
else
	trap 'rm -rf "$work"' EXIT
fi

# model | expect (ok, bug, finding) | spin -D flags | pan cflags | name
# pan is built with -O0 unless the cflags say otherwise: gcc -O2 takes ~4 s of
# CPU on pan.c and only pays off for the runs with millions of states.
runs=(
	"park.pml|ok|||default: 2 workers, T spawns + wakes 1 coroutine"
	"park.pml|ok|-DSETTER_CO||waker is a coroutine on a worker"
	"park.pml|ok|-DSPURIOUS||+ spurious loop wakeups"
	"park.pml|ok|-DSETTER_CO -DSPURIOUS||coroutine waker + spurious wakeups"
	"park.pml|ok|-DFILL=1||+ a worker fills the stack depot when it finds nothing"
	"park.pml|ok|-DFILL=1 -DSETTER_CO|-O2|coroutine waker + a depot fill"
	"park.pml|bug|-DFILL=1 -DBUG_FILL_KEEPS_COUNT||the fill job leaves nr_spinning counted"
	"park.pml|ok|-DFILL=1 -DSEED_FILL_STAYS_SPINNING||blind spot: the filler stays a counted spinner (a wake delayed by a fill, not lost)"
	"park.pml|bug|-DBUG_NO_RECHECK||idle worker skips the re-check"
	"park.pml|bug|-DBUG_SPIN_DEC_LATE||re-check before nr_spinning--"
	"park.pml|bug|-DBUG_WATCH_NO_RECHECK||watcher sleeps without the re-check"
	"park.pml|bug|-DBUG_EARLY_QUEUE||waker queues a PARKING coroutine"
	"park.pml|bug|-DSETTER_CO -DBUG_NO_FINISH_LEFT||successor skips the predecessor's finish"
	"park.pml|bug|-DNW=3 -DSETTER_CO -DMAX_RETRACTS=8 -DBUG_REFUSED_LOOP|-O2|3 workers: refused worker retracts on a spinner's work"
	# park.pml cannot see invariant (2)'s wake (its slot is the deque's
	# newest item, its owner never stuck): spin finds nothing without it.
	# stopwake.pml checks that wake.
	"park.pml|ok|-DFINDING_NO_STOP_WAKE||blind spot: the last spinner never wakes another (see stopwake.pml)"
	"stopwake.pml|ok|||parallel-for: a stuck owner's 2 spawns, its slot run by a woken thief"
	"stopwake.pml|bug|-DFINDING_NO_STOP_WAKE||the last spinner that found work never wakes another"
	"stopwake.pml|bug|-DBUG_IGNORE_RUNNEXT||the last spinner ignores runnext slots (idletax)"
	"stopwake.pml|ok|-DNFILL=3||parallel-for: 3 spawns, 3 thieves"
	"stopwake.pml|bug|-DNFILL=3 -DBUG_SLOT_FILLS||the slot counts only if no slot was filled since the wake"
	"timerwatch.pml|ok|-DNW=2|-O2 -DCOLLAPSE|2 workers: one timed sleeper for every heap"
	"timerwatch.pml|bug|-DNW=2 -DBUG_TRUST_SCAN||a sleeper trusts a scan under way"
	"timerwatch.pml|bug|-DNW=2 -DBUG_NO_TAKEOVER||sleeps untimed with a deadline before the watcher's"
	"timerwatch.pml|bug|-DNW=2 -DBUG_DECODE_OVERFLOW||the top deadline's until decodes negative"
	"fdslot.pml|ok||-O2 -DCOLLAPSE|default: readiness, deadline, cancel, close"
	"fdslot.pml|ok|-DTWO_HARVESTERS -DNO_CANCEL|-O2 -DCOLLAPSE|two harvesters, close, deadline"
	"fdslot.pml|ok|-DNO_CLOSE||readiness, deadline, cancel"
	"fdslot.pml|ok|-DNO_CANCEL -DNO_CLOSE||readiness, deadline"
	"fdslot.pml|bug|-DBUG_NO_CLAIM||waker wakes without claiming"
	"fdslot.pml|bug|-DBUG_NO_CLOSE_CHECK||no gen check after the slot CAS"
	"fdslot.pml|bug|-DBUG_TIMER_UNLOCKED -DNO_CANCEL||timer wakes outside the heap lock"
	"fdslot.pml|bug|-DBUG_GEN_AFTER_REF||io_begin reads gen after its reference"
	"fdslot.pml|finding|-DSTRICT_DISARM||cancel CAS erased by disarm (benign)"
	"fdslot.pml|finding|-DSTRICT_UNREGISTER||READY after unregister (benign)"
	"fdturn.pml|ok||-O2 -DCOLLAPSE|default: 2 callers, deadline/cancel, close"
	"fdturn.pml|ok|-DNW=3 -DNO_CLOSE -DNO_INTR||3 callers, the turn down the queue"
	"fdturn.pml|ok|-DNW=3 -DNO_CLOSE -DNDATA=1||3 callers, deadline/cancel"
	"fdturn.pml|ok|-DSOCKET_EDGES -DNO_CLOSE||an edge per arrival"
	"fdturn.pml|bug|-DNO_CLOSE -DBUG_NO_PASS||turn not passed after a non-EAGAIN call"
	"fdturn.pml|bug|-DNO_CLOSE -DBUG_TURN_TO_LOSER||lost wake leaves the turn to its loser"
	"fdturn.pml|bug|-DNO_CLOSE -DBUG_ENQ_NO_RECHECK||enqueue trusts the load before qlock"
	"fdturn.pml|bug|-DNO_CLOSE -DBUG_RETRACT_QUEUED||retract ignores w|QUEUED"
	"fdturn.pml|finding|-DNO_CLOSE -DSTRICT_WINDOW||EAGAIN-before-readiness window (documented)"
	"fdclose.pml|ok|||default: a call and the next file against weft_close"
	"fdclose.pml|bug|-DCLOSE_AFTER_RESET||gen even again before close(2)"
	"fdclose.pml|bug|-DBUG_CANCEL_CLOSED||a call during close(2) gets ECANCELED"
	"fdclose.pml|bug|-DBUG_FORGET_NO_SETTLE||forget ignores a close(2) under way"
	"fdclose.pml|bug|-DBUG_SETTLE_NO_DEADLINE||a call waits out a lingering close(2)"
	"fdclose.pml|bug|-DBUG_HOOKED_CLOSE||close(2) re-enters weft_close (hooks)"
	"waitq.pml|ok|||default: plain wait, 1 claimer, deadline, cancel, free"
	"waitq.pml|ok|-DNCLAIM=2||plain wait, 2 claimers"
	"waitq.pml|ok|-DSELECT||select on 2 objects, a claimer each"
	"waitq.pml|ok|-DSELECT -DSAME_OBJ -DMAYBE_FREE||select, 2 cases on 1 object, kept or freed"
	"waitq.pml|bug|-DRELOCK_AFTER_CLAIM||claimed waiter relocks (the order before)"
	"waitq.pml|bug|-DSELECT -DRELOCK_AFTER_CLAIM||claimed select relocks (the order before)"
	"waitq.pml|bug|-DBUG_SOLE_STORE||sole node claimed by a plain store"
	"waitq.pml|bug|-DSELECT -DBUG_RELOCK_WINNER||select relocks its claimer's object"
	"waitq.pml|bug|-DSELECT -DSAME_OBJ -DMAYBE_FREE -DBUG_KEEP_SIBLINGS||claimer leaves the select's other nodes"
	"waitq.pml|ok|-DSELECT -DSAME_OBJ -DCLOSE||close: a select with 2 cases on the closed object"
	"waitq.pml|ok|-DSELECT -DCLOSE||close: a select on 2 objects, a close each"
	"waitq.pml|bug|-DSELECT -DSAME_OBJ -DCLOSE -DBUG_KEEP_SIBLINGS||close drops the select's other case: waits for good"
	"waitq.pml|bug|-DNO_DROP_WAIT||a dropper returns before the waiter left"
	"waitq.pml|bug|-DNCLAIM=2 -DNO_DROP_WAIT||the same, 2 claimers"
	"waitq.pml|bug|-DSELECT -DNO_DROP_WAIT||the same, a select's dropped node"
	"deque.pml|ok||-O2|default: owner + 2 thieves, 3 items, growth"
	"deque.pml|ok|-DNTHIEVES=1 -DNITEMS=4 -DNTAKES=3 -DNSTEALS=3||1 thief, 4 items"
	"deque.pml|bug|-DBUG_NO_CAS||last element taken without the CAS"
	"deque.pml|bug|-DBUG_READ_AFTER_CAS||thief reads the slot after its CAS"
	"deque.pml|bug|-DBUG_NO_STORE_LOAD||take reads top before bottom is stored"
	"unlock.pml|ok|||mutex: unlocker, cancelled waiter, last user frees"
	"unlock.pml|ok|-DRW_READER||rwlock: the last reader hands over to a writer"
	"unlock.pml|ok|-DRW_WRITER||rwlock: the writer hands over or gives back"
	"unlock.pml|bug|-DSTORE_BEFORE_RELEASE||mutex: unlocked state stored before the release"
	"unlock.pml|bug|-DRW_READER -DSTORE_BEFORE_RELEASE||rwlock: last reader's hold dropped before the lock"
	"unlock.pml|bug|-DRW_WRITER -DSTORE_BEFORE_RELEASE||rwlock: writer stores 0 before the release"
	"unlock.pml|ok|-DSEM||semaphore: a release racing a waiter's give-up"
	"unlock.pml|bug|-DSEM -DSTORE_BEFORE_RELEASE||semaphore: permit added under the lock"
	"interrupt.pml|ok|||default: 1 interrupter, 3 waits with their wakers"
	"interrupt.pml|ok|-DTWO||2 interrupters: merged while pending"
	"interrupt.pml|bug|-DNAIVE||the interrupter wakes without taking the bit"
	"interrupt.pml|bug|-DNO_PUT_BACK||a failed wake drops the interrupt"
	"interrupt.pml|bug|-DTWO -DNO_PUT_BACK||the same, 2 interrupters"
	"interrupt.pml|bug|-DNO_UNUSED_PUT_BACK||an EINTR that did not end its wait is dropped"
	"interrupt.pml|bug|-DDISARM_STORE||disarm stores over an interrupter's wake"
	"selectfd.pml|ok|||select: channel claim, fd readiness, close, deadline, cancel"
	"selectfd.pml|ok|-DQUEUED||select queued on the fd: hand-over and close claim its node"
	"selectfd.pml|bug|-DQUEUED -DBUG_CLAIMED_IS_CHAN||the fd queue's CLAIMED wake taken for the channel's"
	"selectfd.pml|bug|-DBUG_FD_NO_ABANDON||an fd wake relocks the channel without the abandon CAS"
	"selectfd.pml|bug|-DQUEUED -DBUG_FD_NO_ABANDON||the same, queued on the fd"
	"selectfd.pml|bug|-DBUG_NO_RETRACT_WAIT||claimed select leaves a CLAIMED fd slot"
	"selectfd.pml|ok|-DLOOK||select's poll drops READY, hands it back: AFTER_EAGAIN waiter"
	"selectfd.pml|bug|-DLOOK -DBUG_NO_HANDBACK||no hand-back after a report: the waiter sleeps on data"
	"harvest.pml|ok|||default: 4 sleepers' deadlines beside a reader"
	"harvest.pml|ok|-DN=6|-O2|6 sleepers"
	"harvest.pml|ok|-DLOCKED||the reader locked to its worker (pinned FIFO)"
	"harvest.pml|bug|-DBUG_EMPTY_FIFO_ONLY||turns harvest only an empty ready FIFO"
	"harvest.pml|bug|-DLOCKED -DBUG_PINNED_LAST||pinned FIFO popped only once the ready FIFO is empty"
	"harvest.pml|bug|-DBUG_YIELD_LAST||yield FIFO popped only once every other is empty"
	"poller.pml|ok|||worker poller: registration on the first waiter's loop, a stuck owner"
	"poller.pml|ok|-DCLOSE||worker poller: + weft_close while the reader may be parked"
	"poller.pml|bug|-DBUG_NO_RESCUE||the monitor leaves a stuck worker's instance alone"
	"poller.pml|bug|-DBUG_REREGISTER||each caller registers on its own loop"
	"poller.pml|bug|-DCLOSE -DBUG_DEL_SELF||close deletes from the closer's instance, not the owner's"
	"poller.pml|bug|-DBUG_RESCUE_ON_STUCK||the rescue queues the reader on the stuck worker's ready FIFO"
	"poller.pml|bug|-DCLOSE -DBUG_RESCUE_ON_STUCK||+ close: the rescue queues on the stuck worker"
	"poller.pml|finding|-DSTUCK_WITH_QUEUE||worker stuck with its own harvest's reader queued (known gap)"
	"uring.pml|ok|||default: a ring read against its CQE, deadline, cancel, close"
	"uring.pml|ok|-DNO_DATA||a read only a cancel ends"
	"uring.pml|bug|-DNO_DATA -DBUG_NO_CQE_WAIT||returns before its CQE arrived (buffer reused)"
	"uring.pml|bug|-DBUG_NO_CQE_WAIT||the same, data racing the cancel: bytes lost"
	"uring.pml|bug|-DBUG_CHECK_BEFORE_PUSH||close check before the push on files: lost wake"
	"uring.pml|bug|-DBUG_REASON_WINS||a cancel that came too late loses the bytes"
	"uring.pml|bug|-DBUG_STORE_AFTER||the reaper completes the op before it stores the result"
	"uring.pml|bug|-DNO_DATA -DBUG_CANCEL_CUR||the cancel goes to the current worker's ring, not the op's"
	"uring.pml|ok|-DMISS||a cancel the kernel misses goes again"
	"uring.pml|ok|-DNO_DATA -DMISS||a read only a cancel ends, the kernel missing cancels"
	"uring.pml|bug|-DNO_DATA -DMISS -DBUG_ONE_CANCEL||one cancel, missed: the read waits for good (the storm's hang)"
	"uring.pml|bug|-DNO_DATA -DMISS -DBUG_NO_RECANCEL||the wait times out but no new cancel goes"
	# adv-cmiss: the stop's deadline passes also where no cancel missed
	"uring.pml|ok|-DNO_DATA -DSLOW_REAP||the CQE slow to be reaped: re-cancels that find nothing"
	"uring.pml|ok|-DMISS -DSLOW_REAP||misses and slow reaps, data racing"
	# adv-cmiss: one worker, whose loop reaps only while the caller is parked
	"uring.pml|ok|-DONE_WORKER||one worker: its loop reaps and fires timers only while the caller is parked"
	"uring.pml|ok|-DNO_DATA -DMISS -DONE_WORKER||one worker, the kernel missing cancels"
	"uring.pml|ok|-DNO_DATA -DONE_WORKER -DTIMER_NOMEM -DBUG_ONE_CANCEL||one worker, no timer to be had: the stop before b4afdb1 (no deadline) parks"
	"uring.pml|ok|-DNO_DATA -DONE_WORKER -DTIMER_NOMEM||one worker, no timer to be had: the stop yields and looks again"
	"uring.pml|ok|-DNO_DATA -DMISS -DONE_WORKER -DTIMER_NOMEM||the same, the kernel missing cancels"
	"uring.pml|bug|-DNO_DATA -DONE_WORKER -DTIMER_NOMEM -DBUG_NOMEM_SPIN||ENOMEM taken for a stray wake: the stop spins, the loop never reaps"
	# adv-cmiss2: a loop for good is no invalid end state; the yield loop's
	# lap bound (uring.pml, TIMER_NOMEM) makes these two fail an assertion
	"uring.pml|bug|-DNO_DATA -DONE_WORKER -DTIMER_NOMEM -DBUG_YIELD_NO_LOOP||the stop's yield never lets the loop reap: it spins for good"
	"uring.pml|bug|-DNO_DATA -DMISS -DONE_WORKER -DTIMER_NOMEM -DBUG_NOMEM_NO_RECANCEL||the ENOMEM yield loop never cancels again: a missed cancel strands the read"
	"posturn.pml|ok|||default: 3 callers at the file position, deadlines, close"
	"posturn.pml|ok|-DNW=2||2 callers"
	"posturn.pml|bug|-DBUG_ABANDON_DROPS||a waiter handed the turn as its deadline fired keeps it"
	"posturn.pml|bug|-DBUG_CLOSE_HANDS||the close hands the turn to every waiter"
	"posturn.pml|bug|-DBUG_GIVE_CLEARS||give hands the turn on and clears busy"
	"uring_sock.pml|ok|||socket SQEs queued, flushed by the pass, the monitor, or a cancel"
	"uring_sock.pml|ok|-DNO_DATA||a RECV only its deadline's cancel ends"
	"uring_sock.pml|bug|-DBUG_NO_MONITOR_FLUSH||the monitor leaves a stuck worker's SQEs queued"
	"uring_sock.pml|bug|-DBUG_UNLOCKED_FLUSH||the monitor clears queued outside the SQ lock"
	"uring_sock.pml|bug|-DNO_DATA -DBUG_CANCEL_FIRST||the cancel goes in ahead of the queued RECV"
	"pospath.pml|ok|||two weft_read callers at the position, through the turn"
	"pospath.pml|bug|-DVEC||weft_readv without the turn: a block read twice"
	"pospath.pml|ok|-DVEC -DVEC_TURN||weft_readv through the turn too (pos_enter)"
	"uring_sock.pml|finding|-DTASK_WORK||a worker in an uninterruptible wait holds its RECVs' CQEs (known gap)"
)

one_run() {	# index
	local i=$1 spec dir model expect defs cflags name out states errors depth what verdict hash
	spec=${runs[$i]}
	IFS='|' read -r model expect defs cflags name <<<"$spec"
	dir=$work/$i
	out=$dir/result
	mkdir -p "$dir"
	cp "$here/$model" "$dir/"
	(
		cd "$dir" || exit 2
		# shellcheck disable=SC2086
		if ! spin -a $defs "$model" >spin.log 2>&1; then
			printf 'BUILD  %-10s %-44s spin -a failed: %s\n' "$model" "${defs:--}" \
				"$(head -n 1 spin.log)" >"$out"
			exit 0
		fi
		case " $cflags" in *" -O"*) ;; *) cflags="-O0 $cflags" ;; esac
		# shellcheck disable=SC2086
		if ! "$CC" -w -DSAFETY $cflags -o pan pan.c >cc.log 2>&1; then
			printf 'BUILD  %-10s %-44s pan build failed: %s\n' "$model" "${defs:--}" \
				"$(head -n 1 cc.log)" >"$out"
			exit 0
		fi
		# a bigger hash table for the big runs (-O2), pan's default otherwise
		case " $cflags" in *" -O2"*) hash=-w23 ;; *) hash=-w19 ;; esac
		./pan -m1000000 "$hash" >pan.out 2>&1
		states=$(awk '/states, stored/ { print $1; exit }' pan.out)
		errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.out | head -n 1)
		depth=$(sed -n 's/.*depth reached \([0-9][0-9]*\).*/\1/p' pan.out | head -n 1)
		what=$(grep -m 1 -E 'assertion violated|invalid end state' pan.out |
			sed -E 's/^pan:[0-9]+: //; s/ \(at depth [0-9]+\)//')
		if [ -z "$errors" ] || [ -z "$states" ]; then
			verdict=FAIL
			what="pan did not finish: $(tail -n 1 pan.out)"
		elif [ "$expect" = ok ]; then
			if [ "$errors" = 0 ] && ! grep -q 'max search depth too small' pan.out; then
				verdict=PASS
				what="0 errors, complete search (depth $depth) -- $name"
			else
				verdict=FAIL
				[ "$errors" = 0 ] && what="search incomplete (depth limit)"
				what="UNEXPECTED: $errors error(s): $what -- $name"
			fi
		else
			if [ "$errors" -ge 1 ]; then
				verdict=PASS
				what="found as expected ($expect): $what -- $name"
			else
				verdict=FAIL
				what="UNEXPECTED: no error for a seeded $expect -- $name"
			fi
		fi
		printf '%s   %-10s %-44s %9s states  %s\n' "$verdict" "$model" "${defs:-(default)}" \
			"$states" "$what" >"$out"
	)
}

jobs_max=${JOBS:-$(nproc 2>/dev/null || echo 2)}
start=$(date +%s)
# the longest runs (the ones built with -O2) first
order=()
for i in "${!runs[@]}"; do
	case ${runs[$i]} in *-O2*) order+=("$i") ;; esac
done
for i in "${!runs[@]}"; do
	case ${runs[$i]} in *-O2*) ;; *) order+=("$i") ;; esac
done
for i in "${order[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
		wait -n 2>/dev/null || sleep 0.2
	done
	one_run "$i" &
done
wait

status=0
for i in "${!runs[@]}"; do
	if [ -f "$work/$i/result" ]; then
		line=$(cat "$work/$i/result")
	else
		line="FAIL   ${runs[$i]%%|*} run $i produced no result"
	fi
	echo "$line"
	case $line in
	PASS*) ;;
	BUILD*) [ "$status" = 0 ] && status=2 ;;
	*) status=1 ;;
	esac
done
echo "check.sh: ${#runs[@]} runs in $(( $(date +%s) - start )) s: $([ "$status" = 0 ] && echo all as expected || echo UNEXPECTED OUTCOMES)"
exit "$status"
