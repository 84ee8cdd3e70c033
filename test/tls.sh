#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# examples/tls.c (weft-tls) over TLS: a self-signed certificate made by
# `weft-tls cert`; 100 concurrent clients (coroutines of one weft-tls client)
# verify it, send 16 requests each (sequential, a 40,000-byte body, pipelined)
# and check every byte of the answers and the server's close_notify; a client
# that connects and never speaks is closed at the server's handshake deadline
# while the others are served, and after it the server still serves; the
# handshake timeouts are the only errors the server reports.
#   test/tls.sh WEFT_TLS [HANDSHAKE_MS]    (default 2000)
set -euo pipefail
tls=$1
handshake_ms=${2:-2000}
# shellcheck source=test/server_lib.sh
. "$(dirname "$0")/server_lib.sh"
out=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- server stderr:"; cat "$out/err"; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

"$tls" cert "$out/cert.pem" "$out/key.pem" || fail "weft-tls cert"
touch "$out/err"
start_server "$out" env WEFT_WORKERS=2 "$tls" server 0 "$out/cert.pem" "$out/key.pem" \
	"$handshake_ms"

# Reads fd until EOF: fails if data comes, or nothing within 10 s.
expect_eof() {
	local rc=0 line
	read -r -t 10 line <&"$1" || rc=$?
	[[ $rc -eq 0 ]] && fail "the silent client got data: $line"
	[[ $rc -gt 128 ]] && fail "the silent client is still connected after 10 s"
	return 0
}

exec 3<>"/dev/tcp/127.0.0.1/$port"	# connects, never speaks
WEFT_WORKERS=2 "$tls" client localhost "$port" 100 "$out/cert.pem" || fail "100 clients"
expect_eof 3
exec 3<&-

# alone now: closed at the deadline, not before and not much after
start=$(now_ms)
exec 3<>"/dev/tcp/127.0.0.1/$port"
expect_eof 3
elapsed=$(($(now_ms) - start))
((elapsed >= handshake_ms - 100)) || fail "closed after $elapsed ms, before its deadline"
((elapsed < handshake_ms + 5000)) || fail "closed after $elapsed ms"
echo "silent client closed after $elapsed ms (handshake deadline $handshake_ms ms)"

WEFT_WORKERS=2 "$tls" client 127.0.0.1 "$port" 1 "$out/cert.pem" || fail "a client after the timeouts"
# a client that verifies against another certificate fails, and says why
"$tls" cert "$out/other.pem" "$out/other-key.pem" || fail "weft-tls cert"
if "$tls" client localhost "$port" 1 "$out/other.pem" 2>"$out/cerr"; then
	fail "a certificate signed by an unknown key was accepted"
fi
grep -q 'certificate verify failed' "$out/cerr" || { cat "$out/cerr"; fail "no verification error"; }
cat "$out/cerr"

kill "$pid"
wait "$pid" 2>/dev/null || true
pid=
# stall reports are no errors (a loaded machine preempts a worker mid-handshake),
# nor are the drain's two lines
grep -v -e '^weft: stall:' -e '^signal 15: draining$' -e '^drained: ' "$out/err" >"$out/errors" || true
timeouts=$(grep -c 'handshake: Connection timed out' "$out/errors" || true)
[[ $timeouts -eq 2 ]] || fail "$timeouts handshake timeouts reported, not 2"
# the client that failed verification sent the only other line's alert
grep -q 'handshake: .*alert unknown ca' "$out/errors" || fail "no unknown-CA alert reported"
[[ $(wc -l <"$out/errors") -eq 3 ]] || fail "unexpected server errors"
echo "tls ok"
