//! Kafka error codes are chosen here and nowhere else: typed errors in, `ResponseError` codes out,
//! with exhaustive matches so a new error variant forces a decision.

use floe_metadata::groups::GroupError;
use floe_metadata::{CommandError, NodeError};
use kafka_protocol::ResponseError;

use crate::fetch::FetchError;
use crate::fetch::sessions::FetchSessionError;
use crate::produce::{AppendError, ProduceError};

/// Codes used directly by handlers for conditions that have no error type of their own.
pub(super) mod code {
    use kafka_protocol::ResponseError;
    pub(crate) const UNSUPPORTED_VERSION: i16 = ResponseError::UnsupportedVersion.code();
    pub(crate) const UNKNOWN_TOPIC_OR_PARTITION: i16 = ResponseError::UnknownTopicOrPartition.code();
    pub(crate) const UNKNOWN_TOPIC_ID: i16 = ResponseError::UnknownTopicId.code();
    pub(crate) const INVALID_REQUEST: i16 = ResponseError::InvalidRequest.code();
    pub(crate) const INVALID_REPLICATION_FACTOR: i16 = ResponseError::InvalidReplicationFactor.code();
    pub(crate) const INVALID_CONFIG: i16 = ResponseError::InvalidConfig.code();
    pub(crate) const INVALID_TOPIC_EXCEPTION: i16 = ResponseError::InvalidTopicException.code();
    pub(crate) const UNSUPPORTED_ENDPOINT_TYPE: i16 = ResponseError::UnsupportedEndpointType.code();
    pub(crate) const FENCED_LEADER_EPOCH: i16 = ResponseError::FencedLeaderEpoch.code();
    pub(crate) const UNKNOWN_LEADER_EPOCH: i16 = ResponseError::UnknownLeaderEpoch.code();
    pub(crate) const TOPIC_ALREADY_EXISTS: i16 = ResponseError::TopicAlreadyExists.code();
    pub(crate) const TOPIC_AUTHORIZATION_FAILED: i16 = ResponseError::TopicAuthorizationFailed.code();
    pub(crate) const GROUP_AUTHORIZATION_FAILED: i16 = ResponseError::GroupAuthorizationFailed.code();
    pub(crate) const CLUSTER_AUTHORIZATION_FAILED: i16 = ResponseError::ClusterAuthorizationFailed.code();
    pub(crate) const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 =
        ResponseError::TransactionalIdAuthorizationFailed.code();
    pub(crate) const OPERATION_NOT_ATTEMPTED: i16 = ResponseError::OperationNotAttempted.code();
    pub(crate) const SECURITY_DISABLED: i16 = ResponseError::SecurityDisabled.code();
    pub(crate) const OFFSET_NOT_AVAILABLE: i16 = ResponseError::OffsetNotAvailable.code();
}

pub(super) fn for_produce(error: &ProduceError) -> ResponseError {
    match error {
        ProduceError::CorruptBatch(_) => ResponseError::CorruptMessage,
        ProduceError::BatchTooLarge { .. } => ResponseError::MessageTooLarge,
        ProduceError::InvalidRecord(_) => ResponseError::InvalidRecord,
        ProduceError::UnsupportedCompression(_) => ResponseError::UnsupportedCompressionType,
        ProduceError::TransactionalIdRequired => ResponseError::InvalidRecord,
        ProduceError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        ProduceError::InvalidRequiredAcks(_) => ResponseError::InvalidRequiredAcks,
        // Not retriable: waiting does not free space, retention or deletion does.
        ProduceError::StorageQuotaExceeded(_) => ResponseError::PolicyViolation,
        ProduceError::MirrorTopic(_) => ResponseError::InvalidRequest,
        ProduceError::RecordsRefused {
            why: crate::produce::RecordRefusal::NoKey | crate::produce::RecordRefusal::Schema,
            ..
        } => ResponseError::InvalidRecord,
        ProduceError::RecordsRefused { why: crate::produce::RecordRefusal::Timestamp, .. } => {
            ResponseError::InvalidTimestamp
        }
    }
}

pub(super) fn for_append(error: &AppendError) -> ResponseError {
    match error {
        // Retriable, and nothing was committed: clients take it as "not persisted".
        AppendError::Storage(_) => ResponseError::KafkaStorageError,
        // Retriable, but the commit may have landed: clients take REQUEST_TIMED_OUT as "possibly
        // persisted" and retry under the same producer sequence, which Floe deduplicates;
        // "not persisted" would let an idempotent producer resend it under a new epoch.
        AppendError::MetadataUnavailable(_) => ResponseError::RequestTimedOut,
        // Held behind the producer's failed earlier request and never proposed: "not persisted",
        // retried after the earlier one, as that one is after its KAFKA_STORAGE_ERROR.
        AppendError::EarlierSequenceFailed => ResponseError::KafkaStorageError,
        AppendError::ShuttingDown => ResponseError::NotLeaderOrFollower,
        AppendError::Rejected(e) => for_command(e),
    }
}

pub(super) fn for_command(error: &CommandError) -> ResponseError {
    match error {
        CommandError::TopicExists(_) => ResponseError::TopicAlreadyExists,
        CommandError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        CommandError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        CommandError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
        CommandError::InvalidConfig(_) => ResponseError::InvalidConfig,
        CommandError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        CommandError::LimitReached(_) | CommandError::QuotaExceeded(_) => ResponseError::PolicyViolation,
        CommandError::InvalidGroup(_) => ResponseError::InvalidGroupId,
        CommandError::GroupNotFound => ResponseError::GroupIdNotFound,
        CommandError::GroupNotEmpty => ResponseError::NonEmptyGroup,
        CommandError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        CommandError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        // Retriable and "not persisted", without the epoch bump OUT_OF_ORDER_SEQUENCE causes: the
        // client sends the earlier chunk again (it is unacknowledged), which fills the gap or is
        // answered as a duplicate once a late commit of it lands.
        CommandError::SequenceGap { .. } => ResponseError::NotEnoughReplicas,
        // Retriable, but an earlier copy of the commit may have landed (its answer lost, the
        // copy refused as late): "possibly persisted", as for MetadataUnavailable, never "not
        // persisted", so an idempotent producer resends under the same sequence.
        CommandError::SegmentCommitRefused { .. } => ResponseError::RequestTimedOut,
        CommandError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        CommandError::ProducerFenced => ResponseError::ProducerFenced,
        CommandError::UnknownProducerId(_) => ResponseError::UnknownProducerId,
        CommandError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        CommandError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
        CommandError::InvalidTransactionTimeout { .. } => ResponseError::InvalidTransactionTimeout,
        CommandError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
        CommandError::OperationNotAttempted => ResponseError::OperationNotAttempted,
        CommandError::InvalidAcl(_) => ResponseError::InvalidRequest,
        CommandError::InvalidRecordState(_) => ResponseError::InvalidRecordState,
        // Not retriable: the topic takes no writes until its link is promoted.
        CommandError::MirrorTopic { .. } => ResponseError::InvalidRequest,
        CommandError::InvalidLink(_) => ResponseError::InvalidRequest,
        // This agent's metadata certificate does not allow the command: a deployment fault.
        CommandError::NotAuthorized(_) => {
            crate::log_limited!(tracing::Level::ERROR, error = %error, "the metadata port refused this agent's command");
            ResponseError::ClusterAuthorizationFailed
        }
        CommandError::InvalidCommit(_)
        | CommandError::InvalidUsage(_)
        | CommandError::AlreadyInitialized
        | CommandError::CompactionConflict
        | CommandError::JobLeaseHeld { .. }
        | CommandError::IdempotencyKeyReused(_)
        | CommandError::InvalidIdempotencyKey(_)
        | CommandError::InvalidCredential(_)
        | CommandError::CredentialNotFound(_)
        | CommandError::Registry(_)
        | CommandError::TableConflict(_) => {
            crate::log_limited!(tracing::Level::ERROR, error = %error, "metadata rejected an agent command");
            ResponseError::UnknownServerError
        }
    }
}

pub(super) fn for_group(error: &GroupError) -> ResponseError {
    match error {
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::CoordinatorNotAvailable(why) => {
            crate::log_limited!(tracing::Level::WARN, why = %why, "group coordinator not available");
            ResponseError::CoordinatorNotAvailable
        }
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::InvalidRequest(_) => ResponseError::InvalidRequest,
        GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        GroupError::UnsupportedAssignor => ResponseError::UnsupportedAssignor,
        GroupError::Transaction(e) => for_command(e),
        GroupError::InvalidRecordState(_) => ResponseError::InvalidRecordState,
    }
}

pub(super) fn for_node(error: &NodeError) -> ResponseError {
    match error {
        NodeError::Rejected(e) => for_command(e),
        NodeError::Unavailable(_) => ResponseError::RequestTimedOut,
    }
}

pub(super) fn for_fetch(error: &FetchError) -> ResponseError {
    match error {
        FetchError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        FetchError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        FetchError::OffsetNotAvailable { .. } => ResponseError::OffsetNotAvailable,
        FetchError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
        FetchError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        FetchError::Storage(_) => ResponseError::KafkaStorageError,
        FetchError::CorruptStoredBatch(_) => {
            crate::log_limited!(tracing::Level::ERROR, error = %error, "stored data failed to parse");
            ResponseError::KafkaStorageError
        }
    }
}

pub(super) fn for_fetch_session(error: &FetchSessionError) -> ResponseError {
    match error {
        FetchSessionError::NotFound(_) => ResponseError::FetchSessionIdNotFound,
        FetchSessionError::InvalidEpoch { .. } => ResponseError::InvalidFetchSessionEpoch,
        FetchSessionError::TopicIdUsage { .. } => ResponseError::FetchSessionTopicIdError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequence_gap_is_retried_and_never_taken_for_lost_records() {
        // OUT_OF_ORDER_SEQUENCE makes librdkafka bump its epoch and send the missing records
        // again; for a gap that a late commit may still fill that would duplicate them.
        let gap = for_command(&CommandError::SequenceGap { expected: 6, found: 8 });
        assert_eq!(gap, ResponseError::NotEnoughReplicas);
        assert!(gap.is_retriable());
        let malformed = for_command(&CommandError::OutOfOrderSequence { expected: 3, found: 5 });
        assert_eq!(malformed, ResponseError::OutOfOrderSequenceNumber);
    }

    #[test]
    fn a_refused_segment_commit_is_retried_as_possibly_persisted() {
        // An earlier copy of a refused commit may have landed: KAFKA_STORAGE_ERROR ("not
        // persisted") could let a producer write its records twice.
        let refused = CommandError::SegmentCommitRefused { key: "segments/k.seg".into(), why: "late".into() };
        let code = for_append(&AppendError::Rejected(refused));
        assert_eq!(code, ResponseError::RequestTimedOut);
        assert!(code.is_retriable());
    }

    #[test]
    fn a_request_held_behind_a_failed_one_is_retried_as_not_persisted() {
        let held = for_append(&AppendError::EarlierSequenceFailed);
        assert_eq!(held, for_append(&AppendError::Storage("PUT failed".into())));
        assert!(held.is_retriable());
    }
}
