#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# examples/graceful.c: echo works, then SIGTERM with clients connected (one
# idle, one mid-conversation) shuts the server down cleanly: exit 0 within
# 10 s, every connection cancelled, no coroutine left, the clients see EOF.
set -euo pipefail
server=$1
# shellcheck source=test/server_lib.sh
. "$(dirname "$0")/server_lib.sh"
out=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- server stderr:"; cat "$out/err"; exit 1; }

start_server "$out" env WEFT_WORKERS=2 "$server" 0

exec 3<>"/dev/tcp/127.0.0.1/$port"	# idle client
exec 4<>"/dev/tcp/127.0.0.1/$port"	# talking client
read -r -t 5 greeting <&4 || fail "no greeting"
[[ $greeting == "hello from "* ]] || fail "greeting: $greeting"
echo ping >&4
read -r -t 5 reply <&4 || fail "no echo"
[[ $reply == ping ]] || fail "echo: $reply"

kill -TERM "$pid"
for _ in $(seq 100); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "still running 10 s after SIGTERM"
status=0
wait "$pid" || status=$?
[[ $status -eq 0 ]] || fail "exit status $status"
grep -q 'signal 15: shutting down' "$out/err" || fail "no shutdown message"
grep -q 'shut down: 0 coroutines left besides main' "$out/err" || fail "coroutines left behind"
# both clients were disconnected by the server (EOF after the greeting)
read -r -t 5 greeting <&3 || fail "idle client: no greeting"
if read -r -t 5 line <&3; then fail "idle client still connected: $line"; fi
if read -r -t 5 line <&4; then fail "talking client still connected: $line"; fi
echo "graceful shutdown ok"
