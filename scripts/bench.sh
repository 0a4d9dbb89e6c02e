#!/usr/bin/env bash
# The regression benchmarks: what a change to the produce, fetch or metadata path is measured
# against before it lands. Not part of .ci/run: timings are not tests, and these machines are
# noisy, so each benchmark compares ratios within one run (2,000 partitions against 8 on the same
# machine at the same time) and prints them beside the recorded baseline.
#
#   bash scripts/bench.sh                 # both partition runs, then the metadata state at scale
#   bash scripts/bench.sh partitions      # 8 and 2,000 partitions, 60 s each (about 3 minutes)
#   bash scripts/bench.sh per-broker      # 8 and 10,000 partitions with Java-shaped clients
#   bash scripts/bench.sh state           # the metadata state of 100,000 partitions
#   bash scripts/bench.sh partitions --record   # make this run the baseline (commit the file;
#                                               # per-broker --record likewise)
#
# Release builds in $CARGO_TARGET_DIR (default /var/tmp/floe-target); results under
# /var/tmp/floe-bench; method and recorded figures in docs/BENCHMARKS.md.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/floe-target}"
BASELINES="$ROOT/loadtest/baselines"

what="${1:-all}"
record=false
[[ "${2:-}" == "--record" ]] && record=true

partitions() {
  echo "==> release build (floe, floe-loadtest)"
  cargo build --release -p floe -p floe-loadtest
  echo "==> 8 and 2,000 partitions, 20,000 records/s of 200 B, 60 s each after a 10 s warm-up"
  local extra=(--baseline "$BASELINES/partitions-8-2000.json")
  if $record; then
    extra=(--record-baseline "$BASELINES/partitions-8-2000.json")
  fi
  python3 loadtest/scripts/bench_partitions.py --partitions 8,2000 --runs 1 --duration 60 \
    --out /var/tmp/floe-bench/regression-partitions "${extra[@]}"
}

# librdkafka sends a request per partition batch and names every partition in every fetch, so at
# 10,000 partitions its own CPU on these cores decides the figures; the per-broker clients send
# as the Java client does (a request per broker, incremental fetch sessions).
per_broker() {
  echo "==> release build (floe, floe-loadtest)"
  cargo build --release -p floe -p floe-loadtest
  echo "==> 8 and 10,000 partitions, per-broker clients, 20,000 records/s of 200 B, 60 s each"
  local baseline="$BASELINES/partitions-8-10000-per-broker.json"
  local extra=(--baseline "$baseline")
  if $record; then
    extra=(--record-baseline "$baseline")
  fi
  python3 loadtest/scripts/bench_partitions.py --partitions 8,10000 --runs 1 --duration 60 \
    --loadtest-arg=--producer-kind=per-broker --loadtest-arg=--consumer-kind=per-broker \
    --out /var/tmp/floe-bench/regression-per-broker "${extra[@]}"
}

state() {
  echo "==> the metadata state of 100,000 partitions (memory, snapshot, clone, encode, decode)"
  cargo bench -p floe-metadata --bench state_scale -- 100000
}

case "$what" in
  partitions) partitions ;;
  per-broker) per_broker ;;
  state) state ;;
  all) partitions; per_broker; state ;;
  *) echo "usage: $0 [partitions|per-broker|state|all] [--record]" >&2; exit 2 ;;
esac
