//! Snapshots of the whole [`State`], so the journal can be cut short.
//!
//! A snapshot file `snapshot-<applied index>.snap` is an 8-byte magic, `crc32c: u32 LE` of the
//! body, then the body: the postcard-encoded state. It is written to a temporary name, fsynced
//! and renamed, so a crash leaves either the old snapshot or the new one, never half of one.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::state::State;

const MAGIC: [u8; 8] = *b"FLOESNP1";

fn snapshot_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("snapshot-{index:020}.snap"))
}

fn snapshot_files(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if let Some(index) = name.strip_prefix("snapshot-").and_then(|n| n.strip_suffix(".snap"))
            && let Ok(index) = index.parse::<u64>()
        {
            files.push((index, path));
        }
    }
    files.sort();
    Ok(files)
}

/// Writes a snapshot of `state` and removes older ones.
pub fn write(dir: &Path, state: &State) -> io::Result<()> {
    let body = postcard::to_stdvec(state).map_err(io::Error::other)?;
    let path = snapshot_path(dir, state.applied_index);
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp)?;
    file.write_all(&MAGIC)?;
    file.write_all(&crc32c::crc32c(&body).to_le_bytes())?;
    file.write_all(&body)?;
    file.sync_all()?;
    fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    for (index, old) in snapshot_files(dir)? {
        if index < state.applied_index {
            fs::remove_file(old)?;
        }
    }
    Ok(())
}

/// Loads the newest snapshot in `dir`, or an empty state when there is none. A snapshot that
/// fails its checksum is an error: the journal before it was deleted, so skipping it would lose
/// state silently.
pub fn load(dir: &Path) -> io::Result<State> {
    fs::create_dir_all(dir)?;
    let Some((index, path)) = snapshot_files(dir)?.pop() else {
        return Ok(State::default());
    };
    let bytes = fs::read(&path)?;
    let corrupt = |reason: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {reason}", path.display()));
    if bytes.len() < 12 || bytes[..8] != MAGIC {
        return Err(corrupt("not a Floe snapshot"));
    }
    let crc = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if crc32c::crc32c(&bytes[12..]) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    let state: State = postcard::from_bytes(&bytes[12..]).map_err(|e| corrupt(&e.to_string()))?;
    if state.applied_index != index {
        return Err(corrupt("applied index does not match the file name"));
    }
    Ok(state)
}
