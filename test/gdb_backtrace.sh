#!/bin/sh
# SPDX-License-Identifier: MIT
# gdb shows a clean backtrace inside a coroutine: the user's frames, the
# coroutine's entry, and the trampoline as the outermost frame (its CFI marks
# the return address undefined), with no garbage frames or errors after it.
set -eu
target=$1
out=$(gdb -nx -batch -ex 'break weft_test_leaf' -ex run -ex bt "$target" 2>&1)
frames=$(printf '%s\n' "$out" | grep '^#' || true)
printf '%s\n' "$frames"
fail() { echo "FAIL: $*"; printf '%s\n' "$out"; exit 1; }
printf '%s\n' "$frames" | grep -q 'weft_test_leaf' || fail "no leaf frame"
printf '%s\n' "$frames" | grep -q 'weft_test_middle' || fail "no middle frame"
printf '%s\n' "$frames" | grep -q 'co_main' || fail "no coroutine entry frame"
last=$(printf '%s\n' "$frames" | tail -n 1)
# gdb prints the trampoline as weft.ctx_entry when clang assembled it:
# clang's assembler describes it with a DWARF label (gas does not), and gdb
# shows that label's "__" as ".".
case $last in
*weft__ctx_entry* | *weft.ctx_entry*) ;;
*) fail "the backtrace does not end at the trampoline: $last" ;;
esac
if printf '%s\n' "$out" | grep -Eq 'corrupt stack|Backtrace stopped'; then
	fail "gdb complained about the stack"
fi
echo "gdb backtrace ok"
