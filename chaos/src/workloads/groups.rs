//! Consumer-group members that commit what they read, and an observer that reads each group's
//! committed offsets twice a second: the checker asks that no committed offset ever goes back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::{Stop, client};
use crate::history::{Event, History};

const COMMIT_EVERY: Duration = Duration::from_secs(1);
const OBSERVE_EVERY: Duration = Duration::from_millis(500);
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// A member of `group` reading `topic`; commits its positions after every record read
/// (asynchronously) and every second (synchronously, recorded). Blocking, so on a thread.
pub(crate) fn member(
    bootstrap: String,
    group: &str,
    topic: &str,
    stop: Stop,
    history: Arc<History>,
) -> anyhow::Result<()> {
    let consumer: BaseConsumer = client(&bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .create()
        .context("group member")?;
    consumer.subscribe(&[topic])?;
    let mut last_commit = Instant::now();
    while !stop.is_set() {
        let read = match consumer.poll(Duration::from_millis(100)) {
            Some(Err(e)) => {
                history.note(format!("{group} member: {e}"));
                false
            }
            Some(Ok(_)) => true,
            None => false,
        };
        // Positions of what this member holds now: no rebalance runs between here and the
        // commit (rebalances run inside poll), so it never commits a partition it lost.
        let Ok(positions) = consumer.position() else { continue };
        let mut commit = TopicPartitionList::new();
        for e in positions.elements() {
            if let Offset::Offset(o) = e.offset() {
                commit.add_partition_offset(e.topic(), e.partition(), Offset::Offset(o))?;
            }
        }
        if commit.count() == 0 {
            continue;
        }
        if last_commit.elapsed() < COMMIT_EVERY {
            // Between the recorded commits, one asynchronous commit per record read: librdkafka
            // pipelines them, and the metadata must apply them in the order they were sent,
            // or the observer sees an offset go back.
            if read {
                let _ = consumer.commit(&commit, CommitMode::Async);
            }
            continue;
        }
        last_commit = Instant::now();
        if consumer.commit(&commit, CommitMode::Sync).is_ok() {
            for e in commit.elements() {
                if let Offset::Offset(offset) = e.offset() {
                    let group = group.to_owned();
                    history.push(Event::OffsetCommitted { group, partition: e.partition(), offset });
                }
            }
        }
    }
    Ok(())
}

/// Reads the committed offsets of `group` on `topic` until `stop`. Blocking, so on a thread.
pub(crate) fn observe(
    bootstrap: String,
    group: &str,
    topic: &str,
    partitions: i32,
    stop: Stop,
    history: Arc<History>,
) -> anyhow::Result<()> {
    // Never subscribes: with a group.id it may ask for the group's offsets without joining it.
    let observer: BaseConsumer = client(&bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .context("offset observer")?;
    let mut wanted = TopicPartitionList::new();
    for p in 0..partitions {
        wanted.add_partition(topic, p);
    }
    while !stop.is_set() {
        std::thread::sleep(OBSERVE_EVERY);
        let Ok(committed) = observer.committed_offsets(wanted.clone(), QUERY_TIMEOUT) else { continue };
        for e in committed.elements() {
            if let Offset::Offset(offset) = e.offset() {
                history.push(Event::OffsetObserved { group: group.to_owned(), partition: e.partition(), offset });
            }
        }
    }
    Ok(())
}

/// The committed offsets of `group` on `topic` now, by partition (absent: none committed).
pub(crate) fn committed(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<Vec<Option<i64>>> {
    let observer: BaseConsumer =
        client(bootstrap).set("group.id", group).set("enable.auto.commit", "false").create()?;
    let mut wanted = TopicPartitionList::new();
    for p in 0..partitions {
        wanted.add_partition(topic, p);
    }
    let committed = observer.committed_offsets(wanted, QUERY_TIMEOUT)?;
    (0..partitions)
        .map(|p| match committed.find_partition(topic, p) {
            Some(e) => {
                e.error().with_context(|| format!("committed offset of partition {p}"))?;
                Ok(match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                })
            }
            None => Ok(None),
        })
        .collect()
}
