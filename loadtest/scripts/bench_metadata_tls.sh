#!/usr/bin/env bash
# Metadata commits/s with and without mutual TLS on the metadata port (docs/BENCHMARKS.md).
# Three release metadata nodes on loopback and `floe-loadtest commits` as the agent, in
# alternating runs (plaintext, TLS, plaintext, ...) so both see the same machine noise.
#
#   bash loadtest/scripts/bench_metadata_tls.sh [RUNS] [CONCURRENCY] [SECONDS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release"
RUNS="${1:-3}" CONCURRENCY="${2:-32}" SECONDS_EACH="${3:-8}"
WORK="$(mktemp -d /var/tmp/bench-mtls.XXXXXX)"
trap 'pkill -f "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
bash "$ROOT/scripts/metadata-certs.sh" "$WORK/certs" bench \
  --peer 1=127.0.0.1 --peer 2=127.0.0.1 --peer 3=127.0.0.1 --agent 1 >/dev/null 2>&1
PEERS="1=127.0.0.1:19191,2=127.0.0.1:19192,3=127.0.0.1:19193"
ADDRS="127.0.0.1:19191,127.0.0.1:19192,127.0.0.1:19193"

run() { # $1: plain|tls, $2: run number
  local mode=$1 dir="$WORK/$1-$2" tls=() client=()
  mkdir -p "$dir"
  for n in 1 2 3; do
    if [[ $mode == tls ]]; then
      tls=(--metadata-tls-cert "$WORK/certs/peer-$n.pem" --metadata-tls-key "$WORK/certs/peer-$n-key.pem"
        --metadata-tls-ca "$WORK/certs/ca.pem")
    fi
    "$BIN/floe" metadata --node-id "$n" --metadata-addr "127.0.0.1:1919$n" --data-dir "$dir/m$n" \
      --peers "$PEERS" "${tls[@]}" >"$dir/m$n.log" 2>&1 &
  done
  if [[ $mode == tls ]]; then
    client=(--metadata-tls "$WORK/certs/agent-1.pem" "$WORK/certs/agent-1-key.pem" "$WORK/certs/ca.pem")
  fi
  sleep 3
  local report
  report="$("$BIN/floe-loadtest" commits --metadata "$ADDRS" --concurrency "$CONCURRENCY" \
    --duration-secs "$SECONDS_EACH" "${client[@]}" 2>"$dir/loadtest.log" || true)"
  python3 - "$mode" "$report" <<'PY'
import json, sys
r = json.loads(sys.argv[2])
lat = r["latency_ms"]
print(f"{sys.argv[1]:>5}: {r['commits_per_second']:8.0f} commits/s  p50 {lat['p50']:.1f} ms  "
      f"p99 {lat['p99']:.1f} ms  errors {r['errors']}")
PY
  pkill -f "$dir" || true
  sleep 1
}

for i in $(seq 1 "$RUNS"); do
  run plain "$i"
  run tls "$i"
done
