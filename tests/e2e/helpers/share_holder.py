"""A share consumer that takes records and never acknowledges them: it prints each offset it
received as a JSON line, then waits to be killed (tests/e2e/test_share_groups.py)."""

import argparse
import json
import sys
import time

from confluent_kafka import ShareConsumer

parser = argparse.ArgumentParser()
parser.add_argument("--bootstrap", required=True)
parser.add_argument("--group", required=True)
parser.add_argument("--topic", required=True)
args = parser.parse_args()

consumer = ShareConsumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([args.topic])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    messages = [m for m in consumer.poll(1.0) or [] if not m.error()]
    if messages:
        print(json.dumps({"offsets": [m.offset() for m in messages]}), flush=True)
        break
time.sleep(600)
sys.exit(0)
