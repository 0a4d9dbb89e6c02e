//! Archive naming, chaining and replay: a snapshot plus its log chain rebuilds the same state
//! as applying every command directly.

use std::collections::BTreeMap;

use super::*;

fn create(name: &str, n: u8) -> Command {
    Command::CreateTopic {
        name: name.to_owned(),
        topic_id: uuid::Uuid::from_bytes([n; 16]),
        partition_count: 2,
        configs: BTreeMap::new(),
    }
}

fn log(generation: u64, after: u64, last: u64) -> String {
    ArchiveName::Log { generation, after, last }.to_string()
}

fn snap(generation: u64, index: u64) -> String {
    ArchiveName::State { generation, index }.to_string()
}

#[test]
fn names_round_trip_and_sort_by_generation_then_index() {
    let names = [snap(0, 5), log(0, 5, 9), snap(1, 2), log(1, 2, 30)];
    for name in &names {
        assert_eq!(ArchiveName::parse(name).map(|n| n.to_string()).as_deref(), Some(name.as_str()));
    }
    assert!(snap(1, 2) > snap(0, 99), "a newer generation sorts later whatever its index");
    for bad in ["state-1-2.snap", "log-00000000000000000000-00000000000000000009-00000000000000000009.cmds", "x"] {
        assert_eq!(ArchiveName::parse(bad), None, "{bad}");
    }
}

#[test]
fn restore_plan_follows_the_chain_from_the_newest_snapshot() {
    let names = [
        snap(0, 10),
        log(0, 10, 20),
        snap(0, 20),
        log(0, 20, 25),
        log(0, 25, 31),
        // A link that does not continue the chain (a gap) ends it there.
        log(0, 40, 45),
        // Another generation's logs are not part of generation 0's chain.
        log(1, 31, 50),
    ];
    let plan = plan_restore(names.iter().map(String::as_str)).expect("a snapshot exists");
    assert_eq!(plan.snapshot.to_string(), snap(0, 20));
    let logs: Vec<String> = plan.logs.iter().map(ToString::to_string).collect();
    assert_eq!(logs, [log(0, 20, 25), log(0, 25, 31)]);
    assert_eq!(plan_restore([log(0, 1, 2).as_str()]), None);
}

#[test]
fn snapshot_plus_replayed_logs_equals_the_state_applied_directly() {
    let commands: Vec<(u64, Command)> = (1..=6u8)
        .map(|i| {
            (
                u64::from(i) * 2,
                if i == 1 { Command::InitCluster { cluster_id: "c".into() } } else { create(&format!("t{i}"), i) },
            )
        })
        .collect();
    let mut direct = State::default();
    for (index, command) in commands.clone() {
        let _ = direct.apply(index, command);
    }
    // Snapshot after the first two commands, then two log objects.
    let mut restored = State::default();
    for (index, command) in commands[..2].iter().cloned() {
        let _ = restored.apply(index, command);
    }
    let mut restored = decode_state(&encode_state(&restored).unwrap()).unwrap();
    for part in [&commands[2..4], &commands[4..]] {
        let borrowed: Vec<(u64, &Command)> = part.iter().map(|(i, c)| (*i, c)).collect();
        let name = ArchiveName::Log { generation: 0, after: restored.applied_index, last: part[part.len() - 1].0 };
        replay_log(&mut restored, name, decode_log(&encode_log(&borrowed).unwrap()).unwrap()).unwrap();
    }
    assert_eq!(restored, direct);
}

#[test]
fn damaged_or_misplaced_log_objects_are_refused() {
    let command = create("t", 1);
    let bytes = encode_log(&[(5, &command)]).unwrap();
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert!(matches!(decode_log(&flipped), Err(ArchiveError::Checksum(_))));
    assert!(matches!(decode_state(&bytes), Err(ArchiveError::BadMagic(_))));

    let mut state = State::default();
    let at = |after, last| ArchiveName::Log { generation: 0, after, last };
    // Not where the state is.
    assert!(replay_log(&mut state, at(3, 5), vec![(5, command.clone())]).is_err());
    // Indexes outside the name's range, or not reaching its end.
    assert!(replay_log(&mut state, at(0, 4), vec![(5, command.clone())]).is_err());
    assert!(replay_log(&mut state, at(0, 6), vec![(5, command.clone())]).is_err());
    assert!(replay_log(&mut state, at(0, 6), vec![(6, command.clone()), (6, command.clone())]).is_err());
    assert_eq!(state, State::default(), "a refused object changes nothing");
    replay_log(&mut state, at(0, 5), vec![(5, command)]).unwrap();
    assert_eq!(state.applied_index, 5);
}

#[test]
fn obsolete_objects_are_those_before_the_oldest_kept_snapshot() {
    let names = [snap(0, 10), log(0, 10, 20), snap(0, 20), log(0, 20, 30), snap(0, 30), log(0, 30, 31), snap(1, 3)];
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let gone = obsolete(&refs, 2);
    assert_eq!(gone, [names[0].as_str(), names[1].as_str(), names[2].as_str(), names[3].as_str()]);
    assert!(obsolete(&refs[1..2], 2).is_empty(), "without a snapshot nothing is obsolete");
}
