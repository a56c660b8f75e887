//! What the admin commands report, gathered once: the four-letter words render it as
//! ZooKeeper's text, the HTTP commands as ZooKeeper's JSON. Each function takes the replica's
//! lock at most once and never holds it while looking at consensus.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::replica::Replica;
use crate::server::Context;
use crate::stats::ClientStats;

use super::ZOOKEEPER_VERSION;

/// How this server takes part: `standalone`, `leader`, `follower`, `observer` or `read-only`.
/// Takes the replica's lock: never call it while holding it.
pub fn mode(ctx: &Context) -> &'static str {
    if ctx.consensus.standalone() {
        return "standalone";
    }
    if !ctx.serving() && ctx.read_only_mode() {
        return "read-only";
    }
    let me = ctx.consensus.node_id();
    if ctx.consensus.leader() == Some(me) {
        "leader"
    } else if ctx.consensus.status().learners.contains(&me) {
        "observer"
    } else {
        "follower"
    }
}

/// `srvr`, `stat`, `server_stats`, `stats`.
#[derive(Debug, Clone)]
pub struct Summary {
    pub mode: &'static str,
    pub packets_received: u64,
    pub packets_sent: u64,
    /// Request latency in milliseconds.
    pub latency_min_ms: f64,
    pub latency_avg_ms: f64,
    pub latency_max_ms: f64,
    pub connections: usize,
    pub outstanding: usize,
    pub zxid: i64,
    pub node_count: usize,
    pub uptime_ms: u64,
    /// Client authentications refused since the start.
    pub auth_failed: u64,
    /// Log appends slower to become durable than fsync.warningthresholdms.
    pub fsync_threshold_exceeded: u64,
    pub data_dir_bytes: u64,
    pub log_dir_bytes: u64,
}

pub fn summary(ctx: &Context) -> Summary {
    // Before the replica is locked: the mode looks at it too.
    let mode = mode(ctx);
    let status = ctx.consensus.status();
    let r = ctx.replica();
    let (min, avg, max) = r.stats.latency.min_avg_max_ms();
    Summary {
        mode,
        packets_received: r.stats.packets_received.load(Ordering::Relaxed),
        packets_sent: r.stats.packets_sent.load(Ordering::Relaxed),
        latency_min_ms: min,
        latency_avg_ms: avg,
        latency_max_ms: max,
        connections: r.clients().count(),
        outstanding: r.outstanding_total(),
        zxid: r.state().last_zxid(),
        node_count: node_count(r.state()),
        uptime_ms: ctx.started.elapsed().as_millis() as u64,
        auth_failed: r.stats.auth_failed.load(Ordering::Relaxed),
        fsync_threshold_exceeded: status.flushes.slow,
        data_dir_bytes: status.snapshot_bytes,
        log_dir_bytes: status.log_bytes,
    }
}

/// One client connection (`cons`, `connections`).
#[derive(Debug, Clone)]
pub struct Connection {
    pub peer: SocketAddr,
    /// 0 before the handshake completes.
    pub session_id: i64,
    pub timeout_ms: i32,
    pub outstanding: usize,
    pub stats: ClientStats,
}

pub fn connections(r: &Replica) -> Vec<Connection> {
    let mut out: Vec<Connection> = r
        .clients()
        .map(|c| Connection {
            peer: c.peer,
            session_id: c.session_id,
            timeout_ms: c.timeout_ms,
            outstanding: c.outstanding(),
            stats: c.stats.clone(),
        })
        .collect();
    out.sort_by_key(|c| c.stats.established);
    out
}

/// `conf`, `configuration`.
#[derive(Debug, Clone)]
pub struct Conf {
    pub client_port: u16,
    pub data_dir: PathBuf,
    pub data_dir_bytes: u64,
    pub log_dir: PathBuf,
    pub log_dir_bytes: u64,
    pub tick_time_ms: u32,
    pub max_client_cnxns: u32,
    pub session_timeout_ms_min: u32,
    pub session_timeout_ms_max: u32,
    pub server_id: u64,
}

pub fn conf(ctx: &Context) -> Conf {
    let c = &ctx.config;
    let status = ctx.consensus.status();
    Conf {
        client_port: ctx.client_addr.port(),
        data_dir: status.snapshot_dir,
        data_dir_bytes: status.snapshot_bytes,
        log_dir: status.log_dir,
        log_dir_bytes: status.log_bytes,
        tick_time_ms: c.tick_time_ms,
        max_client_cnxns: c.limits.connections_per_ip_max,
        session_timeout_ms_min: c.session_timeout_ms_min,
        session_timeout_ms_max: c.session_timeout_ms_max,
        server_id: c.cluster.my_id.unwrap_or(0),
    }
}

/// `envi`, `environment`: ZooKeeper's keys that mean something outside a JVM, in its order,
/// then Warden's own.
pub fn environment() -> Vec<(&'static str, String)> {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|h| h.trim().to_owned())
            .ok()
    };
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    vec![
        ("zookeeper.version", ZOOKEEPER_VERSION.to_owned()),
        (
            "host.name",
            read("/proc/sys/kernel/hostname").unwrap_or_else(|| "localhost".to_owned()),
        ),
        ("os.name", std::env::consts::OS.to_owned()),
        ("os.arch", std::env::consts::ARCH.to_owned()),
        (
            "os.version",
            read("/proc/sys/kernel/osrelease").unwrap_or_default(),
        ),
        ("user.name", user_name()),
        ("user.home", env("HOME")),
        (
            "user.dir",
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
        ),
        ("warden.version", env!("CARGO_PKG_VERSION").to_owned()),
    ]
}

/// The name of the user the process runs as: $USER, else the passwd entry of its uid.
fn user_name() -> String {
    if let Ok(user) = std::env::var("USER") {
        return user;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let Some(uid) = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
    else {
        return String::new();
    };
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == uid)
        .map(|f| f[0].to_owned())
        .unwrap_or_default()
}

/// A value of `mntr`/`monitor`.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    Int(i64),
    Float(f64),
    Text(String),
}

/// `mntr`, `monitor`: names without ZooKeeper's `zk_` text prefix; ZooKeeper's gauges in the
/// order ZooKeeper 3.9.5 lists them (zk395-admin-json/monitor.txt), then Warden's own.
pub fn monitor(ctx: &Context) -> Vec<(&'static str, Metric)> {
    use Metric::{Float, Int, Text};
    let mode = mode(ctx);
    let status = ctx.consensus.status();
    let standalone = ctx.consensus.standalone();
    let r = ctx.replica();
    let state = r.state();
    let (min, avg, max) = r.stats.latency.min_avg_max_ms();
    let ephemerals: usize = state
        .sessions()
        .map(|(id, _)| state.tree().ephemerals_of(id).count())
        .sum();
    let n = |v: usize| Int(v as i64);
    let u = |v: u64| Int(v as i64);
    let mut out = vec![
        ("version", Text(ZOOKEEPER_VERSION.to_owned())),
        ("server_state", Text(mode.to_owned())),
        ("ephemerals_count", n(ephemerals)),
        ("num_alive_connections", n(r.clients().count())),
        ("avg_latency", Float(avg)),
        ("outstanding_requests", n(r.outstanding_total())),
        ("znode_count", n(node_count(state))),
        ("global_sessions", n(state.sessions().count())),
        (
            "packets_sent",
            u(r.stats.packets_sent.load(Ordering::Relaxed)),
        ),
        (
            "packets_received",
            u(r.stats.packets_received.load(Ordering::Relaxed)),
        ),
        ("watch_count", n(r.watches().len())),
        (
            "auth_failed_count",
            u(r.stats.auth_failed.load(Ordering::Relaxed)),
        ),
        ("min_latency", Int(min as i64)),
        (
            "approximate_data_size",
            u(state.tree().approximate_data_size()),
        ),
        ("local_sessions", Int(0)),
        ("uptime", u(ctx.started.elapsed().as_millis() as u64)),
        ("max_latency", Int(max as i64)),
        // Warden's own, after ZooKeeper's.
        ("last_zxid", Text(format!("{:#x}", state.last_zxid()))),
        ("raft_term", u(status.term)),
        ("raft_last_log_index", u(status.last_log_index)),
        ("raft_applied_index", u(status.applied_index)),
        ("raft_snapshot_index", u(status.snapshot_index)),
        ("log_bytes", u(status.log_bytes)),
        ("snapshot_bytes", u(status.snapshot_bytes)),
    ];
    if !standalone {
        out.push((
            "quorum_size",
            n(status.voters.len() + status.learners.len()),
        ));
    }
    if status.leader == Some(ctx.consensus.node_id()) && !standalone {
        // The leader's own lines (LeaderZooKeeperServer's gauges): learners it replicates
        // to, and those that acknowledged within an election timeout.
        let synced = |set: &[u64]| {
            n(status
                .synced_followers
                .iter()
                .filter(|id| set.contains(id))
                .count())
        };
        let learners = status.voters.len() + status.learners.len() - 1;
        out.push(("learners", n(learners)));
        out.push(("followers", n(learners)));
        out.push(("synced_followers", synced(&status.voters)));
        out.push(("synced_non_voting_followers", Int(0)));
        out.push(("synced_observers", synced(&status.learners)));
        out.push(("pending_syncs", u(status.pending_syncs)));
        // ZooKeeper's leader's proposal sizes (BufferStats: -1 before the first).
        let (last, min, max) = r.stats.proposal_sizes.last_min_max();
        out.push(("last_proposal_size", Int(last)));
        out.push(("min_proposal_size", Int(min)));
        out.push(("max_proposal_size", Int(max)));
    }
    out
}

/// `wchs`, `watch_summary`.
pub struct WatchSummary {
    pub sessions: usize,
    pub paths: usize,
    pub watches: usize,
}

pub fn watch_summary(r: &Replica) -> WatchSummary {
    WatchSummary {
        sessions: r.watches().by_session().len(),
        paths: r.watches().by_path().len(),
        watches: r.watches().len(),
    }
}

/// `wchc`, `watches`: each session and the paths it watches.
pub fn watches_by_session(r: &Replica) -> Vec<(i64, Vec<String>)> {
    r.watches()
        .by_session()
        .into_iter()
        .map(|(s, paths)| (s, paths.into_iter().map(str::to_owned).collect()))
        .collect()
}

/// `wchp`, `watches_by_path`: each watched path and its sessions.
pub fn watches_by_path(r: &Replica) -> Vec<(String, Vec<i64>)> {
    r.watches()
        .by_path()
        .into_iter()
        .map(|(p, sessions)| (p.to_owned(), sessions.into_iter().collect()))
        .collect()
}

/// `dump`: the sessions, when each expires, and their ephemeral nodes.
pub struct Dump {
    /// Every session, in id order.
    pub sessions: Vec<i64>,
    /// The sessions this server tracks, by expiry time: milliseconds since the server started,
    /// rounded up to the next tick as ZooKeeper's ExpiryQueue buckets them.
    pub expiry: Vec<(u64, Vec<i64>)>,
    /// Sessions with ephemeral nodes, and their paths, sorted.
    pub ephemerals: Vec<(i64, Vec<String>)>,
    /// Client connections: address and session.
    pub connections: Vec<(SocketAddr, i64)>,
}

pub fn dump(ctx: &Context) -> Dump {
    let tick = u64::from(ctx.config.tick_time_ms.max(1));
    let r = ctx.replica();
    let state = r.state();
    let mut sessions: Vec<i64> = state.sessions().map(|(id, _)| id).collect();
    sessions.sort_unstable();
    let now = Instant::now();
    let since_start = ctx.started.elapsed().as_millis() as u64;
    let mut expiry: std::collections::BTreeMap<u64, Vec<i64>> = Default::default();
    for (id, deadline) in r.session_deadlines() {
        let left = deadline.saturating_duration_since(now).as_millis() as u64;
        let at = (since_start + left) / tick * tick + tick;
        expiry.entry(at).or_default().push(id);
    }
    for ids in expiry.values_mut() {
        ids.sort_unstable();
    }
    let ephemerals = sessions
        .iter()
        .map(|&id| {
            let mut paths: Vec<String> = state
                .tree()
                .ephemerals_of(id)
                .map(|n| state.tree().path_of(n))
                .collect();
            paths.sort();
            (id, paths)
        })
        .filter(|(_, paths)| !paths.is_empty())
        .collect();
    let connections = r.clients().map(|c| (c.peer, c.session_id)).collect();
    Dump {
        sessions,
        expiry: expiry.into_iter().collect(),
        ephemerals,
        connections,
    }
}

/// The cluster's members (`voting_view`): as `/zookeeper/config` names them, or as the
/// configuration does until the first leader has written it. Empty on a standalone server.
pub fn members(ctx: &Context) -> Vec<crate::config::Member> {
    if ctx.consensus.standalone() {
        return Vec::new();
    }
    let (members, _) = crate::cluster::membership::current(ctx);
    if members.is_empty() {
        ctx.config.cluster.members.clone()
    } else {
        members
    }
}

/// `dirs`: bytes in the snapshot and log directories.
pub fn dirs(ctx: &Context) -> (u64, u64) {
    let s = ctx.consensus.status();
    (s.snapshot_bytes, s.log_bytes)
}

/// `isro`, `is_read_only`: `Some(true)` read-only, `Some(false)` serving, `None` neither.
/// A server mirroring a ZooKeeper ensemble is read-only: clients that look for a writable
/// server (`isro`, as ZooKeeper's client does from a read-only session) look on.
/// Takes the replica's lock: never call it while holding it.
pub fn read_only(ctx: &Context) -> Option<bool> {
    if ctx.serving() {
        Some(ctx.replica().state().mirroring())
    } else if ctx.read_only_mode() {
        Some(true)
    } else {
        None
    }
}

/// Whether the words and commands that need a quorum may answer: ZooKeeper's
/// "This ZooKeeper instance is not currently serving requests" otherwise.
pub fn answering(ctx: &Context) -> bool {
    ctx.serving() || ctx.read_only_mode()
}

/// ZooKeeper's four-character operation names (`lop=` in `cons`, `last_operation` in
/// `connections`); "NA" before the first.
pub fn op_name(op: i32) -> &'static str {
    use warden_proto::OpCode;
    match OpCode::from_i32(op) {
        Some(OpCode::Ping) => "PING",
        Some(OpCode::Exists) => "EXIS",
        Some(OpCode::GetData) => "GETD",
        Some(OpCode::SetData) => "SETD",
        Some(OpCode::GetAcl) => "GETA",
        Some(OpCode::SetAcl) => "SETA",
        Some(OpCode::GetChildren) | Some(OpCode::GetChildren2) => "GETC",
        Some(OpCode::Create) | Some(OpCode::Create2) | Some(OpCode::CreateContainer) => "CREA",
        Some(OpCode::CreateTtl) => "CREA",
        Some(OpCode::Delete) => "DELE",
        Some(OpCode::Sync) => "SYNC",
        Some(OpCode::Multi) => "MULT",
        Some(OpCode::MultiRead) => "MLTR",
        Some(OpCode::SetWatches) | Some(OpCode::SetWatches2) => "SETW",
        Some(OpCode::CheckWatches) => "CHKW",
        Some(OpCode::RemoveWatches) => "REMW",
        Some(OpCode::AddWatch) => "ADDW",
        Some(OpCode::WhoAmI) => "HOMI",
        Some(OpCode::GetEphemerals) => "GETE",
        Some(OpCode::GetAllChildrenNumber) => "GETACN",
        _ => "NA",
    }
}

pub fn millis_since_epoch(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// When the client's last reply went out, in milliseconds since the epoch; 0 before one.
pub fn last_response_ms(s: &ClientStats) -> u64 {
    s.last_response.map_or(0, |t| {
        millis_since_epoch(std::time::SystemTime::now() - Instant::now().duration_since(t))
    })
}

/// ZooKeeper's node count (srvr's "Node count", mntr's `znode_count`): its nodes map holds the
/// root under "" and under "/", so the count, like its approximateDataSize, takes the root
/// twice.
fn node_count(state: &warden_state::State) -> usize {
    state.tree().len() + 1
}
