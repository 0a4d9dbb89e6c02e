pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod status;
