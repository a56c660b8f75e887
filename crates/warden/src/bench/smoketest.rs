//! `warden bench -w smoketest`: the sequence of zk-smoketest's `zk-latencies.py`, the classic
//! ZooKeeper benchmark (run on AWS with `--znode_count=1000000`), on one session per server,
//! in turn: create N permanent znodes under one parent, set them, get them, delete them,
//! create N ephemeral ones, leave an exists watch on each, delete them, and wait for the N
//! notifications. Each phase is timed; its requests are sent asynchronously, as the script's
//! are, through the lean driver with up to `--pipeline` outstanding. Every phase must answer
//! every request without an error, and the znode counts after the creates and the deletes are
//! checked through the independent client.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use warden_proto::Request;
use warden_proto::request::{CreateRequest, DeleteRequest, PathWatchRequest, SetDataRequest};
use warden_proto::types::{Acl, CreateMode};
use zookeeper_client as zk;

use super::Sequence;
use super::lean::LeanLink;
use super::process::Meters;
use super::session::error_code;
use super::tree;

/// zk-latencies.py's default `--znode_size`.
pub const VALUE_BYTES: usize = 25;
/// zk-latencies.py waits this long for the notifications.
const NOTIFICATIONS_TIMEOUT: Duration = Duration::from_secs(60);

/// One timed phase on one server.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub server: String,
    pub phase: &'static str,
    pub ops: u64,
    pub seconds: f64,
    /// CPU seconds of the `--pid` servers over the phase (none without `--pid`).
    pub server_cpu_seconds: Option<f64>,
    /// CPU seconds of the bench itself over the phase.
    pub client_cpu_seconds: f64,
}

impl Phase {
    fn ms_per_op(&self) -> f64 {
        self.seconds * 1000.0 / self.ops as f64
    }

    fn per_second(&self) -> f64 {
        self.ops as f64 / self.seconds
    }
}

pub struct Settings {
    pub run: Sequence,
    pub znodes: u64,
    pub window: u64,
}

/// Runs the sequence on each server in turn; the phases in order.
pub async fn run(settings: &Settings, admin: &zk::Client) -> anyhow::Result<Vec<Phase>> {
    let root = settings.run.root.as_str();
    let left = tree::remove(admin, root).await?;
    if left > 0 {
        eprintln!("warden bench: removed {left} znodes an earlier run left under {root}");
    }
    admin
        .create(root, b"smoketest root", &tree::persistent())
        .await
        .map_err(|e| anyhow::anyhow!("creating {root}: {}", error_code(&e)))?;
    let mut phases = Vec::new();
    for server in &settings.run.servers {
        let timed =
            tokio::time::timeout_at(settings.run.deadline.into(), on(settings, server, admin));
        match timed.await {
            Ok(done) => phases.extend(done?),
            Err(_) => bail!("the smoketest on {server} did not finish within the time limit"),
        }
    }
    tree::remove(admin, root).await?;
    Ok(phases)
}

/// The sequence on one server.
async fn on(settings: &Settings, server: &str, admin: &zk::Client) -> anyhow::Result<Vec<Phase>> {
    let mut link = LeanLink::connect(server, settings.run.session_timeout)
        .await
        .with_context(|| format!("cannot open a session on {server}"))?;
    link.count_watches_only();
    let n = settings.znodes;
    let child = |j: u64| format!("{}/session_{j}", settings.run.root);
    let data = vec![b'x'; VALUE_BYTES];
    let create = |j, mode: CreateMode| {
        Request::Create(CreateRequest {
            path: child(j),
            data: Some(data.clone()),
            acl: Acl::open(),
            flags: mode.flags(),
        })
    };
    let delete = |j| {
        Request::Delete(DeleteRequest {
            path: child(j),
            version: -1,
        })
    };
    let mut phases = Vec::new();
    let pids = &settings.run.pids;
    let mut timed = |phase: &'static str, seconds: f64, meters: Meters| -> anyhow::Result<()> {
        let (usage, client_cpu_seconds) = meters.finish()?;
        phases.push(Phase {
            server: server.to_string(),
            phase,
            ops: n,
            seconds,
            server_cpu_seconds: (!usage.is_empty())
                .then(|| usage.iter().map(|u| u.cpu_seconds).sum()),
            client_cpu_seconds,
        });
        Ok(())
    };
    let w = settings.window;
    let meters = Meters::start(pids)?;
    timed(
        "create permanent",
        send_all(&mut link, n, w, |j| create(j, CreateMode::Persistent)).await?,
        meters,
    )?;
    tree::expect_children(admin, &settings.run.root, n).await?;
    let meters = Meters::start(pids)?;
    timed(
        "set",
        send_all(&mut link, n, w, |j| {
            Request::SetData(SetDataRequest {
                path: child(j),
                data: Some(data.clone()),
                version: -1,
            })
        })
        .await?,
        meters,
    )?;
    let meters = Meters::start(pids)?;
    timed(
        "get",
        send_all(&mut link, n, w, |j| {
            Request::GetData(PathWatchRequest {
                path: child(j),
                watch: false,
            })
        })
        .await?,
        meters,
    )?;
    let meters = Meters::start(pids)?;
    let seconds = send_all(&mut link, n, w, delete).await?;
    timed("delete permanent", seconds, meters)?;
    tree::expect_children(admin, &settings.run.root, 0).await?;
    let meters = Meters::start(pids)?;
    timed(
        "create ephemeral",
        send_all(&mut link, n, w, |j| create(j, CreateMode::Ephemeral)).await?,
        meters,
    )?;
    tree::expect_children(admin, &settings.run.root, n).await?;
    let meters = Meters::start(pids)?;
    timed(
        "watch (exists)",
        send_all(&mut link, n, w, |j| {
            Request::Exists(PathWatchRequest {
                path: child(j),
                watch: true,
            })
        })
        .await?,
        meters,
    )?;
    let events_before = link.events();
    let meters = Meters::start(pids)?;
    let seconds = send_all(&mut link, n, w, delete).await?;
    timed("delete ephemeral", seconds, meters)?;
    // Timed from the end of the deletes, as the script does.
    let meters = Meters::start(pids)?;
    let started = Instant::now();
    let expected = events_before + n;
    match tokio::time::timeout(NOTIFICATIONS_TIMEOUT, link.await_events(expected)).await {
        Ok(true) => {}
        Ok(false) => bail!("{server} closed the session before every notification came"),
        Err(_) => bail!(
            "{} of {n} notifications within {} s",
            link.events() - events_before,
            NOTIFICATIONS_TIMEOUT.as_secs()
        ),
    }
    timed("notifications", started.elapsed().as_secs_f64(), meters)?;
    link.close().await;
    Ok(phases)
}

/// Sends `n` requests, `make(0..n)`, keeping up to `window` outstanding; every one must
/// succeed. Returns the seconds from the first sent to the last answered.
async fn send_all(
    link: &mut LeanLink,
    n: u64,
    window: u64,
    make: impl Fn(u64) -> Request,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let (mut sent, mut answered) = (0, 0);
    while answered < n {
        // Refilled by halves, so that each write carries many requests.
        if sent < n && sent - answered <= window / 2 {
            while sent < n && sent - answered < window {
                link.send(&make(sent));
                sent += 1;
            }
            link.flush().await;
        }
        let answer = link.next().await.context("nothing outstanding")?;
        if let Err(e) = answer.result {
            bail!(
                "request {} of the phase failed: {}",
                answered + 1,
                error_code(&e)
            );
        }
        answered += 1;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The phases as zk-latencies.py prints them, one line each.
pub fn table(phases: &[Phase]) -> String {
    let mut out = String::new();
    let mut server = None;
    for p in phases {
        if server != Some(&p.server) {
            out.push_str(&format!(
                "smoketest on {}, asynchronous calls, {} znodes of {VALUE_BYTES} bytes\n",
                p.server, p.ops
            ));
            server = Some(&p.server);
        }
        let ms = p.seconds * 1000.0;
        if ms < 1.0 {
            // As the script says it: the events came with the deletes' answers.
            out.push_str(&format!(
                "{:<18} {:>9} in {ms:>9.0} ms (included in prior)\n",
                p.phase, p.ops
            ));
        } else {
            let cpu = p
                .server_cpu_seconds
                .filter(|cpu| *cpu > 0.0)
                .map(|cpu| format!(", {:.0} per server CPU-second", p.ops as f64 / cpu))
                .unwrap_or_default();
            out.push_str(&format!(
                "{:<18} {:>9} in {ms:>9.0} ms ({:.6} ms/op, {:.0}/s{cpu})\n",
                p.phase,
                p.ops,
                p.ms_per_op(),
                p.per_second()
            ));
        }
    }
    out
}
