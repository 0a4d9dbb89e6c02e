//! The agent in process, through the Kafka protocol and the HTTP API: produce, fetch and the
//! error codes a client sees, on a [`floe_testing::TestAgent`].

mod faults;
mod http_api;
mod produce;
