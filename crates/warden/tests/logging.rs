//! What a server with the default log filter writes to its log: what an operator needs, not a
//! line per write. A dependency's chatter at info once flooded it under load (raft-log logged
//! at every fsync once its first file was full: 2,000 lines a second).

mod support;

use support::warden::{Warden, client, persistent};

/// Values that fill the log's first file (1 MiB) and more, after which raft-log's cache logged at
/// every fsync.
const LARGE_VALUES: usize = 12;
const LARGE_VALUE_BYTES: usize = 512 << 10;
/// Writes one after another, each fsynced on its own.
const SMALL_WRITES: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_log_does_not_grow_with_writes() {
    let warden = Warden::start_with_default_log("");
    let zk = client(&warden).await;
    zk.create("/q", b"", &persistent()).await.unwrap();
    let value = vec![7u8; LARGE_VALUE_BYTES];
    for i in 0..LARGE_VALUES {
        zk.create(&format!("/q/large-{i}"), &value, &persistent())
            .await
            .unwrap();
    }
    let before = warden.log().lines().count();
    for i in 0..SMALL_WRITES {
        zk.create(&format!("/q/small-{i}"), b"v", &persistent())
            .await
            .unwrap();
    }
    let log = warden.log();
    let added: Vec<&str> = log.lines().skip(before).collect();
    assert!(
        added.len() <= 5,
        "{SMALL_WRITES} writes added {} lines to the log:\n{}",
        added.len(),
        added
            .iter()
            .take(20)
            .copied()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
