//! `warden import` on data directories written by a real Apache ZooKeeper 3.9.5.
//!
//! One ZooKeeper data directory lives through three phases, one per snapshot compression
//! (plain, gz, snappy: ZooKeeper reads the method once per process, so it restarts between
//! phases on the same data). In each phase a mixed workload runs through the independent
//! `zookeeper-client` crate: creates of every mode (persistent, sequential, ephemeral,
//! ephemeral sequential, container, TTL), setData, delete, setACL, multis that commit and
//! multis that fail, failing requests, sessions closed with their ephemerals, then a burst of
//! concurrent writes over a tree of 6,000 nodes of 1 KiB; snapCount is small, so there are
//! several snapshots and logs, and snapshots are written while transactions go on (fuzzy: the
//! snapshot's digest is of a later zxid than its name, and the import checks it there). At the end of a phase
//! some sessions are left open, the whole tree is read by a super user, and ZooKeeper is
//! killed with SIGKILL. Then a copy of its data directory is imported, `warden server` is
//! started on the result, and every node (data, every Stat field, ACL, children) must read
//! exactly as ZooKeeper served it (a quota's usage in its stats node included); the next
//! write's zxid must follow ZooKeeper's last; a session left open on ZooKeeper must resume on
//! Warden with its id and password.
//!
//! After the last phase the data founds a 3-server Warden cluster (each member imports it for
//! its own zoo.cfg): every member serves ZooKeeper's tree. Then the newest log gets the first
//! bytes of one more entry, as a crash in the middle of a write leaves it: the import must end
//! cleanly before it and say so.
//!
//! ZooKeeper comes from `scripts/zookeeper/install.sh` (Maven Central; needs java); the test
//! never skips.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use zookeeper_client::{Acl, Acls, AuthId, Client, CreateMode, Permission, SessionInfo};

use support::cluster::{Cluster, SUPER_CREDENTIAL, System};
use support::servers::{
    free_port, install_zookeeper, spawn_logged, srvr, temp_dir, warden_command, zookeeper_command,
};
use support::tree;

/// ZooKeeper snapshots after snapCount/2 to snapCount transactions (it rolls a random offset).
const SNAP_COUNT: u32 = 40;
/// Operations in each phase's workload, one at a time.
const OPS_PER_PHASE: usize = 300;
/// Then writes sent all at once, so that snapshots are written while transactions are applied
/// (ZooKeeper's snapshots are fuzzy) and the import replays some already in them.
const BURST_WRITES: usize = 400;
/// Nodes of 1 KiB created first (in multis of `BULK_PER_MULTI`), so that writing a snapshot
/// takes long enough for the burst's transactions to land in the middle of it.
const BULK_NODES: usize = 6_000;
const BULK_PER_MULTI: usize = 500;
const START_TIMEOUT: Duration = Duration::from_secs(90);
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Long enough that no session expires, and no container or TTL node is cleaned up, while the
/// test runs: the tree must not change between the read and the kill.
const SESSION_TIMEOUT: Duration = Duration::from_secs(120);
const CLEANUP_INTERVAL_MS: u64 = 3_600_000;
const TTL: Duration = Duration::from_secs(3600);
/// "super:secret".
const SUPER_DIGEST: &str = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=";
const SUPER_AUTH: &[u8] = b"super:secret";
/// "user1:pass1".
const USER1_DIGEST: &str = "user1:GMJqCvSAmNfv41XqBotWHO0HsNc=";

/// The zoo.cfg lines both servers read, besides dataDir and the client port.
fn zoo_cfg_body() -> String {
    format!(
        "tickTime=1000\nminSessionTimeout=2000\nmaxSessionTimeout=180000\nadmin.enableServer=false\n\
         4lw.commands.whitelist=srvr\nextendedTypesEnabled=true\n\
         DigestAuthenticationProvider.superDigest={SUPER_DIGEST}\n\
         znode.container.checkIntervalMs={CLEANUP_INTERVAL_MS}\n"
    )
}

/// A process of this test's, killed (SIGKILL, by pid) when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `dir/<name>` as a zoo.cfg for `data_dir` on `port`.
fn write_cfg(dir: &Path, name: &str, data_dir: &Path, port: u16) -> PathBuf {
    let path = dir.join(name);
    let body = format!(
        "{}dataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n",
        zoo_cfg_body(),
        data_dir.display()
    );
    fs::write(&path, body).unwrap();
    path
}

/// Waits until `srvr` on `port` answers, or fails with the log's tail.
fn wait_serving(process: &mut Process, port: u16, log: &Path) {
    let deadline = Instant::now() + START_TIMEOUT;
    while srvr(port).is_none_or(|a| !a.contains("Mode: standalone")) {
        if let Ok(Some(status)) = process.0.try_wait() {
            panic!("exited {status}: {}", support::servers::log_tail(log, 40));
        }
        assert!(
            Instant::now() < deadline,
            "not serving on {port}: {}",
            support::servers::log_tail(log, 40)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The last zxid `srvr` reports.
fn zxid(port: u16) -> i64 {
    let answer = srvr(port).expect("srvr answers");
    answer
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x"))
        .and_then(|hex| i64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no zxid in {answer:?}"))
}

async fn timed<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(OP_TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {OP_TIMEOUT:?}"))
}

async fn connect(port: u16, auth: Option<&[u8]>, session: Option<SessionInfo>) -> Client {
    let mut connector = Client::connector().with_session_timeout(SESSION_TIMEOUT);
    if let Some(auth) = auth {
        connector = connector.with_auth("digest", auth);
    }
    if let Some(session) = session {
        connector = connector.with_session(session);
    }
    let address = format!("127.0.0.1:{port}");
    timed("connect", connector.connect(&address))
        .await
        .unwrap_or_else(|e| panic!("connect to {address}: {e:?}"))
}

fn open_acl() -> zookeeper_client::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// The workload of one phase. Returns its clients, whose sessions are still open: they stay
/// open as long as the clients are not dropped.
async fn workload(port: u16, phase: usize, rng: &mut fastrand::Rng) -> Vec<Client> {
    let admin = connect(port, Some(SUPER_AUTH), None).await;
    let root = format!("/p{phase}");
    for dir in ["", "/w", "/c", "/t"] {
        let path = format!("{root}{dir}");
        timed(
            "create",
            admin.create(
                &path,
                b"",
                &CreateMode::Persistent.with_acls(Acls::anyone_all()),
            ),
        )
        .await
        .unwrap();
    }
    if phase == 0 {
        // A quota over the busiest subtree, as zkCli's setquota makes it: its usage must read
        // the same after fuzzy snapshots, ZooKeeper's restarts and the import (both recount).
        for (path, data) in [
            (format!("/zookeeper/quota{root}"), ""),
            (format!("/zookeeper/quota{root}/w"), ""),
            (
                format!("/zookeeper/quota{root}/w/zookeeper_limits"),
                "count=100,bytes=-1=;byteHardLimit=-1;countHardLimit=-1",
            ),
            (
                format!("/zookeeper/quota{root}/w/zookeeper_stats"),
                "count=0,bytes=0",
            ),
        ] {
            timed("create", admin.create(&path, data.as_bytes(), &open_acl()))
                .await
                .unwrap();
        }
        for batch in 0..BULK_NODES / BULK_PER_MULTI {
            let mut multi = admin.new_multi_writer();
            for i in 0..BULK_PER_MULTI {
                let path = format!("{root}/w/bulk{batch}-{i}");
                multi.add_create(&path, &[b'b'; 1024], &open_acl()).unwrap();
            }
            timed("bulk multi", multi.commit()).await.unwrap();
        }
    }
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(connect(port, None, None).await);
    }
    let user1 = vec![Acl::new(
        Permission::ALL,
        AuthId::new("digest", USER1_DIGEST),
    )];
    let read_only = vec![Acl::new(Permission::READ, AuthId::new("world", "anyone"))];
    let mut nodes: Vec<String> = Vec::new();
    for i in 0..OPS_PER_PHASE {
        let client = &sessions[rng.usize(..sessions.len())];
        let data = format!("{phase}-{i}-{}", rng.u32(..)).into_bytes();
        let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
        match rng.u32(..100) {
            0..=24 => {
                let (mode, dir) = [
                    (CreateMode::Persistent, "w"),
                    (CreateMode::PersistentSequential, "w"),
                    (CreateMode::Ephemeral, "w"),
                    (CreateMode::EphemeralSequential, "w"),
                    (CreateMode::Container, "c"),
                ][rng.usize(..5)];
                let path = format!("{root}/{dir}/n{}", rng.u32(..40));
                let options = mode.with_acls(Acls::anyone_all());
                if let Ok((_, seq)) = timed("create", client.create(&path, &data, &options)).await {
                    let created = match mode {
                        CreateMode::PersistentSequential | CreateMode::EphemeralSequential => {
                            format!("{path}{seq}")
                        }
                        _ => path,
                    };
                    if mode == CreateMode::Container {
                        // A container with a child: removing it later empties the container.
                        let child = format!("{created}/child");
                        timed("create", client.create(&child, b"", &open))
                            .await
                            .unwrap();
                        nodes.push(child);
                    }
                    nodes.push(created);
                }
            }
            25..=32 => {
                let path = format!("{root}/t/n{}", rng.u32(..20));
                let options = CreateMode::Persistent
                    .with_acls(Acls::anyone_all())
                    .with_ttl(TTL);
                if timed("createTTL", client.create(&path, &data, &options))
                    .await
                    .is_ok()
                {
                    nodes.push(path);
                }
            }
            33..=54 if !nodes.is_empty() => {
                let path = &nodes[rng.usize(..nodes.len())];
                let version = rng.bool().then(|| rng.i32(0..3));
                let _ = timed("setData", client.set_data(path, &data, version)).await;
            }
            55..=69 if !nodes.is_empty() => {
                let at = rng.usize(..nodes.len());
                if timed("delete", client.delete(&nodes[at], None))
                    .await
                    .is_ok()
                {
                    nodes.swap_remove(at);
                }
            }
            70..=77 if !nodes.is_empty() => {
                let path = &nodes[rng.usize(..nodes.len())];
                let acl = if rng.bool() { &user1 } else { &read_only };
                let _ = timed("setACL", admin.set_acl(path, acl, None)).await;
            }
            78..=91 => {
                // Some commit, some fail (a wrong version, an existing node): a failed multi is
                // logged as error records and must change nothing.
                let mut multi = client.new_multi_writer();
                let path = format!("{root}/w/m{}", rng.u32(..15));
                multi.add_create(&path, &data, &open).unwrap();
                multi.add_set_data(&path, b"in-multi", None).unwrap();
                if let Some(other) = (!nodes.is_empty()).then(|| &nodes[rng.usize(..nodes.len())]) {
                    multi.add_check_version(other, rng.i32(0..2)).unwrap();
                }
                if timed("multi", multi.commit()).await.is_ok() {
                    nodes.push(path);
                }
            }
            92..=95 => {
                // A request that fails is logged too (an error transaction with a zxid).
                let _ = timed("create", client.create(&root, b"", &open)).await;
            }
            _ => {
                // Close a session (its ephemerals go with it) and open another.
                let at = rng.usize(..sessions.len());
                let closing = sessions.swap_remove(at);
                let mut state = closing.state_watcher();
                drop(closing);
                timed("close", async {
                    while !state.changed().await.is_terminated() {}
                })
                .await;
                sessions.push(connect(port, None, None).await);
            }
        }
    }
    let burst = (0..BURST_WRITES).map(|i| {
        let client = &sessions[i % sessions.len()];
        let path = format!("{root}/w/b{}", i % (BURST_WRITES / 4));
        let data = vec![b'x'; 1024 + i];
        async move {
            let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
            if client.create(&path, &data, &open).await.is_err() {
                let _ = client.set_data(&path, &data, None).await;
            }
        }
    });
    timed("burst", futures::future::join_all(burst)).await;
    sessions.push(admin);
    sessions
}

/// Runs `warden import` with `args`; returns its standard output.
fn import(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("import")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "warden import {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn copy_dir(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_what_a_real_zookeeper_wrote() {
    install_zookeeper();
    let dir = temp_dir("import");
    let zk_data = dir.join("data");
    let mut rng = fastrand::Rng::with_seed(11);
    let mut last_zk_zxid = 0;
    let mut last_served = Vec::new();
    for (phase, compression) in ["", "gz", "snappy"].into_iter().enumerate() {
        // ZooKeeper, on the same data as the phase before.
        let zk_port = free_port();
        let zk_cfg = write_cfg(&dir, "zoo.cfg", &zk_data, zk_port);
        let zk_log = dir.join(format!("zookeeper-{phase}.log"));
        let opts = format!(
            "-Dzookeeper.extendedTypesEnabled=true -Dzookeeper.snapCount={SNAP_COUNT} \
             -Dzookeeper.preAllocSize=256 -Dzookeeper.snapshot.compression.method={compression} \
             -Dznode.container.checkIntervalMs={CLEANUP_INTERVAL_MS} \
             -Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
        );
        let mut zookeeper = Process(spawn_logged(
            zookeeper_command(&zk_cfg, "256m", &opts),
            &zk_log,
        ));
        wait_serving(&mut zookeeper, zk_port, &zk_log);
        let sessions = workload(zk_port, phase, &mut rng).await;
        let reader = connect(zk_port, Some(SUPER_AUTH), None).await;
        let served = tree::dump(OP_TIMEOUT, &[], &reader).await;
        let zk_zxid = zxid(zk_port);
        assert!(zk_zxid > last_zk_zxid + OPS_PER_PHASE as i64 / 2);
        last_zk_zxid = zk_zxid;
        drop(zookeeper); // SIGKILL
        drop(reader);

        // Import a copy, as an operator would after stopping ZooKeeper.
        let phase_dir = dir.join(format!("phase-{phase}"));
        fs::create_dir(&phase_dir).unwrap();
        copy_dir(&zk_data, &phase_dir.join("zookeeper"));
        let warden_data = phase_dir.join("warden");
        let report = import(&[
            "--zoo-cfg",
            write_cfg(&phase_dir, "zoo.cfg", &phase_dir.join("zookeeper"), zk_port)
                .to_str()
                .unwrap(),
            "--out",
            warden_data.to_str().unwrap(),
        ]);
        eprintln!("phase {phase} import:\n{report}");
        let suffix = if compression.is_empty() {
            String::new()
        } else {
            format!(".{compression}")
        };
        assert!(
            report
                .lines()
                .any(|l| l.starts_with("snapshot ") && l.contains(&format!("{suffix} (zxid"))),
            "phase {phase} read a {compression:?} snapshot:\n{report}"
        );
        assert!(report.contains(&format!("zxid {zk_zxid:#x}")), "{report}");
        let snapshots = fs::read_dir(zk_data.join("version-2"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("snapshot.")
            })
            .count();
        assert!(snapshots >= 3 * (phase + 1), "{snapshots} snapshots");

        // Warden on the imported data serves exactly ZooKeeper's tree.
        let port = free_port();
        let cfg = write_cfg(&phase_dir, "warden.cfg", &warden_data, port);
        let log = phase_dir.join("warden.log");
        let mut warden = Process(spawn_logged(warden_command(&cfg), &log));
        wait_serving(&mut warden, port, &log);
        assert_eq!(zxid(port), zk_zxid, "Warden goes on from ZooKeeper's zxid");
        let reader = connect(port, Some(SUPER_AUTH), None).await;
        let imported = tree::dump(OP_TIMEOUT, &[], &reader).await;
        let differences: Vec<_> = served
            .iter()
            .zip(&imported)
            .filter(|(a, b)| a != b)
            .take(5)
            .collect();
        assert!(
            differences.is_empty() && served.len() == imported.len(),
            "phase {phase}: {} nodes served, {} imported; first differences {differences:#?}",
            served.len(),
            imported.len()
        );

        // A session ZooKeeper's client left open resumes on Warden.
        let owner = sessions[0].session().clone();
        let resumed = connect(port, None, Some(owner.clone())).await;
        assert_eq!(resumed.session_id(), owner.id(), "the same session");
        let (stat, _) = timed(
            "create",
            resumed.create(
                &format!("/p{phase}/after-import"),
                b"",
                &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
            ),
        )
        .await
        .unwrap();
        // The reader's session took zk_zxid + 1.
        assert_eq!(stat.czxid, zk_zxid + 2, "zxids go on from ZooKeeper's");
        assert_eq!(stat.ephemeral_owner, owner.id().0);
        last_served = served;
    }
    founds_a_cluster(&zk_data, &last_served).await;
    torn_tail_ends_the_import_cleanly(&dir, &zk_data, last_zk_zxid);
    fs::remove_dir_all(&dir).unwrap();
}

/// Every member of a new 3-server cluster imports the same ZooKeeper data for its own zoo.cfg;
/// each then serves ZooKeeper's tree. /zookeeper/config is left out: the new cluster's leader
/// writes its membership there.
async fn founds_a_cluster(zk_data: &Path, served: &[String]) {
    let extra = format!(
        "extendedTypesEnabled=true\nznode.container.checkIntervalMs={CLEANUP_INTERVAL_MS}\n\
         maxSessionTimeout=180000"
    );
    let cluster = Cluster::start_prepared(System::Warden, 3, 0, 0, &extra, |member| {
        import(&[
            "--data-dir",
            zk_data.to_str().unwrap(),
            "--out-zoo-cfg",
            member.cfg_path().to_str().unwrap(),
        ]);
    });
    let expected: Vec<&String> = served
        .iter()
        .filter(|l| !l.starts_with("/zookeeper/config "))
        .collect();
    for member in &cluster.members {
        let reader = connect(member.client_port, Some(SUPER_CREDENTIAL), None).await;
        let tree = tree::dump(OP_TIMEOUT, &[], &reader).await;
        let tree: Vec<&String> = tree
            .iter()
            .filter(|l| !l.starts_with("/zookeeper/config "))
            .collect();
        assert!(
            tree == expected,
            "server.{} serves another tree: {} nodes, {} expected",
            member.id,
            tree.len(),
            expected.len()
        );
    }
}

/// ZooKeeper killed in the middle of writing an entry: the newest log gets the first bytes of
/// one more entry after its last (the rest is the file's zero padding). The import must end
/// cleanly before it, say so, and keep every transaction before it.
fn torn_tail_ends_the_import_cleanly(dir: &Path, zk_data: &Path, last_zxid: i64) {
    let torn = dir.join("torn");
    copy_dir(zk_data, &torn);
    let logs = warden_import::files::logs(&torn.join("version-2")).unwrap();
    let newest = &logs.last().expect("a log").path;
    let mut bytes = fs::read(newest).unwrap();
    let mut log = warden_import::txnlog::LogFile::open(newest, &bytes).unwrap();
    let mut last = None;
    while let Some(entry) = log.next_entry().unwrap() {
        last = Some(entry);
    }
    let last = last.expect("an entry");
    assert_eq!(last.txn.zxid, last_zxid);
    let start = last.offset as usize;
    let body_len = i32::from_be_bytes(bytes[start + 8..start + 12].try_into().unwrap());
    let end = start + 12 + body_len as usize + 1;
    let partial = bytes[start..start + 30].to_vec();
    assert!(
        bytes[end..end + 30].iter().all(|&b| b == 0),
        "padding after the last entry"
    );
    bytes[end..end + 30].copy_from_slice(&partial);
    fs::write(newest, &bytes).unwrap();
    let report = import(&[
        "--data-dir",
        torn.to_str().unwrap(),
        "--out",
        dir.join("torn-warden").to_str().unwrap(),
    ]);
    assert!(
        report.contains(&format!("(at byte {end}) was cut short")),
        "{report}"
    );
    assert!(report.contains(&format!("zxid {last_zxid:#x}")), "{report}");
    let again = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["import", "--data-dir"])
        .arg(&torn)
        .arg("--out")
        .arg(dir.join("torn-warden"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success() && stderr.contains("is not empty"),
        "an import never writes into a used directory: {stderr}"
    );
}
