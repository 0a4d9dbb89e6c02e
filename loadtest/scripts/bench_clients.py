#!/usr/bin/env python3
"""Client-side scale (issue 53): what Kafka clients ask of a cluster with many partitions,
timed against a release `floe dev` with real clients (confluent-kafka, that is librdkafka, and
kafka-python for Metadata).

1. CreateTopics: `--topics` topics of `--per-topic` partitions (default 10 x 10,000 = 100,000).
2. Metadata for every topic, `--repeats` times each client; partitions seen must be all.
3. One record produced to every partition of the first topic, then ListOffsets (latest) for all
   of its partitions.
4. A consumer group of `--members` consumers subscribed to the first topic: the time until every
   partition is assigned (join), each member's commit of its partitions (all at once), OffsetFetch
   of every partition (AdminClient and a consumer's `committed`), one member leaving (until the
   others hold every partition again) and a new one joining (until all hold every partition).

Progress on stderr, a JSON summary on stdout; the agent's resident memory and CPU at the end.

    cargo build --release -p floe
    python3 loadtest/scripts/bench_clients.py [--topics 10 --per-topic 10000 --members 100]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_million import log, rss_mib, wait  # noqa: E402
from bench_produce import TARGET, cpu_seconds, free_port, wait_for_port  # noqa: E402

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402


def timed(what, fn):
    started = time.time()
    result = fn()
    took = time.time() - started
    log(f"{what}: {took:.2f} s")
    return took, result


def median_time(what, repeats, fn, check):
    """The median time of `repeats` calls of `fn`; `check` asserts on each call's result."""
    times = []
    for i in range(repeats):
        took, result = timed(f"{what} {i + 1}", fn)
        check(result)
        times.append(took)
    return statistics.median(times)


class Member:
    """One consumer of the group, polling on its own thread; records its assignment's size."""

    def __init__(self, bootstrap, group, topic, name):
        self.name = name
        self.assigned = 0
        self.partitions = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        # A commit asked of this member: done on its own polling thread, as an application would
        # (a synchronous commit from another thread while this one polls never returned here).
        self.commit_asked = threading.Event()
        self.committed = threading.Event()
        self.commit_error = None
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 30000, "max.poll.interval.ms": 300000,
        })
        self.consumer.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def on_assign(self, consumer, partitions):
        with self.lock:
            self.partitions = list(partitions)
            self.assigned = len(partitions)

    def on_revoke(self, consumer, partitions):
        with self.lock:
            self.partitions = []
            self.assigned = 0

    def run(self):
        while not self.stop.is_set():
            self.consumer.poll(0.1)
            if self.commit_asked.is_set():
                self.commit_asked.clear()
                with self.lock:
                    offsets = [TopicPartition(tp.topic, tp.partition, 1) for tp in self.partitions]
                try:
                    self.consumer.commit(offsets=offsets, asynchronous=False)
                except Exception as e:  # noqa: BLE001 (reported by the caller)
                    self.commit_error = str(e)
                self.committed.set()
        self.consumer.close()

    def leave(self):
        self.stop.set()
        self.thread.join(60)


def assigned(members):
    return sum(m.assigned for m in members), sum(1 for m in members if m.assigned > 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--per-topic", type=int, default=10_000)
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    total = args.topics * args.per_topic

    data = "/var/tmp/floe-bench/clients"
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    kafka, http, meta = free_port(), free_port(), free_port()
    bootstrap = f"127.0.0.1:{kafka}"
    floe = subprocess.Popen(
        [f"{TARGET}/release/floe", "dev", "--data-dir", data, "--kafka-addr", bootstrap,
         "--http-addr", f"127.0.0.1:{http}", "--metadata-addr", f"127.0.0.1:{meta}"],
        stderr=open(f"{data}.log", "w"))
    out = {"topics": args.topics, "per_topic": args.per_topic, "partitions": total, "members": args.members,
           "cores": os.cpu_count()}
    members = []
    try:
        wait_for_port(kafka, 30)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = [f"wide-{i}" for i in range(args.topics)]
        topic = names[0]

        def create():
            futures = admin.create_topics([NewTopic(n, args.per_topic) for n in names], request_timeout=300)
            for f in futures.values():
                f.result(300)
        out["create_topics_s"], _ = timed(f"CreateTopics: {args.topics} x {args.per_topic} partitions", create)

        # Metadata for every topic: librdkafka, then kafka-python (a second, independent client).
        def rdkafka_metadata():
            md = admin.list_topics(timeout=120)
            return sum(len(t.partitions) for n, t in md.topics.items() if n in names)
        def all_named(seen):
            assert seen == total, f"Metadata named {seen} partitions of {total}"
        out["metadata_rdkafka_s"] = median_time("Metadata (confluent-kafka)", args.repeats, rdkafka_metadata, all_named)
        try:
            from kafka import KafkaConsumer

            def python_metadata():
                c = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=120000)
                try:
                    c.topics()
                    return sum(len(c.partitions_for_topic(n) or ()) for n in names)
                finally:
                    c.close()
            out["metadata_kafka_python_s"] = median_time("Metadata (kafka-python)", args.repeats, python_metadata,
                                                         all_named)
        except ImportError:
            log("kafka-python is not installed: its Metadata is skipped")

        # One record in every partition of the group's topic, then ListOffsets for all of them.
        def produce_all():
            p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "queue.buffering.max.messages": 200000})
            errors = []
            for partition in range(args.per_topic):
                p.produce(topic, value=b"x", partition=partition,
                          on_delivery=lambda err, msg: err is not None and errors.append(err))
            p.flush(120)
            assert not errors, errors[:3]
        out["produce_one_each_s"], _ = timed(f"one record to each of {args.per_topic} partitions", produce_all)

        every = [TopicPartition(topic, p) for p in range(args.per_topic)]

        def list_offsets():
            futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in every}, request_timeout=120)
            return [f.result(120).offset for f in futures.values()]
        def all_one(offsets):
            assert offsets.count(1) == args.per_topic, f"offsets other than 1: {sorted(set(offsets))}"
        out["list_offsets_s"] = median_time(f"ListOffsets for {args.per_topic} partitions", args.repeats,
                                            list_offsets, all_one)

        # The group: join, commit, OffsetFetch, a member leaving and one joining.
        group = "wide-group"
        started = time.time()
        for i in range(args.members):
            members.append(Member(bootstrap, group, topic, f"member-{i}"))
        everyone_holds = lambda: assigned(members) == (args.per_topic, min(len(members), args.per_topic))  # noqa: E731
        wait("every partition assigned", everyone_holds, 600)
        out["join_s"] = time.time() - started
        log(f"{args.members} members joined, every partition assigned: {out['join_s']:.2f} s")

        def commit_all():
            for m in members:
                m.commit_asked.set()
            for m in members:
                assert m.committed.wait(120), f"{m.name} did not commit within 120 s"
            errors = [f"{m.name}: {m.commit_error}" for m in members if m.commit_error]
            assert not errors, errors[:3]
        out["commit_all_s"], _ = timed(f"{args.members} members commit their partitions at once", commit_all)

        def offset_fetch():
            futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, every)], request_timeout=120)
            result = futures[group].result(120)
            return [tp.offset for tp in result.topic_partitions]
        out["offset_fetch_s"] = median_time(f"OffsetFetch (AdminClient) for {args.per_topic} partitions",
                                            args.repeats, offset_fetch, all_one)
        # A consumer of the group that does not join it: the members' own handles are only used
        # on their polling threads.
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            took, committed = timed(f"OffsetFetch (a consumer's committed()) for {args.per_topic} partitions",
                                    lambda: reader.committed(every, timeout=120))
        finally:
            reader.close()
        assert [tp.offset for tp in committed].count(1) == args.per_topic
        out["committed_s"] = took

        leaving = members.pop()
        started = time.time()
        leaving.leave()
        wait("the rest hold every partition", everyone_holds, 600)
        out["member_leaves_s"] = time.time() - started
        log(f"a member left, the others hold every partition: {out['member_leaves_s']:.2f} s")
        started = time.time()
        members.append(Member(bootstrap, group, topic, "member-new"))
        wait("all hold every partition", everyone_holds, 600)
        out["member_joins_s"] = time.time() - started
        log(f"a member joined, all hold every partition: {out['member_joins_s']:.2f} s")

        out["agent_rss_mib"] = round(rss_mib(floe.pid))
        out["agent_cpu_s"] = round(cpu_seconds(floe.pid), 1)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.thread.join(30)
        floe.send_signal(signal.SIGTERM)
        floe.wait(60)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}, indent=1))


if __name__ == "__main__":
    main()
