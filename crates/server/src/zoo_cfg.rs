//! ZooKeeper's zoo.cfg, read the way ZooKeeper 3.9 reads it (`QuorumPeerConfig.parse`), so an
//! operator can swap the binary and keep the file.
//!
//! The file is in `java.util.Properties` format (the `properties` module). ZooKeeper handles a
//! fixed set of keys itself (clientPort, dataDir, server.N, ...) and turns every other
//! `key=value` into the Java system property `zookeeper.key`: that is how
//! `4lw.commands.whitelist`, `snapCount` or `DigestAuthenticationProvider.superDigest` take
//! effect from zoo.cfg. Warden reads those keys with or without the `zookeeper.` prefix, and
//! also the few properties ZooKeeper reads without the prefix (`jute.maxbuffer`,
//! `znode.container.*`, `readonlymode.enabled`), which a real ZooKeeper takes only from the
//! command line.
//!
//! What Warden does with a key:
//! - uses it, with ZooKeeper's meaning, and ZooKeeper's default when the key is absent
//!   (notably tickTime 3000, and a bare clientPort listening on every interface); what
//!   ZooKeeper has no setting for (most limits) or leaves to the operator (purging) keeps
//!   Warden's default;
//! - accepts it silently when it tunes ZooKeeper's own machinery and Warden has nothing that
//!   corresponds (initLimit, syncLimit, preAllocSize, ...);
//! - accepts it with a [`Warning`] when the value asks for something Warden does not do
//!   (forceSync=no, secureClientPort, ...);
//! - warns about a key it does not know, naming the key and its line.
//!
//! A value ZooKeeper would refuse is an error naming the key, the value and the line; so is a
//! value ZooKeeper would quietly replace with its default (`Integer.getInteger` on garbage), or
//! read as `false` for not being "true", since that is a mistake in the file either way. Where
//! ZooKeeper adjusts a value and logs it (autopurge.snapRetainCount below 3, snapCount below 2),
//! Warden adjusts it the same way and warns.
//!
//! A cluster member started from a zoo.cfg with reconfigEnabled=true rewrites its files after
//! every membership change as ZooKeeper does: see [`dynamic`].

pub mod dynamic;
mod properties;
mod tls;

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use warden_proto::frame::FOUR_LETTER_WORDS;

use crate::config::{
    ADMIN_PORT_DEFAULT, AdminHttps, Config, ConfigError, HostPort, InvalidConfig, Member, Role,
    SESSION_TIMEOUT_TICKS_MAX, SESSION_TIMEOUT_TICKS_MIN, SNAPSHOT_INTERVAL_TXNS_MIN,
    SNAPSHOTS_RETAINED_COUNT_MIN, WILDCARD_HOST,
};
use properties::Property;

/// ZooKeeper's tickTime when zoo.cfg does not set one (`ZooKeeperServer.DEFAULT_TICK_TIME`).
pub const ZOOKEEPER_TICK_TIME_MS_DEFAULT: u32 = 3000;

const PROMETHEUS_PROVIDER: &str =
    "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
const PROMETHEUS_PORT_DEFAULT: u16 = 7000;
const SASL_PROVIDER: &str = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";
/// The JVM system property naming the JAAS login file (`-D` in SERVER_JVMFLAGS/JVMFLAGS).
const JAAS_FILE_PROPERTY: &str = "java.security.auth.login.config";
/// ZooKeeper computes 20 × tickTime in a 32-bit int.
const TICK_TIME_MS_MAX: i64 = i32::MAX as i64 / SESSION_TIMEOUT_TICKS_MAX as i64;

/// Something in a zoo.cfg that Warden read but did not take as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The file the key is in.
    pub path: PathBuf,
    /// The line the key is on (1-based).
    pub line: usize,
    /// The key.
    pub key: String,
    /// What happened to it.
    pub kind: WarningKind,
}

/// What happened to a key Warden did not take as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarningKind {
    /// Neither ZooKeeper 3.9 nor Warden knows the key (a typo?); it has no effect.
    UnknownKey,
    /// A ZooKeeper setting whose value asks for something Warden does not do; the reason says
    /// what Warden does instead.
    Unsupported(&'static str),
    /// The value was out of range and was replaced, as ZooKeeper replaces it.
    Adjusted(String),
    /// The key is set again later in the file, and that later value is the one used.
    Overridden { by_line: usize },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}: ", self.path.display(), self.line, self.key)?;
        match &self.kind {
            WarningKind::UnknownKey => write!(f, "unknown key, ignored"),
            WarningKind::Unsupported(reason) => write!(f, "not supported, ignored: {reason}"),
            WarningKind::Adjusted(message) => write!(f, "{message}"),
            WarningKind::Overridden { by_line } => {
                write!(f, "set again on line {by_line}, which wins")
            }
        }
    }
}

impl Config {
    /// Reads a ZooKeeper zoo.cfg, the `myid` file in its dataDir, and the file its
    /// `dynamicConfigFile` names, if any. Returns the config and what was not taken as written.
    pub fn from_zoo_cfg(path: impl AsRef<Path>) -> Result<(Config, Vec<Warning>), ConfigError> {
        Config::from_zoo_cfg_with_jvm_flags(path, "")
    }

    /// [`Config::from_zoo_cfg`] for a server whose start script would pass `jvm_flags` to
    /// ZooKeeper's JVM (zkServer.sh passes `SERVER_JVMFLAGS` and `JVMFLAGS`, split on blanks).
    /// Of those, the SASL settings are taken: `-Djava.security.auth.login.config=FILE`,
    /// `-Dzookeeper.sasl.serverconfig=SECTION`, `-Dzookeeper.superUser[.N]=USER`,
    /// `-Dzookeeper.authProvider.N=...SASLAuthenticationProvider`; the zoo.cfg's keys win over
    /// them, as ZooKeeper sets its system properties from zoo.cfg after the JVM has started.
    /// Every other ZooKeeper setting belongs in the zoo.cfg.
    pub fn from_zoo_cfg_with_jvm_flags(
        path: impl AsRef<Path>,
        jvm_flags: &str,
    ) -> Result<(Config, Vec<Warning>), ConfigError> {
        let path = path.as_ref();
        let properties = read_properties(path)?;
        let mut reader = Reader::new(path);
        reader.jvm_flags(jvm_flags);
        for property in reader.last_of_each_key(properties) {
            reader.apply(&property)?;
        }
        let (mut config, warnings) = reader.finish()?;
        // ZooKeeper's initial_configuration command answers the file as it was read.
        config.source_text = std::fs::read(path)
            .ok()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        Ok((config, warnings))
    }
}

/// Where a server started from a zoo.cfg found its membership, so that it can keep the files
/// up to date as ZooKeeper does ([`dynamic`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZooCfgFiles {
    /// The zoo.cfg, as given on the command line.
    pub path: PathBuf,
    /// The version of the `dynamicConfigFile` the membership was read from (from its name; 0
    /// when its name ends in no hex number), or none when zoo.cfg had server.N lines.
    pub dynamic_version: Option<i64>,
}

/// A value and the line it came from.
#[derive(Debug, Clone)]
struct At<T> {
    value: T,
    line: usize,
}

/// The file being read: what is already final goes straight into `config`; what needs the
/// whole file to mean anything waits in the other fields.
struct Reader<'a> {
    path: &'a Path,
    config: Config,
    warnings: Vec<Warning>,
    data_dir: Option<At<PathBuf>>,
    client_port: Option<At<u16>>,
    client_port_address: Option<At<String>>,
    tick_time_ms: Option<At<u32>>,
    session_timeout_ms_min: Option<At<u32>>,
    session_timeout_ms_max: Option<At<u32>>,
    standalone_enabled: bool,
    dynamic_config_file: Option<At<PathBuf>>,
    /// The version of the dynamic config file, once read.
    dynamic_version: Option<i64>,
    servers: Vec<At<Member>>,
    four_letter_words: Vec<String>,
    admin_enabled: bool,
    admin_host: Option<String>,
    admin_force_https: bool,
    admin_port_unification: bool,
    admin_port: Option<u16>,
    admin_command_url: Option<String>,
    admin_idle_timeout_ms: Option<u32>,
    prometheus: bool,
    /// `request_throttle_max_requests` when above 0 (ZooKeeper's RequestThrottler).
    request_throttle_max: Option<u32>,
    metrics_host: Option<String>,
    metrics_port: Option<u16>,
    /// `metricsProvider.httpsPort` (ZooKeeper 3.10).
    metrics_https_port: Option<u16>,
    /// `enforce.auth.enabled`, `enforce.auth.schemes`, `sessionRequireClientSASLAuth`.
    enforce_auth: Option<At<bool>>,
    enforce_auth_schemes: Vec<String>,
    require_sasl: bool,
    /// `superUser.N` values by key, so that a key set twice counts once.
    sasl_super_users: std::collections::BTreeMap<String, String>,
    /// secureClientPort, secureClientPortAddress and the stores' keys.
    tls: tls::TlsKeys,
}

impl<'a> Reader<'a> {
    fn new(path: &'a Path) -> Reader<'a> {
        let mut config = Config::default();
        // A client that talks to a server started from a zoo.cfg sees ZooKeeper's packet
        // limit unless the file (or its -D flags) says otherwise: jute.maxbuffer's default.
        config.limits.frame_bytes_max = warden_proto::frame::ZOOKEEPER_FRAME_BYTES_MAX as u32;
        Reader {
            path,
            config,
            warnings: Vec::new(),
            data_dir: None,
            client_port: None,
            client_port_address: None,
            tick_time_ms: None,
            session_timeout_ms_min: None,
            session_timeout_ms_max: None,
            standalone_enabled: true,
            dynamic_config_file: None,
            dynamic_version: None,
            servers: Vec::new(),
            four_letter_words: vec!["srvr".to_string()],
            admin_enabled: true,
            admin_host: None,
            admin_force_https: false,
            admin_port_unification: false,
            admin_port: None,
            admin_command_url: None,
            admin_idle_timeout_ms: None,
            prometheus: false,
            request_throttle_max: None,
            metrics_host: None,
            metrics_port: None,
            metrics_https_port: None,
            enforce_auth: None,
            enforce_auth_schemes: Vec::new(),
            require_sasl: false,
            sasl_super_users: Default::default(),
            tls: Default::default(),
        }
    }

    /// Java's `Properties` keeps the last value of a repeated key; the earlier ones get a
    /// warning and are dropped. Keys and values are trimmed as ZooKeeper trims them.
    fn last_of_each_key(&mut self, properties: Vec<Property>) -> Vec<Property> {
        let properties: Vec<Property> = properties
            .into_iter()
            .map(|p| Property {
                line: p.line,
                key: java_trim(&p.key).to_string(),
                value: java_trim(&p.value).to_string(),
            })
            .collect();
        let mut last_line: HashMap<&str, usize> = HashMap::new();
        for p in &properties {
            last_line.insert(&p.key, p.line);
        }
        let mut kept = Vec::new();
        for p in &properties {
            let by_line = last_line[p.key.as_str()];
            if by_line == p.line {
                kept.push(p.clone());
            } else {
                self.warn(p, WarningKind::Overridden { by_line });
            }
        }
        kept
    }

    fn jvm_flags(&mut self, flags: &str) {
        for flag in flags.split_whitespace() {
            let Some((key, value)) = flag.strip_prefix("-D").and_then(|f| f.split_once('=')) else {
                continue;
            };
            match key.strip_prefix("zookeeper.") {
                None if key == JAAS_FILE_PROPERTY && !value.is_empty() => {
                    self.config.auth.jaas_file = Some(PathBuf::from(value));
                }
                Some("sasl.serverconfig") if !value.is_empty() => {
                    self.config.auth.jaas_section = value.to_owned();
                }
                Some(name) if is_super_user_key(name) => {
                    self.sasl_super_users
                        .insert(name.to_owned(), value.to_owned());
                }
                Some(name) if name.starts_with("authProvider.") && value == SASL_PROVIDER => {
                    self.config.auth.sasl_scheme = true;
                }
                _ => {}
            }
        }
    }

    fn apply(&mut self, p: &Property) -> Result<(), ConfigError> {
        let key = p.key.as_str();
        match key {
            "dataDir" => self.data_dir = Some(self.at(p, self.path_value(p)?)),
            "dataLogDir" => self.config.log_dir = Some(self.path_value(p)?),
            "clientPort" => self.client_port = Some(self.at(p, self.port(p, 0)?)),
            "clientPortAddress" => {
                self.client_port_address = Some(self.at(p, self.host(p)?));
            }
            "tickTime" => {
                let tick = self.int(p, 1, TICK_TIME_MS_MAX)? as u32;
                self.tick_time_ms = Some(self.at(p, tick));
            }
            "minSessionTimeout" => self.session_timeout_ms_min = self.session_timeout(p)?,
            "maxSessionTimeout" => self.session_timeout_ms_max = self.session_timeout(p)?,
            "maxClientCnxns" => {
                self.config.limits.connections_per_ip_max = self.int(p, 0, i32::MAX.into())? as u32;
            }
            "autopurge.snapRetainCount" => {
                let count = self.int(p, i32::MIN.into(), i32::MAX.into())?;
                let min = SNAPSHOTS_RETAINED_COUNT_MIN;
                self.config.purge.snapshots_retained_count = if count < i64::from(min) {
                    self.adjusted(p, format!("below {min}, so {min} (as ZooKeeper)"));
                    min
                } else {
                    count as u32
                };
            }
            "autopurge.purgeInterval" => {
                // ZooKeeper: zero or negative turns purging off.
                let hours = self.int(p, i32::MIN.into(), i32::MAX.into())?;
                self.config.purge.interval_hours = hours.max(0) as u32;
            }
            "standaloneEnabled" => {
                self.standalone_enabled = self.boolean(p)?;
                self.config.cluster.standalone_enabled = self.standalone_enabled;
            }
            "dynamicConfigFile" => {
                self.dynamic_config_file = Some(self.at(p, self.path_value(p)?));
            }
            "electionAlg" => {
                if self.int(p, i32::MIN.into(), i32::MAX.into())? != 3 {
                    return Err(self.bad(p, "only 3 is supported, as in ZooKeeper"));
                }
            }
            "peerType" => {
                // ZooKeeper takes the role from this server's server.N line whatever this says.
                self.role(p, &p.value)?;
            }
            "initLimit"
            | "syncLimit"
            | "connectToLearnerMasterLimit"
            | "observerMasterPort"
            | "clientPortListenBacklog"
            | "quorum.cnxn.threads.size"
            | "multiAddress.reachabilityCheckTimeoutMs"
            | "jvm.pause.info-threshold.ms"
            | "jvm.pause.warn-threshold.ms"
            | "jvm.pause.sleep.time.ms" => {
                // ZooKeeper's own timing and tuning; Raft has its own.
                self.int(p, i64::MIN, i64::MAX)?;
            }
            "syncEnabled" | "multiAddress.reachabilityCheckEnabled" | "jvm.pause.monitor" => {
                self.boolean(p)?;
            }
            "quorum.auth.learner.saslLoginContext"
            | "quorum.auth.server.saslLoginContext"
            | "quorum.auth.kerberos.servicePrincipal" => {}
            "reconfigEnabled" => self.config.cluster.reconfig_enabled = self.boolean(p)?,
            "localSessionsEnabled" | "localSessionsUpgradingEnabled" => {
                self.unsupported_if_true(p, "local sessions; every session is global")?;
            }
            "quorum.auth.enableSasl"
            | "quorum.auth.serverRequireSasl"
            | "quorum.auth.learnerRequireSasl" => {
                self.unsupported_if_true(p, "SASL authentication between servers")?;
            }
            "multiAddress.enabled" => {
                self.unsupported_if_true(p, "several addresses for one server")?;
            }
            "quorumListenOnAllIPs" => {
                self.unsupported_if_true(p, "listening for peers on every address")?;
            }
            _ if self.tls_key(key, p)? => {}
            "oraclePath" => self.unsupported(p, "a quorum oracle for two-server ensembles"),
            "metricsProvider.className" => self.metrics_provider(p),
            "metricsProvider.httpHost" => self.metrics_host = Some(self.host(p)?),
            "metricsProvider.httpPort" => self.metrics_port = Some(self.port(p, 0)?),
            "metricsProvider.httpsPort" => self.metrics_https_port = Some(self.port(p, 0)?),
            "metricsProvider.httpsHost" => self.unsupported(
                p,
                "ZooKeeper's provider has no such key: HTTPS is served on metricsProvider.httpHost",
            ),
            _ if key.starts_with("metricsProvider.ssl.") => self.metrics_tls_key(p)?,
            // The JVM's families have no equivalent; the process's are what is left of them.
            "metricsProvider.exportJvmInfo" => self.config.metrics.process = self.boolean(p)?,
            _ if key.starts_with("metricsProvider.") => {}
            _ if key.starts_with("server.") => self.server_line(p)?,
            _ if key.starts_with("group.") || key.starts_with("weight.") => {
                return Err(self.bad(
                    p,
                    "hierarchical quorums (group.N, weight.N) are not supported: \
                     Warden's quorum is a majority of the participants",
                ));
            }
            _ => self.apply_system_property(p)?,
        }
        Ok(())
    }

    /// A key ZooKeeper turns into the system property `zookeeper.<key>`.
    fn apply_system_property(&mut self, p: &Property) -> Result<(), ConfigError> {
        let name = p.key.strip_prefix("zookeeper.").unwrap_or(&p.key);
        match name {
            "snapCount" => {
                let txns = self.decoded_int(p, i32::MIN.into(), i32::MAX.into())?;
                let min = SNAPSHOT_INTERVAL_TXNS_MIN;
                self.config.snapshots.interval_txns = if txns < min as i64 {
                    self.adjusted(p, format!("below {min}, so {min} (as ZooKeeper)"));
                    min
                } else {
                    txns as u64
                };
            }
            "snapSizeLimitInKb" => {
                // Long.getLong: a non-positive value turns the limit off.
                let kib = self.decoded_int(p, i64::MIN, i64::MAX)?;
                self.config.snapshots.log_bytes_max = (kib.max(0) as u64).saturating_mul(1024);
            }
            "4lw.commands.whitelist" => self.four_letter_words(p),
            "DigestAuthenticationProvider.superDigest" => {
                if !p.value.contains(':') {
                    return Err(self.bad(p, "not of the form user:base64(sha1(user:password))"));
                }
                self.config.super_digest = Some(p.value.clone());
            }
            "extendedTypesEnabled" => self.config.extended_types_enabled = self.boolean(p)?,
            "enforceQuota" => self.config.enforce_quota = self.boolean(p)?,
            "fsync.warningthresholdms" => {
                self.config.fsync_warning_threshold_ms = self.int(p, 0, i64::MAX)? as u64
            }
            // Warden's own: ZooKeeper has no such setting.
            "linearizableReads" => self.config.linearizable_reads = self.boolean(p)?,
            "emulate353TTLNodes" => {
                // Only changes how ZooKeeper reads ephemeralOwner values of its own session
                // ids; Warden's session ids never look like 3.5.3's TTL marker.
                self.boolean(p)?;
            }
            "connection_throttle_tokens" => {
                self.config.limits.connection_throttle.tokens =
                    self.decoded_int(p, 0, i32::MAX.into())? as u32;
            }
            "connection_throttle_fill_time" => {
                self.config.limits.connection_throttle.fill_time_ms =
                    self.decoded_int(p, 1, i32::MAX.into())? as u32;
            }
            "connection_throttle_fill_count" => {
                self.config.limits.connection_throttle.fill_count =
                    self.decoded_int(p, 0, i32::MAX.into())? as u32;
            }
            "connection_throttle_weight_enabled" => {
                self.config.limits.connection_throttle.weight_enabled = self.boolean(p)?;
            }
            "connection_throttle_global_session_weight" => {
                self.config.limits.connection_throttle.global_session_weight =
                    self.decoded_int(p, 1, i32::MAX.into())? as u32;
            }
            "connection_throttle_renew_session_weight" => {
                self.config.limits.connection_throttle.renew_session_weight =
                    self.decoded_int(p, 1, i32::MAX.into())? as u32;
            }
            // Local sessions do not exist here, so their weight has nothing to weigh.
            "connection_throttle_local_session_weight" => {
                self.decoded_int(p, 1, i32::MAX.into())?;
            }
            "connection_throttle_freeze_time" => {
                if self.decoded_int(p, i32::MIN.into(), i32::MAX.into())? != -1 {
                    self.unsupported(
                        p,
                        "BLUE's random dropping of connections; the token bucket alone \
                         throttles them",
                    );
                }
            }
            "connection_throttle_drop_increase"
            | "connection_throttle_drop_decrease"
            | "connection_throttle_decrease_ratio" => {
                self.unsupported(
                    p,
                    "BLUE's random dropping of connections; the token bucket alone throttles \
                     them",
                );
            }
            "maxCnxns" => {
                let max = self.decoded_int(p, i32::MIN.into(), i32::MAX.into())?;
                self.config.limits.connections_max = if max < 0 {
                    self.adjusted(p, "negative, so 0, no limit (as ZooKeeper)".into());
                    0
                } else {
                    max as u32
                };
            }
            "request_throttle_max_requests" => {
                let max = self.decoded_int(p, i32::MIN.into(), i32::MAX.into())?;
                self.request_throttle_max = u32::try_from(max).ok().filter(|m| *m > 0);
            }
            // The throttler's stall is a wake-up here: a connection waiting for room reads its
            // next request as soon as one is answered. Requests of a closed connection that
            // were not yet taken are never taken (its task is gone), as drop_stale asks.
            "request_throttle_stall_time" => {
                self.decoded_int(p, i32::MIN.into(), i32::MAX.into())?;
            }
            "request_throttle_drop_stale" => {
                self.boolean(p)?;
            }
            "throttled_op_wait_time" => {
                if self.decoded_int(p, i32::MIN.into(), i32::MAX.into())? > 0 {
                    self.unsupported(
                        p,
                        "answering requests that waited too long with ThrottledOp: Warden \
                         does not queue the requests it reads (it stops reading at \
                         limits.outstanding_requests_max), so none waits to be throttled",
                    );
                }
            }
            "globalOutstandingLimit" => {
                self.config.limits.outstanding_requests_max =
                    self.decoded_int(p, 1, i32::MAX.into())? as u32;
            }
            "jute.maxbuffer" => {
                let bytes = self.decoded_int(p, 1, i32::MAX.into())? as u32;
                // ZooKeeper's quorum packets obey jute.maxbuffer too: a peer frame carries
                // any request a client may send.
                let cluster = &mut self.config.cluster;
                cluster.peer_frame_bytes_max = cluster
                    .peer_frame_bytes_max
                    .max(crate::config::peer_frame_bytes_min(bytes));
                let limits = &mut self.config.limits;
                limits.frame_bytes_max = bytes;
                let room = 4 * u64::from(bytes);
                limits.outbound_queue_bytes_per_session_max =
                    limits.outbound_queue_bytes_per_session_max.max(room);
            }
            "znode.container.checkIntervalMs" => {
                self.config.containers.check_interval_ms =
                    self.decoded_int(p, 1, i32::MAX.into())? as u32;
            }
            "znode.container.maxNeverUsedIntervalMs" => {
                self.config.containers.never_used_interval_ms =
                    self.decoded_int(p, 0, i64::MAX)? as u64;
            }
            "znode.container.maxPerMinute" => {
                self.config.containers.deletes_per_minute_max =
                    self.decoded_int(p, 1, i32::MAX.into())? as u32;
            }
            "admin.enableServer" => self.admin_enabled = self.boolean(p)?,
            "admin.serverAddress" => self.admin_host = Some(self.host(p)?),
            "admin.serverPort" => {
                let port = self.decoded_int(p, 0, u16::MAX.into())? as u16;
                self.admin_port = Some(port);
            }
            "admin.commandURL" => self.admin_command_url = Some(p.value.clone()),
            "admin.idleTimeout" => {
                let ms = self.decoded_int(p, 1, i32::MAX.into())? as u32;
                self.admin_idle_timeout_ms = Some(ms);
            }
            "admin.forceHttps" => self.admin_force_https = self.boolean(p)?,
            "admin.portUnification" => self.admin_port_unification = self.boolean(p)?,
            "admin.needClientAuth" => self.config.admin.need_client_auth = self.boolean(p)?,
            // Read with Java's Boolean.parseBoolean: anything but "true" turns them off.
            "admin.snapshot.enabled" => {
                self.config.admin.snapshot_enabled = p.value.eq_ignore_ascii_case("true");
            }
            "admin.restore.enabled" => {
                self.config.admin.restore_enabled = p.value.eq_ignore_ascii_case("true");
            }
            "admin.rateLimiterIntervalInMS" => {
                self.config.admin.rate_limit_interval_ms = self.int(p, 0, i32::MAX.into())? as u64;
            }
            "readonlymode.enabled" => {
                self.config.cluster.read_only_mode = self.boolean(p)?;
            }
            // Warden's own (docs/migration.md): the ZooKeeper ensemble to follow, and this
            // server's id in it.
            "migration.follow" => self.config.migration.follow = p.value.clone(),
            "migration.observerId" => {
                self.config.migration.observer_id = Some(self.decoded_int(p, 1, i64::MAX)? as u64);
            }
            "forceSync" => {
                if p.value != "yes" {
                    self.unsupported(
                        p,
                        "turning fsync off; every write is fsynced before its reply",
                    );
                }
            }
            "skipACL" => {
                if p.value == "yes" {
                    self.unsupported(p, "skipping ACL checks; ACLs are always enforced");
                }
            }
            "sessionRequireClientSASLAuth" => self.require_sasl = self.boolean(p)?,
            "enforce.auth.enabled" => self.enforce_auth = Some(self.at(p, self.boolean(p)?)),
            "enforce.auth.schemes" => {
                // As ZooKeeper: split on ',' and trimmed.
                self.enforce_auth_schemes = p
                    .value
                    .split(',')
                    .map(|s| java_trim(s).to_owned())
                    .collect();
            }
            "allowSaslFailedClients" => {
                self.unsupported_if_true(p, "a failed SASL exchange always closes its connection")?;
            }
            "letAnySaslUserDoX" => {
                self.unsupported(
                    p,
                    "a sasl ACL matches its own user and a user named super only",
                );
            }
            "SASLAuthenticationProvider.superPassword" => {
                self.unsupported(p, "the super user's password comes from the JAAS file only");
            }
            "sasl.serverconfig" => {
                if p.value.is_empty() {
                    return Err(self.bad(p, "empty: the name of a section of the JAAS file"));
                }
                self.config.auth.jaas_section = p.value.clone();
            }
            _ if is_super_user_key(name) => {
                self.sasl_super_users
                    .insert(name.to_owned(), p.value.clone());
            }
            _ if name.starts_with("authProvider.") => {
                if p.value == SASL_PROVIDER {
                    self.config.auth.sasl_scheme = true;
                } else if !p.value.ends_with(".DigestAuthenticationProvider")
                    && !p.value.ends_with(".IPAuthenticationProvider")
                    && !p.value.ends_with(".X509AuthenticationProvider")
                {
                    self.unsupported(
                        p,
                        "authentication schemes other than digest, ip, sasl and x509",
                    );
                }
            }
            _ if self.tls_property(name, p)? => {}
            _ if is_zookeeper_tuning(name) => {}
            _ => self.warn(p, WarningKind::UnknownKey),
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(Config, Vec<Warning>), ConfigError> {
        self.read_dynamic_config_file()?;
        let data_dir = self.data_dir.take().ok_or_else(|| {
            self.invalid("dataDir is not set; ZooKeeper refuses to start without it too")
        })?;
        self.config.data_dir = data_dir.value;
        self.resolve_session_timeouts()?;
        self.resolve_cluster()?;
        self.resolve_client_listen()?;
        self.resolve_endpoints();
        self.resolve_four_letter_words();
        self.resolve_auth()?;
        self.resolve_tls()?;
        // ZooKeeper's two server-wide bounds on requests in process (globalOutstandingLimit
        // on reading, the RequestThrottler on processing) are one here: reading stops at the
        // lower of them.
        if let Some(max) = self.request_throttle_max {
            let limits = &mut self.config.limits;
            limits.outstanding_requests_max = limits.outstanding_requests_max.min(max);
        }
        self.config.zoo_cfg = Some(ZooCfgFiles {
            path: self.path.to_path_buf(),
            dynamic_version: self.dynamic_version,
        });
        self.config
            .validate()
            .map_err(|source| ConfigError::Invalid {
                path: self.path.to_path_buf(),
                source,
            })?;
        Ok((self.config, self.warnings))
    }

    /// Without tickTime a zoo.cfg gets ZooKeeper's default tick, not Warden's: clients would
    /// see the session timeouts it implies.
    fn resolve_session_timeouts(&mut self) -> Result<(), ConfigError> {
        let tick = self.tick_time_ms.as_ref();
        let tick_ms = tick.map_or(ZOOKEEPER_TICK_TIME_MS_DEFAULT, |t| t.value);
        self.config.tick_time_ms = tick_ms;
        let describe = |key: &str, set: &Option<At<u32>>, ticks: u32| match set {
            Some(at) => (at.value, format!("{key}={} (line {})", at.value, at.line)),
            None => {
                let ms = ticks * tick_ms;
                let origin = match tick {
                    Some(t) => format!("tickTime on line {}", t.line),
                    None => "the default tickTime".to_string(),
                };
                (ms, format!("{key}={ms} ({ticks} × {origin})"))
            }
        };
        let (min, min_text) = describe(
            "minSessionTimeout",
            &self.session_timeout_ms_min,
            SESSION_TIMEOUT_TICKS_MIN,
        );
        let (max, max_text) = describe(
            "maxSessionTimeout",
            &self.session_timeout_ms_max,
            SESSION_TIMEOUT_TICKS_MAX,
        );
        if min > max {
            return Err(self.invalid(format!("{min_text} is larger than {max_text}")));
        }
        self.config.session_timeout_ms_min = min;
        self.config.session_timeout_ms_max = max;
        Ok(())
    }

    /// ZooKeeper's rules (`parseDynamicConfig`, `checkValidity`): one participant with
    /// standaloneEnabled is a standalone server whose server.N line is ignored; more, or any
    /// with standaloneEnabled=false, is an ensemble, and then the myid file must name one.
    fn resolve_cluster(&mut self) -> Result<(), ConfigError> {
        let participants = self
            .servers
            .iter()
            .filter(|s| s.value.role == Role::Participant)
            .count();
        let observers = self.servers.len() - participants;
        if participants == 0 && observers > 0 {
            return Err(self.invalid("server.N lines name observers but no participant"));
        }
        if participants == 0 && !self.standalone_enabled {
            return Err(self.invalid("standaloneEnabled=false needs at least one server.N line"));
        }
        if participants == 1 && self.standalone_enabled && observers > 0 {
            return Err(self.invalid(
                "observers need an ensemble: one participant with standaloneEnabled=true runs \
                 standalone",
            ));
        }
        let ensemble = participants > 1 || (participants == 1 && !self.standalone_enabled);
        let myid_path = self.config.data_dir.join("myid");
        let my_id = read_my_id(&myid_path)?;
        self.config.cluster.my_id = my_id;
        if !ensemble {
            if let Some(server) = self.servers.first() {
                let warning = Warning {
                    path: self.path.to_path_buf(),
                    line: server.line,
                    key: format!("server.{}", server.value.id),
                    kind: WarningKind::Unsupported(
                        "a single server.N line with standaloneEnabled=true; like ZooKeeper, \
                         Warden runs standalone",
                    ),
                };
                self.warnings.push(warning);
                self.take_client_address_of_my_server(my_id)?;
            }
            return Ok(());
        }
        let Some(my_id) = my_id else {
            return Err(ConfigError::Invalid {
                path: myid_path,
                source: InvalidConfig(
                    "myid file is missing; with server.N lines each server needs one holding \
                     its N"
                        .into(),
                ),
            });
        };
        if !self.servers.iter().any(|s| s.value.id == my_id) {
            return Err(ConfigError::Invalid {
                path: myid_path,
                source: InvalidConfig(format!(
                    "myid is {my_id} but there is no server.{my_id} line"
                )),
            });
        }
        self.take_client_address_of_my_server(Some(my_id))?;
        self.config.cluster.members = self.servers.iter().map(|s| s.value.clone()).collect();
        Ok(())
    }

    /// ZooKeeper's `setupClientPort`: this server's `;[host:]port` wins over clientPort, which
    /// may only differ from it in host, and only when clientPort listens on every address.
    fn take_client_address_of_my_server(&mut self, my_id: Option<u64>) -> Result<(), ConfigError> {
        let Some(me) = self.servers.iter().find(|s| Some(s.value.id) == my_id) else {
            return Ok(());
        };
        let Some(from_line) = me.value.client.clone() else {
            return Ok(());
        };
        let line = me.line;
        if let Some(port) = &self.client_port {
            let host = self.client_port_address.as_ref().map(|a| a.value.as_str());
            let hosts_differ = host.is_some_and(|h| !same_ip(h, &from_line.host));
            if port.value != from_line.port || hosts_differ {
                return Err(self.invalid(format!(
                    "the client address of this server (server.{}, line {line}) is {from_line}, \
                     but clientPortAddress/clientPort (line {}) say {}",
                    me.value.id,
                    port.line,
                    HostPort::new(host.unwrap_or(WILDCARD_HOST), port.value)
                )));
            }
        }
        self.client_port = Some(At {
            value: from_line.port,
            line,
        });
        self.client_port_address = Some(At {
            value: from_line.host,
            line,
        });
        Ok(())
    }

    fn resolve_client_listen(&mut self) -> Result<(), ConfigError> {
        self.config.client_listen = match (&self.client_port_address, &self.client_port) {
            (Some(address), Some(port)) => HostPort::new(address.value.clone(), port.value),
            (None, Some(port)) => HostPort::new(WILDCARD_HOST, port.value),
            (Some(address), None) => {
                return Err(self.invalid(format!(
                    "clientPortAddress is set (line {}) but clientPort is not",
                    address.line
                )));
            }
            // A TLS-only server: its one client port is the secure one (`resolve_tls`).
            (None, None) if self.tls_only() => return Ok(()),
            (None, None) => {
                return Err(self.invalid(
                    "clientPort is not set, and no server.N line gives this server a client \
                     port after ';'",
                ));
            }
        };
        Ok(())
    }

    /// ZooKeeper's `AuthenticationHelper`: sessionRequireClientSASLAuth=true requires sasl
    /// whatever enforce.auth.* say; otherwise enforce.auth.enabled=true requires one of
    /// enforce.auth.schemes, which may not be empty (each must have a provider:
    /// `Auth::validate`).
    fn resolve_auth(&mut self) -> Result<(), ConfigError> {
        let auth = &mut self.config.auth;
        auth.sasl_super_users
            .extend(std::mem::take(&mut self.sasl_super_users).into_values());
        if self.require_sasl {
            auth.required_schemes = vec!["sasl".to_owned()];
        } else if let Some(enabled) = self.enforce_auth.as_ref().filter(|e| e.value) {
            let schemes: Vec<String> = std::mem::take(&mut self.enforce_auth_schemes)
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect();
            if schemes.is_empty() {
                return Err(self.invalid(format!(
                    "enforce.auth.enabled=true (line {}) needs enforce.auth.schemes, as in \
                     ZooKeeper",
                    enabled.line
                )));
            }
            auth.required_schemes = schemes;
        }
        Ok(())
    }

    fn resolve_four_letter_words(&mut self) {
        let mut words = std::mem::take(&mut self.four_letter_words);
        // ZooKeeper enables isro along with read-only mode.
        if self.config.cluster.read_only_mode && !words.iter().any(|w| w == "*" || w == "isro") {
            words.push("isro".into());
        }
        self.config.four_letter_words = words;
    }

    fn resolve_endpoints(&mut self) {
        // As ZooKeeper: an admin server unless admin.enableServer=false, on 0.0.0.0:8080
        // unless the file names an address or port. Only a named one is fatal when taken.
        let admin = &mut self.config.admin;
        admin.enabled = self.admin_enabled;
        admin.listen_default = HostPort::new(WILDCARD_HOST, ADMIN_PORT_DEFAULT);
        if self.admin_host.is_some() || self.admin_port.is_some() {
            admin.listen = Some(HostPort::new(
                self.admin_host
                    .take()
                    .unwrap_or_else(|| WILDCARD_HOST.into()),
                self.admin_port.unwrap_or(ADMIN_PORT_DEFAULT),
            ));
        }
        if let Some(url) = self.admin_command_url.take() {
            admin.command_url = url;
        }
        if let Some(ms) = self.admin_idle_timeout_ms {
            admin.idle_timeout_ms = ms;
        }
        // As ZooKeeper's JettyAdminServer: forceHttps wins over portUnification.
        admin.https = if self.admin_force_https {
            AdminHttps::Only
        } else if self.admin_port_unification {
            AdminHttps::Either
        } else {
            AdminHttps::Off
        };
        // As ZooKeeper: a metrics endpoint only with the Prometheus provider, on
        // 0.0.0.0:7000 unless the file names an address or port. Only a named one is fatal
        // when taken. With httpsPort (ZooKeeper 3.10), HTTPS on it, and plain HTTP only if
        // httpPort is set too; httpHost is the host of both.
        if self.prometheus {
            let metrics = &mut self.config.metrics;
            let default = HostPort::new(WILDCARD_HOST, PROMETHEUS_PORT_DEFAULT);
            if let Some(https_port) = self.metrics_https_port {
                let host = self.metrics_host.take().unwrap_or(default.host);
                metrics.https_listen = Some(HostPort::new(host.clone(), https_port));
                metrics.listen = self.metrics_port.map(|port| HostPort::new(host, port));
            } else if self.metrics_host.is_some() || self.metrics_port.is_some() {
                metrics.listen = Some(HostPort::new(
                    self.metrics_host.take().unwrap_or(default.host),
                    self.metrics_port.unwrap_or(default.port),
                ));
            } else {
                metrics.listen_default = Some(default);
            }
        }
    }

    /// ZooKeeper 3.5+ may keep the server.N lines in a separate file; zoo.cfg then names it
    /// and may not have server.N lines of its own. As in ZooKeeper (`QuorumPeerConfig.parse`),
    /// the file holds no `version` line: its version is the hex number its name ends in
    /// (`zoo.cfg.dynamic.100000000`), 0 when the name ends in none.
    fn read_dynamic_config_file(&mut self) -> Result<(), ConfigError> {
        let Some(file) = self.dynamic_config_file.clone() else {
            return Ok(());
        };
        if let Some(server) = self.servers.first() {
            let id = server.value.id;
            return Err(self.invalid(format!(
                "server.{id} (line {}) must be in the dynamic config file, since \
                 dynamicConfigFile is set (line {})",
                server.line, file.line
            )));
        }
        let version = dynamic::version_from_file_name(&file.value).map_err(|reason| {
            ConfigError::Invalid {
                path: file.value.clone(),
                source: InvalidConfig(reason),
            }
        })?;
        let properties = read_properties(&file.value)?;
        let mut dynamic = Reader::new(&file.value);
        for p in dynamic.last_of_each_key(properties) {
            match p.key.as_str() {
                "version" => {
                    return Err(dynamic.bad(
                        &p,
                        "a dynamic config file holds no version (ZooKeeper refuses it too: \
                         \"dynamic file shouldn't have version inside\"); its version is the \
                         hex number its name ends in",
                    ));
                }
                key if key.starts_with("server.") => dynamic.server_line(&p)?,
                _ => {
                    return Err(dynamic.bad(&p, "a dynamic config file holds only server.N lines"));
                }
            }
        }
        self.warnings.append(&mut dynamic.warnings);
        self.servers = dynamic.servers;
        self.dynamic_version = Some(version);
        Ok(())
    }

    fn server_line(&mut self, p: &Property) -> Result<(), ConfigError> {
        let id_text = &p.key["server.".len()..];
        let id = id_text
            .parse::<u64>()
            .ok()
            .filter(|_| id_text.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| self.bad(p, format!("{id_text:?} is not a server id (a number)")))?;
        let member = parse_server_address(id, &p.value).map_err(|reason| self.bad(p, reason))?;
        if let Some(other) = self.servers.iter().find(|s| s.value.id == id) {
            return Err(self.bad(
                p,
                format!("server {id} is already given on line {}", other.line),
            ));
        }
        self.servers.push(At {
            value: member,
            line: p.line,
        });
        Ok(())
    }

    fn four_letter_words(&mut self, p: &Property) {
        let words: Vec<&str> = p
            .value
            .split(',')
            .map(java_trim)
            .filter(|w| !w.is_empty())
            .collect();
        if words.contains(&"*") {
            self.four_letter_words = vec!["*".into()];
            return;
        }
        // ZooKeeper always answers srvr: zkServer.sh needs it.
        let mut enabled = vec!["srvr".to_string()];
        for word in words {
            if !FOUR_LETTER_WORDS.contains(&word) {
                self.adjusted(p, format!("unknown four-letter word {word:?} left out"));
            } else if !enabled.iter().any(|w| w == word) {
                enabled.push(word.to_string());
            }
        }
        self.four_letter_words = enabled;
    }

    fn metrics_provider(&mut self, p: &Property) {
        match p.value.as_str() {
            PROMETHEUS_PROVIDER => self.prometheus = true,
            "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"
            | "org.apache.zookeeper.metrics.impl.NullMetricsProvider" => self.prometheus = false,
            _ => self.unsupported(p, "metrics providers other than Prometheus"),
        }
    }

    // Values.

    fn at<T>(&self, p: &Property, value: T) -> At<T> {
        At {
            value,
            line: p.line,
        }
    }

    fn bad(&self, p: &Property, reason: impl Into<String>) -> ConfigError {
        let mut reason = reason.into();
        if p.value.contains('#') {
            reason.push_str(
                " (zoo.cfg has no comments at the end of a line: all after '=' is the value)",
            );
        }
        ConfigError::Value {
            path: self.path.to_path_buf(),
            line: p.line,
            key: p.key.clone(),
            value: p.value.clone(),
            reason,
        }
    }

    fn invalid(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            source: InvalidConfig(message.into()),
        }
    }

    /// An integer as Java's `Integer.parseInt` reads it (decimal, optional sign), in range.
    fn int(&self, p: &Property, min: i64, max: i64) -> Result<i64, ConfigError> {
        let value = p.value.parse::<i64>().ok();
        self.in_range(p, value, min, max)
    }

    /// An integer as Java's `Integer.getInteger` reads a system property (`Integer.decode`:
    /// also 0x1F, #1F and 017), in range.
    fn decoded_int(&self, p: &Property, min: i64, max: i64) -> Result<i64, ConfigError> {
        self.in_range(p, java_decode(&p.value), min, max)
    }

    fn in_range(
        &self,
        p: &Property,
        value: Option<i64>,
        min: i64,
        max: i64,
    ) -> Result<i64, ConfigError> {
        match value {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            Some(_) => Err(self.bad(p, format!("must be from {min} to {max}"))),
            None => Err(self.bad(p, "not a number")),
        }
    }

    fn port(&self, p: &Property, min: u16) -> Result<u16, ConfigError> {
        let port = p.value.parse::<u16>().ok().filter(|&port| port >= min);
        port.ok_or_else(|| self.bad(p, format!("not a port number ({min} to 65535)")))
    }

    fn boolean(&self, p: &Property) -> Result<bool, ConfigError> {
        match p.value.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.bad(p, "must be true or false")),
        }
    }

    fn host(&self, p: &Property) -> Result<String, ConfigError> {
        let host = p.value.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(self.bad(p, "empty"));
        }
        Ok(host.to_string())
    }

    fn path_value(&self, p: &Property) -> Result<PathBuf, ConfigError> {
        if p.value.is_empty() {
            return Err(self.bad(p, "empty"));
        }
        Ok(PathBuf::from(&p.value))
    }

    /// -1, ZooKeeper's "not set", gives the default (a multiple of tickTime).
    fn session_timeout(&self, p: &Property) -> Result<Option<At<u32>>, ConfigError> {
        match self.int(p, -1, i32::MAX.into())? {
            -1 => Ok(None),
            0 => Err(self.bad(p, "must be -1 (the default) or at least 1")),
            ms => Ok(Some(self.at(p, ms as u32))),
        }
    }

    fn role(&self, p: &Property, text: &str) -> Result<Role, ConfigError> {
        parse_role(text).map_err(|reason| self.bad(p, reason))
    }

    // Warnings.

    fn warn(&mut self, p: &Property, kind: WarningKind) {
        self.warnings.push(Warning {
            path: self.path.to_path_buf(),
            line: p.line,
            key: p.key.clone(),
            kind,
        });
    }

    fn unsupported(&mut self, p: &Property, reason: &'static str) {
        self.warn(p, WarningKind::Unsupported(reason));
    }

    fn unsupported_if_true(
        &mut self,
        p: &Property,
        reason: &'static str,
    ) -> Result<(), ConfigError> {
        if self.boolean(p)? {
            self.unsupported(p, reason);
        }
        Ok(())
    }

    fn adjusted(&mut self, p: &Property, message: String) {
        self.warn(p, WarningKind::Adjusted(message));
    }
}

/// `zookeeper.superUser` and `zookeeper.superUser.<anything>` (ZooKeeper's
/// `isSaslSuperUser` looks at every property of that form).
fn is_super_user_key(name: &str) -> bool {
    name.strip_prefix("superUser")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// System properties that tune ZooKeeper's own machinery (its request pipeline, log files,
/// threads, caches, TLS for a secure port Warden does not have): nothing in Warden corresponds.
fn is_zookeeper_tuning(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "preAllocSize",
        "txnLogSizeLimitInKb",
        "commitLogCount",
        "maxResponseCacheSize",
        "maxGetChildrenResponseCacheSize",
        "flushDelay",
        "maxWriteQueuePollTime",
        "maxBatchSize",
        "requestStaleLatencyCheck",
        "requestStaleConnectionCheck",
        "digest.enabled",
        "watchManagerName",
        "closeSessionTxn.enabled",
        "tcpKeepAlive",
        "clientTcpKeepAlive",
        "cnxTimeout",
        "electionPortBindRetry",
        "audit.enable",
        "snapshot.trust.empty",
        "snapshot.compression.method",
        "serverCnxnFactory",
        "outstandingHandshake.limit",
        "largeRequestMaxBytes",
        "largeRequestThreshold",
        "jute.maxbuffer.extrasize",
    ];
    const PREFIXES: &[&str] = &[
        "admin.",
        "nio.",
        "netty.",
        "kerberos.",
        "leader.",
        "learner.",
    ];
    NAMES.contains(&name) || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

fn read_properties(path: &Path) -> Result<Vec<Property>, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    // Java reads zoo.cfg as ISO-8859-1; UTF-8 first, so a non-ASCII dataDir means what the
    // operator wrote.
    let text = String::from_utf8(bytes)
        .unwrap_or_else(|e| e.into_bytes().iter().map(|&b| char::from(b)).collect());
    properties::parse(&text).map_err(|e| ConfigError::Syntax {
        path: path.to_path_buf(),
        line: e.line,
        message: e.message,
    })
}

/// The first line of a myid file, a server id; `None` when there is no such file.
fn read_my_id(path: &Path) -> Result<Option<u64>, ConfigError> {
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    // Java's readLine: a line ends at \n, \r or \r\n.
    let first = java_trim(text.split(['\n', '\r']).next().unwrap_or(""));
    let id = first
        .parse::<u64>()
        .ok()
        .filter(|_| first.bytes().all(|b| b.is_ascii_digit()));
    match id {
        Some(id) => Ok(Some(id)),
        None => Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            source: InvalidConfig(format!(
                "{first:?} is not a server id; a myid file holds this server's number, the N \
                 of its server.N line"
            )),
        }),
    }
}

/// `host:peerPort:electionPort[:participant|observer][;[clientHost:]clientPort]`, as
/// `QuorumPeer.QuorumServer` reads it. IPv6 hosts are written in brackets.
pub(crate) fn parse_server_address(id: u64, text: &str) -> Result<Member, String> {
    const FORM: &str = "expected host:peerPort:electionPort[:participant|observer]\
                        [;[clientHost:]clientPort]";
    let mut halves = text.split(';');
    let server = halves.next().unwrap_or("");
    let client = halves.next().filter(|c| !c.is_empty());
    if halves.next().is_some() {
        return Err(format!("more than one ';': {FORM}"));
    }
    if server.contains('|') {
        return Err("several addresses for one server (multiAddress) are not supported".into());
    }
    let parts = host_and_port_parts(server)?;
    if !(3..=4).contains(&parts.len()) {
        return Err(FORM.into());
    }
    let host = parts[0].to_string();
    if host.is_empty() {
        return Err(format!("no host: {FORM}"));
    }
    let peer_port = parse_port(parts[1], 1, "peer port")?;
    let election_port = parse_port(parts[2], 1, "election port")?;
    if peer_port == election_port {
        return Err(format!(
            "the peer port and the election port are both {peer_port}; they must differ"
        ));
    }
    let role = match parts.get(3) {
        Some(role) => parse_role(role)?,
        None => Role::Participant,
    };
    let client = match client {
        None => None,
        Some(client) => {
            let parts = host_and_port_parts(client)?;
            let (host, port) = match parts[..] {
                [port] => (WILDCARD_HOST, port),
                [host, port] if !host.is_empty() => (host, port),
                _ => return Err(format!("the client address {client:?} is not [host:]port")),
            };
            Some(HostPort::new(host, parse_port(port, 0, "client port")?))
        }
    };
    Ok(Member {
        id,
        host,
        peer_port,
        election_port: Some(election_port),
        role,
        client,
    })
}

/// `ConfigUtils.getHostAndPort`: split on ':' unless the host is a bracketed IPv6 address.
fn host_and_port_parts(text: &str) -> Result<Vec<&str>, String> {
    let Some(rest) = text.strip_prefix('[') else {
        return Ok(text.split(':').collect());
    };
    let (host, after) = rest
        .split_once(']')
        .ok_or_else(|| format!("{text:?} starts with '[' but has no ']'"))?;
    let ports = after
        .strip_prefix(':')
        .filter(|p| !p.is_empty())
        .ok_or_else(|| format!("{text:?} has no port after ']:'"))?;
    Ok(std::iter::once(host).chain(ports.split(':')).collect())
}

fn parse_port(text: &str, min: u16, what: &str) -> Result<u16, String> {
    text.parse::<u16>()
        .ok()
        .filter(|&port| port >= min)
        .ok_or_else(|| format!("the {what} {text:?} is not a port number ({min} to 65535)"))
}

fn parse_role(text: &str) -> Result<Role, String> {
    match java_trim(text).to_ascii_lowercase().as_str() {
        "participant" => Ok(Role::Participant),
        "observer" => Ok(Role::Observer),
        _ => Err(format!("{text:?} is not a role (participant or observer)")),
    }
}

/// Java's `String.trim`: every character up to U+0020 goes, at both ends.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// Java's `Long.decode`: optional sign, then `0x`/`0X`/`#` for hex, a leading `0` for octal.
fn java_decode(text: &str) -> Option<i64> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(hex) = rest
        .strip_prefix("0x")
        .or_else(|| rest.strip_prefix("0X"))
        .or_else(|| rest.strip_prefix('#'))
    {
        (16, hex)
    } else if rest.len() > 1
        && let Some(octal) = rest.strip_prefix('0')
    {
        (8, octal)
    } else {
        (10, rest)
    };
    if digits.is_empty() || digits.starts_with(['-', '+']) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Whether two hosts are the same address. Host names are not resolved here, so two
/// different names count as the same (the server finds out when it binds).
fn same_ip(a: &str, b: &str) -> bool {
    match (a.parse::<IpAddr>(), b.parse::<IpAddr>()) {
        (Ok(a), Ok(b)) => a == b || a.is_unspecified(),
        _ => true,
    }
}

#[cfg(test)]
mod tests;
