pub(crate) mod admin;
pub(crate) mod agent;
mod archive;
pub(crate) mod companion;
pub(crate) mod dev;
pub(crate) mod metadata;
mod serve_agent;
mod tenants;
