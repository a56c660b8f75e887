//! `warden server`: run a Warden server in the foreground until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tracing_subscriber::EnvFilter;
use warden_server::{Config, Server};

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Read an unmodified ZooKeeper zoo.cfg (and the myid file in its dataDir). Keys Warden
    /// does not use are reported as warnings; a bad value is an error (exit code 2).
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    zoo_cfg: Option<PathBuf>,
    /// Read Warden's own TOML configuration (docs/config.md lists every key).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the effective configuration as Warden TOML and exit.
    #[arg(long)]
    print_config: bool,
    /// Check the configuration as a start would (its warnings, its errors with file and line,
    /// the myid, the data and log directories, the JAAS file) without listening or writing
    /// anything; print it as Warden TOML and exit 0 if it is good, 2 if not.
    #[arg(long, conflicts_with = "print_config")]
    check_config: bool,
}

/// Exit code for a configuration that cannot be used, as ZooKeeper's.
const EXIT_CONFIG: u8 = 2;

fn load(args: &ServerArgs) -> Result<Config, String> {
    let config = if let Some(path) = &args.zoo_cfg {
        // The JAAS settings an operator gives ZooKeeper's start script (docs/security.md).
        let jvm_flags = ["SERVER_JVMFLAGS", "JVMFLAGS"]
            .map(|name| std::env::var(name).unwrap_or_default())
            .join(" ");
        let (config, warnings) =
            Config::from_zoo_cfg_with_jvm_flags(path, &jvm_flags).map_err(|e| e.to_string())?;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        config
    } else if let Some(path) = &args.config {
        Config::load_toml(path).map_err(|e| e.to_string())?
    } else {
        Config::default()
    };
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

/// The log levels unless `WARDEN_LOG` names others. openraft warns at every failed heartbeat
/// to a member that is down (ten lines a second); Warden logs a member going down and coming
/// back once itself. raft-log logs at info on every fsync once its first file is full (2,000
/// lines a second under writes, 1.4 GB an hour) and chunked-wal at every file it opens, locks
/// and removes; Warden logs the log's opening, snapshots and purges itself.
const DEFAULT_LOG_FILTER: &str = "info,openraft=error,raft_log=warn,chunked_wal=warn";

pub fn run(args: ServerArgs) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("WARDEN_LOG")
                .unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = match load(&args) {
        Ok(config) => config,
        Err(error) => {
            tracing::error!("configuration: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if args.print_config {
        print!("{}", config.to_toml_string());
        return ExitCode::SUCCESS;
    }
    if args.check_config {
        return check(&config);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("warden")
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!("cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(config))
}

/// `--check-config`: what a start checks before it listens or writes, and nothing more.
fn check(config: &Config) -> ExitCode {
    if let Err(error) = warden_server::preflight(config) {
        tracing::error!("configuration: {error}");
        return ExitCode::from(EXIT_CONFIG);
    }
    print!("{}", config.to_toml_string());
    tracing::info!(
        client_listen = %config.client_listen,
        data_dir = %config.data_dir.display(),
        "configuration is good"
    );
    ExitCode::SUCCESS
}

async fn serve(config: Config) -> ExitCode {
    let server = match Server::start(config).await {
        Ok(server) => server,
        Err(error) => {
            tracing::error!("cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let signal = shutdown_signal().await;
    tracing::info!("{signal} received; shutting down");
    server.shutdown().await;
    ExitCode::SUCCESS
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the process can still be stopped, just not cleanly.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
