#!/usr/bin/env bash
# Starts a local Floe cluster: 3 metadata nodes and 2 agents, each its own process, on
# 127.0.0.1 (metadata 19091-19093, Kafka 19092 and 19192, HTTP 18080 and 18180), with objects in
# DIR/objects. Stops everything on Ctrl-C.
#
#   bash scripts/local-cluster.sh [DIR]        # DIR defaults to ./floe-cluster
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DIR="${1:-./floe-cluster}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
FLOE="${FLOE_BIN:-${CARGO_TARGET_DIR:-target}/release/floe}"
if [[ ! -x "$FLOE" ]]; then
  echo "building floe (release)"
  cargo build --release --bin floe
fi
PEERS="1=127.0.0.1:19091,2=127.0.0.1:19093,3=127.0.0.1:19095"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
i=0
for addr in 127.0.0.1:19091 127.0.0.1:19093 127.0.0.1:19095; do
  i=$((i + 1))
  "$FLOE" metadata --node-id "$i" --metadata-addr "$addr" --data-dir "$DIR/metadata-$i" --peers "$PEERS" \
    2>"$DIR/metadata-$i.log" &
  pids+=($!)
done
METADATA=127.0.0.1:19091,127.0.0.1:19093,127.0.0.1:19095
"$FLOE" agent --metadata "$METADATA" --node-id 1 --zone a --kafka-addr 127.0.0.1:19092 --http-addr 127.0.0.1:18080 \
  --object-store "file://$DIR/objects" 2>"$DIR/agent-1.log" &
pids+=($!)
"$FLOE" agent --metadata "$METADATA" --node-id 2 --zone b --kafka-addr 127.0.0.1:19192 --http-addr 127.0.0.1:18180 \
  --object-store "file://$DIR/objects" 2>"$DIR/agent-2.log" &
pids+=($!)
sleep 3
"$FLOE" admin cluster --metadata 127.0.0.1:19091
echo "Kafka: 127.0.0.1:19092 and 127.0.0.1:19192; logs in $DIR. Ctrl-C stops the cluster."
wait
