//! Table topics' files under `PREFIX/tables/`: Parquet data files and Iceberg metadata, written
//! create-only like segments, and named in Iceberg metadata by absolute URIs, since query
//! engines read them without Floe.

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutMode, PutOptions};

use crate::error::StorageError;
use crate::metrics;
use crate::store::SegmentStore;

/// Directory under the store prefix that holds every table's files.
pub const TABLES_DIR: &str = "tables";

/// The key of a table file, relative to the store prefix: always under [`TABLES_DIR`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableObjectKey(String);

impl TableObjectKey {
    /// `tables/<relative>`; `relative` is Floe's own naming (table id, then `data/` or
    /// `metadata/`).
    pub fn new(relative: &str) -> Self {
        Self(format!("{TABLES_DIR}/{relative}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TableObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A table file found by listing the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedTableObject {
    pub key: TableObjectKey,
    pub last_modified_ms: i64,
}

impl SegmentStore {
    /// The absolute URI readers use for `key`: the store's URL joined with the key (for
    /// example `s3://bucket/prefix/tables/...` or `file:///var/lib/floe/tables/...`).
    pub fn table_uri(&self, key: &TableObjectKey) -> String {
        format!("{}/{}", self.url().trim_end_matches('/'), key.as_str())
    }

    /// The key of a URI [`SegmentStore::table_uri`] made; `None` for any other URI.
    pub fn table_key_of_uri(&self, uri: &str) -> Option<TableObjectKey> {
        let relative = uri.strip_prefix(self.url().trim_end_matches('/'))?.strip_prefix('/')?;
        relative.starts_with(&format!("{TABLES_DIR}/")).then(|| TableObjectKey(relative.to_owned()))
    }

    /// Writes a table file with create-only semantics and returns once it is durable.
    pub async fn put_table_object(&self, key: &TableObjectKey, bytes: Bytes) -> Result<(), StorageError> {
        let path = self.object_path(key.as_str());
        let size = bytes.len() as u64;
        let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        let result = self.object_store().put_opts(&path, bytes.into(), options).await;
        metrics::OBJECT_PUTS.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        result?;
        metrics::OBJECT_PUT_BYTES.inc_by(size);
        self.sync_local(&path).await
    }

    pub async fn get_table_object(&self, key: &TableObjectKey) -> Result<Bytes, StorageError> {
        let result = async { self.object_store().get(&self.object_path(key.as_str())).await?.bytes().await }.await;
        metrics::OBJECT_GETS.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        let bytes = result?;
        metrics::OBJECT_GET_BYTES.inc_by(bytes.len() as u64);
        Ok(bytes)
    }

    /// Up to `max` table files under `tables/<under>`.
    pub async fn list_table_objects(&self, under: &str, max: usize) -> Result<Vec<ListedTableObject>, StorageError> {
        use futures::{StreamExt, TryStreamExt};
        let dir = self.object_path(&format!("{TABLES_DIR}/{under}"));
        let listed: Vec<_> = self.object_store().list(Some(&dir)).take(max).try_collect().await?;
        metrics::OBJECT_LISTS.inc();
        let skip = self.prefix_len();
        Ok(listed
            .into_iter()
            .filter_map(|m| {
                let key = m.location.as_ref().get(skip..)?.to_owned();
                Some(ListedTableObject {
                    key: TableObjectKey(key),
                    last_modified_ms: m.last_modified.timestamp_millis(),
                })
            })
            .collect())
    }

    /// Deletes a table file; deleting one that is already gone succeeds.
    pub async fn delete_table_object(&self, key: &TableObjectKey) -> Result<(), StorageError> {
        let result = match self.object_store().delete(&self.object_path(key.as_str())).await {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            other => other,
        };
        metrics::OBJECT_DELETES.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        Ok(result?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ObjectStoreConfig;

    #[tokio::test]
    async fn table_files_are_create_only_and_named_by_uri() {
        let dir = std::env::temp_dir().join(format!("floe-table-objects-{}", uuid::Uuid::now_v7().simple()));
        let url = format!("file://{}", dir.display());
        let store = SegmentStore::open(&ObjectStoreConfig { url: url.clone(), ..Default::default() }).expect("open");
        let key = TableObjectKey::new("abc/metadata/1.metadata.json");
        store.put_table_object(&key, Bytes::from_static(b"{}")).await.expect("put");
        assert!(store.put_table_object(&key, Bytes::from_static(b"[]")).await.is_err(), "create-only");
        assert_eq!(store.get_table_object(&key).await.expect("get"), Bytes::from_static(b"{}"));
        let uri = store.table_uri(&key);
        assert_eq!(uri, format!("{url}/tables/abc/metadata/1.metadata.json"));
        assert_eq!(store.table_key_of_uri(&uri), Some(key.clone()));
        assert_eq!(store.table_key_of_uri("s3://elsewhere/tables/abc"), None);
        let listed = store.list_table_objects("abc", 10).await.expect("list");
        assert_eq!(listed.iter().map(|l| l.key.clone()).collect::<Vec<_>>(), vec![key.clone()]);
        store.delete_table_object(&key).await.expect("delete");
        store.delete_table_object(&key).await.expect("deleting twice");
        assert!(store.list_table_objects("abc", 10).await.expect("list").is_empty());
        std::fs::remove_dir_all(dir).ok();
    }
}
