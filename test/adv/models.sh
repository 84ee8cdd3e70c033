#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs spin on fdclose_adv.pml: the default must report 0 errors (it is
# fdclose.pml), HOOKED_CLOSE and LINGER each an invalid end state against
# today's order.  Prints one line per run; exit 1 if a run differs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/weft-adv-models.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$here/fdclose_adv.pml" "$work/" && cd "$work" || exit 2
rc=0
for run in "ok|" "bug|-DHOOKED_CLOSE" "bug|-DLINGER"; do
	want=${run%%|*} def=${run#*|}
	spin -a $def fdclose_adv.pml >/dev/null && cc -O2 -o pan pan.c 2>/dev/null || exit 2
	errs=$(./pan -m100000 | sed -n 's/.*errors: \([0-9]*\).*/\1/p')
	got=ok; [[ $errs != 0 ]] && got=bug
	echo "fdclose_adv.pml ${def:-default}: errors $errs ($got, expected $want)"
	[[ $got == "$want" ]] || rc=1
done
exit $rc
