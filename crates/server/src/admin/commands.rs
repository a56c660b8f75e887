//! ZooKeeper 3.9's AdminServer commands (`Commands.java`): the table of names and aliases, and
//! each command's JSON with the field names, order and types of ZooKeeper 3.9.5's answers
//! (captured in ../shared/reference/zookeeper-3.9.5-samples/zk395-admin-json). Every answer
//! ends with `command` (the primary name) and `error` (null on success). The data comes from
//! [`super::facts`], as the four-letter words' does.

use std::sync::atomic::Ordering;

use super::ZOOKEEPER_VERSION;
use super::facts::{self, Metric, last_response_ms, millis_since_epoch, op_name};
use super::families;
use super::json::{Json, Object, round4};
use crate::config::Role;
use crate::server::Context;

/// One command of the table.
#[derive(Debug)]
pub struct Command {
    /// The primary name first (the one answers carry), then the aliases.
    pub names: &'static [&'static str],
    /// Whether it answers only while the server serves (ZooKeeper's `serverRequired`).
    pub server_required: bool,
    /// Whether it needs an `Authorization` header (ZooKeeper: ALL permission on `/`).
    pub auth: bool,
}

impl Command {
    pub fn name(&self) -> &'static str {
        self.names[0]
    }
}

const fn command(names: &'static [&'static str], server_required: bool) -> Command {
    Command {
        names,
        server_required,
        auth: false,
    }
}

/// ZooKeeper 3.9's commands, by primary name.
pub const COMMANDS: &[Command] = &[
    command(&["configuration", "conf", "config"], true),
    command(&["connection_stat_reset", "crst"], true),
    command(&["connections", "cons"], true),
    command(&["dirs"], true),
    command(&["dump"], true),
    command(&["environment", "env", "envi"], false),
    command(&["get_trace_mask", "gtmk"], false),
    command(&["hash"], true),
    command(&["initial_configuration", "icfg"], true),
    command(&["is_read_only", "isro"], true),
    command(&["last_snapshot", "lsnp"], true),
    command(&["leader", "lead"], true),
    command(&["monitor", "mntr"], false),
    command(&["observer_connection_stat_reset", "orst"], true),
    command(&["observers", "obsr"], true),
    Command {
        names: &["restore", "rest"],
        server_required: true,
        auth: true,
    },
    command(&["ruok"], true),
    command(&["server_stats", "srvr"], true),
    command(&["set_trace_mask", "stmk"], false),
    Command {
        names: &["snapshot", "snap"],
        server_required: true,
        auth: true,
    },
    command(&["stat_reset", "srst"], true),
    command(&["stats", "stat"], true),
    command(&["system_properties", "sysp"], false),
    command(&["voting_view"], true),
    command(&["watch_summary", "wchs"], true),
    command(&["watches", "wchc"], true),
    command(&["watches_by_path", "wchp"], true),
    command(&["zabstate"], false),
];

/// The command `name` is a name or alias of.
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.names.contains(&name))
}

/// An answer: the HTTP status and the JSON body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: Object,
}

impl Response {
    fn new(status: u16, command: &str, mut fields: Object, error: Option<String>) -> Response {
        fields.put("command", command);
        // A command's own `error` field keeps its place and value (LIVE leader.txt).
        match error {
            Some(error) => {
                fields.put("error", error);
            }
            None if fields.get("error").is_none() => {
                fields.put("error", Json::Null);
            }
            None => {}
        }
        Response {
            status,
            body: fields,
        }
    }

    fn error(status: u16, command: &str, error: impl Into<String>) -> Response {
        Response::new(status, command, Object::new(), Some(error.into()))
    }

    /// A status with ZooKeeper's bare answer, `error` null (as its `snapshot` and `restore`
    /// answer 503, 429 and 500).
    pub(super) fn status(status: u16, command: &str) -> Response {
        Response::new(status, command, Object::new(), None)
    }

    /// A status with `error` saying why.
    pub(super) fn failed(status: u16, command: &str, error: impl Into<String>) -> Response {
        Response::error(status, command, error)
    }

    pub(super) fn with_fields(status: u16, command: &str, fields: Object) -> Response {
        Response::new(status, command, fields, None)
    }
}

/// ZooKeeper's answer to a command that needs a serving server, when this one does not.
pub(super) fn not_serving(primary: &str) -> Response {
    Response::error(
        200,
        primary,
        "This ZooKeeper instance is not currently serving requests",
    )
}

/// ZooKeeper's trace mask when nobody set one (`ZooTrace`); Warden has no trace log to mask.
const TRACE_MASK_DEFAULT: i64 = 306;

/// Runs the command `name` names (any alias) for a GET.
pub fn run(ctx: &Context, name: &str) -> Response {
    let Some(command) = find(name) else {
        // ZooKeeper answers 200 here, with the name as asked.
        return Response::error(200, name, format!("Unknown command: {name}"));
    };
    let primary = command.name();
    if command.server_required && !facts::answering(ctx) {
        return not_serving(primary);
    }
    if command.auth {
        // `snapshot` is answered by admin::snapshots; this is a GET of `restore`.
        return Response::error(405, primary, format!("{primary} takes a POST"));
    }
    match fields(ctx, primary) {
        Ok(fields) => Response::new(200, primary, fields, None),
        Err(why) => Response::error(503, primary, why),
    }
}

/// A POST of any command but `restore` (which admin::snapshots answers): ZooKeeper takes
/// none.
pub fn run_post(ctx: &Context, name: &str) -> Response {
    match find(name) {
        Some(c) => Response::error(405, c.name(), format!("{} does not take a POST", c.name())),
        None => run(ctx, name),
    }
}

/// Warden's own command, beside ZooKeeper's table: a POST that ends the mirroring of a
/// ZooKeeper ensemble (docs/migration.md).
pub const PROMOTE: &str = "promote";

/// `POST promote`: with the credentials of ZooKeeper's admin commands (`Authorization: digest
/// user:password`, which must hold ALL on `/`, as ZooKeeper's `Commands.checkAuth` asks), on
/// the leader, while the state mirrors: proposes the end of mirroring and answers once it is
/// applied here, with the last zxid mirrored (Warden's next write takes the one after).
pub async fn promote(ctx: &Context, authorization: Option<&str>) -> Response {
    let Some(credential) = authorization.and_then(|a| a.trim().strip_prefix("digest ")) else {
        return Response::error(
            401,
            PROMOTE,
            "Auth info is missing for the command (Authorization: digest user:password)",
        );
    };
    let ids = warden_state::acl::authenticate_digest(
        credential.trim(),
        ctx.config.super_digest.as_deref(),
    );
    {
        let replica = ctx.replica();
        let root = replica.state().tree().root();
        if !warden_state::acl::permits(root.acl(), warden_proto::types::perms::ALL, &ids) {
            return Response::error(403, PROMOTE, "Not authorized: no ALL permission on /");
        }
        if !replica.state().mirroring() {
            return Response::error(409, PROMOTE, "this server mirrors no ZooKeeper ensemble");
        }
    }
    if !ctx.consensus.is_leader() {
        let leader = ctx
            .consensus
            .leader()
            .map_or("none".into(), |l| l.to_string());
        return Response::error(
            503,
            PROMOTE,
            format!("this server does not lead; promote on the leader (server {leader})"),
        );
    }
    let proposal = crate::consensus::Proposal::own(0, warden_state::TxnKind::Promote);
    if let Err(e) = ctx.consensus.propose_and_wait(proposal, None).await {
        return Response::error(
            503,
            PROMOTE,
            format!("the promotion was not committed: {e}"),
        );
    }
    let zxid = ctx.replica().state().last_zxid();
    tracing::info!(
        zxid = format_args!("{zxid:#x}"),
        "promoted: mirroring ended, Warden takes writes"
    );
    let mut o = Object::new();
    o.put("last_zxid", format!("{zxid:#x}"));
    Response::new(200, PROMOTE, o, None)
}

/// The fields of a command that answers; `Err` says why Warden cannot answer it.
fn fields(ctx: &Context, primary: &str) -> Result<Object, String> {
    let mut o = Object::new();
    match primary {
        "configuration" => configuration(ctx, &mut o),
        "connection_stat_reset" => reset_connection_stats(ctx),
        "connections" => {
            let (plain, secure) = by_port(ctx, facts::connections(&ctx.replica()));
            o.put(
                "connections",
                plain.iter().map(connection_full).collect::<Vec<_>>(),
            )
            .put(
                "secure_connections",
                secure.iter().map(connection_full).collect::<Vec<_>>(),
            );
        }
        "dirs" => {
            let (data, log) = facts::dirs(ctx);
            o.put("datadir_size", data).put("logdir_size", log);
        }
        "dump" => dump(ctx, &mut o),
        "environment" => {
            for (key, value) in facts::environment() {
                o.put(key, value);
            }
        }
        "get_trace_mask" => {
            o.put("tracemask", TRACE_MASK_DEFAULT);
        }
        "hash" => {
            let r = ctx.replica();
            let mut digest = Object::new();
            digest
                .put("zxid", r.state().last_zxid())
                .put("digest_version", WARDEN_DIGEST_VERSION)
                .put("digest", r.state().digest() as i64);
            o.put("digests", vec![Json::Object(digest)]);
        }
        "initial_configuration" => {
            let text = ctx.config.source_text.as_deref().unwrap_or_default();
            o.put("initial_configuration", without_passwords(text));
        }
        "is_read_only" => {
            o.put("read_only", facts::read_only(ctx) == Some(true));
        }
        "leader" => leader(ctx, &mut o),
        "monitor" => monitor(ctx, &mut o),
        // Warden has no observer masters, so no observer connections to reset.
        "observer_connection_stat_reset" | "ruok" => {}
        "observers" => observers(ctx, &mut o),
        "server_stats" => server_stats(ctx, &mut o),
        "stat_reset" => reset_server_stats(ctx),
        "stats" => {
            server_stats(ctx, &mut o);
            let (plain, secure) = by_port(ctx, facts::connections(&ctx.replica()));
            o.put(
                "connections",
                plain.iter().map(connection_brief).collect::<Vec<_>>(),
            )
            .put(
                "secure_connections",
                secure.iter().map(connection_brief).collect::<Vec<_>>(),
            );
        }
        "voting_view" => voting_view(ctx, &mut o),
        "watch_summary" => {
            let w = facts::watch_summary(&ctx.replica());
            o.put("num_connections", w.sessions)
                .put("num_paths", w.paths)
                .put("num_total_watches", w.watches);
        }
        "watches" => {
            let mut by_session = Object::new();
            for (session, paths) in facts::watches_by_session(&ctx.replica()) {
                by_session.put(session.to_string(), paths);
            }
            o.put("session_id_to_watched_paths", by_session);
        }
        "watches_by_path" => {
            let mut by_path = Object::new();
            for (path, sessions) in facts::watches_by_path(&ctx.replica()) {
                by_path.put(path, sessions);
            }
            o.put("path_to_session_ids", by_path);
        }
        "zabstate" => zabstate(ctx, &mut o),
        "last_snapshot" => {
            // ZooKeeper: the zxid in the newest snapshot's name, in hex without 0x, and the
            // file's mtime in seconds. Before Warden's first snapshot: 0 and 0.
            let (zxid, written) = ctx
                .consensus
                .last_snapshot()
                .map_err(|e| format!("cannot read the last snapshot: {e}"))?
                .map_or((0, 0), |(zxid, at)| (zxid, millis_since_epoch(at) / 1000));
            o.put("zxid", format!("{zxid:x}")).put("timestamp", written);
        }
        "set_trace_mask" => {
            return Err("set_trace_mask is not supported by Warden: it has no trace log".into());
        }
        "system_properties" => {
            return Err("system_properties is not supported by Warden: it has no JVM".into());
        }
        other => return Err(format!("{other} is not supported by Warden yet")),
    }
    Ok(o)
}

/// `digest_version` of `hash`: Warden's own tree digest (xxh3), not ZooKeeper's version 2
/// (CRC32 per node); 0 so that no tool compares the two.
const WARDEN_DIGEST_VERSION: i64 = 0;

/// `crst`, `connection_stat_reset`.
pub fn reset_connection_stats(ctx: &Context) {
    for client in ctx.replica().clients_mut() {
        client.stats.reset();
    }
}

/// `srst`, `stat_reset`.
pub fn reset_server_stats(ctx: &Context) {
    ctx.replica().stats.reset();
}

fn configuration(ctx: &Context, o: &mut Object) {
    let c = facts::conf(ctx);
    o.put("client_port", c.client_port)
        .put("data_dir", c.data_dir.display().to_string())
        .put("data_log_dir", c.log_dir.display().to_string())
        .put("tick_time", c.tick_time_ms)
        .put("max_client_cnxns", c.max_client_cnxns)
        .put("min_session_timeout", c.session_timeout_ms_min)
        .put("max_session_timeout", c.session_timeout_ms_max)
        .put("server_id", c.server_id)
        .put("client_port_listen_backlog", -1);
}

/// ZooKeeper's `getConnectionInfo(false)`: the brief fields, then the session's.
/// The config file's text with what follows every key naming a password (the TLS stores')
/// replaced by `********`: the admin server shows no credential.
fn without_passwords(text: &str) -> String {
    text.lines()
        .map(|line| {
            // zoo.cfg's `ssl.keyStore.password=...`, the TOML's `password = "..."` (also inline).
            let at = line.to_ascii_lowercase().find("password");
            match at.and_then(|at| line[at..].find(['=', ':']).map(|end| at + end)) {
                Some(end) => format!("{}********", &line[..=end]),
                None => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}

/// Connections on the client port, and on the secure client port (ZooKeeper lists each
/// connection factory's apart).
fn by_port(
    ctx: &Context,
    conns: Vec<facts::Connection>,
) -> (Vec<facts::Connection>, Vec<facts::Connection>) {
    let secure = ctx.secure_peers.lock().expect("secure_peers lock poisoned");
    conns.into_iter().partition(|c| !secure.contains(&c.peer))
}

fn connection_full(c: &facts::Connection) -> Json {
    let Json::Object(mut o) = connection_brief(c) else {
        unreachable!("connection_brief makes an object")
    };
    if c.session_id != 0 {
        let s = &c.stats;
        o.put("session_id", c.session_id)
            .put("last_operation", op_name(s.last_op))
            .put("established", millis_since_epoch(s.established))
            .put("session_timeout", c.timeout_ms)
            // Warden does not keep a connection's last xid.
            .put("last_cxid", -1)
            .put("last_zxid", s.last_zxid)
            .put("last_response_time", last_response_ms(s))
            .put("last_latency", 0)
            .put("min_latency", s.min_latency_ms())
            .put("avg_latency", s.avg_latency_ms())
            .put("max_latency", s.max_latency.as_millis() as u64);
    }
    Json::Object(o)
}

fn connection_brief(c: &facts::Connection) -> Json {
    let mut o = Object::new();
    o.put("remote_socket_address", c.peer.to_string())
        // OP_READ: a connection is always read from.
        .put("interest_ops", 1)
        .put("outstanding_requests", c.outstanding)
        .put("packets_received", c.stats.received)
        .put("packets_sent", c.stats.sent);
    Json::Object(o)
}

fn dump(ctx: &Context, o: &mut Object) {
    let d = facts::dump(ctx);
    let mut expiry = Object::new();
    for (at, sessions) in d.expiry {
        expiry.put(at.to_string(), sessions);
    }
    let mut ephemerals = Object::new();
    for (session, paths) in d.ephemerals {
        ephemerals.put(session.to_string(), paths);
    }
    o.put("expiry_time_to_session_ids", expiry)
        .put("session_id_to_ephemeral_paths", ephemerals);
}

fn leader(ctx: &Context, o: &mut Object) {
    if ctx.consensus.standalone() {
        o.put("error", "server is not initialized");
        return;
    }
    let me = ctx.consensus.node_id();
    let leader = ctx.consensus.leader();
    let leader_ip = leader
        .and_then(|id| ctx.config.cluster.members.iter().find(|m| m.id == id))
        .map(|m| m.host.clone())
        .unwrap_or_default();
    o.put("is_leader", leader == Some(me))
        .put("leader_id", leader.map_or(-1, |id| id as i64))
        .put("leader_ip", leader_ip);
}

/// As `mntr`: ZooKeeper's gauges and Warden's own, then the metrics provider's families.
fn monitor(ctx: &Context, o: &mut Object) {
    for (key, value) in families::monitor(ctx) {
        o.put(
            key,
            match value {
                Metric::Int(v) => Json::Int(v),
                Metric::Float(v) => Json::Float(round4(v)),
                Metric::Text(v) => Json::Str(v),
            },
        );
    }
}

/// ZooKeeper's leader counts the observers synced to it; Warden's leader the learners that
/// acknowledged within an election timeout. Warden has no observer masters, so followers
/// answer 0 as ZooKeeper's do without one.
fn observers(ctx: &Context, o: &mut Object) {
    let status = ctx.consensus.status();
    let synced = if status.leader == Some(ctx.consensus.node_id()) {
        status
            .synced_followers
            .iter()
            .filter(|id| status.learners.contains(id))
            .count()
    } else {
        0
    };
    o.put("synced_observers", synced)
        .put("observers", Vec::<Json>::new());
}

/// A size summary ZooKeeper keeps (`BufferStats`): last, min and max, -1 for "none yet".
fn buffer_stats((last, min, max): (i64, i64, i64)) -> Object {
    let mut o = Object::new();
    o.put("last_buffer_size", last)
        .put("min_buffer_size", min)
        .put("max_buffer_size", max);
    o
}

fn server_stats(ctx: &Context, o: &mut Object) {
    let s = facts::summary(ctx);
    let responses = ctx.stats.response_sizes.last_min_max();
    let read_only = s.mode == "read-only";
    let mut stats = Object::new();
    stats
        .put("packets_sent", s.packets_sent)
        .put("packets_received", s.packets_received)
        .put("fsync_threshold_exceed_count", s.fsync_threshold_exceeded)
        .put("client_response_stats", buffer_stats(responses))
        .put("data_dir_size", s.data_dir_bytes)
        .put("log_dir_size", s.log_dir_bytes)
        .put("provider_null", false)
        .put("last_processed_zxid", s.zxid)
        .put("outstanding_requests", s.outstanding)
        .put("server_state", s.mode)
        .put("avg_latency", round4(s.latency_avg_ms))
        .put("max_latency", s.latency_max_ms as i64)
        .put("min_latency", s.latency_min_ms as i64)
        .put("num_alive_client_connections", s.connections)
        .put("uptime", s.uptime_ms)
        .put("auth_failed_count", s.auth_failed)
        // Sic: Jackson's name for getNonMTLSRemoteConnCount.
        .put(
            "non_mtlsremote_conn_count",
            ctx.plain_connections.remote.load(Ordering::Relaxed),
        )
        .put(
            "non_mtlslocal_conn_count",
            ctx.plain_connections.local.load(Ordering::Relaxed),
        );
    o.put("version", ZOOKEEPER_VERSION)
        .put("read_only", read_only)
        .put("server_stats", stats)
        .put("client_response", buffer_stats(responses));
    if s.mode == "leader" {
        o.put(
            "proposal_stats",
            buffer_stats(ctx.stats.proposal_sizes.last_min_max()),
        );
    }
    o.put("node_count", s.node_count);
}

fn voting_view(ctx: &Context, o: &mut Object) {
    let mut view = Object::new();
    for m in facts::members(ctx) {
        let host = |port: u16| crate::config::HostPort::new(m.host.clone(), port).to_string();
        let mut info = Object::new();
        info.put("server_addresses", vec![host(m.peer_port)])
            .put(
                "election_addresses",
                m.election_port.map(host).into_iter().collect::<Vec<_>>(),
            )
            .put(
                "client_address",
                m.client.as_ref().map(|c| c.to_string()).unwrap_or_default(),
            )
            .put(
                "learner_type",
                match m.role {
                    Role::Participant => "participant",
                    Role::Observer => "observer",
                },
            );
        view.put(m.id.to_string(), info);
    }
    o.put("current_config", view);
}

fn zabstate(ctx: &Context, o: &mut Object) {
    let me = ctx
        .config
        .cluster
        .me()
        .filter(|_| !ctx.consensus.standalone());
    let Some(me) = me else {
        o.put("voting", false).put("zabstate", "");
        return;
    };
    let zxid = ctx.replica().state().last_zxid();
    let host = |port: u16| crate::config::HostPort::new(me.host.clone(), port).to_string();
    o.put("myid", me.id)
        .put("is_leader", ctx.consensus.is_leader())
        .put("quorum_address", host(me.peer_port))
        .put(
            "election_address",
            me.election_port.map(host).unwrap_or_default(),
        )
        .put("client_address", ctx.client_addr.to_string())
        .put("voting", me.role == Role::Participant)
        .put("last_zxid", format!("{zxid:#x}"))
        .put("zab_epoch", zxid >> 32)
        .put("zab_counter", zxid & 0xffff_ffff)
        .put(
            "zabstate",
            if ctx.serving() {
                "broadcast"
            } else {
                "election"
            },
        );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name and alias of ZooKeeper 3.9's `Commands.java` static block, once.
    #[test]
    fn names_and_aliases_are_zookeepers_and_unique() {
        let mut all: Vec<&str> = COMMANDS
            .iter()
            .flat_map(|c| c.names.iter().copied())
            .collect();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "a name appears twice");
        assert_eq!(COMMANDS.len(), 28);
        assert_eq!(find("stat").map(Command::name), Some("stats"));
        assert_eq!(find("mntr").map(Command::name), Some("monitor"));
        assert_eq!(find("srvr").map(Command::name), Some("server_stats"));
        assert!(find("follower").is_none());
        let primaries: Vec<&str> = COMMANDS.iter().map(Command::name).collect();
        let mut sorted = primaries.clone();
        sorted.sort_unstable();
        assert_eq!(
            primaries, sorted,
            "kept sorted, as the links page lists them"
        );
    }

    #[test]
    fn a_commands_own_error_keeps_its_place_and_value() {
        let mut o = Object::new();
        o.put("error", "server is not initialized");
        let r = Response::new(200, "leader", o, None);
        assert_eq!(
            Json::Object(r.body).to_pretty(),
            "{\n  \"error\" : \"server is not initialized\",\n  \"command\" : \"leader\"\n}"
        );
        let r = Response::error(200, "nosuchcmd", "Unknown command: nosuchcmd");
        assert_eq!(
            Json::Object(r.body).to_pretty(),
            "{\n  \"command\" : \"nosuchcmd\",\n  \"error\" : \"Unknown command: nosuchcmd\"\n}"
        );
    }
}
