//! The web console (docs/console.md) of real `warden server` processes: its JSON API checked
//! against a tree written with an independent client (zookeeper-client), writes refused
//! without digest credentials and made with them through the normal request path (seen by a
//! client afterwards, on a 3-server cluster from a follower's console too), bad parameters
//! answered 400, and the page itself rendered by a headless Chromium (its DOM and a
//! screenshot checked).

mod support;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use support::cluster::{Cluster, System};
use support::http::{self, Reply};
use support::servers::repo_root;
use support::warden::{Warden, client, ephemeral, persistent};
use zookeeper_client::{Acl, Acls, AuthId, CreateMode, Permission};

fn get(admin: SocketAddr, path: &str, headers: &[&str]) -> Reply {
    http::get(admin, path, headers).expect("the admin server answers")
}

/// A successful JSON answer.
fn json(admin: SocketAddr, path: &str, headers: &[&str]) -> Value {
    let reply = get(admin, path, headers);
    assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", reply.body))
}

fn post(admin: SocketAddr, path: &str, headers: &[&str], body: &[u8]) -> (u16, Value) {
    let reply = http::request_with_body(admin, "POST", path, headers, body)
        .expect("the admin server answers");
    let value =
        serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", reply.body));
    (reply.status, value)
}

fn names(page: &Value) -> Vec<String> {
    page["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect()
}

fn data_of(node: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(node["data"].as_str().expect("data"))
        .unwrap()
}

const BOB: &str = "Authorization: digest bob:bobs-password";
const ALICE: &str = "Authorization: digest alice:alices-password";

fn digest_acl(user_password: &str, permission: Permission) -> Acl {
    Acl::new(
        permission,
        AuthId::new("digest", &warden_state::acl::digest(user_password)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_reads_as_a_client_wrote_it() {
    let warden = Warden::start("");
    let admin = warden.admin_addr();
    let zk = client(&warden).await;
    zk.create("/app", br#"{"name":"app","replicas":3}"#, &persistent())
        .await
        .unwrap();
    for i in 0..150 {
        zk.create(&format!("/app/c{i:03}"), b"x", &persistent())
            .await
            .unwrap();
    }
    zk.create("/bin", &[0, 1, 2, 255, 254], &persistent())
        .await
        .unwrap();
    let alice_reads = [digest_acl("alice:alices-password", Permission::READ)];
    zk.create(
        "/secret",
        b"hidden",
        &CreateMode::Persistent.with_acls(Acls::new(&alice_reads)),
    )
    .await
    .unwrap();
    zk.create("/app/c000/eph", b"", &ephemeral()).await.unwrap();
    let (_, _watch) = zk.check_and_watch_stat("/app/c001").await.unwrap();
    let session = format!("0x{:x}", zk.session_id().0);

    // Children: in name order, a page at a time.
    let page = json(admin, "/console/api/children?path=/app&limit=100", &[]);
    assert_eq!(page["total"], 150);
    let first = names(&page);
    assert_eq!(first.len(), 100);
    assert_eq!(first[0], "c000");
    assert_eq!(first[99], "c099");
    assert_eq!(page["next"], "c099");
    assert_eq!(page["children"][0]["numChildren"], 1);
    assert_eq!(page["children"][0]["stat"]["dataLength"], 1);
    let page = json(
        admin,
        "/console/api/children?path=/app&after=c099&limit=100",
        &[],
    );
    assert_eq!(names(&page).len(), 50);
    assert_eq!(names(&page)[49], "c149");
    assert_eq!(page["next"], Value::Null);
    let root = json(admin, "/console/api/children", &[]);
    for name in ["app", "bin", "secret", "zookeeper"] {
        assert!(names(&root).contains(&name.to_owned()), "{root}");
    }

    // A node: data, Stat, ACL, as the client wrote them.
    let (data, stat) = zk.get_data("/app").await.unwrap();
    let node = json(admin, "/console/api/node?path=/app", &[]);
    assert_eq!(data_of(&node), data);
    assert_eq!(node["stat"]["mzxid"], stat.mzxid);
    assert_eq!(node["stat"]["numChildren"], 150);
    assert_eq!(node["truncated"], false);
    assert_eq!(
        node["acl"],
        serde_json::json!([{"scheme": "world", "id": "anyone", "perms": "cdrwa"}])
    );
    let node = json(admin, "/console/api/node?path=/bin&bytes=3", &[]);
    assert_eq!(data_of(&node), [0, 1, 2]);
    assert_eq!(node["truncated"], true);
    assert_eq!(node["stat"]["dataLength"], 5);
    let eph = json(admin, "/console/api/node?path=/app/c000/eph", &[]);
    assert_eq!(eph["stat"]["ephemeralOwner"], session.as_str());

    // The node's ACL holds for the console as for a client.
    let refused = get(admin, "/console/api/node?path=/secret", &[]);
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("NOAUTH"), "{}", refused.body);
    let refused = get(admin, "/console/api/node?path=/secret", &[BOB]);
    assert_eq!(refused.status, 403, "{}", refused.body);
    let secret = json(admin, "/console/api/node?path=/secret", &[ALICE]);
    assert_eq!(data_of(&secret), b"hidden");
    let missing = get(admin, "/console/api/node?path=/nope", &[]);
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert!(missing.body.contains("NONODE"), "{}", missing.body);

    // Search by prefix: c1, c10..c19 and c100..c149 (61), sorted, capped by the limit.
    let found = json(admin, "/console/api/search?prefix=/app/c1&limit=100", &[]);
    let paths = found["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 50, "{found}");
    assert_eq!(paths[0], "/app/c100");
    assert_eq!(found["complete"], true);
    let found = json(admin, "/console/api/search?prefix=/app/c0&limit=5", &[]);
    assert_eq!(found["paths"].as_array().unwrap().len(), 5);
    assert_eq!(found["complete"], false, "{found}");
    let found = json(admin, "/console/api/search?prefix=/app/c000/", &[]);
    assert_eq!(found["paths"], serde_json::json!(["/app/c000/eph"]));

    // Biggest subtrees: /app's 152 znodes first.
    let biggest = json(admin, "/console/api/biggest?path=/&limit=3", &[]);
    assert_eq!(biggest["by_nodes"][0]["path"], "/app");
    assert_eq!(biggest["by_nodes"][0]["nodes"], 152);
    assert_eq!(biggest["by_bytes"][0]["path"], "/app");
    assert_eq!(biggest["by_nodes"].as_array().unwrap().len(), 3);
    assert_eq!(biggest["complete"], true);

    // Sessions: the client's, its ephemeral and its watch.
    let sessions = json(admin, "/console/api/sessions", &[]);
    let ours = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == session.as_str())
        .unwrap_or_else(|| panic!("{session} in {sessions}"));
    assert_eq!(
        ours["ephemerals"]["paths"],
        serde_json::json!(["/app/c000/eph"])
    );
    assert_eq!(ours["watches"]["paths"], serde_json::json!(["/app/c001"]));
    assert_eq!(ours["timeout_ms"], 10_000);
    assert!(ours["connection"]["peer"].is_string(), "{ours}");

    // The cluster of one, and the live figures.
    let cluster = json(admin, "/console/api/cluster", &[]);
    assert_eq!(cluster["mode"], "standalone");
    assert_eq!(cluster["members"].as_array().unwrap().len(), 1);
    assert_eq!(cluster["zxid"], stat.mzxid + 153);
    let live = json(admin, "/console/api/live", &[]);
    assert!(live["packets_received"].as_u64().unwrap() >= 155, "{live}");
    assert!(live["writes"]["count"].as_u64().unwrap() >= 154, "{live}");
    assert!(live["resident_bytes"].as_u64().unwrap() > 1 << 20, "{live}");
    assert!(live["latency_count"].as_u64().unwrap() >= 154, "{live}");
    assert!(live["latency_total_us"].as_u64().unwrap() > 0, "{live}");
    assert_eq!(live["sessions"], 1);
    assert_eq!(
        (&live["mode"], &live["serving"]),
        (&"standalone".into(), &true.into())
    );

    // The page and its assets.
    let page = get(admin, "/console", &[]);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/console/console.js"), "{}", page.body);
    let js = get(admin, "/console/console.js", &[]);
    assert_eq!(
        js.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(get(admin, "/console/nothing.js", &[]).status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_answered_400_with_what_was_wrong() {
    let warden = Warden::start("");
    let admin = warden.admin_addr();
    for (path, says) in [
        ("/console/api/children?path=app", "not a valid path"),
        ("/console/api/children?path=/a/", "not a valid path"),
        ("/console/api/children?limit=0", "from 1 to 1000"),
        ("/console/api/children?limit=1001", "from 1 to 1000"),
        ("/console/api/children?limit=many", "from 1 to 1000"),
        (
            "/console/api/children?depth=3",
            "unknown parameter \\\"depth\\\"",
        ),
        ("/console/api/node", "missing parameter path"),
        (
            "/console/api/node?path=/&bytes=99999999",
            "from 1 to 1048576",
        ),
        (
            "/console/api/node?path=%ZZ",
            "not a well-formed query value",
        ),
        ("/console/api/search", "missing parameter prefix"),
        ("/console/api/search?prefix=app", "starts with /"),
        ("/console/api/search?prefix=/a//b", "is not a path"),
        ("/console/api/biggest?limit=101", "from 1 to 100"),
        ("/console/api/sessions?limit=-1", "from 1 to 1000"),
    ] {
        let reply = get(admin, path, &[]);
        assert_eq!(reply.status, 400, "{path}: {}", reply.body);
        assert!(reply.body.contains(says), "{path}: {}", reply.body);
    }
    for (path, says) in [
        ("/console/api/create?path=/x&version=1", "unknown parameter"),
        ("/console/api/set?path=/x&version=-2", "expected -1"),
        (
            "/console/api/create?path=/x&sequential=maybe",
            "true or false",
        ),
        ("/console/api/delete?path=x", "not a valid path"),
    ] {
        let (status, body) = post(admin, path, &[BOB], b"");
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(says),
            "{path}: {body}"
        );
    }
    let (status, body) = post(admin, "/console/api/rename?path=/x", &[BOB], b"");
    assert_eq!(status, 404, "{body}");
    // Still serving.
    assert_eq!(warden.four_letter("ruok"), "imok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_need_digest_credentials_and_go_through_the_request_path() {
    let warden = Warden::start("");
    let admin = warden.admin_addr();
    let zk = client(&warden).await;

    // Without credentials, or with a header of another scheme: 401, nothing written.
    let (status, body) = post(admin, "/console/api/create?path=/made", &[], b"v1");
    assert_eq!(status, 401, "{body}");
    assert!(body["error"].as_str().unwrap().contains("digest"), "{body}");
    let basic = "Authorization: Basic Ym9iOmJvYnMtcGFzc3dvcmQ=";
    let (status, _) = post(admin, "/console/api/create?path=/made", &[basic], b"v1");
    assert_eq!(status, 401);
    assert_eq!(
        zk.check_stat("/made").await.unwrap(),
        None,
        "nothing was written"
    );
    let who = json(admin, "/console/api/whoami", &[]);
    assert_eq!(who["can_write"], false);
    let who = json(admin, "/console/api/whoami", &[BOB]);
    assert_eq!(who["can_write"], true);
    let bob = format!("digest:{}", warden_state::acl::digest("bob:bobs-password"));
    assert_eq!(who["ids"], serde_json::json!(["ip:127.0.0.1", bob]));

    // With them: a create, as a client's, seen by the client.
    let (status, created) = post(admin, "/console/api/create?path=/made", &[BOB], b"v1");
    assert_eq!(status, 200, "{created}");
    let (data, stat) = zk.get_data("/made").await.unwrap();
    assert_eq!(data, b"v1");
    assert_eq!(created["zxid"], stat.czxid);
    assert_eq!(created["stat"]["version"], 0);
    let (status, seq) = post(
        admin,
        "/console/api/create?path=/made/s-&sequential=true",
        &[BOB],
        b"",
    );
    assert_eq!(status, 200, "{seq}");
    assert_eq!(seq["path"], "/made/s-0000000000");

    // ZooKeeper's answers, with their codes.
    let (status, body) = post(admin, "/console/api/create?path=/made", &[BOB], b"");
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("NODEEXISTS (-110)"),
        "{body}"
    );
    let (status, body) = post(
        admin,
        "/console/api/set?path=/made&version=7",
        &[BOB],
        b"v2",
    );
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("BADVERSION (-103)"),
        "{body}"
    );
    let (status, body) = post(admin, "/console/api/create?path=/no/parent", &[BOB], b"");
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().starts_with("NONODE (-101)"),
        "{body}"
    );
    let (status, body) = post(admin, "/console/api/delete?path=/made", &[BOB], b"");
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("NOTEMPTY (-111)"),
        "{body}"
    );

    // A set, seen by the client with its new version.
    // Data as large as a request may carry (jute.maxbuffer, 1 MiB from a zoo.cfg), not more.
    let big = vec![b'x'; 1000 << 10];
    let (status, body) = post(admin, "/console/api/create?path=/big", &[BOB], &big);
    assert_eq!(status, 200, "{body}");
    assert_eq!(zk.get_data("/big").await.unwrap().0.len(), big.len());
    for bytes in [1040 << 10, 3 << 20] {
        let (status, body) = post(
            admin,
            "/console/api/create?path=/bigger",
            &[BOB],
            &vec![b'x'; bytes],
        );
        assert_eq!(status, 413, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("more than a request may carry"),
            "{body}"
        );
    }
    let (status, set) = post(
        admin,
        "/console/api/set?path=/made&version=0",
        &[BOB],
        b"v2",
    );
    assert_eq!(status, 200, "{set}");
    let (data, stat) = zk.get_data("/made").await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (b"v2".as_slice(), 1));

    // The node's ACL is checked for the operator's digest when the write is applied.
    let alice_only = [
        digest_acl("alice:alices-password", Permission::ALL),
        Acl::new(Permission::READ, AuthId::new("world", "anyone")),
    ];
    zk.create(
        "/alices",
        b"a",
        &CreateMode::Persistent.with_acls(Acls::new(&alice_only)),
    )
    .await
    .unwrap();
    let (status, body) = post(admin, "/console/api/set?path=/alices", &[BOB], b"b");
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().starts_with("NOAUTH (-102)"),
        "{body}"
    );
    let (status, body) = post(admin, "/console/api/set?path=/alices", &[ALICE], b"b");
    assert_eq!(status, 200, "{body}");
    assert_eq!(zk.get_data("/alices").await.unwrap().0, b"b");

    // Deletes, seen by the client.
    let (status, _) = post(
        admin,
        "/console/api/delete?path=/made/s-0000000000",
        &[BOB],
        b"",
    );
    assert_eq!(status, 200);
    let (status, _) = post(
        admin,
        "/console/api/delete?path=/made&version=1",
        &[BOB],
        b"",
    );
    assert_eq!(status, 200);
    assert_eq!(zk.check_stat("/made").await.unwrap(), None);

    // Each write was a session of its own, closed once answered: only the client's is left.
    let sessions = json(admin, "/console/api/sessions", &[]);
    assert_eq!(sessions["total"], 1, "{sessions}");
}

/// A write made on a follower's console is forwarded to the leader like a client's; the
/// leader's console knows each member's place in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_a_followers_console_reaches_the_leader() {
    let mut cluster = Cluster::start(System::Warden, 3, 0, "");
    let leader = cluster.wait_for_leader(Duration::from_secs(30));
    let follower = cluster.followers_of(leader)[0];
    let admin_ports: Vec<u16> = cluster.members.iter().map(|m| m.admin_port).collect();
    let admin_of = |i: usize| SocketAddr::from(([127, 0, 0, 1], admin_ports[i]));

    let (status, body) = post(
        admin_of(follower),
        "/console/api/create?path=/from-follower",
        &[BOB],
        b"hello",
    );
    assert_eq!(status, 200, "{body}");
    let zk = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&cluster.member_connect_string(leader))
        .await
        .unwrap();
    zk.sync("/").await.unwrap();
    assert_eq!(zk.get_data("/from-follower").await.unwrap().0, b"hello");

    let on_leader = json(admin_of(leader), "/console/api/cluster", &[]);
    assert_eq!(on_leader["mode"], "leader");
    assert_eq!(on_leader["leader_view"], true);
    let members = on_leader["members"].as_array().unwrap();
    assert_eq!(members.len(), 3, "{on_leader}");
    assert_eq!(
        members.iter().filter(|m| m["role"] == "follower").count(),
        2,
        "{on_leader}"
    );
    for m in members {
        assert!(m["matched_index"].as_u64().unwrap() > 0, "{m}");
        assert!(m["lag_entries"].is_u64(), "{m}");
        assert!(m["client_address"].is_string(), "{m}");
    }
    let on_follower = json(admin_of(follower), "/console/api/cluster", &[]);
    assert_eq!(on_follower["mode"], "follower");
    assert_eq!(on_follower["leader_view"], false);
    assert_eq!(on_follower["leader"], cluster.members[leader].id as u64);
    let node = json(
        admin_of(follower),
        "/console/api/node?path=/from-follower",
        &[],
    );
    assert_eq!(data_of(&node), b"hello");

    // Without a quorum the follower still shows its own view, says it does not serve, and a
    // write made on its console is ZooKeeper's ConnectionLoss, as a client's would be.
    let other = cluster.followers_of(leader)[1];
    drop(zk);
    cluster.kill9(leader);
    cluster.kill9(other);
    let deadline = Instant::now() + Duration::from_secs(20);
    while json(admin_of(follower), "/console/api/cluster", &[])["serving"] != false {
        assert!(Instant::now() < deadline, "the follower still serves alone");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, body) = post(
        admin_of(follower),
        "/console/api/create?path=/lost",
        &[BOB],
        b"",
    );
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("CONNECTIONLOSS (-4)"),
        "{body}"
    );
    let node = json(
        admin_of(follower),
        "/console/api/node?path=/from-follower",
        &[],
    );
    assert_eq!(data_of(&node), b"hello");
}

/// How long a headless Chromium may take to load and render the console.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);
const SCREEN: (u32, u32) = (1280, 900);

/// Installs Debian's chromium and chromium-driver if they are missing
/// (scripts/console/install-chromium.sh), once for the tests of this process: two apt-gets at
/// once would fight over apt's locks.
fn install_chromium() {
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        let install = Command::new(repo_root().join("scripts/console/install-chromium.sh"))
            .output()
            .expect("running install-chromium.sh");
        assert!(
            install.status.success(),
            "chromium could not be installed (needs root and a Debian mirror):\n{}",
            String::from_utf8_lossy(&install.stderr)
        );
    });
}

/// Runs headless Chromium on `url` with `args`, killed by pid if it outlives
/// [`BROWSER_TIMEOUT`]; returns its standard output.
fn chromium(profile: &Path, args: &[&str], url: &str) -> String {
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            // Chromium runs virtual time until the page's fetches are answered and drawn.
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting chromium");
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().expect("the reader thread")
}

/// The console rendered by a real browser against a real server: the JavaScript fetched the
/// tree and drew it (the DOM holds the node names and the data, pretty-printed), and the
/// screenshot is a page of the size asked, not a blank one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_renders_in_headless_chromium() {
    install_chromium();
    let warden = Warden::start("");
    let zk = client(&warden).await;
    zk.create("/shop", br#"{"owner":"ops","shards":4}"#, &persistent())
        .await
        .unwrap();
    for name in ["orders", "payments", "stock"] {
        zk.create(&format!("/shop/{name}"), b"", &persistent())
            .await
            .unwrap();
    }
    let url = format!("http://{}/console#/shop", warden.admin_addr());
    let profile = tempfile::tempdir().unwrap();

    let dom = chromium(profile.path(), &["--dump-dom"], &url);
    for name in ["orders", "payments", "stock"] {
        assert!(
            dom.contains(&format!("data-path=\"/shop/{name}\">{name}</a>")),
            "{name} is not listed:\n{dom}"
        );
    }
    assert!(dom.contains("3 children"), "{dom}");
    // The data, shown as pretty JSON.
    assert!(
        dom.contains("{\n  \"owner\": \"ops\",\n  \"shards\": 4\n}"),
        "{dom}"
    );
    assert!(dom.contains("<td>world:anyone</td><td>cdrwa</td>"), "{dom}");

    let shot = profile.path().join("console.png");
    chromium(
        profile.path(),
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size={},{}", SCREEN.0, SCREEN.1),
        ],
        &url,
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("chromium wrote the screenshot"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a size")];
    let frame = reader.next_frame(&mut pixels).expect("the PNG decodes");
    assert_eq!((frame.width, frame.height), SCREEN);
    let channels = frame.color_type.samples();
    let pixels = &pixels[..frame.buffer_size()];
    let mut colours: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    // The header bar's dark blue (#1d3557) across the top rows.
    let header = &pixels[(5 * frame.width as usize + frame.width as usize - 20) * channels..][..3];
    assert_eq!(header, [0x1d, 0x35, 0x57], "the header bar is drawn");
    let mut background = 0usize;
    for pixel in pixels.chunks(channels) {
        colours.insert(&pixel[..3]);
        if pixel[..3] == [0xf4, 0xf6, 0xf9] {
            background += 1;
        }
    }
    let total = (frame.width * frame.height) as usize;
    assert!(colours.len() > 50, "only {} colours: blank?", colours.len());
    assert!(
        background < total * 9 / 10,
        "{background} of {total} pixels are the page's background"
    );
    // Keep the screenshot where a failing run can be looked at.
    let kept = std::env::temp_dir().join("warden-console.png");
    let _ = std::fs::copy(&shot, &kept);
    let _ = std::io::stderr().write_all(format!("screenshot: {}\n", kept.display()).as_bytes());
}

/// A WebDriver session of chromium-driver's, driving headless Chromium: just the commands the
/// test needs, over plain HTTP. Dropping it ends the browser and kills the driver by pid.
struct Browser {
    driver: std::process::Child,
    addr: SocketAddr,
    session: String,
    _profile: tempfile::TempDir,
}

/// The key W3C WebDriver names an element reference with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    fn start() -> Browser {
        install_chromium();
        let port = support::servers::free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Browser {
            driver,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            session: String::new(),
            _profile: profile,
        };
        let deadline = Instant::now() + BROWSER_TIMEOUT;
        while TcpStream::connect(browser.addr).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let capabilities = serde_json::json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--hide-scrollbars",
                    format!("--window-size={},{}", SCREEN.0, SCREEN.1),
                    format!("--user-data-dir={}", browser._profile.path().display()),
                ],
            },
        }}});
        let created = browser.command("POST", "/session", capabilities);
        browser.session = created["sessionId"].as_str().expect("a session").to_owned();
        browser
    }

    /// A WebDriver command; its `value`.
    fn command(&self, method: &str, path: &str, body: Value) -> Value {
        let path = if path.starts_with("/session/") || path == "/session" {
            path.to_owned()
        } else {
            format!("/session/{}{path}", self.session)
        };
        let body = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let (status, reply) = exchange(self.addr, method, &path, &body);
        let value: Value = serde_json::from_str(&reply).expect("JSON from chromedriver");
        assert_eq!(status, 200, "{method} {path}: {value}");
        value["value"].clone()
    }

    fn open(&self, url: &str) {
        self.command("POST", "/url", serde_json::json!({ "url": url }));
    }

    fn element(&self, css: &str) -> String {
        let found = self.command(
            "POST",
            "/element",
            serde_json::json!({"using": "css selector", "value": css}),
        );
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("{css}: {found}"))
            .to_owned()
    }

    fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.command(
            "POST",
            &format!("/element/{id}/value"),
            serde_json::json!({ "text": text }),
        );
    }

    fn click(&self, css: &str) {
        let id = self.element(css);
        self.command(
            "POST",
            &format!("/element/{id}/click"),
            serde_json::json!({}),
        );
    }

    /// Runs `script` (a function body) in the page; its return value.
    fn script(&self, script: &str) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            serde_json::json!({ "script": script, "args": [] }),
        )
    }

    /// Waits until `script` returns true, at most ten seconds.
    fn wait_for(&self, what: &str, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.script(script) != Value::Bool(true) {
            assert!(Instant::now() < deadline, "waited in vain for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn text(&self, css: &str) -> String {
        let id = self.element(css);
        self.command("GET", &format!("/element/{id}/text"), Value::Null)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The window as a decoded PNG: width, height, channels per pixel, pixels.
    fn screenshot(&self) -> (u32, u32, usize, Vec<u8>) {
        let png = self.command("GET", "/screenshot", Value::Null);
        let png = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64"))
            .unwrap();
        let mut reader = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .expect("a PNG");
        let mut pixels = vec![0; reader.output_buffer_size().expect("a size")];
        let frame = reader.next_frame(&mut pixels).expect("the PNG decodes");
        pixels.truncate(frame.buffer_size());
        (
            frame.width,
            frame.height,
            frame.color_type.samples(),
            pixels,
        )
    }
}

/// One HTTP request to chromedriver, which keeps connections open whatever the client asks:
/// the reply is read up to its Content-Length. Returns the status and the body.
fn exchange(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connecting to chromedriver");
    s.set_read_timeout(Some(BROWSER_TIMEOUT)).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut reader = BufReader::new(s);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("a status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status");
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().expect("a length");
        }
    }
    let mut reply = vec![0; length];
    reader.read_exact(&mut reply).expect("the body");
    (status, String::from_utf8(reply).expect("UTF-8"))
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = exchange(self.addr, "DELETE", &path, b"");
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// An operator signs in and creates a node with the page's form, in a browser driven through
/// chromium-driver; a client sees the node. The live tab draws its charts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_created_in_the_browser_is_seen_by_a_client() {
    let warden = Warden::start("");
    let zk = client(&warden).await;
    zk.create("/shop", b"", &persistent()).await.unwrap();
    let browser = Browser::start();
    browser.open(&format!("http://{}/console#/shop", warden.admin_addr()));
    browser.wait_for(
        "the children of /shop",
        "return document.getElementById('children-summary').textContent === '0 children'",
    );
    assert_eq!(
        browser.script("return document.getElementById('writes').hidden"),
        true,
        "read-only before signing in"
    );

    browser.type_into("#login-user", "bob");
    browser.type_into("#login-password", "bobs-password");
    browser.click("#login button");
    browser.wait_for(
        "the write forms",
        "return !document.getElementById('writes').hidden",
    );
    browser.type_into("#create-name", "from-browser");
    browser.type_into("#create-data", "made in chromium");
    browser.click("#write-create button");
    browser.wait_for(
        "the create's answer",
        "return document.getElementById('write-result').textContent !== ''",
    );
    let result = browser.text("#write-result");
    assert!(result.contains("/shop/from-browser: done"), "{result}");
    assert_eq!(
        zk.get_data("/shop/from-browser").await.unwrap().0,
        b"made in chromium"
    );
    browser.wait_for(
        "the new child listed",
        "return document.querySelector('[data-path=\"/shop/from-browser\"]') !== null",
    );

    // The live tab: three charts drawn from the figures polled every second.
    browser.click("#tabs button[data-tab=live]");
    browser.wait_for(
        "three polls",
        "return document.getElementById('live-memory').textContent.includes('MiB resident') \
         && !document.getElementById('chart-memory').closest('section').hidden",
    );
    std::thread::sleep(Duration::from_millis(2500));
    let (width, height, channels, pixels) = browser.screenshot();
    // The viewport: the window less what headless Chromium keeps of its frame.
    assert_eq!(width, SCREEN.0);
    assert!(height > SCREEN.1 / 2, "{height}");
    // The memory chart's line (#2a9d8f) is drawn, and nowhere else on the page has its colour.
    let line = pixels
        .chunks(channels)
        .filter(|p| p[..3] == [0x2a, 0x9d, 0x8f])
        .count();
    // A second of the two minutes shown is about 7 pixels wide: a few seconds of line.
    assert!(line > 10, "{line} pixels of the memory chart's line");
    std::fs::write(
        std::env::temp_dir().join("warden-console-live.png"),
        base64::engine::general_purpose::STANDARD
            .decode(
                browser
                    .command("GET", "/screenshot", Value::Null)
                    .as_str()
                    .unwrap(),
            )
            .unwrap(),
    )
    .unwrap();
}
