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

    /// Whether compaction wrote the object of a key as metadata stores it (read without
    /// copying the key into a `SegmentKey`).
    pub fn stored_is_compacted(key: &str) -> bool {
        key.ends_with(COMPACTED_SUFFIX)
    }

    /// Rebuilds a key read back from metadata; keys are opaque to everybody but this module.
    pub fn from_stored(key: String) -> Self {
        Self(key)
    }

    /// A key another agent names (asking this one for a block of it): only a segment key's
    /// shape is taken, so nothing outside the segments is ever read on a peer's word.
    pub fn parse(key: &str) -> Option<Self> {
        let name = key.strip_prefix(SEGMENTS_DIR)?.strip_prefix('/')?;
        let stem = name.strip_suffix(COMPACTED_SUFFIX).or_else(|| name.strip_suffix(".seg"))?;
        (!stem.is_empty() && stem.len() <= 64 && stem.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
            .then(|| Self(key.to_owned()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_segment_keys_parse_from_a_peer() {
        for key in [SegmentKey::generate(), SegmentKey::generate_compacted()] {
            assert_eq!(SegmentKey::parse(key.as_str()), Some(key));
        }
        for bad in
            ["segments/.seg", "segments/../tables/x.seg", "tables/abc.seg", "segments/abc", "segments/a b.seg", ""]
        {
            assert_eq!(SegmentKey::parse(bad), None, "{bad:?}");
        }
    }
}
