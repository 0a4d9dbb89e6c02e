//! `floe-loadtest`: drives a Kafka endpoint with librdkafka (what users' clients are) and
//! reports throughput and produce latency percentiles.

mod commits;
mod consume;
mod produce;
mod transactions;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "floe-loadtest",
    version,
    about = "Kafka load generator: throughput and latency of any Kafka endpoint"
)]
enum Cli {
    /// Produce fixed-size records as fast as the endpoint takes them (or at a fixed rate).
    Produce(produce::ProduceArgs),
    /// Read a topic from its log start to its end as one consumer: catch-up MB/s.
    Consume(consume::ConsumeArgs),
    /// Drive a metadata cluster with segment commits: commits/s and commit latency.
    Commits(commits::CommitsArgs),
    /// Small transactions back to back from one transactional producer: transactions/s and
    /// commit latency.
    Transactions(transactions::TransactionsArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse() {
        Cli::Produce(args) => produce::run(args),
        Cli::Commits(args) => commits::run(args),
        Cli::Consume(args) => consume::run(args),
        Cli::Transactions(args) => transactions::run(args),
    }
}
