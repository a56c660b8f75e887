//! One ZooKeeper session of a run: it draws requests from the workload, keeps up to `pipeline`
//! of them outstanding, and counts every answer.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use zookeeper_client as zk;

use super::link::{Done, Fired, Link, Sent};
use super::stats::{OpKind, Stats};
use super::tree::{OWN_BUCKET_NODES, Paths, value};
use super::workload::{MultiPart, Op, Plan, Span, Target, Weighted, Workload};

/// Own znodes a session remembers (to delete or read them back); older ones are forgotten and
/// left for cleanup.
const OWN_TRACKED_MAX: usize = 100_000;
/// Paths a session keeps a watch on at once; reads past this ask for no watch.
const WATCHES_PER_SESSION_MAX: usize = 10_000;
/// Draws in a row that may find nothing to do (a delete with no own znode left) before the
/// session gives up.
const DRAWS_IN_VAIN_MAX: u32 = 1000;

/// What all sessions of a run share: when to count, when to stop, and the counts.
pub struct Control {
    /// Requests sent before this instant are warm-up, not counted.
    pub measure_from: Instant,
    /// No request is sent from this instant on (a run of fixed duration).
    issue_until: Option<Instant>,
    /// Counted requests still to send (a run of fixed request count).
    requests_left: Option<AtomicU64>,
    stop: AtomicBool,
    pub ok: AtomicU64,
    pub errors: AtomicU64,
    pub in_flight: AtomicI64,
    /// Sessions record into shards, so that no lock is shared by all of them.
    stats: Box<[Mutex<Stats>]>,
}

impl Control {
    pub fn new(
        measure_from: Instant,
        issue_until: Option<Instant>,
        requests: Option<u64>,
        shards: usize,
    ) -> Control {
        Control {
            measure_from,
            issue_until,
            requests_left: requests.map(AtomicU64::new),
            stop: AtomicBool::new(false),
            ok: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            stats: (0..shards.max(1))
                .map(|_| Mutex::new(Stats::default()))
                .collect(),
        }
    }

    /// Sessions send nothing more; what is outstanding still completes.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether a request may be sent now and, if so, whether it is counted.
    fn admit(&self, now: Instant) -> Option<bool> {
        if self.stop.load(Ordering::Relaxed) || self.issue_until.is_some_and(|until| now >= until) {
            return None;
        }
        if now < self.measure_from {
            return Some(false);
        }
        if let Some(left) = &self.requests_left {
            left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .ok()?;
        }
        Some(true)
    }

    fn shard(&self, session: u32) -> &Mutex<Stats> {
        &self.stats[session as usize % self.stats.len()]
    }

    pub fn stats(&self) -> Stats {
        let mut all = Stats::default();
        for shard in &self.stats {
            all.merge(&shard.lock().expect("a session panicked while recording"));
        }
        all
    }
}

/// How a session's run ended.
pub struct SessionEnd {
    pub session: u32,
    /// Znodes its acknowledged creates made, less those its acknowledged deletes removed.
    pub znodes_made: i64,
    /// When its last counted request completed.
    pub last_counted: Option<Instant>,
    /// Why it stopped before the run did (an expired or closed session, nothing left to do).
    pub ended_early: Option<String>,
}

/// What every session of a run shares.
pub struct Shared {
    pub workload: Workload,
    pub paths: Paths,
    pub control: Control,
    pub sessions: u32,
    /// Requests each session keeps outstanding.
    pub pipeline: u32,
}

pub struct Session {
    id: u32,
    link: Link,
    shared: Arc<Shared>,
    /// Znodes made less znodes removed by this session's acknowledged writes.
    znodes_made: i64,
    rng: fastrand::Rng,
    own: OwnNodes,
    watches: Watches,
    /// The next load index this session creates; it creates every `sessions`-th one.
    load_next: u64,
}

/// A request ready to send, with what to do with the session's own znodes once it is answered.
struct Planned {
    kind: OpKind,
    counted: bool,
    request: Request,
    /// Own znodes the request creates: remembered when it succeeds.
    creates: Vec<u64>,
    /// Own znodes the request deletes: remembered again when it fails.
    deletes: Vec<u64>,
}

/// A request as a session draws it, before a driver sends it.
pub enum Request {
    Create {
        path: String,
        value: Vec<u8>,
    },
    Delete {
        path: String,
    },
    Set {
        path: String,
        value: Vec<u8>,
    },
    Get {
        path: String,
        watch: bool,
    },
    Exists {
        path: String,
        watch: bool,
    },
    List {
        path: String,
        watch: bool,
    },
    Multi {
        parts: Vec<(MultiPart, String, Vec<u8>)>,
    },
}

impl Request {
    /// Znodes the request makes, less those it removes, if it succeeds.
    fn znodes(&self) -> i64 {
        match self {
            Request::Create { .. } => 1,
            Request::Delete { .. } => -1,
            Request::Multi { parts } => parts
                .iter()
                .map(|(part, _, _)| match part {
                    MultiPart::Create => 1,
                    MultiPart::Delete => -1,
                    MultiPart::Set | MultiPart::Check => 0,
                })
                .sum(),
            Request::Set { .. }
            | Request::Get { .. }
            | Request::Exists { .. }
            | Request::List { .. } => 0,
        }
    }
}

impl Session {
    pub fn new(id: u32, link: Link, shared: Arc<Shared>, seed: u64) -> Session {
        let workload = &shared.workload;
        let own = OwnNodes::new(
            u64::from(workload.delete_stock),
            workload.tracks_own_nodes(),
        );
        Session {
            id,
            link,
            shared,
            znodes_made: 0,
            rng: fastrand::Rng::with_seed(seed),
            own,
            watches: Watches::default(),
            load_next: u64::from(id),
        }
    }

    pub async fn run(mut self) -> SessionEnd {
        let mut last_counted = None;
        let mut ended_early = None;
        let mut exhausted = false;
        loop {
            while !exhausted
                && ended_early.is_none()
                && self.link.in_flight() < self.shared.pipeline as usize
            {
                let Some(counted) = self.shared.control.admit(Instant::now()) else {
                    break;
                };
                match self.draw(counted) {
                    Ok(planned) => {
                        for request in planned {
                            self.send(request);
                        }
                    }
                    Err(Exhausted::Load) => exhausted = true,
                    Err(Exhausted::NothingToDo) => {
                        ended_early = Some("no own znode left to delete".to_string())
                    }
                }
            }
            self.link.flush().await;
            if self.link.in_flight() == 0 {
                break;
            }
            // Watch events first: the server sends an event before the answer to any later
            // read of that path, so handling the event first means a read's new watcher never
            // meets a stale entry in `armed` (which would drop it and cost a removeWatches).
            tokio::select! {
                biased;
                Some(path) = self.watches.fired.next(), if !self.watches.fired.is_empty() => {
                    self.watches.armed.remove(&path);
                    self.stats().record_watch_event();
                },
                Some(done) = self.link.next() => {
                    if done.sent.counted && done.result.is_ok() {
                        last_counted = Some(last_counted.map_or(done.finished, |t: Instant| t.max(done.finished)));
                    }
                    if let Some(reason) = self.complete(done) {
                        ended_early.get_or_insert(reason);
                    }
                },
            }
        }
        self.link.close().await;
        SessionEnd {
            session: self.id,
            znodes_made: self.znodes_made,
            last_counted,
            ended_early,
        }
    }

    /// The next request(s) to send: a folder for own znodes first when a create starts one.
    fn draw(&mut self, counted: bool) -> Result<Vec<Planned>, Exhausted> {
        let shared = self.shared.clone();
        match &shared.workload.plan {
            Plan::Load(load) => {
                if self.load_next >= load.nodes {
                    return Err(Exhausted::Load);
                }
                let path = self.shared.paths.load_node(self.load_next, load.parents);
                self.load_next += u64::from(self.shared.sessions);
                let value = value(&mut self.rng, load.value);
                Ok(vec![Planned::new(
                    OpKind::Create,
                    counted,
                    Request::Create { path, value },
                )])
            }
            Plan::Mix(ops) => {
                for _ in 0..DRAWS_IN_VAIN_MAX {
                    let op = ops.pick(&mut self.rng);
                    if let Some(planned) = self.plan(op, counted) {
                        return Ok(planned);
                    }
                }
                Err(Exhausted::NothingToDo)
            }
        }
    }

    /// `None` when the op has nothing to work on (a delete while no own znode is left).
    fn plan(&mut self, op: &Op, counted: bool) -> Option<Vec<Planned>> {
        let mut out = Vec::with_capacity(1);
        let planned = match op {
            Op::Create { value: size } => {
                let (path, seq) = self.new_own(&mut out);
                let value = value(&mut self.rng, *size);
                Planned::new(OpKind::Create, counted, Request::Create { path, value })
                    .creating(vec![seq])
            }
            Op::Delete => {
                let seq = self.own.take_oldest()?;
                let path = self.shared.paths.own(self.id, seq);
                Planned::new(OpKind::Delete, counted, Request::Delete { path }).deleting(vec![seq])
            }
            Op::Set {
                target,
                value: size,
            } => {
                let path = self.target(*target, false);
                let value = value(&mut self.rng, *size);
                Planned::new(OpKind::Set, counted, Request::Set { path, value })
            }
            Op::Get { target, watch } => {
                let path = self.target(*target, false);
                let watch = self.watch(&path, *watch);
                Planned::new(OpKind::Get, counted, Request::Get { path, watch })
            }
            Op::Exists { target, watch } => {
                let path = self.target(*target, false);
                let watch = self.watch(&path, *watch);
                Planned::new(OpKind::Exists, counted, Request::Exists { path, watch })
            }
            Op::List { target, watch } => {
                let path = self.target(*target, true);
                let watch = self.watch(&path, *watch);
                Planned::new(OpKind::List, counted, Request::List { path, watch })
            }
            Op::Multi { size, mix, value } => {
                self.plan_multi(*size, mix, *value, counted, &mut out)
            }
        };
        out.push(planned);
        Some(out)
    }

    fn plan_multi(
        &mut self,
        size: Span,
        mix: &Weighted<MultiPart>,
        value_size: Span,
        counted: bool,
        out: &mut Vec<Planned>,
    ) -> Planned {
        let n = size.pick(&mut self.rng);
        let mut parts = Vec::with_capacity(n as usize);
        let (mut creates, mut deletes) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let part = match *mix.pick(&mut self.rng) {
                // With no own znode left to delete, the transaction creates one instead.
                MultiPart::Delete => match self.own.take_oldest() {
                    Some(seq) => {
                        deletes.push(seq);
                        (
                            MultiPart::Delete,
                            self.shared.paths.own(self.id, seq),
                            Vec::new(),
                        )
                    }
                    None => self.multi_create(value_size, &mut creates, out),
                },
                MultiPart::Create => self.multi_create(value_size, &mut creates, out),
                MultiPart::Set => {
                    let value = value(&mut self.rng, value_size);
                    (
                        MultiPart::Set,
                        self.target(Target::SharedChild, false),
                        value,
                    )
                }
                MultiPart::Check => (
                    MultiPart::Check,
                    self.target(Target::SharedChild, false),
                    Vec::new(),
                ),
            };
            parts.push(part);
        }
        Planned::new(OpKind::Multi, counted, Request::Multi { parts })
            .creating(creates)
            .deleting(deletes)
    }

    fn multi_create(
        &mut self,
        value_size: Span,
        creates: &mut Vec<u64>,
        out: &mut Vec<Planned>,
    ) -> (MultiPart, String, Vec<u8>) {
        let (path, seq) = self.new_own(out);
        creates.push(seq);
        (MultiPart::Create, path, value(&mut self.rng, value_size))
    }

    /// Names the next own znode; when it opens a new folder, plans the folder's (uncounted)
    /// create first. The server answers a session's requests in order, so the folder exists
    /// before the znode's create arrives.
    fn new_own(&mut self, out: &mut Vec<Planned>) -> (String, u64) {
        let seq = self.own.next();
        if seq.is_multiple_of(OWN_BUCKET_NODES) {
            let folder = Request::Create {
                path: self.shared.paths.own_bucket(self.id, seq),
                value: Vec::new(),
            };
            out.push(Planned::new(OpKind::Create, false, folder));
        }
        (self.shared.paths.own(self.id, seq), seq)
    }

    fn target(&mut self, target: Target, listing: bool) -> String {
        let tree = self
            .shared
            .workload
            .shared
            .expect("validation ensures a shared tree for shared targets");
        let paths = &self.shared.paths;
        let parent = self.rng.u32(0..tree.parents);
        match target {
            Target::SharedParent => paths.shared_parent(parent),
            Target::Own if listing => match self.own.any(&mut self.rng) {
                Some(seq) => paths.own_bucket(self.id, seq),
                None => paths.shared_parent(parent),
            },
            Target::Own => match self.own.any(&mut self.rng) {
                Some(seq) => paths.own(self.id, seq),
                None => paths.shared_child(parent, self.rng.u32(0..tree.children)),
            },
            Target::SharedChild => paths.shared_child(parent, self.rng.u32(0..tree.children)),
        }
    }

    fn watch(&mut self, path: &str, probability: f64) -> bool {
        probability > 0.0 && self.rng.f64() < probability && self.watches.may_watch(path)
    }

    fn send(&mut self, planned: Planned) {
        let Planned {
            kind,
            counted,
            request,
            creates,
            deletes,
        } = planned;
        self.shared
            .control
            .in_flight
            .fetch_add(1, Ordering::Relaxed);
        let sent = Sent {
            kind,
            counted,
            started: Instant::now(),
            creates,
            deletes,
            znodes: request.znodes(),
        };
        self.link.send(request, sent);
    }

    fn stats(&self) -> MutexGuard<'_, Stats> {
        self.shared
            .control
            .shard(self.id)
            .lock()
            .expect("no panics while recording")
    }

    /// Records an answer; returns why the session cannot go on, if it cannot.
    fn complete(&mut self, done: Done) -> Option<String> {
        self.shared
            .control
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
        let sent = done.sent;
        match done.result {
            Ok(watch) => {
                self.znodes_made += sent.znodes;
                for seq in sent.creates {
                    self.own.remember(seq);
                }
                if let Some((path, fired)) = watch {
                    self.watches.arm(path, fired);
                }
                if sent.counted {
                    self.shared.control.ok.fetch_add(1, Ordering::Relaxed);
                    let mut stats = self.stats();
                    stats.record_ok(sent.kind, done.finished - sent.started);
                }
                None
            }
            Err(error) => {
                // A delete that failed for another reason than NoNode left its znodes in place.
                if error != zk::Error::NoNode {
                    for seq in sent.deletes {
                        self.own.remember(seq);
                    }
                }
                if sent.counted {
                    self.shared.control.errors.fetch_add(1, Ordering::Relaxed);
                    let mut stats = self.stats();
                    stats.record_error(sent.kind, &error_code(&error));
                }
                is_terminal(&error).then(|| format!("session {}: {}", self.id, error_code(&error)))
            }
        }
    }
}

enum Exhausted {
    /// Every znode of the load has been sent.
    Load,
    /// The workload found nothing to do many times in a row.
    NothingToDo,
}

impl Planned {
    fn new(kind: OpKind, counted: bool, request: Request) -> Planned {
        Planned {
            kind,
            counted,
            request,
            creates: Vec::new(),
            deletes: Vec::new(),
        }
    }

    fn creating(self, creates: Vec<u64>) -> Planned {
        Planned { creates, ..self }
    }

    fn deleting(self, deletes: Vec<u64>) -> Planned {
        Planned { deletes, ..self }
    }
}

/// Errors after which the session can send nothing more.
fn is_terminal(error: &zk::Error) -> bool {
    matches!(
        error,
        zk::Error::SessionExpired
            | zk::Error::ClientClosed
            | zk::Error::AuthFailed
            | zk::Error::NoHosts
    )
}

/// ZooKeeper's name for an error code (KeeperException.Code), or the client's name for an error
/// that never came from a server.
pub fn error_code(error: &zk::Error) -> String {
    use zk::Error as E;
    let name = match error {
        E::NoNode => "NoNode",
        E::NoAuth => "NoAuth",
        E::BadVersion => "BadVersion",
        E::NoChildrenForEphemerals => "NoChildrenForEphemerals",
        E::NodeExists => "NodeExists",
        E::NotEmpty => "NotEmpty",
        E::SessionExpired => "SessionExpired",
        E::InvalidAcl => "InvalidACL",
        E::AuthFailed => "AuthFailed",
        E::SessionMoved => "SessionMoved",
        E::NotReadOnly => "NotReadOnly",
        E::NoWatcher => "NoWatcher",
        E::QuotaExceeded => "QuotaExceeded",
        E::Throttled => "ThrottledOp",
        E::MarshallingError => "MarshallingError",
        E::Unimplemented => "Unimplemented",
        E::ConnectionLoss => "ConnectionLoss",
        E::ReconfigDisabled => "ReconfigDisabled",
        E::RuntimeInconsistent => "RuntimeInconsistency",
        E::UnexpectedErrorCode(code) => return format!("code {code}"),
        E::Timeout => "client: timeout",
        E::NoHosts => "client: no hosts",
        E::ClientClosed => "client: closed",
        E::BadArguments(_) => "client: bad arguments",
        E::UnmarshalError { .. } => "client: unreadable answer",
        other => return format!("client: {other}"),
    };
    name.to_string()
}

/// The session's own znodes: the sequence that names new ones, and those known to exist.
struct OwnNodes {
    next_seq: u64,
    live: VecDeque<u64>,
    tracked: bool,
}

impl OwnNodes {
    /// Setup made `stock` znodes for the session: sequence numbers `0..stock`.
    fn new(stock: u64, tracked: bool) -> OwnNodes {
        let live = if tracked {
            (0..stock).collect()
        } else {
            VecDeque::new()
        };
        OwnNodes {
            next_seq: stock,
            live,
            tracked,
        }
    }

    fn next(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    fn remember(&mut self, seq: u64) {
        if !self.tracked {
            return;
        }
        if self.live.len() >= OWN_TRACKED_MAX {
            self.live.pop_front();
        }
        self.live.push_back(seq);
    }

    /// The oldest own znode, no longer remembered: the caller deletes it.
    fn take_oldest(&mut self) -> Option<u64> {
        self.live.pop_front()
    }

    fn any(&self, rng: &mut fastrand::Rng) -> Option<u64> {
        (!self.live.is_empty()).then(|| self.live[rng.usize(0..self.live.len())])
    }
}

/// The watches a session holds, one per path at most, as ZooKeeper clients hold them.
#[derive(Default)]
struct Watches {
    armed: HashSet<String>,
    /// Resolves to a watch's path when its event arrives.
    fired: FuturesUnordered<Pin<Box<dyn Future<Output = String> + Send>>>,
}

impl Watches {
    fn may_watch(&self, path: &str) -> bool {
        self.armed.len() < WATCHES_PER_SESSION_MAX || self.armed.contains(path)
    }

    fn arm(&mut self, path: String, fired: Fired) {
        if self.armed.insert(path.clone()) {
            self.fired.push(Box::pin(async move {
                fired.await;
                path
            }));
        }
        // Else the watcher is dropped here. The client keeps the older watcher of this path, so
        // the drop costs no removeWatches request, and the server holds one watch either way
        // (the lean driver fires every watcher of a path on its event).
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_admitted_by_phase_and_count() {
        let now = Instant::now();
        let second = std::time::Duration::from_secs(1);
        let control = Control::new(now + second, Some(now + 3 * second), Some(2), 1);
        assert_eq!(
            control.admit(now),
            Some(false),
            "warm-up is admitted, not counted"
        );
        assert_eq!(control.admit(now + second), Some(true));
        assert_eq!(control.admit(now + second), Some(true));
        assert_eq!(
            control.admit(now + second),
            None,
            "the request count is spent"
        );
        let control = Control::new(now, Some(now + second), None, 1);
        assert_eq!(control.admit(now), Some(true));
        assert_eq!(control.admit(now + second), None, "the duration is over");
        let control = Control::new(now, None, None, 1);
        control.stop();
        assert_eq!(control.admit(now), None);
    }

    #[test]
    fn own_znodes_are_deleted_oldest_first_and_bounded() {
        let mut own = OwnNodes::new(3, true);
        assert_eq!(own.next(), 3);
        own.remember(3);
        assert_eq!((own.take_oldest(), own.take_oldest()), (Some(0), Some(1)));
        let mut rng = fastrand::Rng::with_seed(1);
        assert!(matches!(own.any(&mut rng), Some(2 | 3)));
        for seq in 0..OWN_TRACKED_MAX as u64 + 10 {
            own.remember(seq);
        }
        assert_eq!(own.live.len(), OWN_TRACKED_MAX);

        let mut untracked = OwnNodes::new(5, false);
        untracked.remember(7);
        assert_eq!((untracked.take_oldest(), untracked.next()), (None, 5));
    }

    #[test]
    fn error_codes_use_zookeepers_names() {
        assert_eq!(error_code(&zk::Error::NoNode), "NoNode");
        assert_eq!(
            error_code(&zk::Error::RuntimeInconsistent),
            "RuntimeInconsistency"
        );
        assert_eq!(error_code(&zk::Error::UnexpectedErrorCode(-13)), "code -13");
        assert_eq!(error_code(&zk::Error::Timeout), "client: timeout");
        assert!(is_terminal(&zk::Error::SessionExpired));
        assert!(!is_terminal(&zk::Error::ConnectionLoss));
    }
}
