"""A confluent-kafka group consumer in its own process, so a test can SIGKILL it.

Prints one JSON line per event on stdout: {"assigned": [...]} (the whole current assignment)
after each assignment, {"revoked": [...]} per revocation, and
{"record": [partition, offset, value]} per record; commits synchronously after each record
when --commit is given."""

import argparse
import json
import signal
import sys

from confluent_kafka import Consumer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--instance-id")
    ap.add_argument("--strategy", default="range")
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--commit", action="store_true")
    ap.add_argument("--protocol", default="classic", help="classic, or consumer for KIP-848")
    ap.add_argument("--remote-assignor", help="KIP-848 server-side assignor (uniform or range)")
    args = ap.parse_args()
    conf = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if args.protocol == "consumer":
        # Sessions, heartbeats and assignment are the coordinator's business in KIP-848.
        conf["group.protocol"] = "consumer"
        if args.remote_assignor:
            conf["group.remote.assignor"] = args.remote_assignor
    else:
        conf.update({"session.timeout.ms": args.session_ms, "heartbeat.interval.ms": 500,
                     "partition.assignment.strategy": args.strategy})
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    c = Consumer(conf)

    def stop(*_):
        raise KeyboardInterrupt

    # SIGTERM closes the consumer cleanly (it leaves the group); SIGKILL is the crash case.
    signal.signal(signal.SIGTERM, stop)

    owned = set()

    # Eager assignors revoke everything and assign the whole set; cooperative ones hand out and
    # take back increments. Either way `owned` is the current assignment.
    def on_assign(consumer, partitions):
        owned.update(p.partition for p in partitions)
        print(json.dumps({"assigned": sorted(owned)}), flush=True)

    def on_revoke(consumer, partitions):
        gone = sorted(p.partition for p in partitions)
        owned.difference_update(gone)
        print(json.dumps({"revoked": gone}), flush=True)

    c.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while True:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            print(json.dumps({"record": [m.partition(), m.offset(), m.value().decode()]}), flush=True)
            if args.commit:
                c.commit(message=m, asynchronous=False)
    except KeyboardInterrupt:
        pass
    finally:
        c.close()


if __name__ == "__main__":
    sys.exit(main())
