//! `warden`: the one binary of the project. Each subcommand lives in its own module; a new one
//! adds a variant to `Command` and a line to `main`.
//!
//! - `bench`: drive any ZooKeeper-compatible server(s) with a workload and report throughput and
//!   latency.

mod bench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "warden",
    version,
    about = "Warden: a ZooKeeper-compatible coordination service"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Drive ZooKeeper-compatible servers with a workload; report throughput, latency, errors.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The chain of causes on one line, without a backtrace: errors here are about the
            // arguments or the servers, not about warden's own code.
            eprintln!("warden: {error:#}");
            ExitCode::FAILURE
        }
    }
}
