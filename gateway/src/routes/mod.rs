pub(crate) mod health;
pub(crate) mod metrics;
mod process;
pub(crate) mod status;
