//! The running server: consensus and the replica started from a [`Config`], the client
//! listener with its connection limits, the peer listener of a cluster member, and the duties
//! that follow leadership: expiring silent sessions and deleting empty containers and expired
//! TTL nodes on the leader, reporting sessions to the leader on a follower, and closing
//! client connections when the server stops serving or its leader changes.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use warden_state::{State, StateConfig, TxnKind};

use crate::admin;
use crate::auth;
use crate::cluster::transport::Transport;
use crate::cluster::{self, forward::Forwarder};
use crate::config::Config;
use crate::connection;
use crate::consensus::{self, ClusterId, Consensus, Identity, MemberAddr, Proposal};
use crate::replica::{Replica, now_ms};
use crate::stats::{ServerStats, Summary};
use crate::tls;
use crate::zoo_cfg::dynamic::DynamicConfigFiles;

/// The longest the log's flush thread waits to gather writes into one fsync. raft-log's own
/// default (1 ms) is a floor under every write's latency; 100 µs keeps batching under load
/// (docs/consensus-research.md §4.3). The wait follows the load (`LogStore::open`): none
/// while writes come one at a time, this long when many join each fsync.
const LOG_FLUSH_WAIT: Duration = Duration::from_micros(100);

/// What every connection and duty of the server shares.
pub struct Context {
    pub config: Arc<Config>,
    pub consensus: Consensus,
    /// A follower's channel to its leader.
    pub forwarder: Forwarder,
    replica: Arc<Mutex<Replica>>,
    next_connection: AtomicU64,
    /// Since when this server has not served (its start, or when it last lost its quorum).
    unserved_since: Mutex<Instant>,
    pub started: Instant,
    /// The replica's counters, read without its lock.
    pub stats: Arc<ServerStats>,
    /// Elections and leadership, as this server saw them.
    pub leadership: Leadership,
    pub client_addr: SocketAddr,
    /// Where TLS clients connect, if there is a secure client port.
    pub secure_client_addr: Option<SocketAddr>,
    /// TLS for clients, when configured.
    tls: Option<Arc<tls::Acceptor>>,
    /// The peers of the connections on the secure port (`secure_connections` of the admin
    /// `connections` command).
    pub secure_peers: Mutex<HashSet<SocketAddr>>,
    /// Client connections without TLS from other hosts and from this one, while TLS is
    /// configured (ZooKeeper's non_mtls_remote_conn_count / non_mtls_local_conn_count).
    pub plain_connections: PlainConnections,
    /// Where the admin HTTP server listens, if it runs.
    pub admin_addr: Option<SocketAddr>,
    /// Where `/metrics` is served, if it is.
    pub metrics_addr: Option<SocketAddr>,
    /// The SASL DIGEST-MD5 users, if the JAAS file names any section of that name.
    pub sasl_users: Option<auth::jaas::Users>,
    connections: Mutex<Connections>,
    /// This leader's one reconfiguration at a time (cluster::membership).
    pub reconfiguring: AtomicBool,
    /// Set once when the server stops; ends every connection's task (`until_stopped`).
    stopping: tokio::sync::watch::Sender<bool>,
    /// The rate at which handshakes are let in (`limits.connection_throttle`).
    pub throttle: crate::throttle::Throttle,
    /// The admin `snapshot` and `restore` commands' rate limits.
    pub admin_limiters: crate::admin::snapshots::Limiters,
}

/// Elections and leadership as this server saw them (ZooKeeper's election_time,
/// looking_count and leader_uptime).
#[derive(Debug, Default)]
pub struct Leadership {
    /// Milliseconds from losing a leader to knowing the next one.
    pub election_time_ms: Summary,
    /// Times this server found itself without a leader, its start included.
    pub elections: AtomicU64,
    /// Since when this server leads, while it does.
    pub leading_since: Mutex<Option<Instant>>,
}

impl Leadership {
    /// How long this server has led, if it leads.
    pub fn leading_for(&self) -> Option<Duration> {
        self.leading_since
            .lock()
            .expect("leading_since lock poisoned")
            .map(|since| since.elapsed())
    }
}

/// Client connections made without TLS while TLS is configured, as ZooKeeper's Netty
/// connection factory (the one TLS needs) counts them; kept since the start.
#[derive(Debug, Default)]
pub struct PlainConnections {
    pub remote: AtomicU64,
    pub local: AtomicU64,
}

/// Open client connections, for the limits.
#[derive(Default)]
struct Connections {
    total: u32,
    per_ip: HashMap<IpAddr, u32>,
}

impl Context {
    /// The replica, locked. Held only for in-memory work, never across an await.
    pub fn replica(&self) -> MutexGuard<'_, Replica> {
        self.replica.lock().expect("replica lock poisoned")
    }

    /// Whether this server serves clients: consensus says so (docs/cluster.md), and in a
    /// cluster, the membership is written in `/zookeeper/config` (the first leader writes it
    /// moments after it is elected), so that no client ever finds it empty, as with ZooKeeper.
    pub fn serving(&self) -> bool {
        self.consensus.serving()
            && (self.consensus.standalone()
                || self
                    .replica()
                    .state()
                    .tree()
                    .get(warden_state::system::CONFIG)
                    .and_then(|n| n.data().map(|d| !d.is_empty()))
                    .unwrap_or(false))
    }

    /// How long a server that stopped serving keeps its clients' connections, waiting for a
    /// leader, before it closes them: one election timeout, so that a change of leader costs
    /// clients a pause rather than their connections, while a server cut off from its quorum
    /// still sends them on well within their session timeout (at least two ticks).
    pub fn leaderless_grace(&self) -> Duration {
        self.consensus.election_timeout()
    }

    /// Waits, within the leaderless grace, for this server to serve again; returns whether
    /// it does.
    pub async fn await_serving(&self) -> bool {
        let until = *self
            .unserved_since
            .lock()
            .expect("unserved_since lock poisoned")
            + self.leaderless_grace();
        loop {
            if self.serving() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(SERVING_POLL).await;
        }
    }

    /// Whether this server, cut off from its quorum, serves reads (read-only mode). As in
    /// ZooKeeper (`QuorumPeer.run`), only once it has gone without a quorum for
    /// max(2 s, tickTime): a server that is starting or electing is not read-only yet, so a
    /// client that allows read-only mode is not stuck with it when a leader is moments away.
    pub fn read_only_mode(&self) -> bool {
        let delay = Duration::from_millis(u64::from(self.config.tick_time_ms).max(2000));
        self.config.cluster.read_only_mode
            && !self.consensus.standalone()
            && self
                .unserved_since
                .lock()
                .expect("unserved_since lock poisoned")
                .elapsed()
                >= delay
    }

    /// Runs `work` until it ends or this server stops, whichever is first. A connection's
    /// task must not outlive its server: in a process that goes on (an embedded server) it
    /// would keep the server's log open and answer peers and clients for a stopped server.
    pub async fn until_stopped(&self, work: impl Future<Output = ()>) {
        let mut stopping = self.stopping.subscribe();
        tokio::select! {
            () = work => {}
            _ = stopping.wait_for(|stopping| *stopping) => {}
        }
    }

    pub fn next_connection_id(&self) -> u64 {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a new connection from `ip`, unless a limit says no (and which).
    fn admit(&self, ip: IpAddr) -> Result<(), &'static str> {
        let limits = &self.config.limits;
        let mut c = self.connections.lock().expect("connections lock poisoned");
        if limits.connections_max != 0 && c.total >= limits.connections_max {
            return Err("limits.connections_max");
        }
        let from_ip = c.per_ip.entry(ip).or_default();
        if limits.connections_per_ip_max != 0 && *from_ip >= limits.connections_per_ip_max {
            return Err("limits.connections_per_ip_max");
        }
        *from_ip += 1;
        c.total += 1;
        Ok(())
    }

    fn release(&self, ip: IpAddr) {
        let mut c = self.connections.lock().expect("connections lock poisoned");
        c.total -= 1;
        if let Some(n) = c.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                c.per_ip.remove(&ip);
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Consensus(#[from] consensus::StartError),
    #[error(transparent)]
    Jaas(#[from] auth::jaas::JaasError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot listen for TLS clients on {addr}: {source}")]
    ListenSecure {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot keep data in {dir}: {why}")]
    DataDir { dir: String, why: String },
    #[error("cannot listen for clients on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot listen for admin HTTP on {addr}: {source}")]
    ListenAdmin {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot serve Prometheus metrics on {addr}: {source}")]
    ListenMetrics {
        addr: String,
        source: std::io::Error,
    },
    #[error("HTTPS for Prometheus metrics: {0}")]
    MetricsTls(tls::TlsError),
    #[error("cannot listen for other servers on {addr}: {source}")]
    ListenPeers {
        addr: String,
        source: std::io::Error,
    },
    #[error(
        "migration.follow is set, but this Warden already holds data of its own ({znodes} \
         znodes, {sessions} sessions): a mirror of ZooKeeper starts from an empty data directory"
    )]
    NotEmptyToFollow { znodes: usize, sessions: usize },
}

/// What a start checks before it opens anything or listens anywhere, and what it read doing
/// so: the TLS key material, the data and log directories (directories this process may
/// write to, or may make), and the JAAS file's users. It changes nothing, so
/// `warden server --check-config` runs it alone.
pub struct Preflight {
    pub tls: Option<tls::Acceptor>,
    pub transport: Transport,
    /// The admin server's HTTPS context, when it serves HTTPS.
    pub admin_tls: Option<tls::HttpsContext>,
    /// The metrics endpoint's HTTPS context, when it serves HTTPS.
    pub metrics_tls: Option<tls::HttpsContext>,
    pub sasl_users: Option<auth::jaas::Users>,
}

pub fn preflight(config: &Config) -> Result<Preflight, StartError> {
    let tls = if config.tls.enabled() {
        Some(tls::Acceptor::new(&config.tls)?)
    } else {
        None
    };
    for dir in [config.data_dir.as_path(), config.resolved_log_dir()] {
        check_dir(dir).map_err(|why| StartError::DataDir {
            dir: dir.display().to_string(),
            why,
        })?;
    }
    let admin = &config.admin;
    let admin_tls = if admin.enabled && admin.https != crate::config::AdminHttps::Off {
        Some(tls::HttpsContext::fixed(tls::quorum::https_config(
            &config.quorum_tls,
            admin.need_client_auth,
        )?))
    } else {
        None
    };
    let metrics_tls = match &config.metrics.https_listen {
        Some(_) => {
            Some(tls::HttpsContext::metrics(&config.metrics.tls).map_err(StartError::MetricsTls)?)
        }
        None => None,
    };
    Ok(Preflight {
        tls,
        transport: Transport::new(&config.quorum_tls)?,
        admin_tls,
        metrics_tls,
        sasl_users: auth::sasl_users(&config.auth)?,
    })
}

/// Whether `dir` is a directory this process may write to, or the nearest of its ancestors
/// that exists is (then a start makes it).
fn check_dir(dir: &Path) -> Result<(), String> {
    use rustix::fs::{Access, access};
    let mut existing = dir;
    loop {
        match std::fs::metadata(existing) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => return Err(format!("{} is not a directory", existing.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && existing != Path::new(".") => {
                // A relative path's last ancestor is "", the working directory.
                existing = match existing.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent,
                    _ => Path::new("."),
                };
            }
            Err(e) => return Err(format!("{}: {e}", existing.display())),
        }
    }
    access(existing, Access::WRITE_OK | Access::EXEC_OK)
        .map_err(|e| format!("{} is not writable: {e}", existing.display()))
}

/// Says where the SASL users come from, and how many there are (never their passwords).
fn log_sasl_users(config: &Config, users: Option<&auth::jaas::Users>) {
    let auth = &config.auth;
    let Some(file) = &auth.jaas_file else {
        return;
    };
    match users {
        Some(users) => tracing::info!(
            "SASL DIGEST-MD5: {} users from section {:?} of {}",
            users.0.len(),
            auth.jaas_section,
            file.display()
        ),
        // As ZooKeeper, which then runs without SASL.
        None => tracing::warn!(
            "the JAAS file {} has no section {:?}: no SASL authentication",
            file.display(),
            auth.jaas_section
        ),
    }
}

/// A started server. Dropping it does not stop it; call [`Server::shutdown`]. Several may run
/// in one process (see [`crate::embed`]).
pub struct Server {
    ctx: Arc<Context>,
    tasks: Vec<JoinHandle<()>>,
}

impl Server {
    /// Opens the data, replays it, starts listening for clients (and, in a cluster, for the
    /// other servers), and returns.
    pub async fn start(config: Config) -> Result<Server, StartError> {
        let Preflight {
            tls,
            transport,
            admin_tls,
            metrics_tls,
            sasl_users,
        } = preflight(&config)?;
        let transport = Arc::new(transport);
        log_sasl_users(&config, sasl_users.as_ref());
        let node_id = config.cluster.my_id.unwrap_or(1);
        let listen = &config.client_listen;
        let listener = TcpListener::bind((listen.host.as_str(), listen.port))
            .await
            .map_err(|source| StartError::Listen {
                addr: listen.to_string(),
                source,
            })?;
        let client_addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: listen.to_string(),
            source,
        })?;
        let secure_listener = match &config.tls.secure_client_listen {
            Some(listen) => Some(
                TcpListener::bind((listen.host.as_str(), listen.port))
                    .await
                    .map_err(|source| StartError::ListenSecure {
                        addr: listen.to_string(),
                        source,
                    })?,
            ),
            None => None,
        };
        let secure_client_addr = match &secure_listener {
            Some(l) => l.local_addr().ok(),
            // A TLS-only server's client port is its secure port.
            None => config.tls.client_listen_tls_only.then_some(client_addr),
        };
        let tls = tls.map(Arc::new);
        let admin_listener =
            admin::http::bind(&config.admin)
                .await
                .map_err(|source| StartError::ListenAdmin {
                    addr: config.admin.address().0.to_string(),
                    source,
                })?;
        let admin_addr = admin_listener.as_ref().and_then(|l| l.local_addr().ok());
        let metrics_listener = admin::metrics::bind(&config.metrics)
            .await
            .map_err(|source| StartError::ListenMetrics {
                addr: config
                    .metrics
                    .address()
                    .map(|(a, _)| a.to_string())
                    .unwrap_or_default(),
                source,
            })?;
        let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
        let metrics_https_listener =
            admin::metrics::bind_https(&config.metrics)
                .await
                .map_err(|source| StartError::ListenMetrics {
                    addr: config
                        .metrics
                        .https_listen
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    source,
                })?;
        let members = member_addrs(&config, &client_addr.to_string());
        let peer_listener = match config.cluster.me().filter(|_| members.len() > 1) {
            Some(me) => Some(
                TcpListener::bind((me.host.as_str(), me.peer_port))
                    .await
                    .map_err(|source| StartError::ListenPeers {
                        addr: format!("{}:{}", me.host, me.peer_port),
                        source,
                    })?,
            ),
            None => None,
        };
        let cluster_id = cluster_id(&config, &members);
        let state = State::new(StateConfig {
            ttl_enabled: config.extended_types_enabled,
        });
        let mut incarnation = [0u8; 8];
        getrandom::fill(&mut incarnation).expect("the OS gives random bytes");
        let mut replica = Replica::new(node_id, u64::from_le_bytes(incarnation), state);
        replica.limit(&config.limits);
        let replica = Arc::new(Mutex::new(replica));
        // Before the log is replayed, so that the membership it ends with is written if the
        // files lag (a crash between a commit and the write).
        let fresh = consensus::stored_cluster_id(&config.data_dir).is_none();
        if let Some(files) = DynamicConfigFiles::new(&config, fresh) {
            files.back_up_static_config();
            replica
                .lock()
                .expect("replica lock poisoned")
                .keep_zoo_cfg(files);
        }
        let started = Instant::now();
        let consensus = Consensus::start(
            consensus::Options {
                identity: Identity {
                    me: node_id,
                    cluster_id: ClusterId::new(cluster_id),
                    frame_bytes_max: config.cluster.peer_frame_bytes_max as usize,
                    transport: transport.clone(),
                },
                data_dir: config.data_dir.clone(),
                members: members.clone(),
                log_dir: config.resolved_log_dir().join("log"),
                snapshot_dir: config.data_dir.join("snapshots"),
                snapshot_interval_txns: config.snapshots.interval_txns,
                snapshot_log_bytes_max: config.snapshots.log_bytes_max,
                snapshot_on_exit: config.snapshots.on_exit,
                snapshots_retained_count: config.purge.snapshots_retained_count,
                tick_time_ms: config.tick_time_ms,
                flush_wait: LOG_FLUSH_WAIT,
                fsync_warning: Duration::from_millis(config.fsync_warning_threshold_ms),
                snapshot_bytes_max: config.cluster.snapshot_bytes_max,
                enforce_quota: config.enforce_quota,
            },
            replica.clone(),
        )
        .await?;
        {
            let status = consensus.status();
            let mut r = replica.lock().expect("replica lock poisoned");
            r.grant_full_timeouts(Instant::now());
            r.stats.recovered(
                started.elapsed().as_millis() as u64,
                status.applied_index.saturating_sub(status.snapshot_index),
            );
            tracing::info!(
                znodes = r.state().tree().len(),
                sessions = r.state().sessions().count(),
                zxid = format_args!("{:#x}", r.state().last_zxid()),
                ms = started.elapsed().as_millis() as u64,
                data_dir = %config.data_dir.display(),
                log_dir = %config.resolved_log_dir().display(),
                "state recovered"
            );
        }
        if !config.migration.addresses().is_empty() {
            check_free_to_follow(&replica.lock().expect("replica lock poisoned"), &config)?;
        }
        let stats = replica.lock().expect("replica lock poisoned").stats.clone();
        let admin_limiters = crate::admin::snapshots::Limiters::new(&config.admin);
        let ctx = Arc::new(Context {
            forwarder: Forwarder::new(config.cluster.forward_queue_max as usize),
            throttle: crate::throttle::Throttle::new(&config.limits.connection_throttle),
            config: Arc::new(config),
            consensus,
            replica,
            next_connection: AtomicU64::new(1),
            unserved_since: Mutex::new(Instant::now()),
            started,
            stats,
            leadership: Leadership::default(),
            client_addr,
            secure_client_addr,
            tls: tls.clone(),
            secure_peers: Mutex::new(HashSet::new()),
            plain_connections: PlainConnections::default(),
            admin_addr,
            metrics_addr,
            sasl_users,
            connections: Mutex::new(Connections::default()),
            reconfiguring: AtomicBool::new(false),
            stopping: tokio::sync::watch::Sender::new(false),
            admin_limiters,
        });
        let client_port = if ctx.config.tls.client_listen_tls_only {
            Port::Secure
        } else {
            Port::Plain
        };
        let mut tasks = vec![
            tokio::spawn(accept_loop(ctx.clone(), listener, client_port)),
            tokio::spawn(expire_sessions(ctx.clone())),
            tokio::spawn(clean_containers(ctx.clone())),
        ];
        if !ctx.config.migration.addresses().is_empty() {
            tasks.push(tokio::spawn(crate::observer::follow(ctx.clone())));
        }
        if let Some(secure_listener) = secure_listener {
            tasks.push(tokio::spawn(accept_loop(
                ctx.clone(),
                secure_listener,
                Port::Secure,
            )));
            tracing::info!(?secure_client_addr, "serving ZooKeeper clients over TLS");
        }
        if let Some(tls) = tls {
            tasks.push(tokio::spawn(tls.reload_on_change()));
        }
        if let Some(tls) = transport.tls() {
            tasks.push(tokio::spawn(tls.reload_on_change()));
        }
        if let Some(admin_listener) = admin_listener {
            tasks.push(tokio::spawn(admin::http::serve(
                ctx.clone(),
                admin_listener,
                admin_tls,
            )));
        }
        if let Some(metrics_listener) = metrics_listener {
            let scheme = match &metrics_tls {
                Some(tls) if ctx.config.metrics.unified() => {
                    admin::http::Scheme::Either(tls.clone())
                }
                _ => admin::http::Scheme::Http,
            };
            tasks.push(tokio::spawn(admin::metrics::serve(
                ctx.clone(),
                metrics_listener,
                scheme,
            )));
        }
        if let Some(tls) = &metrics_tls {
            let settings = ctx.config.metrics.tls.clone();
            tasks.push(tokio::spawn(tls.clone().follow_metrics(settings)));
        }
        if let (Some(listener), Some(tls)) = (metrics_https_listener, metrics_tls) {
            tasks.push(tokio::spawn(admin::metrics::serve(
                ctx.clone(),
                listener,
                admin::http::Scheme::Https(tls),
            )));
        }
        if let Some(peer_listener) = peer_listener {
            let peer_addr = peer_listener.local_addr().ok();
            tasks.push(tokio::spawn(cluster::listen(ctx.clone(), peer_listener)));
            tasks.push(tokio::spawn(follow_leadership(ctx.clone())));
            tasks.push(tokio::spawn(report_sessions(ctx.clone())));
            tracing::info!(
                ?peer_addr,
                members = ctx.config.cluster.members.len(),
                cluster_id = format_args!("{:#x}", ctx.consensus.identity().cluster_id.get()),
                "listening for the other servers; serving clients once a leader is known"
            );
        }
        tracing::info!(
            %client_addr,
            node_id,
            tls_only = ctx.config.tls.client_listen_tls_only,
            "serving ZooKeeper clients"
        );
        Ok(Server { ctx, tasks })
    }

    /// Where clients connect (the port is the real one when the config asked for port 0).
    pub fn client_addr(&self) -> SocketAddr {
        self.ctx.client_addr
    }

    /// Where TLS clients connect, if there is a secure client port (the real port when the
    /// config asked for port 0).
    pub fn secure_client_addr(&self) -> Option<SocketAddr> {
        self.ctx.secure_client_addr
    }

    /// Where the admin HTTP server listens, if it runs.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.ctx.admin_addr
    }

    /// Where `/metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.ctx.metrics_addr
    }

    /// Whether it serves clients now: a cluster member once it knows a leader and the
    /// membership is written (docs/cluster.md).
    pub fn is_serving(&self) -> bool {
        self.ctx.serving()
    }

    /// Stops listening, closes every client connection and stops consensus. Everything
    /// acknowledged is already on disk. A leader first hands leadership to another voter, so
    /// clients wait for no election. Dropping a `Server` does not stop it.
    pub async fn shutdown(self) {
        if !self.ctx.consensus.standalone() {
            self.ctx.consensus.hand_over_leadership().await;
        }
        for task in &self.tasks {
            task.abort();
        }
        self.ctx.stopping.send_replace(true);
        // In a process that goes on (an embedded server), its clients must move to another
        // server rather than be served by one whose consensus has stopped.
        self.ctx.replica().close_all("this server is stopping");
        self.ctx.forwarder.stop();
        self.ctx.consensus.snapshot_before_exit().await;
        self.ctx.consensus.shutdown().await;
        tracing::info!("stopped");
    }

    /// Stops as [`Server::shutdown`] does, then waits, at most `bound`, until the last of its
    /// tasks (aborted or told to stop, they end at their next turn) has let go of its state,
    /// and openraft's tasks of the log, whose directory lock goes with it: an embedded server
    /// restarted at once on the same directory could otherwise find it still locked. Waiting
    /// for the state alone was not enough: a replication task's handle on the log outlived it
    /// (a three-member embedded cluster's restart failed so, about once in ten test runs).
    pub(crate) async fn shutdown_and_release(self, bound: Duration) {
        let ctx = Arc::downgrade(&self.ctx);
        let log = self.ctx.consensus.log_released();
        self.shutdown().await;
        let deadline = Instant::now() + bound;
        while (ctx.strong_count() > 0 || !log.is_released()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if !log.is_released() {
            tracing::warn!(
                "the log is still open {} s after the stop: a restart on this directory will \
                 find it locked",
                bound.as_secs()
            );
        }
    }
}

/// The next connection on `listener`. A failed accept (out of file descriptors and the like)
/// is logged and retried after a pause rather than spun on.
pub async fn accept(listener: &TcpListener, what: &str) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accepting {what} failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Which client port a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    /// clientPort: plain, or either with port unification.
    Plain,
    /// secureClientPort: TLS only.
    Secure,
}

async fn accept_loop(ctx: Arc<Context>, listener: TcpListener, port: Port) {
    loop {
        let (stream, peer) = accept(&listener, "a client").await;
        ctx.stats
            .connections_requested
            .fetch_add(1, Ordering::Relaxed);
        if let Err(limit) = ctx.admit(peer.ip()) {
            ctx.stats
                .connections_refused
                .fetch_add(1, Ordering::Relaxed);
            static REFUSED_LOG: crate::throttle::Occasionally =
                crate::throttle::Occasionally::new();
            if REFUSED_LOG.allows(Instant::now()) {
                tracing::warn!(
                    %peer,
                    "refusing a connection: {limit} reached (logged at most once a second)"
                );
            }
            continue;
        }
        let ctx = ctx.clone();
        tokio::spawn(async move {
            // Boxed: passed inline, the connection's state was laid out twice in its task
            // (the argument and the selected future), 5.3 KB where it needs 2.6.
            ctx.until_stopped(Box::pin(serve_client(&ctx, stream, peer, port)))
                .await;
            ctx.release(peer.ip());
        });
    }
}

/// Takes a client connection through TLS where its port asks for it, then serves it.
async fn serve_client(ctx: &Arc<Context>, stream: TcpStream, peer: SocketAddr, port: Port) {
    let _ = stream.set_nodelay(true);
    // The TLS handshakes boxed, as connection.rs boxes the session's handshake: inline, their
    // state made every connection's task larger for as long as it lives.
    let stream = match (&ctx.tls, port) {
        (Some(tls), Port::Secure) => Box::pin(tls.secure(stream, peer)).await,
        (Some(tls), Port::Plain) if ctx.config.tls.port_unification => {
            Box::pin(tls.unified(stream, peer)).await
        }
        _ => Some(tls::ClientStream::plain(stream)),
    };
    let Some(stream) = stream else {
        return;
    };
    match &stream.tls {
        Some(_) if port == Port::Secure => {
            ctx.secure_peers
                .lock()
                .expect("secure_peers lock poisoned")
                .insert(peer);
        }
        Some(_) => {}
        None if ctx.tls.is_some() => {
            let plain = &ctx.plain_connections;
            let counter = if peer.ip().is_loopback() {
                &plain.local
            } else {
                &plain.remote
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        None => {}
    }
    connection::serve(ctx.clone(), stream, peer).await;
    if port == Port::Secure {
        ctx.secure_peers
            .lock()
            .expect("secure_peers lock poisoned")
            .remove(&peer);
    }
}

/// A server may start following ZooKeeper only with nothing of its own: its state is what a
/// new server starts with (a mirror, or a promoted one, has gone on already).
fn check_free_to_follow(replica: &Replica, config: &Config) -> Result<(), StartError> {
    let state = replica.state();
    if state.mirror_phase() != warden_state::mirror::MirrorPhase::Off {
        return Ok(());
    }
    let new = State::new(StateConfig {
        ttl_enabled: config.extended_types_enabled,
    });
    let sessions = state.sessions().count();
    if state.tree().len() != new.tree().len() || sessions > 0 {
        return Err(StartError::NotEmptyToFollow {
            znodes: state.tree().len(),
            sessions,
        });
    }
    Ok(())
}

/// Proposes a transaction of the leader's own (no client waits for it).
async fn propose_own(ctx: &Context, session_id: i64, kind: TxnKind) {
    let proposal = Proposal::own(session_id, kind);
    ctx.consensus
        .propose(
            proposal,
            None,
            |e| tracing::info!(error = %e, "a cleanup was not proposed; the next leader redoes it"),
        )
        .await;
}

/// The members as the configuration names them, with the addresses consensus records. A
/// standalone server is a cluster of one.
fn member_addrs(config: &Config, client_addr: &str) -> Vec<MemberAddr> {
    if config.cluster.members.len() <= 1 {
        return vec![MemberAddr {
            id: config.cluster.my_id.unwrap_or(1),
            peer_addr: String::new(),
            client_addr: client_addr.to_owned(),
            voter: true,
        }];
    }
    config
        .cluster
        .members
        .iter()
        .map(cluster::membership::member_addr)
        .collect()
}

/// Why a data directory could not be made from a state.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error("{dir} is not empty: a data directory is only made from a state when it is new")]
    NotEmpty { dir: String },
    #[error("cannot write {dir}: {source}")]
    Io { dir: String, source: std::io::Error },
}

/// Makes a new data directory (and log directory) for `config` that starts from `state`: a
/// server started on it, or every founding member of the cluster `config` names, serves
/// `state` and goes on from its zxid. The directories must be missing or empty (but for a
/// myid file).
pub fn seed_data_dir(config: &Config, state: &State) -> Result<PathBuf, SeedError> {
    let log_dir = config.resolved_log_dir();
    for dir in [config.data_dir.as_path(), log_dir] {
        let io_err = |source| SeedError::Io {
            dir: dir.display().to_string(),
            source,
        };
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                // A cluster member's zoo.cfg wants its myid there first.
                let mut entries =
                    entries.filter(|e| e.as_ref().is_ok_and(|e| e.file_name() != "myid"));
                if entries.next().is_some() {
                    return Err(SeedError::NotEmpty {
                        dir: dir.display().to_string(),
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(io_err)?;
            }
            Err(e) => return Err(io_err(e)),
        }
    }
    let members = member_addrs(config, &config.client_listen.to_string());
    let snapshot_dir = config.data_dir.join("snapshots");
    consensus::founding::write(&snapshot_dir, &members, state).map_err(|source| SeedError::Io {
        dir: snapshot_dir.display().to_string(),
        source,
    })
}

/// The cluster's identity, checked at every peer handshake so that servers of two clusters
/// never talk: the one kept in the data directory, or for a new data directory a hash of the
/// first configuration's voters (the same on every member started from the same zoo.cfg),
/// kept once the member founds the cluster or adopts an existing cluster's (consensus::rejoin).
fn cluster_id(config: &Config, members: &[MemberAddr]) -> u64 {
    if let Some(id) = consensus::stored_cluster_id(&config.data_dir) {
        return id;
    }
    let mut voters: Vec<String> = members
        .iter()
        .filter(|m| m.voter)
        .map(|m| format!("{}={}", m.id, m.peer_addr))
        .collect();
    voters.sort();
    xxhash_rust::xxh3::xxh3_64(voters.join(",").as_bytes())
}

/// Follows leadership as it changes: a server that stops serving, and does not serve again
/// within the leaderless grace, closes its clients' connections (so they move to a server
/// that can serve them); when the leader changes, writes in flight are in doubt until the log
/// settles them (crate::writes); a new leader gives every session a full timeout and makes
/// the membership follow `/zookeeper/config`.
async fn follow_leadership(ctx: Arc<Context>) {
    let me = ctx.consensus.node_id();
    let mut seen: (u64, Option<u64>) = (0, None);
    // A member starts without a leader, as a ZooKeeper server starts LOOKING.
    let mut leaderless_since = Some(Instant::now());
    ctx.leadership.elections.fetch_add(1, Ordering::Relaxed);
    let mut serving = false;
    // Whether the clients were closed since serving stopped.
    let mut closed = true;
    let mut check = tokio::time::interval(Duration::from_millis(100));
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let now = tokio::select! {
            now = ctx.consensus.changed(seen) => now,
            _ = check.tick() => seen,
        };
        if now.1 != seen.1 {
            ctx.forwarder.close();
            ctx.replica()
                .writes_in_doubt("the leader changed", Instant::now());
            note_leadership(&ctx.leadership, now.1, me, &mut leaderless_since);
            match now.1 {
                Some(leader) if leader == me => {
                    tracing::info!(term = now.0, "this server leads");
                    ctx.replica().grant_full_timeouts(Instant::now());
                    tokio::spawn(cluster::membership::reconcile(ctx.clone()));
                }
                Some(leader) => tracing::info!(term = now.0, leader, "following a new leader"),
                None => tracing::info!(term = now.0, "no leader"),
            }
        }
        seen = now;
        ctx.replica()
            .close_doubtful(Instant::now(), 2 * ctx.consensus.election_timeout());
        let serving_now = ctx.serving();
        if serving_now != serving {
            serving = serving_now;
            if serving {
                closed = false;
                tracing::info!(leader = ?now.1, "serving clients");
                ctx.replica().close_read_only();
                if now.1 == Some(me) {
                    // A leader that was cut off from its quorum and kept its term: the
                    // sessions' clients could not reach it either.
                    ctx.replica().grant_full_timeouts(Instant::now());
                }
            } else {
                tracing::warn!(
                    grace = ?ctx.leaderless_grace(),
                    "not serving clients: no quorum (client connections are kept for the \
                     grace, waiting for a leader, then closed until one is heard from)"
                );
                *ctx.unserved_since
                    .lock()
                    .expect("unserved_since lock poisoned") = Instant::now();
            }
        }
        if !serving && !closed {
            let unserved_for = ctx
                .unserved_since
                .lock()
                .expect("unserved_since lock poisoned")
                .elapsed();
            if unserved_for >= ctx.leaderless_grace() {
                closed = true;
                ctx.replica().close_all("this server lost its quorum");
            }
        }
    }
}

/// How often a connection waiting for its server to serve looks again.
const SERVING_POLL: Duration = Duration::from_millis(20);

/// Times elections (from losing a leader to knowing one) and this server's leadership.
fn note_leadership(
    leadership: &Leadership,
    leader: Option<u64>,
    me: u64,
    leaderless_since: &mut Option<Instant>,
) {
    let mut leading_since = leadership
        .leading_since
        .lock()
        .expect("leading_since lock poisoned");
    match leader {
        None => {
            leadership.elections.fetch_add(1, Ordering::Relaxed);
            leaderless_since.get_or_insert_with(Instant::now);
            *leading_since = None;
        }
        Some(leader) => {
            if let Some(since) = leaderless_since.take() {
                leadership
                    .election_time_ms
                    .record(since.elapsed().as_millis() as u64);
            }
            *leading_since = (leader == me).then(Instant::now);
        }
    }
}

/// A follower reports the sessions its clients touched to the leader, twice a tick, as
/// ZooKeeper's learners report theirs in every ping; the leader decides expiry from them.
async fn report_sessions(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(Duration::from_millis(
        (ctx.config.tick_time_ms / 2).max(1).into(),
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let touched = ctx.replica().take_touched();
        match ctx.consensus.leader() {
            Some(leader) if leader != ctx.consensus.node_id() && !touched.is_empty() => {
                ctx.forwarder.touch(&ctx, leader, touched)
            }
            _ => {}
        }
    }
}

/// The leader closes sessions whose clients fell silent for their whole timeout, as
/// ZooKeeper's SessionTracker does, checking once a tick.
async fn expire_sessions(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(Duration::from_millis(ctx.config.tick_time_ms.into()));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // A leader without its quorum expires nothing: its sessions' clients may be talking to
        // the other servers, and its closes could not commit anyway. A mirror's sessions are
        // the followed ensemble's to expire.
        if !ctx.consensus.is_leader() || !ctx.serving() || ctx.replica().state().mirroring() {
            continue;
        }
        let expired = ctx.replica().take_expired(Instant::now());
        ctx.stats
            .sessions_expired
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        for session_id in expired {
            tracing::info!(
                session = format_args!("{session_id:#x}"),
                "session expired: its client was silent for its whole timeout"
            );
            propose_own(&ctx, session_id, TxnKind::CloseSession).await;
        }
    }
}

/// The leader deletes empty containers and expired TTL nodes, as ZooKeeper's
/// ContainerManager does, at most `deletes_per_minute_max` a minute.
async fn clean_containers(ctx: Arc<Context>) {
    let c = &ctx.config.containers;
    let period = Duration::from_millis(c.check_interval_ms.into());
    // The first check one period after start, as ZooKeeper's ContainerManager schedules it: a
    // server started on imported data must not change it at once.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut window_start = Instant::now();
    let mut deleted_in_window = 0u32;
    loop {
        tick.tick().await;
        // A mirror's containers and TTL nodes are the followed ensemble's to delete.
        if !ctx.consensus.is_leader() || ctx.replica().state().mirroring() {
            continue;
        }
        let candidates = ctx
            .replica()
            .state()
            .cleanup_candidates(now_ms(), c.never_used_interval_ms as i64);
        for path in candidates {
            if window_start.elapsed() >= Duration::from_secs(60) {
                window_start = Instant::now();
                deleted_in_window = 0;
            }
            if deleted_in_window >= c.deletes_per_minute_max {
                break;
            }
            deleted_in_window += 1;
            propose_own(&ctx, 0, TxnKind::DeleteContainer { path }).await;
        }
    }
}
