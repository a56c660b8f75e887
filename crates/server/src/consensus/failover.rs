//! Failover without waiting out the lease when the leader's process is gone.
//!
//! openraft's followers refuse to vote while their lease on the leader runs (an election
//! timeout after they last heard from it), so that a member that merely lost touch cannot
//! depose a live leader. After a kill -9 that costs a full election timeout before anyone may
//! vote, then a random one before a candidate asks: about 1.5 s at tickTime=1000, most of the
//! shortest session timeout (2 ticks). ZooKeeper's followers start an election as soon as the
//! leader's socket breaks. Here a follower whose connection with the leader broke asks the
//! leader's quorum port once: a refused connection means nothing listens there, so no process
//! can be leading from it. The follower then gives up its lease (openraft does the same when a
//! leader hands over) and, after a pause that depends on its rank, so that the followers do not
//! split the vote, calls a pre-vote round at once. The same when the port answers but the leader
//! stays silent for three heartbeats after the break (it was killed and restarted at once: the
//! new process does not lead). A probe that gets no answer at all (a partition) changes
//! nothing, nor does a leader that is heard from again: the timeouts decide as before. Reads are
//! confirmed by a quorum (ReadIndex), never by the lease, so giving it up costs no safety.

use std::sync::atomic::{AtomicBool, Ordering};

use openraft::async_runtime::watch::WatchReceiver;
use openraft::raft::TransferLeaderRequest;
use tokio::net::TcpStream;

use super::Consensus;

/// One probe at a time on this server.
#[derive(Default)]
pub(super) struct Probe {
    running: AtomicBool,
}

impl Consensus {
    /// A connection with `leader` broke (`refused`: it could not even be opened). Probes the
    /// leader's quorum port in the background (module doc).
    pub(super) fn leader_connection_broke(&self, leader: u64, refused: bool) {
        if self.standalone || self.recovering() || self.leader() != Some(leader) {
            return;
        }
        if self.failover.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let consensus = self.clone();
        tokio::spawn(async move {
            let gone = refused
                || consensus.leader_refuses(leader).await
                || consensus.leader_silent_after_break(leader).await;
            if gone {
                // Not serving from now on, without the grace a broken connection gets: a
                // client that comes now is sent on rather than let in and then dropped by the
                // election, as ZooKeeper's followers go LOOKING at once.
                consensus.liveness.connection_lost(leader, true);
                consensus.elect_without_lease(leader).await;
            }
            consensus.failover.running.store(false, Ordering::Release);
        });
    }

    /// Whether a connection to `leader`'s quorum port is refused: nothing listens there.
    async fn leader_refuses(&self, leader: u64) -> bool {
        let Some(addr) = self.peer_addr(leader) else {
            return false;
        };
        let wait = self.heartbeat * 2;
        match tokio::time::timeout(wait, TcpStream::connect(&addr)).await {
            Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionRefused,
            // Answered (the process is there), or no answer (a partition, or a pause).
            Ok(Ok(_)) | Err(_) => false,
        }
    }

    /// Whether `leader`, whose connection broke, stays silent for three heartbeats: a live
    /// leader reconnects and sends its next heartbeat within one. Its port answered, so a
    /// process is there, but not the one that led (a leader killed and restarted at once
    /// comes back as a follower that must win an election, and never sends one).
    async fn leader_silent_after_break(&self, leader: u64) -> bool {
        tokio::time::sleep(self.heartbeat * 3).await;
        self.leader() == Some(leader) && self.liveness.leader_in_doubt(leader)
    }

    /// Gives up the lease on the `leader` that is gone, waits for this member's turn, and
    /// calls a pre-vote round unless a leader has been found meanwhile.
    async fn elect_without_lease(&self, leader: u64) {
        let m = self.raft.metrics().borrow_watched().clone();
        if m.current_leader != Some(leader) {
            return;
        }
        let term = m.current_term;
        // Followers take turns, in the order of their ids, two heartbeats apart: the first
        // asks at once, and the next asks only if no leader came of it.
        let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
        if !voters.contains(&self.identity.me) {
            return;
        }
        let rank = voters
            .iter()
            .filter(|id| **id != leader && **id < self.identity.me)
            .count();
        tracing::info!(
            leader,
            term,
            "the leader's quorum port refuses connections: its process is gone; calling an \
             election now rather than after the lease"
        );
        let release = TransferLeaderRequest::new(m.vote, leader, m.last_applied);
        if let Err(e) = self.raft.handle_transfer_leader(release).await {
            tracing::warn!(error = %e, "could not give up the lease on the gone leader");
            return;
        }
        tokio::time::sleep(self.heartbeat * 2 * rank as u32).await;
        let now = self.raft.metrics().borrow_watched().clone();
        if now.current_term != term || now.current_leader != Some(leader) {
            return;
        }
        if let Err(e) = self.raft.trigger().elect(true).await {
            tracing::warn!(error = %e, "could not call an election");
        }
    }
}
