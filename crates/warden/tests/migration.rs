//! Online migration (docs/migration.md): a `warden server` follows a real Apache ZooKeeper
//! 3.9.5 as its observer, then takes over.
//!
//! ZooKeeper runs the quorum protocol with one voter (`standaloneEnabled=false`) and names
//! Warden `server.2=...:observer`. Before Warden starts it holds a tree (every create mode,
//! setData, setACL, a multi) and a client's session with an ephemeral node; so Warden's first
//! sync carries them. While Warden follows, a client keeps writing to ZooKeeper; once Warden
//! has mirrored ZooKeeper's last zxid, both serve the same tree node by node (data, every Stat
//! field, ACL, children) through the `zookeeper-client` crate. The client's session moves to
//! Warden with its id and password: it reads its ephemeral, is refused writes (NotReadOnly),
//! is told of a change made on ZooKeeper, and stays alive on ZooKeeper after its old
//! connection is gone for longer than its timeout (Warden's PING replies touch it). Then
//! `POST /commands/promote`, and Warden takes writes with the zxids after ZooKeeper's.
//! Every process is killed by pid; about half a minute.

mod support;

use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::cluster::{Cluster, System};
use support::servers::{
    free_port, install_zookeeper, log_tail, spawn_logged, srvr, temp_dir, zookeeper_command,
};
use support::tree;
use zookeeper_client::{Acls, Client, CreateMode, EventType, SessionInfo};

/// Every request's bound.
const OP_TIMEOUT: Duration = Duration::from_secs(20);
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The moved session's timeout: the test outlives it once on Warden alone.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// A process killed (SIGKILL, by pid) and waited for when dropped.
struct Process(std::process::Child, &'static str, std::path::PathBuf);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if std::thread::panicking() {
            eprintln!("{} log:\n{}", self.1, log_tail(&self.2, 60));
        }
    }
}

impl Process {
    fn assert_alive(&mut self) {
        if let Ok(Some(status)) = self.0.try_wait() {
            panic!("{} exited {status}:\n{}", self.1, log_tail(&self.2, 60));
        }
    }
}

/// A four-letter word's answer ("" if none).
fn four_letter(port: u16, word: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(word.as_bytes());
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}

/// The last zxid `srvr` reports, if the server answers.
fn zxid(port: u16) -> Option<i64> {
    srvr(port)?
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x"))
        .and_then(|hex| i64::from_str_radix(hex.trim(), 16).ok())
}

/// Waits until `srvr` on `port` answers with `mode`.
fn wait_mode(process: &mut Process, port: u16, mode: &str) {
    let deadline = Instant::now() + START_TIMEOUT;
    while srvr(port).is_none_or(|a| !a.contains(mode)) {
        process.assert_alive();
        assert!(
            Instant::now() < deadline,
            "{} never said {mode:?}",
            process.1
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until Warden has mirrored ZooKeeper's last zxid.
fn wait_mirrored(warden: &mut Process, warden_port: u16, zk_port: u16) -> i64 {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        warden.assert_alive();
        let theirs = zxid(zk_port).expect("ZooKeeper answers srvr");
        if zxid(warden_port) == Some(theirs) {
            return theirs;
        }
        assert!(
            Instant::now() < deadline,
            "Warden did not reach ZooKeeper's zxid {theirs:#x} (it has {:?}):\n{}",
            zxid(warden_port).map(|z| format!("{z:#x}")),
            log_tail(&warden.2, 40)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn timed<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(OP_TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {OP_TIMEOUT:?}"))
}

async fn connect(port: u16, session: Option<SessionInfo>, readonly: bool) -> Client {
    let mut connector = Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .with_readonly(readonly)
        .with_detached();
    if let Some(session) = session {
        connector = connector.with_session(session);
    }
    let address = format!("127.0.0.1:{port}");
    timed("connect", connector.connect(&address))
        .await
        .unwrap_or_else(|e| panic!("connect to {address}: {e:?}"))
}

fn persistent() -> zookeeper_client::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// The tree ZooKeeper holds before Warden follows it.
async fn seed(zk: &Client) {
    zk.create("/app", b"app", &persistent()).await.unwrap();
    zk.create("/app/config", b"v0", &persistent())
        .await
        .unwrap();
    for _ in 0..3 {
        let seq = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
        zk.create("/app/seq-", b"s", &seq).await.unwrap();
    }
    let container = CreateMode::Container.with_acls(Acls::anyone_all());
    zk.create("/jobs", b"", &container).await.unwrap();
    zk.create("/jobs/1", b"job", &persistent()).await.unwrap();
    let ttl = persistent().with_ttl(Duration::from_secs(3600));
    zk.create("/ttl", b"t", &ttl).await.unwrap();
    zk.set_data("/app/config", b"v1", None).await.unwrap();
    let mut multi = zk.new_multi_writer();
    multi.add_create("/m1", b"1", &persistent()).unwrap();
    multi.add_set_data("/app/config", b"v2", None).unwrap();
    multi.commit().await.unwrap();
    zk.set_acl("/m1", &Acls::anyone_read(), None).await.unwrap();
}

/// Writes on ZooKeeper while Warden follows.
async fn write_while_following(zk: &Client, round: usize) {
    for i in 0..60 {
        let path = format!("/w{round}-{i}");
        zk.create(&path, format!("{i}").as_bytes(), &persistent())
            .await
            .unwrap();
        if i % 3 == 0 {
            zk.set_data(&path, b"changed", None).await.unwrap();
        }
        if i % 5 == 0 {
            zk.delete(&path, None).await.unwrap();
        }
    }
}

/// The ports of one ZooKeeper server: client, quorum, election.
#[derive(Clone, Copy)]
struct ZkPorts {
    client: u16,
    quorum: u16,
    election: u16,
}

impl ZkPorts {
    fn new() -> Self {
        ZkPorts {
            client: free_port(),
            quorum: free_port(),
            election: free_port(),
        }
    }
}

/// Starts ZooKeeper server `id` (1-based) of an ensemble of `voters`, with Warden as
/// `server.<voters + 1>=...:observer` at `warden` (whose ports it never uses: Warden connects
/// to the leader).
fn start_zookeeper(dir: &Path, id: usize, voters: &[ZkPorts], warden: ZkPorts) -> Process {
    let own = dir.join(format!("zk{id}"));
    let data = own.join("data");
    fs::create_dir_all(&data).unwrap();
    fs::write(data.join("myid"), format!("{id}\n")).unwrap();
    let mut servers = String::new();
    for (i, p) in voters.iter().enumerate() {
        servers += &format!(
            "server.{}=127.0.0.1:{}:{}:participant\n",
            i + 1,
            p.quorum,
            p.election
        );
    }
    servers += &format!(
        "server.{}=127.0.0.1:{}:{}:observer\n",
        voters.len() + 1,
        warden.quorum,
        warden.election
    );
    let cfg = own.join("zoo.cfg");
    fs::write(
        &cfg,
        format!(
            "tickTime=500\ninitLimit=10\nsyncLimit=5\nstandaloneEnabled=false\n\
             4lw.commands.whitelist=*\ndataDir={}\nclientPort={}\n\
             clientPortAddress=127.0.0.1\n{servers}",
            data.display(),
            voters[id - 1].client,
        ),
    )
    .unwrap();
    let log = own.join("zookeeper.log");
    Process(
        spawn_logged(
            zookeeper_command(&cfg, "256m", "-Dzookeeper.extendedTypesEnabled=true"),
            &log,
        ),
        "ZooKeeper",
        log,
    )
}

/// Starts `warden server` following the ZooKeeper servers at `quorum_ports`, as observer
/// `observer_id`.
fn start_warden(
    dir: &Path,
    client: u16,
    admin: u16,
    quorum_ports: &[u16],
    observer_id: usize,
) -> Process {
    let path = dir.join("warden.toml");
    let follow: Vec<String> = quorum_ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    fs::write(
        &path,
        format!(
            "client_listen = \"127.0.0.1:{client}\"\ndata_dir = \"{}\"\n\
             four_letter_words = [\"*\"]\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n\
             [migration]\nfollow = \"{}\"\nobserver_id = {observer_id}\n\
             packet_wait_ms = 5000\n",
            dir.join("warden-data").display(),
            follow.join(",")
        ),
    )
    .unwrap();
    let log = dir.join("warden.log");
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command.arg("server").arg("--config").arg(&path);
    Process(spawn_logged(command, &log), "Warden", log)
}

fn promote(admin: u16, credentials: Option<&str>) -> support::http::Reply {
    let addr: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    let header = credentials.map(|c| format!("Authorization: digest {c}"));
    let headers: Vec<&str> = header.iter().map(String::as_str).collect();
    support::http::request(addr, "POST", "/commands/promote", &headers).expect("admin answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_running_zookeeper_then_takes_over() {
    install_zookeeper();
    let dir = temp_dir("migration");
    let zk_ports = ZkPorts::new();
    let zk_port = zk_ports.client;
    let (warden_port, admin_port) = (free_port(), free_port());
    let mut zookeeper = start_zookeeper(&dir, 1, &[zk_ports], ZkPorts::new());
    wait_mode(&mut zookeeper, zk_port, "Mode: leader");
    let zk = connect(zk_port, None, false).await;
    timed("seed", seed(&zk)).await;
    let owner = connect(zk_port, None, false).await;
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    timed("ephemeral", owner.create("/app/owner", b"mine", &ephemeral))
        .await
        .unwrap();

    let mut warden = start_warden(&dir, warden_port, admin_port, &[zk_ports.quorum], 2);
    let synced = wait_mirrored(&mut warden, warden_port, zk_port);
    assert!(synced > 0);

    // While it mirrors, Warden is a read-only server: `isro` says so, and a new session is a
    // read-only one, refused writes.
    assert_eq!(four_letter(warden_port, "isro"), "ro");
    let reader = connect(warden_port, None, true).await;
    let (data, _) = timed("read", reader.get_data("/app/config")).await.unwrap();
    assert_eq!(data, b"v2");
    let refused = timed("write", reader.create("/nope", b"", &persistent())).await;
    assert_eq!(refused.unwrap_err(), zookeeper_client::Error::NotReadOnly);

    // The owner's session moves to Warden: same id and password, same ephemeral.
    let moved = connect(warden_port, Some(owner.session().clone()), false).await;
    assert_eq!(moved.session_id(), owner.session_id(), "the same session");
    drop(owner); // detached: its connection to ZooKeeper goes, its session stays
    let (_, stat) = timed("ephemeral", moved.get_data("/app/owner"))
        .await
        .unwrap();
    assert_eq!(stat.ephemeral_owner, moved.session_id().0);
    let refused = timed("write", moved.set_data("/app/owner", b"x", None)).await;
    assert_eq!(refused.unwrap_err(), zookeeper_client::Error::NotReadOnly);
    let (_, _, watch) = timed("watch", moved.get_and_watch_data("/app/config"))
        .await
        .unwrap();

    // ZooKeeper goes on taking writes; Warden mirrors them and tells the moved client.
    timed("writes", write_while_following(&zk, 1)).await;
    timed("config", zk.set_data("/app/config", b"v3", None))
        .await
        .unwrap();
    let event = timed("watch event", watch.changed()).await;
    assert_eq!(event.event_type, EventType::NodeDataChanged);
    timed("writes", write_while_following(&zk, 2)).await;
    let last = wait_mirrored(&mut warden, warden_port, zk_port);
    let theirs = timed(
        "dump ZooKeeper",
        tree::dump(OP_TIMEOUT, &["/zookeeper/config"], &zk),
    )
    .await;
    let ours = timed(
        "dump Warden",
        tree::dump(OP_TIMEOUT, &["/zookeeper/config"], &reader),
    )
    .await;
    assert!(theirs.len() > 100, "{} nodes", theirs.len());
    for (t, o) in theirs.iter().zip(&ours) {
        assert_eq!(t, o, "ZooKeeper's node, then Warden's");
    }
    assert_eq!(theirs.len(), ours.len());

    // Longer than the session's timeout with its client on Warden only: ZooKeeper keeps it
    // (Warden reports it alive in its PING replies) and the ephemeral stays.
    tokio::time::sleep(SESSION_TIMEOUT + Duration::from_secs(2)).await;
    let still = timed("ephemeral on ZooKeeper", zk.check_stat("/app/owner")).await;
    assert!(
        still.unwrap().is_some(),
        "ZooKeeper expired the moved session"
    );
    timed("moved client", moved.get_data("/app/owner"))
        .await
        .unwrap();

    // A read-only client looks for a writable server in the background, with sessions of its
    // own: gone before the switch, so that the zxids after it are counted exactly.
    drop(reader);

    // The switch: ZooKeeper's writers have stopped; promote.
    assert_eq!(promote(admin_port, None).status, 401);
    let reply = promote(admin_port, Some("admin:secret"));
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains(&format!("{last:#x}")), "{}", reply.body);
    assert_eq!(promote(admin_port, Some("admin:secret")).status, 409);
    assert_eq!(four_letter(warden_port, "isro"), "rw");
    drop(zookeeper);

    let stat = timed("write", moved.set_data("/app/owner", b"on Warden", None))
        .await
        .expect("the moved session writes once Warden is promoted");
    assert_eq!(
        stat.mzxid,
        last + 1,
        "Warden's first zxid follows ZooKeeper's last"
    );
    let fresh = connect(warden_port, None, false).await;
    let (stat, _) = timed("create", fresh.create("/after", b"x", &persistent()))
        .await
        .unwrap();
    assert_eq!(
        stat.czxid,
        last + 3,
        "after the setData and the new session"
    );
    warden.assert_alive();
    let _ = fs::remove_dir_all(&dir);
}

/// The index of the server among `servers` that says it leads, once one does.
fn wait_leader(servers: &mut [Option<Process>], ports: &[ZkPorts]) -> usize {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        for (i, server) in servers.iter_mut().enumerate() {
            let Some(server) = server else { continue };
            server.assert_alive();
            if srvr(ports[i].client).is_some_and(|a| a.contains("Mode: leader")) {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no ZooKeeper leader");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Creates `path` once the ensemble takes writes again (after an election).
async fn write_once_writable(zk: &Client, path: &str) {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match timed("create", zk.create(path, b"", &persistent())).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => return,
            Err(e) => assert!(Instant::now() < deadline, "no write taken: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Three voters; their leader is killed while Warden follows. Warden finds the new leader
/// among the quorum addresses it was given, syncs with it from the last zxid it mirrored
/// (a DIFF across the new epoch), and goes on mirroring; the trees are equal node by node,
/// and after promotion Warden's zxids follow the new epoch's last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_an_ensemble_across_a_change_of_leader() {
    install_zookeeper();
    let dir = temp_dir("migration-ensemble");
    let ports: Vec<ZkPorts> = (0..3).map(|_| ZkPorts::new()).collect();
    let warden_ports = ZkPorts::new();
    let mut servers: Vec<Option<Process>> = (1..=3)
        .map(|id| Some(start_zookeeper(&dir, id, &ports, warden_ports)))
        .collect();
    let leader = wait_leader(&mut servers, &ports);
    let hosts: Vec<String> = ports
        .iter()
        .map(|p| format!("127.0.0.1:{}", p.client))
        .collect();
    let zk = timed(
        "connect",
        Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(&hosts.join(",")),
    )
    .await
    .unwrap();
    timed("seed", seed(&zk)).await;

    let (warden_port, admin_port) = (free_port(), free_port());
    let quorum: Vec<u16> = ports.iter().map(|p| p.quorum).collect();
    let mut warden = start_warden(&dir, warden_port, admin_port, &quorum, 4);
    wait_mirrored(&mut warden, warden_port, ports[leader].client);
    timed("writes", write_while_following(&zk, 1)).await;
    let before = wait_mirrored(&mut warden, warden_port, ports[leader].client);

    servers[leader] = None; // SIGKILL
    let new_leader = wait_leader(&mut servers, &ports);
    write_once_writable(&zk, "/after-election").await;
    timed("writes", write_while_following(&zk, 2)).await;
    let last = wait_mirrored(&mut warden, warden_port, ports[new_leader].client);
    assert!(
        last >> 32 > before >> 32,
        "a new epoch: {before:#x} then {last:#x}"
    );
    let reader = connect(warden_port, None, true).await;
    let theirs = timed(
        "dump ZooKeeper",
        tree::dump(OP_TIMEOUT, &["/zookeeper/config"], &zk),
    )
    .await;
    let ours = timed(
        "dump Warden",
        tree::dump(OP_TIMEOUT, &["/zookeeper/config"], &reader),
    )
    .await;
    for (t, o) in theirs.iter().zip(&ours) {
        assert_eq!(t, o, "ZooKeeper's node, then Warden's");
    }
    assert_eq!(theirs.len(), ours.len());
    drop(reader);
    let log = fs::read_to_string(&warden.2).unwrap();
    let synced: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("in sync with its leader"))
        .collect();
    assert_eq!(synced.len(), 2, "one sync per ZooKeeper leader:\n{log}");
    assert!(
        synced[1].contains("sync=\"DIFF\""),
        "the new leader sends what Warden misses, not a snapshot: {}",
        synced[1]
    );

    let reply = promote(admin_port, Some("admin:secret"));
    assert_eq!(reply.status, 200, "{}", reply.body);
    servers.clear();
    let fresh = connect(warden_port, None, false).await;
    let (stat, _) = timed("create", fresh.create("/on-warden", b"", &persistent()))
        .await
        .unwrap();
    assert_eq!(stat.czxid, last + 2, "after the new session's zxid");
    warden.assert_alive();
    let _ = fs::remove_dir_all(&dir);
}

/// Waits until every member in `members` has mirrored ZooKeeper's last zxid.
fn wait_members_mirrored(cluster: &mut Cluster, members: &[usize], zk_port: u16) -> i64 {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        cluster.check_alive();
        let theirs = zxid(zk_port).expect("ZooKeeper answers srvr");
        if members
            .iter()
            .all(|&i| cluster.members[i].zxid() == Some(theirs))
        {
            return theirs;
        }
        assert!(
            Instant::now() < deadline,
            "Warden's members did not all reach ZooKeeper's zxid {theirs:#x}:\n{}",
            cluster.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every member in `members` serves ZooKeeper's tree, node by node.
async fn assert_members_mirror(zk: &Client, cluster: &Cluster, members: &[usize]) {
    let theirs = timed(
        "dump ZooKeeper",
        tree::dump(OP_TIMEOUT, &["/zookeeper/config"], zk),
    )
    .await;
    for &i in members {
        let reader = connect(cluster.members[i].client_port, None, true).await;
        let ours = timed(
            "dump Warden",
            tree::dump(OP_TIMEOUT, &["/zookeeper/config"], &reader),
        )
        .await;
        for (t, o) in theirs.iter().zip(&ours) {
            assert_eq!(t, o, "ZooKeeper's node, then Warden member {i}'s");
        }
        assert_eq!(theirs.len(), ours.len(), "member {i}");
    }
}

/// A three-member Warden cluster mirrors a ZooKeeper: its leader follows, every member serves
/// the mirror. The Warden leader is killed while it follows; the next one applies what its
/// log holds, takes over the following from there (a DIFF), and every survivor goes on
/// mirroring. Then promote on the new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warden_cluster_mirrors_and_its_next_leader_follows_on() {
    install_zookeeper();
    let dir = temp_dir("migration-cluster");
    let zk_ports = ZkPorts::new();
    let mut zookeeper = start_zookeeper(&dir, 1, &[zk_ports], ZkPorts::new());
    wait_mode(&mut zookeeper, zk_ports.client, "Mode: leader");
    let zk = connect(zk_ports.client, None, false).await;
    timed("seed", seed(&zk)).await;

    // Warden's members read the ensemble to follow from their zoo.cfg.
    let follow = format!(
        "migration.follow=127.0.0.1:{}\nmigration.observerId=2\n",
        zk_ports.quorum
    );
    let mut cluster = tokio::task::block_in_place(|| Cluster::start(System::Warden, 3, 0, &follow));
    timed("writes", write_while_following(&zk, 1)).await;
    tokio::task::block_in_place(|| {
        wait_members_mirrored(&mut cluster, &[0, 1, 2], zk_ports.client)
    });
    assert_members_mirror(&zk, &cluster, &[0, 1, 2]).await;

    let leader = tokio::task::block_in_place(|| cluster.wait_for_leader(START_TIMEOUT));
    cluster.kill9(leader);
    let next = tokio::task::block_in_place(|| cluster.wait_for_leader(START_TIMEOUT));
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    timed("writes", write_while_following(&zk, 2)).await;
    let last = tokio::task::block_in_place(|| {
        wait_members_mirrored(&mut cluster, &survivors, zk_ports.client)
    });
    assert_members_mirror(&zk, &cluster, &survivors).await;
    let log = fs::read_to_string(cluster.members[next].log_path()).unwrap();
    assert!(
        log.contains("sync=\"DIFF\""),
        "the next leader syncs from what its log holds:\n{log}"
    );

    let reply = promote(cluster.members[next].admin_port, Some("admin:secret"));
    assert_eq!(reply.status, 200, "{}", reply.body);
    drop(zookeeper);
    let fresh = connect(cluster.members[next].client_port, None, false).await;
    let (stat, _) = timed("create", fresh.create("/on-warden", b"", &persistent()))
        .await
        .unwrap();
    assert_eq!(stat.czxid, last + 2, "after the new session's zxid");
    let _ = fs::remove_dir_all(&dir);
}

/// Accepts one connection on `listener` within `limit`.
fn accept_within(listener: &std::net::TcpListener, limit: Duration) -> std::net::TcpStream {
    let deadline = Instant::now() + limit;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                stream.set_read_timeout(Some(limit)).unwrap();
                return stream;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "Warden did not connect");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Reads one quorum packet, as ZooKeeper's `BinaryInputArchive` would: type, zxid, data,
/// auth ids (Warden sends none).
fn read_packet(stream: &mut std::net::TcpStream) -> (i32, i64, Vec<u8>) {
    use std::io::Read;
    let mut head = [0u8; 16];
    stream.read_exact(&mut head).unwrap();
    let kind = i32::from_be_bytes(head[..4].try_into().unwrap());
    let zxid = i64::from_be_bytes(head[4..12].try_into().unwrap());
    let len = i32::from_be_bytes(head[12..].try_into().unwrap());
    let mut data = vec![0u8; len.max(0) as usize];
    stream.read_exact(&mut data).unwrap();
    let mut auth = [0u8; 4];
    stream.read_exact(&mut auth).unwrap();
    assert_eq!(i32::from_be_bytes(auth), -1, "no auth ids");
    (kind, zxid, data)
}

fn packet(kind: i32, zxid: i64, data_len: i32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&zxid.to_be_bytes());
    out.extend_from_slice(&data_len.to_be_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

/// A leader that answers with nonsense: the observer's first packet is ZooKeeper's
/// OBSERVERINFO (type 16, `LearnerInfo { sid, 0x10000, configVersion }`); a packet whose data
/// claims 2 GiB, then a sync that begins with an unknown packet type, each end the connection
/// with a log line, and Warden connects again and goes on serving.
#[test]
fn a_leader_that_sends_nonsense_is_left_and_tried_again() {
    use std::io::Write;
    let dir = temp_dir("migration-bad-leader");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let warden_port = free_port();
    let mut warden = start_warden(&dir, warden_port, free_port(), &[port], 7);
    let limit = Duration::from_secs(20);

    let mut first = accept_within(&listener, limit);
    let (kind, zxid, data) = read_packet(&mut first);
    assert_eq!(
        (kind, zxid),
        (16, 0),
        "OBSERVERINFO of a server that mirrors nothing yet"
    );
    assert_eq!(
        data.len(),
        20,
        "LearnerInfo: sid, protocol version, config version"
    );
    assert_eq!(i64::from_be_bytes(data[..8].try_into().unwrap()), 7);
    assert_eq!(i32::from_be_bytes(data[8..12].try_into().unwrap()), 0x10000);
    first
        .write_all(&packet(17, 1 << 32, i32::MAX, b""))
        .unwrap();

    let mut second = accept_within(&listener, limit);
    assert_eq!(read_packet(&mut second).0, 16);
    let version = 0x10000i32.to_be_bytes();
    second.write_all(&packet(17, 1 << 32, 4, &version)).unwrap();
    let (kind, zxid, data) = read_packet(&mut second);
    assert_eq!(
        (kind, zxid),
        (18, 0),
        "ACKEPOCH with the last zxid mirrored"
    );
    assert_eq!(data, 0i32.to_be_bytes(), "and its current epoch");
    second.write_all(&packet(99, 0, -1, b"")).unwrap();

    let _third = accept_within(&listener, limit);
    warden.assert_alive();
    assert!(srvr(warden_port).is_some(), "Warden serves on");
    let log = fs::read_to_string(&warden.2).unwrap();
    assert!(log.contains("exceeds the limit"), "{log}");
    assert!(log.contains("packet type 99"), "{log}");
    let _ = fs::remove_dir_all(&dir);
}
