#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# weft-http's drain (examples/drain.c): keep-alive clients of four kinds
# (test/drain_client.c: idle, racing the SIGTERM, busy through it, holding
# half a request) and the SIGTERM in their midst.  Every answer is whole
# and right, every connection ends with an end of file (never a reset),
# the request held in flight is answered; the server exits 0, cancelled
# nothing at its deadline, cut off no request, and answered exactly as
# many requests as the clients received.
#   test/drain.sh WEFT_HTTP DRAIN_CLIENT
set -euo pipefail
server=$1
client=$2
# shellcheck source=test/server_lib.sh
. "$(dirname "$0")/server_lib.sh"
out=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- server stderr:"; cat "$out/err"; exit 1; }

# The deadline is generous: the test judges that nothing was left for it.
start_server "$out" env WEFT_WORKERS=2 DRAIN_MS=60000 "$server" 0
WEFT_WORKERS=2 "$client" "$port" "$pid" >"$out/client" || { cat "$out/client"; fail "clients"; }
cat "$out/client"
# a watchdog only: a server that hangs in its drain fails here
for _ in $(seq 900); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "still running 90 s after SIGTERM"
status=0
wait "$pid" || status=$?
pid=
[[ $status -eq 0 ]] || fail "exit status $status"
cat "$out/err"
grep -q '^signal 15: draining$' "$out/err" || fail "no drain"
grep -q '^drained: 0 connections cancelled at the deadline$' "$out/err" ||
	fail "connections left at the deadline"
served=$(sed -n 's/^weft-http: answered \([0-9]*\) requests; 0 connections cut off.*/\1/p' "$out/err")
[[ -n $served ]] || fail "requests cut off, or no count"
received=$(sed -n 's/^clients: answered \([0-9]*\) requests.*/\1/p' "$out/client")
[[ $served == "$received" ]] || fail "the server answered $served requests, the clients received $received"
echo "drain ok"
