//! `warden`: the one binary of the project. Each subcommand lives in its own module; a new one
//! adds a variant to `Command` and a line to `main`.
//!
//! - `server`: run a server (one-node for now) from defaults, Warden's TOML or a zoo.cfg.
//! - `import`: a ZooKeeper data directory into a new Warden data directory.
//! - `bench`: drive any ZooKeeper-compatible server(s) with a workload and report throughput and
//!   latency.
//! - `cli`: an interactive client with zkCli's commands and keeper-client's operator helpers.

mod bench;
mod cli;
mod import;
mod server;

use std::process::ExitCode;

/// jemalloc rather than the system allocator: the server frees large blocks (a snapshot's copy
/// of the tree, its encoded bytes, a loaded snapshot file) and jemalloc gives such memory back
/// to the system, where glibc's malloc keeps it resident.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    /// Run a Warden server in the foreground (defaults: 127.0.0.1:2181, data in ./warden-data).
    Server(server::ServerArgs),
    /// Make a new Warden data directory from a ZooKeeper data directory (offline migration).
    Import(import::ImportArgs),
    /// Drive ZooKeeper-compatible servers with a workload; report throughput, latency, errors.
    Bench(bench::BenchArgs),
    /// An interactive client, as zkCli: `warden cli -server host:port [cmd args]`.
    Cli(cli::CliArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Server(args) => return server::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Import(args) => import::run(args),
        Command::Cli(args) => return cli::run(args),
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
