//! The admin `snapshot` and `restore` commands of real `warden server` processes
//! (docs/admin.md): a tree made with an independent client, streamed out in ZooKeeper's
//! snapshot format, read back by the import reader node by node and loaded by a real
//! ZooKeeper 3.9.5 from its data directory; ZooKeeper's own snapshot and Warden's restored
//! into fresh servers and into a three-server cluster; damaged bodies, credentials, switches
//! and rate limits answered as ZooKeeper 3.9.5 answers them.

mod support;

use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use support::cluster::{Cluster, System};
use support::http::{self, BinaryReply};
use support::servers::{free_port, spawn_zookeeper_in, temp_dir};
use support::warden::{Warden, client, ephemeral, persistent, wait_for};
use warden_state::tree::DataTree;
use zookeeper_client::{Acl, Acls, AuthId, CreateMode, Permission};

const AUTH: &str = "Authorization: digest root:pw";
/// So that a test may restore more than once (the default allows one in five minutes), and
/// TTL nodes.
const FAST_LIMITS: &str = "admin.rateLimiterIntervalInMS=0\nextendedTypesEnabled=true";
const TIMEOUT: Duration = Duration::from_secs(60);

/// One node as a client sees it: data, stat, ACL (permission bits, scheme, id), children.
type Node = (Vec<u8>, [i64; 11], Vec<(i32, String, String)>);

fn snapshot(admin: SocketAddr, query: &str, headers: &[&str]) -> BinaryReply {
    http::binary(
        admin,
        "GET",
        &format!("/commands/snapshot{query}"),
        headers,
        &[],
    )
    .expect("the admin server answers")
}

fn restore(admin: SocketAddr, headers: &[&str], body: &[u8]) -> BinaryReply {
    http::binary(admin, "POST", "/commands/restore", headers, body)
        .expect("the admin server answers")
}

fn bits(p: Permission) -> i32 {
    [
        Permission::READ,
        Permission::WRITE,
        Permission::CREATE,
        Permission::DELETE,
        Permission::ADMIN,
    ]
    .iter()
    .enumerate()
    .filter(|(_, bit)| p.has(**bit))
    .map(|(i, _)| 1 << i)
    .sum()
}

/// Every node but those under `skip`, read with a client.
async fn read_tree(zk: &zookeeper_client::Client, skip: &[&str]) -> BTreeMap<String, Node> {
    let mut nodes = BTreeMap::new();
    let mut queue = VecDeque::from(["/".to_owned()]);
    while let Some(path) = queue.pop_front() {
        let (data, s) = zk.get_data(&path).await.expect(&path);
        let (acl, _) = zk.get_acl(&path).await.expect(&path);
        let acl = acl
            .iter()
            .map(|a| {
                (
                    bits(a.permission()),
                    a.scheme().to_owned(),
                    a.id().to_owned(),
                )
            })
            .collect();
        let stat = [
            s.czxid,
            s.mzxid,
            s.ctime,
            s.mtime,
            s.version.into(),
            s.cversion.into(),
            s.aversion.into(),
            s.ephemeral_owner,
            s.pzxid,
            s.num_children.into(),
            s.data_length.into(),
        ];
        for child in zk.list_children(&path).await.expect(&path) {
            let child = if path == "/" {
                format!("/{child}")
            } else {
                format!("{path}/{child}")
            };
            if !skip.contains(&child.as_str()) {
                queue.push_back(child);
            }
        }
        nodes.insert(path, (data, stat, acl));
    }
    nodes
}

/// The same view of a tree the import reader built: the stat as a server sends it
/// (ZooKeeper's `copyStat`: cversion doubled less the children, no container or TTL owner),
/// digest ACLs masked for a caller without ADMIN.
fn tree_nodes(tree: &DataTree) -> BTreeMap<String, Node> {
    let mut nodes = BTreeMap::new();
    let mut stack = vec![warden_state::tree::ROOT];
    while let Some(id) = stack.pop() {
        let n = tree.node(id);
        let s = n.wire_stat();
        let data = n.data().unwrap_or_default().to_vec();
        let stat = [
            s.czxid,
            s.mzxid,
            s.ctime,
            s.mtime,
            s.version.into(),
            s.cversion.into(),
            s.aversion.into(),
            s.ephemeral_owner,
            s.pzxid,
            s.num_children.into(),
            s.data_length.into(),
        ];
        let acl = warden_state::acl::masked(n.acl())
            .into_iter()
            .map(|a| (a.perms, a.id.scheme, a.id.id))
            .collect();
        nodes.insert(tree.path_of(id), (data, stat, acl));
        stack.extend(n.child_ids());
    }
    nodes
}

/// `nodes` as they would be without `left_out` children of the root (the subtrees a
/// snapshot leaves out): fewer children, so a cversion as sent one higher.
fn without_left_out(mut nodes: BTreeMap<String, Node>, left_out: i64) -> BTreeMap<String, Node> {
    let root = &mut nodes.get_mut("/").expect("a root").1;
    root[9] -= left_out;
    root[5] += left_out;
    nodes
}

/// A tree of every kind of node: data, a digest ACL, sequential, ephemeral, container, TTL,
/// changed data. The ephemeral's session is returned to keep it alive.
async fn make_tree(connect: &str) -> zookeeper_client::Client {
    let zk = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(20))
        .connect(connect)
        .await
        .expect("connecting");
    zk.create("/app", b"top", &persistent()).await.unwrap();
    zk.create("/app/x", b"v0", &persistent()).await.unwrap();
    for v in [&b"v1"[..], b"v2"] {
        zk.set_data("/app/x", v, None).await.unwrap();
    }
    let alice = AuthId::new("digest", &warden_state::acl::digest("alice:pw"));
    let secret = [
        Acl::new(Permission::ALL, alice),
        Acl::new(Permission::READ, AuthId::new("world", "anyone")),
    ];
    let options = CreateMode::Persistent.with_acls(Acls::new(&secret));
    zk.create("/app/secret", b"s", &options).await.unwrap();
    let sequential = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    for _ in 0..2 {
        zk.create("/app/seq-", b"", &sequential).await.unwrap();
    }
    zk.create("/app/eph", b"here", &ephemeral()).await.unwrap();
    let container = CreateMode::Container.with_acls(Acls::anyone_all());
    zk.create("/app/c", b"", &container).await.unwrap();
    zk.create("/app/c/k", b"kept", &persistent()).await.unwrap();
    let ttl = CreateMode::Persistent
        .with_acls(Acls::anyone_all())
        .with_ttl(Duration::from_secs(600));
    zk.create("/app/ttl", b"t", &ttl).await.unwrap();
    zk
}

/// The zxid in a `last_zxid` header (`0x` and hex).
fn header_zxid(reply: &BinaryReply) -> i64 {
    let value = reply.header("last_zxid").expect("a last_zxid header");
    i64::from_str_radix(value.strip_prefix("0x").expect("0x"), 16).unwrap()
}

/// The snapshot read by `warden import`'s reader from a ZooKeeper data directory.
fn import(snapshot: &[u8], zxid: i64) -> warden_import::Imported {
    let dir = tempfile::tempdir().unwrap();
    let version = dir.path().join("version-2");
    std::fs::create_dir(&version).unwrap();
    std::fs::write(version.join(format!("snapshot.{zxid:x}")), snapshot).unwrap();
    let source = warden_import::Source {
        data_dir: dir.path().to_owned(),
        data_log_dir: None,
    };
    warden_import::import(&source, warden_state::StateConfig::default()).expect("it imports")
}

fn admin_of(cluster: &Cluster, i: usize) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, cluster.members[i].admin_port))
}

fn json_field(body: &str, key: &str) -> Option<String> {
    body.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("\"{key}\" : ")))
        .map(|v| v.trim_end_matches(',').to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_reads_back_node_by_node_and_zookeeper_loads_it() {
    let warden = Warden::start(FAST_LIMITS);
    let _owner = make_tree(&warden.connect_string()).await;

    let reply = snapshot(warden.admin_addr(), "?streaming=true", &[AUTH]);
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(
        reply.header("snapshot_size"),
        Some(reply.body.len().to_string().as_str())
    );
    let zxid = header_zxid(&reply);
    let bytes = reply.body;
    assert_eq!(&bytes[..4], b"ZKSN");

    // streaming=false: the same headers (nothing changed since) and ZooKeeper's bare JSON.
    let reply = snapshot(warden.admin_addr(), "?streaming=false", &[AUTH]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(header_zxid(&reply), zxid);
    assert_eq!(
        reply.text(),
        "{\n  \"command\" : \"snapshot\",\n  \"error\" : null\n}"
    );

    // The import reader checks every seal and ZooKeeper's digest of the tree.
    let imported = import(&bytes, zxid);
    assert_eq!(
        imported.digests_checked, 1,
        "the snapshot's digest matched its tree"
    );
    assert_eq!(imported.state.last_zxid(), zxid);
    let expected = tree_nodes(imported.state.tree());
    let zk = client(&warden).await;
    let served = read_tree(&zk, &["/keeper"]).await;
    assert_eq!(without_left_out(served, 1), expected, "node by node");
    assert!(expected.contains_key("/app/eph") && expected.contains_key("/app/ttl"));
    let owner = expected["/app/eph"].1[7];
    assert!(
        imported.state.session(owner).is_some(),
        "the ephemeral's session"
    );

    // ZooKeeper 3.9.5 loads it from its data directory, as `snapshot.<zxid>`.
    let dir = temp_dir("zookeeper-loads-warden");
    let version = dir.join("data/version-2");
    std::fs::create_dir_all(&version).unwrap();
    std::fs::write(version.join(format!("snapshot.{zxid:x}")), &bytes).unwrap();
    let mut zookeeper = spawn_zookeeper_in(
        dir,
        "4lw.commands.whitelist=*\ntickTime=1000\nextendedTypesEnabled=true",
        "",
    );
    zookeeper.wait_until_serving(TIMEOUT).unwrap();
    let srvr = support::servers::srvr(zookeeper.port).unwrap();
    assert!(
        srvr.contains(&format!("Zxid: 0x{zxid:x}")),
        "ZooKeeper goes on from the snapshot's zxid: {srvr}"
    );
    let zk = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&zookeeper.address())
        .await
        .expect("connecting to ZooKeeper");
    let loaded = read_tree(&zk, &["/zookeeper"]).await;
    let mut wanted = expected.clone();
    wanted.retain(|p, _| !p.starts_with("/zookeeper"));
    assert_eq!(loaded, wanted, "ZooKeeper's tree, node by node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_restore_into_fresh_servers() {
    // ZooKeeper 3.9.5's own snapshot (taken after nine transactions, a session's ephemeral).
    let sample = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/reference/zookeeper-3.9.5-samples/snapshot.9"),
    )
    .unwrap();
    let fresh = Warden::start(FAST_LIMITS);
    let before = client(&fresh).await;
    before.create("/gone", b"", &persistent()).await.unwrap();
    let reply = restore(
        fresh.admin_addr(),
        &[AUTH, "Content-Type: application/octet-stream"],
        &sample,
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let zxid: i64 = json_field(&reply.text(), "last_zxid")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(zxid, 9, "the snapshot's, ahead of the fresh server's own");
    assert!(
        reply
            .text()
            .ends_with("\"command\" : \"restore\",\n  \"error\" : null\n}")
    );
    let expected = tree_nodes(import(&sample, 9).state.tree());
    let zk = client(&fresh).await;
    assert_eq!(read_tree(&zk, &[]).await, expected, "ZooKeeper's tree");
    assert!(
        fresh
            .log()
            .contains("the state was replaced by a restored snapshot")
    );

    // Warden's snapshot into another fresh Warden: the same tree, /keeper aside.
    let source = Warden::start(FAST_LIMITS);
    let _owner = make_tree(&source.connect_string()).await;
    let reply = snapshot(source.admin_addr(), "", &[AUTH]);
    assert_eq!(reply.status, 200);
    let target = Warden::start(FAST_LIMITS);
    let reply = restore(target.admin_addr(), &[AUTH], &reply.body);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let (from, to) = (client(&source).await, client(&target).await);
    let from = without_left_out(read_tree(&from, &["/keeper"]).await, 1);
    assert_eq!(read_tree(&to, &[]).await, from);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_body_is_refused_and_leaves_the_state_alone() {
    let metrics_port = free_port();
    let warden = Warden::start(&format!(
        "{FAST_LIMITS}\nmetricsProvider.className=\
         org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
         metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={metrics_port}"
    ));
    let _owner = make_tree(&warden.connect_string()).await;
    let good = snapshot(warden.admin_addr(), "", &[AUTH]).body;
    let zk = client(&warden).await;
    zk.create("/after", b"", &persistent()).await.unwrap();
    let before = read_tree(&zk, &[]).await;

    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x40;
    for (what, body) in [
        ("cut", &good[..good.len() - 9]),
        ("flipped", &flipped[..]),
        ("not a snapshot", &b"hello, world"[..]),
    ] {
        let reply = restore(warden.admin_addr(), &[AUTH], body);
        assert_eq!(reply.status, 400, "{what}: {}", reply.text());
        let error = json_field(&reply.text(), "error").unwrap();
        assert!(
            error.contains("the snapshot received is damaged at byte"),
            "{what}: {error}"
        );
    }
    let reply = restore(warden.admin_addr(), &[AUTH], &[]);
    assert_eq!(reply.status, 400);
    assert!(reply.text().contains("no snapshot in the body"));
    assert_eq!(read_tree(&zk, &[]).await, before, "untouched");

    let metrics = http::get(
        SocketAddr::from((Ipv4Addr::LOCALHOST, metrics_port)),
        "/metrics",
        &[],
    )
    .unwrap()
    .body;
    for line in [
        "restore_error_count 4.0",
        "restore_rate_limited_count 0.0",
        "snapshot_error_count 0.0",
        "restore_time_count 0.0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_switches_and_rate_limits_as_zookeeper() {
    let warden = Warden::start("");
    let admin = warden.admin_addr();
    // No header, an unknown scheme, a digest without ALL on `/`.
    for (headers, status, error) in [
        (&[][..], 401, "Auth info is missing for the command"),
        (
            &["Authorization: basic cm9vdDpwdw=="][..],
            401,
            "Not authenticated",
        ),
    ] {
        let reply = snapshot(admin, "", headers);
        assert_eq!(
            (reply.status, json_field(&reply.text(), "error")),
            (status, Some(format!("\"{error}\"")))
        );
        let reply = restore(admin, headers, b"x");
        assert_eq!(
            (reply.status, json_field(&reply.text(), "error")),
            (status, Some(format!("\"{error}\"")))
        );
    }
    let zk = client(&warden).await;
    zk.auth("digest", b"root:pw").await.unwrap();
    let root = AuthId::new("digest", &warden_state::acl::digest("root:pw"));
    let root_only = [Acl::new(Permission::ALL, root)];
    zk.set_acl("/", &root_only, None).await.unwrap();
    let reply = snapshot(admin, "", &["Authorization: digest eve:pw"]);
    assert_eq!(
        (reply.status, json_field(&reply.text(), "error")),
        (403, Some("\"Not authorized\"".into()))
    );
    // The default limits: one snapshot per 300 ms, one restore per five minutes.
    let first = snapshot(admin, "", &[AUTH]);
    assert_eq!(first.status, 200, "{}", first.text());
    let second = snapshot(admin, "", &[AUTH]);
    assert_eq!(
        (second.status, second.text()),
        (
            429,
            "{\n  \"command\" : \"snapshot\",\n  \"error\" : null\n}".to_owned()
        )
    );
    wait_for(
        "the snapshot rate limit to pass",
        Duration::from_secs(5),
        || snapshot(admin, "", &[AUTH]).status == 200,
    );
    assert_eq!(restore(admin, &[AUTH], &first.body).status, 200);
    let reply = restore(admin, &[AUTH], &first.body);
    assert_eq!(reply.status, 429, "{}", reply.text());
    // A GET of restore, a POST of anything else.
    let reply = http::request(admin, "GET", "/commands/restore", &[AUTH]).unwrap();
    assert_eq!(reply.status, 405);
    let reply = http::request(admin, "POST", "/commands/snapshot", &[AUTH]).unwrap();
    assert_eq!(reply.status, 405);

    // Switched off as ZooKeeper's admin.*.enabled: 503 and the bare JSON.
    let off = Warden::start("admin.snapshot.enabled=false\nadmin.restore.enabled=false");
    let reply = snapshot(off.admin_addr(), "", &[AUTH]);
    assert_eq!(
        (reply.status, reply.text()),
        (
            503,
            "{\n  \"command\" : \"snapshot\",\n  \"error\" : null\n}".to_owned()
        )
    );
    let reply = restore(off.admin_addr(), &[AUTH], &first.body);
    assert_eq!(
        (reply.status, reply.text()),
        (
            503,
            "{\n  \"command\" : \"restore\",\n  \"error\" : null\n}".to_owned()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_on_a_cluster_reaches_every_member() {
    let mut cluster = Cluster::start(System::Warden, 3, 0, FAST_LIMITS);
    let leader = cluster.wait_for_leader(TIMEOUT);
    let owner = make_tree(&cluster.member_connect_string(leader)).await;
    let reply = snapshot(admin_of(&cluster, leader), "", &[AUTH]);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let taken = reply.body;
    // Changes after the snapshot, which the restore takes back.
    let zk = zookeeper_client::Client::connector()
        .connect(&cluster.member_connect_string(leader))
        .await
        .unwrap();
    zk.delete("/app/x", None).await.unwrap();
    zk.create("/later", b"", &persistent()).await.unwrap();

    let follower = cluster.followers_of(leader)[0];
    let reply = restore(admin_of(&cluster, follower), &[AUTH], &taken);
    assert_eq!(reply.status, 503, "{}", reply.text());
    assert!(reply.text().contains("send restore to the leader"));

    let reply = restore(admin_of(&cluster, leader), &[AUTH], &taken);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let zxid = cluster.wait_until_converged(TIMEOUT);
    let restored: i64 = json_field(&reply.text(), "last_zxid")
        .unwrap()
        .parse()
        .unwrap();
    assert!(zxid >= restored);
    let mut trees = Vec::new();
    for i in 0..3 {
        let zk = zookeeper_client::Client::connector()
            .connect(&cluster.member_connect_string(i))
            .await
            .unwrap();
        let tree = read_tree(&zk, &["/keeper"]).await;
        assert!(
            tree.contains_key("/app/x") && !tree.contains_key("/later"),
            "member {i}"
        );
        trees.push(tree);
    }
    assert_eq!(trees[0], trees[1]);
    assert_eq!(trees[1], trees[2]);
    // The session that owns /app/eph is in the snapshot and was alive: its connection was
    // closed with every other, and it resumes with the password it has (kept by the restore).
    let eph_owner = trees[0]["/app/eph"].1[7];
    assert_eq!(owner.session_id().0, eph_owner);
    let mut resumed = false;
    for _ in 0..100 {
        if owner
            .set_data("/app/eph", b"still mine", None)
            .await
            .is_ok()
        {
            resumed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(resumed, "the ephemeral's session resumed after the restore");
}

/// Kills a child process by its own handle when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Warden's TOML `[admin]` keys: a body past `restore_bytes_max` is refused unread (413), and a
/// gzip body may not decompress past it either (400); `snapshot_enabled = false` is 503.
#[test]
fn restore_bodies_are_bounded_and_the_toml_keys_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let (client_port, admin_port) = (free_port(), free_port());
    let toml = format!(
        "client_listen = \"127.0.0.1:{client_port}\"\ndata_dir = \"{}\"\n\n[admin]\n\
         listen = \"127.0.0.1:{admin_port}\"\nsnapshot_enabled = false\n\
         rate_limit_interval_ms = 0\nrestore_bytes_max = 2000\n",
        dir.path().join("data").display()
    );
    let cfg = dir.path().join("warden.toml");
    std::fs::write(&cfg, &toml).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["server", "--config"])
        .arg(&cfg)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _kill = KillOnDrop(child);
    let admin = SocketAddr::from((Ipv4Addr::LOCALHOST, admin_port));
    wait_for("the admin server", TIMEOUT, || {
        http::get(admin, "/commands/ruok", &[]).is_ok_and(|r| r.status == 200)
    });
    assert_eq!(snapshot(admin, "", &[AUTH]).status, 503);

    let reply = restore(admin, &[AUTH], &[0; 2001]);
    assert_eq!(reply.status, 413, "{}", reply.text());
    assert!(
        reply.text().contains("restore_bytes_max is 2000"),
        "{}",
        reply.text()
    );
    // ZooKeeper's snapshot.9, under 2000 bytes, restores; padded past the bound inside a
    // small gzip stream, it is refused once decompressed.
    let sample = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/reference/zookeeper-3.9.5-samples/snapshot.9"),
    )
    .unwrap();
    assert!(sample.len() < 2000);
    let mut padded = sample.clone();
    padded.resize(100_000, 0);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &padded).unwrap();
    let gz = gz.finish().unwrap();
    assert!(gz.len() < 2000);
    let reply = restore(admin, &[AUTH], &gz);
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert!(
        reply.text().contains("once decompressed"),
        "{}",
        reply.text()
    );
    let reply = restore(admin, &[AUTH], &sample);
    assert_eq!(reply.status, 200, "{}", reply.text());
}
