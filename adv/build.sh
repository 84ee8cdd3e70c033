#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# adv/build.sh BUILD_DIR [SOURCES...]: builds adv/*.c (or the sources named)
# against BUILD_DIR's lib (a directory named *asan*: -fsanitize=address,
# undefined; *tsan*: -fsanitize=thread) into BUILD_DIR/adv/.  BUILD_DIR may
# be another tree's build (an older commit's, for a before/after run): its
# include/ is then ../include from it.  signal_yield.c is linked with
# BUILD_DIR's libweft-hook too (ninja -C BUILD_DIR hook/libweft-hook.so.0.1.0).
set -euo pipefail
cd "$(dirname "$0")/.."
b=$(realpath "$1")
shift
srcs=("$@")
[[ ${#srcs[@]} -gt 0 ]] || srcs=(adv/*.c)
flags=()
case $(basename "$b") in
*asan*) flags=(-fsanitize=address,undefined) ;;
*tsan*) flags=(-fsanitize=thread) ;;
esac
mkdir -p "$b/adv"
for src in "${srcs[@]}"; do
	out=$b/adv/$(basename "$src" .c)
	hook=()
	[[ $src == *signal_yield.c ]] && hook=(-Wl,--no-as-needed -L"$b/hook" -Wl,-rpath,"$b/hook" -lweft-hook)
	gcc -std=gnu11 -O1 -g -Wall -Wextra "${flags[@]}" -I"$b/../include" -I"$b/../lib" -Iadv \
		-o "$out" "$src" "${hook[@]}" -L"$b/lib" -Wl,-rpath,"$b/lib" -lweft -lpthread
done
