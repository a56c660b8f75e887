//! `warden bench` against a real Apache ZooKeeper 3.9.5 on loopback: every named workload and a
//! workload file run for a few seconds, finish without a single error code, and print JSON with
//! the fields the comparison script reads.
//!
//! ZooKeeper comes from `scripts/zookeeper/install.sh` (Maven Central; needs java and mvn). If it
//! cannot be installed or started, the test fails: it never skips.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

/// How long ZooKeeper may take to answer `srvr` after it starts.
const ZOOKEEPER_START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long one `warden bench` run may take before the test kills it.
const BENCH_TIMEOUT: Duration = Duration::from_secs(90);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// A ZooKeeper server of its own for this test, killed (by pid) and its files removed when
/// dropped, however the test ends.
struct ZooKeeper {
    process: Child,
    dir: PathBuf,
    port: u16,
}

impl ZooKeeper {
    fn start() -> ZooKeeper {
        let root = repo_root();
        let install = Command::new(root.join("scripts/zookeeper/install.sh"))
            .output()
            .expect("running install.sh");
        assert!(
            install.status.success(),
            "ZooKeeper 3.9.5 could not be installed (needs java and mvn, and Maven Central):\n{}",
            String::from_utf8_lossy(&install.stderr)
        );
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("warden-bench-test-{}-{nanos}", std::process::id()));
        fs::create_dir_all(dir.join("data")).unwrap();
        let port = free_port();
        let config = format!(
            "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             forceSync=yes\nadmin.enableServer=false\n",
            dir.join("data").display()
        );
        fs::write(dir.join("zoo.cfg"), config).unwrap();
        let log = fs::File::create(dir.join("zookeeper.log")).unwrap();
        // run.sh execs java, so the child's pid is ZooKeeper's own.
        let process = Command::new(root.join("scripts/zookeeper/run.sh"))
            .arg(dir.join("zoo.cfg"))
            .env("ZK_HEAP", "512m")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting scripts/zookeeper/run.sh");
        let mut zookeeper = ZooKeeper { process, dir, port };
        zookeeper.wait_until_serving();
        zookeeper
    }

    fn pid(&self) -> u32 {
        self.process.id()
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn wait_until_serving(&mut self) {
        let deadline = Instant::now() + ZOOKEEPER_START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.process.try_wait().unwrap() {
                panic!("ZooKeeper exited at start ({status}):\n{}", self.log_tail());
            }
            if srvr(self.port).is_some_and(|answer| answer.contains("Mode: standalone")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "ZooKeeper did not serve within {ZOOKEEPER_START_TIMEOUT:?}:\n{}",
            self.log_tail()
        );
    }

    fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.dir.join("zookeeper.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

/// ZooKeeper's `srvr` four-letter word (whitelisted by default), or `None` if nothing answers.
fn srvr(port: u16) -> Option<String> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"srvr").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// Runs `warden bench` with `args` plus the server and `--json`; kills it if it overruns.
fn bench(zookeeper: &ZooKeeper, args: &[&str]) -> Value {
    let address = zookeeper.address();
    let pid = zookeeper.pid().to_string();
    let common = [
        "--servers",
        &address,
        "--pid",
        &pid,
        "--json",
        "--progress",
        "0",
        "--time-limit",
        "60",
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("bench")
        .args(common)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting warden bench");
    let deadline = Instant::now() + BENCH_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("warden bench {args:?} ran past {BENCH_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&stderr);
    assert!(
        status.success(),
        "warden bench {args:?} failed ({status}):\n{stderr}\nZooKeeper:\n{}",
        zookeeper.log_tail()
    );
    serde_json::from_slice(&stdout).unwrap_or_else(|e| {
        panic!(
            "warden bench {args:?} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&stdout)
        )
    })
}

/// What every report must show: requests answered, no error code at all, figures that hang
/// together, and the server's CPU and memory sampled.
fn assert_clean_report(report: &Value, workload: &str, ops: &[&str], zookeeper_pid: u32) {
    let context = format!("workload {workload}: {report:#}");
    assert_eq!(report["workload"], workload, "{context}");
    assert!(report["ok"].as_u64().unwrap() > 0, "{context}");
    assert_eq!(report["errors"], 0, "{context}");
    assert_eq!(report["errors_by_code"], serde_json::json!({}), "{context}");
    assert_eq!(
        report["sessions_ended_early"],
        serde_json::json!([]),
        "{context}"
    );
    assert!(report["throughput"].as_f64().unwrap() > 0.0, "{context}");
    assert!(
        report["measured_seconds"].as_f64().unwrap() > 0.0,
        "{context}"
    );
    for op in ops {
        let row = &report["by_op"][op];
        assert!(
            row["ok"].as_u64().is_some_and(|ok| ok > 0),
            "no {op} answered; {context}"
        );
        let latency = &row["latency_us"];
        let [p50, p90, p99, p999, max] =
            ["p50", "p90", "p99", "p999", "max"].map(|p| latency[p].as_u64().unwrap());
        assert!(
            0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max,
            "{op}: {latency}; {context}"
        );
        assert!(latency["avg"].as_f64().unwrap() > 0.0, "{context}");
    }
    let by_op: Vec<&String> = report["by_op"].as_object().unwrap().keys().collect();
    assert_eq!(
        by_op.len(),
        ops.len(),
        "unexpected kinds of request {by_op:?}; {context}"
    );
    let usage = &report["servers_usage"][0];
    assert_eq!(usage["pid"], zookeeper_pid, "{context}");
    assert_eq!(usage["command"], "java", "{context}");
    assert!(usage["cpu_seconds"].as_f64().unwrap() > 0.0, "{context}");
    assert!(
        usage["rss_bytes_peak"].as_u64().unwrap() >= usage["rss_bytes_start"].as_u64().unwrap(),
        "{context}"
    );
    assert!(
        report["ops_per_server_cpu_second"].as_f64().unwrap() > 0.0,
        "{context}"
    );
}

#[test]
fn every_workload_runs_clean_against_zookeeper() {
    let zookeeper = ZooKeeper::start();
    let pid = zookeeper.pid();
    let timed = ["--sessions", "4", "--duration", "2", "--warmup", "1"];

    let cases: [(&str, &[&str]); 4] = [
        ("create", &["create"]),
        ("mixed", &["create", "delete", "set", "get", "list"]),
        (
            "clickhouse",
            &["create", "set", "get", "exists", "list", "multi"],
        ),
        ("read", &["get", "list"]),
    ];
    for (workload, ops) in cases {
        let report = bench(
            &zookeeper,
            &[&["--workload", workload][..], &timed].concat(),
        );
        assert_clean_report(&report, workload, ops, pid);
        assert_eq!(report["stopped_by"], "duration");
        assert_eq!(report["sessions"], 4);
    }

    let load = bench(
        &zookeeper,
        &[
            "--workload",
            "load",
            "--nodes",
            "5000",
            "--parents",
            "50",
            "--sessions",
            "4",
        ],
    );
    assert_clean_report(&load, "load", &["create"], pid);
    assert_eq!(
        (load["ok"].as_u64(), load["stopped_by"].as_str()),
        (Some(5000), Some("load_complete"))
    );
    assert_eq!(load["pipeline"], 64);

    // A workload of one's own, counted by requests rather than time.
    let file = zookeeper.dir.join("mine.toml");
    fs::write(
        &file,
        "delete_stock = 20\n[shared]\nparents = 2\nchildren = 5\nvalue_bytes = 10\n\
         [[op]]\nkind = \"multi\"\nweight = 1\nsize = { min = 2, max = 4 }\nmix = { create = 1, delete = 1, check = 1 }\n\
         [[op]]\nkind = \"exists\"\nweight = 1\ntarget = \"own\"\nwatch_probability = 1.0\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let mine = bench(
        &zookeeper,
        &[
            "--workload",
            file,
            "--requests",
            "400",
            "--sessions",
            "2",
            "--pipeline",
            "4",
        ],
    );
    assert_clean_report(&mine, "mine", &["exists", "multi"], pid);
    assert_eq!(
        (mine["ok"].as_u64(), mine["stopped_by"].as_str()),
        (Some(400), Some("requests"))
    );
}
