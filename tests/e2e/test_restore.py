"""Rebuilding the metadata from the bucket alone: the leader archives snapshots and, every
second, the commands applied since; after the metadata disk is lost, `floe metadata restore`
seeds a new cluster and every record produced before the recovery point is back at its offset."""

import shutil
import subprocess
import time

from conftest import FLOE_BIN, Rec, consume_confluent, create_topic, produce, unique_name


def test_restore_from_the_bucket_after_losing_the_metadata_disk(floe):
    topic = unique_name("restore")
    create_topic(floe.bootstrap, topic, 3)
    recs = [Rec(partition=i % 3, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=None, timestamp=None)
            for i in range(300)]
    produce(floe.bootstrap, topic, recs[:150])
    time.sleep(1.5)
    # These land in the command log after the snapshot, not in a snapshot.
    produce(floe.bootstrap, topic, recs[150:])
    time.sleep(2.5)  # the documented recovery point is one archive interval (1 s)
    before = consume_confluent(floe.bootstrap, topic, 3)
    floe.kill()

    metadata_dir = floe.data_dir / "metadata"
    shutil.rmtree(metadata_dir)
    out = subprocess.run([FLOE_BIN, "metadata", "restore", "--object-store", floe.object_store,
                          "--data-dir", str(metadata_dir)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"restore failed: {out.stderr}"
    assert "1 topics" in out.stdout, out.stdout
    logs = int(out.stdout.split(" and ")[1].split()[0])
    assert logs >= 1, f"the restore replayed no command log: {out.stdout}"

    floe.start()
    after = consume_confluent(floe.bootstrap, topic, 3)
    assert after == before, "records differ after the restore"
    assert sum(len(v) for v in after.values()) == 300
    assert all(r.offset >= 0 for r in recs)
    # The restored cluster keeps going at the next offsets.
    extra = [Rec(partition=0, key=b"k", value=b"after-restore", headers=None, timestamp=None)]
    produce(floe.bootstrap, topic, extra)
    assert extra[0].offset == len(before[0]), f"next offset {extra[0].offset}, expected {len(before[0])}"
