//! A real `warden server` process that a test can kill -9, stop with SIGTERM and restart on
//! the same data: started from a zoo.cfg in a temporary directory on a free loopback port,
//! killed by PID when dropped however the test ends. Also raw-socket helpers.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use super::servers::{TEST_LOG_FILTER, free_port, spawn_logged, warden_command};

/// How long a server may take to accept connections after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Warden {
    process: Option<Child>,
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The admin HTTP server's port, on 127.0.0.1.
    pub admin_port: u16,
    /// zoo.cfg lines added to the defaults.
    extra: String,
    /// SERVER_JVMFLAGS, as given to zkServer.sh (the JAAS file).
    jvm_flags: String,
    /// WARDEN_LOG, or `None` for the server's default filter.
    log_filter: Option<&'static str>,
}

impl Warden {
    /// Starts a server with tickTime=1000 (so session timeouts from 2 s), everything else
    /// default, plus `extra` zoo.cfg lines.
    pub fn start(extra: &str) -> Warden {
        Warden::start_with_jvm_flags(extra, "")
    }

    /// [`Warden::start`] with `SERVER_JVMFLAGS` set to `jvm_flags` (e.g.
    /// `-Djava.security.auth.login.config=FILE`).
    pub fn start_with_jvm_flags(extra: &str, jvm_flags: &str) -> Warden {
        Warden::start_with(extra, jvm_flags, Some(TEST_LOG_FILTER))
    }

    /// [`Warden::start`] without `WARDEN_LOG`, so with the log filter an operator gets.
    pub fn start_with_default_log(extra: &str) -> Warden {
        Warden::start_with(extra, "", None)
    }

    fn start_with(extra: &str, jvm_flags: &str, log_filter: Option<&'static str>) -> Warden {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut warden = Warden {
            process: None,
            dir,
            port: free_port(),
            admin_port: free_port(),
            extra: extra.to_owned(),
            jvm_flags: jvm_flags.to_owned(),
            log_filter,
        };
        warden.write_config();
        warden.spawn();
        warden
    }

    fn write_config(&self) {
        let config = format!(
            "tickTime=1000\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             4lw.commands.whitelist=*\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={}\n{}\n",
            self.dir.path().join("data").display(),
            self.port,
            self.admin_port,
            self.extra
        );
        fs::write(self.cfg_path(), config).expect("writing zoo.cfg");
    }

    pub fn cfg_path(&self) -> PathBuf {
        self.dir.path().join("zoo.cfg")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("warden.log")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The admin HTTP server's address.
    pub fn admin_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.admin_port))
    }

    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let mut command = warden_command(&self.cfg_path());
        match self.log_filter {
            Some(filter) => command.env("WARDEN_LOG", filter),
            None => command.env_remove("WARDEN_LOG"),
        };
        command.env("SERVER_JVMFLAGS", &self.jvm_flags);
        self.process = Some(spawn_logged(command, &self.log_path()));
        self.wait_until_serving();
    }

    fn wait_until_serving(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self
                .process
                .as_mut()
                .and_then(|p| p.try_wait().ok().flatten())
            {
                panic!("warden exited at start with {status}:\n{}", self.log());
            }
            if self.four_letter("ruok") == "imok" {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "warden did not serve within {START_TIMEOUT:?}:\n{}",
            self.log()
        );
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.process.as_ref().expect("running").id()
    }

    /// kill -9: no chance to flush or say goodbye.
    pub fn kill9(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
    }

    /// SIGTERM, then waits for the exit status (10 s at most).
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut p = self.process.take().expect("running");
        signal(p.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = p.try_wait().expect("waiting") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = p.kill();
                panic!("warden did not stop within 10 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on the same data directory and port.
    pub fn restart(&mut self) {
        assert!(self.process.is_none(), "stop it first");
        self.spawn();
    }

    /// Sends a four-letter word and returns the whole answer ("" if the server is not up).
    pub fn four_letter(&self, word: &str) -> String {
        let Ok(mut s) = TcpStream::connect_timeout(&self.addr(), Duration::from_secs(1)) else {
            return String::new();
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        if s.write_all(word.as_bytes()).is_err() {
            return String::new();
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// A raw socket to the client port.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr()).expect("connecting");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// A raw connection with a session established (its handshake sent and answered).
    pub fn raw_session(&self) -> TcpStream {
        let mut raw = self.raw();
        raw.write_all(&handshake(0, &[0; 16], 10_000, 0)).unwrap();
        read_frame(&mut raw).expect("the handshake is answered");
        raw
    }
}

impl Drop for Warden {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("running kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// A zookeeper-client session to `warden`.
pub async fn client(warden: &Warden) -> zookeeper_client::Client {
    zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&warden.connect_string())
        .await
        .expect("connecting with zookeeper-client")
}

pub fn persistent() -> zookeeper_client::CreateOptions<'static> {
    zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all())
}

pub fn ephemeral() -> zookeeper_client::CreateOptions<'static> {
    zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all())
}

/// A length-prefixed frame around `payload`.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    warden_proto::frame::encode_frame(payload)
}

/// A ConnectRequest frame: a new session (`session_id` 0) or the resume of one.
pub fn handshake(
    session_id: i64,
    password: &[u8],
    timeout_ms: i32,
    last_zxid_seen: i64,
) -> Vec<u8> {
    use warden_proto::Record;
    let mut w = warden_proto::Writer::new();
    warden_proto::ConnectRequest {
        protocol_version: 0,
        last_zxid_seen,
        timeout_ms,
        session_id,
        password: password.to_vec(),
        read_only: Some(false),
    }
    .encode(&mut w);
    frame(&w.into_bytes())
}

/// The ConnectResponse a handshake was answered with.
pub fn connect_response(payload: &[u8]) -> warden_proto::ConnectResponse {
    use warden_proto::Record;
    warden_proto::ConnectResponse::decode(&mut warden_proto::Reader::new(payload))
        .expect("a ConnectResponse")
}

/// Reads exactly one frame's payload from a raw socket.
pub fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut payload)?;
    Ok(payload)
}

/// Whether the server closed the socket (EOF) within the read timeout.
pub fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {timeout:?} waiting for {what}");
}

/// The output of a child that must end by itself within `limit`; one that does not is killed
/// (by its pid) and the test fails, naming `what`.
pub fn output_within(mut child: Child, limit: Duration, what: &str) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
