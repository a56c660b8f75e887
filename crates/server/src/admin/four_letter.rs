//! Four-letter words on the client port, in ZooKeeper 3.9's exact text (monitoring tools and
//! client libraries parse them: kazoo reads `envi` for the version, checks scripts grep `srvr`
//! and `mntr`). Texts were taken from a running ZooKeeper 3.9.5; the facts come from
//! [`super::facts`], shared with the HTTP commands.

use std::fmt::Write as _;
use std::net::SocketAddr;

use tokio::io::AsyncWriteExt;

use warden_state::system::{self, Feature};

use super::facts::{self, Metric, last_response_ms, millis_since_epoch, op_name};
use super::families::{self, java_double};
use super::json::round4;
use super::{ZOOKEEPER_VERSION, commands};
use crate::replica::Replica;
use crate::server::Context;

/// Answers `word` and closes the connection.
pub async fn answer(
    ctx: &Context,
    word: &str,
    read: crate::tls::ClientRead,
    mut write: crate::tls::ClientWrite,
    peer: SocketAddr,
) {
    let text = if ctx.config.four_letter_word_enabled(word) {
        tracing::debug!(%peer, word, "four-letter word");
        render(ctx, word).await
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

async fn render(ctx: &Context, word: &str) -> String {
    let needs_quorum = !matches!(
        word,
        "ruok" | "conf" | "envi" | "dirs" | "isro" | "rqld" | "apiv" | "ftfl" | "uptm" | "lgif"
    );
    if needs_quorum && !facts::answering(ctx) {
        return NOT_SERVING.to_owned();
    }
    match word {
        "ruok" => "imok".to_owned(),
        "srvr" => server_summary(ctx, false),
        "stat" => server_summary(ctx, true),
        "conf" => conf(ctx),
        "cons" => {
            let mut out = connections(&facts::connections(&ctx.replica()));
            out.push('\n');
            out
        }
        "crst" => {
            commands::reset_connection_stats(ctx);
            "Connection stats reset.\n".to_owned()
        }
        "srst" => {
            commands::reset_server_stats(ctx);
            "Server stats reset.\n".to_owned()
        }
        "envi" => envi(),
        "mntr" => mntr(ctx),
        "wchs" => wchs(&ctx.replica()),
        "wchc" => wchc(&ctx.replica()),
        "wchp" => wchp(&ctx.replica()),
        "dirs" => {
            let (data, log) = facts::dirs(ctx);
            format!("datadir_size: {data}\nlogdir_size: {log}\n")
        }
        "isro" => match facts::read_only(ctx) {
            Some(false) => "rw",
            Some(true) => "ro",
            None => "null",
        }
        .to_owned(),
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
        // ClickHouse Keeper's: the API version and feature flags it reads from /keeper, a
        // snapshot now, the Raft log's positions.
        "apiv" => String::from_utf8_lossy(system::API_VERSION_VALUE).into_owned(),
        "ftfl" => {
            let mut out = String::new();
            for feature in Feature::ALL {
                let on = system::FEATURES.contains(&feature);
                let _ = writeln!(out, "{}\t{}", feature.name(), u8::from(on));
            }
            out
        }
        "csnp" => match ctx.consensus.snapshot_now().await {
            Some(index) => index.to_string(),
            None => "Failed to schedule snapshot creation task.".to_owned(),
        },
        "lgif" => {
            let l = ctx.consensus.log_info().await;
            format!(
                "first_log_idx\t{}\nfirst_log_term\t{}\nlast_log_idx\t{}\nlast_log_term\t{}\n\
                 last_committed_log_idx\t{}\nleader_committed_log_idx\t{}\n\
                 target_committed_log_idx\t{}\nlast_snapshot_idx\t{}\n",
                l.first_index,
                l.first_term,
                l.last_index,
                l.last_term,
                l.committed_index,
                l.cluster_committed_index,
                l.cluster_committed_index,
                l.snapshot_index,
            )
        }
        // RaftKeeper's: seconds since the server started.
        "uptm" => ctx.started.elapsed().as_secs().to_string(),
        // gtmk/stmk: the trace mask is a JVM logging facility with nothing behind it here.
        other => format!("{other} is not supported by Warden.\n"),
    }
}

fn server_summary(ctx: &Context, with_clients: bool) -> String {
    let s = facts::summary(ctx);
    let mut out = format!("Zookeeper version: {ZOOKEEPER_VERSION}\n");
    if with_clients {
        out.push_str("Clients:\n");
        out.push_str(&connections(&facts::connections(&ctx.replica())));
        out.push('\n');
    }
    let _ = write!(
        out,
        "Latency min/avg/max: {}/{:.1}/{}\nReceived: {}\nSent: {}\nConnections: {}\n\
         Outstanding: {}\nZxid: {:#x}\nMode: {}\nNode count: {}\n",
        s.latency_min_ms as u64,
        s.latency_avg_ms,
        s.latency_max_ms as u64,
        s.packets_received,
        s.packets_sent,
        s.connections,
        s.outstanding,
        s.zxid,
        s.mode,
        s.node_count,
    );
    out
}

fn connection_line(c: &facts::Connection) -> String {
    let s = &c.stats;
    let mut line = format!(
        " /{}[1](queued=0,recved={},sent={}",
        c.peer, s.received, s.sent
    );
    if c.session_id != 0 {
        let _ = write!(
            line,
            ",sid={:#x},lop={},est={},to={},lzxid={:#x},lresp={},\
             llat=0,minlat={},avglat={},maxlat={}",
            c.session_id,
            op_name(s.last_op),
            millis_since_epoch(s.established),
            c.timeout_ms,
            s.last_zxid,
            last_response_ms(s),
            s.min_latency_ms(),
            s.avg_latency_ms(),
            s.max_latency.as_millis(),
        );
    }
    line.push_str(")\n");
    line
}

fn connections(conns: &[facts::Connection]) -> String {
    conns.iter().map(connection_line).collect()
}

fn conf(ctx: &Context) -> String {
    let c = facts::conf(ctx);
    format!(
        "clientPort={}\nsecureClientPort={}\ndataDir={}\ndataDirSize={}\ndataLogDir={}\n\
         dataLogSize={}\ntickTime={}\nmaxClientCnxns={}\nminSessionTimeout={}\n\
         maxSessionTimeout={}\nclientPortListenBacklog=-1\nserverId={}\n{}",
        c.client_port,
        ctx.secure_client_addr.map_or(-1, |a| i32::from(a.port())),
        c.data_dir.display(),
        c.data_dir_bytes,
        c.log_dir.display(),
        c.log_dir_bytes,
        c.tick_time_ms,
        c.max_client_cnxns,
        c.session_timeout_ms_min,
        c.session_timeout_ms_max,
        c.server_id,
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
    let mut out = "Environment:\n".to_owned();
    for (key, value) in facts::environment() {
        let _ = writeln!(out, "{key}={value}");
    }
    out
}

/// ZooKeeper's gauges and Warden's own (facts::monitor), then the metrics provider's families
/// as ZooKeeper's default provider dumps them; averages as Java prints a double rounded to
/// four decimals.
fn mntr(ctx: &Context) -> String {
    let mut out = String::new();
    for (key, value) in families::monitor(ctx) {
        let _ = match value {
            Metric::Int(v) => writeln!(out, "zk_{key}\t{v}"),
            Metric::Float(v) => writeln!(out, "zk_{key}\t{}", java_double(round4(v))),
            Metric::Text(v) => writeln!(out, "zk_{key}\t{v}"),
        };
    }
    out
}

fn wchs(r: &Replica) -> String {
    let w = facts::watch_summary(r);
    format!(
        "{} connections watching {} paths\nTotal watches:{}\n",
        w.sessions, w.paths, w.watches
    )
}

fn wchc(r: &Replica) -> String {
    let mut out = String::new();
    for (session, paths) in facts::watches_by_session(r) {
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
    for (path, sessions) in facts::watches_by_path(r) {
        let _ = writeln!(out, "{path}");
        for s in sessions {
            let _ = writeln!(out, "\t{s:#x}");
        }
    }
    out.push('\n');
    out
}

fn dump(ctx: &Context) -> String {
    let d = facts::dump(ctx);
    let mut out = format!(
        "SessionTracker dump:\nSession Sets ({})/({}):\n",
        d.sessions.len(),
        d.sessions.len()
    );
    for id in &d.sessions {
        let _ = writeln!(out, "\t{id:#x}");
    }
    out.push_str("ephemeral nodes dump:\n");
    let _ = writeln!(out, "Sessions with Ephemerals ({}):", d.ephemerals.len());
    for (id, paths) in d.ephemerals {
        let _ = writeln!(out, "{id:#x}:");
        for p in paths {
            let _ = writeln!(out, "\t{p}");
        }
    }
    out.push_str("Connections dump:\n");
    let _ = writeln!(out, "Connections Sets (1)/({}):", d.connections.len());
    for (peer, session_id) in d.connections {
        let _ = writeln!(out, "\tip: /{peer} sessionId: {session_id:#x}");
    }
    out
}
