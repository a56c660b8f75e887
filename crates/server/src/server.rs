//! The running server: consensus and the replica started from a [`Config`], the client
//! listener with its connection limits, and the leader's duties (expiring silent sessions,
//! deleting empty containers and expired TTL nodes).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use warden_state::{State, StateConfig, Txn, TxnKind};

use crate::config::Config;
use crate::connection;
use crate::consensus::{self, Consensus, Proposal};
use crate::replica::{Replica, now_ms};

/// How long the log's flush thread waits to gather writes into one fsync. raft-log's own
/// default (1 ms) is a floor under every write's latency; 100 µs keeps batching under load
/// (docs/consensus-research.md §4.3).
const LOG_FLUSH_WAIT: Duration = Duration::from_micros(100);

/// What every connection and duty of the server shares.
pub struct Context {
    pub config: Arc<Config>,
    pub consensus: Consensus,
    replica: Arc<Mutex<Replica>>,
    next_connection: AtomicU64,
    pub started: Instant,
    pub client_addr: SocketAddr,
    connections: Mutex<Connections>,
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
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Consensus(#[from] consensus::StartError),
    #[error("cannot listen for clients on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
}

/// A started server. Dropping it does not stop it; call [`Server::shutdown`].
pub struct Server {
    ctx: Arc<Context>,
    tasks: Vec<JoinHandle<()>>,
}

impl Server {
    /// Opens the data, replays it, starts listening for clients, and returns.
    pub async fn start(config: Config) -> Result<Server, StartError> {
        let others = config
            .cluster
            .members
            .iter()
            .filter(|m| Some(m.id) != config.cluster.my_id)
            .count();
        if others > 0 {
            return Err(StartError::Unsupported(format!(
                "the configuration names {others} other server(s); this build of Warden runs \
                 one-server ensembles only (multi-server clusters are the next piece of work)"
            )));
        }
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
        let state = State::new(StateConfig {
            ttl_enabled: config.extended_types_enabled,
        });
        let replica = Arc::new(Mutex::new(Replica::new(node_id, state)));
        let started = Instant::now();
        let consensus = Consensus::start(
            consensus::Options {
                node_id,
                client_addr: client_addr.to_string(),
                log_dir: config.resolved_log_dir().join("log"),
                snapshot_dir: config.data_dir.join("snapshots"),
                snapshot_interval_txns: config.snapshots.interval_txns,
                snapshots_retained_count: config.purge.snapshots_retained_count,
                tick_time_ms: config.tick_time_ms,
                flush_wait: LOG_FLUSH_WAIT,
            },
            replica.clone(),
        )
        .await?;
        {
            let mut r = replica.lock().expect("replica lock poisoned");
            r.grant_full_timeouts(Instant::now());
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
        let ctx = Arc::new(Context {
            config: Arc::new(config),
            consensus,
            replica,
            next_connection: AtomicU64::new(1),
            started,
            client_addr,
            connections: Mutex::new(Connections::default()),
        });
        let tasks = vec![
            tokio::spawn(accept_loop(ctx.clone(), listener)),
            tokio::spawn(expire_sessions(ctx.clone())),
            tokio::spawn(clean_containers(ctx.clone())),
        ];
        tracing::info!(
            %client_addr,
            node_id,
            "serving ZooKeeper clients"
        );
        Ok(Server { ctx, tasks })
    }

    /// Where clients connect (the port is the real one when the config asked for port 0).
    pub fn client_addr(&self) -> SocketAddr {
        self.ctx.client_addr
    }

    /// Stops listening and stops consensus. Everything acknowledged is already on disk.
    pub async fn shutdown(self) {
        for task in &self.tasks {
            task.abort();
        }
        self.ctx.consensus.shutdown().await;
        tracing::info!("stopped");
    }
}

async fn accept_loop(ctx: Arc<Context>, listener: TcpListener) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait rather than spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if let Err(limit) = ctx.admit(peer.ip()) {
            tracing::warn!(%peer, "refusing a connection: {limit} reached");
            continue;
        }
        let ctx = ctx.clone();
        tokio::spawn(async move {
            connection::serve(ctx.clone(), stream, peer).await;
            ctx.release(peer.ip());
        });
    }
}

/// Proposes a transaction of the server's own (no client waits for it).
async fn propose_own(ctx: &Context, session_id: i64, kind: TxnKind) {
    let proposal = Proposal {
        origin: None,
        txn: Txn {
            session_id,
            time_ms: now_ms(),
            auth: Vec::new(),
            kind,
        },
    };
    if let Err(e) = ctx.consensus.propose(proposal).await {
        tracing::warn!(error = %e, "could not propose a cleanup");
    }
}

/// The leader closes sessions whose clients fell silent for their whole timeout, as
/// ZooKeeper's SessionTracker does, checking once a tick.
async fn expire_sessions(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(Duration::from_millis(ctx.config.tick_time_ms.into()));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !ctx.consensus.is_leader() {
            continue;
        }
        let expired = ctx.replica().take_expired(Instant::now());
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
    let mut tick = tokio::time::interval(Duration::from_millis(c.check_interval_ms.into()));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut window_start = Instant::now();
    let mut deleted_in_window = 0u32;
    loop {
        tick.tick().await;
        if !ctx.consensus.is_leader() {
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
