//! The `floe` binary: command-line parsing and wiring only.

#[expect(
    unsafe_code,
    reason = "a lazily mapping allocator keeps hostile length prefixes from aborting the process; see alloc.rs"
)]
mod alloc;
mod cli;
mod cmd;
mod config;
#[expect(unsafe_code, reason = "mallopt, once at start; see heap.rs")]
mod heap;
mod log_limits;
mod memory;
mod metrics;

#[global_allocator]
static ALLOCATOR: alloc::LazyHugeAllocator = alloc::LazyHugeAllocator;

fn main() -> anyhow::Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    heap::keep_freed_buffers();
    let cli = config::parse()?;
    let log_format = match &cli.command {
        cli::Command::Loadtest { args } => return cmd::companion::exec("floe-loadtest", args.clone()),
        cli::Command::Chaos { args } => return cmd::companion::exec("floe-chaos", args.clone()),
        cli::Command::Config { action: cli::ConfigAction::Check { file, command, json } } => {
            return config::check(file, command, *json);
        }
        cli::Command::Dev(args) => args.log.log_format,
        cli::Command::Metadata(args) => args.log.log_format,
        cli::Command::Agent(args) => args.log.log_format,
        cli::Command::Admin(_) | cli::Command::Doctor(_) => cli::LogFormat::Text,
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // The hot tier's cache library explains its defaults at info level ("run disk cache in
        // mock mode that do nothing" when no disk tier is set): noise to anyone starting Floe.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn,foyer=warn,foyer_storage=warn"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // Other crates' warnings and errors are limited per call site, as Floe's own client-caused
    // lines are (log_limits.rs).
    match log_format {
        cli::LogFormat::Text => logs.finish().with(log_limits::layer()).init(),
        cli::LogFormat::Json => {
            logs.json().flatten_event(true).with_current_span(false).finish().with(log_limits::layer()).init()
        }
    }
    if matches!(cli.command, cli::Command::Dev(_) | cli::Command::Metadata(_) | cli::Command::Agent(_)) {
        heap::return_free_memory_in_background();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command {
        cli::Command::Dev(args) => runtime.block_on(cmd::dev::run(args)),
        cli::Command::Metadata(args) => runtime.block_on(cmd::metadata::run(args)),
        cli::Command::Agent(args) => runtime.block_on(cmd::agent::run(args)),
        cli::Command::Admin(args) => {
            cmd::install_metadata_tls(&args.tls)?;
            runtime.block_on(cmd::admin::run(args.command))
        }
        cli::Command::Doctor(args) => {
            cmd::install_metadata_tls(&args.tls)?;
            runtime.block_on(cmd::doctor::run(args))
        }
        cli::Command::Loadtest { .. } | cli::Command::Chaos { .. } | cli::Command::Config { .. } => Ok(()),
    }
}
