"""A transactional consume-transform-produce loop (confluent-kafka) in its own process, so a test
can SIGKILL it at any point and start it again.

Reads --input in group --group with isolation.level=read_committed and no auto commit; for each
poll batch it begins a transaction, produces every record transformed ("in-" -> "out-" in the
value) to the same partition of --output, adds the consumer's positions to the transaction with
send_offsets_to_transaction and commits. With --pause-ms it sleeps inside each transaction before
committing, so a kill often lands while a transaction is open.

The transactional.id is fixed (--txn-id): a restarted loop's init_transactions fences the killed
one and aborts its open transaction. The group member is static (--instance-id), so a restarted
loop takes the killed one's place at once instead of waiting for its session to expire.

Prints one JSON line per event on stdout: {"ready": true} once init_transactions returned,
{"assigned": [...]} per assignment, {"committed": N, "offsets": {"P": OFFSET, ...}} after each
committed transaction of N records, {"aborted": "reason"} after an abortable error (the consumer
is rewound to the committed offsets). A fatal error is printed as {"fatal": "..."} and exits 3.
"""

import argparse
import json
import signal
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer


def emit(event):
    print(json.dumps(event), flush=True)


def transform(value: bytes) -> bytes:
    return b"out-" + value[len(b"in-"):] if value.startswith(b"in-") else b"out-?" + value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--txn-id", required=True)
    ap.add_argument("--instance-id", default="ctp-0")
    ap.add_argument("--txn-timeout-ms", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=50, help="most records per transaction")
    ap.add_argument("--pause-ms", type=int, default=0, help="sleep inside each transaction")
    args = ap.parse_args()

    def stop(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)

    try:
        return run(args)
    except KeyboardInterrupt:
        return 0
    except KafkaException as e:
        emit({"fatal": str(e.args[0])})
        return 3


def retrying(fn, *a):
    """Calls a transactional API again after a retriable error, as librdkafka documents."""
    for attempt in range(10):
        try:
            return fn(*a)
        except KafkaException as e:
            if not e.args[0].retriable() or attempt == 9:
                raise
            time.sleep(0.2)


def run(args):
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "transactional.id": args.txn_id,
        "transaction.timeout.ms": args.txn_timeout_ms,
        "linger.ms": 5,
    })
    retrying(producer.init_transactions, 30)
    emit({"ready": True})

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "group.instance.id": args.instance_id,
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    })

    def on_assign(c, partitions):
        emit({"assigned": sorted(p.partition for p in partitions)})

    consumer.subscribe([args.input], on_assign=on_assign)

    def rewind():
        """After an abort: go back to the committed offsets of everything assigned."""
        assignment = consumer.assignment()
        if not assignment:
            return
        for tp in consumer.committed(assignment, timeout=30):
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
            consumer.seek(tp)

    try:
        while True:
            msgs = consumer.consume(num_messages=args.batch, timeout=0.5)
            msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                continue
            try:
                producer.begin_transaction()
                touched = set()
                for m in msgs:
                    producer.produce(args.output, key=m.key(), value=transform(m.value()), partition=m.partition())
                    touched.add(m.partition())
                    producer.poll(0)
                if args.pause_ms:
                    time.sleep(args.pause_ms / 1000)
                positions = [tp for tp in consumer.position([tp for tp in consumer.assignment()
                                                             if tp.partition in touched]) if tp.offset >= 0]
                retrying(producer.send_offsets_to_transaction, positions, consumer.consumer_group_metadata(), 30)
                retrying(producer.commit_transaction, 30)
                emit({"committed": len(msgs), "offsets": {str(tp.partition): tp.offset for tp in positions}})
            except KafkaException as e:
                err = e.args[0]
                if err.fatal() or not err.txn_requires_abort():
                    raise
                retrying(producer.abort_transaction, 30)
                rewind()
                emit({"aborted": str(err)})
    finally:
        # Only reached on SIGTERM or an error: leave the group cleanly.
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
