//! Consensus: every change to the replicated state goes through openraft's log before it is
//! applied. Nothing outside this module names openraft or raft-log.
//!
//! - [`types`]: the log entry ([`Proposal`]) and openraft's type configuration.
//! - [`log_store`]: the durable log (raft-log: checksummed, group-commit fsync).
//! - [`snapshot_store`]: snapshot files in the data directory, retention.
//! - [`snapshot_due`]: a snapshot due before snapCount, when the log outgrew the tree.
//! - [`founding`]: the first snapshot of a data directory whose state was imported.
//! - [`state_machine`]: applying entries to the [`Replica`], building and installing snapshots.
//! - [`network`]: Raft messages to other members over the peer protocol.
//! - [`rpc`]: Raft messages from other members, handed to openraft.

mod failover;
pub mod founding;
mod log_store;
mod network;
mod rejoin;
mod rpc;
mod snapshot_due;
mod snapshot_store;
mod state_machine;
mod types;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::alias::CommittedLeaderIdOf;
use openraft::alias::{StoredMembershipOf, WriteResponderOf};
use openraft::async_runtime::watch::WatchReceiver;
use openraft::errors::{ClientWriteError, InitializeError, RaftError};
use openraft::raft::ReadPolicy;
use openraft::{Instant as _, Raft, SnapshotPolicy};
use tokio::sync::mpsc;

pub use network::{ClusterId, Identity};
pub use rejoin::stored_cluster_id;
pub use types::{Origin, Proposal, mirrored_txn};

use crate::cluster::wire::{FrameReader, FrameWriter, WireError};
use crate::replica::Replica;
pub use log_store::Flushes;
use log_store::LogStore;
use snapshot_store::SnapshotStore;
use state_machine::StateMachine;
use types::{Completion, LogProposal, PeerNode, WardenRaft};

/// A member as the configuration names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberAddr {
    pub id: u64,
    /// `host:port` other members replicate to (ZooKeeper's quorum port).
    pub peer_addr: String,
    /// `host:port` clients connect to.
    pub client_addr: String,
    /// Whether it votes; observers do not.
    pub voter: bool,
}

/// What the consensus layer needs to know.
#[derive(Debug, Clone)]
pub struct Options {
    pub identity: Identity,
    /// Where the cluster's own markers live (the recovery marker).
    pub data_dir: PathBuf,
    /// Every member, this one included. One member: a standalone server.
    pub members: Vec<MemberAddr>,
    pub log_dir: PathBuf,
    pub snapshot_dir: PathBuf,
    /// Committed entries between two snapshots (ZooKeeper's snapCount).
    pub snapshot_interval_txns: u64,
    /// Bytes of log since the last snapshot at which the next one is due, 0 for no limit
    /// (ZooKeeper's snapSizeLimitInKb).
    pub snapshot_log_bytes_max: u64,
    /// Whether a clean stop takes a snapshot first (`snapshots.on_exit`).
    pub snapshot_on_exit: bool,
    pub snapshots_retained_count: u32,
    /// ZooKeeper's tickTime; Raft's heartbeat and election timeouts derive from it.
    pub tick_time_ms: u32,
    /// How long the log's flush thread gathers writes into one fsync.
    pub flush_wait: Duration,
    /// An append slower than this to become durable is logged and counted (ZooKeeper's
    /// fsync.warningthresholdms).
    pub fsync_warning: Duration,
    /// The largest snapshot this server accepts from a leader.
    pub snapshot_bytes_max: u64,
    /// Whether the writes this server proposes while it leads are checked against quota
    /// hard limits (ZooKeeper's enforceQuota).
    pub enforce_quota: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Log(#[from] log_store::OpenError),
    #[error("cannot open the snapshot directory {dir}: {source}")]
    Snapshots { dir: String, source: std::io::Error },
    #[error("consensus: {0}")]
    Raft(String),
    #[error("the data is damaged ({damage}) and could not be moved aside: {source}")]
    Quarantine {
        damage: String,
        source: std::io::Error,
    },
}

impl StartError {
    /// Whether the error is damaged data (a record or snapshot that does not decode or fails
    /// its checksum), as opposed to a directory that cannot be used at all.
    fn is_damage(&self) -> bool {
        let source = match self {
            StartError::Log(log_store::OpenError::Io { source, .. }) => source,
            StartError::Snapshots { source, .. } => source,
            _ => return false,
        };
        matches!(
            source.kind(),
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
        )
    }
}

/// Opens the log and the snapshot directory, and checks the newest snapshot.
async fn open_stores(options: &Options) -> Result<(LogStore, SnapshotStore), StartError> {
    let snapshot_err = |source| StartError::Snapshots {
        dir: options.snapshot_dir.display().to_string(),
        source,
    };
    let snapshots = SnapshotStore::open(
        options.snapshot_dir.clone(),
        options.snapshots_retained_count as usize,
    )
    .map_err(snapshot_err)?;
    // The newest snapshot is checked end to end while the log opens.
    let checking = snapshots.clone();
    let checked = tokio::task::spawn_blocking(move || checking.verify_latest());
    let log = LogStore::open(
        &options.log_dir,
        options.identity.me,
        options.flush_wait,
        options.fsync_warning,
        options.identity.frame_bytes_max,
    )
    .await?;
    checked
        .await
        .map_err(std::io::Error::other)
        .and_then(|checked| checked)
        .map_err(snapshot_err)?;
    Ok((log, snapshots))
}

/// Why a proposal will never be applied: its client cannot be answered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProposeError {
    #[error("this server does not lead (the leader is {leader:?})")]
    NotLeader { leader: Option<u64> },
    #[error("the entry was discarded by a new leader")]
    Discarded,
    #[error("consensus has stopped")]
    Stopped,
}

fn propose_error(e: ClientWriteError<WardenRaft>) -> ProposeError {
    match e {
        ClientWriteError::ForwardToLeader(f) => ProposeError::NotLeader {
            leader: f.leader_id,
        },
        _ => ProposeError::Discarded,
    }
}

/// Why a read index could not be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadIndexError {
    #[error("this server does not lead (the leader is {leader:?})")]
    NotLeader { leader: Option<u64> },
    #[error("leadership could not be confirmed: {0}")]
    Unconfirmed(String),
    #[error("this server did not catch up with the read index in time")]
    Lagging,
}

/// Where the log stands (`Consensus::log_info`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogInfo {
    /// The first entry still in the log (those before are in a snapshot) and its term.
    pub first_index: u64,
    pub first_term: u64,
    pub last_index: u64,
    pub last_term: u64,
    /// Committed as this server knows it (its log holds it, flushed).
    pub committed_index: u64,
    /// Committed by the cluster's quorum, as the leader last said: what this server applies
    /// up to.
    pub cluster_committed_index: u64,
    pub snapshot_index: u64,
}

/// Why a membership change was not made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MembershipError {
    #[error("another membership change is under way")]
    InProgress,
    #[error("this server does not lead")]
    NotLeader,
    #[error("{0}")]
    Failed(String),
}

/// A position in the log and its snapshots, for the admin commands.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub term: u64,
    pub leader: Option<u64>,
    pub last_log_index: u64,
    pub committed_index: u64,
    pub applied_index: u64,
    pub snapshot_index: u64,
    pub log_dir: PathBuf,
    pub snapshot_dir: PathBuf,
    pub log_bytes: u64,
    pub snapshot_bytes: u64,
    /// Voters and learners of the membership in force.
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
    /// On a leader: the members that acknowledged replication within an election timeout.
    pub synced_followers: Vec<u64>,
    /// Read-index confirmations under way.
    pub pending_syncs: u64,
    /// The log flush thread's work since this server started.
    pub flushes: Flushes,
    /// Append requests this server sent to each member while it led, by member id.
    pub appends: BTreeMap<u64, network::Appends>,
}

/// When this server last heard from a leader, for "am I serving?".
pub(crate) struct Liveness {
    started: Instant,
    /// Milliseconds after `started`; 0 = never.
    leader_heard: AtomicU64,
    leader_heard_from: AtomicU64,
    /// When a connection from or to the leader broke (ms after `started`; 0 = none since
    /// it was last heard from): unless it is heard from again within `RECONNECT_GRACE`, it
    /// is taken for gone at once, without waiting out an election timeout, as ZooKeeper's
    /// followers drop their clients as soon as the leader's connection breaks.
    leader_lost: AtomicU64,
}

/// How long a leader whose connection broke has to be heard from again over a new one.
const RECONNECT_GRACE_MS: u64 = 300;

impl Liveness {
    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64 + 1
    }

    /// Whether the leader `leader` is believed alive: heard from within `timeout_ms`, and not
    /// silent since one of its connections broke.
    fn leader_alive(&self, leader: u64, timeout_ms: u64) -> bool {
        let now = self.elapsed_ms();
        let heard = self.leader_heard.load(Ordering::Relaxed);
        if heard == 0 || self.leader_heard_from.load(Ordering::Relaxed) != leader {
            return false;
        }
        let lost = self.leader_lost.load(Ordering::Relaxed);
        let broke_unheard =
            lost != 0 && lost >= heard && now.saturating_sub(lost) > RECONNECT_GRACE_MS;
        now.saturating_sub(heard) <= timeout_ms && !broke_unheard
    }

    /// Whether a connection with `leader` broke and it has not been heard from since (within
    /// the reconnect grace or not).
    pub(super) fn leader_in_doubt(&self, leader: u64) -> bool {
        let heard = self.leader_heard.load(Ordering::Relaxed);
        let lost = self.leader_lost.load(Ordering::Relaxed);
        self.leader_heard_from.load(Ordering::Relaxed) == leader && lost != 0 && lost >= heard
    }

    /// A connection with the leader broke; `definitely` when it could not even be opened
    /// (the process is gone), so no grace is given.
    pub(crate) fn connection_lost(&self, leader: u64, definitely: bool) {
        if self.leader_heard_from.load(Ordering::Relaxed) != leader {
            return;
        }
        let now = self.elapsed_ms();
        let at = if definitely {
            now.saturating_sub(RECONNECT_GRACE_MS + 1).max(1)
        } else {
            now
        };
        self.leader_lost.store(at, Ordering::Relaxed);
    }
}

#[derive(Clone)]
pub struct Consensus {
    raft: Raft<WardenRaft, StateMachine>,
    identity: Identity,
    standalone: bool,
    log: LogStore,
    snapshots: SnapshotStore,
    log_dir: PathBuf,
    liveness: Arc<Liveness>,
    /// How long a leader may go unheard before this server stops serving.
    leader_timeout: Duration,
    /// openraft's heartbeat interval.
    heartbeat: Duration,
    failover: Arc<failover::Probe>,
    /// Read-index confirmations under way on this server (ZooKeeper's pending syncs).
    pending_read_indexes: Arc<AtomicU64>,
    committed: network::Committed,
    outstanding: network::Outstanding,
    recovery: Arc<rejoin::Recovery>,
    snapshot_bytes_max: u64,
    snapshot_on_exit: bool,
    enforce_quota: bool,
    /// Where the sizes of this leader's proposals are kept.
    stats: Arc<crate::stats::ServerStats>,
}

/// How long a clean stop waits for its snapshot (`snapshots.on_exit`): well past the few
/// seconds a tree of millions of znodes takes, and inside the stop timeouts of service
/// managers (systemd's is 90 s).
const SNAPSHOT_ON_EXIT_BOUND: Duration = Duration::from_secs(60);
/// How often a clean stop repeats its trigger while it waits for that snapshot.
const SNAPSHOT_ON_EXIT_RETRIGGER: Duration = Duration::from_millis(250);

/// Entries kept in the log behind the newest snapshot, for followers that lag by less to
/// catch up from the log rather than from a snapshot: a tenth of snapCount (10,000 by
/// default), and never fewer than openraft's 1,000 (or snapCount, if smaller). A restart
/// reads back every entry kept: keeping a whole snapCount doubled what it read.
fn log_kept_behind_snapshot(snap_count: u64) -> u64 {
    (snap_count / 10).max(snap_count.min(1000))
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
        // A member whose data directory was lost comes back with an empty log; the leader
        // must start its replication over instead of treating that as a bug. Its votes are
        // withheld until it has caught up (`rejoin`), which is what keeps this safe.
        allow_log_reversion: Some(true),
        // A leader that restarts must win a new election, in a new term, as in standard Raft.
        // openraft's default restores it as leader of its old term at once, and then the
        // entries it appends reuse (term, index) pairs that a follower may already hold with
        // other contents (sent before the crash, never flushed on the leader): the follower
        // keeps its own, and the replicas diverge. The fault suite's long profile caught
        // exactly that after a kill -9 of every server (docs/faults.md).
        enable_leader_restore: Some(false),
        install_snapshot_timeout: 10_000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_interval_txns),
        max_in_snapshot_log_to_keep: log_kept_behind_snapshot(options.snapshot_interval_txns),
        ..Default::default()
    };
    config
        .validate()
        .map_err(|e| StartError::Raft(e.to_string()))
}

impl Consensus {
    /// Opens the log and snapshots and replays them into `replica`. A standalone server
    /// returns once it leads its one-member cluster with everything committed applied; a
    /// member of a cluster returns at once and finds its leader in the background.
    pub async fn start(
        options: Options,
        replica: Arc<Mutex<Replica>>,
    ) -> Result<Consensus, StartError> {
        let node_id = options.identity.me;
        let standalone = options.members.len() <= 1;
        let stats = replica.lock().expect("replica lock poisoned").stats.clone();
        let (log, snapshots) = match open_stores(&options).await {
            // A member of a cluster gets its data back from the others (`rejoin`); a
            // standalone server has nobody to get it from and says why it cannot start.
            Err(e) if !standalone && e.is_damage() => {
                rejoin::quarantine(
                    &options.data_dir,
                    &[&options.log_dir, &options.snapshot_dir],
                    &e.to_string(),
                )
                .map_err(|source| StartError::Quarantine {
                    damage: e.to_string(),
                    source,
                })?;
                open_stores(&options).await?
            }
            opened => opened?,
        };
        let config = Arc::new(raft_config(&options)?);
        let leader_timeout = Duration::from_millis(config.election_timeout_max);
        let heartbeat = Duration::from_millis(config.heartbeat_interval);
        let raft_err = |e: &dyn std::fmt::Display| StartError::Raft(e.to_string());
        let committed = network::Committed::default();
        let outstanding = network::Outstanding::default();
        let (ask_snapshot, snapshot_asked) = mpsc::channel(1);
        let raft = Raft::new(
            node_id,
            config,
            network::Network {
                identity: options.identity.clone(),
                reachable: network::Reachability::default(),
                committed: committed.clone(),
                outstanding: outstanding.clone(),
                log: log.clone(),
            },
            log.clone(),
            StateMachine::new(
                replica,
                snapshots.clone(),
                snapshot_due::LogSinceSnapshot::new(ask_snapshot, options.snapshot_log_bytes_max),
            ),
        )
        .await
        .map_err(|e| raft_err(&e))?;
        tokio::spawn(snapshot_when_asked(raft.clone(), snapshot_asked));
        let recovery = rejoin::Recovery::open(&options.data_dir);
        let initialized = raft.is_initialized().await.map_err(|e| raft_err(&e))?;
        let voter = options.members.iter().any(|m| m.id == node_id && m.voter);
        if !standalone && !initialized && voter {
            recovery
                .begin_empty()
                .map_err(|source| StartError::Snapshots {
                    dir: options.data_dir.display().to_string(),
                    source,
                })?;
        }
        if standalone && !initialized {
            let me = BTreeMap::from([(node_id, peer_node(&options.members[0]))]);
            match raft.initialize(me).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(raft_err(&e)),
            }
        }
        if !standalone && initialized {
            let voters: Vec<u64> = raft
                .metrics()
                .borrow_watched()
                .membership_config
                .membership()
                .voter_ids()
                .collect();
            if voters == [node_id] {
                return Err(StartError::Raft(format!(
                    "this data directory was made by a standalone server, but the \
                     configuration names {} servers: a cluster starts from empty data \
                     directories (a standalone server cannot be grown into one yet)",
                    options.members.len()
                )));
            }
        }
        if !standalone {
            if recovery.recovering() {
                raft.runtime_config().elect(false);
            }
            if !initialized || recovery.target_unknown() {
                // Every founder starts from the same voters, so whichever initializes first,
                // they agree (openraft allows identical initialization on several members).
                // Observers join as learners once a leader exists (`reconcile_learners`).
                tokio::spawn(rejoin::found_or_join(
                    raft.clone(),
                    options.identity.clone(),
                    options.members.clone(),
                    recovery.clone(),
                    options.data_dir.clone(),
                ));
            } else {
                rejoin::keep_cluster_id(&options.data_dir, options.identity.cluster_id.get());
            }
            tokio::spawn(rejoin::finish_recovery(raft.clone(), recovery.clone()));
            tokio::spawn(track_committed(raft.clone(), committed.clone()));
        }
        let consensus = Consensus {
            raft,
            identity: options.identity,
            standalone,
            log,
            snapshots,
            log_dir: options.log_dir,
            liveness: Arc::new(Liveness {
                started: Instant::now(),
                leader_heard: AtomicU64::new(0),
                leader_heard_from: AtomicU64::new(0),
                leader_lost: AtomicU64::new(0),
            }),
            leader_timeout,
            heartbeat,
            failover: Arc::default(),
            pending_read_indexes: Arc::default(),
            committed,
            outstanding,
            recovery,
            snapshot_bytes_max: options.snapshot_bytes_max,
            snapshot_on_exit: options.snapshot_on_exit,
            enforce_quota: options.enforce_quota,
            stats,
        };
        if standalone {
            consensus
                .raft
                .wait(Some(Duration::from_secs(60)))
                .metrics(
                    |m| {
                        m.current_leader == Some(node_id)
                            && m.last_applied.as_ref().map(|l| l.index) >= m.last_log_index
                    },
                    "leader with every committed entry applied",
                )
                .await
                .map_err(|e| raft_err(&e))?;
        }
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

    fn stamp(&self, proposal: &mut Proposal) {
        proposal.txn.time_ms = crate::replica::now_ms();
        proposal.txn.enforce_quota = self.enforce_quota;
    }

    /// Appends a proposal to the log if this server leads (in `term`, when one is named: the
    /// entry is then of that term or of none, which is what lets a write whose leader was
    /// lost be handed again safely, crate::writes). Its outcome reaches the client through the
    /// replica of the server the client is connected to, when it is applied; if it never
    /// enters the log, or a new leader discards it, `failed` is called instead.
    pub async fn propose(
        &self,
        proposal: Proposal,
        term: Option<u64>,
        failed: impl FnOnce(ProposeError) + Send + 'static,
    ) {
        let completion = Completion::new(move |result: Result<_, ClientWriteError<_>>| {
            if let Err(e) = result {
                failed(propose_error(e))
            }
        });
        if let Err(fatal) = self.write(proposal, term, completion).await {
            // The completion went down with openraft's core; exit_on_fatal ends the process.
            tracing::warn!(%fatal, "a proposal was not accepted: consensus stopped");
        }
    }

    /// ReadIndex: confirms with a quorum that this server still leads and returns the log
    /// index a read must see (every entry committed before the call).
    pub async fn read_index(&self) -> Result<u64, ReadIndexError> {
        self.pending_read_indexes.fetch_add(1, Ordering::Relaxed);
        let linearizer = self.raft.get_read_linearizer(ReadPolicy::ReadIndex).await;
        self.pending_read_indexes.fetch_sub(1, Ordering::Relaxed);
        match linearizer {
            Ok(linearizer) => Ok(linearizer.read_log_id().index()),
            Err(RaftError::APIError(openraft::errors::LinearizableReadError::ForwardToLeader(
                f,
            ))) => Err(ReadIndexError::NotLeader {
                leader: f.leader_id,
            }),
            Err(e) => Err(ReadIndexError::Unconfirmed(e.to_string())),
        }
    }

    /// Waits until this server has applied the log up to `index`, at most `limit`.
    pub async fn applied_up_to(&self, index: u64, limit: Duration) -> Result<(), ReadIndexError> {
        self.raft
            .wait(Some(limit))
            .applied_index_at_least(Some(index), "read index")
            .await
            .map(|_| ())
            .map_err(|_| ReadIndexError::Lagging)
    }

    /// Serves another member's Raft channel until it ends; returns why it ended.
    pub async fn serve_peer(
        &self,
        from: u64,
        reader: FrameReader,
        writer: FrameWriter,
    ) -> WireError {
        rpc::serve(self, from, reader, writer).await
    }

    pub fn node_id(&self) -> u64 {
        self.identity.me
    }

    /// This server's committed log index, as its peers' handshakes are told.
    pub fn committed_index(&self) -> u64 {
        self.committed.get()
    }

    /// A connection with the leader was refused or broke (the forward channel, or the Raft
    /// channel it opened): this server stops serving until it hears from a leader again, and
    /// calls an election at once if the leader's process is gone (`failover`).
    pub fn leader_unreachable(&self, leader: u64, refused: bool) {
        if self.leader() == Some(leader) && leader != self.identity.me {
            self.liveness.connection_lost(leader, refused);
            self.leader_connection_broke(leader, refused);
        }
    }

    /// The longest an election can take to start: how long a leader may go unheard.
    pub fn election_timeout(&self) -> Duration {
        self.leader_timeout
    }

    /// Whether this member is catching up after losing its data (it does not vote).
    pub fn recovering(&self) -> bool {
        self.recovery.recovering()
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// A one-member cluster: no peers, always its own leader.
    pub fn standalone(&self) -> bool {
        self.standalone
    }

    /// Whether this node leads (and so owns session expiry and container cleanup).
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow_watched().current_leader == Some(self.identity.me)
    }

    /// The leader this server follows, if it knows one.
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow_watched().current_leader
    }

    /// The leader and the term it leads in, as this server knows them.
    pub fn leader_in_term(&self) -> Option<(u64, u64)> {
        let m = self.raft.metrics();
        let m = m.borrow_watched();
        m.current_leader.map(|leader| (leader, m.current_term))
    }

    /// The term this server is in.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow_watched().current_term
    }

    /// Whether this server leads in `term`.
    pub fn leads_in(&self, term: u64) -> bool {
        self.leader_in_term() == Some((self.node_id(), term))
    }

    /// The membership in force (the last one in the log, committed or not).
    fn membership(&self) -> Arc<StoredMembershipOf<WardenRaft>> {
        self.raft
            .metrics()
            .borrow_watched()
            .membership_config
            .clone()
    }

    /// Where a member is reached by its peers, from the membership in force.
    pub fn peer_addr(&self, id: u64) -> Option<String> {
        self.membership()
            .membership()
            .get_node(&id)
            .map(|n| n.peer_addr.clone())
    }

    /// Whether this server can serve clients: it leads with a quorum heard from lately, or it
    /// follows a leader it heard from lately. A server that cannot is closed to clients.
    pub fn serving(&self) -> bool {
        let m = self.raft.metrics().borrow_watched().clone();
        let Some(leader) = m.current_leader else {
            return false;
        };
        if self.standalone {
            return leader == self.identity.me;
        }
        let timeout_ms = self.leader_timeout.as_millis() as u64;
        if leader == self.identity.me {
            return m
                .last_quorum_acked
                .is_some_and(|at| at.elapsed().as_millis() as u64 <= timeout_ms);
        }
        self.liveness.leader_alive(leader, timeout_ms)
    }

    /// Changes of leader or term, to watch for leadership changes.
    pub async fn changed(&self, previous: (u64, Option<u64>)) -> (u64, Option<u64>) {
        let mut metrics = self.raft.metrics();
        loop {
            let now = {
                let m = metrics.borrow_watched();
                (m.current_term, m.current_leader)
            };
            if now != previous {
                return now;
            }
            if metrics.changed().await.is_err() {
                return now;
            }
        }
    }

    /// Proposes like [`Consensus::propose`] and waits until the entry is applied here;
    /// returns the zxid the state has after it.
    pub async fn propose_and_wait(
        &self,
        proposal: Proposal,
        term: Option<u64>,
    ) -> Result<i64, ProposeError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let completion = Completion::new(
            move |result: Result<
                openraft::raft::ClientWriteResponse<WardenRaft>,
                ClientWriteError<_>,
            >| {
                let _ = tx.send(result.map(|r| r.data.zxid).map_err(propose_error));
            },
        );
        if self.write(proposal, term, completion).await.is_err() {
            return Err(ProposeError::Stopped);
        }
        rx.await.unwrap_or(Err(ProposeError::Discarded))
    }

    /// Hands a proposal to openraft, stamped, on condition that this server leads in `term`
    /// if one is named.
    async fn write(
        &self,
        mut proposal: Proposal,
        term: Option<u64>,
        completion: WriteResponderOf<WardenRaft>,
    ) -> Result<(), openraft::errors::Fatal<WardenRaft>> {
        // Only a leader's proposal enters the log, so every transaction carries the leader's
        // time (the state machine keeps it from going backwards across leaders) and the
        // leader's quota enforcement, which every replica then applies alike.
        self.stamp(&mut proposal);
        let proposal = LogProposal::new(proposal);
        if self.is_leader() && !self.standalone {
            // The entry as the log stores it (its serde form is this encoding). A standalone
            // server has no proposals to count, as ZooKeeper's has none.
            self.stats.proposal_sizes.record(proposal.encoded().len());
            self.stats.proposals.fetch_add(1, Ordering::Relaxed);
        }
        let write = self.raft.write(proposal).responder(completion);
        match term {
            Some(term) => {
                write
                    .with_leader(CommittedLeaderIdOf::<WardenRaft>::new(term))
                    .await
            }
            None => write.await,
        }
    }

    /// The voters and the learners (observers) of the membership in force.
    pub fn members(&self) -> (BTreeSet<u64>, BTreeSet<u64>) {
        let m = self.membership();
        let membership = m.membership();
        (
            membership.voter_ids().collect(),
            membership.learner_ids().collect(),
        )
    }

    /// Changes the membership to exactly `members` (voters and learners), in openraft's joint
    /// consensus: new members are added as learners first, then the voters are replaced (the
    /// old ones that stay on as observers kept as learners), then members that leave entirely
    /// are removed. Returns once the change is committed.
    pub async fn change_members(&self, members: &[MemberAddr]) -> Result<(), MembershipError> {
        use openraft::ChangeMembers;
        let failed = |e: RaftError<WardenRaft, ClientWriteError<WardenRaft>>| match e {
            RaftError::APIError(ClientWriteError::ChangeMembershipError(
                openraft::errors::ChangeMembershipError::InProgress(_),
            )) => MembershipError::InProgress,
            RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => MembershipError::NotLeader,
            other => MembershipError::Failed(other.to_string()),
        };
        let (voters, learners) = self.members();
        let known: BTreeSet<u64> = voters.union(&learners).copied().collect();
        let new_nodes: BTreeMap<u64, PeerNode> = members
            .iter()
            .filter(|m| !known.contains(&m.id))
            .map(|m| (m.id, peer_node(m)))
            .collect();
        if !new_nodes.is_empty() {
            self.raft
                .change_membership(ChangeMembers::AddNodes(new_nodes), true)
                .await
                .map_err(failed)?;
        }
        let new_voters: BTreeSet<u64> = members.iter().filter(|m| m.voter).map(|m| m.id).collect();
        let me = self.identity.me;
        if voters.contains(&me)
            && !new_voters.contains(&me)
            && self.is_leader()
            && self.hand_over_to_one_of(&new_voters).await
        {
            // A leader that stops being a voter hands over first, as ZooKeeper's leader hands
            // over to a designated successor, so that the cluster does not wait out an
            // election; the new leader finishes the change (`membership::reconcile`).
            return Ok(());
        }
        if new_voters != voters {
            self.raft
                .change_membership(ChangeMembers::ReplaceAllVoters(new_voters), true)
                .await
                .map_err(failed)?;
        }
        let wanted: BTreeSet<u64> = members.iter().map(|m| m.id).collect();
        let (voters, learners) = self.members();
        let gone: BTreeSet<u64> = voters
            .union(&learners)
            .filter(|id| !wanted.contains(id))
            .copied()
            .collect();
        if !gone.is_empty() {
            self.raft
                .change_membership(ChangeMembers::RemoveNodes(gone), true)
                .await
                .map_err(failed)?;
        }
        Ok(())
    }

    /// Hands leadership to the most up-to-date other voter, if this server leads; used on
    /// SIGTERM so that a rolling restart does not wait out an election timeout.
    pub async fn hand_over_leadership(&self) {
        let voters: BTreeSet<u64> = self.members().0;
        if self.is_leader() && self.hand_over_to_one_of(&voters).await {
            tracing::info!("leadership handed over before stopping");
        }
    }

    /// Transfers leadership to the most up-to-date member of `candidates` other than this
    /// one, and waits (an election timeout at most) for it to take over. Returns whether this
    /// server no longer leads.
    async fn hand_over_to_one_of(&self, candidates: &BTreeSet<u64>) -> bool {
        let m = self.raft.metrics().borrow_watched().clone();
        let Some(replication) = &m.replication else {
            return false;
        };
        let best = replication
            .iter()
            .filter(|(id, _)| **id != self.identity.me && candidates.contains(id))
            .max_by_key(|(_, matched)| matched.as_ref().map(|l| l.index))
            .map(|(id, _)| *id);
        let Some(to) = best else {
            return false;
        };
        tracing::info!(to, "handing leadership over");
        let _ = self.raft.trigger().transfer_leader(to).await;
        self.raft
            .wait(Some(self.leader_timeout))
            .metrics(|m| m.current_leader != Some(m.id), "leadership handed over")
            .await
            .is_ok()
    }

    /// Stands for election now (ClickHouse Keeper's `rqld`). Voters grant it only if this
    /// server's log is as up to date as theirs, so it never costs a committed write.
    pub async fn request_leadership(&self) {
        let m = self.raft.metrics().borrow_watched().clone();
        let voter = m
            .membership_config
            .membership()
            .voter_ids()
            .any(|id| id == self.identity.me);
        if self.standalone
            || !voter
            || self.recovering()
            || m.current_leader == Some(self.identity.me)
        {
            return;
        }
        tracing::info!("standing for election, as asked (rqld)");
        let _ = self.raft.trigger().elect(false).await;
    }

    pub fn status(&self) -> Status {
        let m = self.raft.metrics().borrow_watched().clone();
        let membership = m.membership_config.membership();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let learners: Vec<u64> = membership.learner_ids().collect();
        let synced_followers = self.followers_heard_within(self.leader_timeout);
        Status {
            term: m.current_term,
            leader: m.current_leader,
            last_log_index: m.last_log_index.unwrap_or(0),
            committed_index: m.local_committed.map_or(0, |l| l.index),
            applied_index: m.last_applied.map_or(0, |l| l.index),
            snapshot_index: m.snapshot.map_or(0, |l| l.index),
            log_dir: self.log_dir.clone(),
            snapshot_dir: self.snapshots.dir().to_path_buf(),
            log_bytes: self.log.disk_bytes(),
            snapshot_bytes: self.snapshots.disk_bytes(),
            voters,
            learners,
            synced_followers,
            pending_syncs: self.pending_read_indexes.load(Ordering::Relaxed),
            flushes: self.log.flushes(),
            appends: self.outstanding.by_member(),
        }
    }

    /// On the leader, the other members that have answered it since `since` (acknowledged a
    /// heartbeat or an append sent after that moment, or about then); empty on any other
    /// server. Unlike [`Status::synced_followers`], which counts a member as in touch for an
    /// election timeout after its last answer, a member that has just died is not among them.
    pub fn answered_since(&self, since: Instant) -> Vec<u64> {
        self.followers_heard_within(since.elapsed())
    }

    /// On the leader, the other members whose last answer came within `within`; empty on any
    /// other server.
    fn followers_heard_within(&self, within: Duration) -> Vec<u64> {
        let m = self.raft.metrics();
        let m = m.borrow_watched();
        m.heartbeat
            .as_ref()
            .map(|h| {
                h.iter()
                    .filter(|(id, at)| {
                        **id != self.identity.me && at.is_some_and(|t| t.elapsed() <= within)
                    })
                    .map(|(id, _)| *id)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// On the leader, the log index each other member is known to hold (openraft's matched
    /// index; 0 before the first acknowledgement); `None` on any other server.
    pub fn replication(&self) -> Option<BTreeMap<u64, u64>> {
        let m = self.raft.metrics().borrow_watched().clone();
        m.replication.as_ref().map(|r| {
            r.iter()
                .filter(|(id, _)| **id != self.identity.me)
                .map(|(id, matched)| (*id, matched.as_ref().map_or(0, |l| l.index)))
                .collect()
        })
    }

    /// How long appended log entries took to become durable.
    pub fn log_append_seconds(&self) -> prometheus_client::metrics::histogram::Histogram {
        self.log.append_seconds()
    }

    /// The log's bounds and commit points, for ClickHouse Keeper's `lgif`.
    pub async fn log_info(&self) -> LogInfo {
        use openraft::RaftLogReader as _;
        let m = self.raft.data_metrics().borrow_watched().clone();
        let first_index = m.purged.map_or(0, |p| p.index + 1);
        let first_term = match m.last_log {
            Some(last) if last.index >= first_index => self
                .log
                .clone()
                .try_get_log_entries(first_index..=first_index)
                .await
                .ok()
                .and_then(|entries| entries.first().map(|e| e.log_id.leader_id.term))
                .unwrap_or(0),
            _ => 0,
        };
        LogInfo {
            first_index,
            first_term,
            last_index: m.last_log.map_or(0, |id| id.index),
            last_term: m.last_log.map_or(0, |id| id.leader_id.term),
            committed_index: m.local_committed.map_or(0, |id| id.index),
            cluster_committed_index: m.cluster_committed.map_or(0, |id| id.index),
            snapshot_index: m.snapshot.map_or(0, |id| id.index),
        }
    }

    /// Asks for a snapshot now (ClickHouse Keeper's `csnp`); returns the committed index it
    /// will cover at least, or None if consensus has stopped.
    pub async fn snapshot_now(&self) -> Option<u64> {
        let committed = self.log_info().await.committed_index;
        self.raft
            .trigger()
            .snapshot()
            .await
            .ok()
            .map(|()| committed)
    }

    /// The newest snapshot on disk: its zxid and when it was written.
    pub fn last_snapshot(&self) -> std::io::Result<Option<(i64, std::time::SystemTime)>> {
        self.snapshots.latest_zxid()
    }

    /// With `snapshots.on_exit`, before a clean stop: a snapshot of everything applied, if
    /// entries were applied since the newest one, so that the next start loads it and
    /// replays no log; openraft purges the log behind it as after any snapshot. A snapshot
    /// not done within [`SNAPSHOT_ON_EXIT_BOUND`] is given up: the next start replays the log.
    pub async fn snapshot_before_exit(&self) {
        if !self.snapshot_on_exit {
            return;
        }
        let metrics = self.raft.metrics().borrow_watched().clone();
        let Some(applied) = metrics.last_applied else {
            return;
        };
        if metrics.snapshot.is_some_and(|s| s.index >= applied.index) {
            return;
        }
        let started = Instant::now();
        // openraft passes over a trigger while it builds a snapshot: one that began before
        // the stop (a regular one, short of `applied`) would be the last. The trigger is
        // repeated until a snapshot reaches `applied`.
        let taken = loop {
            if self.raft.trigger().snapshot().await.is_err() {
                return;
            }
            let left = SNAPSHOT_ON_EXIT_BOUND.saturating_sub(started.elapsed());
            let taken = self
                .raft
                .wait(Some(left.min(SNAPSHOT_ON_EXIT_RETRIGGER)))
                .metrics(
                    |m| m.snapshot.is_some_and(|s| s.index >= applied.index),
                    "a snapshot before exit",
                )
                .await;
            if taken.is_ok() || left <= SNAPSHOT_ON_EXIT_RETRIGGER {
                break taken;
            }
        };
        let ms = started.elapsed().as_millis() as u64;
        match taken {
            Ok(_) => tracing::info!(
                index = applied.index,
                ms,
                "snapshot taken for the next start"
            ),
            Err(e) => tracing::warn!(
                error = %e,
                ms,
                "no snapshot before exit: the next start replays the log after the last one"
            ),
        }
    }

    /// Tells when the log is closed and its directory unlocked ([`LogStore::released`]).
    pub fn log_released(&self) -> log_store::Released {
        self.log.released()
    }

    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "consensus did not stop cleanly");
        }
    }
}

/// Takes the snapshots the state machine finds due before snapCount (`snapshot_due.rs`),
/// until openraft stops and drops the state machine, and with it the sender.
async fn snapshot_when_asked(raft: Raft<WardenRaft, StateMachine>, mut asked: mpsc::Receiver<()>) {
    while asked.recv().await.is_some() {
        if raft.trigger().snapshot().await.is_err() {
            return;
        }
    }
}

/// Keeps the committed index the handshakes carry up to date.
async fn track_committed(raft: Raft<WardenRaft, StateMachine>, committed: network::Committed) {
    let mut metrics = raft.metrics();
    loop {
        let index = metrics
            .borrow_watched()
            .local_committed
            .as_ref()
            .map_or(0, |l| l.index);
        committed.0.store(index, Ordering::Relaxed);
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

fn peer_node(m: &MemberAddr) -> PeerNode {
    PeerNode {
        peer_addr: m.peer_addr.clone(),
        client_addr: m.client_addr.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_state::{State, StateConfig, TxnKind};

    /// A test server's options: member 1 of `members`, its data in `dir`, a snapshot every
    /// 1,000 entries and at a clean stop.
    pub(super) fn test_options(dir: &std::path::Path, members: Vec<MemberAddr>) -> Options {
        Options {
            identity: Identity {
                me: 1,
                cluster_id: ClusterId::new(7),
                frame_bytes_max: 4 << 20,
                transport: Default::default(),
            },
            data_dir: dir.to_path_buf(),
            members,
            log_dir: dir.join("log"),
            snapshot_dir: dir.join("snapshots"),
            snapshot_interval_txns: 1000,
            snapshot_log_bytes_max: 0,
            snapshot_on_exit: true,
            snapshots_retained_count: 3,
            tick_time_ms: 200,
            flush_wait: Duration::ZERO,
            fsync_warning: Duration::from_secs(1),
            snapshot_bytes_max: 1 << 30,
            enforce_quota: false,
        }
    }

    /// The one member of a one-server cluster.
    pub(super) fn only_member() -> MemberAddr {
        MemberAddr {
            id: 1,
            peer_addr: String::new(),
            client_addr: "127.0.0.1:2181".into(),
            voter: true,
        }
    }

    /// A member of a three-member cluster whose peers never answer: it can never lead.
    async fn lonely_member(dir: &std::path::Path) -> Consensus {
        let members = (1..=3)
            .map(|id| MemberAddr {
                id,
                // Port 9 (discard) on loopback: nothing listens, connections are refused.
                peer_addr: "127.0.0.1:9".into(),
                client_addr: String::new(),
                voter: true,
            })
            .collect();
        let replica = Arc::new(Mutex::new(Replica::new(
            1,
            1,
            State::new(StateConfig::default()),
        )));
        Consensus::start(test_options(dir, members), replica)
            .await
            .unwrap()
    }

    /// A stop that comes while a regular snapshot is being built still leaves a snapshot of
    /// everything applied: openraft passes over the stop's trigger while it builds, so the
    /// trigger is repeated (before, the stop waited out its 60 s bound for a snapshot that
    /// never came, and the next start replayed the log).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_during_a_snapshot_still_snapshots_everything_applied() {
        // A state big enough (40 MB of values) that its snapshot takes a while to write.
        let mut restore = warden_state::restore::Restore::empty(StateConfig::default());
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..400 {
            let data = (0..100_000)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            restore.apply(&warden_state::restore::LoggedTxn {
                session_id: 0,
                zxid: i + 1,
                time_ms: 1,
                op: warden_state::restore::LoggedOp::Create {
                    path: format!("/big{i}"),
                    data: Some(data),
                    acl: warden_proto::Acl::open(),
                    ephemeral_owner: 0,
                    parent_cversion: 1,
                    fix_parent_if_exists: true,
                },
            });
        }
        let dir = tempfile::tempdir().unwrap();
        let me = only_member();
        let replica = Arc::new(Mutex::new(Replica::new(1, 1, restore.finish().0)));
        let consensus = Consensus::start(test_options(dir.path(), vec![me]), replica.clone())
            .await
            .unwrap();
        let applied = || consensus.raft.metrics().borrow_watched().last_applied;
        tokio::time::timeout(Duration::from_secs(10), async {
            while !consensus.is_leader() || applied().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("a single member leads");
        // A regular snapshot begins; one more entry is applied while it is written.
        consensus.raft.trigger().snapshot().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = applied();
        let close = Proposal::own(0, TxnKind::CloseSession);
        consensus.propose_and_wait(close, None).await.unwrap();
        let last = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match applied() {
                    Some(now) if Some(now) > before => return now,
                    _ => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
        })
        .await
        .expect("the metrics show the entry applied");
        let started = Instant::now();
        consensus.snapshot_before_exit().await;
        let snapshot = consensus.raft.metrics().borrow_watched().snapshot;
        assert!(
            snapshot.is_some_and(|s| s.index >= last.index),
            "the snapshot before exit holds entry {} (it has {snapshot:?}) after {:?}",
            last.index,
            started.elapsed()
        );
        consensus.shutdown().await;
    }

    #[tokio::test]
    async fn a_proposal_on_a_server_that_does_not_lead_fails_loudly() {
        // Review finding 1: it used to be dropped without a word, stalling its session.
        let dir = tempfile::tempdir().unwrap();
        let consensus = lonely_member(dir.path()).await;
        assert!(!consensus.serving(), "no quorum, so not serving");
        let (tx, rx) = tokio::sync::oneshot::channel();
        let proposal = Proposal::own(0, TxnKind::CloseSession);
        consensus
            .propose(proposal, None, move |e| {
                let _ = tx.send(e);
            })
            .await;
        let failure = tokio::time::timeout(Duration::from_secs(10), rx)
            .await
            .expect("the failure is reported, not swallowed")
            .unwrap();
        assert!(
            matches!(failure, ProposeError::NotLeader { .. }),
            "{failure}"
        );
        assert!(
            consensus.read_index().await.is_err(),
            "no read index without leading"
        );
        consensus.shutdown().await;
    }
}
