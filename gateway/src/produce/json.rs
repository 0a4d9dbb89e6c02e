//! The Confluent REST Proxy v3 record shape: what a produce request's records look like, and
//! what each record's delivery report says.

use base64::Engine;
use bytes::Bytes;
use floe_agent::record_batch::build::NewRecord;
use serde::{Deserialize, Serialize};

use super::RecordError;
use super::schema_data::{SchemaData, SubjectNameStrategy, schema_type_of};

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

/// A key or value: `data` read as `type` says, or written with a registry schema when a
/// schema field or a schema type names one (see [`super::schema_data`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DataRequest {
    #[serde(default, rename = "type")]
    pub(crate) data_type: Option<DataType>,
    #[serde(default)]
    pub(crate) data: serde_json::Value,
    #[serde(default)]
    pub(crate) schema_id: Option<i32>,
    #[serde(default)]
    pub(crate) schema_version: Option<i32>,
    #[serde(default)]
    pub(crate) subject: Option<String>,
    #[serde(default)]
    pub(crate) subject_name_strategy: Option<SubjectNameStrategy>,
    /// A schema's text, of `type` (AVRO when none is given).
    #[serde(default)]
    pub(crate) schema: Option<String>,
    /// Floe's: which message of a Protobuf schema `data` is, by full name (else the first).
    #[serde(default)]
    pub(crate) message_name: Option<String>,
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
    /// JSON written with an Avro schema of the registry.
    Avro,
    /// JSON written with a Protobuf schema of the registry (its first message).
    Protobuf,
    /// JSON checked against a JSON Schema of the registry.
    Jsonschema,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum TimestampRequest {
    Millis(i64),
    Text(String),
}

/// What the delivery report says of a key or value.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct DataReport {
    #[serde(rename = "type")]
    pub(crate) data_type: DataType,
    pub(crate) size: usize,
    /// Of data written with a registry schema: its id, and the subject version it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) schema_id: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) schema_version: Option<i32>,
}

impl DataReport {
    pub(crate) fn plain(data_type: DataType, size: usize) -> Self {
        Self { data_type, size, schema_id: None, subject: None, schema_version: None }
    }
}

/// The fields of a record that are checked once its topic is known.
#[derive(Debug)]
pub(crate) struct ParsedRecord {
    pub(crate) partition_id: Option<i32>,
    pub(crate) record: NewRecord,
    pub(crate) key_report: Option<DataReport>,
    pub(crate) value_report: Option<DataReport>,
    /// A key or value still to be written with its schema (its bytes are none until then).
    pub(crate) key_schema: Option<Box<SchemaData>>,
    pub(crate) value_schema: Option<Box<SchemaData>>,
}

impl RecordRequest {
    /// The record's bytes. `now_ms` is its timestamp when it names none.
    pub(crate) fn into_record(self, now_ms: i64) -> Result<ParsedRecord, RecordError> {
        let (key, key_report, key_schema) = data(self.key, "key")?;
        let (value, value_report, value_schema) = data(self.value, "value")?;
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
            key_schema,
            value_schema,
        })
    }
}

type Data = (Option<Bytes>, Option<DataReport>, Option<Box<SchemaData>>);

fn data(data: Option<DataRequest>, what: &str) -> Result<Data, RecordError> {
    let Some(data) = data else { return Ok((None, None, None)) };
    let schema_field = data.schema_id.is_some()
        || data.schema_version.is_some()
        || data.subject.is_some()
        || data.subject_name_strategy.is_some()
        || data.schema.is_some()
        || data.message_name.is_some();
    let schema_type = data.data_type.and_then(schema_type_of);
    if schema_field || schema_type.is_some() {
        if let Some(plain) = data.data_type.filter(|_| schema_type.is_none()) {
            return Err(RecordError::invalid(format!("{what}: {plain:?} data cannot name a schema")));
        }
        let schema_data = SchemaData {
            data_type: data.data_type,
            data: data.data,
            schema_id: data.schema_id,
            schema_version: data.schema_version,
            subject: data.subject,
            strategy: data.subject_name_strategy,
            schema: data.schema,
            message_name: data.message_name,
        };
        return Ok((None, None, Some(Box::new(schema_data))));
    }
    let data_type = data.data_type.unwrap_or(DataType::Json);
    let bytes = match (data_type, data.data) {
        (_, serde_json::Value::Null) => return Ok((None, Some(DataReport::plain(data_type, 0)), None)),
        (DataType::Binary, serde_json::Value::String(s)) => base64_bytes(&s, what)?,
        (DataType::String, serde_json::Value::String(s)) => Bytes::from(s),
        (DataType::Json, v) => Bytes::from(serde_json::to_vec(&v).map_err(|e| RecordError::invalid(e.to_string()))?),
        (t, _) => return Err(RecordError::invalid(format!("{what}: {t:?} data must be a JSON string"))),
    };
    let report = DataReport::plain(data_type, bytes.len());
    Ok((Some(bytes), Some(report), None))
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
