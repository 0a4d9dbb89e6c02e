//! Consumer-group members that commit what they read, and an observer that reads each group's
//! committed offsets twice a second. Each member numbers its commits in the order it sends them
//! and writes the number into the commit's metadata, so the checker can tell, for every offset
//! the observer reads, which commit of which member left it there. A restarting member closes its
//! consumer and makes a new one every few seconds, as an application restarts, and keeps what
//! each incarnation consumed for `check::restarts`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::message::BorrowedMessage;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::{Stop, client};
use crate::history::{Event, History};

const COMMIT_EVERY: Duration = Duration::from_secs(1);
const OBSERVE_EVERY: Duration = Duration::from_millis(500);
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Prefix of the metadata a member's commits carry: `chaos MEMBER SEQ SENT_MS`.
const COMMIT_TAG: &str = "chaos";

/// Numbers members, and each incarnation of a restarting member, across the run.
static MEMBERS: AtomicU32 = AtomicU32::new(0);

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

/// Polls what has arrived, one record when `one`, else up to a batch, handing each to `each`;
/// how many records it read.
fn poll_batch(
    consumer: &BaseConsumer,
    group: &str,
    one: bool,
    history: &History,
    mut each: impl FnMut(&BorrowedMessage<'_>),
) -> usize {
    let mut read = 0;
    let mut wait = Duration::from_millis(100);
    loop {
        match consumer.poll(wait) {
            Some(Err(e)) => {
                history.note(format!("{group} member: {e}"));
                break;
            }
            Some(Ok(m)) => {
                each(&m);
                read += 1;
            }
            None => break,
        }
        if one || read >= BATCH_RECORDS_MAX {
            break;
        }
        wait = Duration::ZERO;
    }
    read
}

/// A commit of the positions `consumer` holds now, tagged as commit `seq` of `member`; `None`
/// while it holds none. No rebalance runs between here and the commit (rebalances run inside
/// poll), so a member never commits a partition it lost.
fn positions_commit(
    consumer: &BaseConsumer,
    member: u32,
    seq: u64,
    history: &History,
) -> anyhow::Result<Option<TopicPartitionList>> {
    let Ok(positions) = consumer.position() else { return Ok(None) };
    let tag = CommitTag { member, seq, sent_ms: history.now_ms() }.metadata();
    let mut commit = TopicPartitionList::new();
    for e in positions.elements() {
        if let Offset::Offset(o) = e.offset() {
            let mut entry = commit.add_partition(e.topic(), e.partition());
            entry.set_offset(Offset::Offset(o))?;
            entry.set_metadata(tag.clone());
        }
    }
    Ok((commit.count() > 0).then_some(commit))
}

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
        let read = poll_batch(&consumer, group, commits == Commits::Pipelined, &history, |_| {});
        let sync = commits == Commits::OneAtATime || last_commit.elapsed() >= COMMIT_EVERY;
        if read == 0 && last_commit.elapsed() < COMMIT_EVERY {
            continue;
        }
        let Some(commit) = positions_commit(&consumer, member, seq + 1, &history)? else { continue };
        seq += 1;
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

/// How long each incarnation of a restarting member lives. A new incarnation joins an empty
/// group, which waits `group.initial.rebalance.delay.ms` (3 s by default) before its first
/// rebalance, so an incarnation reads for about 5 s of it.
const RESTART_EVERY: Duration = Duration::from_secs(8);

/// One record an incarnation consumed: its offset, its value, and the wall time it was handed
/// over (what retention is measured against).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Consumed {
    pub(crate) offset: i64,
    pub(crate) value: String,
    pub(crate) unix_ms: i64,
}

/// One incarnation of a restarting member: its member number (its commits' tag), when it
/// started (before its consumer was made) and ended (after it was closed), and per partition
/// what it consumed, in order.
#[derive(Clone, Debug)]
pub(crate) struct Incarnation {
    pub(crate) member: u32,
    pub(crate) started_ms: u64,
    pub(crate) ended_ms: u64,
    pub(crate) records: Vec<Vec<Consumed>>,
}

pub(crate) type Incarnations = Arc<Mutex<Vec<Incarnation>>>;

/// What a restarting member reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RestartSpec {
    pub(crate) group: &'static str,
    pub(crate) topic: &'static str,
    pub(crate) partitions: i32,
}

/// The only member of `spec.group` (subscribed, `read_committed`), closed and made anew every
/// [`RESTART_EVERY`] until `stop`: each incarnation resumes from the group's committed offsets
/// and commits its positions synchronously after each batch and every second, so every commit's
/// answer is in the history. Blocking, so on a thread.
pub(crate) fn restarting_member(
    bootstrap: String,
    spec: RestartSpec,
    stop: Stop,
    history: Arc<History>,
    incarnations: Incarnations,
) -> anyhow::Result<()> {
    let RestartSpec { group, topic, partitions } = spec;
    while !stop.is_set() {
        let member = MEMBERS.fetch_add(1, Ordering::Relaxed);
        let started_ms = history.now_ms();
        let mut records = vec![Vec::new(); usize::try_from(partitions).unwrap_or(0)];
        {
            let consumer: BaseConsumer = client(&bootstrap)
                .set("group.id", group)
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .set("isolation.level", "read_committed")
                .set("session.timeout.ms", "10000")
                .create()
                .context("restarting member")?;
            consumer.subscribe(&[topic])?;
            let restart_at = Instant::now() + RESTART_EVERY;
            let mut last_commit = Instant::now();
            let mut seq = 0u64;
            while !stop.is_set() && Instant::now() < restart_at {
                let read = poll_batch(&consumer, group, false, &history, |m| {
                    let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                    let consumed = Consumed { offset: m.offset(), value, unix_ms: super::unix_ms() };
                    if let Some(partition) = usize::try_from(m.partition()).ok().and_then(|p| records.get_mut(p)) {
                        partition.push(consumed);
                    }
                });
                if read == 0 && last_commit.elapsed() < COMMIT_EVERY {
                    continue;
                }
                let Some(commit) = positions_commit(&consumer, member, seq + 1, &history)? else { continue };
                seq += 1;
                last_commit = Instant::now();
                let result = consumer.commit(&commit, CommitMode::Sync);
                record_answer(&history, group, &result, &commit);
            }
            // Dropping the consumer closes it: it leaves the group, and the next incarnation
            // joins an empty one.
        }
        incarnations.lock().unwrap_or_else(|p| p.into_inner()).push(Incarnation {
            member,
            started_ms,
            ended_ms: history.now_ms(),
            records,
        });
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
