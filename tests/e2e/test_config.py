"""Settings from a TOML file and FLOE_* variables: `floe dev --config FILE` listens where the
file says, a variable wins over the file and a flag over both, logs come out as JSON when asked,
and `floe config check` validates the annotated example and says where each value comes from."""

import json
import os
import subprocess
from pathlib import Path

import requests
from confluent_kafka.admin import AdminClient

from conftest import FLOE_BIN, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]


def clean_env(**extra):
    """This environment without FLOE_* variables (a developer's own would change the answers)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOE_")}
    env.update(extra)
    return env


def check(path, command="agent", **env):
    return subprocess.run([FLOE_BIN, "config", "check", str(path), "--command", command, "--json"],
                          capture_output=True, text=True, timeout=30, env=clean_env(**env))


def test_the_example_file_is_valid_for_every_command_and_sources_are_reported():
    example = ROOT / "examples" / "floe.toml"
    for command in ("agent", "metadata", "dev"):
        run = check(example, command, FLOE_NODE_ID="7")
        assert run.returncode == 0, (command, run.stderr)
    settings = {s["setting"]: s for s in json.loads(check(example, FLOE_ZONE="us-east-1c", FLOE_NODE_ID="7").stdout)}
    assert settings["kafka-addr"] == {"setting": "kafka-addr", "values": ["0.0.0.0:9092"], "source": "file"}
    assert settings["metadata"]["values"] == ["10.0.1.10:9093", "10.0.2.10:9093", "10.0.3.10:9093"]
    assert settings["zone"]["values"] == ["us-east-1c"] and settings["zone"]["source"] == "environment"
    assert settings["log-format"]["values"] == ["json"]
    assert settings["num-partitions"]["source"] == "default"
    assert settings["sasl-mechanisms"]["values"] == ["SCRAM-SHA-512", "SCRAM-SHA-256"]


def test_bad_files_are_refused_with_what_is_wrong(tmp_path):
    cases = {
        "kafka-adr = \"0.0.0.0:9092\"\n": "`kafka-adr` is not a setting of `floe agent`",
        "[agnet]\nzone = \"a\"\n": "[agnet] is not a section",
        "metadata = [\"a:9093\"]\nobject-store = \"memory://\"\nflush-interval-ms = \"soon\"\n": "flush-interval-ms",
        "zone = \n": "not a valid configuration file",
        "object-store = \"memory://\"\n": "metadata",  # required, and given nowhere
    }
    for text, expected in cases.items():
        path = tmp_path / "bad.toml"
        path.write_text(text)
        run = check(path)
        assert run.returncode != 0 and expected in run.stderr, (text, run.stderr)


def test_dev_runs_from_a_file_with_the_environment_and_flags_winning(tmp_path):
    kafka, http, http_env, metadata = free_port(), free_port(), free_port(), free_port()
    config = tmp_path / "floe.toml"
    config.write_text(f"""
data-dir = "{tmp_path / 'data'}"
log-format = "json"
[dev]
kafka-addr = "127.0.0.1:{kafka}"
http-addr = "127.0.0.1:{http}"
metadata-addr = "127.0.0.1:9"
num-partitions = 3
""")
    log = tmp_path / "floe.log"
    with open(log, "wb") as out:
        # The variable beats the file's http-addr; the flag beats the file's metadata-addr.
        proc = subprocess.Popen([FLOE_BIN, "dev", "--config", str(config), "--metadata-addr", f"127.0.0.1:{metadata}"],
                                stdout=out, stderr=out, env=clean_env(FLOE_HTTP_ADDR=f"127.0.0.1:{http_env}"))
    try:
        def ready():
            try:
                return requests.get(f"http://127.0.0.1:{http_env}/readyz", timeout=1).status_code == 200
            except requests.RequestException:
                return False

        wait_until(ready, 30, "floe dev ready on the environment's HTTP address")
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka}"})
        assert admin.list_topics(timeout=10).brokers, "the Kafka listener is where the file says"
        # num-partitions from the file: an auto-created topic gets 3.
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{kafka}"})
        producer.produce("configured", b"x")
        assert producer.flush(10) == 0
        assert len(admin.list_topics("configured", timeout=10).topics["configured"].partitions) == 3
        lines = [line for line in log.read_text().splitlines() if line.strip()]
        assert lines and all(json.loads(line)["level"] for line in lines), lines[:3]
    finally:
        proc.kill()
        proc.wait()
