//! `floe loadtest ...` and `floe chaos ...`: hand over to the `floe-loadtest` and `floe-chaos`
//! binaries, so one name reaches them all.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use anyhow::Context;

/// Replaces this process with `BINARY ARGS`: the one beside this executable if there is one (a
/// build or release directory), else the first on PATH. Returns only on failure.
pub(crate) fn exec(binary: &str, args: Vec<OsString>) -> anyhow::Result<()> {
    let beside: Option<PathBuf> =
        std::env::current_exe().ok().and_then(|exe| exe.parent().map(|dir| dir.join(binary))).filter(|p| p.is_file());
    let program = beside.unwrap_or_else(|| PathBuf::from(binary));
    let error = std::process::Command::new(&program).args(args).exec();
    Err(error).with_context(|| {
        format!("running {}: build it with `cargo build -p {binary}` or put it on PATH", program.display())
    })
}
