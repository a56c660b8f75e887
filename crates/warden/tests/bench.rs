//! `warden bench` against a real Apache ZooKeeper 3.9.5 on loopback: every named workload and a
//! workload file run for a few seconds through each driver (the independent client, and the
//! lean driver written on our own protocol code), finish without a single error code, make
//! exactly the znodes their acknowledged writes account for (counted through the independent
//! client), and print JSON with the fields the comparison script reads. Then the same, in
//! short, against a real `warden server`; and the fixed sequences (zk-smoketest's, watches at
//! scale) against both.
//!
//! ZooKeeper comes from `scripts/zookeeper/install.sh` (Maven Central; needs java and mvn). If it
//! cannot be installed or started, the test fails: it never skips.

mod support;

use std::fs;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::servers::{ServerProcess, spawn_zookeeper};
use support::warden::{Warden, output_within};

/// How long ZooKeeper may take to answer `srvr` after it starts.
const ZOOKEEPER_START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long one `warden bench` run may take before the test kills it.
const BENCH_TIMEOUT: Duration = Duration::from_secs(90);

/// A ZooKeeper 3.9.5 that fsyncs, as in production, once it serves.
fn zookeeper_serving() -> ServerProcess {
    let mut zookeeper = spawn_zookeeper(
        "tickTime=2000\ninitLimit=10\nsyncLimit=5\nforceSync=yes\nadmin.enableServer=false\n",
        "",
    );
    zookeeper
        .wait_until_serving(ZOOKEEPER_START_TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    zookeeper
}

/// Runs `warden bench` with `args` plus the server and `--json`; kills it if it overruns.
fn bench(zookeeper: &ServerProcess, args: &[&str]) -> Value {
    bench_on(&zookeeper.address(), zookeeper.pid(), args, || {
        zookeeper.log_tail(40)
    })
}

/// Runs `warden bench` against the server at `address` (process `pid`); `log` tells what the
/// server said when the run fails.
fn bench_on(address: &str, pid: u32, args: &[&str], log: impl Fn() -> String) -> Value {
    let pid = pid.to_string();
    let common = [
        "--servers",
        address,
        "--pid",
        &pid,
        "--json",
        "--progress",
        "0",
        "--time-limit",
        "60",
    ];
    let child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("bench")
        .args(common)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting warden bench");
    let Output {
        status,
        stdout,
        stderr,
    } = output_within(child, BENCH_TIMEOUT, &format!("warden bench {args:?}"));
    let stderr = String::from_utf8_lossy(&stderr);
    assert!(
        status.success(),
        "warden bench {args:?} failed ({status}):\n{stderr}\nThe server:\n{}",
        log()
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
fn assert_clean_report(report: &Value, workload: &str, ops: &[&str], server: (u32, &str)) {
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
    assert_eq!(usage["pid"], server.0, "{context}");
    assert_eq!(usage["command"], server.1, "{context}");
    assert!(usage["cpu_seconds"].as_f64().unwrap() > 0.0, "{context}");
    assert!(
        usage["rss_bytes_peak"].as_u64().unwrap() >= usage["rss_bytes_start"].as_u64().unwrap(),
        "{context}"
    );
    assert!(
        report["ops_per_server_cpu_second"].as_f64().unwrap() > 0.0,
        "{context}"
    );
    assert!(
        report["client_cpu_us_per_op"].as_f64().unwrap() > 0.0,
        "{context}"
    );
    let znodes = &report["znodes"];
    assert_eq!(znodes["found"], znodes["acknowledged"], "{context}");
}

#[test]
fn every_workload_runs_clean_against_zookeeper() {
    let zookeeper = zookeeper_serving();
    let pid = (zookeeper.pid(), "java");
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
    for driver in ["client", "lean"] {
        for (workload, ops) in cases {
            let report = bench(
                &zookeeper,
                &[&["--workload", workload, "--driver", driver][..], &timed].concat(),
            );
            assert_clean_report(&report, workload, ops, pid);
            assert_eq!(report["stopped_by"], "duration");
            assert_eq!(report["sessions"], 4);
            assert_eq!(report["driver"], driver);
            if workload == "clickhouse" {
                // Sets of shared znodes that other sessions read with a watch.
                assert!(
                    report["watch_events"].as_u64().unwrap() > 0,
                    "{driver}: no watch fired: {report:#}"
                );
            }
        }
    }

    let load = bench(
        &zookeeper,
        &[
            "--driver",
            "lean",
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
    assert_eq!(load["znodes"]["found"], 5000);

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

#[test]
fn both_drivers_run_clean_against_warden() {
    let warden = Warden::start("");
    let address = warden.addr().to_string();
    let server = (warden.pid(), "warden");
    let timed = ["--sessions", "4", "--duration", "2", "--warmup", "1"];
    for driver in ["client", "lean"] {
        for (workload, ops) in [
            ("mixed", &["create", "delete", "set", "get", "list"][..]),
            (
                "clickhouse",
                &["create", "set", "get", "exists", "list", "multi"],
            ),
        ] {
            let args = [&["--workload", workload, "--driver", driver][..], &timed].concat();
            let report = bench_on(&address, warden.pid(), &args, || warden.log());
            assert_clean_report(&report, workload, ops, server);
            assert_eq!(report["driver"], driver);
        }
    }
}

/// zk-smoketest's latency sequence: every phase answered without an error (the bench fails
/// otherwise), the counts checked through the independent client, every notification came.
fn assert_smoketest(phases: &Value, servers: usize, znodes: u64) {
    let phases = phases.as_array().expect("a list of phases");
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    let sequence = [
        "create permanent",
        "set",
        "get",
        "delete permanent",
        "create ephemeral",
        "watch (exists)",
        "delete ephemeral",
        "notifications",
    ];
    assert_eq!(names, sequence.repeat(servers), "{phases:#?}");
    for phase in phases {
        assert_eq!(phase["ops"], znodes, "{phase}");
        assert!(phase["seconds"].as_f64().unwrap() >= 0.0, "{phase}");
    }
}

/// Watches at scale: every watch set, every change heard by every session exactly once (the
/// bench fails otherwise), one fan-out per znode, the servers' memory and CPU sampled.
fn assert_watches(report: &Value, sessions: u64, znodes: u64) {
    assert_eq!(report["sessions"], sessions, "{report:#}");
    assert_eq!(report["watches"], sessions * znodes, "{report:#}");
    let fanouts = report["fanouts"].as_array().expect("fan-outs");
    assert_eq!(fanouts.len() as u64, znodes, "{report:#}");
    for f in fanouts {
        let at = |k: &str| f[k].as_f64().unwrap();
        assert!(
            0.0 <= at("first") && at("first") <= at("median") && at("median") <= at("last"),
            "{f}"
        );
    }
    for key in ["rss_bytes_sessions", "rss_bytes_watches"] {
        assert!(report[key].as_u64().unwrap() > 0, "{key}: {report:#}");
    }
    for key in ["watch_server_cpu_seconds", "fanout_server_cpu_seconds"] {
        assert!(report[key].as_f64().unwrap() >= 0.0, "{key}: {report:#}");
    }
}

#[test]
fn the_fixed_sequences_run_against_both_systems() {
    let zookeeper = zookeeper_serving();
    let warden = Warden::start("");
    let on_warden = |args: &[&str]| {
        bench_on(&warden.addr().to_string(), warden.pid(), args, || {
            warden.log()
        })
    };
    let smoketest = [
        "--workload",
        "smoketest",
        "--nodes",
        "3000",
        "--pipeline",
        "500",
    ];
    assert_smoketest(&bench(&zookeeper, &smoketest), 1, 3000);
    assert_smoketest(&on_warden(&smoketest), 1, 3000);
    let watches = ["--workload", "watches", "--sessions", "50", "--nodes", "20"];
    assert_watches(&bench(&zookeeper, &watches), 50, 20);
    assert_watches(&on_warden(&watches), 50, 20);
}
