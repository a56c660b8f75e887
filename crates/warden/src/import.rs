//! `warden import`: a ZooKeeper data directory (its newest valid snapshot and the logs after
//! it) turned into a new Warden data directory that starts with the same tree, sessions and
//! zxid. The procedure around it is in docs/migration.md.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use warden_import::{Imported, Source};
use warden_server::Config;
use warden_state::StateConfig;

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// ZooKeeper's zoo.cfg: its dataDir and dataLogDir are read.
    #[arg(long, value_name = "FILE", required_unless_present = "data_dir")]
    zoo_cfg: Option<PathBuf>,
    /// ZooKeeper's dataDir (the directory holding version-2/), instead of --zoo-cfg.
    #[arg(long, value_name = "DIR", conflicts_with = "zoo_cfg")]
    data_dir: Option<PathBuf>,
    /// ZooKeeper's dataLogDir, when its logs are not in the dataDir.
    #[arg(long, value_name = "DIR", requires = "data_dir")]
    data_log_dir: Option<PathBuf>,
    /// The new Warden data directory, for a one-node server with default settings.
    #[arg(long, value_name = "DIR", required_unless_present_any = ["out_config", "out_zoo_cfg"])]
    out: Option<PathBuf>,
    /// The Warden configuration (TOML) the new data is for: its data_dir and log_dir are
    /// written, and a cluster's founding members are the servers it names.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["out", "out_zoo_cfg"])]
    out_config: Option<PathBuf>,
    /// The zoo.cfg (and myid) the new Warden server will run from, as --out-config.
    #[arg(long, value_name = "FILE", conflicts_with = "out")]
    out_zoo_cfg: Option<PathBuf>,
}

pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    let source = source(&args)?;
    let target = target(&args)?;
    let state_config = StateConfig {
        ttl_enabled: target.extended_types_enabled,
    };
    let imported = warden_import::import(&source, state_config)?;
    let written = warden_server::seed_data_dir(&target, &imported.state)?;
    report(&imported);
    println!("wrote {}", written.display());
    Ok(())
}

/// The configuration of the server that will run on the imported data.
fn target(args: &ImportArgs) -> anyhow::Result<Config> {
    let reading = |path: &PathBuf| format!("reading {}", path.display());
    let config = if let Some(path) = &args.out_config {
        Config::load_toml(path).with_context(|| reading(path))?
    } else if let Some(path) = &args.out_zoo_cfg {
        Config::from_zoo_cfg(path).with_context(|| reading(path))?.0
    } else if let Some(out) = &args.out {
        Config {
            data_dir: out.clone(),
            ..Config::default()
        }
    } else {
        bail!("say where the Warden data goes: --out, --out-config or --out-zoo-cfg")
    };
    config.validate()?;
    Ok(config)
}

fn source(args: &ImportArgs) -> anyhow::Result<Source> {
    if let Some(data_dir) = &args.data_dir {
        return Ok(Source {
            data_dir: data_dir.clone(),
            data_log_dir: args.data_log_dir.clone(),
        });
    }
    let path = args.zoo_cfg.as_ref().expect("clap requires one of them");
    let (zk, _warnings) =
        Config::from_zoo_cfg(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Source {
        data_dir: zk.data_dir,
        data_log_dir: zk.log_dir,
    })
}

fn report(imported: &Imported) {
    for skipped in &imported.skipped_snapshots {
        println!("passed over a damaged snapshot: {skipped}");
    }
    match &imported.snapshot {
        Some((path, zxid)) => println!("snapshot {} (zxid {zxid:#x})", path.display()),
        None => println!("no snapshot: replayed the logs from an empty tree"),
    }
    for log in &imported.logs {
        println!("log {}", log.display());
    }
    println!(
        "replayed {} transactions ({} already in the fuzzy snapshot); {} ZooKeeper digests matched",
        imported.txns_replayed, imported.txns_already_applied, imported.digests_checked
    );
    if let Some((path, offset)) = &imported.torn_tail {
        println!(
            "the last entry of {} (at byte {offset}) was cut short when ZooKeeper stopped: the log ends before it",
            path.display()
        );
    }
    if imported.config_reset {
        println!("/zookeeper/config held the old ensemble's membership: emptied for the new one");
    }
    let state = &imported.state;
    println!(
        "imported {} znodes, {} sessions, zxid {:#x}",
        state.tree().len(),
        state.sessions().count(),
        state.last_zxid()
    );
}
