//! No acknowledged write is lost: clients write as fast as they can, the server is killed with
//! SIGKILL at an arbitrary moment, and after a restart every write that was acknowledged is
//! there. Snapshots are taken every 200 transactions, so restarts load a snapshot and replay
//! the log after it; old snapshots are purged down to the retained count. A small tree is
//! snapshotted before snapCount once its log outgrows it.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::warden::{Warden, client, files_in, persistent};

const WRITERS: usize = 8;
const ROUNDS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let mut warden = Warden::start("snapCount=200\nautopurge.snapRetainCount=3\n");
    {
        let zk = client(&warden).await;
        zk.create("/d", b"", &persistent()).await.unwrap();
    }
    let mut all_acked = HashSet::new();
    for round in 0..ROUNDS {
        let acked = Arc::new(Mutex::new(HashSet::new()));
        let tasks = {
            let acked = acked.clone();
            let mut tasks = Vec::new();
            for w in 0..WRITERS {
                let zk = client(&warden).await;
                let acked = acked.clone();
                tasks.push(tokio::spawn(async move {
                    for i in 0.. {
                        let path = format!("/d/r{round}-w{w}-{i}");
                        let created = tokio::time::timeout(
                            Duration::from_secs(5),
                            zk.create(&path, path.as_bytes(), &persistent()),
                        )
                        .await;
                        match created {
                            Ok(Ok(_)) => {
                                acked.lock().unwrap().insert(path);
                            }
                            _ => return,
                        }
                    }
                }));
            }
            tasks
        };
        // Let the writers run for a while that differs from round to round, then kill.
        tokio::time::sleep(Duration::from_millis(700 + 450 * round as u64)).await;
        warden.kill9();
        for t in tasks {
            t.await.unwrap();
        }
        let acked = std::mem::take(&mut *acked.lock().unwrap());
        assert!(
            acked.len() > 50,
            "round {round}: only {} writes acknowledged before the kill",
            acked.len()
        );
        all_acked.extend(acked);

        warden.restart();
        let zk = client(&warden).await;
        let mut missing = Vec::new();
        for path in &all_acked {
            match zk.get_data(path).await {
                Ok((data, _)) => assert_eq!(data, path.as_bytes(), "{path} has the wrong data"),
                Err(e) => missing.push(format!("{path}: {e}")),
            }
        }
        assert!(
            missing.is_empty(),
            "round {round}: {} acknowledged writes lost after kill -9, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
        let snapshots = files_in(&warden.data_dir().join("snapshots"));
        assert!(
            !snapshots.is_empty() && snapshots.len() <= 3,
            "round {round}: expected 1-3 snapshots, found {snapshots:?}"
        );
    }
    // Restarting is fast: the log after the last snapshot is short.
    let log = warden.log();
    assert!(log.contains("state recovered"), "{log}");
    assert!(log.contains("snapshot loaded"), "{log}");
}

/// The number after `key=` on the last line of `log` that contains `what`.
fn logged_number(log: &str, what: &str, key: &str) -> i64 {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no line with {what:?} in {log}"));
    let value = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in {line}"));
    match value.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).unwrap(),
        None => value.parse().unwrap(),
    }
}

/// A clean stop (SIGTERM) takes a snapshot of everything applied (`snapshots.on_exit`, on by
/// default), so the next start loads it and has no log to replay; writes between periodic
/// snapshots are not lost by it, nor by a kill -9 after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_snapshots_so_the_next_start_replays_nothing() {
    let mut warden = Warden::start("snapCount=100000\n");
    let zk = client(&warden).await;
    for i in 0..50 {
        zk.create(&format!("/s{i}"), b"x", &persistent())
            .await
            .unwrap();
    }
    assert!(files_in(&warden.data_dir().join("snapshots")).is_empty());
    // The session stays open across the stop: a close in flight would be a write the
    // snapshot may or may not hold.
    assert!(warden.terminate().success());
    drop(zk);
    let log = warden.log();
    assert!(log.contains("snapshot taken for the next start"), "{log}");
    assert_eq!(files_in(&warden.data_dir().join("snapshots")).len(), 1);

    warden.restart();
    let zk = client(&warden).await;
    assert!(zk.get_data("/s49").await.is_ok());
    let log = warden.log();
    let loaded = logged_number(&log, "snapshot loaded", "zxid");
    let recovered = logged_number(&log, "state recovered", "zxid");
    assert_eq!(loaded, recovered, "the snapshot holds every write: {log}");

    // A write after it, then a crash: the start loads that snapshot and replays the write.
    zk.create("/after", b"", &persistent()).await.unwrap();
    drop(zk);
    warden.kill9();
    warden.restart();
    let zk = client(&warden).await;
    assert!(zk.get_data("/after").await.is_ok());
    assert!(zk.get_data("/s0").await.is_ok());
}

/// A small tree under many writes is snapshotted long before snapCount: once the log since the
/// last snapshot holds four times the tree's data and 10,000 entries (the server's
/// `consensus/snapshot_due.rs`), so that neither the log's memory nor a restart's replay
/// grows to snapCount's 100,000 entries for a tree a snapshot holds in a few kilobytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_tree_is_snapshotted_once_its_log_outgrows_it() {
    const WRITES_EACH: usize = 1_300;
    let warden = Warden::start("snapCount=100000\n");
    client(&warden)
        .await
        .create("/n", b"", &persistent())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let zk = client(&warden).await;
        tasks.push(tokio::spawn(async move {
            for i in 0..WRITES_EACH {
                zk.set_data("/n", i.to_string().as_bytes(), None)
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // 10,400 writes, and a tree of a few dozen bytes: a snapshot is due by now.
    let index = first_snapshot_index(&warden).await;
    assert!((10_000..100_000).contains(&index), "{index}");
}

/// ZooKeeper's snapSizeLimitInKb: a snapshot once the log since the last one holds that many
/// bytes, however few its transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_is_taken_once_the_log_reaches_snap_size_limit() {
    let warden = Warden::start("snapCount=100000\nsnapSizeLimitInKb=64\n");
    let zk = client(&warden).await;
    zk.create("/v", b"", &persistent()).await.unwrap();
    let value = vec![b'v'; 10_000];
    for _ in 0..10 {
        zk.set_data("/v", &value, None).await.unwrap();
    }
    // The seventh write of 10,000 bytes takes the log past 64 KiB.
    let index = first_snapshot_index(&warden).await;
    assert!((7..20).contains(&index), "{index}");
}

/// The log index of the first snapshot `warden` writes (its file is named by it), waiting
/// for it: snapshots are written off the apply path.
async fn first_snapshot_index(warden: &Warden) -> u64 {
    let dir = warden.data_dir().join("snapshots");
    let written = || -> Vec<String> {
        let names = files_in(&dir).into_iter();
        names.filter(|n| n.ends_with(".snap")).collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while written().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let names = written();
    assert_eq!(names.len(), 1, "{}", warden.log());
    names[0]
        .strip_prefix("snapshot-")
        .and_then(|n| n.strip_suffix(".snap"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a snapshot's name: {names:?}"))
}
