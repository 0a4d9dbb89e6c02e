use std::collections::BTreeMap;

use super::*;

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("floe-metadata-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn create(name: &str) -> Command {
    Command::CreateTopic {
        name: name.into(),
        topic_id: uuid::Uuid::new_v4(),
        partition_count: 2,
        configs: BTreeMap::new(),
    }
}

#[tokio::test]
async fn state_survives_reopen_and_torn_tails() {
    let dir = temp_dir();
    let node = MetadataNode::open(&dir).expect("open");
    node.ensure_initialized().await.expect("init");
    let cluster_id = node.read().cluster_id.clone();
    for i in 0..10 {
        node.propose(create(&format!("t{i}"))).await.expect("create");
    }
    assert!(matches!(node.propose(create("t3")).await, Err(NodeError::Rejected(CommandError::TopicExists(_)))));
    let before = node.read().clone();
    drop(node);

    // Append garbage, as a crash mid-write would leave it: it is cut off on open.
    let journal = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .expect("journal exists");
    let mut bytes = std::fs::read(&journal).expect("read");
    bytes.extend_from_slice(&[9, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&journal, bytes).expect("write");

    let node = MetadataNode::open(&dir).expect("reopen");
    assert_eq!(*node.read(), before);
    assert_eq!(node.read().cluster_id, cluster_id);
    node.propose(create("after")).await.expect("appends after the cut");
    let after = node.read().clone();
    drop(node);
    let node = MetadataNode::open(&dir).expect("reopen again");
    assert_eq!(*node.read(), after);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn snapshot_then_journal_replay_restores_state() {
    let dir = temp_dir();
    let mut state = State::default();
    state.apply(1, Command::InitCluster { cluster_id: "c".into() }).expect("init");
    state.apply(2, create("a")).expect("create");
    snapshot::write(&dir, &state).expect("snapshot");
    let (mut journal, entries) = Journal::open(&dir, state.applied_index).expect("journal");
    assert!(entries.is_empty());
    let command = create("b");
    journal.append(&[(3, encode_command(&command).expect("encode"))]).expect("append");
    state.apply(3, command).expect("create b");

    let mut restored = snapshot::load(&dir).expect("load");
    let (_, entries) = Journal::open(&dir, restored.applied_index).expect("journal");
    for (index, command) in entries {
        restored.apply(index, command).expect("replay");
    }
    assert_eq!(restored, state);
    let _ = std::fs::remove_dir_all(dir);
}
