#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/gdb/weft.py in batch mode, on test/gdb_coroutines.c stopped in
# weft_test_stop_here(): `info weft-coroutines` lists every coroutine with
# the right id, state, worker, entry function and name; `weft-bt` shows a
# parked coroutine's frames from its saved context (its nested calls, down to
# the trampoline), says where a running one is, rejects a bad id clearly, and
# leaves the thread's own backtrace and selected frame as they were.
#
# Usage: gdb_coroutines.sh TARGET WEFT_PY
set -eu
target=$1
script=$2

# weft_bt_of("ENTRY"): weft-bt of the coroutine whose entry function is
# ENTRY, its id read from the listing (-1, a bad id, if it is not there).
helper=$(mktemp)
trap 'rm -f "$helper"' EXIT
cat >"$helper" <<'EOF'
import re

def weft_bt_of(entry):
    listing = gdb.execute("info weft-coroutines", to_string=True)
    m = re.search(r"^\*?\s+(\d+)\s.*\s" + entry + r"(\s|$)", listing, re.M)
    gdb.execute("weft-bt " + (m.group(1) if m else "-1"))
EOF
# Each command's output is headed by a `==== name` line.
out=$(gdb -nx -batch \
	-iex 'set debuginfod enabled off' \
	-ex "source $script" \
	-ex 'break weft_test_stop_here' \
	-ex run \
	-ex "python exec(open('$helper').read())" \
	-ex 'echo ==== list\n' -ex 'info weft-coroutines' \
	-ex 'echo ==== nested\n' -ex 'python weft_bt_of("gdb_co_nested")' \
	-ex 'echo ==== sleeper\n' -ex 'python weft_bt_of("gdb_co_sleeper")' \
	-ex 'echo ==== receiver\n' -ex 'python weft_bt_of("gdb_co_receiver")' \
	-ex 'echo ==== running\n' -ex 'python weft_bt_of("gdb_co_main")' \
	-ex 'echo ==== badid\n' -ex 'weft-bt 999999' \
	-ex 'echo ==== notid\n' -ex 'weft-bt abc' \
	-ex up -ex 'echo ==== restored\n' -ex 'python weft_bt_of("gdb_co_nested")' \
	-ex 'echo ==== frame\n' -ex frame -ex 'echo ==== bt\n' -ex bt \
	-ex 'echo ==== end\n' \
	"$target" 2>&1)
printf '%s\n' "$out"

fail() { echo "FAIL: $*"; exit 1; }
# The lines of section $1 (between `==== $1` and the next `==== `).
section() { printf '%s\n' "$out" | awk -v s="==== $1" '$0 == s { on = 1; next } /^==== / { on = 0 } on'; }
has() { section "$1" | grep -Eq -- "$2"; }
# The line number of the first frame in section $1 matching $2 (0 if none).
frame_at() { section "$1" | grep -n '^#' | grep -E -- "$2" | head -n 1 | cut -d: -f1 | grep . || echo 0; }

printf '%s\n' "$out" | grep -q '^==== end$' || fail "gdb did not run every command"
if printf '%s\n' "$out" | grep -Eq 'Python Exception|Traceback|Error occurred in Python'; then
	fail "the script raised a Python exception"
fi

# The listing: ids as the program printed them ("id ENTRY N").
id_of() { printf '%s\n' "$out" | sed -n "s/^id $1 \([0-9][0-9]*\)\$/\1/p"; }
for e in gdb_co_sleeper gdb_co_receiver gdb_co_nested gdb_co_done main; do
	[ -n "$(id_of "$e")" ] || fail "the program did not print the id of $e"
done
row() { has list "^$1 +$2 +$3 +0 +$4 +$5 *$6\$" || fail "no listing line: id $2 $3 worker 0 thread $4 $5 '$6'"; }
row ' ' "$(id_of gdb_co_sleeper)" parked - gdb_co_sleeper sleeper
row ' ' "$(id_of gdb_co_receiver)" parked - gdb_co_receiver receiver
row ' ' "$(id_of gdb_co_nested)" parked - gdb_co_nested ''
row ' ' "$(id_of gdb_co_done)" finished - gdb_co_done ''
row '\*' "$(id_of main)" running '[0-9]+' gdb_co_main main
[ "$(section list | grep -c '^[ *] *[0-9]')" -eq 5 ] || fail "the listing does not have exactly 5 coroutines"

# A parked coroutine's backtrace: its own frames, innermost first, from #0,
# ending at the trampoline, without the stopped thread's frames.
check_bt() {
	name=$1
	shift
	has "$name" '^#0 ' || fail "$name: no frame #0"
	prev=0
	for f in "$@"; do
		at=$(frame_at "$name" " $f ")
		[ "$at" -gt "$prev" ] || fail "$name: no frame $f after the ones before it"
		prev=$at
	done
	last=$(section "$name" | grep '^#' | tail -n 1)
	case $last in
	*weft__ctx_entry* | *weft.ctx_entry*) ;;	# the latter: gdb's demangling, clang's DWARF
	*) fail "$name: the backtrace does not end at the trampoline: $last" ;;
	esac
	! has "$name" 'weft_test_stop_here' || fail "$name: shows the stopped thread's frames"
	! has "$name" 'corrupt stack|Backtrace stopped|weft-bt:' || fail "$name: gdb complained"
}
check_bt nested gdb_park_here gdb_park_middle gdb_co_nested co_main
check_bt sleeper weft_sleep gdb_co_sleeper co_main
check_bt receiver gdb_co_receiver co_main
check_bt restored gdb_park_here gdb_park_middle gdb_co_nested

has running '^Coroutine [0-9]+ is running on worker 0' || fail "weft-bt of the running coroutine"
has running 'gdb thread [0-9]+' || fail "weft-bt does not name the running coroutine's thread"
has badid '^weft-bt: no live coroutine has id 999999' || fail "no clear error for a bad id"
has notid "^weft-bt: 'abc' is not a coroutine id" || fail "no clear error for a non-numeric id"

# Afterwards the thread's frames are its own again, the selected one too.
has frame '^#1 ' || fail "weft-bt did not restore the selected frame"
has bt '^#0 +weft_test_stop_here' || fail "weft-bt did not restore the thread's backtrace"
echo "gdb coroutines ok"
