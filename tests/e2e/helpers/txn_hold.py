"""A transactional producer (confluent-kafka) that opens a transaction, writes into it and then
never ends it: it sleeps until it is killed. A test SIGKILLs it to leave a transaction open with
no producer behind it.

Prints one JSON line per event on stdout: {"ready": true} once init_transactions returned, then
{"produced": [[partition, offset, value], ...]} once every record of the open transaction was
acknowledged. Errors are printed as {"error": "..."} and exit 3.
"""

import argparse
import json
import sys
import time

from confluent_kafka import KafkaException, Producer


def emit(event):
    print(json.dumps(event), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--txn-id", required=True)
    ap.add_argument("--txn-timeout-ms", type=int, required=True)
    ap.add_argument("--partitions", default="0", help="comma-separated partitions to write to")
    ap.add_argument("--count", type=int, default=5, help="records per partition")
    ap.add_argument("--prefix", default="open")
    args = ap.parse_args()

    p = Producer({
        "bootstrap.servers": args.bootstrap,
        "transactional.id": args.txn_id,
        "transaction.timeout.ms": args.txn_timeout_ms,
        "linger.ms": 5,
    })
    produced, errors = [], []

    def cb(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            produced.append([msg.partition(), msg.offset(), msg.value().decode()])

    try:
        p.init_transactions(30)
        emit({"ready": True})
        p.begin_transaction()
        for partition in (int(x) for x in args.partitions.split(",")):
            for i in range(args.count):
                p.produce(args.topic, value=f"{args.prefix}-{partition}-{i}".encode(), partition=partition,
                          on_delivery=cb)
        remaining = p.flush(30)
    except KafkaException as e:
        emit({"error": str(e.args[0])})
        return 3
    if remaining or errors:
        emit({"error": f"{remaining} undelivered, delivery errors {errors[:3]}"})
        return 3
    emit({"produced": sorted(produced)})
    while True:  # the transaction stays open until the process is killed
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
