//! Raft messages to other members, over the peer protocol (`cluster::wire`): one connection
//! per openraft client, one request answered at a time. openraft makes a client for each
//! replication stream and for each round of votes, so votes and heartbeats never queue behind
//! a long append or a snapshot transfer on another connection.
//!
//! Messages are openraft's own request and response types in MessagePack; snapshots go in
//! chunks of `SNAPSHOT_CHUNK_BYTES`, each acknowledged before the next is sent, so a snapshot
//! never needs a frame larger than a chunk and a cancelled transfer stops within one chunk.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use openraft::alias::{SnapshotOf, VoteOf};
use openraft::base::{BoxFuture, BoxStream};
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2, stream_append_sequential};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult,
    TransferLeaderRequest, TransferLeaderResponse, VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::log_store::LogStore;
use super::snapshot_store::StateBytes;
use super::types::{PeerNode, WardenRaft};
use crate::cluster::transport::Transport;
use crate::cluster::wire::{
    self, Channel, FrameReader, FrameWriter, GROUP_MAIN, Hello, Kind, WireError,
};

/// Bytes of snapshot per chunk.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// The slowest pace at which a member is expected to take in, write and fsync what it is sent.
/// A call carrying large values is given that much time beyond openraft's time-to-live, which
/// is a fraction of an election timeout: an append of several megabytes would otherwise time
/// out on every attempt, and the member it is for would never catch up.
const PEER_BYTES_PER_SECOND_MIN: f64 = (8 << 20) as f64;

/// Who this server is on the peer network.
#[derive(Debug, Clone)]
pub struct Identity {
    pub me: u64,
    pub cluster_id: ClusterId,
    pub frame_bytes_max: usize,
    /// How it reaches its peers and takes their connections (plain or TLS).
    pub transport: Arc<Transport>,
}

/// The cluster's identity, checked at every handshake. Shared because a member that joins an
/// existing cluster with an empty data directory adopts the cluster's id (`rejoin`).
#[derive(Debug, Clone, Default)]
pub struct ClusterId(Arc<std::sync::atomic::AtomicU64>);

impl ClusterId {
    pub fn new(id: u64) -> ClusterId {
        ClusterId(Arc::new(std::sync::atomic::AtomicU64::new(id)))
    }

    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set(&self, id: u64) {
        self.0.store(id, std::sync::atomic::Ordering::Relaxed)
    }
}

pub struct Network {
    pub identity: Identity,
    pub reachable: Reachability,
    pub committed: Committed,
    pub outstanding: Outstanding,
    /// This member's log, to tell a replication stream that was left behind (`stream_append`).
    pub log: LogStore,
}

/// This server's committed log index, for the handshake.
#[derive(Clone, Default)]
pub struct Committed(pub Arc<std::sync::atomic::AtomicU64>);

impl Committed {
    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The leader's append requests to each member since this server started: openraft sends
/// them one at a time per member, so the time they were outstanding over wall time is how
/// busy that member's replication stream is, a serial stage of the write path.
#[derive(Clone, Default)]
pub struct Outstanding(Arc<Mutex<BTreeMap<u64, Appends>>>);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Appends {
    /// Append requests answered or failed, heartbeats among them.
    pub requests: u64,
    /// Entries they carried.
    pub entries: u64,
    /// Microseconds from sending each until its answer or failure.
    pub busy_us: u64,
}

impl Outstanding {
    fn record(&self, target: u64, entries: usize, started: Instant) {
        let mut members = self.0.lock().expect("replication accounting lock poisoned");
        let appends = members.entry(target).or_default();
        appends.requests += 1;
        appends.entries += entries as u64;
        appends.busy_us += started.elapsed().as_micros() as u64;
    }

    /// Every member appended to so far, by id.
    pub fn by_member(&self) -> BTreeMap<u64, Appends> {
        self.0
            .lock()
            .expect("replication accounting lock poisoned")
            .clone()
    }
}

/// Whether each member could last be reached, so that a member going down or coming back is
/// logged once, not at every heartbeat.
#[derive(Clone, Default)]
pub struct Reachability(Arc<Mutex<HashMap<u64, bool>>>);

impl Reachability {
    fn note(&self, target: u64, addr: &str, outcome: Result<(), &WireError>) {
        let now = outcome.is_ok();
        let before = self
            .0
            .lock()
            .expect("reachability lock poisoned")
            .insert(target, now);
        match (before, outcome) {
            (Some(false), Ok(())) => {
                tracing::info!(member = target, %addr, "member reachable again")
            }
            (Some(true) | None, Err(e)) => {
                tracing::warn!(member = target, %addr, "cannot reach member: {e}")
            }
            _ => {}
        }
    }
}

/// openraft's client for one target member.
pub struct Peer {
    identity: Identity,
    reachable: Reachability,
    committed: Committed,
    outstanding: Outstanding,
    log: LogStore,
    target: u64,
    addr: String,
    conn: Option<(FrameReader, FrameWriter)>,
    next_id: u64,
}

impl RaftNetworkFactory<WardenRaft> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &PeerNode) -> Peer {
        Peer {
            identity: self.identity.clone(),
            reachable: self.reachable.clone(),
            committed: self.committed.clone(),
            outstanding: self.outstanding.clone(),
            log: self.log.clone(),
            target,
            addr: node.peer_addr.clone(),
            conn: None,
            next_id: 1,
        }
    }
}

/// Why a call did not get an answer.
enum CallError {
    /// No connection could be made: openraft backs off before it tries again.
    Unreachable(WireError),
    /// The connection broke or timed out mid-call, or the peer answered with an error.
    Failed(String),
}

impl CallError {
    fn into_rpc(self, target: u64) -> RPCError<WardenRaft> {
        match self {
            CallError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Failed(why) => RPCError::Network(NetworkError::new(&io::Error::other(
                format!("member {target}: {why}"),
            ))),
        }
    }

    fn into_streaming(self, target: u64) -> StreamingError<WardenRaft> {
        match self.into_rpc(target) {
            RPCError::Unreachable(e) => StreamingError::Unreachable(e),
            RPCError::Network(e) => StreamingError::Network(e),
            other => {
                StreamingError::Network(NetworkError::new(&io::Error::other(other.to_string())))
            }
        }
    }
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    rmp_serde::to_vec(value).expect("openraft messages always serialize")
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, String> {
    rmp_serde::from_slice(bytes).map_err(|e| format!("malformed {what}: {e}"))
}

impl Peer {
    /// Sends one request and waits for its answer, connecting first if needed. Any failure
    /// drops the connection; the next call makes a new one.
    async fn call(
        &mut self,
        kind: Kind,
        payload: &[u8],
        limit: Duration,
    ) -> Result<Vec<u8>, CallError> {
        if self.conn.is_none() {
            let hello = Hello {
                version: wire::PROTOCOL_VERSION,
                cluster_id: self.identity.cluster_id.get(),
                from: self.identity.me,
                to: self.target,
                channel: Channel::Raft,
                committed: self.committed.get(),
            };
            let dialed = wire::dial(
                &self.identity.transport,
                &self.addr,
                hello,
                self.identity.frame_bytes_max,
                limit,
            )
            .await;
            self.reachable
                .note(self.target, &self.addr, dialed.as_ref().map(|_| ()));
            let (reader, writer, _) = dialed.map_err(CallError::Unreachable)?;
            self.conn = Some((reader, writer));
        }
        let id = self.next_id;
        self.next_id += 1;
        let (reader, writer) = self.conn.as_mut().expect("connected above");
        let exchange = async {
            writer.send(kind, GROUP_MAIN, id, payload).await?;
            reader.next().await
        };
        let answer = match tokio::time::timeout(limit, exchange).await {
            Ok(Ok(frame)) if frame.id == id => frame,
            Ok(Ok(frame)) => {
                self.conn = None;
                return Err(CallError::Failed(format!(
                    "answer {} to request {id}",
                    frame.id
                )));
            }
            Ok(Err(e)) => {
                self.conn = None;
                return Err(CallError::Failed(e.to_string()));
            }
            Err(_) => {
                self.conn = None;
                return Err(CallError::Failed(format!("no answer within {limit:?}")));
            }
        };
        match answer.kind {
            Kind::RaftReply => Ok(answer.payload),
            Kind::RaftError => Err(CallError::Failed(
                String::from_utf8_lossy(&answer.payload).into_owned(),
            )),
            other => {
                self.conn = None;
                Err(CallError::Failed(format!("unexpected {other:?}")))
            }
        }
    }

    async fn rpc<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        kind: Kind,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<WardenRaft>> {
        let payload = encode(request);
        let limit = option.soft_ttl()
            + Duration::from_secs_f64(payload.len() as f64 / PEER_BYTES_PER_SECOND_MIN);
        let answer = self
            .call(kind, &payload, limit)
            .await
            .map_err(|e| e.into_rpc(self.target))?;
        decode(&answer, "answer").map_err(|e| CallError::Failed(e).into_rpc(self.target))
    }
}

/// The first bytes of a snapshot chunk: where it goes in the whole and whether it is the last.
pub struct ChunkHeader {
    pub offset: u64,
    pub total: u64,
    /// On the last chunk: the MessagePack of `(vote, snapshot meta)`; empty otherwise.
    pub install: Vec<u8>,
}

pub const CHUNK_HEADER_BYTES: usize = 20;

impl ChunkHeader {
    pub fn encode(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHUNK_HEADER_BYTES + self.install.len() + data.len());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.total.to_be_bytes());
        out.extend_from_slice(&(self.install.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.install);
        out.extend_from_slice(data);
        out
    }

    /// The header and the chunk's data.
    pub fn decode(payload: &[u8]) -> Result<(ChunkHeader, &[u8]), String> {
        if payload.len() < CHUNK_HEADER_BYTES {
            return Err("snapshot chunk shorter than its header".to_owned());
        }
        let offset = u64::from_be_bytes(payload[..8].try_into().expect("8 bytes"));
        let total = u64::from_be_bytes(payload[8..16].try_into().expect("8 bytes"));
        let install_len = u32::from_be_bytes(payload[16..20].try_into().expect("4 bytes")) as usize;
        let rest = &payload[CHUNK_HEADER_BYTES..];
        if install_len > rest.len() {
            return Err("snapshot chunk header overruns the chunk".to_owned());
        }
        let (install, data) = rest.split_at(install_len);
        Ok((
            ChunkHeader {
                offset,
                total,
                install: install.to_vec(),
            },
            data,
        ))
    }
}

/// What a stream of appends answers.
type Answers<'s> = BoxStream<'s, Result<StreamAppendResult<WardenRaft>, RPCError<WardenRaft>>>;

impl RaftNetworkV2<WardenRaft> for Peer {
    type SnapshotData = StateBytes;

    /// openraft's own sequential stream, ended with an error when it was left behind.
    ///
    /// openraft 0.10.0-alpha.37 keeps a replication stream going while the leader still has
    /// entries after the stream's position, and only then looks for a newer command. When a
    /// follower's log is reverted (it lost its data and rejoined), the leader sends it a
    /// snapshot and purges its log, but the stream that was running keeps its old position:
    /// it finds the entries purged, sends heartbeats from that position forever (about 90 a
    /// second) and never carries the entries after the snapshot, so the follower never
    /// catches up. Such a request is recognised here: after the first request of a stream (a
    /// heartbeat is a stream of one request, from the follower's matching entry, which may be
    /// purged), a request from a position whose next entry is purged can only come from a
    /// stream left behind, because openraft never purges entries a current stream still has
    /// to send. The stream then ends with an error, and openraft starts the next one from the
    /// follower's progress as it is now.
    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<Answers<'s>, RPCError<WardenRaft>>>
    where
        S: Stream<Item = AppendEntriesRequest<WardenRaft>> + Send + Unpin + 'static,
    {
        let log = self.log.clone();
        let target = self.target;
        let left_behind = Arc::new(AtomicBool::new(false));
        let mut first = true;
        let seen = left_behind.clone();
        let guarded = input.take_while(move |request| {
            let behind = !first && log.purged_past(request.prev_log_id.as_ref());
            first = false;
            if behind {
                seen.store(true, Ordering::Relaxed);
            }
            std::future::ready(!behind)
        });
        Box::pin(async move {
            let answers = stream_append_sequential(self, guarded, option).await?;
            let ending = futures_util::stream::once(async move {
                left_behind.load(Ordering::Relaxed).then(|| {
                    tracing::warn!(
                        target,
                        "the replication stream to member {target} was left behind by a \
                         purge of the log (the member's log was reverted); starting a new one"
                    );
                    Err(CallError::Failed("replication stream left behind".into()).into_rpc(target))
                })
            })
            .filter_map(std::future::ready);
            Ok(answers.chain(ending).boxed())
        })
    }

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<WardenRaft>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<WardenRaft>, RPCError<WardenRaft>> {
        let started = Instant::now();
        let entries = rpc.entries.len();
        let answer = self.rpc(Kind::AppendEntries, &rpc, &option).await;
        self.outstanding.record(self.target, entries, started);
        answer
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<WardenRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<WardenRaft>, RPCError<WardenRaft>> {
        self.rpc(Kind::Vote, &rpc, &option).await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<WardenRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<WardenRaft>, RPCError<WardenRaft>> {
        self.rpc(Kind::PreVote, &rpc, &option).await
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<WardenRaft>,
        snapshot: SnapshotOf<WardenRaft, StateBytes>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<WardenRaft>, StreamingError<WardenRaft>> {
        let SnapshotOf::<WardenRaft, StateBytes> {
            meta,
            snapshot: mut data,
        } = snapshot;
        let total = data.len();
        let mut cancel = std::pin::pin!(cancel);
        let mut offset = 0u64;
        let unreadable = |e: io::Error| StreamingError::Network(NetworkError::new(&e));
        loop {
            // A chunk at a time from the snapshot's file, so that sending holds one chunk, not
            // the snapshot.
            let n = (total - offset).min(SNAPSHOT_CHUNK_BYTES as u64) as usize;
            let (back, chunk) = tokio::task::spawn_blocking(move || {
                let mut chunk = vec![0; n];
                let read = io::Read::read_exact(&mut data, &mut chunk);
                (data, read.map(|()| chunk))
            })
            .await
            .map_err(|e| unreadable(io::Error::other(e)))?;
            data = back;
            let chunk = chunk.map_err(unreadable)?;
            let last = offset + n as u64 == total;
            let header = ChunkHeader {
                offset,
                total,
                install: if last {
                    encode(&(&vote, &meta))
                } else {
                    Vec::new()
                },
            };
            let payload = header.encode(&chunk);
            let answer = tokio::select! {
                closed = &mut cancel => return Err(StreamingError::Closed(closed)),
                answer = self.call(Kind::SnapshotChunk, &payload, option.soft_ttl()) => answer,
            }
            .map_err(|e| e.into_streaming(self.target))?;
            if last {
                return decode(&answer, "snapshot answer")
                    .map_err(|e| StreamingError::Network(NetworkError::new(&io::Error::other(e))));
            }
            offset += n as u64;
        }
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<WardenRaft>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<WardenRaft>, RPCError<WardenRaft>> {
        self.rpc(Kind::TransferLeader, &req, &option).await
    }
}
