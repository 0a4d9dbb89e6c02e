//! The state archive format: a whole [`State`] as stored in the object store, so a cluster that
//! lost every metadata disk can be rebuilt from the bucket (`floe metadata restore`).
//!
//! Layout: magic `FLOEMST1` (8 bytes) | crc32c of the body (u32 LE) | body (postcard `State`).
//! Objects are named `state-<applied index, 20 digits>.snap`, so the newest sorts last.

use crate::state::State;

const MAGIC: [u8; 8] = *b"FLOEMST1";
/// Name prefix of archived states.
pub const ARCHIVE_PREFIX: &str = "state-";
/// Name of the file in a metadata data directory holding a restored state until the new
/// cluster's first leader replicates it.
pub const RESTORE_SEED_FILE: &str = "restore-seed";

/// The object name for a state at `applied_index`.
pub fn archive_name(applied_index: u64) -> String {
    format!("{ARCHIVE_PREFIX}{applied_index:020}.snap")
}

pub fn encode(state: &State) -> Result<Vec<u8>, String> {
    let body = postcard::to_stdvec(state).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(body.len() + 12);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

pub fn decode(bytes: &[u8]) -> Result<State, String> {
    if bytes.len() < 12 || bytes[..8] != MAGIC {
        return Err("not a Floe state archive".into());
    }
    let crc = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if crc32c::crc32c(&bytes[12..]) != crc {
        return Err("state archive checksum mismatch".into());
    }
    postcard::from_bytes(&bytes[12..]).map_err(|e| format!("state archive body: {e}"))
}
