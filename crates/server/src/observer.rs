//! Warden as a ZooKeeper observer: the leader of a Warden cluster configured with
//! `migration.follow` connects to the ZooKeeper ensemble's leader on its quorum port, as a
//! ZooKeeper 3.9 observer does (`Observer.observeLeader`), and proposes everything it receives
//! through Warden's own log (crate::consensus), so every Warden member mirrors the ensemble
//! with ZooKeeper's zxids (warden_state::mirror). It ends when the state is promoted
//! (`POST /commands/promote`).
//!
//! One connection, in three steps (`Learner.registerWithLeader`, `Learner.syncWithLeader`,
//! `Observer.processPacket`; docs/migration.md draws them):
//!
//! 1. OBSERVERINFO (LearnerInfo: our id, protocol 0x10000) → LEADERINFO (the new epoch) →
//!    ACKEPOCH (our last zxid, our epoch or -1).
//! 2. DIFF (then the transactions we miss, PROPOSAL + COMMIT pairs) or SNAP (then the
//!    leader's snapshot dump), NEWLEADER → ACK, UPTODATE → ACK.
//! 3. INFORM per committed transaction; PING, answered with the sessions our clients
//!    touched, which keeps them alive in the ensemble.
//!
//! Anything the leader sends that does not read is an error: the connection is dropped with
//! a log line and made again (with the next address when the leader moved), never a panic;
//! every length is checked before anything is allocated for it.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use warden_proto::DecodeError;
use warden_proto::quorum::{self, QuorumPacket, Scanned, SnapshotScan, kind};
use warden_state::mirror::{MirrorPhase, ZkTree};
use warden_state::restore::{Restore, follows};
use warden_state::{StateConfig, TxnKind};

use crate::consensus::{Proposal, ProposeError, ReadIndexError, mirrored_txn};
use crate::server::Context;

/// The pause before connecting again after a connection failed or ended.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
/// How often a server that does not lead (or does not serve) looks again.
const LEADERSHIP_POLL: Duration = Duration::from_millis(200);
/// PROPOSALs of a DIFF waiting for their COMMIT (the leader sends each commit right after
/// its proposal, so a handful at most).
const PROPOSALS_PENDING_MAX: usize = 1024;
/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Mirrored transactions proposed and not yet committed: they are pipelined (the log keeps
/// their order), up to this many; then the observer reads no more until some commit.
const PROPOSALS_IN_FLIGHT_MAX: u32 = 4096;

/// Why a connection to the ensemble ended.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("nothing from the ZooKeeper leader for {0:?}")]
    Silent(Duration),
    #[error("the ZooKeeper leader closed the connection")]
    Closed,
    #[error("a packet from the ZooKeeper leader does not read: {0}")]
    Decode(#[from] DecodeError),
    #[error("{0}")]
    Protocol(String),
    #[error("the snapshot the ZooKeeper leader sent does not read: {0}")]
    Snapshot(String),
    #[error("a transaction the ZooKeeper leader sent does not read: {0}")]
    Txn(String),
    #[error("Warden's log did not take a mirrored transaction: {0}")]
    Propose(#[from] ProposeError),
    #[error("this server no longer leads the Warden cluster")]
    NotLeading,
    #[error("Warden's log: {0}")]
    Log(#[from] ReadIndexError),
}

/// Follows the ensemble while this server leads, until the state is promoted.
pub async fn follow(ctx: Arc<Context>) {
    let addresses = ctx.config.migration.addresses();
    let in_flight = Arc::new(Semaphore::new(PROPOSALS_IN_FLIGHT_MAX as usize));
    let mut next = 0usize;
    loop {
        if ctx.replica().state().mirror_phase() == MirrorPhase::Promoted {
            tracing::info!("promoted: following ZooKeeper is over");
            return;
        }
        let Some((leader, term)) = ctx.consensus.leader_in_term() else {
            tokio::time::sleep(LEADERSHIP_POLL).await;
            continue;
        };
        if leader != ctx.consensus.node_id() || !ctx.serving() {
            tokio::time::sleep(LEADERSHIP_POLL).await;
            continue;
        }
        let addr = &addresses[next % addresses.len()];
        match observe(&ctx, addr, term, &in_flight).await {
            Ok(()) => {}
            Err(FollowError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                // Only the ensemble's leader listens on its quorum port: try the next one.
                tracing::debug!(addr, "no ZooKeeper leader here");
                next += 1;
            }
            Err(e) => {
                tracing::warn!(
                    addr,
                    error = %e,
                    "following ZooKeeper: connection ended; connecting again"
                );
                next += 1;
            }
        }
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

/// One connection to the ZooKeeper leader at `addr`, while this server leads in `term`.
/// `Ok` when the state was promoted.
async fn observe(
    ctx: &Arc<Context>,
    addr: &str,
    term: u64,
    in_flight: &Arc<Semaphore>,
) -> Result<(), FollowError> {
    let m = &ctx.config.migration;
    let wait = Duration::from_millis(m.packet_wait_ms.into());
    // The proposals of an earlier connection are settled (committed or failed) first.
    drop(all_permits(in_flight).await);
    // Everything earlier leaders of the Warden cluster mirrored is applied here first, so
    // that the zxid told to ZooKeeper is the last one in Warden's log.
    let index = ctx.consensus.read_index().await?;
    ctx.consensus.applied_up_to(index, wait).await?;
    let stream = tokio::time::timeout(wait, TcpStream::connect(addr))
        .await
        .map_err(|_| FollowError::Silent(wait))??;
    stream.set_nodelay(true)?;
    let mut link = Link {
        stream,
        buf: Vec::new(),
        start: 0,
        wait,
        packet_bytes_max: m.packet_bytes_max as usize,
    };
    let mut mirror = Mirror::new(ctx, term, in_flight.clone());
    let new_epoch = register(&mut link, &mirror, m.observer_id.expect("validated")).await?;
    tracing::info!(
        addr,
        epoch = new_epoch,
        zxid = format_args!("{:#x}", mirror.zxid),
        "following ZooKeeper: registered with its leader as an observer"
    );
    let how = sync(
        &mut link,
        &mut mirror,
        new_epoch,
        m.snapshot_bytes_max as usize,
    )
    .await?;
    tracing::info!(
        addr,
        sync = how,
        zxid = format_args!("{:#x}", mirror.zxid),
        "following ZooKeeper: in sync with its leader, mirroring"
    );
    loop {
        let p = link.next().await?;
        match p.kind {
            kind::PING => {
                let touches = ctx.replica().take_mirror_touches();
                let reply = QuorumPacket {
                    data: Some(quorum::touches(&touches)),
                    ..p
                };
                link.send(&reply).await?;
            }
            kind::INFORM => mirror.apply(p.data.unwrap_or_default()).await?,
            kind::INFORM_AND_ACTIVATE => mirror.apply(activated(p.data)?).await?,
            other => {
                // As `Observer.processPacket`: PROPOSAL, COMMIT, UPTODATE, SYNC, REVALIDATE and
                // unknown types are not an observer's business after the sync.
                tracing::warn!(kind = other, "following ZooKeeper: ignored a packet");
            }
        }
        if !mirror.still_following()? {
            return Ok(());
        }
    }
}

/// The handshake (`Learner.registerWithLeader`); returns the leader's epoch.
async fn register(link: &mut Link, mirror: &Mirror<'_>, my_id: u64) -> Result<i64, FollowError> {
    let accepted_epoch = mirror.zxid >> 32;
    let info = QuorumPacket::new(
        kind::OBSERVER_INFO,
        accepted_epoch << 32,
        Some(quorum::learner_info(my_id as i64, 0)),
    );
    link.send(&info).await?;
    let p = link.next().await?;
    if p.kind != kind::LEADER_INFO {
        return Err(FollowError::Protocol(format!(
            "the leader answered OBSERVERINFO with packet type {} (ZooKeeper before 3.4 is not \
             followed)",
            p.kind
        )));
    }
    let version = quorum::leader_protocol(p.data.as_deref())?;
    if version < quorum::PROTOCOL_VERSION {
        return Err(FollowError::Protocol(format!(
            "the leader speaks protocol {version:#x}, older than {:#x}",
            quorum::PROTOCOL_VERSION
        )));
    }
    let new_epoch = p.zxid >> 32;
    // Our current epoch, or -1 when we had accepted this epoch already (the reply is then
    // no acknowledgement of it).
    let epoch = match new_epoch.cmp(&accepted_epoch) {
        std::cmp::Ordering::Greater => accepted_epoch as i32,
        std::cmp::Ordering::Equal => -1,
        std::cmp::Ordering::Less => {
            return Err(FollowError::Protocol(format!(
                "the leader's epoch {new_epoch} is older than ours, {accepted_epoch}"
            )));
        }
    };
    let ack = QuorumPacket::new(kind::ACK_EPOCH, mirror.zxid, Some(quorum::ack_epoch(epoch)));
    link.send(&ack).await?;
    Ok(new_epoch)
}

/// The sync (`Learner.syncWithLeader`): DIFF or SNAP, the transactions after it, NEWLEADER
/// and UPTODATE, each acknowledged. Returns which of DIFF and SNAP it was.
async fn sync(
    link: &mut Link,
    mirror: &mut Mirror<'_>,
    new_epoch: i64,
    snapshot_bytes_max: usize,
) -> Result<&'static str, FollowError> {
    let first = link.next().await?;
    let how = if first.kind == kind::SNAP {
        "SNAP"
    } else {
        "DIFF"
    };
    match first.kind {
        kind::DIFF if mirror.phase == MirrorPhase::Following => {}
        kind::DIFF => {
            // Everything since the ensemble began: start from ZooKeeper's empty tree.
            let tree = ZkTree::new(Arc::from(&[][..]), Restore::empty(StateConfig::default()));
            mirror.reset(tree).await?;
        }
        kind::SNAP => {
            let dump = link.snapshot(snapshot_bytes_max).await?;
            let restore = warden_import::snapshot::parse_dump(
                Path::new("the ZooKeeper leader's snapshot"),
                first.zxid,
                &dump,
                StateConfig::default(),
            )
            .map_err(|e| FollowError::Snapshot(e.to_string()))?;
            tracing::info!(
                zxid = format_args!("{:#x}", first.zxid),
                bytes = dump.len(),
                znodes = restore.tree().len(),
                "following ZooKeeper: received its leader's snapshot"
            );
            mirror.reset(ZkTree::new(Arc::from(dump), restore)).await?;
        }
        kind::TRUNC => {
            return Err(FollowError::Protocol(format!(
                "the leader asks to truncate to {:#x}, below the mirrored {:#x}: Warden mirrors \
                 only committed transactions, so the ensemble lost some; not following",
                first.zxid, mirror.zxid
            )));
        }
        other => {
            return Err(FollowError::Protocol(format!(
                "the leader began the sync with packet type {other}, not DIFF, SNAP or TRUNC"
            )));
        }
    }
    let new_leader_zxid = new_epoch << 32;
    let mut proposals: VecDeque<(i64, Vec<u8>)> = VecDeque::new();
    loop {
        let p = link.next().await?;
        match p.kind {
            kind::PROPOSAL => {
                if proposals.len() >= PROPOSALS_PENDING_MAX {
                    return Err(FollowError::Protocol(format!(
                        "more than {PROPOSALS_PENDING_MAX} proposals without a commit"
                    )));
                }
                proposals.push_back((p.zxid, p.data.unwrap_or_default()));
            }
            kind::COMMIT | kind::COMMIT_AND_ACTIVATE => match proposals.pop_front() {
                Some((zxid, data)) if zxid == p.zxid => mirror.apply(data).await?,
                Some((zxid, data)) => {
                    tracing::warn!(
                        commit = format_args!("{:#x}", p.zxid),
                        proposal = format_args!("{zxid:#x}"),
                        "following ZooKeeper: a commit that is not of the next proposal"
                    );
                    proposals.push_front((zxid, data));
                }
                None => tracing::warn!("following ZooKeeper: a commit without a proposal"),
            },
            kind::INFORM => mirror.apply(p.data.unwrap_or_default()).await?,
            kind::INFORM_AND_ACTIVATE => mirror.apply(activated(p.data)?).await?,
            kind::NEW_LEADER => {
                link.send(&QuorumPacket::new(kind::ACK, new_leader_zxid, None))
                    .await?
            }
            kind::UP_TO_DATE => break,
            kind::PING => {
                let reply = QuorumPacket { data: None, ..p };
                link.send(&reply).await?;
            }
            other => tracing::warn!(
                kind = other,
                "following ZooKeeper: ignored a packet in the sync"
            ),
        }
    }
    if !proposals.is_empty() {
        tracing::warn!(
            count = proposals.len(),
            "following ZooKeeper: proposals never committed in the sync were dropped"
        );
    }
    link.send(&QuorumPacket::new(kind::ACK, new_leader_zxid, None))
        .await?;
    Ok(how)
}

/// Every permit of `in_flight`: no proposal is in flight while they are held.
async fn all_permits(in_flight: &Semaphore) -> tokio::sync::SemaphorePermit<'_> {
    in_flight
        .acquire_many(PROPOSALS_IN_FLIGHT_MAX)
        .await
        .expect("the semaphore is never closed")
}

/// INFORMANDACTIVATE's data: the suggested leader id, then the transaction.
fn activated(data: Option<Vec<u8>>) -> Result<Vec<u8>, FollowError> {
    let mut data = data.unwrap_or_default();
    if data.len() < 8 {
        return Err(FollowError::Protocol(
            "INFORMANDACTIVATE without a leader id".into(),
        ));
    }
    Ok(data.split_off(8))
}

/// The mirror's side of the connection: what it has reached, and the proposals it makes.
struct Mirror<'a> {
    ctx: &'a Arc<Context>,
    term: u64,
    phase: MirrorPhase,
    /// The last zxid mirrored or proposed (0 before the first sync).
    zxid: i64,
    in_flight: Arc<Semaphore>,
    /// Why a pipelined proposal did not enter the log, once one did not: the connection ends
    /// and the next sync starts from what was applied.
    failed: Arc<Mutex<Option<ProposeError>>>,
}

impl<'a> Mirror<'a> {
    fn new(ctx: &'a Arc<Context>, term: u64, in_flight: Arc<Semaphore>) -> Self {
        let (phase, zxid) = {
            let r = ctx.replica();
            (r.state().mirror_phase(), r.state().last_zxid())
        };
        let zxid = if phase == MirrorPhase::Following {
            zxid
        } else {
            0
        };
        Mirror {
            ctx,
            term,
            phase,
            zxid,
            in_flight,
            failed: Arc::new(Mutex::new(None)),
        }
    }

    /// Replaces the mirror with `tree`, once every earlier proposal is settled.
    async fn reset(&mut self, tree: ZkTree) -> Result<(), FollowError> {
        let zxid = tree.zxid;
        drop(all_permits(&self.in_flight).await);
        self.check_proposals()?;
        self.ctx
            .consensus
            .propose_and_wait(
                Proposal::own(0, TxnKind::MirrorReset(tree)),
                Some(self.term),
            )
            .await?;
        self.phase = MirrorPhase::Following;
        self.zxid = zxid;
        Ok(())
    }

    /// Proposes one committed transaction, unless it is mirrored already.
    async fn apply(&mut self, wire: Vec<u8>) -> Result<(), FollowError> {
        let m = mirrored_txn(wire).map_err(|e| FollowError::Txn(e.to_string()))?;
        let zxid = m.txn.zxid;
        if zxid <= self.zxid {
            return Ok(());
        }
        if !follows(self.zxid, zxid) {
            return Err(FollowError::Protocol(format!(
                "transaction {zxid:#x} follows {:#x}: some are missing",
                self.zxid
            )));
        }
        self.check_proposals()?;
        let permit = self
            .in_flight
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let failed = self.failed.clone();
        let session_id = m.txn.session_id;
        // The permit goes back when the proposal is settled, either way.
        let settled = move |e: ProposeError| {
            drop(permit);
            failed
                .lock()
                .expect("failed lock poisoned")
                .get_or_insert(e);
        };
        self.ctx
            .consensus
            .propose(
                Proposal::own(session_id, TxnKind::Mirrored(m)),
                Some(self.term),
                settled,
            )
            .await;
        self.zxid = zxid;
        Ok(())
    }

    /// An error if a pipelined proposal did not enter the log.
    fn check_proposals(&self) -> Result<(), FollowError> {
        match self.failed.lock().expect("failed lock poisoned").take() {
            Some(e) => Err(FollowError::Propose(e)),
            None => Ok(()),
        }
    }

    /// Whether to go on: `false` once promoted; an error if this server no longer leads or
    /// a proposal failed.
    fn still_following(&self) -> Result<bool, FollowError> {
        if !self.ctx.consensus.leads_in(self.term) {
            return Err(FollowError::NotLeading);
        }
        self.check_proposals()?;
        Ok(self.ctx.replica().state().mirror_phase() == MirrorPhase::Following)
    }
}

/// The TCP connection to the ZooKeeper leader, with what was read and not yet taken.
struct Link {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    wait: Duration,
    packet_bytes_max: usize,
}

impl Link {
    async fn send(&mut self, p: &QuorumPacket) -> Result<(), FollowError> {
        tokio::time::timeout(self.wait, self.stream.write_all(&p.encode()))
            .await
            .map_err(|_| FollowError::Silent(self.wait))??;
        Ok(())
    }

    async fn next(&mut self) -> Result<QuorumPacket, FollowError> {
        loop {
            let rest = &self.buf[self.start..];
            if let Some(len) = quorum::packet_len(rest, self.packet_bytes_max)? {
                let p = QuorumPacket::decode(&rest[..len])?;
                self.start += len;
                return Ok(p);
            }
            self.fill().await?;
        }
    }

    /// The snapshot dump after SNAP, and its signature; returns the dump.
    async fn snapshot(&mut self, bytes_max: usize) -> Result<Vec<u8>, FollowError> {
        let mut scan = SnapshotScan::new(bytes_max);
        // The dump, its signature, and what may follow in the same read.
        let buffered_max = bytes_max + READ_CHUNK_BYTES;
        loop {
            if let Scanned::Complete { body, total } = scan.scan(&self.buf[self.start..])? {
                let dump = self.buf[self.start..self.start + body].to_vec();
                self.start += total;
                return Ok(dump);
            }
            if self.buf.len() - self.start > buffered_max {
                return Err(FollowError::Snapshot(format!(
                    "larger than migration.snapshot_bytes_max = {bytes_max}"
                )));
            }
            self.fill().await?;
        }
    }

    /// Reads more bytes, first dropping those already taken.
    async fn fill(&mut self) -> Result<(), FollowError> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.reserve(READ_CHUNK_BYTES);
        let read = tokio::time::timeout(self.wait, self.stream.read_buf(&mut self.buf))
            .await
            .map_err(|_| FollowError::Silent(self.wait))??;
        if read == 0 {
            return Err(FollowError::Closed);
        }
        Ok(())
    }
}
