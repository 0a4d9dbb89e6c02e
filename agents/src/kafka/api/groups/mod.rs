//! Consumer group APIs: FindCoordinator names this agent; the coordination requests are
//! forwarded to the group coordinator on the metadata leader, and so is OffsetFetch, which the
//! leader answers with a linearizable read.

mod consumer_group_describe;
mod consumer_group_heartbeat;
mod delete_groups;
mod describe_groups;
mod find_coordinator;
mod heartbeat;
mod join_group;
mod leave_group;
mod list_groups;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod sync_group;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use floe_metadata::groups::{
    ConsumerHeartbeat, GroupError, GroupRequest, GroupResponse, JoinRequest, LeavingMember, MemberRef, SyncRequest,
};
use floe_metadata::{AskedPartitions, CommitStamp, FetchedOffset, OffsetCommit};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribeAssignment, DescribedGroup as ConsumerDescribedGroup, Member as ConsumerDescribedMember,
    TopicPartitions as DescribeTopicPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as HeartbeatAssignment, TopicPartitions as HeartbeatTopicPartitions,
};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    BrokerId, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, oneshot};

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::code;
use super::super::error_code::for_group;
use super::super::resources::{AnswerWalk, Op, Refusal, Refused, RefusedTopic, Res, Resources, TopicRef, Walk};
use super::str_bytes;
use crate::Agent;

use floe_metadata::groups::next_commit_stamp;
use kafka_protocol::messages::ResponseKind;
pub(in crate::kafka) use offset_commit::CommitLane;

/// Who sent a JoinGroup, as DescribeGroups reports members.
pub(in crate::kafka) struct Client {
    pub(in crate::kafka) client_id: String,
    pub(in crate::kafka) host: String,
}

fn error_code(result: &Result<(), GroupError>) -> i16 {
    result.as_ref().err().map_or(0, |e| for_group(e).code())
}

/// Sends `request` to the coordinator and takes the answer `pick` expects (every request has
/// exactly one answer variant; anything else is the coordinator misbehaving).
async fn ask<T>(
    agent: &Agent,
    request: GroupRequest,
    pick: impl FnOnce(GroupResponse) -> Option<T>,
) -> Result<T, GroupError> {
    let response = agent.metadata.group_request(request).await?;
    pick(response).ok_or_else(|| GroupError::CoordinatorNotAvailable("answered another request's kind".into()))
}

fn opt(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

/// How long OffsetFetch waits for a metadata leader that can confirm a read (an election, an
/// agent cut off for a moment) before answering COORDINATOR_LOAD_IN_PROGRESS, and an
/// OffsetCommit keeps resending through a leader change: below the request timeouts of Kafka
/// clients (30 s in Java's).
const CONFIRMED_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(20);
const CONFIRMED_READ_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);
