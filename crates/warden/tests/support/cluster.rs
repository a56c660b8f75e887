//! Real multi-server ensembles on loopback for the cluster tests: Warden (`warden server
//! --zoo-cfg`) or Apache ZooKeeper 3.9.5 (`scripts/zookeeper/run.sh`), each member started from
//! the same zoo.cfg text, so one test runs unchanged against both systems. Every member has a
//! directory of its own (zoo.cfg, data/myid, server.log) under one root. A member can be killed
//! with SIGKILL, frozen with SIGSTOP, stopped with SIGTERM, restarted on the same data, or wiped.
//! Every process is killed by pid when the cluster drops, panics included; on a panic the root is
//! kept and its path, each member's state and log tail printed.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use super::servers::{
    TEST_LOG_FILTER, free_port, install_zookeeper, log_tail, spawn_logged, srvr, temp_dir,
    warden_command, zookeeper_command,
};
use super::warden::signal;

/// tickTime of every cluster: session timeouts from 2 s, a silent peer dropped after syncLimit
/// (2) ticks.
pub const TICK: Duration = Duration::from_millis(1000);
/// How long a whole ensemble may take to start and elect: JVMs on two shared cores are slow.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// ZooKeeper's heap per member; five of them must fit beside the build.
const ZOOKEEPER_HEAP: &str = "256m";
/// No wait of a cluster runs past this long after the cluster was made, whatever its own
/// timeout: the blocking waits cannot be interrupted, so this is what keeps a test's time bounded.
pub const LIFETIME_MAX: Duration = Duration::from_secs(90);
/// How often the waits below poll `srvr`.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Lines of each member's log printed when a test fails.
const LOG_TAIL_LINES: usize = 25;
/// What ZooKeeper (and Warden) answers to a four-letter word while it has no quorum.
const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    Warden,
    ZooKeeper,
}

impl System {
    /// The system the cluster tests run against: WARDEN_CLUSTER_SYSTEM (`zookeeper` or
    /// `warden`), Warden when unset.
    pub fn for_tests() -> System {
        match std::env::var("WARDEN_CLUSTER_SYSTEM").as_deref() {
            Ok("zookeeper") => System::ZooKeeper,
            Ok("warden") | Err(_) => System::Warden,
            Ok(other) => panic!("WARDEN_CLUSTER_SYSTEM={other:?}: expected zookeeper or warden"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            System::Warden => "Warden",
            System::ZooKeeper => "ZooKeeper",
        }
    }
}

/// What a member's `srvr` says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Leader,
    Follower,
    Observer,
    /// Cut off from its quorum, serving reads in read-only mode.
    ReadOnly,
    /// Up, but without a quorum (or still joining one).
    NotServing,
    /// Nothing answers: killed, frozen, or not listening yet.
    Down,
}

impl Mode {
    fn of(answer: Option<&str>) -> Mode {
        let Some(answer) = answer else {
            return Mode::Down;
        };
        if answer.contains(NOT_SERVING) {
            return Mode::NotServing;
        }
        match answer.lines().find_map(|line| line.strip_prefix("Mode: ")) {
            Some("leader") => Mode::Leader,
            Some("follower") => Mode::Follower,
            Some("observer") => Mode::Observer,
            Some("read-only") => Mode::ReadOnly,
            _ => Mode::Down,
        }
    }

    pub fn is_serving(self) -> bool {
        matches!(self, Mode::Leader | Mode::Follower | Mode::Observer)
    }
}

/// One server of the ensemble: its server.N line and, while it runs, its process.
pub struct Member {
    /// The N of server.N and of its myid file.
    pub id: usize,
    pub observer: bool,
    pub client_port: u16,
    /// Where its admin HTTP server listens, on 127.0.0.1.
    pub admin_port: u16,
    /// Where it serves `/metrics`, on 127.0.0.1, when the extra zoo.cfg lines name
    /// ZooKeeper's Prometheus provider.
    pub metrics_port: u16,
    quorum_port: u16,
    election_port: u16,
    pub dir: PathBuf,
    process: Option<Child>,
}

impl Member {
    /// Its `server.N=...` entry, as zoo.cfg and reconfig take it.
    pub fn server_line(&self) -> String {
        let role = if self.observer { ":observer" } else { "" };
        format!(
            "server.{}=127.0.0.1:{}:{}{role};127.0.0.1:{}",
            self.id, self.quorum_port, self.election_port, self.client_port
        )
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// Where the other members reach it (its quorum port).
    pub fn quorum_address(&self) -> String {
        format!("127.0.0.1:{}", self.quorum_port)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The zoo.cfg it is started from (rewritten by the server itself after a reconfig).
    pub fn cfg_path(&self) -> PathBuf {
        self.dir.join("zoo.cfg")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    pub fn pid(&self) -> u32 {
        self.process.as_ref().expect("the member is running").id()
    }

    /// The whole `srvr` answer, `None` if nothing answers within srvr's timeouts.
    pub fn srvr(&self) -> Option<String> {
        srvr(self.client_port)
    }

    pub fn mode(&self) -> Mode {
        Mode::of(self.srvr().as_deref())
    }

    /// The last zxid it applied, from the `Zxid: 0x...` line of `srvr` while it serves.
    pub fn zxid(&self) -> Option<i64> {
        let answer = self.srvr()?;
        let hex = answer
            .lines()
            .find_map(|line| line.strip_prefix("Zxid: 0x"))?;
        i64::from_str_radix(hex.trim(), 16).ok()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path(), lines)
    }
}

/// Which members `Cluster::wait_until_serving` waits for.
#[derive(Clone, Copy, Debug)]
pub enum Serving {
    /// Every running member (a frozen one included, so freeze none when asking for this).
    All,
    /// A leader and a majority of the participants.
    Quorum,
}

/// The super user every member knows (`super:test`), for the tests that need one (reconfig).
pub const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";
pub const SUPER_CREDENTIAL: &[u8] = b"super:test";

pub struct Cluster {
    pub system: System,
    root: PathBuf,
    pub members: Vec<Member>,
    /// zoo.cfg lines every member gets after the common ones.
    extra_zoo_cfg: String,
    /// Members 1..=founders are the first configuration; the rest are spares, started later
    /// with a zoo.cfg that names every member, for a reconfig to add.
    founders: usize,
    /// LIFETIME_MAX after the cluster was made.
    deadline: Instant,
}

impl Cluster {
    /// Starts `participants` voting members and `observers` observers (ids 1.. in that order)
    /// with `extra_zoo_cfg` lines added to each zoo.cfg, and waits until all of them serve.
    pub fn start(
        system: System,
        participants: usize,
        observers: usize,
        extra_zoo_cfg: &str,
    ) -> Cluster {
        Cluster::start_with_spares(system, participants, observers, 0, extra_zoo_cfg)
    }

    /// Like [`Cluster::start`], with `spares` more participants configured but not started
    /// and not in the first configuration (see [`Cluster::start_spare`]).
    pub fn start_with_spares(
        system: System,
        participants: usize,
        observers: usize,
        spares: usize,
        extra_zoo_cfg: &str,
    ) -> Cluster {
        Cluster::start_prepared(
            system,
            participants,
            observers,
            spares,
            extra_zoo_cfg,
            |_| {},
        )
    }

    /// Like [`Cluster::start_with_spares`], with `prepare` run for every member once its
    /// zoo.cfg and myid are written, before anything starts (to seed its data directory).
    pub fn start_prepared(
        system: System,
        participants: usize,
        observers: usize,
        spares: usize,
        extra_zoo_cfg: &str,
        prepare: impl Fn(&Member),
    ) -> Cluster {
        if system == System::ZooKeeper {
            install_zookeeper();
        }
        let mut cluster =
            Cluster::configure(system, participants, observers, spares, extra_zoo_cfg);
        cluster.members.iter().for_each(prepare);
        let started = Instant::now();
        for i in 0..cluster.founders {
            cluster.spawn(i);
        }
        cluster.wait_until_serving(Serving::All, START_TIMEOUT);
        eprintln!(
            "{} ensemble of {participants} + {observers} observer(s) serving after {:?} in {}",
            system.name(),
            started.elapsed(),
            cluster.root.display()
        );
        cluster
    }

    /// Picks the ports and writes every member's zoo.cfg and myid; starts nothing.
    fn configure(
        system: System,
        participants: usize,
        observers: usize,
        spares: usize,
        extra_zoo_cfg: &str,
    ) -> Cluster {
        let root = temp_dir(&format!("cluster-{}", system.name().to_lowercase()));
        let founders = participants + observers;
        let members: Vec<Member> = (0..founders + spares)
            .map(|i| Member {
                id: i + 1,
                observer: i >= participants && i < founders,
                client_port: free_port(),
                admin_port: free_port(),
                metrics_port: free_port(),
                quorum_port: free_port(),
                election_port: free_port(),
                dir: root.join(format!("server{}", i + 1)),
                process: None,
            })
            .collect();
        let cluster = Cluster {
            system,
            root,
            members,
            extra_zoo_cfg: extra_zoo_cfg.to_owned(),
            founders,
            deadline: Instant::now() + LIFETIME_MAX,
        };
        for member in &cluster.members {
            fs::create_dir_all(member.data_dir()).unwrap();
            fs::write(member.data_dir().join("myid"), format!("{}\n", member.id)).unwrap();
            fs::write(member.cfg_path(), cluster.zoo_cfg(member)).unwrap();
        }
        cluster
    }

    /// The zoo.cfg of `member`: identical for both systems and, but for dataDir, clientPort,
    /// admin.serverPort and metricsProvider.httpPort, for every member.
    fn zoo_cfg(&self, member: &Member) -> String {
        let mut cfg = format!(
            "tickTime={}\ninitLimit=5\nsyncLimit=2\ndataDir={}\nclientPort={}\n\
             clientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\n\
             admin.serverAddress=127.0.0.1\nadmin.serverPort={}\n",
            TICK.as_millis(),
            member.data_dir().display(),
            member.client_port,
            member.admin_port
        );
        if self.members.len() == 1 {
            // Otherwise ZooKeeper runs a lone server.1 as a standalone server.
            cfg.push_str("standaloneEnabled=false\n");
        }
        let named = if member.id <= self.founders {
            self.founders
        } else {
            self.members.len()
        };
        for other in &self.members[..named] {
            cfg.push_str(&other.server_line());
            cfg.push('\n');
        }
        cfg.push_str(&format!(
            "DigestAuthenticationProvider.superDigest={SUPER_DIGEST}\n"
        ));
        cfg.push_str(&self.extra_zoo_cfg);
        cfg.push('\n');
        if self.extra_zoo_cfg.contains("PrometheusMetricsProvider") {
            cfg.push_str(&format!(
                "metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={}\n",
                member.metrics_port
            ));
        }
        cfg
    }

    fn spawn(&mut self, i: usize) {
        let member = &self.members[i];
        assert!(!member.is_running(), "server.{} is running", member.id);
        let command = match self.system {
            System::ZooKeeper => {
                // ZooKeeper reads read-only mode from a system property only.
                let read_only = if self.extra_zoo_cfg.contains("readonlymode.enabled=true") {
                    " -Dreadonlymode.enabled=true"
                } else {
                    ""
                };
                zookeeper_command(
                    &member.cfg_path(),
                    ZOOKEEPER_HEAP,
                    &format!(
                        "-Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}{read_only}"
                    ),
                )
            }
            System::Warden => {
                let mut command = warden_command(&member.cfg_path());
                command.env("WARDEN_LOG", TEST_LOG_FILTER);
                command
            }
        };
        let child = spawn_logged(command, &member.log_path());
        self.members[i].process = Some(child);
    }

    /// Starts a spare member (one configured with `start_with_spares`).
    pub fn start_spare(&mut self, i: usize) {
        assert!(i >= self.founders, "server.{} is not a spare", i + 1);
        self.spawn(i);
    }

    /// kill -9: no chance to flush, close sockets politely or say goodbye to the others.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].process.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the process: its sockets stay open but nothing answers.
    pub fn sigstop(&self, i: usize) {
        signal(self.members[i].pid(), "STOP");
    }

    pub fn sigcont(&self, i: usize) {
        signal(self.members[i].pid(), "CONT");
    }

    /// SIGTERM, then waits (10 s at most) for the exit status.
    pub fn terminate(&mut self, i: usize) -> ExitStatus {
        let pid = self.members[i].pid();
        signal(pid, "TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let child = self.members[i].process.as_mut().unwrap();
            if let Some(status) = child.try_wait().expect("waiting for the member") {
                self.members[i].process = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server.{} (pid {pid}) did not stop within 10 s of SIGTERM",
                self.members[i].id
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts a stopped member again on its own data directory and ports; does not wait.
    pub fn restart(&mut self, i: usize) {
        self.spawn(i);
    }

    /// Deletes everything a stopped member stored but its myid, as if its disk were replaced.
    pub fn wipe(&mut self, i: usize) {
        let member = &self.members[i];
        assert!(!member.is_running(), "stop server.{} first", member.id);
        for entry in fs::read_dir(member.data_dir()).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|name| name == "myid") {
                continue;
            }
            if path.is_dir() {
                fs::remove_dir_all(&path).unwrap();
            } else {
                fs::remove_file(&path).unwrap();
            }
        }
    }

    /// Every member, for a client free to move between them.
    pub fn connect_string(&self) -> String {
        let addresses: Vec<String> = self.members.iter().map(Member::address).collect();
        addresses.join(",")
    }

    /// Member `i` only.
    pub fn member_connect_string(&self, i: usize) -> String {
        self.members[i].address()
    }

    pub fn modes(&self) -> Vec<Mode> {
        self.members.iter().map(Member::mode).collect()
    }

    /// The member whose `srvr` says leader, if exactly one does.
    pub fn leader(&self) -> Option<usize> {
        let modes = self.modes();
        let leaders: Vec<usize> = (0..modes.len())
            .filter(|&i| modes[i] == Mode::Leader)
            .collect();
        match leaders[..] {
            [leader] => Some(leader),
            _ => None,
        }
    }

    /// The running participants that are not `leader`.
    pub fn followers_of(&self, leader: usize) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| i != leader && !self.members[i].observer && self.members[i].is_running())
            .collect()
    }

    /// Panics with its log if a member that should be running has exited.
    pub fn check_alive(&mut self) {
        for member in &mut self.members {
            if let Some(child) = member.process.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "server.{} (pid {}) exited: {status}\n{}",
                    member.id,
                    child.id(),
                    member.log_tail(40)
                );
            }
        }
    }

    /// When a wait of `timeout` starting now must give up.
    fn deadline_after(&self, timeout: Duration) -> Instant {
        (Instant::now() + timeout).min(self.deadline)
    }

    /// Polls `condition` (given every member's mode) until it holds, a member dies or `timeout`
    /// passes (then panics with `what` and every member's mode).
    pub fn wait_for_modes(
        &mut self,
        what: &str,
        timeout: Duration,
        mut condition: impl FnMut(&Cluster, &[Mode]) -> bool,
    ) {
        let deadline = self.deadline_after(timeout);
        loop {
            self.check_alive();
            let modes = self.modes();
            if condition(self, &modes) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what} (limit {timeout:?}, or the cluster's \
                 {LIFETIME_MAX:?}); modes {modes:?}"
            );
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    pub fn wait_until_serving(&mut self, which: Serving, timeout: Duration) {
        let participants = self.members.iter().filter(|m| !m.observer).count();
        self.wait_for_modes(&format!("{which:?} serving"), timeout, |cluster, modes| {
            let leaders = modes.iter().filter(|&&m| m == Mode::Leader).count();
            match which {
                Serving::All => {
                    leaders == 1
                        && (0..modes.len())
                            .all(|i| !cluster.members[i].is_running() || modes[i].is_serving())
                }
                Serving::Quorum => {
                    let voting = (0..modes.len())
                        .filter(|&i| !cluster.members[i].observer && modes[i].is_serving())
                        .count();
                    leaders == 1 && voting > participants / 2
                }
            }
        });
    }

    pub fn wait_until_mode(&mut self, i: usize, mode: Mode, timeout: Duration) {
        let what = format!("server.{} to be {mode:?}", self.members[i].id);
        self.wait_for_modes(&what, timeout, |_, modes| modes[i] == mode);
    }

    pub fn wait_until_member_serving(&mut self, i: usize, timeout: Duration) {
        let what = format!("server.{} to serve", self.members[i].id);
        self.wait_for_modes(&what, timeout, |_, modes| modes[i].is_serving());
    }

    /// Waits until there is exactly one leader and returns it.
    pub fn wait_for_leader(&mut self, timeout: Duration) -> usize {
        self.wait_for_modes("a leader", timeout, |cluster, _| cluster.leader().is_some());
        self.leader().expect("a leader")
    }

    /// Waits until every running member serves and reports the same last zxid, and returns it.
    pub fn wait_until_converged(&mut self, timeout: Duration) -> i64 {
        let deadline = self.deadline_after(timeout);
        self.wait_until_serving(Serving::All, timeout);
        loop {
            let zxids: Vec<Option<i64>> = self
                .members
                .iter()
                .filter(|m| m.is_running())
                .map(Member::zxid)
                .collect();
            if let Some(Some(first)) = zxids.first()
                && zxids.iter().all(|z| *z == Some(*first))
            {
                return *first;
            }
            assert!(
                Instant::now() < deadline,
                "members did not converge within {timeout:?} (or the cluster's \
                 {LIFETIME_MAX:?}): zxids {zxids:x?}"
            );
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Every member's id, mode and zxid, for messages.
    pub fn describe(&self) -> String {
        let states: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                let zxid = m.zxid().map(|z| format!("{z:#x}")).unwrap_or("-".into());
                format!("server.{} {:?} zxid {zxid}", m.id, m.mode())
            })
            .collect();
        states.join("; ")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            // SIGKILL ends a SIGSTOPped process too.
            self.kill9(i);
        }
        if std::thread::panicking() {
            for member in &self.members {
                eprintln!(
                    "--- server.{} log tail ({}):\n{}",
                    member.id,
                    member.log_path().display(),
                    member.log_tail(LOG_TAIL_LINES)
                );
            }
            eprintln!(
                "{} ensemble killed; configs, data and logs are kept in {}",
                self.system.name(),
                self.root.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}
