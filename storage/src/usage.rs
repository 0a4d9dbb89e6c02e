//! Usage files under `PREFIX/usage/`: hourly Parquet exports of tenants' metered usage, written
//! create-only, one file per hour and revision (a corrected hour gets a new revision).

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutMode, PutOptions};

use crate::error::StorageError;
use crate::metrics;
use crate::store::SegmentStore;

/// Directory under the store prefix that holds the usage exports.
pub const USAGE_DIR: &str = "usage";

/// What writing a usage file came to.
#[derive(Debug, PartialEq, Eq)]
pub enum UsagePut {
    Written,
    /// A file of that name exists already (an export that crashed before recording it).
    Exists,
}

impl SegmentStore {
    /// Writes `usage/<relative>` unless it exists, and returns once it is durable.
    pub async fn put_usage_file(&self, relative: &str, bytes: Bytes) -> Result<UsagePut, StorageError> {
        let path = self.object_path(&format!("{USAGE_DIR}/{relative}"));
        let size = bytes.len() as u64;
        let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        let result = self.object_store().put_opts(&path, bytes.into(), options).await;
        metrics::OBJECT_PUTS.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        match result {
            Ok(_) => metrics::OBJECT_PUT_BYTES.inc_by(size),
            Err(object_store::Error::AlreadyExists { .. }) => return Ok(UsagePut::Exists),
            Err(e) => return Err(e.into()),
        }
        self.sync_local(&path).await?;
        Ok(UsagePut::Written)
    }

    /// Reads `usage/<relative>`.
    pub async fn get_usage_file(&self, relative: &str) -> Result<Bytes, StorageError> {
        let path = self.object_path(&format!("{USAGE_DIR}/{relative}"));
        let result = async { self.object_store().get(&path).await?.bytes().await }.await;
        metrics::OBJECT_GETS.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        let bytes = result?;
        metrics::OBJECT_GET_BYTES.inc_by(bytes.len() as u64);
        Ok(bytes)
    }
}
