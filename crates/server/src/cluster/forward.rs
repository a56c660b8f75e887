//! Writes from a follower's clients, on their way to the leader, and what the leader says back.
//!
//! Each follower keeps one Forward channel to the leader it follows: a FIFO stream, so the
//! writes of one session reach the leader, and the log, in the order the client sent them.
//! The leader stamps each with its own clock and proposes it; the follower answers the client
//! when it applies the entry (the origin names the connection), so a client reads its own
//! writes and gets its replies in order. The same channel carries the sessions the follower's
//! clients touched (the leader decides expiry) and read-index requests (`sync`).
//!
//! Each write names the leader's term it is for, and the leader enters it in the log only in
//! that term. If the channel breaks, or the leader changes, the writes in flight are in doubt
//! until the log settles them; those it did not take are then handed to the next leader
//! (crate::writes), so nothing is applied twice or out of order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use warden_proto::jute::{Reader, Writer};

use super::wire::{self, Channel, FrameReader, FrameWriter, GROUP_MAIN, Hello, Kind, WireError};
use crate::consensus::{Origin, Proposal, ProposeError, ReadIndexError};
use crate::server::Context;
use crate::writes::Target;

/// What a follower sends its leader.
enum Outgoing {
    /// A write, for the leader's term named.
    Forward {
        term: u64,
        bytes: Vec<u8>,
    },
    Touch(Vec<i64>),
    /// A session resumes here: the leader records this server as its owner, then answers.
    Revalidate {
        id: u64,
        session_id: i64,
        done: oneshot::Sender<Result<u64, ReadIndexError>>,
    },
    ReadIndex {
        id: u64,
        done: oneshot::Sender<Result<u64, ReadIndexError>>,
    },
}

/// Requests to the leader sent and not yet answered (read indexes; revalidations, answered
/// with 0), by request id.
type PendingAnswers = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<u64, ReadIndexError>>>>>;

/// Why a write could not be forwarded.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("the queue to the leader is full (cluster.forward_queue_max)")]
    QueueFull,
    #[error("the leader {0} is not reachable")]
    NoLink(u64),
    #[error("this server is stopping")]
    Stopped,
}

/// The follower's side: the channel to the current leader, opened on first use.
pub struct Forwarder {
    link: Mutex<Slot>,
    queue_max: usize,
}

#[derive(Default)]
struct Slot {
    link: Option<Link>,
    /// Set by [`Forwarder::stop`]: no link opens again. A link's task holds the server's
    /// state, and the state holds the link's sender: one opened by a connection's last write
    /// after the stop would keep both alive, log directory lock included, for as long as
    /// the process runs.
    stopped: bool,
}

struct Link {
    leader: u64,
    tx: mpsc::Sender<Outgoing>,
    task: JoinHandle<()>,
}

impl Forwarder {
    pub fn new(queue_max: usize) -> Forwarder {
        Forwarder {
            link: Mutex::new(Slot::default()),
            queue_max: queue_max.max(1),
        }
    }

    fn sender(
        &self,
        ctx: &Arc<Context>,
        leader: u64,
    ) -> Result<mpsc::Sender<Outgoing>, ForwardError> {
        let mut slot = self.link.lock().expect("forwarder lock poisoned");
        if slot.stopped {
            return Err(ForwardError::Stopped);
        }
        let link = &mut slot.link;
        if let Some(l) = link.as_ref()
            && l.leader == leader
            && !l.task.is_finished()
        {
            return Ok(l.tx.clone());
        }
        if let Some(old) = link.take() {
            old.task.abort();
        }
        let addr = ctx
            .consensus
            .peer_addr(leader)
            .ok_or(ForwardError::NoLink(leader))?;
        let (tx, rx) = mpsc::channel(self.queue_max);
        let task = tokio::spawn(run_link(ctx.clone(), leader, addr, rx));
        *link = Some(Link {
            leader,
            tx: tx.clone(),
            task,
        });
        Ok(tx)
    }

    /// Queues a write for the leader of `target`, to enter the log in its term only, or says
    /// why it cannot go.
    pub fn forward(
        &self,
        ctx: &Arc<Context>,
        target: Target,
        proposal: &Proposal,
    ) -> Result<(), ForwardError> {
        self.sender(ctx, target.leader)?
            .try_send(Outgoing::Forward {
                term: target.term,
                bytes: proposal.encode(),
            })
            .map_err(|_| ForwardError::QueueFull)
    }

    /// Whether a write for `leader` would find room in the queue now.
    pub fn has_room(&self, leader: u64) -> bool {
        let slot = self.link.lock().expect("forwarder lock poisoned");
        match slot.link.as_ref() {
            Some(l) if l.leader == leader => l.tx.capacity() > 0,
            _ => true,
        }
    }

    /// Reports sessions this server's clients touched; dropped if the queue is full (the
    /// next report carries them again only if touched again, but a session's timeout spans
    /// many reports).
    pub fn touch(&self, ctx: &Arc<Context>, leader: u64, sessions: Vec<i64>) {
        if let Ok(tx) = self.sender(ctx, leader) {
            let _ = tx.try_send(Outgoing::Touch(sessions));
        }
    }

    /// Tells the leader a session resumes on this server and waits for its answer
    /// (ZooKeeper's revalidation): from then on, writes the client left behind on another
    /// server get SessionMoved.
    pub async fn revalidate(
        &self,
        ctx: &Arc<Context>,
        leader: u64,
        session_id: i64,
    ) -> Result<(), ForwardError> {
        let tx = self.sender(ctx, leader)?;
        let (done, answer) = oneshot::channel();
        let id = next_request_id();
        tx.send(Outgoing::Revalidate {
            id,
            session_id,
            done,
        })
        .await
        .map_err(|_| ForwardError::NoLink(leader))?;
        match answer.await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(ForwardError::NoLink(leader)),
        }
    }

    /// Asks the leader for a read index.
    pub async fn read_index(&self, ctx: &Arc<Context>, leader: u64) -> Result<u64, ReadIndexError> {
        let not_leader = ReadIndexError::NotLeader {
            leader: Some(leader),
        };
        let tx = self.sender(ctx, leader).map_err(|_| not_leader.clone())?;
        let (done, answer) = oneshot::channel();
        let id = next_request_id();
        tx.send(Outgoing::ReadIndex { id, done })
            .await
            .map_err(|_| not_leader.clone())?;
        answer.await.unwrap_or(Err(not_leader))
    }

    /// Drops the channel (the leader changed, or this server leads now).
    pub fn close(&self) {
        if let Some(old) = self
            .link
            .lock()
            .expect("forwarder lock poisoned")
            .link
            .take()
        {
            old.task.abort();
        }
    }

    /// Drops the channel for good: the server stops.
    pub fn stop(&self) {
        let mut slot = self.link.lock().expect("forwarder lock poisoned");
        slot.stopped = true;
        if let Some(old) = slot.link.take() {
            old.task.abort();
        }
    }
}

fn next_request_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// One channel to a leader, until it breaks. Whatever was in flight on it is then in doubt
/// until the log settles it.
async fn run_link(ctx: Arc<Context>, leader: u64, addr: String, rx: mpsc::Receiver<Outgoing>) {
    let identity = ctx.consensus.identity().clone();
    let hello = Hello {
        version: wire::PROTOCOL_VERSION,
        cluster_id: identity.cluster_id.get(),
        from: identity.me,
        to: leader,
        channel: Channel::Forward,
        committed: ctx.consensus.committed_index(),
    };
    let pending = PendingAnswers::default();
    let why = match wire::dial(
        &identity.transport,
        &addr,
        hello,
        identity.frame_bytes_max,
        wire::HANDSHAKE_TIMEOUT,
    )
    .await
    {
        Ok((reader, writer, _)) => {
            tokio::select! {
                e = send_loop(writer, rx, pending.clone()) => e,
                e = receive_loop(&ctx, reader, pending.clone()) => e,
            }
        }
        Err(e) => e,
    };
    tracing::info!(leader, %addr, "forward channel to the leader closed: {why}");
    // A refused connection means the leader's process is gone; a broken one gets a moment
    // to be replaced.
    let refused =
        matches!(&why, WireError::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused);
    ctx.consensus.leader_unreachable(leader, refused);
    ctx.replica()
        .writes_in_doubt("the channel to the leader closed", Instant::now());
    // Dropping the senders fails every read index still waiting.
    pending.lock().expect("pending lock poisoned").clear();
}

async fn send_loop(
    mut writer: FrameWriter,
    mut rx: mpsc::Receiver<Outgoing>,
    pending: PendingAnswers,
) -> WireError {
    while let Some(out) = rx.recv().await {
        let sent = match out {
            Outgoing::Forward { term, bytes } => {
                writer.send(Kind::Forward, GROUP_MAIN, term, &bytes).await
            }
            Outgoing::Revalidate {
                id,
                session_id,
                done,
            } => {
                pending
                    .lock()
                    .expect("pending lock poisoned")
                    .insert(id, done);
                let mut w = Writer::new();
                w.write_i64(session_id);
                writer
                    .send(Kind::Revalidate, GROUP_MAIN, id, &w.into_bytes())
                    .await
            }
            Outgoing::Touch(sessions) => {
                let mut w = Writer::new();
                w.write_vec(&sessions, |w, id| w.write_i64(*id));
                writer
                    .send(Kind::Touch, GROUP_MAIN, 0, &w.into_bytes())
                    .await
            }
            Outgoing::ReadIndex { id, done } => {
                pending
                    .lock()
                    .expect("pending lock poisoned")
                    .insert(id, done);
                writer.send(Kind::ReadIndex, GROUP_MAIN, id, &[]).await
            }
        };
        if let Err(e) = sent {
            return e;
        }
    }
    WireError::Closed
}

async fn receive_loop(
    ctx: &Arc<Context>,
    mut reader: FrameReader,
    pending: PendingAnswers,
) -> WireError {
    loop {
        let frame = match reader.next().await {
            Ok(frame) => frame,
            Err(e) => return e,
        };
        match frame.kind {
            Kind::ForwardFailed => match decode_failure(&frame.payload) {
                Some((origin, why)) if origin.incarnation == ctx.replica().incarnation() => ctx
                    .replica()
                    .write_failed(origin.connection, &why, Instant::now()),
                Some(_) => {}
                None => return WireError::Handshake("malformed forward failure".into()),
            },
            Kind::ReadIndexDone | Kind::ReadIndexFailed | Kind::Revalidated => {
                let answer = if frame.kind == Kind::Revalidated {
                    Ok(0)
                } else if frame.kind == Kind::ReadIndexDone {
                    let mut r = Reader::new(&frame.payload);
                    match r.read_i64() {
                        Ok(index) => Ok(index as u64),
                        Err(_) => return WireError::Handshake("malformed read index".into()),
                    }
                } else {
                    Err(ReadIndexError::Unconfirmed(
                        String::from_utf8_lossy(&frame.payload).into_owned(),
                    ))
                };
                let waiter = pending
                    .lock()
                    .expect("pending lock poisoned")
                    .remove(&frame.id);
                if let Some(done) = waiter {
                    let _ = done.send(answer);
                }
            }
            other => return WireError::Handshake(format!("{other:?} from the leader")),
        }
    }
}

fn encode_failure(origin: &Origin, why: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_i64(origin.incarnation as i64);
    w.write_i64(origin.connection as i64);
    w.write_i64(origin.seq as i64);
    w.write_string(why);
    w.into_bytes()
}

fn decode_failure(payload: &[u8]) -> Option<(Origin, String)> {
    let mut r = Reader::new(payload);
    let incarnation = r.read_i64().ok()? as u64;
    let connection = r.read_i64().ok()? as u64;
    let seq = r.read_i64().ok()? as u64;
    let why = r.read_string().ok()?;
    Some((
        Origin {
            node: 0,
            incarnation,
            connection,
            seq,
            xid: 0,
        },
        why,
    ))
}

/// The leader's side of one follower's Forward channel: writes are proposed in the order they
/// arrive, each only in the term its frame names; a write that cannot enter the log is
/// reported back, so that the follower learns its fate is in doubt.
pub async fn serve_follower(
    ctx: Arc<Context>,
    from: u64,
    mut reader: FrameReader,
    mut writer: FrameWriter,
) -> WireError {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Kind, u64, Vec<u8>)>();
    let sender = tokio::spawn(async move {
        while let Some((kind, id, payload)) = rx.recv().await {
            if writer.send(kind, GROUP_MAIN, id, &payload).await.is_err() {
                return;
            }
        }
    });
    let why = loop {
        let frame = match reader.next().await {
            Ok(frame) => frame,
            Err(e) => break e,
        };
        match frame.kind {
            Kind::Forward => {
                let proposal = match Proposal::decode(&frame.payload) {
                    Ok(p) => p,
                    Err(error) => {
                        break WireError::Malformed {
                            what: "forwarded write",
                            error,
                        };
                    }
                };
                let Some(origin) = proposal.origin.filter(|o| o.node == from) else {
                    break WireError::Handshake("a forwarded write of another server's".into());
                };
                let mut proposal = proposal;
                let term = Some(frame.id);
                super::refuse_if_moved(&ctx, &mut proposal, from, frame.id);
                let tx = tx.clone();
                let failed = move |e: ProposeError| {
                    let why = encode_failure(&origin, &e.to_string());
                    let _ = tx.send((Kind::ForwardFailed, 0, why));
                };
                if super::membership::is_reconfig(&proposal) {
                    // Awaited: this follower's later writes wait behind the reconfig.
                    super::membership::reconfig(&ctx, proposal, term, failed).await;
                } else {
                    ctx.consensus.propose(proposal, term, failed).await;
                }
            }
            Kind::Revalidate => {
                let mut r = Reader::new(&frame.payload);
                match r.read_i64() {
                    // Only a leader's record counts: a server that no longer leads says so,
                    // and the follower asks the next leader.
                    Ok(session_id) if ctx.consensus.is_leader() => {
                        let term = ctx.consensus.term();
                        ctx.replica().claim_session(session_id, from, term);
                        let _ = tx.send((Kind::Revalidated, frame.id, Vec::new()));
                    }
                    Ok(_) => {
                        let why = b"this server no longer leads".to_vec();
                        let _ = tx.send((Kind::ReadIndexFailed, frame.id, why));
                    }
                    Err(error) => {
                        break WireError::Malformed {
                            what: "revalidation",
                            error,
                        };
                    }
                }
            }
            Kind::Touch => {
                let mut r = Reader::new(&frame.payload);
                match r.read_vec(8, |r| r.read_i64()) {
                    Ok(sessions) => ctx.replica().touch_reported(
                        &sessions,
                        from,
                        Instant::now(),
                        ctx.consensus.term(),
                    ),
                    Err(error) => {
                        break WireError::Malformed {
                            what: "session touches",
                            error,
                        };
                    }
                }
            }
            Kind::ReadIndex => {
                let (ctx, tx) = (ctx.clone(), tx.clone());
                tokio::spawn(async move {
                    let answer = match ctx.consensus.read_index().await {
                        Ok(index) => {
                            let mut w = Writer::new();
                            w.write_i64(index as i64);
                            (Kind::ReadIndexDone, w.into_bytes())
                        }
                        Err(e) => (Kind::ReadIndexFailed, e.to_string().into_bytes()),
                    };
                    let _ = tx.send((answer.0, frame.id, answer.1));
                });
            }
            other => break WireError::Handshake(format!("{other:?} on a Forward channel")),
        }
    };
    drop(tx);
    sender.abort();
    why
}

/// How long a `sync` waits for this server to apply up to the leader's read index.
pub const SYNC_APPLY_TIMEOUT: Duration = Duration::from_secs(30);
