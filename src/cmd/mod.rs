pub(crate) mod admin;
pub(crate) mod agent;
mod archive;
pub(crate) mod dev;
pub(crate) mod loadtest;
pub(crate) mod metadata;
mod serve_agent;
mod tenants;
