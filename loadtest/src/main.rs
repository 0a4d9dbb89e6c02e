//! `floe-loadtest`: drives a Kafka endpoint with librdkafka (what users' clients are) and
//! reports throughput, produce and end-to-end latency, errors and, against Floe, the object-store
//! requests and CPU each GiB cost. Also reachable as `floe loadtest`.

mod commits;
mod compare;
mod cost;
mod http;
mod null_sink;
mod plot;
mod report;
mod run;
mod transactions;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "floe-loadtest",
    version,
    about = "Kafka load generator: throughput, latency and cost of any Kafka endpoint",
    long_about = "Kafka load generator: throughput, latency and cost of any Kafka endpoint.\n\n\
        Without a subcommand it runs a workload: N producers and M consumers on one or more \
        topics, for a duration or a record count, and writes a JSON report (and an SVG plot).\n\n\
        Examples:\n  \
        floe-loadtest --bootstrap 127.0.0.1:9092 --duration 10s --output report.json\n  \
        floe-loadtest --producers 0 --consumers 1 --from-start --topic big   (catch-up read)\n  \
        floe-loadtest compare before.json after.json",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: run::RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare two reports: each figure side by side with the ratio of the second to the first.
    Compare(compare::CompareArgs),
    /// A Kafka endpoint that acknowledges produce requests and stores nothing: the floor a
    /// benchmark is read against, and proof the generator is not the bottleneck.
    NullSink(null_sink::NullSinkArgs),
    /// Drive a metadata cluster with segment commits: commits/s and commit latency.
    Commits(commits::CommitsArgs),
    /// Small transactions back to back from one transactional producer: transactions/s and
    /// commit latency.
    Transactions(transactions::TransactionsArgs),
    /// Produce over Floe's HTTP API (single records, NDJSON bulk, or several per request):
    /// records/s, request latency and the agent's CPU per record.
    Http(http::HttpArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => run::run(cli.run),
        Some(Command::Compare(args)) => compare::run(args),
        Some(Command::NullSink(args)) => null_sink::run(args),
        Some(Command::Commits(args)) => commits::run(args),
        Some(Command::Transactions(args)) => transactions::run(args),
        Some(Command::Http(args)) => http::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe-loadtest: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
