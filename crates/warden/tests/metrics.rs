//! `GET /metrics` of real `warden server` processes, read as Prometheus reads it: the text
//! format is well formed, ZooKeeper's families have ZooKeeper 3.9.5's types (as captured from
//! its PrometheusMetricsProvider, golden/prometheus), and every expression of Grafana dashboard
//! 10465 "ZooKeeper by Prometheus" that applies to Warden finds series. The families it uses
//! that Warden does not serve are listed below with the reason, as in docs/metrics.md.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::cluster::{Cluster, System};
use support::http;
use support::servers::free_port;
use support::warden::{Warden, client, ephemeral, persistent};

const PROMETHEUS: &str =
    "metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";

/// The dashboard's JVM panels: the JVM's own families, which a Rust process has no
/// equivalent of (its memory, CPU and descriptors are in process_*).
const JVM_ONLY: &[&str] = &[
    "jvm_classes_loaded",
    "jvm_gc_collection_seconds_sum",
    "jvm_memory_pool_bytes_used",
    // ZooKeeper's JvmPauseMonitor: stop-the-world GC pauses.
    "jvm_pause_time_ms_sum",
    "jvm_threads_current",
    "jvm_threads_deadlocked",
    "jvm_threads_state",
];

/// ZooKeeper families the dashboard uses that Warden leaves out: it has no such figure, and a
/// constant would pretend to be a measurement (docs/metrics.md, "Left out").
const NOT_IN_WARDEN: &[(&str, &str)] = &[
    // ZooKeeper's request processor chain (Prep, Sync, Commit, Final processors, the
    // per-session queues of the CommitProcessor, the observer master): Warden has no such
    // stages. A write is proposed to Raft, committed and applied by the replica's owner.
    ("close_session_prep_time_sum", "request processor chain"),
    (
        "commit_commit_proc_req_queued_sum",
        "request processor chain",
    ),
    ("commit_process_time_sum", "request processor chain"),
    (
        "concurrent_request_processing_in_commit_processor_sum",
        "request processor chain",
    ),
    (
        "local_write_committed_time_ms_sum",
        "request processor chain",
    ),
    ("om_commit_process_time_ms_sum", "observer master"),
    ("om_proposal_process_time_ms_sum", "observer master"),
    ("outstanding_changes_queued", "request processor chain"),
    ("outstanding_changes_removed", "request processor chain"),
    ("pending_session_queue_size_sum", "request processor chain"),
    ("prep_process_time_sum", "request processor chain"),
    ("prep_processor_queue_size_sum", "request processor chain"),
    (
        "prep_processor_queue_time_ms_sum",
        "request processor chain",
    ),
    ("prep_processor_request_queued", "request processor chain"),
    ("read_commit_proc_issued_sum", "request processor chain"),
    ("read_commit_proc_req_queued_sum", "request processor chain"),
    ("read_commitproc_time_ms_sum", "request processor chain"),
    ("read_final_proc_time_ms_sum", "request processor chain"),
    (
        "reads_after_write_in_session_queue_sum",
        "request processor chain",
    ),
    (
        "reads_issued_from_session_queue_sum",
        "request processor chain",
    ),
    ("request_commit_queued", "request processor chain"),
    ("requests_in_session_queue_sum", "request processor chain"),
    (
        "server_write_committed_time_ms_sum",
        "request processor chain",
    ),
    ("session_queues_drained_sum", "request processor chain"),
    ("sync_process_time_sum", "request processor chain"),
    ("sync_processor_batch_size_sum", "request processor chain"),
    (
        "sync_processor_queue_flush_time_ms_sum",
        "request processor chain",
    ),
    ("sync_processor_queue_size_sum", "request processor chain"),
    ("sync_processor_request_queued", "request processor chain"),
    (
        "time_waiting_empty_pool_in_commit_processor_read_ms_sum",
        "request processor chain",
    ),
    (
        "write_batch_time_in_commit_processor_sum",
        "request processor chain",
    ),
    ("write_commit_proc_issued_sum", "request processor chain"),
    (
        "write_commit_proc_req_queued_sum",
        "request processor chain",
    ),
    ("write_commitproc_time_ms_sum", "request processor chain"),
    ("write_final_proc_time_ms_sum", "request processor chain"),
    // Zab's proposal/ack/commit exchange with learner handler threads: Raft's
    // AppendEntries carries entries and the commit index instead.
    ("ack_latency_sum", "Zab"),
    ("commit_propagation_latency_sum", "Zab"),
    ("follower_sync_time_sum", "Zab"),
    ("learner_commit_received_count", "Zab"),
    ("learner_handler_qp_size_sum", "Zab"),
    ("propagation_latency_sum", "Zab"),
    ("proposal_ack_creation_latency", "Zab"),
    ("proposal_latency_sum", "Zab"),
    ("quorum_ack_latency_sum", "Zab"),
    ("quit_leading_due_to_disloyal_voter", "Zab"),
    ("diff_count", "Zab learner sync"),
    ("snap_count", "Zab learner sync"),
    // Connections that never sent a handshake, expired by ZooKeeper's session tracker:
    // Warden times the handshake out on the connection and does not count it.
    ("sessionless_connections_expired", "not measured yet"),
    // Mechanisms Warden does not have.
    ("response_packet_cache_hits", "no response cache"),
    ("response_packet_cache_misses", "no response cache"),
    (
        "response_packet_get_children_cache_hits",
        "no response cache",
    ),
    (
        "response_packet_get_children_cache_misses",
        "no response cache",
    ),
    (
        "add_dead_watcher_stall_time",
        "watches of closed sessions go at once",
    ),
    (
        "dead_watchers_cleared",
        "watches of closed sessions go at once",
    ),
    (
        "dead_watchers_queued",
        "watches of closed sessions go at once",
    ),
    (
        "dead_watchers_cleaner_latency_sum",
        "watches of closed sessions go at once",
    ),
    ("connection_drop_count", "no connection throttle"),
    ("connection_drop_probability", "no connection throttle"),
    ("connection_token_deficit_sum", "no connection throttle"),
    ("ensemble_auth_fail", "no quorum SASL"),
    ("ensemble_auth_skip", "no quorum SASL"),
    ("ensemble_auth_success", "no quorum SASL"),
    ("outstanding_tls_handshake", "no TLS"),
    ("tls_handshake_exceeded", "no TLS"),
    ("digest_mismatches_count", "no tree digest"),
    (
        "unrecoverable_error_count",
        "an unrecoverable error stops the server",
    ),
];

/// Registered by ZooKeeper only on a quorum member, and those only on its leader.
const QUORUM_ONLY: &[&str] = &["quorum_size"];
const LEADER_ONLY: &[&str] = &[
    "leader_uptime",
    "learners",
    "synced_followers",
    "synced_non_voting_followers",
    "synced_observers",
    "pending_syncs",
    "last_proposal_size",
    "min_proposal_size",
    "max_proposal_size",
];

/// One scrape, parsed.
#[derive(Debug)]
struct Scrape {
    /// Family name to its type.
    types: BTreeMap<String, String>,
    /// Sample name with its labels as written, to its value.
    samples: Vec<(String, String, f64)>,
}

impl Scrape {
    fn has_series(&self, name: &str) -> bool {
        self.samples.iter().any(|(n, ..)| n == name)
    }

    fn value(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .find(|(n, labels, _)| n == name && labels.is_empty())
            .unwrap_or_else(|| panic!("no sample {name}"))
            .2
    }
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The sample names a family of `kind` may have.
fn belongs(sample: &str, family: &str, kind: &str) -> bool {
    let suffixes: &[&str] = match kind {
        "summary" => &["", "_count", "_sum"],
        "histogram" => &["_bucket", "_count", "_sum"],
        // prometheus-client writes OpenMetrics' counters: `# TYPE x counter`, `x_total`.
        "counter" => &["", "_total"],
        _ => &[""],
    };
    suffixes
        .iter()
        .any(|s| sample.strip_prefix(family) == Some(s))
}

/// Parses Prometheus' text format strictly: `# HELP` then `# TYPE` before a family's
/// samples, every sample in the family above it, each family once, values numbers.
fn parse(text: &str) -> Scrape {
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    let mut helped = BTreeSet::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(is_metric_name(name), "{line}");
            assert!(helped.insert(name.to_owned()), "a second HELP: {line}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect(line);
            assert!(helped.contains(name), "TYPE before HELP: {line}");
            assert!(
                ["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(
                types.insert(name.to_owned(), kind.to_owned()).is_none(),
                "a second TYPE: {line}"
            );
            current = Some((name.to_owned(), kind.to_owned()));
        } else {
            assert!(!line.starts_with('#') && !line.is_empty(), "{line:?}");
            let (series, value) = line.rsplit_once(' ').expect(line);
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => {
                    let labels = labels.strip_suffix('}').expect(line);
                    for pair in labels.split(',').filter(|p| !p.is_empty()) {
                        let (key, value) = pair.split_once('=').expect(line);
                        assert!(is_metric_name(key), "{line}");
                        assert!(value.starts_with('"') && value.ends_with('"'), "{line}");
                    }
                    (name, labels)
                }
                None => (series, ""),
            };
            let (family, kind) = current.as_ref().expect("a sample before any TYPE");
            assert!(belongs(name, family, kind), "{line} is not of {family}");
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("{line}: not a number")),
            };
            samples.push((name.to_owned(), labels.to_owned(), value));
        }
    }
    Scrape { types, samples }
}

fn scrape(addr: SocketAddr) -> Scrape {
    let reply = http::get(addr, "/metrics", &[]).expect("GET /metrics");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    parse(&reply.body)
}

fn golden(name: &str) -> String {
    let path = format!(
        "{}/tests/golden/prometheus/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The metric names in every PromQL expression of the dashboard's panels.
fn dashboard_metric_names() -> BTreeSet<String> {
    let dashboard: serde_json::Value =
        serde_json::from_str(&golden("grafana-10465-canonical-copy.json")).unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dashboard["panels"], &mut exprs);
    assert!(exprs.len() > 100, "{} expressions", exprs.len());
    exprs.iter().flat_map(|e| metric_names(e)).collect()
}

fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match value {
                    serde_json::Value::String(expr) if key == "expr" => out.push(expr.clone()),
                    _ => collect_exprs(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| collect_exprs(i, out)),
        _ => {}
    }
}

/// The selectors of a PromQL expression: identifiers that are not functions (followed by
/// `(`), not inside `{...}` matchers or `[...]` ranges, and not PromQL keywords.
fn metric_names(expr: &str) -> Vec<String> {
    const KEYWORDS: &[&str] = &["by", "without", "on", "ignoring", "bool", "and", "or"];
    let mut plain = String::new();
    let mut depth = 0;
    for c in expr.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let mut names = Vec::new();
    let mut rest = plain.as_str();
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        let word = &tail[..end];
        let called = tail[end..].trim_start().starts_with('(');
        let number = rest[..start].ends_with(|c: char| c.is_ascii_digit());
        if !called && !number && !KEYWORDS.contains(&word) {
            names.push(word.to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// ZooKeeper 3.9.5's families and types, from its capture.
fn zookeeper_types() -> BTreeMap<String, String> {
    let capture = golden("zk395-prometheus-metrics.txt");
    let body = capture.split_once("\r\n\r\n").expect("head and body").1;
    parse(body).types
}

async fn workload(warden: &Warden) {
    let zk = client(warden).await;
    zk.create("/app", b"", &persistent()).await.unwrap();
    zk.create("/app/eph", b"x", &ephemeral()).await.unwrap();
    let (_, _, changed) = zk.get_and_watch_data("/app").await.unwrap();
    let (_, created) = zk.check_and_watch_stat("/app/new").await.unwrap();
    zk.set_data("/app", b"data", None).await.unwrap();
    changed.changed().await;
    zk.create("/app/new", b"", &persistent()).await.unwrap();
    created.changed().await;
    // Past snapCount: at least one snapshot.
    for i in 0..30 {
        zk.create(&format!("/app/n{i}"), b"0123456789", &persistent())
            .await
            .unwrap();
        zk.get_data(&format!("/app/n{i}")).await.unwrap();
    }
    std::mem::forget(zk); // keeps the session and its ephemeral while the test scrapes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_expression_that_applies_finds_series() {
    let port = free_port();
    let warden = Warden::start(&format!(
        "{PROMETHEUS}\nmetricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={port}\n\
         snapCount=10"
    ));
    workload(&warden).await;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(20);
    let metrics = loop {
        let m = scrape(addr);
        if m.value("snapshottime_count") > 0.0 || Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // ZooKeeper's types wherever the names are ZooKeeper's.
    let zookeeper = zookeeper_types();
    for (name, kind) in &metrics.types {
        if let Some(theirs) = zookeeper.get(name) {
            assert_eq!(kind, theirs, "{name}");
        } else {
            assert!(
                name.starts_with("warden_") || LEADER_ONLY.contains(&name.as_str()),
                "{name} is neither ZooKeeper's nor Warden's"
            );
        }
    }

    let used = dashboard_metric_names();
    let role_dependent = |n: &str| QUORUM_ONLY.contains(&n) || LEADER_ONLY.contains(&n);
    for name in &used {
        let excluded =
            JVM_ONLY.contains(&name.as_str()) || NOT_IN_WARDEN.iter().any(|(n, _)| n == name);
        if excluded {
            assert!(!metrics.has_series(name), "{name} is listed as left out");
        } else if role_dependent(name) {
            assert!(!metrics.has_series(name), "{name} on a standalone server");
        } else {
            assert!(metrics.has_series(name), "no series for {name}");
        }
    }
    // Every listed name is one the dashboard uses: the lists cannot go stale.
    for name in JVM_ONLY.iter().chain(NOT_IN_WARDEN.iter().map(|(n, _)| n)) {
        assert!(used.contains(*name), "{name} is not in the dashboard");
    }

    // Real figures from the workload.
    assert!(metrics.value("znode_count") >= 34.0);
    assert!(metrics.value("ephemerals_count") >= 1.0);
    assert!(metrics.value("watch_count") >= 0.0);
    assert!(metrics.value("readlatency_count") >= 30.0);
    assert!(metrics.value("updatelatency_count") >= 33.0);
    assert!(metrics.value("commit_count") >= 33.0);
    assert!(metrics.value("fsynctime_count") >= 1.0);
    let app = |name: &str| {
        metrics
            .samples
            .iter()
            .find(|(n, labels, _)| n == name && labels == "key=\"app\",")
            .unwrap_or_else(|| panic!("no {name} for /app"))
            .2
    };
    assert!(app("write_per_namespace_count") >= 33.0);
    assert!(app("read_per_namespace_count") >= 31.0);
    assert!(metrics.value("snapshottime_count") >= 1.0);
    assert_eq!(metrics.value("dbinittime_count"), 1.0);
    assert_eq!(metrics.value("election_time_count"), 0.0);
    assert_eq!(metrics.value("looking_count"), 0.0);
    assert!(metrics.value("node_changed_watch_count_count") >= 1.0);
    assert!(metrics.value("node_created_watch_count_count") >= 1.0);
    assert!(metrics.value("bytes_received_count") > 0.0);
    assert!(metrics.value("connection_request_count") >= 1.0);
    // A reply is at least its header: xid, zxid, error code.
    assert!(metrics.value("min_client_response_size") >= 16.0);
    assert!(metrics.value("max_client_response_size") >= metrics.value("min_client_response_size"));
    assert!(metrics.value("open_file_descriptor_count") > 0.0);
    assert!(metrics.value("process_resident_memory_bytes") > 1e6);
    assert!(metrics.value("process_start_time_seconds") > 1.6e9);
    assert!(metrics.value("warden_raft_applied_index") >= 33.0);
    assert!(
        metrics.value("warden_raft_committed_index") >= metrics.value("warden_raft_applied_index")
    );
    assert!(metrics.value("warden_log_append_seconds_count") >= 33.0);
    assert!(metrics.value("warden_snapshots_written_total") >= 1.0);
    // Every write was appended and fsynced by the flush thread, which was busy meanwhile.
    assert!(metrics.value("warden_log_flush_writes_total") >= 33.0);
    assert!(metrics.value("warden_log_flush_busy_seconds_total") > 0.0);
    assert!(metrics.value("warden_log_flush_group_wait_seconds_total") >= 0.0);
    assert!(metrics.value("warden_snapshot_last_bytes") > 0.0);
    assert!(metrics.value("warden_znode_bytes_avg") > 0.0);
    // Each snapshot's copy of the state, and each entry's apply, held applies and reads for
    // a measured time; the longest is among them. (A snapshot being written has its copy.)
    assert!(
        metrics.value("warden_snapshot_copy_seconds_count")
            >= metrics.value("warden_snapshots_written_total")
    );
    assert!(metrics.value("warden_apply_seconds_count") >= 33.0);
    for held in ["warden_snapshot_copy", "warden_apply"] {
        let longest = metrics.value(&format!("{held}_longest_seconds"));
        assert!(longest > 0.0, "{held}");
        assert!(
            longest <= metrics.value(&format!("{held}_seconds_sum")),
            "{held}"
        );
    }

    // A restart loads a snapshot: the one the stop took (snapshots.on_exit).
    let mut warden = warden;
    warden.terminate();
    warden.restart();
    let restarted = scrape(addr);
    assert_eq!(restarted.value("startup_snap_load_time_count"), 1.0);
    assert_eq!(restarted.value("dbinittime_count"), 1.0);
    assert!(restarted.value("znode_count") >= 34.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_jvm_info_false_leaves_out_the_process_families() {
    let port = free_port();
    let _warden = Warden::start(&format!(
        "{PROMETHEUS}\nmetricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={port}\n\
         metricsProvider.exportJvmInfo=false"
    ));
    let metrics = scrape(SocketAddr::from(([127, 0, 0, 1], port)));
    assert!(metrics.has_series("znode_count"));
    assert!(!metrics.types.keys().any(|n| n.starts_with("process_")));
    let other = http::get(SocketAddr::from(([127, 0, 0, 1], port)), "/nothing", &[]).unwrap();
    assert_eq!(other.status, 404);
}

#[test]
fn a_named_metrics_port_that_is_taken_stops_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
             {PROMETHEUS}\nmetricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={port}\n",
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
        stderr.contains(&format!(
            "cannot serve Prometheus metrics on 127.0.0.1:{port}"
        )),
        "{stderr}"
    );
}

/// Warden's TOML: `[metrics]` with `listen` and `process`.
#[test]
fn warden_toml_metrics_section() {
    let dir = tempfile::tempdir().unwrap();
    let (client_port, metrics_port) = (free_port(), free_port());
    let cfg = dir.path().join("warden.toml");
    std::fs::write(
        &cfg,
        format!(
            "client_listen = \"127.0.0.1:{client_port}\"\ndata_dir = \"{}\"\n\n[admin]\n\
             enabled = false\n\n[metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n\
             process = false\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["server", "--config"])
        .arg(&cfg)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _kill = KillOnDrop(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], metrics_port));
    let deadline = Instant::now() + Duration::from_secs(60);
    while http::get(addr, "/metrics", &[]).is_err() {
        assert!(Instant::now() < deadline, "no metrics on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let metrics = scrape(addr);
    assert!(metrics.has_series("znode_count"));
    assert!(!metrics.has_series("process_resident_memory_bytes"));
}

/// Kills a child process by its own handle when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Three servers: every one is a quorum member and has seen an election; only the leader
/// serves the leader's families, as ZooKeeper registers them on its leader only.
#[test]
fn on_a_cluster_the_leader_alone_serves_the_leaders_families() {
    let mut cluster = Cluster::start(System::Warden, 3, 0, PROMETHEUS);
    let leader = cluster.wait_for_leader(Duration::from_secs(30));
    let addr = |i: usize| SocketAddr::from(([127, 0, 0, 1], cluster.members[i].metrics_port));
    // Followers count a leader as synced once it heard from them within a timeout.
    let deadline = Instant::now() + Duration::from_secs(20);
    let on_leader = loop {
        let m = scrape(addr(leader));
        if m.value("synced_followers") == 2.0 || Instant::now() > deadline {
            break m;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(on_leader.value("quorum_size"), 3.0);
    assert_eq!(on_leader.value("learners"), 2.0);
    assert_eq!(on_leader.value("synced_followers"), 2.0);
    assert_eq!(on_leader.value("synced_observers"), 0.0);
    assert!(on_leader.value("leader_uptime") > 0.0);
    for name in LEADER_ONLY {
        assert!(on_leader.has_series(name), "{name} on the leader");
    }
    // The leader's append requests to each follower (heartbeats at least), timed.
    let to = |m: &Scrape, name: &str, member: usize| {
        m.samples
            .iter()
            .find(|(n, l, _)| n == name && *l == format!("member=\"{member}\""))
            .map(|s| s.2)
    };
    for i in (0..3).filter(|&i| i != leader) {
        let id = cluster.members[i].id;
        let appends = to(&on_leader, "warden_replication_appends_total", id);
        assert!(appends >= Some(1.0), "appends to {id}: {appends:?}");
        let busy = to(&on_leader, "warden_replication_busy_seconds_total", id);
        assert!(busy > Some(0.0), "busy to {id}: {busy:?}");
        assert!(to(&on_leader, "warden_replication_entries_total", id).is_some());
    }
    for i in (0..3).filter(|&i| i != leader) {
        let m = scrape(addr(i));
        assert_eq!(m.value("quorum_size"), 3.0);
        for name in LEADER_ONLY {
            assert!(!m.has_series(name), "{name} on follower {i}");
        }
    }
    for i in 0..3 {
        let m = scrape(addr(i));
        assert!(m.value("election_time_count") >= 1.0, "server {i}");
        assert!(m.value("looking_count") >= 1.0, "server {i}");
        assert!(
            m.value("warden_raft_term") >= 1.0,
            "server {i}: {:?}",
            m.samples
        );
    }
}
