pub(crate) mod dev;
