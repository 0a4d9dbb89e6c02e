//! The Kafka protocol front end: listener, connections, the dispatch table, error codes, and
//! one module per API under `api/` translating wire types to the pipeline and back.

mod api;

pub(crate) use api::acls::{KafkaAcl, binding_of};
mod connection;
pub mod connections;
pub use connection::{ConnectionError, Decoded, decode_request};
pub mod dispatch;
mod error_code;
mod frame;
mod resources;
pub mod sasl;
pub mod server;
