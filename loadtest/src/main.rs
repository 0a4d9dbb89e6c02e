//! `floe-loadtest`: drives a Kafka endpoint with librdkafka (what users' clients are) and
//! reports throughput and produce latency percentiles.

mod produce;

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
}

fn main() -> anyhow::Result<()> {
    match Cli::parse() {
        Cli::Produce(args) => produce::run(args),
    }
}
