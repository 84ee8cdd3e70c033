#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the API fuzzer (test/fuzz/fuzz_api.c) against an ASan+UBSan build of
# the library and runs it.
#
#   test/fuzz/run.sh [SECONDS]     fuzz for SECONDS (default 120) from a copy of
#                                  test/fuzz/corpus/ (the repository's corpus is
#                                  never written); exits 1 and prints the
#                                  crash file if one is found
#   test/fuzz/run.sh --regress     runs every input of test/fuzz/corpus/ and
#                                  test/fuzz/regressions/ (each in its own
#                                  process, twice), no fuzzing; exits 1 if any
#                                  fails
#   test/fuzz/run.sh --build       only builds
#
# Environment:
#   FUZZ_SEED         passed as -seed=N (default: libFuzzer picks one)
#   FUZZ_JOBS         parallel fuzzing processes (-fork=N; default 1, one process)
#   FUZZ_BUILD_DIR    meson build directory (default build-fuzz)
#   FUZZ_OUT          where crash/timeout files go (default a temporary directory)
#   FUZZ_CORPUS       another directory of inputs to start from (copied too)
#   FUZZ_ARGS         extra libFuzzer options
#   FUZZ_API_WATCHDOG_MS  the harness's own per-input bound (default 5000)
#
# The library is configured like .ci/run's sanitizer builds (CC=clang,
# -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false), plus
# -fsanitize=fuzzer-no-link so libFuzzer sees the library's coverage, and
# without the tests and examples (not needed here).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
fuzz=test/fuzz
build=${FUZZ_BUILD_DIR:-build-fuzz}
bin=$build/fuzz_api

usage() {
	echo "usage: test/fuzz/run.sh [SECONDS] | --regress | --build" >&2
	exit 2
}

mode=fuzz
seconds=120
case "${1:-}" in
'') ;;
--regress) mode=regress ;;
--build) mode=build ;;
-h | --help) usage ;;
*)
	[[ $1 =~ ^[0-9]+$ ]] || usage
	seconds=$1
	;;
esac

for tool in clang meson ninja; do
	command -v "$tool" >/dev/null || {
		echo "fuzz: $tool not found (apt-get install clang libclang-rt-14-dev meson ninja-build)" >&2
		exit 1
	}
done

# ------------------------------------------------------------------ build
# shellcheck disable=SC2086 # WEFT_CI_MESON_ARGS is a list of options (.ci/run)
if [[ ! -f $build/build.ninja ]]; then
	CC=clang meson setup "$build" \
		-Db_sanitize=address,undefined -Db_lundef=false -Dbench=false \
		-Dtests=false -Dexamples=false \
		-Dc_args=-fsanitize=fuzzer-no-link ${WEFT_CI_MESON_ARGS:-} >"$build.setup.log" 2>&1 || {
		cat "$build.setup.log" >&2
		exit 1
	}
	rm -f "$build.setup.log"
elif [[ -n ${WEFT_CI_MESON_ARGS:-} ]]; then
	meson configure "$build" ${WEFT_CI_MESON_ARGS} >/dev/null
fi
meson compile -C "$build" lib/weft:static_library lib/weft:shared_library >/dev/null

# The static library, so the binary runs from anywhere; the library's deps
# are the ones its build chose (liburing only where it was found), from the
# uninstalled weft.pc meson wrote.
deps=$(pkg-config --libs "$(pkg-config --print-requires-private \
	"$build/meson-uninstalled/weft-uninstalled.pc" | tr '\n' ' ')")
# -fsanitize=undefined recovers by default; -fno-sanitize-recover makes
# UBSan in the harness fatal, UBSAN_OPTIONS=halt_on_error=1 the library's.
clang -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-Iinclude "$fuzz/fuzz_api.c" "$build/lib/libweft.a" $deps -lpthread -lm \
	-o "$bin.tmp"
mv "$bin.tmp" "$bin"
[[ $mode == build ]] && { echo "fuzz: built $bin"; exit 0; }

# ------------------------------------------------------------------ run
# detect_leaks: libFuzzer checks each input for leaks (weft_init/shutdown
# run once per input, so a leak per cycle shows up).  The fake stacks of
# detect_stack_use_after_return work with weft's fiber annotations but cost
# a lot; they are off (ASan's default) unless ASAN_OPTIONS says otherwise.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1:allocator_may_return_null=1:handle_abort=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
common=(-timeout=10 -rss_limit_mb=4096 -max_len=768 -print_final_stats=1)

if [[ $mode == regress ]]; then
	files=()
	for dir in "$fuzz/corpus" "$fuzz/regressions"; do
		[[ -d $dir ]] || continue
		for f in "$dir"/*; do
			[[ -f $f && $(basename "$f") != README* ]] && files+=("$f")
		done
	done
	[[ ${#files[@]} -gt 0 ]] || { echo "fuzz: no inputs" >&2; exit 1; }
	echo "fuzz: running ${#files[@]} inputs"
	# Each input in its own process (a crash does not hide the others), run
	# twice: a second init/shutdown cycle must work as well as the first.
	failed=()
	for f in "${files[@]}"; do
		if ("$bin" "${common[@]}" -runs=2 "$f"; exit $?) >"$build/regress.log" 2>&1; then
			echo "  ok    $f"
		else
			echo "  FAIL  $f"
			grep -E 'INVARIANT|WATCHDOG|runtime error|ERROR: (Address|Leak|libFuzzer)|SUMMARY' \
				"$build/regress.log" | head -5 | sed 's/^/        /'
			failed+=("$f")
		fi
	done
	if [[ ${#failed[@]} -gt 0 ]]; then
		echo "fuzz: ${#failed[@]} of ${#files[@]} inputs failed (rerun one: $bin FILE)" >&2
		exit 1
	fi
	echo "fuzz: all ${#files[@]} inputs passed"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/weft-fuzz.XXXXXX")
out=${FUZZ_OUT:-$work/artifacts}
mkdir -p "$work/corpus" "$out"
cp "$fuzz"/corpus/* "$work/corpus/"
[[ -n ${FUZZ_CORPUS:-} ]] && cp "$FUZZ_CORPUS"/* "$work/corpus/"
args=("${common[@]}" -max_total_time="$seconds" -artifact_prefix="$out/")
[[ -n ${FUZZ_SEED:-} ]] && args+=(-seed="$FUZZ_SEED")
[[ ${FUZZ_JOBS:-1} -gt 1 ]] && args+=(-fork="$FUZZ_JOBS" -ignore_crashes=0)
# shellcheck disable=SC2206 # FUZZ_ARGS is a list of options
args+=(${FUZZ_ARGS:-})
echo "fuzz: $seconds s, corpus copy in $work/corpus, artifacts in $out"
set +e
"$bin" "${args[@]}" "$work/corpus" 2>&1 | tee "$work/fuzz.log"
rc=${PIPESTATUS[0]}
set -e
found=$(find "$out" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'leak-*' \
	-o -name 'oom-*' \) 2>/dev/null)
if [[ $rc -ne 0 || -n $found ]]; then
	echo "fuzz: FAILED (exit $rc); log: $work/fuzz.log" >&2
	for f in $found; do
		echo "fuzz: reproducer: $f" >&2
		echo "fuzz:   rerun: $root/$bin $f" >&2
	done
	exit 1
fi
echo "fuzz: no crash in $seconds s: $(grep -E '^#[0-9]+[[:space:]]+DONE' "$work/fuzz.log" | tail -1)"
rm -rf "$work"
