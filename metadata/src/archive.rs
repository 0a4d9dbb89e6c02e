//! The metadata archive in the object store, from which a cluster that lost every metadata disk
//! is rebuilt (`floe metadata restore`): state snapshots plus the committed command stream.
//!
//! Two kinds of objects, both `magic (8 bytes) | crc32c of the body (u32 LE) | postcard body`:
//! - `state-<generation>-<index>.snap` (magic `FLOEMST5`): a whole [`State`] as applied up to log
//!   index `index`.
//! - `log-<generation>-<after>-<last>.cmds` (magic `FLOEMLG5`): the commands applied after index
//!   `after` up to and including index `last`, in order, with their indexes.
//!
//! Numbers are 20 zero-padded digits, so names sort by (generation, index). Log indexes restart
//! when a cluster is rebuilt from the archive, which is why the generation leads. A restore takes
//! the newest snapshot and replays the chain of log objects that starts where it ends: each link's
//! `after` is the previous link's `last`. Writers start every chain with a snapshot, so chains of
//! different leaders never need to be joined.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::command::Command;
use crate::state::State;

/// The last byte of both magics is `b'0'` plus the format version ([`crate::FORMAT_VERSION`]):
/// a digit up to format 9, `:` for format 10, and on in ASCII; objects of every earlier version
/// are read too.
const STATE_MAGIC: [u8; 7] = *b"FLOEMST";
const LOG_MAGIC: [u8; 7] = *b"FLOEMLG";
const STATE_PREFIX: &str = "state-";
const LOG_PREFIX: &str = "log-";
/// Name of the file in a metadata data directory holding a restored state until the new
/// cluster's first leader replicates it.
pub const RESTORE_SEED_FILE: &str = "restore-seed";

/// Why an archive object cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{0}: not a Floe metadata archive object")]
    BadMagic(&'static str),
    #[error("{0}: checksum mismatch")]
    Checksum(&'static str),
    #[error("{what}: {why}")]
    Body { what: &'static str, why: String },
    #[error("log object {name}: {why}")]
    Chain { name: String, why: String },
}

/// An archive object name, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ArchiveName {
    State { generation: u64, index: u64 },
    Log { generation: u64, after: u64, last: u64 },
}

impl ArchiveName {
    pub fn parse(name: &str) -> Option<Self> {
        let number = |s: &str| (s.len() == 20).then(|| s.parse::<u64>().ok()).flatten();
        if let Some(rest) = name.strip_prefix(STATE_PREFIX).and_then(|r| r.strip_suffix(".snap")) {
            let (generation, index) = rest.split_once('-')?;
            return Some(Self::State { generation: number(generation)?, index: number(index)? });
        }
        let rest = name.strip_prefix(LOG_PREFIX).and_then(|r| r.strip_suffix(".cmds"))?;
        let mut parts = rest.split('-');
        let (generation, after, last) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let (after, last) = (number(after)?, number(last)?);
        (after < last).then_some(Self::Log { generation: number(generation)?, after, last })
    }

    /// (generation, index) of the newest state this object brings a restore to.
    pub fn position(&self) -> (u64, u64) {
        match *self {
            Self::State { generation, index } => (generation, index),
            Self::Log { generation, last, .. } => (generation, last),
        }
    }
}

impl std::fmt::Display for ArchiveName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::State { generation, index } => write!(f, "{STATE_PREFIX}{generation:020}-{index:020}.snap"),
            Self::Log { generation, after, last } => {
                write!(f, "{LOG_PREFIX}{generation:020}-{after:020}-{last:020}.cmds")
            }
        }
    }
}

/// `value` encoded after its frame: the magic, the version byte and the body's crc32c, written
/// into one buffer (a large state's body is not copied again).
fn encode_framed(magic: [u8; 7], what: &'static str, value: &impl Serialize) -> Result<Vec<u8>, ArchiveError> {
    let mut out = magic.to_vec();
    out.push(b'0' + crate::FORMAT_VERSION as u8);
    out.extend_from_slice(&[0; 4]);
    let mut out = postcard::to_extend(value, out).map_err(|e| ArchiveError::Body { what, why: e.to_string() })?;
    let crc = crc32c::crc32c(&out[12..]);
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The body of an archive object and its format version.
fn unframe<'a>(magic: [u8; 7], what: &'static str, bytes: &'a [u8]) -> Result<(u32, &'a [u8]), ArchiveError> {
    if bytes.len() < 12 || bytes[..7] != magic {
        return Err(ArchiveError::BadMagic(what));
    }
    let version = u32::from(bytes[7].wrapping_sub(b'0'));
    if !(1..=crate::FORMAT_VERSION).contains(&version) {
        return Err(ArchiveError::Body { what, why: format!("format {version}, which this Floe does not read") });
    }
    let crc = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if crc32c::crc32c(&bytes[12..]) != crc {
        return Err(ArchiveError::Checksum(what));
    }
    Ok((version, &bytes[12..]))
}

/// Encodes a copy of the state (taken by value: it becomes the stored form without another copy).
pub fn encode_state(state: &State) -> Result<Vec<u8>, ArchiveError> {
    encode_framed(STATE_MAGIC, "state", &crate::state::stored::AsStored(state))
}

pub fn decode_state(bytes: &[u8]) -> Result<State, ArchiveError> {
    let (version, body) = unframe(STATE_MAGIC, "state", bytes)?;
    crate::state::stored::decode_state(version, body)
        .map(State::from)
        .map_err(|e| ArchiveError::Body { what: "state", why: e.to_string() })
}

/// Encodes applied commands with their log indexes, in applied order.
pub fn encode_log(commands: &[(u64, &Command)]) -> Result<Vec<u8>, ArchiveError> {
    encode_framed(LOG_MAGIC, "log", &commands)
}

/// Commands of every format so far decode (`state::stored` reads older formats' restored states).
pub fn decode_log(bytes: &[u8]) -> Result<Vec<(u64, Command)>, ArchiveError> {
    let (version, body) = unframe(LOG_MAGIC, "log", bytes)?;
    crate::state::stored::decoding(version, || postcard::from_bytes(body))
        .map_err(|e| ArchiveError::Body { what: "log", why: e.to_string() })
}

/// What a restore reads: the newest snapshot and the log objects chained after it, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct RestorePlan {
    pub snapshot: ArchiveName,
    pub logs: Vec<ArchiveName>,
}

/// Picks the newest snapshot among `names` (unparseable names are ignored) and follows the log
/// chain from it. `None` when there is no snapshot.
pub fn plan_restore<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<RestorePlan> {
    let parsed: Vec<ArchiveName> = names.into_iter().filter_map(ArchiveName::parse).collect();
    let snapshot = parsed.iter().filter(|n| matches!(n, ArchiveName::State { .. })).max_by_key(|n| n.position())?;
    let (generation, mut position) = snapshot.position();
    // A chain link per starting index; the longest reaching link wins if writers ever overlap.
    let mut links: BTreeMap<u64, ArchiveName> = BTreeMap::new();
    for name in &parsed {
        if let ArchiveName::Log { generation: g, after, last } = *name
            && g == generation
            && links.get(&after).is_none_or(|n| n.position().1 < last)
        {
            links.insert(after, *name);
        }
    }
    let mut logs = Vec::new();
    while let Some(link) = links.get(&position) {
        position = link.position().1;
        logs.push(*link);
    }
    Some(RestorePlan { snapshot: *snapshot, logs })
}

/// Applies one archived log object's commands to `state`, which must be exactly at the index
/// the object starts after. Checks the indexes so a damaged object is refused, not half-applied
/// out of order.
pub fn replay_log(state: &mut State, name: ArchiveName, commands: Vec<(u64, Command)>) -> Result<(), ArchiveError> {
    let ArchiveName::Log { after, last, .. } = name else {
        return Err(ArchiveError::Chain { name: name.to_string(), why: "not a log object".into() });
    };
    let chain = |why: String| ArchiveError::Chain { name: name.to_string(), why };
    if state.applied_index != after {
        return Err(chain(format!("starts after index {after}, but the state is at {}", state.applied_index)));
    }
    let mut previous = after;
    for (index, _) in &commands {
        if *index <= previous || *index > last {
            return Err(chain(format!("index {index} out of order (after {previous}, last {last})")));
        }
        previous = *index;
    }
    if previous != last {
        return Err(chain(format!("ends at index {previous}, its name says {last}")));
    }
    for (index, command) in commands {
        // Rejected commands were rejected the same way when first applied: nothing to do.
        let _ = state.apply(index, command);
    }
    Ok(())
}

/// Archive objects no restore needs once only the newest `snapshots_kept` snapshots are kept:
/// older snapshots and log objects ending at or before the oldest kept one.
pub fn obsolete<'a>(names: &[&'a str], snapshots_kept: usize) -> Vec<&'a str> {
    let mut snapshots: Vec<(u64, u64)> = names
        .iter()
        .filter_map(|n| ArchiveName::parse(n))
        .filter(|a| matches!(a, ArchiveName::State { .. }))
        .map(|a| a.position())
        .collect();
    snapshots.sort_unstable();
    let Some(oldest_kept) = snapshots.get(snapshots.len().saturating_sub(snapshots_kept.max(1))).copied() else {
        return Vec::new();
    };
    names
        .iter()
        .copied()
        .filter(|n| match ArchiveName::parse(n) {
            Some(a @ ArchiveName::State { .. }) => a.position() < oldest_kept,
            Some(a @ ArchiveName::Log { .. }) => a.position() <= oldest_kept,
            None => false,
        })
        .collect()
}

#[cfg(test)]
mod tests;
