#!/usr/bin/env bash
# Fuzzes Floe's input decoders with cargo fuzz (libFuzzer) on the nightly toolchain, and runs
# the cost fuzzer (property tests of the work budgets) long.
#
#   bash scripts/fuzz.sh                 # the cost properties, 20,000 cases each, then every target, 120 s each
#   FUZZ_SECONDS=600 bash scripts/fuzz.sh kafka_request record_batch
#   FLOE_FUZZ_CASES=100000 bash scripts/fuzz.sh cost
#
# Targets (bodies in fuzz/targets.rs): kafka_request, record_batch, segment_footer,
# metadata_command, http_records, avro_datum, schema_text, registry_body. Each run starts from fuzz/regressions/TARGET (kept in git:
# seeds and every crash found, replayed by `cargo test --test fuzz_regressions` in .ci/run) and
# a local corpus (fuzz/corpus, not kept). A crash leaves its input in fuzz/artifacts/TARGET/:
# fix it, then copy the input into fuzz/regressions/TARGET/. The last line per target gives its
# executions, for docs/RELIABILITY.md.
#
# `cost` is the cost fuzzer: the `cost` property tests of floe-registry and floe-tables
# (hostile schemas and records, issue 52's shared-type DAGs among them, held to the work budgets
# of registry/src/limits.rs and the table field cap). `cargo test` runs them with a few cases
# each; here FLOE_FUZZ_CASES (20,000 by default) each, on the stable toolchain. A failing case is
# printed shrunk, and proptest keeps it under proptest-regressions/ beside the test to replay.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_EACH="${FUZZ_SECONDS:-120}"
TARGETS=("$@")
[[ ${#TARGETS[@]} -eq 0 ]] && TARGETS=(cost kafka_request record_batch segment_footer metadata_command http_records avro_datum schema_text registry_body)

if [[ " ${TARGETS[*]} " == *" cost "* ]]; then
  cases="${FLOE_FUZZ_CASES:-20000}"
  echo "==> cost properties, $cases cases each"
  (cd "$ROOT" && FLOE_FUZZ_CASES="$cases" cargo test --release -p floe-registry -p floe-tables --lib -- ::cost::)
  echo "cost: $cases cases per property, within their bounds"
fi

FUZZ_TARGETS=()
for target in "${TARGETS[@]}"; do
  [[ "$target" != cost ]] && FUZZ_TARGETS+=("$target")
done
[[ ${#FUZZ_TARGETS[@]} -eq 0 ]] && exit 0

export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-/var/tmp/floe-fuzz-target}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi
cd "$ROOT/fuzz"
for target in "${FUZZ_TARGETS[@]}"; do
  mkdir -p "corpus/$target" "regressions/$target"
  echo "==> $target for ${SECONDS_EACH}s"
  log="$(mktemp)"
  # -O: built as floe is released (no debug assertions; protox-parse 0.9 has one that a
  # malformed octal literal trips, harmless in release), with overflow checks kept.
  RUSTFLAGS="${RUSTFLAGS:-} -Coverflow-checks=on" \
  cargo +nightly fuzz run -O "$target" "corpus/$target" "regressions/$target" -- \
    -max_total_time="$SECONDS_EACH" -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 2>&1 | tee "$log" | grep -E "^#[0-9]+.*(pulse|DONE)|ERROR|panicked" || true
  execs="$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')"
  if grep -q "SUMMARY: libFuzzer\|panicked at\|ERROR: AddressSanitizer" "$log"; then
    echo "$target: CRASH after ${execs:-?} executions; input in fuzz/artifacts/$target/"
    exit 1
  fi
  echo "$target: ${execs:-?} executions, no crash"
done
