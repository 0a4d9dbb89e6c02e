//! One module per Kafka API (grouped by family where APIs share helpers): wire types in,
//! pipeline calls, wire types out, and the API's `KafkaApi` and `Resources`.

pub(super) mod acls;
pub(super) mod cluster;
pub(super) mod configs;
pub(super) mod delete_records;
pub(super) mod fetch;
pub(super) mod groups;
pub(super) mod list_offsets;
pub(super) mod metadata;
pub(super) mod offset_for_leader_epoch;
pub(super) mod produce;
pub(super) mod scram_credentials;
pub(super) mod share;
pub(super) mod topics;
pub(super) mod transactions;

use kafka_protocol::protocol::StrBytes;

pub(super) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}
