#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sourced by the example servers' test scripts (graceful.sh, tls.sh), which
# define fail().  start_server DIR COMMAND...: runs COMMAND in the background
# (stdout DIR/out, stderr DIR/err), sets pid, waits up to 10 s for its
# "listening on PORT" line and sets port.
# shellcheck disable=SC2034 # pid and port are the caller's
start_server() {
	local dir=$1
	shift
	"$@" >"$dir/out" 2>"$dir/err" &
	pid=$!
	for _ in $(seq 100); do
		grep -q '^listening on' "$dir/out" 2>/dev/null && break
		sleep 0.1
	done
	port=$(sed -n 's/^listening on //p' "$dir/out")
	[[ -n $port ]] || fail "the server did not start"
}
