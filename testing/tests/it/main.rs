//! The agent in process, through the Kafka protocol and the HTTP API: ApiVersions, produce,
//! fetch, ListOffsets and the error codes a client sees, on a [`floe_testing::TestAgent`].

mod api_versions;
mod bad_input;
mod faults;
mod http_api;
mod http_records;
mod list_offsets;
mod produce;
