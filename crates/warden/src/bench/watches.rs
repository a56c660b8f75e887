//! `warden bench -w watches`: watches at scale. `--sessions` sessions (spread over the
//! servers in turn) each leave a data watch on each of `--nodes` znodes; then each znode is
//! changed in turn, and the next change waits until every session has heard of the last. It
//! reports how long setting the watches took, the servers' memory per watch and per idle
//! session, and how long one change took to reach its first, middle and last watcher.
//!
//! Sessions are lean links (bench/lean.rs), one task each. The changes go through the
//! independent client, and every session must hear of every change exactly once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use serde::Serialize;
use tokio::sync::mpsc;
use warden_proto::Request;
use warden_proto::request::{CreateRequest, PathWatchRequest};
use warden_proto::types::{Acl, CreateMode};
use zookeeper_client as zk;

use super::Sequence;
use super::lean::LeanLink;
use super::process::{Meters, Process};
use super::session::error_code;
use super::tree;

/// Sessions connecting at once.
const CONNECT_WINDOW: usize = 64;
/// The bytes each change writes.
const VALUE_BYTES: usize = 16;
/// How long a session waits after the last change for a notification it should not get.
const QUIET_WAIT: Duration = Duration::from_millis(500);

pub struct Settings {
    pub run: Sequence,
    pub sessions: u32,
    /// Znodes each session watches, each changed once.
    pub znodes: u64,
}

/// What a run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    pub sessions: u32,
    pub znodes: u64,
    pub watches: u64,
    pub connect_seconds: f64,
    /// From the first watch asked for to the last one answered, all sessions at once.
    pub watch_seconds: f64,
    /// Server CPU over setting the watches.
    pub watch_server_cpu_seconds: Option<f64>,
    /// The `--pid` servers' resident memory, summed, before the sessions connect, with the
    /// sessions idle, and with their watches set.
    pub rss_bytes_before: Option<u64>,
    pub rss_bytes_sessions: Option<u64>,
    pub rss_bytes_watches: Option<u64>,
    /// Seconds from each change's request to its first, middle and last watcher's
    /// notification, one entry per change.
    pub fanouts: Vec<Fanout>,
    /// Server CPU over all the changes and their notifications.
    pub fanout_server_cpu_seconds: Option<f64>,
    /// The bench's own CPU over the changes and their notifications.
    pub fanout_client_cpu_seconds: f64,
}

#[derive(Debug, Serialize)]
pub struct Fanout {
    pub first: f64,
    pub median: f64,
    pub last: f64,
}

pub async fn run(settings: &Settings, admin: &zk::Client) -> anyhow::Result<Report> {
    let timed = tokio::time::timeout_at(settings.run.deadline.into(), measure(settings, admin));
    let report = match timed.await {
        Ok(report) => report?,
        Err(_) => bail!("the watches run did not finish within the time limit"),
    };
    tree::remove(admin, &settings.run.root).await?;
    Ok(report)
}

async fn measure(settings: &Settings, admin: &zk::Client) -> anyhow::Result<Report> {
    let root = settings.run.root.as_str();
    let left = tree::remove(admin, root).await?;
    if left > 0 {
        eprintln!("warden bench: removed {left} znodes an earlier run left under {root}");
    }
    let paths: Arc<[String]> = (0..settings.znodes)
        .map(|j| format!("{root}/w{j}"))
        .collect();
    make_znodes(settings, admin, &paths).await?;
    let servers = settings
        .run
        .pids
        .iter()
        .map(|&pid| Process::pid(pid).with_context(|| format!("--pid {pid}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let rss = || -> anyhow::Result<Option<u64>> {
        if servers.is_empty() {
            return Ok(None);
        }
        let samples = servers.iter().map(Process::sample);
        Ok(Some(
            samples
                .map(|s| s.map(|s| s.rss_bytes))
                .sum::<anyhow::Result<u64>>()?,
        ))
    };
    let rss_bytes_before = rss()?;

    let started = Instant::now();
    let links: Vec<LeanLink> = stream::iter(0..settings.sessions)
        .map(|i| {
            let server = &settings.run.servers[i as usize % settings.run.servers.len()];
            async move {
                LeanLink::connect(server, settings.run.session_timeout)
                    .await
                    .with_context(|| format!("cannot open session {i} on {server}"))
            }
        })
        .buffer_unordered(CONNECT_WINDOW)
        .try_collect()
        .await?;
    let connect_seconds = started.elapsed().as_secs_f64();
    let rss_bytes_sessions = rss()?;

    let (ready_tx, mut ready) = mpsc::unbounded_channel();
    let (heard_tx, mut heard) = mpsc::unbounded_channel();
    let meters = Meters::start(&settings.run.pids)?;
    let started = Instant::now();
    let watchers: Vec<_> = links
        .into_iter()
        .map(|link| {
            tokio::spawn(watcher(
                link,
                paths.clone(),
                ready_tx.clone(),
                heard_tx.clone(),
            ))
        })
        .collect();
    drop((ready_tx, heard_tx));
    for _ in 0..settings.sessions {
        ready
            .recv()
            .await
            .context("a session ended before its watches were set")??;
    }
    let watch_seconds = started.elapsed().as_secs_f64();
    let watch_server_cpu_seconds = server_cpu(meters)?.0;
    let rss_bytes_watches = rss()?;

    let data = vec![b'c'; VALUE_BYTES];
    let mut fanouts = Vec::with_capacity(paths.len());
    let meters = Meters::start(&settings.run.pids)?;
    for (j, path) in paths.iter().enumerate() {
        let sent = Instant::now();
        admin
            .set_data(path, &data, None)
            .await
            .map_err(|e| anyhow::anyhow!("changing {path}: {}", error_code(&e)))?;
        let mut times = Vec::with_capacity(settings.sessions as usize);
        while times.len() < settings.sessions as usize {
            let (change, at) = heard
                .recv()
                .await
                .context("every session ended before hearing of every change")?;
            ensure!(
                change == j,
                "a session heard of change {change} during change {j}"
            );
            times.push(at.saturating_duration_since(sent).as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        fanouts.push(Fanout {
            first: times[0],
            median: times[times.len() / 2],
            last: times[times.len() - 1],
        });
    }
    let (fanout_server_cpu_seconds, fanout_client_cpu_seconds) = server_cpu(meters)?;

    let mut closing = Vec::with_capacity(watchers.len());
    for task in watchers {
        closing.push(task.await.context("a session's task failed")??);
    }
    stream::iter(closing)
        .for_each_concurrent(CONNECT_WINDOW, LeanLink::close)
        .await;
    Ok(Report {
        sessions: settings.sessions,
        znodes: settings.znodes,
        watches: u64::from(settings.sessions) * settings.znodes,
        connect_seconds,
        watch_seconds,
        watch_server_cpu_seconds,
        rss_bytes_before,
        rss_bytes_sessions,
        rss_bytes_watches,
        fanouts,
        fanout_server_cpu_seconds,
        fanout_client_cpu_seconds,
    })
}

/// Creates the root and the watched znodes, checked through the independent client.
async fn make_znodes(
    settings: &Settings,
    admin: &zk::Client,
    paths: &[String],
) -> anyhow::Result<()> {
    let root = settings.run.root.as_str();
    admin
        .create(root, b"watches root", &tree::persistent())
        .await
        .map_err(|e| anyhow::anyhow!("creating {root}: {}", error_code(&e)))?;
    let mut link =
        LeanLink::connect(&settings.run.servers[0], settings.run.session_timeout).await?;
    for path in paths {
        link.send(&Request::Create(CreateRequest {
            path: path.clone(),
            data: Some(Vec::new()),
            acl: Acl::open(),
            flags: CreateMode::Persistent.flags(),
        }));
    }
    link.flush().await;
    while let Some(answer) = link.next().await {
        if let Err(e) = answer.result {
            bail!("creating a watched znode: {}", error_code(&e));
        }
    }
    link.close().await;
    tree::expect_children(admin, root, paths.len() as u64).await
}

/// One session: leaves a watch on every path, says so on `ready`, then reports on `heard`
/// each notification as it comes, numbered in order. Gives its link back after the last,
/// once no further notification has come for a while.
async fn watcher(
    mut link: LeanLink,
    paths: Arc<[String]>,
    ready: mpsc::UnboundedSender<anyhow::Result<()>>,
    heard: mpsc::UnboundedSender<(usize, Instant)>,
) -> anyhow::Result<LeanLink> {
    link.count_watches_only();
    for path in paths.iter() {
        link.send(&Request::GetData(PathWatchRequest {
            path: path.clone(),
            watch: true,
        }));
    }
    link.flush().await;
    let mut set = Ok(());
    while let Some(answer) = link.next().await {
        if let Err(e) = answer.result {
            set = Err(anyhow::anyhow!(
                "a watching read failed: {}",
                error_code(&e)
            ));
        }
    }
    let failed = set.is_err();
    let _ = ready.send(set);
    ensure!(!failed, "the session's watches were not all set");
    for change in 0..paths.len() {
        ensure!(
            link.await_events(change as u64 + 1).await,
            "the server closed a watching session"
        );
        let _ = heard.send((change, Instant::now()));
    }
    let extra = tokio::time::timeout(QUIET_WAIT, link.await_events(paths.len() as u64 + 1)).await;
    ensure!(
        extra.is_err(),
        "a session heard more notifications than there were changes"
    );
    Ok(link)
}

/// The `--pid` servers' CPU seconds (none without `--pid`) and the bench's.
fn server_cpu(meters: Meters) -> anyhow::Result<(Option<f64>, f64)> {
    let (usage, client) = meters.finish()?;
    let server = (!usage.is_empty()).then(|| usage.iter().map(|u| u.cpu_seconds).sum());
    Ok((server, client))
}

impl Report {
    pub fn table(&self) -> String {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let mut out = format!(
            "watches: {} sessions x {} znodes = {} watches\n",
            self.sessions, self.znodes, self.watches
        );
        out.push_str(&format!(
            "connect            {:>9.0} ms for {} sessions\n",
            self.connect_seconds * 1000.0,
            self.sessions
        ));
        let cpu_per = |cpu: Option<f64>, n: u64| {
            cpu.map(|c| format!(", {:.1} µs server CPU each", c * 1e6 / n as f64))
                .unwrap_or_default()
        };
        out.push_str(&format!(
            "set watches        {:>9.0} ms ({:.0} watches/s{})\n",
            self.watch_seconds * 1000.0,
            self.watches as f64 / self.watch_seconds,
            cpu_per(self.watch_server_cpu_seconds, self.watches)
        ));
        if let (Some(before), Some(sessions), Some(watches)) = (
            self.rss_bytes_before,
            self.rss_bytes_sessions,
            self.rss_bytes_watches,
        ) {
            out.push_str(&format!(
                "server RSS         {:.1} MiB, {:.1} with the sessions idle, {:.1} with the watches \
                 ({:.0} bytes per session, {:.0} per watch)\n",
                mib(before),
                mib(sessions),
                mib(watches),
                (sessions as f64 - before as f64) / f64::from(self.sessions),
                (watches as f64 - sessions as f64) / self.watches as f64
            ));
        }
        let pick = |f: fn(&Fanout) -> f64| {
            let mut v: Vec<f64> = self.fanouts.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2] * 1000.0, v[v.len() - 1] * 1000.0)
        };
        let (first, first_max) = pick(|f| f.first);
        let (median, median_max) = pick(|f| f.median);
        let (last, last_max) = pick(|f| f.last);
        out.push_str(&format!(
            "one change to {} watchers, over {} changes (median / max, ms): first {first:.2} / \
             {first_max:.2}, middle {median:.2} / {median_max:.2}, last {last:.2} / {last_max:.2}{}\n",
            self.sessions,
            self.fanouts.len(),
            cpu_per(self.fanout_server_cpu_seconds, self.watches)
        ));
        out.push_str(&format!(
            "bench client cpu over the changes: {:.1} µs per notification\n",
            self.fanout_client_cpu_seconds * 1e6 / self.watches as f64
        ));
        out
    }
}
