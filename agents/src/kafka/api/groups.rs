//! Consumer group APIs: FindCoordinator names this agent; the coordination requests are
//! forwarded to the group coordinator on the metadata leader, and so is OffsetFetch, which the
//! leader answers with a linearizable read.

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

/// FindCoordinator key types: consumer groups and transactions (2, share groups, is not served).
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

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

/// Every agent can coordinate every group (by forwarding); each key is given one of them.
pub(in crate::kafka) fn find_coordinator(
    agent: &Agent,
    version: i16,
    request: FindCoordinatorRequest,
    client_id: Option<&str>,
) -> FindCoordinatorResponse {
    let served = matches!(request.key_type, KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION);
    let error = (!served).then_some(ResponseError::InvalidRequest);
    let message = error.map(|_| str_bytes("only group (0) and transaction (1) coordinators are served"));
    let this = agent.info();
    let agents =
        crate::membership::for_client_zone(crate::membership::live_agents(&agent.metadata.read(), agent), client_id);
    // Any agent can coordinate any key; naming the same one whoever is asked keeps a client
    // on one coordinator connection, whose requests this agent then reads in order.
    let coordinator = |key: &str| crate::membership::coordinator(&agents, key).unwrap_or(&this).clone();
    if version < 4 {
        let chosen = coordinator(&request.key);
        let response = FindCoordinatorResponse::default()
            .with_error_code(error.map_or(0, |e| e.code()))
            .with_node_id(BrokerId(if error.is_some() { -1 } else { chosen.agent_id }))
            .with_host(str_bytes(if error.is_some() { String::new() } else { chosen.host }))
            .with_port(if error.is_some() { -1 } else { i32::from(chosen.port) });
        return if version >= 1 { response.with_error_message(message) } else { response };
    }
    let coordinators = request
        .coordinator_keys
        .into_iter()
        .map(|key| match error {
            Some(e) => Coordinator::default()
                .with_key(key)
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(e.code())
                .with_error_message(message.clone()),
            None => {
                let chosen = coordinator(&key);
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(chosen.agent_id))
                    .with_host(str_bytes(chosen.host))
                    .with_port(i32::from(chosen.port))
            }
        })
        .collect();
    FindCoordinatorResponse::default().with_coordinators(coordinators)
}

fn opt(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

pub(in crate::kafka) async fn join(
    agent: &Agent,
    version: i16,
    request: JoinGroupRequest,
    client: Client,
) -> JoinGroupResponse {
    let join = JoinRequest {
        group_id: request.group_id.to_string(),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version == 0 { request.session_timeout_ms } else { request.rebalance_timeout_ms },
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id),
        protocol_type: request.protocol_type.to_string(),
        protocols: request.protocols.into_iter().map(|p| (p.name.to_string(), p.metadata.to_vec())).collect(),
        client_id: client.client_id,
        client_host: client.host,
        require_known_member: version >= 4,
    };
    let joined = ask(agent, GroupRequest::Join(join), |r| match r {
        GroupResponse::Join(joined) => Some(joined),
        _ => None,
    })
    .await;
    let (error, answer) = match joined {
        Ok(Ok(answer)) => (None, answer),
        Ok(Err((e, answer))) => (Some(e), answer),
        Err(e) => (Some(e), Default::default()),
    };
    let members = answer
        .members
        .into_iter()
        .map(|m| {
            let member = JoinGroupResponseMember::default()
                .with_member_id(str_bytes(m.member_id))
                .with_metadata(m.metadata.into());
            if version >= 5 { member.with_group_instance_id(m.instance_id.map(str_bytes)) } else { member }
        })
        .collect();
    let response = JoinGroupResponse::default()
        .with_error_code(error.as_ref().map_or(0, |e| for_group(e).code()))
        .with_generation_id(if error.is_some() && answer.generation == 0 { -1 } else { answer.generation })
        .with_protocol_name(answer.protocol.map(str_bytes))
        .with_leader(str_bytes(answer.leader))
        .with_member_id(str_bytes(answer.member_id))
        .with_members(members);
    if version >= 7 { response.with_protocol_type(answer.protocol_type.map(str_bytes)) } else { response }
}

pub(in crate::kafka) async fn sync(agent: &Agent, version: i16, request: SyncGroupRequest) -> SyncGroupResponse {
    let sync = SyncRequest {
        group_id: request.group_id.to_string(),
        generation: request.generation_id,
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id),
        protocol_type: opt(request.protocol_type),
        protocol: opt(request.protocol_name),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    };
    let result = ask(agent, GroupRequest::Sync(sync), |r| match r {
        GroupResponse::Sync(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    match result {
        Ok(answer) => {
            let response = SyncGroupResponse::default().with_assignment(answer.assignment.into());
            if version >= 5 {
                response
                    .with_protocol_type(answer.protocol_type.map(str_bytes))
                    .with_protocol_name(answer.protocol.map(str_bytes))
            } else {
                response
            }
        }
        Err(e) => SyncGroupResponse::default().with_error_code(for_group(&e).code()),
    }
}

pub(in crate::kafka) async fn heartbeat(agent: &Agent, request: HeartbeatRequest) -> HeartbeatResponse {
    let member = MemberRef {
        group_id: request.group_id.to_string(),
        generation: request.generation_id,
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id),
    };
    let result = ask(agent, GroupRequest::Heartbeat(member), |r| match r {
        GroupResponse::Heartbeat(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    HeartbeatResponse::default().with_error_code(error_code(&result))
}

pub(in crate::kafka) async fn leave(agent: &Agent, version: i16, request: LeaveGroupRequest) -> LeaveGroupResponse {
    let members: Vec<LeavingMember> = if version >= 3 {
        request
            .members
            .into_iter()
            .map(|m| LeavingMember { member_id: m.member_id.to_string(), instance_id: opt(m.group_instance_id) })
            .collect()
    } else {
        vec![LeavingMember { member_id: request.member_id.to_string(), instance_id: None }]
    };
    let group_id = request.group_id.to_string();
    let result = ask(agent, GroupRequest::Leave { group_id, members }, |r| match r {
        GroupResponse::Leave(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    match result {
        Err(e) => LeaveGroupResponse::default().with_error_code(for_group(&e).code()),
        Ok(results) if version < 3 => {
            LeaveGroupResponse::default().with_error_code(results.first().map_or(0, |(_, r)| error_code(r)))
        }
        Ok(results) => LeaveGroupResponse::default().with_members(
            results
                .into_iter()
                .map(|(m, r)| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(m.member_id))
                        .with_group_instance_id(m.instance_id.map(str_bytes))
                        .with_error_code(error_code(&r))
                })
                .collect(),
        ),
    }
}

/// A connection's OffsetCommits, applied one after another in the order they were read, as a
/// Kafka coordinator handles one connection's requests, by a task of their own.
///
/// Commits waiting behind one being applied are merged into the next proposal (each partition
/// takes its latest offset, the proposal the latest stamp): the state is the one applying them
/// one by one would leave, and a client committing after every record (librdkafka pipelines
/// them) is kept up with. Applied one proposal each, a lane fell behind by thousands of
/// commits; the reader stopped at the connection's in-flight limit, and commits the client had
/// sent long before were read, and stamped, after the ones it sent again on a new connection.
///
/// After a commit fails retriably (the metadata leader died under it) the commits behind it
/// fail the same way, so the client retries them all, in order: applied, a later one would be
/// overwritten by the client's retry of the failed one. Clients give up such a connection
/// (librdkafka and Java mark the coordinator dead and reconnect), which ends the lane.
#[derive(Default)]
pub(in crate::kafka) struct CommitLane {
    queue: Option<mpsc::UnboundedSender<QueuedCommit>>,
    /// Set when the connection's reader ends: a commit the metadata leader has not taken by
    /// then is not sent again. The client resends what it had no answer to on its next
    /// connection, maybe to another agent, and this copy must not land after those.
    closed: Arc<AtomicBool>,
}

struct QueuedCommit {
    request: OffsetCommitRequest,
    stamp: CommitStamp,
    answer: oneshot::Sender<OffsetCommitResponse>,
}

/// Most commits merged into one proposal: bounds its size (a connection has at most
/// `CONNECTION_REQUESTS_IN_FLIGHT_MAX` requests queued anyway).
const COMMITS_MERGED_MAX: usize = 256;

impl CommitLane {
    /// Queues `request`, stamped in read order, behind the connection's earlier commits. The
    /// queue needs no bound of its own: each entry is one of the connection's in-flight requests.
    pub(in crate::kafka) fn submit(
        &mut self,
        agent: &Arc<Agent>,
        request: OffsetCommitRequest,
        stamp: CommitStamp,
    ) -> impl std::future::Future<Output = OffsetCommitResponse> + Send + 'static {
        let partitions = request_partitions(&request);
        let (answer, answered) = oneshot::channel();
        let queue = self.queue.get_or_insert_with(|| {
            let (queue, commits) = mpsc::unbounded_channel();
            tokio::spawn(run_lane(agent.clone(), commits, self.closed.clone()));
            queue
        });
        let _ = queue.send(QueuedCommit { request, stamp, answer });
        async move {
            // A lane that ended without answering (its task failed) is a coordinator fault.
            answered.await.unwrap_or_else(|_| {
                offset_commit_answer(partitions, Err(ResponseError::CoordinatorNotAvailable.code()))
            })
        }
    }
}

impl Drop for CommitLane {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Release);
    }
}

/// Errors after which the client sends the commit again: the commits behind it must fail too.
fn retried_by_client(code: i16) -> bool {
    [
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::RequestTimedOut,
    ]
    .iter()
    .any(|e| e.code() == code)
}

async fn run_lane(agent: Arc<Agent>, mut commits: mpsc::UnboundedReceiver<QueuedCommit>, closed: Arc<AtomicBool>) {
    let mut failed: Option<i16> = None;
    let mut held: Option<QueuedCommit> = None;
    loop {
        let first = match held.take() {
            Some(commit) => commit,
            None => match commits.recv().await {
                Some(commit) => commit,
                None => return,
            },
        };
        let mut batch = vec![first];
        while batch.len() < COMMITS_MERGED_MAX {
            match commits.try_recv() {
                Ok(next) if mergeable(&batch[0].request, &next.request) => batch.push(next),
                Ok(next) => {
                    held = Some(next);
                    break;
                }
                Err(_) => break,
            }
        }
        let outcome = match failed {
            Some(code) => Err(code),
            None => apply_merged(&agent, &batch, &closed).await,
        };
        if let Err(code) = outcome
            && retried_by_client(code)
        {
            failed = Some(code);
        }
        for commit in batch {
            let partitions = request_partitions(&commit.request);
            let codes = match &outcome {
                Err(code) => Err(*code),
                Ok(codes) => Ok(partitions
                    .iter()
                    .map(|key| codes.get(key).copied().unwrap_or(ResponseError::UnknownServerError.code()))
                    .collect()),
            };
            let _ = commit.answer.send(offset_commit_answer(partitions, codes));
        }
    }
}

/// Whether `next` may join a proposal started by `first`: the same member of the same group,
/// and no metadata the state machine would refuse (that commit's own error must be reported).
fn mergeable(first: &OffsetCommitRequest, next: &OffsetCommitRequest) -> bool {
    let small = |r: &OffsetCommitRequest| {
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.committed_metadata.as_ref().is_none_or(|m| m.len() <= floe_metadata::OFFSET_METADATA_BYTES_MAX))
    };
    first.group_id == next.group_id
        && first.generation_id_or_member_epoch == next.generation_id_or_member_epoch
        && first.member_id == next.member_id
        && first.group_instance_id == next.group_instance_id
        && small(first)
        && small(next)
}

/// A request's partitions, in request order.
fn request_partitions(request: &OffsetCommitRequest) -> Vec<(TopicName, i32)> {
    request.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.name.clone(), p.partition_index))).collect()
}

/// The offsets `requests` commit, in order, as one commit: each partition once (where it
/// first appears) with the offset of the last request naming it; with each one's key.
fn merged_offsets<'a>(
    requests: impl Iterator<Item = &'a OffsetCommitRequest>,
) -> (Vec<OffsetCommit>, Vec<(TopicName, i32)>) {
    let mut offsets: Vec<OffsetCommit> = Vec::new();
    let mut keys: Vec<(TopicName, i32)> = Vec::new();
    let mut position: std::collections::HashMap<(TopicName, i32), usize> = std::collections::HashMap::new();
    for request in requests {
        for topic in &request.topics {
            for p in &topic.partitions {
                let offset = OffsetCommit {
                    topic: topic.name.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref().map(ToString::to_string).unwrap_or_default(),
                };
                let key = (topic.name.clone(), p.partition_index);
                match position.get(&key) {
                    Some(&i) => offsets[i] = offset,
                    None => {
                        position.insert(key.clone(), offsets.len());
                        offsets.push(offset);
                        keys.push(key);
                    }
                }
            }
        }
    }
    (offsets, keys)
}

/// Applies `batch` as one commit: each partition's offset from the last request naming it,
/// under the last request's stamp. Answers a code per partition, or one code for all.
async fn apply_merged(
    agent: &Agent,
    batch: &[QueuedCommit],
    closed: &AtomicBool,
) -> Result<std::collections::HashMap<(TopicName, i32), i16>, i16> {
    let (offsets, keys) = merged_offsets(batch.iter().map(|c| &c.request));
    let (Some(first), Some(last)) = (batch.first(), batch.last()) else { return Ok(Default::default()) };
    if offsets.is_empty() {
        return Ok(Default::default());
    }
    let request = &first.request;
    let member = MemberRef {
        group_id: request.group_id.to_string(),
        generation: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id.clone()),
    };
    let stamp = last.stamp;
    let merged = match batch.len() {
        1 => "1",
        2..=16 => "2-16",
        _ => "17+",
    };
    crate::metrics::OFFSET_COMMIT_PROPOSALS.with_label_values(&[merged]).inc();
    // While the metadata leader changes the commit is sent again, under the same stamp (a first
    // copy that lands after all is then skipped), rather than failed: librdkafka resends a
    // failed commit after the commits sent behind it, and the older offset would win.
    let deadline = tokio::time::Instant::now() + CONFIRMED_READ_WAIT;
    loop {
        let request_copy = GroupRequest::CommitOffsets { member: member.clone(), offsets: offsets.clone(), stamp };
        let result = ask(agent, request_copy, |r| match r {
            GroupResponse::CommitOffsets(result) => Some(result),
            _ => None,
        })
        .await
        .and_then(|r| r);
        match &result {
            Ok(results) => return Ok(keys.into_iter().zip(results.iter().map(error_code)).collect()),
            Err(e) => {
                let code = for_group(e).code();
                let late = tokio::time::Instant::now() + CONFIRMED_READ_RETRY_PAUSE >= deadline;
                if !retried_by_client(code) || late || closed.load(Ordering::Acquire) {
                    return Err(code);
                }
                tracing::debug!(error = %e, "offset commit not applied yet; sending it again");
                tokio::time::sleep(CONFIRMED_READ_RETRY_PAUSE).await;
            }
        }
    }
}

/// The response for `partitions` (in request order): a code per partition, or one for all.
fn offset_commit_answer(partitions: Vec<(TopicName, i32)>, codes: Result<Vec<i16>, i16>) -> OffsetCommitResponse {
    let codes: Vec<i16> = match codes {
        Ok(codes) => codes,
        Err(code) => vec![code; partitions.len()],
    };
    let mut topics: Vec<OffsetCommitResponseTopic> = Vec::new();
    for ((name, partition), code) in partitions.into_iter().zip(codes) {
        let entry = OffsetCommitResponsePartition::default().with_partition_index(partition).with_error_code(code);
        match topics.last_mut() {
            Some(t) if t.name == name => t.partitions.push(entry),
            _ => topics.push(OffsetCommitResponseTopic::default().with_name(name).with_partitions(vec![entry])),
        }
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// One group's answer to OffsetFetch: its offsets by topic, or the error for the whole group.
type GroupOffsets = Result<Vec<(String, Vec<FetchedOffset>)>, ResponseError>;

/// How long OffsetFetch waits for a metadata leader that can confirm a read (an election, an
/// agent cut off for a moment) before answering COORDINATOR_LOAD_IN_PROGRESS: below the request
/// timeouts of Kafka clients (30 s in Java's).
const CONFIRMED_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(20);
const CONFIRMED_READ_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// Asks the coordinator on the metadata leader, never this agent's mirror: a mirror that
/// follows a lagging node (or was just copied from one after a restart) can hold an older
/// commit than the group's latest, and a consumer resuming there would process records again
/// and move the committed offset back. While no leader can confirm a read the request waits;
/// after [`CONFIRMED_READ_WAIT`] each group answers COORDINATOR_LOAD_IN_PROGRESS. Never a
/// partition-level error: librdkafka starts a partition whose OffsetFetch it cannot retry at
/// the offset in the answer, and -1 there means `auto.offset.reset`.
async fn fetch_offsets(
    agent: &Agent,
    groups: Vec<(String, AskedPartitions)>,
    require_stable: bool,
) -> Vec<GroupOffsets> {
    let deadline = tokio::time::Instant::now() + CONFIRMED_READ_WAIT;
    loop {
        let request = GroupRequest::FetchOffsets { groups: groups.clone(), require_stable };
        let fetched = ask(agent, request, |r| match r {
            GroupResponse::FetchOffsets(fetched) => Some(fetched),
            _ => None,
        })
        .await;
        let why = match fetched {
            Ok(fetched) if fetched.len() == groups.len() => return fetched.into_iter().map(Ok).collect(),
            Ok(_) => "the coordinator answered for other groups".to_owned(),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() + CONFIRMED_READ_RETRY_PAUSE >= deadline {
            tracing::warn!(why, "committed offsets not confirmed by a metadata leader in time");
            return groups.iter().map(|_| Err(ResponseError::CoordinatorLoadInProgress)).collect();
        }
        tracing::debug!(why, "committed offsets not confirmed by a metadata leader yet; asking again");
        tokio::time::sleep(CONFIRMED_READ_RETRY_PAUSE).await;
    }
}

fn fetched_error_code(f: &FetchedOffset) -> i16 {
    if f.unstable { ResponseError::UnstableOffsetCommit.code() } else { 0 }
}

pub(in crate::kafka) async fn offset_fetch(
    agent: &Agent,
    version: i16,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let asked = |topics: Option<Vec<(TopicName, Vec<i32>)>>| {
        topics.map(|ts| ts.into_iter().map(|(name, partitions)| (name.to_string(), partitions)).collect())
    };
    if version < 8 {
        let topics = request.topics.map(|ts| ts.into_iter().map(|t| (t.name, t.partition_indexes)).collect());
        let groups = vec![(request.group_id.to_string(), asked(topics))];
        let answer = fetch_offsets(agent, groups, request.require_stable).await.pop();
        let (topics, error) = match answer {
            Some(Ok(topics)) => (topics, None),
            Some(Err(e)) => (Vec::new(), Some(e)),
            None => (Vec::new(), Some(ResponseError::CoordinatorLoadInProgress)),
        };
        let topics = topics
            .into_iter()
            .map(|(name, fetched)| {
                let partitions = fetched
                    .into_iter()
                    .map(|f| {
                        let entry = OffsetFetchResponsePartition::default()
                            .with_partition_index(f.partition)
                            .with_error_code(fetched_error_code(&f))
                            .with_committed_offset(f.offset)
                            .with_metadata(Some(str_bytes(f.metadata)));
                        if version >= 5 { entry.with_committed_leader_epoch(f.leader_epoch) } else { entry }
                    })
                    .collect();
                OffsetFetchResponseTopic::default().with_name(TopicName(str_bytes(name))).with_partitions(partitions)
            })
            .collect();
        let response = OffsetFetchResponse::default().with_topics(topics);
        // v0–1 have no top-level error: their clients always name the partitions, so they see
        // the per-partition answer.
        return match error {
            Some(e) if version >= 2 => response.with_error_code(e.code()),
            _ => response,
        };
    }
    let ids: Vec<GroupId> = request.groups.iter().map(|g| g.group_id.clone()).collect();
    let groups = request
        .groups
        .into_iter()
        .map(|g| {
            let topics = g.topics.map(|ts| ts.into_iter().map(|t| (t.name, t.partition_indexes)).collect());
            (g.group_id.to_string(), asked(topics))
        })
        .collect();
    let answers = fetch_offsets(agent, groups, request.require_stable).await;
    let groups = ids
        .into_iter()
        .zip(answers)
        .map(|(group_id, answer)| {
            let group = OffsetFetchResponseGroup::default().with_group_id(group_id);
            let topics = match answer {
                Ok(topics) => topics,
                Err(e) => return group.with_error_code(e.code()),
            };
            let topics = topics
                .into_iter()
                .map(|(name, fetched)| {
                    let partitions = fetched
                        .into_iter()
                        .map(|f| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(f.partition)
                                .with_error_code(fetched_error_code(&f))
                                .with_committed_offset(f.offset)
                                .with_committed_leader_epoch(f.leader_epoch)
                                .with_metadata(Some(str_bytes(f.metadata)))
                        })
                        .collect();
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(str_bytes(name)))
                        .with_partitions(partitions)
                })
                .collect();
            group.with_topics(topics)
        })
        .collect();
    OffsetFetchResponse::default().with_groups(groups)
}

pub(in crate::kafka) async fn list(agent: &Agent, version: i16, request: ListGroupsRequest) -> ListGroupsResponse {
    let states = request.states_filter.iter().map(ToString::to_string).collect();
    let types = request.types_filter.iter().map(ToString::to_string).collect();
    let result = ask(agent, GroupRequest::List { states, types }, |r| match r {
        GroupResponse::List(groups) => Some(groups),
        _ => None,
    })
    .await;
    match result {
        Err(e) => ListGroupsResponse::default().with_error_code(for_group(&e).code()),
        Ok(groups) => ListGroupsResponse::default().with_groups(
            groups
                .into_iter()
                .map(|g| {
                    let listed = ListedGroup::default()
                        .with_group_id(GroupId(str_bytes(g.group_id)))
                        .with_protocol_type(str_bytes(g.protocol_type));
                    let listed = if version >= 4 { listed.with_group_state(str_bytes(g.state)) } else { listed };
                    if version >= 5 { listed.with_group_type(str_bytes(g.group_type)) } else { listed }
                })
                .collect(),
        ),
    }
}

pub(in crate::kafka) async fn describe(agent: &Agent, request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let ids: Vec<String> = request.groups.iter().map(|g| g.to_string()).collect();
    let result = ask(agent, GroupRequest::Describe(ids.clone()), |r| match r {
        GroupResponse::Describe(groups) => Some(groups),
        _ => None,
    })
    .await;
    let groups = match result {
        Err(e) => ids
            .into_iter()
            .map(|id| {
                DescribedGroup::default().with_group_id(GroupId(str_bytes(id))).with_error_code(for_group(&e).code())
            })
            .collect(),
        Ok(groups) => groups
            .into_iter()
            .map(|g| match g {
                Err((id, e)) => DescribedGroup::default()
                    .with_group_id(GroupId(str_bytes(id)))
                    .with_error_code(for_group(&e).code()),
                Ok(g) => DescribedGroup::default()
                    .with_group_id(GroupId(str_bytes(g.group_id)))
                    .with_group_state(str_bytes(g.state))
                    .with_protocol_type(str_bytes(g.protocol_type))
                    .with_protocol_data(str_bytes(g.protocol))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(str_bytes(m.member_id))
                                    .with_group_instance_id(m.instance_id.map(str_bytes))
                                    .with_client_id(str_bytes(m.client_id))
                                    .with_client_host(str_bytes(m.client_host))
                                    .with_member_metadata(m.metadata.into())
                                    .with_member_assignment(m.assignment.into())
                            })
                            .collect(),
                    ),
            })
            .collect(),
    };
    DescribeGroupsResponse::default().with_groups(groups)
}

pub(in crate::kafka) async fn delete(agent: &Agent, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let ids: Vec<String> = request.groups_names.iter().map(|g| g.to_string()).collect();
    let result = ask(agent, GroupRequest::Delete(ids.clone()), |r| match r {
        GroupResponse::Delete(results) => Some(results),
        _ => None,
    })
    .await;
    let results: Vec<(String, Result<(), GroupError>)> = match result {
        Ok(results) => results,
        Err(e) => ids.into_iter().map(|id| (id, Err(e.clone()))).collect(),
    };
    DeleteGroupsResponse::default().with_results(
        results
            .into_iter()
            .map(|(id, r)| {
                DeletableGroupResult::default().with_group_id(GroupId(str_bytes(id))).with_error_code(error_code(&r))
            })
            .collect(),
    )
}

pub(in crate::kafka) async fn offset_delete(agent: &Agent, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let order: Vec<(TopicName, i32)> =
        request.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition_index))).collect();
    let partitions = order.iter().map(|(t, p)| (t.to_string(), *p)).collect();
    let group_id = request.group_id.to_string();
    let result = ask(agent, GroupRequest::DeleteOffsets { group_id, partitions }, |r| match r {
        GroupResponse::DeleteOffsets(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    let results = match result {
        Err(e) => return OffsetDeleteResponse::default().with_error_code(for_group(&e).code()),
        Ok(results) => results,
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
    for ((name, partition), r) in order.into_iter().zip(results) {
        let entry =
            OffsetDeleteResponsePartition::default().with_partition_index(partition).with_error_code(error_code(&r));
        match topics.last_mut() {
            Some(t) if t.name == name => t.partitions.push(entry),
            _ => topics.push(OffsetDeleteResponseTopic::default().with_name(name).with_partitions(vec![entry])),
        }
    }
    OffsetDeleteResponse::default().with_topics(topics)
}

pub(in crate::kafka) async fn consumer_heartbeat(
    agent: &Agent,
    request: ConsumerGroupHeartbeatRequest,
    client: Client,
) -> ConsumerGroupHeartbeatResponse {
    let heartbeat = ConsumerHeartbeat {
        group_id: request.group_id.to_string(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: opt(request.instance_id),
        rack_id: opt(request.rack_id),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topics: request.subscribed_topic_names.map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        subscribed_regex: opt(request.subscribed_topic_regex),
        server_assignor: opt(request.server_assignor),
        owned: request.topic_partitions.map(|ts| ts.into_iter().map(|t| (t.topic_id, t.partitions)).collect()),
        client_id: client.client_id,
        client_host: client.host,
    };
    tracing::debug!(?heartbeat, "consumer group heartbeat");
    let result = ask(agent, GroupRequest::ConsumerHeartbeat(heartbeat), |r| match r {
        GroupResponse::ConsumerHeartbeat(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    tracing::debug!(?result, "consumer group heartbeat answered");
    match result {
        Err(e) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(for_group(&e).code())
            .with_error_message(Some(str_bytes(e.to_string()))),
        Ok(answer) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
            .with_assignment(answer.assignment.map(|partitions| {
                HeartbeatAssignment::default().with_topic_partitions(
                    partitions
                        .into_iter()
                        .map(|(topic_id, partitions)| {
                            HeartbeatTopicPartitions::default().with_topic_id(topic_id).with_partitions(partitions)
                        })
                        .collect(),
                )
            })),
    }
}

pub(in crate::kafka) async fn consumer_describe(
    agent: &Agent,
    version: i16,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let ids: Vec<String> = request.group_ids.iter().map(|g| g.to_string()).collect();
    let result = ask(agent, GroupRequest::ConsumerDescribe(ids.clone()), |r| match r {
        GroupResponse::ConsumerDescribe(groups) => Some(groups),
        _ => None,
    })
    .await;
    let described: Vec<Result<_, (String, GroupError)>> = match result {
        Ok(groups) => groups,
        Err(e) => ids.into_iter().map(|id| Err((id, e.clone()))).collect(),
    };
    let assignment = |partitions: Vec<(uuid::Uuid, String, Vec<i32>)>| {
        DescribeAssignment::default().with_topic_partitions(
            partitions
                .into_iter()
                .map(|(id, name, ps)| {
                    DescribeTopicPartitions::default()
                        .with_topic_id(id)
                        .with_topic_name(TopicName(str_bytes(name)))
                        .with_partitions(ps)
                })
                .collect(),
        )
    };
    let groups = described
        .into_iter()
        .map(|g| match g {
            Err((id, e)) => ConsumerDescribedGroup::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_error_code(for_group(&e).code())
                .with_error_message(Some(str_bytes(e.to_string()))),
            Ok(g) => ConsumerDescribedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id)))
                .with_group_state(str_bytes(g.state))
                .with_group_epoch(g.epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(str_bytes(g.assignor))
                .with_members(
                    g.members
                        .into_iter()
                        .map(|m| {
                            let member = ConsumerDescribedMember::default()
                                .with_member_id(str_bytes(m.member_id))
                                .with_instance_id(m.instance_id.map(str_bytes))
                                .with_rack_id(m.rack_id.map(str_bytes))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(str_bytes(m.client_id))
                                .with_client_host(str_bytes(m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topics.into_iter().map(|t| TopicName(str_bytes(t))).collect(),
                                )
                                .with_assignment(assignment(m.assignment))
                                .with_target_assignment(assignment(m.target_assignment));
                            // KIP-1099 member type: 1 = consumer protocol.
                            if version >= 1 { member.with_member_type(1) } else { member }
                        })
                        .collect(),
                ),
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

impl KafkaApi for FindCoordinatorRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        let response = find_coordinator(cx.agent, cx.version(), self, cx.client_id());
        Reply::Now(Box::new(ResponseKind::FindCoordinator(response)))
    }
}

impl Resources for FindCoordinatorRequest {
    fn walk(&mut self, version: i16, walk: &mut Walk<'_>) -> Result<(), FindCoordinatorResponse> {
        let resource_type = if self.key_type == KEY_TYPE_TRANSACTION { Res::TransactionalId } else { Res::Group };
        // A key only picks an agent: checked, never scoped.
        if version < 4 {
            walk.key(Op::Describe, resource_type, &self.key).map_err(|refusal| {
                let answer = FindCoordinatorResponse::default().with_error_code(refusal.error);
                answer.with_node_id(BrokerId(-1)).with_port(-1)
            })
        } else {
            walk.keys(&mut self.coordinator_keys, Op::Describe, resource_type, |k| k);
            Ok(())
        }
    }

    fn walk_answer(_response: &mut FindCoordinatorResponse, _walk: &AnswerWalk<'_>) {}

    fn answer_refused(response: &mut FindCoordinatorResponse, refused: Refused) {
        response.coordinators.extend(refused.names.into_iter().map(|n| {
            Coordinator::default().with_key(n.name).with_node_id(BrokerId(-1)).with_port(-1).with_error_code(n.error)
        }));
    }
}

impl KafkaApi for JoinGroupRequest {
    const VERSIONS: (i16, i16) = (0, 9);

    async fn start(self, cx: Context<'_>) -> Reply {
        let client = cx.client();
        cx.later(
            move |agent, version| async move { ResponseKind::JoinGroup(join(&agent, version, self, client).await) },
        )
    }
}

impl Resources for JoinGroupRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), JoinGroupResponse> {
        let refused = |refusal: Refusal| JoinGroupResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut JoinGroupResponse, _walk: &AnswerWalk<'_>) {}
}

impl KafkaApi for SyncGroupRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move { ResponseKind::SyncGroup(sync(&agent, version, self).await) })
    }
}

impl Resources for SyncGroupRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), SyncGroupResponse> {
        let refused = |refusal: Refusal| SyncGroupResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut SyncGroupResponse, _walk: &AnswerWalk<'_>) {}
}

impl KafkaApi for HeartbeatRequest {
    const VERSIONS: (i16, i16) = (0, 4);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::Heartbeat(heartbeat(&agent, self).await) })
    }
}

impl Resources for HeartbeatRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), HeartbeatResponse> {
        let refused = |refusal: Refusal| HeartbeatResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut HeartbeatResponse, _walk: &AnswerWalk<'_>) {}
}

impl KafkaApi for LeaveGroupRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move { ResponseKind::LeaveGroup(leave(&agent, version, self).await) })
    }
}

impl Resources for LeaveGroupRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), LeaveGroupResponse> {
        let refused = |refusal: Refusal| LeaveGroupResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut LeaveGroupResponse, _walk: &AnswerWalk<'_>) {}
}

fn offset_commit_refusals(topics: impl Iterator<Item = RefusedTopic>, error: i16) -> Vec<OffsetCommitResponseTopic> {
    topics
        .map(|t| {
            let partitions = t.partitions.into_iter();
            OffsetCommitResponseTopic::default().with_name(TopicName(t.name)).with_topic_id(t.id).with_partitions(
                partitions
                    .map(|p| OffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(error))
                    .collect(),
            )
        })
        .collect()
}

impl KafkaApi for OffsetCommitRequest {
    const VERSIONS: (i16, i16) = (2, 9);

    async fn start(self, cx: Context<'_>) -> Reply {
        // Stamped here, in request order: the handler tasks may start in any order (tokio runs
        // the newest spawned task first), and the state machine skips a commit whose stamp is
        // older than one it applied.
        let answer = cx.lane.submit(cx.agent, self, next_commit_stamp());
        cx.later(move |_, _| async move { ResponseKind::OffsetCommit(answer.await) })
    }
}

impl Resources for OffsetCommitRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), OffsetCommitResponse> {
        if let Err(refusal) = walk.one(Op::Read, Res::Group, &mut self.group_id.0) {
            let topics = self.topics.iter().map(|t| RefusedTopic {
                name: t.name.0.clone(),
                id: t.topic_id,
                partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
                within: None,
            });
            return Err(OffsetCommitResponse::default().with_topics(offset_commit_refusals(topics, refusal.error)));
        }
        walk.topics(
            &mut self.topics,
            Op::Read,
            |t| TopicRef::with_id(&mut t.name.0, &mut t.topic_id),
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut OffsetCommitResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut OffsetCommitResponse, refused: Refused) {
        let topics = offset_commit_refusals(refused.topics.into_iter(), code::TOPIC_AUTHORIZATION_FAILED);
        response.topics.extend(topics);
    }
}

impl KafkaApi for OffsetFetchRequest {
    const VERSIONS: (i16, i16) = (1, 9);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(
            move |agent, version| async move { ResponseKind::OffsetFetch(offset_fetch(&agent, version, self).await) },
        )
    }
}

impl Resources for OffsetFetchRequest {
    fn walk(&mut self, version: i16, walk: &mut Walk<'_>) -> Result<(), OffsetFetchResponse> {
        use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestTopic, OffsetFetchRequestTopics};
        if version < 8 {
            let refused = |refusal: Refusal| OffsetFetchResponse::default().with_error_code(refusal.error);
            walk.one(Op::Describe, Res::Group, &mut self.group_id.0).map_err(refused)?;
            match self.topics.as_mut() {
                None => walk.listing(),
                Some(topics) => walk.topics(
                    topics,
                    Op::Describe,
                    |t: &mut OffsetFetchRequestTopic| TopicRef::name(&mut t.name.0),
                    |t| t.partition_indexes.clone(),
                ),
            }
            return Ok(());
        }
        walk.names(&mut self.groups, Op::Describe, Res::Group, |g| &mut g.group_id.0);
        for group in &mut self.groups {
            match group.topics.as_mut() {
                None => walk.listing(),
                Some(topics) => walk.within(group.group_id.0.clone(), |walk| {
                    walk.topics(
                        topics,
                        Op::Describe,
                        |t: &mut OffsetFetchRequestTopics| TopicRef::name(&mut t.name.0),
                        |t| t.partition_indexes.clone(),
                    )
                }),
            }
        }
        Ok(())
    }

    fn walk_answer(response: &mut OffsetFetchResponse, walk: &AnswerWalk<'_>) {
        walk.described(&mut response.topics, Res::Topic, |t| &mut t.name.0);
        for group in &mut response.groups {
            walk.name(&mut group.group_id.0);
            walk.described(&mut group.topics, Res::Topic, |t| &mut t.name.0);
        }
    }

    fn answer_refused(response: &mut OffsetFetchResponse, refused: Refused) {
        const TOPIC: i16 = code::TOPIC_AUTHORIZATION_FAILED;
        let groups = refused.names.into_iter();
        response.groups.extend(
            groups.map(|n| OffsetFetchResponseGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
        for t in refused.topics {
            match t.within {
                Some(group) => {
                    let partition = |p| {
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(p)
                            .with_committed_offset(-1)
                            .with_error_code(TOPIC)
                    };
                    let answer = OffsetFetchResponseTopics::default()
                        .with_name(TopicName(t.name))
                        .with_partitions(t.partitions.into_iter().map(partition).collect());
                    if let Some(g) = response.groups.iter_mut().find(|g| g.group_id.0 == group) {
                        g.topics.push(answer);
                    }
                }
                None => {
                    let partition = |p| {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(-1)
                            .with_error_code(TOPIC)
                    };
                    let answer = OffsetFetchResponseTopic::default()
                        .with_name(TopicName(t.name))
                        .with_partitions(t.partitions.into_iter().map(partition).collect());
                    response.topics.push(answer);
                }
            }
        }
    }
}

impl KafkaApi for ListGroupsRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move { ResponseKind::ListGroups(list(&agent, version, self).await) })
    }
}

impl Resources for ListGroupsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ListGroupsResponse> {
        if walk.cluster(Op::Describe).is_err() {
            walk.listing();
        }
        Ok(())
    }

    fn walk_answer(response: &mut ListGroupsResponse, walk: &AnswerWalk<'_>) {
        walk.listed(&mut response.groups, Res::Group, |g| Some(&mut g.group_id.0));
    }
}

impl KafkaApi for DescribeGroupsRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DescribeGroups(describe(&agent, self).await) })
    }
}

impl Resources for DescribeGroupsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DescribeGroupsResponse> {
        walk.names(&mut self.groups, Op::Describe, Res::Group, |g| &mut g.0);
        Ok(())
    }

    fn walk_answer(response: &mut DescribeGroupsResponse, walk: &AnswerWalk<'_>) {
        for group in &mut response.groups {
            walk.name(&mut group.group_id.0);
            if let Some(ns) = walk.namespace()
                && group.protocol_type.as_str() == "consumer"
            {
                group.members.iter_mut().for_each(|m| unscope_consumer_protocol(ns, m));
            }
        }
    }

    fn answer_refused(response: &mut DescribeGroupsResponse, refused: Refused) {
        response.groups.extend(
            refused
                .names
                .into_iter()
                .map(|n| DescribedGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
    }
}

/// A KIP-848 group described through DescribeGroups carries the subscription and assignment the
/// coordinator encoded, with stored topic names; a classic member's are its client's own bytes
/// (names as the client knows them, and possibly user data), left as they are.
fn unscope_consumer_protocol(ns: &floe_metadata::Namespace, member: &mut DescribedGroupMember) {
    use floe_metadata::groups::{assigned_partitions, encode_assignment, encode_subscription, subscribed_topics};
    let topics = subscribed_topics(&member.member_metadata);
    if topics.iter().any(|t| ns.owns(t)) {
        let shown: Vec<String> = topics.iter().map(|t| ns.unscope(t).unwrap_or(t).to_owned()).collect();
        member.member_metadata = encode_subscription(&shown).into();
    }
    let assigned = assigned_partitions(&member.member_assignment);
    if assigned.iter().any(|(t, _)| ns.owns(t)) {
        let shown: Vec<(String, Vec<i32>)> =
            assigned.into_iter().map(|(t, p)| (ns.unscope(&t).unwrap_or(&t).to_owned(), p)).collect();
        member.member_assignment = encode_assignment(&shown).into();
    }
}

impl KafkaApi for DeleteGroupsRequest {
    const VERSIONS: (i16, i16) = (0, 2);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DeleteGroups(delete(&agent, self).await) })
    }
}

impl Resources for DeleteGroupsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DeleteGroupsResponse> {
        walk.names(&mut self.groups_names, Op::Delete, Res::Group, |g| &mut g.0);
        Ok(())
    }

    fn walk_answer(response: &mut DeleteGroupsResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.results, |g| &mut g.group_id.0);
    }

    fn answer_refused(response: &mut DeleteGroupsResponse, refused: Refused) {
        response.results.extend(
            refused
                .names
                .into_iter()
                .map(|n| DeletableGroupResult::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
    }
}

impl KafkaApi for OffsetDeleteRequest {
    const VERSIONS: (i16, i16) = (0, 0);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::OffsetDelete(offset_delete(&agent, self).await) })
    }
}

impl Resources for OffsetDeleteRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), OffsetDeleteResponse> {
        let refused = |refusal: Refusal| OffsetDeleteResponse::default().with_error_code(refusal.error);
        walk.one(Op::Delete, Res::Group, &mut self.group_id.0).map_err(refused)?;
        walk.topics(
            &mut self.topics,
            Op::Read,
            |t| TopicRef::name(&mut t.name.0),
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut OffsetDeleteResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut OffsetDeleteResponse, refused: Refused) {
        response.topics.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
            };
            OffsetDeleteResponseTopic::default()
                .with_name(TopicName(t.name))
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}

impl KafkaApi for ConsumerGroupHeartbeatRequest {
    const VERSIONS: (i16, i16) = (0, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        let client = cx.client();
        cx.later(move |agent, _| async move {
            ResponseKind::ConsumerGroupHeartbeat(consumer_heartbeat(&agent, self, client).await)
        })
    }
}

impl Resources for ConsumerGroupHeartbeatRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ConsumerGroupHeartbeatResponse> {
        let refused = |refusal: Refusal| ConsumerGroupHeartbeatResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)?;
        for topic in self.subscribed_topic_names.iter_mut().flatten() {
            walk.one(Op::Describe, Res::Topic, &mut topic.0).map_err(refused)?;
        }
        for owned in self.topic_partitions.iter_mut().flatten() {
            walk.mention(TopicRef { name: None, id: Some(&mut owned.topic_id) });
        }
        Ok(())
    }

    fn walk_answer(_response: &mut ConsumerGroupHeartbeatResponse, _walk: &AnswerWalk<'_>) {}
}

impl KafkaApi for ConsumerGroupDescribeRequest {
    const VERSIONS: (i16, i16) = (0, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move {
            ResponseKind::ConsumerGroupDescribe(consumer_describe(&agent, version, self).await)
        })
    }
}

impl Resources for ConsumerGroupDescribeRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ConsumerGroupDescribeResponse> {
        walk.names(&mut self.group_ids, Op::Describe, Res::Group, |g| &mut g.0);
        Ok(())
    }

    fn walk_answer(response: &mut ConsumerGroupDescribeResponse, walk: &AnswerWalk<'_>) {
        for group in &mut response.groups {
            walk.name(&mut group.group_id.0);
            for member in &mut group.members {
                walk.names(&mut member.subscribed_topic_names, |t| &mut t.0);
                walk.names(&mut member.assignment.topic_partitions, |t| &mut t.topic_name.0);
                walk.names(&mut member.target_assignment.topic_partitions, |t| &mut t.topic_name.0);
            }
        }
    }

    fn answer_refused(response: &mut ConsumerGroupDescribeResponse, refused: Refused) {
        response.groups.extend(
            refused
                .names
                .into_iter()
                .map(|n| ConsumerDescribedGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};

    use super::*;

    fn commit(member: &str, offsets: &[(&str, i32, i64)]) -> OffsetCommitRequest {
        let mut request = OffsetCommitRequest::default()
            .with_group_id(GroupId(str_bytes("g".to_owned())))
            .with_member_id(str_bytes(member.to_owned()));
        for (topic, partition, offset) in offsets {
            let p =
                OffsetCommitRequestPartition::default().with_partition_index(*partition).with_committed_offset(*offset);
            match request.topics.last_mut() {
                Some(t) if &*t.name.0 == *topic => t.partitions.push(p),
                _ => request.topics.push(
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(str_bytes((*topic).to_owned())))
                        .with_partitions(vec![p]),
                ),
            }
        }
        request
    }

    #[test]
    fn merged_commits_leave_each_partition_at_its_last_offset() {
        let requests =
            [commit("m", &[("a", 0, 5), ("a", 1, 7)]), commit("m", &[("a", 0, 6)]), commit("m", &[("b", 0, 1)])];
        let (offsets, keys) = merged_offsets(requests.iter());
        let got: Vec<_> = offsets.iter().map(|o| (o.topic.as_str(), o.partition, o.offset)).collect();
        assert_eq!(got, [("a", 0, 6), ("a", 1, 7), ("b", 0, 1)]);
        assert_eq!(keys.len(), 3);
    }

    #[test]
    fn only_one_members_commits_with_small_metadata_are_merged() {
        let first = commit("m", &[("a", 0, 1)]);
        assert!(mergeable(&first, &commit("m", &[("a", 1, 1)])));
        assert!(!mergeable(&first, &commit("other", &[("a", 0, 2)])));
        let mut large = commit("m", &[("a", 0, 2)]);
        large.topics[0].partitions[0].committed_metadata =
            Some(str_bytes("x".repeat(floe_metadata::OFFSET_METADATA_BYTES_MAX + 1)));
        assert!(!mergeable(&first, &large), "its own OFFSET_METADATA_TOO_LARGE must reach it");
    }
}
