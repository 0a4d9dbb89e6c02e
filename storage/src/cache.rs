//! A bounded in-memory cache of recently written and read chunks, so that tail consumers of the
//! agent that wrote the data cause no GET. Memory is bounded by `capacity_bytes`; the oldest
//! insertions are evicted first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;

use crate::segment::ChunkRef;

type ChunkId = (String, u64);

/// Chunk bytes keyed by object key and position. Entries were verified before insertion.
#[derive(Debug)]
pub struct ChunkCache {
    capacity_bytes: u64,
    inner: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    chunks: HashMap<ChunkId, Bytes>,
    order: VecDeque<ChunkId>,
    bytes: u64,
}

impl ChunkCache {
    pub fn new(capacity_bytes: u64) -> Self {
        Self { capacity_bytes, inner: Mutex::new(CacheState::default()) }
    }

    pub fn get(&self, chunk: &ChunkRef) -> Option<Bytes> {
        let state = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let found = state.chunks.get(&(chunk.key.as_str().to_owned(), chunk.byte_start)).cloned();
        crate::metrics::CACHE_LOOKUPS.with_label_values(&[if found.is_some() { "hit" } else { "miss" }]).inc();
        found
    }

    pub fn insert(&self, chunk: &ChunkRef, bytes: Bytes) {
        let len = bytes.len() as u64;
        if len > self.capacity_bytes {
            return;
        }
        let id = (chunk.key.as_str().to_owned(), chunk.byte_start);
        let mut state = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if state.chunks.insert(id.clone(), bytes).is_some() {
            return;
        }
        state.order.push_back(id);
        state.bytes += len;
        while state.bytes > self.capacity_bytes {
            let Some(old) = state.order.pop_front() else { break };
            if let Some(evicted) = state.chunks.remove(&old) {
                state.bytes -= evicted.len() as u64;
            }
        }
    }
}
