//! What a partition costs the metadata state, at the counts clusters reach (issue 53: "a
//! metadata service sized for 1,000,000"): for each count, a state of topics of 10,000
//! partitions (fewer below that), one index entry per partition (one segment commit per
//! 1,000 partitions), then the time to clone it (a snapshot's or a change stream's copy), to
//! encode it as a snapshot or archive does and to decode it, the encoded bytes per partition,
//! and the process's resident memory per partition. Seconds per step, so a plain timer, not
//! criterion:
//!
//!     cargo bench -p floe-metadata --bench state_scale -- 10000,100000,1000000
//!
//! `--entries N` gives each partition N index entries, `--group` one consumer group's offset.
//! With `--archive DIR` the state of the last count is also written, as the leader's archive
//! would, under `DIR/metadata/` (a `file://DIR` object store), for `floe metadata restore` and
//! then a node and an agent to start from: `loadtest/scripts/bench_million.py` times those.

use std::collections::BTreeMap;
use std::time::Instant;

use floe_metadata::archive::{decode_state, encode_state};
use floe_metadata::command::{BatchSummary, ChunkCommit, Command, SegmentCommit};
use floe_metadata::state::State;

const PARTITIONS_PER_TOPIC: u32 = 10_000;
const CHUNKS_PER_COMMIT: u32 = 1_000;

/// A line of `/proc/self/status` in bytes: `VmRSS` (resident now) or `VmHWM` (its peak).
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim_start_matches(':').trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn rss_bytes() -> u64 {
    status_bytes("VmRSS")
}

/// Runs `f` and returns what it gave, its milliseconds, and how far the resident peak rose
/// above the resident size before it (Linux: writing 5 to `clear_refs` resets the peak).
fn timed_peak<T>(f: impl FnOnce() -> T) -> (T, f64, u64) {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = rss_bytes();
    let started = Instant::now();
    let out = f();
    let millis = started.elapsed().as_secs_f64() * 1e3;
    (out, millis, status_bytes("VmHWM").saturating_sub(before))
}

/// What each partition holds besides itself: index entries (one per commit round) and, with
/// `group`, one consumer group's committed offset.
#[derive(Clone, Copy)]
struct Shape {
    entries: u32,
    group: bool,
}

fn state(partitions: u32, shape: Shape) -> State {
    let per_topic = partitions.min(PARTITIONS_PER_TOPIC);
    let topics = partitions.div_ceil(per_topic);
    let topic_id = |t: u32| uuid::Uuid::from_u128(u128::from(t) + 1);
    let mut state = State::default();
    let mut index = 0;
    let mut apply = |state: &mut State, command: Command| {
        index += 1;
        state.apply(index, command).expect("applies");
    };
    apply(&mut state, Command::InitCluster { cluster_id: format!("state-scale-{partitions}") });
    for t in 0..topics {
        let create = Command::CreateTopic {
            name: format!("topic-{t}"),
            topic_id: topic_id(t),
            partition_count: per_topic as i32,
            configs: BTreeMap::new(),
        };
        apply(&mut state, create);
    }
    for (round, commit) in
        (0..shape.entries).flat_map(|r| (0..partitions.div_ceil(CHUNKS_PER_COMMIT)).map(move |c| (r, c)))
    {
        let chunks = (0..CHUNKS_PER_COMMIT)
            .map(|i| commit * CHUNKS_PER_COMMIT + i)
            .filter(|&n| n < partitions)
            .map(|n| ChunkCommit {
                topic_id: topic_id(n / per_topic),
                partition: (n % per_topic) as i32,
                byte_start: u64::from(n % CHUNKS_PER_COMMIT) * 200,
                byte_len: 200,
                crc32c: n,
                batches: vec![BatchSummary { offset_count: 1, timestamp_max: i64::from(n), base_sequence: -1 }],
                producer: None,
                uncompressed_bytes: 200,
            })
            .collect();
        let key = format!("segments/{round:04}-{commit:08}");
        apply(&mut state, Command::CommitSegment(SegmentCommit { key, object_bytes: 200_000, chunks }));
    }
    if shape.group {
        for t in 0..topics {
            let offsets = (0..per_topic)
                .map(|p| {
                    floe_metadata::state::OffsetCommit {
                        topic: format!("topic-{t}"),
                        partition: p as i32,
                        offset: i64::from(shape.entries),
                        leader_epoch: -1,
                        metadata: String::new(),
                    }
                    .into()
                })
                .collect();
            let commit = Command::CommitOffsets { group_id: "consumers".into(), offsets, stamp: None, now_ms: 1 };
            apply(&mut state, commit);
        }
        let committed = state.groups.get("consumers").map_or(0, |g| g.offsets.len());
        assert_eq!(committed, partitions as usize, "every partition's offset is committed");
    }
    state
}

fn main() {
    // `cargo bench` passes `--bench`; the counts are the one argument that parses.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let counts: Vec<u32> = args
        .iter()
        .find_map(|a| a.split(',').map(str::parse).collect::<Result<Vec<u32>, _>>().ok())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|at| args.get(at + 1));
    let archive_dir = flag("--archive");
    let shape = Shape {
        entries: flag("--entries").and_then(|n| n.parse().ok()).unwrap_or(1),
        group: args.iter().any(|a| a == "--group"),
    };
    let mut last = None;
    println!(
        "partitions  build_s  clone_ms  encode_ms  peak_B/p  converted_ms  peak_B/p  decode_ms  encoded_B/p  rss_B/p"
    );
    for partitions in counts {
        let before = rss_bytes();
        let started = Instant::now();
        let state = state(partitions, shape);
        let build = started.elapsed();
        let resident = rss_bytes().saturating_sub(before);
        let started = Instant::now();
        let copy = state.clone();
        let clone = started.elapsed();
        drop(copy);
        // As snapshots, archives and state copies write it (a piece at a time), then as they did
        // before (the stored layout built whole from a copy, then encoded).
        let (bytes, encode_ms, encode_peak) = timed_peak(|| encode_state(&state).expect("encodes"));
        let (converted, converted_ms, converted_peak) = timed_peak(|| {
            postcard::to_stdvec(&floe_metadata::state::StoredState::from(state.clone())).expect("encodes")
        });
        assert_eq!(converted[..], bytes[12..], "both ways write the same body");
        drop(converted);
        let started = Instant::now();
        let decoded = decode_state(&bytes).expect("decodes");
        let decode = started.elapsed();
        assert_eq!(decoded.topics.len(), state.topics.len());
        last = Some((state.generation, state.applied_index, bytes.clone()));
        println!(
            "{partitions:>10}  {:>7.2}  {:>8.0}  {encode_ms:>9.0}  {:>8.0}  {converted_ms:>12.0}  {:>8.0}  {:>9.0}  {:>11.0}  {:>7.0}",
            build.as_secs_f64(),
            clone.as_secs_f64() * 1e3,
            encode_peak as f64 / f64::from(partitions),
            converted_peak as f64 / f64::from(partitions),
            decode.as_secs_f64() * 1e3,
            bytes.len() as f64 / f64::from(partitions),
            resident as f64 / f64::from(partitions),
        );
    }
    if let (Some(dir), Some((generation, index, bytes))) = (archive_dir, last) {
        let name = floe_metadata::archive::ArchiveName::State { generation, index }.to_string();
        let path = std::path::Path::new(dir).join("metadata").join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("the archive directory");
        std::fs::write(&path, bytes).expect("the archive object");
        println!("archived: {}", path.display());
    }
}
