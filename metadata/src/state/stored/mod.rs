//! The state as it is stored, separate from the in-memory [`State`](crate::state::State): today's
//! format is [`StoredState`] (`current.rs`), and each older format has a mirror of its stored state
//! that converts into the next one's. Commands of every format so far are a prefix of today's
//! `Command`; only [`crate::Command::RestoreState`], which holds a whole state, needs to know which
//! format it is read in ([`decoding`]).
//!
//! Every record the state keeps has a stored layout here, one file per area (`log.rs`,
//! `groups.rs`, `security.rs`, ...), with conversions that name every field. Commands carry the
//! same layouts for the values they hand to the state (a group's membership, offset commits, a
//! credential, quotas, ACL bindings, an agent's registration, ...), so the in-memory types derive
//! no serde and can change freely. Two kinds of type stay shared: field-less vocabulary enums
//! (ACL operations, SCRAM mechanisms, usage meters, ...), whose variant order is their encoding
//! and is pinned by `vocabulary_enums_keep_their_encoded_order`; and the `CommandError` a segment
//! commit was answered with, kept so that a retry gets the same answer: it is a message, like the
//! commands.

mod acls;
mod agents;
mod current;
mod groups;
mod idempotency;
mod jobs;
mod link_config;
mod links;
mod log;
mod registry;
mod restate;
mod security;
mod share;
mod tables;
mod transactions;
mod usage;
mod v1;
mod v10;
mod v2;
mod v4;
mod v5;
mod v6;
mod v7;
mod v8;
mod v9;

use serde::Deserialize;

pub use acls::AclBinding;
pub(crate) use agents::AgentLoad;
pub use agents::{AgentInfo, AgentProfile, AgentRecord, AgentRoles};
pub use current::StoredState;
pub(crate) use groups::GroupRecord;
pub use groups::{CommitStamp, GroupMembership, MemberRecord, OffsetCommit};
pub(crate) use idempotency::IdempotencyKeyRecord;
pub(crate) use jobs::JobLease;
pub(crate) use links::LinkRecord;
pub use links::{LinkConfig, LinkSasl};
#[cfg(test)]
pub(crate) use log::EntryData;
pub use log::TxnMarker;
pub(crate) use log::{ObjectRecord, Topic};
pub(crate) use registry::SchemaRegistry;
pub use registry::{RegistryConfig, SchemaContent, SchemaReference};
pub(crate) use restate::{
    AsStored, Restate, WriteStored, restate_both_ways, restate_via_from, stored_layout, write_stored_by_field,
};
pub use security::{ApiKeyQuotas, ApiKeyRecord, ScramCredential, TenantQuotas};
pub(crate) use security::{TenantRecord, UserRecord};
pub(crate) use share::SharePartition;
pub(crate) use tables::TableRecord;
pub(crate) use transactions::{AbortedTransaction, ProducerRecord, TransactionRecord};
pub(crate) use usage::UsageLedger;

/// Converts each item: a stored layout into its in-memory type, or back.
pub fn each_into<T: Into<U>, U>(items: Vec<T>) -> Vec<U> {
    items.into_iter().map(Into::into).collect()
}

/// Decodes a postcard state of format `version`.
pub(crate) fn decode_state(version: u32, bytes: &[u8]) -> Result<StoredState, postcard::Error> {
    decoding(version, || postcard::from_bytes::<Versioned>(bytes)).map(|v| v.0)
}

thread_local! {
    /// The format this thread decodes (`decoding`); 0 for the current one.
    static DECODING_FORMAT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `decode` on bytes written in format `version`: states inside them are read as that
/// format wrote them.
pub(crate) fn decoding<T>(version: u32, decode: impl FnOnce() -> T) -> T {
    let before = DECODING_FORMAT.replace(version);
    let decoded = decode();
    DECODING_FORMAT.set(before);
    decoded
}

/// The format this thread decodes (0: the current one).
pub(crate) fn decoding_format() -> u32 {
    DECODING_FORMAT.get()
}

thread_local! {
    /// The format this thread encodes (`encoding`); 0 for the current one.
    static ENCODING_FORMAT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `encode` writing format `version`, which must be [`crate::FORMAT_VERSION`] or the one
/// before: a snapshot body a voter not yet upgraded must read. What that format cannot hold
/// fails to encode.
pub(crate) fn encoding<T>(version: u32, encode: impl FnOnce() -> T) -> T {
    let before = ENCODING_FORMAT.replace(version);
    let encoded = encode();
    ENCODING_FORMAT.set(before);
    encoded
}

/// The format this thread encodes (0: the current one).
pub(crate) fn encoding_format() -> u32 {
    ENCODING_FORMAT.get()
}

/// A stored state read in the format being decoded ([`decoding`]).
pub(crate) struct Versioned(pub(crate) StoredState);

impl<'de> Deserialize<'de> for Versioned {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let state = match DECODING_FORMAT.get() {
            1 => {
                StoredState::from(v5::StateV5::from(v4::StateV4::from(v2::StateV2::from(v1::StateV1::deserialize(d)?))))
            }
            2 => StoredState::from(v5::StateV5::from(v4::StateV4::from(v2::StateV2::deserialize(d)?))),
            3 | 4 => StoredState::from(v5::StateV5::from(v4::StateV4::deserialize(d)?)),
            5 => StoredState::from(v5::StateV5::deserialize(d)?),
            6 => StoredState::from(v6::StateV6::deserialize(d)?),
            7 => StoredState::from(v7::StateV7::deserialize(d)?),
            8 => StoredState::from(v8::StateV8::deserialize(d)?),
            9 => StoredState::from(v9::StateV9::deserialize(d)?),
            10 => StoredState::from(v10::StateV10::deserialize(d)?),
            _ => StoredState::deserialize(d)?,
        };
        Ok(Self(state))
    }
}

/// `Command::RestoreState`'s state, in the format being decoded.
pub(crate) fn restored_state<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Box<StoredState>, D::Error> {
    Versioned::deserialize(d).map(|v| Box::new(v.0))
}

/// A state copy sent in parts ([`crate::raft::network`]'s `StateCopyPart`), whole again: the
/// encoding a `StateCopy` frame carries, written in metadata format `format`.
pub(crate) fn decode_state_copy(bytes: &[u8], format: u32) -> Result<StoredState, postcard::Error> {
    // 0: today's format, as `read_frame_in` decodes.
    let format = if format >= crate::FORMAT_VERSION { 0 } else { format };
    decoding(format, || versioned_state(&mut postcard::Deserializer::from_bytes(bytes)))
}

/// A snapshot body's state, in the format being decoded.
pub(crate) fn versioned_state<'de, D: serde::Deserializer<'de>>(d: D) -> Result<StoredState, D::Error> {
    Versioned::deserialize(d).map(|v| v.0)
}

#[cfg(test)]
mod tests {
    use crate::acl::{AclOperation, AclPatternType, AclPermission, AclResourceType};
    use crate::state::{Compatibility, GroupKind, Meter, RegistryMode, SchemaType, ScramMechanism};

    /// Lists an enum's variants in their encoded order. The match names every variant, so one
    /// added does not compile until it is listed here too (at the end: a new variant anywhere else
    /// moves the ones after it, which is a format change).
    macro_rules! assert_encoded_in_order {
        ($ty:ident: $($variant:ident),+ $(,)?) => {{
            let listed = [$($ty::$variant),+];
            for (index, variant) in listed.into_iter().enumerate() {
                match variant {
                    $($ty::$variant)|+ => {}
                }
                let encoded = postcard::to_stdvec(&variant).expect("encodes");
                assert_eq!(encoded, [index as u8], "{variant:?} is encoded at another place");
            }
        }};
    }

    #[test]
    fn vocabulary_enums_keep_their_encoded_order() {
        assert_encoded_in_order!(AclOperation: All, Read, Write, Create, Delete, Alter, Describe,
            ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite);
        assert_encoded_in_order!(AclPatternType: Literal, Prefixed);
        assert_encoded_in_order!(AclPermission: Deny, Allow);
        assert_encoded_in_order!(AclResourceType: Topic, Group, Cluster, TransactionalId, Subject);
        assert_encoded_in_order!(GroupKind: Classic, Consumer, Share);
        assert_encoded_in_order!(Compatibility: None, Backward, BackwardTransitive, Forward,
            ForwardTransitive, Full, FullTransitive);
        assert_encoded_in_order!(RegistryMode: ReadWrite, ReadOnly, Import);
        assert_encoded_in_order!(SchemaType: Avro, Protobuf, Json);
        assert_encoded_in_order!(ScramMechanism: Sha256, Sha512);
        assert_encoded_in_order!(Meter: ProducedBytes, ProducedUncompressedBytes, ProducedRecords,
            FetchedBytes, FetchedUncompressedBytes, FetchedRecords, KafkaRequests, HttpRequests,
            StorageByteMinutes, PartitionMinutes, TableConvertedBytes);
    }
}
