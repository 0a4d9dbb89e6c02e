//! Three metadata nodes on loopback: election, forwarding, failover, restart, convergence.

use crate::command::{BatchSummary, ChunkCommit, SegmentCommit};
use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

/// A free port below the kernel's ephemeral range (32768 and up). A port from binding port 0 is
/// in that range, and between this test freeing it and its node binding it, a test running
/// beside it took it for an outgoing connection or a node of its own; a node of that other
/// cluster then talked to this one and openraft panicked (seen in CI). nextest runs each test in
/// a process of its own, so the process id spreads processes over 20000-31999.
fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = 20_000 + (std::process::id() % 600) * 20;
    loop {
        let offset = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 12_000;
        let port = u16::try_from(20_000 + (base - 20_000 + offset) % 12_000).expect("below 32000");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

struct Cluster {
    root: PathBuf,
    peers: BTreeMap<NodeId, String>,
    nodes: BTreeMap<NodeId, MetadataNode>,
}

impl Cluster {
    async fn start(size: u64) -> Self {
        let root = std::env::temp_dir().join(format!("floe-raft-{}", uuid::Uuid::new_v4().simple()));
        let peers: BTreeMap<NodeId, String> = (1..=size).map(|id| (id, format!("127.0.0.1:{}", free_port()))).collect();
        let mut cluster = Self { root, peers, nodes: BTreeMap::new() };
        for id in 1..=size {
            cluster.start_node(id).await;
        }
        cluster
    }

    async fn start_node(&mut self, id: NodeId) {
        let config = MetadataNodeConfig {
            node_id: id,
            listen_addr: self.peers[&id].clone(),
            data_dir: self.root.join(format!("node-{id}")),
            peers: self.peers.clone(),
            join: false,
            clock: crate::clock::Clock::system(),
        };
        self.nodes.insert(id, MetadataNode::start(config).await.expect("node starts"));
    }

    /// Waits until a running node sees a leader other than `not`.
    async fn leader_other_than(&self, not: Option<NodeId>) -> NodeId {
        let any = self.nodes.values().next().expect("a node");
        let metrics = any
            .raft
            .wait(Some(Duration::from_secs(20)))
            .metrics(|m| m.current_leader.is_some() && m.current_leader != not, "a new leader")
            .await
            .expect("a leader is elected");
        metrics.current_leader.expect("checked above")
    }

    async fn leader(&self) -> NodeId {
        self.leader_other_than(None).await
    }

    /// Waits until every running node has applied at least `index`.
    async fn converge(&self, index: u64) {
        for node in self.nodes.values() {
            let mut applied = node.subscribe();
            tokio::time::timeout(Duration::from_secs(20), applied.wait_for(|i| *i >= index))
                .await
                .expect("node catches up in time")
                .expect("watch open");
        }
    }
}

fn create(name: &str) -> Command {
    Command::CreateTopic {
        name: name.into(),
        topic_id: uuid::Uuid::new_v4(),
        partition_count: 1,
        configs: BTreeMap::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_replicate_forward_and_fail_over() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    let follower = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");

    // A proposal on a follower is forwarded to the leader and answered with the real outcome.
    cluster.nodes[&follower].ensure_initialized().await.expect("init");
    cluster.nodes[&follower].propose(create("a")).await.expect("forwarded create");
    let duplicate = cluster.nodes[&follower].propose(create("a")).await;
    assert!(matches!(duplicate, Err(NodeError::Rejected(CommandError::TopicExists(_)))), "{duplicate:?}");

    // Kill the leader: the others elect a new one and keep accepting proposals.
    cluster.nodes.remove(&leader).expect("leader running").shutdown().await;
    let new_leader = cluster.leader_other_than(Some(leader)).await;
    for i in 0..20 {
        cluster.nodes[&new_leader].propose(create(&format!("t{i}"))).await.expect("create after failover");
    }

    // The old leader comes back from its disk and catches up; all states are equal.
    cluster.start_node(leader).await;
    let index = *cluster.nodes[&new_leader].subscribe().borrow();
    cluster.converge(index).await;
    let states: Vec<State> = cluster.nodes.values().map(|n| n.read().clone()).collect();
    assert!(states.windows(2).all(|w| w[0] == w[1]), "replicas diverged");
    assert_eq!(states[0].topics.len(), 21);
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    // Replaying each node's durable Raft log into a fresh state gives the state it serves (no
    // snapshot was taken in this short run, so the log is complete).
    for id in cluster.peers.keys() {
        let log = crate::raft::log_store::FileLogStore::open(
            &cluster.root.join(format!("node-{id}")).join("raft-log"),
            tokio::sync::watch::channel(crate::raft::state_machine::DurableSnapshot::Covers(0)).1,
        )
        .expect("log reopens");
        let mut replayed = State::default();
        for entry in log.entries().await {
            if let openraft::EntryPayload::Normal(command) = entry.payload {
                let _ = replayed.apply(entry.log_id.index, command);
            }
        }
        assert_eq!(replayed, states[0], "node {id}: replaying its log gives the served state");
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_quorum_proposals_fail_and_nothing_is_applied() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    cluster.nodes[&leader].ensure_initialized().await.expect("init");
    let survivor = leader;
    let others: Vec<NodeId> = cluster.nodes.keys().copied().filter(|id| *id != survivor).collect();
    for id in others {
        cluster.nodes.remove(&id).expect("running").shutdown().await;
    }
    let before = cluster.nodes[&survivor].read().clone();
    let result = tokio::time::timeout(PROPOSE_DEADLINE * 2, cluster.nodes[&survivor].propose(create("lost"))).await;
    assert!(
        matches!(result, Ok(Err(NodeError::Unavailable(_)))),
        "without quorum: retriable error in time, got {result:?}"
    );
    assert_eq!(before.topics, cluster.nodes[&survivor].read().topics, "nothing applied without quorum");
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

/// OffsetFetch is answered on the leader after a quorum check, never from a node's own copy:
/// through a follower it sees the latest commit, and a leader cut off from the others refuses
/// rather than answer from what it last knew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_are_read_on_a_leader_that_confirms_it_leads() {
    use crate::groups::{GroupError, GroupRequest, GroupResponse, MemberRef};
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    cluster.nodes[&leader].ensure_initialized().await.expect("init");
    let (_, index) = cluster.nodes[&leader].propose_indexed(create("orders")).await.expect("topic");
    // A node that has not yet heard from the leader answers its quorum check with its own vote
    // from the first election, and the check fails; wait until every node follows.
    cluster.converge(index).await;
    let commit = |offset| GroupRequest::CommitOffsets {
        member: MemberRef { group_id: "g".into(), generation: -1, member_id: String::new(), instance_id: None },
        offsets: vec![crate::state::stored::OffsetCommit {
            topic: "orders".into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: String::new(),
        }],
        stamp: crate::groups::next_commit_stamp().into(),
    };
    let fetch = GroupRequest::FetchOffsets {
        groups: vec![("g".into(), Some(vec![("orders".into(), vec![0, 7])]))],
        require_stable: false,
    };
    let follower = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");
    for offset in [10, 42] {
        cluster.nodes[&leader].group_request(commit(offset)).await.expect("commit");
        let (answer, _) = cluster.nodes[&follower].group_request(fetch.clone()).await.expect("fetch");
        let GroupResponse::FetchOffsets(groups) = answer else { panic!("wrong answer kind: {answer:?}") };
        let offsets: Vec<i64> = groups[0][0].1.iter().map(|f| f.offset).collect();
        assert_eq!(offsets, vec![offset, -1], "the latest commit, and -1 where none was made");
    }
    for id in cluster.nodes.keys().copied().filter(|id| *id != leader).collect::<Vec<_>>() {
        cluster.nodes.remove(&id).expect("running").shutdown().await;
    }
    let refused = tokio::time::timeout(Duration::from_secs(10), cluster.nodes[&leader].group_request(fetch)).await;
    assert!(
        matches!(refused, Ok(Err(GroupError::CoordinatorNotAvailable(_)))),
        "a leader without a quorum must not answer from its own copy, got {refused:?}"
    );
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voters_are_added_and_removed_at_runtime() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    cluster.nodes[&leader].ensure_initialized().await.expect("init");
    cluster.nodes[&leader].propose(create("before")).await.expect("create");

    // Node 4 starts in join mode, is added through any node, and receives the state.
    let addr4 = format!("127.0.0.1:{}", free_port());
    cluster.peers.insert(4, addr4.clone());
    let config = MetadataNodeConfig {
        node_id: 4,
        listen_addr: addr4.clone(),
        data_dir: cluster.root.join("node-4"),
        peers: cluster.peers.clone(),
        join: true,
        clock: crate::clock::Clock::system(),
    };
    cluster.nodes.insert(4, MetadataNode::start(config).await.expect("node 4 starts"));
    let any_addr = cluster.peers[&1].clone();
    network::change_membership(&any_addr, Some((4, addr4)), None).await.expect("added");
    let victim = *cluster.nodes.keys().find(|id| **id != leader && **id != 4).expect("a follower");
    network::change_membership(&any_addr, None, Some(victim)).await.expect("removed");
    cluster.nodes.remove(&victim).expect("running").shutdown().await;

    cluster.nodes[&4].propose(create("after")).await.expect("create through the new voter");
    let status = cluster.nodes[&4].status();
    assert_eq!(status.voters.len(), 3);
    assert!(status.voters.contains(&4) && !status.voters.contains(&victim), "{status:?}");
    let index = *cluster.nodes[&leader].subscribe().borrow();
    cluster.converge(index).await;
    assert!(cluster.nodes[&4].read().topic_by_name("before").is_some(), "the new voter has the old state");
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_segment_commits_are_grouped_and_each_gets_its_offsets() {
    use crate::command::{BatchSummary, ChunkCommit, SegmentCommit};
    let cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    let node = cluster.nodes[&leader].clone();
    let topic_id = match node.propose(create("g")).await.expect("create") {
        Outcome::TopicCreated { topic_id } => topic_id,
        other => panic!("unexpected {other:?}"),
    };
    let mut tasks = Vec::new();
    for i in 0..200u32 {
        let node = cluster.nodes[&(u64::from(i % 3) + 1)].clone();
        tasks.push(tokio::spawn(async move {
            let commit = SegmentCommit {
                key: format!("segments/{i}.seg"),
                object_bytes: 100,
                chunks: vec![ChunkCommit {
                    topic_id,
                    partition: 0,
                    byte_start: 0,
                    byte_len: 10,
                    crc32c: 0,
                    batches: vec![BatchSummary { offset_count: 3, timestamp_max: 0, base_sequence: -1 }],
                    producer: None,
                    uncompressed_bytes: 300,
                }],
            };
            node.propose(Command::CommitSegment(commit)).await
        }));
    }
    let mut bases = Vec::new();
    for task in tasks {
        match task.await.expect("task") {
            Ok(Outcome::SegmentCommitted { chunks }) => bases.push(chunks[0].clone().expect("sequenced")),
            other => panic!("unexpected {other:?}"),
        }
    }
    bases.sort_unstable();
    assert_eq!(bases, (0..200).map(|i| i * 3).collect::<Vec<i64>>(), "every commit got its own offsets");
    let entries = node.status().last_log_index.unwrap_or(0);
    assert!(entries < 150, "200 concurrent commits took {entries} log entries: they were not grouped");
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_behind_the_purged_log_catches_up_by_snapshot() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    cluster.nodes[&leader].ensure_initialized().await.expect("init");
    let lagging = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");
    cluster.nodes.remove(&lagging).expect("running").shutdown().await;
    for i in 0..30 {
        cluster.nodes[&leader].propose(create(&format!("t{i}"))).await.expect("create");
    }
    // Snapshot and purge the leader's log so the entries the lagging node misses are gone.
    let node = cluster.nodes[&leader].clone();
    let last = *node.subscribe().borrow();
    node.raft.trigger().snapshot().await.expect("snapshot triggered");
    node.raft
        .wait(Some(Duration::from_secs(20)))
        .metrics(|m| m.snapshot.is_some_and(|s| s.index >= last), "a snapshot")
        .await
        .expect("snapshot built");
    node.raft.trigger().purge_log(last).await.expect("purge triggered");
    node.raft
        .wait(Some(Duration::from_secs(20)))
        .metrics(|m| m.purged.is_some_and(|p| p.index >= last), "purged log")
        .await
        .expect("log purged");

    // The lagging node comes back with an empty disk: only a snapshot can bring it up to date.
    std::fs::remove_dir_all(cluster.root.join(format!("node-{lagging}"))).expect("wipe");
    cluster.start_node(lagging).await;
    cluster.converge(last).await;
    let caught_up = &cluster.nodes[&lagging];
    // Raft metrics are published after the state machine reports the install: wait for them.
    let installed = caught_up
        .raft
        .wait(Some(Duration::from_secs(10)))
        .metrics(|m| m.snapshot.is_some_and(|s| s.index >= last), "an installed snapshot")
        .await;
    assert!(installed.is_ok(), "no snapshot was installed: {:?}", caught_up.raft.metrics().borrow().snapshot);
    // The leader may have moved on meanwhile (a usage minute closed): compare at its index.
    cluster.converge(*node.subscribe().borrow()).await;
    assert_eq!(*caught_up.read(), *cluster.nodes[&leader].read(), "the snapshot carries the whole state");
    // And it follows the log from there.
    node.propose(create("after")).await.expect("create after install");
    cluster.converge(*node.subscribe().borrow()).await;
    assert!(caught_up.read().topic_by_name("after").is_some());
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_arriving_after_its_sender_gave_up_is_refused_and_a_mirror_catches_up_and_waits_for_every_node() {
    use crate::groups::{GroupError, GroupRequest};
    use crate::raft::network::{ConnectionPool, NotAfter, Request, Response};
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    cluster.nodes[&leader].ensure_initialized().await.expect("init");
    let (_, index) = cluster.nodes[&leader].propose_indexed(create("first")).await.expect("topic");
    cluster.converge(index).await;
    let follower = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");
    let pool = ConnectionPool::default();
    let gave_up = NotAfter(Some(crate::now_ms() - 1));
    // A late copy (held in a TCP queue through a partition, say) is refused whether it reaches a
    // follower, which would forward it, or the leader; so is a late group request.
    for id in [follower, leader] {
        let late = Request::ProposeAnywhere(create("late"), gave_up);
        let answer = pool.call(&cluster.peers[&id], &late, Duration::from_secs(10)).await.expect("answered");
        assert!(matches!(answer, Response::ProposeAnywhere(Err(_))), "node {id}: {answer:?}");
        let late = Request::Group(GroupRequest::Describe(vec!["g".into()]), gave_up);
        let answer = pool.call(&cluster.peers[&id], &late, Duration::from_secs(10)).await.expect("answered");
        assert!(
            matches!(answer, Response::Group(Err(GroupError::CoordinatorNotAvailable(_)))),
            "node {id}: {answer:?}"
        );
    }
    let in_time = Request::ProposeAnywhere(create("in-time"), NotAfter::within(Duration::from_secs(10)));
    let answer = pool.call(&cluster.peers[&follower], &in_time, Duration::from_secs(10)).await.expect("answered");
    assert!(matches!(answer, Response::ProposeAnywhere(Ok(_))), "{answer:?}");
    assert!(cluster.nodes[&leader].read().topic_by_name("late").is_none(), "a late copy was applied");

    // A follower's read index is the leader's applied index; a mirror that catches up shows
    // everything applied before it asked.
    let (_, index) = cluster.nodes[&leader].propose_indexed(create("fresh")).await.expect("topic");
    assert!(cluster.nodes[&follower].read_index().await.expect("read index") >= index);
    let mirror = crate::client::RemoteMetadata::connect(cluster.peers.values().cloned().collect())
        .await
        .expect("mirror connects");
    let (_, index) = cluster.nodes[&leader].propose_indexed(create("fresher")).await.expect("topic");
    mirror.catch_up().await.expect("the mirror catches up");
    assert!(*mirror.subscribe().borrow() >= index);
    assert!(mirror.read().topic_by_name("fresher").is_some());

    // Once every node is said to have applied what the mirror has, each has; a node that is
    // down is named.
    mirror.propose(create("everywhere")).await.expect("topic");
    let mirrored = *mirror.subscribe().borrow();
    assert!(mirror.wait_applied_by_every_node(Duration::from_secs(10)).await.is_empty());
    for (id, node) in &cluster.nodes {
        assert!(*node.subscribe().borrow() >= mirrored, "node {id} is behind the mirror");
    }
    cluster.nodes.remove(&follower).expect("running").shutdown().await;
    mirror.propose(create("without-one")).await.expect("topic");
    let behind = mirror.wait_applied_by_every_node(Duration::from_millis(500)).await;
    assert_eq!(behind, vec![cluster.peers[&follower].clone()]);
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

/// The leader's collector reports it leads, each follower's lag, and what the state holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_reports_its_role_followers_and_state_as_metrics() {
    use prometheus::core::Collector;
    let cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    let node = &cluster.nodes[&leader];
    node.ensure_initialized().await.expect("init");
    for i in 0..3 {
        node.propose(create(&format!("m{i}"))).await.expect("create");
    }
    cluster.converge(*node.subscribe().borrow()).await;
    let families = crate::metrics::NodeCollector::new(node.clone()).collect();
    let values = |name: &str| -> Vec<(Vec<(String, String)>, f64)> {
        families
            .iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| f.get_metric().iter())
            .map(|m| {
                let labels = m.get_label().iter().map(|l| (l.name().to_owned(), l.value().to_owned())).collect();
                (labels, m.get_gauge().get_value())
            })
            .collect()
    };
    assert_eq!(values("floe_metadata_raft_is_leader")[0].1, 1.0);
    assert_eq!(values("floe_metadata_raft_leader_id")[0].1, leader as f64);
    assert_eq!(values("floe_metadata_raft_voters")[0].1, 3.0);
    assert_eq!(values("floe_metadata_topics")[0].1, 3.0);
    let followers: Vec<String> =
        values("floe_metadata_raft_follower_lag_entries").into_iter().map(|(labels, _)| labels[0].1.clone()).collect();
    assert_eq!(followers.len(), 2, "one lag series per follower: {followers:?}");
    assert!(!followers.contains(&leader.to_string()));
    let follower = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");
    let families = crate::metrics::NodeCollector::new(cluster.nodes[&follower].clone()).collect();
    let is_leader = families.iter().find(|f| f.name() == "floe_metadata_raft_is_leader").expect("reported");
    assert_eq!(is_leader.get_metric()[0].get_gauge().get_value(), 0.0);
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

/// Metadata nodes' data directories of formats 6 and on (a snapshot, and a Raft log with
/// entries past it), each written once with `FLOE_WRITE_GOLDEN=1` by the binary of its format
/// and kept: today's node opens a copy of each, elects itself and serves what it held. A change
/// that breaks this needs a new format and a reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_data_directories_still_open() {
    for format in 6..=crate::FORMAT_VERSION {
        golden_data_directory_opens(format).await;
    }
}

async fn golden_data_directory_opens(format: u32) {
    let golden = crate::state::tests::golden_dir().join(format!("raft-v{format}"));
    let files = ["raft-log", "raft-snapshot"];
    if std::env::var_os("FLOE_WRITE_GOLDEN").is_some() && format == crate::FORMAT_VERSION {
        let cluster = Cluster::start(1).await;
        let node = &cluster.nodes[&1];
        cluster.leader().await;
        node.ensure_initialized().await.expect("init");
        for i in 0..5 {
            node.propose(create(&format!("before-snapshot-{i}"))).await.expect("create");
        }
        let last = *node.subscribe().borrow();
        node.raft.trigger().snapshot().await.expect("snapshot triggered");
        node.raft
            .wait(Some(Duration::from_secs(20)))
            .metrics(|m| m.snapshot.is_some_and(|s| s.index >= last), "a snapshot")
            .await
            .expect("snapshot built");
        node.propose(create("after-snapshot")).await.expect("create");
        // From format 13 the log after the snapshot also holds a packed segment commit.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !node.read().applies_format(crate::FORMAT_VERSION) {
            assert!(Instant::now() < deadline, "the leader raises the cluster's format");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let topic_id = node.read().topic_by_name("after-snapshot").expect("created").topic_id;
        let commit = SegmentCommit {
            key: "segments/golden.seg".into(),
            object_bytes: 100,
            chunks: vec![ChunkCommit {
                topic_id,
                partition: 0,
                byte_start: 0,
                byte_len: 10,
                crc32c: 7,
                batches: vec![BatchSummary { offset_count: 3, timestamp_max: 5, base_sequence: -1 }],
                producer: None,
                uncompressed_bytes: 10,
            }],
        };
        node.propose(Command::CommitSegment(commit)).await.expect("commit");
        node.shutdown().await;
        std::fs::create_dir_all(&golden).expect("golden dir");
        for file in files {
            std::fs::copy(cluster.root.join("node-1").join(file), golden.join(file)).expect("copy golden file");
        }
        let _ = std::fs::remove_dir_all(&cluster.root);
    }
    let root = std::env::temp_dir().join(format!("floe-golden-dir-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(root.join("node-1")).expect("dir");
    for file in files {
        std::fs::copy(golden.join(file), root.join("node-1").join(file)).expect("golden file (FLOE_WRITE_GOLDEN=1)");
    }
    let peers: BTreeMap<NodeId, String> = [(1, format!("127.0.0.1:{}", free_port()))].into();
    let mut cluster = Cluster { root: root.clone(), peers, nodes: BTreeMap::new() };
    cluster.start_node(1).await;
    cluster.leader().await;
    let node = &cluster.nodes[&1];
    node.catch_up().await.expect("applied what it had");
    let state = node.read().clone();
    for i in 0..5 {
        assert!(state.topic_by_name(&format!("before-snapshot-{i}")).is_some(), "from the snapshot");
    }
    let after = state.topic_by_name("after-snapshot").expect("from the log after the snapshot");
    if format >= 13 {
        assert_eq!(after.partitions[0].next_offset, 3, "the packed segment commit after the snapshot");
    }
    node.propose(create("today")).await.expect("and it takes new commands");
    node.shutdown().await;
    let _ = std::fs::remove_dir_all(&root);
}

/// A Hello is answered with the node's versions; a subscriber that reads only older formats
/// than the node writes gets no change stream (and the node logs why), while one of today's gets
/// the state's copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_is_answered_and_a_reader_of_older_formats_gets_no_change_stream() {
    use crate::raft::network::{Hello, Request, Response, dial_with_hello, read_frame, write_frame};
    let cluster = Cluster::start(1).await;
    cluster.leader().await;
    let addr = &cluster.peers[&1];

    let (mut stream, hello) = dial_with_hello(addr, Duration::from_secs(5)).await.expect("hello");
    assert_eq!(hello, Hello::this_process());
    write_frame(&mut stream, &Request::Subscribe).await.expect("subscribe");
    // Today's subscriber gets the copy in parts; here one, the whole state.
    let Ok(Some(Response::StateCopyPart { total, bytes })) = read_frame::<Response>(&mut stream).await else {
        panic!("a state copy part first")
    };
    assert_eq!(bytes.len() as u64, total, "a small state fits one part");
    let copy =
        crate::State::from(crate::state::stored::decode_state_copy(&bytes, crate::FORMAT_VERSION).expect("decodes"));
    let node = cluster.nodes[&1].read().clone();
    assert!(copy.cluster_id == node.cluster_id && copy.applied_index <= node.applied_index, "the node's state");

    let mut old = crate::tls::dial(addr, Duration::from_secs(5)).await.expect("dial");
    let older = Hello { format: crate::FORMAT_VERSION - 1, ..Hello::this_process() };
    write_frame(&mut old, &Request::Hello(older)).await.expect("hello");
    assert!(matches!(read_frame::<Response>(&mut old).await, Ok(Some(Response::Hello(_)))));
    write_frame(&mut old, &Request::Subscribe).await.expect("subscribe");
    let answer = tokio::time::timeout(Duration::from_secs(5), read_frame::<Response>(&mut old)).await;
    assert!(matches!(answer, Ok(Ok(None))), "the stream is closed unsent: {answer:?}");
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_write_stops_the_node_and_it_restarts_whole_from_its_files() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.leader().await;
    cluster.nodes[&leader].ensure_initialized().await.expect("init");
    for i in 0..5 {
        cluster.nodes[&leader].propose(create(&format!("before-{i}"))).await.expect("create");
    }
    let faulty = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");
    cluster.nodes[&faulty].fail_next_log_write().await;
    // Its next append fails halfway: its Raft stops, and says why.
    cluster.nodes[&leader].propose(create("during")).await.expect("the other two commit it");
    let fault = tokio::time::timeout(Duration::from_secs(10), cluster.nodes[&faulty].stopped_by_fault())
        .await
        .expect("the node reports its stop in time");
    assert!(fault.contains("injected disk fault"), "{fault}");
    // The process exits on it (`floe metadata`); started again, the node cuts the torn record
    // and catches up.
    cluster.nodes.remove(&faulty).expect("running").shutdown().await;
    cluster.nodes[&leader].propose(create("after")).await.expect("create");
    cluster.start_node(faulty).await;
    let index = *cluster.nodes[&leader].subscribe().borrow();
    cluster.converge(index).await;
    let states: Vec<State> = cluster.nodes.values().map(|n| n.read().clone()).collect();
    assert!(states.windows(2).all(|w| w[0] == w[1]), "replicas diverged");
    assert_eq!(states[0].topics.len(), 7);
    for node in cluster.nodes.values() {
        node.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&cluster.root);
}
