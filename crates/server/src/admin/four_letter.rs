//! Four-letter words on the client port, in ZooKeeper 3.9's exact text (monitoring tools and
//! client libraries parse them: kazoo reads `envi` for the version, checks scripts grep `srvr`
//! and `mntr`). Texts were taken from a running ZooKeeper 3.9.5.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use warden_proto::OpCode;

use crate::replica::Replica;
use crate::server::Context;
use crate::stats::ClientStats;

/// The version Warden reports: the ZooKeeper release whose protocol and semantics it
/// implements, then its own. Clients parse the leading digits to enable features.
pub const ZOOKEEPER_VERSION: &str = concat!(
    "3.9.5-warden-",
    env!("CARGO_PKG_VERSION"),
    ", built on 1970-01-01 00:00 UTC"
);

/// Answers `word` and closes the connection.
pub async fn answer(
    ctx: &Context,
    word: &str,
    read: OwnedReadHalf,
    mut write: OwnedWriteHalf,
    peer: SocketAddr,
) {
    let text = if ctx.config.four_letter_word_enabled(word) {
        tracing::debug!(%peer, word, "four-letter word");
        render(ctx, word)
    } else {
        tracing::info!(%peer, word, "four-letter word refused: not in 4lw.commands.whitelist");
        format!("{word} is not executed because it is not in the whitelist.\n")
    };
    let _ = write.write_all(text.as_bytes()).await;
    let _ = write.shutdown().await;
    drop(read);
}

/// ZooKeeper's answer to most words while the server has no quorum.
const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests\n";

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

fn render(ctx: &Context, word: &str) -> String {
    let needs_quorum = !matches!(word, "ruok" | "conf" | "envi" | "dirs" | "isro" | "rqld");
    if needs_quorum && !ctx.serving() && !ctx.read_only_mode() {
        return NOT_SERVING.to_owned();
    }
    match word {
        "ruok" => "imok".to_owned(),
        "srvr" => server_summary(ctx, false),
        "stat" => server_summary(ctx, true),
        "conf" => conf(ctx),
        "cons" => {
            let r = ctx.replica();
            let mut out = connections(&r);
            out.push('\n');
            out
        }
        "crst" => {
            for client in ctx.replica().clients_mut() {
                client.stats.reset();
            }
            "Connection stats reset.\n".to_owned()
        }
        "srst" => {
            ctx.replica().stats.reset();
            "Server stats reset.\n".to_owned()
        }
        "envi" => envi(),
        "mntr" => mntr(ctx),
        "wchs" => wchs(&ctx.replica()),
        "wchc" => wchc(&ctx.replica()),
        "wchp" => wchp(&ctx.replica()),
        "dirs" => {
            let s = ctx.consensus.status();
            format!(
                "datadir_size: {}\nlogdir_size: {}\n",
                s.snapshot_bytes, s.log_bytes
            )
        }
        "isro" if ctx.serving() => "rw".to_owned(),
        "isro" if ctx.read_only_mode() => "ro".to_owned(),
        "isro" => "null".to_owned(),
        "dump" => dump(ctx),
        "hash" => {
            let r = ctx.replica();
            format!(
                "Digest in log: zxid={:#x}, digest={}\n",
                r.state().last_zxid(),
                r.state().digest()
            )
        }
        // ClickHouse Keeper's leadership words.
        "rqld" => {
            let consensus = ctx.consensus.clone();
            tokio::spawn(async move { consensus.request_leadership().await });
            "Sent leadership request to leader.".to_owned()
        }
        "ydld" => {
            let consensus = ctx.consensus.clone();
            tokio::spawn(async move { consensus.hand_over_leadership().await });
            "Sent yield leadership request to leader.".to_owned()
        }
        // gtmk/stmk: the trace mask is a JVM logging facility with nothing behind it here.
        other => format!("{other} is not supported by Warden.\n"),
    }
}

fn server_summary(ctx: &Context, with_clients: bool) -> String {
    // Before the replica is locked: the mode looks at it too.
    let mode = mode(ctx);
    let r = ctx.replica();
    let mut out = format!("Zookeeper version: {ZOOKEEPER_VERSION}\n");
    if with_clients {
        out.push_str("Clients:\n");
        out.push_str(&connections(&r));
        out.push('\n');
    }
    let (min, avg, max) = r.stats.latency.min_avg_max_ms();
    let outstanding: usize = r.clients().map(|c| c.outstanding()).sum();
    let _ = write!(
        out,
        "Latency min/avg/max: {}/{avg:.1}/{}\nReceived: {}\nSent: {}\nConnections: {}\n\
         Outstanding: {outstanding}\nZxid: {:#x}\nMode: {}\nNode count: {}\n",
        min as u64,
        max as u64,
        r.stats.packets_received.load(Ordering::Relaxed),
        r.stats.packets_sent.load(Ordering::Relaxed),
        r.clients().count(),
        r.state().last_zxid(),
        mode,
        r.state().tree().len(),
    );
    out
}

/// ZooKeeper's four-character operation names (`lop=` in `cons`).
fn op_name(op: i32) -> &'static str {
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

fn millis_since_epoch(t: SystemTime) -> u128 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn connection_line(peer: SocketAddr, session_id: i64, timeout_ms: i32, s: &ClientStats) -> String {
    let mut line = format!(" /{peer}[1](queued=0,recved={},sent={}", s.received, s.sent);
    if session_id != 0 {
        let ms = |d: Duration| d.as_millis();
        let (min, avg) = if s.answered == 0 {
            (0, 0)
        } else {
            (ms(s.min_latency), ms(s.total_latency / s.answered as u32))
        };
        let lresp = s.last_response.map_or(0, |t| {
            millis_since_epoch(SystemTime::now() - Instant::now().duration_since(t))
        });
        let _ = write!(
            line,
            ",sid={session_id:#x},lop={},est={},to={timeout_ms},lzxid={:#x},lresp={lresp},\
             llat=0,minlat={min},avglat={avg},maxlat={}",
            if s.last_op < 0 {
                "NA"
            } else {
                op_name(s.last_op)
            },
            millis_since_epoch(s.established),
            s.last_zxid,
            ms(s.max_latency),
        );
    }
    line.push_str(")\n");
    line
}

fn connections(r: &Replica) -> String {
    r.clients()
        .map(|c| connection_line(c.peer, c.session_id, c.timeout_ms, &c.stats))
        .collect()
}

fn conf(ctx: &Context) -> String {
    let c = &ctx.config;
    let status = ctx.consensus.status();
    format!(
        "clientPort={}\nsecureClientPort=-1\ndataDir={}\ndataDirSize={}\ndataLogDir={}\n\
         dataLogSize={}\ntickTime={}\nmaxClientCnxns={}\nminSessionTimeout={}\n\
         maxSessionTimeout={}\nclientPortListenBacklog=-1\nserverId={}\n{}",
        ctx.client_addr.port(),
        status.snapshot_dir.display(),
        status.snapshot_bytes,
        status.log_dir.display(),
        status.log_bytes,
        c.tick_time_ms,
        c.limits.connections_per_ip_max,
        c.session_timeout_ms_min,
        c.session_timeout_ms_max,
        c.cluster.my_id.unwrap_or(0),
        membership(ctx),
    )
}

/// The quorum part of `conf`, as ZooKeeper prints it for a member of an ensemble: this
/// server's ports and role, then the membership in force (`/zookeeper/config`) with its
/// version.
fn membership(ctx: &Context) -> String {
    let c = &ctx.config.cluster;
    let Some(me) = c.me().filter(|_| !ctx.consensus.standalone()) else {
        return String::new();
    };
    let (members, version) = crate::cluster::membership::current(ctx);
    let (members, version) = if members.is_empty() {
        (c.members.clone(), 0)
    } else {
        (members, version)
    };
    let observer = members
        .iter()
        .any(|m| m.id == me.id && m.role == crate::config::Role::Observer);
    let mut out = format!(
        "electionAlg=3\nelectionPort={}\nquorumPort={}\npeerType={}\nmembership: \n",
        me.election_port.map_or(-1, i32::from),
        me.peer_port,
        u8::from(observer),
    );
    out.push_str(&crate::cluster::membership::render(&members));
    let _ = writeln!(out, "version={version:x}");
    out
}

fn envi() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    let dir = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    format!(
        "Environment:\nzookeeper.version={ZOOKEEPER_VERSION}\nhost.name={host}\n\
         warden.version={}\nos.name={}\nos.arch={}\nuser.dir={dir}\n",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
    )
}

fn mntr(ctx: &Context) -> String {
    // Before the replica is locked: the mode looks at it too.
    let mode = mode(ctx);
    let r = ctx.replica();
    let state = r.state();
    let (min, avg, max) = r.stats.latency.min_avg_max_ms();
    let ephemerals: usize = state
        .sessions()
        .map(|(id, _)| state.tree().ephemerals_of(id).count())
        .sum();
    let data_bytes = state.tree().approximate_bytes();
    let status = ctx.consensus.status();
    let lines: Vec<(&str, String)> = vec![
        ("zk_version", ZOOKEEPER_VERSION.to_owned()),
        ("zk_server_state", mode.to_owned()),
        ("zk_ephemerals_count", ephemerals.to_string()),
        ("zk_num_alive_connections", r.clients().count().to_string()),
        ("zk_avg_latency", format!("{avg:.1}")),
        (
            "zk_outstanding_requests",
            r.clients()
                .map(|c| c.outstanding())
                .sum::<usize>()
                .to_string(),
        ),
        ("zk_znode_count", state.tree().len().to_string()),
        ("zk_global_sessions", state.sessions().count().to_string()),
        ("zk_local_sessions", "0".to_owned()),
        (
            "zk_packets_sent",
            r.stats.packets_sent.load(Ordering::Relaxed).to_string(),
        ),
        (
            "zk_packets_received",
            r.stats.packets_received.load(Ordering::Relaxed).to_string(),
        ),
        ("zk_watch_count", r.watches().len().to_string()),
        ("zk_min_latency", (min as u64).to_string()),
        ("zk_max_latency", (max as u64).to_string()),
        ("zk_approximate_data_size", data_bytes.to_string()),
        ("zk_uptime", ctx.started.elapsed().as_millis().to_string()),
        ("zk_last_zxid", format!("{:#x}", state.last_zxid())),
        ("zk_raft_term", status.term.to_string()),
        ("zk_raft_last_log_index", status.last_log_index.to_string()),
        ("zk_raft_applied_index", status.applied_index.to_string()),
        ("zk_raft_snapshot_index", status.snapshot_index.to_string()),
        ("zk_log_bytes", status.log_bytes.to_string()),
        ("zk_snapshot_bytes", status.snapshot_bytes.to_string()),
    ];
    let mut lines = lines;
    if !ctx.consensus.standalone() {
        lines.push((
            "zk_quorum_size",
            (status.voters.len() + status.learners.len()).to_string(),
        ));
    }
    if status.leader == Some(ctx.consensus.node_id()) && !ctx.consensus.standalone() {
        // The leader's own lines (LeaderZooKeeperServer's gauges): learners it replicates
        // to, and those that acknowledged within an election timeout.
        let synced = |set: &[u64]| {
            status
                .synced_followers
                .iter()
                .filter(|id| set.contains(id))
                .count()
                .to_string()
        };
        let learners = status.voters.len() + status.learners.len() - 1;
        lines.push(("zk_learners", learners.to_string()));
        lines.push(("zk_followers", learners.to_string()));
        lines.push(("zk_synced_followers", synced(&status.voters)));
        lines.push(("zk_synced_non_voting_followers", "0".to_owned()));
        lines.push(("zk_synced_observers", synced(&status.learners)));
        lines.push(("zk_pending_syncs", status.pending_syncs.to_string()));
    }
    lines
        .into_iter()
        .map(|(k, v)| format!("{k}\t{v}\n"))
        .collect()
}

fn wchs(r: &Replica) -> String {
    let by_session = r.watches().by_session();
    let paths = r.watches().by_path().len();
    format!(
        "{} connections watching {paths} paths\nTotal watches:{}\n",
        by_session.len(),
        r.watches().len()
    )
}

fn wchc(r: &Replica) -> String {
    let mut out = String::new();
    for (session, paths) in r.watches().by_session() {
        let _ = writeln!(out, "{session:#x}");
        for p in paths {
            let _ = writeln!(out, "\t{p}");
        }
    }
    out.push('\n');
    out
}

fn wchp(r: &Replica) -> String {
    let mut out = String::new();
    for (path, sessions) in r.watches().by_path() {
        let _ = writeln!(out, "{path}");
        for s in sessions {
            let _ = writeln!(out, "\t{s:#x}");
        }
    }
    out.push('\n');
    out
}

fn dump(ctx: &Context) -> String {
    let r = ctx.replica();
    let state = r.state();
    let sessions: Vec<i64> = state.sessions().map(|(id, _)| id).collect();
    let mut out = format!(
        "SessionTracker dump:\nSession Sets ({})/({}):\n",
        sessions.len(),
        sessions.len()
    );
    for id in &sessions {
        let _ = writeln!(out, "\t{id:#x}");
    }
    out.push_str("ephemeral nodes dump:\n");
    let with_ephemerals: Vec<(i64, Vec<String>)> = sessions
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
    let _ = writeln!(out, "Sessions with Ephemerals ({}):", with_ephemerals.len());
    for (id, paths) in with_ephemerals {
        let _ = writeln!(out, "{id:#x}:");
        for p in paths {
            let _ = writeln!(out, "\t{p}");
        }
    }
    out.push_str("Connections dump:\n");
    let _ = writeln!(out, "Connections Sets (1)/({}):", r.clients().count());
    for c in r.clients() {
        let _ = writeln!(out, "\tip: /{} sessionId: {:#x}", c.peer, c.session_id);
    }
    out
}
