//! `warden cli` as a user meets it, with real processes: a `warden server` on a free loopback
//! port, the `warden cli` binary driven by arguments (one command, its output, its errors and
//! exit code), by a stdin script (watch events printed as they come), in a real terminal (tmux:
//! prompt, line editing, completion of a command and of a path, history recall, a watch event),
//! and side by side with the real zkCli 3.9.5 on the same server where the texts must match.
//! Every process is bounded in time and killed by its pid.

mod support;

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::cluster::{Cluster, System};
use support::pki::Pki;
use support::servers::{free_port, install_zookeeper, repo_root};
use support::warden::Warden;

/// How long one `warden cli` (or zkCli) run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the tests wait for a line of output to appear.
const OUTPUT_TIMEOUT: Duration = Duration::from_secs(20);

struct Run {
    stdout: String,
    stderr: String,
    code: i32,
}

/// A child killed by pid if it is still running when the guard drops.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs `command` to its end (killed after [`RUN_TIMEOUT`]), stdin from `input`.
fn run(mut command: Command, input: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    command
        .stdin(Stdio::piped())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap());
    let mut child = Guard(command.spawn().expect("starting the client"));
    let mut stdin = child.0.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "{command:?} did not end within {RUN_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        stdout: fs::read_to_string(out).unwrap(),
        stderr: fs::read_to_string(err).unwrap(),
        code: status.code().unwrap_or(-1),
    }
}

fn warden_cli(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command.arg("cli").env("HOME", home);
    command
}

/// `warden cli -server <server> <args>`.
fn cli(server: &Warden, args: &str) -> Run {
    let home = tempfile::tempdir().unwrap();
    let mut command = warden_cli(home.path());
    command
        .args(["-server", &server.connect_string()])
        .args(args.split_whitespace());
    run(command, "")
}

/// `warden cli -server <server>` with `script` on stdin.
fn script(server: &Warden, script: &str) -> Run {
    let home = tempfile::tempdir().unwrap();
    let mut command = warden_cli(home.path());
    command.args(["-server", &server.connect_string()]);
    run(command, script)
}

#[track_caller]
fn ok(run: &Run, stdout: &str) {
    assert_eq!(
        (run.stdout.as_str(), run.stderr.as_str(), run.code),
        (stdout, "", 0)
    );
}

#[track_caller]
fn fails(run: &Run, stderr: &str) {
    assert_eq!(
        (run.stdout.as_str(), run.stderr.as_str(), run.code),
        ("", stderr, 1)
    );
}

/// The Stat lines that do not change between reads: everything but the times and zxids.
fn stable_stat(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.contains("Zxid") && !l.contains("time = "))
        .collect()
}

#[test]
fn znode_commands_print_what_zkcli_prints() {
    let server = Warden::start("extendedTypesEnabled=true");
    ok(&cli(&server, "create /a hello"), "Created /a\n");
    ok(&cli(&server, "get /a"), "hello\n");
    let got = cli(&server, "get -s /a");
    assert_eq!(got.code, 0);
    assert_eq!(
        stable_stat(&got.stdout),
        [
            "hello",
            "cversion = 0",
            "dataVersion = 0",
            "aclVersion = 0",
            "ephemeralOwner = 0x0",
            "dataLength = 5",
            "numChildren = 0"
        ]
    );
    assert!(got.stdout.contains("\ncZxid = 0x"), "{}", got.stdout);
    assert!(
        got.stdout.contains(" UTC 20"),
        "a java.util.Date: {}",
        got.stdout
    );
    ok(&cli(&server, "set /a bye"), "");
    let set = cli(&server, "set -s /a again");
    assert!(
        set.stdout.contains("dataVersion = 2\n") && set.stdout.contains("dataLength = 5\n"),
        "{}",
        set.stdout
    );
    // zkCli's flags may follow the arguments.
    let stat = cli(&server, "stat /a");
    assert_eq!(stable_stat(&stat.stdout)[1], "dataVersion = 2");

    ok(
        &cli(&server, "create -s /a/s- x"),
        "Created /a/s-0000000000\n",
    );
    ok(
        &cli(&server, "create -s /a/s- x"),
        "Created /a/s-0000000001\n",
    );
    ok(&cli(&server, "create -c /box"), "Created /box\n");
    ok(&cli(&server, "create -t 60000 /ttl t"), "Created /ttl\n");
    ok(&cli(&server, "create /a/b b"), "Created /a/b\n");
    ok(&cli(&server, "ls /a"), "[b, s-0000000000, s-0000000001]\n");
    let ls = cli(&server, "ls -s /a");
    assert!(
        ls.stdout
            .starts_with("[b, s-0000000000, s-0000000001]\ncZxid = 0x"),
        "{}",
        ls.stdout
    );
    assert!(ls.stdout.contains("numChildren = 3\n"));
    ok(
        &cli(&server, "ls -R /a"),
        "/a\n/a/b\n/a/s-0000000000\n/a/s-0000000001\n",
    );
    ok(&cli(&server, "getAllChildrenNumber /a"), "3\n");
    ok(&cli(&server, "set -b /a/b aGk="), "");
    ok(&cli(&server, "get /a/b"), "hi\n");
    ok(&cli(&server, "get -b /a/b"), "aGk=\n");
    ok(&cli(&server, "sync /a"), "Sync is OK\n");

    ok(&cli(&server, "delete -v 0 /a/s-0000000000"), "");
    fails(&cli(&server, "delete /a"), "Node not empty: /a\n");
    ok(&cli(&server, "deleteall /a"), "");
    fails(&cli(&server, "stat /a"), "Node does not exist: /a\n");
    // In a script, quotes group words as in zkCli.
    ok(
        &script(&server, "create /q 'two words'\nget \"/q\"\n"),
        "Created /q\ntwo words\n",
    );
}

#[test]
fn errors_go_to_stderr_with_a_nonzero_exit_code() {
    let server = Warden::start("");
    fails(
        &cli(&server, "get /missing"),
        "Node does not exist: /missing\n",
    );
    ok(&cli(&server, "create /e e"), "Created /e\n");
    fails(&cli(&server, "create /e e"), "Node already exists: /e\n");
    fails(
        &cli(&server, "set -v 7 /e x"),
        "version No is not valid : /e\n",
    );
    fails(
        &cli(&server, "create /missing/child"),
        "Node does not exist: /missing/child\n",
    );
    fails(&cli(&server, "ls e"), "Path must start with / character\n");
    fails(&cli(&server, "get"), "get [-s] [-w] [-b] [-x] path\n");
    fails(&cli(&server, "ls -x /"), "Unrecognized option: -x\n");
    fails(
        &cli(&server, "create -t 10 -e /t"),
        "TTLs cannot be used with Ephemeral znodes\n",
    );
    fails(
        &cli(&server, "removewatches /e"),
        "KeeperErrorCode = No such watcher for /e\n",
    );
    // What the zookeeper-client crate cannot express is refused, not faked.
    fails(
        &cli(&server, "removewatches -l /e"),
        "removewatches -l is not supported: the zookeeper-client crate cannot remove a watch locally only\n",
    );
    // -r (read-only servers allowed) connects to a writable server as well.
    ok(&cli(&server, "-r ls /e"), "[]\n");
    ok(&cli(&server, "create -e /e/eph"), "Created /e/eph\n");
    // The one-shot session ended, and its ephemeral with it.
    fails(
        &cli(&server, "stat /e/eph"),
        "Node does not exist: /e/eph\n",
    );
    // Ephemerals cannot have children.
    let eph = script(&server, "create -e /e/eph2\ncreate /e/eph2/c\n");
    assert_eq!(eph.stdout, "Created /e/eph2\n");
    assert_eq!(eph.stderr, "Ephemerals cannot have children: /e/eph2/c\n");
    assert_eq!(eph.code, 1, "a script's exit code is its last command's");

    let unknown = cli(&server, "frobnicate /");
    assert_eq!(unknown.code, 127, "zkCli's code for an unknown command");
    assert!(
        unknown.stderr.ends_with("Command not found frobnicate\n"),
        "{}",
        unknown.stderr
    );
    assert!(
        unknown.stderr.contains("\tgetAllChildrenNumber path\n"),
        "the usage: {}",
        unknown.stderr
    );

    // No server there: the connection fails within -timeout, non-zero.
    let home = tempfile::tempdir().unwrap();
    let mut command = warden_cli(home.path());
    let port = support::servers::free_port();
    command.args([
        "-server",
        &format!("127.0.0.1:{port}"),
        "-timeout",
        "1500",
        "ls",
        "/",
    ]);
    let refused = run(command, "");
    assert_eq!((refused.code, refused.stdout.as_str()), (1, ""));
    assert!(
        refused
            .stderr
            .starts_with(&format!("Unable to connect to 127.0.0.1:{port}")),
        "{}",
        refused.stderr
    );
}

#[test]
fn acls_auth_and_sessions() {
    let server = Warden::start("");
    ok(&cli(&server, "getAcl /"), "'world,'anyone\n: cdrwa\n");
    let authed = script(
        &server,
        "addauth digest alice:secret\ncreate /p data auth::cdrwa\ngetAcl /p\nwhoami\ncreate -e /p/e\ngetEphemerals /p\n",
    );
    assert_eq!(authed.stderr, "");
    assert_eq!(
        authed.stdout,
        "Created /p\n'digest,'alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=\n: cdrwa\n\
         Auth scheme: User\ndigest: alice\nip: 127.0.0.1\nCreated /p/e\n[/p/e]\n"
    );
    fails(&cli(&server, "get /p"), "Insufficient permission : /p\n");
    ok(
        &cli(&server, "create /open x world:anyone:ra"),
        "Created /open\n",
    );
    ok(&cli(&server, "getAcl /open"), "'world,'anyone\n: ra\n");
    fails(
        &cli(&server, "set /open y"),
        "Insufficient permission : /open\n",
    );
    let set_acl = cli(&server, "setAcl -s /open world:anyone:cdrwa");
    assert!(
        set_acl.stdout.contains("aclVersion = 1\n"),
        "{}",
        set_acl.stdout
    );
    ok(&cli(&server, "create /open/k x"), "Created /open/k\n");
    ok(&cli(&server, "setAcl -R /open world:anyone:ra"), "");
    ok(&cli(&server, "getAcl /open/k"), "'world,'anyone\n: ra\n");
    fails(
        &cli(&server, "setAcl /open world:anyone"),
        "world:anyone does not have the form scheme:id:perm\n",
    );
}

#[test]
fn quotas_as_zkcli_writes_them() {
    let server = Warden::start("enforceQuota=true");
    ok(&cli(&server, "create /q q"), "Created /q\n");
    ok(&cli(&server, "setquota -n 3 /q"), "");
    let list = cli(&server, "listquota /q");
    assert_eq!(
        (list.stdout.as_str(), list.stderr.as_str()),
        (
            "Output quota for /q count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=-1\nOutput stat for /q count=1,bytes=1\n",
            "absolute path is /zookeeper/quota/q/zookeeper_limits\n"
        )
    );
    for n in ["a", "b", "c"] {
        ok(
            &cli(&server, &format!("create /q/{n} {n}")),
            &format!("Created /q/{n}\n"),
        );
    }
    ok(
        &cli(&server, "setquota -N 5 /q"),
        "[Warning]: the count quota you create is less than the existing count:4\n",
    );
    ok(&cli(&server, "create /q/d d"), "Created /q/d\n");
    fails(
        &cli(&server, "create /q/e e"),
        "Quota has exceeded : /q/e\n",
    );
    fails(
        &cli(&server, "setquota -n 2 /q/a"),
        "/q/a has a parent /q which has a quota\n",
    );
    ok(&cli(&server, "delquota -N /q"), "");
    let list = cli(&server, "listquota /q");
    assert!(
        list.stdout.starts_with(
            "Output quota for /q count=3,bytes=-1=;byteHardLimit=-1;countHardLimit=-1\n"
        )
    );
    ok(&cli(&server, "delquota /q"), "");
    let gone = cli(&server, "listquota /q");
    assert_eq!((gone.stdout.as_str(), gone.code), ("", 1));
    assert!(
        gone.stderr.ends_with("quota for /q does not exist.\n"),
        "{}",
        gone.stderr
    );
    ok(&cli(&server, "ls /zookeeper/quota"), "[]\n");
}

#[test]
fn keeper_client_helpers_and_four_letter_words() {
    let server = Warden::start("");
    let mut lines =
        String::from("create /f\ncreate /f/big\ncreate /f/small\ncreate /f/small/one\n");
    for i in 0..4 {
        lines += &format!("create /f/big/c{i}\n");
    }
    assert_eq!(script(&server, &lines).code, 0);
    ok(&cli(&server, "find_super_nodes 2 /f"), "/f\t2\n/f/big\t4\n");
    ok(&cli(&server, "find_super_nodes 3"), "/\t3\n/f/big\t4\n");
    // Subtree sizes, the node itself included: /f 8, /f/big 5, /f/small 2, leaves 1.
    ok(
        &cli(&server, "find_big_family /f 3"),
        "/f\t8\n/f/big\t5\n/f/small\t2\n",
    );
    ok(
        &cli(&server, "find_big_family /f/small"),
        "/f/small\t2\n/f/small/one\t1\n",
    );

    ok(&cli(&server, "set /f/big/c0 payload"), "");
    ok(&cli(&server, "cp /f/big/c0 /f/copy"), "");
    ok(&cli(&server, "get /f/copy"), "payload\n");
    ok(&cli(&server, "mv /f/copy /f/moved"), "");
    ok(&cli(&server, "get /f/moved"), "payload\n");
    fails(
        &cli(&server, "stat /f/copy"),
        "Node does not exist: /f/copy\n",
    );
    fails(
        &cli(&server, "mv /f/big /f/elsewhere"),
        "Node not empty: /f/big\n",
    );
    ok(&cli(&server, "ls /f"), "[big, moved, small]\n");
    fails(
        &cli(&server, "cp /f/moved /f/big/c1"),
        "Node already exists: /f/big/c1\n",
    );
    ok(&cli(&server, "touch /f/moved"), "");
    ok(&cli(&server, "get /f/moved"), "payload\n");
    ok(&cli(&server, "touch /f/new"), "");
    ok(&cli(&server, "get /f/new"), "\n");

    ok(&cli(&server, "flwc ruok"), "imok\n");
    let srvr = cli(&server, "4lw srvr");
    assert!(srvr.stdout.contains("Mode: standalone"), "{}", srvr.stdout);
    let named = cli(&server, &format!("flwc isro {}", server.connect_string()));
    ok(&named, "rw\n");
}

/// keeper-client's `cpr` and `mvr`: a subtree copied or moved in one multi, data and ACLs kept;
/// refused, with nothing written, when the destination exists or the subtree is too big.
#[test]
fn cpr_and_mvr_copy_and_move_subtrees() {
    let server = Warden::start("");
    let setup = "create /src root\ncreate /src/a a\ncreate /src/a/deep d\n\
                 create /src/b b world:anyone:r\ncreate /taken\n";
    assert_eq!(script(&server, setup).code, 0);
    ok(&cli(&server, "cpr /src /copy"), "");
    ok(
        &cli(&server, "ls -R /copy"),
        "/copy\n/copy/a\n/copy/b\n/copy/a/deep\n",
    );
    ok(&cli(&server, "get /copy/a/deep"), "d\n");
    ok(&cli(&server, "getAcl /copy/b"), "'world,'anyone\n: r\n");
    ok(&cli(&server, "get /src"), "root\n");

    fails(
        &cli(&server, "cpr /src /taken"),
        "Node already exists: /taken\n",
    );
    fails(
        &cli(&server, "cpr /src /src/inner"),
        "Cannot copy /src into its own subtree: /src/inner\n",
    );
    fails(
        &cli(&server, "cpr /none /x"),
        "Node does not exist: /none\n",
    );
    fails(
        &cli(&server, "mvr /src /no/parent"),
        "Node does not exist: /no/parent\n",
    );
    ok(
        &cli(&server, "ls /"),
        "[copy, keeper, src, taken, zookeeper]\n",
    );

    ok(&cli(&server, "mvr /src /moved"), "");
    fails(&cli(&server, "stat /src"), "Node does not exist: /src\n");
    ok(
        &cli(&server, "ls -R /moved"),
        "/moved\n/moved/a\n/moved/b\n/moved/a/deep\n",
    );
    ok(&cli(&server, "get /moved/a"), "a\n");

    // Bounded: 1,001 nodes are refused before anything is written.
    let mut lines = String::from("create /wide\n");
    for i in 0..1000 {
        lines += &format!("create /wide/n{i}\n");
    }
    assert_eq!(script(&server, &lines).code, 0);
    fails(
        &cli(&server, "cpr /wide /wide2"),
        "/wide has more than 1000 nodes: too many to copy in one multi\n",
    );
    // And by bytes: two nodes of 600,000 bytes each.
    let big = "x".repeat(600_000);
    assert_eq!(
        script(
            &server,
            &format!("create /big\ncreate /big/one {big}\ncreate /big/two {big}\n")
        )
        .code,
        0
    );
    fails(
        &cli(&server, "mvr /big /big2"),
        "/big's subtree needs a multi of more than 1000000 bytes: too big to copy in one (the \
         server's jute.maxbuffer is 1 MiB by default)\n",
    );
    ok(
        &cli(&server, "ls /"),
        "[big, copy, keeper, moved, taken, wide, zookeeper]\n",
    );
}

/// keeper-client's `--secure` and PEM files against a server with a secure client port (zoo.cfg
/// as in tests/tls.rs): the client certificate becomes the session's x509 identity.
#[test]
fn tls_with_keeper_client_options() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::empty(dir.path());
    pki.ca("ca", "Test CA");
    pki.ca("other-ca", "Other CA");
    fs::write(
        dir.path().join("server.ext"),
        "subjectAltName=IP:127.0.0.1\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("client.ext"),
        "extendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    pki.leaf("server", "ca", "/CN=localhost", Some("server.ext"), "30");
    pki.leaf(
        "client",
        "ca",
        "/O=Warden/CN=client",
        Some("client.ext"),
        "30",
    );
    let secure = free_port();
    let server = Warden::start(&format!(
        "secureClientPort={secure}\nsecureClientPortAddress=127.0.0.1\n\
         serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         ssl.keyStore.location={}\nssl.trustStore.location={}\n\
         authProvider.1=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n",
        pki.path("server-bundle.pem").display(),
        pki.path("ca.pem").display(),
    ));
    let home = tempfile::tempdir().unwrap();
    let tls_cli = |options: &[&str], args: &str| {
        let mut command = warden_cli(home.path());
        command
            .args([
                "-server",
                &format!("127.0.0.1:{secure}"),
                "-timeout",
                "3000",
            ])
            .args(options)
            .args(args.split_whitespace());
        run(command, "")
    };
    let (ca, other_ca) = (pki.path("ca.pem"), pki.path("other-ca.pem"));
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    let (ca, other_ca, cert, key) = (
        ca.to_str().unwrap(),
        other_ca.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
    );
    let mutual = [
        "--secure",
        "--tls-ca-file",
        ca,
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
    ];
    let whoami = tls_cli(&mutual, "whoami");
    ok(&whoami, &whoami.stdout);
    assert!(
        whoami.stdout.contains("x509: CN=client,O=Warden\n"),
        "{}",
        whoami.stdout
    );
    ok(&tls_cli(&mutual, "create /t x"), "Created /t\n");
    // `-s` is the short form; without a client certificate the server (ssl.clientAuth=need, its
    // default) refuses, and the message says where to look.
    fails(
        &tls_cli(&["-s", "--tls-ca-file", ca], "ls /"),
        &format!(
            "Unable to connect to 127.0.0.1:{secure}: no session within 3000 ms (over TLS: is \
             the port a secure one, --tls-ca-file the CA of the server's certificate, a client \
             certificate needed?)\n"
        ),
    );
    fails(
        &tls_cli(&["--secure"], "ls /"),
        "--secure needs --tls-ca-file FILE, the CA (PEM) of the server's certificate: the \
         system's trust store is not read\n",
    );
    let missing = dir.path().join("missing.pem");
    let missing = tls_cli(&["-s", "--tls-ca-file", missing.to_str().unwrap()], "ls /");
    assert!(
        missing.code == 1
            && missing.stderr.starts_with("--tls-ca-file ")
            && missing.stdout.is_empty(),
        "{}",
        missing.stderr
    );
    fails(
        &tls_cli(
            &["-s", "--tls-ca-file", ca, "--tls-cert-file", cert],
            "ls /",
        ),
        "--tls-cert-file and --tls-key-file go together\n",
    );
    // A CA that did not sign the server's certificate: refused, said so after the timeout.
    fails(
        &tls_cli(&["-s", "--tls-ca-file", other_ca], "ls /"),
        &format!(
            "Unable to connect to 127.0.0.1:{secure}: no session within 3000 ms (over TLS: is \
             the port a secure one, --tls-ca-file the CA of the server's certificate, a client \
             certificate needed?)\n"
        ),
    );
    // The plain port still answers plain clients.
    ok(&cli(&server, "get /t"), "x\n");
}

/// `config` and `reconfig` against a 3-server Warden ensemble.
#[test]
fn config_and_reconfig_on_an_ensemble() {
    let cluster = Cluster::start(System::Warden, 3, 0, "reconfigEnabled=true");
    let home = tempfile::tempdir().unwrap();
    let connect = cluster.member_connect_string(0);
    let on_cluster = |args: &str, input: &str| {
        let mut command = warden_cli(home.path());
        command
            .args(["-server", &connect])
            .args(args.split_whitespace());
        run(command, input)
    };
    let config = on_cluster("config", "");
    assert_eq!(config.code, 0, "{}", config.stderr);
    let lines: Vec<&str> = config.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "three servers and the version: {}",
        config.stdout
    );
    for (i, member) in cluster.members.iter().enumerate() {
        assert!(
            lines[i].starts_with(&format!("server.{}=", i + 1)),
            "{}",
            config.stdout
        );
        assert!(
            lines[i].ends_with(&format!(";127.0.0.1:{}", member.client_port)),
            "{}",
            config.stdout
        );
    }
    let version = lines[3].strip_prefix("version=").expect("a version line");
    let clients: Vec<String> = cluster
        .members
        .iter()
        .map(|m| format!("127.0.0.1:{}", m.client_port))
        .collect();
    ok(
        &on_cluster("config -c", ""),
        &format!("{version} {}\n", clients.join(",")),
    );

    let refused = on_cluster("reconfig -remove 3", "");
    assert_eq!(
        (refused.code, refused.stderr.as_str()),
        (1, "Insufficient permission : \n")
    );
    let wrong = format!("{:x}", i64::from_str_radix(version, 16).unwrap() + 1);
    let stale = on_cluster(
        "",
        &format!("addauth digest super:test\nreconfig -remove 3 -v {wrong}\n"),
    );
    assert_eq!(stale.stderr, "version No is not valid : \n");
    let done = on_cluster(
        "",
        &format!("addauth digest super:test\nreconfig -remove 3 -v {version}\n"),
    );
    assert_eq!((done.code, done.stderr.as_str()), (0, ""));
    let committed: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(committed[0], "Committed new configuration:");
    assert!(
        committed[1].starts_with("server.1=") && committed[2].starts_with("server.2="),
        "{}",
        done.stdout
    );
    assert!(
        committed[3].starts_with("version=") && !done.stdout.contains("server.3="),
        "{}",
        done.stdout
    );
}

#[test]
fn close_and_connect_in_a_script() {
    let server = Warden::start("");
    let other = Warden::start("");
    ok(&cli(&other, "create /elsewhere"), "Created /elsewhere\n");
    let lines = format!(
        "create -e /mine\nclose\nls /\nconnect {}\nls /\nversion\n",
        other.connect_string()
    );
    let run = script(&server, &lines);
    assert_eq!(
        run.stdout,
        format!(
            "Created /mine\n\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null zxid: -1\n\
             [elsewhere, keeper, zookeeper]\nWarden cli version: {}\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(run.stderr, "Not connected\n");
    // close ended the session at once: its ephemeral went with it.
    ok(&cli(&server, "ls /"), "[keeper, zookeeper]\n");
}

/// A stdin script whose watches fire while it runs: zkCli's `WATCHER::` and `WatchedEvent` lines.
#[test]
fn scripts_print_watch_events() {
    let server = Warden::start("");
    ok(&cli(&server, "create /w v"), "Created /w\n");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut command = warden_cli(dir.path());
    command
        .args(["-server", &server.connect_string()])
        .stdin(Stdio::piped())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(dir.path().join("err")).unwrap());
    let mut child = Guard(command.spawn().unwrap());
    let mut stdin = child.0.stdin.take().unwrap();
    let output = || fs::read_to_string(&out).unwrap_or_default();
    let err_output = || fs::read_to_string(dir.path().join("err")).unwrap_or_default();
    let mut send = |line: &str| writeln!(stdin, "{line}").unwrap();

    send("get -w /w");
    wait_for(&output, "v\n");
    ok(&cli(&server, "set /w changed"), "");
    wait_for(
        &output,
        "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:/w zxid: ",
    );
    send("ls -w /w");
    ok(&cli(&server, "create /w/kid"), "Created /w/kid\n");
    wait_for(&output, "type:NodeChildrenChanged path:/w zxid: ");
    send("stat -w /later");
    wait_for(&err_output, "Node does not exist: /later\n");
    ok(&cli(&server, "create /later"), "Created /later\n");
    wait_for(&output, "type:NodeCreated path:/later zxid: ");
    send("addWatch -m PERSISTENT_RECURSIVE /w");
    send("sync /w");
    wait_for(&output, "Sync is OK\n");
    ok(&cli(&server, "create /w/kid/deep"), "Created /w/kid/deep\n");
    wait_for(&output, "type:NodeCreated path:/w/kid/deep zxid: ");
    ok(&cli(&server, "set /w/kid/deep d"), "");
    wait_for(&output, "type:NodeDataChanged path:/w/kid/deep zxid: ");
    send("removewatches /w");
    send("get -w /w");
    send("removewatches /w -d");
    send("history");
    wait_for(&output, "\n7 - removewatches /w -d\n8 - history\n");
    send("redo 7");
    send("printwatches off");
    send("quit");
    drop(stdin);
    let deadline = Instant::now() + RUN_TIMEOUT;
    while child.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "quit ends the script");
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(&cli(&server, "set /w/kid/deep e"), "");
    let text = output();
    assert_eq!(
        err_output(),
        "Node does not exist: /later\nKeeperErrorCode = No such watcher for /w\n",
        "stat -w on a missing node fails and watches; redo 7 finds no watch left to remove"
    );
    assert_eq!(text.matches("WatchedEvent").count(), 5, "{text}");
}

#[track_caller]
fn wait_for(output: &dyn Fn() -> String, want: &str) {
    let deadline = Instant::now() + OUTPUT_TIMEOUT;
    while !output().contains(want) {
        assert!(Instant::now() < deadline, "no {want:?} in:\n{}", output());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// zkCli 3.9.5 and `warden cli` on the same server print the same for the same command.
#[test]
fn same_output_as_zkcli() {
    install_zookeeper();
    let server = Warden::start("");
    let setup = "create /cmp data\ncreate /cmp/a\ncreate /cmp/b bee\ncreate /cmp/a/x\n\
                 create /acl d world:anyone:cdr\n";
    assert_eq!(script(&server, setup).code, 0);
    let lib = std::env::var_os("WARDEN_CACHE")
        .map_or_else(|| repo_root().join(".cache"), PathBuf::from)
        .join("zookeeper-3.9.5/lib/*");
    for args in [
        "get -s /cmp",
        "ls -s /cmp",
        "ls -R /cmp",
        "stat /cmp/b",
        "getAcl -s /acl",
        "getAllChildrenNumber /cmp",
        "getEphemerals /cmp",
        "sync /cmp",
        "whoami",
        "get /missing",
        "create /cmp",
        "delete /cmp",
        "delete -v 3 /cmp/b",
        "set /nothing x",
        "ls nothing",
        "config -s",
        "reconfig -remove 3",
        "create -t 0 /t0",
        "delquota /none",
        "printwatches",
        "redo 3",
        "get -x /cmp/b",
        "get -b /cmp/b",
        "get -x /cmp/a",
    ] {
        let mut zkcli = Command::new("java");
        zkcli
            .args(["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-Duser.timezone=UTC")
            .arg("-cp")
            .arg(&lib)
            .args([
                "org.apache.zookeeper.ZooKeeperMain",
                "-server",
                &server.connect_string(),
            ])
            .args(args.split_whitespace());
        let theirs = run(zkcli, "");
        let ours = cli(&server, args);
        // zkCli's one-shot output also has its banner, its session event and a log line.
        let banner = |l: &&str| {
            !l.is_empty()
                && !l.starts_with("Connecting to ")
                && *l != "WATCHER::"
                && !l.starts_with("WatchedEvent state:SyncConnected type:None")
                && !l.contains("ServiceUtils - Exiting JVM")
        };
        let their_out: Vec<&str> = theirs.stdout.lines().filter(banner).collect();
        let their_err: Vec<&str> = theirs.stderr.lines().filter(banner).collect();
        let our_out: Vec<&str> = ours.stdout.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(our_out, their_out, "stdout of `{args}`");
        assert_eq!(
            ours.stderr.lines().collect::<Vec<_>>(),
            their_err,
            "stderr of `{args}`"
        );
        assert_eq!(ours.code, theirs.code, "exit code of `{args}`");
    }
}

/// tmux: a private server (its own socket), killed by its pid when the test ends.
struct Tmux {
    socket: String,
    pid: Option<u32>,
}

impl Tmux {
    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.socket]);
        command
    }

    fn start(shell_command: &str) -> Tmux {
        ensure_tmux();
        let socket = format!("warden-cli-test-{}", std::process::id());
        let mut tmux = Tmux { socket, pid: None };
        let started = tmux
            .command()
            .args([
                "new-session",
                "-d",
                "-s",
                "cli",
                "-x",
                "160",
                "-y",
                "50",
                shell_command,
            ])
            .status()
            .unwrap();
        assert!(started.success(), "tmux new-session");
        let pid = tmux
            .command()
            .args(["display-message", "-p", "#{pid}"])
            .output()
            .unwrap();
        tmux.pid = String::from_utf8_lossy(&pid.stdout).trim().parse().ok();
        assert!(tmux.pid.is_some(), "the tmux server's pid");
        tmux
    }

    fn keys(&self, keys: &[&str]) {
        let status = self
            .command()
            .args(["send-keys", "-t", "cli"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success(), "tmux send-keys {keys:?}");
    }

    /// Literal text (`-l`: no key names).
    fn type_text(&self, text: &str) {
        let status = self
            .command()
            .args(["send-keys", "-t", "cli", "-l", text])
            .status()
            .unwrap();
        assert!(status.success(), "tmux send-keys -l {text:?}");
    }

    fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", "cli", "-S", "-500"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[track_caller]
    fn wait_for(&self, want: &str) {
        let deadline = Instant::now() + OUTPUT_TIMEOUT;
        while !self.screen().contains(want) {
            assert!(
                Instant::now() < deadline,
                "no {want:?} on the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn running(&self) -> bool {
        self.command()
            .args(["has-session", "-t", "cli"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// tmux from Debian's package when it is missing (CI machines start without it); apt-get update
/// only when the install fails without it.
fn ensure_tmux() {
    let present = || {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if present() {
        return;
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "tmux"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !install() {
        let updated = Command::new("apt-get").args(["update", "-qq"]).output();
        assert!(
            updated.is_ok_and(|o| o.status.success()),
            "apt-get update (to install tmux)"
        );
        assert!(install(), "apt-get install tmux");
    }
    assert!(present(), "tmux installed");
}

#[test]
fn interactive_in_a_real_terminal() {
    let server = Warden::start("");
    ok(
        &cli(&server, "create /tmuxnode hello"),
        "Created /tmuxnode\n",
    );
    let home = tempfile::tempdir().unwrap();
    let shell_command = format!(
        "env HOME={} TERM=xterm {} cli -server {}",
        home.path().display(),
        env!("CARGO_BIN_EXE_warden"),
        server.connect_string()
    );
    let tmux = Tmux::start(&shell_command);
    // capture-pane drops the prompt's trailing blank.
    let prompt = |n: usize| format!("[zk: {}(CONNECTED) {n}]", server.connect_string());
    tmux.wait_for(&format!("Connecting to {}", server.connect_string()));
    tmux.wait_for("WatchedEvent state:SyncConnected type:None path:null zxid: -1");
    tmux.wait_for(&prompt(0));

    // Completion of a command name, then of a path listed from the server.
    tmux.type_text("getAllCh");
    tmux.keys(&["Tab"]);
    tmux.wait_for("] getAllChildrenNumber");
    tmux.type_text("/tmuxn");
    tmux.keys(&["Tab"]);
    tmux.wait_for("getAllChildrenNumber /tmuxnode");
    tmux.keys(&["Enter"]);
    tmux.wait_for(&prompt(1));

    // Two children share a prefix: Tab completes it, a second Tab lists them.
    ok(
        &cli(&server, "create /tmuxnode/alpha1"),
        "Created /tmuxnode/alpha1\n",
    );
    ok(
        &cli(&server, "create /tmuxnode/alpha2"),
        "Created /tmuxnode/alpha2\n",
    );
    tmux.type_text("ls /tmuxnode/a");
    tmux.keys(&["Tab"]);
    tmux.wait_for("ls /tmuxnode/alpha");
    tmux.keys(&["Tab"]);
    tmux.wait_for("alpha1  alpha2");
    tmux.keys(&["C-u"]);

    // Line editing: a typo fixed with Backspace, a missing letter put in after C-a.
    tmux.type_text("et /tmuxnodeXX");
    tmux.keys(&["BSpace", "BSpace", "C-a"]);
    tmux.type_text("g");
    tmux.keys(&["Enter"]);
    tmux.wait_for(&format!("{} get /tmuxnode\nhello\n", prompt(1)));

    // History recall: Up brings the last line back.
    tmux.keys(&["Up"]);
    tmux.wait_for(&format!("{} get /tmuxnode", prompt(2)));
    tmux.keys(&["Enter"]);
    tmux.wait_for(&prompt(3));
    assert_eq!(
        tmux.screen().matches("\nhello\n").count(),
        2,
        "{}",
        tmux.screen()
    );

    // A watch event, printed while the prompt waits.
    tmux.type_text("get -w /tmuxnode");
    tmux.keys(&["Enter"]);
    tmux.wait_for(&prompt(4));
    ok(&cli(&server, "set /tmuxnode changed"), "");
    tmux.wait_for("WatchedEvent state:SyncConnected type:NodeDataChanged path:/tmuxnode zxid: ");

    tmux.type_text("quit");
    tmux.keys(&["Enter"]);
    let deadline = Instant::now() + OUTPUT_TIMEOUT;
    while tmux.running() {
        assert!(
            Instant::now() < deadline,
            "quit ends the shell:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let history = fs::read_to_string(home.path().join(".warden_cli_history")).unwrap();
    assert!(
        history.contains("get -w /tmuxnode\n")
            && history.contains("getAllChildrenNumber /tmuxnode\n"),
        "{history}"
    );
}
