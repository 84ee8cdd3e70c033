#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A real Prometheus scrapes weft-http's GET /metrics (weft_stats_prometheus)
# every second while the test loads the server; then the 0.99 quantile that
# Prometheus computes from the scraped buckets (histogram_quantile through
# its HTTP API) must lie in the bucket that holds the runtime's own p99 (the
# bucket error, 12.5%), read from the runtime just before and just after
# that scrape.  Every runnable period is timed (WEFT_SCHED_SAMPLE=1)
# so that both read the same counts.
#
#   test/prometheus.sh WEFT_HTTP
#
# Skips (exit 77, a SKIP line with the reason) without Debian's prometheus;
# scripts/run test installs it, and CI's check-skips fails on the skip.
set -euo pipefail
http=$1

skip() {
	echo "SKIP: $*"
	exit 77
}
command -v prometheus >/dev/null || skip "prometheus is not installed (Debian's prometheus; scripts/run test installs it)"
command -v curl >/dev/null || skip "curl is not installed"

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# a state, polled: no sleep stands for it
wait_for() { # TRIES COMMAND...
	local n=$1
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	echo "FAIL: timed out waiting for: $*" >&2
	return 1
}

WEFT_SCHED_SAMPLE=1 WEFT_WORKERS=2 "$http" 0 >"$tmp/http.out" 2>&1 &
pids+=($!)
wait_for 300 grep -q "listening on" "$tmp/http.out"
port=$(awk '/listening on/ { print $3 }' "$tmp/http.out")

prom_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: weft
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
	--web.listen-address="127.0.0.1:$prom_port" >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
api="http://127.0.0.1:$prom_port/api/v1/query"
wait_for 600 curl -sf "http://127.0.0.1:$prom_port/-/ready" -o /dev/null

# load: 200 connections, 8 at a time, of 10 requests each (every read a
# park and a wake)
urls=$(printf "http://127.0.0.1:$port/ %.0s" {1..10})
seq 200 | xargs -P 8 -I{} sh -c "curl -s $urls >/dev/null"

# The runtime's own p99 bucket and count, from its page: the p99 lies in
# (bound / 1.125, bound], or below the first bucket (1.024 us) from 0.
ours() { # prints: LOW HIGH COUNT
	curl -sf "http://127.0.0.1:$port/metrics" -o "$tmp/metrics.txt"
	python3 - "$tmp/metrics.txt" <<'EOF'
import sys
b = []
for line in open(sys.argv[1]):
    if line.startswith('weft_sched_delay_seconds_bucket{le="'):
        le = line.split('"')[1]
        b.append((float('inf') if le == '+Inf' else float(le), int(line.split()[-1])))
count = b[-1][1]
hi = next(le for le, c in b if c >= 0.99 * count)
print(0 if hi <= 1.024e-6 else hi / 1.125, hi, count)
EOF
}
read -r lo1 hi1 count < <(ours)
echo "runtime: p99 in ($lo1, $hi1] s over $count periods"
[[ $count -ge 2000 ]] || { echo "FAIL: too few periods timed ($count)" >&2; exit 1; }

query() {
	curl -sf "$api" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "none")'
}
scraped() { [[ $(query 'weft_sched_delay_seconds_count') != none ]] && (($(query 'weft_sched_delay_seconds_count') >= count)); }
wait_for 600 scraped
theirs=$(query 'histogram_quantile(0.99, weft_sched_delay_seconds_bucket)')
echo "prometheus: histogram_quantile(0.99) = $theirs s"
# The scrape that answered came after the first reading: the periods timed
# in between (the scrapes' own requests) can move the p99 across a bucket
# bound.  A second reading, after the scrape, brackets it: Prometheus's
# interpolation must lie inside the buckets of the two readings, a bucket
# or two (a page in the wrong unit, or buckets not cumulative, land far
# outside).
read -r lo2 hi2 _ < <(ours)
echo "runtime, after the scrape: p99 in ($lo2, $hi2] s"
python3 - "$lo1" "$hi1" "$lo2" "$hi2" "$theirs" <<'EOF'
import sys
lo1, hi1, lo2, hi2, theirs = map(float, sys.argv[1:])
lo, hi = min(lo1, lo2), max(hi1, hi2)
ok = lo * (1 - 1e-9) <= theirs <= hi * (1 + 1e-9)
print("match within the buckets" if ok else "FAIL: outside [%g, %g]" % (lo, hi))
sys.exit(0 if ok else 1)
EOF
