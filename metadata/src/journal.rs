//! The durable local journal of applied commands: what a single metadata node recovers from,
//! together with its latest snapshot. (With Raft, this role is played by the replicated log.)
//!
//! Files are `journal-<first index>.log` in the metadata directory: an 8-byte magic, then
//! records of `payload_bytes: u32 LE | crc32c: u32 LE | index: u64 LE | payload`, where the
//! CRC-32C covers the index and the payload (a postcard-encoded [`Command`]). An append is
//! acknowledged only after `fdatasync`. On open, a torn or corrupt tail (a crash mid-write) is cut
//! off at the last whole record; anything before it was fsynced and is kept.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::command::Command;
use crate::limits::COMMAND_BYTES_MAX;

const MAGIC: [u8; 8] = *b"FLOEJNL1";
const RECORD_HEADER_BYTES: usize = 16;

/// The journal file currently appended to.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    file: File,
    path: PathBuf,
    bytes: u64,
}

fn journal_path(dir: &Path, first_index: u64) -> PathBuf {
    dir.join(format!("journal-{first_index:020}.log"))
}

/// Journal files in `dir` with their first index, oldest first.
fn journal_files(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if let Some(index) = name.strip_prefix("journal-").and_then(|n| n.strip_suffix(".log"))
            && let Ok(index) = index.parse::<u64>()
        {
            files.push((index, path));
        }
    }
    files.sort();
    Ok(files)
}

pub(crate) fn encode_command(command: &Command) -> io::Result<Vec<u8>> {
    let payload = postcard::to_stdvec(command).map_err(io::Error::other)?;
    if payload.len() > COMMAND_BYTES_MAX {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("command of {} bytes", payload.len())));
    }
    Ok(payload)
}

impl Journal {
    /// Opens the journal in `dir`, returning the entries after `snapshot_index` in order, and a
    /// journal ready to append entry `next_index` onwards.
    pub fn open(dir: &Path, snapshot_index: u64) -> io::Result<(Self, Vec<(u64, Command)>)> {
        fs::create_dir_all(dir)?;
        let mut entries = Vec::new();
        let mut last: Option<(PathBuf, u64)> = None;
        let mut expected = None::<u64>;
        for (_, path) in journal_files(dir)? {
            let valid_bytes = read_records(&path, |index, command| {
                if index > snapshot_index {
                    if let Some(expected) = expected
                        && index != expected
                    {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("journal jumps from {} to {index}", expected - 1),
                        ));
                    }
                    entries.push((index, command));
                }
                expected = Some(index + 1);
                Ok(())
            })?;
            last = Some((path, valid_bytes));
        }
        if let Some((first, _)) = entries.first()
            && *first != snapshot_index + 1
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("snapshot ends at {snapshot_index} but the journal resumes at {first}"),
            ));
        }
        let journal = match last {
            Some((path, valid_bytes)) => {
                let file = OpenOptions::new().read(true).write(true).open(&path)?;
                if file.metadata()?.len() != valid_bytes {
                    tracing::warn!(path = %path.display(), valid_bytes, "cutting a torn journal tail");
                    file.set_len(valid_bytes)?;
                    file.sync_all()?;
                }
                let mut file = file;
                file.seek(SeekFrom::End(0))?;
                Self { dir: dir.to_owned(), file, path, bytes: valid_bytes }
            }
            None => Self::create(dir, snapshot_index + 1)?,
        };
        Ok((journal, entries))
    }

    fn create(dir: &Path, first_index: u64) -> io::Result<Self> {
        let path = journal_path(dir, first_index);
        let mut file = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path)?;
        file.write_all(&MAGIC)?;
        file.sync_all()?;
        File::open(dir)?.sync_all()?;
        Ok(Self { dir: dir.to_owned(), file, path, bytes: MAGIC.len() as u64 })
    }

    /// Bytes in the current journal file.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Appends encoded entries and makes them durable before returning.
    pub fn append(&mut self, entries: &[(u64, Vec<u8>)]) -> io::Result<()> {
        let mut buffer = Vec::with_capacity(entries.iter().map(|(_, p)| p.len() + RECORD_HEADER_BYTES).sum());
        for (index, payload) in entries {
            let payload_bytes = u32::try_from(payload.len()).map_err(io::Error::other)?;
            let crc = crc32c::crc32c_append(crc32c::crc32c(&index.to_le_bytes()), payload);
            buffer.extend_from_slice(&payload_bytes.to_le_bytes());
            buffer.extend_from_slice(&crc.to_le_bytes());
            buffer.extend_from_slice(&index.to_le_bytes());
            buffer.extend_from_slice(payload);
        }
        self.file.write_all(&buffer)?;
        self.file.sync_data()?;
        self.bytes += buffer.len() as u64;
        Ok(())
    }

    /// Starts a new file at `first_index` (after a snapshot covering everything before it) and
    /// deletes the older files, which the snapshot makes redundant.
    pub fn rotate(&mut self, first_index: u64) -> io::Result<()> {
        let next = Self::create(&self.dir, first_index)?;
        let old = std::mem::replace(self, next);
        drop(old.file);
        for (index, path) in journal_files(&self.dir)? {
            if index < first_index {
                fs::remove_file(path)?;
            }
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads whole, valid records, calling `each` for every one, and returns the byte length of the
/// valid prefix. Stops at the first torn or corrupt record.
fn read_records(path: &Path, mut each: impl FnMut(u64, Command) -> io::Result<()>) -> io::Result<u64> {
    let mut reader = BufReader::new(File::open(path)?);
    let mut magic = [0u8; 8];
    if reader.read_exact(&mut magic).is_err() || magic != MAGIC {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a Floe journal", path.display())));
    }
    let mut valid = MAGIC.len() as u64;
    loop {
        let mut header = [0u8; RECORD_HEADER_BYTES];
        if reader.read_exact(&mut header).is_err() {
            return Ok(valid);
        }
        let payload_bytes = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let index_bytes: [u8; 8] = header[8..16].try_into().expect("8 bytes");
        if payload_bytes > COMMAND_BYTES_MAX {
            return Ok(valid);
        }
        let mut payload = vec![0u8; payload_bytes];
        if reader.read_exact(&mut payload).is_err() {
            return Ok(valid);
        }
        if crc32c::crc32c_append(crc32c::crc32c(&index_bytes), &payload) != crc {
            return Ok(valid);
        }
        let Ok(command) = postcard::from_bytes::<Command>(&payload) else {
            return Ok(valid);
        };
        each(u64::from_le_bytes(index_bytes), command)?;
        valid += (RECORD_HEADER_BYTES + payload_bytes) as u64;
    }
}
