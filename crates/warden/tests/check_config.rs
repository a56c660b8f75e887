//! `warden server --check-config`: the configuration checked as a start checks it, without
//! listening anywhere or writing anything.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

fn check(zoo_cfg: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["server", "--check-config", "--zoo-cfg"])
        .arg(zoo_cfg)
        .output()
        .expect("running warden")
}

fn write_zoo_cfg(dir: &Path, body: &str) -> std::path::PathBuf {
    let path = dir.join("zoo.cfg");
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn a_good_zoo_cfg_exits_0_prints_the_config_and_binds_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    // Held by the test: a start would fail on it, a check never tries it.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let cfg = write_zoo_cfg(
        dir.path(),
        &format!(
            "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n",
            data_dir.display()
        ),
    );
    let out = check(&cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("client_listen = \"127.0.0.1:{port}\"")),
        "{stdout}"
    );
    assert!(stderr.contains("configuration is good"), "{stderr}");
    assert!(!data_dir.exists(), "the check made the data directory");
}

#[test]
fn a_bad_value_exits_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_zoo_cfg(
        dir.path(),
        &format!(
            "dataDir={}\nclientPort=2181\ntickTime=soon\n",
            dir.path().join("data").display()
        ),
    );
    let out = check(&cfg);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("zoo.cfg:3: tickTime=soon"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn an_unknown_key_is_a_warning_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_zoo_cfg(
        dir.path(),
        &format!(
            "dataDir={}\nclientPort=2181\nnoSuchKey=1\n",
            dir.path().join("data").display()
        ),
    );
    let out = check(&cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("WARN") && stderr.contains("zoo.cfg:3: noSuchKey"),
        "{stderr}"
    );
}

#[test]
fn a_member_without_myid_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_zoo_cfg(
        dir.path(),
        &format!(
            "dataDir={}\nclientPort=2181\nserver.1=127.0.0.1:2888:3888\n\
             server.2=127.0.0.1:2889:3889\n",
            dir.path().join("data").display()
        ),
    );
    let out = check(&cfg);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("myid"));
}

#[test]
fn a_data_dir_under_a_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let cfg = write_zoo_cfg(
        dir.path(),
        &format!("dataDir={}\nclientPort=2181\n", file.join("data").display()),
    );
    let out = check(&cfg);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot keep data in"), "{stderr}");
}
