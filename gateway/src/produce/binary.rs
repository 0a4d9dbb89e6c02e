//! Records sent as raw bytes, so devices do not pay base64's third:
//!
//! - `Content-Type: application/octet-stream`: the body is one record's value; its key,
//!   partition, timestamp and headers come from the query (`key` as text or `key_base64`,
//!   `partition_id`, `timestamp` in ms) and from `Floe-Record-Header: NAME=VALUE` request
//!   headers (repeatable; values are text).
//! - `Content-Type: application/vnd.floe.records+binary`: many records in a length-prefixed
//!   framing (big-endian), version byte first:
//!
//! ```text
//! u8  version (1)
//! then, until the body ends, records:
//!   u32 length of the rest of this record
//!   i32 partition (-1: placed as a Kafka producer would place it)
//!   i64 timestamp in ms since the epoch (-1: now)
//!   i32 key length (-1: null key), key bytes
//!   i32 value length (-1: null value), value bytes
//!   u16 header count, each: u16 name length, name (UTF-8), i32 value length (-1: null), value
//! ```
//!
//! A record whose fields do not fit its length is refused alone (422); a length that runs past
//! the body fails the request (400), as nothing after it can be found.

use axum::http::HeaderMap;
use bytes::{Buf, Bytes};
use floe_agent::record_batch::build::NewRecord;
use serde::Deserialize;

use super::RecordError;
use super::json::{DataReport, DataType, ParsedRecord};
use crate::error::HttpError;
use crate::limits::REQUEST_RECORDS_MAX;

/// The framed format's media type.
pub(crate) const FRAMED_MEDIA_TYPE: &str = "application/vnd.floe.records+binary";
/// The framed format's version this agent writes and reads.
const FRAMED_VERSION: u8 = 1;
/// The request header carrying one record header of an `application/octet-stream` produce.
pub(crate) const RECORD_HEADER: &str = "floe-record-header";
/// Headers one record may carry (Kafka sets no bound; each costs a few bytes in a batch).
const RECORD_HEADERS_MAX: usize = 1_000;

/// The query of an `application/octet-stream` produce.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRecordParams {
    partition_id: Option<i32>,
    /// The key as text (UTF-8).
    key: Option<String>,
    /// The key as base64 bytes.
    key_base64: Option<String>,
    /// Milliseconds since the epoch; now when absent.
    timestamp: Option<i64>,
}

fn report(bytes: &Option<Bytes>) -> Option<DataReport> {
    bytes.as_ref().map(|b| DataReport::plain(DataType::Binary, b.len()))
}

fn parsed(partition_id: Option<i32>, record: NewRecord) -> ParsedRecord {
    ParsedRecord {
        partition_id,
        key_report: report(&record.key),
        value_report: report(&record.value),
        record,
        key_schema: None,
        value_schema: None,
    }
}

/// One record from an `application/octet-stream` body and its request.
pub(crate) fn raw_record(
    params: RawRecordParams,
    headers: &HeaderMap,
    body: Bytes,
    now_ms: i64,
) -> Result<ParsedRecord, HttpError> {
    use base64::Engine;
    let key = match (params.key, params.key_base64) {
        (Some(_), Some(_)) => return Err(HttpError::bad_request("give key or key_base64, not both")),
        (Some(text), None) => Some(Bytes::from(text)),
        (None, Some(b64)) => Some(Bytes::from(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| HttpError::bad_request(format!("key_base64 is not base64: {e}")))?,
        )),
        (None, None) => None,
    };
    let timestamp = match params.timestamp {
        None => now_ms,
        Some(ms) if ms >= 0 => ms,
        Some(ms) => return Err(HttpError::bad_request(format!("timestamp {ms} is before 1970"))),
    };
    let mut record_headers = Vec::new();
    for value in headers.get_all(RECORD_HEADER) {
        if record_headers.len() == RECORD_HEADERS_MAX {
            return Err(HttpError::bad_request(format!("more than {RECORD_HEADERS_MAX} record headers")));
        }
        let text = value.to_str().map_err(|_| HttpError::bad_request("a Floe-Record-Header is not visible ASCII"))?;
        let (name, value) = text
            .split_once('=')
            .ok_or_else(|| HttpError::bad_request(format!("Floe-Record-Header {text:?} is not NAME=VALUE")))?;
        record_headers.push((name.trim().to_owned(), Some(Bytes::copy_from_slice(value.trim().as_bytes()))));
    }
    let record = NewRecord { timestamp, key, value: Some(body), headers: record_headers };
    Ok(parsed(params.partition_id, record))
}

/// The records of an `application/vnd.floe.records+binary` body.
pub(crate) fn framed_records(body: &Bytes, now_ms: i64) -> Result<Vec<Result<ParsedRecord, RecordError>>, HttpError> {
    let mut rest = body.clone();
    match rest.first() {
        Some(&FRAMED_VERSION) => rest.advance(1),
        Some(other) => {
            return Err(HttpError::bad_request(format!(
                "framed records of version {other}; this agent reads version {FRAMED_VERSION}"
            )));
        }
        None => return Err(HttpError::bad_request("the request holds no records")),
    }
    let mut records = Vec::new();
    while !rest.is_empty() {
        if records.len() == REQUEST_RECORDS_MAX {
            return Err(HttpError::too_large(format!("more than {REQUEST_RECORDS_MAX} records in one request")));
        }
        let at = body.len() - rest.len();
        if rest.len() < 4 {
            return Err(HttpError::bad_request(format!("a record length at byte {at} is cut short")));
        }
        let len = rest.get_u32() as usize;
        if len > rest.len() {
            return Err(HttpError::bad_request(format!(
                "the record at byte {at} is {len} bytes long, but {} remain",
                rest.len()
            )));
        }
        let mut one = rest.split_to(len);
        records.push(
            framed_record(&mut one, now_ms).map_err(|why| RecordError::invalid(format!("record at byte {at}: {why}"))),
        );
    }
    if records.is_empty() {
        return Err(HttpError::bad_request("the request holds no records"));
    }
    Ok(records)
}

fn framed_record(buf: &mut Bytes, now_ms: i64) -> Result<ParsedRecord, String> {
    fn need(buf: &Bytes, n: usize, what: &str) -> Result<(), String> {
        if buf.len() < n { Err(format!("its {what} runs past its length")) } else { Ok(()) }
    }
    fn bytes(buf: &mut Bytes, what: &str) -> Result<Option<Bytes>, String> {
        need(buf, 4, what)?;
        match buf.get_i32() {
            -1 => Ok(None),
            n if n < 0 => Err(format!("its {what} length is {n}")),
            n => {
                need(buf, n as usize, what)?;
                Ok(Some(buf.split_to(n as usize)))
            }
        }
    }
    need(buf, 12, "partition and timestamp")?;
    let partition = buf.get_i32();
    let partition_id = match partition {
        -1 => None,
        p if p < 0 => return Err(format!("partition {p}")),
        p => Some(p),
    };
    let timestamp = match buf.get_i64() {
        -1 => now_ms,
        ms if ms < 0 => return Err(format!("timestamp {ms} is before 1970")),
        ms => ms,
    };
    let key = bytes(buf, "key")?;
    let value = bytes(buf, "value")?;
    need(buf, 2, "header count")?;
    let count = usize::from(buf.get_u16());
    if count > RECORD_HEADERS_MAX {
        return Err(format!("{count} headers (at most {RECORD_HEADERS_MAX})"));
    }
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        need(buf, 2, "header name")?;
        let name_len = usize::from(buf.get_u16());
        need(buf, name_len, "header name")?;
        let name = String::from_utf8(buf.split_to(name_len).to_vec()).map_err(|_| "a header name is not UTF-8")?;
        headers.push((name, bytes(buf, "header value")?));
    }
    if !buf.is_empty() {
        return Err(format!("{} bytes follow its headers", buf.len()));
    }
    Ok(parsed(partition_id, NewRecord { timestamp, key, value, headers }))
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};

    use super::*;

    fn record(partition: i32, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&str, &[u8])]) -> Vec<u8> {
        let mut r = BytesMut::new();
        r.put_i32(partition);
        r.put_i64(1_700_000_000_000);
        for part in [key, value] {
            match part {
                None => r.put_i32(-1),
                Some(b) => {
                    r.put_i32(b.len() as i32);
                    r.put_slice(b);
                }
            }
        }
        r.put_u16(headers.len() as u16);
        for (name, value) in headers {
            r.put_u16(name.len() as u16);
            r.put_slice(name.as_bytes());
            r.put_i32(value.len() as i32);
            r.put_slice(value);
        }
        let mut framed = (r.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&r);
        framed
    }

    #[test]
    fn framed_records_are_read_one_by_one_and_a_bad_one_alone_is_refused() {
        let mut body = vec![1];
        body.extend(record(2, Some(b"k"), Some(&[0, 255, 7]), &[("trace", b"t-1")]));
        body.extend(record(-1, None, None, &[]));
        let mut bad = record(0, Some(b"k"), Some(b"v"), &[]);
        bad.truncate(bad.len() - 1); // the header count is cut
        let len = (bad.len() - 4) as u32;
        bad[..4].copy_from_slice(&len.to_be_bytes());
        body.extend(bad);
        body.extend(record(-1, None, Some(b"last"), &[]));
        let records = framed_records(&Bytes::from(body), 5).unwrap();
        assert_eq!(records.len(), 4);
        let first = records[0].as_ref().unwrap();
        assert_eq!(first.partition_id, Some(2));
        assert_eq!(first.record.value.as_deref(), Some(&[0, 255, 7][..]));
        assert_eq!(first.record.headers, vec![("trace".to_owned(), Some(Bytes::from_static(b"t-1")))]);
        assert_eq!(first.record.timestamp, 1_700_000_000_000);
        let tombstone = records[1].as_ref().unwrap();
        assert_eq!((tombstone.partition_id, &tombstone.record.key, &tombstone.record.value), (None, &None, &None));
        let refused = records[2].as_ref().unwrap_err();
        assert!(refused.message.contains("header count runs past"), "{}", refused.message);
        assert_eq!(records[3].as_ref().unwrap().record.value.as_deref(), Some(&b"last"[..]));
    }

    #[test]
    fn a_body_that_cannot_be_followed_fails_whole() {
        let err = |body: Vec<u8>| framed_records(&Bytes::from(body), 0).unwrap_err().message;
        assert!(err(vec![2]).contains("version 2"));
        assert!(err(vec![]).contains("no records"));
        assert!(err(vec![1]).contains("no records"));
        assert!(err(vec![1, 0, 0]).contains("cut short"));
        assert!(err(vec![1, 0, 0, 1, 0, 9]).contains("256 bytes long, but 1 remain"));
    }
}
