//! Consumer-group members that commit what they read, and an observer that reads each group's
//! committed offsets twice a second. Each member numbers its commits in the order it sends them
//! and writes the number into the commit's metadata, so the checker can tell, for every offset
//! the observer reads, which commit of which member left it there.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};

use super::{Stop, client};
use crate::history::{Event, History};

const COMMIT_EVERY: Duration = Duration::from_secs(1);
const OBSERVE_EVERY: Duration = Duration::from_millis(500);
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Prefix of the metadata a member's commits carry: `chaos MEMBER SEQ SENT_MS`.
const COMMIT_TAG: &str = "chaos";

/// Who sent a commit, its number in the member's order and when it was sent (run time, ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommitTag {
    pub(crate) member: u32,
    pub(crate) seq: u64,
    pub(crate) sent_ms: u64,
}

impl CommitTag {
    fn metadata(&self) -> String {
        format!("{COMMIT_TAG} {} {} {}", self.member, self.seq, self.sent_ms)
    }

    /// The tag a commit's metadata carries, if a member wrote it.
    pub(crate) fn parse(metadata: &str) -> Option<Self> {
        let mut words = metadata.split(' ');
        if words.next()? != COMMIT_TAG {
            return None;
        }
        let mut number = || words.next()?.parse::<u64>().ok();
        let member = u32::try_from(number()?).ok()?;
        Some(Self { member, seq: number()?, sent_ms: number()? })
    }
}

/// Records the answer to a synchronous commit. (Librdkafka reports asynchronous commits only
/// to an `offset_commit_cb`, which rust-rdkafka does not set, so their answers are unknown.)
fn record_answer(history: &History, group: &str, result: &KafkaResult<()>, offsets: &TopicPartitionList) {
    let Some(tag) = offsets.elements().first().and_then(|e| CommitTag::parse(e.metadata())) else { return };
    let offsets = offsets
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o, result.is_ok() && e.error().is_ok())),
            _ => None,
        })
        .collect();
    let CommitTag { member, seq, sent_ms } = tag;
    history.push(Event::OffsetCommitAnswered { group: group.to_owned(), member, seq, sent_ms, offsets });
}

/// How a member commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Commits {
    /// After every record read, asynchronously (librdkafka pipelines them), and every second
    /// synchronously: the load that once made the coordinator apply commits late. Librdkafka
    /// resends a commit that failed on a dead connection after the ones sent behind it, so the
    /// order of these on the wire is not the order they were made in.
    Pipelined,
    /// Synchronously after each batch of records read, and every second: each commit is sent
    /// after the one before it was answered, so the checker knows the order they must be
    /// applied in.
    OneAtATime,
}

/// Records a member reads before it commits, in [`Commits::OneAtATime`].
const BATCH_RECORDS_MAX: usize = 500;

/// A member of `group` reading `topic`, committing its positions as `commits` says. Blocking,
/// so on a thread.
pub(crate) fn member(
    bootstrap: String,
    group: &str,
    topic: &str,
    commits: Commits,
    stop: Stop,
    history: Arc<History>,
) -> anyhow::Result<()> {
    static MEMBERS: AtomicU32 = AtomicU32::new(0);
    let member = MEMBERS.fetch_add(1, Ordering::Relaxed);
    let consumer: BaseConsumer = client(&bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .create()
        .context("group member")?;
    consumer.subscribe(&[topic])?;
    let mut last_commit = Instant::now();
    let mut seq = 0u64;
    while !stop.is_set() {
        let mut read = 0;
        let mut wait = Duration::from_millis(100);
        // One record at a time when pipelining; otherwise what has arrived, up to a batch.
        loop {
            match consumer.poll(wait) {
                Some(Err(e)) => {
                    history.note(format!("{group} member: {e}"));
                    break;
                }
                Some(Ok(_)) => read += 1,
                None => break,
            }
            if commits == Commits::Pipelined || read >= BATCH_RECORDS_MAX {
                break;
            }
            wait = Duration::ZERO;
        }
        let sync = commits == Commits::OneAtATime || last_commit.elapsed() >= COMMIT_EVERY;
        if read == 0 && last_commit.elapsed() < COMMIT_EVERY {
            continue;
        }
        // Positions of what this member holds now: no rebalance runs between here and the
        // commit (rebalances run inside poll), so it never commits a partition it lost.
        let Ok(positions) = consumer.position() else { continue };
        seq += 1;
        let tag = CommitTag { member, seq, sent_ms: history.now_ms() }.metadata();
        let mut commit = TopicPartitionList::new();
        for e in positions.elements() {
            if let Offset::Offset(o) = e.offset() {
                let mut entry = commit.add_partition(e.topic(), e.partition());
                entry.set_offset(Offset::Offset(o))?;
                entry.set_metadata(tag.clone());
            }
        }
        if commit.count() == 0 {
            continue;
        }
        if !sync {
            let _ = consumer.commit(&commit, CommitMode::Async);
            continue;
        }
        last_commit = Instant::now();
        let result = consumer.commit(&commit, CommitMode::Sync);
        record_answer(&history, group, &result, &commit);
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
        let asked_ms = history.now_ms();
        let Ok(committed) = observer.committed_offsets(wanted.clone(), QUERY_TIMEOUT) else { continue };
        for e in committed.elements() {
            if let Offset::Offset(offset) = e.offset() {
                history.push(Event::OffsetObserved {
                    group: group.to_owned(),
                    partition: e.partition(),
                    offset,
                    asked_ms,
                    commit: CommitTag::parse(e.metadata()).map(|t| (t.member, t.seq)),
                });
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
