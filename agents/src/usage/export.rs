//! Hourly usage exports: each closed hour's metered usage as one Parquet file under
//! `PREFIX/usage/hour=YYYY-MM-DDTHH/rev-NNNNNN.parquet`, written by the storage-job agent once the
//! hour is over (plus a grace for late reports). A report reaching an exported hour marks it
//! changed, and the job writes the next revision with every row of the hour: readers take the
//! highest revision of each hour (docs/OPERATIONS.md, "Usage metering").
//!
//! Schema (format 1, in the file's key-value metadata as `floe.usage.format`): `tenant` (utf8,
//! empty without tenants), `minute` (timestamp ms, UTC), `meter` (utf8, a
//! [`floe_metadata::Meter`] name), `value` (int64). One row per tenant, minute and meter used.

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use floe_metadata::{Command, HOUR_MS, UsageExport, UsageLedger};
use floe_storage::UsagePut;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::Agent;

/// The version of the export files' schema.
pub const USAGE_FILE_FORMAT: u32 = 1;
/// An hour is exported this long after it ends, so agents' reports of it have arrived.
pub const EXPORT_GRACE: Duration = Duration::from_secs(5 * 60);
/// Revisions tried past the recorded one when names are taken (exports that crashed before
/// recording theirs).
const REVISIONS_TRIED_MAX: u32 = 16;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("storage: {0}")]
    Storage(#[from] floe_storage::StorageError),
    #[error("metadata: {0}")]
    Metadata(#[from] floe_metadata::NodeError),
    #[error("revisions {0} and {REVISIONS_TRIED_MAX} after it all exist")]
    RevisionsTaken(u32),
}

/// `hour=2026-12-04T07/rev-000001.parquet`.
pub fn file_name(hour_ms: i64, revision: u32) -> String {
    let hour = chrono::DateTime::from_timestamp_millis(hour_ms).map(|t| t.format("%Y-%m-%dT%H").to_string());
    format!("hour={}/rev-{revision:06}.parquet", hour.unwrap_or_else(|| hour_ms.to_string()))
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("tenant", DataType::Utf8, false),
        Field::new("minute", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false),
        Field::new("meter", DataType::Utf8, false),
        Field::new("value", DataType::Int64, false),
    ]))
}

/// The Parquet file of one hour's rows (every minute of it the ledger holds).
pub fn encode_hour(usage: &UsageLedger, hour_ms: i64, revision: u32) -> Result<Vec<u8>, ExportError> {
    let (mut tenants, mut minutes, mut meters, mut values) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (minute, tenant, counts) in usage.query(None, hour_ms, hour_ms + HOUR_MS) {
        for (meter, value) in counts {
            tenants.push(tenant.to_owned());
            minutes.push(minute);
            meters.push(meter.name());
            values.push(i64::try_from(*value).unwrap_or(i64::MAX));
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(tenants)),
        Arc::new(TimestampMillisecondArray::from(minutes).with_timezone("UTC")),
        Arc::new(StringArray::from(meters)),
        Arc::new(Int64Array::from(values)),
    ];
    let batch = RecordBatch::try_new(schema(), columns)?;
    let metadata = [
        ("floe.usage.format", USAGE_FILE_FORMAT.to_string()),
        ("floe.usage.hour_ms", hour_ms.to_string()),
        ("floe.usage.revision", revision.to_string()),
    ];
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_key_value_metadata(Some(metadata.into_iter().map(|(k, v)| KeyValue::new(k.to_owned(), v)).collect()))
        .build();
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties))?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(bytes)
}

/// Exports every hour that ended at least the grace ago and changed since its last export.
pub(crate) async fn export_due(agent: &Agent) -> Result<usize, ExportError> {
    let before = floe_metadata::now_ms() - i64::try_from(EXPORT_GRACE.as_millis()).unwrap_or(i64::MAX);
    let due: Vec<i64> = agent.metadata.read().usage.hours_to_export(before).into_iter().map(|(h, _)| h).collect();
    let mut exported = 0;
    for hour_ms in due {
        export_hour(agent, hour_ms).await?;
        exported += 1;
    }
    Ok(exported)
}

/// Writes the next revision of an hour's file (an hour still going on included: the job writes
/// a later revision once it is over) and records it; `None` when the hour has no usage. Returns
/// the file's name under `usage/`.
pub async fn export_hour(agent: &Agent, hour_ms: i64) -> Result<Option<String>, ExportError> {
    let (first, changes, file) = {
        let state = agent.metadata.read();
        let Some(hour) = state.usage.hours.get(&hour_ms) else { return Ok(None) };
        let first = hour.revision + 1;
        (first, hour.changes, encode_hour(&state.usage, hour_ms, first)?)
    };
    let mut file = bytes::Bytes::from(file);
    let mut revision = first;
    loop {
        match agent.store.put_usage_file(&file_name(hour_ms, revision), file.clone()).await? {
            UsagePut::Written => break,
            UsagePut::Exists if revision - first < REVISIONS_TRIED_MAX => {
                revision += 1;
                // The revision is written into the file too.
                file = encode_hour(&agent.metadata.read().usage, hour_ms, revision)?.into();
            }
            UsagePut::Exists => return Err(ExportError::RevisionsTaken(first)),
        }
    }
    crate::metrics::USAGE_EXPORTS.inc();
    let name = file_name(hour_ms, revision);
    tracing::info!(file = %name, changes, "usage hour exported");
    agent.metadata.propose(Command::MarkUsageExported(UsageExport { hour_ms, revision, changes })).await?;
    Ok(Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_metadata::{MINUTE_MS, Meter};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    const HOUR: i64 = 492_000 * HOUR_MS;

    fn ledger() -> UsageLedger {
        let mut usage = UsageLedger::default();
        let mut add = |minute: i64, tenant: &str, counts: &[(Meter, u64)]| {
            let meters = usage.minutes.entry(minute).or_default().entry(tenant.to_owned()).or_default();
            floe_metadata::add_meters(meters, counts.iter().copied());
        };
        add(HOUR, "acme", &[(Meter::ProducedBytes, 1000), (Meter::ProducedRecords, 10)]);
        add(HOUR + 59 * MINUTE_MS, "globex", &[(Meter::FetchedRecords, 7)]);
        add(HOUR + HOUR_MS, "acme", &[(Meter::ProducedRecords, 99)]);
        usage
    }

    /// (tenant, minute, meter, value).
    type Row = (String, i64, String, i64);

    /// The rows and the key-value metadata of a file.
    fn read(bytes: Vec<u8>) -> (Vec<Row>, Vec<(String, String)>) {
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).expect("a parquet file");
        let metadata = builder.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
        let mut rows = Vec::new();
        for batch in builder.build().expect("reader") {
            let batch = batch.expect("batch");
            let column = |name: &str| batch.column_by_name(name).expect("column").clone();
            let (tenant, minute, meter, value) = (column("tenant"), column("minute"), column("meter"), column("value"));
            let text = |a: &ArrayRef, i| a.as_any().downcast_ref::<StringArray>().expect("utf8").value(i).to_owned();
            for i in 0..batch.num_rows() {
                let minute = minute.as_any().downcast_ref::<TimestampMillisecondArray>().expect("timestamp").value(i);
                let value = value.as_any().downcast_ref::<Int64Array>().expect("int64").value(i);
                rows.push((text(&tenant, i), minute, text(&meter, i), value));
            }
        }
        (rows, metadata.into_iter().map(|kv| (kv.key, kv.value.unwrap_or_default())).collect())
    }

    #[test]
    fn an_hour_file_holds_one_row_per_tenant_minute_and_meter_of_that_hour() {
        let (rows, metadata) = read(encode_hour(&ledger(), HOUR, 2).expect("encode"));
        assert_eq!(
            rows,
            vec![
                ("acme".into(), HOUR, "produced_bytes".into(), 1000),
                ("acme".into(), HOUR, "produced_records".into(), 10),
                ("globex".into(), HOUR + 59 * MINUTE_MS, "fetched_records".into(), 7),
            ]
        );
        assert!(metadata.contains(&("floe.usage.format".into(), "1".into())));
        assert!(metadata.contains(&("floe.usage.revision".into(), "2".into())));
        assert_eq!(file_name(HOUR, 2), "hour=2026-02-16T00/rev-000002.parquet");
    }

    /// A file of format 1 as it was first written still reads with the schema documented.
    #[test]
    fn the_format_1_golden_file_still_reads() {
        let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
            .map_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")), std::path::PathBuf::from);
        let path = crate_dir.join("tests").join("golden").join("usage-v1.parquet");
        if std::env::var_os("FLOE_WRITE_GOLDEN").is_some() {
            std::fs::create_dir_all(path.parent().expect("dir")).expect("golden dir");
            std::fs::write(&path, encode_hour(&ledger(), HOUR, 1).expect("encode")).expect("write");
        }
        let (rows, metadata) = read(std::fs::read(&path).expect("the golden usage file"));
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|(_, minute, _, _)| (HOUR..HOUR + HOUR_MS).contains(minute)));
        assert!(metadata.contains(&("floe.usage.format".into(), "1".into())));
    }
}
