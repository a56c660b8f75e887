//! A member with an empty data directory: founding the cluster, or rejoining one that exists.
//!
//! Raft's safety rests on every voter remembering its votes and what it acknowledged. A member
//! that lost its data directory (or had it replaced after damage) remembers neither: if it
//! voted at once, it could help elect a leader that lacks a committed write it had itself
//! acknowledged before. ZooKeeper does not guard against this; Warden does.
//!
//! At its first start a member cannot tell, from its own disk, whether the cluster is new or it
//! is an old member whose data is gone. So it asks the other voters (their handshake carries
//! their committed index) before it does anything:
//!
//! - if any has committed something, the cluster exists: this member does not found a new one,
//!   it waits for the leader to replicate to it and it is **recovering**: it neither votes nor
//!   stands for election until it has applied everything the others had committed when it
//!   asked. A marker file in the data directory keeps that state across a crash;
//! - if enough of them answer (with it, a quorum of the voters) and none has committed
//!   anything, the cluster is new and it founds it with the configured voters, as every
//!   member does;
//! - otherwise it waits and asks again, saying so in its log.
//!
//! Until its question is answered, a member with an empty data directory does not vote
//! either: the marker says the target is not known yet. A member whose log or newest snapshot
//! is damaged when it starts moves them aside (`<dir>.damaged-<time>`) and rejoins the same
//! way, but it never founds a cluster: the members that answer may all have lost their data,
//! and founding an empty cluster then would hide that loss. It waits for one that has data.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::Raft;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::errors::{InitializeError, RaftError};

use super::state_machine::StateMachine;
use super::types::{PeerNode, WardenRaft};
use super::{Identity, MemberAddr, peer_node};
use crate::cluster::wire::{self, Channel, Hello};

/// The file in the data directory that keeps the cluster's id.
const CLUSTER_ID_FILE: &str = "cluster-id";

/// The cluster id this data directory belongs to, if it belongs to one yet.
pub fn stored_cluster_id(data_dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(data_dir.join(CLUSTER_ID_FILE)).ok()?;
    u64::from_str_radix(text.trim(), 16).ok()
}

/// Keeps the cluster id durably (temporary file, fsync, rename).
fn store_cluster_id(data_dir: &Path, id: u64) -> std::io::Result<()> {
    let path = data_dir.join(CLUSTER_ID_FILE);
    let tmp = path.with_extension("tmp");
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(&tmp, format!("{id:016x}\n"))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, &path)
}

/// Keeps the cluster id, or stops the process: a member that cannot remember which cluster
/// it belongs to must not take part in one.
pub fn keep_cluster_id(data_dir: &Path, id: u64) {
    if stored_cluster_id(data_dir) == Some(id) {
        return;
    }
    if let Err(e) = store_cluster_id(data_dir, id) {
        tracing::error!(error = %e, dir = %data_dir.display(), "cannot keep the cluster id; exiting");
        std::process::exit(1);
    }
}

/// How often a member without a cluster asks the others again.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// Whether this member is catching up after losing its data, and with what.
pub struct Recovery {
    marker: PathBuf,
    /// The log index to apply before voting again; 0 when not recovering, `UNKNOWN` until
    /// the other members have said what they committed.
    target: AtomicU64,
    /// Whether a founding is ruled out (the data was damaged, not new).
    rejoin_only: std::sync::atomic::AtomicBool,
}

/// The target of a recovery whose question the other members have not answered yet.
const UNKNOWN: u64 = u64::MAX;
/// The marker's text for a member whose damaged data was moved aside.
const DAMAGED: &str = "damaged";
/// The marker's text for a member that started with an empty data directory.
const EMPTY: &str = "empty";

impl Recovery {
    /// Reads the marker a recovery interrupted by a crash left.
    pub fn open(data_dir: &Path) -> Arc<Recovery> {
        let marker = data_dir.join("recovering");
        let text = std::fs::read_to_string(&marker).unwrap_or_default();
        let text = text.trim();
        let target = match text {
            DAMAGED | EMPTY => UNKNOWN,
            number => number.parse().unwrap_or(0),
        };
        Arc::new(Recovery {
            marker,
            target: AtomicU64::new(target),
            rejoin_only: (text == DAMAGED).into(),
        })
    }

    /// Whether this member withholds its vote and does not stand for election.
    pub fn recovering(&self) -> bool {
        self.target.load(Ordering::Relaxed) != 0
    }

    /// Whether the other members have yet to say what this member must catch up with.
    pub fn target_unknown(&self) -> bool {
        self.target.load(Ordering::Relaxed) == UNKNOWN
    }

    /// A member starting with an empty data directory withholds its vote until it knows
    /// whether the cluster is new (a damaged member's marker is kept as it is).
    pub fn begin_empty(&self) -> std::io::Result<()> {
        if self.recovering() {
            return Ok(());
        }
        self.write(EMPTY, UNKNOWN)
    }

    fn begin(&self, target: u64) -> std::io::Result<()> {
        self.write(&target.to_string(), target)
    }

    fn write(&self, text: &str, target: u64) -> std::io::Result<()> {
        let tmp = self.marker.with_extension("tmp");
        std::fs::write(&tmp, format!("{text}\n"))?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &self.marker)?;
        self.target.store(target, Ordering::Relaxed);
        Ok(())
    }

    fn end(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.marker) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.target.store(0, Ordering::Relaxed);
        self.rejoin_only.store(false, Ordering::Relaxed);
        Ok(())
    }
}

/// Moves a damaged log and snapshot directory aside (beside themselves, so the move stays on
/// their file system) and marks this member as rejoining only (module doc).
pub fn quarantine(data_dir: &Path, dirs: &[&Path], why: &str) -> std::io::Result<()> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut moved = Vec::new();
    for dir in dirs {
        if !dir.exists() {
            continue;
        }
        let mut aside = dir.as_os_str().to_owned();
        aside.push(format!(".damaged-{stamp}"));
        std::fs::rename(dir, &aside)?;
        moved.push(PathBuf::from(aside).display().to_string());
    }
    let recovery = Recovery::open(data_dir);
    recovery.write(DAMAGED, UNKNOWN)?;
    tracing::error!(
        why,
        moved_to = moved.join(", "),
        "this member's data is damaged: it was moved aside and the member rejoins the cluster \
         from the others; it will not vote until it has caught up, and it never founds a new \
         cluster"
    );
    Ok(())
}

/// Founds the cluster or starts recovering, as the other voters' answers say (module doc).
pub async fn found_or_join(
    raft: Raft<WardenRaft, StateMachine>,
    identity: Identity,
    members: Vec<MemberAddr>,
    recovery: Arc<Recovery>,
    data_dir: PathBuf,
) {
    let voters: Vec<&MemberAddr> = members.iter().filter(|m| m.voter).collect();
    let me_voter = voters.iter().any(|m| m.id == identity.me);
    let quorum = voters.len() / 2 + 1;
    let mut said_waiting = false;
    loop {
        // A member that was replicated to before it learned its target still asks.
        if raft.is_initialized().await.unwrap_or(true) && !recovery.target_unknown() {
            return;
        }
        let mut answered = usize::from(me_voter);
        let mut committed = 0u64;
        let mut existing_cluster = None;
        for peer in members.iter().filter(|m| m.id != identity.me) {
            let hello = Hello {
                version: wire::PROTOCOL_VERSION,
                cluster_id: identity.cluster_id.get(),
                from: identity.me,
                to: peer.id,
                channel: Channel::Probe,
                committed: 0,
            };
            if let Ok((_, _, theirs)) = wire::dial(
                &identity.transport,
                &peer.peer_addr,
                hello,
                identity.frame_bytes_max,
                wire::HANDSHAKE_TIMEOUT,
            )
            .await
            {
                if theirs.committed > committed {
                    committed = theirs.committed;
                    existing_cluster = Some(theirs.cluster_id);
                }
                answered += usize::from(peer.voter);
            }
        }
        if let Some(id) = existing_cluster {
            // An existing cluster's id wins over the one this member derived from its own
            // zoo.cfg (which differs when the membership changed since the cluster began).
            identity.cluster_id.set(id);
            keep_cluster_id(&data_dir, id);
        }
        if committed > 0 && !me_voter {
            // An observer never votes: it only waits for the leader to add it.
            tokio::time::sleep(PROBE_INTERVAL).await;
            continue;
        }
        if committed > 0 {
            tracing::warn!(
                committed,
                "this member's data directory is empty but the cluster exists: rejoining; it \
                 will not vote until it has caught up with index {committed}"
            );
            if let Err(e) = recovery.begin(committed) {
                tracing::error!(error = %e, "cannot write the recovery marker; exiting");
                std::process::exit(1);
            }
            raft.runtime_config().elect(false);
            return;
        }
        if me_voter && answered >= quorum && !recovery.rejoin_only.load(Ordering::Relaxed) {
            keep_cluster_id(&data_dir, identity.cluster_id.get());
            if let Err(e) = recovery.end() {
                tracing::error!(error = %e, "cannot remove the recovery marker; exiting");
                std::process::exit(1);
            }
            raft.runtime_config().elect(true);
            let founders: std::collections::BTreeMap<u64, PeerNode> =
                voters.iter().map(|m| (m.id, peer_node(m))).collect();
            match raft.initialize(founders).await {
                Ok(()) => tracing::info!(voters = voters.len(), "founded the cluster"),
                Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => tracing::warn!(error = %e, "could not found the cluster"),
            }
            return;
        }
        if !said_waiting && recovery.rejoin_only.load(Ordering::Relaxed) {
            said_waiting = true;
            tracing::warn!(
                answered,
                "rejoining after damage: waiting for a member that has data (no member with \
                 damaged data ever founds a new cluster)"
            );
        }
        if !said_waiting {
            said_waiting = true;
            tracing::info!(
                answered,
                quorum,
                "new data directory: waiting for a quorum of members to found the cluster, or \
                 for one that already has data"
            );
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// How long a recovering member waits without a leader before it tells the operator how to
/// end the wait (and then again every so often).
const LEADERLESS_WARNING: Duration = Duration::from_secs(30);

/// Ends a recovery once this member has applied what the others had committed: from then on
/// it votes and may stand for election again.
///
/// If more than one voter in a cluster of three is recovering at once (two lost their data),
/// no election can succeed and there is no leader to catch up from: the cluster waits for a
/// member that still has the data. If those are gone for good, only the operator can decide
/// to go on without what they alone held, and the log of a member that has caught up part of
/// the way says how (a member with nothing yet cannot help: it has nothing to vote with).
pub async fn finish_recovery(raft: Raft<WardenRaft, StateMachine>, recovery: Arc<Recovery>) {
    let mut metrics = raft.metrics();
    let mut leaderless_since = None;
    let mut warn_at = tokio::time::interval(LEADERLESS_WARNING);
    loop {
        let target = recovery.target.load(Ordering::Relaxed);
        if target != 0 {
            let (applied, leader) = {
                let m = metrics.borrow_watched();
                (
                    m.last_applied.as_ref().map_or(0, |l| l.index),
                    m.current_leader,
                )
            };
            if applied >= target {
                if let Err(e) = recovery.end() {
                    tracing::error!(error = %e, "cannot remove the recovery marker; exiting");
                    std::process::exit(1);
                }
                raft.runtime_config().elect(true);
                tracing::info!(applied, "caught up after rejoining: voting again");
            }
            // Only a member that has caught up part of the way can end the wait by voting.
            leaderless_since = match (leader, leaderless_since) {
                (None, None) if applied > 0 && !recovery.target_unknown() => {
                    Some(tokio::time::Instant::now())
                }
                (None, since) => since,
                (Some(_), _) => None,
            };
        }
        tokio::select! {
            changed = metrics.changed() => if changed.is_err() { return },
            _ = warn_at.tick() => {
                let waited = leaderless_since.map(|since| since.elapsed());
                if recovery.recovering() && waited.is_some_and(|w| w >= LEADERLESS_WARNING) {
                    tracing::warn!(
                        waited_s = waited.map_or(0, |w| w.as_secs()),
                        target = recovery.target.load(Ordering::Relaxed),
                        marker = %recovery.marker.display(),
                        "recovering with no leader to catch up from: an election needs this \
                         member's vote, which it withholds until it has caught up. If the members \
                         that had the data are gone for good, stop this server, remove the marker \
                         file and start it again: it then votes with what it has, and writes that \
                         only the lost members held are lost (docs/cluster.md)"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarantine_moves_the_data_aside_and_rules_out_founding() {
        let data = tempfile::tempdir().unwrap();
        let log = data.path().join("log");
        let snapshots = data.path().join("snapshots");
        std::fs::create_dir_all(&log).unwrap();
        std::fs::write(log.join("r-0.wal"), b"damaged").unwrap();
        quarantine(data.path(), &[&log, &snapshots], "a damaged record").unwrap();
        assert!(!log.exists(), "the damaged log stays where it was");
        let aside: Vec<String> = std::fs::read_dir(data.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("log.damaged-"))
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?}");
        let recovery = Recovery::open(data.path());
        assert!(recovery.recovering() && recovery.target_unknown());
        assert!(recovery.rejoin_only.load(Ordering::Relaxed));
        // Learning the target keeps the member out of founding until it has caught up.
        recovery.begin(42).unwrap();
        assert!(recovery.recovering() && !recovery.target_unknown());
        recovery.end().unwrap();
        assert!(!Recovery::open(data.path()).recovering());
    }

    #[test]
    fn an_empty_member_withholds_its_vote_until_it_knows() {
        let data = tempfile::tempdir().unwrap();
        let recovery = Recovery::open(data.path());
        assert!(!recovery.recovering());
        recovery.begin_empty().unwrap();
        let reopened = Recovery::open(data.path());
        assert!(reopened.recovering() && reopened.target_unknown());
        assert!(
            !reopened.rejoin_only.load(Ordering::Relaxed),
            "an empty member may found"
        );
    }
}
