//! `warden bench`: drives any ZooKeeper-compatible server(s) with a workload, through the
//! independent `zookeeper-client` crate, and reports throughput and latency.
//!
//! - `workload`: what the sessions send (named workloads and TOML workload files).
//! - `tree`: the znodes of a run, made before it and removed after it.
//! - `session`: one session's loop: draw, send (pipelined), count.
//! - `runner`: a run from start to end: connect, set up, warm up, measure, stop.
//! - `stats`: latency histograms and error counts.
//! - `process`: the servers' CPU time and memory from /proc (`--pid`).
//! - `report`: the table and the JSON.
//! - `smoketest`, `watches`: fixed sequences run instead of a workload (zk-smoketest's, and
//!   watches at scale), through the lean driver.

mod lean;
mod link;
mod process;
mod report;
mod runner;
mod session;
mod smoketest;
mod stats;
mod tree;
mod watches;
mod workload;

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;

use self::runner::{Driver, Settings, StopRule};
use self::workload::{Plan, Workload};

pub const SESSIONS_MAX: u32 = 10_000;
/// Outstanding requests over all sessions.
pub const IN_FLIGHT_MAX: u64 = 1_000_000;
/// Value bytes of the outstanding requests over all sessions, at the most: each is held in
/// the bench's memory until answered.
const IN_FLIGHT_BYTES_MAX: u64 = 4 << 30;
const SERVERS_MAX: usize = 64;
const THREADS_MAX: usize = 64;
/// A week: longer runs are a mistake in the arguments.
const SECONDS_MAX: f64 = 7.0 * 24.0 * 3600.0;
/// Added to warm-up plus duration for the default hard time limit of a timed run: room for
/// setup and cleanup.
const TIME_LIMIT_SLACK_SECONDS: f64 = 120.0;
/// Default hard time limit of a run that counts requests or loads znodes.
const TIME_LIMIT_UNTIMED_SECONDS: f64 = 1800.0;
const DURATION_DEFAULT_SECONDS: f64 = 10.0;
const WARMUP_DEFAULT_SECONDS: f64 = 2.0;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Servers as host:port, comma-separated; sessions are spread over them in turn.
    #[arg(short, long, value_delimiter = ',', default_value = "127.0.0.1:2181")]
    pub servers: Vec<String>,

    /// A named workload (create, mixed, clickhouse, read, load) or the path of a TOML workload
    /// file; or a fixed sequence through the lean driver: `smoketest`, zk-smoketest's latency
    /// sequence on `--nodes` znodes [default 10,000], `--pipeline` outstanding [default
    /// 10,000]; `watches`, each of `--sessions` sessions watching `--nodes` znodes [default
    /// 100], each changed in turn.
    #[arg(short, long, default_value = "mixed")]
    pub workload: String,

    /// Concurrent sessions.
    #[arg(short = 'c', long, default_value_t = 8)]
    pub sessions: u32,

    /// Seconds to measure, after the warm-up [default: 10].
    #[arg(short, long, conflicts_with = "requests")]
    pub duration: Option<f64>,

    /// Count this many requests, then stop.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,

    /// Seconds of warm-up, sent but not counted [default: 2; 0 for load workloads].
    #[arg(long)]
    pub warmup: Option<f64>,

    /// Hard limit in seconds on the whole run, setup and cleanup included [default: warm-up +
    /// duration + 120, or 1800 with --requests and for load workloads].
    #[arg(long)]
    pub time_limit: Option<f64>,

    /// Requests each session keeps outstanding [default: the workload's; 1, and 64 for load].
    #[arg(short, long)]
    pub pipeline: Option<u32>,

    /// Znodes a load workload creates.
    #[arg(long)]
    pub nodes: Option<u64>,

    /// Parents a load workload spreads its znodes over.
    #[arg(long)]
    pub parents: Option<u32>,

    /// Size in bytes of every value the workload writes, in place of the sizes it names (up
    /// to 64 MiB; the servers must accept such packets: ZooKeeper's jute.maxbuffer, Warden's
    /// limits.frame_bytes_max).
    #[arg(long)]
    pub value_bytes: Option<u32>,

    /// The znode everything of the run lies under: removed before the run, and after it
    /// unless --keep.
    #[arg(long, default_value = "/warden-bench")]
    pub root: String,

    /// Leave the run's znodes on the server (to measure memory or restart time with them).
    #[arg(long)]
    pub keep: bool,

    /// Process id of a server to sample CPU time and memory of; repeat or comma-separate.
    #[arg(long = "pid", value_delimiter = ',')]
    pub pids: Vec<u32>,

    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Seconds between progress lines on stderr; 0 for none.
    #[arg(long, default_value_t = 1.0)]
    pub progress: f64,

    /// Session timeout to ask the server for, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub session_timeout_ms: u64,

    /// Seed of the random draws [default: random].
    #[arg(long)]
    pub seed: Option<u64>,

    /// How requests are sent: through the independent zookeeper-client crate, or written
    /// straight onto each session's socket (a fraction of the client's CPU per request; the
    /// run's writes are checked through the client afterwards either way).
    #[arg(long, value_enum, default_value_t = Driver::Client)]
    pub driver: Driver,

    /// Worker threads of the bench's own runtime; they share the machine with the server.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,

    /// Print the workload's TOML and exit: a start for a workload file of one's own.
    #[arg(long)]
    pub print_workload: bool,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.print_workload {
        print!("{}", workload_text(&args.workload)?);
        return Ok(());
    }
    match args.workload.as_str() {
        SMOKETEST => return run_smoketest(&args),
        WATCHES => return run_watches(&args),
        _ => {}
    }
    let mut workload = Workload::resolve(&args.workload)?;
    workload.resize_load(args.nodes, args.parents)?;
    workload.resize_values(args.value_bytes)?;
    let settings = args.settings(&workload)?;
    let runtime = args.runtime()?;
    runtime.block_on(async {
        let finished = runner::run(settings, workload).await?;
        if args.json {
            println!("{}", finished.report.to_json());
        } else {
            print!("{}", finished.report.to_table());
        }
        if let Some(removed) = finished.finish(args.keep).await? {
            eprintln!(
                "warden bench: removed the run's {removed} znodes under {}",
                args.root
            );
        }
        anyhow::Ok(())
    })
}

/// The settings every fixed sequence (smoketest, watches) shares.
pub struct Sequence {
    pub servers: Vec<String>,
    /// Everything the sequence makes lies under it.
    pub root: String,
    pub session_timeout: Duration,
    /// The hard limit on the whole sequence.
    pub deadline: Instant,
    /// Servers whose CPU and memory are measured.
    pub pids: Vec<u32>,
}

/// The name that runs zk-smoketest's sequence (bench/smoketest.rs) instead of a workload.
const SMOKETEST: &str = "smoketest";
/// zk-latencies.py's default `--znode_count`.
const SMOKETEST_NODES_DEFAULT: u64 = 10_000;
/// Requests the smoketest keeps outstanding unless told (zk-latencies.py sends them all).
const SMOKETEST_WINDOW_DEFAULT: u32 = 10_000;

fn run_smoketest(args: &BenchArgs) -> anyhow::Result<()> {
    let znodes = args.nodes.unwrap_or(SMOKETEST_NODES_DEFAULT);
    ensure!(
        (1..=workload::LOAD_NODES_MAX).contains(&znodes),
        "--nodes must be within 1..={}",
        workload::LOAD_NODES_MAX
    );
    let run = args.sequence("one session per server, sized with --nodes and --pipeline")?;
    let window = args.pipeline.unwrap_or(SMOKETEST_WINDOW_DEFAULT);
    workload::validate_pipeline(window)?;
    let settings = smoketest::Settings {
        run,
        znodes,
        window: u64::from(window),
    };
    args.run_sequence(
        &settings.run,
        async |admin| smoketest::run(&settings, admin).await,
        |phases| smoketest::table(phases),
    )
}

/// The name that runs watches at scale (bench/watches.rs) instead of a workload.
const WATCHES: &str = "watches";
/// Znodes each session watches unless told.
const WATCHES_NODES_DEFAULT: u64 = 100;
/// Each session asks for all its watches at once.
const WATCHES_NODES_MAX: u64 = 100_000;
const WATCHES_MAX: u64 = 10_000_000;

fn run_watches(args: &BenchArgs) -> anyhow::Result<()> {
    let znodes = args.nodes.unwrap_or(WATCHES_NODES_DEFAULT);
    ensure!(
        (1..=WATCHES_NODES_MAX).contains(&znodes),
        "--nodes must be within 1..={WATCHES_NODES_MAX}"
    );
    ensure!(
        (1..=SESSIONS_MAX).contains(&args.sessions),
        "--sessions must be within 1..={SESSIONS_MAX}"
    );
    ensure!(
        u64::from(args.sessions) * znodes <= WATCHES_MAX,
        "--sessions x --nodes is above {WATCHES_MAX} watches"
    );
    ensure!(
        args.pipeline.is_none(),
        "the watches run asks for each session's watches at once: it takes no --pipeline"
    );
    let settings = watches::Settings {
        run: args.sequence("sized with --sessions and --nodes")?,
        sessions: args.sessions,
        znodes,
    };
    args.run_sequence(
        &settings.run,
        async |admin| watches::run(&settings, admin).await,
        watches::Report::table,
    )
}

fn workload_text(name_or_path: &str) -> anyhow::Result<String> {
    match workload::NAMED
        .iter()
        .find(|(name, _)| *name == name_or_path)
    {
        Some((_, text)) => Ok(text.to_string()),
        None => std::fs::read_to_string(name_or_path)
            .with_context(|| format!("no workload named {name_or_path:?}")),
    }
}

impl BenchArgs {
    /// What every fixed sequence (smoketest, watches) runs with. It takes none of a
    /// workload's timing flags; `sizing` says what it takes instead.
    fn sequence(&self, sizing: &str) -> anyhow::Result<Sequence> {
        let start = Instant::now();
        ensure!(
            self.duration.is_none()
                && self.requests.is_none()
                && self.warmup.is_none()
                && self.parents.is_none()
                && self.value_bytes.is_none()
                && !self.keep,
            "{} runs a fixed sequence through the lean driver, {sizing}",
            self.workload
        );
        let time_limit = seconds(
            "--time-limit",
            self.time_limit.unwrap_or(TIME_LIMIT_UNTIMED_SECONDS),
            false,
        )?;
        Ok(Sequence {
            servers: self.servers.clone(),
            root: self.root.clone(),
            session_timeout: Duration::from_millis(self.session_timeout_ms),
            deadline: start + Duration::from_secs_f64(time_limit),
            pids: self.pids.clone(),
        })
    }

    /// Runs a fixed sequence on the bench's runtime, given a session of the independent
    /// client on the first server, and prints what it reports: as JSON, or as `table` says.
    fn run_sequence<R: serde::Serialize>(
        &self,
        run: &Sequence,
        sequence: impl AsyncFnOnce(&zookeeper_client::Client) -> anyhow::Result<R>,
        table: impl FnOnce(&R) -> String,
    ) -> anyhow::Result<()> {
        self.runtime()?.block_on(async {
            let admin = runner::connect(&run.servers[0], run.session_timeout).await?;
            let report = sequence(&admin).await?;
            if self.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", table(&report));
            }
            anyhow::Ok(())
        })
    }

    /// The bench's own runtime, of `--threads` workers.
    fn runtime(&self) -> anyhow::Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.threads)
            .enable_all()
            .build()
            .context("starting the bench's runtime")
    }

    fn settings(&self, workload: &Workload) -> anyhow::Result<Settings> {
        let start = Instant::now();
        ensure!(
            !self.servers.is_empty() && self.servers.len() <= SERVERS_MAX,
            "give 1 to {SERVERS_MAX} servers"
        );
        for server in &self.servers {
            ensure!(
                !server.is_empty() && !server.contains('/'),
                "--servers takes host:port entries, not {server:?}"
            );
        }
        ensure!(
            (1..=SESSIONS_MAX).contains(&self.sessions),
            "--sessions must be within 1..={SESSIONS_MAX}"
        );
        ensure!(
            (1..=THREADS_MAX).contains(&self.threads),
            "--threads must be within 1..={THREADS_MAX}"
        );
        ensure!(
            self.pids.len() <= process::PIDS_MAX,
            "at most {} --pid",
            process::PIDS_MAX
        );
        let pipeline = self.pipeline.unwrap_or(workload.pipeline);
        workload::validate_pipeline(pipeline)?;
        ensure!(
            u64::from(self.sessions) * u64::from(pipeline) <= IN_FLIGHT_MAX,
            "--sessions x --pipeline is above {IN_FLIGHT_MAX} outstanding requests"
        );
        let in_flight_bytes =
            u64::from(self.sessions) * u64::from(pipeline) * workload.request_bytes_max();
        ensure!(
            in_flight_bytes <= IN_FLIGHT_BYTES_MAX,
            "--sessions x --pipeline x the workload's largest request is {in_flight_bytes} \
             bytes in flight, above {IN_FLIGHT_BYTES_MAX}: fewer sessions or a shorter pipeline"
        );
        let is_load = matches!(workload.plan, Plan::Load(_));
        let (stop, warmup, default_limit) = if is_load {
            ensure!(
                self.duration.is_none() && self.requests.is_none(),
                "a load workload runs until its znodes exist: size it with --nodes, not --duration or --requests"
            );
            ensure!(
                self.warmup.is_none(),
                "a load workload has no warm-up: every create counts"
            );
            (StopRule::LoadComplete, 0.0, TIME_LIMIT_UNTIMED_SECONDS)
        } else {
            let warmup = seconds(
                "--warmup",
                self.warmup.unwrap_or(WARMUP_DEFAULT_SECONDS),
                true,
            )?;
            match self.requests {
                Some(requests) => {
                    ensure!(requests >= 1, "--requests must be at least 1");
                    (
                        StopRule::Requests(requests),
                        warmup,
                        TIME_LIMIT_UNTIMED_SECONDS,
                    )
                }
                None => {
                    let duration = seconds(
                        "--duration",
                        self.duration.unwrap_or(DURATION_DEFAULT_SECONDS),
                        false,
                    )?;
                    let stop = StopRule::Duration(Duration::from_secs_f64(duration));
                    (stop, warmup, warmup + duration + TIME_LIMIT_SLACK_SECONDS)
                }
            }
        };
        let time_limit = seconds(
            "--time-limit",
            self.time_limit.unwrap_or(default_limit),
            false,
        )?;
        let progress = seconds("--progress", self.progress, true)?;
        ensure!(
            self.session_timeout_ms >= 1,
            "--session-timeout-ms must be positive"
        );
        Ok(Settings {
            servers: self.servers.clone(),
            sessions: self.sessions,
            pipeline,
            stop,
            warmup: Duration::from_secs_f64(warmup),
            deadline: start + Duration::from_secs_f64(time_limit),
            root: self.root.clone(),
            pids: self.pids.clone(),
            progress: (progress > 0.0).then(|| Duration::from_secs_f64(progress)),
            session_timeout: Duration::from_millis(self.session_timeout_ms),
            seed: self.seed.unwrap_or_else(|| fastrand::u64(..)),
            driver: self.driver,
        })
    }
}

/// A number of seconds from the command line, within bounds.
fn seconds(flag: &str, value: f64, zero_allowed: bool) -> anyhow::Result<f64> {
    let low_ok = if zero_allowed {
        value >= 0.0
    } else {
        value > 0.0
    };
    ensure!(
        low_ok && value <= SECONDS_MAX,
        "{flag} {value} is out of range (0 to {SECONDS_MAX} seconds)"
    );
    Ok(value)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn settings(args: &[&str]) -> anyhow::Result<Settings> {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))?;
        let mut workload = Workload::resolve(&cli.bench.workload)?;
        workload.resize_load(cli.bench.nodes, cli.bench.parents)?;
        workload.resize_values(cli.bench.value_bytes)?;
        cli.bench.settings(&workload)
    }

    #[test]
    fn defaults_are_a_ten_second_timed_run() {
        let s = settings(&[]).unwrap();
        assert!(matches!(s.stop, StopRule::Duration(d) if d == Duration::from_secs(10)));
        assert_eq!(
            (s.warmup, s.pipeline, s.sessions),
            (Duration::from_secs(2), 1, 8)
        );
        assert_eq!(s.servers, ["127.0.0.1:2181"]);
        let limit = s.deadline.duration_since(Instant::now());
        assert!(
            limit > Duration::from_secs(120) && limit <= Duration::from_secs(132),
            "{limit:?}"
        );
    }

    #[test]
    fn load_runs_until_done_and_takes_its_pipeline() {
        let s = settings(&[
            "-w", "load", "--nodes", "1000", "--pid", "1,2", "-s", "a:1,b:2",
        ])
        .unwrap();
        assert!(matches!(s.stop, StopRule::LoadComplete));
        assert_eq!((s.warmup, s.pipeline), (Duration::ZERO, 64));
        assert_eq!((s.pids.as_slice(), s.servers.len()), ([1, 2].as_slice(), 2));
    }

    #[test]
    fn large_values_take_a_short_pipeline() {
        let s = settings(&[
            "-w",
            "load",
            "--value-bytes",
            "10485760",
            "-c",
            "8",
            "-p",
            "1",
        ]);
        assert_eq!(s.unwrap().pipeline, 1);
    }

    #[test]
    fn contradictions_are_refused() {
        let refused = [
            &["-w", "load", "-d", "5"][..],
            &["-w", "load", "--warmup", "1"],
            &["-w", "mixed", "--nodes", "5"],
            &["-d", "0"],
            &["-d", "-1"],
            &["-d", "5", "-n", "10"],
            &["-n", "0"],
            &["-c", "0"],
            &["-c", "10001"],
            &["-p", "0"],
            &["-c", "1000", "-p", "10000"],
            &["--time-limit", "0"],
            &["--threads", "0"],
            &["-s", "host:1/chroot"],
            &["-w", "load", "--value-bytes", "10485760", "-c", "8"],
        ];
        for args in refused {
            assert!(settings(args).is_err(), "{args:?} was accepted");
        }
    }

    #[test]
    fn fixed_sequences_refuse_a_workloads_flags() {
        let refused = [
            &["-w", "smoketest", "-d", "5"][..],
            &["-w", "smoketest", "--nodes", "0"],
            &["-w", "smoketest", "--keep"],
            &["-w", "watches", "-p", "5"],
            &["-w", "watches", "--nodes", "0"],
            &["-w", "watches", "-c", "10000", "--nodes", "100000"],
            &["-w", "watches", "--warmup", "1"],
            &["-w", "watches", "--parents", "3"],
            &["-w", "smoketest", "--value-bytes", "1000"],
        ];
        for args in refused {
            let cli =
                Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).unwrap();
            // Refused before any connection is tried: no server listens here.
            let error = run(cli.bench).expect_err(&format!("{args:?} was accepted"));
            assert!(
                !format!("{error:#}").contains("cannot open"),
                "{args:?}: {error:#}"
            );
        }
    }

    #[test]
    fn named_workloads_print_as_toml() {
        assert!(workload_text("load").unwrap().contains("[load]"));
        assert!(workload_text("/no/such/file.toml").is_err());
    }
}
