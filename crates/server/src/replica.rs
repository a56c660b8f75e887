//! The one owner of this server's copy of the state: the tree (through [`State`]), the watches
//! of this server's clients, and the clients themselves. Committed transactions are applied
//! here in log order, and reads are answered here, all under one lock, so that everything a
//! client is sent (replies and watch events) is queued in the order it happened: a client
//! always sees a watch event before the data of any later change, and its replies in the order
//! of its requests.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{Notify, oneshot};
use warden_proto::types::{ClientInfo, add_watch_mode, perms};
use warden_proto::{
    ConnectRequest, ConnectResponse, ErrorCode, Id, Record, ReplyHeader, Request, Response,
    WatcherEvent, Writer, response,
};
use warden_state::{State, TxnKind, WatchKind, WatchRegistry, acl};

use crate::consensus::Proposal;
use crate::stats::{ClientStats, ServerStats};

/// A request answered by this server alone, in the client's order.
#[derive(Debug)]
pub struct Local {
    pub xid: i32,
    pub request: Request,
    /// The identities the connection held when the request arrived.
    pub auth: Arc<[Id]>,
    pub received: Instant,
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
    writes_sent: u64,
    writes_applied: u64,
    /// When each write not yet applied arrived, oldest first.
    write_times: VecDeque<Instant>,
    deferred: VecDeque<Deferred>,
    /// Woken whenever the client's outstanding requests go down.
    progress: Arc<Notify>,
    pub stats: ClientStats,
}

impl Client {
    pub fn outstanding(&self) -> usize {
        (self.writes_sent - self.writes_applied) as usize + self.deferred.len()
    }
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

/// When each live session expires unless its client is heard from.
#[derive(Debug, Default)]
struct Expiry {
    deadlines: HashMap<i64, (Instant, Duration)>,
    /// Sessions whose closeSession is proposed and not yet applied.
    closing: HashSet<i64>,
}

impl Expiry {
    fn touch(&mut self, session_id: i64, now: Instant) {
        if let Some((deadline, timeout)) = self.deadlines.get_mut(&session_id) {
            *deadline = now + *timeout;
        }
    }

    fn set(&mut self, session_id: i64, timeout_ms: i32, now: Instant) {
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        self.deadlines.insert(session_id, (now + timeout, timeout));
    }

    fn remove(&mut self, session_id: i64) {
        self.deadlines.remove(&session_id);
        self.closing.remove(&session_id);
    }
}

pub struct Replica {
    node_id: u64,
    state: State,
    watches: WatchRegistry,
    clients: HashMap<u64, Client>,
    /// Session id -> the connection it is attached to here.
    attached: HashMap<i64, u64>,
    expiry: Expiry,
    pub stats: Arc<ServerStats>,
}

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
    pub fn new(node_id: u64, state: State) -> Replica {
        Replica {
            node_id,
            state,
            watches: WatchRegistry::default(),
            clients: HashMap::new(),
            attached: HashMap::new(),
            expiry: Expiry::default(),
            stats: Arc::new(ServerStats::default()),
        }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn watches(&self) -> &WatchRegistry {
        &self.watches
    }

    pub fn clients(&self) -> impl Iterator<Item = &Client> {
        self.clients.values()
    }

    pub fn clients_mut(&mut self) -> impl Iterator<Item = &mut Client> {
        self.clients.values_mut()
    }

    /// Replaces the state with one loaded from a snapshot.
    pub fn install(&mut self, state: State) {
        self.state = state;
    }

    // ---- clients -------------------------------------------------------------------------

    pub fn connect(
        &mut self,
        connection: u64,
        out: crate::outbound::Outbound,
        peer: SocketAddr,
        auth: Arc<[Id]>,
    ) -> Arc<Notify> {
        let progress = Arc::new(Notify::new());
        self.clients.insert(
            connection,
            Client {
                out,
                peer,
                session_id: 0,
                auth,
                timeout_ms: 0,
                handshake: None,
                writes_sent: 0,
                writes_applied: 0,
                write_times: VecDeque::new(),
                deferred: VecDeque::new(),
                progress: progress.clone(),
                stats: ClientStats::new(),
            },
        );
        progress
    }

    /// The connection is gone. Its session lives on until it expires; its watches go, as in
    /// ZooKeeper (the client sets them again when it reconnects).
    pub fn disconnect(&mut self, connection: u64) {
        let Some(client) = self.clients.remove(&connection) else {
            return;
        };
        if client.session_id != 0 && self.attached.get(&client.session_id) == Some(&connection) {
            self.attached.remove(&client.session_id);
            self.watches.remove_session(client.session_id);
        }
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
            && !self.expiry.closing.contains(&id);
        let Some(client) = self.clients.get_mut(&connection) else {
            return Resume::Expired;
        };
        if !valid {
            client.out.send(connect_frame(&ConnectResponse {
                protocol_version: 0,
                timeout_ms: 0,
                session_id: 0,
                password: vec![0; 16],
                read_only: request.read_only.map(|_| false),
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
            read_only: request.read_only.map(|_| false),
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
        self.expiry.set(id, timeout_ms, now);
        Resume::Attached
    }

    /// The client proved more identities (`addauth`).
    pub fn set_auth(&mut self, connection: u64, auth: Arc<[Id]>) {
        if let Some(client) = self.clients.get_mut(&connection) {
            client.auth = auth;
        }
    }

    /// The client was heard from: its session's expiry moves back.
    pub fn touch(&mut self, session_id: i64, now: Instant) {
        self.expiry.touch(session_id, now);
    }

    /// A write of this connection's was proposed; local requests after it wait for it.
    pub fn write_sent(&mut self, connection: u64, received: Instant) {
        if let Some(client) = self.clients.get_mut(&connection) {
            client.writes_sent += 1;
            client.write_times.push_back(received);
            client.stats.received();
            self.stats.received();
        }
    }

    /// A request this server answers alone: now if the client has no write in flight, else
    /// after its earlier writes are applied.
    pub fn local(&mut self, connection: u64, local: Local) {
        let Some(client) = self.clients.get_mut(&connection) else {
            return;
        };
        client.stats.received();
        self.stats.received();
        if client.writes_applied == client.writes_sent && client.deferred.is_empty() {
            let session_id = client.session_id;
            let out = client.out.clone();
            self.execute(connection, session_id, &out, local);
        } else {
            client.deferred.push_back(Deferred {
                after_writes: client.writes_sent,
                local,
            });
        }
    }

    /// Answers the local requests whose earlier writes are now applied.
    fn run_deferred(&mut self, connection: u64) {
        loop {
            let Some(client) = self.clients.get_mut(&connection) else {
                return;
            };
            match client.deferred.front() {
                Some(d) if d.after_writes <= client.writes_applied => {}
                _ => return,
            }
            let deferred = client.deferred.pop_front().expect("front exists");
            let session_id = client.session_id;
            let out = client.out.clone();
            self.execute(connection, session_id, &out, deferred.local);
        }
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
            Request::Ping => (ErrorCode::OK, Response::Empty),
            Request::Sync(r) => (
                ErrorCode::OK,
                Response::Sync {
                    path: r.path.clone(),
                },
            ),
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
                        self.watches.add(session_id, &r.path, kind);
                        (ErrorCode::OK, Response::Code(ErrorCode::OK))
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
                for w in outcome.watches {
                    self.watches.add(session_id, &w.path, w.kind);
                }
                (outcome.err, outcome.body)
            }
        };
        out.send(reply_frame(local.xid, zxid, err, &body));
        self.stats.sent(local.received.elapsed());
        if let Some(client) = self.clients.get_mut(&connection) {
            client
                .stats
                .sent(local.received.elapsed(), zxid, local.request.op() as i32);
            client.progress.notify_one();
        }
    }

    // ---- applying committed transactions ---------------------------------------------------

    /// Applies one committed transaction: watch events first, then the reply to the client
    /// that asked, if it is connected here. Returns the transaction's zxid.
    pub fn apply(&mut self, proposal: &Proposal, now: Instant) -> i64 {
        let txn = &proposal.txn;
        let outcome = self.state.apply(txn);
        for trigger in &outcome.triggers {
            // The watch is used up either way; the event goes only to a client that may READ
            // the node (ZooKeeper 3.9.2+, CVE-2024-23944).
            for delivery in self.watches.fire(trigger) {
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
            .filter(|o| o.node == self.node_id)
            .map(|o| (o.connection, o.xid));
        match &txn.kind {
            TxnKind::CreateSession { timeout_ms, .. } => {
                if let Some(id) = outcome.created_session {
                    self.expiry.set(id, *timeout_ms, now);
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
            TxnKind::Request(_) => {
                if let Some((connection, xid)) = local {
                    self.write_applied(connection, xid, &outcome);
                }
            }
            TxnKind::DeleteContainer { .. } => {}
        }
        outcome.zxid
    }

    fn session_created(&mut self, connection: u64, session_id: i64) {
        let Some(client) = self.clients.get_mut(&connection) else {
            return;
        };
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
        self.expiry.remove(session_id);
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
        client.writes_applied += 1;
        let received = client.write_times.pop_front();
        client
            .out
            .send(reply_frame(xid, outcome.zxid, outcome.err, &outcome.body));
        if let Some(received) = received {
            let latency = received.elapsed();
            client.stats.sent(latency, outcome.zxid, 0);
            self.stats.sent(latency);
        }
        client.progress.notify_one();
        self.run_deferred(connection);
    }

    // ---- leader duties -------------------------------------------------------------------

    /// Gives every live session a full timeout from now: after a restart or a change of
    /// leader, no session is expired for silence it could not help.
    pub fn grant_full_timeouts(&mut self, now: Instant) {
        let sessions: Vec<(i64, i32)> = self
            .state
            .sessions()
            .map(|(id, s)| (id, s.timeout_ms))
            .collect();
        for (id, timeout_ms) in sessions {
            self.expiry.set(id, timeout_ms, now);
        }
    }

    /// Sessions whose deadline passed and whose close is not yet proposed; they are marked
    /// as closing.
    pub fn take_expired(&mut self, now: Instant) -> Vec<i64> {
        let expired: Vec<i64> = self
            .expiry
            .deadlines
            .iter()
            .filter(|(id, (deadline, _))| *deadline <= now && !self.expiry.closing.contains(id))
            .map(|(id, _)| *id)
            .collect();
        self.expiry.closing.extend(&expired);
        expired
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
