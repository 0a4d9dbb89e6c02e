//! Consumer group APIs: FindCoordinator names this agent; the coordination requests are
//! forwarded to the group coordinator on the metadata leader, and so is OffsetFetch, which the
//! leader answers with a linearizable read.

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
use tokio::sync::oneshot;

use super::super::error_code::for_group;
use super::str_bytes;
use crate::Agent;

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
        crate::membership::for_client_zone(crate::membership::live_agents(&agent.metadata.read(), &this), client_id);
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
/// Kafka coordinator handles one connection's requests. Were they applied concurrently, a
/// commit that failed retriably (the metadata leader died under it) would be retried by the
/// client after later commits had succeeded, and move the offset back; here the commits read
/// after a failed one fail the same way, so the client retries them all, in order.
#[derive(Default)]
pub(in crate::kafka) struct CommitLane {
    previous: Option<oneshot::Receiver<Option<i16>>>,
}

/// A commit's place in its connection's [`CommitLane`]: the commit before it, and where to
/// report its own outcome (the retriable error it failed with, if any).
pub(in crate::kafka) struct LanePlace {
    after: Option<oneshot::Receiver<Option<i16>>>,
    done: oneshot::Sender<Option<i16>>,
}

impl CommitLane {
    pub(in crate::kafka) fn next(&mut self) -> LanePlace {
        let (done, outcome) = oneshot::channel();
        LanePlace { after: self.previous.replace(outcome), done }
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

/// `stamp` orders this commit after every commit read before it on this agent; `place` is its
/// turn on its connection.
pub(in crate::kafka) async fn offset_commit(
    agent: &Agent,
    request: OffsetCommitRequest,
    stamp: CommitStamp,
    place: LanePlace,
) -> OffsetCommitResponse {
    // A sender dropped without an answer (its task failed) blocks nothing.
    let failed_before = match place.after {
        Some(previous) => previous.await.ok().flatten(),
        None => None,
    };
    let response = match failed_before {
        Some(code) => offset_commit_answer(&request, Err(code)),
        None => offset_commit_applied(agent, &request, stamp).await,
    };
    let failed =
        response.topics.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).find(|code| retried_by_client(*code));
    let _ = place.done.send(failed);
    response
}

async fn offset_commit_applied(
    agent: &Agent,
    request: &OffsetCommitRequest,
    stamp: CommitStamp,
) -> OffsetCommitResponse {
    let mut offsets = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            offsets.push(OffsetCommit {
                topic: topic.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(ToString::to_string).unwrap_or_default(),
            });
        }
    }
    let member = MemberRef {
        group_id: request.group_id.to_string(),
        generation: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id.clone()),
    };
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
            Ok(results) => return offset_commit_answer(request, Ok(results.iter().map(error_code).collect())),
            Err(e) => {
                let code = for_group(e).code();
                if !retried_by_client(code) || tokio::time::Instant::now() + CONFIRMED_READ_RETRY_PAUSE >= deadline {
                    return offset_commit_answer(request, Err(code));
                }
                tracing::debug!(error = %e, "offset commit not applied yet; sending it again");
                tokio::time::sleep(CONFIRMED_READ_RETRY_PAUSE).await;
            }
        }
    }
}

/// The response to `request`: a code per partition, in request order, or one code for all.
fn offset_commit_answer(request: &OffsetCommitRequest, codes: Result<Vec<i16>, i16>) -> OffsetCommitResponse {
    let partitions = request.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (&t.name, p.partition_index)));
    let codes: Vec<i16> = match codes {
        Ok(codes) => codes,
        Err(code) => vec![code; partitions.clone().count()],
    };
    let mut topics: Vec<OffsetCommitResponseTopic> = Vec::new();
    for ((name, partition), code) in partitions.zip(codes) {
        let entry = OffsetCommitResponsePartition::default().with_partition_index(partition).with_error_code(code);
        match topics.last_mut() {
            Some(t) if &t.name == name => t.partitions.push(entry),
            _ => topics.push(OffsetCommitResponseTopic::default().with_name(name.clone()).with_partitions(vec![entry])),
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
