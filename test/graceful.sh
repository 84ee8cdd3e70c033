#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# examples/graceful.c: echo works, then SIGTERM with clients connected (one
# idle, one mid-conversation) shuts the server down cleanly: exit 0 within
# 10 s, the clients see EOF, every connection returned, no coroutine left.
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
# Both clients are disconnected by the shutdown: EOF (read's status 1), not
# a timeout (status > 128), which a connection the shutdown never reached
# would give.  Checked before the exit is waited for, while a server stuck
# in its shutdown still holds them open.  (A client cannot tell a close by
# the server from one by its exit: "0 coroutines left" below says that
# every connection returned, closing its fd on the way out.)
eof() { # FD WHO: the next read on FD (within 5 s) finds EOF
	local line status=0
	read -r -t 5 line <&"$1" || status=$?
	((status == 0)) && fail "$2 still connected: $line"
	((status == 1)) || fail "$2: no EOF within 5 s of SIGTERM (read status $status)"
	return 0
}
read -r -t 5 greeting <&3 || fail "idle client: no greeting"
eof 3 "idle client"
eof 4 "talking client"
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
echo "graceful shutdown ok"
