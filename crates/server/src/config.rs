//! The server's settings: every knob and every bound in one place, each bound named with its
//! unit last. [`Config::default`] runs a one-node server on 127.0.0.1:2181 with its data in
//! ./warden-data.
//!
//! Two ways in, one way out: Warden's own TOML ([`Config::load_toml`]: every key optional, an
//! unknown key an error) and ZooKeeper's zoo.cfg ([`Config::from_zoo_cfg`], in
//! [`crate::zoo_cfg`]) both end in [`Config::validate`], so the server only ever sees a config
//! whose values make sense together.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use warden_proto::frame::FOUR_LETTER_WORDS;

/// Everything `warden server` can be told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where clients connect (ZooKeeper's clientPortAddress:clientPort).
    pub client_listen: HostPort,
    /// Where snapshots live, and the log too unless `log_dir` is set (ZooKeeper's dataDir).
    pub data_dir: PathBuf,
    /// A separate directory for the log, e.g. on its own disk (ZooKeeper's dataLogDir).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_dir: Option<PathBuf>,
    /// The time unit the session timeout defaults are multiples of (ZooKeeper's tickTime).
    pub tick_time_ms: u32,
    /// Shortest session timeout granted to a client; default 2 × tick_time_ms.
    pub session_timeout_ms_min: u32,
    /// Longest session timeout granted to a client; default 20 × tick_time_ms.
    pub session_timeout_ms_max: u32,
    /// Four-letter words answered on the client port ("*" for all); default ZooKeeper's ["srvr"].
    pub four_letter_words: Vec<String>,
    /// `user:base64(sha1(user:password))`, whose holder passes every ACL check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub super_digest: Option<String>,
    /// Whether TTL nodes may be created (ZooKeeper's extendedTypesEnabled; Warden default on).
    pub extended_types_enabled: bool,
    /// Whether quota hard limits refuse writes with QuotaExceeded (ZooKeeper's enforceQuota,
    /// default off). Only the leader's setting counts: it is stamped into each write.
    pub enforce_quota: bool,
    /// A log append that takes longer than this to become durable is logged and counted in
    /// `fsync_threshold_exceed_count` (ZooKeeper's fsync.warningthresholdms, default 1000).
    pub fsync_warning_threshold_ms: u64,
    /// Whether every read is linearizable, as if the client sent `sync` before it (ClickHouse
    /// Keeper's quorum_reads, without writing reads into the log). Off: ZooKeeper's reads.
    pub linearizable_reads: bool,
    /// Bounds on what clients may make the server hold.
    pub limits: Limits,
    /// When snapshots are taken.
    pub snapshots: Snapshots,
    /// Which old snapshots and log segments are deleted, and how often.
    pub purge: Purge,
    /// How empty containers and expired TTL nodes are found and deleted.
    pub containers: Containers,
    /// The servers of the ensemble and which one this is.
    pub cluster: Cluster,
    /// The admin HTTP endpoint.
    pub admin: Admin,
    /// The Prometheus metrics endpoint.
    pub metrics: Metrics,
    /// SASL authentication, the `sasl` ACL scheme, required authentication.
    pub auth: Auth,
    /// TLS for clients: the secure port, key and trust stores (docs/security.md).
    pub tls: crate::tls::Tls,
    /// TLS between servers, and for the admin HTTP server when it serves HTTPS
    /// (docs/security.md).
    pub quorum_tls: crate::tls::QuorumTls,
    /// Following a running ZooKeeper ensemble as its observer until promoted
    /// (docs/migration.md, "Online migration").
    pub migration: Migration,
    /// The zoo.cfg this server was started from, which it keeps up to date with the
    /// membership as ZooKeeper does (`zoo_cfg::dynamic`); none for Warden's TOML, which is
    /// never rewritten.
    #[serde(skip)]
    pub zoo_cfg: Option<crate::zoo_cfg::ZooCfgFiles>,
    /// The file the config was read from, as written (the `initial_configuration` command).
    #[serde(skip)]
    pub source_text: Option<String>,
}

/// Room a peer frame keeps beside the largest client request it carries as a log entry: the
/// entry's own fields and the append's.
pub const PEER_FRAME_HEADROOM_BYTES: u32 = 1 << 20;

/// The smallest peer frame that carries a client frame of `frame_bytes_max` as a log entry.
pub fn peer_frame_bytes_min(frame_bytes_max: u32) -> u32 {
    frame_bytes_max.saturating_add(PEER_FRAME_HEADROOM_BYTES)
}

/// Bounds on connections, frames, queues and watches. A connection count of 0 means no limit,
/// as in ZooKeeper; every other bound is a hard number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest frame a client may send, length prefix excluded (ZooKeeper's jute.maxbuffer).
    pub frame_bytes_max: u32,
    /// Client connections open at once on this server, 0 for no limit (ZooKeeper's maxCnxns).
    pub connections_max: u32,
    /// Client connections from one IP address, 0 for no limit (ZooKeeper's maxClientCnxns).
    pub connections_per_ip_max: u32,
    /// Requests received and not yet answered on this server; beyond it no more are read.
    pub outstanding_requests_max: u32,
    /// Requests received and not yet answered on one session; beyond it no more are read.
    pub outstanding_requests_per_session_max: u32,
    /// Bytes of responses and events waiting to go out to one client before it is cut off.
    pub outbound_queue_bytes_per_session_max: u64,
    /// Watches one session may hold, one-shot and persistent together.
    pub watches_per_session_max: u32,
    /// Ephemeral znodes one session may own.
    pub ephemerals_per_session_max: u32,
    /// The rate at which sessions are created and resumed (ZooKeeper's connection throttle).
    pub connection_throttle: crate::throttle::ConnectionThrottle,
}

/// When snapshots are taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Snapshots {
    /// Transactions between two snapshots (ZooKeeper's snapCount).
    pub interval_txns: u64,
    /// Bytes of log since the last snapshot at which the next one is due, whatever the count
    /// of transactions; 0 for no such limit (ZooKeeper's snapSizeLimitInKb, in bytes).
    pub log_bytes_max: u64,
    /// Take a snapshot at a clean stop (SIGTERM, SIGINT) when entries were applied since the
    /// last one, so that the next start loads it and replays no log (ClickHouse Keeper's
    /// `create_snapshot_on_exit`). A crash still restarts from the last snapshot and the log.
    pub on_exit: bool,
}

/// Which old snapshots and log segments are deleted, and how often (ZooKeeper's autopurge.*).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Purge {
    /// Newest snapshots kept, with the log they need; at least 3 (autopurge.snapRetainCount).
    pub snapshots_retained_count: u32,
    /// Hours between purges, 0 for never (autopurge.purgeInterval).
    pub interval_hours: u32,
}

/// How empty containers and expired TTL nodes are found and deleted (ZooKeeper's
/// znode.container.* properties).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Containers {
    /// Time between two looks for empty containers and expired TTL nodes.
    pub check_interval_ms: u32,
    /// Age after which a container that never had a child is deleted, 0 for never.
    pub never_used_interval_ms: u64,
    /// Containers and TTL nodes deleted per minute at most, so a sweep never floods the log.
    pub deletes_per_minute_max: u32,
}

/// The servers of the ensemble and which one this is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cluster {
    /// This server's id (ZooKeeper's myid file); required when `members` is not empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub my_id: Option<u64>,
    /// Every server of the ensemble, this one included; empty for a one-node server.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<Member>,
    /// Writes a follower holds on their way to the leader; a write that finds the queue full
    /// is answered ThrottledOp (-127) instead of growing the follower's memory.
    pub forward_queue_max: u32,
    /// Largest frame a peer may send (a Raft append, a snapshot chunk, a forwarded write); a
    /// peer that sends a larger one is disconnected.
    pub peer_frame_bytes_max: u32,
    /// The largest snapshot this server accepts from a leader when it catches up; a larger
    /// transfer is refused (the leader's log says why).
    pub snapshot_bytes_max: u64,
    /// Whether a server cut off from its quorum serves reads to clients that allow it
    /// (ZooKeeper's readonlymode.enabled): their writes are answered NotReadOnly.
    pub read_only_mode: bool,
    /// Whether clients may change the membership with `reconfig` (ZooKeeper's
    /// reconfigEnabled, off by default as there); off, reconfig answers ReconfigDisabled.
    pub reconfig_enabled: bool,
    /// ZooKeeper's standaloneEnabled (on by default, as there). On, a reconfig may not leave
    /// fewer than two voters (ZooKeeper's rule: one would run standalone); off, one is enough.
    pub standalone_enabled: bool,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            my_id: None,
            members: Vec::new(),
            forward_queue_max: 10_000,
            peer_frame_bytes_max: 64 << 20,
            snapshot_bytes_max: 64 << 30,
            read_only_mode: false,
            reconfig_enabled: false,
            standalone_enabled: true,
        }
    }
}

/// SASL DIGEST-MD5 client authentication, the `sasl` ACL scheme and required authentication
/// (docs/security.md). The passwords stay in the JAAS file; nothing here is secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Auth {
    /// Whether ACLs may name the `sasl` scheme (zoo.cfg:
    /// `authProvider.N=org.apache.zookeeper.server.auth.SASLAuthenticationProvider`).
    pub sasl_scheme: bool,
    /// The JAAS login file whose section `jaas_section` lists the SASL users as
    /// `user_<name>="<password>"` (ZooKeeper's `-Djava.security.auth.login.config`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jaas_file: Option<PathBuf>,
    /// The section of `jaas_file` (ZooKeeper's `zookeeper.sasl.serverconfig`).
    pub jaas_section: String,
    /// SASL users who pass every ACL check, as the super digest's holder does
    /// (`zookeeper.superUser`, `zookeeper.superUser.N`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sasl_super_users: Vec<String>,
    /// Schemes one of which a client must have authenticated with before any request but
    /// `auth` and SASL; empty for none. ZooKeeper's `enforce.auth.enabled` with
    /// `enforce.auth.schemes`; `sessionRequireClientSASLAuth=true` is `["sasl"]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required_schemes: Vec<String>,
}

impl Default for Auth {
    fn default() -> Self {
        Auth {
            sasl_scheme: false,
            jaas_file: None,
            jaas_section: JAAS_SECTION_DEFAULT.to_owned(),
            sasl_super_users: Vec::new(),
            required_schemes: Vec::new(),
        }
    }
}

impl Auth {
    /// Whether the SASL failure of a client is answered SessionClosedRequireSaslAuth rather
    /// than AuthFailed (ZooKeeper's `AuthenticationHelper.isSaslAuthRequired`).
    pub fn sasl_required(&self) -> bool {
        self.required_schemes.iter().any(|s| s == "sasl")
    }

    /// `x509`: whether clients may authenticate with certificates (TLS with client auth).
    fn validate(&self, x509: bool) -> Result<(), InvalidConfig> {
        // As ZooKeeper's AuthenticationHelper: a required scheme must have a provider.
        for scheme in &self.required_schemes {
            let available = match scheme.as_str() {
                "digest" | "ip" => true,
                "sasl" => self.sasl_scheme,
                "x509" => x509,
                _ => false,
            };
            if !available {
                return Err(InvalidConfig(format!(
                    "auth required_schemes names {scheme:?}, which is not available (digest, \
                     ip, sasl with sasl_scheme = true, x509 with TLS and client certificates)"
                )));
            }
        }
        if self.jaas_section.is_empty() {
            return Err(InvalidConfig("auth jaas_section is empty".into()));
        }
        Ok(())
    }
}

/// The ZooKeeper ensemble the leader follows as an observer, mirroring it, until promoted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Migration {
    /// The quorum ports of the ensemble's servers (the first port of each `server.N` line),
    /// `host:port,host:port`, tried in turn until the leader answers; empty: no following.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub follow: String,
    /// This server's id in the ensemble's `server.N` lines (where it is `:observer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observer_id: Option<u64>,
    /// Longest wait for the ZooKeeper leader's next bytes (it pings every half tick) before
    /// the connection is given up and made again.
    pub packet_wait_ms: u32,
    /// Largest packet data taken from the ZooKeeper leader (one transaction).
    pub packet_bytes_max: u32,
    /// Largest snapshot taken from the ZooKeeper leader after SNAP. It enters Warden's log as
    /// one entry, so it must fit a peer frame (`cluster.peer_frame_bytes_max`).
    pub snapshot_bytes_max: u32,
}

impl Default for Migration {
    fn default() -> Self {
        Migration {
            follow: String::new(),
            observer_id: None,
            packet_wait_ms: 20_000,
            packet_bytes_max: 8 << 20,
            snapshot_bytes_max: 48 << 20,
        }
    }
}

/// Room in a peer frame beside a mirrored snapshot (the entry's other fields and framing).
const MIGRATION_FRAME_OVERHEAD_BYTES: u32 = 1 << 20;

impl Migration {
    /// The ensemble's quorum addresses, in the order given.
    pub fn addresses(&self) -> Vec<String> {
        self.follow
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn validate(&self, peer_frame_bytes_max: u32) -> Result<(), InvalidConfig> {
        let invalid = |message: String| Err(InvalidConfig(message));
        let addresses = self.addresses();
        if addresses.is_empty() {
            return Ok(());
        }
        for a in &addresses {
            let port = a.rsplit_once(':').map(|(_, p)| p.parse::<u16>());
            if !matches!(port, Some(Ok(p)) if p > 0) {
                return invalid(format!(
                    "migration follow: {a:?} is not host:port (a ZooKeeper server's quorum port)"
                ));
            }
        }
        if self.observer_id.is_none() {
            return invalid(
                "migration follow needs observer_id: this server's N in the ensemble's \
                 server.N=...:observer line"
                    .into(),
            );
        }
        if self.packet_wait_ms == 0 || self.packet_bytes_max == 0 {
            return invalid(
                "migration packet_wait_ms and packet_bytes_max must be at least 1".into(),
            );
        }
        if self.snapshot_bytes_max
            > peer_frame_bytes_max.saturating_sub(MIGRATION_FRAME_OVERHEAD_BYTES)
        {
            return invalid(format!(
                "migration snapshot_bytes_max = {} must leave 1 MiB of cluster \
                 peer_frame_bytes_max = {peer_frame_bytes_max}: the snapshot is one log entry",
                self.snapshot_bytes_max
            ));
        }
        Ok(())
    }
}

/// One server of the ensemble, as a `server.N` line of zoo.cfg describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    /// The server's id: the N of server.N, and what its myid says. Never reused.
    pub id: u64,
    /// The host name or IP address other servers reach it at.
    pub host: String,
    /// The port servers talk to each other on (ZooKeeper's quorum port, 2888 by convention).
    pub peer_port: u16,
    /// ZooKeeper's leader election port (3888 by convention), kept as zoo.cfg gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub election_port: Option<u16>,
    /// Whether it votes.
    #[serde(default)]
    pub role: Role,
    /// Where it serves clients, if its server.N line says so after `;`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<HostPort>,
}

/// Whether a member votes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A voting member.
    #[default]
    Participant,
    /// A member that replicates and serves clients but does not vote.
    Observer,
}

/// The admin HTTP server: ZooKeeper's AdminServer commands, `/ready` and `/health`
/// (docs/admin.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Admin {
    /// Whether it runs (zoo.cfg: admin.enableServer).
    pub enabled: bool,
    /// Where it listens, as the operator wrote it (admin.serverAddress/serverPort). A server
    /// that cannot listen there does not start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<HostPort>,
    /// Where it listens when `listen` is not set: 127.0.0.1:8080 from TOML or no config,
    /// ZooKeeper's 0.0.0.0:8080 from a zoo.cfg. 8080 is often taken, so a server that cannot
    /// listen there logs a warning and serves clients without an admin server.
    #[serde(skip)]
    pub listen_default: HostPort,
    /// The path the commands live under (admin.commandURL).
    pub command_url: String,
    /// How long an idle admin connection is kept open (admin.idleTimeout).
    pub idle_timeout_ms: u32,
    /// Plain HTTP, HTTPS only (admin.forceHttps), or both on one port told apart by the first
    /// byte (admin.portUnification). HTTPS uses the `[quorum_tls]` key store, as ZooKeeper's
    /// AdminServer uses `ssl.quorum.*`.
    pub https: AdminHttps,
    /// Whether an HTTPS client must show a certificate that chains to the quorum trust store
    /// (admin.needClientAuth).
    pub need_client_auth: bool,
    /// Whether the `snapshot` command streams the state (admin.snapshot.enabled); off, it
    /// answers 503 as ZooKeeper's does.
    pub snapshot_enabled: bool,
    /// Whether the `restore` command replaces the state (admin.restore.enabled); off, 503.
    pub restore_enabled: bool,
    /// One `restore` per this many milliseconds, and, as ZooKeeper reads the same number
    /// for it, one `snapshot` per this many microseconds (admin.rateLimiterIntervalInMS);
    /// more answer 429.
    pub rate_limit_interval_ms: u64,
    /// The largest `restore` body, and the largest snapshot it may decompress to; a larger
    /// one answers 413 without being read further.
    pub restore_bytes_max: u64,
}

/// Whether the admin server speaks HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdminHttps {
    Off,
    Only,
    Either,
}

impl Default for Admin {
    fn default() -> Self {
        Admin {
            enabled: true,
            listen: None,
            listen_default: HostPort::new("127.0.0.1", ADMIN_PORT_DEFAULT),
            command_url: ADMIN_COMMAND_URL_DEFAULT.to_owned(),
            idle_timeout_ms: ADMIN_IDLE_TIMEOUT_MS_DEFAULT,
            https: AdminHttps::Off,
            need_client_auth: false,
            snapshot_enabled: true,
            restore_enabled: true,
            rate_limit_interval_ms: ADMIN_RATE_LIMIT_INTERVAL_MS_DEFAULT,
            restore_bytes_max: ADMIN_RESTORE_BYTES_MAX_DEFAULT,
        }
    }
}

impl Admin {
    /// Where to listen, and whether the operator named it (then failing to is fatal).
    pub fn address(&self) -> (&HostPort, bool) {
        match &self.listen {
            Some(listen) => (listen, true),
            None => (&self.listen_default, false),
        }
    }

    fn validate(&self) -> Result<(), InvalidConfig> {
        let url = &self.command_url;
        if !url.starts_with('/') || url.len() < 2 || url.ends_with('/') || url.contains("//") {
            return Err(InvalidConfig(format!(
                "admin command_url = {url:?} must be a path such as \"/commands\": a leading \
                 '/', no trailing '/'"
            )));
        }
        // The admin server's own paths: a command URL among them would shadow them.
        if let Some(taken) = ["/console", "/ready", "/health"]
            .into_iter()
            .find(|own| url == own || url.starts_with(&format!("{own}/")))
        {
            return Err(InvalidConfig(format!(
                "admin command_url = {url:?} is taken: the admin server serves {taken} itself"
            )));
        }
        if self.idle_timeout_ms == 0 {
            return Err(InvalidConfig(
                "admin idle_timeout_ms must be at least 1".into(),
            ));
        }
        if self.listen.as_ref().is_some_and(|l| l.host.is_empty()) {
            return Err(InvalidConfig("admin listen has no host".into()));
        }
        if self.restore_bytes_max == 0 {
            return Err(InvalidConfig(
                "admin restore_bytes_max must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// The Prometheus metrics endpoint (docs/metrics.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Metrics {
    /// Where `GET /metrics` is served, as the operator wrote it (zoo.cfg:
    /// metricsProvider.httpHost/httpPort). A server that cannot listen there does not start.
    /// None, the default, for no metrics endpoint unless `listen_default` names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<HostPort>,
    /// Where it is served when `listen` is not set: ZooKeeper's 0.0.0.0:7000 for a zoo.cfg
    /// that names the Prometheus provider and no address; none from TOML. A server that
    /// cannot listen there logs an error and serves clients without metrics.
    #[serde(skip)]
    pub listen_default: Option<HostPort>,
    /// Where `GET /metrics` is served over HTTPS (zoo.cfg: metricsProvider.httpHost and
    /// httpsPort, ZooKeeper 3.10's). The same address as `listen`: one port taking both, told
    /// apart by the first byte, as ZooKeeper when httpPort and httpsPort are equal. A server
    /// that cannot listen there does not start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub https_listen: Option<HostPort>,
    /// The HTTPS port's key material, client certificates and protocols.
    #[serde(skip_serializing_if = "crate::tls::MetricsTls::is_default")]
    pub tls: crate::tls::MetricsTls,
    /// Whether the process_* families (memory, CPU, file descriptors, start time) are served
    /// beside ZooKeeper's and Warden's (zoo.cfg: metricsProvider.exportJvmInfo, whose JVM
    /// families Warden has no equivalent of).
    pub process: bool,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            listen: None,
            listen_default: None,
            https_listen: None,
            tls: crate::tls::MetricsTls::default(),
            process: true,
        }
    }
}

impl Metrics {
    /// Where to listen, if anywhere, and whether the operator named it (then failing to is
    /// fatal).
    pub fn address(&self) -> Option<(&HostPort, bool)> {
        match (&self.listen, &self.listen_default) {
            (Some(listen), _) => Some((listen, true)),
            (None, Some(default)) => Some((default, false)),
            (None, None) => None,
        }
    }

    /// Whether the plain address is also the HTTPS one, so one listener takes both.
    pub fn unified(&self) -> bool {
        self.https_listen.is_some() && self.https_listen == self.address().map(|(a, _)| a.clone())
    }

    fn validate(&self) -> Result<(), InvalidConfig> {
        if self.listen.as_ref().is_some_and(|l| l.host.is_empty()) {
            return Err(InvalidConfig("metrics listen has no host".into()));
        }
        match &self.https_listen {
            Some(listen) if listen.host.is_empty() => {
                Err(InvalidConfig("metrics https_listen has no host".into()))
            }
            Some(_) => self.tls.validate(),
            // Settings for a port that does not exist would be read and ignored.
            None if !self.tls.is_default() => Err(InvalidConfig(
                "metrics.tls is set but metrics.https_listen is not: set it to serve metrics \
                 over HTTPS, or remove metrics.tls"
                    .into(),
            )),
            None => Ok(()),
        }
    }
}

/// A host name or IP address and a port, resolved only when used. Written `host:port`, or
/// `[v6-address]:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// Host name or IP address, without brackets.
    pub host: String,
    /// Port number; 0 asks the system for a free one.
    pub port: u16,
}

/// A value, or a combination of values, that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidConfig(pub String);

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, a value of the wrong type, or an unknown key (the message names it).
    #[error("{}: {message}", path.display())]
    Toml { path: PathBuf, message: String },
    /// A line of a properties file that cannot be read at all.
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// One key's value is wrong.
    #[error("{}:{line}: {key}={value}: {reason}", path.display())]
    Value {
        path: PathBuf,
        line: usize,
        key: String,
        value: String,
        reason: String,
    },
    /// Values that are each fine but do not work together, or something missing.
    #[error("{}: {source}", path.display())]
    Invalid {
        path: PathBuf,
        #[source]
        source: InvalidConfig,
    },
}

/// Warden's own tick: ZooKeeper's sample zoo.cfg value (ZooKeeper's built-in default is 3000).
pub const TICK_TIME_MS_DEFAULT: u32 = 2000;
/// The default session timeout bounds, in ticks, as ZooKeeper derives them.
pub const SESSION_TIMEOUT_TICKS_MIN: u32 = 2;
/// See [`SESSION_TIMEOUT_TICKS_MIN`].
pub const SESSION_TIMEOUT_TICKS_MAX: u32 = 20;
/// ZooKeeper never keeps fewer snapshots than this, whatever autopurge.snapRetainCount says.
pub const SNAPSHOTS_RETAINED_COUNT_MIN: u32 = 3;
/// ZooKeeper never snapshots more often than every 2 transactions, whatever snapCount says.
pub const SNAPSHOT_INTERVAL_TXNS_MIN: u64 = 2;
/// The wildcard address a bare clientPort listens on.
pub const WILDCARD_HOST: &str = "0.0.0.0";
/// The JAAS section ZooKeeper's server takes its SASL users from.
pub const JAAS_SECTION_DEFAULT: &str = "Server";
/// ZooKeeper's admin.serverPort default (JettyAdminServer.DEFAULT_PORT).
pub const ADMIN_PORT_DEFAULT: u16 = 8080;
/// ZooKeeper's admin.commandURL default.
pub const ADMIN_COMMAND_URL_DEFAULT: &str = "/commands";
/// ZooKeeper's admin.idleTimeout default.
pub const ADMIN_IDLE_TIMEOUT_MS_DEFAULT: u32 = 30_000;
/// ZooKeeper's admin.rateLimiterIntervalInMS default (`Commands.rateLimiterInterval`).
pub const ADMIN_RATE_LIMIT_INTERVAL_MS_DEFAULT: u64 = 300_000;
/// Warden's own bound on a `restore` body: far above any ZooKeeper ensemble's data, far
/// below what would strain a server to hold twice (the body and the state built from it).
pub const ADMIN_RESTORE_BYTES_MAX_DEFAULT: u64 = 256 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            client_listen: HostPort::new("127.0.0.1", 2181),
            data_dir: PathBuf::from("./warden-data"),
            log_dir: None,
            tick_time_ms: TICK_TIME_MS_DEFAULT,
            session_timeout_ms_min: SESSION_TIMEOUT_TICKS_MIN * TICK_TIME_MS_DEFAULT,
            session_timeout_ms_max: SESSION_TIMEOUT_TICKS_MAX * TICK_TIME_MS_DEFAULT,
            four_letter_words: vec!["srvr".to_string()],
            super_digest: None,
            extended_types_enabled: true,
            enforce_quota: false,
            fsync_warning_threshold_ms: 1000,
            linearizable_reads: false,
            limits: Limits::default(),
            snapshots: Snapshots::default(),
            purge: Purge::default(),
            containers: Containers::default(),
            cluster: Cluster::default(),
            admin: Admin::default(),
            metrics: Metrics::default(),
            auth: Auth::default(),
            tls: crate::tls::Tls::default(),
            quorum_tls: crate::tls::QuorumTls::default(),
            migration: Migration::default(),
            zoo_cfg: None,
            source_text: None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        const MIB: u32 = 1024 * 1024;
        Limits {
            // 16× ZooKeeper's 1 MiB: far above it, as DESIGN.md asks.
            frame_bytes_max: 16 * MIB,
            connections_max: 10_000,
            connections_per_ip_max: 60,
            outstanding_requests_max: 10_000,
            outstanding_requests_per_session_max: 1_000,
            // Room for four responses of the largest size.
            outbound_queue_bytes_per_session_max: 4 * u64::from(16 * MIB),
            watches_per_session_max: 1_000_000,
            ephemerals_per_session_max: 1_000_000,
            connection_throttle: crate::throttle::ConnectionThrottle::default(),
        }
    }
}

impl Default for Snapshots {
    fn default() -> Self {
        Snapshots {
            interval_txns: 100_000,
            log_bytes_max: 4 << 30,
            on_exit: true,
        }
    }
}

impl Default for Purge {
    fn default() -> Self {
        // ZooKeeper leaves purging off and to an operator's cron job; ZooKeeper's cleanup
        // tools cannot read Warden's files, so Warden purges by itself.
        Purge {
            snapshots_retained_count: SNAPSHOTS_RETAINED_COUNT_MIN,
            interval_hours: 1,
        }
    }
}

impl Default for Containers {
    fn default() -> Self {
        Containers {
            check_interval_ms: 60_000,
            never_used_interval_ms: 0,
            deletes_per_minute_max: 10_000,
        }
    }
}

impl Config {
    /// Reads Warden's TOML config file. Keys left out take their defaults (the session timeout
    /// bounds follow the file's `tick_time_ms`); an unknown key is an error naming it.
    pub fn load_toml(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = parse_toml(&text, path)?;
        config.source_text = Some(text);
        Ok(config)
    }

    /// [`Config::load_toml`] for text already in memory.
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        parse_toml(text, Path::new("<string>"))
    }

    /// The whole config as Warden's TOML, every value written out.
    pub fn to_toml_string(&self) -> String {
        let text = toml::to_string(self).expect("every Config field has a TOML form");
        // A zoo.cfg's unnamed admin address (ZooKeeper's 0.0.0.0:8080) is not the TOML's;
        // written as `listen` it would become a named one, fatal when taken, so a comment.
        if self.admin.listen.is_none()
            && self.admin.listen_default != Admin::default().listen_default
        {
            let note = format!(
                "[admin]\n# listen: none named; tries {} and runs without an admin server if \
                 it is taken\n",
                self.admin.listen_default
            );
            return text.replacen("[admin]\n", &note, 1);
        }
        text
    }

    /// Checks that every value is in range and that the values work together.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let invalid = |message: String| Err(InvalidConfig(message));
        if self.client_listen.host.is_empty() {
            return invalid("client_listen has no host".into());
        }
        if self.data_dir.as_os_str().is_empty() {
            return invalid("data_dir is empty".into());
        }
        if self.tick_time_ms == 0 {
            return invalid("tick_time_ms must be at least 1".into());
        }
        let (min, max) = (self.session_timeout_ms_min, self.session_timeout_ms_max);
        if min == 0 {
            return invalid("session_timeout_ms_min must be at least 1".into());
        }
        if max > i32::MAX as u32 {
            return invalid(format!(
                "session_timeout_ms_max = {max} does not fit the protocol's 32-bit timeout"
            ));
        }
        if min > max {
            return invalid(format!(
                "session_timeout_ms_min = {min} is larger than session_timeout_ms_max = {max}"
            ));
        }
        for word in &self.four_letter_words {
            if word != "*" && !FOUR_LETTER_WORDS.contains(&word.as_str()) {
                return invalid(format!(
                    "four_letter_words: unknown word {word:?} (known: {}, or \"*\" for all)",
                    FOUR_LETTER_WORDS.join(", ")
                ));
            }
        }
        if let Some(digest) = &self.super_digest
            && !digest.contains(':')
        {
            return invalid(format!(
                "super_digest = {digest:?} is not of the form user:base64(sha1(user:password))"
            ));
        }
        self.limits.validate()?;
        self.snapshots.validate()?;
        self.purge.validate()?;
        self.containers.validate()?;
        self.admin.validate()?;
        self.metrics.validate()?;
        self.auth.validate(self.tls.x509_available())?;
        self.tls.validate()?;
        self.quorum_tls.validate()?;
        self.limits.connection_throttle.validate()?;
        if self.admin.enabled && self.admin.https != AdminHttps::Off {
            if self.quorum_tls.key_store.is_none() {
                return Err(InvalidConfig(
                    "HTTPS for the admin server (admin.forceHttps or admin.portUnification; TOML \
                     admin.https) needs the quorum key store (ssl.quorum.keyStore.location; \
                     TOML quorum_tls.key_store), as ZooKeeper's AdminServer"
                        .into(),
                ));
            }
            if self.admin.need_client_auth && self.quorum_tls.trust_store.is_none() {
                return Err(InvalidConfig(
                    "admin.needClientAuth needs the quorum trust store \
                     (ssl.quorum.trustStore.location; TOML quorum_tls.trust_store)"
                        .into(),
                ));
            }
            for store in self
                .quorum_tls
                .key_store
                .iter()
                .chain(&self.quorum_tls.trust_store)
            {
                store.store_type()?;
            }
        }
        self.migration.validate(self.cluster.peer_frame_bytes_max)?;
        if self.cluster.peer_frame_bytes_max < peer_frame_bytes_min(self.limits.frame_bytes_max) {
            return Err(InvalidConfig(format!(
                "cluster.peer_frame_bytes_max = {} is too small for limits.frame_bytes_max = {}: \
                 a client's request is one log entry, which a peer frame must carry with \
                 {PEER_FRAME_HEADROOM_BYTES} bytes to spare",
                self.cluster.peer_frame_bytes_max, self.limits.frame_bytes_max
            )));
        }
        self.cluster.validate()
    }

    /// Whether the four-letter word `word` may be answered.
    pub fn four_letter_word_enabled(&self, word: &str) -> bool {
        self.four_letter_words.iter().any(|w| w == "*" || w == word)
    }

    /// Where the log lives: `log_dir` if set, otherwise `data_dir`.
    pub fn resolved_log_dir(&self) -> &Path {
        self.log_dir.as_deref().unwrap_or(&self.data_dir)
    }
}

fn parse_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let toml_error = |e: toml::de::Error| ConfigError::Toml {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut config: Config = toml::from_str(text).map_err(toml_error)?;
    // The session timeout defaults are multiples of whatever tick the file chose.
    let table: toml::Table = toml::from_str(text).map_err(toml_error)?;
    if !table.contains_key("session_timeout_ms_min") {
        config.session_timeout_ms_min = config
            .tick_time_ms
            .saturating_mul(SESSION_TIMEOUT_TICKS_MIN);
    }
    if !table.contains_key("session_timeout_ms_max") {
        config.session_timeout_ms_max = config
            .tick_time_ms
            .saturating_mul(SESSION_TIMEOUT_TICKS_MAX);
    }
    config.validate().map_err(|source| ConfigError::Invalid {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(config)
}

impl Limits {
    fn validate(&self) -> Result<(), InvalidConfig> {
        if self.frame_bytes_max == 0 || self.frame_bytes_max > i32::MAX as u32 {
            return Err(InvalidConfig(format!(
                "limits.frame_bytes_max = {} must be between 1 and {} (a frame's length is a \
                 signed 32-bit number)",
                self.frame_bytes_max,
                i32::MAX
            )));
        }
        for (name, value) in [
            ("outstanding_requests_max", self.outstanding_requests_max),
            (
                "outstanding_requests_per_session_max",
                self.outstanding_requests_per_session_max,
            ),
            ("watches_per_session_max", self.watches_per_session_max),
        ] {
            if value == 0 {
                return Err(InvalidConfig(format!("limits.{name} must be at least 1")));
            }
        }
        if self.outbound_queue_bytes_per_session_max < u64::from(self.frame_bytes_max) {
            return Err(InvalidConfig(format!(
                "limits.outbound_queue_bytes_per_session_max = {} is smaller than \
                 limits.frame_bytes_max = {}: the largest response would never fit",
                self.outbound_queue_bytes_per_session_max, self.frame_bytes_max
            )));
        }
        Ok(())
    }
}

impl Snapshots {
    fn validate(&self) -> Result<(), InvalidConfig> {
        if self.interval_txns < SNAPSHOT_INTERVAL_TXNS_MIN {
            return Err(InvalidConfig(format!(
                "snapshots.interval_txns = {} must be at least {SNAPSHOT_INTERVAL_TXNS_MIN}",
                self.interval_txns
            )));
        }
        Ok(())
    }
}

impl Purge {
    fn validate(&self) -> Result<(), InvalidConfig> {
        if self.snapshots_retained_count < SNAPSHOTS_RETAINED_COUNT_MIN {
            return Err(InvalidConfig(format!(
                "purge.snapshots_retained_count = {} must be at least \
                 {SNAPSHOTS_RETAINED_COUNT_MIN}",
                self.snapshots_retained_count
            )));
        }
        Ok(())
    }
}

impl Containers {
    fn validate(&self) -> Result<(), InvalidConfig> {
        if self.check_interval_ms == 0 {
            return Err(InvalidConfig(
                "containers.check_interval_ms must be at least 1".into(),
            ));
        }
        if self.deletes_per_minute_max == 0 {
            return Err(InvalidConfig(
                "containers.deletes_per_minute_max must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

impl Member {
    /// The member as ZooKeeper's dynamic configuration writes it (`/zookeeper/config`, `conf`):
    /// `server.N=host:peerPort:electionPort:role;clientHost:clientPort`.
    pub fn dynamic_config_line(&self) -> String {
        let role = match self.role {
            Role::Participant => "participant",
            Role::Observer => "observer",
        };
        let election = self
            .election_port
            .map(|p| format!(":{p}"))
            .unwrap_or_default();
        let client = self
            .client
            .as_ref()
            .map(|c| format!(";{c}"))
            .unwrap_or_default();
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!(
            "server.{}={host}:{}{election}:{role}{client}",
            self.id, self.peer_port
        )
    }
}

impl Cluster {
    /// This server's entry in `members`, if it has one.
    pub fn me(&self) -> Option<&Member> {
        let my_id = self.my_id?;
        self.members.iter().find(|m| m.id == my_id)
    }

    fn validate(&self) -> Result<(), InvalidConfig> {
        let invalid = |message: String| Err(InvalidConfig(message));
        if self.forward_queue_max == 0 {
            return invalid("cluster.forward_queue_max must be at least 1".into());
        }
        if self.peer_frame_bytes_max < 2 << 20 {
            return invalid(
                "cluster.peer_frame_bytes_max must be at least 2 MiB (a snapshot chunk is 1 MiB)"
                    .into(),
            );
        }
        if self.snapshot_bytes_max < 1 << 20 {
            return invalid("cluster.snapshot_bytes_max must be at least 1 MiB".into());
        }
        for (i, member) in self.members.iter().enumerate() {
            if member.host.is_empty() {
                return invalid(format!("cluster member {} has no host", member.id));
            }
            if member.peer_port == 0 {
                return invalid(format!("cluster member {} has peer_port 0", member.id));
            }
            if member.election_port == Some(member.peer_port) {
                return invalid(format!(
                    "cluster member {}: peer_port and election_port are both {}",
                    member.id, member.peer_port
                ));
            }
            if self.members[..i].iter().any(|m| m.id == member.id) {
                return invalid(format!("cluster member id {} appears twice", member.id));
            }
        }
        if self.members.is_empty() {
            return Ok(());
        }
        if !self.members.iter().any(|m| m.role == Role::Participant) {
            return invalid("cluster has observers but no participant".into());
        }
        match self.my_id {
            None => invalid("cluster.my_id is required when cluster.members is set".into()),
            Some(id) if self.me().is_none() => invalid(format!(
                "cluster.my_id = {id} is not the id of any cluster member"
            )),
            Some(_) => Ok(()),
        }
    }
}

impl HostPort {
    /// `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> HostPort {
        HostPort {
            host: host.into(),
            port,
        }
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for HostPort {
    type Err = InvalidConfig;

    fn from_str(s: &str) -> Result<HostPort, InvalidConfig> {
        let bad = |why: &str| InvalidConfig(format!("{s:?} is not host:port: {why}"));
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(|| bad("no closing ']'"))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| bad("no ':port' after ']'"))?;
            (host, port)
        } else {
            let (host, port) = s.rsplit_once(':').ok_or_else(|| bad("no port"))?;
            if host.contains(':') {
                return Err(bad("an IPv6 address needs brackets, as in [::1]:2181"));
            }
            (host, port)
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = port
            .parse()
            .map_err(|_| bad("the port is not a number from 0 to 65535"))?;
        Ok(HostPort::new(host, port))
    }
}

impl Serialize for HostPort {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostPort {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<HostPort, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster of one member, id 1, followed by `more`.
    fn one_member(more: &str) -> String {
        let cluster = "[cluster]\nmy_id = 1\n";
        format!("{cluster}[[cluster.members]]\nid = 1\nhost = \"a\"\npeer_port = 2888\n{more}")
    }

    fn toml_error(text: &str) -> String {
        Config::from_toml_str(text)
            .expect_err("the config should be refused")
            .to_string()
    }

    /// A config with every optional part filled in.
    fn full_config() -> Config {
        Config {
            client_listen: HostPort::new("::1", 2281),
            data_dir: PathBuf::from("/var/lib/warden"),
            log_dir: Some(PathBuf::from("/fast-disk/warden-log")),
            tick_time_ms: 1000,
            session_timeout_ms_min: 1500,
            session_timeout_ms_max: 90_000,
            four_letter_words: vec!["srvr".into(), "ruok".into(), "mntr".into()],
            super_digest: Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=".into()),
            extended_types_enabled: false,
            enforce_quota: true,
            fsync_warning_threshold_ms: 250,
            linearizable_reads: false,
            limits: Limits {
                frame_bytes_max: 4 << 20,
                connections_max: 0,
                connections_per_ip_max: 500,
                outstanding_requests_max: 50_000,
                outstanding_requests_per_session_max: 64,
                outbound_queue_bytes_per_session_max: 8 << 20,
                watches_per_session_max: 10,
                ephemerals_per_session_max: 20,
                connection_throttle: crate::throttle::ConnectionThrottle {
                    tokens: 100,
                    fill_time_ms: 10,
                    ..Default::default()
                },
            },
            snapshots: Snapshots {
                interval_txns: 5_000,
                log_bytes_max: 1 << 20,
                on_exit: false,
            },
            purge: Purge {
                snapshots_retained_count: 5,
                interval_hours: 0,
            },
            containers: Containers {
                check_interval_ms: 1_000,
                never_used_interval_ms: 30_000,
                deletes_per_minute_max: 600,
            },
            cluster: Cluster {
                my_id: Some(2),
                members: vec![
                    Member {
                        id: 1,
                        host: "zk1.example".into(),
                        peer_port: 2888,
                        election_port: Some(3888),
                        role: Role::Participant,
                        client: Some(HostPort::new("0.0.0.0", 2181)),
                    },
                    Member {
                        id: 2,
                        host: "10.0.0.2".into(),
                        peer_port: 2888,
                        election_port: None,
                        role: Role::Participant,
                        client: None,
                    },
                    Member {
                        id: 3,
                        host: "fe80::3".into(),
                        peer_port: 2888,
                        election_port: Some(3888),
                        role: Role::Observer,
                        client: None,
                    },
                ],
                ..Cluster::default()
            },
            admin: Admin {
                enabled: true,
                listen: Some(HostPort::new("127.0.0.1", 8081)),
                command_url: "/zk/commands".into(),
                idle_timeout_ms: 10_000,
                ..Admin::default()
            },
            metrics: Metrics {
                listen: Some(HostPort::new("0.0.0.0", 7000)),
                https_listen: Some(HostPort::new("0.0.0.0", 7443)),
                tls: crate::tls::MetricsTls {
                    key_store: Some(crate::tls::Store::new("/etc/warden/metrics.jks")),
                    trust_store: Some(crate::tls::Store::new("/etc/warden/scrapers-ca.pem")),
                    client_auth: crate::tls::ClientAuth::Want,
                    enabled_protocols: vec!["TLSv1.3".into()],
                    cipher_suites: vec!["TLS_AES_256_GCM_SHA384".into()],
                },
                process: false,
                ..Metrics::default()
            },
            auth: Auth {
                sasl_scheme: true,
                jaas_file: Some("/etc/warden/jaas.conf".into()),
                jaas_section: "WardenServer".into(),
                sasl_super_users: vec!["admin".into()],
                required_schemes: vec!["sasl".into()],
            },
            tls: crate::tls::Tls {
                secure_client_listen: Some(HostPort::new("0.0.0.0", 2281)),
                port_unification: true,
                client_listen_tls_only: false,
                key_store: Some(crate::tls::Store {
                    location: "/etc/warden/server.p12".into(),
                    password: Some("secret".into()),
                    kind: Some("PKCS12".into()),
                }),
                trust_store: Some(crate::tls::Store::new("/etc/warden/ca.pem")),
                client_auth: crate::tls::ClientAuth::Want,
                protocol: "TLSv1.2".into(),
                enabled_protocols: vec!["TLSv1.2".into()],
                cipher_suites: vec!["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into()],
                reload_cert_files: true,
                handshake_timeout_ms: 2000,
                super_user: Some("CN=admin".into()),
            },
            quorum_tls: crate::tls::QuorumTls {
                enabled: true,
                port_unification: true,
                key_store: Some(crate::tls::Store::new("/etc/warden/quorum.p12")),
                trust_store: Some(crate::tls::Store::new("/etc/warden/quorum-ca.pem")),
                protocol: "TLSv1.3".into(),
                enabled_protocols: vec!["TLSv1.3".into()],
                cipher_suites: Vec::new(),
                hostname_verification: false,
                reload_cert_files: true,
                handshake_timeout_ms: 3000,
            },
            migration: Migration {
                follow: "zk1:2888,zk2:2888".into(),
                observer_id: Some(9),
                packet_wait_ms: 10_000,
                packet_bytes_max: 1 << 20,
                snapshot_bytes_max: 16 << 20,
            },
            zoo_cfg: None,
            source_text: None,
        }
    }

    #[test]
    fn default_config_runs_one_node_on_localhost() {
        let config = Config::default();
        assert_eq!(config.client_listen.to_string(), "127.0.0.1:2181");
        assert_eq!(config.data_dir, PathBuf::from("./warden-data"));
        assert_eq!(config.resolved_log_dir(), Path::new("./warden-data"));
        assert_eq!(config.tick_time_ms, 2000);
        assert_eq!(config.session_timeout_ms_min, 4000);
        assert_eq!(config.session_timeout_ms_max, 40_000);
        assert_eq!(config.four_letter_words, ["srvr"]);
        assert!(config.four_letter_word_enabled("srvr"));
        assert!(!config.four_letter_word_enabled("ruok"));
        assert!(config.extended_types_enabled);
        assert_eq!(config.super_digest, None);
        assert_eq!(config.limits.frame_bytes_max, 16 << 20);
        assert_eq!(config.limits.connections_per_ip_max, 60);
        assert_eq!(config.snapshots.interval_txns, 100_000);
        assert_eq!(config.purge.snapshots_retained_count, 3);
        assert_eq!(config.containers.check_interval_ms, 60_000);
        assert_eq!(config.containers.never_used_interval_ms, 0);
        assert!(config.cluster.members.is_empty());
        assert_eq!(config.cluster.my_id, None);
        assert!(config.admin.enabled);
        assert_eq!(
            config.admin.address(),
            (&HostPort::new("127.0.0.1", 8080), false)
        );
        assert_eq!(config.admin.command_url, "/commands");
        assert_eq!(config.admin.idle_timeout_ms, 30_000);
        assert_eq!(config.metrics.listen, None);
        config.validate().unwrap();
    }

    #[test]
    fn the_defaults_documented_in_docs_config_md_are_the_defaults() {
        let doc = include_str!("../../../docs/config.md");
        let block = doc.split("```toml\n").nth(1).unwrap();
        let block = block.split("```").next().unwrap();
        assert_eq!(Config::from_toml_str(block).unwrap(), Config::default());
    }

    #[test]
    fn empty_toml_is_the_default() {
        assert_eq!(Config::from_toml_str("").unwrap(), Config::default());
    }

    #[test]
    fn session_timeout_defaults_follow_the_files_tick() {
        let config = Config::from_toml_str("tick_time_ms = 500").unwrap();
        assert_eq!(config.session_timeout_ms_min, 1000);
        assert_eq!(config.session_timeout_ms_max, 10_000);

        let config =
            Config::from_toml_str("tick_time_ms = 500\nsession_timeout_ms_max = 3000").unwrap();
        assert_eq!(config.session_timeout_ms_min, 1000);
        assert_eq!(config.session_timeout_ms_max, 3000);
    }

    #[test]
    fn metrics_over_https_needs_its_key_material() {
        let base = "[metrics]\nhttps_listen = \"127.0.0.1:7443\"\n";
        let err = |text: &str| Config::from_toml_str(text).unwrap_err().to_string();
        assert!(err(base).contains("needs a key store"), "{}", err(base));
        let key = "[metrics.tls]\nkey_store = { location = \"/k.pem\" }\n";
        // ZooKeeper's default asks every scraper for a certificate: a trust store is needed.
        let need = format!("{base}{key}");
        assert!(err(&need).contains("needs a trust store"), "{}", err(&need));
        let none = format!("{need}client_auth = \"none\"\n");
        let config = Config::from_toml_str(&none).unwrap();
        assert!(!config.metrics.unified());
        let unified = format!("[metrics]\nlisten = \"127.0.0.1:7443\"\n{}", &none[10..]);
        assert!(Config::from_toml_str(&unified).unwrap().metrics.unified());
        let tls12 = format!("{none}enabled_protocols = [\"TLSv1.1\"]\n");
        assert!(
            err(&tls12).contains("metrics.tls.enabled_protocols"),
            "{}",
            err(&tls12)
        );
        let suite = format!("{none}cipher_suites = [\"TLS_NOPE\"]\n");
        assert!(
            err(&suite).contains("metrics.tls.cipher_suites"),
            "{}",
            err(&suite)
        );
        // Settings for an HTTPS port that is not there are an error, not silently unused.
        let orphan = "[metrics.tls]\nclient_auth = \"none\"\n";
        assert!(
            err(orphan).contains("https_listen is not"),
            "{}",
            err(orphan)
        );
    }

    #[test]
    fn toml_round_trip() {
        for config in [Config::default(), full_config()] {
            let text = config.to_toml_string();
            assert_eq!(Config::from_toml_str(&text).unwrap(), config, "{text}");
        }
    }

    #[test]
    fn a_hand_written_toml_file_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("warden.toml");
        std::fs::write(
            &path,
            r#"
            client_listen = "0.0.0.0:2181"
            data_dir = "/var/lib/warden"
            four_letter_words = ["*"]

            [limits]
            frame_bytes_max = 1048575

            [cluster]
            my_id = 1
            [[cluster.members]]
            id = 1
            host = "127.0.0.1"
            peer_port = 2888
            [[cluster.members]]
            id = 2
            host = "127.0.0.1"
            peer_port = 2889
            role = "observer"
            client = "127.0.0.1:2182"
            "#,
        )
        .unwrap();
        let config = Config::load_toml(&path).unwrap();
        assert_eq!(config.client_listen, HostPort::new("0.0.0.0", 2181));
        assert!(config.four_letter_word_enabled("mntr"));
        assert_eq!(config.limits.frame_bytes_max, 1_048_575);
        assert_eq!(config.limits.connections_max, 10_000, "untouched default");
        assert_eq!(config.cluster.me().unwrap().peer_port, 2888);
        assert_eq!(config.cluster.members[1].role, Role::Observer);
        assert_eq!(
            config.cluster.members[1].client,
            Some(HostPort::new("127.0.0.1", 2182))
        );
    }

    #[test]
    fn unknown_toml_keys_are_errors_naming_the_key() {
        for (text, key) in [
            ("tick_time = 2000", "tick_time"),
            ("[limits]\nframe_bytes = 10", "frame_bytes"),
            ("[snapshot]\ninterval_txns = 10", "snapshot"),
            (&one_member("port = 2"), "port"),
        ] {
            let message = toml_error(text);
            assert!(message.contains(&format!("`{key}`")), "{message}");
        }
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let err = Config::load_toml("/nonexistent/warden.toml").unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/warden.toml"));
    }

    #[test]
    fn wrong_types_and_bad_addresses_are_errors() {
        for (text, needle) in [
            ("tick_time_ms = \"fast\"", "tick_time_ms"),
            ("tick_time_ms = -1", "tick_time_ms"),
            ("client_listen = \"localhost\"", "no port"),
            ("client_listen = \"::1:2181\"", "brackets"),
            ("client_listen = \"[::1]:99999\"", "0 to 65535"),
            ("[admin]\nlisten = \":80\"", "no host"),
        ] {
            let message = toml_error(text);
            assert!(message.contains(needle), "{text}: {message}");
        }
    }

    #[test]
    fn values_that_do_not_work_together_are_refused() {
        for (text, needle) in [
            ("tick_time_ms = 0", "tick_time_ms must be at least 1"),
            (
                "session_timeout_ms_min = 50000",
                "session_timeout_ms_min = 50000 is larger than session_timeout_ms_max = 40000",
            ),
            (
                "session_timeout_ms_max = 3000000000",
                "session_timeout_ms_max = 3000000000",
            ),
            ("four_letter_words = [\"ruok\", \"rouk\"]", "\"rouk\""),
            ("super_digest = \"nocolon\"", "super_digest"),
            ("[limits]\nframe_bytes_max = 0", "frame_bytes_max"),
            ("[limits]\nframe_bytes_max = 3000000000", "frame_bytes_max"),
            (
                "[limits]\nframe_bytes_max = 67108864",
                "cluster.peer_frame_bytes_max = 67108864 is too small",
            ),
            (
                "[limits]\noutbound_queue_bytes_per_session_max = 1024",
                "the largest response would never fit",
            ),
            (
                "[limits]\nwatches_per_session_max = 0",
                "watches_per_session_max",
            ),
            ("[snapshots]\ninterval_txns = 1", "interval_txns"),
            ("[admin]\ncommand_url = \"commands\"", "command_url"),
            ("[admin]\ncommand_url = \"/commands/\"", "command_url"),
            (
                "[admin]\ncommand_url = \"/console\"",
                "serves /console itself",
            ),
            (
                "[admin]\ncommand_url = \"/console/x\"",
                "serves /console itself",
            ),
            ("[admin]\ncommand_url = \"/ready\"", "serves /ready itself"),
            ("[admin]\nidle_timeout_ms = 0", "idle_timeout_ms"),
            (
                "[purge]\nsnapshots_retained_count = 2",
                "snapshots_retained_count",
            ),
            ("[containers]\ncheck_interval_ms = 0", "check_interval_ms"),
            (
                "[migration]\nfollow = \"zk1:2888\"",
                "migration follow needs observer_id",
            ),
            (
                "[migration]\nfollow = \"zk1\"\nobserver_id = 4",
                "\"zk1\" is not host:port",
            ),
            (
                "[migration]\nfollow = \"zk1:2888\"\nobserver_id = 4\n\
                 snapshot_bytes_max = 4000000000",
                "snapshot_bytes_max",
            ),
            (
                "[auth]\nrequired_schemes = [\"sasl\"]",
                "\"sasl\", which is not available",
            ),
            ("[auth]\njaas_section = \"\"", "jaas_section is empty"),
            (
                "[[cluster.members]]\nid = 1\nhost = \"a\"\npeer_port = 2888",
                "cluster.my_id is required",
            ),
            (
                &one_member("").replace("my_id = 1", "my_id = 4"),
                "my_id = 4 is not the id of any cluster member",
            ),
            (
                &one_member("[[cluster.members]]\nid = 1\nhost = \"b\"\npeer_port = 2888"),
                "id 1 appears twice",
            ),
            (
                &one_member("election_port = 2888"),
                "peer_port and election_port are both 2888",
            ),
            (
                &one_member("role = \"observer\""),
                "observers but no participant",
            ),
        ] {
            let err = Config::from_toml_str(text).expect_err(text);
            assert!(matches!(err, ConfigError::Invalid { .. }), "{text}: {err}");
            let message = err.to_string();
            assert!(message.contains(needle), "{text}: {message}");
        }
    }

    #[test]
    fn host_port_text_form() {
        for (text, host, port) in [
            ("127.0.0.1:2181", "127.0.0.1", 2181),
            ("zk1.example:0", "zk1.example", 0),
            ("[::1]:2181", "::1", 2181),
            ("[fe80::1%eth0]:2888", "fe80::1%eth0", 2888),
        ] {
            let parsed: HostPort = text.parse().unwrap();
            assert_eq!(parsed, HostPort::new(host, port));
            assert_eq!(parsed.to_string(), text);
        }
        for bad in [
            "",
            "2181",
            ":2181",
            "host:",
            "host:x",
            "[::1]2181",
            "[::1:2181",
            "a:b:1",
        ] {
            assert!(bad.parse::<HostPort>().is_err(), "{bad:?}");
        }
    }
}
