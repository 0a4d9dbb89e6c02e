//! The coordinator on a one-node metadata cluster: joins, rebalances, sessions, commits.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::node::{MetadataNode, MetadataNodeConfig};
use crate::state::stored::OffsetCommit;

async fn node() -> (MetadataNode, std::path::PathBuf) {
    node_with(crate::clock::Clock::system()).await
}

async fn node_with(clock: crate::clock::Clock) -> (MetadataNode, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("floe-groups-{}", uuid::Uuid::new_v4().simple()));
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let node = start(&dir, format!("127.0.0.1:{port}"), clock).await;
    // Short sessions and no initial delay keep the test quick.
    let configs: BTreeMap<String, String> =
        [("group.min.session.timeout.ms", "100"), ("group.initial.rebalance.delay.ms", "0")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    node.propose(crate::Command::SetBrokerConfigs { configs }).await.expect("configs");
    let topic = crate::Command::CreateTopic {
        name: "t".into(),
        topic_id: uuid::Uuid::new_v4(),
        partition_count: 2,
        configs: BTreeMap::new(),
    };
    node.propose(topic).await.expect("topic");
    (node, dir)
}

/// Starts the one-node cluster kept in `dir` (again, if it ran before), listening on `addr`.
async fn start(dir: &std::path::Path, addr: String, clock: crate::clock::Clock) -> MetadataNode {
    let node = MetadataNode::start(MetadataNodeConfig {
        node_id: 1,
        listen_addr: addr.clone(),
        data_dir: dir.to_path_buf(),
        peers: [(1, addr)].into_iter().collect(),
        join: false,
        clock,
    })
    .await
    .expect("node starts");
    node.wait_for_leader(Duration::from_secs(10)).await.expect("leader");
    node.ensure_initialized().await.expect("init");
    node
}

/// Stops `node` and starts it again from its files: a leader of a new term with no live
/// groups, as a restart of `floe dev` or a failover leaves the coordinator.
async fn restart(node: MetadataNode, dir: &std::path::Path, clock: crate::clock::Clock) -> MetadataNode {
    let addr = node.status().members.get(&1).cloned().expect("the node's address");
    node.shutdown().await;
    drop(node);
    start(dir, addr, clock).await
}

fn join(member_id: &str, session_ms: i32) -> GroupRequest {
    GroupRequest::Join(JoinRequest {
        group_id: "g".into(),
        session_timeout_ms: session_ms,
        rebalance_timeout_ms: 2_000,
        member_id: member_id.into(),
        instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), b"sub".to_vec())],
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        require_known_member: true,
    })
}

async fn call(node: &MetadataNode, request: GroupRequest) -> GroupResponse {
    node.group_request(request).await.expect("coordinator answers").0
}

/// Joins with the MEMBER_ID_REQUIRED round trip and returns the join answer.
async fn join_new(node: &MetadataNode, session_ms: i32) -> JoinResponse {
    let GroupResponse::Join(Err((GroupError::MemberIdRequired, first))) = call(node, join("", session_ms)).await else {
        panic!("a new member first gets MEMBER_ID_REQUIRED")
    };
    match call(node, join(&first.member_id, session_ms)).await {
        GroupResponse::Join(Ok(joined)) => joined,
        other => panic!("join failed: {other:?}"),
    }
}

fn heartbeat(generation: i32, member_id: &str) -> GroupRequest {
    GroupRequest::Heartbeat(MemberRef {
        group_id: "g".into(),
        generation,
        member_id: member_id.into(),
        instance_id: None,
    })
}

/// Heartbeats (as a live member does) until the coordinator answers `wanted`, for up to 10 s.
async fn heartbeat_until(node: &MetadataNode, generation: i32, member_id: &str, wanted: GroupError) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match call(node, heartbeat(generation, member_id)).await {
            GroupResponse::Heartbeat(Err(e)) if e == wanted => return,
            GroupResponse::Heartbeat(Ok(())) if std::time::Instant::now() < deadline => {}
            other => panic!("waiting for {wanted:?}, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_joins_are_refused_before_anything_is_held() {
    let (node, dir) = node().await;
    let mut many = match join("", 60_000) {
        GroupRequest::Join(j) => j,
        _ => unreachable!("join builds a Join"),
    };
    many.protocols = (0..65).map(|i| (format!("p{i}"), Vec::new())).collect();
    assert!(matches!(
        call(&node, GroupRequest::Join(many.clone())).await,
        GroupResponse::Join(Err((GroupError::InvalidRequest(_), _)))
    ));
    many.protocols = vec![("range".into(), vec![0; crate::limits::GROUP_MEMBER_BYTES_MAX])];
    assert!(matches!(
        call(&node, GroupRequest::Join(many)).await,
        GroupResponse::Join(Err((GroupError::InvalidRequest(_), _)))
    ));
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_sync_heartbeat_and_rebalance_when_one_expires() {
    let (node, dir) = node().await;
    let first = join_new(&node, 60_000).await;
    assert_eq!(first.generation, 1);
    assert_eq!(first.leader, first.member_id, "the only member leads");
    assert_eq!(first.members.len(), 1);
    let sync = GroupRequest::Sync(SyncRequest {
        group_id: "g".into(),
        generation: 1,
        member_id: first.member_id.clone(),
        instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol: Some("range".into()),
        assignments: vec![(first.member_id.clone(), b"all".to_vec())],
    });
    assert!(
        matches!(call(&node, sync).await, GroupResponse::Sync(Ok(SyncResponse { ref assignment, .. })) if assignment == b"all")
    );
    assert_eq!(call(&node, heartbeat(1, &first.member_id)).await, GroupResponse::Heartbeat(Ok(())));
    assert_eq!(
        call(&node, heartbeat(0, &first.member_id)).await,
        GroupResponse::Heartbeat(Err(GroupError::IllegalGeneration))
    );
    assert_eq!(call(&node, heartbeat(1, "nobody")).await, GroupResponse::Heartbeat(Err(GroupError::UnknownMemberId)));

    // A second member with a short session joins: the first is told to rejoin, both get gen 2.
    let second = tokio::spawn({
        let node = node.clone();
        async move { join_new(&node, 300).await }
    });
    heartbeat_until(&node, 1, &first.member_id, GroupError::RebalanceInProgress).await;
    let GroupResponse::Join(Ok(rejoined)) = call(&node, join(&first.member_id, 60_000)).await else { panic!("rejoin") };
    let second = second.await.expect("task");
    assert_eq!((rejoined.generation, second.generation), (2, 2));
    assert_eq!(rejoined.leader, first.member_id, "the leader stays the leader");
    assert_eq!(rejoined.members.len(), 2);
    assert!(second.members.is_empty(), "only the leader gets the member list");

    // The second member never heartbeats: its session expires and the group rebalances.
    heartbeat_until(&node, 2, &first.member_id, GroupError::RebalanceInProgress).await;
    let GroupResponse::Join(Ok(alone)) = call(&node, join(&first.member_id, 60_000)).await else { panic!("rejoin") };
    assert_eq!((alone.generation, alone.members.len()), (3, 1));
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Sessions are protocol time: a member's session ends when the node's clock passes it, however
/// little real time went by (and not before, however much).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_expire_by_the_nodes_clock() {
    let clock = crate::clock::Clock::manual(1_700_000_000_000);
    let (node, dir) = node_with(clock.clone()).await;
    let member = join_new(&node, 60_000).await;
    let sync = GroupRequest::Sync(SyncRequest {
        group_id: "g".into(),
        generation: member.generation,
        member_id: member.member_id.clone(),
        instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol: Some("range".into()),
        assignments: vec![(member.member_id.clone(), b"all".to_vec())],
    });
    assert!(matches!(call(&node, sync).await, GroupResponse::Sync(Ok(_))));
    clock.advance(Duration::from_secs(59));
    // Nothing to wait for when nothing may happen: a few timer rounds must pass without expiry.
    tokio::time::sleep(coordinator::TICK * 3).await;
    let alive = call(&node, heartbeat(member.generation, &member.member_id)).await;
    assert_eq!(alive, GroupResponse::Heartbeat(Ok(())), "59 s of a 60 s session");
    clock.advance(Duration::from_secs(61));
    // Watched through DescribeGroups, which (unlike a heartbeat) does not renew the session.
    let members = || async {
        match call(&node, GroupRequest::Describe(vec!["g".into()])).await {
            GroupResponse::Describe(groups) => groups.into_iter().flatten().map(|g| g.members.len()).sum::<usize>(),
            other => panic!("describe failed: {other:?}"),
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while members().await > 0 {
        assert!(std::time::Instant::now() < deadline, "the session did not end by the node's clock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let expired = call(&node, heartbeat(member.generation, &member.member_id)).await;
    assert_eq!(expired, GroupResponse::Heartbeat(Err(GroupError::UnknownMemberId)));
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A static member's first join (`group.instance.id`, no member id): no MEMBER_ID_REQUIRED.
fn join_static(instance: &str, session_ms: i32) -> GroupRequest {
    let GroupRequest::Join(mut request) = join("", session_ms) else { unreachable!("join builds a Join") };
    request.instance_id = Some(instance.into());
    GroupRequest::Join(request)
}

/// A static member joins group "g" alone, leads it and takes everything; its join answer.
async fn join_static_and_sync(node: &MetadataNode, instance: &str, session_ms: i32) -> JoinResponse {
    let GroupResponse::Join(Ok(joined)) = call(node, join_static(instance, session_ms)).await else {
        panic!("a static member joins at once")
    };
    let sync = GroupRequest::Sync(SyncRequest {
        group_id: "g".into(),
        generation: joined.generation,
        member_id: joined.member_id.clone(),
        instance_id: Some(instance.into()),
        protocol_type: Some("consumer".into()),
        protocol: Some("range".into()),
        assignments: vec![(joined.member_id.clone(), b"all".to_vec())],
    });
    assert!(matches!(call(node, sync).await, GroupResponse::Sync(Ok(_))));
    joined
}

fn static_heartbeat(member: &JoinResponse, instance: &str) -> GroupRequest {
    GroupRequest::Heartbeat(MemberRef {
        group_id: "g".into(),
        generation: member.generation,
        member_id: member.member_id.clone(),
        instance_id: Some(instance.into()),
    })
}

/// Group "g"'s members as DescribeGroups shows them (which, unlike a heartbeat, renews no
/// session).
async fn described_members(node: &MetadataNode) -> usize {
    match call(node, GroupRequest::Describe(vec!["g".into()])).await {
        GroupResponse::Describe(groups) => groups.into_iter().flatten().map(|g| g.members.len()).sum(),
        other => panic!("describe failed: {other:?}"),
    }
}

/// Waits, for up to 5 s of real time (the group timer's rounds), until group "g" shows no
/// members, live or stored (so a DeleteGroups after it does not race the membership's write).
async fn until_empty(node: &MetadataNode, failure: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let stored_members = || node.read().groups.get("g").map_or(0, |g| g.membership.members.len());
    while described_members(node).await > 0 || stored_members() > 0 {
        assert!(std::time::Instant::now() < deadline, "{failure}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn delete_g(node: &MetadataNode) -> GroupResponse {
    call(node, GroupRequest::Delete(vec!["g".into()])).await
}

/// A static member sends no LeaveGroup when it closes: its session, 5 s by the node's clock
/// after its last heartbeat, ends it (not before), and the group may then be deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_that_stops_heartbeating_expires_at_its_session_timeout() {
    let clock = crate::clock::Clock::manual(1_700_000_000_000);
    let (node, dir) = node_with(clock.clone()).await;
    let member = join_static_and_sync(&node, "a", 5_000).await;
    clock.advance(Duration::from_secs(4));
    let alive = call(&node, static_heartbeat(&member, "a")).await;
    assert_eq!(alive, GroupResponse::Heartbeat(Ok(())), "4 s of a 5 s session");
    // The member closes now, without a LeaveGroup.
    clock.advance(Duration::from_millis(4_900));
    tokio::time::sleep(coordinator::TICK * 3).await;
    assert_eq!(described_members(&node).await, 1, "4.9 s after its last heartbeat the session still runs");
    clock.advance(Duration::from_millis(600));
    until_empty(&node, "5.5 s after its last heartbeat the static member was still in the group").await;
    assert_eq!(delete_g(&node).await, GroupResponse::Delete(vec![("g".into(), Ok(()))]));
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// DeleteGroups ends the sessions past their timeout itself and waits for that write: asked a
/// session timeout after static members closed, it deletes the group as Kafka does. It used to
/// answer NON_EMPTY_GROUP until the group timer's next round and its write had landed (a client's
/// test suite deleting its group 6 s after 5 s sessions saw that).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_after_the_session_timeout_ends_the_sessions_itself() {
    let clock = crate::clock::Clock::manual(1_700_000_000_000);
    let (node, dir) = node_with(clock.clone()).await;
    let member = join_static_and_sync(&node, "a", 5_000).await;
    assert_eq!(call(&node, static_heartbeat(&member, "a")).await, GroupResponse::Heartbeat(Ok(())));
    clock.advance(Duration::from_millis(5_001));
    assert_eq!(delete_g(&node).await, GroupResponse::Delete(vec![("g".into(), Ok(()))]));
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Sessions run on a new leader for groups no request names: a static member that closed while
/// the metadata leader restarted (or failed over) is expired a session after the new leader
/// took over, and the group may then be deleted. A stored group used to become live only when
/// a request named it, so DescribeGroups showed the member and DeleteGroups answered
/// NON_EMPTY_GROUP for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_expires_static_members_that_no_request_names() {
    let clock = crate::clock::Clock::manual(1_700_000_000_000);
    let (node, dir) = node_with(clock.clone()).await;
    let member = join_static_and_sync(&node, "a", 5_000).await;
    assert_eq!(call(&node, static_heartbeat(&member, "a")).await, GroupResponse::Heartbeat(Ok(())));
    // The member's last heartbeat; it closes, and the node restarts with the clock standing.
    let node = restart(node, &dir, clock.clone()).await;
    assert_eq!(described_members(&node).await, 1, "the stored member is resumed");
    clock.advance(Duration::from_millis(5_500));
    until_empty(&node, "the new leader never expired the stored static member").await;
    assert_eq!(delete_g(&node).await, GroupResponse::Delete(vec![("g".into(), Ok(()))]));
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Kafka's bounds: a join asking for a session outside [group.min.session.timeout.ms,
/// group.max.session.timeout.ms] is refused, static or not, and holds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_with_a_session_timeout_out_of_bounds_are_refused() {
    // The harness sets the minimum to 100 ms; the maximum is the catalog's 1,800,000 ms.
    let (node, dir) = node().await;
    for session_ms in [99, 1_800_001] {
        for request in [join_static("a", session_ms), join("", session_ms)] {
            assert!(
                matches!(call(&node, request).await, GroupResponse::Join(Err((GroupError::InvalidSessionTimeout, _)))),
                "a {session_ms} ms session"
            );
        }
    }
    assert_eq!(described_members(&node).await, 0);
    // The bounds are dynamic: Kafka's default minimum (6 s) refuses a 5 s session.
    let configs: BTreeMap<String, String> =
        [("group.min.session.timeout.ms".to_owned(), "6000".to_owned())].into_iter().collect();
    node.propose(crate::Command::SetBrokerConfigs { configs }).await.expect("configs");
    assert!(matches!(
        call(&node, join_static("a", 5_000)).await,
        GroupResponse::Join(Err((GroupError::InvalidSessionTimeout, _)))
    ));
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_commits_check_membership_and_persist() {
    let (node, dir) = node().await;
    let commit = |generation: i32, member: &str, partition: i32| GroupRequest::CommitOffsets {
        member: MemberRef { group_id: "g".into(), generation, member_id: member.into(), instance_id: None },
        offsets: vec![OffsetCommit { topic: "t".into(), partition, offset: 42, leader_epoch: 0, metadata: "m".into() }],
        stamp: super::next_commit_stamp().into(),
    };
    // Assign-mode commits (generation -1) are accepted for a group without members.
    assert_eq!(call(&node, commit(-1, "", 0)).await, GroupResponse::CommitOffsets(Ok(vec![Ok(())])));
    assert_eq!(
        call(&node, commit(-1, "", 9)).await,
        GroupResponse::CommitOffsets(Ok(vec![Err(GroupError::UnknownTopicOrPartition)]))
    );
    let stored = node.read().groups["g"].offsets.get("t", 0).cloned().expect("t-0 committed");
    assert_eq!((stored.offset, stored.metadata.as_str()), (42, "m"));

    let member = join_new(&node, 60_000).await;
    assert_eq!(
        call(&node, commit(-1, "", 1)).await,
        GroupResponse::CommitOffsets(Err(GroupError::UnknownMemberId)),
        "a group with members refuses assign-mode commits"
    );
    assert_eq!(
        call(&node, commit(member.generation, &member.member_id, 1)).await,
        GroupResponse::CommitOffsets(Err(GroupError::RebalanceInProgress)),
        "no commits between join and sync"
    );
    assert_eq!(
        call(&node, commit(member.generation + 1, &member.member_id, 1)).await,
        GroupResponse::CommitOffsets(Err(GroupError::IllegalGeneration))
    );
    // Deleting a group with members is refused; after leaving it works.
    assert_eq!(
        call(&node, GroupRequest::Delete(vec!["g".into()])).await,
        GroupResponse::Delete(vec![("g".into(), Err(GroupError::NonEmptyGroup))])
    );
    let leave = GroupRequest::Leave {
        group_id: "g".into(),
        members: vec![LeavingMember { member_id: member.member_id.clone(), instance_id: None }],
    };
    assert!(matches!(call(&node, leave).await, GroupResponse::Leave(Ok(ref r)) if r[0].1.is_ok()));
    assert_eq!(
        call(&node, GroupRequest::Delete(vec!["g".into()])).await,
        GroupResponse::Delete(vec![("g".into(), Ok(()))])
    );
    assert!(node.read().groups.is_empty());
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn consumer_subscriptions_are_read_from_member_metadata() {
    let mut metadata = vec![0, 1, 0, 0, 0, 2];
    for topic in ["orders", "payments"] {
        metadata.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        metadata.extend_from_slice(topic.as_bytes());
    }
    metadata.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
    assert_eq!(subscribed_topics(&metadata), ["orders", "payments"]);
    assert!(subscribed_topics(&metadata[..9]).is_empty(), "truncated metadata subscribes to nothing");

    let mut assignment = vec![0, 1, 0, 0, 0, 1, 0, 6];
    assignment.extend_from_slice(b"orders");
    assignment.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(assigned_partitions(&assignment), [("orders".to_owned(), vec![3, 5])]);
    assert!(assigned_partitions(&assignment[..12]).is_empty());
}

fn consumer_heartbeat(
    member_id: &str,
    member_epoch: i32,
    owned: Option<Vec<(crate::TopicId, Vec<i32>)>>,
) -> GroupRequest {
    GroupRequest::ConsumerHeartbeat(ConsumerHeartbeat {
        group_id: "k".into(),
        member_id: member_id.into(),
        member_epoch,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: 5_000,
        subscribed_topics: (member_epoch == 0).then(|| vec!["t".to_owned()]),
        subscribed_regex: Some(String::new()),
        server_assignor: None,
        owned,
        client_id: "c".into(),
        client_host: "h".into(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_members_reconcile_without_overlap_and_stale_epochs_are_fenced() {
    let (node, dir) = node().await;
    let beat = |request| {
        let node = node.clone();
        async move {
            match call(&node, request).await {
                GroupResponse::ConsumerHeartbeat(r) => r,
                other => panic!("unexpected {other:?}"),
            }
        }
    };
    let a = beat(consumer_heartbeat("a", 0, Some(vec![]))).await.expect("a joins");
    let (topic, all) = a.assignment.clone().expect("assignment")[0].clone();
    assert_eq!(all, [0, 1], "the only member gets both partitions");
    let b = beat(consumer_heartbeat("b", 0, Some(vec![]))).await.expect("b joins");
    assert_eq!(b.assignment, Some(vec![]), "b waits until a releases a partition");
    // a is told to give one up, keeping its epoch until it confirms.
    let a2 = beat(consumer_heartbeat("a", a.member_epoch, Some(vec![(topic, all.clone())]))).await.expect("a");
    let kept = a2.assignment.clone().expect("a's new assignment")[0].1.clone();
    assert_eq!((kept.len(), a2.member_epoch), (1, a.member_epoch));
    let a3 = beat(consumer_heartbeat("a", a2.member_epoch, Some(vec![(topic, kept.clone())]))).await.expect("a");
    assert!(a3.member_epoch > a.member_epoch, "confirming the revocation moves a to the new epoch");
    let b2 = beat(consumer_heartbeat("b", b.member_epoch, Some(vec![]))).await.expect("b");
    let got = b2.assignment.expect("b's partition")[0].1.clone();
    assert_eq!(got.len(), 1);
    assert!(!kept.contains(&got[0]), "never two owners");

    assert_eq!(beat(consumer_heartbeat("a", a.member_epoch - 1, None)).await, Err(GroupError::FencedMemberEpoch));
    let commit = |epoch| GroupRequest::CommitOffsets {
        member: MemberRef { group_id: "k".into(), generation: epoch, member_id: "b".into(), instance_id: None },
        offsets: vec![OffsetCommit {
            topic: "t".into(),
            partition: got[0],
            offset: 1,
            leader_epoch: 0,
            metadata: String::new(),
        }],
        stamp: super::next_commit_stamp().into(),
    };
    assert_eq!(
        call(&node, commit(b2.member_epoch + 5)).await,
        GroupResponse::CommitOffsets(Err(GroupError::StaleMemberEpoch))
    );
    assert_eq!(call(&node, commit(b2.member_epoch)).await, GroupResponse::CommitOffsets(Ok(vec![Ok(())])));
    // A classic join to a consumer group with members is refused.
    let GroupRequest::Join(mut classic) = join("", 60_000) else { unreachable!("join builds a Join") };
    classic.group_id = "k".into();
    assert!(matches!(
        call(&node, GroupRequest::Join(classic)).await,
        GroupResponse::Join(Err((GroupError::InconsistentGroupProtocol, _)))
    ));
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// The coordinator reads every group setting from the config catalog's defaults (it declares
/// none of its own), so each must be there, with the default Kafka documents.
#[test]
fn group_settings_have_catalog_defaults() {
    use super::consumer_group::{HEARTBEAT_INTERVAL_MS, MAX_SIZE, SESSION_TIMEOUT_MS};
    use super::coordinator::{
        INITIAL_REBALANCE_DELAY_MS, MAX_GROUP_SIZE, MAX_SESSION_TIMEOUT_MS, MIN_SESSION_TIMEOUT_MS,
    };
    let state = crate::State::default();
    let expected = [
        (MIN_SESSION_TIMEOUT_MS, 6_000),
        (MAX_SESSION_TIMEOUT_MS, 1_800_000),
        (INITIAL_REBALANCE_DELAY_MS, 3_000),
        (MAX_GROUP_SIZE, i64::from(i32::MAX)),
        (MAX_SIZE, i64::from(i32::MAX)),
    ];
    for (name, default) in expected {
        assert_eq!(state.broker_config_i64(name), Some(default), "{name}");
    }
    for (name, default) in [(SESSION_TIMEOUT_MS, 45_000), (HEARTBEAT_INTERVAL_MS, 5_000)] {
        assert_eq!(state.group_config_i64("any", name), Some(default), "{name}");
    }
}

/// Many members joining one KIP-848 group at once: the coordinator changes the group under its
/// lock and writes each change after releasing it, so two writes could reach Raft the other way
/// round (seen in CI: "generation 3 is older than the stored 5", then a rebalance that handed a
/// partition to a second member). Every heartbeat must succeed and the stored membership must
/// end as the live one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_consumer_heartbeats_write_the_group_in_the_order_they_changed_it() {
    let (node, dir) = node().await;
    for round in 0..10 {
        let beats: Vec<_> = (0..32)
            .map(|i| {
                let node = node.clone();
                tokio::spawn(async move {
                    let member = format!("m{round}-{i}");
                    let mut epoch = 0;
                    for _ in 0..3 {
                        match call(&node, consumer_heartbeat(&member, epoch, Some(vec![]))).await {
                            GroupResponse::ConsumerHeartbeat(Ok(answer)) => epoch = answer.member_epoch,
                            other => return Err(format!("{member} at epoch {epoch}: {other:?}")),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for beat in beats {
            beat.await.expect("task").expect("every heartbeat is answered");
        }
    }
    let stored = node.read().groups.get("k").map(|g| g.membership.clone()).expect("stored group");
    let GroupResponse::ConsumerDescribe(described) =
        call(&node, GroupRequest::ConsumerDescribe(vec!["k".into()])).await
    else {
        panic!("describe answers")
    };
    let live = described.into_iter().next().expect("one group").expect("described");
    assert_eq!(stored.generation, live.epoch, "the stored generation is the live group epoch");
    let epochs = |pairs: Vec<(String, i32)>| pairs.into_iter().collect::<BTreeMap<_, _>>();
    assert_eq!(
        epochs(stored.members.iter().map(|m| (m.member_id.clone(), m.member_epoch)).collect()),
        epochs(live.members.iter().map(|m| (m.member_id.clone(), m.member_epoch)).collect()),
        "the stored member epochs are the live ones"
    );
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
