//! One file per Kafka API family: wire types in, pipeline calls, wire types out.

pub(super) mod cluster;
pub(super) mod configs;
pub(super) mod delete_records;
pub(super) mod fetch;
pub(super) mod groups;
pub(super) mod list_offsets;
pub(super) mod metadata;
pub(super) mod offset_for_leader_epoch;
pub(super) mod produce;
pub(super) mod topics;

use kafka_protocol::protocol::StrBytes;

pub(super) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Milliseconds since the Unix epoch, for LogAppendTime; the state machine never reads clocks.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
