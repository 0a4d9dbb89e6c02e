#!/usr/bin/env bash
# Builds librdkafka's own benchmark client, rdkafka_performance, from the librdkafka sources and
# static library that the rdkafka-sys crate built for floe-loadtest (so it is the same librdkafka
# version, and needs no system package). Prints the binary's path.
#
#   cargo build --release -p floe-loadtest
#   loadtest/scripts/build-rdkafka-performance.sh [OUT]      (default: $CARGO_TARGET_DIR/rdkafka_performance)
set -euo pipefail
target=${CARGO_TARGET_DIR:-/var/tmp/floe-target}
out=${1:-$target/rdkafka_performance}
src=$(find "$target"/{release,debug}/build -maxdepth 4 -path '*rdkafka-sys-*/out/src/librdkafka.a' 2>/dev/null | head -1)
[[ -n $src ]] || { echo "no librdkafka.a under $target: build floe-loadtest first" >&2; exit 1; }
root=$(dirname "$(dirname "$src")")
if [[ -x $out && $out -nt $src ]]; then echo "$out"; exit 0; fi
# zstd: the system's shared library when there is no static one (librdkafka was built against it).
zstd=$( (ls /usr/lib/*/libzstd.a /usr/lib/*/libzstd.so /usr/lib/*/libzstd.so.1 2>/dev/null || true) | head -1)
cc -O2 -I"$root/src" -I"$root" -o "$out" "$root/examples/rdkafka_performance.c" "$src" \
  ${zstd:+"$zstd"} -lm -lssl -lcrypto -lz -ldl -lpthread -lrt
echo "$out"
