//! Encoding and decoding a whole metadata state, as a snapshot or bucket archive does:
//! `archive::encode_state` (convert to the stored layout, then postcard) and `decode_state`.
//! The state: 200 topics of 10 partitions, 4,000 segment commits of 50 chunks each (200,000
//! index entries over 4,000 objects).

use std::collections::BTreeMap;

use criterion::{Criterion, criterion_group, criterion_main};
use floe_metadata::archive::{decode_state, encode_state};
use floe_metadata::command::{BatchSummary, ChunkCommit, Command, SegmentCommit};
use floe_metadata::state::State;

const TOPICS: u32 = 200;
const PARTITIONS: i32 = 10;
const COMMITS: u32 = 4_000;
const CHUNKS_PER_COMMIT: u32 = 50;

fn topic_id(n: u32) -> uuid::Uuid {
    uuid::Uuid::from_u128(u128::from(n) + 1)
}

fn state() -> State {
    let mut state = State::default();
    let mut index = 0;
    let mut apply = |state: &mut State, command: Command| {
        index += 1;
        state.apply(index, command).expect("applies");
    };
    for t in 0..TOPICS {
        let name = format!("topic-{t}");
        let create =
            Command::CreateTopic { name, topic_id: topic_id(t), partition_count: PARTITIONS, configs: BTreeMap::new() };
        apply(&mut state, create);
    }
    for c in 0..COMMITS {
        let chunks = (0..CHUNKS_PER_COMMIT)
            .map(|i| {
                let n = c * CHUNKS_PER_COMMIT + i;
                ChunkCommit {
                    topic_id: topic_id(n % TOPICS),
                    partition: (n / TOPICS % PARTITIONS as u32) as i32,
                    byte_start: u64::from(i) * 1_000,
                    byte_len: 1_000,
                    crc32c: n,
                    batches: vec![BatchSummary { offset_count: 10, timestamp_max: i64::from(n), base_sequence: -1 }],
                    producer: None,
                    uncompressed_bytes: 4_000,
                }
            })
            .collect();
        let key = format!("segments/{c:08}");
        apply(&mut state, Command::CommitSegment(SegmentCommit { key, object_bytes: 50_024, chunks }));
    }
    state
}

fn bench(c: &mut Criterion) {
    let state = state();
    let bytes = encode_state(&state).expect("encodes");
    eprintln!("state archive: {} bytes", bytes.len());
    let mut group = c.benchmark_group("state_archive");
    group.sample_size(20);
    group.bench_function("encode", |b| b.iter(|| encode_state(&state).expect("encodes")));
    group.bench_function("decode", |b| b.iter(|| decode_state(&bytes).expect("decodes")));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
