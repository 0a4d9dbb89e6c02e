"""Scale-in without errors (issue 26): SIGTERM makes an agent leave the cluster's Metadata, stop
taking connections, finish its flushes and exit, while clients move to the other agent.

An idempotent producer sends through both agents of a cluster at a steady rate while agent 1 is
sent SIGTERM. The producer sees no delivery error, every acknowledged record is read back once,
agent 1 exits cleanly within its deadline, and the other agent stops listing it at once. Before
the drain, both agents export the autoscaling gauges (utilization, desired and live pool size).
"""

from __future__ import annotations

import signal
import threading
import time

import requests

from conftest import unique_name, wait_until


def test_an_agent_drains_on_sigterm_while_a_producer_runs(cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique_name("drain")
    bootstrap = f"{cluster.bootstrap(1)},{cluster.bootstrap(2)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, 4)])[topic].result(30)

    errors, acked = [], []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 60000,
                         "error_cb": lambda e: errors.append(("client", str(e))) if e.fatal() else None})
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is not None:
            errors.append(("delivery", str(err)))
        else:
            acked.append(msg.value())

    def run():
        i = 0
        while not stop.is_set():
            producer.produce(topic, key=str(i % 64).encode(), value=f"v{i}".encode(), on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            if i % 100 == 0:
                time.sleep(0.05)  # about 2,000 records a second
        producer.flush(60)

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: len(acked) > 2000, 30, "records flowing")

    # The autoscaling signal: each agent's utilization, and the pool's desired size (both agents
    # reported theirs, under load, within a sampling window of 10 s).
    def gauge(agent, name):
        for line in requests.get(f"{cluster.http_url(agent)}/metrics", timeout=5).text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None
    wait_until(lambda: gauge(1, "floe_agent_utilization") is not None
               and gauge(2, "floe_agent_pool_desired_agents") is not None, 25, "the autoscaling gauges")
    assert gauge(1, "floe_agent_utilization") > 0
    assert gauge(2, "floe_agent_pool_live_agents") == 2 and gauge(2, "floe_agent_pool_desired_agents") >= 1

    agent1 = cluster.agents[1]
    began = time.monotonic()
    agent1.p.send_signal(signal.SIGTERM)
    # The other agent stops listing it as soon as it left (not after the 10 s session).
    wait_until(lambda: requests.get(f"{cluster.http_url(2)}/v1/cluster", timeout=5).json()["live_agent_ids"] == [2],
               20, "agent 2 no longer listing agent 1")
    unlisted_s = time.monotonic() - began
    code = agent1.p.wait(60)
    drained_s = time.monotonic() - began
    assert unlisted_s < 3, f"agent 1 still listed {unlisted_s:.1f} s after SIGTERM"
    # The producer carries on through agent 2 alone, and agent 1 stays unlisted: no heartbeat
    # of its was committed after it left.
    for _ in range(6):
        time.sleep(0.5)
        listed = requests.get(f"{cluster.http_url(2)}/v1/cluster", timeout=5).json()["live_agent_ids"]
        assert listed == [2], f"agent 1 listed again after it left: {listed}"
    stop.set()
    thread.join(90)

    assert code == 0, cluster.logs()
    assert errors == [], errors[:5]
    assert len(acked) > 4000
    print(f"agent 1 unlisted after {unlisted_s:.2f} s, exited after {drained_s:.2f} s; {len(acked)} records acked")

    # Every acknowledged record is there once.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(2), "group.id": unique_name("g"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    seen = []
    deadline = time.monotonic() + 60
    while len(seen) < len(acked) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            seen.append(m.value())
    consumer.close()
    assert sorted(seen) == sorted(acked)
