//! The agent in process, through the Kafka protocol and the HTTP API: ApiVersions, produce,
//! fetch, ListOffsets, the admin APIs, transactions and the error codes a client sees, on a
//! [`floe_testing::TestAgent`].

mod admin;
mod api_versions;
mod bad_input;
mod compaction;
mod faults;
mod fetch;
mod flush_order;
mod http_api;
mod http_records;
mod list_offsets;
mod produce;
mod transactions;
