#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# adv/run.sh BUILD_DIR TAG: runs every reproduction built by adv/build.sh
# BUILD_DIR, each under a watchdog (timeout 300 s), its output and exit
# status into adv/out/TAG-NAME.txt.  Exit status 1 from a reproduction
# means it found its problem; 124 is the watchdog.
set -uo pipefail
cd "$(dirname "$0")/.."
b=$(realpath "$1")
tag=$2
mkdir -p adv/out
runs=(
	"pinned_reader unlocked 200"
	"pinned_reader locked 200"
	"pinned_reader locked 200 2"
	"starved_transfer 20"
	"starved_transfer 2000"
	"budget_after_yield 64"
	"budget_after_yield 512"
	"nodelay_enoprotoopt"
	"group_attack"
	"signal_yield"
	"many_readers 256 100"
	"many_readers 1024 100"
)
for r in "${runs[@]}"; do
	set -- $r
	[[ -x $b/adv/$1 ]] || continue
	out=adv/out/$tag-${r// /-}.txt
	{
		echo "\$ $b/adv/$r"
		timeout 300 "$b/adv/$@" 2>&1
		echo "exit status $?"
	} > "$out"
	tail -n 3 "$out"
done
