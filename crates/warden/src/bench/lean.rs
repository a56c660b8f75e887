//! The lean driver (`--driver lean`): a session's requests written straight onto its socket,
//! encoded with warden-proto, their answers matched to them by order, and of each answer only
//! what the run counts read (the reply header; a multi's results, for the error of a part).
//!
//! Written by hand because the independent client does far more than a load needs: it spent
//! 46 µs of CPU per request of the mixed workload (a task and channels per session, a future
//! per request, every answer decoded whole), as much as the server it measured on a 2-core
//! machine (docs/benchmarks.md). What this driver acknowledges is checked through the
//! independent client after the run: the znodes the run made must be the ones its
//! acknowledged writes account for (runner.rs).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;
use warden_proto::frame;
use warden_proto::jute::{Reader, Record, Writer};
use warden_proto::request::{ConnectRequest, Request};
use warden_proto::response::{ConnectResponse, OpResult, ReplyHeader, Response};
use warden_proto::types::{ErrorCode, OpCode, WatcherEvent, xid};
use zookeeper_client as zk;

/// Bytes read from the socket at once.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// The largest answer accepted: the largest value a workload writes, with room for a header.
const FRAME_BYTES_MAX: usize = super::workload::VALUE_BYTES_MAX as usize + 1024 * 1024;
/// How long closing the session may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A session on one socket.
pub struct LeanLink {
    read: OwnedReadHalf,
    write: OwnedWriteHalf,
    /// Bytes read and not yet consumed, from `start`.
    buf: Vec<u8>,
    start: usize,
    /// Requests encoded and not yet written, framed.
    out: Vec<u8>,
    next_xid: i32,
    /// Requests written or encoded, oldest first: ZooKeeper answers a session in order.
    pending: VecDeque<Pending>,
    /// Watches left, by path: resolved when an event for the path arrives.
    watches: HashMap<String, Vec<oneshot::Sender<()>>>,
    /// Whether watches are kept in `watches` (else only counted as their events come).
    tracks_watches: bool,
    /// Watch events received.
    events: u64,
    /// Why the socket broke, once it has: every request still pending then fails.
    broken: Option<String>,
}

struct Pending {
    xid: i32,
    op: OpCode,
    /// The path whose watch the request leaves, if it asks for one.
    watch: Option<String>,
}

/// A request's answer, as the session counts it.
pub struct Answer {
    pub result: Result<(), zk::Error>,
    /// Resolves when the watch the request left fires (when it asked for one and succeeded).
    pub watch: Option<(String, oneshot::Receiver<()>)>,
}

impl LeanLink {
    /// Connects and opens a session with `timeout`.
    pub async fn connect(server: &str, timeout: Duration) -> anyhow::Result<LeanLink> {
        let stream = TcpStream::connect(server)
            .await
            .with_context(|| format!("connecting to {server}"))?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        let mut link = LeanLink {
            read,
            write,
            buf: Vec::with_capacity(READ_CHUNK_BYTES),
            start: 0,
            out: Vec::new(),
            next_xid: 1,
            pending: VecDeque::new(),
            watches: HashMap::new(),
            tracks_watches: true,
            events: 0,
            broken: None,
        };
        let mut w = Writer::new();
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
            session_id: 0,
            password: vec![0; 16],
            read_only: Some(false),
        }
        .encode(&mut w);
        link.write
            .write_all(&frame::encode_frame(w.as_bytes()))
            .await?;
        let payload = link
            .next_frame()
            .await?
            .context("the server closed the connection during the handshake")?;
        let answer = ConnectResponse::decode(&mut Reader::new(&payload))
            .map_err(|e| anyhow::anyhow!("unreadable handshake answer: {e}"))?;
        ensure!(
            answer.session_id != 0,
            "the server refused the session (session id 0)"
        );
        Ok(link)
    }

    /// Encodes a request; it leaves at the next [`LeanLink::flush`].
    pub fn send(&mut self, request: &Request) {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.checked_add(1).unwrap_or(1);
        let payload = request.encode_frame(xid);
        self.out
            .extend_from_slice(&(payload.len() as u32).to_be_bytes());
        self.out.extend_from_slice(&payload);
        let op = request.op();
        let watch = match request {
            Request::GetData(r) | Request::Exists(r) | Request::GetChildren(r)
                if r.watch && self.tracks_watches =>
            {
                Some(r.path.clone())
            }
            _ => None,
        };
        self.pending.push_back(Pending { xid, op, watch });
    }

    /// Writes the requests encoded since the last flush.
    pub async fn flush(&mut self) {
        if self.out.is_empty() || self.broken.is_some() {
            self.out.clear();
            return;
        }
        if let Err(e) = self.write.write_all(&self.out).await {
            self.broken = Some(format!("writing: {e}"));
        }
        self.out.clear();
    }

    /// The answer to the oldest request pending, once it comes; watch events that arrive
    /// before it resolve their watches. `None` when nothing is pending. Cancel-safe: what was
    /// read stays buffered.
    pub async fn next(&mut self) -> Option<Answer> {
        loop {
            self.pending.front()?;
            if self.broken.is_some() {
                self.pending.pop_front();
                return Some(Answer {
                    result: Err(zk::Error::ClientClosed),
                    watch: None,
                });
            }
            match self.next_frame().await {
                Ok(Some(payload)) => match self.answer(&payload) {
                    Ok(Some(answer)) => return Some(answer),
                    Ok(None) => {}
                    Err(e) => self.break_with(format!("{e:#}")),
                },
                Ok(None) => self.break_with("the server closed the connection".into()),
                Err(e) => self.break_with(format!("reading: {e:#}")),
            }
        }
    }

    /// Watches are only counted (`events`), not kept per path: for a session that leaves
    /// far more of them than it needs to tell apart.
    pub fn count_watches_only(&mut self) {
        self.tracks_watches = false;
    }

    /// Watch events received so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Reads until `n` watch events in all have arrived, with nothing pending; `false` if the
    /// connection ended first.
    pub async fn await_events(&mut self, n: u64) -> bool {
        while self.events < n {
            if self.broken.is_some() {
                return false;
            }
            match self.next_frame().await {
                Ok(Some(payload)) => {
                    if let Err(e) = self.answer(&payload) {
                        self.break_with(format!("{e:#}"));
                    }
                }
                Ok(None) => self.break_with("the server closed the connection".into()),
                Err(e) => self.break_with(format!("reading: {e:#}")),
            }
        }
        true
    }

    fn break_with(&mut self, why: String) {
        eprintln!("warden bench: a lean session's connection broke: {why}");
        self.broken = Some(why);
    }

    /// Reads one frame: an answer to the oldest request, or an event (then `None`).
    fn answer(&mut self, payload: &[u8]) -> anyhow::Result<Option<Answer>> {
        let mut r = Reader::new(payload);
        let header =
            ReplyHeader::decode(&mut r).map_err(|e| anyhow::anyhow!("unreadable answer: {e}"))?;
        if header.xid == xid::NOTIFICATION {
            let event = WatcherEvent::decode(&mut r)
                .map_err(|e| anyhow::anyhow!("unreadable event: {e}"))?;
            self.events += 1;
            for fired in self.watches.remove(&event.path).unwrap_or_default() {
                let _ = fired.send(());
            }
            return Ok(None);
        }
        let pending = self
            .pending
            .pop_front()
            .context("an answer to no request")?;
        ensure!(
            header.xid == pending.xid,
            "answer for xid {} where xid {} was next",
            header.xid,
            pending.xid
        );
        let mut code = header.err;
        if code.is_ok() && pending.op == OpCode::Multi {
            // A failed multi answers OK in its header and the error in its results.
            let Response::Multi(results) = Response::decode(OpCode::Multi, &mut r)
                .map_err(|e| anyhow::anyhow!("unreadable multi answer: {e}"))?
            else {
                bail!("a multi answered with another shape");
            };
            if let Some(failed) = results.iter().find_map(|result| match result {
                OpResult::Error(code)
                    if !code.is_ok() && *code != ErrorCode::RUNTIME_INCONSISTENCY =>
                {
                    Some(*code)
                }
                _ => None,
            }) {
                code = failed;
            }
        }
        if !code.is_ok() {
            return Ok(Some(Answer {
                result: Err(server_error(code)),
                watch: None,
            }));
        }
        let watch = pending.watch.map(|path| {
            let (fire, fired) = oneshot::channel();
            let waiting = self.watches.entry(path.clone()).or_default();
            // A session keeps one watch per path and drops the others at once: without
            // this, reads of a path that never changes would pile up senders.
            waiting.retain(|w| !w.is_closed());
            waiting.push(fire);
            (path, fired)
        });
        Ok(Some(Answer {
            result: Ok(()),
            watch,
        }))
    }

    /// The next whole frame's payload; `None` at the end of the stream.
    async fn next_frame(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            if let Some((payload, consumed)) =
                frame::split_frame(&self.buf[self.start..], FRAME_BYTES_MAX)
                    .map_err(|e| anyhow::anyhow!("bad frame: {e}"))?
            {
                let payload = payload.to_vec();
                self.start += consumed;
                return Ok(Some(payload));
            }
            if self.start == self.buf.len() {
                self.buf.clear();
                self.start = 0;
            } else if self.start > READ_CHUNK_BYTES {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            self.buf.reserve(READ_CHUNK_BYTES);
            if self.read.read_buf(&mut self.buf).await? == 0 {
                return Ok(None);
            }
        }
    }

    /// Closes the session (closeSession, answered or not within a bound).
    pub async fn close(mut self) {
        if self.broken.is_some() {
            return;
        }
        self.pending.clear();
        self.send(&Request::CloseSession);
        self.flush().await;
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.next()).await;
    }
}

/// A server's error code as the independent client names it, so that both drivers report
/// errors alike.
fn server_error(code: ErrorCode) -> zk::Error {
    use zk::Error as E;
    match code {
        ErrorCode::NO_NODE => E::NoNode,
        ErrorCode::NO_AUTH => E::NoAuth,
        ErrorCode::BAD_VERSION => E::BadVersion,
        ErrorCode::NO_CHILDREN_FOR_EPHEMERALS => E::NoChildrenForEphemerals,
        ErrorCode::NODE_EXISTS => E::NodeExists,
        ErrorCode::NOT_EMPTY => E::NotEmpty,
        ErrorCode::SESSION_EXPIRED => E::SessionExpired,
        ErrorCode::INVALID_ACL => E::InvalidAcl,
        ErrorCode::AUTH_FAILED => E::AuthFailed,
        ErrorCode::SESSION_MOVED => E::SessionMoved,
        ErrorCode::NOT_READ_ONLY => E::NotReadOnly,
        ErrorCode::NO_WATCHER => E::NoWatcher,
        ErrorCode::QUOTA_EXCEEDED => E::QuotaExceeded,
        ErrorCode::THROTTLED_OP => E::Throttled,
        ErrorCode::MARSHALLING_ERROR => E::MarshallingError,
        ErrorCode::UNIMPLEMENTED => E::Unimplemented,
        ErrorCode::CONNECTION_LOSS => E::ConnectionLoss,
        ErrorCode::RECONFIG_DISABLED => E::ReconfigDisabled,
        ErrorCode::RUNTIME_INCONSISTENCY => E::RuntimeInconsistent,
        other => E::UnexpectedErrorCode(other.0),
    }
}
