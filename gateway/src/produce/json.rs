//! The Confluent REST Proxy v3 record shape: what a produce request's records look like, and
//! what each record's delivery report says.

use base64::Engine;
use bytes::Bytes;
use floe_agent::record_batch::build::NewRecord;
use serde::{Deserialize, Serialize};

use super::RecordError;

/// One record as a client sends it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordRequest {
    #[serde(default)]
    pub(crate) partition_id: Option<i32>,
    #[serde(default)]
    pub(crate) headers: Vec<HeaderRequest>,
    #[serde(default)]
    pub(crate) key: Option<DataRequest>,
    #[serde(default)]
    pub(crate) value: Option<DataRequest>,
    /// RFC 3339 (`2026-12-01T10:00:00.123Z`) or milliseconds since the epoch.
    #[serde(default)]
    pub(crate) timestamp: Option<TimestampRequest>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeaderRequest {
    pub(crate) name: String,
    /// Base64, or null.
    #[serde(default)]
    pub(crate) value: Option<String>,
}

/// A key or value: `data` read as `type` says. Schema-registry fields are refused by name so
/// the client learns why, rather than having its record written without them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DataRequest {
    #[serde(default, rename = "type")]
    pub(crate) data_type: Option<DataType>,
    #[serde(default)]
    pub(crate) data: serde_json::Value,
    #[serde(default)]
    pub(crate) schema_id: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) schema_version: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) subject: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) subject_name_strategy: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) schema: Option<serde_json::Value>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum DataType {
    /// Base64 bytes.
    Binary,
    /// Any JSON value, stored as its compact text.
    Json,
    /// A JSON string, stored as UTF-8.
    String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum TimestampRequest {
    Millis(i64),
    Text(String),
}

/// What the delivery report says of a key or value.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct DataReport {
    #[serde(rename = "type")]
    pub(crate) data_type: DataType,
    pub(crate) size: usize,
}

/// The fields of a record that are checked once its topic is known.
#[derive(Debug)]
pub(crate) struct ParsedRecord {
    pub(crate) partition_id: Option<i32>,
    pub(crate) record: NewRecord,
    pub(crate) key_report: Option<DataReport>,
    pub(crate) value_report: Option<DataReport>,
}

impl RecordRequest {
    /// The record's bytes. `now_ms` is its timestamp when it names none.
    pub(crate) fn into_record(self, now_ms: i64) -> Result<ParsedRecord, RecordError> {
        let (key, key_report) = data(self.key, "key")?;
        let (value, value_report) = data(self.value, "value")?;
        let timestamp = match self.timestamp {
            None => now_ms,
            Some(TimestampRequest::Millis(ms)) if ms >= 0 => ms,
            Some(TimestampRequest::Millis(ms)) => {
                return Err(RecordError::invalid(format!("timestamp {ms} is before 1970")));
            }
            Some(TimestampRequest::Text(text)) => chrono::DateTime::parse_from_rfc3339(&text)
                .map_err(|e| RecordError::invalid(format!("timestamp {text:?} is not RFC 3339: {e}")))?
                .timestamp_millis(),
        };
        let headers = self
            .headers
            .into_iter()
            .map(|h| {
                let value = h.value.map(|v| base64_bytes(&v, "header value")).transpose()?;
                Ok((h.name, value))
            })
            .collect::<Result<Vec<_>, RecordError>>()?;
        Ok(ParsedRecord {
            partition_id: self.partition_id,
            record: NewRecord { timestamp, key, value, headers },
            key_report,
            value_report,
        })
    }
}

fn data(data: Option<DataRequest>, what: &str) -> Result<(Option<Bytes>, Option<DataReport>), RecordError> {
    let Some(data) = data else { return Ok((None, None)) };
    let schema_fields =
        [&data.schema_id, &data.schema_version, &data.subject, &data.subject_name_strategy, &data.schema];
    if schema_fields.iter().any(|f| f.is_some()) {
        return Err(RecordError::invalid(format!(
            "{what}: schema registry fields are not supported; send BINARY, JSON or STRING data"
        )));
    }
    let data_type = data.data_type.unwrap_or(DataType::Json);
    let bytes = match (data_type, data.data) {
        (_, serde_json::Value::Null) => return Ok((None, Some(DataReport { data_type, size: 0 }))),
        (DataType::Binary, serde_json::Value::String(s)) => base64_bytes(&s, what)?,
        (DataType::String, serde_json::Value::String(s)) => Bytes::from(s),
        (DataType::Json, v) => Bytes::from(serde_json::to_vec(&v).map_err(|e| RecordError::invalid(e.to_string()))?),
        (t, _) => return Err(RecordError::invalid(format!("{what}: {t:?} data must be a JSON string"))),
    };
    let report = DataReport { data_type, size: bytes.len() };
    Ok((Some(bytes), Some(report)))
}

fn base64_bytes(text: &str, what: &str) -> Result<Bytes, RecordError> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map(Bytes::from)
        .map_err(|e| RecordError::invalid(format!("{what} is not base64: {e}")))
}

/// Milliseconds since the epoch as RFC 3339 with milliseconds, as REST v3 reports timestamps.
pub(crate) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}
