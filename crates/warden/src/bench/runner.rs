//! A run from start to end: connect, make the tree, warm up, measure, report, clean up.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt, stream};
use tokio::task::JoinSet;
use zookeeper_client as zk;

use super::lean::LeanLink;
use super::link::Link;
use super::process::{Meters, Process};
use super::report::{Report, RunFacts, StoppedBy, ZnodesCheck};
use super::session::{Control, Session, SessionEnd, Shared, error_code};
use super::tree::{self, Paths};
use super::workload::Workload;

/// How long a session may take to be established.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const CONNECTS_AT_ONCE: usize = 32;
/// How long closing the sessions may take after the run.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Locks the sessions' counts are spread over.
const STATS_SHARDS: usize = 16;

/// When the counted part of a run ends.
#[derive(Clone, Copy, Debug)]
pub enum StopRule {
    Duration(Duration),
    Requests(u64),
    /// When every znode of a [load] workload has been created.
    LoadComplete,
}

/// A run's settings, checked.
#[derive(Debug)]
pub struct Settings {
    pub servers: Vec<String>,
    pub sessions: u32,
    pub pipeline: u32,
    pub stop: StopRule,
    pub warmup: Duration,
    /// The hard time limit: nothing of the run goes on past it.
    pub deadline: Instant,
    pub root: String,
    pub pids: Vec<u32>,
    pub progress: Option<Duration>,
    pub session_timeout: Duration,
    pub seed: u64,
    pub driver: Driver,
}

/// How the sessions of a run send their requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// The independent `zookeeper-client` crate.
    Client,
    /// Requests written straight onto each session's socket (bench/lean.rs): a fraction of the
    /// client's CPU per request, its writes checked through the client after the run.
    Lean,
}

/// A measured run whose tree is still on the server.
pub struct Finished {
    pub report: Report,
    admin: zk::Client,
    paths: Paths,
    deadline: Instant,
}

impl Finished {
    /// Removes the run's znodes unless told to keep them (returning how many there were), and
    /// closes the last session.
    pub async fn finish(self, keep: bool) -> anyhow::Result<Option<u64>> {
        let removed = if keep {
            None
        } else {
            let removing = tree::remove(&self.admin, self.paths.root());
            let cleanup = format!("cleanup of {}", self.paths.root());
            Some(within(self.deadline, &cleanup, removing).await?)
        };
        let watcher = self.admin.state_watcher();
        drop(self.admin);
        close_watched(vec![watcher]).await;
        Ok(removed)
    }
}

pub async fn run(settings: Settings, workload: Workload) -> anyhow::Result<Finished> {
    let started_at_unix = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let deadline = settings.deadline;
    // Refuse a wrong --pid before spending any time on the run.
    for pid in &settings.pids {
        Process::pid(*pid).with_context(|| format!("--pid {pid}"))?;
    }
    let paths = Paths::new(&settings.root)?;
    let (admin, links) = set_up(&settings, &paths, &workload).await?;
    let znodes_before = count_znodes(&admin, &paths, deadline).await?;

    let measure_from = Instant::now() + settings.warmup;
    let (issue_until, requests) = match settings.stop {
        StopRule::Duration(duration) => (Some(measure_from + duration), None),
        StopRule::Requests(requests) => (None, Some(requests)),
        StopRule::LoadComplete => (None, None),
    };
    let control = Control::new(measure_from, issue_until, requests, STATS_SHARDS);
    let shared = Arc::new(Shared {
        workload,
        paths,
        control,
        sessions: settings.sessions,
        pipeline: settings.pipeline,
    });
    let mut state_watchers = Vec::with_capacity(links.len());
    let mut tasks = JoinSet::new();
    for (id, link) in (0u32..).zip(links) {
        state_watchers.extend(link.state_watcher());
        let seed = settings.seed ^ u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        tasks.spawn(Session::new(id, link, shared.clone(), seed).run());
    }
    let progress = settings
        .progress
        .map(|every| tokio::spawn(show_progress(shared.clone(), every)));

    tokio::time::sleep_until(measure_from.min(deadline).into()).await;
    let meters = Meters::start(&settings.pids)?;
    let (mut ends, timed_out, interrupted) =
        wait_for_sessions(&mut tasks, &shared.control, deadline).await?;
    let now = Instant::now();
    if let Some(progress) = progress {
        progress.abort();
        if std::io::stderr().is_terminal() {
            eprintln!();
        }
    }
    let (servers_usage, client_cpu_seconds) = meters.finish()?;
    ends.sort_by_key(|end| end.session);

    let measured_end = if timed_out {
        now
    } else {
        // A duration's window lasts its full length even if answers stopped coming early.
        let floor = issue_until.map_or(measure_from, |until| until.min(now));
        ends.iter()
            .filter_map(|end| end.last_counted)
            .max()
            .unwrap_or(measure_from)
            .max(floor)
    };
    let sessions_ended_early: Vec<String> = ends
        .iter()
        .filter_map(|end| end.ended_early.clone())
        .collect();
    let all_ended_early = !ends.is_empty() && sessions_ended_early.len() == ends.len();
    // Checked only when every session ended in order: a session aborted at the time limit
    // may have had writes applied that it never saw answered.
    let znodes = if timed_out {
        None
    } else {
        let found = count_znodes(&admin, &shared.paths, deadline).await? - znodes_before;
        Some(ZnodesCheck {
            acknowledged: ends.iter().map(|end| end.znodes_made).sum(),
            found,
        })
    };
    let facts = RunFacts {
        started_at_unix,
        seed: settings.seed,
        workload: shared.workload.name.clone(),
        description: shared.workload.description.clone(),
        servers: settings.servers.clone(),
        sessions: settings.sessions,
        pipeline: settings.pipeline,
        warmup_seconds: settings.warmup.as_secs_f64(),
        measured_seconds: measured_end
            .saturating_duration_since(measure_from)
            .as_secs_f64(),
        stopped_by: stopped_by(settings.stop, timed_out, interrupted, all_ended_early),
        sessions_ended_early,
        servers_usage,
        client_cpu_seconds,
        driver: settings.driver,
        znodes,
    };
    let report = Report::new(facts, &shared.control.stats());

    // The sessions' tasks are over, so their clients are dropped and closing.
    close_watched(state_watchers).await;
    Ok(Finished {
        report,
        admin,
        paths: shared.paths.clone(),
        deadline,
    })
}

/// The znodes under the run's root, counted by the server for the independent client
/// (getAllChildrenNumber), after a sync: sessions on other servers of a cluster may have had
/// writes acknowledged that the admin session's server has not applied yet.
async fn count_znodes(admin: &zk::Client, paths: &Paths, deadline: Instant) -> anyhow::Result<i64> {
    let counting = async {
        admin
            .sync(paths.root())
            .await
            .map_err(|e| anyhow::anyhow!("sync before counting: {}", error_code(&e)))?;
        let n = admin
            .count_descendants_number(paths.root())
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "counting the znodes under {}: {}",
                    paths.root(),
                    error_code(&e)
                )
            })?;
        Ok(n as i64)
    };
    within(deadline, "counting the run's znodes", counting).await
}

/// Opens the admin session, makes the run's tree with it, then opens the run's sessions.
async fn set_up(
    settings: &Settings,
    paths: &Paths,
    workload: &Workload,
) -> anyhow::Result<(zk::Client, Vec<Link>)> {
    let deadline = settings.deadline;
    let admin = connect(&settings.servers[0], settings.session_timeout).await?;
    let mut rng = fastrand::Rng::with_seed(settings.seed);
    let preparing = tree::prepare(&admin, paths, workload, settings.sessions, &mut rng);
    let leftover = within(deadline, "setup", preparing).await?;
    if leftover > 0 {
        eprintln!(
            "warden bench: removed {leftover} znodes an earlier run left under {}",
            paths.root()
        );
    }
    let clients = within(deadline, "connecting the sessions", connect_all(settings)).await?;
    Ok((admin, clients))
}

fn stopped_by(
    rule: StopRule,
    timed_out: bool,
    interrupted: bool,
    all_ended_early: bool,
) -> StoppedBy {
    if timed_out {
        StoppedBy::TimeLimit
    } else if interrupted {
        StoppedBy::Interrupted
    } else if all_ended_early {
        StoppedBy::SessionsEnded
    } else {
        match rule {
            StopRule::Duration(_) => StoppedBy::Duration,
            StopRule::Requests(_) => StoppedBy::Requests,
            StopRule::LoadComplete => StoppedBy::LoadComplete,
        }
    }
}

/// Waits until every session has finished, the deadline passes (the sessions are then
/// aborted), or Ctrl-C (the sessions then stop sending and finish what is outstanding).
/// Returns the sessions' ends, whether the deadline passed and whether Ctrl-C came.
async fn wait_for_sessions(
    tasks: &mut JoinSet<SessionEnd>,
    control: &Control,
    deadline: Instant,
) -> anyhow::Result<(Vec<SessionEnd>, bool, bool)> {
    let mut ends = Vec::with_capacity(tasks.len());
    let mut interrupted = false;
    let timed_out = loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                Some(end) => ends.push(end.context("a session's task failed")?),
                None => break false,
            },
            _ = tokio::time::sleep_until(deadline.into()) => break true,
            _ = tokio::signal::ctrl_c(), if !interrupted => {
                interrupted = true;
                control.stop();
                eprintln!("\nwarden bench: interrupted; waiting for outstanding requests");
            },
        }
    };
    if timed_out {
        eprintln!("\nwarden bench: time limit reached; abandoning outstanding requests");
        control.stop();
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    Ok((ends, timed_out, interrupted))
}

/// Waits a little for sessions whose clients are all dropped to close, so that the server sees
/// closeSession rather than sessions that expire later.
async fn close_watched(watchers: Vec<zk::StateWatcher>) {
    let closing = futures::future::join_all(
        watchers
            .into_iter()
            .map(|mut watcher| async move { while !watcher.changed().await.is_terminated() {} }),
    );
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, closing).await;
}

async fn within<T>(
    deadline: Instant,
    what: &str,
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout_at(deadline.into(), work).await {
        Ok(result) => result,
        Err(_) => bail!("{what} did not finish within the time limit"),
    }
}

pub async fn connect(server: &str, session_timeout: Duration) -> anyhow::Result<zk::Client> {
    let connecting = zk::Client::connector()
        .with_session_timeout(session_timeout)
        .with_fail_eagerly()
        .connect(server);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => {
            bail!(
                "cannot open a session on {server}: {} (is a server listening there?)",
                error_code(&error)
            )
        }
        Err(_) => bail!(
            "cannot open a session on {server}: no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ),
    }
}

/// One session per `--sessions`, spread over the servers in turn.
async fn connect_all(settings: &Settings) -> anyhow::Result<Vec<Link>> {
    let servers = &settings.servers;
    let timeout = settings.session_timeout;
    stream::iter(0..settings.sessions as usize)
        .map(|i| {
            let server = &servers[i % servers.len()];
            async move {
                match settings.driver {
                    Driver::Client => connect(server, timeout).await.map(Link::client),
                    Driver::Lean => {
                        let connecting = LeanLink::connect(server, timeout);
                        match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
                            Ok(link) => link
                                .map(Link::lean)
                                .with_context(|| format!("cannot open a session on {server}")),
                            Err(_) => bail!(
                                "cannot open a session on {server}: no answer within {} s",
                                CONNECT_TIMEOUT.as_secs()
                            ),
                        }
                    }
                }
            }
        })
        .buffered(CONNECTS_AT_ONCE)
        .try_collect()
        .await
}

/// Prints a line on stderr every `every`: phase, time, answers, rate, errors, requests outstanding.
/// On a terminal the line rewrites itself.
async fn show_progress(shared: Arc<Shared>, every: Duration) {
    let control = &shared.control;
    let terminal = std::io::stderr().is_terminal();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    let (mut last_ok, mut last_at) = (0u64, Instant::now());
    loop {
        tick.tick().await;
        let now = Instant::now();
        let ok = control.ok.load(Ordering::Relaxed);
        let errors = control.errors.load(Ordering::Relaxed);
        let in_flight = control.in_flight.load(Ordering::Relaxed);
        let (phase, seconds) = if now < control.measure_from {
            ("warm-up", -(control.measure_from - now).as_secs_f64())
        } else {
            ("measure", (now - control.measure_from).as_secs_f64())
        };
        let rate = (ok - last_ok) as f64 / (now - last_at).as_secs_f64();
        (last_ok, last_at) = (ok, now);
        let line = format!(
            "{phase} {seconds:7.1} s  ok {ok:>10}  {rate:>9.0}/s  errors {errors:>6}  in flight {in_flight:>5}"
        );
        if terminal {
            eprint!("\r{line}\x1b[K");
        } else {
            eprintln!("{line}");
        }
    }
}
