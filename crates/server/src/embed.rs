//! Warden inside a host program: a server, or a cluster of several, started from a [`Config`]
//! in this process, as ClickHouse runs its Keeper and Java projects test against Curator's
//! `TestingServer`.
//!
//! ```no_run
//! # async fn example() -> Result<(), warden_server::embed::EmbedError> {
//! use warden_server::embed::{EmbeddedServer, loopback_config};
//!
//! // 127.0.0.1, a port the kernel picks, the data in a temporary directory.
//! let server = EmbeddedServer::start_temporary(loopback_config()).await?;
//! println!("connect to {}", server.connect_string());
//! server.stop().await; // the temporary directory goes with it
//! # Ok(())
//! # }
//! ```
//!
//! Any number of servers may run in one process, each on its own ports and data. What they
//! share with their host is the process: a storage failure (a failed fsync, a data directory
//! that cannot be written) ends the process, as it ends `warden server`, because a server must
//! not go on from a state it can no longer make durable. The library installs no logger, no
//! signal handler and no allocator; the host chooses its own (`tracing` events come out
//! through whatever subscriber it installs).

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::config::{Config, HostPort, InvalidConfig, Member, Role};
use crate::server::{Server, StartError};

/// How long [`EmbeddedCluster::start`] waits for its members to elect a leader and serve.
pub const CLUSTER_START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a stop waits for the stopped server's tasks to let go of its data directory.
const RELEASE_BOUND: Duration = Duration::from_secs(10);

/// Why an embedded server or cluster did not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The config is not one a server can run with.
    #[error("invalid configuration: {0}")]
    Invalid(#[from] InvalidConfig),
    /// The server did not start (its data, a port, its JAAS file).
    #[error(transparent)]
    Start(#[from] StartError),
    /// The temporary data directory could not be made.
    #[error("cannot make a temporary data directory: {0}")]
    TempDir(std::io::Error),
    /// A cluster's members did not all serve within [`CLUSTER_START_TIMEOUT`].
    #[error("the cluster did not serve within {0:?}")]
    NotServing(Duration),
}

/// The default [`Config`] made for a server in a host program or a test: clients on
/// 127.0.0.1 at a port the kernel picks, the admin HTTP server on 127.0.0.1 at a port the
/// kernel picks (never ZooKeeper's 8080, which another server may hold), no metrics endpoint.
/// Its `data_dir` is `./warden-data`, as for `warden server`: set it, or start with
/// [`EmbeddedServer::start_temporary`].
pub fn loopback_config() -> Config {
    let mut config = Config {
        client_listen: HostPort::new(Ipv4Addr::LOCALHOST.to_string(), 0),
        ..Config::default()
    };
    config.admin.listen = Some(HostPort::new(Ipv4Addr::LOCALHOST.to_string(), 0));
    config
}

/// A Warden server running in this process.
///
/// Stop it with [`EmbeddedServer::stop`]. Dropping it without stopping it stops it in the
/// background on the current tokio runtime (if there is one), and only then removes its
/// temporary directory, so that the running server never finds its data gone.
pub struct EmbeddedServer {
    /// `None` only once stopped.
    server: Option<Server>,
    data_dir: PathBuf,
    /// Removed after the server stops, if the server's data lives in one.
    temp_dir: Option<tempfile::TempDir>,
}

impl EmbeddedServer {
    /// Starts a server from `config` as it is, with its data where `config` says; the data is
    /// kept when the server stops. Returns once the server listens for clients (a cluster
    /// member serves them once a leader is known).
    pub async fn start(config: Config) -> Result<EmbeddedServer, EmbedError> {
        config.validate()?;
        let data_dir = config.data_dir.clone();
        Ok(EmbeddedServer {
            server: Some(Server::start(config).await?),
            data_dir,
            temp_dir: None,
        })
    }

    /// Starts a server from `config` with its data (and log) in a new temporary directory,
    /// removed when the server stops: what a test wants.
    pub async fn start_temporary(mut config: Config) -> Result<EmbeddedServer, EmbedError> {
        let temp_dir = temp_dir()?;
        config.data_dir = temp_dir.path().join("data");
        config.log_dir = None;
        let mut server = EmbeddedServer::start(config).await?;
        server.temp_dir = Some(temp_dir);
        Ok(server)
    }

    /// The running server, for what this type does not repeat (its admin and metrics
    /// addresses).
    pub fn server(&self) -> &Server {
        self.server
            .as_ref()
            .expect("a server is running until stopped")
    }

    /// Where clients connect: the real port when the config asked for port 0.
    pub fn client_addr(&self) -> SocketAddr {
        self.server().client_addr()
    }

    /// The connect string a ZooKeeper client takes: `127.0.0.1:port`.
    pub fn connect_string(&self) -> String {
        self.client_addr().to_string()
    }

    /// Where the admin HTTP server listens, if it runs.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.server().admin_addr()
    }

    /// Where the server keeps its data.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Whether the server serves clients now (a cluster member: once a leader is known).
    pub fn is_serving(&self) -> bool {
        self.server().is_serving()
    }

    /// Stops the server as SIGTERM stops `warden server` (a leader first hands leadership
    /// on; every client connection is closed), then removes its temporary directory, if any.
    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown_and_release(RELEASE_BOUND).await;
        }
        // Drop removes the temporary directory now that nothing writes to it.
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        let Some(server) = self.server.take() else {
            return;
        };
        let temp_dir = self.temp_dir.take();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                server.shutdown().await;
                drop(temp_dir);
            });
        }
        // Without a runtime its tasks are gone already; the directory goes with the values.
    }
}

/// A cluster of Warden servers in this process, each with its own ports and data directory
/// under one temporary directory, removed when the cluster stops or drops.
///
/// Members are numbered from 0 here; member `i` has server id `i + 1`. Client, peer and
/// election ports are picked with [`free_port`], since every member must know the others'
/// ports before any of them starts.
pub struct EmbeddedCluster {
    /// Each member's config, kept to start a stopped member again on the same data.
    configs: Vec<Config>,
    /// `None` for a stopped member.
    members: Vec<Option<EmbeddedServer>>,
    /// Every member's data is under it; `None` only once dropped.
    root: Option<tempfile::TempDir>,
}

impl EmbeddedCluster {
    /// Starts a cluster of `size` voting members from [`loopback_config`] and waits (up to
    /// [`CLUSTER_START_TIMEOUT`]) until every member serves.
    pub async fn start(size: usize) -> Result<EmbeddedCluster, EmbedError> {
        EmbeddedCluster::start_with(size, loopback_config()).await
    }

    /// Like [`EmbeddedCluster::start`], with every member's config made from `base`: its
    /// client address, data directory and cluster membership are set here, the rest (tick
    /// time, limits, ...) is taken as given.
    pub async fn start_with(size: usize, base: Config) -> Result<EmbeddedCluster, EmbedError> {
        assert!(size > 0, "a cluster has at least one member");
        let root = temp_dir()?;
        let host = base.client_listen.host.clone();
        let members: Vec<Member> = (1..=size as u64)
            .map(|id| Member {
                id,
                host: host.clone(),
                peer_port: free_port(),
                election_port: Some(free_port()),
                role: Role::Participant,
                client: Some(HostPort::new(host.clone(), free_port())),
            })
            .collect();
        let configs: Vec<Config> = members
            .iter()
            .map(|me| {
                let mut config = base.clone();
                config.client_listen = me.client.clone().expect("set above");
                config.data_dir = root.path().join(format!("server{}", me.id));
                config.log_dir = None;
                config.cluster.my_id = Some(me.id);
                config.cluster.members = members.clone();
                config
            })
            .collect();
        // Together: a member's start may wait for a quorum of the others.
        // Every start runs to its end: one cancelled halfway would leave its tasks running.
        let started =
            futures_util::future::join_all(configs.iter().cloned().map(EmbeddedServer::start))
                .await;
        let mut members = Vec::with_capacity(size);
        let mut failed = None;
        for result in started {
            match result {
                Ok(member) => members.push(Some(member)),
                Err(e) => failed = Some(e),
            }
        }
        let cluster = EmbeddedCluster {
            configs,
            members,
            root: Some(root),
        };
        if let Some(e) = failed {
            // The members that did start stop before their directory goes.
            cluster.stop().await;
            return Err(e);
        }
        cluster.wait_until_serving(CLUSTER_START_TIMEOUT).await?;
        Ok(cluster)
    }

    /// Waits until every running member serves clients.
    pub async fn wait_until_serving(&self, timeout: Duration) -> Result<(), EmbedError> {
        let deadline = Instant::now() + timeout;
        while !self.running().all(EmbeddedServer::is_serving) {
            if Instant::now() >= deadline {
                return Err(EmbedError::NotServing(timeout));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// How many members the cluster has, stopped ones included.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Member `i`, unless it is stopped.
    pub fn member(&self, i: usize) -> Option<&EmbeddedServer> {
        self.members[i].as_ref()
    }

    /// The connect string of every running member: `127.0.0.1:port,127.0.0.1:port,...`.
    pub fn connect_string(&self) -> String {
        self.running()
            .map(EmbeddedServer::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Stops member `i` (a leader hands leadership on first); the others go on serving if a
    /// majority of the members still runs.
    pub async fn stop_member(&mut self, i: usize) {
        if let Some(member) = self.members[i].take() {
            member.stop().await;
        }
    }

    /// Starts the stopped member `i` again on its data and ports.
    pub async fn restart_member(&mut self, i: usize) -> Result<(), EmbedError> {
        assert!(self.members[i].is_none(), "member {i} is running");
        self.members[i] = Some(EmbeddedServer::start(self.configs[i].clone()).await?);
        Ok(())
    }

    /// Stops every member, then removes the cluster's directory.
    pub async fn stop(mut self) {
        for i in 0..self.members.len() {
            self.stop_member(i).await;
        }
        drop(self.root.take());
    }

    fn running(&self) -> impl Iterator<Item = &EmbeddedServer> {
        self.members.iter().flatten()
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        // The directory every member's data is in must outlive the members: they stop in the
        // background first, as an EmbeddedServer dropped unstopped does.
        let members = std::mem::take(&mut self.members);
        let root = self.root.take();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for member in members.into_iter().flatten() {
                    member.stop().await;
                }
                drop(root);
            });
        }
    }
}

/// A new temporary directory named `warden-...` in the system's temporary directory.
fn temp_dir() -> Result<tempfile::TempDir, EmbedError> {
    tempfile::Builder::new()
        .prefix("warden-")
        .tempdir()
        .map_err(EmbedError::TempDir)
}

/// A loopback port nothing listens on right now, never handed out before in this process:
/// for the ports a server must be told before it starts (a cluster's peer ports).
///
/// Ports come from 20000-32767, below Linux's ephemeral range (32768-60999): a port the kernel
/// picked for `bind(0)` is released at once and may be picked again, or taken by an outgoing
/// connection's local end, before the server that was given it binds it. CI once saw one
/// server's client and quorum ports coincide that way. Each process starts at an offset of its
/// own so that processes running side by side rarely try the same ports.
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::Mutex;
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_768;
    static HANDED_OUT: Mutex<Option<(u32, HashSet<u16>)>> = Mutex::new(None);
    let mut state = HANDED_OUT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (next, taken) = state.get_or_insert_with(|| {
        let seed = std::process::id().wrapping_mul(2_654_435_761)
            ^ SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.subsec_nanos());
        (seed % SPAN, HashSet::new())
    });
    for _ in 0..SPAN {
        let port = (FIRST + *next % SPAN) as u16;
        *next = next.wrapping_add(1);
        if taken.contains(&port) {
            continue;
        }
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            taken.insert(port);
            return port;
        }
    }
    panic!("no free loopback port left in {FIRST}-{}", FIRST + SPAN - 1)
}
