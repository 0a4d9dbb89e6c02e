//! Upsert tables (a compacted topic's table, `floe.table.mode=upsert`): one live row per Kafka
//! partition and key, as key compaction keeps one record per partition and key. A newer record
//! deletes the key's older row by position and adds its own; a tombstone only deletes.
//!
//! The job keeps a [`KeyIndex`] of where each key's live row is, built from the table's files
//! when the job first touches the table (every data file's `_partition` and `_key` columns, and
//! every position delete file) and kept current by each commit and merge after that.

use std::collections::{HashMap, HashSet};

use floe_tables::RecordBatch;
use floe_tables::deletes::{decode_position_deletes, decode_row_keys, keep_rows, row_keys, row_offsets};
use floe_tables::manifest::{Content, PartitionValue};

use super::commit::{TableFiles, TableJobError, get, live_entries};
use crate::Agent;
use crate::limits::TABLE_UPSERT_KEYS_MAX;

/// The table property naming an upsert table.
pub(super) const MODE_PROPERTY: &str = "floe.table.mode";
pub(super) const MODE_UPSERT: &str = "upsert";

/// A row: its data file (an index into [`KeyIndex::files`]) and position in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RowAt {
    file: u32,
    pos: u32,
}

#[derive(Debug)]
struct IndexedFile {
    path: String,
    spec_id: i32,
    partition: Vec<Option<PartitionValue>>,
    /// Still in the current snapshot (not merged away).
    live: bool,
}

/// Where each (Kafka partition, key) of an upsert table has its live row.
#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    files: Vec<IndexedFile>,
    rows: HashMap<(i32, Box<[u8]>), RowAt>,
    /// The current snapshot's position delete files and the data files each names.
    delete_files: HashMap<String, HashSet<u32>>,
}

/// A commit's key events not yet applied: tombstones read since the last data file.
#[derive(Debug, Default)]
pub(super) struct PendingDeletes {
    tombstones: Vec<(i32, Box<[u8]>, i64)>,
    /// Rows this commit deleted, for its position delete files.
    deleted: Vec<RowAt>,
}

impl PendingDeletes {
    pub(super) fn tombstone(&mut self, partition: i32, key: &[u8], offset: i64) {
        self.tombstones.push((partition, key.into(), offset));
    }
}

/// A group of position deletes: the data files' partition spec and values, and the (path,
/// position) pairs, with the files they name.
pub(super) struct DeleteGroup {
    pub(super) spec_id: i32,
    pub(super) partition: Vec<Option<PartitionValue>>,
    pub(super) deletes: Vec<(String, i64)>,
    pub(super) files: HashSet<u32>,
}

impl KeyIndex {
    /// The index of `table`'s current snapshot, read from its files.
    pub(super) async fn build(agent: &Agent, table: &TableFiles) -> Result<Self, TableJobError> {
        let mut index = Self::default();
        let mut data = Vec::new();
        let mut deleted: HashMap<String, HashSet<i64>> = HashMap::new();
        let mut delete_files = Vec::new();
        for (spec_id, entries) in live_entries(agent, table).await? {
            for entry in entries {
                match entry.data_file.content {
                    Content::Data => data.push((spec_id, entry.data_file)),
                    Content::PositionDeletes => {
                        let pairs = decode_position_deletes(get(agent, &entry.data_file.file_path).await?)?;
                        let paths: HashSet<String> = pairs.iter().map(|(path, _)| path.clone()).collect();
                        for (path, pos) in pairs {
                            deleted.entry(path).or_default().insert(pos);
                        }
                        delete_files.push((entry.data_file.file_path, paths));
                    }
                }
            }
        }
        for (spec_id, file) in data {
            let keys = decode_row_keys(get(agent, &file.file_path).await?)?;
            let gone = deleted.get(&file.file_path);
            let live = keys.iter().enumerate().map(|(pos, (partition, key))| {
                let deleted = gone.is_some_and(|positions| positions.contains(&(pos as i64)));
                (*partition, if deleted { None } else { key.as_deref() })
            });
            index.add_file(file.file_path, spec_id, file.partition, live)?;
        }
        let by_path: HashMap<&str, u32> =
            index.files.iter().enumerate().map(|(at, f)| (f.path.as_str(), at as u32)).collect();
        let named: Vec<(String, HashSet<u32>)> = delete_files
            .into_iter()
            .map(|(path, paths)| (path, paths.iter().filter_map(|p| by_path.get(p.as_str()).copied()).collect()))
            .collect();
        index.delete_files.extend(named);
        Ok(index)
    }

    /// Records a data file just written, whose rows have these partitions and keys in order.
    pub(super) fn add_file<'k>(
        &mut self,
        path: String,
        spec_id: i32,
        partition: Vec<Option<PartitionValue>>,
        keys: impl Iterator<Item = (i32, Option<&'k [u8]>)>,
    ) -> Result<(), TableJobError> {
        let file = u32::try_from(self.files.len()).map_err(|_| TableJobError::Records("too many data files".into()))?;
        self.files.push(IndexedFile { path, spec_id, partition, live: true });
        for (pos, (partition, key)) in keys.enumerate() {
            let Some(key) = key else { continue };
            let pos = u32::try_from(pos).map_err(|_| TableJobError::Records("a data file of 2^32 rows".into()))?;
            self.rows.insert((partition, key.into()), RowAt { file, pos });
        }
        if self.rows.len() > TABLE_UPSERT_KEYS_MAX {
            return Err(TableJobError::Records(format!(
                "the upsert table holds {} keys, past the {TABLE_UPSERT_KEYS_MAX} the job indexes",
                self.rows.len()
            )));
        }
        Ok(())
    }

    /// The rows of `batches` that are the last event of their partition and key among them
    /// and `pending`'s tombstones; deletes the older rows of every key they touch (into
    /// `pending.deleted`) and consumes the tombstones.
    pub(super) fn supersede(
        &mut self,
        batches: Vec<RecordBatch>,
        pending: &mut PendingDeletes,
    ) -> Result<Vec<RecordBatch>, TableJobError> {
        let mut last: HashMap<(i32, Box<[u8]>), i64> = HashMap::new();
        for batch in &batches {
            for ((partition, key), offset) in row_keys(batch)?.zip(row_offsets(batch)?) {
                if let Some(key) = key {
                    let at = last.entry((partition, key.into())).or_insert(*offset);
                    *at = (*at).max(*offset);
                }
            }
        }
        for (partition, key, offset) in pending.tombstones.drain(..) {
            let at = last.entry((partition, key)).or_insert(offset);
            *at = (*at).max(offset);
        }
        let mut kept = Vec::with_capacity(batches.len());
        for batch in batches {
            let keep: Vec<bool> = row_keys(&batch)?
                .zip(row_offsets(&batch)?)
                .map(|((partition, key), offset)| {
                    key.is_none_or(|key| last.get(&(partition, Box::<[u8]>::from(key))) == Some(offset))
                })
                .collect();
            if keep.iter().all(|k| *k) {
                kept.push(batch);
            } else if keep.iter().any(|k| *k) {
                kept.push(keep_rows(&batch, keep)?);
            }
        }
        for key in last.keys() {
            if let Some(old) = self.rows.remove(key) {
                pending.deleted.push(old);
            }
        }
        Ok(kept)
    }

    /// `pending`'s deleted rows grouped by their data file's partition.
    pub(super) fn delete_groups(&self, pending: &mut PendingDeletes) -> Vec<DeleteGroup> {
        let mut groups: Vec<DeleteGroup> = Vec::new();
        for row in pending.deleted.drain(..) {
            let Some(file) = self.files.get(row.file as usize) else { continue };
            let group = match groups.iter_mut().position(|g| g.spec_id == file.spec_id && g.partition == file.partition)
            {
                Some(at) => &mut groups[at],
                None => {
                    groups.push(DeleteGroup {
                        spec_id: file.spec_id,
                        partition: file.partition.clone(),
                        deletes: Vec::new(),
                        files: HashSet::new(),
                    });
                    let last = groups.len() - 1;
                    &mut groups[last]
                }
            };
            group.deletes.push((file.path.clone(), i64::from(row.pos)));
            group.files.insert(row.file);
        }
        groups
    }

    /// Records a position delete file just written.
    pub(super) fn add_delete_file(&mut self, path: String, files: HashSet<u32>) {
        self.delete_files.insert(path, files);
    }

    /// Which rows of data file `path` (with these partitions and keys, in order) are live: a
    /// keyed row is live while the index points at it, a row without a key always.
    pub(super) fn live_rows<'k>(&self, path: &str, keys: impl Iterator<Item = (i32, Option<&'k [u8]>)>) -> Vec<bool> {
        let file = self.files.iter().position(|f| f.live && f.path == path).map(|at| at as u32);
        keys.enumerate()
            .map(|(pos, (partition, key))| {
                let Some(key) = key else { return true };
                let at = RowAt { file: file.unwrap_or(u32::MAX), pos: u32::try_from(pos).unwrap_or(u32::MAX) };
                file.is_some() && self.rows.get(&(partition, Box::<[u8]>::from(key))) == Some(&at)
            })
            .collect()
    }

    /// Marks data files merged away; the delete files that named only such files, which the
    /// merge's snapshot drops.
    pub(super) fn retire(&mut self, paths: &[String]) -> Vec<String> {
        for file in self.files.iter_mut().filter(|f| paths.contains(&f.path)) {
            file.live = false;
        }
        let files = &self.files;
        let obsolete: Vec<String> = self
            .delete_files
            .iter()
            .filter(|(_, named)| named.iter().all(|at| files.get(*at as usize).is_none_or(|f| !f.live)))
            .map(|(path, _)| path.clone())
            .collect();
        for path in &obsolete {
            self.delete_files.remove(path);
        }
        obsolete
    }
}

#[cfg(test)]
mod tests {
    use floe_tables::data::{KafkaRow, RowsBuilder};
    use floe_tables::deletes::row_offsets;
    use floe_tables::schema::raw_table_schema;

    use super::*;

    /// Raw rows of partition 0 with these (offset, key).
    fn rows(records: &[(i64, Option<&str>)]) -> RecordBatch {
        let mut rows = RowsBuilder::new(&raw_table_schema());
        for (offset, key) in records {
            let row =
                KafkaRow { partition: 0, offset: *offset, timestamp_ms: 0, key: key.map(str::as_bytes), headers: &[] };
            rows.push_metadata(&row).unwrap();
            rows.push_raw_value(Some(b"v")).unwrap();
        }
        rows.finish().unwrap()
    }

    #[test]
    fn the_last_event_of_each_key_wins_and_older_rows_are_deleted() {
        let mut index = KeyIndex::default();
        let old = rows(&[(0, Some("a")), (1, Some("b")), (2, Some("c")), (3, None)]);
        index.add_file("f0".into(), 0, Vec::new(), row_keys(&old).unwrap()).unwrap();

        let mut pending = PendingDeletes::default();
        pending.tombstone(0, b"b", 7);
        let batch = rows(&[(4, Some("a")), (5, Some("a")), (6, Some("b")), (8, Some("d")), (9, None)]);
        let kept = index.supersede(vec![batch], &mut pending).unwrap();
        let offsets: Vec<i64> = kept.iter().flat_map(|b| row_offsets(b).unwrap().to_vec()).collect();
        assert_eq!(offsets, [5, 8, 9], "a's second update, the new key d and the keyless row");

        let mut deleted: Vec<(String, i64)> =
            index.delete_groups(&mut pending).into_iter().flat_map(|group| group.deletes).collect();
        deleted.sort();
        assert_eq!(deleted, [("f0".to_owned(), 0), ("f0".to_owned(), 1)], "a and b's old rows; c untouched");
        assert!(index.live_rows("f0", row_keys(&old).unwrap()) == [false, false, true, true]);

        // The new file's rows become the keys' live rows; merging f0 away drops the delete file.
        index.add_file("f1".into(), 0, Vec::new(), row_keys(&kept[0]).unwrap()).unwrap();
        index.add_delete_file("d0".into(), HashSet::from([0]));
        assert_eq!(index.live_rows("f1", row_keys(&kept[0]).unwrap()), [true, true, true]);
        assert_eq!(index.retire(&["f0".to_owned()]), ["d0".to_owned()]);
        assert_eq!(index.live_rows("f0", row_keys(&old).unwrap()), [false, false, false, true]);
    }
}
