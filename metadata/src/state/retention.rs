//! Retention and the end of an object's life: `retention.ms` and `retention.bytes` advance log
//! start offsets (as Kafka deletes whole segments, Floe drops whole index entries), and objects
//! garbage collection deleted are forgotten.

use super::{ObjectId, Partition, State, TopicId};
use crate::command::{CommandError, Outcome};

/// A topic's deletion policy, read from its configs, the cluster's, then Kafka's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RetentionPolicy {
    /// `retention.ms`; negative: keep forever.
    retention_ms: i64,
    /// `retention.bytes`; negative: no size limit.
    retention_bytes: i64,
}

impl State {
    /// The topic's policy, or `None` if its `cleanup.policy` does not include delete.
    fn retention_policy(&self, topic_id: TopicId) -> Option<RetentionPolicy> {
        let topic = self.topics.get(&topic_id)?;
        let policy = self.topic_config_value(topic, "cleanup.policy")?;
        if !policy.split(',').any(|p| p.trim() == "delete") {
            return None;
        }
        let number = |name: &str| self.topic_config_value(topic, name).and_then(|v| v.parse::<i64>().ok());
        Some(RetentionPolicy {
            retention_ms: number("retention.ms").unwrap_or(-1),
            retention_bytes: number("retention.bytes").unwrap_or(-1),
        })
    }

    /// The log start offset retention gives `log` at `now_ms`: past every leading entry that is
    /// too old or that the partition can lose and still hold `retention.bytes`. Never past the
    /// last stable offset, so an open transaction's records stay readable until it ends, and
    /// never past `hold` (what a table topic's table does not hold yet).
    fn retention_start(log: &Partition, policy: RetentionPolicy, now_ms: i64, hold: Option<i64>) -> i64 {
        let stable = hold.map_or(log.last_stable_offset(), |hold| hold.min(log.last_stable_offset()));
        let mut size = log.index_bytes;
        let mut start = log.log_start_offset;
        for entry in log.entries_from(log.log_start_offset) {
            if entry.last_offset >= stable {
                break;
            }
            let expired = policy.retention_ms >= 0 && now_ms.saturating_sub(entry.timestamp_max) > policy.retention_ms;
            let remaining = size - entry.stored_bytes();
            let oversized = u64::try_from(policy.retention_bytes).is_ok_and(|max| remaining >= max);
            if !expired && !oversized {
                break;
            }
            size = remaining;
            start = entry.last_offset + 1;
        }
        start
    }

    /// Per partition, the offset retention would move its log start to, where it would move.
    fn retention_moves(&self, now_ms: i64) -> Vec<(TopicId, i32, i64)> {
        let mut moves = Vec::new();
        for (topic_id, topic) in &self.topics {
            let Some(policy) = self.retention_policy(*topic_id) else { continue };
            for (index, log) in topic.partitions.iter().enumerate() {
                let partition = i32::try_from(index).unwrap_or(i32::MAX);
                let start = Self::retention_start(log, policy, now_ms, self.table_hold(*topic_id, partition));
                if start > log.log_start_offset {
                    moves.push((*topic_id, partition, start));
                }
            }
        }
        moves
    }

    /// Whether `ApplyRetention` at `now_ms` would change anything (the leader proposes it only then).
    pub fn retention_due(&self, now_ms: i64) -> bool {
        !self.retention_moves(now_ms).is_empty()
    }

    pub(super) fn apply_retention(&mut self, now_ms: i64) -> Result<Outcome, CommandError> {
        for (topic_id, partition, offset) in self.retention_moves(now_ms) {
            self.delete_records(topic_id, partition, offset)?;
        }
        Ok(Outcome::Done)
    }

    /// Objects no index entry refers to any more, with their keys: garbage for the collector.
    pub fn unreferenced_objects(&self) -> impl Iterator<Item = (ObjectId, &str)> {
        self.objects.iter().filter(|(_, o)| o.reference_count == 0).map(|(id, o)| (*id, o.key.as_str()))
    }

    pub(super) fn forget_objects(&mut self, object_ids: &[ObjectId]) -> Result<Outcome, CommandError> {
        for id in object_ids {
            if self.objects.get(id).is_some_and(|o| o.reference_count == 0) {
                self.objects.remove(id);
            }
        }
        Ok(Outcome::Done)
    }
}

#[cfg(test)]
mod tests;
