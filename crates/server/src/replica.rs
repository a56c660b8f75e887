//! The one owner of this server's copy of the state: the tree (through [`State`]), the watches
//! of this server's clients, and the clients themselves. Committed transactions are applied
//! here in log order, and reads are answered here, all under one lock, so that everything a
//! client is sent (replies and watch events) is queued in the order it happened: a client
//! always sees a watch event before the data of any later change, and its replies in the order
//! of its requests.
//!
//! A client's writes carry an origin naming this process (node and incarnation), the
//! connection and the write's sequence number on it. Applies must meet them 1, 2, 3...
//! ([`crate::writes`]): a write a leader change lost is handed again to the next leader; a gap
//! that cannot be mended closes the connection, so the client sees ConnectionLoss and never a
//! reply out of order.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{Notify, oneshot};
use warden_proto::types::{ClientInfo, add_watch_mode, perms};
use warden_proto::{
    ConnectRequest, ConnectResponse, ErrorCode, Id, Record, ReplyHeader, Request, Response,
    WatcherEvent, Writer, response,
};
use warden_state::quota::QuotaBreach;
use warden_state::restore::LoggedOp;
use warden_state::{State, TxnKind, WatchKind, WatchRegistry, acl};

use crate::consensus::Proposal;
use crate::sessions::SessionTracker;
use crate::stats::{Answered, ClientStats, ServerStats};
use crate::writes::{self, Target, Writes};
use crate::zoo_cfg::dynamic::DynamicConfigFiles;

/// A request answered by this server alone, in the client's order.
#[derive(Debug)]
pub struct Local {
    pub xid: i32,
    pub request: Request,
    /// The identities the connection held when the request arrived.
    pub auth: Arc<[Id]>,
    pub received: Instant,
    /// Answered with this error without being run (a write the server had no room for).
    pub refused: Option<ErrorCode>,
}

/// A local request waiting for the client's earlier writes to be applied.
#[derive(Debug)]
struct Deferred {
    /// How many of the client's writes must be applied first.
    after_writes: u64,
    local: Local,
}

/// A new session's handshake, answered when its createSession is applied.
struct PendingHandshake {
    timeout_ms: i32,
    read_only: Option<bool>,
    password: Vec<u8>,
    ready: oneshot::Sender<i64>,
}

/// A client connected to this server.
pub struct Client {
    pub out: crate::outbound::Outbound,
    pub peer: SocketAddr,
    /// 0 until the handshake completes.
    pub session_id: i64,
    /// The identities the client has proven; a watch event reaches it only for a node it may
    /// READ.
    auth: Arc<[Id]>,
    pub timeout_ms: i32,
    handshake: Option<PendingHandshake>,
    /// Connected while this server had no quorum, in read-only mode: only reads are served.
    pub read_only: bool,
    writes: Writes,
    /// When each write not yet applied arrived, oldest first.
    write_times: VecDeque<Instant>,
    deferred: VecDeque<Deferred>,
    /// Woken whenever the client's outstanding requests go down.
    progress: Arc<Notify>,
    /// Woken when writes it holds may be handed to a leader.
    handoff: Arc<Notify>,
    pub stats: ClientStats,
}

impl Client {
    pub fn outstanding(&self) -> usize {
        self.writes.unapplied() as usize + self.deferred.len()
    }
}

/// Gives up a connection's writes not yet applied and closes it (ConnectionLoss for its
/// client, who cannot know their fate).
fn abandon(client: &mut Client, outstanding: &mut Outstanding) {
    let lost = client.writes.abandon();
    outstanding.down(lost as usize);
    client.handshake = None;
    client.out.close();
}

/// What wakes a connection's task.
pub struct Wakers {
    /// The client's outstanding requests went down.
    pub progress: Arc<Notify>,
    /// Writes it holds may be handed to a leader now.
    pub handoff: Arc<Notify>,
}

/// How a resumed session's handshake went.
#[derive(Debug, PartialEq, Eq)]
pub enum Resume {
    /// Attached; the answer is queued.
    Attached,
    /// Unknown session or wrong password: the "expired" answer is queued and the connection
    /// is closing.
    Expired,
    /// The client has seen a later zxid than this server has applied: refused without an
    /// answer, as ZooKeeper does, so the client tries another server.
    ClientAhead { client_zxid: i64, our_zxid: i64 },
}

pub struct Replica {
    node_id: u64,
    /// Drawn at random when the process starts: origins of an earlier process of this node
    /// never match a connection of this one.
    incarnation: u64,
    state: State,
    watches: WatchRegistry,
    clients: HashMap<u64, Client>,
    /// Session id -> the connection it is attached to here.
    attached: HashMap<i64, u64>,
    sessions: SessionTracker,
    pub stats: Arc<ServerStats>,
    /// zoo.cfg and its dynamic file, rewritten when a newer membership is applied.
    zoo_cfg: Option<DynamicConfigFiles>,
    outstanding: Outstanding,
    /// Watches one session may hold (`limits.watches_per_session_max`).
    watches_per_session_max: usize,
    /// Ephemerals one session may hold (`limits.ephemerals_per_session_max`).
    ephemerals_per_session_max: usize,
    quota_log: QuotaLog,
    /// The term of the last entry applied: writes in flight to an earlier term are settled
    /// when it rises ([`crate::writes`]).
    applied_term: u64,
    /// While mirroring a ZooKeeper ensemble: the sessions heard from since the last PING
    /// reply to its leader (crate::observer), which keeps them alive there.
    mirror_touched: HashSet<i64>,
}

/// ZooKeeper's `RateLogger` for quota breaches: a line is logged when it differs from the
/// last one; the same line again is counted, and the count logged once `QUOTA_LOG_INTERVAL`
/// has passed or another line comes, so a client hammering a full quota costs one line per
/// interval.
#[derive(Debug, Default)]
struct QuotaLog {
    last: Option<(String, Instant)>,
    repeats: u64,
}

/// ZooKeeper's `RateLogger.LOG_INTERVAL`.
const QUOTA_LOG_INTERVAL: Duration = Duration::from_millis(100);

impl QuotaLog {
    fn breached(&mut self, breach: &QuotaBreach, now: Instant) {
        let line = breach.to_string();
        if let Some((last, at)) = &self.last
            && *last == line
        {
            self.repeats += 1;
            if now.duration_since(*at) >= QUOTA_LOG_INTERVAL {
                self.flush();
                self.last = Some((line, now));
            }
            return;
        }
        self.flush();
        tracing::warn!("{line}");
        self.last = Some((line, now));
    }

    /// Logs how often the last line came again since it was logged.
    fn flush(&mut self) {
        if let Some((last, _)) = &self.last
            && self.repeats > 0
        {
            tracing::warn!("[{} times] {last}", self.repeats);
        }
        self.repeats = 0;
    }
}

/// Requests received on this server and not answered yet, over every connection: writes in
/// flight and the local requests waiting behind them (`Client::outstanding`). At the bound
/// (`limits.outstanding_requests_max`, ZooKeeper's globalOutstandingLimit) no connection reads
/// another request until some are answered, as ZooKeeper stops reading from its sockets.
struct Outstanding {
    total: usize,
    max: usize,
    /// Woken when the total falls below `max` again.
    below_max: Arc<Notify>,
    /// When the bound was last reported in the log (at most once a minute).
    reported: Option<Instant>,
}

impl Outstanding {
    fn up(&mut self, n: usize) {
        self.total += n;
        if self.total >= self.max && self.total - n < self.max {
            let now = Instant::now();
            if self
                .reported
                .is_none_or(|at| now - at >= OUTSTANDING_REPORT_INTERVAL)
            {
                self.reported = Some(now);
                tracing::warn!(
                    outstanding = self.total,
                    "limits.outstanding_requests_max reached: no client's next request is read \
                     until some are answered"
                );
            }
        }
    }

    fn down(&mut self, n: usize) {
        let before = self.total;
        self.total = self.total.saturating_sub(n);
        if before >= self.max && self.total < self.max {
            self.below_max.notify_waiters();
        }
    }
}

/// How often the outstanding bound may be reported in the log.
const OUTSTANDING_REPORT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// Milliseconds since the Unix epoch: the time the leader stamps into a transaction.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn reply_frame(xid: i32, zxid: i64, err: ErrorCode, body: &Response) -> Vec<u8> {
    Response::encode_frame(&ReplyHeader { xid, zxid, err }, body)
}

impl Replica {
    pub fn new(node_id: u64, incarnation: u64, state: State) -> Replica {
        Replica {
            node_id,
            incarnation,
            state,
            watches: WatchRegistry::default(),
            clients: HashMap::new(),
            attached: HashMap::new(),
            sessions: SessionTracker::default(),
            stats: Arc::new(ServerStats::default()),
            zoo_cfg: None,
            outstanding: Outstanding {
                total: 0,
                max: usize::MAX,
                below_max: Arc::new(Notify::new()),
                reported: None,
            },
            watches_per_session_max: usize::MAX,
            ephemerals_per_session_max: usize::MAX,
            quota_log: QuotaLog::default(),
            applied_term: 0,
            mirror_touched: HashSet::new(),
        }
    }

    /// Enforces the server-wide outstanding bound and the watches and ephemerals a session
    /// may hold (without this, none is bounded).
    pub fn limit(&mut self, limits: &crate::config::Limits) {
        self.outstanding.max = limits.outstanding_requests_max as usize;
        self.watches_per_session_max = limits.watches_per_session_max as usize;
        self.ephemerals_per_session_max = limits.ephemerals_per_session_max as usize;
    }

    /// Whether the ephemerals `request` creates fit within `limits.ephemerals_per_session_max`
    /// beside those the session holds now. ZooKeeper has no such bound, so no error of its
    /// own: a request that would go over is refused as a whole with BadArguments, and the log
    /// says why. Checked as the request arrives, so creates of the session still in flight
    /// are not counted: they can take it beyond the bound by at most
    /// `limits.outstanding_requests_per_session_max`.
    pub fn may_hold_ephemerals(&self, session_id: i64, request: &Request) -> bool {
        let new = ephemeral_creates(request);
        if new == 0 {
            return true;
        }
        let held = self.state.tree().ephemeral_count(session_id);
        if held + new <= self.ephemerals_per_session_max {
            return true;
        }
        tracing::info!(
            session = format_args!("{session_id:#x}"),
            held,
            limit = self.ephemerals_per_session_max,
            "request refused (BadArguments): it would create more ephemerals than \
             limits.ephemerals_per_session_max"
        );
        false
    }

    /// Whether the server-wide outstanding bound is reached, and what wakes its waiters when
    /// it is not any more.
    pub fn outstanding_full(&self) -> (bool, Arc<Notify>) {
        (
            self.outstanding.total >= self.outstanding.max,
            self.outstanding.below_max.clone(),
        )
    }

    /// Requests received on this server and not answered yet.
    pub fn outstanding_total(&self) -> usize {
        self.outstanding.total
    }

    /// From now on, every newer membership applied (or installed with a snapshot) is written
    /// to zoo.cfg's dynamic config file, before the reconfig's client is answered, as
    /// ZooKeeper does; the membership applied so far is written now if it is newer.
    pub fn keep_zoo_cfg(&mut self, files: DynamicConfigFiles) {
        self.zoo_cfg = Some(files);
        self.membership_applied();
    }

    /// A membership was applied (`/zookeeper/config` rewritten): zoo.cfg follows it. Returns
    /// whether this server is still one of its members (`None` if it does not say).
    fn membership_applied(&mut self) -> Option<bool> {
        let text = self
            .state
            .tree()
            .get(warden_state::system::CONFIG)
            .and_then(|n| n.data().map(|d| String::from_utf8_lossy(d).into_owned()))?;
        match crate::cluster::membership::parse(&text) {
            Ok((members, version)) if !members.is_empty() => {
                if let Some(files) = self.zoo_cfg.as_mut() {
                    files.committed(&members, version);
                }
                Some(members.iter().any(|m| m.id == self.node_id))
            }
            Ok(_) => None,
            Err(e) => {
                tracing::error!("/zookeeper/config does not parse ({e}); zoo.cfg not updated");
                None
            }
        }
    }

    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn watches(&self) -> &WatchRegistry {
        &self.watches
    }

    /// The sessions this server tracks and their deadlines.
    pub fn session_deadlines(&self) -> impl Iterator<Item = (i64, Instant)> + '_ {
        self.sessions.deadlines()
    }

    pub fn clients(&self) -> impl Iterator<Item = &Client> {
        self.clients.values()
    }

    pub fn clients_mut(&mut self) -> impl Iterator<Item = &mut Client> {
        self.clients.values_mut()
    }

    /// Replaces the state with one loaded from a snapshot sent by the leader. Everything
    /// derived from the old state goes with it: every client is disconnected (as a ZooKeeper
    /// follower that resynchronizes drops its clients; they come back and set their watches
    /// again with the last zxid they saw, which replays what they missed), and the tracker
    /// starts over from the new session table.
    pub fn install(&mut self, state: State) {
        self.state = state;
        self.membership_applied();
        self.start_over("this server installed a snapshot from the leader");
    }

    /// After the whole state was replaced: clients are disconnected (their watches and
    /// sessions were of the old state), and the tracker follows the new session table.
    fn start_over(&mut self, why: &str) {
        self.close_all(why);
        self.watches = WatchRegistry::default();
        self.attached.clear();
        self.grant_full_timeouts(Instant::now());
    }

    /// The followed ensemble's tree replaced the state: as after installing a snapshot,
    /// everything derived from the old one goes (a ZooKeeper observer that resynchronizes
    /// drops its clients too).
    fn mirror_reset(&mut self) {
        self.close_all("this server (re)started mirroring a ZooKeeper ensemble");
        self.watches = WatchRegistry::default();
        self.attached.clear();
        self.mirror_touched.clear();
        self.grant_full_timeouts(Instant::now());
    }

    /// Closes every client connection, saying why in the log.
    pub fn close_all(&mut self, why: &str) {
        if self.clients.is_empty() {
            return;
        }
        tracing::info!(
            connections = self.clients.len(),
            "closing client connections: {why}"
        );
        let mut closed = Vec::new();
        for (connection, client) in &mut self.clients {
            // A resume that waits for the next leader to revalidate it is left to its bounded
            // wait (connection::Session::revalidate): closing it would send its client on to
            // servers that are electing too.
            let resuming = client.session_id == 0 && client.handshake.is_none();
            if !resuming {
                client.handshake = None;
                client.out.close();
                closed.push((client.session_id, *connection));
            }
        }
        // Detached now, not when each connection's task sees the close: this server must not
        // tell a leader these sessions are here (`take_touched`) once their clients may be on
        // their way to another server.
        for (session_id, connection) in closed {
            self.detach(session_id, connection);
        }
    }

    /// `connection` no longer carries `session_id` (if it did): no watch event goes to it.
    fn detach(&mut self, session_id: i64, connection: u64) {
        if session_id != 0 && self.attached.get(&session_id) == Some(&connection) {
            self.attached.remove(&session_id);
            self.watches.remove_session(session_id);
        }
    }

    /// The writes in flight lost their leader, or the channel that carried them broke: their
    /// fate is in doubt until an entry of a later term settles it ([`crate::writes`]). A new
    /// session's handshake is not kept waiting for that: its connection is closed, and its
    /// client tries again. Every connection is woken to hand on the writes it held.
    pub fn writes_in_doubt(&mut self, why: &str, now: Instant) {
        let mut handshakes = 0;
        for client in self.clients.values_mut() {
            if client.handshake.is_some() && client.writes.in_flight() {
                client.handshake = None;
                client.out.close();
                handshakes += 1;
            } else {
                client.writes.doubt(now);
            }
            client.handoff.notify_one();
        }
        if handshakes > 0 {
            tracing::info!(
                connections = handshakes,
                "closing connections whose new session is in flight: {why}"
            );
        }
    }

    /// A leader refused a write of this connection's, or dropped it from its log: it is in
    /// doubt, and settled at once if the log has already moved past its term.
    pub fn write_failed(&mut self, connection: u64, why: &str, now: Instant) {
        let applied_term = self.applied_term;
        if let Some(client) = self.clients.get_mut(&connection) {
            tracing::debug!(
                peer = %client.peer,
                session = format_args!("{:#x}", client.session_id),
                "a write was not taken: {why}"
            );
            if client.handshake.is_some() {
                client.handshake = None;
                client.out.close();
                return;
            }
            client.writes.doubt(now);
            client.writes.settle(applied_term);
            if client.writes.ready() {
                client.handoff.notify_one();
            }
        }
    }

    /// A write of this connection's could not be handed to the leader, nor can those after
    /// it: the connection is closed (ConnectionLoss for its client).
    pub fn writes_lost(&mut self, connection: u64, why: &str) {
        if let Some(client) = self.clients.get_mut(&connection) {
            tracing::info!(
                peer = %client.peer,
                session = format_args!("{:#x}", client.session_id),
                "closing a connection whose write could not be sent: {why}"
            );
            abandon(client, &mut self.outstanding);
        }
    }

    /// Closes the connections whose writes have been in doubt for longer than `bound`: their
    /// fate may never be known here, and their clients are better told ConnectionLoss.
    pub fn close_doubtful(&mut self, now: Instant, bound: Duration) {
        for client in self.clients.values_mut() {
            if client.writes.doubtful_for(now, bound) {
                tracing::info!(
                    peer = %client.peer,
                    session = format_args!("{:#x}", client.session_id),
                    "closing a connection whose writes stayed in doubt for {bound:?}"
                );
                abandon(client, &mut self.outstanding);
            }
        }
    }

    /// The entry about to be applied is of `term`: when the term rises, writes in flight to
    /// earlier terms that were not applied never will be, and their connections hand them to
    /// the new leader.
    pub fn entering_term(&mut self, term: u64) {
        if term <= self.applied_term {
            return;
        }
        self.applied_term = term;
        for client in self.clients.values_mut() {
            let lost = client.writes.settle(term);
            if lost > 0 {
                tracing::info!(
                    peer = %client.peer,
                    session = format_args!("{:#x}", client.session_id),
                    writes = lost,
                    term,
                    "writes the old leader did not commit go to the new one"
                );
            }
            if client.writes.ready() {
                client.handoff.notify_one();
            }
        }
    }

    // ---- clients -------------------------------------------------------------------------

    pub fn connect(
        &mut self,
        connection: u64,
        out: crate::outbound::Outbound,
        peer: SocketAddr,
        auth: Arc<[Id]>,
        read_only: bool,
    ) -> Wakers {
        let wakers = Wakers {
            progress: Arc::new(Notify::new()),
            handoff: Arc::new(Notify::new()),
        };
        self.clients.insert(
            connection,
            Client {
                out,
                peer,
                session_id: 0,
                auth,
                timeout_ms: 0,
                handshake: None,
                read_only,
                writes: Writes::default(),
                write_times: VecDeque::new(),
                deferred: VecDeque::new(),
                progress: wakers.progress.clone(),
                handoff: wakers.handoff.clone(),
                stats: ClientStats::new(),
            },
        );
        wakers
    }

    /// The connection is gone. Its session lives on until it expires; its watches go, as in
    /// ZooKeeper (the client sets them again when it reconnects).
    pub fn disconnect(&mut self, connection: u64) {
        let Some(client) = self.clients.remove(&connection) else {
            return;
        };
        self.outstanding.down(client.outstanding());
        self.detach(client.session_id, connection);
    }

    pub fn outstanding(&self, connection: u64) -> usize {
        self.clients.get(&connection).map_or(0, Client::outstanding)
    }

    /// A new session is being created for `connection`; its answer goes out when the
    /// createSession transaction is applied.
    pub fn await_session(
        &mut self,
        connection: u64,
        timeout_ms: i32,
        read_only: Option<bool>,
        password: Vec<u8>,
    ) -> oneshot::Receiver<i64> {
        let (ready, rx) = oneshot::channel();
        if let Some(client) = self.clients.get_mut(&connection) {
            client.handshake = Some(PendingHandshake {
                timeout_ms,
                read_only,
                password,
                ready,
            });
        }
        rx
    }

    /// Attaches an existing session to `connection`, if the id and password match.
    pub fn resume_session(
        &mut self,
        connection: u64,
        request: &ConnectRequest,
        timeout_ms: i32,
        now: Instant,
    ) -> Resume {
        self.stats.sessions_resumed.fetch_add(1, Ordering::Relaxed);
        let our_zxid = self.state.last_zxid();
        if request.last_zxid_seen > our_zxid {
            return Resume::ClientAhead {
                client_zxid: request.last_zxid_seen,
                our_zxid,
            };
        }
        let id = request.session_id;
        let valid = self
            .state
            .session(id)
            .is_some_and(|s| s.password == request.password)
            && !self.sessions.is_closing(id);
        let Some(client) = self.clients.get_mut(&connection) else {
            return Resume::Expired;
        };
        let read_only = request.read_only.map(|_| client.read_only);
        if !valid {
            client.out.send(connect_frame(&ConnectResponse {
                protocol_version: 0,
                timeout_ms: 0,
                session_id: 0,
                password: vec![0; 16],
                read_only,
            }));
            client.out.close();
            return Resume::Expired;
        }
        client.session_id = id;
        client.timeout_ms = timeout_ms;
        client.out.send(connect_frame(&ConnectResponse {
            protocol_version: 0,
            timeout_ms,
            session_id: id,
            password: request.password.clone(),
            read_only,
        }));
        // A session lives on one connection: an older one still open is closed.
        if let Some(old) = self.attached.insert(id, connection)
            && old != connection
            && let Some(stale) = self.clients.get_mut(&old)
        {
            tracing::info!(
                session = format_args!("{id:#x}"),
                "closing the stale connection of a resumed session"
            );
            stale.session_id = 0;
            stale.out.close();
            self.watches.remove_session(id);
        }
        self.sessions.touch(id, now);
        Resume::Attached
    }

    /// A read-only session of this server alone (ZooKeeper's read-only mode creates them
    /// without a quorum): it is answered at once and lives as long as its connection.
    pub fn attach_local_session(
        &mut self,
        connection: u64,
        session_id: i64,
        timeout_ms: i32,
        password: Vec<u8>,
    ) {
        let Some(client) = self.clients.get_mut(&connection) else {
            return;
        };
        client.session_id = session_id;
        client.timeout_ms = timeout_ms;
        client.read_only = true;
        client.out.send(connect_frame(&ConnectResponse {
            protocol_version: 0,
            timeout_ms,
            session_id,
            password,
            read_only: Some(true),
        }));
        self.attached.insert(session_id, connection);
    }

    /// The quorum is back: read-only clients are closed, so that they reconnect to a server
    /// that serves writes (as ZooKeeper's read-only server does when it rejoins).
    pub fn close_read_only(&mut self) {
        for client in self.clients.values().filter(|c| c.read_only) {
            client.out.close();
        }
    }

    /// The client proved more identities (`addauth`).
    pub fn set_auth(&mut self, connection: u64, auth: Arc<[Id]>) {
        if let Some(client) = self.clients.get_mut(&connection) {
            client.auth = auth;
        }
    }

    /// The client was heard from: its session's expiry moves back.
    pub fn touch(&mut self, session_id: i64, now: Instant) {
        self.sessions.touch(session_id, now);
        self.mirror_touch(session_id);
    }

    /// Server `from` reported these sessions alive to the leader of `term`.
    pub fn touch_reported(&mut self, sessions: &[i64], from: u64, now: Instant, term: u64) {
        for id in sessions {
            self.sessions.touch_reported(*id, from, now, term);
            self.mirror_touch(*id);
        }
    }

    fn mirror_touch(&mut self, session_id: i64) {
        if self.state.mirroring() && self.state.session(session_id).is_some() {
            self.mirror_touched.insert(session_id);
        }
    }

    /// The mirrored sessions heard from since the last call, with their timeouts: what a
    /// ZooKeeper observer tells its leader in a PING reply (`Learner.ping`).
    pub fn take_mirror_touches(&mut self) -> Vec<(i64, i32)> {
        let touched: Vec<i64> = self.mirror_touched.drain().collect();
        touched
            .into_iter()
            .filter_map(|id| self.state.session(id).map(|s| (id, s.timeout_ms)))
            .collect()
    }

    /// Sessions this server's clients touched since the last report to the leader, of those
    /// still attached here. The report also tells a new leader which server each session is
    /// on (its owner, for SessionMoved); a session whose connection here is gone or closing
    /// may already be on another server, and claiming it for this one would get its writes
    /// there refused.
    pub fn take_touched(&mut self) -> Vec<i64> {
        let mut touched = self.sessions.take_touched();
        touched.retain(|id| self.attached.contains_key(id));
        touched
    }

    /// The session's client is now on `server` (the record of the leader of `term`, for
    /// SessionMoved).
    pub fn claim_session(&mut self, session_id: i64, server: u64, term: u64) {
        self.sessions.claim(session_id, server, term);
    }

    /// On the leader: whether a write of the session, for `term`, may come from `server`.
    pub fn session_owned_by(&mut self, session_id: i64, server: u64, term: u64) -> bool {
        session_id == 0 || self.sessions.owned_by(session_id, server, term)
    }

    /// A write of this connection's, built by `build` from its sequence number and this
    /// process's incarnation, is kept until it is applied; local requests after it wait for
    /// it. Returns the writes to hand to `target` now, in order (this one and any held
    /// before it; none while earlier writes are in doubt), or `None` if the connection is
    /// gone.
    pub fn write(
        &mut self,
        connection: u64,
        received: Instant,
        build: impl FnOnce(u64, u64) -> Proposal,
        target: Option<Target>,
    ) -> Option<Vec<Proposal>> {
        let target = self.current(target);
        let client = self.clients.get_mut(&connection)?;
        let seq = client.writes.number();
        client.writes.keep(build(seq, self.incarnation));
        self.outstanding.up(1);
        client.write_times.push_back(received);
        client.stats.received();
        self.stats.received();
        Some(target.map_or_else(Vec::new, |t| client.writes.take_for(t)))
    }

    /// `target`, unless the log has already moved past its term (this server's view of the
    /// leader can lag the entries it applies by a moment): writes wait for the next leader
    /// then, rather than go to one that can only refuse them.
    fn current(&self, target: Option<Target>) -> Option<Target> {
        target.filter(|t| t.term >= self.applied_term)
    }

    /// The writes of this connection's to hand to `target` now (held ones, or ones handed
    /// again after their leader lost them), in order.
    pub fn writes_for(&mut self, connection: u64, target: Target) -> Vec<Proposal> {
        let Some(target) = self.current(Some(target)) else {
            return Vec::new();
        };
        self.clients
            .get_mut(&connection)
            .map_or_else(Vec::new, |c| c.writes.take_for(target))
    }

    /// Whether this connection holds writes not yet handed to a leader.
    pub fn writes_waiting(&self, connection: u64) -> bool {
        self.clients
            .get(&connection)
            .is_some_and(|c| c.writes.waiting())
    }

    /// A request this server answers alone: now if the client has no write in flight, else
    /// after its earlier writes are applied.
    pub fn local(&mut self, connection: u64, local: Local) {
        let Some(client) = self.clients.get_mut(&connection) else {
            return;
        };
        client.stats.received();
        self.stats.received();
        if client.writes.unapplied() == 0 && client.deferred.is_empty() {
            let session_id = client.session_id;
            let out = client.out.clone();
            self.execute(connection, session_id, &out, local);
        } else {
            client.deferred.push_back(Deferred {
                after_writes: client.writes.numbered(),
                local,
            });
            self.outstanding.up(1);
        }
    }

    /// Answers the local requests whose earlier writes are now applied.
    fn run_deferred(&mut self, connection: u64) {
        loop {
            let Some(client) = self.clients.get_mut(&connection) else {
                return;
            };
            match client.deferred.front() {
                Some(d) if d.after_writes <= client.writes.applied_count() => {}
                _ => return,
            }
            let deferred = client.deferred.pop_front().expect("front exists");
            self.outstanding.down(1);
            let session_id = client.session_id;
            let out = client.out.clone();
            self.execute(connection, session_id, &out, deferred.local);
        }
    }

    /// Whether `session_id` may add the watches `wanted` (those it holds already are not
    /// new) within `limits.watches_per_session_max`. A read that would go over is refused as
    /// a whole with BadArguments (ZooKeeper has no such bound, so no error of its own for it),
    /// and the log says why.
    fn may_watch(&self, session_id: i64, wanted: &[(&str, WatchKind)]) -> bool {
        let new = wanted
            .iter()
            .filter(|(path, kind)| !self.watches.has(session_id, path, *kind))
            .count();
        let held = self.watches.count_of(session_id);
        if new == 0 || held + new <= self.watches_per_session_max {
            return true;
        }
        tracing::info!(
            session = format_args!("{session_id:#x}"),
            held,
            limit = self.watches_per_session_max,
            "request refused (BadArguments): it would set more watches than \
             limits.watches_per_session_max"
        );
        false
    }

    /// Whether a SetWatches request fits within `limits.watches_per_session_max`, counting
    /// every watch it names (logs when not).
    fn may_set_watches(&self, session_id: i64, request: &Request) -> bool {
        let named = match request {
            Request::SetWatches(r) => {
                r.data_watches.len() + r.exist_watches.len() + r.child_watches.len()
            }
            Request::SetWatches2(r) => {
                r.data_watches.len()
                    + r.exist_watches.len()
                    + r.child_watches.len()
                    + r.persistent_watches.len()
                    + r.persistent_recursive_watches.len()
            }
            _ => 0,
        };
        let held = self.watches.count_of(session_id);
        if held + named <= self.watches_per_session_max {
            return true;
        }
        tracing::warn!(
            session = format_args!("{session_id:#x}"),
            named,
            held,
            limit = self.watches_per_session_max,
            "closing a connection whose SetWatches names more watches than \
             limits.watches_per_session_max"
        );
        false
    }

    fn execute(
        &mut self,
        connection: u64,
        session_id: i64,
        out: &crate::outbound::Outbound,
        local: Local,
    ) {
        let zxid = self.state.last_zxid();
        let (err, body) = match &local.request {
            _ if local.refused.is_some() => (local.refused.expect("checked"), Response::Empty),
            Request::Ping => (ErrorCode::OK, Response::Empty),
            Request::Sync(r) => (
                ErrorCode::OK,
                Response::Sync {
                    path: r.path.clone(),
                },
            ),
            Request::SetWatches(_) | Request::SetWatches2(_)
                if !self.may_set_watches(session_id, &local.request) =>
            {
                // The watches cannot all be set, and a client takes SetWatches' answer for
                // done whatever it says: the connection is closed rather than leave the
                // client believing in watches that are not there (`may_set_watches` logs).
                out.close();
                return;
            }
            Request::SetWatches(r) => {
                let missed = self.watches.set_watches(
                    self.state.tree(),
                    session_id,
                    r.relative_zxid,
                    &r.data_watches,
                    &r.exist_watches,
                    &r.child_watches,
                    &[],
                    &[],
                );
                notify_all(out, &missed);
                (ErrorCode::OK, Response::Empty)
            }
            Request::SetWatches2(r) => {
                let missed = self.watches.set_watches(
                    self.state.tree(),
                    session_id,
                    r.relative_zxid,
                    &r.data_watches,
                    &r.exist_watches,
                    &r.child_watches,
                    &r.persistent_watches,
                    &r.persistent_recursive_watches,
                );
                notify_all(out, &missed);
                (ErrorCode::OK, Response::Empty)
            }
            Request::AddWatch(r) => {
                let kind = match r.mode {
                    add_watch_mode::PERSISTENT => Some(WatchKind::Persistent),
                    add_watch_mode::PERSISTENT_RECURSIVE => Some(WatchKind::PersistentRecursive),
                    _ => None,
                };
                match kind {
                    Some(kind) if warden_state::path::validate(&r.path).is_ok() => {
                        if self.may_watch(session_id, &[(r.path.as_str(), kind)]) {
                            self.watches.add(session_id, &r.path, kind);
                            (ErrorCode::OK, Response::Code(ErrorCode::OK))
                        } else {
                            (ErrorCode::BAD_ARGUMENTS, Response::Empty)
                        }
                    }
                    _ => (ErrorCode::BAD_ARGUMENTS, Response::Empty),
                }
            }
            Request::CheckWatches(r) => {
                if self.watches.contains(session_id, &r.path, r.watcher_type) {
                    (ErrorCode::OK, Response::Empty)
                } else {
                    (ErrorCode::NO_WATCHER, Response::Empty)
                }
            }
            Request::RemoveWatches(r) => {
                if self.watches.remove(session_id, &r.path, r.watcher_type) {
                    (ErrorCode::OK, Response::Empty)
                } else {
                    (ErrorCode::NO_WATCHER, Response::Empty)
                }
            }
            Request::WhoAmI => (
                ErrorCode::OK,
                Response::WhoAmI {
                    clients: who_am_i(&local.auth),
                },
            ),
            read => {
                let outcome = self.state.read(session_id, &local.auth, read);
                let wanted: Vec<(&str, WatchKind)> = outcome
                    .watches
                    .iter()
                    .map(|w| (w.path.as_str(), w.kind))
                    .collect();
                if self.may_watch(session_id, &wanted) {
                    for w in &outcome.watches {
                        self.watches.add(session_id, &w.path, w.kind);
                    }
                    if outcome.err == ErrorCode::OK {
                        self.stats.reads_per_namespace.read(read, &outcome.body);
                    }
                    (outcome.err, outcome.body)
                } else {
                    (ErrorCode::BAD_ARGUMENTS, Response::Empty)
                }
            }
        };
        let reply = reply_frame(local.xid, zxid, err, &body);
        let latency = local.received.elapsed();
        self.stats.sent(Answered::Read, latency, reply.len());
        out.send(reply);
        if let Some(client) = self.clients.get_mut(&connection) {
            client.stats.sent(latency, zxid, local.request.op() as i32);
            client.progress.notify_one();
        }
    }

    // ---- applying committed transactions ---------------------------------------------------

    /// Applies one committed transaction: watch events first, then the reply to the client
    /// that asked, if it is connected here. Returns the transaction's zxid.
    pub fn apply(&mut self, proposal: &Proposal, now: Instant) -> i64 {
        let txn = &proposal.txn;
        let outcome = self.state.apply(txn);
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        if let TxnKind::Request(request) = &txn.kind
            && outcome.err == ErrorCode::OK
        {
            self.stats.writes_per_namespace.write(request);
        }
        for trigger in &outcome.triggers {
            let deliveries = self.watches.fire(trigger);
            self.stats.watchers_fired(trigger.event, deliveries.len());
            // The watch is used up either way; the event goes only to a client that may READ
            // the node (ZooKeeper 3.9.2+, CVE-2024-23944).
            for delivery in deliveries {
                if let Some(client) = self
                    .attached
                    .get(&delivery.session_id)
                    .and_then(|c| self.clients.get(c))
                    && acl::permits(&trigger.acl, perms::READ, &client.auth)
                {
                    client
                        .out
                        .send(response::encode_notification(outcome.zxid, &delivery.event));
                }
            }
        }
        let local = proposal
            .origin
            .filter(|o| o.node == self.node_id && o.incarnation == self.incarnation)
            .filter(|o| self.next_write_in_order(o.connection, o.seq))
            .map(|o| (o.connection, o.xid));
        // Every replica meets the same breaches; the one answering the client reports them,
        // as ZooKeeper's leader does in its prep step, so each is logged and counted once.
        if local.is_some() {
            for breach in &outcome.quota_breaches {
                self.quota_log.breached(breach, now);
                if breach.hard
                    && let Some(namespace) = &breach.namespace
                {
                    self.stats.quota_exceeded.count(namespace);
                }
            }
        }
        match &txn.kind {
            TxnKind::CreateSession { timeout_ms, .. } => {
                if let Some(id) = outcome.created_session {
                    self.sessions.set(id, *timeout_ms, now);
                    if let Some(origin) = proposal.origin {
                        self.sessions.claim(id, origin.node, self.applied_term);
                    }
                    if let Some((connection, _)) = local {
                        self.session_created(connection, id);
                    }
                }
            }
            TxnKind::CloseSession => {
                // The client that asked is answered, then disconnected with the session.
                if let Some((connection, xid)) = local {
                    self.write_applied(connection, xid, &outcome);
                    if let Some(client) = self.clients.get(&connection) {
                        client.out.close();
                    }
                }
                self.session_closed(txn.session_id);
            }
            TxnKind::Refused { err } if *err == ErrorCode::SESSION_MOVED => {
                // ZooKeeper tears the connection down rather than answer (ZOOKEEPER-710): the
                // client has moved on, and this connection is a leftover.
                if let Some((connection, _)) = local
                    && let Some(client) = self.clients.get_mut(&connection)
                {
                    client.write_times.pop_front();
                    client.out.close();
                }
            }
            TxnKind::Reconfigured { .. } => {
                let member = self.membership_applied();
                if let Some((connection, xid)) = local {
                    self.write_applied(connection, xid, &outcome);
                }
                if member == Some(false) {
                    // As a ZooKeeper server that a reconfig removes: its clients are answered,
                    // then sent on in the same step, before they can send it anything else.
                    self.close_all("a reconfig removed this server from the ensemble");
                }
            }
            TxnKind::Request(_) | TxnKind::Refused { .. } => {
                if let Some((connection, xid)) = local {
                    self.write_applied(connection, xid, &outcome);
                }
            }
            TxnKind::DeleteContainer { .. } => {}
            TxnKind::Restore { .. } => {
                tracing::info!(
                    znodes = self.state.tree().len(),
                    sessions = self.state.sessions().count(),
                    zxid = format_args!("{:#x}", outcome.zxid),
                    "the state was replaced by a restored snapshot"
                );
                self.start_over("the state was replaced by a restored snapshot");
            }
            TxnKind::MirrorReset(_) => self.mirror_reset(),
            TxnKind::Mirrored(m) => match &m.txn.op {
                LoggedOp::CreateSession { timeout_ms } => {
                    self.sessions.set(m.txn.session_id, *timeout_ms, now)
                }
                LoggedOp::CloseSession { .. } => self.session_closed(m.txn.session_id),
                _ => {}
            },
            TxnKind::Promote => {
                // From now on Warden expires sessions: each gets a full timeout first, as
                // from a new leader.
                self.mirror_touched.clear();
                self.grant_full_timeouts(now);
                // Read-only sessions taken while mirroring were this server's alone.
                self.close_read_only();
            }
        }
        outcome.zxid
    }

    /// Whether `seq` is the connection's next write to be applied; counts it if so. Anything
    /// else means an earlier write was lost: the connection is closed (its writes may not be
    /// answered out of order) and the entry answers nobody.
    fn next_write_in_order(&mut self, connection: u64, seq: u64) -> bool {
        let Some(client) = self.clients.get_mut(&connection) else {
            return false;
        };
        match client.writes.applied(seq) {
            writes::Applied::InOrder => {
                self.outstanding.down(1);
                if client.writes.ready() {
                    // Held behind the writes in flight, which are all in now.
                    client.handoff.notify_one();
                }
                true
            }
            writes::Applied::OutOfOrder { expected } => {
                tracing::warn!(
                    peer = %client.peer,
                    expected,
                    applied = seq,
                    "a write of this connection was lost; closing it"
                );
                abandon(client, &mut self.outstanding);
                false
            }
            writes::Applied::Stale => false,
        }
    }

    fn session_created(&mut self, connection: u64, session_id: i64) {
        let Some(client) = self.clients.get_mut(&connection) else {
            return;
        };
        client.write_times.pop_front();
        let Some(handshake) = client.handshake.take() else {
            return;
        };
        client.session_id = session_id;
        client.timeout_ms = handshake.timeout_ms;
        client.out.send(connect_frame(&ConnectResponse {
            protocol_version: 0,
            timeout_ms: handshake.timeout_ms,
            session_id,
            password: handshake.password,
            read_only: handshake.read_only.map(|_| false),
        }));
        self.attached.insert(session_id, connection);
        let _ = handshake.ready.send(session_id);
    }

    /// A session ended, by its client's closeSession or by expiry: its watches go, its
    /// client is answered (if it asked) and disconnected.
    fn session_closed(&mut self, session_id: i64) {
        self.sessions.remove(session_id);
        self.watches.remove_session(session_id);
        if let Some(connection) = self.attached.remove(&session_id)
            && let Some(client) = self.clients.get_mut(&connection)
        {
            client.session_id = 0;
            client.out.close();
        }
    }

    fn write_applied(&mut self, connection: u64, xid: i32, outcome: &warden_state::Outcome) {
        let Some(client) = self.clients.get_mut(&connection) else {
            return;
        };
        let received = client.write_times.pop_front();
        let reply = reply_frame(xid, outcome.zxid, outcome.err, &outcome.body);
        if let Some(received) = received {
            let latency = received.elapsed();
            client.stats.sent(latency, outcome.zxid, 0);
            self.stats.sent(Answered::Write, latency, reply.len());
        }
        client.out.send(reply);
        client.progress.notify_one();
        self.run_deferred(connection);
    }

    // ---- leader duties -------------------------------------------------------------------

    /// Gives every live session a full timeout from now: after a restart or a change of
    /// leader, no session is expired for silence it could not help.
    pub fn grant_full_timeouts(&mut self, now: Instant) {
        let sessions = self.state.sessions().map(|(id, s)| (id, s.timeout_ms));
        self.sessions.grant_full_timeouts(sessions, now);
    }

    /// Sessions whose deadline passed and whose close is not yet proposed; they are marked
    /// as closing.
    pub fn take_expired(&mut self, now: Instant) -> Vec<i64> {
        self.sessions.take_expired(now)
    }
}

fn connect_frame(response: &ConnectResponse) -> Vec<u8> {
    let mut w = Writer::new();
    response.encode(&mut w);
    w.into_bytes()
}

fn notify_all(out: &crate::outbound::Outbound, events: &[WatcherEvent]) {
    // Events found missing at setWatches time carry zxid -1, as ZooKeeper sends them.
    for event in events {
        out.send(response::encode_notification(-1, event));
    }
}

/// whoAmI's answer: the identities the client authenticated as, in the order added, then the
/// address it connects from (as ZooKeeper lists them).
fn who_am_i(auth: &[Id]) -> Vec<ClientInfo> {
    let info = |id: &Id| ClientInfo {
        auth_scheme: id.scheme.clone(),
        user: match id.scheme.as_str() {
            "digest" => id.id.split(':').next().unwrap_or_default().to_owned(),
            _ => id.id.clone(),
        },
    };
    let (ip, others): (Vec<&Id>, Vec<&Id>) = auth.iter().partition(|id| id.scheme == "ip");
    others.into_iter().chain(ip).map(info).collect()
}

/// How many ephemeral znodes `request` creates (CreateMode EPHEMERAL and
/// EPHEMERAL_SEQUENTIAL, in a multi too): what `limits.ephemerals_per_session_max` counts. Told
/// from the request alone, so a connection asks the replica (and takes its lock) only for a
/// request that creates some.
pub fn ephemeral_creates(request: &Request) -> usize {
    match request {
        Request::Create(c) | Request::Create2(c) | Request::CreateIfNotExists(c) => {
            usize::from(c.flags == 1 || c.flags == 3)
        }
        Request::Multi(ops) => ops.iter().map(ephemeral_creates).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::Origin;
    use crate::outbound::{self, Out, OutboundQueue};
    use std::time::Duration;
    use warden_proto::request::CreateRequest;
    use warden_state::{StateConfig, Txn};

    const NODE: u64 = 1;
    const INCARNATION: u64 = 0xabc;
    const CONNECTION: u64 = 1;

    fn replica() -> Replica {
        Replica::new(NODE, INCARNATION, State::new(StateConfig::default()))
    }

    fn connect(r: &mut Replica, connection: u64) -> OutboundQueue {
        let (out, queue) = outbound::channel(1 << 20);
        let auth: Arc<[Id]> = Arc::from(vec![]);
        r.connect(connection, out, "127.0.0.1:1".parse().unwrap(), auth, false);
        queue
    }

    fn txn(session_id: i64, kind: TxnKind) -> Txn {
        Txn {
            session_id,
            time_ms: 1,
            auth: Vec::new(),
            enforce_quota: false,
            kind,
        }
    }

    /// A session created through `connection`, with its handshake answer drained.
    fn session(r: &mut Replica, connection: u64, queue: &mut OutboundQueue) -> i64 {
        let _ready = r.await_session(connection, 10_000, None, vec![7; 16]);
        let seq = sent(r, connection, NODE);
        let created = Proposal {
            origin: Some(origin(connection, seq, 0)),
            txn: txn(
                0,
                TxnKind::CreateSession {
                    timeout_ms: 10_000,
                    password: vec![7; 16],
                },
            ),
        };
        r.apply(&created, Instant::now());
        assert!(
            matches!(queue.try_recv(), Some(Out::Frame(_))),
            "handshake answered"
        );
        r.state().sessions().next().unwrap().0
    }

    /// A create of the connection's, handed to `leader` in term 1; returns its number.
    fn sent(r: &mut Replica, connection: u64, leader: u64) -> u64 {
        let target = Target { leader, term: 1 };
        r.write(
            connection,
            Instant::now(),
            |seq, _| create(0, "/sent", origin(connection, seq, seq as i32)),
            Some(target),
        )
        .expect("connected");
        r.clients[&connection].writes.numbered()
    }

    fn origin(connection: u64, seq: u64, xid: i32) -> Origin {
        Origin {
            node: NODE,
            incarnation: INCARNATION,
            connection,
            seq,
            xid,
        }
    }

    fn create(session_id: i64, path: &str, origin: Origin) -> Proposal {
        Proposal {
            origin: Some(origin),
            txn: txn(
                session_id,
                TxnKind::Request(Request::Create(CreateRequest {
                    path: path.into(),
                    data: Some(Vec::new()),
                    acl: warden_proto::Acl::open(),
                    flags: 0,
                })),
            ),
        }
    }

    #[test]
    fn an_entry_of_an_earlier_process_never_reaches_a_connection_of_this_one() {
        // Review finding 2: connection ids restart at 1 in every process.
        let mut r = replica();
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        let stale = Origin {
            incarnation: INCARNATION + 1,
            ..origin(CONNECTION, 2, 5)
        };
        r.apply(&create(id, "/stale", stale), Instant::now());
        assert!(
            q.try_recv().is_none(),
            "nothing delivered to the new connection"
        );
        assert_eq!(r.outstanding(CONNECTION), 0, "its counters are untouched");
        assert!(
            r.state().tree().get("/stale").is_some(),
            "the entry still applies"
        );
    }

    #[test]
    fn a_gap_in_a_connections_writes_closes_it() {
        let mut r = replica();
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        let two = sent(&mut r, CONNECTION, NODE);
        let three = sent(&mut r, CONNECTION, NODE);
        // Write `two` was lost with its leader; `three` committed.
        r.apply(
            &create(id, "/three", origin(CONNECTION, three, 3)),
            Instant::now(),
        );
        assert!(
            matches!(q.try_recv(), Some(Out::Close)),
            "closed, never answered out of order"
        );
        assert!(two < three);
    }

    #[test]
    fn writes_a_new_leader_did_not_commit_are_handed_to_it_in_order() {
        let mut r = replica();
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        let one = sent(&mut r, CONNECTION, 2);
        let two = sent(&mut r, CONNECTION, 2);
        r.writes_in_doubt("the leader changed", Instant::now());
        // A write of the new term waits behind the two in doubt.
        let held = r.write(
            CONNECTION,
            Instant::now(),
            |seq, _| create(id, "/three", origin(CONNECTION, seq, 3)),
            Some(Target { leader: 3, term: 2 }),
        );
        assert_eq!(held.map(|h| h.len()), Some(0));
        // The new leader commits `one`, then its own first entry: `two` was lost.
        r.apply(
            &create(id, "/one", origin(CONNECTION, one, 1)),
            Instant::now(),
        );
        r.entering_term(2);
        assert!(q.try_recv().is_some(), "`one` answered");
        let again = r.writes_for(CONNECTION, Target { leader: 3, term: 2 });
        let seqs: Vec<u64> = again.iter().map(|p| p.origin.unwrap().seq).collect();
        assert_eq!(seqs, [two, two + 1], "handed again, then the held one");
        for p in &again {
            r.apply(p, Instant::now());
        }
        assert!(r.state().tree().get("/three").is_some());
        assert_eq!(r.outstanding(CONNECTION), 0);
        assert!(
            matches!(q.try_recv(), Some(Out::Frame(_))),
            "answered, never closed"
        );
    }

    #[test]
    fn a_session_whose_connection_closed_is_not_reported_as_here() {
        // A reconfig removed the leader, which closed its clients and became a follower: its
        // report to the new leader named a session whose client was already on another
        // server, which then got SessionMoved for its writes there.
        let mut r = replica();
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        r.touch(id, Instant::now());
        assert_eq!(r.take_touched(), [id], "a client heard from here");
        r.touch(id, Instant::now());
        r.close_all("a reconfig removed this server from the ensemble");
        assert!(
            r.take_touched().is_empty(),
            "its connection is closing: the client may be elsewhere by the next report"
        );
        assert!(r.attached.is_empty());
    }

    #[test]
    fn installing_a_snapshot_resets_everything_derived_from_the_old_state() {
        // Review finding 5: only the tree was swapped.
        let mut r = replica();
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        r.watches.add(id, "/w", WatchKind::Persistent);
        let mut other = State::new(StateConfig::default());
        other.apply(&txn(
            0,
            TxnKind::CreateSession {
                timeout_ms: 4_000,
                password: vec![1; 16],
            },
        ));
        r.install(other);
        assert!(
            matches!(q.try_recv(), Some(Out::Close)),
            "clients reconnect"
        );
        assert_eq!(r.watches().len(), 0, "watches are set again by the clients");
        assert!(r.attached.is_empty());
        let expired = r.take_expired(Instant::now() + Duration::from_secs(5));
        assert_eq!(
            expired.len(),
            1,
            "the tracker follows the new session table"
        );
    }

    #[test]
    fn a_committed_restore_replaces_the_state_and_starts_clients_over() {
        let mut r = replica();
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        r.watches.add(id, "/w", WatchKind::Persistent);
        let restored = State::new(StateConfig::default());
        let restore = Proposal {
            origin: None,
            txn: txn(
                0,
                TxnKind::Restore {
                    snapshot: warden_state::snapshot::encode(&restored),
                },
            ),
        };
        let zxid = r.apply(&restore, Instant::now());
        assert_eq!(
            zxid, 2,
            "after the session's, never back to the snapshot's 0"
        );
        assert!(
            r.state().session(id).is_none(),
            "the snapshot's sessions only"
        );
        assert!(
            matches!(q.try_recv(), Some(Out::Close)),
            "clients reconnect"
        );
        assert_eq!(r.watches().len(), 0);
        assert!(r.attached.is_empty());
        assert!(
            r.take_expired(Instant::now() + Duration::from_secs(60))
                .is_empty()
        );
    }

    /// The error code of a reply frame (the header: xid, zxid, err).
    fn reply_err(out: Option<Out>) -> i32 {
        let Some(Out::Frame(frame)) = out else {
            panic!("a reply, not {out:?}")
        };
        i32::from_be_bytes(frame[12..16].try_into().unwrap())
    }

    fn get_data(path: &str) -> Local {
        Local {
            xid: 9,
            request: Request::GetData(warden_proto::request::PathWatchRequest {
                path: path.into(),
                watch: true,
            }),
            auth: Arc::from(vec![]),
            received: Instant::now(),
            refused: None,
        }
    }

    fn sum_outstanding(r: &Replica) -> usize {
        r.clients().map(Client::outstanding).sum()
    }

    #[test]
    fn the_server_wide_outstanding_count_follows_every_connection() {
        let mut r = replica();
        let mut qa = connect(&mut r, 1);
        let mut qb = connect(&mut r, 2);
        let a = session(&mut r, 1, &mut qa);
        let _b = session(&mut r, 2, &mut qb);
        assert_eq!(r.outstanding_total(), 0);
        let first = sent(&mut r, 1, NODE);
        let second = sent(&mut r, 1, NODE);
        r.local(1, get_data("/")); // waits behind the writes
        let on_b = sent(&mut r, 2, NODE);
        assert_eq!(r.outstanding_total(), 4);
        assert_eq!(r.outstanding_total(), sum_outstanding(&r));
        r.apply(&create(a, "/one", origin(1, first, 1)), Instant::now());
        assert_eq!(r.outstanding_total(), 3);
        r.apply(&create(a, "/two", origin(1, second, 2)), Instant::now());
        assert_eq!(
            r.outstanding_total(),
            1,
            "the read behind them answered too"
        );
        assert_eq!(r.outstanding_total(), sum_outstanding(&r));
        // A connection that goes with a write in flight takes it off the count.
        r.disconnect(2);
        assert_eq!(r.outstanding_total(), 0);
        assert!(on_b > 0);
    }

    #[tokio::test]
    async fn the_server_wide_bound_holds_reading_until_a_request_is_answered() {
        let mut r = replica();
        r.limit(&crate::config::Limits {
            outstanding_requests_max: 2,
            ..crate::config::Limits::default()
        });
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        let first = sent(&mut r, CONNECTION, NODE);
        assert!(!r.outstanding_full().0);
        sent(&mut r, CONNECTION, NODE);
        let (full, below_max) = r.outstanding_full();
        assert!(full, "two unanswered requests reach the bound");
        let woken = below_max.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        r.apply(
            &create(id, "/one", origin(CONNECTION, first, 1)),
            Instant::now(),
        );
        assert!(!r.outstanding_full().0);
        tokio::time::timeout(Duration::from_secs(1), woken)
            .await
            .expect("the waiting connections are woken");
    }

    #[test]
    fn a_session_owns_no_more_ephemerals_than_its_bound() {
        let mut r = replica();
        r.limit(&crate::config::Limits {
            ephemerals_per_session_max: 2,
            ..crate::config::Limits::default()
        });
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        let ephemeral = |path: &str, flags| {
            Request::Create(CreateRequest {
                path: path.into(),
                data: None,
                acl: warden_proto::Acl::open(),
                flags,
            })
        };
        for (seq, path) in [(1, "/e1"), (2, "/e2")] {
            let mut p = create(id, path, origin(CONNECTION, seq, 1));
            p.txn.kind = TxnKind::Request(ephemeral(path, 1));
            assert!(r.may_hold_ephemerals(id, &ephemeral(path, 1)));
            r.apply(&p, Instant::now());
        }
        assert_eq!(r.state().tree().ephemeral_count(id), 2);
        // A third, plain or sequential or in a multi, is over; persistent nodes are not.
        assert!(!r.may_hold_ephemerals(id, &ephemeral("/e3", 1)));
        assert!(!r.may_hold_ephemerals(id, &ephemeral("/e3", 3)));
        assert!(!r.may_hold_ephemerals(
            id,
            &Request::Multi(vec![ephemeral("/p", 0), ephemeral("/e3", 3)])
        ));
        assert!(r.may_hold_ephemerals(id, &ephemeral("/p", 0)));
        assert!(r.may_hold_ephemerals(id, &ephemeral("/c", 4)));
        // Another session has its own bound.
        assert!(r.may_hold_ephemerals(id + 1, &ephemeral("/e3", 1)));
    }

    #[test]
    fn a_session_sets_no_more_watches_than_its_bound() {
        let mut r = replica();
        r.limit(&crate::config::Limits {
            watches_per_session_max: 2,
            ..crate::config::Limits::default()
        });
        let mut q = connect(&mut r, CONNECTION);
        let id = session(&mut r, CONNECTION, &mut q);
        r.local(CONNECTION, get_data("/"));
        assert_eq!(reply_err(q.try_recv()), 0);
        r.local(CONNECTION, get_data("/zookeeper"));
        assert_eq!(reply_err(q.try_recv()), 0);
        // The same watch again is no new one.
        r.local(CONNECTION, get_data("/"));
        assert_eq!(reply_err(q.try_recv()), 0);
        r.local(CONNECTION, get_data("/zookeeper/config"));
        assert_eq!(
            reply_err(q.try_recv()),
            ErrorCode::BAD_ARGUMENTS.0,
            "a third watch is refused"
        );
        assert_eq!(r.watches().count_of(id), 2);
        r.local(
            CONNECTION,
            Local {
                request: Request::AddWatch(warden_proto::request::AddWatchRequest {
                    path: "/x".into(),
                    mode: add_watch_mode::PERSISTENT,
                }),
                ..get_data("/")
            },
        );
        assert_eq!(reply_err(q.try_recv()), ErrorCode::BAD_ARGUMENTS.0);
        // SetWatches cannot be refused in its answer: the connection closes.
        r.local(
            CONNECTION,
            Local {
                request: Request::SetWatches(warden_proto::request::SetWatchesRequest {
                    relative_zxid: 0,
                    data_watches: vec!["/a".into()],
                    exist_watches: Vec::new(),
                    child_watches: Vec::new(),
                }),
                ..get_data("/")
            },
        );
        assert!(matches!(q.try_recv(), Some(Out::Close)));
        assert_eq!(r.watches().count_of(id), 2);
    }
}
