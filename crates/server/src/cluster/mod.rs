//! The servers of a cluster talking to each other.
//!
//! - [`wire`]: the peer protocol's frames (bounded, checksummed, tagged with a Raft group)
//!   and its handshake.
//! - [`forward`]: followers' writes, session touches and read-index requests to the leader.
//! - [`membership`]: reconfig, and Raft's membership kept equal to `/zookeeper/config`.
//! - [`transport`]: plain TCP or TLS between servers.
//! - this module: the peer listener, which checks each peer at the handshake and hands its
//!   channel to consensus (Raft's own messages) or to [`forward`].

pub mod forward;
pub mod membership;
pub mod transport;
pub mod wire;

use std::sync::Arc;

use std::time::Instant;

use tokio::net::TcpListener;

use crate::consensus::Proposal;
use crate::server::Context;
use crate::throttle::Occasionally;

/// On the leader: a write of a session whose client has moved to another server since is
/// refused with SessionMoved (answered in its turn, through the log), so that a write left
/// behind on the old server cannot overtake what the client did since (ZooKeeper's
/// `SessionTracker.checkSession`). `term` is the leader's term the write was sent for.
pub fn refuse_if_moved(ctx: &Context, proposal: &mut Proposal, from: u64, term: u64) {
    let session_id = proposal.txn.session_id;
    if !ctx.replica().session_owned_by(session_id, from, term) {
        tracing::info!(
            session = format_args!("{session_id:#x}"),
            server = from,
            "a write from a server the session has left: SessionMoved"
        );
        proposal.txn.kind = warden_state::TxnKind::Refused {
            err: warden_proto::ErrorCode::SESSION_MOVED,
        };
    }
}

/// Accepts other members' connections on the quorum port until the server stops.
pub async fn listen(ctx: Arc<Context>, listener: TcpListener) {
    loop {
        let (stream, addr) = crate::server::accept(&listener, "a peer").await;
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let serve = async {
                let identity = ctx.consensus.identity().clone();
                let stream = match identity.transport.accept(stream, addr).await {
                    Ok(stream) => stream,
                    Err(e) => {
                        // A member kept out dials again at every heartbeat.
                        static REFUSED_LOG: Occasionally = Occasionally::new();
                        if REFUSED_LOG.allows(Instant::now()) {
                            tracing::warn!("refused a peer: {e} (logged at most once a second)");
                        }
                        return;
                    }
                };
                let (mut reader, mut writer) = wire::split(stream, identity.frame_bytes_max);
                let members = &ctx.config.cluster.members;
                let hello = wire::accept(
                    &mut reader,
                    &mut writer,
                    identity.me,
                    identity.cluster_id.get(),
                    ctx.consensus.committed_index(),
                    |h| {
                        if members.iter().any(|m| m.id == h.from)
                            || ctx.consensus.peer_addr(h.from).is_some()
                        {
                            Ok(())
                        } else {
                            Err(format!("server {} is not a member of this cluster", h.from))
                        }
                    },
                )
                .await;
                let hello = match hello {
                    Ok(hello) => hello,
                    Err(e) => {
                        tracing::warn!(%addr, "refused a peer: {e}");
                        return;
                    }
                };
                let why = match hello.channel {
                    // The answering hello was all a probe wanted.
                    wire::Channel::Probe => return,
                    wire::Channel::Raft => {
                        ctx.consensus.serve_peer(hello.from, reader, writer).await
                    }
                    wire::Channel::Forward => {
                        forward::serve_follower(ctx.clone(), hello.from, reader, writer).await
                    }
                };
                match why {
                    wire::WireError::Closed | wire::WireError::Io(_) => {
                        tracing::debug!(peer = hello.from, channel = ?hello.channel, "peer channel closed: {why}")
                    }
                    _ => tracing::warn!(
                        peer = hello.from,
                        channel = ?hello.channel,
                        "peer channel closed: {why}"
                    ),
                }
            };
            ctx.until_stopped(serve).await;
        });
    }
}
