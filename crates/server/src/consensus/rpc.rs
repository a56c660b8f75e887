//! The receiving side of the Raft channel: requests from another member, handed to openraft
//! one at a time, in the order they arrive, each answered before the next is read.

use openraft::Raft;
use openraft::alias::{SnapshotMetaOf, SnapshotOf, VoteOf};

use super::network::{ChunkHeader, decode, encode};
use super::snapshot_store::StateBytes;
use super::state_machine::StateMachine;
use super::types::WardenRaft;
use super::{Consensus, Liveness};
use crate::cluster::wire::{FrameReader, FrameWriter, GROUP_MAIN, Kind, WireError};

/// The answer to a vote request while this member is recovering.
const RECOVERING_NO_VOTE: &str =
    "this member is recovering lost or damaged data and does not vote until it has caught up";

/// A snapshot being received: the bytes so far.
struct Incoming {
    total: u64,
    data: Vec<u8>,
}

/// Serves one peer's Raft channel until it closes or misbehaves; the reason is returned for
/// the log line.
pub(super) async fn serve(
    consensus: &Consensus,
    from: u64,
    mut reader: FrameReader,
    mut writer: FrameWriter,
) -> WireError {
    let raft = &consensus.raft;
    let mut incoming: Option<Incoming> = None;
    loop {
        let frame = match reader.next().await {
            Ok(frame) => frame,
            Err(e) => {
                if matches!(e, WireError::Closed | WireError::Io(_)) {
                    consensus.leader_unreachable(from, false);
                }
                return e;
            }
        };
        if frame.group != GROUP_MAIN {
            return WireError::Handshake(format!("unknown Raft group {}", frame.group));
        }
        let answer = match frame.kind {
            Kind::AppendEntries => {
                let answer = handle(raft, &frame.payload, "append", |r, req| async move {
                    r.append_entries(req).await
                })
                .await;
                if answer.is_ok() {
                    consensus.liveness.heard_from_leader(from);
                }
                answer
            }
            // A member that lost its data may not remember what it acknowledged or whom it
            // voted for: its vote could elect a leader without a committed write (`rejoin`).
            Kind::Vote | Kind::PreVote if consensus.recovering() => {
                Err(RECOVERING_NO_VOTE.to_owned())
            }
            Kind::Vote => {
                handle(raft, &frame.payload, "vote", |r, req| async move {
                    r.vote(req).await
                })
                .await
            }
            Kind::PreVote => {
                handle(raft, &frame.payload, "pre-vote", |r, req| async move {
                    r.pre_vote(req).await
                })
                .await
            }
            Kind::TransferLeader => {
                handle(raft, &frame.payload, "transfer", |r, req| async move {
                    r.handle_transfer_leader(req).await
                })
                .await
            }
            Kind::SnapshotChunk => {
                let max = consensus.snapshot_bytes_max;
                match snapshot_chunk(raft, &mut incoming, &frame.payload, max).await {
                    Ok(answer) => {
                        consensus.liveness.heard_from_leader(from);
                        Ok(answer)
                    }
                    // A malformed transfer ends the connection; the sender starts over.
                    Err(why) => return WireError::Handshake(why),
                }
            }
            other => return WireError::Handshake(format!("{other:?} on a Raft channel")),
        };
        let (kind, bytes) = match answer {
            Ok(bytes) => (Kind::RaftReply, bytes),
            Err(why) => (Kind::RaftError, why.into_bytes()),
        };
        if let Err(e) = writer.send(kind, GROUP_MAIN, frame.id, &bytes).await {
            return e;
        }
    }
}

/// Decodes a request, runs it, encodes the answer; a request that does not decode is an
/// error answer (the peer logs it), not a crash.
async fn handle<Req, Resp, E, F, Fut>(
    raft: &Raft<WardenRaft, StateMachine>,
    payload: &[u8],
    what: &str,
    run: F,
) -> Result<Vec<u8>, String>
where
    Req: serde::de::DeserializeOwned,
    Resp: serde::Serialize,
    E: std::fmt::Display,
    F: FnOnce(Raft<WardenRaft, StateMachine>, Req) -> Fut,
    Fut: std::future::Future<Output = Result<Resp, E>>,
{
    let request: Req = decode(payload, what)?;
    run(raft.clone(), request)
        .await
        .map(|answer| encode(&answer))
        .map_err(|e| e.to_string())
}

/// Receives one chunk; installs the snapshot when the last one is in.
async fn snapshot_chunk(
    raft: &Raft<WardenRaft, StateMachine>,
    incoming: &mut Option<Incoming>,
    payload: &[u8],
    snapshot_bytes_max: u64,
) -> Result<Vec<u8>, String> {
    let (header, data) = ChunkHeader::decode(payload)?;
    if header.offset == 0 {
        if header.total > snapshot_bytes_max {
            return Err(format!(
                "snapshot of {} bytes is over the limit of {snapshot_bytes_max} \
                 (cluster.snapshot_bytes_max)",
                header.total,
            ));
        }
        *incoming = Some(Incoming {
            total: header.total,
            data: Vec::new(),
        });
    }
    let Some(snap) = incoming.as_mut() else {
        return Err("snapshot chunk without a beginning".to_owned());
    };
    if header.offset != snap.data.len() as u64
        || header.total != snap.total
        || snap.data.len() as u64 + data.len() as u64 > snap.total
    {
        *incoming = None;
        return Err("snapshot chunk out of order".to_owned());
    }
    snap.data.extend_from_slice(data);
    if header.install.is_empty() {
        return Ok(Vec::new());
    }
    let snap = incoming.take().expect("present above");
    if snap.data.len() as u64 != snap.total {
        return Err("last snapshot chunk before the snapshot is whole".to_owned());
    }
    let (vote, meta): (VoteOf<WardenRaft>, SnapshotMetaOf<WardenRaft>) =
        decode(&header.install, "snapshot metadata")?;
    let snapshot = SnapshotOf::<WardenRaft, StateBytes> {
        meta,
        snapshot: StateBytes::received(snap.data),
    };
    raft.install_full_snapshot(vote, snapshot)
        .await
        .map(|answer| encode(&answer))
        .map_err(|e| e.to_string())
}

impl Liveness {
    /// Noted on every append or snapshot chunk that openraft accepted.
    fn heard_from_leader(&self, from: u64) {
        self.leader_heard
            .store(self.elapsed_ms(), std::sync::atomic::Ordering::Relaxed);
        self.leader_heard_from
            .store(from, std::sync::atomic::Ordering::Relaxed);
        self.leader_lost
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }
}
