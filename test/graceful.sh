#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# examples/graceful.c: lines are answered, then SIGTERM with three clients
# connected drains the server: the idle one sees end of file, the one
# whose "sleep 700" is in flight gets "slept 700" and then end of file, and
# the server exits 0 with nothing cancelled at its deadline (its exit
# status says that weft_shutdown_until found no coroutine left).
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
exec 5<>"/dev/tcp/127.0.0.1/$port"	# a request in flight at the signal
for fd in 3 4 5; do
	read -r -t 10 greeting <&$fd || fail "no greeting"
	[[ $greeting == "hello from "* ]] || fail "greeting: $greeting"
done
echo ping >&4
read -r -t 10 reply <&4 || fail "no answer"
[[ $reply == ping ]] || fail "answer: $reply"
# Both lines in one write: once "ping" is answered the server has read the
# sleep too, and is in it when the signal comes.
printf 'ping\nsleep 700\n' >&5
read -r -t 10 reply <&5 || fail "no answer"
[[ $reply == ping ]] || fail "answer: $reply"

kill -TERM "$pid"
# Read before the exit is waited for, while a server stuck in its drain
# still holds the connections open.  End of file is read's status 1; a
# timeout (status > 128) would be a connection the drain never reached.
eof() { # FD WHO: the next read on FD (within 10 s) finds end of file
	local line status=0
	read -r -t 10 line <&"$1" || status=$?
	((status == 0)) && fail "$2 still connected: $line"
	((status == 1)) || fail "$2: no end of file within 10 s of SIGTERM (read status $status)"
	eval "exec $1<&-" # closed: the server's drain_close need not wait for it
}
eof 3 "idle client"
read -r -t 10 reply <&5 || fail "the request in flight was not answered"
[[ $reply == "slept 700" ]] || fail "answer in flight: $reply"
eof 5 "client in flight"
eof 4 "talking client"
for _ in $(seq 200); do	# a watchdog only
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "still running 20 s after SIGTERM"
status=0
wait "$pid" || status=$?
[[ $status -eq 0 ]] || fail "exit status $status"
grep -q '^signal 15: draining$' "$out/err" || fail "no drain message"
grep -q '^drained: 0 connections cancelled at the deadline$' "$out/err" ||
	fail "connections cancelled at the deadline"
echo "graceful shutdown ok"
