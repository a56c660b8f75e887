//! Real server processes for integration tests: Apache ZooKeeper 3.9.5 (through
//! `scripts/zookeeper/run.sh`, which `exec`s java, so the child's pid is ZooKeeper's own) and the
//! `warden` binary, each from a zoo.cfg in a temporary directory of its own, on a free loopback
//! port. Every process is killed by pid when its guard drops, whatever way the test ends
//! (panics included). On a panic the directory (config, data, log) is kept and its path printed.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// The library's port picker, so that tests and embedded clusters share one record of the
/// ports handed out in this process.
pub use warden_server::embed::free_port;

/// The `srvr` four-letter word, or `None` if nothing answers.
pub fn srvr(port: u16) -> Option<String> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"srvr").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// A server process of this test's own. Dropping it kills the process (by pid) and waits for
/// it; its directory is removed unless the thread is panicking.
pub struct ServerProcess {
    pub name: &'static str,
    child: Child,
    pub dir: PathBuf,
    pub port: u16,
}

impl ServerProcess {
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// The last `lines` lines of the process's stdout and stderr.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path(), lines)
    }

    /// `Err` with the exit status if the process has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "{} (pid {}) exited: {status}\n{}",
                self.name,
                self.pid(),
                self.log_tail(30)
            )),
            Err(error) => Err(format!("{}: {error}", self.name)),
        }
    }

    /// Waits until `srvr` answers "Mode: standalone", the process dies or `timeout` passes.
    pub fn wait_until_serving(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            if srvr(self.port).is_some_and(|answer| answer.contains("Mode: standalone")) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not serve on port {} within {timeout:?}:\n{}",
                    self.name,
                    self.port,
                    self.log_tail(40)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Child::kill sends SIGKILL to this child's pid only.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "{} (pid {}) killed; its config, data and log are kept in {}",
                self.name,
                self.pid(),
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The last `lines` lines of the file at `path` ("" if there is none).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let log = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A new directory `warden-<label>-<pid>-<nanos>` under the system's temporary directory, with
/// an empty `data` directory inside.
pub fn temp_dir(label: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("warden-{label}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(dir.join("data")).unwrap();
    dir
}

/// A new directory `warden-<label>-…` under the system's temporary directory, removed when
/// the returned guard is dropped: for files a test makes (certificates, configurations) and
/// no server keeps.
pub fn scratch_dir(label: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("warden-{label}-"))
        .tempdir()
        .unwrap()
}

/// Writes `dir/zoo.cfg`: `body` plus dataDir, clientPort and clientPortAddress.
fn write_zoo_cfg(dir: &Path, port: u16, body: &str) -> PathBuf {
    let config = format!(
        "{body}\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n",
        dir.join("data").display()
    );
    let path = dir.join("zoo.cfg");
    fs::write(&path, config).unwrap();
    path
}

/// Installs ZooKeeper 3.9.5 if it is not yet (scripts/zookeeper/install.sh: java, mvn and Maven
/// Central).
pub fn install_zookeeper() {
    let install = Command::new(repo_root().join("scripts/zookeeper/install.sh"))
        .output()
        .expect("running install.sh");
    assert!(
        install.status.success(),
        "ZooKeeper 3.9.5 could not be installed (needs java and mvn, and Maven Central):\n{}",
        String::from_utf8_lossy(&install.stderr)
    );
}

/// ZooKeeper 3.9.5 from `config` (standalone or ensemble member, as its server.N lines say),
/// with a heap of `heap` (e.g. "256m") and `jvm_opts` as extra JVM flags.
pub fn zookeeper_command(config: &Path, heap: &str, jvm_opts: &str) -> Command {
    let mut command = Command::new(repo_root().join("scripts/zookeeper/run.sh"));
    command
        .arg(config)
        .env("ZK_HEAP", heap)
        .env("ZK_JVM_OPTS", jvm_opts);
    command
}

/// `warden server --zoo-cfg config`, the binary cargo built for this test.
/// The log filter of test servers: Warden and openraft at info, to read when a test fails;
/// raft-log and chunked-wal at warn, as by default, since raft-log logs a line per fsync at
/// info once its first file is full and would bury the rest.
pub const TEST_LOG_FILTER: &str = "info,raft_log=warn,chunked_wal=warn";

pub fn warden_command(config: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command.arg("server").arg("--zoo-cfg").arg(config);
    command
}

/// Starts `command` with stdout and stderr appended to `log` (so a restart keeps the earlier
/// lives' lines) and no stdin.
pub fn spawn_logged(mut command: Command, log: &Path) -> Child {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("opening the server log");
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("a second log handle"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|error| panic!("starting {command:?}: {error}"))
}

/// Installs ZooKeeper 3.9.5 if needed and starts it on a free port from a zoo.cfg made of
/// `zoo_cfg_body`, with `jvm_opts` as extra JVM flags. Does not wait for it to serve.
pub fn spawn_zookeeper(zoo_cfg_body: &str, jvm_opts: &str) -> ServerProcess {
    spawn_zookeeper_in(temp_dir("zookeeper"), zoo_cfg_body, jvm_opts)
}

/// [`spawn_zookeeper`] in `dir` (from [`temp_dir`]), whose `data` directory the caller may
/// have filled (a `version-2/snapshot.<zxid>` for ZooKeeper to load).
pub fn spawn_zookeeper_in(dir: PathBuf, zoo_cfg_body: &str, jvm_opts: &str) -> ServerProcess {
    install_zookeeper();
    let port = free_port();
    let config = write_zoo_cfg(&dir, port, zoo_cfg_body);
    let child = spawn_logged(
        zookeeper_command(&config, "512m", jvm_opts),
        &dir.join("server.log"),
    );
    ServerProcess {
        name: "ZooKeeper",
        child,
        dir,
        port,
    }
}

/// Starts `warden server --zoo-cfg` on a free port from a zoo.cfg made of `zoo_cfg_body`. Does
/// not wait for it to serve.
pub fn spawn_warden(zoo_cfg_body: &str) -> ServerProcess {
    let dir = temp_dir("warden");
    let port = free_port();
    let config = write_zoo_cfg(&dir, port, zoo_cfg_body);
    let child = spawn_logged(warden_command(&config), &dir.join("server.log"));
    ServerProcess {
        name: "Warden",
        child,
        dir,
        port,
    }
}
