//! The `floe` binary: command-line parsing and wiring only.

#[expect(
    unsafe_code,
    reason = "a lazily mapping allocator keeps hostile length prefixes from aborting the process; see alloc.rs"
)]
mod alloc;
mod cli;
mod cmd;
#[expect(unsafe_code, reason = "mallopt, once at start; see heap.rs")]
mod heap;

#[global_allocator]
static ALLOCATOR: alloc::LazyHugeAllocator = alloc::LazyHugeAllocator;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    heap::keep_freed_buffers();
    let cli = cli::Cli::parse();
    match cli.command {
        cli::Command::Loadtest { args } => return cmd::companion::exec("floe-loadtest", args),
        cli::Command::Chaos { args } => return cmd::companion::exec("floe-chaos", args),
        _ => {}
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command {
        cli::Command::Dev(args) => runtime.block_on(cmd::dev::run(args)),
        cli::Command::Metadata(args) => runtime.block_on(cmd::metadata::run(args)),
        cli::Command::Agent(args) => runtime.block_on(cmd::agent::run(args)),
        cli::Command::Admin(args) => {
            cmd::install_metadata_tls(&args.tls)?;
            runtime.block_on(cmd::admin::run(args.command))
        }
        cli::Command::Loadtest { .. } | cli::Command::Chaos { .. } => Ok(()),
    }
}
