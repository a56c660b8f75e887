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

/// jemalloc's options, read before `main` (its `malloc_conf`; `_RJEM_MALLOC_CONF` in the
/// environment still overrides them). Memory freed in bulk (a restart's decoded snapshot, a
/// snapshot's encoding) goes back to the system within about a second rather than ten
/// (`dirty_decay_ms`), purged by one background thread of jemalloc's rather than by whichever
/// request thread frees next; and no transparent huge pages, which on a system set to
/// `always` make a small server's resident memory grow in 2 MiB steps (docs/server.md,
/// "Memory").
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 78] =
    b"background_thread:true,max_background_threads:1,dirty_decay_ms:1000,thp:never\0";

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
