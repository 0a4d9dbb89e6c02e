//! The fixed-size trailer at the end of every segment object.
//!
//! | bytes  | field            | meaning                                      |
//! |--------|------------------|----------------------------------------------|
//! | 0..4   | `footer_bytes`   | length of the footer just before the trailer |
//! | 4..8   | `footer_crc32c`  | CRC-32C of the footer bytes                  |
//! | 8..12  | `chunk_count`    | number of chunks, repeated from the footer   |
//! | 12..14 | `format_version` | [`FORMAT_VERSION`] when written today        |
//! | 14..16 | `flags`          | reserved: 0; readers reject other values    |
//! | 16..24 | `magic`          | [`MAGIC`]                                    |
//!
//! All integers are little-endian. The trailer's layout is the same in every version; the
//! version says what the footer holds:
//!
//! - 1: the chunk entries.
//! - 2: the chunk entries, then a CRC-32C of every block of the data section
//!   ([`super::footer::BlockChecksums`]), so a block read alone (by the block cache, from the store,
//!   its disk tier or a peer) is checked too.

/// Bytes of the trailer; readers fetch exactly this many from the end of the object first.
pub const TRAILER_BYTES: usize = 24;
/// Identifies a Floe segment object.
pub const MAGIC: [u8; 8] = *b"FLOESEG\0";
/// Version of the footer and trailer layout written today. A reader rejects versions it does not
/// know.
pub const FORMAT_VERSION: u16 = 2;
/// The oldest version a reader still reads.
pub const FORMAT_VERSION_MIN: u16 = 1;

/// The decoded trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentTrailer {
    pub footer_bytes: u32,
    pub footer_crc32c: u32,
    pub chunk_count: u32,
    /// What the footer holds: 1, or 2 (with block checksums).
    pub format_version: u16,
}

impl SegmentTrailer {
    pub fn encode(&self) -> [u8; TRAILER_BYTES] {
        let mut out = [0u8; TRAILER_BYTES];
        out[0..4].copy_from_slice(&self.footer_bytes.to_le_bytes());
        out[4..8].copy_from_slice(&self.footer_crc32c.to_le_bytes());
        out[8..12].copy_from_slice(&self.chunk_count.to_le_bytes());
        out[12..14].copy_from_slice(&self.format_version.to_le_bytes());
        out[14..16].copy_from_slice(&0u16.to_le_bytes());
        out[16..24].copy_from_slice(&MAGIC);
        out
    }

    /// Decodes and checks magic and version; the footer checksum is checked by the footer reader.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let bytes: &[u8; TRAILER_BYTES] =
            bytes.try_into().map_err(|_| format!("trailer must be {TRAILER_BYTES} bytes, got {}", bytes.len()))?;
        if bytes[16..24] != MAGIC {
            return Err("bad magic: not a Floe segment, or truncated".to_owned());
        }
        let format_version = u16::from_le_bytes([bytes[12], bytes[13]]);
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&format_version) {
            return Err(format!("unknown segment format version {format_version}"));
        }
        if bytes[14..16] != [0, 0] {
            return Err("unknown trailer flags".to_owned());
        }
        let u32_at = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        Ok(Self { footer_bytes: u32_at(0), footer_crc32c: u32_at(4), chunk_count: u32_at(8), format_version })
    }
}
