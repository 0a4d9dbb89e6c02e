//! The object key scheme. Keys are never reused: every segment gets a fresh UUIDv7 (time-ordered,
//! so a listing reads oldest first) and is written with create-only semantics, so a reused key
//! would fail loudly instead of overwriting acknowledged data.

use std::fmt;

/// Directory under the store prefix that holds segment objects.
pub const SEGMENTS_DIR: &str = "segments";

/// Ending of the keys of objects compaction writes.
const COMPACTED_SUFFIX: &str = ".compacted.seg";

/// The name of one segment object, unique for the life of the bucket.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentKey(String);

impl SegmentKey {
    /// A fresh, never-before-used key.
    pub fn generate() -> Self {
        Self(format!("{SEGMENTS_DIR}/{}.seg", uuid::Uuid::now_v7().simple()))
    }

    /// A fresh key for an object written by compaction (told apart by its name).
    pub fn generate_compacted() -> Self {
        Self(format!("{SEGMENTS_DIR}/{}{COMPACTED_SUFFIX}", uuid::Uuid::now_v7().simple()))
    }

    /// Whether compaction wrote this object.
    pub fn is_compacted(&self) -> bool {
        self.0.ends_with(COMPACTED_SUFFIX)
    }

    /// Rebuilds a key read back from metadata; keys are opaque to everybody but this module.
    pub fn from_stored(key: String) -> Self {
        Self(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SegmentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
