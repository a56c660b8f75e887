//! The admin HTTP server of a real `warden server` process against ZooKeeper 3.9.5's
//! AdminServer, as captured from a running ZooKeeper (golden/zk395-admin-json, the same files
//! as ../shared/reference/zookeeper-3.9.5-samples): field names, order and JSON types, the
//! `command`/`error` tail, status codes; ClickHouse Keeper's `/ready`; the admin.* keys.

mod support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::cluster::{Cluster, System};
use support::http::{self, Reply};
use support::servers::free_port;
use support::warden::{Warden, client, ephemeral, persistent};

/// The body of a captured ZooKeeper reply.
fn capture(name: &str) -> String {
    let path = format!(
        "{}/tests/golden/zk395-admin-json/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let text = text.replace("\r\n", "\n");
    text.split_once("\n\n").expect("head and body").1.to_owned()
}

fn status_of_capture(name: &str) -> u16 {
    let path = format!(
        "{}/tests/golden/zk395-admin-json/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    text.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Each `"key" : value` line of Jackson's pretty JSON: indent, key, and the JSON type of the
/// value (`long` and `double` told apart as Jackson writes them).
fn shape(body: &str) -> Vec<(usize, String, &'static str)> {
    body.lines()
        .filter_map(|line| {
            let indent = line.len() - line.trim_start().len();
            let (key, value) = line.trim_start().split_once("\" : ")?;
            let key = key.strip_prefix('"')?.to_owned();
            let value = value.trim_end_matches(',');
            let kind = match value {
                "true" | "false" => "bool",
                "null" => "null",
                v if v.starts_with('"') => "string",
                v if v.starts_with('{') => "object",
                v if v.starts_with('[') => "array",
                v if v.contains('.') => "double",
                _ => "long",
            };
            Some((indent, key, kind))
        })
        .collect()
}

/// The top-level keys only.
fn top_keys(body: &str) -> Vec<String> {
    shape(body)
        .into_iter()
        .filter(|(indent, _, _)| *indent == 2)
        .map(|(_, k, _)| k)
        .collect()
}

fn admin(warden: &Warden, path: &str) -> Reply {
    http::get(warden.admin_addr(), path, &[]).expect("the admin server answers")
}

fn command(warden: &Warden, name: &str) -> Reply {
    let reply = admin(warden, &format!("/commands/{name}"));
    assert_eq!(
        reply.header("content-type"),
        Some("application/json"),
        "{name}"
    );
    reply
}

/// The keys of `ours` that ZooKeeper's capture also has have the same types, and the same
/// order as there up to `unordered_from` (a key of ours after which ZooKeeper's order is a
/// hash map's: its metrics provider's families in `monitor`).
fn assert_shared_keys_agree(name: &str, ours: &str, zookeeper: &str, unordered_from: &str) {
    let theirs = shape(zookeeper);
    let mut last = 0;
    let mut ordered = true;
    for (indent, key, kind) in shape(ours).into_iter().filter(|l| l.0 == 2) {
        ordered &= key != unordered_from;
        if let Some(at) = theirs
            .iter()
            .position(|(i, k, _)| *i == indent && *k == key)
        {
            assert_eq!(theirs[at].2, kind, "{name}: type of {key}:\n{ours}");
            assert!(
                !ordered || at >= last,
                "{name}: {key} out of ZooKeeper's order:\n{ours}"
            );
            last = at;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_answer_with_zookeepers_json() {
    let warden = Warden::start("");
    // The captures' scenario: /app, an ephemeral under it, one data watch.
    let zk = client(&warden).await;
    zk.create("/app", b"", &persistent()).await.unwrap();
    zk.create("/app/eph", b"", &ephemeral()).await.unwrap();
    let (_, _watch) = zk.check_and_watch_stat("/app/none").await.unwrap();
    let session = zk.session_id().0;

    // Exactly ZooKeeper's fields, order and types.
    for name in [
        "configuration",
        "connections",
        "dirs",
        "get_trace_mask",
        "initial_configuration",
        "is_read_only",
        "observers",
        "ruok",
        "server_stats",
        "stats",
        "voting_view",
        "watch_summary",
        "leader",
        "zabstate",
        "observer_connection_stat_reset",
        "last_snapshot",
    ] {
        let reply = command(&warden, name);
        assert_eq!(reply.status, 200, "{name}: {}", reply.body);
        assert_eq!(
            shape(&reply.body),
            shape(&capture(name)),
            "{name}:\n{}",
            reply.body
        );
    }

    // Aliases answer with the primary name.
    let stat = command(&warden, "stat");
    assert!(
        stat.body.contains("\"command\" : \"stats\""),
        "{}",
        stat.body
    );
    let srvr = command(&warden, "srvr").body;
    assert!(srvr.contains("\"server_state\" : \"standalone\""), "{srvr}");
    assert!(srvr.contains("\"node_count\" : 10,"), "{srvr}");

    let conf = command(&warden, "conf").body;
    assert!(
        conf.contains(&format!("\"client_port\" : {},", warden.port)),
        "{conf}"
    );
    let icfg = command(&warden, "icfg").body;
    assert!(
        icfg.contains(&format!("admin.serverPort={}\\n", warden.admin_port)),
        "initial_configuration is the zoo.cfg as written: {icfg}"
    );
    let cons = command(&warden, "cons").body;
    assert!(
        cons.contains(&format!("\"session_id\" : {session},")),
        "{cons}"
    );
    let wchs = command(&warden, "wchs").body;
    assert!(wchs.contains("\"num_total_watches\" : 1,"), "{wchs}");

    // Maps keyed by session or path: ZooKeeper's top-level fields, then the values.
    for name in ["dump", "watches", "watches_by_path"] {
        let reply = command(&warden, name);
        assert_eq!(top_keys(&reply.body), top_keys(&capture(name)), "{name}");
    }
    let dump = command(&warden, "dump").body;
    assert!(
        dump.contains(&format!("\"{session}\" : [ \"/app/eph\" ]")),
        "{dump}"
    );
    assert!(dump.contains(&format!("[ {session} ]")), "{dump}");
    let wchc = command(&warden, "wchc").body;
    assert!(
        wchc.contains(&format!("\"{session}\" : [ \"/app/none\" ]")),
        "{wchc}"
    );
    let wchp = command(&warden, "wchp").body;
    assert!(
        wchp.contains(&format!("\"/app/none\" : [ {session} ]")),
        "{wchp}"
    );

    // Warden reports fewer facts than a JVM: what it does report agrees with ZooKeeper.
    // monitor's metrics provider families follow Warden's own figures (last_zxid first).
    for (name, unordered_from) in [("monitor", "last_zxid"), ("environment", ""), ("hash", "")] {
        let reply = command(&warden, name);
        assert_eq!(reply.status, 200, "{name}");
        assert_shared_keys_agree(name, &reply.body, &capture(name), unordered_from);
        let keys = top_keys(&reply.body);
        assert_eq!(keys[keys.len() - 2..], ["command", "error"], "{name}");
    }
    let mntr = command(&warden, "mntr").body;
    assert_eq!(
        top_keys(&mntr)[..3],
        ["version", "server_state", "ephemerals_count"]
    );
    assert!(mntr.contains("\"znode_count\" : 10,"), "{mntr}");
    // The metrics provider's families, as ZooKeeper's default provider dumps them: every one
    // under a name ZooKeeper's monitor has, but for Warden's own figures and the sets keyed
    // by namespace (none in the capture).
    let zookeeper_keys = top_keys(&capture("monitor"));
    let ours = top_keys(&mntr);
    let own = ours.iter().position(|k| k == "last_zxid").unwrap();
    let after_own = ours.iter().position(|k| k == "snapshot_bytes").unwrap() + 1;
    for key in ours[..own].iter().chain(&ours[after_own..]) {
        assert!(
            zookeeper_keys.contains(key)
                || key.ends_with("_per_namespace")
                || ["command", "error"].contains(&key.as_str()),
            "monitor's {key} is not ZooKeeper's:\n{mntr}"
        );
    }
    for key in [
        "avg_readlatency",
        "p999_readlatency",
        "cnt_updatelatency",
        "max_snapshottime",
        "sum_fsynctime",
        "commit_count",
        "open_file_descriptor_count",
        "avg_app_write_per_namespace",
        "cnt_node_changed_watch_count",
    ] {
        assert!(
            ours.contains(&key.to_owned()),
            "monitor lacks {key}:\n{mntr}"
        );
    }
    assert!(number(&mntr, "cnt_app_write_per_namespace") >= 2, "{mntr}");

    // The resets answer as ZooKeeper's, and reset.
    for name in ["connection_stat_reset", "stat_reset"] {
        let reply = command(&warden, name);
        assert_eq!((reply.status, reply.body), (200, capture(name)), "{name}");
    }
    // A ping may have arrived since.
    let srvr = command(&warden, "srvr").body;
    assert!(number(&srvr, "packets_received") <= 1, "{srvr}");
    drop(zk);
}

/// The first value of `key` in a reply, a whole number.
fn number(body: &str, key: &str) -> i64 {
    let (_, rest) = body
        .split_once(&format!("\"{key}\" : "))
        .unwrap_or_else(|| panic!("no {key} in {body}"));
    rest.split([',', '\n']).next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_commands_auth_and_the_links_page() {
    let warden = Warden::start("");

    // ZooKeeper: 200 and the name as asked.
    let reply = command(&warden, "nosuchcmd");
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (
            status_of_capture("nosuchcmd"),
            capture("nosuchcmd").as_str()
        )
    );

    // snapshot and restore need an Authorization header: ZooKeeper's 401 without one.
    let reply = command(&warden, "snapshot");
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (status_of_capture("snapshot"), capture("snapshot").as_str())
    );
    let reply = http::request(warden.admin_addr(), "POST", "/commands/restore", &[]).unwrap();
    assert_eq!(reply.status, 401, "{}", reply.body);
    // With one, by any alias (tests/snapshot_restore.rs streams and restores).
    let reply = http::get(
        warden.admin_addr(),
        "/commands/snap?streaming=false",
        &["Authorization: digest root:pw"],
    )
    .unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(top_keys(&reply.body), ["command", "error"]);
    assert!(reply.body.contains("\"command\" : \"snapshot\""));
    assert!(
        reply
            .header("last_zxid")
            .is_some_and(|z| z.starts_with("0x"))
    );

    // The links page: one link per primary name, sorted.
    let page = admin(&warden, "/commands");
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html"));
    assert_eq!(page.body.matches("<br/>").count(), 28, "{}", page.body);
    assert!(
        page.body
            .starts_with("<a href=\"/commands/configuration\">configuration</a><br/>\n"),
        "{}",
        page.body
    );
    assert_eq!(admin(&warden, "/commands/").body, page.body);
}

/// fsync.warningthresholdms=0 makes every append a slow one: each is counted (and logged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_slower_than_the_fsync_warning_threshold_are_counted() {
    let quick = Warden::start("");
    let slow = Warden::start("fsync.warningthresholdms=0\n");
    for warden in [&quick, &slow] {
        let zk = client(warden).await;
        for i in 0..5 {
            zk.create(&format!("/f{i}"), b"", &persistent())
                .await
                .unwrap();
        }
    }
    let count = |w: &Warden| number(&command(w, "srvr").body, "fsync_threshold_exceed_count");
    assert_eq!(count(&quick), 0, "no append takes a second here");
    assert!(count(&slow) >= 5, "{}", command(&slow, "srvr").body);
    let log = std::fs::read_to_string(slow.log_path()).unwrap();
    assert!(
        log.contains("fsync-ing the log took longer than fsync.warningthresholdms"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_snapshot_names_the_newest_snapshots_zxid() {
    let warden = Warden::start("snapCount=2\n");
    let zk = client(&warden).await;
    for i in 0..6 {
        zk.create(&format!("/n{i}"), b"", &persistent())
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let body = command(&warden, "lsnp").body;
        if !body.contains("\"zxid\" : \"0\"") || Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(shape(&body), shape(&capture("last_snapshot")), "{body}");
    let zxid = body
        .split_once("\"zxid\" : \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(hex, _)| i64::from_str_radix(hex, 16).unwrap())
        .unwrap();
    // Hex without 0x; at most the last zxid the server applied.
    let srvr = command(&warden, "srvr").body;
    assert!(
        zxid > 0 && zxid <= number(&srvr, "last_processed_zxid"),
        "{body}\n{srvr}"
    );
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now_s - number(&body, "timestamp")).abs() < 120, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_and_health() {
    let warden = Warden::start("");
    let ready = admin(&warden, "/ready");
    assert_eq!(ready.status, 200);
    assert_eq!(
        ready.body,
        "{\"details\":{\"role\":\"leader\",\"hasLeader\":true},\"status\":\"ok\"}"
    );
    let health = admin(&warden, "/health");
    assert_eq!(
        (health.status, health.body.as_str()),
        (200, "{\"status\":\"ok\"}")
    );
    let head = http::request(warden.admin_addr(), "HEAD", "/ready", &[]).unwrap();
    assert_eq!(head.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_keys_are_honoured() {
    // admin.enableServer=false: nothing listens on the admin port.
    let warden = Warden::start("admin.enableServer=false\n");
    assert_eq!(warden.four_letter("ruok"), "imok");
    assert!(TcpStream::connect_timeout(&warden.admin_addr(), Duration::from_secs(1)).is_err());
    drop(warden);

    // admin.commandURL moves the commands; admin.idleTimeout closes idle connections.
    let warden = Warden::start("admin.commandURL=/zk\nadmin.idleTimeout=500\n");
    let reply = admin(&warden, "/zk/ruok");
    assert_eq!((reply.status, reply.body), (200, capture("ruok")));
    assert_eq!(admin(&warden, "/commands/ruok").status, 404);
    assert!(
        admin(&warden, "/zk")
            .body
            .contains("<a href=\"/zk/ruok\">ruok</a>")
    );
    let mut idle = TcpStream::connect(warden.admin_addr()).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let _ = std::io::Read::read(&mut idle, &mut buf);
    // Closed after admin.idleTimeout, not hyper's or Jetty's 30 s.
    let kept = started.elapsed();
    assert!(
        kept >= Duration::from_millis(400) && kept < Duration::from_secs(5),
        "an idle admin connection was kept {kept:?}"
    );
}

#[test]
fn a_named_admin_port_that_is_taken_stops_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             admin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n",
            dir.path().join("data").display(),
            free_port()
        ),
    )
    .unwrap();
    let out = support::servers::warden_command(&cfg)
        .output()
        .expect("running warden");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen for admin HTTP on 127.0.0.1:{port}")),
        "{stderr}"
    );
}

/// Warden's TOML: `[admin]` with its own listen address and command URL; the server's initial
/// configuration is the TOML as written.
#[test]
fn warden_toml_admin_section() {
    let dir = tempfile::tempdir().unwrap();
    let (client_port, admin_port) = (free_port(), free_port());
    let toml = format!(
        "client_listen = \"127.0.0.1:{client_port}\"\ndata_dir = \"{}\"\n\n[admin]\n\
         listen = \"127.0.0.1:{admin_port}\"\ncommand_url = \"/api/zk\"\n",
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
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], admin_port));
    let deadline = Instant::now() + Duration::from_secs(60);
    let ruok = loop {
        match http::get(addr, "/api/zk/ruok", &[]) {
            Ok(reply) if reply.status == 200 => break reply,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            other => panic!("no admin server on {addr}: {other:?}"),
        }
    };
    assert_eq!(ruok.body, capture("ruok"));
    let icfg = http::get(addr, "/api/zk/initial_configuration", &[]).unwrap();
    assert!(
        icfg.body
            .contains(&format!("\"initial_configuration\" : {:?}", toml)),
        "{}",
        icfg.body
    );
}

/// Kills a child process by its own handle when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `proposal_stats`' last, min and max buffer sizes, if the answer has them.
fn proposal_stats(body: &str) -> Option<(i64, i64, i64)> {
    let at = body.find("\"proposal_stats\" : {")?;
    let mut values = body[at..].lines().skip(1).take(3).map(|line| {
        let (_, value) = line.split_once(" : ").expect("a field");
        value.trim_end_matches(',').parse::<i64>().expect("a size")
    });
    Some((values.next()?, values.next()?, values.next()?))
}

fn member_get(cluster: &Cluster, i: usize, path: &str) -> Reply {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], cluster.members[i].admin_port));
    http::get(addr, path, &[]).expect("the member's admin server answers")
}

/// A cluster of two participants and an observer: each member's view of the leader and the
/// membership, ZooKeeper's quorum shapes, and `/ready` failing once the quorum is gone.
#[test]
fn cluster_members_answer_with_their_roles() {
    let mut cluster = Cluster::start(System::Warden, 2, 1, "");
    let leader = cluster.wait_for_leader(Duration::from_secs(30));
    let follower = 1 - leader;
    let leader_id = cluster.members[leader].id;

    for (i, is_leader, role) in [
        (leader, true, "leader"),
        (follower, false, "follower"),
        (2, false, "observer"),
    ] {
        let lead = member_get(&cluster, i, "/commands/leader").body;
        assert_eq!(
            top_keys(&lead),
            ["is_leader", "leader_id", "leader_ip", "command", "error"],
            "{lead}"
        );
        assert!(
            lead.contains(&format!("\"is_leader\" : {is_leader},")),
            "{lead}"
        );
        assert!(
            lead.contains(&format!("\"leader_id\" : {leader_id},")),
            "{lead}"
        );
        assert!(lead.contains("\"leader_ip\" : \"127.0.0.1\""), "{lead}");
        let ready = member_get(&cluster, i, "/ready");
        assert_eq!(ready.status, 200, "{}", ready.body);
        assert_eq!(
            ready.body,
            format!("{{\"details\":{{\"role\":\"{role}\",\"hasLeader\":true}},\"status\":\"ok\"}}")
        );
        let zab = member_get(&cluster, i, "/commands/zabstate").body;
        assert_eq!(
            top_keys(&zab),
            [
                "myid",
                "is_leader",
                "quorum_address",
                "election_address",
                "client_address",
                "voting",
                "last_zxid",
                "zab_epoch",
                "zab_counter",
                "zabstate",
                "command",
                "error"
            ],
            "{zab}"
        );
        assert!(zab.contains("\"zabstate\" : \"broadcast\""), "{zab}");
    }

    let view = member_get(&cluster, follower, "/commands/voting_view").body;
    for m in &cluster.members {
        assert!(view.contains(&format!("\"{}\" : {{", m.id)), "{view}");
    }
    assert_eq!(
        view.matches("\"learner_type\" : \"observer\"").count(),
        1,
        "{view}"
    );
    // proposal_stats: the sizes of the entries the leader proposed, a 1000-byte create's
    // among them; a follower has none, as ZooKeeper's.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let zk = zookeeper_client::Client::connector()
                .connect(&cluster.member_connect_string(leader))
                .await
                .unwrap();
            zk.create("/proposed", &[7; 1000], &persistent())
                .await
                .unwrap();
        });
    let stats = member_get(&cluster, leader, "/commands/srvr").body;
    assert!(stats.contains("\"server_state\" : \"leader\""), "{stats}");
    let (last, min, max) = proposal_stats(&stats).expect("proposal_stats on the leader");
    assert!(
        max > 1000 && 0 < min && min <= last && last <= max,
        "{stats}"
    );
    let stats = member_get(&cluster, follower, "/commands/srvr").body;
    assert!(proposal_stats(&stats).is_none(), "{stats}");

    // Without its leader the remaining participant has no quorum: not ready, still alive.
    cluster.kill9(leader);
    let deadline = Instant::now() + Duration::from_secs(30);
    let ready = loop {
        let ready = member_get(&cluster, follower, "/ready");
        if ready.status != 200 || Instant::now() > deadline {
            break ready;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(
        ready.body.ends_with("\"status\":\"fail\"}"),
        "{}",
        ready.body
    );
    assert_eq!(member_get(&cluster, follower, "/health").status, 200);
    let ruok = member_get(&cluster, follower, "/commands/ruok").body;
    assert!(
        ruok.contains("This ZooKeeper instance is not currently serving requests"),
        "{ruok}"
    );
}
