pub(crate) mod admin;
pub(crate) mod agent;
pub(crate) mod dev;
pub(crate) mod metadata;
mod serve_agent;
