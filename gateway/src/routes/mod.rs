pub(crate) mod admin;
pub(crate) mod clusters;
pub(crate) mod consume;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod openapi;
mod process;
pub(crate) mod records;
pub(crate) mod status;
