//! `floe loadtest ...`: hands over to the `floe-loadtest` binary, so one name reaches both.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use anyhow::Context;

const LOADTEST_BIN: &str = "floe-loadtest";

/// Replaces this process with `floe-loadtest ARGS`: the one beside this executable if there is
/// one (a build or release directory), else the first on PATH. Returns only on failure.
pub(crate) fn exec(args: Vec<OsString>) -> anyhow::Result<()> {
    let beside: Option<PathBuf> = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(LOADTEST_BIN)))
        .filter(|p| p.is_file());
    let program = beside.unwrap_or_else(|| PathBuf::from(LOADTEST_BIN));
    let error = std::process::Command::new(&program).args(args).exec();
    Err(error).with_context(|| {
        format!("running {}: build it with `cargo build -p floe-loadtest` or put it on PATH", program.display())
    })
}
