#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs the adversarial reproductions of test/adv against a build
# directory's libweft and libweft-hook (default: build).
#   test/adv/run.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
b=$(realpath "${1:-build}")
o=$b/adv
mkdir -p "$o"
cc -O1 -g -fPIC -shared -Iinclude -o "$o/libdelayshim.so" test/adv/delay_shim.c -L"$b/lib" -lweft -ldl || exit 2
cc -O1 -g -Iinclude -o "$o/hook_close_race" test/adv/hook_close_race.c \
	-Wl,--no-as-needed -L"$b/hook" -lweft-hook -L"$o" -ldelayshim -L"$b/lib" -lweft \
	-lpthread -ldl -Wl,-rpath,"$b/hook:$o:$b/lib" || exit 2
rc=0
for m in close dup2 dup2-waited close-waited close-racing-wait; do
	"$o/hook_close_race" "$m"
	s=$?
	echo "== $m: exit $s"
	[[ $s == 0 ]] || rc=1
done
exit $rc
