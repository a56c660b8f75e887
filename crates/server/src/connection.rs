//! One client connection: the handshake (a new session, or the resume of a live one), then
//! its requests, read in order and handed on: writes to consensus, everything else to the
//! replica. A writer task sends whatever the replica queues for the client.
//!
//! Bad input never gets further than this module: a frame over the size limit, a handshake or
//! request that does not decode, an unknown opcode or a failed authentication closes this
//! connection, with a log line that says why, and touches nothing else.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use warden_proto::frame::{self, FRAME_PREFIX_BYTES};
use warden_proto::{
    ConnectRequest, DecodeError, ErrorCode, Id, Reader, Record, ReplyHeader, Request,
    RequestHeader, Response, Writer,
};
use warden_state::{Txn, TxnKind, acl};

use crate::admin;
use crate::auth::digest_md5::{DigestMd5, NONCE_RANDOM_BYTES, Refused, Step};
use crate::cluster::forward::SYNC_APPLY_TIMEOUT;
use crate::cluster::membership::{self, is_reconfig};
use crate::consensus::{Origin, Proposal, ProposeError, ReadIndexError};
use crate::outbound::{self, Out, OutboundQueue};
use crate::replica::{Local, Resume, Wakers};
use crate::server::Context;
use crate::stats::ServerStats;
use crate::throttle::Occasionally;
use crate::tls::{self, ClientRead, ClientStream, ClientWrite};
use crate::writes::Target;

/// Bytes asked of the socket per read, at first and at most: a read that fills what it asked
/// for doubles the next, for a client that pipelines; one that brings less than half halves
/// it. Most clients send one small request at a time, and an idle connection holds its
/// buffer: at 10,000 sessions, a fixed 64 KiB read buffer and 256 KiB write buffer (with the
/// connection task's inline state, boxed below) came to 24 KB of resident memory a session,
/// 10 KB without them (docs/benchmarks.md).
const READ_CHUNK_BYTES_MIN: usize = 1024;
const READ_CHUNK_BYTES_MAX: usize = 64 * 1024;
/// Bytes gathered into one socket write.
const WRITE_BATCH_BYTES: usize = 256 * 1024;
/// A write buffer that grew past this is freed once written, not kept for the next batch.
const WRITE_BUFFER_KEPT_BYTES: usize = 16 * 1024;
/// The longest a connection works through its client's requests before it lets the other
/// tasks of its runtime thread run.
const BUSY_PER_WAKE_MAX: std::time::Duration = std::time::Duration::from_millis(1);
/// How long a handshake waits before it asks the leader for a read index again.
const CATCH_UP_RETRY: std::time::Duration = std::time::Duration::from_millis(20);
/// Bytes of the session password a new session gets, as ZooKeeper's.
const PASSWORD_BYTES: usize = 16;

/// Why a connection ended, for its log line.
#[derive(Debug, thiserror::Error)]
enum Closed {
    #[error("client closed the connection")]
    Eof,
    #[error("the server closed the connection")]
    ByServer,
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    #[error("bad frame: {0}")]
    Frame(DecodeError),
    #[error("malformed handshake: {0}")]
    Handshake(DecodeError),
    #[error("malformed request (xid {xid}, opcode {op}): {error}")]
    Request {
        xid: i32,
        op: i32,
        error: DecodeError,
    },
    #[error("unknown opcode {op} (xid {xid}); answered Unimplemented")]
    UnknownOp { xid: i32, op: i32 },
    #[error("authentication with scheme {0:?} failed")]
    AuthFailed(String),
    #[error("SASL authentication failure: {0}")]
    SaslFailed(Refused),
    #[error(
        "a request (opcode {op}) before authenticating with any of the required schemes \
         {schemes:?}; answered SessionClosedRequireSaslAuth"
    )]
    AuthRequired { op: i32, schemes: Vec<String> },
    #[error("session {session:#x} has seen zxid {client_zxid:#x}, this server only {our_zxid:#x}")]
    ClientAhead {
        session: i64,
        client_zxid: i64,
        our_zxid: i64,
    },
    #[error("session {0:#x} is expired or its password is wrong")]
    Expired(i64),
    #[error("no answer to the handshake within {0} ms: the session was not created")]
    HandshakeTimeout(i32),
    #[error("no leader: this server is not serving requests")]
    NoLeader,
    #[error(
        "too many handshakes: limits.connection_throttle (connection_throttle_tokens) has none left"
    )]
    Throttled,
    #[error("sync failed: {0}")]
    Sync(ReadIndexError),
}

/// Reads whole frames off the socket, never buffering more than one frame's worth past the
/// size limit.
struct FrameReader {
    socket: ClientRead,
    buf: Vec<u8>,
    start: usize,
    /// Bytes the next read asks for, between the two `READ_CHUNK_BYTES_` bounds.
    chunk: usize,
    frame_bytes_max: usize,
    /// Where the bytes of each frame read are counted.
    stats: Arc<ServerStats>,
}

impl FrameReader {
    /// Reads until at least `n` unconsumed bytes are buffered.
    async fn fill(&mut self, n: usize) -> Result<(), Closed> {
        while self.buf.len() - self.start < n {
            if self.start == self.buf.len() {
                self.start = 0;
                if self.buf.capacity() > 2 * self.chunk.max(n) {
                    // Drained, and far larger than the client's pace needs: give it back.
                    self.buf = Vec::new();
                } else {
                    self.buf.clear();
                }
            } else if self.start > READ_CHUNK_BYTES_MAX {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            self.buf.reserve(self.chunk);
            let room = self.buf.capacity() - self.buf.len();
            let read = self.socket.read_buf(&mut self.buf).await?;
            if read == 0 {
                return Err(Closed::Eof);
            }
            self.chunk = if read >= room {
                (self.chunk * 2).min(READ_CHUNK_BYTES_MAX)
            } else if read < room / 2 {
                (self.chunk / 2).max(READ_CHUNK_BYTES_MIN)
            } else {
                self.chunk
            };
        }
        Ok(())
    }

    /// The first four bytes, without consuming them.
    async fn peek_prefix(&mut self) -> Result<[u8; FRAME_PREFIX_BYTES], Closed> {
        self.fill(FRAME_PREFIX_BYTES).await?;
        let prefix = &self.buf[self.start..self.start + FRAME_PREFIX_BYTES];
        Ok(prefix.try_into().expect("four bytes"))
    }

    /// The next whole frame's payload.
    async fn next(&mut self) -> Result<Vec<u8>, Closed> {
        self.fill(FRAME_PREFIX_BYTES).await?;
        let len = frame::frame_len(&self.buf[self.start..], self.frame_bytes_max)
            .map_err(Closed::Frame)?
            .expect("prefix buffered");
        let from = self.start + FRAME_PREFIX_BYTES;
        let payload = if len > READ_CHUNK_BYTES_MAX && self.buf.len() - from < len {
            // A large frame is read straight into a buffer of its own size: growing the read
            // buffer to hold it and copying it out took two copies of a value of megabytes
            // and the reallocations between (docs/benchmarks.md, "Large values").
            let mut payload = Vec::with_capacity(len);
            payload.extend_from_slice(&self.buf[from..]);
            self.start = self.buf.len();
            while payload.len() < len {
                let rest = (len - payload.len()) as u64;
                if (&mut self.socket).take(rest).read_buf(&mut payload).await? == 0 {
                    return Err(Closed::Eof);
                }
            }
            payload
        } else {
            // Filling may move the buffered bytes to the front.
            self.fill(FRAME_PREFIX_BYTES + len).await?;
            let from = self.start + FRAME_PREFIX_BYTES;
            let payload = self.buf[from..from + len].to_vec();
            self.start = from + len;
            payload
        };
        self.stats
            .bytes_received
            .fetch_add((FRAME_PREFIX_BYTES + len) as u64, Ordering::Relaxed);
        Ok(payload)
    }
}

/// Sends what the replica queues for this client until the queue closes, or until the client
/// is cut off for not reading (then at once: what is queued would never drain).
async fn write_loop(mut socket: ClientWrite, mut queue: OutboundQueue) {
    let cut_off = queue.cut_off();
    let cut = tokio::select! {
        () = send_queued(&mut socket, &mut queue) => false,
        () = cut_off => true,
    };
    if cut {
        // Up to limits.outbound_queue_bytes_per_session_max of frames (64 MiB by default),
        // freed on a blocking thread: freeing 64 MiB took 25 ms, a runtime thread other
        // clients wait for (docs/benchmarks.md). No shutdown either: a TLS close_notify
        // would wait behind a client that does not read.
        drop(socket);
        tokio::task::spawn_blocking(move || drop(queue));
    } else {
        let _ = socket.shutdown().await;
    }
}

/// Sends the queue's frames, gathering small ones into larger writes, until it closes.
async fn send_queued(socket: &mut ClientWrite, queue: &mut OutboundQueue) {
    let mut buf = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut item = Some(first);
        let mut close = false;
        let mut payload_bytes = 0;
        while let Some(out) = item.take() {
            match out {
                Out::Frame(payload) => {
                    payload_bytes += payload.len();
                    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
                    buf.extend_from_slice(&payload);
                }
                Out::Close => {
                    close = true;
                    break;
                }
            }
            if buf.len() < WRITE_BATCH_BYTES {
                item = queue.try_recv();
            }
        }
        if !buf.is_empty() {
            if socket.write_all(&buf).await.is_err() {
                return;
            }
            queue.sent(payload_bytes);
            if buf.capacity() > WRITE_BUFFER_KEPT_BYTES {
                buf = Vec::new();
            } else {
                buf.clear();
            }
        }
        if close {
            return;
        }
    }
}

/// Whether a request this server answers alone reads the tree (and so is made linearizable
/// by `linearizable_reads`).
fn reads_state(request: &Request) -> bool {
    !matches!(
        request,
        Request::Ping
            | Request::SetWatches(_)
            | Request::SetWatches2(_)
            | Request::AddWatch(_)
            | Request::CheckWatches(_)
            | Request::RemoveWatches(_)
            | Request::WhoAmI
    )
}

/// Whether a write names an id of `scheme` in an ACL it sets.
fn names_acl_scheme(request: &Request, scheme: &str) -> bool {
    let acl = match request {
        Request::Create(r)
        | Request::Create2(r)
        | Request::CreateContainer(r)
        | Request::CreateIfNotExists(r) => &r.acl,
        Request::CreateTtl(r) => &r.acl,
        Request::SetAcl(r) => &r.acl,
        Request::Multi(ops) => return ops.iter().any(|op| names_acl_scheme(op, scheme)),
        _ => return false,
    };
    acl.iter().any(|a| a.id.scheme == scheme)
}

/// Serves one accepted connection, plain or TLS (`tls`), to its end.
pub async fn serve(ctx: Arc<Context>, stream: ClientStream, peer: SocketAddr) {
    let connection = ctx.next_connection_id();
    let ClientStream { read, write, tls } = stream;
    let mut reader = FrameReader {
        socket: read,
        buf: Vec::new(),
        start: 0,
        chunk: READ_CHUNK_BYTES_MIN,
        frame_bytes_max: ctx.config.limits.frame_bytes_max as usize,
        stats: ctx.stats.clone(),
    };
    // A four-letter word instead of a session: answer it and close.
    match reader.peek_prefix().await {
        Ok(prefix) => {
            if let Some(word) = frame::four_letter_word(&prefix) {
                // Boxed, as the handshake and each request: a connection's task holds its
                // largest state for as long as it lives.
                Box::pin(admin::answer(&ctx, word, reader.socket, write, peer)).await;
                return;
            }
            if tls.is_none() && tls::looks_like_tls(&prefix) {
                tracing::warn!(
                    %peer,
                    "closing connection: a TLS handshake on the plain client port (TLS \
                     clients connect to secureClientPort, or set client.portUnification=true)"
                );
                return;
            }
        }
        Err(_) => return,
    }
    // A server without a quorum closes a client's connection, as ZooKeeper does, so that the
    // client moves on to a server that can serve it; in read-only mode it serves the reads of
    // clients that allow that. Within the leaderless grace of losing its leader, it waits
    // for the next one first: an election is usually over by then.
    let read_only = !ctx.serving() && !ctx.await_serving().await;
    if read_only && !ctx.read_only_mode() {
        tracing::debug!(%peer, "refused a client: this server is not serving (no quorum)");
        return;
    }

    let (out, queue) = outbound::channel(ctx.config.limits.outbound_queue_bytes_per_session_max);
    let (writer_done_tx, writer_done) = oneshot::channel::<()>();
    outbound::writers().spawn(async move {
        write_loop(write, queue).await;
        drop(writer_done_tx);
    });
    let mut ids = vec![Id::new("ip", peer.ip().to_string())];
    if let Some(subject) = tls.as_ref().and_then(|t| t.subject.as_ref()) {
        ids.extend(x509_ids(&ctx, subject));
    }
    let auth: Arc<[Id]> = Arc::from(ids);
    let wakers = ctx
        .replica()
        .connect(connection, out.clone(), peer, auth.clone(), read_only);
    let mut session = Session {
        ctx: ctx.clone(),
        connection,
        session_id: 0,
        auth,
        out: out.clone(),
        read_only,
        sasl: None,
    };
    let result = tokio::select! {
        r = session.run(&mut reader, &wakers) => r,
        _ = writer_done => Err(Closed::ByServer),
    };
    ctx.replica().disconnect(connection);
    match &result {
        Err(Closed::Eof | Closed::ByServer) => tracing::debug!(
            %peer,
            session = format_args!("{:#x}", session.session_id),
            "connection closed"
        ),
        Err(e @ (Closed::ClientAhead { .. } | Closed::Expired(_) | Closed::NoLeader)) => {
            tracing::info!(%peer, "refused a session: {e}")
        }
        // One line per refusal would let a flood of handshakes flood the log too; the
        // refusals are counted (connection_rejected) and the first in each second logged.
        Err(e @ Closed::Throttled) => {
            static THROTTLED_LOG: Occasionally = Occasionally::new();
            if THROTTLED_LOG.allows(Instant::now()) {
                tracing::warn!(%peer, "refused a session: {e} (logged at most once a second)")
            }
        }
        Err(e) => tracing::warn!(
            %peer,
            session = format_args!("{:#x}", session.session_id),
            "closing connection: {e}"
        ),
        Ok(()) => {}
    }
    out.close();
}

/// The ids a client certificate's subject gives (ZooKeeper's `X509AuthenticationProvider`):
/// `super:<subject>` for the configured super user (any `super` id passes every ACL), then
/// `x509:<subject>`.
fn x509_ids(ctx: &Context, subject: &str) -> Vec<Id> {
    let mut ids = Vec::new();
    if ctx.config.tls.super_user.as_deref() == Some(subject) {
        ids.push(Id::new("super", subject.to_owned()));
    }
    ids.push(Id::new("x509", subject.to_owned()));
    ids
}

/// The session side of one connection.
struct Session {
    ctx: Arc<Context>,
    connection: u64,
    session_id: i64,
    /// The identities the client has proven, the ip it connects from first.
    auth: Arc<[Id]>,
    out: outbound::Outbound,
    /// Connected in read-only mode (no quorum): reads only.
    read_only: bool,
    /// The SASL exchange, once the client has started one.
    sasl: Option<DigestMd5>,
}

impl Session {
    async fn run(&mut self, reader: &mut FrameReader, wakers: &Wakers) -> Result<(), Closed> {
        // Boxed: the state of a handshake and of a request, 2.5 KB each, are held only while
        // they run, not in every idle connection's task (8.6 KB a connection when inline).
        Box::pin(self.handshake(reader)).await?;
        let outstanding_max = self.ctx.config.limits.outstanding_requests_per_session_max as usize;
        let mut busy_since = Instant::now();
        loop {
            while self.ctx.replica().outstanding(self.connection) >= outstanding_max {
                self.wait_progress(wakers).await;
            }
            self.server_outstanding_below_max().await;
            // Cancel-safe: a frame read in part stays in the reader's buffer.
            let payload = tokio::select! {
                payload = reader.next() => payload?,
                _ = wakers.handoff.notified() => {
                    self.hand_waiting().await;
                    continue;
                }
            };
            Box::pin(self.request(&payload, wakers)).await?;
            // Thousands of pipelined requests arrive in one socket read, and nothing above
            // waits while they are buffered: without a bound on the work per wake-up, one
            // client held a runtime thread for 1 to 4 s (1 MB reads, docs/benchmarks.md)
            // while the other clients and the IO driver waited.
            if busy_since.elapsed() >= BUSY_PER_WAKE_MAX {
                tokio::task::yield_now().await;
                busy_since = Instant::now();
            }
        }
    }

    /// Waits while the server as a whole has `limits.outstanding_requests_max` requests
    /// unanswered (`replica::Outstanding`).
    async fn server_outstanding_below_max(&self) {
        loop {
            let (full, below_max) = self.ctx.replica().outstanding_full();
            if !full {
                return;
            }
            let notified = below_max.notified();
            tokio::pin!(notified);
            // Registered before the second look, so a wake-up in between is not missed.
            notified.as_mut().enable();
            if !self.ctx.replica().outstanding_full().0 {
                return;
            }
            notified.await;
        }
    }

    async fn handshake(&mut self, reader: &mut FrameReader) -> Result<(), Closed> {
        let payload = reader.next().await?;
        let mut r = Reader::new(&payload);
        let request = ConnectRequest::decode(&mut r).map_err(Closed::Handshake)?;
        let config = &self.ctx.config;
        let timeout_ms = request.timeout_ms.clamp(
            config.session_timeout_ms_min as i32,
            config.session_timeout_ms_max as i32,
        );
        if !self.ctx.throttle.admit(request.session_id != 0) {
            self.ctx
                .stats
                .connections_refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(Closed::Throttled);
        }
        // While mirroring a ZooKeeper ensemble, sessions are ZooKeeper's: a client moved
        // over resumes its own; a new one is a read-only session of this server's, for a
        // client that allows one (docs/migration.md).
        let mirroring = self.ctx.replica().state().mirroring();
        if self.read_only || (mirroring && request.session_id == 0) {
            return self.read_only_handshake(&request, timeout_ms);
        }
        // A client that has seen more than this server has applied: if the server only lags
        // (the entries are committed, a new leader is applying them), it catches up with
        // the leader first; if it is still behind, the client is refused below.
        if request.last_zxid_seen > self.ctx.replica().state().last_zxid()
            && !self.ctx.consensus.standalone()
        {
            // Still behind after that, it refuses the client below.
            let _ = self.catch_up_patiently().await;
        }
        if request.session_id == 0 {
            // Even a new session is refused by a server behind what the client has seen
            // (ZooKeeper's processConnectRequest checks this first), so that the client moves
            // on rather than read an older state.
            let our_zxid = self.ctx.replica().state().last_zxid();
            if request.last_zxid_seen > our_zxid {
                return Err(Closed::ClientAhead {
                    session: 0,
                    client_zxid: request.last_zxid_seen,
                    our_zxid,
                });
            }
            let mut password = vec![0u8; PASSWORD_BYTES];
            getrandom::fill(&mut password).map_err(|e| Closed::Io(std::io::Error::other(e)))?;
            let created = self.ctx.replica().await_session(
                self.connection,
                timeout_ms,
                request.read_only,
                password.clone(),
            );
            self.submit(
                0,
                Instant::now(),
                TxnKind::CreateSession {
                    timeout_ms,
                    password,
                },
            )
            .await?;
            // The session is created when its entry is applied; if it never is (no quorum,
            // the leader lost it), the client is told nothing and tries again elsewhere.
            let limit = std::time::Duration::from_millis(timeout_ms.max(1) as u64);
            self.session_id = tokio::time::timeout(limit, created)
                .await
                .map_err(|_| Closed::HandshakeTimeout(timeout_ms))?
                .map_err(|_| Closed::ByServer)?;
            return Ok(());
        }
        // The leader learns the session is here before the client is answered, so that no
        // write it left behind on another server can be applied after the answer. A session
        // this server does not know may be one it has not applied yet (it has just restarted,
        // or lags): it catches up with the leader before it says "expired".
        let known = |ctx: &Context| {
            ctx.replica()
                .state()
                .session(request.session_id)
                .is_some_and(|s| s.password == request.password)
        };
        let mut valid = known(&self.ctx);
        if !valid && !self.ctx.consensus.standalone() {
            self.catch_up_patiently().await?;
            valid = known(&self.ctx);
        }
        if valid {
            self.revalidate(request.session_id).await?;
        }
        let resumed = self.ctx.replica().resume_session(
            self.connection,
            &request,
            timeout_ms,
            Instant::now(),
        );
        match resumed {
            Resume::Attached => {
                self.session_id = request.session_id;
                Ok(())
            }
            Resume::Expired => Err(Closed::Expired(request.session_id)),
            Resume::ClientAhead {
                client_zxid,
                our_zxid,
            } => Err(Closed::ClientAhead {
                session: request.session_id,
                client_zxid,
                our_zxid,
            }),
        }
    }

    fn local(&self, xid: i32, request: Request, received: Instant, refused: Option<ErrorCode>) {
        self.ctx.replica().local(
            self.connection,
            Local {
                xid,
                request,
                auth: self.auth.clone(),
                received,
                refused,
            },
        );
    }

    /// Tells the leader the session is attached here now (ZooKeeper's revalidation), so that
    /// writes its client left behind on another server get SessionMoved.
    async fn revalidate(&self, session_id: i64) -> Result<(), Closed> {
        let ctx = &self.ctx;
        if ctx.consensus.standalone() {
            return Ok(());
        }
        let me = ctx.consensus.node_id();
        // A leader that has just died is not given up on at once: the client would run out of
        // servers to try while the others elect a new one. The handshake waits for the next
        // leader, within a bound.
        let deadline = tokio::time::Instant::now() + 2 * ctx.consensus.election_timeout();
        loop {
            let seen = (ctx.consensus.term(), ctx.consensus.leader());
            let revalidated = match seen.1 {
                Some(leader) if leader == me => {
                    ctx.replica().claim_session(session_id, me, seen.0);
                    return Ok(());
                }
                Some(leader) => {
                    let revalidating = ctx.forwarder.revalidate(ctx, leader, session_id);
                    matches!(
                        tokio::time::timeout_at(deadline, revalidating).await,
                        Ok(Ok(()))
                    )
                }
                None => false,
            };
            // A leader that lost its place meanwhile took its record with it: the next
            // leader is told too.
            if revalidated && (ctx.consensus.term(), ctx.consensus.leader()) == seen {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, ctx.consensus.changed(seen))
                .await
                .is_err()
            {
                return Err(Closed::NoLeader);
            }
        }
    }

    /// `sync`: once the session's earlier requests are answered, asks the leader for a read
    /// index (leadership confirmed by a quorum) and waits until this server has applied up to
    /// it. Reading no further request meanwhile keeps the session's order, and a read after
    /// the sync sees every write committed before the sync reached the leader.
    async fn sync(&self, wakers: &Wakers) -> Result<(), Closed> {
        while self.ctx.replica().outstanding(self.connection) > 0 {
            self.wait_progress(wakers).await;
        }
        self.catch_up_patiently().await
    }

    /// Catches up with the leader like [`Session::catch_up`], trying again while it fails, for
    /// two election timeouts at most: a read index asked of a leader that is gone fails when
    /// the leader changes, a leader elected a moment ago confirms none until it has committed
    /// an entry of its term, and a client sent away now would find the other servers electing
    /// too. Asking again is harmless: a read index changes nothing.
    async fn catch_up_patiently(&self) -> Result<(), Closed> {
        let deadline = tokio::time::Instant::now() + 2 * self.ctx.consensus.election_timeout();
        loop {
            match self.catch_up().await {
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(CATCH_UP_RETRY).await
                }
                done => return done,
            }
        }
    }

    /// Waits until this server has applied everything the leader had committed when asked
    /// (ReadIndex).
    async fn catch_up(&self) -> Result<(), Closed> {
        if self.ctx.consensus.leader().is_none() {
            self.ctx.await_serving().await;
        }
        let leader = self.ctx.consensus.leader().ok_or(Closed::NoLeader)?;
        let index = if leader == self.ctx.consensus.node_id() {
            self.ctx.consensus.read_index().await
        } else {
            self.ctx.forwarder.read_index(&self.ctx, leader).await
        }
        .map_err(Closed::Sync)?;
        self.ctx
            .consensus
            .applied_up_to(index, SYNC_APPLY_TIMEOUT)
            .await
            .map_err(Closed::Sync)
    }

    /// A handshake in read-only mode: only a client that allows a read-only server is taken;
    /// a new session is this server's alone, a known one is resumed without the leader.
    fn read_only_handshake(
        &mut self,
        request: &ConnectRequest,
        timeout_ms: i32,
    ) -> Result<(), Closed> {
        if request.read_only != Some(true) {
            return Err(Closed::NoLeader);
        }
        let our_zxid = self.ctx.replica().state().last_zxid();
        if request.last_zxid_seen > our_zxid {
            return Err(Closed::ClientAhead {
                session: request.session_id,
                client_zxid: request.last_zxid_seen,
                our_zxid,
            });
        }
        if request.session_id != 0 {
            let resumed = self.ctx.replica().resume_session(
                self.connection,
                request,
                timeout_ms,
                Instant::now(),
            );
            return match resumed {
                Resume::Attached => {
                    self.session_id = request.session_id;
                    Ok(())
                }
                _ => Err(Closed::Expired(request.session_id)),
            };
        }
        let mut random = [0u8; 8 + PASSWORD_BYTES];
        getrandom::fill(&mut random).map_err(|e| Closed::Io(std::io::Error::other(e)))?;
        // Far from the ids the state machine hands out (which start at 1 << 56).
        let id = (i64::from_le_bytes(random[..8].try_into().expect("8 bytes"))
            & 0x00ff_ffff_ffff_ffff)
            | (0x7e << 56);
        self.session_id = id;
        self.ctx.replica().attach_local_session(
            self.connection,
            id,
            timeout_ms,
            random[8..].to_vec(),
        );
        Ok(())
    }

    async fn request(&mut self, payload: &[u8], wakers: &Wakers) -> Result<(), Closed> {
        let received = Instant::now();
        let mirroring = {
            let mut replica = self.ctx.replica();
            replica.touch(self.session_id, received);
            replica.state().mirroring()
        };
        let mut r = Reader::new(payload);
        let header = RequestHeader::decode(&mut r).map_err(|error| Closed::Request {
            xid: 0,
            op: 0,
            error,
        })?;
        let request = match Request::decode(header.op, &mut r) {
            Ok(request) => request,
            Err(DecodeError::UnknownOpCode(op)) => {
                // ZooKeeper answers an unknown opcode with zxid -1, then hangs up.
                self.reply(header.xid, -1, ErrorCode::UNIMPLEMENTED);
                return Err(Closed::UnknownOp {
                    xid: header.xid,
                    op,
                });
            }
            Err(error) => {
                return Err(Closed::Request {
                    xid: header.xid,
                    op: header.op,
                    error,
                });
            }
        };
        // A server mirroring a ZooKeeper ensemble answers writes as a read-only one does.
        let read_only = self.read_only || mirroring;
        match request {
            Request::Auth(auth) => self.authenticate(header.xid, &auth.scheme, &auth.auth),
            Request::Sasl(sasl) => self.sasl(header.xid, &sasl.token),
            request if !self.authenticated_as_required() => {
                // ZooKeeper's AuthenticationHelper.enforceAuthentication: no body, then the
                // connection is closed.
                self.reply(header.xid, 0, ErrorCode::SESSION_CLOSED_REQUIRE_SASL_AUTH);
                Err(Closed::AuthRequired {
                    op: request.op() as i32,
                    schemes: self.ctx.config.auth.required_schemes.clone(),
                })
            }
            Request::CloseSession
                if read_only
                    && self
                        .ctx
                        .replica()
                        .state()
                        .session(self.session_id)
                        .is_none() =>
            {
                // A read-only session is this server's alone: closing it is closing the
                // connection. (A mirrored session is the ensemble's: ZooKeeper's read-only
                // server refuses to close a global session, NotReadOnly, below.)
                self.reply(header.xid, 0, ErrorCode::OK);
                Err(Closed::ByServer)
            }
            request if read_only && (request.is_write() || matches!(request, Request::Sync(_))) => {
                self.local(
                    header.xid,
                    request,
                    received,
                    Some(ErrorCode::NOT_READ_ONLY),
                );
                Ok(())
            }
            request
                if request.is_write()
                    && ((!self.ctx.config.auth.sasl_scheme
                        && names_acl_scheme(&request, "sasl"))
                        || (!self.ctx.config.tls.x509_available()
                            && names_acl_scheme(&request, "x509"))) =>
            {
                // The state machine takes sasl and x509 ids; a server without ZooKeeper's
                // SASL provider, or without client certificates, refuses them, as
                // ZooKeeper's fixupACL does.
                self.local(header.xid, request, received, Some(ErrorCode::INVALID_ACL));
                Ok(())
            }
            request
                if request.is_write()
                    && crate::replica::ephemeral_creates(&request) > 0
                    && !self
                        .ctx
                        .replica()
                        .may_hold_ephemerals(self.session_id, &request) =>
            {
                self.local(
                    header.xid,
                    request,
                    received,
                    Some(ErrorCode::BAD_ARGUMENTS),
                );
                Ok(())
            }
            request if request.is_write() => {
                let kind = match request {
                    Request::CloseSession => TxnKind::CloseSession,
                    request => TxnKind::Request(request),
                };
                self.submit(header.xid, received, kind).await
            }
            request
                if !self.ctx.consensus.standalone()
                    && !self.read_only
                    && (matches!(request, Request::Sync(_))
                        || (self.ctx.config.linearizable_reads && reads_state(&request))) =>
            {
                self.sync(wakers).await?;
                self.local(header.xid, request, received, None);
                Ok(())
            }
            request => {
                self.local(header.xid, request, received, None);
                Ok(())
            }
        }
    }

    /// Whether the client has authenticated with one of the schemes the server requires
    /// (all is well when it requires none).
    fn authenticated_as_required(&self) -> bool {
        let required = &self.ctx.config.auth.required_schemes;
        required.is_empty() || self.auth.iter().any(|id| required.contains(&id.scheme))
    }

    /// One SASL token (ZooKeeper's `processSasl`). Success adds `sasl:<user>`, and `super`
    /// for a configured super user; a refused token is answered AuthFailed (or
    /// SessionClosedRequireSaslAuth when SASL is required) with a null token, and the
    /// connection is closed.
    fn sasl(&mut self, xid: i32, token: &[u8]) -> Result<(), Closed> {
        let Some(users) = &self.ctx.sasl_users else {
            // What a ZooKeeper without a JAAS Server section answers: OK, a null token.
            tracing::debug!("a SASL token, but there are no SASL users (no JAAS section)");
            self.sasl_reply(xid, ErrorCode::OK, None);
            return Ok(());
        };
        let exchange = self.sasl.get_or_insert_with(|| {
            let mut random = [0u8; NONCE_RANDOM_BYTES];
            getrandom::fill(&mut random).expect("the OS gives random bytes");
            DigestMd5::new(random)
        });
        match exchange.step(token, &users.0) {
            Ok(Step::Continue(challenge)) => {
                self.sasl_reply(xid, ErrorCode::OK, Some(challenge));
                Ok(())
            }
            Ok(Step::Authenticated { user, token }) => {
                let auth = &self.ctx.config.auth;
                let mut ids = vec![Id::new("sasl", user.clone())];
                if auth.sasl_super_users.contains(&user) {
                    ids.push(acl::super_id());
                }
                tracing::info!(
                    session = format_args!("{:#x}", self.session_id),
                    "SASL authentication of {user:?}{}",
                    if ids.len() > 1 { ", a super user" } else { "" }
                );
                self.add_auth(ids);
                self.sasl_reply(xid, ErrorCode::OK, Some(token));
                Ok(())
            }
            Err(refused) => {
                let err = if self.ctx.config.auth.sasl_required() {
                    ErrorCode::SESSION_CLOSED_REQUIRE_SASL_AUTH
                } else {
                    ErrorCode::AUTH_FAILED
                };
                self.sasl_reply(xid, err, None);
                self.ctx.stats.auth_failed.fetch_add(1, Ordering::Relaxed);
                Err(Closed::SaslFailed(refused))
            }
        }
    }

    /// A SetSASLResponse, whose token ZooKeeper sends even with an error (null then).
    fn sasl_reply(&self, xid: i32, err: ErrorCode, token: Option<Vec<u8>>) {
        let mut w = Writer::new();
        ReplyHeader { xid, zxid: 0, err }.encode(&mut w);
        token.encode(&mut w);
        self.out.send(w.into_bytes());
    }

    fn add_auth(&mut self, ids: Vec<Id>) {
        let mut auth = self.auth.to_vec();
        for id in ids {
            if !auth.contains(&id) {
                auth.push(id);
            }
        }
        self.auth = Arc::from(auth);
        self.ctx
            .replica()
            .set_auth(self.connection, self.auth.clone());
    }

    /// `addauth`: only the digest scheme exists here, as in a ZooKeeper without extra
    /// authentication providers. A failure is answered AuthFailed and ends the connection.
    fn authenticate(&mut self, xid: i32, scheme: &str, credential: &[u8]) -> Result<(), Closed> {
        let ids = match (scheme, std::str::from_utf8(credential)) {
            ("digest", Ok(credential)) => {
                acl::authenticate_digest(credential, self.ctx.config.super_digest.as_deref())
            }
            _ => Vec::new(),
        };
        if ids.is_empty() {
            self.reply(xid, 0, ErrorCode::AUTH_FAILED);
            self.ctx.stats.auth_failed.fetch_add(1, Ordering::Relaxed);
            return Err(Closed::AuthFailed(scheme.to_owned()));
        }
        self.add_auth(ids);
        self.reply(xid, 0, ErrorCode::OK);
        Ok(())
    }

    fn reply(&self, xid: i32, zxid: i64, err: ErrorCode) {
        self.out.send(Response::encode_frame(
            &ReplyHeader { xid, zxid, err },
            &Response::Empty,
        ));
    }

    /// Sends a write to the log: proposed here if this server leads, else forwarded to the
    /// leader. Its reply comes when this server applies it. While the connection's earlier
    /// writes are in doubt after a change of leader, or no leader is known, it is held and
    /// handed on after them (crate::writes). One that finds the queue to the leader full is
    /// answered ThrottledOp, in its turn. A new session (`session_id` 0) is not held: without
    /// a leader its connection closes, so that its client tries another server.
    async fn submit(&self, xid: i32, received: Instant, kind: TxnKind) -> Result<(), Closed> {
        let ctx = &self.ctx;
        let target = self.target();
        if target.is_none() && self.session_id == 0 {
            return Err(Closed::NoLeader);
        }
        let me = ctx.consensus.node_id();
        if let Some(t) = target
            && t.leader != me
            && !ctx.forwarder.has_room(t.leader)
        {
            let request = match kind {
                TxnKind::Request(request) => request,
                _ => Request::CloseSession,
            };
            self.local(xid, request, received, Some(ErrorCode::THROTTLED_OP));
            return Ok(());
        }
        let (connection, session_id, auth) = (self.connection, self.session_id, self.auth.to_vec());
        let build = move |seq, incarnation| Proposal {
            origin: Some(Origin {
                node: me,
                incarnation,
                connection,
                seq,
                xid,
            }),
            txn: Txn {
                session_id,
                // The leader stamps its own time when it proposes.
                time_ms: 0,
                auth,
                enforce_quota: false,
                kind,
            },
        };
        let ready = ctx
            .replica()
            .write(connection, received, build, target)
            .ok_or(Closed::ByServer)?;
        if let Some(target) = target {
            self.hand(target, ready).await;
        }
        Ok(())
    }

    /// The leader writes go to now, and its term.
    fn target(&self) -> Option<Target> {
        self.ctx
            .consensus
            .leader_in_term()
            .map(|(leader, term)| Target { leader, term })
    }

    /// Hands on the writes this connection held (behind writes in doubt, or while no
    /// leader was known), once that may be done.
    async fn hand_waiting(&self) {
        if !self.ctx.replica().writes_waiting(self.connection) {
            return;
        }
        if let Some(target) = self.target() {
            let ready = self.ctx.replica().writes_for(self.connection, target);
            self.hand(target, ready).await;
        }
    }

    /// Hands writes, in order, to the leader of `target`, to be entered in the log only in
    /// its term: proposed here if this server leads, else forwarded.
    async fn hand(&self, target: Target, proposals: Vec<Proposal>) {
        let ctx = &self.ctx;
        let me = ctx.consensus.node_id();
        for mut proposal in proposals {
            if target.leader == me {
                crate::cluster::refuse_if_moved(ctx, &mut proposal, me, target.term);
                let (failed_ctx, connection) = (ctx.clone(), self.connection);
                let failed = move |e: ProposeError| {
                    failed_ctx
                        .replica()
                        .write_failed(connection, &e.to_string(), Instant::now())
                };
                if is_reconfig(&proposal) && !ctx.consensus.standalone() {
                    membership::reconfig(ctx, proposal, Some(target.term), failed).await;
                } else {
                    ctx.consensus
                        .propose(proposal, Some(target.term), failed)
                        .await;
                }
            } else if let Err(e) = ctx.forwarder.forward(ctx, target, &proposal) {
                // It never left this server, nor will the writes after it.
                ctx.replica().writes_lost(self.connection, &e.to_string());
                return;
            }
        }
    }

    /// Waits until `progress` or `handoff` is signalled, handing on held writes if asked.
    async fn wait_progress(&self, wakers: &Wakers) {
        tokio::select! {
            _ = wakers.progress.notified() => {}
            _ = wakers.handoff.notified() => self.hand_waiting().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(payload);
        f
    }

    #[tokio::test]
    async fn the_read_buffer_grows_for_a_pipelining_client_and_shrinks_when_it_slows() {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (read, _write) = tokio::io::split(server);
        let (_, mut client) = tokio::io::split(client);
        let mut reader = FrameReader {
            socket: Box::new(read),
            buf: Vec::new(),
            start: 0,
            chunk: READ_CHUNK_BYTES_MIN,
            frame_bytes_max: 1 << 20,
            stats: Arc::new(ServerStats::default()),
        };
        // A pipelining client: 512 KiB of frames buffered at once.
        let frame = framed(&[7; 100]);
        let burst: Vec<u8> = frame
            .iter()
            .copied()
            .cycle()
            .take(frame.len() * 5000)
            .collect();
        client.write_all(&burst).await.unwrap();
        for _ in 0..5000 {
            assert_eq!(reader.next().await.unwrap(), [7; 100]);
        }
        assert_eq!(reader.chunk, READ_CHUNK_BYTES_MAX);
        assert!(reader.buf.capacity() >= READ_CHUNK_BYTES_MAX);
        // Then one request at a time: the reads come back small, and the buffer goes.
        for i in 0..10u8 {
            client.write_all(&framed(&[i; 30])).await.unwrap();
            assert_eq!(reader.next().await.unwrap(), [i; 30]);
        }
        assert_eq!(reader.chunk, READ_CHUNK_BYTES_MIN);
        assert!(
            reader.buf.capacity() <= 2 * READ_CHUNK_BYTES_MIN,
            "{}",
            reader.buf.capacity()
        );
        // Frames larger than any chunk are read whole, into buffers of their own, and never
        // past their end: the frames after them arrive in the same writes.
        let mixed = [
            vec![1; 10],
            vec![2; 300_000],
            vec![3; 20],
            vec![4; READ_CHUNK_BYTES_MAX + 1],
            vec![5; 200_000],
        ];
        let burst: Vec<u8> = mixed.iter().flat_map(|f| framed(f)).collect();
        client.write_all(&burst).await.unwrap();
        for expected in &mixed {
            assert_eq!(&reader.next().await.unwrap(), expected);
        }
        assert!(
            reader.buf.capacity() <= 2 * READ_CHUNK_BYTES_MAX,
            "{}",
            reader.buf.capacity()
        );
    }
}
