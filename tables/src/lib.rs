//! Table topics, pure: the Iceberg v2 structures (schemas, partition specs, snapshots, table
//! metadata JSON, manifests and manifest lists) and the Parquet files a topic's records become.
//! Reading the topic, storing files and committing offsets live in the agents and the metadata
//! state machine; this crate only turns values into bytes and back.
//!
//! Written against the Iceberg table spec, format version 2. Floe writes every file itself
//! (no `iceberg` crate: see docs/internals/table-topics.md, "Why no `iceberg` crate").

pub mod avro;
pub mod data;
pub mod deletes;
pub mod evolution;
pub mod json;
pub mod manifest;
pub mod metadata;
pub mod protobuf;
pub mod schema;

/// The rows of a data file being written, as Arrow arrays.
pub use arrow_array::RecordBatch;

#[cfg(test)]
mod tests;

/// What went wrong turning a table structure into bytes or back.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("avro: {0}")]
    Avro(String),
    #[error("table metadata JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Invalid(String),
}

impl From<apache_avro::Error> for TableError {
    fn from(error: apache_avro::Error) -> Self {
        Self::Avro(error.to_string())
    }
}
