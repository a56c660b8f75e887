//! Consensus: every change to the replicated state goes through openraft's log before it is
//! applied. Nothing outside this module names openraft or raft-log.
//!
//! - [`types`]: the log entry ([`Proposal`]) and openraft's type configuration.
//! - [`log_store`]: the durable log (raft-log: checksummed, group-commit fsync).
//! - [`snapshot_store`]: snapshot files in the data directory, retention.
//! - [`state_machine`]: applying entries to the [`Replica`], building and installing snapshots.
//! - [`network`]: messages to other members (none in a one-member cluster).

mod log_store;
mod network;
mod snapshot_store;
mod state_machine;
mod types;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;
use openraft::{Raft, SnapshotPolicy};

pub use types::{Origin, Proposal};

use crate::replica::Replica;
use log_store::LogStore;
use snapshot_store::SnapshotStore;
use state_machine::StateMachine;
use types::{PeerNode, WardenRaft};

/// What the consensus layer needs to know.
#[derive(Debug, Clone)]
pub struct Options {
    pub node_id: u64,
    /// Where this member is reached by clients, recorded in the membership.
    pub client_addr: String,
    pub log_dir: PathBuf,
    pub snapshot_dir: PathBuf,
    /// Committed entries between two snapshots (ZooKeeper's snapCount).
    pub snapshot_interval_txns: u64,
    pub snapshots_retained_count: u32,
    /// ZooKeeper's tickTime; Raft's heartbeat and election timeouts derive from it.
    pub tick_time_ms: u32,
    /// How long the log's flush thread gathers writes into one fsync.
    pub flush_wait: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Log(#[from] log_store::OpenError),
    #[error("cannot open the snapshot directory {dir}: {source}")]
    Snapshots { dir: String, source: std::io::Error },
    #[error("consensus: {0}")]
    Raft(String),
}

/// The proposal could not be put in the log; the client cannot be answered.
#[derive(Debug, thiserror::Error)]
#[error("consensus is not running: {0}")]
pub struct ProposeError(String);

/// A position in the log and its snapshots, for the admin commands.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub term: u64,
    pub leader: Option<u64>,
    pub last_log_index: u64,
    pub applied_index: u64,
    pub snapshot_index: u64,
    pub log_dir: PathBuf,
    pub snapshot_dir: PathBuf,
    pub log_bytes: u64,
    pub snapshot_bytes: u64,
}

#[derive(Clone)]
pub struct Consensus {
    raft: Raft<WardenRaft, StateMachine>,
    node_id: u64,
    log: LogStore,
    snapshots: SnapshotStore,
    log_dir: PathBuf,
}

fn raft_config(options: &Options) -> Result<openraft::Config, StartError> {
    // ZooKeeper's followers give a silent leader syncLimit ticks; Raft's timeouts are kept
    // well inside one session timeout (2 ticks at least) so a failover never expires sessions.
    let tick = u64::from(options.tick_time_ms);
    let heartbeat = (tick / 10).clamp(20, 500);
    let config = openraft::Config {
        cluster_name: "warden".into(),
        heartbeat_interval: heartbeat,
        election_timeout_min: heartbeat * 5,
        election_timeout_max: heartbeat * 10,
        enable_pre_vote: Some(true),
        install_snapshot_timeout: 10_000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_interval_txns),
        max_in_snapshot_log_to_keep: options.snapshot_interval_txns,
        ..Default::default()
    };
    config
        .validate()
        .map_err(|e| StartError::Raft(e.to_string()))
}

impl Consensus {
    /// Opens the log and snapshots, replays them into `replica`, and returns once this node
    /// leads its one-member cluster with everything committed applied.
    pub async fn start(
        options: Options,
        replica: Arc<Mutex<Replica>>,
    ) -> Result<Consensus, StartError> {
        let log = LogStore::open(&options.log_dir, options.node_id, options.flush_wait).await?;
        let snapshots = SnapshotStore::open(
            options.snapshot_dir.clone(),
            options.snapshots_retained_count as usize,
        )
        .map_err(|source| StartError::Snapshots {
            dir: options.snapshot_dir.display().to_string(),
            source,
        })?;
        let config = Arc::new(raft_config(&options)?);
        let raft_err = |e: &dyn std::fmt::Display| StartError::Raft(e.to_string());
        let raft = Raft::new(
            options.node_id,
            config,
            network::Network,
            log.clone(),
            StateMachine::new(replica, snapshots.clone()),
        )
        .await
        .map_err(|e| raft_err(&e))?;
        if !raft.is_initialized().await.map_err(|e| raft_err(&e))? {
            let me = PeerNode {
                peer_addr: String::new(),
                client_addr: options.client_addr.clone(),
            };
            raft.initialize(BTreeMap::from([(options.node_id, me)]))
                .await
                .map_err(|e| raft_err(&e))?;
        }
        let node_id = options.node_id;
        raft.wait(Some(Duration::from_secs(60)))
            .metrics(
                |m| {
                    m.current_leader == Some(node_id)
                        && m.last_applied.as_ref().map(|l| l.index) >= m.last_log_index
                },
                "leader with every committed entry applied",
            )
            .await
            .map_err(|e| raft_err(&e))?;
        let consensus = Consensus {
            raft,
            node_id,
            log,
            snapshots,
            log_dir: options.log_dir,
        };
        consensus.exit_on_fatal();
        Ok(consensus)
    }

    /// A storage failure stops openraft for good; the process must not go on serving from a
    /// state it can no longer make durable.
    fn exit_on_fatal(&self) {
        let mut metrics = self.raft.metrics();
        tokio::spawn(async move {
            loop {
                if let Err(fatal) = &metrics.borrow_watched().running_state
                    && !matches!(fatal, openraft::errors::Fatal::Stopped)
                {
                    tracing::error!(%fatal, "consensus stopped; exiting");
                    std::process::exit(1);
                }
                if metrics.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Appends a proposal to the log. Its outcome reaches the client through the replica when
    /// it is applied.
    pub async fn propose(&self, proposal: Proposal) -> Result<(), ProposeError> {
        self.raft
            .client_write_ff(proposal, None)
            .await
            .map_err(|e| ProposeError(e.to_string()))
    }

    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// Whether this node leads (and so owns session expiry and container cleanup).
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow_watched().current_leader == Some(self.node_id)
    }

    pub fn status(&self) -> Status {
        let m = self.raft.metrics().borrow_watched().clone();
        Status {
            term: m.current_term,
            leader: m.current_leader,
            last_log_index: m.last_log_index.unwrap_or(0),
            applied_index: m.last_applied.map_or(0, |l| l.index),
            snapshot_index: m.snapshot.map_or(0, |l| l.index),
            log_dir: self.log_dir.clone(),
            snapshot_dir: self.snapshots.dir().to_path_buf(),
            log_bytes: self.log.disk_bytes(),
            snapshot_bytes: self.snapshots.disk_bytes(),
        }
    }

    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "consensus did not stop cleanly");
        }
    }
}
